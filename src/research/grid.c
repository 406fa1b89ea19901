/* Grids by name (strategy.h: tf_grid_named, tf_grid_where): "a=LO:HI:STEP,b=V" for any
 * strategy's parameters, the cartesian product with the last parameter fastest, and the
 * conditions of --where that keep a part of it. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/msg.h"
#include "tollfree/error.h"
#include "tollfree/strategy.h"

/* One parameter's range as given: values lo + k * step for k = 0 .. n-1. */
typedef struct range {
    double lo, hi, step;
    int64_t n;
    int given;
} range;

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

static const char *trim_end(const char *p, const char *e)
{
    while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    return e;
}

/* The names of n parameters as "a, b, c" into buf[cap]. */
static const char *name_list(const char *const *names, uint32_t n, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < n && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", k ? ", " : "", names[k]);
    return buf;
}

/* The parameter named [p, e) among names[n]: its index, or -1. */
static int find_name(const char *const *names, uint32_t n, const char *p, const char *e)
{
    size_t len = (size_t)(e - p);
    for (uint32_t k = 0; k < n; k++)
        if (strlen(names[k]) == len && !memcmp(names[k], p, len))
            return (int)k;
    return -1;
}

/* A whole finite number in [p, e): 0 and *v, or -1. */
static int number(const char *p, const char *e, double *v)
{
    char buf[64];
    size_t len = (size_t)(e - p);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *end;
    int saved = errno;
    errno = 0;
    *v = strtod(buf, &end);
    int bad = *end || end == buf || errno == ERANGE || !isfinite(*v);
    errno = saved; /* the library never leaves errno changed */
    return bad ? -1 : 0;
}

/* Parses the value part [p, e) of "name=..." into r: "V" or "LO:HI:STEP". 0, or the refusal. */
static int parse_range(const char *name, const char *p, const char *e, range *r, char *msg,
                       size_t cap)
{
    const char *c1 = memchr(p, ':', (size_t)(e - p));
    if (!c1) {
        if (number(skip_ws(p, e), trim_end(p, e), &r->lo))
            return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                           "grid %s=%.*s: not a number (want %s=V or %s=LO:HI:STEP)", name,
                           (int)(e - p > 64 ? 64 : e - p), p, name, name);
        r->hi = r->lo;
        r->step = 1.0;
        r->n = 1;
        return 0;
    }
    const char *c2 = memchr(c1 + 1, ':', (size_t)(e - c1 - 1));
    double v[3];
    const char *s[4] = {p, c1 + 1, c2 ? c2 + 1 : NULL, e};
    int bad = !c2 || memchr(c2 + 1, ':', (size_t)(e - c2 - 1)) != NULL;
    for (int k = 0; k < 3 && !bad; k++) {
        const char *a = s[k], *b = k < 2 ? s[k + 1] - 1 : e;
        bad = number(skip_ws(a, b), trim_end(a, b), &v[k]) != 0;
    }
    if (bad)
        return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                       "grid %s=%.*s: want %s=LO:HI:STEP with three numbers (or %s=V)", name,
                       (int)(e - p > 64 ? 64 : e - p), p, name, name);
    if (!(v[2] > 0.0))
        return tfu_msg(TF_E_BAD_INPUT, msg, cap, "grid %s: STEP must be > 0, got %.17g", name,
                       v[2]);
    if (v[0] > v[1])
        return tfu_msg(TF_E_BAD_INPUT, msg, cap, "grid %s: LO %.17g > HI %.17g", name, v[0], v[1]);
    r->lo = v[0];
    r->hi = v[1];
    r->step = v[2];
    /* (HI - LO) / STEP estimates the count; the exact count is the number of k with
     * LO + k * STEP <= HI, computed as the values are (rounding may move the last one) */
    double est = floor((v[1] - v[0]) / v[2]) + 1.0;
    if (!(est <= (double)TF_GRID_MAX_COMBOS))
        return tfu_msg(TF_E_LIMIT, msg, cap,
                       "grid %s: %.0f values, more than %d combos: use a coarser STEP", name, est,
                       TF_GRID_MAX_COMBOS);
    int64_t n = (int64_t)est;
    while (n > 1 && !(v[0] + (double)(n - 1) * v[2] <= v[1]))
        n--;
    while (v[0] + (double)n * v[2] <= v[1] && n < TF_GRID_MAX_COMBOS + 1)
        n++;
    r->n = n;
    return 0;
}

