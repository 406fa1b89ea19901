/* `tollfree engine serve` end to end: the real binary as a subprocess, real sockets, real files.
 *
 *   - a round trip of each command kind (and a reject, an undecodable command, an unsolicited
 *     Trade to the maker's connection), the client's command_seq overwritten;
 *   - every reply byte for byte against events.ofl, and events.ofl byte for byte against an
 *     offline `tollfree engine run --events` of the commands.ofl the service wrote; the SIGTERM
 *     summary's state_hash against the offline one;
 *   - kill -9 at random points under pipelined load, then restart: every event a client
 *     received is in events.ofl as sent, and the restarted state equals the offline replay;
 *   - torn and corrupt tails of commands.ofl on start, and a snapshot + tail start;
 *   - hostile clients (bad lengths, unknown and reserved kinds, events and heartbeats sent as
 *     commands, byte-by-byte senders, readers that never read, 1,000 connections), each followed
 *     by a well-behaved client's round trip.
 * Waits have one generous deadline (a guard against hangs, never a speed check). */
#include <dirent.h>
#include <pthread.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

#define T_MAX_ORDERS "20000" /* small pools: every start and offline run is quick under ASan */

typedef struct esrv {
    pid_t pid;
    char dir[64];
    char jdir[128];
    char log[128];
    char out[128];
    char sock[128];
    int tcp_port;
} esrv;

static void es_paths(esrv *s)
{
    snprintf(s->jdir, sizeof s->jdir, "%s/j", s->dir);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    snprintf(s->out, sizeof s->out, "%s/out", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
}

static int es_init(esrv *s)
{
    memset(s, 0, sizeof *s);
    if (t_mkdtemp(s->dir, sizeof s->dir))
        return -1;
    es_paths(s);
    return 0;
}

/* Starts the service on the test's directory (keeping the journal) with extra args. */
static int es_start(esrv *s, const char *const *extra)
{
    const char *argv[48];
    int n = 0;
    argv[n++] = t_bin();
    argv[n++] = "engine";
    argv[n++] = "serve";
    argv[n++] = "--journal";
    argv[n++] = s->jdir;
    argv[n++] = "--unix";
    argv[n++] = s->sock;
    argv[n++] = "--tcp";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--max-orders";
    argv[n++] = T_MAX_ORDERS;
    for (int i = 0; extra && extra[i] && n < 46; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    unlink(s->log);
    s->pid = t_spawn(argv, s->log, s->out);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    return t_wait_listening(&s->pid, s->log, 0, &s->tcp_port, "engine service");
}

/* SIGTERM; returns the exit status; the JSON summary line lands in s->out. */
static int es_stop(esrv *s)
{
    if (!s->pid)
        return -1;
    kill(s->pid, SIGTERM);
    int rc = t_wait_exit(s->pid, T_DEADLINE_MS);
    s->pid = 0;
    return rc;
}

static void es_kill9(esrv *s)
{
    if (!s->pid)
        return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

static void es_cleanup(esrv *s)
{
    es_kill9(s);
    if (getenv("TF_KEEP_LOGS")) {
        fprintf(stderr, "engine service files kept: %s\n", s->dir);
        return;
    }
    t_rm_rf(s->dir);
}

/* The value of "key":"..." or "key":N in a JSON line (copied into v). */
static int json_field(const char *json, const char *key, char *v, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    if (*p == '"')
        p++;
    size_t n = 0;
    while (p[n] && p[n] != '"' && p[n] != ',' && p[n] != '}' && n + 1 < cap)
        n++;
    memcpy(v, p, n);
    v[n] = 0;
    return 0;
}

/* Runs `tollfree engine run PATH [--events EV] [args]`, stdout into buf. Returns exit status. */
static int run_offline(const char *journal, const char *events, const char *extra, char *buf,
                       size_t cap)
{
    char outp[512];
    snprintf(outp, sizeof outp, "%.400s.offline.out", journal);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo >= 0)
            dup2(fo, 1);
        const char *argv[12];
        int n = 0;
        argv[n++] = t_bin();
        argv[n++] = "engine";
        argv[n++] = "run";
        argv[n++] = journal;
        argv[n++] = "--quiet";
        argv[n++] = "--max-orders";
        argv[n++] = T_MAX_ORDERS;
        if (events) {
            argv[n++] = "--events";
            argv[n++] = events;
        }
        if (extra) {
            argv[n++] = "--instruments";
            argv[n++] = extra;
        }
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int rc = t_wait_exit(pid, T_DEADLINE_MS);
    t_read_file(outp, buf, cap);
    unlink(outp);
    return rc;
}

static size_t file_bytes(const char *path, uint8_t **out)
{
    FILE *f = fopen(path, "rb");
    *out = NULL;
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    size_t n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    *out = b;
    return n;
}

static int same_file(const char *a, const char *b)
{
    uint8_t *pa, *pb;
    size_t na = file_bytes(a, &pa), nb = file_bytes(b, &pb);
    int same = pa && pb && na == nb && !memcmp(pa, pb, na);
    if (!same)
        fprintf(stderr, "files differ: %s (%zu bytes), %s (%zu bytes)\n", a, na, b, nb);
    free(pa);
    free(pb);
    return same;
}

/* ---- an OFL1 client on a raw socket ---- */

typedef struct frame {
    uint8_t b[TF_OFL_MAX_FRAME];
    size_t len;
    tf_ofl_msg m;
} frame;

typedef struct reply {
    frame ev[64];
    int n;
    uint64_t command_seq; /* the closing Heartbeat's journal_seq */
    frame unsol[64];      /* unsolicited Trades read before the reply */
    int n_unsol;
} reply;

/* Reads one stream frame. 0, or -ETIMEDOUT / -EPIPE / TF_E_PROTOCOL. */
static int read_frame(int fd, frame *f, int timeout_ms)
{
    int rc = t_recv_exact(fd, f->b, 2, timeout_ms);
    if (rc)
        return rc;
    size_t flen = (size_t)f->b[0] | (size_t)f->b[1] << 8;
    if (flen < 9 || 2 + flen > sizeof f->b)
        return TF_E_PROTOCOL;
    if ((rc = t_recv_exact(fd, f->b + 2, flen, timeout_ms)))
        return rc;
    f->len = 2 + flen;
    return tf_ofl_frame_decode(f->b, f->len, &f->m) == (int)f->len ? 0 : TF_E_PROTOCOL;
}

/* Reads a whole reply: events until the Heartbeat; Trades before the first event are
 * unsolicited. */
static int read_reply(int fd, reply *r)
{
    memset(r, 0, sizeof *r);
    for (;;) {
        frame f;
        int rc = read_frame(fd, &f, T_DEADLINE_MS);
        if (rc)
            return rc;
        if (f.m.kind == TF_OFL_HEARTBEAT) {
            r->command_seq = f.m.journal_seq;
            return r->n ? 0 : TF_E_PROTOCOL;
        }
        if (r->n == 0 && f.m.kind == TF_OFL_TRADE) {
            if (r->n_unsol < 64)
                r->unsol[r->n_unsol++] = f;
            continue;
        }
        if (r->n < 64)
            r->ev[r->n++] = f;
    }
}

static size_t enc(uint8_t *buf, const tf_ofl_msg *m)
{
    int n = tf_ofl_frame_encode(buf, TF_OFL_MAX_FRAME, m);
    return n > 0 ? (size_t)n : 0;
}

static tf_ofl_msg new_limit(uint64_t acct, uint64_t coid, uint64_t inst, int side, int64_t px,
                            uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.command_seq = 999999,
                                     .account_id = acct,
                                     .client_order_id = coid,
                                     .instrument_id = inst,
                                     .price = px,
                                     .quantity = {qty, 0},
                                     .side = (uint8_t)side};
    return m;
}

static tf_ofl_msg new_market(uint64_t acct, uint64_t coid, uint64_t inst, int side, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_MARKET};
    m.new_market = (tf_ofl_new_market){.account_id = acct,
                                       .client_order_id = coid,
                                       .instrument_id = inst,
                                       .quantity = {qty, 0},
                                       .side = (uint8_t)side};
    return m;
}

