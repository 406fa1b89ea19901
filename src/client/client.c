/* The C client (include/tollfree/client.h): one synchronous connection over a Unix socket, TCP,
 * or the shared-memory rings (docs/protocol.md). Requests go out with one sendmsg of a header and
 * the caller's arrays; replies are read straight into the caller's arrays. */
#include "tollfree/client.h"

#include "client/client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/opts_size.h"
#include "tollfree/kernel.h"
#include "tollfree/shm.h"
#include "wire/wire_internal.h"

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_RING ((uint64_t)4 << 20)
#define SOCKBUF_BYTES (4 << 20)
/* tf_client_opts a caller must have: up to spin (the first layout that carried a size). */
#define OPTS_MIN_SIZE TFU_FIELD_END(tf_client_opts, spin)

/* A v1 request frame before its arrays: u32 body_len, then the 9-byte v1 body header. */
#define V1_REQ (TF_WIRE_PREFIX + TF_WIRE_V1_FIXED)
/* An error frame's body before its message: the v2 header, then i32 code and u32 msg_len. */
#define ERR_FIXED (TF_WIRE_V2_HEADER + TF_WIRE_ERROR_FIXED)

enum { K_UNIX, K_TCP, K_SHM };

struct tf_client {
    int kind;
    int fd; /* the socket (the control socket for shm) */
    int timeout_ms;
    int broken;
    uint64_t next_id;
    char msg[TF_WIRE_MAX_ERROR_MSG + 1];
    /* shm */
    uint8_t *map;
    size_t map_len;
    uint64_t ring_bytes;
    tfw_shm_waiter wait; /* how this client waits for replies and for room (shm_ring.c) */
    pid_t server_pid;
    tfw_ring_prod req;
    tfw_ring_cons resp;
};

/* A reply's layout as the caller expects it: a fixed payload, then up to three arrays; or, with
 * narr = -1, a fixed payload and a tail whose length the reply gives (at most arr[0].iov_len
 * bytes: more is a protocol error), its length left in arr[0].iov_len (STRATEGIES). */
typedef struct reply_spec {
    void *fixed;
    size_t fixed_len;
    struct iovec arr[3];
    int narr;
} reply_spec;

static int64_t deadline_of(const tf_client *c)
{
    return c->timeout_ms < 0 ? 0 : tfw_now_ns() + (int64_t)c->timeout_ms * 1000000ll;
}

/* The same timeout for the rings, started by the call's first wait that sleeps (no clock read
 * for a call the spin answers). */
static tfw_deadline ring_deadline(const tf_client *c)
{
    return tfw_deadline_in(c->timeout_ms < 0 ? 0 : (int64_t)c->timeout_ms * 1000000ll);
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline) {
            int64_t left = deadline - tfw_now_ns();
            if (left <= 0)
                return -ETIMEDOUT;
            ms = (int)((left + 999999) / 1000000);
        }
        struct pollfd pf = {fd, ev, 0};
        int r = poll(&pf, 1, ms);
        if (r > 0)
            return 0;
        if (r == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* Sends every byte of iov[0..n) (modified in place); fd_pass rides on the first sendmsg. */
static int send_all(tf_client *c, struct iovec *iov, int n, int fd_pass, int64_t deadline)
{
    int first = 1;
    while (n > 0) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } cm;
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        if (first && fd_pass >= 0) {
            memset(&cm, 0, sizeof cm);
            mh.msg_control = cm.buf;
            mh.msg_controllen = sizeof cm.buf;
            struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &fd_pass, sizeof(int));
        }
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = wait_fd(c->fd, POLLOUT, deadline);
                if (rc)
                    return rc;
                continue;
            }
            return -errno;
        }
        first = 0;
        size_t left = (size_t)w;
        while (n > 0 && left >= iov[0].iov_len) {
            left -= iov[0].iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov[0].iov_base = (uint8_t *)iov[0].iov_base + left;
            iov[0].iov_len -= left;
        }
    }
    return 0;
}

/* Receives exactly the bytes of iov[0..n). *got counts what arrived (to tell a clean close from
 * a truncated frame). */
static int recv_all(tf_client *c, struct iovec *iov, int n, int64_t deadline, size_t *got)
{
    while (n > 0 && iov[0].iov_len == 0) {
        iov++;
        n--;
    }
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t r = recvmsg(c->fd, &mh, MSG_DONTWAIT);
        if (r == 0)
            return TF_E_TRUNCATED;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                int rc = wait_fd(c->fd, POLLIN, deadline);
                if (rc)
                    return rc;
                continue;
            }
            return -errno;
        }
        if (got)
            *got += (size_t)r;
        size_t left = (size_t)r;
        while (n > 0 && left >= iov[0].iov_len) {
            left -= iov[0].iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov[0].iov_base = (uint8_t *)iov[0].iov_base + left;
            iov[0].iov_len -= left;
        }
    }
    return 0;
}

static int recv_buf(tf_client *c, void *p, size_t n, int64_t deadline, size_t *got)
{
    struct iovec iov = {p, n};
    return recv_all(c, &iov, 1, deadline, got);
}

static int fail(tf_client *c, int rc)
{
    /* Anything but a server error frame leaves the stream in an unknown place. */
    c->broken = 1;
    return rc;
}

static void set_msg(tf_client *c, const uint8_t *p, size_t n)
{
    if (n > TF_WIRE_MAX_ERROR_MSG)
        n = TF_WIRE_MAX_ERROR_MSG;
    memcpy(c->msg, p, n);
    c->msg[n] = 0;
}

