/* The sweep's CSV table: a table of columns, each a name, a type and a getter. A new kernel
 * output is one row here. */
#include "cli/sweep_table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double tf_cli_win_rate(const tf_stats *s)
{
    return s->trades > 0 ? (double)s->wins / (double)s->trades : NAN;
}

double tf_cli_profit_factor(const tf_stats *s)
{
    if (s->gross_loss < 0.0)
        return s->gross_win / -s->gross_loss;
    return s->gross_win > 0.0 ? INFINITY : NAN;
}

double tf_cli_sharpe_per_trade(const tf_stats *s)
{
    if (s->trades < 2)
        return NAN;
    double sd = sqrt(s->m2 / (double)(s->trades - 1));
    return sd > 0.0 ? s->mean / sd : NAN;
}

double tf_cli_avg_trade(const tf_stats *s)
{
    return s->trades > 0 ? s->pnl / (double)s->trades : NAN;
}

typedef struct column {
    const char *name;
    int stats;  /* needs the kernel's statistics */
    int is_int; /* printed as an integer */
    double (*get)(const tf_cli_results *r, int64_t j, int64_t *as_int);
} column;

#define PARAM_GETTER(k)                                                                            \
    static double param_##k(const tf_cli_results *r, int64_t j, int64_t *v)                        \
    {                                                                                              \
        *v = r->grid[6 * j + (k)];                                                                 \
        return (double)*v;                                                                         \
    }
PARAM_GETTER(0)
PARAM_GETTER(1)
PARAM_GETTER(2)
PARAM_GETTER(3)
PARAM_GETTER(4)
PARAM_GETTER(5)

static double get_pnl(const tf_cli_results *r, int64_t j, int64_t *v)
{
    (void)v;
    return r->pnl[j];
}

static double get_trades(const tf_cli_results *r, int64_t j, int64_t *v)
{
    *v = r->trades[j];
    return (double)*v;
}

#define STAT_INT(field)                                                                            \
    static double stat_##field(const tf_cli_results *r, int64_t j, int64_t *v)                     \
    {                                                                                              \
        *v = r->stats[j].field;                                                                    \
        return (double)*v;                                                                         \
    }
#define STAT_F64(field)                                                                            \
    static double stat_##field(const tf_cli_results *r, int64_t j, int64_t *v)                     \
    {                                                                                              \
        (void)v;                                                                                   \
        return r->stats[j].field;                                                                  \
    }
#define DERIVED(fn)                                                                                \
    static double derived_##fn(const tf_cli_results *r, int64_t j, int64_t *v)                     \
    {                                                                                              \
        (void)v;                                                                                   \
        return tf_cli_##fn(&r->stats[j]);                                                          \
    }
STAT_INT(wins)
STAT_F64(gross_win)
STAT_F64(gross_loss)
STAT_F64(best)
STAT_F64(worst)
STAT_F64(mean)
STAT_F64(m2)
STAT_F64(max_dd)
STAT_INT(exposure_bars)
DERIVED(win_rate)
DERIVED(profit_factor)
DERIVED(sharpe_per_trade)
DERIVED(avg_trade)

static const column columns[] = {
    {"L", 0, 1, param_0},
    {"half", 0, 1, param_1},
    {"sq", 0, 1, param_2},
    {"p", 0, 1, param_3},
    {"p3", 0, 1, param_4},
    {"p2", 0, 1, param_5},
    {"pnl", 0, 0, get_pnl},
    {"trades", 0, 1, get_trades},
    {"wins", 1, 1, stat_wins},
    {"gross_win", 1, 0, stat_gross_win},
    {"gross_loss", 1, 0, stat_gross_loss},
    {"best", 1, 0, stat_best},
    {"worst", 1, 0, stat_worst},
    {"mean", 1, 0, stat_mean},
    {"m2", 1, 0, stat_m2},
    {"max_dd", 1, 0, stat_max_dd},
    {"exposure_bars", 1, 1, stat_exposure_bars},
    {"win_rate", 1, 0, derived_win_rate},
    {"profit_factor", 1, 0, derived_profit_factor},
    {"sharpe_per_trade", 1, 0, derived_sharpe_per_trade},
    {"avg_trade", 1, 0, derived_avg_trade},
};
#define N_COLUMNS ((int)(sizeof columns / sizeof columns[0]))
#define N_BASIC 8 /* the six windows, pnl, trades */

