/* `tollfree engine`: run a command journal through the order engine, generate order flow, take
 * snapshots. `engine serve` lives in cmd_engine_serve.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "engine_service/engine_service.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "venue/replay_run.h"
#include "venue/venue.h"

static const char usage[] =
    "usage: tollfree engine <run|gen|snapshot|serve> [options]\n"
    "\n"
    "The order engine: price-time matching of OFL1 commands, with a state hash that every path\n"
    "(one run, a replay, a snapshot + the journal's tail, a restart) reproduces.\n"
    "\n"
    "  run COMMANDS.ofl      apply a command journal; print one JSON summary with the state hash\n"
    "  gen --count N OUT     write a realistic command flow (exchange-core mix or OFL1 cycle)\n"
    "  snapshot COMMANDS.ofl --out FILE   apply a journal (or its prefix) and save a snapshot\n"
    "  serve --journal DIR   run the engine as a durable service (see its --help)\n"
    "\n"
    "Run 'tollfree engine <sub> --help' for details. docs/engine.md has the semantics.\n"
    "Example:\n"
    "  tollfree engine gen --count 10000000 --seed 1 flow.ofl\n"
    "  tollfree engine run flow.ofl --events events.ofl\n";

static const char run_usage[] =
    "usage: tollfree engine run COMMANDS.ofl [--instruments LIST [--force]] [--max-orders N]\n"
    "                           [--events OUT.ofl] [--book] [--from-snapshot FILE] [--quiet]\n"
    "\n"
    "Applies the journal's valid prefix to a fresh engine (or to the state of a snapshot) and\n"
    "prints ONE JSON object on stdout: records, commands, applied, duplicates, skipped (event\n"
    "and heartbeat records), malformed (whole records whose payload does not decode), events,\n"
    "trades, rejected, resting_orders, price_levels, last_command_seq, next_order_id,\n"
    "next_event_seq, state_hash, seconds, and \"journal\": {\"whole\": true} or where the valid\n"
    "prefix ends (offset, journal_seq, reason) when the file is torn or corrupt.\n"
    "  --instruments LIST  instrument ids and ranges, e.g. 1-16,42. Default: the list stored\n"
    "                      beside the journal (COMMANDS.ofl.instruments, written by 'engine\n"
    "                      serve' and 'paper --journal'), else 1-16 with a note on stderr. A\n"
    "                      LIST other than the stored one is refused (the state hash would\n"
    "                      differ) unless --force. The JSON says which list was used:\n"
    "                      \"instruments\" and \"instruments_from\" (journal, option, default,\n"
    "                      snapshot)\n"
    "  --force             use --instruments LIST even when the journal stores another\n"
    "  --max-orders N      live-order limit (default 1000000); a limit order beyond it is\n"
    "                      Rejected(Other)\n"
    "  --events OUT.ofl    write the events as an OFL1 journal (readable by 'journal dump')\n"
    "  --book              add the final book: per instrument, bids and asks in priority order\n"
    "  --from-snapshot F   start from snapshot F (its instruments and limits); the journal's\n"
    "                      commands it already covers (command_seq <= its last) are counted\n"
    "                      as covered_by_snapshot and not applied\n"
    "  --quiet             no progress line on stderr (progress shows only on a terminal)\n"
    "Where the valid prefix ends is also said on stderr, with \"torn_tail\" and \"records_after\"\n"
    "in the JSON. Exit 0 when the journal was read to its end or to a torn tail (the damage is\n"
    "at the very end: what an interrupted append leaves), 1 when the damage has records with a\n"
    "good CRC after it (the JSON then covers only the records before it) or the journal cannot\n"
    "be read at all, 2 for bad usage.\n";

static const char gen_usage[] =
    "usage: tollfree engine gen --count N [--seed S] [--mix exchange-core|ofl1]\n"
    "                           [--instruments LIST] [--orders N] [--force] OUT.ofl\n"
    "\n"
    "Writes N records of realistic order flow. The generator runs an engine of its own, so\n"
    "cancels and replaces hit live orders, and client order ids are unique.\n"
    "  --mix exchange-core  (default) ~9% limit orders, 3% market orders, 6% cancels, 82%\n"
    "                       replaces moving orders; about --orders resting orders over about\n"
    "                       3/4 as many price levels; a few percent of commands trade\n"
    "  --mix ofl1           the OFL1 cycle: 10 NewLimit, 4 CancelByOrder, 2 Replace, 3 Trade\n"
    "                       and 1 Rejected event records in every 20 (the events are skipped\n"
    "                       by an engine)\n"
    "  --seed S             PRNG seed (default 1): the same seed gives the same bytes\n"
    "  --instruments LIST   instruments the orders go to (default 1)\n"
    "  --orders N           resting orders the flow keeps (default 1000; 100000 for a deep book)\n"
    "  --force              replace OUT if it exists\n"
    "The file is written to OUT.tmp and renamed when complete; a count that cannot fit on the\n"
    "disk is refused before anything is written.\n";

static const char snapshot_usage[] =
    "usage: tollfree engine snapshot COMMANDS.ofl --out FILE [--at SEQ]\n"
    "                                [--instruments LIST [--force]] [--max-orders N]\n"
    "\n"
    "Applies the journal (up to and including command_seq SEQ with --at) and writes a snapshot\n"
    "of the whole engine state to FILE (CRC32C-protected; written to FILE.tmp, fsync'd and\n"
    "renamed). 'engine run COMMANDS.ofl --from-snapshot FILE' then gives the same state hash\n"
    "and the same tail events as a full run. The instruments: as for 'engine run' (the list\n"
    "stored beside the journal by default). Prints one JSON line: last_command_seq,\n"
    "resting_orders, state_hash, bytes, instruments, instruments_from. A journal damaged before\n"
    "SEQ (or anywhere, without --at) by more than a torn tail (see 'engine run --help') writes\n"
    "no snapshot: exit 1, the damage named on stderr.\n";

/* ---- options -------------------------------------------------------------------------------- */

