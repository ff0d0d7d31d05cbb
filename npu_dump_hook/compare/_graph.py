"""The Build graph a comparison matches by: its ops in graph order, from the GE text file
(``ge_proto_*_Build.txt``, read by :func:`npu_dump_hook.formats.ge_graph.iter_graphs`) or from
msaccucmp's JSON form of it (``atc --mode=5``, reference ascend-dump-formats.md §2.7).

Every graph of the file counts, the main graph first, as msaccucmp reads them. What is kept
per op is :class:`~npu_dump_hook.formats.ge_graph.OpSummary`: name, type, id, inputs
(``src:idx``, ``src:-1`` for control edges), ``_no_task``, ``_datadump_original_op_names``
and, per output_desc, ``_datadump_origin_name`` / ``_datadump_origin_output_index``.
"""
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from ..errors import CompareError, GraphFormatError
from ..formats import ge_graph
from ..formats import ge_ir_schema
from ..formats.ge_graph import OpSummary, OutputOrigin

__all__ = ["Graph", "load_graph", "split_input"]


class Graph(object):
    """Ops in graph order (``ops``), looked up by exact name (``by_name``)."""

    def __init__(self, path: str, ops: List[OpSummary]) -> None:
        self.path = path
        self.ops = ops
        self.by_name = {}  # type: Dict[str, int]
        for position, op in enumerate(ops):
            self.by_name.setdefault(op.name, position)

    def op(self, name: str) -> Optional[OpSummary]:
        position = self.by_name.get(name)
        return None if position is None else self.ops[position]


def split_input(text: str) -> Optional[Tuple[str, int]]:
    """``"src:idx"`` -> (src, idx); None for control inputs (``src:-1``, ``^src``) and empty ones."""
    if not text or text.startswith("^"):
        return None
    name, sep, index = text.rpartition(":")
    if not sep:
        return text, 0
    try:
        slot = int(index)
    except ValueError:
        return text, 0
    return (name, slot) if slot >= 0 else None


def load_graph(path: str) -> Graph:
    """The ops of a Build graph file (``.json``: msaccucmp's JSON form; anything else: GE text).

    CompareError naming the file when it is missing or holds no op; GraphFormatError from
    the text scanner for malformed text.
    """
    if not os.path.isfile(path):
        raise CompareError("graph {}: no such file".format(path), path)
    if path.lower().endswith(".json"):
        ops = _json_ops(path)
    else:
        ops = [op for graph in ge_graph.iter_graphs(path) for op in graph.ops]
    if not ops:
        raise CompareError("graph {}: holds no op".format(path), path)
    return Graph(path, ops)


# -- msaccucmp JSON ----------------------------------------------------------------------------

def _json_ops(path: str) -> List[OpSummary]:
    try:
        with open(path, "rb") as handle:
            doc = json.loads(handle.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise GraphFormatError(path, "not a JSON document: {}".format(exc))
    graphs = doc.get("graph") if isinstance(doc, dict) else None
    if not isinstance(graphs, list):
        raise GraphFormatError(path, 'no "graph" array (expected the atc --mode=5 JSON of a Build graph)')
    ops = []
    for graph in graphs:
        for op in (graph.get("op") or []) if isinstance(graph, dict) else []:
            if isinstance(op, dict):
                ops.append(_json_op(op, path))
    return ops


def _attrs(entries: Any) -> Dict[str, Any]:
    found = {}
    for entry in entries or []:
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            found[entry["key"]] = entry.get("value") or {}
    return found


def _as_int(value: Any, default: Optional[int] = None) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _json_op(op: Dict[str, Any], path: str) -> OpSummary:
    attrs = _attrs(op.get("attr"))
    names = None  # type: Optional[Tuple[str, ...]]
    if ge_ir_schema.ATTR_ORIGINAL_OP_NAMES in attrs:
        listed = (attrs[ge_ir_schema.ATTR_ORIGINAL_OP_NAMES].get("list") or {}).get("s")
        names = tuple(str(s) for s in listed) if listed else ("",)
    no_task = bool((attrs.get(ge_ir_schema.ATTR_NO_TASK) or {}).get("b", False))
    outputs = []
    for desc in op.get("output_desc") or []:
        desc_attrs = _attrs(desc.get("attr") if isinstance(desc, dict) else None)
        name = (desc_attrs.get(ge_ir_schema.ATTR_ORIGIN_NAME) or {}).get("s")
        index = _as_int((desc_attrs.get(ge_ir_schema.ATTR_ORIGIN_OUTPUT_INDEX) or {}).get("i"))
        outputs.append(OutputOrigin(str(name) if name is not None else None, index))
    inputs = tuple(str(i) for i in op.get("input") or [])
    return OpSummary(str(op.get("name") or ""), str(op.get("type") or ""), _as_int(op.get("id"), 0) or 0,
                     inputs, no_task, names, tuple(outputs))
