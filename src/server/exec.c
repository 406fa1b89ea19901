/* The request executor: one decoded request in, one reply out, whatever the transport.
 * Errors never escape as return codes: they become error frames (docs/protocol.md). */
#include <errno.h>
#include <stdint.h>
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
    return tfw_op_name(op);
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
    case TF_OP_SWEEP_WITH:
        return rq->id != 0 || (double)rq->n_bars * (double)rq->n_combos > TF_SERVER_INLINE_WORK;
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
                          .max_bytes = c->s->cfg.net.max_memory,
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
        uint8_t *p =
            begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_SWEEP_REPLY_FIXED + per_combo * n_combos,
                  TF_WIRE_SWEEP_REPLY_FIXED);
        tfw_put_sweep(p, &(tfw_sweep_reply){(uint32_t)n_combos, with_stats ? TF_SWEEP_STATS : 0});
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
    if (8 * n > s->cfg.net.max_memory) {
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
    tfw_put_load(p, &(tfw_load_reply){handle, n, (uint32_t)created});
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
    tfw_session_reply r = {.position = pos,
                           .trades = tf_strategy_trades(ss->st),
                           .pnl = tf_strategy_pnl(ss->st),
                           .bars = with_bars ? tf_strategy_bars(ss->st) : 0};
    tfw_put_session(p, &r, with_bars);
}

static const tf_strategy_def *named_strategy(srv_ctx *c, const tf_wire_request *rq,
                                             const srv_req_data *d, srv_reply *rep);
static int check_combos(srv_ctx *c, const tf_wire_request *rq, const tf_strategy_def *def,
                        const double *params, uint64_t n_combos, srv_reply *rep);

/* The state a session of def needs, as --max-memory counts it: the strategy's own state and the
 * streaming handle around it (a fixed guess of its booking, rounded up). */
static size_t strategy_footprint(const tf_strategy_def *def, const double *params)
{
    size_t st = def->state_bytes ? def->state_bytes(params) : def->state_size;
    return st > SIZE_MAX - 1024 ? SIZE_MAX : st + 1024;
}

/* SESSION_OPEN (HMA, six i64 windows) and SESSION_OPEN_WITH (a named strategy, f64 params). */
static void do_session_open(srv_ctx *c, const tf_wire_request *rq, const srv_req_data *d,
                            srv_reply *rep)
{
    const tf_strategy_def *def = NULL;
    int with = rq->opcode == TF_OP_SESSION_OPEN_WITH;
    const char *what = op_name(rq->opcode);
    if (with) {
        def = named_strategy(c, rq, d, rep);
        if (!def || check_combos(c, rq, def, d->fparams, 1, rep))
            return;
    } else {
        int rc = check_stream_params(rq->params);
        if (rc) {
            srv_reply_error(c, rep, rq, rc, "SESSION_OPEN: %s (streaming maximum 2^24)",
                            window_msg(rc));
            return;
        }
    }
    if (!c->sessions && !(c->sessions = calloc(TF_SERVER_MAX_SESSIONS, sizeof *c->sessions))) {
        srv_reply_error(c, rep, rq, TF_E_NOMEM, "%s: out of memory", what);
        return;
    }
    if (c->n_sessions >= TF_SERVER_MAX_SESSIONS) {
        srv_reply_error(c, rep, rq, TF_E_SESSION_LIMIT, "%s: %d sessions already open", what,
                        TF_SERVER_MAX_SESSIONS);
        return;
    }
    size_t bytes = with ? strategy_footprint(def, d->fparams) : tf_strategy_footprint(rq->params);
    if (srv_mem_reserve(c->s, bytes)) {
        srv_reply_error(c, rep, rq, TF_E_SESSION_LIMIT,
                        "%s: %zu bytes of state would exceed --max-memory", what, bytes);
        return;
    }
    uint32_t slot = 0;
    while (c->sessions[slot].st)
        slot++;
    srv_session *ss = &c->sessions[slot];
    int rc = with ? tf_strategy_open_with(&ss->st, def, d->fparams)
                  : tf_strategy_open(&ss->st, rq->params);
    if (rc) {
        srv_mem_release(c->s, bytes);
        ss->st = NULL;
        srv_reply_error(c, rep, rq, rc, "%s: %s", what, tf_strerror(rc));
        return;
    }
    ss->id = ++c->session_gen * TF_SERVER_MAX_SESSIONS + slot;
    ss->bytes = bytes;
    ss->pos = 0;
    c->n_sessions++;
    srv_stat_add(c->s, TF_STAT_SESSIONS_OPEN, 1);
    uint8_t *p =
        begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_SESSION_OPEN_REPLY, TF_WIRE_SESSION_OPEN_REPLY);
    tfw_put_session_open(p, ss->id);
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
    tfw_put_load(p, &(tfw_load_reply){handle, rq->n_bars, (uint32_t)created});
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
        tf_sweep_opts opts = {
            .threads = 1, .isa = TF_ISA_AUTO, .max_bytes = c->s->cfg.net.max_memory};
        if (!rc)
            rc = ds->series ? tf_series_sweep(ds->series, rq->params, 1, &pnl, &trades, &opts)
                            : tf_sweep(ds->close, (int64_t)ds->n_bars, rq->params, 1, &pnl, &trades,
                                       &opts);
        if (rc) {
            srv_reply_error(c, rep, rq, rc, "RUN_ONE: %s", tf_strerror(rc));
        } else {
            srv_stat_add(c->s, TF_STAT_SWEEPS, 1);
            srv_stat_add(c->s, TF_STAT_COMBOS, 1);
            uint8_t *p =
                begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_RUN_ONE_REPLY, TF_WIRE_RUN_ONE_REPLY);
            tfw_put_run_one(p, &(tfw_run_one_reply){pnl, trades});
        }
    }
    srv_ds_put(c->s, ds);
}

