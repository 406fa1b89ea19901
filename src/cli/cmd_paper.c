/* tollfree paper: a combo trades bar by bar through the order engine, and its PnL, computed from
 * the fills alone, equals the sweep's for the same (tick-rounded) bars, bit for bit.
 *
 * Why parity holds: every fill is at a bar's rounded close, px = (double)ticks * T, the same double
 * the kernel sees for that bar; the strategy's position changes exactly where the kernel's does
 * (the streaming kernel is the batch kernel, bar by bar); and the PnL of a closed position is
 * computed from the fills with the kernel's own expression, (double)pos * (exit - entry) / entry
 * * 100.0 - fee, evaluated in that order, per closed trade (docs/definition.md section 5).
 * This file is built without FP contraction (ISO C mode, and no FMA in the baseline ISA), so the
 * expression compiles to the same IEEE operations as the kernel's. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/kernel.h"
#include "tollfree/orders.h"

static const char usage[] =
    "usage: tollfree paper --combo L,half,sq,p,p3,p2 [options]\n"
    "\n"
    "Paper-trades one combo through the order engine. Each bar's close is rounded to ticks\n"
    "(round(close / T), half to even); the strategy (the kernel's streaming API) sees ticks * T;\n"
    "when its position changes it sends an order for the change (1 lot to open, 2 to reverse)\n"
    "from its account (1). By default the venue fills it in a closing auction at the bar's price:\n"
    "a counterparty account (2) rests a limit order at that tick price on the other side, and the\n"
    "strategy's limit order crosses it, so every fill is at the bar's rounded close. The PnL is\n"
    "computed from the fills with the kernel's formula (docs/definition.md section 5); parity\n"
    "means pnl and trades equal the sweep's on the rounded series bit for bit.\n"
    "\n"
    "options:\n"
    "  --combo SPEC      six window lengths L,half,sq,p,p3,p2, or one Hull length L (expanded\n"
    "                    as docs/definition.md section 2). Required.\n"
    "  --input FILE      close series: CSV with a header line, or raw little-endian f64 (*.f64,\n"
    "                    *.bin, *.raw). Default: the embedded data set (150,000 bars)\n"
    "  --column NAME     CSV column holding the close (default: close)\n"
    "  --tick T          tick size (default 0.0001)\n"
    "  --fee F           fee per closed trade in percent points (default 0.09); the kernel's\n"
    "                    figure it is compared with uses the same fee\n"
    "  --engine URL      unix:PATH or tcp:HOST:PORT of `tollfree engine serve` (the orders go\n"
    "                    through the service with the C client: the strategy on one connection,\n"
    "                    the counterparty or quoter on another, which receives its fills as\n"
    "                    unsolicited Trades). Default: an in-process engine, instrument 1\n"
    "  --instrument ID   the instrument traded (default 1; the service must list it)\n"
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
    "                    `python3 -m tollfree.paper` with the same arguments (the Python loop,\n"
    "                    the same results; $TOLLFREE_PYTHON picks the interpreter, default\n"
    "                    /usr/bin/python3)\n"
    "  --quiet           no progress bar (it is shown only when stderr is a terminal)\n"
    "  -h, --help        this text\n"
    "\n"
    "exit status: 0 parity (or --half-spread), 1 parity failed, 2 usage or venue error.\n"
    "\n"
    "examples:\n"
    "  tollfree paper --combo 6,3,2,3,1,2 --json\n"
    "  tollfree paper --combo 6,3,2,3,1,2 --engine unix:/tmp/engine.sock\n"
    "  tollfree paper --combo 20 --input prices.csv --column close --half-spread 2\n";

enum { ACCT_STRATEGY = 1, ACCT_COUNTER = 2, ACCT_QUOTER = 3 };
#define MAX_LIVE_ORDERS 1024 /* in-process engine: the auction never leaves more than 3 live */
#define REPLY_CAP (MAX_LIVE_ORDERS + 2)
#define QUOTE_QTY 2 /* a reversal (2 lots) always fills against one quote */

/* ---------------------------------------------------------------- the venue */

/* Where the commands go: an in-process engine (optionally journaled) or the service through
 * two client connections (0: the strategy, 1: the counterparty or quoter). */
typedef struct venue {
    tf_engine *engine;
    tf_journal *jcmd, *jev;
    uint64_t next_seq;
    tf_orders *conn[2];
    tf_ofl_msg *ev; /* REPLY_CAP events of the last command */
    size_t n_ev;
    uint64_t commands, events;
    uint64_t venue_fills; /* service: unsolicited Trades connection 1 received */
} venue;

