"""Panel sweeps: one parameter grid over many instruments, in-process (the building block of
:mod:`tollfree.distributed`), and the ``tollfree sweep --panel/--scheduler`` command line.

A panel is a ``dict`` of name -> float64 close array (lengths may differ), a 2-D array of closes
with one column per instrument plus ``names``, or a ``pandas.DataFrame`` of closes (one column per
instrument). In the last two, NaN padding at a column's start and end is dropped (columns of
different lengths in one frame). Every price left must be a positive finite number (the library's
``tf_prices_check``, the rule ``--input`` applies): a NaN inside a column (a gap, e.g. weekend rows
after a resample), an inf, a zero or a negative price is refused with :class:`BadInput` naming
the instrument and the row (index label and position; a file's line and column), unless
``fill="forward"`` is asked for, which gives each gap the last price before it and records the
number of bars filled per instrument (``df.attrs["tollfree"]["filled"]``). ``validate=False``
sweeps the series exactly as given (NaN and inf then flow through the kernel as docs/kernel.md
says).

The result is a ``pandas.DataFrame`` with one row per (instrument, combo), instruments in panel
order and combos in grid order: ``instrument`` (str), ``L half sq p p3 p2`` (int64), ``pnl``
(float64, percent points) and ``trades`` (int64) (:data:`COLUMNS`). Every row equals
``tollfree.sweep(close, params, fee=fee)`` on that instrument's series bit for bit. With
``stats=True`` the columns are :data:`STATS_COLUMNS`: after the windows, every output of
``tollfree.sweep_stats`` (``binding.STAT_NAMES``: pnl, trades, wins, gross_win, gross_loss, best,
worst, mean, m2, max_dd, exposure_bars) and the derived ``win_rate, profit_factor,
sharpe_per_trade, avg_trade`` (:func:`tollfree.stats.derived`), each row equal to
``tollfree.sweep_stats(close, params, fee=fee)`` and its derived figures bit for bit. pandas is
imported on first use, so ``import tollfree`` does not need it.
"""
from __future__ import annotations

import argparse
import ctypes
import math
import os
import sys
import time

import numpy as np

from tollfree import _research, binding
from tollfree._lib import lib
from tollfree.data import BadInput
from tollfree.grid import PARAM_NAMES, combo
from tollfree.stats import DERIVED, derived

COLUMNS = ("instrument",) + PARAM_NAMES + ("pnl", "trades")
STATS_COLUMNS = ("instrument",) + PARAM_NAMES + binding.STAT_NAMES + DERIVED
# The plain `tollfree sweep` table's columns (src/cli/sweep_table.c), in its order; the panel's
# CSV puts ``instrument`` before them.
TABLE_COLUMNS = PARAM_NAMES + binding.STAT_NAMES + DERIVED
BASIC_COLUMNS = PARAM_NAMES + ("pnl", "trades")
INT_COLUMNS = frozenset(PARAM_NAMES + ("trades", "wins", "exposure_bars"))
MAX_TABLE_COLUMNS = 32  # TF_CLI_MAX_COLUMNS
RAW_SUFFIXES = (".f64", ".bin", ".raw")


FILLS = ("forward",)  # what ``fill=`` / ``--fill`` take (None: refuse gaps)
TF_E_BAD_INPUT = -1006  # include/tollfree/error.h


def _raw_kw(fn) -> dict:
    """``{"validate": False}`` when the binding's ``fn`` checks its input itself: the panel has
    checked (or was told not to check) already, and the raw path adds no pass over the data."""
    import inspect

    try:
        return {"validate": False} if "validate" in inspect.signature(fn).parameters else {}
    except (TypeError, ValueError):
        return {}


class Panel(dict):
    """A ``dict`` name -> close array (what :func:`load_panel` returns) that also carries
    ``filled``: name -> number of bars filled forward (only instruments with a gap filled)."""

    def __init__(self, *args, filled=None, **kw):
        super().__init__(*args, **kw)
        self.filled = dict(filled or {})
        self.notes: list = []
        self._where: dict = {}


def _prices_check(a: np.ndarray) -> int | None:
    """The library's rule (tf_prices_check, include/tollfree/prices.h): None when every value
    of the C-contiguous float64 ``a`` is a positive finite number, else the first bad index."""
    L = lib()
    f = L.tf_prices_check
    if f.restype is not ctypes.c_int or not f.argtypes:
        f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
        f.restype = ctypes.c_int
    bad = ctypes.c_int64(-1)
    rc = f(a.ctypes.data if a.size else None, a.size, ctypes.byref(bad))
    if rc == 0:
        return None
    if rc != TF_E_BAD_INPUT:
        raise binding.KernelError(rc, "tf_prices_check")
    return int(bad.value)


def _label(x) -> str:
    """An index label as a person reads it: a date alone when the time is midnight."""
    if type(x).__name__ == "Timestamp" and x.tz is None and x == x.normalize():
        return x.date().isoformat()
    return str(x)


