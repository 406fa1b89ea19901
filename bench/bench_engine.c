/* Order-engine benchmarks (issue 9): throughput on one core, open-loop latency, replay from a
 * journal file, snapshot write/load. A program, never a test: it fails only when the
 * equivalence gate fails (the model and the fast engine disagree, or a replay path gives
 * another hash), and then it times nothing.
 *
 *   bench_engine [--quick] [--compare] [--cpu-clock] [--no-batch] [--pin CPU] [--rounds R]
 *                [--only TEXT] [--clock tsc|monotonic] [--dir DIR] [OUT.json]
 *
 * Throughput is measured for today's engine and for the frozen engine of bench_engine_base/
 * (before issue 24) on the same flows in the same run, rounds interleaved (base, new, new, base,
 * ...), after a gate that both give the same return codes, the same events byte for byte and
 * the same state hashes on every record of every flow. --compare runs only the gates and that
 * throughput table; --cpu-clock times those rounds on the thread's CPU clock instead of the wall
 * clock (for a machine shared with other work). --only TEXT runs the flows whose name contains
 * TEXT. In the timed rounds today's engine takes the decoded records 16 at a time through
 * tf_engine_apply_batch (the same events, in the same order, as one at a time: test_engine_batch
 * checks it), the frozen one, which has no batch call, one at a time; --no-batch times today's
 * engine one at a time too. The gates apply one record at a time.
 *
 * Two flows are a gateway's (issue 24): orders named by client ids only, with time in force
 * (make_gw_flow). Today's engine takes those commands as they are; the frozen engine, which has
 * none of them, runs behind an adapter that does what a gateway did around its API (its own
 * tables of live orders, IOC as NewLimit + CancelByOrder, FOK as a depth walk first). Their
 * gate compares what a gateway reports (every fill's client ids, price, quantity and maker
 * remaining) and the final books (gate_gateway).
 *
 * Flows come from tf_engine_flow (the generator runs its own engine: cancels and replaces hit
 * live orders), encoded once as OFL1 stream frames in one large buffer and replayed once per
 * round through a fresh engine: decode (tf_ofl_frame_decode) + apply + encode every event
 * (tf_ofl_frame_encode into an output buffer). Nothing is replayed in a cycle. Each flow starts
 * with an untimed warm-up that builds its book to its steady size.
 *
 * Latency: an open-loop driver offers commands at a fixed rate; command i is due at
 * t0 + i / rate and its latency is (time its events are written) - (time it was due), so a
 * stall delays every command queued behind it (no coordinated omission). The first 10% of each
 * run are excluded. The driver reads the invariant TSC (bench_clock.h: a few ns a read, its rate
 * calibrated against CLOCK_MONOTONIC at start) where the CPU has one, else, or with --clock
 * monotonic, clock_gettime (~20-25 ns a read on this kind of VM: the driver alone then shows a
 * p50 of ~50 ns). The header says which clock was used; the "driver alone" row is the floor.
 * Percentiles come from a log-bucketed histogram (64 buckets per power of two, <= 1.6 % relative
 * error: 1 ns steps between 64 and 128 ns). */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_engine_base/base_engine.h"
#include "bench_args.h"
#include "bench_clock.h"
#include "bench_machine.h"
#include "bench_outdir.h"
#include "engine_model.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

static int quick, compare_only, cpu_clock;
static int rounds = 5;
static const char *only; /* --only TEXT: the flows whose name contains it */
static FILE *json;
static int json_first = 1;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The throughput rounds' clock: wall time, or with --cpu-clock this thread's CPU time (on a
 * machine shared with other work, the time the benchmark spends descheduled is then not
 * counted; caches shared with the other work still are). */
static uint64_t round_ns(void)
{
    struct timespec ts;
    clock_gettime(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

_Noreturn static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_engine: %s: %s\n", what, rc ? tf_strerror(rc) : "failed");
    exit(1);
}

static void json_row(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void json_row(const char *fmt, ...)
{
    if (!json)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(json_first ? "\n  " : ",\n  ", json);
    vfprintf(json, fmt, ap);
    va_end(ap);
    json_first = 0;
}

/* The codec of the flow being run: the OFL1 stream codec, or for a gateway flow the extension
 * codec (OFL1 kinds and the gateway kinds), for its commands and every engine's events. */
static int ext_codec;

static inline int frame_decode(const void *buf, size_t len, tf_ofl_msg *out)
{
    return ext_codec ? tf_ofx_frame_decode(buf, len, out) : tf_ofl_frame_decode(buf, len, out);
}

static inline int frame_encode(void *buf, size_t cap, const tf_ofl_msg *msg)
{
    return ext_codec ? tf_ofx_frame_encode(buf, cap, msg) : tf_ofl_frame_encode(buf, cap, msg);
}

/* ---- flows ---------------------------------------------------------------------------------- */

typedef struct flow {
    const char *name;
    uint8_t *buf; /* stream frames, back to back */
    size_t len;
    size_t warm_end; /* byte offset where the timed part starts */
    uint64_t n, warm;
    uint32_t target;
    int picked;  /* --only */
    int gateway; /* gateway commands (make_gw_flow): the frozen engine runs behind an adapter */
} flow;

/* A flow's name and sizes, and its frame buffer (room for every record at its largest). */
static void flow_start(flow *f, const char *name, uint32_t target, uint64_t warm, uint64_t n)
{
    f->name = name;
    f->n = n;
    f->warm = warm;
    f->target = target;
    f->buf = malloc((warm + n) * TF_OFL_MAX_FRAME);
    if (!f->buf)
        die("flow buffer", TF_E_NOMEM);
}

static void make_flow(flow *f, const char *name, uint32_t mix, uint32_t target, uint64_t warm,
                      uint64_t n)
{
    tf_engine_flow_config fc = {.size = sizeof fc, .mix = mix, .seed = 7, .target_orders = target};
    tf_engine_flow *g;
    ext_codec = 0;
    int rc = tf_engine_flow_open(&fc, &g);
    if (rc)
        die("flow", rc);
    flow_start(f, name, target, warm, n);
    size_t off = 0;
    tf_ofl_msg m;
    for (uint64_t i = 0; i < warm + n; i++) {
        if (i == warm)
            f->warm_end = off;
        tf_engine_flow_next(g, &m);
        rc = frame_encode(f->buf + off, TF_OFL_MAX_FRAME, &m);
        if (rc < 0)
            die("encode", rc);
        off += (size_t)rc;
    }
    f->len = off;
    f->gateway = 0;
    tf_engine_flow_close(g);
}

/* ---- the measured path: decode, apply, encode the events ------------------------------------ */

typedef struct out_buf {
    uint8_t *p;
    size_t len, cap;
    uint64_t bytes;
} out_buf;

static int encode_events(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    out_buf *o = ctx;
    for (size_t i = 0; i < n; i++) {
        if (o->len + TF_OFL_MAX_FRAME > o->cap)
            o->len = 0; /* a ring: the consumer is assumed to keep up */
        int rc = frame_encode(o->p + o->len, TF_OFL_MAX_FRAME, &ev[i]);
        if (rc < 0)
            return rc;
        o->len += (size_t)rc;
        o->bytes += (uint64_t)rc;
    }
    return 0;
}

typedef struct runner {
    tf_engine *e;
    base_engine *b; /* the frozen engine, when the runner runs it instead */
    tf_ofl_msg ev[64];
    tf_engine_sink sink;
    out_buf out;
} runner;

static void runner_open2(runner *r, uint32_t max_orders, int base)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = max_orders};
    r->e = NULL;
    r->b = NULL;
    int rc = base ? base_engine_create(&cfg, &r->b) : tf_engine_create(&cfg, &r->e);
    if (rc)
        die("create", rc);
    r->out.cap = 1 << 20;
    r->out.p = malloc(r->out.cap);
    r->out.len = 0;
    r->sink = (tf_engine_sink){.ev = r->ev, .cap = 64, .flush = encode_events, .ctx = &r->out};
}

