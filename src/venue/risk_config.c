/* The risk config file of `tollfree engine serve --risk FILE` (docs/venue.md, "Risk"):
 *     # comment
 *     account ID [max_qty N] [max_notional N] [band N | band P%] [ref PRICE | ref last]
 *                [max_open N]
 *                [stp none|cancel-newest|cancel-oldest|cancel-both]
 *     admin SESSION
 *     cancel-on-disconnect SESSION
 * Numbers are unsigned decimals (0 = no limit); a percent band has at most two decimals and is
 * kept in basis points. Every refusal names the line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "venue/risk.h"
#include "venue/venue.h"

#define FILE_MAX_BYTES (16u << 20)

typedef struct parser {
    const char *name;
    int line;
    char *err;
    size_t errcap;
    tfv_risk_config *c;
} parser;

static int say(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say(parser *p, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (p->err && p->errcap)
        snprintf(p->err, p->errcap, "%s: line %d: %s", p->name, p->line, what);
    return TF_E_BAD_INPUT;
}

/* An unsigned decimal of the whole token; 0 on success. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* "2", "2.5", "0.25" followed by '%': basis points. */
static int parse_pct(const char *s, size_t n, uint64_t *bps)
{
    if (n < 2 || s[n - 1] != '%')
        return -1;
    n--;
    const char *dot = memchr(s, '.', n);
    size_t whole = dot ? (size_t)(dot - s) : n, frac = dot ? n - whole - 1 : 0;
    uint64_t w, f = 0;
    if (parse_u64(s, whole, &w) || frac > 2 || (dot && frac == 0) ||
        (frac && parse_u64(dot + 1, frac, &f)) || w > 1000000)
        return -1;
    *bps = w * 100 + (frac == 1 ? f * 10 : f);
    return 0;
}

static int parse_stp(const char *s, size_t n)
{
    static const char *const names[] = {"none", "cancel-newest", "cancel-oldest", "cancel-both"};
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n))
            return i;
    return -1;
}

/* The next whitespace-separated token of [*s, end): its start and length (0 at the end). */
static size_t token(const char **s, const char *end, const char **tok)
{
    const char *p = *s;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    *tok = p;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
        p++;
    *s = p;
    return (size_t)(p - *tok);
}

static int is(const char *t, size_t n, const char *word)
{
    return strlen(word) == n && !memcmp(t, word, n);
}

/* One "KEY VALUE" pair of an account line. */
static int account_key(parser *p, tfv_limits *l, const char *k, size_t kn, const char *v, size_t vn)
{
    uint64_t x;
    static const char *const keys[] = {"max_qty", "max_notional", "band", "ref", "max_open", "stp"};
    int known = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        known |= is(k, kn, keys[i]);
    if (!known)
        return say(p, "unknown key '%.*s' (max_qty, max_notional, band, ref, max_open, stp)",
                   (int)kn, k);
    if (vn == 0)
        return say(p, "'%.*s' needs a value", (int)kn, k);
    if (is(k, kn, "stp")) {
        int m = parse_stp(v, vn);
        if (m < 0)
            return say(p, "stp '%.*s': none, cancel-newest, cancel-oldest or cancel-both", (int)vn,
                       v);
        l->stp = (uint8_t)m;
        return 0;
    }
    if (is(k, kn, "band") && v[vn - 1] == '%') {
        if (parse_pct(v, vn, &l->band))
            return say(p, "band '%.*s': a percent with at most two decimals, e.g. 2.5%%", (int)vn,
                       v);
        l->band_unit = TFV_BAND_BPS;
        return 0;
    }
    if (is(k, kn, "ref") && is(v, vn, "last")) { /* the last trade (docs/venue.md "The band") */
        l->ref_price = 0;
        l->ref_last = 1;
        return 0;
    }
    if (parse_u64(v, vn, &x))
        return say(p, "%.*s '%.*s': an unsigned decimal%s", (int)kn, k, (int)vn, v,
                   is(k, kn, "ref") ? " or 'last'" : "");
    if (is(k, kn, "max_qty"))
        l->max_qty = x;
    else if (is(k, kn, "max_notional"))
        l->max_notional = x;
    else if (is(k, kn, "band")) {
        l->band = x;
        l->band_unit = TFV_BAND_TICKS;
    } else if (is(k, kn, "ref") && x <= (uint64_t)INT64_MAX) {
        l->ref_price = (int64_t)x;
        l->ref_last = 0; /* the later of `ref last` and `ref PRICE` holds */
    } else if (is(k, kn, "max_open") && x <= UINT32_MAX)
        l->max_open = (uint32_t)x;
    else
        return say(p, "%.*s %llu: too large", (int)kn, k, (unsigned long long)x);
    return 0;
}