static size_t spec_len(const reply_spec *sp)
{
    size_t n = sp->fixed_len;
    for (int i = 0; i < sp->narr; i++)
        n += sp->arr[i].iov_len;
    return n;
}

/* A reply of rlen body bytes carries a tail that fits (narr = -1); sets its length. */
static int tail_fits(reply_spec *sp, uint64_t rlen)
{
    uint64_t fixed = TF_WIRE_V2_HEADER + sp->fixed_len;
    if (rlen < fixed || rlen - fixed > sp->arr[0].iov_len)
        return 0;
    sp->arr[0].iov_len = (size_t)(rlen - fixed);
    return 1;
}

/* A v2 call on the socket. hdr holds TF_WIRE_REQ_<OP> bytes: the prefix and v2 header (filled
 * here) and the fixed arguments (filled by the caller at TF_WIRE_REQ_ARGS); arrays follow. */
static int sock_call(tf_client *c, uint8_t op, uint8_t *hdr, size_t hdr_len,
                     const struct iovec *arr, int narr, int fd_pass, reply_spec *sp)
{
    int64_t deadline = deadline_of(c);
    uint64_t body = hdr_len - TF_WIRE_PREFIX;
    for (int i = 0; i < narr; i++)
        body += arr[i].iov_len;
    if (body > UINT32_MAX)
        return TF_E_FRAME_TOO_LARGE;
    uint64_t id = ++c->next_id;
    tf_wire_put_header(hdr, (uint32_t)body, op, id);
    struct iovec iov[4];
    iov[0] = (struct iovec){hdr, hdr_len};
    for (int i = 0; i < narr; i++)
        iov[1 + i] = arr[i];
    int rc = send_all(c, iov, 1 + narr, fd_pass, deadline);
    if (rc)
        return fail(c, rc);

    uint8_t rh[TF_WIRE_PREFIX + TF_WIRE_V2_HEADER];
    size_t got = 0;
    rc = recv_buf(c, rh, sizeof rh, deadline, &got);
    if (rc)
        return fail(c, rc == TF_E_TRUNCATED && got == 0 ? -ECONNRESET : rc);
    uint32_t rlen = tf_le32(rh);
    tf_wire_reply r;
    rc = tf_wire_decode_reply(rh + TF_WIRE_PREFIX, TF_WIRE_V2_HEADER, rlen, &r);
    /* Requests are answered in order; an error frame for a request whose body the server never
     * read (FRAME_TOO_LARGE) carries request_id 0. */
    if (rc < 0 || (r.opcode != op && r.opcode != TF_OP_ERROR) ||
        (r.request_id != id && !(r.opcode == TF_OP_ERROR && r.request_id == 0)))
        return fail(c, TF_E_PROTOCOL);
    if (r.opcode == TF_OP_ERROR) {
        uint8_t e[TF_WIRE_ERROR_FIXED + TF_WIRE_MAX_ERROR_MSG];
        if (rlen < ERR_FIXED || rlen > ERR_FIXED + TF_WIRE_MAX_ERROR_MSG)
            return fail(c, TF_E_PROTOCOL);
        rc = recv_buf(c, e, rlen - TF_WIRE_V2_HEADER, deadline, NULL);
        if (rc)
            return fail(c, rc);
        tfw_error_reply er;
        tfw_get_error_fixed(e, &er);
        if (er.code >= 0 || er.msg_len != rlen - ERR_FIXED)
            return fail(c, TF_E_PROTOCOL);
        set_msg(c, e + TF_WIRE_ERROR_FIXED, er.msg_len);
        if (er.code == TF_E_FRAME_TOO_LARGE || er.code == TF_E_SHUTTING_DOWN)
            c->broken = 1; /* the server closes after these */
        return er.code;
    }
    if (sp->narr < 0 ? !tail_fits(sp, rlen) : rlen != TF_WIRE_V2_HEADER + spec_len(sp))
        return fail(c, TF_E_PROTOCOL);
    struct iovec in[4];
    int nin = 0;
    in[nin++] = (struct iovec){sp->fixed, sp->fixed_len};
    for (int i = 0; i < (sp->narr < 0 ? 1 : sp->narr); i++)
        in[nin++] = sp->arr[i];
    rc = recv_all(c, in, nin, deadline, NULL);
    return rc ? fail(c, rc) : 0;
}

/* ---------------------------------------------------------------- shared memory */

static int shm_alive(void *arg)
{
    tf_client *c = arg;
    if (__atomic_load_n((uint32_t *)(c->map + TF_SHM_OFF_SERVER_CLOSED), __ATOMIC_ACQUIRE))
        return TF_E_SHM_PEER_GONE;
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return TF_E_SHM_PEER_GONE;
    if (c->server_pid > 0 && kill(c->server_pid, 0) != 0 && errno == ESRCH)
        return TF_E_SHM_PEER_GONE;
    return 0;
}

/* Waits (spin, then futex) until the response ring holds a whole frame; 0 with the frame in
 * place, or a negative code (dead peer, corrupt ring, timeout). */
static int shm_await_reply(tf_client *c, tfw_deadline *dl, const uint8_t **f, uint32_t *rlen)
{
    for (;;) {
        int rc = tfw_ring_peek(&c->resp, UINT32_MAX, f, rlen);
        if (rc == 1)
            return 0;
        if (rc < 0)
            return rc;
        rc = tfw_ring_wait_data(&c->resp, &c->wait, shm_alive, c, dl);
        if (rc)
            return rc;
    }
}

