/* tollfree: one error enum for the whole library.
 *
 * Fallible functions return int: 0 (or a count) on success, a negative code on failure.
 * OS failures are returned as -errno (always above TF_E_BASE, i.e. > -1000); library codes are
 * the explicit values below, grouped by subsystem, never reused. tf_strerror() describes both.
 * "Need more bytes" and "ring full" are flow control, not errors: they have their own codes so a
 * caller can tell them apart, and no library function ever prints or aborts on input.
 */
#ifndef TOLLFREE_ERROR_H
#define TOLLFREE_ERROR_H

#include "tollfree/api.h"

typedef enum tf_error {
    TF_OK = 0,

    /* -1000..-1099: general */
    TF_E_BASE = -1000,
    TF_E_NULL_ARG = -1001,        /* NULL pointer with a non-zero count */
    TF_E_INVALID_ARG = -1002,     /* an argument outside its documented domain */
    TF_E_NOMEM = -1003,           /* allocation failed */
    TF_E_UNSUPPORTED = -1004,     /* not available on this build or CPU */
    TF_E_LIMIT = -1005,           /* a configured limit would be exceeded */

    /* -1100..-1199: kernel */
    TF_E_WINDOW_TOO_SHORT = -1100, /* a window length < 1 */
    TF_E_WINDOW_TOO_LONG = -1101,  /* a window length > TF_MAX_WINDOW (or TF_STREAM_MAX_WINDOW) */
    TF_E_TOO_MANY_BARS = -1102,    /* n_bars < 0 or > TF_MAX_BARS */
    TF_E_TOO_MANY_COMBOS = -1103,  /* n_combos < 0 or > TF_MAX_COMBOS */
    TF_E_ISA_UNAVAILABLE = -1104,  /* forced ISA path not supported by this CPU */
    TF_E_THREADS = -1105,          /* thread count < 0 or > TF_MAX_THREADS, or a thread failed */

    /* -1200..-1299: engine wire protocol (v1/v2). Values are also the v2 error frame codes. */
    TF_E_WIRE_BASE = -1200,
    TF_E_FRAME_TOO_LARGE = -1201,
    TF_E_FRAME_TOO_SHORT = -1202,
    TF_E_LENGTH_MISMATCH = -1203,
    TF_E_UNKNOWN_OPCODE = -1204,
    TF_E_BAD_HEADER = -1205,
    TF_E_UNKNOWN_DATASET = -1206,
    TF_E_UNKNOWN_SESSION = -1207,
    TF_E_DATASET_LIMIT = -1208,
    TF_E_SESSION_LIMIT = -1209,
    TF_E_TRUNCATED = -1210,
    TF_E_SHUTTING_DOWN = -1211,
    TF_E_BAD_FD = -1212,
    TF_E_PROTOCOL = -1213,

    /* -1300..-1399: shared-memory transport */
    TF_E_SHM_BASE = -1300,

    /* -1400..-1499: OFL1 order-flow codec, journal, datagrams */
    TF_E_OFL_BASE = -1400,
} tf_error;

/* A static, never NULL, human description of any code returned by this library (library codes
 * and -errno alike). Thread-safe. */
TF_API const char *tf_strerror(int code);

#endif
