/* Counts every malloc/calloc/realloc/free in the process while tf_alloc_on is set: the program
 * that includes this header (in exactly one translation unit) defines the four functions itself
 * and forwards to glibc's __libc_* versions, so the library's allocations and libc's own pass
 * through the counters. Under AddressSanitizer the allocator belongs to ASan and cannot be
 * interposed: TF_ALLOC_COUNTING is then 0 and the counters stay at zero. */
#ifndef TF_ALLOC_COUNT_H
#define TF_ALLOC_COUNT_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define TF_ALLOC_COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TF_ALLOC_COUNTING 0
#endif
#endif
#ifndef TF_ALLOC_COUNTING
#define TF_ALLOC_COUNTING 1
#endif

static volatile int tf_alloc_on;
static volatile long tf_alloc_calls, tf_free_calls;

#if TF_ALLOC_COUNTING
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

void *malloc(size_t n)
{
    if (tf_alloc_on)
        tf_alloc_calls++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    if (tf_alloc_on)
        tf_alloc_calls++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    if (tf_alloc_on)
        tf_alloc_calls++;
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (tf_alloc_on && p)
        tf_free_calls++;
    __libc_free(p);
}
#endif

#endif
