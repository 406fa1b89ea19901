/* The CLI's output files (src/cli/outfile.c) when the directory sync after the rename fails: the
 * real `tollfree journal gen` and `engine gen` binaries run with fsync(2) failing for real (EIO,
 * from a seccomp filter the test installs in the child before exec), and must say which file's
 * directory was not synced, exit non-zero and print no success line.
 *
 * A filter sees a system call's number and arguments, not what the descriptor is, and has no
 * counter: it fails fsync on descriptor 3 only. The child starts with 0, 1 and 2 open, so while
 * the journal writes OUT.tmp its file is descriptor 3 (synced with fdatasync, which the filter
 * lets through) and the directory sync of its header takes 4; once it is closed and renamed, the
 * commit's directory sync opens the directory as 3 and fails. Should the writer's descriptors
 * change, the journal's own sync fails instead and the message checks below fail: the test
 * cannot pass without the commit's sync failing. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "test_server_util.h"

#if defined(__x86_64__)
#define T_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define T_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define FAILED_FD 3

#ifdef T_AUDIT_ARCH
/* fsync(FAILED_FD) returns EIO; every other call runs. 0, or -1 when filters are not allowed. */
static int fail_fsync_on_fd3(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, T_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fsync, 0, 3),
        /* the low half of the first argument (both architectures are little-endian) */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FAILED_FD, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EIO & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = (unsigned short)(sizeof f / sizeof f[0]), .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -1 : 0;
}
#else
static int fail_fsync_on_fd3(void)
{
    return -1;
}
#endif

/* Runs the CLI with argv (argv[0] is replaced by the binary), stdout and stderr to out and err,
 * only descriptors 0..2 open, the filter when failing. Returns the exit status, 126 when the
 * filter could not be installed, -1 when the child did not exit. */
static int run_cli(const char **argv, const char *out, const char *err, int failing)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(125);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        if (failing && fail_fsync_on_fd3())
            _exit(126);
        argv[0] = t_bin();
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* One generator: first it writes OUT with every fsync working (exit 0; journal gen's success
 * line), then again with --force and the commit's directory sync failing. Returns 0, or 1 to
 * skip. */
static int check_gen(const char *dir, const char *cmd)
{
    char path[512], out[512], err[512], text[4096], want[1024];
    snprintf(path, sizeof path, "%s/%s.ofl", dir, cmd);
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(err, sizeof err, "%s/stderr", dir);
    const char *plain[] = {NULL, cmd, "gen", "--count", "10", path, NULL};
    CHECK_EQ(run_cli(plain, out, err, 0), 0);
    t_read_file(out, text, sizeof text);
    snprintf(want, sizeof want, "%s: 10 records", path);
    CHECK(strcmp(cmd, "journal") != 0 || strstr(text, want) != NULL); /* engine gen: silent */
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 0);

    const char *again[] = {NULL, cmd, "gen", "--count", "10", "--force", path, NULL};
    int rc = run_cli(again, out, err, 1);
    if (rc == 126) {
        printf("SKIP %s gen: a seccomp filter cannot be installed here\n", cmd);
        return 1;
    }
    CHECK(rc != 0 && rc != 125 && rc != 127);
    t_read_file(err, text, sizeof text);
    snprintf(want, sizeof want,
             "tollfree %s gen: %s: written, but its directory was not synced: %s", cmd, path,
             strerror(EIO));
    CHECK(strstr(text, want) != NULL);
    if (!strstr(text, want))
        printf("  stderr was: %s\n", text);
    CHECK_EQ(t_read_file(out, text, sizeof text), 0); /* no success line */
    /* The rename happened before the sync: the file is in place, the temporary gone. */
    CHECK(stat(path, &st) == 0 && st.st_size > 0);
    snprintf(want, sizeof want, "%s.tmp", path);
    CHECK(stat(want, &st) != 0 && errno == ENOENT);
    return 0;
}

int main(void)
{
    struct stat st;
    if (stat(t_bin(), &st) != 0) {
        printf("SKIP: %s is not built yet\n", t_bin());
        return tf_test_report();
    }
    char dir[64];
    CHECK(t_mkdtemp(dir, sizeof dir) == 0);
    if (check_gen(dir, "journal") == 0)
        check_gen(dir, "engine");
    t_rm_rf(dir);
    return tf_test_report();
}
