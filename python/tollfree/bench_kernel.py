"""The kernel benchmark (``make bench-kernel``): numba against libtollfree, in-process.

    python -m tollfree.bench_kernel [--quick] [--reps N] [--out DIR]

Rows: numba 1 thread (the reference), numba ``prange`` over combos, the C reference (the spec
written out literally), the fast path at 1 thread for every ISA this CPU runs, and the fast path
at all threads. Every row is gated bit-identical (raw bits of pnl, exact trades) against numba
1 thread before it is timed; a row that fails is reported as failed and never timed. Rows are
interleaved (rotated order each round), >= 5 rounds, median and min-max; ratios against numba
1 thread measured in the same run. Also: the streaming step cost per bar for L = 6 (combo 0) up to
L = 200, in C from ``build/bench/bench_stream`` (reported "unavailable" if it is not built) and from
Python via ``Strategy.on_bar`` (which includes the ctypes call; a no-op ctypes call is measured
as its floor). Writes ``kernel.json`` and ``kernel.md`` (default ``build/report/``). Never fails
on timing; exits 1 only if a gate failed (or combo 0 misses the published fingerprint).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tollfree import binding, data, grid
from tollfree.bench import harness as H

PUBLISHED_COMBO0 = (-5165.58, 57029)
TARGET_ALL = 20.0     # x faster than numba 1 thread, all threads, this machine
TARGET_ONE = 8.0      # x faster than numba 1 thread, one thread
TARGET_STREAM_NS = {6: 100.0, 200: 1000.0}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _workload(quick: bool):
    if quick:
        return data.synthetic_close(20_000), grid.grid(6, 200, 8), "synthetic_close(20_000), grid(6, 200, 8) (--quick)"
    return data.synthetic_close(), grid.default_grid(), "synthetic_close() (150,000 bars), default_grid() (80 combos)"


def kernel_variants(close, params, one_cpu, all_cpus, ref_box):
    """The rows. ``ref_box`` receives numba 1 thread's result (computed by its own gate)."""
    from tollfree import reference

    def pin_one():
        H.pin_thread(one_cpu)

    def pin_all():
        H.pin_thread(all_cpus)

    def checker(name):
        def check(out):
            H.gate_sweep(ref_box["ref"], out, name)
        return check

    def gated(name, fn):
        def gate():
            if "ref" not in ref_box:
                raise H.GateFailure("numba reference did not run")
            H.gate_sweep(ref_box["ref"], fn(), name)
        return gate

    out = []

    def numba_gate():
        ref_box["ref"] = reference.sweep(close, params)

    out.append(H.Variant("numba, 1 thread", lambda: reference.sweep(close, params),
                         gate=numba_gate, prepare=pin_one, check=checker("numba 1 thread"),
                         meta={"threads": 1, "isa": "numba (LLVM, no fastmath)",
                               "pinning": f"CPU {min(one_cpu)}"}))
    try:
        import numba
        nthreads = numba.get_num_threads()
    except Exception:  # noqa: BLE001
        nthreads = len(all_cpus)
    fn = lambda: reference.sweep_parallel(close, params)  # noqa: E731
    out.append(H.Variant("numba prange over combos", fn, gate=gated("numba prange", fn),
                         prepare=pin_all, check=checker("numba prange"),
                         meta={"threads": nthreads, "isa": "numba (LLVM, no fastmath)",
                               "pinning": f"CPUs {','.join(map(str, sorted(all_cpus)))}"}))
    fn = lambda: binding.sweep(close, params, threads=1, isa="reference")  # noqa: E731
    out.append(H.Variant("tollfree C reference (literal spec)", fn, gate=gated("C reference", fn),
                         prepare=pin_one, check=checker("C reference"),
                         meta={"threads": 1, "isa": "reference (scalar, no sharing)",
                               "pinning": f"CPU {min(one_cpu)}"}))
    best = binding.isa_best()
    for isa in ("scalar", "sse2", "avx2", "avx512"):
        if isa == best:
            continue
        name = f"tollfree fast, isa={isa}, 1 thread"
        if not binding.isa_supported(isa):
            v = H.Variant(name, lambda: None, meta={"threads": 1, "isa": isa})
            v.status, v.reason = H.UNAVAILABLE, "this CPU cannot run it"
            out.append(v)
            continue
        fn = (lambda i=isa: binding.sweep(close, params, threads=1, isa=i))
        out.append(H.Variant(name, fn, gate=gated(name, fn), prepare=pin_one, check=checker(name),
                             meta={"threads": 1, "isa": isa, "pinning": f"CPU {min(one_cpu)}"}))
    fn = lambda: binding.sweep(close, params, threads=1)  # noqa: E731
    out.append(H.Variant(f"tollfree fast, auto ({best}), 1 thread", fn, gate=gated("fast 1T", fn),
                         prepare=pin_one, check=checker("fast 1 thread"),
                         meta={"threads": 1, "isa": best, "pinning": f"CPU {min(one_cpu)}",
                               "key": "fast_1t"}))
    fn = lambda: binding.sweep(close, params, threads=0)  # noqa: E731
    out.append(H.Variant(f"tollfree fast, auto ({best}), all threads", fn,
                         gate=gated("fast all threads", fn), prepare=pin_all,
                         check=checker("fast all threads"),
                         meta={"threads": len(all_cpus), "isa": best, "key": "fast_all",
                               "pinning": f"CPUs {','.join(map(str, sorted(all_cpus)))}"}))
    out[0].meta["key"] = "numba_1t"
    out[1].meta["key"] = "numba_prange"
    out[2].meta["key"] = "c_reference"
    return out


