"""Your own strategy in numba, swept by tollfree's C threads at C speed (no GIL).

    PYTHONPATH=python python3 examples/numba_strategy.py

A strategy gives one target per bar: +1 long, -1 short, 0 flat, or HOLD (2: keep what you
have); tollfree books trades, pnl, the fee and every statistic, the same way for every
strategy. init(state, params) fills the state (a float64 array, zeroed first) from one combo's
parameters and returns 0 (or nonzero: these parameters are invalid); step(state, close) sees one
close and returns the target.
"""
from numba import njit

import tollfree
from tollfree import grid
from tollfree.data import default_close
from tollfree.strategies import HOLD


@njit
def init(s, p):                     # p = [lookback, band]; s = [lookback, band, bars, ring...]
    if not (1 <= p[0] <= 256 and p[0] == int(p[0]) and p[1] >= 0):
        return 1
    s[0], s[1] = p[0], p[1]
    return 0


@njit
def step(s, close):                 # breakout of the close `lookback` bars back by `band` %
    n, i = int(s[0]), int(s[2])
    s[2] = i + 1
    back = s[3 + i % n]
    s[3 + i % n] = close
    if i < n:
        return HOLD
    move = (close - back) / back * 100.0
    return 1 if move > s[1] else (-1 if move < -s[1] else HOLD)


breakout = tollfree.define("breakout", ["lookback", "band"], init, step, state=3 + 256)

if __name__ == "__main__":
    close = default_close()
    params = grid.product(lookback=(10, 200, 10), band=[0.0, 0.5, 1.0, 2.0], where="band<5")
    frame = tollfree.sweep_frame(close, params, strategy=breakout, sort="pnl", top=5)
    print(frame[["lookback", "band", "pnl", "trades", "win_rate", "max_dd"]].to_string())
    best = frame.iloc[0]
    s = tollfree.Strategy([best.lookback, best.band], strategy=breakout)   # the same, streamed
    for c in close:
        s.on_bar(c)
    print(f"streamed: pnl {s.pnl!r} trades {s.trades} (the sweep: {best.pnl!r} {int(best.trades)})")
    wf = tollfree.walk_forward(close, params, walk_forward=4, strategy=breakout)
    print(wf[["fold", "lookback", "band", "is_pnl", "oos_pnl", "oos_rank"]].to_string())
