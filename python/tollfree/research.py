"""The researcher's side of the sweep: metrics, out-of-sample splits and walk-forward folds.

The folds, winners, ranks and verdict are computed once, by the library (``tf_folds``,
``tf_oos_run``, ``tf_oos_verdict`` in include/tollfree/research.h), the code ``tollfree sweep
--split F`` / ``--walk-forward K`` runs: the same bits. Each part of the series is swept cold (a
strategy deployed at that bar would start with nothing) unless ``warmup=`` feeds it the bars
before the part first; ``anchored=True`` grows every in-sample part from bar 0
(docs/research.md, "Walk-forward")."""
from __future__ import annotations

import ctypes

import numpy as np

from tollfree import _research as _r
from tollfree import binding
from tollfree import grid as _grid
from tollfree.binding import FEE_DEFAULT
from tollfree.data import to_close
from tollfree.stats import grid_note, stats_rows


def metrics() -> tuple[str, ...]:
    """The metrics: every output of the sweep and every derived figure (docs/definition.md
    section 8), as ``tollfree sweep --metric`` takes them: the library's columns less the six
    windows. Higher is better for all ("-name": lower is better)."""
    return tuple(n for k, n in enumerate(_r.column_names())
                 if not _r.column_flags(k) & _r.COLUMN_WINDOW)


def __getattr__(name):  # METRICS, read from the library when first asked for (PEP 562)
    if name == "METRICS":
        return metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


COLUMNS = ["fold", "is_start", "is_end", "oos_start", "oos_end", "L", "half", "sq", "p", "p3",
           "p2", "metric", "is_value", "is_pnl", "is_trades", "oos_value", "oos_pnl",
           "oos_trades", "oos_rank", "combos", "oos_best_value"]


def _check_metric(metric: str) -> tuple[int, int]:
    """(column, sign) of a metric "name" (higher is better) or "-name" (lower is better)."""
    try:
        col, sign = _r.column_find(metric)
    except (ValueError, TypeError):
        col, sign = -1, 1
    if col < 0 or _r.column_flags(col) & _r.COLUMN_WINDOW:
        raise ValueError(f"metric must be one of {', '.join(metrics())} (or -name: lower is "
                         f"better), got {metric!r}")
    return col, sign


def metric_values(metric: str, st: dict) -> np.ndarray:
    """The metric for every combo (float64, higher is better: "-name" negates the column) from a
    :func:`tollfree.sweep_stats` dict (pnl and trades alone suffice for those two), by the
    library's ``tf_column_values``."""
    col, sign = _check_metric(metric)
    pnl = np.ascontiguousarray(st["pnl"], dtype=np.float64)
    trades = np.ascontiguousarray(st["trades"], dtype=np.int64)
    rows = stats_rows(st) if _r.column_flags(col) & _r.COLUMN_STATS else None
    return _r.column_values(_r.results(None, pnl, trades, rows, pnl.shape[0]), col, sign)


def folds(n: int, split: float | None = None, walk_forward: int | None = None,
          anchored: bool = False):
    """The folds as (is_start, is_end, oos_start, oos_end) bar ranges (end exclusive), by the
    library's ``tf_folds``: ``split=F`` one fold, in sample the first floor(n*F) bars;
    ``walk_forward=K`` the bars cut into K+1 equal segments (the last takes the remainder).
    ValueError naming the empty fold when n is too short. ``anchored=True``: every in-sample
    part starts at bar 0."""
    return _r.folds(n, _r.oos_opts(split, walk_forward, anchored=anchored))


