/* Metrics, out-of-sample and walk-forward folds, and the report launcher for `tollfree sweep`. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/research.h"
#include "cli/sweep_table.h"

extern char **environ;

/* a better than b: NaN is worse than any number. */
static int better(double a, double b)
{
    if (a != a)
        return 0;
    return b != b || a > b;
}

/* One part of the series, swept cold into r (r->stats NULL: no statistics). */
static int sweep_range(const double *close, int64_t n, tf_cli_results *r, const tf_sweep_opts *o,
                       int reference)
{
    tf_sweep_opts so = *o;
    so.stats = (tf_stats *)r->stats;
    double *pnl = (double *)r->pnl;
    int64_t *trades = (int64_t *)r->trades;
    return reference ? tf_sweep_reference(close, n, r->grid, r->m, pnl, trades, &so)
                     : tf_sweep(close, n, r->grid, r->m, pnl, trades, &so);
}

/* The winner by the metric (NaN never wins; ties: the first in grid order) and its value. */
static int64_t winner(const tf_cli_order *mt, const tf_cli_results *r, double *value)
{
    int64_t w = 0;
    double wv = tf_cli_order_value(mt, r, 0);
    for (int64_t j = 1; j < r->m; j++) {
        double v = tf_cli_order_value(mt, r, j);
        if (better(v, wv))
            w = j, wv = v;
    }
    *value = wv;
    return w;
}

int tf_cli_oos_run(FILE *f, const double *close, int64_t n, const int64_t *grid, int64_t m,
                   const tf_cli_oos *oos, const tf_sweep_opts *o, int reference, int quiet)
{
    int folds = oos->folds > 0 ? oos->folds : 1;
    const tf_cli_order *mt = &oos->metric;
    char mt_name[64];
    snprintf(mt_name, sizeof mt_name, "%s%s", mt->sign < 0 ? "-" : "", tf_cli_column_name(mt->col));
    tf_cli_columns only = {{mt->col}, 1};
    int stats = tf_cli_columns_need_stats(&only, -1);
    size_t per = sizeof(double) + sizeof(int64_t) + (stats ? sizeof(tf_stats) : 0);
    char *mem = malloc(per * 2 * (size_t)(m ? m : 1));
    tf_cli_results is = {grid, NULL, NULL, NULL, m}, os = is;
    int status = -1;
    int64_t rank_sum = 0;
    double oos_sum = 0;
    if (!mem) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
    }
    is.pnl = (double *)mem;
    os.pnl = is.pnl + m;
    is.trades = (int64_t *)(os.pnl + m);
    os.trades = is.trades + m;
    if (stats) {
        is.stats = (tf_stats *)(os.trades + m);
        os.stats = is.stats + m;
    }
    fprintf(f, "fold,is_start,is_end,oos_start,oos_end,L,half,sq,p,p3,p2,metric,is_value,is_pnl,"
               "is_trades,oos_value,oos_pnl,oos_trades,oos_rank,combos,oos_best_value\n");
    int64_t seg = n / (folds + 1);
    for (int k = 1; k <= folds; k++) {
        int64_t a, b, c;
        if (oos->folds > 0) {
            a = (k - 1) * seg;
            b = k * seg;
            c = k == folds ? n : (k + 1) * seg;
        } else {
            a = 0;
            b = (int64_t)floor((double)n * oos->split);
            c = n;
        }
        if (b - a < 1 || c - b < 1) {
            fprintf(stderr,
                    "tollfree sweep: fold %d has an empty in-sample or out-of-sample part "
                    "(%lld bars)\n",
                    k, (long long)n);
            goto done;
        }
        int rc = sweep_range(close + a, b - a, &is, o, reference);
        if (!rc)
            rc = sweep_range(close + b, c - b, &os, o, reference);
        if (rc) {
            fprintf(stderr, "tollfree sweep: %s\n", tf_strerror(rc));
            goto done;
        }
        double wv, best;
        int64_t w = winner(mt, &is, &wv);
        double ov = tf_cli_order_value(mt, &os, w);
        winner(mt, &os, &best);
        int64_t rank = 1;
        for (int64_t j = 0; j < m; j++)
            rank += better(tf_cli_order_value(mt, &os, j), ov);
        const int64_t *p = grid + 6 * w;
        fprintf(f,
                "%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%.17g,%.17g,%lld,%.17g,"
                "%.17g,%lld,%lld,%lld,%.17g\n",
                k, (long long)a, (long long)b, (long long)b, (long long)c, (long long)p[0],
                (long long)p[1], (long long)p[2], (long long)p[3], (long long)p[4], (long long)p[5],
                mt_name, wv, is.pnl[w], (long long)is.trades[w], ov, os.pnl[w],
                (long long)os.trades[w], (long long)rank, (long long)m, best);
        rank_sum += rank;
        oos_sum += os.pnl[w];
        if (!quiet)
            fprintf(stderr,
                    "fold %d: in-sample bars %lld..%lld winner L=%lld (%s %.4g) -> out of sample "
                    "bars %lld..%lld: %s %.4g, rank %lld of %lld\n",
                    k, (long long)a, (long long)b - 1, (long long)p[0], mt_name, wv, (long long)b,
                    (long long)c - 1, mt_name, ov, (long long)rank, (long long)m);
    }
    if (!quiet) {
        double mean_rank = (double)rank_sum / folds;
        fprintf(stderr,
                "out of sample: the in-sample winner's mean rank is %.1f of %lld (%s; random "
                "choice: %.1f), its oos pnl summed over folds %.4g\n",
                mean_rank, (long long)m,
                mean_rank <= 0.25 * (double)m  ? "holds up: top quarter"
                : mean_rank <= 0.5 * (double)m ? "weak: top half"
                                               : "does not hold up: bottom half",
                ((double)m + 1) / 2, oos_sum);
    }
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "tollfree sweep: write failed: %s\n", strerror(errno));
        goto done;
    }
    status = 0;
done:
    free(mem);
    return status;
}

int tf_cli_write_tmp(const double *v, int64_t n, char *path)
{
    int fd = mkstemp(path);
    size_t bytes = sizeof(double) * (size_t)n;
    if (fd >= 0 && write(fd, v, bytes) == (ssize_t)bytes && close(fd) == 0)
        return 0;
    fprintf(stderr, "tollfree sweep: %s: %s\n", path, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    return -1;
}

int tf_cli_report(char *const *args)
{
    int argc = 0;
    while (args[argc])
        argc++;
    char **argv = tf_cli_python_argv("tollfree.html_report", argc, args);
    if (!argv) {
        fprintf(stderr, "tollfree sweep: --report: %s\n", strerror(errno ? errno : ENOMEM));
        return 1;
    }
    const char *py = argv[0];
    pid_t pid;
    int rc = posix_spawnp(&pid, py, NULL, NULL, argv, environ);
    free(argv);
    if (rc) {
        fprintf(stderr, "tollfree sweep: --report: cannot run %s: %s (set TOLLFREE_PYTHON)\n", py,
                strerror(rc));
        return 1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "tollfree sweep: --report: %s\n", strerror(errno));
            return 1;
        }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    fprintf(stderr, "tollfree sweep: --report: %s died (signal %d)\n", py,
            WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return 1;
}
