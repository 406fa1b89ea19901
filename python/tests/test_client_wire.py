"""Client-side checks that need no server: wire layouts against the C headers, URL parsing,
input validation, SweepError."""
from __future__ import annotations

import errno
import pickle
import re
import socket
from pathlib import Path

import numpy as np
import pytest

import tollfree
from tollfree import wire
from tollfree.client import parse_url
from tollfree.errors import SweepError, SweepTimeout

INC = Path(__file__).resolve().parents[2] / "include" / "tollfree"


def _defines(name: str) -> dict:
    out = {}
    for m in re.finditer(r"^#define\s+(TF_\w+)\s+(.+?)\s*(/\*.*)?$", (INC / name).read_text(), re.M):
        expr = re.sub(r"(?<=[0-9A-Fa-f])u\b", "", m.group(2)).replace("ll", "")
        expr = expr.replace("(uint64_t)", "")
        try:
            out[m.group(1)] = eval(expr, {}, dict(out))  # noqa: S307 (our own header)
        except Exception:
            pass
    return out


def _enum(name: str) -> dict:
    return {k: int(v) for k, v in re.findall(r"\b(TF_E_\w+)\s*=\s*(-?\d+)", (INC / name).read_text())}


def test_opcodes_and_sizes_match_wire_h():
    d = _defines("wire.h")
    for py, c in [("V1_SWEEP", "V1_SWEEP"), ("V1_ECHO", "V1_ECHO"), ("HELLO", "HELLO"),
                  ("LOAD", "LOAD"), ("SWEEP_DS", "SWEEP_DS"), ("RUN_ONE", "RUN_ONE"),
                  ("SWEEP", "SWEEP"), ("ECHO", "ECHO"), ("DROP", "DROP"), ("STATS", "STATS"),
                  ("LOAD_FD", "LOAD_FD"), ("SESSION_OPEN", "SESSION_OPEN"),
                  ("SESSION_BAR", "SESSION_BAR"), ("SESSION_QUERY", "SESSION_QUERY"),
                  ("SESSION_CLOSE", "SESSION_CLOSE"), ("ERROR", "ERROR")]:
        assert getattr(wire, py) == d["TF_OP_" + c], py
    assert wire.VERSION == d["TF_WIRE_VERSION"]
    assert wire.V1_BODY_FIXED == d["TF_WIRE_V1_FIXED"]
    assert wire.V2_HDR_BODY == d["TF_WIRE_V2_HEADER"]
    assert wire.HDR.size == d["TF_WIRE_PREFIX"] + d["TF_WIRE_V2_HEADER"]
    assert wire.DEFAULT_MAX_FRAME == d["TF_WIRE_DEFAULT_MAX_FRAME"]
    assert wire.MAX_ERROR_MSG == d["TF_WIRE_MAX_ERROR_MSG"]
    assert wire.HELLO_REP.size == d["TF_WIRE_HELLO_REPLY"]
    assert wire.LOAD_REP.size == d["TF_WIRE_LOAD_REPLY"]
    assert wire.SWEEP_REP.size == d["TF_WIRE_SWEEP_REPLY_FIXED"]
    assert wire.RUN_ONE_REP.size == d["TF_WIRE_RUN_ONE_REPLY"]
    assert wire.SESSION_OPEN_REP.size == d["TF_WIRE_SESSION_OPEN_REPLY"]
    assert wire.SESSION_BAR_REP.size == d["TF_WIRE_SESSION_BAR_REPLY"]
    assert wire.SESSION_STATE_REP.size == d["TF_WIRE_SESSION_STATE_REPLY"]
    assert wire.STATS_REP.size == d["TF_WIRE_STATS_REPLY"] == 8 * len(wire.STATS_FIELDS)
    assert wire.ERROR_REP.size == d["TF_WIRE_ERROR_FIXED"]
    assert (wire.CAP_DATASETS, wire.CAP_SESSIONS, wire.CAP_LOAD_FD) == (
        d["TF_CAP_DATASETS"], d["TF_CAP_SESSIONS"], d["TF_CAP_LOAD_FD"])
    assert wire.SESSION_BAR_FRAME.size == 16 + wire.SESSION_BAR_REQ.size == 32
    assert wire.SESSION_BAR_REPLY_FRAME.size == 16 + wire.SESSION_BAR_REP.size == 40


