"""Parameter grids: six window lengths per combo (docs/definition.md section 2)."""
from __future__ import annotations

import math

import numpy as np

PARAM_NAMES = ("L", "half", "sq", "p", "p3", "p2")
DEFAULT_COMBOS = 80


def combo(L: int) -> tuple[int, int, int, int, int, int]:
    """The six lengths derived from one Hull length ``L`` (round half to even, each >= 1)."""
    L = int(L)
    if L < 1:
        raise ValueError(f"Hull length must be >= 1, got {L}")
    half = max(round(L / 2), 1)
    sq = max(round(math.sqrt(L)), 1)
    p = max(round(L / 2), 1)
    p3 = max(round(p / 3), 1)
    p2 = max(round(p / 2), 1)
    return (L, half, sq, p, p3, p2)


def lengths(lo: int, hi: int, n: int) -> list[int]:
    """``n`` Hull lengths from ``lo`` to ``hi``: ``lo + (j*(hi-lo))//(n-1)`` (= linspace(lo, hi, n).astype(int))."""
    if n < 1:
        raise ValueError("grid needs at least one combo")
    if n == 1:
        return [lo]
    return [lo + (j * (hi - lo)) // (n - 1) for j in range(n)]


def grid(lo: int, hi: int, n: int) -> np.ndarray:
    """int64 (n, 6): one combo per Hull length of :func:`lengths`."""
    return np.array([combo(L) for L in lengths(lo, hi, n)], dtype=np.int64).reshape(n, 6)


def default_grid() -> np.ndarray:
    """The default 80-combo grid, int64 (80, 6): L_j = 6 + (j*194)//79."""
    return grid(6, 200, DEFAULT_COMBOS)
