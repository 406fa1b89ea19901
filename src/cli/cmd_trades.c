/* tollfree trades: every trade of one combo (the library's tf_trades_list), as CSV or JSON. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "tollfree/kernel.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

static const char usage[] =
    "usage: tollfree trades (--combo L,half,sq,p,p3,p2 | --strategy NAME --params a=V,...)\n"
    "                       [--input FILE] [--fee F] [--csv | --json] [--out FILE]\n"
    "\n"
    "Lists every trade of one combo, booked exactly as `tollfree sweep` books it: the closed\n"
    "trades' ret, summed in order, give the sweep's pnl for that combo bit for bit, their count\n"
    "its trades (docs/research.md, \"Trade lists\"). One row per trade:\n"
    "  trade        1, 2, ... in order\n"
    "  direction    1 long, -1 short\n"
    "  entry_bar, exit_bar    0-based bars; a reversal closes one trade and enters the next\n"
    "                         at the same bar\n"
    "  entry_date, exit_date  the date cells of those bars, as the file writes them (only when\n"
    "                         the input has a date column)\n"
    "  entry_price, exit_price  the closes of those bars\n"
    "  ret          the return booked, percent points, fee included:\n"
    "               direction * (exit - entry) / entry * 100 - fee\n"
    "  bars         exit_bar - entry_bar\n"
    "  days         the time between the two bars in days (only with parsed dates)\n"
    "  open         1 for the position still open after the last bar: its exit is the last\n"
    "               bar, its ret what closing there would book; it is in no sweep figure\n"
    "Reals are printed with %.17g (they read back exactly).\n"
    "\n"
    "options:\n"
    "  --combo W         HMA's six windows L,half,sq,p,p3,p2, or one Hull length L (expanded\n"
    "                    as docs/definition.md section 2)\n"
    "  --strategy NAME|PATH.so  hma, sma_cross, ema_cross, donchian, rsi, bollinger, or a\n"
    "                    plugin (as `tollfree sweep --strategy`); with --params\n"
    "  --params a=V,...  every parameter of the strategy once (e.g. fast=5,slow=20)\n"
    "  --input FILE      close series (CSV or raw f64, '-' for stdin; every rule of `tollfree\n"
    "                    sweep --input`); default the embedded data set\n";

static const char usage_tail[] =
    "  --fee F           fee per closed trade in percent points, 0 <= F < 100 (default 0.09)\n"
    "  --csv             CSV (the default)\n"
    "  --json            one JSON object: strategy, params, fee, bars, pnl, trades, and rows,\n"
    "                    an array of objects with the CSV's columns\n"
    "  --out FILE        write to FILE instead of stdout\n"
    "  --quiet           no summary on stderr\n"
    "  -h, --help        this text\n"
    "\n"
    "examples:\n"
    "  tollfree trades --combo 50 --input prices.csv\n"
    "  tollfree trades --strategy sma_cross --params fast=5,slow=20 --input prices.csv --json\n";

typedef struct trades_args {
    const char *input, *combo, *strategy, *params, *out;
    int json, quiet;
    double fee;
    tf_cli_series_opts sopts;
} trades_args;

enum { OPT_COMBO = 0x5400, OPT_STRATEGY, OPT_PARAMS, OPT_CSV, OPT_JSON, OPT_FEE };

static const struct option long_opts[] = {{"input", required_argument, 0, 'i'},
                                          TF_CLI_SERIES_OPTIONS,
                                          {"combo", required_argument, 0, OPT_COMBO},
                                          {"strategy", required_argument, 0, OPT_STRATEGY},
                                          {"params", required_argument, 0, OPT_PARAMS},
                                          {"csv", no_argument, 0, OPT_CSV},
                                          {"json", no_argument, 0, OPT_JSON},
                                          {"fee", required_argument, 0, OPT_FEE},
                                          {"out", required_argument, 0, 'o'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};

static int take_option(int c, const char *arg, void *ctx)
{
    trades_args *a = ctx;
    int taken = tf_cli_series_option(c, arg, &a->sopts);
    if (taken != 1)
        return taken;
    switch (c) {
    case 'i':
        a->input = arg;
        return 0;
    case 'o':
        a->out = arg;
        return 0;
    case 'q':
        a->quiet = 1;
        return 0;
    case OPT_COMBO:
        a->combo = arg;
        return 0;
    case OPT_STRATEGY:
        a->strategy = arg;
        return 0;
    case OPT_PARAMS:
        a->params = arg;
        return 0;
    case OPT_CSV:
        a->json = 0;
        return 0;
    case OPT_JSON:
        a->json = 1;
        return 0;
    case OPT_FEE:
        return tf_cli_parse_fee("tollfree trades", arg, &a->fee) ? 2 : 0;
    default:
        return 2;
    }
}

/* --combo: six windows or one Hull length into p[6] (as doubles). 0, or 2 after one line. */
static int parse_combo(const char *spec, double *p)
{
    int64_t w[6];
    int k = 0;
    const char *s = spec;
    char *end;
    while (k < 6) {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno)
            break;
        w[k++] = v;
        if (*end != ',')
            break;
        s = end + 1;
    }
    int ok = *end == '\0' && (k == 6 || k == 1);
    if (ok && k == 1)
        ok = tf_combo_from_length(w[0], w) == 0;
    if (ok)
        ok = tf_params_check(w, 1) == 0;
    if (!ok) {
        fprintf(stderr,
                "tollfree trades: --combo wants six windows L,half,sq,p,p3,p2 or one Hull length "
                "L (whole numbers >= 1), got '%s'\n",
                spec);
        return 2;
    }
    for (k = 0; k < 6; k++)
        p[k] = (double)w[k];
    return 0;
}

