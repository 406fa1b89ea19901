/* tf_engine_apply_batch: commands applied one by one, with the memory of the next ones fetched
 * ahead.
 *
 * Each command's first reads are table slots (order id, client key) and a price level, at
 * addresses its fields give, and they miss the cache as often as not in a book of any size.
 * Two commands ahead, the home slots of its keys and its ladder slot are prefetched; one command
 * ahead, the entries those slots name (which the probe and the level link read next). Nothing
 * here changes state: a prefetch of a slot that the commands in between move costs a wasted
 * fetch, never a wrong result, so the batch is exactly tf_engine_apply in a loop (eng_apply_run,
 * engine.c: the same inline apply_one). A small book (below e->prefetch_live orders) gets the loop
 * alone. */
#include "engine/engine_internal.h"

static inline void fetch(const void *p)
{
    __builtin_prefetch(p, 0, 3);
}

static inline const uint32_t *client_slot(const tf_engine *e, uint64_t account, uint64_t coid)
{
    const tfu_table *t = &e->by_client;
    return &t->slot[tfu_tab_home(t, tfu_mix2(account, coid))];
}

static inline const uint32_t *id_slot(const tf_engine *e, uint64_t id)
{
    const tfu_table *t = &e->by_id;
    return &t->slot[tfu_tab_home(t, id)];
}

/* The ladder slot of a price on a side of an instrument's book, or NULL (no such book, a price
 * outside the window). */
static inline const uint32_t *ladder_slot(const tf_engine *e, uint64_t instrument, int side,
                                          int64_t price)
{
    int book = eng_book_of(e, instrument);
    if (book < 0 || side > TF_OFL_SELL || price <= 0) /* price > 0: -price does not overflow */
        return NULL;
    const eng_side *s = &e->sides[(uint32_t)book * 2 + (uint32_t)side];
    int64_t key = eng_key(side, price);
    return eng_in_ladder(e, s, key) ? &s->slot[(uint64_t)key - (uint64_t)s->base] : NULL;
}

/* The slots a command reads first, up to three; the number of them. */
static int slots_of(const tf_engine *e, const tf_ofl_msg *c, const uint32_t **out, int *is_level)
{
    int n = 0;
    switch (c->kind) {
    case TF_OFL_NEW_LIMIT:
        out[n] = client_slot(e, c->new_limit.account_id, c->new_limit.client_order_id);
        is_level[n++] = 0;
        out[n] = ladder_slot(e, c->new_limit.instrument_id, c->new_limit.side, c->new_limit.price);
        is_level[n] = 1;
        n += out[n] != NULL;
        break;
    case TF_OFL_NEW_MARKET:
        out[n] = client_slot(e, c->new_market.account_id, c->new_market.client_order_id);
        is_level[n++] = 0;
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        out[n] = id_slot(e, c->cancel_by_order.order_id);
        is_level[n++] = 0;
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        out[n] =
            client_slot(e, c->cancel_by_client.account_id, c->cancel_by_client.client_order_id);
        is_level[n++] = 0;
        break;
    case TF_OFL_REPLACE:
        out[n] = id_slot(e, c->replace.order_id);
        is_level[n++] = 0;
        break;
    case TF_OFX_ORDER:
        out[n] = client_slot(e, c->order.account_id, c->order.client_order_id);
        is_level[n++] = 0;
        if (c->order.type == TF_OFX_LIMIT) {
            out[n] = ladder_slot(e, c->order.instrument_id, c->order.side, c->order.price);
            is_level[n] = 1;
            n += out[n] != NULL;
        }
        break;
    case TF_OFX_CANCEL:
        out[n] = client_slot(e, c->cancel.account_id, c->cancel.client_order_id);
        is_level[n++] = 0;
        break;
    case TF_OFX_REPLACE_BY_CLIENT: {
        const tf_ofx_replace_by_client *r = &c->replace_by_client;
        out[n] = client_slot(e, r->account_id, r->client_order_id);
        is_level[n++] = 0;
        if (r->new_client_order_id != r->client_order_id) { /* the duplicate check's probe */
            out[n] = client_slot(e, r->account_id, r->new_client_order_id);
            is_level[n++] = -1;
        }
        break;
    }
    default:
        break;
    }
    return n;
}

/* Two commands ahead: the slots. */
static void fetch_slots(const tf_engine *e, const tf_ofl_msg *c)
{
    const uint32_t *p[3];
    int lv[3];
    int n = slots_of(e, c, p, lv);
    for (int i = 0; i < n; i++)
        fetch(p[i]);
}

/* One command ahead: what the slots name (an order entry, a level entry). */
static void fetch_entries(const tf_engine *e, const tf_ofl_msg *c)
{
    const uint32_t *p[3];
    int lv[3];
    int n = slots_of(e, c, p, lv);
    for (int i = 0; i < n; i++) {
        uint32_t v = *p[i];
        if (!v || lv[i] < 0)
            continue;
        if (lv[i])
            fetch(&e->levels[v]);
        else
            fetch(&e->orders[v]);
    }
}

int tf_engine_apply_batch(tf_engine *e, const tf_ofl_msg *cmds, size_t n, tf_engine_sink *sink,
                          int *rc)
{
    if (!e || !sink || (!cmds && n) || (!sink->ev && sink->cap))
        return TF_E_NULL_ARG;
    if (e->live < e->prefetch_live) { /* the tables and levels sit in L1/L2 */
        eng_apply_run(e, cmds, n, sink, rc);
        return 0;
    }
    for (size_t i = 0; i < 2 && i < n; i++)
        fetch_slots(e, &cmds[i]);
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n)
            fetch_slots(e, &cmds[i + 2]);
        if (i + 1 < n)
            fetch_entries(e, &cmds[i + 1]);
        /* the entry a new resting order will take */
        fetch(&e->orders[e->free_order]);
        eng_apply_run(e, &cmds[i], 1, sink, rc ? &rc[i] : NULL);
    }
    return 0;
}
