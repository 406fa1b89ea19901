/* The order client (include/tollfree/orders.h).
 *
 * 1. The shared framing vectors (tests/vectors/ofl_frames.txt, also read by
 *    python/tests/test_orders.py): encode(fields) == bytes, decode(bytes) == fields, and the
 *    decode errors.
 * 2. The vectors' server streams, played by a fake server on a Unix socket: replies, unsolicited
 *    Trades before and between replies, the undecodable-command answer, and every protocol
 *    violation and early close, each surfacing as its documented code.
 * 3. Errors of the API: bad urls and options, refused connections, a bad side, a timeout, the
 *    closed client, the bounded fill queue and the fill callback; no allocation per command.
 * 3b. The split flow (tf_orders_send / tf_orders_recv): replies matched to commands in order with
 *    fills between them, fills polled while replies are owed, the window, the refusals while
 *    replies are owed, a close with replies owed; no allocation either.
 * 4. The real service (`tollfree engine serve`, from TF_BUILD_DIR) over Unix and TCP, when the
 *    binary has it: every command, fills across connections, pipelined send_many, a resting
 *    order and its cross in one tf_orders_send, a window of 8 over 2,000 commands, the
 *    undecodable command, and the state hash after SIGTERM against `engine run` of its journal.
 * Deadlines here only guard against hangs; no check depends on wall time. */
#include <pthread.h>
#include <stdlib.h>

#include "alloc_count.h"
#include "harness.h"
#include "test_server_util.h"
#include "tollfree/orderflow.h"
#include "tollfree/orders.h"

/* ---------------------------------------------------------------- vectors */

#define MAX_VEC 64
#define MAX_HEX 4096

typedef struct vec {
    char type[8]; /* frame, error, stream */
    char name[48];
    uint64_t journal_seq;
    int code;
    int n_cmds, n_fills, error;
    char seqs[64], events[64];
    char fields[1024];
    uint8_t bytes[MAX_HEX / 2];
    size_t len;
} vec;

static vec vecs[MAX_VEC];
static int n_vecs;

static int unhex(const char *h, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = strlen(h);
    if (!strcmp(h, "-")) {
        *len = 0;
        return 0;
    }
    if (n % 2 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return 0;
}

static int load_vectors(void)
{
    char line[8192];
    FILE *f = tf_test_open_vectors("ofl_frames.txt");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f) && n_vecs < MAX_VEC) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        vec *v = &vecs[n_vecs];
        memset(v, 0, sizeof *v);
        char *tok[64];
        int nt = 0;
        for (char *p = strtok(line, " "); p && nt < 64; p = strtok(NULL, " "))
            tok[nt++] = p;
        if (nt < 3)
            continue;
        snprintf(v->type, sizeof v->type, "%s", tok[0]);
        if (unhex(tok[nt - 1], v->bytes, sizeof v->bytes, &v->len))
            continue;
        if (!strcmp(v->type, "frame")) {
            snprintf(v->name, sizeof v->name, "%s", tok[1]);
            v->journal_seq = strtoull(tok[2], NULL, 10);
            for (int k = 3; k < nt - 1; k++) {
                strcat(v->fields, tok[k]);
                strcat(v->fields, " ");
            }
        } else if (!strcmp(v->type, "error")) {
            v->code = atoi(tok[1]);
        } else if (!strcmp(v->type, "stream") && nt == 8) {
            snprintf(v->name, sizeof v->name, "%s", tok[1]);
            v->n_cmds = atoi(tok[2]);
            snprintf(v->seqs, sizeof v->seqs, "%s", tok[3]);
            snprintf(v->events, sizeof v->events, "%s", tok[4]);
            v->n_fills = atoi(tok[5]);
            v->error = atoi(tok[6]);
        } else {
            continue;
        }
        n_vecs++;
    }
    fclose(f);
    return n_vecs;
}

/* The value of FIELD= in a fields string (0 when absent). */
static uint64_t field(const char *fields, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "%s=", name);
    for (const char *p = fields; (p = strstr(p, key)); p++) {
        if (p == fields || p[-1] == ' ') {
            const char *s = p + strlen(key);
            return *s == '-' ? (uint64_t)strtoll(s, NULL, 10) : strtoull(s, NULL, 10);
        }
    }
    return 0;
}

static int kind_of(const char *name)
{
    for (int k = 0; k < 256; k++) {
        const char *n = tf_ofl_kind_name(k);
        if (n && !strcmp(n, name))
            return k;
    }
    return -1;
}