int tf_grid_named(const tf_strategy_def *def, const char *spec, const char *where, double **out,
                  int64_t *n_combos, char *msg, size_t msg_cap)
{
    if (!def || !spec || !out || !n_combos || !def->param_names)
        return TF_E_NULL_ARG;
    uint32_t np = def->n_params;
    if (np < 1 || np > TF_STRATEGY_MAX_PARAMS)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "strategy %s: %u parameters",
                       def->name ? def->name : "?", np);
    const char *const *names = def->param_names;
    char list[1024];
    range r[TF_STRATEGY_MAX_PARAMS];
    memset(r, 0, sizeof r);
    const char *p = spec, *end = spec + strlen(spec);
    if (skip_ws(p, end) == end)
        return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                       "grid is empty: want %s=LO:HI:STEP,... for %s's parameters %s", names[0],
                       def->name, name_list(names, np, list, sizeof list));
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        if (!eq)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                           "grid: '%.*s' is not NAME=LO:HI:STEP or NAME=V (%s's parameters: %s)",
                           (int)(e - p > 64 ? 64 : e - p), p, def->name,
                           name_list(names, np, list, sizeof list));
        const char *n0 = skip_ws(p, eq), *n1 = trim_end(p, eq);
        int k = find_name(names, np, n0, n1);
        if (k < 0)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                           "grid: unknown parameter '%.*s' for %s; its parameters: %s",
                           (int)(n1 - n0 > 64 ? 64 : n1 - n0), n0, def->name,
                           name_list(names, np, list, sizeof list));
        if (r[k].given)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap, "grid: parameter %s named twice",
                           names[k]);
        int rc = parse_range(names[k], eq + 1, e, &r[k], msg, msg_cap);
        if (rc)
            return rc;
        r[k].given = 1;
        if (!comma)
            break;
        p = comma + 1;
    }
    double total = 1.0;
    for (uint32_t k = 0; k < np; k++) {
        if (!r[k].given)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                           "grid: parameter %s missing (%s needs each of %s: NAME=V or "
                           "NAME=LO:HI:STEP)",
                           names[k], def->name, name_list(names, np, list, sizeof list));
        total *= (double)r[k].n;
    }
    if (total > (double)TF_GRID_MAX_COMBOS)
        return tfu_msg(TF_E_LIMIT, msg, msg_cap,
                       "grid: %.0f combos, more than %d: narrow a range or use a coarser STEP",
                       total, TF_GRID_MAX_COMBOS);
    int64_t m = (int64_t)total;
    double *g = malloc(sizeof(double) * (size_t)m * np);
    if (!g)
        return tfu_msg(TF_E_NOMEM, msg, msg_cap, "grid: out of memory for %lld combos",
                       (long long)m);
    /* odometer: the last parameter fastest */
    int64_t idx[TF_STRATEGY_MAX_PARAMS] = {0};
    for (int64_t j = 0; j < m; j++) {
        for (uint32_t k = 0; k < np; k++)
            g[(size_t)j * np + k] = r[k].lo + (double)idx[k] * r[k].step;
        for (int k = (int)np - 1; k >= 0; k--) {
            if (++idx[k] < r[k].n)
                break;
            idx[k] = 0;
        }
    }
    if (where && *where) {
        unsigned char *keep = malloc((size_t)m);
        if (!keep) {
            free(g);
            return tfu_msg(TF_E_NOMEM, msg, msg_cap, "where: out of memory");
        }
        int rc = tf_grid_where(where, names, np, g, m, keep, msg, msg_cap);
        int64_t kept = 0;
        for (int64_t j = 0; !rc && j < m; j++)
            if (keep[j]) {
                if (kept != j)
                    memmove(g + (size_t)kept * np, g + (size_t)j * np, sizeof(double) * np);
                kept++;
            }
        free(keep);
        if (!rc && kept == 0)
            rc = tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                         "where %.128s keeps none of the %lld combos of the grid", where,
                         (long long)m);
        if (rc) {
            free(g);
            return rc;
        }
        m = kept;
    }
    *out = g;
    *n_combos = m;
    return 0;
}

