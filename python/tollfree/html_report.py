"""The sweep's HTML report: one self-contained file (nothing fetched at view time) with the
run's inputs, the ranked table, pnl against L (or a heatmap of two grid columns), the best
combo's price with its position changes, equity and drawdown from the streaming strategy, the
out-of-sample table when asked, and the boundary benchmark's headline if given.

The charts are interactive by default: uPlot, vendored from npm into the page with its license
(tollfree.report_charts, tollfree.report_vendor); ``static=True`` (``--static``) draws PNG
figures with matplotlib instead (Debian: python3-matplotlib).

``tollfree.report(...)`` in Python; ``tollfree sweep ... --report FILE.html`` runs
``python3 -m tollfree.html_report`` with the same inputs."""
from __future__ import annotations

import argparse
import base64
import html
import io
import sys
import time

import numpy as np

from tollfree import data as _data
from tollfree import grid as _grid
from tollfree import report_charts, research
from tollfree.binding import FEE_DEFAULT, Strategy, isa_best, sweep_stats
from tollfree.stats import derived, time_stats

_CSS = """
body{font:14px/1.45 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1100px;color:#1d232b;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:6px 0}
td,th{padding:3px 9px;border-bottom:1px solid #eef;text-align:right}
th{background:#f4f6fa;font-weight:600}td.l,th.l{text-align:left}
.note{color:#5a6472;font-size:13px}.verdict{font-weight:600;margin:8px 0}
img{max-width:100%;height:auto;display:block;margin:8px 0}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;font-size:12px}
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return ('<img alt="figure" src="data:image/png;base64,'
            + base64.b64encode(buf.getvalue()).decode() + '">')


def _envelope(y: np.ndarray, buckets: int = 1500):
    """(x, y) to draw instead of every bar: each bucket's min and max, so a 150,000-bar line
    looks the same at report width and draws in milliseconds."""
    n = y.shape[0]
    if n <= 4 * buckets:
        return np.arange(n), y
    k = n // buckets
    body = y[: k * buckets].reshape(buckets, k)
    lo, hi = np.nanmin(body, axis=1), np.nanmax(body, axis=1)
    x = np.repeat(np.arange(buckets) * k + k // 2, 2)
    return x, np.column_stack([lo, hi]).reshape(-1)


# The time-aware figures the ranked table shows (per bar without dates).
_TIME_SHOWN = ("cagr", "sharpe", "sortino", "calmar", "mtm_max_dd", "compounded", "buy_hold",
               "mean_bars")


def _table(header, rows, left=()) -> str:
    h = "".join(f'<th class="{"l" if i in left else ""}">{html.escape(str(c))}</th>'
                for i, c in enumerate(header))
    body = "".join("<tr>" + "".join(
        f'<td class="{"l" if i in left else ""}">{html.escape(str(c))}</td>'
        for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _fmt(x, d=4) -> str:
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    return "nan" if x != x else f"{x:,.{d}f}"


def equity(close: np.ndarray, combo, fee: float = FEE_DEFAULT, strategy=None) -> dict:
    """The combo's path bar by bar from the streaming strategy: position, closed-trade equity
    (the pnl booked so far, exactly the kernel's), mark-to-market equity (plus the open trade),
    drawdown of the closed equity, and the bars where the position changed. ``strategy``: as
    :func:`tollfree.sweep` takes it (None: HMA)."""
    s = Strategy(combo, fee=fee, validate=False, strategy=strategy)
    n = close.shape[0]
    pos = np.empty(n, dtype=np.int8)
    closed = np.empty(n, dtype=np.float64)
    step = s.on_bar
    last, booked = 0, 0.0
    flips = []
    try:
        for i, c in enumerate(close.tolist()):
            p = step(c)
            if p != last:
                booked = s.pnl
                flips.append(i)
                last = p
            pos[i] = p
            closed[i] = booked
        final = (s.pnl, s.trades)
    finally:
        s.close()
    flips = np.array(flips, dtype=np.int64)
    entry = np.full(n, np.nan)
    if flips.size:
        e = np.zeros(n, dtype=np.int64)
        e[flips] = flips
        np.maximum.accumulate(e, out=e)
        started = np.arange(n) >= flips[0]
        entry[started] = close[e[started]]
    open_r = np.where(pos != 0, pos * (close - entry) / entry * 100.0, 0.0)
    mtm = closed + np.nan_to_num(open_r)
    dd = np.maximum.accumulate(np.maximum(closed, 0.0)) - closed
    return {"pos": pos, "closed": closed, "mtm": mtm, "drawdown": dd, "flips": flips,
            "pnl": final[0], "trades": final[1]}


def report(close=None, params=None, path: str = "report.html", *, dates=None,
           source: str | None = None, notes=(), grid_spec: str | None = None,
           split: float | None = None, walk_forward: int | None = None, metric: str = "pnl",
           heatmap: str | None = None, top: int = 20, headline: str | None = None,
           threads: int | None = None, title: str = "tollfree sweep report",
           fee: float = FEE_DEFAULT, column: str = "close", strategy=None,
           static: bool = False, times=None, anchored: bool = False, warmup=0,
           min_trades: int = 0) -> str:
    """Sweeps ``params`` (default grid) on ``close`` (default data; anything
    :func:`tollfree.data.to_close` takes) and writes the report to ``path``; returns ``path``.

    ``source``: what the inputs table calls the data (default: the embedded default data when
    ``close`` is None, else the kind of series given, e.g. "a pandas Series 'Close'").

    ``dates``: one label per bar (the file's date column), for the axes and the inputs table.
    ``split`` / ``walk_forward`` / ``metric`` / ``anchored`` / ``warmup``: the out-of-sample
    table (:func:`tollfree.research.walk_forward`). ``min_trades``: combos with fewer trades are
    left out of the ranked table and cannot win a fold.
    ``heatmap="X,Y"``: pnl over two grid columns (others maximised over) instead of pnl
    against L. ``headline``: text (e.g. :func:`tollfree.bench.headline`) shown verbatim.
    ``fee``: percent points per closed trade. ``column``: the close column of a DataFrame.
    ``strategy`` (as :func:`tollfree.sweep` takes it): the report of that strategy's sweep,
    ``params`` its (n, k) grid (required; :func:`tollfree.grid.product`); ``heatmap`` then names
    two of its parameters (default: its first two; one parameter: pnl against it).

    ``static``: PNG figures (matplotlib) instead of the interactive charts (uPlot, vendored at
    build time: report_vendor.VendorMissing when it is absent and cannot be fetched).
    ``times``: each bar's time (datetime64) for the date axes; by default ``dates`` parsed, or a
    pandas ``close``'s DatetimeIndex; bar numbers when there is none."""
    from tollfree.strategies import resolve

    plt = None
    if static:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    else:
        report_charts.report_vendor.uplot_dir()  # refused before the sweep when it is missing

    t0 = time.perf_counter()
    if times is None and dates is None and hasattr(getattr(close, "index", None), "tz_localize"):
        times = report_charts.naive_utc(close.index)  # a pandas DatetimeIndex
    if source is None:
        source = ("the embedded default data (150,000 bars)" if close is None else
                  f"{_describe(close, column)} given to tollfree.report()")
    close = _data.default_close() if close is None else _data.to_close(close, column=column)
    r_st = resolve(strategy)
    if r_st.is_hma:
        params = (_grid.default_grid() if params is None
                  else np.ascontiguousarray(params, dtype=np.int64))
        pnames, what = _grid.PARAM_NAMES, "HMA/HMA3 stop-and-reverse sweep"
    else:
        if params is None:
            raise ValueError(f"strategy {r_st.name}: give params, an (n, {r_st.n_params}) grid "
                             f"of {', '.join(r_st.param_names)} (tollfree.grid.product)")
        params = r_st.params(params)
        pnames, what = r_st.param_names, f"{r_st.name} ({r_st.kind}) strategy sweep"
        if heatmap is None and len(pnames) >= 2:
            heatmap = f"{pnames[0]},{pnames[1]}"
    n, m = close.shape[0], params.shape[0]
    if dates is not None and len(dates) != n:
        raise ValueError(f"dates has {len(dates)} labels for {n} bars")
    st = sweep_stats(close, params, threads=threads, fee=fee, strategy=r_st)
    pnl, trades = st["pnl"], st["trades"]
    d = derived(st)
    avg, sharpe = d["avg_trade"], d["sharpe_per_trade"]
    order = np.argsort(-np.nan_to_num(pnl, nan=-np.inf), kind="stable")
    if min_trades > 0:  # --min-trades: combos with fewer trades are not ranked
        order = order[trades[order] >= min_trades]
    best = int(order[0])

    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="note">{html.escape(what)}, computed exactly by libtollfree '
             "(docs/definition.md). pnl is in percent points: the sum over closed trades of the "
             f"trade's percent move minus a {fee} fee per round trip; the position open at the "
             "end is not counted.</p>"]
    span = f"{dates[0]} .. {dates[-1]}" if dates is not None else "bar 0 .. " + f"{n - 1:,}"
    inputs = [("input", source),
              ("bars", f"{n:,} ({span})"), ("price range", f"{close.min():.6g} .. {close.max():.6g}"),
              ("grid", f"{grid_spec or 'given'}: {m:,} combos, {pnames[0]} = "
                       f"{_pv(params[:, 0].min())} .. {_pv(params[:, 0].max())}"),
              ("kernel", f"{isa_best()}, fee {fee} percent points per round trip")]
    inputs += [("note", s) for s in notes]
    parts += ["<h2>Inputs</h2>", _table(["what", "value"], inputs, left=(0, 1))]

    k = min(top, len(order))
    head = ["rank", *pnames, "pnl", "trades", "avg_trade", "win_rate",
            "profit_factor", "sharpe_per_trade", "max_dd", *_TIME_SHOWN]
    # the time-aware figures (docs/definition.md section 10) of the shown rows only
    tt = time_stats(close, params[order[:k]], strategy=None if r_st.is_hma else strategy,
                    times=times, fee=fee, threads=threads)
    rows = []
    for r, j in enumerate(order[:k], 1):
        rows.append([r, *(_pv(v) for v in params[j]), _fmt(pnl[j]), _fmt(int(trades[j])),
                     _fmt(avg[j]), _fmt(d["win_rate"][j]), _fmt(d["profit_factor"][j]),
                     _fmt(sharpe[j]), _fmt(st["max_dd"][j]),
                     *(_fmt(tt[c][r - 1]) for c in _TIME_SHOWN)])
    elig = "" if min_trades <= 0 else f", {len(order):,} with at least {min_trades} trades"
    parts += [f"<h2>Ranked by pnl (top {k} of {m:,}{elig})</h2>", _table(head, rows)]

    charts = {}
    if heatmap and not static:
        xi, yi = _heat_axes(heatmap, pnames)
        hm = charts["sweep"] = report_charts.heat_data(params, pnl, xi, yi, pnames)
        z = [v for v in hm["z"] if v is not None] or [float("nan")]
        parts += [f"<h2>Heatmap: pnl over {html.escape(heatmap)}</h2>",
                  report_charts.div("sweep"), '<div class="tfv" id="tf-sweep-value"></div>',
                  '<p class="note">pnl, the best over the other parameters: red lowest '
                  f"({_fmt(min(z))}), green highest ({_fmt(max(z))}); the cell under the cursor "
                  "above; drag to zoom, double-click to reset.</p>"]
    elif heatmap:
        parts += [f"<h2>Heatmap: pnl over {html.escape(heatmap)}</h2>",
                  _png(_heatmap_fig(plt, params, pnl, heatmap, pnames))]
    elif not static:
        charts["sweep"] = report_charts.line_data(params[:, 0], pnl, sharpe, pnames[0])
        parts += [f"<h2>pnl and sharpe per trade against {pnames[0]}</h2>",
                  report_charts.div("sweep")]
    else:
        fig, ax = plt.subplots(figsize=(10, 3.6))
        L = params[:, 0]
        ax.plot(L, pnl, "o-", ms=3, color="#1f5fbf", label="pnl")
        ax.set_xlabel("L (Hull length)" if r_st.is_hma else pnames[0])
        ax.set_ylabel("pnl, percent points")
        ax.axhline(0, color="#999", lw=0.8)
        ax2 = ax.twinx()
        ax2.plot(L, sharpe, "s-", ms=2, color="#d9730d", label="sharpe per trade")
        ax2.set_ylabel("sharpe per trade")
        fig.legend(loc="upper right")
        ax.grid(alpha=0.3)
        parts += [f"<h2>pnl and sharpe per trade against {pnames[0]}</h2>", _png(fig)]

    eq = equity(close, params[best], fee, r_st)
    same = (np.float64(eq["pnl"]).view(np.int64) == pnl[best:best + 1].view(np.int64)[0]
            and eq["trades"] == trades[best])
    combo = ", ".join(f"{nm}={_pv(v)}" for nm, v in zip(pnames, params[best]))
    parts += [f"<h2>Best combo: {combo}</h2>",
              f'<p class="note">pnl {_fmt(pnl[best])} over {int(trades[best]):,} trades; max '
              f"closed-trade drawdown {_fmt(eq['drawdown'].max())} percent points. The curve is "
              "the streaming strategy fed bar by bar; it ends at the sweep's pnl and trade count "
              f"{'bit for bit' if same else '(MISMATCH: please report)'}.</p>"]
    if static:
        parts.append(_png(_bars_fig(plt, close, eq, dates)))
    else:
        secs = report_charts.epoch_seconds(dates, times)
        if secs is not None and secs.shape[0] != n:
            raise ValueError(f"times has {secs.shape[0]} values for {n} bars")
        b = charts["bars"] = report_charts.bars_data(close, eq, secs)
        shown = (f"{b['shown']:,} of the {n:,} bars are drawn (each stretch's lowest and highest "
                 "of every line, and every position change); " if b["shown"] < n else "")
        if not b["marks"]:
            shown += f"the {b['changes']:,} position changes are too many to mark; "
        parts += [report_charts.div("price"), report_charts.div("equity"),
                  report_charts.div("drawdown", shown + "drag across a chart to zoom (the three "
                                    "follow each other), double-click to reset; the values under "
                                    "the cursor are in each legend."
                                    + ("" if secs is not None else " No dates: bar numbers."))]
    if split is not None or walk_forward is not None:
        wf = research.walk_forward(close, params, split=split, walk_forward=walk_forward,
                                   metric=metric, threads=threads, fee=fee, strategy=r_st,
                                   anchored=anchored, warmup=warmup, min_trades=min_trades)
        lab = (lambda i: str(dates[min(i, n - 1)])) if dates is not None else (lambda i: f"{i:,}")
        # With the metric pnl, "oos pnl" is the metric's column already: shown once.
        extra_pnl = metric != "pnl"
        rows = [[int(r.fold), f"{lab(r.is_start)} .. {lab(r.is_end - 1)}",
                 f"{lab(r.oos_start)} .. {lab(r.oos_end - 1)}",
                 ",".join(_pv(wf[c].iloc[r.Index]) for c in pnames), _fmt(r.is_value),
                 _fmt(r.oos_value)] + ([_fmt(r.oos_pnl)] if extra_pnl else [])
                + [_fmt(int(r.oos_trades)), f"{int(r.oos_rank)} of {int(r.combos)}",
                   _fmt(r.oos_best_value)]
                for r in wf.itertuples()]
        what = (f"split at {split}" if split is not None else f"walk-forward, {walk_forward} folds")
        parts += [f"<h2>Out of sample ({what}, winner by {metric})</h2>",
                  f'<p class="verdict">{html.escape(research.verdict(wf))}</p>',
                  _table(["fold", "in sample", "out of sample", "winner", f"is {metric}",
                          f"oos {metric}"] + (["oos pnl"] if extra_pnl else [])
                         + ["oos trades", "oos rank", f"best oos {metric}"], rows,
                         left=(1, 2, 3))]
    if headline:
        parts += ["<h2>Boundary benchmark headline</h2>", f"<pre>{html.escape(headline)}</pre>"]
    parts.append(f'<p class="note">written by tollfree in {time.perf_counter() - t0:.2f} s</p>')
    style, tail = report_charts.scripts(charts) if not static else ("", "")
    doc = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(title)}</title><style>{_CSS}{style}</style></head><body>"
           + "\n".join(parts) + tail + "</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    return path


