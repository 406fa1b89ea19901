/* Reading close series (a shell over tollfree/prices.h) and parameter grids for the CLI. */
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
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/prices.h"
#include "tollfree/research.h"

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

/* ---- Close series: a shell over the library's reader (tollfree/prices.h) ---- */

const char tf_cli_series_help[] =
    "  --column NAME     the close column: a header name, any case (default: close; e.g.\n"
    "                    'Adj Close'), or its 1-based number (a file without a header line)\n"
    "  --date-column NAME  the date column (default: one named date, datetime, time,\n"
    "                    timestamp, ..., else the first whose cells are dates, such as the\n"
    "                    unnamed index column pandas writes); a name, \"\" for the unnamed\n"
    "                    column, a 1-based number, or 'none'. Dates in any common form\n"
    "                    (2024-01-02[ 09:30[:00]], 20240102, 01/02/2024, 02.01.2024,\n"
    "                    02-Jan-2024, Jan 02 2024, epoch numbers) are checked: newest first is\n"
    "                    reversed (said on stderr), out of order or unreadable is an error\n"
    "  --assume-sorted   the rows are oldest first: read the dates as text, unchecked\n"
    "  --sep C           the separator: ',' ';' or 'tab' (default: found from the first line)\n"
    "  --skip-bad-rows   skip rows whose close or date is bad, or that are short, and count\n"
    "                    them on stderr (default: stop at the first, with line and column)\n"
    "  --raw             read FILE as raw little-endian f64 whatever its name\n";

int tf_cli_series_option(int c, const char *arg, tf_cli_series_opts *o)
{
    switch (c) {
    case TF_CLI_OPT_COLUMN:
        o->column = arg;
        return 0;
    case TF_CLI_OPT_DATE_COLUMN:
        o->date_column = arg;
        return 0;
    case TF_CLI_OPT_RAW:
        o->raw = 1;
        return 0;
    case TF_CLI_OPT_SKIP_BAD_ROWS:
        o->skip_bad_rows = 1;
        return 0;
    case TF_CLI_OPT_ASSUME_SORTED:
        o->assume_sorted = 1;
        return 0;
    case TF_CLI_OPT_SEP:
        if (!strcmp(arg, ",") || !strcmp(arg, "comma"))
            o->sep = ',';
        else if (!strcmp(arg, ";") || !strcmp(arg, "semicolon"))
            o->sep = ';';
        else if (!strcmp(arg, "\t") || !strcmp(arg, "\\t") || !strcmp(arg, "tab"))
            o->sep = '\t';
        else {
            fprintf(stderr, "tollfree: --sep wants ',', ';' or tab ('\\t' or tab), got '%s'\n",
                    arg);
            return 2;
        }
        return 0;
    default:
        return 1;
    }
}

/* Each note on its own "tollfree: " line. */
static void print_notes(const char *notes)
{
    while (notes && *notes) {
        const char *nl = strchr(notes, '\n');
        int len = nl ? (int)(nl - notes) : (int)strlen(notes);
        fprintf(stderr, "tollfree: %.*s\n", len, notes);
        notes += len + (nl != NULL);
    }
}

/* The date cells of p's n bars copied into info (none without a date column). 0, or -1 when
 * out of memory. */
static int keep_dates(const tf_prices *p, int64_t n, tf_cli_series_info *info)
{
    const int64_t *off, *times = tf_prices_times(p);
    const char *text = tf_prices_dates(p, &off);
    if (!text)
        return 0;
    info->date_off = malloc(sizeof(int64_t) * (size_t)(n + 1));
    info->dates = malloc((size_t)off[n] + 1);
    info->times = times ? malloc(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    if (!info->date_off || !info->dates || (times && !info->times)) {
        free(info->date_off);
        free(info->dates);
        free(info->times);
        info->dates = NULL;
        info->date_off = info->times = NULL;
        return -1;
    }
    memcpy(info->date_off, off, sizeof(int64_t) * (size_t)(n + 1));
    memcpy(info->dates, text, (size_t)off[n]);
    info->dates[off[n]] = '\0';
    if (times)
        memcpy(info->times, times, sizeof(int64_t) * (size_t)n);
    return 0;
}

int tf_cli_read_series_ex(const char *path, const tf_cli_series_opts *o, double **out, int64_t *n,
                          tf_cli_series_info *info)
{
    tf_cli_series_info dummy;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    tf_prices_opts po = {.size = sizeof po,
                         .column = o->column,
                         .date_column = o->date_column,
                         .raw = o->raw,
                         .skip_bad_rows = o->skip_bad_rows,
                         .sep = (unsigned char)o->sep,
                         .assume_sorted = o->assume_sorted,
                         .keep_dates = o->keep_dates};
    tf_prices *p;
    char msg[2048];
    int rc = tf_prices_read_path(&p, path, &po, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "tollfree: %s\n", msg[0] ? msg : tf_strerror(rc));
        return -1;
    }
    print_notes(tf_prices_text(p, TF_PRICES_NOTES));
    int64_t v = 0;
    tf_prices_get(p, TF_PRICES_SKIPPED, &info->skipped);
    tf_prices_get(p, TF_PRICES_REVERSED, &v);
    info->reversed = (int)v;
    tf_prices_get(p, TF_PRICES_DATE_CHECKED, &v);
    info->date_checked = (int)v;
    snprintf(info->column, sizeof info->column, "%s", tf_prices_text(p, TF_PRICES_COLUMN));
    snprintf(info->date_column, sizeof info->date_column, "%s",
             tf_prices_text(p, TF_PRICES_DATE_COLUMN));
    *out = tf_prices_take(p, n);
    if (keep_dates(p, *n, info)) {
        fprintf(stderr, "tollfree: %s: out of memory\n", path);
        free(*out);
        tf_prices_free(p);
        return -1;
    }
    tf_prices_free(p);
    return 0;
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
    char msg[256];
    if (tf_fee_parse(arg, fee, msg, sizeof msg)) {
        fprintf(stderr, "%s: --fee %s\n", cmd, msg);
        return -1;
    }
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
