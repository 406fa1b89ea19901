"""Out-of-sample / walk-forward (CLI and Python, the same bits) and the HTML report, rendered by
headless Chromium: the page must be non-blank and free of console errors."""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import tollfree
from tollfree import data, research
from tollfree._lib import bin_path
from conftest import DEADLINE  # noqa: E402

C = data.generate_close(6000, seed=11)
GRID = "6:60:12"


def cli(*args):
    return subprocess.run([bin_path(), "sweep", "--threads", "1", *args], capture_output=True,
                          text=True, timeout=DEADLINE)


def folds_csv(text):
    lines = text.strip().splitlines()
    assert lines[0].split(",") == research.COLUMNS
    return [ln.split(",") for ln in lines[1:]]


@pytest.mark.parametrize("args,kw", [
    (["--split", "0.7"], {"split": 0.7}),
    (["--walk-forward", "3", "--metric", "avg_trade"], {"walk_forward": 3, "metric": "avg_trade"}),
    (["--walk-forward", "2", "--metric", "trades"], {"walk_forward": 2, "metric": "trades"}),
    (["--walk-forward", "3", "--metric", "sharpe_per_trade", "--fee", "0.02"],
     {"walk_forward": 3, "metric": "sharpe_per_trade", "fee": 0.02}),
    (["--split", "0.6", "--metric", "-max_dd"], {"split": 0.6, "metric": "-max_dd"}),
], ids=["split", "wf-avg_trade", "wf-trades", "wf-sharpe-fee", "split-max_dd"])
def test_cli_and_python_agree_bit_for_bit(tmp_path, args, kw):
    f = tmp_path / "c.f64"
    C.tofile(f)
    r = cli("--input", str(f), "--grid", GRID, *args)
    assert r.returncode == 0, r.stderr
    verdicts = [ln for ln in r.stderr.splitlines() if ln.startswith("out of sample: ")]
    rows = folds_csv(r.stdout)
    frame = tollfree.walk_forward(C, research.parse_grid(GRID), **kw)
    assert verdicts == ["out of sample: " + research.verdict(frame)]
    assert len(rows) == len(frame)
    for row, (_, want) in zip(rows, frame.iterrows()):
        for name, cell in zip(research.COLUMNS, row):
            w = want[name]
            if isinstance(w, str):
                assert cell == w
            elif isinstance(w, (float, np.floating)):
                assert np.float64(float(cell)).view(np.int64) == np.float64(w).view(np.int64), name
            else:
                assert int(cell) == int(w), name


def test_folds_are_cold_started_sweeps():
    g = research.parse_grid(GRID)
    fr = tollfree.walk_forward(C, g, split=0.5)
    b = int(np.floor(6000 * 0.5))
    p_is, t_is = tollfree.sweep(C[:b], g)
    p_os, t_os = tollfree.sweep(C[b:], g)
    w = int(np.argmax(p_is))
    assert fr.loc[0, "is_pnl"] == p_is[w] and fr.loc[0, "oos_pnl"] == p_os[w]
    assert fr.loc[0, "oos_rank"] == 1 + int(np.sum(p_os > p_os[w]))


@pytest.mark.parametrize("args,needle", [
    (["--split", "1.5"], "--split wants a fraction"),
    (["--walk-forward", "0"], "--walk-forward wants"),
    (["--split", "0.5", "--walk-forward", "2"], "exclude each other"),
    (["--metric", "sharpe_ratio"], "unknown column 'sharpe_ratio'; columns: L, half"),
    (["--metric", "sq"], "a window is not a metric"),
    (["--report", "r.pdf"], "use a .html name"),
    (["--heatmap", "L,sq"], "--heatmap goes with --report"),
    (["--report", "r.html", "--heatmap", "L,zz"], "--heatmap wants two of the windows"),
    (["--report", "r.html", "--heatmap", "L,pnl"], "--heatmap wants two of the windows"),
    (["--report", "r.html", "--heatmap", "L"], "--heatmap wants two of the windows"),
    (["--walk-forward", "3", "--top", "5"], "--top does not apply to --walk-forward"),
    (["--split", "0.5", "--columns", "L,pnl"], "--columns does not apply to --split"),
    (["--walk-forward", "2", "--sort", "pnl"], "--sort does not apply to --walk-forward"),
], ids=["split", "folds", "both", "metric", "metric-window", "report-name", "heatmap-alone",
        "heatmap-zz", "heatmap-not-window", "heatmap-one", "wf-top", "split-columns", "wf-sort"])
