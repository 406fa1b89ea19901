/* The price file reader (tollfree/prices.h): CSV as people have them, or raw f64, streamed.
 *
 * Memory holds the close column, 8 bytes a bar of parsed times when there is a date column (16
 * while nn/nn/yyyy dates are undecided between month-first and day-first), the date text only
 * when asked, and one chunk of the file; never the whole file, so a file larger than memory and
 * a pipe are fine. Every close is checked (a positive finite number, parsed to the same bits as
 * strtod), every row has the header's field count, and the dates' order is checked as they come:
 * the answer is exact or the file is refused with its line, column and what to do. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/opts_size.h"
#include "research/research_internal.h"
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/prices.h"

#define CHUNK (1u << 20)
#define MAX_LINE (64u << 20)
#define MAX_FIELDS 4096
#define CELL_SHOW 64

static const char date_todo[] =
    "dates like 2024-01-02, 2024-01-02 09:30:00, 01/02/2024, 02.01.2024, 02-Jan-2024, Jan 02 "
    "2024 or epoch seconds; fix the cell, or --date-column none to read without dates, or "
    "--assume-sorted if the rows are oldest first";

/* One order check: the previous time, the direction seen (1 up, -1 down, 0 none yet) and the
 * first line that went against it. */
typedef struct order {
    int64_t prev;
    int dir;
    int64_t bad_line;
    char bad_cell[CELL_SHOW], bad_prev[CELL_SHOW];
} order;

typedef struct rd {
    /* the source: a descriptor (buf holds a window of it) or memory */
    int fd;
    const char *mem;
    size_t mem_len, mem_pos;
    char *buf;
    size_t cap, beg, end;
    int eof;

    tf_prices_opts o;
    tf_prices *p;
    char *msg;
    size_t msg_cap;
    int64_t line;
    size_t vcap; /* capacity (bars) of close, times, alt, doff */
    size_t tcap; /* capacity (bytes) of p->dtext */

    const char **fs, **fe; /* the current row's fields */
    int nf, want_nf, started, date_pending;
    char *hdr; /* a copy of the header line while the date column is still to be found */
    size_t hdr_len;
    char colname[128], dname[128];

    tfr_date_form form;
    int64_t unit;
    int day_first; /* -1: nn/nn/yyyy not decided yet */
    int64_t *alt;  /* the day-first times while undecided */
    int64_t decided_line;
    order ord[2]; /* [0] month-first (or the only reading), [1] day-first */
    int have_prev;
    char prev_cell[CELL_SHOW], first_cell[CELL_SHOW];
    char first_skip[192];
} rd;

/* ---- messages ---- */

