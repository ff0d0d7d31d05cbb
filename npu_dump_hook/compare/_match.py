"""Matching NPU dump files to graph ops and NPU tensors to golden TF tensors, as the NPU tools
define it (docs/reference/ascend-dump-formats.md §2.4, §2.5, §6.2).

* A dump file belongs to the graph op whose name, sanitized (§5.2: ``/``, ``.``, ``\\``, space
  -> ``_``; FFTS ``_lxsliceN`` suffix and ``..._sgt_graph_N_`` prefix stripped), is the file's
  op name; several files for one op: the latest timestamp is used, as msaccucmp does; when the
  golden side has one file per iteration (a TF 1.x loop body), every file is compared, the k-th
  (by timestamp) against the k-th golden file of the tensor (rows carry ``iteration``).
* Output ``i`` of op X is matched to the TF tensor (``_datadump_origin_name``,
  ``_datadump_origin_output_index``) of X's output_desc ``i``; without those attrs to the dump
  header's ``original_op``; else to (X, i). X of type Cast or TransData (inserted by GE) is
  walked through to its producer first: output ``i`` is its input ``i``'s producer output.
* Input ``j`` of X is matched to the origin of the output that produces it (the ``j``-th
  non-control entry of X's inputs, ``src:idx``; ``src:-1`` control inputs are skipped),
  walking through Cast/TransData producers the same way.
* The graph's origin format of each tensor (used when the dump header has none): output
  ``i``: X's ``output_desc[i]``; input ``j``: X's ``input_desc[j]``, else the producer's
  output_desc (:attr:`._graph.Graph.formats`).
* ``ground_truth`` of X: its ``_datadump_original_op_names`` when present (empty names
  dropped: GE gives inserted nodes ``[""]``, shown as ``*``), else ``[X]``.
* ``index`` is msaccucmp's: the position of X's fusion group (ops sharing one single original
  name, or the same list of several) in graph order, over every op of the graph.
"""
import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..formats.ge_graph import OpSummary
from ..formats.names import base_op_name, sanitize
from ._graph import Graph, split_input
from ._npu import DumpRef, newest_per_op  # (in _npu: the golden-free checks' NaN/Inf origin needs it, not this module)
from ._worker import FileJob, OutputPlan

__all__ = ["PASS_THROUGH_TYPES", "OpEntry", "Plan", "build_plan", "ground_truth", "producer_of", "newest_per_op",
           "every_per_op"]

#: Op types msaccucmp walks through to their producer (GE inserts them for layout / dtype).
PASS_THROUGH_TYPES = ("Cast", "TransData")
_MAX_WALK = 64


class OpEntry(NamedTuple):
    """One NPU op that gets rows: its graph position (None: not in the graph), msaccucmp
    index, name, type, ground truth, dump file (None: no dump file) and task id."""

    position: Optional[int]
    index: int
    name: str
    op_type: str
    ground_truth: Tuple[str, ...]
    dump: Optional[DumpRef]
    job: Optional[FileJob]
    iteration: Optional[int] = None  # a loop-body op's k-th dump file of the step (by timestamp)


class Plan(NamedTuple):
    entries: List[OpEntry]
    jobs: List[FileJob]
    ignored_dumps: int  # older files of an op that has a newer one


def ground_truth(op: OpSummary) -> Tuple[str, ...]:
    if op.original_op_names is None:
        return (op.name,)
    return tuple(name for name in op.original_op_names if name)


def _group_key(op: OpSummary) -> object:
    names = [name for name in (op.original_op_names or ()) if name]
    if len(names) == 1:
        return names[0]
    if len(names) > 1:
        return tuple(names)
    return op.name


def _group_indexes(graph: Graph) -> List[int]:
    seen = {}  # type: Dict[object, int]
    indexes = []
    for op in graph.ops:
        indexes.append(seen.setdefault(_group_key(op), len(seen)))
    return indexes


def data_inputs(op: OpSummary) -> List[Tuple[str, int]]:
    """The non-control inputs of ``op`` as (producer, output index)."""
    return [edge for edge in (split_input(text) for text in op.inputs) if edge is not None]


def producer_of(graph: Graph, name: str, slot: int) -> Tuple[str, int]:
    """(op, output) that really produces output ``slot`` of ``name``: Cast/TransData walked through."""
    for _ in range(_MAX_WALK):
        op = graph.op(name)
        if op is None or op.type not in PASS_THROUGH_TYPES:
            return name, slot
        edges = data_inputs(op)
        if not edges:
            return name, slot
        name, slot = edges[slot] if slot < len(edges) else edges[0]
    return name, slot


