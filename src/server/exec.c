/* The request executor: one decoded request in, one reply out, whatever the transport.
 * Errors never escape as return codes: they become error frames (docs/protocol.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

static const char *op_name(uint8_t op)
{
    switch (op) {
    case TF_OP_V1_SWEEP:
        return "v1 sweep";
    case TF_OP_V1_ECHO:
        return "v1 echo";
    case TF_OP_HELLO:
        return "HELLO";
    case TF_OP_LOAD:
        return "LOAD";
    case TF_OP_SWEEP_DS:
        return "SWEEP_DS";
    case TF_OP_RUN_ONE:
        return "RUN_ONE";
    case TF_OP_SWEEP:
        return "SWEEP";
    case TF_OP_ECHO:
        return "ECHO";
    case TF_OP_DROP:
        return "DROP";
    case TF_OP_STATS:
        return "STATS";
    case TF_OP_LOAD_FD:
        return "LOAD_FD";
    case TF_OP_SESSION_OPEN:
        return "SESSION_OPEN";
    case TF_OP_SESSION_BAR:
        return "SESSION_BAR";
    case TF_OP_SESSION_QUERY:
        return "SESSION_QUERY";
    case TF_OP_SESSION_CLOSE:
        return "SESSION_CLOSE";
    default:
        return "opcode";
    }
}

void srv_reply_error(srv_ctx *c, srv_reply *rep, const tf_wire_request *rq, int code,
                     const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Every v1 reply body is a multiple of 8 bytes (16 x n_combos or 8 x n_bars); an error body
     * (20 + message) never is, so a v1 client tells them apart by length alone. */
    size_t len = strlen(msg);
    if ((20 + len) % 8 == 0) {
        if (len + 1 < sizeof msg) {
            msg[len] = '.';
            msg[len + 1] = '\0';
        } else {
            msg[len - 1] = '\0';
        }
    }
    /* v1 requests (and bodies too short to carry an id) are answered with request_id 0. */
    uint64_t id = rq && rq->opcode >= 0x10 ? rq->request_id : 0;
    rep->head_len = (uint32_t)tf_wire_put_error(rep->head, sizeof rep->head, id, code, msg);
    rep->nseg = 0;
    rep->error = code;
    srv_log(c->s, 0, "conn %llu (%s): %s 0x%02x: error %d: %s", (unsigned long long)c->conn_id,
            c->transport, rq ? op_name(rq->opcode) : "frame", rq ? rq->opcode : 0, code, msg);
}

void srv_count_reply(srv_ctx *c, const srv_reply *rep)
{
    c->requests++;
    srv_stat_add(c->s, TF_STAT_REQUESTS, 1);
    if (rep->error) {
        c->errors++;
        srv_stat_add(c->s, TF_STAT_ERRORS, 1);
    }
}

int srv_is_heavy(const tf_wire_request *rq)
{
    switch (rq->opcode) {
    case TF_OP_V1_SWEEP:
    case TF_OP_SWEEP:
        return (double)rq->n_bars * (double)rq->n_combos > TF_SERVER_INLINE_WORK;
    case TF_OP_SWEEP_DS:
    case TF_OP_RUN_ONE:
        /* The dataset's length is unknown here; a dataset sweep is rarely tiny. */
        return 1;
    case TF_OP_LOAD:
        return rq->var_len > TF_SERVER_INLINE_LOAD;
    case TF_OP_LOAD_FD:
        return 1;
    default:
        return 0;
    }
}

/* Where a reply's payload starts in the frame: after the length prefix and the v2 header. */
#define PAYLOAD_AT (TF_WIRE_PREFIX + TF_WIRE_V2_HEADER)

/* Starts a success reply: prefix + v2 header (+ fixed payload written by the caller at the
 * returned pointer). body_len is the whole reply body, arrays included. */
static uint8_t *begin(srv_reply *rep, const tf_wire_request *rq, uint64_t body_len,
                      uint32_t fixed_payload)
{
    tf_wire_put_header(rep->head, (uint32_t)body_len, rq->opcode, rq->request_id);
    rep->head_len = PAYLOAD_AT + fixed_payload;
    rep->nseg = 0;
    rep->error = 0;
    return rep->head + PAYLOAD_AT;
}

