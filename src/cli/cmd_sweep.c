/* tollfree sweep: the parameter sweep from the command line. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
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
    "                    (150,000 bars, docs/definition.md section 1)\n"
    "  --column NAME     the close column, any case (default: close; e.g. 'Adj Close'); in a\n"
    "                    file without a header line, its 1-based number\n"
    "  --date-column NAME  the date column (default: the first named date, datetime, time,\n"
    "                    timestamp, ...; 'none': no dates). Newest-first files are reversed to\n"
    "                    oldest first (said on stderr); dates out of order are an error\n"
    "  --skip-bad-rows   skip rows whose close is empty, not a number, not finite or <= 0, and\n"
    "                    count them on stderr (default: stop at the first, with line and column)\n"
    "  --raw             read FILE as raw little-endian f64 whatever its name\n"
    "  --grid SPEC       default            the 80-combo grid, L = 6..200\n"
    "                    LO:HI:N            N Hull lengths from LO to HI, each expanded to six\n"
    "                                       windows as docs/definition.md section 2\n"
    "                    FILE               CSV rows L,half,sq,p,p3,p2 (optional header line)\n";

/* Kept apart: one string literal may not pass 4095 bytes (-Wpedantic). */
static const char usage_out[] =
    "out of sample:\n"
    "  --split F         in-sample = the first floor(n*F) bars, out-of-sample = the rest\n"
    "                    (0 < F < 1), each swept cold; prints one row per fold, not per combo\n"
    "  --walk-forward K  K folds: the bars cut into K+1 equal segments; fold k picks its winner\n"
    "                    on segment k-1 and tests it on segment k\n"
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
    "  --fee F           fee per closed trade in percent points (default 0.09)\n"
    "  --report FILE.html  also write a self-contained HTML report: inputs, ranked table, plots,\n"
    "                    the best combo's equity, the out-of-sample table (python3-matplotlib)\n"
    "  --heatmap X,Y     in the report, pnl over two grid columns (others maximised over)\n"
    "  --quiet           no summary or progress on stderr\n"
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
    "                    Prints one CSV row per (instrument, combo): instrument, then the\n"
    "                    columns above (--columns, default all; basic = instrument,L,half,sq,p,\n"
    "                    p3,p2,pnl,trades), instruments in file/column order. Each instrument's\n"
    "                    rows are the plain sweep's rows for that series, same text; --sort and\n"
    "                    --top K rank and cut per instrument (--top alone: the K best pnl)\n"
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

