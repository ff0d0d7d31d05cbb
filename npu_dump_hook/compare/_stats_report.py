"""The statistics compare's run and reports: the JSON document (schema ``npu_dump_hook/compare@1``
with ``"mode": "stats"``), the CSV (one line per tensor, both sides' statistics and their
differences) and the terminal summary. The rows are analysed by :func:`._analysis.analyse` with
the rows' score (largest difference / limit ratio of :mod:`.stats`) as their distance.
"""
import csv
import io
import math
import time
from typing import Any, Dict, List, Optional, Sequence

from .._inert import csv_cell, printable
from ._analysis import analyse
from ..formats.names import sanitize
from ._graph import Graph
from ._match import ground_truth, newest_per_op
from ._report import SCHEMA
from ._rows import Row
from ._selection import coverage_line, coverage_of_undumped, dump_layer_of_bundle
from ._thresholds import make_thresholds
from .stats import (VALUE_STATS, GoldenStats, StatsDetail, StatsThresholds, paused_cycle_collection, score_of,
                    stats_rows)

__all__ = ["run_stats_compare", "stats_csv_text", "stats_summary_text"]

_STATS = [name for name, _ in VALUE_STATS] + ["l2norm"]
_COUNTS = ("nan", "neg_inf", "pos_inf")
CSV_HEADER = (["Index", "OpType", "NPUDump", "GroundTruth", "TensorIndex", "GoldenTensor", "DataType", "Format",
               "Shape", "NPUCount", "GoldenCount"]
              + [h for name in _STATS for h in ("NPU" + name, "Golden" + name, name + "RelDiff")]
              + ["NanCountDiff", "NegInfCountDiff", "PosInfCountDiff", "Status", "Reason"])


_INF = float("inf")
_isfinite = math.isfinite


def _number(value: Any) -> Any:
    if value is None or value != value or value == _INF or value == -_INF:
        return None
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, float):
        return "{:.6g}".format(value)
    return str(value)


#: What a row document takes from the golden statistics, and its metric names (made once, not per row).
_GOLDEN_KEYS = tuple(["count"] + _STATS + list(_COUNTS))
_METRIC_NAMES = tuple((name + "RelDiff", name) for name in _STATS)


def _row_doc(row: Row, detail: StatsDetail) -> Dict[str, Any]:
    # _number inlined (a row document takes about 30 of them): a finite number, else None
    rel = {k: v if v is not None and _isfinite(v) else None for k, v in detail.rel_diff.items()}
    golden = detail.golden
    score = row.metrics.get("RelativeEuclideanDistance") if row.metrics else None
    return {"index": row.index, "order": row.order, "op_type": row.op_type, "npu_op": row.npu_op,
            "ground_truth": row.ground_truth, "tensor": row.tensor, "direction": row.direction, "slot": row.slot,
            "golden_tensor": detail.golden_tensor, "npu_dtype": row.npu_dtype, "golden_dtype": row.golden_dtype,
            "npu_format": detail.npu_format, "shape": list(row.shape), "original_shape": list(row.original_shape),
            "npu": {k: v if v is None or _isfinite(v) else None for k, v in detail.npu.items()},
            "golden_stats": {k: v if v is None or type(v) is int or _isfinite(v) else None  # an int of any size
                             for k, v in zip(_GOLDEN_KEYS, map(golden.get, _GOLDEN_KEYS))} if golden else None,
            "rel_diff": rel, "count_diff": detail.count_diff,
            "metrics": {metric: rel.get(name) for metric, name in _METRIC_NAMES},
            "score": score if score is not None and _isfinite(score) else None, "status": row.status,
            "breached": row.breached, "reason": row.reason, "note": detail.note, "timestamp": row.timestamp}


