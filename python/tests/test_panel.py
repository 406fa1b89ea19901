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
from tollfree.stats import DERIVED, derived  # noqa: E402
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
        p, t = tollfree.sweep(close, params, threads=1, **P._raw_kw(tollfree.sweep))
        assert np.array_equal(sub[list(P.PARAM_NAMES)].to_numpy(), params)
        assert np.array_equal(bits(sub["pnl"].to_numpy()), bits(p)), k
        assert np.array_equal(sub["trades"].to_numpy(), t), k
    assert df["trades"].dtype == np.int64 and df["L"].dtype == np.int64


def check_stats_against_sweep_stats(df, pan: dict, params: np.ndarray, fee=None) -> None:
    """Every column of a stats=True frame, instrument by instrument, against
    tollfree.sweep_stats(close, params, fee=fee) and its derived figures: raw bits, NaN too."""
    assert list(df.columns) == list(P.STATS_COLUMNS)
    assert list(P.STATS_COLUMNS[7:]) == list(binding.STAT_NAMES) + list(DERIVED)
    assert len(df) == len(pan) * len(params)
    assert list(df["instrument"].unique()) == list(pan)
    kw = {} if fee is None else {"fee": fee}
    for k, close in pan.items():
        sub = df[df["instrument"] == k]
        assert np.array_equal(sub[list(P.PARAM_NAMES)].to_numpy(), params)
        st = tollfree.sweep_stats(close, params, threads=1, **kw,
                                  **P._raw_kw(tollfree.sweep_stats))
        want = dict(st, **derived(st))
        for n in list(binding.STAT_NAMES) + list(DERIVED):
            got = sub[n].to_numpy()
            w = np.asarray(want[n])
            assert got.dtype == w.dtype, (k, n)
            assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(w).tobytes(), (k, n)


def test_dict_panel_bits():
    """validate=False: the series exactly as given (NaN, inf inside), raw bits."""
    pan, g = random_panel(), random_grid()
    for threads in (1, 2, None):
        check_against_sweep(P.sweep_panel(pan, g, threads=threads, validate=False), pan, g)
    df = P.sweep_panel(pan, g, validate=False)
    assert (df.loc[df.instrument == "i2", "trades"] == 0).all()  # empty series
    assert (df.loc[df.instrument == "i3", "pnl"] == 0.0).all()   # one bar


def test_stats_and_fee_bits():
    """stats=True: every statistic and derived figure of every row is tollfree.sweep_stats's,
    raw bits (the panel has NaN, +-inf, an empty series, one bar, windows longer than series);
    fee reaches the kernel, None is the default fee, and stats=False keeps pnl/trades only."""
    pan, g = random_panel(), random_grid()
    for fee in (None, 0.0, 0.25):
        for threads in (1, None):
            df = P.sweep_panel(pan, g, threads=threads, fee=fee, stats=True, validate=False)
            check_stats_against_sweep_stats(df, pan, g, fee)
        basic = P.sweep_panel(pan, g, fee=fee, validate=False)
        assert list(basic.columns) == list(P.COLUMNS)
        for k, close in pan.items():
            sub = basic[basic.instrument == k]
            p, t = tollfree.sweep(close, g, fee=binding.FEE_DEFAULT if fee is None else fee,
                                  **P._raw_kw(tollfree.sweep))
            assert np.array_equal(bits(sub.pnl.to_numpy()), bits(p)) and \
                np.array_equal(sub.trades.to_numpy(), t), (k, fee)
    d0 = P.sweep_panel(pan, g, stats=True, validate=False)
    d9 = P.sweep_panel(pan, g, stats=True, fee=binding.FEE_DEFAULT, validate=False)
    d1 = P.sweep_panel(pan, g, stats=True, fee=0.25, validate=False)
    assert np.array_equal(bits(d0.pnl.to_numpy()), bits(d9.pnl.to_numpy()))
    assert not np.array_equal(bits(d0.pnl.to_numpy()), bits(d1.pnl.to_numpy()))
    assert np.isnan(d0.loc[d0.instrument == "i2", "win_rate"]).all()  # no trades: NaN
    with pytest.raises(ValueError, match="finite"):
        P.sweep_panel({}, g, fee=float("nan"))
    with pytest.raises(TypeError):
        P.sweep_panel(pan, g, fee="0.1")
    empty = P.sweep_panel({}, g, stats=True)
    assert len(empty) == 0 and list(empty.columns) == list(P.STATS_COLUMNS)
    assert empty["wins"].dtype == np.int64 and empty["win_rate"].dtype == np.float64


