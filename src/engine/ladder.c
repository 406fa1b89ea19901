/* The price ladder of each book side: a dense window of level indices by key, with a bitmap of
 * the levels that have orders, beside the red-black tree that holds the levels outside it.
 *
 * Inside the window (keys base .. base + lad_w - 1), finding a level is one array read, adding
 * or dropping one an array write, and the next worse level with orders a scan of three bitmap
 * levels (u64 words, a summary bit per word, a top bit per summary word): no tree walk, no
 * rotation and no price-table probe. Outside it, the tree and the price table as before, so a
 * hostile spread of prices costs what it did. The window is placed (an eighth of it better than
 * the key, the rest worse, as books grow away from their best) when the side's first level is
 * created, and again around the best when a new level falls outside a window that holds no
 * level, or outside one whose first half has lost the best after the tree has taken more new
 * levels than the side holds (replace_window); its levels go to the tree and the tree's levels
 * inside the new window come in (an empty one is freed instead: the ladder holds only levels with
 * orders, book.c). Nothing observable depends on where a level lives: every walk goes in key
 * order across both. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

/* The ladders of all sides together stay under this (slot pages are touched only where levels
 * are, but the address space and tf_engine_bytes_needed count all of it). */
#define LADDER_BUDGET (32ull << 20)
#define LADDER_MIN 1024u

static uint32_t ladder_width(uint32_t n_books)
{
    uint64_t per_side = LADDER_BUDGET * 8 / (2ull * n_books * 33); /* 4 + 1/8 bytes a key */
    uint32_t w = ENG_LADDER_MAX;
    while (w > per_side)
        w >>= 1;
    return w >= LADDER_MIN ? w : 0;
}

uint64_t eng_ladder_bytes(uint32_t n_books)
{
    uint64_t w = ladder_width(n_books);
    return 2ull * n_books * (w * sizeof(uint32_t) + w / 8);
}

int eng_ladder_init(tf_engine *e)
{
    uint32_t w = ladder_width(e->n_books);
    e->lad_w = w;
    if (!w)
        return 0;
    uint64_t n = 2ull * e->n_books;
    /* the bits first (8-byte aligned), then the slots */
    e->lad_mem = calloc(1, eng_ladder_bytes(e->n_books));
    if (!e->lad_mem)
        return TF_E_NOMEM;
    uint64_t *bits = e->lad_mem;
    uint32_t *slots = (uint32_t *)(bits + n * (w / 64));
    for (uint64_t t = 0; t < n; t++) {
        e->sides[t].bits = bits + t * (w / 64);
        e->sides[t].slot = slots + t * w;
    }
    return 0;
}

/* The first position >= p whose level has orders, or lad_w. */
static uint32_t ladder_next(const tf_engine *e, const eng_side *s, uint64_t p)
{
    const uint64_t w = e->lad_w, words = w / 64;
    if (p >= w)
        return (uint32_t)w;
    uint64_t wi = p >> 6;
    uint64_t m = s->bits[wi] & (~0ull << (p & 63));
    if (m)
        return (uint32_t)((wi << 6) + (uint64_t)__builtin_ctzll(m));
    if (++wi >= words)
        return (uint32_t)w;
    uint64_t si = wi >> 6;
    uint64_t sm = s->sum[si] & (~0ull << (wi & 63));
    if (!sm) {
        uint64_t ti = si + 1;
        if (ti >= (words + 63) / 64)
            return (uint32_t)w;
        uint64_t tm = s->top & (~0ull << ti);
        if (!tm)
            return (uint32_t)w;
        si = (uint64_t)__builtin_ctzll(tm);
        sm = s->sum[si];
    }
    wi = (si << 6) + (uint64_t)__builtin_ctzll(sm);
    return (uint32_t)((wi << 6) + (uint64_t)__builtin_ctzll(s->bits[wi]));
}

static void ladder_put(tf_engine *e, eng_side *s, uint32_t li)
{
    const eng_level *l = &e->levels[li];
    s->slot[(uint64_t)l->key - (uint64_t)s->base] = li;
    s->n_win++;
    if (l->n_orders)
        eng_level_filled(e, s, l);
}

/* The window placed for key: [key - w/8, key + 7w/8), clamped inside the int64 range. */
static int64_t window_base(int64_t key, uint32_t w)
{
    const int64_t before = w / 8;
    if (key < INT64_MIN + before)
        return INT64_MIN;
    int64_t b = key - before;
    return b > INT64_MAX - (int64_t)(w - 1) ? INT64_MAX - (int64_t)(w - 1) : b;
}

/* The side's window moves to key: its levels go to the tree, then the tree's levels inside the
 * new window come in. */
static void place_window(tf_engine *e, eng_side *s, int64_t key)
{
    for (uint64_t i = 0; s->n_win && i < e->lad_w; i++) {
        uint32_t li = s->slot[i];
        if (li) {
            s->slot[i] = 0;
            s->n_win--;
            eng_insert_level(e, li);
            eng_tree_insert(e, s, li);
        }
    }
    memset(s->bits, 0, e->lad_w / 8);
    memset(s->sum, 0, sizeof s->sum);
    s->top = 0;
    s->tree_adds = 0;
    s->base = window_base(key, e->lad_w);
    const int64_t last = s->base + (int64_t)(e->lad_w - 1);
    for (;;) { /* keys are > INT64_MIN: first_above(base - 1) without the overflow */
        uint32_t x = eng_rbt_first_above(e, s, s->base == INT64_MIN ? INT64_MIN : s->base - 1);
        if (!x || e->levels[x].key > last)
            break;
        eng_tree_remove(e, s, x);
        eng_remove_level(e, x);
        if (e->levels[x].n_orders)
            ladder_put(e, s, x);
        else /* the ladder keeps no empty level (book.c) */
            eng_level_discard(e, s, x);
    }
}

