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
        with pytest.raises(tollfree.EngineError) as e:
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