static tf_ofl_msg cancel_order(uint64_t oid)
{
    tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_ORDER};
    m.cancel_by_order.order_id = oid;
    return m;
}

static tf_ofl_msg cancel_client(uint64_t acct, uint64_t coid)
{
    tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_CLIENT};
    m.cancel_by_client.account_id = acct;
    m.cancel_by_client.client_order_id = coid;
    return m;
}

static tf_ofl_msg replace(uint64_t oid, uint64_t coid, int64_t px, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_REPLACE};
    m.replace = (tf_ofl_replace){
        .order_id = oid, .client_order_id = coid, .price = px, .quantity = {qty, 0}};
    return m;
}

static int call(int fd, const tf_ofl_msg *cmd, reply *r)
{
    uint8_t b[TF_OFL_MAX_FRAME];
    size_t n = enc(b, cmd);
    int rc = t_send_all(fd, b, n);
    return rc ? rc : read_reply(fd, r);
}

/* Every event frame a client received, to be found again in events.ofl. */
typedef struct seen {
    frame *f;
    size_t n, cap;
} seen;

static void seen_add(seen *s, const frame *f)
{
    if (f->m.kind == TF_OFL_REJECTED && f->m.rejected.event_seq == 0)
        return; /* the undecodable command's answer: never journaled */
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->f = realloc(s->f, s->cap * sizeof *s->f);
    }
    s->f[s->n++] = *f;
}

static void seen_reply(seen *s, const reply *r)
{
    for (int i = 0; i < r->n; i++)
        seen_add(s, &r->ev[i]);
    for (int i = 0; i < r->n_unsol; i++)
        seen_add(s, &r->unsol[i]);
}

