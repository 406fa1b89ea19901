"""Trade lists (`tollfree trades`, tollfree.trades) against the sweep, one for one, for HMA and
every built-in; the anchored and warmed-up walk-forward and the dated fold table, CLI and Python
the same bits, the warm-up against a model written here from a streaming handle's positions."""
import datetime
import io
import json
import subprocess

import numpy as np
import pandas as pd
import pytest

import tollfree
from tollfree import data, research, strategies
from tollfree._lib import bin_path
from conftest import DEADLINE  # noqa: E402

C = data.generate_close(5000, seed=7)
PARAMS = {"sma_cross": {"fast": 5, "slow": 30}, "ema_cross": {"fast": 4, "slow": 21},
          "donchian": {"window": 20}, "rsi": {"period": 14, "lower": 30, "upper": 70},
          "bollinger": {"window": 20, "k": 2.0}}


def bits(x):
    return np.float64(x).view(np.int64)


def run(*args, check=True):
    r = subprocess.run([bin_path(), *args], capture_output=True, text=True, timeout=DEADLINE)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def dated_csv(path, close, start=datetime.date(2015, 1, 1)):
    days = [(start + datetime.timedelta(days=i)).isoformat() for i in range(len(close))]
    path.write_text("date,close\n" + "".join(f"{d},{c!r}\n" for d, c in zip(days, close)))
    return pd.DatetimeIndex(days)


def closed(df):
    return df[df["open"] == 0]


@pytest.mark.parametrize("name", ["hma", *PARAMS])
@pytest.mark.parametrize("fee", [0.09, 0.0])
def test_trades_equal_the_sweep(name, fee):
    st = strategies.resolve(name)
    if name == "hma":
        df = tollfree.trades(C, 40, fee=fee)
        p = np.array([tollfree.grid.combo(40)], dtype=np.int64)
        s = tollfree.sweep_stats(C, p, fee=fee)
    else:
        df = tollfree.trades(C, strategy=name, params=PARAMS[name], fee=fee)
        p = np.array([[PARAMS[name][k] for k in st.param_names]], dtype=np.float64)
        s = tollfree.sweep_stats(C, p, fee=fee, strategy=name)
    c = closed(df)
    assert len(c) == s["trades"][0] > 0
    total = 0.0
    for r in c["ret"]:  # in order, from 0.0: pnl's bits
        total += r
    assert bits(total) == bits(s["pnl"][0])
    assert (c["ret"] > 0).sum() == s["wins"][0]
    assert bits(c["ret"].max()) == bits(s["best"][0])
    assert bits(c["ret"].min()) == bits(s["worst"][0])
    assert bits(df.attrs["pnl"]) == bits(s["pnl"][0])
    assert (df["entry_price"].to_numpy() == C[df["entry_bar"]]).all()
    assert (df["exit_price"].to_numpy() == C[df["exit_bar"]]).all()
    assert (df["bars"] == df["exit_bar"] - df["entry_bar"]).all()
    assert set(df["direction"]) <= {1, -1}
    assert df["open"].sum() <= 1 and (df["open"].sum() == 0 or df["open"].iloc[-1] == 1)


