/* Benchmark of `tollfree engine serve` (a program, never a test): the real binary, a real Unix
 * socket, a real journal directory.
 *
 *   1. pipelined commands/s on one connection, durability none and group (a writer thread sends N
 *      pre-encoded
 *      commands, a reader thread counts the replies; timed from the first byte sent to the last
 *      reply's Heartbeat);
 *   2. one command's round trip over Unix, median and p99, with --durability none, group, every;
 *   3. restart time with N journaled commands (from exec to the listening line: replay included);
 *   4. a lone client's round trip (median, max of --lone calls, 100 ms apart) while 3 other
 *      connections each send 256 commands at a time and wait for their replies, durability group
 *      and every.
 *
 * The commands alternate a resting buy and a crossing sell at one price, so the book stays small
 * and every other command trades. Usage: bench_engine_service [--count N] [--rtt N] [--lone N]
 * [--bin PATH/tollfree] [--dir TMPDIR] [--snapshot-every N] [--only restart|pipelined] [--keep 1]
 * [--crash 1] [--sessions 1]
 * (--only pipelined: the two pipelined runs alone, for an A/B of two binaries (--bin);
 * --only restart: the group-durability pipelined run and the restarts after it, three times;
 * --keep 1 leaves that journal directory for a profile; --sessions 1: the service runs with a
 * sessions file and the pipelined commands come from a logged-on session, so every journaled
 * command is a Keyed record, and one command in 1,000 is a buy far below the market that rests
 * for good: a restart from a snapshot then has orders whose owners it must find). Defaults: N =
 * 1000000, 2000 round trips per level, the tollfree next to this program's bench/ folder, /tmp. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "tollfree/orderflow.h"
#include "tollfree/orders.h"

static char g_bin[1024], g_root[512];
static const char *g_snapshot_every; /* --snapshot-every N passed to the service (NULL: none) */
static char g_sessions[600];         /* --sessions 1: the sessions file ("": none) */
#define BENCH_SESSION "bench"
#define BENCH_SECRET "bench-secret-0123456789"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct server {
    pid_t pid;
    char dir[600], sock[700], log[700];
} server;

/* Starts the service; returns the seconds until it listens (replay included), < 0 on failure. */
static double start(server *s, const char *name, const char *durability, int fresh)
{
    snprintf(s->dir, sizeof s->dir, "%s/%s", g_root, name);
    snprintf(s->sock, sizeof s->sock, "%s.sock", s->dir);
    snprintf(s->log, sizeof s->log, "%s.log", s->dir);
    if (fresh) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
        if (system(cmd) != 0)
            return -1;
    }
    unlink(s->log);
    double t0 = now_s();
    s->pid = fork();
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 1);
        const char *av[16] = {g_bin,    "engine", "serve",        "--journal", s->dir,
                              "--unix", s->sock,  "--durability", durability,  "--quiet"};
        int n = 10;
        if (g_snapshot_every) {
            av[n++] = "--snapshot-every";
            av[n++] = g_snapshot_every;
        }
        if (g_sessions[0]) {
            av[n++] = "--sessions";
            av[n++] = g_sessions;
        }
        execv(g_bin, (char *const *)av);
        _exit(127);
    }
    char buf[8192];
    for (;;) {
        FILE *f = fopen(s->log, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = 0;
        if (strstr(buf, "listening unix"))
            return now_s() - t0;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            fprintf(stderr, "the service exited:\n%s\n", buf);
            return -1;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* --crash 1: every stop is a kill -9 (no snapshot at a clean stop: a restart loads the last
 * periodic snapshot and replays the tail after it); else SIGTERM, a clean stop. */
static int g_crash;

static void stop(server *s)
{
    kill(s->pid, g_crash ? SIGKILL : SIGTERM);
    waitpid(s->pid, NULL, 0);
}

static int connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    return fd;
}

/* Command i: even = a resting buy at 100, odd = a sell at 100 that fills it. */
static tf_ofl_msg make_cmd(uint64_t i)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.account_id = 1 + (i & 1),
                                     .client_order_id = i + 1,
                                     .instrument_id = 1,
                                     .price = 100,
                                     .quantity = {1, 0},
                                     .side = (uint8_t)(i & 1)};
    return m;
}

