/* The engine's three lookup tables, each the library's one table (common/table.h): order id ->
 * order, (account, client_order_id) -> order, (book side, price key) -> level. */
#include "engine/engine_internal.h"

/* ---- the keys ------------------------------------------------------------------------------- */

typedef struct level_key {
    int64_t key;
    uint32_t tree;
} level_key;

/* Order ids are their own hash (handed out in sequence, Fibonacci hashing spreads them; eng_find_id
 * in engine_internal.h looks them up inline, as it does the client table's finds and rekey). */
static uint64_t hash_id(const void *pool, uint32_t oi)
{
    return ((const tf_engine *)pool)->orders[oi].id;
}

static uint64_t hash_level(const void *pool, uint32_t li)
{
    const eng_level *l = &((const tf_engine *)pool)->levels[li];
    return tfu_mix2((uint64_t)l->key, l->tree);
}

static int eq_level(const void *pool, uint32_t li, const void *key)
{
    const eng_level *l = &((const tf_engine *)pool)->levels[li];
    const level_key *k = key;
    return l->key == k->key && l->tree == k->tree;
}

/* ---- the three tables ----------------------------------------------------------------------- */

void eng_insert_id(tf_engine *e, uint32_t oi)
{
    tfu_tab_insert(&e->by_id, hash_id(e, oi), oi, hash_id, e);
}

void eng_remove_id(tf_engine *e, uint32_t oi)
{
    tfu_tab_erase(&e->by_id, hash_id(e, oi), oi, hash_id, e);
}

void eng_insert_client(tf_engine *e, uint32_t oi)
{
    tfu_tab_insert(&e->by_client, eng_hash_client(e, oi), oi, eng_hash_client, e);
}

void eng_remove_client(tf_engine *e, uint32_t oi)
{
    tfu_tab_erase(&e->by_client, eng_hash_client(e, oi), oi, eng_hash_client, e);
}

uint32_t eng_table_find_level(const tf_engine *e, uint32_t tree, int64_t key)
{
    level_key k = {key, tree};
    return tfu_tab_find(&e->by_price, tfu_mix2((uint64_t)key, tree), eq_level, e, &k);
}

void eng_insert_level(tf_engine *e, uint32_t li)
{
    tfu_tab_insert(&e->by_price, hash_level(e, li), li, hash_level, e);
}

void eng_remove_level(tf_engine *e, uint32_t li)
{
    tfu_tab_erase(&e->by_price, hash_level(e, li), li, hash_level, e);
}
