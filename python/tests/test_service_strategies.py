"""The sweep service runs any strategy (docs/protocol.md, "Strategies"): a server started with every
built-in (``--strategy``), over unix, tcp and shm, against the in-process ``tf_sweep_with`` and
``tf_strategy_open_with`` (called through ctypes here, so that this file checks the service
against the library alone): raw bits of pnl, trades and every statistic, with a fee; live
sessions bar by bar; hostile frames answered with their error while the server serves others; a
``--strategy`` that cannot be loaded keeps the server from starting."""
from __future__ import annotations

import ctypes
import socket
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tollfree
from tollfree import wire
from tollfree._lib import bin_path, lib_path
from tollfree.binding import STAT_NAMES, STATS_DTYPE
from tollfree.client import Dataset
from tollfree.errors import SweepError
from conftest import DEADLINE, Server  # noqa: E402

BUILTINS = ("sma_cross", "ema_cross", "donchian", "rsi", "bollinger")
PARAM_NAMES = {"hma": None, "sma_cross": ("fast", "slow"), "ema_cross": ("fast", "slow"),
               "donchian": ("window",), "rsi": ("period", "lower", "upper"),
               "bollinger": ("window", "k")}
KINDS = ["unix", "tcp", "shm"]


# ---- the library, in process (ctypes: tf_sweep_with, tf_strategy_open_with) ------------------
class _Opts(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("threads", ctypes.c_int), ("isa", ctypes.c_int),
                ("max_bytes", ctypes.c_size_t), ("fee", ctypes.POINTER(ctypes.c_double)),
                ("stats", ctypes.c_void_p), ("progress", ctypes.c_void_p)]


_L = ctypes.CDLL(lib_path())
_L.tf_strategy_builtin.restype = ctypes.c_void_p
_L.tf_strategy_builtin.argtypes = [ctypes.c_char_p]
_L.tf_sweep_with.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                             ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.POINTER(_Opts)]
_L.tf_strategy_open_with.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                     ctypes.c_void_p]
_L.tf_strategy_step.argtypes = [ctypes.c_void_p, ctypes.c_double]
_L.tf_strategy_pnl.argtypes = [ctypes.c_void_p]
_L.tf_strategy_pnl.restype = ctypes.c_double
_L.tf_strategy_trades.argtypes = [ctypes.c_void_p]
_L.tf_strategy_trades.restype = ctypes.c_int64
_L.tf_strategy_close.argtypes = [ctypes.c_void_p]


_L.tf_combo_from_length.argtypes = [ctypes.c_int64, ctypes.c_void_p]


def combo_from_length(L: int) -> np.ndarray:
    out = np.empty(6, np.int64)
    assert _L.tf_combo_from_length(L, out.ctypes.data) == 0
    return out


_L.tf_strategy_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                               ctypes.c_size_t]
_L.tf_strategy_lib_def.restype = ctypes.c_void_p
_L.tf_strategy_lib_def.argtypes = [ctypes.c_void_p]
# The sample plugin (examples/plugin_sma.c), built beside the binary under test as
# tests/plugins/tfplug_sma.so; the server offers it as "plugin_sma".
PLUGIN = Path(bin_path()).resolve().parent / "tests" / "plugins" / "tfplug_sma.so"
_plugin = {}


def _def(name: str):
    if name == "plugin_sma":
        if "def" not in _plugin:
            lib, msg = ctypes.c_void_p(), ctypes.create_string_buffer(512)
            assert _L.tf_strategy_load(str(PLUGIN).encode(), ctypes.byref(lib), msg, 512) == 0, \
                msg.value
            _plugin["lib"], _plugin["def"] = lib, _L.tf_strategy_lib_def(lib)
        return _plugin["def"]
    d = _L.tf_strategy_builtin(name.encode())
    assert d, name
    return d


def ref_sweep(name, close, params, fee=None, stats=False):
    m = params.shape[0]
    pnl, trades = np.empty(m), np.empty(m, np.int64)
    rows = np.empty(m, STATS_DTYPE)
    f = ctypes.c_double(fee) if fee is not None else None
    o = _Opts(threads=1, fee=ctypes.pointer(f) if f is not None else None,
              stats=rows.ctypes.data if stats else None)
    rc = _L.tf_sweep_with(_def(name), close.ctypes.data, close.shape[0], params.ctypes.data, m,
                          pnl.ctypes.data, trades.ctypes.data, ctypes.byref(o))
    assert rc == 0, rc
    return pnl, trades, rows