static void runner_open(runner *r, uint32_t max_orders)
{
    runner_open2(r, max_orders, 0);
}

static void runner_close(runner *r)
{
    tf_engine_destroy(r->e);
    base_engine_destroy(r->b);
    free(r->out.p);
}

/* One record; `base` is a constant at every call, so each engine gets its own loop. */
static inline __attribute__((always_inline)) size_t step2(runner *r, const uint8_t *p, size_t avail,
                                                          int base)
{
    tf_ofl_msg m;
    int len = frame_decode(p, avail, &m);
    if (len < 0)
        die("decode", len);
    r->sink.n = 0;
    int rc = base ? base_engine_apply(r->b, &m, &r->sink) : tf_engine_apply(r->e, &m, &r->sink);
    if (rc < 0)
        die("apply", rc);
    if (r->sink.n && (rc = encode_events(&r->out, r->ev, r->sink.n)) < 0)
        die("encode event", rc);
    return (size_t)len;
}

static size_t step(runner *r, const uint8_t *p, size_t avail)
{
    return step2(r, p, avail, 0);
}

/* --no-batch: today's engine takes one command per tf_engine_apply in the timed rounds, as the
 * frozen one does; by default it takes BATCH decoded commands per tf_engine_apply_batch (the
 * same events, in the same order, through the same sink). */
static int no_batch;
#define BATCH 16

static void run_range(runner *r, const uint8_t *p, size_t len)
{
    for (size_t off = 0; off < len;)
        off += step2(r, p + off, len - off, 0);
}

/* The timed path of today's engine: decode up to BATCH records, apply them as one batch, encode
 * what the sink still holds. Not inlined, so that `valgrind --tool=callgrind
 * --toggle-collect=run_range_batch` counts the timed rounds alone (one call a round). */
__attribute__((noinline)) static void run_range_batch(runner *r, const uint8_t *p, size_t len)
{
    if (no_batch) {
        run_range(r, p, len);
        return;
    }
    tf_ofl_msg m[BATCH];
    int rcs[BATCH];
    for (size_t off = 0; off < len;) {
        size_t k = 0;
        for (; k < BATCH && off < len; k++) {
            int n = frame_decode(p + off, len - off, &m[k]);
            if (n < 0)
                die("decode", n);
            off += (size_t)n;
        }
        r->sink.n = 0;
        int rc = tf_engine_apply_batch(r->e, m, k, &r->sink, rcs);
        for (size_t i = 0; i < k && rc >= 0; i++)
            rc = rcs[i] < 0 ? rcs[i] : rc;
        if (rc < 0)
            die("apply", rc);
        if (r->sink.n && (rc = encode_events(&r->out, r->ev, r->sink.n)) < 0)
            die("encode event", rc);
    }
}

static void run_range_base(runner *r, const uint8_t *p, size_t len)
{
    for (size_t off = 0; off < len;)
        off += step2(r, p + off, len - off, 1);
}

/* ---- the gate ------------------------------------------------------------------------------- */

/* The model and the fast engine on the first `n` records: every event byte for byte, and the
 * state hash every 1,000 records. */
static void gate_model(const flow *f, uint64_t n)
{
    ext_codec = f->gateway;
    static const uint64_t one = 1;
    em_model *m;
    tf_engine *e;
    uint32_t max_orders = f->target * 4 + 1024;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = max_orders};
    if (em_create(&one, 1, max_orders, &m) || tf_engine_create(&cfg, &e))
        die("gate create", 0);
    static tf_ofl_msg ev[1 << 16];
    size_t off = 0;
    for (uint64_t i = 0; i < n && off < f->len; i++) {
        tf_ofl_msg cmd;
        int len = frame_decode(f->buf + off, f->len - off, &cmd);
        off += (size_t)len;
        tf_engine_sink sink = {.ev = ev, .cap = 1 << 16};
        int a = tf_engine_apply(e, &cmd, &sink);
        size_t mn;
        int b = em_apply(m, &cmd, NULL, 0, &mn);
        const tf_ofl_msg *mev = em_last_events(m, &mn);
        int same = a == b && mn == sink.n;
        for (size_t k = 0; same && k < mn; k++) {
            uint8_t x[TF_OFL_MAX_FRAME], y[TF_OFL_MAX_FRAME];
            int lx = frame_encode(x, sizeof x, &ev[k]);
            int ly = frame_encode(y, sizeof y, &mev[k]);
            same = lx == ly && lx > 0 && !memcmp(x, y, (size_t)lx);
        }
        if (same && (i % 1000 == 999 || i + 1 == n))
            same = tf_engine_state_hash(e) == em_state_hash(m);
        if (!same) {
            fprintf(stderr,
                    "bench_engine: GATE FAILED: %s record %" PRIu64 ": model and engine differ\n",
                    f->name, i);
            exit(1);
        }
    }
    em_destroy(m);
    tf_engine_destroy(e);
    printf("gate: %s: model == engine on the first %" PRIu64 " records (events byte for byte, "
           "hash every 1,000)\n",
           f->name, n);
}

/* The hash of a whole run, and of a snapshot at the middle + the tail: they must agree. */
static uint64_t gate_snapshot(const flow *f)
{
    ext_codec = f->gateway;
    runner a, b;
    uint32_t max_orders = f->target * 4 + 1024;
    runner_open(&a, max_orders);
    size_t mid = f->warm_end + (f->len - f->warm_end) / 2;
    /* cut at a frame boundary */
    size_t off = 0;
    while (off < mid)
        off += step(&a, f->buf + off, f->len - off);
    uint64_t cap = tf_engine_snapshot_size(a.e), len;
    uint8_t *img = malloc(cap);
    int rc = tf_engine_snapshot_write(a.e, img, cap, &len);
    if (rc)
        die("snapshot write", rc);
    run_range(&a, f->buf + off, f->len - off);
    runner_open(&b, max_orders); /* its sink and buffers; the engine comes from the image */
    tf_engine_destroy(b.e);
    if ((rc = tf_engine_snapshot_read(img, len, NULL, &b.e)))
        die("snapshot read", rc);
    run_range(&b, f->buf + off, f->len - off);
    uint64_t ha = tf_engine_state_hash(a.e), hb = tf_engine_state_hash(b.e);
    if (ha != hb) {
        fprintf(stderr, "bench_engine: GATE FAILED: %s: snapshot + tail hash differs\n", f->name);
        exit(1);
    }
    free(img);
    runner_close(&a);
    runner_close(&b);
    char h[19];
    tf_engine_format_hash(ha, h);
    printf("gate: %s: full run == snapshot at the middle + tail (%s)\n", f->name, h);
    return ha;
}

/* The frozen engine and today's on every record of the flow (warm-up included): the same return
 * code, the same events byte for byte, the same state hash every 1,000 records and at the end.
 * The flows hold OFL1 commands only (the frozen engine knows no others). */
