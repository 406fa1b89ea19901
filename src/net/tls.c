/* TLS for the connection layer (tls.h): OpenSSL libssl, non-blocking. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "net/tls.h"
#include "tollfree/error.h"

struct tfn_tls {
    SSL_CTX *ctx;
};

/* The reason of the oldest error on this thread's queue (then the queue is cleared). */
static void reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "%s", fallback);
    ERR_clear_error();
}

/* The key, read from the same open file whose mode was checked (no window to swap it). */
static int load_key(SSL_CTX *ctx, const char *path, char *err, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, cap, "--tls-key %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, cap, "--tls-key %s: not a regular file", path);
        return TF_E_INVALID_ARG;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        close(fd);
        snprintf(err, cap,
                 "--tls-key %s: mode %04o lets group or others read or write the private key: "
                 "run `chmod 600 %s`",
                 path, (unsigned)(st.st_mode & 07777), path);
        return -EPERM;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        int e = errno;
        close(fd);
        snprintf(err, cap, "--tls-key %s: %s", path, strerror(e));
        return -e;
    }
    EVP_PKEY *key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!key) {
        char r[256];
        reason(r, sizeof r, "no private key");
        snprintf(err, cap, "--tls-key %s: not a PEM private key (%s)", path, r);
        return TF_E_INVALID_ARG;
    }
    int ok = SSL_CTX_use_PrivateKey(ctx, key);
    EVP_PKEY_free(key);
    if (ok != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        char r[256];
        reason(r, sizeof r, "it does not match the certificate");
        snprintf(err, cap, "--tls-key %s: %s", path, r);
        return TF_E_INVALID_ARG;
    }
    return 0;
}

int tfn_tls_open(const char *cert_pem, const char *key_pem, char *err, size_t errcap, tfn_tls **out)
{
    *out = NULL;
    ERR_clear_error();
    tfn_tls *t = calloc(1, sizeof *t);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!t || !ctx) {
        free(t);
        SSL_CTX_free(ctx);
        snprintf(err, errcap, "out of memory for a TLS context");
        return TF_E_NOMEM;
    }
    t->ctx = ctx;
    /* TLS 1.2 at least; 1.3 is preferred (the highest both sides have is chosen). */
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* No renegotiation (a peer could make the server redo handshakes at will); no session
     * tickets (nothing resumes, and each would cost a write after the handshake); a peer that
     * closes without close_notify is an end like any other: the frames say where the stream may
     * end, and the layer tells a clean end from a cut frame. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* Partial writes, from a buffer that may move between retries (the output buffer slides and
     * grows). No SSL_MODE_RELEASE_BUFFERS: it would free and allocate the record buffers around
     * every read and write (the hot path never allocates); a connection at rest gives them back
     * instead (tfn_tls_conn_rest), and gets them again with its next byte. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    int rc = 0;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_pem) != 1) {
        char r[256];
        reason(r, sizeof r, "cannot read it");
        snprintf(err, errcap, "--tls-cert %s: not a PEM certificate chain (%s)", cert_pem, r);
        rc = TF_E_INVALID_ARG;
    }
    if (!rc)
        rc = load_key(ctx, key_pem, err, errcap);
    if (rc) {
        tfn_tls_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

void tfn_tls_close(tfn_tls *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t);
}

tfn_ssl *tfn_tls_conn_new(tfn_tls *t, int fd)
{
    ERR_clear_error();
    SSL *s = SSL_new(t->ctx);
    if (!s)
        return NULL;
    if (SSL_set_fd(s, fd) != 1) {
        SSL_free(s);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(s);
    return s;
}

int tfn_tls_conn_rest(tfn_ssl *s)
{
    /* It refuses (0) while a record is partly read or written: nothing buffered is ever lost. */
    int r = SSL_free_buffers(s);
    ERR_clear_error();
    return r == 1;
}

void tfn_tls_conn_free(tfn_ssl *s, int clean)
{
    if (!s)
        return;
    ERR_clear_error();
    if (clean)
        SSL_shutdown(s); /* one non-blocking try: the socket closes right after */
    SSL_free(s);
    ERR_clear_error();
}

/* What a call that returned r <= 0 means: WANT_*, 0 (a clean end), or a negative code. */
static int outcome(SSL *s, int r, int *want, char *why, size_t cap)
{
    int e = errno;
    int se = SSL_get_error(s, r);
    switch (se) {
    case SSL_ERROR_WANT_READ:
        *want = TFN_TLS_WANT_READ;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        *want = TFN_TLS_WANT_WRITE;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        if (why)
            reason(why, cap, e ? strerror(e) : "the peer closed the connection");
        ERR_clear_error();
        return e ? -e : -ECONNRESET;
    default:
        if (why)
            reason(why, cap, "protocol error");
        ERR_clear_error();
        return -EPROTO;
    }
}

int tfn_tls_handshake(tfn_ssl *s, char *why, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int r = SSL_do_handshake(s);
    if (r == 1)
        return 0;
    int want = 0;
    int rc = outcome(s, r, &want, why, cap);
    if (rc == -EAGAIN)
        return want;
    if (rc == 0) {
        snprintf(why, cap, "the peer closed during the handshake");
        return -ECONNRESET;
    }
    return rc;
}

ssize_t tfn_tls_read(tfn_ssl *s, void *buf, size_t n, int *want)
{
    ERR_clear_error();
    errno = 0;
    size_t got = 0;
    int r = SSL_read_ex(s, buf, n, &got);
    if (r == 1)
        return (ssize_t)got;
    return outcome(s, r, want, NULL, 0);
}

ssize_t tfn_tls_write(tfn_ssl *s, const void *buf, size_t n, int *want)
{
    ERR_clear_error();
    errno = 0;
    size_t put = 0;
    int r = SSL_write_ex(s, buf, n, &put);
    if (r == 1)
        return (ssize_t)put;
    int rc = outcome(s, r, want, NULL, 0);
    return rc == 0 ? -EPIPE : rc;
}
