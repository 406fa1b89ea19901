"""The published study's figures next to ours, with the targets (docs/benchmarks.md).

Machines differ (the study: an Apple M2 Max; here: a 2-vCPU KVM guest), so absolute times are not
comparable: the ratios within each run are the comparison. Every target of the right-hand column
is judged here: met, MISSED, or not measured (with the reason).
"""
from __future__ import annotations

from tollfree.bench import harness as H

CAVEAT = ("The study ran on an Apple M2 Max (12 cores); these figures come from a 2-vCPU AMD EPYC "
          "KVM guest shared with other work. Absolute times are not comparable across machines: "
          "compare the ratios, each measured within one run.")


def _arch(res, key):
    for r in res.get("architecture", {}).get("rows", []):
        if r.get("key") == key:
            return r
    return None


def _ok(r):
    return r is not None and r.get("status") == H.OK


def _echo(res, transport, client, n, placement=None):
    """The echo row(s) for (transport, client, n floats); the fastest placement if not given."""
    best = None
    for d in res.get("echo", {}).get("rows", []):
        if d.get("transport") == transport and d.get("client") == client and \
                d.get("n_floats") == n and d.get("status") == H.OK and \
                (placement is None or d.get("placement") == placement):
            if best is None or d["median_s"] < best["median_s"]:
                best = d
    return best


def _ser(res, prefix):
    for d in res.get("serialization", {}).get("rows", []):
        if d["name"].startswith(prefix) and d.get("status") == H.OK:
            return d
    return None


def _verdict(ok) -> str:
    if ok == "info":
        return "-"
    return "not measured" if ok is None else ("met" if ok else "MISSED")


