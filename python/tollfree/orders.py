"""The order client: OFL1 commands to ``tollfree engine serve`` over a Unix socket or TCP.

    with tollfree.orders.connect("unix:/tmp/engine.sock", timeout=5.0) as c:
        evs = c.new_limit(account_id=7, client_order_id=1, instrument_id=1, side="buy",
                          price=1_000_000, quantity=3)
        evs[0]                  # Accepted(event_seq=1, command_seq=1, ..., order_id=1, ...)
        c.fills(timeout=0.1)    # Trades of this connection's resting orders hit by others

The protocol (the same as :mod:`include/tollfree/orders.h`): each command goes out as one OFL1
stream frame (11-byte header ``<HBQ``: frame_len = 9 + payload, kind, journal_seq; no CRC); the
server assigns ``command_seq`` (the client's value is ignored) and answers with the command's
events, then a Heartbeat whose journal_seq field is the command's ``command_seq``. A reply starts
with Accepted, Rejected, Replaced or Canceled; a Trade between replies is an unsolicited fill of
a resting order placed through this connection, set aside for :meth:`Client.fills`. Other
unsolicited events (a kill switch's cancels of this connection's orders) come behind an
:class:`Unsolicited` marker and are set aside for :meth:`Client.unsolicited` (or passed to
``on_unsolicited``). A client without the marker (before this version) fails with ``PROTOCOL``
when one arrives, and is closed.

Events are small frozen dataclasses with the spec's field names (``event_seq``, ``command_seq``,
``timestamp_ns``, ``order_id``, ``client_order_id``, ``account_id``, ``reason``,
``maker_order_id``, ``taker_order_id``, ``instrument_id``, ``price``, ``quantity``). Each command
method returns a :class:`Reply`: a list of its events with ``.command_seq`` set.

Errors are :class:`tollfree.EngineServiceError` (code + message, like the sweep client's
:class:`tollfree.SweepError`; both are a :class:`tollfree.ServiceError`): ``-errno`` for OS
failures (``-ECONNREFUSED``; ``-ECONNRESET`` when the server closed between replies),
``TRUNCATED`` (-1210) when it closed inside a frame or a reply, ``PROTOCOL`` (-1213) for a frame
or reply the protocol does not allow, and :class:`tollfree.EngineServiceTimeout` past
``timeout``. After any of those the client is closed. Bad arguments raise
``ValueError``/``TypeError`` before anything is sent. A reject is an event (:class:`Rejected`), never an exception.

Sessions (a service started with ``--sessions``, docs/venue.md): ``connect(url, session=NAME,
secret=...)`` logs on (challenge-response, HMAC-SHA256: the secret never crosses the wire; when
``secret`` is left out it is read from the environment variable ``TOLLFREE_SECRET``). Every
command then goes out as a Keyed frame with the next ``client_seq``; a venue rejection comes back
as :class:`VenueRejected` (a :class:`Rejected` whose reason is from the venue's table, e.g.
NotAuthorized). To resend after a broken connection, log on again and pass the same
``client_seq`` (``call(cmd, client_seq=N)``, ``send_many(cmds, first_client_seq=N)``): a command
the service had applied is answered with its original events and not applied again.

Gateway commands and execution reports (extension kinds, docs/orderflow.md "The gateway extension
kinds"): :class:`Order` (limit or market, time in force, post-only), :class:`Cancel` and
:class:`ReplaceByClient` name orders by ``(account_id, client_order_id)`` and are answered with
:class:`AcceptedEx`, :class:`ReplacedEx`, :class:`CanceledEx`, :class:`RejectedEx` and one
:class:`Fill` per match (the maker's connection receives its Fills as it receives Trades, through
:meth:`Client.fills`). ``c.order(...)``, ``c.order_cancel(...)`` and ``c.replace_by_client(...)``
send them; ``decode_frame(buf, ext=True)`` decodes them (the OFL1 set alone refuses them, as the C
OFL1 codec does).
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import os
import select
import socket
import ssl
import struct
import time
from collections import deque
from dataclasses import dataclass, fields
from typing import Iterable, Sequence, Union

from tollfree import urls
from tollfree.errors import EngineServiceError, EngineServiceTimeout, os_error

__all__ = ["connect", "Client", "Reply", "NewLimit", "NewMarket", "CancelByOrder", "CancelByClient",
           "Replace", "Accepted", "Rejected", "Replaced", "Canceled", "Trade", "Heartbeat",
           "encode_frame", "decode_frame", "FrameError", "BUY", "SELL", "REASONS",
           "E_TRUNCATED", "E_PROTOCOL", "VenueRejected", "VENUE_REASONS", "encode_keyed",
           "Order", "Cancel", "ReplaceByClient", "AcceptedEx", "ReplacedEx", "CanceledEx", "Fill",
           "RejectedEx", "GATEWAY_KIND_NAMES", "LIMIT", "MARKET", "GTC", "IOC", "FOK",
           "POST_ONLY"]

E_TRUNCATED = -1210
E_PROTOCOL = -1213

HEADER = struct.Struct("<HBQ")
HEADER_LEN = 11
FRAME_LEN_BASE = 9
MAX_FRAME = 128
U64 = (1 << 64) - 1
BUY, SELL = 0, 1
REASONS = {0: "InvalidQuantity", 1: "UnknownInstrument", 2: "OrderNotFound", 3: "InvalidPrice",
           4: "DuplicateClientOrderId", 255: "Other"}
RESERVED = (0x06, 0x40, 0xA0)
# The venue extension (docs/venue.md): a Keyed command (0x10) and VenueRejected (0x90).
KEYED = 0x10
VENUE_REJECTED = 0x90
VENUE_REASONS = {16: "NotAuthorized", 17: "MaxQuantity", 18: "MaxNotional", 19: "PriceBand",
                 20: "MaxOpenOrders", 21: "KillSwitch", 22: "SelfTrade", 31: "StaleClientSeq"}
LOGON_LABEL = b"tollfree-venue-logon-v1"
LOGON_NONCE = 32


class FrameError(ValueError):
    """A frame the codec refuses: ``.code`` is the tollfree TF_E_OFL_* code (orderflow.h)."""

    def __init__(self, code: int, text: str):
        self.code = code
        super().__init__(f"{text} (code {code})")


# ---------------------------------------------------------------- messages

@dataclass(frozen=True)
class NewLimit:
    account_id: int
    client_order_id: int
    instrument_id: int
    side: int
    price: int
    quantity: int
    command_seq: int = 0
    KIND = 0x01


@dataclass(frozen=True)
class NewMarket:
    account_id: int
    client_order_id: int
    instrument_id: int
    side: int
    quantity: int
    command_seq: int = 0
    KIND = 0x02


@dataclass(frozen=True)
class CancelByOrder:
    order_id: int
    command_seq: int = 0
    KIND = 0x03


@dataclass(frozen=True)
class CancelByClient:
    account_id: int
    client_order_id: int
    command_seq: int = 0
    KIND = 0x04


@dataclass(frozen=True)
class Replace:
    order_id: int
    client_order_id: int
    price: int
    quantity: int
    command_seq: int = 0
    KIND = 0x05


@dataclass(frozen=True)
class Accepted:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    order_id: int
    client_order_id: int
    account_id: int
    KIND = 0x81


@dataclass(frozen=True)
class Rejected:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    client_order_id: int
    reason: int
    KIND = 0x82

    @property
    def reason_name(self) -> str:
        return REASONS[self.reason]

    def __repr__(self) -> str:
        # The reason by its name (reason=1 said nothing to a reader); the number stays beside it.
        return (f"Rejected(event_seq={self.event_seq}, command_seq={self.command_seq}, "
                f"timestamp_ns={self.timestamp_ns}, client_order_id={self.client_order_id}, "
                f"reason={REASONS.get(self.reason, '?')}({self.reason}))")


@dataclass(frozen=True, repr=False)
class VenueRejected(Rejected):
    """A rejection by the venue layer (docs/venue.md): the Rejected payload, its reason from the
    venue's table (16 NotAuthorized, 31 StaleClientSeq, ...). An instance of Rejected too."""
    KIND = 0x90

    @property
    def reason_name(self) -> str:
        return VENUE_REASONS.get(self.reason, "?")

    def __repr__(self) -> str:
        return (f"VenueRejected(event_seq={self.event_seq}, command_seq={self.command_seq}, "
                f"timestamp_ns={self.timestamp_ns}, client_order_id={self.client_order_id}, "
                f"reason={self.reason_name}({self.reason}))")


