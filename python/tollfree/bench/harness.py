"""Measurement plumbing shared by every tollfree benchmark.

The rules (every figure in docs/benchmarks.md follows them): no figure counts unless its
configuration passed the bit-identity gate first; variants are interleaved within one run (rotated
order, A B A B); medians and min-max of >= 5 repetitions; ratios come from the same run; CPU
placement is stated for every latency row; start-up costs are rows of their own, never folded into
steady state.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[3]

# Row status values (results.json and the Markdown tables).
OK, FAILED, UNAVAILABLE, ERROR, SKIPPED = "ok", "failed", "unavailable", "error", "skipped"


class Unavailable(Exception):
    """A piece a row needs (server, client, C bench) is not built or not importable yet."""


class Skip(Exception):
    """A configuration measured too slow to time in full within the run's budget (it passed
    whatever part of the gate ran; the reason says what was measured)."""


class GateFailure(Exception):
    """A configuration's results differ from the reference: the row is reported, never timed."""


# ---- the gate ----------------------------------------------------------------------------------

def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Raw-bit equality of two arrays (NaN payloads and signed zeros included)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
        return False
    return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


def gate_sweep(ref: tuple[np.ndarray, np.ndarray], got: Any, what: str) -> None:
    """Raises GateFailure unless ``got`` is ``(pnl f64[m], trades i64[m])`` bit-equal to ``ref``."""
    try:
        pnl, trades = got
        pnl = np.asarray(pnl, dtype=np.float64)
        trades = np.asarray(trades, dtype=np.int64)
    except Exception as e:  # noqa: BLE001 - any malformed result is a gate failure
        raise GateFailure(f"{what}: result is not (pnl, trades): {e}") from None
    if pnl.shape != ref[0].shape or trades.shape != ref[1].shape:
        raise GateFailure(f"{what}: shape {pnl.shape}/{trades.shape}, expected {ref[0].shape}")
    if not same_bits(pnl, ref[0]):
        bad = np.flatnonzero(pnl.view(np.uint64) != ref[0].view(np.uint64))
        raise GateFailure(f"{what}: pnl differs in {bad.size} combos (first: combo {bad[0]}: "
                          f"{pnl[bad[0]]!r} vs {ref[0][bad[0]]!r})")
    if not np.array_equal(trades, ref[1]):
        bad = np.flatnonzero(trades != ref[1])
        raise GateFailure(f"{what}: trades differ in {bad.size} combos (first: combo {bad[0]})")


# ---- statistics --------------------------------------------------------------------------------

def summarize(samples: list[float]) -> dict:
    """Median, min, max, p99 and count of a list of seconds (or any unit)."""
    if not samples:
        return {"n": 0}
    a = np.asarray(samples, dtype=np.float64)
    return {"n": int(a.size), "median": float(np.median(a)), "min": float(a.min()),
            "max": float(a.max()), "p99": float(np.percentile(a, 99)), "mean": float(a.mean())}


# ---- CPU placement -----------------------------------------------------------------------------

def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


ALL_CPUS = tuple(cpus())


def placement_cpus(placement: str) -> tuple[set[int], set[int]]:
    """(client cpus, server cpus) for 'same' (one vCPU for both), 'cross' (one each) or 'free'."""
    c = list(ALL_CPUS)
    if placement == "free":
        return set(c), set(c)
    if placement == "same":
        return {c[-1]}, {c[-1]}
    if placement == "cross":
        if len(c) < 2:
            raise Unavailable("cross-vCPU placement needs two CPUs")
        return {c[0]}, {c[-1]}
    raise ValueError(placement)


def describe_placement(placement: str) -> str:
    if placement == "free":
        return f"unpinned (client and server on CPUs {','.join(map(str, ALL_CPUS))})"
    cl, sv = placement_cpus(placement)
    word = "same vCPU" if placement == "same" else "cross vCPU"
    return f"{word}: client CPU {min(cl)}, server CPU {min(sv)}"


def pin_thread(cpu_set) -> None:
    """Pins the calling thread (Linux: pid 0 is the calling thread). Threads it creates inherit."""
    os.sched_setaffinity(0, set(cpu_set))


def pin_process(pid: int, cpu_set) -> None:
    """Pins every thread of ``pid`` (what ``taskset -a -p`` does); later threads inherit."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.sched_setaffinity(int(tid), set(cpu_set))


@contextlib.contextmanager
def pinned(cpu_set):
    old = os.sched_getaffinity(0)
    pin_thread(cpu_set)
    try:
        yield
    finally:
        pin_thread(old)


@contextlib.contextmanager
def no_gc():
    """Collector off inside timed regions (same for every variant); restored after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# ---- interleaved repetitions -------------------------------------------------------------------

