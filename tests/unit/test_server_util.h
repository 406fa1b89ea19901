/* Helpers for the tests that run the real `tollfree serve` process (build/tollfree, found through
 * TF_BUILD_DIR) over real sockets: start/stop, temp dirs, raw sockets, test data. Header-only;
 * every test program that includes it is one ctest. */
#ifndef TF_TEST_SERVER_UTIL_H
#define TF_TEST_SERVER_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <dirent.h>

#include "harness.h"
#include "tollfree/client.h"
#include "tollfree/kernel.h"
#include "tollfree/wire.h"

typedef struct tserver {
    pid_t pid;
    char dir[64];
    char log[128];
    char unix_path[128];
    char shm_path[128];
    int tcp_port;
} tserver;

static inline int64_t t_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void t_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline const char *t_bin(void)
{
    static char path[1024];
    const char *b = getenv("TF_BUILD_DIR");
    snprintf(path, sizeof path, "%s/tollfree", b ? b : "build");
    return path;
}

static inline int t_mkdtemp(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/tftest.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

/* Removes dir and everything under it (a test's temporary directory). */
static inline void t_rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p)
            continue; /* not a path this suite makes */
        if (e->d_type == DT_DIR)
            t_rm_rf(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* In a forked child: die with the test, and keep off the test's stdout (ctest waits for it). */
static inline void t_child_detach(int keep_stdout)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (keep_stdout)
        return;
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 1);
        if (nul > 2)
            close(nul);
    }
}

/* Reads the whole log file into buf (NUL-terminated). */
static inline size_t t_read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        buf[0] = 0;
        return 0;
    }
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n;
}

/* Writes text to path (created or truncated) with the given mode; 0, or -1. */
static inline int t_write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    fchmod(fd, mode);
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A TCP client of 127.0.0.1:port from a chosen loopback source address (127.0.0.X: a distinct
 * peer for the per-address caps), TCP_NODELAY set. The fd, or -1. */
static inline int t_connect_tcp_from(int port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &sa.sin_addr);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Forks and runs argv (NULL-terminated): stdin from /dev/null, stderr to log, stdout to out (or
 * /dev/null); the child dies with the test and never holds the test's stdout (ctest waits for it).
 * The child's pid, or -1. */
static inline pid_t t_spawn(const char *const *argv, const char *log, const char *out)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
    int nul = open("/dev/null", O_RDWR);
    int fo = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600) : nul;
    if (nul >= 0)
        dup2(nul, 0);
    if (fo >= 0)
        dup2(fo, 1);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

/* Waits for a server's listening lines in log: tcp (its port into *tcp_port), unix, and shm when
 * want_shm. 0; or -1 if the server exited first (*pid set to 0, its log on stderr) or past the
 * hang deadline. what names it in messages. */
static inline int t_wait_listening(pid_t *pid, const char *log, int want_shm, int *tcp_port,
                                   const char *what)
{
    static char buf[1 << 16];
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; t_now_ms() < end;) {
        t_read_file(log, buf, sizeof buf);
        const char *p = strstr(buf, "listening tcp 127.0.0.1:");
        if (p && strstr(buf, "listening unix") && (!want_shm || strstr(buf, "listening shm"))) {
            *tcp_port = atoi(p + strlen("listening tcp 127.0.0.1:"));
            return 0;
        }
        int st;
        if (waitpid(*pid, &st, WNOHANG) == *pid) {
            *pid = 0;
            fprintf(stderr, "%s exited early:\n%s\n", what, buf);
            return -1;
        }
        t_sleep_ms(5);
    }
    tf_test_deadline_note(what, T_DEADLINE_MS);
    return -1;
}

/* Starts `tollfree serve` with --unix DIR/s.sock --shm DIR/shm.sock --tcp 127.0.0.1:0 plus
 * `extra` (NULL-terminated argv tail), stderr to DIR/log; waits for the listening lines. */