@dataclass(frozen=True)
class Replaced:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    order_id: int
    client_order_id: int
    KIND = 0x83


@dataclass(frozen=True)
class Canceled:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    order_id: int
    KIND = 0x84


@dataclass(frozen=True)
class Trade:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    maker_order_id: int
    taker_order_id: int
    instrument_id: int
    price: int
    quantity: int
    KIND = 0x85


@dataclass(frozen=True)
class Heartbeat:
    journal_seq: int = 0
    KIND = 0x00


UNSOLICITED = 0x1F  # the service's marker before unsolicited events (include/tollfree/orders.h)
UNSOLICITED_LEN = 8
CAUSE_KILL_SWITCH = 1
_S_UNSOLICITED = struct.Struct("<IB3x")


@dataclass(frozen=True)
class Unsolicited:
    """The marker (kind 0x1F, server to client only, never journaled): the next ``count`` frames
    are unsolicited events of command ``command_seq`` (``cause`` 1: a kill switch's cancels of
    orders this connection placed). The client reads them aside, never as a reply."""
    command_seq: int
    count: int
    cause: int
    KIND = UNSOLICITED


# ---------------------------------------------------------------- gateway extension kinds

LIMIT, MARKET = 0, 1
GTC, IOC, FOK = 0, 1, 2
POST_ONLY = 1
TYPES = {0: "Limit", 1: "Market"}
TIFS = {0: "GTC", 1: "IOC", 2: "FOK"}
CANCEL_REASONS = {0: "Requested", 1: "Unfilled", 2: "NotFillable", 3: "SelfTrade", 4: "Account"}
EX_REASONS = {**REASONS, 5: "WouldCross", 6: "InvalidTif"}


@dataclass(frozen=True)
class Order:
    """A limit or market order with a time in force (command 0x14), fields in wire order
    (command_seq last, as in every command class). type/tif/flags are carried as given (any
    byte): the engine rejects a bad combination with RejectedEx(InvalidTif)."""
    account_id: int
    client_order_id: int
    instrument_id: int
    price: int
    quantity: int
    side: int
    type: int = LIMIT
    tif: int = GTC
    flags: int = 0
    command_seq: int = 0
    KIND = 0x14


@dataclass(frozen=True)
class Cancel:
    """Cancels the order named by (account_id, client_order_id) (command 0x15)."""
    account_id: int
    client_order_id: int
    command_seq: int = 0
    KIND = 0x15


@dataclass(frozen=True)
class ReplaceByClient:
    """Replace, the live order named by (account_id, client_order_id) (command 0x16)."""
    account_id: int
    client_order_id: int
    new_client_order_id: int
    price: int
    quantity: int
    command_seq: int = 0
    KIND = 0x16


@dataclass(frozen=True)
class AcceptedEx:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    order_id: int
    client_order_id: int
    account_id: int
    instrument_id: int
    price: int
    quantity: int
    side: int
    type: int
    tif: int
    flags: int
    KIND = 0x91


@dataclass(frozen=True)
class ReplacedEx:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    order_id: int
    client_order_id: int
    orig_client_order_id: int
    account_id: int
    instrument_id: int
    price: int
    remaining: int
    filled: int
    side: int
    KIND = 0x92


@dataclass(frozen=True)
class CanceledEx:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    order_id: int
    client_order_id: int
    account_id: int
    instrument_id: int
    price: int
    remaining: int
    filled: int
    side: int
    reason: int
    KIND = 0x93

    @property
    def reason_name(self) -> str:
        return CANCEL_REASONS[self.reason]


