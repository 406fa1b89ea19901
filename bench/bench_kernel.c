/* The sweep kernel against itself before issue 12, in the same run (a benchmark, never a test).
 *
 *     bench_kernel [--rounds N] [--quick] [--data PATH]
 *
 * "before" is a frozen copy of the kernel from before issue 12 (bench_kernel_base/, names
 * prefixed base_), "now" is the library. Every timed call is checked: its pnl and trades must
 * equal tf_sweep_reference's raw bits. Rounds interleave before and now in a rotated order, so both
 * see the same load; each row reports min and median wall time and, for one thread, min and median
 * CPU time of the calling thread (which other processes' load does not inflate), and the ratio of
 * the medians. One-thread rows are pinned to the last CPU, two-thread rows to CPUs 0-1. The load
 * average is printed at the start and at the end. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_machine.h"
#include "kernel/kernel_internal.h"
#include "tollfree/kernel.h"

int base_sweep(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
               double *pnl, int64_t *trades, const tf_sweep_opts *opts);

typedef int (*sweep_fn)(const double *, int64_t, const int64_t *, int64_t, double *, int64_t *,
                        const tf_sweep_opts *);

#define MAX_ROUNDS 64

/* The sweep with every statistic on (tf_stats rows), gated against the reference's rows: the
 * "plain" / "+stats" pair of the report measures what the statistics cost. */
static tf_stats *stats_out;
static const tf_stats *stats_want;

static int sweep_with_stats(const double *close, int64_t n_bars, const int64_t *params,
                            int64_t n_combos, double *pnl, int64_t *trades,
                            const tf_sweep_opts *opts)
{
    tf_sweep_opts o = *opts;
    o.stats = stats_out;
    memset(stats_out, 0xA5, sizeof(tf_stats) * (size_t)n_combos);
    int rc = tf_sweep(close, n_bars, params, n_combos, pnl, trades, &o);
    if (!rc && memcmp(stats_out, stats_want, sizeof(tf_stats) * (size_t)n_combos))
        return -1;
    return rc;
}

