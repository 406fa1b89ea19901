"""Hostile input over real sockets while well-behaved clients keep being served correctly.

Every test ends with ``good()``: a persistent Unix client, a persistent shared-memory client and
a fresh TCP client each get exact answers, and the server process is still alive.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

import numpy as np
import pytest

import tollfree
from tollfree import wire
from conftest import DEADLINE, wait_until  # noqa: E402

CLOSE = np.ascontiguousarray(100 + np.cumsum(np.random.default_rng(11).normal(size=2000)))
PARAMS = np.array([[9, 4, 3, 4, 1, 2], [21, 10, 4, 10, 3, 5]], np.int64)
WANT = tollfree.sweep(CLOSE, PARAMS)


def bits(a):
    return a.view(np.int64) if a.dtype == np.float64 else a


@pytest.fixture(scope="module")
def good(server):
    """Checks that well-behaved clients are still served exactly."""
    uc = tollfree.connect(server.url("unix"), timeout=DEADLINE)
    sc = tollfree.connect(server.url("shm"), timeout=DEADLINE)

    def check():
        assert server.alive(), server.log()[-2000:]
        for c in (uc, sc):
            p, t = c.sweep(CLOSE, PARAMS)
            assert np.array_equal(bits(p), bits(WANT[0])) and np.array_equal(t, WANT[1])
            e = c.echo(CLOSE[:100])
            assert np.array_equal(bits(e), bits(CLOSE[:100]))
        with tollfree.connect(server.url("tcp"), timeout=DEADLINE) as tc:
            p, t = tc.sweep(CLOSE, PARAMS)
            assert np.array_equal(bits(p), bits(WANT[0])) and np.array_equal(t, WANT[1])

    yield check
    uc.close()
    sc.close()


# ---- raw framing helpers ------------------------------------------------------------------------
def frame(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def v2(op: int, rid: int, payload: bytes = b"", version: int = 2, reserved: int = 0) -> bytes:
    return struct.pack("<BBHQ", op, version, reserved, rid) + payload


def v1(op: int, close, params, n_bars=None, n_combos=None) -> bytes:
    close = np.asarray(close, np.float64)
    params = np.asarray(params, np.int64).reshape(-1, 6)
    nb = close.shape[0] if n_bars is None else n_bars
    nc = params.shape[0] if n_combos is None else n_combos
    return struct.pack("<BII", op, nb, nc) + close.tobytes() + params.tobytes()


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        k = s.recv(n - len(buf))
        if not k:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += k
    return bytes(buf)


def read_frame(s: socket.socket) -> bytes:
    (n,) = struct.unpack("<I", recv_exact(s, 4))
    return recv_exact(s, n)


def expect_error(s: socket.socket, code: int | tuple, rid: int = 0) -> str:
    body = read_frame(s)
    assert len(body) >= 20 and body[0] == wire.ERROR, body[:32]
    op, ver, res, got_rid, got_code, mlen = struct.unpack_from("<BBHQiI", body)
    codes = code if isinstance(code, tuple) else (code,)
    assert got_code in codes, (got_code, body[20:].decode(errors="replace"))
    assert ver == 2 and res == 0 and got_rid == rid
    assert mlen == len(body) - 20 and mlen <= wire.MAX_ERROR_MSG
    return body[20:].decode()


def expect_closed(s: socket.socket, timeout: float = DEADLINE) -> None:
    s.settimeout(timeout)
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass


def still_works(s: socket.socket) -> None:
    """The same connection answers a valid request afterwards."""
    s.sendall(frame(v2(wire.ECHO, 77, b"12345678")))
    body = read_frame(s)
    assert body == v2(wire.ECHO, 77, b"12345678")


# ---- the cases ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_length_prefixes_zero_tiny_huge(server, good, kind):
    s = server.raw(kind)
    s.sendall(struct.pack("<I", 0))
    expect_error(s, wire.E_FRAME_TOO_SHORT)
    still_works(s)
    s.sendall(frame(b"\x10"))  # HELLO, one byte of body
    expect_error(s, wire.E_FRAME_TOO_SHORT)
    s.sendall(frame(b"\x00\x01\x00"))  # v1, three bytes
    expect_error(s, wire.E_FRAME_TOO_SHORT)
    s.sendall(frame(v2(wire.DROP, 5, b"\x01\x02\x03\x04")))  # DROP with half a handle
    expect_error(s, (wire.E_FRAME_TOO_SHORT, wire.E_LENGTH_MISMATCH), 5)
    still_works(s)
    s.close()
    for prefix in (0xFFFFFFFF, 0x80000000, wire.DEFAULT_MAX_FRAME + 1):
        s = server.raw(kind)
        s.sendall(struct.pack("<I", prefix))
        expect_error(s, wire.E_FRAME_TOO_LARGE)
        expect_closed(s)
        s.close()
    good()


def test_unknown_opcodes_and_bad_headers(server, good):
    s = server.raw("unix")
    for op in (0x02, 0x0F):
        s.sendall(frame(bytes([op]) + bytes(20)))
        expect_error(s, wire.E_UNKNOWN_OPCODE, 0)
    for op in (0x19, 0x24, 0x30, 0x7E, 0x80, 0xFF):
        s.sendall(frame(v2(op, 1000 + op, b"abc")))
        expect_error(s, wire.E_UNKNOWN_OPCODE, 1000 + op)
    s.sendall(frame(v2(wire.ERROR, 9, struct.pack("<iI", -1, 0))))  # a client-sent ERROR
    expect_error(s, wire.E_PROTOCOL, 9)
    s.sendall(frame(v2(wire.HELLO, 10, struct.pack("<II", 2, 0), version=3)))
    expect_error(s, wire.E_BAD_HEADER, 10)
    s.sendall(frame(v2(wire.HELLO, 11, struct.pack("<II", 2, 0), reserved=1)))
    expect_error(s, wire.E_BAD_HEADER, 11)
    s.sendall(frame(v2(wire.HELLO, 12, struct.pack("<II", 2, 0), version=1)))
    expect_error(s, wire.E_BAD_HEADER, 12)
    still_works(s)
    s.close()
    good()


def test_body_lengths_that_disagree(server, good):
    s = server.raw("unix")
    # v1: params missing, one byte extra, absurd counts with a tiny body
    s.sendall(frame(v1(0, CLOSE[:10], PARAMS)[:-48]))
    expect_error(s, wire.E_LENGTH_MISMATCH)
    s.sendall(frame(v1(0, CLOSE[:10], PARAMS) + b"\x00"))
    expect_error(s, wire.E_LENGTH_MISMATCH)
    s.sendall(frame(v1(1, [], [], n_bars=0xFFFFFFFF, n_combos=0xFFFFFFFF)))
    expect_error(s, wire.E_LENGTH_MISMATCH)
    s.sendall(frame(v1(0, CLOSE[:3], PARAMS, n_bars=4)))
    expect_error(s, wire.E_LENGTH_MISMATCH)
    # v2: counts that disagree with body_len, including 8 * n overflowing 64 bits
    s.sendall(frame(v2(wire.SWEEP, 21, struct.pack("<II", 11, 2) + CLOSE[:10].tobytes()
                       + PARAMS.tobytes())))
    expect_error(s, wire.E_LENGTH_MISMATCH, 21)
    s.sendall(frame(v2(wire.LOAD, 22, struct.pack("<Q", 1 << 61))))
    expect_error(s, wire.E_LENGTH_MISMATCH, 22)
    s.sendall(frame(v2(wire.LOAD, 23, struct.pack("<Q", (1 << 61) + 1) + bytes(8))))
    expect_error(s, wire.E_LENGTH_MISMATCH, 23)
    s.sendall(frame(v2(wire.SWEEP_DS, 24, struct.pack("<QII", 1, 0xFFFFFFFF, 0))))
    expect_error(s, wire.E_LENGTH_MISMATCH, 24)
    s.sendall(frame(v2(wire.STATS, 25, b"x")))
    expect_error(s, wire.E_LENGTH_MISMATCH, 25)
    s.sendall(frame(v2(wire.HELLO, 26, bytes(9))))
    expect_error(s, wire.E_LENGTH_MISMATCH, 26)
    s.sendall(frame(v2(wire.SESSION_BAR, 27, bytes(24))))
    expect_error(s, wire.E_LENGTH_MISMATCH, 27)
    s.sendall(frame(v2(wire.RUN_ONE, 28, bytes(40))))
    expect_error(s, (wire.E_FRAME_TOO_SHORT, wire.E_LENGTH_MISMATCH), 28)
    still_works(s)
    s.close()
    good()


def test_invalid_windows(server, good):
    s = server.raw("unix")
    bad = [(0, wire.E_WINDOW_TOO_SHORT), (-5, wire.E_WINDOW_TOO_SHORT),
           ((1 << 31) + 1, wire.E_WINDOW_TOO_LONG), (-(1 << 63), wire.E_WINDOW_TOO_SHORT)]
    for k, (w, code) in enumerate(bad):
        p = PARAMS.copy()
        p[1, k % 6] = w
        s.sendall(frame(v1(0, CLOSE[:50], p)))
        expect_error(s, code)
        s.sendall(frame(v2(wire.SWEEP, 40 + k, struct.pack("<II", 50, 2) + CLOSE[:50].tobytes()
                           + p.tobytes())))
        expect_error(s, code, 40 + k)
        s.sendall(frame(v2(wire.SESSION_OPEN, 50 + k, p[1].tobytes())))
        expect_error(s, code, 50 + k)
    s.sendall(frame(v2(wire.SESSION_OPEN, 60, struct.pack("<6q", (1 << 24) + 1, 1, 1, 1, 1, 1))))
    expect_error(s, wire.E_WINDOW_TOO_LONG, 60)
    # v1 echo ignores its params (docs/protocol.md)
    p = PARAMS.copy()
    p[0, 0] = 0
    s.sendall(frame(v1(1, CLOSE[:5], p)))
    assert read_frame(s) == CLOSE[:5].tobytes()
    # RUN_ONE on a real dataset with a bad window
    with tollfree.connect(server.url("unix")) as c:
        ds = c.load(CLOSE)
    s.sendall(frame(v2(wire.RUN_ONE, 61, struct.pack("<Q6q", ds.handle, 5, 0, 1, 1, 1, 1))))
    expect_error(s, wire.E_WINDOW_TOO_SHORT, 61)
    still_works(s)
    s.close()
    good()


def test_load_fd_without_or_with_bad_fds(server, good):
    import fcntl
    import os

    s = server.raw("unix")
    s.sendall(frame(v2(wire.LOAD_FD, 70, struct.pack("<QQ", 10, 0))))  # no fd attached
    expect_error(s, wire.E_BAD_FD, 70)
    for sealed, size, n in ((False, 80, 10), (True, 16, 10), (True, 16, 1 << 61)):
        fd = os.memfd_create("t", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        if sealed:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
        socket.send_fds(s, [frame(v2(wire.LOAD_FD, 71, struct.pack("<QQ", n, 0)))], [fd])
        os.close(fd)
        expect_error(s, wire.E_BAD_FD, 71)
    r, w = os.pipe()  # not a memfd at all
    socket.send_fds(s, [frame(v2(wire.LOAD_FD, 72, struct.pack("<QQ", 1, 0)))], [r])
    os.close(r)
    os.close(w)
    expect_error(s, wire.E_BAD_FD, 72)
    still_works(s)
    s.close()
    t = server.raw("tcp")
    t.sendall(frame(v2(wire.LOAD_FD, 73, struct.pack("<QQ", 1, 0))))
    expect_error(t, wire.E_BAD_FD, 73)
    t.close()
    good()


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_one_byte_at_a_time(server, good, kind):
    s = server.raw(kind)
    req = frame(v1(0, CLOSE[:60], PARAMS)) + frame(v2(wire.SWEEP, 5, struct.pack("<II", 60, 2)
                                                      + CLOSE[:60].tobytes() + PARAMS.tobytes()))
    for i in range(len(req)):
        s.sendall(req[i:i + 1])
        if i % 97 == 0:
            time.sleep(0.001)
    want = tollfree.sweep(CLOSE[:60], PARAMS)
    assert read_frame(s) == want[0].tobytes() + want[1].tobytes()
    body = read_frame(s)
    assert body == v2(wire.SWEEP, 5, struct.pack("<II", 2, 0) + want[0].tobytes() + want[1].tobytes())
    s.close()
    good()


def test_truncated_frames_and_disconnects(server, good):
    # the peer closes in the middle of a request
    for cut in (1, 3, 4, 9, 16, 500):
        s = server.raw("unix")
        s.sendall(frame(v1(0, CLOSE[:100], PARAMS))[:cut])
        s.close()
    s = server.raw("tcp")
    s.sendall(frame(v2(wire.LOAD, 1, struct.pack("<Q", 1000) + CLOSE[:500].tobytes())))
    s.close()
    # the peer closes in the middle of a reply (a 64 MB echo, a few bytes read)
    big = bytes(64 << 20)
    s = server.raw("unix")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(frame(v2(wire.ECHO, 2, big)))
    recv_exact(s, 100)
    s.close()
    # ... or right after asking for a long sweep (the worker's reply has nowhere to go)
    from tollfree.data import synthetic_close
    from tollfree.grid import default_grid

    c, p = synthetic_close(), default_grid()
    s = server.raw("unix")
    s.sendall(frame(v1(0, c, p)))
    s.close()
    s = server.raw("tcp")
    s.sendall(frame(v2(wire.SWEEP, 3, struct.pack("<II", c.shape[0], 80) + c.tobytes() + p.tobytes())))
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    good()


def test_stalled_clients_only_stall_themselves(server, good):
    stalled = []
    for part in (b"\x10", frame(v2(wire.ECHO, 1, bytes(1000)))[:300],
                 frame(v1(0, CLOSE[:100], PARAMS))[:7]):
        s = server.raw("unix")
        s.sendall(part)
        stalled.append(s)
    # a client that sends requests and never reads the replies
    hog = server.raw("unix", timeout=2)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

    def flood():
        msg = frame(v2(wire.ECHO, 9, bytes(1 << 20)))
        try:
            for _ in range(64):
                hog.sendall(msg)
        except OSError:
            pass  # blocked: the server stopped reading from us, as it should

    th = threading.Thread(target=flood, daemon=True)
    th.start()
    good()
    th.join(DEADLINE)
    good()
    for s in stalled:
        s.close()
    hog.close()
    good()


def test_stall_timeout_closes_a_stalled_connection(server_factory):
    srv = server_factory(tcp=False, shm=False, extra=["--stall-timeout", "1"])
    s = srv.raw("unix")
    s.sendall(frame(v2(wire.ECHO, 1, bytes(100)))[:50])
    expect_closed(s, timeout=DEADLINE)  # closed by the server after ~1 s (not by our timeout)
    s.close()
    idle = srv.raw("unix")  # idle *between* frames is never timed out
    time.sleep(1.5)
    still_works(idle)
    idle.close()
    srv.stop_and_check()


def test_hundred_concurrent_clients(server, good):
    n = 100
    barrier = threading.Barrier(n)
    errors = []

    def one(i):
        try:
            kind = "tcp" if i % 3 == 0 else "unix"
            with tollfree.connect(server.url(kind), timeout=DEADLINE) as c:
                barrier.wait(30)
                a = CLOSE[i:i + 50 + i]
                assert np.array_equal(bits(c.echo(a, out=np.empty_like(a))), bits(a))
                p, t = c.sweep(CLOSE[: 200 + i], PARAMS)
                w = tollfree.sweep(CLOSE[: 200 + i], PARAMS)
                assert np.array_equal(bits(p), bits(w[0])) and np.array_equal(t, w[1])
                if i % 10 == 0:
                    with c.session(PARAMS[0]) as ses:
                        for x in CLOSE[:50].tolist():
                            ses.on_bar(x)
        except BaseException as e:  # noqa: BLE001
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    # and 100 raw connections open at once, answered in any order of sending
    socks = [server.raw("unix" if i % 2 else "tcp") for i in range(n)]
    for i, s in enumerate(socks):
        s.sendall(frame(v2(wire.ECHO, i + 1, struct.pack("<Q", i))))
    for i, s in enumerate(reversed(socks)):
        j = n - 1 - i
        assert read_frame(s) == v2(wire.ECHO, j + 1, struct.pack("<Q", j))
        s.close()
    good()


def test_long_sweep_does_not_stall_small_calls(server, good):
    from tollfree.data import synthetic_close
    from tollfree.grid import default_grid

    close = synthetic_close()
    params = np.ascontiguousarray(np.tile(default_grid(), (20, 1)))  # 1,600 combos
    done = threading.Event()
    result = {}

    def long_call():
        with tollfree.connect(server.url("unix"), timeout=DEADLINE) as c:
            result["r"] = c.sweep(close, params)
        done.set()

    # No race against the clock: the server's own counters say what ran when. `sweeps` counts
    # finished sweeps; a stats reply taken after our small calls that still shows the long sweep
    # unfinished proves they were answered while it ran (a stalled server would answer them
    # only after it, with `sweeps` already counted).
    th = threading.Thread(target=long_call)
    with tollfree.connect(server.url("unix"), timeout=DEADLINE) as c:
        before = c.stats()
        polls = [0]

        def request_in():  # the long request's bytes (at least its params) have arrived
            polls[0] += 1
            got = c.stats()["bytes_in"] - before["bytes_in"] - 16 * polls[0]
            return got >= params.nbytes

        th.start()
        wait_until(request_in, "the long sweep's request to reach the server", poll=0.001)
        for _ in range(5):
            assert bits(c.echo(np.ones(4))).tobytes() == bits(np.ones(4)).tobytes()
        during = c.stats()
    th.join(DEADLINE)
    assert not th.is_alive(), f"deadline exceeded after {DEADLINE:g} s: the long sweep never ended"
    assert during["sweeps"] == before["sweeps"], \
        "small calls waited for another client's long sweep"
    want = tollfree.sweep(close, params)
    assert np.array_equal(bits(result["r"][0]), bits(want[0]))
    good()


def test_errors_are_counted(server):
    with tollfree.connect(server.url("unix")) as c:
        e0 = c.stats()["errors"]
        s = server.raw("unix")
        s.sendall(frame(v2(0x55, 1)))
        expect_error(s, wire.E_UNKNOWN_OPCODE, 1)
        s.close()
        assert c.stats()["errors"] >= e0 + 1
