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
def run_combo(close, L, half, sq, p, p3, p2):
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
                pnl += float(pos) * (close[i] - entry) / entry * 100.0 - FEE
                trades += 1
            pos = want
            entry = close[i]
    return pnl, trades


@njit(cache=False, fastmath=False)
def _sweep(close, params, pnl, trades):
    for j in range(params.shape[0]):
        q = params[j]
        pnl[j], trades[j] = run_combo(close, q[0], q[1], q[2], q[3], q[4], q[5])


@njit(cache=False, fastmath=False, parallel=True)
def _sweep_parallel(close, params, pnl, trades):
    for j in prange(params.shape[0]):
        q = params[j]
        pnl[j], trades[j] = run_combo(close, q[0], q[1], q[2], q[3], q[4], q[5])


def _prepare(close, params):
    from tollfree.binding import as_close, as_params

    close, params = as_close(close), as_params(params)
    m = params.shape[0]
    return close, params, np.zeros(m, dtype=np.float64), np.zeros(m, dtype=np.int64)


def sweep(close: np.ndarray, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numba, one thread: ``(pnl float64[m], trades int64[m])``. The first call compiles (~1 s)."""
    close, params, pnl, trades = _prepare(close, params)
    _sweep(close, params, pnl, trades)
    return pnl, trades


def sweep_parallel(close: np.ndarray, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numba ``prange`` over combos (benchmark row only; results must equal :func:`sweep`)."""
    close, params, pnl, trades = _prepare(close, params)
    _sweep_parallel(close, params, pnl, trades)
    return pnl, trades


def warm_up() -> None:
    """Compiles both entry points on a tiny input (keeps JIT time out of measurements)."""
    c = np.linspace(1.0, 2.0, 16)
    g = np.array([[2, 1, 1, 1, 1, 1]], dtype=np.int64)
    sweep(c, g)
    sweep_parallel(c, g)