static int shm_call(tf_client *c, uint8_t op, uint8_t *hdr, size_t hdr_len, const struct iovec *arr,
                    int narr, reply_spec *sp)
{
    tfw_deadline dl = ring_deadline(c);
    uint64_t body = hdr_len - TF_WIRE_PREFIX;
    for (int i = 0; i < narr; i++)
        body += arr[i].iov_len;
    uint64_t span = TF_SHM_FRAME_SPAN(body);
    if (body > UINT32_MAX || span > c->ring_bytes - 8)
        return TF_E_SHM_TOO_BIG;
    uint64_t id = ++c->next_id;
    tf_wire_put_header(hdr, (uint32_t)body, op, id);
    uint8_t *dst;
    int rc = tfw_ring_wait_room(&c->req, span, &c->wait, shm_alive, c, &dl, &dst);
    if (rc)
        return fail(c, rc);
    memcpy(dst, hdr, hdr_len);
    size_t off = hdr_len;
    for (int i = 0; i < narr; i++) {
        if (arr[i].iov_len)
            memcpy(dst + off, arr[i].iov_base, arr[i].iov_len);
        off += arr[i].iov_len;
    }
    tfw_ring_publish(&c->req, span);

    const uint8_t *f;
    uint32_t rlen;
    rc = shm_await_reply(c, &dl, &f, &rlen);
    if (rc)
        return fail(c, rc);
    uint8_t rh[TF_WIRE_V2_HEADER + TF_WIRE_ERROR_FIXED];
    size_t hn = rlen < sizeof rh ? rlen : sizeof rh;
    memcpy(rh, f + 4, hn);
    tf_wire_reply r;
    rc = tf_wire_decode_reply(rh, hn, rlen, &r);
    if (rc != 0 || (r.opcode != op && r.opcode != TF_OP_ERROR) ||
        (r.request_id != id && !(r.opcode == TF_OP_ERROR && r.request_id == 0)))
        return fail(c, TF_E_PROTOCOL);
    if (r.opcode == TF_OP_ERROR) {
        set_msg(c, f + TF_WIRE_PREFIX + ERR_FIXED, r.msg_len);
        tfw_ring_consume(&c->resp, rlen);
        return r.code;
    }
    if (sp->narr < 0 ? !tail_fits(sp, rlen) : rlen != TF_WIRE_V2_HEADER + spec_len(sp))
        return fail(c, TF_E_PROTOCOL);
    const uint8_t *p = f + TF_WIRE_PREFIX + TF_WIRE_V2_HEADER;
    if (sp->fixed_len)
        memcpy(sp->fixed, p, sp->fixed_len);
    p += sp->fixed_len;
    for (int i = 0; i < (sp->narr < 0 ? 1 : sp->narr); i++) {
        if (sp->arr[i].iov_len)
            memmove(sp->arr[i].iov_base, p, sp->arr[i].iov_len);
        p += sp->arr[i].iov_len;
    }
    tfw_ring_consume(&c->resp, rlen);
    return 0;
}

/* One v2 call on whichever transport; LOAD_FD always goes over the socket. */
static int call(tf_client *c, uint8_t op, uint8_t *hdr, size_t hdr_len, const struct iovec *arr,
                int narr, int fd_pass, reply_spec *sp)
{
    if (c->broken)
        return -ENOTCONN;
    c->msg[0] = 0;
    if (c->kind == K_SHM && fd_pass < 0)
        return shm_call(c, op, hdr, hdr_len, arr, narr, sp);
    return sock_call(c, op, hdr, hdr_len, arr, narr, fd_pass, sp);
}

/* ---------------------------------------------------------------- open / close */

