/* The table `tollfree sweep` prints: one row per combo, columns chosen by name (--columns),
 * ordered by any numeric column (--sort, --top). Parsing and printing only: the columns, their
 * values and the ranking are the library's (tollfree/research.h). */
#ifndef TF_CLI_SWEEP_TABLE_H
#define TF_CLI_SWEEP_TABLE_H

#include <stdint.h>
#include <stdio.h>

#include "tollfree/research.h"
#include "tollfree/strategy.h"

/* Every column of a strategy with the most parameters. */
#define TF_CLI_MAX_COLUMNS (TF_STRATEGY_MAX_PARAMS + 32)

/* A list of column numbers of a results' table (tf_results_column_name: the HMA table, or a
 * strategy's parameters then the metrics). Functions below take `schema`, results whose table
 * the names are looked up in (only dparams, n_params and param_names are read; NULL or zeroed:
 * the HMA table). */
typedef struct tf_cli_columns {
    int idx[TF_CLI_MAX_COLUMNS];
    int n;
} tf_cli_columns;

/* Parses a comma-separated list of column names (or "all", or "basic" = the parameters (the six
 * windows), pnl and trades). 0, or -1 after one line on stderr naming the unknown column and the
 * known ones. */
int tf_cli_columns_parse(const char *spec, const tf_results *schema, tf_cli_columns *out);

/* How rows are ranked: by a column, highest first (sign +1), or lowest first ("-name", sign -1);
 * NaN always last. col < 0: grid order. */
typedef struct tf_cli_order {
    int col;
    int sign;
} tf_cli_order;

/* Parses "name" or "-name" for option `opt` ("--sort", "--metric"). 0, or -1 after one line on
 * stderr. */
int tf_cli_order_parse(const char *opt, const char *spec, const tf_results *schema,
                       tf_cli_order *out);
/* 1 if any of the columns (or the sort column, if >= 0) needs the kernel's statistics. */
int tf_cli_columns_need_stats(const tf_cli_columns *c, int sort_col, const tf_results *schema);

/* Writes the header and rows (the columns of r's table): every combo in grid order (order->col <
 * 0), or ranked by order (NaN last, ties in grid order), at most top rows (top <= 0: all). 0, or -1
 * after one line on stderr (out of memory, write error). */
int tf_cli_table_write(FILE *f, const tf_results *r, const tf_cli_columns *c,
                       const tf_cli_order *order, int64_t top);

/* What tf_cli_table_write_ex adds to the table. */
typedef struct tf_cli_table_extra {
    int64_t min_trades; /* > 0: combos with fewer trades are left out of the ranked rows */
    int time;           /* 1: every time-aware figure; 2: only compounded (after the columns) */
    const tf_strategy_def *def; /* NULL: HMA (r->params); else the strategy of r->dparams */
    const double *close;        /* the series, for the time-aware figures */
    int64_t n;
    tf_time_opts topts;
    int64_t left_out; /* out: the combos min_trades left out */
} tf_cli_table_extra;

/* tf_cli_table_write, then: combos with fewer than x->min_trades trades are not ranked (not
 * shown), and x->time appends the time-aware figures (research.h, tf_time_stats_*) computed for
 * the shown rows only (a second pass over those combos). x NULL: tf_cli_table_write. */
int tf_cli_table_write_ex(FILE *f, const tf_results *r, const tf_cli_columns *c,
                          const tf_cli_order *order, int64_t top, tf_cli_table_extra *x);

#endif
