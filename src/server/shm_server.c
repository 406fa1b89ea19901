/* The sweep service's part of a shared-memory connection: it answers each request frame that
 * lies in a request ring through the one request pipeline (pipeline.c), with the ring as its
 * sink. The ring itself (the handshake's checks, the admission, its thread, the waiting of
 * include/tollfree/shm.h, the timers and the shutdown) is a transport of the connection layer
 * (src/net/ring.c).
 *
 * The client can write any byte of the ring at any time: the fixed part and the params of a
 * request are copied out before they are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* What the server keeps per ring (the ring's data), touched only by the ring's thread. */
typedef struct srv_shm {
    srv *s;
    tfn_ring *ring;
    srv_ctx ctx;
    srv_reply rep;
    char ring_what[48]; /* "N-byte ring", for SHM_TOO_BIG messages */
} srv_shm;

static int is_array_op(uint8_t op)
{
    return tfw_op_has(op, TFW_OP_CLOSES);
}

/* The pipeline's sink for a ring: the layer copies the reply in once there is room and
 * releases the request before it publishes the reply. */
static int ring_emit(void *ud, srv_reply *rep)
{
    srv_shm *m = ud;
    int rc = tfn_ring_reply(m->ring, rep->head, rep->head_len, rep->seg, rep->nseg);
    if (rc)
        return rc;
    return rep->close_after ? TF_E_FRAME_TOO_LARGE : 0;
}

/* Binds the variable part of a request that lies in the request ring: the params (and a close
 * array that is misaligned, or that a LOAD will keep) are copied out first, since the peer may
 * rewrite the ring under us; other close arrays are read in place. 0 or TF_E_LIMIT/NOMEM. */
static int bind_ring_data(srv_ctx *c, const tf_wire_request *rq, const uint8_t *var,
                          srv_req_data *d)
{
    uint64_t params_bytes = rq->params_len; /* n x 6 x i64, or n x n_params x f64 */
    uint64_t close_bytes = is_array_op(rq->opcode) ? 8 * rq->n_bars : 0;
    const uint8_t *close = var + rq->close_off;
    int copy_close = close_bytes && (((uintptr_t)close & 7) != 0 || rq->opcode == TF_OP_LOAD);
    *d = (srv_req_data){.in_ring = 1, .bytes = var};
    int rc = srv_buf_reserve_limited(&c->scratch, params_bytes + (copy_close ? close_bytes : 0));
    if (rc)
        return rc;
    if (params_bytes) {
        memcpy(c->scratch.p, var + rq->params_off, params_bytes);
        d->params = (const int64_t *)c->scratch.p;
        d->fparams = (const double *)c->scratch.p;
    }
    if (copy_close) {
        memcpy(c->scratch.p + params_bytes, close, close_bytes);
        close = c->scratch.p + params_bytes;
    }
    d->close = (const double *)close;
    if (rq->opcode == TF_OP_LOAD && !params_bytes) {
        /* A private copy the store may adopt (hashing bytes the peer can still change would
         * break content addressing). */
        d->owner = &c->scratch;
        d->in_ring = 0;
    }
    return 0;
}

/* Serves one request frame that lies in the request ring through the one request pipeline.
 * Returns 0, or a negative code when the ring must end. */
static int shm_frame(tfn_ring *r, const uint8_t *frame, uint32_t body_len)
{
    srv_shm *m = tfn_ring_data(r);
    srv *s = m->s;
    srv_ctx *c = &m->ctx;
    tf_wire_request rq;
    uint8_t fixed[TF_WIRE_MAX_FIXED];
    size_t n = body_len < TF_WIRE_MAX_FIXED ? body_len : TF_WIRE_MAX_FIXED;
    /* A private copy: the peer may rewrite the ring while we decode. */
    memcpy(fixed, frame + 4, n);
    int err = 0;
    if (srv_decode(fixed, n, body_len, &rq, &err) > 0)
        err = TF_E_PROTOCOL; /* cannot happen: n covers every fixed part */
    srv_req_data d = {0};
    if (!err)
        err = bind_ring_data(c, &rq, frame + 4 + rq.fixed_len, &d);
    c->sweep_threads = s->cfg.threads;
    srv_sink out = {.max_reply = tfn_ring_bytes(r) - 8,
                    .too_big = TF_E_SHM_TOO_BIG,
                    .what = m->ring_what,
                    .emit = ring_emit,
                    .ud = m};
    int rc = srv_serve(c, &rq, err, &d, &m->rep, &out);
    srv_buf_trim(&c->scratch);
    srv_buf_trim(&c->result);
    srv_buf_trim(&c->payload);
    return rc;
}

static void shm_start(tfn_ring *r)
{
    srv_shm *m = tfn_ring_data(r);
    m->ring = r;
    srv_log_bind(&m->ctx);
}

static void shm_close(tfn_ring *r, const char *line)
{
    srv_shm *m = tfn_ring_data(r);
    srv_log_close(&m->ctx, line);
    srv_log_bind(NULL);
    srv_ctx_fini(&m->ctx);
    free(m);
}

static const tfn_ring_ops shm_ops = {
    .on_start = shm_start,
    .frame = shm_frame,
    .on_close = shm_close,
};

int srv_shm_start(srv *s, tfn_conn *ctl, int memfd, const uint8_t hello[TF_SHM_HELLO_BYTES],
                  uint64_t conn_id)
{
    srv_shm *m = calloc(1, sizeof *m);
    if (!m)
        return TF_E_NOMEM;
    m->s = s;
    srv_ctx_init(&m->ctx, s, "shm ring", TF_CAP_LOAD_FD);
    m->ctx.conn_id = conn_id;
    snprintf(m->ring_what, sizeof m->ring_what, "%llu-byte ring",
             (unsigned long long)tf_le64(hello + 8));
    int rc = tfn_ring_open(ctl, memfd, hello, &shm_ops, m, s->cfg.spin, s->cfg.max_frame);
    if (rc) {
        srv_ctx_fini(&m->ctx);
        free(m);
    }
    return rc;
}
