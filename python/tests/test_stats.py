"""The statistics (docs/definition.md section 8) and the fee on every path, bit for bit against
the numba reference; the derived figures; progress and Ctrl-C."""
import numpy as np
import pytest

import tollfree
from tollfree import binding, data, grid, reference
from tollfree.stats import derived, sweep_frame

ISAS = [i for i in ("scalar", "sse2", "avx2", "avx512") if binding.isa_supported(i)]
FEES = (0.09, 0.0, 0.25)


def same_bits(a, b):
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


def same_stats(got, want):
    assert list(got) == list(binding.STAT_NAMES)
    return all(same_bits(got[k], want[k]) for k in want)


def random_case(seed, n, m):
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.002, n)))
    kind = rng.random((m, 6))
    params = np.where(kind < 0.1, 1, np.where(kind < 0.15, rng.integers(1, 400, (m, 6)),
                                               rng.integers(1, 40, (m, 6))))
    return np.ascontiguousarray(close), np.ascontiguousarray(params, dtype=np.int64)


@pytest.fixture(scope="module")
def default_stats():
    close, params = data.default_close(), grid.default_grid()
    return close, params, {f: reference.sweep_stats(close, params, fee=f) for f in FEES}


@pytest.mark.parametrize("fee", FEES)
def test_every_path_gives_the_numba_statistics(default_stats, fee):
    close, params, want = default_stats
    want = want[fee]
    p, t = reference.sweep(close, params, fee=fee)
    assert same_bits(p, want["pnl"]) and same_bits(t, want["trades"])
    for isa in ISAS + ["auto", "reference"]:
        for threads in ((1,) if isa == "reference" else (1, 2, 3)):
            got = tollfree.sweep_stats(close, params, threads=threads, isa=isa, fee=fee)
            assert same_stats(got, want), (isa, threads, fee)
            p, t = tollfree.sweep(close, params, threads=threads, isa=isa, fee=fee)
            assert same_bits(p, want["pnl"]) and same_bits(t, want["trades"])
    with binding.Series(close) as s:
        for _ in range(2):  # a cold and a warm first-stage cache
            p, t = s.sweep(params, fee=fee)
            assert same_bits(p, want["pnl"]) and same_bits(t, want["trades"])
            assert same_stats(s.sweep_stats(params, fee=fee), want), fee


def test_default_fee_is_the_published_one(default_stats):
    close, params, want = default_stats
    p, _ = tollfree.sweep(close, params)
    assert same_bits(p, want[0.09]["pnl"])
    assert not same_bits(want[0.0]["pnl"], want[0.09]["pnl"])
    # no fee: every trade's return is pure price move, so pnl = gross_win + gross_loss exactly
    # in value (not in bits: the sums are accumulated in different orders)
    w = want[0.0]
    assert np.allclose(w["pnl"], w["gross_win"] + w["gross_loss"], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed,n,m", [(1, 0, 3), (2, 5, 4), (3, 3000, 40), (4, 2500, 1),
                                      (5, 6000, 25)])
def test_random_cases(seed, n, m):
    close, params = random_case(seed, n, m)
    for fee in (0.09, 0.5):
        want = reference.sweep_stats(close, params, fee=fee)
        for isa in ISAS + ["auto", "reference"]:
            got = tollfree.sweep_stats(close, params, threads=2, isa=isa, fee=fee)
            assert same_stats(got, want), (isa, fee)
        for j in range(min(m, 3)):
            s = tollfree.Strategy(params[j], fee=fee)
            for x in close.tolist():
                s.on_bar(x)
            st = s.stats()
            for k in binding.STAT_NAMES:
                assert same_bits(np.asarray(st[k], dtype=want[k].dtype), want[k][j]), (j, k)


def test_statistics_hold_their_definitions(default_stats):
    _, _, want = default_stats
    w = want[0.09]
    t = w["trades"]
    assert (w["wins"] <= t).all() and (w["gross_win"] >= 0).all() and (w["gross_loss"] <= 0).all()
    assert (w["best"] >= w["mean"]).all() and (w["worst"] <= w["mean"]).all()
    assert (w["max_dd"] >= 0).all() and (w["m2"] >= 0).all()
    assert ((w["exposure_bars"] > 0) & (w["exposure_bars"] <= 150_000)).all()
    assert np.allclose(w["mean"], w["pnl"] / t, rtol=1e-9)


