/* The engine service's sequencer on the connection layer (docs/engine-service.md).
 *
 * Invariant: no byte of a command's reply (and no unsolicited Trade, no feed datagram) leaves
 * before the command is durable at the configured level. Replies are built into a per-connection
 * `held` buffer while commands are applied; commit() makes the batch durable (one fdatasync for
 * the group; under `every` it runs after each command, already synced, so each reply leaves
 * once its own command is durable), then hands every held buffer to the connection layer in one
 * piece, so a reply is
 * never split and an unsolicited Trade always falls between two whole replies.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_service/engine_service.h"
#include "net/net.h"
#include "tollfree/datagram.h"
#include "tollfree/orders.h"
#include "venue/venue.h"

#define NAME "tollfree engine serve"
#define SINK_EVENTS 1024
#define BATCH_COMMANDS 16384 /* commit at least this often under a continuous flood */
#define IBUF_BYTES (32 << 10)
#define HELD_KEEP 4096 /* a held buffer above this is freed once released */

typedef struct es_conn {
    tfn_conn *c;
    uint32_t slot, gen;
    uint64_t id;
    uint8_t *held;
    size_t held_len, held_cap;
    /* Output beyond the memory threshold (held_limit): an ordered queue of pieces streamed as
     * the peer reads (es_pull); q[qhead, q_commit) is durable and may go, q[q_commit, qn)
     * belongs to the batch being made durable, and `held` comes after all of them. */
    struct es_piece *q;
    size_t qhead, q_commit, qn, qcap;
    uint64_t q_pos; /* bytes of q[qhead] already given */
    int dirty;      /* on the service's dirty list */
    uint8_t frame[TF_OFL_MAX_FRAME];
    size_t frame_len;
    uint64_t commands, rejected_frames;
    /* --sessions: the logon (docs/venue.md); sess is NULL until it is accepted */
    const tfv_session *sess;
    uint8_t nonce[TFV_LOGON_NONCE];
} es_conn;

/* A piece of a connection's queued output: memory (mem, len bytes, owned), or the records
 * [off, off + len) of events.ofl, sent with their CRCs stripped. */
typedef struct es_piece {
    uint8_t *mem;
    uint64_t off, len;
    size_t cap; /* of mem: counted in --max-memory */
} es_piece;

typedef struct slot {
    es_conn *conn;
    uint32_t gen;
} slot;

typedef struct svc {
    tfes_config cfg;
    tfes_recovered r;
    tfn_loop *lp;
    int failed;        /* a journal write failed: stop, release nothing more */
    uint64_t mem_used; /* held replies and the layer's queued output (atomic; --max-memory) */
    int ev_fd;         /* DIR/events.ofl read-only: the source of streamed replies */
    /* connections */
    slot *slots;
    uint32_t nslots, *free_slots, nfree;
    uint64_t next_conn_id;
    uint32_t *dirty;
    uint32_t ndirty;
    /* the command being applied */
    es_conn *sender;
    tf_ofl_msg sink_buf[SINK_EVENTS];
    uint64_t batch_commands; /* applied since the last commit */
    size_t held_limit;       /* a connection holding more than this forces a commit */
    int must_commit;
    uint64_t next_snapshot;
    uint64_t snap_records; /* command records the newest snapshot.tfs covers (0: none) */
    /* feed */
    tf_dgram_sender *feed;
    tf_ofl_msg *feed_q;
    size_t feed_n, feed_cap;
    uint64_t feed_errors;
    /* sessions (--sessions) */
    tfv_sessions sessions;
    int use_sessions;
    /* --risk (docs/venue.md "Risk"): the config in force (admins, cancel-on-disconnect) */
    tfv_risk_config risk;
    uint8_t *resend_buf;
    size_t resend_cap;
    /* A kill switch's cancels for the connections that placed the orders (kill_routes) */
    struct es_route *routes; /* order -> owner connection, ascending order id; n_routes 0: none */
    size_t n_routes, cap_routes;
    struct es_notice *notices; /* the Canceled events routed while the kill is applied */
    size_t n_notices, cap_notices;
} svc;

/* An order of the killed account and the open connection (its owner id) that placed it. */
typedef struct es_route {
    uint64_t order_id, owner;
} es_route;

/* A routed cancel: its owner, its place in events.ofl and in the command's events. */
typedef struct es_notice {
    uint64_t owner, off;
    size_t idx;
    tf_ofl_msg m;
} es_notice;

void tfes_config_init(tfes_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->durability = TF_JOURNAL_GROUP;
    cfg->snapshot_every = TFES_SNAPSHOT_EVERY;
    cfg->max_orders = TF_ENGINE_DEFAULT_MAX_ORDERS;
    cfg->net.stall_timeout_s = 60;
    cfg->net.idle_full_timeout_s = 300;
    cfg->net.min_rate = 1024;
}

/* ---------------------------------------------------------------- owners */

/* A connection's owner id, as the venue records it for the orders it places (tfv_msg.conn): its
 * slot and the slot's generation, so an id outlives its connection harmlessly (never 0: a
 * generation starts at 1). */
static uint64_t conn_owner(const es_conn *ec)
{
    return (uint64_t)ec->gen << 32 | ec->slot;
}

/* The open connection an owner id names, or NULL (closed, its slot reused). */
static es_conn *owner_conn(svc *s, uint64_t owner)
{
    uint32_t sl = (uint32_t)owner, gen = (uint32_t)(owner >> 32);
    if (sl >= s->nslots || s->slots[sl].gen != gen)
        return NULL;
    return s->slots[sl].conn;
}

/* ---------------------------------------------------------------- held replies */

static int held_add(svc *s, es_conn *ec, const void *p, size_t n)
{
    if (ec->held_cap - ec->held_len < n) {
        size_t cap = ec->held_cap ? ec->held_cap * 2 : 4096;
        while (cap - ec->held_len < n)
            cap *= 2;
        uint8_t *b = realloc(ec->held, cap);
        if (!b)
            return TF_E_NOMEM;
        __atomic_fetch_add(&s->mem_used, cap - ec->held_cap, __ATOMIC_RELAXED);
        ec->held = b;
        ec->held_cap = cap;
    }
    memcpy(ec->held + ec->held_len, p, n);
    ec->held_len += n;
    if (ec->held_len > s->held_limit)
        s->must_commit = 1; /* stay well below the connection's output limit */
    if (!ec->dirty) {
        ec->dirty = 1;
        s->dirty[s->ndirty++] = ec->slot;
    }
    return 0;
}

static int held_msg(svc *s, es_conn *ec, const tf_ofl_msg *m)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tfv_encode_event(f, sizeof f, m); /* an OFL1 event or a VenueRejected */
    return n < 0 ? n : held_add(s, ec, f, (size_t)n);
}

