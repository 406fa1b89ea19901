/* `tollfree serve`: the sweep service (docs/protocol.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/opts_size.h"
#include "net/net.h"
#include "server/server.h"

static const char usage[] =
    "usage: tollfree serve [--unix PATH] [--tcp [HOST:]PORT] [--stdio] [--shm PATH] [options]\n"
    "\n"
    "Run the sweep service: the sweep kernel for other processes, over the v1 protocol byte for\n"
    "byte and the stateful v2 protocol (docs/protocol.md). Several transports may be given at\n"
    "once. (The order engine's service is 'tollfree engine serve'.)\n"
    "\n"
    "transports:\n"
    "  --unix PATH          Unix stream socket (file mode 0600; a stale socket is replaced,\n"
    "                       a live one is refused)\n"
    "  --tcp [HOST:]PORT    TCP, HOST defaults to 127.0.0.1; port 0 picks a free port (the\n"
    "                       bound port is printed: 'listening tcp HOST:PORT')\n"
    "  --stdio              requests on stdin, replies on stdout, until EOF\n"
    "  --shm PATH           Unix socket that hands over a shared-memory transport\n"
    "\n"
    "options:\n"
    "  --threads N          kernel threads per sweep (default 0 = all cores)\n"
    "  --max-frame BYTES    largest request body (default 256M; suffixes K, M, G)\n"
    "  --max-datasets N     datasets held at once (default 64)\n"
    "  --max-memory BYTES   bytes held by datasets, sessions, caches and the request and reply\n"
    "                       buffers of all connections (default 4G, at least 1M; there is no\n"
    "                       unlimited setting): a request whose buffers would pass it is\n"
    "                       answered LIMIT without being read into memory\n"
    "  --dataset-cache BYTES  per dataset: first-stage WMAs kept for later sweeps and\n"
    "                       RUN_ONE calls (default 256M, 0 = off; all caches together\n"
    "                       take at most half of --max-memory)\n"
    "  --spin N             shared memory: PAUSE iterations before a futex sleep (default 20000)\n"
    "  --stall-timeout S    close a connection stalled mid-frame, or not reading its replies,\n"
    "                       for S seconds (default 60, 0 = never)\n"
    "  --idle-timeout S     close a connection idle between frames for S seconds (default\n"
    "                       300, 0 = never; shared-memory connections are exempt)\n"
    "  --idle-timeout-full S  the same, but only while the server is full (only the reserve\n"
    "                       left): idle connections make room (default 0 = off)\n"
    "  --min-rate BYTES     a frame still arriving after 10 s must have averaged this many\n"
    "                       bytes a second, else its connection is closed (default 1K, 0 = off)\n"
    "  --max-conns N        socket connections at once (default 4096)\n"
    "  --max-conns-per-peer N  connections of one peer (a process on Unix sockets; on TCP an IPv4\n"
    "                       address or an IPv6 /64) at once (default: max-conns minus the\n"
    "                       reserve)\n"
    "  --conn-reserve N     the last N slots only go to peers holding fewer than 4\n"
    "                       connections, so a new client gets in when others fill the server\n"
    "                       (default max-conns/16, 0 = none)\n"
    "  --max-output BYTES   a connection's replies queued in the server's own buffer beyond\n"
    "                       this close it: the peer does not read (default 16M, at least 4K;\n"
    "                       arrays sent without a copy do not count)\n"
    "  --strategy NAME|PATH.so  offer this strategy too (repeatable): a built-in (sma_cross,\n"
    "                       ema_cross, donchian, rsi, bollinger) or a C plugin, loaded at\n"
    "                       start (one that cannot be loaded: the server does not start,\n"
    "                       exit 2, naming the file and the reason).\n"
    "                       'hma' is always offered; v2 clients list them (STRATEGIES) and\n"
    "                       sweep or stream any of them by name (SWEEP_WITH,\n"
    "                       SESSION_OPEN_WITH); v1 and the other requests are HMA's\n"
    "  --quiet              no per-connection or per-error log lines\n"
    "  --help               this text\n"
    "\n"
    "SIGINT/SIGTERM: stop accepting, finish running requests, remove socket files, exit 0.\n"
    "Examples:\n"
    "  tollfree serve --unix /tmp/tollfree.sock\n"
    "  tollfree serve --unix /tmp/tf.sock --shm /tmp/tf-shm.sock --tcp 127.0.0.1:7070\n"
    "  tollfree serve --unix /tmp/tf.sock --strategy sma_cross --strategy ./my_strategy.so\n";

/* The limits: the sweep service's own rows, then the connection limits both servers share
 * (src/net/config.c), one parser and wording (common/opts_size.h): 1 taken, 0 not a limit
 * option, -1 a bad value (msg says why). */