def test_bad_research_options(args, needle):
    """Refused before any sweep, exit 2: a bad --heatmap used to be found by the report after
    the whole sweep (exit 1); --top/--columns/--sort with the folds were silently ignored."""
    r = cli(*args)
    assert r.returncode == 2 and needle in r.stderr and r.stdout == "", r.stderr
    assert "sweep:" not in r.stderr.replace("tollfree sweep:", "")  # no sweep ran


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(html_path, png):
    """Headless Chromium: a screenshot and the page's console (--enable-logging)."""
    r = subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--enable-logging=stderr", "--v=0", "--no-first-run",
                        "--disable-dev-shm-usage", f"--screenshot={png}",
                        "--window-size=1200,2400", f"file://{html_path}"],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or ":INFO:CONSOLE" in ln]
    return console


def non_blank(png) -> float:
    """Fraction of pixels that are not the background."""
    import matplotlib.image as mpimg
    img = mpimg.imread(png)[..., :3]
    return float(np.mean(np.any(np.abs(img - img[0, 0]) > 0.05, axis=-1)))


def test_static_report_via_cli_is_self_contained_and_renders(tmp_path):
    """--static: the PNG figures (the interactive page: test_report_browser.py)."""
    f = tmp_path / "prices.csv"
    import pandas as pd
    dates = pd.date_range("2021-01-04", periods=6000, freq="h").strftime("%Y-%m-%d %H:%M").tolist()
    f.write_text("Date,Close\n" + "".join(f"{d},{x!r}\n" for d, x in zip(dates, C)))
    out = tmp_path / "r.html"
    r = cli("--input", str(f), "--grid", GRID, "--walk-forward", "2", "--report", str(out),
            "--heatmap", "L,sq", "--static")
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") >= 2
    assert not re.search(r"(src|href)=\"(https?:|//)", page), "nothing may be fetched"
    assert "<script" not in page
    for needle in ("Inputs", "Ranked by pnl", "Heatmap: pnl over L,sq", "Best combo",
                   "Out of sample (walk-forward, 2 folds", dates[0], "bit for bit"):
        assert needle in page, needle
    if not chromium():
        pytest.skip("chromium not installed (scripts/setup.sh installs it)")
    png = tmp_path / "r.png"
    console = render(out, png)
    assert console == [], console
    assert non_blank(png) > 0.05


def test_python_report_default_sweep(tmp_path):
    out = tmp_path / "d.html"
    tollfree.report(path=str(out), split=0.7, headline="row  median\nx    1 ms")
    page = out.read_text()
    assert os.path.getsize(out) < 2_000_000
    assert "Out of sample (split at 0.7" in page and "Boundary benchmark headline" in page
    assert "L=172" in page  # the default sweep's best combo by pnl


# ---- one home in the library: the same bits as the Python code it replaced ----

def old_folds(n, split=None, walk_forward=None):
    if split is not None:
        b = int(np.floor(float(n) * split))
        return [(0, b, b, n)]
    seg = n // (walk_forward + 1)
    return [((i - 1) * seg, i * seg, i * seg, n if i == walk_forward else (i + 1) * seg)
            for i in range(1, walk_forward + 1)]


def test_folds_are_the_old_rule():
    rng = np.random.default_rng(4)
    for n in list(range(2, 40)) + list(rng.integers(40, 10**9, 50)):
        n = int(n)
        for k in (1, 2, 3, 7, 1000):
            if n // (k + 1) >= 1:
                assert research.folds(n, walk_forward=k) == old_folds(n, walk_forward=k)
            else:
                with pytest.raises(ValueError, match="fold 1 has an empty"):
                    research.folds(n, walk_forward=k)
        for f in (0.5, 0.7, 0.999, 1e-9, float(rng.random())):
            o = old_folds(n, split=f)
            if o[0][1] >= 1 and o[0][1] < n:
                assert research.folds(n, split=f) == o
            else:
                with pytest.raises(ValueError, match="fold 1 has an empty"):
                    research.folds(n, split=f)
    for bad, msg in (({"split": 1.0}, "split wants"), ({"walk_forward": 0}, "1..1000"),
                     ({"walk_forward": 1001}, "1..1000"), ({}, "exactly one"),
                     ({"split": 0.5, "walk_forward": 2}, "exactly one")):
        with pytest.raises(ValueError, match=msg):
            research.folds(100, **bad)


def old_metric_values(metric, st):
    from test_stats import old_derived
    name = metric[1:] if metric.startswith("-") else metric
    d = old_derived(st)
    v = np.asarray(d[name] if name in d else st[name], dtype=np.float64)
    return -v if metric.startswith("-") else v


