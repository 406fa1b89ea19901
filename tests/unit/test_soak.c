/* The soak and hostile suite for every server on the connection layer (src/net/): `tollfree
 * serve` and `tollfree engine serve`, each run as a real process over real sockets.
 *
 * For each server, while a checked well-behaved client makes round trips (and reconnects every
 * 50 of them, so that it needs a free slot again and again), and while 200 clients (Unix and
 * TCP) keep up a mixed load, a hostile driver runs rounds of:
 *   - 200 half-closing clients (a request, then shutdown(SHUT_WR)): each gets its reply and the
 *     close;
 *   - idle floods to the caps: one TCP peer (127.0.0.2) up to its per-peer cap, a second one
 *     (127.0.0.3) until only the reserve is left;
 *   - clients that never read their replies (big ECHOs / pipelined commands until the socket
 *     is full), and a few senders that trickle a frame one byte at a time;
 *   - shared-memory clients that fill their request ring and never consume a reply (serve);
 *   - garbage frames (zero-length frames; bad OFL1 envelopes);
 * then all of them leave. Afterwards the server's open fds and threads must be back at their
 * baseline and its resident memory within a stated slack of it, its peak within the memory bound
 * plus a stated constant, its log free of sanitizer reports, and SIGTERM must stop it cleanly.
 * It prints the load held, the good client's p50/p99/max and the peak memory.
 *
 * ctest runs a slice (one round per server, seconds). `make soak` runs it for minutes:
 * `test_soak SECONDS` (per server). No assertion depends on time except the one hang deadline
 * (TF_TEST_DEADLINE_SCALE); latencies are printed, never checked. */
#include <dirent.h>
#include <pthread.h>
#include <sys/mman.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/orderflow.h"
#include "tollfree/shm.h"

enum { SERVE, ENGINE };

#define MIXED 200    /* clients of the mixed load */
#define HALF 200     /* half-closing clients per round */
#define NEVER_READ 8 /* clients that never read, per round */
#define TRICKLE 4    /* senders of one byte at a time, per round */
#define SHM_STUCK 8  /* shm clients that stop consuming, per round (serve) */
#define MAX_CONNS 1024
#define RESERVE 64
#define PER_PEER 400
#define MAX_MEMORY_MB 256
/* Slack of the final resident memory over the baseline (allocator caches: glibc keeps freed
 * heap per thread arena), and the constant over --max-memory the peak may reach: per
 * connection 16-32 KiB of input buffer and small uncounted buffers, at MAX_CONNS. */
#define RSS_SLACK_MB 48
#define PEAK_CONST_MB 96
/* Under a sanitizer the allocator holds freed memory in quarantine (ASan): resident memory after
 * the soak says nothing about the server, so only the peak is checked; under TSan the shadow of
 * every touched page multiplies resident memory, so neither is. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHECK_RSS_RETURN 0
#else
#define CHECK_RSS_RETURN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CHECK_RSS_PEAK 0
#else
#define CHECK_RSS_PEAK 1
#endif

typedef struct target {
    int kind;
    pid_t pid;
    char dir[64], log[128], out[128], sock[128], shm[128], jdir[128];
    int tcp_port;
} target;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---------------------------------------------------------------- /proc */

/* ---------------------------------------------------------------- the server */

