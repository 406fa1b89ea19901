/* HMA/HMA3 as a strategy on the contract, and the streaming kernel's HMA step (tf_strategy_open
 * runs this def through the booking, like any strategy's handle). Its target is +1 if HMA3 > HMA,
 * -1 if HMA3 < HMA, HOLD if they are equal or either is NaN; the booking then gives the
 * stop-and-reverse loop's bits. tf_sweep_with runs "hma" through tf_sweep (the fast path); this
 * step is what the reference and streaming run.
 *
 * The state is one block: the six lengths, then three mirrored rings (close, raw, inner) of
 * 2*cap doubles each, found by offset (never by pointer), so a state is position independent. */
#include <math.h>
#include <string.h>

#include "kernel/book.h"
#include "kernel_internal.h"
#include "tollfree/strategy.h"

static const char *const hma_names[TF_PARAMS_PER_COMBO] = {"L", "half", "sq", "p", "p3", "p2"};

typedef struct hma_state {
    int64_t p[TF_PARAMS_PER_COMBO];
    double denom[TF_PARAMS_PER_COMBO];
    int64_t cap_close, cap_raw, cap_inner;
    int64_t n;
    /* then the rings: close [2*cap_close], raw [2*cap_raw], inner [2*cap_inner] */
} hma_state;

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Whole numbers in 1 .. TF_STREAM_MAX_WINDOW (a window's ring of closes is at most 128 MiB). */
static int hma_valid(const double *params)
{
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++) {
        double x = params[k];
        if (!(x >= 1.0 && x <= (double)TF_STREAM_MAX_WINDOW && x == (double)(int64_t)x))
            return 0;
    }
    return 1;
}

static int64_t close_cap(const double *p)
{
    return max64(max64(max64((int64_t)p[TF_P_L], (int64_t)p[TF_P_HALF]),
                       max64((int64_t)p[TF_P_P], (int64_t)p[TF_P_P3])),
                 (int64_t)p[TF_P_P2]);
}

static size_t hma_bytes(const double *params)
{
    if (!hma_valid(params))
        return sizeof(hma_state); /* init refuses these */
    int64_t doubles = 2 * (close_cap(params) + (int64_t)params[TF_P_SQ] + (int64_t)params[TF_P_P]);
    return sizeof(hma_state) + sizeof(double) * (size_t)doubles;
}

static int hma_init(void *state, const double *params)
{
    if (!hma_valid(params))
        return 1;
    hma_state *s = state;
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++) {
        s->p[k] = (int64_t)params[k];
        s->denom[k] = tfk_wma_denom(s->p[k]);
    }
    s->cap_close = close_cap(params);
    s->cap_raw = s->p[TF_P_SQ];
    s->cap_inner = s->p[TF_P_P];
    s->n = 0;
    return 0;
}

/* Pointer to the newest value of a ring after pushing bar number n (0-based). */
static double *push(double *buf, int64_t cap, int64_t n, double v)
{
    int64_t h = n % cap;
    buf[h] = v;
    buf[h + cap] = v;
    return &buf[h + cap];
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

static int hma_step(void *state, double close)
{
    hma_state *s = state;
    double *ring_close = (double *)(s + 1), *ring_raw = ring_close + 2 * s->cap_close;
    double *ring_inner = ring_raw + 2 * s->cap_raw;
    const int64_t *p = s->p;
    const double *d = s->denom;
    int64_t n = s->n;
    const double *c = push(ring_close, s->cap_close, n, close);

    double half = wma(c, n, p[TF_P_HALF], d[TF_P_HALF]);
    double full = wma(c, n, p[TF_P_L], d[TF_P_L]);
    const double *r = push(ring_raw, s->cap_raw, n, 2.0 * half - full);
    double hma = wma(r, n, p[TF_P_SQ], d[TF_P_SQ]);

    double w3 = wma(c, n, p[TF_P_P3], d[TF_P_P3]);
    double w2 = wma(c, n, p[TF_P_P2], d[TF_P_P2]);
    double wp = wma(c, n, p[TF_P_P], d[TF_P_P]);
    const double *in = push(ring_inner, s->cap_inner, n, 3.0 * w3 - w2 - wp);
    double hma3 = wma(in, n, p[TF_P_P], d[TF_P_P]);
    s->n = n + 1;

    if (hma3 > hma)
        return 1;
    if (hma3 < hma)
        return -1;
    return TF_HOLD; /* equal, or either NaN */
}

const tf_strategy_def tfk_hma_def = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "hma",
    .n_params = TF_PARAMS_PER_COMBO,
    .param_names = hma_names,
    .state_size = sizeof(hma_state),
    .init = hma_init,
    .step = hma_step,
    .state_bytes = hma_bytes,
};
