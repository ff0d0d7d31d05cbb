"""The emulated NPU: writes what GE writes (Build graph text, dump tree, dump files), labelled emulated.

::

    backend.py    EmulatedNpu: the backend protocol of npu_dump_hook.backends, fed by the capture;
                  PROFILES ("exact", "ascend") and faults
    npu_graph.py  the Build-graph nodes of a captured step: executed ops, fused groups, Cast/TransData
                  nodes, and which captured tensor each dumped tensor shows
    fusion.py     the GE fusion patterns of the "ascend" profile and GE's names for fused nodes
    layout.py     held dtypes and device formats (NC1HWC0, FRACTAL_Z, FRACTAL_NZ) of the "ascend" profile
    numerics.py   NPU numerics inside the TF graph (float16 Cube ops) and injected kernel faults
    ge_model.py   GE op types, _no_task rules and the graph text GE would write
    hccl.py       emulated HCCL collectives between ranks that are processes on this machine
"""
from .backend import PROFILES, EmulatedNpu

__all__ = ["EmulatedNpu", "PROFILES"]
