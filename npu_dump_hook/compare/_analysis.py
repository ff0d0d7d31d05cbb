"""Which rows breach, which breaches are causes and which are inherited, and whether the two
runs even saw the same input.

* A compared row **breaches** when a threshold is crossed (:func:`._thresholds.breaches`;
  one-element tensors only with ``check_scalars``, :func:`._thresholds.checks_row`) or it overflows: Inf/NaN on the NPU side where the golden tensor is finite (float16 overflow;
  status ``overflow``).
* The **upstream rows** of a row: for an input row, the output row of its producer; for an
  output row, the op's compared input rows when the inputs were dumped, else the output rows
  of its producers through the graph edges (control inputs skipped). A producer without a
  compared row (``_no_task`` ops, Identity, a tensor without golden) is looked through to
  its own producers.
* A breaching row is **propagated** when a row upstream of it, transitively, breaches (an
  inherited error may stay under the thresholds for a few ops, e.g. through a softmax, and
  cross them again after a reduction), or when one of its upstream rows is at least as far
  from its golden tensor (relative Euclidean distance) as the row itself, even within the
  thresholds (float16 ties flipping MaxPoolGrad's argmax change the gradients' direction by
  7%; BiasAddGrad's sum of them then differs in size by 1.4%). Otherwise it is a **root
  cause**: it introduces an error nothing it depends on carries. The verdict fails on root
  causes (overflows included) and on input inconsistency: every propagated row inherits an
  error from one of those, or from upstream error that stayed within the thresholds. The **first divergence**
  is the root cause earliest in execution order; the other root causes follow it.
* **Input inconsistent**: a row of the very first inputs breaches (outputs of
  IteratorGetNext/GetNext/Data/Placeholder ops, or inputs fed by them), or both bundles carry
  ``fingerprints`` and their ``state`` or ``batch`` entries differ. Then nothing downstream
  is meaningful, and the verdict is "fail" whatever else the rows say.
"""
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._graph import Graph
from ._match import data_inputs, producer_of
from ._rows import Row
from ._thresholds import Thresholds, breaches, checks_row, magnitude_error

__all__ = ["INPUT_OP_TYPES", "Analysis", "analyse", "fingerprint_differences"]

#: Op types whose outputs are the step's first inputs (the batch and the feeds).
INPUT_OP_TYPES = frozenset(("IteratorGetNext", "IteratorGetNextSync", "GetNext", "DynamicGetNext", "Data",
                            "Placeholder", "PlaceholderWithDefault", "RefData"))
_MAX_LOOK_THROUGH = 10000


class Analysis(object):
    def __init__(self) -> None:
        self.root_causes = []  # type: List[Row]
        self.input_inconsistent = False
        self.input_detail = []  # type: List[str]


def _upstream_outputs(graph: Graph, outputs: Dict[Tuple[str, int], Row], name: str, slot: int) -> List[Row]:
    """Compared output rows that feed output ``slot`` of ``name``, looking through ops without one."""
    found = []  # type: List[Row]
    seen = set()
    stack = [(name, slot)]
    while stack and len(seen) < _MAX_LOOK_THROUGH:
        edge = stack.pop()
        if edge in seen:
            continue
        seen.add(edge)
        row = outputs.get(edge)
        if row is not None and row.compared:
            found.append(row)
            continue
        op = graph.op(edge[0])
        if op is not None:
            stack.extend(data_inputs(op))
    return found


def _link_upstream(rows: Sequence[Row], graph: Graph) -> None:
    outputs = {(r.npu_op, r.slot): r for r in rows if r.direction == "output" and r.tensor}
    inputs = {}  # type: Dict[str, List[Row]]
    for row in rows:
        if row.direction == "input" and row.compared:
            inputs.setdefault(row.npu_op, []).append(row)
    for row in rows:
        op = graph.op(row.npu_op)
        edges = data_inputs(op) if op is not None else []
        if row.direction == "input":
            row.upstream = _upstream_outputs(graph, outputs, *edges[row.slot]) if row.slot < len(edges) else []
        elif row.npu_op in inputs:
            row.upstream = inputs[row.npu_op]
        else:
            row.upstream = [u for edge in edges for u in _upstream_outputs(graph, outputs, *edge)]


def _distance(row: Row) -> Optional[float]:
    value = (row.metrics or {}).get("RelativeEuclideanDistance")
    return None if value is None or math.isnan(value) else value


def _explained(row: Row) -> bool:
    """True when an upstream row is at least as far from its golden tensor (relative
    Euclidean distance) as this one: this row's error can be the one it inherits, even when
    that error stayed within the thresholds there (a direction error turns into a size error
    in a reduction: BiasAddGrad, Conv2DBackpropFilter after MaxPoolGrad)."""
    own = _distance(row)
    inherited = [d for d in (_distance(u) for u in row.upstream if u is not row) if d is not None]
    return own is not None and bool(inherited) and max(inherited) >= own


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def _tainted(rows: Sequence[Row]) -> Dict[int, bool]:
    """id(row) -> True when the row breaches or any row upstream of it, transitively, does
    (an error can hide under the thresholds for a few ops and cross them again later)."""
    state = {}  # type: Dict[int, bool]
    for start in rows:
        stack = [(start, False)]
        while stack:
            row, expanded = stack.pop()
            key = id(row)
            if key in state and not expanded:
                continue
            if not expanded:
                state.setdefault(key, bool(row.breached))  # provisional: cuts cycles
                stack.append((row, True))
                stack.extend((u, False) for u in row.upstream if id(u) not in state)
            else:
                state[key] = bool(row.breached) or any(state.get(id(u), False) for u in row.upstream)
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
        row.propagated = any(tainted.get(id(u), False) for u in row.upstream if u is not row) or _explained(row)
        row.status = "overflow" if row.overflow else ("propagated" if row.propagated else "root_cause")
        if not row.propagated:
            result.root_causes.append(row)
        if _is_first_input(row, graph):
            result.input_inconsistent = True
            result.input_detail.append(_describe(row))
    if golden_bundle is not None and golden_bundle is not npu_bundle:
        differences = fingerprint_differences(npu_bundle, golden_bundle)
        if differences:
            result.input_inconsistent = True
            result.input_detail.extend(differences)
    return result
