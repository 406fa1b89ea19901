/* The sweep service on the connection layer (src/net/): its operations for the u32-framed
 * protocol (unix, tcp, stdio, and the shm control sockets after their handshake) and for the
 * shared-memory handshake, and srv_run (docs/protocol.md, "Scheduling").
 *
 * A frame is a u32 body length and the body. head() decodes the fixed part of the body in place
 * and points the layer at the connection's payload buffer for the variable part (64-byte
 * aligned, so arrays are read where they land); frame() runs the one request pipeline
 * (srv_exec) and queues the reply with its arrays sent without a copy. Long sweeps and large
 * loads are heavy: they run on the layer's worker pool.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"
#include "server/server.h"

enum { SK_UNIX, SK_TCP, SK_STDIO, SK_SHM_HS, SK_SHM_CTL };

/* A connection's input buffer: part of its fixed cost (not counted against --max-memory), so
 * small; bodies above it are read straight into their buffer. */
#define IBUF_BYTES ((size_t)16 << 10)

typedef struct sconn {
    srv_ctx ctx;
    int kind;
    tf_wire_request rq;
    int frame_err; /* the frame being taken is dropped; this code is the answer */
    uint64_t frame_err_bytes;
    srv_req_data data;
    srv_reply rep;
    uint8_t hs[TF_SHM_HELLO_BYTES];
    int hs_fd;
} sconn;

static const tfn_ops framed_ops, shm_hs_ops;

static srv *conn_srv(const tfn_conn *c)
{
    return tfn_loop_ud(tfn_conn_loop(c));
}

static int on_open(tfn_conn *c)
{
    srv *s = conn_srv(c);
    sconn *sc = calloc(1, sizeof *sc);
    if (!sc)
        return TF_E_NOMEM;
    const char *t = tfn_conn_transport(c);
    sc->kind = !strcmp(t, "unix")    ? SK_UNIX
               : !strcmp(t, "tcp")   ? SK_TCP
               : !strcmp(t, "stdio") ? SK_STDIO
                                     : SK_SHM_HS;
    sc->hs_fd = -1;
    int pass_fds = sc->kind == SK_UNIX || sc->kind == SK_SHM_HS;
    srv_ctx_init(&sc->ctx, s, sc->kind == SK_SHM_HS ? "shm" : t, pass_fds ? TF_CAP_LOAD_FD : 0);
    tfn_conn_set_data(c, sc);
    return 0;
}

static void on_close(tfn_conn *c, const char *why)
{
    sconn *sc = tfn_conn_data(c);
    /* A shared-memory connection's line is written by its ring's thread. */
    if (sc->kind != SK_SHM_CTL)
        srv_log_close(&sc->ctx, why);
    srv_ctx_fini(&sc->ctx);
    if (sc->hs_fd >= 0)
        close(sc->hs_fd);
    free(sc);
}

static void on_fd(tfn_conn *c, int fd)
{
    sconn *sc = tfn_conn_data(c);
    if (sc->kind == SK_SHM_HS && sc->hs_fd < 0)
        sc->hs_fd = fd;
    else
        srv_ctx_push_fd(&sc->ctx, fd);
}

static void on_flushed(tfn_conn *c)
{
    sconn *sc = tfn_conn_data(c);
    srv_buf_trim(&sc->ctx.payload);
    srv_buf_trim(&sc->ctx.result);
}

/* At rest for a tick: an idle connection keeps no request or reply buffer. (A shared-memory
 * connection's buffers belong to its ring thread.) */
static void on_idle(tfn_conn *c)
{
    sconn *sc = tfn_conn_data(c);
    if (sc->kind == SK_SHM_CTL)
        return;
    srv_buf_free(&sc->ctx.payload);
    srv_buf_free(&sc->ctx.result);
    srv_buf_free(&sc->ctx.scratch);
}

/* The pipeline's sink for sockets: the reply's arrays are sent without a copy. */
static int send_reply(void *ud, srv_reply *rep)
{
    tfn_conn *c = ud;
    tfn_conn_send_zc(c, rep->head, rep->head_len, rep->seg, rep->nseg);
    if (rep->close_after)
        tfn_conn_close(c, "closed after an error");
    return 0;
}

static void queue_reply(tfn_conn *c, sconn *sc)
{
    srv_count_reply(&sc->ctx, &sc->rep);
    send_reply(c, &sc->rep);
}

/* ---------------------------------------------------------------- the u32-framed protocol */

/* Allocates (and counts against --max-memory) the buffers a request needs before its body is
 * read: its variable part and, for a sweep, its results, so that a request admitted is never
 * refused later. TF_E_LIMIT (nothing allocated) when the bound would be passed. */
