"""Shared memory against the Unix socket on a loaded machine (``make bench-contention``).

    python -m tollfree.bench.contention [--bars N] [--reps N] [--only quiet|same|hog ...] [--quick]

One ``tollfree serve --unix --shm`` (default spin), one Python client per transport, no CPU
pinning (the scheduler places everything). Two rows per transport, each the median of --reps
runs: a live session (one SESSION_BAR call per bar, --bars calls; microseconds per bar) and a
batch (the default sweep, 150,000 bars x 80 combos, in one call; milliseconds). Both run in three
conditions: on the machine as it is ("quiet", unpinned); "same": client and every server thread
pinned to one vCPU (a spinner there holds the CPU its peer needs); "hog": unpinned, beside a CPU
hog, one ``while :; do :; done`` shell per vCPU, so that every vCPU always has another runnable
task and a spinning waiter is always taking time from someone. Each result is checked against the in-process engine before it is
timed (the final pnl and trades of the session; every pnl and trade count of the batch). The
transports take turns within each run, so that both see the same load.
``--quick`` (seconds; run by ``make test``) takes 1,000 bars, one run, and 8 combos x 20,000 bars
for the batch. Never fails on timing; exits 1 only if a check failed.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

from tollfree.bench import harness as H
from tollfree.bench.server import Server


CONDITIONS = ("quiet", "same", "hog")


def _hog_start(n: int) -> list:
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def _hog_stop(procs) -> None:
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except OSError:
            pass
    for p in procs:
        p.wait()


def _session(c, close_list, combo, ref):
    s = c.session(combo)
    f = s.on_bar
    t0 = time.perf_counter()
    for x in close_list:
        f(x)
    dt = time.perf_counter() - t0
    got = (float(s.pnl), int(s.trades))
    s.close()
    if got != ref:
        raise AssertionError(f"session result {got} != in-process {ref}")
    return dt / len(close_list)


def _batch(c, close, params, ref):
    t0 = time.perf_counter()
    pnl, trades = c.sweep(close, params)
    dt = time.perf_counter() - t0
    if not (np.array_equal(pnl, ref[0]) and np.array_equal(trades, ref[1])):
        raise AssertionError("batch result differs from the in-process sweep")
    return dt


def run(bars: int, reps: int, conditions, quick: bool = False) -> int:
    import tollfree
    from tollfree import binding, data, grid

    print(H.machine_line(), flush=True)
    close = data.default_close()
    params = grid.default_grid()
    if quick:
        close, params = close[:20_000].copy(), params[:8].copy()
    xs = close[:bars].tolist()
    combo = params[0]
    st = binding.Strategy(combo)
    for x in xs:
        st.on_bar(x)
    ref_session = (float(st.pnl), int(st.trades))
    st.close()
    ref_batch = tollfree.sweep(close, params)
    ncpu = os.cpu_count() or 1
    all_cpus = os.sched_getaffinity(0)
    srv = Server(extra_args=["--quiet"], transports=("unix", "shm")).start()
    fails = 0
    rows = []
    try:
        clients = {tr: tollfree.client.connect(srv.url(tr)) for tr in ("unix", "shm")}
        for cond in conditions:
            hogs = _hog_start(ncpu) if cond == "hog" else []
            if cond == "same":
                one = {min(all_cpus)}
                srv.pin(one)
                H.pin_thread(one)
            try:
                time.sleep(0.2 if hogs else 0)
                load0 = os.getloadavg()[0]
                per_bar = {tr: [] for tr in clients}
                batch = {tr: [] for tr in clients}
                failed = set()
                for _ in range(reps):  # transports interleaved: both see the same load
                    for tr, c in clients.items():
                        if tr in failed:
                            continue
                        try:
                            per_bar[tr].append(_session(c, xs, combo, ref_session))
                            batch[tr].append(_batch(c, close, params, ref_batch))
                        except AssertionError as e:
                            print(f"CHECK FAILED {cond} {tr}: {e}", flush=True)
                            fails += 1
                            failed.add(tr)
                for tr in clients:
                    if tr in failed:
                        continue
                    pb, bt = per_bar[tr], batch[tr]
                    rows.append((cond, tr, statistics.median(pb) * 1e6, min(pb) * 1e6,
                                 max(pb) * 1e6, statistics.median(bt) * 1e3, min(bt) * 1e3,
                                 max(bt) * 1e3, load0))
                    r = rows[-1]
                    print(f"  {cond:5} {tr:4}: live session {r[2]:8.2f} us/bar (min {r[3]:.2f}, "
                          f"max {r[4]:.2f}), batch {r[5]:7.1f} ms (min {r[6]:.1f}, max "
                          f"{r[7]:.1f})", flush=True)
            finally:
                _hog_stop(hogs)
                srv.pin(all_cpus)
                H.pin_thread(all_cpus)
        for c in clients.values():
            c.close()
    finally:
        srv.cleanup()
    print(f"\nserver: tollfree serve --unix --shm --quiet (default spin); same: all on CPU "
          f"{min(all_cpus)}, else unpinned; "
          f"{bars:,} bars per session, median of {reps}; hog: {ncpu} x `while :` (one per vCPU)")
    print(f"| condition | transport | live session, us/bar (min-max) | batch {close.shape[0]:,} x "
          f"{params.shape[0]}, ms (min-max) | load avg at start |")
    print("|---|---|---|---|---|")
    for cond, tr, med, lo, hi, b, blo, bhi, ld in rows:
        print(f"| {cond} | {tr} | {med:.2f} ({lo:.2f}-{hi:.2f}) | {b:.1f} ({blo:.1f}-{bhi:.1f}) "
              f"| {ld:.2f} |")
    return 1 if fails else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tollfree.bench.contention",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--bars", type=int, default=30_000, help="calls per live session")
    ap.add_argument("--reps", type=int, default=3, help="runs per row (the median is shown)")
    ap.add_argument("--only", action="append", choices=CONDITIONS,
                    help="run only this condition (repeatable)")
    ap.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    a = ap.parse_args(argv)
    if a.quick:
        a.bars, a.reps = min(a.bars, 1000), 1
    if a.bars < 1 or a.reps < 1:
        ap.error("--bars and --reps must be >= 1")
    conds = tuple(c for c in CONDITIONS if not a.only or c in a.only)
    return run(a.bars, a.reps, conds, a.quick)


if __name__ == "__main__":
    sys.exit(main())