def origin_of(graph: Graph, name: str, slot: int, walk: bool = True) -> OutputPlan:
    """The golden tensor of output ``slot`` of op ``name`` (after walking Cast/TransData). With
    ``walk`` False (NPU vs NPU) a Cast/TransData output is a tensor of its own, named after the
    TF tensor it copies and its type (``{tensor}@Cast``): GE numbers these nodes (trans_Cast_N)
    differently when the two sides fuse differently."""
    if not walk:
        op = graph.op(name)
        if op is not None and op.type in PASS_THROUGH_TYPES:
            plan = origin_of(graph, name, slot)
            return OutputPlan("{}@{}".format(plan.name, op.type), plan.index, False)
    real, real_slot = producer_of(graph, name, slot)
    op = graph.op(real)
    if op is not None and real_slot < len(op.outputs):
        origin = op.outputs[real_slot]
        if origin.origin_name:
            index = origin.origin_output_index if origin.origin_output_index is not None else real_slot
            return OutputPlan(origin.origin_name, index, False)
    # no origin attrs: the dump header's original_op decides, unless Cast/TransData were walked
    return OutputPlan(real, real_slot, (real, real_slot) == (name, slot))


def _output_plans(graph: Graph, op: OpSummary, walk: bool = True) -> Tuple[Optional[OutputPlan], ...]:
    return tuple(origin_of(graph, op.name, slot, walk) for slot in range(len(op.outputs)))


def _input_plans(graph: Graph, op: OpSummary, walk: bool = True) -> Tuple[Optional[OutputPlan], ...]:
    plans = []
    for src, slot in data_inputs(op):
        plan = origin_of(graph, src, slot, walk)
        plans.append(OutputPlan(plan.name, plan.index, False))
    return tuple(plans)


def _formats(graph: Graph, op: OpSummary) -> Tuple[Tuple[Optional[str], ...], Tuple[Optional[str], ...]]:
    outputs, inputs = graph.formats.get(op.name, ((), ()))
    merged = []
    for slot, (src, src_slot) in enumerate(data_inputs(op)):
        layout = inputs[slot] if slot < len(inputs) else None
        if layout is None:
            produced = graph.formats.get(src, ((), ()))[0]
            layout = produced[src_slot] if src_slot < len(produced) else None
        merged.append(layout)
    return outputs, tuple(merged)


def _newest(dumps: Sequence[DumpRef]) -> Tuple[Dict[str, DumpRef], int]:
    newest = newest_per_op(dumps)
    return newest, len(dumps) - len(newest)


def every_per_op(refs: Sequence[Any]) -> Dict[str, List[Any]]:
    """Every file of each op in ``refs`` (DumpRefs), by base op name, oldest first (timestamp, then
    path): a TF 1.x loop-body op dumped at every iteration of the step, iteration k at position k."""
    every = {}  # type: Dict[str, List[Any]]
    for ref in refs:
        every.setdefault(base_op_name(ref.name.op_name), []).append(ref)
    for files in every.values():
        files.sort(key=lambda ref: (ref.name.timestamp, ref.path))
    return every


def _wanted(pattern: Optional["re.Pattern[str]"], name: str, truth: Sequence[str]) -> bool:
    return pattern is None or bool(pattern.search(name)) or any(pattern.search(t) for t in truth)


def build_plan(graph: Graph, dumps: Sequence[DumpRef], ops: Optional["re.Pattern[str]"] = None,
               walk: bool = True, iterations: bool = False) -> Plan:
    """Entries (one per op with a dump file, or without one but expected: not ``_no_task``) in
    graph order, then dump files no graph op claims; a FileJob per dump file. ``walk`` False
    (NPU vs NPU): Cast/TransData outputs are matched as their own tensors (:func:`origin_of`).
    ``iterations`` (the golden side has one file per iteration of loop-body tensors): an op with
    several dump files gets one entry per file, iteration k matched to the k-th golden file."""
    newest, ignored = _newest(dumps)
    every = every_per_op(dumps) if iterations else {}
    indexes = _group_indexes(graph)
    entries, jobs = [], []  # type: List[OpEntry], List[FileJob]
    for position, op in enumerate(graph.ops):
        key = sanitize(op.name)
        ref = newest.pop(key, None)
        if ref is None and op.no_task:
            continue
        truth = ground_truth(op)
        if not _wanted(ops, op.name, truth):
            continue
        files = every.get(key) or []
        if ref is not None and len(files) > 1:
            plans = (_output_plans(graph, op, walk), _input_plans(graph, op, walk), op.name, _formats(graph, op))
            for iteration, each in enumerate(files):
                job = FileJob(len(jobs), each.path, *plans, iteration=iteration)
                jobs.append(job)
                entries.append(OpEntry(position, indexes[position], op.name, op.type, truth, each, job, iteration))
            ignored -= len(files) - 1
            continue
        job = None
        if ref is not None:
            job = FileJob(len(jobs), ref.path, _output_plans(graph, op, walk), _input_plans(graph, op, walk), op.name,
                          _formats(graph, op))
            jobs.append(job)
        entries.append(OpEntry(position, indexes[position], op.name, op.type, truth, ref, job))
    extra = len(set(indexes))
    for key in sorted(newest):
        ref = newest[key]
        if not _wanted(ops, ref.name.op_name, ()):
            continue
        job = FileJob(len(jobs), ref.path, (), (), ref.name.op_name)
        jobs.append(job)
        entries.append(OpEntry(None, extra, ref.name.op_name, ref.name.op_type, (ref.name.op_name,), ref, job))
        extra += 1
    return Plan(entries, jobs, ignored)
