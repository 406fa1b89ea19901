/* The dataset store: immutable, content-addressed close series shared by every connection.
 * Handles are FNV-1a 64 of (n_bars, bytes), probed upward on a true collision
 * (docs/protocol.md). An open-addressing table keyed by handle (linear probing, deletion by
 * backward shift); entries are reference-counted so a DROP never frees a dataset a sweep is
 * reading. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "server/server.h"

static uint32_t home(const srv_datasets *t, uint64_t handle)
{
    /* Handles are hashes already, but probing makes neighbours: spread them. */
    return (uint32_t)((handle * 0x9E3779B97F4A7C15ull) >> 32) & (t->cap - 1);
}

static int64_t find(const srv_datasets *t, uint64_t handle)
{
    for (uint32_t i = home(t, handle), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
        if (!t->slots[i])
            return -1;
        if (t->slots[i]->handle == handle)
            return i;
    }
    return -1;
}

static void insert(srv_datasets *t, srv_dataset *d)
{
    uint32_t i = home(t, d->handle);
    while (t->slots[i])
        i = (i + 1) & (t->cap - 1);
    t->slots[i] = d;
}

static void remove_at(srv_datasets *t, uint32_t i)
{
    t->slots[i] = NULL;
    /* Backward shift: move later entries of the run into the hole when their home allows. */
    for (uint32_t j = (i + 1) & (t->cap - 1); t->slots[j]; j = (j + 1) & (t->cap - 1)) {
        uint32_t h = home(t, t->slots[j]->handle);
        /* Entry j may move to i iff i lies cyclically in [h, j). */
        int movable = (i <= j) ? (h <= i || h > j) : (h <= i && h > j);
        if (movable) {
            t->slots[i] = t->slots[j];
            t->slots[j] = NULL;
            i = j;
        }
    }
}

static void free_dataset(srv *s, srv_dataset *d)
{
    tf_series_close(d->series);
    srv_mem_release(s, d->cache_reserved);
    __atomic_fetch_sub(&s->cache_reserved, d->cache_reserved, __ATOMIC_RELAXED);
    if (d->map_len)
        munmap((void *)d->close, d->map_len);
    else
        free((void *)d->close);
    srv_mem_release(s, d->bytes);
    free(d);
}

int srv_ds_init(srv *s)
{
    srv_datasets *t = &s->ds;
    memset(t, 0, sizeof *t);
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)s->cfg.max_datasets)
        cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots)
        return TF_E_NOMEM;
    t->cap = cap;
    pthread_mutex_init(&t->lock, NULL);
    return 0;
}

void srv_ds_fini(srv *s)
{
    srv_datasets *t = &s->ds;
    for (uint32_t i = 0; t->slots && i < t->cap; i++)
        if (t->slots[i])
            free_dataset(s, t->slots[i]);
    free(t->slots);
    t->slots = NULL;
    pthread_mutex_destroy(&t->lock);
}

int srv_ds_add(srv *s, const double *close, uint64_t n_bars, size_t map_len, int heap_copy,
               uint64_t *handle, int *created, int *adopted)
{
    srv_datasets *t = &s->ds;
    *adopted = 0;
    *created = 0;
    uint64_t bytes = 8 * n_bars;
    uint64_t h = tf_wire_dataset_hash(close, n_bars);
    double *copy = NULL;
    pthread_mutex_lock(&t->lock);
    for (;; h++) {
        if (h == 0)
            continue;
        int64_t i = find(t, h);
        if (i < 0)
            break;
        const srv_dataset *d = t->slots[i];
        if (d->n_bars == n_bars && (bytes == 0 || memcmp(d->close, close, bytes) == 0)) {
            pthread_mutex_unlock(&t->lock);
            *handle = h;
            return 0;
        }
    }
    int rc = 0;
    if (t->count >= s->cfg.max_datasets || srv_mem_reserve(s, bytes))
        rc = TF_E_DATASET_LIMIT;
    srv_dataset *d = rc ? NULL : calloc(1, sizeof *d);
    if (!rc && !d)
        rc = TF_E_NOMEM;
    if (!rc && heap_copy) {
        copy = malloc(bytes ? bytes : 1);
        if (!copy)
            rc = TF_E_NOMEM;
        else if (bytes)
            memcpy(copy, close, bytes);
    }
    if (rc) {
        if (rc == TF_E_NOMEM)
            srv_mem_release(s, bytes);
        pthread_mutex_unlock(&t->lock);
        free(d);
        return rc;
    }
    d->handle = h;
    d->n_bars = n_bars;
    d->close = heap_copy ? copy : close;
    d->bytes = bytes;
    d->map_len = heap_copy ? 0 : map_len;
    d->refs = 1;
    /* The first-stage cache is reserved from --max-memory, but caches together never take more
     * than half of it, so they cannot crowd out datasets and sessions. A dataset without a cache
     * is still served, just without reuse across calls. */
    uint64_t cache = s->cfg.dataset_cache;
    uint64_t cached = __atomic_load_n(&s->cache_reserved, __ATOMIC_RELAXED);
    if (cache && n_bars && cached + cache <= s->cfg.net.max_memory / 2 &&
        srv_mem_reserve(s, cache) == 0) {
        d->cache_reserved = cache;
        __atomic_fetch_add(&s->cache_reserved, cache, __ATOMIC_RELAXED);
    }
    if (tf_series_open(&d->series, d->close, (int64_t)n_bars, (size_t)d->cache_reserved)) {
        d->series = NULL; /* plain sweeps; the reservation is returned with the dataset */
    }
    insert(t, d);
    t->count++;
    t->bytes += bytes;
    /* Stats under the lock, so concurrent adds and drops never publish a stale count. */
    __atomic_store_n(&s->st[TF_STAT_DATASETS], t->count, __ATOMIC_RELAXED);
    __atomic_store_n(&s->st[TF_STAT_DATASET_BYTES], t->bytes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&t->lock);
    *adopted = !heap_copy;
    *created = 1;
    *handle = h;
    return 0;
}

srv_dataset *srv_ds_get(srv *s, uint64_t handle)
{
    srv_datasets *t = &s->ds;
    pthread_mutex_lock(&t->lock);
    int64_t i = find(t, handle);
    srv_dataset *d = i < 0 ? NULL : t->slots[i];
    if (d)
        d->refs++;
    pthread_mutex_unlock(&t->lock);
    return d;
}

void srv_ds_put(srv *s, srv_dataset *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&s->ds.lock);
    int last = --d->refs == 0;
    pthread_mutex_unlock(&s->ds.lock);
    if (last)
        free_dataset(s, d);
}

int srv_ds_drop(srv *s, uint64_t handle)
{
    srv_datasets *t = &s->ds;
    pthread_mutex_lock(&t->lock);
    int64_t i = find(t, handle);
    if (i < 0) {
        pthread_mutex_unlock(&t->lock);
        return TF_E_UNKNOWN_DATASET;
    }
    srv_dataset *d = t->slots[i];
    remove_at(t, (uint32_t)i);
    t->count--;
    t->bytes -= d->bytes;
    int last = --d->refs == 0; /* d may be freed by a user as soon as the lock is released */
    __atomic_store_n(&s->st[TF_STAT_DATASETS], t->count, __ATOMIC_RELAXED);
    __atomic_store_n(&s->st[TF_STAT_DATASET_BYTES], t->bytes, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&t->lock);
    if (last)
        free_dataset(s, d);
    return 0;
}