/* A printable, bounded copy of [s, e) for messages. */
static const char *show(const char *s, const char *e, char *tmp, size_t cap)
{
    size_t k = 0;
    for (const char *p = s; p < e && k + 4 < cap; p++)
        tmp[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    if (e - s > (ptrdiff_t)(cap - 4))
        tmp[k++] = '.', tmp[k++] = '.', tmp[k++] = '.';
    tmp[k] = '\0';
    return tmp;
}

static void copy_cell(char *dst, const char *s, const char *e)
{
    show(s, e, dst, CELL_SHOW);
}

/* The refusal: "NAME" + the formatted rest into the caller's buffer; returns rc. */
__attribute__((format(printf, 3, 4))) static int failf(rd *r, int rc, const char *fmt, ...)
{
    if (r->msg_cap) {
        int k = snprintf(r->msg, r->msg_cap, "%s", r->p ? r->p->name : "");
        if (k >= 0 && (size_t)k < r->msg_cap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->msg + k, r->msg_cap - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* "NAME:LINE: column K 'COL': WHAT: 'CELL' (TODO)" */
static int refuse_cell(rd *r, int col, const char *what, const char *cs, const char *ce,
                       const char *todo)
{
    char t[CELL_SHOW];
    return failf(r, TF_E_BAD_INPUT, ":%lld: column %d '%s': %s: '%s' (%s)", (long long)r->line,
                 col + 1, col == r->p->col ? r->colname : r->dname, what, show(cs, ce, t, sizeof t),
                 todo);
}

__attribute__((format(printf, 2, 3))) static int note(rd *r, const char *fmt, ...)
{
    tf_prices *p = r->p;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t add = strlen(p->name) + 2 + strlen(line) + 1;
    char *n = realloc(p->notes, p->notes_len + add + 1);
    if (!n)
        return failf(r, TF_E_NOMEM, ": out of memory");
    p->notes = n;
    p->notes_len +=
        (size_t)sprintf(n + p->notes_len, "%s%s: %s", p->notes_len ? "\n" : "", p->name, line);
    return 0;
}

/* ---- the source: lines ---- */

/* Next line (without "\n" / "\r\n") as [*s, *e); 1 on a line, 0 at the end, else an error. */
static int next_line(rd *r, const char **s, const char **e)
{
    if (r->mem || r->fd < 0) {
        if (r->mem_pos >= r->mem_len)
            return 0;
        const char *p = r->mem + r->mem_pos;
        const char *nl = memchr(p, '\n', r->mem_len - r->mem_pos);
        const char *le = nl ? nl : r->mem + r->mem_len;
        if ((size_t)(le - p) > MAX_LINE)
            return TF_E_LIMIT;
        r->mem_pos = nl ? (size_t)(nl + 1 - r->mem) : r->mem_len;
        if (le > p && le[-1] == '\r')
            le--;
        *s = p;
        *e = le;
        return 1;
    }
    for (;;) {
        char *p = r->buf + r->beg;
        char *nl = memchr(p, '\n', r->end - r->beg);
        if (nl || (r->eof && r->end > r->beg)) {
            char *le = nl ? nl : r->buf + r->end;
            r->beg = nl ? (size_t)(nl + 1 - r->buf) : r->end;
            if (le > p && le[-1] == '\r')
                le--;
            *s = p;
            *e = le;
            return 1;
        }
        if (r->eof)
            return 0;
        if (r->beg > 0) { /* keep the partial line at the front */
            memmove(r->buf, r->buf + r->beg, r->end - r->beg);
            r->end -= r->beg;
            r->beg = 0;
        }
        if (r->end == r->cap) {
            if (r->cap >= MAX_LINE)
                return TF_E_LIMIT;
            char *nb = realloc(r->buf, 2 * r->cap);
            if (!nb)
                return TF_E_NOMEM;
            r->buf = nb;
            r->cap *= 2;
        }
        ssize_t got = read(r->fd, r->buf + r->end, r->cap - r->end);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (got == 0)
            r->eof = 1;
        r->end += (size_t)got;
    }
}

/* ---- cells ---- */

/* One field starting at p (line end e, separator sep): its unquoted, trimmed text in [*fs, *fe);
 * returns where the next field starts (past the separator), or NULL after the last one. A field
 * that starts with a quote runs to the closing quote ("" inside is one quote, kept doubled in the
 * view); *bad is set when that quote is never closed. Spaces (and tabs, unless tab separates)
 * around a field are not part of it. */
static const char *field(const char *p, const char *e, char sep, const char **fs, const char **fe,
                         int *bad)
{
    while (p < e && (*p == ' ' || (*p == '\t' && sep != '\t')))
        p++;
    const char *c;
    if (p < e && *p == '"') {
        const char *q = p + 1;
        for (;;) {
            q = memchr(q, '"', (size_t)(e - q));
            if (!q) {
                *bad = 1;
                *fs = p + 1;
                *fe = e;
                return NULL;
            }
            if (q + 1 < e && q[1] == '"') {
                q += 2;
                continue;
            }
            break;
        }
        *fs = p + 1;
        *fe = q;
        c = memchr(q, sep, (size_t)(e - q));
    } else {
        c = memchr(p, sep, (size_t)(e - p));
        const char *x = c ? c : e;
        while (x > p && (x[-1] == ' ' || (x[-1] == '\t' && sep != '\t')))
            x--;
        *fs = p;
        *fe = x;
    }
    return c ? c + 1 : NULL;
}

/* Splits a line into r->fs/fe, r->nf; 1 when a quote is never closed, TF_E_LIMIT past
 * MAX_FIELDS. */
static int split(rd *r, const char *ls, const char *le)
{
    int bad = 0;
    const char *p = ls;
    r->nf = 0;
    do {
        if (r->nf == MAX_FIELDS)
            return TF_E_LIMIT;
        p = field(p, le, (char)r->p->sep, &r->fs[r->nf], &r->fe[r->nf], &bad);
        r->nf++;
    } while (p);
    return bad;
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Parses [s, e) as a whole number; 0 and *x on success, -1 if it is not one. Decimals with at
 * most 15 significant digits and a power of ten up to 22 take the exact fast path (both the
 * digits and 10^k are exact doubles, so one IEEE multiply or divide rounds correctly, as strtod
 * does); anything else goes through strtod. Non-finite and out-of-range values are returned as
 * such (strtod's inf for 1e400) for the caller to refuse. */
static int parse_num(const char *s, const char *e, double *x)
{
    const char *p = s;
    int neg = 0;
    if (p < e && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    uint64_t m = 0;
    int digits = 0, scale = 0, any = 0;
    while (p < e && *p >= '0' && *p <= '9') {
        if (m || *p != '0') {
            if (digits < 19)
                m = 10 * m + (uint64_t)(*p - '0');
            else
                scale++;
            digits++;
        }
        any = 1;
        p++;
    }
    if (p < e && *p == '.') {
        p++;
        while (p < e && *p >= '0' && *p <= '9') {
            if (m || *p != '0') {
                if (digits < 19) {
                    m = 10 * m + (uint64_t)(*p - '0');
                    scale--;
                }
                digits++;
            } else
                scale--;
            any = 1;
            p++;
        }
    }
    int fast = any;
    if (any && p < e && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        int eneg = 0, ev = 0, edig = 0;
        if (q < e && (*q == '-' || *q == '+'))
            eneg = *q++ == '-';
        while (q < e && *q >= '0' && *q <= '9') {
            if (ev < 10000)
                ev = 10 * ev + (*q - '0');
            edig++;
            q++;
        }
        if (!edig)
            fast = 0;
        else {
            scale += eneg ? -ev : ev;
            p = q;
        }
    }
    if (fast && p == e && digits <= 15 && scale >= -22 && scale <= 22) {
        double v = (double)m;
        v = scale >= 0 ? v * pow10_exact[scale] : v / pow10_exact[-scale];
        *x = neg ? -v : v;
        return 0;
    }
    /* strtod only for what the fast path can't take: long or far-scaled decimals, hex floats,
     * nan/inf; anything else (a date, a word) is not a number, without a slow strtod call. */
    const char *t = s + (s < e && (*s == '-' || *s == '+'));
    if (p != e && !(t < e && strchr("nNiI", *t)) && !(any && p < e && (*p == 'x' || *p == 'X')))
        return -1;
    char tmp[128];
    size_t len = (size_t)(e - s);
    if (len == 0 || len >= sizeof tmp)
        return -1;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    char *stop;
    errno = 0;
    double v = strtod(tmp, &stop);
    if (stop != tmp + len)
        return -1;
    if (errno == ERANGE && isfinite(v) && v != 0.0 && fabs(v) >= 1.0)
        v = v > 0 ? HUGE_VAL : -HUGE_VAL;
    if (errno == ERANGE && fabs(v) < 1.0)
        v = 0.0; /* underflow: 1e-400 is no price */
    *x = v;
    return 0;
}

/* "bad value" text, or NULL when x is a usable price. */
static const char *bad_price(double x)
{
    if (x != x)
        return "NaN is not a price";
    if (!isfinite(x))
        return "not a finite number (out of double range?)";
    if (x <= 0)
        return "not a positive price (pnl divides by the entry price)";
    return NULL;
}

static int ieq(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    if (alen != blen)
        return 0;
    for (size_t i = 0; i < alen; i++)
        if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
            return 0;
    return 1;
}

static int is_date_name(const char *s, size_t len)
{
    static const char *names[] = {"date",       "datetime",  "time",      "timestamp",
                                  "open_time",  "open time", "dt",        "gmt time",
                                  "local time", "date_time", "trade_date"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (ieq(s, len, names[i]))
            return 1;
    return 0;
}

/* A 1-based column number in 1..nf: its 0-based index, else -1. */
static int index_arg(const char *s, int nf)
{
    if (!s || !*s)
        return -1;
    long k = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || k > 100000)
            return -1;
        k = 10 * k + (*p - '0');
    }
    return k >= 1 && k <= nf ? (int)k - 1 : -1;
}

/* A date in words or with separators, not a plain number (an index 0, 1, 2 or a volume is no
 * date column). */
static int textual_date(const char *s, const char *e)
{
    tfr_date d;
    return tfr_date_parse(s, e, &d) == 0 && d.form != TFR_DATE_EPOCH &&
           !(d.form == TFR_DATE_YMD8 && e - s == 8);
}

/* ---- bars ---- */

static int grow(rd *r)
{
    tf_prices *p = r->p;
    if ((size_t)p->n < r->vcap)
        return 0;
    if (p->n >= TF_MAX_BARS)
        return failf(r, TF_E_LIMIT, ":%lld: more than %lld bars", (long long)r->line,
                     (long long)TF_MAX_BARS);
    size_t nc = r->vcap ? 2 * r->vcap : 4096;
    double *c = realloc(p->close, nc * sizeof *c);
    if (!c)
        return failf(r, TF_E_NOMEM, ": out of memory (%lld bars)", (long long)p->n);
    p->close = c;
    int64_t **arrays[3] = {&p->times, &r->alt, &p->doff};
    for (int k = 0; k < 3; k++) {
        if (!*arrays[k])
            continue;
        int64_t *a = realloc(*arrays[k], (nc + 1) * sizeof(int64_t));
        if (!a)
            return failf(r, TF_E_NOMEM, ": out of memory (%lld bars)", (long long)p->n);
        *arrays[k] = a;
    }
    r->vcap = nc;
    return 0;
}

static int keep_text(rd *r, const char *s, const char *e)
{
    tf_prices *p = r->p;
    size_t len = (size_t)(e - s), at = (size_t)p->doff[p->n];
    if (at + len > r->tcap) {
        size_t nc = r->tcap ? r->tcap : 65536;
        while (nc < at + len)
            nc *= 2;
        char *t = realloc(p->dtext, nc);
        if (!t)
            return failf(r, TF_E_NOMEM, ": out of memory (date text)");
        p->dtext = t;
        r->tcap = nc;
    }
    memcpy(p->dtext + at, s, len);
    p->doff[p->n + 1] = (int64_t)(at + len);
    return 0;
}

/* The file says nn/nn/yyyy is read day-first (1) or month-first (0) from this line on: what was
 * read so far is read that way too, and must be in order that way. */
static int decide(rd *r, int day_first)
{
    tf_prices *p = r->p;
    order *o = &r->ord[day_first];
    if (o->bad_line)
        return failf(r, TF_E_BAD_INPUT,
                     ":%lld: column %d '%s': dates out of order ('%s' after '%s', read %s as "
                     "line %lld shows) (sort the file by date)",
                     (long long)o->bad_line, p->dcol + 1, r->dname, o->bad_cell, o->bad_prev,
                     day_first ? "day-first" : "month-first", (long long)r->line);
    if (day_first) {
        memcpy(p->times, r->alt, (size_t)p->n * sizeof(int64_t));
        r->ord[0] = r->ord[1];
    }
    free(r->alt);
    r->alt = NULL;
    r->day_first = day_first;
    r->decided_line = r->line;
    return 0;
}

/* Checks time t (reading k) against the previous bar's; 1 when it goes against the direction. */
static int against(order *o, int64_t t, int have_prev)
{
    int bad = 0;
    if (have_prev && t != o->prev) {
        int d = t > o->prev ? 1 : -1;
        if (!o->dir)
            o->dir = d;
        else if (d != o->dir)
            bad = 1;
    }
    o->prev = t;
    return bad;
}

/* One row's date cell: parsed, its time(s) stored at bar p->n, its order checked. Returns 0; 1
 * with *why (a bad cell the caller may skip); or a refusal. */
static int date_cell(rd *r, const char *ds, const char *de, const char **why)
{
    tf_prices *p = r->p;
    tfr_date d;
    if (de == ds || tfr_date_parse(ds, de, &d) || (r->form && d.form != r->form)) {
        *why = r->form ? "not a date like the rows before" : "not a date tollfree reads";
        return 1;
    }
    if (!r->form) {
        r->form = d.form;
        r->unit = d.form == TFR_DATE_EPOCH ? tfr_epoch_unit(d.epoch_int) : 1;
        r->day_first = d.form == TFR_DATE_AB_Y ? -1 : 0;
        if (r->day_first < 0 && !(r->alt = malloc((r->vcap + 1) * sizeof(int64_t))))
            return failf(r, TF_E_NOMEM, ": out of memory");
    }
    if (d.form == TFR_DATE_AB_Y) {
        int says = d.a > 12 ? 1 : d.b > 12 ? 0 : -1; /* what this cell decides */
        if (says >= 0 && r->day_first >= 0 && says != r->day_first) {
            char t[CELL_SHOW];
            return failf(r, TF_E_BAD_INPUT,
                         ":%lld: column %d '%s': a %s date after %s ones (line %lld): '%s' (the "
                         "file mixes MM/DD and DD/MM: fix it, e.g. write YYYY-MM-DD)",
                         (long long)r->line, p->dcol + 1, r->dname,
                         says ? "day-first" : "month-first", says ? "month-first" : "day-first",
                         (long long)r->decided_line, show(ds, de, t, sizeof t));
        }
        if (says >= 0 && r->day_first < 0) {
            int rc = decide(r, says);
            if (rc)
                return rc;
        }
    }
    int64_t t0, t1 = 0;
    int rc = tfr_date_time(&d, r->day_first == 1, r->unit, &t0);
    if (!rc && r->day_first < 0)
        rc = tfr_date_time(&d, 1, r->unit, &t1);
    if (rc) {
        *why = rc == -2 ? "a date outside 1678..2262 (int64 ns since 1970)"
                        : "not a date like the rows before";
        return 1;
    }
    if (r->day_first >= 0) {
        if (against(&r->ord[0], t0, r->have_prev)) {
            char t[CELL_SHOW];
            return failf(r, TF_E_BAD_INPUT,
                         ":%lld: column %d '%s': dates out of order ('%s' after '%s') (sort the "
                         "file by date)",
                         (long long)r->line, p->dcol + 1, r->dname, show(ds, de, t, sizeof t),
                         r->prev_cell);
        }
    } else {
        for (int k = 0; k < 2; k++) {
            order *o = &r->ord[k];
            if (against(o, k ? t1 : t0, r->have_prev) && !o->bad_line) {
                o->bad_line = r->line;
                copy_cell(o->bad_cell, ds, de);
                memcpy(o->bad_prev, r->prev_cell, CELL_SHOW);
            }
        }
        if (r->ord[0].bad_line && r->ord[1].bad_line) {
            char t[CELL_SHOW];
            return failf(r, TF_E_BAD_INPUT,
                         ":%lld: column %d '%s': dates out of order read month-first (line "
                         "%lld) and day-first (line %lld): '%s' (sort the file by date)",
                         (long long)r->line, p->dcol + 1, r->dname, (long long)r->ord[0].bad_line,
                         (long long)r->ord[1].bad_line, show(ds, de, t, sizeof t));
        }
        r->alt[p->n] = t1;
    }
    p->times[p->n] = t0;
    if (!r->have_prev)
        copy_cell(r->first_cell, ds, de);
    copy_cell(r->prev_cell, ds, de);
    r->have_prev = 1;
    return 0;
}

/* The first data row: without a named date column, the first other column whose cell is a date
 * in words or with separators is the date column. */
static void find_date_column(rd *r)
{
    tf_prices *p = r->p;
    r->date_pending = 0;
    for (int i = 0; i < r->nf && p->dcol < 0; i++)
        if (i != p->col && textual_date(r->fs[i], r->fe[i]))
            p->dcol = i;
    if (p->dcol < 0)
        return;
    if (!r->hdr) { /* no header line: the column's number names it */
        snprintf(r->dname, sizeof r->dname, "%d", p->dcol + 1);
        return;
    }
    const char *q = r->hdr, *e = r->hdr + r->hdr_len, *a = q, *b = q;
    int bad = 0;
    for (int i = 0; i <= p->dcol && q; i++)
        q = field(q, e, (char)p->sep, &a, &b, &bad);
    show(a, b, r->dname, sizeof r->dname);
}

static int skip_row(rd *r, const char *why)
{
    tf_prices *p = r->p;
    if (!p->skipped) {
        p->first_bad_line = r->line;
        snprintf(r->first_skip, sizeof r->first_skip, "%s", why);
    }
    p->skipped++;
    return 0;
}

/* A data row (fields split): its close (and date) kept, or skipped, or the file refused. */
static int data_row(rd *r, const char *ls, const char *le)
{
    tf_prices *p = r->p;
    char t[CELL_SHOW];
    const char *rowtodo = p->header ? "the header line has" : "the first row has";
    if (r->nf > r->want_nf)
        return failf(r, TF_E_BAD_INPUT,
                     ":%lld: %d fields where %s %d: '%s' (a separator inside a cell, such as a "
                     "thousands separator in 1,234.5? quote the cell or remove the separator)",
                     (long long)r->line, r->nf, rowtodo, r->want_nf, show(ls, le, t, sizeof t));
    if (r->nf < r->want_nf) {
        if (r->o.skip_bad_rows)
            return skip_row(r, "a short row");
        return failf(r, TF_E_BAD_INPUT,
                     ":%lld: %d fields where %s %d: '%s' (a short row: fix it, or "
                     "--skip-bad-rows)",
                     (long long)r->line, r->nf, rowtodo, r->want_nf, show(ls, le, t, sizeof t));
    }
    if (r->date_pending)
        find_date_column(r);
    int col = p->col;
    const char *s = r->fs[col], *e = r->fe[col], *why = NULL;
    double x = 0;
    if (s == e)
        why = "empty cell";
    else if (parse_num(s, e, &x)) {
        if (memchr(s, ',', (size_t)(e - s)) && (s[0] == '-' || isdigit((unsigned char)s[0])))
            return refuse_cell(r, col, "a comma in a number", s, e,
                               "a decimal comma or a thousands separator: tollfree reads "
                               "numbers like 1234.5; convert the file's numbers");
        why = "not a number";
    } else
        why = bad_price(x);
    if (why) {
        if (r->o.skip_bad_rows)
            return skip_row(r, why);
        return refuse_cell(r, col, why, s, e, "fix the cell, or --skip-bad-rows");
    }
    int rc = grow(r);
    if (rc)
        return rc;
    if (p->dcol >= 0) {
        const char *ds = r->fs[p->dcol], *de = r->fe[p->dcol];
        if (!r->o.assume_sorted) {
            if (!p->times && !(p->times = malloc((r->vcap + 1) * sizeof(int64_t))))
                return failf(r, TF_E_NOMEM, ": out of memory");
            rc = date_cell(r, ds, de, &why);
            if (rc < 0)
                return rc;
            if (rc) {
                if (r->o.skip_bad_rows)
                    return skip_row(r, why);
                return refuse_cell(r, p->dcol, why, ds, de, date_todo);
            }
        }
        if (r->o.keep_dates) {
            if (!p->doff) {
                if (!(p->doff = malloc((r->vcap + 1) * sizeof(int64_t))))
                    return failf(r, TF_E_NOMEM, ": out of memory");
                p->doff[0] = 0;
            }
            if ((rc = keep_text(r, ds, de)))
                return rc;
        }
    }
    p->close[p->n++] = x;
    return 0;
}

/* The first non-blank line: the separator, header or data, the columns. 1 when it was a header,
 * 0 when it is data (the caller reads it as a row), else a refusal. */
static int first_line(rd *r, const char *ls, const char *le)
{
    tf_prices *p = r->p;
    if (!p->sep) {
        /* The separator that occurs most often outside quotes; on a tie ';' before tab before
         * ',' (a "1;2,5" line is semicolons with a decimal comma). */
        int cnt[3] = {0, 0, 0}, inq = 0;
        for (const char *q = ls; q < le; q++) {
            if (*q == '"')
                inq = !inq;
            else if (!inq)
                cnt[0] += *q == ';', cnt[1] += *q == '\t', cnt[2] += *q == ',';
        }
        p->sep = cnt[0] && cnt[0] >= cnt[1] && cnt[0] >= cnt[2] ? ';'
                 : cnt[1] && cnt[1] >= cnt[2]                   ? '\t'
                                                                : ',';
        if (p->sep != ',') {
            int rc = note(r, "separator %s (found in the first line; --sep to say another)",
                          p->sep == ';' ? "';'" : "tab");
            if (rc)
                return rc;
        }
    }
    int rc = split(r, ls, le);
    if (rc == TF_E_LIMIT)
        return failf(r, TF_E_LIMIT, ":%lld: more than %d fields (is this a CSV?)",
                     (long long)r->line, MAX_FIELDS);
    if (rc)
        return failf(r, TF_E_BAD_INPUT, ":%lld: an unclosed quote (close it)", (long long)r->line);
    r->want_nf = r->nf;
    int data = 1;
    for (int i = 0; i < r->nf && data; i++) {
        double x;
        tfr_date d;
        data =
            parse_num(r->fs[i], r->fe[i], &x) == 0 || tfr_date_parse(r->fs[i], r->fe[i], &d) == 0;
    }
    const char *column = r->o.column ? r->o.column : "close";
    const char *dc = r->o.date_column;
    int none = dc && !strcmp(dc, "none");
    char t[CELL_SHOW];
    if (!data) {
        p->header = 1;
        for (int i = 0; i < r->nf && p->col < 0; i++)
            if (ieq(r->fs[i], (size_t)(r->fe[i] - r->fs[i]), column))
                p->col = i;
        if (p->col < 0)
            p->col = index_arg(column, r->nf);
        if (p->col < 0) {
            /* The message lists the columns there are (and stays one line). */
            char list[1024];
            size_t k = 0;
            for (int i = 0; i < r->nf && i < 32 && k < sizeof list - 80; i++)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'", i ? ", " : "",
                                      show(r->fs[i], r->fe[i], t, sizeof t));
            return failf(r, TF_E_BAD_INPUT,
                         ": no column '%s' in the header line; columns: %s%s (use --column NAME "
                         "or a 1-based number)",
                         column, list, r->nf > 32 ? ", ..." : "");
        }
        if (dc && !none) {
            for (int i = 0; i < r->nf && p->dcol < 0; i++)
                if (ieq(r->fs[i], (size_t)(r->fe[i] - r->fs[i]), dc))
                    p->dcol = i;
            if (p->dcol < 0)
                p->dcol = index_arg(dc, r->nf);
            if (p->dcol < 0)
                return failf(r, TF_E_BAD_INPUT,
                             ": no date column '%s' in the header line (use --date-column with a "
                             "header name, \"\" for an unnamed column, a 1-based number, or none)",
                             dc);
        } else if (!none) {
            for (int i = 0; i < r->nf && p->dcol < 0; i++)
                if (i != p->col && is_date_name(r->fs[i], (size_t)(r->fe[i] - r->fs[i])))
                    p->dcol = i;
            r->date_pending = p->dcol < 0;
            if (r->date_pending) {
                r->hdr_len = (size_t)(le - ls);
                if (!(r->hdr = malloc(r->hdr_len + 1)))
                    return failf(r, TF_E_NOMEM, ": out of memory");
                memcpy(r->hdr, ls, r->hdr_len);
            }
        }
        if (p->dcol == p->col)
            p->dcol = -1;
        show(r->fs[p->col], r->fe[p->col], r->colname, sizeof r->colname);
        if (p->dcol >= 0)
            show(r->fs[p->dcol], r->fe[p->dcol], r->dname, sizeof r->dname);
        return 1;
    }
    /* No header: --column is a 1-based number; else the one column, or the one column that is
     * no date. */
    p->col = index_arg(column, r->nf);
    if (p->col < 0 && r->nf == 1)
        p->col = 0;
    if (p->col < 0) {
        int only = -1, count = 0;
        for (int i = 0; i < r->nf; i++)
            if (!textual_date(r->fs[i], r->fe[i]))
                only = i, count++;
        if (count == 1)
            p->col = only;
    }
    if (p->col < 0)
        return failf(r, TF_E_BAD_INPUT,
                     ": no header line and %d columns: say which holds the close (--column N, "
                     "1..%d)",
                     r->nf, r->nf);
    if (dc && !none) {
        p->dcol = index_arg(dc, r->nf);
        snprintf(r->dname, sizeof r->dname, "%d", p->dcol + 1);
        if (p->dcol < 0)
            return failf(r, TF_E_BAD_INPUT,
                         ": no header line: --date-column wants a column number 1..%d or none, "
                         "got '%s'",
                         r->nf, dc);
    } else if (!none)
        r->date_pending = 1;
    if (p->dcol == p->col)
        p->dcol = -1;
    snprintf(r->colname, sizeof r->colname, "%d", p->col + 1);
    return 0;
}

/* After the last row: the order's direction, the notes. */
static int finish_csv(rd *r)
{
    tf_prices *p = r->p;
    if (p->n == 0) {
        if (p->skipped)
            return failf(r, TF_E_BAD_INPUT,
                         ": empty input (every row was bad; the first, line %lld: %s)",
                         (long long)p->first_bad_line, r->first_skip);
        return failf(r, TF_E_BAD_INPUT, ": empty input (%s)",
                     !r->started ? "no header, no rows" : "a header but no rows");
    }
    if (p->dcol >= 0)
        snprintf(p->date_column, sizeof p->date_column, "%s", r->dname);
    snprintf(p->column, sizeof p->column, "%s", r->colname);
    int dir = 0;
    if (p->dcol >= 0 && !r->o.assume_sorted) {
        p->date_checked = 1;
        dir = r->ord[0].dir;
        if (r->day_first < 0) {
            order *m = &r->ord[0], *d = &r->ord[1];
            if (m->bad_line || d->bad_line || m->dir != d->dir) {
                order *b = m->bad_line ? m : d;
                r->line = b->bad_line ? b->bad_line : r->line;
                return failf(
                    r, TF_E_BAD_INPUT,
                    ":%lld: column %d '%s': month-first or day-first? no date has a part above 12, "
                    "and the two readings give different bar orders (%s) (write the dates as "
                    "YYYY-MM-DD, or --assume-sorted if the rows are oldest first)",
                    (long long)r->line, p->dcol + 1, r->dname,
                    b->bad_line ? (b == m ? "read month-first they go out of order here"
                                          : "read day-first they go out of order here")
                                : "one runs oldest first, the other newest first");
            }
            int rc = note(r,
                          "column '%s': dates like '%s' could be month-first or day-first (no "
                          "part above 12); both readings give the same bar order; times are "
                          "read month-first",
                          r->dname, r->first_cell);
            if (rc)
                return rc;
        }
        p->day_first = r->day_first;
        snprintf(p->date_form, sizeof p->date_form, "%s",
                 tfr_date_form_name(r->form, r->day_first));
    }
    if (r->o.assume_sorted) {
        int rc = note(r, "--assume-sorted: the rows are taken in file order as oldest first; "
                         "their dates are not checked");
        if (rc)
            return rc;
        p->assumed_sorted = 1;
    }
    if (p->skipped) {
        int rc = note(r, "skipped %lld bad rows (--skip-bad-rows; the first at line %lld: %s)",
                      (long long)p->skipped, (long long)p->first_bad_line, r->first_skip);
        if (rc)
            return rc;
    }
    if (dir < 0) {
        int64_t n = p->n;
        for (int64_t i = 0, j = n - 1; i < j; i++, j--) {
            double c = p->close[i];
            p->close[i] = p->close[j];
            p->close[j] = c;
            int64_t t = p->times[i];
            p->times[i] = p->times[j];
            p->times[j] = t;
        }
        if (p->doff) {
            char *nt = malloc(p->doff[n] ? (size_t)p->doff[n] : 1);
            int64_t *no = malloc(((size_t)n + 1) * sizeof *no);
            if (!nt || !no) {
                free(nt);
                free(no);
                return failf(r, TF_E_NOMEM, ": out of memory");
            }
            no[0] = 0;
            for (int64_t i = 0; i < n; i++) {
                int64_t a = p->doff[n - 1 - i], b = p->doff[n - i];
                memcpy(nt + no[i], p->dtext + a, (size_t)(b - a));
                no[i + 1] = no[i] + (b - a);
            }
            free(p->dtext);
            free(p->doff);
            p->dtext = nt;
            p->doff = no;
        }
        p->reversed = 1;
        int rc = note(r,
                      "column '%s' runs newest first (%s .. %s): the bars were reversed to "
                      "oldest first",
                      r->dname, r->first_cell, r->prev_cell);
        if (rc)
            return rc;
    }
    return 0;
}

static int read_csv(rd *r)
{
    r->fs = malloc(2 * MAX_FIELDS * sizeof *r->fs);
    if (!r->fs)
        return failf(r, TF_E_NOMEM, ": out of memory");
    r->fe = r->fs + MAX_FIELDS;
    for (;;) {
        const char *ls = NULL, *le = NULL;
        int got = next_line(r, &ls, &le);
        if (got < 0) {
            if (got == TF_E_LIMIT)
                return failf(r, got, ":%lld: a line longer than 64 MiB (is this a CSV?)",
                             (long long)r->line + 1);
            if (got == TF_E_NOMEM)
                return failf(r, got, ": out of memory");
            return failf(r, got, ":%lld: %s", (long long)r->line + 1, strerror(-got));
        }
        if (got == 0)
            break;
        r->line++;
        if (r->line == 1 && le - ls >= 3 && !memcmp(ls, "\xEF\xBB\xBF", 3))
            ls += 3; /* UTF-8 byte order mark */
        /* Binary bytes: every byte of the first lines (a binary file fails at once); after
         * that only the cells parsed are looked at, and there they are "not a number". */
        for (const char *q = ls; r->line <= 64 && q < le; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t')
                return failf(r, TF_E_BAD_INPUT,
                             ":%lld: byte %ld is binary data (0x%02x), not CSV text (for raw "
                             "little-endian f64 use --raw)",
                             (long long)r->line, (long)(q - ls) + 1, (unsigned char)*q);
        const char *q = ls;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        if (q == le)
            continue; /* blank line */
        int rc;
        if (!r->started) {
            r->started = 1;
            rc = first_line(r, ls, le);
            if (rc < 0)
                return rc;
            if (rc == 1)
                continue;
        } else {
            rc = split(r, ls, le);
            if (rc == TF_E_LIMIT)
                r->nf = MAX_FIELDS + 1; /* refused below as a long row */
            else if (rc) {
                char t[CELL_SHOW];
                return failf(r, TF_E_BAD_INPUT,
                             ":%lld: an unclosed quote: '%s' (close it: a quoted cell ends on "
                             "its line)",
                             (long long)r->line, show(ls, le, t, sizeof t));
            }
        }
        if ((rc = data_row(r, ls, le)))
            return rc;
    }
    return finish_csv(r);
}

/* Raw little-endian f64: 8 bytes a value (x86-64 and aarch64 are little-endian: the bytes are
 * the values). */
static int read_raw(rd *r)
{
    tf_prices *p = r->p;
    p->col = -1;
    unsigned char chunk[1 << 16];
    size_t have = 0;
    int64_t idx = 0;
    for (;;) {
        size_t got;
        if (r->mem || r->fd < 0) {
            got = r->mem_len - r->mem_pos < sizeof chunk - have ? r->mem_len - r->mem_pos
                                                                : sizeof chunk - have;
            if (got)
                memcpy(chunk + have, r->mem + r->mem_pos, got);
            r->mem_pos += got;
        } else {
            ssize_t g = read(r->fd, chunk + have, sizeof chunk - have);
            if (g < 0 && errno == EINTR)
                continue;
            if (g < 0)
                return failf(r, -errno, ": %s", strerror(errno));
            got = (size_t)g;
        }
        have += got;
        size_t whole = have / 8 * 8;
        for (size_t k = 0; k < whole; k += 8, idx++) {
            double x;
            memcpy(&x, chunk + k, 8);
            const char *why = bad_price(x);
            if (why && r->o.skip_bad_rows) {
                if (!p->skipped)
                    p->first_bad_line = idx + 1,
                    snprintf(r->first_skip, sizeof r->first_skip, "%s", why);
                p->skipped++;
                continue;
            }
            if (why)
                return failf(r, TF_E_BAD_INPUT,
                             ": value %lld (byte %lld): %g: %s (fix it, or --skip-bad-rows)",
                             (long long)idx + 1, (long long)idx * 8, x, why);
            int rc = grow(r);
            if (rc)
                return rc;
            p->close[p->n++] = x;
        }
        memmove(chunk, chunk + whole, have - whole);
        have -= whole;
        if (got == 0)
            break;
    }
    if (have)
        return failf(r, TF_E_BAD_INPUT,
                     ": raw f64 input must be a multiple of 8 bytes (%zu left over; a CSV? then "
                     "not --raw)",
                     have);
    if (p->n == 0)
        return failf(r, TF_E_BAD_INPUT, ": empty input (%s)",
                     p->skipped ? "every value was bad" : "no bars");
    if (p->skipped)
        return note(r, "skipped %lld bad values (--skip-bad-rows; the first is value %lld: %s)",
                    (long long)p->skipped, (long long)p->first_bad_line, r->first_skip);
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The one reader behind the three entry points: fd >= 0, or mem/len. */
static int read_any(tf_prices **out, int fd, const void *mem, size_t len, const char *name, int raw,
                    const tf_prices_opts *o, char *msg, size_t msg_cap)
{
    if (msg && msg_cap)
        msg[0] = '\0';
    else
        msg_cap = 0;
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    rd r;
    memset(&r, 0, sizeof r);
    r.msg = msg;
    r.msg_cap = msg_cap;
    if (o && tfu_opts_load(&r.o, sizeof r.o, o, TFU_FIELD_END(tf_prices_opts, keep_dates)))
        return failf(&r, TF_E_INVALID_ARG,
                     "tf_prices_opts: size %zu is not a size this "
                     "library reads",
                     o->size);
    if (r.o.sep && r.o.sep != ',' && r.o.sep != ';' && r.o.sep != '\t')
        return failf(&r, TF_E_INVALID_ARG, "separator 0x%02x: want ',', ';' or tab",
                     (unsigned)r.o.sep & 0xffu);
    tf_prices *p = calloc(1, sizeof *p);
    char fdname[32] = "<stdin>";
    if (fd > 0)
        snprintf(fdname, sizeof fdname, "<fd %d>", fd);
    const char *nm = r.o.name ? r.o.name : name ? name : fd >= 0 ? fdname : "<buffer>";
    if (!p || !(p->name = strdup(nm)) || !(p->notes = calloc(1, 1))) {
        if (p)
            free(p->name);
        free(p);
        return failf(&r, TF_E_NOMEM, "out of memory");
    }
    r.p = p;
    p->col = p->dcol = -1;
    r.fd = fd;
    r.mem = mem ? mem : (fd < 0 ? "" : NULL);
    r.mem_len = len;
    p->raw = raw || r.o.raw;
    p->sep = p->raw ? 0 : r.o.sep;
    int rc;
    if (p->raw)
        rc = read_raw(&r);
    else if (fd >= 0 && !(r.buf = malloc(CHUNK)))
        rc = failf(&r, TF_E_NOMEM, ": out of memory");
    else {
        r.cap = CHUNK;
        rc = read_csv(&r);
    }
    free(r.buf);
    free(r.fs);
    free(r.alt);
    free(r.hdr);
    if (rc) {
        tf_prices_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int tf_prices_read_fd(tf_prices **out, int fd, const tf_prices_opts *o, char *msg, size_t msg_cap)
{
    if (fd < 0) {
        if (out)
            *out = NULL;
        if (msg && msg_cap)
            snprintf(msg, msg_cap, "fd %d: not a descriptor", fd);
        return -EBADF;
    }
    return read_any(out, fd, NULL, 0, NULL, 0, o, msg, msg_cap);
}

int tf_prices_read_buffer(tf_prices **out, const void *data, size_t len, const tf_prices_opts *o,
                          char *msg, size_t msg_cap)
{
    if (!data && len) {
        if (out)
            *out = NULL;
        if (msg && msg_cap)
            snprintf(msg, msg_cap, "no buffer");
        return TF_E_NULL_ARG;
    }
    return read_any(out, -1, data ? data : "", len, NULL, 0, o, msg, msg_cap);
}

int tf_prices_read_path(tf_prices **out, const char *path, const tf_prices_opts *o, char *msg,
                        size_t msg_cap)
{
    if (out)
        *out = NULL;
    if (!path || !out) {
        if (msg && msg_cap)
            snprintf(msg, msg_cap, "no path");
        return TF_E_NULL_ARG;
    }
    if (!strcmp(path, "-"))
        return read_any(out, 0, NULL, 0, "<stdin>", 0, o, msg, msg_cap);
    const char *nm = o && o->name ? o->name : path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (msg && msg_cap)
            snprintf(msg, msg_cap, "%s: %s", nm, strerror(err));
        return -err;
    }
    /* A directory opens fine and fails only at the first read (EISDIR): say what it is. */
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        if (msg && msg_cap)
            snprintf(msg, msg_cap, "%s: is a directory (want a CSV or raw .f64 price file)", nm);
        return -EISDIR;
    }
    int raw = ends_with(path, ".f64") || ends_with(path, ".bin") || ends_with(path, ".raw");
    int rc = read_any(out, fd, NULL, 0, path, raw, o, msg, msg_cap);
    close(fd);
    return rc;
}
