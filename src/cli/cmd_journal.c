/* `tollfree journal`: generate, verify and dump OFL1 journals. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

static const char usage[] =
    "usage: tollfree journal <gen|verify|dump> [options]\n"
    "\n"
    "OFL1 journals: a 15-byte header, then records (stream frame + CRC32C), journal_seq from 0.\n"
    "\n"
    "  gen --count N [--seed S] OUT   write N records of the mixed cycle (50% NewLimit,\n"
    "                                 20% CancelByOrder, 10% Replace, 15% Trade, 5% Rejected)\n"
    "  verify FILE                    check every record; exit 0 when whole, else 1 with\n"
    "                                 the offset, journal_seq and reason where it breaks\n"
    "  dump FILE [--json|--table]     print every record (JSON lines by default)\n"
    "\n"
    "Run 'tollfree journal <sub> --help' for details.\n";

static const char gen_usage[] =
    "usage: tollfree journal gen --count N [--seed S] [--session ID]\n"
    "                            [--durability none|group|every] [--force] OUT\n"
    "\n"
    "Writes N records of the deterministic mixed order-flow cycle to the journal OUT.\n"
    "  --count N        records to write (required)\n"
    "  --seed S         PRNG seed (default 1); the same seed gives the same bytes\n"
    "  --session ID     header session id (default: derived from the seed)\n"
    "  --durability P   none, group (default: group commit every 4096 records / 1 ms) or every\n"
    "                   (fdatasync per record: slow). The file is synced at the end in all cases.\n"
    "  --force          replace OUT if it exists (default: refuse)\n"
    "Example: tollfree journal gen --count 1000000 --seed 7 flow.ofl\n";

static const char verify_usage[] =
    "usage: tollfree journal verify FILE\n"
    "\n"
    "Walks FILE checking the header, each record's length, CRC32C, kind, payload and that\n"
    "journal_seq is contiguous from 0. Exit 0 and a summary on stdout when the file is whole;\n"
    "otherwise one line on stderr naming the byte offset and journal_seq where the valid prefix\n"
    "ends and why, and exit 1 (exit 2 for bad usage or an unreadable file). The file is never\n"
    "modified: reopening it for appending truncates it to that valid prefix.\n";

static const char dump_usage[] =
    "usage: tollfree journal dump FILE [--json|--table]\n"
    "\n"
    "Prints every valid record: --json (default) one JSON object per line with journal_seq, kind\n"
    "and the payload fields (snake_case; side \"Buy\"/\"Sell\", quantity an integer, reason by\n"
    "name); --table an aligned human table. If the file has an invalid tail, the valid prefix is\n"
    "printed, then one error line goes to stderr and the exit status is 1.\n"
    "Example: tollfree journal dump flow.ofl | head\n";

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* ---- gen ------------------------------------------------------------------------------------ */

