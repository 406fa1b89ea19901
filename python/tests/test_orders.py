"""The Python order client (tollfree.orders): the framing vectors shared with the C client
(tests/vectors/ofl_frames.txt), the vectors' server streams played by a fake server, the client's
errors, and the real ``tollfree engine serve`` over Unix and TCP when it is built.
Deadlines only guard against hangs."""
from __future__ import annotations

import dataclasses
import errno
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import DEADLINE
from engine_service import engine_service
from tollfree import orders as o
from tollfree._lib import bin_path
from tollfree.errors import EngineServiceError, EngineServiceTimeout

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "ofl_frames.txt"


def _load():
    frames, errors, streams = [], [], []
    for line in VECTORS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        t = line.split()
        raw = b"" if t[-1] == "-" else bytes.fromhex(t[-1])
        if t[0] == "frame":
            kv = dict(x.split("=", 1) for x in t[3:-1])
            frames.append((t[1], int(t[2]), {k: int(v) for k, v in kv.items()}, raw))
        elif t[0] == "error":
            errors.append((int(t[1]), raw))
        elif t[0] == "stream":
            seqs = [] if t[3] == "-" else [int(x) for x in t[3].split(",")]
            evs = [] if t[4] == "-" else [int(x) for x in t[4].split(",")]
            streams.append((t[1], int(t[2]), seqs, evs, int(t[5]), int(t[6]), raw))
    return frames, errors, streams


FRAMES, ERRORS, STREAMS = _load()


def _build(kind: str, fields: dict):
    f = dict(fields)
    if "quantity_lo" in f:
        f["quantity"] = f.pop("quantity_lo") | (f.pop("quantity_hi") << 64)
    cls = o.CLASSES[{v: k for k, v in o.KIND_NAMES.items()}[kind]]
    return cls(**f) if f else cls()


def test_vector_file_is_complete():
    kinds = {k for k, *_ in FRAMES}
    assert kinds == set(o.KIND_NAMES.values())
    assert len(ERRORS) >= 8 and len(STREAMS) >= 13


@pytest.mark.parametrize("kind,jseq,fields,raw", FRAMES, ids=[f"{k}-{j}" for k, j, *_ in FRAMES])
def test_frame_vectors(kind, jseq, fields, raw):
    m = _build(kind, fields) if kind != "Heartbeat" else o.Heartbeat(jseq)
    assert o.encode_frame(m, jseq) == raw
    msg, got_seq, size = o.decode_frame(raw)
    assert (msg, got_seq, size) == (m, jseq, len(raw))
    assert o.decode_frame(raw[:-1]) is None  # a stream reader's "need more bytes"


@pytest.mark.parametrize("code,raw", ERRORS, ids=[str(c) for c, _ in ERRORS])
def test_error_vectors(code, raw):
    if code in (o.E_OFL_HEADER_TOO_SHORT, o.E_OFL_PAYLOAD_TOO_SHORT):
        assert o.decode_frame(raw) is None
        return
    with pytest.raises(o.FrameError) as ei:
        o.decode_frame(raw)
    assert ei.value.code == code


def test_encode_refuses_bad_fields():
    with pytest.raises(ValueError):
        o.encode_frame(o.NewLimit(1, 1, 1, 2, 100, 1))
    with pytest.raises(ValueError):
        o.encode_frame(o.NewMarket(1, 1, 1, 0, -1))
    with pytest.raises(o.FrameError):
        o.encode_frame(o.Rejected(1, 1, 1, 1, 9))


# ---------------------------------------------------------------- a fake server

class Fake:
    """Accepts one connection on a Unix socket, reads n_cmds command frames, sends `answer`
    (after `delay` seconds), then holds the connection until the client closes (hold) or closes."""

    def __init__(self, tmp: Path, n_cmds: int, answer: bytes, hold: bool = True,
                 delay: float = 0.0):
        self.path = str(tmp / f"fake{id(self)}.sock")
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(self.path)
        self.ls.listen(1)
        self.ls.settimeout(DEADLINE)
        self.n_cmds, self.answer, self.hold, self.delay = n_cmds, answer, hold, delay
        self.cmds = []
        self.th = threading.Thread(target=self._main, daemon=True)
        self.th.start()

    def _main(self):
        try:
            c, _ = self.ls.accept()
        except OSError:
            return
        c.settimeout(DEADLINE)
        buf = bytearray()
        try:
            while len(self.cmds) < self.n_cmds:
                r = o.decode_frame(buf)
                if r:
                    self.cmds.append(r[0])
                    del buf[:r[2]]
                    continue
                data = c.recv(4096)
                if not data:
                    break
                buf += data
            time.sleep(self.delay)
            c.sendall(self.answer)
            if self.hold:
                while c.recv(4096):
                    pass
        except OSError:
            pass
        finally:
            c.close()

    @property
    def url(self):
        return f"unix:{self.path}"

    def join(self):
        self.th.join(DEADLINE)
        self.ls.close()