static int held_heartbeat(svc *s, es_conn *ec, uint64_t journal_seq)
{
    tf_ofl_msg hb = {.kind = TF_OFL_HEARTBEAT, .journal_seq = journal_seq};
    return held_msg(s, ec, &hb);
}

/* ---------------------------------------------------------------- queued output */

static svc *conn_svc(const tfn_conn *c);

static int queue_grow(svc *s, es_conn *ec)
{
    if (ec->qn < ec->qcap)
        return 0;
    size_t cap = ec->qcap ? ec->qcap * 2 : 8;
    es_piece *q = realloc(ec->q, cap * sizeof *q);
    if (!q)
        return TF_E_NOMEM;
    __atomic_fetch_add(&s->mem_used, (cap - ec->qcap) * sizeof *q, __ATOMIC_RELAXED);
    ec->q = q;
    ec->qcap = cap;
    return 0;
}

/* Moves the held bytes to the end of the queue (the buffer changes hands, its count with it). */
static int queue_held(svc *s, es_conn *ec)
{
    if (!ec->held_len)
        return 0;
    int rc = queue_grow(s, ec);
    if (rc)
        return rc;
    ec->q[ec->qn++] = (es_piece){ec->held, 0, ec->held_len, ec->held_cap};
    ec->held = NULL;
    ec->held_len = ec->held_cap = 0;
    return 0;
}

static void queue_free(svc *s, es_conn *ec)
{
    for (size_t i = ec->qhead; i < ec->qn; i++) {
        __atomic_fetch_sub(&s->mem_used, ec->q[i].cap, __ATOMIC_RELAXED);
        free(ec->q[i].mem);
    }
    __atomic_fetch_sub(&s->mem_used, ec->qcap * sizeof *ec->q, __ATOMIC_RELAXED);
    free(ec->q);
    ec->q = NULL;
    ec->qhead = ec->q_commit = ec->qn = ec->qcap = 0;
    ec->q_pos = 0;
}

/* An event for ec: the frame f (n bytes) is record `off` of events.ofl (n + CRC bytes). Held in
 * memory while the connection's output is small; beyond held_limit (or behind a queue) it is
 * queued as a range of events.ofl instead, so a reply of any size costs no memory. */
static int held_event(svc *s, es_conn *ec, const uint8_t *f, size_t n, uint64_t off)
{
    size_t len = n + TF_JOURNAL_CRC_LEN;
    int spill = ec->qn > ec->qhead || tfn_conn_queued(ec->c) + ec->held_len + n > s->held_limit;
    if (!spill || s->ev_fd < 0)
        return held_add(s, ec, f, n);
    int rc = queue_held(s, ec);
    if (rc)
        return rc;
    es_piece *last = ec->qn > ec->q_commit ? &ec->q[ec->qn - 1] : NULL;
    if (last && !last->mem && last->off + last->len == off) {
        last->len += len;
    } else {
        if ((rc = queue_grow(s, ec)))
            return rc;
        ec->q[ec->qn++] = (es_piece){NULL, off, len, 0};
    }
    if (!ec->dirty) {
        ec->dirty = 1;
        s->dirty[s->ndirty++] = ec->slot;
    }
    s->must_commit = 1; /* a large output: let it start */
    return 0;
}

static int held_event_msg(svc *s, es_conn *ec, const tf_ofl_msg *m, uint64_t off)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tfv_encode_event(f, sizeof f, m);
    return n < 0 ? n : held_event(s, ec, f, (size_t)n, off);
}

/* Releases a durable batch of one connection: straight to the layer when nothing is queued and
 * it is small, else through the queue. */
static void release(svc *s, es_conn *ec)
{
    if (ec->qn == ec->qhead && tfn_conn_queued(ec->c) + ec->held_len <= s->held_limit) {
        if (ec->held_len)
            tfn_conn_send(ec->c, ec->held, ec->held_len);
        ec->held_len = 0;
    } else if (queue_held(s, ec)) {
        tfn_conn_close(ec->c, "out of memory for output");
    }
    if (ec->held_cap > HELD_KEEP) { /* an idle connection keeps no large buffer */
        __atomic_fetch_sub(&s->mem_used, ec->held_cap, __ATOMIC_RELAXED);
        free(ec->held);
        ec->held = NULL;
        ec->held_cap = 0;
    }
    ec->q_commit = ec->qn;
    if (ec->q_commit > ec->qhead)
        tfn_conn_pull_ready(ec->c);
}

/* The layer asks for the next bytes of the queue (ops->pull): memory pieces as they are, ranges
 * of events.ofl read back record by record with their CRCs stripped. */
static int es_pull(tfn_conn *c, uint8_t *buf, size_t cap, int *more)
{
    svc *s = conn_svc(c);
    es_conn *ec = tfn_conn_data(c);
    size_t w = 0;
    while (ec->qhead < ec->q_commit && cap - w >= TF_JOURNAL_MAX_RECORD) {
        es_piece *pc = &ec->q[ec->qhead];
        uint64_t left = pc->len - ec->q_pos;
        size_t want = left < cap - w ? (size_t)left : cap - w;
        if (pc->mem) {
            memcpy(buf + w, pc->mem + ec->q_pos, want);
            w += want;
            ec->q_pos += want;
        } else {
            ssize_t r = pread(s->ev_fd, buf + w, want, (off_t)(pc->off + ec->q_pos));
            if (r <= 0)
                return r < 0 ? -errno : -EIO;
            size_t p = 0, out = 0;
            for (;;) {
                size_t flen =
                    p + 2 <= (size_t)r ? (size_t)buf[w + p] | (size_t)buf[w + p + 1] << 8 : 0;
                size_t rec = 2 + flen + TF_JOURNAL_CRC_LEN;
                if (flen < TF_OFL_FRAME_LEN_BASE || p + rec > (size_t)r)
                    break;
                memmove(buf + w + out, buf + w + p, 2 + flen);
                out += 2 + flen;
                p += rec;
            }
            if (!p)
                return -EIO; /* not a record where one must be */
            w += out;
            ec->q_pos += p;
        }
        if (ec->q_pos == pc->len) {
            __atomic_fetch_sub(&s->mem_used, pc->cap, __ATOMIC_RELAXED);
            free(pc->mem);
            ec->qhead++;
            ec->q_pos = 0;
        }
    }
    if (ec->qhead == ec->qn)
        ec->qhead = ec->q_commit = ec->qn = 0;
    *more = ec->qhead < ec->q_commit;
    return (int)w;
}

/* ---------------------------------------------------------------- commit */

static void fail(svc *s, const char *what, int rc)
{
    if (s->failed)
        return;
    s->failed = rc ? rc : TF_E_OFL_JOURNAL_FAILED;
    tfn_log(s->lp, 1, "fatal: %s: %s: stopping (replies of unsynced commands are not sent)", what,
            tf_strerror(rc));
    tfn_loop_stop(s->lp, "journal failure");
}