def test_rank_and_write_csv_as_the_c_table():
    """--sort/--top per instrument: highest first (-COLUMN lowest), NaN last, ties (0.0 and
    -0.0 too) in grid order; reals as %.17g with glibc's nan/-nan/inf spellings."""
    nan = float("nan")
    df = pd.DataFrame({"instrument": ["a"] * 5 + ["b"] * 3,
                       "v": [1.0, nan, -0.0, 0.0, 2.0, -nan, float("inf"), -1.0],
                       "pnl": [0.5, 3.0, nan, 3.0, -1.0, 1.0, 2.0, 0.0]})
    assert list(P.rank(df, "pnl")) == [1, 3, 0, 4, 2, 6, 5, 7]
    assert list(P.rank(df, "-pnl")) == [4, 0, 1, 3, 2, 7, 5, 6]
    assert list(P.rank(df, None, 2)) == [1, 3, 6, 5]  # top without sort: by pnl
    assert list(P.rank(df)) == list(range(8))
    df = df.rename(columns={"v": "best"})
    assert list(P.rank(df, "best")) == [4, 0, 2, 3, 1, 6, 7, 5]
    assert list(P.rank(df, "-best", 3)) == [2, 3, 0, 7, 6, 5]
    import io

    f = io.StringIO()
    assert P.write_csv(df, f, columns=["best", "pnl"]) == 8
    assert f.getvalue().splitlines()[1:4] == ["a,1,0.5", "a,nan,3", "a,-0,nan"]
    assert f.getvalue().splitlines()[6:8] == ["b,-nan,1", "b,inf,2"]
    assert P._g17(-nan) == "-nan"
    with pytest.raises(ValueError, match="unknown column 'x'; columns: L, half"):
        P.rank(df, "x")
    with pytest.raises(ValueError, match=r"unknown column 'nope'.*\(or all, basic\)"):
        P.parse_columns("L,nope")
    with pytest.raises(ValueError, match="unknown column ''"):
        P.parse_columns("L,,pnl")
    assert P.parse_columns("basic") == P.BASIC_COLUMNS
    assert P.parse_columns("all") == P.TABLE_COLUMNS
    assert P.parse_columns("instrument,L,win_rate") == ("L", "win_rate")
    assert not P.needs_stats(P.BASIC_COLUMNS, "-pnl") and P.needs_stats(("L",), "-max_dd")
    for good, want in (("0.09", 0.09), ("0", 0.0), ("0x1p-3", 0.125), (" 2", 2.0)):
        assert P.parse_fee(good) == want
    for bad in ("-1e-3", "100", "1e300"):  # a rebate, or the whole stake and more
        with pytest.raises(ValueError, match="--fee wants 0 <= fee < 100"):
            P.parse_fee(bad)
    for bad in ("nan", "inf", "1e400", "1e-400", "x", "1 ", "", "1_0"):
        with pytest.raises(ValueError, match="--fee wants a finite number"):
            P.parse_fee(bad)


def test_dataframe_and_array_panels_drop_padding_only():
    a, b = generate_close(900, 1), generate_close(600, 2)
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


def test_write_csv_quotes_odd_instrument_names(tmp_path):
    """Names from file names or DataFrame columns may hold commas, quotes or line breaks: each
    is one RFC 4180 field, so a CSV reader gets the name back and the columns stay aligned."""
    names = ["a,b", 'say "hi"', "two\nlines", "plain"]
    df = P.sweep_panel({n: generate_close(400, i + 1) for i, n in enumerate(names)}, grid(2, 30, 9))
    out = tmp_path / "o.csv"
    with open(out, "w", newline="") as f:
        n = P.write_csv(df, f, top=1)
    assert n == 4
    back = pd.read_csv(out, float_precision="round_trip")
    assert list(back.instrument) == names
    assert list(back.columns) == list(P.COLUMNS)
    assert out.read_text().splitlines()[1].startswith('"a,b",')


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
    code, out, err = run_cli("--panel", str(d), "--grid", "4:90:7", "--quiet", "--columns",
                             "basic")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "instrument,L,half,sq,p,p3,p2,pnl,trades" and len(lines) == 1 + 2 * 7
    for i in range(2):
        code, one, err = run_cli("--input", str(d / f"s{i}.f64"), "--grid", "4:90:7", "--quiet",
                                 "--columns", "basic")
        assert code == 0, err
        mine = [ln.split(",", 1)[1] for ln in lines[1:] if ln.startswith(f"s{i},")]
        assert mine == one.splitlines()[1:]  # the same text: %.17g both sides


