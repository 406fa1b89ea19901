"""Byte-stream transports (Unix/TCP sockets, the pipes of a spawned ``tollfree serve --stdio``).

A transport moves whole frames and knows nothing of opcodes:

- ``sendv(bufs, nbytes, fds=())`` sends one frame given as buffer pieces (``bufs[0]`` starts with
  the u32 length prefix), looping on partial sends with sliced memoryviews: no concatenation.
- ``begin_reply()`` / ``read(mv, hint)`` / ``end_reply()`` deliver the reply's bytes in order
  straight into the caller's memory (``recv_into``). ``hint`` is the number of bytes the caller
  expects from here to the end of the frame: small replies are then received with one system
  call into a reused buffer (and copied out), big ones land directly in the caller's array.

Failures raise :class:`~tollfree.errors.SweepError` and leave the transport closed.
"""
from __future__ import annotations

import array
import errno
import os
import select
import socket
import struct
import subprocess
import time

from tollfree import wire
from tollfree.errors import SweepError, SweepTimeout, os_error

SOCK_BUF = 4 << 20          # SO_SNDBUF/SO_RCVBUF for bulk transfers
_SMALL = 16 << 10           # replies up to this size are read into the reuse buffer first


def _views(bufs):
    """memoryviews of bytes (format 'B') for every piece: slicing them is free."""
    out = []
    for b in bufs:
        m = b if isinstance(b, memoryview) else memoryview(b)
        if m.format != "B" or m.ndim != 1:
            m = m.cast("B")
        out.append(m)
    return out


def _advance(views, sent):
    """Drops ``sent`` bytes from the front of a list of memoryviews (in place)."""
    while sent:
        n = len(views[0])
        if sent >= n:
            sent -= n
            views.pop(0)
        else:
            views[0] = views[0][sent:]
            sent = 0
    while views and not len(views[0]):
        views.pop(0)


class _Reader:
    """Buffered exact reads: reused 64 KiB buffer for small pieces, ``recv_into`` for big ones."""

    def __init__(self, recv_into):
        self._recv_into = recv_into      # (memoryview) -> count, 0 at EOF
        self._buf = bytearray(64 << 10)
        self._bmv = memoryview(self._buf)
        self._pos = 0
        self._end = 0
        self.in_frame = False            # any byte of the current reply seen (TRUNCATED vs reset)

    def reset(self) -> None:
        self._pos = self._end = 0

    def _fill(self, want: int) -> None:
        """Receives at least one byte into the (drained) buffer, at most ``want``."""
        k = self._recv_into(self._bmv[:min(want, len(self._buf))])
        if not k:
            self._eof()
        self._pos, self._end = 0, k
        self.in_frame = True

    def _eof(self):
        if self.in_frame:
            raise SweepError(wire.E_TRUNCATED, "the server closed the connection mid-frame")
        raise SweepError(-errno.ECONNRESET, "the server closed the connection")

    def read(self, mv: memoryview, hint: int = 0) -> None:
        need = len(mv)
        got = 0
        avail = self._end - self._pos
        if avail:
            got = min(avail, need)
            mv[:got] = self._bmv[self._pos:self._pos + got]
            self._pos += got
        while got < need:
            rest = need - got
            if rest >= _SMALL:
                k = self._recv_into(mv[got:])
                if not k:
                    self._eof()
                self.in_frame = True
                got += k
                continue
            ahead = hint - got
            self._fill(ahead if rest < ahead <= len(self._buf) else rest)
            k = min(self._end - self._pos, rest)
            mv[got:got + k] = self._bmv[self._pos:self._pos + k]
            self._pos += k
            got += k