static int cmd_gen(int argc, char **argv)
{
    uint64_t count = 0, seed = 1, session = 0;
    int have_count = 0, have_session = 0, force = 0;
    const char *out = NULL;
    tf_journal_opts opts = {.durability = TF_JOURNAL_GROUP};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            fputs(gen_usage, stdout);
            return 0;
        }
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--count") || !strcmp(a, "--seed") || !strcmp(a, "--session")) {
            uint64_t v;
            if (!has_val || parse_u64(argv[i + 1], &v)) {
                fprintf(stderr, "tollfree journal gen: %s needs a non-negative integer\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--count")) {
                count = v;
                have_count = 1;
            } else if (!strcmp(a, "--seed")) {
                seed = v;
            } else {
                session = v;
                have_session = 1;
            }
        } else if (!strcmp(a, "--durability")) {
            const char *v = has_val ? argv[++i] : "";
            if (!strcmp(v, "none"))
                opts.durability = TF_JOURNAL_NONE;
            else if (!strcmp(v, "group"))
                opts.durability = TF_JOURNAL_GROUP;
            else if (!strcmp(v, "every"))
                opts.durability = TF_JOURNAL_EVERY;
            else {
                fprintf(stderr,
                        "tollfree journal gen: --durability must be none, group or every\n");
                return 2;
            }
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tollfree journal gen: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (out) {
            fprintf(stderr, "tollfree journal gen: more than one output file ('%s')\n", a);
            return 2;
        } else {
            out = a;
        }
    }
    if (!have_count || !out) {
        fprintf(stderr, "tollfree journal gen: %s (try --help)\n",
                !have_count ? "--count N is required" : "the output file OUT is required");
        return 2;
    }
    struct stat st;
    if (stat(out, &st) == 0) {
        if (!force) {
            fprintf(stderr, "tollfree journal gen: %s exists (use --force to replace it)\n", out);
            return 2;
        }
        if (unlink(out) != 0) {
            fprintf(stderr, "tollfree journal gen: %s: %s\n", out, strerror(errno));
            return 2;
        }
    }

    tf_ofl_gen g;
    tf_ofl_gen_init(&g, seed);
    opts.session_id = have_session ? session : g.session_id;
    tf_journal *j;
    int rc = tf_journal_open(out, &opts, &j, NULL);
    if (rc) {
        fprintf(stderr, "tollfree journal gen: %s: %s\n", out, tf_strerror(rc));
        return 2;
    }
    tf_ofl_msg m;
    for (uint64_t i = 0; i < count && !rc; i++) {
        tf_ofl_gen_next(&g, &m);
        rc = tf_journal_append(j, &m, NULL);
    }
    tf_journal_stats st2;
    tf_journal_get_stats(j, &st2);
    int rc2 = tf_journal_close(j);
    if (rc || rc2) {
        fprintf(stderr, "tollfree journal gen: %s: %s\n", out, tf_strerror(rc ? rc : rc2));
        return 2;
    }
    printf("%s: %" PRIu64 " records, %" PRIu64 " bytes, session %" PRIu64 "\n", out, count,
           st2.bytes, opts.session_id);
    return 0;
}

/* ---- verify / dump -------------------------------------------------------------------------- */

/* Opens and maps FILE; prints the error and returns 2 on failure. */
static int map_file(const char *sub, const char *path, tf_journal_map *m)
{
    int rc = tf_journal_map_open(path, m);
    if (rc) {
        fprintf(stderr, "tollfree journal %s: %s: %s\n", sub, path, tf_strerror(rc));
        return 2;
    }
    return 0;
}

static void report_invalid(const char *sub, const char *path, uint64_t offset, uint64_t seq,
                           int reason)
{
    fprintf(stderr,
            "tollfree journal %s: %s: invalid at offset %" PRIu64 " (journal_seq %" PRIu64
            "): %s\n",
            sub, path, offset, seq, tf_strerror(reason));
}

static int cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            fputs(verify_usage, stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tollfree journal verify: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
        if (path) {
            fprintf(stderr, "tollfree journal verify: one FILE at a time\n");
            return 2;
        }
        path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "tollfree journal verify: FILE is required (try --help)\n");
        return 2;
    }
    tf_journal_map m;
    if (map_file("verify", path, &m))
        return 2;
    tf_journal_scan_result s;
    int rc = tf_journal_scan(m.data, m.len, &s);
    tf_journal_map_close(&m);
    if (rc) {
        report_invalid("verify", path, s.valid_bytes, s.records, rc);
        return 1;
    }
    printf("%s: ok, %" PRIu64 " records, %" PRIu64 " bytes, session %" PRIu64
           ", schema %u, clock %s\n",
           path, s.records, s.total_bytes, s.header.session_id, s.header.schema_version,
           s.header.clock_kind == TF_OFL_CLOCK_WALL_NS ? "wall_ns" : "logical");
    return 0;
}

