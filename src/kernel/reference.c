/* docs/definition.md written literally: the in-C reference every fast path is checked against. */
#include <math.h>
#include <stdlib.h>

#include "kernel_internal.h"

static void wma_full(const double *x, int64_t n, int64_t L, double *out)
{
    double denom = tfk_wma_denom(L);
    for (int64_t i = 0; i < n; i++) {
        if (i < L - 1) {
            out[i] = NAN;
            continue;
        }
        double s = 0.0;
        for (int64_t k = 0; k < L; k++)
            s += x[i - L + 1 + k] * (double)(k + 1);
        out[i] = s / denom;
    }
}

static void run_combo(const double *close, int64_t n, const int64_t *p, double *buf,
                      const tfk_opts *o, double *pnl, int64_t *trades, tf_stats *stats)
{
    double *a = buf, *b = buf + n, *c = buf + 2 * n, *raw = buf + 3 * n, *inner = buf + 4 * n;
    double *hma = buf + 5 * n, *hma3 = buf + 6 * n;

    wma_full(close, n, p[TF_P_HALF], a);
    wma_full(close, n, p[TF_P_L], b);
    for (int64_t i = 0; i < n; i++)
        raw[i] = 2.0 * a[i] - b[i];
    wma_full(raw, n, p[TF_P_SQ], hma);

    wma_full(close, n, p[TF_P_P3], a);
    wma_full(close, n, p[TF_P_P2], b);
    wma_full(close, n, p[TF_P_P], c);
    for (int64_t i = 0; i < n; i++)
        inner[i] = 3.0 * a[i] - b[i] - c[i];
    wma_full(inner, n, p[TF_P_P], hma3);

    tfk_sar st = tfk_sar_start(o->fee);
    tfk_sar_extra x = tfk_sar_extra_start();
    for (int64_t i = 0; i < n; i++)
        tfk_sar_step(&st, stats ? &x : NULL, hma3[i], hma[i], close[i], i);
    *pnl = st.pnl;
    *trades = st.trades;
    if (stats)
        tfk_sar_output(&st, &x, n, stats);
}

int tf_sweep_reference(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                       double *pnl, int64_t *trades, const tf_sweep_opts *opts)
{
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    int rc = tf_params_check(params, n_combos);
    if (rc)
        return rc;
    tfk_opts o;
    if ((rc = tfk_opts_resolve(opts, &o)))
        return rc;
    if (n_combos == 0)
        return 0;
    if ((n_bars > 0 && !close) || !pnl || !trades)
        return TF_E_NULL_ARG;
    double *buf = NULL;
    if (n_bars > 0 && !(buf = malloc(sizeof(double) * 7 * (size_t)n_bars)))
        return TF_E_NOMEM;
    for (int64_t j = 0; j < n_combos; j++)
        run_combo(close, n_bars, params + j * TF_PARAMS_PER_COMBO, buf, &o, &pnl[j], &trades[j],
                  o.stats ? &o.stats[j] : NULL);
    free(buf);
    return 0;
}
