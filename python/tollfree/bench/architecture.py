"""The architecture table: the default 80-combo sweep done every way the study did it, and more.

Every row is gated first (bit-identical per-combo pnl and trades against numba 1 thread; per-bar
rows: every position and the final state against the in-process streaming kernel and the batch);
failed rows are reported, never timed. All rows of the table are interleaved in one run (rotated
order, >= 5 rounds); ratios are against in-process tollfree (all threads) and numba (1 thread)
from the same run. Connection set-up, server start and JIT compile are timed on their own rows.

Placement (2 vCPUs): in-process 1-thread rows are pinned to the last CPU; throughput rows (batch,
chatty, spawn) leave client and server unpinned so the kernel can use both vCPUs; per-bar rows are
latency rows and are pinned: "cross" = client on CPU 0, server on CPU 1; "same" = both on CPU 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tollfree.bench import clients as C
from tollfree.bench import harness as H

ROW_BUDGET_S = 100.0         # a per-bar row that would take longer over all rounds is skipped
QUICK_ROW_BUDGET_S = 1.5


@dataclass
class Ctx:
    close: np.ndarray
    params: np.ndarray
    ref: tuple
    reps: int
    quick: bool
    server: object | None
    server_reason: str
    log: object
    nospin: object | None = None      # a second server with --spin 0 (shm rows without spinning)


def _unavailable(name, key, reason, status=H.UNAVAILABLE, **meta) -> H.Variant:
    v = H.Variant(name, lambda: None, meta={"key": key, **meta})
    v.status, v.reason = status, reason
    return v


def _concat(parts):
    pnl = np.concatenate([np.asarray(p[0], dtype=np.float64).reshape(-1) for p in parts]) \
        if parts else np.zeros(0)
    tr = np.concatenate([np.asarray(p[1], dtype=np.int64).reshape(-1) for p in parts]) \
        if parts else np.zeros(0, np.int64)
    return pnl, tr


class Placer:
    """Pins the client thread and every server's threads before a row (untimed)."""

    def __init__(self, *servers):
        self.servers = [s for s in servers if s is not None]

    def __call__(self, placement):
        def prep():
            cl, sv = H.placement_cpus(placement)
            H.pin_thread(cl)
            for s in self.servers:
                s.pin(sv)
        return prep


class _Rows:
    """The variants being built, in report order, and the one way a row is added: gated against
    the reference before it is timed, checked after every timed run."""

    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self.m = ctx.params.shape[0]
        self.place = Placer(ctx.server, ctx.nospin)
        self.one = {H.ALL_CPUS[-1]}
        self.vs: list[H.Variant] = []

    def add(self, name, key, fn, prepare, conv=lambda o: o, **meta):
        ref = self.ctx.ref
        self.vs.append(H.Variant(name, fn, gate=lambda: H.gate_sweep(ref, conv(fn()), name),
                                 prepare=prepare,
                                 check=lambda out: H.gate_sweep(ref, conv(out), name),
                                 meta={"key": key, **meta}))

    def add_free(self, name, key, fn, conv=lambda o: o, **meta):
        """A row with client and server threads left to the scheduler."""
        self.add(name, key, fn, self.place("free"), conv=conv,
                 placement=H.describe_placement("free"), **meta)

    def usable(self, c, name, key, **meta) -> bool:
        """False (and an "unavailable"/"error" row) when the connection c could not be made."""
        if isinstance(c, Exception) or c is None:
            self.vs.append(_unavailable(name, key, str(c), _st(c), **meta))
            return False
        return True


def build(ctx: Ctx, conns: dict) -> list[H.Variant]:
    """Every row of the architecture table, gated: in-process, batch, chatty, spawn, per-bar
    sessions, then the one-off dataset loads."""
    r = _Rows(ctx)
    _inprocess_rows(r)
    _batch_rows(r, conns)
    _chatty_rows(r, conns)
    _spawn_rows(r)
    _perbar_rows(r, conns)
    _load_rows(r, conns)
    return r.vs