@dataclass(frozen=True)
class Fill:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    maker_order_id: int
    taker_order_id: int
    maker_client_order_id: int
    taker_client_order_id: int
    maker_account_id: int
    taker_account_id: int
    instrument_id: int
    price: int
    quantity: int
    maker_remaining: int
    maker_filled: int
    taker_side: int
    KIND = 0x94


@dataclass(frozen=True)
class RejectedEx:
    event_seq: int
    command_seq: int
    timestamp_ns: int
    account_id: int
    client_order_id: int
    reason: int
    KIND = 0x95

    @property
    def reason_name(self) -> str:
        return EX_REASONS[self.reason]


Command = Union[NewLimit, NewMarket, CancelByOrder, CancelByClient, Replace, Order, Cancel,
                ReplaceByClient]
Event = Union[Accepted, Rejected, Replaced, Canceled, Trade, AcceptedEx, ReplacedEx, CanceledEx,
              Fill, RejectedEx]

# Wire layouts (docs/orderflow.md). Quantities are u128: two u64 halves, low first.
_S_NEW_LIMIT = struct.Struct("<QQQQBqQQ")    # 57
_S_NEW_MARKET = struct.Struct("<QQQQBQQ")    # 49
_S_CANCEL_ORDER = struct.Struct("<QQ")       # 16
_S_CANCEL_CLIENT = struct.Struct("<QQQ")     # 24
_S_REPLACE = struct.Struct("<QQQqQQ")        # 48
_S_ACCEPTED = struct.Struct("<QQQQQQ")       # 48
_S_REJECTED = struct.Struct("<QQQQB")        # 33
_S_REPLACED = struct.Struct("<QQQQQ")        # 40
_S_CANCELED = struct.Struct("<QQQQ")         # 32
_S_TRADE = struct.Struct("<QQQQQQqQQ")       # 72

PAYLOAD_SIZE = {0x00: 0, 0x01: 57, 0x02: 49, 0x03: 16, 0x04: 24, 0x05: 48,
                0x81: 48, 0x82: 33, 0x83: 40, 0x84: 32, 0x85: 72}
KIND_NAMES = {0x00: "Heartbeat", 0x01: "NewLimit", 0x02: "NewMarket", 0x03: "CancelByOrder",
              0x04: "CancelByClient", 0x05: "Replace", 0x81: "Accepted", 0x82: "Rejected",
              0x83: "Replaced", 0x84: "Canceled", 0x85: "Trade"}
CLASSES = {c.KIND: c for c in (Heartbeat, NewLimit, NewMarket, CancelByOrder, CancelByClient,
                               Replace, Accepted, Rejected, Replaced, Canceled, Trade)}

# The gateway kinds: wire layouts (u64/i64 fields, then u8 fields, in wire order) and names.
# Kept apart from KIND_NAMES/PAYLOAD_SIZE, which are the closed OFL1 set.
_GW = {0x14: struct.Struct("<QQQQqQBBBB"), 0x15: struct.Struct("<QQQ"),
       0x16: struct.Struct("<QQQQqQ"), 0x91: struct.Struct("<QQQQQQQqQBBBB"),
       0x92: struct.Struct("<QQQQQQQQqQQB"), 0x93: struct.Struct("<QQQQQQQqQQBB"),
       0x94: struct.Struct("<QQQQQQQQQQqQQQB"), 0x95: struct.Struct("<QQQQQB")}
GATEWAY_CLASSES = {c.KIND: c for c in (Order, Cancel, ReplaceByClient, AcceptedEx, ReplacedEx,
                                       CanceledEx, Fill, RejectedEx)}
GATEWAY_KIND_NAMES = {k: c.__name__ for k, c in GATEWAY_CLASSES.items()}
GATEWAY_PAYLOAD_SIZE = {k: s.size for k, s in _GW.items()}
ALL_KIND_NAMES = {**KIND_NAMES, **GATEWAY_KIND_NAMES}

# TF_E_OFL_* codes (include/tollfree/error.h), checked against the C codec by the vector tests.
E_OFL_HEADER_TOO_SHORT = -1401
E_OFL_FRAME_LENGTH_TOO_SMALL = -1402
E_OFL_PAYLOAD_TOO_SHORT = -1403
E_OFL_UNKNOWN_KIND = -1404
E_OFL_RESERVED_KIND = -1405
E_OFL_PAYLOAD_LENGTH = -1406
E_OFL_INVALID_SIDE = -1407
E_OFL_INVALID_REASON = -1408
E_OFL_FRAME_TOO_LARGE = -1411
E_OFL_INVALID_ORDER_TYPE = -1416


def _side(side) -> int:
    if side in (0, "buy", "Buy", "BUY", "b"):
        return BUY
    if side in (1, "sell", "Sell", "SELL", "s"):
        return SELL
    raise ValueError(f"side must be 0/'buy' or 1/'sell', got {side!r}")


def _qty(q: int) -> tuple[int, int]:
    q = int(q)
    if not 0 <= q < (1 << 128):
        raise ValueError(f"quantity must fit in u128, got {q}")
    return q & U64, q >> 64


def _u8(v, what: str) -> int:
    v = int(v)
    if not 0 <= v <= 255:
        raise ValueError(f"{what} is a byte, got {v}")
    return v


def _gw_bytes_error(kind: int, a):
    """The C extension codec's check of a gateway payload's byte fields, in its order, on the
    values in wire order: None or (code, text)."""
    if kind == 0x14 and a[6] > 1:
        return E_OFL_INVALID_SIDE, f"invalid side {a[6]}"
    if kind == 0x91:
        if a[9] > 1:
            return E_OFL_INVALID_SIDE, f"invalid side {a[9]}"
        if a[10] > 1 or a[11] > 2 or a[12] & ~1:
            return E_OFL_INVALID_ORDER_TYPE, f"invalid type/tif/flags {a[10]}/{a[11]}/{a[12]}"
    if kind == 0x92 and a[11] > 1:
        return E_OFL_INVALID_SIDE, f"invalid side {a[11]}"
    if kind == 0x93:
        if a[10] > 1:
            return E_OFL_INVALID_SIDE, f"invalid side {a[10]}"
        if a[11] not in CANCEL_REASONS:
            return E_OFL_INVALID_REASON, f"invalid cancel reason {a[11]}"
    if kind == 0x94 and a[14] > 1:
        return E_OFL_INVALID_SIDE, f"invalid side {a[14]}"
    if kind == 0x95 and a[5] not in EX_REASONS:
        return E_OFL_INVALID_REASON, f"invalid reason {a[5]}"
    return None


