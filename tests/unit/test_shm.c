/* The shared-memory transport against the real server: futex helpers, ring wrap-around, LOAD_FD
 * (sealed memfds mapped, not copied), handshake refusals, a hostile peer that writes garbage
 * positions and lengths, peers that die, the connection layer's limits and timers on rings,
 * and a server that dies under its client. */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/client.h"
#include "tollfree/shm.h"

static double *g_close;
static int64_t g_n;

/* ---- futex helpers ---- */

static uint32_t fx_word;
static void *fx_waker(void *arg)
{
    (void)arg;
    t_sleep_ms(50);
    __atomic_store_n(&fx_word, 1, __ATOMIC_SEQ_CST);
    tf_futex_wake(&fx_word);
    return NULL;
}

static void test_futex(void)
{
    uint32_t w = 5;
    CHECK_RC(tf_futex_wait(&w, 4, 1000000), 0); /* value differs: returns at once */
    /* The value stays and nobody wakes: the wait ends by its timeout, and says so. */
    CHECK_RC(tf_futex_wait(&w, 5, 20000000), -ETIMEDOUT);
    CHECK_EQ(w, 5);
    CHECK_RC(tf_futex_wait(NULL, 0, 0), TF_E_NULL_ARG);
    CHECK_RC(tf_futex_wake(NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_futex_wake(&w), 0);
    fx_word = 0;
    pthread_t th;
    pthread_create(&th, NULL, fx_waker, NULL);
    int rc;
    do
        rc = tf_futex_wait(&fx_word, 0, (int64_t)T_DEADLINE_MS * 1000000);
    while (rc == -EINTR || (rc == 0 && __atomic_load_n(&fx_word, __ATOMIC_SEQ_CST) == 0));
    CHECK_RC(rc, 0);
    CHECK_EQ(fx_word, 1);
    pthread_join(th, NULL);
    CHECK(strcmp(tf_strerror(TF_E_SHM_CORRUPT), "unknown error code") != 0);
}

static tf_client *open_shm(const tserver *ts, uint64_t ring)
{
    char url[256];
    t_url(ts, "shm", url, sizeof url);
    tf_client_opts o = {.timeout_ms = T_DEADLINE_MS, .ring_bytes = ring, .spin = 2000};
    tf_client *c = NULL;
    CHECK_RC(tf_client_open_opts(&c, url, &o), 0);
    return c;
}

/* ---- rings ---- */

static void test_wrap(const tserver *ts)
{
    tf_client *c = open_shm(ts, TF_SHM_MIN_RING);
    if (!c)
        return;
    uint8_t *in = malloc(70000), *out = malloc(70000);
    uint64_t s = 12345;
    for (int i = 0; i < 70000; i++)
        in[i] = (uint8_t)t_rng(&s);
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        size_t n = (size_t)(t_rng(&s) % 30000);
        if (i % 100 == 0)
            n = TF_SHM_MIN_RING - 8 - 16 - 7; /* the largest frame a 64 KiB ring carries */
        memset(out, 0, n);
        const uint8_t *src = in + (t_rng(&s) % 1000);
        bad += tf_client_echo(c, src, n, out) != 0 || memcmp(src, out, n) != 0;
    }
    CHECK_EQ(bad, 0);
    /* A frame larger than the ring: refused by the client, the connection stays usable. */
    CHECK_RC(tf_client_echo(c, in, TF_SHM_MIN_RING, out), TF_E_SHM_TOO_BIG);
    CHECK_RC(tf_client_echo(c, in, 100, out), 0);
    /* Many tiny calls: the per-bar pattern. */
    int64_t p[6] = {20, 10, 4, 10, 3, 5};
    uint64_t sid;
    CHECK_RC(tf_client_session_open(c, p, &sid), 0);
    for (int64_t i = 0; i < 30000; i++)
        bad += tf_client_session_bar(c, sid, g_close[i], NULL) != 0;
    CHECK_EQ(bad, 0);
    double ref_pnl;
    int64_t ref_tr;
    tf_sweep(g_close, 30000, p, 1, &ref_pnl, &ref_tr, NULL);
    tf_session_state st;
    CHECK_RC(tf_client_session_close(c, sid, &st), 0);
    CHECK_BITS(&st.pnl, &ref_pnl, 8);
    CHECK_EQ(st.trades, ref_tr);
    /* v1 frames travel the ring too (misaligned arrays: the server copies them). */
    double pnl;
    int64_t tr;
    CHECK_RC(tf_client_v1_sweep(c, g_close, 5000, p, 1, &pnl, &tr), 0);
    tf_sweep(g_close, 5000, p, 1, &ref_pnl, &ref_tr, NULL);
    CHECK_BITS(&pnl, &ref_pnl, 8);
    CHECK_EQ(tr, ref_tr);
    tf_client_close(c);
    free(in);
    free(out);
}

