/* tollfree paper: the command-line shell over tf_paper_run (include/tollfree/paper.h, the one
 * paper-trading loop, src/paper/paper.c): options in, the price file read, the run on a helper
 * thread while this one draws the progress bar and takes Ctrl-C, the result printed. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/sweep_run.h"
#include "tollfree/kernel.h"
#include "tollfree/paper.h"
#include "tollfree/strategy.h"

static const char usage[] =
    "usage: tollfree paper --combo L,half,sq,p,p3,p2 [options]\n"
    "       tollfree paper --strategy NAME|PATH.so --params a=V,b=V [options]\n"
    "\n"
    "Paper-trades one combo through the order engine (HMA/HMA3 by default; any strategy\n"
    "with --strategy: its position is +1, -1 or 0, and flat closes the trade). Each bar's\n"
    "close is rounded to a whole number of ticks (half to even) and the strategy (the\n"
    "kernel's streaming API) sees that price; when its position changes it sends an order for\n"
    "the change (1 lot to open or close, 2 to reverse) from its account (1). By default the\n"
    "venue fills it in a closing auction at the bar's price: a counterparty account (2)\n"
    "rests a limit order at that tick price on the other side, and the strategy's limit\n"
    "order crosses it, so every fill is at the bar's rounded close. The PnL is computed from\n"
    "the fills with the kernel's formula (docs/definition.md section 5). Two comparisons are\n"
    "printed: parity against the rounded series (pnl and trades equal the sweep's on the\n"
    "closes as traded, bit for bit: what the exit status checks) and, beside it, the sweep on\n"
    "the series as given and the difference (zero when the rounding\n"
    "changed no close).\n"
    "\n"
    "The tick: without --tick it is chosen from the data: the coarsest power of ten 10^-k\n"
    "(k = 0..10) under which every close rounds to itself (a file with five decimals gets\n"
    "0.00001 and trades its own prices). When none does (more decimals, a generated series),\n"
    "the tick is 0.0001 and the output says the series was rounded. A --tick under which the\n"
    "rounding changes a close of a series that has such a decimal tick is refused (the answer\n"
    "would be another series'), unless --coarse-tick.\n";

/* Two strings: ISO C promises literals of 4095 characters only. */
static const char usage_options[] =
    "\n"
    "options:\n"
    "  --combo SPEC      six window lengths L,half,sq,p,p3,p2, or one Hull length L (expanded\n"
    "                    as docs/definition.md section 2). Required without --strategy.\n"
    "  --strategy NAME|PATH.so  a built-in (hma, sma_cross, ema_cross, donchian, rsi,\n"
    "                    bollinger) or a plugin (tollfree sweep --list-strategies); the kernel's\n"
    "                    figures are that strategy's sweep (tf_sweep_with)\n"
    "  --params a=V,...  the strategy's combo: every parameter named once\n"
    "                    (e.g. fast=5,slow=20). Required with --strategy\n"
    "  --input FILE      close series: CSV with a header line, or raw little-endian f64 (*.f64,\n"
    "                    *.bin, *.raw). Default: the embedded data set (150,000 bars)\n"
    "  --tick T          tick size (default: chosen from the data, above)\n"
    "  --coarse-tick     trade a --tick that changes the data's closes (the rounded series)\n"
    "  --fee F           fee per closed trade in percent points, 0 <= F < 100 (default 0.09);\n"
    "                    the kernel's figures it is compared with use the same fee\n"
    "  --engine URL      unix:PATH, tcp:HOST:PORT or tls:HOST:PORT of `tollfree engine serve`\n"
    "                    (the orders go through the service with the C client, pipelined: in\n"
    "                    the auction the counterparty's order and the strategy's go out\n"
    "                    together on one connection, one round trip per change at most; with\n"
    "                    --half-spread the quoter has a second connection, which receives its\n"
    "                    fills as unsolicited Trades; tls: checks the server's certificate\n"
    "                    against the CA file in TOLLFREE_TLS_CA, else the system's). Default: an\n"
    "                    in-process engine, instrument 1\n"
    "  --session NAME    log on to a service started with --sessions as NAME (it must hold\n"
    "                    accounts 1 and 2, and 3 with --half-spread); the secret comes from\n"
    "                    --secret-file FILE (its first line; mode 600) or TOLLFREE_SECRET.\n"
    "                    There is no --secret: a secret on the command line shows in ps\n"
    "  --instrument ID   the instrument traded (default 1; the service must list it)\n"
    "  --max-inflight N  with --engine, in the auction: position changes sent before the\n"
    "                    oldest one's replies are read (default 256; 1: each change's replies\n"
    "                    before the next bar, one round trip per change). The strategy's\n"
    "                    position depends on prices only and the fills are booked in order,\n"
    "                    so every figure is the same whatever N\n"
    "  --half-spread K   no auction: a quoting account (3) keeps a bid K ticks under and an ask\n"
    "                    K ticks over each close (replaced every bar), and the strategy sends\n"
    "                    market orders. The summary shows the spread's cost against the\n"
    "                    kernel's figure; no parity is expected (exit 0 either way). K >= 1\n"
    "  --journal DIR     in-process only: write the commands (and the events) as OFL1 journals\n"
    "                    DIR/commands.ofl and DIR/events.ofl, so that\n"
    "                    `tollfree engine run DIR/commands.ofl --instruments ID` (ID: the\n"
    "                    instrument traded, default 1) reproduces the run (its\n"
    "                    state_hash equals the one printed here). DIR must not hold a journal\n"
    "  --json            print ONE JSON object (floats with %.17g: they round-trip)\n"
    "  --plot FILE       a PNG of the equity curve with the fills marked. Plotting is done by\n"
    "                    the Python side: with --plot this command runs\n"
    "                    `python3 -m tollfree.paper` with the same arguments (the same loop in\n"
    "                    libtollfree, the same results; $TOLLFREE_PYTHON picks the\n"
    "                    interpreter, default /usr/bin/python3)\n"
    "  --quiet           no progress bar (it is shown only when stderr is a terminal)\n"
    "  -h, --help        this text\n";

