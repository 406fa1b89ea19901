/* Derived figures, the table of result columns, the ranking, the fee check and the grid check:
 * the one home of what `tollfree sweep` prints and tollfree.stats computes (research.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/msg.h"
#include "tollfree/error.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

/* ---- derived figures ---- */

static tf_derived derive(const tf_stats *s)
{
    tf_derived d;
    d.win_rate = s->trades > 0 ? (double)s->wins / (double)s->trades : NAN;
    /* 0.0 - gross_loss, not -gross_loss: equal here (gross_loss < 0), but compilers may rewrite
     * x / -y as -x / y, which flips the sign of a NaN x and so its bits */
    if (s->gross_loss < 0.0)
        d.profit_factor = s->gross_win / (0.0 - s->gross_loss);
    else
        d.profit_factor = s->gross_win > 0.0 ? INFINITY : NAN;
    double sd = s->trades > 1 ? sqrt(s->m2 / (double)(s->trades - 1)) : NAN;
    d.sharpe_per_trade = sd > 0.0 ? s->mean / sd : NAN;
    d.avg_trade = s->trades > 0 ? s->pnl / (double)s->trades : NAN;
    return d;
}

int tf_stats_derive(const tf_stats *stats, int64_t n, tf_derived *out)
{
    if (n < 0)
        return TF_E_INVALID_ARG;
    if (n > 0 && (!stats || !out))
        return TF_E_NULL_ARG;
    for (int64_t j = 0; j < n; j++)
        out[j] = derive(&stats[j]);
    return 0;
}

/* ---- columns ---- */

enum {
    C_PNL = TF_COLUMN_PNL,
    C_TRADES,
    C_WINS,
    C_GROSS_WIN,
    C_GROSS_LOSS,
    C_BEST,
    C_WORST,
    C_MEAN,
    C_M2,
    C_MAX_DD,
    C_EXPOSURE,
    C_WIN_RATE,
    C_PROFIT_FACTOR,
    C_SHARPE,
    C_AVG_TRADE,
    C_TIME, /* the TF_TIME_FIGURES time-aware figures, in tf_time_stats order */
    N_COLUMNS = C_TIME + TF_TIME_FIGURES
};

static const struct {
    const char *name;
    int flags;
} columns[N_COLUMNS] = {
    {"L", TF_COLUMN_WINDOW | TF_COLUMN_INT},
    {"half", TF_COLUMN_WINDOW | TF_COLUMN_INT},
    {"sq", TF_COLUMN_WINDOW | TF_COLUMN_INT},
    {"p", TF_COLUMN_WINDOW | TF_COLUMN_INT},
    {"p3", TF_COLUMN_WINDOW | TF_COLUMN_INT},
    {"p2", TF_COLUMN_WINDOW | TF_COLUMN_INT},
    {"pnl", 0},
    {"trades", TF_COLUMN_INT},
    {"wins", TF_COLUMN_STATS | TF_COLUMN_INT},
    {"gross_win", TF_COLUMN_STATS},
    {"gross_loss", TF_COLUMN_STATS},
    {"best", TF_COLUMN_STATS},
    {"worst", TF_COLUMN_STATS},
    {"mean", TF_COLUMN_STATS},
    {"m2", TF_COLUMN_STATS},
    {"max_dd", TF_COLUMN_STATS},
    {"exposure_bars", TF_COLUMN_STATS | TF_COLUMN_INT},
    {"win_rate", TF_COLUMN_STATS},
    {"profit_factor", TF_COLUMN_STATS},
    {"sharpe_per_trade", TF_COLUMN_STATS},
    {"avg_trade", TF_COLUMN_STATS},
    /* tf_time_figure_name's (test_research checks) */
    {"equity", TF_COLUMN_TIME},
    {"cagr", TF_COLUMN_TIME},
    {"ann_vol", TF_COLUMN_TIME},
    {"sharpe", TF_COLUMN_TIME},
    {"sortino", TF_COLUMN_TIME},
    {"calmar", TF_COLUMN_TIME},
    {"mtm_max_dd", TF_COLUMN_TIME},
    {"exposure_pct", TF_COLUMN_TIME},
    {"buy_hold", TF_COLUMN_TIME},
    {"compounded", TF_COLUMN_TIME},
    {"mean_bars", TF_COLUMN_TIME},
    {"max_bars", TF_COLUMN_TIME},
    {"mean_days", TF_COLUMN_TIME},
    {"max_days", TF_COLUMN_TIME},
    {"periods_per_year", TF_COLUMN_TIME},
};

int tf_column_count(void)
{
    return N_COLUMNS;
}

const char *tf_column_name(int col)
{
    return col >= 0 && col < N_COLUMNS ? columns[col].name : NULL;
}

int tf_column_flags(int col)
{
    return col >= 0 && col < N_COLUMNS ? columns[col].flags : 0;
}

