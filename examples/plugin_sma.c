/* A strategy plugin: the SMA crossover (docs/strategies.md), as a user would write it.
 *
 * Build it (against an installed tollfree; nothing to link):
 *     cc -O2 -fPIC -shared $(pkg-config --cflags tollfree) plugin_sma.c -o plugin_sma.so
 * Sweep it:
 *     tollfree sweep --strategy ./plugin_sma.so --grid fast=5:50:5,slow=20:200:10 --where
 * 'fast<slow'
 *
 * A strategy only gives targets (+1 long, -1 short, 0 flat, TF_HOLD: keep what you have), one per
 * bar; tollfree books trades, pnl, fees and statistics. The state is a block tollfree allocates
 * per combo (state_bytes says how big for these params, 16-byte aligned); step may write only
 * there. It gives the built-in sma_cross's bits: the same operations in the same order. */
#include <stdint.h>

#include <tollfree/strategy.h>

typedef struct sma {
    int64_t fast, slow, n;
    double s_fast, s_slow; /* rolling sums */
    double ring[];         /* the last `slow` closes: ring[i % slow] = close[i] */
} sma;

static const char *const names[] = {"fast", "slow"};

static int valid(const double *p)
{
    return p[0] >= 1 && p[1] <= (1 << 24) && p[0] < p[1] && p[0] == (double)(int64_t)p[0] &&
           p[1] == (double)(int64_t)p[1];
}

static size_t sma_bytes(const double *p)
{
    return sizeof(sma) + (valid(p) ? sizeof(double) * (size_t)p[1] : 0);
}

static int sma_init(void *state, const double *p)
{
    if (!valid(p))
        return 1; /* tollfree names the combo in its refusal */
    sma *s = state;
    s->fast = (int64_t)p[0];
    s->slow = (int64_t)p[1];
    s->n = 0;
    s->s_fast = s->s_slow = 0.0;
    return 0;
}

/* S_w: close[0] + ... + close[w-1] left to right, then (S + close[i]) - close[i-w]. */
static double roll(double S, double c, int64_t i, int64_t w, const sma *s)
{
    if (i == 0)
        return c;
    if (i < w)
        return S + c;
    return (S + c) - s->ring[(i - w) % s->slow];
}

static int sma_step(void *state, double c)
{
    sma *s = state;
    int64_t i = s->n++;
    s->s_fast = roll(s->s_fast, c, i, s->fast, s);
    s->s_slow = roll(s->s_slow, c, i, s->slow, s);
    s->ring[i % s->slow] = c;
    if (i < s->slow - 1)
        return TF_HOLD; /* warming up */
    double f = s->s_fast / (double)s->fast, sl = s->s_slow / (double)s->slow;
    return f > sl ? 1 : f < sl ? -1 : TF_HOLD;
}

static const tf_strategy_def def = {
    .size = sizeof(tf_strategy_def),
    .abi = TF_STRATEGY_ABI,
    .name = "plugin_sma",
    .n_params = 2,
    .param_names = names,
    .state_size = sizeof(sma),
    .init = sma_init,
    .step = sma_step,
    .state_bytes = sma_bytes,
};

/* The one symbol tollfree looks up (declared first for -Wmissing-prototypes). */
__attribute__((visibility("default"))) const tf_strategy_def *tollfree_strategy(void);

const tf_strategy_def *tollfree_strategy(void)
{
    return &def;
}
