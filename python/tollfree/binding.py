"""In-process calls into libtollfree: the batch sweep and the streaming strategy."""
from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

from tollfree import data as _data
from tollfree._lib import lib, strerror
from tollfree.wire import E_BAD_INPUT

_DBL_MAX = sys.float_info.max

ISAS = {"auto": 0, "scalar": 1, "sse2": 2, "avx2": 3, "avx512": 4}
MAX_WINDOW = 1 << 31


class KernelError(ValueError):
    """A libtollfree error code (``.code``), with its tf_strerror text or, where the caller knows
    more, a message that says what and where."""

    def __init__(self, code: int, what: str = "tollfree", detail: str | None = None):
        self.code = code
        super().__init__(f"{what}: {detail or strerror(code)} (code {code})")


FEE_DEFAULT = 0.09  # TF_FEE_DEFAULT: percent points per closed trade

# One combo's outputs (tf_stats), in the kernel's order; docs/definition.md section 8.
STAT_NAMES = ("pnl", "trades", "wins", "gross_win", "gross_loss", "best", "worst", "mean", "m2",
              "max_dd", "exposure_bars")
_INT_STATS = ("trades", "wins", "exposure_bars")


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64 if n in _INT_STATS else ctypes.c_double) for n in STAT_NAMES]


STATS_DTYPE = np.dtype(_Stats)


class _Progress(ctypes.Structure):
    _fields_ = [("done", ctypes.c_int64), ("total", ctypes.c_int64), ("cancel", ctypes.c_int)]


class _Opts(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("threads", ctypes.c_int), ("isa", ctypes.c_int),
                ("max_bytes", ctypes.c_size_t), ("fee", ctypes.POINTER(ctypes.c_double)),
                ("stats", ctypes.c_void_p), ("progress", ctypes.POINTER(_Progress))]


def as_fee(fee) -> float:
    """Checks a fee by the library's rule (``tf_fee_check``): a finite number of percent points
    per closed trade, 0 <= fee < 100 (a negative fee, a rebate, is refused)."""
    if isinstance(fee, bool) or not isinstance(fee, (int, float, np.integer, np.floating)):
        raise TypeError(f"fee must be a number (percent points per closed trade), got {fee!r}")
    from tollfree._research import fee_check  # the library's check, once
    why = fee_check(float(fee))
    if why:
        raise ValueError(why)
    return float(fee)


def _opts(threads, isa: str, fee, stats=None) -> tuple[_Opts, ctypes.c_double]:
    """The kernel's options; the c_double returned must live as long as the options."""
    if isa not in ISAS:
        raise ValueError(f"isa must be one of {sorted(ISAS) + ['reference']}, got {isa!r}")
    f = ctypes.c_double(as_fee(fee))
    o = _Opts(ctypes.sizeof(_Opts), as_threads(threads), ISAS[isa], 0, ctypes.pointer(f),
              None if stats is None else stats.ctypes.data, None)
    return o, f


# Sweeps with more work than this (bars x combos) run on a helper thread, so that Ctrl-C (and a
# progress display) reach Python while the kernel works; smaller ones (well under a second) run
# on the calling thread and cost no thread start.
_BACKGROUND_WORK = 2e8


def _progress_sink(progress):
    """(show(done, total), finish()) for progress=True (tqdm if installed, else a line on
    stderr) or a callable; (None, None) for None/False."""
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    if progress is not True:
        raise TypeError(f"progress must be True, False, None or a callable(done, total), "
                        f"got {progress!r}")
    try:
        from tqdm import tqdm
    except ImportError:
        def line(done, total):
            pct = 100.0 * done / total if total else 0.0
            sys.stderr.write(f"\rsweep: {pct:5.1f}% ({done}/{total} combo blocks)")
            sys.stderr.flush()
        return line, lambda: sys.stderr.write("\n")
    bar = tqdm(total=1, unit="block", desc="sweep", file=sys.stderr)

    def show(done, total):
        bar.total = max(total, 1)
        bar.n = done
        bar.refresh()
    return show, bar.close


