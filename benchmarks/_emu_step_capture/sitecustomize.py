"""For ``bench_emu_step.py``: in ``npu-dump-hook run``'s child (``argv[0]`` is ``-c``), pickle what
``EmulatedNpu._write_ops`` is called with (the emulator's state but its TF graph, the Build-graph
nodes, the capture's tensors with their in-memory arrays) to ``NPU_BENCH_EMU_STEP_OUT``, then let
it run. Active only when that variable is set."""
import importlib.abc
import importlib.machinery
import os
import pickle
import sys

_OUT = os.environ.get("NPU_BENCH_EMU_STEP_OUT")
_MODULE = "npu_dump_hook.emulator.backend"


def _wrap(module):
    cls = module.EmulatedNpu
    write_ops = cls._write_ops

    def saving_write_ops(self, nodes, capture, step_dir):
        state = {k: v for k, v in self.__dict__.items() if k not in ("_tf_graph", "plan")}
        tensors = {"by_name": dict(capture.by_name), "by_iteration": dict(getattr(capture, "by_iteration", None) or {})}
        with open(_OUT, "wb") as handle:
            pickle.dump({"state": state, "nodes": list(nodes), "capture": tensors}, handle, protocol=4)
        return write_ops(self, nodes, capture, step_dir)
    cls._write_ops = saving_write_ops


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _wrap(module)
        spec.loader.exec_module = exec_module
        return spec


if _OUT and sys.argv and sys.argv[0] == "-c":
    sys.meta_path.insert(0, _Finder())
