/* Boundary floors of the sweep service from the C client: round trips per transport, the
 * per-bar session call, and the batch sweep across a Unix socket against the in-process call.
 * Starts its own `tollfree serve` (a separate process, as always) and prints one JSON object per
 * line on stdout; never fails on timing.
 *
 *   bench_transport [--quick] [--spin N] [--bin PATH] [--data PATH]
 *                   [--cpu-client N] [--cpu-server N] [--reps N]
 *
 * --cpu-client/--cpu-server pin the two processes (sched_setaffinity, like taskset -c); the
 * "placement" field of every row says what was used. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tollfree/client.h"
#include "tollfree/kernel.h"
#include "tollfree/shm.h"
#include "bench_args.h"
#include "bench_machine.h"

static int quick, spin = -1, reps = 5, cpu_client = -1, cpu_server = -1;
static const char *bin, *data_path;
static char placement[64];

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static pid_t start_server(const char *dir, int *tcp_port)
{
    char log[256], spin_s[32];
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(spin_s, sizeof spin_s, "%d", spin < 0 ? TF_SHM_DEFAULT_SPIN : spin);
    char up[200], sp[200];
    snprintf(up, sizeof up, "%s/s.sock", dir);
    snprintf(sp, sizeof sp, "%s/shm.sock", dir);
    pid_t pid = fork();
    if (pid == 0) {
        pin(cpu_server);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execl(bin, bin, "serve", "--unix", up, "--shm", sp, "--tcp", "127.0.0.1:0", "--spin",
              spin_s, "--quiet", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        char buf[4096] = {0};
        FILE *f = fopen(log, "r");
        if (f) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = 0;
            fclose(f);
        }
        const char *p = strstr(buf, "listening tcp 127.0.0.1:");
        if (p && strstr(buf, "listening shm")) {
            *tcp_port = atoi(p + strlen("listening tcp 127.0.0.1:"));
            return pid;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    return -1;
}

static tf_client *open_url(const char *url)
{
    tf_client *c;
    tf_client_opts o = {.timeout_ms = 120000, .spin = spin};
    int rc = tf_client_open_opts(&c, url, &o);
    if (rc) {
        fprintf(stderr, "bench_transport: %s: %s\n", url, tf_strerror(rc));
        return NULL;
    }
    return c;
}

static void bench_echo(const char *name, const char *url, size_t bytes, int n)
{
    tf_client *c = open_url(url);
    if (!c)
        return;
    uint8_t *in = calloc(1, bytes + 1), *out = calloc(1, bytes + 1);
    double *t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n / 10 + 10; i++)
        tf_client_echo(c, in, bytes, out);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        bad += tf_client_echo(c, in, bytes, out) != 0;
        t[i] = now_us() - t0;
    }
    double p50 = pct(t, n, 0.5), p99 = pct(t, n, 0.99);
    printf("{\"bench\":\"echo\",\"client\":\"c\",\"transport\":\"%s\",\"bytes\":%zu,\"n\":%d,"
           "\"p50_us\":%.3f,\"p99_us\":%.3f,\"min_us\":%.3f,\"spin\":%d,\"placement\":\"%s\","
           "\"errors\":%d}\n",
           name, bytes, n, p50, p99, t[0], spin < 0 ? TF_SHM_DEFAULT_SPIN : spin, placement, bad);
    fflush(stdout);
    free(in);
    free(out);
    free(t);
    tf_client_close(c);
}

static void bench_session(const char *name, const char *url, const double *close, int64_t n)
{
    tf_client *c = open_url(url);
    if (!c)
        return;
    int64_t p[6] = {6, 3, 2, 3, 1, 2};
    uint64_t sid;
    if (tf_client_session_open(c, p, &sid)) {
        tf_client_close(c);
        return;
    }
    for (int i = 0; i < 1000; i++)
        tf_client_session_bar(c, sid, close[i], NULL);
    tf_client_session_close(c, sid, NULL);
    tf_client_session_open(c, p, &sid);
    int bad = 0;
    double *t = malloc(sizeof(double) * (size_t)n);
    double t0 = now_us(), prev = t0;
    for (int64_t i = 0; i < n; i++) {
        bad += tf_client_session_bar(c, sid, close[i], NULL) != 0;
        double now = now_us();
        t[i] = now - prev;
        prev = now;
    }
    double total = now_us() - t0;
    double p50 = pct(t, (int)n, 0.5), p99 = pct(t, (int)n, 0.99);
    free(t);
    tf_session_state st;
    tf_client_session_close(c, sid, &st);
    double ref_pnl;
    int64_t ref_tr;
    tf_sweep(close, n, p, 1, &ref_pnl, &ref_tr, NULL);
    int same = memcmp(&ref_pnl, &st.pnl, 8) == 0 && ref_tr == st.trades;
    printf("{\"bench\":\"session_bar\",\"client\":\"c\",\"transport\":\"%s\",\"bars\":%lld,"
           "\"total_s\":%.4f,\"per_bar_us\":%.3f,\"p50_us\":%.3f,\"p99_us\":%.3f,"
           "\"bit_identical\":%s,\"spin\":%d,\"placement\":\"%s\",\"errors\":%d}\n",
           name, (long long)n, total / 1e6, total / (double)n, p50, p99, same ? "true" : "false",
           spin < 0 ? TF_SHM_DEFAULT_SPIN : spin, placement, bad);
    fflush(stdout);
    tf_client_close(c);
}

/* Interleaved A/B: in-process tf_sweep vs SWEEP_DS and v1 over the Unix socket. */
static void bench_sweep(const char *url, const double *close, int64_t n, const int64_t *grid,
                        int64_t ng)
{
    tf_client *c = open_url(url);
    if (!c)
        return;
    double *pnl = malloc(8 * (size_t)ng), *ref = malloc(8 * (size_t)ng);
    int64_t *tr = malloc(8 * (size_t)ng), *ref_tr = malloc(8 * (size_t)ng);
    uint64_t h;
    tf_client_load(c, close, (uint64_t)n, &h, NULL);
    tf_sweep(close, n, grid, ng, ref, ref_tr, NULL);
    double *a = malloc(sizeof(double) * (size_t)reps), *b = malloc(sizeof(double) * (size_t)reps),
           *v = malloc(sizeof(double) * (size_t)reps);
    int same = 1;
    /* Warm-up of each path once. */
    tf_client_sweep(c, h, grid, (uint32_t)ng, pnl, tr);
    tf_client_v1_sweep(c, close, (uint32_t)n, grid, (uint32_t)ng, pnl, tr);
    for (int r = 0; r < reps; r++) {
        double t0 = now_us();
        tf_sweep(close, n, grid, ng, ref, ref_tr, NULL);
        a[r] = now_us() - t0;
        t0 = now_us();
        tf_client_sweep(c, h, grid, (uint32_t)ng, pnl, tr);
        b[r] = now_us() - t0;
        same &= !memcmp(pnl, ref, 8 * (size_t)ng) && !memcmp(tr, ref_tr, 8 * (size_t)ng);
        t0 = now_us();
        tf_client_v1_sweep(c, close, (uint32_t)n, grid, (uint32_t)ng, pnl, tr);
        v[r] = now_us() - t0;
        same &= !memcmp(pnl, ref, 8 * (size_t)ng) && !memcmp(tr, ref_tr, 8 * (size_t)ng);
    }
    double ratios[64], ratios_v1[64];
    for (int r = 0; r < reps && r < 64; r++) {
        ratios[r] = b[r] / a[r];
        ratios_v1[r] = v[r] / a[r];
    }
    int m = reps < 64 ? reps : 64;
    double med_a = pct(a, reps, 0.5), med_b = pct(b, reps, 0.5), med_v = pct(v, reps, 0.5);
    double rmin = pct(ratios, m, 0.0), rmax = pct(ratios, m, 1.0), rmed = pct(ratios, m, 0.5);
    double vmin = pct(ratios_v1, m, 0.0), vmax = pct(ratios_v1, m, 1.0),
           vmed = pct(ratios_v1, m, 0.5);
    printf("{\"bench\":\"sweep_boundary\",\"client\":\"c\",\"transport\":\"unix\",\"bars\":%lld,"
           "\"combos\":%lld,\"reps\":%d,\"inproc_s\":%.4f,\"sweep_ds_s\":%.4f,\"v1_s\":%.4f,"
           "\"ratio_sweep_ds_median\":%.4f,\"ratio_sweep_ds_min\":%.4f,"
           "\"ratio_sweep_ds_max\":%.4f,\"ratio_v1_median\":%.4f,\"ratio_v1_min\":%.4f,"
           "\"ratio_v1_max\":%.4f,\"bit_identical\":%s,\"placement\":\"%s\"}\n",
           (long long)n, (long long)ng, reps, med_a / 1e6, med_b / 1e6, med_v / 1e6, rmed, rmin,
           rmax, vmed, vmin, vmax, same ? "true" : "false", placement);
    fflush(stdout);
    free(pnl);
    free(ref);
    free(tr);
    free(ref_tr);
    free(a);
    free(b);
    free(v);
    tf_client_close(c);
}

