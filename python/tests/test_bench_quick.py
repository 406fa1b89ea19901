"""The benchmarks' smoke runs (seconds each), so they cannot rot.

Asserts only that each exits 0 and that its bit-identity gate passed (from its JSON); timing is
never asserted. Rows whose server or client is not built are "unavailable", which is not a
failure; a row that crashed ("error") is.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(module, out):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", module, "--quick", "--out", str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{module} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def test_bench_kernel_quick(tmp_path):
    _run("tollfree.bench_kernel", tmp_path)
    res = json.loads((tmp_path / "kernel.json").read_text())
    assert res["gate_passed"] is True
    assert not res["errors"], res["errors"]
    timed = [r for r in res["rows"] if r["status"] == "ok"]
    assert any(r.get("key") == "numba_1t" for r in timed)
    assert any(r.get("key") == "fast_all" for r in timed)
    assert (tmp_path / "kernel.md").exists()


def test_bench_boundary_quick(tmp_path):
    _run("tollfree.bench", tmp_path)
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["gate"]["passed"] is True, res["gate"]
    assert not res["gate"]["errors"], res["gate"]["errors"]
    keys = {r["key"] for r in res["architecture"]["rows"] if r["status"] == "ok"}
    assert {"numba_1t", "tollfree_all"} <= keys
    for name in ("report.md", "serialization.png"):
        assert (tmp_path / name).exists(), name


def test_bench_contention_quick():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "tollfree.bench.contention", "--quick"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert p.stdout.startswith("machine: ")
    for cond in ("quiet", "same", "hog"):
        for tr in ("unix", "shm"):
            assert f"| {cond} | {tr} |" in p.stdout, (cond, tr)