/* Builds the message a frame vector describes. */
static void build(const vec *v, tf_ofl_msg *m)
{
    const char *f = v->fields;
    memset(m, 0, sizeof *m);
    m->kind = (uint8_t)kind_of(v->name);
    m->journal_seq = v->journal_seq;
    tf_ofl_qty q = {field(f, "quantity_lo"), field(f, "quantity_hi")};
    switch (m->kind) {
    case TF_OFL_NEW_LIMIT:
        m->new_limit = (tf_ofl_new_limit){field(f, "command_seq"),     field(f, "account_id"),
                                          field(f, "client_order_id"), field(f, "instrument_id"),
                                          (int64_t)field(f, "price"),  q,
                                          (uint8_t)field(f, "side")};
        break;
    case TF_OFL_NEW_MARKET:
        m->new_market = (tf_ofl_new_market){field(f, "command_seq"),
                                            field(f, "account_id"),
                                            field(f, "client_order_id"),
                                            field(f, "instrument_id"),
                                            q,
                                            (uint8_t)field(f, "side")};
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        m->cancel_by_order =
            (tf_ofl_cancel_by_order){field(f, "command_seq"), field(f, "order_id")};
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        m->cancel_by_client = (tf_ofl_cancel_by_client){
            field(f, "command_seq"), field(f, "account_id"), field(f, "client_order_id")};
        break;
    case TF_OFL_REPLACE:
        m->replace = (tf_ofl_replace){field(f, "command_seq"), field(f, "order_id"),
                                      field(f, "client_order_id"), (int64_t)field(f, "price"), q};
        break;
    case TF_OFL_ACCEPTED:
        m->accepted = (tf_ofl_accepted){field(f, "event_seq"),       field(f, "command_seq"),
                                        field(f, "timestamp_ns"),    field(f, "order_id"),
                                        field(f, "client_order_id"), field(f, "account_id")};
        break;
    case TF_OFL_REJECTED:
        m->rejected = (tf_ofl_rejected){field(f, "event_seq"), field(f, "command_seq"),
                                        field(f, "timestamp_ns"), field(f, "client_order_id"),
                                        (uint8_t)field(f, "reason")};
        break;
    case TF_OFL_REPLACED:
        m->replaced = (tf_ofl_replaced){field(f, "event_seq"), field(f, "command_seq"),
                                        field(f, "timestamp_ns"), field(f, "order_id"),
                                        field(f, "client_order_id")};
        break;
    case TF_OFL_CANCELED:
        m->canceled = (tf_ofl_canceled){field(f, "event_seq"), field(f, "command_seq"),
                                        field(f, "timestamp_ns"), field(f, "order_id")};
        break;
    case TF_OFL_TRADE:
        m->trade = (tf_ofl_trade){field(f, "event_seq"),      field(f, "command_seq"),
                                  field(f, "timestamp_ns"),   field(f, "maker_order_id"),
                                  field(f, "taker_order_id"), field(f, "instrument_id"),
                                  (int64_t)field(f, "price"), q};
        break;
    default:
        break;
    }
}

static void test_vectors(void)
{
    int frames = 0, errors = 0;
    for (int i = 0; i < n_vecs; i++) {
        const vec *v = &vecs[i];
        if (!strcmp(v->type, "frame")) {
            tf_ofl_msg m, d;
            uint8_t buf[TF_OFL_MAX_FRAME];
            build(v, &m);
            CHECK(m.kind != 0xFF);
            int n = tf_ofl_frame_encode(buf, sizeof buf, &m);
            CHECK_EQ(n, (long long)v->len);
            CHECK(n > 0 && memcmp(buf, v->bytes, v->len) == 0);
            CHECK_EQ(tf_ofl_frame_decode(v->bytes, v->len, &d), (long long)v->len);
            /* decode -> encode gives the bytes back, and the fields are the vector's */
            CHECK_EQ(d.kind, m.kind);
            CHECK_EQ(d.journal_seq, m.journal_seq);
            uint8_t again[TF_OFL_MAX_FRAME];
            CHECK_EQ(tf_ofl_frame_encode(again, sizeof again, &d), (long long)v->len);
            CHECK(memcmp(again, v->bytes, v->len) == 0);
            frames++;
        } else if (!strcmp(v->type, "error")) {
            tf_ofl_msg d;
            CHECK_RC(tf_ofl_frame_decode(v->bytes, v->len, &d), v->code);
            errors++;
        }
    }
    CHECK(frames >= 14);
    CHECK(errors >= 8);
}

/* ---------------------------------------------------------------- a fake server */

typedef struct fake {
    char path[128];
    int lfd;
    int n_cmds;            /* command frames to read before answering */
    const uint8_t *answer; /* then these bytes */
    size_t answer_len;
    int hold;     /* then wait for the client to close (else close at once) */
    int delay_ms; /* before answering */
    int got_cmds;
    tf_ofl_msg cmds[4];
    pthread_t th;
} fake;

static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    uint8_t buf[1024];
    size_t have = 0;
    while (f->got_cmds < f->n_cmds) {
        tf_ofl_msg m;
        int rc = tf_ofl_frame_decode(buf, have, &m);
        if (rc > 0) {
            if (f->got_cmds < 4)
                f->cmds[f->got_cmds] = m;
            f->got_cmds++;
            memmove(buf, buf + rc, have - (size_t)rc);
            have -= (size_t)rc;
            continue;
        }
        if (rc != TF_E_OFL_HEADER_TOO_SHORT && rc != TF_E_OFL_PAYLOAD_TOO_SHORT)
            break;
        ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    if (f->delay_ms)
        t_sleep_ms(f->delay_ms);
    if (f->answer_len)
        t_send_all(fd, f->answer, f->answer_len);
    if (f->hold) {
        while (recv(fd, buf, sizeof buf, 0) > 0)
            ;
    }
    close(fd);
    return NULL;
}

static int fake_start(fake *f, const char *dir)
{
    static int k;
    snprintf(f->path, sizeof f->path, "%s/fake%d.sock", dir, k++);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
    f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) || listen(f->lfd, 4))
        return -1;
    return pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_join(fake *f)
{
    pthread_join(f->th, NULL);
    close(f->lfd);
    unlink(f->path);
}

static void fake_url(const fake *f, char *url, size_t n)
{
    snprintf(url, n, "unix:%s", f->path);
}

static tf_ofl_msg limit_cmd(uint64_t account, uint64_t cid, int side, int64_t px, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit.account_id = account;
    m.new_limit.client_order_id = cid;
    m.new_limit.instrument_id = 1;
    m.new_limit.side = (uint8_t)side;
    m.new_limit.price = px;
    m.new_limit.quantity.lo = qty;
    return m;
}

/* Counts comma-separated numbers of a vector field into out[]. */
static int split(const char *s, uint64_t *out, int cap)
{
    if (!strcmp(s, "-"))
        return 0;
    int n = 0;
    for (const char *p = s; *p && n < cap;) {
        char *end;
        out[n++] = strtoull(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end)
            break;
    }
    return n;
}