def test_derived_figures_and_their_edges():
    st = {"trades": np.array([0, 1, 2, 2, 4]), "wins": np.array([0, 1, 2, 0, 2]),
          "gross_win": np.array([0.0, 1.0, 3.0, 0.0, 2.0]),
          "gross_loss": np.array([0.0, 0.0, 0.0, -2.0, -1.0]),
          "mean": np.array([0.0, 1.0, 1.5, -1.0, 0.25]),
          "m2": np.array([0.0, 0.0, 0.5, 0.0, 3.0]),
          "pnl": np.array([0.0, 1.0, 3.0, -2.0, 1.0])}
    d = derived(st)
    assert np.isnan(d["win_rate"][0]) and d["win_rate"][4] == 0.5
    assert np.isnan(d["profit_factor"][0]) and d["profit_factor"][1] == np.inf
    assert d["profit_factor"][2] == np.inf and d["profit_factor"][3] == 0.0
    assert d["profit_factor"][4] == 2.0
    assert np.isnan(d["sharpe_per_trade"][:2]).all()  # under two trades
    assert np.isnan(d["sharpe_per_trade"][3])  # std 0
    assert d["sharpe_per_trade"][2] == 1.5 / np.sqrt(0.5)
    assert d["sharpe_per_trade"][4] == 0.25 / 1.0
    assert np.isnan(d["avg_trade"][0]) and d["avg_trade"][4] == 0.25


def test_sweep_frame(default_stats):
    close, params, want = default_stats
    f = sweep_frame(close)
    assert list(f.columns[:6]) == list(grid.PARAM_NAMES)
    assert set(binding.STAT_NAMES) <= set(f.columns)
    assert {"win_rate", "profit_factor", "sharpe_per_trade", "avg_trade"} <= set(f.columns)
    assert same_bits(f["pnl"].to_numpy(), want[0.09]["pnl"])
    top = sweep_frame(close, sort="sharpe_per_trade", top=5)
    assert len(top) == 5 and top["sharpe_per_trade"].is_monotonic_decreasing
    assert top["sharpe_per_trade"].iloc[0] == np.nanmax(f["sharpe_per_trade"])
    import pandas as pd
    fs = sweep_frame(pd.Series(close.tolist()), params[:3])  # any float sequence
    assert same_bits(fs["pnl"].to_numpy(), want[0.09]["pnl"][:3])
    low = sweep_frame(close, sort="-max_dd", top=2)
    assert list(low["max_dd"]) == sorted(f["max_dd"])[:2]
    with pytest.raises(ValueError, match="sort must be one of"):
        sweep_frame(close, sort="nope")


def test_bad_fee_and_progress_arguments():
    close, params = data.default_close()[:1000], grid.default_grid()[:2]
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="fee must be finite"):
            tollfree.sweep(close, params, fee=bad)
    with pytest.raises(TypeError, match="fee must be a number"):
        tollfree.sweep_stats(close, params, fee="0.1")
    with pytest.raises(TypeError, match="progress must be"):
        tollfree.sweep(close, params, progress="yes")
    with pytest.raises(ValueError, match="fee must be finite"):
        tollfree.Strategy(params[0], fee=float("nan"))


def test_progress_callable_sees_the_whole_sweep():
    close, params = data.default_close(), grid.default_grid()
    seen = []
    p, _ = tollfree.sweep(close, params, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1][0] == seen[-1][1] > 0
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    want, _ = tollfree.sweep(close, params)
    assert same_bits(p, want)


def test_keyboard_interrupt_cancels_and_leaves_the_library_usable():
    close, params = data.default_close(), grid.grid(6, 400, 400)

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tollfree.sweep(close, params, progress=interrupt)
    p, t = tollfree.sweep(close, params[:80], threads=2)
    p2, t2 = tollfree.sweep(close, params[:80], threads=1)
    assert same_bits(p, p2) and same_bits(t, t2)


@pytest.mark.parametrize("kind", ["unix", "tcp", "shm"])
def test_service_statistics_equal_in_process(server, default_stats, kind):
    """SWEEP_DS with the statistics and fee flags: the same rows as in-process, raw bits; the
    capability is announced in HELLO; a v1-style SWEEP_DS (flags 0) is unchanged."""
    from tollfree import wire
    close, params, want = default_stats
    with tollfree.connect(server.url(kind)) as c:
        assert c.hello()["caps"] & wire.CAP_SWEEP_FLAGS
        for fee in (0.09, 0.25):
            got = c.sweep_stats(close, params, fee=fee)
            assert same_stats(got, want[fee]), (kind, fee)
        ds = c.load(close)
        p, t = c.sweep(ds, params)
        assert same_bits(p, want[0.09]["pnl"]) and same_bits(t, want[0.09]["trades"])
        got = c.sweep_stats(ds, params[:7], fee=0.0)
        assert same_stats(got, {k: v[:7] for k, v in want[0.0].items()})
        empty = c.sweep_stats(ds, params[:0])
        assert all(v.shape == (0,) for v in empty.values())
        c.drop(ds)


