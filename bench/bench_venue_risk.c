/* Pre-trade risk checks: engine throughput with the venue's risk checks off and on, in one run
 * (docs/benchmarks.md, "Venue: risk checks"). A program, never a test.
 *
 *   bench_venue_risk [--rounds R] [--records N] [--only WAY]
 *
 * One exchange-core flow (tf_engine_flow, 1,000 accounts, about 10,000 resting orders after an
 * untimed warm-up) is encoded once as OFL1 frames and replayed per round through a fresh engine:
 * decode + apply + encode every event, four ways, interleaved round by round:
 *   engine     tf_engine_apply, as bench_engine times it
 *   venue      tfv_apply with no risk config (the venue layer's plain path)
 *   venue+risk tfv_apply with limits for all 1,000 accounts (max_qty, max_notional, a 10% band
 *              around the book, max_open: every rule evaluated, none refusing, so the work after
 *              the checks is the same); the run fails if any command is refused
 *   +stp       the same plus self-trade prevention (cancel-oldest) for every account: matching
 *              changes (orders are canceled instead of trading), so it is shown, not compared
 * Min and median CPU ns per record (the thread's CPU time) over the rounds; the cost is
 * (venue+risk - engine) / engine, of the medians, of the minima, and paired (the median over
 * rounds of each round's ratio): on a loaded machine the best rounds are the least disturbed by
 * other processes' cache and core sharing, and a round's two ways run back to back.
 * --only WAY (0-3) runs one way alone, e.g. under `perf stat` to count its instructions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "tollfree/engine.h"
#include "tollfree/orderflow.h"
#include "venue/venue.h"

enum { ENGINE, VENUE, RISK, STP, N_WAYS };
static const char *const way_name[N_WAYS] = {"engine", "venue", "venue+risk", "venue+risk+stp"};

static uint64_t now_ns(void)
{
    struct timespec ts;
    /* the thread's CPU time, not the wall clock: on a shared machine the time other processes
     * hold the CPU is not counted against either side */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_venue_risk: %s: %s\n", what, rc ? tf_strerror(rc) : "failed");
    exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct out_buf {
    uint8_t p[1 << 20];
    size_t len;
    uint64_t refused;
} out_buf;

static int encode_events(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    out_buf *o = ctx;
    for (size_t i = 0; i < n; i++) {
        if (o->len + TF_OFL_MAX_FRAME > sizeof o->p)
            o->len = 0;
        int rc = tfv_encode_event(o->p + o->len, TF_OFL_MAX_FRAME, &ev[i]);
        if (rc < 0)
            return rc;
        o->len += (size_t)rc;
        o->refused += ev[i].kind == TFV_VENUE_REJECTED;
    }
    return 0;
}

typedef struct runner {
    tf_engine *e;
    tfv_venue *v;
    int way;
    tf_ofl_msg ev[64];
    tf_engine_sink sink;
    out_buf *out;
} runner;

static void runner_open(runner *r, int way, uint32_t max_orders)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = max_orders};
    int rc = tf_engine_create(&cfg, &r->e);
    if (!rc)
        rc = tfv_open(r->e, &r->v);
    if (rc)
        die("create", rc);
    r->way = way;
    r->out = calloc(1, sizeof *r->out);
    r->sink = (tf_engine_sink){.ev = r->ev, .cap = 64, .flush = encode_events, .ctx = r->out};
    if (way < RISK)
        return;
    tfv_risk *risk = tfv_venue_risk(r->v);
    for (uint64_t a = 1; a <= 1000; a++) {
        tfv_limits l = {.account = a,
                        .max_qty = 1000,
                        .max_notional = 1000000000000ull,
                        .band = 1000, /* 10% */
                        .band_unit = TFV_BAND_BPS,
                        .max_open = 100000,
                        .stp = way == STP ? TF_ENGINE_STP_CANCEL_OLDEST : 0};
        if ((rc = tfv_risk_apply_limits(risk, &l)))
            die("limits", rc);
    }
}

static void runner_close(runner *r)
{
    tfv_close(r->v);
    tf_engine_destroy(r->e);
    free(r->out);
}

static void run_range(runner *r, const uint8_t *p, size_t len)
{
    tfv_msg m;
    memset(&m, 0, sizeof m); /* a plain record: no session, no connection (conn 0) */
    for (size_t off = 0; off < len;) {
        int n = tf_ofl_frame_decode(p + off, len - off, &m.ofl);
        if (n < 0)
            die("decode", n);
        off += (size_t)n;
        r->sink.n = 0;
        int rc;
        if (r->way == ENGINE) {
            rc = tf_engine_apply(r->e, &m.ofl, &r->sink);
        } else {
            m.kind = m.ofl.kind;
            rc = tfv_apply(r->v, &m, &r->sink);
        }
        if (rc < 0)
            die("apply", rc);
        if (r->sink.n && (rc = encode_events(r->out, r->ev, r->sink.n)) < 0)
            die("encode", rc);
    }
}

