"""The runner's import hook: patch a TensorFlow module once it has loaded, never import it.

:class:`AfterImport` sits on ``sys.meta_path`` and waits for the modules it was given; when
one of them has run, it calls ``callback(name)`` once (:func:`~npu_dump_hook.runner.install`
passes :meth:`Injection.patch <npu_dump_hook.runner._inject.Injection.patch>`) and forgets it.
The loaded module keeps its own loader and spec.
"""
import functools
import importlib.util
from typing import Any, Callable, Sequence

__all__ = ["AfterImport"]


class AfterImport(object):
    """A ``sys.meta_path`` finder that calls ``callback(name)`` once a watched module has run.

    It finds the module as the other finders would and wraps the loader for that one load;
    the module keeps its own loader and spec, so nothing of the wrapping stays visible.
    """

    def __init__(self, names: Sequence[str], callback: Callable[[str], None]) -> None:
        self._names = set(names)
        self._callback = callback
        self._finding = set()  # type: set

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self._names or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _NotifyingLoader(spec.loader, functools.partial(self._loaded, fullname))
        return spec

    def _loaded(self, fullname: str) -> None:
        self._names.discard(fullname)
        self._callback(fullname)


class _NotifyingLoader(object):
    def __init__(self, loader: Any, done: Callable[[], None]) -> None:
        self._loader = loader
        self._done = done

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = module.__loader__ = self._loader
        self._loader.exec_module(module)
        self._done()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