struct opts {
    const char *input, *events, *snapshot_in, *out, *instruments, *mix;
    uint64_t count, seed, max_orders, at, orders;
    int book, quiet, force, have_count, have_at;
};

static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Parses argv[1..] of a subcommand. The allowed options are named in `allow` (space separated,
 * with a trailing space). Returns 0, 1 for --help (printed), or 2 after an error line. */
static int parse_opts(const char *sub, const char *help, const char *allow, int argc, char **argv,
                      struct opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 1;
        }
        if (a[0] != '-' || !a[1]) {
            const char **slot = o->input ? &o->out : &o->input;
            if (*slot) {
                fprintf(stderr, "tollfree engine %s: unexpected argument '%s'\n", sub, a);
                return 2;
            }
            *slot = a;
            continue;
        }
        char key[40];
        snprintf(key, sizeof key, "%s ", a);
        if (!strstr(allow, key)) {
            fprintf(stderr, "tollfree engine %s: unknown option '%s' (try --help)\n", sub, a);
            return 2;
        }
        if (!strcmp(a, "--book") || !strcmp(a, "--quiet") || !strcmp(a, "--force")) {
            *(a[2] == 'b' ? &o->book : a[2] == 'q' ? &o->quiet : &o->force) = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tollfree engine %s: %s needs a value\n", sub, a);
            return 2;
        }
        const char *v = argv[++i];
        const char **str = !strcmp(a, "--events")          ? &o->events
                           : !strcmp(a, "--from-snapshot") ? &o->snapshot_in
                           : !strcmp(a, "--out")           ? &o->out
                           : !strcmp(a, "--instruments")   ? &o->instruments
                           : !strcmp(a, "--mix")           ? &o->mix
                                                           : NULL;
        if (str) {
            *str = v;
            continue;
        }
        uint64_t *num = !strcmp(a, "--count")        ? &o->count
                        : !strcmp(a, "--seed")       ? &o->seed
                        : !strcmp(a, "--max-orders") ? &o->max_orders
                        : !strcmp(a, "--orders")     ? &o->orders
                                                     : &o->at;
        if (parse_u64(v, num)) {
            fprintf(stderr, "tollfree engine %s: %s needs a non-negative integer, not '%s'\n", sub,
                    a, v);
            return 2;
        }
        o->have_count |= num == &o->count;
        o->have_at |= num == &o->at;
    }
    return 0;
}

