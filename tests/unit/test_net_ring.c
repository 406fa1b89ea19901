/* Shared-memory rings as connections of the connection layer (src/net/ring.c), in process, with
 * a table of operations that echoes each frame: a handshake on a Unix control socket opens a
 * ring whose thread the layer runs; one process gets TFN_RINGS_PER_PEER rings and the next is
 * refused (counted); a stop wakes every ring's thread, tfn_loop_close joins them, and each ring
 * has told its client (server_closed) and said why, once.
 *
 * Each check is an outcome (bytes, codes, counts), never a duration: the waits are bounded by
 * the hang deadline only. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "net/net.h"
#include "tollfree/error.h"
#include "tollfree/shm.h"
#include "tollfree/wire.h"

#define RING TF_SHM_MIN_RING
#define NRINGS (TFN_RINGS_PER_PEER + 1)

static int ring_closes; /* atomic: on_close calls saying "server shutting down" */
static int ring_other;  /* atomic: on_close calls for another reason */

/* ---- the server side: a handshake, then each ring frame echoed ---- */

typedef struct hs {
    uint8_t hello[TF_SHM_HELLO_BYTES];
    int fd;
} hs;

static int r_frame(tfn_ring *r, const uint8_t *frame, uint32_t body_len)
{
    uint8_t copy[256];
    if (body_len > sizeof copy - 4)
        return TF_E_PROTOCOL;
    memcpy(copy, frame, 4 + (size_t)body_len);
    return tfn_ring_reply(r, copy, 4 + (size_t)body_len, NULL, 0);
}

static void r_close(tfn_ring *r, const char *line)
{
    (void)r;
    if (strstr(line, "ring closed: server shutting down"))
        __atomic_fetch_add(&ring_closes, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&ring_other, 1, __ATOMIC_RELAXED);
}

static const tfn_ring_ops rops = {.frame = r_frame, .on_close = r_close};

static int h_open(tfn_conn *c)
{
    hs *h = calloc(1, sizeof *h);
    if (!h)
        return TF_E_NOMEM;
    h->fd = -1;
    tfn_conn_set_data(c, h);
    return 0;
}

static void h_fd(tfn_conn *c, int fd)
{
    hs *h = tfn_conn_data(c);
    if (h->fd >= 0)
        close(h->fd);
    h->fd = fd;
}

static int h_head(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *hd)
{
    if (avail < TF_SHM_HELLO_BYTES)
        return TF_SHM_HELLO_BYTES;
    memcpy(((hs *)tfn_conn_data(c))->hello, p, TF_SHM_HELLO_BYTES);
    *hd = (tfn_head){.consume = TF_SHM_HELLO_BYTES};
    return 0;
}

static int h_frame(tfn_conn *c, int where)
{
    (void)where;
    hs *h = tfn_conn_data(c);
    int status = tfn_ring_open(c, h->fd, h->hello, &rops, NULL, 0, 1 << 16);
    close(h->fd);
    h->fd = -1;
    uint8_t rep[TF_SHM_HELLO_REPLY_BYTES] = {0};
    tf_put32(rep, (uint32_t)status);
    tfn_conn_send(c, rep, sizeof rep);
    return 0;
}

static void h_close(tfn_conn *c, const char *why)
{
    (void)why;
    hs *h = tfn_conn_data(c);
    if (h->fd >= 0)
        close(h->fd);
    free(h);
}

static const tfn_ops hs_ops = {
    .max_head = TF_SHM_HELLO_BYTES,
    .on_open = h_open,
    .head = h_head,
    .frame = h_frame,
    .on_fd = h_fd,
    .on_close = h_close,
};

static void *run_loop(void *arg)
{
    tfn_loop_run(arg);
    return NULL;
}

