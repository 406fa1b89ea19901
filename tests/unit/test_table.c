/* The one open-addressing table (src/common/table.h) alone, against a trivial model: random
 * inserts, finds and removes under forced collisions and clusters that wrap past the end of the
 * array, through every doubling from the first size to the largest. After each operation the
 * table agrees with the model on the key operated on and on its count; every few operations
 * (and after every doubling) on every key, and every occupied slot is reachable from its home
 * without crossing an empty slot (what backward-shift deletion must keep). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "common/table.h"
#include "tollfree/error.h"

#define N 6000 /* pool indices 1..N */

static uint64_t key_of[N + 1];  /* the key of each pool index */
static uint64_t hash_of[N + 1]; /* its hash, chosen by the test */
static int present[N + 1];      /* the model */

static uint64_t h_of(const void *pool, uint32_t idx)
{
    (void)pool;
    return hash_of[idx];
}

static int eq(const void *pool, uint32_t idx, const void *key)
{
    (void)pool;
    return key_of[idx] == *(const uint64_t *)key;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The inverse of TFU_TAB_GOLDEN mod 2^64 (Newton), so a hash can be made for a chosen home. */
static uint64_t golden_inv(void)
{
    uint64_t x = TFU_TAB_GOLDEN;
    for (int i = 0; i < 6; i++)
        x *= 2 - TFU_TAB_GOLDEN * x;
    return x;
}

/* A hash: random, one of a few shared ones (long collisions), or one whose home is among the
 * last slots of the table at its current size (clusters that wrap to slot 0). */
static uint64_t pick_hash(const tfu_table *t, uint64_t ginv)
{
    uint64_t r = next() % 8;
    if (r < 4)
        return next();
    if (r < 6)
        return 0x1234567ull * (1 + next() % 3);
    uint64_t home = t->mask - next() % 4;
    return ((home << t->shift) + (next() >> (64 - t->shift) >> 1)) * ginv;
}

static int reachable_all(const tfu_table *t)
{
    uint64_t occupied = 0;
    for (uint64_t j = 0; j <= t->mask; j++) {
        uint32_t v = t->slot[j];
        if (!v)
            continue;
        occupied++;
        if (v > N || !present[v])
            return 0;
        for (uint64_t i = tfu_tab_home(t, hash_of[v]); i != j; i = (i + 1) & t->mask)
            if (!t->slot[i])
                return 0;
    }
    return occupied == t->count;
}

static int agrees_all(const tfu_table *t)
{
    uint64_t n = 0;
    for (uint32_t idx = 1; idx <= N; idx++) {
        uint32_t got = tfu_tab_find(t, hash_of[idx], eq, NULL, &key_of[idx]);
        if (got != (present[idx] ? idx : 0))
            return 0;
        n += (uint64_t)present[idx];
    }
    return n == t->count;
}

static void test_random(void)
{
    tfu_table t;
    CHECK_RC(tfu_table_init(&t, N), 0);
    const uint32_t *a = t.slot, *b = t.spare;
    const uint64_t ginv = golden_inv();
    CHECK_EQ(ginv * TFU_TAB_GOLDEN, 1);
    CHECK_EQ(t.max_cap, tfu_table_capacity(N));
    CHECK_EQ(t.mask + 1, 1024);
    memset(present, 0, sizeof present);
    for (uint32_t i = 1; i <= N; i++) {
        key_of[i] = next();
        hash_of[i] = next();
    }
    uint64_t live = 0, doublings = 0, wraps = 0;
    int bad_find = 0, bad_count = 0, bad_cap = 0, bad_arrays = 0, bad_full = 0;
    /* three phases: fill towards N (every doubling), churn, drain */
    for (int phase = 0; phase < 3; phase++) {
        long steps = phase == 1 ? 400000 : 60000;
        for (long s = 0; s < steps; s++) {
            uint32_t idx = 1 + (uint32_t)(next() % N);
            int want_insert = phase == 0 ? next() % 8 != 0 : phase == 1 ? next() % 2 : 0;
            if (!present[idx] && want_insert && live < N) {
                uint64_t cap0 = t.mask + 1;
                hash_of[idx] = pick_hash(&t, ginv);
                key_of[idx] = next();
                tfu_tab_insert(&t, hash_of[idx], idx, h_of, NULL);
                present[idx] = 1;
                live++;
                if (t.mask + 1 != cap0) {
                    doublings++;
                    /* past load 1/16 below 65,536 slots, 1/8 from there (table.h) */
                    bad_cap += t.mask + 1 != 2 * cap0 || live * (cap0 < 65536 ? 16 : 8) <= cap0;
                    bad_full += !reachable_all(&t) || !agrees_all(&t);
                }
            } else if (present[idx] && !want_insert) {
                tfu_tab_erase(&t, hash_of[idx], idx, h_of, NULL);
                present[idx] = 0;
                live--;
            }
            bad_find +=
                tfu_tab_find(&t, hash_of[idx], eq, NULL, &key_of[idx]) != (present[idx] ? idx : 0);
            bad_count += t.count != live;
            bad_cap += live * 4 > t.mask + 1 || t.mask + 1 > t.max_cap;
            bad_arrays += !((t.slot == a && t.spare == b) || (t.slot == b && t.spare == a));
            wraps += t.slot[t.mask] && t.slot[0];
            if (s % 4096 == 0)
                bad_full += !reachable_all(&t) || !agrees_all(&t);
        }
        bad_full += !reachable_all(&t) || !agrees_all(&t);
    }
    CHECK_EQ(bad_find, 0);
    CHECK_EQ(bad_count, 0);
    CHECK_EQ(bad_cap, 0);
    CHECK_EQ(bad_arrays, 0);
    CHECK_EQ(bad_full, 0);
    /* 1024 -> 2048 -> ... -> 32768 = tfu_table_capacity(6000): five doublings, each seen */
    CHECK_EQ(doublings, 5);
    CHECK_EQ(t.mask + 1, t.max_cap);
    CHECK(wraps > 1000); /* clusters did cross the end of the array */
    CHECK_EQ(live, 0);
    tfu_table_fini(&t);
}

/* A table for a handful of entries starts at its largest size and never doubles; a table at
 * its largest size holds all its entries. */
static void test_small_and_full(void)
{
    tfu_table t;
    CHECK_RC(tfu_table_init(&t, 3), 0);
    CHECK_EQ(t.mask + 1, 16);
    CHECK_EQ(tfu_table_bytes(3), 2 * 16 * sizeof(uint32_t));
    for (uint32_t i = 1; i <= 3; i++) {
        key_of[i] = i;
        hash_of[i] = 42; /* one home */
        tfu_tab_insert(&t, hash_of[i], i, h_of, NULL);
    }
    CHECK_EQ(t.mask + 1, 16);
    for (uint32_t i = 1; i <= 3; i++)
        CHECK_EQ(tfu_tab_find(&t, 42, eq, NULL, &key_of[i]), i);
    uint64_t missing = 99;
    CHECK_EQ(tfu_tab_find(&t, 42, eq, NULL, &missing), 0);
    tfu_tab_erase(&t, 42, 1, h_of, NULL);
    CHECK_EQ(tfu_tab_find(&t, 42, eq, NULL, &key_of[3]), 3);
    CHECK_EQ(tfu_tab_find(&t, 42, eq, NULL, &key_of[1]), 0);
    tfu_table_fini(&t);

    CHECK_RC(tfu_table_init(&t, 1000), 0);
    CHECK_EQ(t.max_cap, 4096);
    for (uint32_t i = 1; i <= 1000; i++) {
        key_of[i] = i * 7919ull;
        hash_of[i] = i;
        tfu_tab_insert(&t, hash_of[i], i, h_of, NULL);
    }
    CHECK_EQ(t.mask + 1, 4096);
    CHECK_EQ(t.count, 1000);
    int bad = 0;
    for (uint32_t i = 1; i <= 1000; i++)
        bad += tfu_tab_find(&t, hash_of[i], eq, NULL, &key_of[i]) != i;
    CHECK_EQ(bad, 0);
    tfu_table_fini(&t);
}

/* tfu_table_reserve: more room keeps every entry findable (placed again in new arrays), less or
 * equal room changes nothing; tfu_table_clear empties the table and it fills again. */
static void test_reserve_and_clear(void)
{
    tfu_table t;
    CHECK_RC(tfu_table_init(&t, 200), 0);
    CHECK_EQ(t.max_cap, 1024);
    for (uint32_t i = 1; i <= 200; i++) {
        key_of[i] = i * 31ull;
        hash_of[i] = next();
        tfu_tab_insert(&t, hash_of[i], i, h_of, NULL);
    }
    const uint32_t *before = t.slot;
    CHECK_RC(tfu_table_reserve(&t, 100, h_of, NULL), 0);
    CHECK(t.slot == before);
    CHECK_RC(tfu_table_reserve(&t, 3000, h_of, NULL), 0);
    CHECK_EQ(t.max_cap, tfu_table_capacity(3000));
    CHECK_EQ(t.count, 200);
    for (uint32_t i = 201; i <= 3000; i++) {
        key_of[i] = i * 31ull;
        hash_of[i] = next();
        tfu_tab_insert(&t, hash_of[i], i, h_of, NULL);
    }
    CHECK_EQ(t.count, 3000);
    CHECK(t.count * 4 <= t.mask + 1);
    int bad = 0;
    for (uint32_t i = 1; i <= 3000; i++)
        bad += tfu_tab_find(&t, hash_of[i], eq, NULL, &key_of[i]) != i;
    CHECK_EQ(bad, 0);
    tfu_table_clear(&t);
    CHECK_EQ(t.count, 0);
    bad = 0;
    for (uint32_t i = 1; i <= 3000; i++)
        bad += tfu_tab_find(&t, hash_of[i], eq, NULL, &key_of[i]) != 0;
    CHECK_EQ(bad, 0);
    for (uint32_t i = 1; i <= 10; i++)
        tfu_tab_insert(&t, hash_of[i], i, h_of, NULL);
    CHECK_EQ(tfu_tab_find(&t, hash_of[7], eq, NULL, &key_of[7]), 7);
    tfu_table_fini(&t);
}

/* tfu_tab_find_at and tfu_tab_rekey (an entry changes its key: one probe for the new key, the
 * old slot known): under the same colliding and wrapping hashes, at a fixed size and through
 * erases and inserts between the rekeys, every entry stays findable and reachable, the count
 * does not move, and find_at says where it stopped (the entry's slot, or an empty slot). */
static void test_rekey(void)
{
    tfu_table t;
    CHECK_RC(tfu_table_init(&t, N), 0);
    const uint64_t ginv = golden_inv();
    memset(present, 0, sizeof present);
    uint64_t live = 0;
    for (uint32_t idx = 1; idx <= N / 2; idx++) { /* to load 1/4 at the largest size */
        hash_of[idx] = pick_hash(&t, ginv);
        key_of[idx] = next();
        tfu_tab_insert(&t, hash_of[idx], idx, h_of, NULL);
        present[idx] = 1;
        live++;
    }
    int bad_at = 0, bad_find = 0, bad_count = 0, bad_full = 0;
    long rekeys = 0;
    for (long s = 0; s < 300000; s++) {
        uint32_t idx = 1 + (uint32_t)(next() % N);
        if (!present[idx]) {
            if (live * 4 + 4 > t.mask + 1 || next() % 2)
                continue;
            hash_of[idx] = pick_hash(&t, ginv);
            key_of[idx] = next();
            tfu_tab_insert(&t, hash_of[idx], idx, h_of, NULL);
            present[idx] = 1;
            live++;
        } else if (next() % 8 == 0) {
            tfu_tab_erase(&t, hash_of[idx], idx, h_of, NULL);
            present[idx] = 0;
            live--;
        } else {
            uint64_t from = 0, to = 0, nk = next(), nh = pick_hash(&t, ginv);
            bad_at += tfu_tab_find_at(&t, hash_of[idx], eq, NULL, &key_of[idx], &from) != idx ||
                      t.slot[from] != idx;
            bad_at += tfu_tab_find_at(&t, nh, eq, NULL, &nk, &to) != 0 || t.slot[to] != 0;
            key_of[idx] = nk;
            hash_of[idx] = nh;
            tfu_tab_rekey(&t, from, to, h_of, NULL);
            rekeys++;
        }
        bad_find +=
            tfu_tab_find(&t, hash_of[idx], eq, NULL, &key_of[idx]) != (present[idx] ? idx : 0);
        bad_count += t.count != live;
        if (s % 1024 == 0)
            bad_full += !reachable_all(&t) || !agrees_all(&t);
    }
    bad_full += !reachable_all(&t) || !agrees_all(&t);
    CHECK(rekeys > 100000);
    CHECK_EQ(bad_at, 0);
    CHECK_EQ(bad_find, 0);
    CHECK_EQ(bad_count, 0);
    CHECK_EQ(bad_full, 0);
    tfu_table_fini(&t);
}

/* The loads a table doubles at: past 1/16 while it has fewer than 65,536 slots, past 1/8 from
 * there (table.h), each doubling at the insert that passes it, up to the size allocated. */
static uint64_t h_mix(const void *pool, uint32_t idx)
{
    (void)pool;
    return tfu_mix(idx);
}

static void test_doubling_loads(void)
{
    tfu_table t;
    CHECK_EQ(tfu_table_init(&t, 40000), 0);
    CHECK_EQ(t.max_cap, 262144);
    static const uint64_t want[][2] = {{65, 2048},     {129, 4096},    {257, 8192},
                                       {513, 16384},   {1025, 32768},  {2049, 65536},
                                       {8193, 131072}, {16385, 262144}};
    size_t k = 0;
    int bad = 0;
    for (uint32_t idx = 1; idx <= 40000; idx++) {
        uint64_t cap0 = t.mask + 1;
        tfu_tab_insert(&t, tfu_mix(idx), idx, h_mix, NULL);
        if (t.mask + 1 != cap0) {
            bad +=
                k >= sizeof want / sizeof want[0] || want[k][0] != idx || want[k][1] != t.mask + 1;
            k++;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(k, sizeof want / sizeof want[0]);
    CHECK_EQ(t.count, 40000);
    tfu_table_fini(&t);
}

int main(void)
{
    test_doubling_loads();
    test_small_and_full();
    test_random();
    test_reserve_and_clear();
    test_rekey();
    return tf_test_report();
}
