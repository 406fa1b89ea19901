"""Paper trading: one combo trades bar by bar through the order engine, with the sweep's PnL and
trade count, bit for bit. The loop is libtollfree's ``tf_paper_run`` (include/tollfree/paper.h),
the same code ``tollfree paper`` runs; this module is its Python shell (ctypes), plus the plot.

    r = tollfree.paper.run((6, 3, 2, 3, 1, 2))                  # default data, in-process engine
    r.parity, r.pnl, r.kernel_pnl, r.trades, r.unrounded_pnl, r.unrounded_diff
    r = tollfree.paper.run((6, 3, 2, 3, 1, 2), engine="unix:/tmp/engine.sock")   # the service
    python3 -m tollfree.paper --combo 6,3,2,3,1,2 --plot equity.png

Each bar's close is rounded to a whole number of ticks (half to even); the strategy sees the price
of that many ticks (:func:`price`); when its position changes it sends an order for the change
(1 lot to open, 2 to reverse) from account 1. In the default closing auction a counterparty
(account 2) first rests a limit order at that tick price on the other side and the strategy's
limit order crosses it, so each fill is at the bar's rounded close. With ``half_spread=K`` a
quoter (account 3) keeps a bid K ticks under and an ask K ticks over each close (replaced every
bar) and the strategy sends market orders; no parity is expected and ``spread_cost`` is the
kernel's PnL minus the PnL of the fills.

The tick: ``tick=None`` (the default) chooses it from the data (:func:`tick_from_data`): the
coarsest power of ten under which every close rounds to itself, so a series with five decimals
trades its own prices. When none fits, 0.0001 (``tick_source == "default"``) and the closes are
rounded. A given tick under which rounding changes a close of a series that has a decimal tick
is refused (:class:`ValueError`) unless ``coarse_tick=True``.

``parity`` is the check against the rounded series (raw bits of pnl, and the trade count);
``unrounded_pnl`` / ``unrounded_trades`` are the sweep on the series as given and
``unrounded_diff`` is ``pnl - unrounded_pnl`` (``rounded_closes`` says how many closes the
rounding changed; 0 means the two comparisons are one).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Sequence, Union

import numpy as np

from tollfree.binding import FEE_DEFAULT, _Progress, as_fee

FEE = FEE_DEFAULT  # the default fee, percent points per closed trade (docs/definition.md 5, 9)
DEFAULT_TICK = 1e-4  # TF_PAPER_DEFAULT_TICK: the tick when none is given and none fits the data
MAX_DECIMALS = 10  # TF_PAPER_MAX_DECIMALS
MAX_INFLIGHT = 65536  # TF_PAPER_MAX_INFLIGHT: position changes in flight through the service
FILL_SIZE = 32  # sizeof(tf_paper_fill): bar, dir, qty_lots, px_ticks (int64 each)
TICK_SOURCES = ("given", "data", "default")  # tf_paper_tick_source

# tf_error values this module tells apart (include/tollfree/error.h)
_E_INVALID_ARG, _E_BAD_INPUT, _E_CANCELLED, _E_STRATEGY = -1002, -1006, -1106, -1107
_E_WINDOW = (-1100, -1101)

__all__ = ["run", "PaperResult", "PaperError", "tick_from_data", "price", "round_to_ticks",
           "plot_equity", "main", "DEFAULT_TICK", "FEE"]


class PaperError(RuntimeError):
    """The venue refused or did not fill an order the loop needs, or could not be reached or
    journaled (the run cannot go on). ``code`` is the library's tf_error."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


class _Config(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("combo", ctypes.c_int64 * 6),
                ("tick", ctypes.c_double), ("fee", ctypes.POINTER(ctypes.c_double)),
                ("instrument", ctypes.c_uint64), ("half_spread", ctypes.c_int64),
                ("coarse_tick", ctypes.c_int), ("timeout_ms", ctypes.c_int),
                ("engine_url", ctypes.c_char_p), ("journal_dir", ctypes.c_char_p),
                ("progress", ctypes.POINTER(_Progress)), ("strategy", ctypes.c_void_p),
                ("params", ctypes.POINTER(ctypes.c_double)),
                ("session", ctypes.c_char_p), ("secret", ctypes.c_char_p),
                ("secret_len", ctypes.c_size_t), ("max_inflight", ctypes.c_uint32)]