@pytest.mark.parametrize("name,n,seqs,evs,fills,err,raw", STREAMS, ids=[s[0] for s in STREAMS])
def test_stream_vectors(tmp_path, name, n, seqs, evs, fills, err, raw):
    f = Fake(tmp_path, n, raw, hold=err == 0)
    c = o.connect(f.url, timeout=DEADLINE)
    cmds = [o.NewLimit(7, k + 1, 1, o.BUY, 100, 1) for k in range(n)]
    if err:
        with pytest.raises(EngineServiceError) as ei:
            c.send_many(cmds)
        assert ei.value.code == err, ei.value
        assert c.closed
        with pytest.raises(EngineServiceError) as ei:
            c.cancel(1)
        assert ei.value.code == -errno.ENOTCONN
    else:
        replies = c.send_many(cmds)
        assert [r.command_seq for r in replies] == seqs
        assert [len(r) for r in replies] == evs
        got = c.fills()
        assert len(got) == fills and all(isinstance(t, o.Trade) for t in got)
        assert f.cmds[0] == cmds[0]  # as sent (command_seq is the server's to assign)
        c.close()
    f.join()


def _trade(es, cs):
    return o.encode_frame(o.Trade(es, cs, cs, 1, 2, 1, 100, 1))


def _reply(cs, extra=b""):
    return (o.encode_frame(o.Accepted(99, cs, cs, 5, 1, 7)) + extra
            + o.encode_frame(o.Heartbeat(cs)))


def test_client_errors(tmp_path):
    with pytest.raises(ValueError):
        o.connect("shm:/x")
    with pytest.raises(ValueError):
        o.connect("tcp:127.0.0.1")
    with pytest.raises(TypeError):
        o.connect(None)
    with pytest.raises(EngineServiceError) as ei:
        o.connect(f"unix:{tmp_path}/missing.sock")
    assert ei.value.code == -errno.ENOENT
    # a server that never answers: a timeout, then the client is closed
    f = Fake(tmp_path, 1, b"", hold=True)
    c = o.connect(f.url, timeout=0.2)
    with pytest.raises(ValueError):
        c.new_limit(1, 1, 1, "sideways", 100, 1)  # before anything is sent
    with pytest.raises(TypeError):
        c.call(o.Accepted(1, 1, 1, 1, 1, 1))
    with pytest.raises(EngineServiceTimeout) as ei:
        c.new_limit(1, 1, 1, "buy", 100, 1)
    assert ei.value.code == -errno.ETIMEDOUT and isinstance(ei.value, TimeoutError)
    assert c.closed
    with pytest.raises(EngineServiceError):
        c.fills()
    f.join()


def test_fill_queue_bounded(tmp_path):
    answer = b"".join(_trade(k + 1, 40) for k in range(5)) + _reply(41)
    f = Fake(tmp_path, 1, answer)
    with o.connect(f.url, timeout=DEADLINE, max_fills=3) as c:
        r = c.cancel_client(7, 1)
        assert r.command_seq == 41 and isinstance(r[0], o.Accepted) and r[0].order_id == 5
        assert c.fills_dropped == 2
        assert [t.event_seq for t in c.fills(max=2)] == [3, 4]
        assert [t.event_seq for t in c.fills()] == [5]
        assert c.fills() == []
    f.join()


def test_reply_with_trades_and_late_fill(tmp_path):
    answer = _reply(3, _trade(2, 3) + _trade(3, 3))
    f = Fake(tmp_path, 1, answer)
    with o.connect(f.url, timeout=DEADLINE) as c:
        r = c.replace(5, 2, 101, 1)
        assert [type(e).__name__ for e in r] == ["Accepted", "Trade", "Trade"]
        assert r[1].quantity == 1 and r[1].price == 100
    f.join()
    f = Fake(tmp_path, 0, _trade(1, 9), delay=0.05)
    with o.connect(f.url, timeout=DEADLINE) as c:
        got = c.fills(timeout=DEADLINE)
        assert len(got) == 1 and got[0].command_seq == 9
    f.join()


# ---------------------------------------------------------------- the real service