/* Each received frame equals the record of events.ofl at its journal_seq. Returns mismatches. */
static size_t check_seen(const seen *s, const char *events_path)
{
    tf_journal_map m;
    if (tf_journal_map_open(events_path, &m))
        return s->n ? s->n : 1;
    tf_journal_reader r;
    tf_journal_reader_init(&r, m.data, m.len);
    /* index the records */
    size_t cap = 1024, n = 0;
    size_t *off = malloc(cap * sizeof *off), *len = malloc(cap * sizeof *len);
    tf_ofl_msg msg;
    while (tf_journal_reader_next(&r, &msg) == 1) {
        if (n == cap) {
            cap *= 2;
            off = realloc(off, cap * sizeof *off);
            len = realloc(len, cap * sizeof *len);
        }
        off[n] = (size_t)(r.frame - m.data);
        len[n] = r.frame_len;
        n++;
    }
    size_t bad = 0;
    for (size_t i = 0; i < s->n; i++) {
        const frame *f = &s->f[i];
        uint64_t j = f->m.journal_seq;
        if (j >= n || len[j] != f->len || memcmp(m.data + off[j], f->b, f->len)) {
            if (bad++ < 5)
                fprintf(stderr, "received event journal_seq %llu (kind 0x%02x) not in %s as sent\n",
                        (unsigned long long)j, f->m.kind, events_path);
        }
    }
    free(off);
    free(len);
    tf_journal_map_close(&m);
    return bad;
}

/* The service's summary against an offline run of its commands.ofl: same state_hash and
 * last_command_seq; events.ofl equal to the offline --events. */
static void check_offline_ex(esrv *s, const char *instruments, int running)
{
    char summary[1 << 14], offline[8192], h1[32] = "", h2[32] = "", c1[32] = "", c2[32] = "";
    if (running) {
        /* A running, idle service: its start line says where recovery left it. */
        t_read_file(s->log, summary, sizeof summary);
        const char *p = strstr(summary, "last_command_seq ");
        const char *h = strstr(summary, "state_hash 0x");
        CHECK(p && h);
        if (p && h) {
            snprintf(c1, sizeof c1, "%llu", strtoull(p + 17, NULL, 10));
            snprintf(h1, sizeof h1, "%.18s", h + 11);
        }
    } else {
        t_read_file(s->out, summary, sizeof summary);
        CHECK(json_field(summary, "state_hash", h1, sizeof h1) == 0);
        CHECK(json_field(summary, "last_command_seq", c1, sizeof c1) == 0);
    }
    char jp[256], ep[256], oe[256];
    snprintf(jp, sizeof jp, "%s/commands.ofl", s->jdir);
    snprintf(ep, sizeof ep, "%s/events.ofl", s->jdir);
    snprintf(oe, sizeof oe, "%s/offline_events.ofl", s->dir);
    CHECK_EQ(run_offline(jp, oe, instruments, offline, sizeof offline), 0);
    CHECK(json_field(offline, "state_hash", h2, sizeof h2) == 0);
    CHECK(json_field(offline, "last_command_seq", c2, sizeof c2) == 0);
    CHECK(h1[0] && !strcmp(h1, h2));
    CHECK(c1[0] && !strcmp(c1, c2));
    if (strcmp(h1, h2) || strcmp(c1, c2))
        fprintf(stderr, "service: %s\noffline: %s\n", summary, offline);
    CHECK(same_file(ep, oe));
    unlink(oe);
}

static void check_offline(esrv *s, const char *instruments)
{
    check_offline_ex(s, instruments, 0);
}

/* ---- round trip of each kind ---- */

