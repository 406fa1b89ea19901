/* What the two C clients (client.c: the sweep service; orders.c: the engine service) share. */
#ifndef TF_CLIENT_INTERNAL_H
#define TF_CLIENT_INTERNAL_H

/* Connects a stream socket (SOCK_CLOEXEC, blocking) to a Unix socket PATH, or to "HOST:PORT"
 * ("[v6]:PORT" too; TCP_NODELAY set). 0 and *fd, or TF_E_INVALID_ARG (a malformed address or a
 * host that does not resolve) or -errno of the last connect. */
int tfc_dial_unix(const char *path, int *fd);
int tfc_dial_tcp(const char *host_port, int *fd);

#endif