static void gate_base(const flow *f)
{
    ext_codec = f->gateway;
    static const uint64_t one = 1;
    uint32_t max_orders = f->target * 4 + 1024;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = max_orders};
    tf_engine *e;
    base_engine *b;
    if (tf_engine_create(&cfg, &e) || base_engine_create(&cfg, &b))
        die("gate create", 0);
    static tf_ofl_msg ev[1 << 16], bev[1 << 16];
    uint64_t i = 0;
    for (size_t off = 0; off < f->len; i++) {
        tf_ofl_msg cmd;
        int len = frame_decode(f->buf + off, f->len - off, &cmd);
        if (len < 0)
            die("decode", len);
        off += (size_t)len;
        tf_engine_sink s1 = {.ev = ev, .cap = 1 << 16}, s2 = {.ev = bev, .cap = 1 << 16};
        int x = tf_engine_apply(e, &cmd, &s1), y = base_engine_apply(b, &cmd, &s2);
        int same = x == y && s1.n == s2.n;
        for (size_t k = 0; same && k < s1.n; k++) {
            uint8_t p[TF_OFL_MAX_FRAME], q[TF_OFL_MAX_FRAME];
            int lp = frame_encode(p, sizeof p, &ev[k]);
            int lq = frame_encode(q, sizeof q, &bev[k]);
            same = lp == lq && lp > 0 && !memcmp(p, q, (size_t)lp);
        }
        if (same && (i % 1000 == 999 || off == f->len))
            same = tf_engine_state_hash(e) == base_engine_state_hash(b);
        if (!same) {
            fprintf(stderr,
                    "bench_engine: GATE FAILED: %s record %" PRIu64
                    ": the frozen engine and today's differ\n",
                    f->name, i);
            exit(1);
        }
    }
    tf_engine_destroy(e);
    base_engine_destroy(b);
    printf("gate: %s: frozen engine == today's on all %" PRIu64 " records (codes, events byte "
           "for byte, hash every 1,000)\n",
           f->name, i);
}

/* ---- gateway flows: orders named by client ids only ----------------------------------------- */

/* A gateway's command stream (issue 24): Order (GTC, IOC, FOK, market IOC), Cancel and
 * ReplaceByClient, all naming orders by (account, client order id). Generated like the
 * exchange-core mix (a shadow engine, so that a Cancel or a ReplaceByClient names a live order;
 * the same price model: most orders a few ticks from a drifting mid, aggressive ones crossing by
 * up to 3 ticks), with the proportions of a gw_mix in percent. */
typedef struct gw_mix {
    uint32_t gtc, ioc, fok, market, cancel; /* cumulative thresholds; the rest: replaces */
} gw_mix;

/* ~ the exchange-core proportions with a gateway's order types: 7% GTC, 3% IOC, 1% FOK, 2%
 * market IOC, 6% Cancel, 81% ReplaceByClient */
static const gw_mix GW_MIX = {7, 10, 11, 13, 19};
/* IOC-heavy: 35% GTC, 40% IOC, 5% FOK, 5% market IOC, 10% Cancel, 5% ReplaceByClient */
static const gw_mix IOC_MIX = {35, 75, 80, 85, 95};

typedef struct gw_key {
    uint64_t account, coid;
} gw_key;

typedef struct gw_gen {
    tf_engine *shadow;
    uint64_t rng, seq, coid;
    int64_t mid;
    uint32_t spread, target;
    gw_key *live; /* candidates (some may have died since) */
    uint32_t n_live, cap_live;
    tf_ofl_msg ev[64];
    tf_engine_sink sink;
} gw_gen;

static int drop_events(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    (void)ctx;
    (void)ev;
    (void)n;
    return 0;
}

static uint32_t gw_below(gw_gen *g, uint32_t n)
{
    uint64_t x = g->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    g->rng = x;
    return (uint32_t)(((x >> 32) * n) >> 32);
}

static int gw_pick(gw_gen *g, tf_engine_order *o, uint32_t *slot)
{
    while (g->n_live) {
        uint32_t i = gw_below(g, g->n_live);
        if (tf_engine_find_client(g->shadow, g->live[i].account, g->live[i].coid, o) == 1) {
            *slot = i;
            return 1;
        }
        g->live[i] = g->live[--g->n_live];
    }
    return 0;
}

static void gw_remember(gw_gen *g, uint64_t account, uint64_t coid)
{
    if (g->n_live == g->cap_live) {
        uint32_t k = 0;
        tf_engine_order o;
        for (uint32_t i = 0; i < g->n_live; i++)
            if (tf_engine_find_client(g->shadow, g->live[i].account, g->live[i].coid, &o) == 1)
                g->live[k++] = g->live[i];
        g->n_live = k;
        if (k == g->cap_live)
            return;
    }
    g->live[g->n_live++] = (gw_key){account, coid};
}

static int64_t gw_passive(gw_gen *g, int side)
{
    uint32_t a = gw_below(g, g->spread), b = gw_below(g, g->spread);
    int64_t off = 1 + (int64_t)((uint64_t)a * b / g->spread);
    return side == TF_OFL_BUY ? g->mid - off : g->mid + off;
}

static int64_t gw_aggressive(gw_gen *g, int side)
{
    int64_t off = (int64_t)gw_below(g, 4);
    return side == TF_OFL_BUY ? g->mid + off : g->mid - off;
}

static void gw_next(gw_gen *g, const gw_mix *mx, tf_ofl_msg *m)
{
    enum { GTC, IOC, FOK, MKT, CANCEL, REPLACE } op;
    uint32_t r = gw_below(g, 100);
    op = r < mx->gtc      ? GTC
         : r < mx->ioc    ? IOC
         : r < mx->fok    ? FOK
         : r < mx->market ? MKT
         : r < mx->cancel ? CANCEL
                          : REPLACE;
    tf_engine_counters k;
    tf_engine_get_counters(g->shadow, &k);
    uint64_t live = k.resting_orders;
    if (op == CANCEL && live < g->target)
        op = GTC;
    else if (op == GTC && live > g->target + g->target / 8)
        op = CANCEL;
    if (gw_below(g, 64) == 0)
        g->mid += gw_below(g, 2) ? 1 : -1;
    tf_engine_order o;
    uint32_t slot = 0;
    if ((op == CANCEL || op == REPLACE) && !gw_pick(g, &o, &slot))
        op = GTC;
    uint64_t seq = ++g->seq;
    int side = (int)gw_below(g, 2);
    uint64_t account = 1 + gw_below(g, 1000);
    memset(m, 0, sizeof *m);
    m->journal_seq = seq - 1;
    if (op == CANCEL) {
        m->kind = TF_OFX_CANCEL;
        m->cancel = (tf_ofx_cancel){seq, o.account_id, o.client_order_id};
    } else if (op == REPLACE) {
        m->kind = TF_OFX_REPLACE_BY_CLIENT;
        m->replace_by_client = (tf_ofx_replace_by_client){
            .command_seq = seq,
            .account_id = o.account_id,
            .client_order_id = o.client_order_id,
            .new_client_order_id = ++g->coid,
            .price = gw_below(g, 33) ? gw_passive(g, o.side) : gw_aggressive(g, o.side),
            .quantity = o.remaining};
        g->live[slot].coid = g->coid;
    } else {
        m->kind = TF_OFX_ORDER;
        m->order = (tf_ofx_order){.command_seq = seq,
                                  .account_id = account,
                                  .client_order_id = ++g->coid,
                                  .instrument_id = 1,
                                  .side = (uint8_t)side};
        if (op == MKT) {
            m->order.type = TF_OFX_MARKET;
            m->order.tif = TF_OFX_IOC;
            m->order.quantity = 1 + gw_below(g, 150);
        } else {
            m->order.tif = op == GTC ? TF_OFX_GTC : op == IOC ? TF_OFX_IOC : TF_OFX_FOK;
            m->order.price =
                op == GTC && gw_below(g, 20) ? gw_passive(g, side) : gw_aggressive(g, side);
            m->order.quantity = 1 + gw_below(g, 100);
        }
    }
    g->sink.n = 0;
    tf_engine_apply(g->shadow, m, &g->sink);
    if (op == GTC) {
        tf_engine_order x;
        if (tf_engine_find_client(g->shadow, account, g->coid, &x) == 1)
            gw_remember(g, account, g->coid);
    }
}

