/* Reading close series (CSV or raw f64) and parameter grids for the CLI. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tollfree/kernel.h"

int tf_cli_slurp(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
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

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
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

static int read_raw(const char *path, const char *buf, size_t len, double **out, int64_t *n)
{
    if (len == 0) {
        fprintf(stderr, "tollfree: %s: empty input (no bars)\n", path);
        return -1;
    }
    if (len % 8) {
        fprintf(stderr, "tollfree: %s: raw f64 input must be a multiple of 8 bytes, got %zu\n",
                path, len);
        return -1;
    }
    if ((int64_t)(len / 8) > TF_MAX_BARS) {
        fprintf(stderr, "tollfree: %s: more than %lld bars\n", path, (long long)TF_MAX_BARS);
        return -1;
    }
    *out = malloc(len);
    if (!*out) {
        fprintf(stderr, "tollfree: %s: out of memory\n", path);
        return -1;
    }
    memcpy(*out, buf, len); /* x86-64 is little-endian: the bytes are the values */
    *n = (int64_t)(len / 8);
    return 0;
}

#define MAX_FIELDS 1024

static int read_csv(const char *path, const char *column, char *buf, size_t len, double **out,
                    int64_t *n)
{
    char *fields[MAX_FIELDS];
    char *p = buf, *end = buf + len;
    char *nl = memchr(p, '\n', len);
    char *le = nl ? nl : end;
    if (le > p && le[-1] == '\r')
        le--;
    int nf = split(p, le, fields, MAX_FIELDS);
    int col = -1;
    for (int i = 0; i < nf; i++)
        if (!strcmp(fields[i], column))
            col = i;
    if (col < 0) {
        fprintf(stderr, "tollfree: %s: no column '%s' in the header line (use --column NAME)\n",
                path, column);
        return -1;
    }
    size_t cap = 1024;
    int64_t count = 0, line = 1;
    double *v = malloc(cap * sizeof(double));
    p = nl ? nl + 1 : end;
    while (v && p < end) {
        line++;
        nl = memchr(p, '\n', (size_t)(end - p));
        le = nl ? nl : end;
        char *next = nl ? nl + 1 : end;
        if (le > p && le[-1] == '\r')
            le--;
        if (le == p) { /* blank line */
            p = next;
            continue;
        }
        nf = split(p, le, fields, MAX_FIELDS);
        if (col >= nf || !*fields[col]) {
            fprintf(stderr, "tollfree: %s:%lld: empty cell in column '%s'\n", path, (long long)line,
                    column);
            free(v);
            return -1;
        }
        char *stop;
        errno = 0;
        double x = strtod(fields[col], &stop);
        if (*stop || stop == fields[col]) {
            fprintf(stderr, "tollfree: %s:%lld: not a number in column '%s': '%s'\n", path,
                    (long long)line, column, fields[col]);
            free(v);
            return -1;
        }
        if ((size_t)count == cap) {
            double *nv = realloc(v, 2 * cap * sizeof(double));
            if (!nv)
                break;
            v = nv;
            cap *= 2;
        }
        v[count++] = x;
        p = next;
    }
    if (!v || p < end) {
        fprintf(stderr, "tollfree: %s: out of memory\n", path);
        free(v);
        return -1;
    }
    if (count == 0) {
        fprintf(stderr, "tollfree: %s: empty input (a header but no rows)\n", path);
        free(v);
        return -1;
    }
    *out = v;
    *n = count;
    return 0;
}

int tf_cli_read_series(const char *path, const char *column, int raw, double **out, int64_t *n)
{
    char *buf;
    size_t len;
    int rc = tf_cli_slurp(path, &buf, &len);
    if (rc) {
        fprintf(stderr, "tollfree: %s: %s\n", path, strerror(-rc));
        return -1;
    }
    if (raw || ends_with(path, ".f64") || ends_with(path, ".bin") || ends_with(path, ".raw"))
        rc = read_raw(path, buf, len, out, n);
    else if (len == 0) {
        fprintf(stderr, "tollfree: %s: empty input (no header, no rows)\n", path);
        rc = -1;
    } else
        rc = read_csv(path, column, buf, len, out, n);
    free(buf);
    return rc;
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
        return -2;
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
    free(buf);
    if (!g || p < end) {
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

int tf_cli_read_grid(const char *spec, int64_t **out, int64_t *n)
{
    if (!strcmp(spec, "default"))
        return grid_range("6:200:80", out, n);
    int rc = grid_range(spec, out, n);
    if (rc == -1 && strchr(spec, ':') && !strchr(spec, '/') && !strchr(spec, '.')) {
        fprintf(stderr, "tollfree: --grid %s: expected LO:HI:N (e.g. 6:200:80)\n", spec);
        return -1;
    }
    if (rc == -1)
        return grid_file(spec, out, n);
    return rc == 0 ? 0 : -1;
}
