/* Dialing a server, for both C clients (client_internal.h). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
    if (strncmp(url, "tcp:", 4) != 0)
        return TF_E_INVALID_ARG;
    out->scheme = TFC_TCP;
    rest = url + 4;
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
