/* tollfree sweep: the parameter sweep from the command line. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/research.h"
#include "cli/sweep_run.h"
#include "cli/sweep_table.h"
#include "tollfree/kernel.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

static const char usage[] =
    "usage: tollfree sweep [options]\n"
    "\n"
    "Runs a strategy's sweep (default the HMA/HMA3 stop-and-reverse of docs/definition.md;\n"
    "--strategy picks another) and prints one CSV row per combo: the parameters (for HMA the\n"
    "six windows L,half,sq,p,p3,p2), then pnl,trades, the statistics wins,\n"
    "gross_win,gross_loss,best,worst,mean,m2,max_dd,exposure_bars and the derived win_rate,\n"
    "profit_factor,sharpe_per_trade,avg_trade (docs/research.md defines each).\n"
    "pnl is in percent points: the sum over closed trades of the trade's percent move minus\n"
    "the fee (--fee, 0.09 per round trip by default). Reals are printed with %.17g (they read\n"
    "back exactly). Ctrl-C stops a sweep within about a second; on a terminal, a sweep longer\n"
    "than two seconds shows its progress.\n"
    "\n"
    "input:\n"
    "  --input FILE      close series, '-' for stdin: a CSV (header line optional; a UTF-8 BOM,\n"
    "                    CRLF, quoted fields and blank lines are fine; streamed, so any size),\n"
    "                    or raw little-endian f64 (*.f64, *.bin, *.raw, or --raw). Every close\n"
    "                    must be a positive finite number. Default: the embedded data set\n"
    "                    (150,000 bars, docs/definition.md section 1). docs/research.md,\n"
    "                    \"Price files\", gives every rule\n";

/* After tf_cli_series_help (--column, --date-column, --assume-sorted, --sep, ...). */
static const char usage_grid[] =
    "strategy and grid:\n"
    "  --strategy NAME|PATH.so  hma (default), sma_cross, ema_cross, donchian, rsi, bollinger\n"
    "                    (docs/strategies.md), or a plugin: a shared object exporting\n"
    "                    tollfree_strategy (a name with a '/' or ending in .so)\n"
    "  --list-strategies (or --strategy list) print the built-ins and their parameters\n"
    "  --grid SPEC       a=LO:HI:STEP,b=V,...  by name: every parameter of the strategy once,\n"
    "                                       ranges inclusive (LO + k*STEP <= HI), the\n"
    "                                       cartesian product with the LAST parameter varying\n"
    "                                       fastest; at most 10,000,000 combos. The only form\n"
    "                                       for a strategy other than hma\n"
    "                    for hma also:\n"
    "                    default            the 80-combo grid, L = 6..200\n"
    "                    LO:HI:N            N Hull lengths from LO to HI, each expanded to six\n"
    "                                       windows as docs/definition.md section 2\n"
    "                    FILE               CSV rows L,half,sq,p,p3,p2 (optional header line)\n"
    "  --where EXPR      keep the combos for which every condition holds: conditions joined\n"
    "                    by ',' or '&&', each A OP B with A, B a parameter or a number and OP\n"
    "                    one of < <= > >= == != (e.g. 'fast<slow'); none kept is an error\n";

/* Ranking and the time-aware figures (printed after usage_out's output options). */
static const char usage_time[] =
    "ranking and time-aware figures:\n"
    "  --min-trades N    combos with fewer than N trades are left out of the ranked rows (and\n"
    "                    cannot win a --split / --walk-forward fold: a fold with none\n"
    "                    eligible says so in its winner_note cell)\n"
    "  --time-stats      append the time-aware figures (docs/definition.md section 10) for the\n"
    "                    rows printed: equity,cagr,ann_vol,sharpe,sortino,calmar,mtm_max_dd,\n"
    "                    exposure_pct,buy_hold,compounded,mean_bars,max_bars,mean_days,\n"
    "                    max_days,periods_per_year; annualised by the bars a year of --input's\n"
    "                    dates, per bar without dates. Booked by the sweep itself (one\n"
    "                    pass; with --isa reference, a second pass)\n"
    "  --periods-per-year N  annualise with N periods (bars) a year (e.g. 252); implies\n"
    "                    --time-stats\n"
    "  --compounded      append only compounded: the closed trades' returns compounded in\n"
    "                    order, percent (pnl stays their sum)\n";

