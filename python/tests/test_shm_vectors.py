"""The Python client's shared-memory rings against the vectors the C rings also pass
(tests/vectors/shm_ring.txt, tests/unit/test_shm_vectors.c): the general writer and reader
(ShmTransport.reserve / begin_reply) and the inline fast paths (ShmSession.on_bar,
ShmClient.echo), each on a transport over an anonymous mapping set to the vector's state.

No server runs here: where a path would wait for the server, the transport's waits are replaced.
Waiting for a reply either raises ``_Empty`` (the consume vectors) or plays the server for the
one request just published (the fast paths' produce vectors); waiting for room raises ``_Full``.
"""
from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

from tollfree import wire
from tollfree.client._shm import (Q_REQ_HEAD, Q_REQ_TAIL, Q_RESP_HEAD, Q_RESP_TAIL,
                                  ShmTransport)
from tollfree.client._v2 import ShmClient, ShmSession
from tollfree.errors import SweepError

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "shm_ring.txt"
BAR_POSITION = -1          # what the played server answers a bar with


class _Empty(Exception):
    """The reader found nothing and would wait."""


class _Full(Exception):
    """The writer found no room and would wait."""


class _NoControl:
    def close(self):
        pass


def _vectors(kind):
    out = []
    for n, line in enumerate(VECTORS.read_text().splitlines(), 1):
        if line and not line.startswith("#"):
            tok = line.split()
            if tok[0] == kind:
                out.append(pytest.param(tok, id=f"line{n}"))
    return out


CONSUME = _vectors("consume")
PRODUCE = _vectors("produce")


def test_vectors_present():
    assert len(CONSUME) >= 20 and len(PRODUCE) >= 15


def _transport(ring: int) -> ShmTransport:
    t = ShmTransport.__new__(ShmTransport)
    t._state("shm:vectors", ring, 0, None)
    t._attach(mmap.mmap(-1, wire.SHM_CTRL_BYTES + 2 * ring))
    t.control = _NoControl()

    def no_data(tail):
        raise _Empty(tail)

    def no_room():
        raise _Full()

    t.wait = t.wait_more = no_data
    t._check_peer = no_room
    return t


def _consume_state(tok):
    ring, tail, head, words = int(tok[1]), int(tok[2]), int(tok[3]), tok[4]
    t = _transport(ring)
    if words != "-":
        for w in words.split(","):
            off, val = w.split(":")
            wire.LEN.pack_into(t.resp, int(off), int(val, 16))
    t.cq[Q_RESP_HEAD] = head
    t.cq[Q_RESP_TAIL] = tail
    return t, tok[5:]


def _read(t, call) -> list:
    """call() on a consume vector's transport: ["frame", its result], ["empty", TAIL] (it would
    wait, the tail as it is then) or ["corrupt"]."""
    try:
        return ["frame", call()]
    except _Empty:
        return ["empty", str(t.cq[Q_RESP_TAIL])]
    except SweepError as e:
        assert e.code == wire.E_SHM_CORRUPT, e
        return ["corrupt"]


def _write(call) -> tuple:
    """call() on a produce vector's transport: ("written", its result), ("full", None) (it would
    wait for room), ("too_big", None) or ("corrupt", None)."""
    names = {wire.E_SHM_TOO_BIG: "too_big", wire.E_SHM_CORRUPT: "corrupt"}
    try:
        return "written", call()
    except _Full:
        return "full", None
    except SweepError as e:
        assert e.code in names, e
        return names[e.code], None


@pytest.mark.parametrize("tok", CONSUME)
def test_consume_general(tok):
    t, want = _consume_state(tok)
    got = _read(t, t.begin_reply)
    if got[0] != "frame":
        assert got == want
        return
    off = t._rpos
    blen = wire.LEN.unpack_from(t.resp, off)[0]
    t.end_reply()
    assert ["frame", str(off), str(blen), str(t.cq[Q_RESP_TAIL])] == want


def _produce_state(tok):
    ring, head, tail, span = (int(v) for v in tok[1:5])
    t = _transport(ring)
    t.cq[Q_REQ_HEAD] = head
    t.cq[Q_REQ_TAIL] = tail
    return t, span, tok[5:]


def _stray(ring_mv, ring: int, marker: int | None) -> list:
    """Offsets of the nonzero u32 words of a ring, the wrap marker's left out."""
    return [o for o in range(0, ring, 4) if o != marker and wire.LEN.unpack_from(ring_mv, o)[0]]


def _check_produce(t, want, outcome, frame_off, span):
    """outcome: 'written' (the frame published at frame_off), 'full', 'too_big' or 'corrupt'
    (the transport is closed then, its mapping gone)."""
    kind = want[0]
    if kind in ("too_big", "corrupt"):
        assert outcome == kind, (want, outcome)
        return
    ring = t.ring
    head = t.cq[Q_REQ_HEAD]
    assert head == int(want[-1])
    marker = int(want[1]) if kind in ("wrap", "wrap_full") else None
    if marker is not None:
        assert wire.LEN.unpack_from(t.req, marker)[0] == wire.SHM_WRAP
    if kind in ("at", "wrap"):
        assert outcome == "written", (want, outcome)
        off = int(want[1] if kind == "at" else want[2])
        assert frame_off == off
        req = bytearray(t.req)
        req[off:off + span] = bytes(span)
        assert _stray(memoryview(req), ring, marker) == []   # the frame and the marker only
    else:
        assert kind in ("full", "wrap_full") and outcome == "full", (want, outcome)
        assert _stray(t.req, ring, marker) == []