_I64, _D = ctypes.c_int64, ctypes.c_double


class _Result(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("fill_log", ctypes.c_void_p),
                ("fill_log_cap", ctypes.c_size_t), ("equity", ctypes.c_void_p),
                ("mtm", ctypes.c_void_p), ("tick", _D), ("tick_source", ctypes.c_int),
                ("position", ctypes.c_int), ("rounded_closes", _I64), ("first_rounded", _I64),
                ("bars", _I64), ("orders", _I64), ("fills", _I64), ("lots", _I64),
                ("commands", _I64), ("events", _I64), ("pnl", _D), ("trades", _I64),
                ("kernel_pnl", _D), ("kernel_trades", _I64), ("stream_pnl", _D),
                ("stream_trades", _I64), ("unrounded_pnl", _D), ("unrounded_trades", _I64),
                ("unrounded_diff", _D), ("spread_cost", _D), ("parity", ctypes.c_int),
                ("unrounded_parity", ctypes.c_int), ("has_state_hash", ctypes.c_int),
                ("in_process", ctypes.c_int), ("state_hash", ctypes.c_uint64),
                ("venue_fills", ctypes.c_uint64), ("fills_dropped", ctypes.c_uint64),
                ("seconds", _D)]


_declared = None


def _lib():
    """libtollfree with this module's prototypes declared (once)."""
    global _declared
    from tollfree._lib import lib

    L = lib()
    if _declared is not L:
        p, c = ctypes.c_void_p, ctypes
        L.tf_paper_run.argtypes = [p, c.c_int64, p, p, c.c_char_p, c.c_size_t]
        L.tf_paper_run.restype = c.c_int
        L.tf_paper_tick_from_data.argtypes = [p, c.c_int64, c.POINTER(c.c_double)]
        L.tf_paper_price.argtypes, L.tf_paper_price.restype = [c.c_int64, c.c_double], c.c_double
        L.tf_paper_round.argtypes = [c.c_double, c.c_double, c.POINTER(c.c_int64)]
        L.tf_paper_format.argtypes = [p, p, c.c_int, c.c_char_p, c.c_size_t]
        L.tf_engine_format_hash.argtypes = [c.c_uint64, c.c_char_p]
        L.tf_engine_format_hash.restype = None
        _declared = L
    return L


@dataclass
class PaperResult:
    """What a run did (the fields of the CLI's ``--json``, and the per-bar arrays).

    ``parity``: ``pnl``/``trades`` equal the sweep's on the rounded series (``kernel_pnl``,
    ``kernel_trades``) as raw bits. ``unrounded_pnl``/``unrounded_trades``: the sweep on the
    series as given; ``unrounded_diff = pnl - unrounded_pnl``; ``unrounded_parity`` the raw-bit
    check against it; ``rounded_closes``: closes the rounding changed. ``tick_source``: "given",
    "data" (chosen from the data) or "default" (none fitted: 0.0001). ``fill_log``: int64
    [fills, 4] rows (bar, direction +1/-1, lots, price in ticks); ``equity``: the closed-trade
    PnL after each bar, ``mtm``: plus the open position marked at the bar's rounded close (both
    percent points, float64[bars])."""

    mode: str
    engine: str
    combo: tuple  # HMA's six lengths, or the strategy's parameters (in its order)
    tick: float
    half_spread: int
    fee: float = FEE
    tick_source: str = "given"
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
    rounded_closes: int = 0
    unrounded_pnl: float = 0.0
    unrounded_trades: int = 0
    unrounded_diff: float = 0.0
    unrounded_parity: bool = False
    spread_cost: Optional[float] = None
    position: int = 0
    state_hash: Optional[str] = None
    venue_fills: Optional[int] = None
    fills_dropped: Optional[int] = None
    seconds: float = 0.0
    bars_per_s: float = 0.0
    fill_log: np.ndarray = field(default_factory=lambda: np.empty((0, 4), np.int64), repr=False)
    equity: Optional[np.ndarray] = field(default=None, repr=False)
    mtm: Optional[np.ndarray] = field(default=None, repr=False)
    strategy: str = "hma"

    def summary(self, as_json: bool = False) -> str:
        """The summary ``tollfree paper`` prints (its ``--json`` line with ``as_json``): the
        library's ``tf_paper_format``, so the two print the same text."""
        cfg, res = self._c[:2]
        L = _lib()
        buf = ctypes.create_string_buffer(4096)
        n = L.tf_paper_format(ctypes.byref(cfg), ctypes.byref(res), 1 if as_json else 0, buf,
                              len(buf))
        if n < 0 or n >= len(buf):
            raise PaperError(f"tf_paper_format: {n}", n)
        return buf.value.decode()

    def to_json(self) -> dict:
        """The summary as the CLI's ``--json`` prints it (no per-bar arrays)."""
        d = asdict(self)
        for k in ("fill_log", "equity", "mtm"):
            d.pop(k)
        d["combo"] = list(self.combo)
        for k in ("spread_cost", "state_hash", "venue_fills", "fills_dropped"):
            if d[k] is None:
                d.pop(k)
        return d


