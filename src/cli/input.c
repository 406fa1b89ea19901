/* Reading close series (CSV or raw f64, streamed) and parameter grids for the CLI. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tollfree/kernel.h"

int tf_cli_slurp(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    /* fopen opens a directory for reading; only the first read fails, with EISDIR, which
     * ferror() would turn into a vague EIO. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return -EISDIR;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    if (!buf)
        return -ENOMEM;
    if (err) {
        free(buf);
        return err;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Trims spaces and one pair of double quotes, in place; returns the start. */
static char *trim(char *s, char *end)
{
    while (s < end && isspace((unsigned char)*s))
        s++;
    while (end > s && isspace((unsigned char)end[-1]))
        end--;
    if (end - s >= 2 && *s == '"' && end[-1] == '"') {
        s++;
        end--;
    }
    *end = '\0';
    return s;
}

/* Splits line [s, e) at commas into fields (in place); returns the field count (<= max). */
static int split(char *s, char *e, char **fields, int max)
{
    int n = 0;
    while (n < max) {
        char *c = memchr(s, ',', (size_t)(e - s));
        char *fe = c ? c : e;
        fields[n++] = trim(s, fe);
        if (!c)
            break;
        s = c + 1;
    }
    return n;
}

/* ---- Close series: streamed CSV (as people have them) or raw f64 ----
 *
 * The file is read in chunks and parsed line by line; memory holds the close column (plus one
 * chunk and the previous date), never the file, so a file larger than memory is fine and "-"
 * (stdin) works. Every value is checked: a cell that is empty, not a number, not finite or not
 * positive (the pnl divides by the entry price) is an error naming line and column, or, with
 * skip_bad_rows, skipped and counted. */

#define CHUNK (4u << 20)
#define MAX_LINE (64u << 20)
#define MAX_FIELDS 4096

typedef struct reader {
    int fd;
    char *buf;
    size_t cap, beg, end; /* unread bytes are buf[beg, end) */
    int eof;
} reader;