static int conc_bad;
static void *conc_main(void *arg)
{
    const tserver *ts = arg;
    char url[256];
    t_url(ts, "shm", url, sizeof url);
    tf_client *c;
    if (t_client_open(&c, url)) {
        __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    int64_t p[6] = {12, 6, 3, 6, 2, 3};
    uint64_t sid;
    int bad = tf_client_session_open(c, p, &sid) != 0;
    for (int i = 0; i < 2000; i++) {
        uint64_t v = (uint64_t)i * 77, back = 0;
        bad += tf_client_echo(c, &v, 8, &back) != 0 || back != v;
        bad += tf_client_session_bar(c, sid, g_close[i], NULL) != 0;
    }
    double ref_pnl;
    int64_t ref_tr;
    tf_sweep(g_close, 2000, p, 1, &ref_pnl, &ref_tr, NULL);
    tf_session_state st;
    bad += tf_client_session_query(c, sid, &st) != 0 || memcmp(&st.pnl, &ref_pnl, 8) ||
           st.trades != ref_tr;
    tf_client_close(c);
    __atomic_add_fetch(&conc_bad, bad, __ATOMIC_RELAXED);
    return NULL;
}

static void test_concurrent(const tserver *ts)
{
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, conc_main, (void *)ts);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(conc_bad, 0);
}

/* ---- LOAD_FD ---- */

static int memfd_with(const double *x, uint64_t n, unsigned seals, size_t extra)
{
    int fd = memfd_create("t", MFD_ALLOW_SEALING);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, (off_t)(8 * n + extra)) == 0);
    CHECK(pwrite(fd, x, 8 * n, 0) == (ssize_t)(8 * n));
    if (seals)
        CHECK(fcntl(fd, F_ADD_SEALS, seals) == 0);
    return fd;
}

