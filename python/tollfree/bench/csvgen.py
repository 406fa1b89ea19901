"""Writes the OHLCV CSV that docs/benchmarks.md ("CSV input") times `tollfree sweep --input` on:

    python3 -m tollfree.bench.csvgen --rows 16204023 --seed 7 big.csv    # about 1 GiB

Columns ``Date,Open,High,Low,Close,Adj Close,Volume``: dates ``YYYY-MM-DD HH:MM:SS`` one minute
apart from 2000-01-03 00:00:00, closes from :func:`tollfree.data.generate_close` (the same seed
gives the same closes), open/high/low around them, prices ``%.4f`` and adjusted close ``%.6f``,
integer volumes. Written in blocks of 1M rows, so memory stays small at any size.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from tollfree.data import generate_close

HEADER = "Date,Open,High,Low,Close,Adj Close,Volume\n"
BLOCK = 1 << 20
START = np.datetime64("2000-01-03T00:00:00", "s")


def write_csv(out, rows: int, seed: int = 7) -> None:
    """Writes the header and ``rows`` rows to the text file ``out``."""
    close = generate_close(rows, seed)
    rng = np.random.default_rng(seed + 1)
    out.write(HEADER)
    for lo in range(0, rows, BLOCK):
        c = close[lo:lo + BLOCK]
        n = c.shape[0]
        o = np.concatenate(([close[lo - 1] if lo else c[0]], c[:-1]))
        spread = np.abs(rng.normal(0.0, 0.0004, n)) * c
        hi, lw = np.maximum(o, c) + spread, np.minimum(o, c) - spread
        vol = rng.integers(100, 100_000, n)
        t = (START + np.arange(lo, lo + n) * np.timedelta64(60, "s")).astype(str)
        for k in range(n):
            out.write(f"{t[k][:10]} {t[k][11:19]},{o[k]:.4f},{hi[k]:.4f},{lw[k]:.4f},{c[k]:.4f},"
                      f"{c[k]:.6f},{vol[k]}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tollfree.bench.csvgen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=16_204_023, help="data rows (default: ~1 GiB)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("out", help="the CSV to write ('-' for stdout)")
    a = ap.parse_args(argv)
    if a.rows < 1:
        ap.error("--rows must be >= 1")
    if a.out == "-":
        write_csv(sys.stdout, a.rows, a.seed)
    else:
        with open(a.out, "w", buffering=1 << 20) as f:
            write_csv(f, a.rows, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