/* Kept apart: one string literal may not pass 4095 bytes (-Wpedantic). */
static const char usage_out[] =
    "out of sample:\n"
    "  --split F         in-sample = the first floor(n*F) bars, out-of-sample = the rest\n"
    "                    (0 < F < 1), each swept cold; prints one row per fold, not per combo\n"
    "  --walk-forward K  K folds (1..1000): the bars cut into K+1 equal segments; fold k picks\n"
    "                    its winner on segment k-1 and tests it on segment k. With either,\n"
    "                    --columns, --sort and --top are refused (the rows are folds)\n"
    "  --anchored        with --walk-forward: every in-sample part starts at bar 0 and grows\n"
    "                    (fold k: segments 0..k-1); out of sample as without it\n"
    "  --warmup N|all    the bars before each part feed the strategy first (its indicators\n"
    "                    warm), trades booked only inside the part; a position the warm-up\n"
    "                    holds is entered at the part's first bar. N bars, or all of them;\n"
    "                    0 = cold (the default: each part starts with nothing). Steps each\n"
    "                    combo (slower than the cold sweep; docs/research.md, \"Warm-up\")\n"
    "                    The fold rows carry each part's first and last date when --input has\n"
    "                    dates (is_start_date, is_end_date, oos_start_date, oos_end_date)\n"
    "  --metric NAME     what picks the winner and ranks combos out of sample, higher is\n"
    "                    better: pnl (default) or any other output column (e.g. avg_trade,\n"
    "                    sharpe_per_trade, profit_factor, win_rate), or -COLUMN where lower\n"
    "                    is better (e.g. -max_dd)\n"
    "output:\n"
    "  --out FILE        write the CSV to FILE (a .csv or .txt name; '-' is stdout)\n"
    "  --columns LIST    the columns to print, comma-separated (default all; 'basic' = the\n"
    "                    windows, pnl, trades: the sweep then skips the statistics)\n"
    "  --sort COLUMN     order the rows by any column, highest first (-COLUMN: lowest\n"
    "                    first, e.g. -max_dd), NaN last\n"
    "  --top K           only the first K rows after sorting (by pnl without --sort)\n"
    "  --fee F           fee per closed trade in percent points, 0 <= F < 100 (default 0.09;\n"
    "                    a negative fee, a rebate, is refused)\n"
    "  --report FILE.html  also write a self-contained HTML report: inputs, ranked table,\n"
    "                    zoomable charts (uPlot, vendored from npm by `make web`), the best\n"
    "                    combo's equity, the out-of-sample table\n"
    "  --static          with --report: PNG figures (python3-matplotlib), no script\n"
    "  --heatmap X,Y     in the report, pnl over two of the six windows (others maximised\n"
    "                    over; with --strategy two of its parameters); checked before the\n"
    "                    sweep\n"
    "  --quiet           no summary or progress on stderr\n"
    "  A note on stderr (not an error) names combos that can never trade on the series (their\n"
    "  warm-up is longer: docs/research.md) and combos that repeat an earlier one.\n"
    "engine:\n"
    "  --threads N       worker threads (default 0 = all cores); results never depend on it\n"
    "  --isa NAME        auto, scalar, sse2, avx2, avx512, or reference (the literal spec);\n"
    "                    auto is the widest path the CPU has, capped by the environment\n"
    "                    variable TF_ISA_MAX=scalar|sse2|avx2|avx512 if set (e.g. TF_ISA_MAX=avx2\n"
    "                    runs an AVX-512 CPU as if it were AVX2-only)\n"
    "  -h, --help        this text\n"
    "\n"
    "examples:\n"
    "  tollfree sweep --top 5\n"
    "  tollfree sweep --sort sharpe_per_trade --top 5 --columns L,pnl,trades,sharpe_per_trade\n"
    "  tollfree sweep --input prices.csv --column Close --grid 10:300:50 --out results.csv\n"
    "  tollfree sweep --input prices.csv --walk-forward 4 --report report.html\n"
    "  tollfree sweep --strategy sma_cross --grid fast=2:50:2,slow=10:200:10 --where 'fast<slow'\n"
    "      --sort sharpe_per_trade --top 5\n";

/* Kept apart: one string literal may not pass 4095 bytes (-Wpedantic). */
static const char usage_panel[] =
    "\n"
    "panel and cluster (run by /usr/bin/python3 -m tollfree.distributed with the same arguments;\n"
    "it needs python3-pandas, and python3-distributed for --scheduler; the package and library\n"
    "are found beside this build tree or install prefix, else set PYTHONPATH / TOLLFREE_LIB):\n"
    "  --panel PATH      many instruments: a directory with one file per instrument (CSV with\n"
    "                    the --column column, or raw f64), or one wide CSV (a column each; a\n"
    "                    first date column dropped; NaN padding at a column's ends ignored).\n"
    "                    Every other price must be positive and finite: a gap (an empty or\n"
    "                    NaN cell inside a column), inf, 0 or a negative price is refused\n"
    "                    with the file, line and column (exit 1).\n"
    "                    Prints one CSV row per (instrument, combo): instrument, then the\n"
    "                    columns above (--columns, default all; basic = instrument,L,half,sq,p,\n"
    "                    p3,p2,pnl,trades), instruments in file/column order. Each instrument's\n"
    "                    rows are the plain sweep's rows for that series, same text; --sort and\n"
    "                    --top K rank and cut per instrument (--top alone: the K best pnl)\n"
    "  --fill forward    give each gap inside a --panel column the last price before it; a\n"
    "                    note on stderr says how many bars of which instrument were filled\n"
    "  --scheduler ADDR  sweep on Dask: tcp://HOST:PORT (a 'dask scheduler') or local[:N] (a\n"
    "                    LocalCluster of N processes); the same bits (docs/distributed.md)\n"
    "  --chunk N         combos per Dask task (default: sized so a task runs 0.1-2 s)\n"
    "  With these, --input, --column, --raw, --grid, --out, --columns, --sort, --top, --fee,\n"
    "  --threads (per Dask task: default 1), --isa (not reference) and --quiet apply, and\n"
    "  --time-stats / --periods-per-year in process (per bar without --periods-per-year: a panel\n"
    "  has no dates; refused with --scheduler; the panel's --sort does not take them); the\n"
    "  other options do not; --strategy (other than hma) and --where are refused with them.\n"
    "  tollfree sweep --panel prices/ --scheduler local:2 --top 3\n"
    "  tollfree sweep --panel prices/ --fee 0.05 --sort sharpe_per_trade --top 3 \\\n"
    "      --columns L,pnl,trades,sharpe_per_trade\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --panel / --scheduler (and not --help): the sweep over many instruments or on Dask is the
 * Python package's (tollfree.panel, tollfree.distributed), so this process becomes it
 * (`python3 -m tollfree.distributed`, which runs tollfree.panel.main). */
static int is_opt(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == '\0' || arg[n] == '=');
}

static int wants_panel(int argc, char **argv)
{
    int yes = 0;
    for (int k = 1; k < argc && strcmp(argv[k], "--"); k++) {
        if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help"))
            return 0;
        yes |= is_opt(argv[k], "--panel") || is_opt(argv[k], "--scheduler");
    }
    return yes;
}

static int exec_panel(int argc, char **argv)
{
    return tf_cli_python_exec("sweep --panel/--scheduler", "tollfree.distributed", argc - 1,
                              argv + 1);
}

/* Everything the command line says, checked. */
typedef struct sweep_args {
    const char *input, *gridspec, *out, *isa_name, *report, *heatmap, *metric_name;
    const char *split_arg, *folds_arg, *fee_arg; /* as given: passed on to the report */
    const char *warmup_arg;                      /* --warmup as given */
    const char *columns_arg, *sort_arg;          /* as given: refused with the folds */
    const char *strategy, *where;                /* --strategy, --where as given */
    long long top, threads;
    int quiet, reference, list_strategies, static_report;
    int time_stats, compounded; /* --time-stats, --compounded */
    double ppy;                 /* --periods-per-year (0: inferred) */
    long long min_trades;       /* --min-trades (0: every combo eligible) */
    /* --strategy resolved: def NULL is HMA by the int64 path (by-name HMA grids included);
     * else a strategy swept by tf_sweep_with over dgrid, lib its plugin (or NULL) */
    const tf_strategy_def *def;
    tf_strategy_lib *lib;
    int hma_by_name;   /* an HMA grid by name or with --where: the report gets it as a file */
    tf_results schema; /* the table the column names are looked up in */
    tf_isa isa;
    double fee;
    tf_cli_series_opts sopts;
    tf_cli_series_info sinfo; /* with folds: the dates the fold rows carry */
    tf_cli_oos oos;
    tf_cli_columns cols;
    tf_cli_order order;
} sweep_args;

