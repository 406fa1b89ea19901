/* The connection layer's limits (src/net/) through both servers, `tollfree serve` and
 * `tollfree engine serve`, as real processes over real sockets:
 *
 *   - big_reply: a market order that sweeps far more resting orders than --max-output holds
 *     gets its whole reply, and the maker every unsolicited Trade, with neither connection
 *     dropped (the reply streams from events.ofl as the peers read);
 *   - idle_memory: connections that had large requests and went idle give their buffers back,
 *     so the --max-memory they held is free again for others;
 *   - unix_lockout: one process holding every ordinary slot of a Unix socket does not lock other
 *     processes of the same user out (peers are processes, the reserve lets them in), and the
 *     engine closes idle connections while it is full (--idle-timeout-full);
 *   - log_flood: thousands of bad connections a second cost at most 20 log lines a second, and
 *     every line left out is counted;
 *   - options: both servers read the limit options with one parser (K/M/G suffixes, one
 *     message naming the option and the value).
 * Waits have one generous deadline (a guard against hangs, never a speed check). */
#include <pthread.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/orderflow.h"

/* ---------------------------------------------------------------- the engine service */

typedef struct esrv {
    pid_t pid;
    char dir[64], jdir[128], log[128], sock[128];
    int tcp_port;
} esrv;

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR)
            rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int es_start(esrv *s, const char *const *extra)
{
    memset(s, 0, sizeof *s);
    if (t_mkdtemp(s->dir, sizeof s->dir))
        return -1;
    snprintf(s->jdir, sizeof s->jdir, "%s/j", s->dir);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    const char *argv[40] = {t_bin(),  "engine", "serve", "--journal",  s->jdir,
                            "--unix", s->sock,  "--tcp", "127.0.0.1:0"};
    int n = 9;
    for (int i = 0; extra && extra[i] && n < 38; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    s->pid = t_spawn(argv, s->log, NULL);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    return t_wait_listening(&s->pid, s->log, 0, &s->tcp_port, "engine service");
}

static int es_stop(esrv *s)
{
    if (!s->pid)
        return -1;
    kill(s->pid, SIGTERM);
    int rc = t_wait_exit(s->pid, T_DEADLINE_MS);
    s->pid = 0;
    return rc;
}

static void es_cleanup(esrv *s)
{
    if (s->pid) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    if (getenv("TF_KEEP_LOGS")) {
        fprintf(stderr, "engine service files kept: %s\n", s->dir);
        return;
    }
    if (s->dir[0])
        rm_tree(s->dir);
}

/* One stream frame: its kind, or a negative errno (-EPIPE: the service closed). */
static int read_kind(int fd, uint64_t *journal_seq)
{
    uint8_t b[TF_OFL_MAX_FRAME];
    int rc = t_recv_exact(fd, b, 2, T_DEADLINE_MS);
    if (rc)
        return rc;
    size_t flen = (size_t)b[0] | (size_t)b[1] << 8;
    if (flen < 9 || 2 + flen > sizeof b)
        return -EPROTO;
    if ((rc = t_recv_exact(fd, b + 2, flen, T_DEADLINE_MS)))
        return rc;
    if (journal_seq)
        *journal_seq = tf_le64(b + 3);
    return b[2];
}

static size_t enc(uint8_t *buf, const tf_ofl_msg *m)
{
    int n = tf_ofl_frame_encode(buf, TF_OFL_MAX_FRAME, m);
    return n > 0 ? (size_t)n : 0;
}

static tf_ofl_msg sell_limit(uint64_t coid, int64_t px)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.account_id = 1,
                                     .client_order_id = coid,
                                     .instrument_id = 1,
                                     .price = px,
                                     .quantity = {1, 0},
                                     .side = TF_OFL_SELL};
    return m;
}

typedef struct sender {
    int fd, n;
} sender;

/* Sends n resting sells, pipelined (the replies are read by the caller meanwhile). */
static void *send_sells(void *arg)
{
    sender *sd = arg;
    uint8_t *buf = malloc((size_t)sd->n * TF_OFL_MAX_FRAME);
    size_t len = 0;
    for (int i = 0; i < sd->n; i++) {
        tf_ofl_msg m = sell_limit((uint64_t)i + 1, 100 + i % 7);
        len += enc(buf + len, &m);
    }
    t_send_all(sd->fd, buf, len);
    free(buf);
    return NULL;
}

