/* The time-aware figures' cost in process (a benchmark, never a test).
 *
 *     bench_timestats [--rounds N] [--data PATH] [--row K]
 *
 * The HMA default sweep (80 Hull lengths 6..200) on the default close (150,000 bars), on 1 and
 * 2 threads: tf_sweep with statistics (what `tollfree sweep` runs), against tf_sweep_time (the
 * same sweep with the time-aware figures of every combo booked in the same pass). Rounds
 * interleave the rows; each row reports the min and median wall time and process CPU time, and
 * the ratio of the medians and of the mins to the plain sweep of the same thread count. Every timed
 * result is checked: the sweep outputs of tf_sweep_time against tf_sweep's raw bits, its figures
 * against the first round's (any thread count). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "bench_machine.h"
#include "tollfree/kernel.h"
#include "tollfree/research.h"

#define M 80
#define MAX_ROUNDS 64

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

int main(int argc, char **argv)
{
    int rounds = 7, only = -1; /* --row K: time row K alone (for a profiler) */
    const char *path = "data/default_close.f64";
    const bench_opt opts[] = {
        {"--rounds", BENCH_OPT_INT, &rounds, "N",
         "rounds, the rows interleaved (1.." BENCH_ARGS_STR(MAX_ROUNDS) "; default 7)"},
        {"--data", BENCH_OPT_STR, &path, "PATH",
         "the close series, raw float64 (default data/default_close.f64)"},
        {"--row", BENCH_OPT_INT, &only, "K",
         "time row K alone (0..3, in the order printed), for a profiler (default: all)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (rounds < 1 || rounds > MAX_ROUNDS)
        bench_args_refuse(&args, "--rounds must be 1..%d", MAX_ROUNDS);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    int64_t n = bytes / 8;
    double *close = malloc(sizeof(double) * (size_t)n);
    if (!close || fread(close, 8, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: short read\n", path);
        return 2;
    }
    fclose(f);
    int64_t params[M * 6];
    for (int j = 0; j < M; j++)
        tf_combo_from_length(6 + (j * 194) / 79, params + 6 * j);

    bench_machine_print(stdout, "");
    printf("HMA default sweep, %d combos x %lld bars, %d rounds interleaved\n", M, (long long)n,
           rounds);
    static double t[4][MAX_ROUNDS], cpu[4][MAX_ROUNDS];
    double pnl[2][M], fee = TF_FEE_DEFAULT;
    int64_t trades[2][M];
    tf_stats st[2][M];
    static tf_time_stats ts[M], ts0[M];
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int row = 0; row < 4; row++) {
            int threads = row < 2 ? 1 : 2, timed = row & 1;
            if (only >= 0 && row != only && !(r == 0 && row == 0))
                continue;
            tf_sweep_opts o = {
                .size = sizeof o, .threads = threads, .fee = &fee, .stats = st[timed]};
            double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            int rc =
                timed ? tf_sweep_time(close, n, params, M, pnl[1], trades[1], &o, NULL, ts, NULL, 0)
                      : tf_sweep(close, n, params, M, pnl[0], trades[0], &o);
            t[row][r] = clock_s(CLOCK_MONOTONIC) - t0;
            cpu[row][r] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (rc) {
                fprintf(stderr, "row %d: %s\n", row, tf_strerror(rc));
                return 1;
            }
            if (timed) {
                bad |= memcmp(pnl[0], pnl[1], sizeof pnl[0]) != 0 ||
                       memcmp(trades[0], trades[1], sizeof trades[0]) != 0 ||
                       memcmp(st[0], st[1], sizeof st[0]) != 0;
                if (r == 0 && row == 1)
                    memcpy(ts0, ts, sizeof ts);
                else
                    bad |= memcmp(ts0, ts, sizeof ts) != 0;
            }
        }
    }
    if (bad) {
        fprintf(stderr, "MISMATCH: tf_sweep_time's bits differ\n");
        return 1;
    }
    const char *names[4] = {"tf_sweep + stats, 1 thread", "tf_sweep_time, 1 thread",
                            "tf_sweep + stats, 2 threads", "tf_sweep_time, 2 threads"};
    for (int kind = 0; kind < 2; kind++) {
        double med[4], mn[4];
        printf("%s\n", kind ? "CPU time of the process (all threads; less sensitive to load):"
                            : "wall time:");
        for (int row = 0; row < 4; row++) {
            double *v = kind ? cpu[row] : t[row];
            mn[row] = min_of(v, rounds);
            med[row] = median(v, rounds);
        }
        for (int row = 0; row < 4; row++) {
            printf("  %-30s median %8.2f ms  min %8.2f ms", names[row], 1e3 * med[row],
                   1e3 * mn[row]);
            if (row & 1)
                printf("  ratio %.3f (median) %.3f (min)", med[row] / med[row - 1],
                       mn[row] / mn[row - 1]);
            printf("\n");
        }
    }
    printf("bits: sweep outputs equal tf_sweep's, figures equal across rounds and threads\n");
    free(close);
    return 0;
}
