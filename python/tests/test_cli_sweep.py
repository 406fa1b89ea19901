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


ALL_COLUMNS = ("L,half,sq,p,p3,p2,pnl,trades,wins,gross_win,gross_loss,best,worst,mean,m2,"
               "max_dd,exposure_bars,win_rate,profit_factor,sharpe_per_trade,avg_trade")


def columns(out) -> dict:
    """The CSV as {column: numpy array} (ints where the column is a count)."""
    lines = out.strip().splitlines()
    head = lines[0].split(",")
    rows = [ln.split(",") for ln in lines[1:]]
    ints = {"L", "half", "sq", "p", "p3", "p2", "trades", "wins", "exposure_bars"}
    return {h: np.array([(int if h in ints else float)(r[k]) for r in rows],
                        dtype=np.int64 if h in ints else np.float64) for k, h in enumerate(head)}


def parse(out):
    assert out.splitlines()[0] == ALL_COLUMNS
    c = columns(out)
    params = np.stack([c[n] for n in grid.PARAM_NAMES], axis=1).reshape(-1, 6)
    return params, c["pnl"], c["trades"]


def test_default_run_is_exact_and_round_trips():
    r = run("sweep", "--quiet")
    assert r.returncode == 0, r.stderr
    params, pnl, trades = parse(r.stdout)
    assert np.array_equal(params, grid.default_grid())
    p, t = tollfree.sweep(data.synthetic_close(), grid.default_grid())
    assert np.array_equal(pnl.view(np.int64), p.view(np.int64))  # %.17g round-trips
    assert np.array_equal(trades, t)
    assert (pnl[0], trades[0]) == (p[0], 57029)


def test_statistics_columns_are_the_kernels_bits():
    """Every statistic printed with %.17g reads back to the in-process bits; the derived figures
    are the package's (same operations); --fee reaches the kernel."""
    from tollfree.stats import derived
    close, g = data.default_close(), grid.default_grid()
    for fee in ("0.09", "0.3"):
        r = run("sweep", "--quiet", "--fee", fee)
        assert r.returncode == 0, r.stderr
        c = columns(r.stdout)
        st = tollfree.sweep_stats(close, g, fee=float(fee))
        for k, v in list(st.items()) + list(derived(st).items()):
            assert np.array_equal(c[k].view(np.uint64), np.asarray(v).view(np.uint64)), (fee, k)


def test_columns_sort_and_top():
    r = run("sweep", "--quiet", "--columns", "L,pnl,sharpe_per_trade", "--sort",
            "sharpe_per_trade", "--top", "4")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "L,pnl,sharpe_per_trade" and len(lines) == 5
    c = columns(r.stdout)
    full = columns(run("sweep", "--quiet").stdout)
    want = np.sort(full["sharpe_per_trade"][~np.isnan(full["sharpe_per_trade"])])[::-1][:4]
    assert np.array_equal(c["sharpe_per_trade"], want)
    r = run("sweep", "--quiet", "--columns", "L,max_dd", "--sort", "-max_dd", "--top", "3")
    assert np.array_equal(columns(r.stdout)["max_dd"], np.sort(full["max_dd"])[:3])
    r = run("sweep", "--quiet", "--columns", "basic", "--top", "2")
    assert r.stdout.splitlines()[0] == "L,half,sq,p,p3,p2,pnl,trades"
    for bad, msg in ((["--columns", "L,nope"], "unknown column 'nope'"),
                     (["--sort", "speed"], "unknown column 'speed'"),
                     (["--fee", "nan"], "--fee wants a finite number"),
                     (["--fee", "x"], "--fee wants a finite number")):
        r = run("sweep", *bad)
        assert r.returncode == 2 and msg in r.stderr, (bad, r.stderr)


@pytest.mark.parametrize("extra", [[], ["--walk-forward", "3"]])
def test_ctrl_c_stops_a_long_sweep(tmp_path, extra):
    """SIGINT during a sweep that would take minutes: exit 130, 'interrupted', no output file at
    all (out of sample too: its rows are written once every fold is done). The signal is sent
    once the kernel's worker thread runs (no clock decides anything)."""
    import signal
    import time
    out = tmp_path / "out.csv"
    p = subprocess.Popen([bin_path(), "sweep", "--grid", "6:6000:40000", "--threads", "2",
                          "--out", str(out), *extra], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + DEADLINE
        while p.poll() is None and time.monotonic() < deadline:
            with open(f"/proc/{p.pid}/status") as f:
                if int([ln for ln in f if ln.startswith("Threads:")][0].split()[1]) >= 2:
                    break
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=DEADLINE)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "interrupted" in err, (p.returncode, err)
    assert not out.exists()


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


# Exit status (tollfree --help): 1 the input failed, 2 the command line itself.
@pytest.mark.parametrize("content,args,needle,code", [
    (None, ["--input", "/nonexistent/x.csv"], "No such file", 1),
    ("date,close\n1,100\n2,abc\n", [], "not a number", 1),
    ("date,close\n", [], "empty input", 1),
    ("", [], "empty input", 1),
    ("date,price\n1,100\n", [], "no column 'close'", 1),
    ("close\n1\n", ["--grid", "5:3:2"], "LO <= HI", 2),
    ("close\n1\n", ["--grid", "a:b:c"], "three integers", 2),
    ("close\n1\n", ["--grid", "7:9"], "expected LO:HI:N", 2),
    ("close\n1\n", ["--grid", "/nonexistent/grid.csv"], "No such file", 1),
    ("close\n1\n", ["--threads", "-3"], "--threads", 2),
    ("close\n1\n", ["--bogus"], "unknown option", 2),
    ("close\n1\n", ["--isa", "mmx"], "--isa", 2),
])
def test_bad_use_gives_one_line_error(tmp_path, content, args, needle, code):
    if content is not None:
        f = tmp_path / "in.csv"
        f.write_text(content)
        args = ["--input", str(f), *args]
    r = run("sweep", *args)
    assert r.returncode == code, r.stderr
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


def test_version_is_the_projects():
    """`tollfree --version` says the version CMakeLists.txt and pyproject.toml give (it said
    0.1.0 after the project had moved to 0.2.0)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    py = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)
    cm = re.search(r"project\(tollfree VERSION (\S+)", (root / "CMakeLists.txt").read_text()).group(1)
    assert py == cm
    r = run("--version")
    assert r.returncode == 0 and r.stdout == f"tollfree {cm}\n"
