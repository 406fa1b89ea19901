/* A resent command's original events, read back from events.ofl (docs/venue.md, "Resends"). The
 * frames in events.ofl are the bytes the client was sent the first time (a reply frame carries
 * the event's journal_seq in events.ofl), so a resend is answered with them unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "venue/venue.h"

static int put(const tf_journal_reader *r, uint8_t **out, size_t *len, size_t *cap)
{
    if (*cap - *len < r->frame_len) {
        size_t c = *cap ? *cap : 4096;
        while (c - *len < r->frame_len)
            c *= 2;
        uint8_t *b = realloc(*out, c);
        if (!b)
            return TF_E_NOMEM;
        *out = b;
        *cap = c;
    }
    memcpy(*out + *len, r->frame, r->frame_len);
    *len += r->frame_len;
    return 0;
}

/* The command_seq of an event (the second field of every event payload). */
static uint64_t command_seq_of(const tf_journal_reader *r, const tf_ofl_msg *m)
{
    if (m->kind != TFV_VENUE_REJECTED && !tfv_is_ext_kind(m->kind))
        return m->accepted.command_seq;
    tfv_msg x;
    return tfv_decode_reader_frame(r, &x) == 0 ? x.ofl.rejected.command_seq : 0;
}

/* Remembers r's position when it is at the next stride point. */
static int index_add(tfv_events_index *idx, const tf_journal_reader *r)
{
    if (r->next_seq != idx->n * TFV_EVENTS_STRIDE)
        return 0;
    if (idx->n == idx->cap) {
        uint64_t c = idx->cap ? idx->cap * 2 : 64;
        uint64_t *p = realloc(idx->pos, c * sizeof *p);
        if (!p)
            return TF_E_NOMEM;
        idx->pos = p;
        idx->cap = c;
    }
    idx->pos[idx->n++] = r->pos;
    return 0;
}

static int by_index(tf_journal_reader *r, tfv_events_index *idx, uint64_t first, uint32_t count,
                    uint8_t **out, size_t *len, size_t *cap)
{
    tf_ofl_msg batch[256];
    uint64_t k = first / TFV_EVENTS_STRIDE;
    if (idx->n && k >= idx->n)
        k = idx->n - 1;
    if (idx->n && idx->pos[k] <= r->len) { /* start at the nearest known record */
        r->pos = (size_t)idx->pos[k];
        r->next_seq = k * TFV_EVENTS_STRIDE;
    }
    while (r->next_seq < first) {
        int rc = index_add(idx, r);
        if (rc)
            return rc;
        uint64_t want = first - r->next_seq;
        uint64_t to_mark = TFV_EVENTS_STRIDE - r->next_seq % TFV_EVENTS_STRIDE;
        want = want < to_mark ? want : to_mark;
        int n = tf_journal_reader_next_batch(r, batch, want < 256 ? (int)want : 256);
        if (n <= 0)
            return n ? n : TF_E_OFL_TORN_RECORD;
    }
    for (uint32_t i = 0; i < count; i++) {
        int n = tf_journal_reader_next(r, batch);
        if (n <= 0)
            return n ? n : TF_E_OFL_TORN_RECORD;
        int rc = put(r, out, len, cap);
        if (rc)
            return rc;
    }
    return 0;
}

static int by_command(tf_journal_reader *r, uint64_t command_seq, uint8_t **out, size_t *len,
                      size_t *cap)
{
    tf_ofl_msg m;
    int found = 0, n;
    while ((n = tf_journal_reader_next(r, &m)) == 1) {
        uint64_t cs = command_seq_of(r, &m);
        if (cs == command_seq) {
            found = 1;
            int rc = put(r, out, len, cap);
            if (rc)
                return rc;
        } else if (found || cs > command_seq) {
            break;
        }
    }
    return n < 0 ? n : 0;
}

int tfv_events_walk(const char *path, tfv_events_index *idx, uint64_t first, uint32_t count,
                    uint64_t command_seq, uint8_t **out, size_t *len, size_t *cap)
{
    tf_journal_map m;
    int rc = tf_journal_map_open(path, &m);
    if (rc)
        return rc;
    tf_journal_reader r;
    rc = tf_journal_reader_init(&r, m.data, m.len);
    if (!rc)
        rc = first == UINT64_MAX ? by_command(&r, command_seq, out, len, cap)
                                 : by_index(&r, idx, first, count, out, len, cap);
    tf_journal_map_close(&m);
    return rc;
}