/* ---- strategies by name (SWEEP_WITH, SESSION_OPEN_WITH) ---- */

/* The strategy a request names, with its parameter count checked; NULL after an error reply
 * (TF_E_STRATEGY naming what is wrong). The name is copied out first: on a shared-memory ring
 * the peer could rewrite it while we read. */
static const tf_strategy_def *named_strategy(srv_ctx *c, const tf_wire_request *rq,
                                             const srv_req_data *d, srv_reply *rep)
{
    char name[TF_WIRE_MAX_NAME + 1];
    size_t n = rq->name_len <= TF_WIRE_MAX_NAME ? rq->name_len : 0;
    memcpy(name, d->bytes + rq->name_off, n);
    name[n] = 0;
    const tf_strategy_def *def = rq->name_len <= TF_WIRE_MAX_NAME && memchr(name, 0, n) == NULL
                                     ? srv_strategy_find(c->s, name, n)
                                     : NULL;
    char offered[512];
    if (!def) {
        srv_strategy_names(c->s, offered, sizeof offered);
        for (size_t i = 0; i < n; i++) /* the name goes into a log line and a UTF-8 message */
            if (name[i] < 0x20 || name[i] > 0x7e)
                name[i] = '?';
        if (rq->name_len > TF_WIRE_MAX_NAME)
            srv_reply_error(c, rep, rq, TF_E_STRATEGY,
                            "%s: unknown strategy (a name of %u bytes); this server offers: %s",
                            op_name(rq->opcode), rq->name_len, offered);
        else
            srv_reply_error(c, rep, rq, TF_E_STRATEGY,
                            "%s: unknown strategy '%s'; this server offers: %s (start it with "
                            "--strategy NAME|PATH.so for more)",
                            op_name(rq->opcode), name, offered);
        return NULL;
    }
    if (rq->n_params != def->n_params) {
        size_t o = 0;
        offered[0] = 0;
        for (uint32_t k = 0; k < def->n_params && o + 1 < sizeof offered; k++) {
            int w = snprintf(offered + o, sizeof offered - o, "%s%s", k ? ", " : "",
                             def->param_names[k]);
            if (w < 0)
                break;
            o += (size_t)w;
        }
        srv_reply_error(c, rep, rq, TF_E_STRATEGY,
                        "%s: strategy '%s' takes %u parameters (%s); the request has %u",
                        op_name(rq->opcode), def->name, def->n_params, offered, rq->n_params);
        return NULL;
    }
    return def;
}

/* init refusing a combo: the error names it (tf_strategy_params_check). 0, or an error reply. */
static int check_combos(srv_ctx *c, const tf_wire_request *rq, const tf_strategy_def *def,
                        const double *params, uint64_t n_combos, srv_reply *rep)
{
    if (!n_combos)
        return 0;
    /* Checking a combo runs init on a state of the size it asks for: no combo may ask for more
     * than --max-memory (a window of 2^27 bars would be a GiB), before anything is allocated. */
    for (uint64_t j = 0; j < n_combos; j++) {
        const double *p = params + j * def->n_params;
        size_t bytes = def->state_bytes ? def->state_bytes(p) : def->state_size;
        if (bytes > c->s->cfg.net.max_memory) {
            int code = rq->opcode == TF_OP_SESSION_OPEN_WITH ? TF_E_SESSION_LIMIT : TF_E_LIMIT;
            srv_reply_error(c, rep, rq, code,
                            "%s: strategy %s: combo %llu asks for %zu bytes of state, above "
                            "--max-memory %llu",
                            op_name(rq->opcode), def->name, (unsigned long long)j, bytes,
                            (unsigned long long)c->s->cfg.net.max_memory);
            return code;
        }
    }
    char why[384] = "";
    int64_t bad = -1;
    int rc = tf_strategy_params_check(def, params, (int64_t)n_combos, &bad, why, sizeof why);
    if (rc)
        srv_reply_error(c, rep, rq, rc, "%s: %s", op_name(rq->opcode),
                        why[0] ? why : tf_strerror(rc));
    return rc;
}

