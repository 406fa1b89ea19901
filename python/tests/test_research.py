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
    assert "out of sample: the in-sample winner's mean rank" in r.stderr
    rows = folds_csv(r.stdout)
    frame = tollfree.walk_forward(C, research.parse_grid(GRID), **kw)
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
], ids=["split", "folds", "both", "metric", "metric-window", "report-name", "heatmap-alone"])
def test_bad_research_options(args, needle):
    r = cli(*args)
    assert r.returncode == 2 and needle in r.stderr and r.stdout == ""


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


def test_report_via_cli_is_self_contained_and_renders(tmp_path):
    f = tmp_path / "prices.csv"
    import pandas as pd
    dates = pd.date_range("2021-01-04", periods=6000, freq="h").strftime("%Y-%m-%d %H:%M").tolist()
    f.write_text("Date,Close\n" + "".join(f"{d},{x!r}\n" for d, x in zip(dates, C)))
    out = tmp_path / "r.html"
    r = cli("--input", str(f), "--grid", GRID, "--walk-forward", "2", "--report", str(out),
            "--heatmap", "L,sq")
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
