"""TF 1.x loop bodies in the golden capture: the files TensorFlow's debug watches write once per
iteration (:func:`watch_files`) and the timestamp order of a step whose ops ran in loops
(:func:`execution_ranks`). Used by :mod:`npu_dump_hook.train.capture`; see docs/golden-capture.md.
"""
import os
import re
from typing import Any, Dict, List, Tuple

from ._capture_plan import while_or_cond

__all__ = ["watch_files", "execution_ranks", "outer_while"]

_WATCH_FILE = re.compile(r"(.+)_([0-9]+)_DebugIdentity_([0-9]+)\Z")
_DEVICE_FOLDER = "_tfdbg_device_"


def watch_files(watch_root: str) -> Dict[str, List[str]]:
    """``{tensor name: [file per iteration]}`` the loop-body watches wrote, in the order written
    (wall-clock microseconds in the name, then the name)."""
    found = {}  # type: Dict[str, List[Tuple[int, str]]]
    for folder, _, names in os.walk(watch_root):
        rel = os.path.relpath(folder, watch_root).split(os.sep)
        if not rel or not rel[0].startswith(_DEVICE_FOLDER):
            continue
        prefix = "/".join(rel[1:])
        for name in names:
            match = _WATCH_FILE.match(name)
            if match:
                tensor = "{}:{}".format(prefix + "/" + match.group(1) if prefix else match.group(1), match.group(2))
                found.setdefault(tensor, []).append((int(match.group(3)), os.path.join(folder, name)))
    return {tensor: [path for _, path in sorted(entries)] for tensor, entries in found.items()}


def execution_ranks(executed: List[Tuple[Any, bool]], watched: Dict[str, List[str]]) -> Dict[Tuple[int, int], int]:
    """``{(order, iteration): offset}``: the timestamp offsets of the step's tensors, growing with
    execution. Without loops the offset is the order. A TF 1.x loop runs iteration by iteration:
    every op of its frame (the outermost while context) at iteration k sits at the loop's first
    order, after iteration k-1 of all of them, so a loop-carried value (iteration k-1) is older
    than what reads it (iteration k), and everything after the loop is younger than its last iteration."""
    keys = []  # type: List[Tuple[Tuple[int, int, int], Tuple[int, int]]]
    starts = {}  # type: Dict[Any, int]
    for order, (op, _) in enumerate(executed):
        frame = outer_while(op)
        if frame is None:
            keys.append(((order, 0, order), (order, 0)))
            continue
        start = starts.setdefault(frame, order)
        count = max([1] + [len(watched.get(tensor.name) or ()) for tensor in op.outputs])
        keys.extend(((start, iteration, order), (order, iteration)) for iteration in range(count))
    keys.sort()
    return {pair: rank for rank, (_, pair) in enumerate(keys)}


def outer_while(op: Any) -> Any:
    """The outermost TF 1.x while context ``op`` runs in (private ``_control_flow_context``), or None."""
    if while_or_cond(op) != "while":
        return None
    context, outer = getattr(op, "_control_flow_context", None), None
    while context is not None:
        get_while = getattr(context, "GetWhileContext", None)
        if get_while is not None and get_while() is context:
            outer = context
        context = getattr(context, "outer_context", None)
    return id(outer) if outer is not None else None
