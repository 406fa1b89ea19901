/* The researcher's side of `tollfree sweep`: printing the out-of-sample / walk-forward folds
 * (computed by the library, tollfree/research.h), and the HTML report (written by the Python
 * package, which this launches). */
#ifndef TF_CLI_RESEARCH_H
#define TF_CLI_RESEARCH_H

#include <stdint.h>
#include <stdio.h>

#include "cli/sweep_table.h"
#include "tollfree/kernel.h"
#include "tollfree/strategy.h"

/* How a sweep is split into folds (tf_oos_opts: split, or walk_forward folds) and the metric
 * that picks the winner (sweep_table.h: a column, or -column). */
typedef struct tf_cli_oos {
    double split;
    int folds;
    tf_cli_order metric;
    int anchored;   /* tf_oos_opts.anchored */
    int64_t warmup; /* tf_oos_opts.warmup: 0 cold, N bars, TF_OOS_WARMUP_ALL */
    /* NULL, or each bar's date cell: dates[date_off[i] .. date_off[i+1]) (the fold rows then
     * carry each part's first and last date) */
    const char *dates;
    const int64_t *date_off;
    int64_t min_trades; /* tf_oos_opts.min_trades: the rows then end with a winner_note cell */
} tf_cli_oos;

/* Runs every fold by the library's tf_oos_run (each part swept cold, or after oos->warmup bars)
 * and writes one CSV
 * row per fold to f: the in-sample winner by the metric, its figures in and out of sample, and
 * its rank out of sample among all combos. With def (a strategy, tf_oos_run_with) the combos
 * are dgrid[m][def->n_params] and the winner's columns are def's parameter names; without, the
 * six windows of grid[m][6]. oos->metric is a column of that table. One line per fold and a
 * verdict go to stderr unless quiet. 0, or -1 after one line on stderr (none when o->progress
 * was cancelled: the caller says so). */
int tf_cli_oos_run(FILE *f, const double *close, int64_t n, const int64_t *grid,
                   const tf_strategy_def *def, const double *dgrid, int64_t m,
                   const tf_cli_oos *oos, const tf_sweep_opts *o, int reference, int quiet);

/* Writes the HTML report by running `python3 -m tollfree.html_report` with args (NULL-terminated,
 * without the program name), with the package and library beside this executable found for
 * it. Returns the child's exit status (0 on success), or 1 after one line on stderr. */
int tf_cli_report(char *const *args);

/* Writes v[n] as raw f64 to a new file from the mkstemp template path (rewritten in place).
 * 0, or -1 after one line on stderr (and no file left). */
int tf_cli_write_tmp(const double *v, int64_t n, char *path);

#endif
