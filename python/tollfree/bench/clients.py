"""Getting tollfree's clients for a benchmark row, or a clear "unavailable (reason)".

The benchmark measures the project's own clients (``tollfree.connect``, ``tollfree.v1``); it never
edits them. A client that is not importable yet, or a server that is not built, turns the rows
that need it into "unavailable" rows instead of a crash.
"""
from __future__ import annotations

import numpy as np

from tollfree.bench import harness as H


def _connect_fn():
    import tollfree
    fn = getattr(tollfree, "connect", None)
    if fn is None:
        try:
            from tollfree.client import connect as fn  # type: ignore
        except ImportError as e:
            raise H.Unavailable(f"tollfree.connect is not available yet ({e})") from None
    return fn


CALL_TIMEOUT_S = 60.0        # a hung server becomes an error row, never a hung benchmark


def connect(url: str, **kw):
    kw.setdefault("timeout", CALL_TIMEOUT_S)
    return _connect_fn()(url, **kw)


def spawn_url() -> str:
    from tollfree import _lib
    return f"spawn:{_lib.bin_path()}"


def connect_spawn(**kw):
    """A fresh ``tollfree serve --stdio`` process behind the v2 client."""
    fn = _connect_fn()
    kw.setdefault("timeout", CALL_TIMEOUT_S)
    try:
        return fn(spawn_url(), **kw)
    except (ValueError, TypeError):
        return fn("spawn:", **kw)


def v1_client(server, transport: str):
    """``tollfree.v1.Client`` on a transport of ``server``."""
    try:
        from tollfree import v1  # type: ignore
    except ImportError as e:
        raise H.Unavailable(f"tollfree.v1 is not available yet ({e})") from None
    Client = getattr(v1, "Client", None)
    if Client is None:
        raise H.Unavailable("tollfree.v1.Client is not available yet")
    url = server.url(transport)
    try:
        return Client(url, timeout=CALL_TIMEOUT_S)
    except (ValueError, TypeError, H.Unavailable) as e:
        if transport == "unix":
            return Client(server.unix_path, timeout=CALL_TIMEOUT_S)
        raise H.Unavailable(f"tollfree.v1.Client({url!r}): {e}") from None


def sweep_result(out):
    """(pnl, trades) from whatever a client's sweep returns (a tuple or an object)."""
    if isinstance(out, tuple) and len(out) == 2:
        return out
    for a, b in (("pnl", "trades"),):
        if hasattr(out, a) and hasattr(out, b):
            return getattr(out, a), getattr(out, b)
    return out


def run_one_result(out):
    """(pnl float, trades int) from a client's run_one result."""
    if isinstance(out, tuple) and len(out) >= 2:
        return float(out[0]), int(out[1])
    return float(out.pnl), int(out.trades)


def session_final(sess, closed):
    """(pnl, trades) of a session from its close() result or its own attributes."""
    for obj in (closed, sess):
        if obj is None:
            continue
        if isinstance(obj, tuple) and len(obj) >= 3:
            # [position, trades, pnl(, bars)] per docs/protocol.md SESSION_CLOSE
            return float(obj[2]), int(obj[1])
        if hasattr(obj, "pnl") and hasattr(obj, "trades"):
            return float(obj.pnl), int(obj.trades)
        if isinstance(obj, dict) and "pnl" in obj:
            return float(obj["pnl"]), int(obj["trades"])
    raise RuntimeError("cannot read a session's final pnl/trades from this client")


def as_pair(pnl, trades):
    return (np.array([pnl], dtype=np.float64), np.array([trades], dtype=np.int64))