/* Writes snapshot.tfs: the engine's state, bound to the last record of commands.ofl. 0, or an
 * error after a line (the journal is unharmed; a failed sync of events.ofl stops the service). */
static int write_snapshot(svc *s)
{
    tf_engine_counters c;
    tf_engine_get_counters(s->r.engine, &c);
    /* events.ofl must reach the snapshot for a start from it (recover.c). */
    int rc = tf_journal_sync(s->r.events);
    if (rc) {
        fail(s, "events.ofl", rc);
        return rc;
    }
    /* Bound to the last command record it covers (recover.c uses it only with that journal). */
    char path[4096], cmd_path[4096];
    tfes_path(path, sizeof path, s->cfg.dir, "snapshot.tfs");
    tfes_path(cmd_path, sizeof cmd_path, s->cfg.dir, "commands.ofl");
    tfes_snap_bind b;
    rc = tfes_snap_bind_last(s->r.commands, cmd_path, &b);
    if (!rc)
        rc = tfes_snapshot_save(s->r.engine, s->r.venue, path, &b);
    if (rc)
        tfn_log(s->lp, 1, "snapshot at command_seq %llu failed: %s (the journal is unharmed)",
                (unsigned long long)c.last_command_seq, tf_strerror(rc));
    else
        s->snap_records = b.journal_seq + 1;
    return rc;
}

static void maybe_snapshot(svc *s)
{
    if (!s->cfg.snapshot_every)
        return;
    tf_engine_counters c;
    tf_engine_get_counters(s->r.engine, &c);
    if (c.last_command_seq < s->next_snapshot)
        return;
    s->next_snapshot = c.last_command_seq + s->cfg.snapshot_every;
    write_snapshot(s);
}

/* At a clean stop (the journals synced): a snapshot of the final state unless the newest one
 * already covers every record, so the next start replays no tail. Snapshots off: none. */
static int snapshot_at_stop(svc *s)
{
    if (!s->cfg.snapshot_every || tf_journal_next_seq(s->r.commands) <= s->snap_records)
        return 0;
    return write_snapshot(s);
}

/* Makes the batch durable, then releases it. */
static void commit(svc *s)
{
    if (s->failed)
        return;
    if (s->batch_commands) {
        int rc = s->cfg.durability == TF_JOURNAL_NONE ? tf_journal_flush(s->r.commands)
                                                      : tf_journal_sync(s->r.commands);
        if (rc) {
            fail(s, "commands.ofl", rc);
            return;
        }
        /* Events go to the kernel with each group (readers of events.ofl see them); they are
         * synced at shutdown and before snapshots, and rebuilt from the commands on start. */
        if ((rc = tf_journal_flush(s->r.events))) {
            fail(s, "events.ofl", rc);
            return;
        }
    }
    for (uint32_t i = 0; i < s->ndirty; i++) {
        slot *sl = &s->slots[s->dirty[i]];
        es_conn *ec = sl->conn;
        if (!ec)
            continue;
        ec->dirty = 0;
        release(s, ec);
    }
    s->ndirty = 0;
    if (s->feed_n) {
        for (size_t off = 0; off < s->feed_n;) {
            int n = tf_dgram_send(s->feed, s->feed_q + off, s->feed_n - off);
            if (n <= 0) {
                /* UDP: nobody listening or a full buffer. The feed is best effort; gaps are
                 * filled from events.ofl by the reader. */
                if (!s->feed_errors++ || s->feed_errors % 100000 == 0)
                    tfn_log_limited(s->lp, "feed: %s (%llu send failures so far)",
                                    tf_strerror(n ? n : -EAGAIN),
                                    (unsigned long long)s->feed_errors);
                break;
            }
            off += (size_t)n;
        }
        s->feed_n = 0;
    }
    if (s->batch_commands) {
        s->batch_commands = 0;
        maybe_snapshot(s);
    }
}

static void reload_risk(svc *s);
static volatile sig_atomic_t got_hup;

static void on_hup(int sig)
{
    (void)sig;
    got_hup = 1;
}

static void before_sleep(tfn_loop *lp, void *ud, int more)
{
    (void)lp;
    svc *s = ud;
    if (got_hup) {
        got_hup = 0;
        reload_risk(s);
    }
    if (!s->batch_commands && !s->ndirty)
        return;
    if (more && s->batch_commands < BATCH_COMMANDS && !s->must_commit)
        return; /* more input is waiting: let it join this group */
    s->must_commit = 0;
    commit(s);
}

/* ---------------------------------------------------------------- applying a command */

static int feed_push(svc *s, const tf_ofl_msg *ev)
{
    if (s->feed_n == s->feed_cap) {
        size_t cap = s->feed_cap ? s->feed_cap * 2 : 1024;
        tf_ofl_msg *q = realloc(s->feed_q, cap * sizeof *q);
        if (!q)
            return TF_E_NOMEM;
        s->feed_q = q;
        s->feed_cap = cap;
    }
    s->feed_q[s->feed_n++] = *ev;
    return 0;
}

/* ---------------------------------------------------------------- a kill switch's cancels */

/* The venue drops an order's owner as its Canceled passes (before this sink sees it), so the
 * owners of the killed account's orders are looked up first (kill_routes); each Canceled of one
 * of them is set aside (route_cancel) and, once the command is applied, sent to the connection
 * that placed the order behind an Unsolicited marker (deliver_cancels): between two whole replies
 * of that connection, never inside one, released with the kill's own reply once it is durable.
 * The journal and the feed see nothing of this. */

typedef struct route_walk {
    svc *s;
    es_conn *sender;
    uint64_t account;
    int err;
} route_walk;

static int route_one(void *ctx, const tf_engine_order *o)
{
    route_walk *w = ctx;
    svc *s = w->s;
    if (o->account_id != w->account)
        return 0;
    uint64_t owner = tfv_order_conn(s->r.venue, o->order_id);
    es_conn *to = owner ? owner_conn(s, owner) : NULL;
    if (!to || to == w->sender) /* closed (nothing is sent), or the sender: in its reply */
        return 0;
    if (s->n_routes == s->cap_routes) {
        size_t cap = s->cap_routes ? s->cap_routes * 2 : 64;
        es_route *r = realloc(s->routes, cap * sizeof *r);
        if (!r)
            return w->err = TF_E_NOMEM;
        s->routes = r;
        s->cap_routes = cap;
    }
    s->routes[s->n_routes++] = (es_route){o->order_id, owner};
    return 0;
}

static int cmp_route(const void *a, const void *b)
{
    uint64_t x = ((const es_route *)a)->order_id, y = ((const es_route *)b)->order_id;
    return x < y ? -1 : x > y;
}

