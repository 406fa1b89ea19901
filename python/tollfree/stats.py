"""The sweep's statistics as a researcher reads them: derived figures and a ranked table.

The kernel books, per combo and in the same loop as pnl, the outputs of docs/definition.md
section 8 (:func:`tollfree.sweep_stats`). The figures below are derived from them where they are
shown, never inside the loop, by the library (``tf_stats_derive``, include/tollfree/research.h),
the same code ``tollfree sweep --columns`` runs, so the same bits:

- ``win_rate = wins / trades``; NaN without trades;
- ``profit_factor = gross_win / -gross_loss``; inf when there are gains and no loss, NaN with
  neither;
- ``std = sqrt(m2 / (trades - 1))`` (the sample deviation of the trade returns), NaN under two
  trades; ``sharpe_per_trade = mean / std``, NaN where std is NaN or 0;
- ``avg_trade = pnl / trades``; NaN without trades.

Ranking (``sort=``, ``top=``) is the library's too (``tf_rank``): highest first, NaN last, ties
in grid order, as ``tollfree sweep --sort/--top`` ranks.
"""
from __future__ import annotations

import ctypes
import warnings

import numpy as np

from tollfree import _research as _r
from tollfree import grid as _grid
from tollfree.binding import FEE_DEFAULT, STAT_NAMES, STATS_DTYPE, sweep_stats

DERIVED = _r.DERIVED


def stats_rows(st) -> np.ndarray:
    """``st`` (a :func:`tollfree.sweep_stats` dict, or an array of ``binding.STATS_DTYPE``) as
    a contiguous ``STATS_DTYPE`` array, the rows the library reads. Fields a dict lacks read 0."""
    if isinstance(st, np.ndarray) and st.dtype == STATS_DTYPE:
        return np.ascontiguousarray(st)
    present = [n for n in STAT_NAMES if n in st]
    if not present:
        raise ValueError(f"statistics need the fields of {', '.join(STAT_NAMES)}")
    arrays = {n: np.asarray(st[n]) for n in present}
    m = arrays[present[0]].shape[0]
    rows = np.zeros(m, dtype=STATS_DTYPE)
    for n, a in arrays.items():
        if a.shape != (m,):
            raise ValueError(f"statistic {n!r} has shape {a.shape}, the others ({m},)")
        rows[n] = a
    return rows


def derived(st) -> dict:
    """The derived figures (float64 arrays) from a :func:`tollfree.sweep_stats` dict (or a
    ``binding.STATS_DTYPE`` array), computed by the library's ``tf_stats_derive``."""
    rows = stats_rows(st)
    out = np.empty(rows.shape[0], dtype=_r.DERIVED_DTYPE)
    rc = _r.L().tf_stats_derive(rows.ctypes.data, rows.shape[0], out.ctypes.data)
    if rc:
        raise ValueError(f"derived: error {rc}")
    return {n: np.ascontiguousarray(out[n]) for n in DERIVED}


def grid_note(params: np.ndarray, n_bars: int, stacklevel: int = 3) -> str | None:
    """Warns (``warnings.warn``, a UserWarning) when combos of ``params`` can never trade on
    ``n_bars`` bars (their windows' warm-up is the whole series) or repeat an earlier combo: the
    library's ``tf_grid_check``, the note ``tollfree sweep`` prints. Returns the note or None."""
    note = _r.grid_check(params, n_bars)
    if note:
        warnings.warn(f"tollfree: note: {note}", UserWarning, stacklevel=stacklevel)
    return note