PLAIN_ALL = ("L,half,sq,p,p3,p2,pnl,trades,wins,gross_win,gross_loss,best,worst,mean,m2,max_dd,"
             "exposure_bars,win_rate,profit_factor,sharpe_per_trade,avg_trade")


@pytest.mark.parametrize("opts", [
    (),                                                         # every column, grid order
    ("--fee", "0.25", "--sort", "sharpe_per_trade", "--top", "3"),
    ("--fee", "0", "--sort", "-max_dd", "--columns", "L,p,max_dd,win_rate,profit_factor"),
    ("--top", "2", "--columns", "basic"),                       # best pnl, as before
])
def test_cli_panel_rows_are_the_plain_sweeps_rows(tmp_path, opts):
    """Both real commands: for each instrument of the panel (a raw f64 file and a CSV), the
    panel's rows without the instrument column are `tollfree sweep --input FILE`'s rows with the
    same --fee/--columns/--sort/--top, text for text."""
    d = tmp_path / "panel"
    d.mkdir()
    generate_close(2500, 41).tofile(d / "raw.f64")
    c = generate_close(1800, 42)
    (d / "csvd.csv").write_text("date,close\n" + "".join(f"{k},{x!r}\n" for k, x in enumerate(c)))
    grid_args = ("--grid", "3:120:9")
    code, out, err = run_cli("--panel", str(d), *grid_args, "--quiet", *opts)
    assert code == 0, err
    lines = out.splitlines()
    cols = dict(zip(opts[::2], opts[1::2])).get("--columns")
    plain_head = {None: PLAIN_ALL, "basic": "L,half,sq,p,p3,p2,pnl,trades"}.get(cols, cols)
    assert lines[0] == "instrument," + plain_head
    names = [ln.split(",", 1)[0] for ln in lines[1:]]
    assert names == sorted(names) and set(names) == {"csvd", "raw"}  # files in name order
    for name, path in (("csvd", d / "csvd.csv"), ("raw", d / "raw.f64")):
        code, one, err = run_cli("--input", str(path), *grid_args, "--quiet", *opts)
        assert code == 0, err
        assert one.splitlines()[0] == plain_head
        mine = [ln.split(",", 1)[1] for ln in lines[1:] if ln.split(",", 1)[0] == name]
        assert mine == one.splitlines()[1:] and mine, (name, opts)


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
    assert code == 2 and "--top" in err  # a usage error, as for the plain sweep
    code, _, err = run_cli("--panel", str(tmp_path / "nope.csv"))
    assert code == 1 and "nope.csv" in err
    assert "--fee" in out and "--columns" in out and "--sort" in out
    generate_close(300, 1).tofile(tmp_path / "x.f64")
    for bad, needle in ((["--columns", "L,nope"], "--columns: unknown column 'nope'; columns: "
                                                  "L, half, sq, p, p3, p2, pnl, trades, wins"),
                        (["--sort", "-speed"], "--sort: unknown column 'speed'; columns: L, "),
                        (["--fee", "nan"], "--fee wants a finite number of percent points, "
                                           "got 'nan'"),
                        (["--fee", "inf"], "--fee wants a finite number"),
                        (["--fee", "x"], "--fee wants a finite number")):
        code, out2, err = run_cli("--panel", str(tmp_path), *bad)
        assert code == 2 and needle in err and out2 == "", (bad, err)
        assert err.count("\n") == 1, err  # one line


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


# ---- gaps and bad prices inside a column (issue 21) ----

def weekend_frame():
    """Two instruments on business days, resampled to calendar days: every weekend is a row of
    NaN inside each column (the shape a `.resample("D").last()` gives)."""
    idx = pd.bdate_range("2024-01-01", periods=300)
    frame = pd.DataFrame({"A": generate_close(300, 5), "B": generate_close(300, 6)}, index=idx)
    return frame.resample("D").last()


