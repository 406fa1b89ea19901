/* Books: finding an instrument's book, resting an order at the back of its level, and taking
 * an order out of its level and out of the lookup tables.
 *
 * Empty levels: a level in its side's ladder (ladder.c) is freed as soon as its last order leaves
 * (its slot cleared, the entry on the free list): there a new level costs an array write, no
 * more than a kept one, and a ladder that holds only levels with orders needs no step over empty
 * ones. A level in a tree stays there and in the level table, empty, on a list of kept empty
 * levels (oldest first); an order arriving at its price fills it again with no tree insert and
 * no table insert. Past ENG_EMPTY_LEVELS kept levels, the oldest is removed for good (tree,
 * table, free list), as is one when the pool has no free level left, and a kept level that a
 * window placement brings into the ladder (eng_level_discard). Nothing observable depends on the
 * kept levels: every walk (eng_tree_next) steps over them, the side's best and its count of
 * levels count only levels with orders, and tf_engine_level_at reports an empty one as absent. */
#include "engine/engine_internal.h"

int eng_book_of(const tf_engine *e, uint64_t instrument_id)
{
    if (e->direct) {
        uint64_t off = instrument_id - e->direct_base; /* wraps for ids below the base */
        return off < e->direct_len ? (int)e->direct[off] - 1 : -1;
    }
    uint32_t lo = 0, hi = e->n_books;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e->instrument[mid] < instrument_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->n_books && e->instrument[lo] == instrument_id ? (int)lo : -1;
}

static void unlist_empty(tf_engine *e, eng_level *l)
{
    if (l->empty_older)
        e->levels[l->empty_older].empty_newer = l->empty_newer;
    else
        e->empty_oldest = l->empty_newer;
    if (l->empty_newer)
        e->levels[l->empty_newer].empty_older = l->empty_older;
    else
        e->empty_newest = l->empty_older;
    e->n_empty--;
}

/* The kept empty level li leaves its tree and the level table for the free list. */
static void drop_level(tf_engine *e, uint32_t li)
{
    eng_level *l = &e->levels[li];
    unlist_empty(e, l);
    eng_level_detach(e, &e->sides[l->tree], li);
    l->head = e->free_level;
    e->free_level = li;
}

void eng_level_discard(tf_engine *e, eng_side *s, uint32_t li)
{
    eng_level *l = &e->levels[li];
    unlist_empty(e, l);
    s->n_nodes--;
    l->head = e->free_level;
    e->free_level = li;
}

/* The level li has just lost its last order: freed when in the ladder, else kept, the newest on
 * the list. */
static void close_level(tf_engine *e, eng_side *s, uint32_t li)
{
    eng_level *l = &e->levels[li];
    s->n_levels--;
    eng_level_emptied(e, s, l);
    if (s->best == li)
        s->best = eng_tree_next(e, li);
    if (eng_in_ladder(e, s, l->key)) {
        s->slot[(uint64_t)l->key - (uint64_t)s->base] = 0;
        s->n_win--;
        s->n_nodes--;
        l->head = e->free_level;
        e->free_level = li;
        return;
    }
    l->empty_newer = 0;
    l->empty_older = e->empty_newest;
    if (e->empty_newest)
        e->levels[e->empty_newest].empty_newer = li;
    else
        e->empty_oldest = li;
    e->empty_newest = li;
    if (++e->n_empty > ENG_EMPTY_LEVELS)
        drop_level(e, e->empty_oldest);
}

/* A free level entry: the free list, then a never-used one, else the oldest kept empty level
 * (there is one: a level with orders holds at least one of at most max_orders - 1 other live
 * orders while an order is being linked, and the pool has max_orders entries). */
static uint32_t new_level(tf_engine *e)
{
    if (!e->free_level) {
        if (e->fresh_level <= e->max_orders)
            return e->fresh_level++;
        drop_level(e, e->empty_oldest);
    }
    uint32_t li = e->free_level;
    e->free_level = e->levels[li].head;
    return li;
}

/* The level for key on side `tree` that an order is about to join, when eng_find_level gave li
 * = 0 (none: a new level, in the ladder or the tree) or a kept empty level of the tree (listed
 * again; the ladder keeps none). */
uint32_t eng_level_open(tf_engine *e, uint32_t tree, int64_t key, uint32_t li)
{
    eng_side *s = &e->sides[tree];
    if (!li) {
        li = new_level(e);
        eng_level_init(&e->levels[li], tree, key);
        eng_level_attach(e, s, li);
    } else {
        unlist_empty(e, &e->levels[li]);
    }
    eng_level_filled(e, s, &e->levels[li]);
    s->n_levels++;
    if (!s->best || key < e->levels[s->best].key)
        s->best = li;
    return li;
}

void eng_level_close(tf_engine *e, uint32_t li)
{
    close_level(e, &e->sides[e->levels[li].tree], li);
}

void eng_link(tf_engine *e, uint32_t oi, uint32_t tree, int64_t price)
{
    eng_link_in(e, oi, tree, price);
}

/* The caller has checked that a live-order slot is free (the live-order limit). The order's
 * filled starts at 0: a caller whose order has traded sets it after. */
uint32_t eng_rest(tf_engine *e, uint32_t tree, int64_t price, uint64_t id, uint64_t account,
                  uint64_t coid, uint64_t qty)
{
    uint32_t oi = e->free_order;
    if (oi)
        e->free_order = e->orders[oi].next;
    else
        oi = e->fresh_order++;
    eng_order *o = &e->orders[oi];
    o->id = id;
    o->account = account;
    o->coid = coid;
    o->remaining = qty;
    e->orders[oi].filled = 0;
    e->by_gateway[oi] = (uint8_t)e->ext;
    eng_link(e, oi, tree, price);
    e->live++;
    if (e->n_tracked)
        eng_count_open(e, account, 1);
    eng_insert_id(e, oi);
    eng_insert_client(e, oi);
    return oi;
}

void eng_unlink(tf_engine *e, uint32_t oi)
{
    eng_unlink_in(e, oi);
}

void eng_forget(tf_engine *e, uint32_t oi)
{
    eng_remove_id(e, oi);
    eng_remove_client(e, oi);
    e->orders[oi].next = e->free_order;
    e->free_order = oi;
    e->live--;
    if (e->n_tracked)
        eng_count_open(e, e->orders[oi].account, -1);
}
