/* The order engine's internals: pools, tables and trees sized once at create.
 *
 * Everything is an index into a preallocated array; index 0 is the null of each array, so a
 * zeroed field means "none". Live orders live in `orders`, linked FIFO within their price level.
 * Price levels live in `levels`; each side of each book keeps its levels in a price ladder (a
 * dense window of level indices by key with a bitmap of the levels that have orders, ladder.c)
 * and, for keys outside that window, a red-black tree, both ordered best first (the key is the
 * price for asks and -price for bids, so "best" is the smallest key on both sides) with the best
 * level cached. Three open-addressing tables of u32 indices (linear probing, load <= 1/4,
 * backward-shift deletion) find an order by id, an order by (account, client_order_id), and a
 * level outside the ladder by (side, price); they store only indices and compare against the
 * pool entry, so each probe costs one 4-byte slot and the entry the caller needs next.
 */
#ifndef TF_ENGINE_INTERNAL_H
#define TF_ENGINE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/table.h"
#include "tollfree/engine.h"

typedef struct eng_order {
    uint64_t id;
    uint64_t account;
    uint64_t coid;
    int64_t price;
    uint64_t remaining; /* 1..INT64_MAX while live */
    /* Its cumulative filled quantity since it was accepted (a replace keeps it). In the entry
     * rather than an array beside the pool: the entry is 64 bytes and the pool 64-byte aligned,
     * so every order is one cache line, and an execution report (ReplacedEx, Fill, CanceledEx)
     * reads it from the line the command has already touched (issue 24: a separate array cost a
     * miss per ReplaceByClient, and a 56-byte entry straddled two lines three times in four). */
    uint64_t filled;
    uint32_t next; /* next (younger) order in the level; free list link when free */
    uint32_t prev; /* previous (older) order in the level */
    uint32_t level;
    uint32_t tree; /* book * 2 + side: which side of which book */
} eng_order;

_Static_assert(sizeof(eng_order) == 64, "an order is one cache line");

typedef struct eng_level {
    int64_t key; /* asks: price; bids: -price (prices are >= 1, so -price never overflows) */
    uint32_t head, tail;
    uint32_t left, right, parent; /* red-black tree links; 0 is the black sentinel */
    uint32_t tree;
    uint32_t red;
    uint32_t n_orders;
    /* The exact sum of its orders' remaining quantities: total_lo + 2^64 * total_hi (at most
     * 2^30 orders of at most 2^63 - 1 each: below 2^93). Every change of an order's remaining
     * while it is in the level, and every link and unlink, moves it by the same amount. (Plain
     * words: packing the carry beside `red` in bit-fields cost the tree code more instructions
     * than the 8 bytes it saved.) */
    uint32_t total_hi;
    uint64_t total_lo;
    /* While the level is empty and kept in its tree (book.c, "empty levels"; a ladder level is
     * freed when it empties): its neighbours in the list of kept empty levels, older and newer
     * (0: none). These fill the level to 64 bytes: one cache
     * line per level (the pool is 64-byte aligned), and an index is a shift (a 56-byte stride
     * cost an extra instruction at every e->levels[li]). */
    uint32_t empty_older, empty_newer;
} eng_level;

static inline void eng_total_add(eng_level *l, uint64_t q)
{
    l->total_lo += q;
    l->total_hi += l->total_lo < q;
}

static inline void eng_total_sub(eng_level *l, uint64_t q)
{
    l->total_hi -= l->total_lo < q;
    l->total_lo -= q;
}

/* The level's total as the API reports it: saturated at UINT64_MAX. */
static inline uint64_t eng_total(const eng_level *l)
{
    return l->total_hi ? UINT64_MAX : l->total_lo;
}

/* An account with a self-trade prevention mode other than none, or whose live orders are
 * counted (stp.c). */
typedef struct eng_stp {
    uint64_t account;
    uint32_t mode;    /* tf_engine_stp */
    uint32_t tracked; /* 1: `open` counts its live orders */
    uint64_t open;
} eng_stp;

/* The widest price ladder of a book side, in ticks of key (ladder.c). */
#define ENG_LADDER_MAX 65536u