def _inprocess_rows(r: _Rows) -> None:
    from tollfree import binding, reference
    close, params, m, one = r.ctx.close, r.ctx.params, r.m, r.one
    r.add("in-process numba, 1 thread", "numba_1t", lambda: reference.sweep(close, params),
          lambda: H.pin_thread(one), kind="in-process", placement=f"CPU {min(one)}", calls=1)
    r.add("in-process tollfree, 1 thread", "tollfree_1t",
          lambda: binding.sweep(close, params, threads=1), lambda: H.pin_thread(one),
          kind="in-process", placement=f"CPU {min(one)}", calls=1)
    r.add_free(f"in-process tollfree, all threads ({len(H.ALL_CPUS)})", "tollfree_all",
               lambda: binding.sweep(close, params, threads=0), kind="in-process", calls=1)
    r.add_free(f"in-process tollfree, {m} one-combo calls, all threads", "tollfree_chatty_inproc",
               lambda: _concat([binding.sweep(close, params[j:j + 1], threads=0)
                                for j in range(m)]),
               kind="in-process", calls=m)
    # The server keeps a first-stage cache per loaded dataset (a tf_series): the in-process
    # counterpart of SWEEP_DS / RUN_ONE is tf_series_sweep on a warm series, not tf_sweep.
    try:
        from tollfree.bench.series import PreparedSeries
        ser = PreparedSeries(close)
        r.add_free("in-process tollfree, prepared series (warm first-stage cache), all threads",
                   "tollfree_series_all", lambda: ser.sweep(params, threads=0),
                   kind="in-process", calls=1)
        r.add_free(f"in-process tollfree, prepared series, {m} one-combo calls, all threads",
                   "tollfree_series_chatty",
                   lambda: _concat([ser.sweep(params[j:j + 1], threads=0) for j in range(m)]),
                   kind="in-process", calls=m)
    except Exception as e:  # noqa: BLE001
        for k, nm in (("tollfree_series_all", "in-process tollfree, prepared series"),
                      ("tollfree_series_chatty",
                       "in-process tollfree, prepared series, one-combo calls")):
            r.vs.append(_unavailable(nm, k, f"{type(e).__name__}: {e}"))
    r.vs.append(_strategy_inproc(r.ctx, one))


def _batch_rows(r: _Rows, conns: dict) -> None:
    close, params = r.ctx.close, r.ctx.params
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v2", tr))
        name = f"batch over {tr}, v2 (one SWEEP call ships series + grid)"
        if r.usable(c, name, f"batch_v2_{tr}"):
            r.add_free(name, f"batch_v2_{tr}", (lambda c=c: c.sweep(close, params)),
                       conv=C.sweep_result, kind="batch", transport=tr, calls=1)
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v2", tr))
        name = f"batch over {tr}, v2 SWEEP_DS on a loaded dataset (params only)"
        if not r.usable(c, name, f"batch_ds_{tr}"):
            continue
        box: dict = {}

        def ds_sweep(c=c, box=box):
            if "ds" not in box:
                box["ds"] = c.load(close)  # once (the gate's call); content-addressed
            return c.sweep(box["ds"], params)
        r.add_free(name, f"batch_ds_{tr}", ds_sweep, conv=C.sweep_result, kind="batch",
                   transport=tr, calls=1)
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v1", tr))
        name = f"batch over {tr}, v1 (the published protocol)"
        if r.usable(c, name, f"batch_v1_{tr}"):
            r.add_free(name, f"batch_v1_{tr}", (lambda c=c: c.sweep(close, params)),
                       conv=C.sweep_result, kind="batch", transport=tr, calls=1)


def _chatty_rows(r: _Rows, conns: dict) -> None:
    close, params, m = r.ctx.close, r.ctx.params, r.m
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v1", tr))
        name = f"chatty v1 over {tr}: {m} calls, each re-ships the series"
        if r.usable(c, name, f"chatty_v1_{tr}"):
            r.add_free(name, f"chatty_v1_{tr}",
                       (lambda c=c: _concat([C.sweep_result(c.sweep(close, params[j:j + 1]))
                                             for j in range(m)])),
                       kind="chatty", transport=tr, calls=m)
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v2", tr))
        name = f"chatty v2 over {tr}: load once, {m} params-only RUN_ONE calls"
        if not r.usable(c, name, f"chatty_v2_{tr}"):
            continue

        def chatty(c=c):
            h = c.load(close)  # a Dataset: RUN_ONE then ships params only
            outs = [C.run_one_result(c.run_one(h, params[j])) for j in range(m)]
            return (np.array([o[0] for o in outs], dtype=np.float64),
                    np.array([o[1] for o in outs], dtype=np.int64))
        r.add_free(name, f"chatty_v2_{tr}", chatty, kind="chatty", transport=tr, calls=m + 1)


