/* The owners of the orders live at a snapshot: a start from a snapshot knows the engine's live
 * orders but not which session placed each; the session is in the Keyed record of the command
 * that placed it, found through its Accepted event (docs/venue.md). */
#include <stdlib.h>

#include "venue/venue.h"

typedef struct orphan {
    uint64_t order_id, command_seq;
} orphan;

typedef struct orphans {
    tfv_venue *v;
    orphan *a;
    size_t n, cap;
} orphans;

static int add_orphan(void *ctx, const tf_engine_order *o)
{
    orphans *x = ctx;
    if (tfv_owner_known(x->v, o->order_id))
        return 0;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 1024;
        orphan *a = realloc(x->a, cap * sizeof *a);
        if (!a)
            return TF_E_NOMEM;
        x->a = a;
        x->cap = cap;
    }
    x->a[x->n++] = (orphan){o->order_id, 0};
    return 0;
}

static int by_order(const void *a, const void *b)
{
    uint64_t x = ((const orphan *)a)->order_id, y = ((const orphan *)b)->order_id;
    return x < y ? -1 : x > y;
}

static int by_command(const void *a, const void *b)
{
    uint64_t x = ((const orphan *)a)->command_seq, y = ((const orphan *)b)->command_seq;
    return x < y ? -1 : x > y;
}

/* Walks the journal at path, calling fn for every record (ext records decoded). */
static int walk_journal(const char *path, int (*fn)(void *ctx, const tfv_msg *m), void *ctx)
{
    tf_journal_map map;
    int rc = tf_journal_map_open(path, &map);
    if (rc)
        return rc;
    tf_journal_reader r;
    rc = tf_journal_reader_init(&r, map.data, map.len);
    tf_ofl_msg batch[256];
    int n;
    while (!rc && (n = tf_journal_reader_next_batch(&r, batch, 256)) > 0) {
        for (int i = 0; i < n && !rc; i++) {
            tfv_msg m = {.kind = batch[i].kind, .ofl = batch[i]};
            if (tfv_is_ext_kind(m.kind) && tfv_decode_reader_frame(&r, &m) < 0)
                continue;
            rc = fn(ctx, &m);
        }
    }
    tf_journal_map_close(&map);
    return rc;
}

static int find_accepted(void *ctx, const tfv_msg *m)
{
    orphans *x = ctx;
    if (m->kind != TF_OFL_ACCEPTED && m->kind != TF_OFX_ACCEPTED)
        return 0;
    /* Accepted and AcceptedEx: event_seq, command_seq, timestamp_ns, order_id first */
    orphan key = {m->ofl.accepted.order_id, 0};
    orphan *o = bsearch(&key, x->a, x->n, sizeof *x->a, by_order);
    if (o)
        o->command_seq = m->ofl.accepted.command_seq;
    return 0;
}

static int find_keyed(void *ctx, const tfv_msg *m)
{
    orphans *x = ctx;
    if (m->kind != TFV_KEYED)
        return 0;
    orphan key = {0, m->ofl.new_limit.command_seq};
    orphan *o = bsearch(&key, x->a, x->n, sizeof *x->a, by_command);
    return o ? tfv_owner_put(x->v, o->order_id, m->session) : 0;
}

int tfv_rebuild_owners(tfv_venue *v, const char *cmd_path, const char *ev_path)
{
    orphans x = {.v = v};
    int rc = tf_engine_for_each_order(tfv_venue_engine(v), add_orphan, &x);
    if (!rc && x.n) {
        qsort(x.a, x.n, sizeof *x.a, by_order);
        rc = walk_journal(ev_path, find_accepted, &x);
    }
    if (!rc && x.n) {
        qsort(x.a, x.n, sizeof *x.a, by_command);
        rc = walk_journal(cmd_path, find_keyed, &x);
    }
    free(x.a);
    return rc ? rc : (int)(tfv_owner_count(v) > INT32_MAX ? INT32_MAX : tfv_owner_count(v));
}
