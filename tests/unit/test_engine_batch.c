/* tf_engine_apply_batch against tf_engine_apply in a loop: the differential streams (with
 * gateway commands, invalid records, duplicates, events and heartbeats among the commands) go
 * through one engine a command at a time and through another in batches of random sizes; every
 * return code, every event (through a small sink that flushes), the counters and the state hash
 * must be the same, with the prefetches on (every live count) and as created (none below
 * ENG_PREFETCH_LIVE orders). Then the argument checks. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine_model.h"
#include "engine_streams.h"
#include "harness.h"
#include "tollfree/engine.h"

typedef struct collected {
    tf_ofl_msg *ev;
    size_t n, cap;
} collected;

static int collect(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    collected *c = ctx;
    if (c->n + n > c->cap) {
        size_t cap = (c->n + n) * 2;
        tf_ofl_msg *p = realloc(c->ev, cap * sizeof *p);
        if (!p)
            return TF_E_NOMEM;
        c->ev = p;
        c->cap = cap;
    }
    memcpy(c->ev + c->n, ev, n * sizeof *ev);
    c->n += n;
    return 0;
}

static void one_stream(uint64_t seed, size_t n, uint64_t prefetch_live)
{
    static const uint64_t instruments[] = {7, 9, 11};
    tf_ofl_msg *cmds = calloc(n, sizeof *cmds);
    int *rc1 = calloc(n, sizeof *rc1), *rc2 = calloc(n, sizeof *rc2);
    em_model *m = NULL;
    CHECK_RC(em_create(instruments, 3, 400, &m), 0);
    if (!cmds || !rc1 || !rc2 || !m)
        return;
    es_gen g;
    es_init(&g, seed, instruments, 3);
    es_set_oracle(&g, m);
    for (size_t i = 0; i < n; i++) { /* the oracle follows the stream, so cancels find orders */
        size_t ne;
        es_next(&g, &cmds[i]);
        em_apply(m, &cmds[i], NULL, 0, &ne);
    }
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = instruments, .n_instruments = 3, .max_orders = 400};
    tf_engine *a = NULL, *b = NULL;
    CHECK_RC(tf_engine_create(&cfg, &a), 0);
    CHECK_RC(tf_engine_create(&cfg, &b), 0);
    if (!a || !b)
        return;
    b->prefetch_live = prefetch_live;          /* 0: every batch prefetches */
    tf_ofl_msg buf_a[5] = {0}, buf_b[5] = {0}; /* the same stale bytes in unused fields */
    collected ca = {0}, cb = {0};
    tf_engine_sink sa = {.ev = buf_a, .cap = 5, .flush = collect, .ctx = &ca};
    tf_engine_sink sb = {.ev = buf_b, .cap = 5, .flush = collect, .ctx = &cb};
    for (size_t i = 0; i < n; i++)
        rc1[i] = tf_engine_apply(a, &cmds[i], &sa);
    uint64_t r = seed | 1;
    for (size_t i = 0; i < n;) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        size_t k = r % 40; /* 0..39 commands, empty batches included */
        if (k > n - i)
            k = n - i;
        CHECK_RC(tf_engine_apply_batch(b, &cmds[i], k, &sb, &rc2[i]), 0);
        i += k;
    }
    collect(&ca, buf_a, sa.n);
    collect(&cb, buf_b, sb.n);
    CHECK(memcmp(rc1, rc2, n * sizeof *rc1) == 0);
    CHECK_EQ(ca.n, cb.n);
    CHECK(ca.n == cb.n && memcmp(ca.ev, cb.ev, ca.n * sizeof *ca.ev) == 0);
    tf_engine_counters k1, k2;
    tf_engine_get_counters(a, &k1);
    tf_engine_get_counters(b, &k2);
    CHECK(memcmp(&k1, &k2, sizeof k1) == 0);
    CHECK_EQ(tf_engine_state_hash(a), tf_engine_state_hash(b));
    CHECK(k1.applied > n / 2);
    free(ca.ev);
    free(cb.ev);
    tf_engine_destroy(a);
    tf_engine_destroy(b);
    em_destroy(m);
    free(cmds);
    free(rc1);
    free(rc2);
}

static void arguments(void)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = 8};
    tf_engine *e = NULL;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    tf_ofl_msg ev[4], cmd = {.kind = TF_OFL_CANCEL_BY_ORDER};
    cmd.cancel_by_order.command_seq = 1;
    tf_engine_sink s = {.ev = ev, .cap = 4};
    tf_engine_sink broken = {.ev = NULL, .cap = 4};
    int rc = 99;
    CHECK_RC(tf_engine_apply_batch(NULL, &cmd, 1, &s, &rc), TF_E_NULL_ARG);
    CHECK_RC(tf_engine_apply_batch(e, NULL, 1, &s, &rc), TF_E_NULL_ARG);
    CHECK_RC(tf_engine_apply_batch(e, &cmd, 1, NULL, &rc), TF_E_NULL_ARG);
    CHECK_RC(tf_engine_apply_batch(e, &cmd, 1, &broken, &rc), TF_E_NULL_ARG);
    CHECK_EQ(rc, 99);
    CHECK_RC(tf_engine_apply_batch(e, NULL, 0, &s, NULL), 0);
    CHECK_RC(tf_engine_apply_batch(e, &cmd, 1, &s, NULL), 0); /* rc may be NULL */
    CHECK_EQ(s.n, 1);                                         /* the Rejected: no such order */
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.applied, 1);
    tf_engine_destroy(e);
}

int main(void)
{
    for (uint64_t seed = 1; seed <= 12; seed++)
        one_stream(seed * 0x9E3779B97F4A7C15ull, 6000, seed & 1 ? 0 : ENG_PREFETCH_LIVE);
    arguments();
    return tf_test_report();
}
