/* The file I/O table (fio.h): the real system calls, or a test's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
