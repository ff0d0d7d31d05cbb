"""Which rows breach, which breaches are causes and which are inherited, and whether the two
runs even saw the same input.

* A compared row **breaches** when a threshold is crossed (:func:`._thresholds.breaches`;
  one-element tensors only with ``check_scalars``, :func:`._thresholds.checks_row`) or it overflows: Inf/NaN on the NPU side where the golden tensor is finite (float16 overflow;
  status ``overflow``).
* The **upstream rows** of a row: for an input row, the output row of its producer; for an
  output row, the op's compared input rows when the inputs were dumped, else the output rows
  of its producers through the graph edges (control inputs skipped). A producer without a
  compared row (``_no_task`` ops, Identity, a tensor without golden) is looked through to
  its own producers (each op once: linear in ops, :class:`_LookThrough`); a stack pop (a TF 1.x
  loop gradient's StackPopV2) to the values pushed onto its stack, iteration k of the gradient
  loop to forward iteration n-1-k (:mod:`._loops`).
* **Execution order decides**: only upstream rows that ran *before* the row (``order``: dump
  timestamp, task id, graph position) count. An edge from a row that ran at or after it is
  a loop's back-edge (NextIteration -> Merge) or part of a cycle, and is ignored, so a cycle
  never makes every breach in it "propagated" and a fault in a loop is a root cause.
* A breaching row is **propagated** when a row upstream of it, transitively, breaches (an
  inherited error may stay under the thresholds for a few ops, e.g. through a softmax, and
  cross them again after a reduction), or when one of its upstream rows is at least as far
  from its golden tensor (relative Euclidean distance) as the row itself, even within the
  thresholds (float16 ties flipping MaxPoolGrad's argmax change the gradients' direction by
  7%; BiasAddGrad's sum of them then differs in size by 1.4%), up to what its op class makes
  of that (:func:`allowance`; a selection -- Select, Relu, MaxPool, Slice -- may instead carry
  as much *absolute* error as its upstream rows). Otherwise it is a **root
  cause**: it introduces an error nothing it depends on carries. The verdict fails on root
  causes (overflows included) and on input inconsistency: every propagated row inherits an
  error from one of those, or from upstream error that stayed within the thresholds. The **first divergence**
  is the root cause earliest in execution order; the other root causes follow it.
* **Incomplete** (:func:`uncompared`): a row whose data is broken (an unreadable dump or
  golden file, a shape mismatch, a golden file without numbers, a worker that died on the
  file), an op with a dump file none of whose rows was compared (unless all its tensors
  hold no numbers: string, resource, variant), or no compared row at all. The verdict is
  then "incomplete" (exit 1) unless the caller allows uncompared rows: a comparison never
  passes on what it did not compare.
* **Input inconsistent**: a row of the very first inputs breaches (outputs of
  IteratorGetNext/GetNext/Data/Placeholder ops, or inputs fed by them), or both bundles carry
  ``fingerprints`` and their ``state`` or ``batch`` entries differ. Then nothing downstream
  is meaningful, and the verdict is "fail" whatever else the rows say.
"""
import math
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ._graph import Graph
from ._match import data_inputs, producer_of
from ._rows import REASON_NO_DUMP, REASON_NOT_SELECTED, Row
from ._loops import popped_iteration, stack_values
from ._thresholds import (UNIT_ROUNDOFF, Extent, Thresholds, breaches, cancellation_excess, checks_row,
                          magnitude_error, op_precision)
from ._worker import (REASON_DTYPE, REASON_DUMP, REASON_GOLDEN_FILE, REASON_SHAPE, REASON_SPECIAL_FILE,
                      REASON_WORKER_DIED)

__all__ = ["INPUT_OP_TYPES", "BROKEN_DATA_REASONS", "Analysis", "allowance", "analyse", "fingerprint_differences",
           "golden_norm", "uncompared"]

#: Op types whose outputs are the step's first inputs (the batch and the feeds).
INPUT_OP_TYPES = frozenset(("IteratorGetNext", "IteratorGetNextSync", "GetNext", "DynamicGetNext", "Data",
                            "Placeholder", "PlaceholderWithDefault", "RefData"))
#: Reason categories of rows whose input is broken: any one makes the comparison incomplete.
BROKEN_DATA_REASONS = frozenset((REASON_DUMP, REASON_GOLDEN_FILE, REASON_SHAPE, REASON_SPECIAL_FILE,
                                 REASON_WORKER_DIED))
