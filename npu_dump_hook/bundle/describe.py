"""What a bundle file is: its ``kind`` and, for dump-folder files, its parsed name and header.

:func:`classify_file` is the one place that says what a dump artefact is by its name (bundle
writing and ``npu-dump-hook parse`` both ask it): ``mapping.csv``; ``ge_proto``/``ge_onnx``/
``ge_readable`` graph files; dump, stats and Opdebug names (:mod:`npu_dump_hook.formats.names`),
hashed all-digit names resolved through the folder's mapping (one it does not resolve is still
a dump file, without a name); everything else is ``other``. In a bundle's dump folder only
named dump, stats and Opdebug files and ``mapping.csv`` keep their kind; a graph file or an
unresolved hashed name there is ``other`` (:func:`dump_folder_kind`, the bundle.json rule).
Graph files are summarised as the ops coverage counts (:func:`graph_ops`).
"""
import bisect
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set

from ..errors import FormatError
from ..formats import ge_graph
from ..formats.dump_file import TensorFields, quick_tensor_fields, read_header, read_header_bytes
from ..formats.names import (DumpName, GraphFileName, is_hashed_name, parse_dump_name, parse_graph_file_name,
                             sanitize)
from .selection import is_selected
from ._spec import MAPPING_FILE

__all__ = ["FileClass", "classify_file", "describe_dump_folder_file", "describe_dump_folder_file_named", "dump_folder_kind", "header_summary", "GraphOps", "graph_ops",
           "coverage", "CoverageTally", "control_flow_coverage", "not_applicable_coverage", "NOT_APPLICABLE"]

#: ``coverage.not_applicable`` of a bundle that holds no NPU dump by definition (golden bundles).
NOT_APPLICABLE = "reference bundle: golden tensors only, no NPU graph or dump to cover"


class FileClass(NamedTuple):
    """What :func:`classify_file` found: ``kind`` (``mapping``, ``graph``, ``dump``, ``stats``,
    ``opdebug`` or ``other``), the parsed dump ``name`` or graph file name ``graph`` (None
    otherwise), and ``note``: why a hashed name is unresolved when mapping.csv lacks it."""

    kind: str
    name: Optional[DumpName] = None
    graph: Optional[GraphFileName] = None
    note: Optional[str] = None


def classify_file(base: str, mapping: Optional[Mapping[str, str]]) -> FileClass:
    """What the file named ``base`` is, by its name alone (``mapping``: its folder's mapping.csv)."""
    if base == MAPPING_FILE:
        return FileClass("mapping")
    # every graph file name starts with "ge_" (a dump name rarely holds it): the pattern only then
    graph = parse_graph_file_name(base) if "ge_" in base else None
    if graph is not None:
        return FileClass("graph", graph=graph)
    try:
        name = parse_dump_name(base, mapping)
    except FormatError:
        if not is_hashed_name(base):
            return FileClass("other")
        unlisted = not (mapping and base in mapping)
        return FileClass("dump", note="hashed name without a mapping.csv entry" if unlisted else None)
    return FileClass(name.kind, name=name)


def dump_folder_kind(base: str, mapping: Optional[Mapping[str, str]]) -> "tuple":
    """``(kind, parsed DumpName or None, warning or None)`` of a file named ``base`` in a dump folder:
    :func:`classify_file`, where a file without a parsed dump name (a graph file, an unresolved
    hashed name) is ``other``, as bundle.json records it."""
    found = classify_file(base, mapping)
    if found.kind == "mapping":
        return "mapping", None, None
    if found.name is None:
        return "other", None, found.note
    return found.kind, found.name, None


def describe_dump_folder_file(rel: str, path: str, mapping: Optional[Mapping[str, str]],
                              head: Optional[bytes] = None, size: Optional[int] = None,
                              fields: Optional[Any] = None) -> Dict[str, Any]:
    """The bundle.json entry fields (``kind``, name fields, ``header``) of dump-folder file ``rel``
    placed at ``path``; a ``_warning`` key carries what the writer must report. ``head`` and
    ``size``: the file's first bytes and size, already read (see :func:`header_summary`);
    ``fields``: its (inputs, outputs) tensor fields as :func:`~npu_dump_hook.formats.dump_file.quick_tensor_fields`
    decodes them, noted when this process wrote the file (:mod:`npu_dump_hook._written`)."""
    return describe_dump_folder_file_named(rel, path, mapping, head, size, fields)[0]