static int start(target *t, int kind)
{
    memset(t, 0, sizeof *t);
    t->kind = kind;
    if (t_mkdtemp(t->dir, sizeof t->dir))
        return -1;
    snprintf(t->log, sizeof t->log, "%s/log", t->dir);
    snprintf(t->out, sizeof t->out, "%s/out", t->dir);
    snprintf(t->sock, sizeof t->sock, "%s/s.sock", t->dir);
    snprintf(t->shm, sizeof t->shm, "%s/shm.sock", t->dir);
    snprintf(t->jdir, sizeof t->jdir, "%s/j", t->dir);
    char conns[16], reserve[16], peer[16], mem[32];
    snprintf(conns, sizeof conns, "%d", MAX_CONNS);
    snprintf(reserve, sizeof reserve, "%d", RESERVE);
    snprintf(peer, sizeof peer, "%d", PER_PEER);
    snprintf(mem, sizeof mem, "%llu", (unsigned long long)MAX_MEMORY_MB << 20);
    const char *argv[40];
    int n = 0;
    argv[n++] = t_bin();
    if (kind == ENGINE) {
        argv[n++] = "engine";
        argv[n++] = "serve";
        argv[n++] = "--journal";
        argv[n++] = t->jdir;
        argv[n++] = "--max-orders";
        argv[n++] = "100000";
        argv[n++] = "--durability";
        argv[n++] = "none";
    } else {
        argv[n++] = "serve";
        argv[n++] = "--shm";
        argv[n++] = t->shm;
    }
    const char *common[] = {"--unix",  t->sock,
                            "--tcp",   "127.0.0.1:0",
                            "--quiet", "--max-conns",
                            conns,     "--conn-reserve",
                            reserve,   "--max-conns-per-peer",
                            peer,      "--max-memory",
                            mem,       NULL};
    for (int i = 0; common[i]; i++)
        argv[n++] = common[i];
    argv[n] = NULL;
    t->pid = t_spawn(argv, t->log, t->out);
    if (t->pid < 0) {
        t->pid = 0;
        return -1;
    }
    return t_wait_listening(&t->pid, t->log, kind != ENGINE, &t->tcp_port, "server");
}

/* ---------------------------------------------------------------- sockets */

