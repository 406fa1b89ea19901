"""The strategy benchmark (``make bench-strategies``): the library's strategies against numba.

    python -m tollfree.bench_strategies [--quick] [--reps N] [--out DIR]

Side by side in one run, on the default data (150,000 bars), the gate first:

1. each built-in's sweep of 1,000 combos (donchian: 200, see below) through the library on one
   thread (``tf_sweep_with``) against its numba reference (:mod:`tollfree.reference_strategies`,
   one combo after another, one thread); target >= 10x;
2. a numba strategy (an EMA cross written as ``init``/``step``, :data:`EMA_NUMBA`) through the
   library (compiled with ``numba.cfunc``, run by the C sweep without the GIL) on one and on two
   threads, against the same numba loop (its ``init``/``step`` and the booking, jitted) called
   once per combo from Python; targets: no slower on one thread, >= 1.8x on two. The library
   runs it through its compiled ``changes`` member (several combos a call, only the bars where a
   position moves booked); one more row runs the same def without that member (its ``steps``,
   every bar's target booked) to show what the member gives.

Every row is first checked bit for bit (pnl and trades, raw bits) against its reference; a row
that fails is reported as failed and not timed. Timings: the best and the median of ``reps``
runs (the numba references run ``ref_reps`` times: they take seconds). donchian's reference
scans its window at every bar (O(window) per bar), so its grid is 200 windows, 2 .. 201.
Prints the CPU model and the ISA; writes ``strategies.json`` and ``strategies.md`` (default
``build/report/``). Exits 1 only when a gate failed; never on timing.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

import tollfree
from tollfree import data, grid, strategies
from tollfree import reference_strategies as R
from tollfree.bench import harness as H

TARGET_BUILTIN = 10.0
TARGET_NUMBA_ONE = 1.0
TARGET_NUMBA_TWO = 1.8


# The numba strategy of row 2: an EMA cross (fast, slow), +1 while the fast EMA is above the
# slow one, -1 while below, HOLD before bar slow-1 and on equality. state: [a_fast, a_slow,
# ema_fast, ema_slow, bars seen, slow].
@njit(cache=False)
def ema_init(s, p):
    if not (p[0] >= 1 and p[0] < p[1]):
        return 1
    s[0] = 2.0 / (p[0] + 1.0)
    s[1] = 2.0 / (p[1] + 1.0)
    s[5] = p[1]
    return 0


@njit(cache=False)
def ema_step(s, close):
    i = s[4]
    s[4] = i + 1.0
    if i == 0.0:
        s[2] = close
        s[3] = close
    else:
        s[2] = s[2] + s[0] * (close - s[2])
        s[3] = s[3] + s[1] * (close - s[3])
    if i < s[5] - 1.0:
        return 2
    if s[2] > s[3]:
        return 1
    if s[2] < s[3]:
        return -1
    return 2


EMA_NUMBA = strategies.define("ema_numba", ["fast", "slow"], ema_init, ema_step, state=6)


def grids(quick: bool) -> dict:
    """1,000 combos per built-in (donchian 200); --quick: about a tenth."""
    f = 4 if quick else 1

    def fs(lo, n):
        return list(range(lo, lo + n // f))
    return {
        "sma_cross": grid.product(fast=fs(2, 40), slow=(50, 290, 10)),
        "ema_cross": grid.product(fast=fs(2, 40), slow=(50, 290, 10)),
        "donchian": grid.product(window=fs(2, 200)),
        "rsi": grid.product(period=fs(2, 40), lower=[10, 20, 25, 30, 35],
                            upper=[65, 70, 75, 80, 90]),
        "bollinger": grid.product(window=fs(10, 50), k=(0.5, 2.45, 0.1)),
    }


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _time(fn, reps: int) -> tuple[list[float], object]:
    out, ts = None, []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return ts, out


def _same(ref, got) -> bool:
    return (ref[0].tobytes() == got[0].tobytes()
            and np.array_equal(np.asarray(ref[1]), np.asarray(got[1])))


def _without_changes(r: strategies.Resolved) -> strategies.Resolved:
    """r's def without its changes member: the sweep books every target of its steps."""
    d = strategies.StrategyDef.from_buffer_copy(
        ctypes.cast(r.ptr, ctypes.POINTER(strategies.StrategyDef)).contents)
    d.lanes, d.changes = 0, strategies.CHANGES_FN()
    return strategies.Resolved(ctypes.addressof(d), r.kind, r.spec, (d, r))


def _per_combo(close, params, fee):
    """The numba strategy's own loop (init, step, the booking), called once per combo from
    Python: what a user would write without tollfree."""
    init, step, n_state = EMA_NUMBA.numba_parts()
    m = params.shape[0]
    pnl = np.empty(m)
    trades = np.empty(m, dtype=np.int64)
    for j in range(m):
        pnl[j], trades[j] = R.user_pnl(init, step, n_state, close, params[j], fee)
    return pnl, trades