static size_t encode_cmd(uint8_t *buf, uint64_t i)
{
    tf_ofl_msg m = make_cmd(i);
    return (size_t)tf_ofl_frame_encode(buf, TF_OFL_MAX_FRAME, &m);
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads frames until `replies` Heartbeats were seen. */
static int read_replies(int fd, uint64_t replies)
{
    static uint8_t buf[1 << 20];
    size_t have = 0;
    uint64_t got = 0;
    while (got < replies) {
        ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t)r;
        size_t p = 0;
        while (have - p >= 2) {
            size_t fl = 2 + ((size_t)buf[p] | (size_t)buf[p + 1] << 8);
            if (have - p < fl)
                break;
            got += buf[p + 2] == TF_OFL_HEARTBEAT;
            p += fl;
        }
        memmove(buf, buf + p, have - p);
        have -= p;
    }
    return 0;
}

typedef struct writer {
    int fd;
    const uint8_t *buf;
    size_t len;
    int rc;
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    w->rc = send_all(w->fd, w->buf, w->len);
    return NULL;
}

static double pipelined(server *s, uint64_t n)
{
    uint8_t *buf = malloc(n * 68);
    size_t len = 0;
    for (uint64_t i = 0; i < n; i++)
        len += encode_cmd(buf + len, i);
    int fd = connect_unix(s->sock);
    if (fd < 0 || !buf)
        return -1;
    writer w = {fd, buf, len, 0};
    pthread_t th;
    double t0 = now_s();
    pthread_create(&th, NULL, writer_main, &w);
    int rc = read_replies(fd, n);
    double t = now_s() - t0;
    pthread_join(th, NULL);
    close(fd);
    free(buf);
    return rc || w.rc ? -1 : t;
}

/* --sessions 1: the same flow from a logged-on session (every command a Keyed record), except
 * that command i % 1000 == 999 is a buy at 50 of account 1, which rests for good. */
static double pipelined_session(server *s, uint64_t n)
{
    enum { CHUNK = 65536 };
    char url[800];
    snprintf(url, sizeof url, "unix:%s", s->sock);
    tf_orders *c = NULL;
    tf_ofl_msg *cmds = malloc(CHUNK * sizeof *cmds);
    tf_orders_opts o = {.size = sizeof o, .max_inflight = 16384};
    int rc = cmds ? tf_orders_connect_session(&c, url, BENCH_SESSION, BENCH_SECRET,
                                              strlen(BENCH_SECRET), &o)
                  : -1;
    double t0 = now_s();
    for (uint64_t i = 0; !rc && i < n;) {
        size_t k = 0;
        for (; k < CHUNK && i < n; k++, i++) {
            cmds[k] = make_cmd(i);
            if (i % 1000 == 999) {
                cmds[k].new_limit.account_id = 1;
                cmds[k].new_limit.side = TF_OFL_BUY;
                cmds[k].new_limit.price = 50;
            }
        }
        rc = tf_orders_send_many(c, cmds, k, NULL, 0, NULL, NULL) < 0;
    }
    double t = now_s() - t0;
    tf_orders_close(c);
    free(cmds);
    return rc ? -1 : t;
}