@dataclass
class Variant:
    """One configuration of a benchmark.

    ``gate()`` runs once, untimed, before any timing: it raises GateFailure (row failed, never
    timed) or Unavailable. ``prepare()`` runs untimed before each repetition (pinning, resets);
    ``run()`` is the timed body; ``check(result)`` runs untimed after each repetition and raises
    GateFailure if a timed repetition produced different bits.
    """

    name: str
    run: Callable[[], Any]
    gate: Callable[[], None] | None = None
    prepare: Callable[[], None] | None = None
    check: Callable[[Any], None] | None = None
    meta: dict = field(default_factory=dict)
    status: str = OK
    reason: str = ""
    samples: list = field(default_factory=list)


def _fail(v: Variant, status: str, reason: str) -> None:
    v.status, v.reason, v.samples = status, reason, []


def run_gates(variants: list[Variant]) -> None:
    for v in variants:
        if v.status != OK:
            continue
        try:
            if v.prepare:
                v.prepare()
            if v.gate:
                v.gate()
        except GateFailure as e:
            _fail(v, FAILED, str(e))
        except Unavailable as e:
            _fail(v, UNAVAILABLE, str(e))
        except Skip as e:
            _fail(v, SKIPPED, str(e))
        except Exception as e:  # noqa: BLE001 - a broken component is reported, not fatal
            _fail(v, ERROR, f"{type(e).__name__}: {e}")


def interleave(variants: list[Variant], reps: int, log: Callable[[str], None] | None = None) -> None:
    """Gates every variant, then times ``reps`` rounds; round r runs the variants rotated by r
    (A B C, B C A, ...), so drift and warm caches fall on every variant alike."""
    run_gates(variants)
    live = [v for v in variants if v.status == OK]
    for r in range(reps):
        k = r % len(live) if live else 0
        for v in live[k:] + live[:k]:
            if v.status != OK:
                continue
            try:
                if v.prepare:
                    v.prepare()
                with no_gc():
                    t0 = time.perf_counter_ns()
                    out = v.run()
                    t1 = time.perf_counter_ns()
                if v.check:
                    v.check(out)
                v.samples.append((t1 - t0) * 1e-9)
            except GateFailure as e:
                _fail(v, FAILED, f"repetition {r}: {e}")
            except Exception as e:  # noqa: BLE001
                _fail(v, ERROR, f"repetition {r}: {type(e).__name__}: {e}")
        if log:
            log(f"  round {r + 1}/{reps} done")


def row(v: Variant, **extra) -> dict:
    d = {"name": v.name, "status": v.status}
    if v.reason:
        d["reason"] = v.reason
    d.update(v.meta)
    if v.status == OK:
        d["samples_s"] = v.samples
        d.update({k + ("_s" if k in ("median", "min", "max", "p99", "mean") else ""): x
                  for k, x in summarize(v.samples).items()})
    d.update(extra)
    return d


# ---- machine, compiler, load ---------------------------------------------------------------------

def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
    except Exception:  # noqa: BLE001
        return ""


def compile_flags() -> dict:
    """The kernel's real compile line, from CMake's generated flags (not the cache, which a
    ``set()`` in CMakeLists can shadow)."""
    out = {}
    flags = ROOT / "build" / "CMakeFiles" / "tf_kernel.dir" / "flags.make"
    if flags.exists():
        txt = flags.read_text()
        m = re.search(r"^C_FLAGS = (.*)$", txt, re.M)
        if m:
            out["kernel_c_flags"] = m.group(1).strip()
        out["isa_file_flags"] = re.findall(r"(wma_\w+\.c)\.o_OPTIONS = (.*)$", txt, re.M)
    cache = ROOT / "build" / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache.read_text(), re.M)
        if m:
            out["build_type"] = m.group(1)
    return out


def machine_info() -> dict:
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host_cpus": len(ALL_CPUS),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
    }
    lscpu = _run(["lscpu"])
    for key in ("Model name", "CPU family", "Model", "CPU(s)", "Thread(s) per core",
                "Hypervisor vendor", "L1d cache", "L2 cache", "L3 cache"):
        m = re.search(rf"^{re.escape(key)}:\s*(.*)$", lscpu, re.M)
        if m:
            info["cpu_" + key.lower().replace(" ", "_").replace("(s)", "s")] = m.group(1).strip()
    m = re.search(r"^Flags:\s*(.*)$", lscpu, re.M)
    if m:
        fl = m.group(1).split()
        info["cpu_simd"] = [f for f in ("sse2", "avx2", "fma", "avx512f", "avx512dq", "avx512bw",
                                         "avx512vl") if f in fl]
    info["gcc"] = _run(["gcc", "--version"]).splitlines()[0] if _run(["gcc", "--version"]) else ""
    info.update(compile_flags())
    try:
        import numba
        info["numba"] = numba.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        from tollfree import binding
        info["isa_best"] = binding.isa_best()
        info["isa_supported"] = [i for i in ("scalar", "sse2", "avx2", "avx512")
                                 if binding.isa_supported(i)]
    except Exception as e:  # noqa: BLE001
        info["isa_best"] = f"unavailable ({e})"
    info.update(cpu_identity())
    info["isa_max"] = os.environ.get("TF_ISA_MAX", "")
    info["loadavg_1min"] = round(os.getloadavg()[0], 2)
    rev = _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]).strip()
    if rev:
        dirty = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
        info["git"] = rev + ("+dirty" if dirty.strip() else "")
    return info


