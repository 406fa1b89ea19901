/* Runs of plain commands in a replay (replay_run.c), for tf_engine_apply_batch. */
#ifndef TF_VENUE_REPLAY_RUN_H
#define TF_VENUE_REPLAY_RUN_H

#include <stddef.h>

#include "venue/venue.h"

/* How many of msgs[0..n) (decoded records of a replay: no connection), from the first, tfv_apply
 * would hand straight to tf_engine_apply, one by one: plain OFL1 commands (NewLimit..Replace),
 * while the venue follows no owners and no risk limit or kill switch is in force. Applying such a
 * run cannot change either (owners and risk state move only through extension records and the
 * events of owned orders), so the whole run may go to tf_engine_apply_batch on
 * tfv_venue_engine(v): the same state, events and outcomes as tfv_apply on each. 0 when
 * msgs[0] is not one (or n is 0). */
size_t tfv_plain_run(tfv_venue *v, const tf_ofl_msg *msgs, size_t n);

/* Applies such a run, msgs[0..k), through tf_engine_apply_batch. Returns 0 and adds to *applied
 * (when not NULL) how many were TF_ENGINE_APPLIED, or the first error among the outcomes (the
 * sink's failure: the commands after it in the run were applied too, so the caller stops there
 * and drops the engine, as a replay that meets an error does). */
int tfv_apply_run(tfv_venue *v, const tf_ofl_msg *msgs, size_t k, tf_engine_sink *sink,
                  uint64_t *applied);

#endif
