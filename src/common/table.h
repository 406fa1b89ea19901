/* The library's one open-addressing hash table: a slot is a u32 index into the caller's pool of
 * entries (0 when empty: index 0 is every pool's null), the key lives in the pool entry.
 *
 * Used by the engine (order id -> order, (account, client id) -> order, (side, price) -> level),
 * the venue (order id -> owner) and the risk rules (account -> its limits). The table is
 * parameterised by two functions of the pool: the 64-bit hash of the entry at an index, and
 * whether the entry at an index has a given key; the find, insert and erase below are inline so
 * that a caller passing its own functions gets them inlined. Linear probing from the Fibonacci
 * hash of the key's hash, deletion by backward shift (no tombstones, so probe lengths never
 * degrade over a long run). A small table doubles when it would pass load 1/16, a large one
 * (TFU_TAB_SPARSE_SLOTS slots and more) when it would pass load 1/8, until it reaches the size
 * allocated at init, which holds `entries` at load <= 1/4: growing earlier costs no memory (the
 * arrays are allocated at their largest anyway). Every occupied slot a probe meets before its
 * own is a read of another pool entry, a likely cache miss on the lookup's critical path; a
 * sparse table meets fewer, and while it is small its extra slots cost little cache. Measured
 * in the engine (issue 24, docs/benchmarks.md): at ~1k resting orders load 1/16 against 1/8 was
 * 1-3 % faster in alternated runs (up to 10 % in single runs) and 4-5 ns off the median latency
 * (1/4: 16 % slower, 1/2: twice as slow); at ~100k, where a table is megabytes, 1/16 was 20-30 %
 * slower than 1/8 (1/4 about as fast as 1/8).
 *
 * Both slot arrays are allocated at init for `entries` entries; growing doubles into the spare
 * one, so nothing allocates after init until a caller asks for more room (tfu_table_reserve).
 * A small table stays in cache: it starts at 1,024 slots and doubles only as entries come.
 *
 * (Issue 24 measured a slot of 32-bit key tag + index, load 1/2 and 1/4, against this layout in
 * the engine: it read the pool less but was no faster at ~100k resting orders and slower at ~1k,
 * where the tables' own footprint in L1/L2 matters more than the pool reads; docs/benchmarks.md.)
 */
#ifndef TF_COMMON_TABLE_H
#define TF_COMMON_TABLE_H

#include <stdint.h>

#define TFU_TAB_GOLDEN 0x9E3779B97F4A7C15ull

typedef struct tfu_table {
    uint32_t *slot;  /* [mask + 1]: 0 empty, else a pool index */
    uint32_t *spare; /* the other array, for the next doubling */
    uint64_t mask;
    uint64_t count;
    uint64_t max_cap; /* slots of each array */
    int shift;        /* 64 - log2(mask + 1), for Fibonacci hashing */
} tfu_table;

/* The hash of the entry at pool index idx, and whether it has the key `key`. */
typedef uint64_t (*tfu_tab_hash_fn)(const void *pool, uint32_t idx);
typedef int (*tfu_tab_eq_fn)(const void *pool, uint32_t idx, const void *key);

/* Slots of one of a table's two arrays for `entries` entries (load <= 1/4), and both arrays'
 * bytes. */
uint64_t tfu_table_capacity(uint64_t entries);
uint64_t tfu_table_bytes(uint64_t entries);
/* Room for `entries` entries, empty. 0 or TF_E_NOMEM. */
int tfu_table_init(tfu_table *t, uint64_t entries);
void tfu_table_fini(tfu_table *t);
/* Every entry out (the arrays kept). */
void tfu_table_clear(tfu_table *t);
/* Room for `entries` entries: reallocates both arrays when they are smaller, each present entry
 * placed again (its hash from the pool). 0 or TF_E_NOMEM (the table unchanged). */
int tfu_table_reserve(tfu_table *t, uint64_t entries, tfu_tab_hash_fn hash, const void *pool);
/* Doubles the table into its spare array, every entry placed again (table.c). */
void tfu_tab_grow(tfu_table *t, tfu_tab_hash_fn hash, const void *pool);

/* The hash of a word, and of a pair of words. */
static inline uint64_t tfu_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t tfu_mix2(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0xff51afd7ed558ccdull ^ b;
    h ^= h >> 29;
    return h * 0xc4ceb9fe1a85ec53ull ^ (h >> 32);
}

/* The home slot of a hash: Fibonacci hashing (sequential ids spread evenly). */
static inline uint64_t tfu_tab_home(const tfu_table *t, uint64_t h)
{
    return (h * TFU_TAB_GOLDEN) >> t->shift;
}

