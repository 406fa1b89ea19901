/* Output files the CLI generates (journal gen, engine gen): written whole or not at all. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/dirsync.h"

volatile sig_atomic_t tf_cli_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    tf_cli_interrupted = 1;
}

static void handle_signals(int on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int tf_cli_out_begin(tf_cli_out *o, const char *cmd, const char *path, int force, uint64_t count,
                     uint64_t per_record, uint64_t fixed)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->cmd = cmd;
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!force) {
            fprintf(stderr, "tollfree %s: %s exists (use --force to replace it)\n", cmd, path);
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "tollfree %s: %s is a directory\n", cmd, path);
            return -1;
        }
    }
    if (snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path) >= (int)sizeof o->tmp) {
        fprintf(stderr, "tollfree %s: %s: %s\n", cmd, path, strerror(ENAMETOOLONG));
        return -1;
    }
    /* Refuse what cannot fit, before writing anything: the records at their largest, leaving 5%
     * of the free space. The comparison divides, so no count overflows it. */
    char dir[sizeof o->tmp];
    snprintf(dir, sizeof dir, "%s", o->tmp);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    struct statvfs vfs;
    if (statvfs(dir, &vfs) == 0) {
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        uint64_t usable = avail - avail / 20;
        if (usable < fixed || count > (usable - fixed) / per_record) {
            fprintf(stderr,
                    "tollfree %s: %" PRIu64 " records need up to %.1f GB; %.1f GB free in %s\n",
                    cmd, count, ((double)count * (double)per_record + (double)fixed) / 1e9,
                    (double)avail / 1e9, dir);
            return -1;
        }
    }
    tf_cli_interrupted = 0;
    handle_signals(1);
    unlink(o->tmp); /* a leftover of an earlier run that was killed */
    return 0;
}

int tf_cli_out_commit(tf_cli_out *o, int ok)
{
    int rc = ok && !tf_cli_interrupted ? 0 : -1;
    if (!rc && rename(o->tmp, o->path) != 0) {
        fprintf(stderr, "tollfree %s: %s: %s\n", o->cmd, o->path, strerror(errno));
        rc = -1;
    }
    if (!rc) {
        /* The file was synced by its writer; the rename becomes durable with its directory (a
         * file system that cannot sync a directory, EINVAL, counts as done). The file is in
         * place either way, but a failed sync (EIO) means it may not survive a crash: say so. */
        int drc = tfu_sync_parent_dir(o->path, NULL);
        if (drc) {
            fprintf(stderr, "tollfree %s: %s: written, but its directory was not synced: %s\n",
                    o->cmd, o->path, strerror(-drc));
            handle_signals(0);
            return -1;
        }
    }
    if (rc) {
        unlink(o->tmp);
        if (tf_cli_interrupted)
            fprintf(stderr, "tollfree %s: interrupted; %s not written\n", o->cmd, o->path);
    }
    handle_signals(0);
    return rc;
}
