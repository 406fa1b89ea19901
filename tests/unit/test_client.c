/* The C client library's error paths: bad urls and arguments, refused connections, server error
 * frames surfacing as the server's code and message, and fake servers (in this test) that stall,
 * truncate, answer the wrong request or refuse a handshake; tf_client_opts.size. Also the example
 * program. */
#include <pthread.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/client.h"
#include "tollfree/shm.h"

/* ---- a fake server on a Unix socket: accepts one connection and runs a script ---- */

enum { FAKE_SILENT, FAKE_TRUNCATE, FAKE_WRONG_ID, FAKE_CLOSE, FAKE_SHM_REFUSE, FAKE_BAD_ERROR };

typedef struct fake {
    char path[128];
    int lfd;
    int mode;
    pthread_t th;
} fake;

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    uint8_t req[256];
    ssize_t n = recv(fd, req, sizeof req, 0);
    uint8_t rep[64];
    switch (f->mode) {
    case FAKE_SILENT: {
        /* Never answers: silent until the client hangs up (or the hang deadline), so the only
         * way the client's call returns is its own timeout, whatever the machine's load. */
        struct pollfd pf = {fd, POLLIN, 0};
        while (poll(&pf, 1, T_DEADLINE_MS) > 0 && recv(fd, req, sizeof req, 0) > 0)
            ;
        break;
    }
    case FAKE_TRUNCATE:
        /* A reply header promising 20 bytes of body, then only 6 of them. */
        tf_wire_put_header(rep, 20, req[4], n >= 16 ? tf_le64(req + 8) : 0);
        t_send_all(fd, rep, 22);
        break;
    case FAKE_WRONG_ID:
        tf_wire_put_header(rep, 12 + 4, TF_OP_ECHO, 0xDEAD);
        memcpy(rep + 16, "abcd", 4);
        t_send_all(fd, rep, 20);
        t_sleep_ms(200);
        break;
    case FAKE_CLOSE:
        break;
    case FAKE_SHM_REFUSE:
        tf_put32(rep, (uint32_t)TF_E_SHM_LIMIT);
        tf_put32(rep + 4, 1);
        t_send_all(fd, rep, 8);
        t_sleep_ms(200);
        break;
    case FAKE_BAD_ERROR:
        /* An error frame whose msg_len disagrees with its length. */
        tf_wire_put_header(rep, 20 + 3, TF_OP_ERROR, n >= 16 ? tf_le64(req + 8) : 0);
        tf_put32(rep + 16, (uint32_t)TF_E_PROTOCOL);
        tf_put32(rep + 20, 7);
        memcpy(rep + 24, "abc", 3);
        t_send_all(fd, rep, 27);
        t_sleep_ms(200);
        break;
    }
    close(fd);
    return NULL;
}

static int fake_start(fake *f, const char *dir, int mode)
{
    static int k;
    snprintf(f->path, sizeof f->path, "%s/fake%d.sock", dir, k++);
    f->mode = mode;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
    f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) || listen(f->lfd, 4))
        return -1;
    return pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(fake *f)
{
    pthread_join(f->th, NULL);
    close(f->lfd);
    unlink(f->path);
}

static void test_fakes(const char *dir)
{
    fake f;
    tf_client *c;
    char url[160];
    uint8_t out[64];

    CHECK_RC(fake_start(&f, dir, FAKE_SILENT), 0);
    snprintf(url, sizeof url, "unix:%s", f.path);
    tf_client_opts o = {.timeout_ms = 200};
    CHECK_RC(tf_client_open_opts(&c, url, &o), 0);
    CHECK_RC(tf_client_echo(c, "hi", 2, out), -ETIMEDOUT);
    CHECK_RC(tf_client_echo(c, "hi", 2, out), -ENOTCONN); /* unusable after a timeout */
    tf_client_close(c);
    fake_stop(&f);

    CHECK_RC(fake_start(&f, dir, FAKE_TRUNCATE), 0);
    snprintf(url, sizeof url, "unix:%s", f.path);
    CHECK_RC(tf_client_open(&c, url), 0);
    CHECK_RC(tf_client_echo(c, "0123456789abcdef0123", 8, out), TF_E_TRUNCATED);
    tf_client_close(c);
    fake_stop(&f);

    CHECK_RC(fake_start(&f, dir, FAKE_WRONG_ID), 0);
    snprintf(url, sizeof url, "unix:%s", f.path);
    CHECK_RC(tf_client_open(&c, url), 0);
    CHECK_RC(tf_client_echo(c, "abcd", 4, out), TF_E_PROTOCOL);
    tf_client_close(c);
    fake_stop(&f);

    CHECK_RC(fake_start(&f, dir, FAKE_CLOSE), 0);
    snprintf(url, sizeof url, "unix:%s", f.path);
    CHECK_RC(tf_client_open(&c, url), 0);
    /* The fake reads the whole request before it closes, so the send always succeeds and the
     * close is seen where the reply should start. */
    CHECK_RC(tf_client_echo(c, "abcd", 4, out), -ECONNRESET);
    tf_client_close(c);
    fake_stop(&f);

    CHECK_RC(fake_start(&f, dir, FAKE_BAD_ERROR), 0);
    snprintf(url, sizeof url, "unix:%s", f.path);
    CHECK_RC(tf_client_open(&c, url), 0);
    CHECK_RC(tf_client_echo(c, "abcd", 4, out), TF_E_PROTOCOL);
    tf_client_close(c);
    fake_stop(&f);

    CHECK_RC(fake_start(&f, dir, FAKE_SHM_REFUSE), 0);
    snprintf(url, sizeof url, "shm:%s", f.path);
    CHECK_RC(tf_client_open(&c, url), TF_E_SHM_LIMIT);
    fake_stop(&f);
}

