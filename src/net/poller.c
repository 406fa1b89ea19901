/* The poller: a thin wrapper over epoll that registers the loop's own fds and the connections
 * (edge-triggered, EPOLLOUT only while output is blocked); it knows no frame, no limit and no
 * connection state. */
#include <sys/epoll.h>

#include "net/net_private.h"

int tfn_poll_open(tfn_loop *lp)
{
    lp->ep = epoll_create1(EPOLL_CLOEXEC);
    return lp->ep;
}

int tfn_poll_add_tag(tfn_loop *lp, int fd, uint64_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = tag;
    return epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev);
}

/* Registered once, edge-triggered: a client reading its replies never wakes the loop for
 * nothing. */
int tfn_poll_add_conn(tfn_loop *lp, tfn_conn *c)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    return epoll_ctl(lp->ep, EPOLL_CTL_ADD, c->rfd, &ev);
}

/* EPOLLOUT is registered only while output is blocked. */
void tfn_want_out(tfn_loop *lp, tfn_conn *c, int on)
{
    if (c->want_out == on || c->io->blocking)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (on ? EPOLLOUT : 0),
                             .data.ptr = c};
    epoll_ctl(lp->ep, EPOLL_CTL_MOD, c->rfd, &ev);
    c->want_out = on;
}
