"""Hostile shared-memory peers: bad handshakes, garbage ring positions and lengths, a peer that
dies or stops reading. The server drops only that peer; everyone else keeps being served."""
from __future__ import annotations

import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import tollfree
from tollfree import wire
from tollfree.client import _shm
from tollfree.client._shm import ShmTransport
from tollfree.errors import SweepError, SweepTimeout
from conftest import DEADLINE, wait_until  # noqa: E402

CLOSE = np.ascontiguousarray(100 + np.cumsum(np.random.default_rng(5).normal(size=1500)))
PARAMS = np.array([[7, 4, 3, 4, 1, 2], [33, 16, 6, 16, 5, 8]], np.int64)
WANT = tollfree.sweep(CLOSE, PARAMS)
RING = 64 << 10


def bits(a):
    return a.view(np.int64) if a.dtype == np.float64 else a


@pytest.fixture(scope="module")
def good(server):
    uc = tollfree.connect(server.url("unix"), timeout=DEADLINE)
    sc = tollfree.connect(server.url("shm"), timeout=DEADLINE)

    def check():
        assert server.alive(), server.log()[-2000:]
        with tollfree.connect(server.url("shm"), timeout=DEADLINE, ring_bytes=RING) as fresh:
            for c in (uc, sc, fresh):
                p, t = c.sweep(CLOSE, PARAMS)
                assert np.array_equal(bits(p), bits(WANT[0])) and np.array_equal(t, WANT[1])
                assert np.array_equal(bits(c.echo(CLOSE[:64])), bits(CLOSE[:64]))

    yield check
    uc.close()
    sc.close()


# ---- handshakes ---------------------------------------------------------------------------------
def _memfd(total, seals=fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW, ring=RING, magic=wire.SHM_MAGIC):
    fd = os.memfd_create("hostile", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, total)
    os.pwrite(fd, struct.pack("<IIQI", magic, 1, ring, os.getpid()), 0)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def _handshake(server, msg: bytes, fd: int | None) -> int | None:
    """Sends one handshake; returns the status the server answered (None: closed, no answer)."""
    s = server.raw("shm", timeout=DEADLINE)
    try:
        if fd is None:
            s.sendall(msg)
        else:
            socket.send_fds(s, [msg], [fd])
            os.close(fd)
        buf = b""
        while len(buf) < 8:
            k = s.recv(8 - len(buf))
            if not k:
                return None
            buf += k
        status, _ = struct.unpack("<iI", buf)
        return status
    except ConnectionResetError:
        return None
    finally:
        s.close()


def test_bad_handshakes(server, good):
    total = wire.SHM_CTRL_BYTES + 2 * RING
    hello = wire.SHM_HELLO.pack
    cases = [
        (hello(0xDEADBEEF, 1, RING, total), _memfd(total), wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 9, RING, total), _memfd(total), wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 1, RING, total), None, wire.E_BAD_FD),
        (hello(wire.SHM_MAGIC, 1, RING, total), _memfd(total, seals=0), wire.E_BAD_FD),
        (hello(wire.SHM_MAGIC, 1, RING, total + 4096), _memfd(total), wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 1, RING + 8, total + 16), _memfd(total + 16, ring=RING + 8),
         wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 1, 4096, 4096 * 3), _memfd(4096 * 3, ring=4096), wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 1, 1 << 62, total), _memfd(total), wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 1, RING, total), _memfd(total, magic=1), wire.E_SHM_HANDSHAKE),
        (hello(wire.SHM_MAGIC, 1, RING, total), _memfd(total, ring=2 * RING), wire.E_SHM_HANDSHAKE),
    ]
    for msg, fd, code in cases:
        status = _handshake(server, msg, fd)
        assert status == code, (status, code)
    # a fd that is not a memfd at all
    r, w = os.pipe()
    assert _handshake(server, hello(wire.SHM_MAGIC, 1, RING, total), r) == wire.E_BAD_FD  # no seals
    os.close(w)
    # short or stalled handshakes
    s = server.raw("shm")
    s.sendall(b"TFSM\x01")
    s.close()
    stalled = server.raw("shm")
    stalled.sendall(b"TFSM")
    good()  # includes a fresh shm handshake while this one stalls
    stalled.close()
    good()