/* The instruments of --instruments (default "1-16" or `dflt`). */
static int instruments_of(const char *sub, const char *list, uint64_t **ids)
{
    static uint64_t buf[TF_ENGINE_MAX_INSTRUMENTS];
    int n = tf_engine_parse_instruments(list, buf, TF_ENGINE_MAX_INSTRUMENTS);
    if (n <= 0) {
        fprintf(stderr,
                "tollfree engine %s: --instruments '%s': %s (ids >= 1 and ranges, e.g. "
                "1-16,42; at most %d)\n",
                sub, list, n == TF_E_LIMIT ? "too many instruments" : "bad list",
                TF_ENGINE_MAX_INSTRUMENTS);
        return -1;
    }
    *ids = buf;
    return n;
}

static int max_orders_of(const char *sub, const struct opts *o, uint32_t *out)
{
    uint64_t m = o->max_orders ? o->max_orders : TF_ENGINE_DEFAULT_MAX_ORDERS;
    if (m > TF_ENGINE_MAX_ORDERS) {
        fprintf(stderr, "tollfree engine %s: --max-orders must be 1..%u\n", sub,
                TF_ENGINE_MAX_ORDERS);
        return -1;
    }
    *out = (uint32_t)m;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Which instrument list an engine got, for the JSON summary. */
struct inst_used {
    char list[256];   /* "1-16,42" (cut with "..." when longer) */
    const char *from; /* "journal", "option", "default", "snapshot" */
};

static void note_list(struct inst_used *u, const uint64_t *ids, uint32_t n, const char *from)
{
    if (tf_journal_instruments_format(ids, n, u->list, sizeof u->list) < 0)
        memcpy(u->list + sizeof u->list - 4, "...", 4);
    u->from = from;
}

static void print_used(const struct inst_used *u)
{
    if (strcmp(u->from, "snapshot"))
        printf(",\"instruments\":\"%s\"", u->list);
    printf(",\"instruments_from\":\"%s\"", u->from);
}

/* ---- run ------------------------------------------------------------------------------------ */

struct run_stats {
    uint64_t records, commands, malformed, covered;
    int stop_reason;
    uint64_t stop_offset, stop_seq;
    int torn;               /* the stop is a torn tail (docs/engine-service.md) */
    uint64_t records_after; /* records with a good CRC after the stop */
};

struct event_out {
    tf_journal *journal;
    int err;
};

static int write_events(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    struct event_out *w = ctx;
    if (!w->journal)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int rc = tfv_journal_append_event(w->journal, &ev[i], NULL);
        if (rc) {
            w->err = rc;
            return rc;
        }
    }
    return 0;
}

/* One record through the venue layer (docs/venue.md), as the service applied it live: an
 * extension record (a Keyed command of a session, a gateway command, docs/engine.md) is decoded
 * from the reader's frame; a Keyed record's inner command counts as a command. */
static int apply_one(tfv_venue *v, const tf_journal_reader *r, const tf_ofl_msg *m, uint64_t upto,
                     uint64_t covered, tf_engine_sink *sink, struct run_stats *st)
{
    tfv_msg vm = {.kind = m->kind, .journal_seq = m->journal_seq, .ofl = *m};
    int rc;
    st->records++;
    if (tfv_is_ext_kind(m->kind) && tfv_decode_reader_frame(r, &vm) < 0) {
        st->malformed++; /* a whole record this version cannot read: stepped over */
        return 0;
    }
    const tf_ofl_msg *c = &vm.ofl;
    if (tfv_is_command(c->kind)) {
        st->commands++;
        if (c->new_limit.command_seq <= covered) {
            st->covered++;
            return 0;
        }
    }
    if ((rc = tfv_apply(v, &vm, sink)) < 0)
        return rc;
    return upto && tfv_is_command(c->kind) && c->new_limit.command_seq == upto;
}

/* The plain commands from msgs[0] on that tfv_apply would pass to the engine (tfv_plain_run),
 * up to the first one a snapshot covers (apply_one counts it and skips it). */
static size_t plain_run(tfv_venue *v, const tf_ofl_msg *msgs, size_t n, uint64_t covered)
{
    size_t k = tfv_plain_run(v, msgs, n);
    for (size_t i = 0; covered && i < k; i++)
        if (msgs[i].new_limit.command_seq <= covered)
            return i;
    return k;
}