static void test_streams(const char *dir)
{
    int played = 0;
    for (int i = 0; i < n_vecs; i++) {
        const vec *v = &vecs[i];
        if (strcmp(v->type, "stream"))
            continue;
        fake f = {
            .n_cmds = v->n_cmds, .answer = v->bytes, .answer_len = v->len, .hold = v->error == 0};
        CHECK(fake_start(&f, dir) == 0);
        char url[200];
        fake_url(&f, url, sizeof url);
        tf_orders *c = NULL;
        tf_orders_opts o = {.size = sizeof o, .timeout_ms = 20000};
        CHECK_RC(tf_orders_connect(&c, url, &o), 0);
        tf_ofl_msg cmds[4], ev[16];
        for (int k = 0; k < v->n_cmds && k < 4; k++)
            cmds[k] = limit_cmd(7, (uint64_t)k + 1, TF_OFL_BUY, 100, 1);
        uint64_t seqs[4] = {0};
        size_t ends[4] = {0};
        int64_t rc = tf_orders_send_many(c, cmds, (size_t)v->n_cmds, ev, 16, seqs, ends);
        uint64_t want_seqs[4], want_ev[4];
        int ns = split(v->seqs, want_seqs, 4), ne = split(v->events, want_ev, 4);
        if (v->error) {
            if (rc != v->error)
                fprintf(stderr, "stream %s: got %lld, want %d\n", v->name, (long long)rc, v->error);
            CHECK_EQ(rc, v->error);
            tf_orders_reply r = {.ev = ev, .cap = 16};
            CHECK_RC(tf_orders_call(c, &cmds[0], &r), -ENOTCONN); /* closed after a failure */
        } else {
            int64_t total = 0;
            for (int k = 0; k < ne; k++)
                total += (int64_t)want_ev[k];
            CHECK_EQ(rc, total);
            CHECK_EQ(ns, v->n_cmds);
            size_t end = 0;
            for (int k = 0; k < ns; k++) {
                CHECK_EQ(seqs[k], want_seqs[k]);
                end += want_ev[k];
                CHECK_EQ(ends[k], end);
            }
            tf_ofl_msg fills[8];
            CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 0), v->n_fills);
            for (int k = 0; k < v->n_fills; k++)
                CHECK_EQ(fills[k].kind, TF_OFL_TRADE);
            /* the commands went out as sent (command_seq is the server's to assign) */
            CHECK_EQ(f.got_cmds, v->n_cmds);
            CHECK_EQ(f.cmds[0].kind, TF_OFL_NEW_LIMIT);
            CHECK_EQ(f.cmds[0].new_limit.client_order_id, 1);
        }
        tf_orders_close(c);
        fake_join(&f);
        played++;
    }
    CHECK(played >= 13);
}

/* ---------------------------------------------------------------- API errors */

static void on_fill_count(void *ctx, const tf_ofl_msg *t)
{
    (*(int *)ctx) += t->kind == TF_OFL_TRADE;
}

static size_t put_frame(uint8_t *p, const tf_ofl_msg *m)
{
    int n = tf_ofl_frame_encode(p, TF_OFL_MAX_FRAME, m);
    return n > 0 ? (size_t)n : 0;
}

static size_t trade_frames(uint8_t *p, int n, uint64_t cseq)
{
    size_t len = 0;
    for (int k = 0; k < n; k++) {
        tf_ofl_msg t = {.kind = TF_OFL_TRADE};
        t.trade.event_seq = (uint64_t)k + 1;
        t.trade.command_seq = cseq;
        t.trade.maker_order_id = 1;
        t.trade.taker_order_id = 2;
        t.trade.instrument_id = 1;
        t.trade.price = 100;
        t.trade.quantity.lo = 1;
        len += put_frame(p + len, &t);
    }
    return len;
}

static size_t reply_frames(uint8_t *p, uint64_t cseq)
{
    tf_ofl_msg a = {.kind = TF_OFL_ACCEPTED}, hb = {.kind = TF_OFL_HEARTBEAT};
    a.accepted.event_seq = 99;
    a.accepted.command_seq = cseq;
    a.accepted.order_id = 5;
    hb.journal_seq = cseq;
    size_t len = put_frame(p, &a);
    return len + put_frame(p + len, &hb);
}

/* The options follow the one size rule (docs/api.md): any size from _V1 up is a layout whose
 * missing fields take their defaults; a larger size than the library's only with zero unknown
 * bytes; below _V1 refused. An accepted struct gets as far as dialling the missing socket
 * (-ENOENT); a refused one stops at TF_E_INVALID_ARG. */
static void test_opts_size_rule(const char *dir)
{
    tf_orders *c = NULL;
    char url[256];
    snprintf(url, sizeof url, "unix:%s/missing.sock", dir);
    /* A layout between _V1 and _V2 (it ends after session, NULL here): the fields past it are
     * set and must be taken as absent (the unix URL would not use them anyway). */
    tf_orders_opts mid = {.size = TF_ORDERS_OPTS_SIZE_V1 + sizeof(const char *),
                          .timeout_ms = 200,
                          .secret = "k",
                          .secret_len = 1,
                          .tls_ca = "/nonexistent/ca.pem"};
    CHECK_RC(tf_orders_connect(&c, url, &mid), -ENOENT);
    /* With session set inside that layout the secret is absent: a logon needs one. */
    mid.session = "s";
    CHECK_RC(tf_orders_connect(&c, url, &mid), TF_E_INVALID_ARG);
    mid.size = TF_ORDERS_OPTS_SIZE_V2;
    CHECK_RC(tf_orders_connect(&c, url, &mid), -ENOENT);
    /* Every pointer-aligned size from _V1 up to the library's own is a layout. */
    mid.session = NULL;
    for (uint32_t sz = TF_ORDERS_OPTS_SIZE_V1; sz <= sizeof(tf_orders_opts); sz += 8) {
        mid.size = sz;
        CHECK_RC(tf_orders_connect(&c, url, &mid), -ENOENT);
    }
    /* Below _V1: refused. */
    mid.size = TF_ORDERS_OPTS_SIZE_V1 - 4;
    CHECK_RC(tf_orders_connect(&c, url, &mid), TF_E_INVALID_ARG);
    mid.size = 1;
    CHECK_RC(tf_orders_connect(&c, url, &mid), TF_E_INVALID_ARG);
    /* A newer caller: its unknown tail must be zero. */
    struct {
        tf_orders_opts o;
        uint64_t next;
    } newer = {.o = {.size = sizeof newer, .timeout_ms = 200}};
    CHECK_RC(tf_orders_connect(&c, url, &newer.o), -ENOENT);
    newer.next = 1;
    CHECK_RC(tf_orders_connect(&c, url, &newer.o), TF_E_INVALID_ARG);
    newer.next = (uint64_t)1 << 63;
    CHECK_RC(tf_orders_connect(&c, url, &newer.o), TF_E_INVALID_ARG);
    /* The session form reads the options the same way. */
    CHECK_RC(tf_orders_connect_session(&c, url, "s", "k", 1, &newer.o), TF_E_INVALID_ARG);
    newer.next = 0;
    CHECK_RC(tf_orders_connect_session(&c, url, "s", "k", 1, &newer.o), -ENOENT);
    CHECK(c == NULL);
}

