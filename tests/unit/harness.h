/* A tiny test harness. Every test program ends with the line "N passed, N failed" and exits
 * non-zero when anything failed. CHECK* record a failure and continue. */
#ifndef TF_TEST_HARNESS_H
#define TF_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int tf_test_passed, tf_test_failed;

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
        }                                                                                          \
    } while (0)

/* Raw bits of two buffers. */
#define CHECK_BITS(a, b, nbytes) CHECK(memcmp((a), (b), (nbytes)) == 0)

static inline int tf_test_report(void)
{
    printf("%d passed, %d failed\n", tf_test_passed, tf_test_failed);
    return tf_test_failed ? 1 : 0;
}

#endif
