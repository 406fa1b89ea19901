"""The paper-trading loop: one combo trades bar by bar through the order engine, with the sweep's
PnL and trade count, bit for bit (the Python twin of ``tollfree paper``, src/cli/cmd_paper.c).

    r = tollfree.paper.run((6, 3, 2, 3, 1, 2))                  # default data, in-process engine
    r.parity, r.pnl, r.kernel_pnl, r.trades
    r = tollfree.paper.run((6, 3, 2, 3, 1, 2), engine="unix:/tmp/engine.sock")   # the service
    python3 -m tollfree.paper --combo 6,3,2,3,1,2 --plot equity.png

Each bar's close is rounded to ticks, ``round(close / tick)`` (half to even); the strategy (the
kernel's streaming API, :class:`tollfree.Strategy`) sees ``ticks * tick``; when its position
changes it sends an order for the change (1 lot to open, 2 to reverse) from account 1. In the
default closing auction a counterparty (account 2) first rests a limit order at that tick price on
the other side and the strategy's limit order crosses it, so each fill is at the bar's rounded
close. With ``half_spread=K`` a quoter (account 3) keeps a bid K ticks under and an ask K ticks
over each close (replaced every bar) and the strategy sends market orders; no parity is expected
and ``spread_cost`` is the kernel's PnL minus the PnL of the fills.

The PnL comes from the fills alone, one closed trade at a time, with the kernel's expression in
its order, ``float(pos) * (exit - entry) / entry * 100.0 - 0.09`` (docs/definition.md section 5); the
prices are the same doubles the kernel sees, so parity is exact.

The in-process engine is libtollfree's (``tf_engine_*`` through ctypes, instrument ``1`` only,
like the CLI), optionally journaled (``journal=DIR``: ``DIR/commands.ofl`` and
``DIR/events.ofl``, replayable by ``tollfree engine run DIR/commands.ofl --instruments 1``).
The service goes through :mod:`tollfree.orders`: the strategy on one connection, the
counterparty or quoter on another, which receives its fills as unsolicited Trades.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

import numpy as np

from tollfree import orders as _o
from tollfree.binding import FEE_DEFAULT

FEE = FEE_DEFAULT  # the default fee, percent points per closed trade (docs/definition.md 5, 9)
ACCT_STRATEGY, ACCT_COUNTER, ACCT_QUOTER = 1, 2, 3
QUOTE_QTY = 2
MAX_LIVE_ORDERS = 1024
DEFAULT_TICK = 1e-4

__all__ = ["run", "PaperResult", "PaperError", "LocalEngine", "round_to_ticks", "plot_equity", "main"]


class PaperError(RuntimeError):
    """The venue refused or did not fill an order the loop needs (the run cannot go on)."""


@dataclass
class PaperResult:
    """What a run did. ``parity`` compares ``pnl``/``trades`` with the sweep's on the rounded
    series as raw bits. ``fill_log`` rows: (bar, direction +1/-1, lots, price in ticks);
    ``equity``: the closed-trade PnL after each bar, ``mtm``: plus the open position marked at
    the bar's rounded close (both percent points, float64[bars])."""

    mode: str
    engine: str
    combo: tuple
    tick: float
    half_spread: int
    fee: float = FEE
    bars: int = 0
    orders: int = 0
    fills: int = 0
    lots: int = 0
    commands: int = 0
    events: int = 0
    pnl: float = 0.0
    trades: int = 0
    kernel_pnl: float = 0.0
    kernel_trades: int = 0
    stream_pnl: float = 0.0
    stream_trades: int = 0
    parity: bool = False
    parity_expected: bool = True
    spread_cost: Optional[float] = None
    position: int = 0
    state_hash: Optional[str] = None
    venue_fills: Optional[int] = None
    seconds: float = 0.0
    bars_per_s: float = 0.0
    fill_log: list = field(default_factory=list, repr=False)
    equity: Optional[np.ndarray] = field(default=None, repr=False)
    mtm: Optional[np.ndarray] = field(default=None, repr=False)

    def to_json(self) -> dict:
        """The summary as the CLI's ``--json`` prints it (no per-bar arrays)."""
        d = asdict(self)
        for k in ("fill_log", "equity", "mtm"):
            d.pop(k)
        d["combo"] = list(self.combo)
        if d["spread_cost"] is None:
            d.pop("spread_cost")
        for k in ("state_hash", "venue_fills"):
            if d[k] is None:
                d.pop(k)
        return d