static void test_load_fd(const tserver *ts)
{
    char url[256];
    t_url(ts, "unix", url, sizeof url);
    tf_client *u;
    CHECK_RC(t_client_open(&u, url), 0);
    tf_client *s = open_shm(ts, 0);
    if (!u || !s)
        return;
    const unsigned all = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    int64_t p[12] = {50, 25, 7, 25, 8, 12, 9, 5, 3, 5, 2, 3};
    double ref_pnl[2], pnl[2];
    int64_t ref_tr[2], tr[2];
    tf_sweep(g_close + 100, 40000, p, 2, ref_pnl, ref_tr, NULL);
    /* A sealed memfd on the unix socket: mapped, and the same handle as a copy-LOAD. */
    int fd = memfd_with(g_close + 100, 40000, all, 0);
    uint64_t h1, h2;
    int created;
    CHECK_RC(tf_client_load_fd(u, fd, 40000, &h1, &created), 0);
    CHECK_EQ(created, 1);
    close(fd);
    CHECK_RC(tf_client_sweep(u, h1, p, 2, pnl, tr), 0);
    CHECK_BITS(pnl, ref_pnl, 16);
    CHECK_BITS(tr, ref_tr, 16);
    CHECK_RC(tf_client_load(s, g_close + 100, 40000, &h2, &created), 0); /* memfd via shm */
    CHECK_EQ(h2, h1);
    CHECK_EQ(created, 0);
    CHECK_RC(tf_client_sweep(s, h2, p, 2, pnl, tr), 0);
    CHECK_BITS(pnl, ref_pnl, 16);
    CHECK_RC(tf_client_drop(s, h2), 0);
    /* A bigger memfd than needed is fine (n_bars decides). */
    fd = memfd_with(g_close, 1000, all, 4096);
    CHECK_RC(tf_client_load_fd(s, fd, 1000, &h1, NULL), 0);
    close(fd);
    CHECK_RC(tf_client_drop(s, h1), 0);
    /* Refusals: unsealed, partly sealed, too small, not a memfd, tcp. */
    fd = memfd_with(g_close, 1000, 0, 0);
    CHECK_RC(tf_client_load_fd(u, fd, 1000, &h1, NULL), TF_E_BAD_FD);
    CHECK(strstr(tf_client_error_message(u), "SEAL") != NULL);
    close(fd);
    fd = memfd_with(g_close, 1000, F_SEAL_SHRINK | F_SEAL_GROW, 0);
    CHECK_RC(tf_client_load_fd(s, fd, 1000, &h1, NULL), TF_E_BAD_FD);
    close(fd);
    fd = memfd_with(g_close, 1000, all, 0);
    CHECK_RC(tf_client_load_fd(u, fd, 1001, &h1, NULL), TF_E_BAD_FD);
    close(fd);
    char path[160];
    snprintf(path, sizeof path, "%s/plain", ts->dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(pwrite(fd, g_close, 8000, 0) == 8000);
    CHECK_RC(tf_client_load_fd(u, fd, 1000, &h1, NULL), TF_E_BAD_FD);
    close(fd);
    unlink(path);
    char tcp[64];
    t_url(ts, "tcp", tcp, sizeof tcp);
    tf_client *t;
    CHECK_RC(t_client_open(&t, tcp), 0);
    fd = memfd_with(g_close, 10, all, 0);
    CHECK_RC(tf_client_load_fd(t, fd, 10, &h1, NULL), TF_E_BAD_FD);
    close(fd);
    tf_client_close(t);
    /* Both connections are still fine. */
    CHECK_RC(tf_client_echo(u, "u", 1, pnl), 0);
    CHECK_RC(tf_client_echo(s, "s", 1, pnl), 0);
    tf_client_close(u);
    tf_client_close(s);
}

/* ---- a raw, possibly hostile, shm peer ---- */

typedef struct rawshm {
    int sock;
    uint8_t *map;
    uint64_t ring;
    size_t total;
} rawshm;

enum { RAW_OK = 0, RAW_NO_FD = 1, RAW_NO_SEAL = 2, RAW_BAD_MAGIC = 4, RAW_BAD_SIZE = 8 };

/* Connects and handshakes; returns the server's status (or -1 locally). */
static int raw_open(const tserver *ts, rawshm *r, uint64_t ring, int flags)
{
    memset(r, 0, sizeof *r);
    r->ring = ring;
    r->total = (size_t)TF_SHM_TOTAL_BYTES(ring);
    r->sock = t_connect_unix(ts->shm_path);
    if (r->sock < 0)
        return -1;
    int mfd = memfd_create("raw", MFD_ALLOW_SEALING);
    if (ftruncate(mfd, (off_t)r->total) != 0)
        return -1;
    if (!(flags & RAW_NO_SEAL))
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
    r->map = mmap(NULL, r->total, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    tf_put32(r->map + TF_SHM_OFF_MAGIC, TF_SHM_MAGIC);
    tf_put32(r->map + TF_SHM_OFF_VERSION, TF_SHM_VERSION);
    tf_put64(r->map + TF_SHM_OFF_RING_BYTES, ring);
    uint8_t hello[24];
    tf_put32(hello, flags & RAW_BAD_MAGIC ? 0x12345678u : TF_SHM_MAGIC);
    tf_put32(hello + 4, TF_SHM_VERSION);
    tf_put64(hello + 8, ring);
    tf_put64(hello + 16, flags & RAW_BAD_SIZE ? r->total + 4096 : r->total);
    struct iovec iov = {hello, sizeof hello};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (!(flags & RAW_NO_FD)) {
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof cm.buf;
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &mfd, sizeof(int));
    }
    ssize_t w = sendmsg(r->sock, &mh, MSG_NOSIGNAL);
    close(mfd);
    if (w != (ssize_t)sizeof hello)
        return -1;
    uint8_t rep[8];
    if (t_recv_exact(r->sock, rep, 8, T_DEADLINE_MS))
        return -1;
    return (int32_t)tf_le32(rep);
}

static void raw_close(rawshm *r)
{
    if (r->map)
        munmap(r->map, r->total);
    if (r->sock >= 0)
        close(r->sock);
}

static uint64_t *u64at(rawshm *r, size_t off)
{
    return (uint64_t *)(r->map + off);
}

static uint32_t *u32at(rawshm *r, size_t off)
{
    return (uint32_t *)(r->map + off);
}

static void raw_publish(rawshm *r, uint64_t head)
{
    __atomic_store_n(u64at(r, TF_SHM_OFF_REQ_HEAD), head, __ATOMIC_RELEASE);
    __atomic_fetch_add(u32at(r, TF_SHM_OFF_REQ_SEQ), 1, __ATOMIC_SEQ_CST);
    tf_futex_wake(u32at(r, TF_SHM_OFF_REQ_SEQ));
}

/* The server gave up on this peer: server_closed set and the control socket closed. */
static int raw_dropped(rawshm *r)
{
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    while (!__atomic_load_n(u32at(r, TF_SHM_OFF_SERVER_CLOSED), __ATOMIC_ACQUIRE) &&
           t_now_ms() < end)
        t_sleep_ms(2);
    return __atomic_load_n(u32at(r, TF_SHM_OFF_SERVER_CLOSED), __ATOMIC_ACQUIRE) &&
           t_peer_closed(r->sock, T_DEADLINE_MS);
}

/* One valid echo through the raw rings, to move positions forward. */
static int raw_echo(rawshm *r, uint64_t *req_head, uint64_t *resp_tail)
{
    uint8_t *ring = r->map + TF_SHM_OFF_REQ_RING;
    uint64_t off = *req_head & (r->ring - 1);
    size_t n = t_v2_frame(ring + off, TF_OP_ECHO, 9, "raw!", 4);
    *req_head += (n + 7) & ~(size_t)7;
    raw_publish(r, *req_head);
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    while (__atomic_load_n(u64at(r, TF_SHM_OFF_RESP_HEAD), __ATOMIC_ACQUIRE) == *resp_tail &&
           t_now_ms() < end)
        sched_yield();
    uint64_t h = __atomic_load_n(u64at(r, TF_SHM_OFF_RESP_HEAD), __ATOMIC_ACQUIRE);
    uint64_t pos = *resp_tail;
    const uint8_t *resp = r->map + TF_SHM_OFF_REQ_RING + r->ring;
    if (h > pos && tf_le32(resp + (pos & (r->ring - 1))) == TF_SHM_WRAP)
        pos += r->ring - (pos & (r->ring - 1)); /* the server wrapped its reply */
    const uint8_t *f = resp + (pos & (r->ring - 1));
    int ok = h == pos + 24 && tf_le32(f) == 16 && !memcmp(f + 16, "raw!", 4);
    *resp_tail = h;
    __atomic_store_n(u64at(r, TF_SHM_OFF_RESP_TAIL), h, __ATOMIC_RELEASE);
    return ok;
}

static void check_others_served(const tserver *ts)
{
    tf_client *c = open_shm(ts, 0);
    if (c) {
        uint64_t v = 99, back = 0;
        CHECK_RC(tf_client_echo(c, &v, 8, &back), 0);
        CHECK_EQ(back, 99);
        tf_client_close(c);
    }
    CHECK(t_alive(ts));
}

static void test_handshake_refusals(const tserver *ts)
{
    rawshm r;
    CHECK_RC(raw_open(ts, &r, TF_SHM_MIN_RING, RAW_BAD_MAGIC), TF_E_SHM_HANDSHAKE);
    CHECK(t_peer_closed(r.sock, T_DEADLINE_MS));
    raw_close(&r);
    CHECK_RC(raw_open(ts, &r, TF_SHM_MIN_RING, RAW_BAD_SIZE), TF_E_SHM_HANDSHAKE);
    raw_close(&r);
    CHECK_RC(raw_open(ts, &r, TF_SHM_MIN_RING, RAW_NO_FD), TF_E_BAD_FD);
    raw_close(&r);
    CHECK_RC(raw_open(ts, &r, TF_SHM_MIN_RING, RAW_NO_SEAL), TF_E_BAD_FD);
    raw_close(&r);
    CHECK_RC(raw_open(ts, &r, TF_SHM_MIN_RING * 3, 0), TF_E_SHM_HANDSHAKE); /* not a power of 2 */
    raw_close(&r);
    CHECK_RC(raw_open(ts, &r, 4096, 0), TF_E_SHM_HANDSHAKE); /* below the minimum */
    raw_close(&r);
    /* A half-sent handshake that then goes away. */
    int fd = t_connect_unix(ts->shm_path);
    t_send_all(fd, "TFSM", 4);
    close(fd);
    CHECK_RC(raw_open(ts, &r, TF_SHM_MIN_RING, 0), 0);
    uint64_t h = 0, t = 0;
    CHECK(raw_echo(&r, &h, &t));
    CHECK(raw_echo(&r, &h, &t));
    raw_close(&r);
    check_others_served(ts);
}

static void test_hostile_peer(const tserver *ts)
{
    const uint64_t R = TF_SHM_MIN_RING;
    rawshm r;
    uint64_t h, t;
    /* 1: head far ahead of tail. */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    raw_publish(&r, 3 * R);
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 2: an unaligned head. */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    raw_publish(&r, 5);
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 3: a body_len beyond the published bytes. */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    tf_put32(r.map + TF_SHM_OFF_REQ_RING, 1000);
    raw_publish(&r, 8);
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 4: a body_len that would run past the ring end (published as if whole). */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    tf_put32(r.map + TF_SHM_OFF_REQ_RING, (uint32_t)R);
    raw_publish(&r, R);
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 5: a wrap marker with the skip not published. */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    tf_put32(r.map + TF_SHM_OFF_REQ_RING, TF_SHM_WRAP);
    raw_publish(&r, 8);
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 6: a head that moves backwards after valid traffic. */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    h = t = 0;
    CHECK(raw_echo(&r, &h, &t));
    raw_publish(&r, 0);
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 7: a response tail beyond the response head. */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    h = t = 0;
    CHECK(raw_echo(&r, &h, &t));
    __atomic_store_n(u64at(&r, TF_SHM_OFF_RESP_TAIL), 1u << 20, __ATOMIC_RELEASE);
    uint8_t *ring = r.map + TF_SHM_OFF_REQ_RING;
    size_t n = t_v2_frame(ring + h, TF_OP_ECHO, 10, "x", 1);
    raw_publish(&r, h + ((n + 7) & ~(size_t)7));
    CHECK(raw_dropped(&r));
    raw_close(&r);
    /* 8: a valid wrap, then garbage inside the frame body (a malformed request is answered with
     * an error frame, not a drop). */
    CHECK_RC(raw_open(ts, &r, R, 0), 0);
    ring = r.map + TF_SHM_OFF_REQ_RING;
    h = t = 0;
    for (int i = 0;
         i < 6000 && !__atomic_load_n(u32at(&r, TF_SHM_OFF_SERVER_CLOSED), __ATOMIC_RELAXED); i++) {
        if ((h & (R - 1)) + 24 > R) {
            tf_put32(ring + (h & (R - 1)), TF_SHM_WRAP);
            h += R - (h & (R - 1));
        }
        if (!raw_echo(&r, &h, &t)) {
            fprintf(stderr, "raw echo %d failed at h=%llu t=%llu\n", i, (unsigned long long)h,
                    (unsigned long long)t);
            break;
        }
    }
    CHECK(h > 2 * R); /* wrapped at least twice */
    n = t_v2_frame(ring + (h & (R - 1)), 0x66, 11, "zz", 2);
    raw_publish(&r, h + ((n + 7) & ~(size_t)7));
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    while (__atomic_load_n(u64at(&r, TF_SHM_OFF_RESP_HEAD), __ATOMIC_ACQUIRE) == t &&
           t_now_ms() < end)
        t_sleep_ms(1);
    const uint8_t *f = r.map + TF_SHM_OFF_REQ_RING + R + (t & (R - 1));
    if (tf_le32(f) == TF_SHM_WRAP)
        f = r.map + TF_SHM_OFF_REQ_RING + R;
    CHECK_EQ(f[4], TF_OP_ERROR);
    CHECK_EQ((int32_t)tf_le32(f + 16), TF_E_UNKNOWN_OPCODE);
    CHECK_EQ(__atomic_load_n(u32at(&r, TF_SHM_OFF_SERVER_CLOSED), __ATOMIC_RELAXED), 0);
    raw_close(&r);
    check_others_served(ts);
}

/* Sends four 20 KiB echoes on a 64 KiB raw ring and never reads a reply: the fourth reply never
 * finds room. Each request is written only once the server has taken what it would overwrite
 * (a peer that overwrites unread requests is dropped as corrupt, not stalled). */
static void raw_fill_replies(rawshm *r)
{
    uint8_t *ring = r->map + TF_SHM_OFF_REQ_RING;
    uint64_t mask = r->ring - 1, span = (16 + 20000 + 7) & ~(uint64_t)7, h = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t at = h;
        if ((at & mask) + span > r->ring)
            at += r->ring - (at & mask); /* a wrap marker at h */
        int64_t end = t_now_ms() + T_DEADLINE_MS;
        while (at + span - __atomic_load_n(u64at(r, TF_SHM_OFF_REQ_TAIL), __ATOMIC_ACQUIRE) >
                   r->ring &&
               t_now_ms() < end)
            t_sleep_ms(1);
        if (at != h)
            tf_put32(ring + (h & mask), TF_SHM_WRAP);
        tf_wire_put_header(ring + (at & mask), 12 + 20000, TF_OP_ECHO, 1);
        h = at + span;
        raw_publish(r, h);
    }
}

