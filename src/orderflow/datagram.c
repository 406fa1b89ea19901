/* OFL1 datagrams over UDP: sender, receiver, and the per-session sequence tracker. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "orderflow/orderflow_internal.h"
#include "tollfree/datagram.h"
#include "tollfree/orderflow.h"

/* ---- tracker -------------------------------------------------------------------------------- */

void tf_dgram_tracker_init(tf_dgram_tracker *t, uint64_t session_id, uint64_t first_seq)
{
    if (!t)
        return;
    memset(t, 0, sizeof *t);
    t->session_id = session_id;
    t->next_seq = first_seq;
    t->seen = ~(uint64_t)0; /* everything before first_seq counts as received */
}

/* Moves the expectation to last + 1, recording [next_seq, last] as missing except `last` when
 * it was itself received (a data message, not a heartbeat). */
static void advance(tf_dgram_tracker *t, uint64_t last, int received, tf_dgram_event *ev)
{
    uint64_t skipped = last - t->next_seq; /* journal_seqs before `last` that were not seen */
    uint64_t missing = skipped + (received ? 0 : 1);
    if (missing) {
        ev->status = TF_DGRAM_GAP;
        ev->gap_first = t->next_seq;
        ev->gap_count = missing;
        t->stats.gaps++;
        t->stats.missing += missing;
    }
    /* Shift the window by last + 1 - next_seq slots; the new slots are 0 (missing) except the
     * newest when received. */
    uint64_t shift = skipped + 1;
    t->seen = shift >= 64 || shift == 0 ? 0 : t->seen << shift;
    t->seen |= received ? 1u : 0u;
    t->next_seq = last + 1;
}

int tf_dgram_track(tf_dgram_tracker *t, const void *buf, size_t len, tf_dgram_event *ev)
{
    if (!t || !ev)
        return TF_E_NULL_ARG;
    ev->status = TF_DGRAM_IN_ORDER;
    ev->error = 0;
    ev->gap_first = ev->gap_count = 0;
    t->stats.datagrams++;
    int rc = tf_ofl_datagram_decode(buf, len, &ev->msg);
    if (rc < 0) {
        ev->status = TF_DGRAM_MALFORMED;
        ev->error = rc;
        t->stats.malformed++;
        return ev->status;
    }
    if (ev->msg.session_id != t->session_id) {
        ev->status = TF_DGRAM_FOREIGN;
        t->stats.foreign++;
        return ev->status;
    }
    uint64_t seq = ev->msg.journal_seq;
    if (ev->msg.kind == TF_OFL_HEARTBEAT) {
        t->stats.heartbeats++;
        if (seq != TF_DGRAM_NO_SEQ && seq >= t->next_seq)
            advance(t, seq, 0, ev);
        return ev->status;
    }
    if (seq == TF_DGRAM_NO_SEQ) {
        /* Reserved for heartbeats; advancing to it would wrap next_seq to 0. */
        ev->status = TF_DGRAM_MALFORMED;
        ev->error = TF_E_OFL_SEQ_GAP;
        t->stats.malformed++;
        return ev->status;
    }
    if (seq >= t->next_seq) {
        if (seq == t->next_seq)
            t->stats.in_order++;
        advance(t, seq, 1, ev);
        return ev->status;
    }
    uint64_t age = t->next_seq - 1 - seq; /* 0: the newest slot */
    if (age < 64 && !(t->seen >> age & 1)) {
        t->seen |= (uint64_t)1 << age;
        ev->status = TF_DGRAM_LATE;
        t->stats.late++;
        t->stats.missing--;
        return ev->status;
    }
    ev->status = TF_DGRAM_DUPLICATE;
    t->stats.duplicates++;
    return ev->status;
}

/* ---- sockets -------------------------------------------------------------------------------- */

#define RECV_SLOT (TF_OFL_MAX_DATAGRAM + 1) /* one byte more than the cap: oversize is seen */

struct tf_dgram_sender {
    int fd;
    uint64_t session_id;
    uint64_t last_seq;
    uint8_t buf[TF_DGRAM_BATCH][TF_OFL_DATAGRAM_HEADER_LEN + TF_OFL_MAX_PAYLOAD];
    struct iovec iov[TF_DGRAM_BATCH];
    struct mmsghdr hdr[TF_DGRAM_BATCH];
};

struct tf_dgram_receiver {
    int fd;
    int port;
    tf_dgram_tracker tracker;
    uint8_t buf[TF_DGRAM_BATCH][RECV_SLOT];
    struct iovec iov[TF_DGRAM_BATCH];
    struct mmsghdr hdr[TF_DGRAM_BATCH];
};

/* Parses a numeric address. Returns the sockaddr length or TF_E_INVALID_ARG. */
static int parse_addr(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (host && inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        return (int)sizeof *in4;
    }
    if (host && inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        return (int)sizeof *in6;
    }
    return TF_E_INVALID_ARG;
}

int tf_dgram_sender_open(const char *host, uint16_t port, uint64_t session_id,
                         tf_dgram_sender **out)
{
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    struct sockaddr_storage ss;
    int alen = parse_addr(host, port, &ss);
    if (alen < 0)
        return alen;
    tf_dgram_sender *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    s->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&ss, (socklen_t)alen) != 0) {
        int e = -errno;
        if (s->fd >= 0)
            close(s->fd);
        free(s);
        return e;
    }
    int sz = 4 << 20;
    setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz); /* best effort */
    s->session_id = session_id;
    s->last_seq = TF_DGRAM_NO_SEQ;
    for (int i = 0; i < TF_DGRAM_BATCH; i++) {
        s->iov[i].iov_base = s->buf[i];
        s->hdr[i].msg_hdr.msg_iov = &s->iov[i];
        s->hdr[i].msg_hdr.msg_iovlen = 1;
    }
    *out = s;
    return 0;
}

