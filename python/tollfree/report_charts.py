"""The interactive charts of the HTML report: the data each chart needs (down-sampled for long
series: each bucket's lowest and highest bar of every line kept, so the shape and every extreme
survive), the vendored charting library (uPlot, tollfree.report_vendor) and the glue that hands
the data to it. Zoom: drag across a chart (the price, equity and drawdown charts follow each
other; double-click resets); hover: the values under the cursor. Scripts reach the charts as
``window.tollfreeCharts`` (price, equity, drawdown, sweep), uPlot objects."""
from __future__ import annotations

import html
import json

import numpy as np

from tollfree import report_vendor

FULL = 10_000       # up to this many bars every bar is drawn (a daily file: 40 years)
BUCKETS = 1000      # a longer series is drawn from its buckets' extremes
MAX_MARKERS = 5000  # more position changes than this: no markers (the page says so)


def pick(lines, n: int, buckets: int = BUCKETS, full: int = FULL) -> np.ndarray:
    """The bars to draw: every bar of a series of up to ``full`` bars; else, per bucket of
    consecutive bars, the lowest and the highest bar of each line, with the first and last."""
    if n <= full:
        return np.arange(n)
    k = -(-n // buckets)
    nb = n // k
    keep = [np.array([0, n - 1])]
    base = np.arange(nb) * k
    for y in lines:
        body = y[: nb * k].reshape(nb, k)
        keep += [base + np.argmin(body, axis=1), base + np.argmax(body, axis=1)]
        if nb * k < n:
            tail = y[nb * k:]
            keep.append(nb * k + np.array([np.argmin(tail), np.argmax(tail)]))
    return np.unique(np.concatenate(keep))


def _nums(a, sig: int = 7) -> list:
    """Numbers for the page, ``sig`` significant digits (NaN and infinities as null)."""
    return [float(f"{v:.{sig}g}") if abs(v) < float("inf") else None
            for v in np.asarray(a, dtype=float).tolist()]


def epoch_seconds(dates=None, times=None):
    """Each bar's time in Unix seconds (int64) for the time axes: ``times`` (datetime64), else
    ``dates`` parsed (ISO forms; numpy, then pandas); None when neither gives one per bar."""
    if times is None and dates is not None:
        try:
            times = np.asarray(dates, dtype="datetime64[s]")
        except (ValueError, TypeError):
            try:
                import pandas as pd
                times = naive_utc(pd.to_datetime(list(dates)))
            except Exception:  # labels that are not dates: bar numbers on the axes
                return None
    if times is None:
        return None
    t = np.asarray(times).astype("datetime64[s]")
    if np.isnat(t).any():
        return None
    return t.astype(np.int64)


def naive_utc(index) -> np.ndarray:
    """A pandas DatetimeIndex as datetime64 in UTC (an aware one converted, a naive one as is)."""
    return (index.tz_convert(None) if index.tz is not None else index).to_numpy()


def bars_data(close, eq: dict, secs=None) -> dict:
    """The price, equity and drawdown charts' data: one x (Unix seconds, or bar numbers) for
    the three, and the position changes as indices into it."""
    n = close.shape[0]
    dd = -eq["drawdown"]
    idx = pick([close, eq["closed"], eq["mtm"], dd], n)
    fl = eq["flips"]
    marks = {}
    if fl.size <= MAX_MARKERS:
        idx = np.union1d(idx, fl)
        where = np.searchsorted(idx, fl)
        side = eq["pos"][fl]
        marks = {"long": where[side > 0].tolist(), "short": where[side < 0].tolist(),
                 "flat": where[side == 0].tolist()}
    x = (secs[idx] if secs is not None else idx).tolist()
    return {"time": secs is not None, "x": x, "close": _nums(close[idx]),
            "closed": _nums(eq["closed"][idx]), "mtm": _nums(eq["mtm"][idx]),
            "dd": _nums(dd[idx]), "marks": marks, "shown": int(idx.size), "bars": n,
            "changes": int(fl.size)}


def heat_data(params, values, xi: int, yi: int, names, label: str = "pnl") -> dict:
    """A heatmap over two parameters: each cell the best value over the other parameters
    (NaN cells empty), row-major over the second parameter's values."""
    xs, ys = np.unique(params[:, xi]), np.unique(params[:, yi])
    z = np.full((ys.size, xs.size), np.nan)
    cx, cy = np.searchsorted(xs, params[:, xi]), np.searchsorted(ys, params[:, yi])
    np.fmax.at(z, (cy, cx), values)
    return {"kind": "heat", "xn": names[xi], "yn": names[yi], "label": label,
            "xs": _nums(xs, 12), "ys": _nums(ys, 12), "z": _nums(z.reshape(-1))}


def line_data(x, pnl, sharpe, xname: str) -> dict:
    """pnl and sharpe per trade against one parameter (sorted by it)."""
    o = np.argsort(x, kind="stable")
    return {"kind": "line", "xn": xname, "x": _nums(np.asarray(x)[o], 12),
            "pnl": _nums(np.asarray(pnl)[o]), "sharpe": _nums(np.asarray(sharpe)[o])}


def div(name: str, note: str = "") -> str:
    """Where one chart goes (the glue fills it)."""
    extra = f'<p class="note">{html.escape(note)}</p>' if note else ""
    return f'<div class="tfc" id="tf-{name}"></div>{extra}'


def scripts(data: dict) -> tuple[str, str]:
    """(style, body end): uPlot's stylesheet, and the data, uPlot itself with its license as a
    comment block, and the glue. VendorMissing when the library cannot be had."""
    lib = report_vendor.uplot()
    lic = lib["license"].replace("*/", "* /")
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    js = lib["js"].replace("</script", "<\\/script")
    body = (f'<script type="application/json" id="tf-data">{blob}</script>\n'
            f"<script>/*! uPlot {lib['version']} (https://github.com/leeoniya/uPlot), vendored "
            f"from the npm registry by tollfree; its license:\n{lic}*/\n{js}</script>\n"
            f"<script>{GLUE}</script>")
    return lib["css"] + _CSS, body


_CSS = ".tfc{margin:8px 0}.tfv{font:12px monospace;color:#1d232b;min-height:1.4em}"

# Hands the data to uPlot: options per chart, the zoom shared by the bar charts, the heatmap's
# cells (drawn in uPlot's draw hook) and the cell under the cursor.
GLUE = r"""(function () {
"use strict";
var D = JSON.parse(document.getElementById("tf-data").textContent), B = D.bars;
var C = window.tollfreeCharts = {};
function width(el) { return Math.max(320, el.clientWidth || 1000); }
function mk(name, opts, data) {
  var el = document.getElementById("tf-" + name);
  if (!el) return;
  opts.width = width(el);
  C[name] = new uPlot(opts, data, el);
}
var linked = ["price", "equity", "drawdown"];
function follow(u, key) {
  if (key !== "x") return;
  var s = u.scales.x;
  linked.forEach(function (k) {
    var o = C[k];
    if (o && o !== u && (o.scales.x.min !== s.min || o.scales.x.max !== s.max))
      o.setScale("x", {min: s.min, max: s.max});
  });
}
function barOpts(height, ylabel, series) {
  return {height: height, series: [{label: B.time ? "date (UTC)" : "bar"}].concat(series),
    scales: {x: {time: B.time}}, axes: [{}, {label: ylabel}],
    tzDate: function (t) { return uPlot.tzDate(new Date(t * 1e3), "Etc/UTC"); },
    cursor: {sync: {key: "tf-bars"}}, hooks: {setScale: [follow]}};
}
function nulls(idx) {
  var a = new Array(B.x.length).fill(null);
  idx.forEach(function (i) { a[i] = B.close[i]; });
  return a;
}
function marker(label, color) {
  return {label: label, stroke: color, paths: function () { return null; },
          points: {show: true, size: 5, fill: color, stroke: color}};
}
if (B) {
  var M = B.marks, ps = [{label: "close", stroke: "#333", width: 1}], pd = [B.x, B.close];
  if (M.long) {
    ps.push(marker("go long", "#1a8a3a"), marker("go short", "#c2331f"), marker("go flat", "#888"));
    pd.push(nulls(M.long), nulls(M.short), nulls(M.flat));
  }
  mk("price", barOpts(300, "close", ps), pd);
  mk("equity", barOpts(260, "equity, percent points", [
    {label: "marked to market", stroke: "#9bb5dd", width: 1},
    {label: "closed trades", stroke: "#1f5fbf", width: 1.5}]), [B.x, B.mtm, B.closed]);
  mk("drawdown", barOpts(160, "drawdown", [
    {label: "drawdown", stroke: "#c2331f", fill: "rgba(194,51,31,0.35)", width: 1}]),
    [B.x, B.dd]);
}
var S = D.sweep;
if (S && S.kind === "line") {
  mk("sweep", {height: 300, series: [{label: S.xn},
      {label: "pnl", stroke: "#1f5fbf", scale: "pnl", points: {show: true, size: 4}},
      {label: "sharpe per trade", stroke: "#d9730d", scale: "sh", points: {show: true, size: 3}}],
    scales: {x: {time: false}},
    axes: [{label: S.xn}, {scale: "pnl", label: "pnl, percent points"},
           {scale: "sh", side: 1, label: "sharpe per trade", grid: {show: false}}]},
    [S.x, S.pnl, S.sharpe]);
} else if (S && S.kind === "heat") {
  var nx = S.xs.length, ny = S.ys.length, lo = Infinity, hi = -Infinity;
  S.z.forEach(function (v) { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
  var stops = [[194, 51, 31], [246, 232, 166], [26, 138, 58]];
  var color = function (v) {
    var t = hi > lo ? (v - lo) / (hi - lo) * 2 : 1, i = Math.min(1, Math.floor(t)), f = t - i;
    var a = stops[i], b = stops[i + 1];
    return "rgb(" + [0, 1, 2].map(function (c) {
      return Math.round(a[c] + (b[c] - a[c]) * f);
    }) + ")";
  };
  var tick = function (vals) {
    return function (u, splits) {
      return splits.map(function (v) {
        var i = Math.round(v);
        return Math.abs(v - i) < 1e-9 && i >= 0 && i < vals.length ? String(vals[i]) : "";
      });
    };
  };
  var exact = function (u, a, b) { return [a, b]; };
  var out = document.getElementById("tf-sweep-value");
  mk("sweep", {height: 380, legend: {show: false},
    scales: {x: {time: false, range: exact}, y: {range: exact}},
    series: [{}, {stroke: "transparent", paths: function () { return null; },
                  points: {show: false}}],
    axes: [{label: S.xn, values: tick(S.xs)}, {label: S.yn, values: tick(S.ys)}],
    hooks: {
      draw: [function (u) {
        var c = u.ctx, b = u.bbox;
        c.save(); c.beginPath(); c.rect(b.left, b.top, b.width, b.height); c.clip();
        for (var j = 0; j < ny; j++) for (var i = 0; i < nx; i++) {
          var v = S.z[j * nx + i];
          if (v === null) continue;
          var x0 = u.valToPos(i - 0.5, "x", true), x1 = u.valToPos(i + 0.5, "x", true);
          var y0 = u.valToPos(j - 0.5, "y", true), y1 = u.valToPos(j + 0.5, "y", true);
          c.fillStyle = color(v);
          c.fillRect(x0, y1, x1 - x0 + 0.5, y0 - y1 + 0.5);
        }
        c.restore();
      }],
      setCursor: [function (u) {
        if (!out) return;
        var i = Math.round(u.posToVal(u.cursor.left, "x"));
        var j = Math.round(u.posToVal(u.cursor.top, "y"));
        var ok = u.cursor.left >= 0 && i >= 0 && i < nx && j >= 0 && j < ny;
        var v = ok ? S.z[j * nx + i] : null;
        out.textContent = ok ? S.xn + "=" + S.xs[i] + ", " + S.yn + "=" + S.ys[j] + ": " + S.label +
          " " + (v === null ? "(no combo)" : v) : "";
      }]}}, [[-0.5, nx - 0.5], [-0.5, ny - 0.5]]);
}
window.addEventListener("resize", function () {
  Object.keys(C).forEach(function (k) {
    var el = document.getElementById("tf-" + k);
    C[k].setSize({width: width(el), height: C[k].height});
  });
});
})();
"""
