/* Open-addressing lookup tables of pool indices: linear probing, load factor <= 1/4, backward
 * shift on delete (no tombstones, so probe lengths never degrade over a long run). */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

uint64_t eng_table_capacity(uint64_t entries)
{
    uint64_t cap = 16;
    while (cap < 4 * entries)
        cap <<= 1;
    return cap;
}

#define MIN_CAP 1024

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

/* Fibonacci hashing: sequential order ids spread evenly. The other keys are mixed first. */
static inline uint64_t home(const eng_table *t, uint64_t h)
{
    return (h * GOLDEN) >> t->shift;
}

static inline uint64_t mix2(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0xff51afd7ed558ccdull ^ b;
    h ^= h >> 29;
    return h * 0xc4ceb9fe1a85ec53ull ^ (h >> 32);
}

static inline uint64_t hash_id(const tf_engine *e, uint32_t oi)
{
    return e->orders[oi].id;
}

static inline uint64_t hash_client(const tf_engine *e, uint32_t oi)
{
    return mix2(e->orders[oi].account, e->orders[oi].coid);
}

static inline uint64_t hash_level(const tf_engine *e, uint32_t li)
{
    return mix2((uint64_t)e->levels[li].key, e->levels[li].tree);
}

static inline void place(eng_table *t, uint64_t h, uint32_t idx)
{
    uint64_t i = home(t, h);
    while (t->slot[i])
        i = (i + 1) & t->mask;
    t->slot[i] = idx;
}

/* Doubles the table: every entry is placed again in the spare array, which becomes the table. */
static void grow(tf_engine *e, eng_table *t, uint64_t (*hash)(const tf_engine *, uint32_t))
{
    uint32_t *old = t->slot;
    uint64_t old_cap = t->mask + 1;
    t->slot = t->spare;
    t->spare = old;
    set_cap(t, old_cap * 2);
    memset(t->slot, 0, (old_cap * 2) * sizeof *t->slot);
    for (uint64_t i = 0; i < old_cap; i++)
        if (old[i])
            place(t, hash(e, old[i]), old[i]);
}

static inline void insert(tf_engine *e, eng_table *t, uint64_t h, uint32_t idx,
                          uint64_t (*hash)(const tf_engine *, uint32_t))
{
    if (++t->count * 4 > t->mask + 1 && t->mask + 1 < t->max_cap) {
        grow(e, t, hash);
        h = hash(e, idx);
    }
    place(t, h, idx);
}

/* Removes the slot holding idx (present by contract), then shifts later members of its cluster
 * back so that every entry stays reachable from its home without tombstones. */
static inline void erase(tf_engine *e, eng_table *t, uint64_t h, uint32_t idx,
                         uint64_t (*hash)(const tf_engine *, uint32_t))
{
    uint64_t i = home(t, h);
    while (t->slot[i] != idx)
        i = (i + 1) & t->mask;
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & t->mask;
        uint32_t v = t->slot[j];
        if (!v)
            break;
        uint64_t k = home(t, hash(e, v));
        /* v may move to the hole i when its home k is not cyclically in (i, j]. */
        if (((j - k) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = v;
            i = j;
        }
    }
    t->slot[i] = 0;
    t->count--;
}

uint32_t eng_find_id(const tf_engine *e, uint64_t id)
{
    const eng_table *t = &e->by_id;
    for (uint64_t i = home(t, id);; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v || e->orders[v].id == id)
            return v;
    }
}

void eng_insert_id(tf_engine *e, uint32_t oi)
{
    insert(e, &e->by_id, hash_id(e, oi), oi, hash_id);
}

void eng_remove_id(tf_engine *e, uint32_t oi)
{
    erase(e, &e->by_id, hash_id(e, oi), oi, hash_id);
}

uint32_t eng_find_client(const tf_engine *e, uint64_t account, uint64_t coid)
{
    const eng_table *t = &e->by_client;
    for (uint64_t i = home(t, mix2(account, coid));; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v || (e->orders[v].coid == coid && e->orders[v].account == account))
            return v;
    }
}

void eng_insert_client(tf_engine *e, uint32_t oi)
{
    insert(e, &e->by_client, hash_client(e, oi), oi, hash_client);
}

void eng_remove_client(tf_engine *e, uint32_t oi)
{
    erase(e, &e->by_client, hash_client(e, oi), oi, hash_client);
}

uint32_t eng_find_level(const tf_engine *e, uint32_t tree, int64_t key)
{
    const eng_table *t = &e->by_price;
    for (uint64_t i = home(t, mix2((uint64_t)key, tree));; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v || (e->levels[v].key == key && e->levels[v].tree == tree))
            return v;
    }
}

void eng_insert_level(tf_engine *e, uint32_t li)
{
    insert(e, &e->by_price, hash_level(e, li), li, hash_level);
}

void eng_remove_level(tf_engine *e, uint32_t li)
{
    erase(e, &e->by_price, hash_level(e, li), li, hash_level);
}
