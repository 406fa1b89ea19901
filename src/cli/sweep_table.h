/* The table `tollfree sweep` prints: one row per combo, columns chosen by name (--columns),
 * ordered by any numeric column (--sort, --top). */
#ifndef TF_CLI_SWEEP_TABLE_H
#define TF_CLI_SWEEP_TABLE_H

#include <stdint.h>
#include <stdio.h>

#include "tollfree/kernel.h"

/* A sweep's results: the grid and, per combo, pnl/trades and (when asked for) every statistic. */
typedef struct tf_cli_results {
    const int64_t *grid; /* [m][6] */
    const double *pnl;
    const int64_t *trades;
    const tf_stats *stats; /* NULL: only the window and pnl/trades columns can be shown */
    int64_t m;
} tf_cli_results;

#define TF_CLI_MAX_COLUMNS 32

/* A list of column indices into the table of sweep_table.c. */
typedef struct tf_cli_columns {
    int idx[TF_CLI_MAX_COLUMNS];
    int n;
} tf_cli_columns;

/* Parses a comma-separated list of column names (or "all", or "basic" = the six windows, pnl
 * and trades). 0, or -1 after one line on stderr naming the unknown column and the known ones. */
int tf_cli_columns_parse(const char *spec, tf_cli_columns *out);
/* The index of one column, or -1 after one line on stderr. */
int tf_cli_column_find(const char *name);

/* How rows are ranked: by a column, highest first (sign +1), or lowest first ("-name", sign -1);
 * NaN always last. col < 0: grid order. */
typedef struct tf_cli_order {
    int col;
    int sign;
} tf_cli_order;

/* Parses "name" or "-name" (for --sort and --metric). 0, or -1 after one line on stderr. */
int tf_cli_order_parse(const char *spec, tf_cli_order *out);
/* Column o->col's value for combo j, times o->sign: higher is better. */
double tf_cli_order_value(const tf_cli_order *o, const tf_cli_results *r, int64_t j);
/* Column col's value for combo j, as a double (NaN where undefined). */
double tf_cli_column_value(int col, const tf_cli_results *r, int64_t j);
/* The name of column col. */
const char *tf_cli_column_name(int col);
/* 1 if any of the columns (or the sort column, if >= 0) needs the kernel's statistics. */
int tf_cli_columns_need_stats(const tf_cli_columns *c, int sort_col);
/* "L, half, ..., avg_trade" (for --help and messages). */
const char *tf_cli_column_names(void);

/* Writes the header and rows: every combo in grid order (order->col < 0), or ranked by order (NaN
 * last, ties in grid order), at most top rows (top <= 0: all). 0, or -1 after one line on stderr
 * (out of memory, write error). */
int tf_cli_table_write(FILE *f, const tf_cli_results *r, const tf_cli_columns *c,
                       const tf_cli_order *order, int64_t top);

/* The derived figures, from one combo's statistics (NaN where undefined; profit_factor inf with
 * gains and no loss). The Python package computes them with the same operations. */
double tf_cli_win_rate(const tf_stats *s);
double tf_cli_profit_factor(const tf_stats *s);
double tf_cli_sharpe_per_trade(const tf_stats *s);
double tf_cli_avg_trade(const tf_stats *s);

#endif
