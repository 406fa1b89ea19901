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

extern char **environ;

static double m_pnl(double pnl, int64_t trades, int64_t n_bars)
{
    (void)trades;
    (void)n_bars;
    return pnl;
}

static double m_trades(double pnl, int64_t trades, int64_t n_bars)
{
    (void)pnl;
    (void)n_bars;
    return (double)trades;
}

static double m_avg_trade(double pnl, int64_t trades, int64_t n_bars)
{
    (void)n_bars;
    return trades > 0 ? pnl / (double)trades : NAN;
}

/* The kernel's statistics (wins, gross win/loss, ...) join here as rows when it has them. */
static const tf_cli_metric metrics[] = {
    {"pnl", "total pnl, percent points after fees", m_pnl},
    {"avg_trade", "pnl / trades (NaN without trades)", m_avg_trade},
    {"trades", "closed round trips", m_trades},
};

const tf_cli_metric *tf_cli_metric_find(const char *name)
{
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        if (!strcmp(metrics[i].name, name))
            return &metrics[i];
    return NULL;
}

const char *tf_cli_metric_names(void)
{
    return "pnl, avg_trade, trades";
}

/* a better than b: NaN is worse than any number. */
static int better(double a, double b)
{
    if (a != a)
        return 0;
    return b != b || a > b;
}

static int sweep_range(const double *close, int64_t n, const int64_t *grid, int64_t m, double *pnl,
                       int64_t *trades, const tf_sweep_opts *o, int reference)
{
    return reference ? tf_sweep_reference(close, n, grid, m, pnl, trades)
                     : tf_sweep(close, n, grid, m, pnl, trades, o);
}

int tf_cli_oos_run(FILE *f, const double *close, int64_t n, const int64_t *grid, int64_t m,
                   const tf_cli_oos *oos, const tf_sweep_opts *o, int reference, int quiet)
{
    int folds = oos->folds > 0 ? oos->folds : 1;
    const tf_cli_metric *mt = oos->metric;
    double *p_is = malloc(sizeof(double) * (size_t)m), *p_os = malloc(sizeof(double) * (size_t)m);
    int64_t *t_is = malloc(sizeof(int64_t) * (size_t)m),
            *t_os = malloc(sizeof(int64_t) * (size_t)m);
    int status = -1;
    int64_t rank_sum = 0;
    double oos_sum = 0;
    if (!p_is || !p_os || !t_is || !t_os) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
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
        int rc = sweep_range(close + a, b - a, grid, m, p_is, t_is, o, reference);
        if (!rc)
            rc = sweep_range(close + b, c - b, grid, m, p_os, t_os, o, reference);
        if (rc) {
            fprintf(stderr, "tollfree sweep: %s\n", tf_strerror(rc));
            goto done;
        }
        int64_t w = 0;
        double wv = mt->value(p_is[0], t_is[0], b - a);
        for (int64_t j = 1; j < m; j++) {
            double v = mt->value(p_is[j], t_is[j], b - a);
            if (better(v, wv))
                w = j, wv = v;
        }
        double ov = mt->value(p_os[w], t_os[w], c - b), best = NAN;
        int64_t rank = 1;
        for (int64_t j = 0; j < m; j++) {
            double v = mt->value(p_os[j], t_os[j], c - b);
            rank += better(v, ov);
            if (better(v, best))
                best = v;
        }
        const int64_t *p = grid + 6 * w;
        fprintf(f,
                "%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%.17g,%.17g,%lld,%.17g,"
                "%.17g,%lld,%lld,%lld,%.17g\n",
                k, (long long)a, (long long)b, (long long)b, (long long)c, (long long)p[0],
                (long long)p[1], (long long)p[2], (long long)p[3], (long long)p[4], (long long)p[5],
                mt->name, wv, p_is[w], (long long)t_is[w], ov, p_os[w], (long long)t_os[w],
                (long long)rank, (long long)m, best);
        rank_sum += rank;
        oos_sum += p_os[w];
        if (!quiet)
            fprintf(stderr,
                    "fold %d: in-sample bars %lld..%lld winner L=%lld (%s %.4g) -> out of sample "
                    "bars %lld..%lld: %s %.4g, rank %lld of %lld\n",
                    k, (long long)a, (long long)b - 1, (long long)p[0], mt->name, wv, (long long)b,
                    (long long)c - 1, mt->name, ov, (long long)rank, (long long)m);
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
    free(p_is);
    free(p_os);
    free(t_is);
    free(t_os);
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
