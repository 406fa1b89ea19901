"""The paper-trading loop: `tollfree paper` (C) and tollfree.paper.run (Python), two shells over
libtollfree's tf_paper_run, trade a combo through the order engine with the sweep's PnL and trade
count, bit for bit, on the tick-rounded series: combo 0 and ten random combos on the default data,
a CSV, the journal replay, the half spread, and the service (when `engine serve` is built). The
two shells give the same bits. The holes of issue 21: the default tick comes from the data (a
five-decimal file trades its own prices), a tick coarser than the data's is refused unless
asked, parity says what it checks (the rounded series, and the unrounded sweep beside it), and
the series options (--skip-bad-rows, ...) are accepted. Deadlines only guard against hangs."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import tollfree
from conftest import DEADLINE
from engine_service import engine_service
from tollfree import paper
from tollfree._lib import bin_path
from tollfree.data import default_close
from tollfree.grid import combo as combo_of

COMBO0 = (6, 3, 2, 3, 1, 2)
RNG = np.random.default_rng(20241201)
RANDOM_COMBOS = [tuple(int(v) for v in RNG.integers(1, 120, 6)) for _ in range(10)]
FIELDS = ("bars", "orders", "fills", "lots", "commands", "events", "pnl", "trades",
          "kernel_pnl", "kernel_trades", "parity", "position", "tick", "tick_source",
          "rounded_closes", "unrounded_pnl", "unrounded_trades", "unrounded_diff",
          "unrounded_parity")
TIMING = ("seconds", "bars_per_s")


def cli(*args, check_rc=0):
    p = subprocess.run([bin_path(), "paper", *args], capture_output=True, text=True,
                       timeout=DEADLINE)
    assert p.returncode == check_rc, p.stderr + p.stdout
    return p


def cli_json(*args, check_rc=0) -> dict:
    p = cli(*args, "--json", check_rc=check_rc)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stdout  # ONE JSON object
    return json.loads(lines[0])


def rounded(close, tick):
    """The series as traded, written here independently of the library: a decimal tick 1e-k
    gives round(close * 10^k) / 10^k (correctly rounded: a close with k decimals is itself),
    any other tick round(close / tick) * tick; half to even."""
    close = np.asarray(close, dtype=np.float64)
    for k in range(11):
        if tick == float(f"1e-{k}"):
            return np.rint(close * 10.0 ** k) / 10.0 ** k
    return np.rint(close / tick) * tick


def kernel(close, combo, tick=1e-4, fee=tollfree.binding.FEE_DEFAULT):
    """The sweep's (pnl, trades) for combo on the series rounded to tick (None: unrounded)."""
    px = np.asarray(close, dtype=np.float64) if tick is None else rounded(close, tick)
    pnl, trades = tollfree.sweep(px, np.asarray([combo], dtype=np.int64), threads=1, fee=fee)
    return pnl[0], int(trades[0])


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def same_bits(a: float, b: float) -> bool:
    return bits(a) == bits(b)


def same_summary(r: paper.PaperResult, j: dict) -> None:
    """The Python result and the CLI's JSON: the same keys, the same bits (timing aside)."""
    d = r.to_json()
    assert set(d) == set(j), set(d) ^ set(j)
    for k, v in d.items():
        if k in TIMING:
            continue
        if isinstance(v, float):
            assert same_bits(v, j[k]), (k, v, j[k])
        else:
            assert v == j[k], (k, v, j[k])


def write_csv(path, texts, header="date,close"):
    with open(path, "w") as f:
        f.write(header + "\n")
        for i, t in enumerate(texts):
            f.write(f"2020-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d},{t}\n"
                    if i < 86400 else f"{i},{t}\n")
    return str(path)