static int shm_handshake(tf_client *c, uint64_t ring)
{
    uint64_t total = TF_SHM_TOTAL_BYTES(ring);
    int mfd = memfd_create("tollfree-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0)
        return -errno;
    int rc = 0;
    if (ftruncate(mfd, (off_t)total) != 0 ||
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
        rc = -errno;
    void *map = MAP_FAILED;
    if (!rc) {
        map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mfd, 0);
        if (map == MAP_FAILED)
            rc = -errno;
    }
    if (rc) {
        close(mfd);
        return rc;
    }
    c->map = map;
    c->map_len = total;
    c->ring_bytes = ring;
    uint8_t *pg = map;
    tf_put32(pg + TF_SHM_OFF_MAGIC, TF_SHM_MAGIC);
    tf_put32(pg + TF_SHM_OFF_VERSION, TF_SHM_VERSION);
    tf_put64(pg + TF_SHM_OFF_RING_BYTES, ring);
    tf_put32(pg + TF_SHM_OFF_CLIENT_PID, (uint32_t)getpid());
    tfw_ring_setup(pg, ring, 0, &c->req, &c->resp);

    uint8_t hello[TF_SHM_HELLO_BYTES];
    tf_put32(hello, TF_SHM_MAGIC);
    tf_put32(hello + 4, TF_SHM_VERSION);
    tf_put64(hello + 8, ring);
    tf_put64(hello + 16, total);
    int64_t deadline = deadline_of(c);
    struct iovec iov = {hello, sizeof hello};
    rc = send_all(c, &iov, 1, mfd, deadline);
    close(mfd);
    if (rc)
        return rc;
    uint8_t rep[TF_SHM_HELLO_REPLY_BYTES];
    size_t got = 0;
    rc = recv_buf(c, rep, sizeof rep, deadline, &got);
    if (rc)
        return rc == TF_E_TRUNCATED && got == 0 ? -ECONNRESET : rc;
    int32_t status = (int32_t)tf_le32(rep);
    c->server_pid = (pid_t)tf_le32(rep + 4);
    return status;
}

int tf_client_open_opts(tf_client **out, const char *url, const tf_client_opts *opts)
{
    if (!out || !url)
        return TF_E_NULL_ARG;
    *out = NULL;
    tf_client_opts o = {.spin = -1};
    if (opts) {
        int rc = tfu_opts_load(&o, sizeof o, opts, OPTS_MIN_SIZE);
        if (rc)
            return rc;
    }
    tf_client *c = calloc(1, sizeof *c);
    if (!c)
        return TF_E_NOMEM;
    c->fd = -1;
    c->timeout_ms = o.timeout_ms ? o.timeout_ms : DEFAULT_TIMEOUT_MS;
    tfw_shm_waiter_init(&c->wait, o.spin >= 0 ? o.spin : TF_SHM_DEFAULT_SPIN);
    uint64_t ring = o.ring_bytes ? o.ring_bytes : DEFAULT_RING;
    tfc_url u;
    int rc = tfc_parse_url(url, &u);
    if (!rc && u.scheme == TFC_UNIX) {
        c->kind = K_UNIX;
        rc = tfc_dial_unix(u.path, &c->fd);
    } else if (!rc && u.scheme == TFC_TCP) {
        c->kind = K_TCP;
        rc = tfc_dial_tcp(u.host, u.port, &c->fd);
    } else if (!rc && u.scheme == TFC_TLS) {
        rc = TF_E_INVALID_ARG; /* TLS is the order client's (tf_orders_connect) */
    } else if (!rc) {
        c->kind = K_SHM;
        if (ring < TF_SHM_MIN_RING || ring > TF_SHM_MAX_RING || (ring & (ring - 1)))
            rc = TF_E_INVALID_ARG;
        else
            rc = tfc_dial_unix(u.path, &c->fd);
        if (!rc)
            rc = shm_handshake(c, ring);
    }
    if (!rc && c->kind != K_SHM) {
        int sz = SOCKBUF_BYTES;
        setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    }
    if (rc) {
        tf_client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int tf_client_open(tf_client **out, const char *url)
{
    return tf_client_open_opts(out, url, NULL);
}

void tf_client_close(tf_client *c)
{
    if (!c)
        return;
    if (c->map) {
        /* Say goodbye on the page, wake a sleeping server, then close the control socket. */
        __atomic_store_n((uint32_t *)(c->map + TF_SHM_OFF_CLIENT_CLOSED), 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add((uint32_t *)(c->map + TF_SHM_OFF_REQ_SEQ), 1, __ATOMIC_SEQ_CST);
        tf_futex_wake((uint32_t *)(c->map + TF_SHM_OFF_REQ_SEQ));
        munmap(c->map, c->map_len);
    }
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

const char *tf_client_error_message(const tf_client *c)
{
    return c ? c->msg : "";
}

int tf_client_set_timeout(tf_client *c, int timeout_ms)
{
    if (!c)
        return TF_E_NULL_ARG;
    c->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
    return 0;
}

/* ---------------------------------------------------------------- v2 calls */

int tf_client_hello(tf_client *c, tf_server_info *info)
{
    if (!c)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_HELLO], rep[TF_WIRE_HELLO_REPLY];
    tf_put32(hdr + TF_WIRE_REQ_ARGS, TF_WIRE_VERSION);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 4, 0);
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_HELLO, hdr, sizeof hdr, NULL, 0, -1, &sp);
    if (!rc && info) {
        tfw_hello_reply h;
        tfw_get_hello(rep, &h);
        info->version = h.version;
        info->caps = h.caps;
        info->max_frame = h.max_frame;
        info->max_memory = h.max_memory;
        info->max_datasets = h.max_datasets;
        info->threads = h.threads;
    }
    return rc;
}

int tf_client_echo(tf_client *c, const void *data, size_t n, void *out)
{
    if (!c || (n && (!data || !out)))
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_ECHO];
    struct iovec arr = {(void *)data, n};
    reply_spec sp = {NULL, 0, {{out, n}}, 1};
    return call(c, TF_OP_ECHO, hdr, sizeof hdr, &arr, n ? 1 : 0, -1, &sp);
}

static int load_reply(const uint8_t *rep, uint64_t *handle, int *created)
{
    tfw_load_reply r;
    tfw_get_load(rep, &r);
    if (handle)
        *handle = r.handle;
    if (created)
        *created = (int)r.created;
    return 0;
}

int tf_client_load_fd(tf_client *c, int memfd, uint64_t n_bars, uint64_t *handle, int *created)
{
    if (!c)
        return TF_E_NULL_ARG;
    if (memfd < 0)
        return TF_E_BAD_FD;
    if (c->kind == K_TCP)
        return TF_E_BAD_FD;
    uint8_t hdr[TF_WIRE_REQ_LOAD_FD], rep[TF_WIRE_LOAD_REPLY];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, n_bars);
    tf_put64(hdr + TF_WIRE_REQ_ARGS + 8, 0);
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_LOAD_FD, hdr, sizeof hdr, NULL, 0, memfd, &sp);
    return rc ? rc : load_reply(rep, handle, created);
}