static void test_api_errors(const char *dir)
{
    tf_orders *c = (tf_orders *)1;
    char url[256];
    CHECK_RC(tf_orders_connect(NULL, "unix:/x", NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_connect(&c, NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_connect(&c, "shm:/x", NULL), TF_E_INVALID_ARG);
    CHECK(c == NULL);
    CHECK_RC(tf_orders_connect(&c, "unix:", NULL), TF_E_INVALID_ARG);
    CHECK_RC(tf_orders_connect(&c, "tcp:127.0.0.1", NULL), TF_E_INVALID_ARG);
    CHECK_RC(tf_orders_connect(&c, "tcp:127.0.0.1:", NULL), TF_E_INVALID_ARG);
    snprintf(url, sizeof url, "unix:%s/missing.sock", dir);
    CHECK_RC(tf_orders_connect(&c, url, NULL), -ENOENT);
    tf_orders_opts bad = {.size = 4};
    CHECK_RC(tf_orders_connect(&c, url, &bad), TF_E_INVALID_ARG);
    tf_orders_opts big = {.max_fills = 1u << 30};
    CHECK_RC(tf_orders_connect(&c, url, &big), TF_E_INVALID_ARG);
    tf_orders_close(NULL);
    CHECK_EQ(tf_orders_fd(NULL), -1);
    CHECK_EQ(tf_orders_fills_dropped(NULL), 0);
    CHECK_RC(tf_orders_set_timeout(NULL, 1), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_poll_fills(NULL, NULL, 0, 0), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_call(NULL, NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_send_many(NULL, NULL, 0, NULL, 0, NULL, NULL), TF_E_NULL_ARG);

    /* A server that never answers: a timeout, then the client is closed. */
    fake f = {.n_cmds = 1, .hold = 1};
    CHECK(fake_start(&f, dir) == 0);
    fake_url(&f, url, sizeof url);
    tf_orders_opts o = {.size = sizeof o, .timeout_ms = 200};
    CHECK_RC(tf_orders_connect(&c, url, &o), 0);
    CHECK(tf_orders_fd(c) >= 0);
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    /* the caller's errors come first, and leave the connection usable */
    CHECK_RC(tf_orders_new_limit(c, 1, 1, 1, 2, 100, 1, &r), TF_E_OFL_INVALID_SIDE);
    CHECK_RC(tf_orders_new_market(c, 1, 1, 1, 7, 1, &r), TF_E_OFL_INVALID_SIDE);
    tf_ofl_msg ev_kind = {.kind = TF_OFL_TRADE};
    CHECK_RC(tf_orders_call(c, &ev_kind, &r), TF_E_INVALID_ARG);
    tf_orders_reply rnull = {.ev = NULL, .cap = 3};
    CHECK_RC(tf_orders_cancel(c, 1, &rnull), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_new_limit(c, 1, 1, 1, TF_OFL_BUY, 100, 1, &r), -ETIMEDOUT);
    CHECK_EQ(tf_orders_fd(c), -1);
    CHECK_RC(tf_orders_cancel(c, 1, &r), -ENOTCONN);
    CHECK_RC(tf_orders_send_many(c, ev, 1, NULL, 0, NULL, NULL), -ENOTCONN);
    CHECK_RC(tf_orders_poll_fills(c, ev, 4, 0), -ENOTCONN);
    tf_orders_close(c);
    fake_join(&f);

    /* The bounded fill queue: 5 unsolicited Trades into room for 3; the oldest go. */
    static uint8_t stream[4096];
    size_t len = trade_frames(stream, 5, 40);
    len += reply_frames(stream + len, 41);
    fake g = {.n_cmds = 1, .answer = stream, .answer_len = len, .hold = 1};
    CHECK(fake_start(&g, dir) == 0);
    fake_url(&g, url, sizeof url);
    tf_orders_opts q = {.size = sizeof q, .max_fills = 3};
    CHECK_RC(tf_orders_connect(&c, url, &q), 0);
    CHECK_RC(tf_orders_cancel_client(c, 7, 1, &r), 1);
    CHECK_EQ(r.command_seq, 41);
    CHECK_EQ(r.n, 1);
    CHECK_EQ(ev[0].accepted.order_id, 5);
    CHECK_EQ(tf_orders_fills_dropped(c), 2);
    tf_ofl_msg fills[8];
    CHECK_EQ(tf_orders_poll_fills(c, fills, 2, 0), 2);
    CHECK_EQ(fills[0].trade.event_seq, 3); /* 1 and 2 were dropped */
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 0), 1);
    CHECK_EQ(fills[0].trade.event_seq, 5);
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 0), 0);
    tf_orders_close(c);
    fake_join(&g);

    /* The callback instead of the queue; a reply larger than the caller's array: two fills,
     * then Accepted, Trade, Trade and the Heartbeat. */
    len = trade_frames(stream, 2, 40);
    tf_ofl_msg acc = {.kind = TF_OFL_ACCEPTED}, hb = {.kind = TF_OFL_HEARTBEAT};
    acc.accepted.command_seq = 41;
    hb.journal_seq = 41;
    len += put_frame(stream + len, &acc);
    len += trade_frames(stream + len, 2, 41);
    len += put_frame(stream + len, &hb);
    fake h = {.n_cmds = 1, .answer = stream, .answer_len = len, .hold = 1};
    CHECK(fake_start(&h, dir) == 0);
    fake_url(&h, url, sizeof url);
    int calls = 0;
    tf_orders_opts cb = {.size = sizeof cb, .on_fill = on_fill_count, .on_fill_ctx = &calls};
    CHECK_RC(tf_orders_connect(&c, url, &cb), 0);
    tf_orders_reply small = {.ev = ev, .cap = 1};
    CHECK_RC(tf_orders_replace(c, 5, 2, 101, 1, &small), 3);
    CHECK_EQ(small.n, 3);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    CHECK_EQ(calls, 2);
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 0), 0);
    tf_orders_close(c);
    fake_join(&h);

    /* poll_fills waits for a fill that comes later (the deadline only guards the hang). */
    len = trade_frames(stream, 1, 9);
    fake w = {.n_cmds = 0, .answer = stream, .answer_len = len, .hold = 1, .delay_ms = 50};
    CHECK(fake_start(&w, dir) == 0);
    fake_url(&w, url, sizeof url);
    CHECK_RC(tf_orders_connect(&c, url, NULL), 0);
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 60000), 1);
    CHECK_EQ(fills[0].trade.command_seq, 9);
    tf_orders_close(c);
    fake_join(&w);
}

