"""The paper-trading loop: `tollfree paper` (C) and tollfree.paper.run (Python) trade a combo
through the order engine with the sweep's PnL and trade count, bit for bit, on the tick-rounded
series: combo 0 and ten random combos on the default data, a CSV, the journal replay, the half
spread, and the service (when `engine serve` is built). Deadlines only guard against hangs."""
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
          "kernel_pnl", "kernel_trades", "parity", "position")


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


def kernel(close, combo, tick=1e-4, fee=tollfree.binding.FEE_DEFAULT):
    px = np.rint(close / tick) * tick
    pnl, trades = tollfree.sweep(px, np.asarray([combo], dtype=np.int64), threads=1, fee=fee)
    return pnl[0], int(trades[0])


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def same_bits(a: float, b: float) -> bool:
    return bits(a) == bits(b)


def test_combo0_default_data_cli_and_python():
    kp, kt = kernel(default_close(), COMBO0)
    j = cli_json("--combo", "6,3,2,3,1,2")
    assert j["parity"] is True and j["bars"] == 150_000
    assert same_bits(j["pnl"], kp) and j["trades"] == kt
    assert same_bits(j["kernel_pnl"], kp) and j["kernel_trades"] == kt
    assert same_bits(j["stream_pnl"], kp) and j["stream_trades"] == kt
    assert j["orders"] == j["fills"] == kt + 1  # one order per position change, the last open
    r = paper.run(COMBO0, progress=False)
    assert r.parity and same_bits(r.pnl, kp) and r.trades == kt
    for k in FIELDS:
        assert getattr(r, k) == j[k], k
    assert r.state_hash == j["state_hash"]
    # every fill at its bar's rounded close
    ticks = np.rint(default_close() / 1e-4).astype(np.int64)
    fl = np.asarray(r.fill_log)
    assert (ticks[fl[:, 0]] == fl[:, 3]).all()


@pytest.mark.parametrize("combo", RANDOM_COMBOS, ids=[",".join(map(str, c)) for c in RANDOM_COMBOS])
def test_random_combos_default_data(combo):
    kp, kt = kernel(default_close(), combo)
    j = cli_json("--combo", ",".join(map(str, combo)))
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    r = paper.run(combo, progress=False)
    assert r.parity and same_bits(r.pnl, kp) and r.trades == kt
    assert r.state_hash == j["state_hash"] and r.commands == j["commands"]


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
    path, close = csv_case
    kp, kt = kernel(close, combo, tick=1e-5)
    j = cli_json("--combo", ",".join(map(str, combo)), "--input", path, "--column", "Close",
                 "--tick", "1e-5")
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    assert j["bars"] == 20_000 and j["tick"] == 1e-5
    r = paper.run(combo, tollfree.data.load_close(path, "Close"), tick=1e-5, progress=False)
    assert r.parity and same_bits(r.pnl, kp)
    assert r.state_hash == j["state_hash"]


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
    # the Python loop journals the same bytes
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


def test_half_spread(csv_case):
    path, close = csv_case
    kp, kt = kernel(close, COMBO0)
    j = cli_json("--combo", "6,3,2,3,1,2", "--input", path, "--column", "Close",
                 "--half-spread", "2")
    assert j["mode"] == "half_spread" and j["parity_expected"] is False
    assert j["kernel_pnl"] == kp and j["trades"] == kt  # same positions, worse prices
    assert j["spread_cost"] > 0 and j["pnl"] < kp
    # each closed trade pays the spread (2K ticks) once in and once out, roughly
    r = paper.run(COMBO0, close, half_spread=2, progress=False)
    for k in FIELDS:
        assert getattr(r, k) == j[k], k
    assert same_bits(r.spread_cost, j["spread_cost"])
    assert r.state_hash == j["state_hash"]


@pytest.mark.parametrize("fee", [0.0, 0.25, -0.01, 0.1 + 0.2])
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
    assert r.to_json()["fee"] == j["fee"] and r.state_hash == j["state_hash"]
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
    for bad_fee in ("nan", "inf", "x", ""):
        assert "--fee wants a finite number" in cli("--combo", "6", "--fee", bad_fee,
                                                    check_rc=2).stderr
    with pytest.raises(ValueError):
        paper.run(COMBO0, progress=False, fee=float("nan"))
    cli("--combo", "6", "--engine", "unix:/x", "--journal", str(tmp_path), check_rc=2)
    p = cli("--combo", "6", "--engine", f"unix:{tmp_path}/missing.sock", check_rc=2)
    assert "missing.sock" in p.stderr
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


# ---------------------------------------------------------------- through the service

@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    # Durability none: these tests are about the path and its parity; a group commit per round
    # trip would make 114,000 fsyncs per default-data run. Durability is the service tests' job
    # (tests/unit/test_engine_service.c: kill -9 trials under every level).
    s = engine_service(tmp_path_factory, instruments="1-2", durability="none")
    yield s
    s.kill()


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_service_parity_cli(svc, kind):
    kp, kt = kernel(default_close(), COMBO0)
    j = cli_json("--combo", "6,3,2,3,1,2", "--engine", svc.url(kind))
    assert j["parity"] is True and same_bits(j["pnl"], kp) and j["trades"] == kt
    assert j["venue_fills"] == j["fills"] and j["fills_dropped"] == 0


def test_service_parity_python_and_random_combos(svc, csv_case):
    path, close = csv_case
    for combo in [COMBO0] + RANDOM_COMBOS[:3]:
        kp, kt = kernel(close, combo)
        r = paper.run(combo, close, engine=svc.url("unix"), progress=False)
        assert r.parity and same_bits(r.pnl, kp) and r.trades == kt
        assert r.venue_fills == r.fills
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
