/* libFuzzer target: the request decoder (tf_wire_decode_request) and the reply decoder, fed a
 * frame as it would arrive: [u32 body_len][body bytes...]. The input may be shorter or longer
 * than body_len says. Checks the decoder's contract, not just the absence of crashes:
 *  - a "need more" count N satisfies avail < N <= min(body_len, TF_WIRE_MAX_FIXED);
 *  - feeding exactly what it asks for, byte count by byte count, ends in the one-shot result;
 *  - a decoded request's fixed and variable parts add up to body_len, its arrays fit the variable
 *    part, and it never needed more bytes than it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/wire.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static uint64_t array_bytes(const tf_wire_request *rq)
{
    switch (rq->opcode) {
    case TF_OP_V1_SWEEP:
    case TF_OP_V1_ECHO:
    case TF_OP_SWEEP:
        return 8 * rq->n_bars + 48 * rq->n_combos;
    case TF_OP_LOAD:
        return 8 * rq->n_bars;
    case TF_OP_SWEEP_DS:
        return 48 * rq->n_combos;
    case TF_OP_ECHO:
        return rq->var_len;
    case TF_OP_SWEEP_WITH:
    case TF_OP_SESSION_OPEN_WITH: /* the name padded to 8, the closes, n_combos x n_params f64 */
        return ((rq->name_len + 7ull) & ~7ull) + 8 * rq->n_bars + rq->params_len;
    default:
        return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint64_t body_len = tf_le32(data);
    const uint8_t *body = data + 4;
    size_t avail = size - 4;
    /* Copy into an exact-size block so that an over-read of `avail` is caught by ASan. */
    uint8_t *b = malloc(avail ? avail : 1);
    if (!b)
        return 0;
    memcpy(b, body, avail);

    tf_wire_request one;
    int rc = tf_wire_decode_request(b, avail, body_len, &one);
    if (rc > 0) {
        REQUIRE((size_t)rc > (avail < body_len ? avail : body_len));
        REQUIRE((uint64_t)rc <= body_len && rc <= TF_WIRE_MAX_FIXED);
    } else if (rc == 0) {
        REQUIRE(one.fixed_len <= body_len && one.fixed_len <= avail);
        REQUIRE(one.fixed_len + one.var_len == body_len);
        REQUIRE(array_bytes(&one) == one.var_len);
        REQUIRE(one.close_off + 8 * one.n_bars <= one.var_len || one.opcode == TF_OP_LOAD_FD);
        REQUIRE(one.params_off + 48 * one.n_combos <= one.var_len || one.opcode == TF_OP_LOAD_FD ||
                one.opcode == TF_OP_SWEEP_WITH || one.opcode == TF_OP_SESSION_OPEN_WITH);
        REQUIRE(one.params_off + one.params_len <= one.var_len || one.opcode == TF_OP_LOAD_FD);
        if (one.opcode == TF_OP_SWEEP_WITH || one.opcode == TF_OP_SESSION_OPEN_WITH)
            REQUIRE(one.n_params >= 1 && one.n_params <= TF_WIRE_MAX_PARAMS &&
                    one.params_len == 8ull * one.n_params * one.n_combos);
    }

    /* Incremental: give exactly what is asked for. */
    size_t have = 0;
    tf_wire_request inc;
    int r2;
    for (int steps = 0;; steps++) {
        REQUIRE(steps < 8);
        r2 = tf_wire_decode_request(b, have, body_len, &inc);
        if (r2 <= 0 || (size_t)r2 > avail)
            break;
        REQUIRE((size_t)r2 > have);
        have = (size_t)r2;
    }
    if (r2 <= 0 && rc <= 0) {
        REQUIRE(r2 == rc);
        REQUIRE(inc.opcode == one.opcode && inc.request_id == one.request_id);
        if (rc == 0)
            REQUIRE(inc.fixed_len == one.fixed_len && inc.n_bars == one.n_bars &&
                    inc.n_combos == one.n_combos && inc.id == one.id);
    }

    /* The same bytes as a reply body. */
    tf_wire_reply rep;
    int r3 = tf_wire_decode_reply(b, avail, body_len, &rep);
    if (r3 > 0)
        REQUIRE((size_t)r3 > avail && (uint64_t)r3 <= body_len);
    if (r3 == 0 && rep.opcode == TF_OP_ERROR)
        REQUIRE(rep.msg_len <= TF_WIRE_MAX_ERROR_MSG && body_len == 20ull + rep.msg_len);

    /* Error frames built from fuzz text round-trip. */
    uint8_t f[TF_WIRE_PREFIX + 20 + 64];
    char msg[65];
    size_t m = avail < 64 ? avail : 64;
    memcpy(msg, b, m);
    msg[m] = 0;
    int n = tf_wire_put_error(f, sizeof f, one.request_id, -1200 - (int)(body_len % 100), msg);
    REQUIRE(n >= 24 && (size_t)n <= sizeof f);
    REQUIRE(tf_wire_decode_reply(f + 4, (size_t)n - 4, (uint64_t)n - 4, &rep) == 0);
    REQUIRE(rep.opcode == TF_OP_ERROR && rep.msg_len == (uint32_t)n - 24);
    free(b);
    return 0;
}
