/* tollfree sweep: the parameter sweep from the command line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "tollfree/kernel.h"

static const char usage[] =
    "usage: tollfree sweep [options]\n"
    "\n"
    "Runs the HMA/HMA3 stop-and-reverse sweep (spec/kernel.md) and prints one CSV row per combo:\n"
    "  L,half,sq,p,p3,p2,pnl,trades      (pnl in percent points, printed with %.17g: exact)\n"
    "\n"
    "input:\n"
    "  --input FILE      close series: CSV with a header line, or raw little-endian f64\n"
    "                    (*.f64, *.bin, *.raw, or --raw). Default: the embedded data set\n"
    "                    (150,000 bars, numpy default_rng(42), spec/kernel.md section 1)\n"
    "  --column NAME     CSV column holding the close (default: close)\n"
    "  --raw             read FILE as raw little-endian f64 whatever its name\n"
    "  --grid SPEC       default            the 80-combo grid, L = 6..200\n"
    "                    LO:HI:N            N Hull lengths from LO to HI, each expanded to six\n"
    "                                       windows as spec/kernel.md section 2\n"
    "                    FILE               CSV rows L,half,sq,p,p3,p2 (optional header line)\n"
    "output:\n"
    "  --out FILE        write the CSV to FILE instead of stdout\n"
    "  --top K           only the K combos with the highest pnl, best first\n"
    "  --quiet           no summary or progress on stderr\n"
    "engine:\n"
    "  --threads N       worker threads (default 0 = all cores); results never depend on it\n"
    "  --isa NAME        auto, scalar, sse2, avx2, avx512, or reference (the literal spec)\n"
    "  -h, --help        this text\n"
    "\n"
    "examples:\n"
    "  tollfree sweep --top 5\n"
    "  tollfree sweep --input prices.csv --column Close --grid 10:300:50 --out results.csv\n";

typedef struct row {
    int64_t idx;
    double pnl;
} row;

static int by_pnl_desc(const void *a, const void *b)
{
    const row *x = a, *y = b;
    /* NaN sorts last; ties keep grid order */
    int xn = x->pnl != x->pnl, yn = y->pnl != y->pnl;
    if (xn != yn)
        return xn - yn;
    if (x->pnl > y->pnl)
        return -1;
    if (x->pnl < y->pnl)
        return 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs the sweep; on big jobs in slices of combos with progress on stderr. Slicing changes no
 * result (each combo is computed the same way whichever slice it is in). */
static int run(const double *close, int64_t n, const int64_t *grid, int64_t m, double *pnl,
               int64_t *trades, const tf_sweep_opts *o, int reference, int quiet)
{
    double work = (double)n * (double)m;
    int64_t slices = work > 4.0e8 ? 20 : 1;
    int64_t step = (m + slices - 1) / slices;
    double t0 = now_s();
    for (int64_t j = 0; j < m; j += step) {
        int64_t k = m - j < step ? m - j : step;
        int rc = reference ? tf_sweep_reference(close, n, grid + 6 * j, k, pnl + j, trades + j)
                           : tf_sweep(close, n, grid + 6 * j, k, pnl + j, trades + j, o);
        if (rc)
            return rc;
        if (slices > 1 && !quiet)
            fprintf(stderr, "sweep: %lld/%lld combos, %.1f s\n", (long long)(j + k), (long long)m,
                    now_s() - t0);
    }
    return 0;
}

int tf_cmd_sweep(int argc, char **argv)
{
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
                                         {0, 0, 0, 0}};
    const char *input = NULL, *column = "close", *gridspec = "default", *out = NULL;
    const char *isa_name = "auto";
    long long top = -1, threads = 0;
    int raw = 0, quiet = 0, c;
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
        case 'h':
            fputs(usage, stdout);
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
        fprintf(stderr, "tollfree sweep: --isa %s: this CPU does not support it\n", isa_name);
        return 2;
    }

    double *close = NULL;
    int64_t n, m, *grid = NULL;
    if (input) {
        if (tf_cli_read_series(input, column, raw, &close, &n))
            return 1;
    } else {
        n = (int64_t)(tf_default_close_bytes / sizeof(double));
    }
    const double *series = close ? close : tf_default_close;
    if (tf_cli_read_grid(gridspec, &grid, &m)) {
        free(close);
        return 1;
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
    double *pnl = malloc(sizeof(double) * (size_t)m);
    int64_t *trades = malloc(sizeof(int64_t) * (size_t)m);
    row *rows = malloc(sizeof(row) * (size_t)m);
    FILE *f = NULL;
    int status = 1;
    if (!pnl || !trades || !rows) {
        fputs("tollfree sweep: out of memory\n", stderr);
        goto done;
    }
    tf_sweep_opts o = {.threads = (int)threads, .isa = isa};
    double t0 = now_s();
    rc = run(series, n, grid, m, pnl, trades, &o, reference, quiet);
    double dt = now_s() - t0;
    if (rc) {
        fprintf(stderr, "tollfree sweep: %s\n", tf_strerror(rc));
        goto done;
    }
    f = out ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", out, strerror(errno));
        goto done;
    }
    for (int64_t j = 0; j < m; j++)
        rows[j] = (row){j, pnl[j]};
    int64_t shown = m;
    if (top > 0) {
        qsort(rows, (size_t)m, sizeof(row), by_pnl_desc);
        shown = top < m ? top : m;
    }
    fputs("L,half,sq,p,p3,p2,pnl,trades\n", f);
    for (int64_t r = 0; r < shown; r++) {
        int64_t j = rows[r].idx;
        const int64_t *p = grid + 6 * j;
        fprintf(f, "%lld,%lld,%lld,%lld,%lld,%lld,%.17g,%lld\n", (long long)p[0], (long long)p[1],
                (long long)p[2], (long long)p[3], (long long)p[4], (long long)p[5], pnl[j],
                (long long)trades[j]);
    }
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "tollfree sweep: write failed: %s\n", strerror(errno));
        goto done;
    }
    if (!quiet)
        fprintf(stderr, "sweep: %lld combos x %lld bars in %.3f s (%s, %lld threads)\n",
                (long long)m, (long long)n, dt,
                reference ? "reference" : tf_isa_name(isa == TF_ISA_AUTO ? tf_isa_best() : isa),
                reference ? 1
                : threads ? threads
                          : (long long)sysconf(_SC_NPROCESSORS_ONLN));
    status = 0;
done:
    if (f && f != stdout && fclose(f) != 0 && status == 0) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", out, strerror(errno));
        status = 1;
    }
    free(close);
    free(grid);
    free(pnl);
    free(trades);
    free(rows);
    return status;
}