/* The live orders of `account` that an open connection other than the sender placed: one walk
 * of the book (a kill switch is rare; its cancel walks the account's orders anyway). */
static int kill_routes(svc *s, es_conn *sender, uint64_t account)
{
    route_walk w = {s, sender, account, 0};
    s->n_routes = 0;
    if (!tfv_owner_count(s->r.venue))
        return 0; /* no order has an owner: nobody to tell */
    tf_engine_for_each_order(s->r.engine, route_one, &w);
    if (w.err) {
        s->n_routes = 0;
        return w.err;
    }
    qsort(s->routes, s->n_routes, sizeof *s->routes, cmp_route);
    return 0;
}

static int route_cancel(svc *s, const tf_ofl_msg *m, uint64_t off)
{
    es_route key = {m->kind == TF_OFL_CANCELED ? m->canceled.order_id : m->canceled_ex.order_id, 0};
    const es_route *r = bsearch(&key, s->routes, s->n_routes, sizeof key, cmp_route);
    if (!r)
        return 0;
    if (s->n_notices == s->cap_notices) {
        size_t cap = s->cap_notices ? s->cap_notices * 2 : 64;
        es_notice *q = realloc(s->notices, cap * sizeof *q);
        if (!q)
            return TF_E_NOMEM;
        s->notices = q;
        s->cap_notices = cap;
    }
    s->notices[s->n_notices] = (es_notice){r->owner, off, s->n_notices, *m};
    s->n_notices++;
    return 0;
}

