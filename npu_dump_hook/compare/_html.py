"""The ``--html`` report: one self-contained HTML file for a compare document.

``render_html(doc)`` takes the JSON document of ``npu-dump-hook compare --json`` (schema
``npu_dump_hook/compare@1``, see the compare contract) and returns the text of one HTML page
that needs nothing at view time: CSS and JavaScript are inline, no font, script, image or
style is fetched, and the page holds no ``http(s)://`` address of its own.

What the page shows:

- written here, so it reads without JavaScript: the verdict, the NPU side (path, kind, graph,
  bundle, the dump step folder compared: ``npu.step_dir``) and the golden side, the thresholds
  (the limits of THRESHOLD_METRICS in force, then what is off: a limit that is None, and
  ``check_scalars`` when False -- a switch, not a limit), the document's ``warnings``, the
  summary counts (with the reasons rows were not compared, "input inconsistent" and float16
  overflow called out), the first divergence (NPU node, its original TF ops, tensor, golden
  tensor, what it breached, its metrics and the metrics of its inputs) and the further root
  causes;
- drawn by the inline script from the embedded document: an SVG plot along execution order
  (the rows' ``order``) of CosineSimilarity (linear) and MagnitudeError / MaxRelativeError /
  MeanRelativeError / RelativeEuclideanDistance (one log axis), with the active thresholds
  dashed, the first divergence as a red line, propagated rows shaded, root causes and overflows
  marked, a hover read-out and click-to-select; a table of the rows, sortable by any column,
  filtered by text and status, 100 rows a page; and the detail of the row clicked (original
  ops, golden tensor, shapes, formats, dtypes, what it breached, every metric at full
  precision, mean/std, fail reason). The view state lives in the address fragment
  (``#row=12&sort=MaxRelativeError&dir=desc&status=propagated&q=conv&page=2``), so a link
  reopens the same view.

MagnitudeError is no msaccucmp metric: the row's ``magnitude_error`` (compare/_thresholds.py
derives it from cosine and relative Euclidean distance); for a document without that key it
is derived here the same way. A status ``breach`` (the first contract's; compare() no longer
writes it) is still drawn and sorted.

Scale: the plot is drawn from arrays; a series with more points than twice the plot's width
in pixels keeps the lowest and highest point of each pixel column (every extreme stays
visible), and only one page of the table is in the DOM. The plot uses output rows (input rows
compare a producer's output again) unless the document has none.

Safety: every string from the document is HTML-escaped where written here and set with
``textContent`` by the script. The document is embedded whole in
``<script type="application/json" id="compare-doc">`` with ``<``, ``>`` and ``&`` written as
JSON ``\\u`` escapes, so no ``</script>`` or ``<!--`` can end or bend that element; it
parses back to the document (``json.loads``), except that non-finite floats, which JSON
cannot hold, are written as the strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"``
(the script reads them back as numbers where it expects a number). The returned text is
ASCII only (other characters are HTML character references or JSON escapes), so it can be
written with any encoding.

When the script has drawn everything it sets ``data-rendered="1"`` on ``<body>`` and
``data-render-ms`` (milliseconds since navigation start); a script error sets
``data-render-error`` and shows the message at the top of the page.
"""
import html
import json
import math
from typing import Any, Dict, List, Optional

from ..errors import FormatError
from ._thresholds import magnitude_error

__all__ = ["render_html", "SCHEMA", "PLOT_METRICS", "TABLE_METRICS", "THRESHOLD_METRICS"]

SCHEMA = "npu_dump_hook/compare@1"

# The metrics of a row with the short table headers: CosineSimilarity, then MagnitudeError
# (derived from cosine and relative Euclidean distance, the row's ``magnitude_error``; see
# compare/_thresholds.py), then msaccucmp's other eight numeric metrics in its CSV order.
TABLE_METRICS = (
    ("CosineSimilarity", "Cos"),
    ("MagnitudeError", "Mag"),
    ("MaxAbsoluteError", "MaxAbs"),
    ("AccumulatedRelativeError", "AccRel"),
    ("RelativeEuclideanDistance", "RelEuc"),
    ("KullbackLeiblerDivergence", "KLD"),
    ("MeanAbsoluteError", "MeanAbs"),
    ("RootMeanSquareError", "RMSE"),
    ("MaxRelativeError", "MaxRel"),
    ("MeanRelativeError", "MeanRel"),
)
PLOT_METRICS = ("CosineSimilarity", "MagnitudeError", "MaxRelativeError", "MeanRelativeError",
                "RelativeEuclideanDistance")
# Threshold keys of the document, the metric each bounds and how (a value None: that check is off),
# in the order of compare/_thresholds.py. ``check_scalars`` (bool) is no limit: see _thresholds_text.
THRESHOLD_METRICS = (("cosine_min", "CosineSimilarity", "&ge;"), ("magnitude_err_max", "MagnitudeError", "&le;"),
                     ("rel_euclid_max", "RelativeEuclideanDistance", "&le;"),
                     ("max_rel_err", "MaxRelativeError", "&le;"), ("mean_rel_err", "MeanRelativeError", "&le;"))
_FLAG_THRESHOLDS = {"check_scalars": "scalars"}   # boolean switches of the thresholds and their short name

_MAX_LISTED_ROOT_CAUSES = 200
_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}


def render_html(doc: Dict[str, Any]) -> str:
    """The report page of ``doc`` (a compare@1 document) as one ASCII string.

    Raises FormatError when ``doc`` is not a compare@1 document (not a dict, another schema,
    ``rows`` not a list of objects). Missing optional parts (no first divergence, no
    summary field) are shown as absent, never raise.
    """
    _check_document(doc)
    title = _page_title(doc)
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        "<title>", _esc(title), "</title>\n<style>", _STYLE, "</style>\n</head>\n<body>\n",
        "<div id=\"render-error\" class=\"render-error\" hidden></div>\n",
        _header_html(doc),
        _first_divergence_html(doc),
        _root_causes_html(doc),
        _BODY_SKELETON,
        "<script type=\"application/json\" id=\"compare-doc\">", _embedded_json(doc), "</script>\n",
        "<script>", _SCRIPT.replace("__TABLE_METRICS__", json.dumps([list(m) for m in TABLE_METRICS])),
        "</script>\n</body>\n</html>\n",
    ]
    return "".join(parts).encode("ascii", "xmlcharrefreplace").decode("ascii")


def _check_document(doc: Any) -> None:
    where = "compare document"
    if not isinstance(doc, dict):
        raise FormatError(where, "must be a JSON object (dict), got {}".format(type(doc).__name__))
    if doc.get("schema") != SCHEMA:
        raise FormatError(where, "schema must be {!r}, got {!r}".format(SCHEMA, doc.get("schema")))
    rows = doc.get("rows")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise FormatError(where, "'rows' must be a list of objects")


# ---- embedded document -------------------------------------------------------------------