_MAX_DETAIL = 5
#: Rows without a dump file that do not make a comparison incomplete: nothing was dumped there.
_NOT_DUMPED = (REASON_NO_DUMP, REASON_NOT_SELECTED)
#: Rows one look-through answer keeps (bounds the analysis of very wide ops without a row).
_MAX_UPSTREAM = 1024


class Analysis(object):
    def __init__(self) -> None:
        self.root_causes = []  # type: List[Row]
        self.input_inconsistent = False
        self.input_detail = []  # type: List[str]
        self.incomplete = []  # type: List[str]


class _LookThrough(object):
    """Compared output rows that feed an edge, looking through ops without one, memoised per
    op: each op is solved once (strongly connected components, so a cycle of ops without a
    compared row is one component sharing one answer), which keeps the analysis linear in
    ops; an answer keeps at most :data:`_MAX_UPSTREAM` rows. A stack pop is looked through to
    the values pushed onto its stack (:mod:`._loops`); :meth:`popped` tells which rows of an
    answer were reached that way."""

    def __init__(self, graph: Graph, outputs: Dict[Tuple[str, int], Row]) -> None:
        self.graph = graph
        self.outputs = outputs
        self.stacks = stack_values(graph)
        self.memo = {}  # type: Dict[str, List[Row]]
        self.through_stack = {}  # type: Dict[str, Set[int]]

    def rows(self, name: str, slot: int) -> List[Row]:
        """The compared rows behind output ``slot`` of ``name``."""
        row = self._compared((name, slot))
        if row is not None:
            return [row]
        if name not in self.memo:
            self._solve(name)
        return self.memo[name]

    def popped(self, name: str, slot: int) -> Set[int]:
        """id() of the rows of :meth:`rows` reached through a stack pop."""
        return set() if self._compared((name, slot)) is not None else self.through_stack.get(name, set())

    def _compared(self, edge: Tuple[str, int]) -> Optional[Row]:
        row = self.outputs.get(edge)
        return row if row is not None and row.compared else None

    def _edges(self, name: str) -> List[Tuple[str, int]]:
        op = self.graph.op(name)
        return data_inputs(op) if op is not None else []

    def _through(self, name: str) -> List[str]:
        edges = self._edges(name) + self.stacks.get(name, [])
        return [src for src, slot in edges if self._compared((src, slot)) is None]

    def _solve(self, start: str) -> None:
        """Tarjan's algorithm, iterative, from ``start`` over the ops looked through."""
        index = {start: 0}  # type: Dict[str, int]
        low = {start: 0}  # type: Dict[str, int]
        stack, on_stack = [start], {start}
        work = [(start, iter(self._through(start)))]
        while work:
            name, successors = work[-1]
            for nxt in successors:
                if nxt in self.memo:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(self._through(nxt))))
                    break
                if nxt in on_stack:
                    low[name] = min(low[name], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[name])
                if low[name] == index[name]:
                    members = []  # type: List[str]
                    while not members or members[-1] != name:
                        members.append(stack.pop())
                        on_stack.discard(members[-1])
                    self._settle(members)

    def _settle(self, members: List[str]) -> None:
        found = {}  # type: Dict[int, Row]
        popped = set()  # type: Set[int]
        for name in members:
            for edge, via_stack in [(e, False) for e in self._edges(name)] + [
                    (e, True) for e in self.stacks.get(name, [])]:
                row = self._compared(edge)
                hits = [row] if row is not None else self.memo.get(edge[0], [])
                inherited = set() if row is not None else self.through_stack.get(edge[0], set())
                for hit in hits:
                    if len(found) < _MAX_UPSTREAM and id(hit) not in found:
                        found[id(hit)] = hit
                    if id(hit) in found and (via_stack or id(hit) in inherited):
                        popped.add(id(hit))
        answer = list(found.values())
        for name in members:
            self.memo[name] = answer
            self.through_stack[name] = popped


