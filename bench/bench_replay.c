/* Replay of a command journal from a file (a program, never a test): the CRC-checked batch walk
 * on the applying thread (as `engine run` did before issue 24) against the walk a few batches
 * ahead on a second thread (tf_journal_pump, as `engine run` and the service's start do now),
 * in one run, alternating, on the same mapped file (in the page cache) and a fresh engine each
 * round; plus the walk alone (tf_journal_scan) for scale, and the apply alone: the same records
 * decoded once into memory beforehand and applied from there, one tf_engine_apply at a time and
 * in batches of 256 (tf_engine_apply_batch, as the pump's batches are: the ceiling of any walk +
 * apply on this engine). Every round must end with the same state hash, else the program fails.
 *
 * Usage: bench_replay JOURNAL.ofl [--rounds N] [--instruments LIST] [--max-orders N] [--only MODE]
 * (--only 1, 2 or 3: that mode's rounds alone, after one round of mode 0 for the hash, to profile
 * it; make one with `tollfree engine gen --count 5000000 --seed 1 flow.ofl`). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int drop(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    *(uint64_t *)ctx += n;
    (void)ev;
    return 0;
}

typedef struct cfg {
    uint64_t ids[TF_ENGINE_MAX_INSTRUMENTS];
    uint32_t n_ids, max_orders;
} cfg;

static tf_engine *fresh(const cfg *c)
{
    tf_engine_config ec = {.size = sizeof ec,
                           .instruments = c->ids,
                           .n_instruments = c->n_ids,
                           .max_orders = c->max_orders};
    tf_engine *e = NULL;
    if (tf_engine_create(&ec, &e))
        return NULL;
    return e;
}

/* The records decoded once, for the apply-alone rounds. */
static tf_ofl_msg *g_all;
static uint64_t g_n_all;

static int decode_all(const tf_journal_map *m, uint64_t records)
{
    tf_journal_reader r;
    g_all = malloc((records ? records : 1) * sizeof *g_all);
    if (!g_all || tf_journal_reader_init(&r, m->data, m->len))
        return -1;
    int n;
    while (g_n_all < records &&
           (n = tf_journal_reader_next_batch(
                &r, g_all + g_n_all, records - g_n_all < 256 ? (int)(records - g_n_all) : 256)) > 0)
        g_n_all += (uint64_t)n;
    return 0;
}

/* msgs[0..n) through tf_engine_apply_batch (what `engine run` and a start do with a pump's
 * batch): the first error among them, else 0. */
static int apply_all(tf_engine *e, const tf_ofl_msg *msgs, size_t n, tf_engine_sink *sink)
{
    static int rcs[256];
    int rc = tf_engine_apply_batch(e, msgs, n, sink, rcs);
    for (size_t i = 0; i < n && rc >= 0; i++)
        rc = rcs[i] < 0 ? rcs[i] : 0;
    return rc;
}

/* One replay (mode 0: walk + apply on one thread, 1: the pump, its batches applied as batches, 2:
 * the apply alone, one command at a time, 3: the apply alone in batches of 256); returns
 * seconds (< 0 on error), the state hash and the record count. */
