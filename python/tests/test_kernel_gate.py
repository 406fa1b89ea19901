"""The bit-identity gate: numba reference == every C path == streaming, compared as raw bits.

The numba reference is the real thing (JIT, no fastmath); the default sweep also reproduces the
study's published fingerprint (combo 0: -5165.58 at two decimals, 57029 trades)."""
import ctypes
import os

import numpy as np
import pytest

import tollfree
from tollfree import binding, data, grid, reference
from tollfree._lib import lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISAS = [i for i in ("scalar", "sse2", "avx2", "avx512") if binding.isa_supported(i)]


def same_bits(a, b):
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


@pytest.fixture(scope="module")
def default_case():
    close, params = data.synthetic_close(), grid.default_grid()
    pnl, trades = reference.sweep(close, params)
    return close, params, pnl, trades


def test_committed_default_data_is_what_numpy_makes():
    committed = np.fromfile(os.path.join(ROOT, "data", "default_close.f64"), dtype="<f8")
    assert same_bits(committed, data.synthetic_close())


def test_default_grid_matches_spec():
    g = grid.default_grid()
    assert g.shape == (80, 6) and g.dtype == np.int64
    assert np.array_equal(g[:, 0], np.linspace(6, 200, 80).astype(int))
    assert tuple(g[0]) == (6, 3, 2, 3, 1, 2)
    assert grid.combo(6) == (6, 3, 2, 3, 1, 2)


def test_c_combo_derivation_matches_python_round():
    out = (ctypes.c_int64 * 6)()
    f = lib().tf_combo_from_length
    f.argtypes = [ctypes.c_int64, ctypes.c_void_p]
    bad = [L for L in range(1, 100_001)
           if f(L, ctypes.addressof(out)) != 0 or tuple(out) != grid.combo(L)]
    assert bad == []


def test_fingerprint(default_case):
    _, _, pnl, trades = default_case
    assert f"{pnl[0]:.2f}" == "-5165.58"
    assert trades[0] == 57029


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_fast_paths_equal_numba(default_case, isa, threads):
    close, params, pnl, trades = default_case
    p, t = tollfree.sweep(close, params, threads=threads, isa=isa)
    assert same_bits(p, pnl) and same_bits(t, trades)


def test_auto_and_c_reference_equal_numba(default_case):
    close, params, pnl, trades = default_case
    for isa in ("auto", "reference"):
        p, t = tollfree.sweep(close, params, isa=isa)
        assert same_bits(p, pnl) and same_bits(t, trades), isa


def test_numba_prange_equals_numba(default_case):
    close, params, pnl, trades = default_case
    p, t = reference.sweep_parallel(close, params)
    assert same_bits(p, pnl) and same_bits(t, trades)


@pytest.mark.parametrize("j", [0, 40, 79])
def test_streaming_equals_batch(default_case, j):
    close, params, pnl, trades = default_case
    s = tollfree.Strategy(params[j])
    positions = [s.on_bar(x) for x in close.tolist()]
    assert s.bars == close.shape[0]
    assert same_bits(np.float64(s.pnl), pnl[j]) and s.trades == trades[j]
    assert set(positions) <= {-1, 0, 1}


def random_case(rng, n, m, nan=False):
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.002, n)))
    if nan and n > 20:
        close[rng.integers(0, n, 3)] = np.nan
        close[rng.integers(0, n)] = np.inf
        close[rng.integers(0, n)] = -np.inf
    kind = rng.random((m, 6))
    params = np.where(kind < 0.1, 1, np.where(kind < 0.15, rng.integers(1, 1001, (m, 6)),
                                               rng.integers(1, 60, (m, 6))))
    return np.ascontiguousarray(close), np.ascontiguousarray(params, dtype=np.int64)


CASES = [(0, 3), (5, 7), (1, 1), (40, 257), (3000, 7), (2500, 1), (1200, 0), (4000, 7)]


@pytest.mark.parametrize("k,case", list(enumerate(CASES)))
def test_random_cases_equal_numba(k, case):
    rng = np.random.default_rng(1000 + k)
    n, m = case
    close, params = random_case(rng, n, m, nan=(k % 2 == 0))
    if m and n:
        params[0, 0] = n + 5  # a line that never exists
    pnl, trades = reference.sweep(close, params)
    for isa in ISAS + ["auto", "reference"]:
        for threads in (1, 2, 4):
            p, t = tollfree.sweep(close, params, threads=threads, isa=isa)
            assert same_bits(p, pnl) and same_bits(t, trades), (isa, threads)
    for j in range(min(m, 3)):
        s = tollfree.Strategy(params[j])
        for x in close.tolist():
            s.on_bar(x)
        assert same_bits(np.float64(s.pnl), pnl[j]) and s.trades == trades[j]


def test_empty_and_short_series_give_zero():
    g = grid.default_grid()
    for n in (0, 1, 5):
        p, t = tollfree.sweep(np.ones(n), g)
        assert np.all(p == 0.0) and np.all(t == 0)


def test_wrong_inputs_raise_clear_errors():
    g = grid.default_grid()
    c = data.synthetic_close(100)
    with pytest.raises(TypeError, match="float64"):
        tollfree.sweep(c.astype(np.float32), g)
    with pytest.raises(TypeError, match="ndarray"):
        tollfree.sweep(list(c), g)
    with pytest.raises(TypeError, match="int64"):
        tollfree.sweep(c, g.astype(np.int32))
    with pytest.raises(ValueError, match="shape"):
        tollfree.sweep(c, g[:, :5].copy())
    with pytest.raises(ValueError, match="1-D"):
        tollfree.sweep(c.reshape(10, 10), g)
    with pytest.raises(ValueError, match="contiguous"):
        tollfree.sweep(c[::2], g)
    bad = g.copy()
    bad[3, 2] = 0
    with pytest.raises(ValueError, match=">= 1"):
        tollfree.sweep(c, bad)
    bad[3, 2] = 2**31 + 1
    with pytest.raises(ValueError, match="2\\*\\*31"):
        tollfree.sweep(c, bad)
    with pytest.raises(ValueError, match="threads"):
        tollfree.sweep(c, g, threads=-1)
    with pytest.raises(ValueError, match="isa"):
        tollfree.sweep(c, g, isa="mmx")
    with pytest.raises(ValueError):
        tollfree.Strategy([6, 3, 2])
    with pytest.raises(ValueError, match=">= 1"):
        tollfree.Strategy([6, 3, 0, 3, 1, 2])


def test_gil_is_released_during_the_sweep():
    """While one thread is inside a ~0.1 s sweep, another thread keeps running Python. Were the
    GIL held, the spinning thread could run only in the few bytecodes around the call (at most
    one 5 ms switch interval), a small fraction of what it does here."""
    import threading

    close, params = data.synthetic_close(), grid.default_grid()
    started, done = threading.Event(), threading.Event()

    def work():
        started.set()
        tollfree.sweep(close, params, threads=1)
        done.set()

    t0 = __import__("time").perf_counter()
    n = 0
    while __import__("time").perf_counter() - t0 < 0.02:  # spin rate with the GIL to ourselves
        n += 1
    rate = n / 0.02
    t = threading.Thread(target=work)
    t.start()
    started.wait()
    spins, t0 = 0, __import__("time").perf_counter()
    while not done.is_set():
        spins += 1
    elapsed = __import__("time").perf_counter() - t0
    t.join()
    # released: we spin for most of the call; held: for at most ~5 ms of it
    assert elapsed > 0.03 and spins > 0.01 * rate * 4, (spins, rate, elapsed)