# ---- garbage after a valid handshake ------------------------------------------------------------
def _dropped(t: ShmTransport, timeout: float = DEADLINE) -> bool:
    """True once the server has set server_closed and closed the control socket."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if t.ci[_shm.I_SERVER_CLOSED] == 1:
            t.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                return t.sock.recv(1) == b""
            except ConnectionResetError:
                return True
        time.sleep(0.01)
    return False


def _poke_head(t: ShmTransport, head: int) -> None:
    t.cq[_shm.Q_REQ_HEAD] = head
    t.ci[_shm.I_REQ_SEQ] = (t.ci[_shm.I_REQ_SEQ] + 1) & 0xFFFFFFFF
    t.futex_wake(t.req_seq_addr)


def _write(t: ShmTransport, off: int, data: bytes) -> None:
    t.req[off:off + len(data)] = data


def _echo_frame(rid: int, payload: bytes = b"abcdefgh") -> bytes:
    return struct.pack("<IBBHQ", 12 + len(payload), wire.ECHO, 2, 0, rid) + payload


GARBAGE = {
    "unaligned head": lambda t: (_write(t, 0, _echo_frame(1)), _poke_head(t, 3)),
    "head far ahead": lambda t: _poke_head(t, 5 * RING),
    "head near 2**64": lambda t: _poke_head(t, (1 << 64) - 8),
    "body_len beyond head": lambda t: (_write(t, 0, struct.pack("<I", 0x7FFFFFF0) + bytes(4)),
                                       _poke_head(t, 8)),
    "body_len beyond ring": lambda t: (_write(t, 0, struct.pack("<I", RING + 64)),
                                       _poke_head(t, RING)),
    "wrap marker at 0": lambda t: (_write(t, 0, struct.pack("<I", wire.SHM_WRAP)), _poke_head(t, 8)),
}


@pytest.mark.parametrize("what", sorted(GARBAGE))
def test_garbage_positions_drop_only_that_peer(server, good, what):
    t = ShmTransport(server.shm_path, timeout=DEADLINE, ring_bytes=RING)
    try:
        GARBAGE[what](t)
        assert _dropped(t), f"server did not drop a peer after {what}"
    finally:
        t.close()
    good()


def test_head_moving_backwards_and_bad_resp_tail(server, good):
    c = tollfree.connect(server.url("shm"), timeout=DEADLINE, ring_bytes=RING)
    t = c._t
    assert np.array_equal(bits(c.echo(np.arange(4.0))), bits(np.arange(4.0)))
    _poke_head(t, 0)  # backwards
    assert _dropped(t)
    c.close()
    c = tollfree.connect(server.url("shm"), timeout=DEADLINE, ring_bytes=RING)
    t = c._t
    c.echo(np.arange(4.0))
    t.cq[_shm.Q_RESP_TAIL] = 1 << 40  # beyond the response head
    frame = _echo_frame(99)
    t.sendv([frame], len(frame))
    assert _dropped(t)
    with pytest.raises(SweepError) as ei:
        c.echo(np.arange(4.0))
    # The client checks resp_head against the tail it reads (the poked one) before anything else.
    assert ei.value.code == wire.E_SHM_CORRUPT, ei.value
    assert c.closed
    good()


def test_framing_errors_in_the_ring_are_answered(server, good):
    """Well-framed but invalid requests get error frames in the response ring, like a socket."""
    with tollfree.connect(server.url("shm"), timeout=DEADLINE, ring_bytes=RING) as c:
        t = c._t
        for body, code in [
            (b"", wire.E_FRAME_TOO_SHORT),
            (struct.pack("<BBHQ", 0x55, 2, 0, 1), wire.E_UNKNOWN_OPCODE),
            (struct.pack("<BBHQ", wire.HELLO, 7, 0, 1) + bytes(8), wire.E_BAD_HEADER),
            (struct.pack("<BBHQ", wire.LOAD, 2, 0, 1) + struct.pack("<Q", 1 << 61), wire.E_LENGTH_MISMATCH),
            (struct.pack("<BBHQ", wire.SESSION_OPEN, 2, 0, 1) + bytes(48), wire.E_WINDOW_TOO_SHORT),
        ]:
            t.sendv([struct.pack("<I", len(body)) + body], 4 + len(body))
            with pytest.raises(SweepError) as ei:
                c._recv(body[0] if body else 0, 1, 0)
            assert ei.value.code == code
        # the largest frame a ring takes: align8(4 + body_len) <= ring_bytes - 8
        most = np.frombuffer(os.urandom(RING - 24), np.uint8)
        assert np.array_equal(c.echo(most), most)
        with pytest.raises(SweepError) as ei:
            c.echo(np.frombuffer(os.urandom(RING - 23), np.uint8))
        assert ei.value.code == wire.E_SHM_TOO_BIG
        assert np.array_equal(bits(c.echo(np.arange(5.0))), bits(np.arange(5.0)))
    good()


# ---- peers that die or stop reading ------------------------------------------------------------
CHILD = r"""
import sys, numpy as np, tollfree
c = tollfree.connect(sys.argv[1], spin=int(sys.argv[2]))
s = c.session([5, 3, 2, 3, 1, 2])
print("ready", flush=True)
x = 100.0
while True:
    x += 0.01
    s.on_bar(x)
    c.echo(np.ones(16))