static const struct option long_opts[] = {{"input", required_argument, 0, 'i'},
                                          TF_CLI_SERIES_OPTIONS,
                                          {"grid", required_argument, 0, 'g'},
                                          {"out", required_argument, 0, 'o'},
                                          {"top", required_argument, 0, 'k'},
                                          {"threads", required_argument, 0, 't'},
                                          {"isa", required_argument, 0, 'a'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {"split", required_argument, 0, 'F'},
                                          {"walk-forward", required_argument, 0, 'W'},
                                          {"anchored", no_argument, 0, 'A'},
                                          {"warmup", required_argument, 0, 'U'},
                                          {"time-stats", no_argument, 0, 0x5401},
                                          {"compounded", no_argument, 0, 0x5402},
                                          {"periods-per-year", required_argument, 0, 0x5403},
                                          {"min-trades", required_argument, 0, 0x5404},
                                          {"metric", required_argument, 0, 'M'},
                                          {"report", required_argument, 0, 'R'},
                                          {"heatmap", required_argument, 0, 'H'},
                                          {"static", no_argument, 0, 'Y'},
                                          {"columns", required_argument, 0, 'C'},
                                          {"sort", required_argument, 0, 'O'},
                                          {"fee", required_argument, 0, 'f'},
                                          {"strategy", required_argument, 0, 'S'},
                                          {"where", required_argument, 0, 'w'},
                                          {"list-strategies", no_argument, 0, 'Z'},
                                          {0, 0, 0, 0}};

/* An integer option in lo..hi; else one line naming what it wants, and -1. */
static int int_arg(const char *name, const char *arg, long long lo, long long hi, const char *want,
                   long long *v)
{
    char *end;
    errno = 0;
    *v = strtoll(arg, &end, 10);
    if (*end || end == arg || errno || *v < lo || *v > hi) {
        fprintf(stderr, "tollfree sweep: --%s wants %s, got '%s'\n", name, want, arg);
        return -1;
    }
    return 0;
}

/* Options whose value is kept as given, and flags: where each goes in sweep_args. */
static const struct {
    int c;
    size_t off;
} string_opts[] =
    {{'i', offsetof(sweep_args, input)},       {'g', offsetof(sweep_args, gridspec)},
     {'o', offsetof(sweep_args, out)},         {'a', offsetof(sweep_args, isa_name)},
     {'R', offsetof(sweep_args, report)},      {'H', offsetof(sweep_args, heatmap)},
     {'S', offsetof(sweep_args, strategy)},    {'w', offsetof(sweep_args, where)},
     {'M', offsetof(sweep_args, metric_name)}, {'C', offsetof(sweep_args, columns_arg)},
     {'O', offsetof(sweep_args, sort_arg)}},
  flag_opts[] = {{'q', offsetof(sweep_args, quiet)},
                 {0x5401, offsetof(sweep_args, time_stats)},
                 {0x5402, offsetof(sweep_args, compounded)},
                 {'Z', offsetof(sweep_args, list_strategies)},
                 {'Y', offsetof(sweep_args, static_report)}};

/* One option with its value (getopt's c and optarg): 0, or 2 after one line on stderr. */
static int take_option(int c, const char *arg, void *ctx)
{
    sweep_args *a = ctx;
    int taken = tf_cli_series_option(c, arg, &a->sopts);
    if (taken != 1)
        return taken;
    for (size_t i = 0; i < sizeof string_opts / sizeof string_opts[0]; i++)
        if (string_opts[i].c == c) {
            memcpy((char *)a + string_opts[i].off, &arg, sizeof arg);
            return 0;
        }
    for (size_t i = 0; i < sizeof flag_opts / sizeof flag_opts[0]; i++)
        if (flag_opts[i].c == c) {
            *(int *)(void *)((char *)a + flag_opts[i].off) = 1;
            return 0;
        }
    long long v;
    char *end;
    switch (c) {
    case 'k':
        return int_arg("top", arg, 1, LLONG_MAX, "a positive integer", &a->top) ? 2 : 0;
    case 't': {
        char want[32];
        snprintf(want, sizeof want, "0..%d", TF_MAX_THREADS);
        return int_arg("threads", arg, 0, TF_MAX_THREADS, want, &a->threads) ? 2 : 0;
    }
    case 'W':
        a->folds_arg = arg;
        if (int_arg("walk-forward", arg, 1, 1000, "1..1000 folds", &v))
            return 2;
        a->oos.folds = (int)v;
        return 0;
    case 'A':
        a->oos.anchored = 1;
        return 0;
    case 'U':
        a->warmup_arg = arg;
        if (!strcmp(arg, "all")) {
            a->oos.warmup = TF_OOS_WARMUP_ALL;
            return 0;
        }
        if (int_arg("warmup", arg, 0, TF_MAX_BARS, "a number of bars N >= 0 or 'all'", &v))
            return 2;
        a->oos.warmup = v;
        return 0;
    case 'F':
        a->split_arg = arg;
        a->oos.split = strtod(arg, &end);
        if (*end || end == arg || !(a->oos.split > 0 && a->oos.split < 1)) {
            fprintf(stderr, "tollfree sweep: --split wants a fraction 0 < F < 1, got '%s'\n", arg);
            return 2;
        }
        return 0;
    case 0x5403:
        a->ppy = strtod(arg, &end);
        if (*end || end == arg || !(a->ppy > 0.0) || !isfinite(a->ppy)) {
            fprintf(stderr,
                    "tollfree sweep: --periods-per-year wants a positive number (252 for daily "
                    "stock bars, 365 for daily crypto), got '%s'\n",
                    arg);
            return 2;
        }
        a->time_stats = 1;
        return 0;
    case 0x5404:
        return int_arg("min-trades", arg, 0, LLONG_MAX, "a number of trades N >= 0", &a->min_trades)
                   ? 2
                   : 0;
    case 'f':
        a->fee_arg = arg;
        return tf_cli_parse_fee("tollfree sweep", arg, &a->fee) ? 2 : 0;
    default:
        return 2;
    }
}

/* --heatmap X,Y: two of the six windows, checked before the sweep (the report draws it after).
 * 0, or -1 after one line on stderr. */
static int check_heatmap(const char *spec, const tf_results *schema)
{
    const char *comma = strchr(spec, ',');
    int ok = comma && !strchr(comma + 1, ',');
    for (int k = 0; ok && k < 2; k++) {
        const char *p = k ? comma + 1 : spec, *e = k ? p + strlen(p) : comma;
        while (p < e && (*p == ' ' || *p == '\t')) /* the report strips each name */
            p++;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        int col = tf_results_column_find(schema, p, (size_t)(e - p), NULL, NULL, 0);
        ok = col >= 0 && (tf_results_column_flags(schema, col) & TF_COLUMN_WINDOW);
    }
    if (!ok && !schema->dparams)
        fprintf(stderr,
                "tollfree sweep: --heatmap wants two of the windows L,half,sq,p,p3,p2 as X,Y "
                "(e.g. L,sq), got '%s'\n",
                spec);
    else if (!ok)
        fprintf(stderr,
                "tollfree sweep: --heatmap wants two of the strategy's parameters as X,Y "
                "(e.g. %s,%s), got '%s'\n",
                schema->param_names[0],
                schema->n_params > 1 ? schema->param_names[1] : schema->param_names[0], spec);
    return ok ? 0 : -1;
}

/* Prints the built-in strategies, one a line: "name(param, ...)". */
static void list_strategies(void)
{
    for (int i = 0; tf_strategy_builtin_name(i); i++) {
        const tf_strategy_def *d = tf_strategy_builtin(tf_strategy_builtin_name(i));
        printf("%s(", d->name);
        for (uint32_t k = 0; k < d->n_params; k++)
            printf("%s%s", k ? ", " : "", d->param_names[k]);
        printf(")\n");
    }
}

static const double schema_dummy = 0.0;

/* --strategy resolved into a->def / a->lib (HMA: def NULL), the table the column names are
 * looked up in, and the options that name columns parsed against it. 0, or the exit status
 * after one line on stderr: 2 for the command line (an unknown name, a column or a grid form
 * the strategy does not have), 1 for a plugin that cannot be used (the loader's reason). */
static int resolve_strategy(sweep_args *a)
{
    a->schema = (tf_results){0};
    if (a->strategy) {
        char msg[1024];
        const tf_strategy_def *def;
        int rc = tf_strategy_resolve(a->strategy, &def, &a->lib, msg, sizeof msg);
        if (rc) {
            int path =
                strchr(a->strategy, '/') != NULL ||
                (strlen(a->strategy) > 3 && !strcmp(a->strategy + strlen(a->strategy) - 3, ".so"));
            fprintf(stderr, "tollfree sweep: --strategy: %s\n", msg);
            return path ? 1 : 2;
        }
        if (def != tf_strategy_builtin("hma")) {
            a->def = def;
            a->schema.dparams = &schema_dummy;
            a->schema.n_params = def->n_params;
            a->schema.param_names = def->param_names;
        }
    }
    int by_name = strchr(a->gridspec, '=') != NULL;
    if (a->def && !by_name) {
        char names[1024];
        size_t at = 0;
        for (uint32_t k = 0; k < a->def->n_params && at < sizeof names; k++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s=LO:HI:STEP", k ? "," : "",
                                   a->def->param_names[k]);
        fprintf(stderr,
                "tollfree sweep: --strategy %s wants its grid by name: --grid %s (got '%s')\n",
                a->def->name, names, a->gridspec);
        return 2;
    }
    a->hma_by_name = !a->def && (by_name || a->where);
    if (tf_cli_columns_parse(a->columns_arg ? a->columns_arg : "all", &a->schema, &a->cols))
        return 2;
    if (a->sort_arg && tf_cli_order_parse("--sort", a->sort_arg, &a->schema, &a->order))
        return 2;
    if (a->metric_name) {
        if (tf_cli_order_parse("--metric", a->metric_name, &a->schema, &a->oos.metric))
            return 2;
        if (tf_results_column_flags(&a->schema, a->oos.metric.col) & TF_COLUMN_WINDOW) {
            fprintf(stderr, "tollfree sweep: --metric %s: a %s is not a metric\n", a->metric_name,
                    a->def ? "parameter" : "window");
            return 2;
        }
    } else {
        a->metric_name = "pnl";
        a->oos.metric = (tf_cli_order){tf_results_column_pnl(&a->schema), 1};
    }
    return 0;
}

/* The options that go together or name files must agree. 0, or the exit status after one line
 * on stderr (2; 1 for a plugin that cannot be used). */
static int check_args(sweep_args *a)
{
    int st = resolve_strategy(a);
    if (st)
        return st;
    if (a->split_arg && a->folds_arg) {
        fputs("tollfree sweep: --split and --walk-forward exclude each other\n", stderr);
        return 2;
    }
    if (a->out && strcmp(a->out, "-")) {
        const char *dot = strrchr(a->out, '.'), *slash = strrchr(a->out, '/');
        if (dot && (!slash || dot > slash) && strcmp(dot, ".csv") && strcmp(dot, ".txt")) {
            fprintf(stderr,
                    "tollfree sweep: --out %s: unknown output format '%s' (tollfree writes CSV: "
                    "use a .csv name)\n",
                    a->out, dot);
            return 2;
        }
    } else {
        a->out = NULL; /* stdout */
    }
    if (a->report) {
        size_t rl = strlen(a->report);
        if (rl < 5 || (strcmp(a->report + rl - 5, ".html") &&
                       (rl < 4 || strcmp(a->report + rl - 4, ".htm")))) {
            fprintf(stderr, "tollfree sweep: --report %s: the report is HTML: use a .html name\n",
                    a->report);
            return 2;
        }
    }
    if (a->heatmap && !a->report) {
        fputs("tollfree sweep: --heatmap goes with --report FILE.html\n", stderr);
        return 2;
    }
    if (a->static_report && !a->report) {
        fputs("tollfree sweep: --static goes with --report FILE.html\n", stderr);
        return 2;
    }
    if (a->heatmap && check_heatmap(a->heatmap, &a->schema))
        return 2;
    if ((a->time_stats || a->compounded) && (a->folds_arg || a->split_arg)) {
        fprintf(stderr,
                "tollfree sweep: %s goes with the per-combo table, not --split / "
                "--walk-forward (the rows are folds): run it without them\n",
                a->time_stats ? "--time-stats" : "--compounded");
        return 2;
    }
    if ((a->oos.anchored || a->warmup_arg) && !a->folds_arg && !a->split_arg) {
        fprintf(stderr, "tollfree sweep: %s goes with --walk-forward K (or --split F)\n",
                a->oos.anchored ? "--anchored" : "--warmup");
        return 2;
    }
    if (a->split_arg || a->folds_arg) {
        const char *opt = a->columns_arg ? "--columns" : a->sort_arg ? "--sort" : NULL;
        opt = a->top > 0 ? "--top" : opt;
        if (opt) {
            fprintf(stderr,
                    "tollfree sweep: %s does not apply to --%s: the output is one row per fold "
                    "(its columns fixed), not per combo; rank the combos without --%s\n",
                    opt, a->split_arg ? "split" : "walk-forward",
                    a->split_arg ? "split" : "walk-forward");
            return 2;
        }
    }
    a->reference = !strcmp(a->isa_name, "reference");
    a->isa = TF_ISA_AUTO;
    if (!a->reference && tf_isa_parse(a->isa_name, &a->isa)) {
        fprintf(stderr,
                "tollfree sweep: --isa wants auto, scalar, sse2, avx2, avx512 or reference, got "
                "'%s'\n",
                a->isa_name);
        return 2;
    }
    if (!tf_isa_supported(a->isa)) {
        fprintf(stderr, "tollfree sweep: --isa %s: this CPU does not support it%s\n", a->isa_name,
                getenv("TF_ISA_MAX") ? " (or TF_ISA_MAX caps it)" : "");
        return 2;
    }
    const char *isa_max = getenv("TF_ISA_MAX");
    tf_isa cap;
    if (isa_max && *isa_max && tf_isa_parse(isa_max, &cap))
        fprintf(stderr,
                "tollfree sweep: ignoring TF_ISA_MAX='%s' (wants scalar, sse2, avx2 or avx512)\n",
                isa_max);
    if (a->top > 0 && a->order.col < 0)
        a->order.col = tf_results_column_pnl(&a->schema);
    return 0;
}

/* Parses argv into a. -1: go on; else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, sweep_args *a)
{
    *a = (sweep_args){.sopts = {.column = "close"},
                      .gridspec = "default",
                      .isa_name = "auto",
                      .top = -1,
                      .fee = TF_FEE_DEFAULT,
                      .oos = {.metric = {TF_COLUMN_PNL, 1}},
                      .order = {-1, 1}};
    int rc = tf_cli_options("tollfree sweep", argc, argv, long_opts, take_option, a);
    if (rc < 0 && (a->list_strategies || (a->strategy && !strcmp(a->strategy, "list")))) {
        list_strategies();
        return 0;
    }
    if (rc == 0) {
        fputs(usage, stdout);
        fputs(tf_cli_series_help, stdout);
        fputs(usage_grid, stdout);
        fputs(usage_out, stdout);
        fputs(usage_time, stdout);
        fputs(usage_panel, stdout);
    }
    if (rc >= 0)
        return rc;
    rc = check_args(a);
    return rc ? rc : -1;
}

/* One line naming the combo (numbered from 1, as every grid message) that def's init refused. */
static void refused_combo(const tf_strategy_def *def, const double *dgrid, int64_t bad)
{
    if (bad < 0) {
        fprintf(stderr, "tollfree sweep: %s refused the grid\n", def->name);
        return;
    }
    fprintf(stderr, "tollfree sweep: grid combo %lld (", (long long)bad + 1);
    for (uint32_t k = 0; k < def->n_params; k++)
        fprintf(stderr, "%s%s=%.17g", k ? ", " : "", def->param_names[k],
                dgrid[(size_t)bad * def->n_params + k]);
    fprintf(stderr,
            ") is refused by %s's init: invalid parameters (docs/strategies.md gives "
            "each strategy's rules)\n",
            def->name);
}

/* A grid by name (tf_grid_named, with --where) for def: 0 and *out[*m][def->n_params], or the
 * exit status after one line on stderr (2: the spec or --where, 1: out of memory). */
static int named_grid(const sweep_args *a, const tf_strategy_def *def, double **out, int64_t *m)
{
    char msg[2048];
    int rc = tf_grid_named(def, a->gridspec, a->where, out, m, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "tollfree sweep: %s\n", msg);
        return rc == TF_E_NOMEM ? 1 : 2;
    }
    return 0;
}