def round_to_ticks(close: np.ndarray, tick: float) -> np.ndarray:
    """``round(close / tick)`` (half to even) as float64 tick counts; checks they are positive
    whole numbers a price can hold (below 2**53)."""
    q = np.rint(np.asarray(close, dtype=np.float64) / tick)
    bad = ~((q >= 1.0) & (q <= 2.0 ** 53))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"bar {i}: close {close[i]!r} is not a positive price in ticks of {tick:g}")
    return q


# ---------------------------------------------------------------- venues

class _EngineConfig(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("instruments", ctypes.c_void_p),
                ("n_instruments", ctypes.c_uint32), ("max_orders", ctypes.c_uint32),
                ("max_bytes", ctypes.c_uint64)]


class _Sink(ctypes.Structure):
    _fields_ = [("ev", ctypes.c_void_p), ("cap", ctypes.c_size_t), ("n", ctypes.c_size_t),
                ("flush", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class _JournalOpts(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("durability", ctypes.c_int),
                ("group_max_frames", ctypes.c_uint32), ("group_max_us", ctypes.c_uint32),
                ("session_id", ctypes.c_uint64),
                ("clock_kind", ctypes.c_uint8), ("flags", ctypes.c_uint32)]


# sizeof(tf_ofl_msg): u8 kind, u64 journal_seq, u64 session_id, then the union (Trade, 72 bytes).
# A wrong value breaks every event (and so parity): test_paper checks the events decode.
MSG_SIZE = 96


class LocalEngine:
    """libtollfree's engine in this process (one instrument), driven with the same command and
    event objects as :class:`tollfree.orders.Client`, optionally journaled."""

    def __init__(self, instrument: int = 1, max_orders: int = MAX_LIVE_ORDERS,
                 journal: Optional[str] = None):
        from tollfree._lib import lib, strerror

        self._lib = L = lib()
        self._strerror = strerror
        c, p = ctypes, ctypes.c_void_p
        L.tf_engine_create.argtypes = [p, c.POINTER(p)]
        L.tf_engine_destroy.argtypes, L.tf_engine_destroy.restype = [p], None
        L.tf_engine_apply.argtypes = [p, p, p]
        L.tf_engine_state_hash.argtypes, L.tf_engine_state_hash.restype = [p], c.c_uint64
        L.tf_ofl_frame_decode.argtypes = [p, c.c_size_t, p]
        L.tf_ofl_frame_encode.argtypes = [p, c.c_size_t, p]
        L.tf_journal_open.argtypes = [c.c_char_p, p, c.POINTER(p), p]
        L.tf_journal_append.argtypes = [p, p, p]
        L.tf_journal_close.argtypes = [p]
        self._inst = (ctypes.c_uint64 * 1)(instrument)
        cfg = _EngineConfig(ctypes.sizeof(_EngineConfig), ctypes.addressof(self._inst), 1,
                            max_orders, 0)
        self._e = ctypes.c_void_p()
        rc = L.tf_engine_create(ctypes.byref(cfg), ctypes.byref(self._e))
        if rc:
            raise PaperError(f"engine: {strerror(rc)}")
        self._cap = max_orders + 2
        self._ev = ctypes.create_string_buffer(MSG_SIZE * self._cap)
        self._cmd = ctypes.create_string_buffer(MSG_SIZE + 64)
        self._frame = ctypes.create_string_buffer(_o.MAX_FRAME)
        self._sink = _Sink(ctypes.addressof(self._ev), self._cap, 0, None, None)
        self._seq = 0
        self._jcmd = self._jev = None
        if journal:
            self._open_journals(journal)

    def _open_journals(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        for name in ("commands.ofl", "events.ofl"):
            path = os.path.join(d, name)
            if os.path.exists(path) and os.path.getsize(path) > _o.HEADER_LEN + 4:
                raise PaperError(f"{path} already holds records: use an empty directory")
            h = ctypes.c_void_p()
            # TF_JOURNAL_NONE (synced at close); size = this layout, every other field 0
            opts = _JournalOpts(size=ctypes.sizeof(_JournalOpts))
            rc = self._lib.tf_journal_open(path.encode(), ctypes.byref(opts), ctypes.byref(h),
                                           None)
            if rc:
                raise PaperError(f"{path}: {self._strerror(rc)}")
            if name == "commands.ofl":
                self._jcmd = h
            else:
                self._jev = h

    def call(self, cmd) -> _o.Reply:
        """Applies one command (its command_seq assigned here, 1, 2, ...) and returns its events."""
        L = self._lib
        self._seq += 1
        frame = _o.encode_frame(_replace_seq(cmd, self._seq))
        rc = L.tf_ofl_frame_decode(frame, len(frame), self._cmd)
        if rc < 0:
            raise PaperError(f"encode: {self._strerror(rc)}")
        if self._jcmd is not None:
            rc = L.tf_journal_append(self._jcmd, self._cmd, None)
            if rc < 0:
                raise PaperError(f"journal: {self._strerror(rc)}")
        self._sink.n = 0
        rc = L.tf_engine_apply(self._e, self._cmd, ctypes.byref(self._sink))
        if rc < 0:
            raise PaperError(f"engine: {self._strerror(rc)}")
        out = _o.Reply()
        out.command_seq = self._seq
        base = ctypes.addressof(self._ev)
        for k in range(self._sink.n):
            n = L.tf_ofl_frame_encode(self._frame, _o.MAX_FRAME, base + k * MSG_SIZE)
            if n < 0:
                raise PaperError(f"event encode: {self._strerror(n)}")
            out.append(_o.decode_frame(self._frame.raw[:n])[0])
            if self._jev is not None:
                rc = L.tf_journal_append(self._jev, base + k * MSG_SIZE, None)
                if rc < 0:
                    raise PaperError(f"event journal: {self._strerror(rc)}")
        return out

    def state_hash(self) -> str:
        return "0x%016x" % self._lib.tf_engine_state_hash(self._e)

    def close(self) -> None:
        for attr in ("_jcmd", "_jev"):
            h = getattr(self, attr, None)
            if h is not None:
                rc = self._lib.tf_journal_close(h)
                setattr(self, attr, None)
                if rc:
                    raise PaperError(f"journal close: {self._strerror(rc)}")
        if getattr(self, "_e", None):
            self._lib.tf_engine_destroy(self._e)
            self._e = None


def _replace_seq(cmd, seq: int):
    from dataclasses import replace

    return replace(cmd, command_seq=seq)


class _Ledger:
    """Position and PnL from fills: -1, 0 or +1 lot; a fill first closes what is open (one
    closed trade, the kernel's expression), then opens the rest."""

    __slots__ = ("pos", "entry", "pnl", "trades", "fills", "lots", "fee")

    def __init__(self, fee: float = FEE):
        self.pos, self.entry, self.pnl, self.trades, self.fills, self.lots = 0, 0.0, 0.0, 0, 0, 0
        self.fee = fee

    def fill(self, direction: int, qty: int, px: float) -> None:
        self.fills += 1
        self.lots += qty
        for _ in range(qty):
            if self.pos != 0 and self.pos != direction:
                self.pnl += float(self.pos) * (px - self.entry) / self.entry * 100.0 - self.fee
                self.trades += 1
                self.pos = 0
            elif self.pos == 0:
                self.pos = direction
                self.entry = px
            else:
                raise PaperError("a fill beyond one lot: not a position this strategy takes")


def _accepted(reply, bar: int, what: str) -> int:
    if reply and isinstance(reply[0], _o.Accepted):
        return reply[0].order_id
    if reply and isinstance(reply[0], _o.Rejected):
        raise PaperError(f"bar {bar}: {what} rejected: {reply[0].reason_name}")
    raise PaperError(f"bar {bar}: {what}: unexpected reply {reply!r}")


def _progress(i: int, n: int) -> None:
    w = 40
    k = int(w * i / n) if n else w
    sys.stderr.write(f"\rpaper [{'#' * k}{' ' * (w - k)}] {int(100 * i / n) if n else 100:3d}% "
                     f"{i}/{n} bars")
    if i == n:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run(combo: Sequence[int], close: Optional[np.ndarray] = None, *, tick: float = DEFAULT_TICK,
        engine: Optional[str] = None, half_spread: int = 0, journal: Optional[str] = None,
        instrument: int = 1, timeout: Optional[float] = 60.0, progress: Optional[bool] = None,
        plot: Optional[str] = None, fee: float = FEE) -> PaperResult:
    """Paper-trades ``combo`` (six window lengths) on ``close`` (default: the default data).

    ``engine``: None for libtollfree's engine in-process, or ``unix:PATH`` / ``tcp:HOST:PORT``
    of ``tollfree engine serve``. ``half_spread``: 0 for the closing auction, K >= 1 ticks for
    the quoted market. ``journal``: in-process only, a directory for the OFL1 journals.
    ``progress``: a bar on stderr (default: when stderr is a terminal). ``plot``: a PNG path for
    :func:`plot_equity`. ``fee``: percent points per closed trade (default 0.09), for the fills'
    PnL and the kernel's alike. Raises :class:`PaperError` when the venue refuses an order the loop
    needs."""
    from tollfree.binding import Strategy, as_fee, sweep

    fee = as_fee(fee)

    combo = tuple(int(v) for v in combo)
    if len(combo) != 6 or min(combo) < 1:
        raise ValueError(f"a combo is six window lengths >= 1, got {combo}")
    if not (tick > 0 and np.isfinite(tick)):
        raise ValueError(f"tick must be a positive number, got {tick!r}")
    half_spread = int(half_spread)
    if half_spread < 0:
        raise ValueError("half_spread must be >= 0 ticks")
    if journal and engine:
        raise ValueError("journal is for the in-process engine (the service keeps its own)")
    if close is None:
        from tollfree.data import default_close

        close = default_close()
    close = np.ascontiguousarray(close, dtype=np.float64)
    ticks = round_to_ticks(close, tick)
    if half_spread and (ticks - half_spread < 1).any():
        raise ValueError("a bid would be at or under 0 ticks with this half spread")
    px = ticks * tick  # the series the strategy and the kernel see
    n = px.shape[0]
    if progress is None:
        progress = sys.stderr.isatty()

    res = PaperResult(mode="half_spread" if half_spread else "auction",
                      engine=engine or "in-process", combo=combo, tick=tick,
                      half_spread=half_spread, fee=fee, parity_expected=not half_spread)
    local = LocalEngine(instrument, journal=journal) if engine is None else None
    conns = []
    if engine is not None:
        conns = [_o.connect(engine, timeout=timeout), _o.connect(engine, timeout=timeout)]
        res.venue_fills = 0

    def call(who: int, cmd) -> _o.Reply:
        r = local.call(cmd) if local is not None else conns[who].call(cmd)
        res.commands += 1
        res.events += len(r)
        return r

    led = _Ledger(fee)
    equity = np.empty(n, dtype=np.float64)
    mtm = np.empty(n, dtype=np.float64)
    quotes = {_o.BUY: [0, 0], _o.SELL: [0, 0]}  # side -> [order_id or 0, remaining]
    cid = {"s": 0, "v": 0}
    strat = Strategy(combo, fee=fee)
    t0 = time.perf_counter()
    pos = 0
    last = 0
    every = n // 200 + 1

    def requote(side: int, price: int, bar: int) -> None:
        q = quotes[side]
        cid["v"] += 1
        if q[0]:
            r = call(1, _o.Replace(q[0], cid["v"], price, QUOTE_QTY))
            if not r or not isinstance(r[0], _o.Replaced):
                raise PaperError(f"bar {bar}: quote replace refused: {r!r}")
        else:
            r = call(1, _o.NewLimit(ACCT_QUOTER, cid["v"], instrument, side, price, QUOTE_QTY))
            q[0] = _accepted(r, bar, "quote")
        if len(r) > 1:
            raise PaperError(f"bar {bar}: a quote traded on entry")
        q[1] = QUOTE_QTY

    try:
        step = strat.on_bar
        for i in range(n):
            want = step(px[i])
            t = int(ticks[i])
            if half_spread:
                if t >= last:
                    requote(_o.SELL, t + half_spread, i)
                    requote(_o.BUY, t - half_spread, i)
                else:
                    requote(_o.BUY, t - half_spread, i)
                    requote(_o.SELL, t + half_spread, i)
                last = t
            if want != pos:
                d = 1 if want > pos else -1
                qty = abs(want - pos)
                side = _o.BUY if d > 0 else _o.SELL
                if not half_spread:
                    cid["v"] += 1
                    r = call(1, _o.NewLimit(ACCT_COUNTER, cid["v"], instrument, 1 - side, t, qty))
                    _accepted(r, i, "the counterparty's order")
                    cid["s"] += 1
                    cmd = _o.NewLimit(ACCT_STRATEGY, cid["s"], instrument, side, t, qty)
                else:
                    cid["s"] += 1
                    cmd = _o.NewMarket(ACCT_STRATEGY, cid["s"], instrument, side, qty)
                r = call(0, cmd)
                res.orders += 1
                oid = _accepted(r, i, "the strategy's order")
                for e in r[1:]:
                    if isinstance(e, _o.Trade) and e.taker_order_id == oid:
                        led.fill(d, e.quantity, e.price * tick)
                        res.fill_log.append((i, d, e.quantity, e.price))
                        for q in quotes.values():
                            if q[0] == e.maker_order_id:
                                q[1] -= e.quantity
                                if q[1] == 0:
                                    q[0] = 0
                if led.pos != want:
                    raise PaperError(f"bar {i}: the order was not filled (position {led.pos}, "
                                     f"wanted {want})")
                pos = want
            if conns:
                res.venue_fills += len(conns[1].fills(0))
            equity[i] = led.pnl
            mtm[i] = led.pnl + (float(led.pos) * (px[i] - led.entry) / led.entry * 100.0
                                if led.pos else 0.0)
            if progress and (i % every == 0 or i + 1 == n):
                _progress(i + 1, n)
        res.bars = n
        for q in quotes.values():  # leave the book as it was
            if q[0]:
                call(1, _o.CancelByOrder(q[0]))
        if conns and not half_spread:  # the counterparty's last fills may still be coming
            until = time.monotonic() + (timeout or 60.0)
            while res.venue_fills < led.fills and time.monotonic() < until:
                res.venue_fills += len(conns[1].fills(0.1))
        res.seconds = time.perf_counter() - t0
        res.stream_pnl, res.stream_trades = strat.pnl, strat.trades
        if local is not None:
            res.state_hash = local.state_hash()
    finally:
        strat.close()
        for c in conns:
            c.close()
        if local is not None:
            local.close()

    kp, kt = sweep(px, np.asarray([combo], dtype=np.int64), threads=1, fee=fee)
    res.kernel_pnl, res.kernel_trades = float(kp[0]), int(kt[0])
    res.pnl, res.trades, res.fills, res.lots = led.pnl, led.trades, led.fills, led.lots
    res.position = pos
    res.parity = (np.float64(res.pnl).tobytes() == kp[:1].tobytes()
                  and res.trades == res.kernel_trades)
    if half_spread:
        res.spread_cost = res.kernel_pnl - res.pnl
    res.bars_per_s = n / res.seconds if res.seconds > 0 else 0.0
    res.equity, res.mtm = equity, mtm
    if plot:
        plot_equity(res, plot)
    return res


def plot_equity(res: PaperResult, path: str) -> None:
    """A PNG of the equity curve (closed trades, and marked to market) with the fills marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5), dpi=110)
    x = np.arange(res.bars)
    ax.plot(x, res.mtm, lw=0.6, color="0.6", label="marked to market")
    ax.plot(x, res.equity, lw=1.0, color="C0", label="closed trades")
    if res.fill_log:
        fl = np.asarray(res.fill_log, dtype=np.int64)
        # many thousand fills: mark at most ~4000 of them, evenly, so the plot stays readable
        stride = max(1, len(fl) // 4000)
        fl = fl[::stride]
        for d, color, marker, name in ((1, "C2", "^", "buy fills"), (-1, "C3", "v", "sell fills")):
            sel = fl[fl[:, 1] == d]
            ax.scatter(sel[:, 0], res.equity[sel[:, 0]], s=6, c=color, marker=marker, lw=0,
                       label=name + ("" if stride == 1 else f" (1 in {stride})"))
    title = (f"paper {','.join(map(str, res.combo))}: pnl {res.pnl:.4f} pp, {res.trades} trades"
             f" ({res.mode}, {res.engine}); kernel {res.kernel_pnl:.4f}, parity {res.parity}")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("bar")
    ax.set_ylabel("PnL (percent points)")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ---------------------------------------------------------------- command line

def _parse_combo(s: str) -> tuple:
    parts = s.split(",")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--combo {s}: want L,half,sq,p,p3,p2 or one L") from None
    if len(vals) == 1:
        from tollfree.grid import combo

        return tuple(combo(vals[0]))
    if len(vals) != 6 or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"--combo {s}: want six window lengths >= 1")
    return tuple(vals)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python3 -m tollfree.paper``: the options of ``tollfree paper`` (which runs this for
    ``--plot``). Exit 0 parity (or a half spread), 1 parity failed, 2 usage or venue error."""
    ap = argparse.ArgumentParser(prog="python3 -m tollfree.paper",
                                 description="Paper-trade one combo through the order engine "
                                             "(see `tollfree paper --help`).")
    ap.add_argument("--combo", required=True, type=_parse_combo)
    ap.add_argument("--input")
    ap.add_argument("--column", default="close")
    ap.add_argument("--tick", type=float, default=DEFAULT_TICK)
    ap.add_argument("--fee", type=float, default=FEE)
    ap.add_argument("--engine")
    ap.add_argument("--instrument", type=int, default=1)
    ap.add_argument("--half-spread", type=int, default=0)
    ap.add_argument("--journal")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plot")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    close = None
    if a.input:
        from tollfree.data import load_close

        close = load_close(a.input, a.column)
    try:
        r = run(a.combo, close, tick=a.tick, engine=a.engine, half_spread=a.half_spread,
                journal=a.journal, instrument=a.instrument, fee=a.fee,
                progress=False if a.quiet else None, plot=a.plot)
    except (PaperError, ValueError, _o.EngineError) as e:
        print(f"tollfree paper: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r.to_json(), default=float))
    else:
        print(f"paper: combo {','.join(map(str, r.combo))}, {r.bars} bars, {r.mode}, {r.engine}")
        print(f"  orders {r.orders}, fills {r.fills}, commands {r.commands}, events {r.events}")
        print(f"  pnl    {r.pnl!r}  trades {r.trades}   (from the fills)")
        print(f"  kernel {r.kernel_pnl!r}  trades {r.kernel_trades}   (the sweep on the rounded "
              "series)")
        if r.half_spread:
            print(f"  spread cost {r.spread_cost:.6f} percent points (half spread "
                  f"{r.half_spread} ticks)")
        else:
            print(f"  parity {'yes (bit for bit)' if r.parity else 'NO'}")
        if r.state_hash:
            print(f"  state_hash {r.state_hash}")
        if a.plot:
            print(f"  plot {a.plot}")
        print(f"  {r.seconds:.3f} s, {r.bars_per_s:.0f} bars/s")
    return 0 if (r.parity or r.half_spread) else 1


if __name__ == "__main__":
    sys.exit(main())
