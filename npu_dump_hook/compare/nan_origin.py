"""Where NaN/Inf start, without a golden: the first op in execution order whose output holds
NaN or +-Inf while every input it read is finite, and the ops the non-finite values reach
from there (docs/compare.md, "Checks that need no golden").

What is read per op (the newest dump of each op in the step folder, as compare matches them):

* tensor dumps: every floating input and output payload, counted in chunks (NaN, -Inf, +Inf
  per tensor; integer and bool tensors are finite by nature; a type numpy cannot hold is
  skipped); a dump file this process wrote moments ago and that is unchanged since gives the
  counts taken when it was written (:mod:`npu_dump_hook._ledger`), instead of a second read;
* stats CSVs (``dump_data="stats"``): the ``Nan Count``, ``Negative Inf Count`` and
  ``Positive Inf Count`` cells of each row (a cell that is absent or ``NA`` counts as finite).

An op's inputs are judged by its dumped input tensors when it has any (``inputs_checked``
``"dumped"``), else by the outputs of its producers in the Build graph (``"graph"``; ops
without a dump, such as ``_no_task`` Identity nodes, are looked through to their own
producers), else not at all (``"none"``: nothing upstream was dumped, e.g. ``dump_layer``).
An op with a non-finite output and no non-finite input is an **origin**. From each origin, in
execution order, the graph's data edges are followed downstream through ops without a dump
and ops whose dump is non-finite: those are what it **propagates to** (each claimed by the
first origin that reaches it). Execution order is the dump timestamp, then the task id, then
the graph position.
"""
import collections
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .._ledger import dump_health, non_finite_counts
from ..errors import FormatError
from ..formats.dump_file import DumpFile
from ..formats.names import sanitize
from ..formats.stats_csv import read_stats_csv
from ._npu import newest_per_op
from ._graph import Graph, split_input

__all__ = ["TensorHealth", "OpHealth", "collect_health", "read_health", "place_health", "nan_inf_origins"]

_MAX_LISTED = 50  # propagated op names listed per origin (all are counted)


class TensorHealth(NamedTuple):
    """One tensor's non-finite counts (``count``: elements, None when unknown)."""

    direction: str  # "input" | "output"
    slot: int
    count: Optional[int]
    nan: int
    neg_inf: int
    pos_inf: int

    @property
    def bad(self) -> bool:
        return bool(self.nan or self.neg_inf or self.pos_inf)

    def as_dict(self, op: str) -> Dict[str, Any]:
        return {"tensor": "{}:{}:{}".format(op, self.direction, self.slot), "count": self.count,
                "nan": self.nan, "neg_inf": self.neg_inf, "pos_inf": self.pos_inf}


class OpHealth(object):
    """One dumped op: where it is in the graph (``position``, None when no op claims it), when it
    ran, and its tensors' counts; ``error`` when its file could not be read."""

    __slots__ = ("name", "op_type", "position", "timestamp", "task_id", "path", "inputs", "outputs", "error")

    def __init__(self, name: str, op_type: str, position: Optional[int], timestamp: int, task_id: int,
                 path: str) -> None:
        self.name = name
        self.op_type = op_type
        self.position = position
        self.timestamp = timestamp
        self.task_id = task_id
        self.path = path
        self.inputs = []  # type: List[TensorHealth]
        self.outputs = []  # type: List[TensorHealth]
        self.error = None  # type: Optional[str]

    @property
    def order_key(self) -> Tuple[int, int, int]:
        return (self.timestamp, self.task_id, self.position if self.position is not None else 1 << 62)

    @property
    def bad_outputs(self) -> List[TensorHealth]:
        return [t for t in self.outputs if t.bad]

    @property
    def bad(self) -> bool:
        return any(t.bad for t in self.outputs) or any(t.bad for t in self.inputs)


def _count_array(array: np.ndarray, direction: str, slot: int) -> TensorHealth:
    return TensorHealth(direction, slot, *non_finite_counts(array))


def _read_dump(health: OpHealth) -> None:
    noted = dump_health(health.path)
    if noted is not None:  # written by this process and unchanged since: the counts it took then
        for counts in noted:
            (health.inputs if counts[0] == "input" else health.outputs).append(TensorHealth(*counts))
        return
    with DumpFile.open_small(health.path) as dump:  # a step's files are mostly small: one open each
        for kind, into in (("input", health.inputs), ("output", health.outputs)):
            for info in dump.tensors(kind):
                if info.dtype is None:
                    continue  # bit-packed / unsized types: nothing numpy can count
                into.append(_count_array(dump.array(kind, info.index), kind, info.index))


def _read_stats(health: OpHealth) -> None:
    for row in read_stats_csv(health.path).rows:
        into = health.inputs if row.direction == "Input" else health.outputs
        into.append(TensorHealth(row.direction.lower(), row.index, row.count, row.nan_count or 0,
                                 row.negative_inf_count or 0, row.positive_inf_count or 0))


def collect_health(graph: Graph, refs: Sequence[Any]) -> List[OpHealth]:
    """The counts of the newest dump (or stats CSV) of each op in ``refs`` (DumpRefs), in
    execution order; a file that does not read is an OpHealth with ``error`` and no tensors."""
    return place_health(graph, read_health(refs))


