/* `tollfree engine serve`: the order engine as a durable service (docs/engine-service.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/opts_size.h"
#include "engine_service/engine_service.h"
#include "net/net.h"
#include "net/tls.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

static const char usage[] =
    "usage: tollfree engine serve --journal DIR [--instruments LIST] [--unix PATH]\n"
    "                             [--tcp [HOST:]PORT] [--durability none|group|every]\n"
    "                             [--feed udp:HOST:PORT] [--max-orders N] [--snapshot-every N]\n"
    "                             [--sessions FILE] [--risk FILE]\n"
    "                             [--tls-cert PEM --tls-key PEM]\n"
    "\n"
    "Run the engine service: the order engine for clients over Unix or TCP sockets\n"
    "(docs/engine-service.md; the sweep service is 'tollfree serve').\n"
    "Clients send OFL1 command frames; the sequencer numbers each command (command_seq),\n"
    "appends it to DIR/commands.ofl, applies it, appends its events to DIR/events.ofl and\n"
    "answers the sender with the events, then a Heartbeat carrying the command_seq. A Trade\n"
    "also goes to the connection that placed the resting order. No event reaches a client\n"
    "before its command is durable at the chosen level.\n"
    "\n"
    "options:\n"
    "  --journal DIR        the journal directory (created when missing): commands.ofl,\n"
    "                       events.ofl, snapshot.tfs. On start the commands are replayed\n"
    "                       (a torn tail, what a crash during an append leaves, is cut and\n"
    "                       reported) and events.ofl is brought in line with them. Damage\n"
    "                       with more records after it refuses the start (exit 1, naming\n"
    "                       the record, its offset and how many records follow)\n"
    "  --repair-journal     cut commands.ofl at such damage and start; stderr says how many\n"
    "                       records (acknowledged commands) it drops\n"
    "  --instruments LIST   instrument ids, e.g. 1-16,42 (default: the list stored in\n"
    "                       DIR/commands.ofl.instruments, else 1-16); stored on the first start,\n"
    "                       another list later is refused; 'engine run' replays with it\n"
    "  --unix PATH          listen on a Unix socket (mode 0600; a stale socket is replaced)\n"
    "  --tcp [HOST:]PORT    listen on TCP; HOST defaults to 127.0.0.1; port 0 picks a free\n"
    "                       one (printed on stderr). A HOST that is not loopback (127.x.x.x,\n"
    "                       ::1, localhost) needs --sessions and --tls-cert/--tls-key\n"

    "  --sessions FILE      clients must log on (docs/venue.md): one line per session,\n"
    "                       NAME SECRET ACCOUNT[,ACCOUNT...]; the file must be mode 600. A\n"
    "                       session acts only for its accounts and on its own orders, and a\n"
    "                       command resent with the same client_seq is answered with its\n"
    "                       original events, never applied twice\n"
    "  --risk FILE          per-account limits, kill-switch admins, cancel-on-disconnect\n"
    "                       (docs/venue.md \"Risk\"); journaled; SIGHUP reloads it\n"
    "  --durability LEVEL   when a command counts as done, before any client sees its events:\n"
    "                         group  (default) one fdatasync covers every command that arrived\n"
    "                                meanwhile; safe against a crash and a power loss\n"
    "                         every  one fdatasync per command, its replies sent right after\n"
    "                                it; as safe, slower under load\n"
    "                         none   no fdatasync: commands are handed to the kernel before\n"
    "                                the replies go out, so they survive a crash of this\n"
    "                                process (kill -9), but a power loss or a kernel crash can\n"
    "                                lose commands whose events clients have already seen\n"
    "  --feed udp:HOST:PORT every event also goes out as an OFL1 datagram (the journal's\n"
    "                       session_id, journal_seq = its place in events.ofl); best effort:\n"
    "                       readers fill gaps from DIR/events.ofl\n"
    "  --max-orders N       live orders at once (default 1000000); NewLimit beyond is Rejected\n"
    "  --snapshot-every N   write DIR/snapshot.tfs every N commands and at a clean stop\n"
    "                       (default 1000000; 0 = never); a start then replays only the\n"
    "                       commands after it\n"
    "";

/* Split: ISO C bounds a string literal to 4095 bytes. */
static const char usage_tls[] =
    "TLS (docs/venue.md \"TLS\"):\n"
    "  --tls-cert PEM       TLS (1.2 or later, 1.3 preferred) on every --tcp listener: the\n"
    "                       server's certificate chain, its own certificate first; clients\n"
    "                       connect to tls:HOST:PORT and check it against their CA file.\n"
    "                       Unix sockets stay plain. A handshake must finish within\n"
    "                       --stall-timeout of the accept\n"
    "  --tls-key PEM        its private key; the file must be mode 600 (like --sessions)\n"
    "\n";

