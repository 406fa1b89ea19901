/* Venue sessions (docs/venue.md): the extension codec, the sessions file, logon, account and
 * order ownership, and resends applied once, against the real `tollfree engine serve` (from
 * TF_BUILD_DIR) over real sockets, with the C order client.
 *
 * 1. The codec: Keyed and VenueRejected round trips, every truncation and a bad inner kind or
 *    flag refused; the OFL1 codec itself still refuses kind 0x10 and 0x90.
 * 2. --sessions FILE: a file group or others may read is refused (naming chmod 600); a bad line
 *    is named; --tcp on a non-loopback address is refused.
 * 3. Logon: a good secret logs on; a wrong secret and an unknown name are refused alike; a
 *    client that sends a command without logging on is closed (with a log line).
 * 4. Authorization: a NewLimit for an account the session does not hold is VenueRejected
 *    NotAuthorized; cancelling or replacing another session's order is answered exactly as for
 *    an order that does not exist; ownership survives a restart; `engine run` of the Keyed
 *    journal gives the service's state hash.
 * 5. Resends: a command sent and dropped before its ack, resent with the same client_seq after a
 *    reconnect (and after a restart), is answered with its original events and applied once; an
 *    unknown lower client_seq is refused.
 * 6. The venue's owner record of an order (in process): the connection that placed it, named
 *    while its Trades are handed on, forgotten when it leaves the book, none in a replay.
 * Deadlines only guard against hangs; no check depends on wall time. */
#include <stdlib.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/orderflow.h"
#include "tollfree/orders.h"
#include "venue/venue.h"

#define SECRET_A "alpha-secret-0123456789"
#define SECRET_B "bravo-secret-9876543210"

typedef struct vsrv {
    pid_t pid;
    char dir[64], jdir[128], log[128], out[128], sock[128], sessions[128], url[160];
    int tcp_port;
} vsrv;

