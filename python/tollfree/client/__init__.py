"""Clients of ``tollfree serve``: :func:`connect` for v2 over every transport.

    with tollfree.connect("unix:/tmp/tf.sock") as c:
        ds = c.load(close)                       # once; content-addressed handle
        pnl, trades = c.sweep(ds, params)        # params only on the wire
        with c.session(params[0]) as s:          # the live, per-bar pattern
            for px in close:
                s.on_bar(px)

Any strategy the server offers (``serve --strategy sma_cross``; :meth:`Client.strategies` lists
them with their parameter names), by name, with an (n, k) float64 grid::

        pnl, trades = c.sweep(close, [[5, 20], [10, 50]], strategy="sma_cross")
        st = c.sweep_stats(ds, grid, fee=0.05, strategy="rsi")
        with c.session([20, 2.0], strategy="bollinger") as s: ...

URLs: ``unix:PATH``, ``tcp:[HOST:]PORT`` (``tcp:PORT`` means 127.0.0.1), ``shm:PATH`` (the Unix
socket of ``serve --shm PATH``) and ``spawn:`` / ``spawn:BINARY`` (one ``tollfree serve --stdio``
process per call; BINARY defaults to :func:`tollfree._lib.bin_path`).

Timeouts: ``timeout`` (seconds, None = wait forever) bounds every single wait for the server.
Running past it raises :class:`tollfree.SweepTimeout`, an :class:`tollfree.SweepError` with code
``-ETIMEDOUT`` that is also a ``TimeoutError`` (so ``except socket.timeout`` catches it too);
``socket.timeout`` itself is never raised. The client is closed after a timeout.
"""
from __future__ import annotations

from tollfree import urls
from tollfree.client._shm import DEFAULT_RING, DEFAULT_SPIN
from tollfree.client._v2 import (Client, Dataset, Session, ShmClient, SpawnClient, as_combo,
                                 as_strategy_params)

__all__ = ["connect", "Client", "Dataset", "Session", "ShmClient", "SpawnClient", "open_transport",
           "as_combo", "as_strategy_params", "parse_url", "DEFAULT_SPIN", "DEFAULT_RING"]


def parse_url(url: str) -> tuple[str, tuple]:
    """``("unix", (path,))``, ``("tcp", (host, port))``, ``("shm", (path,))``, ``("spawn", (binary,))``:
    the grammar of :mod:`tollfree.urls` plus ``spawn:[BINARY]``."""
    if isinstance(url, str) and url.startswith("spawn:"):
        rest = url[len("spawn:"):]
        if rest:
            return "spawn", (rest,)
        from tollfree._lib import bin_path

        return "spawn", (bin_path(),)
    try:
        return urls.parse(url)
    except ValueError as e:
        raise ValueError(f"{e} (or spawn:[BINARY])") from None


def open_transport(url: str, timeout: float | None = None, spin: int = DEFAULT_SPIN,
                   ring_bytes: int = DEFAULT_RING):
    """A connected socket/shm transport for ``url`` (spawn has none: see SpawnClient)."""
    from tollfree.client._shm import ShmTransport
    from tollfree.client._stream import SocketTransport

    scheme, args = parse_url(url)
    if scheme == "unix":
        return SocketTransport.unix(args[0], timeout)
    if scheme == "tcp":
        return SocketTransport.tcp(args[0], args[1], timeout)
    if scheme == "shm":
        return ShmTransport(args[0], timeout, spin, ring_bytes)
    raise ValueError(f"url {url!r}: no persistent transport for {scheme}")


def connect(url: str, timeout: float | None = None, spin: int = DEFAULT_SPIN,
            ring_bytes: int = DEFAULT_RING) -> Client:
    """Connects to ``tollfree serve`` at ``url``; returns a v2 :class:`Client` (a context manager).

    ``spin`` (shm only): iterations the client polls for a reply before it sleeps on a futex
    (0 sleeps at once; each iteration is ~20 ns of CPython). ``ring_bytes`` (shm only): the size
    of each ring, a power of two from 64 KiB to 1 GiB.
    """
    scheme, args = parse_url(url)
    if scheme == "spawn":
        return SpawnClient(args[0], timeout, url)
    t = open_transport(url, timeout, spin, ring_bytes)
    if scheme != "shm":
        return Client(t, url)
    c = ShmClient(t, url)
    try:
        # On a ring, a body_len above the server's --max-frame is a hostile peer (the server
        # drops the connection), so learn the limit first: the client then refuses such frames.
        c.hello()
    except BaseException:
        c.close()
        raise
    return c