static int cmp_notice(const void *a, const void *b)
{
    const es_notice *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The marker: "the next `count` frames are unsolicited events of command `command_seq`". */
static int held_marker(svc *s, es_conn *ec, uint64_t command_seq, uint32_t count, uint8_t cause)
{
    uint8_t f[2 + TF_OFL_FRAME_LEN_BASE + TF_ORDERS_UNSOLICITED_LEN] = {0};
    f[0] = TF_OFL_FRAME_LEN_BASE + TF_ORDERS_UNSOLICITED_LEN;
    f[2] = TF_ORDERS_UNSOLICITED;
    for (int i = 0; i < 8; i++)
        f[3 + i] = (uint8_t)(command_seq >> (8 * i));
    for (int i = 0; i < 4; i++)
        f[11 + i] = (uint8_t)(count >> (8 * i));
    f[15] = cause;
    return held_add(s, ec, f, sizeof f);
}

/* Each owner's cancels, in the command's order, behind one marker. */
static int deliver_cancels(svc *s, uint64_t command_seq)
{
    int rc = 0;
    qsort(s->notices, s->n_notices, sizeof *s->notices, cmp_notice);
    for (size_t i = 0, j; !rc && i < s->n_notices; i = j) {
        for (j = i; j < s->n_notices && s->notices[j].owner == s->notices[i].owner; j++)
            ;
        es_conn *to = owner_conn(s, s->notices[i].owner);
        if (!to || j - i > UINT32_MAX)
            continue;
        rc = held_marker(s, to, command_seq, (uint32_t)(j - i), TF_ORDERS_CAUSE_KILL_SWITCH);
        for (size_t k = i; !rc && k < j; k++)
            rc = held_event_msg(s, to, &s->notices[k].m, s->notices[k].off);
    }
    s->n_routes = s->n_notices = 0;
    return rc;
}

/* The engine's sink: journal each event, add it to the sender's reply, route Trades. */
static int on_events(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    svc *s = ctx;
    for (size_t i = 0; i < n; i++) {
        tf_ofl_msg m = ev[i];
        uint64_t seq;
        tf_journal_stats js;
        tf_journal_get_stats(s->r.events, &js); /* js.bytes: where this record starts */
        int rc = tfv_journal_append_event(s->r.events, &m, &seq);
        if (rc) {
            fail(s, "events.ofl", rc);
            return rc;
        }
        m.journal_seq = seq;
        if (s->sender && (rc = held_event_msg(s, s->sender, &m, js.bytes)))
            return rc; /* (no sender: a cancel-on-disconnect) */
        /* OFL1 datagrams carry OFL1 kinds only: no VenueRejected, no gateway report */
        if (s->feed && m.kind != TFV_VENUE_REJECTED && !tf_ofx_is_gateway_kind(m.kind)) {
            m.session_id = s->r.session_id;
            if ((rc = feed_push(s, &m)))
                return rc;
        }
        /* A Trade or Fill also goes to the maker's connection when it is another open one:
         * the venue's owner record of the order names it. */
        uint64_t maker = m.kind == TF_OFL_TRADE  ? m.trade.maker_order_id
                         : m.kind == TF_OFX_FILL ? m.fill.maker_order_id
                                                 : 0;
        es_conn *to = maker ? owner_conn(s, tfv_order_conn(s->r.venue, maker)) : NULL;
        if (to && to != s->sender)
            rc = held_event_msg(s, to, &m, js.bytes);
        if (!rc && s->n_routes && (m.kind == TF_OFL_CANCELED || m.kind == TF_OFX_CANCELED))
            rc = route_cancel(s, &m, js.bytes);
        if (rc)
            return rc;
    }
    return 0;
}

/* A command whose (session, client_seq) was applied before: its original events, read back
 * from events.ofl, then its Heartbeat; nothing is journaled or applied again. */
static void resend(svc *s, es_conn *ec, const tfv_resend *rs)
{
    size_t len = 0;
    int rc = tfv_read_events(s->r.venue, rs->ev_first, rs->ev_count, rs->command_seq,
                             &s->resend_buf, &len, &s->resend_cap);
    if (!rc && len)
        rc = held_add(s, ec, s->resend_buf, len);
    if (!rc)
        rc = held_heartbeat(s, ec, rs->command_seq);
    if (rc)
        fail(s, "a resent reply", rc);
}

/* Not journaled: VenueRejected(reason) with event_seq 0 and command_seq 0, then Heartbeat(0). */
static void refuse(svc *s, es_conn *ec, uint64_t coid, int reason)
{
    tf_ofl_msg rej = {.kind = TFV_VENUE_REJECTED};
    rej.rejected.client_order_id = coid;
    rej.rejected.reason = (uint8_t)reason;
    if (held_msg(s, ec, &rej) || held_heartbeat(s, ec, 0))
        fail(s, "a reply", TF_E_NOMEM);
}

static void apply_command(svc *s, es_conn *ec, tf_ofl_msg *cmd, uint64_t client_seq)
{
    tfv_msg rec;
    tfv_resend rs;
    int rc = tfv_take(s->r.venue, ec->sess, cmd, client_seq, &rec, &rs);
    if (rc == TFV_RESEND) {
        resend(s, ec, &rs);
        return;
    }
    if (rc == TFV_STALE) {
        uint64_t coid = cmd->kind == TF_OFL_NEW_LIMIT    ? cmd->new_limit.client_order_id
                        : cmd->kind == TF_OFL_NEW_MARKET ? cmd->new_market.client_order_id
                        : cmd->kind == TF_OFX_ORDER      ? cmd->order.client_order_id
                                                         : 0;
        refuse(s, ec, coid, TFV_REASON_STALE_CLIENT_SEQ);
        return;
    }
    if (rc < 0) {
        fail(s, "taking a command", rc);
        return;
    }
    tf_engine_counters c;
    tf_engine_get_counters(s->r.engine, &c);
    uint64_t seq = c.last_command_seq + 1;
    /* Every command payload starts with command_seq: the sequencer's, never the client's. */
    rec.ofl.new_limit.command_seq = seq;
    rc = tfv_journal_append(s->r.commands, &rec, NULL);
    if (!rc && s->cfg.durability == TF_JOURNAL_EVERY)
        rc = tf_journal_sync(s->r.commands);
    if (rc) {
        fail(s, "commands.ofl", rc);
        return;
    }
    s->sender = ec;
    rec.conn = conn_owner(ec); /* the owner of the order it places, for its Trades */
    tf_engine_sink sink = {.ev = s->sink_buf, .cap = SINK_EVENTS, .flush = on_events, .ctx = s};
    /* Every command through the venue (its risk rules), as recovery replays it (recover.c). */
    rc = tfv_apply(s->r.venue, &rec, &sink);
    if (rc >= 0 && sink.n)
        rc = on_events(s, s->sink_buf, sink.n);
    if (rc < 0) {
        fail(s, "applying a command", rc);
        return;
    }
    if ((rc = held_heartbeat(s, ec, seq)))
        fail(s, "a reply", rc);
    ec->commands++;
    s->batch_commands++;
    if (s->cfg.durability == TF_JOURNAL_EVERY)
        commit(s); /* durable on its own: its replies need not wait for the rest of the turn */
}

/* ---------------------------------------------------------------- risk (docs/venue.md "Risk") */

/* Journals and applies one risk record (0x11-0x13). Records that cancel (0x12 on, 0x13) take
 * the next command_seq; their events go to the journal, the feed and the sender (if any). */
static int risk_record(svc *s, es_conn *sender, int kind, uint8_t *pl, size_t n, int takes_seq)
{
    tfv_msg rec = {.kind = (uint8_t)kind, .risk_len = (uint8_t)n};
    tf_engine_counters c;
    tf_engine_get_counters(s->r.engine, &c);
    if (takes_seq)
        for (int i = 0; i < 8; i++) /* command_seq: the first u64 of these payloads */
            pl[i] = (uint8_t)((c.last_command_seq + 1) >> (8 * i));
    memcpy(rec.risk, pl, n);
    int rc = tfv_journal_append(s->r.commands, &rec, NULL);
    if (rc)
        return rc;
    s->sender = sender;
    tf_engine_sink sink = {.ev = s->sink_buf, .cap = SINK_EVENTS, .flush = on_events, .ctx = s};
    rc = tfv_apply(s->r.venue, &rec, &sink);
    if (rc >= 0 && sink.n)
        rc = on_events(s, s->sink_buf, sink.n);
    s->sender = NULL;
    s->batch_commands++;
    s->must_commit = 1;
    return rc < 0 ? rc : 0;
}

/* The config at --risk, journaled (a reset, then one record per account) and applied. A bad
 * file is refused with its line; at start that stops the service, on SIGHUP the old config
 * stays. */
static int load_risk(svc *s, int reload)
{
    char err[512];
    tfv_risk_config cfg;
    int rc = tfv_risk_load(s->cfg.risk, &cfg, err, sizeof err);
    if (rc) {
        if (reload)
            tfn_log(s->lp, 1, "SIGHUP: --risk %s: refused, the config in force stays", err);
        else
            fprintf(stderr, "%s: --risk %s\n", NAME, err);
        return rc;
    }
    uint8_t pl[TFV_RISK_LIMITS_LEN];
    tfv_limits reset = {0};
    tfv_limits_encode(&reset, pl);
    rc = risk_record(s, NULL, TFV_RISK_LIMITS, pl, sizeof pl, 0);
    for (uint32_t i = 0; !rc && i < cfg.n; i++) {
        tfv_limits_encode(&cfg.acct[i], pl);
        rc = risk_record(s, NULL, TFV_RISK_LIMITS, pl, sizeof pl, 0);
    }
    if (rc) {
        tfv_risk_config_free(&cfg);
        fail(s, "journaling the risk config", rc);
        return rc;
    }
    tfv_risk_config_free(&s->risk);
    s->risk = cfg;
    tfn_log(s->lp, 1, "risk config %s: %u accounts, %u admin sessions, %u cancel on disconnect%s",
            s->cfg.risk, cfg.n, cfg.n_admins, cfg.n_cod, reload ? " (reloaded on SIGHUP)" : "");
    return 0;
}

static void reload_risk(svc *s)
{
    if (s->cfg.risk && !s->failed)
        load_risk(s, 1);
}

static int bad_frame(tfn_conn *c, es_conn *ec, const char *what);

/* A KillSwitch (0x12) from a logged-on session: applied when the session is an admin's,
 * else answered VenueRejected(NotAuthorized) and not journaled. Then Heartbeat. */
static int kill_frame(svc *s, tfn_conn *c, es_conn *ec)
{
    tfv_msg vm;
    int rc = tfv_decode(ec->frame, ec->frame_len, &vm);
    if (rc < 0)
        return bad_frame(c, ec, "KillSwitch (kind 0x12) does not decode");
    if (!tfv_risk_is_admin(&s->risk, ec->sess->id)) {
        refuse(s, ec, 0, TFV_REASON_NOT_AUTHORIZED);
        return 0;
    }
    if (!vm.risk[16])
        memset(vm.risk, 0, 8); /* off takes no command_seq */
    uint64_t seq, account;
    int on;
    rc = tfv_kill_decode(vm.risk, vm.risk_len, &seq, &account, &on);
    if (!rc && on)
        rc = kill_routes(s, ec, account); /* before the cancels drop the owners */
    if (!rc)
        rc = risk_record(s, ec, TFV_KILL_SWITCH, vm.risk, vm.risk_len, vm.risk[16]);
    tf_engine_counters k;
    tf_engine_get_counters(s->r.engine, &k);
    if (!rc && s->n_notices)
        rc = deliver_cancels(s, k.last_command_seq);
    s->n_routes = s->n_notices = 0;
    if (rc || (rc = held_heartbeat(s, ec, k.last_command_seq)))
        fail(s, "a kill switch", rc);
    return s->failed ? -1 : 0;
}

/* When the last connection of a cancel-on-disconnect session closes: a CancelOnDisconnect. */
static void cancel_on_disconnect(svc *s, es_conn *ec, const char *why)
{
    /* A service stopping keeps the orders (they are live again after the restart). */
    if (!ec->sess || s->failed || !strcmp(why, "server shutting down") ||
        !tfv_risk_cancels_on_disconnect(&s->risk, ec->sess->id))
        return;
    for (uint32_t i = 0; i < s->nslots; i++) {
        es_conn *o = s->slots[i].conn;
        if (o && o != ec && o->sess == ec->sess)
            return; /* another connection of the session is still up */
    }
    uint8_t pl[TFV_CANCEL_ON_DISCONNECT_LEN];
    tfv_cod_encode(0, ec->sess->id, pl);
    int rc = risk_record(s, NULL, TFV_CANCEL_ON_DISCONNECT, pl, sizeof pl, 1);
    if (rc)
        fail(s, "a cancel on disconnect", rc);
}

/* ---------------------------------------------------------------- the connection operations */

static svc *conn_svc(const tfn_conn *c)
{
    return tfn_loop_ud(tfn_conn_loop(c));
}

/* A peer broke the framing: say why (rate-limited), send what it is owed, close. */
static int bad_frame(tfn_conn *c, es_conn *ec, const char *what)
{
    tfn_log_limited(tfn_conn_loop(c), "conn %llu (%s): bad frame: %s: closing the connection",
                    (unsigned long long)ec->id, tfn_conn_transport(c), what);
    ec->rejected_frames++;
    tfn_conn_close(c, "closed after a bad frame");
    return -1;
}

static void es_close(tfn_conn *c, const char *why);

static int es_open(tfn_conn *c)
{
    svc *s = conn_svc(c);
    if (!s->nfree || s->failed)
        return TF_E_LIMIT;
    es_conn *ec = calloc(1, sizeof *ec);
    if (!ec)
        return TF_E_NOMEM;
    uint32_t sl = s->free_slots[--s->nfree];
    ec->c = c;
    ec->slot = sl;
    ec->gen = ++s->slots[sl].gen;
    ec->id = ++s->next_conn_id;
    s->slots[sl].conn = ec;
    tfn_conn_set_data(c, ec);
    if (s->use_sessions) { /* the logon challenge, before anything else */
        uint8_t f[TFV_LOGON_MAX];
        int n = tfv_logon_challenge(f, sizeof f, ec->nonce);
        if (n < 0 || tfn_conn_send(c, f, (size_t)n) < 0) {
            es_close(c, "no logon challenge");
            return n < 0 ? n : TF_E_NOMEM;
        }
    }
    return 0;
}

static void es_close(tfn_conn *c, const char *why)
{
    svc *s = conn_svc(c);
    es_conn *ec = tfn_conn_data(c);
    if (!ec)
        return;
    /* Ordinary ends are not logged (1,000 clients would flood stderr); a bad frame was. */
    uint64_t left = tfn_conn_log_dropped(c);
    if (left || (strcmp(why, "peer closed") && strcmp(why, "closed after a bad frame") &&
                 strcmp(why, "server shutting down") && strcmp(why, "logon refused")))
        tfn_log_limited(s->lp,
                        "conn %llu (%s): closed (%s), %llu commands, %llu log lines left out",
                        (unsigned long long)ec->id, tfn_conn_transport(c), why,
                        (unsigned long long)ec->commands, (unsigned long long)left);
    cancel_on_disconnect(s, ec, why);
    /* Its owner id goes stale with the generation; its held replies are dropped (it is gone). */
    s->slots[ec->slot].conn = NULL;
    s->slots[ec->slot].gen++;
    s->free_slots[s->nfree++] = ec->slot;
    __atomic_fetch_sub(&s->mem_used, ec->held_cap, __ATOMIC_RELAXED);
    free(ec->held);
    queue_free(s, ec);
    free(ec);
}

static int es_busy(tfn_conn *c)
{
    es_conn *ec = tfn_conn_data(c);
    return ec->held_len > 0 || ec->qn > ec->qhead;
}

/* At rest for a while: no reply buffer is kept. */
static void es_idle(tfn_conn *c)
{
    svc *s = conn_svc(c);
    es_conn *ec = tfn_conn_data(c);
    if (ec->held_len || ec->dirty)
        return;
    __atomic_fetch_sub(&s->mem_used, ec->held_cap, __ATOMIC_RELAXED);
    free(ec->held);
    ec->held = NULL;
    ec->held_cap = 0;
}

/* Before logon the only frame taken is the logon answer (docs/venue.md, "Logon"). */
static int logon_head(tfn_conn *c, es_conn *ec, const uint8_t *p, size_t avail, tfn_head *h)
{
    int n = tfv_logon_frame_size(p, avail);
    if (n < 0) {
        tfn_log_limited(tfn_conn_loop(c),
                        "conn %llu (%s): a frame before logon (length %u): closing the connection",
                        (unsigned long long)ec->id, tfn_conn_transport(c),
                        (unsigned)(p[0] | p[1] << 8));
        ec->rejected_frames++;
        tfn_conn_close(c, "closed after a bad frame");
        return -1;
    }
    if (n == 0)
        return avail < 2 ? 2 : 2 + (p[0] | p[1] << 8);
    memcpy(ec->frame, p, (size_t)n);
    ec->frame_len = (size_t)n;
    h->consume = (size_t)n;
    h->body_len = 0;
    h->body = NULL;
    return 0;
}

static int es_head(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *h)
{
    es_conn *ec = tfn_conn_data(c);
    if (avail < 2)
        return 2;
    if (!ec->sess && conn_svc(c)->use_sessions)
        return logon_head(c, ec, p, avail, h);
    unsigned flen = (unsigned)p[0] | (unsigned)p[1] << 8;
    char what[128];
    if (flen < TF_OFL_FRAME_LEN_BASE) {
        snprintf(what, sizeof what, "frame_len %u below %u", flen, TF_OFL_FRAME_LEN_BASE);
        return bad_frame(c, ec, what);
    }
    if (2 + flen > TF_OFL_MAX_FRAME) {
        snprintf(what, sizeof what, "frame_len %u above the OFL1 cap of %u bytes a frame", flen,
                 TF_OFL_MAX_FRAME);
        return bad_frame(c, ec, what);
    }
    if (avail < 2 + flen)
        return (int)(2 + flen);
    memcpy(ec->frame, p, 2 + flen);
    ec->frame_len = 2 + flen;
    h->consume = 2 + flen;
    h->body_len = 0;
    h->body = NULL;
    return 0;
}

/* The logon answer: accepted (the session is bound to the connection) or refused (the same
 * answer for an unknown name and a bad MAC, then the connection is closed). */
static int logon(svc *s, tfn_conn *c, es_conn *ec)
{
    char name[TFV_NAME_MAX + 1];
    size_t nl;
    uint8_t mac[TFV_LOGON_MAC], f[TFV_LOGON_MAX];
    if (tfv_logon_parse_answer(ec->frame, ec->frame_len, name, &nl, mac) != 0) {
        tfn_log_limited(s->lp,
                        "conn %llu (%s): a frame before logon (type 0x%02x, %zu bytes): closing "
                        "the connection",
                        (unsigned long long)ec->id, tfn_conn_transport(c), ec->frame[2],
                        ec->frame_len);
        ec->rejected_frames++;
        tfn_conn_close(c, "closed after a bad frame");
        return -1;
    }
    const tfv_session *sess = tfv_logon_check(&s->sessions, ec->nonce, name, nl, mac);
    memset(ec->nonce, 0, sizeof ec->nonce); /* one answer per challenge */
    uint64_t last = sess ? tfv_last_client_seq(s->r.venue, sess->id) : 0;
    int n = tfv_logon_result(f, sizeof f, sess != NULL, sess ? sess->id : 0, last);
    if (n > 0)
        tfn_conn_send(c, f, (size_t)n);
    if (!sess) {
        tfn_log_limited(s->lp,
                        "conn %llu (%s): logon refused (an unknown session or a wrong MAC): "
                        "closing the connection",
                        (unsigned long long)ec->id, tfn_conn_transport(c));
        tfn_conn_close(c, "logon refused");
        return -1;
    }
    ec->sess = sess;
    return 0;
}

/* A Keyed command from a logged-on session: the session is the connection's (the frame's own
 * session field is not trusted), the client_seq the frame's. */
static int keyed_frame(svc *s, tfn_conn *c, es_conn *ec)
{
    tfv_msg vm;
    int rc = tfv_decode(ec->frame, ec->frame_len, &vm);
    if (rc < 0 || vm.flags) {
        char what[128];
        snprintf(what, sizeof what, "Keyed (kind 0x10) does not decode: %s",
                 rc < 0 ? tf_strerror(rc) : "flags set by the client");
        return bad_frame(c, ec, what);
    }
    apply_command(s, ec, &vm.ofl, vm.client_seq);
    return s->failed ? -1 : 0;
}

static int es_frame(tfn_conn *c, int where)
{
    (void)where;
    svc *s = conn_svc(c);
    es_conn *ec = tfn_conn_data(c);
    if (s->failed)
        return -1;
    if (s->use_sessions && !ec->sess)
        return logon(s, c, ec);
    const uint8_t *f = ec->frame;
    unsigned kind = f[2];
    if (kind == TFV_KEYED && ec->sess)
        return keyed_frame(s, c, ec);
    if (kind == TFV_KILL_SWITCH && ec->sess)
        return kill_frame(s, c, ec);
    int psize = tf_ofx_payload_size((int)kind); /* OFL1 and gateway kinds */
    char what[128];
    if (psize < 0) {
        snprintf(what, sizeof what, "%s kind 0x%02x",
                 psize == TF_E_OFL_RESERVED_KIND ? "reserved" : "unknown", kind);
        return bad_frame(c, ec, what);
    }
    if (tf_ofl_kind_class(kind) != TF_OFL_CLASS_COMMAND) {
        snprintf(what, sizeof what, "%s (kind 0x%02x) sent as a command",
                 kind == TF_OFL_HEARTBEAT ? "a Heartbeat" : "an event", kind);
        return bad_frame(c, ec, what);
    }
    if (ec->frame_len - TF_OFL_FRAME_HEADER_LEN != (size_t)psize) {
        snprintf(what, sizeof what, "%s (kind 0x%02x) with %u payload bytes, not %d",
                 tf_ofx_kind_name((int)kind), kind,
                 (unsigned)(ec->frame_len - TF_OFL_FRAME_HEADER_LEN), psize);
        return bad_frame(c, ec, what);
    }
    tf_ofl_msg cmd;
    int rc = tf_ofx_frame_decode(f, ec->frame_len, &cmd);
    if (rc == TF_E_OFL_INVALID_SIDE) {
        /* A whole, well-framed command that does not decode: never journaled; the sender gets
         * Rejected(Other) with event_seq 0 and command_seq 0, then Heartbeat(0); for a gateway
         * Order, RejectedEx(Other) with its account and client_order_id. */
        uint64_t coid = 0, account = 0;
        if (kind == TF_OFL_NEW_LIMIT || kind == TF_OFL_NEW_MARKET || kind == TF_OFX_ORDER)
            memcpy(&coid, f + TF_OFL_FRAME_HEADER_LEN + 16, 8); /* client_order_id, LE */
        if (kind == TF_OFX_ORDER)
            memcpy(&account, f + TF_OFL_FRAME_HEADER_LEN + 8, 8); /* account_id, LE */
        tf_ofl_msg rej = {.kind = TF_OFL_REJECTED};
        rej.rejected.client_order_id = le64toh(coid);
        rej.rejected.reason = TF_OFL_REASON_OTHER;
        if (kind == TF_OFX_ORDER) {
            rej = (tf_ofl_msg){.kind = TF_OFX_REJECTED};
            rej.rejected_ex.account_id = le64toh(account);
            rej.rejected_ex.client_order_id = le64toh(coid);
            rej.rejected_ex.reason = TF_OFL_REASON_OTHER;
        }
        if (held_msg(s, ec, &rej) || held_heartbeat(s, ec, 0))
            return -1;
        tfn_conn_log(c, "conn %llu (%s): %s: answered Rejected(Other)", (unsigned long long)ec->id,
                     tfn_conn_transport(c), tf_strerror(rc));
        return 0;
    }
    if (rc < 0) {
        snprintf(what, sizeof what, "%s (kind 0x%02x) does not decode: %s",
                 tf_ofx_kind_name((int)kind), kind, tf_strerror(rc));
        return bad_frame(c, ec, what);
    }
    apply_command(s, ec, &cmd, 0);
    return s->failed ? -1 : 0;
}

static const tfn_ops es_ops = {
    .ibuf_bytes = IBUF_BYTES,
    .max_head = TF_OFL_MAX_FRAME,
    .on_open = es_open,
    .head = es_head,
    .frame = es_frame,
    .busy = es_busy,
    .on_idle = es_idle,
    .pull = es_pull,
    .on_close = es_close,
};

/* ---------------------------------------------------------------- run */

static int open_feed(svc *s)
{
    const char *f = s->cfg.feed;
    if (strncmp(f, "udp:", 4) != 0)
        return TF_E_INVALID_ARG;
    f += 4;
    const char *colon = strrchr(f, ':');
    if (!colon || colon == f)
        return TF_E_INVALID_ARG;
    char host[256];
    size_t hl = (size_t)(colon - f);
    if (f[0] == '[' && hl >= 2 && f[hl - 1] == ']') {
        f++;
        hl -= 2;
    }
    if (hl >= sizeof host)
        return TF_E_INVALID_ARG;
    memcpy(host, f, hl);
    host[hl] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 1 || port > 65535)
        return TF_E_INVALID_ARG;
    return tf_dgram_sender_open(host, (uint16_t)port, s->r.session_id, &s->feed);
}

