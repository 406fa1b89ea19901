/* The paper-trading loop (include/tollfree/paper.h): the one implementation behind `tollfree
 * paper` and tollfree.paper.run.
 *
 * Why parity holds: every close is rounded to a whole number of ticks and turned back into a
 * price by one function, tf_paper_price; the strategy, the kernel's figure and every fill see
 * that same double for a bar (a fill is booked at tf_paper_price(trade.price, tick), and the
 * closing auction fills at the bar's tick price); the strategy's position changes exactly where
 * the kernel's does (the streaming kernel is the batch kernel, bar by bar); and the PnL of a
 * closed position is computed from the fills with the kernel's own expression,
 * (double)pos * (exit - entry) / entry * 100.0 - fee, evaluated in that order, once per closed
 * trade (docs/definition.md section 5).
 *
 * That expression must compile to the same IEEE operations as the kernel's, so it must not be
 * contracted into a fused multiply-add ("... * 100.0 - fee"). src/kernel is built with
 * -ffp-contract=off explicitly. This file gets no such flag and needs none: the project builds
 * C11 with extensions off (CMAKE_C_EXTENSIONS OFF, so gcc runs with -std=c11, not gnu11), and in
 * ISO C mode gcc's default is -ffp-contract=off; only the GNU dialects default to =fast. Checked
 * with gcc 12: `a * b - c` built with -O2 -mfma gives a vfmsub under -std=gnu11 and none under
 * -std=c11, and `objdump -d` of this file's object shows no vfmadd/vfmsub. (Besides, the baseline
 * x86-64 ISA it is built for has no FMA.) A build that switched to a GNU dialect and an FMA ISA
 * would break parity; tests/unit/test_paper.c compares the PnL with tf_sweep's bits and fails.
 *
 * Why prices of decimal ticks divide: a close written with k decimals parses to the double
 * nearest m / 10^k; (double)m * 1e-k is that double only about half the time (1e-k is not
 * 10^-k), while (double)m / 10^k (10^k is exact for k <= 22) is correctly rounded, so it is
 * that double every time. With it, a price file with k decimals and the tick 10^-k trade the
 * file's own doubles: the rounded series is the series. */
#include "tollfree/paper.h"
#include "tollfree/strategy.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/msg.h"
#include "common/opts_size.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"
#include "tollfree/orders.h"
#include "tollfree/research.h"

enum { ACCT_STRATEGY = 1, ACCT_COUNTER = 2, ACCT_QUOTER = 3 };
#define REPLY_CAP (TF_PAPER_MAX_LIVE_ORDERS + 2)
#define QUOTE_QTY 2 /* a reversal (2 lots) always fills against one quote */
#define MAX_HALF_SPREAD ((int64_t)1 << 40)
#define MAX_TICKS 9007199254740992.0 /* 2^53: every whole number up to it is a double */

/* 10^k and the literal 1e-k, k = 0 .. TF_PAPER_MAX_DECIMALS: both are what the compiler makes
 * of the decimal text, the nearest double (10^k exactly). */
static const double pow10_pos[TF_PAPER_MAX_DECIMALS + 1] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5,
                                                            1e6, 1e7, 1e8, 1e9, 1e10};
static const double pow10_neg[TF_PAPER_MAX_DECIMALS + 1] = {1e0,  1e-1, 1e-2, 1e-3, 1e-4, 1e-5,
                                                            1e-6, 1e-7, 1e-8, 1e-9, 1e-10};

/* ---------------------------------------------------------------- ticks */

/* k when tick is the literal 1e-k (k <= TF_PAPER_MAX_DECIMALS), else -1. */
static int decimals_of(double tick)
{
    for (int k = 0; k <= TF_PAPER_MAX_DECIMALS; k++)
        if (tick == pow10_neg[k])
            return k;
    return -1;
}

/* A tick with its decimals resolved once (decimals_of is a loop). */
typedef struct tick_rule {
    double tick;
    int k; /* -1: not a decimal tick */
} tick_rule;

static tick_rule rule_of(double tick)
{
    return (tick_rule){tick, decimals_of(tick)};
}

static double price_of(const tick_rule *r, int64_t q)
{
    return r->k >= 0 ? (double)q / pow10_pos[r->k] : (double)q * r->tick;
}

/* 0 and *q, or -1 when close is no positive whole number of ticks below 2^53. */
static int round_of(const tick_rule *r, double close, int64_t *q)
{
    double x = r->k >= 0 ? nearbyint(close * pow10_pos[r->k]) : nearbyint(close / r->tick);
    if (!(x >= 1.0 && x <= MAX_TICKS))
        return -1;
    *q = (int64_t)x;
    return 0;
}

static int tick_ok(double tick)
{
    return tick > 0 && isfinite(tick);
}

double tf_paper_price(int64_t px_ticks, double tick)
{
    tick_rule r = rule_of(tick);
    return price_of(&r, px_ticks);
}

int tf_paper_round(double close, double tick, int64_t *px_ticks)
{
    if (!px_ticks)
        return TF_E_NULL_ARG;
    if (!tick_ok(tick))
        return TF_E_INVALID_ARG;
    tick_rule r = rule_of(tick);
    return round_of(&r, close, px_ticks) ? TF_E_BAD_INPUT : 0;
}

