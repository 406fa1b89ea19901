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
} eng_level;

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
    uint32_t best;     /* the smallest key, 0 when empty */
    uint64_t n_orders; /* live orders on this side (the hash needs the count first) */
    uint64_t n_levels;
} eng_side;

/* A table starts small and doubles (rehashing into its spare array) when it would pass load
 * 1/4, up to the capacity its pool needs; both arrays are allocated at create, so growing never
 * allocates. A small table stays in cache: the common book of a few thousand orders never pays a
 * miss for a table sized for a million. */
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
    eng_level *levels;
    uint32_t free_order, free_level;   /* free lists through .next / .head (0: empty) */
    uint32_t fresh_order, fresh_level; /* the first never-used entry of each pool */
    eng_table by_id, by_client, by_price;

    /* self-trade prevention: [n_stp] ascending by account, room for TF_ENGINE_STP_ACCOUNTS */
    eng_stp *stp;
    uint32_t n_stp;     /* entries */
    uint32_t n_modes;   /* entries with a mode (the hash and the snapshot hold these) */
    uint32_t n_tracked; /* entries whose live orders are counted */

    /* state of the spec */
    uint64_t next_order_id, last_command_seq, next_event_seq;
    uint64_t live;

    /* counters */
    uint64_t applied, duplicates, skipped, events, trades, rejected;

    /* the sink of the command being applied */
    tf_engine_sink *sink;
    int sink_err;
    uint64_t now; /* command_seq of the command being applied */
};

/* tables.c */
uint64_t eng_table_capacity(uint64_t entries);
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

/* tree.c: the ordered levels of one side */
void eng_tree_insert(tf_engine *e, eng_side *s, uint32_t li);
void eng_tree_remove(tf_engine *e, eng_side *s, uint32_t li);
uint32_t eng_tree_next(const tf_engine *e, uint32_t li); /* the next worse level, or 0 */
/* 0 when the side's tree keeps every red-black rule and its cached best and count (tests). */
int eng_tree_check(const tf_engine *e, const eng_side *s);

/* stp.c */
int eng_stp_mode(const tf_engine *e, uint64_t account);         /* binary search; 0 when none */
void eng_count_open(tf_engine *e, uint64_t account, int delta); /* a tracked account's count */

/* engine.c: takes a resting order out of the book and emits its Canceled */
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
