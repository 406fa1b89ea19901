/* A tiny test harness. Every test program ends with the line "N passed, N failed" and exits
 * non-zero when anything failed. CHECK* record a failure and continue. */
#ifndef TF_TEST_HARNESS_H
#define TF_TEST_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tf_test_passed, tf_test_failed;

/* Random test data that is the same on every machine (no library RNG): xorshift64 on *s, a
 * uniform double in [0, 1) with 53 bits. */
static inline double tf_test_uniform(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* A geometric random walk from 100: each bar moves by a factor 1 + step * (u - 0.5). */
static inline void tf_test_random_walk(double *close, int64_t n, double step, uint64_t *s)
{
    double x = 100.0;
    for (int64_t i = 0; i < n; i++) {
        x *= 1.0 + step * (tf_test_uniform(s) - 0.5);
        close[i] = x;
    }
}

/* The same raw bits (NaN payloads and the sign of zero included). */
static inline int tf_test_same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The committed default data set ($TF_SOURCE_DIR/data/default_close.f64, else ./data/):
 * TF_TEST_DEFAULT_BARS closes in a malloc'd array, or NULL after a line on stderr. */
#define TF_TEST_DEFAULT_BARS 150000
static inline double *tf_test_default_close(void)
{
    const char *src = getenv("TF_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/default_close.f64", src ? src : ".");
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    double *c = malloc(sizeof(double) * TF_TEST_DEFAULT_BARS);
    size_t got = c ? fread(c, sizeof(double), TF_TEST_DEFAULT_BARS, f) : 0;
    fclose(f);
    if (got != TF_TEST_DEFAULT_BARS) {
        fprintf(stderr, "%s: want %d closes\n", path, TF_TEST_DEFAULT_BARS);
        free(c);
        return NULL;
    }
    return c;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            tf_test_passed++;                                                                      \
        } else {                                                                                   \
            tf_test_failed++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long tf_a_ = (long long)(a), tf_b_ = (long long)(b);                                  \
        if (tf_a_ == tf_b_) {                                                                      \
            tf_test_passed++;                                                                      \
        } else {                                                                                   \
            tf_test_failed++;                                                                      \
            fprintf(stderr, "%s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, __LINE__,  \
                    #a, #b, tf_a_, tf_b_);                                                         \
        }                                                                                          \
    } while (0)

/* A return code: prints tf_strerror text of both sides on failure. */
#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int tf_rc_ = (int)(expr), tf_want_ = (int)(want);                                          \
        if (tf_rc_ == tf_want_) {                                                                  \
            tf_test_passed++;                                                                      \
        } else {                                                                                   \
            tf_test_failed++;                                                                      \
            fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %d (%s)\n", __FILE__, __LINE__,    \
                    #expr, tf_rc_, tf_strerror(tf_rc_), tf_want_, tf_strerror(tf_want_));          \
            if (tf_rc_ == -ETIMEDOUT)                                                              \
                tf_test_deadline_note("(a wait)", tf_test_deadline_ms());                          \
        }                                                                                          \
    } while (0)

/* Raw bits of two buffers. */
#define CHECK_BITS(a, b, nbytes) CHECK(memcmp((a), (b), (nbytes)) == 0)

/* The one deadline every wait in the tests uses. It guards against hangs only, never measures
 * speed: 120 s, generous for an unoptimized ASan build on a loaded 2-vCPU machine, times
 * TF_TEST_DEADLINE_SCALE (default 1). A wait that runs out says so with tf_test_deadline_note. */
static inline int tf_test_deadline_ms(void)
{
    const char *v = getenv("TF_TEST_DEADLINE_SCALE");
    double scale = v && *v ? strtod(v, NULL) : 1.0;
    if (!(scale > 0.01))
        scale = 1.0;
    if (scale > 10000.0)
        scale = 10000.0;
    return (int)(120000.0 * scale);
}
#define T_DEADLINE_MS tf_test_deadline_ms()

static inline void tf_test_deadline_note(const char *what, int timeout_ms)
{
    fprintf(stderr, "%s: deadline exceeded after %d s\n", what, (timeout_ms + 999) / 1000);
}

/* Opens tests/vectors/NAME of the source tree ($TF_SOURCE_DIR, set by ctest; else the working
 * directory), recording a failure when it cannot. */
static inline FILE *tf_test_open_vectors(const char *name)
{
    char path[1024];
    const char *src = getenv("TF_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/vectors/%s", src ? src : ".", name);
    FILE *f = fopen(path, "r");
    if (!f)
        fprintf(stderr, "cannot open %s\n", path);
    CHECK(f != NULL);
    return f;
}

static inline int tf_test_report(void)
{
    printf("%d passed, %d failed\n", tf_test_passed, tf_test_failed);
    return tf_test_failed ? 1 : 0;
}

#endif
