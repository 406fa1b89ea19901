/* Golden OFL1 vectors shared by the codec and allocation tests: one message per kind with
 * distinctive field values, and the bytes of its stream frame and datagram. The hex was produced
 * by an independent encoder (Python's struct module following docs/orderflow.md), not by this
 * codec. Envelope: journal_seq 0x1122334455667788, datagram session 0xCAFEBABE0000F00D. */
#ifndef TF_TEST_OFL_GOLDEN_H
#define TF_TEST_OFL_GOLDEN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "orderflow/orderflow_internal.h"
#include "tollfree/orderflow.h"

#define GOLDEN_SEQ 0x1122334455667788ull
#define GOLDEN_SESSION 0xCAFEBABE0000F00Dull
#define GOLDEN_N 11

struct golden {
    const char *name;
    int payload_len;
    const char *frame_hex;
    const char *datagram_hex;
};

static const struct golden goldens[GOLDEN_N] = {
    {"Heartbeat", 0, "0900008877665544332211", "0df00000bebafeca887766554433221100"},
    {"NewLimit", 57,
     "420001887766554433221108070605040302012a000000000000000700000000000000030000"
     "000000000001fbffffffffffffffe8030000000000000000000000000000",
     "0df00000bebafeca88776655443322110108070605040302012a000000000000000700000000"
     "000000030000000000000001fbffffffffffffffe8030000000000000000000000000000"},
    {"NewMarket", 49,
     "3a000288776655443322110b000000000000000c000000000000000d000000000000000e0000"
     "00000000000005000000000000000100000000000000",
     "0df00000bebafeca8877665544332211020b000000000000000c000000000000000d00000000"
     "0000000e000000000000000005000000000000000100000000000000"},
    {"CancelByOrder", 16, "190003887766554433221115000000000000001600000000000000",
     "0df00000bebafeca88776655443322110315000000000000001600000000000000"},
    {"CancelByClient", 24, "21000488776655443322111f0000000000000020000000000000002100000000000000",
     "0df00000bebafeca8877665544332211041f0000000000000020000000000000002100000000"
     "000000"},
    {"Replace", 48,
     "390005887766554433221129000000000000002a000000000000002b0000000000000015cd5b"
     "07000000004d000000000000000000000000000000",
     "0df00000bebafeca88776655443322110529000000000000002a000000000000002b00000000"
     "00000015cd5b07000000004d000000000000000000000000000000"},
    {"Accepted", 48,
     "39008188776655443322113300000000000000340000000000000001002a36fe9c9717360000"
     "000000000037000000000000003800000000000000",
     "0df00000bebafeca8877665544332211813300000000000000340000000000000001002a36fe"
     "9c9717360000000000000037000000000000003800000000000000"},
    {"Rejected", 33,
     "2a008288776655443322113d000000000000003e000000000000003f00000000000000000000"
     "000000000004",
     "0df00000bebafeca8877665544332211823d000000000000003e000000000000003f00000000"
     "000000000000000000000004"},
    {"Replaced", 40,
     "31008388776655443322114700000000000000480000000000000049000000000000004a0000"
     "00000000004b00000000000000",
     "0df00000bebafeca887766554433221183470000000000000048000000000000004900000000"
     "0000004a000000000000004b00000000000000"},
    {"Canceled", 32,
     "2900848877665544332211510000000000000052000000000000005300000000000000540000"
     "0000000000",
     "0df00000bebafeca887766554433221184510000000000000052000000000000005300000000"
     "0000005400000000000000"},
    {"Trade", 72,
     "51008588776655443322115b000000000000005c000000000000005d000000000000005e0000"
     "00000000005f0000000000000060000000000000009cffffffffffffff030000000000000000"
     "00000000000080",
     "0df00000bebafeca8877665544332211855b000000000000005c000000000000005d00000000"
     "0000005e000000000000005f0000000000000060000000000000009cffffffffffffff030000"
     "00000000000000000000000080"},
};

static const uint8_t golden_kinds[GOLDEN_N] = {
    TF_OFL_HEARTBEAT,        TF_OFL_NEW_LIMIT, TF_OFL_NEW_MARKET, TF_OFL_CANCEL_BY_ORDER,
    TF_OFL_CANCEL_BY_CLIENT, TF_OFL_REPLACE,   TF_OFL_ACCEPTED,   TF_OFL_REJECTED,
    TF_OFL_REPLACED,         TF_OFL_CANCELED,  TF_OFL_TRADE,
};

/* The message golden i encodes (session_id 0: the stream frame's view). */
static inline void golden_msg(int i, tf_ofl_msg *m)
{
    memset(m, 0, sizeof *m);
    m->kind = golden_kinds[i];
    m->journal_seq = GOLDEN_SEQ;
    switch (m->kind) {
    case TF_OFL_NEW_LIMIT:
        m->new_limit = (tf_ofl_new_limit){0x0102030405060708ull, 42, 7, 3, -5, {1000, 0}, 1};
        break;
    case TF_OFL_NEW_MARKET:
        m->new_market = (tf_ofl_new_market){11, 12, 13, 14, {5, 1}, 0};
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        m->cancel_by_order = (tf_ofl_cancel_by_order){21, 22};
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        m->cancel_by_client = (tf_ofl_cancel_by_client){31, 32, 33};
        break;
    case TF_OFL_REPLACE:
        m->replace = (tf_ofl_replace){41, 42, 43, 123456789, {77, 0}};
        break;
    case TF_OFL_ACCEPTED:
        m->accepted = (tf_ofl_accepted){51, 52, 1700000000000000001ull, 54, 55, 56};
        break;
    case TF_OFL_REJECTED:
        m->rejected = (tf_ofl_rejected){61, 62, 63, 0, TF_OFL_DUPLICATE_CLIENT_ORDER_ID};
        break;
    case TF_OFL_REPLACED:
        m->replaced = (tf_ofl_replaced){71, 72, 73, 74, 75};
        break;
    case TF_OFL_CANCELED:
        m->canceled = (tf_ofl_canceled){81, 82, 83, 84};
        break;
    case TF_OFL_TRADE:
        m->trade = (tf_ofl_trade){91, 92, 93, 94, 95, 96, -100, {3, 0x8000000000000000ull}};
        break;
    default:
        break;
    }
}

/* Hex to bytes; returns the byte count. */
static inline size_t golden_bytes(const char *hex, uint8_t *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = hex[k];
            v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        out[n++] = (uint8_t)v;
    }
    return n;
}

/* Compares the payload fields of the kind, from the kind table (the union's other bytes, padding
 * included, may differ). */
static inline int golden_same(const tf_ofl_msg *a, const tf_ofl_msg *b)
{
    if (a->kind != b->kind || a->journal_seq != b->journal_seq)
        return 0;
    const unsigned char *ua = (const unsigned char *)&a->new_limit;
    const unsigned char *ub = (const unsigned char *)&b->new_limit;
    for (const tfo_field *f = tfo_kind_fields(a->kind); f && f->name; f++)
        if (memcmp(ua + f->offset, ub + f->offset, f->size) != 0)
            return 0;
    return 1;
}

#endif