/* Closes with a reset: no TIME_WAIT left behind (a soak makes hundreds of thousands). */
static void close_rst(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* ---------------------------------------------------------------- the two protocols */

/* One request of a well-behaved client: a 64-byte ECHO (serve) or a NewLimit far from the
 * market followed by its cancel, both in one write (engine). */
static size_t make_request(int kind, uint64_t acct, uint64_t id, uint8_t *buf)
{
    if (kind == SERVE) {
        uint8_t payload[64];
        for (int i = 0; i < 64; i++)
            payload[i] = (uint8_t)(id * 31 + (uint64_t)i);
        return t_v2_frame(buf, TF_OP_ECHO, id, payload, sizeof payload);
    }
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit.account_id = acct;
    m.new_limit.client_order_id = id;
    m.new_limit.instrument_id = 1 + id % 4;
    m.new_limit.price = 1;
    m.new_limit.quantity.lo = 1;
    m.new_limit.side = TF_OFL_BUY;
    int a = tf_ofl_frame_encode(buf, TF_OFL_MAX_FRAME, &m);
    tf_ofl_msg c = {.kind = TF_OFL_CANCEL_BY_CLIENT};
    c.cancel_by_client.account_id = acct;
    c.cancel_by_client.client_order_id = id;
    int b = tf_ofl_frame_encode(buf + a, TF_OFL_MAX_FRAME, &c);
    return (size_t)a + (size_t)b;
}

/* Reads one OFL1 frame. */
static int read_ofl(int fd, tf_ofl_msg *m, int timeout_ms)
{
    uint8_t b[TF_OFL_MAX_FRAME];
    int rc = t_recv_exact(fd, b, 2, timeout_ms);
    if (rc)
        return rc;
    size_t flen = (size_t)b[0] | (size_t)b[1] << 8;
    if (flen < 9 || 2 + flen > sizeof b)
        return TF_E_PROTOCOL;
    if ((rc = t_recv_exact(fd, b + 2, flen, timeout_ms)))
        return rc;
    return tf_ofl_frame_decode(b, 2 + flen, m) == (int)(2 + flen) ? 0 : TF_E_PROTOCOL;
}

/* Reads and checks the reply to make_request. 1 right, 0 wrong or failed. */
static int check_reply(int kind, int fd, uint64_t id, uint64_t *last_seq)
{
    if (kind == SERVE) {
        uint8_t rb[128];
        long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
        if (bl != 12 + 64 || rb[0] != TF_OP_ECHO || tf_le64(rb + 4) != id)
            return 0;
        for (int i = 0; i < 64; i++)
            if (rb[12 + i] != (uint8_t)(id * 31 + (uint64_t)i))
                return 0;
        return 1;
    }
    /* Accepted + Heartbeat, then Canceled + Heartbeat; command_seq grows. */
    static const int want[4] = {TF_OFL_ACCEPTED, TF_OFL_HEARTBEAT, TF_OFL_CANCELED,
                                TF_OFL_HEARTBEAT};
    uint64_t order_id = 0;
    for (int i = 0; i < 4; i++) {
        tf_ofl_msg m;
        if (read_ofl(fd, &m, T_DEADLINE_MS) || m.kind != want[i])
            return 0;
        if (m.kind == TF_OFL_HEARTBEAT) {
            if (m.journal_seq <= *last_seq)
                return 0;
            *last_seq = m.journal_seq;
        } else if (m.kind == TF_OFL_ACCEPTED) {
            if (m.accepted.client_order_id != id)
                return 0;
            order_id = m.accepted.order_id;
        } else if (m.canceled.order_id != order_id) {
            return 0;
        }
    }
    return 1;
}

/* ---------------------------------------------------------------- the good client */

typedef struct good_state {
    const target *t;
    volatile int stop;
    uint64_t calls, wrong, refused;
    int64_t *lat_ns;
    size_t nlat, cap;
} good_state;

static void *good_main(void *arg)
{
    good_state *g = arg;
    const target *t = g->t;
    uint64_t id = 1, seq = 0;
    int fd = -1;
    while (!__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE)) {
        if (fd < 0 || g->calls % 50 == 0) {
            if (fd >= 0)
                close_rst(fd);
            /* Its own address: a peer with one connection, which the reserve admits. */
            fd = t_connect_tcp_from(t->tcp_port, "127.0.0.1");
            if (fd < 0) {
                g->refused++;
                t_sleep_ms(1);
                continue;
            }
        }
        uint8_t req[2 * TF_OFL_MAX_FRAME + 128];
        size_t n = make_request(t->kind, 7, id, req);
        int64_t t0 = now_ns();
        int ok = t_send_all(fd, req, n) == 0 && check_reply(t->kind, fd, id, &seq);
        int64_t dt = now_ns() - t0;
        id++;
        g->calls++;
        if (!ok) {
            /* A refused connection reads as EOF at once; anything else is a wrong answer. */
            g->wrong++;
            close_rst(fd);
            fd = -1;
            continue;
        }
        if (g->nlat == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 4096;
            g->lat_ns = realloc(g->lat_ns, g->cap * sizeof *g->lat_ns);
        }
        g->lat_ns[g->nlat++] = dt;
    }
    if (fd >= 0)
        close_rst(fd);
    return NULL;
}

/* ---------------------------------------------------------------- the mixed load */

typedef struct mixed_state {
    const target *t;
    volatile int stop;
    uint64_t calls, wrong;
} mixed_state;

static void *mixed_main(void *arg)
{
    mixed_state *m = arg;
    const target *t = m->t;
    int fds[MIXED];
    uint64_t seq[MIXED] = {0}, id = 1;
    for (int i = 0; i < MIXED; i++)
        fds[i] = i % 2 ? t_connect_unix(t->sock) : t_connect_tcp_from(t->tcp_port, "127.0.0.5");
    while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
        uint64_t first = id;
        for (int i = 0; i < MIXED; i++) {
            uint8_t req[2 * TF_OFL_MAX_FRAME + 128];
            size_t n = make_request(t->kind, 100 + (uint64_t)i, first + (uint64_t)i, req);
            if (fds[i] >= 0 && t_send_all(fds[i], req, n)) {
                close(fds[i]);
                fds[i] = -1;
            }
        }
        for (int i = 0; i < MIXED; i++) {
            if (fds[i] < 0) {
                m->wrong++;
                continue;
            }
            if (check_reply(t->kind, fds[i], first + (uint64_t)i, &seq[i]))
                m->calls++;
            else
                m->wrong++;
        }
        id += MIXED;
    }
    for (int i = 0; i < MIXED; i++)
        if (fds[i] >= 0)
            close_rst(fds[i]);
    return NULL;
}

