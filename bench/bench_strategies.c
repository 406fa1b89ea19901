/* The strategies' sweeps on the default data (a benchmark, never a test).
 *
 *     bench_strategies [--rounds N] [--data PATH] [--plugin PATH]
 *
 * Each built-in sweeps 1,000 combos of the default close (150,000 bars) through tf_sweep_with
 * on 1 and 2 threads, with and without statistics, next to the same combos stepped through the
 * generic path (the built-in's own step and the booking, one combo at a time: what any strategy
 * without a fast path costs). The sample plugin (examples/plugin_sma.c, built as
 * examples/plugin_sma.so) is timed against the same logic compiled into the library (sma_cross's
 * step on the generic path): the cost of being a plugin. Every timed result is checked against
 * tf_sweep_with_reference's raw bits (computed once, untimed). Rounds interleave the rows; each
 * row reports the min and median wall time. The HMA default sweep (80 combos) is timed too, for
 * the same-run ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "bench_machine.h"
#include "tollfree/kernel.h"
#include "tollfree/strategy.h"

#define N_DEFAULT 150000
#define MAX_ROUNDS 32

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct grid {
    const char *name;
    const tf_strategy_def *def;
    double *params;
    int64_t m;
    int64_t stride; /* results checked for combos j % stride == 0 (the reference is slow) */
    double *pnl_ref;
    int64_t *tr_ref;
} grid;

typedef struct row {
    const char *label;
    grid *g;
    const tf_strategy_def *def; /* what runs (a copy of the built-in for "step") */
    int threads, stats;
    double wall[MAX_ROUNDS];
    int n;
} row;

static double *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    double *c = malloc(sizeof(double) * N_DEFAULT);
    size_t got = c ? fread(c, sizeof(double), N_DEFAULT, f) : 0;
    fclose(f);
    if (got != N_DEFAULT) {
        free(c);
        return NULL;
    }
    return c;
}

static double *grid_alloc(int64_t m, uint32_t k)
{
    return malloc(sizeof(double) * (size_t)m * k);
}

/* 1,000 combos per built-in. */
static void make_grids(grid *g)
{
    int64_t j = 0;
    g[0] = (grid){"sma_cross", tf_strategy_builtin("sma_cross"), grid_alloc(1000, 2), 1000, 1, NULL,
                  NULL};
    g[1] = (grid){"ema_cross", tf_strategy_builtin("ema_cross"), grid_alloc(1000, 2), 1000, 1, NULL,
                  NULL};
    for (int f = 2; f < 22; f++)
        for (int s = 30; s < 280; s += 5, j++) {
            g[0].params[2 * j] = g[1].params[2 * j] = f;
            g[0].params[2 * j + 1] = g[1].params[2 * j + 1] = s;
        }
    g[2] = (grid){"donchian", tf_strategy_builtin("donchian"), grid_alloc(1000, 1), 1000, 1, NULL,
                  NULL};
    for (j = 0; j < 1000; j++)
        g[2].params[j] = (double)(j + 1);
    g[3] = (grid){"rsi", tf_strategy_builtin("rsi"), grid_alloc(1000, 3), 1000, 1, NULL, NULL};
    j = 0;
    for (int p = 2; p < 42; p++)
        for (int lo = 10; lo <= 30; lo += 5)
            for (int hi = 65; hi <= 85; hi += 5, j++) {
                g[3].params[3 * j] = p;
                g[3].params[3 * j + 1] = lo;
                g[3].params[3 * j + 2] = hi;
            }
    g[4] = (grid){"bollinger", tf_strategy_builtin("bollinger"), grid_alloc(1000, 2), 1000, 1, NULL,
                  NULL};
    j = 0;
    for (int w = 10; w < 60; w++)
        for (int k = 0; k < 20; k++, j++) {
            g[4].params[2 * j] = w;
            g[4].params[2 * j + 1] = 0.5 + 0.1 * k;
        }
}