def _gw_encode(m) -> bytes:
    k = m.KIND
    vals = [getattr(m, f.name) for f in fields(m)]
    if k in (0x14, 0x15, 0x16):  # commands: command_seq is the dataclass's last field
        vals = [vals[-1]] + vals[:-1]
    if k == 0x14:
        vals[6] = _side(vals[6])
    for i, c in enumerate(_GW[k].format[1:]):
        vals[i] = int(vals[i])
        if c == "Q" and not 0 <= vals[i] <= U64:
            raise ValueError(f"{type(m).__name__}: field {i} must fit in u64, got {vals[i]}")
        if c == "q" and not -(1 << 63) <= vals[i] < (1 << 63):
            raise ValueError(f"{type(m).__name__}: field {i} must fit in i64, got {vals[i]}")
        if c == "B":
            vals[i] = _u8(vals[i], f"{type(m).__name__}: field {i}")
    err = _gw_bytes_error(k, vals)
    if err:
        raise FrameError(*err)
    return _GW[k].pack(*vals)


def _gw_decode(kind: int, buf, off: int):
    a = _GW[kind].unpack_from(buf, off)
    err = _gw_bytes_error(kind, a)
    if err:
        raise FrameError(*err)
    if kind in (0x14, 0x15, 0x16):
        a = a[1:] + a[:1]
    return GATEWAY_CLASSES[kind](*a)


def encode_payload(m) -> bytes:
    """The payload bytes of a command or an event (the Heartbeat has none)."""
    k = m.KIND
    if k in _GW:
        return _gw_encode(m)
    if k == 0x01:
        lo, hi = _qty(m.quantity)
        return _S_NEW_LIMIT.pack(m.command_seq, m.account_id, m.client_order_id, m.instrument_id,
                                 _side(m.side), m.price, lo, hi)
    if k == 0x02:
        lo, hi = _qty(m.quantity)
        return _S_NEW_MARKET.pack(m.command_seq, m.account_id, m.client_order_id,
                                  m.instrument_id, _side(m.side), lo, hi)
    if k == 0x03:
        return _S_CANCEL_ORDER.pack(m.command_seq, m.order_id)
    if k == 0x04:
        return _S_CANCEL_CLIENT.pack(m.command_seq, m.account_id, m.client_order_id)
    if k == 0x05:
        lo, hi = _qty(m.quantity)
        return _S_REPLACE.pack(m.command_seq, m.order_id, m.client_order_id, m.price, lo, hi)
    if k == 0x81:
        return _S_ACCEPTED.pack(m.event_seq, m.command_seq, m.timestamp_ns, m.order_id,
                                m.client_order_id, m.account_id)
    if k == 0x82:
        if m.reason not in REASONS:
            raise FrameError(E_OFL_INVALID_REASON, f"invalid reason {m.reason}")
        return _S_REJECTED.pack(m.event_seq, m.command_seq, m.timestamp_ns, m.client_order_id,
                                m.reason)
    if k == 0x83:
        return _S_REPLACED.pack(m.event_seq, m.command_seq, m.timestamp_ns, m.order_id,
                                m.client_order_id)
    if k == 0x84:
        return _S_CANCELED.pack(m.event_seq, m.command_seq, m.timestamp_ns, m.order_id)
    if k == 0x85:
        lo, hi = _qty(m.quantity)
        return _S_TRADE.pack(m.event_seq, m.command_seq, m.timestamp_ns, m.maker_order_id,
                             m.taker_order_id, m.instrument_id, m.price, lo, hi)
    return b""


def encode_frame(m, journal_seq: int = 0) -> bytes:
    """One OFL1 stream frame: the 11-byte header, then the payload."""
    if isinstance(m, Heartbeat):
        journal_seq = m.journal_seq
    p = encode_payload(m)
    return HEADER.pack(FRAME_LEN_BASE + len(p), m.KIND, journal_seq) + p


def decode_payload(kind: int, buf, off: int):
    """Decodes the payload of ``kind`` at ``buf[off:]`` (its length already checked)."""
    if kind == 0x81:
        return Accepted(*_S_ACCEPTED.unpack_from(buf, off))
    if kind == 0x85:
        a = _S_TRADE.unpack_from(buf, off)
        return Trade(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7] | (a[8] << 64))
    if kind == 0x84:
        return Canceled(*_S_CANCELED.unpack_from(buf, off))
    if kind == 0x82:
        a = _S_REJECTED.unpack_from(buf, off)
        if a[4] not in REASONS:
            raise FrameError(E_OFL_INVALID_REASON, f"invalid reason {a[4]}")
        return Rejected(*a)
    if kind == 0x83:
        return Replaced(*_S_REPLACED.unpack_from(buf, off))
    if kind == 0x01:
        a = _S_NEW_LIMIT.unpack_from(buf, off)
        if a[4] > 1:
            raise FrameError(E_OFL_INVALID_SIDE, f"invalid side {a[4]}")
        return NewLimit(a[1], a[2], a[3], a[4], a[5], a[6] | (a[7] << 64), a[0])
    if kind == 0x02:
        a = _S_NEW_MARKET.unpack_from(buf, off)
        if a[4] > 1:
            raise FrameError(E_OFL_INVALID_SIDE, f"invalid side {a[4]}")
        return NewMarket(a[1], a[2], a[3], a[4], a[5] | (a[6] << 64), a[0])
    if kind == 0x03:
        a = _S_CANCEL_ORDER.unpack_from(buf, off)
        return CancelByOrder(a[1], a[0])
    if kind == 0x04:
        a = _S_CANCEL_CLIENT.unpack_from(buf, off)
        return CancelByClient(a[1], a[2], a[0])
    if kind == 0x05:
        a = _S_REPLACE.unpack_from(buf, off)
        return Replace(a[1], a[2], a[3], a[4] | (a[5] << 64), a[0])
    raise FrameError(E_OFL_UNKNOWN_KIND, f"unknown kind 0x{kind:02x}")