/* ---------------------------------------------------------------- hostile clients */

typedef struct hostile_stats {
    uint64_t rounds, half_ok, half_bad, flood_a, flood_b, never_read, trickle, shm_stuck, garbage;
    int peak_fds;
} hostile_stats;

/* 200 clients each send a request and half-close; each must get its reply, then the close. */
static void half_closers(const target *t, hostile_stats *hs)
{
    int fds[HALF];
    for (int i = 0; i < HALF; i++) {
        fds[i] = i % 2 ? t_connect_unix(t->sock) : t_connect_tcp_from(t->tcp_port, "127.0.0.6");
        uint8_t req[2 * TF_OFL_MAX_FRAME + 128];
        size_t n = make_request(t->kind, 1000 + (uint64_t)i, 1 + (uint64_t)i, req);
        if (fds[i] < 0 || t_send_all(fds[i], req, n) || shutdown(fds[i], SHUT_WR)) {
            hs->half_bad++;
            if (fds[i] >= 0)
                close(fds[i]);
            fds[i] = -1;
        }
    }
    for (int i = 0; i < HALF; i++) {
        if (fds[i] < 0)
            continue;
        uint64_t seq = 0;
        int ok = check_reply(t->kind, fds[i], 1 + (uint64_t)i, &seq) &&
                 t_peer_closed(fds[i], T_DEADLINE_MS);
        ok ? hs->half_ok++ : hs->half_bad++;
        close(fds[i]);
    }
}

/* A raw shared-memory client that fills its request ring with ECHOs and never consumes a reply.
 * Returns the control socket (the mapping is left to the process), or -1 when refused. */
static int shm_stuck_client(const target *t)
{
    const uint64_t ring = TF_SHM_MIN_RING, total = TF_SHM_TOTAL_BYTES(ring);
    int sock = t_connect_unix(t->shm);
    int mfd = memfd_create("soak-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (sock < 0 || mfd < 0 || ftruncate(mfd, (off_t)total) != 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        if (sock >= 0)
            close(sock);
        if (mfd >= 0)
            close(mfd);
        return -1;
    }
    uint8_t *pg = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (pg == MAP_FAILED) {
        close(sock);
        close(mfd);
        return -1;
    }
    tf_put32(pg + TF_SHM_OFF_MAGIC, TF_SHM_MAGIC);
    tf_put32(pg + TF_SHM_OFF_VERSION, TF_SHM_VERSION);
    tf_put64(pg + TF_SHM_OFF_RING_BYTES, ring);
    tf_put32(pg + TF_SHM_OFF_CLIENT_PID, (uint32_t)getpid());
    uint8_t hello[TF_SHM_HELLO_BYTES];
    tf_put32(hello, TF_SHM_MAGIC);
    tf_put32(hello + 4, TF_SHM_VERSION);
    tf_put64(hello + 8, ring);
    tf_put64(hello + 16, total);
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {hello, sizeof hello};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &mfd, sizeof mfd);
    uint8_t rep[TF_SHM_HELLO_REPLY_BYTES];
    int ok = sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof hello &&
             t_recv_exact(sock, rep, sizeof rep, T_DEADLINE_MS) == 0 && tf_le32(rep) == 0;
    close(mfd);
    if (!ok) {
        munmap(pg, total);
        close(sock);
        return -1;
    }
    /* Requests until the request ring is full; the replies fill the response ring and stay. */
    uint8_t *req = pg + TF_SHM_OFF_REQ_RING;
    uint64_t head = 0;
    uint8_t fr[16 + 1000];
    for (uint64_t id = 1;; id++) {
        size_t n = t_v2_frame(fr, TF_OP_ECHO, id, fr + 16, 1000);
        uint64_t span = TF_SHM_FRAME_SPAN(n - 4);
        uint64_t tail = __atomic_load_n((uint64_t *)(pg + TF_SHM_OFF_REQ_TAIL), __ATOMIC_ACQUIRE);
        if (head - tail + span > ring - 8 || (head % ring) + span > ring)
            break; /* full (or it would wrap: enough for this client) */
        memcpy(req + head % ring, fr, n);
        head += span;
        __atomic_store_n((uint64_t *)(pg + TF_SHM_OFF_REQ_HEAD), head, __ATOMIC_RELEASE);
        __atomic_fetch_add((uint32_t *)(pg + TF_SHM_OFF_REQ_SEQ), 1, __ATOMIC_RELEASE);
        tf_futex_wake((uint32_t *)(pg + TF_SHM_OFF_REQ_SEQ));
    }
    munmap(pg, total);
    return sock;
}