/* One side of one book: its levels, in the side's price ladder when their key is inside the
 * ladder's window, else in its red-black tree (and the price table). No tree level ever has a key
 * inside the window (ladder.c keeps that when the window moves). */
typedef struct eng_side {
    uint32_t root;
    uint32_t best;     /* the smallest key of a level with orders, 0 when there is none */
    uint64_t n_orders; /* live orders on this side (the hash needs the count first) */
    uint64_t n_levels; /* levels with orders */
    uint64_t
        n_nodes; /* levels in the ladder or the tree: n_levels and the tree's kept empty ones */
    /* The ladder (ladder.c): keys base .. base + e->lad_w - 1 (none when lad_w is 0). */
    int64_t base;
    uint64_t n_win;     /* levels in the ladder, all with orders (book.c frees an emptied one) */
    uint64_t tree_adds; /* levels added to the tree since the window was last placed */
    uint32_t *slot;     /* [lad_w]: the level at key base + i, 0 for none */
    uint64_t *bits;     /* [lad_w / 64]: bit i set when the level at base + i has orders */
    uint64_t top;       /* bit i set when sum[i] is not 0 */
    uint64_t sum[ENG_LADDER_MAX / 4096]; /* bit j of sum[i] set when bits[64 i + j] is not 0 */
} eng_side;

/* Empty levels kept in their tree and the level table, in the whole engine (book.c; the ladders
 * keep none): a tree price that empties and fills again within this many other emptyings costs
 * neither a tree insert nor a tree removal, nor two level-table updates. */
#define ENG_EMPTY_LEVELS 1024u

#define ENG_PREFETCH_LIVE 16384u

/* The three tables are the library's one table (src/common/table.h): each starts small and
 * doubles (rehashing into its spare array) when it would pass load 1/16 (1/8 once large), up to
 * the capacity its pool needs; both arrays are allocated at create, so growing never allocates.
 * A small table stays in cache: the common book of a few thousand orders never pays a miss for a
 * table sized for a million. */

struct tf_engine {
    /* config */
    uint32_t n_books;
    uint32_t max_orders;
    uint64_t max_bytes;
    uint64_t *instrument; /* [n_books], ascending: book i trades instrument[i] */
    /* instrument id -> book + 1 when the ids are dense enough, else binary search */
    uint32_t *direct;
    uint64_t direct_base, direct_len;

    eng_side *sides;   /* [n_books * 2]: tree = book * 2 + side */
    uint32_t lad_w;    /* each side's ladder width: a power of two >= 64, or 0 for none */
    void *lad_mem;     /* every side's ladder slots and bits */
    eng_order *orders; /* 64-byte aligned, inside orders_mem */
    void *orders_mem;
    eng_level *levels; /* 64-byte aligned, inside levels_mem */
    void *levels_mem;
    uint32_t free_order, free_level;   /* free lists through .next / .head (0: empty) */
    uint32_t fresh_order, fresh_level; /* the first never-used entry of each pool */
    /* the kept empty tree levels, oldest first (book.c): a list through empty_older/empty_newer */
    uint32_t empty_oldest, empty_newest, n_empty;
    tfu_table by_id, by_client, by_price;
    /* The pool slot of the order a venue's pre-trade check just read (risk_view.h), so that the
     * Replace or ReplaceByClient applied next skips its table lookup; eng_find_id_hinted and
     * eng_find_client_hinted check the slot's entry before trusting it. Not state: any value is
     * safe (0 by default: the null entry, which matches no live order). */
    uint32_t hint;
    /* Below this many live orders tf_engine_apply_batch prefetches nothing (batch.c): the tables
     * (load <= 1/4, u32 slots) and the used part of the pools fit in L1/L2, and the prefetch's
     * own work (each key hashed again, the book looked up) cost more than it saved (bench_engine:
     * the ~1k-order flows 10-25% slower with it, the ~100k one 40% faster). ENG_PREFETCH_LIVE
     * at create; tests set 0 to prefetch always. */
    uint64_t prefetch_live;

    /* self-trade prevention: [n_stp] ascending by account, room for TF_ENGINE_STP_ACCOUNTS */
    eng_stp *stp;
    uint32_t n_stp;     /* entries */
    uint32_t n_modes;   /* entries with a mode (the hash and the snapshot hold these) */
    uint32_t n_tracked; /* entries whose live orders are counted */

