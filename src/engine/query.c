/* Reading the engine: the state hash, orders, best prices, depth, and instrument lists. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine_internal.h"

/* Every live order in hash order; fn gets the pool index. */
static int walk_orders(const tf_engine *e, int (*fn)(void *ctx, const tf_engine *e, uint32_t oi),
                       void *ctx)
{
    for (uint32_t t = 0; t < 2 * e->n_books; t++) {
        for (uint32_t li = e->sides[t].best; li; li = eng_tree_next(e, li))
            for (uint32_t oi = e->levels[li].head; oi; oi = e->orders[oi].next) {
                int rc = fn(ctx, e, oi);
                if (rc)
                    return rc;
            }
    }
    return 0;
}

static inline uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static int hash_order(void *ctx, const tf_engine *e, uint32_t oi)
{
    uint64_t *h = ctx;
    const eng_order *o = &e->orders[oi];
    *h = fnv_u64(*h, o->id);
    *h = fnv_u64(*h, o->account);
    *h = fnv_u64(*h, o->coid);
    *h = fnv_u64(*h, (uint64_t)o->price);
    *h = fnv_u64(*h, o->remaining);
    if (e->gateway)
        *h = fnv_u64(*h, e->orders[oi].filled);
    return 0;
}

uint64_t tf_engine_state_hash(const tf_engine *e)
{
    if (!e)
        return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t b = 0; b < e->n_books; b++) {
        h = fnv_u64(h, e->instrument[b]);
        for (int side = 0; side < 2; side++) {
            const eng_side *s = &e->sides[b * 2 + (uint32_t)side];
            h = fnv_u64(h, s->n_orders);
            for (uint32_t li = s->best; li; li = eng_tree_next(e, li))
                for (uint32_t oi = e->levels[li].head; oi; oi = e->orders[oi].next)
                    hash_order(&h, e, oi);
        }
    }
    h = fnv_u64(h, e->next_order_id);
    h = fnv_u64(h, e->last_command_seq);
    h = fnv_u64(h, e->next_event_seq);
    /* STP settings only when some are set: an engine without them hashes as it always has */
    if (e->n_modes) {
        h = fnv_u64(h, e->n_modes);
        for (uint32_t i = 0; i < e->n_stp; i++)
            if (e->stp[i].mode) {
                h = fnv_u64(h, e->stp[i].account);
                h = fnv_u64(h, e->stp[i].mode);
            }
    }
    /* once a gateway command has been applied (every order above carries its filled too) */
    if (e->gateway)
        h = fnv_u64(h, 1);
    return h;
}

static void fill_order(const tf_engine *e, uint32_t oi, tf_engine_order *out)
{
    const eng_order *o = &e->orders[oi];
    *out = (tf_engine_order){
        .order_id = o->id,
        .account_id = o->account,
        .client_order_id = o->coid,
        .instrument_id = e->instrument[o->tree >> 1],
        .price = o->price,
        .remaining = o->remaining,
        .side = (uint8_t)(o->tree & 1),
        .filled = e->orders[oi].filled,
    };
}

int tf_engine_find_order(const tf_engine *e, uint64_t order_id, tf_engine_order *out)
{
    if (!e || !out)
        return TF_E_NULL_ARG;
    uint32_t oi = eng_find_id(e, order_id);
    if (!oi)
        return 0;
    fill_order(e, oi, out);
    return 1;
}

int tf_engine_find_client(const tf_engine *e, uint64_t account_id, uint64_t client_order_id,
                          tf_engine_order *out)
{
    if (!e || !out)
        return TF_E_NULL_ARG;
    uint32_t oi = eng_find_client(e, account_id, client_order_id);
    if (!oi)
        return 0;
    fill_order(e, oi, out);
    return 1;
}

/* The level's kept total (exact, saturated at UINT64_MAX as the API says). */
static void level_view(const tf_engine *e, uint32_t li, tf_engine_level *out)
{
    const eng_level *l = &e->levels[li];
    *out = (tf_engine_level){
        .price = eng_level_price(l), .total = eng_total(l), .orders = l->n_orders};
}

static const eng_side *side_of(const tf_engine *e, uint64_t instrument_id, int side)
{
    int book = eng_book_of(e, instrument_id);
    if (book < 0 || (side != TF_OFL_BUY && side != TF_OFL_SELL))
        return NULL;
    return &e->sides[(uint32_t)book * 2 + (uint32_t)side];
}

int tf_engine_best(const tf_engine *e, uint64_t instrument_id, int side, int64_t *price,
                   uint64_t *quantity)
{
    if (!e || !price || !quantity)
        return TF_E_NULL_ARG;
    const eng_side *s = side_of(e, instrument_id, side);
    if (!s)
        return TF_E_INVALID_ARG;
    if (!s->best)
        return 0;
    tf_engine_level l;
    level_view(e, s->best, &l);
    *price = l.price;
    *quantity = l.total;
    return 1;
}

