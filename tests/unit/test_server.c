/* The real `tollfree serve` process over real sockets (unix, tcp, shm, stdio), v1 and v2:
 * results bit-identical to the in-process kernel on the default sweep and random cases, the live
 * session reproducing the batch trades and pnl, datasets, errors, limits, and the process
 * lifecycle (socket modes, stale/live sockets, SIGTERM/SIGINT -> exit 0, no socket file left). */
#include <pthread.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/client.h"
#include "tollfree/shm.h"

static const char *kinds[] = {"unix", "tcp", "shm"};

static double *g_close;
static int64_t g_n;
static int64_t *g_grid;
static int64_t g_ng;
static double *g_ref_pnl;
static int64_t *g_ref_trades;

static tf_client *open_kind(const tserver *ts, const char *kind)
{
    char url[256];
    t_url(ts, kind, url, sizeof url);
    tf_client *c = NULL;
    int rc = t_client_open(&c, url);
    CHECK_RC(rc, 0);
    return rc ? NULL : c;
}

/* A reference sweep in-process. */
static void ref_sweep(const double *close, int64_t n, const int64_t *p, int64_t m, double *pnl,
                      int64_t *trades)
{
    CHECK_RC(tf_sweep(close, n, p, m, pnl, trades, NULL), 0);
}

static void test_default_sweep(const tserver *ts)
{
    double *pnl = malloc(8 * (size_t)g_ng);
    int64_t *trades = malloc(8 * (size_t)g_ng);
    for (int k = 0; k < 3; k++) {
        tf_client *c = open_kind(ts, kinds[k]);
        if (!c)
            continue;
        tf_server_info info;
        CHECK_RC(tf_client_hello(c, &info), 0);
        CHECK_EQ(info.version, 2);
        CHECK_EQ(info.caps & 3, 3);
        CHECK_EQ(!!(info.caps & TF_CAP_LOAD_FD), k != 1);
        CHECK_EQ(info.max_frame, TF_WIRE_DEFAULT_MAX_FRAME);
        /* v1 */
        memset(pnl, 0xAB, 8 * (size_t)g_ng);
        memset(trades, 0xAB, 8 * (size_t)g_ng);
        CHECK_RC(tf_client_v1_sweep(c, g_close, (uint32_t)g_n, g_grid, (uint32_t)g_ng, pnl, trades),
                 0);
        CHECK_BITS(pnl, g_ref_pnl, 8 * (size_t)g_ng);
        CHECK_BITS(trades, g_ref_trades, 8 * (size_t)g_ng);
        /* v2 inline (the whole default sweep on one transport; random cases cover the others) */
        if (k == 0) {
            memset(pnl, 0xAB, 8 * (size_t)g_ng);
            memset(trades, 0xAB, 8 * (size_t)g_ng);
            CHECK_RC(tf_client_sweep_inline(c, g_close, (uint32_t)g_n, g_grid, (uint32_t)g_ng, pnl,
                                            trades),
                     0);
            CHECK_BITS(pnl, g_ref_pnl, 8 * (size_t)g_ng);
            CHECK_BITS(trades, g_ref_trades, 8 * (size_t)g_ng);
        }
        /* v2 by handle (the dataset is content-addressed: the same handle on every transport) */
        uint64_t h;
        int created = -1;
        CHECK_RC(tf_client_load(c, g_close, (uint64_t)g_n, &h, &created), 0);
        CHECK_EQ(created, k == 0);
        uint64_t want = tf_wire_dataset_hash(g_close, (uint64_t)g_n);
        CHECK_EQ(h, want ? want : 1);
        memset(pnl, 0xAB, 8 * (size_t)g_ng);
        CHECK_RC(tf_client_sweep(c, h, g_grid, (uint32_t)g_ng, pnl, trades), 0);
        CHECK_BITS(pnl, g_ref_pnl, 8 * (size_t)g_ng);
        CHECK_BITS(trades, g_ref_trades, 8 * (size_t)g_ng);
        /* run_one, the chatty pattern, for a few combos */
        for (int64_t j = 0; j < g_ng; j += 19) {
            double p1;
            int64_t t1;
            CHECK_RC(tf_client_run_one(c, h, g_grid + 6 * j, &p1, &t1), 0);
            CHECK_BITS(&p1, &g_ref_pnl[j], 8);
            CHECK_EQ(t1, g_ref_trades[j]);
        }
        tf_client_close(c);
    }
    free(pnl);
    free(trades);
}

