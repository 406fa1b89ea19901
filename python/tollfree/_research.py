"""ctypes over include/tollfree/research.h: the derived figures, the result columns and their
ranking, the fee check, the grid check and the out-of-sample folds, computed once in
libtollfree for the ``tollfree`` program and this package alike. Private: tollfree.stats and
tollfree.research are the public side."""
from __future__ import annotations

import ctypes

import numpy as np

from tollfree._lib import lib, strerror

_MSG = 1024

DERIVED = ("win_rate", "profit_factor", "sharpe_per_trade", "avg_trade")
DERIVED_DTYPE = np.dtype([(n, np.float64) for n in DERIVED])  # tf_derived

COLUMN_WINDOW, COLUMN_INT, COLUMN_STATS, COLUMN_TIME = 1, 2, 4, 8  # TF_COLUMN_*
OOS_MAX_FOLDS = 1000  # TF_OOS_MAX_FOLDS


class Results(ctypes.Structure):  # tf_results
    _fields_ = [("params", ctypes.c_void_p), ("pnl", ctypes.c_void_p),
                ("trades", ctypes.c_void_p), ("stats", ctypes.c_void_p), ("m", ctypes.c_int64),
                ("dparams", ctypes.c_void_p), ("n_params", ctypes.c_uint32),
                ("param_names", ctypes.POINTER(ctypes.c_char_p)),
                ("time", ctypes.c_void_p)]  # tf_time_stats [m] or NULL


class Fold(ctypes.Structure):  # tf_fold
    _fields_ = [(n, ctypes.c_int64) for n in ("is_start", "is_end", "oos_start", "oos_end")]


class OosOpts(ctypes.Structure):  # tf_oos_opts
    _fields_ = [("size", ctypes.c_size_t), ("split", ctypes.c_double),
                ("walk_forward", ctypes.c_int), ("metric", ctypes.c_char_p),
                ("reference", ctypes.c_int), ("anchored", ctypes.c_int),
                ("warmup", ctypes.c_int64), ("min_trades", ctypes.c_int64)]


WARMUP_ALL = -1  # TF_OOS_WARMUP_ALL


class GridReport(ctypes.Structure):  # tf_grid_report
    _fields_ = [(n, ctypes.c_int64) for n in ("too_long", "first_too_long", "first_warmup",
                                              "duplicates", "first_duplicate", "duplicate_of")]


OOS_ROW_DTYPE = np.dtype([("is_start", "<i8"), ("is_end", "<i8"), ("oos_start", "<i8"),
                          ("oos_end", "<i8"), ("winner", "<i8"), ("is_value", "<f8"),
                          ("is_pnl", "<f8"), ("is_trades", "<i8"), ("oos_value", "<f8"),
                          ("oos_pnl", "<f8"), ("oos_trades", "<i8"), ("oos_rank", "<i8"),
                          ("oos_best_value", "<f8")])  # tf_oos_row
TRADE_DTYPE = np.dtype([("entry_bar", "<i8"), ("exit_bar", "<i8"), ("entry_price", "<f8"),
                        ("exit_price", "<f8"), ("ret", "<f8"), ("direction", "<i4"),
                        ("open", "<i4")])  # tf_trade

_declared = None