def _call(fn, work: float, progress, opts: _Opts, *args) -> int:
    """fn(*args, &opts). Big jobs (or with progress) run on a helper thread while this one polls
    the kernel's progress counters and waits for Ctrl-C: KeyboardInterrupt cancels the kernel
    (it stops at its next combo group of one time block) and is re-raised once it returned."""
    show, finish = _progress_sink(progress)
    if work < _BACKGROUND_WORK and show is None:
        return fn(*args, ctypes.addressof(opts))
    pg = _Progress()
    opts.progress = ctypes.pointer(pg)
    result = []
    t = threading.Thread(target=lambda: result.append(fn(*args, ctypes.addressof(opts))),
                         daemon=True)
    t.start()
    done, total = ctypes.c_int64(), ctypes.c_int64()
    try:
        while True:  # shows once at the start and once after the end, and every 0.1 s between
            alive = t.is_alive()
            if show is not None:
                lib().tf_progress_read(ctypes.byref(pg), ctypes.byref(done), ctypes.byref(total))
                show(done.value, total.value)
            if not alive:
                break
            t.join(0.1)
    except BaseException:
        lib().tf_progress_cancel(ctypes.byref(pg))
        t.join()
        raise
    finally:
        if finish is not None:
            finish()
    return result[0]


def as_close(close) -> np.ndarray:
    """Checks a close series: a 1-D float64 C-contiguous array (no copy is ever made here, and
    the values are not looked at). The sweeps take more (:func:`close_series`)."""
    if not isinstance(close, np.ndarray):
        raise TypeError(f"close must be a numpy.ndarray of float64, got {type(close).__name__}")
    if close.dtype != np.float64:
        raise TypeError(f"close must be float64, got {close.dtype} (use close.astype(np.float64))")
    if close.ndim != 1:
        raise ValueError(f"close must be 1-D, got shape {close.shape}")
    if not close.flags.c_contiguous:
        raise ValueError("close must be C-contiguous (use np.ascontiguousarray(close))")
    return close


def as_params(params) -> np.ndarray:
    """Checks a parameter grid: int64 (n, 6) C-contiguous, every length in 1 .. 2**31."""
    if not isinstance(params, np.ndarray):
        raise TypeError(f"params must be a numpy.ndarray of int64, got {type(params).__name__}")
    if params.dtype != np.int64:
        raise TypeError(f"params must be int64, got {params.dtype} (use params.astype(np.int64))")
    if params.ndim != 2 or params.shape[1] != 6:
        raise ValueError(f"params must have shape (n_combos, 6), got {params.shape}")
    if not params.flags.c_contiguous:
        raise ValueError("params must be C-contiguous (use np.ascontiguousarray(params))")
    if params.size:
        lo, hi = int(params.min()), int(params.max())
        if lo < 1:
            raise ValueError(f"window lengths must be >= 1, got {lo}")
        if hi > MAX_WINDOW:
            raise ValueError(f"window lengths must be <= 2**31, got {hi}")
    return params


def as_combo(params) -> np.ndarray:
    """Checks one combo: six integer window lengths (a sequence or an array), each in 1 .. 2**31,
    as :func:`as_params` checks a grid (floats are refused here as they are there). Returns a
    C-contiguous int64[6] (a copy)."""
    a = np.asarray(params)
    if a.dtype.kind not in "iu":
        raise TypeError(f"a combo is six integer window lengths, got dtype {a.dtype}")
    a = a.reshape(-1)
    if a.shape != (6,):
        raise ValueError(f"a combo is six window lengths, got {a.shape[0]}")
    lo, hi = int(a.min()), int(a.max())
    if lo < 1:
        raise ValueError(f"window lengths must be >= 1, got {lo}")
    if hi > MAX_WINDOW:
        raise ValueError(f"window lengths must be <= 2**31, got {hi}")
    return np.ascontiguousarray(a, dtype=np.int64)