def walk_forward(close, params=None, split: float | None = None, walk_forward: int | None = None,
                 metric: str = "pnl", threads: int | None = None, isa: str = "auto",
                 fee: float = FEE_DEFAULT, *, strategy=None, anchored: bool = False, warmup=0,
                 dates=None, min_trades: int = 0):
    """Out-of-sample check of the sweep: a pandas DataFrame with one row per fold.

    ``split=F``: in-sample = the first floor(n*F) bars, out-of-sample = the rest.
    ``walk_forward=K``: the bars cut into K+1 equal segments (the last takes the remainder);
    fold k picks its winner on segment k-1 and tests it on segment k. Each part is swept cold.
    Columns: ``fold, is_start, is_end, oos_start, oos_end`` (bars, end exclusive), the winner's
    six lengths, ``metric``, ``is_value, is_pnl, is_trades`` (in sample), ``oos_value, oos_pnl,
    oos_trades, oos_rank`` (its rank among all ``combos`` out of sample by the metric; 1 = best,
    NaN last) and ``oos_best_value``. ``close``: anything :func:`tollfree.data.to_close` takes;
    ``fee``: percent points per closed trade. Computed by the library's ``tf_oos_run`` (Ctrl-C
    stops a long run). Combos that can never trade on the shortest part, or repeat an earlier
    combo, are said in a ``UserWarning``.

    ``strategy`` (as :func:`tollfree.sweep` takes it): the folds of that strategy
    (``tf_oos_run_with``), ``params`` its (n, k) grid (required); the winner's columns are then
    its parameters, by name, in place of the six lengths.

    ``anchored=True``: every in-sample part starts at bar 0 and grows (fold k: segments
    0..k-1). ``warmup``: 0 (cold, the default), N bars or "all": the bars before each part feed
    the strategy first and trades are booked only inside the part, a position the warm-up holds
    entered at the part's first bar (each combo is then stepped: slower). ``dates``: one time
    per bar (default: the index of a pandas ``close`` that holds times); the table then carries
    ``is_start_date, is_end_date, oos_start_date, oos_end_date`` (each part's first and last
    bar) after ``oos_end``.

    ``min_trades=N``: a combo with fewer than N in-sample trades cannot win its fold; a fold
    with no eligible combo has no winner (its parameters and values NaN, ``oos_rank`` 0) and
    the table ends with a ``winner_note`` column ("ok", or what was missing)."""

    from tollfree import strategies as _st

    from tollfree.trade_list import _dates
    d = _dates(close, dates, len(close))
    close = to_close(close)
    r = _st.resolve(strategy)
    extra = {"anchored": anchored, "warmup": warmup, "min_trades": min_trades}
    if not r.is_hma:
        return _with_dates(_walk_forward_with(r, close, params, split, walk_forward, metric,
                                              threads, isa, fee, **extra), d)
    params = _grid.default_grid() if params is None else binding.as_params(
        np.ascontiguousarray(params, dtype=np.int64))
    _check_metric(metric)
    oos = _r.oos_opts(split, walk_forward, metric, reference=isa == "reference", **extra)
    n, m = close.shape[0], params.shape[0]
    if m < 1:
        raise ValueError("an empty grid (no combos)")
    parts = _r.folds(n, oos)
    shortest = min(min(b - a, c - b) for a, b, _, c in parts)
    grid_note(params, shortest)
    rows = np.zeros(len(parts), dtype=_r.OOS_ROW_DTYPE)
    so, _fee_alive = binding._opts(threads, "auto" if isa == "reference" else isa, fee)
    buf = ctypes.create_string_buffer(1024)
    rc = binding._call(_r.L().tf_oos_run, 2.0 * n * m, None, so, close.ctypes.data, n,
                       params.ctypes.data, m, ctypes.byref(oos), rows.ctypes.data, len(parts),
                       buf, len(buf))
    if rc < 0:
        raise binding.KernelError(rc, f"walk_forward: {buf.value.decode(errors='replace')}")
    return _with_dates(_frame(rows, params, COLUMNS[5:11], int, metric, min_trades), d)


def _with_dates(frame, d):
    """The fold table with each part's first and last date after ``oos_end`` (d: the bars'
    DatetimeIndex, or None: the table as it is)."""
    if d is None:
        return frame
    at = {"is_start_date": frame["is_start"], "is_end_date": frame["is_end"] - 1,
          "oos_start_date": frame["oos_start"], "oos_end_date": frame["oos_end"] - 1}
    for k, (name, bars) in enumerate(at.items()):
        frame.insert(5 + k, name, d[bars.to_numpy()])
    return frame


