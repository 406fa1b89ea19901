/* Ctrl-C and progress for the CLI's sweeps, through the kernel's tf_progress counter. */
#include "cli/sweep_run.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static tf_progress *volatile armed;
static volatile sig_atomic_t signals_seen;
static struct sigaction old_int, old_term;

static void on_signal(int sig)
{
    if (signals_seen++ || !armed) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        raise(sig);
        return;
    }
    tf_progress_cancel(armed);
}

void tf_cli_interrupt_arm(tf_progress *p)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    signals_seen = 0;
    armed = p;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

int tf_cli_interrupt_disarm(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    armed = NULL;
    return signals_seen > 0;
}

typedef struct job {
    const double *close;
    int64_t n;
    const int64_t *grid;
    int64_t m;
    double *pnl;
    int64_t *trades;
    const tf_sweep_opts *o;
    int reference;
    int rc;
    int finished; /* atomic */
} job;

static void *job_main(void *arg)
{
    job *j = arg;
    j->rc = j->reference
                ? tf_sweep_reference(j->close, j->n, j->grid, j->m, j->pnl, j->trades, j->o)
                : tf_sweep(j->close, j->n, j->grid, j->m, j->pnl, j->trades, j->o);
    __atomic_store_n(&j->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls the counter every 0.2 s; draws a line once the sweep has run 2 s. */
static void watch(job *j, tf_progress *p)
{
    double t0 = now_s();
    int drawn = 0;
    struct timespec tick = {0, 200 * 1000 * 1000};
    while (!__atomic_load_n(&j->finished, __ATOMIC_ACQUIRE)) {
        nanosleep(&tick, NULL);
        double el = now_s() - t0;
        int64_t done = 0, total = 0;
        tf_progress_read(p, &done, &total);
        if (el < 2.0 || total <= 0 || j->reference)
            continue;
        double frac = (double)done / (double)total;
        if (frac > 0.0)
            fprintf(stderr, "\rsweep: %5.1f%%  %.0f s elapsed, about %.0f s left   ", 100.0 * frac,
                    el, el * (1.0 - frac) / frac);
        else
            fprintf(stderr, "\rsweep: starting, %.0f s elapsed   ", el);
        drawn = 1;
    }
    if (drawn)
        fputs("\r\033[K", stderr);
}

int tf_cli_sweep_run(const double *close, int64_t n, const int64_t *grid, int64_t m, double *pnl,
                     int64_t *trades, tf_sweep_opts *o, int reference, int show)
{
    tf_progress p;
    memset(&p, 0, sizeof p);
    o->progress = &p;
    tf_cli_interrupt_arm(&p);
    job j = {close, n, grid, m, pnl, trades, o, reference, 0, 0};
    pthread_t tid;
    if (show && pthread_create(&tid, NULL, job_main, &j) == 0) {
        watch(&j, &p);
        pthread_join(tid, NULL);
    } else {
        job_main(&j);
    }
    tf_cli_interrupt_disarm();
    o->progress = NULL;
    return j.rc;
}