def as_threads(threads) -> int:
    """Checks a thread count: None or 0 (every core) or a positive integer; returns it as int."""
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"threads must be an integer or None, got {type(threads).__name__} "
                        f"{threads!r}")
    if threads < 0:
        raise ValueError(f"threads must be >= 0, got {threads}")
    return int(threads)


def close_series(close, column: str = "close", validate: bool = True) -> np.ndarray:
    """What :func:`sweep`, :func:`sweep_stats` and :class:`Series` do with their ``close``:
    :func:`tollfree.data.to_close` (a numpy array of any real dtype, a pandas Series, a pandas
    DataFrame's ``column`` in any case, a list of numbers) to a C-contiguous float64 array,
    without a copy when it is one already. ``validate=True`` refuses a value that is not a
    positive finite price (:class:`tollfree.data.BadInput`, a ``ValueError`` naming the index,
    and the label of a pandas index, of the first); ``validate=False`` skips that check (the
    kernel then follows docs/definition.md's rules for NaN and inf)."""
    return _data.to_close(close, column=column, validate=validate)


def _check(rc: int, what: str) -> None:
    if rc < 0:
        raise KernelError(rc, what)


def sweep(close, params: np.ndarray, threads: int | None = None,
          isa: str = "auto", fee: float = FEE_DEFAULT, progress=None, *,
          column: str = "close", validate: bool = True,
          strategy=None) -> tuple[np.ndarray, np.ndarray]:
    """Runs the sweep in-process: ``(pnl float64[m], trades int64[m])``.

    ``close``: a numpy array, a pandas Series, a pandas DataFrame (its ``column``, any case) or
    a list of numbers, oldest first. By default every value must be a positive finite price:
    the first that is not raises :class:`tollfree.data.BadInput` (a ``ValueError``) naming its
    index (and pandas label). ``validate=False`` is the raw path: no check, the kernel's NaN
    rules (docs/definition.md section 7). Either way a C-contiguous float64 array is read in
    place (no copy; other inputs are converted once); int64 ``params`` (m, 6) are read in place
    too; the GIL is released during the call. ``threads=None`` or 0 uses every core; ``isa``
    forces a SIMD path (``auto``, ``scalar``, ``sse2``, ``avx2``, ``avx512``) or ``reference``
    for the literal spec.
    ``fee``: percent points per closed trade (default 0.09). ``progress``: True (tqdm when
    installed, else a line on stderr) or a callable(done, total). Ctrl-C stops a long sweep
    (KeyboardInterrupt).

    ``strategy``: ``None`` or ``"hma"`` (HMA/HMA3, ``params`` int64 (m, 6)), another built-in
    name, a path to a plugin .so, or a strategy of :func:`tollfree.strategies.define`; for
    those ``params`` is an (m, k) float64 array in the strategy's parameter order (integers
    accepted), and ``isa="reference"`` runs the library's plain model
    (``tf_sweep_with_reference``). See :mod:`tollfree.strategies`.
    """
    pnl, trades, _ = _run(close_series(close, column, validate), params, threads, isa, fee,
                          progress, False, strategy)
    return pnl, trades


def sweep_stats(close, params: np.ndarray, threads: int | None = None, isa: str = "auto",
                fee: float = FEE_DEFAULT, progress=None, *, column: str = "close",
                validate: bool = True, strategy=None) -> dict:
    """Every output of every combo (docs/definition.md section 8): a dict of numpy arrays named
    ``pnl, trades, wins, gross_win, gross_loss, best, worst, mean, m2, max_dd, exposure_bars``
    (int64 for the counts, float64 otherwise), bit-identical on every path. Same arguments as
    :func:`sweep` (``strategy`` included)."""
    _, _, rows = _run(close_series(close, column, validate), params, threads, isa, fee, progress,
                      True, strategy)
    return {n: np.ascontiguousarray(rows[n]) for n in STAT_NAMES}