/* The sessions file of --sessions 1 (mode 0600, as the service requires). */
static int write_sessions(void)
{
    snprintf(g_sessions, sizeof g_sessions, "%s/sessions", g_root);
    int fd = open(g_sessions, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    const char line[] = BENCH_SESSION " " BENCH_SECRET " 1,2\n";
    int rc = write(fd, line, sizeof line - 1) == (ssize_t)(sizeof line - 1) ? 0 : -1;
    close(fd);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int round_trips(server *s, int n, double *med, double *p99)
{
    int fd = connect_unix(s->sock);
    if (fd < 0)
        return -1;
    double *t = malloc((size_t)n * sizeof *t);
    uint8_t b[TF_OFL_MAX_FRAME];
    for (int i = -100; i < n; i++) { /* 100 warm-up calls */
        size_t l = encode_cmd(b, (uint64_t)(i + 100));
        double t0 = now_s();
        if (send_all(fd, b, l) || read_replies(fd, 1))
            return -1;
        if (i >= 0)
            t[i] = now_s() - t0;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *med = t[n / 2];
    *p99 = t[(size_t)((double)n * 0.99)];
    free(t);
    close(fd);
    return 0;
}

/* ---- 4. a lone client among busy ones ---- */

static volatile int g_busy_stop;

/* Reads whole frames until n Heartbeats (thread-safe: no shared buffer). */
static int read_heartbeats(int fd, int n)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    for (int got = 0; got < n;) {
        size_t need = 2, have = 0;
        for (int part = 0; part < 2; part++, need = (size_t)f[0] | (size_t)f[1] << 8, have = 0)
            while (have < need) {
                ssize_t r = recv(fd, f + 2 * part + have, need - have, 0);
                if (r <= 0 || need > sizeof f - 2)
                    return -1;
                have += (size_t)r;
            }
        got += f[2] == TF_OFL_HEARTBEAT;
    }
    return 0;
}

static void *busy_client(void *arg)
{
    server *s = arg;
    int fd = connect_unix(s->sock);
    uint8_t *b = malloc(256 * TF_OFL_MAX_FRAME);
    for (uint64_t i = 0; fd >= 0 && b && !g_busy_stop;) {
        size_t l = 0;
        for (int k = 0; k < 256; k++, i++)
            l += encode_cmd(b + l, i);
        if (send_all(fd, b, l) || read_heartbeats(fd, 256))
            break;
    }
    free(b);
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int lone_among_busy(server *s, int n, double *med, double *max)
{
    pthread_t t[3];
    g_busy_stop = 0;
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, busy_client, s);
    struct timespec gap = {0, 100000000};
    nanosleep(&gap, NULL);
    int fd = connect_unix(s->sock), rc = fd < 0;
    double *lat = malloc((size_t)n * sizeof *lat);
    uint8_t b[TF_OFL_MAX_FRAME];
    for (int i = 0; !rc && i < n; i++) {
        size_t l = encode_cmd(b, 1000000000u + 2 * (uint64_t)i); /* a resting buy */
        double t0 = now_s();
        rc = send_all(fd, b, l) || read_heartbeats(fd, 1);
        lat[i] = now_s() - t0;
        nanosleep(&gap, NULL);
    }
    g_busy_stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL); /* each ends after its batch in flight */
    if (fd >= 0)
        close(fd);
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    *med = lat[n / 2];
    *max = lat[n - 1];
    free(lat);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    uint64_t count = 1000000;
    int rtt = 2000, lone = 15, keep = 0, sessions = 0;
    const char *dir = "/tmp", *bin = NULL, *only = NULL;
    const bench_opt opts[] = {
        {"--count", BENCH_OPT_U64, &count, "N",
         "commands per pipelined run, the restarts' journal (default 1000000)"},
        {"--rtt", BENCH_OPT_INT, &rtt, "N", "round trips per durability level (default 2000)"},
        {"--lone", BENCH_OPT_INT, &lone, "N",
         "a lone client's calls among busy ones (default 15; 0: none)"},
        {"--bin", BENCH_OPT_STR, &bin, "PATH/tollfree",
         "the binary (default: the tollfree next to this program's bench/)"},
        {"--dir", BENCH_OPT_STR, &dir, "TMPDIR", "where the journals go (default /tmp)"},
        {"--snapshot-every", BENCH_OPT_STR, &g_snapshot_every, "N",
         "passed to the service (default: not passed)"},
        {"--only", BENCH_OPT_STR, &only, "restart|pipelined",
         "pipelined: the two pipelined runs alone (an A/B of two --bin);\n"
         "restart: the group-durability run, then the restarts, three times\n"
         "(default: every part)"},
        {"--keep", BENCH_OPT_INT, &keep, "1",
         "with --only restart: keep the journal, for a profile (default 0)"},
        {"--crash", BENCH_OPT_INT, &g_crash, "1", "every stop a kill -9, not SIGTERM (default 0)"},
        {"--sessions", BENCH_OPT_INT, &sessions, "1",
         "the pipelined commands from a logged-on session (Keyed records),\n"
         "one in 1,000 a buy that rests for good (default 0)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (only && strcmp(only, "restart") && strcmp(only, "pipelined"))
        bench_args_refuse(&args, "--only restart or pipelined, not %s", only);
    int restart_only = only && !strcmp(only, "restart");
    int pipelined_only = only && !strcmp(only, "pipelined");
    snprintf(g_bin, sizeof g_bin, "%s", bin ? bin : "");
    if (!g_bin[0]) {
        char self[900];
        ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
        self[l > 0 ? l : 0] = 0;
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = 0;
        snprintf(g_bin, sizeof g_bin, "%s/../tollfree", self);
    }
    if (rtt < 1)
        rtt = 1;
    snprintf(g_root, sizeof g_root, "%s/tf-bench-engine.%d", dir, (int)getpid());
    if (mkdir(g_root, 0700) != 0) {
        perror(g_root);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (sessions && write_sessions()) {
        perror(g_sessions);
        return 1;
    }
    printf("tollfree engine serve: %s, journal under %s%s\n", g_bin, g_root,
           sessions ? ", commands from a logged-on session (Keyed)" : "");

    server s;
    const char *plevels[] = {"none", "group"};
    for (int k = restart_only; k < 2; k++) {
        if (start(&s, "pipelined", plevels[k], 1) < 0)
            return 1;
        double t = sessions ? pipelined_session(&s, count) : pipelined(&s, count);
        stop(&s);
        if (t <= 0)
            return 1;
        printf("pipelined, durability %-5s, one connection: %llu commands in %.3f s = %.2f M "
               "commands/s\n",
               plevels[k], (unsigned long long)count, t, (double)count / t / 1e6);
    }
    if (pipelined_only) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        return system(cmd) == 0 ? 0 : 1;
    }

    double rs = start(&s, "pipelined", "group", 0);
    stop(&s);
    printf("restart with %llu journaled commands (%s%s, exec to listening): %.3f s\n",
           (unsigned long long)count,
           g_snapshot_every ? "snapshot + tail" : "the service's default snapshots",
           g_crash ? ", every stop a kill -9" : ", clean stops", rs);
    for (int k = 1; k < 3; k++) { /* steadiness: the same restart again (page cache warm) */
        rs = start(&s, "pipelined", "group", 0);
        stop(&s);
        printf("restart again (%d): %.3f s\n", k + 1, rs);
    }
    if (restart_only) {
        if (keep)
            return 0; /* the journal directory stays for profiling */
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        return system(cmd) == 0 ? 0 : 1;
    }

    g_sessions[0] = 0; /* the round trips below come from plain connections */
    const char *levels[] = {"none", "group", "every"};
    for (int k = 0; k < 3; k++) {
        double med, p99;
        if (start(&s, levels[k], levels[k], 1) < 0)
            return 1;
        int rc = round_trips(&s, rtt, &med, &p99);
        stop(&s);
        if (rc)
            return 1;
        printf("round trip over unix, durability %-5s: median %8.1f us, p99 %8.1f us (%d calls)\n",
               levels[k], med * 1e6, p99 * 1e6, rtt);
    }
    for (int k = 1; lone > 0 && k < 3; k++) {
        double med, max;
        if (start(&s, "lone", levels[k], 1) < 0)
            return 1;
        int rc = lone_among_busy(&s, lone, &med, &max);
        stop(&s);
        if (rc)
            return 1;
        printf("lone client among 3 pipelining ones, durability %-5s: median %8.1f ms, max %8.1f "
               "ms (%d calls)\n",
               levels[k], med * 1e3, max * 1e3, lone);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    return system(cmd) == 0 ? 0 : 1;
}