/* Next line (without its '\n' / "\r\n") as [*s, *e); 1 on a line, 0 at the end, -errno. */
static int next_line(reader *r, char **s, char **e)
{
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
                return -E2BIG;
            char *nb = realloc(r->buf, 2 * r->cap);
            if (!nb)
                return -ENOMEM;
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

/* One CSV field starting at p (line end e): its unquoted, trimmed text in [*fs, *fe); returns
 * where the next field starts (past the comma), or NULL after the last one. A field that starts
 * with a quote runs to the closing quote ("" inside is one quote, kept doubled in the view);
 * *bad is set when that quote is never closed. */
static const char *field(const char *p, const char *e, const char **fs, const char **fe, int *bad)
{
    while (p < e && (*p == ' ' || *p == '\t'))
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
        c = memchr(q, ',', (size_t)(e - q));
    } else {
        c = memchr(p, ',', (size_t)(e - p));
        const char *x = c ? c : e;
        while (x > p && (x[-1] == ' ' || x[-1] == '\t'))
            x--;
        *fs = p;
        *fe = x;
    }
    return c ? c + 1 : NULL;
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

/* A date/time cell as an order key: year-first dates (YYYY-MM-DD, YYYY/MM/DD, YYYYMMDD) with an
 * optional time (HH:MM[:SS[.fff]], a 'T' or space between, a trailing Z/offset ignored) give
 * (YYYYMMDD, seconds of the day); a plain number (epoch seconds or milliseconds) gives (0, it).
 * -1 when the cell is neither. */
static int date_key(const char *s, const char *e, int64_t *day, double *sec)
{
    double num;
    if (e > s && parse_num(s, e, &num) == 0 && isfinite(num) && (e - s != 8 || num < 1e7)) {
        *day = 0;
        *sec = num;
        return 0;
    }
    int64_t g[7] = {0};
    int ng = 0;
    const char *p = s;
    int glen[7] = {0};
    while (p < e && ng < 7) {
        if (*p < '0' || *p > '9')
            break;
        int64_t v = 0;
        int l = 0;
        while (p < e && *p >= '0' && *p <= '9' && l < 9) {
            v = 10 * v + (*p++ - '0');
            l++;
        }
        g[ng] = v;
        glen[ng++] = l;
        if (p < e && (*p == '-' || *p == '/' || *p == ':' || *p == 'T' || *p == ' ' || *p == '.'))
            p++;
        else
            break;
    }
    if (ng >= 1 && glen[0] == 8) { /* YYYYMMDD[ HH:MM:SS] */
        for (int k = 6; k >= 3; k--)
            g[k] = g[k - 2];
        g[2] = g[0] % 100;
        g[1] = g[0] / 100 % 100;
        g[0] /= 10000;
        ng += 2;
    } else if (ng < 3 || glen[0] != 4)
        return -1;
    if (g[1] < 1 || g[1] > 12 || g[2] < 1 || g[2] > 31)
        return -1;
    *day = g[0] * 10000 + g[1] * 100 + g[2];
    double frac = 0;
    if (ng == 7 && glen[6] > 0) {
        frac = (double)g[6];
        for (int k = 0; k < glen[6]; k++)
            frac /= 10;
    }
    *sec = (double)(g[3] * 3600 + g[4] * 60 + g[5]) + frac;
    return 0;
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

static int push(double **v, size_t *cap, int64_t n, double x)
{
    if ((size_t)n == *cap) {
        size_t nc = *cap ? 2 * *cap : 4096;
        double *nv = realloc(*v, nc * sizeof(double));
        if (!nv)
            return -1;
        *v = nv;
        *cap = nc;
    }
    (*v)[n] = x;
    return 0;
}

/* A printable, bounded copy of a cell for messages. */
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

static void reverse(double *v, int64_t n)
{
    for (int64_t i = 0, j = n - 1; i < j; i++, j--) {
        double t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
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

static int read_raw_stream(const char *name, int fd, const tf_cli_series_opts *o, double **out,
                           int64_t *n, tf_cli_series_info *info)
{
    size_t cap = 0;
    int64_t count = 0, idx = 0, skipped = 0;
    double *v = NULL;
    unsigned char chunk[1 << 16];
    size_t have = 0;
    for (;;) {
        ssize_t got = read(fd, chunk + have, sizeof chunk - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            fprintf(stderr, "tollfree: %s: %s\n", name, strerror(errno));
            free(v);
            return -1;
        }
        have += (size_t)got;
        size_t whole = have / 8 * 8;
        for (size_t k = 0; k < whole; k += 8, idx++) {
            double x;
            memcpy(&x, chunk + k, 8); /* x86-64 is little-endian: the bytes are the values */
            const char *why = bad_price(x);
            if (why && o->skip_bad_rows) {
                skipped++;
                continue;
            }
            if (why) {
                fprintf(stderr,
                        "tollfree: %s: value %lld (byte %lld): %g: %s (or --skip-bad-rows)\n", name,
                        (long long)idx + 1, (long long)idx * 8, x, why);
                free(v);
                return -1;
            }
            if (count >= TF_MAX_BARS || push(&v, &cap, count, x)) {
                fprintf(stderr, "tollfree: %s: %s\n", name,
                        count >= TF_MAX_BARS ? "too many bars" : "out of memory");
                free(v);
                return -1;
            }
            count++;
        }
        memmove(chunk, chunk + whole, have - whole);
        have -= whole;
        if (got == 0)
            break;
    }
    if (have) {
        fprintf(stderr,
                "tollfree: %s: raw f64 input must be a multiple of 8 bytes (%zu left over)\n", name,
                have);
        free(v);
        return -1;
    }
    if (count == 0) {
        fprintf(stderr, "tollfree: %s: empty input (no bars)\n", name);
        free(v);
        return -1;
    }
    info->skipped = skipped;
    *out = v;
    *n = count;
    return 0;
}

static int read_csv_stream(const char *name, int fd, const tf_cli_series_opts *o, double **out,
                           int64_t *n, tf_cli_series_info *info)
{
    reader r = {.fd = fd, .cap = CHUNK, .buf = malloc(CHUNK)};
    double *v = NULL;
    size_t vcap = 0;
    int64_t count = 0, line = 0, skipped = 0, first_bad = 0;
    int col = -1, dcol = -1, started = 0, dir = 0, dates_ok = 1;
    int64_t prev_day = 0;
    double prev_sec = 0;
    char colname[128] = "", dname[128] = "", t1[96], t2[96];
    char first_date[64] = "", last_date[64] = "";
    int rc = -1;
    const char *s, *e;
    if (!r.buf) {
        fprintf(stderr, "tollfree: %s: out of memory\n", name);
        return -1;
    }
    for (;;) {
        char *ls = NULL, *le = NULL;
        int got = next_line(&r, &ls, &le);
        if (got < 0) {
            fprintf(stderr, "tollfree: %s:%lld: %s\n", name, (long long)line + 1,
                    got == -E2BIG ? "line longer than 64 MiB (is this a CSV?)" : strerror(-got));
            goto out;
        }
        if (got == 0)
            break;
        line++;
        if (line == 1 && le - ls >= 3 && !memcmp(ls, "\xEF\xBB\xBF", 3))
            ls += 3; /* UTF-8 byte order mark */
        /* Binary bytes: every byte of the first lines (a binary file fails at once); after
         * that only the cells parsed are looked at, and there they are "not a number". */
        for (const char *p = ls; line <= 64 && p < le; p++)
            if ((unsigned char)*p < 0x20 && *p != '\t') {
                fprintf(stderr,
                        "tollfree: %s:%lld: byte %ld is binary data (0x%02x), not CSV text (for "
                        "raw little-endian f64 use --raw)\n",
                        name, (long long)line, (long)(p - ls) + 1, (unsigned char)*p);
                goto out;
            }
        const char *q = ls;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        if (q == le)
            continue; /* blank line */
        if (!started) {
            started = 1;
            /* Header or data? A first line whose fields are all numbers or dates is data. */
            const char *fs[MAX_FIELDS], *fe[MAX_FIELDS];
            int nf = 0, bad = 0, numeric = 1;
            const char *p = ls;
            do {
                p = field(p, le, &fs[nf], &fe[nf], &bad);
                double x, sec;
                int64_t day;
                if (parse_num(fs[nf], fe[nf], &x) && date_key(fs[nf], fe[nf], &day, &sec))
                    numeric = 0;
                nf++;
            } while (p && nf < MAX_FIELDS);
            if (!numeric) {
                for (int i = 0; i < nf && col < 0; i++)
                    if (ieq(fs[i], (size_t)(fe[i] - fs[i]), o->column))
                        col = i;
                if (o->date_column && *o->date_column) {
                    for (int i = 0; i < nf && dcol < 0; i++)
                        if (ieq(fs[i], (size_t)(fe[i] - fs[i]), o->date_column))
                            dcol = i;
                    if (dcol < 0 && strcmp(o->date_column, "none")) {
                        fprintf(stderr, "tollfree: %s: no date column '%s' in the header line\n",
                                name, o->date_column);
                        goto out;
                    }
                } else
                    for (int i = 0; i < nf && dcol < 0; i++)
                        if (is_date_name(fs[i], (size_t)(fe[i] - fs[i])))
                            dcol = i;
                if (col < 0) {
                    /* The message lists the columns there are (and stays one line). */
                    fprintf(stderr,
                            "tollfree: %s: no column '%s' in the header line; columns:", name,
                            o->column);
                    for (int i = 0; i < nf && i < 64; i++)
                        fprintf(stderr, "%s '%s'", i ? "," : "", show(fs[i], fe[i], t1, 64));
                    fprintf(stderr, "%s (use --column NAME)\n", nf > 64 ? ", ..." : "");
                    goto out;
                }
                if (dcol == col)
                    dcol = -1;
                show(fs[col], fe[col], colname, sizeof colname);
                if (dcol >= 0)
                    show(fs[dcol], fe[dcol], dname, sizeof dname);
                continue;
            }
            /* No header: one column is the close, or --column gives a 1-based index. */
            char *stop;
            long k = strtol(o->column, &stop, 10);
            if (nf == 1)
                col = 0;
            else if (!*stop && k >= 1 && k <= nf)
                col = (int)k - 1;
            else {
                fprintf(stderr,
                        "tollfree: %s: no header line and %d columns: say which holds the close "
                        "with --column N (1..%d)\n",
                        name, nf, nf);
                goto out;
            }
            snprintf(colname, sizeof colname, "%d", col + 1);
        }
        /* A data row: walk to the close (and date) fields only. */
        const char *ds = NULL, *de = NULL;
        s = e = NULL;
        const char *p = ls;
        int bad = 0, i = 0, want = col > dcol ? col : dcol;
        for (; p && i <= want; i++) {
            const char *a, *b;
            p = field(p, le, &a, &b, &bad);
            if (i == col)
                s = a, e = b;
            if (i == dcol)
                ds = a, de = b;
        }
        const char *why = NULL;
        int why_col = col;
        double x = 0;
        if (bad)
            why = "unclosed quote";
        else if (!s)
            why = "missing cell (the row is short)";
        else if (s == e)
            why = "empty cell";
        else if (parse_num(s, e, &x))
            why = "not a number";
        else
            why = bad_price(x);
        int64_t day = 0;
        double sec = 0;
        if (!why && dcol >= 0 && dates_ok) {
            if (!ds || date_key(ds, de, &day, &sec)) {
                if (count == 0 &&
                    !skipped) { /* the first date is not a date we know: don't check */
                    dates_ok = 0;
                    fprintf(stderr,
                            "tollfree: %s: column '%s' is not a date tollfree reads "
                            "(YYYY-MM-DD[ HH:MM[:SS]] or a number): the bar order is not checked\n",
                            name, dname);
                } else {
                    why = "not a date like the rows before";
                    why_col = dcol;
                }
            }
        }
        if (why) {
            if (o->skip_bad_rows && !bad) {
                if (!skipped)
                    first_bad = line;
                skipped++;
                continue;
            }
            const char *cs = why_col == col ? s : ds, *ce = why_col == col ? e : de;
            fprintf(stderr, "tollfree: %s:%lld: column %d '%s': %s: '%s'%s\n", name,
                    (long long)line, why_col + 1, why_col == col ? colname : dname, why,
                    cs ? show(cs, ce, t1, 64) : "",
                    o->skip_bad_rows ? "" : " (or --skip-bad-rows)");
            goto out;
        }
        if (dcol >= 0 && dates_ok) {
            if (count > 0) {
                int d = day != prev_day ? (day > prev_day ? 1 : -1)
                                        : (sec > prev_sec   ? 1
                                           : sec < prev_sec ? -1
                                                            : 0);
                if (d && !dir)
                    dir = d;
                else if (d && d != dir) {
                    fprintf(stderr,
                            "tollfree: %s:%lld: column %d '%s': dates out of order ('%s' after "
                            "'%s'): sort the file by date\n",
                            name, (long long)line, dcol + 1, dname, show(ds, de, t1, 48),
                            show(last_date, last_date + strlen(last_date), t2, sizeof t2));
                    goto out;
                }
            } else
                show(ds, de, first_date, sizeof first_date);
            size_t dl =
                (size_t)(de - ds) < sizeof last_date - 1 ? (size_t)(de - ds) : sizeof last_date - 1;
            memcpy(last_date, ds, dl); /* made printable only if it is ever printed */
            last_date[dl] = '\0';
            prev_day = day;
            prev_sec = sec;
        }
        if (count >= TF_MAX_BARS || push(&v, &vcap, count, x)) {
            fprintf(stderr, "tollfree: %s: %s\n", name,
                    count >= TF_MAX_BARS ? "too many bars" : "out of memory");
            goto out;
        }
        count++;
    }
    if (count == 0) {
        fprintf(stderr, "tollfree: %s: empty input (%s)\n", name,
                !started  ? "no header, no rows"
                : skipped ? "every row was bad"
                          : "a header but no rows");
        goto out;
    }
    if (skipped)
        fprintf(stderr,
                "tollfree: %s: skipped %lld bad rows (--skip-bad-rows; the first at line %lld)\n",
                name, (long long)skipped, (long long)first_bad);
    if (dir < 0) {
        reverse(v, count);
        fprintf(stderr,
                "tollfree: %s: column '%s' runs newest first (%s .. %s): the bars were reversed "
                "to oldest first\n",
                name, dname, first_date, show(last_date, last_date + strlen(last_date), t2, 64));
    }
    info->skipped = skipped;
    info->reversed = dir < 0;
    info->date_checked = dcol >= 0 && dates_ok;
    snprintf(info->column, sizeof info->column, "%s", colname);
    snprintf(info->date_column, sizeof info->date_column, "%s", dcol >= 0 ? dname : "");
    *out = v;
    *n = count;
    v = NULL;
    rc = 0;
out:
    free(v);
    free(r.buf);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

int tf_cli_read_series_ex(const char *path, const tf_cli_series_opts *o, double **out, int64_t *n,
                          tf_cli_series_info *info)
{
    tf_cli_series_info dummy;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    int is_stdin = !strcmp(path, "-");
    const char *name = is_stdin ? "<stdin>" : path;
    int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "tollfree: %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* A directory opens fine and fails only at the first read (EISDIR): say what it is. */
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tollfree: %s: is a directory (want a CSV or raw .f64 price file)\n", name);
        if (!is_stdin)
            close(fd);
        return -1;
    }
    int raw =
        o->raw || ends_with(path, ".f64") || ends_with(path, ".bin") || ends_with(path, ".raw");
    int rc = raw ? read_raw_stream(name, fd, o, out, n, info)
                 : read_csv_stream(name, fd, o, out, n, info);
    if (!is_stdin)
        close(fd);
    return rc;
}

int tf_cli_read_series(const char *path, const char *column, int raw, double **out, int64_t *n)
{
    tf_cli_series_opts o = {.column = column, .raw = raw};
    return tf_cli_read_series_ex(path, &o, out, n, NULL);
}

/* A whole decimal integer; 0 on success. */
static int parse_i64(const char *s, int64_t *v)
{
    char *stop;
    errno = 0;
    long long x = strtoll(s, &stop, 10);
    if (errno || stop == s || *stop)
        return -1;
    *v = x;
    return 0;
}

static int grid_range(const char *spec, int64_t **out, int64_t *n)
{
    char tmp[256];
    if (strlen(spec) >= sizeof tmp)
        return -1;
    strcpy(tmp, spec);
    char *a = tmp, *b = strchr(a, ':');
    char *c = b ? strchr(b + 1, ':') : NULL;
    if (!b || !c)
        return -1;
    *b++ = '\0';
    *c++ = '\0';
    int64_t lo, hi, cnt;
    if (parse_i64(a, &lo) || parse_i64(b, &hi) || parse_i64(c, &cnt)) {
        fprintf(stderr, "tollfree: --grid %s: LO:HI:N must be three integers\n", spec);
        return -2;
    }
    if (lo < 1 || hi < lo || hi > TF_MAX_WINDOW || cnt < 1 || cnt > 10000000) {
        fprintf(stderr, "tollfree: --grid %s: need 1 <= LO <= HI <= %lld and 1 <= N <= 10000000\n",
                spec, (long long)TF_MAX_WINDOW);
        return -2;
    }
    int64_t *g = malloc(sizeof(int64_t) * 6 * (size_t)cnt);
    if (!g) {
        fprintf(stderr, "tollfree: --grid %s: out of memory\n", spec);
        return -3;
    }
    for (int64_t j = 0; j < cnt; j++) {
        /* linspace(LO, HI, N).astype(int) for integers; j*(HI-LO) < 2^55 here. */
        int64_t L = cnt == 1 ? lo : lo + j * (hi - lo) / (cnt - 1);
        tf_combo_from_length(L, g + 6 * j);
    }
    *out = g;
    *n = cnt;
    return 0;
}

static int grid_file(const char *path, int64_t **out, int64_t *n)
{
    char *buf;
    size_t len;
    int rc = tf_cli_slurp(path, &buf, &len);
    if (rc) {
        fprintf(stderr, "tollfree: --grid %s: %s (want default, LO:HI:N or a CSV file)\n", path,
                strerror(-rc));
        return -1;
    }
    size_t cap = 64;
    int64_t count = 0, line = 0;
    int64_t *g = malloc(sizeof(int64_t) * 6 * cap);
    char *p = buf, *end = buf + len;
    while (g && p < end) {
        line++;
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end, *next = nl ? nl + 1 : end;
        if (le > p && le[-1] == '\r')
            le--;
        char *fields[8];
        int nf = le > p ? split(p, le, fields, 8) : 0;
        p = next;
        if (nf == 0 || (nf == 1 && !*fields[0]))
            continue;
        int64_t v[6];
        int ok = nf == 6;
        for (int k = 0; ok && k < 6; k++)
            ok = !parse_i64(fields[k], &v[k]);
        if (!ok) {
            if (line == 1 && nf == 6 && !strcmp(fields[0], "L"))
                continue; /* header */
            fprintf(stderr, "tollfree: %s:%lld: a grid row is six integers L,half,sq,p,p3,p2\n",
                    path, (long long)line);
            free(g);
            free(buf);
            return -1;
        }
        if ((size_t)count == cap) {
            int64_t *ng = realloc(g, sizeof(int64_t) * 6 * 2 * cap);
            if (!ng)
                break;
            g = ng;
            cap *= 2;
        }
        memcpy(g + 6 * count++, v, sizeof v);
    }
    int stopped = p < end; /* the loop broke out: realloc failed (compared before buf is freed) */
    free(buf);
    if (!g || stopped) {
        fprintf(stderr, "tollfree: %s: out of memory\n", path);
        free(g);
        return -1;
    }
    if (count == 0) {
        fprintf(stderr, "tollfree: %s: empty grid (no combos)\n", path);
        free(g);
        return -1;
    }
    *out = g;
    *n = count;
    return 0;
}

int tf_cli_parse_fee(const char *cmd, const char *arg, double *fee)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (*end || end == arg || errno || !isfinite(v)) {
        fprintf(stderr, "%s: --fee wants a finite number of percent points, got '%s'\n", cmd, arg);
        return -1;
    }
    *fee = v;
    return 0;
}

int tf_cli_read_grid(const char *spec, int64_t **out, int64_t *n)
{
    if (!strcmp(spec, "default"))
        return grid_range("6:200:80", out, n);
    int rc = grid_range(spec, out, n);
    if (rc == -1 && strchr(spec, ':') && !strchr(spec, '/') && !strchr(spec, '.')) {
        fprintf(stderr, "tollfree: --grid %s: expected LO:HI:N (e.g. 6:200:80)\n", spec);
        return -2;
    }
    if (rc == -1)
        return grid_file(spec, out, n);
    return rc == -3 ? -1 : rc; /* 0; -2: the spec's numbers; -3: no memory for the grid */
}
