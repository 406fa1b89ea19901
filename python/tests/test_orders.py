"""The Python order client (tollfree.orders): the framing vectors shared with the C client
(tests/vectors/ofl_frames.txt), the vectors' server streams played by a fake server, the client's
errors, and the real ``tollfree engine serve`` over Unix and TCP when it is built.
Deadlines only guard against hangs."""
from __future__ import annotations

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
from tollfree.errors import EngineError, EngineTimeout

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
        with pytest.raises(EngineError) as ei:
            c.send_many(cmds)
        assert ei.value.code == err, ei.value
        assert c.closed
        with pytest.raises(EngineError) as ei:
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
    with pytest.raises(EngineError) as ei:
        o.connect(f"unix:{tmp_path}/missing.sock")
    assert ei.value.code == -errno.ENOENT
    # a server that never answers: a timeout, then the client is closed
    f = Fake(tmp_path, 1, b"", hold=True)
    c = o.connect(f.url, timeout=0.2)
    with pytest.raises(ValueError):
        c.new_limit(1, 1, 1, "sideways", 100, 1)  # before anything is sent
    with pytest.raises(TypeError):
        c.call(o.Accepted(1, 1, 1, 1, 1, 1))
    with pytest.raises(EngineTimeout) as ei:
        c.new_limit(1, 1, 1, "buy", 100, 1)
    assert ei.value.code == -errno.ETIMEDOUT and isinstance(ei.value, TimeoutError)
    assert c.closed
    with pytest.raises(EngineError):
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
