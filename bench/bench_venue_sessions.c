/* The cost of venue sessions (docs/venue.md): logon round trips, and pipelined durable throughput
 * with and without sessions, side by side in one run. A program, not a test.
 *
 * It starts three `tollfree engine serve` processes (the binary beside this one's directory, or
 * $TF_BUILD_DIR/tollfree) on temporary journals, durability group: one plain, one with
 * --sessions, one with --sessions and --risk (limits for the session's accounts: max_qty,
 * max_notional, a band around a configured reference and max_open, so every rule is evaluated
 * on every NewLimit and none refuses; the run fails if one does). Then:
 *   - logon: N connections, each connect + logon (challenge, HMAC-SHA256 answer, result) over the
 *     Unix socket, timed one by one (median, p99); beside it N plain connects to the plain one;
 *   - pipelined: the same flow (NewLimit + CancelByClient pairs, batches of 65,536, one
 *     connection, tf_orders_send_many) to each, the three in turn --rounds times; the median of
 *     the rounds is reported (sessions: every command a Keyed record with its client_seq,
 *     journaled 18 bytes longer: the resend key; + risk: the checks too). --inflight N: commands
 *     unanswered at most (default 16,384, as bench_engine_service's pipelined durable figure;
 *     before it was the client's default and the rate was bound by round trips, ~0.2 M/s).
 *
 * usage: bench_venue_sessions [--logons N] [--pipe N] [--rounds R] [--inflight N] */
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

#define SECRET "bench-secret-0123456789abcdef"

static char bin[8192];
static uint32_t inflight = 16384; /* --inflight: as bench_engine_service's pipelined figure */

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

static void find_bin(void)
{
    const char *b = getenv("TF_BUILD_DIR");
    char exe[4096];
    ssize_t n = b ? -1 : readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        for (int k = 0; k < 2; k++) { /* .../build/bench/bench_venue_sessions -> .../build */
            char *s = strrchr(exe, '/');
            if (s)
                *s = 0;
        }
        snprintf(bin, sizeof bin, "%s/tollfree", exe);
    } else {
        snprintf(bin, sizeof bin, "%s/tollfree", b ? b : ".");
    }
}

typedef struct svc {
    pid_t pid;
    char dir[64], sock[128], log[128], url[160];
} svc;

/* The risk config of the sessions + risk service: every rule set for the session's accounts,
 * none refusing this flow (quantity 1, prices 100-149 around the reference 125, at most one order
 * of the connection resting at a time). */
static const char risk_conf[] = "account 21 max_qty 1000 max_notional 1000000000 band 50% ref 125 "
                                "max_open 1000000\n"
                                "account 22 max_qty 1000 max_notional 1000000000 band 50% ref 125 "
                                "max_open 1000000\n";

