/* The order path's figures: one command's round trip from C over a Unix socket and TCP (median,
 * p99), pipelined commands per second on one connection (tf_orders_send_many), and the paper
 * loop's bars per second in-process and through the service. A program, not a test.
 *
 * It starts its own `tollfree engine serve` (the binary beside this one's directory, or
 * $TF_BUILD_DIR/tollfree) on a temporary journal, once per durability level measured, and runs
 * `tollfree paper --json` for the paper rows (the loop's own timer: bars / seconds of the loop,
 * without process start, data loading and the kernel's check sweep).
 *
 * usage: bench_orders [--rt N] [--pipe N] [--durability LIST] [--skip-paper]
 *   --rt N            round trips per transport (default 20000; half NewLimit, half Cancel)
 *   --pipe N          pipelined commands per run (default 1000000)
 *   --durability L    comma-separated levels (default none,group) */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"
#include "bench_machine.h"
#include "tollfree/orders.h"

static char bin[8192];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void find_bin(const char *argv0)
{
    const char *b = getenv("TF_BUILD_DIR");
    if (b) {
        snprintf(bin, sizeof bin, "%s/tollfree", b);
        return;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *s = strrchr(exe, '/');
        if (s) {
            *s = 0; /* .../build/bench */
            s = strrchr(exe, '/');
            if (s)
                *s = 0;
            snprintf(bin, sizeof bin, "%s/tollfree", exe);
            return;
        }
    }
    snprintf(bin, sizeof bin, "%s", argv0);
}

typedef struct svc {
    pid_t pid;
    char dir[64], sock[128], log[128];
    int port;
} svc;

