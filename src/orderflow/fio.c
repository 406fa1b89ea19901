/* The file I/O table (fio.h): the real system calls, or a test's. */
#include <unistd.h>

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
