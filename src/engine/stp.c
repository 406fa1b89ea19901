/* Per-account settings: self-trade prevention modes, live-order counts of tracked accounts,
 * and the account-wide cancel (docs/engine.md "Self-trade prevention").
 *
 * The accounts with a mode or a count sit in one array sorted by account, allocated at create
 * with room for TF_ENGINE_STP_ACCOUNTS: a setting is rare (a config load); a lookup (find(): one
 * compare when the accounts are consecutive ids, else a branch-free binary search) happens once
 * per incoming order while some account has a mode, and once per order resting or leaving while
 * some account is tracked; the hash and the snapshot read the modes in account order whatever
 * order the settings came in. Counts are derived state: neither hashed nor in the snapshot
 * (tracking an account counts its live orders once).
 *
 * The end of the file serves the venue's pre-trade checks (risk_view.h).
 */
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/risk_view.h"

/* Index of the first entry with account >= `account`: a binary search without branches on the
 * data (the base moves by a flag times the half), so the ~log2(n) steps cost loads, never a
 * mispredicted jump; it runs for every order resting or leaving while some account is tracked. */
static uint32_t lower_bound(const tf_engine *e, uint64_t account)
{
    uint32_t n = e->n_stp;
    if (!n)
        return 0;
    const eng_stp *base = e->stp;
    while (n > 1) {
        uint32_t half = n / 2;
        base += (size_t)(base[half].account < account) * half;
        n -= half;
    }
    return (uint32_t)(base - e->stp) + (base->account < account);
}

/* find() by the search (the entry of account, or e->n_stp). */
static __attribute__((noinline)) uint32_t find_sorted(const tf_engine *e, uint64_t account)
{
    uint32_t i = lower_bound(e, account);
    return i < e->n_stp && e->stp[i].account == account ? i : e->n_stp;
}

/* The index of `account`'s entry, or e->n_stp when it has none. Accounts are unique and sorted,
 * so the entry of account a sits at most a - stp[0].account places in: when the accounts form a
 * run of consecutive ids (a venue's 1..N), that place is the entry, found with one compare.
 * Inline with the search out of line, so that this common case costs the callers
 * (eng_count_open: once per order resting or leaving) no frame. The table is allocated whole at
 * create, so stp[0] is readable even while it has no entry. */
static inline uint32_t find(const tf_engine *e, uint64_t account)
{
    uint32_t n = e->n_stp;
    uint64_t d = account - e->stp[0].account; /* wraps for an account below the first */
    if (d < n && e->stp[d].account == account)
        return (uint32_t)d;
    return n ? find_sorted(e, account) : 0;
}

int eng_stp_mode(const tf_engine *e, uint64_t account)
{
    uint32_t i = find(e, account);
    return i < e->n_stp ? (int)e->stp[i].mode : 0;
}

/* The entry of `account`, made when absent (NULL when the table is full). */
static eng_stp *entry(tf_engine *e, uint64_t account)
{
    uint32_t i = lower_bound(e, account);
    if (i < e->n_stp && e->stp[i].account == account)
        return &e->stp[i];
    if (e->n_stp == TF_ENGINE_STP_ACCOUNTS)
        return NULL;
    memmove(&e->stp[i + 1], &e->stp[i], (e->n_stp - i) * sizeof *e->stp);
    e->stp[i] = (eng_stp){.account = account};
    e->n_stp++;
    return &e->stp[i];
}

/* Drops an entry that has neither a mode nor a count. */
static void tidy(tf_engine *e, eng_stp *x)
{
    if (x->mode || x->tracked)
        return;
    uint32_t i = (uint32_t)(x - e->stp);
    memmove(&e->stp[i], &e->stp[i + 1], (e->n_stp - i - 1) * sizeof *e->stp);
    e->n_stp--;
}

static void count_at(tf_engine *e, uint32_t i, int delta)
{
    if (i < e->n_stp && e->stp[i].tracked)
        e->stp[i].open += (uint64_t)(int64_t)delta;
}

static __attribute__((noinline)) void count_sorted(tf_engine *e, uint64_t account, int delta)
{
    count_at(e, find_sorted(e, account), delta);
}

/* find()'s two cases apart: the consecutive ids' case without a frame, the search a tail call. */
void eng_count_open(tf_engine *e, uint64_t account, int delta)
{
    uint64_t d = account - e->stp[0].account; /* wraps for an account below the first */
    if (d < e->n_stp && e->stp[d].account == account)
        count_at(e, (uint32_t)d, delta);
    else if (e->n_stp)
        count_sorted(e, account, delta);
}

int tf_engine_set_stp(tf_engine *e, uint64_t account_id, int mode)
{
    if (!e)
        return TF_E_NULL_ARG;
    if (mode < TF_ENGINE_STP_NONE || mode > TF_ENGINE_STP_CANCEL_BOTH)
        return TF_E_INVALID_ARG;
    if (mode == TF_ENGINE_STP_NONE && !eng_stp_mode(e, account_id))
        return 0;
    eng_stp *x = entry(e, account_id);
    if (!x)
        return TF_E_LIMIT;
    e->n_modes += (mode != 0) - (x->mode != 0);
    x->mode = (uint32_t)mode;
    tidy(e, x);
    return 0;
}