def describe_dump_folder_file_named(rel: str, path: str, mapping: Optional[Mapping[str, str]],
                                    head: Optional[bytes] = None, size: Optional[int] = None,
                                    fields: Optional[Any] = None) -> "tuple":
    """``(entry, parsed DumpName or None)``: :func:`describe_dump_folder_file` and the dump name it
    parsed (the writer hands it to a reader in this process: :class:`._listing.DumpListing`)."""
    kind, name, warning = dump_folder_kind(rel.rpartition("/")[2], mapping)
    if name is None:
        entry = {"kind": kind}  # type: Dict[str, Any]
        if warning:
            entry["_warning"] = "data/{}: {}".format(rel, warning)
        return entry, None
    entry = _name_fields(name)
    if name.kind == "dump" and fields is not None:
        entry["header"] = _summary_of_fields(fields)
    elif name.kind in ("dump", "opdebug"):
        try:
            entry["header"] = header_summary(path) if head is None else header_summary(path, head, size)
        except FormatError as exc:  # e.g. a 0-byte file: described as unreadable, and reported
            entry["header"] = None
            entry["parse_error"] = exc.rule
            entry["_warning"] = "data/{}: header not readable: {}".format(rel, exc.rule)
    return entry, name


def _name_fields(name: DumpName) -> Dict[str, Any]:
    entry = {"kind": name.kind, "op_type": name.op_type, "op_name": name.op_name, "task_id": name.task_id,
             "stream_id": name.stream_id, "timestamp": name.timestamp}  # type: Dict[str, Any]
    if name.hashed_name is not None:
        entry["original_name"] = name.file_name
    if name.is_ffts:
        entry.update(task_type=name.task_type, context_id=name.context_id, thread_id=name.thread_id,
                     device_id=name.device_id)
    return entry


def header_summary(path: str, head: Optional[bytes] = None, size: Optional[int] = None) -> Dict[str, Any]:
    """``{"format": "v2"|"legacy", "inputs": [...], "outputs": [...]}`` of a dump file's header,
    each tensor as ``{"dtype", "shape", "format"}`` (plus ``original_shape`` when recorded).

    With ``head`` (the file's first bytes, e.g. from hashing it) and ``size`` (its size) the
    header is decoded from them when they hold it (:func:`read_header_bytes`: the same result
    and errors), else the file is read."""
    if head is not None and size is not None:
        quick = quick_tensor_fields(head, size)  # the common file, without building its TensorInfos
        if quick is not None:
            return _summary_of_fields(quick)
    header = read_header(path) if head is None or size is None else read_header_bytes(path, head, size)
    return {"format": header.version,
            "inputs": [_tensor_summary(t) for t in header.inputs],
            "outputs": [_tensor_summary(t) for t in header.outputs]}


def _summary_of_fields(fields: Any) -> Dict[str, Any]:
    """:func:`header_summary` of a v2 file from its (inputs, outputs) tensor fields."""
    return {"format": "v2", "inputs": [_fields_summary(t) for t in fields[0]],
            "outputs": [_fields_summary(t) for t in fields[1]]}


def _fields_summary(fields: TensorFields) -> Dict[str, Any]:
    """:func:`_tensor_summary` of a tensor given as :data:`~npu_dump_hook.formats.dump_file.TensorFields`."""
    dtype_name, shape, format_name, original_shape = fields
    summary = {"dtype": dtype_name, "shape": list(shape), "format": format_name}  # type: Dict[str, Any]
    if original_shape and original_shape != shape:
        summary["original_shape"] = list(original_shape)
    return summary


def _tensor_summary(info: Any) -> Dict[str, Any]:
    summary = {"dtype": info.dtype_name, "shape": list(info.shape), "format": info.format_name}  # type: Dict[str, Any]
    if info.original_shape and info.original_shape != info.shape:  # TensorInfo shapes are tuples
        summary["original_shape"] = list(info.original_shape)
    return summary


class GraphOps(NamedTuple):
    expected: List[str]   # sanitized names of ops that get a task (no ``_no_task``), sorted
    names: Set[str]       # sanitized names of all ops
    count: int            # ops in the file (main graph and subgraphs)
    #: with ``dump_layer``: the sanitized names of the expected ops it selects (npu_dump_hook.bundle.selection),
    #: sorted; None: every op is dumped
    selected: Optional[List[str]] = None
    #: sanitized original op name -> the sanitized name of the fused node (of another name) it went into
    fused: Optional[Dict[str, str]] = None