/* A v1 client written from docs/protocol.md alone: raw frames on raw sockets, no library. */
static void test_v1_raw(const tserver *ts)
{
    for (int tcp = 0; tcp < 2; tcp++) {
        int fd = tcp ? t_connect_tcp(ts->tcp_port) : t_connect_unix(ts->unix_path);
        CHECK(fd >= 0);
        if (fd < 0)
            continue;
        /* The default sweep on unix; a 20,000-bar prefix on tcp (keeps sanitizer runs short). */
        int64_t nb = tcp ? 20000 : g_n;
        double *ref_pnl = malloc(8 * (size_t)g_ng);
        int64_t *ref_tr = malloc(8 * (size_t)g_ng);
        if (tcp)
            ref_sweep(g_close, nb, g_grid, g_ng, ref_pnl, ref_tr);
        else {
            memcpy(ref_pnl, g_ref_pnl, 8 * (size_t)g_ng);
            memcpy(ref_tr, g_ref_trades, 8 * (size_t)g_ng);
        }
        size_t len;
        uint8_t *f = t_v1_frame(0, g_close, (uint32_t)nb, g_grid, (uint32_t)g_ng, &len);
        CHECK_RC(t_send_all(fd, f, len), 0);
        free(f);
        uint8_t *rb = malloc(16 * (size_t)g_ng);
        CHECK_EQ(t_recv_frame(fd, rb, 16 * (size_t)g_ng, T_DEADLINE_MS), 16 * g_ng);
        CHECK_BITS(rb, ref_pnl, 8 * (size_t)g_ng);
        CHECK_BITS(rb + 8 * g_ng, ref_tr, 8 * (size_t)g_ng);
        free(ref_pnl);
        free(ref_tr);
        /* echo: the close array verbatim, params ignored but sent */
        f = t_v1_frame(1, g_close + 7, 1000, g_grid, 2, &len);
        CHECK_RC(t_send_all(fd, f, len), 0);
        free(f);
        uint8_t *eb = malloc(8000);
        CHECK_EQ(t_recv_frame(fd, eb, 8000, T_DEADLINE_MS), 8000);
        CHECK_BITS(eb, g_close + 7, 8000);
        /* an empty sweep: an empty reply */
        f = t_v1_frame(0, NULL, 0, NULL, 0, &len);
        CHECK_RC(t_send_all(fd, f, len), 0);
        free(f);
        CHECK_EQ(t_recv_frame(fd, eb, 8000, T_DEADLINE_MS), 0);
        free(eb);
        free(rb);
        close(fd);
    }
}

