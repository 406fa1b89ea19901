"""report.md, the PNG plots and the headline table of the boundary benchmark."""
from __future__ import annotations

import json
from pathlib import Path

from tollfree.bench import architecture, breakeven, cclient, serialization, study
from tollfree.bench import harness as H


# ---- headline ----------------------------------------------------------------------------------

def _arch_rows(results: dict) -> dict:
    return {r.get("key"): r for r in results.get("architecture", {}).get("rows", [])}


def _echo_row(results, transport, client, n):
    return study._echo(results, transport, client, n)


def headline(results: dict) -> str:
    """The headline table (plain text, fits a terminal) from a results dict."""
    by = _arch_rows(results)
    lines = []
    m = results.get("machine", {})
    lines.append(f"tollfree boundary benchmark ({'quick' if results.get('quick') else 'full'} run, "
                 f"{m.get('date', '?')}, {m.get('cpu_model_name', '?')}, "
                 f"{m.get('host_cpus', '?')} vCPUs)")
    w = 58
    lines.append(f"{'row':<{w}} {'median':>11} {'per call':>10} {'vs tollfree':>11} {'vs numba':>9}")
    lines.append("-" * (w + 45))
    keys = ["numba_1t", "tollfree_1t", "tollfree_all", "batch_v2_unix", "batch_v2_shm",
            "batch_v1_unix", "chatty_v1_unix", "chatty_v2_unix", "chatty_v2_shm", "spawn_sweep",
            "perbar_unix_same", "perbar_unix_cross", "perbar_shm_cross"]
    for k in keys:
        r = by.get(k)
        if r is None:
            continue
        name = r["name"] if len(r["name"]) <= w else r["name"][: w - 3] + "..."
        if r["status"] != H.OK:
            lines.append(f"{name:<{w}} {r['status'] + ': ' + r.get('reason', '')[:40]}")
            continue
        pc = H.fmt_time(r.get("per_call_s")) if r.get("calls", 1) > 1 or r.get("bars") else ""
        lines.append(f"{name:<{w}} {H.fmt_time(r['median_s']):>11} {pc:>10} "
                     f"{H.fmt_ratio(r.get('ratio_vs_tollfree')):>11} "
                     f"{H.fmt_ratio(r.get('ratio_vs_numba')):>9}")
    for tr, client, n in (("unix", "naive", 1), ("unix", "zero-copy", 1), ("shm", "zero-copy", 1),
                          ("unix", "naive", 150_000), ("unix", "zero-copy", 150_000),
                          ("shm", "zero-copy", 150_000)):
        d = _echo_row(results, tr, client, n)
        if d:
            what = f"echo {8 * n:,} B over {tr}, {client} Python client ({d['placement']})"
            lines.append(f"{what[:w]:<{w}} {H.fmt_time(d['median_s']):>11} "
                         f"{'p99 ' + H.fmt_time(d['p99_s']):>10}")
    fits = [f for f in results.get("echo", {}).get("fits", [])
            if f.get("fit") and f["client"] in ("zero-copy", "naive")]
    if fits:
        lines.append("echo fit T(b) = floor + 2b/bandwidth (floor, bandwidth):")
        for tr in ("unix", "tcp", "shm"):
            sel = [f for f in fits if f["transport"] == tr]
            if sel:
                lines.append(f"  {tr:<5} " + "; ".join(
                    f"{f['client']} {f['placement']} {H.fmt_time(f['fit']['floor_s'])}, "
                    f"{f['fit']['bandwidth_Bps'] / 1e9:.1f} GB/s" for f in sel))
    st = results.get("study", [])
    if st:
        met = sum(r["verdict"] == "met" for r in st)
        missed = [r["what"] for r in st if r["verdict"] == "MISSED"]
        lines.append(f"targets: {met} met, {len(missed)} missed"
                     + (f" ({'; '.join(missed)})" if missed else "")
                     + f", {sum(r['verdict'] == 'not measured' for r in st)} not measured")
    g = results.get("gate", {})
    lines.append("gate: " + ("passed (every timed row bit-identical)" if g.get("passed")
                             else f"FAILED: {', '.join(g.get('failed', []))}"))
    return "\n".join(lines)


def headline_from_file(path: str | Path | None = None) -> str:
    path = Path(path) if path else H.ROOT / "build" / "report" / "results.json"
    return headline(json.loads(Path(path).read_text()))


