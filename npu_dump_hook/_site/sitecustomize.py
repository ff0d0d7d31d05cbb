"""Environment-only start of :mod:`npu_dump_hook.runner`, for CI wrappers that cannot change the command.

Python imports the first ``sitecustomize`` on ``sys.path`` at start-up; with this folder on
``PYTHONPATH`` it is this one::

    export PYTHONPATH=$(python -m npu_dump_hook.runner --pythonpath)${PYTHONPATH:+:$PYTHONPATH}
    NPU_DUMP_HOOK_RUN=1 python train.py ARGS

It first runs the ``sitecustomize`` this one hides (the next on ``sys.path``, if any), then,
only when ``NPU_DUMP_HOOK_RUN`` is 1/true/yes/on, calls :func:`npu_dump_hook.runner.start`:
the injection is installed (no TensorFlow imported) and the bundle path is printed at exit.
Nothing else: without the variable no npu_dump_hook module is imported. Every Python process
started with both variables set gets its own injection (each that trains, its own dump);
``python -S``/``-I`` skip it.
"""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _same(a, b):
    try:
        return os.path.samefile(a or ".", b)
    except OSError:
        return False


def _chain():
    """Run the sitecustomize that this folder hides, as Python would have."""
    rest = [entry for entry in sys.path if not _same(entry, _HERE)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)


def _start():
    if os.environ.get("NPU_DUMP_HOOK_RUN", "").strip().lower() not in ("1", "true", "yes", "on"):
        return
    package_root = os.path.dirname(os.path.dirname(_HERE))
    added = package_root not in sys.path
    if added:  # a checkout or a copy outside site-packages: importable for this import only
        sys.path.append(package_root)
    try:
        from npu_dump_hook import runner
    finally:
        if added:
            sys.path.remove(package_root)
    runner.start()


if __name__ == "sitecustomize":  # imported by site at start-up, not as a package module
    _chain()
    _start()
