"""The sweep's statistics as a researcher reads them: derived figures and a ranked table.

The kernel books, per combo and in the same loop as pnl, the outputs of docs/definition.md
section 8 (:func:`tollfree.sweep_stats`). The figures below are derived from them where they are
shown, never inside the loop, with the same rules as ``tollfree sweep --columns``:

- ``win_rate = wins / trades``; NaN without trades;
- ``profit_factor = gross_win / -gross_loss``; inf when there are gains and no loss, NaN with
  neither;
- ``std = sqrt(m2 / (trades - 1))`` (the sample deviation of the trade returns), NaN under two
  trades; ``sharpe_per_trade = mean / std``, NaN where std is NaN or 0;
- ``avg_trade = pnl / trades``; NaN without trades.
"""
from __future__ import annotations

import numpy as np

from tollfree import grid as _grid
from tollfree.binding import FEE_DEFAULT, STAT_NAMES, sweep_stats

DERIVED = ("win_rate", "profit_factor", "sharpe_per_trade", "avg_trade")


def derived(st: dict) -> dict:
    """The derived figures (float64 arrays) from a :func:`tollfree.sweep_stats` dict."""
    t = np.asarray(st["trades"], dtype=np.float64)
    gw, gl = np.asarray(st["gross_win"]), np.asarray(st["gross_loss"])
    with np.errstate(divide="ignore", invalid="ignore"):
        win_rate = np.where(t > 0, st["wins"] / np.maximum(t, 1.0), np.nan)
        pf = np.where(gl < 0, gw / np.where(gl < 0, -gl, 1.0), np.where(gw > 0, np.inf, np.nan))
        std = np.where(t > 1, np.sqrt(st["m2"] / np.maximum(t - 1.0, 1.0)), np.nan)
        sharpe = np.where(std > 0, st["mean"] / np.where(std > 0, std, 1.0), np.nan)
        avg = np.where(t > 0, st["pnl"] / np.maximum(t, 1.0), np.nan)
    return {"win_rate": win_rate, "profit_factor": pf, "sharpe_per_trade": sharpe,
            "avg_trade": avg}


def sweep_frame(close, params=None, threads: int | None = None, isa: str = "auto",
                fee: float = FEE_DEFAULT, progress=None, sort: str | None = None,
                top: int | None = None):
    """The sweep as a pandas DataFrame: one row per combo with the six windows, every output of
    :func:`tollfree.sweep_stats` and the derived figures (module docstring). ``params``
    defaults to the 80-combo default grid; ``close`` may be anything
    :func:`tollfree.data.to_close` takes. ``sort`` orders by any column, highest first ("-name": lowest),
    NaN last; ``top`` keeps the first K rows."""
    import pandas as pd

    from tollfree.data import to_close

    close = to_close(close)
    params = _grid.default_grid() if params is None else np.ascontiguousarray(params)
    st = sweep_stats(close, params, threads=threads, isa=isa, fee=fee, progress=progress)
    cols = {n: params[:, k] for k, n in enumerate(_grid.PARAM_NAMES)}
    cols.update({n: st[n] for n in STAT_NAMES})
    cols.update(derived(st))
    frame = pd.DataFrame(cols)
    if sort is not None:
        name = sort[1:] if sort.startswith("-") else sort
        if name not in frame.columns:
            raise ValueError(f"sort must be one of {', '.join(frame.columns)} (or -name), "
                             f"got {sort!r}")
        frame = frame.sort_values(name, ascending=sort.startswith("-"), na_position="last",
                                  kind="stable")
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
            raise ValueError(f"top must be a positive integer, got {top!r}")
        frame = frame.head(int(top))
    return frame
