"""The --html report: its text (escaping, no network, the embedded document) and the page as a
real headless Chromium renders it (plot, first divergence, sorted table, row detail, no script
error). Documents are built by hand (tests/helpers/compare_docs.py) or written by compare() on a
synthetic bundle (tests/helpers/compare_synth.py); no TensorFlow."""
import html
import json
import math
import pkgutil
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from helpers.compare_docs import HOSTILE, WARNING, synthetic_doc
from helpers.compare_synth import Synth, chain
from npu_dump_hook.compare import compare
from npu_dump_hook.compare._html import render_html
from npu_dump_hook.compare._thresholds import magnitude_error
from npu_dump_hook.errors import FormatError

EMBEDDED = re.compile(r'<script type="application/json" id="compare-doc">(.*?)</script>', re.S)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed: `make test` (target `chromium`) installs the "
                             "Debian package; or run `apt-get install chromium`")


def _embedded(page):
    found = EMBEDDED.findall(page)
    assert len(found) == 1
    return json.loads(found[0])


def _json_view(value):
    """What the embedded JSON must hold: the document, non-finite floats as their JSON words."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_view(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_view(v) for v in value]
    return value


def _hostile_doc():
    doc = synthetic_doc(40, fault_name=HOSTILE)
    doc["npu"]["path"] = "/tmp/" + HOSTILE
    doc["golden"]["path"] = "</script><script>alert(2)</script>"
    doc["summary"]["not_compared_reasons"] = {"<b>bold</b> & </script>": 3}
    doc["summary"]["input_inconsistent"] = True
    doc["summary"]["input_inconsistent_detail"] = ["IteratorGetNext:0 <differs> & \"quoted\""]
    doc["rows"][5]["fail_reason"] = "</script><svg onload=alert(3)>"
    doc["rows"][2]["npu_op"] = HOSTILE + "_2"
    doc["rows"][doc["root_causes"][1]]["npu_op"] = "<i>second</i>"
    return doc


# ---- the HTML text ------------------------------------------------------------------------

def test_hostile_strings_are_escaped_everywhere():
    doc = _hostile_doc()
    page = render_html(doc)
    # Only the report's own two script elements, no element or comment taken from the document.
    assert page.count("<script") == 2 and page.count("</script>") == 2
    for raw in ("<img", "<svg onload", "<b>bold", "<i>second", "<!--", "alert(2)</script>"):
        assert raw not in page
    assert HOSTILE not in page
    fd_box = page[page.index('<section id="first-divergence"'):page.index("</section>")]
    assert html.escape(HOSTILE, quote=True) in fd_box
    assert html.escape(HOSTILE + "/BiasAdd", quote=True) in fd_box
    assert "&lt;i&gt;second&lt;/i&gt;" in page          # further root causes
    assert "IteratorGetNext:0 &lt;differs&gt; &amp; &quot;quoted&quot;" in page
    assert _embedded(page) == _json_view(doc)


# Characters a template or format mechanism would act on, and the report's own slot names.
TEMPLATE_HOSTILE = "net/{title}%s%(x)s$STYLE${x}{{y}}__TITLE____SCRIPT__</script>__DOCUMENT__\\1"


def _template_hostile_doc():
    doc = synthetic_doc(40, fault_name=TEMPLATE_HOSTILE)
    doc["npu"]["path"] = "/tmp/%d {0} $HOME __SUMMARY__"
    doc["golden"]["path"] = "__STYLE__ ${document} {document}"
    doc["rows"][3]["npu_op"] = "__TABLE_METRICS__ %% {{ }}"
    doc["warnings"] = ["__DOCUMENT__ </script><script>alert(4)</script> ${x} %(x)s {0}"]
    return doc


def _data_file(name):
    return pkgutil.get_data("npu_dump_hook.compare", "report/" + name).decode("ascii")


def test_template_characters_in_names_stay_text():
    doc = _template_hostile_doc()
    page = render_html(doc)
    assert page.count("<script") == 2 and page.count("</script>") == 2 and "<script>alert(4)" not in page
    assert _embedded(page) == _json_view(doc)
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert html.unescape(title) == "compare FAIL: first divergence at " + TEMPLATE_HOSTILE
    assert html.escape(doc["npu"]["path"], quote=True) in page
    assert html.escape(doc["golden"]["path"], quote=True) in page
    assert html.escape(doc["warnings"][0], quote=True) in page
    # The static parts are untouched by what the document holds.
    assert page.count("<style>") == 1 and page.count("var METRICS = [[") == 1


def test_the_page_inlines_the_package_data_files():
    page = render_html(synthetic_doc(20))
    skeleton, css, script = _data_file("page.html"), _data_file("report.css"), _data_file("report.js")
    assert page.startswith(skeleton[:skeleton.index("__TITLE__")])
    assert page.endswith(skeleton[skeleton.index("__SCRIPT__") + len("__SCRIPT__"):])
    assert re.search(r"<style>\n(.*?)\n</style>", page, re.S).group(1) + "\n" == css
    metrics = json.dumps([["CosineSimilarity", "Cos"], ["MagnitudeError", "Mag"], ["MaxAbsoluteError", "MaxAbs"],
                          ["AccumulatedRelativeError", "AccRel"], ["RelativeEuclideanDistance", "RelEuc"],
                          ["KullbackLeiblerDivergence", "KLD"], ["MeanAbsoluteError", "MeanAbs"],
                          ["RootMeanSquareError", "RMSE"], ["MaxRelativeError", "MaxRel"],
                          ["MeanRelativeError", "MeanRel"]])
    inline = re.findall(r"<script>\n(.*?)\n</script>", page, re.S)
    assert inline == [script.replace("__TABLE_METRICS__", metrics)[:-1]]
    for name, text in (("page.html", skeleton), ("report.css", css), ("report.js", script)):
        assert text.isascii() and text.endswith("\n") and "\r" not in text, name
    assert re.search(r"__[A-Z][A-Z_]*[A-Z]__", page) is None     # every slot filled


def test_no_network_address_or_external_resource():
    page = render_html(synthetic_doc(50))
    assert re.search(r"(?i)(https?|ftp):", page) is None
    assert re.search(r"(?i)<link|@import|url\(|\ssrc=|<iframe|<object|<embed", page) is None


def test_embedded_document_round_trips():
    doc = synthetic_doc(120, overflow=False)
    page = render_html(doc)
    assert _embedded(page) == doc
    assert json.loads(EMBEDDED.findall(page)[0]) == json.loads(json.dumps(doc))


def test_non_finite_values_are_embedded_as_words():
    doc = synthetic_doc(60)                # the overflow row holds inf; a NaN is added
    doc["rows"][0]["metrics"]["KullbackLeiblerDivergence"] = float("nan")
    doc["rows"][1]["metrics"]["MaxAbsoluteError"] = float("-inf")
    embedded = _embedded(render_html(doc))
    assert embedded == _json_view(doc)
    assert embedded["rows"][0]["metrics"]["KullbackLeiblerDivergence"] == "NaN"
    assert embedded["rows"][1]["metrics"]["MaxAbsoluteError"] == "-Infinity"
    assert "Infinity" in [r["metrics"]["MaxRelativeError"] for r in embedded["rows"] if r["status"] == "overflow"]


def test_output_is_ascii_and_keeps_other_characters():
    doc = synthetic_doc(30, fault_name="网络/卷积_融合")
    page = render_html(doc)
    assert page.isascii()
    assert _embedded(page)["first_divergence"]["npu_op"] == "网络/卷积_融合"
    assert html.unescape(page).count("网络/卷积_融合") >= 2    # header box and title


def test_header_holds_verdict_paths_thresholds_and_counts():
    doc = synthetic_doc(80)
    page = render_html(doc)
    header = page[page.index("<header>"):page.index("</header>")]
    assert '<span class="verdict verdict-fail" id="verdict">FAIL</span>' in header
    assert doc["npu"]["path"] in header and doc["golden"]["path"] in header
    assert "<dt>NPU step</dt><dd><code>{}</code></dd>".format(doc["npu"]["step_dir"]) in header
    assert ("CosineSimilarity &ge; 0.99 &middot; MagnitudeError &le; 0.01 &middot; RelativeEuclideanDistance "
            "&le; 0.05 &middot; MaxRelativeError &le; 0.5 &middot; MeanRelativeError &le; 0.05 "
            '<span class="muted">(off: scalars)</span>') in header
    assert '<div class="alert warn" id="warnings"><b>1 warning</b><ul><li>{}</li></ul></div>'.format(WARNING) in header
    for key, label in (("rows", "rows"), ("not_compared", "not compared"), ("root_causes", "root causes"),
                       ("propagated", "propagated"), ("overflow", "overflow")):
        assert "<b>{}</b><span>{}</span>".format(doc["summary"][key], label) in header
    assert "float16 overflow" in header


def test_thresholds_that_are_off_are_said_so():
    doc = synthetic_doc(20)
    doc["thresholds"].update(magnitude_err_max=None, max_rel_err=None, mean_rel_err=None, kld_max=0.25)
    header = render_html(doc).split("</header>")[0]
    assert ("CosineSimilarity &ge; 0.99 &middot; RelativeEuclideanDistance &le; 0.05 &middot; kld_max = 0.25 "
            '<span class="muted">(off: MagnitudeError, MaxRelativeError, MeanRelativeError, scalars)</span>') in header


def test_check_scalars_is_a_switch_not_a_limit():
    doc = synthetic_doc(20, warnings=())
    doc["thresholds"].update(check_scalars=True, rel_euclid_max=None, max_rel_err=None, mean_rel_err=None,
                             strict=False)
    header = render_html(doc).split("</header>")[0]
    assert ("CosineSimilarity &ge; 0.99 &middot; MagnitudeError &le; 0.01 &middot; scalars checked &middot; "
            "strict = False "
            '<span class="muted">(off: RelativeEuclideanDistance, MaxRelativeError, MeanRelativeError)</span>') in header
    assert 'id="warnings"' not in header


def test_several_warnings_are_listed_escaped():
    doc = synthetic_doc(20, warnings=("3 of 9 dump file(s) match no op <of the graph>", WARNING))
    header = render_html(doc).split("</header>")[0]
    assert "<b>2 warnings</b><ul><li>3 of 9 dump file(s) match no op &lt;of the graph&gt;</li><li>" in header


def test_magnitude_error_in_the_boxes_written_here():
    doc = synthetic_doc(80)
    page = render_html(doc)
    box = page[page.index('<section id="first-divergence"'):]
    box = box[:box.index("</section>")]
    fd_row = doc["rows"][doc["first_divergence"]["row"]]
    assert '<th title="MagnitudeError">Mag</th>' in box
    assert "<td>{:.7g}</td>".format(fd_row["magnitude_error"]) in box
    assert "<dt>golden tensor</dt><dd><code>{}</code></dd>".format(fd_row["golden_tensor"]) in box
    second = doc["rows"][doc["root_causes"][1]]
    assert "&middot; mag {:.7g}</li>".format(second["magnitude_error"]) in page   # further root causes


def test_document_without_magnitude_error_derives_it():
    """A document written before rows carried magnitude_error: derived as the thresholds do."""
    doc = synthetic_doc(40, warnings=())
    for row in doc["rows"]:
        del row["magnitude_error"]
    for key in ("magnitude_err_max", "check_scalars"):
        del doc["thresholds"][key]
    del doc["warnings"], doc["npu"]["step_dir"]
    page = render_html(doc)
    metrics = doc["first_divergence"]["metrics"]
    box = page[page.index('<section id="first-divergence"'):]
    assert "<td>{:.7g}</td>".format(magnitude_error(metrics)) in box[:box.index("</section>")]
    assert "scalars" not in page.split("</header>")[0] and "NPU step" not in page


def test_first_divergence_box_lists_node_ops_metrics_and_inputs():
    doc = synthetic_doc(80)
    page = render_html(doc)
    box = page[page.index('<section id="first-divergence"'):]
    box = box[:box.index("</section>")]
    first = doc["first_divergence"]
    assert '<code id="fd-op">{}</code> (Conv2D)'.format(first["npu_op"]) in box
    for op in first["original_ops"]:
        assert "<li><code>{}</code></li>".format(op) in box
    assert first["tensor"] in box
    assert '<a href="#row={0}" class="row-link" data-row="{0}">'.format(first["row"]) in box
    cos = first["metrics"]["CosineSimilarity"]
    assert "<td>{}</td>".format("{:.7g}".format(cos)) in box
    assert first["inputs"][0]["tensor"] in box and first["inputs"][1]["tensor"] in box
    assert "<dt>breached</dt><dd>{}</dd>".format(", ".join(first["breached"])) in box
    assert "MagnitudeError" in first["breached"]


def test_pass_document_without_divergence_or_rows():
    doc = synthetic_doc(10)
    doc.update(rows=[], root_causes=[], first_divergence=None)
    doc["summary"].update(verdict="pass", overflow=0, input_inconsistent=False)
    page = render_html(doc)
    assert "verdict-pass" in page and "No first divergence: every compared tensor is within the thresholds." in page
    assert "float16 overflow" not in page and _embedded(page)["rows"] == []


@pytest.mark.parametrize("doc, rule", [
    ([], "must be a JSON object"),
    ({"schema": "npu_dump_hook/compare@2", "rows": []}, "schema must be"),
    ({"schema": "npu_dump_hook/compare@1", "rows": {}}, "'rows' must be a list"),
    ({"schema": "npu_dump_hook/compare@1", "rows": [1]}, "'rows' must be a list of objects"),
])
def test_refuses_what_is_no_compare_document(doc, rule):
    with pytest.raises(FormatError, match=re.escape(rule)):
        render_html(doc)


# ---- in a real browser ---------------------------------------------------------------------

class _Node(object):
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.texts = tag, dict(attrs), parent, [], []

    def text(self):
        return "".join(self.texts) + "".join(child.text() for child in self.children)

    def walk(self):
        yield self
        for child in self.children:
            for node in child.walk():
                yield node


class _Tree(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self, text):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.root = self.current = _Node("#root", {}, None)
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        node = _Node(tag, attrs, self.current)
        self.current.children.append(node)
        if tag not in self.VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(_Node(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.texts.append(data)

    def find(self, tag=None, **attrs):
        return [node for node in self.root.walk() if (tag is None or node.tag == tag)
                and all(node.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_id(self, ident):
        found = [node for node in self.root.walk() if node.attrs.get("id") == ident]
        assert len(found) == 1, ident
        return found[0]


def _chromium_dom(page_path, tmp_path, fragment="", extra=()):
    """The DOM Chromium holds after loading the page, and its console lines."""
    done = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--user-data-dir=" + str(tmp_path / "chromium-profile")] + list(extra) + ["--dump-dom",
         page_path.as_uri() + fragment],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    console = [line for line in done.stderr.decode(errors="replace").splitlines()
               if "CONSOLE" in line or "Uncaught" in line]
    return _Tree(done.stdout.decode()), console


def _expected_order(doc, metric, descending, only=None):
    """The table's sort rule, written again: NaN/null last either way, ties by row position."""
    def key(i):
        value = doc["rows"][i]["metrics"] and doc["rows"][i]["metrics"].get(metric)
        return value is not None and not math.isnan(value), value
    chosen = [i for i in range(len(doc["rows"])) if only is None or only(doc["rows"][i])]
    known = [i for i in chosen if key(i)[0]]
    unknown = [i for i in chosen if not key(i)[0]]
    known.sort(key=lambda i: (-key(i)[1] if descending else key(i)[1], i))
    return known + unknown


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed")
    tmp_path = tmp_path_factory.mktemp("html")
    doc = synthetic_doc(3000, fault_name=HOSTILE)   # ~4,000 rows: the plot thins its points, the table pages
    page = tmp_path / "report.html"
    page.write_text(render_html(doc), encoding="ascii")
    fragment = "#row={}&sort=MaxRelativeError&dir=desc&page=1".format(doc["first_divergence"]["row"])
    tree, console = _chromium_dom(page, tmp_path, fragment)
    return doc, tree, console


