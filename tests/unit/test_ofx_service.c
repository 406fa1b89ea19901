/* Gateway commands (Order, Cancel, ReplaceByClient) through the real `tollfree engine serve` and
 * the C order client (tf_orders_*):
 *   - replies are gateway reports; a Fill goes to the maker's connection too, between replies,
 *     whether the maker's order came from an Order or an OFL1 NewLimit;
 *   - a gateway Order with a bad side byte is answered RejectedEx(Other) + Heartbeat(0), not
 *     journaled, and the connection stays usable;
 *   - after kill -9 a restart recovers the journal (gateway commands replayed) to the state hash
 *     `engine run` computes offline from the same commands.ofl.
 * Deadlines only guard against hangs. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/orderflow.h"
#include "tollfree/orders.h"

typedef struct esrv {
    pid_t pid;
    char dir[64], jdir[128], log[128], out[128], sock[128], url[160];
    int tcp_port;
} esrv;

static int es_start(esrv *s)
{
    const char *argv[] = {t_bin(), "engine", "serve",       "--journal",     s->jdir, "--unix",
                          s->sock, "--tcp",  "127.0.0.1:0", "--instruments", "1-4",   NULL};
    unlink(s->log);
    s->pid = t_spawn(argv, s->log, s->out);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    return t_wait_listening(&s->pid, s->log, 0, &s->tcp_port, "engine service");
}

static tf_ofl_msg order(uint64_t acct, uint64_t coid, int side, int64_t px, uint64_t qty, int tif)
{
    tf_ofl_msg m = {.kind = TF_OFX_ORDER};
    m.order.account_id = acct;
    m.order.client_order_id = coid;
    m.order.instrument_id = 2;
    m.order.side = (uint8_t)side;
    m.order.price = px;
    m.order.quantity = qty;
    m.order.type = TF_OFX_LIMIT;
    m.order.tif = (uint8_t)tif;
    return m;
}

static int call(tf_orders *c, const tf_ofl_msg *cmd, tf_ofl_msg *ev, size_t cap)
{
    tf_orders_reply r = {.ev = ev, .cap = cap};
    int rc = tf_orders_call(c, cmd, &r);
    return rc < 0 ? rc : (int)r.n;
}

/* One OFL stream frame (u16 frame_len first) from fd: its size, or < 0. */
static long recv_ofl(int fd, uint8_t *buf, size_t cap)
{
    if (t_recv_exact(fd, buf, 2, T_DEADLINE_MS))
        return -1;
    size_t n = (size_t)buf[0] | (size_t)buf[1] << 8;
    if (n + 2 > cap || t_recv_exact(fd, buf + 2, n, T_DEADLINE_MS))
        return -1;
    return (long)n + 2;
}

/* `tollfree engine run` of the journal: its state_hash into hash[32]. */
static int offline_hash(const esrv *s, char hash[32])
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s engine run %s/commands.ofl --instruments 1-4 --quiet > %s/run",
             t_bin(), s->jdir, s->dir);
    if (system(cmd) != 0)
        return -1;
    snprintf(cmd, sizeof cmd, "%s/run", s->dir);
    t_read_file(cmd, out, sizeof out);
    const char *p = strstr(out, "\"state_hash\":\"");
    if (!p)
        return -1;
    snprintf(hash, 32, "%.18s", p + 14);
    return 0;
}

/* The state_hash of the service's "journal ...: ... state_hash H" start line. */
static int start_hash(const esrv *s, char hash[32])
{
    static char log[1 << 16];
    t_read_file(s->log, log, sizeof log);
    const char *p = strstr(log, "state_hash ");
    if (!p)
        return -1;
    snprintf(hash, 32, "%.18s", p + 11);
    return 0;
}

