"""A v1 client written here from docs/protocol.md alone (a raw socket and struct, nothing from
tollfree's client code) gets correct answers from `tollfree serve`."""
from __future__ import annotations

import struct

import numpy as np

import tollfree
from conftest import DEADLINE  # noqa: E402


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        assert k, "server closed the connection"
        got += k
    return bytes(buf)


def v1_request(sock, opcode, close, params):
    """docs/protocol.md, v1: [u32 body_len][u8 opcode][u32 n_bars][u32 n_combos][close f64][params 6 x i64]."""
    n_bars, n_combos = len(close), len(params)
    body = struct.pack("<BII", opcode, n_bars, n_combos)
    body += struct.pack(f"<{n_bars}d", *close)
    for combo in params:
        body += struct.pack("<6q", *combo)
    assert len(body) == 9 + 8 * n_bars + 48 * n_combos
    sock.sendall(struct.pack("<I", len(body)) + body)
    (body_len,) = struct.unpack("<I", _recv_exact(sock, 4))
    return _recv_exact(sock, body_len)


def v1_sweep(sock, close, params):
    reply = v1_request(sock, 0, close, params)
    m = len(params)
    assert len(reply) == 16 * m
    return list(struct.unpack(f"<{m}d", reply[:8 * m])), list(struct.unpack(f"<{m}q", reply[8 * m:]))


def v1_echo(sock, close, params=()):
    reply = v1_request(sock, 1, close, params)
    assert len(reply) == 8 * len(close)
    return list(struct.unpack(f"<{len(close)}d", reply))


def _check(sock, close_list, params_list):
    pnl, trades = v1_sweep(sock, close_list, params_list)
    want_pnl, want_trades = tollfree.sweep(np.array(close_list, np.float64),
                                           np.array(params_list, np.int64).reshape(-1, 6))
    assert struct.pack(f"<{len(pnl)}d", *pnl) == want_pnl.tobytes()
    assert trades == want_trades.tolist()


def test_raw_v1_client_unix_and_tcp(server, default_case):
    close, params, _, _ = default_case
    close_list = close[:20_000].tolist()
    params_list = [list(map(int, p)) for p in params[::8]]
    for kind in ("unix", "tcp"):
        sock = server.raw(kind, timeout=DEADLINE)
        try:
            _check(sock, close_list, params_list)
            assert v1_echo(sock, close_list[:1000]) == close_list[:1000]
            # echo ignores params but they are still sent and must be consumed
            assert v1_echo(sock, [1.5, -2.25], [[1, 1, 1, 1, 1, 1]]) == [1.5, -2.25]
            _check(sock, [100.0, 101.0, 99.5], [[1, 1, 1, 1, 1, 1], [2, 1, 1, 1, 1, 1]])
            assert v1_sweep(sock, [1.0, 2.0], []) == ([], [])
            assert v1_echo(sock, []) == []
        finally:
            sock.close()


def test_raw_v1_full_default_sweep(server, default_case):
    close, params, pnl, trades = default_case
    sock = server.raw("unix", timeout=DEADLINE)
    try:
        got_pnl, got_trades = v1_sweep(sock, close.tolist(), params.tolist())
    finally:
        sock.close()
    assert struct.pack(f"<{len(got_pnl)}d", *got_pnl) == pnl.tobytes()
    assert got_trades == trades.tolist()


def test_raw_v1_over_stdio(tf_bin, default_case):
    """spawn: one `tollfree serve --stdio` process, two requests on its stdin."""
    import subprocess

    close = [100.0, 100.5, 101.0, 100.25, 99.0, 98.5, 99.75]
    params = [[3, 2, 2, 2, 1, 1]]
    req = b""
    for op, ps in ((0, params), (1, [])):
        body = struct.pack("<BII", op, len(close), len(ps)) + struct.pack(f"<{len(close)}d", *close)
        for p in ps:
            body += struct.pack("<6q", *p)
        req += struct.pack("<I", len(body)) + body
    r = subprocess.run([tf_bin, "serve", "--stdio"], input=req, capture_output=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    (n1,) = struct.unpack_from("<I", out)
    assert n1 == 16
    want = tollfree.sweep(np.array(close), np.array(params, np.int64))
    assert out[4:12] == want[0].tobytes() and out[12:20] == want[1].tobytes()
    (n2,) = struct.unpack_from("<I", out, 20)
    assert n2 == 8 * len(close) and out[24:] == struct.pack(f"<{len(close)}d", *close)
