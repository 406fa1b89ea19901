/* The sweep's CSV table: parses --columns / --sort and prints the rows. Which columns exist,
 * their values and the ranking are the library's (src/research/metrics.c). */
#include "cli/sweep_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const tf_results hma_table;

int tf_cli_columns_parse(const char *spec, const tf_results *schema, tf_cli_columns *out)
{
    const tf_results *r = schema ? schema : &hma_table;
    out->n = 0;
    if (!strcmp(spec, "all") || !strcmp(spec, "basic")) {
        /* basic: the parameters, pnl and trades */
        int n = !strcmp(spec, "all") ? tf_results_column_count(r) : tf_results_column_pnl(r) + 2;
        for (int k = 0; k < n; k++) /* the time-aware figures: --time-stats appends them */
            if (!(tf_results_column_flags(r, k) & TF_COLUMN_TIME))
                out->idx[out->n++] = k;
        return 0;
    }
    for (const char *p = spec;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char msg[2048];
        int k = tf_results_column_find(r, p, len, NULL, msg, sizeof msg);
        if (k < 0) {
            fprintf(stderr, "tollfree sweep: --columns: %s (or all, basic)\n", msg);
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

int tf_cli_order_parse(const char *opt, const char *spec, const tf_results *schema,
                       tf_cli_order *out)
{
    char msg[2048];
    out->col = tf_results_column_find(schema ? schema : &hma_table, spec, strlen(spec), &out->sign,
                                      msg, sizeof msg);
    if (out->col < 0) {
        fprintf(stderr, "tollfree sweep: %s: %s\n", opt, msg);
        return -1;
    }
    return 0;
}

int tf_cli_columns_need_stats(const tf_cli_columns *c, int sort_col, const tf_results *schema)
{
    const tf_results *r = schema ? schema : &hma_table;
    int need = sort_col >= 0 && (tf_results_column_flags(r, sort_col) & TF_COLUMN_STATS);
    for (int k = 0; k < c->n; k++)
        need |= (tf_results_column_flags(r, c->idx[k]) & TF_COLUMN_STATS) != 0;
    return need;
}

/* The shown rows' time-aware figures into *out (malloc'd [shown]): r->time's when the sweep gave
 * them, else computed for those rows (a second pass). 0, or -1 after a line. */
static int time_rows(const tf_results *r, const int64_t *order, int64_t shown,
                     const tf_cli_table_extra *x, tf_time_stats **out)
{
    size_t k = (size_t)(shown ? shown : 1);
    uint32_t np = x->def ? x->def->n_params : 6;
    *out = malloc(sizeof(tf_time_stats) * k);
    int64_t *ip = x->def ? NULL : malloc(sizeof(int64_t) * 6 * k);
    double *dp = x->def ? malloc(sizeof(double) * np * k) : NULL;
    char msg[1024] = "out of memory";
    int rc = *out && (ip || dp) ? 0 : TF_E_NOMEM;
    if (!rc && r->time) { /* computed by the sweep itself (tf_sweep_time) */
        for (int64_t i = 0; i < shown; i++)
            (*out)[i] = r->time[order[i]];
        free(ip);
        free(dp);
        return 0;
    }
    for (int64_t i = 0; !rc && i < shown; i++) {
        if (ip)
            memcpy(ip + 6 * i, r->params + 6 * order[i], 6 * sizeof(int64_t));
        else
            memcpy(dp + np * i, r->dparams + np * order[i], np * sizeof(double));
    }
    if (!rc)
        rc = x->def
                 ? tf_time_stats_with(x->def, x->close, x->n, dp, shown, &x->topts, *out, msg,
                                      sizeof msg)
                 : tf_time_stats_hma(x->close, x->n, ip, shown, &x->topts, *out, msg, sizeof msg);
    free(ip);
    free(dp);
    if (rc) {
        fprintf(stderr, "tollfree sweep: time-aware figures: %s\n", msg);
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* Keeps in order[0..m) the combos with at least min trades (ranked order kept); their count. */
static int64_t eligible(const tf_results *r, int64_t *order, int64_t m, int64_t min)
{
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++)
        if (r->trades[order[i]] >= min)
            order[k++] = order[i];
    return k;
}

static void time_header(FILE *f, const tf_cli_table_extra *x)
{
    for (int k = 0; k < TF_TIME_FIGURES; k++)
        if (x->time == 1 || !strcmp(tf_time_figure_name(k), "compounded"))
            fprintf(f, ",%s", tf_time_figure_name(k));
}

static void time_cells(FILE *f, const tf_cli_table_extra *x, const tf_time_stats *s)
{
    for (int k = 0; k < TF_TIME_FIGURES; k++)
        if (x->time == 1 || !strcmp(tf_time_figure_name(k), "compounded"))
            fprintf(f, ",%.17g", tf_time_figure(s, k));
}

int tf_cli_table_write(FILE *f, const tf_results *r, const tf_cli_columns *c,
                       const tf_cli_order *ord, int64_t top)
{
    return tf_cli_table_write_ex(f, r, c, ord, top, NULL);
}

int tf_cli_table_write_ex(FILE *f, const tf_results *r, const tf_cli_columns *c,
                          const tf_cli_order *ord, int64_t top, tf_cli_table_extra *x)
{
    size_t m = (size_t)(r->m ? r->m : 1);
    int64_t *order = malloc(sizeof(int64_t) * m);
    double *value = malloc(sizeof(double) * m);
    int rc = order && value ? 0 : TF_E_NOMEM;
    if (!rc && ord->col >= 0) {
        rc = tf_column_values(r, ord->col, ord->sign, value);
        if (!rc)
            rc = tf_rank(value, r->m, order);
    } else {
        for (int64_t j = 0; j < r->m && order; j++)
            order[j] = j;
    }
    free(value);
    if (rc) {
        fprintf(stderr, "tollfree sweep: %s\n", tf_strerror(rc));
        free(order);
        return -1;
    }
    int64_t m_ok = r->m;
    if (x && x->min_trades > 0) {
        m_ok = eligible(r, order, r->m, x->min_trades);
        x->left_out = r->m - m_ok;
    }
    int64_t shown = top > 0 && top < m_ok ? top : m_ok;
    tf_time_stats *ts = NULL;
    if (x && x->time && time_rows(r, order, shown, x, &ts)) {
        free(order);
        return -1;
    }
    for (int k = 0; k < c->n; k++)
        fprintf(f, "%s%s", k ? "," : "", tf_results_column_name(r, c->idx[k]));
    if (ts)
        time_header(f, x);
    fputc('\n', f);
    for (int64_t i = 0; i < shown; i++) {
        int64_t j = order[i];
        for (int k = 0; k < c->n; k++) {
            double v = tf_column_value(r, c->idx[k], j);
            if (k)
                fputc(',', f);
            if (tf_results_column_flags(r, c->idx[k]) & TF_COLUMN_INT)
                fprintf(f, "%lld", (long long)v); /* exact: every count is below 2^53 */
            else
                fprintf(f, "%.17g", v);
        }
        if (ts)
            time_cells(f, x, &ts[i]);
        fputc('\n', f);
    }
    free(ts);
    free(order);
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "tollfree sweep: write failed: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}
