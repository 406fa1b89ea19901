/* Dialing a server, for both C clients (client_internal.h); TLS for the order client. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "client/client_internal.h"
#include "tollfree/error.h"

int tfc_dial_unix(const char *path, int *out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof sa.sun_path)
        return TF_E_INVALID_ARG;
    memcpy(sa.sun_path, path, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *out = fd;
    return 0;
}

int tfc_parse_url(const char *url, tfc_url *out)
{
    memset(out, 0, sizeof *out);
    const char *rest;
    if (!strncmp(url, "unix:", 5) || !strncmp(url, "shm:", 4)) {
        out->scheme = url[0] == 'u' ? TFC_UNIX : TFC_SHM;
        rest = strchr(url, ':') + 1;
        size_t n = strlen(rest);
        if (n == 0 || n > TFC_MAX_PATH)
            return TF_E_INVALID_ARG;
        memcpy(out->path, rest, n + 1);
        return 0;
    }
    if (strncmp(url, "tcp:", 4) != 0 && strncmp(url, "tls:", 4) != 0)
        return TF_E_INVALID_ARG;
    out->scheme = url[1] == 'c' ? TFC_TCP : TFC_TLS;
    rest = url + 4;
    if (rest[0] == '/' && rest[1] == '/')
        rest += 2; /* tls://HOST:PORT, the way URLs are often written */
    const char *colon = strrchr(rest, ':');
    const char *port = colon ? colon + 1 : rest;
    size_t pl = strlen(port);
    if (pl == 0 || pl > 5)
        return TF_E_INVALID_ARG;
    unsigned long v = 0;
    for (size_t i = 0; i < pl; i++) {
        if (port[i] < '0' || port[i] > '9')
            return TF_E_INVALID_ARG;
        v = v * 10 + (unsigned long)(port[i] - '0');
    }
    if (v == 0 || v > 65535)
        return TF_E_INVALID_ARG;
    out->port = (uint16_t)v;
    if (!colon) {
        memcpy(out->host, "127.0.0.1", sizeof "127.0.0.1");
        return 0;
    }
    const char *h = rest;
    size_t hl = (size_t)(colon - rest);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
        if (hl == 0 || memchr(h, '[', hl) || memchr(h, ']', hl))
            return TF_E_INVALID_ARG;
    } else if (memchr(h, ':', hl) || memchr(h, '[', hl) || memchr(h, ']', hl)) {
        return TF_E_INVALID_ARG; /* an IPv6 address must be bracketed */
    }
    if (hl == 0 || hl > TFC_MAX_HOST)
        return TF_E_INVALID_ARG;
    memcpy(out->host, h, hl);
    out->host[hl] = 0;
    return 0;
}

int tfc_dial_tcp(const char *host, uint16_t port_num, int *out)
{
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)port_num);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return TF_E_INVALID_ARG;
    int fd = -1, e = ECONNREFUSED;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -e;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *out = fd;
    return 0;
}

/* ---------------------------------------------------------------- TLS */

struct tfc_tls {
    SSL_CTX *ctx;
    SSL *ssl;
    int failed;
};

const char *tfc_tls_ca(const char *ca)
{
    if (ca && ca[0])
        return ca;
    const char *env = getenv("TOLLFREE_TLS_CA");
    return env && env[0] ? env : NULL;
}

void tfc_tls_free(tfc_tls *t, int clean)
{
    if (!t)
        return;
    ERR_clear_error();
    if (t->ssl && clean && !t->failed)
        SSL_shutdown(t->ssl); /* one non-blocking try */
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    ERR_clear_error();
    free(t);
}

/* OpenSSL's socket BIO writes with write(2): a server that has gone would raise SIGPIPE in the
 * caller's process, which a library must not do. The same BIO, writing with MSG_NOSIGNAL. */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int n)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    errno = 0;
    ssize_t w = send(fd, buf, (size_t)(n < 0 ? 0 : n), MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (w <= 0 && BIO_sock_should_retry((int)w))
        BIO_set_retry_write(b);
    return (int)w;
}

static void nosig_init(void)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "socket (MSG_NOSIGNAL)");
    if (!m)
        return;
    if (!BIO_meth_set_write(m, nosig_write) || !BIO_meth_set_read(m, BIO_meth_get_read(sock)) ||
        !BIO_meth_set_puts(m, BIO_meth_get_puts(sock)) ||
        !BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) ||
        !BIO_meth_set_create(m, BIO_meth_get_create(sock)) ||
        !BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock))) {
        BIO_meth_free(m);
        return;
    }
    nosig_method = m;
}

/* Client contexts, one per CA file ("" for the system store), made once and shared by the
 * connections (SSL_new on a shared context is thread-safe): a context costs about half a
 * millisecond and the system store tens of milliseconds to load, at every connect otherwise. A CA
 * file that has changed since (inode, size or mtime) is read again. */