/* Reads frames until n Heartbeats; returns the Heartbeats seen. */
static int read_heartbeats(int fd, int n)
{
    int hb = 0;
    while (hb < n) {
        int k = read_kind(fd, NULL);
        if (k < 0)
            break;
        hb += k == TF_OFL_HEARTBEAT;
    }
    return hb;
}

/* D3: a market order sweeping N resting orders. Its reply (N Trades and more, ~74 bytes each)
 * is far above --max-output (64 KiB), and so are the N unsolicited Trades the maker gets; the
 * maker reads them only after the taker has read its whole reply. */
static void test_big_reply(void)
{
    enum { N = 200000 };
    esrv s;
    const char *extra[] = {"--max-output", "65536", "--max-orders", "250000", "--quiet", NULL};
    CHECK_RC(es_start(&s, extra), 0);
    int maker = s.pid ? t_connect_unix(s.sock) : -1;
    int taker = s.pid ? t_connect_unix(s.sock) : -1;
    CHECK(maker >= 0 && taker >= 0);
    if (maker >= 0 && taker >= 0) {
        pthread_t th;
        sender sd = {maker, N};
        pthread_create(&th, NULL, send_sells, &sd);
        CHECK_EQ(read_heartbeats(maker, N), N);
        pthread_join(th, NULL);

        tf_ofl_msg mk = {.kind = TF_OFL_NEW_MARKET};
        mk.new_market = (tf_ofl_new_market){.account_id = 2,
                                            .client_order_id = 1,
                                            .instrument_id = 1,
                                            .quantity = {N, 0},
                                            .side = TF_OFL_BUY};
        uint8_t b[TF_OFL_MAX_FRAME];
        CHECK_RC(t_send_all(taker, b, enc(b, &mk)), 0);
        int trades = 0, k;
        uint64_t seq = 0;
        while ((k = read_kind(taker, &seq)) >= 0 && k != TF_OFL_HEARTBEAT)
            trades += k == TF_OFL_TRADE;
        CHECK_EQ(k, TF_OFL_HEARTBEAT); /* the whole reply, then its Heartbeat */
        CHECK_EQ(trades, N);
        CHECK_EQ(seq, (uint64_t)N + 1);
        int unsol = 0;
        while (unsol < N && (k = read_kind(maker, NULL)) == TF_OFL_TRADE)
            unsol++;
        CHECK_EQ(unsol, N);
        /* Both connections still serve. */
        tf_ofl_msg m = sell_limit(N + 1, 500);
        CHECK_RC(t_send_all(taker, b, enc(b, &m)), 0);
        CHECK_EQ(read_heartbeats(taker, 1), 1);
        m = sell_limit(N + 2, 500);
        CHECK_RC(t_send_all(maker, b, enc(b, &m)), 0);
        CHECK_EQ(read_heartbeats(maker, 1), 1);
    }
    if (maker >= 0)
        close(maker);
    if (taker >= 0)
        close(taker);
    char log[1 << 14];
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "output limit") == NULL);
    CHECK_EQ(es_stop(&s), 0);
    es_cleanup(&s);
}

/* ---------------------------------------------------------------- idle memory (D1) */

/* D1: connections that each sent a large sweep (its 640 KB body stays in the connection's
 * request buffer, counted in --max-memory) and then went idle: they keep up to half of
 * --max-memory 48M. While they do, a LOAD of 16 MB (its body and its dataset: 32 MB) does not
 * fit; once they give their buffers back (at rest for a tick) it does. */