def _link_upstream(rows: Sequence[Row], graph: Graph) -> None:
    """Every row's ``upstream``: the compared rows it depends on that ran before it."""
    outputs = {(r.npu_op, r.slot): r for r in rows if r.direction == "output" and r.tensor}
    inputs = {}  # type: Dict[str, List[Row]]
    for row in rows:
        if row.direction == "input" and row.compared:
            inputs.setdefault(row.npu_op, []).append(row)
    look = _LookThrough(graph, outputs)
    # a loop body's rows, one per iteration: iteration k of an op reads iteration k of its producers
    iterations = {(r.npu_op, r.slot, r.iteration): r for r in rows
                  if r.direction == "output" and r.tensor and r.iteration is not None}
    pushes = {}  # type: Dict[Tuple[str, int], int]
    for npu_op, slot, iteration in iterations:
        pushes[(npu_op, slot)] = max(pushes.get((npu_op, slot), 0), iteration + 1)
    edges_of = {}  # type: Dict[str, List[Tuple[str, int]]]  # an op's inputs, parsed once for all its rows
    for row in rows:
        edges = edges_of.get(row.npu_op)
        if edges is None:
            op = graph.op(row.npu_op)
            edges = edges_of[row.npu_op] = data_inputs(op) if op is not None else []
        if row.direction == "input":
            edges = edges[row.slot:row.slot + 1]
        elif row.npu_op in inputs and row.iteration is None:
            row.upstream = _earlier(row, inputs[row.npu_op])
            continue
        found = []  # type: List[Row]
        for edge in edges:
            popped = look.popped(*edge)
            for upstream in look.rows(*edge):
                if row.iteration is not None and iterations:
                    upstream = _same_or_previous(upstream, row, iterations, id(upstream) in popped, pushes)
                found.append(upstream)
        row.upstream = _earlier(row, found)


def _same_or_previous(upstream: Row, row: Row, iterations: Dict[Tuple[str, int, Optional[int]], Row],
                      popped: bool = False, pushes: Optional[Dict[Tuple[str, int], int]] = None) -> Row:
    """A loop-body producer's row that iteration ``row.iteration`` read: the same iteration when it
    ran before, else the latest earlier one (a loop-carried value comes from the previous iteration);
    a value ``popped`` from a stack: the forward iteration that pushed it (last in, first out)."""
    if upstream.iteration is None or row.iteration is None:
        return upstream
    start = row.iteration
    if popped and pushes:
        start = popped_iteration(row.iteration, pushes.get((upstream.npu_op, upstream.slot), 0))
    for iteration in range(start, -1, -1):
        candidate = iterations.get((upstream.npu_op, upstream.slot, iteration))
        if candidate is not None and candidate.order < row.order:
            return candidate
    return upstream


def _earlier(row: Row, found: Sequence[Row]) -> List[Row]:
    """``found`` without duplicates and without rows that ran at or after ``row``: a loop's
    back-edge (NextIteration -> Merge) or any cycle is not a cause of what ran before it."""
    kept = {}  # type: Dict[int, Row]
    for upstream in found:
        if upstream.order < row.order:
            kept.setdefault(id(upstream), upstream)
    return list(kept.values())


def _distance(row: Row) -> Optional[float]:
    value = (row.metrics or {}).get("RelativeEuclideanDistance")
    return None if value is None or math.isnan(value) else value


def golden_norm(row: Row) -> Optional[float]:
    """The Frobenius norm of the row's golden tensor, from the metrics compare already has:
    RootMeanSquareError * sqrt(n) / RelativeEuclideanDistance = sqrt(sum of golden squares)
    (no second pass over the tensor); when the NPU tensor equals its golden (distance 0), from the
    golden mean and standard deviation; None when neither is known."""
    metrics = row.metrics or {}
    count = _elements(row.original_shape)
    rmse, distance = metrics.get("RootMeanSquareError"), metrics.get("RelativeEuclideanDistance")
    if rmse is not None and distance is not None and distance > 0 and math.isfinite(rmse * distance):
        return rmse * math.sqrt(count) / distance
    try:  # equal tensors (a float32 weight): the golden mean and std (0 under 0.001, as msaccucmp prints them)
        mean, std = row.std[1]
        norm = math.sqrt(count * (mean * mean + std * std))
    except (TypeError, ValueError, IndexError):
        return None
    return norm if norm > 0 and math.isfinite(norm) else None


def _extent(row: Row) -> Extent:
    norm = golden_norm(row)
    return Extent(_elements(row.original_shape), -1.0 if norm is None else norm, tuple(row.original_shape))