def test_combo0_default_data_cli_and_python():
    kp, kt = kernel(default_close(), COMBO0)
    j = cli_json("--combo", "6,3,2,3,1,2")
    assert j["parity"] is True and j["bars"] == 150_000
    # the default data is a generated random walk: no decimal tick fits, 0.0001 and rounded
    assert j["tick"] == 1e-4 and j["tick_source"] == "default"
    assert j["rounded_closes"] == 150_000 and j["unrounded_parity"] is False
    assert same_bits(j["pnl"], kp) and j["trades"] == kt
    assert same_bits(j["kernel_pnl"], kp) and j["kernel_trades"] == kt
    assert same_bits(j["stream_pnl"], kp) and j["stream_trades"] == kt
    up, ut = kernel(default_close(), COMBO0, tick=None)
    assert same_bits(j["unrounded_pnl"], up) and j["unrounded_trades"] == ut
    assert same_bits(j["unrounded_diff"], kp - up)
    assert j["orders"] == j["fills"] == kt + 1  # one order per position change, the last open
    r = paper.run(COMBO0, progress=False)
    assert r.parity and same_bits(r.pnl, kp) and r.trades == kt
    same_summary(r, j)
    s = json.loads(r.summary(as_json=True))  # the library's text, which the CLI printed
    assert {k: v for k, v in s.items() if k not in TIMING} == \
        {k: v for k, v in j.items() if k not in TIMING}
    # every fill at its bar's rounded close
    ticks = np.rint(default_close() * 1e4).astype(np.int64)
    fl = r.fill_log
    assert fl.shape == (r.fills, 4) and fl.dtype == np.int64
    assert (ticks[fl[:, 0]] == fl[:, 3]).all()
    assert same_bits(r.equity[-1], r.pnl) and r.mtm.shape == (150_000,)
    assert paper.tick_from_data(default_close()) == (1e-4, False)


@pytest.mark.parametrize("combo", RANDOM_COMBOS, ids=[",".join(map(str, c)) for c in RANDOM_COMBOS])
def test_random_combos_default_data(combo):
    kp, kt = kernel(default_close(), combo)
    j = cli_json("--combo", ",".join(map(str, combo)))
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    r = paper.run(combo, progress=False)
    assert r.parity and same_bits(r.pnl, kp) and r.trades == kt
    same_summary(r, j)


@pytest.fixture(scope="module")
def csv_case(tmp_path_factory):
    d = tmp_path_factory.mktemp("csv")
    rng = np.random.default_rng(7)
    close = 1.2345 * np.exp(np.cumsum(rng.normal(0, 0.0015, 20_000)))
    path = d / "prices.csv"
    with open(path, "w") as f:
        f.write("time,Close,volume\n")
        for i, c in enumerate(close):
            f.write(f"{i},{c!r},{i % 7}\n")
    return str(path), close


@pytest.mark.parametrize("combo", [COMBO0, (20, 10, 4, 10, 3, 5), (3, 1, 1, 2, 1, 1)])
def test_csv(csv_case, combo):
    """A given tick on 17-digit closes (no decimal tick fits them): accepted, and said."""
    path, close = csv_case
    kp, kt = kernel(close, combo, tick=1e-5)
    j = cli_json("--combo", ",".join(map(str, combo)), "--input", path, "--column", "Close",
                 "--tick", "1e-5")
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    assert j["bars"] == 20_000 and j["tick"] == 1e-5 and j["tick_source"] == "given"
    assert j["rounded_closes"] > 0
    r = paper.run(combo, tollfree.data.load_close(path, "Close"), tick=1e-5, progress=False)
    assert r.parity and same_bits(r.pnl, kp)
    same_summary(r, j)


def test_journal_replays_to_the_same_state(tmp_path, csv_case):
    path, _ = csv_case
    j = cli_json("--combo", "6", "--input", path, "--column", "Close", "--journal",
                 str(tmp_path / "c"))
    run = subprocess.run([bin_path(), "engine", "run", str(tmp_path / "c" / "commands.ofl"),
                          "--instruments", "1", "--quiet"], capture_output=True, text=True,
                         timeout=DEADLINE)
    assert run.returncode == 0, run.stderr
    replay = json.loads(run.stdout)
    assert replay["state_hash"] == j["state_hash"]
    assert replay["commands"] == j["commands"] and replay["events"] == j["events"]
    # Python journals the same bytes (the same loop)
    close = tollfree.data.load_close(path, "Close")
    r = paper.run(combo_of(6), close, journal=str(tmp_path / "py"), progress=False)
    assert r.state_hash == j["state_hash"]
    for name in ("commands.ofl", "events.ofl"):
        a = (tmp_path / "c" / name).read_bytes()
        b = (tmp_path / "py" / name).read_bytes()
        assert a == b, name
    # a directory that already holds a journal is refused
    p = cli("--combo", "6", "--input", path, "--column", "Close", "--journal",
            str(tmp_path / "c"), check_rc=2)
    assert "already holds" in p.stderr
    with pytest.raises(ValueError, match="already holds"):
        paper.run(combo_of(6), close, journal=str(tmp_path / "py"), progress=False)


