"""The order path from Python: one command's round trip over Unix and TCP (median, p99), pipelined
commands/s with :meth:`tollfree.orders.Client.send_many`, and the paper loop's bars/s
(:func:`tollfree.paper.run`) in-process and through the service. A benchmark, not a test.

    python3 -m tollfree.bench_orders [--rt N] [--pipe N] [--durability none,group] [--quick]

It starts its own ``tollfree engine serve`` (:func:`tollfree._lib.bin_path`) on a temporary
journal, once per durability level. The C figures are ``build/bench/bench_orders``.
Method: round trips are timed one by one with ``time.perf_counter`` after 1,000 warm-up commands
(half a resting NewLimit, half its Cancel, so the book stays small); pipelined runs send batches
of 65,536 commands (NewLimit + CancelByClient pairs) and divide by the wall time; paper rows are
the loop's own timer (:attr:`PaperResult.seconds`), combo 0 on the default data, parity checked.
"""
from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tollfree import orders as o


def _machine() -> str:
    try:
        from tollfree.bench.harness import machine_line

        return machine_line()
    except Exception as e:  # noqa: BLE001
        return f"machine: unknown ({e})"


class _Service:
    def __init__(self, durability: str):
        from tollfree._lib import bin_path

        self.dir = Path(tempfile.mkdtemp(prefix="tfbench"))
        self.sock = str(self.dir / "e.sock")
        self.log = self.dir / "log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [bin_path(), "engine", "serve", "--journal", str(self.dir / "j"), "--instruments",
                 "1-2", "--unix", self.sock, "--tcp", "127.0.0.1:0", "--durability", durability,
                 "--max-orders", "4000000"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        until = time.monotonic() + 60
        while True:
            text = self.log.read_text(errors="replace")
            m = re.search(r"listening tcp \S*?:(\d+)", text)
            if m and "listening unix" in text:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None or time.monotonic() > until:
                self.stop()
                raise RuntimeError(f"engine serve did not start: {text.strip()[:200]}")
            time.sleep(0.01)

    def url(self, kind: str) -> str:
        return f"unix:{self.sock}" if kind == "unix" else f"tcp:127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def round_trip(url: str, n: int) -> tuple[float, float]:
    """(median, p99) seconds of one command's round trip."""
    t = np.empty(n)
    with o.connect(url, timeout=60) as c:
        oid = 0
        pc = time.perf_counter
        for i in range(n + 1000):
            t0 = pc()
            if i % 2 == 0:
                oid = c.new_limit(31, i + 1, 1, o.BUY, 100, 1)[0].order_id
            else:
                c.cancel(oid)
            if i >= 1000:
                t[i - 1000] = pc() - t0
    t.sort()
    return float(t[n // 2]), float(t[n * 99 // 100])


def pipelined(url: str, n: int) -> tuple[float, float]:
    """(commands/s, seconds) for n pipelined commands on one connection."""
    batch = 65536
    done, cid = 0, 1
    with o.connect(url, timeout=120) as c:
        t0 = time.perf_counter()
        while done < n:
            cmds = []
            for _ in range(batch // 2):
                cmds.append(o.NewLimit(32, cid, 2, o.BUY, 100 + cid % 50, 1))
                cmds.append(o.CancelByClient(32, cid))
                cid += 1
            c.send_many(cmds)
            done += batch
        dt = time.perf_counter() - t0
    return done / dt, dt


def paper_row(engine, label: str, reps: int = 1) -> str:
    from tollfree import paper

    best = None
    for _ in range(reps):
        r = paper.run((6, 3, 2, 3, 1, 2), engine=engine, progress=False)
        assert r.parity, "paper parity failed"
        if best is None or r.seconds < best.seconds:
            best = r
    return (f"  paper loop Python {label:<24} {best.bars_per_s:10.0f} bars/s  "
            f"({best.seconds:.3f} s for {best.bars:,} bars, combo 0, parity true)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tollfree.bench_orders")
    ap.add_argument("--rt", type=int, default=5000, help="round trips per transport")
    ap.add_argument("--pipe", type=int, default=262144, help="pipelined commands per run")
    ap.add_argument("--durability", default="none,group")
    ap.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    a = ap.parse_args(argv)
    if a.quick:
        a.rt, a.pipe = 500, 65536
    print(_machine())
    print(paper_row(None, "in-process"))
    for d in a.durability.split(","):
        try:
            svc = _Service(d)
        except RuntimeError as e:
            print(f"  (no service rows for --durability {d}: {e})")
            continue
        try:
            print(f"service, --durability {d}:")
            for kind in ("unix", "tcp"):
                med, p99 = round_trip(svc.url(kind), a.rt)
                print(f"  round trip Python {d:<5} {kind:<5} median {med * 1e6:7.2f} us  "
                      f"p99 {p99 * 1e6:7.2f} us  ({a.rt} commands)")
                rate, dt = pipelined(svc.url(kind), a.pipe)
                print(f"  pipelined Python {d:<5} {kind:<5} {rate / 1e6:.3f} M commands/s  "
                      f"({a.pipe} commands, {dt:.2f} s, one connection)")
                print(paper_row(svc.url(kind), f"service {kind} ({d})"))
        finally:
            svc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