def test_cli_trades_csv_json_and_python_agree(tmp_path):
    f = tmp_path / "p.csv"
    idx = dated_csv(f, C[:800])
    csv = run("trades", "--input", str(f), "--combo", "30", "--quiet").stdout
    got = pd.read_csv(io.StringIO(csv), float_precision="round_trip")
    js = json.loads(run("trades", "--input", str(f), "--combo", "30", "--json", "--quiet").stdout)
    want = tollfree.trades(C[:800], 30, dates=idx)
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want) == len(js["rows"]) > 3
    for col in ("entry_price", "exit_price", "ret", "days"):
        g = got[col].to_numpy(dtype=np.float64).view(np.int64)
        assert (g == want[col].to_numpy().view(np.int64)).all()
        assert [bits(r[col]) for r in js["rows"]] == list(want[col].to_numpy().view(np.int64))
    for col in ("trade", "direction", "entry_bar", "exit_bar", "bars", "open"):
        assert (got[col].to_numpy() == want[col].to_numpy()).all()
    assert list(got["entry_date"]) == [d.date().isoformat() for d in want["entry_date"]]
    assert bits(js["pnl"]) == bits(want.attrs["pnl"]) and js["trades"] == want.attrs["trades"]
    # the sweep's row for that combo: the same pnl and trades
    sw = run("sweep", "--input", str(f), "--grid", "30:30:1", "--columns", "basic", "--quiet")
    row = sw.stdout.strip().splitlines()[1].split(",")
    assert bits(float(row[6])) == bits(js["pnl"]) and int(row[7]) == js["trades"]
    # a strategy by --params
    s = run("trades", "--input", str(f), "--strategy", "sma_cross", "--params",
            "fast=5,slow=30", "--quiet").stdout
    w = tollfree.trades(C[:800], strategy="sma_cross", params=[5, 30], dates=idx)
    assert len(pd.read_csv(io.StringIO(s), float_precision="round_trip")) == len(w)


@pytest.mark.parametrize("args,needle", [
    ([], "give one combo"),
    (["--combo", "5,5"], "six windows"),
    (["--combo", "10", "--strategy", "rsi"], "takes --params"),
    (["--strategy", "rsi", "--params", "n=3"], "unknown parameter 'n'"),
    (["--strategy", "sma_cross", "--params", "fast=1:5:1,slow=9"], "one value per parameter"),
    (["--combo", "10", "--fee", "-1"], "fee"),
])
def test_cli_trades_refusals(args, needle):
    r = run("trades", *args, check=False)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert run("trades", "--help").stdout.startswith("usage: tollfree trades")


def test_python_trades_refusals():
    with pytest.raises(ValueError, match="give one combo"):
        tollfree.trades(C)
    with pytest.raises(ValueError, match="lacks slow"):
        tollfree.trades(C, strategy="sma_cross", params={"fast": 3})
    with pytest.raises(ValueError, match="entries for"):
        tollfree.trades(C, 20, dates=pd.date_range("2020", periods=3))


def model_part(name, p, close, w0, s, e, fee):
    """A part [s, e) warmed up from w0: a streaming handle's positions, the book line."""
    h = (tollfree.Strategy(p, strategy=name) if name != "hma"
         else tollfree.Strategy(p.astype(np.int64)))
    pos, entry, pnl, trades = 0, 0.0, 0.0, 0
    for i in range(w0, e):
        want = h.on_bar(close[i])
        if i < s or want == pos:
            continue
        if pos:
            pnl += pos * (close[i] - entry) / entry * 100.0 - fee
            trades += 1
        pos, entry = want, close[i]
    return pnl, trades


@pytest.mark.parametrize("name", ["hma", "sma_cross", "rsi"])
@pytest.mark.parametrize("warmup", ["all", 150])
def test_warmup_against_the_model(name, warmup):
    close = C[:2400]
    if name == "hma":
        grid = tollfree.grid.grid(6, 60, 5)
        rows = [list(map(float, g)) for g in grid]
        wf = tollfree.walk_forward(close, grid, walk_forward=3, warmup=warmup, anchored=True)
        cols = ["L", "half", "sq", "p", "p3", "p2"]
    else:
        st = strategies.resolve(name)
        base = [PARAMS[name][k] for k in st.param_names]
        rows = [[v * (1 + j % 2) if k == 0 else v for k, v in enumerate(base)] for j in range(4)]
        grid = np.array(rows, dtype=np.float64)
        wf = tollfree.walk_forward(close, grid, walk_forward=3, warmup=warmup, strategy=name)
        cols = list(st.param_names)
    for _, f in wf.iterrows():
        vals = []
        for p in rows:
            per = []
            for s, e in ((f.is_start, f.is_end), (f.oos_start, f.oos_end)):
                w0 = 0 if warmup == "all" else max(0, s - warmup)
                per.append(model_part(name, np.array(p), close, w0, s, e, 0.09))
            vals.append(per)
        w = int(np.argmax([v[0][0] for v in vals]))
        assert [float(f[c]) for c in cols] == [float(x) for x in rows[w]]
        assert bits(f.is_pnl) == bits(vals[w][0][0]) and f.is_trades == vals[w][0][1]
        assert bits(f.oos_pnl) == bits(vals[w][1][0]) and f.oos_trades == vals[w][1][1]


