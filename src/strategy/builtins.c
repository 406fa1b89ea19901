/* The five built-ins of docs/strategies.md, step by step: each step is the definition, operation
 * for operation (the fast sweep in fast.c must give these bits). Targets are HOLD before warm-up.
 * A state is one block found by offsets (rings follow the fixed part), never by pointer. */
#include <math.h>
#include <string.h>

#include "strategy_internal.h"

/* ---- sma_cross(fast, slow) ---- */

typedef struct sma_state {
    int64_t fast, slow, n;
    double s_fast, s_slow; /* the rolling sums S_fast, S_slow */
    /* then the last `slow` closes: ring[i % slow] = close[i] */
} sma_state;

static const char *const sma_names[] = {"fast", "slow"};

static int cross_valid(const double *p)
{
    return tfs_whole(p[0], 1.0, (double)TFS_MAX_WINDOW) &&
           tfs_whole(p[1], 1.0, (double)TFS_MAX_WINDOW) && p[0] < p[1];
}

static size_t sma_bytes(const double *p)
{
    if (!cross_valid(p))
        return sizeof(sma_state);
    return sizeof(sma_state) + sizeof(double) * (size_t)p[1];
}

static int sma_init(void *state, const double *p)
{
    if (!cross_valid(p))
        return 1;
    sma_state *s = state;
    s->fast = (int64_t)p[0];
    s->slow = (int64_t)p[1];
    s->n = 0;
    s->s_fast = s->s_slow = 0.0;
    return 0;
}

/* S_w after close c at bar i: the left-to-right sum up to bar w-1, then add, then subtract. */
static inline double roll(double S, double c, int64_t i, int64_t w, const double *ring, int64_t cap)
{
    if (i == 0)
        return c;
    if (i < w)
        return S + c;
    return (S + c) - ring[(i - w) % cap];
}

static int sma_step(void *state, double c)
{
    sma_state *s = state;
    double *ring = (double *)(s + 1);
    int64_t i = s->n++;
    s->s_fast = roll(s->s_fast, c, i, s->fast, ring, s->slow);
    s->s_slow = roll(s->s_slow, c, i, s->slow, ring, s->slow);
    ring[i % s->slow] = c;
    if (i < s->slow - 1)
        return TF_HOLD;
    double f = s->s_fast / (double)s->fast, sl = s->s_slow / (double)s->slow;
    return f > sl ? 1 : f < sl ? -1 : TF_HOLD;
}

const tf_strategy_def tfs_sma_cross = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "sma_cross",
    .n_params = 2,
    .param_names = sma_names,
    .state_size = sizeof(sma_state),
    .init = sma_init,
    .step = sma_step,
    .state_bytes = sma_bytes,
};

/* ---- ema_cross(fast, slow) ---- */

typedef struct ema_state {
    int64_t slow, n;
    double a_fast, a_slow, e_fast, e_slow;
} ema_state;

static const char *const ema_names[] = {"fast", "slow"};

static int ema_init(void *state, const double *p)
{
    if (!cross_valid(p))
        return 1;
    ema_state *s = state;
    s->slow = (int64_t)p[1];
    s->n = 0;
    s->a_fast = 2.0 / (p[0] + 1.0);
    s->a_slow = 2.0 / (p[1] + 1.0);
    s->e_fast = s->e_slow = 0.0;
    return 0;
}

static int ema_step(void *state, double c)
{
    ema_state *s = state;
    int64_t i = s->n++;
    if (i == 0) {
        s->e_fast = c;
        s->e_slow = c;
    } else {
        s->e_fast = s->e_fast + s->a_fast * (c - s->e_fast);
        s->e_slow = s->e_slow + s->a_slow * (c - s->e_slow);
    }
    if (i < s->slow - 1)
        return TF_HOLD;
    return s->e_fast > s->e_slow ? 1 : s->e_fast < s->e_slow ? -1 : TF_HOLD;
}

const tf_strategy_def tfs_ema_cross = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "ema_cross",
    .n_params = 2,
    .param_names = ema_names,
    .state_size = sizeof(ema_state),
    .init = ema_init,
    .step = ema_step,
    .state_bytes = NULL,
};

/* ---- donchian(window) ---- */

typedef struct donchian_state {
    int64_t w, n;
    /* then the last w closes: ring[i % w] = close[i] */
} donchian_state;

static const char *const donchian_names[] = {"window"};

static size_t donchian_bytes(const double *p)
{
    if (!tfs_whole(p[0], 1.0, (double)TFS_MAX_WINDOW))
        return sizeof(donchian_state);
    return sizeof(donchian_state) + sizeof(double) * (size_t)p[0];
}

static int donchian_init(void *state, const double *p)
{
    if (!tfs_whole(p[0], 1.0, (double)TFS_MAX_WINDOW))
        return 1;
    donchian_state *s = state;
    s->w = (int64_t)p[0];
    s->n = 0;
    return 0;
}