@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    s = engine_service(tmp_path_factory)
    yield s
    s.kill()


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_service_commands(svc, kind):
    base = 100 if kind == "unix" else 200
    with o.connect(svc.url(kind), timeout=DEADLINE) as a, \
            o.connect(svc.url(kind), timeout=DEADLINE) as b:
        r = a.new_limit(11, base, 1, "sell", 1000, 3)
        assert isinstance(r[0], o.Accepted) and r[0].command_seq == r.command_seq > 0
        maker = r[0].order_id
        r2 = b.new_limit(12, base, 1, "buy", 1000, 2)
        assert r2.command_seq > r.command_seq
        assert isinstance(r2[0], o.Accepted) and isinstance(r2[1], o.Trade)
        assert (r2[1].maker_order_id, r2[1].quantity, r2[1].price) == (maker, 2, 1000)
        fills = a.fills(timeout=DEADLINE)
        assert len(fills) == 1 and fills[0].maker_order_id == maker
        assert isinstance(a.replace(maker, base + 1, 1001, 1)[0], o.Replaced)
        c = a.cancel_client(11, base + 1)
        assert isinstance(c[0], o.Canceled) and c[0].order_id == maker
        rej = a.cancel(maker)[0]
        assert isinstance(rej, o.Rejected) and rej.reason_name == "OrderNotFound"
        assert a.new_limit(11, 1, 999, "buy", 1, 1)[0].reason_name == "UnknownInstrument"
        m = b.new_market(12, base + 2, 2, "sell", 5)
        assert [type(e) for e in m] == [o.Accepted, o.Canceled]
        # pipelined bulk: rest and cancel, alternately
        cmds = []
        for k in range(2000):
            cmds.append(o.NewLimit(13, 10**6 + k, 1, o.BUY, 10 + k % 7, 1))
            cmds.append(o.CancelByClient(13, 10**6 + k))
        replies = b.send_many(cmds)
        seqs = [r.command_seq for r in replies]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) == 4000
        assert all(isinstance(r[0], o.Canceled if k % 2 else o.Accepted)
                   for k, r in enumerate(replies))


def test_service_undecodable(svc):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(DEADLINE)
    s.connect(svc.sock)
    bad = bytearray(o.encode_frame(o.NewLimit(14, 1, 1, 0, 100, 1)))
    bad[11 + 32] = 2
    s.sendall(bytes(bad))
    buf = b""
    while len(buf) < 44 + 11:
        buf += s.recv(4096)
    ev, _, n = o.decode_frame(buf)
    assert isinstance(ev, o.Rejected) and ev.reason_name == "Other" and ev.event_seq == 0
    hb, jseq, _ = o.decode_frame(buf, n)
    assert isinstance(hb, o.Heartbeat) and jseq == 0
    s.close()


def test_service_state_hash_matches_replay(tmp_path_factory):
    svc = engine_service(tmp_path_factory)
    try:
        with o.connect(svc.url("unix"), timeout=DEADLINE) as c:
            for k in range(50):
                c.new_limit(1, k + 1, 1 + k % 3, k % 2, 100 + k % 5, 1 + k % 4)
    except BaseException:
        svc.kill()
        raise
    summary = svc.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(svc.journal / "commands.ofl"),
                          "--instruments", svc.instruments, "--quiet"],
                         capture_output=True, text=True, timeout=DEADLINE)
    import json

    assert json.loads(run.stdout)["state_hash"] == summary["state_hash"]
    assert os.path.exists(svc.journal / "events.ofl")


def test_rejected_prints_its_reason_by_name():
    """A printed Rejected says why by name (it printed reason=2 before)."""
    r = o.Rejected(event_seq=3, command_seq=2, timestamp_ns=0, client_order_id=7, reason=2)
    assert "reason=OrderNotFound(2)" in repr(r) and "client_order_id=7" in repr(r)
    assert "reason=?(9)" in repr(o.Rejected(1, 1, 1, 1, 9))


# ---------------------------------------------------------------- gateway extension kinds

OFX_VECTORS = VECTORS.with_name("ofx_frames.txt")


def _load_ofx():
    frames, errors = [], []
    for line in OFX_VECTORS.read_text().splitlines():
        t = line.split()
        if not t or t[0].startswith("#"):
            continue
        if t[0] == "frame":
            kv = [x.split("=", 1) for x in t[3:-1]]
            frames.append((t[1], int(t[2]), [(k, int(v)) for k, v in kv], bytes.fromhex(t[-1])))
        elif t[0] == "error":
            errors.append((int(t[1]), bytes.fromhex(t[-1])))
    return frames, errors


OFX_FRAMES, OFX_ERRORS = _load_ofx()


def _build_ofx(kind: str, fields: list):
    cls = o.GATEWAY_CLASSES[{v: k for k, v in o.GATEWAY_KIND_NAMES.items()}[kind]]
    return cls(**dict(fields))


def test_ofx_vector_file_is_complete():
    assert {k for k, *_ in OFX_FRAMES} == set(o.GATEWAY_KIND_NAMES.values())
    assert len(OFX_FRAMES) >= 16 and len(OFX_ERRORS) >= 20
    # the OFL1 set stays closed: no gateway kind among the OFL1 names and sizes
    assert not set(o.GATEWAY_KIND_NAMES) & set(o.KIND_NAMES)


