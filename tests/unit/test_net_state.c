/* A connection's one state (src/net/net_private.h, conn_state) through a real loop, in process,
 * over a real Unix socket: the transitions a server can ask for while the loop, a worker or the
 * handshake has the connection, and what the peer and on_close see after each.
 *
 *   OPEN -> CLOSING      (tfn_conn_close on the loop): output queued before and after still goes
 *                        out, then the end; a second close keeps the first reason
 *   PARKED -> CLOSING    (tfn_conn_close on a worker): the worker's reply, then the end
 *   PARKED -> DOOMED     (output beyond out_max on a worker): no reply, the end; later sends are
 *                        refused (TF_E_SHUTTING_DOWN) and a later close keeps "output limit"
 *   OPEN -> (frame < 0)  the end, with the frame's own reason
 *   OPEN -> DEAD         the peer leaves at a frame boundary: "peer closed"
 *
 * Each check is an outcome (bytes and end seen by the peer, reasons and return codes in order),
 * never a duration: the waits are bounded by the hang deadline only. */
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "net/net.h"
#include "tollfree/error.h"

#define OUT_MAX 4096

/* What the server side saw, in order (loop, workers: under the lock). */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen[2048];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    pthread_mutex_lock(&seen_lock);
    size_t n = strlen(seen);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(seen + n, sizeof seen - n, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&seen_lock);
}

typedef struct tconn {
    uint8_t op;
} tconn;

static int t_open(tfn_conn *c)
{
    tconn *t = calloc(1, sizeof *t);
    if (!t)
        return TF_E_NOMEM;
    tfn_conn_set_data(c, t);
    return 0;
}

/* A frame is one byte: its opcode. */
static int t_head(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *h)
{
    (void)avail;
    ((tconn *)tfn_conn_data(c))->op = p[0];
    h->consume = 1;
    h->body_len = 0;
    h->body = NULL;
    return 0;
}

/* Upper-case opcodes run on a worker. */
static int t_heavy(tfn_conn *c)
{
    uint8_t op = ((tconn *)tfn_conn_data(c))->op;
    return op >= 'A' && op <= 'Z';
}

static int t_frame(tfn_conn *c, int where)
{
    uint8_t op = ((tconn *)tfn_conn_data(c))->op;
    static uint8_t big[OUT_MAX * 2];
    switch (op) {
    case 'e': /* echo */
        return tfn_conn_send(c, "e", 1);
    case 'c': /* OPEN -> CLOSING, output before and after the close still goes out */
        tfn_conn_send(c, "1", 1);
        tfn_conn_close(c, "first close");
        tfn_conn_close(c, "second close");
        note("c:%d:%d;", where, tfn_conn_send(c, "2", 1));
        return 0;
    case 'C': /* PARKED -> CLOSING */
        tfn_conn_send(c, "W", 1);
        tfn_conn_close(c, "closed on a worker");
        note("C:%d;", where);
        return 0;
    case 'D': { /* PARKED -> DOOMED */
        int a = tfn_conn_send(c, big, sizeof big);
        int b = tfn_conn_send(c, "x", 1);
        tfn_conn_close(c, "a later close");
        note("D:%d:%d:%d;", where, a, b);
        return 0;
    }
    case 'x': /* the frame fails */
        return -1;
    default:
        return 0;
    }
}

static void t_close(tfn_conn *c, const char *why)
{
    note("close(%s);", why);
    free(tfn_conn_data(c));
}

static const tfn_ops ops = {
    .max_head = 1,
    .on_open = t_open,
    .head = t_head,
    .frame = t_frame,
    .is_heavy = t_heavy,
    .on_close = t_close,
};

static void *run_loop(void *arg)
{
    tfn_loop_run(arg);
    return NULL;
}

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Everything the peer gets until the end (or the deadline): the bytes, then "|EOF". */
static void read_to_end(int fd, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, T_DEADLINE_MS) <= 0) {
            tf_test_deadline_note("the server's end of a connection", T_DEADLINE_MS);
            snprintf(out + n, cap - n, "|TIMEOUT");
            return;
        }
        char b[256];
        ssize_t r = read(fd, b, sizeof b);
        if (r <= 0) {
            snprintf(out + n, cap - n, "|EOF");
            return;
        }
        for (ssize_t i = 0; i < r && n + 1 < cap; i++)
            out[n++] = b[i];
        out[n] = 0;
    }
}

/* Sends the frames, half-closes when asked, and returns what came back. */
static void exchange(const char *path, const char *frames, int half_close, char *got, size_t cap)
{
    int fd = connect_to(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(write(fd, frames, strlen(frames)), (ssize_t)strlen(frames));
    if (half_close)
        shutdown(fd, SHUT_WR);
    read_to_end(fd, got, cap);
    close(fd);
}

static void forget_seen(void)
{
    pthread_mutex_lock(&seen_lock);
    seen[0] = 0;
    pthread_mutex_unlock(&seen_lock);
}

/* Waits until seen holds `what` (on_close runs on the loop after the peer saw the end). */
static int wait_seen(const char *what)
{
    for (int i = 0; i < T_DEADLINE_MS; i++) {
        pthread_mutex_lock(&seen_lock);
        int ok = strstr(seen, what) != NULL;
        pthread_mutex_unlock(&seen_lock);
        if (ok)
            return 1;
        usleep(1000);
    }
    tf_test_deadline_note(what, T_DEADLINE_MS);
    return 0;
}

int main(void)
{
    char path[108];
    snprintf(path, sizeof path, "/tmp/tf-net-state-%d.sock", (int)getpid());
    tfn_config cfg = {.name = "test_net_state", .quiet = 1, .workers = 2, .out_max = OUT_MAX};
    tfn_loop *lp = NULL;
    CHECK_RC(tfn_loop_open(&cfg, &lp), 0);
    CHECK_RC(tfn_listen_unix(lp, path, "unix", &ops, 0), 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, run_loop, lp), 0);
    char got[256];

    exchange(path, "ec", 0, got, sizeof got);
    CHECK(strcmp(got, "e12|EOF") == 0);
    CHECK(wait_seen("c:0:0;close(first close);"));

    forget_seen();
    exchange(path, "eCe", 0, got, sizeof got);
    CHECK(strcmp(got, "eW|EOF") == 0); /* nothing taken after the close: no second "e" */
    CHECK(wait_seen("C:1;close(closed on a worker);"));

    forget_seen();
    exchange(path, "De", 0, got, sizeof got);
    CHECK(strcmp(got, "|EOF") == 0);
    char want[160];
    snprintf(want, sizeof want,
             "D:1:%d:%d;close(output limit: the peer does not read its replies);", TF_E_LIMIT,
             TF_E_SHUTTING_DOWN);
    CHECK(wait_seen(want));

    forget_seen();
    exchange(path, "ex", 0, got, sizeof got);
    CHECK(strcmp(got, "e|EOF") == 0);
    CHECK(wait_seen("close(closed after an error);"));

    forget_seen();
    exchange(path, "eee", 1, got, sizeof got);
    CHECK(strcmp(got, "eee|EOF") == 0);
    CHECK(wait_seen("close(peer closed);"));

    kill(getpid(), SIGTERM); /* the loop's signalfd takes it: a clean stop */
    pthread_join(th, NULL);
    tfn_loop_close(lp);
    CHECK(access(path, F_OK) != 0); /* the socket file is gone */
    printf("seen: %s\n", seen);
    return tf_test_report();
}