def encode_keyed(cmd, client_seq: int) -> bytes:
    """A command as a logged-on session sends it: a Keyed frame (kind 0x10; u64 session, which
    the service fills in, u64 client_seq, u8 flags 0, u8 inner kind, the inner payload)."""
    p = encode_payload(cmd)
    body = struct.pack("<QQBB", 0, client_seq, 0, cmd.KIND) + p
    return HEADER.pack(FRAME_LEN_BASE + len(body), KEYED, 0) + body


def _decode_venue(buf, off: int):
    """A VenueRejected frame at buf[off:] (whole, kind 0x90)."""
    frame_len = HEADER.unpack_from(buf, off)[0]
    if frame_len - FRAME_LEN_BASE != 33:
        raise FrameError(E_OFL_PAYLOAD_LENGTH, f"VenueRejected payload of {frame_len - 9} bytes")
    a = _S_REJECTED.unpack_from(buf, off + HEADER_LEN)
    if a[4] not in VENUE_REASONS:
        raise FrameError(E_OFL_INVALID_REASON, f"invalid venue reason {a[4]}")
    return VenueRejected(*a), 2 + frame_len


def decode_frame(buf, off: int = 0, venue: bool = False, ext: bool | None = None):
    """Decodes the stream frame at ``buf[off:]``: ``(message, journal_seq, size)``, or ``None``
    when more bytes are needed. A malformed frame raises :class:`FrameError` with the C codec's
    code, checked in the C codec's order (header, frame_len, the 128-byte cap, length, kind,
    payload length, side/reason/type). ``ext`` (default: ``venue``) also decodes the gateway
    kinds, as the C extension codec (tf_ofx_frame_decode) does; without it they are unknown
    kinds, as in the C OFL1 codec. ``venue`` decodes VenueRejected."""
    if ext is None:
        ext = venue
    avail = len(buf) - off
    if avail < HEADER_LEN:
        return None
    frame_len, kind, jseq = HEADER.unpack_from(buf, off)
    if frame_len < FRAME_LEN_BASE:
        raise FrameError(E_OFL_FRAME_LENGTH_TOO_SMALL, f"frame_len {frame_len} < 9")
    if 2 + frame_len > MAX_FRAME:
        raise FrameError(E_OFL_FRAME_TOO_LARGE, f"frame of {2 + frame_len} bytes over the cap")
    if avail < 2 + frame_len:
        return None
    if venue and kind == VENUE_REJECTED:
        msg, size = _decode_venue(buf, off)
        return msg, jseq, size
    if venue and kind == UNSOLICITED:
        if frame_len - FRAME_LEN_BASE != UNSOLICITED_LEN:
            raise FrameError(E_OFL_PAYLOAD_LENGTH, f"Unsolicited payload of {frame_len - 9} bytes")
        count, cause = _S_UNSOLICITED.unpack_from(buf, off + HEADER_LEN)
        return Unsolicited(jseq, count, cause), jseq, 2 + frame_len
    if ext and kind in _GW:
        if frame_len - FRAME_LEN_BASE != _GW[kind].size:
            raise FrameError(E_OFL_PAYLOAD_LENGTH, f"{GATEWAY_KIND_NAMES[kind]} payload of "
                                                   f"{frame_len - 9} bytes, want {_GW[kind].size}")
        return _gw_decode(kind, buf, off + HEADER_LEN), jseq, 2 + frame_len
    size = PAYLOAD_SIZE.get(kind)
    if size is None:
        if kind in RESERVED:
            raise FrameError(E_OFL_RESERVED_KIND, f"reserved kind 0x{kind:02x}")
        raise FrameError(E_OFL_UNKNOWN_KIND, f"unknown kind 0x{kind:02x}")
    if frame_len - FRAME_LEN_BASE != size:
        raise FrameError(E_OFL_PAYLOAD_LENGTH,
                         f"{KIND_NAMES[kind]} payload of {frame_len - 9} bytes, want {size}")
    msg = Heartbeat(jseq) if kind == 0 else decode_payload(kind, buf, off + HEADER_LEN)
    return msg, jseq, 2 + frame_len


def as_dict(m) -> dict:
    """A message's fields (and its ``kind`` name) as a plain dict, for JSON."""
    d = {"kind": "VenueRejected" if m.KIND == VENUE_REJECTED else ALL_KIND_NAMES[m.KIND]}
    d.update({f.name: getattr(m, f.name) for f in fields(m)})
    return d


# ---------------------------------------------------------------- the client

class Reply(list):
    """The events of one command's reply, in order; ``command_seq`` is the sequence the server
    assigned (0 when it could not decode the command)."""

    command_seq: int = 0

    def __repr__(self) -> str:
        return f"Reply(command_seq={self.command_seq}, {list.__repr__(self)})"


def parse_url(url: str) -> tuple:
    """``(AF_UNIX, path)`` or ``(AF_INET or AF_INET6, (host, port))`` for ``unix:PATH``,
    ``tcp:[HOST:]PORT`` or ``tls:[HOST:]PORT`` (the grammar of :mod:`tollfree.urls`, the C
    client's too)."""
    scheme, args = urls.parse(url, schemes=("unix", "tcp", "tls"))
    if scheme == "unix":
        return socket.AF_UNIX, args[0]
    return socket.AF_INET6 if ":" in args[0] else socket.AF_INET, args


