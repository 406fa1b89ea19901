"""Client-side latency figures (a measurement script, not a test).

    PYTHONPATH=python /usr/bin/python3 -m tollfree.client.measure [--client-cpu N] [--server-cpu N]
        [--spin N] [--server-spin N] [--repeat N] [--bars N]

Starts ``tollfree serve --unix --shm`` in a temporary directory (optionally pinned), then
measures from this Python process:

- echo of 8 bytes and of 1.2 MB (150,000 f64) over the Unix socket (v2 ECHO, reused buffers);
- echo of 8 bytes over shared memory;
- the per-bar session call over shared memory (150,000 bars: total and per call);
- the v1 echo of 8 bytes over the Unix socket, for reference.

Every latency row is a median (with min and max) of ``--repeat`` timed calls after a warm-up,
and states the CPU placement and spin budgets. Absolute times drift between runs on shared
machines: compare rows of one run.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time

import numpy as np

import tollfree
from tollfree._lib import bin_path
from tollfree.data import synthetic_close


def _start(tmp: str, server_cpu: int | None, server_spin: int | None):
    u, s = os.path.join(tmp, "u.sock"), os.path.join(tmp, "s.sock")
    args = [bin_path(), "serve", "--unix", u, "--shm", s, "--quiet"]
    if server_spin is not None:
        args += ["--spin", str(server_spin)]
    if server_cpu is not None:
        args = ["taskset", "-c", str(server_cpu)] + args
    log = open(os.path.join(tmp, "log"), "wb")
    p = subprocess.Popen(args, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not (os.path.exists(u) and os.path.exists(s)):
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start: {open(os.path.join(tmp, 'log')).read()}")
        time.sleep(0.01)
    time.sleep(0.05)
    return p, u, s


def _timeit(fn, repeat: int, warm: int = 200) -> list[float]:
    for _ in range(warm):
        fn()
    out = []
    pc = time.perf_counter_ns
    for _ in range(repeat):
        t0 = pc()
        fn()
        out.append((pc() - t0) / 1000.0)
    return out


def _row(name: str, us: list[float], note: str = "") -> str:
    return (f"{name:<38} median {statistics.median(us):9.2f} us   min {min(us):9.2f}   "
            f"max {max(us):10.2f}   n={len(us)} {note}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client-cpu", type=int, default=None)
    ap.add_argument("--server-cpu", type=int, default=None)
    ap.add_argument("--spin", type=int, default=tollfree.client.DEFAULT_SPIN,
                    help="client spin iterations before the futex sleep")
    ap.add_argument("--server-spin", type=int, default=None, help="server --spin (default: its own)")
    ap.add_argument("--repeat", type=int, default=5000)
    ap.add_argument("--bars", type=int, default=150_000)
    a = ap.parse_args(argv)

    if a.client_cpu is not None:
        os.sched_setaffinity(0, {a.client_cpu})
    with tempfile.TemporaryDirectory(prefix="tfmeasure") as tmp:
        p, upath, spath = _start(tmp, a.server_cpu, a.server_spin)
        try:
            place = (f"client cpus {sorted(os.sched_getaffinity(0))}, server cpus "
                     f"{sorted(os.sched_getaffinity(p.pid))}, {os.cpu_count()} vCPUs; "
                     f"client spin {a.spin}, server spin "
                     f"{'default' if a.server_spin is None else a.server_spin}")
            print(place)
            small = np.ones(1)
            big = synthetic_close()
            out_small, out_big = np.empty_like(small), np.empty_like(big)
            with tollfree.connect(f"unix:{upath}") as c:
                print(_row("unix echo 8 B (v2)", _timeit(lambda: c.echo(small, out=out_small), a.repeat)))
                print(_row("unix echo 1.2 MB (v2)", _timeit(lambda: c.echo(big, out=out_big),
                                                          max(50, a.repeat // 20), 20)))
            with tollfree.v1.Client(upath) as v:
                print(_row("unix echo 8 B (v1 client)", _timeit(lambda: v.echo(small), a.repeat)))
            with tollfree.connect(f"shm:{spath}", spin=a.spin) as c:
                print(_row("shm echo 8 B", _timeit(lambda: c.echo(small, out=out_small), a.repeat)))
                close = big[: a.bars] if a.bars <= big.shape[0] else np.resize(big, a.bars)
                bars = close.tolist()
                with c.session([50, 25, 7, 25, 8, 12]) as s:
                    on_bar = s.on_bar
                    per = _timeit(lambda: on_bar(bars[0]), a.repeat)
                    print(_row("shm session on_bar (per call)", per))
                with c.session([50, 25, 7, 25, 8, 12]) as s:
                    on_bar = s.on_bar
                    t0 = time.perf_counter()
                    for x in bars:
                        on_bar(x)
                    dt = time.perf_counter() - t0
                    trades = s.trades
                ref = tollfree.sweep(close, np.array([[50, 25, 7, 25, 8, 12]], np.int64))
                print(f"shm session {len(bars)} bars: {dt:.4f} s total, {dt / len(bars) * 1e6:.3f} "
                      f"us/bar (trades {trades}, batch {int(ref[1][0])})")
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