/* ---- the client side ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

typedef struct client {
    int sock;
    uint8_t *map;
} client;

static int send_hello(int sock, int mfd)
{
    uint8_t hello[TF_SHM_HELLO_BYTES];
    tf_put32(hello, TF_SHM_MAGIC);
    tf_put32(hello + 4, TF_SHM_VERSION);
    tf_put64(hello + 8, RING);
    tf_put64(hello + 16, TF_SHM_TOTAL_BYTES(RING));
    struct iovec iov = {hello, sizeof hello};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    mh.msg_control = cm.buf;
    mh.msg_controllen = sizeof cm.buf;
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &mfd, sizeof(int));
    return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof hello ? 0 : -1;
}

/* Connects and handshakes: the server's status, or -1 locally. */
static int client_open(const char *path, client *cl)
{
    memset(cl, 0, sizeof *cl);
    size_t total = (size_t)TF_SHM_TOTAL_BYTES(RING);
    cl->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int mfd = memfd_create("ring", MFD_ALLOW_SEALING | MFD_CLOEXEC);
    if (cl->sock < 0 || mfd < 0 || connect(cl->sock, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        ftruncate(mfd, (off_t)total) != 0)
        return -1;
    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
    cl->map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    tf_put32(cl->map + TF_SHM_OFF_MAGIC, TF_SHM_MAGIC);
    tf_put32(cl->map + TF_SHM_OFF_VERSION, TF_SHM_VERSION);
    tf_put64(cl->map + TF_SHM_OFF_RING_BYTES, RING);
    int rc = send_hello(cl->sock, mfd);
    close(mfd);
    uint8_t rep[TF_SHM_HELLO_REPLY_BYTES];
    if (rc || recv(cl->sock, rep, sizeof rep, MSG_WAITALL) != (ssize_t)sizeof rep)
        return -1;
    return (int32_t)tf_le32(rep);
}

static void client_close(client *cl)
{
    munmap(cl->map, (size_t)TF_SHM_TOTAL_BYTES(RING));
    close(cl->sock);
}

static uint64_t *u64at(client *cl, size_t off)
{
    return (uint64_t *)(cl->map + off);
}

/* One frame through the ring and its echo back: 1 when the same bytes came back. */
static int ring_echo(client *cl, const char *msg)
{
    uint32_t n = (uint32_t)strlen(msg);
    tf_put32(cl->map + TF_SHM_OFF_REQ_RING, n);
    memcpy(cl->map + TF_SHM_OFF_REQ_RING + 4, msg, n);
    __atomic_store_n(u64at(cl, TF_SHM_OFF_REQ_HEAD), TF_SHM_FRAME_SPAN(n), __ATOMIC_RELEASE);
    uint32_t *seq = (uint32_t *)(cl->map + TF_SHM_OFF_REQ_SEQ);
    __atomic_fetch_add(seq, 1, __ATOMIC_SEQ_CST);
    tf_futex_wake(seq);
    int64_t end = now_ms() + T_DEADLINE_MS;
    while (__atomic_load_n(u64at(cl, TF_SHM_OFF_RESP_HEAD), __ATOMIC_ACQUIRE) == 0 &&
           now_ms() < end)
        sleep_ms(1);
    const uint8_t *f = cl->map + TF_SHM_OFF_REQ_RING + RING;
    return __atomic_load_n(u64at(cl, TF_SHM_OFF_RESP_HEAD), __ATOMIC_ACQUIRE) ==
               TF_SHM_FRAME_SPAN(n) &&
           tf_le32(f) == n && !memcmp(f + 4, msg, n) &&
           __atomic_load_n(u64at(cl, TF_SHM_OFF_REQ_TAIL), __ATOMIC_ACQUIRE) ==
               TF_SHM_FRAME_SPAN(n);
}

int main(void)
{
    char path[108];
    snprintf(path, sizeof path, "/tmp/tf-net-ring-%d.sock", (int)getpid());
    tfn_config cfg = {.name = "test_net_ring", .quiet = 1, .workers = 0};
    tfn_loop *lp = NULL;
    CHECK_RC(tfn_loop_open(&cfg, &lp), 0);
    CHECK_RC(tfn_listen_unix(lp, path, "shm", &hs_ops, 1), 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, run_loop, lp), 0);

    static client cl[NRINGS];
    for (int i = 0; i < TFN_RINGS_PER_PEER; i++)
        CHECK_RC(client_open(path, &cl[i]), 0);
    /* One process holds its share: the next ring is refused, its control socket is not. */
    CHECK_RC(client_open(path, &cl[NRINGS - 1]), TF_E_SHM_LIMIT);
    CHECK(ring_echo(&cl[0], "hello, ring"));
    CHECK(ring_echo(&cl[TFN_RINGS_PER_PEER - 1], "and the last one"));

    kill(getpid(), SIGTERM); /* the loop's signalfd takes it: a clean stop */
    pthread_join(th, NULL);
    tfn_counters ctr;
    tfn_loop_counters(lp, &ctr);
    CHECK_EQ(ctr.refused_rings, 1);
    tfn_loop_close(lp); /* joins every ring's thread */
    CHECK_EQ(__atomic_load_n(&ring_closes, __ATOMIC_RELAXED), TFN_RINGS_PER_PEER);
    CHECK_EQ(__atomic_load_n(&ring_other, __ATOMIC_RELAXED), 0);
    for (int i = 0; i < TFN_RINGS_PER_PEER; i++)
        CHECK_EQ(
            __atomic_load_n((uint32_t *)(cl[i].map + TF_SHM_OFF_SERVER_CLOSED), __ATOMIC_ACQUIRE),
            1);
    for (int i = 0; i < NRINGS; i++)
        client_close(&cl[i]);
    CHECK(access(path, F_OK) != 0);
    return tf_test_report();
}