    /* state of the spec */
    uint64_t next_order_id, last_command_seq, next_event_seq;
    uint64_t live;
    /* set for good once a gateway command (TF_OFX_ORDER..) has been applied: the hash then
     * carries every order's filled (docs/engine.md "The state hash") */
    int gateway;
    int64_t *last_trade; /* [n_books]: the price of the book's last trade, 0 = none yet */
    /* [max_orders + 1]: 1 when a gateway command placed the live order (set when it rests), so
     * that an account-wide cancel reports it as a gateway order (CanceledEx, stp.c). In the
     * snapshot (bit 8 of an order's side field), not in the state hash. */
    uint8_t *by_gateway;

    /* counters */
    uint64_t applied, duplicates, skipped, events, trades, rejected;

    /* the sink of the command being applied */
    tf_engine_sink *sink;
    int sink_err;
    uint64_t now; /* command_seq of the command being applied */
    /* 1 while a gateway command is applied: its events are execution reports (tf_ofx_*) */
    int ext;
    uint64_t taker_coid, taker_account; /* the gateway aggressor's, for its Fills */
    uint8_t cancel_reason;              /* CanceledEx.reason of eng_cancel_order */
};

/* tables.c: the engine's keys over the one table (common/table.h) */
/* The live order id's pool slot, 0: none. Inline (every cancel, replace and risk check looks one
 * up); an order id is its own hash (tables.c's hash_id, by which entries are placed). */
static inline int eng_eq_id(const void *pool, uint32_t oi, const void *key)
{
    return ((const tf_engine *)pool)->orders[oi].id == *(const uint64_t *)key;
}
static inline uint32_t eng_find_id(const tf_engine *e, uint64_t id)
{
    return tfu_tab_find(&e->by_id, id, eng_eq_id, e, &id);
}
void eng_insert_id(tf_engine *e, uint32_t oi);
void eng_remove_id(tf_engine *e, uint32_t oi);

/* The client table's hash, key test, finds and rekey: inline too (every gateway command and
 * every cancel or replace by client id probes it, and a call's saved registers and argument
 * moves cost about as much as the probe). */
typedef struct eng_client_key {
    uint64_t account, coid;
} eng_client_key;

static inline uint64_t eng_hash_client(const void *pool, uint32_t oi)
{
    const eng_order *o = &((const tf_engine *)pool)->orders[oi];
    return tfu_mix2(o->account, o->coid);
}

static inline int eng_eq_client(const void *pool, uint32_t oi, const void *key)
{
    const eng_order *o = &((const tf_engine *)pool)->orders[oi];
    const eng_client_key *k = key;
    return o->coid == k->coid && o->account == k->account;
}

static inline uint32_t eng_find_client(const tf_engine *e, uint64_t account, uint64_t coid)
{
    eng_client_key k = {account, coid};
    return tfu_tab_find(&e->by_client, tfu_mix2(account, coid), eng_eq_client, e, &k);
}

/* eng_find_client, and *at: the slot where the probe stopped (the order's, or the empty slot
 * where the key would go). */
static inline uint32_t eng_find_client_at(const tf_engine *e, uint64_t account, uint64_t coid,
                                          uint64_t *at)
{
    eng_client_key k = {account, coid};
    return tfu_tab_find_at(&e->by_client, tfu_mix2(account, coid), eng_eq_client, e, &k, at);
}

#define ENG_AT_UNKNOWN UINT64_MAX
/* The live order oi takes client id coid: `from` is its slot in the client table
 * (ENG_AT_UNKNOWN: looked up), `to` where eng_find_client_at(account, coid) stopped, with no
 * change to the table since. */
static inline void eng_set_client(tf_engine *e, uint32_t oi, uint64_t coid, uint64_t from,
                                  uint64_t to)
{
    if (from == ENG_AT_UNKNOWN)
        from = tfu_tab_slot_of(&e->by_client, eng_hash_client(e, oi), oi);
    e->orders[oi].coid = coid;
    tfu_tab_rekey(&e->by_client, from, to, eng_hash_client, e);
}

