"""The v2 client (docs/protocol.md) over any transport: datasets, sweeps, sessions, echo, stats."""
from __future__ import annotations

import errno
import fcntl
import os

import numpy as np

from tollfree import wire
from tollfree.binding import FEE_DEFAULT, STAT_NAMES, STATS_DTYPE, as_close, as_fee, as_params
from tollfree.errors import SweepError

_M64 = (1 << 64) - 1
_U32 = 0xFFFFFFFF
_HDR = wire.HDR


def _bytes_view(a) -> memoryview:
    """A flat byte view of a C-contiguous array or bytes-like object (no copy)."""
    m = memoryview(a)
    if m.format == "B" and m.ndim == 1:
        return m
    if not m.c_contiguous:
        raise ValueError("array must be C-contiguous (use np.ascontiguousarray)")
    try:
        return m.cast("B")
    except TypeError:  # formats memoryview cannot cast (e.g. structured dtypes)
        return memoryview(np.asarray(a).reshape(-1).view(np.uint8))


def as_combo(combo) -> np.ndarray:
    """Six window lengths as a C-contiguous int64 (6,) array, checked like :func:`as_params`."""
    if isinstance(combo, np.ndarray):
        p = combo.reshape(-1)
        if p.dtype != np.int64:
            raise TypeError(f"a combo must be int64, got {combo.dtype}")
    else:
        try:
            p = np.array(combo, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError(f"a combo is six integer window lengths: {e}") from None
    if p.shape != (6,):
        raise ValueError(f"a combo is six window lengths, got {p.shape[0]}")
    return as_params(np.ascontiguousarray(p).reshape(1, 6)).reshape(6)


def as_strategy_params(params, one: bool = False) -> np.ndarray:
    """Parameters of a named strategy as C-contiguous float64: an (n, k) grid (``one``: a single
    combo, shape (k,)), 1 <= k <= 64, in the strategy's parameter order. Integers are converted
    (exact up to 2**53); the values themselves are the strategy's to check (its ``init``)."""
    a = np.asarray(params)
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise TypeError(f"strategy parameters must be numbers, got dtype {a.dtype}")
    want = 1 if one else 2
    if a.ndim != want:
        raise ValueError(f"strategy parameters must be {'a (k,)' if one else 'an (n, k)'} array, "
                         f"got shape {a.shape}")
    k = a.shape[-1]
    if not 1 <= k <= wire.MAX_PARAMS:
        raise ValueError(f"a combo has 1 to {wire.MAX_PARAMS} parameters, got {k}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _strategy_name(strategy) -> tuple[bytes, bytes]:
    """The name as sent (ASCII) and zero-padded to 8 bytes, as the frame carries it."""
    if not isinstance(strategy, str):
        raise TypeError(f"a server strategy is named by a str, got {type(strategy).__name__}")
    b = strategy.encode("ascii", "replace")
    if not 1 <= len(b) <= wire.MAX_NAME:
        raise ValueError(f"a strategy name has 1 to {wire.MAX_NAME} bytes, got {len(b)}")
    return b, b + bytes(-len(b) % 8)


class Dataset:
    """A close series held by the server: ``handle`` (content hash), ``n_bars``, ``created``
    (False when the server already held these bytes). Valid until :meth:`Client.drop` or server
    shutdown, for every connection to the same server."""

    __slots__ = ("handle", "n_bars", "created", "_close")

    def __init__(self, handle: int, n_bars: int, created: bool = True, close=None):
        self.handle = int(handle)
        self.n_bars = int(n_bars)
        self.created = bool(created)
        self._close = close  # spawn: kept so that every per-call process can load it again

    def __repr__(self) -> str:
        return f"Dataset(handle=0x{self.handle:016x}, n_bars={self.n_bars})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Dataset) and (self.handle, self.n_bars) == (other.handle, other.n_bars)

    def __hash__(self) -> int:
        return hash((self.handle, self.n_bars))


class Session:
    """A live strategy for one combo on the server (the streaming kernel).

    ``on_bar(close)`` sends one bar and returns the position after it (-1, 0, +1); ``pnl``,
    ``trades``, ``position`` and ``bars`` follow each reply. Fed the same bars, the session gives
    exactly the batch sweep's trades and pnl. Close it (or use ``with``) to free it on the server.
    """

    def __init__(self, client: "Client", session_id: int, combo, strategy: str | None = None):
        self._c = client
        self.id = int(session_id)
        self.strategy = strategy  # None: HMA's six windows (SESSION_OPEN)
        self.combo = tuple(float(v) for v in combo) if strategy else tuple(int(v) for v in combo)
        self.position = 0
        self.trades = 0
        self.pnl = 0.0
        self.bars = 0
        self.closed = False

    def on_bar(self, close: float) -> int:
        c = self._c
        wire.SESSION_BAR_REQ.pack_into(c._pay, 0, self.id, close)
        rid = c._send(wire.SESSION_BAR, [c._pay_mv[:16]], 16)
        self.position, _, self.trades, self.pnl = c._fixed(wire.SESSION_BAR, rid, wire.SESSION_BAR_REP)
        self.bars += 1
        return self.position

    def _state(self, op: int) -> dict:
        c = self._c
        wire.SESSION_ID.pack_into(c._pay, 0, self.id)
        rid = c._send(op, [c._pay_mv[:8]], 8)
        pos, _, trades, pnl, bars = c._fixed(op, rid, wire.SESSION_STATE_REP)
        self.position, self.trades, self.pnl, self.bars = pos, trades, pnl, bars
        return {"position": pos, "trades": trades, "pnl": pnl, "bars": bars}

    def query(self) -> dict:
        """The server's view: ``{"position", "trades", "pnl", "bars"}``."""
        return self._state(wire.SESSION_QUERY)

    def close(self) -> dict | None:
        """Closes the session on the server; returns its final state (None if already closed)."""
        if self.closed:
            return None
        self.closed = True
        if self._c.closed:
            return None
        return self._state(wire.SESSION_CLOSE)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.close()
        except SweepError:
            if exc[0] is None:
                raise

    def __repr__(self) -> str:
        return f"Session(id={self.id}, combo={self.combo}, bars={self.bars}, trades={self.trades})"


class Client:
    """A v2 connection to ``tollfree serve`` (see :func:`tollfree.connect`). Not thread-safe: one
    call at a time per client. Every failure raises :class:`~tollfree.errors.SweepError`.

    Buffers: requests go out as ``[header, memoryview(array)...]`` without copies; replies land in
    caller-visible arrays via ``recv_into``. :meth:`echo` without ``out`` returns the client's own
    receive buffer for that shape, overwritten by the next such echo (copy it to keep it).
    """

    def __init__(self, transport, url: str = ""):
        self._t = transport
        self.url = url
        self._rid = 0
        self._hdr = bytearray(_HDR.size)
        self._hdr_mv = memoryview(self._hdr)
        self._rhdr = bytearray(_HDR.size)
        self._rhdr_mv = memoryview(self._rhdr)
        self._pay = bytearray(128)
        self._pay_mv = memoryview(self._pay)
        self._echo_bufs: dict = {}
        self.server_info: dict | None = None

    # ---- framing ------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._t is None or self._t.closed

    def _send(self, op: int, parts, plen: int, fds=(), t=None) -> int:
        t = t or self._t
        body = wire.V2_HDR_BODY + plen
        if body > _U32 or (self.server_info and body > self.server_info["max_frame"]):
            raise SweepError(wire.E_FRAME_TOO_LARGE, f"a {body}-byte body is above the frame limit")
        rid = self._rid = (self._rid + 1) & _M64 or 1
        _HDR.pack_into(self._hdr, 0, body, op, wire.VERSION, 0, rid)
        t.sendv([self._hdr_mv, *parts], 16 + plen, fds)
        return rid

    def _recv(self, op: int, rid: int, expect: int, t=None) -> int:
        """Reads a reply header; raises the error frame, checks opcode/id; returns payload size."""
        t = t or self._t
        t.begin_reply()
        t.read(self._rhdr_mv, 16 + expect)
        blen, rop, ver, _, rrid = _HDR.unpack_from(self._rhdr)
        if rop == wire.ERROR:
            self._error(t, blen, rrid, rid)
        if rop != op or rrid != rid or ver != wire.VERSION or blen < wire.V2_HDR_BODY:
            self._bad(f"reply (opcode 0x{rop:02x}, version {ver}, id {rrid}, body_len {blen}) "
                      f"to request 0x{op:02x} id {rid}", t)
        return blen - wire.V2_HDR_BODY

    def _error(self, t, blen: int, rrid: int, rid: int):
        if blen < 20 or blen > 20 + wire.MAX_ERROR_MSG or rrid not in (0, rid):
            self._bad(f"error frame (body_len {blen}, id {rrid})", t)
        buf = bytearray(blen - wire.V2_HDR_BODY)
        t.read(memoryview(buf))
        t.end_reply()
        code, mlen = wire.ERROR_REP.unpack_from(buf)
        if mlen != blen - 20:
            self._bad(f"error frame (body_len {blen}, msg_len {mlen})", t)
        msg = bytes(buf[8:]).decode("utf-8", "replace")
        if code in wire.CLOSING_CODES:
            t.close()
        raise SweepError(code, msg)

    def _bad(self, what: str, t=None):
        (t or self._t).close()
        raise SweepError(wire.E_PROTOCOL, f"{self.url}: unexpected {what}")

    def _fixed(self, op: int, rid: int, S, t=None):
        t = t or self._t
        plen = self._recv(op, rid, S.size, t)
        if plen != S.size:
            self._bad(f"payload of {plen} bytes for opcode 0x{op:02x} (expected {S.size})", t)
        t.read(self._pay_mv[:S.size])
        t.end_reply()
        return S.unpack_from(self._pay)

    # ---- calls --------------------------------------------------------------------------------
    def hello(self) -> dict:
        """Version handshake: ``{version, caps, max_frame, max_memory, max_datasets, threads}``."""
        wire.HELLO_REQ.pack_into(self._pay, 0, wire.VERSION, 0)
        rid = self._send(wire.HELLO, [self._pay_mv[:8]], 8)
        v = self._fixed(wire.HELLO, rid, wire.HELLO_REP)
        self.server_info = dict(zip(("version", "caps", "max_frame", "max_memory",
                                     "max_datasets", "threads"), v))
        return dict(self.server_info)

    def echo(self, array, out: np.ndarray | None = None) -> np.ndarray:
        """Sends the array's bytes and receives them back (into ``out`` if given, else into the
        client's reused buffer of that dtype/shape, valid until the next echo of that shape)."""
        a = array if isinstance(array, np.ndarray) else np.frombuffer(array, np.uint8)
        src = _bytes_view(a)
        n = len(src)
        if out is None:
            key = (a.dtype.str, a.shape)
            out = self._echo_bufs.get(key)
            if out is None:
                if len(self._echo_bufs) > 8:
                    self._echo_bufs.clear()
                out = self._echo_bufs[key] = np.empty_like(a, order="C")
        dst = _bytes_view(out)
        if len(dst) != n:
            raise ValueError(f"out has {len(dst)} bytes, the array {n}")
        rid = self._send(wire.ECHO, [src], n)
        t = self._t
        plen = self._recv(wire.ECHO, rid, n)
        if plen != n:
            self._bad(f"echo of {plen} bytes (sent {n})")
        t.read(dst, n)
        t.end_reply()
        return out

    def load(self, close: np.ndarray, via_fd: bool | None = None) -> Dataset:
        """Stores a close series on the server once; returns its :class:`Dataset` handle.
        Loading the same bytes again costs one hash on the server (``created`` is False).
        ``via_fd=True`` passes a sealed memfd instead of the bytes (Unix socket / shm only)."""
        close = as_close(close)
        n = close.shape[0]
        if via_fd and n:
            return self._load_fd(close)
        wire.LOAD_REQ.pack_into(self._pay, 0, n)
        rid = self._send(wire.LOAD, [self._pay_mv[:8], _bytes_view(close)], 8 + 8 * n)
        return self._dataset(rid, n, wire.LOAD, self._t)

    def _dataset(self, rid, n, op, t) -> Dataset:
        handle, nb, created, _ = self._fixed(op, rid, wire.LOAD_REP, t)
        if nb != n:
            self._bad(f"dataset of {nb} bars (sent {n})", t)
        return Dataset(handle, nb, created)

    def _sealed_memfd(self, close: np.ndarray) -> int:
        fd = os.memfd_create("tollfree-dataset", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            src = _bytes_view(close)
            done = 0
            while done < len(src):
                done += os.pwrite(fd, src[done:], done)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _load_fd(self, close: np.ndarray, t=None) -> Dataset:
        t = t or self._t
        if not getattr(t, "can_pass_fds", False):
            raise SweepError(wire.E_BAD_FD, f"{self.url}: this transport cannot pass an fd")
        n = close.shape[0]
        fd = self._sealed_memfd(close)
        try:
            wire.LOAD_FD_REQ.pack_into(self._pay, 0, n, 0)
            rid = self._send(wire.LOAD_FD, [self._pay_mv[:16]], 16, fds=[fd], t=t)
        finally:
            os.close(fd)
        return self._dataset(rid, n, wire.LOAD_FD, t)

    def _outs(self, m: int, out):
        if out is None:
            return np.empty(m, np.float64), np.empty(m, np.int64)
        pnl, trades = out
        if not (isinstance(pnl, np.ndarray) and pnl.dtype == np.float64 and pnl.shape == (m,)
                and pnl.flags.c_contiguous and isinstance(trades, np.ndarray)
                and trades.dtype == np.int64 and trades.shape == (m,) and trades.flags.c_contiguous):
            raise ValueError(f"out must be (float64[{m}], int64[{m}]) C-contiguous arrays")
        return pnl, trades

    def sweep(self, data, params, out=None, strategy: str | None = None,
              fee: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(pnl float64[m], trades int64[m])`` for a close array (SWEEP: the series travels
        with the call) or a :class:`Dataset` (SWEEP_DS: params only). Bit-identical to
        :func:`tollfree.sweep`. ``out=(pnl, trades)`` receives into caller arrays.

        ``strategy="sma_cross"`` (any name :meth:`strategies` lists) sweeps that strategy
        (SWEEP_WITH): ``params`` is then an (n, k) float64 grid in its parameter order, and
        ``fee`` (percent points per closed trade, default 0.09) may be given."""
        if strategy is not None:
            pnl, trades, _ = self._sweep_with(data, params, strategy, fee, False, out)
            return pnl, trades
        if fee is not None:
            raise ValueError("fee= needs strategy= here (HMA's fee: sweep_stats)")
        params = as_params(params)
        m = params.shape[0]
        pnl, trades = self._outs(m, out)
        pv = _bytes_view(params)
        if isinstance(data, Dataset):
            wire.SWEEP_DS_REQ.pack_into(self._pay, 0, data.handle, m, 0)
            op = wire.SWEEP_DS
            rid = self._send(op, [self._pay_mv[:16], pv], 16 + 48 * m)
        else:
            close = as_close(data)
            n = close.shape[0]
            if n > _U32 or m > _U32:
                raise ValueError("SWEEP carries at most 2**32-1 bars and combos: use load()")
            wire.SWEEP_REQ.pack_into(self._pay, 0, n, m)
            op = wire.SWEEP
            rid = self._send(op, [self._pay_mv[:8], _bytes_view(close), pv], 8 + 8 * n + 48 * m)
        self._sweep_reply(op, rid, m, pnl, trades)
        return pnl, trades

    def _sweep_reply(self, op, rid, m, pnl, trades, t=None):
        t = t or self._t
        plen = self._recv(op, rid, 8 + 16 * m, t)
        if plen != 8 + 16 * m:
            self._bad(f"sweep reply of {plen} bytes for {m} combos", t)
        t.read(self._pay_mv[:8], 8 + 16 * m)
        nn = wire.SWEEP_REP.unpack_from(self._pay)[0]
        if nn != m:
            self._bad(f"sweep reply for {nn} combos (sent {m})", t)
        if m:
            t.read(_bytes_view(pnl), 16 * m)
            t.read(_bytes_view(trades), 8 * m)
        t.end_reply()

    def sweep_stats(self, data, params, fee: float = FEE_DEFAULT,
                    strategy: str | None = None) -> dict:
        """Every output of every combo (the names of :func:`tollfree.sweep_stats`, bit-identical
        to it) from the server: SWEEP_DS with the statistics flag and a fee. ``data`` is a
        :class:`Dataset` or a close array (loaded for the call, dropped after if this call
        created it). ``strategy=`` sweeps a named strategy (SWEEP_WITH; a close array then
        travels with the call)."""
        if strategy is not None:
            _, _, rows = self._sweep_with(data, params, strategy, as_fee(fee), True, None)
            return {n: np.ascontiguousarray(rows[n]) for n in STAT_NAMES}
        params = as_params(params)
        fee = as_fee(fee)
        if isinstance(data, Dataset):
            rows = self._sweep_stats_rows(data, params, fee)
        else:
            ds = self.load(as_close(data))
            try:
                rows = self._sweep_stats_rows(ds, params, fee)
            finally:
                if ds.created and not self.closed:
                    self.drop(ds)
        return {n: np.ascontiguousarray(rows[n]) for n in STAT_NAMES}

    def _sweep_stats_rows(self, ds, params, fee, t=None) -> np.ndarray:
        t = t or self._t
        m = params.shape[0]
        flags = wire.SWEEP_FLAG_STATS | wire.SWEEP_FLAG_FEE
        wire.SWEEP_DS_REQ.pack_into(self._pay, 0, ds.handle, m, flags)
        wire.F64.pack_into(self._pay, 16, fee)
        rid = self._send(wire.SWEEP_DS, [self._pay_mv[:24], _bytes_view(params)], 24 + 48 * m, t=t)
        want = 8 + (16 + wire.STATS_ROW) * m
        plen = self._recv(wire.SWEEP_DS, rid, want, t)
        if plen != want:
            self._bad(f"statistics reply of {plen} bytes for {m} combos (expected {want})", t)
        t.read(self._pay_mv[:8], want)
        nn, rflags = wire.SWEEP_REP_FLAGS.unpack_from(self._pay)
        if nn != m or rflags != wire.SWEEP_FLAG_STATS:
            self._bad(f"statistics reply for {nn} combos, flags {rflags} (sent {m})", t)
        arrays = np.empty(2 * m, np.int64)  # pnl and trades again: the rows carry both
        rows = np.empty(m, STATS_DTYPE)
        if m:
            t.read(_bytes_view(arrays), 16 * m)
            t.read(_bytes_view(rows), wire.STATS_ROW * m)
        t.end_reply()
        return rows

    # ---- strategies by name (SWEEP_WITH, SESSION_OPEN_WITH, STRATEGIES) -------------------------
    def strategies(self) -> dict:
        """The strategies the server offers: ``{name: (parameter names...)}`` ("hma" first,
        then those it was started with, ``--strategy``)."""
        t = self._t
        rid = self._send(wire.STRATEGIES, [], 0)
        plen = self._recv(wire.STRATEGIES, rid, 8)
        if plen < 8 or plen > 8 + (64 << 10):
            self._bad(f"STRATEGIES reply of {plen} bytes", t)
        buf = bytearray(plen)
        t.read(memoryview(buf))
        t.end_reply()
        count, tlen = wire.STRATEGIES_REP.unpack_from(buf)
        lines = bytes(buf[8:]).decode("ascii", "replace").splitlines()
        if tlen != plen - 8 or len(lines) != count:
            self._bad(f"STRATEGIES reply ({count} strategies, {tlen} bytes of {plen - 8})", t)
        out = {}
        for line in lines:
            name, *names = line.split(" ")
            out[name] = tuple(names)
        return out

    def _sweep_with(self, data, params, strategy, fee, stats: bool, out, t=None):
        """SWEEP_WITH: ``(pnl, trades, rows or None)``."""
        t = t or self._t
        params = as_strategy_params(params)
        m, k = params.shape
        if m > _U32:
            raise ValueError("a sweep carries at most 2**32-1 combos")
        pnl, trades = self._outs(m, out)
        raw, padded = _strategy_name(strategy)
        flags = wire.SWEEP_FLAG_STATS if stats else 0
        if fee is not None:
            flags |= wire.SWEEP_FLAG_FEE
        if isinstance(data, Dataset):
            handle, n, close = data.handle, 0, None
        else:
            close = as_close(data)
            handle, n = 0, close.shape[0]
        wire.SWEEP_WITH_REQ.pack_into(self._pay, 0, handle, n, m, flags, k, len(raw))
        fixed = 32
        if fee is not None:
            wire.F64.pack_into(self._pay, 32, as_fee(fee))
            fixed = 40
        parts = [self._pay_mv[:fixed], padded]
        if n:
            parts.append(_bytes_view(close))
        if m:
            parts.append(_bytes_view(params))
        rid = self._send(wire.SWEEP_WITH, parts, fixed + len(padded) + 8 * n + 8 * k * m, t=t)
        per = 16 + (wire.STATS_ROW if stats else 0)
        want = 8 + per * m
        plen = self._recv(wire.SWEEP_WITH, rid, want, t)
        if plen != want:
            self._bad(f"SWEEP_WITH reply of {plen} bytes for {m} combos (expected {want})", t)
        t.read(self._pay_mv[:8], want)
        nn, rflags = wire.SWEEP_REP_FLAGS.unpack_from(self._pay)
        if nn != m or rflags != (wire.SWEEP_FLAG_STATS if stats else 0):
            self._bad(f"SWEEP_WITH reply for {nn} combos, flags {rflags} (sent {m})", t)
        rows = np.empty(m, STATS_DTYPE) if stats else None
        if m:
            t.read(_bytes_view(pnl), 16 * m)
            t.read(_bytes_view(trades), 8 * m)
            if stats:
                t.read(_bytes_view(rows), wire.STATS_ROW * m)
        t.end_reply()
        return pnl, trades, rows

    def run_one(self, dataset, combo) -> tuple[float, int]:
        """One combo on a loaded dataset: ``(pnl, trades)`` (the "chatty but cheap" pattern)."""
        if not isinstance(dataset, Dataset):
            dataset = self.load(dataset)
        p = as_combo(combo)
        wire.RUN_ONE_REQ.pack_into(self._pay, 0, dataset.handle, *p.tolist())
        rid = self._send(wire.RUN_ONE, [self._pay_mv[:56]], 56)
        pnl, trades = self._fixed(wire.RUN_ONE, rid, wire.RUN_ONE_REP)
        return pnl, trades

    def session(self, combo, strategy: str | None = None) -> Session:
        """Opens a live session for one combo (closed with the connection at the latest).
        ``strategy="rsi"`` (a name :meth:`strategies` lists): a session of that strategy,
        ``combo`` its parameters as numbers (SESSION_OPEN_WITH); fed the same bars it gives
        exactly the in-process streaming :class:`tollfree.Strategy`'s trades and pnl."""
        if strategy is not None:
            p = as_strategy_params(combo, one=True)
            raw, padded = _strategy_name(strategy)
            wire.SESSION_OPEN_WITH_REQ.pack_into(self._pay, 0, p.shape[0], len(raw))
            rid = self._send(wire.SESSION_OPEN_WITH, [self._pay_mv[:8], padded, _bytes_view(p)],
                             8 + len(padded) + 8 * p.shape[0])
            (sid,) = self._fixed(wire.SESSION_OPEN_WITH, rid, wire.SESSION_OPEN_REP)
            return self._session_cls(self, sid, p.tolist(), strategy)
        p = as_combo(combo)
        wire.SESSION_OPEN_REQ.pack_into(self._pay, 0, *p.tolist())
        rid = self._send(wire.SESSION_OPEN, [self._pay_mv[:48]], 48)
        (sid,) = self._fixed(wire.SESSION_OPEN, rid, wire.SESSION_OPEN_REP)
        return self._session_cls(self, sid, p.tolist())

    _session_cls = Session

    def stats(self) -> dict:
        """Server counters: ``requests, errors, connections_total, connections_open, datasets,
        dataset_bytes, sessions_open, bytes_in, bytes_out, uptime_ns, sweeps, combos``."""
        rid = self._send(wire.STATS, [], 0)
        return dict(zip(wire.STATS_FIELDS, self._fixed(wire.STATS, rid, wire.STATS_REP)))

    def drop(self, dataset: Dataset) -> None:
        """Frees a dataset on the server (for every connection)."""
        h = dataset.handle if isinstance(dataset, Dataset) else int(dataset)
        wire.DROP_REQ.pack_into(self._pay, 0, h)
        rid = self._send(wire.DROP, [self._pay_mv[:8]], 8)
        t = self._t
        plen = self._recv(wire.DROP, rid, 0)
        if plen:
            self._bad(f"DROP reply of {plen} bytes")
        t.end_reply()

    def close(self) -> None:
        if self._t is not None:
            self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<tollfree client {self.url}{' closed' if self.closed else ''}>"


# ---- shared memory ---------------------------------------------------------------------------
class ShmSession(Session):
    """A session whose per-bar call writes its 32-byte frame straight into the request ring and
    reads the 40-byte reply in place.

    ``on_bar`` is a closure built at open: every ring view, struct method and constant is a local
    cell, the request id and bar count are closure variables, and the reply tuple is kept as-is
    (``position``/``trades``/``pnl`` read from it), so a call allocates nothing but the tuple and
    Python ints. Anything unusual (a wrap, a full ring, an error frame, a closed client) falls back
    to the general path, which validates everything.

    Why the ring is inlined here instead of calling ShmTransport.reserve / begin_reply (the one
    implementation the other calls use): in CPython each of those method calls costs about as much
    as the whole bar's ring work, so this path keeps only the no-wrap case and the checks that
    case needs (head and tail 8-aligned, within one ring, the frame before the ring end); the
    shared vectors (tests/vectors/shm_ring.txt, python/tests/test_shm_vectors.py) hold it, the
    general path and the C rings to the same results.
    """

    # fields of a SESSION_BAR reply frame tuple (wire.SESSION_BAR_REPLY_FRAME)
    position = property(lambda self: self._last[5])
    trades = property(lambda self: self._last[7])
    pnl = property(lambda self: self._last[8])
    bars = property(lambda self: self._count())

    def __init__(self, client, session_id, combo, strategy=None):
        self._c = client
        self.id = int(session_id)
        self.strategy = strategy
        self.combo = tuple(float(v) for v in combo) if strategy else tuple(int(v) for v in combo)
        self.closed = False
        self._last = (36, wire.SESSION_BAR, 2, 0, 0, 0, 0, 0, 0.0)
        self.on_bar = self._build(client._t)

    def _build(self, t):
        c = self
        client = self._c
        req, resp, cq, ci = t.req, t.resp, t.cq, t.ci
        mask = t.mask
        ring = t.ring
        fast = t.fast  # [inline spin iterations], adapted by ShmTransport.wait_more
        more = t.wait_more
        wake = t.futex_wake
        seq_addr = t.req_seq_addr
        pack = wire.SESSION_BAR_FRAME.pack_into
        unpack = wire.SESSION_BAR_REPLY_FRAME.unpack_from
        sid = self.id
        OP = wire.SESSION_BAR
        M32 = 0xFFFFFFFF
        QH, QT, RH, RT = _QH, _QT, _RH, _RT
        IS, ISS = _IS, _ISS
        rid = 1 << 62  # this session's own id space; requests are strictly sequential
        n = 0

        def on_bar(close: float) -> int:
            """Sends one bar; returns the position after it (-1, 0 or +1)."""
            nonlocal rid, n
            try:
                pos = cq[QH]
                off = pos & mask
                tl = cq[QT]
                if off + 32 > ring or pos + 32 - tl > ring or tl > pos or tl & 7:
                    return c._slow_bar(close)
                rid += 1
                pack(req, off, 28, OP, 2, 0, rid, sid, close)
                cq[QH] = pos + 32                  # release on TSO: after the frame bytes
                ci[IS] = (ci[IS] + 1) & M32
                if ci[ISS]:
                    wake(seq_addr)
                tail = cq[RT]
                head = cq[RH]
                if head == tail:
                    k = fast[0]
                    while k:
                        head = cq[RH]
                        if head != tail:
                            break
                        k -= 1
                    else:
                        head = more(tail)
                roff = tail & mask
                if 40 <= head - tail <= ring and roff + 40 <= ring and not head & 7:
                    r = unpack(resp, roff)
                    if r[4] == rid and r[0] == 36 and r[1] == OP:
                        cq[RT] = tail + 40
                        c._last = r
                        n += 1
                        return r[5]
            except ValueError:
                if t.closed:
                    raise SweepError(-errno.EBADF, "the client is closed") from None
                raise
            # an error frame, a wrap marker or a malformed reply: the general reader decides
            p, res, tr, pnl = client._fixed(OP, rid, wire.SESSION_BAR_REP)
            c._last = (36, OP, 2, 0, rid, p, res, tr, pnl)
            n += 1
            return p

        def count(set_to=None):
            nonlocal n
            if set_to is not None:
                n = set_to
            return n

        self._count = count
        return on_bar

    def _slow_bar(self, close):
        c = self._c
        wire.SESSION_BAR_REQ.pack_into(c._pay, 0, self.id, close)
        rid = c._send(wire.SESSION_BAR, [c._pay_mv[:16]], 16)
        p, res, tr, pnl = c._fixed(wire.SESSION_BAR, rid, wire.SESSION_BAR_REP)
        self._last = (36, wire.SESSION_BAR, 2, 0, rid, p, res, tr, pnl)
        self._count(self._count() + 1)
        return p

    def _state(self, op: int) -> dict:
        c = self._c
        wire.SESSION_ID.pack_into(c._pay, 0, self.id)
        rid = c._send(op, [c._pay_mv[:8]], 8)
        pos, res, trades, pnl, bars = c._fixed(op, rid, wire.SESSION_STATE_REP)
        self._last = (36, wire.SESSION_BAR, 2, 0, rid, pos, res, trades, pnl)
        self._count(bars)
        return {"position": pos, "trades": trades, "pnl": pnl, "bars": bars}


_QH = wire.SHM_OFF_REQ_HEAD // 8
_QT = wire.SHM_OFF_REQ_TAIL // 8
_RH = wire.SHM_OFF_RESP_HEAD // 8
_RT = wire.SHM_OFF_RESP_TAIL // 8
_IS = wire.SHM_OFF_REQ_SEQ // 4
_ISS = wire.SHM_OFF_SERVER_SLEEPING // 4
_ECHO_FAST_MAX = 64 << 10  # ShmClient.echo: bigger payloads take the general path


class ShmClient(Client):
    """v2 over shared memory. Datasets travel as sealed memfds (LOAD_FD on the control socket,
    mapped read-only by the server, never copied); a sweep whose frame does not fit the ring is
    run as LOAD_FD + SWEEP_DS (in combo chunks that fit) and the dataset dropped again if this
    call created it."""

    _session_cls = ShmSession
    _echo_fast = None

    def echo(self, array, out: np.ndarray | None = None) -> np.ndarray:
        """As :meth:`Client.echo`; small frames take an in-place path on the rings."""
        fast = self._echo_fast
        if fast is None:
            if self.closed:
                return Client.echo(self, array, out)
            # The instance attribute shadows this method: later ``c.echo`` calls go straight in.
            fast = self._echo_fast = self.echo = self._build_echo(self._t)
        return fast(array, out)

    def _build_echo(self, t):
        """The small-echo path (payloads of at most 64 KiB, and within the server's --max-frame,
        whose frame fits before the ring's end): the request is written in place into the request
        ring and the reply copied out of the response ring, as in :class:`ShmSession`. The byte
        views of the last input and output arrays are cached (a loop reuses the same arrays), and
        so is the reused receive buffer for ``out=None`` (the one :meth:`Client.echo` keeps per
        dtype and shape, looked up again whenever the input array, its shape or its dtype
        changes). Anything else (large or wrapping frames, a full ring, non-array input, an error
        frame or a malformed reply) takes the general path, which validates everything. Inlined
        for the reason :class:`ShmSession` gives, and held to the same shared ring vectors."""
        client = self
        bufs = self._echo_bufs
        req, resp, cq, ci = t.req, t.resp, t.cq, t.ci
        req_q, resp_q = t.req_q, t.resp_q  # u64 views of the rings: frame headers are 8-aligned
        mask, ring, fast, more = t.mask, t.ring, t.fast, t.wait_more
        wake, seq_addr = t.futex_wake, t.req_seq_addr
        OP = wire.ECHO
        W0 = (OP << 32) | (wire.VERSION << 40)  # header word 0 but body_len: op, version, 0
        info = self.server_info
        fast_max = _ECHO_FAST_MAX if info is None else min(_ECHO_FAST_MAX, info["max_frame"] - 12)
        M32 = 0xFFFFFFFF
        QH, QT, RH, RT, IS, ISS = _QH, _QT, _RH, _RT, _IS, _ISS
        general = Client.echo
        # this path's own request ids (requests are strictly sequential on a client)
        rid = 1 << 61
        a_last = src_last = None                   # last input array and its byte view
        o_last = dst_last = None                   # last caller `out` and its byte view
        k_arr = k_shape = k_dtype = k_out = k_dst = None  # out=None: last array's reused buffer

        def slow(array, out):
            nonlocal k_arr, k_out, k_dst
            k_arr = k_out = k_dst = None  # the general path may clear or refill the buffers
            return general(client, array, out)

        def echo(array, out=None):
            nonlocal rid, a_last, src_last, o_last, dst_last, k_arr, k_shape, k_dtype, k_out, k_dst
            if array is a_last:
                src = src_last
            else:
                if not isinstance(array, np.ndarray):
                    return slow(array, out)
                src = _bytes_view(array)
                a_last, src_last = array, src
            n = len(src)
            if out is None:
                if array is k_arr and array.dtype is k_dtype and array.shape == k_shape:
                    out, dst = k_out, k_dst
                else:
                    if n > fast_max:
                        return slow(array, out)
                    shape, dtype = array.shape, array.dtype
                    key = (dtype.str, shape)
                    out = bufs.get(key)
                    if out is None:
                        if len(bufs) > 8:
                            bufs.clear()
                        out = bufs[key] = np.empty_like(array, order="C")
                    dst = _bytes_view(out)
                    k_arr, k_shape, k_dtype, k_out, k_dst = array, shape, dtype, out, dst
            elif out is o_last:
                dst = dst_last
            else:
                dst = _bytes_view(out)
                o_last, dst_last = out, dst
            size = (23 + n) & ~7
            try:
                pos = cq[QH]
                off = pos & mask
                tl = cq[QT]
                if (n > fast_max or len(dst) != n or off + size > ring or pos + size - tl > ring
                        or tl > pos or tl & 7):
                    return slow(array, out)
                rid += 1
                w0 = W0 | (12 + n)
                q = off >> 3
                req_q[q] = w0
                req_q[q + 1] = rid
                req[off + 16:off + 16 + n] = src
                cq[QH] = pos + size                 # release on TSO: after the frame bytes
                ci[IS] = (ci[IS] + 1) & M32
                if ci[ISS]:
                    wake(seq_addr)
                tail = cq[RT]
                head = cq[RH]
                if head == tail:
                    k = fast[0]
                    while k:
                        head = cq[RH]
                        if head != tail:
                            break
                        k -= 1
                    else:
                        head = more(tail)
                roff = tail & mask
                if size <= head - tail <= ring and roff + size <= ring and not head & 7:
                    q = roff >> 3
                    if resp_q[q + 1] == rid and resp_q[q] == w0:
                        dst[:] = resp[roff + 16:roff + 16 + n]
                        cq[RT] = tail + size
                        return out
            except ValueError:
                if t.closed:
                    raise SweepError(-errno.EBADF, "the client is closed") from None
                raise
            plen = client._recv(OP, rid, n)  # error frame, wrap or malformed: the general reader
            if plen != n:
                client._bad(f"echo of {plen} bytes (sent {n})")
            t.read(dst, n)
            t.end_reply()
            return out

        return echo

    def load(self, close: np.ndarray, via_fd: bool | None = None) -> Dataset:
        close = as_close(close)
        if via_fd is False or close.shape[0] == 0:
            return Client.load(self, close)
        return self._load_fd(close)

    def _load_fd(self, close: np.ndarray, t=None) -> Dataset:
        # LOAD_FD travels on the control socket, an ordinary Unix socket connection, and is
        # answered there (docs/protocol.md, "Shared memory").
        return Client._load_fd(self, close, self._t.control)

    def sweep(self, data, params, out=None, strategy=None, fee=None):
        if strategy is not None:
            pnl, trades, _ = self._sweep_with(data, params, strategy, fee, False, out)
            return pnl, trades
        if fee is not None:
            raise ValueError("fee= needs strategy= here (HMA's fee: sweep_stats)")
        params = as_params(params)
        m = params.shape[0]
        room = self._room()
        if isinstance(data, Dataset):
            if 16 + 16 * m <= room and 32 + 48 * m <= room:
                return Client.sweep(self, data, params, out)
            return self._sweep_chunked(data, params, out)
        close = as_close(data)
        if 32 + 8 * close.shape[0] + 48 * m <= room and 16 * m <= room:
            return Client.sweep(self, close, params, out)
        ds = self.load(close)
        try:
            return self._sweep_chunked(ds, params, out)
        finally:
            if ds.created and not self.closed:
                self.drop(ds)

    def _sweep_with(self, data, params, strategy, fee, stats, out, t=None):
        """As :meth:`Client._sweep_with`; a frame the ring cannot carry goes as LOAD_FD and
        SWEEP_WITH against the dataset in combo chunks that fit (dropped after if created)."""
        params = as_strategy_params(params)
        m, k = params.shape
        _, padded = _strategy_name(strategy)
        room = self._room()
        per = 16 + (wire.STATS_ROW if stats else 0)
        head = 48 + len(padded)
        n = 0 if isinstance(data, Dataset) else as_close(data).shape[0]
        if head + 8 * n + 8 * k * m <= room and 8 + per * m <= room:
            return Client._sweep_with(self, data, params, strategy, fee, stats, out)
        ds = data if isinstance(data, Dataset) else self.load(as_close(data))
        try:
            pnl, trades = self._outs(m, out)
            rows = np.empty(m, STATS_DTYPE) if stats else None
            step = max(1, min((room - head) // (8 * k), (room - 8) // per))
            for a in range(0, max(m, 1), step):
                b = min(m, a + step)
                _, _, r = Client._sweep_with(self, ds, params[a:b], strategy, fee, stats,
                                             (pnl[a:b], trades[a:b]))
                if stats:
                    rows[a:b] = r
            return pnl, trades, rows
        finally:
            if ds is not data and ds.created and not self.closed:
                self.drop(ds)

    def _room(self) -> int:
        """Bytes of a frame this connection may carry: the ring, and the server's --max-frame
        (a bigger body_len on a ring is a hostile peer to the server: it drops the connection)."""
        if self.server_info is None and not self.closed:
            self.hello()
        limit = self.server_info["max_frame"] if self.server_info else wire.DEFAULT_MAX_FRAME
        return min(self._t.ring - 8, limit) - 32

    def _sweep_chunked(self, ds, params, out):
        m = params.shape[0]
        pnl, trades = self._outs(m, out)
        step = max(1, (self._room() - 32) // 48)
        for a in range(0, max(m, 1), step):
            b = min(m, a + step)
            Client.sweep(self, ds, params[a:b], (pnl[a:b], trades[a:b]))
        return pnl, trades


# ---- spawn: one `tollfree serve --stdio` process per call --------------------------------------
_NOT_SPAWNED = "spawn: this Dataset was not loaded by a spawn client"


class SpawnClient(Client):
    """Runs ``tollfree serve --stdio`` for every call (the process-per-call pattern). Nothing
    persists between calls: :meth:`load` returns a Dataset that keeps a reference to the close
    array so that later calls can send it again; sessions are not available."""

    def __init__(self, binary: str, timeout: float | None = None, url: str = "spawn:",
                 stderr=None):
        super().__init__(None, url)
        import subprocess

        self.binary = binary
        self.timeout = timeout
        self._stderr = subprocess.DEVNULL if stderr is None else stderr
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _run(self, fn, *args):
        from tollfree.client._stream import PipeTransport

        if self._closed:
            raise SweepError(-errno.EBADF, "the client is closed")
        t = self._t = PipeTransport(self.binary, self.timeout, self._stderr)
        try:
            result = fn(self, *args)
        except SweepError as e:
            rc = t.finish() if not t.closed else t.proc.returncode
            if e.code in (wire.E_TRUNCATED, -errno.ECONNRESET, -errno.EPIPE) and rc:
                raise SweepError(e.code, f"{e.message} (tollfree serve --stdio exited with {rc})") from None
            raise
        except BaseException:
            t.close(kill=True)
            raise
        finally:
            self._t = None
        rc = t.finish()
        if rc != 0:
            raise SweepError(wire.E_PROTOCOL, f"tollfree serve --stdio exited with status {rc}")
        return result

    def hello(self) -> dict:
        return self._run(Client.hello)

    def stats(self) -> dict:
        return self._run(Client.stats)

    def echo(self, array, out=None):
        return self._run(Client.echo, array, out)

    def load(self, close, via_fd=None) -> Dataset:
        close = as_close(close)
        ds = self._run(Client.load, close)
        ds._close = close
        return ds

    def _spawned(self, data):
        if isinstance(data, Dataset):
            if data._close is None:
                raise SweepError(wire.E_UNKNOWN_DATASET, _NOT_SPAWNED)
            data = data._close
        return as_close(data)

    def sweep(self, data, params, out=None, strategy=None, fee=None):
        close = self._spawned(data)
        if strategy is not None:
            params = as_strategy_params(params)
            self._outs(params.shape[0], out)
            return self._run(Client.sweep, close, params, out, strategy, fee)
        params = as_params(params)
        self._outs(params.shape[0], out)
        return self._run(Client.sweep, close, params, out)

    def sweep_stats(self, data, params, fee=FEE_DEFAULT, strategy=None):
        if strategy is None:
            return Client.sweep_stats(self, data, params, fee)
        return self._run(Client.sweep_stats, self._spawned(data), params, fee, strategy)

    def strategies(self) -> dict:
        return self._run(Client.strategies)

    def run_one(self, dataset, combo):
        if isinstance(dataset, Dataset):
            if dataset._close is None:
                raise SweepError(wire.E_UNKNOWN_DATASET, _NOT_SPAWNED)
            dataset = dataset._close

        def both(c, close, combo):
            return Client.run_one(c, Client.load(c, close), combo)

        return self._run(both, as_close(dataset), as_combo(combo))

    def drop(self, dataset) -> None:
        """Nothing to free: no server outlives a call."""

    def session(self, combo, strategy=None):
        raise SweepError(wire.E_UNSUPPORTED, "spawn: a process per call cannot hold a live session")

    def close(self) -> None:
        self._closed = True