static int reserve_request(sconn *sc, uint64_t var)
{
    const tf_wire_request *rq = &sc->rq;
    int sweep = tfw_op_has(rq->opcode, TFW_OP_SWEEPS);
    uint64_t per_combo = 16;
    if (tfw_op_has(rq->opcode, TFW_OP_SWEEP_FLAGS) && (rq->flags & TF_SWEEP_STATS))
        per_combo += TF_WIRE_STATS_ROW; /* a statistics row per combo */
    int rc = srv_buf_reserve_limited(&sc->ctx.payload, var ? var : 1);
    if (!rc && sweep)
        rc = srv_buf_reserve_limited(&sc->ctx.result, rq->n_combos ? per_combo * rq->n_combos : 1);
    return rc;
}

static int framed_head_bound(tfn_conn *c, srv *s, sconn *sc, const uint8_t *p, size_t avail,
                             tfn_head *h)
{
    uint32_t body_len = tf_le32(p);
    sc->frame_err = 0;
    if (body_len > s->cfg.max_frame) {
        memset(&sc->rq, 0, sizeof sc->rq);
        srv_reply_error(&sc->ctx, &sc->rep, NULL, TF_E_FRAME_TOO_LARGE,
                        "frame body of %u bytes above --max-frame %llu", body_len,
                        (unsigned long long)s->cfg.max_frame);
        sc->rep.close_after = 1;
        queue_reply(c, sc);
        return -1;
    }
    int r = srv_decode(p + 4, avail - 4, body_len, &sc->rq, &sc->frame_err);
    if (r > 0)
        return 4 + r;
    if (sc->frame_err) {
        /* Drop the body, then answer with an error frame and go on with the next frame. */
        h->consume = 4;
        h->body_len = body_len;
        h->body = NULL;
        return 0;
    }
    uint64_t var = sc->rq.var_len;
    h->consume = 4 + sc->rq.fixed_len;
    h->body_len = var;
    int rc = reserve_request(sc, var);
    if (rc) {
        /* Never allocated: the body is read and dropped, the answer is LIMIT (or NOMEM). */
        sc->frame_err = rc;
        sc->frame_err_bytes = body_len;
        h->body = NULL;
        return 0;
    }
    h->body = sc->ctx.payload.p;
    return 0;
}

static int framed_head(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *h)
{
    srv *s = conn_srv(c);
    sconn *sc = tfn_conn_data(c);
    if (avail < 4)
        return 4;
    srv_log_bind(&sc->ctx);
    int r = framed_head_bound(c, s, sc, p, avail, h);
    srv_log_bind(NULL);
    return r;
}

static int framed_is_heavy(tfn_conn *c)
{
    sconn *sc = tfn_conn_data(c);
    return !sc->frame_err && srv_is_heavy(&sc->rq);
}

static void framed_frame_bound(tfn_conn *c, int where, srv *s, sconn *sc)
{
    /* The one request pipeline (pipeline.c); the body was read into the payload buffer, or
     * dropped when frame_err is set (LIMIT/NOMEM: its buffers were refused). */
    int err = sc->frame_err;
    sc->frame_err = 0;
    uint8_t *v = sc->ctx.payload.p;
    sc->data = (srv_req_data){0};
    if (!err) {
        sc->data.close = (const double *)(v + sc->rq.close_off);
        sc->data.params = (const int64_t *)(v + sc->rq.params_off);
        sc->data.fparams = (const double *)(v + sc->rq.params_off);
        sc->data.bytes = v;
        sc->data.owner = &sc->ctx.payload;
    }
    sc->ctx.sweep_threads = where == TFN_ON_LOOP ? 1 : s->cfg.threads;
    srv_sink out = {.emit = send_reply, .ud = c};
    srv_serve(&sc->ctx, &sc->rq, err, &sc->data, &sc->rep, &out);
}

static int framed_frame(tfn_conn *c, int where)
{
    sconn *sc = tfn_conn_data(c);
    srv_log_bind(&sc->ctx);
    framed_frame_bound(c, where, conn_srv(c), sc);
    srv_log_bind(NULL);
    return 0;
}

static const tfn_ops framed_ops = {
    .ibuf_bytes = IBUF_BYTES,
    .max_head = 4 + TF_WIRE_MAX_FIXED,
    .on_open = on_open,
    .head = framed_head,
    .frame = framed_frame,
    .is_heavy = framed_is_heavy,
    .on_fd = on_fd,
    .on_flushed = on_flushed,
    .on_idle = on_idle,
    .on_close = on_close,
};

/* ---------------------------------------------------------------- the shm handshake */

/* 24 bytes with a memfd, then an 8-byte status; after a success the socket is an ordinary
 * framed connection that tells each side when the other is gone. */
static int hs_head(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *h)
{
    sconn *sc = tfn_conn_data(c);
    if (avail < TF_SHM_HELLO_BYTES)
        return TF_SHM_HELLO_BYTES;
    memcpy(sc->hs, p, TF_SHM_HELLO_BYTES);
    h->consume = TF_SHM_HELLO_BYTES;
    h->body_len = 0;
    h->body = NULL;
    return 0;
}

