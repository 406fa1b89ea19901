/* The one throttled logger of every server (net.h, "Logs"): lines on stderr with one write(2)
 * each, the process-wide gate of the lines peers can provoke, and the per-connection burst; it
 * knows no connection state, no socket and no protocol. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net/net_private.h"

void tfn_log_line(const char *name, const char *prefix, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "%s: %s", name ? name : "tollfree", prefix ? prefix : "");
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof line / 2)
        n = (int)(sizeof line / 2);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per line so lines from different threads never interleave. */
    ssize_t w = write(2, line, len);
    (void)w;
}

/* The process-wide gate of the lines peers can provoke: every server and thread shares it, so N
 * bad connections a second cost at most TFN_LOG_PER_SEC lines whatever each line is about. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t gate_sec;
static int gate_count;
static uint64_t gate_dropped;

int tfn_log_gate(uint64_t *dropped)
{
    int64_t sec = tfn_now_ns() / NS_PER_S;
    pthread_mutex_lock(&gate_lock);
    if (sec != gate_sec) {
        gate_sec = sec;
        gate_count = 0;
    }
    int go = gate_count < TFN_LOG_PER_SEC;
    if (go) {
        gate_count++;
        *dropped = gate_dropped;
        gate_dropped = 0;
    } else {
        gate_dropped++;
    }
    pthread_mutex_unlock(&gate_lock);
    return go;
}

void tfn_log_gate_report(const char *name)
{
    pthread_mutex_lock(&gate_lock);
    uint64_t d = gate_dropped;
    gate_dropped = 0;
    pthread_mutex_unlock(&gate_lock);
    if (!d)
        return;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "%s: %llu log lines about connections left out (at most %d a second)\n",
                     name ? name : "tollfree", (unsigned long long)d, TFN_LOG_PER_SEC);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* A token bucket: TFN_CONN_LOG_BURST lines, then one a second. 1: the line may go. */
static int throttle_take(tfn_log_throttle *t)
{
    int64_t sec = tfn_now_ns() / NS_PER_S;
    if (t->sec == 0) {
        t->tokens = TFN_CONN_LOG_BURST;
    } else if (sec > t->sec) {
        int64_t v = t->tokens + (sec - t->sec);
        t->tokens = v > TFN_CONN_LOG_BURST ? TFN_CONN_LOG_BURST : (int)v;
    }
    t->sec = sec;
    if (t->tokens <= 0) {
        t->dropped++;
        t->dropped_total++;
        return 0;
    }
    t->tokens--;
    return 1;
}

void tfn_logv(const char *name, int quiet, int flags, tfn_log_throttle *t, const char *fmt,
              va_list ap)
{
    int always = flags & TFN_LOG_ALWAYS;
    if (!always && quiet)
        return;
    if (!always && t && !throttle_take(t))
        return;
    uint64_t gated = 0;
    if (!always && (flags & TFN_LOG_GATED) && !tfn_log_gate(&gated))
        return; /* counted by the gate */
    char prefix[160];
    int n = 0;
    prefix[0] = 0;
    if (gated)
        n = snprintf(prefix, sizeof prefix, "(%llu lines left out) ", (unsigned long long)gated);
    if (!always && t && t->dropped) {
        snprintf(prefix + n, sizeof prefix - (size_t)n, "(%llu lines of this connection left out) ",
                 (unsigned long long)t->dropped);
        t->dropped = 0;
    }
    tfn_log_line(name, prefix, fmt, ap);
}

void tfn_log_named(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfn_log_line(name, NULL, fmt, ap);
    va_end(ap);
}

void tfn_log(tfn_loop *lp, int always, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfn_logv(lp->cfg.name, lp->cfg.quiet, always ? TFN_LOG_ALWAYS : 0, NULL, fmt, ap);
    va_end(ap);
}

void tfn_log_limited(tfn_loop *lp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfn_logv(lp->cfg.name, lp->cfg.quiet, TFN_LOG_GATED, NULL, fmt, ap);
    va_end(ap);
}

void tfn_conn_log(tfn_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfn_logv(c->lp->cfg.name, c->lp->cfg.quiet, TFN_LOG_GATED, &c->log, fmt, ap);
    va_end(ap);
}

uint64_t tfn_conn_log_dropped(const tfn_conn *c)
{
    return c->log.dropped_total;
}