def allowance(row: Row) -> Optional[float]:
    """How many times the largest upstream distance the row's own may be (None: any inherited
    error explains it): its class's factor, for a reduction times its cancellation excess
    (:func:`._thresholds.cancellation_excess`) when that is above 1."""
    klass, factor = op_precision(row.op_type, row.direction, row.slot)
    if klass != "reduction" or factor is None:
        return factor
    excess = cancellation_excess(row.op_type, _extent(row), [_extent(u) for u in row.upstream])
    return factor * max(1.0, excess or 1.0)


def _explained(row: Row) -> bool:
    """True when the row's error is what the error it inherits legitimately becomes in an op
    of its class (:func:`allowance`): its relative Euclidean distance is at most the allowance
    times the largest one upstream (any upstream error for a sign-sensitive op), even when that
    error stayed within the thresholds there (a direction error turns into a size error in a
    reduction: BiasAddGrad, Conv2DBackpropFilter after MaxPoolGrad; Adam's first update is
    lr * sign(gradient); a matrix product whose terms cancel amplifies its inputs' error); for a
    selection also when its absolute error is (:func:`_selects_inherited`)."""
    own = _distance(row)
    inherited = [d for d in (_distance(u) for u in row.upstream) if d is not None]
    if own is None or not inherited:
        return False
    factor = allowance(row)
    if factor is None:
        return max(inherited) > 0
    if max(inherited) * factor >= own:
        return True
    return op_precision(row.op_type, row.direction, row.slot)[0] == "selection" and _selects_inherited(row, factor)


def _absolute_error(row: Row) -> Optional[float]:
    """||npu - golden||, the Frobenius norm of the row's error: RootMeanSquareError * sqrt(n)."""
    rmse = (row.metrics or {}).get("RootMeanSquareError")
    if rmse is None or not math.isfinite(rmse):
        return None
    return rmse * math.sqrt(_elements(row.original_shape))


def _selects_inherited(row: Row, factor: float) -> bool:
    """A selection's output elements are some of its inputs' elements, so its error is at most
    theirs, ``sqrt(sum ||e_i||^2)`` over its upstream rows, however small the subset and so
    however large its relative error (a Select keeping one tiny logit among zeros), plus its own
    output's rounding when it runs in a narrower dtype than its input (float32 in, float16 out:
    at most the dtype's unit roundoff times the golden norm)."""
    own = _absolute_error(row)
    inherited = [e for e in (_absolute_error(u) for u in row.upstream) if e is not None]
    if own is None or not inherited:
        return False
    rounding = UNIT_ROUNDOFF.get(row.npu_dtype, 0.0) * (golden_norm(row) or 0.0)
    return factor * math.sqrt(sum(e * e for e in inherited)) + rounding >= own


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def _tainted(rows: Sequence[Row]) -> Dict[int, bool]:
    """id(row) -> True when the row breaches or any row upstream of it, transitively, does
    (an error can hide under the thresholds for a few ops and cross them again later).
    Upstream rows ran earlier (:func:`_earlier`), so one pass in execution order does it."""
    state = {}  # type: Dict[int, bool]
    for row in sorted(rows, key=lambda r: r.order):
        state[id(row)] = bool(row.breached) or any(state.get(id(u), False) for u in row.upstream)
    return state


def _is_first_input(row: Row, graph: Graph) -> bool:
    if row.direction == "output":
        return row.op_type in INPUT_OP_TYPES
    op = graph.op(row.npu_op)
    edges = data_inputs(op) if op is not None else []
    if row.slot >= len(edges):
        return False
    producer = graph.op(producer_of(graph, *edges[row.slot])[0])
    return producer is not None and producer.type in INPUT_OP_TYPES


def _describe(row: Row) -> str:
    metrics = row.metrics or {}
    return "{} differs from its golden tensor ({}; cosine {}, magnitude {})".format(
        row.tensor, ", ".join(row.breached), _fmt(metrics.get("CosineSimilarity")), _fmt(magnitude_error(metrics)))


def _fmt(value: Optional[float]) -> str:
    return "NaN" if value is None else "{:.6g}".format(value)


def _entries_by_name(section: Any) -> Dict[str, Any]:
    found = {}
    for position, entry in enumerate(section if isinstance(section, list) else []):
        if isinstance(entry, dict):
            key = entry.get("name", position)
            found[str(key)] = {k: entry.get(k) for k in ("dtype", "shape", "sha256")}
        else:
            found[str(position)] = entry
    return found