/* The HMA table's columns as "L, half, ..." into list[cap]. */
static void fixed_list(char *list, size_t cap, int from)
{
    size_t at = 0;
    list[0] = '\0';
    for (int k = from; k < N_COLUMNS && at < cap; k++)
        at += (size_t)snprintf(list + at, cap - at, "%s%s", k > from ? ", " : "", columns[k].name);
}

int tf_column_find(const char *name, size_t len, int *sign, char *msg, size_t msg_cap)
{
    if (!name)
        return TF_E_NULL_ARG;
    int s = 1;
    if (sign && len > 0 && name[0] == '-') {
        s = -1;
        name++;
        len--;
    }
    for (int k = 0; k < N_COLUMNS; k++)
        if (strlen(columns[k].name) == len && !memcmp(columns[k].name, name, len)) {
            if (sign)
                *sign = s;
            return k;
        }
    char list[512];
    fixed_list(list, sizeof list, 0);
    /* a name from the command line may be long: show at most 64 of its bytes */
    return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "unknown column '%.*s'; columns: %s",
                   (int)(len > 64 ? 64 : len), name, list);
}

/* ---- a results' table: the HMA one, or a strategy's parameters then the metrics ---- */

/* The number of parameter columns of r (6 for the HMA table), or -1 for a bad r. */
static int n_param_cols(const tf_results *r)
{
    if (!r)
        return -1;
    if (!r->dparams)
        return C_PNL;
    if (!r->param_names || r->n_params < 1 || r->n_params > TF_STRATEGY_MAX_PARAMS)
        return -1;
    for (uint32_t k = 0; k < r->n_params; k++)
        if (!r->param_names[k])
            return -1;
    return (int)r->n_params;
}

/* Column col of r's table as a column of the HMA table (a parameter: -1 - its index). */
static int fixed_col(const tf_results *r, int np, int col)
{
    if (!r->dparams)
        return col;
    return col < np ? -1 - col : col - np + C_PNL;
}

int tf_results_column_count(const tf_results *r)
{
    int np = n_param_cols(r);
    if (np < 0)
        return r ? TF_E_INVALID_ARG : TF_E_NULL_ARG;
    return np + N_COLUMNS - C_PNL;
}

int tf_results_column_pnl(const tf_results *r)
{
    int np = n_param_cols(r);
    if (np < 0)
        return r ? TF_E_INVALID_ARG : TF_E_NULL_ARG;
    return np;
}

const char *tf_results_column_name(const tf_results *r, int col)
{
    int np = n_param_cols(r);
    if (np < 0 || col < 0 || col >= np + N_COLUMNS - C_PNL)
        return NULL;
    int f = fixed_col(r, np, col);
    return f < 0 ? r->param_names[-1 - f] : columns[f].name;
}

int tf_results_column_flags(const tf_results *r, int col)
{
    int np = n_param_cols(r);
    if (np < 0 || col < 0 || col >= np + N_COLUMNS - C_PNL)
        return 0;
    int f = fixed_col(r, np, col);
    return f < 0 ? TF_COLUMN_WINDOW : columns[f].flags;
}

int tf_results_column_find(const tf_results *r, const char *name, size_t len, int *sign, char *msg,
                           size_t msg_cap)
{
    int np = n_param_cols(r);
    if (np < 0)
        return r ? TF_E_INVALID_ARG : TF_E_NULL_ARG;
    if (!r->dparams)
        return tf_column_find(name, len, sign, msg, msg_cap);
    if (!name)
        return TF_E_NULL_ARG;
    int s = 1;
    const char *n = name;
    size_t l = len;
    if (sign && l > 0 && n[0] == '-') {
        s = -1;
        n++;
        l--;
    }
    for (int k = 0; k < np; k++)
        if (strlen(r->param_names[k]) == l && !memcmp(r->param_names[k], n, l)) {
            if (sign)
                *sign = s;
            return k;
        }
    for (int k = C_PNL; k < N_COLUMNS; k++)
        if (strlen(columns[k].name) == l && !memcmp(columns[k].name, n, l)) {
            if (sign)
                *sign = s;
            return k - C_PNL + np;
        }
    char list[1536];
    size_t at = 0;
    list[0] = '\0';
    for (int k = 0; k < np && at < sizeof list; k++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s, ", r->param_names[k]);
    if (at < sizeof list)
        fixed_list(list + at, sizeof list - at, C_PNL);
    return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "unknown column '%.*s'; columns: %s",
                   (int)(len > 64 ? 64 : len), name, list);
}