static void make_gw_flow(flow *f, const char *name, const gw_mix *mx, uint32_t target,
                         uint64_t warm, uint64_t n)
{
    static const uint64_t one = 1;
    gw_gen g = {.rng = 0x9E3779B97F4A7C15ull * 11 ^ 0xD1B54A32D192ED03ull, .target = target};
    g.spread = target * 2 / 3 + 2;
    g.mid = 1000000 + (int64_t)g.spread;
    g.cap_live = target * 4 + 1024;
    g.live = malloc(g.cap_live * sizeof *g.live);
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = g.cap_live};
    if (!g.live || tf_engine_create(&cfg, &g.shadow))
        die("gateway flow", TF_E_NOMEM);
    g.sink = (tf_engine_sink){.ev = g.ev, .cap = 64, .flush = drop_events};
    ext_codec = 1;
    flow_start(f, name, target, warm, n);
    size_t off = 0;
    tf_ofl_msg m;
    for (uint64_t i = 0; i < warm + n; i++) {
        if (i == warm)
            f->warm_end = off;
        gw_next(&g, mx, &m);
        int rc = frame_encode(f->buf + off, TF_OFL_MAX_FRAME, &m);
        if (rc < 0)
            die("encode", rc);
        off += (size_t)rc;
    }
    f->len = off;
    f->gateway = 1;
    tf_engine_destroy(g.shadow);
    free(g.live);
}

/* ---- the frozen engine behind a gateway adapter --------------------------------------------- */

/* How a gateway drives the frozen engine, which knows no client-id operations beyond
 * CancelByClient, no time in force and no execution reports: it keeps a copy of every live
 * order (account, client id, engine id, remaining) in a table by client key and a table by
 * engine id, translates each command (IOC: NewLimit + CancelByOrder of the remainder; FOK: a
 * depth walk first, then as IOC, or a local cancel; market: NewMarket; Cancel and
 * ReplaceByClient through the client-key table), and builds each maker's report from a Trade
 * through the id table (the maker's client id and remaining). What the tables cost is the work
 * issue 24 moved into the engine. */
typedef struct ad_order {
    uint64_t account, coid, id, remaining;
} ad_order;

typedef struct adapter {
    base_engine *b;
    tf_engine_sink *sink;
    out_buf *out;
    ad_order *ord; /* [cap + 1], 0 is none */
    uint32_t *by_key, *by_id;
    uint32_t free_ord, fresh_ord;
    uint64_t mask;
    int shift;
    uint64_t seq;
    /* the command being translated */
    uint64_t taker_id, taker_coid, taker_filled;
    int replaced;
    /* the gate: a hash of every report (maker coid, taker coid, price, quantity, maker
     * remaining), in order */
    int gate;
    uint64_t report_hash;
    tf_engine_level *depth; /* FOK's walk */
} adapter;

static inline uint64_t ad_mix(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0xff51afd7ed558ccdull ^ b;
    h ^= h >> 29;
    return h * 0xc4ceb9fe1a85ec53ull ^ (h >> 32);
}

static inline uint64_t ad_home(const adapter *a, uint64_t h)
{
    return (h * 0x9E3779B97F4A7C15ull) >> a->shift;
}

static inline uint64_t ad_hkey(const ad_order *o)
{
    return ad_mix(o->account, o->coid);
}

static inline uint64_t ad_hid(const ad_order *o)
{
    return o->id;
}

static void ad_put(adapter *a, uint32_t *t, uint64_t h, uint32_t x)
{
    uint64_t i = ad_home(a, h);
    while (t[i])
        i = (i + 1) & a->mask;
    t[i] = x;
}

/* Backward-shift deletion of x (present), hash h; hf the hash of an entry for this table. */
static void ad_del(adapter *a, uint32_t *t, uint64_t h, uint32_t x,
                   uint64_t (*hf)(const ad_order *))
{
    uint64_t i = ad_home(a, h);
    while (t[i] != x)
        i = (i + 1) & a->mask;
    for (uint64_t j = i;;) {
        j = (j + 1) & a->mask;
        uint32_t v = t[j];
        if (!v)
            break;
        uint64_t k = ad_home(a, hf(&a->ord[v]));
        if (((j - k) & a->mask) >= ((j - i) & a->mask)) {
            t[i] = v;
            i = j;
        }
    }
    t[i] = 0;
}

static uint32_t ad_find_key(const adapter *a, uint64_t account, uint64_t coid)
{
    for (uint64_t i = ad_home(a, ad_mix(account, coid));; i = (i + 1) & a->mask) {
        uint32_t v = a->by_key[i];
        if (!v || (a->ord[v].coid == coid && a->ord[v].account == account))
            return v;
    }
}

static uint32_t ad_find_id(const adapter *a, uint64_t id)
{
    for (uint64_t i = ad_home(a, id);; i = (i + 1) & a->mask) {
        uint32_t v = a->by_id[i];
        if (!v || a->ord[v].id == id)
            return v;
    }
}

static void ad_add(adapter *a, uint64_t account, uint64_t coid, uint64_t id, uint64_t remaining)
{
    uint32_t x = a->free_ord;
    if (x)
        a->free_ord = (uint32_t)a->ord[x].remaining;
    else
        x = a->fresh_ord++;
    a->ord[x] = (ad_order){account, coid, id, remaining};
    ad_put(a, a->by_key, ad_hkey(&a->ord[x]), x);
    ad_put(a, a->by_id, ad_hid(&a->ord[x]), x);
}

static void ad_remove(adapter *a, uint32_t x)
{
    ad_del(a, a->by_key, ad_hkey(&a->ord[x]), x, ad_hkey);
    ad_del(a, a->by_id, ad_hid(&a->ord[x]), x, ad_hid);
    a->ord[x].remaining = a->free_ord;
    a->free_ord = x;
}

static void adapter_open(adapter *a, base_engine *b, tf_engine_sink *sink, out_buf *out,
                         uint32_t max_orders)
{
    memset(a, 0, sizeof *a);
    a->b = b;
    a->sink = sink;
    out->len = 0;
    a->out = out;
    uint64_t cap = 16;
    int bits = 4;
    while (cap < 4ull * max_orders) {
        cap <<= 1;
        bits++;
    }
    a->mask = cap - 1;
    a->shift = 64 - bits;
    a->ord = calloc(max_orders + 2, sizeof *a->ord);
    a->by_key = calloc(cap, sizeof *a->by_key);
    a->by_id = calloc(cap, sizeof *a->by_id);
    a->depth = malloc((size_t)(max_orders + 1) * sizeof *a->depth);
    if (!a->ord || !a->by_key || !a->by_id || !a->depth)
        die("adapter", TF_E_NOMEM);
    a->fresh_ord = 1;
}

static void adapter_close(adapter *a)
{
    free(a->ord);
    free(a->by_key);
    free(a->by_id);
    free(a->depth);
}

/* The frozen engine's events: the books the gateway keeps, then the events encoded (as the
 * measured path of every flow). The sink's flush. */
static int ad_events(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    adapter *a = ctx;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind == TF_OFL_ACCEPTED) {
            a->taker_id = ev[i].accepted.order_id;
        } else if (ev[i].kind == TF_OFL_REPLACED) {
            a->replaced = 1;
        } else if (ev[i].kind == TF_OFL_TRADE) {
            const tf_ofl_trade *t = &ev[i].trade;
            uint32_t x = ad_find_id(a, t->maker_order_id);
            if (!x)
                die("adapter: a trade of an order the gateway does not know", 0);
            ad_order *o = &a->ord[x];
            o->remaining -= t->quantity.lo;
            a->taker_filled += t->quantity.lo;
            if (a->gate) {
                uint64_t w[5] = {o->coid, a->taker_coid, (uint64_t)t->price, t->quantity.lo,
                                 o->remaining};
                for (int k = 0; k < 5; k++)
                    a->report_hash = ad_mix(a->report_hash, w[k]);
            }
            if (!o->remaining)
                ad_remove(a, x);
        }
    }
    return encode_events(a->out, ev, n);
}