/* Sends the first k prepared datagrams. Returns how many went, or -errno when none did. */
static int flush_batch(tf_dgram_sender *s, unsigned k)
{
    unsigned done = 0;
    while (done < k) {
        int n = sendmmsg(s->fd, s->hdr + done, k - done, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return done ? (int)done : -errno;
        }
        done += (unsigned)n;
    }
    return (int)done;
}

int tf_dgram_send(tf_dgram_sender *s, const tf_ofl_msg *msgs, size_t n)
{
    if (!s || (!msgs && n))
        return TF_E_NULL_ARG;
    if (n > INT32_MAX)
        n = INT32_MAX;
    size_t sent = 0;
    while (sent < n) {
        unsigned k = 0;
        int err = 0;
        while (k < TF_DGRAM_BATCH && sent + k < n) {
            tf_ofl_msg m = msgs[sent + k];
            m.session_id = s->session_id;
            int len = tf_ofl_datagram_encode(s->buf[k], sizeof s->buf[k], &m);
            if (len < 0) {
                err = len;
                break;
            }
            s->iov[k].iov_len = (size_t)len;
            k++;
        }
        int rc = k ? flush_batch(s, k) : 0;
        if (rc > 0) {
            s->last_seq = msgs[sent + (size_t)rc - 1].journal_seq;
            sent += (size_t)rc;
        }
        if (rc < 0 || (unsigned)rc < k || err)
            return sent ? (int)sent : (rc < 0 ? rc : err);
    }
    return (int)sent;
}

int tf_dgram_send_heartbeat(tf_dgram_sender *s)
{
    if (!s)
        return TF_E_NULL_ARG;
    uint8_t b[TF_OFL_DATAGRAM_HEADER_LEN];
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_HEARTBEAT;
    m.session_id = s->session_id;
    m.journal_seq = s->last_seq;
    int len = tf_ofl_datagram_encode(b, sizeof b, &m);
    if (len < 0)
        return len;
    for (;;) {
        ssize_t w = send(s->fd, b, (size_t)len, 0);
        if (w >= 0)
            return 1;
        if (errno != EINTR)
            return -errno;
    }
}

int tf_dgram_sender_fd(const tf_dgram_sender *s)
{
    return s ? s->fd : TF_E_NULL_ARG;
}

void tf_dgram_sender_close(tf_dgram_sender *s)
{
    if (!s)
        return;
    close(s->fd);
    free(s);
}

int tf_dgram_receiver_open(const char *host, uint16_t port, uint64_t session_id, uint64_t first_seq,
                           tf_dgram_receiver **out)
{
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    struct sockaddr_storage ss;
    int alen = parse_addr(host, port, &ss);
    if (alen < 0)
        return alen;
    tf_dgram_receiver *r = calloc(1, sizeof *r);
    if (!r)
        return TF_E_NOMEM;
    r->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = r->fd < 0 ? -errno : 0;
    int sz = 4 << 20;
    if (!rc)
        setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz); /* best effort */
    if (!rc && bind(r->fd, (struct sockaddr *)&ss, (socklen_t)alen) != 0)
        rc = -errno;
    socklen_t sl = sizeof ss;
    if (!rc && getsockname(r->fd, (struct sockaddr *)&ss, &sl) != 0)
        rc = -errno;
    if (rc) {
        if (r->fd >= 0)
            close(r->fd);
        free(r);
        return rc;
    }
    r->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
    tf_dgram_tracker_init(&r->tracker, session_id, first_seq);
    for (int i = 0; i < TF_DGRAM_BATCH; i++) {
        r->iov[i].iov_base = r->buf[i];
        r->iov[i].iov_len = RECV_SLOT;
        r->hdr[i].msg_hdr.msg_iov = &r->iov[i];
        r->hdr[i].msg_hdr.msg_iovlen = 1;
    }
    *out = r;
    return 0;
}

int tf_dgram_recv(tf_dgram_receiver *r, tf_dgram_event *ev, size_t max, int timeout_ms)
{
    if (!r || (!ev && max))
        return TF_E_NULL_ARG;
    unsigned want = max > TF_DGRAM_BATCH ? TF_DGRAM_BATCH : (unsigned)max;
    if (!want)
        return 0;
    int n;
    for (;;) {
        n = recvmmsg(r->fd, r->hdr, want, MSG_DONTWAIT, NULL);
        if (n >= 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        if (timeout_ms == 0)
            return 0;
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        int p = poll(&pfd, 1, timeout_ms < 0 ? -1 : timeout_ms);
        if (p < 0 && errno != EINTR)
            return -errno;
        if (p == 0)
            return 0;
    }
    for (int i = 0; i < n; i++) {
        size_t len = r->hdr[i].msg_len;
        /* MSG_TRUNC set: the datagram was longer than the slot, hence over the cap. */
        if (r->hdr[i].msg_hdr.msg_flags & MSG_TRUNC)
            len = RECV_SLOT;
        tf_dgram_track(&r->tracker, r->buf[i], len, &ev[i]);
    }
    return n;
}

int tf_dgram_receiver_port(const tf_dgram_receiver *r)
{
    return r ? r->port : TF_E_NULL_ARG;
}

int tf_dgram_receiver_fd(const tf_dgram_receiver *r)
{
    return r ? r->fd : TF_E_NULL_ARG;
}

const tf_dgram_tracker *tf_dgram_receiver_tracker(const tf_dgram_receiver *r)
{
    return r ? &r->tracker : NULL;
}

void tf_dgram_receiver_close(tf_dgram_receiver *r)
{
    if (!r)
        return;
    close(r->fd);
    free(r);
}