@pytest.mark.parametrize("kind,jseq,fields,raw", OFX_FRAMES,
                         ids=[f"{k}-{j}" for k, j, *_ in OFX_FRAMES])
def test_ofx_frame_vectors(kind, jseq, fields, raw):
    m = _build_ofx(kind, fields)
    # the vector lists the fields in wire order: the payload is them, packed in that order
    assert o.encode_frame(m, jseq) == raw
    assert o.decode_frame(raw, ext=True) == (m, jseq, len(raw))
    assert o.decode_frame(raw, venue=True) == (m, jseq, len(raw))  # the client's decoder
    assert o.decode_frame(raw[:-1], ext=True) is None
    with pytest.raises(o.FrameError) as ei:  # the OFL1 codec alone refuses every gateway kind
        o.decode_frame(raw)
    assert ei.value.code == o.E_OFL_UNKNOWN_KIND
    d = o.as_dict(m)
    assert d["kind"] == kind and list(d)[1:] == [f.name for f in dataclasses.fields(m)]


@pytest.mark.parametrize("code,raw", OFX_ERRORS, ids=[str(c) for c, _ in OFX_ERRORS])
def test_ofx_error_vectors(code, raw):
    if code in (o.E_OFL_HEADER_TOO_SHORT, o.E_OFL_PAYLOAD_TOO_SHORT):
        assert o.decode_frame(raw, ext=True) is None
        return
    with pytest.raises(o.FrameError) as ei:
        o.decode_frame(raw, ext=True)
    assert ei.value.code == code


def test_ofx_encode_checks_the_byte_fields():
    # an Order's type/tif/flags are the engine's to judge: any byte goes on the wire
    f = o.encode_frame(o.Order(1, 2, 3, 100, 1, o.BUY, type=7, tif=9, flags=0xFF))
    assert f[-3:] == bytes([7, 9, 0xFF])
    with pytest.raises(ValueError):
        o.encode_frame(o.Order(1, 2, 3, 100, 1, 2))  # side
    with pytest.raises(ValueError):
        o.encode_frame(o.Order(1, 2, 3, 100, 1, 0, type=256))
    with pytest.raises(ValueError):
        o.encode_frame(o.Cancel(-1, 2))
    acc = dict(event_seq=1, command_seq=1, timestamp_ns=1, order_id=1, client_order_id=1,
               account_id=1, instrument_id=1, price=1, quantity=1, side=0, type=0, tif=0, flags=0)
    for k, v, code in (("side", 2, o.E_OFL_INVALID_SIDE), ("type", 2, o.E_OFL_INVALID_ORDER_TYPE),
                       ("tif", 3, o.E_OFL_INVALID_ORDER_TYPE),
                       ("flags", 2, o.E_OFL_INVALID_ORDER_TYPE)):
        with pytest.raises(o.FrameError) as ei:
            o.encode_frame(o.AcceptedEx(**dict(acc, **{k: v})))
        assert ei.value.code == code
    with pytest.raises(o.FrameError) as ei:
        o.encode_frame(o.RejectedEx(1, 1, 1, 1, 1, 7))
    assert ei.value.code == o.E_OFL_INVALID_REASON
    assert o.RejectedEx(1, 1, 1, 1, 1, 6).reason_name == "InvalidTif"
    assert o.CanceledEx(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2).reason_name == "NotFillable"


class _FakeGateway:
    """One connection on a Unix socket: for each frame received (any kind), sends the next
    answer of `answers`; then holds until the client closes."""

    def __init__(self, tmp: Path, answers: list):
        self.path = str(tmp / "gw.sock")
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(self.path)
        self.ls.listen(1)
        self.ls.settimeout(DEADLINE)
        self.answers, self.got = list(answers), []
        self.th = threading.Thread(target=self._main, daemon=True)
        self.th.start()

    def _main(self):
        try:
            c, _ = self.ls.accept()
        except OSError:
            return
        c.settimeout(DEADLINE)
        buf = b""
        try:
            while self.answers:
                while len(buf) < 2 or len(buf) < 2 + int.from_bytes(buf[:2], "little"):
                    data = c.recv(4096)
                    if not data:
                        return
                    buf += data
                n = 2 + int.from_bytes(buf[:2], "little")
                self.got.append(buf[:n])
                buf = buf[n:]
                c.sendall(self.answers.pop(0))
            while c.recv(4096):
                pass
        except OSError:
            pass
        finally:
            c.close()


