/* The engine's one open-addressing table, used three times by tables.c: order id -> order,
 * (account, client_order_id) -> order, (book side, price key) -> level.
 *
 * A slot is a u32 pool index, 0 when empty (pool index 0 is the null); the key lives in the pool
 * entry, which the caller reads next anyway. The table is parameterised by two functions of the
 * pool: the 64-bit hash of the entry at an index, and whether the entry at an index has a given
 * key. Linear probing from the Fibonacci hash of the key's hash, load <= 1/4, deletion by
 * backward shift (no tombstones, so probe lengths never degrade over a long run). Both arrays
 * are allocated at init; growing doubles into the spare one, so nothing allocates after init.
 *
 * (Issue 24 measured a slot of 32-bit key tag + index, load 1/2 and 1/4, against this layout:
 * it read the pool less but was no faster at ~100k resting orders and slower at ~1k, where the
 * tables' own footprint in L1/L2 matters more than the pool reads; docs/benchmarks.md.) */
#ifndef TF_ENGINE_TABLE_H
#define TF_ENGINE_TABLE_H

#include <stdint.h>

#include "engine/engine_internal.h"

#define ENG_TAB_GOLDEN 0x9E3779B97F4A7C15ull

/* The hash of the entry at pool index idx, and whether it has the key `key`. */
typedef uint64_t (*eng_tab_hash_fn)(const void *pool, uint32_t idx);
typedef int (*eng_tab_eq_fn)(const void *pool, uint32_t idx, const void *key);

/* The home slot of a hash: Fibonacci hashing (sequential order ids spread evenly). */
static inline uint64_t eng_tab_home(const eng_table *t, uint64_t h)
{
    return (h * ENG_TAB_GOLDEN) >> t->shift;
}

/* The index of the entry with key `key` (whose hash is h), or 0. */
static inline __attribute__((always_inline)) uint32_t
eng_tab_find(const eng_table *t, uint64_t h, eng_tab_eq_fn eq, const void *pool, const void *key)
{
    for (uint64_t i = eng_tab_home(t, h);; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v || eq(pool, v, key))
            return v;
    }
}

static inline void eng_tab_place(eng_table *t, uint64_t h, uint32_t idx)
{
    uint64_t i = eng_tab_home(t, h);
    while (t->slot[i])
        i = (i + 1) & t->mask;
    t->slot[i] = idx;
}

/* Doubles the table into its spare array, every entry placed again (tables.c). */
void eng_tab_grow(eng_table *t, eng_tab_hash_fn hash, const void *pool);

/* Adds idx (!= 0, not present), whose entry's hash is h; at most `entries` of init at once. */
static inline __attribute__((always_inline)) void
eng_tab_insert(eng_table *t, uint64_t h, uint32_t idx, eng_tab_hash_fn hash, const void *pool)
{
    if (++t->count * 4 > t->mask + 1 && t->mask + 1 < t->max_cap)
        eng_tab_grow(t, hash, pool);
    eng_tab_place(t, h, idx);
}

/* Removes idx, present by contract (its entry's hash is h), then shifts later members of its
 * cluster back so that every entry stays reachable from its home. */
static inline __attribute__((always_inline)) void
eng_tab_erase(eng_table *t, uint64_t h, uint32_t idx, eng_tab_hash_fn hash, const void *pool)
{
    const uint64_t mask = t->mask;
    uint64_t i = eng_tab_home(t, h);
    while (t->slot[i] != idx)
        i = (i + 1) & mask;
    for (uint64_t j = i;;) {
        j = (j + 1) & mask;
        uint32_t v = t->slot[j];
        if (!v)
            break;
        uint64_t k = eng_tab_home(t, hash(pool, v));
        /* v may move to the hole i when its home k is not cyclically in (i, j]. */
        if (((j - k) & mask) >= ((j - i) & mask)) {
            t->slot[i] = v;
            i = j;
        }
    }
    t->slot[i] = 0;
    t->count--;
}

#endif