def test_gap_inside_a_frame_column_is_refused_naming_instrument_and_row():
    """Before: pnl 0 and trades 0 for every combo of the instrument, silently."""
    frame, g = weekend_frame(), grid(2, 40, 6)
    with pytest.raises(tollfree.data.BadInput) as e:
        P.sweep_panel(frame, g)
    msg = str(e.value)
    assert "instrument 'A'" in msg and "index label 2024-01-06" in msg and "position 5" in msg
    assert "a gap" in msg and 'fill="forward"' in msg and "118 such rows" in msg
    arr = frame.to_numpy()
    with pytest.raises(ValueError, match=r"instrument 'x', row 5: a gap"):
        P.sweep_panel(arr, g, names=["x", "y"])
    with pytest.raises(ValueError, match=r"instrument 'k', bar 2: a gap"):
        P.sweep_panel({"k": np.array([1.0, 2.0, np.nan, 3.0])}, g)


def test_fill_forward_gives_the_last_price_and_says_how_many():
    frame, g = weekend_frame(), grid(2, 40, 6)
    df = P.sweep_panel(frame, g, fill="forward", stats=True)
    want = {k: frame[k].ffill().to_numpy() for k in frame.columns}
    check_stats_against_sweep_stats(df, want, g)
    assert df.attrs["tollfree"]["filled"] == {"A": 118, "B": 118}
    notes = df.attrs["tollfree"]["notes"]
    assert len(notes) == 2 and notes[0].startswith("instrument 'A': 118 bars filled forward")
    assert "index labels 2024-01-06, 2024-01-07, 2024-01-13" in notes[0]
    # no gap, nothing filled: the attribute says so
    clean = P.sweep_panel(frame.dropna(), g, fill="forward")
    assert clean.attrs["tollfree"]["filled"] == {} and clean.attrs["tollfree"]["notes"] == []
    # a dict: a leading NaN has no price before it
    with pytest.raises(ValueError, match="bar 0: no price at the start"):
        P.sweep_panel({"k": np.array([np.nan, 2.0, 3.0])}, g, fill="forward")
    with pytest.raises(ValueError, match="fill must be None or 'forward'"):
        P.sweep_panel(frame, g, fill="backward")


@pytest.mark.parametrize("bad", [np.inf, -np.inf, 0.0, -5.0])
def test_bad_price_inside_a_column_is_refused_even_with_fill(bad):
    a = generate_close(400, 3)
    a[123] = bad
    frame = pd.DataFrame({"Z": np.r_[np.nan, a]}, index=pd.RangeIndex(10, 411))
    for fill in (None, "forward"):
        with pytest.raises(tollfree.data.BadInput,
                           match=rf"instrument 'Z', row at index label 134 \(position 124\): "
                                 rf"{bad!r} is not a positive finite price"):
            P.sweep_panel(frame, grid(2, 9, 2), fill=fill)
    # validate=False: exactly as given, as before
    df = P.sweep_panel(frame, grid(2, 9, 2), validate=False)
    check_against_sweep(df, {"Z": a}, grid(2, 9, 2))


def write_wide_with_gaps(path):
    a, b = generate_close(60, 3), generate_close(60, 4)
    b[[10, 11, 30]] = np.nan
    b[:5] = np.nan  # padding, allowed
    frame = pd.DataFrame({"date": pd.date_range("2024-03-01", periods=60).strftime("%Y-%m-%d"),
                          "AAA": a, "BBB": b})  # real dates: the reader checks them
    frame.to_csv(path, index=False, float_format="%.17g")
    return a, b


def test_cli_wide_csv_gap_refused_with_file_line_column(tmp_path):
    path = tmp_path / "wide.csv"
    write_wide_with_gaps(path)
    code, out, err = run_cli("--panel", str(path), "--grid", "2:30:5", "--quiet")
    assert code == 1 and out == ""
    # data row 10 is on line 12 (the header is line 1); BBB is the third column
    assert f"{path}:12: column 3 'BBB': cell '': a gap" in err, err
    assert "--fill forward" in err and "3 such rows" in err and err.count("\n") == 1
    code, _, err = run_cli("--panel", str(path), "--fill", "backward")
    assert code == 2 and "--fill wants forward" in err
    code, _, err = run_cli("--input", str(path), "--fill", "forward")
    assert code == 2 and "--fill" in err  # the plain sweep's reader refuses gaps itself


