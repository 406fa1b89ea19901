/* tollfree sweep service wire protocol (docs/protocol.md): frame layouts, opcodes, limits, and a
 * pure request decoder (no I/O, no allocation: what the fuzzer drives).
 *
 * A frame is [u32 body_len][body], little-endian. v1 bodies start [u8 op][u32 n_bars][u32
 * n_combos]; v2 bodies start with a 12-byte header [u8 op][u8 version=2][u16 reserved=0][u64
 * request_id], so a v2 payload sits at frame offset 16 (8-byte aligned).
 */
#ifndef TOLLFREE_WIRE_H
#define TOLLFREE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"

/* ---- opcodes ---- */
#define TF_OP_V1_SWEEP 0x00
#define TF_OP_V1_ECHO 0x01
#define TF_OP_HELLO 0x10
#define TF_OP_LOAD 0x11
#define TF_OP_SWEEP_DS 0x12
#define TF_OP_RUN_ONE 0x13
#define TF_OP_SWEEP 0x14
#define TF_OP_ECHO 0x15
#define TF_OP_DROP 0x16
#define TF_OP_STATS 0x17
#define TF_OP_LOAD_FD 0x18
#define TF_OP_STRATEGIES 0x1A /* the strategies this server offers, with their parameter names */
#define TF_OP_SWEEP_WITH 0x1B /* a sweep of a named strategy, f64 params, dataset or inline */
#define TF_OP_SESSION_OPEN 0x20
#define TF_OP_SESSION_BAR 0x21
#define TF_OP_SESSION_QUERY 0x22
#define TF_OP_SESSION_CLOSE 0x23
#define TF_OP_SESSION_OPEN_WITH 0x25 /* a live session of a named strategy */
#define TF_OP_ERROR 0x7F

/* ---- sizes (bytes) ---- */
#define TF_WIRE_VERSION 2
#define TF_WIRE_PREFIX 4     /* the u32 body_len */
#define TF_WIRE_V1_FIXED 9   /* v1 body before the close array */
#define TF_WIRE_V2_HEADER 12 /* v2 body header */
#define TF_WIRE_PARAMS_BYTES 48
/* The largest fixed part of any request body (RUN_ONE: header + handle + 6 x i64). */
#define TF_WIRE_MAX_FIXED 68
#define TF_WIRE_DEFAULT_MAX_FRAME ((uint64_t)256 << 20)
#define TF_WIRE_MAX_FRAME_LIMIT ((uint64_t)UINT32_MAX)
#define TF_WIRE_MAX_ERROR_MSG 1024
/* SWEEP_WITH / SESSION_OPEN_WITH: parameters per combo (1 .. this; strategy.h's
 * TF_STRATEGY_MAX_PARAMS) and the longest strategy name a server looks up. */
#define TF_WIRE_MAX_PARAMS 64
#define TF_WIRE_MAX_NAME 128

/* Reply payload sizes (after the v2 header). */
#define TF_WIRE_HELLO_REPLY 32
#define TF_WIRE_LOAD_REPLY 24
#define TF_WIRE_SWEEP_REPLY_FIXED 8 /* [u32 n_combos][u32 reserved], then the arrays */
#define TF_WIRE_RUN_ONE_REPLY 16
#define TF_WIRE_SESSION_OPEN_REPLY 8
#define TF_WIRE_SESSION_BAR_REPLY 24
#define TF_WIRE_SESSION_STATE_REPLY 32
#define TF_WIRE_STATS_REPLY 96
#define TF_WIRE_STRATEGIES_REPLY_FIXED 8 /* [u32 count][u32 text_len], then the text */
#define TF_WIRE_ERROR_FIXED 8            /* [i32 code][u32 msg_len], then the message */

/* HELLO caps bits. */
#define TF_CAP_DATASETS 1u
#define TF_CAP_SESSIONS 2u
#define TF_CAP_LOAD_FD 4u
#define TF_CAP_SWEEP_FLAGS 8u /* SWEEP_DS takes flags: statistics in the reply, a fee */
#define TF_CAP_STRATEGIES 16u /* STRATEGIES, SWEEP_WITH and SESSION_OPEN_WITH */

/* SWEEP_DS flags (the request's u32 after n_combos; 0 = the original request and reply). */
#define TF_SWEEP_STATS                                                                             \
    1u                  /* the reply adds one tf_stats row (TF_WIRE_STATS_ROW bytes) per combo     \
                         */
#define TF_SWEEP_FEE 2u /* an f64 fee follows the flags, before the params */
#define TF_SWEEP_FLAGS_KNOWN (TF_SWEEP_STATS | TF_SWEEP_FEE)
#define TF_WIRE_STATS_ROW 88 /* 11 x 8 bytes: tf_stats, little-endian, in its field order */

/* STATS reply: 12 x u64 in this order. */
enum {
    TF_STAT_REQUESTS = 0,
    TF_STAT_ERRORS,
    TF_STAT_CONNECTIONS_TOTAL,
    TF_STAT_CONNECTIONS_OPEN,
    TF_STAT_DATASETS,
    TF_STAT_DATASET_BYTES,
    TF_STAT_SESSIONS_OPEN,
    TF_STAT_BYTES_IN,
    TF_STAT_BYTES_OUT,
    TF_STAT_UPTIME_NS,
    TF_STAT_SWEEPS,
    TF_STAT_COMBOS,
    TF_STAT_COUNT
};