def graph_ops(path: str, layers: Sequence[str] = (), ops: Optional[Iterable[Any]] = None) -> GraphOps:
    """Ops of every graph in the file (main graph and subgraphs), names sanitized as in dump names;
    ``layers``: the ``dump_layer`` names the dump was made with (empty: every op); ``ops``: the
    file's ops as its writer handed them over (formats.ge_handover), else the file is scanned."""
    expected, names, count, selected = set(), set(), 0, set()
    fused = {}  # type: Dict[str, str]
    chosen = frozenset(layers)
    for op in ge_graph.iter_ops(path) if ops is None else ops:  # (not a graph's 100,000 summaries at once)
        name = sanitize(op.name)
        names.add(name)
        count += 1
        if not op.no_task:
            expected.add(name)
            if chosen and is_selected(op.name, op.original_op_names, chosen):
                selected.add(name)
            fused.update((sanitize(original), name) for original in op.original_op_names or ())
    fused = {original: node for original, node in fused.items() if original not in names}
    return GraphOps(sorted(expected), names, count, sorted(selected) if chosen else None, fused)


def _split_by_choice(ops: GraphOps, missing: List[str], cov: Dict[str, Any]) -> Dict[str, Any]:
    """A ``dump_layer`` dump's coverage: ``missing`` keeps the selected ops without a dump file,
    ``selected``/``not_selected`` count the chosen ops and the others without one (by choice)."""
    if ops.selected is None:
        return cov
    chosen = set(ops.selected)
    cov["missing"] = [name for name in missing if name in chosen]
    cov["selected"] = len(chosen)
    cov["not_selected"] = len(missing) - len(cov["missing"])
    return cov


def coverage(ops: Optional[GraphOps], dumped: Any) -> Dict[str, Any]:
    """bundle.json's ``coverage``: ops of the graph that get a task vs. ops with dump files
    (``dumped``: the dumped base op names, a mapping or set, or a :class:`CoverageTally` of ``ops``)."""
    if isinstance(dumped, CoverageTally):
        return dumped.result()
    if ops is None:
        return {"expected": None, "dumped": len(dumped), "missing": [], "not_in_graph": []}
    missing = [name for name in ops.expected if name not in dumped]
    return _split_by_choice(ops, missing, {
        "expected": len(ops.expected),
        "dumped": len(ops.expected) - len(missing),
        "missing": missing,
        "not_in_graph": sorted(name for name in dumped if name not in ops.names),
    })


class CoverageTally(object):
    """:func:`coverage` of op names given one by one, without keeping every name: with the graph's
    ops, one flag per expected op plus the names the graph lacks; without them, the distinct names
    (``tally.add(name)`` for each dumped file's base op name, then ``tally.result()``)."""

    def __init__(self, ops: Optional[GraphOps]) -> None:
        self._ops = ops
        self._hit = bytearray(len(ops.expected)) if ops is not None else bytearray()
        self._other = set()  # type: Set[str]  # not in the graph (all names when there is no graph)

    def add(self, name: str) -> None:
        ops = self._ops
        if ops is not None:
            at = bisect.bisect_left(ops.expected, name)
            if at < len(ops.expected) and ops.expected[at] == name:
                self._hit[at] = 1
                return
            if name in ops.names:
                return
        self._other.add(name)

    def fused_into(self, name: str) -> str:
        """The node op ``name`` (sanitized) was fused into when the graph has no node of that name
        (an op of a fused node is dumped with it), else ``name``."""
        ops = self._ops
        return (ops.fused or {}).get(name, name) if ops is not None and name not in ops.names else name

    def seen(self, name: str) -> bool:
        """Whether a dump or stats file of op ``name`` (sanitized) was added."""
        ops = self._ops
        if ops is not None:
            at = bisect.bisect_left(ops.expected, name)
            if at < len(ops.expected) and ops.expected[at] == name:
                return bool(self._hit[at])
        return name in self._other

    def result(self) -> Dict[str, Any]:
        """What ``coverage(ops, dumped)`` returns for the names added."""
        ops = self._ops
        if ops is None:
            return {"expected": None, "dumped": len(self._other), "missing": [], "not_in_graph": []}
        missing = [name for name, hit in zip(ops.expected, self._hit) if not hit]
        return _split_by_choice(ops, missing, {
            "expected": len(ops.expected),
            "dumped": len(ops.expected) - len(missing),
            "missing": missing,
            "not_in_graph": sorted(self._other),
        })

    def expects(self, name: str) -> bool:
        """Whether op ``name`` (sanitized) is one of the graph's ops that get a task."""
        ops = self._ops
        if ops is None:
            return False
        at = bisect.bisect_left(ops.expected, name)
        return at < len(ops.expected) and ops.expected[at] == name

    def chosen(self, name: str) -> bool:
        """Whether op ``name`` (sanitized) is dumped by choice: always, unless ``dump_layer``
        left it out (an op the graph lacks counts as chosen)."""
        ops = self._ops
        if ops is None or ops.selected is None:
            return True
        at = bisect.bisect_left(ops.selected, name)
        return (at < len(ops.selected) and ops.selected[at] == name) or name not in ops.names