/* A sealed memfd holding the closes (shared-memory LOAD). */
static int make_dataset_fd(const double *series, uint64_t n_bars, int *out)
{
    if (n_bars > (uint64_t)TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    size_t bytes = (size_t)(8 * n_bars);
    int fd = memfd_create("tollfree-dataset", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (ftruncate(fd, (off_t)bytes) != 0)
        rc = -errno;
    if (!rc && bytes) {
        /* The mapping must be gone before F_SEAL_WRITE can be added. */
        void *m = mmap(NULL, bytes, PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            rc = -errno;
        } else {
            memcpy(m, series, bytes);
            munmap(m, bytes);
        }
    }
    if (!rc && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL))
        rc = -errno;
    if (rc) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

int tf_client_load(tf_client *c, const double *series, uint64_t n_bars, uint64_t *handle,
                   int *created)
{
    if (!c || (n_bars && !series))
        return TF_E_NULL_ARG;
    if (c->kind == K_SHM) {
        int fd = -1, rc = make_dataset_fd(series, n_bars, &fd);
        if (rc)
            return rc;
        rc = tf_client_load_fd(c, fd, n_bars, handle, created);
        close(fd);
        return rc;
    }
    if (n_bars > (UINT32_MAX - (TF_WIRE_REQ_LOAD - TF_WIRE_PREFIX)) / 8)
        return TF_E_FRAME_TOO_LARGE;
    uint8_t hdr[TF_WIRE_REQ_LOAD], rep[TF_WIRE_LOAD_REPLY];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, n_bars);
    struct iovec arr = {(void *)series, (size_t)(8 * n_bars)};
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_LOAD, hdr, sizeof hdr, &arr, n_bars ? 1 : 0, -1, &sp);
    return rc ? rc : load_reply(rep, handle, created);
}

static int sweep_common(tf_client *c, uint8_t op, uint8_t *hdr, size_t hdr_len, struct iovec *arr,
                        int narr, uint32_t n_combos, double *pnl, int64_t *trades)
{
    uint8_t rep[TF_WIRE_SWEEP_REPLY_FIXED];
    reply_spec sp = {rep,
                     sizeof rep,
                     {{pnl, 8 * (size_t)n_combos}, {trades, 8 * (size_t)n_combos}},
                     n_combos ? 2 : 0};
    int rc = call(c, op, hdr, hdr_len, arr, narr, -1, &sp);
    if (rc)
        return rc;
    tfw_sweep_reply r;
    tfw_get_sweep(rep, &r);
    return r.n_combos != n_combos ? fail(c, TF_E_PROTOCOL) : 0;
}

int tf_client_sweep(tf_client *c, uint64_t handle, const int64_t *params, uint32_t n_combos,
                    double *pnl, int64_t *trades)
{
    if (!c || (n_combos && (!params || !pnl || !trades)))
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_SWEEP_DS];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, handle);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 8, n_combos);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 12, 0);
    struct iovec arr = {(void *)params, 48 * (size_t)n_combos};
    return sweep_common(c, TF_OP_SWEEP_DS, hdr, sizeof hdr, &arr, n_combos ? 1 : 0, n_combos, pnl,
                        trades);
}

int tf_client_sweep_stats(tf_client *c, uint64_t handle, const int64_t *params, uint32_t n_combos,
                          const double *fee, double *pnl, int64_t *trades, tf_stats *rows)
{
    if (!c || (n_combos && (!params || !pnl || !trades || !rows)))
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_SWEEP_DS + 8], rep[TF_WIRE_SWEEP_REPLY_FIXED];
    uint32_t flags = TF_SWEEP_STATS | (fee ? TF_SWEEP_FEE : 0);
    tf_put64(hdr + TF_WIRE_REQ_ARGS, handle);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 8, n_combos);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 12, flags);
    if (fee)
        memcpy(hdr + TF_WIRE_REQ_SWEEP_DS, fee, 8);
    struct iovec arr = {(void *)params, 48 * (size_t)n_combos};
    reply_spec sp = {rep,
                     sizeof rep,
                     {{pnl, 8 * (size_t)n_combos},
                      {trades, 8 * (size_t)n_combos},
                      {rows, TF_WIRE_STATS_ROW * (size_t)n_combos}},
                     n_combos ? 3 : 0};
    int rc = call(c, TF_OP_SWEEP_DS, hdr, TF_WIRE_REQ_SWEEP_DS + (fee ? 8 : 0), &arr,
                  n_combos ? 1 : 0, -1, &sp);
    if (rc)
        return rc;
    tfw_sweep_reply r;
    tfw_get_sweep(rep, &r);
    return r.n_combos != n_combos || r.flags != TF_SWEEP_STATS ? fail(c, TF_E_PROTOCOL) : 0;
}

int tf_client_sweep_inline(tf_client *c, const double *close, uint32_t n_bars,
                           const int64_t *params, uint32_t n_combos, double *pnl, int64_t *trades)
{
    if (!c || (n_bars && !close) || (n_combos && (!params || !pnl || !trades)))
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_SWEEP];
    tf_put32(hdr + TF_WIRE_REQ_ARGS, n_bars);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 4, n_combos);
    struct iovec arr[2];
    int narr = 0;
    if (n_bars)
        arr[narr++] = (struct iovec){(void *)close, 8 * (size_t)n_bars};
    if (n_combos)
        arr[narr++] = (struct iovec){(void *)params, 48 * (size_t)n_combos};
    return sweep_common(c, TF_OP_SWEEP, hdr, sizeof hdr, arr, narr, n_combos, pnl, trades);
}