def _spawn_rows(r: _Rows) -> None:
    """One ``tollfree serve --stdio`` process per sweep, and per combo."""
    close, params, m, ctx = r.ctx.close, r.ctx.params, r.m, r.ctx
    names = (("spawn per sweep (tollfree serve --stdio)", "spawn_sweep"),
             (f"spawn per combo ({m} processes)", "spawn_combo"))
    if ctx.server is None and "not built" in ctx.server_reason:
        for name, key in names:
            r.vs.append(_unavailable(name, key, ctx.server_reason))
        return

    def spawn_sweep():
        c = C.connect_spawn()
        try:
            return C.sweep_result(c.sweep(close, params))
        finally:
            c.close()

    def spawn_combo():
        parts = []
        for j in range(m):
            c = C.connect_spawn()
            try:
                parts.append(C.sweep_result(c.sweep(close, params[j:j + 1])))
            finally:
                c.close()
        return _concat(parts)
    r.add_free(names[0][0], names[0][1], spawn_sweep, kind="spawn", transport="stdio", calls=1)
    r.add_free(names[1][0], names[1][1], spawn_combo, kind="spawn", transport="stdio", calls=m)


def _perbar_rows(r: _Rows, conns: dict) -> None:
    """Per-bar live sessions ("shm0": the shm transport with no spinning on either side)."""
    for placement in ("cross", "same"):
        for tr in ("unix", "tcp", "shm", "shm0"):
            c = conns.get(("v2", tr))
            key = f"perbar_{tr}_{placement}"
            what = "shm, no spin (futex only)" if tr == "shm0" else tr
            name = (f"per-bar live session over {what}, {placement} vCPU "
                    f"({r.ctx.close.shape[0]:,} calls)")
            if not r.usable(c, name, key):
                continue
            try:
                H.placement_cpus(placement)
            except H.Unavailable as e:
                r.vs.append(_unavailable(name, key, str(e)))
                continue
            r.vs.append(_perbar(r.ctx, c, tr, placement, r.place, name, key))


def _load_rows(r: _Rows, conns: dict) -> None:
    """One-off: loading the 1.2 MB dataset (LOAD over sockets, LOAD_FD over shm); fresh bytes
    each round, dropped after (a repeated load of the same bytes would be free)."""
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v2", tr))
        name = f"load the series over {tr} ({'LOAD_FD: sealed memfd' if tr == 'shm' else 'LOAD'})"
        if r.usable(c, name, f"load_{tr}", section="oneoff"):
            r.vs.append(_load(r.ctx, c, tr, r.place, name))


def _st(c) -> str:
    return H.UNAVAILABLE if c is None or isinstance(c, H.Unavailable) else H.ERROR


def _strategy_inproc(ctx: Ctx, one) -> H.Variant:
    from tollfree import binding
    xs = ctx.close.tolist()
    st = binding.Strategy(ctx.params[0])
    ref0 = (ctx.ref[0][:1], ctx.ref[1][:1])

    def run():
        f = st.on_bar
        for x in xs:
            f(x)
        return st

    def check(s):
        H.gate_sweep(ref0, C.as_pair(s.pnl, s.trades), "in-process Strategy")

    def prepare():
        H.pin_thread(one)
        st.reset()
    return H.Variant(f"in-process Strategy.on_bar, combo 0 ({len(xs):,} calls)", run,
                     gate=lambda: check(run()), prepare=prepare, check=check,
                     meta={"key": "inproc_strategy", "kind": "per-bar", "bars": len(xs),
                           "calls": len(xs), "placement": f"CPU {min(one)}"})


_positions_cache: dict = {}