def _describe(x, column: str) -> str:
    """What kind of close series the caller handed over, for the inputs table."""
    if hasattr(x, "columns") and hasattr(x, "iloc"):
        return f"a pandas DataFrame's column '{column}'"
    if hasattr(x, "to_numpy"):
        name = getattr(x, "name", None)
        return "a pandas Series" + (f" '{name}'" if name is not None else "")
    if isinstance(x, np.ndarray):
        return f"a numpy array ({x.dtype})"
    return f"a {type(x).__name__} of numbers"


def _pv(v) -> str:
    """A parameter value as the tables show it: a whole number without a point."""
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else f"{v:g}"


def _bars_fig(plt, close, eq, dates):
    """The static figure: price with the position changes, equity, drawdown (PNG path)."""
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(10, 7.5), sharex=True,
                                     gridspec_kw={"height_ratios": [2, 2, 1]})
    a1.plot(*_envelope(close), lw=0.6, color="#333")
    fl = eq["flips"]
    longs, shorts = fl[eq["pos"][fl] > 0], fl[eq["pos"][fl] < 0]
    if fl.size <= 4000:
        a1.scatter(longs, close[longs], marker="^", s=10, color="#1a8a3a", label="go long")
        a1.scatter(shorts, close[shorts], marker="v", s=10, color="#c2331f", label="go short")
        a1.legend(loc="upper left", fontsize=8)
    a1.set_ylabel("close")
    a2.plot(*_envelope(eq["mtm"]), lw=0.6, color="#9bb5dd", label="marked to market")
    a2.plot(*_envelope(eq["closed"]), lw=1.0, color="#1f5fbf", label="closed trades")
    a2.set_ylabel("equity, pct points")
    a2.legend(loc="upper left", fontsize=8)
    dx, dy = _envelope(-eq["drawdown"])
    a3.fill_between(dx, dy, 0, color="#c2331f", alpha=0.5, lw=0)
    a3.set_ylabel("drawdown")
    a3.set_xlabel("bar" if dates is None else f"bar ({dates[0]} .. {dates[-1]})")
    for a in (a1, a2, a3):
        a.grid(alpha=0.3)
    return fig