def _frame(rows, params, names, cast, metric: str, min_trades: int = 0):
    """The fold table from the library's rows: the winner's parameters by name (cast: int for
    HMA's lengths, float for a strategy's parameters)."""
    import pandas as pd

    m = params.shape[0]
    none = [np.nan] * params.shape[1]  # no eligible combo (min_trades): no winner
    out = [[k, int(x["is_start"]), int(x["is_end"]), int(x["oos_start"]), int(x["oos_end"]),
            *((cast(v) for v in params[x["winner"]]) if x["winner"] >= 0 else none), metric,
            float(x["is_value"]), float(x["is_pnl"]), int(x["is_trades"]), float(x["oos_value"]),
            float(x["oos_pnl"]), int(x["oos_trades"]), int(x["oos_rank"]), m,
            float(x["oos_best_value"])]
           for k, x in enumerate(rows, 1)]
    frame = pd.DataFrame(out, columns=COLUMNS[:5] + list(names) + COLUMNS[11:])
    if min_trades > 0:
        frame["winner_note"] = ["ok" if x["winner"] >= 0 else
                                f"no combo with {min_trades} or more in-sample trades"
                                for x in rows]
    return frame


def _walk_forward_with(r, close, params, split, walk_forward, metric, threads, isa, fee,
                       anchored=False, warmup=0, min_trades=0):

    from tollfree import strategies as _st

    if params is None:
        raise ValueError(f"strategy {r.name}: give params, an (n, {r.n_params}) grid of "
                         f"{', '.join(r.param_names)} (tollfree.grid.product)")
    params = r.params(params)
    _check_metric(metric)
    oos = _r.oos_opts(split, walk_forward, metric, reference=isa == "reference",
                      anchored=anchored, warmup=warmup, min_trades=min_trades)
    n, m = close.shape[0], params.shape[0]
    if m < 1:
        raise ValueError("an empty grid (no combos)")
    parts = _r.folds(n, oos)
    rows = np.zeros(len(parts), dtype=_r.OOS_ROW_DTYPE)
    threads = _st.slow_path_note(r, threads) or threads
    so, _fee_alive = binding._opts(threads, "auto" if isa == "reference" else isa, fee)
    buf = ctypes.create_string_buffer(1024)
    args = (r.ptr, close.ctypes.data, n, params.ctypes.data, m, ctypes.byref(oos),
            rows.ctypes.data, len(parts), buf, len(buf))
    if r.kind == "python":
        rc = _r.L().tf_oos_run_with(*args, ctypes.addressof(so))
    else:
        rc = binding._call(_r.L().tf_oos_run_with, 2.0 * n * m, None, so, *args)
    _st.after_run(r)
    if rc < 0:
        raise binding.KernelError(rc, f"walk_forward: {buf.value.decode(errors='replace')}")
    return _frame(rows, params, r.param_names, float, metric, min_trades)


def verdict(frame) -> str:
    """One line on whether the in-sample winners held up out of sample (``tf_oos_verdict``, the
    line ``tollfree sweep`` prints after "out of sample: ")."""
    rows = np.zeros(len(frame), dtype=_r.OOS_ROW_DTYPE)
    rows["oos_rank"] = frame["oos_rank"].to_numpy()
    rows["oos_pnl"] = frame["oos_pnl"].to_numpy()
    if "winner_note" in frame:  # folds without a winner (min_trades) are not judged
        rows["winner"] = np.where(frame["winner_note"].to_numpy() == "ok", 0, -1)
    return _r.verdict(rows, int(frame["combos"].iloc[0]))


def parse_grid(spec: str = "default") -> np.ndarray:
    """``--grid`` as the CLI takes it: ``default``, ``LO:HI:N`` or a CSV file of six integer
    columns ``L,half,sq,p,p3,p2`` (an optional header line)."""
    if spec == "default":
        return _grid.default_grid()
    parts = spec.split(":")
    if len(parts) == 3 and all(p.strip().lstrip("-").isdigit() for p in parts):
        lo, hi, n = (int(p) for p in parts)
        return _grid.grid(lo, hi, n)
    rows = []
    with open(spec) as f:
        for i, line in enumerate(f, 1):
            cells = [c.strip().strip('"') for c in line.strip().split(",")]
            if cells == [""]:
                continue
            if i == 1 and cells and cells[0] == "L":
                continue
            if len(cells) != 6:
                raise ValueError(f"{spec}:{i}: a grid row is six integers L,half,sq,p,p3,p2")
            rows.append([int(c) for c in cells])
    if not rows:
        raise ValueError(f"{spec}: empty grid (no combos)")
    return np.array(rows, dtype=np.int64).reshape(-1, 6)
