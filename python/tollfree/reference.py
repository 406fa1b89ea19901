"""The numba reference kernel: docs/definition.md written out in numba, no fastmath, no cache.

:func:`sweep` runs combos one after another on one thread (the reference every C path is gated
against); :func:`sweep_parallel` runs whole combos in a ``prange`` (each writes its own slots, no
reductions), used only as a benchmark row after its results are checked equal.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

FEE = 0.09


@njit(cache=False, fastmath=False)
def wma(x, L):
    n = x.shape[0]
    out = np.empty(n, dtype=np.float64)
    denom = float(L * (L + 1)) / 2.0
    for i in range(n):
        if i < L - 1:
            out[i] = np.nan
            continue
        s = 0.0
        for k in range(L):
            s += x[i - L + 1 + k] * float(k + 1)
        out[i] = s / denom
    return out


@njit(cache=False, fastmath=False)
def lines(close, L, half, sq, p, p3, p2):
    """(HMA3, HMA) of one combo: section 4's seven WMA passes."""
    n = close.shape[0]
    a = wma(close, half)
    b = wma(close, L)
    raw = np.empty(n, dtype=np.float64)
    for i in range(n):
        raw[i] = 2.0 * a[i] - b[i]
    hma = wma(raw, sq)
    w3 = wma(close, p3)
    w2 = wma(close, p2)
    wp = wma(close, p)
    inner = np.empty(n, dtype=np.float64)
    for i in range(n):
        inner[i] = 3.0 * w3[i] - w2[i] - wp[i]
    hma3 = wma(inner, p)
    return hma3, hma


@njit(cache=False, fastmath=False)
def run_combo(close, L, half, sq, p, p3, p2, fee):
    n = close.shape[0]
    hma3, hma = lines(close, L, half, sq, p, p3, p2)
    pos = 0
    entry = 0.0
    pnl = 0.0
    trades = 0
    for i in range(n):
        f = hma3[i]
        s = hma[i]
        if np.isnan(f) or np.isnan(s):
            continue
        if f > s:
            want = 1
        elif f < s:
            want = -1
        else:
            continue
        if want != pos:
            if pos != 0:
                pnl += float(pos) * (close[i] - entry) / entry * 100.0 - fee
                trades += 1
            pos = want
            entry = close[i]
    return pnl, trades


@njit(cache=False, fastmath=False)
def run_combo_stats(close, L, half, sq, p, p3, p2, fee, out_f, out_i):
    """Section 8: the same loop booking every statistic at each closed trade. out_f receives
    pnl, gross_win, gross_loss, best, worst, mean, m2, max_dd; out_i trades, wins,
    exposure_bars."""
    n = close.shape[0]
    hma3, hma = lines(close, L, half, sq, p, p3, p2)
    pos = 0
    entry = 0.0
    pnl = 0.0
    trades = 0
    wins = 0
    gross_win = 0.0
    gross_loss = 0.0
    best = 0.0
    worst = 0.0
    mean = 0.0
    m2 = 0.0
    peak = 0.0
    max_dd = 0.0
    first_bar = -1
    for i in range(n):
        f = hma3[i]
        s = hma[i]
        if np.isnan(f) or np.isnan(s):
            continue
        if f > s:
            want = 1
        elif f < s:
            want = -1
        else:
            continue
        if want != pos:
            if pos != 0:
                r = float(pos) * (close[i] - entry) / entry * 100.0 - fee
                pnl += r
                trades += 1
                if r > 0.0:
                    wins += 1
                    gross_win += r
                else:
                    gross_loss += r
                if trades == 1:
                    best = r
                    worst = r
                else:
                    if r > best:
                        best = r
                    if r < worst:
                        worst = r
                delta = r - mean
                mean += delta / float(trades)
                m2 += delta * (r - mean)
                if pnl > peak:
                    peak = pnl
                dd = peak - pnl
                if dd > max_dd:
                    max_dd = dd
            else:
                first_bar = i
            pos = want
            entry = close[i]
    out_f[0] = pnl
    out_f[1] = gross_win
    out_f[2] = gross_loss
    out_f[3] = best
    out_f[4] = worst
    out_f[5] = mean
    out_f[6] = m2
    out_f[7] = max_dd
    out_i[0] = trades
    out_i[1] = wins
    out_i[2] = n - first_bar if first_bar >= 0 else 0


@njit(cache=False, fastmath=False)
def _sweep(close, params, fee, pnl, trades):
    for j in range(params.shape[0]):
        q = params[j]
        pnl[j], trades[j] = run_combo(close, q[0], q[1], q[2], q[3], q[4], q[5], fee)


@njit(cache=False, fastmath=False)
def _sweep_stats(close, params, fee, out_f, out_i):
    for j in range(params.shape[0]):
        q = params[j]
        run_combo_stats(close, q[0], q[1], q[2], q[3], q[4], q[5], fee, out_f[j], out_i[j])


@njit(cache=False, fastmath=False, parallel=True)
def _sweep_parallel(close, params, fee, pnl, trades):
    for j in prange(params.shape[0]):
        q = params[j]
        pnl[j], trades[j] = run_combo(close, q[0], q[1], q[2], q[3], q[4], q[5], fee)


def _prepare(close, params):
    from tollfree.binding import as_close, as_params

    close, params = as_close(close), as_params(params)
    m = params.shape[0]
    return close, params, np.zeros(m, dtype=np.float64), np.zeros(m, dtype=np.int64)


def sweep(close: np.ndarray, params: np.ndarray,
          fee: float = FEE) -> tuple[np.ndarray, np.ndarray]:
    """numba, one thread: ``(pnl float64[m], trades int64[m])``. The first call compiles (~1 s)."""
    close, params, pnl, trades = _prepare(close, params)
    _sweep(close, params, float(fee), pnl, trades)
    return pnl, trades


def sweep_stats(close: np.ndarray, params: np.ndarray, fee: float = FEE) -> dict:
    """numba, one thread: every output of section 8, named as :func:`tollfree.sweep_stats`."""
    close, params, _, _ = _prepare(close, params)
    m = params.shape[0]
    out_f = np.zeros((m, 8), dtype=np.float64)
    out_i = np.zeros((m, 3), dtype=np.int64)
    _sweep_stats(close, params, float(fee), out_f, out_i)
    names_f = ("pnl", "gross_win", "gross_loss", "best", "worst", "mean", "m2", "max_dd")
    names_i = ("trades", "wins", "exposure_bars")
    out = {n: np.ascontiguousarray(out_f[:, k]) for k, n in enumerate(names_f)}
    out.update({n: np.ascontiguousarray(out_i[:, k]) for k, n in enumerate(names_i)})
    return out


def sweep_parallel(close: np.ndarray, params: np.ndarray,
                   fee: float = FEE) -> tuple[np.ndarray, np.ndarray]:
    """numba ``prange`` over combos (benchmark row only; results must equal :func:`sweep`)."""
    close, params, pnl, trades = _prepare(close, params)
    _sweep_parallel(close, params, float(fee), pnl, trades)
    return pnl, trades


def warm_up() -> None:
    """Compiles both entry points on a tiny input (keeps JIT time out of measurements)."""
    c = np.linspace(1.0, 2.0, 16)
    g = np.array([[2, 1, 1, 1, 1, 1]], dtype=np.int64)
    sweep(c, g)
    sweep_parallel(c, g)
