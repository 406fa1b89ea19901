/* The shared-memory transport, server side: handshake checks and one thread per connection that
 * consumes the request ring and produces the response ring (docs/protocol.md, "Shared memory"),
 * answering each request through the one request pipeline (pipeline.c) with the ring as its
 * sink, and waiting as include/tollfree/shm.h says ("Waiting": an adaptive spin, a yield, the
 * futex).
 *
 * The client owns the memfd and can write any byte of it at any time: every position and length
 * it writes is validated by the ring code, the fixed part and the params of a request are copied
 * out before they are checked, and the memfd must be sealed against shrinking so that no access
 * can fault. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

struct srv_shm {
    srv *s;
    uint8_t *map;
    size_t map_len;
    uint64_t ring_bytes;
    pid_t pid;
    pthread_mutex_t lock; /* guards sock_open */
    int sock_fd;
    int sock_open;
    int peer_gone; /* atomic: the control socket closed */
    int refs;      /* atomic: the thread + the control socket's connection */
    srv_ctx ctx;
    tfw_ring_cons req;
    tfw_ring_prod resp;
    tfw_shm_waiter wait; /* how this thread waits for requests and for room (shm_ring.c) */
    uint32_t body_len;   /* of the request being answered (ring_emit releases it) */
    srv_reply rep;
    char ring_what[48]; /* "N-byte ring", for SHM_TOO_BIG messages */
};