def read_health(refs: Sequence[Any]) -> List[Tuple[str, OpHealth]]:
    """(sanitized op name, its OpHealth) of the newest file of each op in ``refs``, read without
    the graph: named as the file names it, no position yet (:func:`place_health` adds them)."""
    found = []
    for key, ref in newest_per_op(refs).items():
        health = OpHealth(ref.name.op_name, ref.name.op_type, None, ref.name.timestamp, ref.name.task_id, ref.path)
        try:
            (_read_stats if ref.name.kind == "stats" else _read_dump)(health)
        except (OSError, ValueError, FormatError) as exc:
            health.inputs, health.outputs, health.error = [], [], str(exc)
        found.append((key, health))
    return found


def place_health(graph: Optional[Graph], read: Sequence[Tuple[str, OpHealth]]) -> List[OpHealth]:
    """The OpHealths of :func:`read_health` named and placed as ``graph`` claims them (the first
    op of each sanitized name), in execution order. ``graph`` None: left as the files name them
    (enough when no op is non-finite or unreadable: nothing is then listed by name or order)."""
    by_key = {}  # type: Dict[str, int]
    for position, op in enumerate(graph.ops if graph is not None else ()):
        by_key.setdefault(sanitize(op.name), position)
    found = []
    for key, health in read:
        position = by_key.get(key)
        if position is not None:
            health.position, health.name = position, graph.ops[position].name  # type: ignore[union-attr]
        found.append(health)
    found.sort(key=lambda h: h.order_key)
    return found


class _Edges(object):
    """Producers and consumers of each graph op by data edges (control edges skipped)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.producers = {}  # type: Dict[str, List[Tuple[str, int]]]
        self.consumers = collections.defaultdict(list)  # type: Dict[str, List[str]]
        for op in graph.ops:
            edges = [edge for edge in (split_input(text) for text in op.inputs) if edge is not None]
            self.producers[op.name] = edges
            for src, _ in edges:
                self.consumers[src].append(op.name)


def _input_state(op_name: str, edges: _Edges, by_name: Dict[str, OpHealth]) -> Tuple[bool, bool]:
    """(any input non-finite, any input known) of ``op_name`` through the graph: producers'
    output slots, looking through ops that have no dump."""
    bad = known = False
    seen = {op_name}
    stack = list(edges.producers.get(op_name, ()))
    while stack:
        src, slot = stack.pop()
        producer = by_name.get(src)
        if producer is not None and producer.error is None:
            known = True
            if any(t.bad for t in producer.outputs if t.slot == slot) or (
                    slot >= len(producer.outputs) and bool(producer.bad_outputs)):
                bad = True
            continue
        if src in seen:
            continue
        seen.add(src)
        stack.extend(edges.producers.get(src, ()))  # looked through: no dump of its own
    return bad, known


def _original_ops(graph: Graph, health: OpHealth) -> List[str]:
    op = graph.ops[health.position] if health.position is not None else None
    if op is None or op.original_op_names is None:
        return [health.name]
    return [name for name in op.original_op_names if name]


def _downstream(origin: OpHealth, edges: _Edges, by_name: Dict[str, OpHealth], claimed: Dict[str, str]) -> List[str]:
    reached = []
    seen = {origin.name}
    queue = collections.deque(edges.consumers.get(origin.name, ()))
    while queue:
        name = queue.popleft()
        if name in seen:
            continue
        seen.add(name)
        health = by_name.get(name)
        if health is not None and health.error is None:
            if not health.bad:
                continue  # finite here: the values stopped
            if name not in claimed:
                claimed[name] = origin.name
                reached.append(name)
        queue.extend(edges.consumers.get(name, ()))
    return reached


def nan_inf_origins(graph: Optional[Graph], ops: Iterable[OpHealth], source: str) -> Dict[str, Any]:
    """The JSON part ``checks.nan_inf`` for ``ops`` (from :func:`collect_health`, execution order)."""
    ops = list(ops)
    by_name = {h.name: h for h in ops}
    # the edges only matter from an op with a non-finite output on (a clean step needs no graph)
    edges = _Edges(graph) if any(h.error is None and h.bad_outputs for h in ops) else None
    order = {h.name: index for index, h in enumerate(ops)}
    origins = []  # type: List[Tuple[OpHealth, str]]
    for health in ops:
        if health.error is not None or not health.bad_outputs:
            continue
        if health.inputs:
            if not any(t.bad for t in health.inputs):
                origins.append((health, "dumped"))
            continue
        bad_in, known = _input_state(health.name, edges, by_name)
        if not bad_in:
            origins.append((health, "graph" if known else "none"))
    claimed = {h.name: h.name for h, _ in origins}
    listed = []
    for health, checked in origins:
        reached = sorted(_downstream(health, edges, by_name, claimed), key=lambda n: order[n])
        listed.append({
            "npu_op": health.name, "op_type": health.op_type, "original_ops": _original_ops(graph, health),
            "order": order[health.name], "timestamp": health.timestamp, "task_id": health.task_id,
            "tensors": [t.as_dict(health.name) for t in health.bad_outputs], "inputs_checked": checked,
            "propagates_to": reached[:_MAX_LISTED], "propagated": len(reached)})
    nonfinite = [h.name for h in ops if h.error is None and h.bad]
    return {
        "source": source,
        "ops_checked": sum(1 for h in ops if h.error is None),
        "ops_nonfinite": len(nonfinite),
        "origins": listed,
        "unexplained": [n for n in nonfinite if n not in claimed][:_MAX_LISTED],
        "unreadable": [{"file": h.path, "reason": h.error} for h in ops if h.error is not None],
    }