static const char usage_limits[] =
    "connections (the limits are those of tollfree serve too, with the same suffixes and\n"
    "messages):\n"
    "  --max-conns N        connections at once (default 4096; more are refused)\n"
    "  --max-conns-per-peer N  connections of one peer (a process on Unix sockets; on TCP an IPv4\n"
    "                       address or an IPv6 /64) at once (default: max-conns minus the\n"
    "                       reserve)\n"
    "  --conn-reserve N     the last N slots only go to peers holding fewer than 4\n"
    "                       connections, so a new client gets in when others fill the service\n"
    "                       (default max-conns/16, 0 = none)\n"
    "  --stall-timeout S    close a connection stuck mid-frame, or not reading its replies,\n"
    "                       for S seconds (default 60, 0 = never)\n"
    "  --idle-timeout S     close a connection idle between frames for S seconds (default 0 =\n"
    "                       never: a client waiting for fills is idle)\n"
    "  --idle-timeout-full S  the same, but only while the service is full (only the reserve\n"
    "                       left): idle connections make room (default 300, 0 = never)\n"
    "  --min-rate BYTES     a frame still arriving after 10 s must have averaged this many\n"
    "                       bytes a second, else its connection is closed (default 1024, 0 =\n"
    "                       off)\n"
    "  --max-memory BYTES   input buffers and replies held and queued for all connections\n"
    "                       together (default 1G, at least 1M): above it, a connection whose\n"
    "                       replies wait takes no new command until its peer reads\n"
    "  --max-output BYTES   a connection's replies held in memory (default 4M); a larger reply\n"
    "                       is streamed from DIR/events.ofl as the peer reads, never dropped\n"
    "  (sizes: digits with an optional K, M or G suffix)\n"
    "  --quiet              no per-connection log lines\n"
    "  --help               this text\n"
    "\n"
    "A frame with a bad envelope (length, unknown or reserved kind, an event or Heartbeat sent\n"
    "as a command) closes its connection after a line on stderr. A command that does not\n"
    "decode (a bad side byte) is not journaled: the sender gets Rejected(Other) with event_seq 0\n"
    "and command_seq 0, then Heartbeat(0).\n"
    "\n"
    "SIGINT/SIGTERM: stop accepting, finish the commands received, make them durable, print\n"
    "one JSON line on stdout: {\"commands\":N,\"events\":N,\"last_command_seq\":N,\n"
    "\"state_hash\":\"0x...\"} and exit 0 ('tollfree engine run DIR/commands.ofl' prints the same\n"
    "state_hash). Exit 1 when it cannot start or a journal write fails, 2 for bad usage.\n"
    "Example:\n"
    "  tollfree engine serve --journal /tmp/eng --unix /tmp/eng.sock --snapshot-every 1000000\n";

/* The limits: the engine service's own rows, then the connection limits both servers share
 * (src/net/config.c), one parser and wording (common/opts_size.h): 1 taken, 0 not a limit
 * option, -1 a bad value (msg says why). */
static int limit_option(const char *a, const char *v, tfes_config *cfg, char *msg, size_t cap)
{
    const tfu_limit_opt lims[] = {
        {.name = "--max-orders", .lo = 1, .hi = TF_ENGINE_MAX_ORDERS, .u32 = &cfg->max_orders},
        {.name = "--snapshot-every", .hi = UINT64_MAX / 2, .u = &cfg->snapshot_every},
    };
    int r = tfu_limit_take(lims, sizeof lims / sizeof lims[0], a, v, msg, cap);
    return r ? r : tfn_limits_option(&cfg->net, a, v, msg, cap);
}

/* 1 when every address HOST of "[HOST:]PORT" resolves to is a loopback one (or no HOST). */
static int loopback_only(const char *spec)
{
    const char *colon = strrchr(spec, ':');
    if (!colon)
        return 1; /* PORT alone: 127.0.0.1 */
    char host[256];
    size_t hl = (size_t)(colon - spec);
    if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
        spec++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof host)
        return hl == 0;
    memcpy(host, spec, hl);
    host[hl] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    int ok = res != NULL;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            const struct sockaddr_in *in = (const void *)a->ai_addr;
            ok &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const void *)a->ai_addr;
            ok &= IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
        } else {
            ok = 0;
        }
    }
    freeaddrinfo(res);
    return ok;
}