/* Applies one command; its events are v->ev[0..v->n_ev). Prints why on failure. */
static int venue_call(venue *v, int who, tf_ofl_msg *cmd)
{
    int rc;
    if (v->engine) {
        uint64_t seq = ++v->next_seq;
        switch (cmd->kind) {
        case TF_OFL_NEW_LIMIT:
            cmd->new_limit.command_seq = seq;
            break;
        case TF_OFL_NEW_MARKET:
            cmd->new_market.command_seq = seq;
            break;
        case TF_OFL_CANCEL_BY_ORDER:
            cmd->cancel_by_order.command_seq = seq;
            break;
        case TF_OFL_CANCEL_BY_CLIENT:
            cmd->cancel_by_client.command_seq = seq;
            break;
        default:
            cmd->replace.command_seq = seq;
            break;
        }
        if (v->jcmd && (rc = tf_journal_append(v->jcmd, cmd, NULL)) < 0) {
            fprintf(stderr, "tollfree paper: journal: %s\n", tf_strerror(rc));
            return rc;
        }
        tf_engine_sink sink = {.ev = v->ev, .cap = REPLY_CAP};
        rc = tf_engine_apply(v->engine, cmd, &sink);
        if (rc < 0) {
            fprintf(stderr, "tollfree paper: engine: %s\n", tf_strerror(rc));
            return rc;
        }
        v->n_ev = sink.n;
        for (size_t k = 0; v->jev && k < sink.n; k++) {
            if ((rc = tf_journal_append(v->jev, &v->ev[k], NULL)) < 0) {
                fprintf(stderr, "tollfree paper: event journal: %s\n", tf_strerror(rc));
                return rc;
            }
        }
    } else {
        tf_orders_reply r = {.ev = v->ev, .cap = REPLY_CAP};
        rc = tf_orders_call(v->conn[who], cmd, &r);
        if (rc < 0) {
            fprintf(stderr, "tollfree paper: engine service: %s\n", tf_strerror(rc));
            return rc;
        }
        if (r.n > REPLY_CAP) {
            fprintf(stderr, "tollfree paper: a reply of %zu events (more than %d)\n", r.n,
                    REPLY_CAP);
            return TF_E_LIMIT;
        }
        v->n_ev = r.n;
    }
    v->commands++;
    v->events += v->n_ev;
    return 0;
}

/* The order id of an accepted order, or 0 after printing the reject. */
static uint64_t accepted_id(const venue *v, int64_t bar, const char *what)
{
    if (v->n_ev >= 1 && v->ev[0].kind == TF_OFL_ACCEPTED)
        return v->ev[0].accepted.order_id;
    if (v->n_ev >= 1 && v->ev[0].kind == TF_OFL_REJECTED) {
        const char *why = tf_ofl_reason_name(v->ev[0].rejected.reason);
        fprintf(stderr, "tollfree paper: bar %" PRId64 ": %s rejected: %s\n", bar, what,
                why ? why : "?");
    } else {
        fprintf(stderr, "tollfree paper: bar %" PRId64 ": %s: unexpected reply\n", bar, what);
    }
    return 0;
}

/* ---------------------------------------------------------------- the books of the strategy */

/* Position and PnL from fills. The strategy holds -1, 0 or +1 lot; a fill of q lots first
 * closes what is open (one closed trade, the kernel's expression), then opens the rest. */
typedef struct ledger {
    int pos;
    double entry; /* price of the open position = its fill price, ticks * T */
    double pnl;
    int64_t trades;
    int64_t fills, lots;
} ledger;

static int ledger_fill(ledger *l, int dir, uint64_t qty, int64_t px_ticks, double tick, double fee)
{
    double px = (double)px_ticks * tick;
    l->fills++;
    l->lots += (int64_t)qty;
    while (qty > 0) {
        if (l->pos != 0 && l->pos != dir) {
            l->pnl += (double)l->pos * (px - l->entry) / l->entry * 100.0 - fee;
            l->trades++;
            l->pos = 0;
        } else if (l->pos == 0) {
            l->pos = dir;
            l->entry = px;
        } else {
            return -1; /* more than one lot: not a position this strategy takes */
        }
        qty--;
    }
    return 0;
}