def L() -> ctypes.CDLL:
    """The library with this module's prototypes declared (once)."""
    global _declared
    if _declared is None:
        c, p, i64, sz = ctypes, ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
        lb = lib()
        lb.tf_stats_derive.argtypes = [p, i64, p]
        lb.tf_column_count.argtypes, lb.tf_column_count.restype = [], c.c_int
        lb.tf_column_name.argtypes, lb.tf_column_name.restype = [c.c_int], c.c_char_p
        lb.tf_column_flags.argtypes = [c.c_int]
        lb.tf_column_find.argtypes = [c.c_char_p, sz, c.POINTER(c.c_int), c.c_char_p, sz]
        lb.tf_column_values.argtypes = [c.POINTER(Results), c.c_int, c.c_int, p]
        lb.tf_rank.argtypes = [p, i64, p]
        lb.tf_fee_check.argtypes = [c.c_double, c.c_char_p, sz]
        lb.tf_fee_parse.argtypes = [c.c_char_p, c.POINTER(c.c_double), c.c_char_p, sz]
        lb.tf_grid_check.argtypes = [p, i64, i64, c.POINTER(GridReport), c.c_char_p, sz]
        lb.tf_folds.argtypes = [i64, c.POINTER(OosOpts), p, c.c_int, c.c_char_p, sz]
        lb.tf_oos_run.argtypes = [p, i64, p, i64, c.POINTER(OosOpts), p, c.c_int, c.c_char_p,
                                  sz, p]
        lb.tf_oos_verdict.argtypes = [p, c.c_int, i64, c.c_char_p, sz]
        lb.tf_trades_list.argtypes = [p, p, p, i64, c.c_double, p, i64, p, c.c_char_p, sz]
        lb.tf_trades_list.restype = i64
        lb.tf_oos_run_with.argtypes = [p, p, i64, p, i64, c.POINTER(OosOpts), p, c.c_int,
                                       c.c_char_p, sz, p]
        rp = c.POINTER(Results)
        lb.tf_results_column_count.argtypes = [rp]
        lb.tf_results_column_pnl.argtypes = [rp]
        lb.tf_results_column_name.argtypes = [rp, c.c_int]
        lb.tf_results_column_name.restype = c.c_char_p
        lb.tf_results_column_flags.argtypes = [rp, c.c_int]
        lb.tf_results_column_find.argtypes = [rp, c.c_char_p, sz, c.POINTER(c.c_int), c.c_char_p,
                                              sz]
        assert ctypes.sizeof(Results) == 72 and OOS_ROW_DTYPE.itemsize == 104
        assert TRADE_DTYPE.itemsize == 48
        _declared = lb
    return _declared


def _fail(rc: int, buf, what: str):
    text = buf.value.decode(errors="replace") if buf is not None and buf.value else ""
    return ValueError(text or f"{what}: {strerror(rc)} (code {rc})")


def column_names(with_time: bool = False) -> tuple[str, ...]:
    """The HMA table's column names in column order; the time-aware figures (TF_COLUMN_TIME,
    the last columns: a sweep's ranking, not a metric of the statistics) only ``with_time``."""
    lb = L()
    names = (lb.tf_column_name(k).decode() for k in range(lb.tf_column_count()))
    return tuple(n for k, n in enumerate(names)
                 if with_time or not lb.tf_column_flags(k) & COLUMN_TIME)


def column_flags(col: int) -> int:
    return L().tf_column_flags(col)


def column_find(spec: str, signed: bool = True) -> tuple[int, int]:
    """(column, sign) of ``name`` or, when ``signed``, ``-name``; ValueError with the library's
    "unknown column 'x'; columns: ..." otherwise."""
    if not isinstance(spec, str):
        raise TypeError(f"a column name must be a str, got {spec!r}")
    raw = spec.encode()
    sign = ctypes.c_int(1)
    buf = ctypes.create_string_buffer(_MSG)
    col = L().tf_column_find(raw, len(raw), ctypes.byref(sign) if signed else None, buf, _MSG)
    if col < 0:
        raise _fail(col, buf, "column")
    return col, sign.value


