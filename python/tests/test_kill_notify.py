"""A kill switch's cancels reach the connection that placed the orders (docs/venue.md "Kill
switch", docs/engine-service.md "Unsolicited events"), through a real `tollfree engine serve
--sessions --risk` over a Unix socket.

The trader's connection receives an Unsolicited marker (kind 0x1F: the kill's command_seq, the
count, cause 1) and then exactly the Canceled / CanceledEx frames of events.ofl, byte for byte;
its next command's reply is still read as its own; pipelined replies owed across the kill stay
in order; the Python client sets the cancels aside for ``unsolicited()`` (or ``on_unsolicited``)
and never mistakes them for a reply; a connection that placed none of the orders gets nothing.
"""
from __future__ import annotations

import select
import socket
import struct

import pytest

from conftest import DEADLINE
from engine_service import VenueProcess
from test_venue_risk import SECRETS, kill, raw_logon
from tollfree import orders

MARKER = struct.Struct("<HBQIB3x")  # frame_len 17, kind 0x1F, command_seq, count, cause


class Venue(VenueProcess):
    """Sessions alpha (accounts 1, 2), bravo (1) and ops (the admin); no limits but the kill
    switch."""

    def __init__(self, d):
        (d / "risk").write_text("admin ops\n")
        super().__init__(d, f"alpha {SECRETS['alpha']} 1,2\nops {SECRETS['ops']} 9\n"
                            f"bravo {SECRETS['bravo']} 1\n",
                         "--risk", str(d / "risk"), secrets=SECRETS)


@pytest.fixture()
def venue(tmp_path):
    v = Venue(tmp_path)
    v.start()
    yield v
    v.kill()


def read_frame(s: socket.socket) -> bytes:
    buf = b""
    while len(buf) < 2 or len(buf) < 2 + struct.unpack_from("<H", buf)[0]:
        want = 2 if len(buf) < 2 else 2 + struct.unpack_from("<H", buf)[0] - len(buf)
        chunk = s.recv(want)
        assert chunk, "closed"
        buf += chunk
    return buf


def command(s: socket.socket, cmd) -> list[bytes]:
    """Sends a plain command on a logged-on raw socket; its reply's frames, Heartbeat last."""
    s.sendall(orders.encode_frame(cmd))
    frames = [read_frame(s)]
    while frames[-1][2] != 0:
        frames.append(read_frame(s))
    return frames


def journal_events(venue, command_seq: int) -> list[bytes]:
    """The frames of events.ofl (23-byte header; records: frame + CRC32C) of one command."""
    data = (venue.dir / "j" / "events.ofl").read_bytes()
    off, out = 23, []
    while off + 2 <= len(data):
        n = 2 + struct.unpack_from("<H", data, off)[0]
        frame = data[off:off + n]
        if struct.unpack_from("<Q", frame, 11 + 8)[0] == command_seq:  # payload: event_seq, cmd
            out.append(frame)
        off += n + 4
    return out


def test_marker_and_frames_are_the_journal_bytes(venue):
    trader = raw_logon(venue, "alpha")
    ids = []
    for coid, px in ((1, 100), (2, 101)):
        ids.append(orders.decode_frame(command(trader, orders.NewLimit(1, coid, 1, orders.BUY,
                                                                       px, 1))[0])[0].order_id)
    gw = command(trader, orders.Order(1, 3, 1, 99, 1, orders.BUY, orders.LIMIT, orders.GTC, 0))
    ids.append(orders.decode_frame(gw[0], ext=True)[0].order_id)
    command(trader, orders.NewLimit(2, 4, 1, orders.BUY, 98, 1))  # another account: stays
    ops = raw_logon(venue, "ops")
    admin = kill(ops, 1, True)
    assert admin[-1][0] == 0
    kseq = struct.unpack_from("<Q", admin[0][1], 8)[0]  # the kill's: its cancels carry it
    journal = journal_events(venue, kseq)
    assert len(journal) == 3
    trader.settimeout(DEADLINE)
    marker = read_frame(trader)
    assert MARKER.unpack(marker) == (17, orders.UNSOLICITED, kseq, 3, orders.CAUSE_KILL_SWITCH)
    got = [read_frame(trader) for _ in range(3)]
    assert got == journal  # byte for byte the journal's (and the admin's) frames
    assert [(k, p) for k, p in admin[:-1]] == [(f[2], f[11:]) for f in journal]
    decoded = [orders.decode_frame(f, venue=True)[0] for f in got]
    assert sorted(e.order_id for e in decoded) == sorted(ids)
    # the next command's reply is read right after: nothing else was waiting
    reply = command(trader, orders.NewLimit(2, 5, 1, orders.BUY, 97, 1))
    assert [f[2] for f in reply] == [0x81, 0]
    assert struct.unpack_from("<Q", reply[-1], 3)[0] == kseq + 1
    ops.close()
    trader.close()


