"""In-process prepared series (``tf_series_*`` of include/tollfree/kernel.h), for the benchmark's
"same work in-process" rows.

The server keeps, per loaded dataset, the first-stage WMAs it has computed (a ``tf_series``), so
SWEEP_DS and RUN_ONE on a loaded dataset skip work that a plain ``tf_sweep`` redoes. Comparing
them with ``tollfree.sweep`` would credit the cache to the boundary; the fair in-process
counterpart is ``tf_series_sweep`` on a warm series. The Python binding does not expose it, so
this module declares it on its own ctypes handle of libtollfree (the binding is left alone).
"""
from __future__ import annotations

import ctypes

import numpy as np

from tollfree.bench import harness as H

DEFAULT_CACHE = 256 << 20  # the server's default per-dataset first-stage cache (src/server)


class _Opts(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("isa", ctypes.c_int)]


_L = None


def _lib():
    global _L
    if _L is None:
        from tollfree import _lib as L0
        lib = ctypes.CDLL(L0.lib_path())
        try:
            p, i64 = ctypes.c_void_p, ctypes.c_int64
            lib.tf_series_open.argtypes = [ctypes.POINTER(p), p, i64, ctypes.c_size_t]
            lib.tf_series_sweep.argtypes = [p, p, i64, p, p, p]
            lib.tf_series_close.argtypes, lib.tf_series_close.restype = [p], None
        except AttributeError as e:
            raise H.Unavailable(f"libtollfree has no tf_series API ({e})") from None
        _L = lib
    return _L


class PreparedSeries:
    """A warm ``tf_series`` over ``close`` (kept alive by this object)."""

    def __init__(self, close: np.ndarray, cache_bytes: int = DEFAULT_CACHE):
        self.close = np.ascontiguousarray(close, dtype=np.float64)
        lib = _lib()
        h = ctypes.c_void_p()
        rc = lib.tf_series_open(ctypes.byref(h), self.close.ctypes.data, self.close.shape[0],
                                cache_bytes)
        if rc < 0:
            raise RuntimeError(f"tf_series_open: {rc}")
        self._h = h

    def sweep(self, params: np.ndarray, threads: int = 0):
        params = np.ascontiguousarray(params, dtype=np.int64)
        m = params.shape[0]
        pnl, trades = np.empty(m), np.empty(m, dtype=np.int64)
        opts = _Opts(threads, 0)
        rc = _lib().tf_series_sweep(self._h, params.ctypes.data, m, pnl.ctypes.data,
                                    trades.ctypes.data, ctypes.addressof(opts))
        if rc < 0:
            raise RuntimeError(f"tf_series_sweep: {rc}")
        return pnl, trades

    def close_series(self) -> None:
        if getattr(self, "_h", None):
            _lib().tf_series_close(self._h)
            self._h = None

    def __del__(self):
        self.close_series()