int tf_engine_depth(const tf_engine *e, uint64_t instrument_id, int side, tf_engine_level *levels,
                    int max)
{
    if (!e || (!levels && max > 0))
        return TF_E_NULL_ARG;
    const eng_side *s = side_of(e, instrument_id, side);
    if (!s || max < 0)
        return TF_E_INVALID_ARG;
    int n = 0;
    for (uint32_t li = s->best; li && n < max; li = eng_tree_next(e, li))
        level_view(e, li, &levels[n++]);
    return n;
}

int tf_engine_level_at(const tf_engine *e, uint64_t instrument_id, int side, int64_t price,
                       tf_engine_level *out)
{
    if (!e || !out)
        return TF_E_NULL_ARG;
    const eng_side *s = side_of(e, instrument_id, side);
    if (!s)
        return TF_E_INVALID_ARG;
    /* a live order's price is >= 1: no level elsewhere (and -price cannot overflow) */
    if (price <= 0)
        return 0;
    uint32_t tree = (uint32_t)(s - e->sides);
    uint32_t li = eng_find_level(e, tree, eng_key(side, price));
    if (!li || !e->levels[li].n_orders) /* none, or a kept empty tree level (book.c) */
        return 0;
    level_view(e, li, out);
    return 1;
}

int tf_engine_last_trade(const tf_engine *e, uint64_t instrument_id, int64_t *price)
{
    if (!e || !price)
        return TF_E_NULL_ARG;
    int book = eng_book_of(e, instrument_id);
    if (book < 0)
        return TF_E_INVALID_ARG;
    *price = e->last_trade[book];
    return *price != 0;
}

struct each_ctx {
    int (*fn)(void *ctx, const tf_engine_order *o);
    void *ctx;
};

static int each_order(void *ctx, const tf_engine *e, uint32_t oi)
{
    struct each_ctx *c = ctx;
    tf_engine_order o;
    fill_order(e, oi, &o);
    return c->fn(c->ctx, &o);
}

int tf_engine_for_each_order(const tf_engine *e, int (*fn)(void *ctx, const tf_engine_order *o),
                             void *ctx)
{
    if (!e || !fn)
        return TF_E_NULL_ARG;
    struct each_ctx c = {fn, ctx};
    return walk_orders(e, each_order, &c);
}

void tf_engine_format_hash(uint64_t hash, char out[19])
{
    snprintf(out, 19, "0x%016llx", (unsigned long long)hash);
}

/* ---- instrument lists ----------------------------------------------------------------------- */

static int parse_id(const char **p, uint64_t *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return TF_E_INVALID_ARG;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || v == 0)
        return TF_E_INVALID_ARG;
    *out = v;
    *p = end;
    return 0;
}

int eng_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts ids[0..n) and drops duplicates; returns the new count. */
static uint64_t compact(uint64_t *ids, uint64_t n)
{
    qsort(ids, n, sizeof *ids, eng_cmp_u64);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (!k || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    return k;
}

static int present(const uint64_t *sorted, uint64_t n, uint64_t v)
{
    return bsearch(&v, sorted, n, sizeof v, eng_cmp_u64) != NULL;
}

/* Appends lo..hi to ids[0..*n); the cap counts distinct ids: when the buffer fills, the ids are
 * compacted and only values not already there need room. */
static int add_range(uint64_t *ids, uint64_t *n, uint32_t cap, uint64_t lo, uint64_t hi)
{
    if (hi - lo < (uint64_t)cap - *n) {
        for (uint64_t v = lo;; v++) {
            ids[(*n)++] = v;
            if (v == hi)
                return 0;
        }
    }
    *n = compact(ids, *n);
    uint64_t sorted = *n;
    for (uint64_t v = lo;; v++) {
        if (!present(ids, sorted, v)) {
            if (*n == cap)
                return TF_E_LIMIT;
            ids[(*n)++] = v;
        }
        if (v == hi)
            return 0;
    }
}

int tf_engine_parse_instruments(const char *s, uint64_t *ids, uint32_t cap)
{
    if (!s || (!ids && cap))
        return TF_E_NULL_ARG;
    uint64_t n = 0;
    const char *p = s;
    for (;;) {
        uint64_t lo, hi;
        if (parse_id(&p, &lo))
            return TF_E_INVALID_ARG;
        hi = lo;
        if (*p == '-') {
            p++;
            if (parse_id(&p, &hi) || hi < lo)
                return TF_E_INVALID_ARG;
        }
        int rc = add_range(ids, &n, cap, lo, hi);
        if (rc)
            return rc;
        if (*p == '\0')
            break;
        if (*p != ',')
            return TF_E_INVALID_ARG;
        p++;
    }
    return (int)compact(ids, n);
}
