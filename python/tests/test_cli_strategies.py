"""`tollfree sweep --strategy` and `tollfree paper --strategy` as a user runs them: every built-in
through the CLI equals the library's tf_sweep_with called here through ctypes, bit for bit
(%.17g round-trips); grids by name in their order, --where, walk-forward, and each refusal with
its exit status (2: the command line, 1: the work)."""
import ctypes
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from tollfree import binding
from tollfree._lib import bin_path, lib_path
from conftest import DEADLINE  # noqa: E402

BUILTINS = {
    "sma_cross": ("fast,slow", "fast=2:14:4,slow=10:40:10", "fast<slow"),
    "ema_cross": ("fast,slow", "slow=12:36:12,fast=3:9:3", ""),
    "donchian": ("window", "window=1:41:8", ""),
    "rsi": ("period,lower,upper", "period=2:14:6,lower=20:30:10,upper=70:80:5", "lower<upper"),
    "bollinger": ("window,k", "window=5:25:10,k=0.5:2.5:1", ""),
}
STATS = ("wins,gross_win,gross_loss,best,worst,mean,m2,max_dd,exposure_bars,win_rate,"
         "profit_factor,sharpe_per_trade,avg_trade")
INTS = {"trades", "wins", "exposure_bars"}


def run(*args, **kw):
    return subprocess.run([bin_path(), *args], capture_output=True, text=True, timeout=DEADLINE,
                          **kw)


_L = None


def lib():
    """A CDLL of our own: the strategy calls declared here, apart from the package's."""
    global _L
    if _L is None:
        L = ctypes.CDLL(lib_path())
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        L.tf_strategy_builtin.argtypes, L.tf_strategy_builtin.restype = [ctypes.c_char_p], p
        L.tf_sweep_with.argtypes = [p, p, i64, p, i64, p, p, ctypes.POINTER(binding._Opts)]
        L.tf_sweep_with.restype = ctypes.c_int
        _L = L
    return _L


def sweep_with(name, close, params, threads=1, fee=0.09):
    """tf_sweep_with of built-in `name`: pnl, trades and the statistics (STATS_DTYPE)."""
    L = lib()
    d = L.tf_strategy_builtin(name.encode())
    assert d
    close = np.ascontiguousarray(close, dtype=np.float64)
    params = np.ascontiguousarray(params, dtype=np.float64)
    m = params.shape[0]
    pnl, trades = np.empty(m), np.empty(m, dtype=np.int64)
    st = np.zeros(m, dtype=binding.STATS_DTYPE)
    f = ctypes.c_double(fee)
    o = binding._Opts(size=ctypes.sizeof(binding._Opts), threads=threads, fee=ctypes.pointer(f),
                      stats=st.ctypes.data)
    rc = L.tf_sweep_with(d, close.ctypes.data, close.shape[0], params.ctypes.data, m,
                         pnl.ctypes.data, trades.ctypes.data, ctypes.byref(o))
    assert rc == 0
    return pnl, trades, st


def table(out):
    """The CSV as (header, {column: array}) with counts as int64, reals as float64."""
    lines = out.strip().splitlines()
    head = lines[0].split(",")
    rows = [ln.split(",") for ln in lines[1:]]
    cols = {h: np.array([(int if h in INTS else float)(r[k]) for r in rows],
                        dtype=np.int64 if h in INTS else np.float64)
            for k, h in enumerate(head)}
    return head, cols


def product(spec, names, where=None):
    """The grid by name written out here: LO + k*STEP while <= HI, last parameter fastest."""
    ranges = {}
    for part in spec.split(","):
        n, v = part.split("=")
        lo, hi, step = (float(x) for x in v.split(":")) if ":" in v else (float(v),) * 2 + (1.0,)
        vals, k = [], 0
        while lo + k * step <= hi:
            vals.append(lo + k * step)
            k += 1
        ranges[n] = vals
    grid = np.array(np.meshgrid(*[ranges[n] for n in names], indexing="ij")).reshape(
        len(names), -1).T
    if where:
        a, b = where.split("<")
        grid = grid[grid[:, names.index(a)] < grid[:, names.index(b)]]
    return np.ascontiguousarray(grid)


