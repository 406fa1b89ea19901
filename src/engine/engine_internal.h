/* The order engine's internals: pools, tables and trees sized once at create.
 *
 * Everything is an index into a preallocated array; index 0 is the null of each array, so a
 * zeroed field means "none". Live orders live in `orders`, linked FIFO within their price level.
 * Price levels live in `levels`; each side of each book keeps its non-empty levels in a red-black
 * tree ordered best first (the key is the price for asks and -price for bids, so "best" is the
 * smallest key on both sides) with the best level cached. Three open-addressing tables of u32
 * indices (linear probing, load <= 1/4, backward-shift deletion) find an order by id, an order by
 * (account, client_order_id), and a level by (side, price); they store only indices and compare
 * against the pool entry, so each probe costs one 4-byte slot and the entry the caller needs next.
 */
#ifndef TF_ENGINE_INTERNAL_H
#define TF_ENGINE_INTERNAL_H

#include <stdint.h>

#include "tollfree/engine.h"

typedef struct eng_order {
    uint64_t id;
    uint64_t account;
    uint64_t coid;
    int64_t price;
    uint64_t remaining; /* 1..INT64_MAX while live */
    uint32_t next;      /* next (younger) order in the level; free list link when free */
    uint32_t prev;      /* previous (older) order in the level */
    uint32_t level;
    uint32_t tree; /* book * 2 + side: which side of which book */
} eng_order;

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
    /* While the level is empty and kept (book.c, "empty levels"): its neighbours in the list of
     * kept empty levels, older and newer (0: none). These fill the level to 64 bytes: one cache
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

/* One side of one book: a tree of levels. */
typedef struct eng_side {
    uint32_t root;
    uint32_t best;     /* the smallest key of a level with orders, 0 when there is none */
    uint64_t n_orders; /* live orders on this side (the hash needs the count first) */
    uint64_t n_levels; /* levels with orders */
    uint64_t n_nodes;  /* levels in the tree: n_levels and the kept empty ones */
} eng_side;

/* Empty levels kept in their tree and the level table, in the whole engine (book.c): a price
 * that empties and fills again within this many other emptyings costs neither a tree insert nor
 * a tree removal, nor two level-table updates. */
#define ENG_EMPTY_LEVELS 1024u

/* A table (table.h) starts small and doubles (rehashing into its spare array) when it would pass
 * load 1/4, up to the capacity its pool needs; both arrays are allocated at create, so growing
 * never allocates. A small table stays in cache: the common book of a few thousand orders never
 * pays a miss for a table sized for a million. */
typedef struct eng_table {
    uint32_t *slot;  /* [mask + 1]: 0 empty, else a pool index */
    uint32_t *spare; /* the other array, for the next doubling */
    uint64_t mask;
    uint64_t count;
    uint64_t max_cap;
    int shift; /* 64 - log2(mask + 1), for Fibonacci hashing */
} eng_table;

struct tf_engine {
    /* config */
    uint32_t n_books;
    uint32_t max_orders;
    uint64_t max_bytes;
    uint64_t *instrument; /* [n_books], ascending: book i trades instrument[i] */
    /* instrument id -> book + 1 when the ids are dense enough, else binary search */
    uint32_t *direct;
    uint64_t direct_base, direct_len;

    eng_side *sides; /* [n_books * 2]: tree = book * 2 + side */
    eng_order *orders;
    eng_level *levels; /* 64-byte aligned, inside levels_mem */
    void *levels_mem;
    uint32_t free_order, free_level;   /* free lists through .next / .head (0: empty) */
    uint32_t fresh_order, fresh_level; /* the first never-used entry of each pool */
    /* the kept empty levels, oldest first (book.c): a list through empty_older/empty_newer */
    uint32_t empty_oldest, empty_newest, n_empty;
    eng_table by_id, by_client, by_price;
    /* The pool slot of the order a venue's pre-trade check just read (risk_view.h), so that the
     * Replace or ReplaceByClient applied next skips its table lookup; eng_find_id_hinted and
     * eng_find_client_hinted check the slot's entry before trusting it. Not state: any value is
     * safe (0 by default: the null entry, which matches no live order). */
    uint32_t hint;

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
    /* [max_orders + 1], beside `orders`: each live order's cumulative filled quantity since it
     * was accepted (a replace keeps it). Apart from the order entry so that the paths that do not
     * trade (rest, cancel, replace) touch no more memory than before; a fill touches it. */
    uint64_t *filled;
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

/* tables.c (one table.h table each). eng_table_capacity: slots (u32) of one of a table's two
 * arrays for `entries` entries; eng_table_bytes: both arrays of one table, in bytes. */
uint64_t eng_table_capacity(uint64_t entries);
uint64_t eng_table_bytes(uint64_t entries);
int eng_table_init(eng_table *t, uint64_t entries);
void eng_table_fini(eng_table *t);
uint32_t eng_find_id(const tf_engine *e, uint64_t id);
void eng_insert_id(tf_engine *e, uint32_t oi);
void eng_remove_id(tf_engine *e, uint32_t oi);
uint32_t eng_find_client(const tf_engine *e, uint64_t account, uint64_t coid);
void eng_insert_client(tf_engine *e, uint32_t oi);
void eng_remove_client(tf_engine *e, uint32_t oi);
uint32_t eng_find_level(const tf_engine *e, uint32_t tree, int64_t key);
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

static inline uint32_t eng_find_client_hinted(const tf_engine *e, uint64_t account, uint64_t coid)
{
    const eng_order *o = &e->orders[e->hint];
    return o->coid == coid && o->account == account && o->level ? e->hint
                                                                : eng_find_client(e, account, coid);
}

/* tree.c: the ordered levels of one side */
void eng_tree_insert(tf_engine *e, eng_side *s, uint32_t li);
void eng_tree_remove(tf_engine *e, eng_side *s, uint32_t li);
/* The next worse level that has orders, or 0 (kept empty levels are stepped over). */
uint32_t eng_tree_next(const tf_engine *e, uint32_t li);
/* 0 when the side's tree keeps every red-black rule, its cached best (the first level with
 * orders) and its counts of nodes and of levels with orders (tests). */
int eng_tree_check(const tf_engine *e, const eng_side *s);

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

#endif