def hma_params(params) -> np.ndarray:
    """HMA's grid from what ``strategy="hma"`` was given: int64 (m, 6) as is (checked by
    :func:`as_params`); a float array of whole numbers (a :func:`tollfree.grid.product` grid)
    converted exactly."""
    if isinstance(params, np.ndarray) and params.dtype.kind == "f" and params.ndim == 2:
        if params.size and not (np.all(np.isfinite(params)) and
                                np.array_equal(params, np.floor(params))):
            raise ValueError("hma's six window lengths must be whole numbers")
        if params.size and (params.min() < 1 or params.max() > MAX_WINDOW):
            raise ValueError("hma's window lengths must be in 1 .. 2**31")
        params = np.ascontiguousarray(params, dtype=np.int64)
    return as_params(params)


def _run(close, params, threads, isa, fee, progress, with_stats, strategy=None):
    from tollfree import strategies as _st
    r = _st.resolve(strategy)
    if not r.is_hma:
        return _run_with(r, as_close(close), params, threads, isa, fee, progress, with_stats)
    # strategy="hma" named takes whole-number floats (grid.product); the default keeps int64
    close = as_close(close)
    params = as_params(params) if strategy is None else hma_params(params)
    m = params.shape[0]
    pnl = np.empty(m, dtype=np.float64)
    trades = np.empty(m, dtype=np.int64)
    rows = np.empty(m, dtype=STATS_DTYPE) if with_stats else None
    reference = isa == "reference"
    opts, _fee_alive = _opts(threads, "auto" if reference else isa, fee, rows)
    args = (close.ctypes.data, close.shape[0], params.ctypes.data, m, pnl.ctypes.data,
            trades.ctypes.data)
    if reference:
        rc = lib().tf_sweep_reference(*args, ctypes.addressof(opts))
    else:
        rc = _call(lib().tf_sweep, float(close.shape[0]) * float(m), progress, opts, *args)
    _check(rc, "sweep")
    return pnl, trades, rows


def _run_with(r, close, params, threads, isa, fee, progress, with_stats):
    """Any strategy (``tf_sweep_with``): r from :func:`tollfree.strategies.resolve`."""
    from tollfree import strategies as _st
    p = r.params(params)
    m = p.shape[0]
    pnl = np.empty(m, dtype=np.float64)
    trades = np.empty(m, dtype=np.int64)
    rows = np.empty(m, dtype=STATS_DTYPE) if with_stats else None
    reference = isa == "reference"
    threads = _st.slow_path_note(r, threads) or threads
    opts, _fee_alive = _opts(threads, "auto" if reference else isa, fee, rows)
    args = (r.ptr, close.ctypes.data, close.shape[0], p.ctypes.data, m, pnl.ctypes.data,
            trades.ctypes.data)
    lb = _st.L()
    if reference:
        rc = lb.tf_sweep_with_reference(*args, ctypes.addressof(opts))
    elif r.kind == "python":  # callbacks into this interpreter: on this thread
        pg = _Progress()  # a callback that raises cancels the sweep through it
        opts.progress = ctypes.pointer(pg)
        r.spec.progress = ctypes.byref(pg)
        try:
            rc = lb.tf_sweep_with(*args, ctypes.addressof(opts))
        finally:
            r.spec.progress = None
    else:
        rc = _call(lb.tf_sweep_with, float(close.shape[0]) * float(m), progress, opts, *args)
    _st.after_run(r)
    if rc == _st.E_STRATEGY:
        raise KernelError(rc, "sweep", r.refusal(p))
    _check(rc, "sweep")
    return pnl, trades, rows


