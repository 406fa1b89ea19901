"""numba references of the strategies: the booking and the five built-ins, written out plainly.

What the C paths (``tf_sweep_with`` at every thread count, streaming, plugins, numba strategies
through the library) are gated against, bit for bit. No fastmath, no parallel reductions, one
combo after another on one thread; each built-in follows docs/strategies.md's arithmetic to the
letter (the order of every sum, product and comparison).

The booking (docs/strategies.md, "The booking") turns targets into every statistic of
docs/definition.md section 8 in the order :mod:`tollfree.reference` books HMA's; a target is
``+1``, ``-1``, ``0`` or :data:`HOLD`. :func:`sweep_stats` runs a built-in by name, a strategy
made by :func:`tollfree.strategies.define` (its own numba ``init``/``step`` called in a numba
loop), or ``"hma"`` (:mod:`tollfree.reference`'s lines as targets).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from tollfree import reference as _hma

HOLD = 2  # TF_HOLD
FEE = 0.09

# Booking state: bf = [pnl, gross_win, gross_loss, best, worst, mean, m2, max_dd, entry, peak],
# bi = [trades, wins, exposure_bars, pos].
_NF, _NI = 10, 4
NAMES_F = ("pnl", "gross_win", "gross_loss", "best", "worst", "mean", "m2", "max_dd")
NAMES_I = ("trades", "wins", "exposure_bars")


@njit(cache=False, fastmath=False)
def book(bf, bi, c, want, fee):
    """One bar of the booking: ``want`` is the strategy's target at this bar, ``c`` its close."""
    pos = bi[3]
    if want != HOLD and want != pos:
        if pos != 0:
            entry = bf[8]
            r = float(pos) * (c - entry) / entry * 100.0 - fee
            bf[0] += r
            bi[0] += 1
            trades = bi[0]
            if r > 0.0:
                bi[1] += 1
                bf[1] += r
            else:
                bf[2] += r
            if trades == 1:
                bf[3] = r
                bf[4] = r
            else:
                if r > bf[3]:
                    bf[3] = r
                if r < bf[4]:
                    bf[4] = r
            delta = r - bf[5]
            bf[5] += delta / float(trades)
            bf[6] += delta * (r - bf[5])
            if bf[0] > bf[9]:
                bf[9] = bf[0]
            dd = bf[9] - bf[0]
            if dd > bf[7]:
                bf[7] = dd
        if want != 0:
            bf[8] = c
        bi[3] = want
        pos = want
    if pos != 0:
        bi[2] += 1


@njit(cache=False, fastmath=False)
def _rolling_sum(close, w, out):
    """S_w into out (NaN before bar w-1): the first w closes summed left to right, then
    (S + close[i]) - close[i-w]. The work arrays (``out`` here) are allocated once per sweep,
    not per combo: fresh pages per combo would cost more than the arithmetic."""
    n = close.shape[0]
    out[:] = np.nan
    if w > n:
        return out
    s = 0.0
    for k in range(w):
        s += close[k]
    out[w - 1] = s
    for i in range(w, n):
        s = (s + close[i]) - close[i - w]
        out[i] = s
    return out


@njit(cache=False, fastmath=False)
def _cross(close, a, b, start, fee, bf, bi):
    """Targets +1 (a > b), -1 (a < b), HOLD otherwise from bar ``start``, booked."""
    for i in range(close.shape[0]):
        want = HOLD
        if i >= start:
            if a[i] > b[i]:
                want = 1
            elif a[i] < b[i]:
                want = -1
        book(bf, bi, close[i], want, fee)


@njit(cache=False, fastmath=False)
def sma_cross(close, p, fee, bf, bi, work):
    fast, slow = int(p[0]), int(p[1])
    sf = _rolling_sum(close, fast, work[0])
    ss = _rolling_sum(close, slow, work[1])
    n = close.shape[0]
    a = work[2]
    b = work[3]
    for i in range(n):
        a[i] = sf[i] / float(fast)
        b[i] = ss[i] / float(slow)
    _cross(close, a, b, slow - 1, fee, bf, bi)


@njit(cache=False, fastmath=False)
def _ema(close, w, out):
    n = close.shape[0]
    if n == 0:
        return out
    a = 2.0 / (float(w) + 1.0)
    e = close[0]
    out[0] = e
    for i in range(1, n):
        e = e + a * (close[i] - e)
        out[i] = e
    return out