def test_ofx_client_replies_and_fills(tmp_path):
    """The client sends gateway commands as their frames, reads gateway reports as replies, and
    queues a Fill that arrives between replies as it queues a Trade."""
    acc = o.AcceptedEx(5, 3, 9, 44, 10, 1, 2, 1000, 5, 1, 0, 0, 0)
    fill = o.Fill(6, 3, 9, 40, 44, 8, 10, 2, 1, 2, 1000, 2, 0, 2, 1)
    late = o.Fill(8, 4, 9, 44, 45, 10, 11, 1, 3, 2, 1000, 1, 2, 3, 0)
    can = o.CanceledEx(7, 4, 9, 44, 10, 1, 2, 1000, 2, 3, 1, 0)
    ans1 = o.encode_frame(acc) + o.encode_frame(fill) + o.encode_frame(o.Heartbeat(3))
    ans2 = o.encode_frame(late) + o.encode_frame(can) + o.encode_frame(o.Heartbeat(4))
    f = _FakeGateway(tmp_path, [ans1, ans2])
    with o.connect(f"unix:{f.path}", timeout=DEADLINE) as c:
        r = c.order(1, 10, 2, "sell", 1000, 5)
        assert r == [acc, fill] and r.command_seq == 3
        r = c.order_cancel(1, 10)
        assert r == [can] and r.command_seq == 4
        assert c.fills() == [late]
    f.th.join(DEADLINE)
    assert f.got == [o.encode_frame(o.Order(1, 10, 2, 1000, 5, o.SELL)),
                     o.encode_frame(o.Cancel(1, 10))]


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_service_gateway_commands(svc, kind):
    """Order/Cancel/ReplaceByClient through the real service: reports to the sender, Fills to the
    maker's connection too (a gateway Order hitting an OFL1 NewLimit's order as well)."""
    acct = 300 if kind == "unix" else 400
    with o.connect(svc.url(kind), timeout=DEADLINE) as a, \
            o.connect(svc.url(kind), timeout=DEADLINE) as b:
        r = a.order(acct, 1, 3, "sell", 2000, 5)
        assert isinstance(r[0], o.AcceptedEx) and r[0].command_seq == r.command_seq > 0
        assert (r[0].account_id, r[0].client_order_id, r[0].quantity, r[0].side) == (acct, 1, 5, 1)
        maker = r[0].order_id
        r2 = b.order(acct + 1, 1, 3, "buy", 2000, 7, tif=o.IOC)
        assert [type(e) for e in r2] == [o.AcceptedEx, o.Fill, o.CanceledEx]
        fill = r2[1]
        assert (fill.maker_order_id, fill.quantity, fill.price, fill.maker_remaining,
                fill.maker_filled, fill.taker_side) == (maker, 5, 2000, 0, 5, 0)
        assert r2[2].reason_name == "Unfilled" and r2[2].remaining == 2
        assert a.fills(timeout=DEADLINE) == [fill]
        r = a.order(acct, 2, 3, "sell", 2100, 4)
        rp = a.replace_by_client(acct, 2, 3, 2101, 3)
        assert isinstance(rp[0], o.ReplacedEx)
        assert (rp[0].orig_client_order_id, rp[0].client_order_id, rp[0].remaining) == (2, 3, 3)
        cx = a.order_cancel(acct, 3)
        assert isinstance(cx[0], o.CanceledEx) and cx[0].reason_name == "Requested"
        rej = a.order(acct, 4, 3, "buy", 0, 1, type=o.MARKET, tif=o.GTC)
        assert isinstance(rej[0], o.RejectedEx) and rej[0].reason_name == "InvalidTif"
        # an OFL1 maker hit by a gateway taker receives the Fill between its replies
        mk = a.new_limit(acct, 5, 3, "sell", 2200, 1)
        hit = b.order(acct + 1, 2, 3, "buy", 2200, 1)
        assert [type(e) for e in hit] == [o.AcceptedEx, o.Fill]
        assert a.fills(timeout=DEADLINE)[0].maker_order_id == mk[0].order_id


