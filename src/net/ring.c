/* Ring connections: a thread per shared-memory ring, run by the layer (net.h, "shared-memory
 * rings"): the handshake's checks and the admission, the thread that takes request frames from
 * the request ring and puts replies into the response ring (docs/protocol.md, "Shared memory";
 * waiting as include/tollfree/shm.h, "Waiting", says), and the end, the reaping and the joining
 * of rings; it knows no opcode: a frame is bytes for ops->frame.
 *
 * The client owns the memfd and can write any byte of it at any time: every position and length
 * it writes is validated by the ring code (src/wire/shm_ring.c), and the memfd must be sealed
 * against shrinking so that no access can fault. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/net_private.h"
#include "tollfree/error.h"

static uint32_t *word(tfn_ring *r, size_t off)
{
    return (uint32_t *)(r->map + off);
}

void *tfn_ring_data(const tfn_ring *r)
{
    return r->data;
}

uint64_t tfn_ring_bytes(const tfn_ring *r)
{
    return r->ring_bytes;
}

/* The liveness check of every wait (about every TF_SHM_WAIT_NS while it sleeps). */
static int alive(void *arg)
{
    tfn_ring *r = arg;
    if (tfn_loop_stopping(r->lp))
        return TF_E_SHUTTING_DOWN;
    int end = __atomic_load_n(&r->end, __ATOMIC_ACQUIRE);
    if (end)
        return end;
    if (__atomic_load_n(word(r, TF_SHM_OFF_CLIENT_CLOSED), __ATOMIC_ACQUIRE))
        return TF_E_SHM_PEER_GONE;
    if (r->pid > 0 && kill(r->pid, 0) != 0 && errno == ESRCH)
        return TF_E_SHM_PEER_GONE;
    return 0;
}

/* Wakes the thread if it sleeps on the request ring. req_seq is the client's word: only wake,
 * never write it. A wake that races with the thread going to sleep is caught by its next
 * liveness check. */
static void wake(tfn_ring *r)
{
    tf_futex_wake(word(r, TF_SHM_OFF_REQ_SEQ));
}

