"""Pipelining on an order-client connection: send now, read each reply later.

    c = tollfree.orders.connect("unix:/tmp/engine.sock")
    c.send([o.NewLimit(2, 1, 1, o.SELL, 100, 1),     # a resting order ...
            o.NewLimit(1, 1, 1, o.BUY, 100, 1)])     # ... and the order that crosses it
    rest, cross = c.recv(), c.recv()                 # their replies, in the order sent

The methods :meth:`tollfree.orders.Client.send`, :meth:`~tollfree.orders.Client.recv` and
:attr:`~tollfree.orders.Client.unanswered` are this module's functions, the C client's
``tf_orders_send``, ``tf_orders_recv`` and ``tf_orders_unanswered`` (include/tollfree/orders.h,
docs/engine-service.md "Pipelining"). The service answers each connection's commands in the order
it sent them, so the i-th :func:`recv` returns the i-th command's reply: its events, whose
``command_seq`` is the :class:`~tollfree.orders.Reply`'s. Commands that do not need each other's
events (a counterparty's resting order and the order that crosses it, two quotes, a cancel and a
new order named by client ids) go out in one :func:`send` and cost one round trip together.

:func:`send` takes commands while fewer than ``max_inflight`` are unanswered and returns how many
it took (fewer than given is flow control, not an error: read replies, then send the rest). The
commands it takes are checked before any is sent (``TypeError``/``ValueError``; those past the
window are checked by the call that takes them). It writes what it took
before it returns, reading what the service sends meanwhile into the connection's buffer, so a
service that answers while the client writes is never held back. While commands sent this way
are unanswered, ``call`` and ``send_many`` raise ``ValueError`` (the next reply on the stream is
not theirs), and ``fills()`` returns the unsolicited Trades read so far, up to the next reply,
without waiting (the fills behind a reply are read with it); ``unsolicited()`` likewise for the
events behind an Unsolicited marker (a kill switch's cancels), which :func:`recv` also reads
aside, never as a reply. Failures are those of the client:
:class:`tollfree.EngineServiceError` (``-errno``, ``TRUNCATED``, ``PROTOCOL``) and
:class:`tollfree.EngineServiceTimeout`, after which the connection is closed; ``unanswered``
then still says how many commands had no reply (a logged-on session resends them with
``send(cmds, first_client_seq=N)``).
"""
from __future__ import annotations

import errno
import select
import ssl
import time
from typing import Iterable

from tollfree.errors import EngineServiceError, EngineServiceTimeout, os_error
from tollfree import orders as _o

__all__ = ["send", "recv", "fills"]

_FILLS = (0x85, 0x94)  # a Trade or a gateway Fill between replies: unsolicited
_COMMANDS = (_o.NewLimit, _o.NewMarket, _o.CancelByOrder, _o.CancelByClient, _o.Replace,
             _o.Order, _o.Cancel, _o.ReplaceByClient)


def _closed(c) -> None:
    if c._sock is None:
        raise EngineServiceError(-errno.ENOTCONN, "the connection is closed")


def send(c, cmds: Iterable, first_client_seq: int | None = None) -> int:
    """Sends commands without waiting for their replies; returns how many were taken (see the
    module's text). A logged-on session numbers them from ``first_client_seq`` (a resend) or the
    next client_seq."""
    if first_client_seq is not None and first_client_seq < 1:
        raise ValueError("client_seq starts at 1")
    _closed(c)
    take = list(cmds)[:max(0, c.max_inflight - c._unanswered)]
    for cmd in take:  # what is taken is checked before any of it is sent
        if not isinstance(cmd, _COMMANDS):
            raise TypeError(f"not a command: {cmd!r}")
        _o.encode_frame(cmd)
    if not take:
        return 0
    data = b"".join(c._encode(cmd, first_client_seq if i == 0 else None)
                    for i, cmd in enumerate(take))
    c._unanswered += len(take)
    _write(c, memoryview(data))
    return len(take)