def _positions(close, combo) -> np.ndarray:
    """Every position of the in-process streaming kernel (the per-bar gate's reference)."""
    from tollfree import binding
    key = (id(close), tuple(int(v) for v in combo))
    if key not in _positions_cache:
        st = binding.Strategy(combo)
        _positions_cache[key] = np.array([st.on_bar(x) for x in close.tolist()], dtype=np.int8)
        st.close()
    return _positions_cache[key]


def _perbar(ctx: Ctx, client, tr, placement, place, name, key) -> H.Variant:
    xs = ctx.close.tolist()
    n = len(xs)
    combo = ctx.params[0]
    ref0 = (ctx.ref[0][:1], ctx.ref[1][:1])
    box: dict = {}
    pin = place(placement)

    def prepare():
        pin()
        if box.get("s") is not None:
            try:
                box["s"].close()
            except Exception:  # noqa: BLE001
                pass
        box["s"] = client.session(combo)

    def run():
        f = box["s"].on_bar
        for x in xs:
            f(x)
        return box["s"]

    def check(s):
        box["s"] = None
        got = C.session_final(s, s.close())
        H.gate_sweep(ref0, C.as_pair(*got), name)

    def gate():
        want = _positions(ctx.close, combo)
        s = box["s"]
        f = s.on_bar
        pos = np.empty(n, dtype=np.int8)
        k = min(200 if ctx.quick else 2000, n)
        t0 = time.perf_counter()
        for i in range(k):
            pos[i] = f(xs[i])
        per = (time.perf_counter() - t0) / k
        est = per * n * (ctx.reps + 1)
        if est > (QUICK_ROW_BUDGET_S if ctx.quick else ROW_BUDGET_S):
            box["s"] = None
            s.close()
            raise H.Skip(f"{per * 1e6:.1f} us per call over the first {k:,} calls "
                         f"(positions identical so far: {bool(np.array_equal(pos[:k], want[:k]))}); "
                         f"{ctx.reps + 1} x {n:,} calls would take ~{est:.0f} s")
        for i in range(k, n):
            pos[i] = f(xs[i])
        if not np.array_equal(pos, want):
            bad = np.flatnonzero(pos != want)
            raise H.GateFailure(f"{bad.size} positions differ (first at bar {bad[0]})")
        check(s)
    return H.Variant(name, run, gate=gate, prepare=prepare, check=check,
                     meta={"key": key, "kind": "per-bar", "transport": tr, "bars": n, "calls": n,
                           "placement": H.describe_placement(placement),
                           "placement_kind": placement})


def _load(ctx: Ctx, client, tr, place, name) -> H.Variant:
    box = {"r": 0}
    pin = place("free")

    def prepare():
        pin()
        box["r"] += 1
        a = ctx.close.copy()
        a[0] = a[0] + box["r"] * 2.0 ** -30  # new bytes, new content address
        box["a"] = a

    def run():
        return client.load(box["a"])

    def check(out):
        if hasattr(client, "drop"):
            client.drop(out)

    def gate():
        h = client.load(box["a"])
        q = ctx.params[:1]
        got = C.run_one_result(client.run_one(h, q[0]))
        from tollfree import binding
        want = binding.sweep(box["a"], q, threads=1)
        H.gate_sweep(want, C.as_pair(*got), name + " (RUN_ONE on the loaded data)")
        if hasattr(client, "drop"):
            client.drop(h)
    return H.Variant(name, run, gate=gate, prepare=prepare, check=check,
                     meta={"key": f"load_{tr}", "kind": "load", "transport": tr,
                           "section": "oneoff", "bytes": int(ctx.close.nbytes),
                           "placement": H.describe_placement("free")})