static int svc_start(svc *s, const char *durability)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/tfbench.XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    char journal[128];
    snprintf(journal, sizeof journal, "%s/j", s->dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execl(bin, bin, "engine", "serve", "--journal", journal, "--instruments", "1-2", "--unix",
              s->sock, "--tcp", "127.0.0.1:0", "--durability", durability, "--max-orders",
              "4000000", (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    char buf[8192];
    for (double end = now_s() + 60; now_s() < end;) {
        FILE *f = fopen(s->log, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = 0;
        const char *p = strstr(buf, "listening tcp ");
        if (p && strstr(buf, "listening unix")) {
            p = strchr(p + 14, ':');
            s->port = p ? atoi(p + 1) : 0;
            return 0;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "engine serve exited: %s\n", buf);
            s->pid = 0;
            return -1;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void svc_stop(svc *s)
{
    if (s->pid) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
}

/* n round trips, alternately a resting NewLimit and its Cancel; prints median and p99. */
static int bench_rt(const char *url, const char *label, int n)
{
    tf_orders *c;
    int rc = tf_orders_connect(&c, url, NULL);
    if (rc) {
        fprintf(stderr, "%s: %s\n", url, tf_strerror(rc));
        return rc;
    }
    double *t = malloc(sizeof(double) * (size_t)n);
    tf_ofl_msg ev[8];
    tf_orders_reply r = {.ev = ev, .cap = 8};
    uint64_t oid = 0;
    for (int i = 0; i < n + 1000 && !rc; i++) { /* the first 1000: warm-up */
        double t0 = now_s();
        if (i % 2 == 0) {
            rc = tf_orders_new_limit(c, 21, (uint64_t)i + 1, 1, TF_OFL_BUY, 100, 1, &r);
            oid = rc > 0 ? ev[0].accepted.order_id : 0;
        } else {
            rc = tf_orders_cancel(c, oid, &r);
        }
        rc = rc < 0 ? rc : 0;
        if (i >= 1000)
            t[i - 1000] = now_s() - t0;
    }
    if (!rc) {
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        printf("  round trip C %-5s %-6s  median %7.2f us  p99 %7.2f us  (%d commands)\n", label,
               url[0] == 'u' ? "unix" : "tcp", 1e6 * t[n / 2], 1e6 * t[(size_t)n * 99 / 100], n);
    } else {
        fprintf(stderr, "round trip: %s\n", tf_strerror(rc));
    }
    free(t);
    tf_orders_close(c);
    return rc;
}

/* n commands pipelined in batches of 65,536: NewLimit (resting), then CancelByClient of it. */
static int bench_pipe(const char *url, const char *label, int64_t n)
{
    tf_orders *c;
    int rc = tf_orders_connect(&c, url, NULL);
    if (rc)
        return rc;
    enum { B = 65536 };
    tf_ofl_msg *cmds = calloc(B, sizeof *cmds), *ev = calloc(B + 16, sizeof *ev);
    int64_t done = 0;
    uint64_t cid = 1;
    double t0 = now_s();
    while (done < n && rc >= 0) {
        for (int k = 0; k < B; k += 2, cid++) {
            cmds[k] = (tf_ofl_msg){.kind = TF_OFL_NEW_LIMIT};
            cmds[k].new_limit.account_id = 22;
            cmds[k].new_limit.client_order_id = cid;
            cmds[k].new_limit.instrument_id = 2;
            cmds[k].new_limit.price = 100 + (int64_t)(cid % 50);
            cmds[k].new_limit.quantity.lo = 1;
            cmds[k + 1] = (tf_ofl_msg){.kind = TF_OFL_CANCEL_BY_CLIENT};
            cmds[k + 1].cancel_by_client.account_id = 22;
            cmds[k + 1].cancel_by_client.client_order_id = cid;
        }
        int64_t got = tf_orders_send_many(c, cmds, B, ev, B + 16, NULL, NULL);
        if (got < 0)
            rc = (int)got;
        done += B;
    }
    double dt = now_s() - t0;
    if (rc >= 0)
        printf("  pipelined C %-5s %-6s  %.3f M commands/s  (%" PRId64 " commands, %.2f s, one "
               "connection)\n",
               label, url[0] == 'u' ? "unix" : "tcp", (double)done / dt / 1e6, done, dt);
    else
        fprintf(stderr, "pipelined: %s\n", tf_strerror(rc));
    free(cmds);
    free(ev);
    tf_orders_close(c);
    return rc < 0 ? rc : 0;
}

/* `tollfree paper --json [--engine URL]`: its loop's bars/s (best of 3). */
static void bench_paper(const char *url, const char *label)
{
    double best = 0, secs = 0;
    char cmd[16640], line[8192];
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "%s paper --combo 6,3,2,3,1,2 --json --quiet%s%s", bin,
                 url ? " --engine " : "", url ? url : "");
        FILE *p = popen(cmd, "r");
        size_t n = p ? fread(line, 1, sizeof line - 1, p) : 0;
        line[n] = 0;
        int st = p ? pclose(p) : -1;
        const char *b = strstr(line, "\"bars_per_s\": "), *s = strstr(line, "\"seconds\": ");
        if (st != 0 || !b || !s || !strstr(line, "\"parity\": true")) {
            fprintf(stderr, "paper %s failed: %s\n", label, line);
            return;
        }
        double v = atof(b + 14);
        if (v > best) {
            best = v;
            secs = atof(s + 11);
        }
    }
    printf("  paper loop %-28s %10.0f bars/s  (%.3f s for 150,000 bars, combo 0, parity true; "
           "best of 3)\n",
           label, best, secs);
}

int main(int argc, char **argv)
{
    int rt = 20000, skip_paper = 0;
    int64_t pipe = 1000000;
    const char *levels = "none,group";
    const bench_opt opts[] = {
        {"--rt", BENCH_OPT_INT, &rt, "N",
         "round trips per transport, half NewLimit, half Cancel (>= 2; default 20000)"},
        {"--pipe", BENCH_OPT_I64, &pipe, "N", "pipelined commands per run (default 1000000)"},
        {"--durability", BENCH_OPT_STR, &levels, "LIST",
         "comma-separated levels, a service each (default none,group)"},
        {"--skip-paper", BENCH_OPT_FLAG, &skip_paper, NULL,
         "no paper-loop rows (default: in-process and through each service)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (rt < 2)
        rt = 2;
    signal(SIGPIPE, SIG_IGN);
    find_bin(argv[0]);
    bench_machine_print(stdout, "");
    printf("engine: %s\n", bin);
    if (!skip_paper)
        bench_paper(NULL, "in-process");
    char lv[256];
    snprintf(lv, sizeof lv, "%s", levels);
    for (char *save = NULL, *d = strtok_r(lv, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
        svc s;
        if (svc_start(&s, d)) {
            printf("  (engine serve --durability %s did not start: no service rows)\n", d);
            svc_stop(&s);
            continue;
        }
        printf("service, --durability %s:\n", d);
        char url[256];
        for (int k = 0; k < 2; k++) {
            if (k == 0)
                snprintf(url, sizeof url, "unix:%s", s.sock);
            else
                snprintf(url, sizeof url, "tcp:127.0.0.1:%d", s.port);
            bench_rt(url, d, rt);
            bench_pipe(url, d, pipe);
            if (!skip_paper) {
                char label[64];
                snprintf(label, sizeof label, "service %s (%s)", k ? "tcp" : "unix", d);
                bench_paper(url, label);
            }
        }
        svc_stop(&s);
    }
    return 0;
}
