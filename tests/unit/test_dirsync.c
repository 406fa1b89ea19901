/* The one directory-sync helper (src/common/dirsync.h) the journal, snapshots and the CLI's
 * output files share: which directory it syncs, what it tolerates (EINVAL: a file system that
 * cannot sync a directory) and what it returns (every other error). The fsync is injected, so
 * each outcome is forced and the directory it was called on is checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dirsync.h"
#include "harness.h"
#include "tollfree/error.h"

static int calls, fail_errno;
static struct stat synced; /* what the injected fsync was called on */

static int fake_fsync(int fd)
{
    calls++;
    if (fstat(fd, &synced))
        memset(&synced, 0, sizeof synced);
    if (fail_errno) {
        errno = fail_errno;
        return -1;
    }
    return 0;
}

static int same_file(const struct stat *a, const char *path)
{
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* The directory synced for each shape of path: its parent, "." or "/". */
static void test_which_directory(const char *tmp)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/file", tmp);
    calls = 0, fail_errno = 0;
    CHECK_RC(tfu_sync_parent_dir(path, fake_fsync), 0);
    CHECK_EQ(calls, 1);
    CHECK(S_ISDIR(synced.st_mode) && same_file(&synced, tmp));

    CHECK_RC(tfu_sync_parent_dir("file-without-a-slash", fake_fsync), 0);
    CHECK(S_ISDIR(synced.st_mode) && same_file(&synced, "."));

    CHECK_RC(tfu_sync_parent_dir("/file", fake_fsync), 0);
    CHECK(S_ISDIR(synced.st_mode) && same_file(&synced, "/"));

    /* The real fsync(2) when none is given: the temporary directory syncs. */
    CHECK_RC(tfu_sync_parent_dir(path, NULL), 0);
}

/* EINVAL counts as done; any other fsync failure is returned as -errno. */
static void test_what_it_tolerates(const char *tmp)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/file", tmp);
    const int errs[] = {EIO, ENOSPC, EROFS, EDQUOT};
    fail_errno = EINVAL;
    CHECK_RC(tfu_sync_parent_dir(path, fake_fsync), 0);
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        fail_errno = errs[i];
        CHECK_RC(tfu_sync_parent_dir(path, fake_fsync), -errs[i]);
    }
    fail_errno = 0;
}

/* A directory that cannot be opened, or a directory part too long: -errno, no fsync called. */
static void test_open_failures(const char *tmp)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/missing/file", tmp);
    calls = 0;
    CHECK_RC(tfu_sync_parent_dir(path, fake_fsync), -ENOENT);
    snprintf(path, sizeof path, "%s/plain/file", tmp); /* the parent is a file */
    char plain[4200];
    snprintf(plain, sizeof plain, "%s/plain", tmp);
    FILE *f = fopen(plain, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK_RC(tfu_sync_parent_dir(path, fake_fsync), -ENOTDIR);
    unlink(plain);

    static char longp[4200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[4097] = '/'; /* a directory part of 4097 bytes */
    longp[sizeof longp - 1] = '\0';
    CHECK_RC(tfu_sync_parent_dir(longp, fake_fsync), -ENAMETOOLONG);
    CHECK_EQ(calls, 0);
}

int main(void)
{
    char tmp[] = "/tmp/tf_dirsync_XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_which_directory(tmp);
    test_what_it_tolerates(tmp);
    test_open_failures(tmp);
    rmdir(tmp);
    return tf_test_report();
}