/* ---------------------------------------------------------------- send now, recv later */

/* An Accepted of command cseq (order id oid) with k Trades, then its Heartbeat. */
static size_t reply_with_trades(uint8_t *p, uint64_t cseq, uint64_t oid, int k)
{
    tf_ofl_msg a = {.kind = TF_OFL_ACCEPTED}, hb = {.kind = TF_OFL_HEARTBEAT};
    a.accepted.command_seq = cseq;
    a.accepted.order_id = oid;
    hb.journal_seq = cseq;
    size_t len = put_frame(p, &a);
    len += trade_frames(p + len, k, cseq);
    return len + put_frame(p + len, &hb);
}

static void test_split_flow(const char *dir)
{
    char url[200];
    tf_orders *c = NULL;
    tf_ofl_msg ev[8], fills[8];
    tf_orders_reply r = {.ev = ev, .cap = 8};
    static uint8_t stream[4096];

    /* Three commands in one send; the answer: a fill, reply 1, a fill, reply 2 (with two
     * Trades: the reply's own, not fills), reply 3, a fill. Each recv gets its command's. */
    size_t len = trade_frames(stream, 1, 70);
    len += reply_with_trades(stream + len, 71, 501, 0);
    len += trade_frames(stream + len, 1, 70);
    len += reply_with_trades(stream + len, 72, 502, 2);
    len += reply_with_trades(stream + len, 73, 503, 0);
    len += trade_frames(stream + len, 1, 72);
    fake f = {.n_cmds = 3, .answer = stream, .answer_len = len, .hold = 1};
    CHECK(fake_start(&f, dir) == 0);
    fake_url(&f, url, sizeof url);
    CHECK_RC(tf_orders_connect(&c, url, NULL), 0);
    tf_ofl_msg cmds[3] = {limit_cmd(7, 1, TF_OFL_SELL, 100, 1), limit_cmd(8, 2, TF_OFL_BUY, 100, 2),
                          limit_cmd(7, 3, TF_OFL_BUY, 99, 1)};
    CHECK_EQ(tf_orders_unanswered(c), 0);
    CHECK_RC(tf_orders_recv(c, &r), TF_E_INVALID_ARG); /* nothing owed: no wait for nothing */
    CHECK_RC(tf_orders_send(c, cmds, 3), 3);
    CHECK_EQ(tf_orders_unanswered(c), 3);
    /* While replies are owed, call and send_many would read another command's reply */
    CHECK_RC(tf_orders_call(c, &cmds[0], &r), TF_E_INVALID_ARG);
    CHECK_RC(tf_orders_send_many(c, cmds, 1, ev, 8, NULL, NULL), TF_E_INVALID_ARG);
    /* poll_fills reads the first fill and stops at reply 1, which stays for recv */
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 60000), 1);
    CHECK_EQ(fills[0].trade.command_seq, 70);
    CHECK_EQ(tf_orders_unanswered(c), 3);
    CHECK_RC(tf_orders_recv(c, &r), 1);
    CHECK_EQ(r.command_seq, 71);
    CHECK_EQ(ev[0].accepted.order_id, 501);
    CHECK_EQ(tf_orders_unanswered(c), 2);
    CHECK_RC(tf_orders_recv(c, &r), 3);
    CHECK_EQ(r.command_seq, 72);
    CHECK_EQ(ev[0].accepted.order_id, 502);
    CHECK(ev[1].kind == TF_OFL_TRADE && ev[2].kind == TF_OFL_TRADE &&
          ev[2].trade.command_seq == 72);
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 0), 1); /* the one between replies 1 and 2 */
    CHECK_RC(tf_orders_recv(c, &r), 1);
    CHECK_EQ(r.command_seq, 73);
    CHECK_EQ(ev[0].accepted.order_id, 503);
    CHECK_EQ(tf_orders_unanswered(c), 0);
    CHECK_EQ(tf_orders_poll_fills(c, fills, 8, 60000), 1); /* after the last reply */
    CHECK_EQ(fills[0].trade.command_seq, 72);
    /* the commands went out in order, as given */
    CHECK_EQ(f.got_cmds, 3);
    CHECK_EQ(f.cmds[1].new_limit.account_id, 8);
    CHECK_EQ(f.cmds[2].new_limit.price, 99);
    CHECK_RC(tf_orders_flush(c), 0); /* nothing left to write */
    tf_orders_close(c);
    fake_join(&f);

    /* The caller's errors take nothing; the window (max_inflight 2) takes 2 of 3. */
    fake g = {.n_cmds = 2, .hold = 1};
    CHECK(fake_start(&g, dir) == 0);
    fake_url(&g, url, sizeof url);
    tf_orders_opts w = {.size = sizeof w, .max_inflight = 2, .timeout_ms = 200};
    CHECK_RC(tf_orders_connect(&c, url, &w), 0);
    CHECK_RC(tf_orders_send(NULL, cmds, 1), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_send(c, NULL, 1), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_recv(c, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_recv(NULL, &r), TF_E_NULL_ARG);
    CHECK_RC(tf_orders_flush(NULL), TF_E_NULL_ARG);
    CHECK_EQ(tf_orders_unanswered(NULL), 0);
    tf_ofl_msg bad[2] = {cmds[0], cmds[1]};
    bad[1].new_limit.side = 5;
    CHECK_RC(tf_orders_send(c, bad, 2), TF_E_OFL_INVALID_SIDE);
    bad[1] = (tf_ofl_msg){.kind = TF_OFL_ACCEPTED};
    CHECK_RC(tf_orders_send(c, bad, 2), TF_E_INVALID_ARG); /* an event is no command */
    CHECK_EQ(tf_orders_unanswered(c), 0);
    CHECK_RC(tf_orders_send(c, cmds, 0), 0);
    CHECK_RC(tf_orders_send(c, cmds, 3), 2);
    CHECK_RC(tf_orders_send(c, cmds + 2, 1), 0); /* full: a status, not an error */
    CHECK_EQ(tf_orders_unanswered(c), 2);
    CHECK(tf_orders_fd(c) >= 0);
    /* the fake never answers: the timeout closes the client; the count stays (resends) */
    CHECK_RC(tf_orders_recv(c, &r), -ETIMEDOUT);
    CHECK_EQ(tf_orders_fd(c), -1);
    CHECK_EQ(tf_orders_unanswered(c), 2);
    CHECK_RC(tf_orders_recv(c, &r), -ENOTCONN);
    CHECK_RC(tf_orders_send(c, cmds, 1), -ENOTCONN);
    CHECK_RC(tf_orders_flush(c), -ENOTCONN);
    tf_orders_close(c);
    fake_join(&g);
    /* the refused calls left no bytes behind: the fake read the two commands taken, in order */
    CHECK_EQ(g.got_cmds, 2);
    CHECK_EQ(g.cmds[0].new_limit.client_order_id, 1);
    CHECK_EQ(g.cmds[1].new_limit.client_order_id, 2);

    /* A server that answers the first of two commands and closes: the second recv says so. */
    len = reply_with_trades(stream, 5, 9, 0);
    fake h = {.n_cmds = 2, .answer = stream, .answer_len = len, .hold = 0};
    CHECK(fake_start(&h, dir) == 0);
    fake_url(&h, url, sizeof url);
    CHECK_RC(tf_orders_connect(&c, url, NULL), 0);
    CHECK_RC(tf_orders_send(c, cmds, 2), 2);
    CHECK_RC(tf_orders_recv(c, &r), 1);
    CHECK_EQ(r.command_seq, 5);
    CHECK_RC(tf_orders_recv(c, &r), -ECONNRESET);
    CHECK_EQ(tf_orders_unanswered(c), 1);
    tf_orders_close(c);
    fake_join(&h);
}