/* HMA by name or with --where: the grid as the six windows (whole numbers), *grid replaced.
 * 0, or the exit status after one line on stderr. */
static int hma_grid(const sweep_args *a, int64_t **grid, int64_t *m)
{
    const tf_strategy_def *hma = tf_strategy_builtin("hma");
    double *d = NULL;
    char msg[2048];
    int rc = 0;
    if (strchr(a->gridspec, '=')) {
        rc = named_grid(a, hma, &d, m);
        if (rc)
            return rc;
        free(*grid);
        *grid = malloc(sizeof(int64_t) * 6 * (size_t)*m);
        if (!*grid) {
            free(d);
            fputs("tollfree sweep: out of memory\n", stderr);
            return 1;
        }
        for (int64_t j = 0; j < 6 * *m; j++) {
            double v = d[j];
            if (!(v >= 1.0 && v <= (double)TF_MAX_WINDOW && v == floor(v))) {
                fprintf(stderr,
                        "tollfree sweep: --grid: hma's %s must be whole numbers 1..%lld, got "
                        "%.17g\n",
                        hma->param_names[j % 6], (long long)TF_MAX_WINDOW, v);
                free(d);
                return 2;
            }
            (*grid)[j] = (int64_t)v;
        }
        free(d);
        return 0;
    }
    /* a legacy grid with --where: the conditions over its windows */
    d = malloc(sizeof(double) * 6 * (size_t)(*m ? *m : 1));
    unsigned char *keep = malloc((size_t)(*m ? *m : 1));
    if (!d || !keep) {
        free(d);
        free(keep);
        fputs("tollfree sweep: out of memory\n", stderr);
        return 1;
    }
    for (int64_t j = 0; j < 6 * *m; j++)
        d[j] = (double)(*grid)[j];
    rc = tf_grid_where(a->where, hma->param_names, 6, d, *m, keep, msg, sizeof msg);
    int64_t kept = 0;
    for (int64_t j = 0; !rc && j < *m; j++)
        if (keep[j]) {
            memmove(*grid + 6 * kept, *grid + 6 * j, 6 * sizeof(int64_t));
            kept++;
        }
    free(d);
    free(keep);
    if (rc) {
        fprintf(stderr, "tollfree sweep: %s\n", msg);
        return 2;
    }
    if (kept == 0) {
        fprintf(stderr, "tollfree sweep: --where %s keeps none of the %lld combos of the grid\n",
                a->where, (long long)*m);
        return 2;
    }
    *m = kept;
    return 0;
}

