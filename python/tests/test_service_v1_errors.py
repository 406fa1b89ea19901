"""v1 error replies are told apart from v1 results by length alone: every v1 reply body is a
multiple of 8 bytes, and the server keeps every error body's length off multiples of 8."""
import struct

import pytest


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "server closed"
        buf += chunk
    return buf


def v1_sweep(n_bars, combos):
    body = struct.pack("<BII", 0, n_bars, len(combos)) + struct.pack(f"<{n_bars}d", *(
        [100.0 + i for i in range(n_bars)])) + b"".join(struct.pack("<6q", *c) for c in combos)
    return struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("combos", [
    [(0, 1, 1, 1, 1, 1)], [(6, 3, 0, 3, 1, 2)] * 3, [(-7, 1, 1, 1, 1, 1)] * 9,
    [(2**31 + 1, 1, 1, 1, 1, 1)], [(1, 1, 1, 1, 1, 2**40)] * 2,
])
@pytest.mark.parametrize("n_bars", [0, 5, 11])
def test_v1_error_bodies_are_never_a_multiple_of_8(server, combos, n_bars):
    with server.raw("unix") as s:
        s.sendall(v1_sweep(n_bars, combos))
        (blen,) = struct.unpack("<I", recv_exact(s, 4))
        body = recv_exact(s, blen)
        assert body[0] == 0x7F and body[1] == 2
        code, mlen = struct.unpack_from("<iI", body, 12)
        too_short = min(min(c) for c in combos) < 1
        assert code == (-1100 if too_short else -1101) and mlen == blen - 20
        assert blen % 8 != 0
        # the connection is still usable: a good request gets its 16-byte answer
        s.sendall(v1_sweep(3, [(1, 1, 1, 1, 1, 1)]))
        (blen,) = struct.unpack("<I", recv_exact(s, 4))
        assert blen == 16 and len(recv_exact(s, 16)) == 16
