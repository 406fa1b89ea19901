"""The shared-memory transport (docs/protocol.md, "Shared memory"): SPSC rings in a memfd.

The client creates the memfd (``4096 + 2 x ring_bytes``), pre-faults it, fills the control page
and hands it to the server over a Unix socket (SCM_RIGHTS). Frames are the socket frames, written
in place into the request ring; replies are read in place from the response ring.

Why the rings are written again here rather than called in C (src/wire/shm_ring.c) through
ctypes: a ctypes crossing costs more than a ring step's work in Python (2026-12-01, this
project's 2-vCPU EPYC guest: 144 ns for a three-argument ctypes call, 111 ns for the whole inline
reserve-and-publish step of ``on_bar``, both timed as Python calls), and a round trip would make
four of them (reserve, publish, peek, consume) on top of the wait.
The two implementations are held to the same results by the shared ring vectors
(tests/vectors/shm_ring.txt: python/tests/test_shm_vectors.py here, tests/unit/test_shm_vectors.c
in C), which also cover the inline paths of ``ShmSession.on_bar`` and ``ShmClient.echo``.

Memory ordering, from Python. Every control word is read and written through a memoryview of the
mapping: one aligned 4- or 8-byte plain load or store per access, which x86 performs atomically.
x86 is TSO: stores become visible in program order, and loads are not reordered with older loads,
so "write the frame bytes, then store head" is a release store and "load head, then read the
frame" is an acquire load in practice; the C code between two Python statements is opaque calls,
which the compiler cannot reorder memory accesses across. The one reordering x86 does allow, a
store followed by a load of another word, matters only for the sleep/wake handshake:

- client going to sleep: it reads resp_seq, stores client_sleeping = 1, re-checks resp_head and
  calls FUTEX_WAIT(resp_seq, value read). The kernel executes a full barrier before comparing
  the futex word, so either the server's seq increment is seen (the wait returns at once) or the
  server's later sequentially-consistent load of client_sleeping sees 1 and it wakes us.
- client publishing: it stores req_head and req_seq, then loads server_sleeping with a plain load,
  which may pass the stores. A server that set its flag in that window can miss this request
  until its bounded futex wait (<= 100 ms) times out and re-checks head: a rare latency spike,
  never a hang. (A C helper doing the increment with ``atomic_fetch_add`` would close it.)

Waiting is the C side's (include/tollfree/shm.h, "Waiting"; :meth:`ShmTransport.wait_more`): a
spin budget that adapts to what spinning recently bought, one ``sched_yield``, then the futex;
contention (a spin preempted, a yield that ran another task) switches spinning off for a while;
a gap in which no other task took our CPU (the hypervisor held the vCPU) is not contention.
The inline fast paths (``ShmSession.on_bar``, ``ShmClient.echo``) spin at most 256 polls
themselves (``fast[0]``) before they hand over to it.

Every server-written word is checked before use: resp_head must be 8-aligned, ahead of the tail by
at most ring_bytes and never move backwards; a frame's length must fit the published bytes; a wrap
marker is only accepted where a frame could not fit. Any violation closes the connection with
``SHM_CORRUPT`` (-1303). A dead server (``server_closed``, the control socket hung up,
``kill(pid, 0)`` failing) is detected within one futex timeout (100 ms) and raised as
``SHM_PEER_GONE`` (-1302). A frame that cannot fit the ring raises ``SHM_TOO_BIG`` (-1304).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import resource
import select
import socket
import time

from tollfree import wire
from tollfree.errors import SweepError, SweepTimeout, os_error

DEFAULT_RING = 4 << 20       # per direction: the default 150,000-bar sweep frame fits
DEFAULT_SPIN = 20_000        # client spin iterations (~30 ns each in CPython) before sleeping
_SLEEP_NS = 100_000_000      # one futex wait, at most (docs/protocol.md: "at most 100 ms")
_M32 = 0xFFFFFFFF

# Waiting, as the C side does it (include/tollfree/shm.h, "Waiting"): spin for a budget that
# adapts to what spinning recently bought (at most ``spin``), yield once, then sleep on the futex;
# contention (a spin preempted, a yield that ran another task) switches spinning and yielding off
# for a calm window that doubles while contention keeps coming back. A gap or slow yield with no
# involuntary switch of this thread (getrusage) was the hypervisor: a stall, not contention.
PREEMPT_NS = 50_000           # TF_SHM_PREEMPT_NS: a gap this long inside a spin: preempted
YIELD_SLOW_NS = 20_000        # TF_SHM_YIELD_SLOW_NS: a yield this long: another task ran
CALM_NS = 20_000_000          # TF_SHM_CALM_NS: no spinning or yielding this long after contention
CALM_MAX_NS = 250_000_000     # TF_SHM_CALM_MAX_NS
_YIELD_RAN_NS = 3_000         # a yield shorter than this ran nobody else
_INLINE = 256                 # iterations the inline fast paths spin before calling wait_more

# Control word indexes in memoryview.cast('Q') / .cast('I') views of the control page.
Q_REQ_HEAD = wire.SHM_OFF_REQ_HEAD // 8
Q_REQ_TAIL = wire.SHM_OFF_REQ_TAIL // 8
Q_RESP_HEAD = wire.SHM_OFF_RESP_HEAD // 8
Q_RESP_TAIL = wire.SHM_OFF_RESP_TAIL // 8
I_REQ_SEQ = wire.SHM_OFF_REQ_SEQ // 4
I_RESP_SEQ = wire.SHM_OFF_RESP_SEQ // 4
I_SERVER_SLEEPING = wire.SHM_OFF_SERVER_SLEEPING // 4
I_CLIENT_SLEEPING = wire.SHM_OFF_CLIENT_SLEEPING // 4
I_SERVER_CLOSED = wire.SHM_OFF_SERVER_CLOSED // 4
I_CLIENT_CLOSED = wire.SHM_OFF_CLIENT_CLOSED // 4
I_SERVER_PID = wire.SHM_OFF_SERVER_PID // 4

# ---- futex: libtollfree's helpers (include/tollfree/shm.h) ------------------------------------
_futex = None


def _futex_fns():
    """(wait(addr, expected, timeout_ns) -> int, wake(addr) -> int): tf_futex_wait and
    tf_futex_wake, which wake every waiter; ctypes drops the GIL around each call. The library
    ships with the package (it is the server's too); without it this raises ImportError."""
    global _futex
    if _futex is None:
        from tollfree._lib import lib

        L = lib()
        w, k = L.tf_futex_wait, L.tf_futex_wake
        w.argtypes, w.restype = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int64], ctypes.c_int
        k.argtypes, k.restype = [ctypes.c_void_p], ctypes.c_int
        _futex = (w, k)
    return _futex