/* Whether a new level at key, outside the window, moves the window first: always when the
 * window holds no level; else when the best is not in the window's first half and the tree has
 * taken more new levels since the last placement than the side has levels (so that a placement,
 * O(levels) tree moves and one pass over the window, costs O(1) tree moves per level added). */
static int replace_window(const tf_engine *e, const eng_side *s)
{
    if (!s->n_win)
        return 1;
    if (s->tree_adds < s->n_nodes + 1024)
        return 0;
    return !s->best || (uint64_t)e->levels[s->best].key - (uint64_t)s->base >= e->lad_w / 2;
}

void eng_level_attach(tf_engine *e, eng_side *s, uint32_t li)
{
    int64_t key = e->levels[li].key;
    if (e->lad_w && !eng_in_ladder(e, s, key) && replace_window(e, s))
        place_window(e, s, s->best ? e->levels[s->best].key : key);
    s->n_nodes++;
    if (eng_in_ladder(e, s, key)) {
        ladder_put(e, s, li);
        return;
    }
    s->tree_adds++;
    eng_insert_level(e, li);
    eng_tree_insert(e, s, li);
}

void eng_level_detach(tf_engine *e, eng_side *s, uint32_t li)
{
    int64_t key = e->levels[li].key;
    s->n_nodes--;
    if (eng_in_ladder(e, s, key)) {
        s->slot[(uint64_t)key - (uint64_t)s->base] = 0;
        s->n_win--;
        return;
    }
    eng_tree_remove(e, s, li);
    eng_remove_level(e, li);
}

/* From tree level x (0: none), the first with orders, stepping over empty ones; all of them are
 * past the window. */
static uint32_t tree_from(const tf_engine *e, uint32_t x)
{
    while (x && !e->levels[x].n_orders)
        x = eng_rbt_succ(e, x);
    return x;
}

uint32_t eng_tree_next(const tf_engine *e, uint32_t li)
{
    const eng_level *l = &e->levels[li];
    const eng_side *s = &e->sides[l->tree];
    if (eng_in_ladder(e, s, l->key)) {
        uint32_t p = ladder_next(e, s, (uint64_t)l->key - (uint64_t)s->base + 1);
        if (p < e->lad_w)
            return s->slot[p];
        return tree_from(e, eng_rbt_first_above(e, s, s->base + (int64_t)(e->lad_w - 1)));
    }
    /* From a tree level before the window, the window's levels come before the tree's next
     * one that is past the window (tree levels are never inside it). */
    int before = s->n_win && l->key < s->base;
    for (uint32_t x = li;;) {
        x = eng_rbt_succ(e, x);
        if (before && (!x || e->levels[x].key > s->base)) {
            before = 0;
            uint32_t p = ladder_next(e, s, 0);
            if (p < e->lad_w)
                return s->slot[p];
        }
        if (!x || e->levels[x].n_orders)
            return x;
    }
}

/* The ladder's rules: each slot's level has its key and side, each bit says whether that level
 * has orders, each summary and top bit whether the words below it have a bit set; *count: its
 * levels. */
static int ladder_check(const tf_engine *e, const eng_side *s, uint64_t *count)
{
    *count = 0;
    if (!e->lad_w)
        return 0;
    uint32_t t = (uint32_t)(s - e->sides);
    for (uint64_t i = 0; i < e->lad_w; i++) {
        uint32_t li = s->slot[i];
        int bit = (s->bits[i >> 6] >> (i & 63)) & 1;
        if (!li) {
            if (bit)
                return -1;
            continue;
        }
        const eng_level *l = &e->levels[li];
        if ((uint64_t)l->key - (uint64_t)s->base != i || l->tree != t || bit != !!l->n_orders)
            return -1;
        (*count)++;
    }
    for (uint64_t wi = 0; wi < e->lad_w / 64; wi++)
        if (!!s->bits[wi] != (int)((s->sum[wi >> 6] >> (wi & 63)) & 1))
            return -1;
    for (uint64_t si = 0; si < ENG_LADDER_MAX / 4096; si++)
        if (!!s->sum[si] != (int)((s->top >> si) & 1))
            return -1;
    return *count == s->n_win ? 0 : -1;
}

int eng_tree_check(const tf_engine *e, const eng_side *s)
{
    uint64_t in_tree, in_ladder;
    if (eng_rbt_check(e, s, &in_tree) || ladder_check(e, s, &in_ladder) ||
        in_tree + in_ladder != s->n_nodes)
        return -1;
    /* no tree level inside the window */
    for (uint32_t x = eng_rbt_first_above(e, s, INT64_MIN); x; x = eng_rbt_succ(e, x))
        if (eng_in_ladder(e, s, e->levels[x].key))
            return -1;
    /* the first level with orders: the smaller of the ladder's first and the tree's first */
    uint32_t first = eng_rbt_first_above(e, s, INT64_MIN);
    if (first && !e->levels[first].n_orders)
        first = eng_tree_next(e, first);
    uint32_t p = e->lad_w ? ladder_next(e, s, 0) : 0;
    if (e->lad_w && p < e->lad_w && (!first || e->levels[s->slot[p]].key < e->levels[first].key))
        first = s->slot[p];
    uint64_t with_orders = 0;
    int64_t prev = INT64_MIN;
    for (uint32_t x = first; x; x = eng_tree_next(e, x)) {
        if (with_orders && e->levels[x].key <= prev)
            return -1;
        prev = e->levels[x].key;
        with_orders++;
    }
    return first == s->best && with_orders == s->n_levels ? 0 : -1;
}