def _order(sort: str | None, top, names=None) -> tuple[int | None, int]:
    """(column, sign) that ranks the rows (None: grid order), sort and top checked; ``names``:
    a strategy's parameter names (its table), None: HMA's."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, (int, np.integer))
                            or top < 1):
        raise ValueError(f"top must be a positive integer, got {top!r}")
    if sort is None and top is None:
        return None, 1
    spec = "pnl" if sort is None else sort
    try:
        if names is None:
            return _r.column_find(spec)
        return _r.table_find(_r.results(m=0, names=names), spec)
    except (ValueError, TypeError):
        cols = (_r.column_names() if names is None
                else _r.table_names(_r.results(m=0, names=names)))
        raise ValueError(f"sort must be one of {', '.join(cols)} (or -name), "
                         f"got {sort!r}") from None


def rank(params: np.ndarray, st: dict, sort: str | None = None,
         top: int | None = None, names=None, time=None) -> np.ndarray:
    """Row numbers of the combos to show, as ``tollfree sweep --sort/--top`` chooses them: grid
    order without ``sort`` and ``top``; else ranked by ``sort`` (a column name, highest first, or
    ``-name``, lowest first; ``pnl`` when only ``top`` is given), NaN last, ties in grid order,
    then at most ``top``. ``names``: the parameter names of a strategy's float64 ``params``
    (None: HMA's int64 grid). ``time``: every combo's time-aware figures (a dict of
    ``TIME_FIGURES`` arrays, or a ``TIME_DTYPE`` array), needed to rank by one of them."""
    m = params.shape[0]
    col, sign = _order(sort, top, names)
    if col is None:
        return np.arange(m)
    pnl = np.ascontiguousarray(st["pnl"], dtype=np.float64)
    trades = np.ascontiguousarray(st["trades"], dtype=np.int64)
    flags = (_r.column_flags(col) if names is None
             else _r.table_flags(_r.results(m=0, names=names), col))
    trow = None
    if flags & _r.COLUMN_TIME:
        if time is None:
            raise ValueError(f"sort {sort!r}: a time-aware figure; ask for time_stats=True")
        trow = _time_rows(time, m)
    rows = stats_rows(st) if flags & _r.COLUMN_STATS else None
    if names is None:
        res = _r.results(params, pnl, trades, rows, m, time=trow)
    else:
        p = np.ascontiguousarray(params, dtype=np.float64)
        res = _r.results(p, pnl, trades, rows, m, names=names, time=trow)
    order = _r.rank(_r.column_values(res, col, sign))
    return order if top is None else order[:int(top)]


def sweep_frame(close, params=None, threads: int | None = None, isa: str = "auto",
                fee: float = FEE_DEFAULT, progress=None, sort: str | None = None,
                top: int | None = None, *, strategy=None, min_trades: int = 0,
                time_stats: bool = False, times=None, periods_per_year=None):
    """The sweep as a pandas DataFrame: one row per combo with the six windows, every output of
    :func:`tollfree.sweep_stats` and the derived figures (module docstring). ``params``
    defaults to the 80-combo default grid; ``close`` may be anything
    :func:`tollfree.data.to_close` takes.

    Row order is ``tollfree sweep``'s: grid order by default; ``sort`` ranks by any column,
    highest first (``"-name"``: lowest first), NaN last, ties in grid order; ``top=K`` keeps the
    first K rows **ranked by pnl** when ``sort`` is not given (as ``--top``). The index keeps
    each row's position in the grid. Combos that can never trade on the series, or repeat an
    earlier combo, are said in a ``UserWarning``.

    ``strategy`` (as :func:`tollfree.sweep` takes it): the sweep of that strategy, ``params``
    its (n, k) grid (required; :func:`tollfree.grid.product`); the first columns are then its
    parameters, by name, and ``sort`` may name one of them.

    ``min_trades=N``: combos with fewer than N trades are left out (not eligible for the
    ranking). ``time_stats=True`` (or ``periods_per_year=``, or a ``sort`` by one of them):
    the time-aware figures of :func:`time_stats` appended as columns, booked by the sweep itself
    (:func:`sweep_time`: one pass, every combo, any strategy, the same bits; with
    ``isa="reference"`` a second pass over the rows returned, or every row when ``sort`` names
    one);
    ``times``: each bar's time (default: the index of a pandas ``close`` when it holds
    times)."""
    import pandas as pd

    from tollfree.data import to_close
    from tollfree.strategies import resolve

    time_sort = sort is not None and sort.lstrip("-") in TIME_FIGURES
    want_time = time_stats or periods_per_year is not None or time_sort
    if times is None and want_time:
        times = _index_times(close)
    close = to_close(close)
    r = resolve(strategy)
    if r.is_hma:
        names, pnames = None, _grid.PARAM_NAMES
        if params is None:
            params = _grid.default_grid()
        elif strategy is not None:
            from tollfree.binding import hma_params
            params = hma_params(np.ascontiguousarray(params))
        params = np.ascontiguousarray(params)
    else:
        if params is None:
            raise ValueError(f"strategy {r.name}: give params, an (n, {r.n_params}) grid of "
                             f"{', '.join(r.param_names)} (tollfree.grid.product)")
        names = pnames = r.param_names
        params = r.params(params)
    _order(sort, top, names)  # a bad sort or top is refused before the sweep, not after
    ts = None  # every combo's time-aware figures, when computed before the ranking
    if want_time and isa != "reference":
        st, ts = sweep_time(close, params, threads=threads, isa=isa, fee=fee, times=times,
                            periods_per_year=periods_per_year,
                            strategy=None if r.is_hma else strategy)
    else:
        st = sweep_stats(close, params, threads=threads, isa=isa, fee=fee, progress=progress,
                         strategy=r)
        if time_sort:
            ts = time_stats_fn(close, params, strategy=None if r.is_hma else strategy,
                               times=times, periods_per_year=periods_per_year, fee=fee,
                               threads=threads)
    order = rank(params, st, sort, top, names, time=ts)
    if names is None:
        grid_note(params, close.shape[0])
    cols = {n: params[:, k] for k, n in enumerate(pnames)}
    cols.update({n: st[n] for n in STAT_NAMES})
    cols.update(derived(st))
    frame = pd.DataFrame(cols)
    if min_trades:
        if isinstance(min_trades, bool) or not isinstance(min_trades, (int, np.integer)) \
                or min_trades < 0:
            raise ValueError(f"min_trades wants a number of trades N >= 0, got {min_trades!r}")
        if sort is None and top is None:
            order = np.arange(len(frame))
        else:
            order = rank(params, st, sort, None, names, time=ts)
        order = order[st["trades"][order] >= min_trades]
        if top is not None:
            order = order[:int(top)]
    elif sort is None and top is None:
        order = None
    if ts is not None:
        for k in TIME_FIGURES:
            frame[k] = ts[k]
    if order is not None:
        frame = frame.iloc[order]
    if want_time and ts is None:
        ts = time_stats_fn(close, params[frame.index.to_numpy()],
                           strategy=None if r.is_hma else strategy, times=times,
                           periods_per_year=periods_per_year, fee=fee, threads=threads)
        for k in TIME_FIGURES:
            frame[k] = ts[k]
    return frame


def _index_times(close):
    """The times of a pandas ``close``'s DatetimeIndex as int64 ns, or None."""
    idx = getattr(close, "index", None)
    if idx is not None and np.issubdtype(getattr(idx, "dtype", np.dtype(object)), np.datetime64):
        return np.asarray(idx.values, dtype="datetime64[ns]").view(np.int64)
    return None


