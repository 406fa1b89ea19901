/* Deterministic random OFL1 command streams, with gateway commands mixed in (Order with every
 * type, tif and flag, invalid ones included; Cancel; ReplaceByClient), for the engine's
 * differential tests. The seed decides the share of gateway commands: none in about a third of
 * the streams, 15% or 45% in the others.
 *
 * A stream is seeded (splitmix64) and aims at every edge of docs/engine.md: prices concentrated
 * around a mid so that trades are frequent (multi-level sweeps, market orders larger than the
 * book), replaces up/down/across/same-price smaller/larger, duplicate and reused client ids, a
 * few accounts that trade with themselves, unknown instruments, zero and oversized quantities
 * (hi != 0, lo > INT64_MAX, lo = INT64_MAX), non-positive and extreme prices, redelivered
 * command_seqs, event and Heartbeat records in the input, cancels of live, dead and never
 * existing orders.
 *
 * With an oracle (a model fed the same stream), cancels and replaces aim at live orders most of
 * the time. The same seed, instruments and oracle state give the same stream on every machine.
 */
#ifndef TF_ENGINE_STREAMS_H
#define TF_ENGINE_STREAMS_H

#include <stdint.h>

#include "engine_model.h"
#include "tollfree/orderflow.h"

typedef struct es_gen {
    uint64_t rng;
    uint64_t seq;      /* the highest command_seq issued so far */
    uint64_t n_new;    /* NewLimit/NewMarket commands issued: about the next order id */
    uint64_t n_out;    /* records issued */
    uint64_t next_cid; /* fresh client ids count up from here */
    int phase;         /* 0 build the books, 1 churn, 2 sweep: changes every 250 records */
    const uint64_t *instruments;
    uint32_t n_instruments;
    uint32_t hot;        /* commands mostly use instruments[0..hot) */
    uint32_t accounts;   /* account ids 1..accounts */
    uint32_t client_ids; /* client ids 1..client_ids, per account */
    int64_t mid;         /* prices mostly mid +- spread */
    int64_t spread;
    const em_model *oracle; /* may be NULL */
    int gateway_pct;        /* records that are gateway commands, percent (0: OFL1 only) */
} es_gen;

/* instruments must outlive the generator. The seed also picks the stream's profile (its mid
 * price: around 1000, near 1, or near INT64_MAX; how many accounts and client ids). */
void es_init(es_gen *g, uint64_t seed, const uint64_t *instruments, uint32_t n_instruments);
/* A model fed every record of this stream so far (or NULL): cancels and replaces aim at its
 * live orders. */
void es_set_oracle(es_gen *g, const em_model *oracle);
/* The next record: a command most of the time, sometimes a Heartbeat or an event record. */
void es_next(es_gen *g, tf_ofl_msg *out);

/* splitmix64: the stream's PRNG, exposed for tests that want their own draws. */
uint64_t es_rand(uint64_t *state);

#endif
