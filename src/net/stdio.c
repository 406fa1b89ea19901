/* The stdio connection: stdin and stdout as one connection, served by its own thread with
 * blocking fds through the same input steps and output queue as a socket; it knows no socket,
 * no peer and no timer (the loop's stop_efd ends its wait). */
#include <unistd.h>

#include "net/net_private.h"
#include "tollfree/error.h"

/* Serves c until its input ends, it fails or closes. Returns why it ended. */
static const char *stdio_serve(tfn_loop *lp, tfn_conn *c)
{
    for (;;) {
        if (tfn_pull_fill(c) < 0)
            return "a reply stream could not be read";
        if (tfn_out_pending(c)) {
            if (tfn_flush(c) < 0)
                return "stdout closed";
            if (c->ops->on_flushed)
                c->ops->on_flushed(c);
        }
        if (c->state == CS_DOOMED || c->state == CS_CLOSING)
            return c->why;
        const char *w = NULL;
        int r = tfn_conn_step(lp, c, &w);
        if (r < 0)
            return w ? w : "error";
        if (r == 0 && c->eof && tfn_at_rest(c))
            return "end of input";
    }
}

static void *stdio_main(void *arg)
{
    tfn_loop *lp = arg;
    tfn_conn *c = tfn_conn_new(lp, 0, lp->stdio_ops, "stdio", &tfn_io_stdio);
    if (c && c->ops->on_open && c->ops->on_open(c) < 0) {
        tfn_conn_free(c);
        c = NULL;
    }
    if (c) {
        c->wfd = 1;
        tfn_stat_add(lp->cfg.stat_conns_total, 1);
        tfn_stat_add(lp->cfg.stat_conns_open, 1);
        const char *why = stdio_serve(lp, c);
        c->ops->on_close(c, why);
        tfn_stat_add(lp->cfg.stat_conns_open, -1);
        tfn_conn_free(c);
    }
    __atomic_store_n(&lp->stdio_done, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(lp->stdio_efd, &one, sizeof one);
    (void)w;
    return NULL;
}

int tfn_loop_add_stdio(tfn_loop *lp, const tfn_ops *ops)
{
    if (lp->stdio_ops)
        return TF_E_INVALID_ARG;
    lp->stdio_ops = ops;
    return 0;
}

int tfn_stdio_start(tfn_loop *lp)
{
    if (!lp->stdio_ops)
        return 0;
    if (pthread_create(&lp->stdio_thr, NULL, stdio_main, lp) != 0)
        return TF_E_NOMEM;
    lp->stdio_started = 1;
    tfn_log(lp, 1, "listening stdio");
    return 0;
}
