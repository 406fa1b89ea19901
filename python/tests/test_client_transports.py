"""Every transport (unix, tcp, shm, spawn) and the v1 client against the real server: results
bit-identical to the in-process call, datasets, echo, stats, errors, timeouts."""
from __future__ import annotations

import errno
import os
import socket
import threading

import numpy as np
import pytest

import tollfree
from tollfree import wire
from tollfree.client import Dataset, ShmClient
from tollfree.client._shm import ShmTransport
from tollfree.errors import SweepError, SweepTimeout
from conftest import DEADLINE  # noqa: E402

KINDS = ["unix", "tcp", "shm", "spawn"]


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return np.array_equal(a.view(np.int64) if a.dtype == np.float64 else a,
                          b.view(np.int64) if b.dtype == np.float64 else b)


def assert_same(got, want):
    assert bits_equal(got[0], want[0]), (got[0], want[0])
    assert bits_equal(got[1], want[1]), (got[1], want[1])


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


@pytest.fixture
def client(server, kind):
    c = tollfree.connect(server.url(kind), timeout=DEADLINE)
    yield c
    c.close()


def random_cases(n_cases=14, seed=1234):
    """Short series, length-1 windows, NaN/inf closes, 0/1/7 combos."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        n = int(rng.choice([0, 1, 2, 3, 7, 31, 200, 1500]))
        close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
        if i % 3 == 1 and n > 4:
            idx = rng.choice(n, size=min(n, 3), replace=False)
            close[idx] = rng.choice([np.nan, np.inf, -np.inf], size=len(idx))
        m = [0, 1, 7][i % 3]
        hi = max(2, min(n + 3, 120))
        params = rng.integers(1, hi, size=(m, 6), dtype=np.int64)
        if m and i % 2 == 0:
            params[0] = 1  # all length-1 windows
        cases.append((np.ascontiguousarray(close, np.float64), np.ascontiguousarray(params)))
    return cases


CASES = random_cases()


def test_default_sweep_bit_identical(client, kind, default_case):
    close, params, pnl, trades = default_case
    assert_same(client.sweep(close, params), (pnl, trades))
    if kind == "spawn":
        return
    ds = client.load(close)
    assert ds.n_bars == close.shape[0]
    assert_same(client.sweep(ds, params), (pnl, trades))
    out = (np.empty_like(pnl), np.empty_like(trades))
    got = client.sweep(ds, params, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    assert_same(got, (pnl, trades))
    for j in (0, 41, 79):
        p, t = client.run_one(ds, params[j])
        assert np.float64(p).view(np.int64) == pnl[j].view(np.int64) and t == trades[j]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_random_cases_bit_identical(server, case):
    close, params = CASES[case]
    # validate=False: the service sweeps NaN/inf by the kernel's rules; so must the reference.
    want = tollfree.sweep(close, params, validate=False)
    for kind in KINDS:
        with tollfree.connect(server.url(kind), timeout=DEADLINE) as c:
            assert_same(c.sweep(close, params), want)
            if kind != "spawn" and close.shape[0]:
                ds = c.load(close)
                assert_same(c.sweep(ds, params), want)
                for j in range(params.shape[0]):
                    p, t = c.run_one(ds, params[j])
                    assert np.float64(p).view(np.int64) == want[0][j].view(np.int64)
                    assert t == want[1][j]
        with tollfree.v1.Client(server.url(kind), timeout=DEADLINE) as v:
            assert_same(v.sweep(close, params), want)
            assert bits_equal(v.echo(close), close)


@pytest.mark.parametrize("kind1", KINDS)
def test_v1_default_sweep(server, kind1, default_case):
    close, params, pnl, trades = default_case
    with tollfree.v1.Client(server.url(kind1), timeout=DEADLINE) as v:
        assert_same(v.sweep(close, params), (pnl, trades))
        assert bits_equal(v.echo(close), close)
        assert_same(v.sweep(close, params[:3]), (pnl[:3], trades[:3]))  # same connection again


def test_v1_client_takes_a_plain_path(server):
    close = np.linspace(100, 110, 300)
    params = np.array([[10, 5, 3, 5, 2, 2]], np.int64)
    with tollfree.v1.Client(server.unix_path) as v:
        assert_same(v.sweep(close, params), tollfree.sweep(close, params))


def test_echo(client, kind):
    rng = np.random.default_rng(7)
    for n in (0, 1, 8, 1000, 150_000):
        a = rng.normal(size=n)
        a[:: max(1, n // 5)] = np.nan
        r = client.echo(a)
        assert bits_equal(r, a)
    b = np.frombuffer(bytes(range(256)) * 3, np.uint8)[:517]
    assert np.array_equal(client.echo(b), b)
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert np.array_equal(client.echo(i), i)
    out = np.empty(1000)
    a = rng.normal(size=1000)
    assert client.echo(a, out=out) is out and bits_equal(out, a)
    with pytest.raises(ValueError):
        client.echo(a, out=np.empty(10))


def test_echo_reuses_its_buffer(server):
    with tollfree.connect(server.url("unix")) as c:
        a = np.arange(100.0)
        r1 = c.echo(a)
        r2 = c.echo(a + 1)
        assert r1 is r2 and bits_equal(r2, a + 1)


def test_hello_and_caps(server, kind):
    with tollfree.connect(server.url(kind), timeout=DEADLINE) as c:
        h = c.hello()
    assert h["version"] == 2
    assert h["caps"] & (wire.CAP_DATASETS | wire.CAP_SESSIONS) == 3
    assert bool(h["caps"] & wire.CAP_LOAD_FD) == (kind in ("unix", "shm"))
    assert h["max_frame"] == wire.DEFAULT_MAX_FRAME
    assert h["max_datasets"] == 64  # serve's default (--max-datasets)
    assert h["threads"] >= 1 and h["max_memory"] > 0  # all cores / a share of RAM: the machine's


def fnv1a64(close: np.ndarray) -> int:
    """docs/protocol.md: FNV-1a 64 over u64 words (n_bars, then each close's bits)."""
    h = 0xCBF29CE484222325
    words = [close.shape[0]] + close.astype("<f8").view("<u8").tolist()
    for w in words:  # small inputs only
        h = ((h ^ w) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h or 1


def test_datasets_are_content_addressed_and_shared(server):
    rng = np.random.default_rng(99)
    close = 50 + np.cumsum(rng.normal(size=777))
    params = np.array([[8, 4, 3, 4, 1, 2], [30, 15, 5, 15, 5, 8]], np.int64)
    want = tollfree.sweep(close, params)
    with tollfree.connect(server.url("unix")) as a, tollfree.connect(server.url("tcp")) as b, \
            tollfree.connect(server.url("shm")) as s:
        d1 = a.load(close)
        assert d1.created and d1.handle == fnv1a64(close)
        d2 = b.load(close.copy())
        assert d2 == d1 and not d2.created
        d3 = s.load(close)  # LOAD_FD: a sealed memfd, same bytes, same handle
        assert d3 == d1 and not d3.created
        d4 = a.load(close, via_fd=True)
        assert d4 == d1 and not d4.created
        assert_same(b.sweep(d1, params), want)  # loaded by another connection
        assert_same(s.sweep(d1, params), want)
        before = a.stats()
        a.drop(d1)
        after = a.stats()
        assert after["datasets"] == before["datasets"] - 1
        for c in (a, b, s):
            with pytest.raises(SweepError) as ei:
                c.sweep(d1, params)
            assert ei.value.code == wire.E_UNKNOWN_DATASET
            with pytest.raises(SweepError) as ei:
                c.run_one(d1, params[0])
            assert ei.value.code == wire.E_UNKNOWN_DATASET
            assert_same(c.sweep(close, params), want)  # the connection is still fine
        d5 = s.load(close)  # created again, now through the fd path
        assert d5 == d1 and d5.created
        assert_same(a.sweep(d5, params), want)
        s.drop(d5)
        with pytest.raises(SweepError) as ei:
            a.drop(Dataset(d5.handle ^ 1, 1))
        assert ei.value.code == wire.E_UNKNOWN_DATASET


def test_load_fd_needs_a_unix_socket(server):
    with tollfree.connect(server.url("tcp")) as c:
        with pytest.raises(SweepError) as ei:
            c.load(np.ones(5), via_fd=True)
        assert ei.value.code == wire.E_BAD_FD


def test_stats_count_requests(server):
    with tollfree.connect(server.url("unix")) as c:
        s0 = c.stats()
        assert set(s0) == set(wire.STATS_FIELDS)
        c.echo(np.ones(3))
        c.sweep(np.linspace(1, 2, 50), np.array([[5, 3, 2, 3, 1, 2]] * 4, np.int64))
        s1 = c.stats()
        # Only this connection talks to the server meanwhile: echo, sweep and the second STATS.
        assert s1["requests"] == s0["requests"] + 3
        assert s1["sweeps"] == s0["sweeps"] + 1 and s1["combos"] == s0["combos"] + 4
        # Earlier tests' connections may still be closing on the server: at least this one.
        assert s1["connections_open"] >= 1 and s1["connections_total"] >= 1
        assert s1["bytes_in"] > s0["bytes_in"] and s1["bytes_out"] > s0["bytes_out"]
        assert s1["uptime_ns"] > s0["uptime_ns"]


def test_server_errors_keep_the_connection(server, kind):
    if kind == "spawn":
        pytest.skip("no session over spawn")
    with tollfree.connect(server.url(kind), timeout=DEADLINE) as c:
        with pytest.raises(SweepError) as ei:
            c.session([(1 << 24) + 1, 1, 1, 1, 1, 1])
        assert ei.value.code == wire.E_WINDOW_TOO_LONG and ei.value.message
        with pytest.raises(SweepError) as ei:
            c.sweep(Dataset(12345, 10), np.ones((1, 6), np.int64))
        assert ei.value.code == wire.E_UNKNOWN_DATASET
        bogus = tollfree.client.Session(c, 987654321, [1] * 6)
        with pytest.raises(SweepError) as ei:
            bogus.on_bar(1.0)
        assert ei.value.code == wire.E_UNKNOWN_SESSION
        with pytest.raises(SweepError) as ei:
            bogus.query()
        assert ei.value.code == wire.E_UNKNOWN_SESSION
        assert not c.closed
        assert bits_equal(c.echo(np.arange(4.0)), np.arange(4.0))


def test_big_sweep_over_a_small_shm_ring(server, default_case):
    """A frame that does not fit the ring goes as LOAD_FD + SWEEP_DS (in chunks)."""
    close, params, pnl, trades = default_case
    many = np.ascontiguousarray(np.tile(params[:5], (300, 1)))  # 1500 combos: 72 KB of params
    with tollfree.connect(server.url("shm"), ring_bytes=64 << 10) as c:
        assert_same(c.sweep(close, params), (pnl, trades))
        got = c.sweep(close[:1000], many)
        assert_same(got, tollfree.sweep(close[:1000], many))
        with pytest.raises(SweepError) as ei:
            c.echo(np.ones(10_000))
        assert ei.value.code == wire.E_SHM_TOO_BIG
        assert bits_equal(c.echo(np.ones(100)), np.ones(100))  # nothing was sent


def test_shm_ring_wraps(server):
    rng = np.random.default_rng(3)
    with tollfree.connect(server.url("shm"), ring_bytes=64 << 10, spin=100) as c:
        for i in range(400):
            a = rng.normal(size=int(rng.integers(0, 7000)))
            assert bits_equal(c.echo(a, out=np.empty_like(a)), a)
        close = rng.normal(size=3000).cumsum() + 100
        params = np.array([[12, 6, 3, 6, 2, 3]], np.int64)
        want = tollfree.sweep(close, params)
        for i in range(20):
            assert_same(c.sweep(close, params), want)


def test_shm_spin_zero_sleeps_on_the_futex(server):
    with tollfree.connect(server.url("shm"), spin=0, timeout=DEADLINE) as c:
        for _ in range(50):
            assert bits_equal(c.echo(np.arange(3.0)), np.arange(3.0))
        close = np.linspace(100, 101, 20_000)
        p = np.array([[50, 25, 7, 25, 8, 12]], np.int64)
        assert_same(c.sweep(close, p), tollfree.sweep(close, p))


def test_closed_client_raises(server, kind):
    c = tollfree.connect(server.url(kind))
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(SweepError) as ei:
        c.echo(np.ones(2))
    assert ei.value.code == -errno.EBADF


# ---- timeouts and dead peers (hand-written fake peers, inside the tests) -------------------------
def _silent_unix_server(path):
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(4)
    held = []

    def run():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            held.append(c)  # never answers

    threading.Thread(target=run, daemon=True).start()
    return ls, held


def test_timeout_raises_engine_timeout(tmp_path):
    path = str(tmp_path / "silent.sock")
    ls, held = _silent_unix_server(path)
    try:
        c = tollfree.connect(f"unix:{path}", timeout=0.2)
        with pytest.raises(SweepTimeout) as ei:
            c.hello()
        assert isinstance(ei.value, socket.timeout) and ei.value.code == -errno.ETIMEDOUT
        assert c.closed
        with pytest.raises(SweepTimeout):
            tollfree.v1.Client(path, timeout=0.2).echo(np.ones(3))
    finally:
        ls.close()
        for s in held:
            s.close()


def _fake_shm_server(path, behaviour):
    """Accepts one shm handshake, answers status 0, then ``behaviour(conn)``."""
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)
    state = {}

    def run():
        c, _ = ls.accept()
        msg, fds, _, _ = socket.recv_fds(c, 64, 4)
        for fd in fds:
            os.close(fd)
        c.sendall(wire.SHM_HELLO_REP.pack(0, os.getpid()))
        state["conn"] = c
        behaviour(c)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return ls, state, th


def test_shm_timeout_and_dead_peer(tmp_path):
    path = str(tmp_path / "shm-silent.sock")
    ls, st, th = _fake_shm_server(path, lambda c: None)
    with pytest.raises(SweepTimeout):  # connect() asks HELLO first
        tollfree.connect(f"shm:{path}", timeout=0.3, spin=1000)
    th.join()
    st["conn"].close()
    ls.close()

    path = str(tmp_path / "shm-silent2.sock")
    ls, st, th = _fake_shm_server(path, lambda c: None)
    c = ShmClient(ShmTransport(path, timeout=0.3, spin=1000), "shm:fake")
    with pytest.raises(SweepTimeout):
        c.echo(np.ones(2))
    assert c.closed
    th.join()
    st["conn"].close()
    ls.close()

    path2 = str(tmp_path / "shm-dies.sock")
    ls, st, th = _fake_shm_server(path2, lambda conn: threading.Timer(0.2, conn.close).start())
    c = ShmClient(ShmTransport(path2, spin=1000), "shm:fake")  # no timeout: still detected
    with pytest.raises(SweepError) as ei:
        c.echo(np.ones(2))
    assert ei.value.code == wire.E_SHM_PEER_GONE
    ls.close()


def test_shm_handshake_refused(tmp_path):
    path = str(tmp_path / "shm-refuse.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)

    def run():
        c, _ = ls.accept()
        _, fds, _, _ = socket.recv_fds(c, 64, 4)
        for fd in fds:
            os.close(fd)
        c.sendall(wire.SHM_HELLO_REP.pack(wire.E_SHM_LIMIT, 0))
        c.close()

    threading.Thread(target=run, daemon=True).start()
    with pytest.raises(SweepError) as ei:
        tollfree.connect(f"shm:{path}", timeout=DEADLINE)
    assert ei.value.code == wire.E_SHM_LIMIT
    ls.close()


def test_frame_limit(server_factory):
    srv = server_factory(tcp=False, extra=["--max-frame", "1M"])
    close = np.ones(200_000)  # 1.6 MB
    params = np.array([[5, 3, 2, 3, 1, 2]], np.int64)
    with tollfree.connect(srv.url("unix"), timeout=DEADLINE) as c:
        with pytest.raises(SweepError) as ei:  # the server refuses and closes
            c.sweep(close, params)
        assert ei.value.code == wire.E_FRAME_TOO_LARGE
        assert c.closed
    with tollfree.connect(srv.url("unix"), timeout=DEADLINE) as c:
        assert c.hello()["max_frame"] == 1 << 20
        with pytest.raises(SweepError) as ei:  # known limit: refused before sending
            c.sweep(close, params)
        assert ei.value.code == wire.E_FRAME_TOO_LARGE and not c.closed
        ds = c.load(close, via_fd=True)  # a dataset by fd is not bounded by the frame
        assert_same(c.sweep(ds, params), tollfree.sweep(close, params))
    with tollfree.connect(srv.url("shm"), timeout=DEADLINE) as c:
        assert_same(c.sweep(close, params), tollfree.sweep(close, params))  # LOAD_FD path
    srv.stop_and_check()