# ---- plots -------------------------------------------------------------------------------------

def plot_echo(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = results.get("echo", {}).get("rows", [])
    placements = [p for p in ("cross", "same") if any(d.get("placement_kind") == p for d in rows)]
    if not placements:
        return
    fig, axes = plt.subplots(1, len(placements), figsize=(6.5 * len(placements), 4.8),
                             squeeze=False)
    colors = {"unix": "#1f77b4", "tcp": "#d62728", "shm": "#2ca02c"}
    for ax, pl in zip(axes[0], placements):
        for tr in ("unix", "tcp", "shm"):
            for client, style in (("zero-copy", "-o"), ("naive", "--s"),
                                  ("zero-copy, no spin", "-.^")):
                pts = sorted((d["bytes"], d["median_s"] * 1e6, d["p99_s"] * 1e6) for d in rows
                             if d.get("placement_kind") == pl and d.get("transport") == tr
                             and d.get("client") == client and d.get("status") == H.OK)
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=colors[tr],
                        label=f"{tr}, {client}", markersize=4)
                ax.plot([p[0] for p in pts], [p[2] for p in pts], ":", color=colors[tr],
                        alpha=0.25, linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("payload bytes each way")
        ax.set_ylabel("round trip, median (us); dotted: p99")
        ax.set_title(f"Echo from Python, {pl} vCPU")
        ax.grid(True, which="both", alpha=0.25)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_architecture(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in results.get("architecture", {}).get("rows", [])
            if r["status"] == H.OK and r.get("section") != "oneoff"]
    if not rows:
        return
    rows.sort(key=lambda r: r["median_s"])
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5))
    kinds = {"in-process": "#2ca02c", "batch": "#1f77b4", "chatty": "#9467bd", "spawn": "#8c564b",
             "per-bar": "#d62728"}
    ax.barh([r["name"] for r in rows], [r["median_s"] for r in rows],
            xerr=[[r["median_s"] - r["min_s"] for r in rows], [r["max_s"] - r["median_s"] for r in rows]],
            color=[kinds.get(r.get("kind"), "#888") for r in rows], capsize=2)
    ax.set_xscale("log")
    ax.set_xlabel(f"seconds for the job (median, min-max), {results['architecture']['n_combos']} combos x "
                  f"{results['architecture']['n_bars']:,} bars")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title("The same sweep across every boundary")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- report.md ---------------------------------------------------------------------------------

def _machine_md(res: dict) -> str:
    m = res["machine"]
    return "\n".join([
        f"- Date: {m['date']}; git {m.get('git', '?')}; {'quick' if res['quick'] else 'full'} run, "
        f"{res['reps']} interleaved rounds (rotated order)",
        f"- Machine: {m.get('cpu_model_name', '?')} (family {m.get('cpu_cpu_family', '?')}, model "
        f"{m.get('cpu_model', '?')}), {m['host_cpus']} vCPUs, {m.get('cpu_hypervisor_vendor', 'bare metal')} "
        f"guest, Linux {m['kernel']}; SIMD {', '.join(m.get('cpu_simd', []))}",
        f"- Compiler: {m.get('gcc', '?')}; kernel flags `{m.get('kernel_c_flags', '?')}`; ISA auto = "
        f"{m.get('isa_best', '?')}",
        f"- Python {m['python']}, numpy {m['numpy']}, numba {m.get('numba', '?')}",
        f"- Workload: {res['workload']}",
        f"- Server: {res['server'].get('args', res['server'].get('reason', ''))}",
        f"- Load: {H.load_note(res['load'])}",
        f"- {H.machine_line(m)}",
        "- GC off inside timed regions; every row gated bit-identical before timing and re-checked "
        "after every timed round",
    ])


def _fits_md(res: dict) -> str:
    rows = []
    for f in res.get("echo", {}).get("fits", []):
        if f.get("fit"):
            rows.append([f["transport"], f["client"], f["placement"], H.fmt_time(f["fit"]["floor_s"]),
                         f"{f['fit']['bandwidth_Bps'] / 1e9:.2f} GB/s"])
    return H.md_table(["transport", "client", "placement", "floor", "bandwidth"], rows) if rows \
        else "no fit (echo rows missing)"