def test_service_gateway_bad_side(svc):
    """A gateway Order with a bad side byte: RejectedEx(Other) with its account and client order
    id, event_seq 0, then Heartbeat(0); the connection stays usable."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(DEADLINE)
    s.connect(svc.sock)
    bad = bytearray(o.encode_frame(o.Order(77, 9, 1, 100, 1, o.BUY)))
    bad[11 + 48] = 2
    s.sendall(bytes(bad))
    buf = b""
    while len(buf) < 11 + 41 + 11:
        data = s.recv(4096)
        assert data
        buf += data
    ev, _, n = o.decode_frame(buf, ext=True)
    assert ev == o.RejectedEx(0, 0, 0, 77, 9, 255)
    hb, jseq, _ = o.decode_frame(buf, n)
    assert isinstance(hb, o.Heartbeat) and jseq == 0
    s.close()


def test_service_gateway_replay_matches(tmp_path_factory):
    """A journal of gateway commands replays (`engine run`) to the service's state hash;
    `journal dump` prints the records and their reports by name."""
    import json

    svc = engine_service(tmp_path_factory)
    try:
        with o.connect(svc.url("unix"), timeout=DEADLINE) as c:
            for k in range(40):
                c.order(1 + k % 3, k + 1, 1 + k // 2 % 2, k % 2, 100 + k % 5, 1 + k % 4,
                        tif=(o.GTC, o.IOC, o.FOK)[k % 3])
            c.order(9, 1000, 1, "buy", 1, 5)  # rests below every seller
            assert isinstance(c.replace_by_client(9, 1000, 1001, 2, 3)[0], o.ReplacedEx)
            assert isinstance(c.order_cancel(9, 1001)[0], o.CanceledEx)
    except BaseException:
        svc.kill()
        raise
    summary = svc.stop()
    run = subprocess.run([bin_path(), "engine", "run", str(svc.journal / "commands.ofl"),
                          "--instruments", svc.instruments, "--quiet"],
                         capture_output=True, text=True, timeout=DEADLINE)
    assert json.loads(run.stdout)["state_hash"] == summary["state_hash"]
    dump = subprocess.run([bin_path(), "journal", "dump", str(svc.journal / "commands.ofl")],
                          capture_output=True, text=True, timeout=DEADLINE)
    recs = [json.loads(x) for x in dump.stdout.splitlines()]
    assert [r["kind"] for r in recs] == ["Order"] * 41 + ["ReplaceByClient", "Cancel"]
    assert recs[1]["tif"] == "IOC" and recs[1]["side"] == "Sell" and recs[0]["type"] == "Limit"
    ev = subprocess.run([bin_path(), "journal", "dump", str(svc.journal / "events.ofl")],
                        capture_output=True, text=True, timeout=DEADLINE)
    kinds = {json.loads(x)["kind"] for x in ev.stdout.splitlines()}
    assert {"AcceptedEx", "Fill", "ReplacedEx", "CanceledEx"} <= kinds


def test_journal_dump_prints_risk_records_as_their_bytes(tmp_path):
    """`journal dump` of a risk record (0x11 RiskLimits) prints its payload bytes; it printed a
    VenueRejected of zeros (reason "InvalidQuantity") before."""
    import json
    import signal

    (tmp_path / "risk").write_text("account 1 max_qty 100\n")
    log = open(tmp_path / "log", "wb")
    p = subprocess.Popen([bin_path(), "engine", "serve", "--journal", str(tmp_path / "j"),
                          "--unix", str(tmp_path / "s"), "--instruments", "1-2", "--risk",
                          str(tmp_path / "risk")], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=log)
    try:
        until = time.monotonic() + DEADLINE
        while "listening unix" not in (tmp_path / "log").read_text(errors="replace"):
            assert p.poll() is None and time.monotonic() < until
            time.sleep(0.01)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(DEADLINE)
        log.close()
    out = subprocess.run([bin_path(), "journal", "dump", str(tmp_path / "j" / "commands.ofl")],
                         capture_output=True, text=True, timeout=DEADLINE).stdout
    recs = [json.loads(x) for x in out.splitlines()]
    assert [r["kind"] for r in recs] == ["RiskLimits", "RiskLimits"]  # the reset, account 1
    assert all(set(r) == {"journal_seq", "kind", "payload"} for r in recs)
    limits = bytes.fromhex(recs[1]["payload"])
    assert limits[:8] == (1).to_bytes(8, "little") and (100).to_bytes(8, "little") in limits


_SECRETS = {"alpha": "alpha-secret-0123456789", "bravo": "bravo-secret-9876543210"}
_SESSIONS = f"alpha {_SECRETS['alpha']} 1,2\nbravo {_SECRETS['bravo']} 3\n"


def _session(v, name):
    return o.connect(v.url, session=name, secret=_SECRETS[name], timeout=DEADLINE)


def test_session_gateway_commands(tmp_path):
    """With sessions a gateway command is Keyed and checked like the others: the account must be
    held (else VenueRejected NotAuthorized), and a resend is answered with the original
    reports."""
    from engine_service import VenueProcess

    v = VenueProcess(tmp_path, _SESSIONS)
    v.start()
    try:
        with _session(v, "alpha") as a:
            first = a.order(1, 1, 1, "buy", 100, 1)
            assert isinstance(first[0], o.AcceptedEx)
            no = a.order(3, 2, 1, "buy", 100, 1)
            assert isinstance(no[0], o.VenueRejected) and no[0].reason_name == "NotAuthorized"
            no = a.order_cancel(3, 5)
            assert isinstance(no[0], o.VenueRejected) and no[0].reason_name == "NotAuthorized"
            seq = a.next_client_seq - 3  # the first order's client_seq: resent, not re-applied
            assert a.call(o.Order(1, 1, 1, 100, 1, o.BUY), client_seq=seq) == first
        stopped = v.stop()
    except BaseException:
        v.kill()
        raise
    run = subprocess.run([bin_path(), "engine", "run", str(tmp_path / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


def test_session_gateway_cancel_on_disconnect(tmp_path):
    """A gateway order is its session's: cancel on disconnect takes it."""
    from engine_service import VenueProcess

    (tmp_path / "risk").write_text("cancel-on-disconnect bravo\n")
    v = VenueProcess(tmp_path, _SESSIONS, "--risk", str(tmp_path / "risk"))
    v.start()
    try:
        b = _session(v, "bravo")
        oid = b.order(3, 1, 1, "sell", 500, 10 ** 12)[0].order_id
        b.close()  # the session's last connection: its orders are canceled
        with _session(v, "alpha") as a:
            until = time.monotonic() + DEADLINE
            coid = 10
            while True:
                coid += 1
                r = a.order(2, coid, 1, "buy", 500, 1)
                if [type(e) for e in r] == [o.AcceptedEx]:
                    break
                assert [type(e) for e in r] == [o.AcceptedEx, o.Fill]
                assert r[1].maker_order_id == oid and time.monotonic() < until
        v.stop()
    except BaseException:
        v.kill()
        raise


