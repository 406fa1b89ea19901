/* The venue: who placed each order, what each session's last client_seq was, and the one path
 * that applies a record (docs/venue.md).
 *
 * The owner of a live order is one record here: the session that placed it (durable: rebuilt by a
 * replay) and the connection that placed it (tfv_msg.conn, live only: never journaled). The
 * service asks it which connection gets a maker's Trade or Fill (tfv_order_conn) at the event;
 * there is no second table. Owners are kept from the events as they pass (Accepted, Canceled,
 * Trade, Fill); the engine is asked only whether a filled maker (or a taker that traded) is still
 * live, once per such order.
 *
 * A venue rejection never bypasses the engine: the engine is given a command it can only reject
 * (CancelByOrder of order 0, which no order has) with the same command_seq, so last_command_seq
 * and event_seq move exactly as for any rejected command, and the Rejected it emits is rewritten
 * into a VenueRejected with the venue's reason and the command's client_order_id. A replay takes
 * the same path and gives the same events and state hash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "venue/venue.h"

#define UNKNOWN UINT64_MAX
#define OWNERS_START                                                                               \
    1024 /* owner entries (and table room) a venue starts with; doubled as needed */

typedef struct owner_ent {
    uint64_t order_id; /* 0: free (then `session` links the free list) */
    uint64_t session;  /* the placing session (0: none) */
    uint64_t conn;     /* the placing connection (tfv_msg.conn; 0: none) */
} owner_ent;

typedef struct recent {
    uint64_t client_seq;
    uint64_t command_seq;
    uint64_t ev_first; /* UNKNOWN: applied before a snapshot; found by command_seq */
    uint32_t ev_count;
} recent;

typedef struct sess_state {
    uint64_t id;
    uint64_t last_seq;
    recent *ring; /* TFV_RESEND_WINDOW entries */
    uint32_t head, count;
} sess_state;

struct tfv_venue {
    struct tfv_venue_head h; /* e, risk, owner_count: what tfv_apply reads inline (venue.h) */
    /* the owners: a pool of entries (index 0 the null) and the one table over it (table.h) */
    owner_ent *owners;
    uint32_t owner_cap, owner_fresh, owner_free;
    tfu_table by_order;
    sess_state *sess;
    uint32_t n_sess, cap_sess;
    tf_journal *events;
    char ev_path[4096];
    tfv_events_index ev_idx;
    /* the command being applied */
    tf_engine_sink *outer;
    int (*orig_flush)(void *ctx, const tf_ofl_msg *ev, size_t n);
    void *orig_ctx;
    size_t scan_from;
    int reason;
    uint64_t coid;
    uint64_t session, conn;   /* the owner of an order the command places */
    uint64_t taker;           /* the order it placed (Accepted) or replaced (Replaced), 0: none */
    int taker_new, taker_hit; /* Accepted / it traded or was canceled in this command */
    uint64_t ev_first_seq, ev_n; /* the command's first event_seq, its events so far */
    uint64_t *makers;
    size_t n_makers, cap_makers;
    int err;
};

int tfv_open(tf_engine *engine, tfv_venue **out)
{
    tfv_venue *v = calloc(1, sizeof *v);
    if (!v)
        return TF_E_NOMEM;
    v->h.e = engine;
    v->owner_cap = OWNERS_START;
    v->owner_fresh = 1;
    v->owners = calloc(v->owner_cap, sizeof *v->owners);
    if (!v->owners || tfu_table_init(&v->by_order, v->owner_cap) ||
        tfv_risk_open(engine, &v->h.risk)) {
        free(v->owners);
        tfu_table_fini(&v->by_order);
        free(v);
        return TF_E_NOMEM;
    }
    *out = v;
    return 0;
}

void tfv_close(tfv_venue *v)
{
    if (!v)
        return;
    for (uint32_t i = 0; i < v->n_sess; i++)
        free(v->sess[i].ring);
    free(v->sess);
    free(v->owners);
    tfu_table_fini(&v->by_order);
    free(v->makers);
    free(v->ev_idx.pos);
    tfv_risk_close(v->h.risk);
    free(v);
}

void tfv_set_events(tfv_venue *v, tf_journal *events, const char *ev_path)
{
    v->events = events;
    snprintf(v->ev_path, sizeof v->ev_path, "%s", ev_path ? ev_path : "");
}