static int limit_option(const char *a, const char *v, srv_config *cfg, char *msg, size_t cap)
{
    const tfu_limit_opt lims[] = {
        {.name = "--threads", .hi = TF_MAX_THREADS, .i = &cfg->threads},
        {.name = "--max-frame",
         .sized = 1,
         .lo = 1,
         .hi = TF_WIRE_MAX_FRAME_LIMIT,
         .u = &cfg->max_frame},
        {.name = "--max-datasets",
         .lo = 1,
         .hi = TF_SERVER_MAX_DATASETS_LIMIT,
         .u32 = &cfg->max_datasets},
        {.name = "--dataset-cache", .sized = 1, .hi = UINT64_MAX / 2, .u = &cfg->dataset_cache},
        {.name = "--spin", .hi = 1000000000, .i = &cfg->spin},
    };
    int r = tfu_limit_take(lims, sizeof lims / sizeof lims[0], a, v, msg, cap);
    return r ? r : tfn_limits_option(&cfg->net, a, v, msg, cap);
}

int tf_cmd_serve(int argc, char **argv)
{
    srv_config cfg;
    srv_config_init(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char msg[256];
        int lim;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--stdio")) {
            cfg.stdio = 1;
            continue;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            cfg.net.quiet = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "tollfree serve: unknown option or missing value: %s\n", a);
            return 2;
        }
        i++;
        const char **slot = NULL;
        int *count = NULL;
        if (!strcmp(a, "--unix")) {
            slot = cfg.listen.unix_paths;
            count = &cfg.listen.n_unix;
        } else if (!strcmp(a, "--tcp")) {
            slot = cfg.listen.tcp_addrs;
            count = &cfg.listen.n_tcp;
        } else if (!strcmp(a, "--shm")) {
            slot = cfg.shm_paths;
            count = &cfg.n_shm;
        }
        if (slot) {
            if (*count >= TFN_MAX_LISTENERS) {
                fprintf(stderr, "tollfree serve: at most %d %s listeners\n", TFN_MAX_LISTENERS, a);
                return 2;
            }
            slot[(*count)++] = v;
        } else if (!strcmp(a, "--strategy")) {
            if (cfg.n_strategies >= TF_SERVER_MAX_STRATEGIES) {
                fprintf(stderr, "tollfree serve: at most %d --strategy options\n",
                        TF_SERVER_MAX_STRATEGIES);
                return 2;
            }
            cfg.strategies[cfg.n_strategies++] = v;
        } else if ((lim = limit_option(a, v, &cfg, msg, sizeof msg)) != 0) {
            if (lim < 0) {
                fprintf(stderr, "tollfree serve: %s (try --help)\n", msg);
                return 2;
            }
        } else {
            fprintf(stderr, "tollfree serve: bad option or value: %s %s\n", a, v);
            return 2;
        }
    }
    if (!cfg.listen.n_unix && !cfg.listen.n_tcp && !cfg.n_shm && !cfg.stdio) {
        fputs("tollfree serve: give at least one transport (--unix, --tcp, --stdio, --shm)\n"
              "Run 'tollfree serve --help' for the options.\n",
              stderr);
        return 2;
    }
    int rc = srv_run(&cfg);
    return rc == 0 ? 0 : rc == TF_E_STRATEGY ? 2 : 1;
}
