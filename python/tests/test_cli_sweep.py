"""The `tollfree sweep` command as a user runs it: real binary, real files."""
import os
import subprocess

import numpy as np
import pytest

import tollfree
from tollfree import data, grid
from tollfree._lib import bin_path
from conftest import DEADLINE  # noqa: E402


def run(*args, **kw):
    return subprocess.run([bin_path(), *args], capture_output=True, text=True, timeout=DEADLINE,
                          **kw)


def parse(out):
    lines = out.strip().splitlines()
    assert lines[0] == "L,half,sq,p,p3,p2,pnl,trades"
    rows = [ln.split(",") for ln in lines[1:]]
    params = np.array([[int(v) for v in r[:6]] for r in rows], dtype=np.int64).reshape(-1, 6)
    pnl = np.array([float(r[6]) for r in rows])
    trades = np.array([int(r[7]) for r in rows], dtype=np.int64)
    return params, pnl, trades


def test_default_run_is_exact_and_round_trips():
    r = run("sweep", "--quiet")
    assert r.returncode == 0, r.stderr
    params, pnl, trades = parse(r.stdout)
    assert np.array_equal(params, grid.default_grid())
    p, t = tollfree.sweep(data.synthetic_close(), grid.default_grid())
    assert np.array_equal(pnl.view(np.int64), p.view(np.int64))  # %.17g round-trips
    assert np.array_equal(trades, t)
    assert (pnl[0], trades[0]) == (p[0], 57029)


def test_top_k_is_sorted_best_first():
    r = run("sweep", "--top", "5", "--quiet")
    params, pnl, _ = parse(r.stdout)
    _, p_all, _ = parse(run("sweep", "--quiet").stdout)
    assert len(pnl) == 5 and list(pnl) == sorted(p_all, reverse=True)[:5]


def test_csv_and_raw_input_and_grid_file(tmp_path):
    c = data.synthetic_close(3000, seed=7)
    csv = tmp_path / "prices.csv"
    csv.write_text("date,Close\n" + "".join(f"{i},{x!r}\n" for i, x in enumerate(c)))
    raw = tmp_path / "prices.f64"
    c.tofile(raw)
    g = grid.grid(4, 60, 9)
    gfile = tmp_path / "grid.csv"
    gfile.write_text("L,half,sq,p,p3,p2\n" + "".join(",".join(map(str, row)) + "\n" for row in g))
    want_p, want_t = tollfree.sweep(c, g)
    for args in (["--input", str(csv), "--column", "Close", "--grid", "4:60:9"],
                 ["--input", str(raw), "--grid", str(gfile)]):
        out = tmp_path / "out.csv"
        r = run("sweep", *args, "--out", str(out), "--threads", "1")
        assert r.returncode == 0, r.stderr
        params, pnl, trades = parse(out.read_text())
        assert np.array_equal(params, g)
        assert np.array_equal(pnl.view(np.int64), want_p.view(np.int64))
        assert np.array_equal(trades, want_t)


@pytest.mark.parametrize("content,args,needle", [
    (None, ["--input", "/nonexistent/x.csv"], "No such file"),
    ("date,close\n1,100\n2,abc\n", [], "not a number"),
    ("date,close\n", [], "empty input"),
    ("", [], "empty input"),
    ("date,price\n1,100\n", [], "no column 'close'"),
    ("close\n1\n", ["--grid", "5:3:2"], "LO <= HI"),
    ("close\n1\n", ["--grid", "a:b:c"], "three integers"),
    ("close\n1\n", ["--grid", "/nonexistent/grid.csv"], "No such file"),
    ("close\n1\n", ["--threads", "-3"], "--threads"),
    ("close\n1\n", ["--bogus"], "unknown option"),
    ("close\n1\n", ["--isa", "mmx"], "--isa"),
])
def test_bad_use_gives_one_line_error(tmp_path, content, args, needle):
    if content is not None:
        f = tmp_path / "in.csv"
        f.write_text(content)
        args = ["--input", str(f), *args]
    r = run("sweep", *args)
    assert r.returncode != 0
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == ""


def test_grid_file_with_invalid_window(tmp_path):
    g = tmp_path / "g.csv"
    g.write_text("6,3,2,3,1,2\n6,3,0,3,1,2\n")
    r = run("sweep", "--grid", str(g))
    assert r.returncode == 1 and "combo 2" in r.stderr and ">= 1" in r.stderr


def test_help():
    r = run("--help")
    assert r.returncode == 0 and "sweep" in r.stdout and "serve" in r.stdout
    r = run("sweep", "--help")
    assert r.returncode == 0 and "--grid" in r.stdout and "--top" in r.stdout
    r = run("frobnicate")
    assert r.returncode == 2 and "unknown command" in r.stderr