/* ---------------------------------------------------------------- owners */

static uint64_t owner_hash(const void *pool, uint32_t idx)
{
    return tfu_mix(((const owner_ent *)pool)[idx].order_id);
}

static int owner_eq(const void *pool, uint32_t idx, const void *key)
{
    return ((const owner_ent *)pool)[idx].order_id == *(const uint64_t *)key;
}

static uint32_t owner_find(const tfv_venue *v, uint64_t id)
{
    return tfu_tab_find(&v->by_order, tfu_mix(id), owner_eq, v->owners, &id);
}

/* A free pool entry, the pool and the table doubled first when both are full. 0: no memory. */
static uint32_t owner_alloc(tfv_venue *v)
{
    if (v->owner_free) {
        uint32_t i = v->owner_free;
        v->owner_free = (uint32_t)v->owners[i].session;
        return i;
    }
    if (v->owner_fresh == v->owner_cap) {
        if (v->owner_cap > UINT32_MAX / 2)
            return 0;
        uint32_t cap = v->owner_cap * 2;
        owner_ent *p = realloc(v->owners, cap * sizeof *p);
        if (!p)
            return 0;
        v->owners = p;
        if (tfu_table_reserve(&v->by_order, cap, owner_hash, p))
            return 0; /* (the pool keeps its new room) */
        v->owner_cap = cap;
    }
    return v->owner_fresh++;
}

static int owner_put(tfv_venue *v, uint64_t id, uint64_t session, uint64_t conn)
{
    uint32_t i = owner_find(v, id);
    if (!i) {
        if (!(i = owner_alloc(v)))
            return TF_E_NOMEM;
        v->owners[i].order_id = id;
        tfu_tab_insert(&v->by_order, tfu_mix(id), i, owner_hash, v->owners);
        v->h.owner_count++;
    }
    v->owners[i].session = session;
    v->owners[i].conn = conn;
    return 0;
}

static const owner_ent *owner_get(const tfv_venue *v, uint64_t id)
{
    uint32_t i = owner_find(v, id);
    return i ? &v->owners[i] : NULL;
}

/* The placing session of a live order (0: none known). */
static uint64_t owner_session(const tfv_venue *v, uint64_t id)
{
    const owner_ent *o = owner_get(v, id);
    return o ? o->session : 0;
}

uint64_t tfv_order_conn(const tfv_venue *v, uint64_t order_id)
{
    const owner_ent *o = v && v->h.owner_count ? owner_get(v, order_id) : NULL;
    return o ? o->conn : 0;
}

static void owner_del(tfv_venue *v, uint64_t id)
{
    uint32_t i = owner_find(v, id);
    if (!i)
        return;
    tfu_tab_erase(&v->by_order, tfu_mix(id), i, owner_hash, v->owners);
    v->owners[i] = (owner_ent){0, v->owner_free, 0};
    v->owner_free = i;
    v->h.owner_count--;
}

/* ---------------------------------------------------------------- sessions' resend state */

static sess_state *state_of(tfv_venue *v, uint64_t id, int create)
{
    for (uint32_t i = 0; i < v->n_sess; i++)
        if (v->sess[i].id == id)
            return &v->sess[i];
    if (!create)
        return NULL;
    if (v->n_sess == v->cap_sess) {
        uint32_t cap = v->cap_sess ? v->cap_sess * 2 : 8;
        sess_state *s = realloc(v->sess, cap * sizeof *s);
        if (!s)
            return NULL;
        v->sess = s;
        v->cap_sess = cap;
    }
    sess_state *s = &v->sess[v->n_sess];
    memset(s, 0, sizeof *s);
    s->ring = calloc(TFV_RESEND_WINDOW, sizeof *s->ring);
    if (!s->ring)
        return NULL;
    s->id = id;
    v->n_sess++;
    return s;
}