# ---- streaming ---------------------------------------------------------------------------------

def _bench_stream_c(quick: bool, reps: int, one_cpu) -> dict:
    exe = H.ROOT / "build" / "bench" / "bench_stream"
    if not exe.exists():
        raise H.Unavailable(f"{exe.relative_to(H.ROOT)} not built")
    lengths = "6,200" if quick else "6,20,50,100,200"
    args = [str(exe), str(H.ROOT / "data" / "default_close.f64"), "--reps", str(reps),
            "--lengths", lengths]
    p = subprocess.run(["taskset", "-c", str(min(one_cpu))] + args, capture_output=True, text=True, timeout=300)
    objs = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            objs.append(json.loads(line))
    if p.returncode != 0 and not objs:
        raise RuntimeError(f"bench_stream exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return {"source": "C (build/bench/bench_stream on data/default_close.f64, 150,000 bars)",
            "command": " ".join(["bench_stream"] + args[1:]), "raw": objs,
            "per_length": _stream_lengths(objs), "exit": p.returncode}


def _gate_ok(v) -> bool:
    return v in (True, 1, "passed", "ok", "identical")


def _stream_lengths(objs) -> dict:
    """Best-effort extraction of {L: ns_per_bar} from bench_stream's JSON objects."""
    found = {}

    def walk(o):
        if isinstance(o, dict):
            L = o.get("L", o.get("hull", o.get("length")))
            ns = None
            for k in ("ns_per_bar_median", "median_ns_per_bar", "ns_per_bar", "median_ns",
                      "ns_median", "median"):
                if isinstance(o.get(k), (int, float)):
                    ns = float(o[k])
                    break
            gate = o.get("gate", o.get("identical", o.get("bit_identical")))
            if isinstance(L, int) and (ns is not None or gate is not None):
                e = {"median_ns": ns, "gate": _gate_ok(gate) if gate is not None else None}
                for k, dst in (("ns_per_bar_min", "min_ns"), ("ns_per_bar_max", "max_ns"),
                               ("min_ns", "min_ns"), ("max_ns", "max_ns")):
                    if isinstance(o.get(k), (int, float)):
                        e[dst] = float(o[k])
                found[L] = e
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(objs)
    return found