static void test_idle_memory(void)
{
    enum { CONNS = 40, BARS = 80000 };
    tserver ts;
    const char *extra[] = {"--quiet", "--max-memory", "48M", "--dataset-cache", "0", NULL};
    CHECK_RC(t_start(&ts, extra), 0);
    enum { BIG = 2000000 };
    double *close_px = malloc(sizeof(double) * BIG);
    uint64_t seed = 7;
    t_random_close(close_px, BIG, &seed);
    int64_t combo[6];
    t_combo(20, combo);
    size_t flen;
    uint8_t *fr = t_v1_frame(TF_OP_V1_SWEEP, close_px, BARS, combo, 1, &flen);
    int fds[CONNS], ok = 0;
    for (int i = 0; i < CONNS; i++) {
        fds[i] = ts.pid ? t_connect_unix(ts.unix_path) : -1;
        if (fds[i] < 0 || t_send_all(fds[i], fr, flen))
            continue;
        uint8_t rb[256];
        long bl = t_recv_frame(fds[i], rb, sizeof rb, T_DEADLINE_MS);
        ok += bl > 0;
    }
    CHECK_EQ(ok, CONNS);
    /* The idle connections stay open; a LOAD of 2,000,000 bars (16 MB) fits once they rest. */
    char url[256];
    t_url(&ts, "unix", url, sizeof url);
    tf_client *cl = NULL;
    CHECK_RC(t_client_open(&cl, url), 0);
    int rc = -1;
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; cl && t_now_ms() < end;) {
        uint64_t h;
        rc = tf_client_load(cl, close_px, BIG, &h, NULL);
        if (rc != TF_E_LIMIT && rc != TF_E_DATASET_LIMIT)
            break;
        t_sleep_ms(100);
    }
    CHECK_RC(rc, 0);
    tf_client_close(cl);
    for (int i = 0; i < CONNS; i++)
        if (fds[i] >= 0) {
            CHECK(t_echo_ok(fds[i], (uint64_t)i)); /* an idle connection still serves */
            close(fds[i]);
        }
    free(fr);
    free(close_px);
    CHECK_EQ(t_stop(&ts), 0);
    t_cleanup(&ts);
}

/* ---------------------------------------------------------------- Unix lockout (D4) */

/* One round trip on a connection: an OFL1 command to the engine, an ECHO to the sweep server.
 * 1 when it was answered (a connection refused at accept reads the end of the stream). */
static int served(int fd, int engine, uint64_t id)
{
    if (!engine)
        return t_echo_ok(fd, id);
    uint8_t b[TF_OFL_MAX_FRAME];
    tf_ofl_msg m = sell_limit(100000 + id, 900);
    return !t_send_all(fd, b, enc(b, &m)) && read_heartbeats(fd, 1) == 1;
}

/* A child process (one peer) that opens as many Unix connections as it is given, each one
 * served (a round trip) before the next is opened, so none of them sits idle while the server
 * is not yet full; it reports on a pipe how many were served, holds those idle until it is
 * killed, and reports ("C<n>") once the server has closed some of them (the engine closes idle
 * connections while it is full; which of them go in one tick depends on their ages, so the count
 * is not fixed: once some are closed the server is no longer full). */
static pid_t hog(const char *path, int want, int engine, int report_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    t_child_detach(0);
    int *fds = calloc((size_t)want, sizeof(int)), live = 0;
    for (int i = 0; i < want && fds; i++) {
        int fd = t_connect_unix(path);
        if (fd < 0)
            break;
        if (served(fd, engine, (uint64_t)i))
            fds[live++] = fd;
        else
            close(fd);
    }
    char msg[32];
    int len = snprintf(msg, sizeof msg, "%d\n", live);
    ssize_t w = write(report_fd, msg, (size_t)len);
    for (int closed = 0; !closed && live;) {
        t_sleep_ms(20);
        for (int i = 0; i < live; i++) {
            struct pollfd pf = {fds[i], POLLIN, 0};
            closed += poll(&pf, 1, 0) == 1;
        }
        if (closed) {
            len = snprintf(msg, sizeof msg, "C%d\n", closed);
            w = write(report_fd, msg, (size_t)len);
        }
    }
    (void)w;
    pause();
    _exit(0);
}

static int read_line_fd(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    while (n + 1 < cap && t_now_ms() < end) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        if (read(fd, buf + n, 1) != 1)
            break;
        if (buf[n++] == '\n')
            break;
    }
    buf[n] = 0;
    return (int)n;
}

/* An OFL1 round trip on a fresh Unix connection to the engine: 1 when it was answered. */
static int engine_round_trip(const char *sock, uint64_t coid)
{
    int fd = t_connect_unix(sock);
    if (fd < 0)
        return 0;
    uint8_t b[TF_OFL_MAX_FRAME];
    tf_ofl_msg m = sell_limit(coid, 900);
    int ok = !t_send_all(fd, b, enc(b, &m)) && read_heartbeats(fd, 1) == 1;
    close(fd);
    return ok;
}

