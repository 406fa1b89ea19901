"""The v1 client: the published protocol (docs/protocol.md, "v1") and nothing else.

    request:  [u32 body_len][u8 op][u32 n_bars][u32 n_combos][n_bars x f64][n_combos x 6 x i64]
    op 0 sweep -> [n_combos x f64 pnl][n_combos x i64 trades];  op 1 echo -> the close array

v1 has no error replies of its own: tollfree answers a malformed v1 request with a v2 error frame
(body starting with 0x7F) whose length differs from the reply this client expects; it is raised
as :class:`~tollfree.errors.SweepError` with the frame's code.
"""
from __future__ import annotations

import errno

import numpy as np

from tollfree import wire
from tollfree.binding import as_close, as_params
from tollfree.errors import SweepError

__all__ = ["Client"]


class Client:
    """``Client(path_or_url)``: a Unix socket path, or a ``unix:``/``tcp:``/``shm:``/``spawn:``
    URL (see :func:`tollfree.connect`). Context manager; one call at a time."""

    def __init__(self, path_or_url: str, timeout: float | None = None, spin: int | None = None):
        from tollfree.client import DEFAULT_SPIN, open_transport, parse_url

        url = str(path_or_url)
        if url.split(":", 1)[0] not in ("unix", "tcp", "shm", "spawn"):
            url = "unix:" + url
        self.url = url
        self.timeout = timeout
        scheme, args = parse_url(url)
        self._spawn = args[0] if scheme == "spawn" else None
        self._t = None if self._spawn else open_transport(
            url, timeout, DEFAULT_SPIN if spin is None else spin)
        self._hdr = bytearray(wire.V1_HDR.size)
        self._hdr_mv = memoryview(self._hdr)
        self._len = bytearray(4)
        self._len_mv = memoryview(self._len)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed or (self._t is not None and self._t.closed)

    def _transport(self):
        if self._closed:
            raise SweepError(-errno.EBADF, "the client is closed")
        if self._spawn is None:
            return self._t
        from tollfree.client._stream import PipeTransport

        return PipeTransport(self._spawn, self.timeout)

    def _call(self, op: int, close: np.ndarray, params: np.ndarray | None, outs) -> None:
        n = close.shape[0]
        m = 0 if params is None else params.shape[0]
        body = wire.v1_body_len(n, m)
        if n > 0xFFFFFFFF or m > 0xFFFFFFFF or body > 0xFFFFFFFF:
            raise ValueError("a v1 frame carries at most 2**32-1 bytes")
        wire.V1_HDR.pack_into(self._hdr, 0, body, op, n, m)
        parts = [self._hdr_mv, memoryview(close).cast("B")]
        if m:
            parts.append(memoryview(params).cast("B"))
        expect = sum(a.nbytes for a in outs)
        t = self._transport()
        try:
            t.sendv(parts, 4 + body)
            t.begin_reply()
            t.read(self._len_mv, 4 + expect)
            (blen,) = wire.LEN.unpack_from(self._len)
            if blen != expect:
                self._error(t, blen, expect)
            for a in outs:
                if a.nbytes:
                    t.read(memoryview(a).cast("B"), a.nbytes)
            t.end_reply()
        finally:
            if self._spawn is not None:
                t.close()

    def _error(self, t, blen: int, expect: int):
        if blen < 20 or blen > 20 + wire.MAX_ERROR_MSG:
            t.close()
            raise SweepError(wire.E_PROTOCOL, f"v1 reply of {blen} bytes (expected {expect})")
        buf = bytearray(blen)
        t.read(memoryview(buf))
        t.end_reply()
        code, mlen = wire.ERROR_REP.unpack_from(buf, wire.V2_HDR_BODY)
        if buf[0] != wire.ERROR or mlen != blen - 20:
            t.close()
            raise SweepError(wire.E_PROTOCOL, f"v1 reply of {blen} bytes (expected {expect})")
        msg = bytes(buf[20:]).decode("utf-8", "replace")
        if code in wire.CLOSING_CODES:
            t.close()
        raise SweepError(code, msg)

    def sweep(self, close: np.ndarray, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(pnl float64[m], trades int64[m])``, bit-identical to :func:`tollfree.sweep`."""
        close, params = as_close(close), as_params(params)
        m = params.shape[0]
        pnl, trades = np.empty(m, np.float64), np.empty(m, np.int64)
        self._call(wire.V1_SWEEP, close, params, (pnl, trades))
        return pnl, trades

    def echo(self, close: np.ndarray) -> np.ndarray:
        """The close array sent and received back (a new array)."""
        close = as_close(close)
        out = np.empty_like(close)
        self._call(wire.V1_ECHO, close, None, (out,))
        return out

    def close(self) -> None:
        self._closed = True
        if self._t is not None:
            self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