static const char usage_tail[] =
    "\n"
    "exit status: 0 parity against the rounded series (or --half-spread), 1 parity failed,\n"
    "2 usage, input or venue error (a refused price file or tick included), 130 interrupted.\n"
    "\n"
    "examples:\n"
    "  tollfree paper --combo 6,3,2,3,1,2 --json\n"
    "  tollfree paper --combo 6,3,2,3,1,2 --engine unix:/tmp/engine.sock\n"
    "  tollfree paper --combo 20 --input prices.csv --column close --half-spread 2\n"
    "  tollfree paper --strategy sma_cross --params fast=5,slow=20 --json\n";

/* ---------------------------------------------------------------- options */

static int parse_combo(const char *spec, int64_t out[6])
{
    int64_t v[6];
    int k = 0;
    const char *p = spec;
    while (k < 6) {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno)
            return -1;
        v[k++] = x;
        if (*end == 0)
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    if (k == 1)
        return tf_combo_from_length(v[0], out) ? -1 : 0;
    if (k != 6 || *p == 0)
        return -1;
    memcpy(out, v, sizeof v);
    return tf_params_check(out, 1) ? -1 : 0;
}

/* What the command line says. */
typedef struct paper_args {
    tf_paper_config cfg;
    double fee;
    tf_cli_series_opts sopts;
    const char *input, *plot;
    const char *strategy, *params; /* --strategy, --params as given */
    int json, quiet, have_combo;
    tf_strategy_lib *lib; /* a plugin's, unloaded at the end */
    double pv[TF_STRATEGY_MAX_PARAMS];
    const char *secret_file; /* --secret-file (else TOLLFREE_SECRET) */
    char secret[260];
} paper_args;

