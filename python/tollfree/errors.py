"""The one exception of the engine clients: :class:`EngineError` (code + message).

Codes are the stable negative tollfree codes of ``include/tollfree/error.h`` (the v2 error frame
codes, the kernel's window codes) or ``-errno`` for operating-system failures. Clients raise it
for server error frames *and* for transport failures:

- the peer closed in the middle of a frame: ``TRUNCATED`` (-1210);
- the peer closed between frames: ``-ECONNRESET`` / ``-EPIPE`` (or the error frame the server
  sent before closing, e.g. ``FRAME_TOO_LARGE``);
- shared memory: a dead or departed server ``SHM_PEER_GONE`` (-1302), an invalid server-written
  position or length ``SHM_CORRUPT`` (-1303), a frame that cannot fit the ring ``SHM_TOO_BIG``
  (-1304), a refused handshake with the server's status code;
- a reply that breaks the protocol (wrong opcode, id or length): ``PROTOCOL`` (-1213);
- a call that ran past the client's ``timeout``: :class:`EngineTimeout` (``-ETIMEDOUT``), which is
  also a :class:`TimeoutError` (and so an ``OSError``, like ``socket.timeout``). After a transport
  failure or a timeout the client is closed: the stream position is unknown.
"""
from __future__ import annotations

import errno as _errno

from tollfree import wire


class EngineError(Exception):
    """A failed engine call: ``.code`` (negative int) and ``.message`` (str)."""

    def __init__(self, code: int, message: str = ""):
        self.code = int(code)
        self.message = message or describe(self.code)
        super().__init__(self.code, self.message)

    @property
    def name(self) -> str:
        """The code's symbolic name (``FRAME_TOO_LARGE``, ``ETIMEDOUT``, ...)."""
        return code_name(self.code)

    def __str__(self) -> str:
        return f"{self.message} ({self.name}, code {self.code})"

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class EngineTimeout(EngineError, TimeoutError):
    """A call ran past the client's timeout (code ``-ETIMEDOUT``)."""

    def __init__(self, code: int = -_errno.ETIMEDOUT, message: str = ""):
        EngineError.__init__(self, code, message or "timed out waiting for the engine")


def code_name(code: int) -> str:
    if code in wire.CODE_NAMES:
        return wire.CODE_NAMES[code]
    if -4095 <= code < 0 and _errno.errorcode.get(-code):
        return _errno.errorcode[-code]
    return str(code)


def describe(code: int) -> str:
    """A human text for a code without needing libtollfree."""
    if code in wire.CODE_TEXTS:
        return wire.CODE_TEXTS[code]
    if -4095 <= code < 0:
        import os

        return os.strerror(-code)
    return f"engine error {code}"


def os_error(exc: OSError, what: str) -> EngineError:
    """Maps an OSError raised by a socket/pipe call to EngineError (-errno)."""
    if isinstance(exc, TimeoutError):
        return EngineTimeout(message=f"{what}: timed out")
    code = -(exc.errno or _errno.EIO)
    return EngineError(code, f"{what}: {exc.strerror or exc}")