/* A u128 as decimal. */
static const char *u128_dec(tf_ofl_qty q, char buf[48])
{
    __extension__ typedef unsigned __int128 u128;
    u128 v = ((u128)q.hi << 64) | q.lo;
    char *p = buf + 47;
    *p = '\0';
    do {
        *--p = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    return p;
}

/* Appends one field; json selects "k":v or k=v. */
struct out {
    char *p;
    char *end;
    int json;
    int first;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->p, (size_t)(o->end - o->p), fmt, ap);
    va_end(ap);
    if (n > 0)
        o->p += n < o->end - o->p ? n : o->end - o->p - 1;
}

static void field_u(struct out *o, const char *k, uint64_t v)
{
    put(o, o->json ? "%s\"%s\":%" PRIu64 : "%s%s=%" PRIu64,
        o->first  ? ""
        : o->json ? ","
                  : " ",
        k, v);
    o->first = 0;
}

static void field_i(struct out *o, const char *k, int64_t v)
{
    put(o, o->json ? "%s\"%s\":%" PRId64 : "%s%s=%" PRId64,
        o->first  ? ""
        : o->json ? ","
                  : " ",
        k, v);
    o->first = 0;
}

static void field_s(struct out *o, const char *k, const char *v)
{
    put(o, o->json ? "%s\"%s\":\"%s\"" : "%s%s=%s", o->first ? "" : o->json ? "," : " ", k, v);
    o->first = 0;
}

static void field_q(struct out *o, const char *k, tf_ofl_qty q)
{
    char b[48];
    put(o, o->json ? "%s\"%s\":%s" : "%s%s=%s",
        o->first  ? ""
        : o->json ? ","
                  : " ",
        k, u128_dec(q, b));
    o->first = 0;
}

static void payload_fields(struct out *o, const tf_ofl_msg *m)
{
    switch (m->kind) {
    case TF_OFL_NEW_LIMIT:
        field_u(o, "command_seq", m->new_limit.command_seq);
        field_u(o, "account_id", m->new_limit.account_id);
        field_u(o, "client_order_id", m->new_limit.client_order_id);
        field_u(o, "instrument_id", m->new_limit.instrument_id);
        field_s(o, "side", tf_ofl_side_name(m->new_limit.side));
        field_i(o, "price", m->new_limit.price);
        field_q(o, "quantity", m->new_limit.quantity);
        break;
    case TF_OFL_NEW_MARKET:
        field_u(o, "command_seq", m->new_market.command_seq);
        field_u(o, "account_id", m->new_market.account_id);
        field_u(o, "client_order_id", m->new_market.client_order_id);
        field_u(o, "instrument_id", m->new_market.instrument_id);
        field_s(o, "side", tf_ofl_side_name(m->new_market.side));
        field_q(o, "quantity", m->new_market.quantity);
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        field_u(o, "command_seq", m->cancel_by_order.command_seq);
        field_u(o, "order_id", m->cancel_by_order.order_id);
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        field_u(o, "command_seq", m->cancel_by_client.command_seq);
        field_u(o, "account_id", m->cancel_by_client.account_id);
        field_u(o, "client_order_id", m->cancel_by_client.client_order_id);
        break;
    case TF_OFL_REPLACE:
        field_u(o, "command_seq", m->replace.command_seq);
        field_u(o, "order_id", m->replace.order_id);
        field_u(o, "client_order_id", m->replace.client_order_id);
        field_i(o, "price", m->replace.price);
        field_q(o, "quantity", m->replace.quantity);
        break;
    case TF_OFL_ACCEPTED:
        field_u(o, "event_seq", m->accepted.event_seq);
        field_u(o, "command_seq", m->accepted.command_seq);
        field_u(o, "timestamp_ns", m->accepted.timestamp_ns);
        field_u(o, "order_id", m->accepted.order_id);
        field_u(o, "client_order_id", m->accepted.client_order_id);
        field_u(o, "account_id", m->accepted.account_id);
        break;
    case TF_OFL_REJECTED:
        field_u(o, "event_seq", m->rejected.event_seq);
        field_u(o, "command_seq", m->rejected.command_seq);
        field_u(o, "timestamp_ns", m->rejected.timestamp_ns);
        field_u(o, "client_order_id", m->rejected.client_order_id);
        field_s(o, "reason", tf_ofl_reason_name(m->rejected.reason));
        break;
    case TF_OFL_REPLACED:
        field_u(o, "event_seq", m->replaced.event_seq);
        field_u(o, "command_seq", m->replaced.command_seq);
        field_u(o, "timestamp_ns", m->replaced.timestamp_ns);
        field_u(o, "order_id", m->replaced.order_id);
        field_u(o, "client_order_id", m->replaced.client_order_id);
        break;
    case TF_OFL_CANCELED:
        field_u(o, "event_seq", m->canceled.event_seq);
        field_u(o, "command_seq", m->canceled.command_seq);
        field_u(o, "timestamp_ns", m->canceled.timestamp_ns);
        field_u(o, "order_id", m->canceled.order_id);
        break;
    case TF_OFL_TRADE:
        field_u(o, "event_seq", m->trade.event_seq);
        field_u(o, "command_seq", m->trade.command_seq);
        field_u(o, "timestamp_ns", m->trade.timestamp_ns);
        field_u(o, "maker_order_id", m->trade.maker_order_id);
        field_u(o, "taker_order_id", m->trade.taker_order_id);
        field_u(o, "instrument_id", m->trade.instrument_id);
        field_i(o, "price", m->trade.price);
        field_q(o, "quantity", m->trade.quantity);
        break;
    default: /* Heartbeat: no payload */
        break;
    }
}

