/* Order-engine benchmarks (issue 9): throughput on one core, open-loop latency, replay from a
 * journal file, snapshot write/load. A program, never a test: it fails only when the
 * equivalence gate fails (the model and the fast engine disagree, or a replay path gives
 * another hash), and then it times nothing.
 *
 *   bench_engine [--quick] [--compare] [--cpu-clock] [--pin CPU] [--rounds R] [--dir DIR]
 *                [OUT.json]
 *
 * Throughput is measured for today's engine and for the frozen engine of bench_engine_base/
 * (before issue 24) on the same flows in the same run, rounds interleaved (base, new, new, base,
 * ...), after a gate that both give the same return codes, the same events byte for byte and
 * the same state hashes on every record of every flow. --compare runs only the gates and that
 * throughput table; --cpu-clock times those rounds on the thread's CPU clock instead of the wall
 * clock (for a machine shared with other work).
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
 * run are excluded. Percentiles come from a log-bucketed histogram (16 buckets per power of two,
 * <= 4.4% relative error). */
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
#include "bench_machine.h"
#include "engine_model.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

static int quick, compare_only, cpu_clock;
static int rounds = 5;
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

static void die(const char *what, int rc)
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

/* ---- flows ---------------------------------------------------------------------------------- */

typedef struct flow {
    const char *name;
    uint8_t *buf; /* stream frames, back to back */
    size_t len;
    size_t warm_end; /* byte offset where the timed part starts */
    uint64_t n, warm;
    uint32_t target;
} flow;