/* 1 if the sort column or a listed column is a time-aware figure (TF_COLUMN_TIME). */
static int time_columns_wanted(const sweep_args *a)
{
    int need =
        a->order.col >= 0 && (tf_results_column_flags(&a->schema, a->order.col) & TF_COLUMN_TIME);
    for (int k = 0; k < a->cols.n; k++)
        need |= (tf_results_column_flags(&a->schema, a->cols.idx[k]) & TF_COLUMN_TIME) != 0;
    return need;
}

/* The inputs: the series (the file's, or the embedded data: *close stays NULL) and the grid
 * (HMA: *grid [m][6]; a strategy: *dgrid [m][n_params]). 0, or the exit status after one line
 * on stderr (2: a malformed --grid spec or --where). */
static int load_inputs(sweep_args *a, double **close, int64_t *n, int64_t **grid, double **dgrid,
                       int64_t *m)
{
    *close = NULL;
    *grid = NULL;
    *dgrid = NULL;
    int rc;
    /* the grid first: a command line error is found before a long read */
    if (a->def) {
        rc = named_grid(a, a->def, dgrid, m);
        if (rc)
            return rc;
        int64_t bad = -1;
        rc = tf_strategy_params_check(a->def, *dgrid, *m, &bad, NULL, 0);
        if (rc) {
            refused_combo(a->def, *dgrid, bad);
            free(*dgrid);
            *dgrid = NULL;
            return 1;
        }
    } else if (!strchr(a->gridspec, '=')) {
        rc = tf_cli_read_grid(a->gridspec, grid, m);
        if (rc)
            return rc == -2 ? 2 : 1;
    }
    if (a->hma_by_name) {
        rc = hma_grid(a, grid, m);
        if (rc) {
            free(*grid);
            *grid = NULL;
            return rc;
        }
    }
    if (*grid) {
        rc = tf_params_check(*grid, *m);
        if (rc) {
            int64_t bad = 0;
            while (bad < *m && tf_params_check(*grid + 6 * bad, 1) == 0)
                bad++;
            fprintf(stderr, "tollfree sweep: grid combo %lld: %s\n", (long long)bad + 1,
                    tf_strerror(rc));
            free(*grid);
            *grid = NULL;
            return 1;
        }
    }
    if (a->input) {
        tf_cli_series_opts so = a->sopts;
        /* the fold rows' dates; the time-aware figures' times */
        so.keep_dates = a->split_arg || a->folds_arg || a->time_stats || a->compounded ||
                        time_columns_wanted(a);
        if (tf_cli_read_series_ex(a->input, &so, close, n, &a->sinfo)) {
            free(*grid);
            free(*dgrid);
            *grid = NULL;
            *dgrid = NULL;
            return 1;
        }
    } else {
        *n = (int64_t)(tf_default_close_bytes / sizeof(double));
    }
    return 0;
}

