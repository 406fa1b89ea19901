#!/usr/bin/env python3
"""Seed inputs for fuzz_engine_diff (tests/fuzz/corpus/engine_diff/).

Usage: /usr/bin/python3 tests/fuzz/engine_diff_seeds.py

The inputs are programs in the byte code described at the top of fuzz_engine_diff.c: a header
byte, then records (an op byte and its operands). The hand-written ones walk through the cases
of docs/engine.md (sweeps, market remainders, every Replace rule, the live-order limit, every
reject, redeliveries, skipped records, extreme values); the rest are seeded random programs."""
import os
import random
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, 'corpus', 'engine_diff')

NL, NM, CXO, CXC, REP, EVT = 0, 1, 2, 3, 4, 5
NEXT, REDELIVER, GAP = 0, 2, 3
BUY, SELL = 0, 1
IMAX = 2**63 - 1


def op(kind, seq=NEXT, back=0, inst=1):
    isel = {1: 0, 2: 2, 3: 3}[inst]
    return bytes([kind | seq << 3 | back << 5 | isel << 6])


def who(acct=1, cid=1, side=BUY):
    if cid is None or cid > 14:  # raw client id
        raw = 0 if cid is None else cid
        return bytes([(acct - 1) | 15 << 2 | side << 6]) + struct.pack('<Q', raw)
    return bytes([(acct - 1) | (cid - 1) << 2 | side << 6])


def price(p):
    if 95 <= p <= 105:
        return bytes([p - 95])
    return {IMAX: b'\xfc', 1: b'\xfd', 0: b'\xfe', -1: b'\xff'}.get(
        p, b'\xfb' + struct.pack('<q', p))


def qty(q, hi=0):
    if hi == 0 and 1 <= q <= 24:
        return bytes([q - 1])
    named = {(IMAX, 0): 241, (IMAX + 1, 0): 242, (0, 0): 243, (1, 1): 244, (1000, 0): 245}
    if (q, hi) in named:
        return bytes([named[(q, hi)]])
    return b'\xf0' + struct.pack('<QQ', q, hi)


def order(back=1, raw=None):
    """back = how far behind next_order_id (1 = the last order issued)"""
    if raw is not None:
        return b'\xf0' + struct.pack('<Q', raw)
    return bytes([back - 1])


def nl(acct, cid, side, p, q, inst=1, hi=0, **kw):
    return op(NL, inst=inst, **kw) + who(acct, cid, side) + price(p) + qty(q, hi)


def nm(acct, cid, side, q, inst=1, **kw):
    return op(NM, inst=inst, **kw) + who(acct, cid, side) + qty(q)


def cxo(back=1, raw=None, **kw):
    return op(CXO, **kw) + order(back, raw)


def cxc(acct, cid, **kw):
    return op(CXC, **kw) + who(acct, cid)


def rep(back, cid, p, q, raw=None, hi=0, **kw):
    return op(REP, **kw) + order(back, raw) + who(1, cid) + price(p) + qty(q, hi)


def evt(k, **kw):
    return op(EVT, **kw) + bytes([k])


def header(max_orders=1000, flushing=False):
    return bytes([{4: 0, 8: 1, 64: 2, 1000: 3}[max_orders] | (4 if flushing else 0)])


def stp_header(modes, max_orders=1000, flushing=False):
    """Self-trade prevention on: modes[i] is account i + 1's (0 none, 1 cancel-newest,
    2 cancel-oldest, 3 cancel-both)."""
    return bytes([header(max_orders, flushing)[0] | 8,
                  sum(m << (2 * i) for i, m in enumerate(modes))])


def gw_header(max_orders=1000, flushing=False, stp_modes=None):
    """Gateway commands on (header bit 4): op 6 is an Order, op 7 a Cancel/ReplaceByClient."""
    h = stp_header(stp_modes, max_orders, flushing) if stp_modes else header(max_orders, flushing)
    return bytes([h[0] | 16]) + h[1:]


LIMIT, MARKET = 0, 1
GTC, IOC, FOK = 0, 1, 2
GW_ORDER, GW_OTHER = 6, 7