static void test_random_cases(const tserver *ts)
{
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    enum { MAXB = 3000, MAXC = 24 };
    double *close = malloc(8 * MAXB), *pnl = malloc(8 * MAXC), *ref_pnl = malloc(8 * MAXC);
    int64_t *params = malloc(48 * MAXC), *trades = malloc(8 * MAXC), *ref_tr = malloc(8 * MAXC);
    for (int k = 0; k < 3; k++) {
        tf_client *c = open_kind(ts, kinds[k]);
        if (!c)
            continue;
        for (int it = 0; it < 12; it++) {
            int64_t nb = (int64_t)(t_rng(&seed) % MAXB);
            int64_t nc = (int64_t)(t_rng(&seed) % MAXC);
            if (it == 0)
                nb = 0;
            t_random_close(close, nb, &seed);
            t_random_params(params, nc, nb / 3 + 2, &seed);
            ref_sweep(close, nb, params, nc, ref_pnl, ref_tr);
            CHECK_RC(tf_client_v1_sweep(c, close, (uint32_t)nb, params, (uint32_t)nc, pnl, trades),
                     0);
            CHECK_BITS(pnl, ref_pnl, 8 * (size_t)nc);
            CHECK_BITS(trades, ref_tr, 8 * (size_t)nc);
            CHECK_RC(
                tf_client_sweep_inline(c, close, (uint32_t)nb, params, (uint32_t)nc, pnl, trades),
                0);
            CHECK_BITS(pnl, ref_pnl, 8 * (size_t)nc);
            CHECK_BITS(trades, ref_tr, 8 * (size_t)nc);
            uint64_t h;
            CHECK_RC(tf_client_load(c, close, (uint64_t)nb, &h, NULL), 0);
            CHECK_RC(tf_client_sweep(c, h, params, (uint32_t)nc, pnl, trades), 0);
            CHECK_BITS(pnl, ref_pnl, 8 * (size_t)nc);
            CHECK_BITS(trades, ref_tr, 8 * (size_t)nc);
            if (nc) {
                double p1;
                int64_t t1;
                CHECK_RC(tf_client_run_one(c, h, params, &p1, &t1), 0);
                CHECK_BITS(&p1, ref_pnl, 8);
                CHECK_EQ(t1, ref_tr[0]);
            }
            CHECK_RC(tf_client_drop(c, h), 0);
            /* v1 echo and v2 echo of random bytes */
            double *back = malloc(8 * (size_t)(nb + 1));
            CHECK_RC(tf_client_v1_echo(c, close, (uint32_t)nb, back), 0);
            CHECK_BITS(back, close, 8 * (size_t)nb);
            size_t eb = (size_t)(t_rng(&seed) % (8 * (uint64_t)nb + 1));
            memset(back, 0, 8 * (size_t)(nb + 1));
            CHECK_RC(tf_client_echo(c, close, eb, back), 0);
            CHECK_BITS(back, close, eb);
            free(back);
        }
        tf_client_close(c);
    }
    free(close);
    free(pnl);
    free(ref_pnl);
    free(params);
    free(trades);
    free(ref_tr);
}

/* The live session gives, bar by bar, the in-process streaming positions and, at the end, exactly
 * the batch sweep's trades and pnl. */
static void test_sessions(const tserver *ts)
{
    int64_t combos[3] = {0, 37, 79};
    for (int k = 0; k < 3; k++) {
        tf_client *c = open_kind(ts, kinds[k]);
        if (!c)
            continue;
        /* Over sockets each bar is a round trip: a prefix of the series keeps the test short;
         * over shared memory the whole default series. */
        int64_t nb = k == 2 ? g_n : 10000;
        const int64_t *p = g_grid + 6 * combos[k];
        double ref_pnl;
        int64_t ref_tr;
        ref_sweep(g_close, nb, p, 1, &ref_pnl, &ref_tr);
        tf_strategy *st;
        CHECK_RC(tf_strategy_open(&st, p), 0);
        uint64_t sid;
        CHECK_RC(tf_client_session_open(c, p, &sid), 0);
        int pos_bad = 0, rc_bad = 0;
        tf_session_state s = {0};
        for (int64_t i = 0; i < nb; i++) {
            int want = tf_strategy_step(st, g_close[i]);
            int rc = tf_client_session_bar(c, sid, g_close[i], &s);
            rc_bad += rc != 0;
            pos_bad += s.position != want;
            if (rc)
                break;
        }
        CHECK_EQ(rc_bad, 0);
        CHECK_EQ(pos_bad, 0);
        CHECK_EQ(s.trades, ref_tr);
        CHECK_BITS(&s.pnl, &ref_pnl, 8);
        tf_session_state q;
        CHECK_RC(tf_client_session_query(c, sid, &q), 0);
        CHECK_EQ(q.bars, nb);
        CHECK_EQ(q.trades, ref_tr);
        CHECK_BITS(&q.pnl, &ref_pnl, 8);
        CHECK_EQ(q.position, s.position);
        CHECK_RC(tf_client_session_close(c, sid, &q), 0);
        CHECK_EQ(q.bars, nb);
        CHECK_BITS(&q.pnl, &ref_pnl, 8);
        CHECK_RC(tf_client_session_bar(c, sid, 1.0, &s), TF_E_UNKNOWN_SESSION);
        CHECK(strlen(tf_client_error_message(c)) > 0);
        CHECK_RC(tf_client_session_query(c, sid, &q), TF_E_UNKNOWN_SESSION);
        tf_strategy_close(st);
        /* Several sessions at once, interleaved. */
        uint64_t a, b;
        CHECK_RC(tf_client_session_open(c, g_grid, &a), 0);
        CHECK_RC(tf_client_session_open(c, g_grid + 6 * 40, &b), 0);
        CHECK(a != b);
        for (int i = 0; i < 500; i++) {
            CHECK_RC(tf_client_session_bar(c, a, g_close[i], NULL), 0);
            CHECK_RC(tf_client_session_bar(c, b, g_close[i], NULL), 0);
        }
        double pa[2];
        int64_t ta[2];
        int64_t pp[12];
        memcpy(pp, g_grid, 48);
        memcpy(pp + 6, g_grid + 6 * 40, 48);
        ref_sweep(g_close, 500, pp, 2, pa, ta);
        CHECK_RC(tf_client_session_close(c, a, &q), 0);
        CHECK_BITS(&q.pnl, &pa[0], 8);
        CHECK_EQ(q.trades, ta[0]);
        CHECK_RC(tf_client_session_query(c, b, &q), 0);
        CHECK_BITS(&q.pnl, &pa[1], 8);
        CHECK_EQ(q.trades, ta[1]);
        /* b is closed with the connection. */
        tf_client_close(c);
    }
}

