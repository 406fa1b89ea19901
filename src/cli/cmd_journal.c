/* `tollfree journal`: generate, verify and dump OFL1 journals. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "orderflow/orderflow_internal.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"
#include "venue/venue.h"

static const char usage[] =
    "usage: tollfree journal <gen|verify|dump> [options]\n"
    "\n"
    "OFL1 journals: a 23-byte header (the OFL1 header and its CRC32C; 15 bytes without it in\n"
    "journals written before), then records (stream frame + CRC32C), journal_seq from 0.\n"
    "\n"
    "  gen --count N [--seed S] OUT   write N records of the mixed cycle (50% NewLimit,\n"
    "                                 20% CancelByOrder, 10% Replace, 15% Trade, 5% Rejected)\n"
    "  verify FILE                    check every record; exit 0 when whole, else 1 with\n"
    "                                 the offset, journal_seq and reason where it breaks\n"
    "  dump FILE [--json|--table]     print every record (JSON lines by default)\n"
    "\n"
    "Run 'tollfree journal <sub> --help' for details.\n";

/* The largest record the mixed cycle writes: a Trade (11 + 72 bytes) and its CRC. */
#define MAX_GEN_RECORD 87

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
    "The journal is written to OUT.tmp and renamed to OUT when complete; on an error, SIGINT or\n"
    "SIGTERM the temporary is removed and OUT is left as it was. A count that cannot fit on the\n"
    "file system (95% of its free space) is refused before anything is written.\n"
    "Example: tollfree journal gen --count 1000000 --seed 7 flow.ofl\n";

static const char verify_usage[] =
    "usage: tollfree journal verify FILE\n"
    "\n"
    "Walks FILE checking the header (and its CRC32C), each record's length, CRC32C, kind,\n"
    "payload and that journal_seq is contiguous from 0. Exit 0 and a summary on stdout when the\n"
    "file is whole; otherwise one line on stderr naming the byte offset and journal_seq where\n"
    "the valid prefix ends and why (\"bad header\" when the header itself is damaged), and exit\n"
    "1 (exit 2 for bad usage or an unreadable file). The file is never modified: reopening it\n"
    "for appending truncates it to that valid prefix (a bad header is refused).\n";

static const char dump_usage[] =
    "usage: tollfree journal dump FILE [--json|--table]\n"
    "\n"
    "Prints every valid record: --json (default) one JSON object per line with journal_seq, kind\n"
    "and the payload fields (snake_case; side \"Buy\"/\"Sell\", quantity an integer, reason by\n"
    "name; a gateway kind's type \"Limit\"/\"Market\" and tif \"GTC\"/\"IOC\"/\"FOK\" by name,\n"
    "a byte outside the set as its number); --table an aligned human table. If the file has an\n"
    "invalid tail, the valid prefix is printed, then one error line goes to stderr and the exit\n"
    "status is 1.\n"
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
    /* Written to OUT.tmp and renamed when whole. The mixed cycle's 20 records take 1279 bytes
     * (64 per record on average) and one record at most 87 (a Trade): count * 64 + one cycle of
     * the largest bounds the file. */
    tf_cli_out of;
    if (tf_cli_out_begin(&of, "journal gen", out, force, count, 64,
                         TF_JOURNAL_HEADER_LEN + 20 * MAX_GEN_RECORD))
        return 2;
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, seed);
    opts.session_id = have_session ? session : g.session_id;
    tf_journal *j;
    int rc = tf_journal_open(of.tmp, &opts, &j, NULL);
    if (rc) {
        fprintf(stderr, "tollfree journal gen: %s: %s\n", of.tmp, tf_strerror(rc));
        tf_cli_out_commit(&of, 0);
        return 1;
    }
    tf_ofl_msg m;
    for (uint64_t i = 0; i < count && !rc && !tf_cli_interrupted; i++) {
        tf_ofl_gen_next(&g, &m);
        rc = tf_journal_append(j, &m, NULL);
    }
    tf_journal_stats st2;
    tf_journal_get_stats(j, &st2);
    int rc2 = tf_journal_close(j);
    if (rc || rc2)
        fprintf(stderr, "tollfree journal gen: %s: %s\n", of.tmp, tf_strerror(rc ? rc : rc2));
    if (tf_cli_out_commit(&of, !rc && !rc2))
        return tf_cli_interrupted ? 130 : 1;
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
    tf_journal_reader r;
    int protected_header =
        !rc && !tf_journal_reader_init(&r, m.data, m.len) && r.pos == TF_JOURNAL_HEADER_LEN;
    tf_journal_map_close(&m);
    if (rc && s.valid_bytes == 0) {
        /* Nothing of the file can be trusted: say so rather than name a record. */
        fprintf(stderr, "tollfree journal verify: %s: bad header at offset 0 (journal_seq 0): %s\n",
                path, tf_strerror(rc));
        return 1;
    }
    if (rc) {
        report_invalid("verify", path, s.valid_bytes, s.records, rc);
        return 1;
    }
    printf("%s: ok, %" PRIu64 " records, %" PRIu64 " bytes, session %" PRIu64
           ", schema %u, clock %s, header %s\n",
           path, s.records, s.total_bytes, s.header.session_id, s.header.schema_version,
           s.header.clock_kind == TF_OFL_CLOCK_WALL_NS ? "wall_ns" : "logical",
           protected_header ? "crc32c" : "unprotected (written before the header CRC)");
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

