"""The Build graph a comparison matches by: its ops in graph order, from the GE text file
(``ge_proto_*_Build.txt``, read by :func:`npu_dump_hook.formats.ge_graph.iter_graphs`) or from
msaccucmp's JSON form of it (``atc --mode=5``, docs/reference/ascend-dump-formats.md §2.7).

Every graph of the file counts, the main graph first, as msaccucmp reads them. What is kept
per op is :class:`~npu_dump_hook.formats.ge_graph.OpSummary`: name, type, id, inputs
(``src:idx``, ``src:-1`` for control edges), ``_no_task``, ``_datadump_original_op_names``
and, per output_desc, ``_datadump_origin_name`` / ``_datadump_origin_output_index``.

:attr:`Graph.formats` adds, per op name, the framework layout (origin format) of each output
and input tensor desc: ``_datadump_origin_format``, else ``origin_format`` (msaccucmp's order),
kept only when it is a layout the device-format conversion can use
(:data:`FRAMEWORK_LAYOUTS`), else None. From GE text they are read by a scan of the
canonical layout (``C++ TextFormat::Print``: a few ms per 1,000 ops), checked against the
scanner's ops (same op names, same number of output_descs, every desc with its
``origin_format``: GE's serializer always writes it); any other file is parsed in full
(:func:`npu_dump_hook.formats.ge_text.parse_model`).
"""
import json
import logging
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..errors import CompareError, GraphFormatError
from ..formats import ge_graph
from ..formats import ge_ir_schema, ge_text
from ..formats.ge_graph import OpSummary, OutputOrigin

__all__ = ["Graph", "OpFormats", "FRAMEWORK_LAYOUTS", "load_graph", "split_input", "framework_layout"]

logger = logging.getLogger(__name__)

#: Origin formats the device-format conversion takes as the framework layout of a tensor.
FRAMEWORK_LAYOUTS = frozenset(("NCHW", "NHWC", "HWCN", "NCDHW", "NDHWC"))
_ORIGIN_FORMAT_KEYS = ("_datadump_origin_format", "origin_format")  # msaccucmp's order

#: (origin formats of the output descs, of the input descs) of one op; None: no usable layout.
OpFormats = Tuple[Tuple[Optional[str], ...], Tuple[Optional[str], ...]]