static void add_seg(srv_reply *rep, const void *p, size_t n)
{
    if (n == 0)
        return;
    rep->seg[rep->nseg].iov_base = (void *)p;
    rep->seg[rep->nseg].iov_len = n;
    rep->nseg++;
}

static const char *window_msg(int rc)
{
    return rc == TF_E_WINDOW_TOO_SHORT ? "a window length is < 1"
                                       : "a window length is above the maximum";
}

/* Runs a sweep into the context's result buffer and builds the reply (v1 or v2 layout). */
static void sweep_reply(srv_ctx *c, const tf_wire_request *rq, const double *close, uint64_t n_bars,
                        tf_series *series, const int64_t *params, uint64_t n_combos, srv_reply *rep)
{
    int rc = tf_params_check(params, (int64_t)n_combos);
    if (rc) {
        srv_reply_error(c, rep, rq, rc, "%s: %s", op_name(rq->opcode), window_msg(rc));
        return;
    }
    /* SWEEP_DS flags: statistics rows after the arrays, a fee (the kernel checks it is finite). */
    int with_stats = rq->opcode == TF_OP_SWEEP_DS && (rq->flags & TF_SWEEP_STATS);
    const double *fee =
        rq->opcode == TF_OP_SWEEP_DS && (rq->flags & TF_SWEEP_FEE) ? &rq->fee : NULL;
    uint64_t per_combo = 16 + (with_stats ? TF_WIRE_STATS_ROW : 0);
    if (srv_buf_reserve(&c->result, per_combo * n_combos)) {
        srv_reply_error(c, rep, rq, TF_E_NOMEM, "no memory for %llu results",
                        (unsigned long long)n_combos);
        return;
    }
    double *pnl = (double *)c->result.p;
    int64_t *trades = (int64_t *)(c->result.p + 8 * n_combos);
    tf_stats *stats = with_stats ? (tf_stats *)(c->result.p + 16 * n_combos) : NULL;
    _Static_assert(sizeof(tf_stats) == TF_WIRE_STATS_ROW, "a statistics row is tf_stats");
    /* The kernel's working memory is bounded by --max-memory too (hostile grids with millions
     * of distinct window lengths would otherwise ask for gigabytes). */
    tf_sweep_opts opts = {.threads = c->sweep_threads,
                          .isa = TF_ISA_AUTO,
                          .max_bytes = c->s->cfg.max_memory,
                          .fee = fee,
                          .stats = stats};
    rc = series ? tf_series_sweep(series, params, (int64_t)n_combos, pnl, trades, &opts)
                : tf_sweep(close, (int64_t)n_bars, params, (int64_t)n_combos, pnl, trades, &opts);
    if (rc) {
        srv_reply_error(c, rep, rq, rc, "%s failed: %s%s", op_name(rq->opcode), tf_strerror(rc),
                        rc == TF_E_LIMIT ? " (the sweep's working memory, --max-memory)" : "");
        return;
    }
    srv_stat_add(c->s, TF_STAT_SWEEPS, 1);
    srv_stat_add(c->s, TF_STAT_COMBOS, n_combos);
    if (rq->opcode == TF_OP_V1_SWEEP) {
        tf_put32(rep->head, (uint32_t)(16 * n_combos));
        rep->head_len = 4;
        rep->nseg = 0;
        rep->error = 0;
    } else {
        uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + 8 + per_combo * n_combos, 8);
        tf_put32(p, (uint32_t)n_combos);
        tf_put32(p + 4, with_stats ? TF_SWEEP_STATS : 0);
    }
    add_seg(rep, c->result.p, per_combo * n_combos); /* pnl, trades, [stats rows]: contiguous */
}

