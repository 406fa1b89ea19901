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
    TF_E_NULL_ARG = -1001,    /* NULL pointer with a non-zero count */
    TF_E_INVALID_ARG = -1002, /* an argument outside its documented domain */
    TF_E_NOMEM = -1003,       /* allocation failed */
    TF_E_UNSUPPORTED = -1004, /* not available on this build or CPU */
    TF_E_LIMIT = -1005,       /* a configured limit would be exceeded */
    TF_E_BAD_INPUT = -1006,   /* input data refused (price file, series): the call's message
                                 names what and where */

    /* -1100..-1199: kernel */
    TF_E_WINDOW_TOO_SHORT = -1100, /* a window length < 1 */
    TF_E_WINDOW_TOO_LONG = -1101,  /* a window length > TF_MAX_WINDOW (or TF_STREAM_MAX_WINDOW) */
    TF_E_TOO_MANY_BARS = -1102,    /* n_bars < 0 or > TF_MAX_BARS */
    TF_E_TOO_MANY_COMBOS = -1103,  /* n_combos < 0 or > TF_MAX_COMBOS */
    TF_E_ISA_UNAVAILABLE = -1104,  /* forced ISA path not supported by this CPU */
    TF_E_THREADS = -1105,          /* thread count < 0 or > TF_MAX_THREADS, or a thread failed */
    TF_E_CANCELLED = -1106,        /* the sweep was cancelled through its tf_progress */
    TF_E_STRATEGY = -1107,         /* a strategy, a plugin or a combo's parameters were refused
                                      (the call's message says which and why) */

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
    TF_E_SHM_HANDSHAKE = -1301, /* bad handshake: magic, version, sizes, or control page */
    TF_E_SHM_PEER_GONE = -1302, /* the peer closed its side or died */
    TF_E_SHM_CORRUPT = -1303,   /* a peer-written position, length or wrap marker is invalid */
    TF_E_SHM_TOO_BIG = -1304,   /* a frame does not fit in the ring */
    TF_E_SHM_LIMIT = -1305,     /* the server serves its maximum of shared-memory connections */

    /* -1400..-1499: OFL1 order-flow codec, journal, datagrams */
    TF_E_OFL_BASE = -1400,
    TF_E_OFL_HEADER_TOO_SHORT = -1401,           /* fewer bytes than the envelope header */
    TF_E_OFL_FRAME_LENGTH_TOO_SMALL = -1402,     /* stream frame_len < 9 */
    TF_E_OFL_PAYLOAD_TOO_SHORT = -1403,          /* fewer bytes than frame_len says (need more) */
    TF_E_OFL_UNKNOWN_KIND = -1404,               /* kind byte outside the closed set */
    TF_E_OFL_RESERVED_KIND = -1405,              /* kind 0x06, 0x40 or 0xA0 */
    TF_E_OFL_PAYLOAD_LENGTH = -1406,             /* payload length differs from the kind's size */
    TF_E_OFL_INVALID_SIDE = -1407,               /* side byte not 0 (Buy) or 1 (Sell) */
    TF_E_OFL_INVALID_REASON = -1408,             /* Rejected.reason outside the closed set */
    TF_E_OFL_PAYLOAD_TOO_LARGE = -1409,          /* encode: 9 + payload > 65535 */
    TF_E_OFL_BUFFER_TOO_SHORT = -1410,           /* caller's buffer smaller than needed */
    TF_E_OFL_FRAME_TOO_LARGE = -1411,            /* stream frame over the 128-byte v1 cap */
    TF_E_OFL_DATAGRAM_TOO_LARGE = -1412,         /* datagram over the 512-byte v1 cap */
    TF_E_OFL_WRONG_MAGIC = -1413,                /* journal header magic is not "OFL1" */
    TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION = -1414, /* journal header schema_version != 1 */
    TF_E_OFL_UNSUPPORTED_CLOCK_KIND = -1415,     /* journal header clock_kind not 0 or 1 */
    TF_E_OFL_INVALID_ORDER_TYPE = -1416,         /* AcceptedEx type, tif or flags out of range */
    TF_E_OFL_TORN_RECORD = -1420,                /* journal ends inside a record (torn tail) */
    TF_E_OFL_CRC_MISMATCH = -1421,               /* journal record CRC32C does not match */
    TF_E_OFL_SEQ_GAP = -1422,                    /* journal_seq not the next contiguous value */
    TF_E_OFL_SESSION_MISMATCH = -1423,           /* reopened journal has another session id */
    TF_E_OFL_JOURNAL_FAILED = -1424,             /* an earlier write/fdatasync failed: closed */
    TF_E_OFL_HEADER_DAMAGED = -1425,             /* journal header CRC32C or its tag is wrong */

    /* -1500..-1599: order engine */
    TF_E_ENGINE_BASE = -1500,
    TF_E_ENGINE_SNAPSHOT = -1501, /* a snapshot image is damaged, truncated or not a snapshot */
} tf_error;

/* A static, never NULL, human description of any code returned by this library (library codes
 * and -errno alike). Thread-safe. */
TF_API const char *tf_strerror(int code);

#endif
