/* Out-of-sample and walk-forward folds (printed here, computed by the library's tf_oos_run), and
 * the report launcher for `tollfree sweep`. */
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

int tf_cli_oos_run(FILE *f, const double *close, int64_t n, const int64_t *grid, int64_t m,
                   const tf_cli_oos *oos, const tf_sweep_opts *o, int reference, int quiet)
{
    char mt_name[64], msg[640];
    snprintf(mt_name, sizeof mt_name, "%s%s", oos->metric.sign < 0 ? "-" : "",
             tf_column_name(oos->metric.col));
    tf_oos_opts opts = {.size = sizeof opts,
                        .split = oos->folds > 0 ? 0.0 : oos->split,
                        .walk_forward = oos->folds,
                        .metric = mt_name,
                        .reference = reference};
    tf_oos_row rows[TF_OOS_MAX_FOLDS];
    int nf = tf_oos_run(close, n, grid, m, &opts, rows, TF_OOS_MAX_FOLDS, msg, sizeof msg, o);
    if (nf == TF_E_CANCELLED)
        return -1;
    if (nf < 0) {
        fprintf(stderr, "tollfree sweep: %s\n", msg);
        return -1;
    }
    fprintf(f, "fold,is_start,is_end,oos_start,oos_end,L,half,sq,p,p3,p2,metric,is_value,is_pnl,"
               "is_trades,oos_value,oos_pnl,oos_trades,oos_rank,combos,oos_best_value\n");
    for (int k = 0; k < nf; k++) {
        const tf_oos_row *r = &rows[k];
        const tf_fold *d = &r->fold;
        const int64_t *p = grid + 6 * r->winner;
        fprintf(f,
                "%d,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%s,%.17g,%.17g,%lld,%.17g,"
                "%.17g,%lld,%lld,%lld,%.17g\n",
                k + 1, (long long)d->is_start, (long long)d->is_end, (long long)d->oos_start,
                (long long)d->oos_end, (long long)p[0], (long long)p[1], (long long)p[2],
                (long long)p[3], (long long)p[4], (long long)p[5], mt_name, r->is_value, r->is_pnl,
                (long long)r->is_trades, r->oos_value, r->oos_pnl, (long long)r->oos_trades,
                (long long)r->oos_rank, (long long)m, r->oos_best_value);
        if (!quiet)
            fprintf(stderr,
                    "fold %d: in-sample bars %lld..%lld winner L=%lld (%s %.4g) -> out of sample "
                    "bars %lld..%lld: %s %.4g, rank %lld of %lld\n",
                    k + 1, (long long)d->is_start, (long long)d->is_end - 1, (long long)p[0],
                    mt_name, r->is_value, (long long)d->oos_start, (long long)d->oos_end - 1,
                    mt_name, r->oos_value, (long long)r->oos_rank, (long long)m);
    }
    if (!quiet && tf_oos_verdict(rows, nf, m, msg, sizeof msg) == 0)
        fprintf(stderr, "out of sample: %s\n", msg);
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "tollfree sweep: write failed: %s\n", strerror(errno));
        return -1;
    }
    return 0;
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