/* Applies every valid record of the image; whole records that do not decode are malformed and
 * stepped over. `upto` (0: all) stops after the command with that command_seq. The CRC32C check
 * runs ahead on a second thread (tf_journal_pump), the decode here: the same records in the same
 * order, the same stop as the one-thread walk; the runs of plain commands in a batch go to the
 * engine as one tf_engine_apply_batch. */
static int apply_journal(tf_engine *e, const tf_journal_map *map, uint64_t upto, uint64_t covered,
                         tf_engine_sink *sink, struct run_stats *st, int progress)
{
    tf_journal_reader r;
    int rc = tf_journal_reader_init(&r, map->data, map->len);
    if (rc)
        return rc;
    tfv_venue *v;
    if ((rc = tfv_open(e, &v)))
        return rc;
    tf_journal_pump *p;
    if ((rc = tf_journal_pump_open(&r, 256, TF_JOURNAL_PUMP_SKIP, &p))) {
        tfv_close(v);
        return rc;
    }
    uint64_t next_report = 1u << 22;
    double t0 = now_s();
    for (rc = 0; !rc;) {
        const tf_journal_batch *b;
        int n = tf_journal_pump_next(p, &b);
        if (n == 1 && b->skipped) {
            st->records++;
            st->malformed++;
            /* a command, or a byte reserved for one (the kind table's row) */
            const tf_ofl_kind_info *k = tf_ofl_kind_info_of(b->r.frame[2]);
            st->commands +=
                k->kind_class == TF_OFL_CLASS_COMMAND || k->reserved_for == TF_OFL_CLASS_COMMAND;
            continue;
        }
        if (n <= 0) {
            st->stop_reason = n;
            st->stop_offset = b->r.pos;
            st->stop_seq = b->r.next_seq;
            break;
        }
        for (int i = 0; i < b->n && !rc;) {
            size_t k = upto ? 0 : plain_run(v, b->msgs + i, (size_t)(b->n - i), covered);
            if (k) { /* commands tfv_apply passes to the engine: one batch */
                st->records += k;
                st->commands += k;
                rc = tfv_apply_run(v, b->msgs + i, k, sink, NULL);
            } else
                rc = apply_one(v, &b->r, &b->msgs[i], upto, covered, sink, st);
            i += k ? (int)k : 1;
        }
        if (progress && st->records >= next_report) {
            next_report += 1u << 22;
            fprintf(stderr, "\rengine run: %" PRIu64 " records, %.1f M/s   ", st->records,
                    (double)st->records / (now_s() - t0) / 1e6);
        }
    }
    tf_journal_pump_close(p);
    tfv_close(v);
    return rc;
}

static const char *hash_str(uint64_t h, char buf[19])
{
    tf_engine_format_hash(h, buf);
    return buf;
}

static int print_order(void *ctx, const tf_engine_order *o)
{
    int *first = ctx;
    printf("%s{\"order_id\":%" PRIu64 ",\"account_id\":%" PRIu64 ",\"client_order_id\":%" PRIu64
           ",\"price\":%" PRId64 ",\"remaining\":%" PRIu64 "}",
           *first ? "" : ",", o->order_id, o->account_id, o->client_order_id, o->price,
           o->remaining);
    *first = 0;
    return 0;
}

/* The book in priority order: one entry per instrument with resting orders, bids then asks. */
struct book_ctx {
    uint64_t instrument; /* 0: none open yet */
    int side, first;
};

static void close_instrument(const struct book_ctx *b)
{
    if (b->instrument)
        printf(b->side == TF_OFL_BUY ? "],\"asks\":[]}" : "]}");
}

static int print_book_order(void *ctx, const tf_engine_order *o)
{
    struct book_ctx *b = ctx;
    if (o->instrument_id != b->instrument) {
        close_instrument(b);
        printf("%s{\"instrument_id\":%" PRIu64 ",\"bids\":[", b->instrument ? "," : "",
               o->instrument_id);
        b->instrument = o->instrument_id;
        b->side = TF_OFL_BUY;
        b->first = 1;
    }
    if (o->side != b->side) {
        printf("],\"asks\":[");
        b->side = o->side;
        b->first = 1;
    }
    return print_order(&b->first, o);
}

static void print_book(const tf_engine *e)
{
    struct book_ctx b = {0};
    printf(",\"book\":[");
    tf_engine_for_each_order(e, print_book_order, &b);
    close_instrument(&b);
    printf("]");
}