int main(int argc, char **argv)
{
    int rounds = 7, only = -1;
    uint64_t n = 2000000, warm = 200000;
    const bench_opt opts[] = {
        {"--rounds", BENCH_OPT_INT, &rounds, "R",
         "rounds, the ways interleaved (1..64; default 7)"},
        {"--records", BENCH_OPT_U64, &n, "N",
         "timed records per round, after 200000 untimed (>= 1000; default 2000000)"},
        {"--only", BENCH_OPT_INT, &only, "WAY",
         "one way alone: 0 engine, 1 venue, 2 venue+risk, 3 venue+risk+stp\n"
         "(default: all four)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (only >= N_WAYS) /* a negative one: every way, as before */
        bench_args_refuse(&args, "--only 0..3, not %d", only);
    if (rounds < 1 || rounds > 64 || n < 1000)
        die("--rounds 1..64, --records >= 1000", 0);
    uint32_t target = 10000;
    tf_engine_flow_config fc = {.size = sizeof fc, .seed = 7, .target_orders = target};
    tf_engine_flow *g;
    int rc = tf_engine_flow_open(&fc, &g);
    if (rc)
        die("flow", rc);
    uint8_t *buf = malloc((warm + n) * TF_OFL_MAX_FRAME);
    if (!buf)
        die("buffer", TF_E_NOMEM);
    size_t off = 0, warm_end = 0;
    for (uint64_t i = 0; i < warm + n; i++) {
        tf_ofl_msg m;
        if (i == warm)
            warm_end = off;
        tf_engine_flow_next(g, &m);
        if ((rc = tf_ofl_frame_encode(buf + off, TF_OFL_MAX_FRAME, &m)) < 0)
            die("encode", rc);
        off += (size_t)rc;
    }
    tf_engine_flow_close(g);
    uint64_t ns[N_WAYS][64], hash[N_WAYS] = {0}, refused[N_WAYS] = {0};
    for (int k = 0; k < rounds; k++)
        for (int w = 0; w < N_WAYS; w++) {
            if (only >= 0 && w != only)
                continue;
            runner r;
            runner_open(&r, w, target * 4 + 1024);
            run_range(&r, buf, warm_end);
            uint64_t t0 = now_ns();
            run_range(&r, buf + warm_end, off - warm_end);
            ns[w][k] = now_ns() - t0;
            hash[w] = tf_engine_state_hash(r.e);
            refused[w] = r.out->refused;
            runner_close(&r);
        }
    if (only >= 0) { /* the best round (before, round 0's time was printed as the min) */
        qsort(ns[only], (size_t)rounds, sizeof ns[only][0], cmp_u64);
        printf("%s: %.1f ns/record (min of %d)\n", way_name[only], (double)ns[only][0] / (double)n,
               rounds);
        return 0;
    }
    if (hash[VENUE] != hash[ENGINE] || refused[RISK])
        die("gate: the venue or the checks changed the outcome", 0);
    printf("exchange-core flow, %" PRIu64 " records timed after %" PRIu64
           " warm-up, ~%u resting orders, 1,000 accounts; %d rounds interleaved\n\n",
           n, warm, target, rounds);
    printf("| path | ns/record min | ns/record median | cost vs engine (median) | cost vs engine "
           "(min) | cost vs engine (paired) |\n");
    printf("|---|---|---|---|---|---|\n");
    double base = 0, base_min = 0, paired[N_WAYS];
    for (int w = 0; w < N_WAYS; w++) {
        /* paired: the median over rounds of this way's time over the engine's in the same round
         * (run back to back, so a slow spell of the machine tends to hit both) */
        double ratio[64];
        for (int k = 0; k < rounds; k++)
            ratio[k] = (double)ns[w][k] / (double)ns[ENGINE][k];
        qsort(ratio, (size_t)rounds, sizeof ratio[0], cmp_double);
        paired[w] = 100 * (ratio[rounds / 2] - 1);
    }
    for (int w = 0; w < N_WAYS; w++) {
        qsort(ns[w], (size_t)rounds, sizeof ns[w][0], cmp_u64);
        double mn = (double)ns[w][0] / (double)n, med = (double)ns[w][rounds / 2] / (double)n;
        if (w == ENGINE) {
            base = med;
            base_min = mn;
        }
        printf("| %s | %.1f | %.1f | %+.1f%% | %+.1f%% | %+.1f%% |\n", way_name[w], mn, med,
               100 * (med - base) / base, 100 * (mn - base_min) / base_min, paired[w]);
    }
    printf("\nstate hash: engine == venue == venue+risk: %s; refused with risk on: %" PRIu64 "\n",
           hash[RISK] == hash[ENGINE] ? "yes" : "NO", refused[RISK]);
    free(buf);
    return 0;
}