static int setup(svc *s)
{
    int max_conns = s->cfg.net.max_conns > 0 ? s->cfg.net.max_conns : 4096;
    s->nslots = (uint32_t)max_conns;
    s->slots = calloc(s->nslots, sizeof *s->slots);
    s->free_slots = calloc(s->nslots, sizeof *s->free_slots);
    s->dirty = calloc(s->nslots, sizeof *s->dirty);
    if (!s->slots || !s->free_slots || !s->dirty)
        return TF_E_NOMEM;
    for (uint32_t i = 0; i < s->nslots; i++)
        s->free_slots[i] = s->nslots - 1 - i;
    s->nfree = s->nslots;
    tfn_raise_nofile(); /* 1,000 clients and more */
    return 0;
}

static void teardown(svc *s)
{
    free(s->slots);
    free(s->free_slots);
    free(s->dirty);
    free(s->feed_q);
    tf_dgram_sender_close(s->feed);
    if (s->ev_fd >= 0)
        close(s->ev_fd);
    tfv_sessions_free(&s->sessions);
    tfv_risk_config_free(&s->risk);
    free(s->resend_buf);
    free(s->routes);
    free(s->notices);
}

/* --sessions FILE (docs/venue.md, "Sessions"): refused with the file, the line and what to do. */
static int load_sessions(svc *s)
{
    if (!s->cfg.sessions)
        return 0;
    char err[512];
    int rc = tfv_sessions_load(s->cfg.sessions, &s->sessions, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: --sessions %s\n", NAME, err);
        return rc;
    }
    s->use_sessions = 1;
    return 0;
}