def ref_stream(name, combo, closes):
    h = ctypes.c_void_p()
    p = np.ascontiguousarray(combo, np.float64)
    assert _L.tf_strategy_open_with(ctypes.byref(h), _def(name), p.ctypes.data) == 0
    try:
        pos = [_L.tf_strategy_step(h, float(x)) for x in closes]
        return pos, _L.tf_strategy_trades(h), _L.tf_strategy_pnl(h)
    finally:
        _L.tf_strategy_close(h)


# ---- data ---------------------------------------------------------------------------------------
def series(n=4000, seed=22) -> np.ndarray:
    r = np.random.default_rng(seed)
    c = 100.0 * np.exp(np.cumsum(r.normal(0, 0.01, n)))
    c[[i for i in (50, 51, 900) if i < n]] = np.nan
    if n > 2500:
        c[2500] = np.inf
    return np.ascontiguousarray(c)


def grid(name: str) -> np.ndarray:
    if name == "hma":
        return np.array([combo_from_length(L) for L in range(10, 70, 10)], np.float64)
    if name in ("sma_cross", "ema_cross", "plugin_sma"):
        return np.array([(f, s) for f in (1, 2, 7, 12) for s in (f + 1, f + 9, 40)], np.float64)
    if name == "donchian":
        return np.arange(1, 60, 6, dtype=np.float64).reshape(-1, 1)
    if name == "rsi":
        return np.array([(p, lo, 100 - lo) for p in (1, 2, 8, 20) for lo in (10, 30, 45)],
                        np.float64)
    return np.array([(w, k) for w in (2, 11, 30) for k in (0.5, 1.25, 2.0)], np.float64)


def bits(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.int64) if a.dtype == np.float64 else a


def same_rows(a, b) -> bool:
    return a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def srv(server_factory) -> Server:
    extra = []
    for n in BUILTINS:
        extra += ["--strategy", n]
    if PLUGIN.exists():
        extra += ["--strategy", str(PLUGIN)]
    return server_factory(extra=extra + ["--threads", "2"])


@pytest.fixture(params=KINDS)
def client(srv, request):
    c = tollfree.connect(srv.url(request.param), timeout=DEADLINE)
    yield c
    c.close()


# ---- the layouts match include/tollfree/wire.h ------------------------------------------------
def test_wire_constants_match_wire_h():
    import re
    text = (Path(__file__).resolve().parents[2] / "include" / "tollfree" / "wire.h").read_text()
    d = {k: int(v, 0) for k, v in re.findall(r"#define (TF_\w+) (0x[0-9A-Fa-f]+|\d+)u?\b", text)}
    assert wire.STRATEGIES == d["TF_OP_STRATEGIES"]
    assert wire.SWEEP_WITH == d["TF_OP_SWEEP_WITH"]
    assert wire.SESSION_OPEN_WITH == d["TF_OP_SESSION_OPEN_WITH"]
    assert wire.CAP_STRATEGIES == d["TF_CAP_STRATEGIES"]
    assert wire.MAX_PARAMS == d["TF_WIRE_MAX_PARAMS"]
    assert wire.MAX_NAME == d["TF_WIRE_MAX_NAME"]
    assert wire.STRATEGIES_REP.size == d["TF_WIRE_STRATEGIES_REPLY_FIXED"]
    assert wire.SWEEP_WITH_REQ.size == 32 and wire.SESSION_OPEN_WITH_REQ.size == 8
    assert len({wire.STRATEGIES, wire.SWEEP_WITH, wire.SESSION_OPEN_WITH}
               & set(k for k in wire.OPCODE_NAMES if wire.OPCODE_NAMES[k] not in
                     ("STRATEGIES", "SWEEP_WITH", "SESSION_OPEN_WITH"))) == 0


# ---- listing -------------------------------------------------------------------------------------
def test_hello_announces_and_strategies_lists(client):
    assert client.hello()["caps"] & wire.CAP_STRATEGIES
    got = client.strategies()
    assert list(got)[:6] == ["hma", *BUILTINS]
    for name, names in PARAM_NAMES.items():
        if names:
            assert got[name] == names
    assert len(got["hma"]) == 6


def _need_plugin():
    if not PLUGIN.exists():
        pytest.skip(f"{PLUGIN} not built (the tfplug_sma target; an installed binary has none)")


