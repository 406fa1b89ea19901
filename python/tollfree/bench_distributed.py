"""Benchmark: the panel sweep in-process against Dask LocalClusters of 1 and 2 process workers.

    make bench-distributed                       (the defaults below)
    python -m tollfree.bench_distributed --instruments 100 --bars 150000 --combos 800

Prints the machine (CPU model, cores, load average before and after: other processes' load
distorts every figure), then for each configuration the wall time, the work (the sum of the
tasks' compute times from Dask's task stream), the overhead of scheduling and transfer as a
fraction of the work, memory per worker (peak RSS) and the differing bits against the
in-process result (must be 0); last, a projection for N machines from the measured per-task cost,
stated as a projection. Cluster start-up is timed apart, not counted in a sweep's wall time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _rss() -> int:
    """Peak resident bytes of this (worker) process so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instruments", type=int, default=20)
    ap.add_argument("--bars", type=int, default=150_000)
    ap.add_argument("--combos", type=int, default=800)
    ap.add_argument("--lo", type=int, default=6)
    ap.add_argument("--hi", type=int, default=200)
    ap.add_argument("--workers", default="1,2", help="LocalCluster sizes to run, e.g. 1,2")
    ap.add_argument("--chunk", type=int, default=None, help="combos per task (default: auto)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median reported)")
    ap.add_argument("--machines", default="2,4,8,16", help="N for the projection")
    ap.add_argument("--project-instruments", type=int, default=100,
                    help="instruments the projection is for (default 100)")
    ap.add_argument("--bandwidth", type=float, default=1e9,
                    help="bytes/s assumed per link for the projection's scatter (default 1e9)")
    a = ap.parse_args(argv)

    from dask.distributed import Client, LocalCluster

    from tollfree import binding, distributed as TD
    from tollfree.data import generate_close
    from tollfree.grid import grid
    from tollfree.panel import sweep_panel

    cores = os.cpu_count() or 1
    print(f"date      {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine   {cpu_model()}, {cores} logical cores, {platform.machine()}, "
          f"ISA {binding.isa_best()}")
    print(f"load      {load()} (1/5/15 min) before")
    g = grid(a.lo, a.hi, a.combos)
    panel = {f"i{k:03d}": generate_close(a.bars, 1000 + k) for k in range(a.instruments)}
    nbytes = sum(v.nbytes for v in panel.values())
    est = TD.estimate_seconds([a.bars] * a.instruments, g)
    print(f"workload  {a.instruments} instruments x {a.bars:,} bars x {a.combos} combos "
          f"(grid {a.lo}:{a.hi}:{a.combos}), panel {nbytes / 2**20:.0f} MiB, "
          f"model estimate {est:.0f} s of one thread")

    sweep_panel({"warm-up": generate_close(1000, 1)}, g[:4])  # imports, library load
    ws = [int(x) for x in a.workers.split(",") if x]
    clusters = {}
    for w in ws:  # started once, apart from the timings; idle while the others run
        t0 = time.perf_counter()
        cl = LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                          dashboard_address=":0", host="127.0.0.1")
        c = Client(cl)
        c.wait_for_workers(w)
        clusters[w] = (cl, c, time.perf_counter() - t0)
    ref = None
    runs = {}  # (kind, n) -> [(wall, work, tasks, rss, attrs)]
    try:
        for r in range(a.repeat):  # interleaved, so a change in the machine's load hits all
            for n in sorted(set([1, cores] + ws)):
                t0 = time.perf_counter()
                df = sweep_panel(panel, g, threads=n)
                wall = time.perf_counter() - t0
                if ref is None:
                    ref = df["pnl"].to_numpy().view(np.uint64).copy()
                    ref_t = df["trades"].to_numpy().copy()
                runs.setdefault(("in-process", n), []).append((wall, None, None, None, None, 0))
                print(f"  round {r + 1} in-process threads={n}: {wall:7.2f} s   load {load()}",
                      flush=True)
                if n not in clusters:
                    continue
                from dask.distributed import get_task_stream

                client = clusters[n][1]
                with get_task_stream(client) as ts:
                    t0 = time.perf_counter()
                    df = TD.sweep(panel, g, client=client, chunk=a.chunk)
                    wall = time.perf_counter() - t0
                work = sum(ss["stop"] - ss["start"] for rec in ts.data
                           for ss in rec["startstops"] if ss["action"] == "compute")
                ntasks = df.attrs["tollfree"]["tasks"]
                rss = list(client.run(_rss).values())
                diff = int(np.count_nonzero(df["pnl"].to_numpy().view(np.uint64) != ref)
                           + np.count_nonzero(df["trades"].to_numpy() != ref_t))
                runs.setdefault(("dask", n), []).append((wall, work, ntasks, rss,
                                                         df.attrs["tollfree"], diff))
                print(f"  round {r + 1} dask workers={n}: {wall:7.2f} s, task work {work:.2f} s, "
                      f"{ntasks} tasks, differing values {diff}   load {load()}", flush=True)
    finally:
        for cl, c, _ in clusters.values():
            c.close()
            cl.close()
    print(f"results   median of {a.repeat} interleaved rounds (min in brackets)")
    med = {k: float(np.median([x[0] for x in v])) for k, v in runs.items()}
    for (kind, n), v in sorted(runs.items()):
        walls = [x[0] for x in v]
        line = f"  {kind:10s} {'workers' if kind == 'dask' else 'threads'}={n}: " \
               f"{med[(kind, n)]:7.2f} s ({min(walls):.2f})"
        if kind == "dask":
            over = [(x[0] * n - x[1]) / x[1] for x in v]
            rss = max(max(x[3]) for x in v)
            vs = med[(kind, n)] / med[("in-process", n)] - 1
            line += (f"  overhead (idle worker time: scheduling, transfer, imbalance) "
                     f"{100 * float(np.median(over)):.1f}% of the task work; vs in-process "
                     f"threads={n} {100 * vs:+.1f}%; {v[0][2]} tasks, mean "
                     f"{float(np.median([x[1] / x[2] for x in v])):.2f} s; peak RSS per worker <= "
                     f"{rss / 2**20:.0f} MiB; broadcast {v[0][4]['broadcast']}; differing values "
                     f"{sum(x[5] for x in v)}; start-up {clusters[n][2]:.1f} s (not counted)")
        print(line)
    per_task = []
    for n in ws:  # medians over the rounds
        v = runs[("dask", n)]
        work = float(np.median([x[1] for x in v]))
        over = float(np.median([(x[0] * n - x[1]) / x[1] for x in v]))
        per_task.append((work / max(1, v[0][2]), v[0][2], work, over, n))
    print(f"load      {load()} (1/5/15 min) after")
    if per_task:
        mean, ntasks, work, over, w = per_task[-1]
        over = max(0.0, over)
        print("projection (not measured): N machines x C cores, one thread per worker, same "
              f"per-task cost {mean:.2f} s, overhead {100 * over:.1f}% as measured with {w} "
              f"workers, scatter at {a.bandwidth / 1e9:g} GB/s per link")
        f = max(1.0, a.project_instruments / a.instruments)
        print(f"  for {a.project_instruments} instruments x {a.bars:,} bars x {a.combos} combos "
              f"(the measured work x {f:g}: {work * f:.0f} s of task time, "
              f"{int(ntasks * f)} tasks)")
        for n in [int(x) for x in a.machines.split(",") if x]:
            slots = n * cores
            waves = -(-int(ntasks * f) // slots)
            t = max(work * f / slots, waves * mean) * (1 + over) + nbytes * f / a.bandwidth
            print(f"  {n:3d} machines x {cores} cores: ~{t:7.1f} s ({waves} waves of tasks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