def test_shm_layout_matches_shm_h():
    d = _defines("shm.h")
    assert wire.SHM_MAGIC == d["TF_SHM_MAGIC"]
    assert wire.SHM_VERSION == d["TF_SHM_VERSION"]
    assert wire.SHM_CTRL_BYTES == d["TF_SHM_CTRL_BYTES"]
    assert wire.SHM_MIN_RING == d["TF_SHM_MIN_RING"]
    assert wire.SHM_MAX_RING == d["TF_SHM_MAX_RING"]
    assert wire.SHM_WRAP == d["TF_SHM_WRAP"]
    assert wire.SHM_WAIT_NS == d["TF_SHM_WAIT_NS"]
    assert wire.SHM_HELLO.size == d["TF_SHM_HELLO_BYTES"]
    assert wire.SHM_HELLO_REP.size == d["TF_SHM_HELLO_REPLY_BYTES"]
    names = [n for n in dir(wire) if n.startswith("SHM_OFF_")]
    assert len(names) == 15
    for n in names:
        assert getattr(wire, n) == d["TF_" + n], n
    assert wire.SHM_REQ_RING == d["TF_SHM_OFF_REQ_RING"]
    for field in wire.SHM_CTRL_DTYPE.names:
        assert wire.SHM_CTRL_DTYPE.fields[field][1] == d["TF_SHM_OFF_" + field.upper()], field


def test_codes_match_error_h():
    e = _enum("error.h")
    for code, name in wire.CODE_NAMES.items():
        assert e["TF_E_" + name] == code, name
    assert wire.CLOSING_CODES <= set(wire.CODE_NAMES)


def test_parse_url():
    assert parse_url("unix:/tmp/x.sock") == ("unix", ("/tmp/x.sock",))
    assert parse_url("tcp:127.0.0.1:9000") == ("tcp", ("127.0.0.1", 9000))
    assert parse_url("tcp:9000") == ("tcp", ("127.0.0.1", 9000))
    assert parse_url("tcp:[::1]:9000") == ("tcp", ("::1", 9000))
    assert parse_url("shm:/tmp/s") == ("shm", ("/tmp/s",))
    assert parse_url("spawn:/bin/tf") == ("spawn", ("/bin/tf",))
    assert parse_url("spawn:")[0] == "spawn"
    for bad in ["", "unix:", "http://x", "tcp:host:notaport", "tcp:1:70000", "/tmp/x.sock"]:
        with pytest.raises(ValueError):
            parse_url(bad)
    with pytest.raises(TypeError):
        parse_url(5)


URL_VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "urls.txt"


def _url_vectors():
    out = []
    for line in URL_VECTORS.read_text().splitlines():
        if line and not line.startswith("#"):
            out.append(line.split(" "))
    return out


@pytest.mark.parametrize("vec", _url_vectors(), ids=lambda v: v[1][:40])
def test_url_vectors(vec):
    """The grammar the C clients follow too (tests/unit/test_urls.c reads the same file), for the
    sweep client (tollfree.client.parse_url) and the order client (tollfree.orders.parse_url)."""
    from tollfree import orders
    url = vec[1]
    if vec[0] == "bad":
        with pytest.raises(ValueError):
            parse_url(url)
        with pytest.raises(ValueError):
            orders.parse_url(url)
        return
    scheme = vec[2]
    want = (vec[3], int(vec[4])) if scheme == "tcp" else (vec[3],)
    assert parse_url(url) == (scheme, want)
    if scheme == "unix":
        assert orders.parse_url(url) == (socket.AF_UNIX, vec[3])
    elif scheme == "tcp":
        fam = socket.AF_INET6 if ":" in vec[3] else socket.AF_INET
        assert orders.parse_url(url) == (fam, want)
    else:
        with pytest.raises(ValueError):
            orders.parse_url(url)  # shm: is the sweep service's only


