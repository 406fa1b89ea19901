"""The time-aware figures (docs/definition.md section 10): the library's tf_time_stats_* bit for
bit against the numba reference (tollfree.reference_time) on random data with NaN/inf closes,
zero-trade combos and positions of every kind; hand-checked values; the periods a year; the
CLI's --time-stats columns against the library's."""
import subprocess

import numpy as np
import pytest

from tollfree import binding, data, grid, reference_time as rt, stats
from tollfree._lib import bin_path


def same_bits(a, b):
    a, b = np.float64(a), np.float64(b)
    return a.tobytes() == b.tobytes()


def assert_same(got, want, where=""):
    bad = [(k, got[k], want[k]) for k in rt.NAMES if not same_bits(got[k], want[k])]
    assert not bad, f"{where}: {bad}"


def random_close(rng, n, holes=False):
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    if holes and n > 10:
        at = rng.choice(n, size=3, replace=False)
        close[at[0]] = np.nan
        close[at[1]] = np.inf
        close[at[2]] = -np.inf
    return close


def daily_times(n, start="2015-01-02"):
    return (np.datetime64(start, "ns") + np.arange(n) * np.timedelta64(1, "D")).view(np.int64)


@pytest.mark.parametrize("seed", range(12))
def test_positions_gate(seed):
    """Random positions (flat, long, short, reversals, runs, all flat) on random closes, with and
    without dates, NaN/inf among the closes in some cases: the raw bits of every figure."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400)) if seed % 4 else int(rng.integers(0, 4))
    close = random_close(rng, n, holes=seed % 3 == 0)
    kind = seed % 4
    if kind == 0:
        pos = np.zeros(n, np.int8)  # a zero-trade combo
    else:
        pos = np.repeat(rng.integers(-1, 2, size=n // 5 + 1), 5)[:n].astype(np.int8)
    times = daily_times(n) if seed % 2 else None
    fee = (0.09, 0.0, 0.25)[seed % 3]
    ppy = 252.0 if seed % 5 == 0 else 0.0
    got = stats.time_stats(close, positions=pos, times=times, fee=fee,
                           periods_per_year=ppy or None, validate=False)
    want = rt.figures(close, pos, fee=fee, times=times, periods_per_year=ppy)
    assert_same({k: got[k][0] for k in rt.NAMES}, want, f"seed {seed}")


@pytest.mark.parametrize("seed", range(3))
def test_hma_combos_gate(seed):
    """HMA combos (positions from the numba reference's lines, not the library), some too long
    ever to trade, with a NaN close in one case."""
    rng = np.random.default_rng(100 + seed)
    n = 700
    close = random_close(rng, n, holes=seed == 2)
    params = grid.default_grid()[rng.choice(80, size=6, replace=False)]
    params = np.vstack([params, [[900, 450, 30, 450, 150, 225]]])  # never trades on 700 bars
    times = daily_times(n) if seed != 1 else None
    got = stats.time_stats(close, params, times=times, threads=2, validate=False)
    for j, row in enumerate(params):
        pos = rt.hma_positions(close, *[int(v) for v in row])
        want = rt.figures(close, pos, times=times)
        assert_same({k: got[k][j] for k in rt.NAMES}, want, f"combo {j}")
    assert got["mean_bars"][-1] != got["mean_bars"][-1]  # NaN: no trade
    assert got["equity"][-1] == 0.0 and got["compounded"][-1] == 0.0


def test_strategy_combos_gate_and_threads():
    """A built-in strategy: positions from its streaming handle in the library, figures equal to
    the reference on those positions is what the positions gate shows; here the combos path
    gives the same bits for every thread count and equity equals pnl when the combo ends flat."""
    rng = np.random.default_rng(7)
    close = random_close(rng, 900)
    params = np.array([[3.0, 10.0], [5.0, 20.0], [8.0, 40.0], [2.0, 5.0]])
    one = stats.time_stats(close, params, strategy="sma_cross", threads=1)
    four = stats.time_stats(close, params, strategy="sma_cross", threads=4)
    for k in rt.NAMES:
        assert np.array_equal(one[k].view(np.uint64), four[k].view(np.uint64)), k


def test_hand_checked():
    """Long from bar 1 to bar 3 on 100, 110, 121, 133.1, then flat; fee 0: every bar +10 %."""
    close = np.array([100.0, 100.0, 110.0, 121.0, 121.0])
    pos = np.array([0, 1, 1, 0, 0], np.int8)
    f = stats.time_stats(close, positions=pos, fee=0.0, periods_per_year=4)
    assert f["equity"][0] == pytest.approx(21.0)
    assert f["compounded"][0] == pytest.approx(21.0)
    assert f["mean_bars"][0] == 2.0 and f["max_bars"][0] == 2.0
    assert f["exposure_pct"][0] == pytest.approx(40.0)  # bars 1 and 2 end in the position
    assert f["mtm_max_dd"][0] == 0.0 and np.isnan(f["calmar"][0])
    assert f["buy_hold"][0] == pytest.approx(21.0)
    # four changes 0, 10, 11, 0 (pp of the start): years = 4 / 4 = 1, cagr = 21 %
    assert f["cagr"][0] == pytest.approx(21.0)
    r = np.array([0.0, 10.0, 11.0, 0.0])
    assert f["ann_vol"][0] == pytest.approx(r.std(ddof=1) * 2.0)
    assert f["sharpe"][0] == pytest.approx(r.mean() / r.std(ddof=1) * 2.0)
    assert np.isnan(f["sortino"][0])  # no fall: downside deviation 0
    assert np.isnan(f["mean_days"][0]) and np.isnan(f["max_days"][0])  # no dates


def test_periods_inferred_and_refused():
    n = 253
    close = np.linspace(100, 120, n)
    pos = np.ones(n, np.int8)
    t = (np.datetime64("2020-01-01", "ns")
         + np.arange(n) * np.timedelta64(int(365.25 * 86400e9) // (n - 1), "ns")).view(np.int64)
    f = stats.time_stats(close, positions=pos, times=t)
    assert f["periods_per_year"][0] == pytest.approx(252.0, rel=1e-9)
    assert stats.time_stats(close, positions=pos)["periods_per_year"][0] == 1.0
    with pytest.raises(ValueError, match="periods per year"):
        stats.time_stats(close, positions=pos, periods_per_year=-1)
    with pytest.raises(ValueError, match="positions are -1, 0 or \\+1"):
        stats.time_stats(close, positions=np.full(n, 2, np.int8))


def test_cli_time_columns_equal_library(tmp_path):
    """tollfree sweep --time-stats on a dated CSV: the columns are the library's figures."""
    rng = np.random.default_rng(3)
    n = 1500
    close = random_close(rng, n)
    days = np.datetime64("2018-01-01") + np.arange(n)
    f = tmp_path / "p.csv"
    f.write_text("date,close\n" + "".join(f"{d},{c!r}\n" for d, c in zip(days, close)))
    out = subprocess.run([bin_path(), "sweep", "--input", str(f), "--top", "5", "--time-stats",
                          "--quiet"], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    head = lines[0].split(",")
    for name in rt.NAMES:
        assert name in head
    params = grid.default_grid()
    times = days.astype("datetime64[ns]").view(np.int64)
    lib = stats.time_stats(close, params, times=times)
    for line in lines[1:]:
        cells = dict(zip(head, line.split(",")))
        row = [int(cells[k]) for k in ("L", "half", "sq", "p", "p3", "p2")]
        j = int(np.flatnonzero((params == row).all(axis=1))[0])
        for name in rt.NAMES:
            assert same_bits(float(cells[name]), lib[name][j]), name


def test_sweep_frame_time_columns_and_min_trades():
    """sweep_frame(time_stats=True) appends the library's figures for the rows it returns;
    min_trades leaves combos with fewer trades out of the ranking."""
    import pandas as pd
    rng = np.random.default_rng(11)
    n = 1200
    idx = pd.date_range("2019-01-01", periods=n, freq="D")
    close = pd.Series(random_close(rng, n), index=idx)
    f = stats.sweep_frame(close, sort="pnl", top=5, time_stats=True)
    assert list(f.columns[-len(stats.TIME_FIGURES):]) == list(stats.TIME_FIGURES)
    params = grid.default_grid()[f.index.to_numpy()]
    lib = stats.time_stats(close.to_numpy(), params, times=idx.values.view(np.int64))
    for k in stats.TIME_FIGURES:
        assert np.array_equal(f[k].to_numpy().view(np.uint64), lib[k].view(np.uint64)), k
    assert f["periods_per_year"].iloc[0] == pytest.approx(365.25, rel=1e-3)
    plain = stats.sweep_frame(close, sort="pnl")
    cut = int(np.median(plain["trades"]))
    g = stats.sweep_frame(close, sort="pnl", min_trades=cut)
    assert (g["trades"] >= cut).all() and len(g) == int((plain["trades"] >= cut).sum())
    assert list(g.index) == [j for j in plain.index if plain.loc[j, "trades"] >= cut]
    with pytest.raises(ValueError, match="min_trades"):
        stats.sweep_frame(close, min_trades=-1)


def test_walk_forward_min_trades(tmp_path):
    """A fold with no eligible combo says so (Python frame and CLI CSV); the winners otherwise
    have at least min_trades in-sample trades."""
    from tollfree import research
    rng = np.random.default_rng(5)
    close = random_close(rng, 3000)
    plain = research.walk_forward(close, walk_forward=3)
    assert "winner_note" not in plain
    need = int(plain["is_trades"].max()) + 1_000_000
    none = research.walk_forward(close, walk_forward=3, min_trades=need)
    assert (none["winner_note"] != "ok").all() and (none["oos_rank"] == 0).all()
    assert none["L"].isna().all() and none["is_value"].isna().all()
    assert "no fold had an eligible combo" in research.verdict(none)
    some = research.walk_forward(close, walk_forward=3, min_trades=40)
    ok = some["winner_note"] == "ok"
    assert (some.loc[ok, "is_trades"] >= 40).all()
    f = tmp_path / "c.f64"
    close.tofile(f)
    out = subprocess.run([bin_path(), "sweep", "--input", str(f), "--walk-forward", "3",
                          "--min-trades", str(need), "--quiet"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0].endswith(",winner_note")
    assert all(line.endswith(f"no combo with {need} or more in-sample trades")
               for line in out[1:]) and len(out) == 4


def test_hma_random_windows_gate():
    """Windows not derived from one Hull length (half != p, tiny and long windows): the HMA
    positions path against the numba reference's lines, with a NaN close."""
    rng = np.random.default_rng(21)
    n = 500
    close = random_close(rng, n)
    close[250] = np.nan
    params = rng.integers(1, 40, size=(8, 6))
    params[0] = [1, 1, 1, 1, 1, 1]
    params[1] = [300, 7, 2, 90, 45, 3]
    got = stats.time_stats(close, params, times=daily_times(n), fee=0.25, validate=False)
    for j, row in enumerate(params):
        pos = rt.hma_positions(close, *[int(v) for v in row])
        want = rt.figures(close, pos, fee=0.25, times=daily_times(n))
        assert_same({k: got[k][j] for k in rt.NAMES}, want, f"combo {j} {row}")


def test_panel_time_columns():
    """sweep_panel(time_stats=True): each instrument's rows carry its own figures."""
    from tollfree.panel import sweep_panel
    rng = np.random.default_rng(8)
    panel = {"a": random_close(rng, 600), "b": random_close(rng, 600)}
    params = grid.default_grid()[:4]
    df = sweep_panel(panel, params, stats=True, time_stats=True, periods_per_year=252)
    for name, close in panel.items():
        want = stats.time_stats(close, params, periods_per_year=252)
        got = df[df["instrument"] == name]
        for k in stats.TIME_FIGURES:
            assert np.array_equal(got[k].to_numpy().view(np.uint64), want[k].view(np.uint64))


def test_cli_min_trades_compounded_and_refusals():
    """--min-trades leaves combos out of the table (said on stderr); --compounded is the
    library's figure; --time-stats with the folds and a bad --periods-per-year are refused."""
    def run(*a):
        return subprocess.run([bin_path(), "sweep", *a], capture_output=True, text=True)

    plain = run("--columns", "L,trades", "--sort", "pnl")
    rows = [line.split(",") for line in plain.stdout.splitlines()[1:]]
    cut = sorted(int(t) for _, t in rows)[len(rows) // 2]
    r = run("--columns", "L,trades", "--sort", "pnl", "--min-trades", str(cut), "--compounded")
    assert r.returncode == 0, r.stderr
    got = [line.split(",") for line in r.stdout.splitlines()[1:]]
    assert r.stdout.splitlines()[0] == "L,trades,compounded"
    assert [g[0] for g in got] == [L for L, t in rows if int(t) >= cut]
    left = sum(int(t) < cut for _, t in rows)
    assert f"--min-trades {cut}: {left} of 80 combos left out" in r.stderr
    params = grid.default_grid()
    lib = stats.time_stats(data.default_close(),
                           params[[int(np.flatnonzero(params[:, 0] == int(g[0]))[0])
                                   for g in got[:3]]])
    for g, want in zip(got[:3], lib["compounded"]):
        assert same_bits(float(g[2]), want)
    for bad, msg in ((["--walk-forward", "2", "--time-stats"], "goes with the per-combo table"),
                     (["--periods-per-year", "0"], "--periods-per-year wants a positive"),
                     (["--min-trades", "-3"], "--min-trades wants")):
        r = run(*bad)
        assert r.returncode == 2 and msg in r.stderr, (bad, r.stderr)


ISAS = [i for i in ("scalar", "sse2", "avx2", "avx512") if binding.isa_supported(i)]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("threads", [1, 2])
def test_sweep_time_every_path_gate(isa, threads):
    """The figures booked inside the sweep (tf_sweep_time) on each ISA this CPU has and 1 and 2
    threads: every figure the numba reference's bits (positions from the reference's own lines),
    and the sweep's outputs tollfree.sweep_stats' bits, with a NaN close and dates."""
    import tollfree
    rng = np.random.default_rng(300)
    n = 1500
    close = random_close(rng, n)
    close[1100] = np.nan
    params = np.vstack([grid.default_grid()[rng.choice(80, size=5, replace=False)],
                        grid.default_grid()[:1], [[1400, 700, 37, 700, 233, 350]]])
    times = daily_times(n)
    st, got = stats.sweep_time(close, params, threads=threads, isa=isa, fee=0.05, times=times,
                               validate=False)
    plain = tollfree.sweep_stats(close, params, threads=1, isa="scalar", fee=0.05,
                                 validate=False)
    for k in plain:
        assert plain[k].tobytes() == st[k].tobytes(), k
    for j, row in enumerate(params):
        pos = rt.hma_positions(close, *[int(v) for v in row])
        want = rt.figures(close, pos, fee=0.05, times=times)
        assert_same({k: got[k][j] for k in rt.NAMES}, want, f"{isa} {threads} combo {j}")
    via = stats.time_stats(close, params, times=times, fee=0.05, isa=isa, validate=False)
    for k in stats.TIME_FIGURES:
        assert via[k].tobytes() == got[k].tobytes(), k


def test_sort_by_time_figures(tmp_path):
    """--sort and sweep_frame(sort=) by a time-aware figure: the library's ranking (highest
    first, "-name" lowest first, NaN last, ties in grid order), the figures computed for every
    combo in the sweep; a fold's metric refuses them."""
    rng = np.random.default_rng(31)
    close = random_close(rng, 3000)
    params = grid.default_grid()[::4]
    for sort in ("sharpe", "-mtm_max_dd", "calmar"):
        df = stats.sweep_frame(close, params, sort=sort, top=6, time_stats=True)
        full = stats.time_stats(close, params)
        key = sort.lstrip("-")
        v = full[key] * (-1.0 if sort.startswith("-") else 1.0)
        want = sorted(range(len(params)), key=lambda j: (np.isnan(v[j]), -np.nan_to_num(v[j]), j))
        assert list(df.index) == want[:6], sort
        assert np.array_equal(df[key].to_numpy().view(np.uint64),
                              full[key][want[:6]].view(np.uint64))
    # sort alone asks for the figures; they are the same bits
    df = stats.sweep_frame(close, params, sort="cagr")
    assert "cagr" in df.columns
    p = tmp_path / "c.csv"
    p.write_text("close\n" + "\n".join(repr(float(x)) for x in close) + "\n")
    out = subprocess.run([bin_path(), "sweep", "--input", str(p), "--quiet", "--sort",
                          "-mtm_max_dd", "--top", "5", "--columns", "L,pnl,mtm_max_dd"],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    assert out[0] == "L,pnl,mtm_max_dd"
    full = stats.time_stats(close, grid.default_grid())
    order = sorted(range(80), key=lambda j: (full["mtm_max_dd"][j], j))[:5]
    assert [int(line.split(",")[0]) for line in out[1:]] == \
        [int(grid.default_grid()[j][0]) for j in order]
    r = subprocess.run([bin_path(), "sweep", "--input", str(p), "--quiet", "--walk-forward", "3",
                        "--metric", "cagr"], capture_output=True, text=True)
    assert r.returncode != 0 and "time-aware" in r.stderr