static void ad_apply(adapter *a, tf_ofl_msg *m)
{
    a->sink->n = 0;
    int rc = base_engine_apply(a->b, m, a->sink);
    if (rc < 0)
        die("apply (frozen engine)", rc);
    if (a->sink->n && (rc = ad_events(a, a->sink->ev, a->sink->n)) < 0)
        die("encode event", rc);
}

int base_engine_depth(const base_engine *e, uint64_t instrument_id, int side,
                      tf_engine_level *levels, int max);

/* FOK: what the gateway can learn from the frozen engine's depth (which walks every order of
 * each level: it had no level totals): 1 when the acceptable opposite levels hold qty. */
static int ad_fillable(adapter *a, const tf_ofx_order *c)
{
    int opp = c->side ^ 1;
    uint64_t need = c->quantity;
    for (int max = 8;; max *= 8) {
        int n = base_engine_depth(a->b, c->instrument_id, opp, a->depth, max);
        for (int i = 0; i < n; i++) {
            int64_t p = a->depth[i].price;
            if (c->side == TF_OFL_BUY ? p > c->price : p < c->price)
                return 0;
            if (a->depth[i].total >= need)
                return 1;
            need -= a->depth[i].total;
        }
        if (n < max)
            return 0;
        need = c->quantity; /* walk again, deeper */
    }
}

static void ad_command(adapter *a, const tf_ofl_msg *c)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    a->taker_filled = 0;
    a->taker_id = 0;
    if (c->kind == TF_OFX_ORDER) {
        const tf_ofx_order *o = &c->order;
        a->taker_coid = o->client_order_id;
        if (o->tif == TF_OFX_FOK && !ad_fillable(a, o))
            return; /* the gateway reports the kill itself */
        if (o->type == TF_OFX_MARKET) {
            m.kind = TF_OFL_NEW_MARKET;
            m.new_market = (tf_ofl_new_market){.command_seq = ++a->seq,
                                               .account_id = o->account_id,
                                               .client_order_id = o->client_order_id,
                                               .instrument_id = o->instrument_id,
                                               .quantity = {o->quantity, 0},
                                               .side = o->side};
            ad_apply(a, &m);
            return;
        }
        m.kind = TF_OFL_NEW_LIMIT;
        m.new_limit = (tf_ofl_new_limit){.command_seq = ++a->seq,
                                         .account_id = o->account_id,
                                         .client_order_id = o->client_order_id,
                                         .instrument_id = o->instrument_id,
                                         .price = o->price,
                                         .quantity = {o->quantity, 0},
                                         .side = o->side};
        ad_apply(a, &m);
        if (!a->taker_id || a->taker_filled == o->quantity)
            return;
        if (o->tif == TF_OFX_GTC) {
            ad_add(a, o->account_id, o->client_order_id, a->taker_id,
                   o->quantity - a->taker_filled);
            return;
        }
        m.kind = TF_OFL_CANCEL_BY_ORDER; /* IOC, and a FOK that passed the walk */
        m.cancel_by_order = (tf_ofl_cancel_by_order){++a->seq, a->taker_id};
        ad_apply(a, &m);
    } else if (c->kind == TF_OFX_CANCEL) {
        uint32_t x = ad_find_key(a, c->cancel.account_id, c->cancel.client_order_id);
        if (!x)
            return; /* the gateway rejects it itself */
        m.kind = TF_OFL_CANCEL_BY_ORDER;
        m.cancel_by_order = (tf_ofl_cancel_by_order){++a->seq, a->ord[x].id};
        ad_remove(a, x);
        ad_apply(a, &m);
    } else if (c->kind == TF_OFX_REPLACE_BY_CLIENT) {
        const tf_ofx_replace_by_client *r = &c->replace_by_client;
        uint32_t x = ad_find_key(a, r->account_id, r->client_order_id);
        if (!x)
            return;
        ad_order was = a->ord[x];
        uint64_t id = was.id;
        /* out of the tables while the engine replaces it: its own re-match cannot trade it */
        ad_remove(a, x);
        a->taker_coid = r->new_client_order_id;
        m.kind = TF_OFL_REPLACE;
        m.replace = (tf_ofl_replace){.command_seq = ++a->seq,
                                     .order_id = id,
                                     .client_order_id = r->new_client_order_id,
                                     .price = r->price,
                                     .quantity = {r->quantity, 0}};
        a->replaced = 0;
        ad_apply(a, &m);
        if (!a->replaced) /* rejected: as it was */
            ad_add(a, was.account, was.coid, was.id, was.remaining);
        else if (a->taker_filled < r->quantity)
            ad_add(a, r->account_id, r->new_client_order_id, id, r->quantity - a->taker_filled);
    }
}

static void run_range_adapter(adapter *a, const uint8_t *p, size_t len)
{
    for (size_t off = 0; off < len;) {
        tf_ofl_msg m;
        int n = frame_decode(p + off, len - off, &m);
        if (n < 0)
            die("decode", n);
        ad_command(a, &m);
        off += (size_t)n;
    }
}

/* The gate of a gateway flow: today's engine driven by the commands themselves, the frozen one
 * through the adapter, over every record. Compared: every report of a trade in order (maker
 * client id, taker client id, price, quantity, the maker's remaining after it: a Fill's fields,
 * and what the adapter builds from a Trade), and at the end every level of both sides (price,
 * total, orders) and the number of live orders. Order ids and event sequence numbers are not
 * compared (a killed FOK takes an order id and events from today's engine only). */
static void gate_gateway(const flow *f)
{
    ext_codec = f->gateway;
    static const uint64_t one = 1;
    uint32_t max_orders = f->target * 4 + 1024;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = max_orders};
    tf_engine *e;
    base_engine *b = NULL;
    if (tf_engine_create(&cfg, &e) || base_engine_create(&cfg, &b))
        die("gate create", 0);
    static tf_ofl_msg ev[1 << 16], bev[1 << 16];
    tf_engine_sink s1 = {.ev = ev, .cap = 1 << 16};
    tf_engine_sink s2 = {.ev = bev, .cap = 1 << 16, .flush = ad_events};
    out_buf out = {.cap = 1 << 20};
    out.p = malloc(out.cap);
    adapter a;
    adapter_open(&a, b, &s2, &out, max_orders);
    s2.ctx = &a;
    a.gate = 1;
    uint64_t h = 0, fills = 0;
    size_t off = 0;
    for (; off < f->len;) {
        tf_ofl_msg cmd;
        int len = frame_decode(f->buf + off, f->len - off, &cmd);
        if (len < 0)
            die("decode", len);
        off += (size_t)len;
        s1.n = 0;
        if (tf_engine_apply(e, &cmd, &s1) < 0)
            die("apply", 0);
        for (size_t k = 0; k < s1.n; k++)
            if (ev[k].kind == TF_OFX_FILL) {
                const tf_ofx_fill *x = &ev[k].fill;
                uint64_t w[5] = {x->maker_client_order_id, x->taker_client_order_id,
                                 (uint64_t)x->price, x->quantity, x->maker_remaining};
                for (int j = 0; j < 5; j++)
                    h = ad_mix(h, w[j]);
                fills++;
            }
        ad_command(&a, &cmd);
        if (h != a.report_hash) {
            fprintf(stderr,
                    "bench_engine: GATE FAILED: %s: the frozen engine behind the adapter reports "
                    "other trades (by byte offset %zu)\n",
                    f->name, off);
            exit(1);
        }
    }
    tf_engine_counters c1, c2;
    tf_engine_get_counters(e, &c1);
    base_engine_get_counters(b, &c2);
    int same = c1.resting_orders == c2.resting_orders && c1.price_levels == c2.price_levels;
    static tf_engine_level l1[1 << 17], l2[1 << 17];
    for (int side = 0; same && side < 2; side++) {
        int n1 = tf_engine_depth(e, 1, side, l1, 1 << 17);
        int n2 = base_engine_depth(b, 1, side, l2, 1 << 17);
        same = n1 == n2 && n1 >= 0;
        for (int k = 0; same && k < n1; k++)
            same = l1[k].price == l2[k].price && l1[k].total == l2[k].total &&
                   l1[k].orders == l2[k].orders;
    }
    if (!same) {
        fprintf(stderr, "bench_engine: GATE FAILED: %s: the final books differ\n", f->name);
        exit(1);
    }
    printf("gate: %s: today's engine == the frozen one behind a gateway adapter (%" PRIu64
           " fills: client ids, price, quantity, maker remaining; final depth of %" PRIu64
           " levels, %" PRIu64 " orders)\n",
           f->name, fills, c1.price_levels, c1.resting_orders);
    adapter_close(&a);
    free(out.p);
    tf_engine_destroy(e);
    base_engine_destroy(b);
}

