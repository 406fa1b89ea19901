/* The v2 reply codecs (wire_internal.h, docs/protocol.md "Replies"): one encoder and one decoder
 * per fixed reply payload, little-endian at the offsets written here and nowhere else. */
#include <string.h>

#include "tollfree/wire.h"

#include "wire/wire_internal.h"

static void put_f64(uint8_t *p, double v)
{
    memcpy(p, &v, 8);
}

static double get_f64(const uint8_t *p)
{
    double v;
    memcpy(&v, p, 8);
    return v;
}

/* HELLO: u32 version, u32 caps, u64 max_frame, u64 max_memory, u32 max_datasets, u32 threads */
size_t tfw_put_hello(uint8_t *p, const tfw_hello_reply *r)
{
    tf_put32(p, r->version);
    tf_put32(p + 4, r->caps);
    tf_put64(p + 8, r->max_frame);
    tf_put64(p + 16, r->max_memory);
    tf_put32(p + 24, r->max_datasets);
    tf_put32(p + 28, r->threads);
    return TF_WIRE_HELLO_REPLY;
}

void tfw_get_hello(const uint8_t *p, tfw_hello_reply *r)
{
    r->version = tf_le32(p);
    r->caps = tf_le32(p + 4);
    r->max_frame = tf_le64(p + 8);
    r->max_memory = tf_le64(p + 16);
    r->max_datasets = tf_le32(p + 24);
    r->threads = tf_le32(p + 28);
}

/* LOAD, LOAD_FD: u64 handle, u64 n_bars, u32 created, u32 reserved */
size_t tfw_put_load(uint8_t *p, const tfw_load_reply *r)
{
    tf_put64(p, r->handle);
    tf_put64(p + 8, r->n_bars);
    tf_put32(p + 16, r->created);
    tf_put32(p + 20, 0);
    return TF_WIRE_LOAD_REPLY;
}

void tfw_get_load(const uint8_t *p, tfw_load_reply *r)
{
    r->handle = tf_le64(p);
    r->n_bars = tf_le64(p + 8);
    r->created = tf_le32(p + 16);
}

/* SWEEP, SWEEP_DS, SWEEP_WITH: u32 n_combos, u32 flags; then the arrays */
size_t tfw_put_sweep(uint8_t *p, const tfw_sweep_reply *r)
{
    tf_put32(p, r->n_combos);
    tf_put32(p + 4, r->flags);
    return TF_WIRE_SWEEP_REPLY_FIXED;
}

void tfw_get_sweep(const uint8_t *p, tfw_sweep_reply *r)
{
    r->n_combos = tf_le32(p);
    r->flags = tf_le32(p + 4);
}

/* RUN_ONE: f64 pnl, i64 trades */
size_t tfw_put_run_one(uint8_t *p, const tfw_run_one_reply *r)
{
    put_f64(p, r->pnl);
    tf_put64(p + 8, (uint64_t)r->trades);
    return TF_WIRE_RUN_ONE_REPLY;
}

void tfw_get_run_one(const uint8_t *p, tfw_run_one_reply *r)
{
    r->pnl = get_f64(p);
    r->trades = (int64_t)tf_le64(p + 8);
}

/* SESSION_OPEN, SESSION_OPEN_WITH: u64 session_id */
size_t tfw_put_session_open(uint8_t *p, uint64_t session)
{
    tf_put64(p, session);
    return TF_WIRE_SESSION_OPEN_REPLY;
}

uint64_t tfw_get_session_open(const uint8_t *p)
{
    return tf_le64(p);
}

/* SESSION_BAR: i32 position, u32 reserved, i64 trades, f64 pnl; SESSION_QUERY / SESSION_CLOSE
 * add i64 bars */
size_t tfw_put_session(uint8_t *p, const tfw_session_reply *r, int with_bars)
{
    tf_put32(p, (uint32_t)r->position);
    tf_put32(p + 4, 0);
    tf_put64(p + 8, (uint64_t)r->trades);
    put_f64(p + 16, r->pnl);
    if (!with_bars)
        return TF_WIRE_SESSION_BAR_REPLY;
    tf_put64(p + 24, (uint64_t)r->bars);
    return TF_WIRE_SESSION_STATE_REPLY;
}

void tfw_get_session(const uint8_t *p, int with_bars, tfw_session_reply *r)
{
    r->position = (int32_t)tf_le32(p);
    r->trades = (int64_t)tf_le64(p + 8);
    r->pnl = get_f64(p + 16);
    r->bars = with_bars ? (int64_t)tf_le64(p + 24) : -1;
}

/* STATS: TF_STAT_COUNT x u64 in the TF_STAT_* order */
_Static_assert(8 * TF_STAT_COUNT == TF_WIRE_STATS_REPLY, "one u64 per statistic");
size_t tfw_put_stats(uint8_t *p, const uint64_t v[TF_STAT_COUNT])
{
    for (int i = 0; i < TF_STAT_COUNT; i++)
        tf_put64(p + 8 * i, v[i]);
    return TF_WIRE_STATS_REPLY;
}

void tfw_get_stats(const uint8_t *p, uint64_t v[TF_STAT_COUNT])
{
    for (int i = 0; i < TF_STAT_COUNT; i++)
        v[i] = tf_le64(p + 8 * i);
}

/* STRATEGIES: u32 count, u32 text_len; then the text */
size_t tfw_put_strategies(uint8_t *p, const tfw_strategies_reply *r)
{
    tf_put32(p, r->count);
    tf_put32(p + 4, r->text_len);
    return TF_WIRE_STRATEGIES_REPLY_FIXED;
}

void tfw_get_strategies(const uint8_t *p, tfw_strategies_reply *r)
{
    r->count = tf_le32(p);
    r->text_len = tf_le32(p + 4);
}

/* ERROR: i32 code, u32 msg_len; then the message */
size_t tfw_put_error_fixed(uint8_t *p, const tfw_error_reply *r)
{
    tf_put32(p, (uint32_t)r->code);
    tf_put32(p + 4, r->msg_len);
    return TF_WIRE_ERROR_FIXED;
}

void tfw_get_error_fixed(const uint8_t *p, tfw_error_reply *r)
{
    r->code = (int32_t)tf_le32(p);
    r->msg_len = tf_le32(p + 4);
}