#define CTX_CACHE 8
static struct ctx_slot {
    char *path; /* NULL: empty */
    struct stat st;
    SSL_CTX *ctx; /* the cache's reference */
} ctx_cache[CTX_CACHE];
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static SSL_CTX *ctx_make(const char *ca, int *rc)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    if (!c) {
        *rc = TF_E_NOMEM;
        return NULL;
    }
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    int ok = ca ? SSL_CTX_load_verify_locations(c, ca, NULL) : SSL_CTX_set_default_verify_paths(c);
    ERR_clear_error();
    if (ok != 1) {
        SSL_CTX_free(c);
        *rc = TF_E_INVALID_ARG;
        return NULL;
    }
    return c;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* A reference to the context for ca (NULL: the system store), which the caller frees; NULL with
 * *rc when it cannot be made (TF_E_INVALID_ARG: a CA file that cannot be read). */
static SSL_CTX *ctx_get(const char *ca, int *rc)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    if (ca && stat(ca, &st) != 0) {
        *rc = TF_E_INVALID_ARG;
        return NULL;
    }
    const char *key = ca ? ca : "";
    pthread_mutex_lock(&ctx_lock);
    struct ctx_slot *slot = NULL, *empty = NULL;
    for (int i = 0; i < CTX_CACHE && !slot; i++) {
        if (ctx_cache[i].path && !strcmp(ctx_cache[i].path, key))
            slot = &ctx_cache[i];
        else if (!ctx_cache[i].path && !empty)
            empty = &ctx_cache[i];
    }
    SSL_CTX *c = NULL;
    if (slot && same_file(&slot->st, &st)) {
        c = slot->ctx;
        SSL_CTX_up_ref(c);
    } else if ((c = ctx_make(ca, rc)) != NULL) {
        if (!slot && empty && (empty->path = strdup(key)) != NULL)
            slot = empty;
        if (slot) { /* connections made from the old one keep their own reference */
            SSL_CTX_free(slot->ctx);
            slot->ctx = c;
            slot->st = st;
            SSL_CTX_up_ref(c);
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    return c;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tfc_tls_start(int fd, const char *host, const char *ca, int timeout_ms, tfc_tls **out)
{
    *out = NULL;
    ERR_clear_error();
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return -errno;
    tfc_tls *t = calloc(1, sizeof *t);
    if (!t)
        return TF_E_NOMEM;
    int rc = 0;
    t->ctx = ctx_get(tfc_tls_ca(ca), &rc);
    if (!t->ctx) {
        tfc_tls_free(t, 0);
        return rc;
    }
    t->ssl = SSL_new(t->ctx);
    pthread_once(&nosig_once, nosig_init);
    BIO *bio = nosig_method && t->ssl ? BIO_new(nosig_method) : NULL;
    if (!bio) {
        tfc_tls_free(t, 0);
        return TF_E_NOMEM;
    }
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(t->ssl, bio, bio);
    /* The certificate must name the host: an IP address among its IP addresses, a name among
     * its DNS names (and the name goes out as SNI). */
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
    int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host)
                   : SSL_set1_host(t->ssl, host) && SSL_set_tlsext_host_name(t->ssl, host);
    if (ok != 1) {
        tfc_tls_free(t, 0);
        return TF_E_INVALID_ARG;
    }
    SSL_set_connect_state(t->ssl);
    int64_t deadline = timeout_ms < 0 ? -1 : mono_ms() + timeout_ms;
    for (;;) {
        ERR_clear_error();
        int r = SSL_do_handshake(t->ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(t->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            int se = errno;
            t->failed = 1;
            tfc_tls_free(t, 0);
            return e == SSL_ERROR_SYSCALL && se ? -se : -EPROTO;
        }
        int left = -1;
        if (deadline >= 0) {
            int64_t l = deadline - mono_ms();
            if (l <= 0) {
                tfc_tls_free(t, 0);
                return -ETIMEDOUT;
            }
            left = l > 1000000 ? 1000000 : (int)l;
        }
        struct pollfd pf = {fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
        int pr = poll(&pf, 1, left);
        if (pr < 0 && errno != EINTR) {
            int pe = errno;
            tfc_tls_free(t, 0);
            return -pe;
        }
    }
    *out = t;
    return 0;
}

/* errno for a TLS call that returned r <= 0; 0 for a clean end. */
static int tls_errno(tfc_tls *t, int r)
{
    int se = errno;
    int e = SSL_get_error(t->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return EAGAIN;
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    t->failed = 1;
    if (e == SSL_ERROR_SYSCALL)
        return se ? se : ECONNRESET;
    return EPROTO;
}

ssize_t tfc_recv(tfc_tls *t, int fd, void *buf, size_t n)
{
    if (!t)
        return recv(fd, buf, n, 0);
    ERR_clear_error();
    errno = 0;
    size_t got = 0;
    int r = SSL_read_ex(t->ssl, buf, n, &got);
    if (r == 1)
        return (ssize_t)got;
    int e = tls_errno(t, r);
    if (!e)
        return 0;
    errno = e;
    return -1;
}

ssize_t tfc_send(tfc_tls *t, int fd, const void *buf, size_t n)
{
    if (!t)
        return send(fd, buf, n, MSG_NOSIGNAL);
    ERR_clear_error();
    errno = 0;
    size_t put = 0;
    int r = SSL_write_ex(t->ssl, buf, n, &put);
    if (r == 1)
        return (ssize_t)put;
    int e = tls_errno(t, r);
    errno = e ? e : EPIPE;
    return -1;
}
