"""The HTML section of a replay (document part ``replay``, see :mod:`.replay`): per replayed row
its verdict (kernel / inherited / precision, or why it was not replayed) beside the network
error, the local errors against CPU float32 and float64, CPU float32's own error and the
tolerance. Every value from the document is HTML-escaped; missing parts are left out."""
import html
from typing import Any, Dict, Optional

__all__ = ["replay_html"]

_HEAD = ("row", "tensor", "original ops", "verdict", "network", "local vs CPU f32", "local vs CPU f64",
         "CPU f32 vs f64", "float16 vs f64", "tolerance")


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> str:
    return "{:.4g}".format(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _rel(part: Any) -> str:
    return _num(part.get("rel_euclid")) if isinstance(part, dict) else "-"


def _row_html(entry: Dict[str, Any]) -> str:
    verdict = entry.get("verdict")
    shown = ("<span class=\"replay-verdict replay-{0}\">{0}</span>".format(_esc(verdict)) if verdict else
             "<span class=\"muted\">not replayed: {}</span>".format(_esc(entry.get("reason"))))
    network = entry.get("network") if isinstance(entry.get("network"), dict) else {}
    cells = [_esc(entry.get("row")), "<code>{}</code>".format(_esc(entry.get("tensor"))),
             ", ".join("<code>{}</code>".format(_esc(o)) for o in entry.get("original_ops") or []) or "*", shown,
             _num(network.get("rel_euclid")), _rel(entry.get("local_f32")), _rel(entry.get("local_f64")),
             _rel(entry.get("cpu_f32_vs_f64")), _rel(entry.get("float16_vs_f64")), _num(entry.get("tolerance"))]
    return "<tr>{}</tr>".format("".join("<td>{}</td>".format(cell) for cell in cells))


def replay_html(doc: Dict[str, Any]) -> str:
    """The ``<section id="replay">`` of ``doc``, or "" when no replay was asked for."""
    part = doc.get("replay")  # type: Optional[Dict[str, Any]]
    if not isinstance(part, dict):
        return ""
    entries = [e for e in part.get("rows") or [] if isinstance(e, dict)]
    intro = ("<p>{}: each row's original TF op(s) rebuilt from the NPU bundle's TF graph and run on CPU with the "
             "NPU's dumped inputs (relative Euclidean distances). <b>kernel</b>: the NPU output is further from "
             "CPU than {} &times; what the op's precision explains (at least {}); <b>inherited</b>: within that, "
             "and an input breaches; <b>precision</b>: within that, float16/float32 rounding accounts for it."
             "</p>").format(_esc(part.get("requested")), _esc(part.get("factor")), _esc(part.get("floor")))
    note = "<p class=\"alert warn\">{}</p>".format(_esc(part["note"])) if part.get("note") else ""
    table = ("<table class=\"checks\" id=\"replay-rows\"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>".format(
        "".join("<th>{}</th>".format(_esc(h)) for h in _HEAD), "".join(_row_html(e) for e in entries))
        if entries else "")
    return "<section class=\"box\" id=\"replay\"><h2>Replay on CPU</h2>{}{}{}</section>".format(intro, note, table)
