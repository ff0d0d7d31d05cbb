"""The emulated NPU: writes what GE writes (Build graph text, dump tree, dump files), labelled emulated.

::

    backend.py   EmulatedNpu: the backend protocol of npu_dump_hook.backends, fed by the capture
    ge_model.py  GE ops from TF ops, and the graph text GE would write
"""
from .backend import EmulatedNpu

__all__ = ["EmulatedNpu"]
