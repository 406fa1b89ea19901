/* The summary of a paper run, as `tollfree paper` and `python3 -m tollfree.paper` print it: one
 * text for both (tf_paper_format, include/tollfree/paper.h), so the two never drift. */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/opts_size.h"
#include "tollfree/engine.h"
#include "tollfree/paper.h"

/* An appender over the caller's buffer that counts what it could not store (snprintf's rule). */
typedef struct out {
    char *buf;
    size_t cap, len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *at = o->len < o->cap ? o->buf + o->len : NULL;
    int n = vsnprintf(at, at ? o->cap - o->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* x with the fewest significant digits that read back as x (0.1, not 0.10000000000000001). */
static const char *shortest(double x, char buf[32])
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, 32, "%.*g", p, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    return buf;
}

/* A strategy other than HMA-with-combo (c as loaded: an older caller's appended fields are 0). */
static int has_strategy(const tf_paper_config *c)
{
    return c->strategy && c->params && c->strategy->n_params <= TF_STRATEGY_MAX_PARAMS &&
           c->strategy->param_names;
}

static const char *tick_source_name(int s)
{
    return s == TF_PAPER_TICK_DATA ? "data" : s == TF_PAPER_TICK_DEFAULT ? "default" : "given";
}

static void json(out *b, const tf_paper_config *c, const tf_paper_result *o)
{
    double fee = c->fee ? *c->fee : TF_FEE_DEFAULT;
    put(b, "{\"mode\": \"%s\", \"engine\": \"%s\", ", c->half_spread ? "half_spread" : "auction",
        c->engine_url ? c->engine_url : "in-process");
    /* "combo": HMA's six lengths, or the strategy's parameters in its order (as Python's
     * PaperResult.combo) */
    if (has_strategy(c)) {
        put(b, "\"strategy\": \"%s\", \"combo\": [", c->strategy->name);
        for (uint32_t k = 0; k < c->strategy->n_params; k++)
            put(b, "%s%.17g", k ? ", " : "", c->params[k]);
        put(b, "], ");
    } else {
        put(b,
            "\"strategy\": \"hma\", \"combo\": [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
            ", %" PRId64 ", %" PRId64 "], ",
            c->combo[0], c->combo[1], c->combo[2], c->combo[3], c->combo[4], c->combo[5]);
    }
    put(b,
        "\"tick\": %.17g, \"tick_source\": \"%s\", \"fee\": %.17g, \"half_spread\": %" PRId64 ", ",
        o->tick, tick_source_name(o->tick_source), fee, c->half_spread);
    put(b,
        "\"bars\": %" PRId64 ", \"orders\": %" PRId64 ", \"fills\": %" PRId64 ", \"lots\": %" PRId64
        ", ",
        o->bars, o->orders, o->fills, o->lots);
    put(b, "\"commands\": %" PRId64 ", \"events\": %" PRId64 ", ", o->commands, o->events);
    put(b, "\"pnl\": %.17g, \"trades\": %" PRId64 ", ", o->pnl, o->trades);
    put(b, "\"kernel_pnl\": %.17g, \"kernel_trades\": %" PRId64 ", ", o->kernel_pnl,
        o->kernel_trades);
    put(b, "\"stream_pnl\": %.17g, \"stream_trades\": %" PRId64 ", ", o->stream_pnl,
        o->stream_trades);
    put(b, "\"parity\": %s, \"parity_expected\": %s, ", o->parity ? "true" : "false",
        c->half_spread ? "false" : "true");
    put(b,
        "\"rounded_closes\": %" PRId64 ", \"unrounded_pnl\": %.17g, \"unrounded_trades\": %" PRId64
        ", \"unrounded_diff\": %.17g, \"unrounded_parity\": %s, ",
        o->rounded_closes, o->unrounded_pnl, o->unrounded_trades, o->unrounded_diff,
        o->unrounded_parity ? "true" : "false");
    if (c->half_spread)
        put(b, "\"spread_cost\": %.17g, ", o->spread_cost);
    put(b, "\"position\": %d, ", o->position);
    if (!o->in_process)
        put(b, "\"venue_fills\": %" PRIu64 ", \"fills_dropped\": %" PRIu64 ", ", o->venue_fills,
            o->fills_dropped);
    if (o->has_state_hash) {
        char h[19];
        tf_engine_format_hash(o->state_hash, h);
        put(b, "\"state_hash\": \"%.18s\", ", h);
    }
    put(b, "\"seconds\": %.6f, \"bars_per_s\": %.1f}\n", o->seconds,
        o->seconds > 0 ? (double)o->bars / o->seconds : 0.0);
}

static void text(out *b, const tf_paper_config *c, const tf_paper_result *o)
{
    char t[32];
    if (has_strategy(c)) {
        put(b, "paper: %s ", c->strategy->name);
        for (uint32_t k = 0; k < c->strategy->n_params; k++)
            put(b, "%s%s=%.17g", k ? "," : "", c->strategy->param_names[k], c->params[k]);
        put(b, ", %" PRId64 " bars, %s, %s\n", o->bars,
            c->half_spread ? "quoted market" : "closing auction",
            c->engine_url ? c->engine_url : "in-process engine");
    } else {
        put(b,
            "paper: combo %" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
            ", %" PRId64 " bars, %s, %s\n",
            c->combo[0], c->combo[1], c->combo[2], c->combo[3], c->combo[4], c->combo[5], o->bars,
            c->half_spread ? "quoted market" : "closing auction",
            c->engine_url ? c->engine_url : "in-process engine");
    }
    if (o->tick_source == TF_PAPER_TICK_DATA)
        put(b, "  tick   %s (from the data: every close is a whole number of ticks)\n",
            shortest(o->tick, t));
    else if (o->tick_source == TF_PAPER_TICK_DEFAULT)
        put(b,
            "  tick   %s (the default: no power of ten down to 1e-10 holds every close; "
            "they were rounded)\n",
            shortest(o->tick, t));
    else
        put(b, "  tick   %s (given%s)\n", shortest(o->tick, t),
            c->coarse_tick ? "; a coarse tick, asked for" : "");
    put(b, "  orders %" PRId64 ", fills %" PRId64 ", commands %" PRId64 ", events %" PRId64 "\n",
        o->orders, o->fills, o->commands, o->events);
    put(b, "  pnl    %.17g  trades %" PRId64 "   (from the fills)\n", o->pnl, o->trades);
    put(b, "  kernel %.17g  trades %" PRId64 "   (the sweep on the rounded series)\n",
        o->kernel_pnl, o->kernel_trades);
    if (c->half_spread)
        put(b, "  spread cost %.6f percent points (half spread %" PRId64 " ticks)\n",
            o->spread_cost, c->half_spread);
    else
        put(b, "  parity against the rounded series: %s\n", o->parity ? "yes (bit for bit)" : "NO");
    put(b, "  unrounded %.17g  trades %" PRId64 "   (the sweep on the series as given)\n",
        o->unrounded_pnl, o->unrounded_trades);
    if (o->rounded_closes)
        put(b,
            "  the rounding changed %" PRId64 " of %" PRId64 " closes: pnl - unrounded = %.17g\n",
            o->rounded_closes, o->bars, o->unrounded_diff);
    else
        put(b,
            "  the rounding changed no close: the rounded series is the series "
            "(pnl - unrounded = %.17g)\n",
            o->unrounded_diff);
    if (o->has_state_hash) {
        char h[19];
        tf_engine_format_hash(o->state_hash, h);
        put(b, "  state_hash %.18s\n", h);
    }
    put(b, "  %.3f s, %.0f bars/s\n", o->seconds,
        o->seconds > 0 ? (double)o->bars / o->seconds : 0.0);
}

int tf_paper_format(const tf_paper_config *cfg, const tf_paper_result *res, int as_json, char *buf,
                    size_t cap)
{
    if (!cfg || !res || (!buf && cap))
        return TF_E_NULL_ARG;
    /* Both structs under the size rule (docs/api.md): only the bytes the caller's size covers
     * are read; a result below its first layout, or a longer one with a non-zero byte this
     * library does not know, is refused before anything is written. */
    tf_paper_config c;
    tf_paper_result r;
    if (tfu_opts_load(&c, sizeof c, cfg, TFU_FIELD_END(tf_paper_config, progress)) ||
        tfu_opts_load(&r, sizeof r, res, sizeof r))
        return TF_E_INVALID_ARG;
    out b = {buf, cap, 0};
    if (cap)
        buf[0] = 0;
    if (as_json)
        json(&b, &c, &r);
    else
        text(&b, &c, &r);
    if (b.len > (size_t)INT32_MAX)
        return TF_E_LIMIT;
    return (int)b.len;
}
