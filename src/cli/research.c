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

/* The winner's parameters as CSV cells (",5,20") and as words ("fast=5 slow=20"). */
static void winner_text(const tf_strategy_def *def, const int64_t *grid, const double *dgrid,
                        int64_t w, char *cells, size_t ccap, char *words, size_t wcap)
{
    size_t a = 0, b = 0;
    cells[0] = words[0] = '\0';
    uint32_t np = def ? def->n_params : 6;
    if (w < 0) { /* no eligible combo (min_trades): empty cells */
        for (uint32_t k = 0; k < np && a < ccap; k++)
            a += (size_t)snprintf(cells + a, ccap - a, ",");
        snprintf(words, wcap, "none (no combo has enough in-sample trades)");
        return;
    }
    static const char *const hma_names[6] = {"L", "half", "sq", "p", "p3", "p2"};
    for (uint32_t k = 0; k < np && a < ccap; k++) {
        if (def)
            a += (size_t)snprintf(cells + a, ccap - a, ",%.17g", dgrid[(size_t)w * np + k]);
        else
            a += (size_t)snprintf(cells + a, ccap - a, ",%lld", (long long)grid[6 * w + k]);
    }
    if (def) {
        for (uint32_t k = 0; k < np && b < wcap; k++)
            b += (size_t)snprintf(words + b, wcap - b, "%s%s=%.6g", k ? " " : "",
                                  def->param_names[k], dgrid[(size_t)w * np + k]);
    } else {
        snprintf(words, wcap, "%s=%lld", hma_names[0], (long long)grid[6 * w]);
    }
}

/* Bar i's date cell as a CSV field (quoted when it holds a separator or a quote). */
static void put_date(FILE *f, const tf_cli_oos *oos, int64_t i)
{
    const char *s = oos->dates + oos->date_off[i], *e = oos->dates + oos->date_off[i + 1];
    int quote = 0;
    for (const char *c = s; c < e; c++)
        quote |= *c == ',' || *c == '"' || *c == '\n' || *c == ';' || *c == '\t';
    if (quote)
        fputc('"', f);
    for (; s < e; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    if (quote)
        fputc('"', f);
}

/* " (DATE to DATE)" of bars a and b, for the fold lines on stderr. */
static void date_span(const tf_cli_oos *oos, int64_t a, int64_t b, char *out, size_t cap)
{
    snprintf(out, cap, " (%.*s to %.*s)", (int)(oos->date_off[a + 1] - oos->date_off[a]),
             oos->dates + oos->date_off[a], (int)(oos->date_off[b + 1] - oos->date_off[b]),
             oos->dates + oos->date_off[b]);
}

int tf_cli_oos_run(FILE *f, const double *close, int64_t n, const int64_t *grid,
                   const tf_strategy_def *def, const double *dgrid, int64_t m,
                   const tf_cli_oos *oos, const tf_sweep_opts *o, int reference, int quiet)
{
    char mt_name[160], msg[2048];
    tf_results schema = {0};
    if (def) {
        schema.dparams = dgrid;
        schema.n_params = def->n_params;
        schema.param_names = def->param_names;
    }
    snprintf(mt_name, sizeof mt_name, "%s%s", oos->metric.sign < 0 ? "-" : "",
             tf_results_column_name(&schema, oos->metric.col));
    tf_oos_opts opts = {.size = sizeof opts,
                        .split = oos->folds > 0 ? 0.0 : oos->split,
                        .walk_forward = oos->folds,
                        .metric = mt_name,
                        .reference = reference,
                        .anchored = oos->anchored,
                        .warmup = oos->warmup,
                        .min_trades = oos->min_trades};
    tf_oos_row rows[TF_OOS_MAX_FOLDS];
    int nf = def ? tf_oos_run_with(def, close, n, dgrid, m, &opts, rows, TF_OOS_MAX_FOLDS, msg,
                                   sizeof msg, o)
                 : tf_oos_run(close, n, grid, m, &opts, rows, TF_OOS_MAX_FOLDS, msg, sizeof msg, o);
    if (nf == TF_E_CANCELLED)
        return -1;
    if (nf < 0) {
        fprintf(stderr, "tollfree sweep: %s\n", msg);
        return -1;
    }
    fputs("fold,is_start,is_end,oos_start,oos_end,", f);
    if (oos->dates)
        fputs("is_start_date,is_end_date,oos_start_date,oos_end_date,", f);
    if (def)
        for (uint32_t k = 0; k < def->n_params; k++)
            fprintf(f, "%s,", def->param_names[k]);
    else
        fputs("L,half,sq,p,p3,p2,", f);
    fputs("metric,is_value,is_pnl,is_trades,oos_value,oos_pnl,oos_trades,oos_rank,combos,"
          "oos_best_value",
          f);
    fputs(oos->min_trades > 0 ? ",winner_note\n" : "\n", f);
    for (int k = 0; k < nf; k++) {
        const tf_oos_row *r = &rows[k];
        const tf_fold *d = &r->fold;
        char cells[TF_STRATEGY_MAX_PARAMS * 26], words[TF_STRATEGY_MAX_PARAMS * 40];
        winner_text(def, grid, dgrid, r->winner, cells, sizeof cells, words, sizeof words);
        fprintf(f, "%d,%lld,%lld,%lld,%lld", k + 1, (long long)d->is_start, (long long)d->is_end,
                (long long)d->oos_start, (long long)d->oos_end);
        char span[2][160] = {"", ""};
        if (oos->dates) {
            int64_t at[4] = {d->is_start, d->is_end - 1, d->oos_start, d->oos_end - 1};
            for (int e = 0; e < 4; e++) {
                fputc(',', f);
                put_date(f, oos, at[e]);
            }
            for (int e = 0; e < 2; e++)
                date_span(oos, at[2 * e], at[2 * e + 1], span[e], sizeof span[e]);
        }
        fprintf(f, "%s,%s,%.17g,%.17g,%lld,%.17g,%.17g,%lld,%lld,%lld,%.17g", cells, mt_name,
                r->is_value, r->is_pnl, (long long)r->is_trades, r->oos_value, r->oos_pnl,
                (long long)r->oos_trades, (long long)r->oos_rank, (long long)m, r->oos_best_value);
        if (oos->min_trades > 0 && r->winner < 0)
            fprintf(f, ",no combo with %lld or more in-sample trades\n",
                    (long long)oos->min_trades);
        else
            fputs(oos->min_trades > 0 ? ",ok\n" : "\n", f);
        if (!quiet)
            fprintf(stderr,
                    "fold %d: in-sample bars %lld..%lld%s winner %s (%s %.4g) -> out of sample "
                    "bars %lld..%lld%s: %s %.4g, rank %lld of %lld\n",
                    k + 1, (long long)d->is_start, (long long)d->is_end - 1, span[0], words,
                    mt_name, r->is_value, (long long)d->oos_start, (long long)d->oos_end - 1,
                    span[1], mt_name, r->oos_value, (long long)r->oos_rank, (long long)m);
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
