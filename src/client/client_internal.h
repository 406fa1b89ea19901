/* What the two C clients (client.c: the sweep service; orders.c: the engine service) share. */
#ifndef TF_CLIENT_INTERNAL_H
#define TF_CLIENT_INTERNAL_H

#include <stdint.h>

/* A parsed server URL (docs/protocol.md, "URLs"; the same grammar as the Python clients, pinned
 * by tests/vectors/urls.txt):
 *   unix:PATH | shm:PATH | tcp:[HOST:]PORT
 * PATH is non-empty and shorter than sun_path (108 bytes); HOST is a name, an IPv4 address or a
 * bracketed IPv6 address ([::1]), 127.0.0.1 when left out; PORT is 1 to 5 decimal digits, 1..65535.
 * Schemes are lower case. */
enum { TFC_UNIX = 1, TFC_TCP = 2, TFC_SHM = 3 };
#define TFC_MAX_PATH 107
#define TFC_MAX_HOST 255
typedef struct tfc_url {
    int scheme;                  /* TFC_* */
    char path[TFC_MAX_PATH + 1]; /* unix, shm */
    char host[TFC_MAX_HOST + 1]; /* tcp: brackets removed */
    uint16_t port;               /* tcp */
} tfc_url;

/* 0, or TF_E_INVALID_ARG for anything the grammar does not allow (nothing is resolved here). */
int tfc_parse_url(const char *url, tfc_url *out);

/* Connects a stream socket (SOCK_CLOEXEC, blocking) to a Unix socket PATH, or to HOST and PORT
 * (TCP_NODELAY set). 0 and *fd, or TF_E_INVALID_ARG (a path too long, a host that does not
 * resolve) or -errno of the last connect. */
int tfc_dial_unix(const char *path, int *fd);
int tfc_dial_tcp(const char *host, uint16_t port, int *fd);

#endif
