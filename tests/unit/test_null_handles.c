/* Every public entry point that takes a handle checks it for NULL: it returns TF_E_NULL_ARG, or
 * for a getter the value its header documents, and never dereferences it. Each call runs in a
 * child process so that one crash names itself and does not hide the others. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/client.h"
#include "tollfree/datagram.h"
#include "tollfree/engine.h"
#include "tollfree/error.h"
#include "tollfree/journal.h"
#include "tollfree/kernel.h"
#include "tollfree/orders.h"

/* Runs `expr` in a child; the child exits 0 when (long long)(expr) == want, 1 otherwise. */
#define NULL_CASE(expr, want)                                                                      \
    do {                                                                                           \
        fflush(NULL);                                                                              \
        pid_t pid_ = fork();                                                                       \
        if (pid_ == 0) {                                                                           \
            long long got_ = (long long)(expr);                                                    \
            if (got_ != (long long)(want))                                                         \
                fprintf(stderr, "%s = %lld, wanted %lld\n", #expr, got_, (long long)(want));       \
            _exit(got_ == (long long)(want) ? 0 : 1);                                              \
        }                                                                                          \
        int st_ = 0;                                                                               \
        waitpid(pid_, &st_, 0);                                                                    \
        if (!(WIFEXITED(st_) && WEXITSTATUS(st_) == 0))                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                          \
                    WIFSIGNALED(st_) ? "crashed" : "wrong result");                                \
        CHECK(WIFEXITED(st_) && WEXITSTATUS(st_) == 0);                                            \
    } while (0)

/* A void call: it must return. */
#define NULL_VOID(stmt) NULL_CASE((stmt, 0), 0)