static int vs_init(vsrv *s)
{
    memset(s, 0, sizeof *s);
    if (t_mkdtemp(s->dir, sizeof s->dir))
        return -1;
    snprintf(s->jdir, sizeof s->jdir, "%s/j", s->dir);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    snprintf(s->out, sizeof s->out, "%s/out", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    snprintf(s->sessions, sizeof s->sessions, "%s/sessions", s->dir);
    snprintf(s->url, sizeof s->url, "unix:%s", s->sock);
    return t_write_file(s->sessions,
                        "# test sessions\n"
                        "alpha " SECRET_A " 1,2\n"
                        "\n"
                        "bravo " SECRET_B " 3\n",
                        0600);
}

/* Starts the service; with sessions unless plain, and `extra` args. Returns 0 or -1 (it exited:
 * see s->log). */
static int vs_start_ex(vsrv *s, int plain, const char *extra)
{
    const char *argv[24];
    int n = 0;
    argv[n++] = t_bin();
    argv[n++] = "engine";
    argv[n++] = "serve";
    argv[n++] = "--journal";
    argv[n++] = s->jdir;
    argv[n++] = "--unix";
    argv[n++] = s->sock;
    argv[n++] = "--tcp";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--max-orders";
    argv[n++] = "20000";
    if (!plain) {
        argv[n++] = "--sessions";
        argv[n++] = s->sessions;
    }
    if (extra) {
        argv[n++] = "--snapshot-every";
        argv[n++] = extra;
    }
    argv[n] = NULL;
    unlink(s->log); /* its listening lines are the new process's */
    s->pid = t_spawn(argv, s->log, s->out);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    return t_wait_listening(&s->pid, s->log, 0, &s->tcp_port, "engine service");
}

static int vs_start(vsrv *s, int plain)
{
    return vs_start_ex(s, plain, NULL);
}

/* SIGTERM; the state hash of its summary line into hash. */
static int vs_stop(vsrv *s, char *hash, size_t cap)
{
    kill(s->pid, SIGTERM);
    int rc = t_wait_exit(s->pid, T_DEADLINE_MS);
    s->pid = 0;
    char buf[1024];
    t_read_file(s->out, buf, sizeof buf);
    const char *p = strstr(buf, "\"state_hash\":\"");
    snprintf(hash, cap, "%.18s", p ? p + 14 : "none");
    return rc;
}

static void vs_cleanup(vsrv *s)
{
    if (s->pid) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    char cmd[256];
    if (!getenv("TF_KEEP_LOGS")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
        CHECK(system(cmd) == 0);
    }
}

/* Runs a command line; its exit status, its stderr+stdout into out. */
static int sh(const char *cmd, char *out, size_t cap)
{
    char full[1024];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *f = popen(full, "r");
    if (!f)
        return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---------------------------------------------------------------- 1. codec */

static void test_codec(void)
{
    tf_ofl_msg cmds[5] = {{.kind = TF_OFL_NEW_LIMIT},
                          {.kind = TF_OFL_NEW_MARKET},
                          {.kind = TF_OFL_CANCEL_BY_ORDER},
                          {.kind = TF_OFL_CANCEL_BY_CLIENT},
                          {.kind = TF_OFL_REPLACE}};
    cmds[0].new_limit = (tf_ofl_new_limit){7, 1, 42, 3, 1000, {5, 0}, TF_OFL_SELL};
    cmds[1].new_market = (tf_ofl_new_market){7, 2, 43, 3, {6, 0}, TF_OFL_BUY};
    cmds[2].cancel_by_order = (tf_ofl_cancel_by_order){7, 99};
    cmds[3].cancel_by_client = (tf_ofl_cancel_by_client){7, 1, 42};
    cmds[4].replace = (tf_ofl_replace){7, 99, 44, 1001, {2, 0}};
    for (int i = 0; i < 5; i++) {
        tfv_msg k = {.kind = TFV_KEYED,
                     .journal_seq = 12,
                     .ofl = cmds[i],
                     .session = 0x1122,
                     .client_seq = 77,
                     .flags = TFV_KEYED_NOT_AUTHORIZED};
        uint8_t f[TF_OFL_MAX_FRAME];
        int n = tfv_encode(f, sizeof f, &k);
        CHECK_EQ(n,
                 TF_OFL_FRAME_HEADER_LEN + TFV_KEYED_HEAD_LEN + tf_ofl_payload_size(cmds[i].kind));
        tfv_msg d;
        CHECK_EQ(tfv_decode(f, (size_t)n, &d), n);
        CHECK_EQ(d.kind, TFV_KEYED);
        CHECK_EQ(d.session, 0x1122);
        CHECK_EQ(d.client_seq, 77);
        CHECK_EQ(d.flags, TFV_KEYED_NOT_AUTHORIZED);
        CHECK_EQ(d.ofl.kind, cmds[i].kind);
        CHECK(!memcmp(&d.ofl.new_limit, &cmds[i].new_limit, 8 * 2)); /* command_seq + 2nd field */
        for (int cut = 0; cut < n; cut++) {
            int rc = tfv_decode(f, (size_t)cut, &d);
            /* the decoder decides: no whole header, or a header whose frame is not all there */
            CHECK_RC(rc, cut < TF_OFL_FRAME_HEADER_LEN ? TF_E_OFL_HEADER_TOO_SHORT
                                                       : TF_E_OFL_PAYLOAD_TOO_SHORT);
        }
        /* The OFL1 codec's kind set is closed: a Keyed frame is an unknown kind to it. */
        tf_ofl_msg o;
        CHECK_EQ(tf_ofl_frame_decode(f, (size_t)n, &o), TF_E_OFL_UNKNOWN_KIND);
        f[TF_OFL_FRAME_HEADER_LEN + 17] = 0x07; /* inner kind */
        CHECK_EQ(tfv_decode(f, (size_t)n, &d), TF_E_OFL_UNKNOWN_KIND);
        f[TF_OFL_FRAME_HEADER_LEN + 17] = cmds[i].kind;
        f[TF_OFL_FRAME_HEADER_LEN + 16] = 0x80; /* a flag nobody knows */
        CHECK_EQ(tfv_decode(f, (size_t)n, &d), TF_E_BAD_INPUT);
        f[TF_OFL_FRAME_HEADER_LEN + 16] = 0;
        f[0]--; /* one payload byte short */
        CHECK_EQ(tfv_decode(f, (size_t)n, &d), TF_E_OFL_PAYLOAD_LENGTH);
    }
    tf_ofl_msg vr = {.kind = TFV_VENUE_REJECTED, .journal_seq = 3};
    vr.rejected = (tf_ofl_rejected){4, 5, 6, 42, TFV_REASON_NOT_AUTHORIZED};
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tfv_encode_event(f, sizeof f, &vr);
    CHECK_EQ(n, TF_OFL_FRAME_HEADER_LEN + TF_OFL_REJECTED_LEN);
    tfv_msg d;
    CHECK_EQ(tfv_decode(f, (size_t)n, &d), n);
    CHECK_EQ(d.ofl.kind, TFV_VENUE_REJECTED);
    CHECK_EQ(d.ofl.rejected.reason, TFV_REASON_NOT_AUTHORIZED);
    CHECK_EQ(d.ofl.rejected.client_order_id, 42);
    tf_ofl_msg o;
    CHECK_EQ(tf_ofl_frame_decode(f, (size_t)n, &o), TF_E_OFL_UNKNOWN_KIND);
    f[n - 1] = TF_OFL_INVALID_QUANTITY; /* an OFL1 reason is not a venue reason */
    CHECK_EQ(tfv_decode(f, (size_t)n, &d), TF_E_OFL_INVALID_REASON);
    vr.rejected.reason = 5;
    CHECK_EQ(tfv_encode_event(f, sizeof f, &vr), TF_E_OFL_INVALID_REASON);
    /* Ids are stable: SHA-256 of the name, not its place in the file. */
    CHECK_EQ(tfv_session_id("alpha", 5), tfv_session_id("alpha", 5));
    CHECK(tfv_session_id("alpha", 5) != tfv_session_id("bravo", 5));
}

/* ---------------------------------------------------------------- 2. file and listeners */

static void test_refusals(void)
{
    vsrv s;
    CHECK(vs_init(&s) == 0);
    char cmd[1024], out[4096];
    CHECK(chmod(s.sessions, 0640) == 0);
    snprintf(cmd, sizeof cmd, "%s engine serve --journal %s --unix %s --sessions %s", t_bin(),
             s.jdir, s.sock, s.sessions);
    CHECK_EQ(sh(cmd, out, sizeof out), 1);
    CHECK(strstr(out, s.sessions) && strstr(out, "0640") && strstr(out, "chmod 600"));
    CHECK(t_write_file(s.sessions, "alpha " SECRET_A " 1\n\nbravo short 3\n", 0600) == 0);
    CHECK_EQ(sh(cmd, out, sizeof out), 1);
    CHECK(strstr(out, "line 3") != NULL);
    CHECK(t_write_file(s.sessions, "alpha " SECRET_A " 1\nalpha " SECRET_B " 2\n", 0600) == 0);
    CHECK_EQ(sh(cmd, out, sizeof out), 1);
    CHECK(strstr(out, "line 2") && strstr(out, "twice"));
    CHECK(t_write_file(s.sessions, "alpha " SECRET_A " 1,x\n", 0600) == 0);
    CHECK_EQ(sh(cmd, out, sizeof out), 1);
    CHECK(strstr(out, "line 1") != NULL);
    /* TCP beyond loopback: refused with or without sessions (TLS is not available yet). */
    snprintf(cmd, sizeof cmd, "%s engine serve --journal %s --tcp 0.0.0.0:0", t_bin(), s.jdir);
    CHECK_EQ(sh(cmd, out, sizeof out), 2);
    CHECK(strstr(out, "not a loopback address") != NULL);
    vs_cleanup(&s);
}

/* ---------------------------------------------------------------- 3. logon */

static void test_logon(vsrv *s)
{
    tf_orders *c = NULL;
    CHECK_RC(tf_orders_connect_session(&c, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    tf_orders_close(c);
    c = NULL;
    CHECK_RC(tf_orders_connect_session(&c, s->url, "alpha", SECRET_B, strlen(SECRET_B), NULL),
             -EACCES);
    CHECK(c == NULL);
    CHECK_RC(tf_orders_connect_session(&c, s->url, "nobody", SECRET_A, strlen(SECRET_A), NULL),
             -EACCES);
    /* A plain client: its first command comes before any logon and closes the connection. */
    CHECK_RC(tf_orders_connect(&c, s->url, NULL), 0);
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    CHECK(tf_orders_new_limit(c, 1, 1, 1, TF_OFL_BUY, 100, 1, &r) < 0);
    tf_orders_close(c);
    char buf[1 << 15];
    for (int i = 0; i < 200 && !strstr(buf, "a frame before logon"); i++) {
        t_read_file(s->log, buf, sizeof buf);
        t_sleep_ms(10);
    }
    CHECK(strstr(buf, "a frame before logon") != NULL);
    CHECK(strstr(buf, "logon refused") != NULL);
    CHECK(strstr(buf, SECRET_A) == NULL && strstr(buf, SECRET_B) == NULL);
}

/* ---------------------------------------------------------------- 4. authorization */

static uint64_t limit(tf_orders *c, uint64_t acct, uint64_t coid, int side, int64_t px,
                      tf_ofl_msg *first)
{
    tf_ofl_msg ev[8];
    tf_orders_reply r = {.ev = ev, .cap = 8};
    if (tf_orders_new_limit(c, acct, coid, 1, side, px, 10, &r) < 1)
        return 0;
    *first = ev[0];
    return ev[0].kind == TF_OFL_ACCEPTED ? ev[0].accepted.order_id : 0;
}

static tf_ofl_msg one(int rc, const tf_ofl_msg *ev)
{
    tf_ofl_msg none = {.kind = 0xff};
    return rc >= 1 ? ev[0] : none;
}

static void test_authz(vsrv *s)
{
    tf_orders *a = NULL, *b = NULL;
    CHECK_RC(tf_orders_connect_session(&a, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    CHECK_RC(tf_orders_connect_session(&b, s->url, "bravo", SECRET_B, strlen(SECRET_B), NULL), 0);
    if (!a || !b)
        return;
    tf_ofl_msg e0;
    /* Account 3 is bravo's: alpha is refused, naming the reason and the client_order_id. */
    CHECK_EQ(limit(a, 3, 501, TF_OFL_BUY, 100, &e0), 0);
    CHECK_EQ(e0.kind, TF_ORDERS_VENUE_REJECTED);
    CHECK_EQ(e0.rejected.reason, TF_ORDERS_NOT_AUTHORIZED);
    CHECK_EQ(e0.rejected.client_order_id, 501);
    CHECK(e0.rejected.event_seq > 0 && e0.rejected.command_seq > 0); /* journaled and applied */
    uint64_t oid = limit(a, 1, 502, TF_OFL_BUY, 100, &e0);
    CHECK(oid > 0);
    tf_ofl_msg ev[8], ev2[8];
    tf_orders_reply r = {.ev = ev, .cap = 8}, r2 = {.ev = ev2, .cap = 8};
    /* bravo cancelling or replacing alpha's order: the answer for an order that does not exist */
    tf_ofl_msg x = one(tf_orders_cancel(b, oid, &r), ev);
    tf_ofl_msg y = one(tf_orders_cancel(b, 999999, &r2), ev2);
    CHECK_EQ(x.kind, TF_OFL_REJECTED);
    CHECK_EQ(x.rejected.reason, TF_OFL_ORDER_NOT_FOUND);
    CHECK_EQ(x.kind, y.kind);
    CHECK_EQ(x.rejected.reason, y.rejected.reason);
    CHECK_EQ(x.rejected.client_order_id, y.rejected.client_order_id);
    x = one(tf_orders_replace(b, oid, 601, 101, 5, &r), ev);
    CHECK_EQ(x.kind, TF_OFL_REJECTED);
    CHECK_EQ(x.rejected.reason, TF_OFL_ORDER_NOT_FOUND);
    CHECK_EQ(x.rejected.client_order_id, 601);
    x = one(tf_orders_cancel_client(b, 1, 502, &r), ev);
    CHECK_EQ(x.kind, TF_ORDERS_VENUE_REJECTED);
    CHECK_EQ(x.rejected.reason, TF_ORDERS_NOT_AUTHORIZED);
    /* an order of alpha's that stays across the restart */
    uint64_t kept = limit(a, 2, 503, TF_OFL_SELL, 200, &e0);
    CHECK(kept > 0);
    x = one(tf_orders_cancel(a, oid, &r), ev);
    CHECK_EQ(x.kind, TF_OFL_CANCELED);
    tf_orders_close(a);
    tf_orders_close(b);

    char h1[32], h2[32], out[4096], cmd[512];
    CHECK_EQ(vs_stop(s, h1, sizeof h1), 0);
    snprintf(cmd, sizeof cmd, "%s engine run %s/commands.ofl --quiet --max-orders 20000", t_bin(),
             s->jdir);
    CHECK_EQ(sh(cmd, out, sizeof out), 0);
    CHECK(strstr(out, h1) != NULL); /* the Keyed journal replays to the same state */
    CHECK_EQ(vs_start(s, 0), 0);
    CHECK_RC(tf_orders_connect_session(&a, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    CHECK_RC(tf_orders_connect_session(&b, s->url, "bravo", SECRET_B, strlen(SECRET_B), NULL), 0);
    if (!a || !b)
        return;
    x = one(tf_orders_cancel(b, kept, &r), ev); /* ownership came back from the journal */
    CHECK_EQ(x.kind, TF_OFL_REJECTED);
    CHECK_EQ(x.rejected.reason, TF_OFL_ORDER_NOT_FOUND);
    x = one(tf_orders_cancel(a, kept, &r), ev);
    CHECK_EQ(x.kind, TF_OFL_CANCELED);
    tf_orders_close(a);
    tf_orders_close(b);
    CHECK_EQ(vs_stop(s, h2, sizeof h2), 0);
    CHECK_EQ(vs_start(s, 0), 0);
}

/* ---------------------------------------------------------------- 5. resends */

/* Logs on over a raw socket, sends a Keyed NewLimit with client_seq, closes without reading. */
static void send_and_drop(const vsrv *s, uint64_t client_seq, uint64_t coid)
{
    int fd = t_connect_unix(s->sock);
    CHECK(fd >= 0);
    uint8_t ch[TFV_LOGON_MAX], ans[TFV_LOGON_MAX], res[TFV_LOGON_MAX];
    CHECK(t_recv_exact(fd, ch, 3 + 5 + TFV_LOGON_NONCE, T_DEADLINE_MS) == 0);
    int n = tfv_logon_answer(ans, sizeof ans, "alpha", (const uint8_t *)SECRET_A, strlen(SECRET_A),
                             ch + 8);
    CHECK(n > 0 && t_send_all(fd, ans, (size_t)n) == 0);
    CHECK(t_recv_exact(fd, res, 20, T_DEADLINE_MS) == 0 && res[3] == 0);
    tfv_msg k = {.kind = TFV_KEYED, .client_seq = client_seq};
    k.ofl.kind = TF_OFL_NEW_LIMIT;
    k.ofl.new_limit = (tf_ofl_new_limit){0, 1, coid, 1, 150, {4, 0}, TF_OFL_BUY};
    uint8_t f[TF_OFL_MAX_FRAME];
    n = tfv_encode(f, sizeof f, &k);
    CHECK(n > 0 && t_send_all(fd, f, (size_t)n) == 0);
    close(fd); /* gone before the ack */
}

static int resend(const vsrv *s, uint64_t client_seq, uint64_t coid, tf_ofl_msg *ev,
                  uint64_t *command_seq)
{
    tf_orders *c = NULL;
    if (tf_orders_connect_session(&c, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL))
        return -1;
    CHECK(tf_orders_logon_client_seq(c) >= client_seq);
    CHECK_RC(tf_orders_set_next_client_seq(c, client_seq), 0);
    tf_orders_reply r = {.ev = ev, .cap = 8};
    int n = tf_orders_new_limit(c, 1, coid, 1, TF_OFL_BUY, 150, 4, &r);
    *command_seq = r.command_seq;
    tf_orders_close(c);
    return n;
}

static void test_resend(vsrv *s)
{
    char h_before[32], h_after[32];
    /* The state before the dropped command (a restart gives its hash). */
    CHECK_EQ(vs_stop(s, h_before, sizeof h_before), 0);
    CHECK_EQ(vs_start(s, 0), 0);
    send_and_drop(s, 1000, 777);
    tf_ofl_msg ev[8], ev2[8], ev3[8];
    uint64_t cs1 = 0, cs2 = 0, cs3 = 0;
    int n1 = resend(s, 1000, 777, ev, &cs1);
    CHECK_EQ(n1, 1);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    CHECK_EQ(ev[0].accepted.client_order_id, 777);
    /* A second resend: the same events, byte for byte the same fields. */
    int n2 = resend(s, 1000, 777, ev2, &cs2);
    CHECK_EQ(n2, n1);
    CHECK_EQ(cs2, cs1);
    CHECK(n2 >= 1 && !memcmp(&ev2[0].accepted, &ev[0].accepted, sizeof ev[0].accepted));
    /* Applied once: the order rests once, and a restart keeps one command for it. */
    char h_once[32];
    CHECK_EQ(vs_stop(s, h_once, sizeof h_once), 0);
    CHECK(strcmp(h_once, h_before) != 0);
    char buf[1024];
    t_read_file(s->out, buf, sizeof buf);
    CHECK_EQ(vs_start(s, 0), 0);
    /* After the restart the answer is rebuilt from the journal and events.ofl. */
    int n3 = resend(s, 1000, 777, ev3, &cs3);
    CHECK_EQ(n3, n1);
    CHECK_EQ(cs3, cs1);
    CHECK(n3 >= 1 && !memcmp(&ev3[0].accepted, &ev[0].accepted, sizeof ev[0].accepted));
    /* A lower client_seq that was never sent: refused, not applied. */
    tf_ofl_msg ev4[8];
    uint64_t cs4 = 99;
    CHECK_EQ(resend(s, 500, 778, ev4, &cs4), 1);
    CHECK_EQ(ev4[0].kind, TF_ORDERS_VENUE_REJECTED);
    CHECK_EQ(ev4[0].rejected.reason, TF_ORDERS_STALE_CLIENT_SEQ);
    CHECK_EQ(cs4, 0);
    CHECK_EQ(vs_stop(s, h_after, sizeof h_after), 0);
    CHECK(strcmp(h_after, h_once) == 0); /* neither the resends nor the refusal changed it */
    /* Once more with the journal alone: one apply. */
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "%s engine run %s/commands.ofl --quiet --max-orders 20000", t_bin(),
             s->jdir);
    CHECK_EQ(sh(cmd, out, sizeof out), 0);
    CHECK(strstr(out, h_once) != NULL);
}

/* A start from a snapshot replays none of the commands before it: the owners of the orders
 * live at the snapshot and the answers to resends still come back (from the journals). */
static void test_snapshot(void)
{
    vsrv s;
    CHECK(vs_init(&s) == 0);
    CHECK_EQ(vs_start_ex(&s, 0, "1"), 0);
    send_and_drop(&s, 7, 901);
    tf_ofl_msg ev[8], ev2[8], e0;
    uint64_t cs = 0, cs2 = 0;
    CHECK_EQ(resend(&s, 7, 901, ev, &cs), 1);
    tf_orders *a = NULL, *b = NULL;
    CHECK_RC(tf_orders_connect_session(&a, s.url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    uint64_t oid = a ? limit(a, 2, 902, TF_OFL_SELL, 300, &e0) : 0;
    CHECK(oid > 0);
    tf_orders_close(a);
    char h[32], h2[32];
    CHECK_EQ(vs_stop(&s, h, sizeof h), 0);
    CHECK_EQ(vs_start_ex(&s, 0, "1"), 0);
    char buf[1 << 15];
    t_read_file(s.log, buf, sizeof buf);
    CHECK(strstr(buf, "after the snapshot") != NULL);
    CHECK_EQ(resend(&s, 7, 901, ev2, &cs2), 1);
    CHECK_EQ(cs2, cs);
    CHECK(!memcmp(&ev2[0].accepted, &ev[0].accepted, sizeof ev[0].accepted));
    CHECK_RC(tf_orders_connect_session(&a, s.url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    CHECK_RC(tf_orders_connect_session(&b, s.url, "bravo", SECRET_B, strlen(SECRET_B), NULL), 0);
    tf_orders_reply r = {.ev = ev, .cap = 8};
    if (a && b) {
        tf_ofl_msg x = one(tf_orders_cancel(b, oid, &r), ev);
        CHECK_EQ(x.kind, TF_OFL_REJECTED);
        x = one(tf_orders_cancel(a, oid, &r), ev);
        CHECK_EQ(x.kind, TF_OFL_CANCELED);
    }
    tf_orders_close(a);
    tf_orders_close(b);
    CHECK_EQ(vs_stop(&s, h2, sizeof h2), 0);
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "%s engine run %s/commands.ofl --quiet --max-orders 20000", t_bin(),
             s.jdir);
    CHECK_EQ(sh(cmd, out, sizeof out), 0);
    CHECK(strstr(out, h2) != NULL);
    vs_cleanup(&s);
}

/* ---------------------------------------------------------------- 6. the owner record */

/* What the sink's flush saw: for each Trade, its maker and the connection the venue named for
 * it at that moment (where the service routes it). */
typedef struct seen_trades {
    tfv_venue *v;
    uint64_t maker[64], conn[64];
    int n;
} seen_trades;

static int note_trades(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    seen_trades *x = ctx;
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == TF_OFL_TRADE && x->n < 64) {
            x->maker[x->n] = ev[i].trade.maker_order_id;
            x->conn[x->n++] = tfv_order_conn(x->v, ev[i].trade.maker_order_id);
        }
    return 0;
}

static tfv_msg plain_limit(uint64_t conn, uint64_t seq, int side, int64_t px, uint64_t qty)
{
    tfv_msg m = {.kind = TF_OFL_NEW_LIMIT, .conn = conn};
    m.ofl.kind = TF_OFL_NEW_LIMIT;
    m.ofl.new_limit = (tf_ofl_new_limit){.command_seq = seq,
                                         .account_id = 1,
                                         .client_order_id = seq,
                                         .instrument_id = 1,
                                         .price = px,
                                         .quantity = {qty, 0},
                                         .side = (uint8_t)side};
    return m;
}

/* Applies m (its events through a sink of 3, so long commands flush in the middle); returns the
 * order it placed (its Accepted), 0 when none. */
static uint64_t apply_one(tfv_venue *v, tfv_msg m, seen_trades *st)
{
    tf_ofl_msg ev[3];
    tf_engine_sink sink = {.ev = ev, .cap = 3, .flush = note_trades, .ctx = st};
    uint64_t placed = 0;
    CHECK(tfv_apply(v, &m, &sink) >= 0);
    for (size_t i = 0; i < sink.n; i++)
        if (ev[i].kind == TF_OFL_ACCEPTED)
            placed = ev[i].accepted.order_id;
    note_trades(st, ev, sink.n);
    return placed;
}

/* The venue's one owner record answers "which connection placed this order" for the live
 * orders a connection placed, at the moment a Trade of theirs is handed on (also in the middle
 * of a long command, and for a maker the Trade fills), and forgets orders that leave the book;
 * a replay (no connection) records none and gives the same state hash. */
static void test_owner_record(void)
{
    const uint64_t A = (1ull << 32) | 3, B = (2ull << 32) | 4;
    uint64_t inst = 1;
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = &inst, .n_instruments = 1, .max_orders = 64};
    tf_engine *e = NULL, *e2 = NULL;
    tfv_venue *v = NULL, *v2 = NULL;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    CHECK_RC(tf_engine_create(&ec, &e2), 0);
    CHECK_RC(tfv_open(e, &v), 0);
    CHECK_RC(tfv_open(e2, &v2), 0);
    if (!v || !v2)
        return;
    seen_trades st = {.v = v}, st2 = {.v = v2};
    tfv_msg log[32];
    int nlog = 0;
    uint64_t seq = 0, sells[8];
    for (int i = 0; i < 8; i++) { /* A rests 8 sells of 1 lot at 100..107 */
        log[nlog] = plain_limit(A, ++seq, TF_OFL_SELL, 100 + i, 1);
        sells[i] = apply_one(v, log[nlog++], &st);
        CHECK(sells[i] > 0);
        CHECK_EQ(tfv_order_conn(v, sells[i]), A);
    }
    /* B buys 6 lots at 105: six Trades over two flushes, each maker named A while it is handed
     * on, each filled maker forgotten after. B's order filled on arrival: never recorded. */
    log[nlog] = plain_limit(B, ++seq, TF_OFL_BUY, 105, 6);
    uint64_t taker = apply_one(v, log[nlog++], &st);
    CHECK_EQ(st.n, 6);
    for (int i = 0; i < st.n; i++) {
        CHECK_EQ(st.maker[i], sells[i]);
        CHECK_EQ(st.conn[i], A);
        CHECK_EQ(tfv_order_conn(v, sells[i]), 0);
    }
    CHECK_EQ(tfv_order_conn(v, taker), 0);
    CHECK_EQ(tfv_order_conn(v, sells[6]), A);
    /* B rests a buy of 3 at 99; a sell of 2 from A fills part of it: B's order stays B's. */
    log[nlog] = plain_limit(B, ++seq, TF_OFL_BUY, 99, 3);
    uint64_t bid = apply_one(v, log[nlog++], &st);
    CHECK_EQ(tfv_order_conn(v, bid), B);
    st.n = 0;
    log[nlog] = plain_limit(A, ++seq, TF_OFL_SELL, 99, 2);
    uint64_t t2 = apply_one(v, log[nlog++], &st);
    CHECK_EQ(st.n, 1);
    CHECK_EQ(st.conn[0], B);
    CHECK_EQ(tfv_order_conn(v, bid), B);
    CHECK_EQ(tfv_order_conn(v, t2), 0);
    /* A replace by B of A's order keeps it A's; a cancel forgets it. */
    tfv_msg m = {.kind = TF_OFL_REPLACE, .conn = B};
    m.ofl.kind = TF_OFL_REPLACE;
    m.ofl.replace = (tf_ofl_replace){.command_seq = ++seq,
                                     .order_id = sells[7],
                                     .client_order_id = 900,
                                     .price = 110,
                                     .quantity = {1, 0}};
    log[nlog] = m;
    apply_one(v, log[nlog++], &st);
    CHECK_EQ(tfv_order_conn(v, sells[7]), A);
    m = (tfv_msg){.kind = TF_OFL_CANCEL_BY_ORDER, .conn = B};
    m.ofl.kind = TF_OFL_CANCEL_BY_ORDER;
    m.ofl.cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = ++seq, .order_id = sells[7]};
    log[nlog] = m;
    apply_one(v, log[nlog++], &st);
    CHECK_EQ(tfv_order_conn(v, sells[7]), 0);
    /* The same records replayed (no connection): the same state, no owner recorded. */
    for (int i = 0; i < nlog; i++) {
        log[i].conn = 0;
        apply_one(v2, log[i], &st2);
    }
    CHECK_EQ(tf_engine_state_hash(e2), tf_engine_state_hash(e));
    CHECK_EQ(tfv_order_conn(v2, sells[6]), 0);
    CHECK_EQ(tfv_order_conn(v2, bid), 0);
    tfv_close(v);
    tfv_close(v2);
    tf_engine_destroy(e);
    tf_engine_destroy(e2);
}

/* The owner table (the one table.h table over a pool that doubles) past its first sizes: 5,000
 * live orders of alternating connections keep their owners through every doubling; canceling
 * every other one frees entries that the next orders reuse; each answer stays right. */
static void test_owner_growth(void)
{
    enum { N = 5000 };
    uint64_t inst = 1;
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = &inst, .n_instruments = 1, .max_orders = 2 * N};
    tf_engine *e = NULL;
    tfv_venue *v = NULL;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    CHECK_RC(tfv_open(e, &v), 0);
    if (!v)
        return;
    static uint64_t id[2 * N];
    seen_trades st = {.v = v};
    uint64_t seq = 0;
    for (int i = 0; i < N; i++) /* resting sells, no trades: 100 + i % 50 */
        id[i] = apply_one(v, plain_limit(10 + i % 7, ++seq, TF_OFL_SELL, 100 + i % 50, 1), &st);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += !id[i] || tfv_order_conn(v, id[i]) != (uint64_t)(10 + i % 7);
    CHECK_EQ(bad, 0);
    for (int i = 0; i < N; i += 2) {
        tfv_msg m = {.kind = TF_OFL_CANCEL_BY_ORDER, .conn = 99};
        m.ofl.kind = TF_OFL_CANCEL_BY_ORDER;
        m.ofl.cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = ++seq, .order_id = id[i]};
        apply_one(v, m, &st);
    }
    for (int i = N; i < 2 * N - N / 2; i++)
        id[i] = apply_one(v, plain_limit(20 + i % 5, ++seq, TF_OFL_SELL, 100 + i % 50, 1), &st);
    bad = 0;
    for (int i = 0; i < 2 * N - N / 2; i++) {
        uint64_t want = i >= N ? (uint64_t)(20 + i % 5) : i % 2 ? (uint64_t)(10 + i % 7) : 0;
        bad += tfv_order_conn(v, id[i]) != want;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(st.n, 0);
    tfv_close(v);
    tf_engine_destroy(e);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_codec();
    test_refusals();
    test_owner_record();
    test_owner_growth();
    vsrv s;
    CHECK(vs_init(&s) == 0);
    if (vs_start(&s, 0) == 0) {
        test_logon(&s);
        test_authz(&s);
        test_resend(&s);
    } else {
        CHECK(!"the service with --sessions did not start");
    }
    vs_cleanup(&s);
    test_snapshot();
    return tf_test_report();
}