@pytest.mark.parametrize("seed", range(3))
def test_metric_values_are_the_old_formulas(seed):
    from test_stats import random_stats
    st = random_stats(seed, 3000)
    for name in research.METRICS:
        for metric in (name, "-" + name):
            got, want = research.metric_values(metric, st), old_metric_values(metric, st)
            assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), metric
    only = {"pnl": st["pnl"], "trades": st["trades"]}  # enough for these two
    assert np.array_equal(research.metric_values("-trades", only), -st["trades"].astype(float))
    for bad in ("sq", "nope", "-", ""):
        with pytest.raises(ValueError, match="metric must be one of pnl, trades, wins"):
            research.metric_values(bad, st)


def old_walk_forward(close, params, split=None, walk_forward=None, metric="pnl", fee=0.09):
    """The Python walk_forward before it moved into the library (tf_oos_run)."""
    rows = []
    for k, (a, b, _, c) in enumerate(old_folds(close.shape[0], split, walk_forward), 1):
        s_is = tollfree.sweep_stats(close[a:b], params, fee=fee)
        s_os = tollfree.sweep_stats(close[b:c], params, fee=fee)
        v_is, v_os = old_metric_values(metric, s_is), old_metric_values(metric, s_os)
        w = 0 if np.isnan(v_is).all() else int(np.nanargmax(v_is))
        ov = v_os[w]
        rank = 1 + int(np.sum(v_os > ov)) if ov == ov else 1 + int(np.sum(~np.isnan(v_os)))
        best = np.nan if np.isnan(v_os).all() else float(np.nanmax(v_os))
        rows.append([k, a, b, b, c, *(int(x) for x in params[w]), metric, float(v_is[w]),
                     float(s_is["pnl"][w]), int(s_is["trades"][w]), float(ov),
                     float(s_os["pnl"][w]), int(s_os["trades"][w]), rank, params.shape[0], best])
    return rows


@pytest.mark.parametrize("kw", [{"split": 0.3}, {"walk_forward": 4, "metric": "win_rate"},
                                {"walk_forward": 6, "metric": "-max_dd", "fee": 0.0},
                                {"split": 0.97, "metric": "sharpe_per_trade"},
                                {"walk_forward": 2, "metric": "-profit_factor"},
                                {"walk_forward": 30, "metric": "avg_trade"}])
def test_walk_forward_frames_are_the_old_ones(kw):
    """The frames of tollfree.walk_forward, now computed by tf_oos_run, equal the removed Python
    code's, raw bits (NaN metrics included: short parts with no trades, all-NaN folds)."""
    g = research.parse_grid("6:120:25")
    want = old_walk_forward(C, g, **kw)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # combos too long for 30 folds' parts: a note
        frame = tollfree.walk_forward(C, g, **kw)
    assert list(frame.columns) == research.COLUMNS and len(frame) == len(want)
    for row, w in zip(frame.itertuples(index=False), want):
        for name, a, b in zip(research.COLUMNS, row, w):
            if isinstance(b, float):
                assert np.float64(a).view(np.uint64) == np.float64(b).view(np.uint64), name
            else:
                assert a == b, name
    assert frame.dtypes["oos_rank"] == np.int64 and frame.dtypes["oos_value"] == np.float64


def test_walk_forward_grid_note_on_the_shortest_part(tmp_path):
    """A combo longer than a fold's part: a NOTE from the CLI (exit 0), a UserWarning from
    Python, the same text."""
    g = np.array([tollfree.grid.combo(10), tollfree.grid.combo(900)], dtype=np.int64)
    gf = tmp_path / "g.csv"
    gf.write_text("".join(",".join(str(int(x)) for x in row) + "\n" for row in g))
    f = tmp_path / "c.f64"
    C.tofile(f)
    r = cli("--input", str(f), "--grid", str(gf), "--walk-forward", "8", "--quiet")
    assert r.returncode == 0, r.stderr
    note = [ln for ln in r.stderr.splitlines() if "note:" in ln]
    assert len(note) == 1 and "1 of 2 combos can never trade on 666 bars" in note[0]
    assert note[0].endswith("(on the shortest part of a fold)")
    with pytest.warns(UserWarning, match="1 of 2 combos can never trade on 666 bars"):
        tollfree.walk_forward(C, g, walk_forward=8)


def test_bad_python_research_arguments():
    g = research.parse_grid(GRID)
    with pytest.raises(ValueError, match="metric must be one of"):
        tollfree.walk_forward(C, g, split=0.5, metric="L")
    with pytest.raises(ValueError, match="fold 1 has an empty"):
        tollfree.walk_forward(C[:3], g, walk_forward=5)
    with pytest.raises(ValueError, match="exactly one"):
        tollfree.walk_forward(C, g)
    with pytest.raises(ValueError, match="fee must be 0 <= fee < 100"):
        tollfree.walk_forward(C, g, split=0.5, fee=-0.01)