/* Writes the text in buf[len] to a->out (or stdout): 0, or 1 after one line on stderr. */
static int write_out(const sweep_args *a, const char *buf, size_t len)
{
    FILE *f = a->out ? fopen(a->out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", a->out, strerror(errno));
        return 1;
    }
    int bad = fwrite(buf, 1, len, f) != len || fflush(f) != 0;
    if (f != stdout && fclose(f) != 0)
        bad = 1;
    if (bad) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", a->out ? a->out : "stdout", strerror(errno));
        return 1;
    }
    return 0;
}

/* --split / --walk-forward: one row per fold, written once every fold is done (an interrupted
 * run leaves no partial file). The exit status. */
static int run_oos(const sweep_args *a, const double *series, int64_t n, const int64_t *grid,
                   const double *dgrid, int64_t m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        fputs("tollfree sweep: out of memory\n", stderr);
        return 1;
    }
    tf_progress stop = {0};
    tf_sweep_opts o = {
        .threads = (int)a->threads, .isa = a->isa, .fee = &a->fee, .progress = &stop};
    tf_cli_interrupt_arm(&stop);
    tf_cli_oos oos = a->oos;
    oos.min_trades = a->min_trades;
    oos.dates = a->sinfo.dates;
    oos.date_off = a->sinfo.date_off;
    int rc =
        tf_cli_oos_run(mem, series, n, grid, a->def, dgrid, m, &oos, &o, a->reference, a->quiet);
    int interrupted = tf_cli_interrupt_disarm();
    int status = 1;
    if (fclose(mem) != 0)
        fputs("tollfree sweep: out of memory\n", stderr);
    else if (interrupted) {
        fputs("tollfree sweep: interrupted\n", stderr);
        status = 130;
    } else if (!rc)
        status = write_out(a, buf, len);
    free(buf);
    return status;
}

/* The plain sweep: one row per combo (--columns, --sort, --top). The exit status. */
/* A strategy's sweep (tf_sweep_with, or its reference) with Ctrl-C armed: the kernel's code. */
static int sweep_with(const sweep_args *a, const double *series, int64_t n, const double *dgrid,
                      int64_t m, double *pnl, int64_t *trades, tf_sweep_opts *o)
{
    tf_progress stop = {0};
    o->progress = &stop;
    tf_cli_interrupt_arm(&stop);
    int rc = a->reference ? tf_sweep_with_reference(a->def, series, n, dgrid, m, pnl, trades, o)
                          : tf_sweep_with(a->def, series, n, dgrid, m, pnl, trades, o);
    tf_cli_interrupt_disarm();
    o->progress = NULL;
    return rc;
}