class _Where:
    """Says where position ``k`` of an instrument's series came from, for messages: a DataFrame's
    index label and position, an array's row, a dict's bar, or a file's line and column."""

    def __init__(self, kind: str, name: str, offset: int = 0, index=None, path=None,
                 column_no=None, lines=None):
        self.kind, self.name, self.offset, self.index = kind, name, offset, index
        self.path, self.column_no, self.lines = path, column_no, lines

    def __call__(self, k: int) -> str:
        pos = self.offset + k
        if self.kind == "frame":
            return (f"panel: instrument {self.name!r}, row at index label "
                    f"{_label(self.index[pos])} (position {pos})")
        if self.kind == "array":
            return f"panel: instrument {self.name!r}, row {pos}"
        if self.kind == "wide":
            line, cell = self.lines(pos, self.column_no)
            where = f"{self.path}:{line}" if line else f"{self.path}: data row {pos + 1}"
            return f"{where}: column {self.column_no} {self.name!r}: cell {cell!r}"
        if self.kind == "raw":
            return f"{self.path}: bar {pos} (byte {8 * pos}), instrument {self.name!r}"
        return f"panel: instrument {self.name!r}, bar {pos}"

    def lines_of(self, ks) -> str:
        """The first few positions as lines (a file) or rows, for a note."""
        shown = list(ks[:5])
        if self.kind == "wide":
            got = [self.lines(self.offset + k, self.column_no)[0] for k in shown]
            txt = "lines " + ", ".join(str(x) if x else f"row {self.offset + k + 1}"
                                       for x, k in zip(got, shown))
        elif self.kind == "frame":
            txt = "index labels " + ", ".join(_label(self.index[self.offset + k]) for k in shown)
        else:
            txt = "rows " + ", ".join(str(self.offset + k) for k in shown)
        return txt + (", ..." if len(ks) > len(shown) else "")


def _strip_padding(col: np.ndarray) -> np.ndarray:
    """The column without its leading and trailing NaN (inner NaN kept), C-contiguous float64."""
    return _strip(col)[1]


def _strip(col) -> tuple[int, np.ndarray]:
    """``(first kept position, the column without its leading and trailing NaN)``."""
    col = np.asarray(col, dtype=np.float64)
    ok = np.flatnonzero(~np.isnan(col))
    if ok.size == 0:
        return 0, np.empty(0, dtype=np.float64)
    return int(ok[0]), np.ascontiguousarray(col[ok[0]:ok[-1] + 1])


def _fill_hint(cli: bool) -> str:
    return "--fill forward" if cli else 'fill="forward"'


def _checked(a: np.ndarray, where: _Where, fill, cli: bool) -> tuple[np.ndarray, np.ndarray]:
    """``a`` checked by the library's rule, its gaps filled forward when ``fill`` says so:
    ``(series, positions filled)``. Raises BadInput naming the instrument and row."""
    bad = _prices_check(a)
    if bad is None:
        return a, np.empty(0, dtype=np.int64)
    gaps = np.flatnonzero(np.isnan(a))
    if fill == "forward" and np.isnan(a[bad]) and gaps[0] > 0:
        idx = np.where(np.isnan(a), 0, np.arange(a.size))
        np.maximum.accumulate(idx, out=idx)
        filled = np.ascontiguousarray(a[idx])
        bad = _prices_check(filled)
        if bad is None:
            return filled, gaps
    x = float(a[bad])
    if x != x and bad == 0:
        raise BadInput(f"{where(bad)}: no price at the start of the series, so there is no "
                       "price before it to carry forward (drop the leading NaNs, or give the "
                       "instrument as a DataFrame column, where leading NaNs are padding)")
    if x != x:
        raise BadInput(f"{where(bad)}: a gap, no price inside the instrument's series (an empty "
                       f"or NaN cell between its first and last price, e.g. a weekend after a "
                       f"resample; {gaps.size} such row{'s' if gaps.size != 1 else ''} in it): "
                       "the sweep would see no bar there. Drop those rows or fill them yourself, "
                       f"or pass {_fill_hint(cli)} to give each gap the last price before it")
    raise BadInput(f"{where(bad)}: {x!r} is not a positive finite price (every close must be a "
                   "number > 0 and finite): fix or remove that row")


class PanelInput:
    """A panel normalized and checked: ``names``, ``series`` (C-contiguous float64 1-D arrays,
    panel order) and ``filled`` (name -> bars filled forward, instruments with a gap filled)."""

    def __init__(self, names, series, filled, notes):
        self.names, self.series, self.filled, self.notes = names, series, filled, notes


def _note(name: str, where: _Where, gaps: np.ndarray) -> str:
    return (f"instrument {name!r}: {gaps.size} bar{'s' if gaps.size != 1 else ''} filled forward "
            f"with the last price before {'them' if gaps.size != 1 else 'it'} "
            f"({where.lines_of(gaps)})")


def prepare_panel(panel, names=None, fill=None, validate: bool = True, *,
                  _cli: bool = False) -> PanelInput:
    """Normalizes and checks a panel (see the module docstring): ``fill`` None refuses a gap,
    ``"forward"`` fills it with the last price before it; ``validate=False`` takes the series
    as given (no check, no fill)."""
    if fill not in (None,) + FILLS:
        raise ValueError(f"fill must be None or 'forward', got {fill!r}")
    if fill is not None and not validate:
        raise ValueError("fill needs validate=True (the gaps are found by the check)")
    raw = _normalize(panel, names)
    out_n, out_s, filled, notes = [], [], {}, []
    pre = dict(getattr(panel, "filled", {}) or {}) if isinstance(panel, dict) else {}
    notes.extend(getattr(panel, "notes", []) if isinstance(panel, dict) else [])
    for name, (a, where) in raw:
        gaps = np.empty(0, dtype=np.int64)
        if validate:
            a, gaps = _checked(a, where, fill, _cli)
        out_n.append(name)
        out_s.append(a)
        n = int(gaps.size) + int(pre.get(name, 0))
        if n:
            filled[name] = n
        if gaps.size:
            notes.append(_note(name, where, gaps))
    return PanelInput(out_n, out_s, filled, notes)