int tf_client_run_one(tf_client *c, uint64_t handle, const int64_t params[6], double *pnl,
                      int64_t *trades)
{
    if (!c || !params)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_RUN_ONE], rep[TF_WIRE_RUN_ONE_REPLY];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, handle);
    memcpy(hdr + TF_WIRE_REQ_ARGS + 8, params, TF_WIRE_PARAMS_BYTES);
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_RUN_ONE, hdr, sizeof hdr, NULL, 0, -1, &sp);
    if (!rc) {
        tfw_run_one_reply r;
        tfw_get_run_one(rep, &r);
        if (pnl)
            *pnl = r.pnl;
        if (trades)
            *trades = r.trades;
    }
    return rc;
}

int tf_client_drop(tf_client *c, uint64_t handle)
{
    if (!c)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_DROP];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, handle);
    reply_spec sp = {NULL, 0, {{0}}, 0};
    return call(c, TF_OP_DROP, hdr, sizeof hdr, NULL, 0, -1, &sp);
}

int tf_client_stats(tf_client *c, uint64_t *stats)
{
    if (!c || !stats)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_STATS], rep[TF_WIRE_STATS_REPLY];
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_STATS, hdr, sizeof hdr, NULL, 0, -1, &sp);
    if (!rc)
        tfw_get_stats(rep, stats);
    return rc;
}

int tf_client_session_open(tf_client *c, const int64_t params[6], uint64_t *session)
{
    if (!c || !params || !session)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_SESSION_OPEN], rep[TF_WIRE_SESSION_OPEN_REPLY];
    memcpy(hdr + TF_WIRE_REQ_ARGS, params, TF_WIRE_PARAMS_BYTES);
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_SESSION_OPEN, hdr, sizeof hdr, NULL, 0, -1, &sp);
    if (!rc)
        *session = tfw_get_session_open(rep);
    return rc;
}

static void get_state(const uint8_t *p, int with_bars, tf_session_state *st)
{
    if (!st)
        return;
    tfw_session_reply r;
    tfw_get_session(p, with_bars, &r);
    st->position = r.position;
    st->trades = r.trades;
    st->pnl = r.pnl;
    st->bars = r.bars;
}

int tf_client_session_bar(tf_client *c, uint64_t session, double close, tf_session_state *st)
{
    if (!c)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_SESSION_BAR], rep[TF_WIRE_SESSION_BAR_REPLY];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, session);
    memcpy(hdr + TF_WIRE_REQ_ARGS + 8, &close, 8);
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_SESSION_BAR, hdr, sizeof hdr, NULL, 0, -1, &sp);
    if (!rc)
        get_state(rep, 0, st);
    return rc;
}

_Static_assert(TF_WIRE_REQ_SESSION_QUERY == TF_WIRE_REQ_SESSION_CLOSE, "one request layout");

static int session_state_call(tf_client *c, uint8_t op, uint64_t session, tf_session_state *st)
{
    if (!c)
        return TF_E_NULL_ARG;
    uint8_t hdr[TF_WIRE_REQ_SESSION_QUERY], rep[TF_WIRE_SESSION_STATE_REPLY];
    tf_put64(hdr + TF_WIRE_REQ_ARGS, session);
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, op, hdr, sizeof hdr, NULL, 0, -1, &sp);
    if (!rc)
        get_state(rep, 1, st);
    return rc;
}

int tf_client_session_query(tf_client *c, uint64_t session, tf_session_state *st)
{
    return session_state_call(c, TF_OP_SESSION_QUERY, session, st);
}

int tf_client_session_close(tf_client *c, uint64_t session, tf_session_state *st)
{
    return session_state_call(c, TF_OP_SESSION_CLOSE, session, st);
}

/* ---------------------------------------------------------------- strategies by name */

int tf_client_strategies(tf_client *c, char *text, size_t cap, size_t *len)
{
    if (!c || (cap && !text))
        return TF_E_NULL_ARG;
    /* The server keeps the list under 64 KiB (src/server/strategies.c). */
    size_t room = (size_t)64 << 10;
    char *buf = malloc(room);
    if (!buf)
        return TF_E_NOMEM;
    uint8_t hdr[TF_WIRE_REQ_STRATEGIES], rep[TF_WIRE_STRATEGIES_REPLY_FIXED];
    reply_spec sp = {rep, sizeof rep, {{buf, room}}, -1};
    int rc = call(c, TF_OP_STRATEGIES, hdr, sizeof hdr, NULL, 0, -1, &sp);
    size_t n = sp.arr[0].iov_len;
    tfw_strategies_reply r = {0, 0};
    if (!rc)
        tfw_get_strategies(rep, &r);
    if (!rc && r.text_len != n)
        rc = fail(c, TF_E_PROTOCOL);
    if (!rc) {
        if (len)
            *len = n;
        if (cap) {
            size_t k = n < cap - 1 ? n : cap - 1;
            memcpy(text, buf, k);
            text[k] = 0;
        }
        rc = (int)r.count < 0 ? fail(c, TF_E_PROTOCOL) : (int)r.count;
    }
    free(buf);
    return rc;
}

/* The strategy name of a request, zero-padded to 8 bytes at dst: its padded length, or
 * TF_E_INVALID_ARG for a name the server would never know. */
static int put_name(uint8_t *dst, const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > TF_WIRE_MAX_NAME)
        return TF_E_INVALID_ARG;
    size_t pad = (n + 7) & ~(size_t)7;
    memset(dst, 0, pad);
    memcpy(dst, name, n);
    return (int)pad;
}

