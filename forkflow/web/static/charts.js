/* forkflow charts: draws the JSON chart payloads of a page as SVG (no dependency, no network).
 *
 * A page carries one <script type="application/json" id="ff-charts"> block mapping keys to
 * payloads (see forkflow/web/charts.py) and one <div data-chart="key"> per chart.
 * Part of forkflow, Apache-2.0.
 */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { if (attrs.hasOwnProperty(k)) { e.setAttribute(k, String(attrs[k])); } }
    if (parent) { parent.appendChild(e); }
    return e;
  }

  function fmt(v) {
    if (v === null || v === undefined) { return "-"; }
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) { return v.toExponential(3); }
    return String(Math.round(v * 1000) / 1000);
  }

  // axis ticks: enough decimals to tell the three ticks apart (a span of 1e-4 needs 6)
  function fmtTick(v, span) {
    var a = Math.abs(v);
    if (a !== 0 && a >= 1e6) { return v.toExponential(3); }
    var digits = span > 0 ? Math.max(0, Math.ceil(-Math.log10(span)) + 2) : 3;
    return v.toFixed(Math.min(digits, 10));
  }

  function day(t) {
    var d = new Date(t * 1000);
    return d.toISOString().slice(0, 10);
  }

  // the value range drawn, padded; a series with a floor (days, counts: never below 0) stops there
  function extent(values, floor) {
    var lo = Infinity, hi = -Infinity, out;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null || v === undefined) { continue; }
      if (v < lo) { lo = v; }
      if (v > hi) { hi = v; }
    }
    if (lo === Infinity) { out = [0, 1]; }
    else if (lo === hi) { var pad = Math.abs(lo) * 0.05 || 1; out = [lo - pad, hi + pad]; }
    else { var m = (hi - lo) * 0.08; out = [lo - m, hi + m]; }
    if (typeof floor === "number" && out[0] < floor) {
      out[0] = floor;
      if (out[1] <= floor) { out[1] = floor + 1; }
    }
    return out;
  }

  function scales(spec, w, h, m) {
    var n = spec.y.length;
    var xs = spec.x && spec.x.length === n ? spec.x : spec.y.map(function (_, i) { return i; });
    var monotone = true;
    for (var i = 1; i < n; i++) { if (xs[i] < xs[i - 1]) { monotone = false; break; } }
    if (!monotone) { xs = spec.y.map(function (_, i) { return i; }); }
    var x0 = xs[0], x1 = xs[n - 1];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    var ye = extent(spec.y, spec.floor);
    return {
      xs: xs,
      x: function (i) { return m.l + (xs[i] - x0) / (x1 - x0) * (w - m.l - m.r); },
      y: function (v) { return m.t + (1 - (v - ye[0]) / (ye[1] - ye[0])) * (h - m.t - m.b); },
      ylo: ye[0], yhi: ye[1]
    };
  }

  function axes(svg, spec, s, w, h, m) {
    var g = el("g", { "class": "ff-axes" }, svg);
    el("line", { x1: m.l, x2: w - m.r, y1: h - m.b, y2: h - m.b, "class": "ff-axis" }, g);
    el("line", { x1: m.l, x2: m.l, y1: m.t, y2: h - m.b, "class": "ff-axis" }, g);
    var ticks = [s.ylo, (s.ylo + s.yhi) / 2, s.yhi];
    ticks.forEach(function (v) {
      var y = s.y(v);
      el("line", { x1: m.l, x2: w - m.r, y1: y, y2: y, "class": "ff-grid" }, g);
      var t = el("text", { x: m.l - 4, y: y + 3, "text-anchor": "end", "class": "ff-tick" }, g);
      t.textContent = fmtTick(v, s.yhi - s.ylo);
    });
    var n = spec.y.length;
    if (n > 0 && spec.x && spec.x.length === n && spec.x[0] > 1e8) {
      var a = el("text", { x: m.l, y: h - 4, "class": "ff-tick" }, g);
      a.textContent = day(spec.x[0]);
      var b = el("text", { x: w - m.r, y: h - 4, "text-anchor": "end", "class": "ff-tick" }, g);
      b.textContent = day(spec.x[n - 1]);
    }
    if (spec.unit) {
      var u = el("text", { x: m.l + 4, y: m.t + 10, "class": "ff-unit" }, g);
      u.textContent = spec.unit + (spec.better ? " (" + spec.better + " is better)" : "");
    }
  }

  function tooltip(box) {
    var tip = document.createElement("div");
    tip.className = "ff-tip";
    tip.hidden = true;
    box.appendChild(tip);
    return tip;
  }

  function linkWrap(parent, href, title) {
    var node = parent;
    if (href) {
      node = el("a", { href: href, "class": "ff-link" }, parent);
    }
    if (title) { el("title", {}, node).textContent = title; }
    return node;
  }

  function drawLine(box, spec) {
    var w = Math.max(box.clientWidth || 600, 240);
    var h = spec.compact ? 130 : 280;
    var m = { l: 54, r: 12, t: 14, b: 20 };
    var svg = el("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, "class": "ff-svg ff-line-chart",
                          role: "img", "aria-label": spec.title || "chart" });
    var n = spec.y.length;
    svg.setAttribute("data-points", String(spec.y.filter(function (v) { return v !== null; }).length));
    box.appendChild(svg);
    if (n === 0) {
      var t = el("text", { x: w / 2, y: h / 2, "text-anchor": "middle", "class": "ff-nodata" }, svg);
      t.textContent = "no data";
      return;
    }
    var s = scales(spec, w, h, m);
    axes(svg, spec, s, w, h, m);
    (spec.marks || []).forEach(function (mk) {
      if (mk.after >= n) { return; }
      var g = linkWrap(svg, mk.href, mk.label);
      var xa = s.x(Math.max(0, Math.min(mk.before, n - 1))), xb = s.x(mk.after);
      el("rect", { x: Math.min(xa, xb), y: m.t, width: Math.max(Math.abs(xb - xa), 3), height: h - m.t - m.b,
                   "class": "ff-mark ff-" + mk.cls, "data-after": mk.after }, g);
      el("line", { x1: xb, x2: xb, y1: m.t, y2: h - m.b, "class": "ff-markline ff-" + mk.cls }, g);
    });
    var d = "", pen = false;
    for (var i = 0; i < n; i++) {
      var v = spec.y[i];
      if (v === null) { pen = false; continue; }
      d += (pen ? "L" : "M") + s.x(i).toFixed(1) + " " + s.y(v).toFixed(1);
      pen = true;
    }
    el("path", { d: d, "class": "ff-line" }, svg);
    if (!spec.compact) {
      var pts = el("g", { "class": "ff-pts" }, svg);
      for (var j = 0; j < n; j++) {
        if (spec.y[j] === null) { continue; }
        el("circle", { cx: s.x(j).toFixed(1), cy: s.y(spec.y[j]).toFixed(1), r: n > 200 ? 1.6 : 2.6,
                       "class": "ff-pt" }, pts);
      }
    }
    hover(box, svg, spec, s, m, h);
  }

  function hover(box, svg, spec, s, m, h) {
    var tip = tooltip(box);
    var dot = el("circle", { r: 4, "class": "ff-hover", cx: -10, cy: -10 }, svg);
    var n = spec.y.length;
    svg.addEventListener("mousemove", function (ev) {
      var rect = svg.getBoundingClientRect();
      var px = ev.clientX - rect.left, best = -1, bestd = Infinity;
      for (var i = 0; i < n; i++) {
        if (spec.y[i] === null) { continue; }
        var dd = Math.abs(s.x(i) - px);
        if (dd < bestd) { bestd = dd; best = i; }
      }
      if (best < 0) { return; }
      dot.setAttribute("cx", s.x(best));
      dot.setAttribute("cy", s.y(spec.y[best]));
      var parts = [fmt(spec.y[best]) + (spec.unit ? " " + spec.unit : "")];
      if (spec.labels && spec.labels[best]) { parts.push(spec.labels[best]); }
      if (spec.x && spec.x[best] > 1e8) { parts.push(day(spec.x[best])); }
      tip.textContent = parts.join(" · ");
      tip.hidden = false;
      tip.style.left = Math.min(s.x(best) + 8, box.clientWidth - 180) + "px";
      tip.style.top = Math.max(s.y(spec.y[best]) - 28, 0) + "px";
    });
    svg.addEventListener("mouseleave", function () { tip.hidden = true; dot.setAttribute("cx", -10); });
  }

  function drawBars(box, spec) {
    var w = Math.max(box.clientWidth || 600, 240), h = 120;
    var m = { l: 54, r: 12, t: 10, b: 20 };
    var svg = el("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, "class": "ff-svg ff-bar-chart",
                          role: "img", "aria-label": spec.title || "chart" });
    var n = spec.y.length;
    svg.setAttribute("data-points", String(n));
    box.appendChild(svg);
    if (n === 0) {
      var t = el("text", { x: w / 2, y: h / 2, "text-anchor": "middle", "class": "ff-nodata" }, svg);
      t.textContent = "no data";
      return;
    }
    var hi = 0;
    spec.y.forEach(function (v) { if (v !== null && v > hi) { hi = v; } });
    hi = hi || 1;
    var bw = Math.min((w - m.l - m.r) / n, 28);
    el("line", { x1: m.l, x2: w - m.r, y1: h - m.b, y2: h - m.b, "class": "ff-axis" }, svg);
    var top = el("text", { x: m.l - 4, y: m.t + 8, "text-anchor": "end", "class": "ff-tick" }, svg);
    top.textContent = fmt(hi);
    for (var i = 0; i < n; i++) {
      var v = spec.y[i] === null ? 0 : spec.y[i];
      var bh = Math.max((v / hi) * (h - m.t - m.b), 2);
      var g = linkWrap(svg, spec.href && spec.href[i], (spec.labels && spec.labels[i]) || "");
      el("rect", { x: (m.l + i * bw + bw * 0.1).toFixed(1), y: (h - m.b - bh).toFixed(1),
                   width: Math.max(bw * 0.8, 1).toFixed(1), height: bh.toFixed(1),
                   "class": "ff-bar ff-" + String(spec.cls[i] || "").toLowerCase() }, g);
    }
  }

  var DRAW = { line: drawLine, bars: drawBars };

  function render() {
    var block = document.getElementById("ff-charts");
    if (!block) { document.documentElement.setAttribute("data-charts-rendered", "0"); return; }
    var specs;
    try { specs = JSON.parse(block.textContent); } catch (e) { return; }
    var boxes = document.querySelectorAll("[data-chart]");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i], spec = specs[box.getAttribute("data-chart")];
      while (box.firstChild) { box.removeChild(box.firstChild); }
      if (!spec || !DRAW[spec.type]) { continue; }
      DRAW[spec.type](box, spec);
      box.setAttribute("data-rendered", "1");
    }
    document.documentElement.setAttribute("data-charts-rendered", String(boxes.length));
  }

  var timer = null;
  window.addEventListener("resize", function () {
    if (timer) { clearTimeout(timer); }
    timer = setTimeout(render, 150);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