# ---- time-aware figures (docs/definition.md section 10; tf_time_stats in research.h) ----

TIME_FIGURES = ("equity", "cagr", "ann_vol", "sharpe", "sortino", "calmar", "mtm_max_dd",
                "exposure_pct", "buy_hold", "compounded", "mean_bars", "max_bars", "mean_days",
                "max_days", "periods_per_year")
TIME_DTYPE = np.dtype([(n, np.float64) for n in TIME_FIGURES])  # tf_time_stats


class _TimeOpts(ctypes.Structure):  # tf_time_opts
    _fields_ = [("size", ctypes.c_size_t), ("times", ctypes.c_void_p),
                ("periods_per_year", ctypes.c_double), ("fee", ctypes.c_void_p),
                ("threads", ctypes.c_int)]


def _time_times(times, n: int):
    """times (None, datetime64 values, or int64 ns since 1970) as a contiguous int64 array."""
    if times is None:
        return None
    t = np.asarray(times)
    if np.issubdtype(t.dtype, np.datetime64):
        t = t.astype("datetime64[ns]").view(np.int64)
    t = np.ascontiguousarray(t, dtype=np.int64)
    if t.shape != (n,):
        raise ValueError(f"times: {t.shape[0] if t.ndim == 1 else t.shape} values for {n} bars")
    return t