/* 1 when every close rounds to itself under r. */
static int holds_every_close(const tick_rule *r, const double *close, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t q;
        if (round_of(r, close[i], &q) || price_of(r, q) != close[i])
            return 0;
    }
    return 1;
}

int tf_paper_tick_from_data(const double *close, int64_t n_bars, double *tick)
{
    if (!tick || (!close && n_bars > 0))
        return TF_E_NULL_ARG;
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    for (int k = 0; k <= TF_PAPER_MAX_DECIMALS; k++) {
        tick_rule r = {pow10_neg[k], k};
        if (holds_every_close(&r, close, n_bars)) {
            *tick = pow10_neg[k];
            return 1;
        }
    }
    *tick = TF_PAPER_DEFAULT_TICK;
    return 0;
}

/* ---------------------------------------------------------------- the venue */

/* Commands sent to the in-process engine and not yet applied: a change of position is at most
 * two (the counterparty's and the strategy's), and so are the quotes of a bar. */
#define LOCAL_QUEUE 4

/* Where the commands go: an in-process engine (optionally journaled) or the service. Both take
 * commands with venue_send and give back each one's events, in order, with venue_recv: the
 * in-process engine applies a command when its events are asked for (nothing else touches it
 * in between, so the order of the commands, and with it every event, is the service's). On the
 * service connection 0 carries the strategy's orders and, in the auction, the counterparty's
 * just before them (one send: their order on the venue is the order on the connection);
 * connection 1 is the quoter's (half spread), which receives its fills as unsolicited Trades. */
typedef struct venue {
    tf_engine *engine;
    tf_journal *jcmd, *jev;
    uint64_t next_seq;
    tf_ofl_msg queue[LOCAL_QUEUE]; /* in-process: sent, not yet applied */
    size_t q_head, q_n;
    tf_orders *conn[2];
    tf_ofl_msg *ev; /* REPLY_CAP events of the last command received */
    size_t n_ev;
    uint64_t commands, events;
    uint64_t venue_fills; /* service: unsolicited Trades connection 1 received */
    char *msg;            /* the caller's message buffer */
    size_t msg_cap;
} venue;

/* Sends cmds[0 .. n) to connection `who` without waiting; returns how many were taken (fewer
 * than n: receive replies first), or the error with its message. */
static int venue_send(venue *v, int who, const tf_ofl_msg *cmds, size_t n)
{
    if (v->engine) {
        size_t k = 0;
        for (; k < n && v->q_n < LOCAL_QUEUE; k++, v->q_n++)
            v->queue[(v->q_head + v->q_n) % LOCAL_QUEUE] = cmds[k];
        return (int)k;
    }
    int rc = tf_orders_send(v->conn[who], cmds, n);
    if (rc < 0)
        return tfu_msg(rc, v->msg, v->msg_cap, "engine service: %s", tf_strerror(rc));
    return rc;
}

/* The events of the oldest command sent on `who` and not yet received: v->ev[0 .. v->n_ev). */
static int venue_recv(venue *v, int who)
{
    int rc;
    if (v->engine) {
        if (!v->q_n)
            return tfu_msg(TF_E_INVALID_ARG, v->msg, v->msg_cap, "no command to apply");
        tf_ofl_msg *cmd = &v->queue[v->q_head];
        v->q_head = (v->q_head + 1) % LOCAL_QUEUE;
        v->q_n--;
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
        if (v->jcmd && (rc = tf_journal_append(v->jcmd, cmd, NULL)) < 0)
            return tfu_msg(rc, v->msg, v->msg_cap, "journal: %s", tf_strerror(rc));
        tf_engine_sink sink = {.ev = v->ev, .cap = REPLY_CAP};
        rc = tf_engine_apply(v->engine, cmd, &sink);
        if (rc < 0)
            return tfu_msg(rc, v->msg, v->msg_cap, "engine: %s", tf_strerror(rc));
        v->n_ev = sink.n;
        for (size_t k = 0; v->jev && k < sink.n; k++)
            if ((rc = tf_journal_append(v->jev, &v->ev[k], NULL)) < 0)
                return tfu_msg(rc, v->msg, v->msg_cap, "event journal: %s", tf_strerror(rc));
    } else {
        tf_orders_reply r = {.ev = v->ev, .cap = REPLY_CAP};
        rc = tf_orders_recv(v->conn[who], &r);
        if (rc < 0)
            return tfu_msg(rc, v->msg, v->msg_cap, "engine service: %s", tf_strerror(rc));
        if (r.n > REPLY_CAP)
            return tfu_msg(TF_E_LIMIT, v->msg, v->msg_cap, "a reply of %zu events (more than %d)",
                           r.n, REPLY_CAP);
        v->n_ev = r.n;
    }
    v->commands++;
    v->events += v->n_ev;
    return 0;
}

/* One command and its events (the end of the run's quote cancels). */
static int venue_call(venue *v, int who, const tf_ofl_msg *cmd)
{
    int rc = venue_send(v, who, cmd, 1);
    if (rc == 0)
        rc = tfu_msg(TF_E_LIMIT, v->msg, v->msg_cap, "the order client took no command");
    return rc < 0 ? rc : venue_recv(v, who);
}