@pytest.fixture(scope="module")
def prices(tmp_path_factory):
    """8,000 closes with four decimals (the paper run trades them unrounded)."""
    rng = np.random.default_rng(22)
    x = np.round(100.0 * np.exp(np.cumsum(rng.normal(0, 0.004, 8000))), 4)
    p = tmp_path_factory.mktemp("prices") / "p.csv"
    p.write_text("close\n" + "".join(f"{v:.4f}\n" for v in x))
    return str(p), np.array([float(f"{v:.4f}") for v in x])


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_through_cli_is_sweep_with(name, prices):
    path, close = prices
    names, spec, where = BUILTINS[name]
    args = ["sweep", "--quiet", "--input", path, "--strategy", name, "--grid", spec]
    if where:
        args += ["--where", where]
    r = run(*args, "--threads", "3")
    assert r.returncode == 0, r.stderr
    head, c = table(r.stdout)
    assert head == names.split(",") + ["pnl", "trades"] + STATS.split(",")
    g = product(spec, names.split(","), where or None)
    got = np.stack([c[n] for n in names.split(",")], axis=1)
    assert np.array_equal(got.view(np.int64), g.view(np.int64))  # the grid, its order
    pnl, trades, st = sweep_with(name, close, g)
    assert np.array_equal(c["pnl"].view(np.int64), pnl.view(np.int64))
    assert np.array_equal(c["trades"], trades)
    for s in STATS.split(",")[:9]:
        assert np.array_equal(c[s].view(np.int64), st[s].view(np.int64)), s
    from tollfree.stats import derived
    d = derived(st)
    for s in ("win_rate", "profit_factor", "sharpe_per_trade", "avg_trade"):
        assert np.array_equal(c[s].view(np.int64), d[s].view(np.int64)), s
    assert trades.max() > 0
    # one thread and the reference give the same text
    for extra in (["--threads", "1"], ["--isa", "reference"]):
        r1 = run(*args, *extra)
        assert r1.returncode == 0, r1.stderr
        assert r1.stdout == r.stdout


def test_grid_order_where_sort_top_columns():
    r = run("sweep", "--quiet", "--strategy", "sma_cross", "--grid", "slow=3:5:1,fast=1:3:1",
            "--where", "fast<slow && slow!=4", "--columns", "basic")
    assert r.returncode == 0, r.stderr
    rows = [ln.split(",")[:2] for ln in r.stdout.splitlines()[1:]]
    assert r.stdout.splitlines()[0] == "fast,slow,pnl,trades"
    assert rows == [["1", "3"], ["1", "5"], ["2", "3"], ["2", "5"], ["3", "5"]]
    r = run("sweep", "--quiet", "--strategy", "bollinger", "--grid", "window=10:30:10,k=1:2:0.5",
            "--sort", "-k", "--top", "4", "--columns", "k,window,trades,max_dd")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "k,window,trades,max_dd"
    assert [ln.split(",")[:2] for ln in lines[1:]] == [["1", "10"], ["1", "20"], ["1", "30"],
                                                       ["1.5", "10"]]
    r = run("sweep", "--quiet", "--strategy", "donchian", "--grid", "window=5:50:5",
            "--sort", "sharpe_per_trade", "--top", "1")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2
    # --top alone: the K best by pnl
    full = run("sweep", "--quiet", "--strategy", "donchian", "--grid", "window=5:50:5",
               "--columns", "window,pnl")
    top = run("sweep", "--quiet", "--strategy", "donchian", "--grid", "window=5:50:5",
              "--columns", "window,pnl", "--top", "3")
    rows = sorted(full.stdout.splitlines()[1:], key=lambda ln: -float(ln.split(",")[1]))
    assert top.stdout.splitlines() == ["window,pnl"] + rows[:3]