/* Where the journal's valid prefix ended, on stderr: a torn tail (what an interrupted append
 * leaves) is read up to the cut (0); damage with records after it is not (1). */
static int report_stop(const char *sub, const char *path, const tf_journal_map *map,
                       struct run_stats *st)
{
    tfes_damage d;
    tfes_damage_at(map->data, map->len, st->stop_offset, st->stop_seq, st->stop_reason, &d);
    st->torn = d.torn;
    st->records_after = d.following;
    if (d.torn) {
        fprintf(stderr,
                "tollfree engine %s: %s: torn tail at record %" PRIu64 " (offset %" PRIu64
                "): %s; read up to it\n",
                sub, path, d.record, d.offset, tf_strerror(d.reason));
        return 0;
    }
    fprintf(stderr,
            "tollfree engine %s: %s: record %" PRIu64 " at offset %" PRIu64 ": %s, and %" PRIu64
            " records with a good CRC follow it: not a torn tail; %s\n",
            sub, path, d.record, d.offset, tf_strerror(d.reason), d.following,
            strcmp(sub, "run") ? "no snapshot written"
                               : "the summary covers only the records before it (exit 1)");
    return 1;
}

static void print_summary(const tf_engine *e, const struct run_stats *st, double seconds,
                          int with_book, const struct inst_used *used)
{
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    char h[19];
    printf("{\"records\":%" PRIu64 ",\"commands\":%" PRIu64 ",\"applied\":%" PRIu64
           ",\"duplicates\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"malformed\":%" PRIu64
           ",\"covered_by_snapshot\":%" PRIu64 ",\"events\":%" PRIu64 ",\"trades\":%" PRIu64
           ",\"rejected\":%" PRIu64 ",\"resting_orders\":%" PRIu64 ",\"price_levels\":%" PRIu64
           ",\"last_command_seq\":%" PRIu64 ",\"next_order_id\":%" PRIu64
           ",\"next_event_seq\":%" PRIu64 ",\"state_hash\":\"%s\",\"seconds\":%.6f",
           st->records, st->commands, c.applied, c.duplicates, c.skipped, st->malformed,
           st->covered, c.events, c.trades, c.rejected, c.resting_orders, c.price_levels,
           c.last_command_seq, c.next_order_id, c.next_event_seq,
           hash_str(tf_engine_state_hash(e), h), seconds);
    if (seconds > 0)
        printf(",\"records_per_second\":%.0f", (double)st->records / seconds);
    if (st->stop_reason)
        printf(",\"journal\":{\"whole\":false,\"offset\":%" PRIu64 ",\"journal_seq\":%" PRIu64
               ",\"reason\":\"%s\",\"torn_tail\":%s,\"records_after\":%" PRIu64 "}",
               st->stop_offset, st->stop_seq, tf_strerror(st->stop_reason),
               st->torn ? "true" : "false", st->records_after);
    else
        printf(",\"journal\":{\"whole\":true}");
    print_used(used);
    if (with_book)
        print_book(e);
    printf("}\n");
}