class Series:
    """A prepared series (``tf_series_*``): one immutable close series swept many times.

    Its sweeps cache the whole-series first-stage WMAs they compute (one ``8 * n_bars``-byte row
    per distinct length, up to ``cache_bytes``), so a later sweep on any block of combos skips
    the lengths already done. Results equal :func:`sweep` bit for bit. ``close``, ``column``
    and ``validate`` as :func:`sweep` takes them. The series keeps a reference to the array it
    sweeps (``close_array``: ``close`` itself when that is a C-contiguous float64 array, read in
    place) and must not see it change. Sweeps may run concurrently from several threads;
    :meth:`close` must not overlap one.
    """

    def __init__(self, close, cache_bytes: int = 1 << 30, *, column: str = "close",
                 validate: bool = True):
        self._h = None
        self.close_array = arr = close_series(close, column, validate)
        if cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0, got {cache_bytes}")
        h = ctypes.c_void_p()
        _check(lib().tf_series_open(ctypes.byref(h), arr.ctypes.data, arr.shape[0],
                                    int(cache_bytes)), "Series")
        self._h = h

    def sweep(self, params: np.ndarray, threads: int | None = None,
              isa: str = "auto", fee: float = FEE_DEFAULT) -> tuple[np.ndarray, np.ndarray]:
        """:func:`sweep` on this series with its first-stage cache: ``(pnl, trades)``."""
        pnl, trades, _ = self._sweep(params, threads, isa, fee, False)
        return pnl, trades

    def sweep_stats(self, params: np.ndarray, threads: int | None = None,
                    isa: str = "auto", fee: float = FEE_DEFAULT) -> dict:
        """:func:`sweep_stats` on this series with its first-stage cache."""
        _, _, rows = self._sweep(params, threads, isa, fee, True)
        return {n: np.ascontiguousarray(rows[n]) for n in STAT_NAMES}

    def _sweep(self, params, threads, isa, fee, with_stats):
        params = as_params(params)
        if self._h is None:
            raise ValueError("Series: closed")
        m = params.shape[0]
        pnl = np.empty(m, dtype=np.float64)
        trades = np.empty(m, dtype=np.int64)
        rows = np.empty(m, dtype=STATS_DTYPE) if with_stats else None
        opts, _fee_alive = _opts(threads, isa, fee, rows)
        _check(lib().tf_series_sweep(self._h, params.ctypes.data, m, pnl.ctypes.data,
                                     trades.ctypes.data, ctypes.addressof(opts)), "Series.sweep")
        return pnl, trades, rows

    @property
    def cached_bytes(self) -> int:
        """Bytes of first-stage rows cached so far."""
        return int(lib().tf_series_cached_bytes(self._h)) if self._h is not None else 0

    def close(self) -> None:
        if getattr(self, "_h", None) is not None:
            lib().tf_series_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def isa_supported(name: str) -> bool:
    return bool(lib().tf_isa_supported(ISAS[name]))


def isa_best() -> str:
    return lib().tf_isa_name(lib().tf_isa_best()).decode()


