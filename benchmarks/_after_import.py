"""For the benchmarks' ``sitecustomize`` modules (``_phase_timer``, ``_emu_step_capture``): call a
function on a module right after it is first executed, so callers that import names from it see
what that function put there. Each loads it by its file path, so the child's ``sys.path``
gains nothing."""
import importlib.abc
import importlib.machinery
import sys


class AfterImport(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder: ``then(module)`` after each module of ``names`` is executed."""

    def __init__(self, names, then):
        self.names, self.then = frozenset(names), then

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            self.then(module)
        spec.loader.exec_module = exec_module
        return spec


def install(names, then):
    sys.meta_path.insert(0, AfterImport(names, then))

