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
#include "tollfree/paper.h"
#include "tollfree/prices.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

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
    STRUCT(tf_paper_config);
    FIELD(tf_paper_config, size);
    FIELD(tf_paper_config, combo);
    FIELD(tf_paper_config, tick);
    FIELD(tf_paper_config, fee);
    FIELD(tf_paper_config, instrument);
    FIELD(tf_paper_config, half_spread);
    FIELD(tf_paper_config, coarse_tick);
    FIELD(tf_paper_config, timeout_ms);
    FIELD(tf_paper_config, engine_url);
    FIELD(tf_paper_config, journal_dir);
    FIELD(tf_paper_config, progress);
    FIELD(tf_paper_config, strategy);
    FIELD(tf_paper_config, params);
    FIELD(tf_paper_config, session);
    FIELD(tf_paper_config, secret);
    FIELD(tf_paper_config, secret_len);
    FIELD(tf_paper_config, max_inflight);

    STRUCT(tf_paper_result);
    FIELD(tf_paper_result, size);
    FIELD(tf_paper_result, fill_log);
    FIELD(tf_paper_result, fill_log_cap);
    FIELD(tf_paper_result, equity);
    FIELD(tf_paper_result, mtm);
    FIELD(tf_paper_result, tick);
    FIELD(tf_paper_result, tick_source);
    FIELD(tf_paper_result, position);
    FIELD(tf_paper_result, rounded_closes);
    FIELD(tf_paper_result, first_rounded);
    FIELD(tf_paper_result, bars);
    FIELD(tf_paper_result, orders);
    FIELD(tf_paper_result, fills);
    FIELD(tf_paper_result, lots);
    FIELD(tf_paper_result, commands);
    FIELD(tf_paper_result, events);
    FIELD(tf_paper_result, pnl);
    FIELD(tf_paper_result, trades);
    FIELD(tf_paper_result, kernel_pnl);
    FIELD(tf_paper_result, kernel_trades);
    FIELD(tf_paper_result, stream_pnl);
    FIELD(tf_paper_result, stream_trades);
    FIELD(tf_paper_result, unrounded_pnl);
    FIELD(tf_paper_result, unrounded_trades);
    FIELD(tf_paper_result, unrounded_diff);
    FIELD(tf_paper_result, spread_cost);
    FIELD(tf_paper_result, parity);
    FIELD(tf_paper_result, unrounded_parity);
    FIELD(tf_paper_result, has_state_hash);
    FIELD(tf_paper_result, in_process);
    FIELD(tf_paper_result, state_hash);
    FIELD(tf_paper_result, venue_fills);
    FIELD(tf_paper_result, fills_dropped);
    FIELD(tf_paper_result, seconds);

    STRUCT(tf_paper_fill);

    STRUCT(tf_prices_opts);
    FIELD(tf_prices_opts, size);
    FIELD(tf_prices_opts, name);
    FIELD(tf_prices_opts, column);
    FIELD(tf_prices_opts, date_column);
    FIELD(tf_prices_opts, raw);
    FIELD(tf_prices_opts, skip_bad_rows);
    FIELD(tf_prices_opts, sep);
    FIELD(tf_prices_opts, assume_sorted);
    FIELD(tf_prices_opts, keep_dates);
    STRUCT(tf_results);
    FIELD(tf_results, params);
    FIELD(tf_results, pnl);
    FIELD(tf_results, trades);
    FIELD(tf_results, stats);
    FIELD(tf_results, m);
    FIELD(tf_results, dparams);
    FIELD(tf_results, n_params);
    FIELD(tf_results, param_names);
    FIELD(tf_results, time);
    STRUCT(tf_strategy_def);
    FIELD(tf_strategy_def, size);
    FIELD(tf_strategy_def, abi);
    FIELD(tf_strategy_def, name);
    FIELD(tf_strategy_def, n_params);
    FIELD(tf_strategy_def, param_names);
    FIELD(tf_strategy_def, state_size);
    FIELD(tf_strategy_def, init);
    FIELD(tf_strategy_def, step);
    FIELD(tf_strategy_def, state_bytes);
    FIELD(tf_strategy_def, steps);
    FIELD(tf_strategy_def, lanes);
    FIELD(tf_strategy_def, changes);
    STRUCT(tf_fold);
    FIELD(tf_fold, is_start);
    FIELD(tf_fold, is_end);
    FIELD(tf_fold, oos_start);
    FIELD(tf_fold, oos_end);
    STRUCT(tf_oos_opts);
    FIELD(tf_oos_opts, size);
    FIELD(tf_oos_opts, split);
    FIELD(tf_oos_opts, walk_forward);
    FIELD(tf_oos_opts, metric);
    FIELD(tf_oos_opts, reference);
    FIELD(tf_oos_opts, anchored);
    FIELD(tf_oos_opts, warmup);
    FIELD(tf_oos_opts, min_trades);
    STRUCT(tf_grid_report);
    FIELD(tf_grid_report, too_long);
    FIELD(tf_grid_report, first_too_long);
    FIELD(tf_grid_report, first_warmup);
    FIELD(tf_grid_report, duplicates);
    FIELD(tf_grid_report, first_duplicate);
    FIELD(tf_grid_report, duplicate_of);
    STRUCT(tf_time_stats);
    FIELD(tf_time_stats, equity);
    FIELD(tf_time_stats, cagr);
    FIELD(tf_time_stats, ann_vol);
    FIELD(tf_time_stats, sharpe);
    FIELD(tf_time_stats, sortino);
    FIELD(tf_time_stats, calmar);
    FIELD(tf_time_stats, mtm_max_dd);
    FIELD(tf_time_stats, exposure_pct);
    FIELD(tf_time_stats, buy_hold);
    FIELD(tf_time_stats, compounded);
    FIELD(tf_time_stats, mean_bars);
    FIELD(tf_time_stats, max_bars);
    FIELD(tf_time_stats, mean_days);
    FIELD(tf_time_stats, max_days);
    FIELD(tf_time_stats, periods_per_year);
    STRUCT(tf_time_opts);
    FIELD(tf_time_opts, size);
    FIELD(tf_time_opts, times);
    FIELD(tf_time_opts, periods_per_year);
    FIELD(tf_time_opts, fee);
    FIELD(tf_time_opts, threads);
    STRUCT(tf_derived);
    FIELD(tf_derived, win_rate);
    FIELD(tf_derived, profit_factor);
    FIELD(tf_derived, sharpe_per_trade);
    FIELD(tf_derived, avg_trade);
    STRUCT(tf_oos_row);
    FIELD(tf_oos_row, fold);
    FIELD(tf_oos_row, winner);
    FIELD(tf_oos_row, is_value);
    FIELD(tf_oos_row, is_pnl);
    FIELD(tf_oos_row, is_trades);
    FIELD(tf_oos_row, oos_value);
    FIELD(tf_oos_row, oos_pnl);
    FIELD(tf_oos_row, oos_trades);
    FIELD(tf_oos_row, oos_rank);
    FIELD(tf_oos_row, oos_best_value);
    STRUCT(tf_trade);
    FIELD(tf_trade, entry_bar);
    FIELD(tf_trade, exit_bar);
    FIELD(tf_trade, entry_price);
    FIELD(tf_trade, exit_price);
    FIELD(tf_trade, ret);
    FIELD(tf_trade, direction);
    FIELD(tf_trade, open);
    return ferror(stdout) ? 1 : 0;
}
