"""The shared-memory wait/wake path of the Python client (tollfree/client/_shm.py): its futex
helpers wake every waiter as the C ones do, its waiting constants are the C header's, and a long
live session that sleeps on every bar loses no wake-up and gives the in-process results."""
from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tollfree
from tollfree.client import _shm
from conftest import DEADLINE, wait_until  # noqa: E402

INC = Path(__file__).resolve().parents[2] / "include" / "tollfree"
SYS_FUTEX = 202


def _in_futex(tid: int) -> bool:
    try:
        line = Path(f"/proc/self/task/{tid}/syscall").read_text()
    except OSError:
        return False
    return line.split()[0] == str(SYS_FUTEX)


def test_wait_constants_match_shm_h():
    txt = (INC / "shm.h").read_text()
    d = {k: int(v) for k, v in re.findall(r"^#define\s+(TF_SHM_\w+)\s+(\d+)(?:ll)?\s*$", txt, re.M)}
    assert _shm.PREEMPT_NS == d["TF_SHM_PREEMPT_NS"]
    assert _shm.YIELD_SLOW_NS == d["TF_SHM_YIELD_SLOW_NS"]
    assert _shm.CALM_NS == d["TF_SHM_CALM_NS"]
    assert _shm.CALM_MAX_NS == d["TF_SHM_CALM_MAX_NS"]
    assert _shm.DEFAULT_SPIN == d["TF_SHM_DEFAULT_SPIN"]


def test_futex_wake_reaches_every_waiter():
    wait, wake = _shm._futex_fns()
    assert isinstance(wait, ctypes._CFuncPtr)  # tf_futex_wait itself
    word = ctypes.c_uint32(0)
    addr = ctypes.addressof(word)
    tids, rcs = [], []

    def waiter():
        tids.append(threading.get_native_id())
        rc = 0
        while word.value == 0:
            rc = wait(addr, 0, int(DEADLINE * 1e9))
        rcs.append(rc)

    ths = [threading.Thread(target=waiter) for _ in range(2)]
    for t in ths:
        t.start()
    wait_until(lambda: len(tids) == 2 and all(_in_futex(t) for t in tids),
               "both waiters blocked in futex(2)", poll=0.001)
    word.value = 1
    assert wake(addr) == 2  # one call, every waiter (tf_futex_wake wakes INT_MAX)
    for t in ths:
        t.join(DEADLINE)
    assert rcs == [0, 0]


def test_wait_value_changed_returns_at_once():
    wait, _ = _shm._futex_fns()
    word = ctypes.c_uint32(5)
    assert wait(ctypes.addressof(word), 4, int(DEADLINE * 1e9)) == 0


@pytest.mark.parametrize("spin", [0, 64, _shm.DEFAULT_SPIN])
def test_session_loses_no_wakeup(server_factory, monkeypatch, spin):
    """Every bar sleeps on the futex (spin 0 on both sides) or nearly: 4,000 round trips through
    the wake path give the in-process positions. Each wait is bounded by the test deadline
    instead of the client's 100 ms step, so a lost wake-up costs the deadline (the round trip
    fails), not a guess at how long a reply may take."""
    from tollfree.data import synthetic_close

    monkeypatch.setattr(_shm, "_SLEEP_NS", int(DEADLINE * 1e9))

    srv = server_factory(unix=False, tcp=False, extra=["--spin", str(spin), "--quiet"])
    close = synthetic_close(4000, seed=11)
    combo = [6, 3, 2, 3, 1, 2]
    with tollfree.Strategy(combo) as st:
        want = [st.on_bar(x) for x in close.tolist()]
    with tollfree.client.connect(srv.url("shm"), spin=spin, timeout=DEADLINE) as c:
        s = c.session(combo)
        got = [s.on_bar(x) for x in close.tolist()]
        t = c._t
        assert got == want
        # A lost wake-up would cost the test deadline (SweepTimeout above), never a count here.
        # A wait may still come back without its reply: the server's wake for the reply before,
        # issued after the client had already seen that reply, lands on the next wait (benign,
        # at most about one per reply). The count is printed, not asserted.
        print(f"spin {spin}: {t.empty_wakes} empty wakes in {len(got)} round trips")
        assert t.empty_wakes < len(got)
        if spin == 0:
            assert t.sleeps > 0 and t.yields_won == 0 and t.contentions == 0
            assert t.fast == [0] and t.budget == 0