/* The order id of an accepted order, or 0 after writing why into the message. */
static uint64_t accepted_id(const venue *v, int64_t bar, const char *what)
{
    if (v->n_ev >= 1 && v->ev[0].kind == TF_OFL_ACCEPTED)
        return v->ev[0].accepted.order_id;
    if (v->n_ev >= 1 && v->ev[0].kind == TF_OFL_REJECTED) {
        const char *why = tf_ofl_reason_name(v->ev[0].rejected.reason);
        tfu_msg(0, v->msg, v->msg_cap, "bar %" PRId64 ": %s rejected: %s", bar, what,
                why ? why : "?");
    } else {
        tfu_msg(0, v->msg, v->msg_cap, "bar %" PRId64 ": %s: unexpected reply", bar, what);
    }
    return 0;
}

static int mkdir_p(const char *dir)
{
    if (mkdir(dir, 0755) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

/* The instrument list beside commands.ofl, so that `tollfree engine run` replays the run with
 * the instrument the paper loop traded (and says so) without --instruments. */
static int open_journals(venue *v, const char *dir, uint64_t instrument)
{
    char path[4096];
    int rc = mkdir_p(dir);
    if (rc)
        return tfu_msg(rc, v->msg, v->msg_cap, "journal %s: %s", dir, tf_strerror(rc));
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .clock_kind = TF_OFL_CLOCK_LOGICAL};
    const char *names[2] = {"commands.ofl", "events.ofl"};
    tf_journal **js[2] = {&v->jcmd, &v->jev};
    for (int k = 0; k < 2; k++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[k]) >= sizeof path)
            return tfu_msg(TF_E_INVALID_ARG, v->msg, v->msg_cap, "journal %s: path too long", dir);
        tf_journal_recovery rec;
        rc = tf_journal_open(path, &o, js[k], &rec);
        if (rc)
            return tfu_msg(rc, v->msg, v->msg_cap, "%s: %s", path, tf_strerror(rc));
        if (rec.records)
            return tfu_msg(TF_E_INVALID_ARG, v->msg, v->msg_cap,
                           "%s already holds %" PRIu64 " records: use an empty directory", path,
                           rec.records);
        if (k == 0 && (rc = tf_journal_instruments_save(
                           path, tf_journal_header(v->jcmd)->session_id, &instrument, 1)) != 0)
            return tfu_msg(rc, v->msg, v->msg_cap, "%s%s: %s", path, TF_JOURNAL_INSTRUMENTS_SUFFIX,
                           tf_strerror(rc));
    }
    return 0;
}

/* window: the position changes the strategy's connection keeps in flight (two commands each). */
static int venue_open(venue *v, const tf_paper_config *c, uint32_t window)
{
    v->ev = calloc(REPLY_CAP, sizeof *v->ev);
    if (!v->ev)
        return tfu_msg(TF_E_NOMEM, v->msg, v->msg_cap, "out of memory");
    int rc;
    if (c->engine_url) {
        tf_orders_opts oo = {.size = sizeof oo,
                             .timeout_ms = c->timeout_ms,
                             .max_inflight = 2 * window,
                             .session = c->session,
                             .secret = c->secret,
                             .secret_len = c->secret_len};
        /* The quoter's connection only with a half spread: the auction's counterparty sends on
         * the strategy's. */
        for (int k = 0; k < (c->half_spread ? 2 : 1); k++) {
            rc = tf_orders_connect(&v->conn[k], c->engine_url, &oo);
            if (!rc && k && c->session) /* one session, two connections: one numbers */
                rc = tf_orders_set_next_client_seq(v->conn[k], 0);
            if (rc == -EACCES && c->session)
                return tfu_msg(rc, v->msg, v->msg_cap,
                               "engine %s: logon as session %s refused (an unknown session or "
                               "a wrong secret)",
                               c->engine_url, c->session);
            if (rc)
                return tfu_msg(rc, v->msg, v->msg_cap, "engine %s: %s", c->engine_url,
                               tf_strerror(rc));
        }
        return 0;
    }
    uint64_t inst = c->instrument;
    tf_engine_config ec = {.size = sizeof ec,
                           .instruments = &inst,
                           .n_instruments = 1,
                           .max_orders = TF_PAPER_MAX_LIVE_ORDERS};
    rc = tf_engine_create(&ec, &v->engine);
    if (rc)
        return tfu_msg(rc, v->msg, v->msg_cap, "engine: %s", tf_strerror(rc));
    return c->journal_dir ? open_journals(v, c->journal_dir, inst) : 0;
}