def test_gateway_commands_under_risk(tmp_path):
    """Under --risk a gateway Order and a ReplaceByClient pass the same rules as NewLimit and
    Replace (here max_qty): over the limit -> VenueRejected MaxQuantity, journaled, and a replay
    of the journal gives the service's state hash."""
    from engine_service import VenueProcess

    (tmp_path / "risk").write_text("account 1 max_qty 100\n")
    v = VenueProcess(tmp_path, _SESSIONS, "--risk", str(tmp_path / "risk"))
    v.start()
    try:
        with _session(v, "alpha") as a:
            r = a.order(1, 1, 1, "buy", 100, 101)
            assert isinstance(r[0], o.VenueRejected) and r[0].reason_name == "MaxQuantity"
            assert r[0].client_order_id == 1
            r = a.order(1, 2, 1, "buy", 100, 100)
            assert isinstance(r[0], o.AcceptedEx) and r[0].quantity == 100
            r = a.replace_by_client(1, 2, 3, 100, 101)
            assert isinstance(r[0], o.VenueRejected) and r[0].reason_name == "MaxQuantity"
            r = a.replace_by_client(1, 2, 3, 100, 50)  # only reduces: always allowed
            assert isinstance(r[0], o.ReplacedEx) and r[0].remaining == 50
        stopped = v.stop()
    except BaseException:
        v.kill()
        raise
    run = subprocess.run([bin_path(), "engine", "run", str(tmp_path / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr


# ---------------------------------------------------------------- send now, recv later

def test_pipeline_replies_in_order_with_fills_between(tmp_path):
    """send() three commands; the answer: a fill, reply 1, a fill, reply 2 (its own two
    Trades), reply 3, a fill. Each recv() returns its command's reply; fills() while replies
    are owed returns the fills up to the next reply and leaves that reply for recv()."""
    answer = (_trade(1, 70) + _reply(71) + _trade(2, 70) + _reply(72, _trade(3, 72) + _trade(4, 72))
              + _reply(73) + _trade(5, 72))
    f = Fake(tmp_path, 3, answer)
    cmds = [o.NewLimit(7, 1, 1, o.SELL, 100, 1), o.NewLimit(8, 2, 1, o.BUY, 100, 2),
            o.CancelByClient(7, 1)]
    with o.connect(f.url, timeout=DEADLINE) as c:
        with pytest.raises(ValueError):
            c.recv()  # nothing owed
        assert c.send(cmds) == 3 and c.unanswered == 3
        with pytest.raises(ValueError):
            c.call(cmds[0])  # the next reply is not its own
        with pytest.raises(ValueError):
            c.send_many(cmds)
        deadline = time.monotonic() + DEADLINE
        got = []
        while not got and time.monotonic() < deadline:
            got = c.fills()
        assert [t.event_seq for t in got] == [1] and c.unanswered == 3
        r1 = c.recv()
        assert r1.command_seq == 71 and len(r1) == 1 and c.unanswered == 2
        r2 = c.recv()
        assert r2.command_seq == 72 and [type(e) for e in r2] == [o.Accepted, o.Trade, o.Trade]
        assert [t.event_seq for t in c.fills()] == [2]
        assert c.recv().command_seq == 73 and c.unanswered == 0
        assert [t.event_seq for t in c.fills(timeout=DEADLINE)] == [5]
    assert f.cmds == cmds  # sent in order, as given
    f.join()


def test_pipeline_errors(tmp_path):
    f = Fake(tmp_path, 2, b"", hold=True)
    c = o.connect(f.url, timeout=0.2, max_inflight=2)
    with pytest.raises(TypeError):
        c.send([o.NewLimit(7, 1, 1, o.BUY, 100, 1), o.Accepted(1, 1, 1, 1, 1, 1)])
    with pytest.raises(ValueError):
        c.send([o.NewLimit(7, 1, 1, 5, 100, 1)])  # a bad side: nothing is sent
    assert c.unanswered == 0
    assert c.send([]) == 0
    assert c.send([o.CancelByOrder(k + 1) for k in range(3)]) == 2  # the window: 2 of 3
    assert c.send([o.CancelByOrder(9)]) == 0 and c.unanswered == 2
    with pytest.raises(EngineServiceTimeout):
        c.recv()
    assert c.closed and c.unanswered == 2  # what a resend starts from
    with pytest.raises(EngineServiceError) as ei:
        c.send([o.CancelByOrder(1)])
    assert ei.value.code == -errno.ENOTCONN
    f.join()
    # a server that answers the first of two and closes
    f = Fake(tmp_path, 2, _reply(5), hold=False)
    with o.connect(f.url, timeout=DEADLINE) as c:
        assert c.send([o.CancelByOrder(1), o.CancelByOrder(2)]) == 2
        assert c.recv().command_seq == 5
        with pytest.raises(EngineServiceError) as ei:
            c.recv()
        assert ei.value.code == -errno.ECONNRESET and c.unanswered == 1
    f.join()


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_service_pipeline(svc, kind):
    """A resting order and the order that crosses it in one send(): applied in that order, the
    Trade is in the second reply; then 400 commands through a window of 8."""
    base = 300 if kind == "unix" else 400
    with o.connect(svc.url(kind), timeout=DEADLINE) as c:
        assert c.send([o.NewLimit(17, base, 1, o.SELL, 3000, 1),
                       o.NewLimit(18, base, 1, o.BUY, 3000, 1)]) == 2
        rest, cross = c.recv(), c.recv()
        assert isinstance(rest[0], o.Accepted) and cross.command_seq == rest.command_seq + 1
        assert isinstance(cross[1], o.Trade) and cross[1].maker_order_id == rest[0].order_id
        assert c.fills() == []  # the maker is this connection: no unsolicited copy
    with o.connect(svc.url(kind), timeout=DEADLINE, max_inflight=8) as c:
        cmds = []
        for k in range(200):
            cmds.append(o.NewLimit(19, 10**7 + base + k, 1, o.BUY, 10, 1))
            cmds.append(o.CancelByClient(19, 10**7 + base + k))
        sent, replies = 0, []
        while len(replies) < len(cmds):
            sent += c.send(cmds[sent:])
            assert c.unanswered <= 8
            replies.append(c.recv())
        seqs = [r.command_seq for r in replies]
        assert seqs == sorted(seqs) and len(set(seqs)) == 400
        assert all(isinstance(r[0], o.Canceled if k % 2 else o.Accepted)
                   for k, r in enumerate(replies))


def test_session_pipeline_resend(tmp_path):
    """A logged-on session numbers each command send() takes with the next client_seq; after a
    broken connection the unanswered count says what to resend, and a resend of the same
    commands from their first client_seq gets the original replies (applied once)."""
    from engine_service import VenueProcess

    v = VenueProcess(tmp_path, _SESSIONS)
    v.start()
    try:
        cmds = [o.NewLimit(2, 50, 1, o.SELL, 700, 1), o.NewLimit(1, 50, 1, o.BUY, 700, 1)]
        with _session(v, "alpha") as a:
            first = a.next_client_seq
            assert a.send(cmds) == 2 and a.next_client_seq == first + 2
            rest, cross = a.recv(), a.recv()
            assert isinstance(cross[1], o.Trade) and cross[1].maker_order_id == rest[0].order_id
        # as after a broken connection: log on again and resend from the first client_seq
        with _session(v, "alpha") as b:
            assert b.send(cmds, first_client_seq=first) == 2
            assert [b.recv(), b.recv()] == [rest, cross]  # the originals, not applied again
            assert isinstance(b.call(o.NewLimit(2, 51, 1, o.SELL, 701, 1))[0], o.Accepted)
        stopped = v.stop()
    except BaseException:
        v.kill()
        raise
    run = subprocess.run([bin_path(), "engine", "run", str(tmp_path / "j" / "commands.ofl"),
                          "--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert stopped["state_hash"] in run.stdout, run.stdout + run.stderr