def stats_csv_text(doc: Dict[str, Any]) -> str:
    """The statistics CSV of a stats document (formula-like cells prefixed with ``'``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for row in doc["rows"]:
        npu, golden, rel, diffs = row["npu"], row["golden_stats"] or {}, row["rel_diff"], row["count_diff"]
        cells = [row["index"], row["op_type"], row["npu_op"], ",".join(row["ground_truth"]) or "*", row["tensor"],
                 row["golden_tensor"], row["npu_dtype"], row["npu_format"],
                 "[" + ",".join(str(d) for d in row["original_shape"]) + "]", npu.get("count"), golden.get("count")]
        for name in _STATS:
            cells += [npu.get(name), golden.get(name), rel.get(name)]
        cells += [diffs.get(name) for name in _COUNTS] + [row["status"], row["reason"] or row["note"]]
        writer.writerow([csv_cell(_cell(c)) for c in cells])
    return out.getvalue()


def _summary(rows: Sequence[Row], root_causes: Sequence[Row], analysis: Any, elapsed: float,
             incomplete: List[str], allow_uncompared: bool) -> Dict[str, Any]:
    reasons = {}  # type: Dict[str, int]
    for row in rows:
        if not row.compared:
            reasons[row.reason_category] = reasons.get(row.reason_category, 0) + 1
    compared = sum(1 for r in rows if r.compared)
    failed = bool(root_causes) or analysis.input_inconsistent
    blocked = bool(incomplete) and (not allow_uncompared or not compared)
    verdict = "fail" if failed else ("incomplete" if blocked else "pass")
    return {"rows": len(rows), "compared": compared, "not_compared": len(rows) - compared,
            "not_compared_reasons": reasons, "compared_flattened": 0,
            "breached": sum(1 for r in rows if r.breached), "root_causes": len(root_causes),
            "propagated": sum(1 for r in rows if r.status == "propagated"),
            "overflow": sum(1 for r in rows if r.status == "overflow"),
            "input_inconsistent": analysis.input_inconsistent, "input_inconsistent_detail": analysis.input_detail,
            "incomplete": bool(incomplete), "incomplete_detail": incomplete, "allow_uncompared": allow_uncompared,
            "verdict": verdict, "elapsed_s": elapsed}


def _first(row: Optional[Row], details: Dict[int, StatsDetail]) -> Optional[Dict[str, Any]]:
    if row is None:
        return None
    detail = details[id(row)]
    return {"row": row.number, "npu_op": row.npu_op, "op_type": row.op_type, "original_ops": row.ground_truth,
            "tensor": row.tensor, "golden_tensor": detail.golden_tensor, "breached": row.breached,
            "rel_diff": {k: _number(v) for k, v in detail.rel_diff.items()}, "count_diff": detail.count_diff,
            "inputs": [{"tensor": u.tensor, "row": u.number,
                        "rel_diff": {k: _number(v) for k, v in details[id(u)].rel_diff.items()}}
                       for u in row.upstream if id(u) in details]}


def run_stats_compare(graph: Graph, npu: Any, golden: GoldenStats, limits: StatsThresholds, started: float,
                      allow_uncompared: bool, ops: Any = None) -> Dict[str, Any]:
    """The document of ``npu`` (an NpuSide with stats CSVs) against ``golden``; ``ops``: a compiled
    pattern, only ops whose name or an original name matches."""
    with paused_cycle_collection():
        return _stats_document(graph, npu, golden, limits, started, allow_uncompared, ops)


def _stats_document(graph: Graph, npu: Any, golden: GoldenStats, limits: StatsThresholds, started: float,
                    allow_uncompared: bool, ops: Any = None) -> Dict[str, Any]:
    rows, details, unreadable = stats_rows(graph, npu.stats, golden, limits, ops)
    coverage = _choice(graph, npu)
    as_tensor_limits = make_thresholds({"cosine_min": None, "magnitude_err_max": None, "rel_euclid_max": 1.0,
                                        "max_rel_err": None, "mean_rel_err": None,
                                        "check_scalars": limits.check_scalars})
    analysis = analyse(rows, graph, as_tensor_limits, npu.bundle_json, golden.bundle_json)
    for row in rows:  # the names of the statistics crossed, not the stand-in distance
        if row.breached:
            crossed = score_of(details[id(row)].rel_diff, limits)[1]
            row.breached = (["overflow"] if row.overflow else []) + crossed
    incomplete = list(analysis.incomplete) + list(npu.skipped) + (
        ["{} stats CSV(s) unreadable: {}".format(len(unreadable), "; ".join(unreadable[:3]))] if unreadable else [])
    first = analysis.root_causes[0] if analysis.root_causes else None
    doc = {
        "schema": SCHEMA, "mode": "stats", "npu": npu.describe(), "golden": golden.describe(),
        "thresholds": limits.as_dict(),
        "summary": _summary(rows, analysis.root_causes, analysis, time.monotonic() - started, incomplete,
                            allow_uncompared),
        "first_divergence": _first(first, details),
        "root_causes": [r.number for r in analysis.root_causes],
        "rows": [_row_doc(r, details[id(r)]) for r in rows],
        "warnings": list(npu.warnings),
    }
    if coverage is not None:
        doc["coverage"] = coverage
    return doc


def _choice(graph: Graph, npu: Any) -> Optional[Dict[str, Any]]:
    """A ``dump_layer`` stats bundle's coverage: the graph's ops without a stats CSV are "not
    selected" unless dump_layer chose them (then missing); None for a full dump."""
    layer = dump_layer_of_bundle(npu.bundle_json)
    if not layer:
        return None
    dumped = set(newest_per_op(npu.stats))
    undumped = [(op.name, ground_truth(op)) for op in graph.ops if not op.no_task and sanitize(op.name) not in dumped]
    return coverage_of_undumped(len(dumped), undumped, layer)


