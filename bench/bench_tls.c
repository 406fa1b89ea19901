/* The cost of TLS on the engine service (docs/venue.md, "TLS"): connect, round trip and pipelined
 * throughput over loopback TCP, plain and with TLS, side by side in one run. A program, not a
 * test.
 *
 * It makes a test CA and a server certificate with the openssl command (EC P-256), starts two
 * `tollfree engine serve` processes (the binary beside this one's directory, or
 * $TF_BUILD_DIR/tollfree) on temporary journals with --durability none (the journal is written,
 * not synced: what is timed is the transport, not the disk) and --tcp 127.0.0.1:0, one of them
 * with --tls-cert/--tls-key. Then, alternating plain and TLS --rounds times (drift of a shared
 * machine hits both alike), each reported as the median of the rounds:
 *   - connect: N connections one by one (TCP connect; TCP connect + TLS handshake), median;
 *   - round trip: N NewLimit + CancelByClient calls one at a time on one connection, median;
 *   - pipelined: N commands (NewLimit + CancelByClient pairs, batches of 65,536, one
 *     connection, tf_orders_send_many), commands per second.
 *
 * usage: bench_tls [--connects N] [--calls N] [--pipe N] [--rounds R] */
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

static char bin[8192], dir[64], ca[128];

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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void find_bin(void)
{
    const char *b = getenv("TF_BUILD_DIR");
    char exe[4096];
    ssize_t n = b ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        for (int k = 0; k < 2; k++) { /* .../build/bench/bench_tls -> .../build */
            char *s = strrchr(exe, '/');
            if (s)
                *s = 0;
        }
        snprintf(bin, sizeof bin, "%s/tollfree", exe);
    } else {
        snprintf(bin, sizeof bin, "%s/tollfree", b ? b : ".");
    }
}

static int make_certs(void)
{
    char cmd[2048];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(cmd, sizeof cmd,
             "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -days 2 -keyout ca.key -out ca.pem -subj /CN=bench-ca >/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout server.key -out server.csr -subj /CN=localhost >/dev/null 2>&1 && "
             "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext.cnf && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out server.pem -days 2 -extfile ext.cnf >/dev/null 2>&1 && chmod 600 server.key",
             dir);
    return system(cmd) == 0 ? 0 : -1;
}

typedef struct svc {
    pid_t pid;
    char log[128], url[160];
    int tls;
} svc;

