"""The exceptions of the service clients: one per server, each a code + message.

- :class:`SweepError`: a failed call to the **sweep service** (``tollfree serve``; the clients of
  :func:`tollfree.connect`, :mod:`tollfree.v1` and the shared-memory transport);
- :class:`EngineServiceError`: a failed call to the order **engine service**
  (``tollfree engine serve``; :class:`tollfree.orders.Session`).

Both derive from :class:`ServiceError`; a call that ran past the client's ``timeout`` raises the
service's timeout class (:class:`SweepTimeout`, :class:`EngineServiceTimeout`), which is also a
:class:`ServiceTimeout` and a :class:`TimeoutError` (and so an ``OSError``, like
``socket.timeout``). After a transport failure or a timeout the client is closed: the stream
position is unknown.

Codes are the stable negative tollfree codes of ``include/tollfree/error.h`` (the v2 error frame
codes, the kernel's window codes, the OFL1 codes) or ``-errno`` for operating-system failures.
Clients raise them for server error frames *and* for transport failures:

- the peer closed in the middle of a frame: ``TRUNCATED`` (-1210);
- the peer closed between frames: ``-ECONNRESET`` / ``-EPIPE`` (or the error frame the server
  sent before closing, e.g. ``FRAME_TOO_LARGE``);
- shared memory: a dead or departed server ``SHM_PEER_GONE`` (-1302), an invalid server-written
  position or length ``SHM_CORRUPT`` (-1303), a frame that cannot fit the ring ``SHM_TOO_BIG``
  (-1304), a refused handshake with the server's status code;
- a reply that breaks the protocol (wrong opcode, id or length): ``PROTOCOL`` (-1213).

Deprecated names (0.3): ``EngineError`` is :class:`ServiceError` and ``EngineTimeout`` is
:class:`ServiceTimeout`, so ``except EngineError`` still catches what both clients raise. Nothing
raises them any more and reading them warns (``DeprecationWarning``); write ``SweepError`` (or
``EngineServiceError`` for :mod:`tollfree.orders`) instead.
"""
from __future__ import annotations

import errno as _errno
import warnings as _warnings

from tollfree import wire

__all__ = ["ServiceError", "ServiceTimeout", "SweepError", "SweepTimeout", "EngineServiceError",
           "EngineServiceTimeout", "code_name", "describe", "os_error"]


class ServiceError(Exception):
    """A failed service call: ``.code`` (negative int) and ``.message`` (str).

    The common base of :class:`SweepError` and :class:`EngineServiceError`; nothing raises it
    directly."""

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


class ServiceTimeout(ServiceError, TimeoutError):
    """A call ran past the client's timeout (code ``-ETIMEDOUT``); base of the two timeouts."""

    _waiting_for = "the service"

    def __init__(self, code: int = -_errno.ETIMEDOUT, message: str = ""):
        ServiceError.__init__(self, code, message or f"timed out waiting for {self._waiting_for}")


class SweepError(ServiceError):
    """A failed call to the sweep service (``tollfree serve``): ``.code`` and ``.message``."""


class SweepTimeout(SweepError, ServiceTimeout):
    """A sweep service call ran past the client's timeout (code ``-ETIMEDOUT``)."""

    _waiting_for = "the sweep service"


class EngineServiceError(ServiceError):
    """A failed call to the order engine service (``tollfree engine serve``)."""


class EngineServiceTimeout(EngineServiceError, ServiceTimeout):
    """An engine service call ran past the client's timeout (code ``-ETIMEDOUT``)."""

    _waiting_for = "the engine service"


_DEPRECATED = {
    "EngineError": (ServiceError, "SweepError (or EngineServiceError for tollfree.orders)"),
    "EngineTimeout": (ServiceTimeout, "SweepTimeout (or EngineServiceTimeout)"),
}


def deprecated(name: str, module: str):
    """The class behind a deprecated name, with its ``DeprecationWarning``; ``AttributeError``
    for any other name (the tail of a module ``__getattr__``)."""
    if name in _DEPRECATED:
        cls, use = _DEPRECATED[name]
        _warnings.warn(f"{module}.{name} is deprecated since 0.3: use {use}", DeprecationWarning,
                       stacklevel=3)
        return cls
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def __getattr__(name: str):
    return deprecated(name, __name__)


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
    return f"tollfree error {code}"


def os_error(exc: OSError, what: str, error: type = SweepError) -> ServiceError:
    """Maps an OSError raised by a socket/pipe call to ``error`` (-errno), or to its timeout
    class for a :class:`TimeoutError`. ``error`` is :class:`SweepError` (the default) or
    :class:`EngineServiceError`."""
    if isinstance(exc, TimeoutError):
        timeout = EngineServiceTimeout if issubclass(error, EngineServiceError) else SweepTimeout
        return timeout(message=f"{what}: timed out")
    code = -(exc.errno or _errno.EIO)
    return error(code, f"{what}: {exc.strerror or exc}")
