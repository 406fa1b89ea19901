/* Server plumbing shared by every transport: configuration defaults, logging, stats, the memory
 * budget, reusable buffers and per-connection contexts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"

void tf_server_config_init(tf_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_frame = TF_WIRE_DEFAULT_MAX_FRAME;
    cfg->max_memory = (uint64_t)4 << 30;
    cfg->max_datasets = 64;
    cfg->dataset_cache = (uint64_t)256 << 20;
    cfg->spin = TF_SHM_DEFAULT_SPIN;
    cfg->stall_timeout_s = 60;
}

void srv_stat_add(srv *s, int which, uint64_t n)
{
    __atomic_fetch_add(&s->st[which], n, __ATOMIC_RELAXED);
}

void srv_log(srv *s, int always, const char *fmt, ...)
{
    if (!always && s->cfg.quiet)
        return;
    char line[768];
    int n = snprintf(line, sizeof line, "tollfree serve: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per line so lines from different threads never interleave. */
    ssize_t w = write(2, line, len);
    (void)w;
}

int srv_mem_reserve(srv *s, uint64_t bytes)
{
    uint64_t cur = __atomic_load_n(&s->mem_used, __ATOMIC_RELAXED);
    do {
        if (bytes > s->cfg.max_memory || cur > s->cfg.max_memory - bytes)
            return TF_E_LIMIT;
    } while (!__atomic_compare_exchange_n(&s->mem_used, &cur, cur + bytes, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return 0;
}

void srv_mem_release(srv *s, uint64_t bytes)
{
    __atomic_fetch_sub(&s->mem_used, bytes, __ATOMIC_RELAXED);
}

int srv_buf_reserve(srv_buf *b, size_t n)
{
    if (b->p && b->cap >= n)
        return 0;
    size_t cap = (n + 63) & ~(size_t)63;
    if (cap < n) /* overflow */
        return TF_E_NOMEM;
    if (cap == 0)
        cap = 64;
    free(b->p);
    b->cap = 0;
    b->p = aligned_alloc(64, cap);
    if (!b->p)
        return TF_E_NOMEM;
    b->cap = cap;
    return 0;
}

void srv_buf_trim(srv_buf *b)
{
    if (b->cap > TF_SERVER_KEEP_BYTES)
        srv_buf_free(b);
}

void srv_buf_free(srv_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

void srv_ctx_init(srv_ctx *c, srv *s, const char *transport, uint32_t caps)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->transport = transport;
    c->caps = caps;
    c->sweep_threads = 1;
    c->conn_id = __atomic_add_fetch(&s->next_conn_id, 1, __ATOMIC_RELAXED);
    c->opened_ns = tf_now_ns();
}

void srv_log_close(srv_ctx *c, const char *why)
{
    srv_log(c->s, 0, "conn %llu (%s): closed (%s) after %.3f s, %llu requests, %llu errors",
            (unsigned long long)c->conn_id, c->transport, why,
            (double)(tf_now_ns() - c->opened_ns) / 1e9, (unsigned long long)c->requests,
            (unsigned long long)c->errors);
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