/* A peer that sends requests but never consumes replies, then dies; a peer killed while the
 * server sleeps on its ring; a peer killed in the middle of writing. The server thread notices
 * each (log line) and everyone else is served. */
static void test_dying_peers(const tserver *ts)
{
    static char log[1 << 20];
    t_read_file(ts->log, log, sizeof log);
    int closed0 = 0;
    for (const char *p = log; (p = strstr(p, "ring closed")); p++)
        closed0++;
    for (int mode = 0; mode < 3; mode++) {
        pid_t pid = fork();
        if (pid == 0) {
            t_child_detach(0);
            rawshm r;
            if (raw_open(ts, &r, TF_SHM_MIN_RING, 0) != 0)
                _exit(3);
            if (mode == 0)
                raw_fill_replies(&r); /* 20 KiB echoes, never read */
            else if (mode == 2)
                tf_put32(r.map + TF_SHM_OFF_REQ_RING, 5000); /* half a frame, not published */
            for (;;)
                pause();
        }
        t_sleep_ms(150);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    /* Each thread noticed its peer is gone. */
    int closed = 0;
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; t_now_ms() < end; t_sleep_ms(20)) {
        t_read_file(ts->log, log, sizeof log);
        closed = 0;
        for (const char *p = log; (p = strstr(p, "ring closed")); p++)
            closed++;
        if (closed >= closed0 + 3)
            break;
    }
    CHECK(closed >= closed0 + 3);
    check_others_served(ts);
}