/* ---- --where ---- */

enum { OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE };

typedef struct operand {
    int param; /* -1: a number */
    double v;
} operand;

typedef struct cond {
    operand a, b;
    int op;
} cond;

#define MAX_CONDS 64

static int parse_operand(const char *p, const char *e, const char *const *names, uint32_t np,
                         operand *o, char *msg, size_t cap)
{
    p = skip_ws(p, e);
    e = trim_end(p, e);
    if (p == e)
        return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                       "where: a comparison lacks a side (want A OP B, e.g. fast<slow)");
    o->param = find_name(names, np, p, e);
    if (o->param >= 0)
        return 0;
    if (number(p, e, &o->v) == 0)
        return 0;
    char list[1024];
    return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                   "where: '%.*s' is neither a parameter nor a number; parameters: %s",
                   (int)(e - p > 64 ? 64 : e - p), p, name_list(names, np, list, sizeof list));
}

/* One condition in [p, e): "A OP B". */
static int parse_cond(const char *p, const char *e, const char *const *names, uint32_t np, cond *c,
                      char *msg, size_t cap)
{
    static const struct {
        const char *s;
        int op;
    } ops[] = {{"<=", OP_LE}, {">=", OP_GE}, {"==", OP_EQ},
               {"!=", OP_NE}, {"<", OP_LT},  {">", OP_GT}};
    for (const char *q = p; q < e; q++)
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            size_t l = strlen(ops[k].s);
            if ((size_t)(e - q) >= l && !memcmp(q, ops[k].s, l)) {
                c->op = ops[k].op;
                int rc = parse_operand(p, q, names, np, &c->a, msg, cap);
                return rc ? rc : parse_operand(q + l, e, names, np, &c->b, msg, cap);
            }
        }
    return tfu_msg(TF_E_BAD_INPUT, msg, cap,
                   "where: '%.*s' is no comparison (want A OP B with OP one of < <= > >= == "
                   "!=, e.g. fast<slow)",
                   (int)(e - p > 64 ? 64 : e - p), p);
}

static int holds(const cond *c, const double *row)
{
    double a = c->a.param >= 0 ? row[c->a.param] : c->a.v;
    double b = c->b.param >= 0 ? row[c->b.param] : c->b.v;
    switch (c->op) {
    case OP_LT:
        return a < b;
    case OP_LE:
        return a <= b;
    case OP_GT:
        return a > b;
    case OP_GE:
        return a >= b;
    case OP_EQ:
        return a == b;
    default:
        return a != b;
    }
}

int tf_grid_where(const char *where, const char *const *names, uint32_t n_params,
                  const double *params, int64_t n_combos, unsigned char *keep, char *msg,
                  size_t msg_cap)
{
    if (!where || !names || (n_combos > 0 && (!params || !keep)))
        return TF_E_NULL_ARG;
    if (n_combos < 0 || n_params > TF_STRATEGY_MAX_PARAMS)
        return TF_E_INVALID_ARG;
    cond cs[MAX_CONDS];
    int nc = 0;
    const char *p = where, *end = where + strlen(where);
    while (skip_ws(p, end) < end) {
        const char *e = p;
        size_t sep = 0;
        for (; e < end; e++) {
            if (*e == ',') {
                sep = 1;
                break;
            }
            if (*e == '&' && e + 1 < end && e[1] == '&') {
                sep = 2;
                break;
            }
        }
        if (nc == MAX_CONDS)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap, "where: more than %d conditions",
                           MAX_CONDS);
        int rc = parse_cond(p, e, names, n_params, &cs[nc], msg, msg_cap);
        if (rc)
            return rc;
        nc++;
        if (!sep)
            break;
        p = e + sep;
        if (skip_ws(p, end) == end)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap, "where: nothing after the last separator");
    }
    if (nc == 0)
        return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                       "where is empty: want conditions like fast<slow");
    for (int64_t j = 0; j < n_combos; j++) {
        const double *row = params + (size_t)j * n_params;
        int ok = 1;
        for (int k = 0; k < nc && ok; k++)
            ok = holds(&cs[k], row);
        keep[j] = (unsigned char)ok;
    }
    return 0;
}