def _rel_line(rel: Dict[str, Any]) -> str:
    return " ".join("{} {}".format(name, "NaN" if rel.get(name) is None else "{:.4g}".format(rel[name]))
                    for name in _STATS if name in rel)


def stats_summary_text(doc: Dict[str, Any], limits: StatsThresholds, top: int = 5) -> str:
    """The terminal summary of a stats document."""
    s = doc["summary"]
    lines = ["compare (statistics): NPU {} ({}) vs golden statistics {} ({})".format(
                 doc["npu"]["path"], doc["npu"]["kind"], doc["golden"]["path"], doc["golden"]["kind"]),
             "rows {}: {} compared, {} not compared{}".format(
                 s["rows"], s["compared"], s["not_compared"],
                 " (" + ", ".join("{} {}".format(k, v) for k, v in sorted(s["not_compared_reasons"].items())) + ")"
                 if s["not_compared_reasons"] else ""),
             "thresholds: " + limits.describe(),
             "verdict: {}: {} row(s) breach: {} root cause(s), {} propagated, {} overflow ({:.2f} s)".format(
                 s["verdict"].upper(), s["breached"], s["root_causes"], s["propagated"], s["overflow"],
                 s["elapsed_s"])]
    lines.extend(coverage_line(doc.get("coverage")))  # a dump_layer stats bundle: what was left out by choice
    if s["incomplete"]:
        lines.append("INCOMPLETE: " + "; ".join(s["incomplete_detail"][:3]))
    if s["input_inconsistent"]:
        lines.append("INPUT INCONSISTENT: " + "; ".join(s["input_inconsistent_detail"][:3]))
    first = doc["first_divergence"]
    if first:
        lines.append("first divergence: row {} {} ({}) {}".format(first["row"], first["npu_op"], first["op_type"],
                                                                first["tensor"]))
        lines.append("  original ops: " + (", ".join(first["original_ops"]) or "*"))
        lines.append("  rel. diff: {}; breached: {}".format(_rel_line(first["rel_diff"]), ", ".join(first["breached"])))
        for up in first["inputs"][:3]:
            lines.append("  input {} (row {}): {}".format(up["tensor"], up["row"], _rel_line(up["rel_diff"])))
    worst = sorted((r for r in doc["rows"] if r["breached"]),
                   key=lambda r: (-(math.inf if r["score"] is None else r["score"]), r["order"]))
    if worst and top:
        lines.append("top {} worst:".format(min(top, len(worst))))
        for row in worst[:top]:
            lines.append("  {:>5} {:<11} {} {}".format(row["index"], row["status"], _rel_line(row["rel_diff"]),
                                                        row["tensor"]))
    return "\n".join(printable(line) for line in lines)
