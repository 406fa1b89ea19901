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

import functools
import hashlib
import os

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


def load_close(path: str, column: str = "close") -> np.ndarray:
    """Reads a close series: a CSV with a header (``column``) or raw little-endian f64 (``.f64``/``.bin``)."""
    if path.endswith((".f64", ".bin", ".raw")):
        return np.fromfile(path, dtype="<f8")
    with open(path, newline="") as f:
        header = f.readline().strip().split(",")
        if column not in header:
            raise ValueError(f"{path}: no column {column!r} in header {header}")
        idx = header.index(column)
        return np.loadtxt(f, delimiter=",", usecols=idx, dtype=np.float64, ndmin=1)
