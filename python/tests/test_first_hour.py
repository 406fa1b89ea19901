"""What a researcher meets in the first hour with the Python package (issue 21): the sweeps take
pandas and lists and refuse a bad price by index and label (the raw path stays zero-copy), a live
bar that is not a price is refused by Strategy.on_bar (validate=False streams it as the kernel
takes it), the version is
one number everywhere, every public callable shows its parameters, and the report names the data
it was given."""
from __future__ import annotations

import inspect
import re
import subprocess
import tomllib
import tracemalloc
import types
from pathlib import Path

import numpy as np
import pytest

import tollfree
from tollfree import binding, wire
from tollfree.errors import SweepError
from conftest import DEADLINE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
COMBOS = np.array([[6, 3, 2, 3, 1, 2], [20, 10, 4, 10, 3, 5]], dtype=np.int64)
N = 600
CLOSE = 100.0 + np.sin(np.arange(N) * 0.21) * 4.0 + np.arange(N) * 0.01
BAD = (-5.0, 0.0, -0.0, np.nan, np.inf, -np.inf)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---- 1. what researchers have, validated by default ----------------------------------------

def test_sweeps_take_pandas_and_lists():
    pd = pytest.importorskip("pandas")
    idx = pd.date_range("2024-01-01", periods=N, freq="D")
    df = pd.DataFrame({"Open": CLOSE + 1.0, "Close": CLOSE}, index=idx)
    want_p, want_t = tollfree.sweep(CLOSE, COMBOS)
    want_st = tollfree.sweep_stats(CLOSE, COMBOS)
    for x, kw in [(df["Close"], {}), (df, {}), (df, {"column": "Close"}), (list(CLOSE), {}),
                  (CLOSE[::-1][::-1], {}), (np.stack([CLOSE, CLOSE], 1)[:, 0], {})]:
        p, t = tollfree.sweep(x, COMBOS, **kw)
        assert same_bits(p, want_p) and same_bits(t, want_t), type(x)
        st = tollfree.sweep_stats(x, COMBOS, **kw)
        assert all(same_bits(st[k], want_st[k]) for k in binding.STAT_NAMES)
        with tollfree.Series(x, **kw) as ser:
            assert same_bits(ser.sweep(COMBOS)[0], want_p)
    p, _ = tollfree.sweep(df, COMBOS, column="open")
    assert not same_bits(p, want_p)  # the column asked for, not the first
    f32 = CLOSE.astype(np.float32)  # any real dtype, converted once
    assert same_bits(tollfree.sweep(f32, COMBOS)[0],
                     tollfree.sweep(f32.astype(np.float64), COMBOS)[0])


@pytest.mark.parametrize("bad", BAD)
def test_bad_price_is_refused_by_index_on_every_path(bad):
    x = CLOSE.copy()
    x[417] = bad
    for call in (lambda: tollfree.sweep(x, COMBOS), lambda: tollfree.sweep_stats(x, COMBOS),
                 lambda: tollfree.Series(x)):
        with pytest.raises(ValueError, match=r"\b417\b"):
            call()


def test_bad_price_in_pandas_names_index_and_label():
    pd = pytest.importorskip("pandas")
    idx = pd.date_range("2024-01-01", periods=N, freq="D")
    s = pd.Series(CLOSE.copy(), index=idx, name="Close")
    s.iloc[7] = -5.0
    with pytest.raises(ValueError, match=r"\b7\b") as e:
        tollfree.sweep(s, COMBOS)
    assert "2024-01-08" in str(e.value)
    # The obvious .to_numpy() is checked too: -5 never reaches the kernel unasked.
    with pytest.raises(ValueError, match=r"\b7\b"):
        tollfree.sweep(s.to_numpy(), COMBOS)
    with pytest.raises(ValueError, match=r"\b7\b"):
        tollfree.sweep(s.to_frame(), COMBOS)


def test_validate_false_is_the_raw_path():
    x = CLOSE.copy()
    x[300] = -5.0
    p, t = tollfree.sweep(x, COMBOS, validate=False)  # the kernel's own rules, no check
    clean_p, _ = tollfree.sweep(CLOSE, COMBOS)
    assert not same_bits(p, clean_p)  # the -5 was used, as asked
    st = tollfree.sweep_stats(x, COMBOS, validate=False)
    assert same_bits(st["pnl"], p)
    with tollfree.Series(x, validate=False) as ser:
        assert same_bits(ser.sweep(COMBOS)[0], p)