def test_service_refuses_bad_flags_and_fees(server):
    """Unknown flag bits are a protocol error; a non-finite fee is refused by the kernel; the
    connection stays usable after both."""
    import socket
    import struct
    from tollfree import wire
    close, params = data.default_close()[:2000], grid.default_grid()[:2]
    with tollfree.connect(server.url("unix")) as c:
        ds = c.load(close)
        with pytest.raises(tollfree.SweepError) as e:
            c._sweep_stats_rows(ds, params, float("nan"))  # past the client's own check
        assert e.value.code == -1002  # TF_E_INVALID_ARG
        got = c.sweep_stats(ds, params)
        assert same_stats(got, tollfree.sweep_stats(close, params))
    s = server.raw("unix")
    try:
        body = struct.pack("<BBHQQII", wire.SWEEP_DS, 2, 0, 7, 1, 0, 4)
        s.sendall(struct.pack("<I", len(body)) + body)
        hdr = s.recv(20, socket.MSG_WAITALL)
        blen, op, _, _, rid, code = struct.unpack("<IBBHQi", hdr)
        assert op == wire.ERROR and rid == 7 and code == -1213  # PROTOCOL
    finally:
        s.close()


# ---- one home in the library (include/tollfree/research.h): the same bits as before ----

def old_derived(st: dict) -> dict:
    """The Python formulas tollfree.stats used before the figures moved into the library."""
    t = np.asarray(st["trades"], dtype=np.float64)
    gw, gl = np.asarray(st["gross_win"]), np.asarray(st["gross_loss"])
    with np.errstate(all="ignore"):
        win_rate = np.where(t > 0, st["wins"] / np.maximum(t, 1.0), np.nan)
        pf = np.where(gl < 0, gw / np.where(gl < 0, -gl, 1.0), np.where(gw > 0, np.inf, np.nan))
        std = np.where(t > 1, np.sqrt(st["m2"] / np.maximum(t - 1.0, 1.0)), np.nan)
        sharpe = np.where(std > 0, st["mean"] / np.where(std > 0, std, 1.0), np.nan)
        avg = np.where(t > 0, st["pnl"] / np.maximum(t, 1.0), np.nan)
    return {"win_rate": win_rate, "profit_factor": pf, "sharpe_per_trade": sharpe,
            "avg_trade": avg}


def random_stats(seed: int, m: int) -> dict:
    """Statistics with every edge mixed in: zero, one and two trades, NaN, +-inf, -0.0, zero and
    negative m2, no loss, no gain."""
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-300, -1e300, 5e-324])

    def reals(scale):
        v = rng.normal(0.0, scale, m)
        pick = rng.random(m) < 0.15
        v[pick] = rng.choice(special, pick.sum())
        return v

    trades = rng.choice([0, 1, 2, 3, 7, 1000, 2**40], m).astype(np.int64)
    return {"pnl": reals(50.0), "trades": trades,
            "wins": np.minimum(trades, rng.integers(0, 5, m)).astype(np.int64),
            "gross_win": np.abs(reals(30.0)), "gross_loss": -np.abs(reals(30.0)),
            "best": reals(3.0), "worst": reals(3.0), "mean": reals(1.0), "m2": reals(10.0),
            "max_dd": np.abs(reals(20.0)), "exposure_bars": rng.integers(0, 10**6, m)}


@pytest.mark.parametrize("seed", range(6))
def test_derived_are_the_old_formulas_bit_for_bit(seed):
    st = random_stats(seed, 4000)
    st["gross_loss"][::7] = 0.0  # no loss
    st["gross_win"][::11] = 0.0  # no gain
    got, want = derived(st), old_derived(st)
    for k in want:
        assert same_bits(got[k], want[k]), k
    rows = np.zeros(4000, dtype=binding.STATS_DTYPE)  # the same from a STATS_DTYPE array
    for k in binding.STAT_NAMES:
        rows[k] = st[k]
    assert all(same_bits(derived(rows)[k], want[k]) for k in want)


def test_derived_on_kernel_statistics_equals_old_formulas(default_stats):
    _, _, want = default_stats
    for fee in FEES:
        got, old = derived(want[fee]), old_derived(want[fee])
        assert all(same_bits(got[k], old[k]) for k in old), fee


def cli(*args):
    import subprocess
    from tollfree._lib import bin_path
    from conftest import DEADLINE
    return subprocess.run([bin_path(), "sweep", *args], capture_output=True, text=True,
                          timeout=DEADLINE)