def _check_tick(tick: float) -> float:
    if isinstance(tick, bool) or not isinstance(tick, (int, float, np.integer, np.floating)):
        raise TypeError(f"tick must be a number, got {tick!r}")
    tick = float(tick)
    if not (tick > 0 and np.isfinite(tick)):
        raise ValueError(f"tick must be a positive number, got {tick!r}")
    return tick


def tick_from_data(close) -> tuple[float, bool]:
    """``(tick, fits)``: the coarsest power of ten 10^-k (k = 0..10) under which every close
    rounds to itself (``price(round(close), tick) == close`` as doubles), and True; or
    ``(0.0001, False)`` when none fits (libtollfree's ``tf_paper_tick_from_data``)."""
    from tollfree.data import to_close

    c = to_close(close)
    t = ctypes.c_double()
    rc = _lib().tf_paper_tick_from_data(c.ctypes.data, c.shape[0], ctypes.byref(t))
    if rc < 0:
        raise ValueError(_strerror(rc))
    return t.value, rc == 1


def price(px_ticks: int, tick: float) -> float:
    """The price of ``px_ticks`` ticks, the double the strategy, the kernel's figure and the fills
    all use: ``px_ticks / 10**k`` (correctly rounded) for a decimal tick ``1e-k``, else
    ``px_ticks * tick`` (``tf_paper_price``)."""
    return _lib().tf_paper_price(int(px_ticks), _check_tick(tick))


def round_to_ticks(close, tick: float) -> np.ndarray:
    """Each close as a whole number of ticks (int64, ``tf_paper_round``: half to even); raises
    :class:`ValueError` naming the first close that is no positive price in these ticks."""
    tick = _check_tick(tick)
    L = _lib()
    c = np.ascontiguousarray(close, dtype=np.float64)
    out = np.empty(c.shape[0], dtype=np.int64)
    q = ctypes.c_int64()
    for i, x in enumerate(c.tolist()):
        if L.tf_paper_round(x, tick, ctypes.byref(q)):
            raise ValueError(f"bar {i}: close {x!r} is not a positive price in ticks of {tick!r}")
        out[i] = q.value
    return out


def _strerror(rc: int) -> str:
    from tollfree._lib import strerror

    return strerror(rc)


def _raise(rc: int, msg: str) -> None:
    text = msg or _strerror(rc)
    if rc == _E_CANCELLED:
        raise KeyboardInterrupt(text)
    if rc == _E_BAD_INPUT:
        from tollfree.data import BadInput

        raise BadInput(text)
    if rc in (_E_INVALID_ARG, _E_STRATEGY) or rc in _E_WINDOW:
        raise ValueError(text)
    raise PaperError(text, rc)


def _progress_line(done: int, total: int) -> None:
    w = 40
    k = int(w * done / total) if total else w
    pct = int(100 * done / total) if total else 100
    sys.stderr.write(f"\rpaper [{'#' * k}{' ' * (w - k)}] {pct:3d}% {done}/{total} bars")
    sys.stderr.flush()


def _strategy_params(r, combo, params) -> np.ndarray:
    """One combo of strategy r as float64[k]: ``params`` (or ``combo``) as numbers in its
    parameter order, or a dict {name: value} naming each parameter once."""
    given = params if params is not None else combo
    if given is None:
        raise ValueError(f"strategy {r.name} needs params= ({', '.join(r.param_names)})")
    return r.combo(given)[0].copy()


