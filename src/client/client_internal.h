/* What the two C clients (client.c: the sweep service; orders.c: the engine service) share. */
#ifndef TF_CLIENT_INTERNAL_H
#define TF_CLIENT_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

/* A parsed server URL (docs/protocol.md, "URLs"; the same grammar as the Python clients, pinned
 * by tests/vectors/urls.txt):
 *   unix:PATH | shm:PATH | tcp:[//][HOST:]PORT | tls:[//][HOST:]PORT
 * PATH is non-empty and shorter than sun_path (108 bytes); HOST is a name, an IPv4 address or a
 * bracketed IPv6 address ([::1]), 127.0.0.1 when left out; PORT is 1 to 5 decimal digits, 1..65535.
 * Schemes are lower case. tls: is TCP with TLS (the order client only; tests/vectors/urls.txt and
 * urls_tls.txt). */
enum { TFC_UNIX = 1, TFC_TCP = 2, TFC_SHM = 3, TFC_TLS = 4 };
#define TFC_MAX_PATH 107
#define TFC_MAX_HOST 255
typedef struct tfc_url {
    int scheme;                  /* TFC_* */
    char path[TFC_MAX_PATH + 1]; /* unix, shm */
    char host[TFC_MAX_HOST + 1]; /* tcp, tls: brackets removed */
    uint16_t port;               /* tcp, tls */
} tfc_url;

/* 0, or TF_E_INVALID_ARG for anything the grammar does not allow (nothing is resolved here). */
int tfc_parse_url(const char *url, tfc_url *out);

/* Connects a stream socket (SOCK_CLOEXEC, blocking) to a Unix socket PATH, or to HOST and PORT
 * (TCP_NODELAY set). 0 and *fd, or TF_E_INVALID_ARG (a path too long, a host that does not
 * resolve) or -errno of the last connect. */
int tfc_dial_unix(const char *path, int *fd);
int tfc_dial_tcp(const char *host, uint16_t port, int *fd);

/* ---- TLS (tls: URLs) ---- */

typedef struct tfc_tls tfc_tls;

/* The CA file a TLS client checks the server against: ca when set, else the environment
 * variable TOLLFREE_TLS_CA, else NULL (the system's default CA store). */
const char *tfc_tls_ca(const char *ca);
/* TLS over the connected socket fd (made non-blocking here): TLS 1.2 or later, the server's
 * certificate checked against the CA file (tfc_tls_ca) and against host (a name, or an IP
 * address, then matched against the certificate's IP addresses), within timeout_ms (< 0:
 * forever). 0 and *out; -EPROTO when the handshake fails (a certificate that does not verify,
 * a server that does not speak TLS), -ETIMEDOUT, -errno, TF_E_INVALID_ARG (a CA file that cannot
 * be read), TF_E_NOMEM. The fd stays the caller's. A CA file (or the system store) is loaded at
 * its first connect and kept for the process (again when the file changes: inode, size, mtime). */
int tfc_tls_start(int fd, const char *host, const char *ca, int timeout_ms, tfc_tls **out);
/* NULL is a no-op; sends a close_notify when the connection is healthy, never blocking. */
void tfc_tls_free(tfc_tls *t, int clean);
/* recv(2) and send(2) over t, or over fd when t is NULL: > 0 bytes, 0 the peer's end (recv),
 * -1 with errno (EAGAIN when the socket must become ready first, whichever way TLS needs it;
 * EPROTO for a TLS failure). */
ssize_t tfc_recv(tfc_tls *t, int fd, void *buf, size_t n);
ssize_t tfc_send(tfc_tls *t, int fd, const void *buf, size_t n);

#endif