int tf_client_sweep_with(tf_client *c, const char *strategy, uint64_t handle, const double *close,
                         uint64_t n_bars, const double *params, uint32_t n_params,
                         uint32_t n_combos, const double *fee, double *pnl, int64_t *trades,
                         tf_stats *rows)
{
    if (!c || !strategy || (n_bars && !close) || (n_combos && (!params || !pnl || !trades)))
        return TF_E_NULL_ARG;
    if (n_params == 0 || n_params > TF_WIRE_MAX_PARAMS || (handle && n_bars))
        return TF_E_INVALID_ARG;
    uint8_t hdr[TF_WIRE_REQ_SWEEP_WITH + 8 + TF_WIRE_MAX_NAME + 8], rep[TF_WIRE_SWEEP_REPLY_FIXED];
    uint32_t flags = (rows ? TF_SWEEP_STATS : 0) | (fee ? TF_SWEEP_FEE : 0);
    size_t at = TF_WIRE_REQ_SWEEP_WITH + (fee ? 8 : 0);
    int pad = put_name(hdr + at, strategy);
    if (pad < 0)
        return pad;
    tf_put64(hdr + TF_WIRE_REQ_ARGS, handle);
    tf_put64(hdr + TF_WIRE_REQ_ARGS + 8, n_bars);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 16, n_combos);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 20, flags);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 24, n_params);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 28, (uint32_t)strlen(strategy));
    if (fee)
        memcpy(hdr + TF_WIRE_REQ_SWEEP_WITH, fee, 8);
    if (n_bars > (UINT32_MAX / 8))
        return TF_E_FRAME_TOO_LARGE;
    struct iovec arr[2];
    int narr = 0;
    if (n_bars)
        arr[narr++] = (struct iovec){(void *)close, 8 * (size_t)n_bars};
    if (n_combos)
        arr[narr++] = (struct iovec){(void *)params, 8 * (size_t)n_params * n_combos};
    reply_spec sp = {rep,
                     sizeof rep,
                     {{pnl, 8 * (size_t)n_combos},
                      {trades, 8 * (size_t)n_combos},
                      {rows, TF_WIRE_STATS_ROW * (size_t)n_combos}},
                     n_combos ? (rows ? 3 : 2) : 0};
    int rc = call(c, TF_OP_SWEEP_WITH, hdr, at + (size_t)pad, arr, narr, -1, &sp);
    if (rc)
        return rc;
    tfw_sweep_reply r;
    tfw_get_sweep(rep, &r);
    return r.n_combos != n_combos || r.flags != (rows ? TF_SWEEP_STATS : 0) ? fail(c, TF_E_PROTOCOL)
                                                                            : 0;
}

int tf_client_session_open_with(tf_client *c, const char *strategy, const double *params,
                                uint32_t n_params, uint64_t *session)
{
    if (!c || !strategy || !params || !session)
        return TF_E_NULL_ARG;
    if (n_params == 0 || n_params > TF_WIRE_MAX_PARAMS)
        return TF_E_INVALID_ARG;
    uint8_t hdr[TF_WIRE_REQ_SESSION_OPEN_WITH + TF_WIRE_MAX_NAME + 8],
        rep[TF_WIRE_SESSION_OPEN_REPLY];
    int pad = put_name(hdr + TF_WIRE_REQ_SESSION_OPEN_WITH, strategy);
    if (pad < 0)
        return pad;
    tf_put32(hdr + TF_WIRE_REQ_ARGS, n_params);
    tf_put32(hdr + TF_WIRE_REQ_ARGS + 4, (uint32_t)strlen(strategy));
    struct iovec arr = {(void *)params, 8 * (size_t)n_params};
    reply_spec sp = {rep, sizeof rep, {{0}}, 0};
    int rc = call(c, TF_OP_SESSION_OPEN_WITH, hdr, TF_WIRE_REQ_SESSION_OPEN_WITH + (size_t)pad,
                  &arr, 1, -1, &sp);
    if (!rc)
        *session = tfw_get_session_open(rep);
    return rc;
}

/* ---------------------------------------------------------------- v1 */

/* An error frame's fixed part: a negative code and the message length the body has. */
static int error_fixed_ok(const uint8_t *p, uint64_t body_len)
{
    tfw_error_reply e;
    tfw_get_error_fixed(p, &e);
    return e.code < 0 && e.msg_len == body_len - ERR_FIXED;
}

/* v1 has no error frames of its own: a failure comes back as a v2 error frame (request_id 0).
 * A reply is taken for one only if it is exactly one, whatever its length. */
static int looks_like_error(const uint8_t *b, uint64_t len)
{
    return len >= ERR_FIXED && len <= ERR_FIXED + TF_WIRE_MAX_ERROR_MSG && b[0] == TF_OP_ERROR &&
           b[1] == TF_WIRE_VERSION && b[2] == 0 && b[3] == 0 && tf_le64(b + 4) == 0 &&
           error_fixed_ok(b + TF_WIRE_V2_HEADER, len);
}

/* Copies k bytes into an iovec sequence, advancing it. */
static void scatter(struct iovec **iov, int *n, const uint8_t *src, size_t k)
{
    while (k && *n > 0) {
        size_t m = (*iov)[0].iov_len < k ? (*iov)[0].iov_len : k;
        memcpy((*iov)[0].iov_base, src, m);
        (*iov)[0].iov_base = (uint8_t *)(*iov)[0].iov_base + m;
        (*iov)[0].iov_len -= m;
        src += m;
        k -= m;
        if ((*iov)[0].iov_len == 0) {
            (*iov)++;
            (*n)--;
        }
    }
}