def test_hma_by_name_and_where_are_the_hma_sweep(tmp_path):
    rows = [(L, 5, 3, 4, 2, 3) for L in range(10, 13)]
    f = tmp_path / "g.csv"
    f.write_text("".join(",".join(map(str, r)) + "\n" for r in rows))
    a = run("sweep", "--quiet", "--grid", str(f))
    b = run("sweep", "--quiet", "--grid", "L=10:12:1,half=5,sq=3,p=4,p3=2,p2=3")
    c = run("sweep", "--quiet", "--strategy", "hma", "--grid",
            "p2=3,p3=2,p=4,sq=3,half=5,L=10:12:1")
    assert a.returncode == b.returncode == c.returncode == 0, (b.stderr, c.stderr)
    assert a.stdout == b.stdout == c.stdout
    assert a.stdout.splitlines()[0].startswith("L,half,sq,p,p3,p2,pnl,trades")
    # --where over the default grid: the default's rows it keeps, unchanged
    full = run("sweep", "--quiet", "--columns", "basic").stdout.splitlines()
    kept = run("sweep", "--quiet", "--columns", "basic", "--where", "L>=100,sq<=12")
    assert kept.returncode == 0, kept.stderr
    want = [full[0]] + [ln for ln in full[1:]
                        if int(ln.split(",")[0]) >= 100 and int(ln.split(",")[2]) <= 12]
    assert kept.stdout.splitlines() == want and len(want) > 2
    r = run("sweep", "--grid", "L=10.5,half=5,sq=3,p=4,p3=2,p2=3")
    assert r.returncode == 2 and "whole numbers" in r.stderr


def test_list_strategies():
    for args in (["--list-strategies"], ["--strategy", "list"]):
        r = run("sweep", *args)
        assert r.returncode == 0, r.stderr
        assert "sma_cross(fast, slow)" in r.stdout.splitlines()
        assert "rsi(period, lower, upper)" in r.stdout
        assert r.stdout.splitlines()[0] == "hma(L, half, sq, p, p3, p2)"


@pytest.mark.parametrize("args,status,words", [
    (["--strategy", "macd", "--grid", "a=1"], 2, ["unknown strategy", "sma_cross", "bollinger"]),
    (["--strategy", "sma_cross"], 2, ["wants its grid by name", "fast=LO:HI:STEP"]),
    (["--strategy", "sma_cross", "--grid", "fast=1:3:1,medium=5"], 2,
     ["unknown parameter 'medium'", "fast, slow"]),
    (["--strategy", "sma_cross", "--grid", "fast=1:3:1"], 2, ["parameter slow missing"]),
    (["--strategy", "sma_cross", "--grid", "fast=1:3:0,slow=5"], 2, ["STEP must be > 0"]),
    (["--strategy", "sma_cross", "--grid", "fast=4:3:1,slow=5"], 2, ["LO 4 > HI 3"]),
    (["--strategy", "sma_cross", "--grid", "fast=1:5000:1,slow=1:5000:1"], 2,
     ["25000000 combos", "more than 10000000"]),
    (["--strategy", "sma_cross", "--grid", "fast=1:3:1,slow=5", "--where", "fast<slw"], 2,
     ["'slw'", "fast, slow"]),
    (["--strategy", "sma_cross", "--grid", "fast=6:8:1,slow=5", "--where", "fast<slow"], 2,
     ["keeps none"]),
    (["--strategy", "sma_cross", "--grid", "fast=3:6:1,slow=5"], 1,
     ["grid combo 3 (fast=5, slow=5)", "refused by sma_cross's init"]),
    (["--strategy", "rsi", "--grid", "period=14,lower=80,upper=70"], 1,
     ["grid combo 1 (period=14, lower=80, upper=70)"]),
    (["--strategy", "sma_cross", "--grid", "fast=1,slow=5", "--columns", "L,pnl"], 2,
     ["unknown column 'L'", "fast, slow, pnl"]),
    (["--strategy", "sma_cross", "--grid", "fast=1,slow=5", "--metric", "fast",
      "--split", "0.5"], 2, ["a parameter is not a metric"]),
    (["--strategy", "sma_cross", "--grid", "fast=1,slow=5", "--report", "r.html", "--heatmap",
      "L,sq"], 2, ["two of the strategy's parameters", "fast,slow", "'L,sq'"]),
    (["--strategy", "./no/such/plugin.so", "--grid", "a=1"], 1, ["plugin.so"]),
])
def test_refusals(args, status, words):
    r = run("sweep", "--quiet", *args)
    assert r.returncode == status, (r.returncode, r.stderr)
    assert r.stdout == ""
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert len(r.stderr.splitlines()) == 1