def test_url_vectors_cover_both_kinds():
    kinds = [v[0] for v in _url_vectors()]
    assert kinds.count("ok") >= 10 and kinds.count("bad") >= 20
    assert set(kinds) == {"ok", "bad"}


FRAME_VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "wire_frames.txt"


class _ScriptedTransport:
    """A transport that records what the client sends and answers with a scripted reply."""

    def __init__(self, reply: bytes):
        self.sent = bytearray()
        self.reply = memoryview(reply)
        self.pos = 0
        self.closed = False

    def sendv(self, bufs, nbytes, fds=()):
        for b in bufs:
            self.sent += bytes(b)

    def begin_reply(self):
        pass

    def read(self, mv, hint=0):
        n = len(mv)
        assert self.pos + n <= len(self.reply), "the client read past the scripted reply"
        mv[:] = self.reply[self.pos:self.pos + n]
        self.pos += n

    def end_reply(self):
        pass

    def close(self):
        self.closed = True


def _frame_vectors():
    return [line.split(" ") for line in FRAME_VECTORS.read_text().splitlines()
            if line and not line.startswith("#")]


def _fields(text: str) -> dict:
    return dict(kv.split("=", 1) for kv in text.split(",")) if text != "-" else {}


@pytest.mark.parametrize("vec", _frame_vectors(), ids=lambda v: f"{v[0]}-{v[4][:12]}")
def test_frame_vectors(vec):
    """The Python client sends exactly the bytes the C client sends for the same call, and reads
    the same replies the same way (tests/unit/test_client_vectors.c reads the same file)."""
    from tollfree.client._v2 import Client, Dataset, Session
    call, args, req, rep, result = vec[0], _fields(vec[1]), vec[2], vec[3], _fields(vec[4])
    t = _ScriptedTransport(bytes.fromhex(rep))
    c = Client(t, "vectors:")
    params = [int(v) for v in args.get("params", "0:0:0:0:0:0").split(":")]

    def make_call():
        if call == "hello":
            return c.hello()
        if call == "run_one":
            pnl, trades = c.run_one(Dataset(int(args["handle"]), 0), params)
            return {"pnl": pnl, "trades": trades}
        if call == "session_bar":
            s = Session(c, int(args["session"]), params)
            pos = s.on_bar(float.fromhex(args["close"]))
            return {"position": pos, "trades": s.trades, "pnl": s.pnl}
        if call == "session_close":
            return Session(c, int(args["session"]), params).close()
        if call == "drop":
            return c.drop(Dataset(int(args["handle"]), 0))
        raise AssertionError(f"unknown call {call}")

    if "error" in result:
        with pytest.raises(SweepError) as ei:
            make_call()
        assert ei.value.code == int(result["error"])
        assert ei.value.message == result["message"].replace("_", " ")
    else:
        got = make_call()
        for k, v in result.items():
            want = float.fromhex(v) if "p" in v or "." in v else int(v)
            assert got[k] == want, (k, got[k], want)
    assert bytes(t.sent).hex() == req
    assert t.pos == len(t.reply), "the whole reply is consumed"


def test_engine_error():
    e = SweepError(wire.E_UNKNOWN_DATASET, "no such dataset")
    assert isinstance(e, Exception)
    assert (e.code, e.message, e.name) == (-1206, "no such dataset", "UNKNOWN_DATASET")
    assert "UNKNOWN_DATASET" in str(e) and "-1206" in str(e)
    assert SweepError(-errno.EPIPE).name == "EPIPE"
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.code, e2.message) == (e.code, e.message)
    t = SweepTimeout()
    assert isinstance(t, SweepError) and isinstance(t, TimeoutError)
    assert isinstance(t, socket.timeout) and t.code == -errno.ETIMEDOUT
    assert tollfree.SweepError is SweepError


