/* Listeners: Unix sockets (0600, a stale file replaced, a live one refused), TCP (loopback
 * unless told otherwise, TLS when the config has it), accepting every waiting connection and
 * handing it to the caps and the state machine; it knows no frame and no protocol. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/net_private.h"
#include "tollfree/error.h"

/* ---------------------------------------------------------------- accepting */

static void tune_socket(tfn_loop *lp, int fd, int is_unix)
{
    int sz = lp->cfg.sockbuf_bytes;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (!is_unix) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
}

/* The connection of an admitted socket, its transport chosen, opened by the server and
 * registered; NULL when it could not be (the socket is closed). */
static tfn_conn *open_conn(tfn_loop *lp, listener *l, int fd, const uint8_t *key)
{
    const net_transport *io = l->tls ? &tfn_io_tls : l->pass_fds ? &tfn_io_pass_fds : &tfn_io_plain;
    tfn_conn *c = tfn_conn_new(lp, fd, l->ops, l->label, io);
    if (!c) {
        tfn_log_limited(lp, "refusing a connection: out of memory");
        close(fd);
        return NULL;
    }
    c->opened_ns = c->last_io_ns;
    memcpy(c->peer, key, TFN_PEER_KEY_BYTES); /* for the log lines of the handshake */
    if (l->tls) {
        c->ssl = tfn_tls_conn_new(l->tls, fd);
        c->state = CS_HANDSHAKE;
        if (!c->ssl) {
            tfn_log_limited(lp, "refusing a connection: out of memory for TLS");
            close(fd);
            tfn_conn_free(c);
            return NULL;
        }
        c->ssl_mem = TFN_TLS_HANDSHAKE_BYTES; /* admitted with it (tfn_accept_all) */
        tfn_mem_add(lp, c->ssl_mem);
    }
    if (l->ops->on_open && l->ops->on_open(c) < 0) {
        close(fd);
        tfn_conn_free(c);
        return NULL;
    }
    if (tfn_poll_add_conn(lp, c) != 0) {
        c->ops->on_close(c, "epoll_ctl failed");
        close(fd);
        tfn_conn_free(c);
        return NULL;
    }
    return c;
}

void tfn_accept_all(tfn_loop *lp, listener *l)
{
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                tfn_log_limited(lp, "accept on %s failed: %s", l->label, strerror(errno));
            return;
        }
        uint8_t key[TFN_PEER_KEY_BYTES];
        tfn_peer_key(fd, l->path[0] != 0, key);
        const char *why = NULL;
        size_t icap = l->ops->ibuf_bytes ? l->ops->ibuf_bytes : TFN_IBUF_DEFAULT;
        if (!tfn_admit(lp, key, icap + (l->tls ? TFN_TLS_HANDSHAKE_BYTES : 0), &why)) {
            char pn[INET6_ADDRSTRLEN + 16];
            tfn_peer_name(key, pn, sizeof pn);
            tfn_log_limited(lp, "refusing a %s connection from %s: %s (%d open)", l->label, pn, why,
                            lp->nconns + lp->nrings);
            close(fd);
            continue;
        }
        tune_socket(lp, fd, l->path[0] != 0);
        tfn_conn *c = open_conn(lp, l, fd, key);
        if (c)
            tfn_conn_link(lp, c);
    }
}

/* ---------------------------------------------------------------- listening */

static int add_listener(tfn_loop *lp, int fd, const tfn_ops *ops, const char *label, int pass_fds,
                        const char *path)
{
    if (lp->nls >= TFN_MAX_LISTEN) {
        close(fd);
        return TF_E_LIMIT;
    }
    listener *l = &lp->ls[lp->nls];
    memset(l, 0, sizeof *l);
    l->fd = fd;
    l->ops = ops;
    l->label = label;
    l->pass_fds = pass_fds;
    if (path) {
        struct stat st;
        strcpy(l->path, path);
        if (stat(path, &st) == 0) {
            l->dev = st.st_dev;
            l->ino = st.st_ino;
        }
    }
    if (tfn_poll_add_tag(lp, fd, TAG_LISTEN + (uint64_t)lp->nls) != 0) {
        int e = errno;
        close(fd);
        if (path)
            unlink(path);
        return -e;
    }
    lp->nls++;
    return 0;
}

/* A socket file already at path: replaced when stale, refused when live or not a socket. */
static int clear_stale(tfn_loop *lp, const char *path, const struct sockaddr_un *sa)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        tfn_log(lp, 1, "error: %s exists and is not a socket: refusing to replace it", path);
        return -EEXIST;
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        return -errno;
    int live = connect(probe, (const struct sockaddr *)sa, sizeof *sa) == 0;
    int e = errno;
    close(probe);
    if (live) {
        tfn_log(lp, 1, "error: %s: a server is already listening there", path);
        return -EADDRINUSE;
    }
    if (e != ECONNREFUSED) {
        tfn_log(lp, 1, "error: %s: cannot tell whether it is stale: %s", path, strerror(e));
        return -e;
    }
    unlink(path);
    tfn_log(lp, 0, "replaced a stale socket at %s", path);
    return 0;
}