static void do_load_fd(srv_ctx *c, const tf_wire_request *rq, srv_reply *rep)
{
    srv *s = c->s;
    if (!(c->caps & TF_CAP_LOAD_FD) || c->n_fds == 0) {
        const char *why = "LOAD_FD: no fd was attached";
        if (!(c->caps & TF_CAP_LOAD_FD))
            why = "LOAD_FD: this transport cannot pass fds";
        else if (!strcmp(c->transport, "shm ring"))
            why = "LOAD_FD: send it on the shared-memory control socket, not the ring";
        srv_reply_error(c, rep, rq, TF_E_BAD_FD, "%s", why);
        return;
    }
    int fd = c->fds[0];
    memmove(c->fds, c->fds + 1, sizeof(int) * (size_t)(c->n_fds - 1));
    c->n_fds--;
    uint64_t n = rq->n_bars;
    int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    int seals = fcntl(fd, F_GET_SEALS);
    struct stat st;
    const char *why = NULL;
    if (seals < 0)
        why = "the fd is not a memfd";
    else if ((seals & need) != need)
        why = "the memfd lacks F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_WRITE";
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = "fstat failed";
    else if (n > (uint64_t)TF_MAX_BARS || (uint64_t)st.st_size < 8 * n)
        why = "the memfd is smaller than 8 x n_bars";
    if (why) {
        close(fd);
        srv_reply_error(c, rep, rq, TF_E_BAD_FD, "LOAD_FD: %s", why);
        return;
    }
    if (8 * n > s->cfg.max_memory) {
        close(fd);
        srv_reply_error(c, rep, rq, TF_E_DATASET_LIMIT, "LOAD_FD: %llu bytes above --max-memory",
                        (unsigned long long)(8 * n));
        return;
    }
    const double *close_map = NULL;
    if (n) {
        void *m = mmap(NULL, 8 * n, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            srv_reply_error(c, rep, rq, TF_E_BAD_FD, "LOAD_FD: mmap failed: %s", strerror(e));
            return;
        }
        close_map = m;
    }
    close(fd);
    uint64_t handle;
    int created, adopted;
    int rc = srv_ds_add(s, close_map, n, n ? 8 * n : 0, 0, &handle, &created, &adopted);
    if (!adopted && close_map)
        munmap((void *)close_map, 8 * n);
    if (rc) {
        srv_reply_error(c, rep, rq, rc, "LOAD_FD: %s", tf_strerror(rc));
        return;
    }
    uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_LOAD_REPLY, TF_WIRE_LOAD_REPLY);
    tf_put64(p, handle);
    tf_put64(p + 8, n);
    tf_put32(p + 16, (uint32_t)created);
    tf_put32(p + 20, 0);
}

static int check_stream_params(const int64_t p[6])
{
    for (int k = 0; k < 6; k++) {
        if (p[k] < 1)
            return TF_E_WINDOW_TOO_SHORT;
        if (p[k] > TF_STREAM_MAX_WINDOW)
            return TF_E_WINDOW_TOO_LONG;
    }
    return 0;
}

static srv_session *find_session(srv_ctx *c, uint64_t id)
{
    if (!c->sessions)
        return NULL;
    srv_session *ss = &c->sessions[id % TF_SERVER_MAX_SESSIONS];
    return ss->st && ss->id == id ? ss : NULL;
}

static void put_state(uint8_t *p, const srv_session *ss, int with_bars, int pos)
{
    tf_put32(p, (uint32_t)(int32_t)pos);
    tf_put32(p + 4, 0);
    tf_put64(p + 8, (uint64_t)tf_strategy_trades(ss->st));
    double pnl = tf_strategy_pnl(ss->st);
    memcpy(p + 16, &pnl, 8);
    if (with_bars)
        tf_put64(p + 24, (uint64_t)tf_strategy_bars(ss->st));
}

