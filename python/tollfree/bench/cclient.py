"""The C client's floors: ``build/bench/bench_transport`` (JSON lines), when it exists.

bench_transport starts its own ``tollfree serve`` (a separate process) and pins both sides with
``--cpu-client/--cpu-server``. It runs twice: cross vCPU with the default spin budget (the
placement where spinning pays) and same vCPU with ``--spin 0`` (spinning on a shared vCPU only
burns the peer's time). Its lines are kept verbatim in results.json; the small-message floors and
the per-bar session cost are picked out for the break-even and study tables. A line with
``bit_identical: false`` fails the gate.
"""
from __future__ import annotations

import json
import subprocess

from tollfree.bench import harness as H

EXE = H.ROOT / "build" / "bench" / "bench_transport"


def _one(placement: str, spin: int | None, quick: bool, reps: int) -> dict:
    from tollfree import _lib
    cl, sv = H.placement_cpus(placement)
    args = [str(EXE), "--bin", _lib.bin_path(), "--data", str(H.ROOT / "data" / "default_close.f64"),
            "--cpu-client", str(min(cl)), "--cpu-server", str(min(sv)), "--reps", str(reps)]
    if spin is not None:
        args += ["--spin", str(spin)]
    if quick:
        args.append("--quick")
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    lines = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if p.returncode != 0 and not lines:
        raise RuntimeError(f"bench_transport exited {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[-300:]}")
    return {"placement": placement, "spin": spin, "args": " ".join(args[1:]), "lines": lines,
            "exit": p.returncode}


def run(server, quick: bool, reps: int = 5) -> dict:
    """``server`` is unused (the C bench starts its own); kept for symmetry with other rows."""
    if not EXE.exists():
        return {"status": H.UNAVAILABLE,
                "reason": f"{EXE.relative_to(H.ROOT)} not built (no C client bench yet)"}
    runs = []
    try:
        runs.append(_one("cross", None, quick, reps))
        if not quick:
            runs.append(_one("same", 0, quick, reps))
    except H.Unavailable as e:
        return {"status": H.UNAVAILABLE, "reason": str(e)}
    except subprocess.TimeoutExpired:
        return {"status": H.ERROR, "reason": "bench_transport ran past 300 s"}
    except Exception as e:  # noqa: BLE001
        return {"status": H.ERROR, "reason": f"{type(e).__name__}: {e}"}
    floors, per_bar = {}, {}
    failed, errors = [], []
    for r in runs:
        tag = f"{r['placement']} vCPU, spin {'default' if r['spin'] is None else r['spin']}"
        for o in r["lines"]:
            o["run"] = tag
            if o.get("bit_identical") is False:
                failed.append(f"{o.get('bench')} {o.get('transport')} ({tag})")
            if o.get("errors"):
                errors.append(f"{o.get('bench')} {o.get('transport')} ({tag}): {o['errors']} errors")
            if o.get("bench") == "echo" and o.get("bytes", 0) <= 16 and "p50_us" in o:
                floors[f"{o['transport']}, {tag}"] = o["p50_us"] * 1e-6
            if o.get("bench") == "session_bar" and "per_bar_us" in o and o.get("bit_identical"):
                per_bar[f"{o['transport']}, {tag}"] = o["per_bar_us"] * 1e-6
    shm = [v for k, v in per_bar.items() if k.startswith("shm")]
    out = {"status": H.FAILED if failed else (H.ERROR if errors else H.OK),
           "reason": "; ".join(failed or errors), "runs": runs, "floors": floors,
           "per_bar": per_bar, "per_bar_shm_s": min(shm) if shm else None}
    return out


def markdown(res: dict) -> str:
    if res.get("status") not in (H.OK,) and not res.get("runs"):
        return f"C client rows: {res.get('status')} ({res.get('reason', '')})"
    head = ("`build/bench/bench_transport` (C client library, its own server process, pinned with "
            "sched_setaffinity):")
    rows = []
    for r in res["runs"]:
        for o in r["lines"]:
            b = o.get("bench")
            if b == "echo":
                rows.append([o["run"], o["transport"], f"echo {o['bytes']:,} B", f"{o['n']:,}",
                             H.fmt_time(o["p50_us"] * 1e-6), H.fmt_time(o["p99_us"] * 1e-6),
                             "-" if not o.get("errors") else f"{o['errors']} errors"])
            elif b == "session_bar":
                rows.append([o["run"], o["transport"], "session, one bar per call", f"{o['bars']:,}",
                             H.fmt_time(o["per_bar_us"] * 1e-6) + " per bar", "-",
                             "bit-identical" if o.get("bit_identical") else "FAILED"])
            elif b == "sweep_boundary":
                rows.append([o["run"], o["transport"], f"batch sweep vs in-process ({o['reps']} reps)",
                             "-", f"SWEEP_DS {o['ratio_sweep_ds_median']:.4f}x "
                             f"({o['ratio_sweep_ds_min']:.4f} - {o['ratio_sweep_ds_max']:.4f}); "
                             f"v1 {o['ratio_v1_median']:.4f}x", "-",
                             "bit-identical" if o.get("bit_identical") else "FAILED"])
            else:
                rows.append([o["run"], o.get("transport", ""), str(b), "-", json.dumps(o)[:80], "-", "-"])
    tbl = H.md_table(["run", "transport", "what", "n", "median", "p99", "gate"], rows)
    note = "" if res.get("status") == H.OK else f"\n\nstatus: {res['status']} ({res.get('reason')})"
    return head + "\n\n" + tbl + note