def cpu_identity() -> dict:
    """Vendor, model name, family and model of the first CPU in /proc/cpuinfo (empty if none)."""
    out: dict[str, Any] = {}
    keys = {"vendor_id": "cpu_vendor", "model name": "cpu_model_name", "cpu family":
            "cpu_cpu_family", "model": "cpu_model"}
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if not ln.strip():
                    break  # the first processor is enough
                k, _, v = ln.partition(":")
                if k.strip() in keys:
                    out[keys[k.strip()]] = v.strip()
    except OSError:
        pass
    return out


def machine_line(info: dict | None = None) -> str:
    """The line every benchmark prints first (the C benches print the same, bench/bench_machine.h):
    CPU model name, vendor, family/model, the kernel ISA path AUTO picks here, 1-minute load."""
    m = dict(info) if info else {}
    if not info:
        m.update(cpu_identity())
        m["isa_max"] = os.environ.get("TF_ISA_MAX", "")
        m["loadavg_1min"] = round(os.getloadavg()[0], 2)
        try:
            from tollfree import binding
            m["isa_best"] = binding.isa_best()
        except Exception as e:  # noqa: BLE001
            m["isa_best"] = f"unavailable ({e})"
    cap = f", TF_ISA_MAX={m['isa_max']}" if m.get("isa_max") else ""
    return (f"machine: {m.get('cpu_model_name', 'unknown')} ({m.get('cpu_vendor', 'unknown')}, "
            f"family {m.get('cpu_cpu_family', '?')}, model {m.get('cpu_model', '?')}); kernel ISA "
            f"path: {m.get('isa_best', '?')} (auto{cap}); load average (1 min): "
            f"{m.get('loadavg_1min', float('nan')):.2f}")


class LoadMonitor:
    """What else ran on the machine during a benchmark: load average and the CPU time this
    process did not account for (other processes), from /proc/stat."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.load0 = os.getloadavg()
        self.stat0 = self._stat()
        self.self0 = os.times()

    @staticmethod
    def _stat() -> tuple[float, float]:
        with open("/proc/stat") as f:
            parts = [float(x) for x in f.readline().split()[1:]]
        idle = parts[3] + (parts[4] if len(parts) > 4 else 0.0)
        return sum(parts), idle

    def finish(self, children_cpu_s: float = 0.0) -> dict:
        wall = time.monotonic() - self.t0
        tot1, idle1 = self._stat()
        tot0, idle0 = self.stat0
        hz = os.sysconf("SC_CLK_TCK")
        busy_all = ((tot1 - tot0) - (idle1 - idle0)) / hz
        t1 = os.times()
        mine = (t1.user - self.self0.user) + (t1.system - self.self0.system) + \
            (t1.children_user - self.self0.children_user) + \
            (t1.children_system - self.self0.children_system) + children_cpu_s
        return {
            "wall_s": round(wall, 2),
            "loadavg_start": [round(x, 2) for x in self.load0],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "cpu_busy_s": round(busy_all, 2),
            "cpu_this_run_s": round(mine, 2),
            "cpu_others_vcpus": round(max(busy_all - mine, 0.0) / wall, 2) if wall > 0 else 0.0,
        }


def load_note(load: dict) -> str:
    return (f"load average {load['loadavg_start'][0]:.2f} at start, {load['loadavg_end'][0]:.2f} "
            f"at end; other processes used ~{load['cpu_others_vcpus']:.2f} vCPU on average "
            f"over the {load['wall_s']:.0f} s run")


# ---- formatting --------------------------------------------------------------------------------

def fmt_time(s: float | None) -> str:
    if s is None or not np.isfinite(s):
        return "-"
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.2f} us"
    return f"{s * 1e9:.0f} ns"


def fmt_ratio(x: float | None) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    if x >= 100:
        return f"{x:.0f}x"
    if x >= 10:
        return f"{x:.1f}x"
    return f"{x:.3f}x" if x < 2 else f"{x:.2f}x"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def status_cell(d: dict) -> str:
    if d.get("status") == OK:
        return ""
    return f"{d.get('status')} ({d.get('reason', '')})"