static void test_errors(const tserver *ts)
{
    for (int k = 0; k < 3; k++) {
        tf_client *c = open_kind(ts, kinds[k]);
        if (!c)
            continue;
        double pnl[2];
        int64_t trades[2];
        int64_t p[12] = {10, 5, 3, 5, 2, 3, 10, 5, 3, 5, 2, 3};
        CHECK_RC(tf_client_sweep(c, 12345, p, 1, pnl, trades), TF_E_UNKNOWN_DATASET);
        CHECK(strstr(tf_client_error_message(c), "handle") != NULL);
        CHECK_RC(tf_client_run_one(c, 12345, p, pnl, trades), TF_E_UNKNOWN_DATASET);
        CHECK_RC(tf_client_drop(c, 12345), TF_E_UNKNOWN_DATASET);
        /* Window errors, v1 and v2; the connection stays usable. */
        p[7] = 0;
        CHECK_RC(tf_client_v1_sweep(c, g_close, 100, p, 2, pnl, trades), TF_E_WINDOW_TOO_SHORT);
        CHECK_RC(tf_client_sweep_inline(c, g_close, 100, p, 2, pnl, trades), TF_E_WINDOW_TOO_SHORT);
        p[7] = (int64_t)1 << 40;
        CHECK_RC(tf_client_sweep_inline(c, g_close, 100, p, 2, pnl, trades), TF_E_WINDOW_TOO_LONG);
        uint64_t sid;
        int64_t big[6] = {10, 5, 3, ((int64_t)1 << 24) + 1, 2, 3};
        CHECK_RC(tf_client_session_open(c, big, &sid), TF_E_WINDOW_TOO_LONG);
        big[3] = -5;
        CHECK_RC(tf_client_session_open(c, big, &sid), TF_E_WINDOW_TOO_SHORT);
        uint64_t h;
        CHECK_RC(tf_client_load(c, g_close, 1000, &h, NULL), 0);
        CHECK_RC(tf_client_run_one(c, h, p + 6, pnl, trades), TF_E_WINDOW_TOO_LONG);
        CHECK_RC(tf_client_sweep(c, h, p, 1, pnl, trades), 0);
        CHECK_RC(tf_client_drop(c, h), 0);
        CHECK_RC(tf_client_drop(c, h), TF_E_UNKNOWN_DATASET);
        CHECK_RC(tf_client_echo(c, "ok", 2, pnl), 0);
        tf_client_close(c);
    }
}