@pytest.mark.parametrize("tok", PRODUCE)
def test_produce_general(tok):
    t, span, want = _produce_state(tok)
    head0 = t.cq[Q_REQ_HEAD]

    def reserve_publish():
        off = t.reserve(span)
        if want[0] == "wrap":
            assert t.cq[Q_REQ_HEAD] == head0   # the wrap goes out with the frame
        t.publish()
        return off

    outcome, off = _write(reserve_publish)
    _check_produce(t, want, outcome, off, span)


# ---- the inline fast paths ---------------------------------------------------------------------

def _bar_reply(t, off: int, rid: int) -> None:
    wire.SESSION_BAR_REPLY_FRAME.pack_into(t.resp, off, 36, wire.SESSION_BAR, wire.VERSION, 0,
                                           rid, BAR_POSITION, 0, 7, 1.5)


def _session(t):
    c = ShmClient(t, "shm:vectors")
    return c, ShmSession(c, 5, (6, 3, 2, 3, 1, 2))


def _play_server(t, answer):
    """Replaces the reply waits: the request just published (ending at the request head) is
    answered at the response ring's tail by ``answer(t, request_end_offset)``, which returns the
    reply's span."""
    def serve(tail):
        end = t.cq[Q_REQ_HEAD] & t.mask or t.ring
        t.cq[Q_RESP_HEAD] = tail + answer(t, end)
        return t.cq[Q_RESP_HEAD]
    t.wait = t.wait_more = serve


def _answer_bar(t, end: int) -> int:
    _, op, _, _, rid, sid, close = wire.SESSION_BAR_FRAME.unpack_from(t.req, end - 32)
    assert op == wire.SESSION_BAR and sid == 5 and close == 100.0
    _bar_reply(t, 0, rid)
    return 40


def _answer_echo(t, end: int) -> int:
    t.resp[0:32] = t.req[end - 32:end]
    return 32


def _frames_of(tok, body_len: int) -> list:
    """Offsets where the vector writes a frame length of body_len (and the frame would end
    before the ring does: one across the end can only be half written)."""
    if tok[4] == "-":
        return []
    ring = int(tok[1])
    span = wire.align8(4 + body_len)
    return [int(o) for o, v in (w.split(":") for w in tok[4].split(","))
            if int(v, 16) == body_len and int(o) + span <= ring]


def _fast_consume(tok, frame_len: int):
    """The consume vectors whose frames are replies of frame_len, or which find nothing or
    corruption (the fast path must reach the same end)."""
    want = tok[5:]
    return want[0] != "frame" or int(want[2]) == frame_len


@pytest.mark.parametrize("tok", [p for p in CONSUME if _fast_consume(p.values[0], 36)])
def test_consume_on_bar(tok):
    t, want = _consume_state(tok)
    c, s = _session(t)
    rid = (1 << 62) + 1   # the session's first request id (ShmSession's own id space)
    for off in _frames_of(tok, 36):   # a well-formed reply wherever the vector has such a frame
        _bar_reply(t, off, rid)
    got = _read(t, lambda: s.on_bar(100.0))
    if got[0] != "frame":
        assert got == want
        return
    assert want[0] == "frame" and got[1] == BAR_POSITION and s.trades == 7
    assert t.cq[Q_RESP_TAIL] == int(want[3])
    # the request went out in place at the ring start
    assert wire.SESSION_BAR_FRAME.unpack_from(t.req, 0)[4] == rid


@pytest.mark.parametrize("tok", [p for p in CONSUME if _fast_consume(p.values[0], 28)])
def test_consume_echo(tok):
    t, want = _consume_state(tok)
    c, _ = _session(t)
    rid = (1 << 61) + 1   # the echo fast path's first request id
    payload = np.array([1.25, -2.5])
    for off in _frames_of(tok, 28):
        t.resp_q[off >> 3] = 28 | (wire.ECHO << 32) | (wire.VERSION << 40)
        t.resp_q[(off >> 3) + 1] = rid
        t.resp[off + 16:off + 32] = payload.tobytes()
    got = _read(t, lambda: c.echo(np.zeros(2)))
    if got[0] != "frame":
        assert got == want
        return
    assert want[0] == "frame" and got[1].tobytes() == payload.tobytes()
    assert t.cq[Q_RESP_TAIL] == int(want[3])


def _fast_produce(span: int):
    return [p for p in PRODUCE if int(p.values[0][4]) == span]


@pytest.mark.parametrize("tok", _fast_produce(32))
def test_produce_on_bar(tok):
    t, span, want = _produce_state(tok)
    _play_server(t, _answer_bar)   # before the session: on_bar binds the waits when built
    c, s = _session(t)
    outcome, pos = _write(lambda: s.on_bar(100.0))
    assert outcome != "written" or pos == BAR_POSITION
    off = (t.cq[Q_REQ_HEAD] - span) & t.mask if outcome == "written" else None
    _check_produce(t, want, outcome, off, span)


@pytest.mark.parametrize("tok", _fast_produce(32))
def test_produce_echo(tok):
    t, span, want = _produce_state(tok)
    _play_server(t, _answer_echo)
    c, _ = _session(t)
    x = np.array([3.0, 4.0])
    assert (23 + x.nbytes) & ~7 == span
    outcome, got = _write(lambda: c.echo(x))
    assert outcome != "written" or got.tobytes() == x.tobytes()
    off = (t.cq[Q_REQ_HEAD] - span) & t.mask if outcome == "written" else None
    _check_produce(t, want, outcome, off, span)