static int v1_shm_call(tf_client *c, const uint8_t *hdr, const double *close, uint32_t n_bars,
                       const int64_t *params, uint32_t n_combos, struct iovec *out, int nout,
                       size_t want)
{
    tfw_deadline dl = ring_deadline(c);
    uint64_t body = tf_le32(hdr), span = TF_SHM_FRAME_SPAN(body);
    if (span > c->ring_bytes - 8)
        return TF_E_SHM_TOO_BIG;
    uint8_t *dst;
    int rc = tfw_ring_wait_room(&c->req, span, &c->wait, shm_alive, c, &dl, &dst);
    if (rc)
        return fail(c, rc);
    memcpy(dst, hdr, V1_REQ);
    if (n_bars)
        memcpy(dst + V1_REQ, close, 8 * (size_t)n_bars);
    if (n_combos)
        memcpy(dst + V1_REQ + 8 * (size_t)n_bars, params, TF_WIRE_PARAMS_BYTES * (size_t)n_combos);
    tfw_ring_publish(&c->req, span);
    const uint8_t *f;
    uint32_t rlen;
    rc = shm_await_reply(c, &dl, &f, &rlen);
    if (rc)
        return fail(c, rc);
    uint8_t e[ERR_FIXED + TF_WIRE_MAX_ERROR_MSG];
    if (rlen <= sizeof e) {
        memcpy(e, f + 4, rlen);
        if (looks_like_error(e, rlen)) {
            set_msg(c, e + ERR_FIXED, rlen - ERR_FIXED);
            tfw_ring_consume(&c->resp, rlen);
            return (int32_t)tf_le32(e + TF_WIRE_V2_HEADER);
        }
    }
    if (rlen != want)
        return fail(c, TF_E_PROTOCOL);
    scatter(&out, &nout, f + 4, rlen);
    tfw_ring_consume(&c->resp, rlen);
    return 0;
}

static int v1_call(tf_client *c, uint8_t op, const double *close, uint32_t n_bars,
                   const int64_t *params, uint32_t n_combos, struct iovec *out, int nout,
                   size_t want)
{
    if (c->broken)
        return -ENOTCONN;
    c->msg[0] = 0;
    uint64_t body =
        TF_WIRE_V1_FIXED + 8 * (uint64_t)n_bars + TF_WIRE_PARAMS_BYTES * (uint64_t)n_combos;
    if (body > UINT32_MAX)
        return TF_E_FRAME_TOO_LARGE;
    uint8_t hdr[V1_REQ];
    tf_put32(hdr, (uint32_t)body);
    hdr[4] = op;
    tf_put32(hdr + 5, n_bars);
    tf_put32(hdr + 9, n_combos);
    if (c->kind == K_SHM)
        return v1_shm_call(c, hdr, close, n_bars, params, n_combos, out, nout, want);
    struct iovec iov[3] = {{hdr, sizeof hdr},
                           {(void *)close, 8 * (size_t)n_bars},
                           {(void *)params, 48 * (size_t)n_combos}};
    int64_t deadline = deadline_of(c);
    int rc = send_all(c, iov, 3, -1, deadline);
    if (rc)
        return fail(c, rc);
    uint8_t pre[4];
    size_t got = 0;
    rc = recv_buf(c, pre, 4, deadline, &got);
    if (rc)
        return fail(c, rc == TF_E_TRUNCATED && got == 0 ? -ECONNRESET : rc);
    uint32_t len = tf_le32(pre);
    if (len >= ERR_FIXED && len <= ERR_FIXED + TF_WIRE_MAX_ERROR_MSG) {
        uint8_t e[ERR_FIXED + TF_WIRE_MAX_ERROR_MSG];
        rc = recv_buf(c, e, ERR_FIXED, deadline, NULL);
        if (rc)
            return fail(c, rc);
        if (looks_like_error(e, len)) {
            rc = recv_buf(c, e + ERR_FIXED, len - ERR_FIXED, deadline, NULL);
            if (rc)
                return fail(c, rc);
            set_msg(c, e + ERR_FIXED, len - ERR_FIXED);
            return (int32_t)tf_le32(e + TF_WIRE_V2_HEADER);
        }
        if (len != want)
            return fail(c, TF_E_PROTOCOL);
        scatter(&out, &nout, e, ERR_FIXED);
    } else if (len != want) {
        return fail(c, TF_E_PROTOCOL);
    }
    rc = recv_all(c, out, nout, deadline, NULL);
    return rc ? fail(c, rc) : 0;
}

int tf_client_v1_sweep(tf_client *c, const double *close, uint32_t n_bars, const int64_t *params,
                       uint32_t n_combos, double *pnl, int64_t *trades)
{
    if (!c || (n_bars && !close) || (n_combos && (!params || !pnl || !trades)))
        return TF_E_NULL_ARG;
    struct iovec out[2] = {{pnl, 8 * (size_t)n_combos}, {trades, 8 * (size_t)n_combos}};
    return v1_call(c, TF_OP_V1_SWEEP, close, n_bars, params, n_combos, out, 2,
                   16 * (size_t)n_combos);
}

int tf_client_v1_echo(tf_client *c, const double *close, uint32_t n_bars, double *out)
{
    if (!c || (n_bars && (!close || !out)))
        return TF_E_NULL_ARG;
    struct iovec o = {out, 8 * (size_t)n_bars};
    return v1_call(c, TF_OP_V1_ECHO, close, n_bars, NULL, 0, &o, 1, 8 * (size_t)n_bars);
}
