"""Trade lists: every trade of one combo, as the sweep books it (the library's
``tf_trades_list``, the code ``tollfree trades`` runs: the same bits). docs/research.md, "Trade
lists", defines each column."""
from __future__ import annotations

import numpy as np

from tollfree import _research as _r
from tollfree import grid as _grid
from tollfree.binding import FEE_DEFAULT, STATS_DTYPE
from tollfree.data import to_close

COLUMNS = ["trade", "direction", "entry_bar", "exit_bar", "entry_date", "exit_date",
           "entry_price", "exit_price", "ret", "bars", "days", "open"]


def _dates(close, dates, n: int):
    """The bars' times as a pandas DatetimeIndex of n, or None: ``dates`` (anything
    ``pandas.to_datetime`` takes), else the index of a pandas ``close`` when it holds times."""
    import pandas as pd

    if dates is None:
        idx = getattr(close, "index", None)
        if isinstance(idx, pd.DatetimeIndex):
            dates = idx
        else:
            return None
    d = pd.DatetimeIndex(pd.to_datetime(dates))
    if len(d) != n:
        raise ValueError(f"dates has {len(d)} entries for {n} bars (one per bar, oldest first)")
    return d


def _combo(r, combo, params) -> np.ndarray:
    """The one combo as float64 [k] for the resolved strategy r."""
    if (combo is None) == (params is None):
        raise ValueError("give one combo: combo=(L, half, sq, p, p3, p2) or combo=L for HMA, "
                         "or params={name: value, ...} for a strategy")
    if combo is not None:
        if not r.is_hma:
            raise ValueError(f"combo= is HMA's six windows; strategy {r.name} takes params=")
        c = np.atleast_1d(np.asarray(combo))
        if c.shape == (1,):
            c = _grid.combo(int(c[0]))
        params = np.asarray(c, dtype=np.float64).reshape(1, -1)
    elif isinstance(params, dict):
        missing = [k for k in r.param_names if k not in params]
        extra = [k for k in params if k not in r.param_names]
        if missing or extra:
            raise ValueError(f"strategy {r.name}'s parameters are {', '.join(r.param_names)}; "
                             f"params= {'lacks ' + ', '.join(missing) if missing else ''}"
                             f"{'; has no ' + ', '.join(extra) if extra else ''}")
        params = [[params[k] for k in r.param_names]]
    p = r.params(np.asarray(params, dtype=np.float64).reshape(1, -1))
    return np.ascontiguousarray(p[0])


def trades(close, combo=None, *, strategy=None, params=None, fee: float = FEE_DEFAULT,
           dates=None):
    """Every trade of one combo, booked exactly as the sweep books it: a pandas DataFrame, one
    row per trade, columns ``trade`` (1, 2, ...), ``direction`` (1 long, -1 short),
    ``entry_bar, exit_bar`` (0-based; a reversal closes one trade and enters the next at the
    same bar), ``entry_date, exit_date`` (with dates), ``entry_price, exit_price`` (those bars'
    closes), ``ret`` (the return booked, percent points, fee included: the closed trades' ret
    summed in order give the sweep's pnl bit for bit), ``bars`` (exit_bar - entry_bar),
    ``days`` (with dates) and ``open`` (1: the position still open after the last bar, marked to
    the last close; it is in no sweep figure).

    ``combo``: HMA's six windows, or one Hull length L. ``strategy`` (a built-in name, a plugin
    path or :func:`tollfree.define`) with ``params``: {name: value} or the values in the
    strategy's order. ``dates``: one time per bar (anything ``pandas.to_datetime`` takes); by
    default the index of a pandas ``close`` that holds times. ``df.attrs`` holds ``pnl``,
    ``trades`` and ``stats`` (the combo's sweep figures, by the same booking)."""
    import pandas as pd

    from tollfree import strategies as _st

    d = _dates(close, dates, len(close))
    close = to_close(close)
    r = _st.resolve(strategy)
    p = _combo(r, combo, params)
    rows, s = _r.trades_list(r.ptr, p, close, fee, STATS_DTYPE)
    _st.after_run(r)
    out = {"trade": np.arange(1, len(rows) + 1, dtype=np.int64),
           "direction": rows["direction"].astype(np.int64),
           "entry_bar": rows["entry_bar"], "exit_bar": rows["exit_bar"]}
    if d is not None:
        out["entry_date"] = d[rows["entry_bar"]]
        out["exit_date"] = d[rows["exit_bar"]]
    out.update(entry_price=rows["entry_price"], exit_price=rows["exit_price"], ret=rows["ret"],
               bars=rows["exit_bar"] - rows["entry_bar"])
    if d is not None:
        ns = d.asi8
        out["days"] = (ns[rows["exit_bar"]] - ns[rows["entry_bar"]]).astype(np.float64) / 86400e9
    out["open"] = rows["open"].astype(np.int64)
    df = pd.DataFrame(out)
    df.attrs.update(pnl=float(s["pnl"]), trades=int(s["trades"]),
                    stats={k: s[k].item() for k in STATS_DTYPE.names},
                    strategy=r.name, params=dict(zip(r.param_names, p.tolist())), fee=float(fee))
    return df