def _normalize(panel, names) -> list:
    """``[(name, (series, where)), ...]`` in panel order, padding dropped (frames, arrays)."""
    if isinstance(panel, dict):
        if names is not None:
            raise ValueError("names is only for a 2-D array panel (a dict carries its names)")
        out = []
        wheres = getattr(panel, "_where", {}) or {}
        for k, v in panel.items():
            a = np.ascontiguousarray(np.asarray(v, dtype=np.float64))
            if a.ndim != 1:
                raise ValueError(f"panel[{k!r}]: a close series is 1-D, got shape {a.shape}")
            out.append((str(k), (a, wheres.get(str(k)) or _Where("dict", str(k)))))
        return out
    if type(panel).__name__ == "DataFrame" and hasattr(panel, "columns"):
        if names is not None:
            raise ValueError("names is only for a 2-D array panel (a DataFrame has columns)")
        cols = [str(c) for c in panel.columns]
        if len(set(cols)) != len(cols):
            raise ValueError("panel: duplicate instrument names in the DataFrame's columns")
        out = []
        for j, c in enumerate(panel.columns):
            off, a = _strip(panel.iloc[:, j].to_numpy(dtype=np.float64, na_value=np.nan))
            out.append((cols[j], (a, _Where("frame", cols[j], off, index=panel.index))))
        return out
    if isinstance(panel, np.ndarray):
        if panel.ndim != 2:
            raise ValueError(f"an array panel is 2-D (bars x instruments), got shape {panel.shape}")
        if names is None:
            names = [str(j) for j in range(panel.shape[1])]
        names = [str(n) for n in names]
        if len(names) != panel.shape[1]:
            raise ValueError(f"an array panel is bars x instruments: {panel.shape[1]} columns but "
                             f"{len(names)} names")
        if len(set(names)) != len(names):
            raise ValueError("panel: duplicate instrument names")
        a = np.asarray(panel, dtype=np.float64)
        out = []
        for j in range(a.shape[1]):
            off, s = _strip(a[:, j])
            out.append((names[j], (s, _Where("array", names[j], off))))
        return out
    raise TypeError("panel must be a dict of name -> close array, a pandas.DataFrame or a 2-D "
                    f"numpy array with names, got {type(panel).__name__}")


def as_panel(panel, names=None, fill=None, validate: bool = True
             ) -> tuple[list[str], list[np.ndarray]]:
    """Normalizes a panel to ``(names, series)``: C-contiguous float64 1-D arrays, panel order,
    checked as :func:`prepare_panel` says.

    ``panel``: dict name -> close array; a ``pandas.DataFrame`` (one column per instrument, NaN
    padding dropped); or a 2-D array (bars x instruments, NaN padding dropped) with ``names``.
    """
    p = prepare_panel(panel, names, fill, validate)
    return p.names, p.series


def _key_columns(names, params: np.ndarray, pnames=PARAM_NAMES) -> dict:
    k, m = len(names), params.shape[0]
    cols = {"instrument": np.repeat(np.array(names, dtype=object), m)}
    tiled = (np.tile(params, (k, 1)) if k
             else np.empty((0, len(pnames)), dtype=params.dtype))
    for j, n in enumerate(pnames):
        cols[n] = np.ascontiguousarray(tiled[:, j])
    return cols


