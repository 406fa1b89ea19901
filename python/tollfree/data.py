"""The default data set (docs/kernel.md) and close series: price files and arrays.

Price files are read by the library's one reader (``tf_prices_read_*``, include/tollfree/prices.h,
the same code ``tollfree sweep --input`` runs), and arrays are checked by its ``tf_prices_check``:
this module only converts (docs/research.md, "Price files", gives the rules).

The canonical default data is the committed file ``data/default_close.f64`` (150,000 little-endian
float64 closes), checked by its SHA-256 when loaded. It was made by :func:`generate_close` with the
default size and seed; the generator stays for other sizes and seeds, but its last bits are not
portable: numpy's ``exp`` takes a different SIMD path with and without AVX-512, so on a CPU without
AVX-512 about one bar in five differs by one ulp. Every default in tollfree (the CLI's embedded
data, :func:`synthetic_close` with default arguments, the server, the benchmarks) is the committed
file, so the default sweep gives the same bits on every machine.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from tollfree._lib import lib

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
    """A price file or series tollfree refuses; the message names the line and column (a file) or
    the index (an array) and says what to do."""


@dataclass
class Prices:
    """A close series as read from a file: ``close`` (C-contiguous float64, oldest first),
    ``dates`` (the date column's text per bar, oldest first, or None), ``times`` (each bar's
    time as ``datetime64[ns]`` UTC, or None when there is no date column or with
    ``assume_sorted``), and what reading did (``notes``: the lines the CLI prints)."""

    close: np.ndarray
    dates: list | None = None
    column: str = "close"
    date_column: str | None = None
    skipped: int = 0
    first_bad_line: int = 0
    reversed: bool = False
    notes: list = field(default_factory=list)
    times: np.ndarray | None = None
    date_checked: bool = False
    assumed_sorted: bool = False
    sep: str | None = None
    date_form: str | None = None


# tf_prices_key and tf_prices_text_key (include/tollfree/prices.h; test_prices checks them).
PRICES_BARS, PRICES_SKIPPED, PRICES_FIRST_BAD_LINE, PRICES_REVERSED = 1, 2, 3, 4
PRICES_DATE_CHECKED, PRICES_ASSUMED_SORTED, PRICES_HEADER, PRICES_COLUMN_INDEX = 5, 6, 7, 8
PRICES_DATE_INDEX, PRICES_SEP, PRICES_RAW, PRICES_DAY_FIRST = 9, 10, 11, 12
PRICES_NAME, PRICES_COLUMN, PRICES_DATE_COLUMN, PRICES_DATE_FORM, PRICES_NOTES = 1, 2, 3, 4, 5
_E_BAD_INPUT, _E_LIMIT, _E_NOMEM, _E_NULL_ARG = -1006, -1005, -1003, -1001  # error.h
_RAW_SUFFIXES = (".f64", ".bin", ".raw")
_SEPS = {None: 0, ",": 44, "comma": 44, ";": 59, "semicolon": 59, "\t": 9, "\\t": 9, "tab": 9}


class _PricesOpts(ctypes.Structure):
    """tf_prices_opts (include/tollfree/prices.h)."""
    _fields_ = [("size", ctypes.c_size_t), ("name", ctypes.c_char_p),
                ("column", ctypes.c_char_p), ("date_column", ctypes.c_char_p),
                ("raw", ctypes.c_int), ("skip_bad_rows", ctypes.c_int), ("sep", ctypes.c_int),
                ("assume_sorted", ctypes.c_int), ("keep_dates", ctypes.c_int)]


_declared = False


def _plib():
    """libtollfree with the prices prototypes declared (once)."""
    global _declared
    L = lib()
    if not _declared:
        c, p, i64 = ctypes, ctypes.c_void_p, ctypes.c_int64
        opts = c.POINTER(_PricesOpts)
        L.tf_prices_check.argtypes = [p, i64, c.POINTER(i64)]
        L.tf_prices_read_path.argtypes = [c.POINTER(p), c.c_char_p, opts, c.c_char_p, c.c_size_t]
        L.tf_prices_read_buffer.argtypes = [c.POINTER(p), c.c_char_p, c.c_size_t, opts,
                                            c.c_char_p, c.c_size_t]
        L.tf_prices_free.argtypes, L.tf_prices_free.restype = [p], None
        L.tf_prices_values.argtypes, L.tf_prices_values.restype = [p, c.POINTER(i64)], p
        L.tf_prices_times.argtypes, L.tf_prices_times.restype = [p], p
        L.tf_prices_dates.argtypes, L.tf_prices_dates.restype = [p, c.POINTER(p)], p
        L.tf_prices_get.argtypes = [p, c.c_int, c.POINTER(i64)]
        L.tf_prices_text.argtypes, L.tf_prices_text.restype = [p, c.c_int], c.c_char_p
        _declared = True
    return L


def _enc(s):
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else \
        str(s).encode("utf-8", "surrogateescape")


def read_prices(path, column: str = "close", date_column: str | None = None, raw: bool = False,
                skip_bad_rows: bool = False, sep: str | None = None, assume_sorted: bool = False,
                warn=None) -> Prices:
    """Reads a price file with the library's reader: the rules, messages and bits of
    ``tollfree sweep --input`` (docs/research.md, "Price files").

    ``path``: a file name (streamed, never held whole), ``"-"`` for stdin, a binary file object
    or ``bytes``. Raw little-endian f64 when ``raw`` or a file name ends in
    ``.f64``/``.bin``/``.raw``; else a CSV: a header line or not, a UTF-8 BOM, CRLF, quotes and
    blank lines are fine; every row has the header's field count. ``column``: the close column,
    a header name in any case or a 1-based number. ``date_column``: None finds it (a column
    named date, datetime, time, timestamp, ..., else the first whose cells are dates, such as
    pandas' unnamed index), ``"none"`` for none, a name (``""`` is the unnamed column) or a
    1-based number; dates in the common forms are parsed, newest-first files reversed, others
    out of order refused. ``sep``: ``","``, ``";"``, ``"\\t"``/``"tab"``, or None to find it.
    ``assume_sorted``: the rows are oldest first (dates not checked). ``skip_bad_rows``: skip
    and count bad rows instead of refusing the first. Refusals raise :class:`BadInput` with the
    library's message (``FILE:LINE: column K 'NAME': WHAT: 'CELL' (what to do)``); ``warn``
    gets each note (default: stderr)."""
    if warn is None:
        def warn(msg):
            print(f"tollfree: {msg}", file=sys.stderr)
    if sep not in _SEPS:
        raise ValueError(f"sep wants ',', ';' or tab, got {sep!r}")
    L = _plib()
    o = _PricesOpts(size=ctypes.sizeof(_PricesOpts), column=_enc(column),
                    date_column=_enc(date_column), raw=int(bool(raw)),
                    skip_bad_rows=int(bool(skip_bad_rows)), sep=_SEPS[sep],
                    assume_sorted=int(bool(assume_sorted)), keep_dates=1)
    h = ctypes.c_void_p()
    msg = ctypes.create_string_buffer(4096)
    if isinstance(path, (str, os.PathLike)) and path != "-":
        rc = L.tf_prices_read_path(ctypes.byref(h), os.fsencode(path), ctypes.byref(o), msg,
                                   len(msg))
    else:
        if path == "-":
            data, name = sys.stdin.buffer.read(), "<stdin>"
        elif isinstance(path, (bytes, bytearray, memoryview)):
            data, name = bytes(path), "<buffer>"
        else:
            data, name = path.read(), getattr(path, "name", None)
            name = name if isinstance(name, str) else "<buffer>"
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("read_prices wants a binary file object (open(..., 'rb')), "
                            f"got one that reads {type(data).__name__}")
        o.name = _enc(name)
        rc = L.tf_prices_read_buffer(ctypes.byref(h), bytes(data), len(data), ctypes.byref(o),
                                     msg, len(msg))
    if rc:
        text = msg.value.decode("utf-8", "replace")
        if rc in (_E_BAD_INPUT, _E_LIMIT):
            raise BadInput(text)
        if rc == _E_NOMEM:
            raise MemoryError(text)
        if -4096 < rc < 0:
            raise OSError(-rc, os.strerror(-rc), os.fspath(path) if isinstance(
                path, (str, os.PathLike)) else text)
        raise ValueError(text)
    try:
        return _result(L, h, warn)
    finally:
        L.tf_prices_free(h)


def _result(L, h, warn) -> Prices:
    def num(key):
        v = ctypes.c_int64()
        L.tf_prices_get(h, key, ctypes.byref(v))
        return v.value

    def text(key):
        return L.tf_prices_text(h, key).decode("utf-8", "surrogateescape")

    n = ctypes.c_int64()
    ptr = L.tf_prices_values(h, ctypes.byref(n))
    n = n.value
    close = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_double)),
                                  (n,)).copy()
    tp = L.tf_prices_times(h)
    times = None if not tp else np.ctypeslib.as_array(
        ctypes.cast(tp, ctypes.POINTER(ctypes.c_int64)), (n,)).copy().view("datetime64[ns]")
    offp = ctypes.c_void_p()
    tx = L.tf_prices_dates(h, ctypes.byref(offp))
    dates = None
    if tx:
        off = np.ctypeslib.as_array(ctypes.cast(offp, ctypes.POINTER(ctypes.c_int64)),
                                    (n + 1,)).tolist()
        buf = ctypes.string_at(tx, off[n])
        dates = [buf[a:b].decode("utf-8", "surrogateescape") for a, b in zip(off, off[1:])]
    notes = [ln for ln in text(PRICES_NOTES).split("\n") if ln]
    for ln in notes:
        warn(ln)
    sep = num(PRICES_SEP)
    return Prices(close=close, dates=dates, column=text(PRICES_COLUMN),
                  date_column=text(PRICES_DATE_COLUMN) if num(PRICES_DATE_INDEX) >= 0 else None,
                  skipped=num(PRICES_SKIPPED), first_bad_line=num(PRICES_FIRST_BAD_LINE),
                  reversed=bool(num(PRICES_REVERSED)), notes=notes, times=times,
                  date_checked=bool(num(PRICES_DATE_CHECKED)),
                  assumed_sorted=bool(num(PRICES_ASSUMED_SORTED)),
                  sep=chr(sep) if sep else None, date_form=text(PRICES_DATE_FORM) or None)


def _why(x: float) -> str:
    """What is wrong with a value tf_prices_check refused (the words the file reader uses)."""
    if x != x:
        return "NaN is not a price"
    if x in (float("inf"), float("-inf")):
        return "not a finite number"
    return "not a positive price (pnl divides by the entry price)"


def first_bad(close: np.ndarray) -> int | None:
    """The index of the first value of a C-contiguous float64 array that is not a positive finite
    number (``tf_prices_check``), or None when every one is."""
    v = np.ascontiguousarray(close, dtype=np.float64)
    i = ctypes.c_int64(-1)
    rc = _plib().tf_prices_check(v.ctypes.data, v.size, ctypes.byref(i))
    if rc == 0:
        return None
    if rc != _E_BAD_INPUT:
        raise ValueError(f"tf_prices_check: code {rc}")
    return i.value


def to_close(x, column: str = "close", validate: bool = True) -> np.ndarray:
    """Any close series as the kernel wants it: a C-contiguous float64 numpy array.

    Takes a numpy array of any real dtype, a pandas Series (e.g. ``df["Close"]``), a pandas
    DataFrame (its ``column``, any case), or any sequence of numbers. A float64 C-contiguous
    array is returned as is; anything else is copied to float64 once. ``validate=True`` (the
    default) checks every value with the library's ``tf_prices_check``: one that is not a positive
    finite price raises :class:`BadInput` naming its index (and, for pandas, its index label) and
    what to do. ``validate=False`` skips the check (the raw fast path: the kernel then takes NaN,
    zero or negative prices as they are)."""
    labels = None
    if hasattr(x, "columns") and hasattr(x, "iloc"):  # a pandas DataFrame
        low = {str(c).lower(): c for c in x.columns}
        if str(column).lower() not in low:
            raise BadInput(f"DataFrame has no column '{column}'; columns: "
                           + ", ".join(repr(str(c)) for c in x.columns)
                           + " (pass column=NAME, or the Series itself)")
        x = x[low[str(column).lower()]]
    if hasattr(x, "to_numpy") and hasattr(x, "index"):  # a pandas Series
        labels = x.index
    try:
        v = x.to_numpy(dtype=np.float64) if hasattr(x, "to_numpy") else x
        v = np.ascontiguousarray(np.asarray(v, dtype=np.float64))
    except (TypeError, ValueError) as e:
        raise BadInput(f"a close series is numbers: {e} (convert the column first, e.g. "
                       "pd.to_numeric(s))") from None
    if v.ndim != 1:
        raise BadInput(f"a close series is 1-D, got shape {v.shape} (pick one column)")
    if validate:
        i = first_bad(v)
        if i is not None:
            where = f" (index label {labels[i]!r})" if labels is not None else ""
            raise BadInput(f"close[{i}]{where} = {v[i]!r}: {_why(float(v[i]))} (drop or fill "
                           "such values first, e.g. s.dropna() or s[s > 0]; or validate=False "
                           "for the raw path)")
    return v


def load_close(path, column: str = "close", **kw) -> np.ndarray:
    """Reads a close series (:func:`read_prices`, same arguments) and returns just the close:
    a C-contiguous float64 array, oldest first."""
    return read_prices(path, column, **kw).close