/* ---------------------------------------------------------------- the run */

typedef struct paper_cfg {
    int64_t combo[6];
    double tick;
    double fee;          /* percent points per closed trade (docs/definition.md section 9) */
    int64_t half_spread; /* 0: auction */
    uint64_t instrument;
    int progress;
} paper_cfg;

typedef struct paper_out {
    int64_t bars, orders, commands, events;
    ledger led;
    int final_pos;
    double stream_pnl;
    int64_t stream_trades;
    double seconds;
} paper_out;

typedef struct quote {
    uint64_t oid; /* 0: none live */
    uint64_t remaining;
} quote;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress(int64_t i, int64_t n)
{
    int w = 40, k = (int)((double)w * (double)i / (double)n);
    char bar[41];
    memset(bar, '#', (size_t)k);
    memset(bar + k, ' ', (size_t)(w - k));
    bar[w] = 0;
    fprintf(stderr, "\rpaper [%s] %3d%% %" PRId64 "/%" PRId64 " bars", bar,
            (int)(100.0 * (double)i / (double)n), i, n);
    if (i == n)
        fputc('\n', stderr);
}

/* Keeps the quoter's order on one side at px: a Replace while it lives, else a new order. */
static int requote(venue *v, quote *q, int side, int64_t px, uint64_t *cid, uint64_t inst,
                   int64_t bar)
{
    tf_ofl_msg m = {0};
    if (q->oid) {
        m.kind = TF_OFL_REPLACE;
        m.replace.order_id = q->oid;
        m.replace.client_order_id = ++*cid;
        m.replace.price = px;
        m.replace.quantity.lo = QUOTE_QTY;
    } else {
        m.kind = TF_OFL_NEW_LIMIT;
        m.new_limit.account_id = ACCT_QUOTER;
        m.new_limit.client_order_id = ++*cid;
        m.new_limit.instrument_id = inst;
        m.new_limit.side = (uint8_t)side;
        m.new_limit.price = px;
        m.new_limit.quantity.lo = QUOTE_QTY;
    }
    int rc = venue_call(v, 1, &m);
    if (rc)
        return rc;
    if (q->oid) {
        if (v->n_ev < 1 || v->ev[0].kind != TF_OFL_REPLACED) {
            fprintf(stderr, "tollfree paper: bar %" PRId64 ": quote replace refused\n", bar);
            return -1;
        }
    } else if (!(q->oid = accepted_id(v, bar, "quote"))) {
        return -1;
    }
    if (v->n_ev > 1) { /* a quote that trades: the books were not as this loop left them */
        fprintf(stderr, "tollfree paper: bar %" PRId64 ": a quote traded on entry\n", bar);
        return -1;
    }
    q->remaining = QUOTE_QTY;
    return 0;
}