/* ---- throughput ----------------------------------------------------------------------------- */

/* One timed round of one engine: a fresh engine, the untimed warm-up, the timed part. */
static uint64_t timed_round(const flow *f, int base, uint64_t *events, int report)
{
    ext_codec = f->gateway;
    runner r;
    runner_open2(&r, f->target * 4 + 1024, base);
    tf_engine_counters c0, c1;
    uint64_t t0, t1;
    if (base && f->gateway) {
        adapter a;
        r.sink.flush = ad_events;
        r.sink.ctx = &a;
        adapter_open(&a, r.b, &r.sink, &r.out, f->target * 4 + 1024);
        run_range_adapter(&a, f->buf, f->warm_end);
        base_engine_get_counters(r.b, &c0);
        t0 = round_ns();
        run_range_adapter(&a, f->buf + f->warm_end, f->len - f->warm_end);
        t1 = round_ns();
        base_engine_get_counters(r.b, &c1);
        adapter_close(&a);
    } else if (base) {
        run_range_base(&r, f->buf, f->warm_end);
        base_engine_get_counters(r.b, &c0);
        t0 = round_ns();
        run_range_base(&r, f->buf + f->warm_end, f->len - f->warm_end);
        t1 = round_ns();
        base_engine_get_counters(r.b, &c1);
    } else {
        run_range(&r, f->buf, f->warm_end);
        tf_engine_get_counters(r.e, &c0);
        t0 = round_ns();
        run_range_batch(&r, f->buf + f->warm_end, f->len - f->warm_end);
        t1 = round_ns();
        tf_engine_get_counters(r.e, &c1);
    }
    *events = c1.events - c0.events;
    if (report)
        printf("  %s: %" PRIu64 " records timed, %" PRIu64 " events, %" PRIu64 " trades, %" PRIu64
               " resting, %" PRIu64 " levels at the end\n",
               f->name, f->n, *events, c1.trades - c0.trades, c1.resting_orders, c1.price_levels);
    runner_close(&r);
    return t1 - t0;
}

/* Today's engine and the frozen one, rounds interleaved (base first in even rounds, today's
 * first in odd ones) so that a change of machine load hits both. */
static void throughput(const flow *f)
{
    uint64_t ns[32], bns[32], ratio_x1000[32];
    uint64_t events = 0, bevents = 0;
    for (int k = 0; k < rounds; k++) {
        if (k & 1) {
            ns[k] = timed_round(f, 0, &events, 0);
            bns[k] = timed_round(f, 1, &bevents, 0);
        } else {
            bns[k] = timed_round(f, 1, &bevents, 0);
            ns[k] = timed_round(f, 0, &events, k == 0);
        }
        ratio_x1000[k] = bns[k] * 1000 / (ns[k] ? ns[k] : 1);
    }
    if (!f->gateway && events != bevents) {
        fprintf(stderr, "bench_engine: GATE FAILED: %s: event counts differ\n", f->name);
        exit(1);
    }
    qsort(ns, (size_t)rounds, sizeof ns[0], cmp_u64);
    qsort(bns, (size_t)rounds, sizeof bns[0], cmp_u64);
    qsort(ratio_x1000, (size_t)rounds, sizeof ratio_x1000[0], cmp_u64);
    double best = (double)ns[0] / (double)f->n, med = (double)ns[rounds / 2] / (double)f->n;
    double bbest = (double)bns[0] / (double)f->n, bmed = (double)bns[rounds / 2] / (double)f->n;
    double pair = (double)ratio_x1000[rounds / 2] / 1000.0;
    printf("| %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2fx | %.2fx |\n", f->name, best, med,
           1e3 / best, 1e3 / med, 1e3 / bbest, 1e3 / bmed, bmed / med, pair);
    json_row("{\"section\":\"throughput\",\"flow\":\"%s\",\"records\":%" PRIu64
             ",\"events\":%" PRIu64 ",\"ns_per_record_min\":%.2f,\"ns_per_record_median\":%.2f,"
             "\"mrecords_per_s_max\":%.3f,\"mrecords_per_s_median\":%.3f,\"rounds\":%d,"
             "\"base_mrecords_per_s_max\":%.3f,\"base_mrecords_per_s_median\":%.3f,"
             "\"speedup_median\":%.3f,\"speedup_paired_median\":%.3f}",
             f->name, f->n, events, best, med, 1e3 / best, 1e3 / med, rounds, 1e3 / bbest,
             1e3 / bmed, bmed / med, pair);
}

/* ---- latency -------------------------------------------------------------------------------- */

#define SUB_BITS 6 /* 64 buckets per power of two: 1 ns wide between 64 and 128 ns */
#define SUB (1 << SUB_BITS)
#define NB (64 * SUB)

static int bucket(uint64_t v)
{
    if (v < SUB)
        return (int)v;
    int e = 63 - __builtin_clzll(v); /* v in [2^e, 2^(e+1)), e >= SUB_BITS */
    int sub = (int)((v >> (e - SUB_BITS)) & (SUB - 1));
    return (e - SUB_BITS + 1) * SUB + sub;
}

static uint64_t bucket_top(int b)
{
    if (b < SUB)
        return (uint64_t)b;
    int e = b / SUB + SUB_BITS - 1, sub = b % SUB;
    return ((uint64_t)(SUB + sub + 1) << (e - SUB_BITS)) - 1;
}

static uint64_t pct(const uint64_t *h, uint64_t total, double p)
{
    uint64_t want = (uint64_t)((double)total * p), seen = 0;
    for (int b = 0; b < NB; b++) {
        seen += h[b];
        if (seen > want)
            return bucket_top(b);
    }
    return bucket_top(NB - 1);
}

/* The driver alone (the step replaced by nothing): what this machine's clock reads, timer
 * interrupts and hypervisor exits add to every percentile, whatever the engine does. */
static int noop_floor;