def open_connections(server, log, **kw) -> dict:
    """{(version, transport): client or the exception that says why not}; ("v2", "shm0") is a
    spin=0 client of the ``nospin`` server."""
    conns: dict = {}
    nospin = kw.get("nospin")
    if nospin is not None:
        try:
            conns[("v2", "shm0")] = C.connect(nospin.url("shm"), spin=0)
        except Exception as e:  # noqa: BLE001
            conns[("v2", "shm0")] = RuntimeError(f"{type(e).__name__}: {e}")
    else:
        conns[("v2", "shm0")] = kw.get("nospin_exc") or H.Unavailable("no --spin 0 server")
    for tr in ("unix", "tcp", "shm"):
        if server is None:
            conns[("v2", tr)] = conns[("v1", tr)] = H.Unavailable("no server")
            continue
        try:
            conns[("v2", tr)] = C.connect(server.url(tr))
        except H.Unavailable as e:
            conns[("v2", tr)] = e
        except Exception as e:  # noqa: BLE001
            conns[("v2", tr)] = RuntimeError(f"{type(e).__name__}: {e}")
        try:
            conns[("v1", tr)] = C.v1_client(server, tr)
        except H.Unavailable as e:
            conns[("v1", tr)] = e
        except Exception as e:  # noqa: BLE001
            conns[("v1", tr)] = RuntimeError(f"v1 client: {type(e).__name__}: {e}")
    for k, v in conns.items():
        if isinstance(v, Exception):
            log(f"  {k[0]} {k[1]}: {type(v).__name__}: {v}")
    return conns


def close_connections(conns: dict) -> None:
    for c in conns.values():
        if c is not None and not isinstance(c, Exception):
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass


def run(ctx: Ctx, conns: dict) -> dict:
    vs = build(ctx, conns)
    H.interleave(vs, ctx.reps, log=ctx.log)
    H.pin_thread(set(H.ALL_CPUS))
    if ctx.server is not None:
        ctx.server.pin(set(H.ALL_CPUS))
    rows = [H.row(v) for v in vs]
    by = {r["key"]: r for r in rows}
    tf = by.get("tollfree_all", {})
    nb = by.get("numba_1t", {})
    equiv = {"batch": "tollfree_all", "chatty": "tollfree_chatty_inproc",
             "per-bar": "inproc_strategy"}
    special = {"spawn_sweep": "tollfree_all", "spawn_combo": "tollfree_chatty_inproc"}
    for tr in ("unix", "tcp", "shm"):
        special[f"batch_ds_{tr}"] = "tollfree_series_all"
        special[f"chatty_v2_{tr}"] = "tollfree_series_chatty"
    for r in rows:
        if r["status"] != H.OK:
            continue
        ek = special.get(r["key"], equiv.get(r.get("kind")))
        if ek and ek != r["key"] and by.get(ek, {}).get("status") == H.OK:
            r["equivalent"] = by[ek]["name"]
            r["ratio_vs_equivalent"] = r["median_s"] / by[ek]["median_s"]
        if r.get("bars"):
            r["per_call_s"] = r["median_s"] / r["bars"]
        elif r.get("calls"):
            r["per_call_s"] = r["median_s"] / r["calls"]
        for ref_key, ref_row in (("tollfree", tf), ("numba", nb)):
            if ref_row.get("status") == H.OK and r.get("section") != "oneoff":
                r[f"ratio_vs_{ref_key}"] = r["median_s"] / ref_row["median_s"]
                per = [a / b for a, b in zip(r["samples_s"], ref_row["samples_s"])]
                r[f"ratio_vs_{ref_key}_round_min"] = min(per)
                r[f"ratio_vs_{ref_key}_round_max"] = max(per)
    return {"rows": rows, "reps": ctx.reps, "n_bars": int(ctx.close.shape[0]),
            "n_combos": int(ctx.params.shape[0])}