static int donchian_step(void *state, double c)
{
    donchian_state *s = state;
    double *ring = (double *)(s + 1);
    int64_t i = s->n++, w = s->w;
    int t = TF_HOLD;
    if (i >= w) {
        /* max/min of close[i-w .. i-1]; a NaN in the window makes both NaN (so HOLD), as
         * numpy's max and min do. */
        double hi = ring[0], lo = ring[0];
        int nan = 0;
        for (int64_t k = 0; k < w; k++) {
            double x = ring[k];
            nan |= x != x;
            hi = x > hi ? x : hi;
            lo = x < lo ? x : lo;
        }
        if (!nan)
            t = c > hi ? 1 : c < lo ? -1 : TF_HOLD;
    }
    ring[i % w] = c;
    return t;
}

const tf_strategy_def tfs_donchian = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "donchian",
    .n_params = 1,
    .param_names = donchian_names,
    .state_size = sizeof(donchian_state),
    .init = donchian_init,
    .step = donchian_step,
    .state_bytes = donchian_bytes,
};

/* ---- rsi(period, lower, upper) ---- */

typedef struct rsi_state {
    int64_t period, n;
    double per, lower, upper, prev, ag, al;
} rsi_state;

static const char *const rsi_names[] = {"period", "lower", "upper"};

static int rsi_init(void *state, const double *p)
{
    if (!tfs_whole(p[0], 1.0, (double)TFS_MAX_WINDOW) || !(p[1] >= 0.0) || !(p[2] <= 100.0) ||
        !(p[1] < p[2]))
        return 1;
    rsi_state *s = state;
    s->period = (int64_t)p[0];
    s->per = p[0];
    s->lower = p[1];
    s->upper = p[2];
    s->n = 0;
    s->prev = s->ag = s->al = 0.0;
    return 0;
}

/* The RSI from the averages (docs/strategies.md): 100 with no loss (50 with no gain either). */
static inline double rsi_value(double ag, double al)
{
    if (al == 0.0)
        return ag == 0.0 ? 50.0 : 100.0;
    return 100.0 - 100.0 / (1.0 + ag / al);
}

static int rsi_step(void *state, double c)
{
    rsi_state *s = state;
    int64_t i = s->n++;
    if (i == 0) {
        s->prev = c;
        return TF_HOLD;
    }
    double d = c - s->prev;
    s->prev = c;
    double g = d > 0 ? d : 0.0, l = d < 0 ? -d : 0.0;
    if (i <= s->period) { /* the sums over bars 1..period, left to right */
        s->ag += g;
        s->al += l;
        if (i < s->period)
            return TF_HOLD;
        s->ag = s->ag / s->per;
        s->al = s->al / s->per;
    } else {
        s->ag = (s->ag * (s->per - 1) + g) / s->per;
        s->al = (s->al * (s->per - 1) + l) / s->per;
    }
    double r = rsi_value(s->ag, s->al);
    return r < s->lower ? 1 : r > s->upper ? -1 : TF_HOLD;
}

const tf_strategy_def tfs_rsi = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "rsi",
    .n_params = 3,
    .param_names = rsi_names,
    .state_size = sizeof(rsi_state),
    .init = rsi_init,
    .step = rsi_step,
    .state_bytes = NULL,
};

/* ---- bollinger(window, k) ---- */

typedef struct bollinger_state {
    int64_t w, n;
    double k, s; /* k, the rolling sum S_w */
    int t;       /* the strategy's own last non-HOLD target (0 at start) */
    /* then the last w closes: ring[i % w] = close[i] */
} bollinger_state;

static const char *const bollinger_names[] = {"window", "k"};

static int bollinger_valid(const double *p)
{
    return tfs_whole(p[0], 2.0, (double)TFS_MAX_WINDOW) && p[1] > 0.0 && isfinite(p[1]);
}

static size_t bollinger_bytes(const double *p)
{
    if (!bollinger_valid(p))
        return sizeof(bollinger_state);
    return sizeof(bollinger_state) + sizeof(double) * (size_t)p[0];
}

static int bollinger_init(void *state, const double *p)
{
    if (!bollinger_valid(p))
        return 1;
    bollinger_state *s = state;
    s->w = (int64_t)p[0];
    s->k = p[1];
    s->n = 0;
    s->s = 0.0;
    s->t = 0;
    return 0;
}

static int bollinger_step(void *state, double c)
{
    bollinger_state *s = state;
    double *ring = (double *)(s + 1);
    int64_t i = s->n++, w = s->w;
    s->s = roll(s->s, c, i, w, ring, w);
    ring[i % w] = c;
    if (i < w - 1)
        return TF_HOLD;
    double m = s->s / (double)w, v = 0.0;
    for (int64_t j = i - w + 1; j <= i; j++) { /* the window's bars, oldest first */
        double e = ring[j % w] - m;
        v += e * e;
    }
    v = v / (double)w;
    double sd = sqrt(v);
    int t;
    if (c < m - s->k * sd)
        t = 1;
    else if (c > m + s->k * sd)
        t = -1;
    else if (s->t == 1 && c >= m)
        t = 0;
    else if (s->t == -1 && c <= m)
        t = 0;
    else
        return TF_HOLD;
    s->t = t;
    return t;
}

const tf_strategy_def tfs_bollinger = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "bollinger",
    .n_params = 2,
    .param_names = bollinger_names,
    .state_size = sizeof(bollinger_state),
    .init = bollinger_init,
    .step = bollinger_step,
    .state_bytes = bollinger_bytes,
};
