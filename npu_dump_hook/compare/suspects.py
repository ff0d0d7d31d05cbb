"""Suspect selection: the ops a targeted second dump (``dump_layer``) should hold, from a
comparison (statistics or tensors) or the checks that need no golden (docs/compare.md, "Suspects").

Primary suspects, in this order, at most ``limit`` of them:

1. the root causes, the first divergence first (``first_divergence``, ``root_cause``);
2. the NaN/Inf origins of ``checks.nan_inf`` (``nan_inf_origin``), in execution order;
3. the overflowing ops of ``checks.overflow`` (``overflow``), in time order;
4. only when there is none of these: the breached rows, worst score first (``breached``), e.g.
   a comparison whose runs saw different inputs. Propagated rows are not suspects otherwise:
   their error is the root cause's, and dumping them would only add bytes.

An op picked for one reason lists the others that apply to it too (an overflowing op is often a
NaN/Inf origin and the first divergence as well).

Then the producers of every primary, up to :data:`PRODUCER_DEPTH` ops upstream (``producer``):
with them dumped, the tensor compare sees the inputs of the suspect and tells a root cause from
an error it inherited. Cast/TransData nodes are walked through and ops that run no task (Data,
Const, Variable, Identity) end the walk: they have no dump file.

Names are what ``dump_layer`` takes: original TF op names. A fused node gives its original ops
(``_datadump_original_op_names``), an inserted Cast/TransData the op whose output it converts.
"""
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..suspects import SUSPECTS_SCHEMA
from ._graph import Graph
from ._match import data_inputs, ground_truth, producer_of

__all__ = ["build_suspects", "DEFAULT_SUSPECTS", "PRODUCER_DEPTH"]

#: How many primary suspects ``compare --suspects-out`` keeps unless ``--suspects N`` says otherwise.
DEFAULT_SUSPECTS = 5
#: How far upstream the producers of a primary suspect are added (1: the ops whose outputs it reads).
PRODUCER_DEPTH = 1


class _Picked(object):
    def __init__(self) -> None:
        self.order = []  # type: List[str]
        self.entries = {}  # type: Dict[str, Dict[str, Any]]

    def add(self, names: Sequence[str], reason: str, npu_op: Optional[str], of: Optional[str] = None) -> bool:
        added = False
        for name in names:
            entry = self.entries.get(name)
            if entry is None:
                entry = self.entries[name] = {"name": name, "rank": len(self.order) + 1, "reasons": [],
                                              "npu_op": npu_op, "of": of}
                self.order.append(name)
                added = True
            if reason not in entry["reasons"]:
                entry["reasons"].append(reason)
        return added


def _names(graph: Graph, npu_op: Optional[str], fallback: Sequence[str] = ()) -> List[str]:
    """Original TF op names of NPU op ``npu_op`` (an inserted Cast/TransData: its real producer's)."""
    if npu_op is None:
        return [n for n in fallback if n]
    real, _ = producer_of(graph, npu_op, 0)
    op = graph.op(real)
    if op is None:
        return [n for n in fallback if n] or [npu_op]
    return [n for n in ground_truth(op) if n] or [real]


def _primaries(doc: Dict[str, Any]) -> List[Tuple[str, Optional[str], Sequence[str]]]:
    """(reason, NPU op, original ops) of every primary candidate, in rank order."""
    rows = doc.get("rows") or []
    found = []  # type: List[Tuple[str, Optional[str], Sequence[str]]]
    for number in doc.get("root_causes") or []:
        row = rows[number]
        found.append(("first_divergence" if not found else "root_cause", row["npu_op"], row.get("ground_truth") or ()))
    checks = doc.get("checks") or {}
    for origin in ((checks.get("nan_inf") or {}).get("origins") or []):
        found.append(("nan_inf_origin", origin["npu_op"], origin.get("original_ops") or ()))
    for entry in ((checks.get("overflow") or {}).get("entries") or []):
        if entry.get("npu_op") or entry.get("original_ops"):
            found.append(("overflow", entry.get("npu_op"), entry.get("original_ops") or ()))
    if found:
        return found
    others = [r for r in rows if r.get("breached")]
    others.sort(key=lambda r: (-_score(r), r.get("order") or 0))
    found.extend(("breached", r["npu_op"], r.get("ground_truth") or ()) for r in others)
    return found


def _score(row: Dict[str, Any]) -> float:
    score = row.get("score")
    if isinstance(score, (int, float)) and not math.isnan(score):
        return float(score)
    return math.inf if score is None and row.get("status") == "overflow" else 0.0


def _producers(graph: Graph, npu_op: str, depth: int) -> List[str]:
    """NPU ops up to ``depth`` producers upstream of ``npu_op`` that run a task, nearest first."""
    found, frontier, seen = [], [npu_op], {npu_op}  # type: List[str], List[str], set
    for _ in range(depth):
        following = []  # type: List[str]
        for name in frontier:
            op = graph.op(name)
            for source, slot in (data_inputs(op) if op is not None else ()):
                real, _ = producer_of(graph, source, slot)
                producer = graph.op(real)
                if real in seen or producer is None or producer.no_task:
                    continue
                seen.add(real)
                found.append(real)
                following.append(real)
        frontier = following
    return found


def build_suspects(doc: Dict[str, Any], graph: Graph, limit: int = DEFAULT_SUSPECTS,
                   depth: int = PRODUCER_DEPTH) -> Optional[Dict[str, Any]]:
    """The suspects document (:mod:`npu_dump_hook.suspects`) of the comparison ``doc`` over
    ``graph``; None when there is no suspect (nothing breached, no NaN/Inf, no overflow)."""
    picked = _Picked()
    primaries = []  # type: List[Tuple[str, str]]
    for reason, npu_op, originals in _primaries(doc):
        names = _names(graph, npu_op, originals)
        if len(primaries) >= limit and any(name not in picked.entries for name in names):
            continue  # no room for another suspect; an op already picked still gets this reason
        if picked.add(names, reason, npu_op):
            primaries.append((npu_op or names[0], names[0]))
    for npu_op, first_name in primaries:
        for producer in _producers(graph, npu_op, depth):
            picked.add(_names(graph, producer), "producer", producer, of=first_name)
    if not picked.order:
        return None
    first = doc.get("first_divergence")
    return {
        "schema": SUSPECTS_SCHEMA,
        "dump_layer": " ".join(picked.order),
        "ops": [picked.entries[name] for name in picked.order],
        "limit": limit,
        "producer_depth": depth,
        "source": {"mode": doc.get("mode", "tensor") if doc.get("golden") is not None else "checks",
                   "npu": (doc.get("npu") or {}).get("path"), "golden": (doc.get("golden") or {}).get("path"),
                   "verdict": (doc.get("summary") or {}).get("verdict")},
        "first_divergence": None if first is None else {
            "npu_op": first["npu_op"], "op_type": first.get("op_type"), "original_ops": list(first["original_ops"])},
    }