def test_client_sets_the_cancels_aside(venue):
    with venue.connect("alpha") as a, venue.connect("bravo") as other:
        a_ids = {a.new_limit(1, i, 1, "buy", 100 + i, 1)[0].order_id for i in (1, 2)}
        a_ids.add(a.order(1, 3, 1, "buy", 99, 1, tif=orders.GTC)[0].order_id)
        keep = other.new_limit(1, 4, 2, "buy", 50, 1)[0].order_id  # another connection's
        ops = raw_logon(venue, "ops")
        frames = kill(ops, 1, True)
        kseq = struct.unpack_from("<Q", frames[0][1], 8)[0]
        reply = a.new_limit(2, 5, 1, "buy", 98, 1)
        assert [type(e).__name__ for e in reply] == ["Accepted"]
        assert reply.command_seq == kseq + 1
        got = a.unsolicited(timeout=DEADLINE)
        assert sorted(type(e).__name__ for e in got) == ["Canceled", "Canceled", "CanceledEx"]
        assert {e.order_id for e in got} == a_ids
        assert all(e.command_seq == kseq for e in got)
        assert a.fills() == [] and a.unsolicited_dropped == 0
        # another session's connection gets only its own order's cancel
        oth = other.unsolicited(timeout=DEADLINE)
        assert [(type(e).__name__, e.order_id, e.command_seq) for e in oth] == \
            [("Canceled", keep, kseq)]
        assert [k for k, _ in kill(ops, 1, False)] == [0]
        # a callback instead of the queue
        seen = []
        a.on_unsolicited = seen.append
        a.new_limit(1, 6, 1, "buy", 100, 1)
        frames = kill(ops, 1, True)
        kseq = struct.unpack_from("<Q", frames[0][1], 8)[0]
        assert type(a.new_limit(2, 7, 1, "buy", 97, 1)[0]).__name__ == "Accepted"
        assert [(type(e).__name__, e.command_seq) for e in seen] == [("Canceled", kseq)]
        assert a.unsolicited() == []
        ops.close()


def test_pipelined_replies_around_a_kill(venue):
    with venue.connect("alpha") as a:
        assert a.send([orders.NewLimit(1, 1, 1, orders.BUY, 100, 1),
                       orders.NewLimit(1, 2, 1, orders.BUY, 101, 1)]) == 2
        # their replies arriving means they were applied: the kill comes after them
        assert select.select([a.fileno()], [], [], DEADLINE)[0]
        ops = raw_logon(venue, "ops")
        frames = kill(ops, 1, True)
        kseq = struct.unpack_from("<Q", frames[0][1], 8)[0]
        assert a.send([orders.NewLimit(2, 3, 1, orders.BUY, 99, 1),
                       orders.NewLimit(1, 4, 1, orders.BUY, 98, 1)]) == 2
        first = [a.recv(), a.recv()]
        assert [type(r[0]).__name__ for r in first] == ["Accepted", "Accepted"]
        assert all(r.command_seq < kseq for r in first)
        # two replies still owed: unsolicited() returns what came before the next one, without
        # waiting (the trader's bytes leave just after the admin's: wait for them here)
        got = a.unsolicited()
        while len(got) < 2 and select.select([a.fileno()], [], [], DEADLINE)[0]:
            got += a.unsolicited()
        assert sorted(e.order_id for e in got) == sorted(r[0].order_id for r in first)
        assert all(type(e).__name__ == "Canceled" and e.command_seq == kseq for e in got)
        third, fourth = a.recv(), a.recv()
        assert type(third[0]).__name__ == "Accepted" and third.command_seq == kseq + 1
        assert isinstance(fourth[0], orders.VenueRejected)
        assert fourth[0].reason_name == "KillSwitch" and fourth.command_seq == kseq + 2
        assert a.unanswered == 0 and a.fills() == [] and a.unsolicited() == []
        ops.close()


def test_marker_decodes():
    f = MARKER.pack(17, 0x1F, 42, 3, 1)
    m, jseq, size = orders.decode_frame(f, venue=True)
    assert (m, jseq, size) == (orders.Unsolicited(42, 3, 1), 42, 19)
    with pytest.raises(orders.FrameError):
        orders.decode_frame(struct.pack("<HBQI", 13, 0x1F, 42, 3), venue=True)