static int run_paper(const paper_cfg *cfg, const double *close, int64_t n, venue *v, paper_out *out)
{
    tf_strategy *s = NULL;
    int rc = tf_strategy_open(&s, cfg->combo);
    if (!rc)
        rc = tf_strategy_set_fee(s, cfg->fee);
    if (rc) {
        fprintf(stderr, "tollfree paper: --combo: %s\n", tf_strerror(rc));
        tf_strategy_close(s);
        return rc;
    }
    memset(out, 0, sizeof *out);
    ledger *led = &out->led;
    quote bid = {0}, ask = {0};
    uint64_t cid_strategy = 0, cid_venue = 0;
    int pos = 0;
    int64_t last_ticks = 0;
    int64_t every = n / 200 + 1;
    double t0 = now_s();
    tf_ofl_msg fills[64];
    for (int64_t i = 0; i < n && !rc; i++) {
        double q = nearbyint(close[i] / cfg->tick);
        int64_t ticks = (int64_t)q;
        if (!(q >= 1.0 && q <= 9007199254740992.0) ||
            (cfg->half_spread && ticks - cfg->half_spread < 1)) {
            fprintf(stderr,
                    "tollfree paper: bar %" PRId64 ": close %.17g is not a positive price in "
                    "ticks of %g%s\n",
                    i, close[i], cfg->tick, cfg->half_spread ? " (with the half spread)" : "");
            rc = -1;
            break;
        }
        int want = tf_strategy_step(s, (double)ticks * cfg->tick);
        if (cfg->half_spread) {
            /* Move the side the price moves towards first, so the quotes never cross. */
            int64_t b = ticks - cfg->half_spread, a = ticks + cfg->half_spread;
            if (ticks >= last_ticks) {
                rc = requote(v, &ask, TF_OFL_SELL, a, &cid_venue, cfg->instrument, i);
                if (!rc)
                    rc = requote(v, &bid, TF_OFL_BUY, b, &cid_venue, cfg->instrument, i);
            } else {
                rc = requote(v, &bid, TF_OFL_BUY, b, &cid_venue, cfg->instrument, i);
                if (!rc)
                    rc = requote(v, &ask, TF_OFL_SELL, a, &cid_venue, cfg->instrument, i);
            }
            last_ticks = ticks;
        }
        if (!rc && want != pos) {
            int dir = want > pos ? 1 : -1;
            uint64_t qty = (uint64_t)abs(want - pos);
            int side = dir > 0 ? TF_OFL_BUY : TF_OFL_SELL;
            tf_ofl_msg m = {0};
            if (!cfg->half_spread) { /* the closing auction: the other side rests first */
                m.kind = TF_OFL_NEW_LIMIT;
                m.new_limit.account_id = ACCT_COUNTER;
                m.new_limit.client_order_id = ++cid_venue;
                m.new_limit.instrument_id = cfg->instrument;
                m.new_limit.side = (uint8_t)(dir > 0 ? TF_OFL_SELL : TF_OFL_BUY);
                m.new_limit.price = ticks;
                m.new_limit.quantity.lo = qty;
                if ((rc = venue_call(v, 1, &m)) != 0)
                    break;
                if (!accepted_id(v, i, "the counterparty's order")) {
                    rc = -1;
                    break;
                }
                m.new_limit.account_id = ACCT_STRATEGY;
                m.new_limit.client_order_id = ++cid_strategy;
                m.new_limit.side = (uint8_t)side;
            } else {
                m.kind = TF_OFL_NEW_MARKET;
                m.new_market.account_id = ACCT_STRATEGY;
                m.new_market.client_order_id = ++cid_strategy;
                m.new_market.instrument_id = cfg->instrument;
                m.new_market.side = (uint8_t)side;
                m.new_market.quantity.lo = qty;
            }
            if ((rc = venue_call(v, 0, &m)) != 0)
                break;
            out->orders++;
            uint64_t oid = accepted_id(v, i, "the strategy's order");
            if (!oid) {
                rc = -1;
                break;
            }
            for (size_t k = 1; k < v->n_ev; k++) {
                const tf_ofl_msg *e = &v->ev[k];
                if (e->kind != TF_OFL_TRADE || e->trade.taker_order_id != oid)
                    continue;
                if (ledger_fill(led, dir, e->trade.quantity.lo, e->trade.price, cfg->tick,
                                cfg->fee)) {
                    rc = -1;
                    break;
                }
                quote *hit = e->trade.maker_order_id == bid.oid   ? &bid
                             : e->trade.maker_order_id == ask.oid ? &ask
                                                                  : NULL;
                if (hit && (hit->remaining -= e->trade.quantity.lo) == 0)
                    hit->oid = 0;
            }
            if (!rc && led->pos != want) {
                fprintf(stderr,
                        "tollfree paper: bar %" PRId64 ": the order was not filled (position %d, "
                        "wanted %d)\n",
                        i, led->pos, want);
                rc = -1;
            }
            pos = want;
        }
        if (!rc && v->conn[1]) { /* drain the other side's fills: a reader that never reads
                                    would be closed by the service */
            int got = tf_orders_poll_fills(v->conn[1], fills, 64, 0);
            if (got < 0) {
                fprintf(stderr, "tollfree paper: engine service: %s\n", tf_strerror(got));
                rc = got;
            } else {
                v->venue_fills += (uint64_t)got;
            }
        }
        if (cfg->progress && (i % every == 0 || i + 1 == n))
            progress(i + 1, n);
        out->bars = i + 1;
    }
    /* Leave the service's book as it was: the quotes go. */
    for (quote *qq = &bid; !rc && qq; qq = qq == &bid ? &ask : NULL) {
        if (!qq->oid)
            continue;
        tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_ORDER};
        m.cancel_by_order.order_id = qq->oid;
        rc = venue_call(v, 1, &m);
    }
    /* The counterparty's last fills may still be on their way: wait for them (bounded). */
    for (double end = now_s() + 10.0; !rc && v->conn[1] && cfg->half_spread == 0 &&
                                      v->venue_fills < (uint64_t)led->fills && now_s() < end;) {
        int got = tf_orders_poll_fills(v->conn[1], fills, 64, 100);
        if (got < 0)
            rc = got;
        else
            v->venue_fills += (uint64_t)got;
    }
    out->seconds = now_s() - t0;
    out->final_pos = pos;
    out->commands = (int64_t)v->commands;
    out->events = (int64_t)v->events;
    out->stream_pnl = tf_strategy_pnl(s);
    out->stream_trades = tf_strategy_trades(s);
    tf_strategy_close(s);
    return rc;
}

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