def test_journal_keeps_its_instrument(tmp_path, csv_case):
    """`engine run` on a paper journal needs no --instruments: the list is stored beside it
    (before, instrument 7 replayed against the default 1-16 list gave another hash silently)."""
    path, _ = csv_case
    j = cli_json("--combo", "6", "--input", path, "--column", "Close", "--instrument", "7",
                 "--journal", str(tmp_path / "c"))
    run = subprocess.run([bin_path(), "engine", "run", str(tmp_path / "c" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert run.returncode == 0, run.stderr
    replay = json.loads(run.stdout)
    assert replay["instruments_from"] == "journal"
    assert replay["state_hash"] == j["state_hash"]
    assert replay["commands"] == j["commands"] and replay["events"] == j["events"]


def test_half_spread(csv_case):
    path, close = csv_case
    kp, kt = kernel(close, COMBO0)
    j = cli_json("--combo", "6,3,2,3,1,2", "--input", path, "--column", "Close",
                 "--half-spread", "2")
    assert j["mode"] == "half_spread" and j["parity_expected"] is False
    assert same_bits(j["kernel_pnl"], kp) and j["trades"] == kt  # same positions, worse prices
    assert j["spread_cost"] > 0 and j["pnl"] < kp
    r = paper.run(COMBO0, close, half_spread=2, progress=False)
    same_summary(r, j)
    assert same_bits(r.spread_cost, j["spread_cost"])


@pytest.mark.parametrize("fee", [0.0, 0.25, 0.1 + 0.2])
def test_fee(csv_case, fee):
    """--fee / fee=: the fills' PnL and the kernel's both use it, and still agree bit for bit."""
    path, close = csv_case
    combo = (20, 10, 4, 10, 3, 5)
    kp, kt = kernel(close, combo, tick=1e-5, fee=fee)
    j = cli_json("--combo", ",".join(map(str, combo)), "--input", path, "--column", "Close",
                 "--tick", "1e-5", "--fee", repr(fee))
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    assert same_bits(j["stream_pnl"], kp) and same_bits(j["fee"], fee)
    r = paper.run(combo, tollfree.data.load_close(path, "Close"), tick=1e-5, progress=False,
                  fee=fee)
    assert r.parity and same_bits(r.pnl, kp) and same_bits(r.stream_pnl, kp)
    same_summary(r, j)
    # the fee moves the PnL by exactly trades x (default - fee), up to rounding
    kd, _ = kernel(close, combo, tick=1e-5)
    assert abs((kp - kd) - kt * (tollfree.binding.FEE_DEFAULT - fee)) < 1e-9 * max(1, kt)


def test_usage_errors(tmp_path):
    assert "usage: tollfree paper" in cli("--help").stdout
    cli(check_rc=2)
    cli("--combo", "6,3,2", check_rc=2)
    cli("--combo", "6,3,2,3,1,0", check_rc=2)
    cli("--combo", "6", "--tick", "0", check_rc=2)
    cli("--combo", "6", "--half-spread", "0", check_rc=2)
    for bad_fee in ("nan", "inf", "x", "", "-0.01"):
        assert "--fee" in cli("--combo", "6", "--fee", bad_fee, check_rc=2).stderr
    with pytest.raises(ValueError):
        paper.run(COMBO0, progress=False, fee=float("nan"))
    with pytest.raises(ValueError, match="negative"):
        paper.run(COMBO0, progress=False, fee=-0.01)
    cli("--combo", "6", "--engine", "unix:/x", "--journal", str(tmp_path), check_rc=2)
    p = cli("--combo", "6", "--engine", f"unix:{tmp_path}/missing.sock", check_rc=2)
    assert "missing.sock" in p.stderr
    with pytest.raises(paper.PaperError, match="missing.sock"):
        paper.run(COMBO0, engine=f"unix:{tmp_path}/missing.sock", progress=False)
    bad = tmp_path / "neg.csv"
    bad.write_text("close\n1.0\n-2.0\n")
    assert "not a positive price" in cli("--combo", "6", "--input", str(bad), check_rc=2).stderr
    with pytest.raises(ValueError):
        paper.run((6, 3, 2), progress=False)
    with pytest.raises(ValueError):
        paper.run(COMBO0, np.array([1.0, -2.0]), progress=False)


def test_plot_through_the_cli(tmp_path, csv_case):
    path, _ = csv_case
    png = tmp_path / "eq.png"
    env = dict(os.environ, TOLLFREE_PYTHON=sys.executable)  # the interpreter with numpy
    p = subprocess.run([bin_path(), "paper", "--combo", "6", "--input", path, "--column", "Close",
                        "--plot", str(png), "--json"], capture_output=True, text=True,
                       timeout=DEADLINE, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["parity"] is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_text_equals_python_text(csv_case):
    """`tollfree paper` and `python3 -m tollfree.paper` (what --plot runs) print the same
    summary, line for line (the timing line aside)."""
    path, _ = csv_case
    args = ["--combo", "20,10,4,10,3,5", "--input", path, "--column", "Close", "--quiet"]
    c = cli(*args).stdout.splitlines()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    py = subprocess.run([sys.executable, "-m", "tollfree.paper", *args], capture_output=True,
                        text=True, timeout=DEADLINE, env=env)
    assert py.returncode == 0, py.stderr
    assert py.stdout.splitlines()[:-1] == c[:-1]
    assert any(ln.startswith("  parity against the rounded series: yes") for ln in c)


# ---------------------------------------------------------------- the holes of issue 21

@pytest.fixture(scope="module")
def eurusd(tmp_path_factory):
    """An EURUSD-like file: closes with five decimals, as a price file writes them."""
    rng = np.random.default_rng(11)
    m = 108_123 + np.cumsum(rng.integers(-12, 13, 30_000))
    texts = [f"{v / 1e5:.5f}" for v in m.tolist()]
    path = write_csv(tmp_path_factory.mktemp("fx") / "eurusd.csv", texts)
    return path, np.array([float(t) for t in texts])


@pytest.mark.parametrize("combo", [COMBO0, (20, 10, 4, 10, 3, 5), (40, 20, 6, 20, 7, 10)])
def test_default_tick_from_the_data(eurusd, combo):
    """Five decimals: the tick is 0.00001 and the run trades the file's own prices, so its pnl
    is the sweep's on the series as given, bit for bit. (Before: 0.0001 whatever the data; the
    closes lost their fifth decimal and the pnl was another series'.)"""
    path, close = eurusd
    up, ut = kernel(close, combo, tick=None)
    j = cli_json("--combo", ",".join(map(str, combo)), "--input", path)
    assert j["tick"] == 1e-5 and j["tick_source"] == "data"
    assert j["rounded_closes"] == 0 and j["unrounded_parity"] is True and j["parity"] is True
    assert same_bits(j["pnl"], up) and j["trades"] == ut and j["unrounded_diff"] == 0.0
    r = paper.run(combo, close, progress=False)
    same_summary(r, j)
    assert paper.tick_from_data(close) == (1e-5, True)
    # by definition: every close rounds to itself under that tick
    assert all(paper.price(q, 1e-5) == x
               for q, x in zip(paper.round_to_ticks(close[:2000], 1e-5).tolist(),
                               close[:2000].tolist()))


@pytest.fixture(scope="module")
def goog(tmp_path_factory):
    """A GOOG-like daily file: closes around 1,500 with two decimals, 2,148 bars."""
    rng = np.random.default_rng(5)
    m = 150_000 + np.cumsum(rng.integers(-2_500, 2_501, 2_148))
    texts = [f"{v / 100:.2f}" for v in m.tolist()]
    path = write_csv(tmp_path_factory.mktemp("goog") / "goog.csv", texts)
    return path, np.array([float(t) for t in texts])


def test_coarse_tick_refused_unless_asked(goog):
    """--tick 50 on two-decimal prices changes every close: refused (exit 2, saying what the
    rounding would change and what to do), unless --coarse-tick / coarse_tick=True, which trade
    the rounded series and say how far it is from the unrounded sweep. (Before: exit 0,
    "parity yes", and a pnl that was not the data's.)"""
    path, close = goog
    combo = (8, 4, 3, 4, 1, 2)
    p = cli("--combo", ",".join(map(str, combo)), "--input", path, "--tick", "50", check_rc=2)
    assert "--coarse-tick" in p.stderr and "0.01" in p.stderr and "goog.csv" in p.stderr
    assert "changes" in p.stderr and "bar 0" in p.stderr
    with pytest.raises(ValueError, match="coarse"):
        paper.run(combo, close, tick=50, progress=False)
    j = cli_json("--combo", ",".join(map(str, combo)), "--input", path, "--tick", "50",
                 "--coarse-tick")
    kp, kt = kernel(close, combo, tick=50.0)
    up, ut = kernel(close, combo, tick=None)
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    assert same_bits(j["unrounded_pnl"], up) and j["unrounded_trades"] == ut
    assert same_bits(j["unrounded_diff"], kp - up) and j["rounded_closes"] > 2000
    assert j["unrounded_parity"] is (same_bits(kp, up) and kt == ut)
    r = paper.run(combo, close, tick=50, coarse_tick=True, progress=False)
    same_summary(r, j)
    # the data's own tick, or any finer power of ten, trades the data itself
    for t in ("0.01", "0.001"):
        j = cli_json("--combo", ",".join(map(str, combo)), "--input", path, "--tick", t)
        assert j["rounded_closes"] == 0 and same_bits(j["pnl"], up)


def test_parity_says_what_it_checks(goog):
    path, close = goog
    t = cli("--combo", "6", "--input", path, "--tick", "50", "--coarse-tick", "--quiet").stdout
    assert "parity against the rounded series: yes (bit for bit)" in t
    assert "unrounded" in t and "the rounding changed" in t and "pnl - unrounded" in t
    t = cli("--combo", "6", "--input", path, "--quiet").stdout
    assert "tick   0.01 (from the data" in t and "the rounding changed no close" in t
    assert "--coarse-tick" in cli("--help").stdout


def test_series_options_accepted(tmp_path):
    """`paper` suggests --skip-bad-rows in its errors, and takes it (before: an unknown option),
    with the other series options."""
    texts = ["1.2345", "1.2350", "x", "1.2347"] + [f"{1.2 + 0.0001 * (i % 50):.4f}"
                                                   for i in range(400)]
    path = write_csv(tmp_path / "bad.csv", texts)
    p = cli("--combo", "6", "--input", path, check_rc=2)
    assert "--skip-bad-rows" in p.stderr
    j = cli_json("--combo", "6", "--input", path, "--skip-bad-rows")
    assert j["bars"] == len(texts) - 1 and j["parity"] is True and j["tick_source"] == "data"
    j2 = cli_json("--combo", "6", "--input", path, "--skip-bad-rows", "--date-column", "date")
    assert j2["pnl"] == j["pnl"]
    raw = tmp_path / "closes.dat"
    good = np.array([float(t) for t in texts if t != "x"])
    raw.write_bytes(good.astype("<f8").tobytes())
    j3 = cli_json("--combo", "6", "--input", str(raw), "--raw")
    assert same_bits(j3["pnl"], j["pnl"]) and j3["state_hash"] == j["state_hash"]
    semi = tmp_path / "semi.csv"
    semi.write_text("date;close\n" + "".join(f"2021-03-{1 + i // 24:02d} {i % 24:02d}:00;{t}\n"
                                              for i, t in enumerate(texts) if t != "x"))
    args = ["--combo", "6", "--input", str(semi), "--sep", ";", "--assume-sorted", "--json",
            "--quiet"]
    j4 = cli_json(*args[:-2])
    assert same_bits(j4["pnl"], j["pnl"]) and j4["bars"] == j["bars"]
    # the Python side (what --plot runs) takes the same options
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    py = subprocess.run([sys.executable, "-m", "tollfree.paper", *args], capture_output=True,
                        text=True, timeout=DEADLINE, env=env)
    assert py.returncode == 0, py.stderr
    assert same_bits(json.loads(py.stdout)["pnl"], j["pnl"])


def test_progress_callable():
    seen = []
    paper.run(COMBO0, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (150_000, 150_000)


# ---------------------------------------------------------------- through the service

@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    # Durability none: these tests are about the path and its parity; a group commit per round
    # trip would make up to 57,000 fsyncs per default-data run. Durability is the service tests'
    # job (tests/unit/test_engine_service.c: kill -9 trials under every level).
    s = engine_service(tmp_path_factory, instruments="1-2", durability="none")
    yield s
    s.kill()


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_service_parity_cli(svc, kind):
    kp, kt = kernel(default_close(), COMBO0)
    j = cli_json("--combo", "6,3,2,3,1,2", "--engine", svc.url(kind))
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    # the auction's counterparty sends on the strategy's connection: no unsolicited fills
    assert j["venue_fills"] == 0 and j["fills_dropped"] == 0
    assert "state_hash" not in j


def test_service_parity_python_and_random_combos(svc, csv_case):
    path, close = csv_case
    for combo in [COMBO0] + RANDOM_COMBOS[:3]:
        kp, kt = kernel(close, combo)
        r = paper.run(combo, close, engine=svc.url("unix"), progress=False)
        assert r.parity and same_bits(r.pnl, kp) and r.trades == kt
        assert r.venue_fills == 0 and r.fills_dropped == 0
        j = cli_json("--combo", ",".join(map(str, combo)), "--input", path, "--column", "Close",
                     "--engine", svc.url("tcp"), "--instrument", "2")
        assert j["parity"] is True and same_bits(j["pnl"], kp)


def test_service_half_spread(svc, csv_case):
    path, close = csv_case
    j = cli_json("--combo", "6", "--input", path, "--column", "Close", "--half-spread", "1",
                 "--engine", svc.url("unix"))
    local = cli_json("--combo", "6", "--input", path, "--column", "Close", "--half-spread", "1")
    for k in ("pnl", "trades", "orders", "fills", "commands", "spread_cost"):
        assert j[k] == local[k], k
    # the quoter's connection received every fill of its quotes as an unsolicited Trade
    assert j["venue_fills"] == j["fills"] > 0 and j["fills_dropped"] == 0


# ---------------------------------------------------------------- pipelined through the service

def test_service_window_gives_the_same_bits(svc, csv_case):
    """Changes in flight (max_inflight 1: one round trip per change; 3; the default 256): the
    fills are booked in the order they were made, so every output is the in-process run's, bit
    for bit: pnl, the fill log, and the per-bar equity and mtm (written once a bar's changes are
    booked)."""
    _, close = csv_case
    for combo in (COMBO0, RANDOM_COMBOS[0]):
        local = paper.run(combo, close, progress=False)
        for w in (1, 3, None):
            r = paper.run(combo, close, engine=svc.url("unix"), progress=False, max_inflight=w)
            assert r.parity and same_bits(r.pnl, local.pnl), (combo, w)
            for k in ("trades", "orders", "fills", "lots", "commands", "events", "position"):
                assert getattr(r, k) == getattr(local, k), (combo, w, k)
            assert np.array_equal(r.fill_log, local.fill_log), (combo, w)
            assert r.equity.tobytes() == local.equity.tobytes(), (combo, w)
            assert r.mtm.tobytes() == local.mtm.tobytes(), (combo, w)


def test_service_applies_the_in_process_commands(tmp_path_factory, csv_case):
    """The pipelined run sends the in-process run's commands in its order (the counterparty's
    order just before the strategy's, on one connection): a fresh service ends in the state the
    in-process engine ends in (same instrument list, same state hash)."""
    path, _ = csv_case
    args = ("--combo", "6,3,2,3,1,2", "--input", path, "--column", "Close")
    local = cli_json(*args)
    s = engine_service(tmp_path_factory, instruments="1", durability="none")
    try:
        j = cli_json(*args, "--engine", s.url("unix"))
    except BaseException:
        s.kill()
        raise
    summary = s.stop()
    assert same_bits(j["pnl"], local["pnl"])
    assert summary["commands"] == local["commands"] and summary["events"] == local["events"]
    assert summary["state_hash"] == local["state_hash"]


def test_max_inflight_refusals():
    for bad in ("0", "65537", "-1", "x"):
        p = cli("--combo", "6", "--max-inflight", bad, check_rc=2)
        assert "--max-inflight" in p.stderr
    for bad in (0, paper.MAX_INFLIGHT + 1):
        with pytest.raises(ValueError, match="max_inflight"):
            paper.run(COMBO0, engine="unix:/nonexistent.sock", max_inflight=bad, progress=False)
    # the constant is the header's
    from pathlib import Path
    h = (Path(__file__).resolve().parents[2] / "include" / "tollfree" / "paper.h").read_text()
    assert f"#define TF_PAPER_MAX_INFLIGHT {paper.MAX_INFLIGHT}" in h
    # in-process, the window changes nothing
    r = paper.run(COMBO0, progress=False, max_inflight=5)
    assert r.parity and r.state_hash == paper.run(COMBO0, progress=False).state_hash