def _heat_axes(spec, names):
    """The two parameters ``spec`` ("X,Y") names, as column indices; ValueError naming them."""
    names = list(names)
    try:
        xn, yn = (s.strip() for s in spec.split(","))
        return names.index(xn), names.index(yn)
    except ValueError:
        raise ValueError(f"heatmap wants two of {','.join(names)} as X,Y, got {spec!r}") from None


def _heatmap_fig(plt, params, pnl, spec, names=_grid.PARAM_NAMES):
    names = list(names)
    xi, yi = _heat_axes(spec, names)
    xn, yn = names[xi], names[yi]
    xs, ys = np.unique(params[:, xi]), np.unique(params[:, yi])
    z = np.full((ys.size, xs.size), np.nan)
    cx, cy = np.searchsorted(xs, params[:, xi]), np.searchsorted(ys, params[:, yi])
    for a, b, v in zip(cy, cx, pnl):
        if not (z[a, b] >= v):  # the best over the other columns (NaN cells stay empty)
            z[a, b] = v if v == v else z[a, b]
    fig, ax = plt.subplots(figsize=(10, 5))
    im = ax.imshow(z, origin="lower", aspect="auto", cmap="RdYlGn",
                   extent=(-0.5, xs.size - 0.5, -0.5, ys.size - 0.5))
    step_x, step_y = max(1, xs.size // 12), max(1, ys.size // 12)
    ax.set_xticks(range(0, xs.size, step_x), [_pv(v) for v in xs[::step_x]])
    ax.set_yticks(range(0, ys.size, step_y), [_pv(v) for v in ys[::step_y]])
    ax.set_xlabel(xn)
    ax.set_ylabel(yn)
    fig.colorbar(im, ax=ax, label="pnl (max over the other columns)")
    return fig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tollfree.html_report",
                                 description="Write the sweep's HTML report (what "
                                             "`tollfree sweep --report` runs).")
    ap.add_argument("--out", required=True)
    ap.add_argument("--input")
    ap.add_argument("--column", default="close")
    ap.add_argument("--date-column")
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--skip-bad-rows", action="store_true")
    ap.add_argument("--sep")
    ap.add_argument("--assume-sorted", action="store_true")
    ap.add_argument("--grid", default="default")
    ap.add_argument("--strategy", help="a built-in name or a plugin .so (default: hma)")
    ap.add_argument("--where", help="with --strategy: conditions on the grid (fast<slow)")
    ap.add_argument("--split", type=float)
    ap.add_argument("--walk-forward", type=int)
    ap.add_argument("--metric", default="pnl")
    ap.add_argument("--heatmap")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--fee", type=float, default=FEE_DEFAULT)
    ap.add_argument("--headline", help="a file whose text is shown as the benchmark headline")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--anchored", action="store_true")
    ap.add_argument("--warmup", default="0", help="bars of warm-up before each part, or 'all'")
    ap.add_argument("--min-trades", type=int, default=0)
    ap.add_argument("--static", action="store_true",
                    help="PNG figures (matplotlib) instead of the interactive charts")
    a = ap.parse_args(argv)
    try:
        dates, times, notes, source = None, None, [], None
        if a.input:
            pr = _data.read_prices(a.input, a.column, date_column=a.date_column, raw=a.raw,
                                   skip_bad_rows=a.skip_bad_rows, sep=a.sep,
                                   assume_sorted=a.assume_sorted, warn=lambda s: None)
            close, dates, times, notes = pr.close, pr.dates, pr.times, pr.notes
            source = a.input if not a.raw or not a.input.startswith("/tmp/tollfree-stdin-") \
                else "stdin"
            source += f" (column '{pr.column}')" if not a.raw else ""
        else:
            close = _data.default_close()
        strategy = a.strategy if a.strategy and a.strategy != "hma" else None
        if strategy is None:
            params = research.parse_grid(a.grid)
        else:
            params = _grid.named(strategy, a.grid, a.where)
        headline = open(a.headline).read() if a.headline else None
        t = time.perf_counter()
        report(close, params, a.out, dates=dates, source=source, notes=notes, grid_spec=a.grid,
               split=a.split, walk_forward=a.walk_forward, metric=a.metric, heatmap=a.heatmap,
               top=a.top, headline=headline, threads=a.threads or None, fee=a.fee,
               strategy=strategy, static=a.static, times=times, anchored=a.anchored,
               warmup=a.warmup if a.warmup == "all" else int(a.warmup),
               min_trades=a.min_trades)
    except (ValueError, OSError, report_charts.report_vendor.VendorMissing) as e:
        print(f"tollfree sweep: --report: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        import os
        print(f"report: {a.out} ({os.path.getsize(a.out) / 1e6:.2f} MB, "
              f"{time.perf_counter() - t:.2f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
