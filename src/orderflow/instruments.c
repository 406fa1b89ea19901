/* The instrument list stored beside a command journal (journal.h, "the instruments of a command
 * journal"): a small text file, CRC32C-protected, replaced atomically. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orderflow/fio.h"
#include "tollfree/error.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

#define MAGIC_LINE "tollfree-instruments 1\n"
/* The longest file: the magic, the session line, every id apart (20 digits and a comma each),
 * the CRC line. A larger file is not one of ours. */
#define MAX_FILE (64u + 32u + 16u + 21u * TF_JOURNAL_INSTRUMENTS_MAX)

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int tf_journal_instruments_format(const uint64_t *ids, uint32_t n, char *buf, size_t cap)
{
    if (!buf || (!ids && n))
        return TF_E_NULL_ARG;
    size_t len = 0;
    if (cap)
        buf[0] = '\0';
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        while (j + 1 < n && ids[j + 1] == ids[j] + 1)
            j++;
        char item[48];
        int k = j == i       ? snprintf(item, sizeof item, "%" PRIu64, ids[i])
                : j == i + 1 ? snprintf(item, sizeof item, "%" PRIu64 ",%" PRIu64, ids[i], ids[j])
                             : snprintf(item, sizeof item, "%" PRIu64 "-%" PRIu64, ids[i], ids[j]);
        size_t need = (size_t)k + (len ? 1 : 0);
        if (len + need + 1 > cap)
            return TF_E_LIMIT;
        if (len)
            buf[len++] = ',';
        memcpy(buf + len, item, (size_t)k + 1);
        len += (size_t)k;
        i = j + 1;
    }
    return (int)len;
}

int tf_journal_instruments_save(const char *journal_path, uint64_t session_id, const uint64_t *ids,
                                uint32_t n)
{
    if (!journal_path || !ids)
        return TF_E_NULL_ARG;
    if (n == 0 || n > TF_JOURNAL_INSTRUMENTS_MAX)
        return TF_E_INVALID_ARG;
    char path[4096];
    if (snprintf(path, sizeof path, "%s%s", journal_path, TF_JOURNAL_INSTRUMENTS_SUFFIX) >=
        (int)sizeof path)
        return -ENAMETOOLONG;
    uint64_t *sorted = malloc((size_t)n * sizeof *sorted);
    char *text = malloc(MAX_FILE);
    int rc = 0;
    if (!sorted || !text) {
        rc = TF_E_NOMEM;
        goto out;
    }
    memcpy(sorted, ids, (size_t)n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_u64);
    for (uint32_t i = 0; i < n; i++)
        if (sorted[i] == 0 || (i && sorted[i] == sorted[i - 1])) {
            rc = TF_E_INVALID_ARG;
            goto out;
        }
    int len =
        snprintf(text, MAX_FILE, MAGIC_LINE "session_id %" PRIu64 "\ninstruments ", session_id);
    int k = tf_journal_instruments_format(sorted, n, text + len, MAX_FILE - (size_t)len - 32);
    if (k < 0) {
        rc = k;
        goto out;
    }
    len += k;
    text[len++] = '\n';
    len += snprintf(text + len, 32, "crc32c %08" PRIx32 "\n", tf_crc32c(0, text, (size_t)len));
    rc = tfo_replace_file(path, text, (size_t)len);
out:
    free(sorted);
    free(text);
    return rc;
}

/* A decimal u64 at *p (no sign, no leading spaces); advances *p. 0 or -1. */
static int take_u64(const char **p, uint64_t *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return 0;
}

/* The text after "instruments ": ascending ids and ranges, up to the newline, which must be at
 * `end`. */
static int parse_list(const char *s, const char *end, uint64_t *ids, uint32_t cap, uint32_t *n)
{
    uint32_t k = 0;
    uint64_t last = 0;
    for (;;) {
        uint64_t a, b;
        if (take_u64(&s, &a))
            return TF_E_BAD_INPUT;
        b = a;
        if (*s == '-') {
            s++;
            if (take_u64(&s, &b) || b <= a)
                return TF_E_BAD_INPUT;
        }
        if (a == 0 || a <= last)
            return TF_E_BAD_INPUT;
        if (b - a >= TF_JOURNAL_INSTRUMENTS_MAX || k + (b - a) + 1 > TF_JOURNAL_INSTRUMENTS_MAX)
            return TF_E_BAD_INPUT;
        if (k + (b - a) + 1 > cap)
            return TF_E_LIMIT;
        for (uint64_t v = a;; v++) {
            ids[k++] = v;
            if (v == b)
                break;
        }
        last = b;
        if (*s == '\n' && s == end)
            break;
        if (*s++ != ',')
            return TF_E_BAD_INPUT;
    }
    *n = k;
    return 0;
}

int tf_journal_instruments_load(const char *journal_path, uint64_t *session_id, uint64_t *ids,
                                uint32_t cap, uint32_t *n)
{
    if (!journal_path || (!ids && cap))
        return TF_E_NULL_ARG;
    char path[4096];
    if (snprintf(path, sizeof path, "%s%s", journal_path, TF_JOURNAL_INSTRUMENTS_SUFFIX) >=
        (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char *text = malloc(MAX_FILE + 1);
    if (!text) {
        close(fd);
        return TF_E_NOMEM;
    }
    size_t len = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, text + len, MAX_FILE + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len > MAX_FILE) {
            rc = TF_E_BAD_INPUT;
            break;
        }
    }
    close(fd);
    if (!rc) {
        text[len] = '\0';
        rc = TF_E_BAD_INPUT;
        /* The CRC line is the last; it covers every byte before it. */
        char *crc_line = len > 1 ? text + len - 1 : NULL;
        while (crc_line && crc_line > text && crc_line[-1] != '\n')
            crc_line--;
        int crc_ok = crc_line && text[len - 1] == '\n' && !strncmp(crc_line, "crc32c ", 7) &&
                     strlen(crc_line) == 16;
        uint32_t crc = 0;
        for (int i = 0; crc_ok && i < 8; i++) {
            char h = crc_line[7 + i];
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
            crc_ok = d >= 0;
            crc = crc << 4 | (uint32_t)(d & 15);
        }
        crc_ok = crc_ok && crc == tf_crc32c(0, text, (size_t)(crc_line - text));
        uint64_t session;
        uint32_t count = 0;
        const char *p = text + strlen(MAGIC_LINE);
        if (crc_ok && !strncmp(text, MAGIC_LINE, strlen(MAGIC_LINE)) &&
            !strncmp(p, "session_id ", 11)) {
            p += 11;
            if (!take_u64(&p, &session) && !strncmp(p, "\ninstruments ", 13) && p + 13 < crc_line) {
                rc = parse_list(p + 13, crc_line - 1, ids, cap, &count);
                if (!rc && session_id)
                    *session_id = session;
                if (!rc && n)
                    *n = count;
            }
        }
    }
    free(text);
    return rc;
}
