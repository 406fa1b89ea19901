/* The message buffer rule of the library's refusals (research.h, prices.h, paper.h): a call that
 * refuses writes one line saying what, where and what to do into the caller's msg[cap], and
 * returns its code. The library never prints. */
#ifndef TF_COMMON_MSG_H
#define TF_COMMON_MSG_H

#include <stddef.h>

/* Writes one printf-style line into msg[cap] (truncated to fit; nothing when msg is NULL or cap
 * is 0) and returns rc, so that a refusal is `return tfu_msg(rc, msg, cap, ...)`. */
int tfu_msg(int rc, char *msg, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
