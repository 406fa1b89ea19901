"""In-process calls into libtollfree: the batch sweep and the streaming strategy."""
from __future__ import annotations

import ctypes

import numpy as np

from tollfree._lib import lib, strerror

ISAS = {"auto": 0, "scalar": 1, "sse2": 2, "avx2": 3, "avx512": 4}
MAX_WINDOW = 1 << 31


class KernelError(ValueError):
    """A libtollfree error code, with its tf_strerror text."""

    def __init__(self, code: int, what: str = "tollfree"):
        self.code = code
        super().__init__(f"{what}: {strerror(code)} (code {code})")


class _Opts(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("isa", ctypes.c_int), ("max_bytes", ctypes.c_size_t)]


def as_close(close) -> np.ndarray:
    """Checks a close series: a 1-D float64 C-contiguous array (no copy is ever made here)."""
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


def _check(rc: int, what: str) -> None:
    if rc < 0:
        raise KernelError(rc, what)


def sweep(close: np.ndarray, params: np.ndarray, threads: int | None = None,
          isa: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Runs the sweep in-process: ``(pnl float64[m], trades int64[m])``.

    Zero-copy on C-contiguous float64 ``close`` (n,) and int64 ``params`` (m, 6); the GIL is
    released during the call. ``threads=None`` or 0 uses every core; ``isa`` forces a SIMD path
    (``auto``, ``scalar``, ``sse2``, ``avx2``, ``avx512``) or ``reference`` for the literal spec.
    """
    close, params = as_close(close), as_params(params)
    m = params.shape[0]
    pnl = np.empty(m, dtype=np.float64)
    trades = np.empty(m, dtype=np.int64)
    if isa == "reference":
        rc = lib().tf_sweep_reference(close.ctypes.data, close.shape[0], params.ctypes.data, m,
                                      pnl.ctypes.data, trades.ctypes.data)
    else:
        if isa not in ISAS:
            raise ValueError(f"isa must be one of {sorted(ISAS) + ['reference']}, got {isa!r}")
        t = 0 if threads is None else int(threads)
        if t < 0:
            raise ValueError(f"threads must be >= 0, got {t}")
        opts = _Opts(t, ISAS[isa], 0)
        rc = lib().tf_sweep(close.ctypes.data, close.shape[0], params.ctypes.data, m,
                            pnl.ctypes.data, trades.ctypes.data, ctypes.addressof(opts))
    _check(rc, "sweep")
    return pnl, trades


class Series:
    """A prepared series (``tf_series_*``): one immutable close series swept many times.

    Its sweeps cache the whole-series first-stage WMAs they compute (one ``8 * n_bars``-byte row
    per distinct length, up to ``cache_bytes``), so a later sweep on any block of combos skips
    the lengths already done. Results equal :func:`sweep` bit for bit. The series keeps a
    reference to ``close`` (the kernel reads it in place) and must not see it change. Sweeps may
    run concurrently from several threads; :meth:`close` must not overlap one.
    """

    def __init__(self, close: np.ndarray, cache_bytes: int = 1 << 30):
        self.close_array = as_close(close)
        if cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0, got {cache_bytes}")
        h = ctypes.c_void_p()
        _check(lib().tf_series_open(ctypes.byref(h), close.ctypes.data, close.shape[0],
                                    int(cache_bytes)), "Series")
        self._h = h

    def sweep(self, params: np.ndarray, threads: int | None = None,
              isa: str = "auto") -> tuple[np.ndarray, np.ndarray]:
        """:func:`sweep` on this series with its first-stage cache: ``(pnl, trades)``."""
        params = as_params(params)
        if self._h is None:
            raise ValueError("Series: closed")
        if isa not in ISAS:
            raise ValueError(f"isa must be one of {sorted(ISAS)}, got {isa!r}")
        t = 0 if threads is None else int(threads)
        if t < 0:
            raise ValueError(f"threads must be >= 0, got {t}")
        m = params.shape[0]
        pnl = np.empty(m, dtype=np.float64)
        trades = np.empty(m, dtype=np.int64)
        opts = _Opts(t, ISAS[isa], 0)
        _check(lib().tf_series_sweep(self._h, params.ctypes.data, m, pnl.ctypes.data,
                                     trades.ctypes.data, ctypes.addressof(opts)), "Series.sweep")
        return pnl, trades

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
    :func:`sweep`. ``on_bar(close)`` returns the position after the bar: -1, 0 or +1."""

    def __init__(self, params):
        p = np.ascontiguousarray(np.asarray(params, dtype=np.int64).reshape(-1))
        if p.shape != (6,):
            raise ValueError(f"a combo is six window lengths, got {p.shape[0]}")
        as_params(p.reshape(1, 6))
        self.params = tuple(int(v) for v in p)
        h = ctypes.c_void_p()
        _check(lib().tf_strategy_open(ctypes.byref(h), p.ctypes.data), "Strategy")
        self._h = h
        self._step = lib().tf_strategy_step

    def on_bar(self, close: float) -> int:
        return self._step(self._h, close)

    def reset(self) -> None:
        lib().tf_strategy_reset(self._h)

    @property
    def pnl(self) -> float:
        return lib().tf_strategy_pnl(self._h)

    @property
    def trades(self) -> int:
        return lib().tf_strategy_trades(self._h)

    @property
    def bars(self) -> int:
        return lib().tf_strategy_bars(self._h)

    def close(self) -> None:
        if getattr(self, "_h", None):
            lib().tf_strategy_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
