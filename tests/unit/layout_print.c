/* Prints the layout of every public struct that Python mirrors with ctypes, one line each:
 *   struct NAME SIZE
 *   field NAME.FIELD OFFSET SIZE
 * python/tests/test_layout.py runs it and compares every mirror with it, so a field added, moved
 * or resized on either side fails a test instead of corrupting memory. A struct Python mirrors is
 * one STRUCT row here and a field is one FIELD row. */
#include <stddef.h>
#include <stdio.h>

#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/kernel.h"
#include "tollfree/orderflow.h"

#define STRUCT(T) printf("struct %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("field %s.%s %zu %zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void)
{
    STRUCT(tf_sweep_opts);
    FIELD(tf_sweep_opts, size);
    FIELD(tf_sweep_opts, threads);
    FIELD(tf_sweep_opts, isa);
    FIELD(tf_sweep_opts, max_bytes);
    FIELD(tf_sweep_opts, fee);
    FIELD(tf_sweep_opts, stats);
    FIELD(tf_sweep_opts, progress);

    STRUCT(tf_stats);
    FIELD(tf_stats, pnl);
    FIELD(tf_stats, trades);
    FIELD(tf_stats, wins);
    FIELD(tf_stats, gross_win);
    FIELD(tf_stats, gross_loss);
    FIELD(tf_stats, best);
    FIELD(tf_stats, worst);
    FIELD(tf_stats, mean);
    FIELD(tf_stats, m2);
    FIELD(tf_stats, max_dd);
    FIELD(tf_stats, exposure_bars);

    STRUCT(tf_progress);
    FIELD(tf_progress, done);
    FIELD(tf_progress, total);
    FIELD(tf_progress, cancel);

    STRUCT(tf_engine_config);
    FIELD(tf_engine_config, size);
    FIELD(tf_engine_config, instruments);
    FIELD(tf_engine_config, n_instruments);
    FIELD(tf_engine_config, max_orders);
    FIELD(tf_engine_config, max_bytes);

    STRUCT(tf_engine_sink);
    FIELD(tf_engine_sink, ev);
    FIELD(tf_engine_sink, cap);
    FIELD(tf_engine_sink, n);
    FIELD(tf_engine_sink, flush);
    FIELD(tf_engine_sink, ctx);

    STRUCT(tf_journal_opts);
    FIELD(tf_journal_opts, size);
    FIELD(tf_journal_opts, durability);
    FIELD(tf_journal_opts, group_max_frames);
    FIELD(tf_journal_opts, group_max_us);
    FIELD(tf_journal_opts, session_id);
    FIELD(tf_journal_opts, clock_kind);
    FIELD(tf_journal_opts, flags);

    STRUCT(tf_ofl_msg);
    FIELD(tf_ofl_msg, kind);
    FIELD(tf_ofl_msg, journal_seq);
    FIELD(tf_ofl_msg, session_id);
    return ferror(stdout) ? 1 : 0;
}