static int run_row(row *r, const double *close)
{
    grid *g = r->g;
    double *pnl = malloc(sizeof(double) * (size_t)g->m);
    int64_t *tr = malloc(sizeof(int64_t) * (size_t)g->m);
    tf_stats *st = r->stats ? malloc(sizeof(tf_stats) * (size_t)g->m) : NULL;
    tf_sweep_opts o = {.size = sizeof o, .threads = r->threads, .stats = st};
    double t0 = now();
    int rc = tf_sweep_with(r->def, close, N_DEFAULT, g->params, g->m, pnl, tr, &o);
    double t1 = now();
    for (int64_t j = 0; !rc && j < g->m; j += g->stride)
        if (memcmp(&pnl[j], &g->pnl_ref[j / g->stride], sizeof(double)) ||
            tr[j] != g->tr_ref[j / g->stride])
            rc = -1;
    free(pnl);
    free(tr);
    free(st);
    if (rc) {
        fprintf(stderr, "bench_strategies: %s (%s) failed or differs from the reference: %d\n",
                r->label, g->name, rc);
        return rc;
    }
    r->wall[r->n++] = t1 - t0;
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 3;
    const char *data = "data/default_close.f64", *plugin = "build/examples/plugin_sma.so";
    const bench_opt opts[] = {
        {"--rounds", BENCH_OPT_INT, &rounds, "N",
         "rounds, the rows interleaved (1.." BENCH_ARGS_STR(MAX_ROUNDS) ", another value: 3; "
                                                                        "default 3)"},
        {"--data", BENCH_OPT_STR, &data, "PATH",
         "the close series, raw float64 (default data/default_close.f64)"},
        {"--plugin", BENCH_OPT_STR, &plugin, "PATH",
         "the sample plugin (default build/examples/plugin_sma.so)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 3;
    double *close = load(data);
    if (!close)
        return 1;
    bench_machine_print(stdout, "");
    printf("data: %s (%d bars); rounds: %d; wall time per sweep of the grid\n", data, N_DEFAULT,
           rounds);

    grid g[7];
    make_grids(g);
    /* The generic path of the same logic: a copy of each built-in's def (not the built-in's own
     * address, so tf_sweep_with steps it). */
    static tf_strategy_def step_defs[5];
    for (int b = 0; b < 5; b++) {
        step_defs[b] = *g[b].def;
        step_defs[b].name = "step";
    }
    char msg[512];
    tf_strategy_lib *lib = NULL;
    if (tf_strategy_load(plugin, &lib, msg, sizeof msg)) {
        fprintf(stderr, "bench_strategies: %s (build examples/plugin_sma.c first)\n", msg);
        lib = NULL;
    }
    /* HMA: the default sweep (80 Hull lengths 6..200) through tf_sweep_with. */
    g[5] = (grid){
        "hma (default, 80)", tf_strategy_builtin("hma"), grid_alloc(80, 6), 80, 1, NULL, NULL};
    for (int j = 0; j < 80; j++) {
        int64_t c6[6];
        tf_combo_from_length(6 + (j * 194) / 79, c6);
        for (int q = 0; q < 6; q++)
            g[5].params[6 * j + q] = (double)c6[q];
    }
    int n_grids = 6;
    if (lib) {
        g[6] = g[0];
        g[6].name = "plugin_sma";
        g[6].def = tf_strategy_lib_def(lib);
        n_grids = 7;
    }
    for (int q = 0; q < n_grids; q++) {
        /* The reference steps every bar (donchian's step scans its window, bollinger's sums
         * it): a sample of those grids is checked. */
        g[q].stride = !strcmp(g[q].name, "donchian")    ? 50
                      : !strcmp(g[q].name, "bollinger") ? 10
                                                        : 1;
        int64_t mc = (g[q].m + g[q].stride - 1) / g[q].stride;
        uint32_t k = g[q].def->n_params;
        double *sub = grid_alloc(mc, k);
        for (int64_t j = 0; j < mc; j++)
            memcpy(sub + j * k, g[q].params + j * g[q].stride * k, sizeof(double) * k);
        g[q].pnl_ref = malloc(sizeof(double) * (size_t)mc);
        g[q].tr_ref = malloc(sizeof(int64_t) * (size_t)mc);
        tf_sweep_opts o = {.size = sizeof o, .threads = 2};
        /* The reference is one thread, step by step: the fast paths are checked against it. HMA's
         * and the plugin's own are their tf_sweep_with (equal to it in the tests). */
        int rc = q < 5 ? tf_sweep_with_reference(g[q].def, close, N_DEFAULT, sub, mc, g[q].pnl_ref,
                                                 g[q].tr_ref, &o)
                       : tf_sweep_with(g[q].def, close, N_DEFAULT, sub, mc, g[q].pnl_ref,
                                       g[q].tr_ref, &o);
        free(sub);
        if (rc) {
            fprintf(stderr, "bench_strategies: reference of %s: %d\n", g[q].name, rc);
            return 1;
        }
    }

    row rows[64];
    int n_rows = 0;
    for (int b = 0; b < 5; b++) {
        rows[n_rows++] = (row){"fast, 1 thread", &g[b], g[b].def, 1, 0, {0}, 0};
        rows[n_rows++] = (row){"fast, 2 threads", &g[b], g[b].def, 2, 0, {0}, 0};
        rows[n_rows++] = (row){"fast, 1 thread, stats", &g[b], g[b].def, 1, 1, {0}, 0};
        if (b != 2) /* donchian's step scans its window: minutes per round at 1,000 windows */
            rows[n_rows++] = (row){"step, 1 thread", &g[b], &step_defs[b], 1, 0, {0}, 0};
    }
    rows[n_rows++] = (row){"tf_sweep path, 1 thread", &g[5], g[5].def, 1, 0, {0}, 0};
    if (lib) {
        rows[n_rows++] = (row){"plugin, 1 thread", &g[6], g[6].def, 1, 0, {0}, 0};
        rows[n_rows++] = (row){"plugin, 2 threads", &g[6], g[6].def, 2, 0, {0}, 0};
        rows[n_rows++] = (row){"same step built in, 1 thread", &g[6], &step_defs[0], 1, 0, {0}, 0};
    }
    for (int r = 0; r < rounds; r++)
        for (int q = 0; q < n_rows; q++) {
            int at = (q + r) % n_rows; /* rotate the order, so every row sees the same load */
            if (run_row(&rows[at], close))
                return 1;
        }
    printf("%-20s %-30s %10s %10s\n", "strategy", "path", "min ms", "median ms");
    for (int q = 0; q < n_rows; q++) {
        row *r = &rows[q];
        double s[MAX_ROUNDS];
        memcpy(s, r->wall, sizeof(double) * (size_t)r->n);
        qsort(s, (size_t)r->n, sizeof(double), cmp_d);
        printf("%-20s %-30s %10.1f %10.1f\n", r->g->name, r->label, 1e3 * s[0], 1e3 * s[r->n / 2]);
    }
    bench_machine_print(stdout, "end: ");
    tf_strategy_unload(lib);
    for (int q = 0; q < 6; q++) {
        free(g[q].params);
        free(g[q].pnl_ref);
        free(g[q].tr_ref);
    }
    if (lib) {
        free(g[6].pnl_ref);
        free(g[6].tr_ref);
    }
    free(close);
    return 0;
}