/* Recovery's lines, "NAME: ..." on stderr, quiet or not (tfes_recover). */
static void recover_log(void *ctx, int level, const char *fmt, va_list ap)
{
    (void)ctx;
    (void)level;
    tfn_logv(NAME, 0, TFN_LOG_ALWAYS, NULL, fmt, ap);
}

int tfes_run(const tfes_config *cfg, tfes_summary *out)
{
    svc *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    s->cfg = *cfg;
    s->ev_fd = -1;
    s->held_limit = (cfg->net.max_output ? (size_t)cfg->net.max_output : (size_t)4 << 20) / 8;
    tfn_config nc = {
        .name = NAME,
        .mem_used = &s->mem_used,
        .mem_limit = (uint64_t)1 << 30, /* the defaults; tfn_limits_apply sets what is given */
        .out_max = (size_t)4 << 20,
        /* every: each command costs an fdatasync, so a turn takes few steps from one
         * connection and a lone client is not queued behind another's long pipeline */
        .frames_per_turn = cfg->durability == TF_JOURNAL_EVERY ? 16 : 512,
        .workers = 0,
        .drain_on_stop = 1,
        .tls = cfg->tls,
        .before_sleep = before_sleep,
        .ud = s,
    };
    tfn_limits_apply(&cfg->net, &nc); /* connections, timeouts, memory, output, quiet */
    /* Signals first (no thread exists yet), then the journals: a SIGTERM during a long replay
     * waits in the signalfd and stops the service once it is up. */
    int rc = tfn_loop_open(&nc, &s->lp);
    if (!rc)
        rc = setup(s);
    if (!rc)
        rc = load_sessions(s);
    if (!rc)
        rc = tfes_recover(cfg, &(tfes_log){.logv = recover_log}, &s->r);
    if (!rc) { /* the owners of orders live at a snapshot: found by tfes_recover */
        char ev_path[4096];
        tfes_path(ev_path, sizeof ev_path, cfg->dir, "events.ofl");
        tfv_set_events(s->r.venue, s->r.events, ev_path);
    }
    if (!rc && cfg->risk && (rc = load_risk(s, 0)) == 0) {
        struct sigaction sa = {.sa_handler = on_hup}; /* no SA_RESTART: the loop wakes */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGHUP, &sa, NULL);
        commit(s);
    }
    if (!rc) { /* replies beyond the memory threshold are streamed from here (es_pull) */
        char ev_path[4096];
        tfes_path(ev_path, sizeof ev_path, cfg->dir, "events.ofl");
        s->ev_fd = open(ev_path, O_RDONLY | O_CLOEXEC);
    }
    if (!rc) {
        tf_engine_counters c;
        tf_engine_get_counters(s->r.engine, &c);
        s->next_snapshot = c.last_command_seq + cfg->snapshot_every;
        s->snap_records = s->r.snapshot_records;
        tfn_log(s->lp, 1,
                "journal %s: %llu commands (%llu replayed%s), %llu events, %llu resting orders, "
                "last_command_seq %llu, state_hash 0x%016llx",
                cfg->dir, (unsigned long long)tf_journal_next_seq(s->r.commands),
                (unsigned long long)s->r.replayed, s->r.from_snapshot ? " after the snapshot" : "",
                (unsigned long long)tf_journal_next_seq(s->r.events),
                (unsigned long long)c.resting_orders, (unsigned long long)c.last_command_seq,
                (unsigned long long)tf_engine_state_hash(s->r.engine));
    }
    if (!rc && cfg->feed && (rc = open_feed(s)))
        tfn_log(s->lp, 1, "error: --feed %s: %s", cfg->feed, tf_strerror(rc));
    if (!rc)
        rc = tfn_listen_all(s->lp, &cfg->listen, &es_ops, 0);
    if (!rc)
        rc = tfn_loop_run(s->lp);
    if (!rc && s->failed)
        rc = s->failed;
    tfn_loop_close(s->lp); /* every connection is closed: nothing is held any more */
    if (!rc) {
        /* Everything taken is durable before the summary says so. */
        int r1 = tf_journal_sync(s->r.commands);
        int r2 = tf_journal_sync(s->r.events);
        rc = r1 ? r1 : r2;
        if (rc)
            fprintf(stderr, "%s: final sync: %s\n", NAME, tf_strerror(rc));
        else
            snapshot_at_stop(s); /* a failure is said; the journals are whole either way */
    }
    if (!rc) {
        tf_engine_counters c;
        tf_engine_get_counters(s->r.engine, &c);
        out->commands = tf_journal_next_seq(s->r.commands);
        out->events = tf_journal_next_seq(s->r.events);
        out->last_command_seq = c.last_command_seq;
        out->state_hash = tf_engine_state_hash(s->r.engine);
        fprintf(stderr, "%s: stopped\n", NAME);
    }
    tfes_recovered_fini(&s->r);
    teardown(s);
    free(s);
    return rc;
}
