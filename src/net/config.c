/* One server configuration: the limits `serve` and `engine serve` share, their options (one
 * grammar, common/opts_size.h), and the start-up steps both take; it knows no connection and
 * no protocol, only how the options become a tfn_config. */
#include <string.h>
#include <sys/resource.h>

#include "common/opts_size.h"
#include "net/net_private.h"

void tfn_limits_init(tfn_limits *l)
{
    memset(l, 0, sizeof *l);
    l->max_conns = 4096;
    l->stall_timeout_s = 60;
    l->min_rate = 1024;
}

int tfn_limits_option(tfn_limits *l, const char *opt, const char *val, char *msg, size_t cap)
{
    enum { YEAR_S = 86400 * 365, MAX_CONNS = 1000000 };
    const tfu_limit_opt t[] = {
        {.name = "--max-conns", .lo = 1, .hi = MAX_CONNS, .i = &l->max_conns},
        {.name = "--max-conns-per-peer", .lo = 1, .hi = MAX_CONNS, .i = &l->max_conns_per_peer},
        {.name = "--conn-reserve", .hi = MAX_CONNS, .i = &l->conn_reserve, .zero_is_none = 1},
        {.name = "--stall-timeout", .hi = YEAR_S, .i = &l->stall_timeout_s},
        {.name = "--idle-timeout", .hi = YEAR_S, .i = &l->idle_timeout_s},
        {.name = "--idle-timeout-full", .hi = YEAR_S, .i = &l->idle_full_timeout_s},
        {.name = "--min-rate", .sized = 1, .hi = UINT64_MAX / 2, .u = &l->min_rate},
        {.name = "--max-memory",
         .sized = 1,
         .lo = TFN_MIN_MEMORY,
         .hi = UINT64_MAX / 2,
         .u = &l->max_memory},
        {.name = "--max-output",
         .sized = 1,
         .lo = 4096,
         .hi = (uint64_t)1 << 34,
         .u = &l->max_output},
    };
    return tfu_limit_take(t, sizeof t / sizeof t[0], opt, val, msg, cap);
}

void tfn_limits_apply(const tfn_limits *l, tfn_config *nc)
{
    nc->quiet = l->quiet;
    nc->max_conns = l->max_conns;
    nc->max_conns_per_peer = l->max_conns_per_peer;
    nc->conn_reserve = l->conn_reserve;
    nc->stall_timeout_s = l->stall_timeout_s;
    nc->idle_timeout_s = l->idle_timeout_s;
    nc->idle_full_timeout_s = l->idle_full_timeout_s;
    nc->min_rate = l->min_rate;
    if (l->max_memory)
        nc->mem_limit = l->max_memory;
    if (l->max_output)
        nc->out_max = (size_t)l->max_output;
}

void tfn_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}