static void test_round_trip(void)
{
    esrv s;
    CHECK_RC(es_init(&s), 0);
    const char *extra[] = {"--instruments", "1-4", NULL};
    CHECK_RC(es_start(&s, extra), 0);
    seen sn = {0};
    int a = t_connect_unix(s.sock), b = t_connect_tcp(s.tcp_port);
    CHECK(a >= 0 && b >= 0);
    reply r;
    tf_ofl_msg m;

    /* NewLimit rests: Accepted; the sequencer numbers it 1 (the client sent 999999). */
    m = new_limit(1, 11, 1, TF_OFL_SELL, 100, 10);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.n, 1);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_ACCEPTED);
    CHECK_EQ(r.command_seq, 1);
    CHECK_EQ(r.ev[0].m.accepted.command_seq, 1);
    CHECK_EQ(r.ev[0].m.accepted.client_order_id, 11);
    CHECK_EQ(r.ev[0].m.journal_seq, 0);
    uint64_t maker = r.ev[0].m.accepted.order_id;

    /* NewLimit crossing from another connection: Accepted + Trade; the maker's connection gets
     * the Trade unsolicited. */
    m = new_limit(2, 21, 1, TF_OFL_BUY, 101, 4);
    CHECK_RC(call(b, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.n, 2);
    CHECK_EQ(r.command_seq, 2);
    CHECK_EQ(r.ev[1].m.kind, TF_OFL_TRADE);
    CHECK_EQ(r.ev[1].m.trade.maker_order_id, maker);
    CHECK_EQ(r.ev[1].m.trade.price, 100);
    CHECK_EQ(r.ev[1].m.trade.quantity.lo, 4);
    frame unsol;
    CHECK_RC(read_frame(a, &unsol, T_DEADLINE_MS), 0);
    CHECK_EQ(unsol.m.kind, TF_OFL_TRADE);
    CHECK(unsol.len == r.ev[1].len && !memcmp(unsol.b, r.ev[1].b, unsol.len));

    /* NewMarket: Accepted, Trade (6 left at 100), Canceled remainder. */
    m = new_market(2, 22, 1, TF_OFL_BUY, 10);
    CHECK_RC(call(b, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.n, 3);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_ACCEPTED);
    CHECK_EQ(r.ev[1].m.kind, TF_OFL_TRADE);
    CHECK_EQ(r.ev[2].m.kind, TF_OFL_CANCELED);
    CHECK_EQ(r.command_seq, 3);
    CHECK_RC(read_frame(a, &unsol, T_DEADLINE_MS), 0); /* the maker hears of its fill */
    CHECK_EQ(unsol.m.kind, TF_OFL_TRADE);

    /* Replace, CancelByOrder, CancelByClient. */
    m = new_limit(1, 12, 2, TF_OFL_BUY, 50, 5);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    uint64_t o2 = r.ev[0].m.accepted.order_id;
    m = replace(o2, 13, 51, 7);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.n, 1);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_REPLACED);
    CHECK_EQ(r.ev[0].m.replaced.client_order_id, 13);
    m = cancel_order(o2);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_CANCELED);
    m = new_limit(1, 14, 3, TF_OFL_SELL, 70, 1);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    m = cancel_client(1, 14);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_CANCELED);
    CHECK_EQ(r.command_seq, 8);

    /* A reject is a journaled command with a Rejected event. */
    m = new_limit(1, 15, 99, TF_OFL_SELL, 70, 1);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_REJECTED);
    CHECK_EQ(r.ev[0].m.rejected.reason, TF_OFL_UNKNOWN_INSTRUMENT);
    CHECK_EQ(r.command_seq, 9);

    /* An undecodable command (side byte 7): Rejected(Other, event_seq 0) + Heartbeat(0), not
     * journaled (the next command is still 10); the connection stays usable. */
    uint8_t fb[TF_OFL_MAX_FRAME];
    m = new_limit(1, 16, 1, TF_OFL_BUY, 70, 1);
    size_t fl = enc(fb, &m);
    fb[TF_OFL_FRAME_HEADER_LEN + 32] = 7;
    CHECK_RC(t_send_all(a, fb, fl), 0);
    CHECK_RC(read_reply(a, &r), 0);
    CHECK_EQ(r.n, 1);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_REJECTED);
    CHECK_EQ(r.ev[0].m.rejected.reason, TF_OFL_REASON_OTHER);
    CHECK_EQ(r.ev[0].m.rejected.event_seq, 0);
    CHECK_EQ(r.ev[0].m.rejected.command_seq, 0);
    CHECK_EQ(r.ev[0].m.rejected.client_order_id, 16);
    CHECK_EQ(r.command_seq, 0);
    m = cancel_order(12345);
    CHECK_RC(call(a, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.ev[0].m.rejected.reason, TF_OFL_ORDER_NOT_FOUND);
    CHECK_EQ(r.command_seq, 10);

    /* A closed maker's order is nobody's: its Trade goes to the taker only, also when a new
     * connection has taken the maker's slot (a connection's owner id carries the slot's
     * generation). The new connection's first frame is its own reply. */
    int c = t_connect_unix(s.sock);
    CHECK(c >= 0);
    m = new_limit(4, 40, 2, TF_OFL_SELL, 60, 1);
    CHECK_RC(call(c, &m, &r), 0);
    seen_reply(&sn, &r);
    close(c);
    int d = t_connect_unix(s.sock);
    CHECK(d >= 0);
    m = new_limit(4, 41, 2, TF_OFL_BUY, 60, 1);
    CHECK_RC(call(b, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.n, 2);
    CHECK_EQ(r.ev[1].m.kind, TF_OFL_TRADE);
    m = new_limit(4, 42, 3, TF_OFL_BUY, 1, 1);
    CHECK_RC(call(d, &m, &r), 0);
    seen_reply(&sn, &r);
    CHECK_EQ(r.n_unsol, 0);
    CHECK_EQ(r.ev[0].m.kind, TF_OFL_ACCEPTED);
    close(d);

    /* Pipelined: 200 commands in one write, 200 replies in order. */
    uint8_t *big = malloc(200 * TF_OFL_MAX_FRAME);
    size_t bl = 0;
    for (int i = 0; i < 200; i++) {
        m = new_limit(3, 100 + (uint64_t)i, 1 + (uint64_t)(i % 4), i % 2, 90 + i % 20, 1 + i % 3);
        bl += enc(big + bl, &m);
    }
    CHECK_RC(t_send_all(b, big, bl), 0);
    int in_order = 0;
    for (int i = 0; i < 200; i++) {
        if (read_reply(b, &r))
            break;
        seen_reply(&sn, &r);
        in_order += r.command_seq == 14 + (uint64_t)i;
    }
    CHECK_EQ(in_order, 200);
    free(big);
    close(a);
    close(b);
    CHECK_EQ(es_stop(&s), 0);
    check_offline(&s, "1-4");
    char ep[256];
    snprintf(ep, sizeof ep, "%s/events.ofl", s.jdir);
    CHECK_EQ(check_seen(&sn, ep), 0);
    CHECK(sn.n > 200);

    /* A restart replays to the same state; nothing is regenerated or cut. */
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    check_offline(&s, "1-4");
    char log[8192];
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "213 commands (0 replayed after the snapshot)") != NULL);
    CHECK(strstr(log, "regenerated") == NULL);
    free(sn.f);
    es_cleanup(&s);
}

