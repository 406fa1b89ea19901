"""The default data set (docs/kernel.md) and close-series readers.

The canonical default data is the committed file ``data/default_close.f64`` (150,000 little-endian
float64 closes), checked by its SHA-256 when loaded. It was made by :func:`generate_close` with the
default size and seed; the generator stays for other sizes and seeds, but its last bits are not
portable: numpy's ``exp`` takes a different SIMD path with and without AVX-512, so on a CPU without
AVX-512 about one bar in five differs by one ulp. Every default in tollfree (the CLI's embedded
data, :func:`synthetic_close` with default arguments, the server, the benchmarks) is the committed
file, so the default sweep gives the same bits on every machine.
"""
from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import os
import re
import sys
from array import array
from dataclasses import dataclass, field

import numpy as np

DEFAULT_BARS = 150_000
DEFAULT_SEED = 42
DEFAULT_SHA256 = "42e58fb99a4734653ea5a9f7f6dbddf8204b626754a448a8a78560d02511b947"


def default_close_path() -> str:
    """Where the canonical default data lives (the source tree's ``data/``, or beside the package
    when installed)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "data", "default_close.f64"),
                 os.path.join(os.path.dirname(os.path.dirname(here)), "data", "default_close.f64")):
        if os.path.exists(cand):
            return cand
    raise FileNotFoundError("tollfree: default_close.f64 not found beside the package or in data/")


@functools.lru_cache(maxsize=1)
def _default_close_bytes() -> bytes:
    path = default_close_path()
    with open(path, "rb") as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != DEFAULT_SHA256:
        raise ValueError(f"tollfree: {path} is damaged (sha256 {digest}, want {DEFAULT_SHA256})")
    return raw


def default_close() -> np.ndarray:
    """The canonical default data: a fresh, writable float64[150000] copy of the committed file
    (its SHA-256 checked)."""
    return np.frombuffer(_default_close_bytes(), dtype="<f8").astype(np.float64, copy=True)


def generate_close(n: int = DEFAULT_BARS, seed: int = DEFAULT_SEED) -> np.ndarray:
    """Geometric random walk: ``100 * exp(cumsum(normal(0, 0.0008, n)))`` from PCG64(seed).

    The last bits depend on numpy's SIMD path for ``exp`` (see the module's docstring): use it
    for inputs of other sizes and seeds, and compare paths on the same array, never against a
    file made on another machine."""
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0, 0.0008, n)
    return np.ascontiguousarray(100.0 * np.exp(np.cumsum(r)), dtype=np.float64)


def synthetic_close(n: int = DEFAULT_BARS, seed: int = DEFAULT_SEED) -> np.ndarray:
    """The default data (:func:`default_close`) for the default size and seed, else
    :func:`generate_close` (C-contiguous float64[n], nothing prepended)."""
    if n == DEFAULT_BARS and seed == DEFAULT_SEED:
        return default_close()
    return generate_close(n, seed)


class BadInput(ValueError):
    """A price file or series tollfree refuses; the message names the line and column."""


@dataclass
class Prices:
    """A close series as read from a file: ``close`` (C-contiguous float64, oldest first),
    ``dates`` (the date column's text per bar, oldest first, or None), and what reading did."""

    close: np.ndarray
    dates: list | None = None
    column: str = "close"
    date_column: str | None = None
    skipped: int = 0
    first_bad_line: int = 0
    reversed: bool = False
    notes: list = field(default_factory=list)


_NUM = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_SPECIAL = re.compile(r"[+-]?(?:nan|inf|infinity)\Z", re.IGNORECASE)
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?\Z")
_DATE_NAMES = ("date", "datetime", "time", "timestamp", "open_time", "open time", "dt",
               "gmt time", "local time", "date_time", "trade_date")
_DATE = re.compile(r"(\d{4})[-/.]?(\d{1,2})[-/.]?(\d{1,2})"
                   r"(?:[T ](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?)?")


def _num(s: str) -> float | None:
    """The number in a cell as the C reader (src/cli/input.c) takes it, or None."""
    if _NUM.match(s) or _SPECIAL.match(s):
        try:
            return float(s)
        except (ValueError, OverflowError):
            return None
    if _HEX.match(s):
        return float.fromhex(s)
    return None


def _bad_price(x: float) -> str | None:
    if x != x:
        return "NaN is not a price"
    if not math.isfinite(x):
        return "not a finite number (out of double range?)"
    if x <= 0:
        return "not a positive price (pnl divides by the entry price)"
    return None


def _date_key(s: str):
    """The order key of a date cell (as the C reader): (YYYYMMDD, seconds) or (0, number)."""
    x = _num(s)
    if x is not None and math.isfinite(x) and not (len(s) == 8 and x >= 1e7):
        return (0, x)
    m = _DATE.match(s)
    if not m:
        return None
    y, mo, d = int(m[1]), int(m[2]), int(m[3])
    if not (1 <= mo <= 12 and 1 <= d <= 31):
        return None
    sec = int(m[4] or 0) * 3600 + int(m[5] or 0) * 60 + int(m[6] or 0)
    frac = int(m[7]) / 10 ** len(m[7]) if m[7] else 0.0
    return (y * 10000 + mo * 100 + d, sec + frac)


def read_prices(path, column: str = "close", date_column: str | None = None, raw: bool = False,
                skip_bad_rows: bool = False, warn=None) -> Prices:
    """Reads a price file as ``tollfree sweep --input`` does (the same rules, the same bits).

    ``path``: a file name, ``"-"`` for stdin, or a binary file object. Raw little-endian f64
    when ``raw`` or the name ends in ``.f64``/``.bin``/``.raw``; else a CSV: a UTF-8 BOM, CRLF,
    quoted fields and blank lines are fine; a first line of numbers and dates is data (then
    ``column`` may be a 1-based index); ``column`` and ``date_column`` match any case. Every close must be a
    positive finite number: anything else raises :class:`BadInput` naming line and column, or,
    with ``skip_bad_rows``, is skipped and counted. A date column (the first named date,
    datetime, time, timestamp, ...; ``date_column="none"`` for none) is kept, and its order
    checked: newest-first files are reversed (said in ``notes`` and to ``warn``), out of order is
    an error. ``warn``: a callable for the notes (default: stderr)."""
    if warn is None:
        def warn(msg):
            print(msg, file=sys.stderr)
    name = "<stdin>" if path == "-" else getattr(path, "name", str(path))
    if isinstance(path, (str, os.PathLike)) and path != "-":
        spath = os.fspath(path)
        f = open(spath, "rb")
        is_raw = raw or spath.endswith((".f64", ".bin", ".raw"))
    else:
        f = sys.stdin.buffer if path == "-" else path
        is_raw = raw
    try:
        if is_raw:
            return _read_raw(f, name, skip_bad_rows, warn)
        return _read_csv(f, name, column, date_column, skip_bad_rows, warn)
    finally:
        if f is not path and path != "-":
            f.close()


def _read_raw(f, name, skip_bad_rows, warn) -> Prices:
    buf = f.read()
    if len(buf) % 8:
        raise BadInput(f"{name}: raw f64 input must be a multiple of 8 bytes ({len(buf) % 8} left over)")
    v = np.frombuffer(buf, dtype="<f8").astype(np.float64)
    ok = np.isfinite(v) & (v > 0)
    skipped = int((~ok).sum())
    if skipped and not skip_bad_rows:
        i = int(np.argmin(ok))
        raise BadInput(f"{name}: value {i + 1} (byte {i * 8}): {v[i]:g}: {_bad_price(v[i])} "
                       "(or --skip-bad-rows)")
    v = np.ascontiguousarray(v[ok])
    if v.size == 0:
        raise BadInput(f"{name}: empty input (no bars)")
    return Prices(close=v, skipped=skipped)


def _read_csv(f, name, column, date_column, skip_bad_rows, warn) -> Prices:
    text = io.TextIOWrapper(f, encoding="utf-8", errors="surrogateescape", newline="")
    close = array("d")
    dates: list | None = None
    col = dcol = -1
    colname = dname = ""
    started = False
    skipped = first_bad = 0
    direction = 0
    dates_ok = True
    prev = None
    first_date = last_date = ""
    notes = []
    line = 0
    for raw_line in text:
        line += 1
        s = raw_line[:-1] if raw_line.endswith("\n") else raw_line
        if s.endswith("\r"):
            s = s[:-1]
        if line == 1 and s.startswith("\ufeff"):
            s = s[1:]
        # Binary bytes: checked in the first 64 lines, as the C reader does (later, only the
        # cells parsed matter, and there they are "not a number").
        for k, ch in enumerate(s if line <= 64 else ""):
            if ord(ch) < 0x20 and ch != "\t":
                raise BadInput(f"{name}:{line}: byte {k + 1} is binary data (0x{ord(ch) & 0xff:02x}), "
                               "not CSV text (for raw little-endian f64 use --raw)")
        if not s.strip(" \t"):
            continue
        cells = _split(s)
        if not started:
            started = True
            if not all(_num(c) is not None or _date_key(c) is not None for c in cells):
                low = [c.lower() for c in cells]
                if column.lower() not in low:
                    cols = ", ".join(f"'{c}'" for c in cells[:64])
                    raise BadInput(f"{name}: no column '{column}' in the header line; columns: "
                                   f"{cols} (use --column NAME)")
                col = low.index(column.lower())
                if date_column:
                    if date_column.lower() in low:
                        dcol = low.index(date_column.lower())
                    elif date_column != "none":
                        raise BadInput(f"{name}: no date column '{date_column}' in the header line")
                else:
                    dcol = next((i for i, c in enumerate(low) if c in _DATE_NAMES), -1)
                if dcol == col:
                    dcol = -1
                colname = cells[col]
                if dcol >= 0:
                    dname = cells[dcol]
                    dates = []
                continue
            if len(cells) == 1:
                col = 0
            elif column.isdigit() and 1 <= int(column) <= len(cells):
                col = int(column) - 1
            else:
                raise BadInput(f"{name}: no header line and {len(cells)} columns: say which holds "
                               f"the close with --column N (1..{len(cells)})")
            colname = str(col + 1)
        why = None
        why_col = col
        cell = cells[col] if col < len(cells) else None
        x = None
        if cell is None:
            why = "missing cell (the row is short)"
        elif cell == "":
            why = "empty cell"
        else:
            x = _num(cell)
            why = "not a number" if x is None else _bad_price(x)
        key = None
        if why is None and dcol >= 0 and dates_ok:
            dcell = cells[dcol] if dcol < len(cells) else None
            key = _date_key(dcell) if dcell is not None else None
            if key is None:
                if not close and not skipped:
                    dates_ok = False
                    dates = None
                    msg = (f"{name}: column '{dname}' is not a date tollfree reads "
                           "(YYYY-MM-DD[ HH:MM[:SS]] or a number): the bar order is not checked")
                    notes.append(msg)
                    warn(msg)
                else:
                    why, why_col = "not a date like the rows before", dcol
        if why:
            if skip_bad_rows:
                if not skipped:
                    first_bad = line
                skipped += 1
                continue
            shown = (cell if why_col == col else cells[dcol] if dcol < len(cells) else "") or ""
            label = colname if why_col == col else dname
            raise BadInput(f"{name}:{line}: column {why_col + 1} '{label}': {why}: '{shown[:60]}' "
                           "(or --skip-bad-rows)")
        if key is not None:
            if prev is not None:
                d = (key > prev) - (key < prev)
                if d and not direction:
                    direction = d
                elif d and d != direction:
                    raise BadInput(f"{name}:{line}: column {dcol + 1} '{dname}': dates out of order "
                                   f"('{cells[dcol]}' after '{last_date}'): sort the file by date")
            else:
                first_date = cells[dcol]
            last_date = cells[dcol]
            prev = key
            dates.append(cells[dcol])
        close.append(x)
    if not close:
        why = ("no header, no rows" if not started else
               "every row was bad" if skipped else "a header but no rows")
        raise BadInput(f"{name}: empty input ({why})")
    v = np.frombuffer(close, dtype=np.float64).copy()
    if skipped:
        msg = f"{name}: skipped {skipped} bad rows (--skip-bad-rows; the first at line {first_bad})"
        notes.append(msg)
        warn(msg)
    if direction < 0:
        v = np.ascontiguousarray(v[::-1])
        dates = dates[::-1]
        msg = (f"{name}: column '{dname}' runs newest first ({first_date} .. {last_date}): the bars "
               "were reversed to oldest first")
        notes.append(msg)
        warn(msg)
    return Prices(close=v, dates=dates, column=colname, date_column=dname or None,
                  skipped=skipped, first_bad_line=first_bad, reversed=direction < 0, notes=notes)


def _split(s: str) -> list:
    """One CSV line into trimmed, unquoted cells (quotes as the C reader takes them)."""
    cells = next(csv.reader([s], skipinitialspace=True))
    return [c.strip(" \t") for c in cells] if cells else [""]


def to_close(x, column: str = "close") -> np.ndarray:
    """Any close series as the kernel wants it: a C-contiguous float64 numpy array.

    Takes a numpy array of any real dtype, a pandas Series, a pandas DataFrame (its ``column``,
    any case), or any sequence of numbers. A float64 C-contiguous array is returned as is;
    anything else is copied to float64 once. Every value must be a positive finite number
    (:class:`BadInput` names the first that is not)."""
    if hasattr(x, "columns") and hasattr(x, "iloc"):  # a pandas DataFrame
        low = {str(c).lower(): c for c in x.columns}
        if column.lower() not in low:
            raise BadInput(f"DataFrame has no column '{column}'; columns: "
                           + ", ".join(repr(str(c)) for c in x.columns))
        x = x[low[column.lower()]]
    if hasattr(x, "to_numpy"):
        x = x.to_numpy(dtype=np.float64)
    v = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    if v.ndim != 1:
        raise BadInput(f"a close series is 1-D, got shape {v.shape}")
    ok = np.isfinite(v) & (v > 0)
    if not ok.all():
        i = int(np.argmin(ok))
        raise BadInput(f"close[{i}] = {v[i]!r}: {_bad_price(float(v[i]))}")
    return v


def load_close(path, column: str = "close", **kw) -> np.ndarray:
    """Reads a close series (:func:`read_prices`, same arguments) and returns just the close:
    a C-contiguous float64 array, oldest first."""
    return read_prices(path, column, **kw).close