"""


@pytest.mark.parametrize("spin", [0, 20000])
def test_peer_killed_mid_stream(server, good, spin):
    with tollfree.connect(server.url("unix")) as probe:
        base = probe.stats()["connections_open"]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        child = subprocess.Popen([sys.executable, "-c", CHILD, server.url("shm"), str(spin)],
                                 stdout=subprocess.PIPE, env=env)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.1)
        child.send_signal(signal.SIGKILL)
        child.wait()
        wait_until(lambda: probe.stats()["connections_open"] <= base,
                   "the server to drop the killed peer")
    good()


def test_peer_that_stops_reading_replies(server, good):
    c = tollfree.connect(server.url("shm"), timeout=0.5, ring_bytes=RING)
    t = c._t
    payload = np.ones(1000)
    with pytest.raises(SweepTimeout):
        for i in range(1000):  # never consume: the response ring, then the request ring fill up
            c._send(wire.ECHO, [memoryview(payload).cast("B")], payload.nbytes)
    good()
    t.close()  # the server thread, waiting for room, notices the peer is gone
    good()


def test_shm_connection_limit(server, good):
    held = []
    try:
        with pytest.raises(SweepError) as ei:
            for _ in range(80):
                held.append(tollfree.connect(server.url("shm"), timeout=DEADLINE, ring_bytes=RING, spin=0))
        assert ei.value.code == wire.E_SHM_LIMIT
        # One process holds at most a quarter of the server's 64 rings ...
        assert 1 <= len(held) <= 16
        assert np.array_equal(bits(held[0].echo(np.arange(3.0))), bits(np.arange(3.0)))
        # ... so another process still gets one while this one holds its share.
        code = ("import sys, numpy as np, tollfree\n"
                "c = tollfree.connect(sys.argv[1], ring_bytes=%d, spin=0)\n"
                "assert np.array_equal(c.echo(np.arange(4.0)), np.arange(4.0))\n"
                "c.close()\n" % RING)
        r = subprocess.run([sys.executable, "-c", code, server.url("shm")], capture_output=True,
                           text=True, timeout=DEADLINE)
        assert r.returncode == 0, r.stderr
    finally:
        for c in held:
            c.close()
    def served():  # the server frees the slots as it notices the closes
        try:
            good()
            return True
        except SweepError as e:
            if e.code != wire.E_SHM_LIMIT:
                raise
            return False

    wait_until(served, "the server to free the shm slots", poll=0.02)
    good()


def test_idle_shm_client_is_closed_by_the_idle_timeout(server_factory):
    """A shared-memory client that sends nothing holds a ring (one of 64) until --idle-timeout,
    as a socket connection does; the server then closes it and says why, and the client's next
    call fails with SHM_PEER_GONE instead of hanging."""
    srv = server_factory(unix=False, tcp=False, shm=True, extra=("--idle-timeout", "1"))
    try:
        c = tollfree.connect(srv.url("shm"))
        assert c.hello()["version"] == 2
        wait_until(lambda: "idle timeout (--idle-timeout)" in srv.log(), "the idle ring's close")
        with pytest.raises(SweepError) as e:
            c.hello()
        assert e.value.code == wire.E_SHM_PEER_GONE
        c.close()
        c2 = tollfree.connect(srv.url("shm"))  # the slot is free again
        assert c2.hello()["version"] == 2
        c2.close()
    finally:
        srv.stop_and_check()