def gorder(acct, cid, side, p, q, typ=LIMIT, tif=GTC, post=False, junk=False, inst=1, hi=0,
           **kw):
    tt = typ | tif << 2 | (16 if post else 0) | (32 if junk else 0)
    return op(GW_ORDER, inst=inst, **kw) + who(acct, cid, side) + price(p) + qty(q, hi) \
        + bytes([tt])


def gcancel(acct, cid, **kw):
    return op(GW_OTHER, **kw) + b'\x00' + who(acct, cid)


def greplace(acct, cid, new_cid, p, q, hi=0, **kw):
    return op(GW_OTHER, **kw) + b'\x01' + who(acct, cid) + who(1, new_cid) + price(p) \
        + qty(q, hi)


def stp_set(acct, mode, **kw):
    return op(EVT, **kw) + bytes([224 | (mode << 2) | (acct - 1)])


def stp_cancel_account(acct, **kw):
    return op(EVT, **kw) + bytes([224 | 16 | (acct - 1)])


SCENARIOS = {
    'sweep': header() + nl(1, 1, SELL, 101, 5) + nl(2, 2, SELL, 100, 3) + nl(3, 3, SELL, 101, 4)
    + nl(4, 4, BUY, 101, 10) + nm(1, 5, BUY, 7) + nm(1, 5, SELL, 1),
    'market_full': header() + nl(1, 1, BUY, 100, 2) + nl(1, 2, BUY, 101, 2) + nm(2, 1, SELL, 3)
    + nl(1, 1, SELL, 100, 1) + nl(1, 2, SELL, 99, 1),
    'replace_keep': header() + nl(1, 1, BUY, 100, 5) + nl(2, 1, BUY, 100, 5)
    + rep(2, 11, 100, 3) + nm(3, 1, SELL, 4),
    'replace_larger': header() + nl(1, 1, BUY, 100, 5) + nl(2, 1, BUY, 100, 5)
    + rep(2, 1, 100, 6) + nm(3, 1, SELL, 7),
    'replace_equal': header() + nl(1, 1, BUY, 100, 5) + nl(2, 1, BUY, 100, 5)
    + rep(2, 1, 100, 5) + nm(3, 1, SELL, 6),
    'replace_cross_fill': header() + nl(1, 1, BUY, 100, 5) + nl(2, 1, SELL, 102, 2)
    + nl(2, 2, SELL, 103, 3) + rep(3, 1, 103, 5) + cxo(3),
    'replace_cross_rest': header() + nl(1, 1, BUY, 100, 5) + nl(2, 1, SELL, 102, 2)
    + rep(2, 7, 104, 9) + nm(3, 1, SELL, 24),
    'replace_moves': header() + nl(1, 1, SELL, 105, 1) + nl(2, 1, SELL, 104, 1)
    + nl(3, 1, SELL, 104, 1) + rep(3, 1, 104, 1) + rep(1, 2, 103, 1) + nm(4, 1, BUY, 24),
    'replace_rejects': header() + nl(1, 1, BUY, 100, 5) + nl(1, 2, BUY, 99, 5)
    + rep(1, 1, 99, 5) + rep(1, 2, 99, 5) + rep(1, 3, 0, 0) + rep(1, 3, 0, 1)
    + rep(1, 3, -1, 1) + rep(0, 3, 100, 1, raw=999) + rep(1, 3, 100, 1, hi=1),
    'max_orders': header(4) + b''.join(nl(1, c, BUY, 100, 1) for c in range(1, 6))
    + nl(1, 1, SELL, 100, 1) + nm(2, 1, SELL, 2) + rep(3, 1, 101, 5) + nl(3, 3, SELL, 99, 1),
    'extremes': header() + nl(1, 1, SELL, IMAX, IMAX) + nl(2, 1, BUY, IMAX, IMAX)
    + nl(1, 2, BUY, 1, IMAX) + nm(2, 2, SELL, IMAX) + nl(1, 3, BUY, 0, 1)
    + nl(1, 3, BUY, -1, 1) + nl(1, 3, BUY, -2**63, 1) + nl(1, 3, BUY, 100, IMAX + 1)
    + nl(1, 3, BUY, 100, 0) + nl(1, 3, BUY, 100, 1, hi=1) + nl(1, 3, BUY, 100, 2**64 - 1)
    + nm(1, 3, BUY, 5, inst=3) + nl(1, 3, BUY, 0, 0, inst=3),
    'qty_hi': header() + op(NL) + who(1, 1, BUY) + price(100) + b'\xf0' + struct.pack('<QQ', 5, 1)
    + op(NM) + who(1, 1, SELL) + b'\xf0' + struct.pack('<QQ', 0, 2**64 - 1),
    'duplicates': header() + nl(1, 1, BUY, 100, 1) + nl(2, 1, BUY, 100, 1, seq=REDELIVER)
    + nl(2, 1, BUY, 100, 1, seq=REDELIVER, back=1) + nl(2, 2, SELL, 100, 1, seq=GAP)
    + nl(2, 2, SELL, 100, 1, seq=REDELIVER),
    'noise': header() + b''.join(evt(k) for k in range(6)) + nl(1, 1, BUY, 100, 1)
    + evt(3) + cxo(1),
    'client_reuse': header() + nl(1, 1, BUY, 100, 1) + nl(1, 1, BUY, 100, 1) + cxc(1, 1)
    + nl(1, 1, BUY, 100, 1) + nm(2, 1, SELL, 1) + nl(1, 1, SELL, 100, 1) + cxc(1, 1)
    + cxc(1, 1) + cxo(1) + cxo(raw=0) + cxo(raw=2**64 - 1),
    'raw_client': header() + nl(1, None, BUY, 100, 1) + nl(1, 2**64 - 1, BUY, 100, 1)
    + nl(1, None, SELL, 100, 1) + cxc(1, 2**64 - 1),
    'self_trade': header() + nl(1, 1, BUY, 100, 3) + nl(1, 2, SELL, 99, 5) + nm(1, 3, BUY, 1)
    + rep(1, 2, 100, 1),
    'two_books': header() + nl(1, 1, BUY, 100, 3, inst=2) + nl(1, 2, SELL, 100, 3)
    + nm(2, 1, SELL, 5, inst=2) + nm(2, 2, BUY, 5),
    'flushing': header(1000, True) + b''.join(nl(1 + c % 4, c, SELL, 95 + c % 11, 1)
                                              for c in range(1, 15)) + nm(2, 1, BUY, 24),
    'flushing_max8': header(8, True) + b''.join(nl(1, c, SELL, 100, 2) for c in range(1, 10))
    + rep(2, 2, 100, 5) + nm(2, 1, BUY, 1000),
    'stp_modes': stp_header([1, 2, 3, 0]) + nl(1, 1, SELL, 100, 2) + nl(1, 2, BUY, 101, 3)
    + nl(2, 1, SELL, 100, 2) + nl(2, 2, SELL, 101, 2) + nl(2, 3, BUY, 101, 5)
    + nl(3, 1, SELL, 100, 2) + nm(3, 2, BUY, 4) + nl(4, 1, SELL, 100, 1) + nl(4, 2, BUY, 100, 1),
    'stp_replace_and_cancel': stp_header([1, 0, 0, 0], 8, True) + nl(1, 1, SELL, 103, 2)
    + nl(1, 2, BUY, 100, 2) + rep(1, 3, 103, 2) + stp_set(2, 2) + nl(2, 1, SELL, 99, 1)
    + nl(2, 2, BUY, 99, 1) + nl(2, 3, BUY, 98, 1) + stp_cancel_account(2)
    + stp_cancel_account(2, seq=REDELIVER) + stp_set(1, 0) + nl(1, 4, BUY, 103, 2),
    'gw_tif': gw_header() + gorder(1, 1, SELL, 100, 5) + gorder(2, 1, SELL, 101, 3)
    + gorder(3, 1, BUY, 100, 7, tif=IOC) + gorder(3, 2, BUY, 99, 2, tif=IOC)
    + gorder(3, 3, BUY, 101, 4, tif=FOK) + gorder(3, 4, BUY, 101, 3, tif=FOK)
    + gorder(3, 5, BUY, 0, 9, typ=MARKET, tif=IOC) + gorder(3, 6, BUY, 0, 1, typ=MARKET, tif=FOK),
    'gw_post_only': gw_header() + gorder(1, 1, SELL, 100, 5) + gorder(2, 1, BUY, 100, 1, post=True)
    + gorder(2, 2, BUY, 99, 1, post=True) + gorder(1, 2, SELL, 99, 1, post=True)
    + gorder(1, 3, SELL, 101, 1, post=True),
    'gw_invalid': gw_header(4) + gorder(1, 1, BUY, 100, 1, typ=2) + gorder(1, 1, BUY, 100, 1, tif=3)
    + gorder(1, 1, BUY, 100, 1, junk=True) + gorder(1, 1, BUY, 0, 1, typ=MARKET)
    + gorder(1, 1, BUY, 0, 1, typ=MARKET, tif=IOC, post=True)
    + gorder(1, 1, BUY, 100, 1, tif=FOK, post=True) + gorder(1, 1, BUY, 0, 1)
    + gorder(1, 1, BUY, 100, 0) + gorder(1, 1, BUY, 100, IMAX + 1) + gorder(1, 1, BUY, 100, 1, inst=3)
    + b''.join(gorder(1, c, BUY, 100, 1) for c in range(1, 6)) + gorder(1, 1, BUY, 100, 1)
    + gorder(2, 1, SELL, 0, 9, typ=MARKET, tif=IOC),
    'gw_cancel_replace': gw_header() + gorder(1, 1, SELL, 100, 5) + gorder(2, 1, SELL, 100, 5)
    + gorder(3, 1, BUY, 100, 2, tif=IOC) + greplace(1, 1, 2, 100, 2) + greplace(1, 2, 2, 100, 9)
    + greplace(2, 1, 3, 98, 4) + greplace(1, 9, 3, 100, 1) + greplace(1, 2, 3, 0, 1)
    + gcancel(1, 2) + gcancel(1, 2) + gcancel(3, 1),
    'gw_mixed': gw_header() + nl(1, 1, SELL, 100, 5) + gorder(2, 1, SELL, 100, 5)
    + gorder(3, 1, BUY, 100, 7) + nl(4, 1, BUY, 100, 4) + rep(2, 5, 101, 3) + cxc(2, 1)
    + gcancel(3, 1) + evt(1),
    'gw_stp': gw_header(stp_modes=[1, 2, 3, 0]) + gorder(1, 1, SELL, 100, 2)
    + gorder(2, 1, SELL, 100, 2) + gorder(1, 2, BUY, 100, 3, tif=FOK)
    + gorder(2, 2, BUY, 100, 3, tif=FOK) + gorder(3, 1, SELL, 99, 2) + gorder(4, 1, SELL, 99, 2)
    + gorder(3, 2, BUY, 0, 9, typ=MARKET, tif=IOC) + greplace(2, 2, 3, 101, 3),
    'gw_flushing': gw_header(8, True) + b''.join(gorder(1, c, SELL, 100, 2) for c in range(1, 9))
    + gorder(2, 1, BUY, 100, 1000, tif=FOK) + gorder(2, 2, BUY, 100, 16, tif=FOK),
    'gw_extremes': gw_header() + gorder(1, 1, SELL, IMAX, IMAX) + gorder(1, 2, SELL, IMAX, IMAX)
    + gorder(1, 3, SELL, IMAX, IMAX) + gorder(2, 1, BUY, IMAX, IMAX, tif=FOK)
    + gorder(2, 2, BUY, 0, 2**64 - 1, typ=MARKET, tif=IOC, hi=1),
    'empty': b'',
    'header_only': header(64),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SCENARIOS.items():
        with open(os.path.join(OUT, 'seed_' + name), 'wb') as f:
            f.write(data)
    rnd = random.Random(20240611)
    for i in range(24):
        n = rnd.choice([16, 64, 200, 600])
        data = bytes([rnd.randrange(8)]) + bytes(rnd.randrange(256) for _ in range(n))
        with open(os.path.join(OUT, 'seed_random_%02d' % i), 'wb') as f:
            f.write(data)
    rnd = random.Random(20261202)  # gateway programs: header bit 4 set
    for i in range(12):
        n = rnd.choice([64, 200, 600])
        data = bytes([16 | rnd.randrange(16)]) + bytes(rnd.randrange(256) for _ in range(n))
        with open(os.path.join(OUT, 'seed_gw_random_%02d' % i), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