static void latency(const flow *f, double rate)
{
    ext_codec = f->gateway;
    runner r;
    runner_open(&r, f->target * 4 + 1024);
    run_range(&r, f->buf, f->warm_end);
    static uint64_t hist[NB];
    memset(hist, 0, sizeof hist);
    uint64_t n = (uint64_t)(rate * (quick ? 0.2 : 1.0));
    if (n > f->n)
        n = f->n;
    uint64_t skip = n / 10, total = 0, maxv = 0;
    double period = 1e9 / rate / g_bclk.ns_per_tick; /* in clock readings */
    const uint8_t *p = f->buf + f->warm_end;
    size_t avail = f->len - f->warm_end;
    uint64_t t0 = bclk_now() + bclk_ticks(1000);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t due = t0 + (uint64_t)((double)i * period);
        uint64_t t = bclk_now();
        while (t < due)
            t = bclk_now();
        if (!noop_floor) {
            size_t len = step(&r, p, avail);
            p += len;
            avail -= len;
        }
        uint64_t lat = (uint64_t)bclk_ns(bclk_end() - due);
        if (i >= skip) {
            hist[bucket(lat)]++;
            total++;
            if (lat > maxv)
                maxv = lat;
        }
    }
    runner_close(&r);
    double ps[] = {0.5, 0.9, 0.99, 0.999, 0.9999};
    uint64_t v[5];
    for (int k = 0; k < 5; k++)
        v[k] = pct(hist, total, ps[k]);
    printf("| %s | %.0f K/s%s | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64
           " | %" PRIu64 " | %" PRIu64 " |\n",
           f->name, rate / 1e3, noop_floor ? " (driver alone, no engine)" : "", total, v[0], v[1],
           v[2], v[3], v[4], maxv);
    json_row("{\"section\":\"%s\",\"flow\":\"%s\",\"offered_per_s\":%.0f,\"samples\":%" PRIu64
             ",\"p50_ns\":%" PRIu64 ",\"p90_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64
             ",\"p999_ns\":%" PRIu64 ",\"p9999_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 "}",
             noop_floor ? "latency_floor" : "latency", f->name, rate, total, v[0], v[1], v[2], v[3],
             v[4], maxv);
}

/* ---- replay from a journal file -------------------------------------------------------------- */

static void replay_file(const flow *f, const char *dir, uint64_t want_hash)
{
    ext_codec = f->gateway;
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/bench_engine_%d.ofl", dir, (int)getpid());
    unlink(path);
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE};
    tf_journal *j;
    int rc = tf_journal_open(path, &jo, &j, NULL);
    if (rc)
        die(path, rc);
    for (size_t off = 0; off < f->len;) {
        tf_ofl_msg m;
        int len = frame_decode(f->buf + off, f->len - off, &m);
        if ((rc = tf_journal_append(j, &m, NULL)))
            die("append", rc);
        off += (size_t)len;
    }
    if ((rc = tf_journal_close(j)))
        die("journal close", rc);
    uint64_t ns[32];
    uint64_t hash = 0;
    for (int k = 0; k < rounds; k++) {
        uint64_t t0 = now_ns();
        tf_journal_map map;
        if ((rc = tf_journal_map_open(path, &map)))
            die("map", rc);
        runner r;
        runner_open(&r, f->target * 4 + 1024);
        tf_journal_reader rd;
        tf_journal_reader_init(&rd, map.data, map.len);
        static tf_ofl_msg msgs[256];
        int n;
        while ((n = tf_journal_reader_next_batch(&rd, msgs, 256)) > 0)
            for (int i = 0; i < n; i++) {
                r.sink.n = 0;
                tf_engine_apply(r.e, &msgs[i], &r.sink);
                if (r.sink.n)
                    encode_events(&r.out, r.ev, r.sink.n);
            }
        hash = tf_engine_state_hash(r.e);
        ns[k] = now_ns() - t0;
        runner_close(&r);
        tf_journal_map_close(&map);
        if (n < 0)
            die("journal walk", n);
    }
    unlink(path);
    if (hash != want_hash) {
        fprintf(stderr, "bench_engine: GATE FAILED: replay from the file gives another hash\n");
        exit(1);
    }
    qsort(ns, (size_t)rounds, sizeof ns[0], cmp_u64);
    uint64_t recs = f->warm + f->n;
    double best = (double)recs / ((double)ns[0] / 1e9),
           med = (double)recs / ((double)ns[rounds / 2] / 1e9);
    printf("replay from a journal file (page cache warm; map + walk with CRC + apply + encode "
           "events), %s, %" PRIu64 " records: %.2f M/s best, %.2f M/s median; same hash as "
           "the in-memory run\n",
           f->name, recs, best / 1e6, med / 1e6);
    json_row("{\"section\":\"replay_file\",\"flow\":\"%s\",\"records\":%" PRIu64
             ",\"records_per_s_max\":%.0f,\"records_per_s_median\":%.0f}",
             f->name, recs, best, med);
}

/* ---- snapshots ------------------------------------------------------------------------------ */

static void snapshots(const char *dir, uint32_t n_orders)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = n_orders + 1024};
    tf_engine *e;
    int rc = tf_engine_create(&cfg, &e);
    if (rc)
        die("create", rc);
    tf_ofl_msg ev[4];
    tf_engine_sink sink = {.ev = ev, .cap = 4};
    uint64_t x = 88172645463325252ull;
    for (uint32_t i = 0; i < n_orders; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int side = (int)(x & 1);
        int64_t off = 1 + (int64_t)((x >> 8) % 20000);
        tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
        m.new_limit = (tf_ofl_new_limit){.command_seq = i + 1,
                                         .account_id = 1 + (x >> 40) % 1000,
                                         .client_order_id = i + 1,
                                         .instrument_id = 1,
                                         .price = side ? 1000000 + off : 1000000 - off,
                                         .quantity = {1 + (x >> 20) % 100, 0},
                                         .side = (uint8_t)side};
        sink.n = 0;
        tf_engine_apply(e, &m, &sink);
    }
    uint64_t cap = tf_engine_snapshot_size(e), len;
    uint8_t *img = malloc(cap);
    uint64_t t0 = now_ns();
    if ((rc = tf_engine_snapshot_write(e, img, cap, &len)))
        die("snapshot write", rc);
    uint64_t t1 = now_ns();
    tf_engine *b;
    if ((rc = tf_engine_snapshot_read(img, len, NULL, &b)))
        die("snapshot read", rc);
    uint64_t t2 = now_ns();
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/bench_engine_%d.tfs", dir, (int)getpid());
    if ((rc = tf_engine_snapshot_save(e, path)))
        die("snapshot save", rc);
    uint64_t t3 = now_ns();
    tf_engine *c;
    if ((rc = tf_engine_snapshot_load(path, NULL, &c)))
        die("snapshot load", rc);
    uint64_t t4 = now_ns();
    unlink(path);
    if (tf_engine_state_hash(b) != tf_engine_state_hash(e) ||
        tf_engine_state_hash(c) != tf_engine_state_hash(e)) {
        fprintf(stderr, "bench_engine: GATE FAILED: a loaded snapshot gives another hash\n");
        exit(1);
    }
    tf_engine_counters k;
    tf_engine_get_counters(e, &k);
    printf("snapshot of %" PRIu64 " resting orders on %" PRIu64 " levels (%.1f MB): write to "
           "memory %.1f ms, read + rebuild %.1f ms, save to a file (fsync + rename) %.1f ms, "
           "load from the file %.1f ms; hashes equal\n",
           k.resting_orders, k.price_levels, (double)len / 1e6, (double)(t1 - t0) / 1e6,
           (double)(t2 - t1) / 1e6, (double)(t3 - t2) / 1e6, (double)(t4 - t3) / 1e6);
    json_row("{\"section\":\"snapshot\",\"resting_orders\":%" PRIu64 ",\"bytes\":%" PRIu64
             ",\"write_ms\":%.2f,\"read_ms\":%.2f,\"save_ms\":%.2f,\"load_ms\":%.2f}",
             k.resting_orders, len, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6,
             (double)(t3 - t2) / 1e6, (double)(t4 - t3) / 1e6);
    free(img);
    tf_engine_destroy(e);
    tf_engine_destroy(b);
    tf_engine_destroy(c);
}