/* The combo: *def (and *lib to unload) and p[def->n_params]. 0, or the exit status after one
 * line on stderr. */
static int resolve_combo(const trades_args *a, const tf_strategy_def **def, tf_strategy_lib **lib,
                         double *p)
{
    char msg[2048];
    if (!!a->combo == !!a->params) {
        fputs("tollfree trades: give one combo: --combo L,half,sq,p,p3,p2 (HMA) or --strategy "
              "NAME --params a=V,...\n",
              stderr);
        return 2;
    }
    if (a->combo) {
        if (a->strategy && strcmp(a->strategy, "hma")) {
            fputs("tollfree trades: --combo is HMA's windows; another strategy takes --params\n",
                  stderr);
            return 2;
        }
        *def = tf_strategy_builtin("hma");
        return parse_combo(a->combo, p);
    }
    if (tf_strategy_resolve(a->strategy ? a->strategy : "hma", def, lib, msg, sizeof msg)) {
        fprintf(stderr, "tollfree trades: --strategy: %s\n", msg);
        return a->strategy && strchr(a->strategy, '/') ? 1 : 2;
    }
    double *g = NULL;
    int64_t m = 0;
    int rc = tf_grid_named(*def, a->params, NULL, &g, &m, msg, sizeof msg);
    if (!rc && m != 1)
        snprintf(msg, sizeof msg, "--params names one value per parameter (got %lld combos)",
                 (long long)m);
    if (rc || m != 1) {
        fprintf(stderr, "tollfree trades: --params %s: %s\n", a->params, msg);
        free(g);
        return 2;
    }
    memcpy(p, g, sizeof(double) * (*def)->n_params);
    free(g);
    if (tf_strategy_params_check(*def, p, 1, NULL, msg, sizeof msg)) {
        fprintf(stderr, "tollfree trades: --params %s: %s\n", a->params, msg);
        return 2;
    }
    return 0;
}