/* No allocation per command after connect: 1,000 calls against a fake that answers them all. */
static void test_no_alloc(const char *dir)
{
    enum { N = 1000 };
    static uint8_t stream[N * 70];
    size_t len = 0;
    for (int k = 0; k < N; k++)
        len += reply_frames(stream + len, (uint64_t)k + 1);
    fake f = {.n_cmds = 0, .answer = stream, .answer_len = len, .hold = 1};
    /* the fake answers at once; the client reads each reply after sending its command */
    CHECK(fake_start(&f, dir) == 0);
    char url[200];
    fake_url(&f, url, sizeof url);
    tf_orders *c = NULL;
    CHECK_RC(tf_orders_connect(&c, url, NULL), 0);
    tf_ofl_msg ev[4];
    tf_orders_reply r = {.ev = ev, .cap = 4};
    int ok = 0;
    tf_alloc_calls = tf_free_calls = 0;
    tf_alloc_on = 1;
    /* the first half one call at a time, the second ten sends and ten recvs at a time */
    for (int k = 0; k < N / 2; k++)
        ok += tf_orders_new_limit(c, 1, (uint64_t)k + 1, 1, TF_OFL_BUY, 100, 1, &r) == 1 &&
              r.command_seq == (uint64_t)k + 1;
    tf_ofl_msg batch[10];
    for (int k = 0; k < 10; k++)
        batch[k] = limit_cmd(1, (uint64_t)k + 1, TF_OFL_BUY, 100, 1);
    for (int k = N / 2; k < N; k += 10) {
        ok += 10 * (tf_orders_send(c, batch, 10) == 10);
        for (int j = 0; j < 10; j++)
            ok -= !(tf_orders_recv(c, &r) == 1 && r.command_seq == (uint64_t)(k + j) + 1);
    }
    tf_alloc_on = 0;
    CHECK_EQ(ok, N);
    CHECK_EQ(tf_alloc_calls, 0);
    CHECK_EQ(tf_free_calls, 0);
    tf_orders_close(c);
    fake_join(&f);
}

/* ---------------------------------------------------------------- the real service */

typedef struct esvc {
    pid_t pid;
    char dir[64], log[128], sock[128], journal[128];
    int port;
} esvc;

static int esvc_available(void)
{
    char cmd[1200], out[4096] = {0};
    snprintf(cmd, sizeof cmd, "%s engine serve --help 2>&1", t_bin());
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    pclose(p);
    return n > 0 && !strstr(out, "not built yet") && strstr(out, "--journal");
}