def test_plugin_served_like_a_builtin(client):
    _need_plugin()
    assert client.strategies()["plugin_sma"] == ("fast", "slow")
    close, params = series(), grid("plugin_sma")
    _, _, rows = ref_sweep("plugin_sma", close, params, fee=0.05, stats=True)
    st = client.sweep_stats(close, params, fee=0.05, strategy="plugin_sma")
    for k in STAT_NAMES:
        assert np.array_equal(bits(st[k]), bits(rows[k])), k
    pos, trades, pnl = ref_stream("plugin_sma", params[3], close[:800])
    with client.session(params[3], strategy="plugin_sma") as s:
        assert [s.on_bar(float(x)) for x in close[:800]] == pos
        q = s.query()
    assert q["trades"] == trades and struct.pack("<d", q["pnl"]) == struct.pack("<d", pnl)


# ---- sweeps equal the library -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hma", *BUILTINS])
def test_sweep_equals_tf_sweep_with(client, name):
    close, params = series(), grid(name)
    want = ref_sweep(name, close, params)
    pnl, trades = client.sweep(close, params, strategy=name)
    assert np.array_equal(bits(pnl), bits(want[0])) and np.array_equal(trades, want[1])
    ds = client.load(close)
    try:
        pnl, trades = client.sweep(ds, params, strategy=name)
        assert np.array_equal(bits(pnl), bits(want[0])) and np.array_equal(trades, want[1])
        # statistics and a fee, on the dataset and inline
        _, _, rows = ref_sweep(name, close, params, fee=0.05, stats=True)
        for data in (ds, close):
            st = client.sweep_stats(data, params, fee=0.05, strategy=name)
            for k in STAT_NAMES:
                assert np.array_equal(bits(st[k]), bits(rows[k])), (name, k)
        # a fee on a plain sweep
        pnl, trades = client.sweep(close, params, strategy=name, fee=0.0)
        w0 = ref_sweep(name, close, params, fee=0.0)
        assert np.array_equal(bits(pnl), bits(w0[0])) and np.array_equal(trades, w0[1])
    finally:
        client.drop(ds)


def test_sweep_with_no_combos(client):
    pnl, trades = client.sweep(series(100), np.empty((0, 2)), strategy="sma_cross")
    assert pnl.shape == (0,) and trades.shape == (0,)


def test_shm_small_ring_chunks_a_big_grid(srv):
    """A grid whose frame does not fit a 64 KiB ring goes as LOAD_FD + SWEEP_WITH in chunks."""
    close = series(20000)
    params = np.array([(f, s) for f in range(1, 40) for s in range(f + 1, f + 120)], np.float64)
    assert 8 * close.size + 16 * params.size > 64 << 10
    want = ref_sweep("sma_cross", close, params, fee=0.05, stats=True)
    with tollfree.connect(srv.url("shm"), timeout=DEADLINE, ring_bytes=64 << 10) as c:
        pnl, trades = c.sweep(close, params, strategy="sma_cross")
        w = ref_sweep("sma_cross", close, params)
        assert np.array_equal(bits(pnl), bits(w[0])) and np.array_equal(trades, w[1])
        st = c.sweep_stats(close, params, fee=0.05, strategy="sma_cross")
        for k in STAT_NAMES:
            assert np.array_equal(bits(st[k]), bits(want[2][k])), k
        assert c.stats()["datasets"] == 0  # the loaded series was dropped again


# ---- sessions equal the stream -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hma", *BUILTINS])
def test_session_equals_stream(client, name):
    close = series(1200)
    combo = grid(name)[2]
    pos, trades, pnl = ref_stream(name, combo, close)
    with client.session(combo, strategy=name) as s:
        got = [s.on_bar(float(x)) for x in close]
        q = s.query()
    assert got == pos
    assert q["trades"] == trades and q["bars"] == close.size
    assert struct.pack("<d", q["pnl"]) == struct.pack("<d", pnl)
    assert s.strategy == name and s.combo == tuple(float(v) for v in combo)


def test_session_refusals(client):
    with pytest.raises(SweepError) as e:
        client.session([9, 3], strategy="sma_cross")  # fast >= slow: init refuses
    assert e.value.code == wire.E_STRATEGY
    with pytest.raises(SweepError) as e:
        client.session([9, 3, 1], strategy="sma_cross")
    assert e.value.code == wire.E_STRATEGY and "takes 2 parameters" in e.value.message
    with pytest.raises(SweepError) as e:
        client.session([5], strategy="nosuch")
    assert e.value.code == wire.E_STRATEGY and "nosuch" in e.value.message
    client.echo(np.arange(4.0))  # the connection goes on