static void test_unix_lockout(void)
{
    /* The engine: 64 slots, 4 reserved; one process takes the 60 ordinary ones. */
    esrv s;
    const char *extra[] = {"--max-conns", "64", "--conn-reserve", "4", "--idle-timeout-full",
                           "2",           NULL};
    CHECK_RC(es_start(&s, extra), 0);
    int pp[2];
    CHECK_RC(pipe(pp), 0);
    pid_t h = s.pid ? hog(s.sock, 64, 1, pp[1]) : -1;
    char line[32];
    CHECK(read_line_fd(pp[0], line, sizeof line) > 0);
    CHECK_EQ(atoi(line), 60);
    /* Another process of the same user still gets in (a reserved slot). */
    CHECK(engine_round_trip(s.sock, 1));
    /* And the full service closes the idle ones after --idle-timeout-full. */
    CHECK(read_line_fd(pp[0], line, sizeof line) > 0 && line[0] == 'C');
    if (h > 0) {
        kill(h, SIGKILL);
        waitpid(h, NULL, 0);
    }
    CHECK_EQ(es_stop(&s), 0);
    es_cleanup(&s);

    /* The sweep server: the same lockout (its idle timeout is 300 s). */
    tserver ts;
    const char *ex2[] = {"--quiet", "--max-conns", "64", "--conn-reserve", "4", NULL};
    CHECK_RC(t_start(&ts, ex2), 0);
    h = ts.pid ? hog(ts.unix_path, 64, 0, pp[1]) : -1;
    CHECK(read_line_fd(pp[0], line, sizeof line) > 0);
    CHECK_EQ(atoi(line), 60);
    int fd = t_connect_unix(ts.unix_path);
    CHECK(fd >= 0 && t_echo_ok(fd, 42));
    if (fd >= 0)
        close(fd);
    if (h > 0) {
        kill(h, SIGKILL);
        waitpid(h, NULL, 0);
    }
    close(pp[0]);
    close(pp[1]);
    CHECK_EQ(t_stop(&ts), 0);
    t_cleanup(&ts);
}

/* ---------------------------------------------------------------- log flood (D6) */

/* Sums the numbers N of "(N lines left out)" and "N log lines about connections left out". */
static uint64_t left_out(const char *log)
{
    uint64_t sum = 0;
    const char *p = log;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char ln[1024];
        if (n >= sizeof ln)
            n = sizeof ln - 1;
        memcpy(ln, p, n);
        ln[n] = 0;
        unsigned long long v;
        const char *a = strstr(ln, " lines left out)");
        if (a) {
            const char *o = a;
            while (o > ln && o[-1] != '(')
                o--;
            if (o > ln && sscanf(o, "%llu", &v) == 1)
                sum += v;
        }
        const char *b = strstr(ln, "log lines about connections left out");
        if (b) {
            const char *c = strstr(ln, ": ");
            if (c && sscanf(c + 2, "%llu", &v) == 1)
                sum += v;
        }
        p += e ? n + 1 : n;
        if (!e)
            break;
    }
    return sum;
}

static int count_lines_with(const char *log, const char *what)
{
    int n = 0;
    for (const char *p = log; (p = strstr(p, what)); p++)
        n++;
    return n;
}

/* D6: N connections each send a frame above --max-frame (answered with an error frame, then
 * closed): 2 lines each would be 2N; at most 20 a second go out, the rest are counted. */
static void test_log_flood(void)
{
    enum { N = 3000 };
    tserver ts;
    const char *extra[] = {"--max-frame", "1K", NULL};
    CHECK_RC(t_start(&ts, extra), 0);
    int done = 0;
    for (int i = 0; ts.pid && i < N; i++) {
        int fd = t_connect_unix(ts.unix_path);
        if (fd < 0)
            continue;
        uint8_t fr[16];
        tf_put32(fr, 1 << 20);
        memset(fr + 4, 0, 12);
        if (!t_send_all(fd, fr, sizeof fr))
            done += t_peer_closed(fd, T_DEADLINE_MS);
        close(fd);
    }
    CHECK_EQ(done, N);
    CHECK_EQ(t_stop(&ts), 0);
    static char log[1 << 22];
    t_read_file(ts.log, log, sizeof log);
    int lines = count_lines_with(log, "conn ");
    uint64_t lost = left_out(log);
    CHECK(lines < N / 2);
    CHECK_EQ((uint64_t)lines + lost, (uint64_t)2 * N); /* every line went out or was counted */
    t_cleanup(&ts);
}