def run(quick: bool = False, reps: int = 3, ref_reps: int = 1) -> dict:
    close = data.default_close()
    fee = tollfree.binding.FEE_DEFAULT
    if quick:
        close = close[:30_000].copy()
    # No pinning: the library's sweep threads are its own (a pool made once), and a pinned caller
    # would pin them too. One-thread rows run one thread either way.
    info = H.machine_info()
    _log(H.machine_line(info))
    rows, failed = [], False
    # warm-up: compile every reference and the numba strategy on a tiny input
    tiny = close[:64].copy()
    for name, g in grids(True).items():
        R.sweep(name, tiny, g[:2])
    R.sweep(EMA_NUMBA, tiny, np.array([[2.0, 5.0]]))
    _per_combo(tiny, np.array([[2.0, 5.0]]), fee)
    tollfree.sweep(tiny, np.array([[2.0, 5.0]]), strategy=EMA_NUMBA, threads=1)

    for name, g in grids(quick).items():
        _log(f"{name}: {g.shape[0]} combos, numba reference ...")
        rt, ref = _time(lambda: R.sweep(name, close, g, fee), ref_reps)
        ct, got = _time(lambda: tollfree.sweep(close, g, threads=1, strategy=name, fee=fee), 1)
        ok = _same(ref, got)
        row = {"row": f"{name}, 1 thread", "combos": int(g.shape[0]), "gate": ok,
               "ref_s": min(rt), "ref_runs": rt}
        if ok:
            ct, _ = _time(lambda: tollfree.sweep(close, g, threads=1, strategy=name, fee=fee),
                          reps)
            row.update(tollfree_s=min(ct), tollfree_median_s=statistics.median(ct),
                       tollfree_runs=ct, speedup=min(rt) / min(ct), target=TARGET_BUILTIN)
        else:
            failed = True
        rows.append(row)
        _log(f"  {row}")

    g = grids(quick)["ema_cross"]
    _log(f"numba strategy: {g.shape[0]} combos ...")
    pt, pc = _time(lambda: _per_combo(close, g, fee), ref_reps)
    full = EMA_NUMBA.resolved()
    plain = _without_changes(full)
    for th, target, s, what in ((1, TARGET_NUMBA_ONE, full, ""), (2, TARGET_NUMBA_TWO, full, ""),
                                (1, None, plain, ", steps member only (changes off)")):
        ct, got = _time(lambda: tollfree.sweep(close, g, threads=th, strategy=s, fee=fee), 1)
        ok = _same(pc, got)
        row = {"row": f"numba strategy via tollfree{what}, {th} thread{'s' if th > 1 else ''}",
               "combos": int(g.shape[0]), "gate": ok, "ref": "the same numba loop per combo "
               "from Python, 1 thread", "ref_s": min(pt), "ref_runs": pt}
        if ok:
            ct, _ = _time(lambda: tollfree.sweep(close, g, threads=th, strategy=s, fee=fee),
                          reps)
            row.update(tollfree_s=min(ct), tollfree_median_s=statistics.median(ct),
                       tollfree_runs=ct, speedup=min(pt) / min(ct))
            if target is not None:
                row["target"] = target
        else:
            failed = True
        rows.append(row)
        _log(f"  {row}")
    # the same EMA cross as the built-in: the cost of calling a numba step through a pointer
    ct, got = _time(lambda: tollfree.sweep(close, g, threads=1, strategy="ema_cross", fee=fee),
                    reps)
    rows.append({"row": "ema_cross built-in (same logic), 1 thread", "combos": int(g.shape[0]),
                 "gate": True, "tollfree_s": min(ct), "tollfree_median_s": statistics.median(ct),
                 "tollfree_runs": ct})
    return {"machine": info, "bars": int(close.shape[0]), "quick": quick, "rows": rows,
            "failed": failed}


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [f"Strategies, {res['bars']:,} bars, {m.get('cpu_model_name', '?')}, ISA "
             f"{m.get('isa_best', '?')}, load {m.get('loadavg_1min', '?')}"
             + (" (--quick)" if res["quick"] else ""), "",
             "| row | combos | gate | reference s | tollfree s (best / median) | speedup | "
             "target |", "|---|---:|---|---:|---:|---:|---:|"]
    for r in res["rows"]:
        ref = f"{r['ref_s']:.3f}" if "ref_s" in r else "-"
        tf = (f"{r['tollfree_s']:.3f} / {r['tollfree_median_s']:.3f}"
              if "tollfree_s" in r else "not timed")
        sp = (f"{r['speedup']:.{1 if r['speedup'] >= 10 else 2}f}x" if "speedup" in r
              else "-")
        tg = f">= {r['target']:g}x" if "target" in r else "-"
        lines.append(f"| {r['row']} | {r['combos']:,} | {'ok' if r['gate'] else 'FAILED'} | "
                     f"{ref} | {tf} | {sp} | {tg} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tollfree.bench_strategies")
    ap.add_argument("--quick", action="store_true", help="30,000 bars and ~1/4 of the combos")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ref-reps", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "build" / "report"))
    a = ap.parse_args(argv)
    res = run(a.quick, max(1, a.reps), max(1, a.ref_reps))
    md = markdown(res)
    print(md)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "strategies.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(os.path.join(a.out, "strategies.md"), "w") as f:
        f.write(md)
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
