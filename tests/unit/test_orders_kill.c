/* A kill switch's cancels reach the connection that placed the orders (docs/venue.md "Kill
 * switch", docs/engine-service.md "Unsolicited events"), through the real service
 * (`tollfree engine serve --sessions --risk`) and the C order client over a Unix socket:
 *
 * 1. A trader rests orders of two accounts; an admin turns one account's kill switch on. The
 *    trader's next command is answered correctly (its reply is not mistaken for the cancels),
 *    and tf_orders_poll_unsolicited returns one Canceled per killed order, with the kill's
 *    command_seq; the other account's order is untouched; no fill is queued.
 * 2. Pipelined: the trader's replies are owed when the kill lands between them; every reply is
 *    still its command's, and the cancels go to the callback set with
 *    tf_orders_set_on_unsolicited.
 * 3. A connection that placed none of the orders receives nothing.
 * 4. A fake server on a Unix socket: a marker and its frame before a reply are set aside; a
 *    marker inside a reply, a frame of another command behind a marker, a count of 0 and a
 *    marker of the wrong length are protocol errors (TF_E_PROTOCOL, the connection closed).
 *
 * The admin's KillSwitch frame (a venue record the order client does not send) goes out raw on
 * a connection the client logged on. */
#include "test_server_util.h"
#include "tollfree/orders.h"
#include "venue/risk.h"
#include "venue/venue.h"

#define SECRET_A "alpha-secret-0123456789"
#define SECRET_O "ops-secret-0123456789ab"

typedef struct ksrv {
    pid_t pid;
    char dir[64], jdir[128], log[128], out[128], sock[128], sessions[128], risk[128], url[160];
    int tcp_port;
} ksrv;