# ---- refusals through the client -----------------------------------------------------------------
def test_refusals_name_what_is_wrong(client):
    close = series(300)
    with pytest.raises(SweepError) as e:
        client.sweep(close, [[2, 5]], strategy="nosuch")
    assert e.value.code == wire.E_STRATEGY
    assert "'nosuch'" in e.value.message and "sma_cross" in e.value.message
    with pytest.raises(SweepError) as e:
        client.sweep(close, [[2, 5, 7]], strategy="sma_cross")
    assert "takes 2 parameters (fast, slow)" in e.value.message
    with pytest.raises(SweepError) as e:
        client.sweep(close, [[2, 5], [2, 9], [8, 3]], strategy="sma_cross")
    assert e.value.code == wire.E_STRATEGY and "2" in e.value.message
    with pytest.raises(SweepError) as e:
        client.sweep(Dataset(0x1234, 300), [[2, 5]], strategy="sma_cross")
    assert e.value.code == wire.E_UNKNOWN_DATASET
    # the client's own checks
    with pytest.raises(ValueError):
        client.sweep(close, np.empty((1, 65)), strategy="sma_cross")
    with pytest.raises(ValueError):
        client.sweep(close, [2, 5], strategy="sma_cross")
    with pytest.raises(TypeError):
        client.sweep(close, [[2, 5]], strategy=3)
    pnl, trades = client.sweep(close, [[2, 5]], strategy="sma_cross")  # still in sync
    assert trades.shape == (1,)


def test_hma_default_path_unchanged(client):
    """strategy=None keeps the original SWEEP / SWEEP_DS frames (and their results)."""
    close = series()
    p = np.array([combo_from_length(L) for L in (20, 40)], np.int64)
    a = client.sweep(close, p)
    b = client.sweep(close, p.astype(np.float64), strategy="hma")
    assert np.array_equal(bits(a[0]), bits(b[0])) and np.array_equal(a[1], b[1])


def test_spawn_offers_hma_only(srv):
    c = tollfree.connect(srv.url("spawn"), timeout=DEADLINE)
    assert list(c.strategies()) == ["hma"]
    close, params = series(500), grid("hma")
    want = ref_sweep("hma", close, params)
    pnl, trades = c.sweep(close, params, strategy="hma")
    assert np.array_equal(bits(pnl), bits(want[0])) and np.array_equal(trades, want[1])
    with pytest.raises(SweepError) as e:
        c.sweep(close, [[2, 5]], strategy="sma_cross")
    assert e.value.code == wire.E_STRATEGY


# ---- hostile frames on a raw socket --------------------------------------------------------------
def _frame(op, rid, payload: bytes) -> bytes:
    return wire.HDR.pack(12 + len(payload), op, wire.VERSION, 0, rid) + payload


def _sweep_with(rid, handle, n_bars, n_combos, k, name: bytes, name_len=None, tail=b"",
                flags=0) -> bytes:
    nl = len(name) if name_len is None else name_len
    fixed = wire.SWEEP_WITH_REQ.pack(handle, n_bars, n_combos, flags, k, nl)
    return _frame(wire.SWEEP_WITH, rid, fixed + name + bytes(-len(name) % 8) + tail)


def _reply(s: socket.socket):
    def exact(n):
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            assert chunk, "the server closed the connection"
            b += chunk
        return b
    (blen,) = struct.unpack("<I", exact(4))
    body = exact(blen)
    op, rid = body[0], struct.unpack_from("<Q", body, 4)[0]
    if op == wire.ERROR:
        code, mlen = struct.unpack_from("<iI", body, 12)
        return rid, code, body[20:20 + mlen].decode()
    return rid, 0, body