class Strategy:
    """One combo, one bar at a time (the streaming kernel). Same bars -> same trades and pnl as
    :func:`sweep`. ``on_bar(close)`` returns the position after the bar: -1, 0 or +1; a close
    that is not a positive finite price raises ``ValueError`` (:class:`KernelError`, ``code``
    ``E_BAD_INPUT``) naming the bar, and leaves the strategy as it was (``validate=False``: every
    close goes to the kernel, NaN and inf included, as in the batch sweep).

    ``params`` are six integer window lengths, checked as :func:`sweep` checks a grid
    (``TypeError`` for floats, ``ValueError`` out of range). After :meth:`close`, every method
    raises ``ValueError``.

    ``strategy`` (as :func:`sweep` takes it): any other strategy streams through
    ``tf_strategy_open_with``, ``params`` then its k parameters (numbers in its order, or a
    dict by name), and gives the bits of its batch sweep. A strategy that can go flat returns 0
    after a bar where it is out of the market."""

    def __init__(self, params, fee: float = FEE_DEFAULT, *, validate: bool = True,
                 strategy=None):
        from tollfree import strategies as _st
        self._h = None
        r = _st.resolve(strategy)
        self.validate = bool(validate)
        fee = as_fee(fee)
        h = ctypes.c_void_p()
        if r.is_hma:
            p = as_combo(params)
            self.params = tuple(int(v) for v in p)
            _check(lib().tf_strategy_open(ctypes.byref(h), p.ctypes.data), "Strategy")
        else:
            p = r.combo(params, "a combo")
            self.params = tuple(float(v) for v in p[0])
            rc = _st.L().tf_strategy_open_with(ctypes.byref(h), r.ptr, p.ctypes.data)
            if r.kind == "python":
                r.spec.raise_error()
            if rc == _st.E_STRATEGY:
                raise KernelError(rc, "Strategy", r.refusal(p))
            _check(rc, "Strategy")
        self.strategy = r  # keeps the def (plugin, compiled functions) alive with the handle
        self._h = h
        _check(lib().tf_strategy_set_fee(h, fee), "Strategy")
        self.fee = fee
        self._step = lib().tf_strategy_step

    def _handle(self) -> ctypes.c_void_p:
        h = getattr(self, "_h", None)
        if h is None:
            raise ValueError("Strategy is closed")
        return h

    def on_bar(self, close: float) -> int:
        """Feeds one close (a real number); returns the position after it: -1, 0 or +1.

        A close that is not a positive finite price (0, negative, NaN, inf) is refused with a
        :class:`KernelError` (code ``TF_E_BAD_INPUT``) naming the bar, and the strategy is left as
        it was; with ``Strategy(..., validate=False)`` every close goes to the library's step,
        which follows the kernel's arithmetic for NaN and inf like the batch sweep."""
        if self.validate:
            try:
                ok = bool(0.0 < close <= _DBL_MAX)  # False for NaN as well
            except TypeError:  # not a number: the step's conversion below says so
                ok = True
            if not ok:
                self._handle()
                raise KernelError(E_BAD_INPUT, "Strategy.on_bar",
                                  f"bar {self.bars} (counting from 0): close {close!r} is not a "
                                  "positive finite price; the strategy is unchanged (skip the "
                                  "bar or fix the feed, or Strategy(..., validate=False))")
        try:
            pos = self._step(self._h, close)
        except ctypes.ArgumentError:
            # ctypes takes float and int only; other reals (numpy.float32, Fraction) convert.
            if isinstance(close, (str, bytes, bool)) or not hasattr(close, "__float__"):
                raise TypeError(f"Strategy.on_bar: close must be a real number, got "
                                f"{type(close).__name__}") from None
            pos = self._step(self._h, float(close))
        if self.strategy.kind == "python":
            self.strategy.spec.raise_error()
        if pos < -1:  # a closed handle (NULL)
            self._handle()
            _check(pos, "Strategy.on_bar")
        return pos

    def reset(self) -> None:
        lib().tf_strategy_reset(self._handle())

    @property
    def pnl(self) -> float:
        return lib().tf_strategy_pnl(self._handle())

    @property
    def trades(self) -> int:
        return lib().tf_strategy_trades(self._handle())

    def stats(self) -> dict:
        """Every output so far (the names of :func:`sweep_stats`), as the batch sweep gives them
        for the bars seen."""
        row = _Stats()
        _check(lib().tf_strategy_stats(self._handle(), ctypes.byref(row)), "Strategy.stats")
        return {n: getattr(row, n) for n in STAT_NAMES}

    @property
    def bars(self) -> int:
        return lib().tf_strategy_bars(self._handle())

    def close(self) -> None:
        if getattr(self, "_h", None):
            lib().tf_strategy_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except TypeError:  # interpreter shutdown: the library's module state is gone already
            pass