/* Closes the journals (they must end whole): 0 or the first error. */
static int close_journals(venue *v)
{
    for (int k = 0; k < 2; k++) {
        tf_journal **j = k ? &v->jev : &v->jcmd;
        if (!*j)
            continue;
        int rc = tf_journal_close(*j);
        *j = NULL;
        if (rc)
            return tfu_msg(rc, v->msg, v->msg_cap, "journal: %s", tf_strerror(rc));
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

/* ---------------------------------------------------------------- the books of the strategy */

/* Position and PnL from fills. The strategy holds -1, 0 or +1 lot; a fill of q lots first
 * closes what is open (one closed trade, the kernel's expression), then opens the rest. */
typedef struct ledger {
    int pos;
    double entry; /* price of the open position = its fill price */
    double pnl;
    int64_t trades, fills, lots;
} ledger;

static int ledger_fill(ledger *l, int dir, uint64_t qty, double px, double fee)
{
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

typedef struct quote {
    uint64_t oid; /* 0: none live */
    uint64_t remaining;
} quote;

/* A change of position sent whose events are not booked yet. */
typedef struct change {
    int64_t bar;
    int want; /* the position after it */
    int dir;  /* +1 buy, -1 sell */
} change;

/* One run's working state: the resolved configuration, the rounded series and the books. */
typedef struct run {
    tf_paper_config c;
    double fee;
    tick_rule tr;
    const int64_t *ticks; /* [n] the closes in ticks */
    const double *px;     /* [n] their prices */
    int64_t n;
    venue v;
    ledger led;
    quote bid, ask;
    uint64_t cid_strategy, cid_venue;
    double params[TF_STRATEGY_MAX_PARAMS]; /* a strategy's params, copied */
    tf_paper_result *out;                  /* the local result: fill_log etc. */
    /* Changes in flight, oldest first: a ring of `window` (allocated before the loop). The
     * strategy's next position depends on prices only, never on fills, so the loop goes on to
     * the next bars while the service answers; the books see the fills in the order they were
     * made either way, so every figure is the one a change-by-change run gives, bit for bit. */
    change *pending;
    uint32_t window, p_head, p_n;
    int64_t bar;       /* the bar being traded: bars before it have sent everything */
    int64_t booked_to; /* equity and mtm are written for bars before it */
} run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* equity and mtm of bars [booked_to, upto): the books as they stand (no change among them). */
static void write_bars(run *r, int64_t upto)
{
    tf_paper_result *o = r->out;
    const ledger *l = &r->led;
    for (int64_t k = r->booked_to; k < upto; k++) {
        if (o->equity)
            o->equity[k] = l->pnl;
        if (o->mtm)
            o->mtm[k] =
                l->pnl + (l->pos ? (double)l->pos * (r->px[k] - l->entry) / l->entry * 100.0 : 0.0);
    }
    if (upto > r->booked_to)
        r->booked_to = upto;
}

/* The quoter's command that keeps its order on one side at px: a Replace while it lives, else a
 * new order. */
static tf_ofl_msg quote_cmd(run *r, const quote *q, int side, int64_t px)
{
    tf_ofl_msg m = {0};
    if (q->oid) {
        m.kind = TF_OFL_REPLACE;
        m.replace.order_id = q->oid;
        m.replace.client_order_id = ++r->cid_venue;
        m.replace.price = px;
        m.replace.quantity.lo = QUOTE_QTY;
    } else {
        m.kind = TF_OFL_NEW_LIMIT;
        m.new_limit.account_id = ACCT_QUOTER;
        m.new_limit.client_order_id = ++r->cid_venue;
        m.new_limit.instrument_id = r->c.instrument;
        m.new_limit.side = (uint8_t)side;
        m.new_limit.price = px;
        m.new_limit.quantity.lo = QUOTE_QTY;
    }
    return m;
}

/* The events of a quote's command (the last venue_recv): its order id, or the refusal. */
static int quote_done(run *r, quote *q, int64_t bar)
{
    venue *v = &r->v;
    if (q->oid) {
        if (v->n_ev < 1 || v->ev[0].kind != TF_OFL_REPLACED)
            return tfu_msg(TF_E_PROTOCOL, v->msg, v->msg_cap,
                           "bar %" PRId64 ": the quote's replace was refused", bar);
    } else if (!(q->oid = accepted_id(v, bar, "the quote"))) {
        return TF_E_PROTOCOL;
    }
    if (v->n_ev > 1) /* a quote that trades: the book was not as this loop left it */
        return tfu_msg(TF_E_PROTOCOL, v->msg, v->msg_cap,
                       "bar %" PRId64 ": a quote traded on entry (another order in the book?)",
                       bar);
    q->remaining = QUOTE_QTY;
    return 0;
}

/* Both quotes at the bar's price, the side the price moves towards first (so they never
 * cross): sent together on the quoter's connection, one round trip. The strategy's market
 * order goes on another connection and must meet these quotes, so they are read back before
 * it is sent. */
static int requote(run *r, int64_t ticks, int64_t last_ticks, int64_t bar)
{
    int64_t K = r->c.half_spread;
    quote *first = ticks >= last_ticks ? &r->ask : &r->bid;
    quote *second = first == &r->ask ? &r->bid : &r->ask;
    quote *qs[2] = {first, second};
    tf_ofl_msg m[2];
    for (int k = 0; k < 2; k++)
        m[k] = quote_cmd(r, qs[k], qs[k] == &r->ask ? TF_OFL_SELL : TF_OFL_BUY,
                         qs[k] == &r->ask ? ticks + K : ticks - K);
    int rc = venue_send(&r->v, 1, m, 2);
    if (rc >= 0 && rc < 2) /* both fit whenever nothing else is in flight */
        rc =
            tfu_msg(TF_E_LIMIT, r->v.msg, r->v.msg_cap, "the order client took %d of 2 quotes", rc);
    for (int k = 0; rc >= 0 && k < 2; k++) {
        rc = venue_recv(&r->v, 1);
        if (!rc)
            rc = quote_done(r, qs[k], bar);
    }
    return rc < 0 ? rc : 0;
}

/* Books the oldest change in flight: its commands' events, in the order sent (in the auction
 * the counterparty's resting order, then the strategy's, which crosses it), and the fills of
 * the strategy's order into the ledger. Then the bars up to the next change in flight (or up to
 * the bar being traded) are final. */
static int book_oldest(run *r)
{
    venue *v = &r->v;
    change ch = r->pending[r->p_head];
    r->p_head = (r->p_head + 1) % r->window;
    r->p_n--;
    int64_t i = ch.bar;
    write_bars(r, i);
    int rc;
    if (!r->c.half_spread) {
        if ((rc = venue_recv(v, 0)) != 0)
            return rc;
        if (!accepted_id(v, i, "the counterparty's order"))
            return TF_E_PROTOCOL;
    }
    if ((rc = venue_recv(v, 0)) != 0)
        return rc;
    r->out->orders++;
    uint64_t oid = accepted_id(v, i, "the strategy's order");
    if (!oid)
        return TF_E_PROTOCOL;
    for (size_t k = 1; k < v->n_ev; k++) {
        const tf_ofl_msg *e = &v->ev[k];
        if (e->kind != TF_OFL_TRADE || e->trade.taker_order_id != oid)
            continue;
        uint64_t lots = e->trade.quantity.lo;
        if (e->trade.quantity.hi ||
            ledger_fill(&r->led, ch.dir, lots, price_of(&r->tr, e->trade.price), r->fee))
            return tfu_msg(TF_E_PROTOCOL, v->msg, v->msg_cap,
                           "bar %" PRId64 ": a fill beyond one lot of position", i);
        tf_paper_result *o = r->out;
        if (o->fill_log && (uint64_t)o->fills < o->fill_log_cap)
            o->fill_log[o->fills] = (tf_paper_fill){i, ch.dir, (int64_t)lots, e->trade.price};
        o->fills++;
        quote *hit = e->trade.maker_order_id == r->bid.oid   ? &r->bid
                     : e->trade.maker_order_id == r->ask.oid ? &r->ask
                                                             : NULL;
        if (hit && (hit->remaining -= lots) == 0)
            hit->oid = 0;
    }
    if (r->led.pos != ch.want)
        return tfu_msg(TF_E_PROTOCOL, v->msg, v->msg_cap,
                       "bar %" PRId64 ": the order was not filled (position %d, wanted %d)", i,
                       r->led.pos, ch.want);
    write_bars(r, r->p_n ? r->pending[r->p_head].bar : r->bar);
    return 0;
}

/* Books changes until fewer than `keep` are in flight. */
static int settle(run *r, uint32_t keep)
{
    int rc = 0;
    while (!rc && r->p_n && r->p_n >= keep)
        rc = book_oldest(r);
    return rc;
}

/* Sends the commands of a change of position at bar i: in the closing auction the
 * counterparty's resting order at the bar's tick price, then the strategy's limit order that
 * crosses it (the second needs nothing from the first's events: both go in one send, and the
 * service applies them in that order); with a half spread, the strategy's market order. The
 * events are booked later, by book_oldest. */
static int send_change(run *r, int64_t i, int pos, int want)
{
    int64_t ticks = r->ticks[i];
    int dir = want > pos ? 1 : -1;
    uint64_t qty = (uint64_t)(want > pos ? want - pos : pos - want);
    int side = dir > 0 ? TF_OFL_BUY : TF_OFL_SELL;
    tf_ofl_msg m[2] = {{0}};
    size_t n = 0;
    if (!r->c.half_spread) {
        m[n].kind = TF_OFL_NEW_LIMIT;
        m[n].new_limit.account_id = ACCT_COUNTER;
        m[n].new_limit.client_order_id = ++r->cid_venue;
        m[n].new_limit.instrument_id = r->c.instrument;
        m[n].new_limit.side = (uint8_t)(dir > 0 ? TF_OFL_SELL : TF_OFL_BUY);
        m[n].new_limit.price = ticks;
        m[n].new_limit.quantity.lo = qty;
        n++;
        m[n] = m[0];
        m[n].new_limit.account_id = ACCT_STRATEGY;
        m[n].new_limit.client_order_id = ++r->cid_strategy;
        m[n].new_limit.side = (uint8_t)side;
        n++;
    } else {
        m[n].kind = TF_OFL_NEW_MARKET;
        m[n].new_market.account_id = ACCT_STRATEGY;
        m[n].new_market.client_order_id = ++r->cid_strategy;
        m[n].new_market.instrument_id = r->c.instrument;
        m[n].new_market.side = (uint8_t)side;
        m[n].new_market.quantity.lo = qty;
        n++;
    }
    int rc = settle(r, r->window); /* room for this one */
    for (size_t sent = 0; !rc && sent < n;) {
        rc = venue_send(&r->v, 0, m + sent, n - sent);
        if (rc < 0)
            return rc;
        sent += (size_t)rc;
        rc = 0;
        if (sent < n) { /* the client's buffer is full: an older change's replies first */
            if (!r->p_n)
                return tfu_msg(TF_E_LIMIT, r->v.msg, r->v.msg_cap,
                               "bar %" PRId64 ": the order client took no command", i);
            rc = book_oldest(r);
        }
    }
    if (rc)
        return rc;
    r->pending[(r->p_head + r->p_n) % r->window] = (change){i, want, dir};
    r->p_n++;
    return 0;
}

static int drain_fills(run *r, int timeout_ms)
{
    tf_ofl_msg fills[64];
    int got = tf_orders_poll_fills(r->v.conn[1], fills, 64, timeout_ms);
    if (got < 0)
        return tfu_msg(got, r->v.msg, r->v.msg_cap, "engine service: %s", tf_strerror(got));
    r->v.venue_fills += (uint64_t)got;
    return 0;
}

/* The bar loop. */
static int run_bars(run *r, tf_strategy *s)
{
    venue *v = &r->v;
    tf_paper_result *o = r->out;
    tf_progress *pg = r->c.progress;
    int pos = 0, rc = 0;
    int64_t last_ticks = 0, K = r->c.half_spread;
    if (pg)
        __atomic_store_n(&pg->total, r->n, __ATOMIC_RELAXED);
    for (int64_t i = 0; i < r->n && !rc; i++) {
        if (pg && __atomic_load_n(&pg->cancel, __ATOMIC_RELAXED))
            return tfu_msg(TF_E_CANCELLED, v->msg, v->msg_cap, "cancelled at bar %" PRId64, i);
        r->bar = i;
        int64_t ticks = r->ticks[i];
        int want = tf_strategy_step(s, r->px[i]);
        if (want < -1) /* px is a positive price by construction: not expected */
            return tfu_msg(want, v->msg, v->msg_cap, "bar %" PRId64 ": strategy: %s", i,
                           tf_strerror(want));
        if (K) {
            rc = requote(r, ticks, last_ticks, i);
            last_ticks = ticks;
        }
        if (!rc && want != pos) {
            rc = send_change(r, i, pos, want);
            pos = want;
        }
        r->bar = i + 1; /* this bar has sent all it sends */
        /* The changes beyond the window are booked now (window 1: this bar's, before the
         * next: one round trip per change). */
        if (!rc)
            rc = settle(r, r->window);
        /* Service: drain the quoter's fills; a reader that never reads would be closed. */
        if (!rc && v->conn[1])
            rc = drain_fills(r, 0);
        if (!rc && !r->p_n)
            write_bars(r, i + 1);
        o->bars = i + 1;
        if (pg)
            __atomic_store_n(&pg->done, i + 1, __ATOMIC_RELAXED);
    }
    if (!rc)
        rc = settle(r, 1); /* every change in flight */
    if (!rc)
        write_bars(r, r->n);
    /* Leave the book as it was: the quotes go. */
    for (quote *qq = &r->bid; !rc && qq; qq = qq == &r->bid ? &r->ask : NULL) {
        if (!qq->oid)
            continue;
        tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_ORDER};
        m.cancel_by_order.order_id = qq->oid;
        rc = venue_call(v, 1, &m);
    }
    /* The quoter's last fills may still be on their way: wait for them (bounded). */
    double wait_s = (r->c.timeout_ms > 0 ? r->c.timeout_ms : TF_ORDERS_DEFAULT_TIMEOUT_MS) / 1e3;
    for (double end = now_s() + wait_s;
         !rc && v->conn[1] && v->venue_fills < (uint64_t)r->led.fills && now_s() < end;)
        rc = drain_fills(r, 100);
    o->position = pos;
    return rc;
}

/* The sweep of the combo on px (one thread, the run's fee). */
static int sweep_one(const run *r, const double *px, double *pnl, int64_t *trades)
{
    tf_sweep_opts so = {.size = sizeof so, .threads = 1, .fee = &r->fee};
    int rc = r->c.strategy ? tf_sweep_with(r->c.strategy, px, r->n, r->params, 1, pnl, trades, &so)
                           : tf_sweep(px, r->n, r->c.combo, 1, pnl, trades, &so);
    if (rc)
        return tfu_msg(rc, r->v.msg, r->v.msg_cap, "sweep: %s", tf_strerror(rc));
    return 0;
}

/* A strategy's config resolved: the "hma" built-in becomes combo (the HMA path), another def
 * is checked with its params copied into r->params. 0, or the refusal. */
static int resolve_strategy(run *r, char *msg, size_t cap)
{
    tf_paper_config *c = &r->c;
    const tf_strategy_def *def = c->strategy;
    if (!c->params)
        return tfu_msg(TF_E_NULL_ARG, msg, cap, "a strategy without params");
    int rc = tf_strategy_def_check(def, msg, cap);
    if (rc)
        return rc;
    if (def == tf_strategy_builtin("hma")) {
        for (int k = 0; k < TF_PARAMS_PER_COMBO; k++) {
            double v = c->params[k];
            if (!(v >= 1.0 && v <= (double)TF_MAX_WINDOW && v == floor(v)))
                return tfu_msg(TF_E_INVALID_ARG, msg, cap,
                               "hma's %s must be a whole number 1 .. %" PRId64 ", got %.17g",
                               def->param_names[k], (int64_t)TF_MAX_WINDOW, v);
            c->combo[k] = (int64_t)v;
        }
        c->strategy = NULL;
        c->params = NULL;
        return 0;
    }
    memcpy(r->params, c->params, sizeof(double) * def->n_params);
    c->params = r->params;
    return tf_strategy_params_check(def, r->params, 1, NULL, msg, cap);
}

/* Checks and resolves cfg into r->c / r->fee (before anything is opened). */
static int resolve(run *r, const tf_paper_config *cfg, char *msg, size_t cap)
{
    if (tfu_opts_load(&r->c, sizeof r->c, cfg, TFU_FIELD_END(tf_paper_config, progress)))
        return tfu_msg(TF_E_INVALID_ARG, msg, cap,
                       "tf_paper_config: a size this library does not "
                       "know");
    tf_paper_config *c = &r->c;
    int rc = c->strategy ? resolve_strategy(r, msg, cap) : 0;
    if (rc)
        return rc;
    if (c->strategy)
        rc = 0; /* a strategy's parameters are its own: init checked them */
    else
        rc = tf_params_check(c->combo, 1);
    if (rc)
        return tfu_msg(rc, msg, cap, "combo: %s", tf_strerror(rc));
    for (int k = 0; k < TF_PARAMS_PER_COMBO && !c->strategy; k++)
        if (c->combo[k] > TF_STREAM_MAX_WINDOW)
            return tfu_msg(TF_E_WINDOW_TOO_LONG, msg, cap,
                           "combo: a window of %" PRId64
                           " (the streaming strategy holds at most %" PRId64 ")",
                           c->combo[k], TF_STREAM_MAX_WINDOW);
    if (c->tick != 0 && !tick_ok(c->tick))
        return tfu_msg(TF_E_INVALID_ARG, msg, cap, "tick %g: want a positive number", c->tick);
    r->fee = c->fee ? *c->fee : TF_FEE_DEFAULT;
    if ((rc = tf_fee_check(r->fee, msg, cap)) != 0)
        return rc;
    if (c->half_spread < 0 || c->half_spread > MAX_HALF_SPREAD)
        return tfu_msg(TF_E_INVALID_ARG, msg, cap,
                       "half spread %" PRId64 ": want 0 (the auction) or 1 .. 2^40 ticks",
                       c->half_spread);
    if (!c->instrument)
        c->instrument = 1;
    if (c->journal_dir && c->engine_url)
        return tfu_msg(TF_E_INVALID_ARG, msg, cap,
                       "a journal is for the in-process engine (the service keeps its own)");
    if (c->max_inflight > TF_PAPER_MAX_INFLIGHT)
        return tfu_msg(TF_E_INVALID_ARG, msg, cap,
                       "max_inflight %u: want 0 (the default, %d) or 1 .. %d position changes",
                       (unsigned)c->max_inflight, TF_PAPER_DEFAULT_INFLIGHT, TF_PAPER_MAX_INFLIGHT);
    /* Only the service's auction keeps changes in flight (see struct run). */
    r->window = !c->engine_url || c->half_spread ? 1
                : c->max_inflight                ? c->max_inflight
                                                 : TF_PAPER_DEFAULT_INFLIGHT;
    return 0;
}

/* Rounds the series to the run's tick (choosing it from the data when none was given) into
 * ticks[] and px[]; refuses a close that is no positive price in ticks, and a tick coarser than
 * the data's unless asked. */
static int round_series(run *r, const double *close, int64_t *ticks, double *px, tf_paper_result *o,
                        char *msg, size_t cap)
{
    double data_tick;
    int has_data_tick = tf_paper_tick_from_data(close, r->n, &data_tick);
    if (r->c.tick == 0) {
        o->tick = data_tick;
        o->tick_source = has_data_tick ? TF_PAPER_TICK_DATA : TF_PAPER_TICK_DEFAULT;
    } else {
        o->tick = r->c.tick;
        o->tick_source = TF_PAPER_TICK_GIVEN;
    }
    r->tr = rule_of(o->tick);
    int64_t K = r->c.half_spread;
    o->first_rounded = -1;
    for (int64_t i = 0; i < r->n; i++) {
        if (round_of(&r->tr, close[i], &ticks[i]) || ticks[i] - K < 1)
            return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                           "bar %" PRId64
                           ": close %.17g is not a positive price in ticks of %.17g%s",
                           i, close[i], o->tick, K ? " (with the half spread)" : "");
        px[i] = price_of(&r->tr, ticks[i]);
        if (px[i] != close[i] && o->rounded_closes++ == 0)
            o->first_rounded = i;
    }
    if (o->rounded_closes && has_data_tick && o->tick_source == TF_PAPER_TICK_GIVEN &&
        !r->c.coarse_tick) {
        int64_t f = o->first_rounded;
        return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                       "a tick of %.17g changes %" PRId64 " of %" PRId64
                       " closes (the first: bar %" PRId64 ", %.17g becomes %.17g), while every "
                       "close is a whole number of ticks of %.17g: leave the tick out (it is then "
                       "chosen from the data) or give %.17g or a finer power of ten; to trade the "
                       "rounded series anyway, ask for a coarse tick (--coarse-tick, "
                       "coarse_tick=True)",
                       o->tick, o->rounded_closes, r->n, f, close[f], px[f], data_tick, data_tick);
    }
    return 0;
}

