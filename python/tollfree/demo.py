"""`make demo`: the default sweep, computed by the C engine in-process from Python, next to the
published fingerprint and to numba; then the same sweep across the engine service, and the
boundary benchmark's headline table when a report exists."""
from __future__ import annotations

import os
import time

import numpy as np

import tollfree
from tollfree import data, grid

FINGERPRINT = (-5165.58, 57029)  # "The IPC Tax": combo (6, 3, 2, 3, 1, 2) on the default data


def _time(fn, reps):
    best, out = float("inf"), None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def kernel_section(close, params):
    from tollfree import reference
    from tollfree.binding import isa_best

    t_c, (pnl, trades) = _time(lambda: tollfree.sweep(close, params), 5)
    t_c1, _ = _time(lambda: tollfree.sweep(close, params, threads=1), 3)
    print(f"default data: {close.shape[0]:,} bars, {params.shape[0]} combos "
          f"(L = {params[0, 0]}..{params[-1, 0]})\n")
    ok = f"{pnl[0]:.2f}" == f"{FINGERPRINT[0]:.2f}" and trades[0] == FINGERPRINT[1]
    print(f"combo 0 {tuple(int(v) for v in params[0])}:")
    print(f"  tollfree      pnl = {pnl[0]:.4f}   trades = {trades[0]}")
    print(f"  published     pnl = {FINGERPRINT[0]:.2f}     trades = {FINGERPRINT[1]}   "
          f"-> {'MATCH' if ok else 'MISMATCH'}\n")
    print("best five combos (pnl in percent points, after 0.09 fee per round trip):")
    print("     L  half  sq    p   p3   p2          pnl  trades")
    for j in np.argsort(-pnl, kind="stable")[:5]:
        print("  " + " ".join(f"{int(v):4d}" for v in params[j]) + f"  {pnl[j]:11.4f}  {trades[j]:6d}")

    print("\nnumba reference (JIT warm-up excluded)...", flush=True)
    reference.warm_up()
    t_nb, (pnl_nb, trades_nb) = _time(lambda: reference.sweep(close, params), 1)
    same = np.array_equal(pnl_nb.view(np.int64), pnl.view(np.int64)) and np.array_equal(
        trades_nb, trades)
    print(f"  bit-identical to numba on all {params.shape[0]} combos: {'yes' if same else 'NO'}")
    print(f"  numba, 1 thread            {t_nb * 1e3:9.1f} ms")
    print(f"  tollfree, 1 thread         {t_c1 * 1e3:9.1f} ms   {t_nb / t_c1:6.1f}x faster")
    print(f"  tollfree, {os.cpu_count()} threads ({isa_best()}) {t_c * 1e3:7.1f} ms   "
          f"{t_nb / t_c:6.1f}x faster")
    return pnl, trades


def main() -> int:
    close, params = data.synthetic_close(), grid.default_grid()
    print("tollfree demo: the HMA/HMA3 stop-and-reverse sweep of 'The IPC Tax'\n")
    kernel_section(close, params)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
