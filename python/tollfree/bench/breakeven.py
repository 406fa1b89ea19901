"""Break-even granularity: G = compute per call / boundary floor, per transport and call size.

The floor of a transport is its small-message round trip (echo of one float) with the zero-copy
Python client, at each CPU placement measured, plus the C client's floor where a C bench exists.
Compute per call comes from in-process rows of the same run:

- per bar: one streaming step (``Strategy.on_bar`` from Python, ctypes included),
- per combo: one combo swept alone, all threads (the in-process "80 one-combo calls" row / 80),
- per sweep: the whole default sweep, all threads, in-process.

G >> 1: the boundary is noise; G ~ 1: half the time is the boundary; G << 1: the call is
dominated by the crossing (batch it). ``overhead = floor / (compute + floor)``.
"""
from __future__ import annotations

from tollfree.bench import harness as H


def compute_per_call(arch_rows: list[dict]) -> dict:
    by = {r.get("key"): r for r in arch_rows if r.get("status") == H.OK}
    out = {}
    if "inproc_strategy" in by:
        r = by["inproc_strategy"]
        out["per bar"] = (r["median_s"] / r["bars"], "in-process Strategy.on_bar from Python")
    if "tollfree_chatty_inproc" in by:
        r = by["tollfree_chatty_inproc"]
        out["per combo"] = (r["median_s"] / r["calls"], "one combo alone, all threads, in-process")
    if "tollfree_all" in by:
        out["per sweep"] = (by["tollfree_all"]["median_s"], "default sweep, all threads, in-process")
    return out


def floors(echo_rows: list[dict], c_client: dict) -> list[tuple[str, float]]:
    out = []
    for d in echo_rows:
        if d.get("status") == H.OK and d["n_floats"] == 1 and d["client"].startswith("zero-copy"):
            out.append((f"{d['transport']}, Python {d['client']}, {d['placement']}", d["median_s"]))
    for name, s in (c_client or {}).get("floors", {}).items():
        out.append((f"{name}, C client", s))
    return out


def table(arch_rows: list[dict], echo_rows: list[dict], c_client: dict) -> dict:
    comp = compute_per_call(arch_rows)
    rows = []
    for name, fl in floors(echo_rows, c_client):
        r = {"floor": name, "floor_s": fl}
        for gran, (c, _) in comp.items():
            r[gran] = {"G": c / fl, "overhead": fl / (c + fl)}
        rows.append(r)
    return {"compute": {k: {"seconds": v[0], "source": v[1]} for k, v in comp.items()},
            "rows": rows}


def markdown(bt: dict) -> str:
    grans = list(bt["compute"])
    if not bt["rows"] or not grans:
        return "not measured (needs the echo floors and the in-process rows)"
    hdr = ["transport floor", "floor"] + [f"{g} (compute {H.fmt_time(bt['compute'][g]['seconds'])})"
                                          for g in grans]
    rows = []
    for r in bt["rows"]:
        rows.append([r["floor"], H.fmt_time(r["floor_s"])] +
                    [f"G = {r[g]['G']:.3g} (boundary {r[g]['overhead'] * 100:.3g}%)" for g in grans])
    return H.md_table(hdr, rows)