@needs_chromium
def test_chromium_renders_without_script_errors(rendered):
    _, tree, console = rendered
    body = tree.find("body")[0]
    assert console == []
    assert "data-render-error" not in body.attrs
    assert body.attrs.get("data-rendered") == "1"
    assert tree.find("img") == [] and len(tree.find("script")) == 2


@needs_chromium
def test_chromium_draws_the_plot(rendered):
    doc, tree, _ = rendered
    plotted = [r for r in doc["rows"] if r["direction"] == "output"]
    paths = {node.attrs["class"].split()[1]: node for node in tree.find("path") if "series" in node.attrs.get("class", "")}
    series = {"cos": "CosineSimilarity", "maxrel": "MaxRelativeError", "meanrel": "MeanRelativeError",
              "releuc": "RelativeEuclideanDistance", "mag": "MagnitudeError"}
    assert sorted(paths) == sorted(series)
    for name, metric in series.items():
        drawn = [r for r in plotted if r["status"] != "not_compared" and
                 (r["magnitude_error"] if metric == "MagnitudeError" else r["metrics"][metric]) is not None]
        points = int(paths[name].attrs["data-points"])
        assert int(paths[name].attrs["data-rows"]) == len(drawn)
        assert 0 < points < len(drawn)          # thinned to about 2 points per pixel column
        assert len(re.findall(r"[ML]-?\d", paths[name].attrs["d"])) == points
    assert int(tree.by_id("plot").attrs["data-plotted-rows"]) == len(plotted)
    marker = tree.by_id("fd-marker")
    assert marker.attrs["data-row"] == str(doc["first_divergence"]["row"])
    assert HOSTILE in marker.text()                  # its hover title names the node
    bands = [n for n in tree.find("rect") if n.attrs.get("class") == "prop"]
    assert bands and all("propagated" in band.text() for band in bands)
    # The band starts right after the first divergence (only the overflow row sits between them).
    assert abs(float(bands[0].attrs["x"]) - float(marker.attrs["x1"])) < 3
    thresholds = sorted(n.attrs["class"] for n in tree.find("line") if "thr" in n.attrs.get("class", "").split())
    assert thresholds == ["thr cos", "thr mag", "thr maxrel", "thr meanrel", "thr releuc"]
    roots = [n for n in tree.find("circle") if "root" in n.attrs.get("class", "")]
    assert sorted(int(n.attrs["data-row"]) for n in roots) == sorted(doc["root_causes"])


