/* The one request pipeline of every transport (docs/protocol.md): socket connections (unix,
 * tcp, stdio and the shm control sockets, conn.c) and shared-memory rings (shm_server.c) decode
 * a request with srv_decode and answer it with srv_serve. Only where the bytes live and how a
 * reply leaves differ: a transport binds the variable part (srv_req_data) and gives a sink. */
#include "server/server.h"

int srv_decode(const uint8_t *body, size_t avail, uint32_t body_len, tf_wire_request *rq, int *err)
{
    int r = tf_wire_decode_request(body, avail, body_len, rq);
    if (r > 0)
        return r;
    *err = r;
    return 0;
}

int srv_serve(srv_ctx *c, const tf_wire_request *rq, int err, const srv_req_data *d, srv_reply *rep,
              const srv_sink *out)
{
    if (err == TF_E_LIMIT || err == TF_E_NOMEM) {
        /* Admission: the buffers this request needs were refused, never allocated. */
        srv_reply_error(c, rep, rq, err,
                        "request of %llu bytes refused: its buffers would take the server past "
                        "--max-memory %llu (retry later)",
                        (unsigned long long)rq->body_len,
                        (unsigned long long)c->s->cfg.net.max_memory);
        rep->close_after = 0;
    } else if (err) {
        srv_reply_error(c, rep, rq, err, "malformed request: %s", tf_strerror(err));
        rep->close_after = 0;
    } else {
        srv_exec(c, rq, d, rep);
        if (d->owner)
            srv_buf_settle(d->owner); /* a LOAD may have adopted it */
    }
    uint64_t len = srv_reply_len(rep);
    if (out->max_reply && len > out->max_reply)
        srv_reply_error(c, rep, rq, out->too_big, "reply of %llu bytes does not fit the %s",
                        (unsigned long long)len, out->what);
    srv_count_reply(c, rep);
    return out->emit(out->ud, rep);
}