static int same_ids(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb)
{
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* The instruments for an engine that applies `journal`: the list stored beside it
 * (tf_journal_instruments_load) unless --instruments says otherwise, and a stored list that
 * differs from --instruments only with --force. 0 (ids, *n, *used), 1 (refused: exit 2), or -1
 * (the stored list cannot be read: exit 1); both after one line on stderr. */
static int resolve_instruments(const char *sub, const struct opts *o, uint64_t **ids, uint32_t *n,
                               struct inst_used *used)
{
    static uint64_t stored[TF_ENGINE_MAX_INSTRUMENTS];
    uint32_t ns = 0;
    uint64_t session = 0, jsession = 0;
    int rc = o->input ? tf_journal_instruments_load(o->input, &session, stored,
                                                    TF_ENGINE_MAX_INSTRUMENTS, &ns)
                      : -ENOENT;
    if (rc == 0) {
        tf_journal_map m;
        tf_journal_reader r;
        if (!tf_journal_map_open(o->input, &m)) {
            if (!tf_journal_reader_init(&r, m.data, m.len))
                jsession = r.header.session_id;
            tf_journal_map_close(&m);
        }
    }
    if (rc != 0 && rc != -ENOENT && !(o->instruments && o->force)) {
        fprintf(stderr,
                "tollfree engine %s: %s%s: the journal's instrument list cannot be read (%s): "
                "give the engine's list with --instruments LIST --force\n",
                sub, o->input, TF_JOURNAL_INSTRUMENTS_SUFFIX, tf_strerror(rc));
        return -1;
    }
    if (rc == 0 && session != jsession && !(o->instruments && o->force)) {
        fprintf(
            stderr,
            "tollfree engine %s: %s%s is the instrument list of another journal (session %" PRIu64
            ", this journal's is %" PRIu64 "): remove it, or give the list with "
            "--instruments LIST --force\n",
            sub, o->input, TF_JOURNAL_INSTRUMENTS_SUFFIX, session, jsession);
        return -1;
    }
    if (!o->instruments && rc == 0) {
        *ids = stored;
        *n = ns;
        note_list(used, stored, ns, "journal");
        return 0;
    }
    int k = instruments_of(sub, o->instruments ? o->instruments : "1-16", ids);
    if (k < 0)
        return 1;
    *n = (uint32_t)k;
    if (rc == 0 && !same_ids(*ids, *n, stored, ns) && !o->force) {
        char have[256];
        if (tf_journal_instruments_format(stored, ns, have, sizeof have) < 0)
            memcpy(have + sizeof have - 4, "...", 4);
        fprintf(stderr,
                "tollfree engine %s: --instruments %s differs from the list stored with %s (%s): "
                "the engine that wrote it had those books, so the state hash would differ; drop "
                "--instruments to use the stored list, or add --force\n",
                sub, o->instruments, o->input, have);
        return 1;
    }
    if (!o->instruments)
        fprintf(stderr,
                "tollfree engine %s: note: %s stores no instrument list (written before "
                "tollfree kept one, or not by an engine): using the default 1-16; if the engine "
                "that wrote it had others, give them with --instruments LIST\n",
                sub, o->input);
    note_list(used, *ids, *n, o->instruments ? "option" : "default");
    return 0;
}

/* A fresh engine from the options, or the snapshot's. 0, or the exit status after a line on
 * stderr. */
static int open_engine(const char *sub, const struct opts *o, tf_engine **e, struct inst_used *used)
{
    uint32_t max_orders;
    if (max_orders_of(sub, o, &max_orders))
        return 2;
    int rc;
    if (o->snapshot_in) {
        tf_engine_config over = {.size = sizeof over, .max_orders = (uint32_t)o->max_orders};
        rc = tf_engine_snapshot_load(o->snapshot_in, &over, e);
        if (rc)
            fprintf(stderr, "tollfree engine %s: %s: %s\n", sub, o->snapshot_in, tf_strerror(rc));
        used->from = "snapshot";
        return rc ? 1 : 0;
    }
    uint64_t *ids;
    uint32_t n;
    int st = resolve_instruments(sub, o, &ids, &n, used);
    if (st)
        return st < 0 ? 1 : 2;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = ids, .n_instruments = n, .max_orders = max_orders};
    rc = tf_engine_create(&cfg, e);
    if (rc)
        fprintf(stderr, "tollfree engine %s: cannot create the engine: %s\n", sub, tf_strerror(rc));
    return rc ? 2 : 0;
}

static int map_input(const char *sub, const char *path, tf_journal_map *map)
{
    int rc = tf_journal_map_open(path, map);
    if (rc) {
        fprintf(stderr, "tollfree engine %s: %s: %s\n", sub, path, tf_strerror(rc));
        return -1;
    }
    tf_journal_reader r;
    if ((rc = tf_journal_reader_init(&r, map->data, map->len))) {
        fprintf(stderr, "tollfree engine %s: %s: not an OFL1 journal (%s)\n", sub, path,
                tf_strerror(rc));
        tf_journal_map_close(map);
        return -1;
    }
    return 0;
}

static int open_events(const char *path, uint64_t session, tf_journal **j)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE, .session_id = session};
    int rc = tf_journal_open(tmp, &jo, j, NULL);
    if (rc)
        fprintf(stderr, "tollfree engine run: --events %s: %s\n", path, tf_strerror(rc));
    return rc;
}