def run(combo: Optional[Sequence[int]] = None, close=None, *, tick: Optional[float] = None,
        engine: Optional[str] = None, half_spread: int = 0, journal: Optional[str] = None,
        instrument: int = 1, timeout: Optional[float] = 60.0,
        progress: Union[None, bool, Callable[[int, int], None]] = None,
        plot: Optional[str] = None, fee: float = FEE, coarse_tick: bool = False,
        strategy=None, params=None, session: Optional[str] = None,
        secret: Union[None, str, bytes] = None,
        max_inflight: Optional[int] = None) -> PaperResult:
    """Paper-trades ``combo`` (six window lengths) on ``close`` (a numpy array, pandas Series or
    DataFrame with a ``close`` column, any sequence of positive prices; default: the default
    data) through libtollfree's ``tf_paper_run``.

    ``strategy`` (as :func:`tollfree.sweep` takes it: a built-in name, a plugin path, a
    :func:`tollfree.strategies.define` strategy) trades one combo of that strategy instead:
    ``params`` its parameters (numbers in its order, or a dict by name; ``combo`` is taken
    when ``params`` is not given). The kernel's figures are then its sweep's, and parity is
    checked the same way (``tollfree paper --strategy NAME --params a=V,...``).

    ``tick``: None to choose it from the data (:func:`tick_from_data`), else the tick size;
    ``coarse_tick``: trade a tick under which rounding changes the data's closes (else refused).
    ``engine``: None for the engine in-process, or ``unix:PATH`` / ``tcp:HOST:PORT`` of
    ``tollfree engine serve``. ``half_spread``: 0 for the closing auction, K >= 1 ticks for the
    quoted market. ``journal``: in-process only, a directory for the OFL1 journals.
    ``timeout``: seconds per service call (None: no limit). ``progress``: a bar on stderr (None:
    when stderr is a terminal), or a callable(done, total). ``plot``: a PNG path for
    :func:`plot_equity`. ``fee``: percent points per closed trade (0 <= fee < 100, default 0.09),
    for the fills' PnL and the kernel's alike. ``session``: log on to a service started with
    ``--sessions`` (docs/venue.md) as this session, with ``secret`` (else the environment
    variable ``TOLLFREE_SECRET``). ``max_inflight``: with ``engine`` in the auction, the position
    changes sent before the oldest one's replies are read (None: 256; 1: each change's replies
    before the next bar, one round trip per change); the results are the same bits whatever it
    is (the strategy's position depends on prices only, and the fills are booked in order).

    Raises :class:`ValueError` for bad arguments (``tollfree.data.BadInput``, a ValueError, for
    refused prices or a refused tick), :class:`PaperError` when the venue refuses an order the
    loop needs or cannot be reached, KeyboardInterrupt after Ctrl-C (the run is cancelled)."""
    from tollfree.data import default_close, to_close

    from tollfree import strategies as _st

    fee = as_fee(fee)
    r_st = _st.resolve(strategy)
    p_st = None
    if r_st.is_hma:
        combo = params if params is not None else combo
        if combo is None:
            raise ValueError("a combo is six window lengths >= 1 (combo=, or params=)")
        if isinstance(combo, dict):
            combo = _strategy_params(r_st, None, combo)
        combo = tuple(int(v) for v in combo)
        if len(combo) != 6 or min(combo) < 1:
            raise ValueError(f"a combo is six window lengths >= 1, got {combo}")
    else:
        p_st = _strategy_params(r_st, combo, params)
        combo = tuple(float(v) for v in p_st)
    tick_v = 0.0 if tick is None else _check_tick(tick)
    half_spread = int(half_spread)
    if half_spread < 0:
        raise ValueError("half_spread must be >= 0 ticks")
    if journal and engine:
        raise ValueError("journal is for the in-process engine (the service keeps its own)")
    if max_inflight is not None and not 1 <= int(max_inflight) <= MAX_INFLIGHT:
        raise ValueError(f"max_inflight must be 1 .. {MAX_INFLIGHT} position changes")
    c = default_close() if close is None else to_close(close)
    n = int(c.shape[0])

    if session is not None:
        if not engine:
            raise ValueError("session goes with engine= (a service started with --sessions)")
        if secret is None:
            secret = os.environ.get("TOLLFREE_SECRET", "")
        secret_b = secret.encode() if isinstance(secret, str) else bytes(secret)
        if not 16 <= len(secret_b) <= 256:
            raise ValueError("a session secret has 16 to 256 characters")
    fee_c = ctypes.c_double(fee)
    pg = _Progress()
    cfg = _Config(size=ctypes.sizeof(_Config), tick=tick_v, fee=ctypes.pointer(fee_c),
                  instrument=int(instrument), half_spread=half_spread,
                  coarse_tick=1 if coarse_tick else 0,
                  timeout_ms=-1 if timeout is None else max(1, int(round(timeout * 1000))),
                  engine_url=engine.encode() if engine else None,
                  journal_dir=str(journal).encode() if journal else None,
                  progress=ctypes.pointer(pg),
                  max_inflight=0 if max_inflight is None else int(max_inflight))
    if session is not None:
        cfg.session = session.encode()
        cfg.secret = secret_b
        cfg.secret_len = len(secret_b)
    if p_st is None:
        cfg.combo[:] = combo
    else:
        cfg.strategy = r_st.ptr
        cfg.params = p_st.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    fill_log = np.empty((2 * n + 1, 4), dtype=np.int64)  # at most two fills a bar
    equity = np.empty(n, dtype=np.float64)
    mtm = np.empty(n, dtype=np.float64)
    res = _Result(size=ctypes.sizeof(_Result), fill_log=fill_log.ctypes.data,
                  fill_log_cap=fill_log.shape[0], equity=equity.ctypes.data, mtm=mtm.ctypes.data)
    msg = ctypes.create_string_buffer(1024)

    show: Optional[Callable[[int, int], None]]
    if progress is None:
        progress = sys.stderr.isatty()
    show = progress if callable(progress) else (_progress_line if progress else None)
    L = _lib()
    out = []
    # On a helper thread (ctypes releases the GIL), so that Ctrl-C reaches this one: it cancels
    # the run through the progress counter, which stops at its next bar.
    t = threading.Thread(target=lambda: out.append(L.tf_paper_run(
        c.ctypes.data, n, ctypes.byref(cfg), ctypes.byref(res), msg, len(msg))), daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
            if show is not None:
                show(int(pg.done), n)
    except BaseException:
        L.tf_progress_cancel(ctypes.byref(pg))
        t.join()
        raise
    finally:
        if show is not None:
            show(int(pg.done), n)
        if show is _progress_line:
            sys.stderr.write("\n")
    rc = out[0]
    _st.after_run(r_st)
    if rc:
        _raise(rc, msg.value.decode(errors="replace"))

    r = PaperResult(mode="half_spread" if half_spread else "auction",
                    engine=engine or "in-process", combo=combo, tick=res.tick,
                    half_spread=half_spread, fee=fee, parity_expected=not half_spread,
                    strategy=r_st.name)
    r.tick_source = TICK_SOURCES[res.tick_source]
    for k in ("bars", "orders", "fills", "lots", "commands", "events", "trades", "kernel_trades",
              "stream_trades", "rounded_closes", "unrounded_trades", "position"):
        setattr(r, k, int(getattr(res, k)))
    for k in ("pnl", "kernel_pnl", "stream_pnl", "unrounded_pnl", "unrounded_diff", "seconds"):
        setattr(r, k, float(getattr(res, k)))
    r.parity, r.unrounded_parity = bool(res.parity), bool(res.unrounded_parity)
    if half_spread:
        r.spread_cost = float(res.spread_cost)
    if res.has_state_hash:
        h = ctypes.create_string_buffer(19)
        L.tf_engine_format_hash(res.state_hash, h)
        r.state_hash = h.value.decode()
    if not res.in_process:
        r.venue_fills, r.fills_dropped = int(res.venue_fills), int(res.fills_dropped)
    r.bars_per_s = r.bars / r.seconds if r.seconds > 0 else 0.0
    r.fill_log = fill_log[:min(r.fills, fill_log.shape[0])].copy()
    r.equity, r.mtm = equity, mtm
    cfg.progress = None  # pg is this call's; the summary reads neither it nor the arrays
    r._c = (cfg, res, r_st, p_st)  # the summary reads cfg: its strategy and params live here
    if plot:
        plot_equity(r, plot)
    return r


def plot_equity(res: PaperResult, path: str) -> None:
    """A PNG of the equity curve (closed trades, and marked to market) with the fills marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5), dpi=110)
    x = np.arange(res.bars)
    ax.plot(x, res.mtm, lw=0.6, color="0.6", label="marked to market")
    ax.plot(x, res.equity, lw=1.0, color="C0", label="closed trades")
    fl = np.asarray(res.fill_log, dtype=np.int64).reshape(-1, 4)
    if len(fl):
        # many thousand fills: mark at most ~4000 of them, evenly, so the plot stays readable
        stride = max(1, len(fl) // 4000)
        fl = fl[::stride]
        for d, color, marker, name in ((1, "C2", "^", "buy fills"), (-1, "C3", "v", "sell fills")):
            sel = fl[fl[:, 1] == d]
            # above the curves (a scatter's default zorder put them under the lines) and big
            # enough to see at this size
            ax.scatter(sel[:, 0], res.equity[sel[:, 0]], s=22, c=color, marker=marker, lw=0,
                       zorder=3, label=name + ("" if stride == 1 else f" (1 in {stride})"))
    title = (f"paper {','.join(map(str, res.combo))}: pnl {res.pnl:.4f} pp, {res.trades} trades"
             f" ({res.mode}, {res.engine}, tick {res.tick:g} {res.tick_source}); kernel on the "
             f"rounded series {res.kernel_pnl:.4f}, parity {res.parity}; unrounded "
             f"{res.unrounded_pnl:.4f}")
    ax.set_title(title, fontsize=8)
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
    ``--plot``). Exit 0 parity against the rounded series (or a half spread), 1 parity failed,
    2 usage, input or venue error, 130 interrupted."""
    ap = argparse.ArgumentParser(prog="python3 -m tollfree.paper",
                                 description="Paper-trade one combo through the order engine "
                                             "(see `tollfree paper --help`).")
    ap.add_argument("--combo", type=_parse_combo)
    ap.add_argument("--strategy", help="a built-in name or a plugin .so (default: hma)")
    ap.add_argument("--params", help="the strategy's combo: name=V,name=V,...")
    ap.add_argument("--input")
    ap.add_argument("--column", default="close")
    ap.add_argument("--date-column")
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--skip-bad-rows", action="store_true")
    ap.add_argument("--sep")
    ap.add_argument("--assume-sorted", action="store_true")
    ap.add_argument("--tick", type=float)
    ap.add_argument("--coarse-tick", action="store_true")
    ap.add_argument("--fee", type=float, default=FEE)
    ap.add_argument("--engine")
    ap.add_argument("--instrument", type=int, default=1)
    ap.add_argument("--half-spread", type=int, default=0)
    ap.add_argument("--journal")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--plot")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--session")
    ap.add_argument("--secret-file")
    ap.add_argument("--max-inflight", type=int)
    a = ap.parse_args(argv)
    if a.combo is None and a.params is None:
        ap.error("give --combo (HMA) or --strategy NAME --params a=V,...")
    try:
        params = None
        if a.params is not None:
            params = {}
            for part in a.params.split(","):
                k, eq, v = part.partition("=")
                if not eq:
                    raise ValueError(f"--params {a.params}: want name=V,name=V,...")
                params[k.strip()] = float(v)
        close = None
        if a.input:
            from tollfree.data import load_close

            close = load_close(a.input, a.column, date_column=a.date_column, raw=a.raw,
                               skip_bad_rows=a.skip_bad_rows, sep=a.sep,
                               assume_sorted=a.assume_sorted)
        secret = None
        if a.secret_file:
            with open(a.secret_file) as f:
                secret = f.readline().rstrip("\r\n")
        r = run(a.combo, close, tick=a.tick, engine=a.engine, half_spread=a.half_spread,
                journal=a.journal, instrument=a.instrument, fee=a.fee,
                progress=False if a.quiet else None, plot=a.plot, coarse_tick=a.coarse_tick,
                strategy=a.strategy, params=params, session=a.session, secret=secret,
                max_inflight=a.max_inflight)
    except KeyboardInterrupt:
        print("tollfree paper: interrupted", file=sys.stderr)
        return 130
    except (PaperError, ValueError, TypeError, OSError) as e:
        print(f"tollfree paper: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(r.summary(as_json=a.json))
    if a.plot and not a.json:
        print(f"  plot {a.plot}")
    return 0 if (r.parity or r.half_spread) else 1


if __name__ == "__main__":
    sys.exit(main())