/* A byte field by its name, or its number when the name table has none. */
static void field_b(struct out *o, const char *k, const char *name, unsigned v)
{
    if (name)
        field_s(o, k, name);
    else
        field_u(o, k, v);
}

/* The payload's fields in wire order, from the kind tables (src/orderflow/orderflow_internal.h:
 * the OFL1 kinds' and the gateway kinds'). */
static void payload_fields(struct out *o, const tf_ofl_msg *m)
{
    const tfo_field *f =
        tf_ofx_is_gateway_kind(m->kind) ? tfo_ofx_kind_fields(m->kind) : tfo_kind_fields(m->kind);
    const unsigned char *u = (const unsigned char *)&m->new_limit; /* the union */
    for (; f && f->name; f++) {
        const unsigned char *v = u + f->offset;
        uint64_t x;
        int64_t i;
        tf_ofl_qty q;
        switch (f->type) {
        case OFL_T_U64:
            memcpy(&x, v, sizeof x);
            field_u(o, f->name, x);
            break;
        case OFL_T_I64:
            memcpy(&i, v, sizeof i);
            field_i(o, f->name, i);
            break;
        case OFL_T_QTY:
            memcpy(&q, v, sizeof q);
            field_q(o, f->name, q);
            break;
        case OFL_T_SIDE:
            field_s(o, f->name, tf_ofl_side_name(*v));
            break;
        case OFL_T_REASON:
            field_s(o, f->name, tf_ofl_reason_name(*v));
            break;
        /* gateway byte fields: an Order's type/tif may be any byte (the engine rejects it) */
        case OFL_T_TYPE:
            field_b(o, f->name, tfo_ofx_type_name(*v), *v);
            break;
        case OFL_T_TIF:
            field_b(o, f->name, tfo_ofx_tif_name(*v), *v);
            break;
        case OFL_T_CANCEL_REASON:
            field_b(o, f->name, tfo_ofx_cancel_reason_name(*v), *v);
            break;
        case OFL_T_EX_REASON:
            field_b(o, f->name, tfo_ofx_reject_reason_name(*v), *v);
            break;
        default: /* OFL_T_U8 */
            field_u(o, f->name, *v);
            break;
        }
    }
}

/* An extension record (docs/venue.md, docs/orderflow.md): a gateway command's or report's
 * fields; a Keyed command's session, client_seq, flags and the inner command's fields (OFL1 or
 * gateway); a risk record's payload bytes (hex); a VenueRejected's fields with its venue
 * reason. */
static void ext_fields(struct out *o, const tf_journal_reader *r)
{
    tfv_msg vm;
    if (tfv_decode_reader_frame(r, &vm) != 0) {
        field_s(o, "error", "an extension record this version cannot read");
        return;
    }
    if (tf_ofx_is_gateway_kind(vm.kind)) {
        payload_fields(o, &vm.ofl);
        return;
    }
    if (vm.kind == TFV_KEYED) {
        field_u(o, "session_id", vm.session);
        field_u(o, "client_seq", vm.client_seq);
        field_u(o, "flags", vm.flags);
        field_s(o, "inner", tf_ofx_kind_name(vm.ofl.kind));
        payload_fields(o, &vm.ofl);
        return;
    }
    if (tfv_risk_kind(vm.kind)) { /* was printed as a VenueRejected of zeros */
        char hex[2 * TFV_RISK_PAYLOAD_MAX + 1];
        for (unsigned i = 0; i < vm.risk_len; i++)
            snprintf(hex + 2 * i, 3, "%02x", vm.risk[i]);
        hex[2 * vm.risk_len] = '\0';
        field_s(o, "payload", hex);
        return;
    }
    const tf_ofl_rejected *j = &vm.ofl.rejected; /* VenueRejected */
    field_u(o, "event_seq", j->event_seq);
    field_u(o, "command_seq", j->command_seq);
    field_u(o, "timestamp_ns", j->timestamp_ns);
    field_u(o, "client_order_id", j->client_order_id);
    field_s(o, "reason", tfv_reason_name(j->reason));
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
                tfv_kind_name(msg.kind));
            o.first = 0;
            if (tfv_is_ext_kind(msg.kind))
                ext_fields(&o, &r);
            else
                payload_fields(&o, &msg);
            put(&o, "}\n");
        } else {
            put(&o, "%12" PRIu64 "  %-14s  ", msg.journal_seq, tfv_kind_name(msg.kind));
            if (tfv_is_ext_kind(msg.kind))
                ext_fields(&o, &r);
            else
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