/* A decoded request: the fixed part, copied out (nothing points into the input), plus where the
 * variable part lies. The variable part is the body after fixed_len bytes; offsets below are
 * relative to its start. */
typedef struct tf_wire_request {
    uint8_t opcode;
    uint8_t version;     /* 1 for v1 opcodes, 2 for v2 */
    uint64_t request_id; /* 0 for v1 */
    uint64_t body_len;
    uint32_t fixed_len;   /* bytes of the body before the variable part */
    uint64_t var_len;     /* body_len - fixed_len */
    uint64_t n_bars;      /* v1, LOAD, LOAD_FD, SWEEP */
    uint64_t n_combos;    /* v1 sweep/echo, SWEEP, SWEEP_DS */
    uint64_t id;          /* dataset handle (SWEEP_DS, RUN_ONE, DROP) or session id */
    uint32_t flags;       /* SWEEP_DS: TF_SWEEP_* */
    double fee;           /* SWEEP_DS with TF_SWEEP_FEE */
    uint32_t max_version; /* HELLO */
    double close;         /* SESSION_BAR */
    int64_t params[6];    /* RUN_ONE, SESSION_OPEN */
    uint64_t close_off;   /* the close array in the variable part: n_bars x f64 */
    uint64_t params_off;  /* the params array in the variable part: n_combos x 6 x i64, or
                             (SWEEP_WITH, SESSION_OPEN_WITH) n_combos x n_params x f64 */
    /* Appended with the strategy requests (SWEEP_WITH, SESSION_OPEN_WITH): */
    uint32_t n_params;   /* parameters per combo, 1 .. TF_WIRE_MAX_PARAMS */
    uint32_t name_len;   /* the strategy name's bytes, at name_off (no NUL) */
    uint64_t name_off;   /* the name in the variable part (0); padded to 8 bytes there */
    uint64_t params_len; /* bytes of the params array (every request that carries one) */
} tf_wire_request;

/* Decodes the fixed part of a request body. `body` holds the first `avail` bytes of a body of
 * `body_len` bytes (the caller has checked body_len against its frame limit).
 *
 * Returns 0 when the fixed part is decoded and every length agrees with body_len; a positive
 * count N (avail < N <= min(body_len, TF_WIRE_MAX_FIXED)) when at least N bytes of the body are
 * needed first ("need more", not an error); or a negative code: TF_E_FRAME_TOO_SHORT,
 * TF_E_LENGTH_MISMATCH, TF_E_UNKNOWN_OPCODE, TF_E_BAD_HEADER, TF_E_PROTOCOL (a client-sent ERROR).
 * On an error, out->opcode, out->version and out->request_id are set as far as they could be read
 * (request_id is 0 unless the opcode is >= 0x10 and the body has 12 bytes), so the caller can
 * answer with an error frame. Window lengths are not checked here (the kernel's job). */
TF_API int tf_wire_decode_request(const void *body, size_t avail, uint64_t body_len,
                                  tf_wire_request *out);

/* Writes a frame prefix and v2 header (16 bytes) into dst: body_len, opcode, version 2, reserved 0,
 * request_id. Returns 16. */
TF_API size_t tf_wire_put_header(void *dst, uint32_t body_len, uint8_t opcode, uint64_t request_id);

/* Writes a whole ERROR frame into dst (capacity cap): the message is cut to
 * TF_WIRE_MAX_ERROR_MSG bytes and to what fits. Returns the frame's total length (prefix
 * included), or TF_E_INVALID_ARG if cap < 24. msg may be NULL (empty message). */
TF_API int tf_wire_put_error(void *dst, size_t cap, uint64_t request_id, int code, const char *msg);

/* A decoded reply header (what a client reads first). */
typedef struct tf_wire_reply {
    uint8_t opcode; /* the request's opcode, or TF_OP_ERROR */
    uint64_t request_id;
    int32_t code;     /* ERROR only */
    uint32_t msg_len; /* ERROR only */
} tf_wire_reply;

/* Decodes the first 12 bytes of a v2 reply body (20 for an ERROR frame, whose code and msg_len are
 * then checked against body_len). Returns 0, a positive "need N bytes", or TF_E_PROTOCOL. */
TF_API int tf_wire_decode_reply(const void *body, size_t avail, uint64_t body_len,
                                tf_wire_reply *out);

/* The dataset hash of docs/protocol.md: FNV-1a 64 over 64-bit words (n_bars, then each close's
 * bits as a little-endian u64).
 * (The handle is this value, 0 mapped to 1, probed upward on a collision.) */
TF_API uint64_t tf_wire_dataset_hash(const double *close, uint64_t n_bars);

/* Little-endian loads and stores (memcpy-based: any alignment). The project targets
 * little-endian hosts only (x86-64), so these are plain copies. */
static inline uint32_t tf_le32(const void *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static inline uint64_t tf_le64(const void *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
static inline void tf_put32(void *p, uint32_t v)
{
    __builtin_memcpy(p, &v, 4);
}
static inline void tf_put64(void *p, uint64_t v)
{
    __builtin_memcpy(p, &v, 8);
}

#endif