/* Column f of the HMA table (f < 0: parameter -1 - f of a strategy's) of combo j. */
static double cell(const tf_results *r, int f, int64_t j)
{
    if (f < 0)
        return r->dparams[(size_t)j * r->n_params + (size_t)(-1 - f)];
    int col = f;
    if (col < C_PNL)
        return (double)r->params[6 * j + col];
    if (col == C_PNL)
        return r->pnl[j];
    if (col == C_TRADES)
        return (double)r->trades[j];
    if (col >= C_TIME)
        return tf_time_figure(&r->time[j], col - C_TIME);
    const tf_stats *s = &r->stats[j];
    switch (col) {
    case C_WINS:
        return (double)s->wins;
    case C_GROSS_WIN:
        return s->gross_win;
    case C_GROSS_LOSS:
        return s->gross_loss;
    case C_BEST:
        return s->best;
    case C_WORST:
        return s->worst;
    case C_MEAN:
        return s->mean;
    case C_M2:
        return s->m2;
    case C_MAX_DD:
        return s->max_dd;
    case C_EXPOSURE:
        return (double)s->exposure_bars;
    case C_WIN_RATE:
        return derive(s).win_rate;
    case C_PROFIT_FACTOR:
        return derive(s).profit_factor;
    case C_SHARPE:
        return derive(s).sharpe_per_trade;
    default:
        return derive(s).avg_trade;
    }
}

/* 0 and *f (the column as fixed_col gives it) when column col of r can be read (r's arrays
 * present for it), else the error. */
static int readable(const tf_results *r, int col, int *f)
{
    if (!r)
        return TF_E_NULL_ARG;
    int np = n_param_cols(r);
    if (np < 0 || col < 0 || col >= np + N_COLUMNS - C_PNL || r->m < 0)
        return TF_E_INVALID_ARG;
    *f = fixed_col(r, np, col);
    if (r->m == 0)
        return 0;
    if (*f < 0)
        return 0; /* dparams is set */
    if (*f < C_PNL)
        return r->params ? 0 : TF_E_NULL_ARG;
    if (*f == C_PNL)
        return r->pnl ? 0 : TF_E_NULL_ARG;
    if (*f == C_TRADES)
        return r->trades ? 0 : TF_E_NULL_ARG;
    if (*f >= C_TIME)
        return r->time ? 0 : TF_E_INVALID_ARG;
    return r->stats ? 0 : TF_E_INVALID_ARG;
}

double tf_column_value(const tf_results *r, int col, int64_t j)
{
    int f;
    if (readable(r, col, &f) || j < 0 || j >= r->m)
        return NAN;
    return cell(r, f, j);
}

int tf_column_values(const tf_results *r, int col, int sign, double *out)
{
    int f;
    int rc = readable(r, col, &f);
    if (rc)
        return rc;
    if (sign != 1 && sign != -1)
        return TF_E_INVALID_ARG;
    if (r->m > 0 && !out)
        return TF_E_NULL_ARG;
    for (int64_t j = 0; j < r->m; j++) {
        double v = cell(r, f, j);
        out[j] = sign < 0 ? -v : v;
    }
    return 0;
}

/* ---- ranking ---- */

typedef struct key {
    int64_t idx;
    double v;
} key;

static int by_value_desc(const void *a, const void *b)
{
    const key *x = a, *y = b;
    int xn = x->v != x->v, yn = y->v != y->v; /* NaN last */
    if (xn != yn)
        return xn - yn;
    if (x->v > y->v)
        return -1;
    if (x->v < y->v)
        return 1;
    return (x->idx > y->idx) - (x->idx < y->idx); /* ties keep combo order: a stable sort */
}

int tf_rank(const double *value, int64_t m, int64_t *order)
{
    if (m < 0)
        return TF_E_INVALID_ARG;
    if (m == 0)
        return 0;
    if (!value || !order)
        return TF_E_NULL_ARG;
    if ((uint64_t)m > SIZE_MAX / sizeof(key))
        return TF_E_NOMEM;
    key *k = malloc(sizeof(key) * (size_t)m);
    if (!k)
        return TF_E_NOMEM;
    for (int64_t j = 0; j < m; j++)
        k[j] = (key){j, value[j]};
    qsort(k, (size_t)m, sizeof(key), by_value_desc);
    for (int64_t j = 0; j < m; j++)
        order[j] = k[j].idx;
    free(k);
    return 0;
}

/* ---- the fee ---- */

int tf_fee_check(double fee, char *msg, size_t msg_cap)
{
    if (!isfinite(fee))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "fee must be finite: percent points per closed trade, 0 <= fee < %g, "
                       "got %g",
                       TF_FEE_MAX, fee);
    if (fee < 0.0 || fee >= TF_FEE_MAX)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "fee must be 0 <= fee < %g percent points per closed trade, got %.17g%s",
                       TF_FEE_MAX, fee,
                       fee < 0.0 ? " (a negative fee, a rebate, is refused)"
                                 : " (0.09 is 9 basis points)");
    return 0;
}