/* ---- kill -9 under pipelined load ---- */

typedef struct loadgen {
    uint64_t rng;
    uint64_t coid;
} loadgen;

static tf_ofl_msg gen_cmd(loadgen *g)
{
    uint64_t x = t_rng(&g->rng);
    uint64_t inst = 1 + x % 4, acct = 1 + (x >> 8) % 5;
    int side = (int)((x >> 16) & 1);
    int64_t px = 95 + (int64_t)((x >> 20) % 11);
    switch ((x >> 32) % 10) {
    case 0:
        return new_market(acct, ++g->coid, inst, side, 1 + (x >> 40) % 5);
    case 1:
        return cancel_client(acct, g->coid > 10 ? g->coid - (x >> 40) % 10 : 1);
    case 2:
        return cancel_order(1 + (x >> 40) % (g->coid + 1));
    case 3: {
        uint64_t oid = 1 + (x >> 40) % (g->coid + 1);
        return replace(oid, ++g->coid, px, 1 + (x >> 48) % 5);
    }
    default:
        return new_limit(acct, ++g->coid, inst, side, px, 1 + (x >> 40) % 9);
    }
}

/* Pipelines commands on one connection while reading replies; kills the service with -9 after
 * `kill_after` replies. Records every event received. */
static void load_and_kill(esrv *s, loadgen *g, int kill_after, seen *sn, uint64_t *max_seq)
{
    int fd = t_connect_unix(s->sock);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    uint8_t out[64 * TF_OFL_MAX_FRAME];
    size_t olen = 0, opos = 0;
    uint8_t in[1 << 16];
    size_t ilen = 0;
    int replies = 0, killed = 0, sent = 0;
    int64_t end = t_now_ms() + T_DEADLINE_MS;
    int first_event = 1;
    while (t_now_ms() < end) {
        if (!killed && replies >= kill_after) {
            es_kill9(s);
            killed = 1;
        }
        if (opos == olen && !killed && sent - replies < 512) { /* a window of 512 in flight */
            olen = opos = 0;
            for (int i = 0; i < 64; i++) {
                tf_ofl_msg m = gen_cmd(g);
                olen += enc(out + olen, &m);
            }
            sent += 64;
        }
        struct pollfd pf = {fd, POLLIN | (opos < olen && !killed ? POLLOUT : 0), 0};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        if ((pf.revents & POLLOUT) && opos < olen) {
            ssize_t w = send(fd, out + opos, olen - opos, MSG_NOSIGNAL);
            if (w > 0)
                opos += (size_t)w;
        }
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(fd, in + ilen, sizeof in - ilen, 0);
            if (r <= 0 && !(r < 0 && errno == EAGAIN))
                break; /* the service is gone */
            if (r > 0)
                ilen += (size_t)r;
            size_t p = 0;
            while (ilen - p >= 2) {
                size_t fl = 2 + ((size_t)in[p] | (size_t)in[p + 1] << 8);
                if (ilen - p < fl)
                    break;
                frame f;
                memcpy(f.b, in + p, fl);
                f.len = fl;
                if (tf_ofl_frame_decode(f.b, fl, &f.m) != (int)fl) {
                    CHECK(0);
                    break;
                }
                if (f.m.kind == TF_OFL_HEARTBEAT) {
                    if (f.m.journal_seq > *max_seq)
                        *max_seq = f.m.journal_seq;
                    replies++;
                    first_event = 1;
                } else {
                    seen_add(sn, &f);
                    first_event = 0;
                }
                p += fl;
            }
            memmove(in, in + p, ilen - p);
            ilen -= p;
        }
    }
    (void)first_event;
    CHECK(killed);
    close(fd);
}

static void test_kill9(void)
{
    esrv s;
    CHECK_RC(es_init(&s), 0);
    const char *extra[] = {"--quiet", NULL};
    loadgen g = {.rng = 0x9E3779B97F4A7C15ull, .coid = 0};
    uint64_t rng = 12345;
    seen sn = {0};
    uint64_t max_seq = 0;
    char ep[256], log[1 << 14];
    snprintf(ep, sizeof ep, "%s/events.ofl", s.jdir);
    const int trials = 20;
    int ok_trials = 0;
    CHECK_RC(es_start(&s, extra), 0);
    for (int t = 0; t < trials && s.pid; t++) {
        int kill_after = (int)(t_rng(&rng) % 1500);
        load_and_kill(&s, &g, kill_after, &sn, &max_seq);
        /* Restart: the recovered state must be the offline replay of what was journaled (its
         * events.ofl too), nothing acknowledged may be missing, and every event a client saw
         * must be in events.ofl exactly as it was sent. The restarted service stays up for the
         * next trial. */
        if (es_start(&s, extra))
            break;
        t_read_file(s.log, log, sizeof log);
        const char *p = strstr(log, "last_command_seq ");
        CHECK(p && strtoull(p + 17, NULL, 10) >= max_seq);
        check_offline_ex(&s, NULL, 1);
        size_t bad = check_seen(&sn, ep);
        CHECK_EQ(bad, 0);
        ok_trials += bad == 0 && p && strtoull(p + 17, NULL, 10) >= max_seq;
    }
    CHECK_EQ(ok_trials, trials);
    CHECK(sn.n > 0);
    CHECK_EQ(es_stop(&s), 0);
    check_offline(&s, NULL);
    free(sn.f);
    es_cleanup(&s);
}