@njit(cache=False, fastmath=False)
def ema_cross(close, p, fee, bf, bi, work):
    fast, slow = int(p[0]), int(p[1])
    _cross(close, _ema(close, fast, work[0]), _ema(close, slow, work[1]), slow - 1, fee, bf,
           bi)


@njit(cache=False, fastmath=False)
def donchian(close, p, fee, bf, bi, work):
    w = int(p[0])
    for i in range(close.shape[0]):
        want = HOLD
        if i >= w:
            # max/min of close[i-w .. i-1]; a NaN in the window makes both NaN (so HOLD), as
            # numpy's max and min do
            hi = np.max(close[i - w:i])
            lo = np.min(close[i - w:i])
            c = close[i]
            if c > hi:
                want = 1
            elif c < lo:
                want = -1
        book(bf, bi, close[i], want, fee)


@njit(cache=False, fastmath=False)
def rsi(close, p, fee, bf, bi, work):
    period = int(p[0])
    lower, upper = p[1], p[2]
    fp = float(period)
    ag = 0.0
    al = 0.0
    for i in range(close.shape[0]):
        want = HOLD
        if i >= 1:
            d = close[i] - close[i - 1]
            g = d if d > 0 else 0.0
            lo = -d if d < 0 else 0.0
            if i <= period:
                ag += g
                al += lo
                if i == period:
                    ag = ag / fp
                    al = al / fp
            else:
                ag = (ag * (fp - 1.0) + g) / fp
                al = (al * (fp - 1.0) + lo) / fp
            if i >= period:
                if al == 0:
                    r = 50.0 if ag == 0 else 100.0
                else:
                    r = 100.0 - 100.0 / (1.0 + ag / al)
                if r < lower:
                    want = 1
                elif r > upper:
                    want = -1
        book(bf, bi, close[i], want, fee)


@njit(cache=False, fastmath=False)
def bollinger(close, p, fee, bf, bi, work):
    w = int(p[0])
    k = p[1]
    s = _rolling_sum(close, w, work[0])
    fw = float(w)
    t = 0
    for i in range(close.shape[0]):
        want = HOLD
        if i >= w - 1:
            m = s[i] / fw
            v = 0.0
            for j in range(i - w + 1, i + 1):
                v += (close[j] - m) * (close[j] - m)
            v = v / fw
            sd = math.sqrt(v)
            c = close[i]
            if c < m - k * sd:
                want = 1
            elif c > m + k * sd:
                want = -1
            elif t == 1 and c >= m:
                want = 0
            elif t == -1 and c <= m:
                want = 0
            if want != HOLD:
                t = want
        book(bf, bi, close[i], want, fee)


@njit(cache=False, fastmath=False)
def hma(close, p, fee, bf, bi, work):
    hma3, h = _hma.lines(close, int(p[0]), int(p[1]), int(p[2]), int(p[3]), int(p[4]),
                         int(p[5]))
    for i in range(close.shape[0]):
        f = hma3[i]
        s = h[i]
        want = HOLD
        if f > s:
            want = 1
        elif f < s:
            want = -1
        book(bf, bi, close[i], want, fee)


@njit(cache=False, fastmath=False)
def _store(bf, bi, out_f, out_i):
    for k in range(8):
        out_f[k] = bf[k]
    for k in range(3):
        out_i[k] = bi[k]


def _builtin_sweep(fn):
    @njit(cache=False, fastmath=False)
    def run(close, params, fee, out_f, out_i):
        work = np.empty((4, close.shape[0]))
        for j in range(params.shape[0]):
            bf = np.zeros(_NF)
            bi = np.zeros(_NI, dtype=np.int64)
            fn(close, params[j], fee, bf, bi, work)
            _store(bf, bi, out_f[j], out_i[j])
    return run


BUILTINS = {"hma": hma, "sma_cross": sma_cross, "ema_cross": ema_cross, "donchian": donchian,
            "rsi": rsi, "bollinger": bollinger}
PARAM_NAMES = {"hma": ("L", "half", "sq", "p", "p3", "p2"), "sma_cross": ("fast", "slow"),
               "ema_cross": ("fast", "slow"), "donchian": ("window",),
               "rsi": ("period", "lower", "upper"), "bollinger": ("window", "k")}
_RUNNERS = {}