def _time_call(fn, close, n, times, periods_per_year, fee, threads, out, *args):
    if fee is not None:
        msg = _r.fee_check(fee)
        if msg:
            raise ValueError(msg)
    feebuf = ctypes.c_double(FEE_DEFAULT if fee is None else fee)
    o = _TimeOpts(ctypes.sizeof(_TimeOpts), 0 if times is None else times.ctypes.data,
                  0.0 if periods_per_year is None else float(periods_per_year),
                  ctypes.addressof(feebuf), int(threads or 0))
    buf = ctypes.create_string_buffer(1024)
    rc = fn(*args, ctypes.byref(o), out.ctypes.data, buf, 1024)
    if rc:
        raise ValueError(buf.value.decode(errors="replace") or f"time_stats: error {rc}")


def _time_lib():
    lb = _r.L()
    if not getattr(lb, "_tf_time_declared", False):
        p, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        lb.tf_time_stats_positions.argtypes = [p, i64, p, p, p, ctypes.c_char_p, sz]
        lb.tf_time_stats_hma.argtypes = [p, i64, p, i64, p, p, ctypes.c_char_p, sz]
        lb.tf_time_stats_with.argtypes = [p, p, i64, p, i64, p, p, ctypes.c_char_p, sz]
        lb.tf_sweep_time.argtypes = [p, i64, p, i64, p, p, p, p, p, ctypes.c_char_p, sz]
        lb.tf_sweep_with_time.argtypes = [p, p, i64, p, i64, p, p, p, p, p, ctypes.c_char_p, sz]
        lb._tf_time_declared = True
    return lb


def _time_rows(time, m: int) -> np.ndarray:
    """time (a dict of TIME_FIGURES arrays, or a TIME_DTYPE array) as a contiguous TIME_DTYPE
    array [m] (tf_time_stats rows)."""
    if isinstance(time, np.ndarray) and time.dtype == TIME_DTYPE:
        out = np.ascontiguousarray(time)
    else:
        out = np.empty(m, dtype=TIME_DTYPE)
        for k in TIME_FIGURES:
            out[k] = time[k]
    if out.shape != (m,):
        raise ValueError(f"time-aware figures of {out.shape[0]} combos for {m}")
    return out


def sweep_time(close, params, *, threads: int | None = None, isa: str = "auto",
               fee: float = FEE_DEFAULT, times=None, periods_per_year=None,
               validate: bool = True, strategy=None) -> tuple[dict, dict]:
    """A sweep and its time-aware figures in one pass: ``(stats, figures)``, the dicts of
    :func:`tollfree.sweep_stats` and :func:`time_stats` for every combo of ``params`` (HMA's
    int64 (m, 6) by default: ``tf_sweep_time``; ``strategy``'s (m, k) grid:
    ``tf_sweep_with_time``), the same bits as each of them on every ``isa`` and thread count
    (``isa="reference"`` is not a path of this call)."""
    from tollfree import strategies as _st
    from tollfree.binding import KernelError, _opts, _Progress, as_params, hma_params
    from tollfree.data import to_close

    close = np.ascontiguousarray(to_close(close, validate=validate), dtype=np.float64)
    n = close.shape[0]
    t = _time_times(times, n)
    r = _st.resolve(strategy)
    if r.is_hma:
        params = as_params(params) if strategy is None else hma_params(params)
    else:
        params = np.ascontiguousarray(r.params(params), dtype=np.float64)
        threads = _st.slow_path_note(r, threads) or threads
    m = params.shape[0]
    pnl = np.empty(m, dtype=np.float64)
    trades = np.empty(m, dtype=np.int64)
    rows = np.empty(m, dtype=STATS_DTYPE)
    out = np.empty(m, dtype=TIME_DTYPE)
    opts, _fee_alive = _opts(threads, isa, fee, rows)
    topts = _TimeOpts(ctypes.sizeof(_TimeOpts), 0 if t is None else t.ctypes.data,
                      0.0 if periods_per_year is None else float(periods_per_year), None, 0)
    buf = ctypes.create_string_buffer(1024)
    args = (close.ctypes.data, n, params.ctypes.data, m, pnl.ctypes.data, trades.ctypes.data,
            ctypes.addressof(opts), ctypes.addressof(topts), out.ctypes.data, buf, 1024)
    if r.is_hma:
        rc = _time_lib().tf_sweep_time(*args)
    else:
        pg = None
        if r.kind == "python":  # callbacks into this interpreter: a raising one cancels
            pg = _Progress()
            opts.progress = ctypes.pointer(pg)
            r.spec.progress = ctypes.byref(pg)
        try:
            rc = _time_lib().tf_sweep_with_time(r.ptr, *args)
        finally:
            if pg is not None:
                r.spec.progress = None
        _st.after_run(r)
        if rc == _st.E_STRATEGY:
            raise KernelError(rc, "sweep", r.refusal(params))
    if rc:
        raise ValueError(buf.value.decode(errors="replace") or f"sweep_time: error {rc}")
    st = {k: np.ascontiguousarray(rows[k]) for k in STAT_NAMES}
    return st, {k: np.ascontiguousarray(out[k]) for k in TIME_FIGURES}