def test_connect_errors_without_server(tmp_path):
    with pytest.raises(SweepError) as ei:
        tollfree.connect(f"unix:{tmp_path}/nothing.sock")
    assert ei.value.code == -errno.ENOENT
    with pytest.raises(SweepError) as ei:
        tollfree.connect(f"shm:{tmp_path}/nothing.sock")
    assert ei.value.code == -errno.ENOENT
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(SweepError) as ei:
        tollfree.connect(f"tcp:127.0.0.1:{port}")
    assert ei.value.code == -errno.ECONNREFUSED
    with pytest.raises(ValueError):
        tollfree.connect(f"shm:{tmp_path}/x", ring_bytes=100_000)
    with pytest.raises(ValueError):
        tollfree.connect(f"shm:{tmp_path}/x", spin=-1)
    c = tollfree.connect(f"spawn:{tmp_path}/no-such-binary")
    with pytest.raises(SweepError) as ei:
        c.hello()
    assert ei.value.code == -errno.ENOENT


def test_inputs_checked_before_anything_is_sent(tmp_path):
    from tollfree.client._v2 import as_combo

    c = tollfree.connect(f"spawn:{tmp_path}/no-such-binary")  # never reached: checks come first
    close = np.ones(10)
    params = np.array([[5, 3, 2, 3, 1, 2]], np.int64)
    with pytest.raises(TypeError):
        c.sweep(close.astype(np.float32), params)
    with pytest.raises(TypeError):
        c.sweep(list(close), params)
    with pytest.raises(ValueError):
        c.sweep(close.reshape(2, 5), params)
    with pytest.raises(ValueError):
        c.sweep(close[::2], params)
    with pytest.raises(TypeError):
        c.sweep(close, params.astype(np.int32))
    with pytest.raises(ValueError):
        c.sweep(close, params.reshape(6, 1))
    with pytest.raises(ValueError):
        c.sweep(close, np.zeros((1, 6), np.int64))
    with pytest.raises(ValueError):
        c.sweep(close, params, out=(np.empty(2), np.empty(2, np.int64)))
    with pytest.raises(ValueError):
        as_combo([1, 2, 3])
    with pytest.raises(ValueError):
        as_combo([0, 1, 1, 1, 1, 1])
    with pytest.raises(TypeError):
        as_combo(np.ones(6, np.float64))
    with pytest.raises(TypeError):
        as_combo(["a"] * 6)
    assert as_combo((5, 3, 2, 3, 1, 2)).tolist() == [5, 3, 2, 3, 1, 2]
    with pytest.raises(SweepError) as ei:
        c.session([5, 3, 2, 3, 1, 2])
    assert ei.value.code == wire.E_UNSUPPORTED


REPLY_VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "v2_replies.txt"


def _reply_vectors():
    return [line.split(" ") for line in REPLY_VECTORS.read_text().splitlines()
            if line and not line.startswith("#")]


def _reply_value(text: str):
    return float.fromhex(text) if "0x" in text or "p" in text else int(text)


@pytest.mark.parametrize("vec", _reply_vectors(), ids=lambda v: f"{v[0]}-{v[2][:16]}")
def test_reply_vectors(vec):
    """Each v2 reply payload decodes with the client's struct to the fields the C decoder gives,
    and the fields encode to the bytes the C encoder writes (tests/unit/test_wire.c reads the same
    file)."""
    name, fields, payload = vec[0], _fields(vec[1]), bytes.fromhex(vec[2])
    want = {k: _reply_value(v) for k, v in fields.items()}
    S, names = wire.REPLIES[name]
    assert S.size == len(payload)
    got = wire.decode_reply(name, payload)
    assert set(got) == set(want)
    for k, v in want.items():
        if isinstance(v, float):  # the same bits (-0.0 included)
            assert wire.F64.pack(got[k]) == wire.F64.pack(v), k
        else:
            assert got[k] == v, k
    assert wire.encode_reply(name, want) == payload


def test_reply_vectors_cover_every_reply():
    assert {v[0] for v in _reply_vectors()} == set(wire.REPLIES)