def results(params=None, pnl=None, trades=None, stats=None, m: int = 0, names=None, time=None):
    """A tf_results over the given arrays (kept alive by the caller); None: absent. With
    ``names`` (a strategy's parameter names), ``params`` is its float64 [m][k] grid and the
    table is the strategy's: its parameters, then pnl, trades, ... (research.h). ``time``: the
    time-aware figures, a contiguous ``stats.TIME_DTYPE`` array [m] (the TF_COLUMN_TIME
    columns)."""
    def ptr(a):
        return None if a is None else a.ctypes.data
    if names is None:
        return Results(ptr(params), ptr(pnl), ptr(trades), ptr(stats), m, None, 0, None,
                       ptr(time))
    raw = [n.encode() for n in names]
    arr = (ctypes.c_char_p * len(raw))(*raw)
    if params is None:  # the table alone (m = 0): dparams must still be set to select it
        params = np.zeros((1, len(raw)), dtype=np.float64)
    r = Results(None, ptr(pnl), ptr(trades), ptr(stats), m, ptr(params), len(raw),
                ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), ptr(time))
    r._keep = (arr, raw, params)
    return r


def table_find(res: Results, spec: str) -> tuple[int, int]:
    """(column, sign) of ``name`` or ``-name`` in res's table (tf_results_column_find)."""
    if not isinstance(spec, str):
        raise TypeError(f"a column name must be a str, got {spec!r}")
    raw = spec.encode()
    sign = ctypes.c_int(1)
    buf = ctypes.create_string_buffer(_MSG)
    col = L().tf_results_column_find(ctypes.byref(res), raw, len(raw), ctypes.byref(sign), buf,
                                     _MSG)
    if col < 0:
        raise _fail(col, buf, "column")
    return col, sign.value


def table_flags(res: Results, col: int) -> int:
    return L().tf_results_column_flags(ctypes.byref(res), col)


def table_names(res: Results) -> tuple[str, ...]:
    lb = L()
    n = lb.tf_results_column_count(ctypes.byref(res))
    return tuple(lb.tf_results_column_name(ctypes.byref(res), k).decode() for k in range(n))


def column_values(res: Results, col: int, sign: int = 1) -> np.ndarray:
    out = np.empty(res.m, dtype=np.float64)
    rc = L().tf_column_values(ctypes.byref(res), col, sign, out.ctypes.data)
    if rc:
        raise ValueError(f"column values: {strerror(rc)} (code {rc})")
    return out


def rank(values: np.ndarray) -> np.ndarray:
    """Indices best first: highest value first, NaN last, ties in order (tf_rank)."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    order = np.empty(v.shape[0], dtype=np.int64)
    rc = L().tf_rank(v.ctypes.data, v.shape[0], order.ctypes.data)
    if rc:
        raise MemoryError(f"rank: {strerror(rc)}") if rc == -1003 else ValueError(strerror(rc))
    return order


def fee_check(fee: float) -> str | None:
    """None when ``fee`` is a valid fee (tf_fee_check), else the library's reason."""
    buf = ctypes.create_string_buffer(_MSG)
    return buf.value.decode() if L().tf_fee_check(float(fee), buf, _MSG) else None


def fee_parse(text: str) -> float:
    """``text`` as a fee (tf_fee_parse); ValueError with the library's reason."""
    out = ctypes.c_double()
    buf = ctypes.create_string_buffer(_MSG)
    rc = L().tf_fee_parse(text.encode(errors="surrogateescape"), ctypes.byref(out), buf, _MSG)
    if rc:
        raise _fail(rc, buf, "fee")
    return out.value


def grid_check(params: np.ndarray, n_bars: int) -> str | None:
    """The grid's notes against ``n_bars`` bars (tf_grid_check), or None when it has none."""
    p = np.ascontiguousarray(params, dtype=np.int64)
    buf = ctypes.create_string_buffer(_MSG)
    rc = L().tf_grid_check(p.ctypes.data, p.shape[0], int(n_bars), None, buf, _MSG)
    if rc < 0:
        raise _fail(rc, buf, "grid")
    return buf.value.decode() if rc > 0 else None


def warmup_value(warmup) -> int:
    """tf_oos_opts.warmup of ``warmup=``: 0 (cold), a number of bars N > 0, or "all"."""
    if isinstance(warmup, str) and warmup == "all":
        return WARMUP_ALL
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise ValueError(f"warmup wants a number of bars N >= 0 (0: cold) or 'all', "
                         f"got {warmup!r}")
    return int(warmup)