def _cat(parts: list, dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def result_frame(names, params: np.ndarray, pnl: list, trades: list, pnames=PARAM_NAMES):
    """The result DataFrame from per-instrument ``pnl[i]``/``trades[i]`` arrays (grid order);
    ``pnames``: the parameter columns (a strategy's names; HMA's six by default)."""
    import pandas as pd

    cols = _key_columns(names, params, pnames)
    cols["pnl"] = _cat(pnl, np.float64)
    cols["trades"] = _cat(trades, np.int64)
    return pd.DataFrame(cols, columns=["instrument", *pnames, "pnl", "trades"])


def stats_frame(names, params: np.ndarray, rows: list, pnames=PARAM_NAMES):
    """The ``stats=True`` result DataFrame (:data:`STATS_COLUMNS`) from per-instrument
    statistics ``rows[i]`` (grid order): a :func:`tollfree.sweep_stats` dict or a
    ``binding.STATS_DTYPE`` array, anything indexed by the names of ``binding.STAT_NAMES``."""
    import pandas as pd

    cols = _key_columns(names, params, pnames)
    for n in binding.STAT_NAMES:
        dt = np.int64 if n in INT_COLUMNS else np.float64
        cols[n] = _cat([np.asarray(r[n], dtype=dt) for r in rows], dt)
    cols.update(derived(cols))  # elementwise: the same bits as per instrument
    return pd.DataFrame(cols, columns=["instrument", *pnames, *binding.STAT_NAMES, *DERIVED])


def as_fee(fee) -> float:
    """``fee`` checked (finite percent points per closed trade); None is the kernel's default
    (``binding.FEE_DEFAULT``, 0.09)."""
    return binding.FEE_DEFAULT if fee is None else binding.as_fee(fee)


def _attach(df, p: PanelInput):
    info = dict(df.attrs.get("tollfree", {}))
    info["filled"] = dict(p.filled)
    info["notes"] = list(p.notes)
    df.attrs["tollfree"] = info
    return df


def sweep_panel(panel, params: np.ndarray, threads: int | None = None, names=None,
                isa: str = "auto", fee: float | None = None, stats: bool = False,
                fill: str | None = None, validate: bool = True, *, strategy=None,
                time_stats: bool = False, periods_per_year=None):
    """Sweeps ``params`` (int64, n_combos x 6) over every instrument of ``panel``, in-process.

    One kernel call per instrument over the whole grid: the kernel computes each distinct
    first-stage WMA once per call, so once per series (never once per block of combos), in
    64 KiB time blocks and with no whole-series cache to fault in. ``threads`` is the kernel's
    thread count per call (None or 0: every core); results never depend on it. ``fee``: percent
    points per closed trade (None: the kernel's default, 0.09). ``stats``: also every statistic
    and the derived figures (:data:`STATS_COLUMNS`). ``fill``: None refuses a gap (a NaN inside
    a series) with :class:`BadInput` naming the instrument and row; ``"forward"`` gives each gap
    the last price before it. ``validate=False``: the series exactly as given, unchecked.
    Returns the DataFrame described in the module docstring; ``df.attrs["tollfree"]`` holds
    ``filled`` (instrument -> bars filled forward) and ``notes`` (one line per such
    instrument).

    ``strategy`` (as :func:`tollfree.sweep` takes it): that strategy's sweep, ``params`` its
    (n, k) float64 grid; the parameter columns are then its parameter names.

    ``time_stats=True`` (or ``periods_per_year=``): the time-aware figures of
    :func:`tollfree.stats.time_stats` (docs/definition.md section 10) appended per instrument
    and combo, booked by each instrument's one sweep (:func:`tollfree.stats.sweep_time`: the
    same bits as the figures alone; per-bar figures unless ``periods_per_year``: a panel
    carries no dates). ``isa="reference"`` then computes them by a second pass.
    """
    from tollfree.strategies import resolve

    want_time = time_stats or periods_per_year is not None
    if want_time and isa == "reference":
        df = sweep_panel(panel, params, threads, names, isa, fee, stats, fill, validate,
                         strategy=strategy)
        return _with_time(df, panel, params, threads, names, fee, fill, validate, strategy,
                          periods_per_year)

    r_st = resolve(strategy)
    if r_st.is_hma:
        params = binding.as_params(params) if strategy is None else binding.hma_params(params)
        pnames = PARAM_NAMES
    else:
        params, pnames = r_st.params(params), r_st.param_names
    fee = as_fee(fee)
    p = prepare_panel(panel, names, fill, validate)
    if want_time:  # one sweep per instrument: its statistics and its figures
        from tollfree.stats import TIME_FIGURES, sweep_time

        runs = [sweep_time(close, params, threads=threads, isa=isa, fee=fee,
                           periods_per_year=periods_per_year, validate=False,
                           strategy=None if r_st.is_hma else strategy)
                for close in p.series]
        if stats:
            df = stats_frame(p.names, params, [st for st, _ in runs], pnames)
        else:
            df = result_frame(p.names, params, [st["pnl"] for st, _ in runs],
                              [st["trades"] for st, _ in runs], pnames)
        for k in TIME_FIGURES:
            df[k] = _cat([ts[k] for _, ts in runs], np.float64)
        return _attach(df, p)
    if stats:
        kw = _raw_kw(binding.sweep_stats)
        rows = [binding.sweep_stats(close, params, threads=threads, isa=isa, fee=fee,
                                    strategy=r_st, **kw)
                for close in p.series]
        return _attach(stats_frame(p.names, params, rows, pnames), p)
    pnl, trades = [], []
    kw = _raw_kw(binding.sweep)
    for close in p.series:
        r = binding.sweep(close, params, threads=threads, isa=isa, fee=fee, strategy=r_st, **kw)
        pnl.append(r[0])
        trades.append(r[1])
    return _attach(result_frame(p.names, params, pnl, trades, pnames), p)


def _with_time(df, panel, params, threads, names, fee, fill, validate, strategy, ppy):
    """df with the time-aware figures of each instrument's combos appended (grid order)."""
    from tollfree.stats import TIME_FIGURES, time_stats

    p = prepare_panel(panel, names, fill, validate)
    parts = [time_stats(close, params, strategy=strategy, periods_per_year=ppy,
                        fee=as_fee(fee), threads=threads, validate=validate)
             for close in p.series]
    for k in TIME_FIGURES:
        df[k] = _cat([t[k] for t in parts], np.float64)
    return df


# ---- files ----

def _wide_newest_first(path: str, name: str) -> bool:
    """Checks a wide CSV's first column with the library's date rules (tollfree.data.read_prices:
    the same forms, the same order rule, the same messages naming the file and line) and says
    whether it runs newest first. The column is handed to the reader as a two-column CSV whose
    rows stand on the file's own line numbers (blank lines keep them there)."""
    import csv
    import io

    from tollfree.data import read_prices

    out = io.StringIO()
    out.write('"' + name.replace('"', '""') + '",close\n')
    at = 1
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        r = csv.reader(f)
        for k, rec in enumerate(r):
            if k == 0 or not rec or not any(x.strip() for x in rec):
                continue
            out.write("\n" * (r.line_num - 1 - at))
            out.write('"' + rec[0].replace('"', '""') + '",1\n')
            at = r.line_num
    buf = io.BytesIO(out.getvalue().encode())
    buf.name = path
    p = read_prices(buf, column="close", date_column="1", warn=lambda m: None)
    return bool(p.reversed)


def _wide_cells(path: str):
    """A lookup ``(data row, column number) -> (file line, cell text)`` for a wide CSV, read on
    first use (only a message needs it): rows as pandas counts them (blank lines skipped). The
    line is 0 when the file's rows cannot be matched to pandas' (then messages give the row)."""
    memo = []

    def look(pos: int, col_no: int):
        if not memo:
            import csv

            rows = []
            with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
                r = csv.reader(f)
                for rec in r:
                    if rec and any(x.strip() for x in rec):
                        rows.append((r.line_num, rec))
            memo.append(rows[1:])  # after the header
        rows = memo[0]
        if pos >= len(rows):
            return 0, ""
        line, rec = rows[pos]
        return line, rec[col_no - 1] if col_no - 1 < len(rec) else ""

    return look


def load_panel(path: str, column: str = "close", raw: bool = False, fill: str | None = None,
               validate: bool = True, *, _cli: bool = False) -> Panel:
    """Reads a panel: a directory with one file per instrument (CSV with a header holding
    ``column``, or raw little-endian f64 ``*.f64``/``*.bin``/``*.raw``; the instrument is the file
    name without its suffix; files in name order; hidden files and other suffixes ignored), or
    one wide CSV (a header of instrument names, one column each; a first column named date,
    time, timestamp, datetime or index, or unnamed, is dropped; NaN or empty cells pad columns
    of different lengths at their start and end). Every price is checked as
    :func:`prepare_panel` says (``fill``, ``validate``): a refusal names the file, line and
    column. Returns a :class:`Panel` (a dict name -> close array, with ``filled`` and
    ``notes``)."""
    from tollfree.data import load_close

    out = Panel()
    if os.path.isdir(path):
        for f in sorted(os.listdir(path)):
            full = os.path.join(path, f)
            stem, suf = os.path.splitext(f)
            if f.startswith(".") or not os.path.isfile(full):
                continue
            if raw or suf in RAW_SUFFIXES:
                out[stem] = np.fromfile(full, dtype="<f8").astype(np.float64)
                out._where[stem] = _Where("raw", stem, path=full)
            elif suf == ".csv":
                out[stem] = np.ascontiguousarray(load_close(full, column), dtype=np.float64)
                out._where[stem] = _Where("dict", stem)
        if not out:
            raise ValueError(f"{path}: no *.csv, *.f64, *.bin or *.raw files")
    else:
        import pandas as pd

        df = pd.read_csv(path, float_precision="round_trip")  # exact: the default parser is not
        first = int(bool(len(df.columns) and (
            str(df.columns[0]).strip().lower() in ("date", "time", "timestamp", "datetime",
                                                   "index")
            or str(df.columns[0]).startswith("Unnamed:"))))
        cells = _wide_cells(path)
        if first:
            # The first column's dates are checked by the library's reader, as `--input` checks
            # them: out of order is refused naming the line, newest first is reversed (a note).
            if _wide_newest_first(path, str(df.columns[0])):
                rows, look = len(df), cells
                df = df.iloc[::-1].reset_index(drop=True)
                cells = lambda pos, col: look(rows - 1 - pos, col)  # noqa: E731
                out.notes.append(f"{path}: the dates run newest first: the rows were reversed "
                                 "to oldest first")
            df = df.iloc[:, 1:]
        for c in df.columns:
            if not np.issubdtype(df[c].dtype, np.number):
                raise ValueError(f"{path}: column {c!r} is not numeric (a wide CSV has one close "
                                 "column per instrument)")
        if not len(df.columns):
            raise ValueError(f"{path}: no instrument columns")
        for j, (name, (a, w)) in enumerate(_normalize(df.astype(np.float64), None)):
            out[name] = a
            out._where[name] = _Where("wide", name, w.offset, path=path, column_no=j + 1 + first,
                                      lines=cells)
    p = prepare_panel(out, None, fill, validate, _cli=_cli)
    res = Panel(zip(p.names, p.series), filled=p.filled)
    res.notes = p.notes  # the reader's notes (out.notes) included
    res._where = out._where
    return res


def parse_grid(spec: str) -> np.ndarray:
    """``default``, ``LO:HI:N`` or a CSV file of ``L,half,sq,p,p3,p2`` rows, as the C CLI."""
    if spec == "default":
        spec = "6:200:80"
    parts = spec.split(":")
    if len(parts) == 3 and "/" not in spec and "." not in spec:
        try:
            lo, hi, n = (int(x) for x in parts)
        except ValueError:
            raise ValueError(f"--grid {spec}: LO:HI:N must be three integers") from None
        if lo < 1 or hi < lo or hi > binding.MAX_WINDOW or n < 1 or n > 10_000_000:
            raise ValueError(f"--grid {spec}: need 1 <= LO <= HI <= {binding.MAX_WINDOW} and "
                             "1 <= N <= 10000000")
        Ls = [lo if n == 1 else lo + j * (hi - lo) // (n - 1) for j in range(n)]
        return np.array([combo(L) for L in Ls], dtype=np.int64).reshape(n, 6)
    rows = []
    with open(spec) as f:
        for i, line in enumerate(f, 1):
            fields = [x.strip().strip('"') for x in line.strip().split(",")]
            if fields == [""]:
                continue
            try:
                if len(fields) != 6:
                    raise ValueError
                rows.append([int(x) for x in fields])
            except ValueError:
                if i == 1 and len(fields) == 6 and fields[0] == "L":
                    continue
                raise ValueError(f"{spec}:{i}: a grid row is six integers L,half,sq,p,p3,p2")
    if not rows:
        raise ValueError(f"{spec}: empty grid (no combos)")
    return binding.as_params(np.array(rows, dtype=np.int64).reshape(-1, 6))


def _g17(x: float) -> str:
    """C's ``%.17g`` (glibc spells NaN with its sign: ``nan`` / ``-nan``)."""
    if x != x:
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return "%.17g" % x


def _column_list() -> str:
    return ", ".join(TABLE_COLUMNS)


def _table(names) -> tuple[tuple, tuple]:
    """(all columns, basic columns) of HMA's table (names None) or a strategy's."""
    if names is None:
        return TABLE_COLUMNS, BASIC_COLUMNS
    names = tuple(names)
    return names + binding.STAT_NAMES + DERIVED, names + ("pnl", "trades")


def parse_columns(spec: str, names=None) -> tuple:
    """``--columns``: ``all``, ``basic`` (the windows, pnl, trades) or a comma-separated list of
    the plain sweep's column names (:data:`TABLE_COLUMNS`; ``instrument`` is always printed
    first, so naming it is allowed and changes nothing). Raises ValueError naming the unknown
    column and listing the known ones. ``names``: a strategy's parameter names (its table: the
    parameters in place of the windows)."""
    every, basic = _table(names)
    if spec == "all":
        return every
    if spec == "basic":
        return basic
    out = []
    for name in spec.split(","):
        if name == "instrument":
            continue
        try:  # the library's table of columns (tf_column_find), the one the plain sweep reads
            if names is None:
                _research.column_find(name, signed=False)
            else:
                col, sign = _research.table_find(_research.results(m=0, names=names), name)
                if sign < 0:
                    raise ValueError(f"unknown column '{name}'")
        except ValueError as e:
            raise ValueError(f"--columns: {e} (or all, basic)") from None
        out.append(name)
    if len(out) > MAX_TABLE_COLUMNS:
        raise ValueError(f"--columns: at most {MAX_TABLE_COLUMNS} columns")
    return tuple(out)


def parse_sort(spec: str, names=None) -> tuple[str, int]:
    """``--sort``: ``COLUMN`` (highest first) or ``-COLUMN`` (lowest first) -> (name, sign);
    ``names``: a strategy's parameter names (its table). A time-aware figure (``cagr``,
    ``sharpe``, ...) ranks a frame that has it (``time_stats=True``)."""
    try:
        if names is None:
            col, sign = _research.column_find(spec)
            return _research.column_names(with_time=True)[col], sign
        res = _research.results(m=0, names=names)
        col, sign = _research.table_find(res, spec)
        return _research.table_names(res)[col], sign
    except ValueError as e:
        raise ValueError(f"--sort: {e}") from None


def parse_fee(text: str) -> float:
    """``--fee``: what the plain sweep takes, by the same library call (``tf_fee_parse``: a
    whole C ``strtod`` number, finite, 0 <= fee < 100), else ValueError with the plain sweep's
    message."""
    try:
        return _research.fee_parse(text)
    except ValueError as e:
        raise ValueError(f"--fee {e}") from None


def needs_stats(columns, sort: str | None, names=None) -> bool:
    """Whether the columns (or the sort column) need the kernel's statistics (the time-aware
    figures come with their own sweep: :func:`needs_time`)."""
    from tollfree.stats import TIME_FIGURES

    cols = list(columns) + ([parse_sort(sort, names)[0]] if sort else [])
    return any(n not in _table(names)[1] and n not in TIME_FIGURES for n in cols)


def needs_time(sort: str | None, names=None) -> bool:
    """Whether the sort column is a time-aware figure (the sweep must then compute them)."""
    from tollfree.stats import TIME_FIGURES

    return sort is not None and parse_sort(sort, names)[0] in TIME_FIGURES


def rank(df, sort: str | None = None, top: int | None = None, names=None) -> np.ndarray:
    """Row numbers of ``df`` to print, instrument by instrument (panel order): per instrument,
    its combos in grid order, or ranked by ``sort`` (``COLUMN`` highest first, ``-COLUMN``
    lowest first; NaN last; ties in grid order) as the plain sweep ranks them, then at most
    ``top`` of them. ``top`` without ``sort`` ranks by pnl."""
    n = len(df)
    if sort is None and top is None:
        return np.arange(n)
    if sort is None:
        sort = "pnl"
    name, sign = parse_sort(sort, names)
    if name not in df.columns:
        from tollfree.stats import TIME_FIGURES

        how = "time_stats=True" if name in TIME_FIGURES else "stats=True"
        raise ValueError(f"sort: the frame has no column {name!r} (sweep with {how})")
    inst = df["instrument"].to_numpy()
    v = df[name].to_numpy().astype(np.float64)  # the C table compares every column as a double
    key = -v if sign < 0 else v
    bounds = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]]) if n else np.empty(0, np.int64)
    ends = list(bounds[1:]) + [n]
    keep = []
    for a, b in zip(bounds, ends):
        order = a + _research.rank(key[a:b])  # tf_rank: the plain sweep's ranking
        keep.append(order if top is None else order[:top])
    return np.concatenate(keep) if keep else np.empty(0, dtype=np.int64)