/* sessions: 0 plain, 1 --sessions, 2 --sessions and --risk. */
static int svc_start(svc *s, int sessions)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/tfvbench.XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    snprintf(s->url, sizeof s->url, "unix:%s", s->sock);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    char journal[128], sf[128];
    snprintf(journal, sizeof journal, "%s/j", s->dir);
    snprintf(sf, sizeof sf, "%s/sessions", s->dir);
    FILE *f = fopen(sf, "w");
    if (!f)
        return -1;
    fputs("bench " SECRET " 21,22\n", f);
    fclose(f);
    chmod(sf, 0600);
    char rf[128];
    snprintf(rf, sizeof rf, "%s/risk", s->dir);
    if (!(f = fopen(rf, "w")))
        return -1;
    fputs(risk_conf, f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execl(bin, bin, "engine", "serve", "--journal", journal, "--instruments", "1-2", "--unix",
              s->sock, "--durability", "group", "--max-orders", "4000000",
              sessions ? "--sessions" : (char *)NULL, sf, sessions > 1 ? "--risk" : (char *)NULL,
              rf, (char *)NULL);
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
        if (strstr(buf, "listening unix"))
            return 0;
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

static tf_orders *open_conn(const svc *s, int sessions)
{
    tf_orders *c = NULL;
    tf_orders_opts o = {.size = sizeof o, .max_inflight = inflight};
    int rc = sessions ? tf_orders_connect_session(&c, s->url, "bench", SECRET, strlen(SECRET), &o)
                      : tf_orders_connect(&c, s->url, &o);
    if (rc)
        fprintf(stderr, "%s: %s\n", s->url, tf_strerror(rc));
    return c;
}

/* n connects (with the logon when sessions), one by one: median and p99. */
static void bench_logon(const svc *s, int sessions, int n)
{
    double *t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n + 100; i++) { /* the first 100: warm-up */
        double t0 = now_s();
        tf_orders *c = open_conn(s, sessions);
        double dt = now_s() - t0;
        if (!c) {
            free(t);
            return;
        }
        tf_orders_close(c);
        if (i >= 100)
            t[i - 100] = dt;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    printf("  %-28s median %7.1f us  p99 %7.1f us  (%d connections, unix)\n",
           sessions ? "connect + logon (sessions)" : "connect (plain)", 1e6 * t[n / 2],
           1e6 * t[(size_t)n * 99 / 100], n);
    free(t);
}

/* n commands pipelined in batches of 65,536 on one connection: commands per second. *refused
 * counts the VenueRejected events (the risk rules must refuse none). */
static double bench_pipe(const svc *s, int sessions, int64_t n, uint64_t *cid, uint64_t *refused)
{
    tf_orders *c = open_conn(s, sessions);
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
        for (int64_t k = 0; k < got && k < B + 16; k++)
            *refused += ev[k].kind == 0x90; /* VenueRejected */
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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int logons = 2000, rounds = 5;
    int64_t pipe = 1000000;
    const bench_opt opts[] = {
        {"--logons", BENCH_OPT_INT, &logons, "N",
         "connections (with the logon) timed one by one (>= 1; default 2000)"},
        {"--pipe", BENCH_OPT_I64, &pipe, "N",
         "commands pipelined per run (>= 65536; default 1000000)"},
        {"--rounds", BENCH_OPT_INT, &rounds, "R",
         "rounds, the three services in turn (1..64; default 5)"},
        {"--inflight", BENCH_OPT_U32, &inflight, "N",
         "commands unanswered at most (>= 1; default 16384)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (logons < 1 || pipe < 65536 || rounds < 1 || rounds > 64 || inflight < 1)
        bench_args_refuse(&args, "a value out of its range (below)");
    signal(SIGPIPE, SIG_IGN);
    find_bin();
    bench_machine_print(stdout, "");
    svc plain, sess, risk;
    if (svc_start(&plain, 0) || svc_start(&sess, 1) || svc_start(&risk, 2)) {
        fprintf(stderr, "could not start %s engine serve\n", bin);
        return 1;
    }
    printf("venue sessions: durability group, journals on %s, %u commands in flight\n", plain.dir,
           inflight);
    bench_logon(&plain, 0, logons);
    bench_logon(&sess, 1, logons);
    double a[64], b[64], c[64];
    uint64_t cid_a = 1, cid_b = 1, cid_c = 1, refused = 0;
    /* in turn, so drift hits the three alike, each round starting with the next one (a run right
     * after another's pays for the other's writeback) */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 3; k++) {
            int w = (r + k) % 3;
            if (w == 0)
                a[r] = bench_pipe(&plain, 0, pipe, &cid_a, &refused);
            else if (w == 1)
                b[r] = bench_pipe(&sess, 1, pipe, &cid_b, &refused);
            else
                c[r] = bench_pipe(&risk, 1, pipe, &cid_c, &refused);
        }
    double ma = median(a, rounds), mb = median(b, rounds), mc = median(c, rounds);
    printf("  pipelined plain             %.3f M commands/s  (median of %d runs of %" PRId64
           " commands)\n",
           ma / 1e6, rounds, pipe);
    printf("  pipelined sessions (Keyed)  %.3f M commands/s  (median of %d runs; %.1f%% of "
           "plain)\n",
           mb / 1e6, rounds, ma > 0 ? 100.0 * mb / ma : 0.0);
    printf("  pipelined sessions + risk   %.3f M commands/s  (median of %d runs; %.1f%% of "
           "plain)\n",
           mc / 1e6, rounds, ma > 0 ? 100.0 * mc / ma : 0.0);
    svc_stop(&plain);
    svc_stop(&sess);
    svc_stop(&risk);
    if (refused) {
        fprintf(stderr, "the risk rules refused %" PRIu64 " commands: the comparison is void\n",
                refused);
        return 1;
    }
    return 0;
}