def time_stats(close, params=None, *, strategy=None, times=None, periods_per_year=None,
               fee: float = FEE_DEFAULT, threads: int | None = None, positions=None,
               validate: bool = True, isa: str = "auto") -> dict:
    """The time-aware figures of docs/definition.md section 10 (one float64 array per name of
    ``TIME_FIGURES``), computed by the library (``tf_time_stats_*``): for the combos ``params``
    of ``strategy`` (the HMA's (n, 6) grid by default, its 80-combo default grid when None), or,
    with ``positions`` (int8, the position after each bar), for that one position series.

    ``times``: each bar's time (datetime64 values or int64 ns since 1970, oldest first); the
    figures are then annualised with the bars per year of the data, ``(n - 1) / years``, unless
    ``periods_per_year`` says otherwise; without times they are per bar (periods_per_year 1).
    ``validate=False`` lets non-finite closes through (the figures then say NaN as section 10
    defines). HMA's figures come from its sweep (:func:`sweep_time`) on ``isa``'s path; every
    path gives the same bits."""
    from tollfree.data import to_close
    from tollfree.strategies import resolve

    close = np.ascontiguousarray(to_close(close, validate=validate), dtype=np.float64)
    n = close.shape[0]
    t = _time_times(times, n)
    lb = _time_lib()
    if positions is not None:
        pos = np.ascontiguousarray(positions, dtype=np.int8)
        if pos.shape != (n,):
            raise ValueError(f"positions: shape {pos.shape}, want ({n},)")
        out = np.empty(1, dtype=TIME_DTYPE)
        _time_call(lb.tf_time_stats_positions, close, n, t, periods_per_year, fee, threads, out,
                   close.ctypes.data, n, pos.ctypes.data)
        return {k: out[k].copy() for k in TIME_FIGURES}
    r = resolve(strategy)
    if r.is_hma:
        if params is None:
            params = _grid.default_grid()
        elif strategy is not None:
            from tollfree.binding import hma_params
            params = hma_params(np.ascontiguousarray(params))
        params = np.ascontiguousarray(params, dtype=np.int64)
        if isa != "auto":
            return sweep_time(close, params, threads=threads, isa=isa,
                              fee=FEE_DEFAULT if fee is None else fee, times=t,
                              periods_per_year=periods_per_year, validate=False)[1]
        out = np.empty(params.shape[0], dtype=TIME_DTYPE)
        _time_call(lb.tf_time_stats_hma, close, n, t, periods_per_year, fee, threads, out,
                   close.ctypes.data, n, params.ctypes.data, params.shape[0])
    else:
        if params is None:
            raise ValueError(f"strategy {r.name}: give params")
        p = np.ascontiguousarray(r.params(params), dtype=np.float64)
        out = np.empty(p.shape[0], dtype=TIME_DTYPE)
        _time_call(lb.tf_time_stats_with, close, n, t, periods_per_year, fee, threads, out,
                   r.ptr, close.ctypes.data, n, p.ctypes.data, p.shape[0])
    return {k: np.ascontiguousarray(out[k]) for k in TIME_FIGURES}


time_stats_fn = time_stats  # sweep_frame's name for it (its own argument is time_stats)
