"""`make demo`: the default sweep, computed by the C engine in-process from Python, next to the
published fingerprint and to numba; then the same sweep across the sweep service, and the
boundary benchmark's headline table when `make bench` has written one (``--verbose``: a quick
benchmark run when it has not)."""
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


def service_section(close, params, pnl, trades):
    """The same sweep through a real `tollfree serve` process, over each transport."""
    import shutil
    import signal
    import subprocess
    import tempfile

    from tollfree._lib import bin_path

    tmp = tempfile.mkdtemp(prefix="tollfree-demo-")
    unix, shm = os.path.join(tmp, "engine.sock"), os.path.join(tmp, "engine.shm")
    proc = subprocess.Popen([bin_path(), "serve", "--unix", unix, "--shm", shm, "--quiet"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not (os.path.exists(unix) and os.path.exists(shm)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("tollfree serve did not start: "
                                   + proc.stderr.read().decode(errors="replace"))
            time.sleep(0.01)
        print("\nthe same sweep through the sweep service (tollfree serve, a separate process):")
        rows = []
        with tollfree.v1.Client(unix) as v1c:
            rows.append(("v1 over unix (the published protocol)",
                         lambda: v1c.sweep(close, params)))
            with tollfree.connect(f"unix:{unix}") as uc, tollfree.connect(f"shm:{shm}") as sc:
                ds = sc.load(close)
                rows.append(("v2 over unix, series + grid in one call",
                             lambda: uc.sweep(close, params)))
                rows.append(("v2 over shared memory, dataset loaded once",
                             lambda: sc.sweep(ds, params)))
                for name, fn in rows:
                    t, (p, tr) = _time(fn, 5)
                    same = np.array_equal(p.view(np.int64), pnl.view(np.int64)) and \
                        np.array_equal(tr, trades)
                    print(f"  {name:44s} {t * 1e3:7.1f} ms   bit-identical: "
                          f"{'yes' if same else 'NO'}")
                with sc.session(params[0]) as live:
                    n = 20_000
                    t0 = time.perf_counter()
                    for x in close[:n].tolist():
                        live.on_bar(x)
                    per_bar = (time.perf_counter() - t0) / n
                print(f"  live session over shared memory: {per_bar * 1e9:.0f} ns per bar "
                      f"from Python ({n:,} bars, unpinned; `make bench` pins)")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def headline_section(verbose: bool = False):
    """The boundary benchmark's headline from the last `make bench`; the seconds-long quick run
    (with its progress lines) only with --verbose."""
    from tollfree.bench import headline

    try:
        text = headline()
    except FileNotFoundError:
        if not verbose:
            print("\nthe boundary benchmark's full table: `make bench` (build/report/report.md)")
            return
        import subprocess
        import sys

        out = os.path.join("build", "report-quick")
        print("\nno full run yet: a seconds-long quick run follows; `make bench` gives the real "
              "table", flush=True)
        subprocess.run([sys.executable, "-m", "tollfree.bench", "--quick", "--out", out],
                       check=False)
        return
    print("\nthe boundary benchmark's headline (the last `make bench`, build/report/):")
    print(text)


def main(argv=None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in argv or "-v" in argv
    close, params = data.synthetic_close(), grid.default_grid()
    print("tollfree demo: the HMA/HMA3 stop-and-reverse sweep of 'The IPC Tax' "
          "(docs/definition.md)\n")
    print(DATA_NOTE.format(path=os.path.relpath(data.default_close_path())) + "\n")
    pnl, trades = kernel_section(close, params)
    service_section(close, params, pnl, trades)
    headline_section(verbose)
    print(next_steps())
    return 0


# What the default data is: said before any figure, so nobody takes the figures for a market's.
DATA_NOTE = ("the data: SYNTHETIC, not market prices: a geometric random walk of 150,000 bars,\n"
             "  100 * exp(cumsum(normal(0, 0.0008))) from numpy's PCG64 with seed 42, committed as\n"
             "  {path} (raw little-endian f64; tollfree.data.generate_close makes others)")


def next_steps() -> str:
    """The three commands a user tries next: their own file, the report, paper trading."""
    from tollfree._lib import bin_path

    exe = os.path.relpath(bin_path()) if os.path.exists(bin_path()) else "tollfree"
    return ("\nnext, on your own prices (a CSV with a date and a close column):\n"
            f"  {exe} sweep --input prices.csv --column close --top 10\n"
            f"  {exe} sweep --input prices.csv --walk-forward 4 --report report.html\n"
            f"  {exe} paper --combo 6,3,2,3,1,2 --input prices.csv --column close\n"
            "(every command has --help; docs/research.md says how files are read)")


if __name__ == "__main__":
    raise SystemExit(main())