def oos_opts(split, walk_forward, metric: str = "pnl", reference: bool = False,
             anchored: bool = False, warmup=0, min_trades: int = 0) -> OosOpts:
    """tf_oos_opts; the metric's bytes live in the returned struct's _keep."""
    if (split is None) == (walk_forward is None):
        raise ValueError("give exactly one of split= and walk_forward=")
    if split is not None and not isinstance(split, (int, float, np.integer, np.floating)):
        raise TypeError(f"split must be a number 0 < F < 1, got {split!r}")
    if split is not None and not 0 < float(split) < 1:  # 0 would read as "not given"
        raise ValueError(f"split wants a fraction 0 < F < 1, got {split}")
    if walk_forward is not None:
        if isinstance(walk_forward, bool) or not isinstance(walk_forward, (int, np.integer)):
            raise TypeError(f"walk_forward must be an integer 1..{OOS_MAX_FOLDS}, "
                            f"got {walk_forward!r}")
        if not 1 <= walk_forward <= OOS_MAX_FOLDS:
            raise ValueError(f"walk_forward wants 1..{OOS_MAX_FOLDS} folds, got {walk_forward}")
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a str, got {metric!r}")
    if isinstance(min_trades, bool) or not isinstance(min_trades, (int, np.integer)) \
            or min_trades < 0:
        raise ValueError(f"min_trades wants a number of trades N >= 0, got {min_trades!r}")
    m = metric.encode()
    o = OosOpts(ctypes.sizeof(OosOpts), 0.0 if split is None else float(split),
                0 if walk_forward is None else int(walk_forward), m, int(bool(reference)),
                int(bool(anchored)), warmup_value(warmup), int(min_trades))
    o._keep = m
    return o


def folds(n_bars: int, opts: OosOpts) -> list[tuple[int, int, int, int]]:
    out = (Fold * OOS_MAX_FOLDS)()
    buf = ctypes.create_string_buffer(_MSG)
    rc = L().tf_folds(int(n_bars), ctypes.byref(opts), out, OOS_MAX_FOLDS, buf, _MSG)
    if rc < 0:
        raise _fail(rc, buf, "folds")
    return [(f.is_start, f.is_end, f.oos_start, f.oos_end) for f in out[:rc]]


def verdict(rows: np.ndarray, m: int) -> str:
    r = np.ascontiguousarray(rows, dtype=OOS_ROW_DTYPE)
    buf = ctypes.create_string_buffer(_MSG)
    rc = L().tf_oos_verdict(r.ctypes.data, r.shape[0], int(m), buf, _MSG)
    if rc:
        raise ValueError(f"verdict: {strerror(rc)} (code {rc})")
    return buf.value.decode()


def trades_list(def_ptr: int, params: np.ndarray, close: np.ndarray, fee: float, stats_dtype):
    """(rows, stats) of ``tf_trades_list``: the TRADE_DTYPE rows and the combo's tf_stats (one
    row of stats_dtype, binding.STATS_DTYPE)."""
    n = close.shape[0]
    buf = ctypes.create_string_buffer(_MSG)
    st = np.zeros(1, dtype=stats_dtype)
    rc = L().tf_trades_list(def_ptr, params.ctypes.data, close.ctypes.data, n, float(fee), None,
                            0, None, buf, _MSG)
    if rc < 0:
        raise _fail(int(rc), buf, "trades")
    rows = np.zeros(rc, dtype=TRADE_DTYPE)
    rc2 = L().tf_trades_list(def_ptr, params.ctypes.data, close.ctypes.data, n, float(fee),
                             rows.ctypes.data if rc else None, rc, st.ctypes.data, buf, _MSG)
    if rc2 != rc:
        raise _fail(int(rc2) if rc2 < 0 else -1, buf, "trades")
    return rows, st[0]