def _format(col: np.ndarray, is_int: bool) -> list:
    if is_int:
        return [str(x) for x in col.astype(np.int64).tolist()]
    return [_g17(x) for x in col.astype(np.float64).tolist()]


def _csv_field(name: str) -> str:
    """An instrument name as one CSV field (RFC 4180): quoted, with quotes doubled, when it
    holds a comma, a quote or a line break; else as it is."""
    if any(ch in name for ch in ',"\r\n'):
        return '"' + name.replace('"', '""') + '"'
    return name


def write_csv(df, f, top: int | None = None, columns=None, sort: str | None = None,
              names=None) -> int:
    """Writes ``instrument`` then ``columns`` (default: every table column the frame has, in the
    plain sweep's order: :data:`TABLE_COLUMNS` for a ``stats=True`` frame, else the windows,
    pnl, trades), one row per printed combo, formatted as ``tollfree sweep`` prints them:
    integers in decimal, reals with ``%.17g`` (exact; ``nan``/``-nan``, ``inf``/``-inf``);
    an instrument name with a comma, quote or line break is quoted as RFC 4180 says.
    Rows: :func:`rank` (``sort``; ``top`` per instrument, by pnl without ``sort``). Returns the
    number of rows written. ``names``: a strategy's parameter names (its table)."""
    if columns is None:
        columns = [c for c in _table(names)[0] if c in df.columns]
    columns = list(columns)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"columns: the frame has no column {missing[0]!r} (sweep with "
                         "stats=True)")
    idx = rank(df, sort, top, names)
    f.write(",".join(("instrument",) + tuple(columns)) + "\n")
    inst = df["instrument"].to_numpy()
    data = [df[c].to_numpy() for c in columns]
    step = 1 << 16
    for lo in range(0, len(idx), step):
        sel = idx[lo:lo + step]
        cells = [[_csv_field(str(x)) for x in inst[sel]]]
        cells += [_format(d[sel], c in INT_COLUMNS) for c, d in zip(columns, data)]
        f.write("".join(",".join(r) + "\n" for r in zip(*cells)))
    return len(idx)