def _echo_ok(s, rid):
    s.sendall(_frame(wire.ECHO, rid, b"ping"))
    r = _reply(s)
    assert r[0] == rid and r[1] == 0 and r[2][12:] == b"ping"


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_hostile_frames_get_errors_and_others_are_served(srv, kind):
    close = struct.pack("<50d", *series(50).tolist())
    two = struct.pack("<2d", 3, 9)
    cases = [
        (_sweep_with(1, 0, 50, 1, 2, b"nosuch", tail=close + two), wire.E_STRATEGY, "'nosuch'"),
        (_sweep_with(2, 0, 50, 1, 3, b"sma_cross", tail=close + two + struct.pack("<d", 1)),
         wire.E_STRATEGY, "takes 2 parameters"),
        (_sweep_with(3, 0, 50, 1, 0, b"sma_cross", tail=close + two), wire.E_LENGTH_MISMATCH, ""),
        (_sweep_with(4, 0, 50, 1000, 2, b"sma_cross", tail=close + two),
         wire.E_LENGTH_MISMATCH, ""),
        (_sweep_with(5, 0, 50, 0xFFFFFFFF, 2, b"sma_cross", tail=close + two),
         wire.E_LENGTH_MISMATCH, ""),
        (_sweep_with(6, 0, 1 << 61, 1, 2, b"sma_cross", tail=close + two),
         wire.E_LENGTH_MISMATCH, ""),
        (_sweep_with(7, 0, 50, 1, 2, b"sma_cross", name_len=0xFFFFFFFF, tail=close + two),
         wire.E_LENGTH_MISMATCH, ""),
        (_sweep_with(8, 0, 50, 2, 2, b"sma_cross", tail=close + two + struct.pack("<2d", 9, 3)),
         wire.E_STRATEGY, "1"),
        (_sweep_with(9, 0, 50, 1, 2, b"sma_cross", tail=close + two, flags=8), wire.E_PROTOCOL, ""),
        (_frame(wire.SESSION_OPEN_WITH, 10, wire.SESSION_OPEN_WITH_REQ.pack(2, 9)
                + b"sma_cross" + bytes(7) + struct.pack("<3d", 3, 9, 1)),
         wire.E_LENGTH_MISMATCH, ""),
        (_frame(wire.SESSION_OPEN_WITH, 11, wire.SESSION_OPEN_WITH_REQ.pack(1, 9)
                + b"sma_cross" + bytes(7) + struct.pack("<d", 3)),
         wire.E_STRATEGY, "takes 2 parameters"),
    ]
    with srv.raw(kind) as s, tollfree.connect(srv.url("unix"), timeout=DEADLINE) as other:
        for i, (f, code, text) in enumerate(cases):
            s.sendall(f)
            rid, got, msg = _reply(s)
            assert (rid, got) == (i + 1, code), (i, got, msg)
            assert text in msg, (i, msg)
            _echo_ok(s, 100 + i)
            pnl, trades = other.sweep(series(200), [[3, 9]], strategy="sma_cross")
            w = ref_sweep("sma_cross", series(200), np.array([[3.0, 9.0]]))
            assert np.array_equal(bits(pnl), bits(w[0]))
        s.sendall(_sweep_with(99, 0, 50, 1, 2, b"sma_cross", tail=close + two))
        rid, got, body = _reply(s)
        assert (rid, got) == (99, 0) and len(body) == 12 + 8 + 16
    assert srv.alive()


def test_state_above_max_memory_is_refused_before_it_is_allocated(server_factory):
    """A combo whose state alone passes --max-memory (a window of 4 M bars: 32 MB) is LIMIT,
    named, before init runs on it; the connection and the server go on."""
    s = server_factory(extra=["--strategy", "sma_cross", "--max-memory", "16M"], tcp=False,
                       shm=False)
    with tollfree.connect(s.url("unix"), timeout=DEADLINE) as c:
        for call, code in (
                (lambda: c.sweep(series(100), [[2, 5], [1, 4_000_000]], strategy="sma_cross"),
                 wire.E_LIMIT),
                (lambda: c.session([1, 4_000_000], strategy="sma_cross"), wire.E_SESSION_LIMIT)):
            with pytest.raises(SweepError) as e:
                call()
            assert e.value.code == code
            assert "combo" in e.value.message and "bytes of state" in e.value.message
        pnl, trades = c.sweep(series(100), [[2, 5]], strategy="sma_cross")
        assert trades.shape == (1,)
    assert s.alive()


# ---- start-up ------------------------------------------------------------------------------------
@pytest.mark.parametrize("arg,says", [("/nonexistent/plugin.so", "/nonexistent/plugin.so"),
                                      ("nosuch_strategy", "nosuch_strategy"),
                                      ("tfplug_bad_abi.so", "ABI")])
def test_a_strategy_that_cannot_be_loaded_keeps_the_server_down(tmp_path, arg, says):
    if arg.startswith("tfplug"):
        arg = str(PLUGIN.parent / arg)
        if not Path(arg).exists():
            pytest.skip(f"{arg} not built")
    sock = tmp_path / "u.sock"
    r = subprocess.run([bin_path(), "serve", "--unix", str(sock), "--strategy", arg],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 2
    assert "--strategy" in r.stderr and says in r.stderr
    assert not sock.exists()


def test_help_names_the_option():
    r = subprocess.run([bin_path(), "serve", "--help"], capture_output=True, text=True,
                       timeout=DEADLINE)
    assert r.returncode == 0 and "--strategy NAME|PATH.so" in r.stdout