/* A ring is a connection of the connection layer (src/net/ring.c): one more connection of its
 * control socket's process under --max-conns-per-peer, its mapping in --max-memory, closed by
 * the same stall timer, its slot given back when it ends. Before the ring moved into the layer
 * the ring was counted by none of these (a fourth connection of the process was taken, a
 * 2 MiB ring was mapped under a 1 MiB --max-memory). */
static void test_ring_limits(void)
{
    tserver ts;
    const char *extra[] = {"--max-conns-per-peer", "2", "--stall-timeout", "1", NULL};
    CHECK_RC(t_start(&ts, extra), 0);
    if (ts.pid) {
        rawshm r;
        CHECK_RC(raw_open(&ts, &r, TF_SHM_MIN_RING, 0), 0); /* the control socket and the ring */
        int u = t_connect_unix(ts.unix_path);
        CHECK(!t_echo_ok(u, 1)); /* a third connection of this process: refused */
        close(u);
        /* Replies never read: the stall timer ends the ring, and its slot comes back. */
        raw_fill_replies(&r);
        CHECK(raw_dropped(&r));
        raw_close(&r);
        int ok = 0;
        for (int64_t end = t_now_ms() + T_DEADLINE_MS; !ok && t_now_ms() < end; t_sleep_ms(20)) {
            u = t_connect_unix(ts.unix_path);
            ok = t_echo_ok(u, 2);
            close(u);
        }
        CHECK(ok);
        static char log[1 << 16];
        t_read_file(ts.log, log, sizeof log);
        CHECK(strstr(log, "stalled: the client stopped reading its replies") != NULL);
        CHECK_EQ(t_stop(&ts), 0);
    }
    t_cleanup(&ts);
    const char *small[] = {"--max-memory", "1M", NULL};
    CHECK_RC(t_start(&ts, small), 0);
    if (ts.pid) {
        rawshm r;
        CHECK_RC(raw_open(&ts, &r, (uint64_t)1 << 20, 0), TF_E_SHM_LIMIT); /* 2 MiB mapped */
        raw_close(&r);
        CHECK_RC(raw_open(&ts, &r, TF_SHM_MIN_RING, 0), 0); /* 132 KiB fits */
        uint64_t h = 0, t = 0;
        CHECK(raw_echo(&r, &h, &t));
        raw_close(&r);
        CHECK_EQ(t_stop(&ts), 0);
    }
    t_cleanup(&ts);
}