static int svc_start(svc *s, int tls)
{
    memset(s, 0, sizeof *s);
    s->tls = tls;
    char journal[128], cert[128], key[128];
    snprintf(s->log, sizeof s->log, "%s/log%d", dir, tls);
    snprintf(journal, sizeof journal, "%s/j%d", dir, tls);
    snprintf(cert, sizeof cert, "%s/server.pem", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execl(bin, bin, "engine", "serve", "--journal", journal, "--instruments", "1-2", "--tcp",
              "127.0.0.1:0", "--durability", "none", "--max-orders", "4000000",
              tls ? "--tls-cert" : (char *)NULL, cert, "--tls-key", key, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    for (double end = now_s() + 60; now_s() < end;) {
        char buf[8192];
        FILE *l = fopen(s->log, "r");
        size_t n = l ? fread(buf, 1, sizeof buf - 1, l) : 0;
        if (l)
            fclose(l);
        buf[n] = 0;
        const char *p = strstr(buf, "listening tcp 127.0.0.1:");
        if (p) {
            snprintf(s->url, sizeof s->url, "%s:127.0.0.1:%d", tls ? "tls" : "tcp",
                     atoi(p + strlen("listening tcp 127.0.0.1:")));
            return 0;
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
}

static tf_orders *open_conn(const svc *s)
{
    tf_orders *c = NULL;
    tf_orders_opts o = {.size = sizeof o, .tls_ca = ca};
    int rc = tf_orders_connect(&c, s->url, &o);
    if (rc)
        fprintf(stderr, "%s: %s\n", s->url, tf_strerror(rc));
    return c;
}

/* n connects one by one: the median, in seconds. */
static double bench_connect(const svc *s, int n)
{
    double *t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        double t0 = now_s();
        tf_orders *c = open_conn(s);
        t[i] = now_s() - t0;
        if (!c) {
            free(t);
            return 0;
        }
        tf_orders_close(c);
    }
    double m = median(t, n);
    free(t);
    return m;
}

/* n calls one at a time (NewLimit, CancelByClient, ...): the median round trip, in seconds. */
static double bench_calls(const svc *s, int n, uint64_t *cid)
{
    tf_orders *c = open_conn(s);
    if (!c)
        return 0;
    double *t = malloc(sizeof(double) * (size_t)n);
    tf_ofl_msg ev[8];
    tf_orders_reply r = {.ev = ev, .cap = 8};
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        double t0 = now_s();
        if (i % 2 == 0) {
            (*cid)++;
            ok = tf_orders_new_limit(c, 21, *cid, 1, TF_OFL_BUY, 100 + (int64_t)(*cid % 50), 1,
                                     &r) == 1;
        } else {
            ok = tf_orders_cancel_client(c, 21, *cid, &r) == 1;
        }
        t[i] = now_s() - t0;
    }
    tf_orders_close(c);
    double m = ok ? median(t, n) : 0;
    free(t);
    return m;
}

/* n commands pipelined in batches of 65,536 on one connection: commands per second. */
static double bench_pipe(const svc *s, int64_t n, uint64_t *cid)
{
    tf_orders *c = open_conn(s);
    if (!c)
        return 0;
    enum { B = 65536 };
    tf_ofl_msg *cmds = calloc(B, sizeof *cmds), *ev = calloc(B + 16, sizeof *ev);
    int64_t done = 0, got = 0;
    double t0 = now_s();
    while (done < n && got >= 0) {
        for (int k = 0; k < B; k += 2, (*cid)++) {
            cmds[k] = (tf_ofl_msg){.kind = TF_OFL_NEW_LIMIT};
            cmds[k].new_limit.account_id = 22;
            cmds[k].new_limit.client_order_id = *cid;
            cmds[k].new_limit.instrument_id = 2;
            cmds[k].new_limit.price = 100 + (int64_t)(*cid % 50);
            cmds[k].new_limit.quantity.lo = 1;
            cmds[k + 1] = (tf_ofl_msg){.kind = TF_OFL_CANCEL_BY_CLIENT};
            cmds[k + 1].cancel_by_client.account_id = 22;
            cmds[k + 1].cancel_by_client.client_order_id = *cid;
        }
        got = tf_orders_send_many(c, cmds, B, ev, B + 16, NULL, NULL);
        done += B;
    }
    double dt = now_s() - t0;
    free(cmds);
    free(ev);
    tf_orders_close(c);
    if (got < 0) {
        fprintf(stderr, "pipelined: %s\n", tf_strerror((int)got));
        return 0;
    }
    return (double)done / dt;
}

int main(int argc, char **argv)
{
    int connects = 500, calls = 20000, rounds = 5;
    int64_t pipe = 524288;
    const bench_opt opts[] = {
        {"--connects", BENCH_OPT_INT, &connects, "N",
         "connections one by one per round (>= 1; default 500)"},
        {"--calls", BENCH_OPT_INT, &calls, "N",
         "round trips one at a time per round (>= 2; default 20000)"},
        {"--pipe", BENCH_OPT_I64, &pipe, "N",
         "commands pipelined per round (>= 65536; default 524288)"},
        {"--rounds", BENCH_OPT_INT, &rounds, "R",
         "rounds, plain and TLS alternating (1..64; default 5)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (connects < 1 || calls < 2 || pipe < 65536 || rounds < 1 || rounds > 64)
        bench_args_refuse(&args, "a value out of its range (below)");
    signal(SIGPIPE, SIG_IGN);
    find_bin();
    bench_machine_print(stdout, "");
    snprintf(dir, sizeof dir, "/tmp/tftlsbench.XXXXXX");
    if (!mkdtemp(dir) || make_certs()) {
        fprintf(stderr, "could not make the test certificate (the openssl command is needed)\n");
        return 1;
    }
    svc plain, tls;
    if (svc_start(&plain, 0) || svc_start(&tls, 1)) {
        fprintf(stderr, "could not start %s engine serve\n", bin);
        return 1;
    }
    printf("engine service over loopback TCP, plain vs TLS (%s, %s): durability none\n", plain.url,
           tls.url);
    double cp[64], ct[64], rp[64], rt[64], pp[64], pt[64];
    uint64_t cid_p = 1, cid_t = 1, pcid_p = 1u << 30, pcid_t = 1u << 30;
    for (int r = 0; r < rounds; r++) { /* alternating, so drift hits both alike */
        cp[r] = bench_connect(&plain, connects);
        ct[r] = bench_connect(&tls, connects);
        rp[r] = bench_calls(&plain, calls, &cid_p);
        rt[r] = bench_calls(&tls, calls, &cid_t);
        pp[r] = bench_pipe(&plain, pipe, &pcid_p);
        pt[r] = bench_pipe(&tls, pipe, &pcid_t);
    }
    double mcp = median(cp, rounds), mct = median(ct, rounds), mrp = median(rp, rounds),
           mrt = median(rt, rounds), mpp = median(pp, rounds), mpt = median(pt, rounds);
    printf("  connect      plain %8.1f us   TLS %8.1f us   (%.2fx)  median of %d rounds of %d\n",
           1e6 * mcp, 1e6 * mct, mcp > 0 ? mct / mcp : 0.0, rounds, connects);
    printf("  round trip   plain %8.1f us   TLS %8.1f us   (%.2fx)  median of %d rounds of %d "
           "calls\n",
           1e6 * mrp, 1e6 * mrt, mrp > 0 ? mrt / mrp : 0.0, rounds, calls);
    printf("  pipelined    plain %8.3f M/s  TLS %8.3f M/s  (%.1f%%)  median of %d rounds of "
           "%" PRId64 " commands\n",
           mpp / 1e6, mpt / 1e6, mpp > 0 ? 100.0 * mpt / mpp : 0.0, rounds, pipe);
    svc_stop(&plain);
    svc_stop(&tls);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