static int hs_frame(tfn_conn *c, int where)
{
    (void)where;
    srv *s = conn_srv(c);
    sconn *sc = tfn_conn_data(c);
    int status = srv_shm_start(s, c, sc->hs_fd, sc->hs, sc->ctx.conn_id);
    if (sc->hs_fd >= 0) {
        close(sc->hs_fd);
        sc->hs_fd = -1;
    }
    uint8_t rep[TF_SHM_HELLO_REPLY_BYTES] = {0};
    tf_put32(rep, (uint32_t)status);
    tf_put32(rep + 4, (uint32_t)getpid());
    tfn_conn_send(c, rep, sizeof rep);
    if (status) {
        srv_log(s, 0, "conn %llu (shm): handshake refused: error %d: %s",
                (unsigned long long)sc->ctx.conn_id, status, tf_strerror(status));
        tfn_conn_close(c, "closed after an error");
        return 0;
    }
    sc->kind = SK_SHM_CTL;
    tfn_conn_set_ops(c, &framed_ops);
    return 0;
}

static const tfn_ops shm_hs_ops = {
    .ibuf_bytes = IBUF_BYTES,
    .max_head = TF_SHM_HELLO_BYTES,
    .on_open = on_open,
    .head = hs_head,
    .frame = hs_frame,
    .on_fd = on_fd,
    .on_close = on_close,
};

/* ---------------------------------------------------------------- the server */

/* The strategies first: a plugin that cannot be loaded keeps the server from starting, before
 * any socket is bound. 0 or a negative code (said). */
static int srv_open(srv *s, const srv_config *cfg)
{
    s->cfg = *cfg;
    if (s->cfg.max_frame > TF_WIRE_MAX_FRAME_LIMIT)
        s->cfg.max_frame = TF_WIRE_MAX_FRAME_LIMIT;
    if (s->cfg.max_datasets > TF_SERVER_MAX_DATASETS_LIMIT)
        s->cfg.max_datasets = TF_SERVER_MAX_DATASETS_LIMIT;
    if (s->cfg.net.max_memory < TFN_MIN_MEMORY) {
        tfn_log_named("tollfree serve", "--max-memory must be at least %llu bytes",
                      (unsigned long long)TFN_MIN_MEMORY);
        return TF_E_INVALID_ARG;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    s->kernel_threads = cfg->threads > 0 ? cfg->threads : (int)(ncpu < 1 ? 1 : ncpu);
    s->start_ns = tfw_now_ns();
    char why[768];
    int rc = srv_strategies_init(s, why, sizeof why);
    if (rc) {
        tfn_log_named("tollfree serve", "%s", why);
        srv_strategies_fini(s);
    }
    return rc;
}

/* The listeners: --unix, --tcp (one start-up for both servers, src/net/), --shm, --stdio. */
static int srv_listen(tfn_loop *lp, const srv_config *cfg)
{
    int rc = tfn_listen_all(lp, &cfg->listen, &framed_ops, 1);
    for (int i = 0; !rc && i < cfg->n_shm; i++)
        rc = tfn_listen_unix(lp, cfg->shm_paths[i], "shm", &shm_hs_ops, 1);
    if (!rc && cfg->stdio)
        rc = tfn_loop_add_stdio(lp, &framed_ops);
    return rc;
}

int srv_run(const srv_config *cfg)
{
    srv *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    int rc = srv_open(s, cfg);
    if (rc) {
        free(s);
        return rc;
    }
    tfn_raise_nofile();
    tfn_config nc = {
        .name = "tollfree serve",
        .mem_used = &s->mem_used,
        .workers = -1,
        .ud = s,
        .stat_bytes_in = &s->st[TF_STAT_BYTES_IN],
        .stat_bytes_out = &s->st[TF_STAT_BYTES_OUT],
        .stat_conns_total = &s->st[TF_STAT_CONNECTIONS_TOTAL],
        .stat_conns_open = &s->st[TF_STAT_CONNECTIONS_OPEN],
    };
    tfn_limits_apply(&s->cfg.net, &nc);
    tfn_loop *lp = NULL;
    rc = tfn_loop_open(&nc, &lp);
    if (!rc)
        rc = srv_ds_init(s);
    if (!rc)
        rc = srv_listen(lp, &s->cfg);
    if (!rc)
        rc = tfn_loop_run(lp);
    if (!rc)
        srv_log(s, 1, "stopped");
    tfn_loop_close(lp); /* joins the shared-memory rings' threads too */
    srv_ds_fini(s);
    srv_strategies_fini(s); /* after every connection (and its sessions) is gone */
    free(s);
    return rc;
}