static void test_datasets_and_stats(const tserver *ts)
{
    tf_client *a = open_kind(ts, "unix"), *b = open_kind(ts, "tcp");
    if (!a || !b)
        return;
    uint64_t st0[TF_STAT_COUNT], st1[TF_STAT_COUNT];
    CHECK_RC(tf_client_stats(a, st0), 0);
    uint64_t h1, h2, h3;
    int c1, c2, c3;
    CHECK_RC(tf_client_load(a, g_close + 5, 777, &h1, &c1), 0);
    CHECK_RC(tf_client_load(b, g_close + 5, 777, &h2, &c2), 0);
    CHECK_EQ(c1, 1);
    CHECK_EQ(c2, 0); /* same bytes from another connection: shared, stored once */
    CHECK_EQ(h1, h2);
    CHECK_RC(tf_client_load(a, g_close + 6, 777, &h3, &c3), 0);
    CHECK_EQ(c3, 1);
    CHECK(h3 != h1);
    CHECK_RC(tf_client_stats(b, st1), 0);
    CHECK_EQ(st1[TF_STAT_DATASETS], st0[TF_STAT_DATASETS] + 2);
    CHECK_EQ(st1[TF_STAT_DATASET_BYTES], st0[TF_STAT_DATASET_BYTES] + 2 * 8 * 777);
    CHECK(st1[TF_STAT_REQUESTS] > st0[TF_STAT_REQUESTS]);
    CHECK(st1[TF_STAT_CONNECTIONS_OPEN] >= 2);
    CHECK(st1[TF_STAT_UPTIME_NS] > 0);
    /* Dropped on one connection, gone for the other. */
    CHECK_RC(tf_client_drop(b, h1), 0);
    double pnl;
    int64_t tr;
    CHECK_RC(tf_client_run_one(a, h1, g_grid, &pnl, &tr), TF_E_UNKNOWN_DATASET);
    CHECK_RC(tf_client_load(a, g_close + 5, 777, &h2, &c2), 0);
    CHECK_EQ(c2, 1);
    CHECK_EQ(h2, h1);
    CHECK_RC(tf_client_drop(a, h2), 0);
    CHECK_RC(tf_client_drop(a, h3), 0);
    CHECK_RC(tf_client_stats(a, st1), 0);
    CHECK_EQ(st1[TF_STAT_DATASETS], st0[TF_STAT_DATASETS]);
    CHECK_EQ(st1[TF_STAT_DATASET_BYTES], st0[TF_STAT_DATASET_BYTES]);
    tf_client_close(a);
    tf_client_close(b);
}

static void test_limits(void)
{
    tserver ts;
    const char *extra[] = {"--max-datasets", "2", "--max-memory", "1M", "--max-frame", "64K", NULL};
    CHECK_RC(t_start(&ts, extra), 0);
    tf_client *c = open_kind(&ts, "unix");
    if (c) {
        tf_server_info info;
        CHECK_RC(tf_client_hello(c, &info), 0);
        CHECK_EQ(info.max_datasets, 2);
        CHECK_EQ(info.max_memory, 1 << 20);
        CHECK_EQ(info.max_frame, 64 << 10);
        uint64_t h;
        CHECK_RC(tf_client_load(c, g_close, 100, &h, NULL), 0);
        CHECK_RC(tf_client_load(c, g_close + 1, 100, &h, NULL), 0);
        CHECK_RC(tf_client_load(c, g_close + 2, 100, &h, NULL), TF_E_DATASET_LIMIT);
        CHECK_RC(tf_client_load(c, g_close, 100, &h, NULL), 0); /* a re-load is free */
        /* Session memory shares --max-memory: a window of 2^17 needs ~6 MiB. */
        uint64_t sid;
        int64_t p[6] = {1 << 17, 5, 3, 5, 2, 3};
        CHECK_RC(tf_client_session_open(c, p, &sid), TF_E_SESSION_LIMIT);
        /* Over --max-frame: an error frame, then the server closes the connection. */
        CHECK_RC(tf_client_echo(c, g_close, 70000, g_ref_pnl), TF_E_FRAME_TOO_LARGE);
        CHECK_RC(tf_client_echo(c, "x", 1, g_ref_pnl), -ENOTCONN);
        tf_client_close(c);
    }
    /* The smallest ring: its mapping (132 KiB) counts in --max-memory too. */
    char url[256];
    t_url(&ts, "shm", url, sizeof url);
    tf_client_opts o = {.timeout_ms = T_DEADLINE_MS, .ring_bytes = TF_SHM_MIN_RING};
    c = NULL;
    CHECK_RC(tf_client_open_opts(&c, url, &o), 0);
    if (c) {
        /* 1024 sessions per connection. */
        int64_t p[6] = {3, 2, 1, 2, 1, 1};
        int ok = 0;
        uint64_t sid = 0, first = 0;
        for (int i = 0; i < 1024; i++) {
            ok += tf_client_session_open(c, p, &sid) == 0;
            if (i == 0)
                first = sid;
        }
        CHECK_EQ(ok, 1024);
        CHECK_RC(tf_client_session_open(c, p, &sid), TF_E_SESSION_LIMIT);
        CHECK_RC(tf_client_session_close(c, first, NULL), 0);
        CHECK_RC(tf_client_session_open(c, p, &sid), 0);
        CHECK(sid != first); /* ids are never reused */
        CHECK_RC(tf_client_session_bar(c, first, 1.0, NULL), TF_E_UNKNOWN_SESSION);
        tf_client_close(c);
    }
    CHECK_EQ(t_stop(&ts), 0);
    t_cleanup(&ts);
}