def test_report_with_a_strategy(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    r = run("sweep", "--quiet", "--strategy", "sma_cross", "--grid", "fast=2:10:4,slow=10:40:10",
            "--where", "fast<slow", "--report", str(out), "--heatmap", "slow,fast", "--top", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("fast,slow,pnl,trades")
    page = out.read_text()
    assert "sma_cross" in page and page.rstrip().endswith("</html>")


def test_plugin_for_another_abi(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    inc = os.path.join(os.path.dirname(__file__), "..", "..", "include")
    src = tmp_path / "other.c"
    src.write_text(
        '#include "tollfree/strategy.h"\n'
        "static int init(void *s, const double *p) { (void)s; (void)p; return 0; }\n"
        "static int step(void *s, double c) { (void)s; (void)c; return TF_HOLD; }\n"
        'static const char *const names[] = {"w"};\n'
        "static const tf_strategy_def def = {sizeof def, TF_STRATEGY_ABI + 1, \"other\", 1,\n"
        "    names, 16, init, step, 0};\n"
        "const tf_strategy_def *tollfree_strategy(void) { return &def; }\n")
    so = tmp_path / "other.so"
    subprocess.run([cc, "-shared", "-fPIC", "-I", inc, "-o", str(so), str(src)], check=True,
                   timeout=DEADLINE)
    r = run("sweep", "--quiet", "--strategy", str(so), "--grid", "w=1")
    assert r.returncode == 1
    assert str(so) in r.stderr and "abi" in r.stderr.lower()
    r = run("paper", "--quiet", "--strategy", str(so), "--params", "w=1")
    assert r.returncode == 2 and str(so) in r.stderr


def test_walk_forward_with_a_builtin(prices):
    path, close = prices
    spec, names = "fast=2:10:4,slow=15:45:15", ["fast", "slow"]
    r = run("sweep", "--quiet", "--input", path, "--strategy", "sma_cross", "--grid", spec,
            "--walk-forward", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("fold,is_start,is_end,oos_start,oos_end,fast,slow,metric,is_value,is_pnl,"
                        "is_trades,oos_value,oos_pnl,oos_trades,oos_rank,combos,oos_best_value")
    g = product(spec, names)
    n = close.shape[0]
    seg = n // 4
    for k, ln in enumerate(lines[1:], 1):
        f = ln.split(",")
        a, b, c = (k - 1) * seg, k * seg, n if k == 3 else (k + 1) * seg
        assert [int(v) for v in f[1:5]] == [a, b, b, c]
        isp, ist, _ = sweep_with("sma_cross", close[a:b], g)
        osp, ost, _ = sweep_with("sma_cross", close[b:c], g)
        w = int(np.argmax(isp))
        assert [float(f[5]), float(f[6])] == list(g[w])
        assert f[7] == "pnl"
        assert np.float64(f[9]).view(np.int64) == isp[w].view(np.int64)
        assert np.float64(f[12]).view(np.int64) == osp[w].view(np.int64)
        assert int(f[10]) == ist[w] and int(f[13]) == ost[w]
        assert int(f[14]) == 1 + int(np.sum(osp > osp[w]))
        assert int(f[15]) == g.shape[0]
    r2 = run("sweep", "--quiet", "--input", path, "--strategy", "sma_cross", "--grid", spec,
             "--split", "0.5", "--metric", "-max_dd")
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout.splitlines()[1].split(",")[7] == "-max_dd"


@pytest.mark.parametrize("name,params", [
    ("sma_cross", "fast=5,slow=20"), ("ema_cross", "slow=26,fast=12"), ("donchian", "window=20"),
    ("rsi", "period=14,lower=30,upper=70"), ("bollinger", "window=20,k=2"),
    ("hma", "L=6,half=3,sq=2,p=3,p3=1,p2=2")])
def test_paper_parity_per_builtin(name, params, prices):
    path, close = prices
    r = run("paper", "--quiet", "--json", "--input", path, "--strategy", name, "--params", params)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["parity"] is True and d["trades"] > 0
    assert d["strategy"] == name and d["rounded_closes"] == 0
    kv = dict(p.split("=") for p in params.split(","))
    names = {"hma": "L,half,sq,p,p3,p2"}.get(name) or BUILTINS[name][0]
    want = [float(kv[k]) for k in names.split(",")]
    assert d["combo"] == want  # the parameters in the strategy's order
    # the fills' pnl is tf_sweep_with's on the series (its closes are whole ticks)
    pnl, trades, _ = sweep_with(name, close, np.array([want]))
    assert np.float64(d["pnl"]).view(np.int64) == pnl[0].view(np.int64)
    assert d["trades"] == trades[0] and d["kernel_trades"] == trades[0]
    assert np.float64(d["stream_pnl"]).view(np.int64) == pnl[0].view(np.int64)
    t = run("paper", "--quiet", "--input", path, "--strategy", name, "--params", params)
    assert t.returncode == 0 and t.stdout.startswith(f"paper: {name} ")


@pytest.mark.parametrize("args,words", [
    (["--strategy", "sma_cross"], ["--strategy and --params go together"]),
    (["--strategy", "sma_cross", "--params", "fast=5"], ["parameter slow missing"]),
    (["--strategy", "sma_cross", "--params", "fast=5:6:1,slow=9"], ["one value per parameter"]),
    (["--strategy", "sma_cross", "--params", "fast=9,slow=5"], ["fast=9", "slow=5", "refused"]),
    (["--strategy", "nope", "--params", "a=1"], ["unknown strategy", "donchian"]),
    (["--strategy", "sma_cross", "--params", "fast=1,slow=5", "--combo", "20"],
     ["--combo is HMA's"]),
])
def test_paper_refusals(args, words):
    r = run("paper", "--quiet", *args)
    assert r.returncode == 2, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_panel_with_a_strategy_is_each_series_sweep(tmp_path, prices):
    """`sweep --panel DIR --strategy NAME` (the Python side) gives each instrument's rows of the
    plain `--input` sweep, bit for bit (it was refused before the panel took strategies)."""
    path, close = prices
    d = tmp_path / "panel"
    d.mkdir()
    close[:3000].tofile(d / "a.f64")
    close[3000:].tofile(d / "b.f64")
    spec = ["--strategy", "ema_cross", "--grid", "fast=3:12:3,slow=20:40:10", "--where",
            "fast<slow", "--columns", "basic", "--quiet"]
    r = run("sweep", "--panel", str(d), *spec)
    assert r.returncode == 0, r.stderr
    rows = [line.split(",") for line in r.stdout.splitlines()]
    assert rows[0] == ["instrument", "fast", "slow", "pnl", "trades"]
    for name in ("a", "b"):
        one = run("sweep", "--input", str(d / f"{name}.f64"), *spec)
        assert one.returncode == 0, one.stderr
        mine = [",".join(x[1:]) for x in rows[1:] if x[0] == name]
        assert mine == one.stdout.splitlines()[1:]


def test_paper_plot_with_a_strategy(tmp_path, prices):
    """`paper --strategy ... --plot FILE` draws the run (it was refused before)."""
    pytest.importorskip("matplotlib")
    path, _ = prices
    png = tmp_path / "eq.png"
    r = run("paper", "--quiet", "--input", path, "--strategy", "sma_cross", "--params",
            "fast=5,slow=20", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
