/* TLS on the engine service (src/net/tls.c, --tls-cert/--tls-key) and in the C order client
 * (tls: URLs, src/client/dial.c), with the real `tollfree engine serve` over real sockets and a
 * certificate made here with the openssl command (a test CA, a server certificate for localhost
 * and 127.0.0.1, and a second CA that signed nothing):
 *   the tls: URL vectors (tests/vectors/urls_tls.txt);
 *   logon and orders over TLS (single commands, a pipeline, a fill to another session), by IP
 *   address and by name (tls://localhost:PORT);
 *   a client with the wrong CA is refused (-EPROTO), and the service goes on; so is a client
 *   whose host the certificate does not name (127.0.0.2);
 *   a plain TCP client on the TLS port is cut off (handshake failed) while a TLS client is served;
 *   a client that opens a handshake and stalls is cut off by the stall timer, and a TLS client is
 *   served meanwhile;
 *   the start-up refusals: TCP on a non-loopback address without --sessions and TLS (each
 *   missing piece named), --tls-key without --tls-cert, a key file of mode 644;
 *   SIGTERM: exit 0 (the sanitizer build also checks every SSL object was freed);
 *   in process, the connection layer with TLS and worker threads: every frame runs on a worker,
 *   whose reply goes out through the connection's SSL object from there (up to 256 KiB, more
 *   than the small socket buffers take: the loop thread finishes it), echoed bit for bit.
 * Nothing here measures time: the waits have generous deadlines and look for a state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <pthread.h>

#include "client/client_internal.h"
#include "harness.h"
#include "net/net.h"
#include "net/tls.h"
#include "test_server_util.h"
#include "tollfree/orders.h"

#define SECRET_A "alice-secret-0123456789"
#define SECRET_B "bob-secret-0123456789ab"

static char dir[64];
static char ca[128], wrong_ca[128], cert[128], key[128], sessions[128];

static int sh(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "failed (%d): %s\n", rc, cmd);
    return rc;
}

/* A test CA, a server certificate it signs for localhost and 127.0.0.1, and a second CA. */
static int make_certs(void)
{
    char cmd[2048];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(wrong_ca, sizeof wrong_ca, "%s/wrong_ca.pem", dir);
    snprintf(cert, sizeof cert, "%s/server.pem", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    const char *ca_args = "-x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                          "-addext basicConstraints=critical,CA:TRUE "
                          "-addext keyUsage=critical,keyCertSign";
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req %s -keyout ca.key -out ca.pem -subj /CN=tollfree-test-ca "
             ">/dev/null 2>&1 && "
             "openssl req %s -keyout wrong_ca.key -out wrong_ca.pem -subj /CN=tollfree-other-ca "
             ">/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout server.key -out server.csr -subj /CN=localhost >/dev/null 2>&1 && "
             "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' "
             "> ext.cnf && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out server.pem -days 2 -extfile ext.cnf >/dev/null 2>&1 && chmod 600 server.key",
             dir, ca_args, ca_args);
    if (sh(cmd))
        return -1;
    snprintf(sessions, sizeof sessions, "%s/sessions", dir);
    FILE *f = fopen(sessions, "w");
    if (!f)
        return -1;
    fprintf(f, "alice %s 1,2\nbob %s 3\n", SECRET_A, SECRET_B);
    fclose(f);
    return chmod(sessions, 0600);
}

/* ---------------------------------------------------------------- URLs */

static void test_url_vectors(void)
{
    FILE *f = tf_test_open_vectors("urls_tls.txt");
    char line[512];
    int n_ok = 0, n_bad = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tok[6] = {0};
        int nt = 0;
        for (char *p = strtok(line, " "); p && nt < 6; p = strtok(NULL, " "))
            tok[nt++] = p;
        tfc_url u;
        int rc = tfc_parse_url(tok[1], &u);
        if (!strcmp(tok[0], "bad")) {
            n_bad++;
            if (rc != TF_E_INVALID_ARG)
                fprintf(stderr, "accepted %s\n", tok[1]);
            CHECK_RC(rc, TF_E_INVALID_ARG);
            tf_orders *o = NULL;
            CHECK_RC(tf_orders_connect(&o, tok[1], NULL), TF_E_INVALID_ARG);
            continue;
        }
        n_ok++;
        if (rc != 0)
            fprintf(stderr, "refused %s\n", tok[1]);
        CHECK_RC(rc, 0);
        CHECK(nt == 5 && !strcmp(tok[2], "tls"));
        CHECK_EQ(u.scheme, TFC_TLS);
        CHECK(!strcmp(u.host, tok[3]));
        CHECK_EQ(u.port, atoi(tok[4]));
        /* The sweep service has no TLS: its client refuses the URL before dialing. */
        tf_client *c = NULL;
        CHECK_RC(tf_client_open(&c, tok[1]), TF_E_INVALID_ARG);
    }
    if (f)
        fclose(f);
    CHECK(n_ok >= 6);
    CHECK(n_bad >= 10);
}

