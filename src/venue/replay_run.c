/* Runs of plain commands in a replay: the part of a journal that tfv_apply passes to the engine
 * untouched, found so that a replay can hand it to tf_engine_apply_batch (which fetches the next
 * commands' table slots ahead) instead of one tf_engine_apply per record. The test is the one
 * tfv_apply's inline fast path makes (venue.h): kind, no connection, no owners, no risk rule in
 * force. */
#include "venue/replay_run.h"

size_t tfv_plain_run(tfv_venue *v, const tf_ofl_msg *msgs, size_t n)
{
    if (!v || !msgs || tfv_owner_count(v) || !tfv_risk_idle(tfv_venue_risk(v)))
        return 0;
    size_t k = 0;
    while (k < n && msgs[k].kind >= TF_OFL_NEW_LIMIT && msgs[k].kind <= TF_OFL_REPLACE)
        k++;
    return k;
}

int tfv_apply_run(tfv_venue *v, const tf_ofl_msg *msgs, size_t k, tf_engine_sink *sink,
                  uint64_t *applied)
{
    enum { CHUNK = 256 }; /* a pump's batch: the outcomes fit on the stack */
    int rc[CHUNK], err = 0;
    uint64_t done = 0;
    tf_engine *e = tfv_venue_engine(v);
    for (size_t i = 0; i < k && !err; i += CHUNK) {
        size_t m = k - i < CHUNK ? k - i : CHUNK;
        err = tf_engine_apply_batch(e, msgs + i, m, sink, rc);
        for (size_t j = 0; j < m && !err; j++) {
            if (rc[j] < 0)
                err = rc[j];
            done += rc[j] == TF_ENGINE_APPLIED;
        }
    }
    if (applied)
        *applied += done;
    return err;
}