def framework_layout(value: Any) -> Optional[str]:
    """``value`` (str or bytes) when it names one of :data:`FRAMEWORK_LAYOUTS`, else None."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str) and value.startswith("FORMAT_"):
        value = value[len("FORMAT_"):]
    return value if value in FRAMEWORK_LAYOUTS else None


class Graph(object):
    """Ops in graph order (``ops``), looked up by exact name (``by_name``); ``formats``: op
    name -> :data:`OpFormats` (ops without descs may be missing)."""

    def __init__(self, path: str, ops: List[OpSummary], formats: Optional[Dict[str, OpFormats]] = None) -> None:
        self.path = path
        self.ops = ops
        self.formats = formats if formats is not None else {}  # type: Dict[str, OpFormats]
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


def load_graph(path: str, formats: bool = True) -> Graph:
    """The ops of a Build graph file (``.json``: msaccucmp's JSON form; anything else: GE text);
    ``formats=False``: without the origin formats of GE text (:attr:`Graph.formats` empty), for
    callers that convert no device payload (the statistics compare).

    CompareError naming the file when it is missing or holds no op; GraphFormatError from
    the text scanner for malformed text.
    """
    if not os.path.isfile(path):
        raise CompareError("graph {}: no such file".format(path), path)
    found = {}  # type: Dict[str, OpFormats]
    if path.lower().endswith(".json"):
        ops = _json_ops(path, found)
    else:
        ops = [op for graph in ge_graph.iter_graphs(path) for op in graph.ops]
        if ops and formats:
            found = _text_formats(path, ops)
    if not ops:
        raise CompareError("graph {}: holds no op".format(path), path)
    return Graph(path, ops, found)


# -- origin formats from GE text ---------------------------------------------------------------

# The lines of the canonical layout that matter: an op, its name, its descs, and an origin
# format attr of a desc (key and value on the lines C++ TextFormat::Print puts them).
_FORMAT_LINES = re.compile(
    rb'^(?:(  op \{)|    name: "([^"\\\n]*)"|    (input_desc|output_desc) \{'
    rb'|      attr \{\n        key: "(_datadump_origin_format|origin_format)"\n        value \{\n'
    rb'          s: "([^"\\\n]*)")$', re.M)


class _Desc(object):
    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values = {}  # type: Dict[str, str]

    def layout(self) -> Optional[str]:
        for key in _ORIGIN_FORMAT_KEYS:
            found = framework_layout(self.values.get(key))
            if found is not None:
                return found
        return None


def _scan_formats(data: bytes) -> Optional[List[Tuple[str, List[_Desc], List[_Desc]]]]:
    """(op name, output descs, input descs) per op of canonical GE text; None when a desc has
    no origin_format (then the layout is not the canonical one, or the graph is not GE's)."""
    ops = []  # type: List[Tuple[str, List[_Desc], List[_Desc]]]
    name = None  # type: Optional[str]
    outputs, inputs = [], []  # type: List[_Desc], List[_Desc]
    desc = None  # type: Optional[_Desc]
    for match in _FORMAT_LINES.finditer(data):
        op_start, op_name, desc_kind, key, value = match.groups()
        if op_start is not None:
            if name is not None:
                ops.append((name, outputs, inputs))
            name, outputs, inputs, desc = "", [], [], None
        elif op_name is not None:
            if name == "" and desc is None:
                name = op_name.decode("utf-8", "replace")
        elif desc_kind is not None:
            desc = _Desc()
            (outputs if desc_kind == b"output_desc" else inputs).append(desc)
        elif desc is not None:
            desc.values[key.decode("ascii")] = value.decode("utf-8", "replace")
    if name is not None:
        ops.append((name, outputs, inputs))
    if any("origin_format" not in d.values for _, outs, ins in ops for d in outs + ins):
        return None
    return ops


def _model_formats(path: str) -> Iterable[Tuple[str, List[_Desc], List[_Desc]]]:
    model = ge_text.parse_model(path)
    for graph in model.graph:
        for op in graph.op:
            descs = []
            for group in (op.output_desc, op.input_desc):
                found = []
                for tensor in group:
                    desc = _Desc()
                    for key in _ORIGIN_FORMAT_KEYS:
                        if key in tensor.attr:
                            desc.values[key] = tensor.attr[key].s.decode("utf-8", "replace")
                    found.append(desc)
                descs.append(found)
            yield op.name, descs[0], descs[1]


def _text_formats(path: str, ops: List[OpSummary]) -> Dict[str, OpFormats]:
    """Origin formats of every op of a GE text graph (see the module doc)."""
    with open(path, "rb") as handle:
        scanned = _scan_formats(handle.read())
    if scanned is None or len(scanned) != len(ops) or any(
            name != op.name or len(outs) != len(op.outputs) for (name, outs, _), op in zip(scanned, ops)):
        logger.debug("%s: not in the canonical layout; parsing it in full for the origin formats", path)
        scanned = list(_model_formats(path))
    formats = {}  # type: Dict[str, OpFormats]
    for name, outs, ins in scanned:
        formats.setdefault(name, (tuple(d.layout() for d in outs), tuple(d.layout() for d in ins)))
    return formats


# -- msaccucmp JSON ----------------------------------------------------------------------------

def _json_ops(path: str, formats: Dict[str, OpFormats]) -> List[OpSummary]:
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
                formats.setdefault(ops[-1].name, (_json_layouts(op.get("output_desc")),
                                                  _json_layouts(op.get("input_desc"))))
    return ops


def _json_layouts(descs: Any) -> Tuple[Optional[str], ...]:
    found = []
    for desc in descs if isinstance(descs, list) else []:
        attrs = _attrs(desc.get("attr") if isinstance(desc, dict) else None)
        layout = None
        for key in _ORIGIN_FORMAT_KEYS:
            layout = framework_layout((attrs.get(key) or {}).get("s"))
            if layout is not None:
                break
        found.append(layout)
    return tuple(found)


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