def _embedded_json(doc: Dict[str, Any]) -> str:
    """``doc`` as JSON that cannot close its <script> element (every <, > and & escaped)."""
    try:
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere: JSON has no literal for them
        text = json.dumps(_finite_only(doc), separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite_only(value: Any) -> Any:
    """A copy of ``value`` with non-finite floats as "Infinity" / "-Infinity" / "NaN"."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _NON_FINITE[repr(value)]
    if isinstance(value, dict):
        return {key: _finite_only(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_only(item) for item in value]
    return value


# ---- the parts written here --------------------------------------------------------------

def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt(value: Any) -> str:
    """A metric for people: 7 significant digits, NaN for null (msaccucmp's word)."""
    if value is None:
        return "NaN"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    if abs(value) < 1e-4 or abs(value) >= 1e7:   # the script's format: 6.233839e-5
        mantissa, exponent = "{:.6e}".format(value).split("e")
        return "{}e{}".format(mantissa.rstrip("0").rstrip("."), int(exponent))
    return "{:.7g}".format(value)


def _row_link(doc: Dict[str, Any], row: Any, text: Optional[str] = None) -> str:
    if not isinstance(row, int) or isinstance(row, bool) or not 0 <= row < len(doc["rows"]):
        return _esc(text if text is not None else "-")
    label = text if text is not None else "row {}".format(row)
    return "<a href=\"#row={0}\" class=\"row-link\" data-row=\"{0}\">{1}</a>".format(row, _esc(label))


def _page_title(doc: Dict[str, Any]) -> str:
    verdict = str(_summary(doc).get("verdict", "?")).upper()
    first = doc.get("first_divergence")
    if isinstance(first, dict):
        return "compare {}: first divergence at {}".format(verdict, first.get("npu_op", "?"))
    return "compare {}".format(verdict)


def _summary(doc: Dict[str, Any]) -> Dict[str, Any]:
    summary = doc.get("summary")
    return summary if isinstance(summary, dict) else {}


def _dl(items: List[Any]) -> str:
    cells = "".join("<dt>{}</dt><dd>{}</dd>".format(_esc(key), value) for key, value in filter(None, items))
    return "<dl class=\"kv\">{}</dl>".format(cells)


def _header_html(doc: Dict[str, Any]) -> str:
    summary = _summary(doc)
    verdict = str(summary.get("verdict", "unknown"))
    npu = doc.get("npu") if isinstance(doc.get("npu"), dict) else {}
    golden = doc.get("golden") if isinstance(doc.get("golden"), dict) else {}
    thresholds = doc.get("thresholds") if isinstance(doc.get("thresholds"), dict) else {}
    sides = _dl([
        ("NPU", "<code>{}</code> ({}{}{})".format(
            _esc(npu.get("path")), _esc(npu.get("kind")),
            ", graph " + _esc(npu.get("graph")) if npu.get("graph") else "",
            ", bundle " + _esc(npu.get("bundle_id")) if npu.get("bundle_id") else "")),
        ("NPU step", "<code>{}</code>".format(_esc(npu.get("step_dir")))) if npu.get("step_dir") else None,
        ("golden", "<code>{}</code> ({})".format(_esc(golden.get("path")), _esc(golden.get("kind")))),
        ("thresholds", _thresholds_text(thresholds)),
    ])
    counts = "".join(
        "<div class=\"count\"><b>{}</b><span>{}</span></div>".format(_esc(summary.get(key, "-")), _esc(label))
        for key, label in (("rows", "rows"), ("compared", "compared"), ("not_compared", "not compared"),
                           ("breached", "breached"), ("root_causes", "root causes"),
                           ("propagated", "propagated"), ("overflow", "overflow")))
    notes = []
    reasons = summary.get("not_compared_reasons")
    if isinstance(reasons, dict) and reasons:
        notes.append("<p>Not compared: {}</p>".format("; ".join(
            "{} &times; {}".format(_esc(count), _esc(reason)) for reason, count in sorted(reasons.items()))))
    if summary.get("input_inconsistent"):
        detail = summary.get("input_inconsistent_detail") or []
        notes.append("<div class=\"alert\" id=\"input-inconsistent\"><b>Input inconsistent</b>: the two runs "
                     "did not start from the same inputs, so nothing downstream is meaningful.<ul>{}</ul>"
                     "</div>".format("".join("<li>{}</li>".format(_esc(item)) for item in detail)))
    notes.append(_warnings_html(doc.get("warnings")))
    if summary.get("overflow"):
        notes.append("<div class=\"alert overflow\"><b>float16 overflow</b>: {} tensors are Inf/NaN on the "
                     "NPU where the golden is finite.</div>".format(_esc(summary.get("overflow"))))
    elapsed = summary.get("elapsed_s")
    footer = "<p class=\"muted\">compared in {} s &middot; {}</p>".format(
        _esc(_fmt(elapsed)), _esc(doc.get("schema"))) if elapsed is not None else ""
    return ("<header>\n<h1><span class=\"verdict verdict-{0}\" id=\"verdict\">{1}</span> "
            "npu-dump-hook compare</h1>\n{2}\n<div class=\"counts\">{3}</div>\n{4}{5}\n</header>\n").format(
                _esc(verdict.lower()), _esc(verdict.upper()), sides, counts, "".join(notes), footer)


def _warnings_html(warnings: Any) -> str:
    """The document's ``warnings`` (what compare() logged: another run's golden, skipped files...)."""
    if isinstance(warnings, str):
        warnings = [warnings]
    if not isinstance(warnings, list) or not warnings:
        return ""
    return ("<div class=\"alert warn\" id=\"warnings\"><b>{} warning{}</b><ul>{}</ul></div>".format(
        len(warnings), "" if len(warnings) == 1 else "s", "".join("<li>{}</li>".format(_esc(w)) for w in warnings)))


def _thresholds_text(thresholds: Dict[str, Any]) -> str:
    """Active checks as ``Metric &ge; x``, then unknown keys as they are; checks set to None and
    switches set to False (``check_scalars``: one-element tensors are checked too) listed as off."""
    known = {key for key, _, _ in THRESHOLD_METRICS} | set(_FLAG_THRESHOLDS)
    active = ["{} {} {}".format(metric, op, _esc(_fmt(thresholds[key])))
              for key, metric, op in THRESHOLD_METRICS if thresholds.get(key) is not None]
    active += ["{} checked".format(label) for key, label in sorted(_FLAG_THRESHOLDS.items())
               if thresholds.get(key) is not None and thresholds.get(key) is not False]
    active += ["{} = {}".format(_esc(key), _esc(_fmt(value)))
               for key, value in sorted(thresholds.items()) if key not in known]
    off = [metric for key, metric, _ in THRESHOLD_METRICS if key in thresholds and thresholds[key] is None]
    off += [label for key, label in sorted(_FLAG_THRESHOLDS.items()) if thresholds.get(key) is False]
    text = " &middot; ".join(active) or "none"
    return text + (" <span class=\"muted\">(off: {})</span>".format(", ".join(off)) if off else "")


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _with_magnitude(metrics: Any, row: Any = None) -> Dict[str, Any]:
    """``metrics`` with MagnitudeError: the row's ``magnitude_error`` when the document gives one,
    else derived from the metrics as the thresholds do (documents written before it existed)."""
    found = dict(metrics) if isinstance(metrics, dict) else {}
    if isinstance(row, dict) and "magnitude_error" in row:
        found["MagnitudeError"] = row["magnitude_error"]
    elif "MagnitudeError" not in found:
        numbers = {name: _number(found.get(name)) for name in ("CosineSimilarity", "RelativeEuclideanDistance")}
        found["MagnitudeError"] = magnitude_error(numbers)
    return found


def _doc_row(doc: Dict[str, Any], row: Any) -> Optional[Dict[str, Any]]:
    if isinstance(row, int) and not isinstance(row, bool) and 0 <= row < len(doc["rows"]):
        return doc["rows"][row]
    return None


def _metrics_table(metrics: Any) -> str:
    metrics = metrics if isinstance(metrics, dict) else {}
    head = "".join("<th title=\"{}\">{}</th>".format(_esc(name), _esc(short)) for name, short in TABLE_METRICS)
    cells = "".join("<td>{}</td>".format(_esc(_fmt(metrics.get(name)))) for name, _ in TABLE_METRICS)
    return "<table class=\"metrics\"><tr>{}</tr><tr>{}</tr></table>".format(head, cells)


def _first_divergence_html(doc: Dict[str, Any]) -> str:
    first = doc.get("first_divergence")
    if not isinstance(first, dict):
        verdict = _summary(doc).get("verdict")
        text = ("No first divergence: every compared tensor is within the thresholds." if verdict == "pass"
                else "No first divergence was found (see the summary above).")
        return "<section id=\"first-divergence\" class=\"box none\"><h2>First divergence</h2><p>{}</p>" \
               "</section>\n".format(_esc(text))
    originals = first.get("original_ops") or []
    items = [
        ("NPU node", "<code id=\"fd-op\">{}</code> ({})".format(_esc(first.get("npu_op")),
                                                               _esc(first.get("op_type")))),
        ("original TF ops", "<ul class=\"ops\">{}</ul>".format(
            "".join("<li><code>{}</code></li>".format(_esc(op)) for op in originals) or "-")),
        ("tensor", "<code>{}</code>".format(_esc(first.get("tensor")))),
        ("row", _row_link(doc, first.get("row"))),
    ]
    first_row = _doc_row(doc, first.get("row"))
    if first_row is not None and first_row.get("golden_tensor"):
        items.append(("golden tensor", "<code>{}</code>".format(_esc(first_row["golden_tensor"]))))
    if isinstance(first.get("breached"), list):
        items.append(("breached", _esc(", ".join(str(item) for item in first["breached"]) or "-")))
    inputs = first.get("inputs") or []
    input_rows = "".join(
        "<tr><td><code>{}</code></td><td>{}</td>{}</tr>".format(
            _esc(item.get("tensor")), _row_link(doc, item.get("row")),
            "".join("<td>{}</td>".format(_esc(_fmt(values.get(name)))) for name, _ in TABLE_METRICS))
        for item, values in ((item, _with_magnitude(item.get("metrics"), _doc_row(doc, item.get("row"))))
                             for item in inputs if isinstance(item, dict)))
    inputs_html = ("<h3>Its inputs</h3><table class=\"metrics\"><tr><th>tensor</th><th>row</th>{}</tr>{}</table>"
                   .format("".join("<th title=\"{}\">{}</th>".format(_esc(n), _esc(s)) for n, s in TABLE_METRICS),
                           input_rows) if input_rows else "<p class=\"muted\">No compared inputs.</p>")
    return ("<section id=\"first-divergence\" class=\"box\"><h2>First divergence</h2>\n{}\n<h3>Metrics</h3>{}"
            "\n{}</section>\n").format(_dl(items), _metrics_table(_with_magnitude(first.get("metrics"), first_row)),
                                   inputs_html)


def _root_causes_html(doc: Dict[str, Any]) -> str:
    causes = [row for row in (doc.get("root_causes") or [])[1:]
              if isinstance(row, int) and 0 <= row < len(doc["rows"])]
    if not causes:
        return ""
    items = []
    for row in causes[:_MAX_LISTED_ROOT_CAUSES]:
        record = doc["rows"][row]
        values = _with_magnitude(record.get("metrics"), record)
        items.append("<li>{} <code>{}</code> &middot; {} &middot; cos {} &middot; mag {}</li>".format(
            _row_link(doc, row), _esc(record.get("npu_op")), _esc(record.get("tensor")),
            _esc(_fmt(values.get("CosineSimilarity"))), _esc(_fmt(values.get("MagnitudeError")))))
    more = len(causes) - len(items)
    tail = "<p class=\"muted\">and {} more (status root_cause in the table)</p>".format(more) if more > 0 else ""
    return ("<section id=\"root-causes\" class=\"box\"><h2>Further root causes ({})</h2><ol>{}</ol>{}</section>\n"
            .format(len(causes), "".join(items), tail))


# ---- static page parts -------------------------------------------------------------------

_BODY_SKELETON = """<noscript><p class="alert">The plot, the table and the row detail need JavaScript.</p></noscript>
<section class="box" id="plot-box"><h2>Along execution order</h2>
<div class="legend"><span class="sw cos"></span>CosineSimilarity <span class="sw mag"></span>MagnitudeError
<span class="sw maxrel"></span>MaxRelativeError
<span class="sw meanrel"></span>MeanRelativeError <span class="sw releuc"></span>RelativeEuclideanDistance
<span class="sw fd"></span>first divergence
<span class="sw prop"></span>propagated <span class="muted">(dashed: thresholds; 0 is drawn on the floor of the
log axis, inf on its ceiling; click a point to open its row)</span></div>
<div class="plot-wrap"><svg id="plot" viewBox="0 0 1000 470" role="img" aria-label="metrics along execution order">
</svg><div id="tip" class="tip" hidden></div></div></section>
<section class="box" id="table-box"><h2>Rows</h2>
<div class="controls"><input id="filter" type="search" placeholder="filter: op, type, tensor, original op">
<select id="status-filter"><option value="">every status</option><option value="!ok">not ok</option>
<option>root_cause</option><option>propagated</option><option>overflow</option>
<option>not_compared</option><option>ok</option></select>
<span id="pager"><button id="first" type="button">&laquo;</button><button id="prev" type="button">&lsaquo;</button>
<span id="page-info"></span><button id="next" type="button">&rsaquo;</button>
<button id="last" type="button">&raquo;</button></span></div>
<div class="table-wrap"><table id="rows"><thead><tr></tr></thead><tbody></tbody></table></div></section>
<section class="box" id="detail"><h2>Row detail</h2><p class="muted">Click a row of the table or a point of the
plot.</p></section>
"""

_STYLE = """
:root{--ok:#2e7d32;--bad:#c62828;--prop:#ef6c00;--breach:#d84315;--nc:#757575;--ovf:#6a1b9a}
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1400px;
padding:12px 20px;color:#212121;background:#fafafa}
h1{font-size:20px;margin:4px 0 8px}h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:10px 0 4px}
code{font:12px/1.3 ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.verdict{padding:2px 10px;border-radius:4px;color:#fff;background:var(--nc)}
.verdict-pass{background:var(--ok)}.verdict-fail{background:var(--bad)}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0}.kv dt{color:#616161}
.kv dd{margin:0}.counts{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.count{background:#fff;border:1px solid #e0e0e0;border-radius:4px;padding:4px 10px;text-align:center}
.count b{display:block;font-size:18px}.count span{color:#616161;font-size:12px}
.box{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:10px 14px;margin:12px 0}
#first-divergence{border-left:5px solid var(--bad)}#first-divergence.none{border-left-color:var(--ok)}
.alert{background:#ffebee;border:1px solid #ef9a9a;border-radius:4px;padding:6px 10px;margin:6px 0}
.alert.overflow{background:#f3e5f5;border-color:#ce93d8}.alert.warn{background:#fff8e1;border-color:#ffe082}
.alert ul{margin:2px 0;padding-left:20px}.render-error{background:#b71c1c;color:#fff;padding:8px}
.muted{color:#757575}ul.ops{margin:0;padding-left:18px}
table{border-collapse:collapse}td,th{padding:2px 6px;border-bottom:1px solid #eee;text-align:left}
table.metrics td{font-variant-numeric:tabular-nums}th{background:#f5f5f5;white-space:nowrap}
#rows{width:100%;font-size:12px}#rows th{cursor:pointer;position:sticky;top:0;user-select:none}
#rows th.sorted-asc::after{content:" \\25B2"}#rows th.sorted-desc::after{content:" \\25BC"}
#rows td{white-space:nowrap}#rows td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
#rows td.name{max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
#rows tbody tr{cursor:pointer}#rows tbody tr:hover{background:#e3f2fd}#rows tbody tr.selected{background:#bbdefb}
.table-wrap{max-height:70vh;overflow:auto}
.st{font-weight:600}.st-ok{color:var(--ok)}.st-root_cause{color:#fff;background:var(--bad)}
.st-propagated{color:var(--prop)}.st-breach{color:var(--breach)}.st-not_compared{color:var(--nc)}
.st-overflow{color:#fff;background:var(--ovf)}
.controls{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin-bottom:6px}
#filter{flex:1;min-width:16em;padding:3px 6px}#page-info{margin:0 6px}
.plot-wrap{position:relative}#plot{width:100%;height:auto;display:block}
.tip{position:absolute;pointer-events:none;background:rgba(33,33,33,.92);color:#fff;font-size:12px;
padding:4px 8px;border-radius:4px;white-space:pre;z-index:2}
.legend{font-size:12px;margin-bottom:4px}.sw{display:inline-block;width:14px;height:3px;margin:0 4px 3px 10px;
vertical-align:middle}.sw.cos{background:#1565c0}.sw.mag{background:#8e24aa}.sw.maxrel{background:#c62828}.sw.meanrel{background:#2e7d32}.sw.releuc{background:#00838f}
.sw.fd{background:#d50000;width:3px;height:12px}.sw.prop{background:rgba(239,108,0,.25);height:10px}
svg text{font:11px system-ui,sans-serif;fill:#424242}svg .grid{stroke:#eee}svg .axis{stroke:#9e9e9e}
svg .series{fill:none;stroke-width:1.2}svg .cos{stroke:#1565c0}svg .maxrel{stroke:#c62828}
svg .meanrel{stroke:#2e7d32}svg .mag{stroke:#8e24aa;stroke-width:1.6}svg .releuc{stroke:#00838f}svg .thr{stroke-dasharray:5 4;stroke-width:1}
svg .prop{fill:rgba(239,108,0,.18)}svg .fd{stroke:#d50000;stroke-width:2}svg .cross{stroke:#616161}
svg .mark{cursor:pointer}svg .mark.root{fill:#d50000}svg .mark.ovf{fill:#6a1b9a}svg .mark.breach{fill:#ff7043}
.detail-grid{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}
"""

# The script reads the embedded document and draws the plot, the table and the detail. Every
# string of the document goes into the page through textContent or an attribute value.
_SCRIPT = r"""
(function () {
"use strict";
var T0 = 0;
var METRICS = __TABLE_METRICS__;
var PAGE = 100;
var STATUS_RANK = {root_cause: 0, overflow: 1, breach: 2, propagated: 3, not_compared: 4, ok: 5};
var body = document.body;

window.addEventListener("error", function (event) {
  body.setAttribute("data-render-error", String(event.message));
  var box = document.getElementById("render-error");
  box.textContent = "The report script failed: " + event.message;
  box.hidden = false;
});

var doc = JSON.parse(document.getElementById("compare-doc").textContent);
var rows = doc.rows || [];
var thresholds = doc.thresholds || {};
var first = doc.first_divergence || null;
var svg = document.getElementById("plot");
var NS = svg.namespaceURI;

function num(v) {
  if (typeof v === "number") { return v; }
  if (v === "Infinity") { return Infinity; }
  if (v === "-Infinity") { return -Infinity; }
  if (v === "NaN") { return NaN; }
  return null;
}
// MagnitudeError is the row's magnitude_error (CORE derives it from cosine c and relative Euclidean
// distance d); a document without it gets sqrt(max(0, d^2 - (1 - c^2))), d when c is unknown.
function magnitude(row) {
  if (row.magnitude_error !== undefined) { return num(row.magnitude_error); }
  var m = row.metrics || {}, d = num(m.RelativeEuclideanDistance), c = num(m.CosineSimilarity);
  if (d === null) { return null; }
  if (c === null || isNaN(c) || isNaN(d) || !isFinite(d)) { return d; }
  c = Math.min(1, Math.max(-1, c));
  return Math.sqrt(Math.max(0, d * d - (1 - c * c)));
}
function metric(row, name) { return name === "MagnitudeError" ? magnitude(row) : num((row.metrics || {})[name]); }
function orderOf(i) { var o = num(rows[i].order); return o === null ? i : o; }
function fmt(v) {
  v = num(v);
  if (v === null || isNaN(v)) { return "NaN"; }
  if (!isFinite(v)) { return v > 0 ? "inf" : "-inf"; }
  if (v === 0) { return "0"; }
  var a = Math.abs(v);
  if (a < 1e-4 || a >= 1e7) { return v.toExponential(6).replace(/\.?0+e/, "e").replace("e+", "e"); }
  return String(Number(v.toPrecision(7)));
}
function text(v) { return v === null || v === undefined ? "" : String(v); }
function shapeText(s) { return Array.isArray(s) ? "[" + s.join(",") + "]" : text(s); }
function el(name, attrs, content) {
  var node = document.createElement(name);
  for (var key in attrs || {}) { node.setAttribute(key, attrs[key]); }
  if (content !== undefined) { node.textContent = content; }
  return node;
}
function sv(name, attrs, title) {
  var node = document.createElementNS(NS, name);
  for (var key in attrs || {}) { node.setAttribute(key, attrs[key]); }
  if (title) { var t = document.createElementNS(NS, "title"); t.textContent = title; node.appendChild(t); }
  return node;
}
function r1(v) { return Math.round(v * 10) / 10; }

// ---- view state in the fragment -------------------------------------------------------
var state = {sort: "order", dir: "asc", q: "", status: "", page: 1, row: null};
function readHash() {
  var h = location.hash.replace(/^#/, "");
  if (!h) { return; }
  h.split("&").forEach(function (pair) {
    var kv = pair.split("="), key = decodeURIComponent(kv[0]), val = decodeURIComponent(kv.slice(1).join("="));
    if (key === "row") { var r = parseInt(val, 10); state.row = r >= 0 && r < rows.length ? r : null; }
    else if (key === "sort" && COLUMNS.some(function (c) { return c.key === val; })) { state.sort = val; }
    else if (key === "dir") { state.dir = val === "desc" ? "desc" : "asc"; }
    else if (key === "q") { state.q = val; }
    else if (key === "status") { state.status = val; }
    else if (key === "page") { state.page = Math.max(1, parseInt(val, 10) || 1); state.pageGiven = true; }
  });
}
function writeHash() {
  var parts = [];
  if (state.row !== null) { parts.push("row=" + state.row); }
  if (state.sort !== "order" || state.dir !== "asc") { parts.push("sort=" + encodeURIComponent(state.sort), "dir=" + state.dir); }
  if (state.q) { parts.push("q=" + encodeURIComponent(state.q)); }
  if (state.status) { parts.push("status=" + encodeURIComponent(state.status)); }
  if (state.page > 1) { parts.push("page=" + state.page); }
  try { history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search); }
  catch (e) { /* some viewers forbid it on file: pages; the view still works */ }
}

// ---- plot ----------------------------------------------------------------------------------
var REL_SERIES = [["MaxRelativeError", "maxrel"], ["MeanRelativeError", "meanrel"],
                  ["RelativeEuclideanDistance", "releuc"], ["MagnitudeError", "mag"]];   // the last drawn on top
var REL_THRESHOLDS = [["max_rel_err", "maxrel"], ["mean_rel_err", "meanrel"], ["rel_euclid_max", "releuc"],
                      ["magnitude_err_max", "mag"]];
var X0 = 70, X1 = 985, COS = [18, 198], REL = [238, 418], AXIS_Y = 440;
var plotRows = [];
var xScale = null;

function plotRowList() {
  var out = [], all = [];
  for (var i = 0; i < rows.length; i++) {
    all.push(i);
    if (rows[i].direction !== "input") { out.push(i); }
  }
  var list = out.length ? out : all;
  list.sort(function (a, b) { return orderOf(a) - orderOf(b) || a - b; });
  return list;
}
function niceStep(span, count) {
  var raw = span / Math.max(count, 1), mag = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10)), n = raw / mag;
  return (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10) * mag;
}
function linearTicks(lo, hi, count) {
  if (!(hi > lo)) { return [lo]; }
  var step = niceStep(hi - lo, count), ticks = [];
  for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) { ticks.push(Number(v.toPrecision(12))); }
  return ticks;
}
function cosDomain(list) {
  var lo = Infinity, hi = -Infinity;
  list.forEach(function (i) {
    var v = metric(rows[i], "CosineSimilarity");
    if (v !== null && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  });
  var thr = num(thresholds.cosine_min);
  if (thr !== null && isFinite(thr)) { lo = Math.min(lo, thr); hi = Math.max(hi, thr); }
  if (!isFinite(lo)) { lo = 0; hi = 1; }
  hi = Math.max(hi, Math.min(1, lo + 1e-3));
  if (hi - lo < 1e-6) { lo = hi - 1e-3; }
  return [lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.02];
}
function relDomain(list) {
  var lo = Infinity, hi = -Infinity;
  function take(v) { if (v !== null && isFinite(v) && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }
  list.forEach(function (i) {
    REL_SERIES.forEach(function (s) { take(metric(rows[i], s[0])); });
  });
  REL_THRESHOLDS.forEach(function (t) { take(num(thresholds[t[0]])); });
  if (!isFinite(lo)) { lo = 1e-8; hi = 1; }
  var a = Math.floor(Math.log(lo) / Math.LN10) - 1, b = Math.ceil(Math.log(hi) / Math.LN10) + 1;
  return [a, Math.max(b, a + 2)];   // decades: [a] is the floor (zeros), [b] the ceiling (inf)
}
function yCos(v, d) { return COS[1] - (v - d[0]) / (d[1] - d[0]) * (COS[1] - COS[0]); }
function yRel(v, d) {
  if (v <= 0) { return REL[1]; }
  if (!isFinite(v)) { return REL[0]; }
  var l = Math.log(v) / Math.LN10;
  l = Math.min(Math.max(l, d[0]), d[1]);
  return REL[1] - (l - d[0]) / (d[1] - d[0]) * (REL[1] - REL[0]);
}
// Points of one series as a path; past 2 points per pixel column, each column keeps its lowest
// and highest point (in execution order), so no extreme disappears.
function seriesPath(list, name, y, cls, label) {
  var pts = [], gap = false;
  list.forEach(function (i) {
    var row = rows[i], v = metric(row, name);
    if (row.status === "not_compared" || v === null || isNaN(v)) { gap = true; return; }
    pts.push([xScale(orderOf(i)), y(v), gap]);
    gap = false;
  });
  var kept = pts;
  if (pts.length > 2 * (X1 - X0)) {
    kept = [];
    var col = null, lowP = null, highP = null, brk = false;
    var flush = function () {
      if (lowP === null) { return; }
      var pair = lowP === highP ? [lowP] : [lowP, highP];
      pair.sort(function (a, b) { return a[3] - b[3]; });
      pair.forEach(function (p, k) { kept.push([p[0], p[1], k === 0 && brk]); });
    };
    pts.forEach(function (p, k) {
      var c = Math.floor(p[0]);
      p[3] = k;
      if (c !== col) { flush(); col = c; lowP = highP = p; brk = p[2]; return; }
      if (p[1] > lowP[1]) { lowP = p; }
      if (p[1] < highP[1]) { highP = p; }
      brk = brk || p[2];
    });
    flush();
  }
  var d = [];
  kept.forEach(function (p, k) { d.push((k === 0 || p[2] ? "M" : "L") + r1(p[0]) + " " + r1(p[1])); });
  svg.appendChild(sv("path", {"class": "series " + cls, d: d.join(""), "data-points": kept.length,
                              "data-rows": pts.length}, label + ": " + pts.length + " tensors"));
}
function propagatedBands(list) {
  var bands = [], start = null, end = null, count = 0;
  list.forEach(function (i) {
    if (rows[i].status === "propagated") {
      if (start === null) { start = orderOf(i); count = 0; }
      end = orderOf(i); count += 1;
    } else if (rows[i].status !== "not_compared" && start !== null) {
      bands.push([start, end, count]); start = null;
    }
  });
  if (start !== null) { bands.push([start, end, count]); }
  var merged = [];
  bands.forEach(function (b) {
    var last = merged[merged.length - 1];
    if (last && xScale(b[0] - 0.5) - xScale(last[1] + 0.5) < 1) { last[1] = b[1]; last[2] += b[2]; }
    else { merged.push(b.slice()); }
  });
  merged.forEach(function (b) {
    var xa = xScale(b[0] - 0.5), xb = Math.max(xScale(b[1] + 0.5), xa + 1);
    [COS, REL].forEach(function (panel) {
      svg.appendChild(sv("rect", {"class": "prop", x: r1(xa), y: panel[0], width: r1(xb - xa), height: panel[1] - panel[0]},
                         "propagated: order " + b[0] + (b[1] !== b[0] ? " to " + b[1] : "") + " (" + b[2] + " tensors)"));
    });
  });
  return merged.length;
}
function drawAxes(list, cd, rd) {
  var lo = list.length ? orderOf(list[0]) : 0, hi = list.length ? orderOf(list[list.length - 1]) : 1;
  linearTicks(lo, hi, 10).filter(function (t) { return t === Math.round(t); }).forEach(function (t) {
    var x = xScale(t);
    svg.appendChild(sv("line", {"class": "grid", x1: r1(x), x2: r1(x), y1: COS[0], y2: REL[1]}));
    svg.appendChild(sv("text", {x: r1(x), y: AXIS_Y, "text-anchor": "middle"})).textContent = String(t);
  });
  svg.appendChild(sv("text", {x: (X0 + X1) / 2, y: AXIS_Y + 22, "text-anchor": "middle"})).textContent = "execution order";
  linearTicks(cd[0], cd[1], 5).forEach(function (t) {
    var y = yCos(t, cd);
    svg.appendChild(sv("line", {"class": "grid", x1: X0, x2: X1, y1: r1(y), y2: r1(y)}));
    svg.appendChild(sv("text", {x: X0 - 6, y: r1(y + 4), "text-anchor": "end"})).textContent = fmt(t);
  });
  var step = Math.max(1, Math.ceil((rd[1] - rd[0]) / 8));
  for (var e = rd[0]; e <= rd[1]; e += step) {
    var y = yRel(Math.pow(10, e), rd);
    svg.appendChild(sv("line", {"class": "grid", x1: X0, x2: X1, y1: r1(y), y2: r1(y)}));
    svg.appendChild(sv("text", {x: X0 - 6, y: r1(y + 4), "text-anchor": "end"})).textContent = "1e" + e;
  }
  [COS, REL].forEach(function (p) {
    svg.appendChild(sv("rect", {"class": "axis", x: X0, y: p[0], width: X1 - X0, height: p[1] - p[0], fill: "none"}));
  });
  svg.appendChild(sv("text", {x: X0 + 4, y: COS[0] + 12})).textContent = "CosineSimilarity";
  svg.appendChild(sv("text", {x: X0 + 4, y: REL[0] + 12})).textContent = "relative errors (log)";
  var tc = num(thresholds.cosine_min);
  if (tc !== null && isFinite(tc)) {
    svg.appendChild(sv("line", {"class": "thr cos", x1: X0, x2: X1, y1: r1(yCos(tc, cd)), y2: r1(yCos(tc, cd))},
                       "cosine_min threshold " + fmt(tc)));
  }
  REL_THRESHOLDS.forEach(function (pair) {
    var t = num(thresholds[pair[0]]);
    if (t !== null && isFinite(t) && t > 0) {
      svg.appendChild(sv("line", {"class": "thr " + pair[1], x1: X0, x2: X1, y1: r1(yRel(t, rd)), y2: r1(yRel(t, rd))},
                         pair[0] + " threshold " + fmt(t)));
    }
  });
}
function rowTitle(i) {
  var row = rows[i];
  return text(row.npu_op) + " (" + text(row.op_type) + ")\n" + text(row.tensor) + "\norder " + orderOf(i) +
    " \u00b7 " + text(row.status) + "\ncos " + fmt(metric(row, "CosineSimilarity")) + " \u00b7 mag " +
    fmt(metric(row, "MagnitudeError")) + " \u00b7 max rel " +
    fmt(metric(row, "MaxRelativeError")) + " \u00b7 mean rel " + fmt(metric(row, "MeanRelativeError")) +
    " \u00b7 rel eucl " + fmt(metric(row, "RelativeEuclideanDistance"));
}
function drawMarks(list, cd, rd) {
  var shown = 0;
  list.forEach(function (i) {
    var st = rows[i].status, cls = st === "root_cause" ? "root" : st === "overflow" ? "ovf" : st === "breach" ? "breach" : null;
    if (!cls || shown >= 1000) { return; }
    var c = metric(rows[i], "CosineSimilarity"), x = r1(xScale(orderOf(i)));
    var y = c === null || !isFinite(c) ? COS[1] : yCos(c, cd);
    var mark = sv("circle", {"class": "mark " + cls, cx: x, cy: r1(y), r: cls === "root" ? 4.5 : 3, "data-row": i},
                  st + ": " + rowTitle(i));
    svg.appendChild(mark);
    if (cls === "ovf") {
      svg.appendChild(sv("circle", {"class": "mark ovf", cx: x, cy: REL[0] + 4, r: 3, "data-row": i}, "overflow: " + rowTitle(i)));
    }
    shown += 1;
  });
  return shown;
}
function drawFirstDivergence() {
  if (!first || typeof first.row !== "number" || !rows[first.row]) { return; }
  var x = r1(xScale(orderOf(first.row)));
  var line = sv("line", {id: "fd-marker", "class": "fd", x1: x, x2: x, y1: COS[0] - 6, y2: REL[1], "data-row": first.row},
                "first divergence: " + rowTitle(first.row));
  svg.appendChild(line);
  var label = sv("text", {x: x + 4, y: COS[0] - 6, "class": "fd-label"});
  label.textContent = "first divergence: " + text(first.npu_op);
  if (x > (X0 + X1) / 2) { label.setAttribute("text-anchor", "end"); label.setAttribute("x", x - 4); }
  svg.appendChild(label);
}
function nearestPlotRow(order) {
  var lo = 0, hi = plotRows.length - 1;
  if (hi < 0) { return null; }
  while (lo < hi) { var mid = (lo + hi) >> 1; if (orderOf(plotRows[mid]) < order) { lo = mid + 1; } else { hi = mid; } }
  if (lo > 0 && Math.abs(orderOf(plotRows[lo - 1]) - order) <= Math.abs(orderOf(plotRows[lo]) - order)) { lo -= 1; }
  return plotRows[lo];
}
// Hover and click work on the whole plot area (bands, lines and marks keep their own titles):
// the read-out shows the row nearest in execution order; a click on a mark opens its row.
function hookHover(lo, hi) {
  var tip = document.getElementById("tip");
  var cross = sv("line", {"class": "cross", x1: 0, x2: 0, y1: COS[0], y2: REL[1], visibility: "hidden"});
  var overlay = sv("rect", {x: X0, y: COS[0], width: X1 - X0, height: REL[1] - COS[0], fill: "transparent", id: "hover"});
  svg.insertBefore(cross, svg.firstChild);
  svg.insertBefore(overlay, svg.firstChild);
  function rowAt(event) {
    var m = svg.getScreenCTM();
    if (!m) { return null; }
    var x = (event.clientX - m.e) / m.a, y = (event.clientY - m.f) / m.d;
    if (x < X0 || x > X1 || y < COS[0] || y > REL[1]) { return null; }
    return nearestPlotRow(lo + (x - X0) / (X1 - X0) * (hi - lo));
  }
  function hide() { tip.hidden = true; cross.setAttribute("visibility", "hidden"); }
  svg.addEventListener("mousemove", function (event) {
    var i = rowAt(event);
    if (i === null) { hide(); return; }
    var x = r1(xScale(orderOf(i)));
    cross.setAttribute("x1", x); cross.setAttribute("x2", x); cross.setAttribute("visibility", "visible");
    tip.textContent = rowTitle(i);
    tip.hidden = false;
    var box = svg.parentNode.getBoundingClientRect();
    var left = event.clientX - box.left + 14;
    tip.style.left = (left > box.width - 300 ? left - 320 : left) + "px";
    tip.style.top = (event.clientY - box.top + 10) + "px";
  });
  svg.addEventListener("mouseleave", hide);
  svg.addEventListener("click", function (event) {
    var r = event.target.getAttribute && event.target.getAttribute("data-row");
    var i = r !== null && r !== undefined ? parseInt(r, 10) : rowAt(event);
    if (i !== null) { selectRow(i, true); }
  });
}
function drawPlot() {
  plotRows = plotRowList();
  var lo = plotRows.length ? orderOf(plotRows[0]) : 0, hi = plotRows.length ? orderOf(plotRows[plotRows.length - 1]) : 1;
  lo -= 0.5; hi += 0.5;
  xScale = function (o) { return X0 + (o - lo) / (hi - lo) * (X1 - X0); };
  var cd = cosDomain(plotRows), rd = relDomain(plotRows);
  drawAxes(plotRows, cd, rd);
  var bands = propagatedBands(plotRows);
  seriesPath(plotRows, "CosineSimilarity", function (v) { return yCos(Math.max(Math.min(v, cd[1]), cd[0]), cd); }, "cos", "CosineSimilarity");
  REL_SERIES.forEach(function (s) { seriesPath(plotRows, s[0], function (v) { return yRel(v, rd); }, s[1], s[0]); });
  var marks = drawMarks(plotRows, cd, rd);
  drawFirstDivergence();
  hookHover(lo, hi);
  svg.setAttribute("data-plotted-rows", plotRows.length);
  svg.setAttribute("data-bands", bands);
  svg.setAttribute("data-marks", marks);
}

// ---- table ---------------------------------------------------------------------------------
var COLUMNS = [
  {key: "row", label: "#", num: true, get: function (i) { return i; }},
  {key: "order", label: "Order", num: true, get: function (i) { return orderOf(i); }},
  {key: "index", label: "Index", num: true, get: function (i) { return num(rows[i].index); }},
  {key: "op_type", label: "OpType", get: function (i) { return text(rows[i].op_type); }},
  {key: "npu_op", label: "NPU op", name: true, get: function (i) { return text(rows[i].npu_op); }},
  {key: "tensor", label: "Tensor", name: true, get: function (i) { return text(rows[i].tensor); }},
  {key: "shape", label: "Shape", get: function (i) { return shapeText(rows[i].shape); }},
  {key: "status", label: "Status", get: function (i) { return text(rows[i].status); },
   rank: function (i) { var r = STATUS_RANK[rows[i].status]; return r === undefined ? 9 : r; }}
].concat(METRICS.map(function (m) {
  return {key: m[0], label: m[1], title: m[0], num: true, metric: true,
          get: function (i) { return metric(rows[i], m[0]); }};
}));
var view = [];

function sortKey(col) {
  if (col.rank) { return col.rank; }
  return col.get;
}
function buildView() {
  var q = state.q.toLowerCase(), st = state.status, out = [];
  for (var i = 0; i < rows.length; i++) {
    var row = rows[i];
    if (st && (st === "!ok" ? row.status === "ok" : row.status !== st)) { continue; }
    if (q) {
      var hay = (text(row.npu_op) + "\n" + text(row.op_type) + "\n" + text(row.tensor) + "\n" +
                 (row.ground_truth || []).join("\n")).toLowerCase();
      if (hay.indexOf(q) < 0) { continue; }
    }
    out.push(i);
  }
  var col = COLUMNS.filter(function (c) { return c.key === state.sort; })[0] || COLUMNS[1];
  var key = sortKey(col), keys = new Array(rows.length), sign = state.dir === "desc" ? -1 : 1;
  out.forEach(function (i) { var k = key(i); keys[i] = (k === null || (typeof k === "number" && isNaN(k))) ? null : k; });
  out.sort(function (a, b) {
    var ka = keys[a], kb = keys[b];
    if (ka === null || kb === null) { return ka === kb ? a - b : ka === null ? 1 : -1; }   // NaN last either way
    if (ka < kb) { return -sign; }
    if (ka > kb) { return sign; }
    return a - b;
  });
  view = out;
}
function pages() { return Math.max(1, Math.ceil(view.length / PAGE)); }
function renderHead() {
  var tr = document.querySelector("#rows thead tr");
  tr.textContent = "";
  COLUMNS.forEach(function (c) {
    var th = el("th", {"data-key": c.key, title: (c.title || c.label) + " (click to sort)"}, c.label);
    if (c.key === state.sort) { th.className = "sorted-" + state.dir; }
    th.addEventListener("click", function () {
      if (state.sort === c.key) { state.dir = state.dir === "asc" ? "desc" : "asc"; }
      else { state.sort = c.key; state.dir = c.metric && c.key !== "CosineSimilarity" ? "desc" : "asc"; }
      state.page = 1; refresh();
    });
    tr.appendChild(th);
  });
}
function renderPage() {
  state.page = Math.min(Math.max(1, state.page), pages());
  var tbody = document.querySelector("#rows tbody"), frag = document.createDocumentFragment();
  var start = (state.page - 1) * PAGE;
  view.slice(start, start + PAGE).forEach(function (i) {
    var tr = el("tr", {"data-row": i});
    if (i === state.row) { tr.className = "selected"; }
    COLUMNS.forEach(function (c) {
      var v = c.get(i), td;
      if (c.key === "status") { td = el("td", {"class": "st st-" + text(v)}, v); }
      else if (c.metric) { td = el("td", {"class": "num"}, fmt(v)); }
      else { td = el("td", c.num ? {"class": "num"} : c.name ? {"class": "name", title: v} : {}, text(v)); }
      tr.appendChild(td);
    });
    frag.appendChild(tr);
  });
  tbody.textContent = "";
  tbody.appendChild(frag);
  document.getElementById("page-info").textContent = "page " + state.page + " of " + pages() + " \u00b7 " +
    view.length + " of " + rows.length + " rows";
}
function refresh() { buildView(); renderHead(); renderPage(); writeHash(); }

// ---- detail --------------------------------------------------------------------------------
function detailItem(grid, key, value) { grid.appendChild(el("div", {"class": "dt"}, key)); grid.appendChild(value); }
function codeList(items) {
  var ul = el("ul", {"class": "ops"});
  (items || []).forEach(function (s) { var li = el("li"); li.appendChild(el("code", {}, text(s))); ul.appendChild(li); });
  return ul;
}
function renderDetail(i) {
  var box = document.getElementById("detail"), row = rows[i];
  box.textContent = "";
  box.appendChild(el("h2", {}, "Row " + i + ": " + text(row.npu_op)));
  var grid = el("div", {"class": "detail-grid", id: "detail-fields"});
  detailItem(grid, "status", el("span", {"class": "st st-" + text(row.status)}, text(row.status)));
  detailItem(grid, "NPU op", el("code", {}, text(row.npu_op) + " (" + text(row.op_type) + ")"));
  detailItem(grid, "original TF ops", codeList(row.ground_truth));
  detailItem(grid, "tensor", el("code", {}, text(row.tensor) + " \u00b7 " + text(row.direction) + " " + text(row.slot)));
  detailItem(grid, "order / index", el("span", {}, orderOf(i) + " / " + text(row.index)));
  detailItem(grid, "dtype NPU / golden", el("span", {}, text(row.npu_dtype) + " / " + text(row.golden_dtype)));
  detailItem(grid, "shape (NPU format)", el("span", {}, shapeText(row.shape) + " " + text(row.npu_format)));
  detailItem(grid, "original shape", el("span", {}, shapeText(row.original_shape)));
  detailItem(grid, "address", el("code", {}, text(row.address)));
  detailItem(grid, "timestamp", el("span", {}, text(row.timestamp)));
  var std = row.std;
  detailItem(grid, "mean / std", el("span", {}, Array.isArray(std) && std.length === 2 ?
    "NPU " + fmt(std[0][0]) + " / " + fmt(std[0][1]) + " \u00b7 golden " + fmt(std[1][0]) + " / " + fmt(std[1][1]) : "NaN"));
  detailItem(grid, "fail reason", el("span", {id: "detail-fail-reason"}, text(row.fail_reason) || "-"));
  if (row.golden_tensor !== undefined) { detailItem(grid, "golden tensor", el("code", {}, text(row.golden_tensor) || "-")); }
  if (Array.isArray(row.breached)) { detailItem(grid, "breached", el("span", {id: "detail-breached"}, row.breached.join(", ") || "-")); }
  else if (typeof row.breached === "boolean") { detailItem(grid, "breached", el("span", {id: "detail-breached"}, row.breached ? "yes" : "no")); }
  box.appendChild(grid);
  var table = el("table", {"class": "metrics", id: "detail-metrics"}), metrics = row.metrics || {};
  var names = METRICS.map(function (m) { return m[0]; });
  Object.keys(metrics).forEach(function (k) { if (names.indexOf(k) < 0) { names.push(k); } });
  names.forEach(function (k) {
    var tr = el("tr", {"data-metric": k});
    tr.appendChild(el("th", {}, k));
    var v = metric(row, k);
    tr.appendChild(el("td", {}, v === null || isNaN(v) ? "NaN" : String(v)));
    table.appendChild(tr);
  });
  box.appendChild(el("h3", {}, "Metrics"));
  box.appendChild(table);
  if (first && first.row === i && Array.isArray(first.inputs)) {
    box.appendChild(el("h3", {}, "Inputs of the first divergence"));
    var ul = el("ul");
    first.inputs.forEach(function (inp) {
      var src = typeof inp.row === "number" && rows[inp.row] ? rows[inp.row] : {metrics: inp.metrics};
      var li = el("li", {}, text(inp.tensor) + ": cos " + fmt(num((inp.metrics || {}).CosineSimilarity)) +
                  ", mag " + fmt(magnitude(src)) + ", max rel " + fmt(num((inp.metrics || {}).MaxRelativeError)));
      ul.appendChild(li);
    });
    box.appendChild(ul);
  }
  box.setAttribute("data-row", i);
}
function selectRow(i, reveal) {
  if (!(i >= 0 && i < rows.length)) { return; }
  state.row = i;
  var pos = view.indexOf(i);
  if (pos < 0 && reveal) { state.q = ""; state.status = ""; syncControls(); buildView(); pos = view.indexOf(i); }
  if (pos >= 0 && reveal) { state.page = Math.floor(pos / PAGE) + 1; }
  renderPage();
  renderDetail(i);
  writeHash();
  if (reveal) {
    var tr = document.querySelector("#rows tbody tr[data-row=\"" + i + "\"]");
    if (tr && tr.scrollIntoView) { tr.scrollIntoView({block: "nearest"}); }
  }
}

// ---- controls ------------------------------------------------------------------------------
function syncControls() {
  document.getElementById("filter").value = state.q;
  document.getElementById("status-filter").value = state.status;
}
function hookControls() {
  var timer = null;
  document.getElementById("filter").addEventListener("input", function (event) {
    clearTimeout(timer);
    timer = setTimeout(function () { state.q = event.target.value; state.page = 1; refresh(); }, 150);
  });
  document.getElementById("status-filter").addEventListener("change", function (event) {
    state.status = event.target.value; state.page = 1; refresh();
  });
  var go = {first: function () { return 1; }, prev: function () { return state.page - 1; },
            next: function () { return state.page + 1; }, last: function () { return pages(); }};
  Object.keys(go).forEach(function (id) {
    document.getElementById(id).addEventListener("click", function () { state.page = go[id](); renderPage(); writeHash(); });
  });
  document.querySelector("#rows tbody").addEventListener("click", function (event) {
    var tr = event.target.closest("tr");
    if (tr) { selectRow(parseInt(tr.getAttribute("data-row"), 10), false); }
  });
  document.addEventListener("click", function (event) {
    var a = event.target.closest && event.target.closest("a.row-link");
    if (a) { event.preventDefault(); selectRow(parseInt(a.getAttribute("data-row"), 10), true);
             document.getElementById("table-box").scrollIntoView(); }
  });
}

readHash();
syncControls();
hookControls();
drawPlot();
buildView();
renderHead();
if (state.row !== null) { selectRow(state.row, !state.pageGiven); } else { renderPage(); writeHash(); }
body.setAttribute("data-render-ms", String(Math.round(performance.now() - T0)));
body.setAttribute("data-rendered", "1");
})();
"""
