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
  causes; the checks that need no golden when the document has them (``checks``: NaN/Inf origins
  and the overflow report, :mod:`._checks_html`); the replay on CPU when asked for (:mod:`._replay_html`);
- drawn by the inline script from the embedded document: an SVG plot along execution order
  (the rows' ``order``) of CosineSimilarity (linear) and MagnitudeError / MaxRelativeError /
  MeanRelativeError / RelativeEuclideanDistance (one log axis), with the active thresholds
  dashed, the first divergence as a red line, propagated rows shaded, root causes and overflows
  marked, a hover read-out and click-to-select; a table of the rows, sortable by any column,
  filtered by text and status, 100 rows a page; and the detail of the row clicked (original
  ops, golden tensor, shapes (and the shape note of a row compared flattened), formats, dtypes,
  what it breached, every metric at full precision, mean/std, fail reason). The view state lives in the address fragment
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

Data files: the page skeleton, its CSS and its script are ``report/page.html``,
``report/report.css`` and ``report/report.js`` beside this module (package data, read once with
``pkgutil.get_data``). A slot in them (``__TITLE__``, ``__SUMMARY__``, ``__DOCUMENT__``...) is
filled in one pass and a value is never searched again, so no ``{``, ``%``, ``$``,
``</script>`` or slot name in the document changes the page: values arrive escaped as above.
The script reads the embedded document and draws the plot, the table and the detail; every
string of the document goes into the page through ``textContent`` or an attribute value.

When the script has drawn everything it sets ``data-rendered="1"`` on ``<body>`` and
``data-render-ms`` (milliseconds since navigation start); a script error sets
``data-render-error`` and shows the message at the top of the page.
"""
import functools
import html
import json
import math
import pkgutil
import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import FormatError
from ._checks_html import checks_html
from ._replay_html import replay_html
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

# The page's static parts are package data files in compare/report/ (see "Data files" above);
# a slot in them is an upper-case name between double underscores, e.g. __TITLE__.
_ASSETS = "report"
_SLOT = re.compile(r"__([A-Z][A-Z_]*[A-Z])__")
_SLOTS = {"page.html": ("TITLE", "STYLE", "SUMMARY", "DOCUMENT", "SCRIPT"),
          "report.css": (), "report.js": ("TABLE_METRICS",)}


def render_html(doc: Dict[str, Any]) -> str:
    """The report page of ``doc`` (a compare@1 document) as one ASCII string.

    Raises FormatError when ``doc`` is not a compare@1 document (not a dict, another schema,
    ``rows`` not a list of objects). Missing optional parts (no first divergence, no
    summary field) are shown as absent, never raise.
    """
    _check_document(doc)
    summary = "\n".join(block for block in (_header_html(doc), checks_html(doc), _first_divergence_html(doc),
                                              replay_html(doc), _root_causes_html(doc)) if block)
    page = _fill("page.html", {
        "TITLE": _esc(_page_title(doc)),
        "STYLE": _inline("report.css", {}),
        "SUMMARY": summary,
        "DOCUMENT": _embedded_json(doc),
        "SCRIPT": _inline("report.js", {"TABLE_METRICS": json.dumps([list(m) for m in TABLE_METRICS])}),
    })
    return page.encode("ascii", "xmlcharrefreplace").decode("ascii")


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
    golden = doc.get("golden") if isinstance(doc.get("golden"), dict) else {"path": "none", "kind": "checks only"}
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
    if summary.get("incomplete"):
        detail = summary.get("incomplete_detail") or []
        notes.append("<div class=\"alert\" id=\"incomplete\"><b>Incomplete</b>: not everything dumped was "
                     "compared{}.<ul>{}</ul></div>".format(
                         " (allowed)" if verdict != "incomplete" else "", "".join(
                             "<li>{}</li>".format(_esc(item)) for item in detail)))
    notes.append(_warnings_html(doc.get("warnings")))
    if summary.get("overflow"):
        notes.append("<div class=\"alert overflow\"><b>float16 overflow</b>: {} tensors are Inf/NaN on the "
                     "NPU where the golden is finite.</div>".format(_esc(summary.get("overflow"))))
    elapsed = summary.get("elapsed_s")
    footer = "<p class=\"muted\">compared in {} s &middot; {}</p>".format(
        _esc(_fmt(elapsed)), _esc(doc.get("schema"))) if elapsed is not None else ""
    return ("<header>\n<h1><span class=\"verdict verdict-{0}\" id=\"verdict\">{1}</span> "
            "npu-dump-hook compare</h1>\n{2}\n<div class=\"counts\">{3}</div>\n{4}{5}\n</header>").format(
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
               "</section>".format(_esc(text))
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
            "\n{}</section>").format(_dl(items), _metrics_table(_with_magnitude(first.get("metrics"), first_row)),
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
    return ("<section id=\"root-causes\" class=\"box\"><h2>Further root causes ({})</h2><ol>{}</ol>{}</section>"
            .format(len(causes), "".join(items), tail))


# ---- the page's data files ---------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _template(name: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The data file ``report/<name>`` split at its slots: (texts, slot names), one text more
    than slots. Read once; raises when the file's slots are not the ones this module fills."""
    data = pkgutil.get_data(__package__, _ASSETS + "/" + name)
    if data is None:
        raise FileNotFoundError("{} cannot read its data file {}/{}".format(__package__, _ASSETS, name))
    pieces = _SLOT.split(data.decode("ascii"))
    texts, slots = tuple(pieces[0::2]), tuple(pieces[1::2])
    if sorted(slots) != sorted(_SLOTS[name]):
        raise RuntimeError("{}/{} has the slots {}, expected {}".format(_ASSETS, name, slots, _SLOTS[name]))
    return texts, slots


def _fill(name: str, values: Dict[str, str]) -> str:
    """The data file ``name`` with each slot replaced by its value, in one pass: a value is
    never searched for slots, so whatever it holds (``{``, ``%``, ``$``, ``__TITLE__``) stays text."""
    texts, slots = _template(name)
    parts = [texts[0]]
    for slot, text in zip(slots, texts[1:]):
        parts += [values[slot], text]
    return "".join(parts)


def _inline(name: str, values: Dict[str, str]) -> str:
    """The data file ``name`` filled, as the content of an element of the page: without the
    file's final newline (the page has the element's tags on lines of their own)."""
    text = _fill(name, values)
    return text[:-1] if text.endswith("\n") else text