def test_contention_switches_spinning_off(server):
    """Contention once is chance (the budget halves); twice within CALM_NS is load: the transport
    sleeps at once until its calm window ends (a window that doubles while load persists), then
    spins again only as far as waits warrant. The same rules as shm_ring.c's contended()."""
    with tollfree.client.connect(server.url("shm"), timeout=DEADLINE) as c:
        t = c._t
        t.calm_until = t.last_contention = 0  # HELLO may have found some already
        t.calm_ns, t.budget, n = _shm.CALM_NS, t.spin, t.contentions
        now = time.monotonic_ns()
        assert t._contended(now) is False
        assert (t.budget, t.calm_until, t.contentions) == (t.spin // 2, 0, n + 1)
        assert t._contended(now + 1) is True
        assert (t.budget, t.fast, t.contentions) == (0, [0], n + 2)
        assert t.calm_until == now + 1 + _shm.CALM_NS

        def pair_after_window(gap):
            end = t.calm_until
            assert t._contended(end + gap) is False  # the first one after a window: chance
            assert t._contended(end + gap + 1) is True

        pair_after_window(1)  # right after the window: load persists, twice as long
        assert t.calm_ns == 2 * _shm.CALM_NS
        for _ in range(20):
            pair_after_window(1)
        assert t.calm_ns == _shm.CALM_MAX_NS
        pair_after_window(10 * _shm.CALM_MAX_NS)  # long after: back to the base window
        assert t.calm_ns == _shm.CALM_NS
        s = c.session([6, 3, 2, 3, 1, 2])
        ref = tollfree.Strategy([6, 3, 2, 3, 1, 2])
        assert s.on_bar(100.0) == ref.on_bar(100.0)  # calm: served through the futex
        assert t.budget == 0 and t.fast == [0]  # and no spinning grown back meanwhile
        t.calm_until = 0
        t._adapt(10_000)  # a 10 us wait: about twice its iterations
        grown = min(t.spin, 2 * int(10_000 / t.iter_ns) + 64)
        assert t.budget == grown
        t._adapt(10**12)  # far beyond any budget: halve
        assert t.budget == grown // 2
        assert t.fast == [min(t.budget, _shm._INLINE)]


class _Clock:
    """time for _shm: each read 100 ns after the last, and 100 us more at read number ``jump``."""

    def __init__(self, jump: int):
        self.n, self.t, self.jump = 0, 10**9, jump

    def monotonic_ns(self) -> int:
        self.t += 100_000 if self.n == self.jump else 100
        self.n += 1
        return self.t

    def monotonic(self) -> float:
        return self.t / 1e9


class _Rusage:
    """resource for _shm: this thread's involuntary switches are ``nivcsw``."""

    RUSAGE_THREAD = 1

    def __init__(self, nivcsw: int):
        self.nivcsw = nivcsw

    def getrusage(self, who):
        assert who == self.RUSAGE_THREAD
        return type("ru", (), {"ru_nivcsw": self.nivcsw})()


@pytest.mark.parametrize("where", ["spin", "yield"])
@pytest.mark.parametrize("switched", [False, True])
def test_stall_is_not_contention(monkeypatch, where, switched):
    """A gap in the spin (or a slow yield) during which this thread was not switched out
    involuntarily is the hypervisor holding the vCPU: counted as a stall, and spinning goes on;
    with an involuntary switch it is contention (shm_ring.c's switched_away(), same rules)."""
    import mmap

    ring = 4096
    t = _shm.ShmTransport.__new__(_shm.ShmTransport)
    t._state("shm:stall", ring, 20_000, None)
    t._attach(mmap.mmap(-1, _shm.wire.SHM_CTRL_BYTES + 2 * ring))
    t.sleep = lambda tail: tail + 8  # the reply comes once the spin and the yield gave up
    if where == "spin":
        t.budget, t.fast = 4 * _shm._INLINE, [0]
        clock = _Clock(jump=1)  # the clock read after the first 256 polls
    else:
        t.budget, t.fast = 0, [0]
        clock = _Clock(jump=2)  # t0, before the yield, after it: the yield took 100 us
    t.nivcsw = 7
    monkeypatch.setattr(_shm, "time", clock)
    monkeypatch.setattr(_shm, "resource", _Rusage(8 if switched else 7))
    assert t.wait_more(0) == 8
    assert t.sleeps == 1
    if switched:
        assert (t.stalls, t.contentions) == (0, 1)
    else:
        assert (t.stalls, t.contentions) == (1, 0)
        if where == "spin":
            assert clock.n >= 6  # the spin went on after the gap: every chunk polled
