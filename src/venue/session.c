/* The sessions file of `tollfree engine serve --sessions FILE` (docs/venue.md, "Sessions"):
 *     # comment
 *     NAME SECRET ACCOUNT[,ACCOUNT...]
 * one session a line; names unique (1..64 of [A-Za-z0-9._-]), secrets of 16..256 printable
 * bytes, accounts u64 (1 and up). The file must not be readable or writable by group or others.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "venue/venue.h"

#define LINE_MAX_BYTES 65536
#define FILE_MAX_BYTES (16u << 20)

uint64_t tfv_session_id(const char *name, size_t len)
{
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)name, len, d);
    uint64_t id = 0;
    for (int i = 7; i >= 0; i--)
        id = id << 8 | d[i];
    return id ? id : 1;
}

static int say(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && cap)
        vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return TF_E_BAD_INPUT;
}

static int name_ok(const char *s, size_t n)
{
    if (n < 1 || n > TFV_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* "1,2,3" into s->accounts (sorted, no duplicate). */
static int parse_accounts(const char *path, int line, char *tok, tfv_session *s, char *err,
                          size_t cap)
{
    uint32_t n = 1;
    for (const char *p = tok; *p; p++)
        n += *p == ',';
    if (n > TFV_MAX_ACCOUNTS)
        return say(err, cap, "%s: line %d: more than %d accounts", path, line, TFV_MAX_ACCOUNTS);
    s->accounts = calloc(n, sizeof *s->accounts);
    if (!s->accounts)
        return TF_E_NOMEM;
    char *save = NULL;
    uint32_t k = 0;
    for (char *a = strtok_r(tok, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(a, &end, 10);
        if (*a < '0' || *a > '9' || *end || errno || v == 0)
            return say(err, cap, "%s: line %d: account \"%s\": not a u64 from 1", path, line, a);
        s->accounts[k++] = v;
    }
    if (k != n)
        return say(err, cap, "%s: line %d: an empty account in \"%s\"", path, line, tok);
    qsort(s->accounts, k, sizeof *s->accounts, cmp_u64);
    for (uint32_t i = 1; i < k; i++)
        if (s->accounts[i] == s->accounts[i - 1])
            return say(err, cap, "%s: line %d: account %llu twice", path, line,
                       (unsigned long long)s->accounts[i]);
    s->n_accounts = k;
    return 0;
}

static int parse_line(const char *path, int line, char *text, tfv_sessions *out, char *err,
                      size_t cap)
{
    char *save = NULL, *f[4];
    int nf = 0;
    for (char *t = strtok_r(text, " \t\r", &save); t && nf < 4; t = strtok_r(NULL, " \t\r", &save))
        f[nf++] = t;
    if (nf != 3)
        return say(err, cap, "%s: line %d: expected NAME SECRET ACCOUNT[,ACCOUNT...] (%d fields)",
                   path, line, nf);
    size_t nl = strlen(f[0]), sl = strlen(f[1]);
    if (!name_ok(f[0], nl))
        return say(err, cap, "%s: line %d: session name \"%.80s\": 1 to %d of A-Z a-z 0-9 . _ -",
                   path, line, f[0], TFV_NAME_MAX);
    if (sl < TFV_SECRET_MIN || sl > TFV_SECRET_MAX)
        return say(err, cap, "%s: line %d: session %s: the secret has %zu characters, not %d to %d",
                   path, line, f[0], sl, TFV_SECRET_MIN, TFV_SECRET_MAX);
    if (tfv_sessions_find(out, f[0], nl))
        return say(err, cap, "%s: line %d: session %s named twice (first on line %d)", path, line,
                   f[0], tfv_sessions_find(out, f[0], nl)->line);
    tfv_session *s = &out->v[out->n];
    memset(s, 0, sizeof *s);
    memcpy(s->name, f[0], nl);
    memcpy(s->secret, f[1], sl);
    s->secret_len = sl;
    s->id = tfv_session_id(f[0], nl);
    s->line = line;
    out->n++; /* freed with the others even when the accounts fail */
    for (uint32_t i = 0; i + 1 < out->n; i++)
        if (out->v[i].id == s->id)
            return say(err, cap, "%s: line %d: session %s has the same id as %s (line %d)", path,
                       line, f[0], out->v[i].name, out->v[i].line);
    return parse_accounts(path, line, f[2], s, err, cap);
}

static int read_file(const char *path, char **text, size_t *len, char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, cap, "%s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > FILE_MAX_BYTES) {
        close(fd);
        return say(err, cap, "%s: not a regular file of at most %u bytes", path, FILE_MAX_BYTES);
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        close(fd);
        snprintf(err, cap,
                 "%s: mode %04o lets group or others read or write the session secrets: run "
                 "`chmod 600 %s`",
                 path, (unsigned)(st.st_mode & 07777), path);
        return -EPERM;
    }
    char *b = malloc((size_t)st.st_size + 1);
    ssize_t got = b ? read(fd, b, (size_t)st.st_size) : -1;
    close(fd);
    if (got != st.st_size) {
        free(b);
        snprintf(err, cap, "%s: cannot read it", path);
        return b ? -EIO : TF_E_NOMEM;
    }
    b[got] = 0;
    *text = b;
    *len = (size_t)got;
    return 0;
}

int tfv_sessions_load(const char *path, tfv_sessions *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len, err, cap);
    if (rc)
        return rc;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    out->v = calloc(lines, sizeof *out->v);
    if (!out->v) {
        free(text);
        return TF_E_NOMEM;
    }
    int line = 0;
    char *p = text;
    while (!rc && p < text + len) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        char *end = nl ? nl : text + len;
        *end = 0;
        line++;
        if (memchr(p, 0, (size_t)(end - p)) || end - p > LINE_MAX_BYTES)
            rc = say(err, cap, "%s: line %d: a NUL byte or a line over %d bytes", path, line,
                     LINE_MAX_BYTES);
        char *q = p + strspn(p, " \t\r");
        if (!rc && *q && *q != '#')
            rc = parse_line(path, line, q, out, err, cap);
        p = end + 1;
    }
    free(text);
    if (!rc && out->n == 0)
        rc = say(err, cap, "%s: no session in it", path);
    if (rc)
        tfv_sessions_free(out);
    return rc;
}

void tfv_sessions_free(tfv_sessions *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n; i++) {
        free(s->v[i].accounts);
        memset(s->v[i].secret, 0, sizeof s->v[i].secret);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

const tfv_session *tfv_sessions_find(const tfv_sessions *s, const char *name, size_t len)
{
    for (uint32_t i = 0; s && i < s->n; i++)
        if (strlen(s->v[i].name) == len && !memcmp(s->v[i].name, name, len))
            return &s->v[i];
    return NULL;
}

int tfv_session_holds(const tfv_session *s, uint64_t account)
{
    uint32_t lo = 0, hi = s->n_accounts;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->accounts[mid] == account)
            return 1;
        if (s->accounts[mid] < account)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}