def _write(c, data: memoryview) -> None:
    """Writes all of data within the timeout, taking in what the service sends meanwhile."""
    deadline = c._deadline()
    sock = c._sock
    try:
        while data:
            sock.setblocking(False)  # (again: _read_nowait leaves the client's timeout set)
            try:
                n = sock.send(data)
                data = data[n:]
                continue
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError,
                    ssl.SSLWantReadError):
                pass
            except OSError as e:
                c._fail(os_error(e, f"send to {c.url}", EngineServiceError))
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                c._fail(EngineServiceTimeout(
                    message=f"{c.url}: timed out sending to the engine service"))
            r, w, _ = select.select([sock], [sock], [], left)
            if r and not c._read_nowait():
                c._fail(EngineServiceError(-errno.ECONNRESET,
                                           "the engine service closed the connection"))
    finally:
        if c._sock is not None:
            c._sock.settimeout(c.timeout)


def recv(c) -> "_o.Reply":
    """The reply of the oldest command :func:`send` sent and no recv has returned: its events,
    in order, as a :class:`~tollfree.orders.Reply`. Waits up to the client's timeout; an
    unsolicited Trade read before it is queued for ``fills()``. ``ValueError`` when no command
    is unanswered."""
    _closed(c)
    if not c._unanswered:
        raise ValueError("no command is unanswered: send() first")
    deadline = c._deadline()
    buf = c._rx
    off = 0
    cur = None
    try:
        while True:
            try:
                r = _o.decode_frame(buf, off, venue=True)
            except _o.FrameError as e:
                c._fail(EngineServiceError(_o.E_PROTOCOL, f"the engine sent a bad frame: {e}"))
            if r is None:
                del buf[:off]
                off = 0
                c._recv(deadline, cur is not None or c._unsol_left > 0)
                buf = c._rx
                continue
            msg, jseq, size = r
            off += size
            if c._aside(msg, cur is not None):
                continue
            kind = msg.KIND
            if kind == 0:
                if cur is None or cur.command_seq != jseq:
                    c._fail(EngineServiceError(_o.E_PROTOCOL, "a Heartbeat that closes no reply"))
                c._unanswered -= 1
                return cur
            if kind < 0x81:
                c._fail(EngineServiceError(_o.E_PROTOCOL, "the engine sent a command"))
            if cur is None:
                cur = _o.Reply([msg])
                cur.command_seq = msg.command_seq
            elif msg.command_seq != cur.command_seq:
                c._fail(EngineServiceError(_o.E_PROTOCOL,
                                           "an event of another command inside a reply"))
            else:
                cur.append(msg)
    finally:
        if c._rx is buf:
            del buf[:off]


def fills(c, max: int | None = None, q=None) -> list:
    """``fills()`` while commands are unanswered: the unsolicited Trades read so far, up to the
    next reply (left for :func:`recv`), without waiting. ``q``: the queue to take from (the
    client's fills by default; ``unsolicited()`` passes its own)."""
    if q is None:
        q = c._fills
    if c._sock is not None:
        alive = c._read_nowait()
        buf, off = c._rx, 0
        try:
            while True:
                try:
                    r = _o.decode_frame(buf, off, venue=True)
                except _o.FrameError as e:
                    c._fail(EngineServiceError(_o.E_PROTOCOL,
                                               f"the engine sent a bad frame: {e}"))
                if r is None or not (c._unsol_left or r[0].KIND in _FILLS
                                     or r[0].KIND == _o.UNSOLICITED):
                    break  # need more bytes, or a reply: recv's to read
                off += r[2]
                c._aside(r[0], False)
        finally:
            del buf[:off]
        if not alive and not q:
            c._fail(EngineServiceError(-errno.ECONNRESET,
                                       "the engine service closed the connection"))
    if c._sock is None and not q:
        raise EngineServiceError(-errno.ENOTCONN, "the connection is closed")
    out = []
    while q and (max is None or len(out) < max):
        out.append(q.popleft())
    return out
