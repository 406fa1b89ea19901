"""The server URL grammar, one implementation for every Python client (docs/protocol.md, "URLs";
the C clients follow the same grammar, both pinned by tests/vectors/urls.txt):

    unix:PATH | shm:PATH | tcp:[//][HOST:]PORT | tls:[//][HOST:]PORT

PATH is non-empty and at most 107 bytes (a Unix socket path); HOST is a name, an IPv4 address or
a bracketed IPv6 address (``[::1]``), 127.0.0.1 when left out; PORT is 1 to 5 decimal digits in
1..65535. Schemes are lower case. ``tls:`` is TCP with TLS, for the order client only
(tests/vectors/urls_tls.txt). :func:`tollfree.client.parse_url` adds ``spawn:[BINARY]``.
"""
from __future__ import annotations

import os

MAX_PATH = 107
DEFAULT_HOST = "127.0.0.1"
FORMS = "unix:PATH, tcp:[HOST:]PORT or shm:PATH"
_FORMS = ("unix:PATH", "tcp:[HOST:]PORT", "tls:[HOST:]PORT", "shm:PATH")


def parse(url: str, schemes=("unix", "tcp", "shm")) -> tuple[str, tuple]:
    """``("unix", (path,))``, ``("shm", (path,))``, ``("tcp", (host, port))`` or
    ``("tls", (host, port))`` for a scheme in ``schemes``; ``ValueError`` for anything else
    (``TypeError`` when url is not a str)."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type(url).__name__}")
    scheme, sep, rest = url.partition(":")
    if not sep or scheme not in schemes:
        forms = ", ".join(f for f in _FORMS if f.split(":")[0] in schemes)
        raise ValueError(f"url {url!r}: expected {forms}")
    if scheme in ("unix", "shm"):
        if not rest:
            raise ValueError(f"url {url!r}: missing socket path")
        if len(os.fsencode(rest)) > MAX_PATH:
            raise ValueError(f"url {url!r}: socket path longer than {MAX_PATH} bytes")
        return scheme, (rest,)
    if rest.startswith("//"):
        rest = rest[2:]  # tls://HOST:PORT, the way URLs are often written
    host, sep, port = rest.rpartition(":")
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        raise ValueError(f"url {url!r}: the TCP port must be a number from 1 to 65535")
    if not sep:
        return scheme, (DEFAULT_HOST, int(port))
    if len(host) >= 2 and host[0] == "[" and host[-1] == "]":
        host = host[1:-1]
        if not host or "[" in host or "]" in host:
            raise ValueError(f"url {url!r}: bad bracketed IPv6 address")
    elif any(ch in host for ch in ":[]"):
        raise ValueError(f"url {url!r}: an IPv6 address must be bracketed: "
                         f"{scheme}:[ADDR]:PORT")
    if not host or len(host) > 255:
        raise ValueError(f"url {url!r}: missing or overlong TCP host")
    return scheme, (host, int(port))
