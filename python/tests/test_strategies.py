"""The strategy gate: every built-in, the sample C plugin and a numba strategy, bit for bit the
same through the numba reference (tollfree.reference_strategies), the library's sweep at 1, 2
and 4 threads, its plain model (isa="reference") and streaming, on random data with NaN and inf
and with combos that never trade, every statistic; the fee; identical combos; HMA unchanged.
Then strategy= resolution, its refusals, the slow path of plain Python and grid.product."""
from __future__ import annotations

import ctypes
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import tollfree
from tollfree import grid, reference, strategies
from tollfree import reference_strategies as R
from tollfree._lib import lib_path
from tollfree.binding import STAT_NAMES, KernelError
from tollfree.wire import E_STRATEGY

numba = pytest.importorskip("numba")


def _series(n: int = 1500, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    c[200] = np.nan
    c[700] = np.inf
    c[701] = -np.inf
    c[1100:1104] = c[1099]  # flat bars: equal averages, zero moves
    return c


CLOSE = _series()
CLEAN = _series(seed=11)
CLEAN[[200, 700, 701]] = 100.0


# A numba strategy: momentum over n bars (long if the close is above the close n bars back,
# short if below, flat if equal), HOLD for the first max(n, start) bars.
# state: [n, bars seen, ring of 64, start].
@numba.njit
def mom_init(s, p):
    if not (p[0] >= 1 and p[0] <= 64 and p[0] == np.floor(p[0])):
        return 1
    s[0] = p[0]
    s[66] = p[1]
    return 0


@numba.njit
def mom_step(s, close):
    n = int(s[0])
    i = int(s[1])
    s[1] = i + 1
    back = s[2 + i % n]
    s[2 + i % n] = close
    if i < n or i < s[66]:
        return 2
    if close > back:
        return 1
    if close < back:
        return -1
    return 0


MOM = strategies.define("momentum", ["n", "start"], mom_init, mom_step, state=67)
MOM_SLOW = strategies.define("momentum", ["n", "start"], mom_init.py_func, mom_step.py_func,
                             state=67)

# combos per strategy; each holds zero-trade combos (windows longer than the series)
GRIDS = {
    "sma_cross": grid.product(fast=[1, 2, 5, 13], slow=[2, 20, 50, 2000], where="fast<slow"),
    "ema_cross": grid.product(fast=[1, 3, 9], slow=[5, 30, 2000], where="fast<slow"),
    "donchian": grid.product(window=[1, 2, 5, 20, 200, 2000]),
    "rsi": grid.product(period=[1, 2, 14, 2000], lower=[0, 30], upper=[70, 100]),
    "bollinger": grid.product(window=[2, 5, 20, 2000], k=[0.5, 2.0, 3.25]),
    MOM: grid.product(n=[1, 2, 5, 64], start=[0, 300, 5000]),
}


def _plugin_path() -> str | None:
    """K's sample plugin (examples/plugin_sma.c), built by the project's CMake next to the
    library: build/examples/ or build/."""
    d = Path(lib_path()).resolve().parent
    for cand in (d / "examples" / "plugin_sma.so", d / "plugin_sma.so",
                 d / "examples" / "libplugin_sma.so", d / "libplugin_sma.so"):
        if cand.exists():
            return str(cand)
    return None


PLUGIN = _plugin_path()


def _same(a: dict, b: dict, what: str, any_nan: bool = False) -> None:
    """Every statistic, bit for bit. ``any_nan``: a NaN matches any NaN (against the numba
    reference only: where two NaNs meet, IEEE 754 leaves open which one comes out, and LLVM
    may swap the operands of a sum, so the payload and sign of such a NaN are the compiler's;
    every C path against every other is compared bit for bit, NaN included)."""
    for n in STAT_NAMES:
        x, y = np.asarray(a[n]), np.asarray(b[n])
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {n} {x.dtype} {y.dtype}"
        diff = x.view(np.int64) != y.view(np.int64)
        if any_nan and x.dtype == np.float64:
            diff &= ~(np.isnan(x) & np.isnan(y))
        bad = np.flatnonzero(diff)
        assert bad.size == 0, f"{what}: {n} differs at combo {bad[0]}: {x[bad[0]]!r} {y[bad[0]]!r}"


def _stream(strategy, close, combo, fee=0.09) -> dict:
    s = tollfree.Strategy(combo, fee=fee, strategy=strategy, validate=False)
    for x in close:
        s.on_bar(float(x))
    out = s.stats()
    s.close()
    return out


def _ids(x):
    return x if isinstance(x, str) else getattr(x, "name", str(x))


@pytest.mark.parametrize("name", list(GRIDS), ids=_ids)
def test_gate_every_path_same_bits(name):
    g = GRIDS[name]
    ref = R.sweep_stats(name, CLOSE, g)
    assert (ref["trades"] == 0).any() and (ref["trades"] > 0).any()
    one = tollfree.sweep_stats(CLOSE, g, threads=1, strategy=name, validate=False)
    _same(ref, one, f"{_ids(name)} numba reference vs threads=1", any_nan=True)
    for th in (2, 4):
        _same(one, tollfree.sweep_stats(CLOSE, g, threads=th, strategy=name, validate=False),
              f"{_ids(name)} threads={th}")
    _same(one, tollfree.sweep_stats(CLOSE, g, isa="reference", strategy=name, validate=False),
          f"{_ids(name)} tf_sweep_with_reference")
    pnl, trades = tollfree.sweep(CLOSE, g, threads=2, strategy=name, validate=False)
    assert pnl.tobytes() == one["pnl"].tobytes() and np.array_equal(trades, one["trades"])
    for j in range(0, g.shape[0], max(1, g.shape[0] // 4)):
        st = _stream(name, CLOSE, g[j])
        _same({k: one[k][j:j + 1] for k in STAT_NAMES},
              {k: np.array([v]) for k, v in st.items()}, f"{_ids(name)} streaming combo {j}")


@pytest.mark.parametrize("name", ["sma_cross", "rsi", "bollinger", MOM], ids=_ids)
@pytest.mark.parametrize("fee", [0.0, 0.5])
def test_gate_fee(name, fee):
    g = GRIDS[name]
    ref = R.sweep_stats(name, CLEAN, g, fee=fee)
    _same(ref, tollfree.sweep_stats(CLEAN, g, threads=2, fee=fee, strategy=name),
          f"{_ids(name)} fee={fee}")
    assert not np.array_equal(ref["pnl"], R.sweep_stats(name, CLEAN, g)["pnl"])
    _same({k: ref[k][1:2] for k in STAT_NAMES},
          {k: np.array([v]) for k, v in _stream(name, CLEAN, g[1], fee).items()},
          f"{_ids(name)} streaming fee={fee}")


@pytest.mark.parametrize("name", ["sma_cross", "donchian", MOM], ids=_ids)
def test_gate_identical_combos(name):
    g = GRIDS[name]
    rep = np.ascontiguousarray(np.concatenate([g, g[::-1], g[:1], g[:1]]))
    one = tollfree.sweep_stats(CLOSE, rep, threads=1, strategy=name, validate=False)
    _same(R.sweep_stats(name, CLOSE, rep), one, f"{_ids(name)} repeated combos", any_nan=True)
    _same(one, tollfree.sweep_stats(CLOSE, rep, threads=4, strategy=name, validate=False),
          f"{_ids(name)} repeated combos, 4 threads")
    m = g.shape[0]
    for n in STAT_NAMES:  # a repeat gives the bits of its first
        assert one[n][m:2 * m].tobytes() == one[n][:m][::-1].tobytes()


@pytest.mark.skipif(PLUGIN is None, reason="the sample plugin (examples/plugin_sma.c) is not built")
def test_gate_plugin_is_sma_cross():
    """The sample plugin is sma_cross's logic in a shared object: the built-in's reference is
    its reference."""
    r = strategies.resolve(PLUGIN)
    assert r.kind == "plugin" and r.n_params == 2
    g = GRIDS["sma_cross"]
    ref = tollfree.sweep_stats(CLOSE, g, threads=1, strategy="sma_cross", validate=False)
    _same(R.sweep_stats("sma_cross", CLOSE, g), ref, "sma_cross", any_nan=True)
    for th in (1, 2, 4):
        _same(ref, tollfree.sweep_stats(CLOSE, g, threads=th, strategy=PLUGIN, validate=False),
              f"plugin threads={th}")
    _same({k: ref[k][2:3] for k in STAT_NAMES},
          {k: np.array([v]) for k, v in _stream(PLUGIN, CLOSE, g[2]).items()}, "plugin stream")
    assert strategies.resolve(Path(PLUGIN)) is r  # loaded once


def test_hma_unchanged():
    g = grid.default_grid()
    st = tollfree.sweep_stats(CLEAN, g, threads=2)
    _same(reference.sweep_stats(CLEAN, g), st, "hma vs reference.py")
    _same(R.sweep_stats("hma", CLEAN, g), st, "hma vs the generic booking")
    _same(st, tollfree.sweep_stats(CLEAN, g, strategy="hma"), "strategy='hma'")
    _same(st, tollfree.sweep_stats(CLEAN, g.astype(np.float64), strategy="hma"),
          "hma float grid")
    with pytest.raises(TypeError):  # the default keeps its int64 grids
        tollfree.sweep(CLEAN, g.astype(np.float64))


def test_python_slow_path_same_bits_and_warns():
    g = GRIDS[MOM]
    ref = tollfree.sweep_stats(CLOSE, g, threads=1, strategy=MOM, validate=False)
    with pytest.warns(UserWarning, match="plain Python"):
        st = tollfree.sweep_stats(CLOSE, g, threads=4, strategy=MOM_SLOW, validate=False)
    _same(ref, st, "plain Python strategy")
    _same({k: ref[k][1:2] for k in STAT_NAMES},
          {k: np.array([v]) for k, v in _stream(MOM_SLOW, CLOSE, g[1]).items()},
          "plain Python streaming")


def test_python_callback_error_is_raised():
    def init(s, p):
        return 0

    def step(s, close):
        raise ZeroDivisionError("boom")
    bad = strategies.define("broken", ["x"], init, step)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="ZeroDivisionError: boom"):
        tollfree.sweep(CLEAN, np.array([[1.0]]), strategy=bad)
    s = tollfree.Strategy([1.0], strategy=bad)
    with pytest.raises(RuntimeError, match="boom"):
        s.on_bar(100.0)
    calls = []

    def step_counted(s, close):
        calls.append(close)
        raise ZeroDivisionError("stop")
    stops = strategies.define("stops", ["x"], init, step_counted)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="stop"):
        tollfree.sweep(CLEAN, np.arange(1.0, 9.0), strategy=stops)
    assert len(calls) < 8 * CLEAN.shape[0]  # the first exception cancelled the sweep


def test_refusals_are_clear():
    with pytest.raises(ValueError, match="unknown strategy 'nope'; built-ins: hma, sma_cross"):
        tollfree.sweep(CLEAN, np.array([[1.0, 2.0]]), strategy="nope")
    with pytest.raises(ValueError, match=r"sma_cross takes 2 parameters \(fast, slow\)"):
        tollfree.sweep(CLEAN, np.array([[1.0, 2.0, 3.0]]), strategy="sma_cross")
    with pytest.raises(KernelError, match=r"combo 1 \(fast=9, slow=5\)") as e:
        tollfree.sweep(CLEAN, np.array([[1.0, 2.0], [9.0, 5.0]]), strategy="sma_cross")
    assert e.value.code == E_STRATEGY
    with pytest.raises(KernelError, match="momentum") as e:
        tollfree.sweep(CLEAN, np.array([[3.0, 0], [0.5, 0]]), strategy=MOM)
    assert e.value.code == E_STRATEGY
    with pytest.raises(KernelError, match=r"fast=9, slow=5"):
        tollfree.Strategy([9, 5], strategy="ema_cross")
    with pytest.raises(KernelError, match="nothere.so") as e:
        tollfree.sweep(CLEAN, np.array([[1.0]]), strategy="./nothere.so")
    assert e.value.code == E_STRATEGY
    with pytest.raises(TypeError, match="built-in name"):
        tollfree.sweep(CLEAN, np.array([[1.0]]), strategy=42)
    with pytest.raises(ValueError, match=r"\[a-z0-9_\]"):
        strategies.define("Bad Name", ["n", "start"], mom_init, mom_step)
    with pytest.raises(TypeError, match="both"):
        strategies.define("mixed", ["n", "start"], mom_init, mom_step.py_func)


def test_streaming_takes_a_dict_by_name():
    a = tollfree.Strategy({"slow": 20, "fast": 5}, strategy="sma_cross")
    b = tollfree.Strategy([5, 20], strategy="sma_cross")
    for x in CLEAN:
        assert a.on_bar(x) == b.on_bar(x)
    assert a.params == (5.0, 20.0) and a.stats() == b.stats()
    with pytest.raises(ValueError, match="unknown: nope"):
        tollfree.Strategy({"fast": 5, "slow": 20, "nope": 1}, strategy="sma_cross")


def test_int_params_accepted():
    g = np.array([[2, 10], [3, 30]], dtype=np.int64)
    _same(tollfree.sweep_stats(CLEAN, g, strategy="sma_cross"),
          tollfree.sweep_stats(CLEAN, g.astype(np.float64), strategy="sma_cross"), "int params")


def test_numba_strategy_pickles_by_its_functions():
    back = pickle.loads(pickle.dumps(MOM))
    assert back.name == MOM.name and back.kind == "numba" and back.n_state == MOM.n_state
    g = GRIDS[MOM]
    _same(tollfree.sweep_stats(CLEAN, g, strategy=MOM),
          tollfree.sweep_stats(CLEAN, g, strategy=back), "unpickled numba strategy")


def test_grid_product_order_and_where():
    g = grid.product(a=[1, 2], b=(10, 30, 10), c=range(2))
    assert g.names == ("a", "b", "c") and g.dtype == np.float64 and g.shape == (12, 3)
    assert g[:3].tolist() == [[1, 10, 0], [1, 10, 1], [1, 20, 0]]  # the last fastest
    w = grid.product(fast=(1, 10, 1), slow=(2, 20, 2), where="fast<slow, slow<=12")
    assert all(f < s <= 12 for f, s in w.tolist())
    with pytest.raises(ValueError, match="keeps none"):
        grid.product(a=[1, 2], where="a>5")
    with pytest.raises(ValueError):
        grid.product(a=[1, 2], where="zz<1")
    with pytest.raises(ValueError, match="more than 10000000"):
        grid.product(a=(0, 1e6, 1), b=(0, 100, 1))
    o = grid.product(slow=[5, 6], fast=[1, 2], strategy="sma_cross")
    assert o.names == ("fast", "slow") and o[:2].tolist() == [[1, 5], [1, 6]]
    with pytest.raises(ValueError, match="missing: slow"):
        grid.product(fast=[1], strategy="sma_cross")


def test_named_grid_columns_are_matched_by_name():
    swapped = grid.product(slow=[20, 30], fast=[2, 5])  # columns (slow, fast)
    ordered = grid.product(fast=[2, 5], slow=[20, 30])
    a = tollfree.sweep_stats(CLEAN, swapped, strategy="sma_cross")
    b = tollfree.sweep_stats(CLEAN, swapped[:, ::-1].copy(), strategy="sma_cross")
    _same(a, b, "a (slow, fast) grid is read by name")
    assert swapped[:, ::-1].names == () and swapped[1:].names == ("slow", "fast")
    assert not np.array_equal(a["pnl"], tollfree.sweep(CLEAN, ordered, strategy="sma_cross")[0])
    with pytest.raises(ValueError, match="the grid's columns are fast, window"):
        tollfree.sweep(CLEAN, grid.product(fast=[2], window=[5]), strategy="sma_cross")


def test_grid_product_equals_the_cli_grid():
    """The same rows as --grid a=LO:HI:STEP --where (the library's tf_grid_named)."""
    spec, where = "fast=1:9:2,slow=0.5:30.5:1.5", "fast<slow,slow!=3.5"
    r = strategies.resolve("sma_cross")
    out = ctypes.POINTER(ctypes.c_double)()
    n = ctypes.c_int64()
    buf = ctypes.create_string_buffer(512)
    rc = strategies.L().tf_grid_named(r.ptr, spec.encode(), where.encode(), ctypes.byref(out),
                                      ctypes.byref(n), buf, 512)
    assert rc == 0, buf.value
    cli = np.ctypeslib.as_array(out, (n.value, 2)).copy()
    ctypes.CDLL(None).free(out)
    py = grid.product(fast=(1, 9, 2), slow=(0.5, 30.5, 1.5), where=where)
    assert py.tobytes() == cli.tobytes()


def test_reference_refuses_like_the_library():
    with pytest.raises(ValueError, match="init refused combo 1"):
        R.sweep_stats(MOM, CLEAN, np.array([[2.0, 0], [0.0, 0]]))
    assert os.path.exists(lib_path())


# ---- strategy= on every Python path ----

GRID_SMA = grid.product(fast=(2, 14, 4), slow=(10, 60, 25), where="fast<slow")


def test_sweep_frame_and_ranking_by_parameter_names():
    st = tollfree.sweep_stats(CLEAN, GRID_SMA, strategy="sma_cross")
    f = tollfree.sweep_frame(CLEAN, GRID_SMA, strategy="sma_cross")
    assert list(f.columns[:4]) == ["fast", "slow", "pnl", "trades"]
    assert f["pnl"].to_numpy().tobytes() == st["pnl"].tobytes()
    top = tollfree.sweep_frame(CLEAN, GRID_SMA, strategy="sma_cross", sort="-slow", top=3)
    assert top["slow"].tolist() == [10.0, 10.0, 35.0]  # fast<slow leaves two with slow=10
    with pytest.raises(ValueError, match="fast, slow, pnl"):
        tollfree.sweep_frame(CLEAN, GRID_SMA, strategy="sma_cross", sort="L")
    with pytest.raises(ValueError, match="give params"):
        tollfree.sweep_frame(CLEAN, strategy="sma_cross")


def test_walk_forward_any_strategy():
    wf = tollfree.walk_forward(CLEAN, GRID_SMA, walk_forward=2, strategy="sma_cross")
    assert list(wf.columns[5:7]) == ["fast", "slow"] and len(wf) == 2
    for r in wf.itertuples():  # each fold's winner: the in-sample sweep's best pnl
        part = CLEAN[r.is_start:r.is_end]
        pnl = tollfree.sweep(part, GRID_SMA, strategy="sma_cross")[0]
        j = int(np.argmax(pnl))
        assert (r.fast, r.slow) == tuple(GRID_SMA[j]) and r.is_pnl == pnl[j]
        oos = tollfree.sweep(CLEAN[r.oos_start:r.oos_end], GRID_SMA[j:j + 1],
                             strategy="sma_cross")[0][0]
        assert np.float64(r.oos_pnl).tobytes() == oos.tobytes()
    assert tollfree.walk_forward(CLEAN, GRID_SMA, walk_forward=2, strategy="sma_cross",
                                 threads=1).equals(wf)


def test_paper_any_strategy_parity():
    from tollfree import paper
    for strategy, params in (("sma_cross", {"fast": 5, "slow": 20}), ("rsi", [14, 30, 70]),
                             (MOM, [3, 0])):
        r = paper.run(strategy=strategy, params=params, close=CLEAN, progress=False)
        assert r.parity and r.trades > 0, (strategy, r)
        k = tollfree.sweep(paper_rounded(CLEAN, r.tick), np.array(
            [list(params.values()) if isinstance(params, dict) else params], dtype=float),
            strategy=strategy, threads=1)
        assert np.float64(r.kernel_pnl).tobytes() == k[0].tobytes()
    with pytest.raises(ValueError, match=r"fast=9, slow=5"):
        paper.run(strategy="sma_cross", params=[9, 5], close=CLEAN, progress=False)
    with pytest.raises(ValueError, match="missing: slow"):
        paper.run(strategy="sma_cross", params={"fast": 2}, close=CLEAN, progress=False)


def paper_rounded(close, tick):
    from tollfree import paper
    return np.array([paper.price(t, tick) for t in paper.round_to_ticks(close, tick)])


def test_panel_and_dask_in_process():
    from tollfree import distributed
    pan = {"a": CLEAN, "b": CLEAN[::-1].copy()}
    df = tollfree.sweep_panel(pan, GRID_SMA, strategy="sma_cross", stats=True)
    assert list(df.columns[:3]) == ["instrument", "fast", "slow"]
    one = tollfree.sweep_stats(pan["b"], GRID_SMA, strategy="sma_cross")
    got = df[df.instrument == "b"]
    assert got["pnl"].to_numpy().tobytes() == one["pnl"].tobytes()
    d = distributed.sweep(pan, GRID_SMA, strategy="sma_cross", stats=True)  # small: in-process
    assert d.equals(df)
    m = distributed.sweep(pan, GRID_SMA[:4, :1] + 1, strategy="donchian")
    assert list(m.columns) == ["instrument", "window", "pnl", "trades"]


@pytest.mark.skipif(os.environ.get("TF_TEST_DASK", "1") == "0", reason="TF_TEST_DASK=0")
def test_dask_cluster_numba_strategy_by_its_functions():
    pytest.importorskip("dask.distributed")
    from tollfree import distributed
    pan = {"a": CLEAN, "b": CLOSE[np.isfinite(CLOSE)].copy()}
    g = GRIDS[MOM]
    want = tollfree.sweep_panel(pan, g, strategy=MOM, validate=False)
    got = distributed.sweep(pan, g, client="local:2", chunk=3, strategy=MOM, validate=False)
    assert got.equals(want) and got.attrs["tollfree"]["tasks"] > 2
    with pytest.raises(ValueError, match="in-process only"):
        distributed.sweep(pan, g, client="local:2", strategy=MOM_SLOW)


def test_report_heatmap_over_parameter_names(tmp_path):
    out = tollfree.report(CLEAN, GRID_SMA, str(tmp_path / "r.html"), strategy="sma_cross",
                          walk_forward=2)
    text = open(out).read()
    assert "Heatmap: pnl over fast,slow" in text and "bit for bit" in text
    assert "Best combo: fast=" in text
    with pytest.raises(ValueError, match="two of fast,slow"):
        tollfree.report(CLEAN, GRID_SMA, str(tmp_path / "x.html"), strategy="sma_cross",
                        heatmap="fast,L")


def test_grid_named_is_the_cli_grid():
    g = grid.named("rsi", "period=5:15:5,lower=20,upper=70:80:10", "lower<upper")
    assert g.names == ("period", "lower", "upper") and g.shape == (6, 3)
    assert g.tobytes() == grid.product(period=(5, 15, 5), lower=20, upper=(70, 80, 10)).tobytes()
    with pytest.raises(ValueError, match="period"):
        grid.named("rsi", "nope=1:2:1")


def test_panel_cli_strategy_rows_are_the_plain_sweeps(tmp_path):
    """``tollfree sweep --panel`` (python -m tollfree.panel) with --strategy prints the plain
    sweep's rows for each instrument: the same grid (tf_grid_named), columns, ranking, bits."""
    import subprocess
    import sys

    from tollfree._lib import bin_path
    if not os.path.exists(bin_path()):
        pytest.skip("the tollfree program is not built")
    args = ["--strategy", "sma_cross", "--grid", "fast=2:10:4,slow=20:40:10", "--where",
            "fast<slow", "--sort", "-max_dd", "--top", "4", "--columns", "fast,slow,pnl,max_dd",
            "--quiet"]
    plain = subprocess.run([bin_path(), "sweep", *args], capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode == 0, plain.stderr
    env = dict(os.environ, PYTHONPATH=str(Path(strategies.__file__).resolve().parents[1]))
    panel = subprocess.run([sys.executable, "-m", "tollfree.panel", *args], capture_output=True,
                           text=True, timeout=120, env=env)
    assert panel.returncode == 0, panel.stderr
    rows = [ln.split(",", 1)[1] for ln in panel.stdout.splitlines()]
    assert rows == plain.stdout.splitlines()


# A numba strategy with a record state (fields by name): the momentum above.
REC = np.dtype([("n", np.int64), ("i", np.int64), ("start", np.float64),
                ("ring", np.float64, (64,))])


@numba.njit
def rec_init(s, p):
    if not (p[0] >= 1 and p[0] <= 64 and p[0] == np.floor(p[0])):
        return 1
    s.n = int(p[0])
    s.start = p[1]
    return 0


@numba.njit
def rec_step(s, close):
    i = s.i
    s.i = i + 1
    back = s.ring[i % s.n]
    s.ring[i % s.n] = close
    if i < s.n or i < s.start:
        return 2
    if close > back:
        return 1
    if close < back:
        return -1
    return 0


def test_record_state_same_bits_as_the_array_state():
    rec = strategies.define("momentum_rec", ["n", "start"], rec_init, rec_step, state=REC)
    g = GRIDS[MOM]
    one = tollfree.sweep_stats(CLOSE, g, threads=1, strategy=rec, validate=False)
    _same(tollfree.sweep_stats(CLOSE, g, threads=1, strategy=MOM, validate=False), one,
          "record state vs float64 state")
    _same(R.sweep_stats(rec, CLOSE, g), one, "record state: numba reference", any_nan=True)
    _same(one, tollfree.sweep_stats(CLOSE, g, threads=4, strategy=rec, validate=False),
          "record state, 4 threads")
    _same({k: one[k][4:5] for k in STAT_NAMES},
          {k: np.array([v]) for k, v in _stream(rec, CLOSE, g[4]).items()}, "record streaming")
    slow = strategies.define("momentum_rec", ["n", "start"], rec_init.py_func,
                             rec_step.py_func, state=REC)
    with pytest.warns(UserWarning):
        _same(one, tollfree.sweep_stats(CLOSE, g, strategy=slow, validate=False),
              "record state, plain Python")
    assert pickle.loads(pickle.dumps(rec)).state_dtype == REC


def test_paper_module_and_program_print_the_same_for_a_strategy():
    """``python3 -m tollfree.paper --strategy NAME --params a=V,...`` (what ``tollfree paper
    --plot`` runs) prints ``tollfree paper``'s JSON: the same run, the same bits."""
    import json
    import subprocess
    import sys

    from tollfree._lib import bin_path
    if not os.path.exists(bin_path()):
        pytest.skip("the tollfree program is not built")
    args = ["--strategy", "rsi", "--params", "period=14,lower=30,upper=70", "--json", "--quiet"]
    c = subprocess.run([bin_path(), "paper", *args], capture_output=True, text=True, timeout=120)
    assert c.returncode == 0, c.stderr
    env = dict(os.environ, PYTHONPATH=str(Path(strategies.__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-m", "tollfree.paper", *args], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    a, b = json.loads(c.stdout), json.loads(p.stdout)
    for k in ("seconds", "bars_per_s"):
        a.pop(k), b.pop(k)
    assert a == b and a["parity"] is True


def test_bench_strategies_quick(tmp_path):
    """The strategy benchmark's smoke run (its gate only; timing is never asserted)."""
    import json
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(Path(strategies.__file__).resolve().parents[1]))
    p = subprocess.run([sys.executable, "-m", "tollfree.bench_strategies", "--quick", "--reps",
                        "1", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=600, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    res = json.loads((tmp_path / "strategies.json").read_text())
    assert not res["failed"] and all(r["gate"] for r in res["rows"])
    assert {r["row"].split(",")[0] for r in res["rows"]} >= {
        "sma_cross", "ema_cross", "donchian", "rsi", "bollinger", "numba strategy via tollfree"}
    assert (tmp_path / "strategies.md").read_text().count("| ok |") == len(res["rows"])


def _without_changes(r: strategies.Resolved) -> strategies.Resolved:
    """The same def with no changes member (the sweep then books its steps' every target)."""
    d = strategies.StrategyDef.from_buffer_copy(
        ctypes.cast(r.ptr, ctypes.POINTER(strategies.StrategyDef)).contents)
    d.lanes, d.changes = 0, strategies.CHANGES_FN()
    return strategies.Resolved(ctypes.addressof(d), r.kind, r.spec, (d, r))


@pytest.mark.parametrize("state", ["slots", "record"])
def test_numba_changes_member_same_bits(state):
    """A numba strategy sweeps through its compiled changes member (strategy.h: LANES combos a
    call for a float64 state, one for a record; only the bars where a position moves are
    booked): every statistic has the bits of the same def booked bar by bar from its steps
    member and from step alone, for every size of the last, partial group of lanes."""
    s = MOM if state == "slots" else strategies.define("momentum_rec", ["n", "start"], rec_init,
                                                       rec_step, state=REC)
    r = s.resolved()
    d = ctypes.cast(r.ptr, ctypes.POINTER(strategies.StrategyDef)).contents
    assert d.changes and d.lanes == (strategies.LANES if state == "slots" else 1)
    assert strategies.LANES > 1
    plain = _without_changes(r)
    g = GRIDS[MOM]
    for m in range(1, 2 * strategies.LANES + 2):
        sub = np.ascontiguousarray(np.concatenate([g[:m], g[:1]]))  # and a repeat of combo 0
        ref = tollfree.sweep_stats(CLOSE, sub, threads=1, strategy=plain, validate=False)
        _same(ref, tollfree.sweep_stats(CLOSE, sub, isa="reference", strategy=r,
                                        validate=False), f"{state} {m} combos: step alone")
        for th in (1, 2):
            _same(ref, tollfree.sweep_stats(CLOSE, sub, threads=th, strategy=r, validate=False),
                  f"{state} {m} combos, threads={th}: changes vs steps")
    _same(R.sweep_stats(s, CLOSE, g), tollfree.sweep_stats(CLOSE, g, strategy=r, validate=False),
          f"{state}: numba reference", any_nan=True)