int tf_cmd_sweep(int argc, char **argv)
{
    if (wants_panel(argc, argv))
        return exec_panel(argc, argv);
    static const struct option opts[] = {{"input", required_argument, 0, 'i'},
                                         {"column", required_argument, 0, 'c'},
                                         {"raw", no_argument, 0, 'r'},
                                         {"grid", required_argument, 0, 'g'},
                                         {"out", required_argument, 0, 'o'},
                                         {"top", required_argument, 0, 'k'},
                                         {"threads", required_argument, 0, 't'},
                                         {"isa", required_argument, 0, 'a'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {"skip-bad-rows", no_argument, 0, 'S'},
                                         {"date-column", required_argument, 0, 'D'},
                                         {"split", required_argument, 0, 'F'},
                                         {"walk-forward", required_argument, 0, 'W'},
                                         {"metric", required_argument, 0, 'M'},
                                         {"report", required_argument, 0, 'R'},
                                         {"heatmap", required_argument, 0, 'H'},
                                         {"columns", required_argument, 0, 'C'},
                                         {"sort", required_argument, 0, 'O'},
                                         {"fee", required_argument, 0, 'f'},
                                         {0, 0, 0, 0}};
    const char *input = NULL, *column = "close", *gridspec = "default", *out = NULL;
    const char *isa_name = "auto";
    long long top = -1, threads = 0;
    int raw = 0, quiet = 0, c;
    tf_cli_series_opts sopts = {0};
    tf_cli_oos oos = {.metric = {tf_cli_column_find("pnl"), 1}};
    const char *report = NULL, *heatmap = NULL, *metric_name = "pnl", *split_arg = NULL;
    const char *folds_arg = NULL, *fee_arg = NULL;
    tf_cli_columns cols;
    tf_cli_columns_parse("all", &cols);
    tf_cli_order order = {-1, 1};
    double fee = TF_FEE_DEFAULT;
    char *end;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            input = optarg;
            break;
        case 'c':
            column = optarg;
            break;
        case 'r':
            raw = 1;
            break;
        case 'g':
            gridspec = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'a':
            isa_name = optarg;
            break;
        case 'k':
            top = strtoll(optarg, &end, 10);
            if (*end || end == optarg || top < 1) {
                fprintf(stderr, "tollfree sweep: --top wants a positive integer, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 't':
            threads = strtoll(optarg, &end, 10);
            if (*end || end == optarg || threads < 0 || threads > TF_MAX_THREADS) {
                fprintf(stderr, "tollfree sweep: --threads wants 0..%d, got '%s'\n", TF_MAX_THREADS,
                        optarg);
                return 2;
            }
            break;
        case 'S':
            sopts.skip_bad_rows = 1;
            break;
        case 'D':
            sopts.date_column = optarg;
            break;
        case 'F':
            split_arg = optarg;
            oos.split = strtod(optarg, &end);
            if (*end || end == optarg || !(oos.split > 0 && oos.split < 1)) {
                fprintf(stderr, "tollfree sweep: --split wants a fraction 0 < F < 1, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'W':
            folds_arg = optarg;
            oos.folds = (int)strtol(optarg, &end, 10);
            if (*end || end == optarg || oos.folds < 1 || oos.folds > 1000) {
                fprintf(stderr, "tollfree sweep: --walk-forward wants 1..1000 folds, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'M':
            metric_name = optarg;
            if (tf_cli_order_parse(optarg, &oos.metric))
                return 2;
            if (oos.metric.col < 6) { /* one of the six windows */
                if (oos.metric.col >= 0)
                    fprintf(stderr, "tollfree sweep: --metric %s: a window is not a metric\n",
                            optarg);
                return 2;
            }
            break;
        case 'R':
            report = optarg;
            break;
        case 'H':
            heatmap = optarg;
            break;
        case 'C':
            if (tf_cli_columns_parse(optarg, &cols))
                return 2;
            break;
        case 'O':
            if (tf_cli_order_parse(optarg, &order))
                return 2;
            break;
        case 'f':
            fee_arg = optarg;
            if (tf_cli_parse_fee("tollfree sweep", optarg, &fee))
                return 2;
            break;
        case 'h':
            fputs(usage, stdout);
            fputs(usage_out, stdout);
            fputs(usage_panel, stdout);
            return 0;
        case ':':
            fprintf(stderr, "tollfree sweep: %s needs a value (see --help)\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "tollfree sweep: unknown option '%s' (see --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tollfree sweep: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (split_arg && folds_arg) {
        fputs("tollfree sweep: --split and --walk-forward exclude each other\n", stderr);
        return 2;
    }
    if (out && strcmp(out, "-")) {
        const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
        if (dot && (!slash || dot > slash) && strcmp(dot, ".csv") && strcmp(dot, ".txt")) {
            fprintf(stderr,
                    "tollfree sweep: --out %s: unknown output format '%s' (tollfree writes CSV: "
                    "use a .csv name)\n",
                    out, dot);
            return 2;
        }
    } else
        out = NULL;
    if (report) {
        size_t rl = strlen(report);
        if (rl < 5 ||
            (strcmp(report + rl - 5, ".html") && (rl < 4 || strcmp(report + rl - 4, ".htm")))) {
            fprintf(stderr, "tollfree sweep: --report %s: the report is HTML: use a .html name\n",
                    report);
            return 2;
        }
    }
    if (heatmap && !report) {
        fputs("tollfree sweep: --heatmap goes with --report FILE.html\n", stderr);
        return 2;
    }
    int reference = !strcmp(isa_name, "reference");
    tf_isa isa = TF_ISA_AUTO;
    if (!reference && tf_isa_parse(isa_name, &isa)) {
        fprintf(stderr,
                "tollfree sweep: --isa wants auto, scalar, sse2, avx2, avx512 or reference, got "
                "'%s'\n",
                isa_name);
        return 2;
    }
    if (!tf_isa_supported(isa)) {
        fprintf(stderr, "tollfree sweep: --isa %s: this CPU does not support it%s\n", isa_name,
                getenv("TF_ISA_MAX") ? " (or TF_ISA_MAX caps it)" : "");
        return 2;
    }
    const char *isa_max = getenv("TF_ISA_MAX");
    tf_isa cap;
    if (isa_max && *isa_max && tf_isa_parse(isa_max, &cap))
        fprintf(stderr,
                "tollfree sweep: ignoring TF_ISA_MAX='%s' (wants scalar, sse2, avx2 or avx512)\n",
                isa_max);

    double *close = NULL;
    int64_t n, m, *grid = NULL;
    if (input) {
        sopts.column = column;
        sopts.raw = raw;
        if (tf_cli_read_series_ex(input, &sopts, &close, &n, NULL))
            return 1;
    } else {
        n = (int64_t)(tf_default_close_bytes / sizeof(double));
    }
    const double *series = close ? close : tf_default_close;
    int grc = tf_cli_read_grid(gridspec, &grid, &m);
    if (grc) {
        free(close);
        return grc == -2 ? 2 : 1;
    }
    int rc = tf_params_check(grid, m);
    if (rc) {
        int64_t bad = 0;
        while (bad < m && tf_params_check(grid + 6 * bad, 1) == 0)
            bad++;
        fprintf(stderr, "tollfree sweep: grid combo %lld: %s\n", (long long)bad + 1,
                tf_strerror(rc));
        free(close);
        free(grid);
        return 1;
    }
    if (top > 0 && order.col < 0)
        order.col = tf_cli_column_find("pnl");
    int want_stats = tf_cli_columns_need_stats(&cols, order.col);
    double *pnl = malloc(sizeof(double) * (size_t)(m ? m : 1));
    int64_t *trades = malloc(sizeof(int64_t) * (size_t)(m ? m : 1));
    tf_stats *stats = want_stats ? malloc(sizeof(tf_stats) * (size_t)(m ? m : 1)) : NULL;
    FILE *f = NULL;
    int status = 1;
    if (!pnl || !trades || (want_stats && !stats)) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
    }
    tf_sweep_opts o = {.threads = (int)threads, .isa = isa, .fee = &fee, .stats = stats};
    if (split_arg || folds_arg) {
        f = out ? fopen(out, "w") : stdout;
        if (!f) {
            fprintf(stderr, "tollfree sweep: %s: %s\n", out, strerror(errno));
            goto done;
        }
        o.stats = NULL;
        tf_progress stop = {0};
        o.progress = &stop;
        tf_cli_interrupt_arm(&stop);
        rc = tf_cli_oos_run(f, series, n, grid, m, &oos, &o, reference, quiet);
        if (tf_cli_interrupt_disarm()) {
            fputs("tollfree sweep: interrupted\n", stderr);
            status = 130;
            goto done;
        }
        if (rc)
            goto done;
        status = 0;
        goto report;
    }
    double t0 = now_s();
    rc = tf_cli_sweep_run(series, n, grid, m, pnl, trades, &o, reference,
                          !quiet && isatty(STDERR_FILENO));
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
    f = out ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", out, strerror(errno));
        goto done;
    }
    tf_cli_results res = {grid, pnl, trades, stats, m};
    if (tf_cli_table_write(f, &res, &cols, &order, top))
        goto done;
    if (!quiet)
        fprintf(stderr, "sweep: %lld combos x %lld bars in %.3f s (%s, %lld threads%s)\n",
                (long long)m, (long long)n, dt,
                reference ? "reference" : tf_isa_name(isa == TF_ISA_AUTO ? tf_isa_best() : isa),
                reference ? 1
                : threads ? threads
                          : (long long)sysconf(_SC_NPROCESSORS_ONLN),
                stats ? ", with statistics" : "");
    status = 0;
report:
    if (report && status == 0) {
        char stdin_tmp[] = "/tmp/tollfree-stdin-XXXXXX";
        const char *src = input;
        if (input && !strcmp(input, "-")) { /* the report can't read stdin again: pass the bars */
            if (tf_cli_write_tmp(series, n, stdin_tmp)) {
                status = 1;
                goto done;
            }
            src = stdin_tmp;
        }
        char tbuf[32];
        snprintf(tbuf, sizeof tbuf, "%lld", threads);
        char *args[32];
        int k = 0;
        args[k++] = "--out";
        args[k++] = (char *)report;
        args[k++] = "--grid";
        args[k++] = (char *)gridspec;
        args[k++] = "--metric";
        args[k++] = (char *)metric_name;
        args[k++] = "--threads";
        args[k++] = tbuf;
        if (src) {
            args[k++] = "--input";
            args[k++] = (char *)src;
            args[k++] = "--column";
            args[k++] = (char *)column;
        }
        if (raw || src == stdin_tmp)
            args[k++] = "--raw";
        if (sopts.skip_bad_rows)
            args[k++] = "--skip-bad-rows";
        if (sopts.date_column) {
            args[k++] = "--date-column";
            args[k++] = (char *)sopts.date_column;
        }
        if (split_arg) {
            args[k++] = "--split";
            args[k++] = (char *)split_arg;
        }
        if (folds_arg) {
            args[k++] = "--walk-forward";
            args[k++] = (char *)folds_arg;
        }
        if (heatmap) {
            args[k++] = "--heatmap";
            args[k++] = (char *)heatmap;
        }
        if (fee_arg) {
            args[k++] = "--fee";
            args[k++] = (char *)fee_arg;
        }
        if (quiet)
            args[k++] = "--quiet";
        args[k] = NULL;
        status = tf_cli_report(args) ? 1 : 0;
        if (src == stdin_tmp)
            unlink(stdin_tmp);
    }
done:
    if (f && f != stdout && fclose(f) != 0 && status == 0) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", out, strerror(errno));
        status = 1;
    }
    free(close);
    free(grid);
    free(pnl);
    free(trades);
    free(stats);
    return status;
}