static int mkdir_p(const char *dir)
{
    if (mkdir(dir, 0755) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

static int open_journals(venue *v, const char *dir)
{
    char path[4096];
    int rc = mkdir_p(dir);
    if (rc) {
        fprintf(stderr, "tollfree paper: --journal %s: %s\n", dir, tf_strerror(rc));
        return rc;
    }
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .clock_kind = TF_OFL_CLOCK_LOGICAL};
    const char *names[2] = {"commands.ofl", "events.ofl"};
    tf_journal **js[2] = {&v->jcmd, &v->jev};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        tf_journal_recovery rec;
        rc = tf_journal_open(path, &o, js[k], &rec);
        if (rc) {
            fprintf(stderr, "tollfree paper: %s: %s\n", path, tf_strerror(rc));
            return rc;
        }
        if (rec.records) {
            fprintf(stderr,
                    "tollfree paper: %s already holds %" PRIu64 " records: use an empty "
                    "directory\n",
                    path, rec.records);
            return -1;
        }
    }
    return 0;
}

/* --plot: the Python side plots; run it with our arguments. */
static int exec_python(int argc, char **argv)
{
    int rc = tf_cli_python_exec("paper --plot", "tollfree.paper", argc - 1, argv + 1);
    return rc ? 2 : 0;
}

static void print_json(const paper_cfg *cfg, const char *engine_url, const paper_out *o,
                       double kpnl, int64_t ktrades, int parity, const venue *v, int has_hash,
                       uint64_t hash)
{
    printf("{\"mode\": \"%s\", \"engine\": \"%s\", ", cfg->half_spread ? "half_spread" : "auction",
           engine_url ? engine_url : "in-process");
    printf("\"combo\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
           "], ",
           cfg->combo[0], cfg->combo[1], cfg->combo[2], cfg->combo[3], cfg->combo[4],
           cfg->combo[5]);
    printf("\"tick\": %.17g, \"fee\": %.17g, \"half_spread\": %" PRId64 ", ", cfg->tick, cfg->fee,
           cfg->half_spread);
    printf("\"bars\": %" PRId64 ", \"orders\": %" PRId64 ", \"fills\": %" PRId64
           ", \"lots\": %" PRId64 ", ",
           o->bars, o->orders, o->led.fills, o->led.lots);
    printf("\"commands\": %" PRId64 ", \"events\": %" PRId64 ", ", o->commands, o->events);
    printf("\"pnl\": %.17g, \"trades\": %" PRId64 ", ", o->led.pnl, o->led.trades);
    printf("\"kernel_pnl\": %.17g, \"kernel_trades\": %" PRId64 ", ", kpnl, ktrades);
    printf("\"stream_pnl\": %.17g, \"stream_trades\": %" PRId64 ", ", o->stream_pnl,
           o->stream_trades);
    printf("\"parity\": %s, \"parity_expected\": %s, ", parity ? "true" : "false",
           cfg->half_spread ? "false" : "true");
    if (cfg->half_spread)
        printf("\"spread_cost\": %.17g, ", kpnl - o->led.pnl);
    printf("\"position\": %d, ", o->final_pos);
    if (engine_url)
        printf("\"venue_fills\": %" PRIu64 ", \"fills_dropped\": %" PRIu64 ", ", v->venue_fills,
               tf_orders_fills_dropped(v->conn[1]));
    if (has_hash) {
        char h[19];
        tf_engine_format_hash(hash, h);
        printf("\"state_hash\": \"%.18s\", ", h);
    }
    printf("\"seconds\": %.6f, \"bars_per_s\": %.1f}\n", o->seconds,
           o->seconds > 0 ? (double)o->bars / o->seconds : 0.0);
}

/* What the command line says. */
typedef struct paper_args {
    paper_cfg cfg;
    const char *input, *column, *engine_url, *journal, *plot;
    int json, quiet, have_combo;
} paper_args;