static void do_session_open(srv_ctx *c, const tf_wire_request *rq, srv_reply *rep)
{
    int rc = check_stream_params(rq->params);
    if (rc) {
        srv_reply_error(c, rep, rq, rc, "SESSION_OPEN: %s (streaming maximum 2^24)",
                        window_msg(rc));
        return;
    }
    if (!c->sessions && !(c->sessions = calloc(TF_SERVER_MAX_SESSIONS, sizeof *c->sessions))) {
        srv_reply_error(c, rep, rq, TF_E_NOMEM, "SESSION_OPEN: out of memory");
        return;
    }
    if (c->n_sessions >= TF_SERVER_MAX_SESSIONS) {
        srv_reply_error(c, rep, rq, TF_E_SESSION_LIMIT, "SESSION_OPEN: %d sessions already open",
                        TF_SERVER_MAX_SESSIONS);
        return;
    }
    size_t bytes = tf_strategy_footprint(rq->params);
    if (srv_mem_reserve(c->s, bytes)) {
        srv_reply_error(c, rep, rq, TF_E_SESSION_LIMIT,
                        "SESSION_OPEN: %zu bytes of state would exceed --max-memory", bytes);
        return;
    }
    uint32_t slot = 0;
    while (c->sessions[slot].st)
        slot++;
    srv_session *ss = &c->sessions[slot];
    rc = tf_strategy_open(&ss->st, rq->params);
    if (rc) {
        srv_mem_release(c->s, bytes);
        ss->st = NULL;
        srv_reply_error(c, rep, rq, rc, "SESSION_OPEN: %s", tf_strerror(rc));
        return;
    }
    ss->id = ++c->session_gen * TF_SERVER_MAX_SESSIONS + slot;
    ss->bytes = bytes;
    ss->pos = 0;
    c->n_sessions++;
    srv_stat_add(c->s, TF_STAT_SESSIONS_OPEN, 1);
    uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + 8, 8);
    tf_put64(p, ss->id);
}

static void do_session(srv_ctx *c, const tf_wire_request *rq, srv_reply *rep)
{
    srv_session *ss = find_session(c, rq->id);
    if (!ss) {
        srv_reply_error(c, rep, rq, TF_E_UNKNOWN_SESSION, "%s: no session %llu on this connection",
                        op_name(rq->opcode), (unsigned long long)rq->id);
        return;
    }
    if (rq->opcode == TF_OP_SESSION_BAR) {
        ss->pos = tf_strategy_step(ss->st, rq->close);
        uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_SESSION_BAR_REPLY,
                           TF_WIRE_SESSION_BAR_REPLY);
        put_state(p, ss, 0, ss->pos);
        return;
    }
    uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_SESSION_STATE_REPLY,
                       TF_WIRE_SESSION_STATE_REPLY);
    put_state(p, ss, 1, ss->pos);
    if (rq->opcode == TF_OP_SESSION_CLOSE) {
        tf_strategy_close(ss->st);
        ss->st = NULL;
        srv_mem_release(c->s, ss->bytes);
        c->n_sessions--;
        __atomic_fetch_sub(&c->s->st[TF_STAT_SESSIONS_OPEN], 1, __ATOMIC_RELAXED);
    }
}

static void do_load(srv_ctx *c, const tf_wire_request *rq, const srv_req_data *d, srv_reply *rep)
{
    uint64_t handle;
    int created, adopted;
    /* Adopt the connection's buffer only when it is not much bigger than the dataset (a reused
     * buffer may be far larger, and --max-memory counts 8 x n_bars). */
    int copy = d->in_ring || !d->owner || d->owner->cap > 2 * 8 * rq->n_bars + 4096;
    int rc = srv_ds_add(c->s, d->close, rq->n_bars, 0, copy, &handle, &created, &adopted);
    if (rc) {
        srv_reply_error(c, rep, rq, rc, "LOAD of %llu bars: %s", (unsigned long long)rq->n_bars,
                        tf_strerror(rc));
        return;
    }
    if (adopted) {
        /* The store now owns the payload buffer: the connection gets a fresh one next time. */
        d->owner->p = NULL;
        d->owner->cap = 0;
    }
    uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_LOAD_REPLY, TF_WIRE_LOAD_REPLY);
    tf_put64(p, handle);
    tf_put64(p + 8, rq->n_bars);
    tf_put32(p + 16, (uint32_t)created);
    tf_put32(p + 20, 0);
}