void eng_insert_client(tf_engine *e, uint32_t oi);
void eng_remove_client(tf_engine *e, uint32_t oi);
uint32_t eng_table_find_level(const tf_engine *e, uint32_t tree, int64_t key);
void eng_insert_level(tf_engine *e, uint32_t li);
void eng_remove_level(tf_engine *e, uint32_t li);

/* eng_find_id and eng_find_client, trying e->hint first: a live order's entry has its level set
 * (eng_link; 0 once unlinked or free) and ids are never reused, so an entry with the id (or the
 * account and client id) and a level is that live order. */
static inline uint32_t eng_find_id_hinted(const tf_engine *e, uint64_t id)
{
    const eng_order *o = &e->orders[e->hint];
    return o->id == id && o->level ? e->hint : eng_find_id(e, id);
}

/* (*at: as eng_find_client_at's when the table was probed, else left as it was) */
static inline uint32_t eng_find_client_hinted(const tf_engine *e, uint64_t account, uint64_t coid,
                                              uint64_t *at)
{
    const eng_order *o = &e->orders[e->hint];
    return o->coid == coid && o->account == account && o->level
               ? e->hint
               : eng_find_client_at(e, account, coid, at);
}

/* tree.c: the red-black tree of a side's levels outside its ladder window */
void eng_tree_insert(tf_engine *e, eng_side *s, uint32_t li);
void eng_tree_remove(tf_engine *e, eng_side *s, uint32_t li);
uint32_t eng_rbt_succ(const tf_engine *e, uint32_t li); /* in key order, empty or not */
uint32_t eng_rbt_first_above(const tf_engine *e, const eng_side *s, int64_t key); /* or 0 */
/* 0 when the side's tree keeps every red-black rule; *count: its nodes. */
int eng_rbt_check(const tf_engine *e, const eng_side *s, uint64_t *count);

/* ladder.c: a side's levels, ladder and tree together */
int eng_ladder_init(tf_engine *e); /* at create: the window width, its memory */
uint64_t eng_ladder_bytes(uint32_t n_books);
void eng_level_attach(tf_engine *e, eng_side *s, uint32_t li); /* key, tree set */
void eng_level_detach(tf_engine *e, eng_side *s, uint32_t li); /* an empty level */
/* The next worse level that has orders, or 0 (kept empty levels are stepped over). */
uint32_t eng_tree_next(const tf_engine *e, uint32_t li);
/* 0 when the side's ladder and tree keep their rules, its cached best (the first level with
 * orders) and its counts of nodes and of levels with orders (tests). */
int eng_tree_check(const tf_engine *e, const eng_side *s);

static inline int eng_in_ladder(const tf_engine *e, const eng_side *s, int64_t key)
{
    return (uint64_t)key - (uint64_t)s->base < e->lad_w; /* lad_w 0: never */
}

/* The level li (in the ladder when its key is) gains its first order, or loses its last. */
static inline void eng_level_filled(const tf_engine *e, eng_side *s, const eng_level *l)
{
    if (eng_in_ladder(e, s, l->key)) {
        uint64_t i = (uint64_t)l->key - (uint64_t)s->base;
        s->bits[i >> 6] |= 1ull << (i & 63);
        s->sum[i >> 12] |= 1ull << ((i >> 6) & 63);
        s->top |= 1ull << (i >> 12);
    }
}

static inline void eng_level_emptied(const tf_engine *e, eng_side *s, const eng_level *l)
{
    if (eng_in_ladder(e, s, l->key)) {
        uint64_t i = (uint64_t)l->key - (uint64_t)s->base;
        if (!(s->bits[i >> 6] &= ~(1ull << (i & 63))) &&
            !(s->sum[i >> 12] &= ~(1ull << ((i >> 6) & 63))))
            s->top &= ~(1ull << (i >> 12));
    }
}

/* The level of key on side `tree` (0: none): one array read in the ladder (inline: every link and
 * every level query starts here; a ladder level always has orders), else the price table (a
 * tree level may be a kept empty one). */