def _bench_stream_py(close: np.ndarray, reps: int, one_cpu) -> dict:
    """Strategy.on_bar from Python (ctypes): gated on final pnl bits and trades, interleaved."""
    from tollfree import reference
    xs = close.tolist()
    lengths = (6, 200)
    variants, strategies = [], []
    for L in lengths:
        q = np.array([grid.combo(L)], dtype=np.int64)
        ref = reference.sweep(close, q)
        st = binding.Strategy(q[0])
        strategies.append(st)

        def run(st=st):
            step = st.on_bar
            for x in xs:
                step(x)
            return st

        def check(st_, ref=ref, L=L):
            got = (np.array([st_.pnl]), np.array([st_.trades]))
            H.gate_sweep(ref, got, f"Strategy L={L}")

        def gate(st=st, run=run, check=check):
            st.reset()
            check(run())

        variants.append(H.Variant(f"L={L}", run, gate=gate,
                                  prepare=(lambda st=st: (H.pin_thread(one_cpu), st.reset())),
                                  check=check, meta={"L": L}))
    # The cost of one ctypes call that does nothing much (tf_strategy_bars on a live handle):
    # what the Python figure carries on top of the C step.
    lib_bars = binding.lib().tf_strategy_bars
    handle = strategies[0]._h

    def floor_run():
        f = lib_bars
        for _ in xs:
            f(handle)
    variants.append(H.Variant("ctypes call floor", floor_run,
                              prepare=lambda: H.pin_thread(one_cpu), meta={"L": None}))
    H.interleave(variants, reps)
    per = {}
    floor = None
    for v in variants:
        s = H.summarize([x / len(xs) * 1e9 for x in v.samples]) if v.status == H.OK else {}
        if v.meta["L"] is None:
            floor = s.get("median")
            continue
        per[v.meta["L"]] = {"status": v.status, "reason": v.reason,
                            "median_ns": s.get("median"), "min_ns": s.get("min"),
                            "max_ns": s.get("max"), "gate": v.status == H.OK}
    for e in per.values():
        if e.get("median_ns") is not None and floor is not None:
            e["minus_ctypes_floor_ns"] = e["median_ns"] - floor
    return {"source": f"tollfree.Strategy.on_bar from a Python loop over {len(xs):,} floats "
                      "(includes the loop and the ctypes call; the floor is a no-op ctypes call)",
            "bars": len(xs), "ctypes_floor_ns": floor, "per_length": per,
            "pinning": f"CPU {min(one_cpu)}"}


# ---- report ------------------------------------------------------------------------------------

def _md(res: dict) -> str:
    m = res["machine"]
    L = [f"## Kernel benchmark ({'quick' if res['quick'] else 'full'} run, {m['date']})", ""]
    L.append(f"- Machine: {m.get('cpu_model_name', '?')} (family {m.get('cpu_cpu_family', '?')}, "
             f"model {m.get('cpu_model', '?')}), {m['host_cpus']} vCPUs, "
             f"{m.get('cpu_hypervisor_vendor', 'bare metal')} guest; L2 {m.get('cpu_l2_cache', '?')}; "
             f"SIMD {', '.join(m.get('cpu_simd', []))}")
    L.append(f"- Compiler: {m.get('gcc', '?')}; kernel flags `{m.get('kernel_c_flags', '?')}`; "
             f"per-ISA files: {', '.join(f'{a} `{b}`' for a, b in m.get('isa_file_flags', []))}")
    L.append(f"- numba {m.get('numba', '?')}, numpy {m['numpy']}, Python {m['python']}; "
             f"ISA auto = {m.get('isa_best')}")
    L.append(f"- Workload: {res['workload']}; {res['reps']} interleaved rounds (rotated order); "
             "GC off inside timed regions; results gated bit-identical against numba 1 thread "
             "before timing and re-checked after every timed round")
    L.append(f"- Load: {H.load_note(res['load'])}")
    L.append(f"- {H.machine_line(m)}")
    L.append("")
    hdr = ["configuration", "threads", "ISA", "pinning", "gate", "median", "min - max",
           "speed-up vs numba 1T", "per-round speed-ups"]
    rows = []
    for r in res["rows"]:
        if r["status"] == H.OK:
            rows.append([r["name"], r.get("threads", ""), r.get("isa", ""), r.get("pinning", ""),
                         "bit-identical", H.fmt_time(r["median_s"]),
                         f"{H.fmt_time(r['min_s'])} - {H.fmt_time(r['max_s'])}",
                         H.fmt_ratio(r.get("speedup_vs_numba")),
                         f"{H.fmt_ratio(r.get('speedup_per_round_min'))} - "
                         f"{H.fmt_ratio(r.get('speedup_per_round_max'))}"])
        else:
            rows.append([r["name"], r.get("threads", ""), r.get("isa", ""), r.get("pinning", ""),
                         H.status_cell(r), "-", "-", "-", "-"])
    L.append(H.md_table(hdr, rows))
    L.append("")
    su = res.get("startup", {})
    if su:
        L.append("Start-up (not in the figures above): " + "; ".join(
            f"{k} {H.fmt_time(v)}" for k, v in su.items()))
        L.append("")
    fp = res.get("fingerprint")
    if fp:
        L.append(f"Combo 0 (L=6): pnl {fp['pnl']:.2f}, trades {fp['trades']} "
                 f"(published {PUBLISHED_COMBO0[0]:.2f}, {PUBLISHED_COMBO0[1]}): "
                 f"{'match' if fp['match'] else 'MISMATCH'}")
        L.append("")
    L.append("Streaming step per bar (fed the whole series after a warm-up pass; gated: the "
             "stream's final pnl bits and trades equal the batch sweep's for that combo):")
    L.append("")
    srows = []
    for which in ("stream_c", "stream_py"):
        s = res.get(which, {})
        if s.get("status") not in (None, H.OK):
            srows.append([s.get("source", which), "-", H.status_cell(s), "-", "-"])
            continue
        for Lk, e in sorted(s.get("per_length", {}).items(), key=lambda kv: int(kv[0])):
            med = e.get("median_ns")
            extra = ""
            if e.get("minus_ctypes_floor_ns") is not None:
                extra = f" (~{e['minus_ctypes_floor_ns']:.0f} ns without the ctypes call floor)"
            lo, hi = e.get("min_ns"), e.get("max_ns")
            tgt = TARGET_STREAM_NS.get(int(Lk)) if which == "stream_c" else None
            srows.append([s["label"], f"L = {Lk}",
                          "bit-identical" if e.get("gate") else "FAILED",
                          f"{med:.0f} ns{extra}" if med is not None else e.get("reason", "-"),
                          f"{lo:.0f} - {hi:.0f} ns" if lo is not None and hi is not None else "-"]
                         + ([f"<= {tgt:.0f} ns in C"] if tgt else ["-"]))
    L.append(H.md_table(["measured", "length", "gate", "median per bar", "min - max", "target"],
                        srows))
    L.append("")
    for which in ("stream_c", "stream_py"):
        s = res.get(which, {})
        if s.get("source"):
            L.append(f"- {s['label']}: {s['source']}" + (f"; pinned {s['pinning']}"
                                                         if s.get("pinning") else ""))
    L.append("")
    L.append("Targets:")
    L.append("")
    for t in res["targets"]:
        L.append(f"- {t}")
    L.append("")
    return "\n".join(L)


