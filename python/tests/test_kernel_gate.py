"""The bit-identity gate: numba reference == every C path == streaming, compared as raw bits.

The numba reference is the real thing (JIT, no fastmath); the default sweep also reproduces the
study's published fingerprint (combo 0: -5165.58 at two decimals, 57029 trades)."""
import ctypes
import hashlib
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


def test_default_data_is_the_committed_file():
    with open(os.path.join(ROOT, "data", "default_close.f64"), "rb") as f:
        raw = f.read()
    assert hashlib.sha256(raw).hexdigest() == data.DEFAULT_SHA256
    committed = np.frombuffer(raw, dtype="<f8")
    assert same_bits(committed, data.synthetic_close())
    assert same_bits(committed, data.default_close())


def test_generator_is_the_committed_file_up_to_numpys_exp():
    # numpy's exp may round differently on CPUs without AVX-512 (its SIMD path): the generator
    # and the committed file agree to a few ulp, and bit for bit on the machine that made it.
    committed, made = data.default_close(), data.generate_close()
    ulps = np.abs(committed.view(np.int64) - made.view(np.int64))
    assert ulps.max() <= 4, ulps.max()


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
            # validate=False: NaN and +-inf are the kernel's to handle here (definition.md 7).
            p, t = tollfree.sweep(close, params, threads=threads, isa=isa, validate=False)
            assert same_bits(p, pnl) and same_bits(t, trades), (isa, threads)
    for j in range(min(m, 3)):
        s = tollfree.Strategy(params[j], validate=False)  # NaN and inf as the kernel takes them
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
    # float32, lists and strided arrays are converted (test_first_hour.py); params are not.
    with pytest.raises(TypeError, match="int64"):
        tollfree.sweep(c, g.astype(np.int32))
    with pytest.raises(ValueError, match="shape"):
        tollfree.sweep(c, g[:, :5].copy())
    with pytest.raises(ValueError, match="1-D"):
        tollfree.sweep(c.reshape(10, 10), g)
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
    """ctypes (CDLL, not PyDLL) drops the GIL around every call; and while one thread is inside a
    sweep another runs Python. No clock: the switch interval is raised so far that the sweeping
    thread never gives the GIL up on its own, and it sweeps until the main thread has run. Were
    the GIL held during the call, the main thread would first run after the last sweep."""
    import sys
    import threading

    assert isinstance(lib(), ctypes.CDLL) and not isinstance(lib(), ctypes.PyDLL)
    assert not lib().tf_sweep._flags_ & ctypes._FUNCFLAG_PYTHONAPI
    close, params = data.default_close()[:30000], grid.default_grid()
    started, seen = threading.Event(), threading.Event()
    cap = 200  # sweeps before giving up: a guard against a held GIL, never a time limit
    count = [0]

    def work():
        started.set()
        while not seen.is_set() and count[0] < cap:
            tollfree.sweep(close, params, threads=1)
            count[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        t = threading.Thread(target=work)
        t.start()
        started.wait()
        ran_during = count[0] < cap  # we hold the GIL now: did the worker let us in early?
        seen.set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert ran_during, f"the main thread first ran after {count[0]} sweeps: the GIL was held"


def test_isa_max_caps_auto_dispatch_with_the_same_bits(default_case, tmp_path):
    """TF_ISA_MAX=avx2 (read once per process, hence a child process) makes AUTO pick avx2 and
    refuse avx512, with the reference's bits: an AVX2-only CPU simulated on this one."""
    import subprocess
    import sys

    from conftest import DEADLINE

    if not binding.isa_supported("avx2"):
        pytest.skip("this CPU has no AVX2 path to cap to")
    close, params, pnl, trades = default_case
    out = tmp_path / "auto.bin"
    code = (
        "import sys, numpy as np, tollfree\n"
        "from tollfree import binding, data, grid\n"
        "p, t = tollfree.sweep(data.default_close(), grid.default_grid())\n"
        "open(sys.argv[1], 'wb').write(p.tobytes() + t.tobytes())\n"
        "print(binding.isa_best(), binding.isa_supported('avx512'),\n"
        "      binding.isa_supported('avx2'))\n"
    )
    pypath = os.pathsep.join(filter(None, [os.path.join(ROOT, "python"),
                                            os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, TF_ISA_MAX="avx2", PYTHONPATH=pypath)
    r = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True,
                       text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["avx2", "False", "True"]
    raw = out.read_bytes()
    m = params.shape[0]
    assert same_bits(np.frombuffer(raw[:8 * m], dtype=np.float64), pnl)
    assert same_bits(np.frombuffer(raw[8 * m:], dtype=np.int64), trades)