/* stdio: the spawn-per-call transport. */
static void test_stdio(void)
{
    int in[2], out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        t_child_detach(1);
        dup2(in[0], 0);
        dup2(out[1], 1);
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 2);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl(t_bin(), t_bin(), "serve", "--stdio", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* v1 default sweep */
    size_t len;
    uint8_t *f = t_v1_frame(0, g_close, (uint32_t)g_n, g_grid, (uint32_t)g_ng, &len);
    ssize_t w = 0;
    for (size_t off = 0; off < len; off += (size_t)w) {
        w = write(in[1], f + off, len - off);
        if (w <= 0)
            break;
    }
    free(f);
    uint8_t *buf = malloc(16 * (size_t)g_ng + 64);
    uint8_t pre[4];
    CHECK_RC(t_recv_exact(out[0], pre, 4, T_DEADLINE_MS), 0);
    CHECK_EQ(tf_le32(pre), 16 * g_ng);
    CHECK_RC(t_recv_exact(out[0], buf, 16 * (size_t)g_ng, T_DEADLINE_MS), 0);
    CHECK_BITS(buf, g_ref_pnl, 8 * (size_t)g_ng);
    CHECK_BITS(buf + 8 * g_ng, g_ref_trades, 8 * (size_t)g_ng);
    /* v2 echo, then a malformed frame (error, connection kept), then a session */
    uint8_t fr[256];
    size_t n = t_v2_frame(fr, TF_OP_ECHO, 77, "stdio!", 6);
    CHECK(write(in[1], fr, n) == (ssize_t)n);
    long bl = t_recv_frame(out[0], buf, 256, T_DEADLINE_MS);
    CHECK_EQ(bl, 18);
    CHECK_EQ(tf_le64(buf + 4), 77);
    CHECK(!memcmp(buf + 12, "stdio!", 6));
    uint8_t bad[4 + 12];
    tf_put32(bad, 12);
    memcpy(bad + 4, fr + 4, 12);
    bad[4] = 0x55;
    CHECK(write(in[1], bad, sizeof bad) == (ssize_t)sizeof bad);
    bl = t_recv_frame(out[0], buf, 256, T_DEADLINE_MS);
    CHECK_EQ(t_error_code(buf, bl), TF_E_UNKNOWN_OPCODE);
    CHECK_EQ(tf_le64(buf + 4), 77);
    /* EOF: the server exits 0. */
    close(in[1]);
    CHECK(t_peer_closed(out[0], T_DEADLINE_MS));
    CHECK_EQ(t_wait_exit(pid, T_DEADLINE_MS), 0);
    close(out[0]);
    free(buf);
}

static int try_bind_stale(const char *path)
{
    /* A socket file nobody listens on: bind, never listen, close (the file stays). */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    return rc;
}

