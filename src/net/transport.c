/* Transports: how bytes move between a connection's buffers and its fds (a plain socket, a Unix
 * socket that carries fds, blocking stdin/stdout, TLS over a socket), behind one small table of
 * operations; it knows no frame, no limit, no timer and no state beyond its own fds. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/net_private.h"

/* ---------------------------------------------------------------- sockets */

/* A short read drained the socket, unless it stopped at an fd boundary or the peer has
 * signalled its end (then only a read of 0 tells that everything was taken). */
static void saw_short(tfn_conn *c, ssize_t r, size_t n, int got_fd)
{
    c->drained = (size_t)r < n && !got_fd && !c->rdhup;
}

static ssize_t again_or_errno(void)
{
    return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

static ssize_t plain_read(tfn_conn *c, void *buf, size_t n)
{
    for (;;) {
        ssize_t r = recv(c->rfd, buf, n, 0);
        if (r > 0)
            saw_short(c, r, n, 0);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return again_or_errno();
    }
}

static ssize_t sock_writev(tfn_conn *c, const struct iovec *iov, int n)
{
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    for (;;) {
        ssize_t w = sendmsg(c->wfd, &mh, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno != EINTR)
            return again_or_errno();
    }
}

/* Hands every fd of an SCM_RIGHTS message to ops->on_fd (closed when there is none). 1 when
 * there was one. */
static int take_fds(tfn_conn *c, struct msghdr *mh)
{
    int got = 0;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(mh); h; h = CMSG_NXTHDR(mh, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
            if (c->ops->on_fd)
                c->ops->on_fd(c, fd);
            else
                close(fd);
            got = 1;
        }
    }
    return got;
}

static ssize_t pass_fds_read(tfn_conn *c, void *buf, size_t n)
{
    for (;;) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } cm;
        struct iovec iov = {buf, n};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        mh.msg_control = cm.buf;
        mh.msg_controllen = sizeof cm.buf;
        ssize_t r = recvmsg(c->rfd, &mh, MSG_CMSG_CLOEXEC);
        if (r >= 0) {
            int got_fd = take_fds(c, &mh);
            if (r > 0)
                saw_short(c, r, n, got_fd);
            return r;
        }
        if (errno != EINTR)
            return again_or_errno();
    }
}

const net_transport tfn_io_plain = {0, 0, plain_read, sock_writev, NULL, NULL, NULL};
const net_transport tfn_io_pass_fds = {0, 0, pass_fds_read, sock_writev, NULL, NULL, NULL};

/* ---------------------------------------------------------------- stdio (blocking, own thread) */

/* Waits for input or for the loop to stop (its stop_efd). */
static ssize_t stdio_read(tfn_conn *c, void *buf, size_t n)
{
    for (;;) {
        struct pollfd pf[2] = {{c->rfd, POLLIN, 0}, {c->lp->stop_efd, POLLIN, 0}};
        int pr = poll(pf, 2, -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pf[1].revents)
            return -ECANCELED;
        ssize_t r = read(c->rfd, buf, n);
        if (r >= 0)
            return r;
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno; /* a non-blocking stdin: poll again */
    }
}

static ssize_t stdio_writev(tfn_conn *c, const struct iovec *iov, int n)
{
    for (;;) {
        ssize_t w = writev(c->wfd, iov, n);
        if (w >= 0)
            return w;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            struct pollfd pf = {c->wfd, POLLOUT, 0};
            poll(&pf, 1, 1000);
        } else if (errno != EINTR) {
            return -errno;
        }
    }
}

const net_transport tfn_io_stdio = {1, 0, stdio_read, stdio_writev, NULL, NULL, NULL};

/* ---------------------------------------------------------------- TLS (net/tls.h) */

/* A connection that gave its record buffers back gets them with its next read or write: counted
 * again first (like the input buffer, whose next byte brings it back without a check). */
static void tls_wake(tfn_conn *c)
{
    if (!c->ssl_lean)
        return;
    c->ssl_lean = 0;
    c->ssl_mem += TFN_TLS_BUF_BYTES;
    tfn_mem_add(c->lp, TFN_TLS_BUF_BYTES);
}

static ssize_t tls_read(tfn_conn *c, void *buf, size_t n)
{
    tls_wake(c);
    int want = 0;
    ssize_t r = tfn_tls_read(c->ssl, buf, n, &want);
    if (r > 0)
        c->drained = 0; /* OpenSSL may hold more than the socket does: only EAGAIN tells */
    if (r == -EAGAIN && want == TFN_TLS_WANT_WRITE)
        tfn_want_out(c->lp, c, 1); /* the read goes on once the socket takes bytes */
    if (r < 0 && r != -EAGAIN)
        c->io_failed = 1;
    return r;
}

/* One record stream: the pieces go one after the other. A write that would block leaves its
 * record inside OpenSSL; the retry starts with the same bytes. */
static ssize_t tls_writev(tfn_conn *c, const struct iovec *iov, int n)
{
    (void)n;
    tls_wake(c);
    int want = 0;
    ssize_t w = tfn_tls_write(c->ssl, iov[0].iov_base, iov[0].iov_len, &want);
    if (w < 0 && w != -EAGAIN)
        c->io_failed = 1;
    return w;
}

static int tls_handshake(tfn_conn *c, char *why, size_t cap)
{
    int r = tfn_tls_handshake(c->ssl, why, cap);
    if (r < 0)
        c->io_failed = 1;
    if (r == 0 && c->ssl_mem == TFN_TLS_HANDSHAKE_BYTES) {
        tfn_mem_sub(c->lp, TFN_TLS_HANDSHAKE_BYTES - TFN_TLS_CONN_BYTES); /* its peak is over */
        c->ssl_mem = TFN_TLS_CONN_BYTES;
    }
    return r;
}

static void tls_end(tfn_conn *c, int clean)
{
    tfn_tls_conn_free(c->ssl, clean && !c->io_failed);
    c->ssl = NULL;
    tfn_mem_sub(c->lp, c->ssl_mem); /* twice is harmless: the second time it is 0 */
    c->ssl_mem = 0;
}

static void tls_rest(tfn_conn *c)
{
    if (!c->ssl || c->ssl_lean || !tfn_tls_conn_rest(c->ssl))
        return;
    c->ssl_lean = 1;
    c->ssl_mem -= TFN_TLS_BUF_BYTES;
    tfn_mem_sub(c->lp, TFN_TLS_BUF_BYTES);
}

const net_transport tfn_io_tls = {0, 1, tls_read, tls_writev, tls_handshake, tls_end, tls_rest};