void tf_engine_clear_stp(tf_engine *e)
{
    if (!e)
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < e->n_stp; i++) {
        e->stp[i].mode = 0;
        if (e->stp[i].tracked)
            e->stp[k++] = e->stp[i];
    }
    e->n_stp = k;
    e->n_modes = 0;
}

int tf_engine_get_stp(const tf_engine *e, uint64_t account_id)
{
    return e ? eng_stp_mode(e, account_id) : TF_ENGINE_STP_NONE;
}

uint32_t tf_engine_stp_count(const tf_engine *e)
{
    return e ? e->n_modes : 0;
}

static int count_one(void *ctx, const tf_engine_order *o)
{
    eng_stp *x = ctx;
    x->open += o->account_id == x->account;
    return 0;
}

int tf_engine_track_account(tf_engine *e, uint64_t account_id, int on)
{
    if (!e)
        return TF_E_NULL_ARG;
    uint32_t i = lower_bound(e, account_id);
    int have = i < e->n_stp && e->stp[i].account == account_id;
    if (!on) {
        if (have && e->stp[i].tracked) {
            e->stp[i].tracked = 0;
            e->n_tracked--;
            tidy(e, &e->stp[i]);
        }
        return 0;
    }
    if (have && e->stp[i].tracked)
        return 0;
    eng_stp *x = entry(e, account_id);
    if (!x)
        return TF_E_LIMIT;
    x->tracked = 1;
    x->open = 0;
    tf_engine_for_each_order(e, count_one, x); /* O(live orders), once */
    e->n_tracked++;
    return 0;
}

int64_t tf_engine_account_orders(const tf_engine *e, uint64_t account_id)
{
    if (!e)
        return -1;
    uint32_t i = find(e, account_id);
    return i < e->n_stp && e->stp[i].tracked ? (int64_t)e->stp[i].open : -1;
}

/* Cancels the live order oi for an account-wide or listed cancel: a Canceled for an order an
 * OFL1 command placed, a CanceledEx(ACCOUNT) for one a gateway command placed (its placer gets
 * the report it understands: the cancel itself is neither kind of command). */
static void cancel_placed(tf_engine *e, uint32_t oi)
{
    e->ext = e->by_gateway[oi];
    e->cancel_reason = TF_OFX_CANCEL_ACCOUNT;
    eng_cancel_order(e, oi);
    e->ext = 0;
}

int tf_engine_cancel_account(tf_engine *e, uint64_t command_seq, uint64_t account_id,
                             tf_engine_sink *sink)
{
    if (!e || !sink || (!sink->ev && sink->cap))
        return TF_E_NULL_ARG;
    if (!eng_begin(e, command_seq, sink))
        return TF_ENGINE_DUPLICATE;
    /* Hash order. Removing a level from its tree never moves another level's index, so the
     * next level and the next order are read before the current one may go. */
    for (uint32_t t = 0; t < 2 * e->n_books; t++) {
        uint32_t li = e->sides[t].best;
        while (li) {
            uint32_t next_level = eng_tree_next(e, li);
            for (uint32_t oi = e->levels[li].head; oi;) {
                uint32_t next = e->orders[oi].next;
                if (e->orders[oi].account == account_id)
                    cancel_placed(e, oi);
                oi = next;
            }
            li = next_level;
        }
    }
    e->sink = NULL;
    return e->sink_err ? e->sink_err : TF_ENGINE_APPLIED;
}

int tf_engine_cancel_orders(tf_engine *e, uint64_t command_seq, const uint64_t *order_ids, size_t n,
                            tf_engine_sink *sink)
{
    if (!e || !sink || (!sink->ev && sink->cap) || (!order_ids && n))
        return TF_E_NULL_ARG;
    if (!eng_begin(e, command_seq, sink))
        return TF_ENGINE_DUPLICATE;
    for (size_t i = 0; i < n; i++) {
        uint32_t oi = eng_find_id(e, order_ids[i]);
        if (oi)
            cancel_placed(e, oi);
    }
    e->sink = NULL;
    return e->sink_err ? e->sink_err : TF_ENGINE_APPLIED;
}

int tf_engine_best_price(const tf_engine *e, uint64_t instrument_id, int side, int64_t *price)
{
    if (!e || !price)
        return TF_E_NULL_ARG;
    int book = eng_book_of(e, instrument_id);
    if (book < 0 || (side != TF_OFL_BUY && side != TF_OFL_SELL))
        return TF_E_INVALID_ARG;
    uint32_t li = e->sides[(uint32_t)book * 2 + (uint32_t)side].best;
    if (!li)
        return 0;
    *price = eng_level_price(&e->levels[li]);
    return 1;
}

/* ---- the venue's pre-trade checks (risk_view.h) ----------------------------------------- */

uint64_t eng_account_open(const tf_engine *e, uint64_t account_id)
{
    uint32_t i = find(e, account_id);
    return i < e->n_stp && e->stp[i].tracked ? e->stp[i].open : 0;
}
