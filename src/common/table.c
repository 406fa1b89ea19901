/* The one hash table's out-of-line parts (table.h): sizing, init, growth. */
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "tollfree/error.h"

#define MIN_CAP 1024 /* slots a table starts with (4 KiB) */

uint64_t tfu_table_capacity(uint64_t entries)
{
    uint64_t cap = 16;
    while (cap < 4 * entries)
        cap <<= 1;
    return cap;
}

uint64_t tfu_table_bytes(uint64_t entries)
{
    return 2 * tfu_table_capacity(entries) * sizeof(uint32_t);
}

static void set_cap(tfu_table *t, uint64_t cap)
{
    t->mask = cap - 1;
    int bits = 0;
    while ((1ull << bits) < cap)
        bits++;
    t->shift = 64 - bits;
}

int tfu_table_init(tfu_table *t, uint64_t entries)
{
    t->max_cap = tfu_table_capacity(entries);
    t->slot = calloc(t->max_cap, sizeof *t->slot);
    t->spare = calloc(t->max_cap, sizeof *t->spare);
    if (!t->slot || !t->spare) {
        tfu_table_fini(t);
        return TF_E_NOMEM;
    }
    set_cap(t, t->max_cap < MIN_CAP ? t->max_cap : MIN_CAP);
    t->count = 0;
    return 0;
}

void tfu_table_fini(tfu_table *t)
{
    free(t->slot);
    free(t->spare);
    t->slot = t->spare = NULL;
    t->count = 0;
}

void tfu_table_clear(tfu_table *t)
{
    memset(t->slot, 0, (t->mask + 1) * sizeof *t->slot);
    t->count = 0;
}

int tfu_table_reserve(tfu_table *t, uint64_t entries, tfu_tab_hash_fn hash, const void *pool)
{
    uint64_t cap = tfu_table_capacity(entries);
    if (cap <= t->max_cap)
        return 0;
    tfu_table n = {0};
    n.max_cap = cap;
    n.slot = calloc(cap, sizeof *n.slot);
    n.spare = calloc(cap, sizeof *n.spare);
    if (!n.slot || !n.spare) {
        tfu_table_fini(&n);
        return TF_E_NOMEM;
    }
    /* the same number of slots as now, or more if the entries need them (as insert) */
    uint64_t now = t->mask + 1;
    while (now < cap && tfu_tab_over_load(t->count, now))
        now <<= 1;
    set_cap(&n, now);
    for (uint64_t i = 0; i <= t->mask; i++)
        if (t->slot[i])
            tfu_tab_place(&n, hash(pool, t->slot[i]), t->slot[i]);
    n.count = t->count;
    tfu_table_fini(t);
    *t = n;
    return 0;
}

void tfu_tab_grow(tfu_table *t, tfu_tab_hash_fn hash, const void *pool)
{
    uint32_t *old = t->slot;
    uint64_t old_cap = t->mask + 1;
    t->slot = t->spare;
    t->spare = old;
    set_cap(t, old_cap * 2);
    memset(t->slot, 0, (old_cap * 2) * sizeof *t->slot);
    for (uint64_t i = 0; i < old_cap; i++)
        if (old[i])
            tfu_tab_place(t, hash(pool, old[i]), old[i]);
}
