/* Fuzz target: the OFL1 datagram decoder and the receiver's sequence tracker.
 *
 * 1. The whole input is one datagram: it decodes to a message that re-encodes to the same bytes,
 *    or to a code of the OFL range.
 * 2. The input is also read as a sequence of datagrams, each [u8 length][bytes], fed to one
 *    tracker: its counters always add up, next_seq never moves back, and a GAP/LATE event
 *    is consistent with it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/datagram.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_ofl_msg m;
    int n = tf_ofl_datagram_decode(data, size, &m);
    if (n >= 0) {
        uint8_t enc[TF_OFL_MAX_DATAGRAM];
        if (n != (int)size || tf_ofl_datagram_encode(enc, sizeof enc, &m) != n ||
            memcmp(enc, data, size))
            abort();
    } else if (!(n < TF_E_OFL_BASE && n > TF_E_OFL_BASE - 100)) {
        abort();
    }

    /* track the session of the first datagram that decodes, from its journal_seq - 3 */
    tf_dgram_tracker t;
    int started = 0;
    size_t off = 0;
    while (off < size) {
        size_t len = data[off++];
        if (len > size - off)
            len = size - off;
        if (!started) {
            tf_ofl_msg first;
            if (tf_ofl_datagram_decode(data + off, len, &first) >= 0) {
                tf_dgram_tracker_init(&t, first.session_id,
                                      first.journal_seq > 3 ? first.journal_seq - 3 : 0);
                started = 1;
            }
        }
        if (started) {
            uint64_t before = t.next_seq;
            tf_dgram_event ev;
            int st = tf_dgram_track(&t, data + off, len, &ev);
            if (st != ev.status || st < TF_DGRAM_IN_ORDER || st > TF_DGRAM_MALFORMED)
                abort();
            if (t.next_seq < before)
                abort();
            if (st == TF_DGRAM_GAP && (ev.gap_count == 0 || ev.gap_first != before))
                abort();
            if (st == TF_DGRAM_MALFORMED && ev.error >= 0)
                abort();
            const tf_dgram_stats *s = &t.stats;
            uint64_t data_msgs = s->in_order + s->gaps + s->late + s->duplicates;
            if (data_msgs + s->foreign + s->malformed + s->heartbeats < s->datagrams)
                abort();
        }
        off += len;
    }
    return 0;
}