static int account_line(parser *p, const char *s, const char *end)
{
    const char *t;
    size_t n = token(&s, end, &t);
    tfv_limits l = {0};
    if (parse_u64(t, n, &l.account) || l.account == 0)
        return say(p, "account '%.*s': an id from 1 up", (int)n, t);
    for (uint32_t i = 0; i < p->c->n; i++)
        if (p->c->acct[i].account == l.account)
            return say(p, "account %llu appears twice", (unsigned long long)l.account);
    if (p->c->n == TFV_RISK_MAX_ACCOUNTS)
        return say(p, "more than %d accounts", TFV_RISK_MAX_ACCOUNTS);
    for (;;) {
        const char *k, *v;
        size_t kn = token(&s, end, &k);
        if (!kn)
            break;
        size_t vn = token(&s, end, &v);
        int rc = account_key(p, &l, k, kn, v, vn);
        if (rc)
            return rc;
    }
    tfv_limits *a = realloc(p->c->acct, (p->c->n + 1) * sizeof *a);
    if (!a)
        return TF_E_NOMEM;
    p->c->acct = a;
    a[p->c->n++] = l;
    return 0;
}

static int session_line(parser *p, const char *s, const char *end, uint64_t **list, uint32_t *n)
{
    const char *t, *extra;
    size_t len = token(&s, end, &t);
    if (len == 0 || len > TFV_NAME_MAX)
        return say(p, "a session name (1..%d bytes)", TFV_NAME_MAX);
    if (token(&s, end, &extra))
        return say(p, "one session name a line ('%.*s' follows)", (int)(end - extra), extra);
    if (*n == TFV_RISK_MAX_SESSIONS)
        return say(p, "more than %d sessions", TFV_RISK_MAX_SESSIONS);
    uint64_t *a = realloc(*list, (*n + 1) * sizeof *a);
    if (!a)
        return TF_E_NOMEM;
    *list = a;
    a[(*n)++] = tfv_session_id(t, len);
    return 0;
}

static int one_line(parser *p, const char *s, const char *end)
{
    const char *t;
    size_t n = token(&s, end, &t);
    if (n == 0 || t[0] == '#')
        return 0;
    if (is(t, n, "account"))
        return account_line(p, s, end);
    if (is(t, n, "admin"))
        return session_line(p, s, end, &p->c->admins, &p->c->n_admins);
    if (is(t, n, "cancel-on-disconnect"))
        return session_line(p, s, end, &p->c->cod, &p->c->n_cod);
    return say(p,
               "'%.*s': a line is 'account ID ...', 'admin SESSION' or "
               "'cancel-on-disconnect SESSION'",
               (int)n, t);
}

static int cmp_limits(const void *a, const void *b)
{
    uint64_t x = ((const tfv_limits *)a)->account, y = ((const tfv_limits *)b)->account;
    return x < y ? -1 : x > y;
}

int tfv_risk_parse(const char *text, size_t len, const char *name, tfv_risk_config *out, char *err,
                   size_t errcap)
{
    memset(out, 0, sizeof *out);
    parser p = {.name = name, .err = err, .errcap = errcap, .c = out};
    const char *s = text, *end = text + len;
    int rc = 0;
    while (!rc && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        p.line++;
        if (memchr(s, '\0', (size_t)(le - s)))
            rc = say(&p, "a NUL byte");
        else
            rc = one_line(&p, s, le);
        s = le + 1;
    }
    if (rc) {
        tfv_risk_config_free(out);
        return rc;
    }
    if (out->n)
        qsort(out->acct, out->n, sizeof *out->acct, cmp_limits);
    return 0;
}

int tfv_risk_load(const char *path, tfv_risk_config *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int rc = -errno;
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        return rc;
    }
    char *buf = malloc(FILE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, FILE_MAX_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || n > FILE_MAX_BYTES) {
        snprintf(err, errcap, "%s: %s", path,
                 !buf  ? "out of memory"
                 : bad ? "read error"
                       : "larger than 16 MiB");
        free(buf);
        return !buf ? TF_E_NOMEM : TF_E_BAD_INPUT;
    }
    int rc = tfv_risk_parse(buf, n, path, out, err, errcap);
    free(buf);
    return rc;
}

void tfv_risk_config_free(tfv_risk_config *c)
{
    if (!c)
        return;
    free(c->acct);
    free(c->admins);
    free(c->cod);
    memset(c, 0, sizeof *c);
}

static int in_list(const uint64_t *v, uint32_t n, uint64_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

int tfv_risk_is_admin(const tfv_risk_config *c, uint64_t session)
{
    return c && in_list(c->admins, c->n_admins, session);
}

int tfv_risk_cancels_on_disconnect(const tfv_risk_config *c, uint64_t session)
{
    return c && in_list(c->cod, c->n_cod, session);
}