/* The sweep with the time-aware figures of every combo in the same pass (HMA: tf_sweep_time;
 * def: tf_sweep_with_time), with Ctrl-C armed: the library's code, msg its message. */
static int sweep_timed(const tf_strategy_def *def, const double *series, int64_t n,
                       const int64_t *grid, const double *dgrid, int64_t m, double *pnl,
                       int64_t *trades, tf_sweep_opts *o, const tf_time_opts *topts,
                       tf_time_stats *ts, char *msg, size_t cap)
{
    tf_progress stop = {0};
    o->progress = &stop;
    tf_cli_interrupt_arm(&stop);
    int rc = def ? tf_sweep_with_time(def, series, n, dgrid, m, pnl, trades, o, topts, ts, msg, cap)
                 : tf_sweep_time(series, n, grid, m, pnl, trades, o, topts, ts, msg, cap);
    tf_cli_interrupt_disarm();
    o->progress = NULL;
    return rc;
}

static int run_plain(const sweep_args *a, const double *series, int64_t n, const int64_t *grid,
                     const double *dgrid, int64_t m)
{
    int want_stats = tf_cli_columns_need_stats(&a->cols, a->order.col, &a->schema);
    size_t k = (size_t)(m ? m : 1);
    double *pnl = malloc(sizeof(double) * k);
    int64_t *trades = malloc(sizeof(int64_t) * k);
    tf_stats *stats = want_stats ? malloc(sizeof(tf_stats) * k) : NULL;
    tf_time_stats *tstats = NULL;
    FILE *f = NULL;
    int status = 1;
    if (!pnl || !trades || (want_stats && !stats)) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
    }
    tf_sweep_opts o = {.threads = (int)a->threads, .isa = a->isa, .fee = &a->fee, .stats = stats};
    tf_time_opts topts = {.size = sizeof topts,
                          .times = a->sinfo.times,
                          .periods_per_year = a->ppy,
                          .fee = &a->fee,
                          .threads = (int)a->threads};
    /* The time-aware figures come from the sweep itself (one pass, every combo, any strategy); a
     * ranking or a column by one needs them for every combo (--isa reference: a second pass) */
    int time_cols = time_columns_wanted(a);
    int timed = (a->time_stats || a->compounded || time_cols) && !a->reference;
    if (timed && !(tstats = malloc(sizeof(tf_time_stats) * k))) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
    }
    double t0 = now_s();
    char tmsg[512] = "";
    int rc = timed ? sweep_timed(a->def, series, n, grid, dgrid, m, pnl, trades, &o, &topts, tstats,
                                 tmsg, sizeof tmsg)
             : a->def ? sweep_with(a, series, n, dgrid, m, pnl, trades, &o)
                      : tf_cli_sweep_run(series, n, grid, m, pnl, trades, &o, a->reference,
                                         !a->quiet && isatty(STDERR_FILENO));
    double dt = now_s() - t0;
    if (rc == TF_E_CANCELLED) {
        fputs("tollfree sweep: interrupted\n", stderr);
        status = 130;
        goto done;
    }
    if (rc == TF_E_STRATEGY && a->def) { /* init refused a combo: name it */
        int64_t bad = -1;
        tf_strategy_params_check(a->def, dgrid, m, &bad, NULL, 0);
        refused_combo(a->def, dgrid, bad);
        goto done;
    }
    if (rc && tmsg[0]) {
        fprintf(stderr, "tollfree sweep: time-aware figures: %s\n", tmsg);
        goto done;
    }
    if (rc) {
        fprintf(stderr, "tollfree sweep: %s\n", tf_strerror(rc));
        goto done;
    }
    if (time_cols && !timed) {
        tstats = malloc(sizeof(tf_time_stats) * k);
        rc = !tstats  ? TF_E_NOMEM
             : a->def ? tf_time_stats_with(a->def, series, n, dgrid, m, &topts, tstats, tmsg,
                                           sizeof tmsg)
                      : tf_time_stats_hma(series, n, grid, m, &topts, tstats, tmsg, sizeof tmsg);
        if (rc) {
            fprintf(stderr, "tollfree sweep: time-aware figures: %s\n",
                    tmsg[0] ? tmsg : tf_strerror(rc));
            goto done;
        }
    }
    f = a->out ? fopen(a->out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", a->out, strerror(errno));
        goto done;
    }
    tf_results res = {grid, pnl, trades, stats, m, NULL, 0, NULL, tstats};
    if (a->def) {
        res.dparams = dgrid;
        res.n_params = a->def->n_params;
        res.param_names = a->def->param_names;
    }
    tf_cli_table_extra x = {.min_trades = a->min_trades,
                            .time = a->time_stats   ? 1
                                    : a->compounded ? 2
                                                    : 0,
                            .def = a->def,
                            .close = series,
                            .n = n,
                            .topts = topts};
    if (tf_cli_table_write_ex(f, &res, &a->cols, &a->order, a->top, &x))
        goto done;
    if (x.left_out && !a->quiet)
        fprintf(stderr,
                "tollfree sweep: --min-trades %lld: %lld of %lld combos left out of the ranking "
                "(fewer trades)\n",
                a->min_trades, (long long)x.left_out, (long long)m);
    if (!a->quiet)
        fprintf(stderr, "sweep: %s%s%lld combos x %lld bars in %.3f s (%s, %lld threads%s)\n",
                a->def ? a->def->name : "", a->def ? ": " : "", (long long)m, (long long)n, dt,
                a->reference ? "reference"
                             : tf_isa_name(a->isa == TF_ISA_AUTO ? tf_isa_best() : a->isa),
                a->reference ? 1
                : a->threads ? a->threads
                             : (long long)sysconf(_SC_NPROCESSORS_ONLN),
                stats ? ", with statistics" : "");
    status = 0;
done:
    if (f && f != stdout && fclose(f) != 0 && status == 0) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", a->out, strerror(errno));
        status = 1;
    }
    free(pnl);
    free(trades);
    free(stats);
    free(tstats);
    return status;
}