/* ---- torn and corrupt tails, snapshots ---- */

static void append_bytes(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    CHECK(fd >= 0 && write(fd, p, n) == (ssize_t)n);
    close(fd);
}

static void send_some(esrv *s, int n, uint64_t seed)
{
    int fd = t_connect_unix(s->sock);
    CHECK(fd >= 0);
    loadgen g = {.rng = seed, .coid = seed % 1000 * 1000};
    reply r;
    for (int i = 0; i < n; i++) {
        tf_ofl_msg m = gen_cmd(&g);
        if (call(fd, &m, &r)) {
            CHECK(0);
            break;
        }
    }
    close(fd);
}

static void test_tails_and_snapshot(void)
{
    esrv s;
    CHECK_RC(es_init(&s), 0);
    const char *extra[] = {"--snapshot-every", "50", NULL};
    CHECK_RC(es_start(&s, extra), 0);
    send_some(&s, 120, 7);
    CHECK_EQ(es_stop(&s), 0);
    check_offline(&s, NULL);
    char cp[256], ep[256], sp[256], log[1 << 14];
    snprintf(cp, sizeof cp, "%s/commands.ofl", s.jdir);
    snprintf(ep, sizeof ep, "%s/events.ofl", s.jdir);
    snprintf(sp, sizeof sp, "%s/snapshot.tfs", s.jdir);
    struct stat st;
    CHECK(stat(sp, &st) == 0);

    /* The clean stop wrote a snapshot of its final state: the next start replays nothing. */
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "120 commands (0 replayed after the snapshot)") != NULL);
    check_offline(&s, NULL);

    /* A crash (no snapshot at the stop) after 20 more commands, the last periodic snapshot at
     * 120: the start replays only that tail. */
    CHECK_RC(es_start(&s, extra), 0);
    send_some(&s, 20, 8);
    es_kill9(&s);
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "140 commands (20 replayed after the snapshot)") != NULL);
    check_offline(&s, NULL);

    /* A torn tail: half a record. Cut, reported, the state unchanged. */
    uint8_t half[30];
    memset(half, 0, sizeof half);
    half[0] = 66; /* frame_len of a NewLimit */
    half[2] = TF_OFL_NEW_LIMIT;
    append_bytes(cp, half, sizeof half);
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "damaged tail cut") != NULL);
    CHECK(strstr(log, "140 commands") != NULL);
    check_offline(&s, NULL);

    /* A corrupt last record (a flipped CRC bit): that command is cut; events.ofl, which holds
     * its events, is cut back to match; the snapshot of the stop, which covers that record, is
     * not used. */
    uint8_t *img;
    size_t n = file_bytes(cp, &img);
    CHECK(n > 100);
    img[n - 1] ^= 0x40;
    FILE *f = fopen(cp, "wb");
    fwrite(img, 1, n, f);
    fclose(f);
    free(img);
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "damaged tail cut") != NULL);
    CHECK(strstr(log, "139 commands") != NULL);
    CHECK(strstr(log, "events past the journaled commands") != NULL);
    CHECK(strstr(log, "commands.ofl is shorter than the commands it covers") != NULL);
    check_offline(&s, NULL);

    /* events.ofl lost: regenerated whole (the snapshot cannot be used without it). */
    unlink(ep);
    CHECK_RC(es_start(&s, extra), 0);
    CHECK_EQ(es_stop(&s), 0);
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "regenerated") != NULL);
    CHECK(strstr(log, "events.ofl does not reach it") != NULL);
    check_offline(&s, NULL);

    /* A damaged snapshot: reported, the whole journal replayed. */
    FILE *sf = fopen(sp, "r+b");
    CHECK(sf != NULL);
    if (sf) {
        fseek(sf, 20, SEEK_SET);
        fputc(0x5a, sf);
        fclose(sf);
    }
    CHECK_RC(es_start(&s, extra), 0);
    send_some(&s, 5, 99);
    CHECK_EQ(es_stop(&s), 0);
    t_read_file(s.log, log, sizeof log);
    CHECK(strstr(log, "snapshot.tfs: unusable") != NULL);
    check_offline(&s, NULL);
    es_cleanup(&s);
}

/* ---- hostile clients ---- */

static esrv g_hs;

/* A well-behaved client's round trip (a fresh connection). */
static int good_round_trip(void)
{
    static uint64_t coid = 1u << 30;
    int fd = t_connect_tcp(g_hs.tcp_port);
    if (fd < 0)
        return 0;
    tf_ofl_msg m = new_limit(9, ++coid, 2, TF_OFL_BUY, 1, 1);
    reply r;
    int ok =
        call(fd, &m, &r) == 0 && r.n == 1 && r.ev[0].m.kind == TF_OFL_ACCEPTED && r.command_seq > 0;
    m = cancel_client(9, coid);
    ok &= call(fd, &m, &r) == 0 && r.ev[0].m.kind == TF_OFL_CANCELED;
    close(fd);
    return ok;
}