@pytest.mark.parametrize("validate", [True, False])
def test_float64_array_is_read_in_place(validate):
    """No copy of a C-contiguous float64 close, checked and raw alike: the Series keeps the
    caller's array itself, and a sweep of a million bars allocates (numpy's allocations are
    traced) less than an eighth of the array: a copy would be 8 MB, one boolean mask 1 MB."""
    n = 1_000_000
    x = 100.0 + np.sin(np.arange(n) * 1e-3)
    with tollfree.Series(x, cache_bytes=0, validate=validate) as ser:
        assert ser.close_array is x
    one = COMBOS[:1].copy()
    tollfree.sweep(x, one, threads=1, validate=validate)  # warm: ctypes prototypes, imports
    tracemalloc.start()
    try:
        tollfree.sweep(x, one, threads=1, validate=validate)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes // 8, f"peak {peak} bytes traced for a {x.nbytes}-byte close"


# ---- 2. a live bar that is not a price ---------------------------------------------------------

@pytest.mark.parametrize("bad", BAD)
def test_strategy_refuses_a_bar_that_is_not_a_price(bad):
    with tollfree.Strategy(COMBOS[0]) as s, tollfree.Strategy(COMBOS[0]) as ref:
        for v in CLOSE[:250]:
            s.on_bar(v)
            ref.on_bar(v)
        before = (s.bars, s.pnl, s.trades, s.stats())
        with pytest.raises(ValueError, match=r"Strategy\.on_bar: bar 250 .*not a positive finite") \
                as e:
            s.on_bar(bad)
        assert e.value.code == wire.E_BAD_INPUT
        assert (s.bars, s.pnl, s.trades, s.stats()) == before
        for v in CLOSE[250:]:  # and it goes on as if the bar had never come
            assert s.on_bar(v) == ref.on_bar(v)
        assert (s.bars, s.trades) == (N, ref.trades) and same_bits(s.pnl, ref.pnl)


def test_strategy_validate_false_streams_what_the_batch_sweep_takes():
    """The library's step follows the kernel's arithmetic for NaN and inf on every path (the
    streaming kernel equals the batch one); validate=False reaches it."""
    x = CLOSE.copy()
    x[100], x[300] = np.nan, np.inf
    pnl, trades = tollfree.sweep(x, COMBOS[:1], validate=False)
    with tollfree.Strategy(COMBOS[0], validate=False) as s:
        for v in x.tolist():
            s.on_bar(v)
        assert s.trades == trades[0] and same_bits(s.pnl, pnl[0])


# ---- 3. one version ----------------------------------------------------------------------------

def test_version_is_one_number_everywhere(tf_bin):
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tollfree.__version__ == tomllib.load(f)["project"]["version"]
    cmake = re.search(r"project\(tollfree VERSION (\S+)", (ROOT / "CMakeLists.txt").read_text())
    assert cmake and cmake.group(1) == tollfree.__version__
    out = subprocess.run([tf_bin, "--version"], capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 0 and out.stdout.split() == ["tollfree", tollfree.__version__]


# ---- 5. signatures that show their parameters --------------------------------------------------

def _public_callables():
    for name in tollfree.__all__:
        obj = getattr(tollfree, name)
        if isinstance(obj, types.ModuleType):
            names = getattr(obj, "__all__", None) or [n for n in vars(obj) if not n.startswith("_")]
            for n in names:
                o = getattr(obj, n)
                if callable(o) and getattr(o, "__module__", "").startswith("tollfree"):
                    yield f"{name}.{n}", o
        elif callable(obj):
            yield name, obj


def test_no_public_callable_hides_its_parameters():
    hidden, seen = [], 0
    for name, obj in _public_callables():
        targets = [(name, obj)]
        if inspect.isclass(obj):
            if issubclass(obj, BaseException) and "__init__" not in vars(obj):
                continue  # an exception's (message) is its parameter list
            targets += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                        if inspect.isfunction(f) and not m.startswith("_")]
        for what, f in targets:
            seen += 1
            params = inspect.signature(f).parameters.values()
            if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
                hidden.append(f"{what}{inspect.signature(f)}")
    assert seen > 20
    assert not hidden, "signatures with *args/**kwargs: " + "; ".join(hidden)
    assert "dates" in inspect.signature(tollfree.report).parameters
    assert "validate" in inspect.signature(tollfree.sweep).parameters


# ---- 6. the report names the data it was given -------------------------------------------------

