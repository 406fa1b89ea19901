/* Fuzz target: the fast engine against the slow model (tests/model/engine_model.c).
 *
 * The input is a tiny byte code for a command stream, so that most inputs are meaningful and
 * trade often (small sets of accounts, client ids, prices and quantities), with escapes to raw
 * 64-bit values. The two must agree on the outcome of every record, every event (encoded stream
 * frames, byte for byte), the counters and the state hash after every record, and the books at
 * the end; any difference abort()s after printing both sides.
 *
 * Byte code (tests/fuzz/engine_diff_seeds.py writes the seed corpus with the same rules):
 *   header  1 byte: bits 0-1 max_orders {4, 8, 64, 1000}; bit 2 a flushing sink of 2 events
 *           (else max_orders + 2, no flush); bit 3 self-trade prevention: one more byte gives
 *           accounts 1-4 their modes (2 bits each, account 1 in bits 0-1), and an event
 *           record's kind byte of 224 and up becomes an STP setting (bit 4 clear: account
 *           1 + bits 0-1, mode bits 2-3) or a cancel of every order of account 1 + bits 0-1
 *           (bit 4 set, with the record's command_seq); bit 4 gateway commands: ops 6 and 7
 *           below become an Order and a Cancel/ReplaceByClient; instruments are always {1, 2}.
 *   record  op byte: bits 0-2 kind: 0 NewLimit, 1 NewMarket, 2 CancelByOrder, 3 CancelByClient,
 *           4 Replace, 5 an event/Heartbeat record, 6 NewLimit, 7 Replace;
 *           bits 3-4 command_seq: 0, 1 next; 2 a redelivery (last - bit 5); 3 a gap of 1000;
 *           bits 6-7 instrument: 0, 1 -> 1; 2 -> 2; 3 -> 3 (unknown).
 *           then the kind's operands:
 *     who   1 byte: bits 0-1 account 1..4; bits 2-5 client id 1..16 (15 -> raw u64 follows);
 *           bit 6 side; bit 7 unused
 *     price 1 byte: 0..250 -> 100 + b % 11 - 5; 251 raw i64 follows; 252 INT64_MAX; 253 1;
 *           254 0; 255 -1
 *     qty   1 byte: 0..239 -> 1 + b % 24; 240 raw lo, hi follow; 241 INT64_MAX;
 *           242 INT64_MAX + 1; 243 0; 244 hi = 1; 245 1000; 246..255 50 + b
 *     order 1 byte: 0..239 -> the model's next_order_id - 1 - b % 24 (recent ids); 240 raw u64;
 *           241 0; 242 UINT64_MAX; else next_order_id + b % 4
 *     NewLimit: who price qty; NewMarket: who qty; CancelByOrder: order; CancelByClient: who;
 *     Replace: order who price qty (the order's account is the Replace's); event: 1 byte kind.
 *   with header bit 4 (gateway): op 6 is an Order: who price qty tt, where tt bits 0-1 type
 *           (0 limit, 1 market, 2-3 the invalid 2-3), bits 2-3 tif 0-3 (3 invalid), bit 4
 *           post-only, bit 5 an unknown flag (0x80); its u64 quantity is qty's lo, or UINT64_MAX
 *           when qty's hi is not 0. Op 7 reads a byte: bit 0 clear, a Cancel: who; set, a
 *           ReplaceByClient: who (the order's account and client id), who (its client id is the
 *           new one), price, qty.
 * A missing byte reads as 0, so every input is a valid program.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_model.h"
#include "tollfree/engine.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 4096

typedef struct reader {
    const uint8_t *p;
    size_t n, pos;
} reader;

static uint8_t rd8(reader *r)
{
    return r->pos < r->n ? r->p[r->pos++] : 0;
}

static uint64_t rd64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)rd8(r) << (8 * i);
    return v;
}

typedef struct collected {
    tf_ofl_msg ev[MAX_RECORDS + 4];
    size_t n;
} collected;

static int collect(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    collected *c = ctx;
    if (c->n + n > sizeof c->ev / sizeof *c->ev)
        return TF_E_LIMIT;
    memcpy(c->ev + c->n, ev, n * sizeof *ev);
    c->n += n;
    return 0;
}

static void who(reader *r, uint64_t *account, uint64_t *client, uint8_t *side)
{
    uint8_t b = rd8(r);
    *account = 1 + (b & 3);
    uint64_t c = (b >> 2) & 15;
    *client = c == 15 ? rd64(r) : 1 + c;
    if (side)
        *side = (b >> 6) & 1;
}

static int64_t price(reader *r)
{
    uint8_t b = rd8(r);
    switch (b) {
    case 251:
        return (int64_t)rd64(r);
    case 252:
        return INT64_MAX;
    case 253:
        return 1;
    case 254:
        return 0;
    case 255:
        return -1;
    default:
        return 100 + b % 11 - 5;
    }
}

static tf_ofl_qty qty(reader *r)
{
    uint8_t b = rd8(r);
    tf_ofl_qty q = {0, 0};
    if (b < 240)
        q.lo = 1 + b % 24;
    else if (b == 240) {
        q.lo = rd64(r);
        q.hi = rd64(r);
    } else if (b == 241)
        q.lo = INT64_MAX;
    else if (b == 242)
        q.lo = (uint64_t)INT64_MAX + 1;
    else if (b == 243)
        q.lo = 0;
    else if (b == 244)
        q.lo = 1, q.hi = 1;
    else if (b == 245)
        q.lo = 1000;
    else
        q.lo = 50 + (uint64_t)b;
    return q;
}

static uint64_t order(reader *r, const em_model *m)
{
    em_counters c;
    em_get_counters(m, &c);
    uint8_t b = rd8(r);
    if (b < 240) {
        uint64_t back = 1 + b % 24;
        return c.next_order_id > back ? c.next_order_id - back : 0;
    }
    if (b == 240)
        return rd64(r);
    if (b == 241)
        return 0;
    if (b == 242)
        return UINT64_MAX;
    return c.next_order_id + b % 4;
}

static void fail(const char *what, size_t rec, const tf_ofl_msg *cmd, int rm, int re)
{
    fprintf(stderr,
            "fuzz_engine_diff: %s differs at record %zu (kind 0x%02x, seq %" PRIu64
            "): model %d, engine %d\n",
            what, rec, cmd ? cmd->kind : 0, cmd ? cmd->new_limit.command_seq : 0, rm, re);
    abort();
}

/* Encoded as stream frames by the extension codec (OFL1 and gateway kinds alike). */
static int same_event(const tf_ofl_msg *a, const tf_ofl_msg *b)
{
    uint8_t fa[256], fb[256];
    int na = tf_ofx_frame_encode(fa, sizeof fa, a);
    int nb = tf_ofx_frame_encode(fb, sizeof fb, b);
    return na > 0 && na == nb && memcmp(fa, fb, (size_t)na) == 0 && a->session_id == b->session_id;
}

