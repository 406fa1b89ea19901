/* The streaming kernel: one combo, one bar at a time, bit-identical to the batch sweep.
 *
 * Each of the seven WMAs needs the last L values of its input, oldest first. Inputs are kept in
 * "mirrored" rings of 2*cap doubles: every value is written at i and i+cap, so the newest W values
 * always lie contiguous at [head+cap-W+1, head+cap]. A window is then one straight loop, exactly
 * the batch sum, and a step never allocates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_internal.h"

typedef struct ring {
    double *buf; /* 2*cap doubles */
    int64_t cap;
} ring;

struct tf_strategy {
    int64_t p[TF_PARAMS_PER_COMBO];
    double denom[TF_PARAMS_PER_COMBO];
    ring close, raw, inner;
    int64_t n; /* bars seen */
    tfk_sar sar;
    tfk_sar_extra extra;
    double *mem;
};

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int check(const int64_t *p)
{
    if (!p)
        return TF_E_NULL_ARG;
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++) {
        if (p[k] < 1)
            return TF_E_WINDOW_TOO_SHORT;
        if (p[k] > TF_STREAM_MAX_WINDOW)
            return TF_E_WINDOW_TOO_LONG;
    }
    return 0;
}

static int64_t close_cap(const int64_t *p)
{
    return max64(max64(max64(p[TF_P_L], p[TF_P_HALF]), max64(p[TF_P_P], p[TF_P_P3])), p[TF_P_P2]);
}

size_t tf_strategy_footprint(const int64_t params[TF_PARAMS_PER_COMBO])
{
    if (check(params))
        return 0;
    int64_t doubles = 2 * (close_cap(params) + params[TF_P_SQ] + params[TF_P_P]);
    return sizeof(struct tf_strategy) + sizeof(double) * (size_t)doubles;
}

int tf_strategy_open(tf_strategy **out, const int64_t params[TF_PARAMS_PER_COMBO])
{
    if (!out)
        return TF_E_NULL_ARG;
    int rc = check(params);
    if (rc)
        return rc;
    tf_strategy *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    memcpy(s->p, params, sizeof s->p);
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++)
        s->denom[k] = tfk_wma_denom(params[k]);
    s->close.cap = close_cap(params);
    s->raw.cap = params[TF_P_SQ];
    s->inner.cap = params[TF_P_P];
    s->mem = malloc(sizeof(double) * 2 * (size_t)(s->close.cap + s->raw.cap + s->inner.cap));
    if (!s->mem) {
        free(s);
        return TF_E_NOMEM;
    }
    s->close.buf = s->mem;
    s->raw.buf = s->close.buf + 2 * s->close.cap;
    s->inner.buf = s->raw.buf + 2 * s->raw.cap;
    s->sar.fee = TF_FEE_DEFAULT;
    tf_strategy_reset(s);
    *out = s;
    return 0;
}

void tf_strategy_reset(tf_strategy *s)
{
    if (!s)
        return;
    s->n = 0;
    s->sar = tfk_sar_start(s->sar.fee);
    s->extra = tfk_sar_extra_start();
}

int tf_strategy_set_fee(tf_strategy *s, double fee)
{
    if (!s)
        return TF_E_NULL_ARG;
    if (s->n != 0 || !isfinite(fee))
        return TF_E_INVALID_ARG;
    s->sar.fee = fee;
    return 0;
}

void tf_strategy_close(tf_strategy *s)
{
    if (!s)
        return;
    free(s->mem);
    free(s);
}

/* Pointer to the newest value of a ring after pushing bar number n (0-based). */
static double *push(ring *r, int64_t n, double v)
{
    int64_t h = n % r->cap;
    r->buf[h] = v;
    r->buf[h + r->cap] = v;
    return &r->buf[h + r->cap];
}

/* WMA over the W values ending at newest (inclusive), oldest first; NaN during warm-up. */
static double wma(const double *newest, int64_t n, int64_t W, double denom)
{
    if (n + 1 < W)
        return NAN;
    const double *x = newest - W + 1;
    double acc = 0.0;
    for (int64_t k = 0; k < W; k++)
        acc += x[k] * (double)(k + 1);
    return acc / denom;
}

int tf_strategy_step(tf_strategy *s, double close)
{
    if (!s)
        return TF_E_NULL_ARG;
    const int64_t *p = s->p;
    const double *d = s->denom;
    int64_t n = s->n;
    const double *c = push(&s->close, n, close);

    double half = wma(c, n, p[TF_P_HALF], d[TF_P_HALF]);
    double full = wma(c, n, p[TF_P_L], d[TF_P_L]);
    const double *r = push(&s->raw, n, 2.0 * half - full);
    double hma = wma(r, n, p[TF_P_SQ], d[TF_P_SQ]);

    double w3 = wma(c, n, p[TF_P_P3], d[TF_P_P3]);
    double w2 = wma(c, n, p[TF_P_P2], d[TF_P_P2]);
    double wp = wma(c, n, p[TF_P_P], d[TF_P_P]);
    const double *in = push(&s->inner, n, 3.0 * w3 - w2 - wp);
    double hma3 = wma(in, n, p[TF_P_P], d[TF_P_P]);

    tfk_sar_step(&s->sar, &s->extra, hma3, hma, close, n);
    s->n = n + 1;
    return (int)s->sar.pos;
}

double tf_strategy_pnl(const tf_strategy *s)
{
    return s ? s->sar.pnl : 0.0;
}

int64_t tf_strategy_trades(const tf_strategy *s)
{
    return s ? s->sar.trades : 0;
}

int64_t tf_strategy_bars(const tf_strategy *s)
{
    return s ? s->n : 0;
}

int tf_strategy_stats(const tf_strategy *s, tf_stats *out)
{
    if (!s || !out)
        return TF_E_NULL_ARG;
    tfk_sar_output(&s->sar, &s->extra, s->n, out);
    return 0;
}