static double replay(const cfg *c, const tf_journal_map *m, int pumped, uint64_t *hash,
                     uint64_t *records)
{
    tf_engine *e = fresh(c);
    static tf_ofl_msg ev[4096], msgs[256];
    uint64_t events = 0;
    tf_engine_sink sink = {.ev = ev, .cap = 4096, .flush = drop, .ctx = &events};
    tf_journal_reader r;
    if (!e || tf_journal_reader_init(&r, m->data, m->len))
        return -1;
    uint64_t n_rec = 0;
    int rc = 0;
    double t0 = now_s();
    if (pumped == 2) {
        for (uint64_t i = 0; i < g_n_all && rc >= 0; i++, n_rec++)
            rc = tf_engine_apply(e, &g_all[i], &sink);
    } else if (pumped == 3) {
        for (uint64_t i = 0; i < g_n_all && rc >= 0; i += 256) {
            size_t k = g_n_all - i < 256 ? (size_t)(g_n_all - i) : 256;
            rc = apply_all(e, &g_all[i], k, &sink);
            n_rec += k;
        }
    } else if (pumped) {
        tf_journal_pump *p;
        if (tf_journal_pump_open(&r, 256, 0, &p))
            return -1;
        const tf_journal_batch *b;
        while (rc >= 0 && tf_journal_pump_next(p, &b) == 1) {
            rc = apply_all(e, b->msgs, (size_t)b->n, &sink);
            n_rec += (uint64_t)b->n;
        }
        tf_journal_pump_close(p);
    } else {
        int n;
        while (!rc && (n = tf_journal_reader_next_batch(&r, msgs, 256)) > 0)
            for (int i = 0; i < n && rc >= 0; i++, n_rec++)
                rc = tf_engine_apply(e, &msgs[i], &sink);
    }
    double t = now_s() - t0;
    *hash = tf_engine_state_hash(e);
    *records = n_rec;
    tf_engine_destroy(e);
    return rc < 0 ? -1 : t;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static cfg c;
    const char *list = "1", *path = NULL;
    int rounds = 5, only = -1; /* --only MODE: that mode alone (for a profile), after mode 0 */
    c.max_orders = TF_ENGINE_DEFAULT_MAX_ORDERS;
    const bench_opt opts[] = {
        {"--rounds", BENCH_OPT_INT, &rounds, "N",
         "rounds, the modes alternating (1..100; default 5, also for another value)"},
        {"--instruments", BENCH_OPT_STR, &list, "LIST",
         "the engine's instrument ids and ranges, e.g. 1-16,42 (default 1)"},
        {"--max-orders", BENCH_OPT_U32, &c.max_orders, "N",
         "the engine's order capacity (default " BENCH_ARGS_STR(TF_ENGINE_DEFAULT_MAX_ORDERS) ")"},
        {"--only", BENCH_OPT_INT, &only, "MODE",
         "1 (the pump), 2 (the apply alone) or 3 (the apply in batches): that mode's\n"
         "rounds alone, after one round of mode 0 for the hash, to profile it\n"
         "(default: every mode)"},
    };
    bench_args args = BENCH_ARGS(opts, "JOURNAL.ofl");
    if (bench_args_parse(&args, argc, argv, &path, 1) < 1)
        bench_args_refuse(&args, "no journal given (make one with `tollfree engine gen --count "
                                 "5000000 --seed 1 flow.ofl`)");
    if (rounds < 1 || rounds > 100)
        rounds = 5;
    int n = tf_engine_parse_instruments(list, c.ids, TF_ENGINE_MAX_INSTRUMENTS);
    if (n <= 0)
        bench_args_refuse(&args, "bad --instruments %s", list);
    c.n_ids = (uint32_t)n;
    tf_journal_map m;
    if (tf_journal_map_open(path, &m)) {
        perror(path);
        return 1;
    }
    tf_journal_scan_result sr;
    double t0 = now_s();
    tf_journal_scan(m.data, m.len, &sr); /* also brings the file into the page cache */
    t0 = now_s();
    tf_journal_scan(m.data, m.len, &sr);
    double t_scan = now_s() - t0;
    printf("journal %s: %" PRIu64 " records, %" PRIu64 " bytes; walk alone (tf_journal_scan): "
           "%.3f s = %.1f M records/s\n",
           path, sr.records, sr.valid_bytes, t_scan, (double)sr.records / t_scan / 1e6);
    int modes = decode_all(&m, sr.records) == 0 && g_n_all == sr.records ? 4 : 2;
    double ts[4][100];
    uint64_t h0 = 0, recs = 0;
    int bad = 0;
    for (int k = 0; k < rounds; k++)
        for (int pumped = 0; pumped < modes; pumped++) {
            if (only > 0 && pumped != only && (pumped || k)) {
                ts[pumped][k] = 1e9;
                continue;
            }
            uint64_t h, nr;
            double t = replay(&c, &m, pumped, &h, &nr);
            if (t < 0) {
                fprintf(stderr, "replay failed\n");
                return 1;
            }
            if (!k && !pumped) {
                h0 = h;
                recs = nr;
            }
            bad |= h != h0 || nr != recs;
            ts[pumped][k] = t;
        }
    const char *names[4] = {"walk + apply, one thread        ", "walk on a second thread (pump)  ",
                            "apply alone (decoded beforehand)", "apply alone, batches of 256     "};
    double med[4];
    for (int p = 0; p < modes; p++) {
        qsort(ts[p], (size_t)rounds, sizeof ts[p][0], cmp_d);
        med[p] = ts[p][rounds / 2];
        printf("%s: min %.3f s (%.2f M records/s), median %.3f s (%.2f M records/s)\n", names[p],
               ts[p][0], (double)recs / ts[p][0] / 1e6, med[p], (double)recs / med[p] / 1e6);
    }
    printf("pump / one thread, median time: %.3f; state hash %016" PRIx64 " in every round: %s\n",
           med[1] / med[0], h0, bad ? "NO" : "yes");
    tf_journal_map_close(&m);
    free(g_all);
    return bad ? 1 : 0;
}
