/* Prepared series: a close series with a cache of whole-series first-stage WMAs.
 *
 * Entries are only ever added (never evicted) while the series is open, so a row pointer handed
 * to a sweep stays valid for as long as the series does. A mutex guards the table; the WMAs are
 * computed outside it, block by block by the sweep that reserved them. Two sweeps missing the same
 * length both compute it; the second to publish leaves its copy unused (the values are equal). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "kernel_internal.h"

typedef struct entry {
    int64_t len;
    double *row;
} entry;

/* Rows are carved from arenas of ARENA bytes (one mmap instead of one per row). Rows are never
 * freed one by one (entries are never evicted); a row a racing sweep published first is left
 * unused in its arena. The first sweep pays the page faults of its new rows (~1.7 us per 4 KiB
 * here); transparent huge pages would cut them but stall for compaction on first touch. */
#define ARENA ((size_t)64 << 20)

typedef struct arena {
    struct arena *next;
    size_t size, used;
} arena;

struct tf_series {
    const double *close;
    int64_t n_bars;
    size_t budget, used; /* bytes: budget, and cached + reserved */
    pthread_mutex_t mu;
    entry *ent;
    int64_t n_ent, cap;
    arena *arenas; /* newest first */
};

static double *arena_alloc(tf_series *s, size_t bytes)
{
    size_t need = (bytes + 63) & ~(size_t)63;
    arena *a = s->arenas;
    if (!a || a->size - a->used < need) {
        size_t size = need + 64 > ARENA ? need + 64 : ARENA;
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        a = m;
        a->next = s->arenas;
        a->size = size;
        a->used = 64; /* the header, one cache line */
        s->arenas = a;
    }
    double *p = (double *)((char *)a + a->used);
    a->used += need;
    return p;
}

int tf_series_open(tf_series **out, const double *close, int64_t n_bars, size_t cache_bytes)
{
    if (!out)
        return TF_E_NULL_ARG;
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    if (n_bars > 0 && !close)
        return TF_E_NULL_ARG;
    tf_series *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    s->close = close;
    s->n_bars = n_bars;
    s->budget = cache_bytes;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return 0;
}

void tf_series_close(tf_series *s)
{
    if (!s)
        return;
    for (arena *a = s->arenas, *next; a; a = next) {
        next = a->next;
        munmap(a, a->size);
    }
    free(s->ent);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

size_t tf_series_cached_bytes(tf_series *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    size_t n = (size_t)s->n_ent * (size_t)s->n_bars * sizeof(double);
    pthread_mutex_unlock(&s->mu);
    return n;
}

int tf_series_sweep(tf_series *s, const int64_t *params, int64_t n_combos, double *pnl,
                    int64_t *trades, const tf_sweep_opts *opts)
{
    if (!s)
        return TF_E_NULL_ARG;
    return tfk_sweep_impl(s->close, s->n_bars, params, n_combos, pnl, trades, opts, s);
}

static entry *find(tf_series *s, int64_t len)
{
    for (int64_t i = 0; i < s->n_ent; i++)
        if (s->ent[i].len == len)
            return &s->ent[i];
    return NULL;
}

int tfk_series_reserve(tf_series *s, const int64_t *len, int64_t n_len, const double **full,
                       int64_t *fill_idx, double **fill_buf, int64_t *n_fill)
{
    size_t row_bytes = (size_t)s->n_bars * sizeof(double);
    *n_fill = 0;
    pthread_mutex_lock(&s->mu);
    for (int64_t u = 0; u < n_len; u++) {
        entry *e = find(s, len[u]);
        full[u] = e ? e->row : NULL;
        if (e || row_bytes == 0 || s->used + row_bytes > s->budget)
            continue;
        double *buf = arena_alloc(s, row_bytes);
        if (!buf)
            continue; /* no cache for this length; the block path computes it */
        s->used += row_bytes;
        fill_idx[*n_fill] = u;
        fill_buf[*n_fill] = buf;
        full[u] = buf;
        (*n_fill)++;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void tfk_series_publish(tf_series *s, const int64_t *len, const int64_t *fill_idx,
                        double **fill_buf, int64_t n_fill, int ok)
{
    size_t row_bytes = (size_t)s->n_bars * sizeof(double);
    pthread_mutex_lock(&s->mu);
    for (int64_t k = 0; k < n_fill; k++) {
        int64_t L = len[fill_idx[k]];
        if (ok && !find(s, L) && s->n_ent == s->cap) {
            int64_t cap = s->cap ? 2 * s->cap : 64;
            entry *ne = realloc(s->ent, sizeof(entry) * (size_t)cap);
            if (ne) {
                s->ent = ne;
                s->cap = cap;
            }
        }
        if (ok && !find(s, L) && s->n_ent < s->cap) {
            s->ent[s->n_ent++] = (entry){L, fill_buf[k]};
        } else {
            s->used -= row_bytes; /* the arena keeps the bytes until close */
        }
    }
    pthread_mutex_unlock(&s->mu);
}