typedef struct row {
    const char *grid;
    const char *who; /* "before" or "now" */
    sweep_fn fn;
    int threads;
    tf_isa isa;
    const int64_t *params;
    int64_t m;
    double wall[MAX_ROUNDS], cpu[MAX_ROUNDS];
    int n;
} row;

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pin(int threads)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads == 1)
        CPU_SET((int)(ncpu > 1 ? ncpu - 1 : 0), &set);
    else
        for (int c = 0; c < threads && c < ncpu; c++)
            CPU_SET(c, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static double minimum(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double *load_close(const char *path, int64_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    double *c = malloc(sizeof(double) * 150000);
    *n = c ? (int64_t)fread(c, sizeof(double), 150000, f) : 0;
    fclose(f);
    return c;
}

static int64_t *make_grid(int64_t lo, int64_t hi, int64_t m)
{
    int64_t *p = malloc(sizeof(int64_t) * 6 * (size_t)m);
    for (int64_t j = 0; p && j < m; j++)
        tf_combo_from_length(m == 1 ? lo : lo + (j * (hi - lo)) / (m - 1), p + 6 * j);
    return p;
}

/* One timed call; the result must be the gate's bits, every round. */
static int run_row(row *r, const double *close, int64_t n, const double *want_p,
                   const int64_t *want_t, double *pnl, int64_t *trades)
{
    tf_sweep_opts o = {.threads = r->threads, .isa = r->isa};
    pin(r->threads);
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID), w0 = now_s(CLOCK_MONOTONIC);
    int rc = r->fn(close, n, r->params, r->m, pnl, trades, &o);
    double w1 = now_s(CLOCK_MONOTONIC), c1 = now_s(CLOCK_THREAD_CPUTIME_ID);
    if (rc || memcmp(pnl, want_p, sizeof(double) * (size_t)r->m) ||
        memcmp(trades, want_t, sizeof(int64_t) * (size_t)r->m)) {
        fprintf(stderr, "GATE FAILED: %s %s threads=%d isa=%s (rc %d)\n", r->grid, r->who,
                r->threads, tf_isa_name(r->isa), rc);
        return 1;
    }
    r->wall[r->n] = w1 - w0;
    r->cpu[r->n] = c1 - c0;
    r->n++;
    return 0;
}

static row make_row(const char *grid, const char *who, sweep_fn fn, int threads, tf_isa isa,
                    const int64_t *params, int64_t m)
{
    row r;
    memset(&r, 0, sizeof r);
    r.grid = grid;
    r.who = who;
    r.fn = fn;
    r.threads = threads;
    r.isa = isa;
    r.params = params;
    r.m = m;
    return r;
}

static void report(const row *rows, int n_rows)
{
    printf("\n| grid | threads | ISA | kernel | wall min | wall median | thread CPU min | "
           "thread CPU median | speed-up (median wall; CPU) "
           "|\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        char cpu_min[32] = "-", cpu_med[32] = "-", ratio[64] = "";
        if (r->threads == 1) {
            snprintf(cpu_min, sizeof cpu_min, "%.1f ms", 1e3 * minimum(r->cpu, r->n));
            snprintf(cpu_med, sizeof cpu_med, "%.1f ms", 1e3 * median(r->cpu, r->n));
        }
        if (i % 2 == 1) { /* rows come in pairs: before, now */
            const row *b = &rows[i - 1];
            if (r->threads == 1)
                snprintf(ratio, sizeof ratio, "**%.2fx**; %.2fx",
                         median(b->wall, b->n) / median(r->wall, r->n),
                         median(b->cpu, b->n) / median(r->cpu, r->n));
            else
                snprintf(ratio, sizeof ratio, "**%.2fx**",
                         median(b->wall, b->n) / median(r->wall, r->n));
        }
        printf("| %s | %d | %s | %s | %.1f ms | %.1f ms | %s | %s | %s |\n", r->grid, r->threads,
               tf_isa_name(r->isa == TF_ISA_AUTO ? tf_isa_best() : r->isa), r->who,
               1e3 * minimum(r->wall, r->n), 1e3 * median(r->wall, r->n), cpu_min, cpu_med, ratio);
    }
}

int main(int argc, char **argv)
{
    int rounds = 7, quick = 0;
    const char *path = "data/default_close.f64";
    const bench_opt opts[] = {
        {"--rounds", BENCH_OPT_INT, &rounds, "N",
         "rounds, interleaved (held to 1.." BENCH_ARGS_STR(MAX_ROUNDS) "; default 7)"},
        {"--quick", BENCH_OPT_FLAG, &quick, NULL,
         "20,000 bars and a big grid of 800 (default: 150,000 bars, 8,000)"},
        {"--data", BENCH_OPT_STR, &path, "PATH",
         "the close series, raw float64 (default data/default_close.f64)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    bench_machine_print(stdout, "");
    printf("time block: %lld bars per thread, up to 4 threads (from the L2 cache size)\n",
           (long long)tfk_sweep_block_bars());
    int64_t n = 0;
    double *close = load_close(path, &n);
    if (!close || n == 0)
        return 1;
    if (quick)
        n = 20000;
    const int64_t m_def = 80, m_big = quick ? 800 : 8000;
    int64_t *def = make_grid(6, 200, m_def), *big = make_grid(6, 200, m_big);
    double *want_def = malloc(sizeof(double) * (size_t)m_def), *want_big = malloc(8 * m_big);
    int64_t *tdef = malloc(8 * (size_t)m_def), *tbig = malloc(8 * (size_t)m_big);
    double *pnl = malloc(8 * (size_t)m_big);
    int64_t *trades = malloc(8 * (size_t)m_big);
    if (!def || !big || !want_def || !want_big || !tdef || !tbig || !pnl || !trades)
        return 1;
    pin(1);
    tf_stats *stats_ref = malloc(sizeof(tf_stats) * (size_t)m_def);
    stats_out = malloc(sizeof(tf_stats) * (size_t)m_def);
    if (!stats_ref || !stats_out)
        return 1;
    tf_sweep_opts with_stats = {.stats = stats_ref};
    if (tf_sweep_reference(close, n, def, m_def, want_def, tdef, &with_stats))
        return 1;
    stats_want = stats_ref;
    /* The big grid's reference: its rows repeat (one combo per distinct Hull length), so the
     * reference runs once per distinct row. */
    for (int64_t j = 0; j < m_big; j++) {
        if (j > 0 && !memcmp(big + 6 * j, big + 6 * (j - 1), 6 * sizeof(int64_t))) {
            want_big[j] = want_big[j - 1];
            tbig[j] = tbig[j - 1];
        } else if (tf_sweep_reference(close, n, big + 6 * j, 1, want_big + j, tbig + j, NULL)) {
            return 1;
        }
    }

    row rows[16];
    int nr = 0;
    tf_isa isas[2] = {TF_ISA_AVX2, TF_ISA_AUTO};
    int n_isa = tf_isa_best() == TF_ISA_AVX512 && tf_isa_supported(TF_ISA_AVX2) ? 2 : 1;
    if (n_isa == 1)
        isas[0] = TF_ISA_AUTO;
    for (int k = 0; k < n_isa; k++)
        for (int t = 1; t <= 2; t++) {
            rows[nr++] = make_row("default (80)", "before", base_sweep, t, isas[k], def, m_def);
            rows[nr++] = make_row("default (80)", "now", tf_sweep, t, isas[k], def, m_def);
        }
    for (int t = 1; t <= 2; t++) {
        rows[nr++] = make_row("default (80)", "plain", tf_sweep, t, TF_ISA_AUTO, def, m_def);
        rows[nr++] =
            make_row("default (80)", "+stats", sweep_with_stats, t, TF_ISA_AUTO, def, m_def);
    }
    int first_big = nr;
    rows[nr++] = make_row(quick ? "6:200:800" : "6:200:8000", "before", base_sweep, 2, TF_ISA_AUTO,
                          big, m_big);
    rows[nr++] =
        make_row(quick ? "6:200:800" : "6:200:8000", "now", tf_sweep, 2, TF_ISA_AUTO, big, m_big);

    double t_start = now_s(CLOCK_MONOTONIC);
    for (int round = 0; round < rounds; round++) {
        for (int k = 0; k < nr; k++) {
            /* rotate within each before/now pair and across pairs */
            int pair = (k / 2 + round) % (nr / 2), which = (k + round) % 2;
            row *r = &rows[2 * pair + which];
            if (2 * pair >= first_big && round >= (rounds + 1) / 2)
                continue; /* the big grid's "before" takes seconds: half the rounds */
            int bad = 2 * pair >= first_big ? run_row(r, close, n, want_big, tbig, pnl, trades)
                                            : run_row(r, close, n, want_def, tdef, pnl, trades);
            if (bad)
                return 1;
        }
    }
    double load[1] = {-1.0};
    getloadavg(load, 1);
    printf("%d rounds (big grid: %d) in %.1f s, every result bit-identical to the gate; "
           "load average (1 min) at the end: %.2f\n",
           rounds, (rounds + 1) / 2, now_s(CLOCK_MONOTONIC) - t_start, load[0]);
    report(rows, nr);
    printf("\n(\"plain\" / \"+stats\" pairs: the same sweep without and with every statistic "
           "(tf_stats rows, each gated bit for bit against the reference's); their ratio is "
           "plain time / stats time.)\n");
    free(stats_ref);
    free(stats_out);
    free(close);
    free(def);
    free(big);
    free(want_def);
    free(want_big);
    free(tdef);
    free(tbig);
    free(pnl);
    free(trades);
    return 0;
}