@njit(cache=False, fastmath=False)
def user_combo(init, step, n_state, close, p, fee, bf, bi):
    """One combo of a numba strategy: ``init(state, p)`` then ``step(state, close[i])`` per bar,
    booked. Returns init's refusal (nonzero) without booking."""
    state = np.zeros(n_state)
    rc = init(state, p)
    if rc != 0:
        return rc
    for i in range(close.shape[0]):
        book(bf, bi, close[i], step(state, close[i]), fee)
    return 0


@njit(cache=False, fastmath=False)
def _user_sweep(init, step, n_state, close, params, fee, out_f, out_i):
    for j in range(params.shape[0]):
        bf = np.zeros(_NF)
        bi = np.zeros(_NI, dtype=np.int64)
        rc = user_combo(init, step, n_state, close, params[j], fee, bf, bi)
        if rc != 0:
            return j
        _store(bf, bi, out_f[j], out_i[j])
    return -1


@njit(cache=False, fastmath=False)
def user_combo_record(init, step, make, close, p, fee, bf, bi):
    """:func:`user_combo` for a record state: ``make()`` gives a zeroed array of one record
    and the functions get that record."""
    st = make()
    # st[0] at each call, never a record kept in a variable: numba frees the array once it is
    # no longer used, and a record taken from it would then point into freed memory
    rc = init(st[0], p)
    if rc != 0:
        return rc
    for i in range(close.shape[0]):
        book(bf, bi, close[i], step(st[0], close[i]), fee)
    return 0


@njit(cache=False, fastmath=False)
def _user_sweep_record(init, step, make, close, params, fee, out_f, out_i):
    for j in range(params.shape[0]):
        bf = np.zeros(_NF)
        bi = np.zeros(_NI, dtype=np.int64)
        rc = user_combo_record(init, step, make, close, params[j], fee, bf, bi)
        if rc != 0:
            return j
        _store(bf, bi, out_f[j], out_i[j])
    return -1


def _outputs(out_f, out_i) -> dict:
    out = {n: np.ascontiguousarray(out_f[:, k]) for k, n in enumerate(NAMES_F)}
    out.update({n: np.ascontiguousarray(out_i[:, k]) for k, n in enumerate(NAMES_I)})
    return out


def sweep_stats(strategy, close: np.ndarray, params, fee: float = FEE) -> dict:
    """numba, one thread: every output of every combo (the names of
    :func:`tollfree.sweep_stats`). ``strategy``: a built-in name or a numba strategy of
    :func:`tollfree.strategies.define` (its ``init``/``step`` run here, in a numba loop)."""
    close = np.ascontiguousarray(close, dtype=np.float64)
    p = np.ascontiguousarray(params, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"params must be 2-D (n_combos, n_params), got shape {p.shape}")
    m = p.shape[0]
    out_f = np.zeros((m, 8))
    out_i = np.zeros((m, 3), dtype=np.int64)
    if isinstance(strategy, str):
        if strategy not in BUILTINS:
            raise ValueError(f"unknown built-in {strategy!r}; built-ins: {', '.join(BUILTINS)}")
        if p.shape[1] != len(PARAM_NAMES[strategy]):
            raise ValueError(f"{strategy} takes {len(PARAM_NAMES[strategy])} parameters")
        run = _RUNNERS.get(strategy)
        if run is None:
            run = _RUNNERS[strategy] = _builtin_sweep(BUILTINS[strategy])
        run(close, p, float(fee), out_f, out_i)
        return _outputs(out_f, out_i)
    init, step, n_state = strategy.numba_parts()
    make = strategy.state_maker()
    if make is None:
        bad = _user_sweep(init, step, n_state, close, p, float(fee), out_f, out_i)
    else:
        bad = _user_sweep_record(init, step, make, close, p, float(fee), out_f, out_i)
    if bad >= 0:
        raise ValueError(f"{strategy.name}: init refused combo {bad} ({p[bad].tolist()})")
    return _outputs(out_f, out_i)


def sweep(strategy, close: np.ndarray, params, fee: float = FEE):
    """``(pnl, trades)`` of :func:`sweep_stats`."""
    st = sweep_stats(strategy, close, params, fee)
    return st["pnl"], st["trades"]


@njit(cache=False, fastmath=False)
def user_pnl(init, step, n_state, close, p, fee):
    """One combo of a numba strategy, pnl and trades only (the benchmark's per-combo loop)."""
    bf = np.zeros(_NF)
    bi = np.zeros(_NI, dtype=np.int64)
    user_combo(init, step, n_state, close, p, fee, bf, bi)
    return bf[0], bi[0]