static void shm_unref(srv_shm *m)
{
    if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    munmap(m->map, m->map_len);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static uint32_t *word(srv_shm *m, size_t off)
{
    return (uint32_t *)(m->map + off);
}

static int alive(void *arg)
{
    srv_shm *m = arg;
    if (__atomic_load_n(&m->s->stop, __ATOMIC_ACQUIRE))
        return TF_E_SHUTTING_DOWN;
    if (__atomic_load_n(&m->peer_gone, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(word(m, TF_SHM_OFF_CLIENT_CLOSED), __ATOMIC_ACQUIRE))
        return TF_E_SHM_PEER_GONE;
    if (m->pid > 0 && kill(m->pid, 0) != 0 && errno == ESRCH)
        return TF_E_SHM_PEER_GONE;
    return 0;
}

static int is_array_op(uint8_t op)
{
    return tfw_op_has(op, TFW_OP_CLOSES);
}

/* Rings one client process may hold: a quarter of TF_SERVER_MAX_SHM, so that one process
 * opening rings in a loop leaves room for others (the socket file is 0600: every client is its
 * owner's or root's, so a per-UID cap would not separate them; the process does). */
#define MAX_SHM_PER_PID (TF_SERVER_MAX_SHM / 4)

/* Rings held per (server, client pid), for every server of this process. */
static struct {
    const srv *s;
    pid_t pid;
    int n;
} peers[4 * TF_SERVER_MAX_SHM];
static pthread_mutex_t peers_mu = PTHREAD_MUTEX_INITIALIZER;

/* Takes (delta +1) or gives back (-1) one ring of pid's; taking fails past MAX_SHM_PER_PID. */
static int peer_ring(const srv *s, pid_t pid, int delta)
{
    int rc = TF_E_SHM_LIMIT, free_slot = -1;
    size_t n = sizeof peers / sizeof peers[0];
    pthread_mutex_lock(&peers_mu);
    for (size_t i = 0; i < n; i++) {
        if (peers[i].n && peers[i].s == s && peers[i].pid == pid) {
            if (delta < 0 || peers[i].n < MAX_SHM_PER_PID) {
                peers[i].n += delta;
                rc = 0;
            }
            pthread_mutex_unlock(&peers_mu);
            return rc;
        }
        if (!peers[i].n && free_slot < 0)
            free_slot = (int)i;
    }
    if (delta > 0 && free_slot >= 0) {
        peers[free_slot].s = s;
        peers[free_slot].pid = pid;
        peers[free_slot].n = 1;
        rc = 0;
    }
    pthread_mutex_unlock(&peers_mu);
    return rc;
}

/* Codes of this file for the two timeouts (never sent: they only name why a ring closed). */
#define STALLED (-ETIMEDOUT)
#define IDLE (-ETIME)

/* A deadline seconds long (none for seconds <= 0), fixed when a wait first sleeps. */
static tfw_deadline deadline_after(int seconds)
{
    return tfw_deadline_in(seconds > 0 ? (int64_t)seconds * 1000000000ll : 0);
}

/* The pipeline's sink for a ring: waits for room, copies the reply in, releases the request
 * (req_tail moves before the reply is published, as docs/protocol.md says), publishes. */
static int ring_emit(void *ud, srv_reply *rep)
{
    srv_shm *m = ud;
    uint64_t len = srv_reply_len(rep);
    uint64_t span = TF_SHM_FRAME_SPAN(len - 4);
    uint8_t *dst;
    /* A client that stops reading its replies holds its ring: after --stall-timeout it is
     * closed, as a socket connection stalled in the middle of a reply is. */
    tfw_deadline dl = deadline_after(m->s->cfg.net.stall_timeout_s);
    int rc = tfw_ring_wait_room(&m->resp, span, &m->wait, alive, m, &dl, &dst);
    if (rc == -ETIMEDOUT)
        return STALLED;
    if (rc)
        return rc;
    memcpy(dst, rep->head, rep->head_len);
    uint64_t off = rep->head_len;
    for (int i = 0; i < rep->nseg; i++) {
        memcpy(dst + off, rep->seg[i].iov_base, rep->seg[i].iov_len);
        off += rep->seg[i].iov_len;
    }
    tfw_ring_consume(&m->req, m->body_len);
    tfw_ring_publish(&m->resp, span);
    srv_stat_add(m->s, TF_STAT_BYTES_OUT, len);
    return rep->close_after ? TF_E_FRAME_TOO_LARGE : 0;
}

/* Binds the variable part of a request that lies in the request ring: the params (and a close
 * array that is misaligned, or that a LOAD will keep) are copied out first, since the peer may
 * rewrite the ring under us; other close arrays are read in place. 0 or TF_E_LIMIT/NOMEM. */
static int bind_ring_data(srv_ctx *c, const tf_wire_request *rq, const uint8_t *var,
                          srv_req_data *d)
{
    uint64_t params_bytes = rq->params_len; /* n x 6 x i64, or n x n_params x f64 */
    uint64_t close_bytes = is_array_op(rq->opcode) ? 8 * rq->n_bars : 0;
    const uint8_t *close = var + rq->close_off;
    int copy_close = close_bytes && (((uintptr_t)close & 7) != 0 || rq->opcode == TF_OP_LOAD);
    *d = (srv_req_data){.in_ring = 1, .bytes = var};
    int rc = srv_buf_reserve_limited(&c->scratch, params_bytes + (copy_close ? close_bytes : 0));
    if (rc)
        return rc;
    if (params_bytes) {
        memcpy(c->scratch.p, var + rq->params_off, params_bytes);
        d->params = (const int64_t *)c->scratch.p;
        d->fparams = (const double *)c->scratch.p;
    }
    if (copy_close) {
        memcpy(c->scratch.p + params_bytes, close, close_bytes);
        close = c->scratch.p + params_bytes;
    }
    d->close = (const double *)close;
    if (rq->opcode == TF_OP_LOAD && !params_bytes) {
        /* A private copy the store may adopt (hashing bytes the peer can still change would
         * break content addressing). */
        d->owner = &c->scratch;
        d->in_ring = 0;
    }
    return 0;
}

/* Serves one request frame that lies in the request ring through the one request pipeline
 * (pipeline.c). Returns 0, or a negative code when the connection must be dropped. */
static int serve_frame(srv_shm *m, const uint8_t *frame, uint32_t body_len)
{
    srv *s = m->s;
    srv_ctx *c = &m->ctx;
    tf_wire_request rq;
    uint8_t fixed[TF_WIRE_MAX_FIXED];
    size_t n = body_len < TF_WIRE_MAX_FIXED ? body_len : TF_WIRE_MAX_FIXED;
    /* A private copy: the peer may rewrite the ring while we decode. */
    memcpy(fixed, frame + 4, n);
    srv_stat_add(s, TF_STAT_BYTES_IN, 4 + (uint64_t)body_len);
    int err = 0;
    if (srv_decode(fixed, n, body_len, &rq, &err) > 0)
        err = TF_E_PROTOCOL; /* cannot happen: n covers every fixed part */
    srv_req_data d = {0};
    if (!err)
        err = bind_ring_data(c, &rq, frame + 4 + rq.fixed_len, &d);
    c->sweep_threads = s->cfg.threads;
    m->body_len = body_len;
    srv_sink out = {.max_reply = m->ring_bytes - 8,
                    .too_big = TF_E_SHM_TOO_BIG,
                    .what = m->ring_what,
                    .emit = ring_emit,
                    .ud = m};
    int rc = srv_serve(c, &rq, err, &d, &m->rep, &out);
    srv_buf_trim(&c->scratch);
    srv_buf_trim(&c->result);
    srv_buf_trim(&c->payload);
    return rc;
}

static void *shm_main(void *arg)
{
    srv_shm *m = arg;
    srv *s = m->s;
    const char *why = "peer closed";
    int rc = 0;
    srv_log_bind(&m->ctx);
    for (;;) {
        const uint8_t *frame;
        uint32_t body_len;
        rc = tfw_ring_peek(&m->req, s->cfg.max_frame, &frame, &body_len);
        if (rc == 1) {
            rc = serve_frame(m, frame, body_len);
            if (rc)
                break;
            continue;
        }
        if (rc < 0)
            break;
        /* Between frames: a client idle for --idle-timeout is closed, as a socket one is. */
        tfw_deadline idle = deadline_after(s->cfg.net.idle_timeout_s);
        rc = tfw_ring_wait_data(&m->req, &m->wait, alive, m, &idle);
        if (rc == -ETIMEDOUT)
            rc = IDLE;
        if (rc)
            break;
    }
    if (rc == TF_E_SHM_CORRUPT)
        why = "peer wrote an invalid ring position or length (dropped)";
    else if (rc == TF_E_SHUTTING_DOWN)
        why = "server shutting down";
    else if (rc == IDLE)
        why = "idle timeout (--idle-timeout)";
    else if (rc == STALLED)
        why = "stalled: the client stopped reading its replies (--stall-timeout)";
    else if (rc != TF_E_SHM_PEER_GONE)
        why = tf_strerror(rc);
    /* Tell the client, wake it if it sleeps, and close the control socket. */
    __atomic_store_n(word(m, TF_SHM_OFF_SERVER_CLOSED), 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(word(m, TF_SHM_OFF_RESP_SEQ), 1, __ATOMIC_SEQ_CST);
    tf_futex_wake(word(m, TF_SHM_OFF_RESP_SEQ));
    pthread_mutex_lock(&m->lock);
    if (m->sock_open)
        shutdown(m->sock_fd, SHUT_RDWR);
    pthread_mutex_unlock(&m->lock);
    if (rc == TF_E_SHM_CORRUPT)
        srv_log(s, 0, "conn %llu (shm): error %d: %s", (unsigned long long)m->ctx.conn_id, rc, why);
    char line[256];
    snprintf(line, sizeof line,
             "ring closed: %s; %llu-byte rings, client pid %d; waits: %llu slept, %llu contended, "
             "%llu vCPU stalls",
             why, (unsigned long long)m->ring_bytes, (int)m->pid,
             (unsigned long long)m->wait.sleeps, (unsigned long long)m->wait.contentions,
             (unsigned long long)m->wait.stalls);
    srv_log_close(&m->ctx, line);
    srv_log_bind(NULL);
    srv_ctx_fini(&m->ctx);
    pid_t pid = m->pid;
    shm_unref(m);
    peer_ring(s, pid, -1);
    __atomic_fetch_sub(&s->shm_threads, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

int srv_shm_start(srv *s, int memfd, const uint8_t hello[TF_SHM_HELLO_BYTES], pid_t peer_pid,
                  int sock_fd, uint64_t conn_id, srv_shm **out)
{
    *out = NULL;
    uint32_t magic = tf_le32(hello), version = tf_le32(hello + 4);
    uint64_t ring = tf_le64(hello + 8), total = tf_le64(hello + 16);
    if (magic != TF_SHM_MAGIC || version != TF_SHM_VERSION)
        return TF_E_SHM_HANDSHAKE;
    if (ring < TF_SHM_MIN_RING || ring > TF_SHM_MAX_RING || (ring & (ring - 1)) ||
        total != TF_SHM_TOTAL_BYTES(ring))
        return TF_E_SHM_HANDSHAKE;
    if (memfd < 0)
        return TF_E_BAD_FD;
    int seals = fcntl(memfd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
        return TF_E_BAD_FD;
    struct stat st;
    if (fstat(memfd, &st) != 0 || (uint64_t)st.st_size != total)
        return TF_E_SHM_HANDSHAKE;
    if (__atomic_add_fetch(&s->shm_threads, 1, __ATOMIC_ACQ_REL) > TF_SERVER_MAX_SHM) {
        __atomic_fetch_sub(&s->shm_threads, 1, __ATOMIC_ACQ_REL);
        return TF_E_SHM_LIMIT;
    }
    if (peer_ring(s, peer_pid, +1)) {
        __atomic_fetch_sub(&s->shm_threads, 1, __ATOMIC_ACQ_REL);
        return TF_E_SHM_LIMIT;
    }
    int rc = 0;
    srv_shm *m = NULL;
    void *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (map == MAP_FAILED) {
        rc = TF_E_NOMEM;
        map = NULL;
    }
    if (!rc) {
        const uint8_t *pg = map;
        if (tf_le32(pg + TF_SHM_OFF_MAGIC) != TF_SHM_MAGIC ||
            tf_le32(pg + TF_SHM_OFF_VERSION) != TF_SHM_VERSION ||
            tf_le64(pg + TF_SHM_OFF_RING_BYTES) != ring)
            rc = TF_E_SHM_HANDSHAKE;
    }
    if (!rc && !(m = calloc(1, sizeof *m)))
        rc = TF_E_NOMEM;
    if (rc) {
        if (map)
            munmap(map, total);
        peer_ring(s, peer_pid, -1);
        __atomic_fetch_sub(&s->shm_threads, 1, __ATOMIC_ACQ_REL);
        return rc;
    }
    m->s = s;
    m->map = map;
    m->map_len = total;
    m->ring_bytes = ring;
    m->pid = peer_pid;
    m->sock_fd = sock_fd;
    m->sock_open = 1;
    m->refs = 2;
    pthread_mutex_init(&m->lock, NULL);
    srv_ctx_init(&m->ctx, s, "shm ring", TF_CAP_LOAD_FD);
    m->ctx.conn_id = conn_id;
    tfw_ring_setup(map, ring, 1, &m->resp, &m->req);
    tfw_shm_waiter_init(&m->wait, s->cfg.spin);
    snprintf(m->ring_what, sizeof m->ring_what, "%llu-byte ring", (unsigned long long)ring);
    __atomic_store_n(word(m, TF_SHM_OFF_SERVER_PID), (uint32_t)getpid(), __ATOMIC_RELEASE);

    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, shm_main, m) != 0) {
        pthread_attr_destroy(&attr);
        srv_ctx_fini(&m->ctx);
        m->refs = 1;
        shm_unref(m);
        peer_ring(s, peer_pid, -1);
        __atomic_fetch_sub(&s->shm_threads, 1, __ATOMIC_ACQ_REL);
        return TF_E_NOMEM;
    }
    pthread_attr_destroy(&attr);
    *out = m;
    return 0;
}

void srv_shm_detach(srv_shm *m)
{
    pthread_mutex_lock(&m->lock);
    m->sock_open = 0;
    pthread_mutex_unlock(&m->lock);
    __atomic_store_n(&m->peer_gone, 1, __ATOMIC_RELEASE);
    /* Wake the thread if it sleeps on the request ring (the mapping lives while we hold a ref).
     * req_seq is the client's word: only wake, never write it. A wake that races with the
     * thread going to sleep is caught by its next liveness check. */
    tf_futex_wake(word(m, TF_SHM_OFF_REQ_SEQ));
    shm_unref(m);
}

void srv_shm_join_all(srv *s)
{
    /* Threads notice s->stop within TF_SHM_WAIT_NS; allow a sweep in progress to finish. */
    while (__atomic_load_n(&s->shm_threads, __ATOMIC_ACQUIRE) > 0) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}