typedef struct book_cmp {
    const em_order *want;
    size_t n, i;
    int bad;
} book_cmp;

static int cmp_order(void *ctx, const tf_engine_order *o)
{
    book_cmp *b = ctx;
    if (b->i >= b->n) {
        b->bad = 1;
        return 1;
    }
    const em_order *w = &b->want[b->i++];
    if (w->order_id != o->order_id || w->account_id != o->account_id ||
        w->client_order_id != o->client_order_id || w->instrument_id != o->instrument_id ||
        w->price != o->price || w->remaining != o->remaining || w->side != o->side ||
        w->filled != o->filled)
        b->bad = 1;
    return b->bad;
}

static void compare_state(const em_model *m, const tf_engine *e, size_t rec, const tf_ofl_msg *cmd)
{
    if (em_state_hash(m) != tf_engine_state_hash(e))
        fail("state hash", rec, cmd, 0, 0);
    em_counters mc;
    tf_engine_counters ec;
    em_get_counters(m, &mc);
    tf_engine_get_counters(e, &ec);
    if (mc.next_order_id != ec.next_order_id || mc.last_command_seq != ec.last_command_seq ||
        mc.next_event_seq != ec.next_event_seq || mc.resting_orders != ec.resting_orders ||
        mc.price_levels != ec.price_levels || mc.applied != ec.applied ||
        mc.duplicates != ec.duplicates || mc.skipped != ec.skipped || mc.events != ec.events ||
        mc.trades != ec.trades || mc.rejected != ec.rejected)
        fail("counters", rec, cmd, 0, 0);
}

