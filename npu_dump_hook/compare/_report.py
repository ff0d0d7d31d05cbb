"""Reports of a comparison: msaccucmp's CSV, the JSON document (schema
``npu_dump_hook/compare@1``, docs/compare.md) and the one-screen terminal summary."""
import csv
import io
import math
from typing import Any, Dict, List, Optional, Sequence

from .metrics import METRIC_NAMES
from .._inert import csv_cell, printable
from ._analysis import allowance
from ._rows import Row
from ._thresholds import Thresholds, checks_row, magnitude_error, op_precision, severity

__all__ = ["SCHEMA", "CSV_HEADER", "csv_text", "row_doc", "summary_doc", "first_divergence_doc",
           "terminal_summary"]

SCHEMA = "npu_dump_hook/compare@1"
#: msaccucmp's header, names and order as it writes them (``DataType`` twice: NPU, golden).
CSV_HEADER = ["Index", "OpType", "NPUDump", "DataType", "Address", "GroundTruth", "DataType", "TensorIndex",
              "Shape"] + list(METRIC_NAMES) + ["CompareFailReason"]
_NAN = "NaN"
_NUMERIC = [name for name in METRIC_NAMES if name != "StandardDeviation"]


def _shape_cell(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _truth_cell(row: Row) -> str:
    return ",".join(row.ground_truth) or "*"


def _csv_cells(row: Row) -> List[str]:
    head = [str(row.index), row.op_type, row.npu_op, row.npu_dtype, row.address, _truth_cell(row),
            row.golden_dtype, row.tensor or _NAN, _shape_cell(row.original_shape) if row.tensor else _NAN]
    metrics = row.cells if row.cells is not None and not row.reason else [_NAN] * len(METRIC_NAMES)
    return head + list(metrics) + [row.fail_reason]


def csv_text(rows: Sequence[Row]) -> str:
    """The CSV msaccucmp would write for these rows (its header, its row order); cells that
    a spreadsheet would take for a formula are prefixed with ``'`` (:func:`npu_dump_hook._inert.csv_cell`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for row in rows:
        writer.writerow([csv_cell(cell) for cell in _csv_cells(row)])
    return out.getvalue()


def _json_number(value: Optional[float]) -> Optional[float]:
    """JSON has no NaN/Infinity: they become null (the CSV keeps msaccucmp's text)."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return float(value)


def _metrics_doc(row: Row) -> Dict[str, Optional[float]]:
    values = row.metrics or {}
    return {name: _json_number(values.get(name)) for name in _NUMERIC}


def row_doc(row: Row) -> Dict[str, Any]:
    std = None
    if row.std is not None and row.compared:
        std = [[_json_number(v) for v in pair] for pair in row.std]
    return {
        "index": row.index, "order": row.order, "op_type": row.op_type, "npu_op": row.npu_op,
        "npu_dtype": row.npu_dtype, "address": row.address, "ground_truth": list(row.ground_truth),
        "golden_dtype": row.golden_dtype, "tensor": row.tensor, "direction": row.direction, "slot": row.slot,
        "shape": list(row.shape), "npu_format": row.npu_format, "original_shape": list(row.original_shape),
        "metrics": _metrics_doc(row), "std": std, "fail_reason": row.fail_reason, "status": row.status,
        "timestamp": row.timestamp,
        "golden_tensor": "{}:{}".format(*row.golden) if row.golden else None,
        "magnitude_error": _json_number(magnitude_error(row.metrics)) if row.metrics else None,
        "breached": list(row.breached), "shape_note": row.shape_note, "iteration": row.iteration,
        "precision_class": op_precision(row.op_type, row.direction, row.slot)[0],
        "precision_allowance": _json_number(allowance(row)) if row.compared else None,
    }


def first_divergence_doc(row: Optional[Row]) -> Optional[Dict[str, Any]]:
    if row is None:
        return None
    return {"row": row.number, "npu_op": row.npu_op, "op_type": row.op_type, "original_ops": list(row.ground_truth),
            "tensor": row.tensor, "iteration": row.iteration, "metrics": _metrics_doc(row),
            "breached": list(row.breached),
            "inputs": [{"tensor": u.tensor, "row": u.number, "metrics": _metrics_doc(u)} for u in row.upstream]}


def summary_doc(rows: Sequence[Row], root_causes: Sequence[Row], inconsistent: bool, detail: Sequence[str],
                elapsed: float, incomplete: Sequence[str] = (), allow_uncompared: bool = False) -> Dict[str, Any]:
    """The summary; ``incomplete``: why the comparison is incomplete (:func:`._analysis.uncompared`)."""
    reasons = {}  # type: Dict[str, int]
    for row in rows:
        if not row.compared:
            reasons[row.reason_category] = reasons.get(row.reason_category, 0) + 1
    breached = [r for r in rows if r.breached]
    return {"rows": len(rows), "compared": sum(1 for r in rows if r.compared),
            "compared_flattened": sum(1 for r in rows if r.compared and r.shape_note),
            "not_compared": sum(reasons.values()), "not_compared_reasons": reasons,
            "breached": len(breached), "root_causes": len(root_causes),
            "propagated": sum(1 for r in breached if r.propagated),
            "overflow": sum(1 for r in breached if r.overflow),
            "input_inconsistent": inconsistent, "input_inconsistent_detail": list(detail),
            "incomplete": bool(incomplete), "incomplete_detail": list(incomplete),
            "allow_uncompared": allow_uncompared,
            "verdict": _verdict(bool(root_causes) or inconsistent, _incomplete(rows, incomplete, allow_uncompared)),
            "elapsed_s": round(elapsed, 3)}


def _incomplete(rows: Sequence[Row], incomplete: Sequence[str], allow_uncompared: bool) -> bool:
    """Incomplete unless allowed; nothing compared is never allowed."""
    return bool(incomplete) and (not allow_uncompared or not any(r.compared for r in rows))


def _verdict(failed: bool, incomplete: bool) -> str:
    if failed:
        return "fail"
    return "incomplete" if incomplete else "pass"


def _metric_line(row: Row) -> str:
    values = dict(row.metrics or {})
    values["MagnitudeError"] = magnitude_error(values)

    def fmt(name: str) -> str:
        value = values.get(name)
        return "NaN" if value is None else "{:.4g}".format(value)

    return "cos {} mag {} rel.eucl {} max.rel {} mean.rel {}".format(
        fmt("CosineSimilarity"), fmt("MagnitudeError"), fmt("RelativeEuclideanDistance"), fmt("MaxRelativeError"),
        fmt("MeanRelativeError"))


def _elements(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def terminal_summary(doc: Dict[str, Any], rows: Sequence[Row], root_causes: Sequence[Row],
                     thresholds: Thresholds, top: int = 5, width: int = 100) -> str:
    """About 20 lines: inputs, counts, verdict, first divergence with its inputs, other root
    causes, the ``top`` worst rows; control characters in names shown as escapes
    (:func:`npu_dump_hook._inert.printable`)."""
    s = doc["summary"]
    lines = ["compare: NPU {} ({}) vs golden {} ({})".format(doc["npu"]["path"], doc["npu"]["kind"],
                                                           doc["golden"]["path"], doc["golden"]["kind"]),
             "rows {}: {} compared, {} not compared{}".format(
                 s["rows"], s["compared"], s["not_compared"],
                 " (" + ", ".join("{} {}".format(k, v) for k, v in sorted(s["not_compared_reasons"].items())) + ")"
                 if s["not_compared_reasons"] else ""),
             "thresholds: " + thresholds.describe()]
    differences = doc.get("environment_differences") or []
    if differences:  # what changed between the two runs, before any metric
        lines[1:1] = ["environment: {} difference(s) between the two sides:".format(len(differences))] + [
            "  " + _clip(printable(d), width - 2) for d in differences[:8]] + (
            ["  ... (environment_differences in the JSON)"] if len(differences) > 8 else [])
    if s.get("compared_flattened"):
        lines.insert(len(lines) - 1, "  {} compared flattened (as msaccucmp: another shape with as many elements "
                                     "as the golden's; shape_note in the JSON)".format(s["compared_flattened"]))
    if doc.get("determinism") is not None:
        ops = doc["determinism"]["ops"]
        lines.append("determinism: {} op(s) whose outputs differ bit for bit{}".format(
            len(ops), ": first " + printable(ops[0]) + (", then " + ", ".join(printable(o) for o in ops[1:4]) +
                                                         (" ..." if len(ops) > 4 else "") if len(ops) > 1 else "")
            if ops else ""))
    verdict = s["verdict"].upper()
    lines.append("verdict: {}: {} row(s) breach: {} root cause(s), {} propagated, {} overflow ({:.2f} s)".format(
        verdict, s["breached"], s["root_causes"], s["propagated"], s["overflow"], s["elapsed_s"]))
    if s["breached"] and not s["root_causes"]:
        lines.append("  no root cause: every breach inherits an upstream error (as large, or what its op class makes "
                     "of it: a reduction, a second moment, a sign-sensitive op, a selection's absolute error; within "
                     "thresholds there, e.g. float16 ties flipping MaxPoolGrad)")
    if s.get("incomplete"):
        lines.append("INCOMPLETE: not everything dumped was compared{}:".format(
            " (allowed: --allow-uncompared)" if s["verdict"] != "incomplete" else
            "; the verdict cannot pass (--allow-uncompared to judge the compared rows only)"))
        lines.extend("  " + _clip(d, width - 2) for d in s["incomplete_detail"][:4])
    if s["input_inconsistent"]:
        lines.append("INPUT INCONSISTENT: the two runs did not see the same first inputs; nothing downstream is "
                     "meaningful:")
        lines.extend("  " + _clip(d, width - 2) for d in s["input_inconsistent_detail"][:4])
    if root_causes:
        first = root_causes[0]
        lines.append(_clip("first divergence: row {} {} ({}) {}:{}{}".format(
            first.number, first.npu_op, first.op_type, first.direction, first.slot,
            "" if first.iteration is None else " iteration {}".format(first.iteration)), width))
        lines.append(_clip("  original ops: " + (", ".join(first.ground_truth) or "*"), width))
        lines.append("  {}{}".format(_metric_line(first), " (overflow)" if first.overflow else ""))
        for up in first.upstream[:3]:
            lines.append(_clip("  input {} (row {}): {}".format(up.tensor, up.number, _metric_line(up)), width))
        if len(root_causes) > 1:
            lines.append(_clip("other root causes: " + ", ".join(
                "{} (row {})".format(r.tensor, r.number) for r in root_causes[1:6])
                + (" ..." if len(root_causes) > 6 else ""), width))
    compared = [r for r in rows if r.compared]
    ranked = [(severity(r.metrics or {}, thresholds), r) for r in compared
              if r.breached or checks_row(_elements(r.original_shape), thresholds)]
    worst = [r for score, r in sorted(ranked, key=lambda item: (-item[0], item[1].order)) if score > 0][:max(0, top)]
    if worst:
        lines.append("top {} worst:".format(len(worst)))
        for row in worst:
            lines.append(_clip("  {:>5} {:<12} {} {}".format(row.number, row.status, _metric_line(row), row.tensor),
                               width))
    return "\n".join(printable(line) for line in lines)
