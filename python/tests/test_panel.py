"""Panel sweeps in-process (tollfree.panel), the prepared-series binding, and
`tollfree sweep --panel`: every row equals tollfree.sweep on its instrument, raw bits."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

import tollfree  # noqa: E402
from tollfree import binding, panel as P  # noqa: E402
from tollfree._lib import bin_path  # noqa: E402
from tollfree.data import generate_close  # noqa: E402
from tollfree.grid import grid  # noqa: E402
from conftest import DEADLINE  # noqa: E402


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def random_panel(seed: int = 7) -> dict:
    """Lengths that differ, NaN and +-inf inside, an empty series, one bar, a short one."""
    rng = np.random.default_rng(seed)
    pan = {}
    for i, n in enumerate([4000, 1500, 0, 1, 37, 2500]):
        pan[f"i{i}"] = generate_close(n, seed + i) if n else np.empty(0)
    a = pan["i1"]
    a[rng.integers(0, a.size, 3)] = np.nan
    a[100], a[700] = np.inf, -np.inf
    pan["i5"][1234] = np.nan
    return pan


def random_grid(seed: int = 3) -> np.ndarray:
    """Windows from 1 to past the longest series (some combos never warm up), in random order."""
    rng = np.random.default_rng(seed)
    g = np.concatenate([grid(1, 120, 30), grid(3000, 5000, 3)])
    return np.ascontiguousarray(g[rng.permutation(len(g))])


def check_against_sweep(df, pan: dict, params: np.ndarray) -> None:
    assert list(df.columns) == list(P.COLUMNS)
    assert len(df) == len(pan) * len(params)
    assert list(df["instrument"].unique()) == list(pan)
    for k, close in pan.items():
        sub = df[df["instrument"] == k]
        p, t = tollfree.sweep(close, params, threads=1)
        assert np.array_equal(sub[list(P.PARAM_NAMES)].to_numpy(), params)
        assert np.array_equal(bits(sub["pnl"].to_numpy()), bits(p)), k
        assert np.array_equal(sub["trades"].to_numpy(), t), k
    assert df["trades"].dtype == np.int64 and df["L"].dtype == np.int64


def test_dict_panel_bits():
    pan, g = random_panel(), random_grid()
    for threads in (1, 2, None):
        check_against_sweep(P.sweep_panel(pan, g, threads=threads), pan, g)
    df = P.sweep_panel(pan, g)
    assert (df.loc[df.instrument == "i2", "trades"] == 0).all()  # empty series
    assert (df.loc[df.instrument == "i3", "pnl"] == 0.0).all()   # one bar


def test_dataframe_and_array_panels_drop_padding_only():
    a, b = generate_close(900, 1), generate_close(600, 2)
    b[50] = np.nan  # inside: kept
    frame = pd.DataFrame({"A": a, "B": np.r_[np.full(200, np.nan), b, np.full(100, np.nan)]})
    g = grid(2, 60, 12)
    df = P.sweep_panel(frame, g)
    check_against_sweep(df, {"A": a, "B": b}, g)
    arr = frame.to_numpy()
    check_against_sweep(P.sweep_panel(arr, g, names=["A", "B"]), {"A": a, "B": b}, g)
    names, series = P.as_panel(pd.DataFrame({"x": [np.nan, np.nan]}))
    assert names == ["x"] and series[0].size == 0


def test_panel_errors():
    g = grid(2, 10, 3)
    with pytest.raises(TypeError):
        P.sweep_panel([1.0, 2.0], g)
    with pytest.raises(ValueError, match="names"):
        P.sweep_panel(np.zeros((10, 2)), g, names=["a"])
    with pytest.raises(ValueError, match="1-D"):
        P.sweep_panel({"a": np.zeros((2, 2))}, g)
    with pytest.raises(ValueError, match="shape"):
        P.sweep_panel({"a": np.zeros(5)}, np.zeros((2, 5), dtype=np.int64))
    df = P.sweep_panel({}, g)
    assert len(df) == 0 and list(df.columns) == list(P.COLUMNS)


def test_series_blocks_equal_sweep_and_cache_once():
    """The prepared series: blocks of combos give the one-call bits; the cache fills once."""
    close, g = generate_close(5000, 5), random_grid()
    ref_p, ref_t = tollfree.sweep(close, g, threads=1)
    with binding.Series(close) as s:
        outs = [s.sweep(g[lo:lo + 7], threads=1) for lo in range(0, len(g), 7)]
        filled = s.cached_bytes
        lengths = np.unique(g[:, [0, 1, 3, 4, 5]])
        assert filled == lengths.size * close.size * 8  # every first-stage length, once
        p2, t2 = s.sweep(g, threads=2)
        assert s.cached_bytes == filled  # nothing recomputed into new rows
    assert np.array_equal(bits(np.concatenate([o[0] for o in outs])), bits(ref_p))
    assert np.array_equal(np.concatenate([o[1] for o in outs]), ref_t)
    assert np.array_equal(bits(p2), bits(ref_p)) and np.array_equal(t2, ref_t)
    with binding.Series(close, cache_bytes=0) as s0:
        assert np.array_equal(bits(s0.sweep(g)[0]), bits(ref_p)) and s0.cached_bytes == 0
    with pytest.raises(ValueError):
        binding.Series(close, cache_bytes=-1)


def test_write_csv_top_per_instrument(tmp_path):
    df = P.sweep_panel({"a": generate_close(800, 1), "b": generate_close(500, 2)}, grid(2, 40, 9))
    out = tmp_path / "o.csv"
    with open(out, "w") as f:
        assert P.write_csv(df, f, top=2) == 4
    back = pd.read_csv(out, float_precision="round_trip")
    assert list(back.columns) == list(P.COLUMNS) and list(back.instrument) == ["a", "a", "b", "b"]
    for k in ("a", "b"):
        best = df[df.instrument == k].sort_values("pnl", ascending=False, kind="stable")
        assert np.array_equal(bits(back[back.instrument == k].pnl.to_numpy()),
                              bits(best.pnl.to_numpy()[:2]))
    assert P._g17(float("nan")) == "nan" and P._g17(-float("nan")) == "-nan"


def run_cli(*args, cwd=None):
    r = subprocess.run([bin_path(), "sweep", *args], capture_output=True, text=True,
                       timeout=DEADLINE, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def test_cli_panel_dir_matches_single_series_cli(tmp_path):
    d = tmp_path / "panel"
    d.mkdir()
    for i, n in enumerate([3000, 1200]):
        generate_close(n, 20 + i).tofile(d / f"s{i}.f64")
    (d / "notes.txt").write_text("ignored\n")
    code, out, err = run_cli("--panel", str(d), "--grid", "4:90:7", "--quiet")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "instrument,L,half,sq,p,p3,p2,pnl,trades" and len(lines) == 1 + 2 * 7
    for i in range(2):
        code, one, err = run_cli("--input", str(d / f"s{i}.f64"), "--grid", "4:90:7", "--quiet",
                                 "--columns", "basic")
        assert code == 0, err
        mine = [ln.split(",", 1)[1] for ln in lines[1:] if ln.startswith(f"s{i},")]
        assert mine == one.splitlines()[1:]  # the same text: %.17g both sides


def test_cli_panel_wide_csv(tmp_path):
    a, b = generate_close(700, 3), generate_close(400, 4)
    frame = pd.DataFrame({"date": np.arange(700), "AAA": a,
                          "BBB": np.r_[np.full(300, np.nan), b]})
    path = tmp_path / "wide.csv"
    frame.to_csv(path, index=False, float_format="%.17g")
    code, out, err = run_cli("--panel", str(path), "--grid", "2:30:5", "--top", "1")
    assert code == 0, err
    assert "2 instruments x 5 combos" in err
    rows = out.splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["AAA", "BBB"]
    df = P.sweep_panel({"AAA": a, "BBB": b}, grid(2, 30, 5))
    for r in rows:
        name, pnl = r.split(",")[0], float(r.split(",")[7])
        assert np.float64(pnl).view(np.uint64) == bits(df[df.instrument == name].pnl.max())[()]


def test_cli_panel_help_and_errors(tmp_path):
    code, out, _ = run_cli("--help")
    assert code == 0 and "--panel PATH" in out and "--scheduler ADDR" in out
    assert "python3 -m tollfree.distributed" in out
    code, _, err = run_cli("--panel", str(tmp_path))
    assert code == 1 and "no *.csv" in err
    code, _, err = run_cli("--panel", str(tmp_path), "--top", "0")
    assert code == 1 and "--top" in err
    code, _, err = run_cli("--panel", str(tmp_path / "nope.csv"))
    assert code == 1 and "nope.csv" in err


def test_cli_finds_package_without_pythonpath(tmp_path):
    """A build tree's CLI finds the sources' package and its own library by itself."""
    d = tmp_path / "p"
    d.mkdir()
    generate_close(500, 1).tofile(d / "x.f64")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TOLLFREE_LIB")}
    r = subprocess.run([bin_path(), "sweep", "--panel", str(d), "--grid", "2:9:2", "--quiet"],
                       capture_output=True, text=True, timeout=DEADLINE, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith("x,2,1,1,1,1,1,")