static int close_events(const char *path, tf_journal *j)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = tf_journal_close(j);
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (rc) {
        fprintf(stderr, "tollfree engine run: --events %s: %s\n", path, tf_strerror(rc));
        unlink(tmp);
    }
    return rc;
}

static int cmd_run(int argc, char **argv)
{
    struct opts o = {0};
    int rc =
        parse_opts("run", run_usage,
                   "--instruments --force --max-orders --events --book --from-snapshot --quiet ",
                   argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!o.input || o.out) {
        fprintf(stderr, "tollfree engine run: %s (try --help)\n",
                o.input ? "one journal only" : "the journal COMMANDS.ofl is required");
        return 2;
    }
    if (o.snapshot_in && o.instruments) {
        fprintf(stderr, "tollfree engine run: --instruments comes from the snapshot\n");
        return 2;
    }
    tf_journal_map map;
    tf_engine *e = NULL;
    struct inst_used used = {.from = "default"};
    if ((rc = open_engine("run", &o, &e, &used)))
        return rc;
    if (map_input("run", o.input, &map)) {
        tf_engine_destroy(e);
        return 1;
    }
    tf_ofl_msg *ev = malloc(4096 * sizeof *ev);
    struct event_out w = {0};
    tf_journal_reader hr;
    tf_journal_reader_init(&hr, map.data, map.len);
    int status = 0;
    if (!ev || (o.events && open_events(o.events, hr.header.session_id, &w.journal)))
        status = 1;
    struct run_stats st = {0};
    double t0 = now_s(), t1 = t0;
    if (!status) {
        tf_engine_counters c;
        tf_engine_get_counters(e, &c);
        tf_engine_sink sink = {.ev = ev, .cap = 4096, .flush = write_events, .ctx = &w};
        int progress = !o.quiet && isatty(2);
        rc =
            apply_journal(e, &map, 0, o.snapshot_in ? c.last_command_seq : 0, &sink, &st, progress);
        if (rc >= 0 && sink.n)
            rc = write_events(&w, ev, sink.n);
        t1 = now_s();
        if (progress)
            fputs("\r\033[K", stderr);
        if (rc < 0) {
            fprintf(stderr, "tollfree engine run: %s\n", tf_strerror(w.err ? w.err : rc));
            status = 1;
        }
    }
    if (w.journal && (close_events(o.events, w.journal) || status))
        status = 1;
    int damaged = !status && st.stop_reason && report_stop("run", o.input, &map, &st);
    if (!status)
        print_summary(e, &st, t1 - t0, o.book, &used); /* with damage: the prefix's state */
    if (damaged)
        status = 1;
    free(ev);
    tf_engine_destroy(e);
    tf_journal_map_close(&map);
    return status;
}

/* ---- snapshot ------------------------------------------------------------------------------- */

static int cmd_snapshot(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse_opts("snapshot", snapshot_usage,
                        "--out --at --instruments --force --max-orders ", argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!o.input || !o.out) {
        fprintf(stderr, "tollfree engine snapshot: %s (try --help)\n",
                !o.input ? "the journal COMMANDS.ofl is required" : "--out FILE is required");
        return 2;
    }
    tf_journal_map map;
    tf_engine *e = NULL;
    struct inst_used used = {.from = "default"};
    if ((rc = open_engine("snapshot", &o, &e, &used)))
        return rc;
    if (map_input("snapshot", o.input, &map)) {
        tf_engine_destroy(e);
        return 1;
    }
    static tf_ofl_msg ev[256];
    tf_engine_sink sink = {
        .ev = ev, .cap = 256, .flush = write_events, .ctx = &(struct event_out){0}};
    struct run_stats st = {0};
    rc = apply_journal(e, &map, o.have_at ? o.at : 0, 0, &sink, &st, 0);
    int status = 0;
    if (rc >= 0 && o.have_at && rc != 1) {
        fprintf(stderr, "tollfree engine snapshot: no command with command_seq %" PRIu64 " in %s\n",
                o.at, o.input);
        status = 1;
    } else if (rc == 0 && st.stop_reason && report_stop("snapshot", o.input, &map, &st)) {
        status = 1;
    } else if (rc >= 0 && (rc = tf_engine_snapshot_save(e, o.out)) < 0) {
        fprintf(stderr, "tollfree engine snapshot: %s: %s\n", o.out, tf_strerror(rc));
        status = 1;
    } else if (rc < 0) {
        fprintf(stderr, "tollfree engine snapshot: %s\n", tf_strerror(rc));
        status = 1;
    }
    if (!status) {
        tf_engine_counters c;
        tf_engine_get_counters(e, &c);
        char h[19];
        printf("{\"last_command_seq\":%" PRIu64 ",\"resting_orders\":%" PRIu64
               ",\"state_hash\":\"%s\",\"bytes\":%" PRIu64,
               c.last_command_seq, c.resting_orders, hash_str(tf_engine_state_hash(e), h),
               tf_engine_snapshot_size(e));
        print_used(&used);
        printf("}\n");
    }
    tf_engine_destroy(e);
    tf_journal_map_close(&map);
    return status;
}

