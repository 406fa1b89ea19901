"""The interactive report (uPlot vendored into the page, python/tollfree/report_charts.py) loaded
in headless Chromium: no script error and no console.error, every chart drawn, a zoom through
uPlot's own API (setScale) changes the visible range of the price chart and the equity and
drawdown charts follow, and the heatmap names the cell under the cursor. Plus what needs no
browser: the page is self-contained and keeps uPlot's license, the down-sampling keeps every
bucket's extremes, --static keeps the PNG path, and a missing library is refused with what to do
(and --static still works).

Chromium comes from scripts/setup.sh (Debian's `chromium`); the browser tests skip, saying so,
only where it is not installed."""
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tollfree
from tollfree import data, report_charts, report_vendor
from tollfree._lib import bin_path
from conftest import DEADLINE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
C = data.generate_close(6000, seed=11)

# Injected first into <head> of a copy of the report: records script errors and console.error,
# then (after load) zooms the price chart with uPlot's setScale, hovers the heatmap, and writes
# what it saw into <pre id="tf-test"> for --dump-dom.
HOOK = r"""<script>
window.__tfErr = [];
window.addEventListener("error", function (e) { __tfErr.push("error: " + e.message); });
(function () {
  var ce = console.error;
  console.error = function () {
    __tfErr.push("console.error: " + Array.prototype.join.call(arguments, " "));
    return ce.apply(console, arguments);
  };
})();
window.addEventListener("load", function () { setTimeout(function () {
  var out = {errors: __tfErr, charts: {}}, C = window.tollfreeCharts || {}, p = C.price;
  try {
    Object.keys(C).forEach(function (k) {
      var u = C[k], cv = u.root.querySelector("canvas");
      out.charts[k] = {w: cv ? cv.width : 0, h: cv ? cv.height : 0, time: !!u.scales.x.time,
                       x: [u.scales.x.min, u.scales.x.max], n: u.data[0].length,
                       x0: u.data[0][0]};
    });
    if (p) {
      var d = p.data[0], a = d[Math.floor(d.length * 0.40)], b = d[Math.floor(d.length * 0.45)];
      out.zoom = {asked: [a, b]};
      p.setScale("x", {min: a, max: b});
    }
    var h = C.sweep;
    if (h && document.getElementById("tf-sweep-value"))
      h.setCursor({left: h.bbox.width / devicePixelRatio / 2,
                   top: h.bbox.height / devicePixelRatio / 2});
  } catch (e) { out.errors.push("hook: " + e); }
  setTimeout(function () {
    ["price", "equity", "drawdown"].forEach(function (k) {
      if (C[k] && out.zoom) out.zoom[k] = [C[k].scales.x.min, C[k].scales.x.max];
    });
    var v = document.getElementById("tf-sweep-value");
    out.cell = v ? v.textContent : null;
    var pre = document.createElement("pre");
    pre.id = "tf-test";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 200);
}, 100); });
</script>"""


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def in_browser(page: Path, tmp_path: Path) -> dict:
    """What the hook saw when headless Chromium loaded a copy of ``page``."""
    text = page.read_text(encoding="utf-8")
    assert text.count('<meta charset="utf-8">') == 1
    probe = tmp_path / ("probe-" + page.name)
    probe.write_text(text.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + HOOK),
                     encoding="utf-8")
    r = subprocess.run([chromium(), "--headless", "--disable-gpu", "--no-sandbox",
                        "--no-first-run", "--disable-dev-shm-usage", "--window-size=1200,2400",
                        "--virtual-time-budget=10000", f"--user-data-dir={tmp_path / 'profile'}",
                        "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="tf-test">(.*?)</pre>', r.stdout, re.S)
    assert m, "the page never finished loading: " + r.stderr[-2000:]
    return json.loads(html.unescape(m.group(1)))


def need_chromium():
    if not chromium():
        pytest.skip("chromium is not installed (scripts/setup.sh installs Debian's chromium)")


def check_zoom(seen):
    z = seen["zoom"]
    assert z["price"] == z["asked"], z
    assert z["equity"] == z["asked"] and z["drawdown"] == z["asked"], "the charts follow: " + str(z)
    assert seen["charts"]["price"]["x"] != z["asked"], "the zoom changed nothing"


def cli(*args):
    return subprocess.run([bin_path(), "sweep", "--threads", "1", *args], capture_output=True,
                          text=True, timeout=DEADLINE)


# ---- in the browser ------------------------------------------------------------------------

def test_default_report_renders_without_errors_and_zooms(tmp_path):
    need_chromium()
    out = Path(tollfree.report(path=str(tmp_path / "d.html")))
    seen = in_browser(out, tmp_path)
    assert seen["errors"] == []
    assert set(seen["charts"]) == {"price", "equity", "drawdown", "sweep"}
    for name, c in seen["charts"].items():
        assert c["w"] > 200 and c["h"] > 100 and c["n"] > 1, (name, c)
    # no dates: bar numbers, the whole series in view
    assert not seen["charts"]["price"]["time"]
    assert seen["charts"]["price"]["x"] == [0, 149_999]
    check_zoom(seen)


def test_dated_cli_report_has_date_axes_and_a_hoverable_heatmap(tmp_path):
    need_chromium()
    f = tmp_path / "prices.csv"
    import pandas as pd
    dates = pd.date_range("2021-01-04", periods=6000, freq="h").strftime("%Y-%m-%d %H:%M").tolist()
    f.write_text("Date,Close\n" + "".join(f"{d},{x!r}\n" for d, x in zip(dates, C)))
    out = tmp_path / "r.html"
    r = cli("--input", str(f), "--grid", "6:60:12", "--walk-forward", "2", "--report", str(out),
            "--heatmap", "L,sq", "--quiet")
    assert r.returncode == 0, r.stderr
    seen = in_browser(out, tmp_path)
    assert seen["errors"] == []
    price = seen["charts"]["price"]
    assert price["time"] and price["x0"] == 1609718400  # 2021-01-04 00:00 UTC, in seconds
    assert price["n"] == 6000  # every bar (down-sampled above report_charts.FULL bars)
    assert seen["charts"]["sweep"]["w"] > 200
    assert re.fullmatch(r"L=\d+, sq=\d+: pnl (-?[0-9.e+-]+|\(no combo\))", seen["cell"]), seen
    check_zoom(seen)


# ---- without a browser ---------------------------------------------------------------------

def test_page_is_self_contained_small_and_keeps_the_license(tmp_path):
    out = Path(tollfree.report(path=str(tmp_path / "d.html")))
    page = out.read_text(encoding="utf-8")
    assert out.stat().st_size < 1_000_000
    assert not re.search(r"(src|href)=\"(https?:|//)", page), "nothing may be fetched"
    assert "data:image/png" not in page
    version = report_vendor.uplot()["version"]
    lock = json.loads((ROOT / "web" / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/uplot"]["version"] == version
    assert lock["packages"]["node_modules/uplot"]["integrity"].startswith("sha512-")
    assert f"/*! uPlot {version} " in page and "Permission is hereby granted" in page
    assert page.count("<script") == 3  # the data, uPlot, the glue


def test_down_sampling_keeps_each_buckets_extremes():
    rng = np.random.default_rng(3)
    y = np.cumsum(rng.normal(size=150_001))
    z = -np.abs(np.cumsum(rng.normal(size=y.size)))
    idx = report_charts.pick([y, z], y.size)
    assert idx.size <= 4 * report_charts.BUCKETS + 4 and idx[0] == 0 and idx[-1] == y.size - 1
    assert np.all(np.diff(idx) > 0)
    k = -(-y.size // report_charts.BUCKETS)
    for lo in range(0, y.size, k):
        s = slice(lo, min(lo + k, y.size))
        for line in (y, z):
            seg = line[s]
            assert lo + int(np.argmin(seg)) in idx and lo + int(np.argmax(seg)) in idx
    n = report_charts.FULL
    assert np.array_equal(report_charts.pick([y[:n]], n), np.arange(n))
    assert report_charts.pick([y[:n + 1]], n + 1).size < n


def test_static_report_keeps_the_png_path(tmp_path):
    f = tmp_path / "c.f64"
    C.tofile(f)
    out = tmp_path / "s.html"
    r = cli("--input", str(f), "--grid", "6:60:12", "--report", str(out), "--static", "--quiet")
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert page.count("data:image/png;base64,") == 2 and "<script" not in page
    r = cli("--input", str(f), "--grid", "6:60:12", "--static")
    assert r.returncode == 2 and "--static goes with --report FILE.html" in r.stderr


def test_without_the_library_or_network_the_report_says_what_to_do(tmp_path):
    """A tree where uPlot was never fetched and the registry cannot be reached: refused with
    `make web` and --static named, exit 1; --static still writes the report."""
    if (Path(report_vendor.__file__).parent / "_vendor" / "uplot").exists():
        pytest.skip("this package carries uPlot (an install): nothing is fetched")
    web = tmp_path / "web"
    web.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "web" / name, web / name)
    env = dict(os.environ, TOLLFREE_WEB_DIR=str(web), npm_config_cache=str(tmp_path / "npm"),
               npm_config_registry="http://127.0.0.1:9/", npm_config_fetch_retries="0",
               npm_config_offline="false")
    f = tmp_path / "c.f64"
    C.tofile(f)
    run = [bin_path(), "sweep", "--threads", "1", "--input", str(f), "--grid", "6:60:12",
           "--quiet", "--report"]
    r = subprocess.run(run + [str(tmp_path / "i.html")], capture_output=True, text=True,
                       env=env, timeout=DEADLINE)
    assert r.returncode == 1
    assert "needs uPlot" in r.stderr and "make web" in r.stderr and "--static" in r.stderr, r.stderr
    assert not (tmp_path / "i.html").exists()
    r = subprocess.run(run + [str(tmp_path / "s.html"), "--static"], capture_output=True,
                       text=True, env=env, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "s.html").stat().st_size > 10_000


def test_a_source_tree_without_the_library_fetches_it_on_first_use(tmp_path):
    """No web/node_modules yet (a fresh clone where `make web` has not run): the first report
    runs `npm ci` from the lock file and inlines what it fetched."""
    if (Path(report_vendor.__file__).parent / "_vendor" / "uplot").exists():
        pytest.skip("this package carries uPlot (an install): nothing is fetched")
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (scripts/setup.sh installs it)")
    web = tmp_path / "web"
    web.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "web" / name, web / name)
    f = tmp_path / "c.f64"
    C.tofile(f)
    r = subprocess.run([bin_path(), "sweep", "--threads", "1", "--input", str(f), "--grid",
                        "6:60:12", "--quiet", "--report", str(tmp_path / "r.html")],
                       capture_output=True, text=True, timeout=DEADLINE,
                       env=dict(os.environ, TOLLFREE_WEB_DIR=str(web)))
    assert r.returncode == 0, r.stderr
    got = (web / "node_modules" / "uplot" / "dist" / "uPlot.iife.min.js").read_text()
    assert got in (tmp_path / "r.html").read_text()


def test_time_axes_come_from_dates_times_or_a_datetime_index(tmp_path):
    pd = pytest.importorskip("pandas")
    got = report_charts.epoch_seconds(["2021-01-04 00:00", "2021-01-04 01:00"])
    assert got.tolist() == [1609718400, 1609722000]
    got = report_charts.epoch_seconds(["04/01/2021 00:00+01:00", "04/01/2021 01:00+01:00"])
    assert got.tolist() == [1617231600, 1617235200]  # 2021-03-31 23:00 UTC: converted
    assert report_charts.epoch_seconds(["a", "b"]) is None
    assert report_charts.epoch_seconds(None, None) is None
    n = 3000
    idx = pd.date_range("2020-03-02 09:30", periods=n, freq="min", tz="America/New_York")
    close = pd.Series(100.0 + np.sin(np.arange(n) * 0.01), index=idx)
    page = Path(tollfree.report(close, tollfree.grid.grid(6, 60, 6), str(tmp_path / "r.html")))
    blob = re.search(r'id="tf-data">(.*?)</script>', page.read_text(), re.S).group(1)
    bars = json.loads(blob)["bars"]
    assert bars["time"] and bars["x"][0] == 1583159400  # 09:30 New York = 14:30 UTC
    assert len(bars["x"]) == n