int tf_fee_parse(const char *text, double *fee, char *msg, size_t msg_cap)
{
    if (!text || !fee)
        return TF_E_NULL_ARG;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    int range = errno == ERANGE;
    errno = 0; /* the library never leaves errno set */
    if (*end || end == text || range || !isfinite(v))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "wants a finite number of percent points, got '%.64s'", text);
    if (v < 0.0 || v >= TF_FEE_MAX)
        return tfu_msg(
            TF_E_INVALID_ARG, msg, msg_cap,
            "wants 0 <= fee < %g percent points per closed trade, got '%.64s'%s", TF_FEE_MAX, text,
            v < 0.0 ? " (a negative fee, a rebate, is refused)" : " (0.09 is 9 basis points)");
    *fee = v;
    return 0;
}

/* ---- the grid against the data ---- */

static int64_t max2(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Bars before both lines exist (docs/definition.md sections 3 and 4): the first HMA is at bar
 * max(L, half) + sq - 2, the first HMA3 at max(p, p3, p2) + p - 2 (0-based). */
static int64_t warmup(const int64_t *c)
{
    int64_t hma = max2(c[TF_P_L], c[TF_P_HALF]) + c[TF_P_SQ] - 1;
    int64_t hma3 = max2(max2(c[TF_P_P], c[TF_P_P3]), c[TF_P_P2]) + c[TF_P_P] - 1;
    return max2(hma, hma3);
}

typedef struct row_key {
    const int64_t *row;
    int64_t idx;
} row_key;

static int by_row(const void *a, const void *b)
{
    const row_key *x = a, *y = b;
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++)
        if (x->row[k] != y->row[k])
            return x->row[k] < y->row[k] ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int tf_grid_check(const int64_t *params, int64_t m, int64_t n_bars, tf_grid_report *out, char *msg,
                  size_t msg_cap)
{
    if (m < 0 || n_bars < 0)
        return TF_E_INVALID_ARG;
    if (m > 0 && !params)
        return TF_E_NULL_ARG;
    for (int64_t j = 0; j < 6 * m; j++)
        if (params[j] < 1 || params[j] > TF_MAX_WINDOW)
            return TF_E_INVALID_ARG;
    tf_grid_report g = {0, -1, 0, 0, -1, -1};
    for (int64_t j = 0; j < m; j++) {
        int64_t w = warmup(params + 6 * j);
        if (w >= n_bars && g.too_long++ == 0) {
            g.first_too_long = j;
            g.first_warmup = w;
        }
    }
    if (m > 1) {
        if ((uint64_t)m > SIZE_MAX / sizeof(row_key))
            return TF_E_NOMEM;
        row_key *k = malloc(sizeof(row_key) * (size_t)m);
        if (!k)
            return TF_E_NOMEM;
        for (int64_t j = 0; j < m; j++)
            k[j] = (row_key){params + 6 * j, j};
        qsort(k, (size_t)m, sizeof(row_key), by_row);
        /* in a run of equal rows the first has the lowest index: the others repeat it */
        for (int64_t a = 0, b; a < m; a = b) {
            for (b = a + 1; b < m && !memcmp(k[a].row, k[b].row, 6 * sizeof(int64_t)); b++)
                if (g.first_duplicate < 0 || k[b].idx < g.first_duplicate) {
                    g.first_duplicate = k[b].idx;
                    g.duplicate_of = k[a].idx;
                }
            g.duplicates += b - a - 1;
        }
        free(k);
    }
    if (out)
        *out = g;
    int notes = (g.too_long > 0) + (g.duplicates > 0);
    if (msg && msg_cap) {
        msg[0] = '\0';
        size_t at = 0;
        if (g.too_long) {
            const int64_t *c = params + 6 * g.first_too_long;
            at += (size_t)snprintf(
                msg, msg_cap,
                "%lld of %lld combos can never trade on %lld bars (pnl 0, trades 0): their "
                "windows' warm-up is the whole series (the first, combo %lld, L=%lld half=%lld "
                "sq=%lld p=%lld p3=%lld p2=%lld, needs %lld bars to open a position and one "
                "more to close it)",
                (long long)g.too_long, (long long)m, (long long)n_bars,
                (long long)g.first_too_long + 1, (long long)c[0], (long long)c[1], (long long)c[2],
                (long long)c[3], (long long)c[4], (long long)c[5], (long long)g.first_warmup);
        }
        if (g.duplicates && at < msg_cap)
            snprintf(msg + at, msg_cap - at,
                     "%s%lld duplicate combos repeat an earlier combo's row (the first, combo "
                     "%lld, repeats combo %lld)",
                     at ? "; " : "", (long long)g.duplicates, (long long)g.first_duplicate + 1,
                     (long long)g.duplicate_of + 1);
    }
    return notes;
}