def test_report_names_the_data_it_was_given(tmp_path):
    pytest.importorskip("matplotlib")
    pd = pytest.importorskip("pandas")
    n = 2148
    close = pd.Series(100.0 + np.sin(np.arange(n) * 0.05) * 5.0, name="Close")
    dates = [f"2016-{1 + i // 200:02d}-{1 + i % 28:02d}" for i in range(n)]
    out = tollfree.report(close, COMBOS, str(tmp_path / "r.html"), dates=dates)
    text = Path(out).read_text()
    assert "embedded default data" not in text and "150,000" not in text
    assert "a pandas Series &#x27;Close&#x27; given to tollfree.report()" in text
    assert "2,148" in text
    text = Path(tollfree.report(close.to_numpy(), COMBOS, str(tmp_path / "a.html"))).read_text()
    assert "a numpy array (float64) given to tollfree.report()" in text
    text = Path(tollfree.report(None, COMBOS, str(tmp_path / "d.html"))).read_text()
    assert "the embedded default data (150,000 bars)" in text


# ---- 7. venvs from Debian's interpreter --------------------------------------------------------

def test_docs_make_venvs_with_debians_python():
    """numpy, pandas and numba come from Debian's packages, which only /usr/bin/python3 sees: a
    `python3 -m venv` step fails wherever another python3 (pyenv's) is first on PATH."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    steps = [(d.name, line.strip()) for d in docs for line in d.read_text().splitlines()
             if re.search(r"-m venv\b", line)]
    assert steps, "no venv step in the docs"
    bad = [(name, line) for name, line in steps if not re.search(r"/usr/bin/python3 -m venv", line)]
    assert not bad


def test_help_names_the_version_option(tf_bin):
    """`tollfree --help` lists --version (it worked but was not said)."""
    r = subprocess.run([tf_bin, "--help"], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0 and "tollfree --version" in r.stdout + r.stderr


def test_demo_names_its_data_and_the_next_commands():
    """`make demo` says the default data is synthetic, how it was made and where it is, and ends
    with the next three commands (issue 27)."""
    from tollfree import demo

    note = demo.DATA_NOTE.format(path="data/default_close.f64")
    assert "SYNTHETIC" in note and "seed 42" in note and "data/default_close.f64" in note
    steps = demo.next_steps()
    assert steps.count("--input prices.csv") == 3
    assert "--report" in steps and " paper " in steps


@pytest.mark.parametrize("module", ["paper", "html_report", "panel"])
def test_module_commands_run_without_runpy_warning(module):
    """`python -m tollfree.paper` (what `tollfree paper --plot` runs), `-m tollfree.html_report`
    and `-m tollfree.panel` printed runpy's RuntimeWarning: the package imported them first."""
    import sys

    env = dict(__import__("os").environ, PYTHONPATH=str(Path(tollfree.__file__).parents[1]))
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", f"tollfree.{module}",
                        "--help"], capture_output=True, text=True, timeout=DEADLINE, env=env)
    assert r.returncode == 0 and "RuntimeWarning" not in r.stderr, r.stderr


@pytest.mark.parametrize("metric,pnl_headers", [("pnl", 1), ("sharpe_per_trade", 1)])
def test_report_oos_table_names_each_column_once(tmp_path, metric, pnl_headers):
    """The out-of-sample table showed "oos pnl" twice with the default metric (issue 27)."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    close = tollfree.data.synthetic_close(3000, seed=4)
    tollfree.report(close, tollfree.grid.grid(6, 60, 6), path=str(out), split=0.6, metric=metric)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", out.read_text())
    assert heads.count("oos pnl") == pnl_headers, heads
    assert len(heads) == len(set(heads)), heads


def test_paper_plot_shows_its_fills(tmp_path):
    """The buy and sell markers of `paper --plot` were drawn under the curves (invisible): the
    PNG must hold pixels of both marker colours."""
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.image as mpimg
    from matplotlib.colors import to_rgb

    from tollfree import paper

    close = tollfree.data.synthetic_close(2000, seed=9)
    r = paper.run((40, 20, 6, 20, 7, 10), close, progress=False)
    assert r.trades > 2
    png = tmp_path / "eq.png"
    paper.plot_equity(r, str(png))
    img = mpimg.imread(str(png))[:, :, :3]
    for colour in ("C2", "C3"):  # the buy and the sell markers
        near = np.abs(img - np.array(to_rgb(colour))).max(axis=2) < 0.08
        assert near.sum() > 20, (colour, int(near.sum()))