@needs_chromium
def test_chromium_shows_the_first_divergence(rendered):
    doc, tree, _ = rendered
    box = tree.by_id("first-divergence")
    assert tree.by_id("fd-op").text() == HOSTILE
    text = box.text()
    for op in doc["first_divergence"]["original_ops"]:
        assert op in text
    assert doc["first_divergence"]["inputs"][0]["tensor"] in text


@needs_chromium
def test_chromium_sorted_page_and_row_detail(rendered):
    doc, tree, _ = rendered
    body_rows = [n for n in tree.by_id("rows").walk() if n.tag == "tr" and "data-row" in n.attrs]
    shown = [int(n.attrs["data-row"]) for n in body_rows]
    expected = _expected_order(doc, "MaxRelativeError", descending=True)
    assert shown == expected[:100]
    assert doc["rows"][shown[0]]["status"] == "overflow"    # inf sorts first
    fd_row = doc["first_divergence"]["row"]
    assert fd_row in shown
    assert [n.attrs.get("class") for n in body_rows if n.attrs["data-row"] == str(fd_row)] == ["selected"]
    header = [n for n in tree.find("th") if n.attrs.get("data-key") == "MaxRelativeError"]
    assert header[0].attrs.get("class") == "sorted-desc"
    assert "page 1 of {} ".format(-(-len(doc["rows"]) // 100)) in tree.by_id("page-info").text()
    detail = tree.by_id("detail")
    assert detail.attrs.get("data-row") == str(fd_row)
    text = detail.text()
    for op in doc["rows"][fd_row]["ground_truth"]:
        assert op in text
    assert "NC1HWC0" in text and "[1,8,8,32]" in text and "DT_FLOAT16 / DT_FLOAT" in text
    assert repr(doc["rows"][fd_row]["metrics"]["MaxRelativeError"]) in text   # full precision
    assert "Inputs of the first divergence" in text
    assert ", ".join(doc["rows"][fd_row]["breached"]) in text and doc["rows"][fd_row]["golden_tensor"] in text
    assert repr(doc["rows"][fd_row]["magnitude_error"]) in text


@needs_chromium
def test_chromium_check_sees_a_script_error(tmp_path):
    """The browser check can fail: a report whose script breaks is caught by each of its signs."""
    page = render_html(synthetic_doc(20)).replace("JSON.parse(document", "JSON.parsed(document", 1)
    path = tmp_path / "broken.html"
    path.write_text(page, encoding="ascii")
    tree, console = _chromium_dom(path, tmp_path)
    body = tree.find("body")[0]
    assert any("Uncaught TypeError" in line for line in console)
    assert "data-rendered" not in body.attrs and "JSON.parsed" in body.attrs["data-render-error"]
    assert "The report script failed" in tree.by_id("render-error").text()


@needs_chromium
def test_chromium_renders_names_with_template_characters(tmp_path):
    doc = _template_hostile_doc()
    path = tmp_path / "template.html"
    path.write_text(render_html(doc), encoding="ascii")
    tree, console = _chromium_dom(path, tmp_path, "#row={}".format(doc["first_divergence"]["row"]))
    body = tree.find("body")[0]
    assert console == [] and "data-render-error" not in body.attrs and body.attrs.get("data-rendered") == "1"
    assert len(tree.find("script")) == 2
    assert tree.find("title")[0].text() == "compare FAIL: first divergence at " + TEMPLATE_HOSTILE
    assert tree.by_id("fd-op").text() == TEMPLATE_HOSTILE
    assert TEMPLATE_HOSTILE in tree.by_id("detail").text()


# Clicks, a status choice, paging, a hover and typing, as a user does them, by a script added to
# a copy of the page after the report's own; it writes what it saw into <body data-driver>.
_DRIVER = """<script>
(function () {
  var out = {}, detail = document.getElementById("detail"), sel = document.getElementById("status-filter");
  function shown() {
    return Array.prototype.map.call(document.querySelectorAll("#rows tbody tr"), function (tr) {
      return parseInt(tr.getAttribute("data-row"), 10); });
  }
  function click(node) { node.dispatchEvent(new MouseEvent("click", {bubbles: true, cancelable: true})); }
  function th(key) { return document.querySelector("#rows th[data-key=" + key + "]"); }
  function info() { return document.getElementById("page-info").textContent; }
  click(th("CosineSimilarity")); out.cosAsc = shown(); out.cosAscClass = th("CosineSimilarity").className;
  click(th("CosineSimilarity")); out.cosDesc = shown();
  click(th("npu_op")); out.nameAsc = shown();
  var tr = document.querySelectorAll("#rows tbody tr")[3];
  click(tr.children[2]);
  out.clicked = parseInt(tr.getAttribute("data-row"), 10);
  out.detail = parseInt(detail.getAttribute("data-row"), 10);
  out.selected = shown().filter(function (r, k) {
    return document.querySelectorAll("#rows tbody tr")[k].className === "selected"; });
  sel.value = "propagated"; sel.dispatchEvent(new Event("change", {bubbles: true}));
  out.prop1 = shown(); out.propInfo = info();
  click(document.getElementById("next")); out.prop2 = shown(); out.prop2Info = info();
  var mark = document.querySelectorAll("#plot circle.mark.root")[1];
  click(mark);
  out.markRow = parseInt(mark.getAttribute("data-row"), 10);
  out.markDetail = parseInt(detail.getAttribute("data-row"), 10);
  out.statusAfterMark = sel.value;
  out.markShown = shown().indexOf(out.markRow) >= 0;
  click(document.querySelector("#first-divergence a.row-link"));
  out.linkDetail = parseInt(detail.getAttribute("data-row"), 10);
  var svg = document.getElementById("plot"), m = svg.getScreenCTM(), tip = document.getElementById("tip");
  document.getElementById("hover").dispatchEvent(new MouseEvent("mousemove",
    {bubbles: true, clientX: m.e + m.a * 527.5, clientY: m.f + m.d * 100}));
  out.tipHidden = tip.hidden; out.tip = tip.textContent;
  var filter = document.getElementById("filter");
  filter.value = "LAYER_12/"; filter.dispatchEvent(new Event("input", {bubbles: true}));
  setTimeout(function () {
    out.filtered = shown(); out.hash = decodeURIComponent(location.hash);
    document.body.setAttribute("data-driver", JSON.stringify(out));
  }, 500);
})();
</script>
"""


@needs_chromium
def test_chromium_clicks_sort_select_page_hover_and_filter(tmp_path):
    doc = synthetic_doc(301, fault_at=100)   # ~400 rows, 4 pages; root causes at orders 100 and 200
    doc["thresholds"]["max_rel_err"] = None   # a check that is off has no threshold line
    page = render_html(doc)
    path = tmp_path / "driven.html"
    path.write_text(page.replace("</body>", _DRIVER + "</body>"), encoding="ascii")
    tree, console = _chromium_dom(path, tmp_path, extra=["--virtual-time-budget=10000"])
    assert console == []
    out = json.loads(tree.find("body")[0].attrs["data-driver"])
    rows = doc["rows"]
    assert out["cosAsc"] == _expected_order(doc, "CosineSimilarity", False)[:100]
    assert out["cosAscClass"] == "sorted-asc"
    assert out["cosDesc"] == _expected_order(doc, "CosineSimilarity", True)[:100]
    by_name = sorted(range(len(rows)), key=lambda i: (rows[i]["npu_op"], i))
    assert out["nameAsc"] == by_name[:100]
    assert out["clicked"] == by_name[3] == out["detail"] and out["selected"] == [by_name[3]]
    propagated = [i for i in by_name if rows[i]["status"] == "propagated"]
    assert out["prop1"] == propagated[:100] and out["prop2"] == propagated[100:200]
    pages = -(-len(propagated) // 100)
    assert out["propInfo"] == "page 1 of {} \u00b7 {} of {} rows".format(pages, len(propagated), len(rows))
    assert out["prop2Info"].startswith("page 2 of ")
    # A root-cause mark is not a propagated row: opening it clears the status filter to show it.
    assert out["markRow"] == doc["root_causes"][1] == out["markDetail"]
    assert out["statusAfterMark"] == "" and out["markShown"]
    assert out["linkDetail"] == doc["first_divergence"]["row"]
    # Plot x 527.5 of 70..985 is the middle of orders -0.5..300.5: the row nearest order 150.
    assert not out["tipHidden"] and "net/layer_150/op" in out["tip"] and "order 150" in out["tip"]
    layer_12 = [i for i in by_name if rows[i]["npu_op"] == "net/layer_12/op"]
    assert len(layer_12) == 2 and out["filtered"] == layer_12
    assert "q=LAYER_12/" in out["hash"] and "sort=npu_op" in out["hash"]
    thresholds = sorted(n.attrs["class"] for n in tree.find("line") if "thr" in n.attrs.get("class", "").split())
    assert thresholds == ["thr cos", "thr mag", "thr meanrel", "thr releuc"]


# ---- a document compare() wrote ------------------------------------------------------------

def _real_bundle(tmp_path):
    """x -> pre (float16 on the NPU) -> head/add_0..3 -> a fused Conv2D+BiasAdd (NC1HWC0) whose NPU
    output is 5% too large -> an op without golden file -> tail/add_0..4 inheriting the error; a
    stray file in data/golden makes compare() warn."""
    rng = np.random.default_rng(11)
    synth = Synth(tmp_path)
    x = rng.standard_normal((2, 4, 4, 16)).astype(np.float32)
    synth.op("x", "Data", x, no_task=True)
    pre = x * np.float32(2)
    synth.op("pre", "Mul", pre, inputs=["x:0"], dtype=np.float16)
    chain(synth, 4, pre, prefix="head", first_input="pre:0")
    conv = pre + np.float32(2.0)
    synth.golden_value("scope/Conv2D", conv)
    fused = conv + np.float32(0.1)
    synth.op("scope/conv_fused", "Conv2D", fused, inputs=["head/add_3:0"], npu=fused * np.float32(1.05),
             original_names=["scope/Conv2D", "scope/BiasAdd"], origin=("scope/BiasAdd", 0), fmt=("NC1HWC0", "NHWC"))
    synth.op("no_golden", "Relu", np.maximum(fused, 0), inputs=["scope/conv_fused:0"], golden=False)
    chain(synth, 5, fused, prefix="tail", first_input="scope/conv_fused:0", npu_start=fused * np.float32(1.05))
    bundle = synth.bundle()
    with open(str(tmp_path / "bundle" / "data" / "golden" / "notes.txt"), "w") as handle:
        handle.write("not a golden tensor")
    return bundle


def _points(path_node):
    return [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+) (-?[\d.]+)", path_node.attrs["d"])]


@needs_chromium
def test_chromium_renders_a_document_compare_wrote(tmp_path):
    doc = compare(_real_bundle(tmp_path), workers=1).doc
    first = doc["first_divergence"]
    assert first["npu_op"] == "scope/conv_fused" and doc["warnings"]      # the run is what the test needs
    page = tmp_path / "real.html"
    page.write_text(render_html(doc), encoding="ascii")
    tree, console = _chromium_dom(page, tmp_path, "#row={}".format(first["row"]))
    body = tree.find("body")[0]
    assert console == [] and "data-render-error" not in body.attrs and body.attrs.get("data-rendered") == "1"
    assert tree.by_id("fd-op").text() == "scope/conv_fused"
    header = tree.find("header")[0].text()
    assert doc["npu"]["step_dir"] in header and "notes.txt" in tree.by_id("warnings").text()
    assert "MagnitudeError \u2264 0.01" in header and "scalars" in header and "check_scalars" not in header
    # The MagnitudeError series: a point per compared output row, the fault's above its dashed
    # threshold on the log axis, the clean rows before it below.
    mag = [n for n in tree.find("path") if n.attrs.get("class") == "series mag"]
    assert len(mag) == 1
    drawn = [r for r in doc["rows"] if r["direction"] == "output" and r["magnitude_error"] is not None]
    points = _points(mag[0])
    assert int(mag[0].attrs["data-rows"]) == len(drawn) == len(points)
    threshold = [n for n in tree.find("line") if n.attrs.get("class") == "thr mag"]
    assert len(threshold) == 1
    limit_y = float(threshold[0].attrs["y1"])
    fd_x = float(tree.by_id("fd-marker").attrs["x1"])
    fd_point = min(points, key=lambda p: abs(p[0] - fd_x))
    assert abs(fd_point[0] - fd_x) < 0.2 and fd_point[1] < limit_y
    assert all(y > limit_y for x, y in points if x < fd_x - 1)
    assert sorted(n.attrs["class"] for n in tree.find("line") if "thr" in n.attrs.get("class", "").split()) == \
        ["thr cos", "thr mag"]                       # the relative errors are off by default
    assert [n for n in tree.find("th") if n.attrs.get("data-key") == "MagnitudeError"]
    detail = tree.by_id("detail")
    assert detail.attrs.get("data-row") == str(first["row"])
    fd_row = doc["rows"][first["row"]]
    assert tree.by_id("detail-breached").text() == "MagnitudeError" == ", ".join(fd_row["breached"])
    assert fd_row["golden_tensor"] == "scope/BiasAdd:0" and fd_row["golden_tensor"] in detail.text()
    magnitude_cell = [n for n in tree.by_id("detail-metrics").walk() if n.attrs.get("data-metric") == "MagnitudeError"]
    assert magnitude_cell[0].text() == "MagnitudeError" + repr(fd_row["magnitude_error"])
