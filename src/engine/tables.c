/* The engine's three lookup tables, each one table.h table: order id -> order, (account,
 * client_order_id) -> order, (book side, price key) -> level. */
#include <stdlib.h>
#include <string.h>

#include "engine/table.h"

#define MIN_CAP 1024 /* slots a table starts with (4 KiB) */

uint64_t eng_table_capacity(uint64_t entries)
{
    uint64_t cap = 16;
    while (cap < 4 * entries)
        cap <<= 1;
    return cap;
}

uint64_t eng_table_bytes(uint64_t entries)
{
    return 2 * eng_table_capacity(entries) * sizeof(uint32_t);
}

static void set_cap(eng_table *t, uint64_t cap)
{
    t->mask = cap - 1;
    int bits = 0;
    while ((1ull << bits) < cap)
        bits++;
    t->shift = 64 - bits;
}

int eng_table_init(eng_table *t, uint64_t entries)
{
    t->max_cap = eng_table_capacity(entries);
    t->slot = calloc(t->max_cap, sizeof *t->slot);
    t->spare = calloc(t->max_cap, sizeof *t->spare);
    if (!t->slot || !t->spare)
        return TF_E_NOMEM;
    set_cap(t, t->max_cap < MIN_CAP ? t->max_cap : MIN_CAP);
    t->count = 0;
    return 0;
}

void eng_table_fini(eng_table *t)
{
    free(t->slot);
    free(t->spare);
    t->slot = t->spare = NULL;
}

void eng_tab_grow(eng_table *t, eng_tab_hash_fn hash, const void *pool)
{
    uint32_t *old = t->slot;
    uint64_t old_cap = t->mask + 1;
    t->slot = t->spare;
    t->spare = old;
    set_cap(t, old_cap * 2);
    memset(t->slot, 0, (old_cap * 2) * sizeof *t->slot);
    for (uint64_t i = 0; i < old_cap; i++)
        if (old[i])
            eng_tab_place(t, hash(pool, old[i]), old[i]);
}

/* ---- the keys ------------------------------------------------------------------------------- */

static inline uint64_t mix2(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0xff51afd7ed558ccdull ^ b;
    h ^= h >> 29;
    return h * 0xc4ceb9fe1a85ec53ull ^ (h >> 32);
}

typedef struct client_key {
    uint64_t account, coid;
} client_key;

typedef struct level_key {
    int64_t key;
    uint32_t tree;
} level_key;

/* Order ids are their own hash (handed out in sequence, Fibonacci hashing spreads them). */
static uint64_t hash_id(const void *pool, uint32_t oi)
{
    return ((const tf_engine *)pool)->orders[oi].id;
}

static uint64_t hash_client(const void *pool, uint32_t oi)
{
    const eng_order *o = &((const tf_engine *)pool)->orders[oi];
    return mix2(o->account, o->coid);
}

static uint64_t hash_level(const void *pool, uint32_t li)
{
    const eng_level *l = &((const tf_engine *)pool)->levels[li];
    return mix2((uint64_t)l->key, l->tree);
}

static int eq_id(const void *pool, uint32_t oi, const void *key)
{
    return ((const tf_engine *)pool)->orders[oi].id == *(const uint64_t *)key;
}

static int eq_client(const void *pool, uint32_t oi, const void *key)
{
    const eng_order *o = &((const tf_engine *)pool)->orders[oi];
    const client_key *k = key;
    return o->coid == k->coid && o->account == k->account;
}

static int eq_level(const void *pool, uint32_t li, const void *key)
{
    const eng_level *l = &((const tf_engine *)pool)->levels[li];
    const level_key *k = key;
    return l->key == k->key && l->tree == k->tree;
}

/* ---- the three tables ----------------------------------------------------------------------- */

uint32_t eng_find_id(const tf_engine *e, uint64_t id)
{
    return eng_tab_find(&e->by_id, id, eq_id, e, &id);
}

void eng_insert_id(tf_engine *e, uint32_t oi)
{
    eng_tab_insert(&e->by_id, hash_id(e, oi), oi, hash_id, e);
}

void eng_remove_id(tf_engine *e, uint32_t oi)
{
    eng_tab_erase(&e->by_id, hash_id(e, oi), oi, hash_id, e);
}

uint32_t eng_find_client(const tf_engine *e, uint64_t account, uint64_t coid)
{
    client_key k = {account, coid};
    return eng_tab_find(&e->by_client, mix2(account, coid), eq_client, e, &k);
}

void eng_insert_client(tf_engine *e, uint32_t oi)
{
    eng_tab_insert(&e->by_client, hash_client(e, oi), oi, hash_client, e);
}

void eng_remove_client(tf_engine *e, uint32_t oi)
{
    eng_tab_erase(&e->by_client, hash_client(e, oi), oi, hash_client, e);
}

uint32_t eng_find_level(const tf_engine *e, uint32_t tree, int64_t key)
{
    level_key k = {key, tree};
    return eng_tab_find(&e->by_price, mix2((uint64_t)key, tree), eq_level, e, &k);
}

void eng_insert_level(tf_engine *e, uint32_t li)
{
    eng_tab_insert(&e->by_price, hash_level(e, li), li, hash_level, e);
}

void eng_remove_level(tf_engine *e, uint32_t li)
{
    eng_tab_erase(&e->by_price, hash_level(e, li), li, hash_level, e);
}