static void make_flow(flow *f, const char *name, uint32_t mix, uint32_t target, uint64_t warm,
                      uint64_t n)
{
    tf_engine_flow_config fc = {.size = sizeof fc, .mix = mix, .seed = 7, .target_orders = target};
    tf_engine_flow *g;
    int rc = tf_engine_flow_open(&fc, &g);
    if (rc)
        die("flow", rc);
    f->name = name;
    f->n = n;
    f->warm = warm;
    f->target = target;
    f->buf = malloc((warm + n) * TF_OFL_MAX_FRAME);
    if (!f->buf)
        die("flow buffer", TF_E_NOMEM);
    size_t off = 0;
    tf_ofl_msg m;
    for (uint64_t i = 0; i < warm + n; i++) {
        if (i == warm)
            f->warm_end = off;
        tf_engine_flow_next(g, &m);
        rc = tf_ofl_frame_encode(f->buf + off, TF_OFL_MAX_FRAME, &m);
        if (rc < 0)
            die("encode", rc);
        off += (size_t)rc;
    }
    f->len = off;
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
        int rc = tf_ofl_frame_encode(o->p + o->len, TF_OFL_MAX_FRAME, &ev[i]);
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
    int len = tf_ofl_frame_decode(p, avail, &m);
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

static void run_range(runner *r, const uint8_t *p, size_t len)
{
    for (size_t off = 0; off < len;)
        off += step2(r, p + off, len - off, 0);
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
        int len = tf_ofl_frame_decode(f->buf + off, f->len - off, &cmd);
        off += (size_t)len;
        tf_engine_sink sink = {.ev = ev, .cap = 1 << 16};
        int a = tf_engine_apply(e, &cmd, &sink);
        size_t mn;
        int b = em_apply(m, &cmd, NULL, 0, &mn);
        const tf_ofl_msg *mev = em_last_events(m, &mn);
        int same = a == b && mn == sink.n;
        for (size_t k = 0; same && k < mn; k++) {
            uint8_t x[TF_OFL_MAX_FRAME], y[TF_OFL_MAX_FRAME];
            int lx = tf_ofl_frame_encode(x, sizeof x, &ev[k]);
            int ly = tf_ofl_frame_encode(y, sizeof y, &mev[k]);
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
        int len = tf_ofl_frame_decode(f->buf + off, f->len - off, &cmd);
        if (len < 0)
            die("decode", len);
        off += (size_t)len;
        tf_engine_sink s1 = {.ev = ev, .cap = 1 << 16}, s2 = {.ev = bev, .cap = 1 << 16};
        int x = tf_engine_apply(e, &cmd, &s1), y = base_engine_apply(b, &cmd, &s2);
        int same = x == y && s1.n == s2.n;
        for (size_t k = 0; same && k < s1.n; k++) {
            uint8_t p[TF_OFL_MAX_FRAME], q[TF_OFL_MAX_FRAME];
            int lp = tf_ofl_frame_encode(p, sizeof p, &ev[k]);
            int lq = tf_ofl_frame_encode(q, sizeof q, &bev[k]);
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

/* ---- throughput ----------------------------------------------------------------------------- */

/* One timed round of one engine: a fresh engine, the untimed warm-up, the timed part. */
static uint64_t timed_round(const flow *f, int base, uint64_t *events, int report)
{
    runner r;
    runner_open2(&r, f->target * 4 + 1024, base);
    tf_engine_counters c0, c1;
    uint64_t t0, t1;
    if (base) {
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
        run_range(&r, f->buf + f->warm_end, f->len - f->warm_end);
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
    if (events != bevents) {
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

#define SUB 16
#define NB (64 * SUB)

static int bucket(uint64_t v)
{
    if (v < SUB)
        return (int)v;
    int e = 63 - __builtin_clzll(v); /* v in [2^e, 2^(e+1)) */
    int sub = (int)((v >> (e - 4)) & (SUB - 1));
    return (e - 3) * SUB + sub;
}

static uint64_t bucket_top(int b)
{
    if (b < SUB)
        return (uint64_t)b;
    int e = b / SUB + 3, sub = b % SUB;
    return ((uint64_t)(SUB + sub + 1) << (e - 4)) - 1;
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
    runner r;
    runner_open(&r, f->target * 4 + 1024);
    run_range(&r, f->buf, f->warm_end);
    static uint64_t hist[NB];
    memset(hist, 0, sizeof hist);
    uint64_t n = (uint64_t)(rate * (quick ? 0.2 : 1.0));
    if (n > f->n)
        n = f->n;
    uint64_t skip = n / 10, total = 0, maxv = 0;
    double period = 1e9 / rate;
    const uint8_t *p = f->buf + f->warm_end;
    size_t avail = f->len - f->warm_end;
    uint64_t t0 = now_ns() + 1000;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t due = t0 + (uint64_t)((double)i * period);
        uint64_t t = now_ns();
        while (t < due)
            t = now_ns();
        if (!noop_floor) {
            size_t len = step(&r, p, avail);
            p += len;
            avail -= len;
        }
        uint64_t lat = now_ns() - due;
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
    printf("| %.0f K/s%s | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64
           " | %" PRIu64 " | %" PRIu64 " |\n",
           rate / 1e3, noop_floor ? " (driver alone, no engine)" : "", total, v[0], v[1], v[2],
           v[3], v[4], maxv);
    json_row("{\"section\":\"%s\",\"flow\":\"%s\",\"offered_per_s\":%.0f,\"samples\":%" PRIu64
             ",\"p50_ns\":%" PRIu64 ",\"p90_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64
             ",\"p999_ns\":%" PRIu64 ",\"p9999_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 "}",
             noop_floor ? "latency_floor" : "latency", f->name, rate, total, v[0], v[1], v[2], v[3],
             v[4], maxv);
}

/* ---- replay from a journal file -------------------------------------------------------------- */

static void replay_file(const flow *f, const char *dir, uint64_t want_hash)
{
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
        int len = tf_ofl_frame_decode(f->buf + off, f->len - off, &m);
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
    const char *out = "build/report/engine.json", *dir = NULL;
    int pin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--compare"))
            compare_only = 1;
        else if (!strcmp(argv[i], "--cpu-clock"))
            cpu_clock = 1;
        else if (!strcmp(argv[i], "--pin") && i + 1 < argc)
            pin = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (argv[i][0] != '-')
            out = argv[i];
        else {
            fprintf(stderr, "usage: bench_engine [--quick] [--compare] [--cpu-clock] [--pin CPU] "
                            "[--rounds R] [--dir DIR] [OUT.json]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 31)
        rounds = 5;
    if (quick)
        rounds = rounds > 2 ? 2 : rounds;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin, &set);
    int pinned = sched_setaffinity(0, sizeof set, &set) == 0;
    char dirbuf[4096];
    if (!dir) {
        snprintf(dirbuf, sizeof dirbuf, "%s", out);
        char *slash = strrchr(dirbuf, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dirbuf, sizeof dirbuf, ".");
        dir = dirbuf;
    }
    json = fopen(out, "w");
    if (!json)
        fprintf(stderr, "bench_engine: %s: %s (JSON not written)\n", out, strerror(errno));
    bench_machine_print(stdout, "bench_engine: ");
    printf("pinned to CPU %d: %s; rounds: %d%s\n\n", pin, pinned ? "yes" : "no", rounds,
           quick ? " (--quick)" : "");
    if (json)
        fputs("{\"rows\":[", json);

    uint64_t scale = quick ? 20 : 1;
    flow ec, o1, deep;
    make_flow(&ec, "exchange-core mix, ~1k resting", TF_ENGINE_MIX_EXCHANGE_CORE, 1000, 100000,
              5000000 / scale);
    make_flow(&o1, "OFL1 cycle", TF_ENGINE_MIX_OFL1, 1000, 100000, 5000000 / scale);
    make_flow(&deep, "exchange-core mix, deep book ~100k resting", TF_ENGINE_MIX_EXCHANGE_CORE,
              100000, 1500000 / (quick ? 10 : 1), 4000000 / scale);

    gate_model(&ec, quick ? 20000 : 200000);
    gate_model(&o1, quick ? 20000 : 100000);
    gate_model(&deep, quick ? 2000 : 20000);
    gate_base(&ec);
    gate_base(&o1);
    gate_base(&deep);
    uint64_t h_ec = compare_only ? 0 : gate_snapshot(&ec);
    if (!compare_only) {
        gate_snapshot(&o1);
        gate_snapshot(&deep);
    }

    printf("\nthroughput on one core: decode + match + encode events, from memory; today's "
           "engine and the frozen one of before issue 24 (base), rounds interleaved; clock: %s\n\n",
           cpu_clock ? "thread CPU time" : "wall");
    printf("| flow | ns/record min | ns/record median | M records/s max | M records/s median | "
           "base M/s max | base M/s median | speedup (medians) | speedup (median of paired "
           "rounds) |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    throughput(&ec);
    throughput(&o1);
    throughput(&deep);
    if (compare_only)
        goto done;

    printf("\nlatency, open loop, %s (ns from due time to events written; first 10%% "
           "excluded)\n\n",
           ec.name);
    printf("| offered | samples | p50 | p90 | p99 | p99.9 | p99.99 | max |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    const double rates[] = {125e3, 250e3, 500e3, 1e6, 2e6, 5e6};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        latency(&ec, rates[i]);
    noop_floor = 1;
    latency(&ec, 1e6);
    noop_floor = 0;

    printf("\n");
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
    free(ec.buf);
    free(o1.buf);
    free(deep.buf);
    return 0;
}