int main(void)
{
    esrv s;
    memset(&s, 0, sizeof s);
    CHECK(t_mkdtemp(s.dir, sizeof s.dir) == 0);
    snprintf(s.jdir, sizeof s.jdir, "%s/j", s.dir);
    snprintf(s.log, sizeof s.log, "%s/log", s.dir);
    snprintf(s.out, sizeof s.out, "%s/out", s.dir);
    snprintf(s.sock, sizeof s.sock, "%s/e.sock", s.dir);
    snprintf(s.url, sizeof s.url, "unix:%s", s.sock);
    if (es_start(&s)) {
        CHECK(!"the service starts");
        return tf_test_report();
    }
    tf_orders *a = NULL, *b = NULL;
    CHECK_RC(tf_orders_connect(&a, s.url, NULL), 0);
    CHECK_RC(tf_orders_connect(&b, s.url, NULL), 0);
    tf_ofl_msg ev[8], fills[4];
    if (a && b) {
        /* a rests a gateway sell; b's IOC buy takes it and the rest is canceled */
        tf_ofl_msg m = order(1, 10, TF_OFL_SELL, 500, 3, TF_OFX_GTC);
        CHECK_EQ(call(a, &m, ev, 8), 1);
        CHECK_EQ(ev[0].kind, TF_OFX_ACCEPTED);
        uint64_t maker = ev[0].accepted_ex.order_id;
        m = order(2, 20, TF_OFL_BUY, 500, 5, TF_OFX_IOC);
        CHECK_EQ(call(b, &m, ev, 8), 3);
        CHECK(ev[0].kind == TF_OFX_ACCEPTED && ev[1].kind == TF_OFX_FILL &&
              ev[2].kind == TF_OFX_CANCELED);
        CHECK(ev[1].fill.maker_order_id == maker && ev[1].fill.quantity == 3 &&
              ev[1].fill.maker_remaining == 0 && ev[1].fill.maker_filled == 3);
        CHECK(ev[2].canceled_ex.reason == TF_OFX_CANCEL_UNFILLED &&
              ev[2].canceled_ex.remaining == 2);
        tf_ofl_msg fill = ev[1];
        CHECK_EQ(tf_orders_poll_fills(a, fills, 4, T_DEADLINE_MS), 1);
        CHECK(fills[0].kind == TF_OFX_FILL && fills[0].fill.event_seq == fill.fill.event_seq);
        /* an OFL1 NewLimit maker, hit by a gateway Order: its connection gets the Fill */
        tf_ofl_msg nl = {.kind = TF_OFL_NEW_LIMIT};
        nl.new_limit.account_id = 1;
        nl.new_limit.client_order_id = 11;
        nl.new_limit.instrument_id = 2;
        nl.new_limit.side = TF_OFL_SELL;
        nl.new_limit.price = 600;
        nl.new_limit.quantity.lo = 2;
        CHECK_EQ(call(a, &nl, ev, 8), 1);
        CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
        m = order(2, 21, TF_OFL_BUY, 600, 1, TF_OFX_GTC);
        CHECK_EQ(call(b, &m, ev, 8), 2);
        CHECK_EQ(ev[1].kind, TF_OFX_FILL);
        CHECK_EQ(tf_orders_poll_fills(a, fills, 4, T_DEADLINE_MS), 1);
        CHECK_EQ(fills[0].kind, TF_OFX_FILL);
        /* replace and cancel by client order id */
        m = (tf_ofl_msg){.kind = TF_OFX_REPLACE_BY_CLIENT};
        m.replace_by_client.account_id = 1;
        m.replace_by_client.client_order_id = 11;
        m.replace_by_client.new_client_order_id = 12;
        m.replace_by_client.price = 601;
        m.replace_by_client.quantity = 1;
        CHECK_EQ(call(a, &m, ev, 8), 1);
        CHECK(ev[0].kind == TF_OFX_REPLACED && ev[0].replaced_ex.filled == 1);
        m = (tf_ofl_msg){.kind = TF_OFX_CANCEL};
        m.cancel.account_id = 1;
        m.cancel.client_order_id = 12;
        CHECK_EQ(call(a, &m, ev, 8), 1);
        CHECK(ev[0].kind == TF_OFX_CANCELED && ev[0].canceled_ex.reason == TF_OFX_CANCEL_REQUESTED);
        /* the client refuses what the codec would (a bad side), before sending */
        m = order(1, 13, 2, 1, 1, TF_OFX_GTC);
        CHECK_RC(call(a, &m, ev, 8), TF_E_OFL_INVALID_SIDE);
    }
    /* a bad side byte sent anyway: RejectedEx(Other), Heartbeat(0), the connection lives */
    int fd = t_connect_unix(s.sock);
    CHECK(fd >= 0);
    if (fd >= 0) {
        tf_ofl_msg m = order(7, 99, TF_OFL_BUY, 1, 1, TF_OFX_GTC);
        uint8_t f[TF_OFL_MAX_FRAME], in[TF_OFL_MAX_FRAME];
        int n = tf_ofx_frame_encode(f, sizeof f, &m);
        f[TF_OFL_FRAME_HEADER_LEN + 48] = 3;
        CHECK(t_send_all(fd, f, (size_t)n) == 0);
        long k = recv_ofl(fd, in, sizeof in);
        tf_ofl_msg r;
        CHECK(k > 0 && tf_ofx_frame_decode(in, (size_t)k, &r) == k);
        CHECK(r.kind == TF_OFX_REJECTED && r.rejected_ex.reason == TF_OFL_REASON_OTHER &&
              r.rejected_ex.account_id == 7 && r.rejected_ex.client_order_id == 99 &&
              r.rejected_ex.event_seq == 0);
        k = recv_ofl(fd, in, sizeof in);
        CHECK(k == TF_OFL_FRAME_HEADER_LEN && in[2] == TF_OFL_HEARTBEAT);
        n = tf_ofx_frame_encode(f, sizeof f, &m); /* and now a good one */
        CHECK(t_send_all(fd, f, (size_t)n) == 0);
        k = recv_ofl(fd, in, sizeof in);
        CHECK(k > 2 && in[2] == TF_OFX_ACCEPTED);
        close(fd);
    }
    tf_orders_close(a);
    tf_orders_close(b);
    /* kill -9, restart: recovery replays the gateway commands to the offline state */
    kill(s.pid, SIGKILL);
    waitpid(s.pid, NULL, 0);
    s.pid = 0;
    char off[32] = "", on[32] = "";
    CHECK(offline_hash(&s, off) == 0);
    CHECK(es_start(&s) == 0);
    CHECK(start_hash(&s, on) == 0);
    if (strcmp(off, on))
        fprintf(stderr, "offline %s, recovered %s\n", off, on);
    CHECK(off[0] && strcmp(off, on) == 0);
    if (s.pid) {
        kill(s.pid, SIGTERM);
        t_wait_exit(s.pid, T_DEADLINE_MS);
    }
    if (!getenv("TF_KEEP_LOGS"))
        t_rm_rf(s.dir);
    return tf_test_report();
}