/* An STP setting or an account-wide cancel, on both sides (see the byte code). */
static void stp_record(em_model *m, tf_engine *e, tf_engine_sink *sink, collected *got, uint8_t b,
                       uint64_t cs, size_t rec)
{
    uint64_t account = 1 + (b & 3u);
    if (!(b & 16)) {
        if (em_set_stp(m, account, (b >> 2) & 3) || tf_engine_set_stp(e, account, (b >> 2) & 3))
            abort();
        compare_state(m, e, rec, NULL);
        return;
    }
    int rm = em_cancel_account(m, cs, account);
    size_t n_m;
    const tf_ofl_msg *ev_m = em_last_events(m, &n_m);
    sink->n = 0;
    got->n = 0;
    int re = tf_engine_cancel_account(e, cs, account, sink);
    const tf_ofl_msg *ev_e = sink->ev;
    size_t n_e = sink->n;
    if (sink->flush) {
        if (collect(got, sink->ev, sink->n) != 0)
            abort();
        ev_e = got->ev;
        n_e = got->n;
    }
    if (rm != re || n_m != n_e)
        fail("cancel_account", rec, NULL, rm, re);
    for (size_t i = 0; i < n_m; i++)
        if (!same_event(&ev_m[i], &ev_e[i]))
            fail("cancel_account event", rec, NULL, (int)i, (int)i);
    compare_state(m, e, rec, NULL);
}