int tfn_listen_unix(tfn_loop *lp, const char *path, const char *label, const tfn_ops *ops,
                    int pass_fds)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        tfn_log(lp, 1, "error: socket path too long: %s", path);
        return TF_E_INVALID_ARG;
    }
    strcpy(sa.sun_path, path);
    int rc = clear_stale(lp, path, &sa);
    if (rc)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* 0600 from the start: no window in which others could connect. */
    mode_t old = umask(0177);
    rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    umask(old);
    if (rc != 0 || listen(fd, 1024) != 0) {
        e = errno;
        tfn_log(lp, 1, "error: cannot listen on %s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    chmod(path, 0600);
    rc = add_listener(lp, fd, ops, label, pass_fds, path);
    if (rc)
        return rc;
    tfn_log(lp, 1, "listening %s %s", label, path);
    return 0;
}

/* "[HOST:]PORT" into host (default 127.0.0.1) and port (0..65535 in decimal: getaddrinfo would
 * wrap 99999 to 34463). 0 or TF_E_INVALID_ARG (said). */
static int split_spec(tfn_loop *lp, const char *spec, char *host, size_t hcap, char *port)
{
    const char *colon = strrchr(spec, ':');
    const char *ps = colon ? colon + 1 : spec;
    if (colon) {
        size_t hl = (size_t)(colon - spec);
        const char *h = spec;
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        if (hl >= hcap)
            return TF_E_INVALID_ARG;
        if (hl) {
            memcpy(host, h, hl);
            host[hl] = 0;
        }
    }
    size_t pl = strlen(ps);
    if (pl == 0 || pl > 5 || strspn(ps, "0123456789") != pl || atol(ps) > 65535) {
        tfn_log(lp, 1, "error: --tcp %s: the port must be a number from 0 to 65535", spec);
        return TF_E_INVALID_ARG;
    }
    strcpy(port, ps);
    return 0;
}

/* The first address of res that binds and listens: its fd, or -errno. */
static int bind_first(struct addrinfo *res)
{
    int e = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd =
            socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0)
            return fd;
        e = errno;
        close(fd);
    }
    return -e;
}

static void say_listening(tfn_loop *lp, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char hb[NI_MAXHOST] = "?", pb[NI_MAXSERV] = "?";
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    getnameinfo((struct sockaddr *)&ss, sl, hb, sizeof hb, pb, sizeof pb,
                NI_NUMERICHOST | NI_NUMERICSERV);
    const char *what = lp->cfg.tls ? " (TLS)" : "";
    if (ss.ss_family == AF_INET6)
        tfn_log(lp, 1, "listening tcp [%s]:%s%s", hb, pb, what);
    else
        tfn_log(lp, 1, "listening tcp %s:%s%s", hb, pb, what);
}

int tfn_listen_tcp(tfn_loop *lp, const char *spec, const tfn_ops *ops)
{
    char host[256] = "127.0.0.1", port[32];
    int rc = split_spec(lp, spec, host, sizeof host, port);
    if (rc)
        return rc;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        tfn_log(lp, 1, "error: --tcp %s: %s", spec, gai_strerror(g));
        return TF_E_INVALID_ARG;
    }
    int fd = bind_first(res);
    freeaddrinfo(res);
    if (fd < 0) {
        tfn_log(lp, 1, "error: cannot listen on tcp %s: %s", spec, strerror(-fd));
        return fd;
    }
    rc = add_listener(lp, fd, ops, "tcp", 0, NULL);
    if (rc)
        return rc;
    lp->ls[lp->nls - 1].tls = lp->cfg.tls;
    say_listening(lp, fd);
    return 0;
}

int tfn_listen_all(tfn_loop *lp, const tfn_listeners *ls, const tfn_ops *ops, int pass_fds)
{
    int rc = 0;
    for (int i = 0; !rc && i < ls->n_unix; i++)
        rc = tfn_listen_unix(lp, ls->unix_paths[i], "unix", ops, pass_fds);
    for (int i = 0; !rc && i < ls->n_tcp; i++)
        rc = tfn_listen_tcp(lp, ls->tcp_addrs[i], ops);
    return rc;
}

void tfn_close_listeners(tfn_loop *lp)
{
    for (int i = 0; i < lp->nls; i++) {
        listener *l = &lp->ls[i];
        if (l->fd < 0)
            continue;
        close(l->fd);
        l->fd = -1;
        struct stat st;
        /* Remove the socket file only if it is still ours. */
        if (l->path[0] && stat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
            unlink(l->path);
    }
}