class Client:
    """One connection to the engine service. Not thread-safe: one client per thread.

    ``timeout`` (seconds, ``None`` = forever) bounds each call as a whole. ``max_fills`` bounds
    the queue of unsolicited Trades (when full the oldest is dropped and counted in
    :attr:`fills_dropped`); ``max_inflight`` bounds the commands :meth:`send_many` leaves
    unanswered. Unsolicited events other than fills (a kill switch's Canceled / CanceledEx of
    orders this connection placed, behind an :class:`Unsolicited` marker) wait in a queue of
    the same bound for :meth:`unsolicited` (:attr:`unsolicited_dropped` counts the oldest
    dropped), or go to ``on_unsolicited(event)`` when it is set (a callable, also settable as
    an attribute; called from inside whichever call read the event). A ``tls:`` URL connects with TLS 1.2 or later and checks the server's
    certificate against ``ca`` (a PEM file; else the environment variable ``TOLLFREE_TLS_CA``,
    else the system's CA store) and the URL's host."""

    def __init__(self, url: str, timeout: float | None = 30.0, max_fills: int = 4096,
                 max_inflight: int = 256, session: str | None = None,
                 secret: str | bytes | None = None, ca: str | None = None,
                 on_unsolicited=None):
        family, addr = parse_url(url)
        tls = url.startswith("tls:")
        if max_fills < 1 or max_inflight < 1:
            raise ValueError("max_fills and max_inflight must be >= 1")
        self.url = url
        self.timeout = timeout
        self.max_inflight = int(max_inflight)
        self._fills: deque = deque(maxlen=int(max_fills))
        self.fills_dropped = 0
        self._unsol: deque = deque(maxlen=int(max_fills))
        self.unsolicited_dropped = 0
        self.on_unsolicited = on_unsolicited
        self._unsol_left = 0  # frames the last marker announced, still to come
        self._unsol_seq = 0
        self._rx = bytearray()
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(timeout)
            self._sock.connect(addr)
        except OSError as e:
            self._sock.close()
            self._sock = None
            raise os_error(e, f"connect {url}", EngineServiceError) from None
        if family != socket.AF_UNIX:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            self._sock = _tls_wrap(self._sock, addr[0], ca, url)
        self.session = session
        self.logon_client_seq = 0
        self.next_client_seq = 0
        if session is not None:
            if secret is None:
                secret = os.environ.get("TOLLFREE_SECRET")
            if not secret:
                self.close()
                raise ValueError("a session needs its secret (secret=... or TOLLFREE_SECRET)")
            self._logon(session, secret.encode() if isinstance(secret, str) else bytes(secret))

    # -- logon (docs/venue.md, "Logon")

    def _read_exact(self, n: int, deadline: float | None) -> bytes:
        while len(self._rx) < n:
            self._recv(deadline, True)
        out = bytes(self._rx[:n])
        del self._rx[:n]
        return out

    def _logon(self, name: str, secret: bytes) -> None:
        nb = name.encode()
        if not 1 <= len(nb) <= 64:
            self.close()
            raise ValueError("a session name has 1 to 64 bytes")
        # A service without --sessions sends no challenge: wait at most 5 s for it.
        wait = 5.0 if self.timeout is None else min(self.timeout, 5.0)
        try:
            ch = self._read_exact(40, time.monotonic() + wait)
        except EngineServiceTimeout:
            raise EngineServiceError(E_PROTOCOL, f"{self.url}: no logon challenge (is the service "
                                          "started with --sessions?)") from None
        if ch[:3] != b"\x26\x00\x01" or ch[3:7] != b"TFV1" or ch[7] != 1:
            self._fail(EngineServiceError(E_PROTOCOL, "not a logon challenge"))
        mac = hmac.new(secret, LOGON_LABEL + ch[8:40] + nb, hashlib.sha256).digest()
        body = bytes([0x02, len(nb)]) + nb + mac
        try:
            self._sock.sendall(struct.pack("<H", len(body)) + body)
        except OSError as e:
            self._fail(os_error(e, f"send to {self.url}", EngineServiceError))
        try:
            res = self._read_exact(20, self._deadline())
        except EngineServiceError as e:
            if e.code in (-errno.ECONNRESET, E_TRUNCATED):
                raise EngineServiceError(-errno.EACCES, f"{self.url}: logon refused") from None
            raise
        if res[:3] != b"\x12\x00\x03":
            self._fail(EngineServiceError(E_PROTOCOL, "not a logon result"))
        if res[3] != 0:
            self._fail(EngineServiceError(-errno.EACCES, f"{self.url}: logon refused (an unknown "
                                                  "session or a wrong secret)"))
        self.logon_client_seq = struct.unpack_from("<Q", res, 12)[0]
        self.next_client_seq = self.logon_client_seq + 1

    def _encode(self, cmd, client_seq: int | None = None) -> bytes:
        if self.session is None:
            return encode_frame(cmd)
        if client_seq is not None:
            if client_seq < 1:
                raise ValueError("client_seq starts at 1")
            self.next_client_seq = client_seq
        f = encode_keyed(cmd, self.next_client_seq)
        self.next_client_seq += 1
        return f

    # -- plumbing

    def _fail(self, err: EngineServiceError):
        self.close()
        raise err

    def _deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def _recv(self, deadline: float | None, inside: bool) -> None:
        """One recv into the buffer, bounded by the deadline."""
        if self._sock is None:
            raise EngineServiceError(-errno.ENOTCONN, "the connection is closed")
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(EngineServiceTimeout(
                    message=f"{self.url}: timed out waiting for the engine service"))
            self._sock.settimeout(left)
        try:
            data = self._sock.recv(65536)
        except OSError as e:
            self._fail(os_error(e, f"recv from {self.url}", EngineServiceError))
        if not data:
            if self._rx or inside:
                self._fail(EngineServiceError(E_TRUNCATED, "the engine service closed the "
                                              "connection inside a frame or a reply"))
            self._fail(EngineServiceError(-errno.ECONNRESET,
                                          "the engine service closed the connection"))
        self._rx += data

    def _frames(self):
        """Whole frames in the buffer, consumed as they are yielded."""
        buf = self._rx
        off = 0
        try:
            while True:
                r = decode_frame(buf, off, venue=True)
                if r is None:
                    break
                off += r[2]
                yield r[0], r[1]
        except FrameError as e:
            del buf[:off]
            self._fail(EngineServiceError(E_PROTOCOL, f"the engine sent a bad frame: {e}"))
        del buf[:off]

    def _queue_fill(self, t: Trade) -> None:
        if len(self._fills) == self._fills.maxlen:
            self.fills_dropped += 1
        self._fills.append(t)

    def _queue_unsolicited(self, ev) -> None:
        if self.on_unsolicited is not None:
            self.on_unsolicited(ev)
            return
        if len(self._unsol) == self._unsol.maxlen:
            self.unsolicited_dropped += 1
        self._unsol.append(ev)

    def _aside(self, msg, inside: bool) -> bool:
        """True when ``msg`` belongs to no reply and was set aside: an Unsolicited marker, a
        frame a marker announced, or (between replies) a Trade or Fill of a resting order.
        ``inside``: a reply is in progress (a marker there breaks the protocol)."""
        if self._unsol_left:
            if msg.KIND < 0x81 or msg.command_seq != self._unsol_seq:
                self._fail(EngineServiceError(E_PROTOCOL, "a frame behind an Unsolicited "
                                              "marker that is not an event of its command"))
            self._unsol_left -= 1
            self._queue_unsolicited(msg)
            return True
        if msg.KIND == UNSOLICITED:
            if inside or msg.count < 1 or msg.command_seq == 0:
                self._fail(EngineServiceError(E_PROTOCOL, "an Unsolicited marker inside a "
                                              "reply or with no event"))
            self._unsol_left = msg.count
            self._unsol_seq = msg.command_seq
            return True
        if not inside and msg.KIND in (0x85, 0x94):  # a Trade or a Fill of a resting order
            self._queue_fill(msg)
            return True
        return False

    def _exchange(self, frames: Sequence[bytes], n: int) -> list[Reply]:
        """Sends encoded commands (at most max_inflight unanswered) and collects n replies."""
        if self._sock is None:
            raise EngineServiceError(-errno.ENOTCONN, "the connection is closed")
        if self._unanswered:
            raise ValueError(f"{self._unanswered} commands sent with send() are unanswered: "
                             "recv() their replies first")
        deadline = self._deadline()
        replies: list[Reply] = []
        cur: Reply | None = None
        sent = 0
        while len(replies) < n:
            if sent < n and sent - len(replies) < self.max_inflight:
                k = min(n, len(replies) + self.max_inflight)
                try:
                    if deadline is not None:
                        self._sock.settimeout(max(deadline - time.monotonic(), 1e-6))
                    self._sock.sendall(b"".join(frames[sent:k]))
                except OSError as e:
                    self._fail(os_error(e, f"send to {self.url}", EngineServiceError))
                sent = k
            self._recv(deadline, cur is not None or self._unsol_left > 0)
            for msg, jseq in self._frames():
                if self._aside(msg, cur is not None):
                    continue
                kind = msg.KIND
                if kind == 0:
                    if cur is None or cur.command_seq != jseq:
                        self._fail(EngineServiceError(E_PROTOCOL,
                                                      "a Heartbeat that closes no reply"))
                    replies.append(cur)
                    cur = None
                elif kind < 0x81:
                    self._fail(EngineServiceError(E_PROTOCOL, f"the engine sent a command "
                                                       f"({ALL_KIND_NAMES[kind]})"))
                elif cur is None:
                    if len(replies) >= sent:
                        self._fail(EngineServiceError(E_PROTOCOL, "a reply to no command"))
                    cur = Reply([msg])
                    cur.command_seq = msg.command_seq
                else:
                    if msg.command_seq != cur.command_seq:
                        self._fail(EngineServiceError(E_PROTOCOL, "an event of another command "
                                                           "inside a reply"))
                    cur.append(msg)
        return replies

    # -- commands

    def call(self, cmd: Command, client_seq: int | None = None) -> Reply:
        """Sends one command and returns its reply (the events, in order). A logged-on session
        may give the ``client_seq`` (a resend); by default the next one is used."""
        if not isinstance(cmd, (NewLimit, NewMarket, CancelByOrder, CancelByClient, Replace,
                                Order, Cancel, ReplaceByClient)):
            raise TypeError(f"not a command: {cmd!r}")
        return self._exchange([self._encode(cmd, client_seq)], 1)[0]

    def new_limit(self, account_id: int, client_order_id: int, instrument_id: int, side,
                  price: int, quantity: int) -> Reply:
        return self.call(NewLimit(account_id, client_order_id, instrument_id, _side(side), price,
                                  quantity))

    def new_market(self, account_id: int, client_order_id: int, instrument_id: int, side,
                   quantity: int) -> Reply:
        return self.call(NewMarket(account_id, client_order_id, instrument_id, _side(side),
                                   quantity))

    def cancel(self, order_id: int) -> Reply:
        return self.call(CancelByOrder(order_id))

    def cancel_client(self, account_id: int, client_order_id: int) -> Reply:
        return self.call(CancelByClient(account_id, client_order_id))

    def replace(self, order_id: int, client_order_id: int, price: int, quantity: int) -> Reply:
        return self.call(Replace(order_id, client_order_id, price, quantity))

    # gateway commands (extension kinds): answered with AcceptedEx/.../RejectedEx and Fills

    def order(self, account_id: int, client_order_id: int, instrument_id: int, side,
              price: int, quantity: int, type: int = LIMIT, tif: int = GTC,
              flags: int = 0) -> Reply:
        """A gateway Order: ``type`` LIMIT/MARKET (give price 0 for a market order), ``tif``
        GTC/IOC/FOK, ``flags`` POST_ONLY."""
        return self.call(Order(account_id, client_order_id, instrument_id, price, quantity,
                               _side(side), type, tif, flags))

    def order_cancel(self, account_id: int, client_order_id: int) -> Reply:
        """A gateway Cancel (by account and client order id)."""
        return self.call(Cancel(account_id, client_order_id))

    def replace_by_client(self, account_id: int, client_order_id: int,
                          new_client_order_id: int, price: int, quantity: int) -> Reply:
        """A gateway ReplaceByClient (the live order named by its client order id)."""
        return self.call(ReplaceByClient(account_id, client_order_id, new_client_order_id, price,
                                         quantity))

    def send_many(self, cmds: Iterable[Command],
                  first_client_seq: int | None = None) -> list[Reply]:
        """Pipelined bulk flow: sends every command without waiting (at most ``max_inflight``
        unanswered) and returns their replies in order. Every command is encoded (and so
        checked) before anything is sent. A logged-on session numbers them from
        ``first_client_seq`` (a resend) or the next client_seq."""
        frames = [self._encode(c, first_client_seq if i == 0 else None)
                  for i, c in enumerate(cmds)]
        if not frames:
            return []
        return self._exchange(frames, len(frames))

    # pipelining (tollfree.orders_pipeline, the C client's tf_orders_send / tf_orders_recv)

    _unanswered = 0  # commands send() took whose replies recv() has not returned

    def send(self, cmds: Iterable[Command], first_client_seq: int | None = None) -> int:
        """Sends commands without waiting for their replies (at most ``max_inflight``
        unanswered); returns how many it took. Each :meth:`recv` returns the next reply."""
        return _pipeline.send(self, cmds, first_client_seq)

    def recv(self) -> Reply:
        """The reply of the oldest command :meth:`send` sent and no recv has returned."""
        return _pipeline.recv(self)

    @property
    def unanswered(self) -> int:
        """Commands :meth:`send` took whose replies :meth:`recv` has not returned."""
        return self._unanswered

    def _read_nowait(self) -> bool:
        """Reads whatever has arrived without waiting; False when the server has closed."""
        try:
            self._sock.setblocking(False)
            try:
                while True:
                    data = self._sock.recv(65536)
                    if not data:
                        return False
                    self._rx += data
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                    ssl.SSLWantWriteError):
                return True
            finally:
                self._sock.settimeout(self.timeout)
        except OSError as e:
            self._fail(os_error(e, f"recv from {self.url}", EngineServiceError))

    def fills(self, timeout: float | None = 0.0, max: int | None = None) -> list[Trade]:
        """The unsolicited Trades (and gateway Fills) received so far (oldest first), taken
        from the queue. When none is queued, waits up to ``timeout`` seconds (``None`` = until
        one comes) for one. If the server has closed, the queued Trades are returned first and
        the next call raises. While commands sent with :meth:`send` are unanswered it does not
        wait: it returns what was read up to the next reply (tollfree.orders_pipeline)."""
        return self._poll(self._fills, timeout, max)

    def unsolicited(self, timeout: float | None = 0.0, max: int | None = None) -> list:
        """The unsolicited events other than fills received so far (oldest first): today the
        :class:`Canceled` / :class:`CanceledEx` a kill switch made of orders this connection
        placed (their ``command_seq`` is the kill's). Waits, returns and raises as
        :meth:`fills` does. Empty while ``on_unsolicited`` is set (the events went there)."""
        return self._poll(self._unsol, timeout, max, cb=self.on_unsolicited is not None)

    def _poll(self, q: deque, timeout: float | None, max: int | None, cb: bool = False) -> list:
        if self._unanswered:
            return _pipeline.fills(self, max, q)
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._sock is not None:
            alive = self._read_nowait()
            for msg, _ in self._frames():
                if not self._aside(msg, False):
                    self._fail(EngineServiceError(
                        E_PROTOCOL,
                        f"unexpected {ALL_KIND_NAMES[msg.KIND]} with no command outstanding"))
            if not alive:
                if q:
                    self.close()
                    break
                self._fail(EngineServiceError(-errno.ECONNRESET,
                                              "the engine service closed the connection"))
            if q or cb or timeout == 0:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            if not select.select([self._sock], [], [], left)[0]:
                break
        if self._sock is None and not q:
            raise EngineServiceError(-errno.ENOTCONN, "the connection is closed")
        out = []
        while q and (max is None or len(out) < max):
            out.append(q.popleft())
        return out

    # -- lifetime

    @property
    def closed(self) -> bool:
        return self._sock is None

    def fileno(self) -> int:
        return -1 if self._sock is None else self._sock.fileno()

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