def paired_batch(ctx: Ctx, conns: dict, log) -> dict:
    """The batch sweep's boundary share, from adjacent pairs: in-process (all threads) and
    SWEEP over a transport back to back, order alternating, ``n`` pairs. A pair shares the
    machine's state of the moment, so the per-pair ratio resolves far less than the +-5% that
    separate rounds of the big table drift on this shared machine."""
    from tollfree import binding
    close, params, ref = ctx.close, ctx.params, ctx.ref
    n_pairs = 5 if ctx.quick else 15
    prep = Placer(ctx.server, ctx.nospin)("free")
    out = {}
    for tr in ("unix", "tcp", "shm"):
        c = conns.get(("v2", tr))
        if isinstance(c, Exception) or c is None:
            out[tr] = {"status": _st(c), "reason": str(c)}
            continue
        try:
            prep()
            H.gate_sweep(ref, C.sweep_result(c.sweep(close, params)), f"batch over {tr}")
            H.gate_sweep(ref, binding.sweep(close, params, threads=0), "in-process")
            fns = (lambda: binding.sweep(close, params, threads=0),
                   lambda c=c: C.sweep_result(c.sweep(close, params)))
            tin, tb = [], []
            last = None
            for i in range(n_pairs):
                t = [0.0, 0.0]
                for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                    with H.no_gc():
                        t0 = time.perf_counter_ns()
                        res = fns[which]()
                        t[which] = (time.perf_counter_ns() - t0) * 1e-9
                    if which == 1:
                        last = res
                tin.append(t[0])
                tb.append(t[1])
            H.gate_sweep(ref, last, f"batch over {tr} (last pair)")
            ratios = np.array(tb) / np.array(tin)
            diff = np.array(tb) - np.array(tin)
            out[tr] = {"status": H.OK, "pairs": n_pairs,
                       "ratio_median": float(np.median(ratios)),
                       "ratio_q25": float(np.percentile(ratios, 25)),
                       "ratio_q75": float(np.percentile(ratios, 75)),
                       "ratio_min": float(ratios.min()), "ratio_max": float(ratios.max()),
                       "diff_median_s": float(np.median(diff)),
                       "inproc_median_s": float(np.median(tin)),
                       "batch_median_s": float(np.median(tb)), "ratios": ratios.tolist()}
        except H.GateFailure as e:
            out[tr] = {"status": H.FAILED, "reason": str(e)}
        except Exception as e:  # noqa: BLE001
            out[tr] = {"status": H.ERROR, "reason": f"{type(e).__name__}: {e}"}
        log(f"  paired batch {tr}: {out[tr].get('ratio_median', out[tr].get('reason'))}")
    H.pin_thread(set(H.ALL_CPUS))
    return out


def paired_markdown(paired: dict) -> str:
    rows = []
    for tr, d in paired.items():
        if d.get("status") != H.OK:
            rows.append([tr, H.status_cell(d), "-", "-", "-", "-"])
            continue
        rows.append([tr, f"{d['ratio_median']:.4f}x",
                     f"{d['ratio_q25']:.4f} - {d['ratio_q75']:.4f}",
                     f"{d['ratio_min']:.3f} - {d['ratio_max']:.3f}",
                     f"{d['diff_median_s'] * 1e3:+.2f} ms",
                     f"{H.fmt_time(d['inproc_median_s'])} / {H.fmt_time(d['batch_median_s'])}"])
    return H.md_table(["transport (SWEEP, v2)", "median pair ratio", "interquartile",
                       "min - max", "median pair difference", "in-process / batch medians"], rows)