static int ks_start(ksrv *s)
{
    memset(s, 0, sizeof *s);
    if (t_mkdtemp(s->dir, sizeof s->dir))
        return -1;
    snprintf(s->jdir, sizeof s->jdir, "%s/j", s->dir);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    snprintf(s->out, sizeof s->out, "%s/out", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    snprintf(s->sessions, sizeof s->sessions, "%s/sessions", s->dir);
    snprintf(s->risk, sizeof s->risk, "%s/risk", s->dir);
    snprintf(s->url, sizeof s->url, "unix:%s", s->sock);
    if (t_write_file(s->sessions, "alpha " SECRET_A " 1,2\nops " SECRET_O " 9\n", 0600) ||
        t_write_file(s->risk, "admin ops\n", 0600))
        return -1;
    const char *argv[] = {t_bin(),     "engine", "serve", "--journal",   s->jdir,
                          "--unix",    s->sock,  "--tcp", "127.0.0.1:0", "--sessions",
                          s->sessions, "--risk", s->risk, NULL};
    s->pid = t_spawn(argv, s->log, s->out);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    return t_wait_listening(&s->pid, s->log, 0, &s->tcp_port, "engine service");
}

static void ks_cleanup(ksrv *s)
{
    if (s->pid) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    if (!getenv("TF_KEEP_LOGS"))
        t_rm_rf(s->dir);
}

/* One stream frame from fd (the order protocol's framing): its length, or < 0. */
static long read_frame(int fd, uint8_t *f)
{
    if (t_recv_exact(fd, f, 2, T_DEADLINE_MS))
        return -1;
    size_t n = (size_t)f[0] | (size_t)f[1] << 8;
    if (n < 9 || n > TF_OFL_MAX_FRAME - 2 || t_recv_exact(fd, f + 2, n, T_DEADLINE_MS))
        return -1;
    return (long)(n + 2);
}

/* The admin's KillSwitch, raw on a logged-on connection: the kill's command_seq (its
 * Heartbeat's), or 0. *n_canceled: the Canceled events in the admin's reply. */
static uint64_t kill_switch(tf_orders *ops, uint64_t account, int on, int *n_canceled)
{
    uint8_t f[TF_OFL_MAX_FRAME] = {0};
    int n = tfv_kill_encode(0, account, on, f + 11);
    f[0] = (uint8_t)(9 + n);
    f[2] = TFV_KILL_SWITCH;
    int fd = tf_orders_fd(ops);
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (t_send_all(fd, f, (size_t)(11 + n)))
        return 0;
    *n_canceled = 0;
    for (;;) {
        long len = read_frame(fd, f);
        if (len < 0)
            return 0;
        if (f[2] == TF_OFL_HEARTBEAT)
            return tf_le64(f + 3);
        *n_canceled += f[2] == TF_OFL_CANCELED;
    }
}

static uint64_t rest(tf_orders *c, uint64_t account, uint64_t coid, int64_t px)
{
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    CHECK_RC(tf_orders_new_limit(c, account, coid, 1, TF_OFL_BUY, px, 1, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    return ev[0].accepted.order_id;
}

static tf_ofl_msg limit(uint64_t account, uint64_t coid, int64_t px)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit.account_id = account;
    m.new_limit.client_order_id = coid;
    m.new_limit.instrument_id = 1;
    m.new_limit.side = TF_OFL_BUY;
    m.new_limit.price = px;
    m.new_limit.quantity.lo = 1;
    return m;
}

static int has_id(const uint64_t *ids, int n, uint64_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static void poll_and_queue(ksrv *s)
{
    tf_orders *a = NULL, *ops = NULL, *other = NULL;
    CHECK_RC(tf_orders_connect_session(&a, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    CHECK_RC(tf_orders_connect_session(&ops, s->url, "ops", SECRET_O, strlen(SECRET_O), NULL), 0);
    CHECK_RC(tf_orders_connect_session(&other, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL),
             0);
    if (!a || !ops || !other)
        goto out;
    tf_orders_set_next_client_seq(other, 0); /* two connections of one session */
    tf_orders_set_next_client_seq(a, 0);
    uint64_t ids[2] = {rest(a, 1, 1, 100), rest(a, 1, 2, 101)};
    uint64_t keep = rest(a, 2, 3, 102);
    int n_canceled = 0;
    uint64_t kseq = kill_switch(ops, 1, 1, &n_canceled);
    CHECK(kseq > 0);
    CHECK_EQ(n_canceled, 2);

    /* The next command's reply is its own, read past the marker and the cancels. */
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    CHECK_RC(tf_orders_new_limit(a, 2, 4, 1, TF_OFL_BUY, 103, 1, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    CHECK(r.command_seq == kseq + 1);

    tf_ofl_msg un[8];
    int k = tf_orders_poll_unsolicited(a, un, 8, 1000);
    CHECK_RC(k, 2);
    for (int i = 0; i < k && i < 8; i++) {
        CHECK_EQ(un[i].kind, TF_OFL_CANCELED);
        CHECK(un[i].canceled.command_seq == kseq);
        CHECK(has_id(ids, 2, un[i].canceled.order_id));
        CHECK(un[i].canceled.order_id != keep);
    }
    CHECK(k < 2 || un[0].canceled.order_id != un[1].canceled.order_id);
    CHECK_RC(tf_orders_poll_fills(a, un, 8, 0), 0);
    CHECK_EQ(tf_orders_unsolicited_dropped(a), 0u);
    /* A connection of the same session that placed none of them: nothing. */
    CHECK_RC(tf_orders_poll_unsolicited(other, un, 8, 200), 0);
    CHECK_RC(tf_orders_cancel(other, keep, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_CANCELED);
    CHECK_RC(tf_orders_poll_unsolicited(other, un, 8, 0), 0);
    CHECK(kill_switch(ops, 1, 0, &n_canceled) > 0); /* off: a Heartbeat, no event */
    CHECK_EQ(n_canceled, 0);
out:
    tf_orders_close(a);
    tf_orders_close(ops);
    tf_orders_close(other);
}

typedef struct seen {
    tf_ofl_msg ev[8];
    int n;
} seen;

static void on_unsolicited(void *ctx, const tf_ofl_msg *ev)
{
    seen *s = ctx;
    if (s->n < 8)
        s->ev[s->n] = *ev;
    s->n++;
}

static void pipelined(ksrv *s)
{
    tf_orders *a = NULL, *ops = NULL;
    CHECK_RC(tf_orders_connect_session(&a, s->url, "alpha", SECRET_A, strlen(SECRET_A), NULL), 0);
    CHECK_RC(tf_orders_connect_session(&ops, s->url, "ops", SECRET_O, strlen(SECRET_O), NULL), 0);
    if (!a || !ops)
        goto out;
    seen got = {0};
    CHECK_RC(tf_orders_set_on_unsolicited(a, on_unsolicited, &got), 0);
    tf_ofl_msg first[2] = {limit(1, 11, 90), limit(1, 12, 91)};
    CHECK_RC(tf_orders_send(a, first, 2), 2);
    CHECK_RC(tf_orders_flush(a), 0);
    /* Their replies arriving means they were applied: the kill comes after them. */
    struct pollfd pf = {tf_orders_fd(a), POLLIN, 0};
    CHECK(poll(&pf, 1, T_DEADLINE_MS) == 1);
    int n_canceled = 0;
    uint64_t kseq = kill_switch(ops, 1, 1, &n_canceled);
    CHECK(kseq > 0);
    CHECK_EQ(n_canceled, 2);
    tf_ofl_msg second[2] = {limit(2, 13, 92), limit(1, 14, 93)};
    CHECK_RC(tf_orders_send(a, second, 2), 2);
    CHECK_EQ(tf_orders_unanswered(a), 4u);
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    uint64_t placed[2] = {0, 0};
    for (int i = 0; i < 4; i++) {
        CHECK_RC(tf_orders_recv(a, &r), 1);
        if (i < 3)
            CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
        if (i < 2)
            placed[i] = ev[0].accepted.order_id;
        if (i >= 2)
            CHECK(r.command_seq > kseq);
        if (i == 3) /* account 1 while its kill switch is on */
            CHECK(ev[0].kind == TF_ORDERS_VENUE_REJECTED && ev[0].rejected.reason == 21);
    }
    CHECK_EQ(got.n, 2);
    for (int i = 0; i < got.n && i < 8; i++) {
        CHECK_EQ(got.ev[i].kind, TF_OFL_CANCELED);
        CHECK(got.ev[i].canceled.command_seq == kseq);
        CHECK(has_id(placed, 2, got.ev[i].canceled.order_id));
    }
    tf_ofl_msg un[2];
    CHECK_RC(tf_orders_poll_unsolicited(a, un, 2, 0), 0); /* they went to the callback */
    CHECK(kill_switch(ops, 1, 0, &n_canceled) > 0);
out:
    tf_orders_close(a);
    tf_orders_close(ops);
}

/* ---------------------------------------------------------------- a fake server */

static size_t put_event(uint8_t *b, int kind, uint64_t command_seq)
{
    tf_ofl_msg m = {.kind = (uint8_t)kind};
    m.accepted.event_seq = 1;
    m.accepted.command_seq = command_seq;
    m.accepted.order_id = 5;
    int n = tf_ofl_frame_encode(b, TF_OFL_MAX_FRAME, &m);
    return n > 0 ? (size_t)n : 0;
}

static size_t put_heartbeat(uint8_t *b, uint64_t command_seq)
{
    tf_ofl_msg m = {.kind = TF_OFL_HEARTBEAT, .journal_seq = command_seq};
    int n = tf_ofl_frame_encode(b, TF_OFL_MAX_FRAME, &m);
    return n > 0 ? (size_t)n : 0;
}

static size_t put_marker(uint8_t *b, uint64_t command_seq, uint32_t count, int frame_len)
{
    memset(b, 0, 19);
    b[0] = (uint8_t)frame_len;
    b[2] = TF_ORDERS_UNSOLICITED;
    for (int i = 0; i < 8; i++)
        b[3 + i] = (uint8_t)(command_seq >> (8 * i));
    for (int i = 0; i < 4; i++)
        b[11 + i] = (uint8_t)(count >> (8 * i));
    b[15] = TF_ORDERS_CAUSE_KILL_SWITCH;
    return (size_t)frame_len + 2;
}

static pid_t fake_pid;

static void done(tf_orders *c)
{
    tf_orders_close(c);
    if (fake_pid > 0)
        waitpid(fake_pid, NULL, 0);
    fake_pid = 0;
}

/* Serves one connection at path: reads one command frame, writes script, waits for the close.
 * Returns what the client's one NewLimit call returned; *c_out keeps the client (closed by the
 * caller). */
static int scripted(const char *dir, const uint8_t *script, size_t n, tf_orders **c_out)
{
    char path[128], url[160];
    snprintf(path, sizeof path, "%s/fake.sock", dir);
    snprintf(url, sizeof url, "unix:%s", path);
    unlink(path);
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    memcpy(a.sun_path, path, strlen(path) + 1);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = accept(ls, NULL, NULL);
        uint8_t f[TF_OFL_MAX_FRAME];
        if (fd >= 0 && read_frame(fd, f) > 0 && t_send_all(fd, script, n) == 0)
            while (read(fd, f, sizeof f) > 0)
                ;
        _exit(0);
    }
    close(ls);
    tf_orders_opts o = {.timeout_ms = 5000};
    int rc = tf_orders_connect(c_out, url, &o);
    if (!rc) {
        tf_ofl_msg ev[4];
        tf_orders_reply r = {.ev = ev, .cap = 4};
        rc = tf_orders_new_limit(*c_out, 1, 1, 1, TF_OFL_BUY, 100, 1, &r);
        if (rc == 1)
            CHECK(ev[0].kind == TF_OFL_ACCEPTED && r.command_seq == 1);
    }
    if (rc < 0) {
        tf_orders_close(*c_out);
        *c_out = NULL;
    }
    fake_pid = pid; /* waited for by done(), once the client is closed */
    return rc;
}

static void fake_server(void)
{
    char dir[64];
    CHECK(t_mkdtemp(dir, sizeof dir) == 0);
    uint8_t b[512];
    size_t n;
    tf_orders *c = NULL;
    tf_ofl_msg un[4];

    /* a marker and its frame before the reply: set aside, the reply read */
    n = put_marker(b, 7, 1, 17);
    n += put_event(b + n, TF_OFL_CANCELED, 7);
    n += put_event(b + n, TF_OFL_ACCEPTED, 1);
    n += put_heartbeat(b + n, 1);
    CHECK_RC(scripted(dir, b, n, &c), 1);
    if (c) {
        CHECK_RC(tf_orders_poll_unsolicited(c, un, 4, 0), 1);
        CHECK(un[0].kind == TF_OFL_CANCELED && un[0].canceled.command_seq == 7);
    }
    done(c);
    /* a marker inside a reply */
    n = put_event(b, TF_OFL_ACCEPTED, 1);
    n += put_marker(b + n, 7, 1, 17);
    n += put_event(b + n, TF_OFL_CANCELED, 7);
    n += put_heartbeat(b + n, 1);
    CHECK_RC(scripted(dir, b, n, &c), TF_E_PROTOCOL);
    done(c);
    /* a frame of another command behind the marker */
    n = put_marker(b, 7, 1, 17);
    n += put_event(b + n, TF_OFL_CANCELED, 8);
    n += put_event(b + n, TF_OFL_ACCEPTED, 1);
    n += put_heartbeat(b + n, 1);
    CHECK_RC(scripted(dir, b, n, &c), TF_E_PROTOCOL);
    done(c);
    /* a count of 0, and a marker of the wrong length */
    n = put_marker(b, 7, 0, 17);
    n += put_event(b + n, TF_OFL_ACCEPTED, 1);
    n += put_heartbeat(b + n, 1);
    CHECK_RC(scripted(dir, b, n, &c), TF_E_PROTOCOL);
    done(c);
    n = put_marker(b, 7, 1, 13);
    n += put_event(b + n, TF_OFL_CANCELED, 7);
    n += put_event(b + n, TF_OFL_ACCEPTED, 1);
    n += put_heartbeat(b + n, 1);
    CHECK_RC(scripted(dir, b, n, &c), TF_E_PROTOCOL);
    done(c);
    t_rm_rf(dir);
}

static void api_errors(void)
{
    tf_ofl_msg m;
    CHECK_RC(tf_orders_poll_unsolicited(NULL, &m, 1, 0), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_set_on_unsolicited(NULL, on_unsolicited, NULL), TF_E_NULL_ARG);
    CHECK_EQ(tf_orders_unsolicited_dropped(NULL), 0u);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    api_errors();
    fake_server();
    ksrv s;
    if (ks_start(&s)) {
        char buf[4096] = "";
        t_read_file(s.log, buf, sizeof buf);
        fprintf(stderr, "the service did not start:\n%s\n", buf);
        CHECK(0);
    } else {
        poll_and_queue(&s);
        pipelined(&s);
    }
    ks_cleanup(&s);
    return tf_test_report();
}