/* One round of every attack; the clients are held for hold_ms, then they all leave. The
 * clients of the server's own UID come first: once the floods have filled the server to its
 * reserve, a peer holding 4 or more connections (that UID too) is refused. */
static void hostile_round(const target *t, hostile_stats *hs, int hold_ms)
{
    half_closers(t, hs);

    int *held = malloc(sizeof(int) * (2 * MAX_CONNS + 64));
    int trick[TRICKLE], nt = 0, nh = 0;
    /* Never-readers: requests until their socket is full. */
    size_t big = (size_t)4 << 20;
    uint8_t *req = calloc(1, big + 64);
    for (int i = 0; i < NEVER_READ; i++) {
        int fd = t_connect_unix(t->sock);
        if (fd < 0)
            continue;
        held[nh++] = fd;
        /* Whole frames until one would wait (100 ms): the server took what it could. */
        struct timeval tv = {0, 100000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        size_t n = 16 + big;
        if (t->kind == SERVE)
            tf_wire_put_header(req, (uint32_t)(12 + big), TF_OP_ECHO, 1);
        for (int k = 0; k < 4096; k++) {
            if (t->kind == ENGINE) /* 64 commands a write */
                for (int j = n = 0; j < 32; j++)
                    n += make_request(ENGINE, 5000 + (uint64_t)i, 1 + (uint64_t)(32 * k + j),
                                      req + n);
            if (t_send_all(fd, req, n))
                break; /* full (a partial frame stays partial: the server sees a stalled peer) */
        }
        hs->never_read++;
    }
    free(req);
    /* Tricklers: a frame's first bytes, one at a time. */
    for (int i = 0; i < TRICKLE; i++) {
        int fd = t_connect_unix(t->sock);
        if (fd < 0)
            continue;
        trick[nt++] = fd;
        uint8_t b = t->kind == SERVE ? 0x40 : 60;
        send(fd, &b, 1, MSG_NOSIGNAL);
        hs->trickle++;
    }
    /* Shared memory clients that stop consuming. */
    for (int i = 0; t->kind == SERVE && i < SHM_STUCK; i++) {
        int fd = shm_stuck_client(t);
        if (fd >= 0) {
            held[nh++] = fd;
            hs->shm_stuck++;
        }
    }
    /* Garbage: zero-length frames (answered, connection kept) / a bad envelope (closed). */
    {
        int fd = t_connect_unix(t->sock);
        if (fd >= 0) {
            uint8_t z[4 * 256] = {0};
            t_send_all(fd, z, t->kind == SERVE ? sizeof z : 2);
            held[nh++] = fd;
            hs->garbage++;
        }
    }
    /* Idle floods: peer A to its cap, peer B until only the reserve is left. */
    for (int i = 0; i < PER_PEER + 16; i++) {
        int fd = t_connect_tcp_from(t->tcp_port, "127.0.0.2");
        if (fd >= 0)
            held[nh++] = fd;
    }
    for (int i = 0; i < MAX_CONNS; i++) {
        int fd = t_connect_tcp_from(t->tcp_port, "127.0.0.3");
        if (fd >= 0)
            held[nh++] = fd;
    }
    hs->flood_a += PER_PEER + 16;
    hs->flood_b += MAX_CONNS;
    for (int64_t end = t_now_ms() + hold_ms; t_now_ms() < end;) {
        int fds = count_fds(t->pid);
        hs->peak_fds = fds > hs->peak_fds ? fds : hs->peak_fds;
        t_sleep_ms(20);
        for (int i = 0; i < nt; i++) { /* the tricklers' next byte */
            uint8_t b = 0;
            send(trick[i], &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
    }
    for (int i = 0; i < nt; i++)
        close_rst(trick[i]);
    for (int i = 0; i < nh; i++)
        close_rst(held[i]);
    free(held);
    hs->rounds++;
}

/* ---------------------------------------------------------------- one server */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Waits until the server holds at most `fds` fds and `threads` threads. */
static void wait_baseline(pid_t pid, int fds, long threads, int *fds_now, long *threads_now)
{
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    for (;;) {
        *fds_now = count_fds(pid);
        *threads_now = proc_status(pid, "Threads");
        if ((*fds_now <= fds && *threads_now <= threads) || t_now_ms() > end)
            break;
        t_sleep_ms(20);
    }
    if (*fds_now > fds || *threads_now > threads)
        tf_test_deadline_note("fds and threads back to baseline", T_DEADLINE_MS);
}

static void soak_one(int kind, int seconds)
{
    const char *name = kind == SERVE ? "tollfree serve" : "tollfree engine serve";
    target t;
    CHECK_RC(start(&t, kind), 0);
    if (!t.pid)
        return;
    /* The baseline: fds before any client; threads and memory after one warm-up round of the
     * mixed load and the good client (the workers start with the loop; first use of the
     * allocator's arenas, the journal's buffers). */
    int base_fds = count_fds(t.pid);
    {
        mixed_state m = {.t = &t, .stop = 1};
        mixed_main(&m);
        good_state g = {.t = &t, .stop = 0};
        pthread_t th;
        pthread_create(&th, NULL, good_main, &g);
        t_sleep_ms(100);
        __atomic_store_n(&g.stop, 1, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        free(g.lat_ns);
    }
    int warm_fds;
    long base_threads;
    wait_baseline(t.pid, base_fds, 1L << 30, &warm_fds, &base_threads);
    base_threads = proc_status(t.pid, "Threads");
    long base_rss = proc_status(t.pid, "VmRSS");

    good_state g = {.t = &t};
    mixed_state m = {.t = &t};
    pthread_t tg, tm;
    pthread_create(&tg, NULL, good_main, &g);
    pthread_create(&tm, NULL, mixed_main, &m);
    hostile_stats hs = {0};
    int64_t t0 = t_now_ms();
    do {
        hostile_round(&t, &hs, 500);
    } while (t_now_ms() - t0 < (int64_t)seconds * 1000);
    double secs = (double)(t_now_ms() - t0) / 1000.0;
    __atomic_store_n(&g.stop, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
    pthread_join(tg, NULL);
    pthread_join(tm, NULL);

    int fds_now;
    long threads_now;
    wait_baseline(t.pid, base_fds, base_threads, &fds_now, &threads_now);
    long rss = proc_status(t.pid, "VmRSS"), hwm = proc_status(t.pid, "VmHWM");

    qsort(g.lat_ns, g.nlat, sizeof *g.lat_ns, cmp_i64);
    double p50 = g.nlat ? (double)g.lat_ns[g.nlat / 2] / 1e3 : 0;
    double p99 = g.nlat ? (double)g.lat_ns[g.nlat * 99 / 100] / 1e3 : 0;
    double pmax = g.nlat ? (double)g.lat_ns[g.nlat - 1] / 1e3 : 0;
    double load[3] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = -1;
        fclose(la);
    }
    printf("soak %s: %.1f s, %llu rounds; load held: %.0f mixed calls/s from %d clients, "
           "%llu good calls, %llu half-closers ok, %llu/%llu idle-flood connects, %llu "
           "never-readers, %llu tricklers, %llu stuck shm clients, %llu garbage senders; "
           "server fds peak %d\n",
           name, secs, (unsigned long long)hs.rounds, (double)m.calls / secs, MIXED,
           (unsigned long long)g.calls, (unsigned long long)hs.half_ok,
           (unsigned long long)hs.flood_a, (unsigned long long)hs.flood_b,
           (unsigned long long)hs.never_read, (unsigned long long)hs.trickle,
           (unsigned long long)hs.shm_stuck, (unsigned long long)hs.garbage, hs.peak_fds);
    printf("soak %s: good client p50 %.0f us, p99 %.0f us, max %.0f us (%zu calls); "
           "RSS baseline %ld KiB, peak %ld KiB, after %ld KiB (--max-memory %d MiB); fds %d -> "
           "%d, threads %ld -> %ld; load average %.2f %.2f %.2f\n",
           name, p50, p99, pmax, g.nlat, base_rss, hwm, rss, MAX_MEMORY_MB, base_fds, fds_now,
           base_threads, threads_now, load[0], load[1], load[2]);
    fflush(stdout);

    CHECK(g.calls > 0);
    CHECK_EQ(g.wrong, 0);
    CHECK_EQ(g.refused, 0);
    CHECK_EQ(m.wrong, 0);
    CHECK(m.calls > 0);
    CHECK_EQ(hs.half_bad, 0);
    CHECK_EQ(hs.half_ok, hs.rounds * HALF);
    CHECK(fds_now <= base_fds);
    CHECK(threads_now <= base_threads);
    if (CHECK_RSS_RETURN)
        CHECK(rss - base_rss <= RSS_SLACK_MB * 1024);
    if (CHECK_RSS_PEAK)
        CHECK(hwm - base_rss <= (MAX_MEMORY_MB + PEAK_CONST_MB) * 1024);
    kill(t.pid, SIGTERM);
    CHECK_EQ(t_wait_exit(t.pid, T_DEADLINE_MS), 0);
    t.pid = 0;
    static char log[1 << 20];
    t_read_file(t.log, log, sizeof log);
    CHECK(strstr(log, "ThreadSanitizer") == NULL);
    CHECK(strstr(log, "AddressSanitizer") == NULL);
    CHECK(strstr(log, "runtime error") == NULL);
    if (strstr(log, "Sanitizer") || strstr(log, "runtime error"))
        fprintf(stderr, "%s log:\n%s\n", name, log);
    free(g.lat_ns);
    t_rm_rf(t.dir);
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan keeps freed blocks in a quarantine of 256 MiB by default before reusing them. The servers
 * give a resting connection's buffers back and take new ones when it talks again, so under ASan
 * the quarantine alone would fill past --max-memory and the peak would measure ASan, not the
 * server (release build: engine serve peaks ~24 MiB here). The servers this test starts get a
 * small quarantine; use-after-free detection stays on. */
static void small_quarantine(void)
{
    static char opts[512];
    const char *old = getenv("ASAN_OPTIONS");
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=16", old ? old : "",
             old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}
#else
static void small_quarantine(void)
{
}
#endif

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    small_quarantine();
    const char *env = getenv("TF_SOAK_SECONDS");
    int seconds = argc > 1 ? atoi(argv[1]) : env ? atoi(env) : 0;
    soak_one(SERVE, seconds);
    soak_one(ENGINE, seconds);
    return tf_test_report();
}