def startup(ctx: Ctx, server_factory, log) -> dict:
    """One-off costs, each on its own row: server start, connect, spawn + one tiny call + exit."""
    out: dict = {}
    reps = ctx.reps
    # server start: exec to every listener ready
    starts = []
    reason = ""
    for _ in range(reps):
        try:
            s = server_factory()
            s.start()
            starts.append(s.startup_s)
            s.cleanup()
        except H.Unavailable as e:
            reason = f"not available: {e}"
            break
        except Exception as e:  # noqa: BLE001
            reason = f"{type(e).__name__}: {e}"
            break
    out["server_start"] = _oneoff("server start: exec to unix + tcp + shm listeners ready",
                                  starts, reason)
    x = np.array([1.5])
    for tr in ("unix", "tcp", "shm"):
        samples, reason = [], ""
        if ctx.server is None:
            reason = ("not available: " if "not built" in ctx.server_reason else "") + ctx.server_reason
        else:
            for _ in range(reps):
                try:
                    t0 = time.perf_counter()
                    c = C.connect(ctx.server.url(tr))
                    c.echo(x)
                    t1 = time.perf_counter()
                    c.close()
                    samples.append(t1 - t0)
                except Exception as e:  # noqa: BLE001
                    reason = f"{type(e).__name__}: {e}"
                    samples = []
                    break
        out[f"connect_{tr}"] = _oneoff(f"connect over {tr} + first echo"
                                       + (" (memfd create, pre-fault, handshake)" if tr == "shm" else ""),
                                       samples, reason)
    samples, reason = [], ""
    try:
        if ctx.server is None and "not built" in ctx.server_reason:
            raise H.Unavailable(ctx.server_reason)
        for _ in range(max(reps, 10)):
            t0 = time.perf_counter()
            c = C.connect_spawn()
            c.echo(x)
            c.close()
            samples.append(time.perf_counter() - t0)
    except H.Unavailable as e:
        reason, samples = f"not available: {e}", []
    except Exception as e:  # noqa: BLE001
        reason = f"{type(e).__name__}: {e}"
        samples = []
    out["spawn_echo"] = _oneoff("spawn tollfree serve --stdio + one echo + exit", samples, reason)
    # The floor of spawning from Python at all: the same Popen (pipes, close_fds) of /bin/true.
    import subprocess
    samples = []
    for _ in range(max(reps, 10)):
        t0 = time.perf_counter()
        p = subprocess.Popen(["/bin/true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, bufsize=0, close_fds=True)
        p.stdin.close()
        p.stdout.read()
        p.wait()
        p.stdout.close()
        samples.append(time.perf_counter() - t0)
    out["spawn_true"] = _oneoff("spawn /bin/true from Python, same pipes (the floor of any spawn)",
                                samples, "")
    return out


def _oneoff(name, samples, reason) -> dict:
    if samples:
        d = {"name": name, "status": H.OK, "samples_s": samples}
        d.update({k + "_s" if k in ("median", "min", "max", "p99", "mean") else k: v
                  for k, v in H.summarize(samples).items()})
        return d
    st = H.UNAVAILABLE if reason.startswith("not available") else H.ERROR
    reason = reason.removeprefix("not available: ")
    return {"name": name, "status": st, "reason": reason or "no samples"}


def markdown(arch: dict) -> str:
    hdr = ["row", "placement", "gate", "median", "min - max", "per call", "vs in-process tollfree",
           "vs numba 1T", "vs same work in-process"]
    rows = []
    for r in arch["rows"]:
        if r.get("section") == "oneoff":
            continue
        if r["status"] != H.OK:
            rows.append([r["name"], r.get("placement", ""), H.status_cell(r)] + ["-"] * 6)
            continue
        pc = H.fmt_time(r.get("per_call_s")) if r.get("calls", 1) > 1 or r.get("bars") else "-"
        rows.append([r["name"], r.get("placement", ""), "bit-identical", H.fmt_time(r["median_s"]),
                     f"{H.fmt_time(r['min_s'])} - {H.fmt_time(r['max_s'])}", pc,
                     H.fmt_ratio(r.get("ratio_vs_tollfree")), H.fmt_ratio(r.get("ratio_vs_numba")),
                     H.fmt_ratio(r.get("ratio_vs_equivalent"))])
    return H.md_table(hdr, rows) + (
        "\n\n\"vs in-process tollfree\" divides by the all-threads in-process sweep and \"vs numba "
        "1T\" by numba on one thread (both from this run). \"vs same work in-process\" divides by "
        "the in-process row doing the same work: the all-threads sweep for batch SWEEP/v1 and spawn "
        "per sweep, the prepared series (warm first-stage cache, as the server keeps per loaded "
        "dataset) for SWEEP_DS and chatty v2, the one-combo-per-call row for chatty v1 and spawn "
        "per combo, Strategy.on_bar for per-bar sessions; it is the boundary's own cost.")


def oneoff_markdown(arch: dict, start: dict, extra: dict) -> str:
    hdr = ["one-off cost", "median", "min - max", "n"]
    rows = []
    for k, d in extra.items():
        rows.append([k, H.fmt_time(d), "-", 1])
    for d in list(start.values()) + [r for r in arch["rows"] if r.get("section") == "oneoff"]:
        if d["status"] != H.OK:
            rows.append([d["name"], H.status_cell(d), "-", "-"])
        else:
            rows.append([d["name"], H.fmt_time(d["median_s"]),
                         f"{H.fmt_time(d['min_s'])} - {H.fmt_time(d['max_s'])}", d["n"]])
    return H.md_table(hdr, rows)



