/* The owners of the orders live at a snapshot: a start from a snapshot knows the engine's live
 * orders but not which session placed each; the session is in the Keyed record of the command
 * that placed it, found through its Accepted event (docs/venue.md).
 *
 * The start finds them before it applies the records after the snapshot (a CancelOnDisconnect
 * among those cancels what its session placed before the snapshot), and walks only what the
 * snapshot covers: the events up to its event count, the commands from the first extension
 * record to the last record it covers. Both journals were checked whole by their open (each
 * record's length, CRC and journal_seq), so the walks find records by their length fields alone
 * (read in pieces, tfo_pieces) and read only the kind and the few fields they need; each stops
 * once every order is placed. A snapshot written by the service keeps the owners itself
 * (recover.c): these walks are for one that does not. */
#include <stdlib.h>
#include <string.h>

#include "orderflow/fio.h"
#include "venue/venue.h"

/* Byte offsets in a journal record: u16 frame length, u8 kind, u64 journal_seq, payload
 * (docs/orderflow.md). Accepted and AcceptedEx: event_seq, command_seq, timestamp_ns, order_id
 * first; Keyed: u64 session, u64 client_seq, u8 flags, u8 inner kind, the inner command
 * (command_seq first). */
#define PAYLOAD 11
#define ACC_COMMAND_SEQ (PAYLOAD + 8)
#define ACC_ORDER_ID (PAYLOAD + 24)
#define KEYED_SESSION PAYLOAD
#define KEYED_COMMAND_SEQ (PAYLOAD + TFV_KEYED_HEAD_LEN)

typedef struct orphan {
    uint64_t order_id, command_seq;
} orphan;

typedef struct orphans {
    tfv_venue *v;
    orphan *a;
    size_t n, cap;
} orphans;

static uint64_t ld64le(const uint8_t *p)
{
    uint64_t v; /* one load, not a byte loop: the walks read a field or two of every record */
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

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

/* The command_seq of each orphan's Accepted among the first `records` events. Order ids are
 * given in ascending order (next_order_id++), so the events and the orphans (by order id) are
 * merged in one pass. */
static int find_accepted(orphans *x, const tfv_rebuild_span *ev)
{
    tfo_pieces w;
    int rc = tfo_pieces_open(&w, ev->path, ev->from, ev->to), n = 1;
    const uint8_t *p;
    size_t len, k = 0;
    unsigned long long off;
    for (uint64_t i = 0; !rc && i < ev->records && k < x->n; i++) {
        if ((n = tfo_pieces_next(&w, &p, &len, &off)) != 1)
            break;
        if ((p[2] == TF_OFL_ACCEPTED || p[2] == TF_OFX_ACCEPTED) && len >= ACC_ORDER_ID + 8) {
            uint64_t id = ld64le(p + ACC_ORDER_ID);
            while (k < x->n && x->a[k].order_id < id)
                k++; /* not accepted among these events: no owner to find */
            if (k < x->n && x->a[k].order_id == id)
                x->a[k++].command_seq = ld64le(p + ACC_COMMAND_SEQ);
        }
    }
    tfo_pieces_close(&w);
    return rc ? rc : n < 0 ? n : 0;
}

/* The Keyed records of commands.ofl between bytes from and to (command_seq ascending, as the
 * orphans now are): each one that placed an orphan names its owner. */
static int find_keyed(orphans *x, const tfv_rebuild_span *cmd)
{
    size_t k = 0;
    while (k < x->n && !x->a[k].command_seq)
        k++; /* no Accepted found */
    tfo_pieces w;
    int rc = tfo_pieces_open(&w, cmd->path, cmd->from, cmd->to), n = 1;
    const uint8_t *p;
    size_t len;
    unsigned long long off;
    while (!rc && k < x->n && (n = tfo_pieces_next(&w, &p, &len, &off)) == 1) {
        if (p[2] != TFV_KEYED || len < KEYED_COMMAND_SEQ + 8)
            continue;
        uint64_t seq = ld64le(p + KEYED_COMMAND_SEQ);
        while (k < x->n && x->a[k].command_seq < seq)
            k++; /* placed by a plain command: nobody's */
        if (k < x->n && x->a[k].command_seq == seq)
            rc = tfv_owner_put(x->v, x->a[k++].order_id, ld64le(p + KEYED_SESSION));
    }
    tfo_pieces_close(&w);
    return rc ? rc : n < 0 ? n : 0;
}

int tfv_rebuild_owners(tfv_venue *v, const tfv_rebuild_span *ev, const tfv_rebuild_span *cmd)
{
    orphans x = {.v = v};
    int rc = tf_engine_for_each_order(tfv_venue_engine(v), add_orphan, &x);
    if (!rc && x.n) {
        qsort(x.a, x.n, sizeof *x.a, by_order);
        rc = find_accepted(&x, ev);
    }
    if (!rc && x.n) {
        qsort(x.a, x.n, sizeof *x.a, by_command);
        rc = find_keyed(&x, cmd);
    }
    free(x.a);
    return rc ? rc : (int)(tfv_owner_count(v) > INT32_MAX ? INT32_MAX : tfv_owner_count(v));
}