def _targets(res: dict) -> list[str]:
    out = []
    by = {r.get("key"): r for r in res["rows"]}

    def sp(key):
        r = by.get(key)
        return r.get("speedup_vs_numba") if r and r["status"] == H.OK else None

    for key, tgt, what in (("fast_all", TARGET_ALL, "all threads"), ("fast_1t", TARGET_ONE, "1 thread")):
        x = sp(key)
        if x is None:
            out.append(f"fast path {what} >= {tgt:.0f}x numba 1 thread: not measured "
                       f"({by.get(key, {}).get('status', 'missing')})")
        else:
            out.append(f"fast path {what} >= {tgt:.0f}x numba 1 thread: {x:.1f}x, "
                       f"{'met' if x >= tgt else 'MISSED'}")
    failed = [r["name"] for r in res["rows"] if r["status"] == H.FAILED]
    out.append("zero differing bits in every gated configuration: "
               + ("met" if not failed else "MISSED: " + ", ".join(failed)))
    s = res.get("stream_c", {})
    py = res.get("stream_py", {})
    for L, tgt in TARGET_STREAM_NS.items():
        e = s.get("per_length", {}).get(L)
        p = py.get("per_length", {}).get(L)
        if e and e.get("median_ns") is not None:
            out.append(f"streaming step L={L} <= {tgt:.0f} ns in C: {e['median_ns']:.0f} ns, "
                       f"{'met' if e['median_ns'] <= tgt else 'MISSED'}")
        elif p and p.get("median_ns") is not None:
            out.append(f"streaming step L={L} <= {tgt:.0f} ns in C: not measured in C "
                       f"({s.get('reason', '')}); from Python {p['median_ns']:.0f} ns per bar "
                       "including the ctypes call")
        else:
            out.append(f"streaming step L={L} <= {tgt:.0f} ns in C: not measured")
    if res.get("quick"):
        out = [t + " [quick workload: not comparable]" if "x numba" in t else t for t in out]
    return out