static const struct option long_opts[] = {{"combo", required_argument, 0, 'C'},
                                          {"input", required_argument, 0, 'i'},
                                          TF_CLI_SERIES_OPTIONS,
                                          {"tick", required_argument, 0, 't'},
                                          {"coarse-tick", no_argument, 0, 'T'},
                                          {"fee", required_argument, 0, 'f'},
                                          {"engine", required_argument, 0, 'e'},
                                          {"instrument", required_argument, 0, 'I'},
                                          {"half-spread", required_argument, 0, 's'},
                                          {"journal", required_argument, 0, 'j'},
                                          {"json", no_argument, 0, 'J'},
                                          {"plot", required_argument, 0, 'p'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {"strategy", required_argument, 0, 'S'},
                                          {"params", required_argument, 0, 'P'},
                                          {"session", required_argument, 0, 'N'},
                                          {"secret-file", required_argument, 0, 'K'},
                                          {"max-inflight", required_argument, 0, 'W'},
                                          {0, 0, 0, 0}};

/* One option with its value: 0, or 2 after one line on stderr. */
static int take_option(int c, const char *arg, void *ctx)
{
    paper_args *a = ctx;
    char *end;
    int taken = tf_cli_series_option(c, arg, &a->sopts);
    if (taken != 1)
        return taken;
    switch (c) {
    case 'C':
        if (parse_combo(arg, a->cfg.combo)) {
            fprintf(stderr,
                    "tollfree paper: --combo %s: want six window lengths "
                    "L,half,sq,p,p3,p2 (each >= 1) or one Hull length\n",
                    arg);
            return 2;
        }
        a->have_combo = 1;
        return 0;
    case 't':
        a->cfg.tick = strtod(arg, &end);
        if (end == arg || *end || !(a->cfg.tick > 0) || !isfinite(a->cfg.tick)) {
            fprintf(stderr, "tollfree paper: --tick %s: want a positive number\n", arg);
            return 2;
        }
        return 0;
    case 'T':
        a->cfg.coarse_tick = 1;
        return 0;
    case 'f':
        if (tf_cli_parse_fee("tollfree paper", arg, &a->fee))
            return 2;
        a->cfg.fee = &a->fee;
        return 0;
    case 'I':
        errno = 0;
        a->cfg.instrument = strtoull(arg, &end, 10);
        if (end == arg || *end || errno || a->cfg.instrument == 0 || arg[0] == '-') {
            fprintf(stderr, "tollfree paper: --instrument %s: want an id >= 1\n", arg);
            return 2;
        }
        return 0;
    case 's':
        errno = 0;
        a->cfg.half_spread = strtoll(arg, &end, 10);
        if (end == arg || *end || errno || a->cfg.half_spread < 1 ||
            a->cfg.half_spread > (1LL << 40)) {
            fprintf(stderr, "tollfree paper: --half-spread %s: want ticks >= 1\n", arg);
            return 2;
        }
        return 0;
    case 'W':
        errno = 0;
        a->cfg.max_inflight = (uint32_t)strtoul(arg, &end, 10);
        if (end == arg || *end || errno || arg[0] == '-' || a->cfg.max_inflight < 1 ||
            strtoul(arg, NULL, 10) > TF_PAPER_MAX_INFLIGHT) {
            fprintf(stderr, "tollfree paper: --max-inflight %s: want 1 .. %d position changes\n",
                    arg, TF_PAPER_MAX_INFLIGHT);
            return 2;
        }
        return 0;
    case 'i':
        a->input = arg;
        return 0;
    case 'e':
        a->cfg.engine_url = arg;
        return 0;
    case 'j':
        a->cfg.journal_dir = arg;
        return 0;
    case 'N':
        a->cfg.session = arg;
        return 0;
    case 'K':
        a->secret_file = arg;
        return 0;
    case 'p':
        a->plot = arg;
        return 0;
    case 'S':
        a->strategy = arg;
        return 0;
    case 'P':
        a->params = arg;
        return 0;
    case 'J':
        a->json = 1;
        return 0;
    case 'q':
        a->quiet = 1;
        return 0;
    default:
        return 2;
    }
}

/* --strategy and --params into a->cfg (strategy, params). 0, or 2 after one line on stderr. */
static int resolve_strategy(paper_args *a)
{
    if (!a->strategy || !a->params) {
        fprintf(stderr, "tollfree paper: --strategy and --params go together (try --help)\n");
        return 2;
    }
    if (a->have_combo) {
        fprintf(stderr, "tollfree paper: --combo is HMA's: with --strategy give --params\n");
        return 2;
    }
    char msg[2048];
    const tf_strategy_def *def;
    if (tf_strategy_resolve(a->strategy, &def, &a->lib, msg, sizeof msg)) {
        fprintf(stderr, "tollfree paper: --strategy: %s\n", msg);
        return 2;
    }
    double *p = NULL;
    int64_t m = 0;
    int rc = tf_grid_named(def, a->params, NULL, &p, &m, msg, sizeof msg);
    if (!rc && m != 1) {
        snprintf(msg, sizeof msg, "one value per parameter (a=V,b=V), not ranges");
        rc = TF_E_BAD_INPUT;
    }
    if (rc) {
        fprintf(stderr, "tollfree paper: --params %s: %s\n", a->params, msg);
        free(p);
        tf_strategy_unload(a->lib);
        a->lib = NULL;
        return 2;
    }
    memcpy(a->pv, p, sizeof(double) * def->n_params);
    free(p);
    a->cfg.strategy = def;
    a->cfg.params = a->pv;
    return 0;
}

/* Parses argv into a. -1: go on; else the exit status (0 after --help, 2 on a usage error). */
static int session_secret(paper_args *a);

static int parse_args(int argc, char **argv, paper_args *a)
{
    memset(a, 0, sizeof *a);
    a->cfg.size = sizeof a->cfg;
    int rc = tf_cli_options("tollfree paper", argc, argv, long_opts, take_option, a);
    if (rc == 0) {
        fputs(usage, stdout);
        fputs(usage_options, stdout);
        fputs("\nprice file options (with --input; as `tollfree sweep`):\n", stdout);
        fputs(tf_cli_series_help, stdout);
        fputs(usage_tail, stdout);
    }
    if (rc >= 0)
        return rc;
    if (a->strategy || a->params) {
        rc = resolve_strategy(a);
        if (rc)
            return rc;
    } else if (!a->have_combo) {
        fprintf(stderr, "tollfree paper: --combo is required (try --help)\n");
        return 2;
    }
    if (a->cfg.journal_dir && a->cfg.engine_url) {
        fprintf(stderr, "tollfree paper: --journal is for the in-process engine (the service "
                        "keeps its own journal)\n");
        return 2;
    }
    return a->cfg.session || a->secret_file ? session_secret(a) : -1;
}

/* --session NAME: its secret from --secret-file FILE (its first line; the file must not be
 * readable by group or others) or the environment variable TOLLFREE_SECRET. -1 (go on) or 2. */
static int session_secret(paper_args *a)
{
    if (!a->cfg.session || !a->cfg.engine_url) {
        fprintf(stderr, "tollfree paper: --session and --secret-file go with --engine URL of a "
                        "service started with --sessions\n");
        return 2;
    }
    const char *src = a->secret_file ? a->secret_file : "TOLLFREE_SECRET";
    if (a->secret_file) {
        FILE *f = fopen(a->secret_file, "r");
        struct stat st;
        if (!f || fstat(fileno(f), &st) != 0) {
            fprintf(stderr, "tollfree paper: --secret-file %s: %s\n", src, strerror(errno));
            if (f)
                fclose(f);
            return 2;
        }
        if (st.st_mode & 077) {
            fprintf(stderr,
                    "tollfree paper: --secret-file %s: mode %04o lets group or others "
                    "read it: run `chmod 600 %s`\n",
                    src, (unsigned)(st.st_mode & 07777), src);
            fclose(f);
            return 2;
        }
        if (!fgets(a->secret, sizeof a->secret, f))
            a->secret[0] = 0;
        fclose(f);
    } else {
        const char *e = getenv("TOLLFREE_SECRET");
        snprintf(a->secret, sizeof a->secret, "%s", e ? e : "");
    }
    a->secret[strcspn(a->secret, "\r\n")] = 0;
    size_t n = strlen(a->secret);
    if (n < 16 || n > 256) {
        fprintf(stderr,
                "tollfree paper: --session %s: the secret (from %s) has %zu characters, "
                "not 16 to 256\n",
                a->cfg.session, src, n);
        return 2;
    }
    a->cfg.secret = a->secret;
    a->cfg.secret_len = n;
    return -1;
}

/* --plot: the Python side plots; run it with our arguments. */
static int exec_python(int argc, char **argv)
{
    int rc = tf_cli_python_exec("paper --plot", "tollfree.paper", argc - 1, argv + 1);
    return rc ? 2 : 0;
}

/* ---------------------------------------------------------------- the run */

typedef struct job {
    const double *close;
    int64_t n;
    const tf_paper_config *cfg;
    tf_paper_result *res;
    char msg[1024];
    int rc;
    int finished; /* atomic */
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    j->rc = tf_paper_run(j->close, j->n, j->cfg, j->res, j->msg, sizeof j->msg);
    __atomic_store_n(&j->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void draw(int64_t i, int64_t n)
{
    int w = 40, k = n > 0 ? (int)((double)w * (double)i / (double)n) : w;
    char bar[41];
    memset(bar, '#', (size_t)k);
    memset(bar + k, ' ', (size_t)(w - k));
    bar[w] = 0;
    fprintf(stderr, "\rpaper [%s] %3d%% %" PRId64 "/%" PRId64 " bars", bar,
            n > 0 ? (int)(100.0 * (double)i / (double)n) : 100, i, n);
}

/* tf_paper_run on a helper thread while this one redraws the bar every 0.1 s (show), with
 * Ctrl-C armed to cancel it. Returns the run's code. */
static int run_paper(job *j, tf_paper_config *cfg, int show)
{
    tf_progress pg;
    memset(&pg, 0, sizeof pg);
    cfg->progress = &pg;
    tf_cli_interrupt_arm(&pg);
    pthread_t tid;
    if (show && pthread_create(&tid, NULL, job_main, j) == 0) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        while (!__atomic_load_n(&j->finished, __ATOMIC_ACQUIRE)) {
            int64_t done, total;
            tf_progress_read(&pg, &done, &total);
            draw(done, j->n);
            nanosleep(&tick, NULL);
        }
        pthread_join(tid, NULL);
        int64_t done;
        tf_progress_read(&pg, &done, NULL);
        draw(done, j->n);
        fputc('\n', stderr);
    } else {
        job_main(j);
    }
    tf_cli_interrupt_disarm();
    cfg->progress = NULL;
    return j->rc;
}

int tf_cmd_paper(int argc, char **argv)
{
    paper_args a;
    int status = parse_args(argc, argv, &a);
    if (status >= 0) {
        tf_strategy_unload(a.lib);
        return status;
    }
    if (a.plot)
        return exec_python(argc, argv);
    double *owned = NULL;
    const double *close = tf_default_close;
    int64_t n = (int64_t)(tf_default_close_bytes / sizeof(double));
    if (a.input) {
        if (tf_cli_read_series_ex(a.input, &a.sopts, &owned, &n, NULL)) {
            tf_strategy_unload(a.lib);
            return 2;
        }
        close = owned;
    }
    tf_paper_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        fprintf(stderr, "tollfree paper: out of memory\n");
        free(owned);
        tf_strategy_unload(a.lib);
        return 2;
    }
    *j = (job){.close = close, .n = n, .cfg = &a.cfg, .res = &res};
    int rc = run_paper(j, &a.cfg, !a.quiet && isatty(2));
    if (rc == TF_E_CANCELLED) {
        fputs("tollfree paper: interrupted\n", stderr);
        status = 130;
    } else if (rc) {
        if (a.input && rc == TF_E_BAD_INPUT)
            fprintf(stderr, "tollfree paper: %s: %s\n", a.input, j->msg);
        else
            fprintf(stderr, "tollfree paper: %s\n", j->msg[0] ? j->msg : tf_strerror(rc));
        status = 2;
    } else {
        char text[4096];
        tf_paper_format(&a.cfg, &res, a.json, text, sizeof text);
        fputs(text, stdout);
        status = (res.parity || a.cfg.half_spread) ? 0 : 1;
    }
    free(j);
    free(owned);
    tf_strategy_unload(a.lib);
    return status;
}
