"""The boundary benchmark (``make bench``): every row of the IPC Tax study, on this machine.

    python -m tollfree.bench [--quick] [--reps N] [--out DIR]
    python -m tollfree.bench --headline [results.json]

Writes report.md, results.json and PNG plots (default build/report/) and prints the headline
table. ``--quick`` is a seconds-long smoke run on a small workload (``make test`` runs it and
checks only the gate). Never fails on timing: exits 1 only if a row failed its bit-identity gate.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


from tollfree import data, grid
from tollfree.bench import architecture, breakeven, cclient, echo, report, serialization, study
from tollfree.bench import clients as C
from tollfree.bench import harness as H
from tollfree.bench.server import Server


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _workload(quick: bool):
    if quick:
        return (data.synthetic_close(1000), grid.grid(6, 200, 4),
                "synthetic_close(1000), grid(6, 200, 4) (--quick)")
    return (data.synthetic_close(), grid.default_grid(),
            "synthetic_close() (150,000 bars), default_grid() (80 combos)")


def run_echo(server, server_exc, reps: int, quick: bool, log, nospin=None, nospin_exc=None) -> dict:
    rows = []
    servers = [s for s in (server, nospin) if s is not None]
    for tr in ("unix", "tcp", "shm"):
        clients: dict = {}
        if server is None:
            clients = {"naive": server_exc, "zero-copy": server_exc}
        else:
            try:
                clients["zero-copy"] = C.connect(server.url(tr))
            except H.Unavailable as e:
                clients["zero-copy"] = e
            except Exception as e:  # noqa: BLE001
                clients["zero-copy"] = RuntimeError(f"{type(e).__name__}: {e}")
            try:
                if tr == "unix":
                    clients["naive"] = echo.NaiveV1Client("unix", server.unix_path)
                elif tr == "tcp":
                    clients["naive"] = echo.NaiveV1Client("tcp", ("127.0.0.1", server.port))
                else:
                    zc = clients["zero-copy"]
                    clients["naive"] = zc if isinstance(zc, Exception) else echo.NaiveShm(zc)
            except Exception as e:  # noqa: BLE001
                clients["naive"] = RuntimeError(f"{type(e).__name__}: {e}")
            if tr == "shm":
                try:
                    clients["zero-copy, no spin"] = C.connect(nospin.url("shm"), spin=0) \
                        if nospin is not None else (nospin_exc or H.Unavailable("no --spin 0 server"))
                except Exception as e:  # noqa: BLE001
                    clients["zero-copy, no spin"] = RuntimeError(f"{type(e).__name__}: {e}")
        for placement in ("cross", "same"):
            try:
                rs = echo.measure(clients, placement, servers, reps, quick, log)
            except H.Unavailable as e:
                log(f"  echo {tr} {placement}: {e}")
                continue
            for d in rs:
                d["transport"] = tr
                d["placement_kind"] = placement
                d["placement"] = H.describe_placement(placement)
            rows += rs
        for c in clients.values():
            if not isinstance(c, Exception):
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
        for sv in servers:
            sv.pin(set(H.ALL_CPUS))
    H.pin_thread(set(H.ALL_CPUS))
    fits = []
    for tr in ("unix", "tcp", "shm"):
        for client in ("zero-copy", "naive", "zero-copy, no spin"):
            for pl in ("cross", "same"):
                sel = [d for d in rows if d["transport"] == tr and d["client"] == client
                       and d["placement_kind"] == pl]
                if sel:
                    fits.append({"transport": tr, "client": client, "placement": pl,
                                 "fit": echo.fit(sel)})
    return {"rows": rows, "fits": fits}


def run(quick: bool = False, reps: int = 5, out_dir=None) -> dict:
    reps = max(int(reps), 5)
    out_dir = Path(out_dir) if out_dir else H.ROOT / "build" / "report"
    mon = H.LoadMonitor()
    print(H.machine_line(), flush=True)
    H.pin_thread(set(H.ALL_CPUS))
    close, params, workload = _workload(quick)
    t_start = time.monotonic()

    from tollfree import binding, reference
    startup_extra = {}
    t0 = time.perf_counter()
    binding.lib()
    startup_extra["libtollfree load (ctypes)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference.warm_up()
    startup_extra["numba JIT compile (sweep + sweep_parallel)"] = time.perf_counter() - t0
    _log(f"bench: {workload}; reference sweep (numba, 1 thread) ...")
    ref = reference.sweep(close, params)

    server, server_exc, server_info = None, None, {}
    try:
        server = Server().start()
        server_info = {"status": H.OK, "args": f"tollfree serve --unix --tcp 127.0.0.1:{server.port} "
                                               "--shm (defaults: all threads, default spin)",
                       "startup_s": server.startup_s}
    except H.Unavailable as e:
        server_exc = e
        server_info = {"status": H.UNAVAILABLE, "reason": str(e)}
    except Exception as e:  # noqa: BLE001
        server_exc = RuntimeError(f"server did not start: {e}")
        server_info = {"status": H.ERROR, "reason": str(e)}
        server = None
    _log(f"bench: server {server_info.get('status')} {server_info.get('reason', '')}")
    nospin, nospin_exc = None, None
    if server is not None:
        try:
            nospin = Server(extra_args=["--spin", "0", "--quiet"], transports=("shm",)).start()
            server_info["nospin"] = "a second server, tollfree serve --shm --spin 0, for the " \
                                    "shm rows without spinning (client spin=0 too)"
        except Exception as e:  # noqa: BLE001
            nospin_exc = RuntimeError(f"--spin 0 server did not start: {e}")

    res: dict = {"quick": quick, "reps": reps, "workload": workload, "server": server_info,
                 "startup_extra": startup_extra}
    try:
        conns = architecture.open_connections(server, _log, nospin=nospin, nospin_exc=nospin_exc) \
            if server is not None else \
            {(v, t): server_exc for v in ("v1", "v2") for t in ("unix", "tcp", "shm", "shm0")}
        ctx = architecture.Ctx(close, params, ref, reps, quick, server,
                               str(server_exc) if server_exc else "", _log, nospin)
        _log("bench: architecture table ...")
        res["architecture"] = architecture.run(ctx, conns)
        _log("bench: paired batch boundary share ...")
        res["architecture"]["paired"] = architecture.paired_batch(ctx, conns, _log)
        architecture.close_connections(conns)
        _log("bench: echo curve ...")
        res["echo"] = run_echo(server, server_exc, reps, quick, _log, nospin, nospin_exc)
        _log("bench: serialization ...")
        ser_x = data.synthetic_close(15_000 if quick else 150_000)
        res["serialization"] = serialization.run(ser_x, reps, quick, _log)
        _log("bench: start-up rows ...")
        res["startup"] = architecture.startup(ctx, Server, _log)
        _log("bench: C client ...")
        res["c_client"] = cclient.run(server, quick, reps)
    finally:
        server_cpu = 0.0
        for sv in (server, nospin):
            if sv is not None:
                server_cpu += sv.cpu_time_s()
                sv.cleanup()
    H.pin_thread(set(H.ALL_CPUS))
    res["breakeven"] = breakeven.table(res["architecture"]["rows"], res["echo"]["rows"],
                                       res["c_client"] if res["c_client"].get("status") == H.OK else {})
    res["machine"] = H.machine_info()
    # The servers were waited for, so their CPU time is already in this process's children times.
    res["load"] = mon.finish()
    res["server_cpu_s"] = round(server_cpu, 2)
    res["study"] = study.compare(res)
    failed, errors = [], []
    for r in res["architecture"]["rows"] + res["serialization"]["rows"] + res["echo"]["rows"]:
        nm = r.get("name") or f"echo {r.get('transport')} {r.get('client')} {r.get('n_floats')}"
        if r["status"] == H.FAILED:
            failed.append(nm)
        elif r["status"] == H.ERROR:
            errors.append(f"{nm}: {r.get('reason', '')}")
    for tr, d in res["architecture"].get("paired", {}).items():
        if d.get("status") == H.FAILED:
            failed.append(f"paired batch over {tr}")
        elif d.get("status") == H.ERROR:
            errors.append(f"paired batch over {tr}: {d.get('reason')}")
    for d in res["startup"].values():
        if d["status"] == H.ERROR:
            errors.append(f"{d['name']}: {d.get('reason', '')}")
    if res["c_client"].get("status") == H.FAILED:
        failed.append("C client bench")
    elif res["c_client"].get("status") == H.ERROR:
        errors.append(f"C client bench: {res['c_client'].get('reason')}")
    if server_info.get("status") == H.ERROR:
        errors.append(f"server: {server_info.get('reason')}")
    res["gate"] = {"passed": not failed, "failed": failed, "errors": errors}
    res["wall_s"] = time.monotonic() - t_start
    report.write(res, out_dir)
    print(report.headline(res))
    print(f"\nreport: {out_dir / 'report.md'} ({res['wall_s']:.0f} s)")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tollfree.bench",
                                 description="The boundary benchmark (issue 4).")
    ap.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    ap.add_argument("--reps", type=int, default=5, help="interleaved rounds (at least 5)")
    ap.add_argument("--out", default=None, help="output folder (default build/report)")
    ap.add_argument("--headline", nargs="?", const="", default=None, metavar="RESULTS_JSON",
                    help="print the headline table of an earlier run and exit")
    a = ap.parse_args(argv)
    if a.headline is not None:
        try:
            print(report.headline_from_file(a.headline or None))
        except FileNotFoundError as e:
            print(f"no results yet ({e.filename}): run 'make bench' first", file=sys.stderr)
            return 1
        return 0
    res = run(quick=a.quick, reps=a.reps, out_dir=a.out)
    return 0 if res["gate"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