static int cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    int json = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            fputs(dump_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--table")) {
            json = 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tollfree journal dump: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (path) {
            fprintf(stderr, "tollfree journal dump: one FILE at a time\n");
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "tollfree journal dump: FILE is required (try --help)\n");
        return 2;
    }
    tf_journal_map m;
    if (map_file("dump", path, &m))
        return 2;
    static char obuf[1 << 20];
    setvbuf(stdout, obuf, _IOFBF, sizeof obuf);
    tf_journal_reader r;
    int rc = tf_journal_reader_init(&r, m.data, m.len);
    if (!json && rc == 0)
        printf("# session %" PRIu64 ", schema %u, clock %s\n%12s  %-14s  %s\n", r.header.session_id,
               r.header.schema_version,
               r.header.clock_kind == TF_OFL_CLOCK_WALL_NS ? "wall_ns" : "logical", "journal_seq",
               "kind", "fields");
    tf_ofl_msg msg;
    char line[1024];
    while (rc == 0 && (rc = tf_journal_reader_next(&r, &msg)) == 1) {
        struct out o = {line, line + sizeof line, json, 1};
        if (json) {
            put(&o, "{\"journal_seq\":%" PRIu64 ",\"kind\":\"%s\"", msg.journal_seq,
                tf_ofl_kind_name(msg.kind));
            o.first = 0;
            payload_fields(&o, &msg);
            put(&o, "}\n");
        } else {
            put(&o, "%12" PRIu64 "  %-14s  ", msg.journal_seq, tf_ofl_kind_name(msg.kind));
            payload_fields(&o, &msg);
            put(&o, "\n");
        }
        fwrite(line, 1, (size_t)(o.p - line), stdout);
        rc = 0;
    }
    int werr = fflush(stdout) != 0 || ferror(stdout);
    tf_journal_map_close(&m);
    if (rc < 0) {
        report_invalid("dump", path, r.pos, r.next_seq, rc);
        return 1;
    }
    if (werr) {
        fprintf(stderr, "tollfree journal dump: write error: %s\n", strerror(errno));
        return 2;
    }
    return 0;
}

int tf_cmd_journal(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (is_help(sub) || !strcmp(sub, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(sub, "gen"))
        return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(sub, "verify"))
        return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(sub, "dump"))
        return cmd_dump(argc - 1, argv + 1);
    fprintf(stderr, "tollfree journal: unknown subcommand '%s' (try 'tollfree journal --help')\n",
            sub);
    return 2;
}