static void test_lifecycle(void)
{
    tserver ts;
    CHECK_RC(t_start(&ts, NULL), 0);
    struct stat st;
    CHECK(stat(ts.unix_path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
    CHECK(stat(ts.shm_path, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* A second server on the same live socket is refused and the first keeps serving. */
    const char *argv2[] = {t_bin(), "serve", "--unix", ts.unix_path, NULL};
    pid_t p2 = fork();
    if (p2 == 0) {
        t_child_detach(0);
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 2);
        execv(argv2[0], (char *const *)argv2);
        _exit(127);
    }
    int rc2 = t_wait_exit(p2, T_DEADLINE_MS);
    CHECK(rc2 != 0 && rc2 != -1);
    tf_client *c = open_kind(&ts, "unix");
    if (c) {
        CHECK_RC(tf_client_echo(c, "alive", 5, g_ref_pnl), 0);
        tf_client_close(c);
    }
    /* SIGTERM: exit 0, socket files gone. */
    CHECK_EQ(t_stop(&ts), 0);
    CHECK(access(ts.unix_path, F_OK) != 0);
    CHECK(access(ts.shm_path, F_OK) != 0);
    t_cleanup(&ts);

    /* A stale socket is replaced; SIGINT also exits 0. */
    char dir[64], path[128], file[128], log[160];
    CHECK(t_mkdtemp(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/stale.sock", dir);
    snprintf(file, sizeof file, "%s/file", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    CHECK(try_bind_stale(path) == 0);
    CHECK(access(path, F_OK) == 0);
    pid_t p3 = fork();
    if (p3 == 0) {
        t_child_detach(0);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execl(t_bin(), t_bin(), "serve", "--unix", path, "--quiet", (char *)NULL);
        _exit(127);
    }
    int fd = -1;
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; fd < 0 && t_now_ms() < end;) {
        fd = t_connect_unix(path);
        if (fd < 0)
            t_sleep_ms(10);
    }
    if (fd < 0)
        tf_test_deadline_note("connecting to the server", T_DEADLINE_MS);
    CHECK(fd >= 0);
    if (fd >= 0) {
        uint8_t fr[64], rb[128];
        size_t n = t_v2_frame(fr, TF_OP_STATS, 1, NULL, 0);
        CHECK_RC(t_send_all(fd, fr, n), 0);
        CHECK_EQ(t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS), 12 + 96);
        close(fd);
    }
    kill(p3, SIGINT);
    CHECK_EQ(t_wait_exit(p3, T_DEADLINE_MS), 0);
    CHECK(access(path, F_OK) != 0);
    /* A path that is not a socket is never replaced. */
    FILE *f = fopen(file, "w");
    fputs("precious", f);
    fclose(f);
    pid_t p4 = fork();
    if (p4 == 0) {
        t_child_detach(0);
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 2);
        execl(t_bin(), t_bin(), "serve", "--unix", file, (char *)NULL);
        _exit(127);
    }
    int rc4 = t_wait_exit(p4, T_DEADLINE_MS);
    CHECK(rc4 != 0 && rc4 != -1);
    char back[32] = {0};
    f = fopen(file, "r");
    CHECK(f && fgets(back, sizeof back, f));
    if (f)
        fclose(f);
    CHECK(!strcmp(back, "precious"));
    unlink(file);
    unlink(log);
    rmdir(dir);
    /* --help, bad flags. */
    pid_t p5 = fork();
    if (p5 == 0) {
        t_child_detach(0);
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 1);
        execl(t_bin(), t_bin(), "serve", "--help", (char *)NULL);
        _exit(127);
    }
    CHECK_EQ(t_wait_exit(p5, T_DEADLINE_MS), 0);
    pid_t p6 = fork();
    if (p6 == 0) {
        t_child_detach(0);
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 2);
        execl(t_bin(), t_bin(), "serve", "--max-frame", "lots", "--unix", "/tmp/x", (char *)NULL);
        _exit(127);
    }
    CHECK_EQ(t_wait_exit(p6, T_DEADLINE_MS), 2);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    g_close = t_default_close(&g_n);
    g_grid = t_default_grid(&g_ng);
    CHECK(g_close && g_n == 150000);
    if (!g_close)
        return tf_test_report();
    g_ref_pnl = malloc(8 * (size_t)g_ng + 70000);
    g_ref_trades = malloc(8 * (size_t)g_ng);
    ref_sweep(g_close, g_n, g_grid, g_ng, g_ref_pnl, g_ref_trades);

    tserver ts;
    CHECK_RC(t_start(&ts, NULL), 0);
    if (ts.pid) {
        test_default_sweep(&ts);
        test_v1_raw(&ts);
        test_random_cases(&ts);
        test_sessions(&ts);
        test_errors(&ts);
        test_datasets_and_stats(&ts);
        CHECK(t_alive(&ts));
        CHECK_EQ(t_stop(&ts), 0);
        CHECK(access(ts.unix_path, F_OK) != 0);
    }
    t_cleanup(&ts);
    test_limits();
    test_stdio();
    test_lifecycle();
    free(g_close);
    free(g_grid);
    free(g_ref_pnl);
    free(g_ref_trades);
    return tf_test_report();
}