/* The date cell of bar i as a string field (JSON or CSV: quoted, quotes doubled / escaped). */
static void put_date(FILE *f, const tf_cli_series_info *info, int64_t i, int json)
{
    const char *s = info->dates + info->date_off[i], *e = info->dates + info->date_off[i + 1];
    fputc('"', f);
    for (; s < e; s++) {
        if (*s == '"' || (json && *s == '\\'))
            fputc(json ? '\\' : '"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void put_row(FILE *f, const tf_trade *t, int64_t k, const tf_cli_series_info *info, int json)
{
    const char *sep = json ? ", " : ",";
    if (json)
        fprintf(f,
                "%s    {\"trade\": %lld, \"direction\": %d, \"entry_bar\": %lld, "
                "\"exit_bar\": %lld",
                k ? ",\n" : "", (long long)k + 1, t->direction, (long long)t->entry_bar,
                (long long)t->exit_bar);
    else
        fprintf(f, "%lld,%d,%lld,%lld", (long long)k + 1, t->direction, (long long)t->entry_bar,
                (long long)t->exit_bar);
    if (info->dates) {
        fprintf(f, "%s%s", sep, json ? "\"entry_date\": " : "");
        put_date(f, info, t->entry_bar, json);
        fprintf(f, "%s%s", sep, json ? "\"exit_date\": " : "");
        put_date(f, info, t->exit_bar, json);
    }
    fprintf(f,
            json ? ", \"entry_price\": %.17g, \"exit_price\": %.17g, \"ret\": %.17g, "
                   "\"bars\": %lld"
                 : ",%.17g,%.17g,%.17g,%lld",
            t->entry_price, t->exit_price, t->ret, (long long)(t->exit_bar - t->entry_bar));
    if (info->times)
        fprintf(f, json ? ", \"days\": %.17g" : ",%.17g",
                (double)(info->times[t->exit_bar] - info->times[t->entry_bar]) / 86400e9);
    fprintf(f, json ? ", \"open\": %d}" : ",%d\n", t->open);
}

static void put_head(FILE *f, const tf_strategy_def *def, const double *p, const trades_args *a,
                     int64_t n, const tf_stats *st, const tf_cli_series_info *info)
{
    if (!a->json) {
        fprintf(f, "trade,direction,entry_bar,exit_bar,%sentry_price,exit_price,ret,bars,%sopen\n",
                info->dates ? "entry_date,exit_date," : "", info->times ? "days," : "");
        return;
    }
    fprintf(f, "{\"strategy\": \"%s\", \"params\": {", def->name);
    for (uint32_t k = 0; k < def->n_params; k++)
        fprintf(f, "%s\"%s\": %.17g", k ? ", " : "", def->param_names[k], p[k]);
    fprintf(f, "}, \"fee\": %.17g, \"bars\": %lld, \"pnl\": %.17g, \"trades\": %lld,\n", a->fee,
            (long long)n, st->pnl, (long long)st->trades);
    fputs("  \"rows\": [\n", f);
}

/* Writes the list; 0, or 1 after one line on stderr. */
static int write_list(const trades_args *a, const tf_strategy_def *def, const double *p,
                      const tf_trade *t, int64_t rows, int64_t n, const tf_stats *st,
                      const tf_cli_series_info *info)
{
    FILE *f = a->out && strcmp(a->out, "-") ? fopen(a->out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "tollfree trades: --out %s: %s\n", a->out, strerror(errno));
        return 1;
    }
    put_head(f, def, p, a, n, st, info);
    for (int64_t k = 0; k < rows; k++)
        put_row(f, &t[k], k, info, a->json);
    if (a->json)
        fputs("\n  ]\n}\n", f);
    int bad = fflush(f) != 0 || ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    if (bad) {
        fprintf(stderr, "tollfree trades: write failed: %s\n", strerror(errno));
        return 1;
    }
    if (!a->quiet)
        fprintf(stderr, "tollfree trades: %s over %lld bars: %lld closed trades, pnl %.6g%s\n",
                def->name, (long long)n, (long long)st->trades, st->pnl,
                rows > st->trades ? ", and the position open at the end (the last row, open=1)"
                                  : "");
    return 0;
}

static int run(const trades_args *a, const tf_strategy_def *def, const double *p)
{
    double *close = NULL;
    int64_t n;
    tf_cli_series_info info = {0};
    if (a->input) {
        tf_cli_series_opts so = a->sopts;
        so.keep_dates = 1;
        if (tf_cli_read_series_ex(a->input, &so, &close, &n, &info))
            return 1;
    } else {
        n = (int64_t)(tf_default_close_bytes / sizeof(double));
    }
    const double *c = close ? close : tf_default_close;
    char msg[1024];
    tf_stats st;
    int64_t rows = tf_trades_list(def, p, c, n, a->fee, NULL, 0, &st, msg, sizeof msg);
    tf_trade *t = rows > 0 ? malloc(sizeof(tf_trade) * (size_t)rows) : NULL;
    if (rows > 0 && !t)
        rows = TF_E_NOMEM;
    if (rows > 0)
        rows = tf_trades_list(def, p, c, n, a->fee, t, rows, &st, msg, sizeof msg);
    int status = 1;
    if (rows < 0)
        fprintf(stderr, "tollfree trades: %s\n", rows == TF_E_NOMEM ? "out of memory" : msg);
    else
        status = write_list(a, def, p, t, rows, n, &st, &info);
    free(t);
    free(close);
    free(info.dates);
    free(info.date_off);
    free(info.times);
    return status;
}

int tf_cmd_trades(int argc, char **argv)
{
    trades_args a = {.fee = TF_FEE_DEFAULT, .sopts = {.column = "close"}};
    int rc = tf_cli_options("tollfree trades", argc, argv, long_opts, take_option, &a);
    if (rc == 0) {
        fputs(usage, stdout);
        fputs(tf_cli_series_help, stdout);
        fputs(usage_tail, stdout);
    }
    if (rc >= 0)
        return rc;
    const tf_strategy_def *def;
    tf_strategy_lib *lib = NULL;
    double p[TF_STRATEGY_MAX_PARAMS];
    rc = resolve_combo(&a, &def, &lib, p);
    if (!rc)
        rc = run(&a, def, p);
    tf_strategy_unload(lib);
    return rc;
}
