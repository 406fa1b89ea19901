"""The default data set of spec/kernel.md section 1."""
from __future__ import annotations

import numpy as np

DEFAULT_BARS = 150_000
DEFAULT_SEED = 42


def synthetic_close(n: int = DEFAULT_BARS, seed: int = DEFAULT_SEED) -> np.ndarray:
    """Geometric random walk: ``100 * exp(cumsum(normal(0, 0.0008, n)))`` from PCG64(seed).

    Returns a C-contiguous float64 array of ``n`` closes (nothing prepended).
    """
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0, 0.0008, n)
    return np.ascontiguousarray(100.0 * np.exp(np.cumsum(r)), dtype=np.float64)


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