/* --report: the HTML report by the Python side, with the options that shape it. The exit
 * status. */
/* The grid as a CSV file L,half,sq,p,p3,p2 (for the report, which reads --grid FILE) at the
 * mkstemp template path. 0, or -1 after one line on stderr (and no file left). */
static int write_grid_tmp(const int64_t *grid, int64_t m, char *path)
{
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return -1;
    }
    for (int64_t j = 0; j < m; j++) {
        const int64_t *c = grid + 6 * j;
        fprintf(f, "%lld,%lld,%lld,%lld,%lld,%lld\n", (long long)c[0], (long long)c[1],
                (long long)c[2], (long long)c[3], (long long)c[4], (long long)c[5]);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

static int run_report(const sweep_args *a, const double *series, int64_t n, const int64_t *grid,
                      int64_t m)
{
    char stdin_tmp[] = "/tmp/tollfree-stdin-XXXXXX";
    char grid_tmp[] = "/tmp/tollfree-grid-XXXXXX";
    if (a->hma_by_name && write_grid_tmp(grid, m, grid_tmp))
        return 1;
    const char *src = a->input;
    if (src && !strcmp(src, "-")) { /* the report can't read stdin again: pass the bars */
        if (tf_cli_write_tmp(series, n, stdin_tmp)) {
            if (a->hma_by_name)
                unlink(grid_tmp);
            return 1;
        }
        src = stdin_tmp;
    }
    char tbuf[32];
    snprintf(tbuf, sizeof tbuf, "%lld", a->threads);
    const char *args[48];
    int k = 0;
#define ARG2(flag, value)                                                                          \
    do {                                                                                           \
        args[k++] = flag;                                                                          \
        args[k++] = value;                                                                         \
    } while (0)
    ARG2("--out", a->report);
    ARG2("--grid", a->hma_by_name ? grid_tmp : a->gridspec);
    if (a->def) { /* the report builds the same grid by name (tollfree.grid.named) */
        ARG2("--strategy", a->strategy);
        if (a->where)
            ARG2("--where", a->where);
    }
    ARG2("--metric", a->metric_name);
    ARG2("--threads", tbuf);
    if (src) {
        ARG2("--input", src);
        ARG2("--column", a->sopts.column);
    }
    if (a->sopts.raw || src == stdin_tmp)
        args[k++] = "--raw";
    if (a->sopts.skip_bad_rows)
        args[k++] = "--skip-bad-rows";
    if (a->sopts.date_column)
        ARG2("--date-column", a->sopts.date_column);
    if (a->sopts.sep && src != stdin_tmp)
        ARG2("--sep", a->sopts.sep == '\t' ? "tab" : a->sopts.sep == ';' ? ";" : ",");
    if (a->sopts.assume_sorted && src != stdin_tmp)
        args[k++] = "--assume-sorted";
    if (a->split_arg)
        ARG2("--split", a->split_arg);
    if (a->folds_arg)
        ARG2("--walk-forward", a->folds_arg);
    if (a->heatmap)
        ARG2("--heatmap", a->heatmap);
    if (a->fee_arg)
        ARG2("--fee", a->fee_arg);
    if (a->warmup_arg)
        ARG2("--warmup", a->warmup_arg);
    char mtbuf[24];
    if (a->min_trades > 0) {
        snprintf(mtbuf, sizeof mtbuf, "%lld", a->min_trades);
        ARG2("--min-trades", mtbuf);
    }
#undef ARG2
    if (a->oos.anchored)
        args[k++] = "--anchored";
    if (a->quiet)
        args[k++] = "--quiet";
    if (a->static_report)
        args[k++] = "--static";
    args[k] = NULL;
    int status = tf_cli_report((char *const *)args) ? 1 : 0;
    if (src == stdin_tmp)
        unlink(stdin_tmp);
    if (a->hma_by_name)
        unlink(grid_tmp);
    return status;
}

/* A NOTE (not a refusal) when combos can never trade on the series (with --split or
 * --walk-forward: on the shortest part a fold sweeps) or repeat an earlier combo
 * (tf_grid_check). */
static void grid_note(const sweep_args *a, int64_t n, const int64_t *grid, int64_t m)
{
    int64_t bars = n;
    if (a->split_arg || a->folds_arg) {
        tf_oos_opts o = {.size = sizeof o,
                         .split = a->folds_arg ? 0.0 : a->oos.split,
                         .walk_forward = a->oos.folds,
                         .anchored = a->oos.anchored};
        tf_fold f[TF_OOS_MAX_FOLDS];
        int nf = tf_folds(n, &o, f, TF_OOS_MAX_FOLDS, NULL, 0);
        for (int k = 0; k < nf; k++) {
            if (f[k].is_end - f[k].is_start < bars)
                bars = f[k].is_end - f[k].is_start;
            if (f[k].oos_end - f[k].oos_start < bars)
                bars = f[k].oos_end - f[k].oos_start;
        }
    }
    char msg[1024];
    if (tf_grid_check(grid, m, bars, NULL, msg, sizeof msg) > 0)
        fprintf(stderr, "tollfree sweep: note: %s%s\n", msg,
                bars < n ? " (on the shortest part of a fold)" : "");
}

int tf_cmd_sweep(int argc, char **argv)
{
    if (wants_panel(argc, argv))
        return exec_panel(argc, argv); /* --strategy and --where go with the arguments */
    sweep_args a;
    int status = parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    double *close, *dgrid;
    int64_t n, m, *grid;
    status = load_inputs(&a, &close, &n, &grid, &dgrid, &m);
    if (status) {
        tf_strategy_unload(a.lib);
        return status;
    }
    const double *series = close ? close : tf_default_close;
    if (!a.def)
        grid_note(&a, n, grid, m);
    if (a.split_arg || a.folds_arg)
        status = run_oos(&a, series, n, grid, dgrid, m);
    else
        status = run_plain(&a, series, n, grid, dgrid, m);
    if (status == 0 && a.report)
        status = run_report(&a, series, n, grid, m);
    free(close);
    free(grid);
    free(dgrid);
    free(a.sinfo.dates);
    free(a.sinfo.date_off);
    free(a.sinfo.times);
    tf_strategy_unload(a.lib);
    return status;
}