/* ---------------------------------------------------------------- the service */

typedef struct svc {
    pid_t pid;
    char log[160], journal[160];
    int port;
} svc;

/* Runs `tollfree engine serve ARGS...` with stderr to log; 0 once it listens (port set), else
 * -1 (exited: *exit_rc gets its status). */
static int svc_start(svc *s, const char *const *args, int nargs, int *exit_rc)
{
    static int n;
    memset(s, 0, sizeof *s);
    snprintf(s->log, sizeof s->log, "%s/log%d", dir, n);
    snprintf(s->journal, sizeof s->journal, "%s/j%d", dir, n++);
    const char *argv[40];
    int k = 0;
    argv[k++] = t_bin();
    argv[k++] = "engine";
    argv[k++] = "serve";
    argv[k++] = "--journal";
    argv[k++] = s->journal;
    argv[k++] = "--instruments";
    argv[k++] = "1-4";
    for (int i = 0; i < nargs && k < 39; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        t_child_detach(0);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    static char buf[1 << 16];
    for (int64_t end = t_now_ms() + 60000; t_now_ms() < end;) {
        t_read_file(s->log, buf, sizeof buf);
        const char *p = strstr(buf, "listening tcp ");
        if (p && strstr(p, "\n")) {
            const char *nl = strchr(p, '\n');
            const char *colon = p;
            for (const char *q = p; q < nl; q++)
                if (*q == ':')
                    colon = q;
            s->port = atoi(colon + 1);
            return s->port > 0 ? 0 : -1;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            if (exit_rc)
                *exit_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return -1;
        }
        t_sleep_ms(10);
    }
    fprintf(stderr, "engine serve did not start:\n%s\n", buf);
    return -1;
}

static int log_has(const svc *s, const char *what)
{
    static char buf[1 << 16];
    t_read_file(s->log, buf, sizeof buf);
    return strstr(buf, what) != NULL;
}

/* Waits (generously) for a line in the log. */
static int log_wait(const svc *s, const char *what)
{
    for (int64_t end = t_now_ms() + 60000; t_now_ms() < end; t_sleep_ms(10))
        if (log_has(s, what))
            return 1;
    return 0;
}

static int tls_connect(tf_orders **o, const char *url, const char *cafile, const char *session,
                       const char *secret)
{
    tf_orders_opts op = {.size = sizeof op, .timeout_ms = 60000, .tls_ca = cafile};
    if (!session)
        return tf_orders_connect(o, url, &op);
    return tf_orders_connect_session(o, url, session, secret, strlen(secret), &op);
}

/* One command over a fresh TLS session: the service still serves. */
static int served(int port, uint64_t cid)
{
    char url[64];
    snprintf(url, sizeof url, "tls:127.0.0.1:%d", port);
    tf_orders *o = NULL;
    if (tls_connect(&o, url, ca, "alice", SECRET_A) != 0)
        return 0;
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    int ok = tf_orders_new_limit(o, 1, cid, 2, TF_OFL_BUY, 50, 1, &r) == 1 &&
             ev[0].kind == TF_OFL_ACCEPTED;
    tf_orders_close(o);
    return ok;
}

static void test_orders_over_tls(const svc *s)
{
    char url[64], url_name[64];
    snprintf(url, sizeof url, "tls:127.0.0.1:%d", s->port);
    snprintf(url_name, sizeof url_name, "tls://localhost:%d", s->port);
    tf_orders *a = NULL, *b = NULL;
    CHECK_RC(tls_connect(&a, url, ca, "alice", SECRET_A), 0);
    CHECK_RC(tls_connect(&b, url_name, ca, "bob", SECRET_B), 0);
    if (!a || !b) {
        tf_orders_close(a);
        tf_orders_close(b);
        return;
    }
    tf_ofl_msg ev[8];
    tf_orders_reply r = {.ev = ev, .cap = 8};
    CHECK_RC(tf_orders_new_limit(a, 1, 100, 1, TF_OFL_SELL, 1000, 3, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    uint64_t maker = ev[0].accepted.order_id;
    CHECK_RC(tf_orders_new_limit(b, 3, 200, 1, TF_OFL_BUY, 1000, 2, &r), 2);
    CHECK_EQ(ev[1].kind, TF_OFL_TRADE);
    CHECK_EQ(ev[1].trade.maker_order_id, maker);
    tf_ofl_msg fills[4];
    CHECK_EQ(tf_orders_poll_fills(a, fills, 4, 60000), 1);
    CHECK_EQ(fills[0].trade.maker_order_id, maker);
    /* A session acts only for its accounts, over TLS as over anything. */
    CHECK_RC(tf_orders_new_limit(b, 1, 201, 1, TF_OFL_BUY, 900, 1, &r), 1);
    CHECK_EQ(ev[0].kind, TF_ORDERS_VENUE_REJECTED);
    /* A pipeline larger than the TLS records and the socket buffers. */
    enum { N = 3000 };
    static tf_ofl_msg cmds[N], evs[2 * N];
    static uint64_t seqs[N];
    for (int i = 0; i < N; i++) {
        memset(&cmds[i], 0, sizeof cmds[i]);
        cmds[i].kind = TF_OFL_NEW_LIMIT;
        cmds[i].new_limit.account_id = 2;
        cmds[i].new_limit.client_order_id = 1000 + (uint64_t)i;
        cmds[i].new_limit.instrument_id = 3;
        cmds[i].new_limit.side = TF_OFL_BUY;
        cmds[i].new_limit.price = 10 + i % 50;
        cmds[i].new_limit.quantity.lo = 1;
    }
    int64_t n = tf_orders_send_many(a, cmds, N, evs, 2 * N, seqs, NULL);
    CHECK_EQ(n, N);
    int accepted = 0, ordered = 1;
    for (int i = 0; i < N && n == N; i++) {
        accepted += evs[i].kind == TF_OFL_ACCEPTED;
        ordered &= i == 0 || seqs[i] == seqs[i - 1] + 1;
    }
    CHECK_EQ(accepted, N);
    CHECK(ordered);
    tf_orders_close(a);
    tf_orders_close(b);
}

static void test_wrong_ca(const svc *s)
{
    char url[64];
    snprintf(url, sizeof url, "tls:127.0.0.1:%d", s->port);
    tf_orders *o = NULL;
    CHECK_RC(tls_connect(&o, url, wrong_ca, "alice", SECRET_A), -EPROTO);
    CHECK(o == NULL);
    /* No CA file: the system store does not know the test CA either. */
    unsetenv("TOLLFREE_TLS_CA");
    CHECK_RC(tls_connect(&o, url, NULL, NULL, NULL), -EPROTO);
    /* The environment variable names the CA when the option does not. */
    setenv("TOLLFREE_TLS_CA", ca, 1);
    CHECK_RC(tls_connect(&o, url, NULL, "alice", SECRET_A), 0);
    tf_orders_close(o);
    o = NULL;
    /* A caller built against the layout before tls_ca: the bytes after it are not read. */
    tf_orders_opts v2 = {.size = TF_ORDERS_OPTS_SIZE_V2, .timeout_ms = 60000, .tls_ca = wrong_ca};
    CHECK_RC(tf_orders_connect(&o, url, &v2), 0);
    tf_orders_close(o);
    o = NULL;
    unsetenv("TOLLFREE_TLS_CA");
    /* The client reads a CA file once and keeps it, until the file changes: then again. */
    char moving[160], cmd[1024];
    snprintf(moving, sizeof moving, "%s/moving_ca.pem", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s", wrong_ca, moving);
    CHECK_EQ(sh(cmd), 0);
    CHECK_RC(tls_connect(&o, url, moving, NULL, NULL), -EPROTO);
    CHECK_RC(tls_connect(&o, url, moving, NULL, NULL), -EPROTO);
    snprintf(cmd, sizeof cmd, "cp %s %s.new && mv %s.new %s", ca, moving, moving, moving);
    CHECK_EQ(sh(cmd), 0);
    CHECK_RC(tls_connect(&o, url, moving, "alice", SECRET_A), 0);
    tf_orders_close(o);
    o = NULL;
    /* A CA file that is not there. */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/nothing.pem", dir);
    CHECK_RC(tls_connect(&o, url, missing, NULL, NULL), TF_E_INVALID_ARG);
    /* A plain client on the TLS port cannot log on (what it reads is no challenge). */
    char plain[64];
    snprintf(plain, sizeof plain, "tcp:127.0.0.1:%d", s->port);
    tf_orders_opts op = {.size = sizeof op, .timeout_ms = 3000};
    CHECK(tf_orders_connect_session(&o, plain, "alice", SECRET_A, strlen(SECRET_A), &op) < 0);
    CHECK(o == NULL);
    CHECK(served(s->port, 300));
}

/* Reads until the peer ends the connection: 1 when it did (EOF or a reset) before the deadline. */
static int cut_off(int fd)
{
    char buf[4096];
    for (int64_t end = t_now_ms() + 60000; t_now_ms() < end;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return 1;
        if (r < 0 && errno != EINTR && errno != EAGAIN)
            return 1;
    }
    return 0;
}

static void test_plain_client_cut_off(const svc *s)
{
    int fd = t_connect_tcp_from(s->port, "127.0.0.1");
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    /* An OFL1 frame, the way a plain client talks: not a ClientHello. */
    uint8_t frame[64] = {0x20, 0x00, 0x01};
    CHECK_EQ(send(fd, frame, sizeof frame, MSG_NOSIGNAL), (ssize_t)sizeof frame);
    CHECK(cut_off(fd));
    close(fd);
    CHECK(log_wait(s, "TLS handshake with 127.0.0.1 failed"));
    CHECK(served(s->port, 400));
}

static void test_stalled_handshake(const svc *s)
{
    int fd = t_connect_tcp_from(s->port, "127.0.0.1");
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    /* A TLS record header announcing a 512-byte handshake message, then silence. */
    uint8_t hdr[5] = {0x16, 0x03, 0x01, 0x02, 0x00};
    CHECK_EQ(send(fd, hdr, sizeof hdr, MSG_NOSIGNAL), 5);
    /* Served while the other one stalls (the handshake runs inside the loop: nothing waits). */
    CHECK(served(s->port, 500));
    CHECK(served(s->port, 501));
    CHECK(cut_off(fd));
    close(fd);
    CHECK(log_wait(s, "not finished in"));
    CHECK(served(s->port, 502));
}

/* ---------------------------------------------------------------- in process: workers */

/* An echo server on the connection layer itself, every frame heavy (run on a worker, whose
 * reply goes out through the SSL object from the worker thread; what does not fit in the socket
 * is finished by the loop thread): the SSL object changes threads with the connection, never
 * used by two at once. Frames: a 4-byte little-endian length, then that many bytes. */
#define ECHO_MAX (256u << 10)

typedef struct echo_conn {
    uint8_t body[ECHO_MAX];
    uint32_t len;
} echo_conn;

static int echo_open(tfn_conn *c)
{
    echo_conn *e = malloc(sizeof *e);
    tfn_conn_set_data(c, e);
    return e ? 0 : -1;
}

static int echo_head(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *h)
{
    if (avail < 4)
        return 4;
    echo_conn *e = tfn_conn_data(c);
    uint32_t n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (n > ECHO_MAX)
        return -1;
    e->len = n;
    h->consume = 4;
    h->body_len = n;
    h->body = e->body;
    return 0;
}

static int echo_frame(tfn_conn *c, int where)
{
    echo_conn *e = tfn_conn_data(c);
    uint8_t hdr[4] = {(uint8_t)e->len, (uint8_t)(e->len >> 8), (uint8_t)(e->len >> 16),
                      (uint8_t)(e->len >> 24)};
    /* Where it ran goes back in the first body byte: the test wants workers. */
    if (e->len)
        e->body[0] = (uint8_t)where;
    int rc = tfn_conn_send(c, hdr, 4);
    return rc ? rc : tfn_conn_send(c, e->body, e->len);
}

static int echo_heavy(tfn_conn *c)
{
    (void)c;
    return 1;
}

static void echo_close(tfn_conn *c, const char *why)
{
    (void)why;
    free(tfn_conn_data(c));
}

static const tfn_ops echo_ops = {.max_head = 4,
                                 .on_open = echo_open,
                                 .head = echo_head,
                                 .frame = echo_frame,
                                 .is_heavy = echo_heavy,
                                 .on_close = echo_close};

static void *loop_main(void *lp)
{
    tfn_loop_run(lp);
    return NULL;
}

typedef struct echo_client {
    int port, frames, ok, on_worker;
} echo_client;

static int io_all(tfc_tls *t, int fd, uint8_t *p, size_t n, int out)
{
    while (n) {
        ssize_t r = out ? tfc_send(t, fd, p, n) : tfc_recv(t, fd, p, n);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        struct pollfd pf = {fd, POLLIN | POLLOUT, 0};
        if (poll(&pf, 1, 60000) <= 0)
            return -1;
    }
    return 0;
}

static void *echo_client_main(void *arg)
{
    echo_client *ec = arg;
    int fd = -1;
    tfc_tls *t = NULL;
    static __thread uint8_t out[ECHO_MAX + 4], in[ECHO_MAX + 4];
    if (tfc_dial_tcp("127.0.0.1", (uint16_t)ec->port, &fd) ||
        tfc_tls_start(fd, "127.0.0.1", ca, 60000, &t)) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    uint32_t x = 12345u + (uint32_t)ec->port;
    for (int f = 0; f < ec->frames; f++) {
        /* Sizes from one byte to the whole buffer: many records, partial writes. */
        uint32_t n = f % 3 == 0 ? ECHO_MAX : 1 + (uint32_t)(f * 7919) % 40000;
        out[0] = (uint8_t)n, out[1] = (uint8_t)(n >> 8), out[2] = (uint8_t)(n >> 16), out[3] = 0;
        for (uint32_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            out[4 + i] = (uint8_t)(x >> 16);
        }
        if (io_all(t, fd, out, n + 4, 1) || io_all(t, fd, in, n + 4, 0))
            break;
        ec->on_worker += in[4] == TFN_ON_WORKER;
        ec->ok += !memcmp(in, out, 4) && !memcmp(in + 5, out + 5, n - 1);
    }
    tfc_tls_free(t, 1);
    close(fd);
    return NULL;
}

static void test_workers_in_process(void)
{
    char cert_path[128], key_path[128], err[512];
    snprintf(cert_path, sizeof cert_path, "%s", cert);
    snprintf(key_path, sizeof key_path, "%s", key);
    tfn_tls *tls = NULL;
    CHECK_RC(tfn_tls_open(cert_path, key_path, err, sizeof err, &tls), 0);
    if (!tls)
        return;
    tfn_config cfg = {.name = "test", .quiet = 1, .workers = 2, .sockbuf_bytes = 16384, .tls = tls};
    tfn_loop *lp = NULL;
    CHECK_RC(tfn_loop_open(&cfg, &lp), 0);
    if (!lp) {
        tfn_tls_close(tls);
        return;
    }
    /* The port is in the listening line on stderr: catch it. */
    int pfd[2], saved = dup(2);
    CHECK_RC(pipe(pfd), 0);
    dup2(pfd[1], 2);
    int rc = tfn_listen_tcp(lp, "127.0.0.1:0", &echo_ops);
    dup2(saved, 2);
    close(saved);
    close(pfd[1]);
    char line[256] = {0};
    ssize_t ln = read(pfd[0], line, sizeof line - 1);
    close(pfd[0]);
    CHECK_RC(rc, 0);
    const char *colon = ln > 0 ? strrchr(line, ':') : NULL;
    int port = colon ? atoi(colon + 1) : 0;
    CHECK(port > 0 && strstr(line, "(TLS)"));
    pthread_t lt;
    CHECK_RC(pthread_create(&lt, NULL, loop_main, lp), 0);
    enum { NC = 4 };
    echo_client ec[NC];
    pthread_t ct[NC];
    for (int i = 0; i < NC; i++) {
        ec[i] = (echo_client){.port = port, .frames = 24};
        CHECK_RC(pthread_create(&ct[i], NULL, echo_client_main, &ec[i]), 0);
    }
    int ok = 0, on_worker = 0;
    for (int i = 0; i < NC; i++) {
        pthread_join(ct[i], NULL);
        ok += ec[i].ok;
        on_worker += ec[i].on_worker;
    }
    CHECK_EQ(ok, NC * 24);
    CHECK_EQ(on_worker, NC * 24);
    kill(getpid(), SIGTERM); /* taken by the loop's signalfd: it stops */
    pthread_join(lt, NULL);
    tfn_loop_close(lp);
    tfn_tls_close(tls);
}

/* ---------------------------------------------------------------- start-up refusals */

/* ---------------------------------------------------------------- TLS in the memory counter */

/* OpenSSL's allocations, counted on the threads that set count_me (the loop thread of the cost
 * test): each block carries its size and whether it was counted, so a free on any thread takes
 * back what its allocation added. Installed first thing in main (OpenSSL takes hooks only before
 * its first allocation). */
typedef union mem_hdr {
    struct {
        size_t size;
        int counted;
    } h;
    max_align_t align;
} mem_hdr;

static __thread int count_me;
static size_t ossl_live, ossl_peak;

static void *hdr_init(mem_hdr *m, size_t n)
{
    if (!m)
        return NULL;
    m->h.size = n;
    m->h.counted = count_me;
    if (count_me) {
        size_t live = __atomic_add_fetch(&ossl_live, n, __ATOMIC_RELAXED);
        size_t peak = __atomic_load_n(&ossl_peak, __ATOMIC_RELAXED);
        while (live > peak && !__atomic_compare_exchange_n(&ossl_peak, &peak, live, 1,
                                                           __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    return m + 1;
}

static void hdr_drop(mem_hdr *m)
{
    if (m->h.counted)
        __atomic_sub_fetch(&ossl_live, m->h.size, __ATOMIC_RELAXED);
}

static void *count_malloc(size_t n, const char *file, int line)
{
    (void)file, (void)line;
    return hdr_init(malloc(sizeof(mem_hdr) + n), n);
}

static void *count_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file, (void)line;
    if (!p)
        return count_malloc(n, file, line);
    mem_hdr *m = (mem_hdr *)p - 1, old = *m;
    mem_hdr *r = realloc(m, sizeof(mem_hdr) + n);
    if (!r)
        return NULL;
    hdr_drop(&old);
    return hdr_init(r, n);
}

static void count_free(void *p, const char *file, int line)
{
    (void)file, (void)line;
    if (!p)
        return;
    mem_hdr *m = (mem_hdr *)p - 1;
    hdr_drop(m);
    free(m);
}

static void *counted_loop_main(void *lp)
{
    count_me = 1;
    tfn_loop_run(lp);
    return NULL;
}

/* A TLS loop of ops on 127.0.0.1 (and on a Unix socket when upath), its thread started. */
static tfn_loop *echo_loop(tfn_config *cfg, const tfn_ops *ops, const char *upath, int counted,
                           int *port, pthread_t *lt)
{
    tfn_loop *lp = NULL;
    CHECK_RC(tfn_loop_open(cfg, &lp), 0);
    if (!lp)
        return NULL;
    int pfd[2], saved = dup(2);
    CHECK_RC(pipe(pfd), 0);
    dup2(pfd[1], 2);
    int rc = tfn_listen_tcp(lp, "127.0.0.1:0", ops);
    dup2(saved, 2);
    close(saved);
    close(pfd[1]);
    char line[256] = {0};
    ssize_t ln = read(pfd[0], line, sizeof line - 1);
    close(pfd[0]);
    const char *colon = ln > 0 ? strrchr(line, ':') : NULL;
    *port = colon ? atoi(colon + 1) : 0;
    if (!rc && upath)
        rc = tfn_listen_unix(lp, upath, "unix", ops, 0);
    CHECK_RC(rc, 0);
    if (rc || *port <= 0 ||
        pthread_create(lt, NULL, counted ? counted_loop_main : loop_main, lp) != 0) {
        tfn_loop_close(lp);
        return NULL;
    }
    return lp;
}

/* Stops and closes it; its counters in k (when not NULL). */
static void echo_loop_stop(tfn_loop *lp, pthread_t lt, tfn_counters *k)
{
    kill(getpid(), SIGTERM); /* taken by the loop's signalfd: it stops */
    pthread_join(lt, NULL);
    if (k)
        tfn_loop_counters(lp, k);
    tfn_loop_close(lp);
}

/* One small frame there and back: 1 when it came back. */
static int echo_once(tfc_tls *t, int fd)
{
    uint8_t out[4 + 100] = {100, 0, 0, 0}, in[sizeof out];
    memset(out + 4, 0x5a, 100);
    return !io_all(t, fd, out, sizeof out, 1) && !io_all(t, fd, in, sizeof in, 0) &&
           !memcmp(in + 5, out + 5, 99);
}

/* A TLS client: 0 when its handshake was done (fd and t set). */
static int tls_dial(int port, int *fd, tfc_tls **t)
{
    *fd = -1;
    *t = NULL;
    int rc = tfc_dial_tcp("127.0.0.1", (uint16_t)port, fd);
    if (!rc)
        rc = tfc_tls_start(*fd, "127.0.0.1", ca, 60000, t);
    if (rc && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

static void tls_hangup(int fd, tfc_tls *t)
{
    tfc_tls_free(t, 1);
    close(fd);
}

/* Waits (generous deadline) until the counter reads want and the loop holds conns connections. */
static int wait_mem(tfn_loop *lp, const uint64_t *used, uint64_t want, int conns)
{
    for (int i = 0; i < 60000 / 5; i++) {
        if (__atomic_load_n(used, __ATOMIC_RELAXED) == want && tfn_loop_conns(lp) == conns)
            return 1;
        usleep(5000);
    }
    fprintf(stderr, "memory counter %llu, want %llu (%d connections, want %d)\n",
            (unsigned long long)__atomic_load_n(used, __ATOMIC_RELAXED), (unsigned long long)want,
            tfn_loop_conns(lp), conns);
    return 0;
}

/* What the server side of one TLS connection allocates in OpenSSL, against TFN_TLS_CONN_BYTES
 * and TFN_TLS_BUF_BYTES, and the memory counter through its life: accept, handshake, a frame,
 * at rest (record buffers given back), a frame again, closed. */
static void test_tls_cost(int hooks)
{
    if (!hooks) {
        fprintf(stderr, "TLS cost: OpenSSL took no allocation hooks\n");
        CHECK(0);
        return;
    }
    char err[512];
    tfn_tls *tls = NULL;
    CHECK_RC(tfn_tls_open(cert, key, err, sizeof err, &tls), 0);
    uint64_t used = 0;
    tfn_config cfg = {
        .name = "test", .quiet = 1, .tls = tls, .mem_used = &used, .mem_limit = (uint64_t)1 << 30};
    int port = 0, fd;
    pthread_t lt;
    tfc_tls *t;
    tfn_loop *lp = tls ? echo_loop(&cfg, &echo_ops, NULL, 1, &port, &lt) : NULL;
    if (!lp) {
        tfn_tls_close(tls);
        return;
    }
    /* A first connection warms the loop thread (OpenSSL's per-thread state stays with it). */
    if (tls_dial(port, &fd, &t) == 0) {
        CHECK(echo_once(t, fd));
        tls_hangup(fd, t);
    }
    CHECK(wait_mem(lp, &used, 0, 0));
    size_t base = __atomic_load_n(&ossl_live, __ATOMIC_RELAXED);
    __atomic_store_n(&ossl_peak, base, __ATOMIC_RELAXED);
    CHECK_RC(tls_dial(port, &fd, &t), 0);
    if (fd >= 0) {
        CHECK(echo_once(t, fd));
        size_t peak = __atomic_load_n(&ossl_peak, __ATOMIC_RELAXED) - base;
        size_t live = __atomic_load_n(&ossl_live, __ATOMIC_RELAXED) - base;
        CHECK(__atomic_load_n(&used, __ATOMIC_RELAXED) >= TFN_IBUF_DEFAULT + TFN_TLS_CONN_BYTES);
        /* At rest after a tick: input, output and record buffers given back. */
        CHECK(wait_mem(lp, &used, TFN_TLS_CONN_BYTES - TFN_TLS_BUF_BYTES, 1));
        size_t rest = __atomic_load_n(&ossl_live, __ATOMIC_RELAXED) - base;
        fprintf(stderr, "TLS cost: handshake peak %zu, live %zu, at rest %zu bytes\n", peak, live,
                rest);
        CHECK(peak <= TFN_TLS_HANDSHAKE_BYTES && live <= TFN_TLS_CONN_BYTES);
        /* measured, not padded */
        CHECK(TFN_TLS_HANDSHAKE_BYTES <= 2 * peak && TFN_TLS_CONN_BYTES <= 2 * live);
        CHECK(rest <= TFN_TLS_CONN_BYTES - TFN_TLS_BUF_BYTES);
        CHECK(TFN_TLS_BUF_BYTES <= live - rest); /* never counted back more than went */
        CHECK(echo_once(t, fd));                 /* the buffers come back with the next byte */
        CHECK(__atomic_load_n(&used, __ATOMIC_RELAXED) >= TFN_IBUF_DEFAULT + TFN_TLS_CONN_BYTES);
        tls_hangup(fd, t);
        CHECK(wait_mem(lp, &used, 0, 0));
        CHECK_EQ(__atomic_load_n(&ossl_live, __ATOMIC_RELAXED), base);
    }
    echo_loop_stop(lp, lt, NULL);
    tfn_tls_close(tls);
}

/* Idle TLS connections under a small memory limit: refused once their SSL objects would pass it
 * (counted, the rest served), shown in the counter while open and at rest, all of it back when
 * they close; plain and TLS connections admitted again then. The input buffer is small (4 KiB),
 * so that without the SSL objects counted every connection would be taken. */
static void test_tls_memory_limit(void)
{
    enum { N = 48, IBUF = 4096 };
    const uint64_t limit = 512 << 10;
    const size_t at_rest = TFN_TLS_CONN_BYTES - TFN_TLS_BUF_BYTES;
    tfn_ops ops = echo_ops;
    ops.ibuf_bytes = IBUF;
    char err[512], upath[128];
    snprintf(upath, sizeof upath, "%s/echo.sock", dir);
    tfn_tls *tls = NULL;
    CHECK_RC(tfn_tls_open(cert, key, err, sizeof err, &tls), 0);
    uint64_t used = 0;
    tfn_config cfg = {
        .name = "test", .quiet = 1, .tls = tls, .mem_used = &used, .mem_limit = limit};
    int port = 0, fds[N];
    tfc_tls *ts[N];
    pthread_t lt;
    tfn_loop *lp = tls ? echo_loop(&cfg, &ops, upath, 0, &port, &lt) : NULL;
    if (!lp) {
        tfn_tls_close(tls);
        return;
    }
    int admitted = 0, refused = 0, over = 0;
    for (int i = 0; i < N; i++) {
        if (tls_dial(port, &fds[i], &ts[i]) == 0 && echo_once(ts[i], fds[i]))
            admitted++;
        else
            refused++;
        over += __atomic_load_n(&used, __ATOMIC_RELAXED) > limit;
    }
    fprintf(stderr, "TLS under %llu bytes: %d admitted, %d refused, counter %llu\n",
            (unsigned long long)limit, admitted, refused,
            (unsigned long long)__atomic_load_n(&used, __ATOMIC_RELAXED));
    /* However many rested meanwhile, no more than this fit: */
    int most = 1 + (int)((limit - IBUF - TFN_TLS_HANDSHAKE_BYTES) / at_rest);
    CHECK(admitted <= most && refused >= N - most);
    CHECK(admitted >= (int)(limit / (IBUF + TFN_TLS_HANDSHAKE_BYTES)));
    CHECK_EQ(over, 0);
    /* At rest, each still holds its SSL object without its record buffers. */
    CHECK(wait_mem(lp, &used, (uint64_t)admitted * at_rest, admitted));
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0)
            tls_hangup(fds[i], ts[i]);
    CHECK(wait_mem(lp, &used, 0, 0));
    /* Room again: a plain connection and a TLS one are served. */
    int ufd = t_connect_unix(upath);
    CHECK(ufd >= 0 && echo_once(NULL, ufd));
    CHECK_RC(tls_dial(port, &fds[0], &ts[0]), 0);
    CHECK(fds[0] >= 0 && echo_once(ts[0], fds[0]));
    if (fds[0] >= 0)
        tls_hangup(fds[0], ts[0]);
    if (ufd >= 0)
        close(ufd);
    CHECK(wait_mem(lp, &used, 0, 0));
    tfn_counters k;
    echo_loop_stop(lp, lt, &k);
    CHECK_EQ(k.refused_memory, (uint64_t)refused);
    tfn_tls_close(tls);
}

static void expect_refusal(const char *const *args, int nargs, int want_rc, const char *want1,
                           const char *want2)
{
    svc s;
    int rc = -1;
    CHECK_EQ(svc_start(&s, args, nargs, &rc), -1);
    if (s.pid) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, NULL, 0);
    }
    CHECK_EQ(rc, want_rc);
    if (!log_has(&s, want1) || (want2 && !log_has(&s, want2))) {
        static char buf[4096];
        t_read_file(s.log, buf, sizeof buf);
        fprintf(stderr, "expected \"%s\"%s%s in:\n%s\n", want1, want2 ? " and " : "",
                want2 ? want2 : "", buf);
        CHECK(0);
    }
}

static void test_refusals(void)
{
    {
        const char *a[] = {"--tcp", "0.0.0.0:0"};
        expect_refusal(a, 2, 2, "needs --sessions and --tls-cert/--tls-key", NULL);
    }
    {
        const char *a[] = {"--tcp", "0.0.0.0:0", "--sessions", sessions};
        expect_refusal(a, 4, 2, "needs --tls-cert/--tls-key", "in the clear");
    }
    {
        const char *a[] = {"--tcp", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key};
        expect_refusal(a, 6, 2, "needs --sessions", "anyone could act");
    }
    {
        const char *a[] = {"--tcp", "127.0.0.1:0", "--tls-key", key};
        expect_refusal(a, 4, 2, "--tls-key goes with --tls-cert", NULL);
    }
    {
        const char *a[] = {"--unix", "/tmp/never-made.sock", "--tls-cert", cert, "--tls-key", key};
        expect_refusal(a, 6, 2, "apply to --tcp listeners", NULL);
    }
    {
        char key644[160], cmd[512];
        snprintf(key644, sizeof key644, "%s/open.key", dir);
        snprintf(cmd, sizeof cmd, "cp %s %s && chmod 644 %s", key, key644, key644);
        if (sh(cmd) == 0) {
            const char *a[] = {"--tcp", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key644};
            expect_refusal(a, 6, 1, "mode 0644", "chmod 600");
        }
    }
    {
        /* A key that is not the certificate's. */
        char other[160];
        snprintf(other, sizeof other, "%s/wrong_ca.key", dir);
        chmod(other, 0600);
        const char *a[] = {"--tcp", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", other};
        expect_refusal(a, 6, 1, "--tls-key", NULL);
    }
    {
        /* Everything given: a non-loopback address is taken. */
        svc s;
        const char *a[] = {"--tcp",      "0.0.0.0:0", "--sessions", sessions,
                           "--tls-cert", cert,        "--tls-key",  key};
        CHECK_RC(svc_start(&s, a, 8, NULL), 0);
        CHECK(log_has(&s, "(TLS)"));
        /* Every 127.x address reaches it, but the certificate names 127.0.0.1 and localhost
         * only: another address is refused by the client (the host check), those two work. */
        char url[64];
        tf_orders *o = NULL;
        snprintf(url, sizeof url, "tls:127.0.0.2:%d", s.port);
        CHECK_RC(tls_connect(&o, url, ca, NULL, NULL), -EPROTO);
        snprintf(url, sizeof url, "tls:localhost:%d", s.port);
        CHECK_RC(tls_connect(&o, url, ca, "alice", SECRET_A), 0);
        tf_orders_close(o);
        if (s.pid) {
            kill(s.pid, SIGTERM);
            CHECK_EQ(t_wait_exit(s.pid, 60000), 0);
        }
    }
}

int main(void)
{
    /* Before anything allocates in OpenSSL: it takes hooks only then. */
    int hooks = CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free);
    signal(SIGPIPE, SIG_IGN);
    test_url_vectors();
    if (system("openssl version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "the openssl command is needed (Debian: openssl)\n");
        CHECK(0);
        return tf_test_report();
    }
    if (t_mkdtemp(dir, sizeof dir) || make_certs()) {
        CHECK(0);
        return tf_test_report();
    }
    svc s;
    const char *args[] = {"--tcp", "127.0.0.1:0", "--sessions", sessions,          "--tls-cert",
                          cert,    "--tls-key",   key,          "--stall-timeout", "2"};
    int rc = svc_start(&s, args, 10, NULL);
    CHECK_RC(rc, 0);
    if (rc == 0) {
        CHECK(log_has(&s, "(TLS)"));
        test_orders_over_tls(&s);
        test_wrong_ca(&s);
        test_plain_client_cut_off(&s);
        test_stalled_handshake(&s);
        kill(s.pid, SIGTERM);
        CHECK_EQ(t_wait_exit(s.pid, 60000), 0);
        s.pid = 0;
    }
    if (s.pid) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, NULL, 0);
    }
    test_workers_in_process();
    test_tls_cost(hooks);
    test_tls_memory_limit();
    test_refusals();
    if (!getenv("TF_KEEP_LOGS"))
        t_rm_rf(dir);
    return tf_test_report();
}
