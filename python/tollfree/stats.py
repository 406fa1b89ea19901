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
         top: int | None = None, names=None) -> np.ndarray:
    """Row numbers of the combos to show, as ``tollfree sweep --sort/--top`` chooses them: grid
    order without ``sort`` and ``top``; else ranked by ``sort`` (a column name, highest first, or
    ``-name``, lowest first; ``pnl`` when only ``top`` is given), NaN last, ties in grid order,
    then at most ``top``. ``names``: the parameter names of a strategy's float64 ``params``
    (None: HMA's int64 grid)."""
    m = params.shape[0]
    col, sign = _order(sort, top, names)
    if col is None:
        return np.arange(m)
    pnl = np.ascontiguousarray(st["pnl"], dtype=np.float64)
    trades = np.ascontiguousarray(st["trades"], dtype=np.int64)
    if names is None:
        rows = stats_rows(st) if _r.column_flags(col) & _r.COLUMN_STATS else None
        res = _r.results(params, pnl, trades, rows, m)
    else:
        p = np.ascontiguousarray(params, dtype=np.float64)
        flags = _r.table_flags(_r.results(m=0, names=names), col)
        rows = stats_rows(st) if flags & _r.COLUMN_STATS else None
        res = _r.results(p, pnl, trades, rows, m, names=names)
    order = _r.rank(_r.column_values(res, col, sign))
    return order if top is None else order[:int(top)]


def sweep_frame(close, params=None, threads: int | None = None, isa: str = "auto",
                fee: float = FEE_DEFAULT, progress=None, sort: str | None = None,
                top: int | None = None, *, strategy=None):
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
    parameters, by name, and ``sort`` may name one of them."""
    import pandas as pd

    from tollfree.data import to_close
    from tollfree.strategies import resolve

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
    st = sweep_stats(close, params, threads=threads, isa=isa, fee=fee, progress=progress,
                     strategy=r)
    order = rank(params, st, sort, top, names)
    if names is None:
        grid_note(params, close.shape[0])
    cols = {n: params[:, k] for k, n in enumerate(pnames)}
    cols.update({n: st[n] for n in STAT_NAMES})
    cols.update(derived(st))
    frame = pd.DataFrame(cols)
    if sort is None and top is None:
        return frame
    return frame.iloc[order]