static void run(reader *r)
{
    static const uint32_t max_orders_of[4] = {4, 8, 64, 1000};
    static const uint64_t instruments[2] = {1, 2};
    static collected got;
    static tf_ofl_msg buf[1002];
    uint8_t h = rd8(r);
    uint32_t max_orders = max_orders_of[h & 3];
    int flushing = (h >> 2) & 1, stp = (h >> 3) & 1, gateway = (h >> 4) & 1;

    em_model *m = NULL;
    tf_engine *e = NULL;
    if (em_create(instruments, 2, max_orders, &m) != 0)
        abort();
    tf_engine_config cfg = {.size = sizeof cfg,
                            .instruments = instruments,
                            .n_instruments = 2,
                            .max_orders = max_orders,
                            .max_bytes = 0};
    if (tf_engine_create(&cfg, &e) != 0)
        abort();
    if (stp) {
        uint8_t modes = rd8(r);
        for (int a = 0; a < 4; a++)
            if (em_set_stp(m, (uint64_t)a + 1, (modes >> (2 * a)) & 3) ||
                tf_engine_set_stp(e, (uint64_t)a + 1, (modes >> (2 * a)) & 3))
                abort();
    }
    tf_engine_sink sink = {.ev = buf, .cap = flushing ? 2 : (size_t)max_orders + 2};
    if (flushing) {
        sink.flush = collect;
        sink.ctx = &got;
    }

    uint64_t seq = 0;
    for (size_t rec = 0; rec < MAX_RECORDS && r->pos < r->n; rec++) {
        uint8_t op = rd8(r);
        tf_ofl_msg cmd;
        memset(&cmd, 0, sizeof cmd);
        uint64_t cs;
        switch ((op >> 3) & 3) {
        case 2:
            cs = seq >= ((op >> 5) & 1u) ? seq - ((op >> 5) & 1u) : 0;
            break;
        case 3:
            cs = seq += 1000;
            break;
        default:
            cs = ++seq;
            break;
        }
        static const uint64_t inst_of[4] = {1, 1, 2, 3};
        uint64_t inst = inst_of[op >> 6];
        int kind = op & 7;
        if (gateway && kind == 6) {
            tf_ofx_order *c = &cmd.order;
            cmd.kind = TF_OFX_ORDER;
            c->command_seq = cs;
            c->instrument_id = inst;
            who(r, &c->account_id, &c->client_order_id, &c->side);
            c->price = price(r);
            tf_ofl_qty q = qty(r);
            c->quantity = q.hi ? UINT64_MAX : q.lo;
            uint8_t tt = rd8(r);
            c->type = tt & 3;
            c->tif = (tt >> 2) & 3;
            c->flags = (uint8_t)(((tt >> 4) & 1) | ((tt >> 5) & 1) << 7);
            kind = -1;
        } else if (gateway && kind == 7) {
            if (rd8(r) & 1) {
                tf_ofx_replace_by_client *c = &cmd.replace_by_client;
                uint64_t account_unused;
                cmd.kind = TF_OFX_REPLACE_BY_CLIENT;
                c->command_seq = cs;
                who(r, &c->account_id, &c->client_order_id, NULL);
                who(r, &account_unused, &c->new_client_order_id, NULL);
                c->price = price(r);
                tf_ofl_qty q = qty(r);
                c->quantity = q.hi ? UINT64_MAX : q.lo;
            } else {
                cmd.kind = TF_OFX_CANCEL;
                cmd.cancel.command_seq = cs;
                who(r, &cmd.cancel.account_id, &cmd.cancel.client_order_id, NULL);
            }
            kind = -1;
        }
        switch (kind) {
        case -1:
            break;
        case 0:
        case 6:
            cmd.kind = TF_OFL_NEW_LIMIT;
            cmd.new_limit.command_seq = cs;
            cmd.new_limit.instrument_id = inst;
            who(r, &cmd.new_limit.account_id, &cmd.new_limit.client_order_id, &cmd.new_limit.side);
            cmd.new_limit.price = price(r);
            cmd.new_limit.quantity = qty(r);
            break;
        case 1:
            cmd.kind = TF_OFL_NEW_MARKET;
            cmd.new_market.command_seq = cs;
            cmd.new_market.instrument_id = inst;
            who(r, &cmd.new_market.account_id, &cmd.new_market.client_order_id,
                &cmd.new_market.side);
            cmd.new_market.quantity = qty(r);
            break;
        case 2:
            cmd.kind = TF_OFL_CANCEL_BY_ORDER;
            cmd.cancel_by_order.command_seq = cs;
            cmd.cancel_by_order.order_id = order(r, m);
            break;
        case 3:
            cmd.kind = TF_OFL_CANCEL_BY_CLIENT;
            cmd.cancel_by_client.command_seq = cs;
            who(r, &cmd.cancel_by_client.account_id, &cmd.cancel_by_client.client_order_id, NULL);
            break;
        case 4:
        case 7: {
            uint64_t account_unused;
            cmd.kind = TF_OFL_REPLACE;
            cmd.replace.command_seq = cs;
            cmd.replace.order_id = order(r, m);
            who(r, &account_unused, &cmd.replace.client_order_id, NULL);
            cmd.replace.price = price(r);
            cmd.replace.quantity = qty(r);
            break;
        }
        default: {
            static const uint8_t noise[6] = {TF_OFL_HEARTBEAT, TF_OFL_ACCEPTED, TF_OFL_REJECTED,
                                             TF_OFL_REPLACED,  TF_OFL_CANCELED, TF_OFL_TRADE};
            uint8_t b = rd8(r);
            if (stp && b >= 224) {
                stp_record(m, e, &sink, &got, b, cs, rec);
                continue;
            }
            cmd.kind = noise[b % 6];
            if (cmd.kind != TF_OFL_HEARTBEAT) {
                cmd.trade.event_seq = 7;
                cmd.trade.command_seq = seq + 5; /* would look new, were it a command */
            }
            break;
        }
        }

        size_t n_m = 0;
        int rm = em_apply(m, &cmd, NULL, 0, &n_m);
        const tf_ofl_msg *ev_m = em_last_events(m, &n_m);
        sink.n = 0;
        got.n = 0;
        int re = tf_engine_apply(e, &cmd, &sink);
        const tf_ofl_msg *ev_e = buf;
        size_t n_e = sink.n;
        if (flushing) {
            if (collect(&got, buf, sink.n) != 0)
                abort();
            ev_e = got.ev;
            n_e = got.n;
        }
        if (rm != re)
            fail("outcome", rec, &cmd, rm, re);
        if (n_m != n_e)
            fail("event count", rec, &cmd, (int)n_m, (int)n_e);
        for (size_t i = 0; i < n_m; i++)
            if (!same_event(&ev_m[i], &ev_e[i]))
                fail("an event", rec, &cmd, (int)i, (int)i);
        compare_state(m, e, rec, &cmd);
    }

    /* the books, order by order, and the queries */
    em_counters mc;
    em_get_counters(m, &mc);
    em_order *want = malloc((mc.resting_orders + 1) * sizeof *want);
    if (!want)
        abort();
    size_t n = em_orders_in_order(m, want, mc.resting_orders);
    book_cmp bc = {want, n, 0, 0};
    tf_engine_for_each_order(e, cmp_order, &bc);
    if (bc.bad || bc.i != n)
        fail("for_each_order", 0, NULL, (int)n, (int)bc.i);
    for (size_t i = 0; i < n; i++) {
        tf_engine_order o;
        if (tf_engine_find_order(e, want[i].order_id, &o) != 1 || o.remaining != want[i].remaining)
            fail("find_order", i, NULL, 1, 0);
        if (tf_engine_find_client(e, want[i].account_id, want[i].client_order_id, &o) != 1 ||
            o.order_id != want[i].order_id || o.filled != want[i].filled)
            fail("find_client", i, NULL, 1, 0);
    }
    for (uint64_t a = 1; a <= 4; a++) /* the byte code's small client ids, live or not */
        for (uint64_t c = 1; c <= 15; c++) {
            tf_engine_order o;
            em_order mo;
            int x = em_find_client(m, a, c, &mo), y = tf_engine_find_client(e, a, c, &o);
            if (x != y || (x == 1 && mo.order_id != o.order_id))
                fail("find_client of a probe", (size_t)c, NULL, x, y);
        }
    for (uint64_t id = 1; id <= 2; id++)
        for (int side = 0; side <= 1; side++) {
            int64_t mp = 0, ep = 0;
            uint64_t mq = 0, eq = 0;
            int a = em_best(m, id, side, &mp, &mq), b = tf_engine_best(e, id, side, &ep, &eq);
            if (a != b || (a == 1 && (mp != ep || mq != eq)))
                fail("best", (size_t)id, NULL, a, b);
            /* level totals at the byte code's prices and the extremes */
            static const int64_t px[] = {1,   94,  95,  96,  97,  98,        99, 100, 101,
                                         102, 103, 104, 105, 106, INT64_MAX, 0,  -1};
            for (size_t k = 0; k < sizeof px / sizeof px[0]; k++) {
                tf_engine_level l;
                uint64_t mt = 0;
                uint32_t mn = 0;
                int x = em_level_at(m, id, side, px[k], &mt, &mn);
                int y = tf_engine_level_at(e, id, side, px[k], &l);
                if (x != y || (x == 1 && (l.total != mt || l.orders != mn || l.price != px[k])))
                    fail("level_at", k, NULL, x, y);
            }
            int64_t mprices[64];
            tf_engine_level lv[64];
            int x = em_depth(m, id, side, mprices, 64), y = tf_engine_depth(e, id, side, lv, 64);
            if (x != y)
                fail("depth", (size_t)id, NULL, x, y);
            for (int k = 0; k < x; k++)
                if (mprices[k] != lv[k].price)
                    fail("depth price", (size_t)k, NULL, 0, 0);
        }
    for (uint64_t id = 1; id <= 3; id++) {
        int64_t a = -1, b = -2;
        int x = em_last_trade(m, id, &a), y = tf_engine_last_trade(e, id, &b);
        if (x != y || (x >= 0 && a != b))
            fail("last_trade", (size_t)id, NULL, x, y);
    }
    free(want);
    em_destroy(m);
    tf_engine_destroy(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    run(&r);
    return 0;
}