class SocketTransport:
    """A connected Unix or TCP stream socket (TCP_NODELAY, a few MiB of socket buffers).

    ``timeout`` (seconds or None) bounds every single send/receive wait; running past it raises
    :class:`~tollfree.errors.SweepTimeout` (a ``TimeoutError``) and closes the transport.
    """

    can_pass_fds = False

    def __init__(self, sock: socket.socket, timeout: float | None = None, what: str = ""):
        self.sock = sock
        self.what = what
        self.can_pass_fds = sock.family == socket.AF_UNIX
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, SOCK_BUF)
            except OSError:
                pass
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        self._reader = _Reader(self._recv)
        self.closed = False

    @classmethod
    def unix(cls, path: str, timeout: float | None = None) -> "SocketTransport":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(path)
        except OSError as e:
            s.close()
            raise os_error(e, f"connect unix:{path}") from None
        return cls(s, timeout, f"unix:{path}")

    @classmethod
    def tcp(cls, host: str, port: int, timeout: float | None = None) -> "SocketTransport":
        try:
            s = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise os_error(e, f"connect tcp:{host}:{port}") from None
        return cls(s, timeout, f"tcp:{host}:{port}")

    def _recv(self, mv):
        try:
            return self.sock.recv_into(mv)
        except InterruptedError:
            return self._recv(mv)
        except OSError as e:
            self.close()
            raise os_error(e, f"recv from {self.what}") from None

    def sendv(self, bufs, nbytes: int, fds=()) -> None:
        if self.closed:
            raise SweepError(-errno.EBADF, "the client is closed")
        self._reader.in_frame = False
        sock = self.sock
        try:
            if fds:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
                sent = sock.sendmsg(bufs, anc)
            else:
                sent = sock.sendmsg(bufs)
            if sent < nbytes:
                views = _views(bufs)
                _advance(views, sent)
                while views:
                    _advance(views, sock.sendmsg(views[:64]))
        except OSError as e:
            why = self._pending_error() if e.errno in (errno.EPIPE, errno.ECONNRESET) else None
            self.close()
            raise (why or os_error(e, f"send to {self.what}")) from None

    def _pending_error(self):
        """After a failed send: the error frame the server sent before closing, if any."""
        try:
            if not select.select([self.sock], [], [], 0)[0]:
                return None
            self.sock.settimeout(0.5)
            buf = self.sock.recv(24 + wire.MAX_ERROR_MSG)
            (blen,) = wire.LEN.unpack_from(buf)
            op, _, _, _, code, mlen = struct.unpack_from("<BBHQiI", buf, 4)
            if op == wire.ERROR and blen == 20 + mlen and len(buf) >= 24:
                return SweepError(code, bytes(buf[24:24 + mlen]).decode("utf-8", "replace"))
        except (OSError, struct.error, ValueError):
            pass
        return None

    def begin_reply(self) -> None:
        pass

    def read(self, mv, hint: int = 0) -> None:
        try:
            self._reader.read(mv, hint)
        except SweepError:
            self.close()
            raise

    def end_reply(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


class PipeTransport:
    """One ``tollfree serve --stdio`` process: frames on its stdin, replies on its stdout."""

    can_pass_fds = False

    def __init__(self, binary: str, timeout: float | None = None, stderr=subprocess.DEVNULL,
                 extra_args=()):
        self.what = f"spawn:{binary}"
        self.timeout = timeout
        try:
            self.proc = subprocess.Popen([binary, "serve", "--stdio", *extra_args],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=stderr, bufsize=0, close_fds=True)
        except OSError as e:
            raise os_error(e, f"spawn {binary} serve --stdio") from None
        self._wfd = self.proc.stdin.fileno()
        self._rfd = self.proc.stdout.fileno()
        self._reader = _Reader(self._recv)
        self.closed = False

    def _wait_fd(self, fd, write: bool) -> None:
        if self.timeout is None:
            return
        r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], self.timeout)
        if not (r or w):
            self.close(kill=True)
            raise SweepTimeout(message=f"{self.what}: timed out")

    def _recv(self, mv):
        self._wait_fd(self._rfd, False)
        try:
            return os.readv(self._rfd, [mv])
        except OSError as e:
            self.close(kill=True)
            raise os_error(e, f"read from {self.what}") from None

    def sendv(self, bufs, nbytes: int, fds=()) -> None:
        if fds:
            raise SweepError(wire.E_BAD_FD, "spawn: cannot pass file descriptors over a pipe")
        views = _views(bufs)
        try:
            while views:
                self._wait_fd(self._wfd, True)
                _advance(views, os.writev(self._wfd, views[:64]))
        except OSError as e:
            self.close(kill=True)
            code = -(e.errno or errno.EIO)
            raise SweepError(code, f"write to {self.what}: {e.strerror}") from None

    def begin_reply(self) -> None:
        self._reader.in_frame = False

    def read(self, mv, hint: int = 0) -> None:
        try:
            self._reader.read(mv, hint)
        except SweepError:
            self.close(kill=True)
            raise

    def end_reply(self) -> None:
        pass

    def finish(self) -> int:
        """Closes stdin, waits for the process; returns its exit status."""
        if self.closed:
            return self.proc.returncode if self.proc.returncode is not None else -1
        self.closed = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            rc = self.proc.wait(timeout=self.timeout if self.timeout is not None else 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc.stdout.close()
        return rc

    def close(self, kill: bool = False) -> None:
        if self.closed:
            return
        if kill:
            self.proc.kill()
        self.finish()


def monotonic_deadline(timeout):
    return None if timeout is None else time.monotonic() + timeout
