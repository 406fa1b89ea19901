"""Locating and loading libtollfree.so (ctypes). ctypes releases the GIL around every call."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]


def lib_path() -> str:
    """``$TOLLFREE_LIB``, else the library inside the package (``pip install .`` puts it
    there), else the repository's ``build/libtollfree.so``."""
    env = os.environ.get("TOLLFREE_LIB")
    if env:
        return env
    packaged = Path(__file__).resolve().parent / "libtollfree.so"
    return str(packaged) if packaged.exists() else str(_ROOT / "build" / "libtollfree.so")


def bin_path() -> str:
    """``$TOLLFREE_BIN``, else the program inside the package (``pip install .`` puts it in
    ``tollfree/bin/``), else the repository's ``build/tollfree``, else a ``tollfree`` program on
    PATH (``make install``); pip's ``tollfree`` console script (a Python script, not the
    program) is passed over there. The path returned may not exist."""
    env = os.environ.get("TOLLFREE_BIN")
    if env:
        return env
    packaged = Path(__file__).resolve().parent / "bin" / "tollfree"
    if packaged.exists():
        return str(packaged)
    built = _ROOT / "build" / "tollfree"
    if built.exists():
        return str(built)
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        cand = Path(d or ".") / "tollfree"
        try:
            with open(cand, "rb") as f:
                if f.read(4) == b"\x7fELF" and os.access(cand, os.X_OK):
                    return str(cand)
        except OSError:
            continue
    return str(built)


_lib = None


def lib() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        path = lib_path()
        if not os.path.exists(path):
            raise ImportError(f"libtollfree not found at {path}: run 'make' first (or set TOLLFREE_LIB)")
        _lib = ctypes.CDLL(path)
        _declare(_lib)
    return _lib


def strerror(code: int) -> str:
    return lib().tf_strerror(code).decode()


def _declare(L: ctypes.CDLL) -> None:
    c = ctypes
    p, i64 = c.c_void_p, c.c_int64
    L.tf_strerror.argtypes, L.tf_strerror.restype = [c.c_int], c.c_char_p
    L.tf_sweep.argtypes = [p, i64, p, i64, p, p, p]
    L.tf_sweep_reference.argtypes = [p, i64, p, i64, p, p, p]
    L.tf_progress_read.argtypes, L.tf_progress_read.restype = [p, p, p], None
    L.tf_progress_cancel.argtypes, L.tf_progress_cancel.restype = [p], None
    L.tf_strategy_set_fee.argtypes = [p, c.c_double]
    L.tf_strategy_stats.argtypes = [p, p]
    L.tf_params_check.argtypes = [p, i64]
    L.tf_isa_supported.argtypes = [c.c_int]
    L.tf_isa_best.argtypes, L.tf_isa_best.restype = [], c.c_int
    L.tf_isa_name.argtypes, L.tf_isa_name.restype = [c.c_int], c.c_char_p
    L.tf_strategy_open.argtypes = [c.POINTER(p), p]
    L.tf_strategy_step.argtypes = [p, c.c_double]
    L.tf_strategy_reset.argtypes, L.tf_strategy_reset.restype = [p], None
    L.tf_strategy_pnl.argtypes, L.tf_strategy_pnl.restype = [p], c.c_double
    L.tf_strategy_trades.argtypes, L.tf_strategy_trades.restype = [p], i64
    L.tf_strategy_bars.argtypes, L.tf_strategy_bars.restype = [p], i64
    L.tf_strategy_close.argtypes, L.tf_strategy_close.restype = [p], None
    L.tf_series_open.argtypes = [c.POINTER(p), p, i64, c.c_size_t]
    L.tf_series_sweep.argtypes = [p, p, i64, p, p, p]
    L.tf_series_cached_bytes.argtypes, L.tf_series_cached_bytes.restype = [p], c.c_size_t
    L.tf_series_close.argtypes, L.tf_series_close.restype = [p], None
