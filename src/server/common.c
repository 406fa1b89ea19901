/* Server plumbing shared by every transport: configuration defaults, logging, stats, the memory
 * budget, reusable buffers and per-connection contexts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/net.h"
#include "server/server.h"

void srv_config_init(srv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_frame = TF_WIRE_DEFAULT_MAX_FRAME;
    cfg->max_datasets = 64;
    cfg->dataset_cache = (uint64_t)256 << 20;
    cfg->spin = TF_SHM_DEFAULT_SPIN;
    tfn_limits_init(&cfg->net); /* stall 60 s, min-rate 1K, 4096 connections */
    cfg->net.max_memory = (uint64_t)4 << 30;
    cfg->net.idle_timeout_s = 300;
}

void srv_stat_add(srv *s, int which, uint64_t n)
{
    __atomic_fetch_add(&s->st[which], n, __ATOMIC_RELAXED);
}

static _Thread_local srv_ctx *log_ctx;

void srv_log_bind(srv_ctx *c)
{
    log_ctx = c;
}

/* throttle: 1 the connection bound to the thread (log_ctx) limits it too; 2 only the gate (a
 * close line); 0 neither (a shared-memory ring's close line: at most TF_SERVER_MAX_SHM rings
 * exist at once and each needs a whole handshake, so they cannot flood; every one is said). */
static void vlog(srv *s, int always, int throttle, const char *fmt, va_list ap)
{
    srv_ctx *c = throttle == 1 && log_ctx && log_ctx->s == s ? log_ctx : NULL;
    int flags = always ? TFN_LOG_ALWAYS : throttle ? TFN_LOG_GATED : 0;
    tfn_logv("tollfree serve", s->cfg.net.quiet, flags, c ? &c->log : NULL, fmt, ap);
}

void srv_log(srv *s, int always, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(s, always, 1, fmt, ap);
    va_end(ap);
}

static void log_gated(srv *s, int gate, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_gated(srv *s, int gate, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(s, 0, gate ? 2 : 0, fmt, ap);
    va_end(ap);
}

int srv_mem_reserve(srv *s, uint64_t bytes)
{
    uint64_t cur = __atomic_load_n(&s->mem_used, __ATOMIC_RELAXED);
    do {
        if (bytes > s->cfg.net.max_memory || cur > s->cfg.net.max_memory - bytes)
            return TF_E_LIMIT;
    } while (!__atomic_compare_exchange_n(&s->mem_used, &cur, cur + bytes, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return 0;
}

void srv_mem_release(srv *s, uint64_t bytes)
{
    __atomic_fetch_sub(&s->mem_used, bytes, __ATOMIC_RELAXED);
}

void srv_buf_settle(srv_buf *b)
{
    if (!b->p && b->charged) {
        srv_mem_release(b->s, b->charged);
        b->charged = 0;
    }
}

static int buf_grow(srv_buf *b, size_t n, int limited)
{
    if (b->p && b->cap >= n)
        return 0;
    size_t cap = (n + 63) & ~(size_t)63;
    if (cap < n) /* overflow */
        return TF_E_NOMEM;
    if (cap == 0)
        cap = 64;
    uint64_t count = b->s ? cap : 0; /* every buffer a connection holds counts */
    /* The old buffer is given back first: it is freed before the new one is allocated. */
    srv_buf_free(b);
    if (count) {
        if (limited) {
            if (srv_mem_reserve(b->s, count))
                return TF_E_LIMIT;
        } else {
            __atomic_fetch_add(&b->s->mem_used, count, __ATOMIC_RELAXED);
        }
    }
    b->p = aligned_alloc(64, cap);
    if (!b->p) {
        if (count)
            srv_mem_release(b->s, count);
        return TF_E_NOMEM;
    }
    b->cap = cap;
    b->charged = count;
    return 0;
}

int srv_buf_reserve(srv_buf *b, size_t n)
{
    return buf_grow(b, n, 0);
}

int srv_buf_reserve_limited(srv_buf *b, size_t n)
{
    return buf_grow(b, n, 1);
}

void srv_buf_trim(srv_buf *b)
{
    srv_buf_settle(b);
    if (b->cap > TF_SERVER_KEEP_BYTES ||
        (b->charged &&
         __atomic_load_n(&b->s->mem_used, __ATOMIC_RELAXED) > b->s->cfg.net.max_memory / 2))
        srv_buf_free(b);
}

void srv_buf_free(srv_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
    if (b->charged) {
        srv_mem_release(b->s, b->charged);
        b->charged = 0;
    }
}

void srv_ctx_init(srv_ctx *c, srv *s, const char *transport, uint32_t caps)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->transport = transport;
    c->caps = caps;
    c->sweep_threads = 1;
    c->payload.s = c->result.s = c->scratch.s = s;
    c->conn_id = __atomic_add_fetch(&s->next_conn_id, 1, __ATOMIC_RELAXED);
    c->opened_ns = tfw_now_ns();
}

void srv_log_close(srv_ctx *c, const char *why)
{
    char left[64] = "";
    if (c->log.dropped_total)
        snprintf(left, sizeof left, " (%llu of its log lines left out)",
                 (unsigned long long)c->log.dropped_total);
    log_gated(c->s, strcmp(c->transport, "shm ring") != 0,
              "conn %llu (%s): closed (%s) after %.3f s, %llu requests, %llu errors%s",
              (unsigned long long)c->conn_id, c->transport, why,
              (double)(tfw_now_ns() - c->opened_ns) / 1e9, (unsigned long long)c->requests,
              (unsigned long long)c->errors, left);
}

void srv_ctx_push_fd(srv_ctx *c, int fd)
{
    if (c->n_fds >= TF_SERVER_MAX_FDS) {
        close(fd);
        return;
    }
    c->fds[c->n_fds++] = fd;
}

void srv_ctx_fini(srv_ctx *c)
{
    if (c->sessions) {
        for (uint32_t i = 0; i < TF_SERVER_MAX_SESSIONS; i++) {
            srv_session *ss = &c->sessions[i];
            if (!ss->st)
                continue;
            tf_strategy_close(ss->st);
            srv_mem_release(c->s, ss->bytes);
            __atomic_fetch_sub(&c->s->st[TF_STAT_SESSIONS_OPEN], 1, __ATOMIC_RELAXED);
        }
        free(c->sessions);
        c->sessions = NULL;
    }
    for (int i = 0; i < c->n_fds; i++)
        close(c->fds[i]);
    c->n_fds = 0;
    srv_buf_free(&c->payload);
    srv_buf_free(&c->result);
    srv_buf_free(&c->scratch);
}