static void test_args(const char *dir)
{
    tf_client *c = (tf_client *)1;
    CHECK_RC(tf_client_open(&c, "bogus:/x"), TF_E_INVALID_ARG);
    CHECK(c == NULL);
    CHECK_RC(tf_client_open(NULL, "unix:/x"), TF_E_NULL_ARG);
    CHECK_RC(tf_client_open(&c, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_client_open(&c, "tcp:nohostport"), TF_E_INVALID_ARG);
    CHECK_RC(tf_client_open(&c, "tcp::123"), TF_E_INVALID_ARG);
    char long_path[200];
    memset(long_path, 'a', sizeof long_path);
    memcpy(long_path, "unix:", 5);
    long_path[199] = 0;
    CHECK_RC(tf_client_open(&c, long_path), TF_E_INVALID_ARG);
    char url[160];
    snprintf(url, sizeof url, "unix:%s/nobody.sock", dir);
    CHECK_RC(tf_client_open(&c, url), -ENOENT);
    tf_client_opts o = {.ring_bytes = 12345};
    snprintf(url, sizeof url, "shm:%s/nobody.sock", dir);
    CHECK_RC(tf_client_open_opts(&c, url, &o), TF_E_INVALID_ARG);
    /* A TCP port nobody listens on (bound, not listening). */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    bind(s, (struct sockaddr *)&sa, sizeof sa);
    getsockname(s, (struct sockaddr *)&sa, &sl);
    snprintf(url, sizeof url, "tcp:127.0.0.1:%d", ntohs(sa.sin_port));
    CHECK_RC(tf_client_open(&c, url), -ECONNREFUSED);
    close(s);
    tf_client_close(NULL);
    CHECK(!strcmp(tf_client_error_message(NULL), ""));
    CHECK_RC(tf_client_set_timeout(NULL, 5), TF_E_NULL_ARG);
    CHECK_RC(tf_client_hello(NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_client_echo(NULL, "", 0, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_client_sweep(NULL, 1, NULL, 0, NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_client_sweep_stats(NULL, 1, NULL, 0, NULL, NULL, NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_client_stats(NULL, NULL), TF_E_NULL_ARG);
}

/* tf_client_opts.size, checked before anything is dialed: a socket nobody listens on gives
 * -ENOENT when the options are accepted, TF_E_INVALID_ARG when they are not. */
static void test_opts_size(const char *dir)
{
    char url[160], shm[160];
    snprintf(url, sizeof url, "unix:%s/nobody.sock", dir);
    snprintf(shm, sizeof shm, "shm:%s/nobody.sock", dir);
    tf_client *c = (tf_client *)1;
    /* 0 and sizeof: this layout. */
    tf_client_opts o = {.timeout_ms = 200};
    CHECK_RC(tf_client_open_opts(&c, url, &o), -ENOENT);
    o.size = sizeof o;
    CHECK_RC(tf_client_open_opts(&c, url, &o), -ENOENT);
    /* A shorter layout that still ends after spin (no tail padding): accepted, fields read. */
    size_t first = offsetof(tf_client_opts, spin) + sizeof(int);
    tf_client_opts s = {.size = first, .ring_bytes = (uint64_t)1 << 16, .spin = 0};
    CHECK_RC(tf_client_open_opts(&c, shm, &s), -ENOENT);
    s.ring_bytes = 12345; /* read: refused as a ring size */
    CHECK_RC(tf_client_open_opts(&c, shm, &s), TF_E_INVALID_ARG);
    /* Too small: not even the first sized layout. */
    tf_client_opts small = {.size = first - 1};
    CHECK_RC(tf_client_open_opts(&c, url, &small), TF_E_INVALID_ARG);
    small.size = sizeof(size_t);
    CHECK_RC(tf_client_open_opts(&c, url, &small), TF_E_INVALID_ARG);
    CHECK(c == NULL);
    /* A newer, longer layout: accepted when the bytes this library does not know are zero. */
    struct {
        tf_client_opts o;
        uint64_t future[2];
    } longer = {{.size = sizeof longer, .ring_bytes = (uint64_t)1 << 16}, {0, 0}};
    CHECK_RC(tf_client_open_opts(&c, shm, &longer.o), -ENOENT);
    longer.o.ring_bytes = 12345; /* the known fields of a longer struct are read */
    CHECK_RC(tf_client_open_opts(&c, shm, &longer.o), TF_E_INVALID_ARG);
    longer.o.ring_bytes = (uint64_t)1 << 16;
    longer.future[1] = (uint64_t)1 << 56; /* its last byte */
    CHECK_RC(tf_client_open_opts(&c, url, &longer.o), TF_E_INVALID_ARG);
    longer.future[1] = 0;
    longer.future[0] = 1;
    CHECK_RC(tf_client_open_opts(&c, url, &longer.o), TF_E_INVALID_ARG);
    CHECK(c == NULL);
}

static void test_real_server(void)
{
    tserver ts;
    CHECK_RC(t_start(&ts, NULL), 0);
    const char *kinds[] = {"unix", "tcp", "shm"};
    for (int k = 0; k < 3 && ts.pid; k++) {
        char url[200];
        t_url(&ts, kinds[k], url, sizeof url);
        tf_client *c;
        CHECK_RC(t_client_open(&c, url), 0);
        if (!c)
            continue;
        double pnl;
        int64_t tr;
        int64_t p[6] = {10, 5, 3, 5, 2, 3};
        CHECK_RC(tf_client_sweep(c, 42, p, 1, &pnl, &tr), TF_E_UNKNOWN_DATASET);
        CHECK(strstr(tf_client_error_message(c), "SWEEP_DS") != NULL);
        CHECK_RC(tf_client_echo(c, "abc", 3, &pnl), 0);
        CHECK(!strcmp(tf_client_error_message(c), "")); /* cleared by the next call */
        CHECK_RC(tf_client_echo(c, NULL, 0, NULL), 0);
        CHECK_RC(tf_client_sweep_inline(c, NULL, 0, NULL, 0, NULL, NULL), 0);
        CHECK_RC(tf_client_v1_sweep(c, NULL, 0, NULL, 0, NULL, NULL), 0);
        CHECK_RC(tf_client_v1_echo(c, NULL, 0, NULL), 0);
        CHECK_RC(tf_client_load(c, NULL, 0, NULL, NULL), 0); /* an empty dataset is a dataset */
        /* Statistics over the wire: the in-process rows, raw bits; with and without a fee. */
        {
            double close[3000];
            for (int i = 0; i < 3000; i++)
                close[i] = 100.0 + 10.0 * sin(i * 0.05) + 0.01 * (double)((i * 7919) % 101);
            int64_t g[4 * 6];
            for (int j = 0; j < 4; j++)
                CHECK_RC(tf_combo_from_length(6 + 9 * j, g + 6 * j), 0);
            uint64_t h = 0;
            CHECK_RC(tf_client_load(c, close, 3000, &h, NULL), 0);
            const double fees[2] = {TF_FEE_DEFAULT, 0.4};
            for (int f = 0; f < 2; f++) {
                tf_stats want[4], got[4];
                double wp[4], gp[4];
                int64_t wt[4], gt[4];
                tf_sweep_opts o = {.fee = &fees[f], .stats = want};
                CHECK_RC(tf_sweep(close, 3000, g, 4, wp, wt, &o), 0);
                memset(got, 0xA5, sizeof got);
                CHECK_RC(tf_client_sweep_stats(c, h, g, 4, f ? &fees[f] : NULL, gp, gt, got), 0);
                CHECK(memcmp(got, want, sizeof got) == 0);
                CHECK(memcmp(gp, wp, sizeof gp) == 0 && memcmp(gt, wt, sizeof gt) == 0);
            }
            double nan_fee = NAN;
            tf_stats row;
            CHECK_RC(tf_client_sweep_stats(c, h, g, 1, &nan_fee, &pnl, &tr, &row),
                     TF_E_INVALID_ARG);
            CHECK_RC(tf_client_sweep_stats(c, h, g, 0, NULL, NULL, NULL, NULL), 0);
            CHECK_RC(tf_client_drop(c, h), 0);
        }
        CHECK_RC(tf_client_set_timeout(c, -1), 0);
        uint64_t st[TF_STAT_COUNT];
        CHECK_RC(tf_client_stats(c, st), 0);
        /* This server's errors so far: per transport one UNKNOWN_DATASET and one bad fee. */
        CHECK_EQ(st[TF_STAT_ERRORS], (uint64_t)(2 * (k + 1)));
        tf_client_close(c);
    }
    /* The example program against the real server. */
    char cmd[512];
    const char *b = getenv("TF_BUILD_DIR");
    snprintf(cmd, sizeof cmd, "%s/examples/example_client_example unix:%s > /dev/null",
             b ? b : "build", ts.unix_path);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/examples/example_client_example shm:%s > /dev/null",
             b ? b : "build", ts.shm_path);
    CHECK_EQ(system(cmd), 0);
    CHECK_EQ(t_stop(&ts), 0);
    t_cleanup(&ts);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    char dir[64];
    CHECK(t_mkdtemp(dir, sizeof dir) == 0);
    test_args(dir);
    test_opts_size(dir);
    test_fakes(dir);
    test_real_server();
    rmdir(dir);
    return tf_test_report();
}