# ---- the command line (exec'd by `tollfree sweep --panel ... / --scheduler ...`) ----

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tollfree sweep", add_help=True,
        description="The sweep over a panel of instruments, in-process or on a Dask cluster "
                    "(the C command runs this module when --panel or --scheduler is given). "
                    "Prints instrument, then the plain sweep's columns for each combo.")
    ap.add_argument("--panel", help="directory (one file per instrument) or one wide CSV")
    ap.add_argument("--input", help="one close series (CSV or raw f64), as the plain sweep")
    ap.add_argument("--column", default="close")
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--grid", default="default")
    ap.add_argument("--strategy", help="a built-in name or a plugin .so (default: hma); --grid "
                                       "is then name=LO:HI:STEP,...")
    ap.add_argument("--where", help="with --strategy: conditions on the grid (fast<slow)")
    ap.add_argument("--out")
    ap.add_argument("--columns", default="all",
                    help="all (default), basic (windows, pnl, trades) or a list of: "
                         + _column_list())
    ap.add_argument("--sort", help="rank each instrument's combos by COLUMN, highest first "
                                   "(-COLUMN: lowest first), NaN last")
    ap.add_argument("--top", type=int, help="the first K combos per instrument (by pnl without "
                                            "--sort)")
    ap.add_argument("--fee", help="fee per closed trade in percent points (default 0.09)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--isa", default="auto")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--fill", help="forward: give each gap inside a --panel column (an empty or "
                                   "NaN cell between its first and last price) the last price "
                                   "before it, and say how many bars per instrument (default: "
                                   "refuse a gap, naming the file, line and column)")
    ap.add_argument("--time-stats", action="store_true",
                    help="append the time-aware figures per instrument and combo (in process; "
                         "per bar unless --periods-per-year: a panel carries no dates)")
    ap.add_argument("--periods-per-year", type=float, default=None,
                    help="annualise the time-aware figures with N periods a year (implies "
                         "--time-stats)")
    ap.add_argument("--scheduler", help="tcp://HOST:PORT or local[:N]")
    ap.add_argument("--chunk", type=int, default=None, help="combos per Dask task (default: auto)")
    ap.add_argument("--connect-timeout", type=float, default=10.0)
    return ap