/* ---- gen ------------------------------------------------------------------------------------ */

static int gen_write(const struct opts *o, tf_engine_flow *f, const char *tmp)
{
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE, .session_id = o->seed + 1};
    tf_journal *j;
    int rc = tf_journal_open(tmp, &jo, &j, NULL);
    if (rc) {
        fprintf(stderr, "tollfree engine gen: %s: %s\n", tmp, tf_strerror(rc));
        return -1;
    }
    tf_ofl_msg m;
    for (uint64_t i = 0; i < o->count && !rc && !tf_cli_interrupted; i++) {
        tf_engine_flow_next(f, &m);
        rc = tf_journal_append(j, &m, NULL);
    }
    int crc = tf_journal_close(j);
    if (rc || crc) {
        fprintf(stderr, "tollfree engine gen: %s\n", tf_strerror(rc ? rc : crc));
        return -1;
    }
    return 0;
}

static int cmd_gen(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse_opts("gen", gen_usage, "--count --seed --mix --instruments --orders --force ",
                        argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    const char *out = o.input;
    if (!o.have_count || !out || o.out) {
        fprintf(stderr, "tollfree engine gen: %s (try --help)\n",
                !o.have_count ? "--count N is required"
                : !out        ? "the output file OUT.ofl is required"
                              : "one output file only");
        return 2;
    }
    int mix = !o.mix || !strcmp(o.mix, "exchange-core") ? TF_ENGINE_MIX_EXCHANGE_CORE
              : !strcmp(o.mix, "ofl1")                  ? TF_ENGINE_MIX_OFL1
                                                        : -1;
    if (mix < 0 || o.orders > TF_ENGINE_MAX_ORDERS / 8) {
        fprintf(stderr, "tollfree engine gen: %s\n",
                mix < 0 ? "--mix must be exchange-core or ofl1" : "--orders is too large");
        return 2;
    }
    uint64_t *ids;
    int n = instruments_of("gen", o.instruments ? o.instruments : "1", &ids);
    if (n < 0)
        return 2;
    /* Every record is at most 72 bytes (a NewLimit + envelope + CRC). */
    tf_cli_out of;
    if (tf_cli_out_begin(&of, "engine gen", out, o.force, o.count, 72, TF_JOURNAL_HEADER_LEN))
        return 1;
    tf_engine_flow_config fc = {.size = sizeof fc,
                                .mix = (uint32_t)mix,
                                .seed = o.seed,
                                .instruments = ids,
                                .n_instruments = (uint32_t)n,
                                .target_orders = (uint32_t)o.orders};
    tf_engine_flow *f;
    if ((rc = tf_engine_flow_open(&fc, &f))) {
        fprintf(stderr, "tollfree engine gen: %s\n", tf_strerror(rc));
        tf_cli_out_commit(&of, 0);
        return 1;
    }
    rc = gen_write(&o, f, of.tmp);
    tf_engine_flow_close(f);
    if (tf_cli_out_commit(&of, !rc))
        return tf_cli_interrupted ? 130 : 1;
    return 0;
}

int tf_cmd_engine(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(sub, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(sub, "gen"))
        return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(sub, "snapshot"))
        return cmd_snapshot(argc - 1, argv + 1);
    if (!strcmp(sub, "serve"))
        return tf_cmd_engine_serve(argc - 1, argv + 1);
    fprintf(stderr, "tollfree engine: unknown subcommand '%s' (try 'tollfree engine --help')\n",
            sub);
    return 2;
}
