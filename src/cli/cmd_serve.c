/* `tollfree serve`: the engine service (docs/protocol.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "server/server.h"

static const char usage[] =
    "usage: tollfree serve [--unix PATH] [--tcp [HOST:]PORT] [--stdio] [--shm PATH] [options]\n"
    "\n"
    "Serve the sweep kernel to other processes: the v1 protocol byte for byte and the stateful\n"
    "v2 protocol (docs/protocol.md). Several transports may be given at once.\n"
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
    "  --min-rate BYTES     a frame still arriving after 10 s must have averaged this many\n"
    "                       bytes a second, else its connection is closed (default 1K, 0 = off)\n"
    "  --max-conns N        socket connections at once (default 4096)\n"
    "  --max-conns-per-peer N  connections of one peer (a UID on Unix sockets; on TCP an IPv4\n"
    "                       address or an IPv6 /64) at once (default: max-conns minus the\n"
    "                       reserve)\n"
    "  --conn-reserve N     the last N slots only go to peers holding fewer than 4\n"
    "                       connections, so a new client gets in when others fill the server\n"
    "                       (default max-conns/16, 0 = none)\n"
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

/* "123", "64K", "256M", "4G" (binary units), "1KiB". */
static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B"))
            end += strlen(end);
    }
    if (*end)
        return -1;
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int tf_cmd_serve(int argc, char **argv)
{
    srv_config cfg;
    srv_config_init(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        uint64_t b;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--stdio")) {
            cfg.stdio = 1;
            continue;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            cfg.quiet = 1;
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
            slot = cfg.unix_paths;
            count = &cfg.n_unix;
        } else if (!strcmp(a, "--tcp")) {
            slot = cfg.tcp_addrs;
            count = &cfg.n_tcp;
        } else if (!strcmp(a, "--shm")) {
            slot = cfg.shm_paths;
            count = &cfg.n_shm;
        }
        if (slot) {
            if (*count >= TF_SERVER_MAX_LISTEN) {
                fprintf(stderr, "tollfree serve: at most %d %s listeners\n", TF_SERVER_MAX_LISTEN,
                        a);
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
        } else if (!strcmp(a, "--threads") && !parse_int(v, 0, TF_MAX_THREADS, &n)) {
            cfg.threads = (int)n;
        } else if (!strcmp(a, "--max-frame") && !parse_bytes(v, &b) && b >= 1 &&
                   b <= TF_WIRE_MAX_FRAME_LIMIT) {
            cfg.max_frame = b;
        } else if (!strcmp(a, "--max-datasets") &&
                   !parse_int(v, 1, TF_SERVER_MAX_DATASETS_LIMIT, &n)) {
            cfg.max_datasets = (uint32_t)n;
        } else if (!strcmp(a, "--max-memory") && !parse_bytes(v, &b)) {
            if (b < TF_SERVER_MIN_MEMORY) {
                fprintf(stderr,
                        "tollfree serve: --max-memory %s: give at least 1M (it bounds datasets, "
                        "sessions and connection buffers; there is no unlimited setting)\n",
                        v);
                return 2;
            }
            cfg.max_memory = b;
        } else if (!strcmp(a, "--dataset-cache") && !parse_bytes(v, &b)) {
            cfg.dataset_cache = b;
        } else if (!strcmp(a, "--spin") && !parse_int(v, 0, 1000000000, &n)) {
            cfg.spin = (int)n;
        } else if (!strcmp(a, "--stall-timeout") && !parse_int(v, 0, 86400 * 365, &n)) {
            cfg.stall_timeout_s = (int)n;
        } else if (!strcmp(a, "--idle-timeout") && !parse_int(v, 0, 86400 * 365, &n)) {
            cfg.idle_timeout_s = (int)n;
        } else if (!strcmp(a, "--min-rate") && !parse_bytes(v, &b)) {
            cfg.min_rate = b;
        } else if (!strcmp(a, "--max-conns") && !parse_int(v, 1, 1000000, &n)) {
            cfg.max_conns = (int)n;
        } else if (!strcmp(a, "--max-conns-per-peer") && !parse_int(v, 1, 1000000, &n)) {
            cfg.max_conns_per_peer = (int)n;
        } else if (!strcmp(a, "--conn-reserve") && !parse_int(v, 0, 1000000, &n)) {
            cfg.conn_reserve = n ? (int)n : -1;
        } else {
            fprintf(stderr, "tollfree serve: bad option or value: %s %s\n", a, v);
            return 2;
        }
    }
    if (!cfg.n_unix && !cfg.n_tcp && !cfg.n_shm && !cfg.stdio) {
        fputs("tollfree serve: give at least one transport (--unix, --tcp, --stdio, --shm)\n"
              "Run 'tollfree serve --help' for the options.\n",
              stderr);
        return 2;
    }
    int rc = srv_run(&cfg);
    return rc == 0 ? 0 : rc == TF_E_STRATEGY ? 2 : 1;
}