/* ---------------------------------------------------------------- options (D7) */

static int run_exit(const char *const *argv, char *err, size_t cap)
{
    char path[] = "/tmp/tfnl.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    pid_t pid = t_spawn(argv, path, NULL);
    int rc = t_wait_exit(pid, T_DEADLINE_MS);
    t_read_file(path, err, cap);
    unlink(path);
    return rc;
}

static void test_options(void)
{
    /* engine serve takes 1M and 4G for --max-memory, 64K for --max-output. */
    esrv s;
    const char *extra[] = {"--max-memory", "4G", "--max-output", "64K", "--quiet", NULL};
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    es_cleanup(&s);
    const char *ex1[] = {"--max-memory", "1M", "--quiet", NULL};
    CHECK_RC(es_start(&s, ex1), 0);
    CHECK_EQ(es_stop(&s), 0);
    es_cleanup(&s);
    /* A bad value: exit 2, and the same message from both servers, naming option and value. */
    char err[2048];
    const char *a1[] = {t_bin(),
                        "engine",
                        "serve",
                        "--journal",
                        "/tmp/tfnl-never",
                        "--unix",
                        "/tmp/tfnl-never.sock",
                        "--max-memory",
                        "1X",
                        NULL};
    CHECK_EQ(run_exit(a1, err, sizeof err), 2);
    CHECK(strstr(err, "--max-memory 1X: not a size") != NULL);
    const char *a2[] = {t_bin(),        "serve", "--unix", "/tmp/tfnl-never.sock",
                        "--max-memory", "1X",    NULL};
    CHECK_EQ(run_exit(a2, err, sizeof err), 2);
    CHECK(strstr(err, "--max-memory 1X: not a size") != NULL);
    const char *a3[] = {t_bin(),
                        "engine",
                        "serve",
                        "--journal",
                        "/tmp/tfnl-never",
                        "--unix",
                        "/tmp/tfnl-never.sock",
                        "--max-memory",
                        "512K",
                        NULL};
    CHECK_EQ(run_exit(a3, err, sizeof err), 2);
    CHECK(strstr(err, "--max-memory 512K: give at least 1M") != NULL);
    /* Issue 25: one set of limits for both servers. `serve` takes the engine service's
     * --idle-timeout-full and --max-output (the bad value after them is what is refused), both
     * refuse a bad --max-output alike, and the engine service's own counts (--max-orders) are
     * read by the same parser. */
    const char *a4[] = {
        t_bin(),        "serve", "--unix", "/tmp/tfnl-never.sock", "--idle-timeout-full", "5",
        "--max-output", "1K",    NULL};
    CHECK_EQ(run_exit(a4, err, sizeof err), 2);
    CHECK(strstr(err, "--max-output 1K: give at least 4K (4096 bytes)") != NULL);
    const char *a5[] = {t_bin(),
                        "engine",
                        "serve",
                        "--journal",
                        "/tmp/tfnl-never",
                        "--unix",
                        "/tmp/tfnl-never.sock",
                        "--max-output",
                        "1K",
                        NULL};
    CHECK_EQ(run_exit(a5, err, sizeof err), 2);
    CHECK(strstr(err, "--max-output 1K: give at least 4K (4096 bytes)") != NULL);
    const char *a6[] = {t_bin(),
                        "engine",
                        "serve",
                        "--journal",
                        "/tmp/tfnl-never",
                        "--unix",
                        "/tmp/tfnl-never.sock",
                        "--max-orders",
                        "1K",
                        NULL};
    CHECK_EQ(run_exit(a6, err, sizeof err), 2);
    CHECK(strstr(err, "--max-orders 1K: not a whole number") != NULL);
    rmdir("/tmp/tfnl-never");
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "options"))
        test_options();
    if (!only || !strcmp(only, "big_reply"))
        test_big_reply();
    if (!only || !strcmp(only, "idle_memory"))
        test_idle_memory();
    if (!only || !strcmp(only, "unix_lockout"))
        test_unix_lockout();
    if (!only || !strcmp(only, "log_flood"))
        test_log_flood();
    return tf_test_report();
}