static inline uint32_t eng_find_level(const tf_engine *e, uint32_t tree, int64_t key)
{
    const eng_side *s = &e->sides[tree];
    if (eng_in_ladder(e, s, key))
        return s->slot[(uint64_t)key - (uint64_t)s->base];
    return eng_table_find_level(e, tree, key);
}

/* stp.c */
int eng_stp_mode(const tf_engine *e, uint64_t account);         /* binary search; 0 when none */
void eng_count_open(tf_engine *e, uint64_t account, int delta); /* a tracked account's count */

/* engine.c: takes a resting order out of the book and emits its Canceled (a CanceledEx with
 * reason e->cancel_reason under a gateway command) */
void eng_cancel_order(tf_engine *e, uint32_t oi);

/* The preamble of every command (tf_engine_apply, tf_engine_cancel_account): the duplicate
 * check, the sequence, the sink. 1 when the command is to be applied, 0 for a duplicate. */
static inline int eng_begin(tf_engine *e, uint64_t seq, tf_engine_sink *sink)
{
    if (seq <= e->last_command_seq) {
        e->duplicates++;
        return 0;
    }
    e->last_command_seq = seq;
    e->now = seq;
    e->applied++;
    e->sink = sink;
    e->sink_err = 0;
    e->ext = 0;
    return 1;
}

/* engine.c: cmds[0..n) applied in order as tf_engine_apply would (one inline apply_one in a
 * loop: tf_engine_apply_batch's), their return codes in rc[i] when rc is not NULL; the caller
 * has checked e, sink and cmds. */
void eng_apply_run(tf_engine *e, const tf_ofl_msg *cmds, size_t n, tf_engine_sink *sink, int *rc);

/* query.c: qsort order of u64 ids */
int eng_cmp_u64(const void *a, const void *b);

/* book.c: resting and removing orders */
int eng_book_of(const tf_engine *e, uint64_t instrument_id); /* book index or -1 */
uint32_t eng_rest(tf_engine *e, uint32_t tree, int64_t price, uint64_t id, uint64_t account,
                  uint64_t coid, uint64_t qty);
void eng_link(tf_engine *e, uint32_t oi, uint32_t tree, int64_t price); /* at the back */
void eng_unlink(tf_engine *e, uint32_t oi); /* out of its level (the level freed when empty) */
void eng_forget(tf_engine *e, uint32_t oi); /* out of the id/client tables, slot freed */

static inline int64_t eng_key(int side, int64_t price)
{
    return side == TF_OFL_BUY ? -price : price;
}

static inline int64_t eng_level_price(const eng_level *l)
{
    return (l->tree & 1) == TF_OFL_BUY ? -l->key : l->key;
}

/* book.c: a level an order joins when it has none with orders (eng_find_level's li: 0 or a kept
 * empty tree level), and a level that has just lost its last order (freed in the ladder, kept
 * empty in the tree). */
uint32_t eng_level_open(tf_engine *e, uint32_t tree, int64_t key, uint32_t li);
void eng_level_close(tf_engine *e, uint32_t li);
/* The kept empty level li, already out of its tree and the level table (a window placement that
 * would bring it into the ladder), leaves the kept list for the free list. */
void eng_level_discard(tf_engine *e, eng_side *s, uint32_t li);

/* A level entry made new: at key on side `tree`, no orders, total 0. */
static inline void eng_level_init(eng_level *l, uint32_t tree, int64_t key)
{
    l->key = key;
    l->tree = tree;
    l->head = l->tail = 0;
    l->n_orders = 0;
    l->total_lo = 0;
    l->total_hi = 0;
}

/* The level of key on side `tree` that an order is about to join, opened when it has no orders:
 * inline for the common case, a new level in the ladder (a pool entry from the free list or a
 * never-used one, its slot and its bit set); eng_level_open for the rest (a tree level, a window
 * to move, a pool with no free entry). A ladder level always has orders (book.c). */