/* What the options must say together: 0, or 2 (bad usage) after a line on stderr. */
static int check_config(const tfes_config *cfg)
{
    if (!cfg->dir) {
        fputs("tollfree engine serve: --journal DIR is required (try --help)\n", stderr);
        return 2;
    }
    if (!cfg->listen.n_unix && !cfg->listen.n_tcp) {
        fputs("tollfree engine serve: give at least one listener (--unix PATH, --tcp PORT)\n",
              stderr);
        return 2;
    }
    if (!cfg->tls_cert != !cfg->tls_key) {
        fprintf(stderr, "tollfree engine serve: %s goes with %s (try --help)\n",
                cfg->tls_cert ? "--tls-cert" : "--tls-key",
                cfg->tls_cert ? "--tls-key" : "--tls-cert");
        return 2;
    }
    if (cfg->tls_cert && !cfg->listen.n_tcp) {
        fputs("tollfree engine serve: --tls-cert/--tls-key apply to --tcp listeners; there is "
              "none (Unix sockets stay plain)\n",
              stderr);
        return 2;
    }
    for (int i = 0; i < cfg->listen.n_tcp; i++) {
        if ((cfg->sessions && cfg->tls_cert) || loopback_only(cfg->listen.tcp_addrs[i]))
            continue;
        /* Name what is missing: logons and orders in the clear, or anyone acting for anyone. */
        const char *missing = !cfg->tls_cert && !cfg->sessions
                                  ? "--sessions and --tls-cert/--tls-key"
                              : !cfg->tls_cert ? "--tls-cert/--tls-key"
                                               : "--sessions";
        fprintf(stderr,
                "tollfree engine serve: --tcp %s: not a loopback address: it needs %s (%s); "
                "or listen on 127.0.0.1 or a Unix socket\n",
                cfg->listen.tcp_addrs[i], missing,
                !cfg->tls_cert ? "without TLS, logons and orders would cross the network in the "
                                 "clear"
                               : "without sessions, anyone could act for any account");
        return 2;
    }
    return 0;
}

/* An option with its value: 0 taken, 2 bad usage (said). */
static int value_option(const char *a, const char *v, tfes_config *cfg)
{
    char msg[256];
    int lim;
    if (!strcmp(a, "--journal")) {
        cfg->dir = v;
    } else if (!strcmp(a, "--instruments")) {
        cfg->instruments = v;
    } else if (!strcmp(a, "--unix") || !strcmp(a, "--tcp")) {
        int is_unix = a[2] == 'u';
        int *cnt = is_unix ? &cfg->listen.n_unix : &cfg->listen.n_tcp;
        if (*cnt >= TFN_MAX_LISTENERS) {
            fprintf(stderr, "tollfree engine serve: at most %d %s listeners\n", TFN_MAX_LISTENERS,
                    a);
            return 2;
        }
        (is_unix ? cfg->listen.unix_paths : cfg->listen.tcp_addrs)[(*cnt)++] = v;
    } else if (!strcmp(a, "--durability")) {
        if (!strcmp(v, "none"))
            cfg->durability = TF_JOURNAL_NONE;
        else if (!strcmp(v, "group"))
            cfg->durability = TF_JOURNAL_GROUP;
        else if (!strcmp(v, "every"))
            cfg->durability = TF_JOURNAL_EVERY;
        else {
            fprintf(stderr, "tollfree engine serve: --durability is none, group or every\n");
            return 2;
        }
    } else if (!strcmp(a, "--feed")) {
        cfg->feed = v;
    } else if (!strcmp(a, "--sessions")) {
        cfg->sessions = v;
    } else if (!strcmp(a, "--risk")) {
        cfg->risk = v;
    } else if (!strcmp(a, "--tls-cert")) {
        cfg->tls_cert = v;
    } else if (!strcmp(a, "--tls-key")) {
        cfg->tls_key = v;
    } else if ((lim = limit_option(a, v, cfg, msg, sizeof msg)) != 0) {
        if (lim < 0) {
            fprintf(stderr, "tollfree engine serve: %s (try --help)\n", msg);
            return 2;
        }
    } else {
        fprintf(stderr, "tollfree engine serve: bad option or value: %s %s (try --help)\n", a, v);
        return 2;
    }
    return 0;
}

/* The command line into cfg: 0, 1 (--help said: exit 0) or 2 (bad usage, said). */
static int parse_options(int argc, char **argv, tfes_config *cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            fputs(usage_tls, stdout);
            fputs(usage_limits, stdout);
            return 1;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            cfg->net.quiet = 1;
            continue;
        }
        if (!strcmp(a, "--repair-journal")) {
            cfg->repair_journal = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr,
                    "tollfree engine serve: unknown option or missing value: %s (try --help)\n", a);
            return 2;
        }
        i++;
        if (value_option(a, v, cfg))
            return 2;
    }
    return check_config(cfg);
}

int tf_cmd_engine_serve(int argc, char **argv)
{
    tfes_config cfg;
    tfes_config_init(&cfg);
    int rc = parse_options(argc, argv, &cfg);
    if (rc)
        return rc == 1 ? 0 : 2;
    tfn_tls *tls = NULL;
    if (cfg.tls_cert) {
        char err[768];
        if (tfn_tls_open(cfg.tls_cert, cfg.tls_key, err, sizeof err, &tls)) {
            fprintf(stderr, "tollfree engine serve: %s\n", err);
            return 1;
        }
        cfg.tls = tls; /* every TCP listener of the service */
    }
    tfes_summary sum;
    rc = tfes_run(&cfg, &sum);
    tfn_tls_close(tls);
    if (rc)
        return 1;
    char h[19];
    tf_engine_format_hash(sum.state_hash, h);
    printf("{\"commands\":%" PRIu64 ",\"events\":%" PRIu64 ",\"last_command_seq\":%" PRIu64
           ",\"state_hash\":\"%s\"}\n",
           sum.commands, sum.events, sum.last_command_seq, h);
    fflush(stdout);
    return 0;
}
