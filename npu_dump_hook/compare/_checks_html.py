"""The HTML section of the checks that need no golden (document part ``checks``, see
:mod:`.checks`): the NaN/Inf origins with the ops they propagate to, and the overflow report
in time order. Every value from the document is HTML-escaped; missing parts are left out."""
import html
from typing import Any, Dict, List

__all__ = ["checks_html"]


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _names(names: Any) -> str:
    if not isinstance(names, list) or not names:
        return "*"
    return ", ".join("<code>{}</code>".format(_esc(name)) for name in names)


def _table(head: List[str], rows: List[List[str]]) -> str:
    return "<table class=\"checks\"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>".format(
        "".join("<th>{}</th>".format(_esc(h)) for h in head),
        "".join("<tr>{}</tr>".format("".join("<td>{}</td>".format(cell) for cell in row)) for row in rows))


def _nan_inf_html(part: Dict[str, Any]) -> str:
    origins = [o for o in part.get("origins") or [] if isinstance(o, dict)]
    intro = "<p>{} of {} dumped ops hold NaN/Inf ({}); {} origin(s): the op's output is non-finite while every " \
            "input it read is finite.</p>".format(_esc(part.get("ops_nonfinite")), _esc(part.get("ops_checked")),
                                                   _esc(part.get("source")), len(origins))
    rows = []
    for origin in origins:
        tensors = "; ".join("{} (nan {}, -inf {}, +inf {} of {})".format(
            _esc(t.get("tensor")), _esc(t.get("nan")), _esc(t.get("neg_inf")), _esc(t.get("pos_inf")),
            _esc(t.get("count"))) for t in origin.get("tensors") or [] if isinstance(t, dict))
        rows.append([_esc(origin.get("order")), "<code>{}</code>".format(_esc(origin.get("npu_op"))),
                     _esc(origin.get("op_type")), _names(origin.get("original_ops")), tensors,
                     _esc(origin.get("inputs_checked")),
                     "{}: {}".format(_esc(origin.get("propagated")), _names(origin.get("propagates_to")))])
    table = _table(["order", "NPU op", "type", "original ops", "non-finite outputs", "inputs checked",
                    "propagates to"], rows) if rows else ""
    return "<h3>NaN/Inf origin</h3>" + intro + table


def _overflow_html(part: Dict[str, Any]) -> str:
    entries = [e for e in part.get("entries") or [] if isinstance(e, dict)]
    intro = "<p>{} overflow entr(ies) in {} Opdebug file(s), in time order: the first is the one to look " \
            "at.</p>".format(len(entries), _esc(part.get("opdebug_files")))
    rows = [[_esc(e.get("order")), _esc(e.get("timestamp")), _esc(e.get("unit")), _esc(e.get("task_id")),
             _esc(e.get("stream_id")), "<code>{}</code>".format(_esc(e.get("npu_op") or "-")), _esc(e.get("op_type")),
             _names(e.get("original_ops")), _esc(e.get("status"))] for e in entries]
    table = _table(["order", "timestamp", "unit", "task", "stream", "NPU op", "type", "original ops", "status"],
                   rows) if rows else ""
    return "<h3>Overflow (enable_dump_debug)</h3>" + intro + table


def checks_html(doc: Dict[str, Any]) -> str:
    """The ``<section id="checks">`` of ``doc``, or "" when it has no checks that ran."""
    checks = doc.get("checks")
    if not isinstance(checks, dict):
        return ""
    parts = []
    if isinstance(checks.get("nan_inf"), dict):
        parts.append(_nan_inf_html(checks["nan_inf"]))
    if isinstance(checks.get("overflow"), dict):
        parts.append(_overflow_html(checks["overflow"]))
    if not parts:
        return ""
    title = "Checks without a golden" if doc.get("golden") is None else "Overflow report"
    return "<section class=\"box\" id=\"checks\"><h2>{}</h2>{}</section>".format(title, "".join(parts))