int main(int argc, char **argv)
{
    const char *out = "build/report/engine.json", *dir = NULL, *clock_name = "tsc";
    int pin = 0;
    const bench_opt opts[] = {
        {"--quick", BENCH_OPT_FLAG, &quick, NULL,
         "flows 20 times shorter, at most 2 rounds (default: full size)"},
        {"--compare", BENCH_OPT_FLAG, &compare_only, NULL,
         "the gates and the throughput table alone (default: every section)"},
        {"--cpu-clock", BENCH_OPT_FLAG, &cpu_clock, NULL,
         "time the throughput rounds on the thread's CPU clock (default: wall)"},
        {"--no-batch", BENCH_OPT_FLAG, &no_batch, NULL,
         "today's engine one command at a time too (default: 16 at a time)"},
        {"--pin", BENCH_OPT_INT, &pin, "CPU", "the CPU to run on (default 0)"},
        {"--rounds", BENCH_OPT_INT, &rounds, "R",
         "throughput rounds (1..31, another value: 5; default 5)"},
        {"--only", BENCH_OPT_STR, &only, "TEXT",
         "the flows whose name contains TEXT (default: every flow)"},
        {"--clock", BENCH_OPT_STR, &clock_name, "tsc|monotonic",
         "the latency driver's clock (default tsc, where the CPU has one)"},
        {"--dir", BENCH_OPT_STR, &dir, "DIR",
         "where the replay's and snapshots' files go (default: OUT.json's directory)"},
    };
    bench_args args =
        BENCH_ARGS_OPERANDS(opts, "[OUT.json]", "the JSON rows (default build/report/engine.json)");
    bench_args_parse(&args, argc, argv, &out, 1);
    if (strcmp(clock_name, "tsc") && strcmp(clock_name, "monotonic"))
        bench_args_refuse(&args, "--clock tsc or monotonic, not %s", clock_name);
    int want_tsc = !strcmp(clock_name, "tsc");
    if (rounds < 1 || rounds > 31)
        rounds = 5;
    if (quick)
        rounds = rounds > 2 ? 2 : rounds;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin, &set);
    int pinned = sched_setaffinity(0, sizeof set, &set) == 0;
    char dirbuf[4096];
    if (bench_out_dir(out, dir, dirbuf, sizeof dirbuf)) {
        fprintf(stderr, "bench_engine: cannot create %s: %s\n", dirbuf, strerror(errno));
        return 2;
    }
    dir = dirbuf;
    json = fopen(out, "w");
    if (!json)
        fprintf(stderr, "bench_engine: %s: %s (JSON not written)\n", out, strerror(errno));
    bench_machine_print(stdout, "bench_engine: ");
    printf("pinned to CPU %d: %s; rounds: %d%s\n", pin, pinned ? "yes" : "no", rounds,
           quick ? " (--quick)" : "");
    if (!compare_only) {
        bclk_init(want_tsc);
        if (g_bclk.tsc)
            printf("latency clock: the invariant TSC, %.4f ns a tick (calibrated against "
                   "CLOCK_MONOTONIC)\n\n",
                   g_bclk.ns_per_tick);
        else
            printf("latency clock: CLOCK_MONOTONIC (%s)\n\n", g_bclk.why_not);
    } else
        printf("\n");
    if (json)
        fputs("{\"rows\":[", json);

    uint64_t scale = quick ? 20 : 1;
    flow ec = {0}, o1 = {0}, deep = {0}, gw = {0}, ioc = {0};
    static const char *const names[] = {"exchange-core mix, ~1k resting", "OFL1 cycle",
                                        "exchange-core mix, deep book ~100k resting",
                                        "gateway mix by client ids, ~1k resting",
                                        "IOC-heavy gateway mix, ~1k resting"};
    flow *all[] = {&ec, &o1, &deep, &gw, &ioc};
    int n_all = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n_all; i++) { /* only the flows --only names are made */
        all[i]->name = names[i];
        all[i]->picked = !only || strstr(names[i], only) != NULL;
    }
    if (ec.picked)
        make_flow(&ec, names[0], TF_ENGINE_MIX_EXCHANGE_CORE, 1000, 100000, 5000000 / scale);
    if (o1.picked)
        make_flow(&o1, names[1], TF_ENGINE_MIX_OFL1, 1000, 100000, 5000000 / scale);
    if (deep.picked)
        make_flow(&deep, names[2], TF_ENGINE_MIX_EXCHANGE_CORE, 100000, 1500000 / (quick ? 10 : 1),
                  4000000 / scale);
    if (gw.picked)
        make_gw_flow(&gw, names[3], &GW_MIX, 1000, 100000, 5000000 / scale);
    if (ioc.picked)
        make_gw_flow(&ioc, names[4], &IOC_MIX, 1000, 100000, 5000000 / scale);

    for (int i = 0; i < n_all; i++)
        if (all[i]->picked)
            gate_model(all[i], i == 2 ? (quick ? 2000 : 20000) : quick ? 20000 : 200000);
    for (int i = 0; i < n_all; i++)
        if (all[i]->picked) {
            if (all[i]->gateway)
                gate_gateway(all[i]);
            else
                gate_base(all[i]);
        }
    uint64_t h_ec = 0;
    if (!compare_only)
        for (int i = 0; i < n_all; i++)
            if (all[i]->picked) {
                uint64_t h = gate_snapshot(all[i]);
                if (all[i] == &ec)
                    h_ec = h;
            }

    printf("\nthroughput on one core: decode + match + encode events, from memory; today's "
           "engine and the frozen one of before issue 24 (base), rounds interleaved; clock: %s. "
           "Gateway mixes: today's engine takes the gateway commands, the frozen one runs behind "
           "a gateway adapter (its own client-id and order-id tables, IOC as NewLimit + "
           "CancelByOrder, FOK as a depth walk first); a record is one gateway command. Today's "
           "engine takes %s\n\n",
           cpu_clock ? "thread CPU time" : "wall",
           no_batch ? "one command per tf_engine_apply, as the frozen one (--no-batch)"
                    : "the decoded records 16 at a time (tf_engine_apply_batch, the same events); "
                      "the frozen one one at a time (it has no batch call)");
    printf("| flow | ns/record min | ns/record median | M records/s max | M records/s median | "
           "base M/s max | base M/s median | speedup (medians) | speedup (median of paired "
           "rounds) |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_all; i++)
        if (all[i]->picked)
            throughput(all[i]);
    if (compare_only)
        goto done;

    printf("\nlatency, open loop, today's engine (ns from due time to events written; first 10%% "
           "excluded; clock: %s)\n\n",
           g_bclk.tsc ? "TSC" : "CLOCK_MONOTONIC");
    printf("| flow | offered | samples | p50 | p90 | p99 | p99.9 | p99.99 | max |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    const double rates[] = {125e3, 250e3, 500e3, 1e6, 2e6, 5e6};
    if (ec.picked)
        for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
            latency(&ec, rates[i]);
    if (gw.picked)
        latency(&gw, 1e6);
    if (ioc.picked)
        latency(&ioc, 1e6);
    if (ec.picked) {
        noop_floor = 1;
        latency(&ec, 1e6);
        noop_floor = 0;
    }

    printf("\n");
    if (ec.picked)
        replay_file(&ec, dir, h_ec);
    snapshots(dir, quick ? 100000 : 1000000);
    printf("\npublished, for comparison (their hardware, their flows): exchange-core 5 M ops/s, "
           "at 1 M/s p50 0.5 us, p99 4 us, p99.9 22 us; CppTrader 9.75 M msg/s; LMAX 6 M "
           "orders/s\n");
done:
    if (json) {
        fputs("\n]}\n", json);
        fclose(json);
        printf("JSON: %s\n", out);
    }
    for (int i = 0; i < n_all; i++)
        free(all[i]->buf);
    return 0;
}