static int result_size(const tf_paper_result *res, size_t *size)
{
    *size = res->size ? res->size : sizeof *res;
    return *size < sizeof *res ? TF_E_INVALID_ARG : 0;
}

int tf_paper_run(const double *close, int64_t n_bars, const tf_paper_config *cfg,
                 tf_paper_result *res, char *msg, size_t msg_cap)
{
    if (msg && msg_cap)
        msg[0] = 0;
    if (!cfg || !res || (!close && n_bars > 0) || (!msg && msg_cap))
        return tfu_msg(TF_E_NULL_ARG, msg, msg_cap, "a NULL argument");
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return tfu_msg(TF_E_TOO_MANY_BARS, msg, msg_cap, "%" PRId64 " bars", n_bars);
    size_t res_size;
    if (result_size(res, &res_size))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "tf_paper_result: a size this library does not know");
    run r = {.n = n_bars};
    int rc = resolve(&r, cfg, msg, msg_cap);
    if (rc)
        return rc;
    /* The result is built here and copied out whole: the caller's in-fields are kept. */
    tf_paper_result o = {0};
    o.size = res->size;
    o.fill_log = res->fill_log;
    o.fill_log_cap = res->fill_log_cap;
    o.equity = res->equity;
    o.mtm = res->mtm;
    r.out = &o;
    size_t n1 = (size_t)(n_bars ? n_bars : 1);
    int64_t *ticks = malloc(n1 * sizeof *ticks);
    double *px = malloc(n1 * sizeof *px);
    tf_strategy *s = NULL;
    r.v.msg = msg;
    r.v.msg_cap = msg_cap;
    if (!ticks || !px) {
        rc = tfu_msg(TF_E_NOMEM, msg, msg_cap, "out of memory");
        goto out;
    }
    if ((rc = round_series(&r, close, ticks, px, &o, msg, msg_cap)) != 0)
        goto out;
    r.ticks = ticks;
    r.px = px;
    rc = r.c.strategy ? tf_strategy_open_with(&s, r.c.strategy, r.params)
                      : tf_strategy_open(&s, r.c.combo);
    if (rc != 0 || (rc = tf_strategy_set_fee(s, r.fee)) != 0) {
        rc =
            tfu_msg(rc, msg, msg_cap, "%s: %s", r.c.strategy ? "params" : "combo", tf_strerror(rc));
        goto out;
    }
    r.pending = calloc(r.window, sizeof *r.pending);
    if (!r.pending) {
        rc = tfu_msg(TF_E_NOMEM, msg, msg_cap, "out of memory");
        goto out;
    }
    if ((rc = venue_open(&r.v, &r.c, r.window)) != 0)
        goto out;
    double t0 = now_s();
    if ((rc = run_bars(&r, s)) != 0 || (rc = close_journals(&r.v)) != 0)
        goto out;
    o.seconds = now_s() - t0;
    if ((rc = sweep_one(&r, px, &o.kernel_pnl, &o.kernel_trades)) != 0 ||
        (rc = sweep_one(&r, close, &o.unrounded_pnl, &o.unrounded_trades)) != 0)
        goto out;
    o.pnl = r.led.pnl;
    o.trades = r.led.trades;
    o.lots = r.led.lots;
    o.commands = (int64_t)r.v.commands;
    o.events = (int64_t)r.v.events;
    o.stream_pnl = tf_strategy_pnl(s);
    o.stream_trades = tf_strategy_trades(s);
    o.parity = memcmp(&o.kernel_pnl, &o.pnl, sizeof o.pnl) == 0 && o.kernel_trades == o.trades;
    o.unrounded_parity =
        memcmp(&o.unrounded_pnl, &o.pnl, sizeof o.pnl) == 0 && o.unrounded_trades == o.trades;
    o.unrounded_diff = o.pnl - o.unrounded_pnl;
    o.spread_cost = r.c.half_spread ? o.kernel_pnl - o.pnl : 0.0;
    o.in_process = r.v.engine != NULL;
    if (r.v.engine) {
        o.has_state_hash = 1;
        o.state_hash = tf_engine_state_hash(r.v.engine);
    } else {
        o.venue_fills = r.v.venue_fills;
        o.fills_dropped = tf_orders_fills_dropped(r.v.conn[1]);
    }
    memcpy(res, &o, res_size < sizeof o ? res_size : sizeof o);
out:
    venue_close(&r.v);
    tf_strategy_close(s);
    free(ticks);
    free(px);
    free(r.pending);
    return rc;
}