def compare(res: dict) -> list[dict]:
    """Rows: what, study figure, ours, study ratio, our ratio, target, verdict, note."""
    out = []

    def add(what, study, ours, target, ok, note=""):
        out.append({"what": what, "study": study, "ours": ours, "target": target,
                    "verdict": _verdict(ok), "note": note})

    numba = _arch(res, "numba_1t")
    tf_all = _arch(res, "tollfree_all")
    tf_1 = _arch(res, "tollfree_1t")
    x = numba["median_s"] / tf_all["median_s"] if _ok(numba) and _ok(tf_all) else None
    add("80-combo sweep in-process, numba 1 thread", "2.01 s (M2 Max)",
        H.fmt_time(numba["median_s"]) if _ok(numba) else "not measured", "(the baseline)", "info",
        "the study's own baseline, re-measured here")
    add("fastest in-process sweep vs numba 1 thread", "8.6x (0.23 s, 12 cores)",
        f"{x:.1f}x ({H.fmt_time(tf_all['median_s'])}, {len(H.ALL_CPUS)} vCPUs)" if x else "not measured",
        ">= 20x on 2 vCPUs, bit-identical", None if x is None else x >= 20.0)
    if _ok(tf_1) and _ok(numba):
        x1 = numba["median_s"] / tf_1["median_s"]
        add("in-process sweep, 1 thread, vs numba 1 thread", "-", f"{x1:.1f}x", ">= 8x (issue 2)",
            x1 >= 8.0)

    paired = res.get("architecture", {}).get("paired", {})
    for tr in ("unix", "tcp", "shm"):
        b = _arch(res, f"batch_v2_{tr}")
        pr = paired.get(tr, {})
        if pr.get("status") == H.OK:
            rb = pr["ratio_median"]
            txt = (f"{rb:.4f}x in-process tollfree, median of {pr['pairs']} adjacent pairs "
                   f"(interquartile {pr['ratio_q25']:.4f} - {pr['ratio_q75']:.4f}; median "
                   f"difference {pr['diff_median_s'] * 1e3:+.2f} ms)")
            if _ok(b) and _ok(tf_all):
                txt += (f"; interleaved table: {b['median_s'] / tf_all['median_s']:.3f}x "
                        f"(per-round {b.get('ratio_vs_tollfree_round_min', float('nan')):.3f} - "
                        f"{b.get('ratio_vs_tollfree_round_max', float('nan')):.3f})")
            if _ok(numba) and _ok(b):
                txt += f"; {b['median_s'] / numba['median_s']:.3f}x numba 1 thread"
            add(f"batch sweep over {tr} (v2 SWEEP), vs in-process", "Rust over unix: 1.13x in-process numba",
                txt, "<= 1.005x in-process", rb <= 1.005)
        else:
            add(f"batch sweep over {tr} (v2 SWEEP), vs in-process", "Rust over unix: 1.13x", "not measured",
                "<= 1.005x in-process", None, pr.get("reason", (b or {}).get("reason", "")))
        d = _arch(res, f"batch_ds_{tr}")
        sa = _arch(res, "tollfree_series_all")
        if _ok(d) and _ok(sa):
            add(f"batch sweep over {tr}, SWEEP_DS on a loaded dataset", "-",
                f"{d['median_s'] / sa['median_s']:.3f}x the in-process prepared series "
                f"({H.fmt_time(d['median_s'])} vs {H.fmt_time(sa['median_s'])}; "
                f"{d['median_s'] / tf_all['median_s']:.3f}x plain in-process tollfree.sweep)"
                if _ok(tf_all) else "", "(same target)", "info",
                "the server keeps each loaded dataset's first-stage WMAs (tf_series), so SWEEP_DS "
                "beats a plain in-process sweep; the fair in-process counterpart is a warm tf_series")
    for run in (res.get("c_client") or {}).get("runs", []):
        for o in run["lines"]:
            if o.get("bench") == "sweep_boundary" and o.get("bit_identical"):
                r = o["ratio_v1_median"]
                add(f"batch sweep over unix from the C client ({o['run']})",
                    "Rust over unix: 1.13x in-process numba",
                    f"v1 (ships the series) {r:.4f}x in-process (min - max {o['ratio_v1_min']:.4f}"
                    f" - {o['ratio_v1_max']:.4f}); SWEEP_DS {o['ratio_sweep_ds_median']:.4f}x",
                    "<= 1.005x in-process", r <= 1.005,
                    "judged on v1; bench_transport compares SWEEP_DS with a plain tf_sweep, so "
                    "that ratio credits the server's first-stage cache, not the boundary")
    e8n = _echo(res, "unix", "naive", 1)
    e8z = _echo(res, "unix", "zero-copy", 1)
    e8s = _echo(res, "shm", "zero-copy", 1)
    add("echo 8 bytes, Python client, unix socket", "14.1 us",
        (f"naive {H.fmt_time(e8n['median_s'])} ({e8n['placement']}); " if e8n else "") +
        (f"zero-copy {H.fmt_time(e8z['median_s'])} ({e8z['placement']})" if e8z else "not measured"),
        "<= 14 us", None if not e8z else e8z["median_s"] <= 14e-6)
    add("echo 8 bytes, Python client, shared memory", "- (no shm row)",
        f"{H.fmt_time(e8s['median_s'])} ({e8s['placement']})" if e8s else "not measured",
        "<= 1 us", None if not e8s else e8s["median_s"] <= 1e-6)
    big = 150_000
    eln = _echo(res, "unix", "naive", big)
    elz = _echo(res, "unix", "zero-copy", big)
    add("echo 1.2 MB, Python client, unix socket", "2,043 us",
        (f"naive {H.fmt_time(eln['median_s'])}; " if eln else "") +
        (f"zero-copy {H.fmt_time(elz['median_s'])} ({elz['placement']})" if elz else "not measured"),
        "<= 300 us", None if not elz else elz["median_s"] <= 300e-6)
    ld = _arch(res, "load_shm")
    ldu = _arch(res, "load_unix")
    add("dataset over shared memory", "-",
        (f"LOAD_FD of 1.2 MB: {H.fmt_time(ld['median_s'])}" if _ok(ld) else "not measured") +
        (f" (LOAD over unix: {H.fmt_time(ldu['median_s'])})" if _ok(ldu) else ""),
        "no copy of the dataset at all", None,
        "by construction: the server maps the sealed memfd read-only (docs/protocol.md); "
        "the load time above is the evidence we can measure from outside")

    raw, js, mv = _ser(res, "raw"), _ser(res, "JSON"), _ser(res, "memoryview")
    add("serialization of 150k floats", "raw 49 us, JSON 66,243 us (1348x)",
        (f"raw {H.fmt_time(raw['median_s'])}, JSON {H.fmt_time(js['median_s'])} "
         f"({js['ratio_to_raw']:.0f}x)" if raw and js else "not measured") +
        (f"; memoryview {H.fmt_time(mv['median_s'])} ({mv['ratio_to_raw']:.4f}x raw)" if mv else ""),
        "0 copies on the hot path", None if not mv else True,
        "the clients send memoryviews of the caller's array (sendmsg) and recv_into reused buffers")

    c1 = _arch(res, "chatty_v1_unix")
    b1 = _arch(res, "batch_v1_unix")
    if _ok(c1) and _ok(b1):
        add("one call per combo, v1 (re-ships the series)", "+107 ms over batch",
            f"+{H.fmt_time(c1['median_s'] - b1['median_s'])} over batch v1 "
            f"({c1['median_s'] / b1['median_s']:.2f}x)", "(the study's pattern)", "info")
    for tr in ("unix", "tcp", "shm"):
        c2 = _arch(res, f"chatty_v2_{tr}")
        b2 = _arch(res, f"batch_v2_{tr}")
        bd = _arch(res, f"batch_ds_{tr}")
        ip = _arch(res, "tollfree_series_chatty")
        if _ok(c2) and _ok(b2):
            # Judged against the best batch over the same transport: SWEEP_DS on the same loaded
            # dataset where it ran (it shares the server's first-stage cache), else SWEEP.
            best = min((x for x in (b2, bd) if _ok(x)), key=lambda x: x["median_s"])
            r = c2["median_s"] / best["median_s"]
            txt = (f"{r:.3f}x the best batch ({'SWEEP_DS' if best is bd else 'SWEEP'}); "
                   f"{c2['median_s'] / b2['median_s']:.3f}x batch SWEEP "
                   f"({H.fmt_time(c2['median_s'])} vs {H.fmt_time(b2['median_s'])})")
            note = ""
            if _ok(ip):
                note = (f"the same {res['architecture']['n_combos']} one-combo calls in-process on a "
                        f"warm prepared series: {H.fmt_time(ip['median_s'])}, so the boundary adds "
                        f"{(c2['median_s'] / ip['median_s'] - 1) * 100:+.1f}%; the rest of the gap "
                        "to the batch is per-combo work a batch shares (its combos share passes "
                        "and split over threads)")
            add(f"one call per combo, v2 params-only over {tr}", "+107 ms (v1)",
                txt, "<= 1.02x batch", r <= 1.02, note)
    for tr in ("unix", "tcp", "shm"):
        pb = _arch(res, f"perbar_{tr}_cross")
        pbs = _arch(res, f"perbar_{tr}_same")
        best = min((r for r in (pb, pbs) if _ok(r)), key=lambda r: r["median_s"], default=None)
        if best:
            per = best["median_s"] / best["bars"]
            target = "<= 1 us per bar from Python" if tr == "shm" else "(study: dead on arrival)"
            add(f"one call per bar, 150k bars, {tr}", "150,000 x 14 us = 2.1 s",
                f"{H.fmt_time(best['median_s'])} = {H.fmt_time(per)} per bar ({best['placement']})",
                target, per <= 1e-6 if tr == "shm" else "info")
        else:
            add(f"one call per bar, 150k bars, {tr}", "2.1 s", "not measured",
                "<= 1 us per bar from Python" if tr == "shm" else "-", None,
                (pb or {}).get("reason", ""))
    cs = res.get("c_client", {})
    shm_c = cs.get("per_bar_shm_s") if isinstance(cs, dict) else None
    add("one call per bar over shm, from C", "-",
        H.fmt_time(shm_c) if shm_c else f"not measured ({cs.get('reason', 'no C client bench')})",
        "<= 0.5 us per bar", None if not shm_c else shm_c <= 0.5e-6)
    sp = res.get("startup", {}).get("spawn_echo")
    st = res.get("startup", {}).get("spawn_true")
    add("spawn per call (start, one tiny call, exit)", "~24 ms",
        (H.fmt_time(sp["median_s"]) if sp and sp.get("status") == H.OK else "not measured")
        + (f" (Popen of /bin/true alone: {H.fmt_time(st['median_s'])})"
           if st and st.get("status") == H.OK else ""),
        "report it (static small binary ~0.5 ms; judged at <= 1 ms)", None if not sp or sp.get("status") != H.OK
        else sp["median_s"] <= 0.5e-3 * 2)
    if res.get("quick"):
        for r in out:
            if r["verdict"] in ("met", "MISSED"):
                r["verdict"] = "not judged (quick run)"
    return out


def markdown(rows: list[dict]) -> str:
    return H.md_table(["what", "study (published)", "tollfree (this run)", "target", "verdict"],
                      [[r["what"], r["study"], r["ours"] + (f" <br>*{r['note']}*" if r["note"] else ""),
                        r["target"], r["verdict"]] for r in rows])