static const recent *ring_find(const sess_state *s, uint64_t client_seq)
{
    /* Ascending client_seq in ring order: a binary search over the window. */
    uint32_t lo = 0, hi = s->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const recent *r =
            &s->ring[(s->head + TFV_RESEND_WINDOW - s->count + mid) % TFV_RESEND_WINDOW];
        if (r->client_seq == client_seq)
            return r;
        if (r->client_seq < client_seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void ring_push(sess_state *s, const recent *r)
{
    s->ring[s->head] = *r;
    s->head = (s->head + 1) % TFV_RESEND_WINDOW;
    if (s->count < TFV_RESEND_WINDOW)
        s->count++;
}

uint64_t tfv_last_client_seq(const tfv_venue *v, uint64_t session)
{
    for (uint32_t i = 0; i < v->n_sess; i++)
        if (v->sess[i].id == session)
            return v->sess[i].last_seq;
    return 0;
}

/* ---------------------------------------------------------------- taking a command */

/* The account a command acts for (0: it names none; CancelByOrder and Replace name an order). */
static uint64_t account_of(const tf_ofl_msg *c)
{
    switch (c->kind) {
    case TF_OFL_NEW_LIMIT:
        return c->new_limit.account_id;
    case TF_OFL_NEW_MARKET:
        return c->new_market.account_id;
    case TF_OFL_CANCEL_BY_CLIENT:
        return c->cancel_by_client.account_id;
    case TF_OFX_ORDER:
        return c->order.account_id;
    case TF_OFX_CANCEL:
        return c->cancel.account_id;
    case TF_OFX_REPLACE_BY_CLIENT:
        return c->replace_by_client.account_id;
    default:
        return 0;
    }
}

int tfv_take(tfv_venue *v, const tfv_session *sess, const tf_ofl_msg *cmd, uint64_t client_seq,
             tfv_msg *rec, tfv_resend *resend)
{
    memset(rec, 0, sizeof *rec);
    rec->ofl = *cmd;
    if (!sess) {
        rec->kind = cmd->kind;
        return TFV_NEW;
    }
    if (client_seq) {
        sess_state *st = state_of(v, sess->id, 1);
        if (!st)
            return TF_E_NOMEM;
        if (client_seq <= st->last_seq) {
            const recent *r = ring_find(st, client_seq);
            if (!r)
                return TFV_STALE;
            resend->command_seq = r->command_seq;
            resend->ev_first = r->ev_first;
            resend->ev_count = r->ev_count;
            return TFV_RESEND;
        }
    }
    rec->kind = TFV_KEYED;
    rec->session = sess->id;
    rec->client_seq = client_seq;
    /* CancelByOrder and Replace name an order: checked against its owner when applied. */
    int names_account = cmd->kind == TF_OFL_NEW_LIMIT || cmd->kind == TF_OFL_NEW_MARKET ||
                        cmd->kind == TF_OFL_CANCEL_BY_CLIENT || tf_ofx_is_gateway_kind(cmd->kind);
    if (names_account && !tfv_session_holds(sess, account_of(cmd)))
        rec->flags |= TFV_KEYED_NOT_AUTHORIZED;
    /* An order is its placing session's: the verdict goes into the record, so a replay (from a
     * snapshot too) never needs the owners. */
    uint64_t oid = cmd->kind == TF_OFL_CANCEL_BY_ORDER ? cmd->cancel_by_order.order_id
                   : cmd->kind == TF_OFL_REPLACE       ? cmd->replace.order_id
                                                       : 0;
    if (oid && owner_session(v, oid) != sess->id)
        rec->flags |= TFV_KEYED_NOT_OWNER;
    return TFV_NEW;
}

/* ---------------------------------------------------------------- applying a record */

static uint64_t coid_of(const tf_ofl_msg *c)
{
    switch (c->kind) {
    case TF_OFL_NEW_LIMIT:
        return c->new_limit.client_order_id;
    case TF_OFL_NEW_MARKET:
        return c->new_market.client_order_id;
    case TF_OFL_CANCEL_BY_CLIENT:
        return c->cancel_by_client.client_order_id;
    case TF_OFL_REPLACE:
        return c->replace.client_order_id;
    case TF_OFX_ORDER:
        return c->order.client_order_id;
    case TF_OFX_CANCEL:
        return c->cancel.client_order_id;
    case TF_OFX_REPLACE_BY_CLIENT:
        return c->replace_by_client.new_client_order_id;
    default:
        return 0;
    }
}

static int push_maker(tfv_venue *v, uint64_t id)
{
    if (v->n_makers == v->cap_makers) {
        size_t cap = v->cap_makers ? v->cap_makers * 2 : 64;
        uint64_t *m = realloc(v->makers, cap * sizeof *m);
        if (!m)
            return TF_E_NOMEM;
        v->makers = m;
        v->cap_makers = cap;
    }
    v->makers[v->n_makers++] = id;
    return 0;
}

static void note_taker(tfv_venue *v, uint64_t id, int placed)
{
    v->taker = id;
    v->taker_new = placed;
    v->taker_hit = 0;
}

/* An order left the book (Canceled): it has no owner any more. */
static void dropped(tfv_venue *v, uint64_t id)
{
    v->taker_hit |= id == v->taker;
    if (v->h.owner_count)
        owner_del(v, id);
}

/* A Trade or Fill: the maker may have left the book (settle_makers asks the engine once the
 * caller has the event). */
static void traded(tfv_venue *v, uint64_t maker, uint64_t taker)
{
    v->taker_hit |= taker == v->taker;
    if (v->h.owner_count && !v->err)
        v->err = push_maker(v, maker);
}

/* What the venue does with a command's events before they go on: a venue refusal's Rejected
 * becomes VenueRejected, the events are counted (for resends), and the owners follow them. */
static void scan(tfv_venue *v, size_t from, size_t to)
{
    tf_ofl_msg *ev = v->outer->ev;
    if (from < to && !v->ev_n++) /* every event payload starts with event_seq */
        v->ev_first_seq = ev[from].accepted.event_seq;
    v->ev_n += to > from ? to - from - 1 : 0;
    for (size_t i = from; i < to; i++) {
        switch (ev[i].kind) {
        case TF_OFL_REJECTED:
            if (v->reason) {
                ev[i].kind = TFV_VENUE_REJECTED;
                ev[i].rejected.reason = (uint8_t)v->reason;
                ev[i].rejected.client_order_id = v->coid;
            }
            break;
        case TF_OFL_ACCEPTED:
            note_taker(v, ev[i].accepted.order_id, 1);
            break;
        case TF_OFX_ACCEPTED:
            note_taker(v, ev[i].accepted_ex.order_id, 1);
            break;
        case TF_OFL_REPLACED:
            note_taker(v, ev[i].replaced.order_id, 0);
            break;
        case TF_OFX_REPLACED:
            note_taker(v, ev[i].replaced_ex.order_id, 0);
            break;
        case TF_OFL_CANCELED:
            dropped(v, ev[i].canceled.order_id);
            break;
        case TF_OFX_CANCELED:
            dropped(v, ev[i].canceled_ex.order_id);
            break;
        case TF_OFL_TRADE:
            traded(v, ev[i].trade.maker_order_id, ev[i].trade.taker_order_id);
            break;
        case TF_OFX_FILL:
            traded(v, ev[i].fill.maker_order_id, ev[i].fill.taker_order_id);
            break;
        default:
            break;
        }
    }
}

/* Makers that traded and are no longer live lose their owner (after the caller had their
 * Trades: tfv_order_conn answers for them until then). */
static void settle_makers(tfv_venue *v)
{
    tf_engine_order o;
    for (size_t i = 0; i < v->n_makers; i++)
        if (tf_engine_find_order(v->h.e, v->makers[i], &o) != 1)
            owner_del(v, v->makers[i]);
    v->n_makers = 0;
}

/* The order the command placed is its owner's while it rests; a replaced order that traded away
 * or was canceled has none. The engine is asked only when the order traded or was canceled. */
static int settle_taker(tfv_venue *v)
{
    tf_engine_order o;
    uint64_t id = v->taker;
    v->taker = 0;
    if (!id || (v->taker_new && !v->session && !v->conn))
        return 0;
    if (v->taker_hit && tf_engine_find_order(v->h.e, id, &o) != 1) {
        if (!v->taker_new)
            owner_del(v, id);
        return 0;
    }
    return v->taker_new ? owner_put(v, id, v->session, v->conn) : 0;
}

static int wrap_flush(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    tfv_venue *v = ctx;
    scan(v, v->scan_from, n);
    v->scan_from = 0;
    int rc = v->orig_flush(v->orig_ctx, ev, n);
    settle_makers(v);
    return rc;
}

/* From here to unwatch() the events of one command pass through scan() on their way to the
 * caller; an order it places belongs to (session, conn). */
static void watch(tfv_venue *v, tf_engine_sink *sink, uint64_t session, uint64_t conn)
{
    v->outer = sink;
    v->orig_flush = sink->flush;
    v->orig_ctx = sink->ctx;
    v->scan_from = sink->n;
    v->session = session;
    v->conn = conn;
    v->taker = 0;
    v->n_makers = 0;
    v->ev_n = 0;
    v->err = 0;
    if (sink->flush) {
        sink->flush = wrap_flush;
        sink->ctx = v;
    }
}

/* The command is applied (rc: the engine's outcome): its last events are scanned and, when a
 * maker may have left the book, handed to the caller's flush before the owners are settled. */
static int unwatch(tfv_venue *v, tf_engine_sink *sink, int rc)
{
    sink->flush = v->orig_flush;
    sink->ctx = v->orig_ctx;
    if (rc >= 0) {
        scan(v, v->scan_from, sink->n);
        if (v->n_makers && sink->flush && sink->n) {
            int fr = sink->flush(sink->ctx, sink->ev, sink->n);
            if (fr < 0)
                rc = fr;
            else
                sink->n = 0;
        }
    }
    v->reason = 0;
    int sr = settle_taker(v);
    settle_makers(v);
    return rc < 0 ? rc : sr ? sr : v->err ? v->err : rc;
}

static int apply_keyed(tfv_venue *v, const tfv_msg *msg, tf_engine_sink *sink)
{
    tf_ofl_msg c = msg->ofl;
    uint64_t seq = c.new_limit.command_seq; /* the first field of every command */
    v->reason = 0;
    v->coid = coid_of(&c);
    if (msg->flags & TFV_KEYED_NOT_AUTHORIZED)
        v->reason = TFV_REASON_NOT_AUTHORIZED;
    else if (msg->flags & TFV_KEYED_NOT_OWNER) {
        /* another session's order: answered as if there were none (order 0 never exists) */
        if (c.kind == TF_OFL_CANCEL_BY_ORDER)
            c.cancel_by_order.order_id = 0;
        else if (c.kind == TF_OFL_REPLACE)
            c.replace.order_id = 0;
    }
    if (!v->reason) /* the risk rules (risk.c, docs/venue.md "Risk") */
        v->reason = tfv_risk_check(v->h.risk, &c);
    if (v->reason) {
        memset(&c, 0, sizeof c);
        c.kind = TF_OFL_CANCEL_BY_ORDER;
        c.cancel_by_order.command_seq = seq;
    }
    watch(v, sink, msg->session, msg->conn);
    int rc = unwatch(v, sink, tf_engine_apply(v->h.e, &c, sink));
    if (rc < 0 || !msg->client_seq)
        return rc;
    sess_state *st = state_of(v, msg->session, 1);
    if (!st)
        return TF_E_NOMEM;
    if (msg->client_seq > st->last_seq) {
        recent r = {.client_seq = msg->client_seq, .command_seq = seq, .ev_first = UNKNOWN};
        if (rc == TF_ENGINE_APPLIED && v->ev_n) {
            r.ev_first = v->ev_first_seq - 1; /* its index in events.ofl */
            r.ev_count = (uint32_t)v->ev_n;
        }
        ring_push(st, &r);
        st->last_seq = msg->client_seq;
    }
    return rc;
}

/* A plain (un-keyed) command: the risk rules, then the engine. A refused one goes through the
 * engine as a command it can only reject, like a keyed one (see the top of this file). Its
 * events are watched when it comes from a connection (its order gets that owner) or when some
 * order has an owner; a replay of a journal without sessions watches nothing. */
static int apply_plain(tfv_venue *v, const tfv_msg *msg, tf_engine_sink *sink)
{
    const tf_ofl_msg *cmd = &msg->ofl;
    int refuse = tfv_risk_check(v->h.risk, cmd); /* 0 for what is not an order command */
    if (!refuse && !msg->conn && !v->h.owner_count)
        return tf_engine_apply(v->h.e, cmd, sink);
    tf_ofl_msg c;
    if (refuse) {
        c = (tf_ofl_msg){.kind = TF_OFL_CANCEL_BY_ORDER};
        c.cancel_by_order.command_seq = cmd->new_limit.command_seq;
        v->reason = refuse;
        v->coid = coid_of(cmd);
        cmd = &c;
    }
    watch(v, sink, 0, msg->conn);
    return unwatch(v, sink, tf_engine_apply(v->h.e, cmd, sink));
}

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* CancelOnDisconnect (0x13): every live order the session placed, ascending order id, as one
 * command. */
static int cancel_session(tfv_venue *v, const tfv_msg *msg, tf_engine_sink *sink)
{
    uint64_t seq, session;
    int rc = tfv_cod_decode(msg->risk, msg->risk_len, &seq, &session);
    if (rc)
        return rc;
    uint64_t *ids = malloc((v->h.owner_count ? v->h.owner_count : 1) * sizeof *ids);
    if (!ids)
        return TF_E_NOMEM;
    size_t n = 0;
    for (uint32_t i = 1; i < v->owner_fresh; i++)
        if (v->owners[i].order_id && v->owners[i].session == session)
            ids[n++] = v->owners[i].order_id;
    qsort(ids, n, sizeof *ids, cmp_id);
    rc = tf_engine_cancel_orders(v->h.e, seq, ids, n, sink);
    for (size_t i = 0; rc >= 0 && i < n; i++)
        owner_del(v, ids[i]);
    free(ids);
    return rc;
}

int tfv_apply_record(tfv_venue *v, const tfv_msg *msg, tf_engine_sink *sink)
{
    if (!v || !msg || !sink)
        return TF_E_NULL_ARG;
    if (msg->kind == TFV_KEYED)
        return apply_keyed(v, msg, sink);
    if (msg->kind == TFV_CANCEL_ON_DISCONNECT)
        return cancel_session(v, msg, sink);
    if (tfv_risk_kind(msg->kind)) {
        if (!v->h.owner_count)
            return tfv_risk_apply_record(v->h.risk, msg->kind, msg->risk, msg->risk_len, sink);
        watch(v, sink, 0, 0); /* a kill switch's Canceled events drop owners */
        return unwatch(v, sink,
                       tfv_risk_apply_record(v->h.risk, msg->kind, msg->risk, msg->risk_len, sink));
    }
    if (tfv_is_ext_kind(msg->kind) && !tf_ofx_is_gateway_kind(msg->kind))
        return msg->kind == TFV_VENUE_REJECTED ? TF_ENGINE_SKIPPED : TF_E_OFL_UNKNOWN_KIND;
    return apply_plain(v, msg, sink); /* OFL1 and gateway kinds */
}

tfv_risk *tfv_venue_risk(tfv_venue *v)
{
    return v ? v->h.risk : NULL;
}

int tfv_read_events(tfv_venue *v, uint64_t first, uint32_t count, uint64_t command_seq,
                    uint8_t **out, size_t *len, size_t *cap)
{
    if (v->events) {
        int rc = tf_journal_flush(v->events); /* the file holds every event applied so far */
        if (rc)
            return rc;
    }
    return tfv_events_walk(v->ev_path, &v->ev_idx, first, count, command_seq, out, len, cap);
}

/* ---------------------------------------------------------------- for rebuild.c */

tf_engine *tfv_venue_engine(tfv_venue *v)
{
    return v->h.e;
}

int tfv_owner_known(const tfv_venue *v, uint64_t order_id)
{
    return v->h.owner_count && owner_get(v, order_id) != NULL;
}

int tfv_owner_put(tfv_venue *v, uint64_t order_id, uint64_t session)
{
    return owner_put(v, order_id, session, 0);
}

uint64_t tfv_owner_count(const tfv_venue *v)
{
    return v->h.owner_count;
}

int tfv_owner_each(const tfv_venue *v, int (*fn)(void *ctx, uint64_t order_id, uint64_t session),
                   void *ctx)
{
    for (uint32_t i = 1; v->h.owner_count && i < v->owner_fresh; i++) {
        const owner_ent *o = &v->owners[i];
        int rc = o->order_id && o->session ? fn(ctx, o->order_id, o->session) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

int tfv_keyed_covered(tfv_venue *v, uint64_t session, uint64_t client_seq, uint64_t command_seq)
{
    /* apply_keyed's bookkeeping for a command the engine takes as a duplicate (no event) */
    if (!client_seq)
        return 0;
    sess_state *st = state_of(v, session, 1);
    if (!st)
        return TF_E_NOMEM;
    if (client_seq > st->last_seq) {
        recent r = {.client_seq = client_seq, .command_seq = command_seq, .ev_first = UNKNOWN};
        ring_push(st, &r);
        st->last_seq = client_seq;
    }
    return 0;
}