static const struct option long_opts[] = {{"combo", required_argument, 0, 'C'},
                                          {"input", required_argument, 0, 'i'},
                                          {"column", required_argument, 0, 'c'},
                                          {"tick", required_argument, 0, 't'},
                                          {"fee", required_argument, 0, 'f'},
                                          {"engine", required_argument, 0, 'e'},
                                          {"instrument", required_argument, 0, 'I'},
                                          {"half-spread", required_argument, 0, 's'},
                                          {"journal", required_argument, 0, 'j'},
                                          {"json", no_argument, 0, 'J'},
                                          {"plot", required_argument, 0, 'p'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};

/* One option with its value: 0, or 2 after one line on stderr. */
static int take_option(int c, const char *arg, void *ctx)
{
    paper_args *a = ctx;
    char *end;
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
        if (*end || !(a->cfg.tick > 0) || !isfinite(a->cfg.tick)) {
            fprintf(stderr, "tollfree paper: --tick %s: want a positive number\n", arg);
            return 2;
        }
        return 0;
    case 'f':
        return tf_cli_parse_fee("tollfree paper", arg, &a->cfg.fee) ? 2 : 0;
    case 'I':
        a->cfg.instrument = strtoull(arg, &end, 10);
        if (*end || a->cfg.instrument == 0) {
            fprintf(stderr, "tollfree paper: --instrument %s: want an id >= 1\n", arg);
            return 2;
        }
        return 0;
    case 's':
        a->cfg.half_spread = strtoll(arg, &end, 10);
        if (*end || a->cfg.half_spread < 1 || a->cfg.half_spread > (1LL << 40)) {
            fprintf(stderr, "tollfree paper: --half-spread %s: want ticks >= 1\n", arg);
            return 2;
        }
        return 0;
    case 'i':
        a->input = arg;
        return 0;
    case 'c':
        a->column = arg;
        return 0;
    case 'e':
        a->engine_url = arg;
        return 0;
    case 'j':
        a->journal = arg;
        return 0;
    case 'p':
        a->plot = arg;
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

/* Parses argv into a. -1: go on; else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, paper_args *a)
{
    *a = (paper_args){.cfg = {.tick = 1e-4, .fee = TF_FEE_DEFAULT, .instrument = 1},
                      .column = "close"};
    int rc = tf_cli_options("tollfree paper", argc, argv, long_opts, take_option, a);
    if (rc == 0)
        fputs(usage, stdout);
    if (rc >= 0)
        return rc;
    if (!a->have_combo) {
        fprintf(stderr, "tollfree paper: --combo is required (try --help)\n");
        return 2;
    }
    if (a->journal && a->engine_url) {
        fprintf(stderr, "tollfree paper: --journal is for the in-process engine (the service "
                        "keeps its own journal)\n");
        return 2;
    }
    return -1;
}

/* Opens the venue: two connections to the service, or an in-process engine (journaled with
 * --journal). 0, or -1 after one line on stderr. */
static int open_venue(const paper_args *a, venue *v)
{
    v->ev = calloc(REPLY_CAP, sizeof *v->ev);
    if (!v->ev) {
        fprintf(stderr, "tollfree paper: out of memory\n");
        return -1;
    }
    int rc;
    if (a->engine_url) {
        tf_orders_opts oo = {.size = sizeof oo};
        for (int k = 0; k < 2; k++) {
            rc = tf_orders_connect(&v->conn[k], a->engine_url, &oo);
            if (rc) {
                fprintf(stderr, "tollfree paper: --engine %s: %s\n", a->engine_url,
                        tf_strerror(rc));
                return -1;
            }
        }
        return 0;
    }
    uint64_t inst = a->cfg.instrument;
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = &inst, .n_instruments = 1, .max_orders = MAX_LIVE_ORDERS};
    rc = tf_engine_create(&ec, &v->engine);
    if (rc) {
        fprintf(stderr, "tollfree paper: engine: %s\n", tf_strerror(rc));
        return -1;
    }
    return a->journal && open_journals(v, a->journal) ? -1 : 0;
}

/* Closes the venue's journals (they must end whole): 0, or -1 after one line on stderr. */
static int close_journals(venue *v)
{
    for (int k = 0; k < 2; k++) {
        tf_journal **j = k ? &v->jev : &v->jcmd;
        if (!*j)
            continue;
        int rc = tf_journal_close(*j);
        *j = NULL;
        if (rc) {
            fprintf(stderr, "tollfree paper: journal: %s\n", tf_strerror(rc));
            return -1;
        }
    }
    return 0;
}

static void venue_close(venue *v)
{
    tf_journal_close(v->jcmd);
    tf_journal_close(v->jev);
    tf_engine_destroy(v->engine);
    tf_orders_close(v->conn[0]);
    tf_orders_close(v->conn[1]);
    free(v->ev);
}

/* The kernel's figure for the combo on the series rounded to the tick, as the venue saw it.
 * 0, or -1 after one line on stderr. */
static int kernel_figure(const paper_cfg *cfg, const double *close, int64_t n, double *kpnl,
                         int64_t *ktrades)
{
    double *px = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!px) {
        fprintf(stderr, "tollfree paper: out of memory\n");
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        px[i] = nearbyint(close[i] / cfg->tick) * cfg->tick;
    *kpnl = 0;
    *ktrades = 0;
    tf_sweep_opts so = {.threads = 1, .fee = &cfg->fee};
    int rc = tf_sweep(px, n, cfg->combo, 1, kpnl, ktrades, &so);
    free(px);
    if (rc) {
        fprintf(stderr, "tollfree paper: sweep: %s\n", tf_strerror(rc));
        return -1;
    }
    return 0;
}

static void print_text(const paper_cfg *cfg, const char *engine_url, const paper_out *o,
                       double kpnl, int64_t ktrades, int parity, int has_hash, uint64_t hash)
{
    printf("paper: combo %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
           ", %" PRId64 " bars, %s, %s\n",
           cfg->combo[0], cfg->combo[1], cfg->combo[2], cfg->combo[3], cfg->combo[4], cfg->combo[5],
           o->bars, cfg->half_spread ? "quoted market" : "closing auction",
           engine_url ? engine_url : "in-process engine");
    printf("  orders %" PRId64 ", fills %" PRId64 ", commands %" PRId64 ", events %" PRId64 "\n",
           o->orders, o->led.fills, o->commands, o->events);
    printf("  pnl    %.17g  trades %" PRId64 "   (from the fills)\n", o->led.pnl, o->led.trades);
    printf("  kernel %.17g  trades %" PRId64 "   (the sweep on the rounded series)\n", kpnl,
           ktrades);
    if (cfg->half_spread)
        printf("  spread cost %.6f percent points (half spread %" PRId64 " ticks)\n",
               kpnl - o->led.pnl, cfg->half_spread);
    else
        printf("  parity %s\n", parity ? "yes (bit for bit)" : "NO");
    if (has_hash) {
        char h[19];
        tf_engine_format_hash(hash, h);
        printf("  state_hash %.18s\n", h);
    }
    printf("  %.3f s, %.0f bars/s\n", o->seconds,
           o->seconds > 0 ? (double)o->bars / o->seconds : 0.0);
}

int tf_cmd_paper(int argc, char **argv)
{
    paper_args a;
    int status = parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    if (a.plot)
        return exec_python(argc, argv);
    double *owned = NULL;
    const double *close = tf_default_close;
    int64_t n = (int64_t)(tf_default_close_bytes / sizeof(double));
    if (a.input) {
        if (tf_cli_read_series(a.input, a.column, 0, &owned, &n))
            return 2;
        close = owned;
    }
    venue v = {0};
    paper_out o;
    double kpnl;
    int64_t ktrades;
    status = 2;
    a.cfg.progress = !a.quiet && isatty(2);
    if (!open_venue(&a, &v) && !run_paper(&a.cfg, close, n, &v, &o) && !close_journals(&v) &&
        !kernel_figure(&a.cfg, close, n, &kpnl, &ktrades)) {
        uint64_t hash = v.engine ? tf_engine_state_hash(v.engine) : 0;
        int parity = memcmp(&kpnl, &o.led.pnl, sizeof kpnl) == 0 && ktrades == o.led.trades;
        if (a.json)
            print_json(&a.cfg, a.engine_url, &o, kpnl, ktrades, parity, &v, v.engine != NULL, hash);
        else
            print_text(&a.cfg, a.engine_url, &o, kpnl, ktrades, parity, v.engine != NULL, hash);
        status = (parity || a.cfg.half_spread) ? 0 : 1;
    }
    venue_close(&v);
    free(owned);
    return status;
}
