"""The live session (one bar per call) reproduces the batch sweep's trades and pnl exactly."""
from __future__ import annotations

import numpy as np
import pytest

import tollfree
from tollfree import wire
from tollfree.errors import SweepError
from conftest import DEADLINE, wait_until  # noqa: E402

N_BARS = 12_000


@pytest.fixture(scope="module")
def series():
    from tollfree.data import synthetic_close

    close = synthetic_close(N_BARS, seed=5).copy()
    close[4000] = np.nan  # the batch and the streaming kernel agree on NaN too
    params = np.array([[6, 3, 2, 3, 1, 2], [40, 20, 6, 20, 7, 10], [1, 1, 1, 1, 1, 1]], np.int64)
    return close, params


def _positions(combo, close):
    with tollfree.Strategy(combo, validate=False) as s:  # the NaN bar as the kernel takes it
        return np.array([s.on_bar(x) for x in close], np.int32)


@pytest.mark.parametrize("kind, ring", [("unix", None), ("tcp", None), ("shm", None),
                                        ("shm", 64 << 10)])
def test_session_reproduces_batch(server, series, kind, ring):
    close, params = series
    n = close.shape[0] if kind == "shm" else 3000  # per-bar socket calls are slow on purpose
    pnl, trades = tollfree.sweep(close[:n], params, validate=False)
    kw = {"ring_bytes": ring} if ring else {}
    with tollfree.connect(server.url(kind), timeout=DEADLINE, **kw) as c:
        for j in range(params.shape[0]):
            want_pos = _positions(params[j], close[:n])
            pos = np.empty(n, np.int32)
            with c.session(params[j]) as s:
                for i, x in enumerate(close[:n].tolist()):
                    pos[i] = s.on_bar(x)
                assert np.array_equal(pos, want_pos)
                assert s.trades == trades[j] and s.bars == n
                assert np.float64(s.pnl).view(np.int64) == pnl[j].view(np.int64)
                q = s.query()
                assert q["bars"] == n and q["trades"] == trades[j] and q["position"] == pos[-1]
                assert np.float64(q["pnl"]).view(np.int64) == pnl[j].view(np.int64)
            final = s.close()
            assert final is None  # already closed by the with block
        assert c.stats()["sessions_open"] >= 0


def test_session_close_returns_final_state_and_frees_it(server):
    with tollfree.connect(server.url("shm"), timeout=DEADLINE) as c:
        s = c.session([5, 3, 2, 3, 1, 2])
        for x in np.linspace(100, 120, 200).tolist():
            s.on_bar(x)
        before = c.stats()["sessions_open"]
        final = s.close()
        assert final["bars"] == 200
        assert c.stats()["sessions_open"] == before - 1
        with pytest.raises(SweepError) as ei:
            s.on_bar(1.0)
        assert ei.value.code == wire.E_UNKNOWN_SESSION
        assert s.close() is None


def test_many_sessions_on_one_connection(server):
    close = np.linspace(100, 90, 500) + np.sin(np.arange(500))
    params = np.array([[L, max(L // 2, 1), max(int(L ** 0.5), 1), max(L // 2, 1),
                        max(L // 6, 1), max(L // 4, 1)] for L in range(2, 40, 3)], np.int64)
    pnl, trades = tollfree.sweep(close, params, validate=False)
    with tollfree.connect(server.url("unix"), timeout=DEADLINE) as c:
        sessions = [c.session(p) for p in params]
        for x in close.tolist():
            for s in sessions:
                s.on_bar(x)
        for j, s in enumerate(sessions):
            st = s.close()
            assert st["trades"] == trades[j]
            assert np.float64(st["pnl"]).view(np.int64) == pnl[j].view(np.int64)


def test_sessions_die_with_their_connection(server):
    with tollfree.connect(server.url("unix")) as probe:
        base = probe.stats()["sessions_open"]
        c = tollfree.connect(server.url("tcp"))
        for _ in range(3):
            c.session([5, 3, 2, 3, 1, 2]).on_bar(1.0)
        assert probe.stats()["sessions_open"] == base + 3
        c.close()
        # the server notices the close asynchronously
        wait_until(lambda: probe.stats()["sessions_open"] == base, "the sessions to close")