/* The server closed the connection, seen without reading what it holds (reading would make the
 * peer a reader again). */
static int hup_without_reading(int fd)
{
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; t_now_ms() < end;) {
        struct pollfd pf = {fd, POLLRDHUP, 0};
        if (poll(&pf, 1, 20) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return 1;
    }
    tf_test_deadline_note("waiting for the server to close a reader that never reads",
                          T_DEADLINE_MS);
    return 0;
}

/* Sends raw bytes and expects the connection to be closed. */
static void hostile_closed(const void *p, size_t n)
{
    int fd = t_connect_unix(g_hs.sock);
    CHECK(fd >= 0);
    CHECK_RC(t_send_all(fd, p, n), 0);
    CHECK(t_peer_closed(fd, T_DEADLINE_MS));
    close(fd);
    CHECK(good_round_trip());
}

static void test_hostile(void)
{
    CHECK_RC(es_init(&g_hs), 0);
    const char *extra[] = {
        "--stall-timeout", "1", "--max-output", "65536", "--durability", "none", NULL};
    CHECK_RC(es_start(&g_hs, extra), 0);
    CHECK(good_round_trip());
    uint8_t b[256];
    memset(b, 0, sizeof b);

    /* Bad lengths: below 9, above the 128-byte cap. */
    b[0] = 3;
    hostile_closed(b, 11);
    b[0] = 0xff;
    b[1] = 0x01;
    hostile_closed(b, 11);
    /* Unknown and reserved kinds, at the right sizes for a NewLimit. */
    const uint8_t bad_kinds[] = {0x07, 0x06, 0x40, 0xA0, 0x99};
    for (size_t i = 0; i < sizeof bad_kinds; i++) {
        memset(b, 0, sizeof b);
        b[0] = 9 + 57;
        b[2] = bad_kinds[i];
        hostile_closed(b, 11 + 57);
    }
    /* Events and a Heartbeat sent as commands. */
    tf_ofl_msg ev = {.kind = TF_OFL_ACCEPTED};
    hostile_closed(b, enc(b, &ev));
    ev = (tf_ofl_msg){.kind = TF_OFL_TRADE};
    hostile_closed(b, enc(b, &ev));
    ev = (tf_ofl_msg){.kind = TF_OFL_HEARTBEAT};
    hostile_closed(b, enc(b, &ev));
    /* A NewLimit one byte short. */
    tf_ofl_msg m = new_limit(1, 1, 1, 0, 1, 1);
    size_t n = enc(b, &m);
    b[0] = (uint8_t)(n - 3);
    hostile_closed(b, n - 1);

    /* Valid commands before a bad frame are still answered, then the close. */
    {
        int fd = t_connect_unix(g_hs.sock);
        uint8_t two[3 * TF_OFL_MAX_FRAME];
        size_t l = 0;
        m = new_limit(5, 501, 1, TF_OFL_BUY, 2, 1);
        l += enc(two + l, &m);
        m = cancel_client(5, 501);
        l += enc(two + l, &m);
        two[l] = 3, two[l + 1] = 0, l += 11;
        CHECK_RC(t_send_all(fd, two, l), 0);
        reply r;
        CHECK_RC(read_reply(fd, &r), 0);
        CHECK_EQ(r.ev[0].m.kind, TF_OFL_ACCEPTED);
        CHECK_RC(read_reply(fd, &r), 0);
        CHECK_EQ(r.ev[0].m.kind, TF_OFL_CANCELED);
        CHECK(t_peer_closed(fd, T_DEADLINE_MS));
        close(fd);
        CHECK(good_round_trip());
    }

    /* A byte-by-byte sender is served. */
    {
        int fd = t_connect_unix(g_hs.sock);
        m = new_limit(6, 601, 1, TF_OFL_BUY, 2, 1);
        n = enc(b, &m);
        for (size_t i = 0; i < n; i++) {
            CHECK_RC(t_send_all(fd, b + i, 1), 0);
            if (i % 16 == 0)
                CHECK(good_round_trip());
        }
        reply r;
        CHECK_RC(read_reply(fd, &r), 0);
        CHECK_EQ(r.ev[0].m.kind, TF_OFL_ACCEPTED);
        close(fd);
    }

    /* A half-closing client gets its replies, then the close. */
    {
        int fd = t_connect_tcp(g_hs.tcp_port);
        m = new_limit(6, 602, 1, TF_OFL_BUY, 2, 1);
        n = enc(b, &m);
        CHECK_RC(t_send_all(fd, b, n), 0);
        shutdown(fd, SHUT_WR);
        reply r;
        CHECK_RC(read_reply(fd, &r), 0);
        CHECK(t_peer_closed(fd, T_DEADLINE_MS));
        close(fd);
    }

    /* A reader that never reads: it pipelines without reading, its output backs up, and it is
     * closed (output limit or stall), while others are served meanwhile. */
    {
        int fd = t_connect_unix(g_hs.sock);
        int sz = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        uint8_t burst[64 * TF_OFL_MAX_FRAME];
        size_t l = 0;
        for (int i = 0; i < 64; i++) {
            m = cancel_order(1u << 31); /* Rejected(OrderNotFound): nothing rests */
            l += enc(burst + l, &m);
        }
        int closed = 0;
        for (int64_t end = t_now_ms() + T_DEADLINE_MS; !closed && t_now_ms() < end;) {
            ssize_t w = send(fd, burst, l, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                closed = 1;
            if (w < 0 && errno == EAGAIN) {
                struct pollfd pf = {fd, POLLRDHUP, 0};
                closed = poll(&pf, 1, 20) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
            }
        }
        if (!closed)
            tf_test_deadline_note("waiting for the server to close a sender that never reads",
                                  T_DEADLINE_MS);
        CHECK(closed);
        close(fd);
        CHECK(good_round_trip());
    }

    /* A maker that never reads: the Trades of its resting orders are queued for it until the
     * output limit, then it is closed; the takers are served throughout. */
    {
        int deaf = t_connect_unix(g_hs.sock);
        int sz = 4096;
        setsockopt(deaf, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        uint8_t *rest = malloc(2000 * TF_OFL_MAX_FRAME);
        size_t l = 0;
        for (int i = 0; i < 2000; i++) {
            m = new_limit(7, 7000 + (uint64_t)i, 3, TF_OFL_SELL, 10, 1);
            l += enc(rest + l, &m);
        }
        CHECK_RC(t_send_all(deaf, rest, l), 0);
        int taker = t_connect_unix(g_hs.sock);
        reply r;
        int ok = 0;
        for (int k = 0; k < 20; k++) { /* pipelined by 100 (it reads its replies) */
            l = 0;
            for (int i = 0; i < 100; i++) {
                m = new_market(8, 8000 + (uint64_t)(100 * k + i), 3, TF_OFL_BUY, 1);
                l += enc(rest + l, &m);
            }
            CHECK_RC(t_send_all(taker, rest, l), 0);
            for (int i = 0; i < 100; i++)
                ok += read_reply(taker, &r) == 0 && r.ev[1].m.kind == TF_OFL_TRADE;
        }
        CHECK_EQ(ok, 2000);
        CHECK(hup_without_reading(deaf));
        close(deaf);
        close(taker);
        free(rest);
        CHECK(good_round_trip());
    }

    /* 1,000 connections at once, each with a command; every one answered. */
    {
        enum { N = 1000 };
        int *fds = malloc(N * sizeof *fds);
        int opened = 0;
        for (int i = 0; i < N; i++) {
            fds[i] = i % 2 ? t_connect_tcp(g_hs.tcp_port) : t_connect_unix(g_hs.sock);
            opened += fds[i] >= 0;
        }
        CHECK_EQ(opened, N);
        for (int i = 0; i < N; i++) {
            m = cancel_order(1u << 31);
            n = enc(b, &m);
            if (fds[i] >= 0)
                t_send_all(fds[i], b, n);
        }
        CHECK(good_round_trip());
        int answered = 0;
        for (int i = 0; i < N; i++) {
            reply r;
            answered +=
                fds[i] >= 0 && read_reply(fds[i], &r) == 0 && r.ev[0].m.kind == TF_OFL_REJECTED;
            close(fds[i]);
        }
        CHECK_EQ(answered, N);
        free(fds);
        CHECK(good_round_trip());
    }

    char log[1 << 16];
    t_read_file(g_hs.log, log, sizeof log);
    CHECK(strstr(log, "bad frame: frame_len 3 below 9") != NULL);
    CHECK(strstr(log, "reserved kind 0x06") != NULL);
    CHECK(strstr(log, "an event (kind 0x81) sent as a command") != NULL);
    CHECK(t_alive((tserver *)&(tserver){.pid = g_hs.pid}));
    CHECK_EQ(es_stop(&g_hs), 0);
    check_offline(&g_hs, NULL);
    es_cleanup(&g_hs);
}

/* ---- usage ---- */

static void test_usage(void)
{
    char buf[256];
    esrv s;
    CHECK_RC(es_init(&s), 0);
    /* No listener: exit 2. A bad --durability: exit 2. */
    const char *argv1[] = {t_bin(), "engine", "serve", "--journal", s.jdir, NULL};
    const char *argv2[] = {t_bin(),  "engine", "serve",        "--journal", s.jdir,
                           "--unix", s.sock,   "--durability", "sometimes", NULL};
    const char *const *argvs[] = {argv1, argv2};
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            t_child_detach(0);
            int nul = open("/dev/null", O_WRONLY);
            dup2(nul, 2);
            execv(argvs[k][0], (char *const *)argvs[k]);
            _exit(127);
        }
        CHECK_EQ(t_wait_exit(pid, T_DEADLINE_MS), 2);
    }
    (void)buf;
    es_cleanup(&s);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "usage"))
        test_usage();
    if (!only || !strcmp(only, "round_trip"))
        test_round_trip();
    if (!only || !strcmp(only, "tails"))
        test_tails_and_snapshot();
    if (!only || !strcmp(only, "hostile"))
        test_hostile();
    if (!only || !strcmp(only, "kill9"))
        test_kill9();
    return tf_test_report();
}