def _attach_values(argv: list) -> list:
    """``--opt VALUE`` as ``--opt=VALUE`` for every option that takes a value, so that a value
    starting with '-' (``--sort -max_dd``, ``--fee -1e-3``) is read as the C command's getopt
    reads it, not as another option."""
    valued = {f"--{x.dest.replace('_', '-')}" for x in _parser()._actions
              if x.option_strings and x.nargs is None and x.const is None}
    out, k = [], 0
    while k < len(argv):
        tok = argv[k]
        if tok == "--":
            out += argv[k:]
            break
        if tok in valued and k + 1 < len(argv):
            out.append(f"{tok}={argv[k + 1]}")
            k += 2
            continue
        out.append(tok)
        k += 1
    return out


def main(argv=None) -> int:
    ap = _parser()
    a = ap.parse_args(_attach_values(list(sys.argv[1:] if argv is None else argv)))
    err = sys.stderr
    try:
        if a.top is not None and a.top < 1:
            raise ValueError(f"--top wants a positive integer, got {a.top}")
        if a.threads is not None and not 0 <= a.threads <= 1024:
            raise ValueError(f"--threads wants 0..1024, got {a.threads}")
        if a.chunk is not None and a.chunk < 1:
            raise ValueError(f"--chunk wants a positive integer, got {a.chunk}")
        if a.panel and a.input:
            raise ValueError("--panel and --input are exclusive")
        if a.fill is not None and a.fill not in FILLS:
            raise ValueError(f"--fill wants forward, got '{a.fill}'")
        if a.fill is not None and not a.panel:
            raise ValueError("--fill is for --panel (a gap in --input is refused by the reader)")
        if a.isa == "reference":
            raise ValueError("--isa reference is the plain sweep's (no --panel/--scheduler)")
        strategy = a.strategy if a.strategy and a.strategy != "hma" else None
        pnames = None
        if strategy is not None:
            from tollfree.strategies import resolve
            pnames = resolve(strategy).param_names
        elif a.where:
            raise ValueError("--where is for a strategy's named grid (--strategy)")
        columns = parse_columns(a.columns, pnames)
        if a.sort is not None:
            parse_sort(a.sort, pnames)
        fee = None if a.fee is None else parse_fee(a.fee)
        want_stats = needs_stats(columns, a.sort, pnames)
        want_time = a.time_stats or a.periods_per_year is not None
        time_sort = needs_time(a.sort, pnames)  # ranked by a figure: computed, not printed
        if a.periods_per_year is not None and not (0.0 < a.periods_per_year < float("inf")):
            raise ValueError("--periods-per-year must be a positive finite number, got "
                             f"{a.periods_per_year}")
        if want_time:
            from tollfree.stats import TIME_FIGURES
            columns = tuple(columns) + TIME_FIGURES
    except ValueError as e:
        print(f"tollfree sweep: {e}", file=err)
        return 2  # a bad option value: a usage error, as the plain sweep's
    try:
        if strategy is None:
            params = parse_grid(a.grid)
        else:
            from tollfree.grid import named
            params = named(strategy, a.grid, a.where)
        if a.panel:
            panel = load_panel(a.panel, a.column, a.raw, fill=a.fill, _cli=True)
        elif a.input:
            from tollfree.data import load_close

            close = np.fromfile(a.input, dtype="<f8") if a.raw else load_close(a.input, a.column)
            panel = {os.path.splitext(os.path.basename(a.input))[0]: close}
        else:
            from tollfree.data import default_close

            panel = {"default": default_close()}
    except (ValueError, OSError) as e:
        print(f"tollfree sweep: {e}", file=err)
        return 1
    for line in getattr(panel, "notes", []):  # what filling changed: said even with --quiet
        print(f"tollfree sweep: note: {line}", file=err)
    import pandas  # noqa: F401  (imported before the clock starts: the summary times the sweep)

    t0 = time.perf_counter()
    try:
        if a.scheduler:
            from tollfree import distributed

            df = distributed.sweep(panel, params, client=a.scheduler, chunk=a.chunk,
                                   threads=1 if a.threads is None else a.threads, isa=a.isa,
                                   progress=None if not a.quiet else False, quiet=a.quiet,
                                   connect_timeout=a.connect_timeout, fee=fee, stats=want_stats,
                                   strategy=strategy, time_stats=want_time or time_sort,
                                   periods_per_year=a.periods_per_year)
        else:
            df = sweep_panel(panel, params, threads=a.threads, isa=a.isa, fee=fee,
                             stats=want_stats, strategy=strategy,
                             time_stats=want_time or time_sort,
                             periods_per_year=a.periods_per_year)
    except (ValueError, OSError, binding.KernelError) as e:
        print(f"tollfree sweep: {e}", file=err)
        return 1
    dt = time.perf_counter() - t0
    try:
        to_file = a.out not in (None, "-")
        f = open(a.out, "w") if to_file else sys.stdout
        try:
            write_csv(df, f, a.top, columns, a.sort, pnames)
            f.flush()
        finally:
            if to_file:
                f.close()
    except OSError as e:
        print(f"tollfree sweep: write failed: {e}", file=err)
        return 1
    if not a.quiet:
        bars = sum(len(v) for v in panel.values())
        where = f"Dask {a.scheduler}" if a.scheduler else "in-process"
        print(f"sweep: {len(panel)} instruments x {params.shape[0]} combos ({bars} bars) in "
              f"{dt:.3f} s ({where}{', with statistics' if want_stats else ''})", file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