static inline int t_start_ex(tserver *ts, const char *const *extra, int with_listeners)
{
    memset(ts, 0, sizeof *ts);
    if (t_mkdtemp(ts->dir, sizeof ts->dir))
        return -1;
    snprintf(ts->log, sizeof ts->log, "%s/log", ts->dir);
    snprintf(ts->unix_path, sizeof ts->unix_path, "%s/s.sock", ts->dir);
    snprintf(ts->shm_path, sizeof ts->shm_path, "%s/shm.sock", ts->dir);
    const char *argv[64];
    int n = 0;
    argv[n++] = t_bin();
    argv[n++] = "serve";
    if (with_listeners) {
        argv[n++] = "--unix";
        argv[n++] = ts->unix_path;
        argv[n++] = "--shm";
        argv[n++] = ts->shm_path;
        argv[n++] = "--tcp";
        argv[n++] = "127.0.0.1:0";
    }
    for (int i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = t_spawn(argv, ts->log, NULL);
    if (pid < 0)
        return -1;
    ts->pid = pid;
    if (!with_listeners)
        return 0;
    return t_wait_listening(&ts->pid, ts->log, 1, &ts->tcp_port, "server");
}

static inline int t_start(tserver *ts, const char *const *extra)
{
    return t_start_ex(ts, extra, 1);
}

/* Waits for the child; -1 on timeout (then kills it). Returns the exit status or 128+signal. */
static inline int t_wait_exit(pid_t pid, int timeout_ms)
{
    for (int64_t end = t_now_ms() + timeout_ms; t_now_ms() < end;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        t_sleep_ms(5);
    }
    tf_test_deadline_note("waiting for the child to exit", timeout_ms);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* SIGTERM; returns the exit status (0 expected). */
static inline int t_stop(tserver *ts)
{
    if (!ts->pid)
        return -1;
    kill(ts->pid, SIGTERM);
    int rc = t_wait_exit(ts->pid, T_DEADLINE_MS);
    ts->pid = 0;
    return rc;
}

static inline void t_cleanup(tserver *ts)
{
    char p[256];
    if (ts->pid) {
        kill(ts->pid, SIGKILL);
        waitpid(ts->pid, NULL, 0);
        ts->pid = 0;
    }
    unlink(ts->unix_path);
    unlink(ts->shm_path);
    if (getenv("TF_KEEP_LOGS")) { /* debugging: keep DIR/log (its path is printed) */
        fprintf(stderr, "server log kept: %s/log\n", ts->dir);
        return;
    }
    snprintf(p, sizeof p, "%s/log", ts->dir);
    unlink(p);
    rmdir(ts->dir);
}

static inline int t_alive(const tserver *ts)
{
    int st;
    return ts->pid && waitpid(ts->pid, &st, WNOHANG) == 0;
}

static inline void t_url(const tserver *ts, const char *kind, char *out, size_t n)
{
    if (!strcmp(kind, "unix"))
        snprintf(out, n, "unix:%s", ts->unix_path);
    else if (!strcmp(kind, "tcp"))
        snprintf(out, n, "tcp:127.0.0.1:%d", ts->tcp_port);
    else
        snprintf(out, n, "shm:%s", ts->shm_path);
}

/* A client whose per-call timeout is the hang deadline (the library's default is 60 s). */
static inline int t_client_open(tf_client **c, const char *url)
{
    tf_client_opts o = {.timeout_ms = T_DEADLINE_MS};
    return tf_client_open_opts(c, url, &o);
}

/* ---- raw sockets ---- */

static inline int t_connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline int t_connect_tcp(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline int t_send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Exactly n bytes within timeout_ms: 0, -ETIMEDOUT, or -EPIPE on EOF. */
static inline int t_recv_exact(int fd, void *p, size_t n, int timeout_ms)
{
    uint8_t *b = p;
    int64_t end = t_now_ms() + timeout_ms;
    while (n) {
        int64_t left = end - t_now_ms();
        if (left <= 0) {
            tf_test_deadline_note("t_recv_exact", timeout_ms);
            return -ETIMEDOUT;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        ssize_t r = read(fd, b, n); /* sockets and pipes alike */
        if (r == 0)
            return -EPIPE;
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* 1 if the peer closed the connection within timeout_ms (reading and dropping any bytes). */
static inline int t_peer_closed(int fd, int timeout_ms)
{
    uint8_t buf[4096];
    int64_t end = t_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = end - t_now_ms();
        if (left <= 0) {
            tf_test_deadline_note("waiting for the peer to close", timeout_ms);
            return 0;
        }
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
            return 1;
    }
}

/* Reads one whole reply frame (prefix stripped) into buf; returns body_len or a negative errno. */
static inline long t_recv_frame(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
    uint8_t pre[4];
    int rc = t_recv_exact(fd, pre, 4, timeout_ms);
    if (rc)
        return rc;
    uint32_t n = tf_le32(pre);
    if (n > cap)
        return -EMSGSIZE;
    rc = t_recv_exact(fd, buf, n, timeout_ms);
    return rc ? rc : (long)n;
}

/* ---- data ---- */

/* The embedded default data set (data/default_close.f64, 150,000 f64). */
static inline double *t_default_close(int64_t *n)
{
    char path[1024];
    const char *src = getenv("TF_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/default_close.f64", src ? src : ".");
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    double *d = malloc((size_t)len);
    if (d && fread(d, 1, (size_t)len, f) != (size_t)len) {
        free(d);
        d = NULL;
    }
    fclose(f);
    *n = len / 8;
    return d;
}

/* round half to even, like Python's round() */
static inline int64_t t_round(double x)
{
    int64_t r = (int64_t)nearbyint(x);
    return r < 1 ? 1 : r;
}

/* The combo of one Hull length (docs/definition.md section 2). */
static inline void t_combo(int64_t L, int64_t *p)
{
    p[0] = L;
    p[1] = t_round((double)L / 2);
    p[2] = t_round(sqrt((double)L));
    p[3] = t_round((double)L / 2);
    p[4] = t_round((double)p[3] / 3);
    p[5] = t_round((double)p[3] / 2);
}

/* The default grid: 80 combos, L_j = 6 + (j*194)//79. */
static inline int64_t *t_default_grid(int64_t *n)
{
    *n = 80;
    int64_t *g = malloc(80 * 48);
    for (int j = 0; g && j < 80; j++)
        t_combo(6 + (j * 194) / 79, g + 6 * j);
    return g;
}

static inline uint64_t t_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random walk of n closes. */
static inline void t_random_close(double *c, int64_t n, uint64_t *s)
{
    double px = 100.0;
    for (int64_t i = 0; i < n; i++) {
        px *= 1.0 + ((double)(t_rng(s) % 20001) / 10000.0 - 1.0) * 0.002;
        c[i] = px;
    }
}

/* n random combos with windows in 1..maxw. */
static inline void t_random_params(int64_t *p, int64_t n, int64_t maxw, uint64_t *s)
{
    for (int64_t i = 0; i < 6 * n; i++)
        p[i] = 1 + (int64_t)(t_rng(s) % (uint64_t)maxw);
}

/* ---- raw frames ---- */

/* A v1 request frame in a malloc'ed buffer; *len set. */
static inline uint8_t *t_v1_frame(uint8_t op, const double *close, uint32_t n_bars,
                                  const int64_t *params, uint32_t n_combos, size_t *len)
{
    size_t body = 9 + 8 * (size_t)n_bars + 48 * (size_t)n_combos;
    uint8_t *f = malloc(4 + body);
    tf_put32(f, (uint32_t)body);
    f[4] = op;
    tf_put32(f + 5, n_bars);
    tf_put32(f + 9, n_combos);
    if (n_bars)
        memcpy(f + 13, close, 8 * (size_t)n_bars);
    if (n_combos)
        memcpy(f + 13 + 8 * (size_t)n_bars, params, 48 * (size_t)n_combos);
    *len = 4 + body;
    return f;
}

/* A v2 frame: header + payload bytes. */
static inline size_t t_v2_frame(uint8_t *dst, uint8_t op, uint64_t id, const void *payload,
                                size_t n)
{
    tf_wire_put_header(dst, (uint32_t)(12 + n), op, id);
    if (n)
        memcpy(dst + 16, payload, n);
    return 16 + n;
}

/* An echo round trip on a raw connection (frame id id): 1 when it came back whole, so the
 * connection is still usable and in sync after whatever the test sent before. */
static inline int t_echo_ok(int fd, uint64_t id)
{
    uint8_t fr[64], rb[64];
    size_t n = t_v2_frame(fr, TF_OP_ECHO, id, "ping", 4);
    if (t_send_all(fd, fr, n))
        return 0;
    long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
    return bl == 16 && rb[0] == TF_OP_ECHO && tf_le64(rb + 4) == id && !memcmp(rb + 12, "ping", 4);
}

/* Decodes an error frame body: returns its code (0 if not an error frame). */
static inline int t_error_code(const uint8_t *body, long n)
{
    if (n < 20 || body[0] != TF_OP_ERROR)
        return 0;
    return (int32_t)tf_le32(body + 12);
}

/* Open file descriptors of process pid (from /proc/PID/fd), -1 if unreadable. */
static inline int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A field of /proc/PID/status: VmRSS and VmHWM in KiB, Threads as a count; -1 if missing. */
static inline long proc_status(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':') {
            v = atol(line + fl + 1);
            break;
        }
    fclose(f);
    return v;
}

#endif
