"""The numba reference of the time-aware figures: docs/definition.md section 10 written out in
numba (no fastmath, no cache), the model the library's ``tf_time_stats_*`` is gated against bit
for bit (python/tests/test_timestats.py).

:func:`figures` takes one combo's position after each bar; :func:`hma_positions` gives an HMA
combo's positions from :mod:`tollfree.reference`'s lines (section 5's stop and reverse), so the
gate's positions do not come from the library either.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from tollfree.reference import lines

NS_PER_DAY = 86400e9
DAYS_PER_YEAR = 365.25
NAMES = ("equity", "cagr", "ann_vol", "sharpe", "sortino", "calmar", "mtm_max_dd",
         "exposure_pct", "buy_hold", "compounded", "mean_bars", "max_bars", "mean_days",
         "max_days", "periods_per_year")


@njit(cache=False, fastmath=False)
def hma_positions(close, L, half, sq, p, p3, p2):
    """The position after each bar of one HMA combo (section 5)."""
    n = close.shape[0]
    hma3, hma = lines(close, L, half, sq, p, p3, p2)
    out = np.zeros(n, dtype=np.int8)
    pos = 0
    for i in range(n):
        f = hma3[i]
        s = hma[i]
        if not (np.isnan(f) or np.isnan(s)):
            if f > s:
                pos = 1
            elif f < s:
                pos = -1
        out[i] = pos
    return out


def periods(times, n: int, override: float = 0.0) -> float:
    """Section 10's periods a year."""
    if override:
        return float(override)
    if times is None:
        return 1.0
    years = float(times[n - 1] - times[0]) / (DAYS_PER_YEAR * NS_PER_DAY) if n >= 2 else 0.0
    return float(n - 1) / years if years > 0.0 else np.nan


@njit(cache=False, fastmath=False)
def _mark(acc, e):
    # acc: [eq, q, d, peak, mdd, comp, dur, days, max_days, trades, max_dur]
    if e > acc[3]:
        acc[3] = e
    dd = acc[3] - e
    if dd > acc[4]:
        acc[4] = dd


@njit(cache=False, fastmath=False)
def prefix(close):
    """Section 10's prefix sums of the differences: p1, p2, falls (dn) and rises (up)."""
    n = close.shape[0]
    m = n if n > 0 else 1
    px = np.zeros((4, m))
    for t in range(1, n):
        d = close[t] - close[t - 1]
        q = d * d
        px[0, t] = px[0, t - 1] + d
        px[1, t] = px[1, t - 1] + q
        px[2, t] = px[2, t - 1] + (0.0 if d > 0.0 else q)
        px[3, t] = px[3, t - 1] + (0.0 if d < 0.0 else q)
    return px


@njit(cache=False, fastmath=False)
def _hold(acc, px, close, e, end, p):
    """The bars (e, end] of a position entered at bar e in direction p: MTM marks, squares."""
    k = 100.0 / close[e]
    kk = k * k
    dp = float(p)
    for t in range(e + 1, end + 1):
        _mark(acc, acc[0] + k * (dp * (px[0, t] - px[0, e])))
    w = 2 if p > 0 else 3
    acc[1] = acc[1] + kk * (px[1, end] - px[1, e])
    acc[2] = acc[2] + kk * (px[w, end] - px[w, e])


@njit(cache=False, fastmath=False)
def _figures(close, pos, times, has_times, fee, ppy, out):
    n = close.shape[0]
    px = prefix(close)
    acc = np.zeros(11)
    acc[5] = 1.0
    cur = 0
    e = -1
    expo = 0
    for t in range(n):
        p = int(pos[t])
        if p != cur:
            if cur != 0:
                x = t
                k = 100.0 / close[e]
                dp = float(cur)
                r = dp * (close[x] - close[e]) / close[e] * 100.0 - fee
                _hold(acc, px, close, e, x - 1, cur)
                g = r - k * (dp * (px[0, x - 1] - px[0, e]))
                acc[1] = acc[1] + g * g
                acc[2] = acc[2] + (g * g if g < 0.0 else 0.0)
                acc[0] = acc[0] + r
                _mark(acc, acc[0])
                acc[5] = acc[5] * (1.0 + r / 100.0)
                acc[9] += 1.0
                acc[6] = acc[6] + float(x - e)
                if float(x - e) > acc[10]:
                    acc[10] = float(x - e)
                if has_times:
                    dd = float(times[x] - times[e]) / NS_PER_DAY
                    acc[7] = acc[7] + dd
                    if dd > acc[8]:
                        acc[8] = dd
            e = t
            cur = p
        if cur != 0:
            expo += 1
    equity = acc[0]
    if cur != 0:
        _hold(acc, px, close, e, n - 1, cur)
        k = 100.0 / close[e]
        equity = acc[0] + k * (float(cur) * (px[0, n - 1] - px[0, e]))
    N = float(n - 1)
    sq = np.sqrt(ppy)
    mean = equity / N if n >= 2 else np.nan
    var = (acc[1] - equity * equity / N) / (N - 1.0) if n >= 3 else np.nan
    sd = 0.0 if var < 0.0 else np.sqrt(var)
    dsd = np.sqrt(acc[2] / N) if n >= 2 else np.nan
    years = N / ppy
    g = 1.0 + equity / 100.0
    if n < 2 or not (years > 0.0):
        cagr = np.nan
    elif g > 0.0:
        cagr = (g ** (1.0 / years) - 1.0) * 100.0
    elif g <= 0.0:
        cagr = -100.0
    else:
        cagr = np.nan
    trades = acc[9]
    out[0] = equity
    out[1] = cagr
    out[2] = sd * sq
    out[3] = mean / sd * sq if sd > 0.0 else np.nan
    out[4] = mean / dsd * sq if dsd > 0.0 else np.nan
    out[5] = cagr / acc[4] if acc[4] > 0.0 else np.nan
    out[6] = acc[4]
    out[7] = float(expo) / float(n) * 100.0 if n > 0 else np.nan
    out[8] = (close[n - 1] - close[0]) / close[0] * 100.0 if n > 0 else np.nan
    out[9] = (acc[5] - 1.0) * 100.0
    out[10] = acc[6] / trades if trades > 0 else np.nan
    out[11] = acc[10]
    out[12] = acc[7] / trades if has_times and trades > 0 else np.nan
    out[13] = acc[8] if has_times else np.nan
    out[14] = ppy


def figures(close, pos, fee: float = 0.09, times=None, periods_per_year: float = 0.0) -> dict:
    """One combo's figures from its positions (float64 each, NaN as the one NaN
    0xfff8000000000000, as the library gives it)."""
    close = np.ascontiguousarray(close, dtype=np.float64)
    n = close.shape[0]
    ppy = periods(times, n, periods_per_year)
    t = np.zeros(1, dtype=np.int64) if times is None else np.ascontiguousarray(times, np.int64)
    out = np.empty(15)
    _figures(close, np.ascontiguousarray(pos, dtype=np.int8), t, times is not None, float(fee),
             ppy, out)
    out[np.isnan(out)] = np.frombuffer(np.uint64(0xfff8000000000000).tobytes(), np.float64)[0]
    return dict(zip(NAMES, out))
