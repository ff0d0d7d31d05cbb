"""For ``bench_emu_step.py``: in ``npu-dump-hook run``'s child (``argv[0]`` is ``-c``), pickle what
``EmulatedNpu._write_ops`` is called with (the emulator's state but its TF graph, the Build-graph
nodes, the capture's tensors with their in-memory arrays) to ``NPU_BENCH_EMU_STEP_OUT``, then let
it run. Active only when that variable is set."""
import os
import pickle
import runpy
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

def _after_import():
    """The globals of benchmarks/_after_import.py, run from its path (the child's sys.path gains nothing)."""
    return runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_after_import.py"))


if _OUT and sys.argv and sys.argv[0] == "-c":
    _after_import()["install"]([_MODULE], _wrap)
