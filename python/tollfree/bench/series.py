"""In-process prepared series (``tf_series_*`` of include/tollfree/kernel.h), for the benchmark's
"same work in-process" rows.

The server keeps, per loaded dataset, the first-stage WMAs it has computed (a ``tf_series``), so
SWEEP_DS and RUN_ONE on a loaded dataset skip work that a plain ``tf_sweep`` redoes. Comparing
them with ``tollfree.sweep`` would credit the cache to the boundary; the fair in-process
counterpart is ``tf_series_sweep`` on a warm series. The options struct is the binding's one
mirror of ``tf_sweep_opts`` (python/tests/test_layout.py checks it against the C layout).
"""
from __future__ import annotations

import ctypes

import numpy as np

from tollfree.binding import _Opts

DEFAULT_CACHE = 256 << 20  # the server's default per-dataset first-stage cache (src/server)


def _lib():
    """libtollfree with the binding's declarations of the tf_series_* calls (tollfree._lib)."""
    from tollfree._lib import lib
    return lib()


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
        opts = _Opts(threads=threads)
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
