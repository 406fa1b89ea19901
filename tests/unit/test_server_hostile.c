/* Hostile input against the real server (the Redis tests/unit/protocol model): malformed and
 * abusive frames over raw unix and tcp sockets while a well-behaved client keeps calling and
 * checking its answers. The server must answer with the documented error frames, close exactly
 * when the framing is lost, never crash, keep serving everyone else, and exit 0 on SIGTERM. */
#include <pthread.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/client.h"

static tserver ts;
static double *g_close;
static int64_t g_n;

/* ---- the well-behaved client, running all along ---- */

static int good_stop;
static long good_calls, good_bad;

static void *good_main(void *arg)
{
    (void)arg;
    char url[256];
    t_url(&ts, "unix", url, sizeof url);
    tf_client *c;
    if (t_client_open(&c, url)) {
        __atomic_add_fetch(&good_bad, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    int64_t p[6] = {20, 10, 4, 10, 3, 5};
    double ref_pnl;
    int64_t ref_tr;
    tf_sweep(g_close, 2000, p, 1, &ref_pnl, &ref_tr, NULL);
    uint64_t i = 0;
    while (!__atomic_load_n(&good_stop, __ATOMIC_RELAXED)) {
        uint64_t v = i * 0x9E3779B97F4A7C15ull, back = 0;
        int bad = tf_client_echo(c, &v, 8, &back) != 0 || back != v;
        double pnl;
        int64_t tr;
        if (i % 8 == 0)
            bad |= tf_client_sweep_inline(c, g_close, 2000, p, 1, &pnl, &tr) != 0 ||
                   memcmp(&pnl, &ref_pnl, 8) != 0 || tr != ref_tr;
        if (bad)
            __atomic_add_fetch(&good_bad, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&good_calls, 1, __ATOMIC_RELAXED);
        i++;
        t_sleep_ms(1);
    }
    tf_client_close(c);
    return NULL;
}

/* The good client made progress since the last look (so it is being served right now). */
static void check_good_progress(void)
{
    long before = __atomic_load_n(&good_calls, __ATOMIC_RELAXED);
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    while (__atomic_load_n(&good_calls, __ATOMIC_RELAXED) < before + 3 && t_now_ms() < end)
        t_sleep_ms(2);
    CHECK(__atomic_load_n(&good_calls, __ATOMIC_RELAXED) >= before + 3);
    CHECK_EQ(__atomic_load_n(&good_bad, __ATOMIC_RELAXED), 0);
    CHECK(t_alive(&ts));
}

static int raw(int tcp)
{
    int fd = tcp ? t_connect_tcp(ts.tcp_port) : t_connect_unix(ts.unix_path);
    CHECK(fd >= 0);
    return fd;
}

/* Sends raw bytes, expects one error frame with `code`, and returns the frame's request id. */
static uint64_t expect_error(int fd, const void *bytes, size_t n, int code)
{
    uint8_t rb[2048];
    CHECK_RC(t_send_all(fd, bytes, n), 0);
    long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
    CHECK(bl >= 20);
    CHECK_EQ(t_error_code(rb, bl), code);
    if (bl >= 20)
        CHECK_EQ(tf_le32(rb + 16), (uint64_t)bl - 20); /* msg_len */
    return bl >= 12 ? tf_le64(rb + 4) : (uint64_t)-1;
}

static void test_lengths(int tcp)
{
    int fd = raw(tcp);
    uint8_t b[64] = {0};
    /* Zero length: FRAME_TOO_SHORT, connection kept. */
    expect_error(fd, b, 4, TF_E_FRAME_TOO_SHORT);
    CHECK(t_echo_ok(fd, 1));
    /* Tiny lengths with a body. */
    for (uint32_t n = 1; n <= 11; n++) {
        tf_put32(b, n);
        memset(b + 4, n < 9 ? 0 : 0x10, n);
        expect_error(fd, b, 4 + n, TF_E_FRAME_TOO_SHORT);
    }
    CHECK(t_echo_ok(fd, 2));
    /* 4 GiB - 1: FRAME_TOO_LARGE, then closed (the body is never read). */
    tf_put32(b, 0xFFFFFFFFu);
    b[4] = 0;
    expect_error(fd, b, 8, TF_E_FRAME_TOO_LARGE);
    CHECK(t_peer_closed(fd, T_DEADLINE_MS));
    close(fd);
    /* Just above the default limit. */
    fd = raw(tcp);
    tf_put32(b, (uint32_t)TF_WIRE_DEFAULT_MAX_FRAME + 1);
    expect_error(fd, b, 4, TF_E_FRAME_TOO_LARGE);
    CHECK(t_peer_closed(fd, T_DEADLINE_MS));
    close(fd);
    check_good_progress();
}

static void test_bad_requests(int tcp)
{
    int fd = raw(tcp);
    uint8_t b[4096];
    size_t n;
    /* Unknown opcodes: v1 range (no id) and v2 range (id echoed). */
    tf_put32(b, 9);
    b[4] = 7;
    memset(b + 5, 0, 8);
    CHECK_EQ(expect_error(fd, b, 13, TF_E_UNKNOWN_OPCODE), 0);
    n = t_v2_frame(b, 0x40, 4242, "abcdefgh", 8);
    CHECK_EQ(expect_error(fd, b, n, TF_E_UNKNOWN_OPCODE), 4242);
    n = t_v2_frame(b, TF_OP_ERROR, 4343, "abcdefgh", 8);
    CHECK_EQ(expect_error(fd, b, n, TF_E_PROTOCOL), 4343);
    CHECK(t_echo_ok(fd, 3));
    /* Bad header. */
    n = t_v2_frame(b, TF_OP_STATS, 55, NULL, 0);
    b[5] = 9;
    CHECK_EQ(expect_error(fd, b, n, TF_E_BAD_HEADER), 55);
    /* Body length disagreeing with n_bars / n_combos (v1 and v2), the whole body is consumed. */
    int64_t p[6] = {5, 3, 2, 3, 1, 2};
    size_t len;
    uint8_t *f = t_v1_frame(0, g_close, 100, p, 1, &len);
    tf_put32(f + 5, 101); /* claims one more bar than it carries */
    expect_error(fd, f, len, TF_E_LENGTH_MISMATCH);
    tf_put32(f + 5, 100);
    tf_put32(f + 9, 0); /* claims no params but carries them */
    expect_error(fd, f, len, TF_E_LENGTH_MISMATCH);
    tf_put32(f + 5, 0xFFFFFFFFu);
    tf_put32(f + 9, 0xFFFFFFFFu);
    expect_error(fd, f, len, TF_E_LENGTH_MISMATCH);
    free(f);
    uint8_t pl[64];
    tf_put64(pl, 1000); /* LOAD of 1000 bars carrying 3 */
    memcpy(pl + 8, g_close, 24);
    n = t_v2_frame(b, TF_OP_LOAD, 56, pl, 32);
    CHECK_EQ(expect_error(fd, b, n, TF_E_LENGTH_MISMATCH), 56);
    tf_put64(pl, (uint64_t)1 << 61);
    n = t_v2_frame(b, TF_OP_LOAD, 57, pl, 8);
    CHECK_EQ(expect_error(fd, b, n, TF_E_LENGTH_MISMATCH), 57);
    tf_put32(pl, 10);
    tf_put32(pl + 4, 10);
    n = t_v2_frame(b, TF_OP_SWEEP, 58, pl, 8);
    CHECK_EQ(expect_error(fd, b, n, TF_E_LENGTH_MISMATCH), 58);
    /* Invalid window lengths, v1 and v2. */
    int64_t wp[2][6] = {{5, 3, 2, 3, 1, 2}, {5, 0, 2, 3, 1, 2}};
    f = t_v1_frame(0, g_close, 100, &wp[0][0], 2, &len);
    expect_error(fd, f, len, TF_E_WINDOW_TOO_SHORT);
    free(f);
    wp[1][1] = (int64_t)1 << 40;
    f = t_v1_frame(0, g_close, 100, &wp[0][0], 2, &len);
    expect_error(fd, f, len, TF_E_WINDOW_TOO_LONG);
    free(f);
    wp[1][1] = INT64_MIN;
    f = t_v1_frame(0, g_close, 100, &wp[0][0], 2, &len);
    expect_error(fd, f, len, TF_E_WINDOW_TOO_SHORT);
    free(f);
    tf_put64(pl, 1);
    memcpy(pl + 8, wp[1], 48);
    n = t_v2_frame(b, TF_OP_SESSION_OPEN, 59, pl + 8, 48);
    CHECK_EQ(expect_error(fd, b, n, TF_E_WINDOW_TOO_SHORT), 59);
    /* Unknown sessions and datasets. */
    n = t_v2_frame(b, TF_OP_SESSION_BAR, 60, pl, 16);
    CHECK_EQ(expect_error(fd, b, n, TF_E_UNKNOWN_SESSION), 60);
    /* LOAD_FD without an fd (tcp cannot pass one at all). */
    tf_put64(pl, 10);
    tf_put64(pl + 8, 0);
    n = t_v2_frame(b, TF_OP_LOAD_FD, 61, pl, 16);
    CHECK_EQ(expect_error(fd, b, n, TF_E_BAD_FD), 61);
    CHECK(t_echo_ok(fd, 4));
    close(fd);
    check_good_progress();
}

static void test_slow_and_truncated(int tcp)
{
    /* A frame one byte at a time. */
    int fd = raw(tcp);
    int64_t p[6] = {30, 15, 5, 15, 5, 8};
    size_t len;
    uint8_t *f = t_v1_frame(0, g_close, 500, p, 1, &len);
    for (size_t i = 0; i < len; i++) {
        CHECK_RC(t_send_all(fd, f + i, 1), 0);
        if (i % 1024 == 0)
            t_sleep_ms(1);
    }
    free(f);
    uint8_t rb[64];
    CHECK_EQ(t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS), 16);
    double ref_pnl;
    int64_t ref_tr;
    tf_sweep(g_close, 500, p, 1, &ref_pnl, &ref_tr, NULL);
    CHECK_BITS(rb, &ref_pnl, 8);
    CHECK_EQ(tf_le64(rb + 8), ref_tr);
    close(fd);
    /* Truncated frames: disconnect mid-header and mid-body. */
    for (int cut = 1; cut < 40; cut += 7) {
        fd = raw(tcp);
        f = t_v1_frame(0, g_close, 1000, p, 1, &len);
        CHECK_RC(t_send_all(fd, f, (size_t)cut), 0);
        close(fd);
        fd = raw(tcp);
        CHECK_RC(t_send_all(fd, f, len / 2), 0);
        close(fd);
        free(f);
    }
    /* Disconnect mid-reply: a 32 MiB echo, never read. */
    size_t big = (size_t)32 << 20;
    uint8_t *bb = calloc(1, big + 16);
    tf_wire_put_header(bb, (uint32_t)(12 + big), TF_OP_ECHO, 1);
    fd = raw(tcp);
    CHECK_RC(t_send_all(fd, bb, big + 16), 0);
    t_sleep_ms(20);
    close(fd);
    free(bb);
    check_good_progress();
}

/* Pipelined requests in one write come back in order. */
static void test_pipeline(void)
{
    int fd = raw(0);
    uint8_t b[50 * 32];
    size_t n = 0;
    for (int i = 0; i < 50; i++) {
        uint64_t v = (uint64_t)i * 1000003;
        n += t_v2_frame(b + n, TF_OP_ECHO, 100 + (uint64_t)i, &v, 8);
    }
    CHECK_RC(t_send_all(fd, b, n), 0);
    int bad = 0;
    for (int i = 0; i < 50; i++) {
        uint8_t rb[64];
        long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
        bad += bl != 20 || tf_le64(rb + 4) != 100 + (uint64_t)i ||
               tf_le64(rb + 12) != (uint64_t)i * 1000003;
    }
    CHECK_EQ(bad, 0);
    close(fd);
}

/* A long sweep on one connection does not stall small calls on another: the first echo reply
 * arrives while the sweep is still outstanding. */
static void test_long_sweep_does_not_stall(void)
{
    int64_t ng;
    int64_t *grid = t_default_grid(&ng);
    int fd = raw(0);
    size_t len;
    uint8_t *f = t_v1_frame(0, g_close, (uint32_t)g_n, grid, (uint32_t)ng, &len);
    CHECK_RC(t_send_all(fd, f, len), 0);
    free(f);
    t_sleep_ms(5); /* let the server start the sweep */
    char url[256];
    t_url(&ts, "unix", url, sizeof url);
    tf_client *c;
    CHECK_RC(t_client_open(&c, url), 0);
    uint64_t v = 7, back = 0;
    CHECK_RC(tf_client_echo(c, &v, 8, &back), 0);
    struct pollfd pf = {fd, POLLIN, 0};
    CHECK_EQ(poll(&pf, 1, 0), 0); /* the sweep reply is not there yet */
    for (int i = 0; i < 20; i++)
        CHECK_RC(tf_client_echo(c, &v, 8, &back), 0);
    tf_client_close(c);
    uint8_t *rb = malloc(16 * (size_t)ng);
    CHECK_EQ(t_recv_frame(fd, rb, 16 * (size_t)ng, T_DEADLINE_MS), 16 * ng);
    free(rb);
    free(grid);
    close(fd);
}

/* 100 concurrent clients, each checking its own answers. */
static int conc_bad;
static void *conc_main(void *arg)
{
    long k = (long)arg;
    char url[256];
    t_url(&ts, k % 3 == 0 ? "tcp" : "unix", url, sizeof url);
    tf_client *c;
    if (t_client_open(&c, url)) {
        __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    int64_t p[6] = {10 + k % 20, 5, 3, 5, 2, 3};
    double ref_pnl, pnl;
    int64_t ref_tr, tr;
    tf_sweep(g_close, 3000, p, 1, &ref_pnl, &ref_tr, NULL);
    for (int i = 0; i < 10; i++) {
        uint64_t v = (uint64_t)k << 32 | (uint64_t)i, back = 0;
        if (tf_client_echo(c, &v, 8, &back) || back != v)
            __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
        if (i % 3 == 0 && (tf_client_sweep_inline(c, g_close, 3000, p, 1, &pnl, &tr) ||
                           memcmp(&pnl, &ref_pnl, 8) || tr != ref_tr))
            __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
    }
    tf_client_close(c);
    return NULL;
}

static void test_concurrent(void)
{
    pthread_t th[100];
    for (long i = 0; i < 100; i++)
        pthread_create(&th[i], NULL, conc_main, (void *)i);
    for (int i = 0; i < 100; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(conc_bad, 0);
    /* 100 connections open at once, each with a pending half-frame, then completed. */
    int fds[100];
    uint8_t fr[100][32];
    size_t n[100];
    for (int i = 0; i < 100; i++) {
        fds[i] = raw(i % 2);
        uint64_t v = (uint64_t)i;
        n[i] = t_v2_frame(fr[i], TF_OP_ECHO, (uint64_t)i, &v, 8);
        t_send_all(fds[i], fr[i], 10);
    }
    check_good_progress();
    int bad = 0;
    for (int i = 0; i < 100; i++)
        t_send_all(fds[i], fr[i] + 10, n[i] - 10);
    for (int i = 99; i >= 0; i--) {
        uint8_t rb[64];
        long bl = t_recv_frame(fds[i], rb, sizeof rb, T_DEADLINE_MS);
        bad += bl != 20 || tf_le64(rb + 12) != (uint64_t)i;
        close(fds[i]);
    }
    CHECK_EQ(bad, 0);
}

/* --stall-timeout: a connection stalled mid-frame, or not reading its reply, is closed; an idle
 * one (between frames) is not. */
static void test_stall_timeout(void)
{
    tserver t2;
    const char *extra[] = {"--stall-timeout", "1", "--quiet", NULL};
    CHECK_RC(t_start(&t2, extra), 0);
    if (!t2.pid)
        return;
    int idle = t_connect_unix(t2.unix_path);
    int mid = t_connect_unix(t2.unix_path);
    int deaf = t_connect_unix(t2.unix_path);
    uint8_t half[8];
    tf_put32(half, 100);
    half[4] = TF_OP_ECHO;
    CHECK_RC(t_send_all(mid, half, 5), 0);
    size_t big = (size_t)16 << 20;
    uint8_t *bb = calloc(1, big + 16);
    tf_wire_put_header(bb, (uint32_t)(12 + big), TF_OP_ECHO, 1);
    CHECK_RC(t_send_all(deaf, bb, big + 16), 0);
    free(bb);
    CHECK(t_peer_closed(mid, T_DEADLINE_MS));
    /* The deaf client's socket buffer holds part of the reply; the rest never leaves. */
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    int closed = 0;
    while (!closed && t_now_ms() < end) {
        struct pollfd pf = {deaf, POLLRDHUP | POLLHUP, 0};
        closed = poll(&pf, 1, 50) > 0 && (pf.revents & (POLLRDHUP | POLLHUP));
    }
    CHECK(closed);
    uint8_t fr[32], rb[32];
    size_t n = t_v2_frame(fr, TF_OP_ECHO, 5, "idle", 4);
    CHECK_RC(t_send_all(idle, fr, n), 0);
    CHECK_EQ(t_recv_frame(idle, rb, sizeof rb, T_DEADLINE_MS), 16);
    close(idle);
    close(mid);
    close(deaf);
    CHECK_EQ(t_stop(&t2), 0);
    t_cleanup(&t2);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    g_close = t_default_close(&g_n);
    CHECK(g_close != NULL);
    if (!g_close)
        return tf_test_report();
    CHECK_RC(t_start(&ts, NULL), 0);
    if (!ts.pid) {
        t_cleanup(&ts);
        return tf_test_report();
    }
    pthread_t good;
    pthread_create(&good, NULL, good_main, NULL);
    /* A client that stalls forever in the middle of a frame, kept open for the whole test. */
    int stalled = raw(0);
    uint8_t half[8];
    tf_put32(half, 1000);
    half[4] = TF_OP_ECHO;
    t_send_all(stalled, half, 5);
    int stalled_tcp = raw(1);
    t_send_all(stalled_tcp, half, 3);

    for (int tcp = 0; tcp < 2; tcp++) {
        test_lengths(tcp);
        test_bad_requests(tcp);
        test_slow_and_truncated(tcp);
    }
    test_pipeline();
    test_long_sweep_does_not_stall();
    test_concurrent();
    check_good_progress();
    test_stall_timeout();

    __atomic_store_n(&good_stop, 1, __ATOMIC_RELAXED);
    pthread_join(good, NULL);
    CHECK(good_calls > 20);
    CHECK_EQ(good_bad, 0);
    /* The stalled clients are still connected (no idle timeout below 60 s); SIGTERM anyway. */
    CHECK(t_alive(&ts));
    CHECK_EQ(t_stop(&ts), 0);
    CHECK(t_peer_closed(stalled, T_DEADLINE_MS));
    close(stalled);
    close(stalled_tcp);
    CHECK(access(ts.unix_path, F_OK) != 0);
    CHECK(access(ts.shm_path, F_OK) != 0);
    /* Every error above was logged, one line each, and the server never crashed. */
    static char log[1 << 20];
    t_read_file(ts.log, log, sizeof log);
    CHECK(strstr(log, "error -1201") != NULL);
    CHECK(strstr(log, "error -1203") != NULL);
    CHECK(strstr(log, "stopped") != NULL);
    t_cleanup(&ts);
    free(g_close);
    return tf_test_report();
}