static void kernel(void)
{
    int64_t params[6] = {6, 3, 2, 3, 1, 2}, trades = 0;
    double pnl = 0;
    tf_stats stats;
    NULL_CASE(tf_series_sweep(NULL, params, 1, &pnl, &trades, NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_series_cached_bytes(NULL), 0);
    NULL_VOID(tf_series_close(NULL));
    NULL_CASE(tf_strategy_step(NULL, 1.0), TF_E_NULL_ARG);
    NULL_CASE(tf_strategy_set_fee(NULL, 0.0), TF_E_NULL_ARG);
    NULL_CASE(tf_strategy_stats(NULL, &stats), TF_E_NULL_ARG);
    NULL_CASE(tf_strategy_pnl(NULL) == 0.0, 1);
    NULL_CASE(tf_strategy_trades(NULL), 0);
    NULL_CASE(tf_strategy_bars(NULL), 0);
    NULL_VOID(tf_strategy_reset(NULL));
    NULL_VOID(tf_strategy_close(NULL));
}

static void client(void)
{
    uint64_t h = 0, stats[64];
    int64_t params[6] = {6, 3, 2, 3, 1, 2}, trades = 0;
    double close[4] = {1, 2, 3, 4}, pnl = 0, out[4];
    tf_server_info info;
    tf_session_state st;
    int created = 0;
    NULL_CASE(tf_client_set_timeout(NULL, 10), TF_E_NULL_ARG);
    NULL_CASE(tf_client_hello(NULL, &info), TF_E_NULL_ARG);
    NULL_CASE(tf_client_echo(NULL, close, 8, out), TF_E_NULL_ARG);
    NULL_CASE(tf_client_load(NULL, close, 4, &h, &created), TF_E_NULL_ARG);
    NULL_CASE(tf_client_load_fd(NULL, -1, 4, &h, &created), TF_E_NULL_ARG);
    NULL_CASE(tf_client_sweep(NULL, 1, params, 1, &pnl, &trades), TF_E_NULL_ARG);
    NULL_CASE(tf_client_sweep_inline(NULL, close, 4, params, 1, &pnl, &trades), TF_E_NULL_ARG);
    NULL_CASE(tf_client_run_one(NULL, 1, params, &pnl, &trades), TF_E_NULL_ARG);
    NULL_CASE(tf_client_drop(NULL, 1), TF_E_NULL_ARG);
    NULL_CASE(tf_client_stats(NULL, stats), TF_E_NULL_ARG);
    NULL_CASE(tf_client_session_open(NULL, params, &h), TF_E_NULL_ARG);
    NULL_CASE(tf_client_session_bar(NULL, 1, 1.0, &st), TF_E_NULL_ARG);
    NULL_CASE(tf_client_session_query(NULL, 1, &st), TF_E_NULL_ARG);
    NULL_CASE(tf_client_session_close(NULL, 1, &st), TF_E_NULL_ARG);
    NULL_CASE(tf_client_v1_sweep(NULL, close, 4, params, 1, &pnl, &trades), TF_E_NULL_ARG);
    NULL_CASE(tf_client_v1_echo(NULL, close, 4, out), TF_E_NULL_ARG);
    NULL_CASE(tf_client_error_message(NULL) != NULL, 1);
    NULL_VOID(tf_client_close(NULL));
}

static void orders(void)
{
    tf_orders_reply r;
    tf_ofl_msg m, ev[4];
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_CANCEL_BY_ORDER;
    NULL_CASE(tf_orders_set_timeout(NULL, 10), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_call(NULL, &m, &r), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_new_limit(NULL, 1, 1, 1, TF_OFL_BUY, 100, 1, &r), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_new_market(NULL, 1, 1, 1, TF_OFL_BUY, 1, &r), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_cancel(NULL, 1, &r), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_cancel_client(NULL, 1, 1, &r), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_replace(NULL, 1, 1, 100, 1, &r), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_send_many(NULL, &m, 1, ev, 4, NULL, NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_poll_fills(NULL, ev, 4, 0), TF_E_NULL_ARG);
    NULL_CASE(tf_orders_fills_dropped(NULL), 0);
    NULL_CASE(tf_orders_fd(NULL), -1); /* documented: -1 when closed */
    NULL_VOID(tf_orders_close(NULL));
}

static void datagram(void)
{
    tf_ofl_msg m;
    tf_dgram_event ev[2];
    uint8_t buf[64] = {0};
    memset(&m, 0, sizeof m);
    NULL_VOID(tf_dgram_tracker_init(NULL, 1, 0));
    NULL_CASE(tf_dgram_track(NULL, buf, sizeof buf, ev), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_send(NULL, &m, 1), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_send_heartbeat(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_sender_fd(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_recv(NULL, ev, 2, 0), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_receiver_port(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_receiver_fd(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_dgram_receiver_tracker(NULL) == NULL, 1);
    NULL_VOID(tf_dgram_sender_close(NULL));
    NULL_VOID(tf_dgram_receiver_close(NULL));
}

static int count_order(void *ctx, const tf_engine_order *o)
{
    (void)o;
    ++*(int *)ctx;
    return 0;
}

static void engine(void)
{
    tf_ofl_msg m, ev[4];
    tf_engine_sink sink = {ev, 4, 0, NULL, NULL};
    tf_engine_counters c;
    tf_engine_order o;
    tf_engine_level lv[2];
    int64_t px;
    uint64_t q, len;
    uint8_t buf[64];
    int n = 0;
    memset(&m, 0, sizeof m);
    NULL_CASE(tf_engine_apply(NULL, &m, &sink), TF_E_NULL_ARG);
    NULL_CASE((memset(&c, 0xff, sizeof c), tf_engine_get_counters(NULL, &c), c.applied), 0);
    NULL_CASE(tf_engine_state_hash(NULL), 0);
    NULL_CASE(tf_engine_find_order(NULL, 1, &o), TF_E_NULL_ARG);
    NULL_CASE(tf_engine_best(NULL, 1, TF_OFL_BUY, &px, &q), TF_E_NULL_ARG);
    NULL_CASE(tf_engine_depth(NULL, 1, TF_OFL_BUY, lv, 2), TF_E_NULL_ARG);
    NULL_CASE(tf_engine_for_each_order(NULL, count_order, &n), TF_E_NULL_ARG);
    NULL_CASE(tf_engine_snapshot_size(NULL), 0);
    NULL_CASE(tf_engine_snapshot_write(NULL, buf, sizeof buf, &len), TF_E_NULL_ARG);
    NULL_CASE(tf_engine_snapshot_save(NULL, "/nonexistent/x"), TF_E_NULL_ARG);
    NULL_CASE(tf_engine_flow_next(NULL, &m), TF_E_NULL_ARG);
    NULL_VOID(tf_engine_flow_close(NULL));
    NULL_VOID(tf_engine_destroy(NULL));
}

static void journal(void)
{
    tf_ofl_msg m;
    tf_journal_stats st;
    tf_journal_reader r;
    uint8_t frame[32] = {0};
    memset(&m, 0, sizeof m);
    NULL_CASE(tf_journal_append(NULL, &m, NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_append_frame(NULL, frame, sizeof frame), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_flush(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_sync(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_poll(NULL), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_next_seq(NULL), 0);
    NULL_CASE(tf_journal_durable_end(NULL), 0);
    NULL_CASE(tf_journal_is_durable(NULL, 0), 0);
    NULL_CASE(tf_journal_header(NULL) == NULL, 1);
    NULL_CASE((memset(&st, 0xff, sizeof st), tf_journal_get_stats(NULL, &st), st.bytes), 0);
    NULL_CASE(tf_journal_close(NULL), 0);
    NULL_CASE(tf_journal_reader_init(NULL, frame, sizeof frame), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_reader_next(NULL, &m), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_reader_next_batch(NULL, &m, 1), TF_E_NULL_ARG);
    NULL_CASE(tf_journal_reader_skip(NULL), TF_E_NULL_ARG);
    NULL_CASE((memset(&r, 0, sizeof r), tf_journal_reader_next(&r, NULL)), TF_E_NULL_ARG);
    NULL_VOID(tf_journal_map_close(NULL));
}

int main(void)
{
    kernel();
    client();
    orders();
    datagram();
    engine();
    journal();
    printf("%d passed, %d failed\n", tf_test_passed, tf_test_failed);
    return tf_test_failed ? 1 : 0;
}