def test_cli_wide_csv_fill_forward_matches_filled_series_and_says_so(tmp_path):
    path = tmp_path / "wide.csv"
    a, b = write_wide_with_gaps(path)
    code, out, err = run_cli("--panel", str(path), "--grid", "2:30:5", "--quiet", "--fill",
                             "forward", "--columns", "basic")
    assert code == 0, err
    assert "note: instrument 'BBB': 3 bars filled forward with the last price before them " \
           "(lines 12, 13, 32)" in err
    bf = b[5:].copy()
    bf[[5, 6, 25]] = bf[[4, 4, 24]]
    df = P.sweep_panel({"AAA": a, "BBB": bf}, grid(2, 30, 5))
    import io

    want = io.StringIO()
    P.write_csv(df, want, columns=P.BASIC_COLUMNS)
    assert out == want.getvalue()


def test_cli_raw_panel_file_with_nan_inside_is_refused(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    x = generate_close(300, 1)
    x[77] = np.nan
    x.tofile(d / "x.f64")
    code, _, err = run_cli("--panel", str(d), "--grid", "2:9:2")
    assert code == 1 and f"{d / 'x.f64'}: bar 77 (byte 616), instrument 'x': a gap" in err, err
    code, out, err = run_cli("--panel", str(d), "--grid", "2:9:2", "--fill", "forward", "--quiet")
    assert code == 0 and "'x': 1 bar filled forward with the last price before it (rows 77)" in err


def test_wide_csv_dates_are_checked_like_input(tmp_path):
    """A wide CSV's date column is checked by the library's reader, as `--input` checks one:
    shuffled rows are refused naming the line (they gave a confident wrong ranking, exit 0),
    newest first is reversed with a note and gives the oldest-first rows."""
    a, b = generate_close(400, 1), generate_close(400, 2)
    dates = pd.date_range("2024-01-01", periods=400, freq="D")
    frame = pd.DataFrame({"AAA": a, "BBB": b}, index=dates)
    frame.to_csv(tmp_path / "up.csv")
    frame.iloc[::-1].to_csv(tmp_path / "down.csv")
    frame.sample(frac=1, random_state=3).to_csv(tmp_path / "shuffled.csv")
    args = ("--grid", "4:90:7", "--quiet", "--columns", "basic")
    code, up, err = run_cli("--panel", str(tmp_path / "up.csv"), *args)
    assert code == 0, err
    code, down, err = run_cli("--panel", str(tmp_path / "down.csv"), *args)
    assert code == 0 and down == up, err
    assert "down.csv: the dates run newest first: the rows were reversed" in err
    code, out, err = run_cli("--panel", str(tmp_path / "shuffled.csv"), *args)
    assert code == 1 and out == "", err
    assert "shuffled.csv:" in err and "dates out of order" in err


def test_cli_panel_time_stats(tmp_path):
    """`sweep --panel --time-stats`: each instrument's rows carry the library's time-aware
    figures of its series (the bits of tollfree.stats.time_stats, printed %.17g), in process
    (on Dask: test_distributed.py, test_cli_scheduler_time_stats)."""
    from tollfree import grid, stats
    d = tmp_path / "panel"
    d.mkdir()
    rng = np.random.default_rng(41)
    series = {}
    for name in ("x", "y"):
        c = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, 2500)))
        series[name] = c
        (d / f"{name}.csv").write_text("close\n" + "\n".join(repr(float(v)) for v in c) + "\n")
    rc, out, err = run_cli("--panel", str(d), "--periods-per-year", "252", "--columns", "L,pnl",
                           "--quiet")
    assert rc == 0, err
    lines = out.splitlines()
    head = lines[0].split(",")
    assert head[:3] == ["instrument", "L", "pnl"] and tuple(head[3:]) == stats.TIME_FIGURES
    params = grid.default_grid()
    for name, close in series.items():
        want = stats.time_stats(close, params, periods_per_year=252)
        rows = [line.split(",") for line in lines[1:] if line.startswith(name + ",")]
        assert len(rows) == len(params)
        for j, row in enumerate(rows):
            for k, fig in enumerate(stats.TIME_FIGURES):
                assert row[3 + k] == "%.17g" % want[fig][j] or (
                    np.isnan(want[fig][j]) and row[3 + k].endswith("nan")), (name, j, fig)