/* Asks the ring to end (loop thread: a timer, the control socket closing). */
void tfn_ring_end(tfn_ring *r, int why)
{
    int none = 0;
    __atomic_compare_exchange_n(&r->end, &none, why, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    wake(r);
}

int tfn_ring_reply(tfn_ring *r, const void *head, size_t head_len, const struct iovec *segs,
                   int nseg)
{
    uint64_t len = head_len;
    for (int i = 0; i < nseg; i++)
        len += segs[i].iov_len;
    uint64_t span = TF_SHM_FRAME_SPAN(len - 4);
    uint8_t *dst;
    /* A client that stops reading its replies holds its ring: the stall timer ends the wait,
     * as it closes a socket connection whose peer does not read. */
    tfw_deadline none = tfw_deadline_in(0);
    __atomic_store_n(&r->phase, RING_WAIT_ROOM, __ATOMIC_RELAXED);
    int rc = tfw_ring_wait_room(&r->resp, span, &r->wait, alive, r, &none, &dst);
    __atomic_store_n(&r->phase, RING_BUSY, __ATOMIC_RELAXED);
    if (rc)
        return rc;
    memcpy(dst, head, head_len);
    uint64_t off = head_len;
    for (int i = 0; i < nseg; i++) {
        memcpy(dst + off, segs[i].iov_base, segs[i].iov_len);
        off += segs[i].iov_len;
    }
    /* req_tail moves before the reply is published (docs/protocol.md). */
    if (r->owed)
        tfw_ring_consume(&r->req, r->body_len);
    r->owed = 0;
    tfw_ring_publish(&r->resp, span);
    tfn_stat_add(r->lp->cfg.stat_bytes_out, (int64_t)len);
    return 0;
}

/* One request frame, through ops->frame; released here if frame() gave no reply. */
static int serve(tfn_ring *r, const uint8_t *frame, uint32_t body_len)
{
    r->body_len = body_len;
    r->owed = 1;
    tfn_stat_add(r->lp->cfg.stat_bytes_in, 4 + (int64_t)body_len);
    int rc = r->ops->frame(r, frame, body_len);
    if (r->owed)
        tfw_ring_consume(&r->req, body_len);
    r->owed = 0;
    __atomic_store_n(&r->frames, r->frames + 1, __ATOMIC_RELAXED);
    return rc;
}

/* Takes frames until the ring ends; returns why. */
static int take_frames(tfn_ring *r)
{
    for (;;) {
        const uint8_t *frame;
        uint32_t body_len;
        int rc = tfw_ring_peek(&r->req, r->max_body, &frame, &body_len);
        if (rc == 1) {
            rc = serve(r, frame, body_len);
            if (rc)
                return rc;
            continue;
        }
        if (rc < 0)
            return rc;
        /* Between frames: the idle timer ends a ring that waits too long, as it closes a
         * socket connection that sends nothing. */
        tfw_deadline none = tfw_deadline_in(0);
        __atomic_store_n(&r->phase, RING_WAIT_DATA, __ATOMIC_RELAXED);
        rc = tfw_ring_wait_data(&r->req, &r->wait, alive, r, &none);
        __atomic_store_n(&r->phase, RING_BUSY, __ATOMIC_RELAXED);
        if (rc)
            return rc;
    }
}

static const char *end_reason(int rc)
{
    switch (rc) {
    case TF_E_SHM_PEER_GONE:
        return "peer closed";
    case TF_E_SHM_CORRUPT:
        return "peer wrote an invalid ring position or length (dropped)";
    case TF_E_SHUTTING_DOWN:
        return "server shutting down";
    case RING_END_IDLE:
        return "idle timeout (--idle-timeout)";
    case RING_END_STALLED:
        return "stalled: the client stopped reading its replies (--stall-timeout)";
    default:
        return tf_strerror(rc);
    }
}

/* Tells the client (server_closed, and a wake if it sleeps), closes the control socket (the loop
 * then closes its connection), says why, and hands the ring to the loop for reaping. */
static void finish(tfn_ring *r, int rc)
{
    __atomic_store_n(word(r, TF_SHM_OFF_SERVER_CLOSED), 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(word(r, TF_SHM_OFF_RESP_SEQ), 1, __ATOMIC_SEQ_CST);
    tf_futex_wake(word(r, TF_SHM_OFF_RESP_SEQ));
    pthread_mutex_lock(&r->lock);
    if (r->ctl_fd >= 0)
        shutdown(r->ctl_fd, SHUT_RDWR);
    pthread_mutex_unlock(&r->lock);
    const char *why = end_reason(rc);
    if (rc == TF_E_SHM_CORRUPT)
        tfn_log_limited(r->lp, "shm ring of pid %d: error %d: %s", (int)r->pid, rc, why);
    char line[256];
    snprintf(line, sizeof line,
             "ring closed: %s; %llu-byte rings, client pid %d; waits: %llu slept, %llu contended, "
             "%llu vCPU stalls",
             why, (unsigned long long)r->ring_bytes, (int)r->pid,
             (unsigned long long)r->wait.sleeps, (unsigned long long)r->wait.contentions,
             (unsigned long long)r->wait.stalls);
    r->ops->on_close(r, line);
    tfn_loop *lp = r->lp;
    pthread_mutex_lock(&lp->dlock);
    r->dnext = lp->rdone;
    lp->rdone = r;
    pthread_mutex_unlock(&lp->dlock);
    uint64_t one = 1;
    ssize_t w = write(lp->done_efd, &one, sizeof one);
    (void)w;
}

static void *ring_main(void *arg)
{
    tfn_ring *r = arg;
    if (r->ops->on_start)
        r->ops->on_start(r);
    finish(r, take_frames(r));
    return NULL;
}

/* ---------------------------------------------------------------- opening */

/* The hello and the memfd as docs/protocol.md says: 0 or the status for the client. */
static int check_hello(int memfd, const uint8_t *hello, uint64_t *ring, uint64_t *total)
{
    uint32_t magic = tf_le32(hello), version = tf_le32(hello + 4);
    *ring = tf_le64(hello + 8);
    *total = tf_le64(hello + 16);
    uint64_t n = *ring;
    if (magic != TF_SHM_MAGIC || version != TF_SHM_VERSION)
        return TF_E_SHM_HANDSHAKE;
    if (n < TF_SHM_MIN_RING || n > TF_SHM_MAX_RING || (n & (n - 1)) ||
        *total != TF_SHM_TOTAL_BYTES(n))
        return TF_E_SHM_HANDSHAKE;
    if (memfd < 0)
        return TF_E_BAD_FD;
    int seals = fcntl(memfd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
        return TF_E_BAD_FD;
    struct stat st;
    if (fstat(memfd, &st) != 0 || (uint64_t)st.st_size != *total)
        return TF_E_SHM_HANDSHAKE;
    return 0;
}

/* The mapping, its control page checked against the hello. 0 or the status. */
static int map_ring(tfn_ring *r, int memfd, uint64_t ring, uint64_t total)
{
    void *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED)
        return TF_E_NOMEM;
    r->map = map;
    r->map_len = total;
    r->ring_bytes = ring;
    const uint8_t *pg = map;
    if (tf_le32(pg + TF_SHM_OFF_MAGIC) != TF_SHM_MAGIC ||
        tf_le32(pg + TF_SHM_OFF_VERSION) != TF_SHM_VERSION ||
        tf_le64(pg + TF_SHM_OFF_RING_BYTES) != ring)
        return TF_E_SHM_HANDSHAKE;
    return 0;
}

static void ring_free(tfn_ring *r)
{
    if (r->map) {
        munmap(r->map, r->map_len);
        tfn_mem_sub(r->lp, r->map_len);
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Admitted: counted as one more connection of its peer, with its mapping; linked. */
static int admit(tfn_ring *r, tfn_conn *ctl)
{
    tfn_loop *lp = r->lp;
    const char *why = NULL;
    if (!tfn_ring_admit(lp, r->peer, r->map_len, &why)) {
        char pn[64];
        tfn_peer_name(r->peer, pn, sizeof pn);
        tfn_log_limited(lp, "refusing a shm ring of %s: %s", pn, why);
        return TF_E_SHM_LIMIT;
    }
    tfn_mem_add(lp, r->map_len);
    if (r->peer[0])
        tfn_peer_inc(lp, r->peer);
    lp->nrings++;
    r->next = lp->rings;
    lp->rings = r;
    r->ctl = ctl;
    ctl->ring = r;
    r->moved_ns = tfn_now_ns();
    return 0;
}

/* Gives back what admit() took, but the mapping (ring_free's). Loop thread. */
static void unlink_ring(tfn_ring *r)
{
    tfn_loop *lp = r->lp;
    for (tfn_ring **p = &lp->rings; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    lp->nrings--;
    if (r->peer[0])
        tfn_peer_dec(lp, r->peer);
}

static tfn_ring *ring_new(tfn_conn *ctl, const tfn_ring_ops *ops, void *data, int spin,
                          uint64_t max_body)
{
    tfn_ring *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->lp = ctl->lp;
    r->ops = ops;
    r->data = data;
    r->max_body = max_body;
    r->ctl_fd = tfn_conn_fd(ctl);
    memcpy(r->peer, ctl->peer, TFN_PEER_KEY_BYTES);
    if (r->peer[0] == 1) /* a Unix peer: uid, then pid */
        memcpy(&r->pid, r->peer + 1 + sizeof(uid_t), sizeof r->pid);
    pthread_mutex_init(&r->lock, NULL);
    tfw_shm_waiter_init(&r->wait, spin);
    return r;
}

int tfn_ring_open(tfn_conn *ctl, int memfd, const uint8_t *hello, const tfn_ring_ops *ops,
                  void *data, int spin, uint64_t max_body)
{
    uint64_t ring, total;
    int rc = check_hello(memfd, hello, &ring, &total);
    if (rc)
        return rc;
    if (ctl->ring || ctl->lp->stopping)
        return ctl->ring ? TF_E_SHM_HANDSHAKE : TF_E_SHUTTING_DOWN;
    tfn_ring *r = ring_new(ctl, ops, data, spin, max_body);
    if (!r)
        return TF_E_NOMEM;
    rc = map_ring(r, memfd, ring, total);
    if (!rc)
        rc = admit(r, ctl);
    if (rc) {
        if (r->map) /* not counted yet: admit() failed or never ran */
            munmap(r->map, r->map_len);
        r->map = NULL;
        ring_free(r);
        return rc;
    }
    tfw_ring_setup(r->map, ring, 1, &r->resp, &r->req);
    __atomic_store_n(word(r, TF_SHM_OFF_SERVER_PID), (uint32_t)getpid(), __ATOMIC_RELEASE);
    if (pthread_create(&r->thr, NULL, ring_main, r) != 0) {
        ctl->ring = NULL;
        unlink_ring(r);
        ring_free(r);
        return TF_E_NOMEM;
    }
    return 0;
}

/* ---------------------------------------------------------------- the end */

/* The control connection closes (loop thread, before its fd is closed). */
void tfn_ring_detach(tfn_ring *r)
{
    pthread_mutex_lock(&r->lock);
    r->ctl_fd = -1;
    pthread_mutex_unlock(&r->lock);
    r->ctl->ring = NULL;
    r->ctl = NULL;
    if (r->reaped)
        ring_free(r);
    else
        tfn_ring_end(r, TF_E_SHM_PEER_GONE);
}

/* The rings whose thread ended (each put itself on rdone), taken off that list. */
static tfn_ring *take_done(tfn_loop *lp)
{
    pthread_mutex_lock(&lp->dlock);
    tfn_ring *list = lp->rdone;
    lp->rdone = NULL;
    pthread_mutex_unlock(&lp->dlock);
    return list;
}

/* Joins the rings whose thread ended and gives their slots back (loop thread). */
void tfn_rings_reap(tfn_loop *lp)
{
    tfn_ring *list = take_done(lp);
    while (list) {
        tfn_ring *r = list;
        list = r->dnext;
        pthread_join(r->thr, NULL);
        unlink_ring(r);
        r->reaped = 1;
        if (!r->ctl)
            ring_free(r);
    }
}

/* A stop: every ring's thread looks at once (its liveness check says shutting down). */
void tfn_rings_wake(tfn_loop *lp)
{
    for (tfn_ring *r = lp->rings; r; r = r->next)
        wake(r);
}

/* Joins every ring's thread (the loop is stopping: each ends at its next liveness check, after
 * the request it is answering) and reaps them. */
void tfn_rings_join(tfn_loop *lp)
{
    __atomic_store_n(&lp->stopping_flag, 1, __ATOMIC_RELEASE);
    for (tfn_ring *r = lp->rings; r; r = r->next) {
        wake(r);
        pthread_join(r->thr, NULL); /* it put itself on rdone before it ended */
    }
    tfn_ring *list = take_done(lp);
    while (list) {
        tfn_ring *r = list;
        list = r->dnext;
        unlink_ring(r);
        r->reaped = 1;
        if (!r->ctl)
            ring_free(r);
    }
}