/* The server dies under a shm client: the client gets an error promptly, never hangs. */
static void test_server_dies(void)
{
    tserver ts2;
    CHECK_RC(t_start(&ts2, NULL), 0);
    tf_client *c = open_shm(&ts2, 0);
    if (c) {
        uint64_t sid;
        int64_t p[6] = {12, 6, 3, 6, 2, 3};
        CHECK_RC(tf_client_session_open(c, p, &sid), 0);
        kill(ts2.pid, SIGKILL);
        waitpid(ts2.pid, NULL, 0);
        ts2.pid = 0;
        /* Noticed, not timed out: a timeout would return -ETIMEDOUT (after the deadline). */
        int rc = tf_client_session_bar(c, sid, 1.0, NULL);
        CHECK_RC(rc, TF_E_SHM_PEER_GONE);
        CHECK_RC(tf_client_session_bar(c, sid, 1.0, NULL), -ENOTCONN);
        tf_client_close(c);
    }
    t_cleanup(&ts2);
    /* And a server stopped by SIGTERM tells its shm clients. */
    CHECK_RC(t_start(&ts2, NULL), 0);
    c = open_shm(&ts2, 0);
    if (c) {
        char back[4];
        CHECK_RC(tf_client_echo(c, "a", 1, back), 0);
        CHECK_EQ(t_stop(&ts2), 0);
        int rc = tf_client_echo(c, "a", 1, back);
        CHECK(rc == TF_E_SHM_PEER_GONE);
        tf_client_close(c);
    }
    t_cleanup(&ts2);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    g_close = t_default_close(&g_n);
    CHECK(g_close != NULL);
    if (!g_close)
        return tf_test_report();
    test_futex();
    tserver ts;
    const char *extra[] = {"--spin", "2000", NULL};
    CHECK_RC(t_start(&ts, extra), 0);
    if (ts.pid) {
        test_wrap(&ts);
        test_concurrent(&ts);
        test_load_fd(&ts);
        test_handshake_refusals(&ts);
        test_hostile_peer(&ts);
        test_dying_peers(&ts);
        CHECK(t_alive(&ts));
        CHECK_EQ(t_stop(&ts), 0);
        CHECK(access(ts.shm_path, F_OK) != 0);
    }
    t_cleanup(&ts);
    test_ring_limits();
    test_server_dies();
    free(g_close);
    return tf_test_report();
}