static int esvc_start(esvc *s, const char *durability)
{
    memset(s, 0, sizeof *s);
    if (t_mkdtemp(s->dir, sizeof s->dir))
        return -1;
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    snprintf(s->journal, sizeof s->journal, "%s/j", s->dir);
    pid_t pid = fork();
    if (pid == 0) {
        t_child_detach(0);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        execl(t_bin(), t_bin(), "engine", "serve", "--journal", s->journal, "--instruments", "1-4",
              "--unix", s->sock, "--tcp", "127.0.0.1:0", "--durability", durability, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    static char buf[1 << 16];
    for (int64_t end = t_now_ms() + 60000; t_now_ms() < end;) {
        t_read_file(s->log, buf, sizeof buf);
        const char *p = strstr(buf, "listening tcp ");
        if (p && strstr(buf, "listening unix")) {
            p = strchr(p + strlen("listening tcp "), ':');
            s->port = p ? atoi(p + 1) : 0;
            return s->port > 0 ? 0 : -1;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "engine serve exited early:\n%s\n", buf);
            s->pid = 0;
            return -1;
        }
        t_sleep_ms(10);
    }
    fprintf(stderr, "engine serve did not start:\n%s\n", buf);
    return -1;
}

static void esvc_cleanup(esvc *s)
{
    if (s->pid) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
    if (!getenv("TF_KEEP_LOGS") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
}

/* SIGTERM, then the "state_hash" of its JSON line and of `engine run` on its journal. */
static void esvc_stop_and_compare(esvc *s, int *cmp_done)
{
    char outp[200], buf[4096], cmd[1024];
    snprintf(outp, sizeof outp, "%s/stdout", s->dir);
    kill(s->pid, SIGTERM);
    CHECK_EQ(t_wait_exit(s->pid, 60000), 0);
    s->pid = 0;
    (void)outp;
    snprintf(cmd, sizeof cmd, "%s engine run %s/commands.ofl --instruments 1-4 --quiet", t_bin(),
             s->journal);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    buf[n] = 0;
    if (p)
        pclose(p);
    CHECK(strstr(buf, "\"state_hash\"") != NULL);
    *cmp_done = 1;
}

static void test_service_url(const char *url, int *next_cid)
{
    tf_orders *a = NULL, *b = NULL;
    tf_orders_opts o = {.size = sizeof o, .timeout_ms = 60000};
    CHECK_RC(tf_orders_connect(&a, url, &o), 0);
    CHECK_RC(tf_orders_connect(&b, url, &o), 0);
    if (!a || !b) {
        tf_orders_close(a);
        tf_orders_close(b);
        return;
    }
    tf_ofl_msg ev[16];
    tf_orders_reply r = {.ev = ev, .cap = 16};
    int cid = *next_cid;
    /* A rests a sell; B buys through it: B's reply has the Trade, A gets it unsolicited. */
    CHECK_RC(tf_orders_new_limit(a, 11, (uint64_t)cid, 1, TF_OFL_SELL, 1000, 3, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    uint64_t maker = ev[0].accepted.order_id, seq1 = r.command_seq;
    CHECK(seq1 > 0);
    CHECK_EQ(ev[0].accepted.command_seq, seq1);
    CHECK_RC(tf_orders_new_limit(b, 12, (uint64_t)cid, 1, TF_OFL_BUY, 1000, 2, &r), 2);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    CHECK_EQ(ev[1].kind, TF_OFL_TRADE);
    CHECK_EQ(ev[1].trade.maker_order_id, maker);
    CHECK_EQ(ev[1].trade.quantity.lo, 2);
    CHECK(r.command_seq > seq1);
    tf_ofl_msg fills[4];
    CHECK_EQ(tf_orders_poll_fills(a, fills, 4, 60000), 1);
    CHECK_EQ(fills[0].trade.maker_order_id, maker);
    CHECK_EQ(fills[0].trade.price, 1000);
    /* replace the rest of the maker, then cancel it by client id */
    CHECK_RC(tf_orders_replace(a, maker, (uint64_t)cid + 1, 1001, 1, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_REPLACED);
    CHECK_RC(tf_orders_cancel_client(a, 11, (uint64_t)cid + 1, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_CANCELED);
    CHECK_EQ(ev[0].canceled.order_id, maker);
    /* rejects are events */
    CHECK_RC(tf_orders_cancel(a, maker, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_REJECTED);
    CHECK_EQ(ev[0].rejected.reason, TF_OFL_ORDER_NOT_FOUND);
    CHECK_RC(tf_orders_new_limit(a, 11, 1, 999, TF_OFL_BUY, 1000, 1, &r), 1);
    CHECK_EQ(ev[0].rejected.reason, TF_OFL_UNKNOWN_INSTRUMENT);
    CHECK_RC(tf_orders_new_limit(a, 11, 1, 1, TF_OFL_BUY, 0, 1, &r), 1);
    CHECK_EQ(ev[0].rejected.reason, TF_OFL_INVALID_PRICE);
    /* a market order into an empty side: Accepted, then its remainder Canceled */
    CHECK_RC(tf_orders_new_market(b, 12, (uint64_t)cid + 2, 2, TF_OFL_SELL, 5, &r), 2);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    CHECK_EQ(ev[1].kind, TF_OFL_CANCELED);

    /* pipelined: 10,000 commands (rest then cancel, alternately), seqs ascending */
    enum { N = 10000 };
    static tf_ofl_msg cmds[N], evs[N + 16];
    static uint64_t seqs[N];
    static size_t ends[N];
    for (int k = 0; k < N; k += 2) {
        cmds[k] = limit_cmd(13, 1000000 + (uint64_t)k, TF_OFL_BUY, 10 + k % 7, 1);
        cmds[k + 1] = (tf_ofl_msg){.kind = TF_OFL_CANCEL_BY_CLIENT};
        cmds[k + 1].cancel_by_client.account_id = 13;
        cmds[k + 1].cancel_by_client.client_order_id = 1000000 + (uint64_t)k;
    }
    int64_t total = tf_orders_send_many(b, cmds, N, evs, N + 16, seqs, ends);
    CHECK_EQ(total, N);
    int asc = 1, kinds = 1;
    for (int k = 0; k < N; k++) {
        asc &= k == 0 || seqs[k] > seqs[k - 1];
        kinds &=
            evs[k].kind == (k % 2 ? TF_OFL_CANCELED : TF_OFL_ACCEPTED) && ends[k] == (size_t)k + 1;
    }
    CHECK(asc);
    CHECK(kinds);

    /* tf_orders_send: a resting sell and the buy that crosses it in one send (one round trip):
     * the service applies them in that order, so the second's reply holds the Trade against the
     * first; the maker is this connection, so no unsolicited copy comes back. */
    tf_ofl_msg pair[2] = {limit_cmd(15, (uint64_t)cid, TF_OFL_SELL, 2000, 1),
                          limit_cmd(16, (uint64_t)cid, TF_OFL_BUY, 2000, 1)};
    CHECK_RC(tf_orders_send(b, pair, 2), 2);
    CHECK_RC(tf_orders_recv(b, &r), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_ACCEPTED);
    uint64_t rest = ev[0].accepted.order_id, rest_seq = r.command_seq;
    CHECK_RC(tf_orders_recv(b, &r), 2);
    CHECK_EQ(r.command_seq, rest_seq + 1);
    CHECK_EQ(ev[1].kind, TF_OFL_TRADE);
    CHECK_EQ(ev[1].trade.maker_order_id, rest);
    CHECK_EQ(tf_orders_poll_fills(b, fills, 4, 0), 0);
    /* 2,000 commands (rest, cancel by client id) through a window of 8: each send takes what
     * the window allows, each reply is its command's */
    tf_orders *w = NULL;
    tf_orders_opts wo = {.size = sizeof wo, .timeout_ms = 60000, .max_inflight = 8};
    CHECK_RC(tf_orders_connect(&w, url, &wo), 0);
    if (w) {
        size_t sent = 0, got = 0;
        int took_all = 1, in_order = 1, capped = 1;
        uint64_t last = 0;
        while (got < 2000) {
            if (sent < 2000) {
                int k = tf_orders_send(w, cmds + sent, 2000 - sent);
                took_all &= k >= 0;
                sent += k > 0 ? (size_t)k : 0;
                capped &= tf_orders_unanswered(w) <= 8;
            }
            if (tf_orders_recv(w, &r) < 1)
                break;
            in_order &=
                r.command_seq > last && ev[0].kind == (got % 2 ? TF_OFL_CANCELED : TF_OFL_ACCEPTED);
            last = r.command_seq;
            got++;
        }
        CHECK_EQ(got, 2000);
        CHECK(took_all && in_order && capped);
        CHECK_EQ(tf_orders_unanswered(w), 0);
        tf_orders_close(w);
    }
    *next_cid = cid + 10;
    tf_orders_close(a);
    tf_orders_close(b);
}

/* An undecodable command (side byte 2) on a raw socket: Rejected(Other, event_seq 0) and
 * Heartbeat(0), and the connection still serves. */
static void test_service_undecodable(const char *sock)
{
    int fd = t_connect_unix(sock);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    uint8_t fr[TF_OFL_MAX_FRAME], in[256];
    tf_ofl_msg m = limit_cmd(14, 1, TF_OFL_BUY, 100, 1);
    int n = tf_ofl_frame_encode(fr, sizeof fr, &m);
    fr[11 + 32] = 2;
    CHECK(t_send_all(fd, fr, (size_t)n) == 0);
    CHECK(t_recv_exact(fd, in, 11 + 33 + 11, 60000) == 0);
    tf_ofl_msg e, hb;
    CHECK_EQ(tf_ofl_frame_decode(in, 55, &e), 44);
    CHECK_EQ(e.kind, TF_OFL_REJECTED);
    CHECK_EQ(e.rejected.reason, TF_OFL_REASON_OTHER);
    CHECK_EQ(e.rejected.event_seq, 0);
    CHECK_EQ(tf_ofl_frame_decode(in + 44, 11, &hb), 11);
    CHECK_EQ(hb.kind, TF_OFL_HEARTBEAT);
    CHECK_EQ(hb.journal_seq, 0);
    fr[11 + 32] = 0; /* the same command, decodable: served */
    CHECK(t_send_all(fd, fr, (size_t)n) == 0);
    CHECK(t_recv_exact(fd, in, 11 + 48, 60000) == 0);
    CHECK_EQ(tf_ofl_frame_decode(in, 59, &e), 59);
    CHECK_EQ(e.kind, TF_OFL_ACCEPTED);
    close(fd);
}

static void test_service(void)
{
    if (!esvc_available()) {
        printf("SKIP service part: `%s engine serve` is not built yet\n", t_bin());
        return;
    }
    esvc s;
    int started = esvc_start(&s, "group") == 0;
    CHECK(started);
    if (started) {
        char url[256];
        int cid = 1;
        snprintf(url, sizeof url, "unix:%s", s.sock);
        test_service_url(url, &cid);
        snprintf(url, sizeof url, "tcp:127.0.0.1:%d", s.port);
        test_service_url(url, &cid);
        test_service_undecodable(s.sock);
        int done = 0;
        esvc_stop_and_compare(&s, &done);
        CHECK(done);
    }
    esvc_cleanup(&s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    CHECK(load_vectors() > 20);
    test_vectors();
    char dir[64];
    CHECK(t_mkdtemp(dir, sizeof dir) == 0);
    test_streams(dir);
    test_api_errors(dir);
    test_opts_size_rule(dir);
    test_split_flow(dir);
    test_no_alloc(dir);
    rmdir(dir);
    test_service();
    return tf_test_report();
}
