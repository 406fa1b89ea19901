/* The streaming step's cost per bar, in C, on the default data: one JSON line per Hull length
 * with the median and min-max ns/bar over repetitions (after a warm-up pass), and a check that the
 * stream reproduced the batch sweep's bits for that combo (no figure counts otherwise).
 * usage: bench_stream [DATA.f64] [--reps N] [--lengths L1,L2,...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tollfree/kernel.h"
#include "bench_args.h"
#include "bench_machine.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *path = "data/default_close.f64", *length_list = "6,20,50,100,200";
    char lengths[256]; /* strtok's copy of --lengths */
    int reps = 7;
    const bench_opt opts[] = {
        {"--reps", BENCH_OPT_INT, &reps, "N", "timed passes per length (1..1000; default 7)"},
        {"--lengths", BENCH_OPT_STR, &length_list, "L1,L2,...",
         "the Hull lengths, a combo each (default 6,20,50,100,200)"},
    };
    bench_args args = BENCH_ARGS_OPERANDS(opts, "[DATA.f64]",
                                          "the close series, raw float64 (default "
                                          "data/default_close.f64)");
    bench_args_parse(&args, argc, argv, &path, 1);
    if (reps < 1 || reps > 1000)
        bench_args_refuse(&args, "--reps wants 1..1000");
    snprintf(lengths, sizeof lengths, "%s", length_list);
    bench_machine_print(stdout, NULL);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    int64_t n = bytes / 8;
    double *close = malloc((size_t)n * sizeof(double) + 8);
    if (!close || fread(close, sizeof(double), (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: read failed\n", path);
        return 1;
    }
    fclose(f);
    double *t = malloc(sizeof(double) * (size_t)reps);
    int status = 0;
    for (char *tok = strtok(lengths, ","); tok; tok = strtok(NULL, ",")) {
        int64_t p[6], want_trades, trades;
        double want_pnl, pnl;
        if (tf_combo_from_length(atoll(tok), p)) {
            fprintf(stderr, "bench_stream: bad length %s\n", tok);
            return 2;
        }
        tf_sweep(close, n, p, 1, &want_pnl, &want_trades, NULL);
        tf_strategy *s;
        if (tf_strategy_open(&s, p))
            return 1;
        long long checksum = 0;
        for (int64_t i = 0; i < n; i++) /* warm-up, and the gate */
            checksum += tf_strategy_step(s, close[i]);
        pnl = tf_strategy_pnl(s);
        trades = tf_strategy_trades(s);
        int same = !memcmp(&pnl, &want_pnl, sizeof pnl) && trades == want_trades;
        for (int r = 0; same && r < reps; r++) {
            tf_strategy_reset(s);
            double t0 = now_ns();
            for (int64_t i = 0; i < n; i++)
                checksum += tf_strategy_step(s, close[i]);
            t[r] = (now_ns() - t0) / (double)n;
        }
        tf_strategy_close(s);
        if (!same) {
            printf("{\"L\": %s, \"gate\": \"failed\"}\n", tok);
            status = 1;
            continue;
        }
        qsort(t, (size_t)reps, sizeof(double), cmp_double);
        printf("{\"L\": %lld, \"params\": [%lld, %lld, %lld, %lld, %lld, %lld], \"bars\": %lld, "
               "\"gate\": \"passed\", \"ns_per_bar_median\": %.2f, \"ns_per_bar_min\": %.2f, "
               "\"ns_per_bar_max\": %.2f, \"reps\": %d, \"checksum\": %lld}\n",
               (long long)p[0], (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3],
               (long long)p[4], (long long)p[5], (long long)n, t[reps / 2], t[0], t[reps - 1], reps,
               checksum);
    }
    free(t);
    free(close);
    return status;
}