static void do_dataset_sweep(srv_ctx *c, const tf_wire_request *rq, const srv_req_data *d,
                             srv_reply *rep)
{
    srv_dataset *ds = srv_ds_get(c->s, rq->id);
    if (!ds) {
        srv_reply_error(c, rep, rq, TF_E_UNKNOWN_DATASET, "%s: no dataset with handle 0x%016llx",
                        op_name(rq->opcode), (unsigned long long)rq->id);
        return;
    }
    if (rq->opcode == TF_OP_SWEEP_DS) {
        sweep_reply(c, rq, ds->close, ds->n_bars, ds->series, d->params, rq->n_combos, rep);
    } else {
        int rc = tf_params_check(rq->params, 1);
        double pnl = 0;
        int64_t trades = 0;
        tf_sweep_opts opts = {.threads = 1, .isa = TF_ISA_AUTO, .max_bytes = c->s->cfg.max_memory};
        if (!rc)
            rc = ds->series ? tf_series_sweep(ds->series, rq->params, 1, &pnl, &trades, &opts)
                            : tf_sweep(ds->close, (int64_t)ds->n_bars, rq->params, 1, &pnl, &trades,
                                       &opts);
        if (rc) {
            srv_reply_error(c, rep, rq, rc, "RUN_ONE: %s", tf_strerror(rc));
        } else {
            srv_stat_add(c->s, TF_STAT_SWEEPS, 1);
            srv_stat_add(c->s, TF_STAT_COMBOS, 1);
            uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + 16, 16);
            memcpy(p, &pnl, 8);
            tf_put64(p + 8, (uint64_t)trades);
        }
    }
    srv_ds_put(c->s, ds);
}

void srv_exec(srv_ctx *c, const tf_wire_request *rq, const srv_req_data *d, srv_reply *rep)
{
    srv *s = c->s;
    rep->close_after = 0;
    rep->error = 0;
    rep->nseg = 0;
    switch (rq->opcode) {
    case TF_OP_V1_SWEEP:
    case TF_OP_SWEEP:
        sweep_reply(c, rq, d->close, rq->n_bars, NULL, d->params, rq->n_combos, rep);
        break;
    case TF_OP_V1_ECHO:
        tf_put32(rep->head, (uint32_t)(8 * rq->n_bars));
        rep->head_len = 4;
        add_seg(rep, d->close, 8 * rq->n_bars);
        break;
    case TF_OP_ECHO:
        begin(rep, rq, rq->body_len, 0);
        add_seg(rep, d->bytes, rq->var_len);
        break;
    case TF_OP_HELLO: {
        uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_HELLO_REPLY, TF_WIRE_HELLO_REPLY);
        tf_put32(p, TF_WIRE_VERSION);
        tf_put32(p + 4, TF_CAP_DATASETS | TF_CAP_SESSIONS | TF_CAP_SWEEP_FLAGS |
                            (c->caps & TF_CAP_LOAD_FD));
        tf_put64(p + 8, s->cfg.max_frame);
        tf_put64(p + 16, s->cfg.max_memory);
        tf_put32(p + 24, s->cfg.max_datasets);
        tf_put32(p + 28, (uint32_t)s->kernel_threads);
        break;
    }
    case TF_OP_LOAD:
        do_load(c, rq, d, rep);
        break;
    case TF_OP_SWEEP_DS:
    case TF_OP_RUN_ONE:
        do_dataset_sweep(c, rq, d, rep);
        break;
    case TF_OP_DROP: {
        int rc = srv_ds_drop(s, rq->id);
        if (rc)
            srv_reply_error(c, rep, rq, rc, "DROP: no dataset with handle 0x%016llx",
                            (unsigned long long)rq->id);
        else
            begin(rep, rq, TF_WIRE_V2_HEADER, 0);
        break;
    }
    case TF_OP_STATS: {
        uint8_t *p = begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_STATS_REPLY, TF_WIRE_STATS_REPLY);
        for (int i = 0; i < TF_STAT_COUNT; i++)
            tf_put64(p + 8 * i, __atomic_load_n(&s->st[i], __ATOMIC_RELAXED));
        tf_put64(p + 8 * TF_STAT_UPTIME_NS, (uint64_t)(tfw_now_ns() - s->start_ns));
        break;
    }
    case TF_OP_LOAD_FD:
        do_load_fd(c, rq, rep);
        break;
    case TF_OP_SESSION_OPEN:
        do_session_open(c, rq, rep);
        break;
    case TF_OP_SESSION_BAR:
    case TF_OP_SESSION_QUERY:
    case TF_OP_SESSION_CLOSE:
        do_session(c, rq, rep);
        break;
    default:
        srv_reply_error(c, rep, rq, TF_E_UNKNOWN_OPCODE, "unknown opcode");
        break;
    }
}
