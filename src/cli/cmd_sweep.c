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

static const char usage[] =
    "usage: tollfree sweep [options]\n"
    "\n"
    "Runs the HMA/HMA3 stop-and-reverse sweep (docs/definition.md) and prints one CSV row per\n"
    "combo: the six windows L,half,sq,p,p3,p2, then pnl,trades, the statistics wins,\n"
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
    "  --grid SPEC       default            the 80-combo grid, L = 6..200\n"
    "                    LO:HI:N            N Hull lengths from LO to HI, each expanded to six\n"
    "                                       windows as docs/definition.md section 2\n"
    "                    FILE               CSV rows L,half,sq,p,p3,p2 (optional header line)\n";

/* Kept apart: one string literal may not pass 4095 bytes (-Wpedantic). */
static const char usage_out[] =
    "out of sample:\n"
    "  --split F         in-sample = the first floor(n*F) bars, out-of-sample = the rest\n"
    "                    (0 < F < 1), each swept cold; prints one row per fold, not per combo\n"
    "  --walk-forward K  K folds (1..1000): the bars cut into K+1 equal segments; fold k picks\n"
    "                    its winner on segment k-1 and tests it on segment k. With either,\n"
    "                    --columns, --sort and --top are refused (the rows are folds)\n"
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
    "  --report FILE.html  also write a self-contained HTML report: inputs, ranked table, plots,\n"
    "                    the best combo's equity, the out-of-sample table (python3-matplotlib)\n"
    "  --heatmap X,Y     in the report, pnl over two of the six windows (others maximised\n"
    "                    over); checked before the sweep\n"
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
    "  tollfree sweep --input prices.csv --walk-forward 4 --report report.html\n";

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
    "  --threads (per Dask task: default 1), --isa (not reference) and --quiet apply; the other\n"
    "  options do not.\n"
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
    const char *columns_arg, *sort_arg;          /* as given: refused with the folds */
    long long top, threads;
    int quiet, reference;
    tf_isa isa;
    double fee;
    tf_cli_series_opts sopts;
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
                                          {"metric", required_argument, 0, 'M'},
                                          {"report", required_argument, 0, 'R'},
                                          {"heatmap", required_argument, 0, 'H'},
                                          {"columns", required_argument, 0, 'C'},
                                          {"sort", required_argument, 0, 'O'},
                                          {"fee", required_argument, 0, 'f'},
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
} string_opts[] = {{'i', offsetof(sweep_args, input)},  {'g', offsetof(sweep_args, gridspec)},
                   {'o', offsetof(sweep_args, out)},    {'a', offsetof(sweep_args, isa_name)},
                   {'R', offsetof(sweep_args, report)}, {'H', offsetof(sweep_args, heatmap)}},
  flag_opts[] = {{'q', offsetof(sweep_args, quiet)}};

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
    case 'F':
        a->split_arg = arg;
        a->oos.split = strtod(arg, &end);
        if (*end || end == arg || !(a->oos.split > 0 && a->oos.split < 1)) {
            fprintf(stderr, "tollfree sweep: --split wants a fraction 0 < F < 1, got '%s'\n", arg);
            return 2;
        }
        return 0;
    case 'M':
        a->metric_name = arg;
        if (tf_cli_order_parse("--metric", arg, &a->oos.metric))
            return 2;
        if (tf_column_flags(a->oos.metric.col) & TF_COLUMN_WINDOW) {
            fprintf(stderr, "tollfree sweep: --metric %s: a window is not a metric\n", arg);
            return 2;
        }
        return 0;
    case 'C':
        a->columns_arg = arg;
        return tf_cli_columns_parse(arg, &a->cols) ? 2 : 0;
    case 'O':
        a->sort_arg = arg;
        return tf_cli_order_parse("--sort", arg, &a->order) ? 2 : 0;
    case 'f':
        a->fee_arg = arg;
        return tf_cli_parse_fee("tollfree sweep", arg, &a->fee) ? 2 : 0;
    default:
        return 2;
    }
}

/* --heatmap X,Y: two of the six windows, checked before the sweep (the report draws it after).
 * 0, or -1 after one line on stderr. */
static int check_heatmap(const char *spec)
{
    const char *comma = strchr(spec, ',');
    int ok = comma && !strchr(comma + 1, ',');
    for (int k = 0; ok && k < 2; k++) {
        const char *p = k ? comma + 1 : spec, *e = k ? p + strlen(p) : comma;
        while (p < e && (*p == ' ' || *p == '\t')) /* the report strips each name */
            p++;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        int col = tf_column_find(p, (size_t)(e - p), NULL, NULL, 0);
        ok = col >= 0 && (tf_column_flags(col) & TF_COLUMN_WINDOW);
    }
    if (!ok)
        fprintf(stderr,
                "tollfree sweep: --heatmap wants two of the windows L,half,sq,p,p3,p2 as X,Y "
                "(e.g. L,sq), got '%s'\n",
                spec);
    return ok ? 0 : -1;
}

/* The options that go together or name files must agree. 0, or 2 after one line on stderr. */
static int check_args(sweep_args *a)
{
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
    if (a->heatmap && check_heatmap(a->heatmap))
        return 2;
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
        a->order.col = TF_COLUMN_PNL;
    return 0;
}

