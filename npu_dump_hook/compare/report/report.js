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
  if (row.shape_note) detailItem(grid, "shape note", el("span", {id: "detail-shape-note"}, text(row.shape_note)));
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