@pytest.mark.parametrize("strategy, params", [
    (None, None),
    ("sma_cross", [[3, 20], [5, 40], [3, 20], [10, 100]]),
    ("bollinger", [[20, 2.0], [30, 1.5]]),
])
def test_panel_time_stats_one_sweep_per_instrument(monkeypatch, strategy, params):
    """sweep_panel(time_stats=True): one sweep per instrument books the statistics and the
    figures (tollfree.stats.sweep_time; the plain sweeps and the figures' own pass are never
    called), with the bits of each alone: the stats frame's and stats.time_stats'."""
    from tollfree import grid, stats
    pan = {k: v for k, v in random_panel(11).items() if v.size == 0 or np.isfinite(v).all()}
    params = (np.ascontiguousarray(grid.default_grid()[::7]) if params is None
              else np.asarray(params, np.float64))
    want_df = P.sweep_panel(pan, params, threads=1, stats=True, strategy=strategy)
    want_t = {k: stats.time_stats(c, params, strategy=strategy, periods_per_year=252,
                                  threads=1) for k, c in pan.items()}
    calls = []
    real = stats.sweep_time

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    def refuse(*a, **kw):
        raise AssertionError("a second sweep")

    monkeypatch.setattr(stats, "sweep_time", counted)
    for name in ("sweep", "sweep_stats"):
        monkeypatch.setattr(binding, name, refuse)
    monkeypatch.setattr(stats, "time_stats", refuse)
    for threads in (1, 2):
        calls.clear()
        df = P.sweep_panel(pan, params, threads=threads, stats=True, strategy=strategy,
                           periods_per_year=252)
        assert len(calls) == len(pan)
        for col in want_df.columns:
            a, b = df[col].to_numpy(), want_df[col].to_numpy()
            assert a.tobytes() == b.tobytes() if a.dtype != object else list(a) == list(b), col
        for k in pan:
            sub = df[df["instrument"] == k]
            for fig in stats.TIME_FIGURES:
                assert bits(sub[fig].to_numpy()).tolist() == bits(want_t[k][fig]).tolist(), \
                    (k, fig)


def test_panel_rank_by_a_time_figure():
    """A panel ranks by a time-aware figure as by any column (P.rank: per instrument, highest
    first, '-' lowest first, NaN last, ties in grid order); a frame without them says how to
    get them."""
    from tollfree import grid, stats
    pan = {k: v for k, v in random_panel(5).items() if v.size > 100 and np.isfinite(v).all()}
    params = np.ascontiguousarray(grid.default_grid()[::5])
    df = P.sweep_panel(pan, params, threads=1, time_stats=True, periods_per_year=252)
    for spec in ("cagr", "-sharpe", "mtm_max_dd", "-calmar"):
        name, sign = spec.lstrip("-"), -1 if spec.startswith("-") else 1
        idx = P.rank(df, spec)
        assert sorted(idx.tolist()) == list(range(len(df)))
        for k in pan:
            rows = [i for i in idx if df["instrument"].iloc[i] == k]
            v = df[name].to_numpy()[rows]
            finite = v[~np.isnan(v)]
            assert (np.diff(finite) * sign <= 0).all(), (k, spec)
            assert np.isnan(v[len(finite):]).all()  # NaN last
        assert len(P.rank(df, spec, top=3)) == 3 * len(pan)
    plain = P.sweep_panel(pan, params, threads=1)
    with pytest.raises(ValueError, match="time_stats=True"):
        P.rank(plain, "cagr")
    assert stats.TIME_FIGURES[1] == "cagr"


def test_cli_panel_sort_by_a_time_figure(tmp_path):
    """`sweep --panel --sort cagr --top 2`: each instrument's two combos of highest cagr (the
    library's figures), computed by the sweep though not printed without --time-stats."""
    from tollfree import grid, stats
    d = tmp_path / "panel"
    d.mkdir()
    rng = np.random.default_rng(43)
    series = {}
    for name in ("a", "b"):
        c = 100.0 * np.exp(np.cumsum(rng.normal(0.0002, 0.01, 2000)))
        series[name] = c
        (d / f"{name}.csv").write_text("close\n" + "\n".join(repr(float(v)) for v in c) + "\n")
    rc, out, err = run_cli("--panel", str(d), "--sort", "cagr", "--top", "2", "--columns",
                           "L,pnl", "--quiet")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split(",") == ["instrument", "L", "pnl"]
    params = grid.default_grid()
    for name, close in series.items():
        t = stats.time_stats(close, params)
        order = np.argsort(-t["cagr"], kind="stable")[:2]
        rows = [ln.split(",") for ln in lines[1:] if ln.startswith(name + ",")]
        assert [int(r[1]) for r in rows] == [int(params[j][0]) for j in order]
    rc, out, err = run_cli("--panel", str(d), "--sort", "-sharpe", "--quiet")
    assert rc == 0, err
    assert len(out.splitlines()) == 1 + 2 * len(params)