/* Parses argv into a. -1: go on; else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, sweep_args *a)
{
    *a = (sweep_args){.sopts = {.column = "close"},
                      .gridspec = "default",
                      .isa_name = "auto",
                      .metric_name = "pnl",
                      .top = -1,
                      .fee = TF_FEE_DEFAULT,
                      .oos = {.metric = {TF_COLUMN_PNL, 1}},
                      .order = {-1, 1}};
    tf_cli_columns_parse("all", &a->cols);
    int rc = tf_cli_options("tollfree sweep", argc, argv, long_opts, take_option, a);
    if (rc == 0) {
        fputs(usage, stdout);
        fputs(tf_cli_series_help, stdout);
        fputs(usage_grid, stdout);
        fputs(usage_out, stdout);
        fputs(usage_panel, stdout);
    }
    if (rc >= 0)
        return rc;
    return check_args(a) ? 2 : -1;
}

/* The inputs: the series (the file's, or the embedded data: *close stays NULL) and the grid.
 * 0, or the exit status after one line on stderr (2: a malformed --grid spec). */
static int load_inputs(sweep_args *a, double **close, int64_t *n, int64_t **grid, int64_t *m)
{
    *close = NULL;
    *grid = NULL;
    if (a->input) {
        if (tf_cli_read_series_ex(a->input, &a->sopts, close, n, NULL))
            return 1;
    } else {
        *n = (int64_t)(tf_default_close_bytes / sizeof(double));
    }
    int rc = tf_cli_read_grid(a->gridspec, grid, m);
    if (rc) {
        free(*close);
        *close = NULL;
        return rc == -2 ? 2 : 1;
    }
    rc = tf_params_check(*grid, *m);
    if (rc) {
        int64_t bad = 0;
        while (bad < *m && tf_params_check(*grid + 6 * bad, 1) == 0)
            bad++;
        fprintf(stderr, "tollfree sweep: grid combo %lld: %s\n", (long long)bad + 1,
                tf_strerror(rc));
        free(*close);
        free(*grid);
        *close = NULL;
        *grid = NULL;
        return 1;
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
                   int64_t m)
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
    int rc = tf_cli_oos_run(mem, series, n, grid, m, &a->oos, &o, a->reference, a->quiet);
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
static int run_plain(const sweep_args *a, const double *series, int64_t n, const int64_t *grid,
                     int64_t m)
{
    int want_stats = tf_cli_columns_need_stats(&a->cols, a->order.col);
    size_t k = (size_t)(m ? m : 1);
    double *pnl = malloc(sizeof(double) * k);
    int64_t *trades = malloc(sizeof(int64_t) * k);
    tf_stats *stats = want_stats ? malloc(sizeof(tf_stats) * k) : NULL;
    FILE *f = NULL;
    int status = 1;
    if (!pnl || !trades || (want_stats && !stats)) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
    }
    tf_sweep_opts o = {.threads = (int)a->threads, .isa = a->isa, .fee = &a->fee, .stats = stats};
    double t0 = now_s();
    int rc = tf_cli_sweep_run(series, n, grid, m, pnl, trades, &o, a->reference,
                              !a->quiet && isatty(STDERR_FILENO));
    double dt = now_s() - t0;
    if (rc == TF_E_CANCELLED) {
        fputs("tollfree sweep: interrupted\n", stderr);
        status = 130;
        goto done;
    }
    if (rc) {
        fprintf(stderr, "tollfree sweep: %s\n", tf_strerror(rc));
        goto done;
    }
    f = a->out ? fopen(a->out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", a->out, strerror(errno));
        goto done;
    }
    tf_results res = {grid, pnl, trades, stats, m};
    if (tf_cli_table_write(f, &res, &a->cols, &a->order, a->top))
        goto done;
    if (!a->quiet)
        fprintf(stderr, "sweep: %lld combos x %lld bars in %.3f s (%s, %lld threads%s)\n",
                (long long)m, (long long)n, dt,
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
    return status;
}

/* --report: the HTML report by the Python side, with the options that shape it. The exit
 * status. */
static int run_report(const sweep_args *a, const double *series, int64_t n)
{
    char stdin_tmp[] = "/tmp/tollfree-stdin-XXXXXX";
    const char *src = a->input;
    if (src && !strcmp(src, "-")) { /* the report can't read stdin again: pass the bars */
        if (tf_cli_write_tmp(series, n, stdin_tmp))
            return 1;
        src = stdin_tmp;
    }
    char tbuf[32];
    snprintf(tbuf, sizeof tbuf, "%lld", a->threads);
    const char *args[32];
    int k = 0;
#define ARG2(flag, value)                                                                          \
    do {                                                                                           \
        args[k++] = flag;                                                                          \
        args[k++] = value;                                                                         \
    } while (0)
    ARG2("--out", a->report);
    ARG2("--grid", a->gridspec);
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
#undef ARG2
    if (a->quiet)
        args[k++] = "--quiet";
    args[k] = NULL;
    int status = tf_cli_report((char *const *)args) ? 1 : 0;
    if (src == stdin_tmp)
        unlink(stdin_tmp);
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
                         .walk_forward = a->oos.folds};
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
        return exec_panel(argc, argv);
    sweep_args a;
    int status = parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    double *close;
    int64_t n, m, *grid;
    status = load_inputs(&a, &close, &n, &grid, &m);
    if (status)
        return status;
    const double *series = close ? close : tf_default_close;
    grid_note(&a, n, grid, m);
    if (a.split_arg || a.folds_arg)
        status = run_oos(&a, series, n, grid, m);
    else
        status = run_plain(&a, series, n, grid, m);
    if (status == 0 && a.report)
        status = run_report(&a, series, n);
    free(close);
    free(grid);
    return status;
}
