/* TLS for the connection layer (internal; OpenSSL libssl): a server context (certificate chain
 * and key, TLS 1.2 or later) and the non-blocking per-connection calls the TLS transport
 * (transport.c) drives.
 *
 * Threads: a context is read-only once made and may serve every thread. A connection's SSL object
 * is used only by the thread that owns the connection at the time (the loop, or the worker it is
 * parked on: net.h, "Threads"), so no SSL object is ever used by two threads at once; OpenSSL's
 * error queue is per thread, and every call here clears it first.
 */
#ifndef TF_NET_TLS_H
#define TF_NET_TLS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct tfn_tls tfn_tls;

/* Loads the certificate chain (PEM, the server's certificate first) and the private key (PEM).
 * The key file must be a regular file that neither group nor others may read or write (the
 * mode check of the sessions file): one that is refused names the file, its mode and `chmod 600`.
 * Returns 0 and *out, or a negative code with a line in err (no prefix, no newline). */
int tfn_tls_open(const char *cert_pem, const char *key_pem, char *err, size_t errcap,
                 tfn_tls **out);
/* NULL is a no-op. Connections made from it hold their own reference: close it any time. */
void tfn_tls_close(tfn_tls *t);

/* ---- one connection (transport.c) ---- */

typedef struct ssl_st tfn_ssl;

/* What one accepted TLS connection costs in the server's memory counter (--max-memory), measured
 * by test_net_tls.c ("TLS cost"): OpenSSL's allocations for the server side of one connection,
 * counted with CRYPTO_set_mem_functions (TLS 1.3, an ECDSA P-256 certificate, OpenSSL 3.0.19): the
 * handshake peaks at 80,610 to 80,618 bytes, the connection then holds 47,170, and 13,874 while at
 * rest (tfn_tls_conn_rest gave back its two record buffers, 33,296 bytes). The first two figures
 * are rounded up, the third down (never count back more than went); the test fails when a measure
 * passes its figure, or when a figure is more than twice its measure. The handshake figure is
 * what a usual client costs, not a bound: a longer certificate chain (RSA, intermediates), or a
 * client that sends a ClientHello of many KiB, makes the peak higher for the handshake's time. */
#define TFN_TLS_HANDSHAKE_BYTES ((size_t)80 << 10) /* from the accept to the handshake's end */
#define TFN_TLS_CONN_BYTES ((size_t)48 << 10)      /* then, until the connection is freed */
#define TFN_TLS_BUF_BYTES ((size_t)32 << 10)       /* of which given back while at rest */

/* A server-side SSL object over the non-blocking socket fd (NULL: out of memory). */
tfn_ssl *tfn_tls_conn_new(tfn_tls *t, int fd);
/* Gives back the two record buffers while nothing is buffered in them (SSL_free_buffers): 1
 * when they went, 0 when they are in use (kept). The next read or write allocates them again. */
int tfn_tls_conn_rest(tfn_ssl *s);
/* Frees it; clean = 1 sends a close_notify first (never after a failure, never blocking). */
void tfn_tls_conn_free(tfn_ssl *s, int clean);

/* What a call could not finish for: the socket must become readable or writable first. */
enum { TFN_TLS_WANT_READ = 1, TFN_TLS_WANT_WRITE = 2 };

/* Drives the handshake: 0 done; TFN_TLS_WANT_READ / TFN_TLS_WANT_WRITE; < 0 failed (-EPROTO, or
 * -errno of the socket; why gets OpenSSL's reason). */
int tfn_tls_handshake(tfn_ssl *s, char *why, size_t cap);
/* Reads up to n bytes of plaintext: > 0 bytes, 0 the peer's end, -EAGAIN (*want says for what),
 * or < 0 (-EPROTO, -errno). */
ssize_t tfn_tls_read(tfn_ssl *s, void *buf, size_t n, int *want);
/* Writes up to n bytes (partial writes on): > 0 bytes taken, -EAGAIN (*want), or < 0. A write
 * that returned -EAGAIN must be retried with the same bytes first (they may move: the buffer is
 * allowed to), never fewer. */
ssize_t tfn_tls_write(tfn_ssl *s, const void *buf, size_t n, int *want);

#endif