const char *tf_cli_column_names(void)
{
    static char buf[512];
    if (!buf[0])
        for (int k = 0; k < N_COLUMNS; k++) {
            if (k)
                strcat(buf, ", ");
            strcat(buf, columns[k].name);
        }
    return buf;
}

static int find(const char *name, size_t len)
{
    for (int k = 0; k < N_COLUMNS; k++)
        if (strlen(columns[k].name) == len && !strncmp(columns[k].name, name, len))
            return k;
    return -1;
}

int tf_cli_column_find(const char *name)
{
    int k = find(name, strlen(name));
    if (k < 0)
        fprintf(stderr, "tollfree sweep: unknown column '%s'; columns: %s\n", name,
                tf_cli_column_names());
    return k;
}

int tf_cli_columns_parse(const char *spec, tf_cli_columns *out)
{
    out->n = 0;
    if (!strcmp(spec, "all") || !strcmp(spec, "basic")) {
        int n = !strcmp(spec, "all") ? N_COLUMNS : N_BASIC;
        for (int k = 0; k < n; k++)
            out->idx[out->n++] = k;
        return 0;
    }
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int k = find(p, len);
        if (k < 0) {
            fprintf(stderr,
                    "tollfree sweep: --columns: unknown column '%.*s'; columns: %s (or "
                    "all, basic)\n",
                    (int)len, p, tf_cli_column_names());
            return -1;
        }
        if (out->n == TF_CLI_MAX_COLUMNS) {
            fprintf(stderr, "tollfree sweep: --columns: at most %d columns\n", TF_CLI_MAX_COLUMNS);
            return -1;
        }
        out->idx[out->n++] = k;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

double tf_cli_column_value(int col, const tf_cli_results *r, int64_t j)
{
    int64_t as_int;
    return columns[col].get(r, j, &as_int);
}

const char *tf_cli_column_name(int col)
{
    return columns[col].name;
}

int tf_cli_order_parse(const char *spec, tf_cli_order *out)
{
    out->sign = spec[0] == '-' ? -1 : 1;
    out->col = tf_cli_column_find(spec + (spec[0] == '-'));
    return out->col < 0 ? -1 : 0;
}

double tf_cli_order_value(const tf_cli_order *o, const tf_cli_results *r, int64_t j)
{
    double v = tf_cli_column_value(o->col, r, j);
    return o->sign < 0 ? -v : v;
}

int tf_cli_columns_need_stats(const tf_cli_columns *c, int sort_col)
{
    int need = sort_col >= 0 && columns[sort_col].stats;
    for (int k = 0; k < c->n; k++)
        need |= columns[c->idx[k]].stats;
    return need;
}

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
    return (x->idx > y->idx) - (x->idx < y->idx); /* ties keep grid order */
}

int tf_cli_table_write(FILE *f, const tf_cli_results *r, const tf_cli_columns *c,
                       const tf_cli_order *ord, int64_t top)
{
    key *order = malloc(sizeof(key) * (size_t)(r->m ? r->m : 1));
    if (!order) {
        fputs("tollfree sweep: out of memory\n", stderr);
        return -1;
    }
    for (int64_t j = 0; j < r->m; j++)
        order[j] = (key){j, ord->col >= 0 ? tf_cli_order_value(ord, r, j) : 0.0};
    if (ord->col >= 0)
        qsort(order, (size_t)r->m, sizeof(key), by_value_desc);
    int64_t shown = top > 0 && top < r->m ? top : r->m;
    for (int k = 0; k < c->n; k++)
        fprintf(f, "%s%s", k ? "," : "", columns[c->idx[k]].name);
    fputc('\n', f);
    for (int64_t i = 0; i < shown; i++) {
        int64_t j = order[i].idx;
        for (int k = 0; k < c->n; k++) {
            const column *col = &columns[c->idx[k]];
            int64_t iv = 0;
            double v = col->get(r, j, &iv);
            if (k)
                fputc(',', f);
            if (col->is_int)
                fprintf(f, "%lld", (long long)iv);
            else
                fprintf(f, "%.17g", v);
        }
        fputc('\n', f);
    }
    free(order);
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "tollfree sweep: write failed: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}