def fingerprint_differences(npu: Optional[Dict[str, Any]], golden: Optional[Dict[str, Any]]) -> List[str]:
    """What differs between two bundle.json ``fingerprints`` sections (empty when either
    bundle has none): one line per state or batch entry that is missing on a side or differs."""
    left = (npu or {}).get("fingerprints")
    right = (golden or {}).get("fingerprints")
    if not isinstance(left, dict) or not isinstance(right, dict):
        return []
    lines = []
    for section in ("state", "batch"):
        a, b = _entries_by_name(left.get(section)), _entries_by_name(right.get(section))
        for name in sorted(set(a) | set(b)):
            if name not in b:
                lines.append("fingerprints.{}: {} only in the NPU bundle".format(section, name))
            elif name not in a:
                lines.append("fingerprints.{}: {} only in the golden bundle".format(section, name))
            elif a[name] != b[name]:
                lines.append("fingerprints.{}: {} differs (NPU {}, golden {})".format(
                    section, name, _short(a[name]), _short(b[name])))
    return lines


def _short(entry: Any) -> str:
    if isinstance(entry, dict):
        digest = entry.get("sha256")
        return "{} {} sha256 {}".format(entry.get("dtype"), entry.get("shape"),
                                        digest[:12] if isinstance(digest, str) else digest)
    return str(entry)


def analyse(rows: Sequence[Row], graph: Graph, thresholds: Thresholds,
            npu_bundle: Optional[Dict[str, Any]] = None, golden_bundle: Optional[Dict[str, Any]] = None) -> Analysis:
    """Set every row's ``breached``, ``propagated`` and ``status``; return the root causes
    (execution order) and the input-consistency verdict (see the module doc)."""
    result = Analysis()
    for row in rows:
        if row.compared:
            if checks_row(_elements(row.original_shape), thresholds):
                row.breached = breaches(row.metrics or {}, thresholds)
            if row.overflow:
                row.breached.insert(0, "overflow")
    _link_upstream(rows, graph)
    tainted = _tainted(rows)
    for row in sorted(rows, key=lambda r: r.order):
        if not row.compared:
            row.status = "not_compared"
            continue
        if not row.breached:
            row.status = "ok"
            continue
        row.propagated = any(tainted.get(id(u), False) for u in row.upstream) or _explained(row)
        row.status = "overflow" if row.overflow else ("propagated" if row.propagated else "root_cause")
        if not row.propagated:
            result.root_causes.append(row)
        if _is_first_input(row, graph):
            result.input_inconsistent = True
            result.input_detail.append(_describe(row))
    result.incomplete = uncompared(rows)
    if golden_bundle is not None and golden_bundle is not npu_bundle:
        differences = fingerprint_differences(npu_bundle, golden_bundle)
        if differences:
            result.input_inconsistent = True
            result.input_detail.extend(differences)
    return result


def _holds_no_numbers(row: Row) -> bool:
    """Not compared because the NPU tensor holds no numbers (string, resource, variant)."""
    return row.reason.startswith(REASON_DTYPE + ": DT_")


def _broken(row: Row) -> bool:
    return row.reason_category in BROKEN_DATA_REASONS or (
        row.reason_category == REASON_DTYPE and not _holds_no_numbers(row))


def uncompared(rows: Sequence[Row]) -> List[str]:
    """Why the comparison is incomplete, one line per cause (empty: complete; module doc)."""
    compared = {row.npu_op for row in rows if row.compared}
    if not compared:
        return ["no row was compared ({} row(s))".format(len(rows))]
    broken = [row for row in rows if not row.compared and _broken(row)]
    missing = {}  # type: Dict[str, Row]
    for row in rows:
        if row.npu_op not in compared and row.reason_category not in _NOT_DUMPED and not _holds_no_numbers(row):
            missing.setdefault(row.npu_op, row)
    lines = []
    if broken:
        lines.append("{} row(s) with broken data: {}".format(len(broken), _examples(broken)))
    if missing:
        lines.append("{} op(s) with a dump file and no compared row: {}".format(
            len(missing), _examples(list(missing.values()))))
    return lines


def _examples(rows: Sequence[Row]) -> str:
    shown = ["{} ({})".format(row.tensor or row.npu_op, row.reason) for row in rows[:_MAX_DETAIL]]
    return "; ".join(shown) + (" ..." if len(rows) > _MAX_DETAIL else "")