_FLOW_KINDS = (("while", "while-loop bodies"), ("cond", "cond branches"), ("function", "If/While function bodies"))
_FLOW_NAMES_SHOWN = 5


def control_flow_coverage(cov: Dict[str, Any], census: Mapping[str, Any], tally: CoverageTally) -> Optional[str]:
    """Add ``coverage.control_flow`` and ``coverage.not_executed`` for the hook's control-flow
    ``census`` (:mod:`npu_dump_hook.train.control_flow`) to ``cov``: ops of an untaken cond branch
    and loop-body ops TensorFlow pruned (``pruned``, unless a dump file says they ran) leave
    ``expected``/``missing`` (they did not run); the executed ops in loop bodies, cond
    branches and function bodies are counted with how many have dump files. Returns the bundle
    warning when some of them have none (docs/bundle-format.md, ``coverage``)."""
    pruned = {sanitize(name) for name in census.get("pruned") or []}
    untaken = sorted({sanitize(name) for name in census.get("untaken") or []}
                     | {name for name in pruned if not tally.seen(name)})
    gone = set(untaken)
    kinds = {
        "while": [sanitize(name) for name in census.get("while") or [] if sanitize(name) not in gone],
        "cond": [sanitize(name) for name in census.get("cond") or [] if sanitize(name) not in gone],
        "function": [_body_name(tally, body["op"], node) for body in census.get("functions") or []
                     for node in body.get("body") or []],
    }
    if cov.get("expected") is not None and gone:  # an untaken branch's op is not missing: it did not run
        cov["expected"] -= sum(1 for name in cov.get("missing", []) if name in gone)
        cov["missing"] = [name for name in cov.get("missing", []) if name not in gone]
        if isinstance(cov.get("not_selected"), int):  # nor is it left out by choice
            unchosen = sum(1 for name in gone
                           if tally.expects(name) and not tally.chosen(name) and not tally.seen(name))
            cov["expected"] -= unchosen
            cov["not_selected"] -= unchosen
    cov["not_executed"] = untaken
    flow = {"executed": 0, "dumped": 0, "not_dumped": []}  # type: Dict[str, Any]
    for kind, _ in _FLOW_KINDS:
        names = kinds[kind]
        missing = [name for name in names if not tally.seen(tally.fused_into(name)) and tally.chosen(name)]
        flow[kind] = {"executed": len(names), "dumped": len(names) - len(missing)}
        flow["executed"] += len(names)
        flow["dumped"] += len(names) - len(missing)
        flow["not_dumped"].extend(missing)
    cov["control_flow"] = flow
    if not flow["not_dumped"]:
        return None
    parts = ["{}: {}/{}".format(label, flow[kind]["dumped"], flow[kind]["executed"])
             for kind, label in _FLOW_KINDS if flow[kind]["executed"]]
    shown = flow["not_dumped"][:_FLOW_NAMES_SHOWN]
    return ("control flow: {} of {} executed op(s) inside control flow have no dump file ({} dumped; e.g. {}{}); "
            "a comparison cannot see them".format(
                len(flow["not_dumped"]), flow["executed"], ", ".join(parts), ", ".join(shown),
                " ..." if len(flow["not_dumped"]) > len(shown) else ""))


def _body_name(tally: CoverageTally, op: str, node: str) -> str:
    """A function-body node's name as a dump would carry it: ``{functional op}/{node}`` or
    ``{function}/{node}`` (``node`` is ``{function}/{node}``), sanitized; the first when neither was dumped."""
    function, _, inner = node.partition("/")
    for name in (sanitize("{}/{}".format(op, inner)), sanitize(node)):
        if tally.seen(name):
            return name
    return sanitize("{}/{}".format(op, inner))


def not_applicable_coverage() -> Dict[str, Any]:
    """bundle.json's ``coverage`` of a golden (reference) bundle: the usual keys, nothing expected,
    and ``not_applicable`` saying why."""
    return {"expected": None, "dumped": 0, "missing": [], "not_in_graph": [], "not_applicable": NOT_APPLICABLE}
