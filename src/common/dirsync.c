/* fsync of a file's directory (dirsync.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/dirsync.h"

int tfu_sync_parent_dir(const char *path, int (*fsync_fn)(int fd))
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return -ENAMETOOLONG;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = (fsync_fn ? fsync_fn : fsync)(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc == -EINVAL ? 0 : rc;
}
