/* The file I/O table (fio.h): the real system calls, or a test's; and tfo_pieces, a second
 * walk over a journal's checked records read in pieces. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tollfree/journal.h"

#include "common/dirsync.h"
#include "orderflow/fio.h"

/* No casts: the compiler checks that the libc functions have exactly these types. */
static const tfo_fio_ops real_ops = {
    .pwrite = pwrite,
    .write = write,
    .fsync = fsync,
    .fdatasync = fdatasync,
    .ftruncate = ftruncate,
};

const tfo_fio_ops *tfo_fio = &real_ops;

const tfo_fio_ops *tfo_fio_set(const tfo_fio_ops *ops)
{
    const tfo_fio_ops *old = tfo_fio;
    tfo_fio = ops ? ops : &real_ops;
    return old;
}

int tfo_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        /* at most 1 GiB a call: Linux writes at most 0x7ffff000 bytes anyway */
        ssize_t w = tfo_fio->write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int tfo_sync_parent_dir(const char *path)
{
    return tfu_sync_parent_dir(path, tfo_fio->fsync);
}

int tfo_replace_file(const char *path, const void *p, size_t n)
{
    char tmp[4096 + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = tfo_write_all(fd, p, n);
    if (!rc && tfo_fio->fsync(fd))
        rc = -errno;
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return rc;
    }
    return tfo_sync_parent_dir(path);
}

/* ---- tfo_pieces: a second walk over a checked prefix, read in pieces ---- */

#define PIECE (1u << 20)

int tfo_pieces_open(tfo_pieces *w, const char *path, unsigned long long from, unsigned long long to)
{
    memset(w, 0, sizeof *w);
    w->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (w->fd < 0)
        return -errno;
    w->cap = PIECE + TF_JOURNAL_MAX_RECORD;
    w->buf = malloc(w->cap);
    if (!w->buf) {
        close(w->fd);
        return TF_E_NOMEM;
    }
    w->at = from;
    w->end = to < from ? from : to;
    return 0;
}

/* The bytes after the unwalked rest moved to the buffer's start: up to a piece more. */
static int refill(tfo_pieces *w)
{
    size_t keep = w->have - w->pos;
    memmove(w->buf, w->buf + w->pos, keep);
    w->at += w->pos;
    w->pos = 0;
    w->have = keep;
    unsigned long long left = w->end - w->at - keep;
    size_t want = left < w->cap - keep ? (size_t)left : w->cap - keep;
    while (want) {
        ssize_t g = pread(w->fd, w->buf + w->have, want, (off_t)(w->at + w->have));
        if (g < 0 && errno == EINTR)
            continue;
        if (g < 0)
            return -errno;
        if (!g) { /* the file ends before `to`: its whole records first, then torn */
            w->end = w->at + w->have;
            w->short_file = 1;
            return 0;
        }
        w->have += (size_t)g;
        want -= (size_t)g;
    }
    return 0;
}

int tfo_pieces_next(tfo_pieces *w, const unsigned char **frame, size_t *len,
                    unsigned long long *off)
{
    for (int tries = 0;; tries++) {
        size_t rest = w->have - w->pos;
        const unsigned char *p = w->buf + w->pos;
        size_t fl = rest >= 2 ? 2 + ((size_t)p[0] | (size_t)p[1] << 8) : 0;
        if (fl && fl + TF_JOURNAL_CRC_LEN <= rest) {
            *frame = p;
            *len = fl;
            *off = w->at + w->pos;
            w->pos += fl + TF_JOURNAL_CRC_LEN;
            return 1;
        }
        if (w->at + w->have == w->end)
            return rest || w->short_file ? TF_E_OFL_TORN_RECORD : 0;
        if (tries) /* a whole piece did not hold one record */
            return TF_E_OFL_TORN_RECORD;
        int rc = refill(w);
        if (rc)
            return rc;
    }
}

void tfo_pieces_close(tfo_pieces *w)
{
    if (w->buf) {
        free(w->buf);
        close(w->fd);
    }
    memset(w, 0, sizeof *w);
    w->fd = -1;
}
