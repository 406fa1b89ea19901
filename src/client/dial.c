/* Dialing a server, for both C clients (client_internal.h). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

int tfc_dial_tcp(const char *spec, int *out)
{
    char host[256], port[32];
    const char *colon = strrchr(spec, ':');
    if (!colon)
        return TF_E_INVALID_ARG;
    size_t hl = (size_t)(colon - spec);
    const char *h = spec;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    size_t pl = strlen(colon + 1);
    if (hl == 0 || hl >= sizeof host || pl == 0 || pl >= sizeof port)
        return TF_E_INVALID_ARG;
    memcpy(host, h, hl);
    host[hl] = 0;
    memcpy(port, colon + 1, pl + 1);
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