@pytest.mark.parametrize("extra,kw", [
    (["--anchored"], {"anchored": True}),
    (["--warmup", "all"], {"warmup": "all"}),
    (["--warmup", "200", "--anchored", "--metric", "sharpe_per_trade"],
     {"warmup": 200, "anchored": True, "metric": "sharpe_per_trade"}),
    (["--warmup", "0"], {}),
])
def test_cli_walk_forward_dated_and_python_agree(tmp_path, extra, kw):
    f = tmp_path / "p.csv"
    close = C[:3000]
    idx = dated_csv(f, close)
    r = run("sweep", "--input", str(f), "--grid", "6:60:6", "--walk-forward", "3", "--threads",
            "1", *extra)
    got = pd.read_csv(io.StringIO(r.stdout), float_precision="round_trip")
    want = tollfree.walk_forward(close, research.parse_grid("6:60:6"), walk_forward=3, dates=idx,
                                 **kw)
    assert list(got.columns) == list(want.columns)
    assert list(got.columns[5:9]) == ["is_start_date", "is_end_date", "oos_start_date",
                                      "oos_end_date"]
    for col in want.columns:
        if col.endswith("_date"):
            assert list(got[col]) == [d.date().isoformat() for d in want[col]]
        elif want[col].dtype.kind == "f":
            g = got[col].to_numpy(dtype=np.float64).view(np.int64)
            assert (g == want[col].to_numpy().view(np.int64)).all(), col
        else:
            assert list(got[col]) == list(want[col]), col
    if kw.get("anchored"):
        assert (got["is_start"] == 0).all() and got["is_start_date"].iloc[-1] == "2015-01-01"
    assert got["oos_end_date"].iloc[-1] == idx[-1].date().isoformat()
    assert "(2015-01-01 to " in r.stderr  # the fold lines name their dates


def test_warmup_zero_is_the_cold_run_and_bad_values_refused():
    g = tollfree.grid.grid(6, 60, 4)
    a = tollfree.walk_forward(C, g, walk_forward=2)
    b = tollfree.walk_forward(C, g, walk_forward=2, warmup=0)
    pd.testing.assert_frame_equal(a, b)
    for bad in (-1, "some", 1.5, True):
        with pytest.raises(ValueError, match="warmup"):
            tollfree.walk_forward(C, g, walk_forward=2, warmup=bad)
    r = run("sweep", "--warmup", "all", check=False)
    assert r.returncode == 2 and "goes with --walk-forward" in r.stderr
    r = run("sweep", "--walk-forward", "2", "--warmup", "x", check=False)
    assert r.returncode == 2 and "--warmup wants" in r.stderr


def test_report_takes_anchored_warmup_and_min_trades(tmp_path):
    """The report's fold table is the walk-forward the options ask for (it runs its own: the
    options are passed on), and --min-trades leaves thin combos out of its ranked table."""
    f = tmp_path / "p.csv"
    dates = dated_csv(f, C)
    out = tmp_path / "r.html"
    run("sweep", "--input", str(f), "--grid", "6:40:2", "--walk-forward", "3", "--anchored",
        "--warmup", "200", "--min-trades", "5", "--report", str(out), "--static", "--quiet")
    page = out.read_text()
    g = tollfree.grid.grid(6, 40, 2)
    wf = tollfree.walk_forward(C, g, walk_forward=3, anchored=True, warmup=200, min_trades=5)
    assert len(wf) == 3 and (wf["is_start"] == 0).all()
    for r in wf.itertuples():  # anchored: every in-sample part starts at the first date
        assert f"{dates[0].date()} .. {dates[r.is_end - 1].date()}" in page
    assert "with at least 5 trades" in page