static inline __attribute__((always_inline)) uint32_t eng_level_open_in(tf_engine *e, uint32_t tree,
                                                                        int64_t key)
{
    eng_side *s = &e->sides[tree];
    if (!eng_in_ladder(e, s, key)) {
        uint32_t li = eng_table_find_level(e, tree, key);
        return li && e->levels[li].n_orders ? li : eng_level_open(e, tree, key, li);
    }
    uint64_t i = (uint64_t)key - (uint64_t)s->base;
    uint32_t li = s->slot[i];
    if (li)
        return li;
    li = e->free_level;
    if (li)
        e->free_level = e->levels[li].head;
    else if (e->fresh_level <= e->max_orders)
        li = e->fresh_level++;
    else
        return eng_level_open(e, tree, key, 0);
    eng_level_init(&e->levels[li], tree, key);
    s->slot[i] = li;
    s->n_win++;
    s->n_nodes++;
    s->bits[i >> 6] |= 1ull << (i & 63);
    s->sum[i >> 12] |= 1ull << ((i >> 6) & 63);
    s->top |= 1ull << (i >> 12);
    s->n_levels++;
    if (!s->best || key < e->levels[s->best].key)
        s->best = li;
    return li;
}

/* eng_link and eng_unlink (book.c), inline for the replace path, where every moved order takes
 * both (a call each cost ~30 instructions of saved registers and argument moves a replace).
 * The order's remaining must be set: it joins the level's total. */
static inline __attribute__((always_inline)) void eng_link_in(tf_engine *e, uint32_t oi,
                                                              uint32_t tree, int64_t price)
{
    int64_t key = eng_key((int)(tree & 1), price);
    uint32_t li = eng_level_open_in(e, tree, key);
    eng_order *o = &e->orders[oi];
    eng_level *l = &e->levels[li];
    o->price = price;
    o->level = li;
    o->tree = tree;
    o->next = 0;
    o->prev = l->tail;
    /* No branch on whether the level was empty (see eng_unlink_in): entry 0's next is scratch. */
    uint32_t empty = 0u - (l->tail == 0);
    e->orders[l->tail].next = oi;
    l->head = (l->head & ~empty) | (oi & empty);
    l->tail = oi;
    l->n_orders++;
    eng_total_add(l, o->remaining);
    e->sides[tree].n_orders++;
}

/* The level li has just lost its last order: inline for the common case, a ladder level that is
 * not the side's best (its slot, its bit and its entry freed, book.c); eng_level_close for the
 * rest (the best, whose successor is looked for, and a tree level, kept empty). */
static inline __attribute__((always_inline)) void eng_level_close_in(tf_engine *e, uint32_t li)
{
    eng_level *l = &e->levels[li];
    eng_side *s = &e->sides[l->tree];
    if (s->best == li || !eng_in_ladder(e, s, l->key)) {
        eng_level_close(e, li);
        return;
    }
    uint64_t i = (uint64_t)l->key - (uint64_t)s->base;
    if (!(s->bits[i >> 6] &= ~(1ull << (i & 63))) &&
        !(s->sum[i >> 12] &= ~(1ull << ((i >> 6) & 63))))
        s->top &= ~(1ull << (i >> 12));
    s->slot[i] = 0;
    s->n_win--;
    s->n_nodes--;
    s->n_levels--;
    l->head = e->free_level;
    e->free_level = li;
}

static inline __attribute__((always_inline)) void eng_unlink_in(tf_engine *e, uint32_t oi)
{
    eng_order *o = &e->orders[oi];
    uint32_t li = o->level;
    eng_level *l = &e->levels[li];
    /* Whether an order is first or last in its level is a coin toss in a book of short levels,
     * and a branch on it mispredicted about once per unlink (issue 24). Without branches: the
     * null entry 0 takes the write meant for a missing neighbour (its next and prev are scratch:
     * no walk reads them, and a free list ends at index 0 without reading entry 0), and head and
     * tail are selected. */
    uint32_t prev = o->prev, next = o->next;
    uint32_t first = 0u - (prev == 0), last = 0u - (next == 0); /* masks: gcc made ?: a branch */
    e->orders[prev].next = next;
    e->orders[next].prev = prev;
    l->head = (l->head & ~first) | (next & first);
    l->tail = (l->tail & ~last) | (prev & last);
    e->sides[o->tree].n_orders--;
    eng_total_sub(l, o->remaining);
    o->level = 0;
    if (--l->n_orders == 0)
        eng_level_close_in(e, li);
}

#endif