static int64_t round_half_even(double x)
{
    int64_t r = (int64_t)nearbyint(x);
    return r < 1 ? 1 : r;
}

int main(int argc, char **argv)
{
    const bench_opt opts[] = {
        {"--quick", BENCH_OPT_FLAG, &quick, NULL,
         "fewer calls and bars, one sweep repetition (default: full size)"},
        {"--spin", BENCH_OPT_INT, &spin, "N",
         "shared-memory spin, server and client\n"
         "(default: the library's, " BENCH_ARGS_STR(TF_SHM_DEFAULT_SPIN) ")"},
        {"--bin", BENCH_OPT_STR, &bin, "PATH",
         "the server binary (default $TF_BUILD_DIR/tollfree, else build/tollfree)"},
        {"--data", BENCH_OPT_STR, &data_path, "PATH",
         "the close series, raw float64\n(default $TF_SOURCE_DIR/data/default_close.f64, "
         "else ./data/...)"},
        {"--reps", BENCH_OPT_INT, &reps, "N", "sweep repetitions (>= 1; default 5)"},
        {"--cpu-client", BENCH_OPT_INT, &cpu_client, "N",
         "pin this process to CPU N (default: unpinned)"},
        {"--cpu-server", BENCH_OPT_INT, &cpu_server, "N",
         "pin the server to CPU N (default: unpinned)"},
    };
    bench_args args = BENCH_ARGS(opts, NULL);
    bench_args_parse(&args, argc, argv, NULL, 0);
    if (reps < 1)
        reps = 1;
    bench_machine_print(stdout, NULL);
    static char bin_buf[1024], data_buf[1024];
    if (!bin) {
        const char *b = getenv("TF_BUILD_DIR");
        snprintf(bin_buf, sizeof bin_buf, "%s/tollfree", b ? b : "build");
        bin = bin_buf;
    }
    if (!data_path) {
        const char *s = getenv("TF_SOURCE_DIR");
        snprintf(data_buf, sizeof data_buf, "%s/data/default_close.f64", s ? s : ".");
        data_path = data_buf;
    }
    if (cpu_client < 0 && cpu_server < 0)
        snprintf(placement, sizeof placement, "unpinned");
    else
        snprintf(placement, sizeof placement, "%s (client cpu %d, server cpu %d)",
                 cpu_client == cpu_server ? "same-cpu" : "cross-cpu", cpu_client, cpu_server);
    pin(cpu_client);
    signal(SIGPIPE, SIG_IGN);

    FILE *f = fopen(data_path, "rb");
    if (!f) {
        fprintf(stderr, "bench_transport: cannot open %s\n", data_path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    int64_t n = ftell(f) / 8;
    fseek(f, 0, SEEK_SET);
    double *close = malloc(8 * (size_t)n);
    if (fread(close, 8, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return 1;
    }
    fclose(f);
    int64_t ng = 80, *grid = malloc(80 * 48);
    for (int j = 0; j < 80; j++) {
        int64_t L = 6 + (j * 194) / 79, *p = grid + 6 * j;
        p[0] = L;
        p[1] = round_half_even((double)L / 2);
        p[2] = round_half_even(sqrt((double)L));
        p[3] = round_half_even((double)L / 2);
        p[4] = round_half_even((double)p[3] / 3);
        p[5] = round_half_even((double)p[3] / 2);
    }

    char dir[] = "/tmp/tfbench.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    int port = 0;
    pid_t srv = start_server(dir, &port);
    if (srv < 0) {
        fprintf(stderr, "bench_transport: server did not start (%s)\n", bin);
        return 1;
    }
    char u_unix[256], u_shm[256], u_tcp[64];
    snprintf(u_unix, sizeof u_unix, "unix:%s/s.sock", dir);
    snprintf(u_shm, sizeof u_shm, "shm:%s/shm.sock", dir);
    snprintf(u_tcp, sizeof u_tcp, "tcp:127.0.0.1:%d", port);

    int ne = quick ? 2000 : 20000;
    bench_echo("shm", u_shm, 8, ne);
    bench_echo("unix", u_unix, 8, ne);
    bench_echo("tcp", u_tcp, 8, ne);
    bench_echo("shm", u_shm, (size_t)n * 8, quick ? 50 : 500);
    bench_echo("unix", u_unix, (size_t)n * 8, quick ? 50 : 500);
    bench_session("shm", u_shm, close, quick ? 20000 : n);
    bench_session("unix", u_unix, close, quick ? 5000 : 30000);
    if (quick)
        reps = 1;
    bench_sweep(u_unix, close, n, grid, ng);

    kill(srv, SIGTERM);
    int st = 0;
    waitpid(srv, &st, 0);
    char p[300];
    snprintf(p, sizeof p, "%s/log", dir);
    unlink(p);
    rmdir(dir);
    free(close);
    free(grid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