def _corrupt(msg: str) -> SweepError:
    return SweepError(wire.E_SHM_CORRUPT, "shm: " + msg)


class ShmTransport:
    """One shared-memory connection: a memfd with two rings plus the control socket.

    ``spin``: the most iterations the client polls resp_head before it yields and sleeps on the
    futex (0: sleep at once, no yield); the budget actually spun adapts below it (see
    :meth:`wait_more`). ``timeout`` (seconds or None) bounds each wait for a reply, raising
    :class:`~tollfree.errors.SweepTimeout`; the connection is then closed. A dead server is
    detected either way.
    """

    can_pass_fds = True

    def __init__(self, path: str, timeout: float | None = None, spin: int = DEFAULT_SPIN,
                 ring_bytes: int = DEFAULT_RING):
        from tollfree.client._stream import SocketTransport

        ring = int(ring_bytes)
        if ring < wire.SHM_MIN_RING or ring > wire.SHM_MAX_RING or ring & (ring - 1):
            raise ValueError(f"ring_bytes must be a power of two in 64 KiB .. 1 GiB, got {ring}")
        if spin is None or int(spin) < 0:
            raise ValueError(f"spin must be >= 0 iterations, got {spin}")
        self._state(f"shm:{path}", ring, int(spin), timeout)
        total = wire.SHM_CTRL_BYTES + 2 * ring
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = -1
        try:
            sock.settimeout(timeout if timeout is not None else 30.0)
            sock.connect(path)
            fd = os.memfd_create("tollfree-shm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, total)
            # Sized for good: neither side can make the other fault by truncating the file.
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            self._mm = mmap.mmap(fd, total, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                                 mmap.PROT_READ | mmap.PROT_WRITE)
            mv = memoryview(self._mm)
            mv[::mmap.PAGESIZE] = bytes(len(range(0, total, mmap.PAGESIZE)))  # pre-fault, writable
            wire.LEN.pack_into(mv, wire.SHM_OFF_MAGIC, wire.SHM_MAGIC)
            wire.LEN.pack_into(mv, wire.SHM_OFF_VERSION, wire.SHM_VERSION)
            mv[wire.SHM_OFF_RING_BYTES:wire.SHM_OFF_RING_BYTES + 8] = ring.to_bytes(8, "little")
            wire.LEN.pack_into(mv, wire.SHM_OFF_CLIENT_PID, os.getpid())
            hello = wire.SHM_HELLO.pack(wire.SHM_MAGIC, wire.SHM_VERSION, ring, total)
            socket.send_fds(sock, [hello], [fd])
            rep = bytearray(wire.SHM_HELLO_REP.size)
            got = 0
            while got < len(rep):
                k = sock.recv_into(memoryview(rep)[got:])
                if not k:
                    raise SweepError(wire.E_SHM_PEER_GONE,
                                      f"{self.what}: server closed during the handshake")
                got += k
            status, spid = wire.SHM_HELLO_REP.unpack(rep)
            if status < 0:
                raise SweepError(status, f"{self.what}: handshake refused")
        except OSError as e:
            sock.close()
            self._drop_map()
            raise os_error(e, f"connect {self.what}") from None
        except BaseException:
            sock.close()
            self._drop_map()
            raise
        finally:
            if fd >= 0:
                os.close(fd)
        self.sock = sock
        self.control = SocketTransport(sock, timeout, f"{self.what} (control socket)")
        self.server_pid = spid
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN | getattr(select, "POLLRDHUP", 0x2000))
        self._attach(self._mm)

    def _state(self, what: str, ring: int, spin: int, timeout: float | None) -> None:
        """Everything but the mapping and the control socket (python/tests/test_shm_vectors.py
        builds a transport over an anonymous mapping from this and :meth:`_attach`)."""
        self.what = what
        self.timeout = timeout
        self.spin = spin
        self.budget = spin            # the adaptive spin budget, 0 .. spin
        self.fast = [min(spin, _INLINE)]  # what the inline fast paths spin (0 while calm)
        self.iter_ns = 30.0           # one poll iteration, measured as we go
        self.calm_until = self.last_contention = 0
        self.calm_ns = CALM_NS
        self.contentions = self.yields_won = self.sleeps = self.empty_wakes = 0
        self.stalls = 0               # gaps with no other task on our CPU (not contention)
        self.nivcsw = -1              # this thread's involuntary switches when last read
        self.ring = ring
        self.mask = ring - 1
        self.closed = True
        self.server_pid = 0

    def _attach(self, mm) -> None:
        """Views of the control page and the rings of ``mm`` (control page + 2 x ring)."""
        ring = self.ring
        self._mm = mm
        self._mv = mv = memoryview(mm)
        self.cq = mv[:wire.SHM_CTRL_BYTES].cast("Q")
        self.ci = mv[:wire.SHM_CTRL_BYTES].cast("I")
        base = wire.SHM_REQ_RING
        self.req = mv[base:base + ring]
        self.resp = mv[base + ring:base + 2 * ring]
        self.req_q = self.req.cast("Q")  # u64 views (frames start 8-aligned): the fast paths
        self.resp_q = self.resp.cast("Q")
        self._u32_resp_seq = ctypes.c_uint32.from_buffer(mm, wire.SHM_OFF_RESP_SEQ)
        self._u32_req_seq = ctypes.c_uint32.from_buffer(mm, wire.SHM_OFF_REQ_SEQ)
        self.resp_seq_addr = ctypes.addressof(self._u32_resp_seq)
        self.req_seq_addr = ctypes.addressof(self._u32_req_seq)
        self.futex_wait, self.futex_wake = _futex_fns()
        # req_head and resp_tail live only in the control page (our own words; every access is
        # bounds-checked by the memoryview, so a peer scribbling on them cannot make us touch
        # memory outside the rings). req_tail is the last validated server value.
        self.req_tail = 0
        self._rpos = self._rend = self._next_tail = 0
        self.closed = False

    # ---- request side ------------------------------------------------------------------------
    def _tail(self) -> int:
        """The server's req_tail, validated as shm_ring.c's load_tail does: it never moves
        backwards, never passes our published head, stays 8-aligned."""
        t = self.cq[Q_REQ_TAIL]
        head = self.cq[Q_REQ_HEAD]
        if t < self.req_tail or t > head or t & 7:
            self.close()
            raise _corrupt(f"server req_tail {t} invalid (head {head})")
        self.req_tail = t
        return t

    def _room(self, end: int) -> bool:
        """Whether the request ring can take bytes up to position ``end`` now (the tail is read
        again only when the one last seen leaves too little room)."""
        return end - self.req_tail <= self.ring or end - self._tail() <= self.ring

    def _wait_space(self, end: int) -> None:
        """Waits until the request ring can take bytes up to position ``end``."""
        deadline = None
        n = 0
        while not self._room(end):
            n += 1
            if n > 1000:
                if deadline is None and self.timeout is not None:
                    deadline = time.monotonic() + self.timeout
                self._check_peer()
                if deadline is not None and time.monotonic() > deadline:
                    self.close()
                    raise SweepTimeout(message=f"{self.what}: request ring stayed full")
                time.sleep(50e-6)

    def reserve(self, size: int) -> int:
        """Claims ``size`` (8-aligned) bytes in the request ring, writing a wrap marker when
        needed (as tfw_ring_reserve does; tests/vectors/shm_ring.txt); returns the ring offset to
        write the frame at."""
        if self.closed:
            raise SweepError(-errno.EBADF, "the client is closed")
        if size > self.ring - 8:
            raise SweepError(wire.E_SHM_TOO_BIG,
                              f"a {size}-byte frame does not fit the {self.ring}-byte shm ring "
                              f"(load big series with load(), or connect with a bigger ring_bytes)")
        pos = self.cq[Q_REQ_HEAD]
        off = pos & self.mask
        if off + size > self.ring:
            skip = self.ring - off
            self._wait_space(pos + skip)
            wire.LEN.pack_into(self.req, off, wire.SHM_WRAP)
            pos += skip
            off = 0
            if not self._room(pos + size):
                # No room for the skip and the frame together: publish the wrap on its own so
                # that the server consumes it (docs/protocol.md, "Rings").
                self._pending = pos
                self.publish()
        self._wait_space(pos + size)
        self._pending = pos + size
        return off

    def publish(self) -> None:
        head = self._pending
        self.cq[Q_REQ_HEAD] = head                      # release (TSO): after the frame bytes
        ci = self.ci
        ci[I_REQ_SEQ] = (ci[I_REQ_SEQ] + 1) & _M32
        if ci[I_SERVER_SLEEPING]:
            self.futex_wake(self.req_seq_addr)

    def sendv(self, bufs, nbytes: int, fds=()) -> None:
        if fds:
            raise SweepError(wire.E_BAD_FD, "shm: fds travel on the control socket (LOAD_FD)")
        off = self.reserve(wire.align8(nbytes))
        req = self.req
        for b in bufs:
            m = b if isinstance(b, memoryview) and b.format == "B" else memoryview(b).cast("B")
            n = len(m)
            req[off:off + n] = m
            off += n
        self.publish()

    def wake_server(self) -> None:
        """Bumps req_seq and wakes the server without publishing (after a control-socket frame)."""
        ci = self.ci
        ci[I_REQ_SEQ] = (ci[I_REQ_SEQ] + 1) & _M32
        if ci[I_SERVER_SLEEPING]:
            self.futex_wake(self.req_seq_addr)

    # ---- reply side --------------------------------------------------------------------------
    def _check_peer(self) -> None:
        if self.closed:
            raise SweepError(-errno.EBADF, "the client is closed")
        why = None
        if self.ci[I_SERVER_CLOSED]:
            why = "the server closed this connection (server_closed)"
        else:
            ev = self._poll.poll(0)
            if ev and ev[0][1] & (select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0x2000)):
                why = "the server hung up the control socket"
            elif self.server_pid:
                try:
                    os.kill(self.server_pid, 0)
                except ProcessLookupError:
                    why = f"the server process {self.server_pid} is gone"
                except OSError:
                    pass
        if why:
            self.close()
            raise SweepError(wire.E_SHM_PEER_GONE, f"{self.what}: {why}")

    def wait(self, tail: int) -> int:
        """Spins, yields, then sleeps on resp_seq, until resp_head != tail; returns the new
        head. The first ``fast[0]`` iterations are the inline spin the fast paths also do."""
        cq = self.cq
        n = self.fast[0]
        while n:
            h = cq[Q_RESP_HEAD]
            if h != tail:
                return h
            n -= 1
        return self.wait_more(tail)

    def _contended(self, now: int) -> bool:
        """Contention found at ``now`` (as shm_ring.c's contended()). Once is chance: this wait
        sleeps and the budget halves. Twice within CALM_NS is load: a calm window without
        spinning or yielding, longer while the load persists. True when calm began."""
        again = self.last_contention and now - self.last_contention < CALM_NS
        self.last_contention = now
        self.contentions += 1
        self.budget //= 2
        self.fast[0] = min(self.budget, _INLINE)
        if not again:
            return False
        # Found again as soon as the last window ended: the load persists, back off longer.
        if self.calm_until and now - self.calm_until < self.calm_ns:
            self.calm_ns = min(2 * self.calm_ns, CALM_MAX_NS)
        else:
            self.calm_ns = CALM_NS
        self.calm_until = now + self.calm_ns
        self.budget = 0
        self.fast[0] = 0
        return True

    def _switched_away(self) -> bool:
        """Whether another task took our CPU since the last call (as shm_ring.c's
        switched_away()): this thread's involuntary switch count moved. A gap without one is the
        hypervisor holding the vCPU, not load. The first call has no baseline: True."""
        n = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
        moved = n != self.nivcsw
        self.nivcsw = n
        return moved

    def _adapt(self, t_ns: int) -> None:
        """After a wait that spinning did not catch, t_ns after it began: a spin of about twice
        as long would have, within ``spin``? Then that is the budget; else it halves."""
        need = int(t_ns / self.iter_ns)
        self.budget = min(self.spin, 2 * need + 64) if need <= self.spin else self.budget // 2
        self.fast[0] = min(self.budget, _INLINE)

    def wait_more(self, tail: int) -> int:
        """The rest of a wait, after the inline spin found nothing: the rest of the spin budget
        (reading the clock every 256 polls: a gap with no answer since means we were preempted
        and the server did not answer either), one sched_yield (a slow one: another task held
        this CPU), then the futex (:meth:`sleep`).
        Contention switches spinning and yielding off for a calm window; otherwise the budget
        follows what spinning would have bought. Returns the new head."""
        cq = self.cq
        t0 = time.monotonic_ns()
        calm = t0 < self.calm_until
        inline = self.fast[0]
        left = self.budget - inline
        if not calm and left > 0:
            last = t0
            spun = 0
            while left > 0:
                k = _INLINE if left > _INLINE else left
                left -= k
                spun += k
                while k:
                    h = cq[Q_RESP_HEAD]
                    if h != tail:
                        if 2 * (spun + inline) > self.budget:  # caught late: room to keep doing so
                            self.budget = min(self.spin, 2 * self.budget)
                            self.fast[0] = min(self.budget, _INLINE)
                        return h
                    k -= 1
                now = time.monotonic_ns()
                if now - last > PREEMPT_NS:
                    h = cq[Q_RESP_HEAD]
                    if h != tail:
                        return h  # preempted, but the server answered meanwhile: spinning pays
                    if not self._switched_away():
                        self.stalls += 1  # nobody else ran here: keep spinning
                        last = time.monotonic_ns()
                        continue
                    self._contended(now)
                    calm = True
                    break
                last = now
            else:
                if spun >= _INLINE:
                    self.iter_ns = max(1.0, (last - t0) / spun)
        if not calm and self.spin > 0:
            ty = time.monotonic_ns()
            os.sched_yield()
            ny = time.monotonic_ns()
            h = cq[Q_RESP_HEAD]
            if ny - ty > YIELD_SLOW_NS and not self._switched_away():
                self.stalls += 1  # the yield ran nobody: the vCPU itself was held
                if h != tail:
                    self._adapt(ny - t0)
            elif ny - ty > YIELD_SLOW_NS:
                # Another task held our CPU that long: had it been the server, it would have
                # answered sooner. Data or not, yielding and spinning cost whole time slices.
                self._contended(ny)
                calm = True
            elif h != tail and ny - ty > _YIELD_RAN_NS:
                # The server shares our CPU and ran in our place: spinning cannot help.
                self.budget //= 2
                self.fast[0] = min(self.budget, _INLINE)
                self.yields_won += 1
            elif h != tail:
                self._adapt(ny - t0)
            if h != tail:
                return h
        h = self.sleep(tail)
        self.sleeps += 1
        if not calm and self.spin > 0:
            self._adapt(time.monotonic_ns() - t0)
        return h

    def sleep(self, tail: int) -> int:
        """The futex half of :meth:`wait` (after the spin and the yield)."""
        cq = self.cq
        ci = self.ci
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            seq = ci[I_RESP_SEQ]
            ci[I_CLIENT_SLEEPING] = 1
            h = cq[Q_RESP_HEAD]
            if h != tail:
                ci[I_CLIENT_SLEEPING] = 0
                return h
            step = _SLEEP_NS
            if deadline is not None:
                left = deadline - time.monotonic()
                step = max(0, min(step, int(left * 1e9)))
            self.futex_wait(self.resp_seq_addr, seq, step)
            ci[I_CLIENT_SLEEPING] = 0
            h = cq[Q_RESP_HEAD]
            if h != tail:
                return h
            self.empty_wakes += 1  # a timeout (or a wake with no data): a lost wake-up costs one
            self._check_peer()
            if deadline is not None and time.monotonic() >= deadline:
                self.close()
                raise SweepTimeout(message=f"{self.what}: no reply within {self.timeout} s")

    def begin_reply(self) -> None:
        """Waits for a whole reply frame at resp_tail and validates it."""
        if self.closed:
            raise SweepError(-errno.EBADF, "the client is closed")
        while True:
            tail = self.cq[Q_RESP_TAIL]
            head = self.cq[Q_RESP_HEAD]
            if head == tail:
                head = self.wait(tail)
            avail = head - tail
            if avail < 0 or avail > self.ring or head & 7:
                self.close()
                raise _corrupt(f"server resp_head {head} invalid (tail {tail})")
            off = tail & self.mask
            blen = wire.LEN.unpack_from(self.resp, off)[0]
            if blen != wire.SHM_WRAP:
                break
            skip = self.ring - off
            if off == 0 or avail < skip:
                self.close()
                raise _corrupt(f"wrap marker at offset {off} with {avail} bytes published")
            # The wrap may be published on its own: consume it, then wait for the frame.
            self.cq[Q_RESP_TAIL] = tail + skip
        span = wire.align8(4 + blen)
        if span > avail or off + span > self.ring or span > self.ring - 8:
            self.close()
            raise _corrupt(f"reply body_len {blen} beyond the {avail} published bytes or the "
                           f"ring end")
        self._rpos = off
        self._rend = off + 4 + blen
        self._next_tail = tail + span

    def read(self, mv, hint: int = 0) -> None:
        n = len(mv)
        if self._rpos + n > self._rend:
            self.close()
            raise _corrupt("reply shorter than its contents")
        mv[:] = self.resp[self._rpos:self._rpos + n]
        self._rpos += n

    def end_reply(self) -> None:
        self.cq[Q_RESP_TAIL] = self._next_tail

    # ---- teardown ----------------------------------------------------------------------------
    def _drop_map(self) -> None:
        for name in ("cq", "ci", "req_q", "resp_q", "req", "resp", "_mv", "_u32_resp_seq",
                     "_u32_req_seq"):
            v = self.__dict__.pop(name, None)
            if isinstance(v, memoryview):
                v.release()
        mm = self.__dict__.pop("_mm", None)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a view is still exported (e.g. a caller kept an array): the GC unmaps

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.ci[I_CLIENT_CLOSED] = 1
            if self.ci[I_SERVER_SLEEPING]:
                self.futex_wake(self.req_seq_addr)
        except (ValueError, TypeError):
            pass
        self.control.close()
        self._drop_map()