def _echo_md(res: dict) -> str:
    rows = []
    seen = set()
    for d in sorted(res.get("echo", {}).get("rows", []),
                    key=lambda d: (d.get("transport", ""), d.get("placement_kind", ""),
                                   d.get("client", ""), d["n_floats"])):
        if d["status"] != H.OK:
            k = (d.get("transport"), d["client"], d["status"], d.get("reason"),
                 d["n_floats"] if d["status"] == H.FAILED else None)
            if k in seen:
                continue
            seen.add(k)
            size = f"{d['n_floats']:,}" if d["status"] == H.FAILED else "all"
            rows.append([d.get("transport"), d.get("placement_kind") if size != "all" else "all",
                         d["client"], size, "-", H.status_cell(d), "-", "-", "-"])
            continue
        rows.append([d.get("transport"), d.get("placement_kind"), d["client"], f"{d['n_floats']:,}",
                     f"{d['bytes']:,}", H.fmt_time(d["median_s"]), H.fmt_time(d["p99_s"]),
                     f"{H.fmt_time(d['round_median_min_s'])} - {H.fmt_time(d['round_median_max_s'])}",
                     d["calls"]])
    return H.md_table(["transport", "vCPU", "client", "floats", "bytes", "median", "p99",
                       "round medians min - max", "calls"], rows)


def markdown(res: dict) -> str:
    L = ["# tollfree boundary benchmark", "",
         "Generated by `python -m tollfree.bench`" + (" --quick" if res["quick"] else "") + ".", "",
         _machine_md(res), "", "## Headline", "", "```", headline(res), "```", "",
         "## Architecture table", "",
         architecture.__doc__.split("\n\n", 2)[2].strip(), "",
         architecture.markdown(res["architecture"]), "",
         "![architecture](architecture.png)", "",
         "### The batch sweep's boundary share, paired", "",
         " ".join(w.strip() for w in architecture.paired_batch.__doc__.split("\n\n")[0].splitlines()),
         "",
         architecture.paired_markdown(res["architecture"].get("paired", {})), "",
         "## Start-up and one-off costs (not in the figures above)", "",
         architecture.oneoff_markdown(res["architecture"], res["startup"], res.get("startup_extra", {})),
         "", "## Echo curve", "",
         "naive = the study's client habits (bytes concatenation, fresh buffers; v1 echo over "
         "sockets, `tobytes()`/`bytes()` copies around the shm client); zero-copy = "
         "`tollfree.connect(url).echo`. Pinned: cross = client CPU 0 / server CPU 1, same = both "
         "on CPU 1.", "",
         "![echo curve](echo_curve.png)", "",
         _echo_md(res), "",
         "Fit `T(b) = floor + 2 b / bandwidth` (b = bytes each way; least squares on relative "
         "error of the medians):", "", _fits_md(res), "",
         "## Serialization tax", "",
         f"{res['serialization']['n_floats']:,} floats ({res['serialization']['bytes']:,} bytes), "
         "encode + decode, each gated to round-trip bit-identically.", "",
         serialization.markdown(res["serialization"]), "",
         "![serialization](serialization.png)", "",
         "## C client floors", "", cclient.markdown(res.get("c_client", {})), "",
         "## Break-even granularity", "", breakeven.__doc__.split("\n\n", 1)[1].strip(), "",
         breakeven.markdown(res["breakeven"]), "",
         "## Study vs tollfree", "", study.CAVEAT, "", study.markdown(res["study"]), ""]
    problems = [r for r in res["architecture"]["rows"] if r["status"] != H.OK]
    problems += [d for d in res["startup"].values() if d["status"] != H.OK]
    if problems:
        L += ["## Rows not measured", ""]
        L += [f"- {r['name']}: {r['status']} ({r.get('reason', '')})" for r in problems]
        L.append("")
    return "\n".join(L)


def write(res: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(res, indent=1, default=str))
    for fn, name in ((plot_echo, "echo_curve.png"), (plot_architecture, "architecture.png")):
        try:
            fn(res, out_dir / name)
        except Exception as e:  # noqa: BLE001 - a plot never sinks the report
            res.setdefault("plot_errors", []).append(f"{name}: {e}")
    try:
        serialization.plot(res["serialization"], out_dir / "serialization.png")
    except Exception as e:  # noqa: BLE001
        res.setdefault("plot_errors", []).append(f"serialization.png: {e}")
    (out_dir / "report.md").write_text(markdown(res) + "\n")
    (out_dir / "results.json").write_text(json.dumps(res, indent=1, default=str))