/* The index of the entry with key `key` (whose hash is h), or 0. */
static inline __attribute__((always_inline)) uint32_t
tfu_tab_find(const tfu_table *t, uint64_t h, tfu_tab_eq_fn eq, const void *pool, const void *key)
{
    for (uint64_t i = tfu_tab_home(t, h);; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v || eq(pool, v, key))
            return v;
    }
}

static inline void tfu_tab_place(tfu_table *t, uint64_t h, uint32_t idx)
{
    uint64_t i = tfu_tab_home(t, h);
    while (t->slot[i])
        i = (i + 1) & t->mask;
    t->slot[i] = idx;
}

#define TFU_TAB_SPARSE_SLOTS (1ull << 16) /* 256 KB an array */

/* Whether `count` entries are past the load a table of `slots` slots doubles at (see the top). */
static inline int tfu_tab_over_load(uint64_t count, uint64_t slots)
{
    return count * (slots < TFU_TAB_SPARSE_SLOTS ? 16 : 8) > slots;
}

/* Adds idx (!= 0, not present), whose entry's hash is h; at most `entries` of init (or of the
 * last reserve) at once. Doubles past its load while below the largest size (see the top). */
static inline __attribute__((always_inline)) void
tfu_tab_insert(tfu_table *t, uint64_t h, uint32_t idx, tfu_tab_hash_fn hash, const void *pool)
{
    if (tfu_tab_over_load(++t->count, t->mask + 1) && t->mask + 1 < t->max_cap)
        tfu_tab_grow(t, hash, pool);
    tfu_tab_place(t, h, idx);
}

/* tfu_tab_find that also says where the probe stopped: *at is the slot of the entry found, or
 * the empty slot that ended the probe (where tfu_tab_rekey can put that key). */
static inline __attribute__((always_inline)) uint32_t tfu_tab_find_at(const tfu_table *t,
                                                                      uint64_t h, tfu_tab_eq_fn eq,
                                                                      const void *pool,
                                                                      const void *key, uint64_t *at)
{
    for (uint64_t i = tfu_tab_home(t, h);; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v || eq(pool, v, key)) {
            *at = i;
            return v;
        }
    }
}

/* The slot of idx, present by contract (its entry's hash is h). */
static inline uint64_t tfu_tab_slot_of(const tfu_table *t, uint64_t h, uint32_t idx)
{
    uint64_t i = tfu_tab_home(t, h);
    while (t->slot[i] != idx)
        i = (i + 1) & t->mask;
    return i;
}

/* Empties slot i, then shifts later members of its cluster back so that every entry stays
 * reachable from its home. */
static inline __attribute__((always_inline)) void
tfu_tab_erase_slot(tfu_table *t, uint64_t i, tfu_tab_hash_fn hash, const void *pool)
{
    const uint64_t mask = t->mask;
    for (uint64_t j = i;;) {
        j = (j + 1) & mask;
        uint32_t v = t->slot[j];
        if (!v)
            break;
        uint64_t k = tfu_tab_home(t, hash(pool, v));
        /* v may move to the hole i when its home k is not cyclically in (i, j]. */
        if (((j - k) & mask) >= ((j - i) & mask)) {
            t->slot[i] = v;
            i = j;
        }
    }
    t->slot[i] = 0;
    t->count--;
}

/* Removes idx, present by contract (its entry's hash is h). */
static inline __attribute__((always_inline)) void
tfu_tab_erase(tfu_table *t, uint64_t h, uint32_t idx, tfu_tab_hash_fn hash, const void *pool)
{
    tfu_tab_erase_slot(t, tfu_tab_slot_of(t, h, idx), hash, pool);
}

/* The entry at slot `from` has changed its key (its pool entry already carries the new one, so
 * `hash` gives the new hash): it moves to slot `to`, the empty slot where tfu_tab_find_at stopped
 * looking for the new key, with no change to the table in between. One probe serves the
 * duplicate check and the insert, and the old slot is known, where an erase and an insert would
 * hash both keys again and walk both clusters again. The entry is placed before the old slot is
 * emptied, so the cluster it ends stays unbroken while the backward shift runs (which may move it
 * back, by its new hash). */
static inline __attribute__((always_inline)) void
tfu_tab_rekey(tfu_table *t, uint64_t from, uint64_t to, tfu_tab_hash_fn hash, const void *pool)
{
    t->slot[to] = t->slot[from];
    t->count++;
    tfu_tab_erase_slot(t, from, hash, pool);
}

#endif
