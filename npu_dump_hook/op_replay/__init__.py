"""Single-op replay, the TensorFlow side: rebuild a compare row's original TF op(s) from a
bundle's TF graph (``data/tf/graph.pbtxt``), feed them the NPU's dumped inputs and run them on
CPU in float32, float64 and float32 with float16 rounding between the ops (docs/compare.md,
"Replay"). ``compare`` (TF-free) drives it through :mod:`npu_dump_hook.compare.replay`, in a
subprocess (``python -m npu_dump_hook.op_replay REQUEST_DIR``) unless TensorFlow is already loaded.

::

    _nodes.py   the graph text as data: the NodeDef blocks by name (only the needed ones are parsed),
                which op types are refused and why (no py_func, no file ops, nothing stateful)
    run.py      the request (request.json + .npy inputs) -> the replayed outputs (.npy) and result.json

A bundle's graph is data: only the NodeDefs of the row's original ops (and constants feeding
them) are built, each checked first; nothing else of the graph is imported or run.
Importing this package imports no TensorFlow (``run.py`` does, through ``_tf``).
"""
__all__ = []  # type: list