static void do_sweep_with(srv_ctx *c, const tf_wire_request *rq, const srv_req_data *d,
                          srv_reply *rep)
{
    const tf_strategy_def *def = named_strategy(c, rq, d, rep);
    if (!def || check_combos(c, rq, def, d->fparams, rq->n_combos, rep))
        return;
    srv_dataset *ds = NULL;
    const double *close = d->close;
    uint64_t n_bars = rq->n_bars;
    if (rq->id) {
        if (!(ds = srv_ds_get(c->s, rq->id))) {
            srv_reply_error(c, rep, rq, TF_E_UNKNOWN_DATASET,
                            "SWEEP_WITH: no dataset with handle 0x%016llx",
                            (unsigned long long)rq->id);
            return;
        }
        close = ds->close;
        n_bars = ds->n_bars;
    }
    uint64_t n_combos = rq->n_combos;
    int with_stats = (rq->flags & TF_SWEEP_STATS) != 0;
    uint64_t per_combo = 16 + (with_stats ? TF_WIRE_STATS_ROW : 0);
    if (srv_buf_reserve(&c->result, n_combos ? per_combo * n_combos : 1)) {
        srv_reply_error(c, rep, rq, TF_E_NOMEM, "no memory for %llu results",
                        (unsigned long long)n_combos);
        srv_ds_put(c->s, ds);
        return;
    }
    double *pnl = (double *)c->result.p;
    int64_t *trades = (int64_t *)(c->result.p + 8 * n_combos);
    tf_stats *stats = with_stats ? (tf_stats *)(c->result.p + 16 * n_combos) : NULL;
    tf_sweep_opts opts = {.threads = c->sweep_threads,
                          .isa = TF_ISA_AUTO,
                          .max_bytes = c->s->cfg.net.max_memory,
                          .fee = rq->flags & TF_SWEEP_FEE ? &rq->fee : NULL,
                          .stats = stats};
    int rc = n_combos ? tf_sweep_with(def, close, (int64_t)n_bars, d->fparams, (int64_t)n_combos,
                                      pnl, trades, &opts)
                      : 0;
    srv_ds_put(c->s, ds);
    if (rc) {
        srv_reply_error(c, rep, rq, rc, "SWEEP_WITH %s failed: %s%s", def->name, tf_strerror(rc),
                        rc == TF_E_LIMIT ? " (the sweep's working memory, --max-memory)" : "");
        return;
    }
    srv_stat_add(c->s, TF_STAT_SWEEPS, 1);
    srv_stat_add(c->s, TF_STAT_COMBOS, n_combos);
    uint8_t *p =
        begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_SWEEP_REPLY_FIXED + per_combo * n_combos,
              TF_WIRE_SWEEP_REPLY_FIXED);
    tfw_put_sweep(p, &(tfw_sweep_reply){(uint32_t)n_combos, with_stats ? TF_SWEEP_STATS : 0});
    add_seg(rep, c->result.p, per_combo * n_combos);
}

static void do_strategies(srv_ctx *c, const tf_wire_request *rq, srv_reply *rep)
{
    srv *s = c->s;
    uint8_t *p =
        begin(rep, rq, TF_WIRE_V2_HEADER + TF_WIRE_STRATEGIES_REPLY_FIXED + s->strat_text_len,
              TF_WIRE_STRATEGIES_REPLY_FIXED);
    tfw_put_strategies(p, &(tfw_strategies_reply){(uint32_t)s->n_strat, s->strat_text_len});
    add_seg(rep, s->strat_text, s->strat_text_len);
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
        tfw_hello_reply h = {.version = TF_WIRE_VERSION,
                             .caps = TF_CAP_DATASETS | TF_CAP_SESSIONS | TF_CAP_SWEEP_FLAGS |
                                     TF_CAP_STRATEGIES | (c->caps & TF_CAP_LOAD_FD),
                             .max_frame = s->cfg.max_frame,
                             .max_memory = s->cfg.net.max_memory,
                             .max_datasets = s->cfg.max_datasets,
                             .threads = (uint32_t)s->kernel_threads};
        tfw_put_hello(p, &h);
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
        uint64_t v[TF_STAT_COUNT];
        for (int i = 0; i < TF_STAT_COUNT; i++)
            v[i] = __atomic_load_n(&s->st[i], __ATOMIC_RELAXED);
        v[TF_STAT_UPTIME_NS] = (uint64_t)(tfw_now_ns() - s->start_ns);
        tfw_put_stats(p, v);
        break;
    }
    case TF_OP_LOAD_FD:
        do_load_fd(c, rq, rep);
        break;
    case TF_OP_SESSION_OPEN:
    case TF_OP_SESSION_OPEN_WITH:
        do_session_open(c, rq, d, rep);
        break;
    case TF_OP_STRATEGIES:
        do_strategies(c, rq, rep);
        break;
    case TF_OP_SWEEP_WITH:
        do_sweep_with(c, rq, d, rep);
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
