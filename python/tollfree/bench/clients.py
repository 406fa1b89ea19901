"""tollfree's own clients as the benchmark uses them (``tollfree.connect``, ``tollfree.v1``), with
the benchmark's per-call timeout, and the small adapters that turn their results into the gate's
``(pnl, trades)`` arrays. The benchmark measures these clients; it never edits them.
"""
from __future__ import annotations

import numpy as np

import tollfree
from tollfree import v1

CALL_TIMEOUT_S = 60.0        # a hung server becomes an error row, never a hung benchmark


def connect(url: str, **kw):
    """:func:`tollfree.connect` with the benchmark's timeout."""
    kw.setdefault("timeout", CALL_TIMEOUT_S)
    return tollfree.connect(url, **kw)


def spawn_url() -> str:
    from tollfree import _lib
    return f"spawn:{_lib.bin_path()}"


def connect_spawn(**kw):
    """A fresh ``tollfree serve --stdio`` process behind the v2 client."""
    return connect(spawn_url(), **kw)


def v1_client(server, transport: str) -> v1.Client:
    """``tollfree.v1.Client`` on a transport of ``server``."""
    return v1.Client(server.url(transport), timeout=CALL_TIMEOUT_S)


def sweep_result(out):
    """(pnl, trades) of a client's sweep (every client returns that tuple)."""
    pnl, trades = out
    return pnl, trades


def run_one_result(out):
    """(pnl float, trades int) of a client's run_one."""
    pnl, trades = out
    return float(pnl), int(trades)


def session_final(sess, closed):
    """(pnl, trades) of a live session: its close() state ``{"pnl", "trades", ...}``, or the
    session's own attributes when close() had nothing to return."""
    if closed is not None:
        return float(closed["pnl"]), int(closed["trades"])
    return float(sess.pnl), int(sess.trades)


def as_pair(pnl, trades):
    return (np.array([pnl], dtype=np.float64), np.array([trades], dtype=np.int64))