from tollfree import orders_pipeline as _pipeline  # noqa: E402 (it uses this module's names)


def _tls_wrap(sock: socket.socket, host: str, ca: str | None, url: str) -> ssl.SSLSocket:
    """The TLS handshake over a connected socket (closed when it fails): TLS 1.2 or later, the
    server's certificate checked against ``ca`` (else ``TOLLFREE_TLS_CA``, else the system's CA
    store) and against the host (a name or an IP address)."""
    try:
        ca = ca or os.environ.get("TOLLFREE_TLS_CA") or None
        ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx.wrap_socket(sock, server_hostname=host)
    except ssl.SSLError as e:
        sock.close()
        raise EngineServiceError(-errno.EPROTO, f"TLS handshake with {url} failed: {e}") from None
    except OSError as e:
        sock.close()
        raise os_error(e, f"TLS with {url}", EngineServiceError) from None


def connect(url: str, timeout: float | None = 30.0, max_fills: int = 4096,
            max_inflight: int = 256, session: str | None = None,
            secret: str | bytes | None = None, ca: str | None = None,
            on_unsolicited=None) -> Client:
    """Connects to ``tollfree engine serve`` at ``unix:PATH``, ``tcp:[HOST:]PORT`` or
    ``tls:[HOST:]PORT`` (``ca``: the CA file for a ``tls:`` URL, else ``TOLLFREE_TLS_CA``); with
    ``session`` logs on (``secret``, else the environment variable ``TOLLFREE_SECRET``);
    ``on_unsolicited``: see :class:`Client`."""
    return Client(url, timeout=timeout, max_fills=max_fills, max_inflight=max_inflight,
                  session=session, secret=secret, ca=ca, on_unsolicited=on_unsolicited)