def run(quick: bool = False, reps: int = 5, out_dir: str | Path | None = None) -> dict:
    reps = max(int(reps), 5)
    out_dir = Path(out_dir) if out_dir else H.ROOT / "build" / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    mon = H.LoadMonitor()
    print(H.machine_line(), flush=True)
    cpu_list = H.ALL_CPUS
    one_cpu, all_cpus = {cpu_list[-1]}, set(cpu_list)
    H.pin_thread(all_cpus)
    close, params, workload = _workload(quick)

    startup = {}
    t0 = time.perf_counter()
    binding.lib()
    startup["libtollfree load"] = time.perf_counter() - t0
    from tollfree import reference
    t0 = time.perf_counter()
    reference.warm_up()  # JIT compile of both numba entry points, out of the timed rows
    startup["numba JIT compile (sweep + sweep_parallel)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    binding.sweep(close, params[:1], threads=1)
    startup["tollfree first call (1 combo, cold)"] = time.perf_counter() - t0

    _log(f"bench_kernel: {workload}, {reps} rounds")
    ref_box: dict = {}
    variants = kernel_variants(close, params, one_cpu, all_cpus, ref_box)
    H.interleave(variants, reps, log=_log)
    H.pin_thread(all_cpus)
    rows = [H.row(v) for v in variants]
    numba_med = rows[0].get("median_s") if rows[0]["status"] == H.OK else None
    for r in rows:
        if r["status"] == H.OK and numba_med:
            r["speedup_vs_numba"] = numba_med / r["median_s"]
            # The same ratio per round (numba's round i over this row's round i): its spread.
            per = [a / b for a, b in zip(rows[0]["samples_s"], r["samples_s"])]
            r["speedup_per_round_min"], r["speedup_per_round_max"] = min(per), max(per)

    res = {"quick": quick, "reps": reps, "workload": workload, "startup": startup,
           "rows": rows, "machine": H.machine_info()}
    if not quick and "ref" in ref_box:
        pnl0, tr0 = float(ref_box["ref"][0][0]), int(ref_box["ref"][1][0])
        res["fingerprint"] = {"pnl": pnl0, "trades": tr0,
                              "match": f"{pnl0:.2f}" == f"{PUBLISHED_COMBO0[0]:.2f}"
                              and tr0 == PUBLISHED_COMBO0[1]}
    try:
        c = _bench_stream_c(quick, reps, one_cpu)
        c.update(status=H.OK, label="C, tf_strategy_step", pinning=f"CPU {min(one_cpu)}")
        if not c["per_length"]:
            c.update(status=H.ERROR, reason="bench_stream output not understood (raw JSON kept)")
    except H.Unavailable as e:
        c = {"status": H.UNAVAILABLE, "reason": str(e), "label": "C"}
    except Exception as e:  # noqa: BLE001
        c = {"status": H.ERROR, "reason": f"{type(e).__name__}: {e}", "label": "C"}
    res["stream_c"] = c
    py = _bench_stream_py(close, reps, one_cpu)
    py.update(status=H.OK, label="Python, Strategy.on_bar")
    res["stream_py"] = py
    H.pin_thread(all_cpus)
    res["load"] = mon.finish()
    res["targets"] = _targets(res)
    stream_ok = all(e.get("gate") is not False
                    for s_ in (res["stream_c"], res["stream_py"])
                    for e in s_.get("per_length", {}).values())
    res["gate_passed"] = all(r["status"] != H.FAILED for r in rows) and stream_ok and \
        res.get("fingerprint", {"match": True})["match"]
    res["errors"] = [f"{r['name']}: {r.get('reason')}" for r in rows if r["status"] == H.ERROR]
    (out_dir / "kernel.json").write_text(json.dumps(res, indent=1, default=str))
    md = _md(res)
    (out_dir / "kernel.md").write_text(md + "\n")
    print(md)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tollfree.bench_kernel", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a seconds-long smoke run (small data)")
    ap.add_argument("--reps", type=int, default=5, help="interleaved rounds (at least 5)")
    ap.add_argument("--out", default=None, help="output folder (default build/report)")
    a = ap.parse_args(argv)
    res = run(quick=a.quick, reps=a.reps, out_dir=a.out)
    return 0 if res["gate_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