def csv_columns(text):
    lines = text.strip().splitlines()
    head = lines[0].split(",")
    return {h: [r.split(",")[k] for r in lines[1:]] for k, h in enumerate(head)}


@pytest.mark.parametrize("kw,args", [({"top": 3}, ["--top", "3"]),
                                     ({"sort": "-max_dd", "top": 4},
                                      ["--sort", "-max_dd", "--top", "4"]),
                                     ({"sort": "profit_factor"}, ["--sort", "profit_factor"])])
def test_sweep_frame_ranks_as_the_cli(tmp_path, kw, args):
    """sweep_frame(top=K) ranks by pnl as `tollfree sweep --top K` does (it kept grid order);
    sort= orders as --sort: the same rows in the same order, the same bits."""
    close = data.generate_close(5000, seed=3)
    f = tmp_path / "c.f64"
    close.tofile(f)
    g = grid.grid(6, 90, 30)
    r = cli("--quiet", "--input", str(f), "--grid", "6:90:30", *args)
    assert r.returncode == 0, r.stderr
    want = csv_columns(r.stdout)
    frame = sweep_frame(close, g, **kw)
    assert [str(v) for v in frame["L"]] == want["L"]
    got = frame["pnl"].to_numpy()
    assert same_bits(got, np.array([float(x) for x in want["pnl"]]))
    if "top" in kw and "sort" not in kw:
        p, _ = tollfree.sweep(close, g)
        assert list(frame.index) == list(np.argsort(-p, kind="stable")[:3])


def test_fee_rule_is_one_rule_everywhere(tmp_path):
    """--fee -1 and --fee 1e300 were accepted: a negative fee (a rebate) and one of 100 or more
    are refused by the library's rule, through the CLI and Python alike."""
    close, params = data.default_close()[:1000], grid.default_grid()[:2]
    for bad in (-1.0, -1e-9, 100.0, 1e300):
        with pytest.raises(ValueError, match="fee must be 0 <= fee < 100"):
            tollfree.sweep(close, params, fee=bad)
        with pytest.raises(ValueError, match="fee must be 0 <= fee < 100"):
            tollfree.Strategy(params[0], fee=bad)
    with pytest.raises(ValueError, match="a negative fee, a rebate, is refused"):
        tollfree.sweep_stats(close, params, fee=-0.5)
    for bad in ("-1", "1e300", "100"):
        r = cli("--quiet", "--grid", "6:10:2", "--fee", bad)
        assert r.returncode == 2 and r.stdout == "", (bad, r.stderr)
        assert f"--fee wants 0 <= fee < 100 percent points per closed trade, got '{bad}'" \
            in r.stderr
    r = cli("--quiet", "--grid", "6:10:2", "--fee", "-1")
    assert "a negative fee, a rebate, is refused" in r.stderr
    assert cli("--quiet", "--grid", "6:10:2", "--fee", "0").returncode == 0
    p0, _ = tollfree.sweep(close, params, fee=0.0)
    p99, _ = tollfree.sweep(close, params, fee=99.0)
    assert (p99 <= p0).all()


def test_grid_notes_in_python_and_cli(tmp_path):
    """Combos that can never trade on the series, and duplicate combos, were passed without a
    word: a NOTE on stderr from the CLI, a UserWarning from Python, the same text."""
    close = data.generate_close(120, seed=5)
    f = tmp_path / "c.f64"
    close.tofile(f)
    g = np.array([grid.combo(10), grid.combo(150), grid.combo(10), grid.combo(20)],
                 dtype=np.int64)
    gf = tmp_path / "g.csv"
    gf.write_text("".join(",".join(str(int(x)) for x in row) + "\n" for row in g))
    r = cli("--quiet", "--input", str(f), "--grid", str(gf))
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("tollfree sweep: note: ")]
    assert len(notes) == 1, r.stderr
    text = notes[0][len("tollfree sweep: note: "):]
    assert text.startswith("1 of 4 combos can never trade on 120 bars")
    assert "combo 2, L=150" in text and "the first, combo 3, repeats combo 1" in text
    with pytest.warns(UserWarning) as w:
        frame = sweep_frame(close, g)
    assert [str(x.message) for x in w] == [f"tollfree: note: {text}"]
    assert frame["trades"].iloc[1] == 0
    with warnings_as_errors():
        sweep_frame(close, g[[0, 3]])  # nothing to say: no warning


def warnings_as_errors():
    import warnings

    class _Ctx:
        def __enter__(self):
            self.c = warnings.catch_warnings()
            self.c.__enter__()
            warnings.simplefilter("error")

        def __exit__(self, *a):
            return self.c.__exit__(*a)
    return _Ctx()
