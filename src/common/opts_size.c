/* The size rule of the growable public option structs (opts_size.h). */
#include "common/opts_size.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/error.h"

int tfu_opts_load_n(void *dst, size_t known, const void *src, size_t size, size_t min)
{
    if (size == 0)
        size = known;
    if (size < min)
        return TF_E_INVALID_ARG;
    const unsigned char *in = src;
    for (size_t k = known; k < size; k++)
        if (in[k])
            return TF_E_INVALID_ARG;
    size_t n = size < known ? size : known;
    memcpy(dst, src, n);
    memset((unsigned char *)dst + n, 0, known - n);
    return 0;
}

int tfu_opts_load(void *dst, size_t known, const void *src, size_t min)
{
    size_t size;
    memcpy(&size, src, sizeof size);
    int rc = tfu_opts_load_n(dst, known, src, size, min);
    if (!rc)
        memcpy(dst, &known, sizeof known);
    return rc;
}

/* "1048576 bytes" or "1M (1048576 bytes)": a bound as a reader would write it. */
static void say_bytes(char *buf, size_t cap, uint64_t v, int sized)
{
    static const char sfx[] = "KMG";
    int k = -1;
    for (int i = 2; sized && i >= 0 && k < 0; i--)
        if (v && v % ((uint64_t)1 << (10 * (i + 1))) == 0)
            k = i;
    if (k >= 0)
        snprintf(buf, cap, "%llu%c (%llu bytes)", (unsigned long long)(v >> (10 * (k + 1))), sfx[k],
                 (unsigned long long)v);
    else
        snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* Digits and, when sized, a suffix. 0, or -1 (not a number of that form), -2 (too large). */
static int read_value(const char *val, int sized, uint64_t *out)
{
    if (!val || !(val[0] >= '0' && val[0] <= '9'))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno == ERANGE)
        return -2;
    int shift = 0;
    if (sized && *end) {
        const char *u = strchr("kKmMgG", *end);
        if (!u)
            return -1;
        shift = 10 * (int)(1 + (u - "kKmMgG") / 2);
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B"))
            end += strlen(end);
    }
    if (*end)
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -2;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_limit(const char *opt, const char *val, uint64_t lo, uint64_t hi, int sized,
                       uint64_t *out, char *msg, size_t cap)
{
    uint64_t v = 0;
    int r = read_value(val, sized, &v);
    char b[64];
    if (r == -1) {
        snprintf(msg, cap, "%s %s: not %s", opt, val ? val : "(missing)",
                 sized ? "a size (digits with an optional K, M or G suffix, e.g. 64M)"
                       : "a whole number (digits only)");
        return TF_E_INVALID_ARG;
    }
    if (r == -2 || v > hi) {
        say_bytes(b, sizeof b, hi, sized);
        snprintf(msg, cap, "%s %s: give at most %s", opt, val, b);
        return TF_E_INVALID_ARG;
    }
    if (v < lo) {
        say_bytes(b, sizeof b, lo, sized);
        snprintf(msg, cap, "%s %s: give at least %s", opt, val, b);
        return TF_E_INVALID_ARG;
    }
    *out = v;
    return 0;
}

int tfu_parse_size(const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
                   char *msg, size_t cap)
{
    return parse_limit(opt, val, lo, hi, 1, out, msg, cap);
}

int tfu_parse_count(const char *opt, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
                    char *msg, size_t cap)
{
    return parse_limit(opt, val, lo, hi, 0, out, msg, cap);
}

int tfu_limit_take(const tfu_limit_opt *t, size_t n, const char *opt, const char *val, char *msg,
                   size_t cap)
{
    for (size_t k = 0; k < n; k++) {
        if (strcmp(opt, t[k].name))
            continue;
        uint64_t v;
        int rc = t[k].sized ? tfu_parse_size(opt, val, t[k].lo, t[k].hi, &v, msg, cap)
                            : tfu_parse_count(opt, val, t[k].lo, t[k].hi, &v, msg, cap);
        if (rc)
            return -1;
        if (t[k].u)
            *t[k].u = v;
        else if (t[k].u32)
            *t[k].u32 = (uint32_t)v;
        else
            *t[k].i = t[k].zero_is_none && v == 0 ? -1 : (int)v;
        return 1;
    }
    return 0;
}
