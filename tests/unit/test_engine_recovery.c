/* `tollfree engine serve` start-up and durability against a damaged or mismatched journal
 * directory (docs/engine-service.md, "Start and recovery" and "Durability"). Real processes,
 * real files, real sockets:
 *
 *   - damage in the middle of commands.ofl (a flipped byte, a missing record) refuses the start
 *     (exit 1, naming the record, its offset, the reason, how many records follow) and leaves
 *     the file byte for byte as it was; --repair-journal cuts it and says what it drops;
 *     a torn tail (partial last record, bad last record, zeros) is still cut by itself;
 *     `engine run` reports the same damage;
 *   - a snapshot is used only with the journal it was taken from: a replaced journal (another
 *     session, or the same session with other commands), a shorter one, or an old-format
 *     snapshot make the start replay the whole journal, and the state equals `engine run`;
 *   - --durability every: a lone client's reply is released once its own command is durable,
 *     not after a busy client's whole pipeline.
 * Waits have one generous deadline (a guard against hangs, never a speed check). */
#include <dirent.h>

#include "engine_service/engine_service.h"
#include "harness.h"
#include "test_server_util.h"
#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"
#include "venue/venue.h"

#define T_MAX_ORDERS "20000"

typedef struct rsrv {
    pid_t pid;
    char dir[64];
    char jdir[128];
    char log[128];
    char out[128];
    char sock[128];
    char cmds[160]; /* jdir/commands.ofl */
    char evs[160];  /* jdir/events.ofl */
    char snap[160]; /* jdir/snapshot.tfs */
} rsrv;

static int r_init(rsrv *s)
{
    memset(s, 0, sizeof *s);
    if (t_mkdtemp(s->dir, sizeof s->dir))
        return -1;
    snprintf(s->jdir, sizeof s->jdir, "%s/j", s->dir);
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    snprintf(s->out, sizeof s->out, "%s/out", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/e.sock", s->dir);
    snprintf(s->cmds, sizeof s->cmds, "%s/commands.ofl", s->jdir);
    snprintf(s->evs, sizeof s->evs, "%s/events.ofl", s->jdir);
    snprintf(s->snap, sizeof s->snap, "%s/snapshot.tfs", s->jdir);
    return mkdir(s->jdir, 0755);
}

/* Starts the service on the test's journal with extra args. 0 once it listens; its exit status
 * (> 0) when it exits first; -1 past the hang deadline. */
static int r_start(rsrv *s, const char *const *extra)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = t_bin();
    argv[n++] = "engine";
    argv[n++] = "serve";
    argv[n++] = "--journal";
    argv[n++] = s->jdir;
    argv[n++] = "--unix";
    argv[n++] = s->sock;
    argv[n++] = "--max-orders";
    argv[n++] = T_MAX_ORDERS;
    /* Snapshots only where a test asks for them (extra comes after and overrides): with the
     * default period every clean stop would write one, over the snapshot a test set up. */
    argv[n++] = "--snapshot-every";
    argv[n++] = "0";
    for (int i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    unlink(s->log); /* the last run's lines must not count */
    s->pid = t_spawn(argv, s->log, s->out);
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    static char buf[1 << 16];
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; t_now_ms() < end;) {
        t_read_file(s->log, buf, sizeof buf);
        if (strstr(buf, "listening unix"))
            return 0;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        t_sleep_ms(5);
    }
    tf_test_deadline_note("engine service start", T_DEADLINE_MS);
    return -1;
}

static int r_stop(rsrv *s)
{
    if (!s->pid)
        return -1;
    kill(s->pid, SIGTERM);
    int rc = t_wait_exit(s->pid, T_DEADLINE_MS);
    s->pid = 0;
    return rc;
}

static void r_cleanup(rsrv *s)
{
    if (s->pid) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    if (getenv("TF_KEEP_LOGS"))
        fprintf(stderr, "engine service files kept: %s\n", s->dir);
    else
        t_rm_rf(s->dir);
}

static int log_has(const rsrv *s, const char *what)
{
    static char buf[1 << 16];
    t_read_file(s->log, buf, sizeof buf);
    if (strstr(buf, what))
        return 1;
    fprintf(stderr, "log of the service lacks \"%s\":\n%s\n", what, buf);
    return 0;
}

/* ---- files ---- */

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

static void put_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f)
        fclose(f);
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

static int copy_file(const char *from, const char *to)
{
    uint8_t *p;
    size_t n = file_bytes(from, &p);
    if (!p)
        return -1;
    put_file(to, p, n);
    free(p);
    return 0;
}

/* A command journal of n generated commands (command_seq 1..n) of session `session`. */
static void gen_journal(const char *path, uint64_t session, uint64_t seed, uint64_t n)
{
    unlink(path);
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE, .session_id = session};
    tf_journal *j;
    CHECK_RC(tf_journal_open(path, &jo, &j, NULL), 0);
    tf_engine_flow_config fc = {.size = sizeof fc, .seed = seed, .target_orders = 300};
    tf_engine_flow *f;
    CHECK_RC(tf_engine_flow_open(&fc, &f), 0);
    tf_ofl_msg m;
    for (uint64_t i = 0; i < n; i++) {
        tf_engine_flow_next(f, &m);
        if (tf_journal_append(j, &m, NULL))
            break;
    }
    tf_engine_flow_close(f);
    CHECK_RC(tf_journal_close(j), 0);
}

/* Byte offset and length of record `k` of the journal image. */
static int record_at(const uint8_t *img, size_t n, uint64_t k, size_t *off, size_t *len)
{
    tf_journal_reader r;
    if (tf_journal_reader_init(&r, img, n))
        return -1;
    tf_ofl_msg m;
    for (uint64_t i = 0; i <= k; i++) {
        *off = r.pos;
        if (tf_journal_reader_next(&r, &m) != 1)
            return -1;
    }
    *len = r.pos - *off;
    return 0;
}

static uint64_t journal_records(const char *path)
{
    tf_journal_map m;
    if (tf_journal_map_open(path, &m))
        return 0;
    tf_journal_scan_result sr;
    tf_journal_scan(m.data, m.len, &sr);
    tf_journal_map_close(&m);
    return sr.records;
}

/* ---- offline replay ---- */

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

/* `tollfree engine run JOURNAL --quiet --max-orders ... [--events EV]`: stdout into buf, stderr
 * into err (may be NULL). Returns the exit status. */
static int run_offline(const char *journal, const char *events, char *buf, size_t cap, char *err,
                       size_t ecap)
{
    char outp[512], errp[512];
    snprintf(outp, sizeof outp, "%.400s.offline.out", journal);
    snprintf(errp, sizeof errp, "%.400s.offline.err", journal);
    const char *argv[] = {t_bin(),      "engine",
                          "run",        journal,
                          "--quiet",    "--max-orders",
                          T_MAX_ORDERS, events ? "--events" : NULL,
                          events,       NULL};
    pid_t pid = t_spawn(argv, errp, outp);
    int rc = pid > 0 ? t_wait_exit(pid, T_DEADLINE_MS) : -1;
    t_read_file(outp, buf, cap);
    if (err)
        t_read_file(errp, err, ecap);
    unlink(outp);
    unlink(errp);
    return rc;
}

/* The running service's start line (last_command_seq, state_hash) against `engine run` of its
 * commands.ofl, and its events.ofl against the offline --events, byte for byte. */
static void check_offline_running(rsrv *s)
{
    static char log[1 << 16];
    char offline[8192], h1[32] = "", h2[32] = "", c1[32] = "", c2[32] = "", oe[256];
    t_read_file(s->log, log, sizeof log);
    const char *p = strstr(log, "last_command_seq ");
    const char *h = strstr(log, "state_hash 0x");
    CHECK(p && h);
    if (p && h) {
        snprintf(c1, sizeof c1, "%llu", strtoull(p + 17, NULL, 10));
        snprintf(h1, sizeof h1, "%.18s", h + 11);
    }
    snprintf(oe, sizeof oe, "%s/offline_events.ofl", s->dir);
    CHECK_EQ(run_offline(s->cmds, oe, offline, sizeof offline, NULL, 0), 0);
    CHECK(json_field(offline, "state_hash", h2, sizeof h2) == 0);
    CHECK(json_field(offline, "last_command_seq", c2, sizeof c2) == 0);
    CHECK(h1[0] && !strcmp(h1, h2));
    CHECK(c1[0] && !strcmp(c1, c2));
    if (strcmp(h1, h2) || strcmp(c1, c2))
        fprintf(stderr, "service: %s\noffline: %s\n", log, offline);
    CHECK(same_file(s->evs, oe));
    unlink(oe);
}

/* ---- a pipelining client ---- */

/* n resting NewLimits (account `acct`, client order ids from coid) in one buffer. */
static size_t build_cmds(uint8_t *buf, int n, uint64_t acct, uint64_t coid)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
        m.new_limit = (tf_ofl_new_limit){.account_id = acct,
                                         .client_order_id = coid + (uint64_t)i,
                                         .instrument_id = 1 + (uint64_t)(i % 4),
                                         .price = 10 + i % 7,
                                         .quantity = {1, 0},
                                         .side = TF_OFL_BUY};
        int k = tf_ofl_frame_encode(buf + len, TF_OFL_MAX_FRAME, &m);
        if (k <= 0)
            return 0;
        len += (size_t)k;
    }
    return len;
}

/* Reads frames until n Heartbeats; the last one's command_seq into *last. 0 or an error. */
static int read_heartbeats(int fd, int n, uint64_t *last)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    for (int got = 0; got < n;) {
        int rc = t_recv_exact(fd, f, 2, T_DEADLINE_MS);
        size_t flen = (size_t)f[0] | (size_t)f[1] << 8;
        if (!rc && (flen < TF_OFL_FRAME_LEN_BASE || 2 + flen > sizeof f))
            rc = TF_E_PROTOCOL;
        if (!rc)
            rc = t_recv_exact(fd, f + 2, flen, T_DEADLINE_MS);
        if (rc)
            return rc;
        tf_ofl_msg m;
        if (tf_ofl_frame_decode(f, 2 + flen, &m) < 0)
            return TF_E_PROTOCOL;
        if (m.kind == TF_OFL_HEARTBEAT) {
            got++;
            *last = m.journal_seq;
        }
    }
    return 0;
}

/* n commands on a fresh connection, pipelined; every reply read. */
static void send_cmds(rsrv *s, int n, uint64_t coid)
{
    int fd = t_connect_unix(s->sock);
    CHECK(fd >= 0);
    uint8_t *buf = malloc((size_t)n * TF_OFL_MAX_FRAME);
    size_t len = build_cmds(buf, n, 3, coid);
    uint64_t last = 0;
    CHECK(len > 0 && t_send_all(fd, buf, len) == 0);
    CHECK_RC(read_heartbeats(fd, n, &last), 0);
    free(buf);
    close(fd);
}

/* ================================================================ R1: damage in commands.ofl */

static void test_mid_file_damage(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    gen_journal(s.cmds, 0x5e55, 1, 30000);
    uint8_t *img;
    size_t n = file_bytes(s.cmds, &img), off = 0, len = 0;
    CHECK_RC(record_at(img, n, 1500, &off, &len), 0);
    img[off + len / 2] ^= 0x01; /* one flipped bit in record 1,500's payload */
    put_file(s.cmds, img, n);
    struct stat before, after;
    CHECK(stat(s.cmds, &before) == 0);

    /* Refused: exit 1, the damage named, nothing written. */
    CHECK_EQ(r_start(&s, NULL), 1);
    char want[256];
    snprintf(want, sizeof want, "commands.ofl: record 1500 at offset %zu: %s", off,
             tf_strerror(TF_E_OFL_CRC_MISMATCH));
    CHECK(log_has(&s, want));
    CHECK(log_has(&s, "28499 records with a good CRC follow it"));
    CHECK(log_has(&s, "--repair-journal"));
    CHECK(log_has(&s, "drops 28500 acknowledged commands"));
    uint8_t *now;
    size_t n2 = file_bytes(s.cmds, &now);
    CHECK(n2 == n && now && !memcmp(now, img, n));
    free(now);
    CHECK(stat(s.cmds, &after) == 0);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
          after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    CHECK(access(s.evs, F_OK) != 0); /* nothing derived was written either */

    /* A second start is refused the same way (nothing was "repaired" by the first). */
    CHECK_EQ(r_start(&s, NULL), 1);

    /* --repair-journal: cut at the damage, the drop said, the state that of the prefix. */
    const char *rep[] = {"--repair-journal", NULL};
    CHECK_EQ(r_start(&s, rep), 0);
    CHECK(log_has(&s, "drops 28500 records"));
    CHECK_EQ(journal_records(s.cmds), 1500);
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);
    /* Repaired: later starts are ordinary. */
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK_EQ(r_stop(&s), 0);
    free(img);
    r_cleanup(&s);
}

/* A record missing from the middle (a journal_seq gap with records after it): refused too. */
static void test_seq_gap(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    gen_journal(s.cmds, 0x5e56, 2, 3000);
    uint8_t *img;
    size_t n = file_bytes(s.cmds, &img), off = 0, len = 0;
    CHECK_RC(record_at(img, n, 100, &off, &len), 0);
    memmove(img + off, img + off + len, n - off - len);
    put_file(s.cmds, img, n - len);
    CHECK_EQ(r_start(&s, NULL), 1);
    char want[256];
    snprintf(want, sizeof want, "record 100 at offset %zu: %s", off, tf_strerror(TF_E_OFL_SEQ_GAP));
    CHECK(log_has(&s, want));
    CHECK(log_has(&s, "2898 records with a good CRC follow it"));
    CHECK_EQ(journal_records(s.cmds), 100);
    uint8_t *now;
    size_t n2 = file_bytes(s.cmds, &now);
    CHECK(n2 == n - len && now && !memcmp(now, img, n2));
    free(now);
    free(img);
    r_cleanup(&s);
}

/* tfes_journal_check on each kind of damage: which are torn tails. */
static void test_torn_or_not(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    gen_journal(s.cmds, 0x5e57, 3, 400);
    uint8_t *img;
    size_t n = file_bytes(s.cmds, &img), off = 0, len = 0, last = 0, llen = 0;
    CHECK_RC(record_at(img, n, 200, &off, &len), 0);
    CHECK_RC(record_at(img, n, 399, &last, &llen), 0);
    CHECK_EQ(last + llen, n);
    uint8_t *w = malloc(n + 8192);
    tfes_damage d;

    CHECK_RC(tfes_journal_check(s.cmds, &d), 0); /* whole */
    CHECK_EQ(d.reason, 0);

    struct {
        const char *what;
        size_t at;    /* byte changed (SIZE_MAX: none) */
        uint8_t xor_; /* its change */
        size_t cut;   /* bytes kept (0: all) */
        size_t zeros; /* zero bytes appended */
        int torn;     /* expected */
        uint64_t rec; /* the damaged record */
        uint64_t fol; /* records after it */
    } cases[] = {
        {"partial last record", SIZE_MAX, 0, n - 7, 0, 1, 399, 0},
        {"bad CRC, last record", n - 1, 0x40, 0, 0, 1, 399, 0},
        {"bad length field, last record", last, 0xff, 0, 0, 1, 399, 0},
        {"zeros after the last record", SIZE_MAX, 0, 0, 8192, 1, 400, 0},
        {"zeroed last record", SIZE_MAX, 0, last, llen, 1, 399, 0},
        {"bad CRC mid-file", off + len - 1, 0x40, 0, 0, 0, 200, 199},
        {"bad length field mid-file", off, 0xff, 0, 0, 0, 200, 199},
        {"bad CRC, then zeros", n - 1, 0x40, 0, 4096, 1, 399, 0},
        {"bad CRC mid-file, zeros after the next", off + len - 1, 0x40, 0, 4096, 0, 200, 199},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(w, img, n);
        size_t m = cases[i].cut ? cases[i].cut : n;
        if (cases[i].at != SIZE_MAX)
            w[cases[i].at] ^= cases[i].xor_;
        memset(w + m, 0, cases[i].zeros);
        m += cases[i].zeros;
        put_file(s.cmds, w, m);
        CHECK_RC(tfes_journal_check(s.cmds, &d), 0);
        CHECK(d.reason != 0);
        if (d.torn != cases[i].torn || d.record != cases[i].rec || d.following != cases[i].fol)
            fprintf(stderr, "%s: torn %d record %llu following %llu\n", cases[i].what, d.torn,
                    (unsigned long long)d.record, (unsigned long long)d.following);
        CHECK_EQ(d.torn, cases[i].torn);
        CHECK_EQ(d.record, cases[i].rec);
        CHECK_EQ(d.following, cases[i].fol);
    }

    /* A torn tail is cut by a start without any option: the zeros after the last record. */
    memcpy(w, img, n);
    memset(w + n, 0, 8192);
    put_file(s.cmds, w, n + 8192);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "damaged tail cut"));
    CHECK(log_has(&s, "400 commands kept"));
    CHECK_EQ(r_stop(&s), 0);
    free(w);
    free(img);
    r_cleanup(&s);
}

/* `engine run` on the same damage: a torn tail is read to the cut (exit 0, reported); damage
 * with records after it is exit 1, named on stderr. */
static void test_engine_run_damage(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    gen_journal(s.cmds, 0x5e58, 4, 2000);
    uint8_t *img;
    size_t n = file_bytes(s.cmds, &img), off = 0, len = 0;
    CHECK_RC(record_at(img, n, 700, &off, &len), 0);
    char out[8192], err[8192];

    put_file(s.cmds, img, n - 5); /* torn */
    CHECK_EQ(run_offline(s.cmds, NULL, out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "\"whole\":false") != NULL);
    CHECK(strstr(err, "torn tail") != NULL);

    img[off + 20] ^= 0x10; /* mid-file */
    put_file(s.cmds, img, n);
    CHECK_EQ(run_offline(s.cmds, NULL, out, sizeof out, err, sizeof err), 1);
    char want[128];
    snprintf(want, sizeof want, "record 700 at offset %zu", off);
    CHECK(strstr(err, want) != NULL);
    CHECK(strstr(err, "1299 records with a good CRC follow it") != NULL);
    if (!strstr(err, want))
        fprintf(stderr, "engine run stderr: %s\nstdout: %s\n", err, out);
    /* `engine snapshot` of it writes no snapshot. */
    const char *argv[] = {t_bin(), "engine", "snapshot", s.cmds, "--out", s.snap, NULL};
    pid_t pid = t_spawn(argv, s.log, NULL);
    CHECK_EQ(t_wait_exit(pid, T_DEADLINE_MS), 1);
    CHECK(log_has(&s, want));
    CHECK(access(s.snap, F_OK) != 0);
    free(img);
    r_cleanup(&s);
}

/* ================================================================ D2: snapshots and journals */

/* A journal dir whose snapshot.tfs was taken by the service at command 150+ of journal
 * session 0x5a: 120 generated commands, then 60 live ones with --snapshot-every 50. */
static void make_snapshot_dir(rsrv *s)
{
    gen_journal(s->cmds, 0x5a, 11, 120);
    const char *extra[] = {"--snapshot-every", "50", NULL};
    CHECK_EQ(r_start(s, extra), 0);
    send_cmds(s, 60, 1000000);
    CHECK_EQ(r_stop(s), 0);
    struct stat st;
    CHECK(stat(s->snap, &st) == 0);
    /* The service's own snapshot is used by the next start. */
    CHECK_EQ(r_start(s, NULL), 0);
    CHECK(log_has(s, "after the snapshot"));
    check_offline_running(s);
    CHECK_EQ(r_stop(s), 0);
}

/* Puts `journal` in place of commands.ofl with its own events.ofl (a start without the
 * snapshot builds them), then the snapshot back: the start that matters. */
static void swap_journal(rsrv *s, const char *journal)
{
    char keep[256];
    snprintf(keep, sizeof keep, "%s/snapshot.keep", s->dir);
    CHECK(rename(s->snap, keep) == 0);
    unlink(s->evs);
    CHECK(copy_file(journal, s->cmds) == 0);
    CHECK_EQ(r_start(s, NULL), 0);
    CHECK_EQ(r_stop(s), 0);
    CHECK(rename(keep, s->snap) == 0);
}

static void test_stale_snapshot(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    make_snapshot_dir(&s);
    char other[256], orig[256];
    snprintf(other, sizeof other, "%s/other.ofl", s.dir);
    snprintf(orig, sizeof orig, "%s/orig.ofl", s.dir);
    CHECK(copy_file(s.cmds, orig) == 0);

    /* Another journal (another session, longer than the snapshot): not used. */
    gen_journal(other, 0x77, 12, 400);
    swap_journal(&s, other);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "snapshot.tfs: not used (it was taken from another journal"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);

    /* The same session, other commands: the record the snapshot covers differs. */
    gen_journal(other, 0x5a, 13, 400);
    swap_journal(&s, other);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "the command record it covers differs"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);

    /* The snapshot's own journal, cut short before the command it covers (cleanly, at a record
     * boundary): not used. */
    uint8_t *img;
    size_t n = file_bytes(orig, &img), off = 0, len = 0;
    CHECK_RC(record_at(img, n, 99, &off, &len), 0);
    put_file(other, img, off + len);
    free(img);
    swap_journal(&s, other);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "commands.ofl is shorter than the commands it covers"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);

    /* Back to its own journal: used again. */
    swap_journal(&s, orig);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "after the snapshot"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);
    r_cleanup(&s);
}

/* A snapshot in the engine's plain format (no binding to a journal, as written before): not
 * used, said on stderr; the whole journal is replayed. */
static void test_old_format_snapshot(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    gen_journal(s.cmds, 0x5b, 21, 300);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK_EQ(r_stop(&s), 0);
    const char *argv[] = {t_bin(), "engine",       "snapshot",   s.cmds, "--out",
                          s.snap,  "--max-orders", T_MAX_ORDERS, NULL};
    pid_t pid = t_spawn(argv, s.log, NULL);
    CHECK_EQ(t_wait_exit(pid, T_DEADLINE_MS), 0);
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "snapshot.tfs: unusable (no binding to commands.ofl"));
    CHECK(log_has(&s, "(300 replayed)"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);
    r_cleanup(&s);
}

/* Resting buys command_seq from..to-1 (prices below any sell: nothing trades) appended to the
 * journal at path (session 0x6b); the first one a session's Keyed record when `keyed`. */
static void append_buys(const char *path, uint64_t from, uint64_t to, int keyed)
{
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE, .session_id = 0x6b};
    tf_journal *j;
    CHECK_RC(tf_journal_open(path, &jo, &j, NULL), 0);
    for (uint64_t i = from; i < to; i++) {
        tfv_msg m = {.kind = TF_OFL_NEW_LIMIT, .journal_seq = i - 1};
        m.ofl.kind = TF_OFL_NEW_LIMIT;
        m.ofl.new_limit = (tf_ofl_new_limit){.command_seq = i,
                                             .account_id = 1,
                                             .client_order_id = i,
                                             .instrument_id = 1,
                                             .price = 50 + (int64_t)i,
                                             .quantity = {1, 0},
                                             .side = TF_OFL_BUY};
        if (keyed && i == from) {
            m.kind = TFV_KEYED;
            m.session = 7;
            m.client_seq = 1;
        }
        CHECK_RC(tfv_journal_append(j, &m, NULL), 0);
    }
    CHECK_RC(tf_journal_close(j), 0);
}

/* A start from a snapshot with a tail after it says whether the commands the snapshot covers
 * hold a Keyed record: only then does it look for the owners of the orders live at the snapshot
 * (in the snapshot's owners block, else by a walk of both journals: for a journal with no
 * session in it there is nothing to find). */
static void test_keyed_covered(void)
{
    for (int keyed = 0; keyed < 2; keyed++) {
        rsrv s;
        CHECK_RC(r_init(&s), 0);
        append_buys(s.cmds, 1, 21, keyed);
        const char *extra[] = {"--snapshot-every", "1000", NULL};
        CHECK_EQ(r_start(&s, extra), 0); /* a clean stop writes the snapshot: 20 commands */
        CHECK_EQ(r_stop(&s), 0);
        struct stat st;
        CHECK(stat(s.snap, &st) == 0);
        append_buys(s.cmds, 21, 26, 0); /* a tail of 5 after it */
        tfes_config cfg = {.dir = s.jdir, .max_orders = 20000};
        tfes_recovered out;
        CHECK_RC(tfes_recover(&cfg, NULL, &out), 0);
        CHECK_EQ(out.from_snapshot, 1);
        CHECK_EQ(out.snapshot_records, 20);
        CHECK_EQ(out.replayed, 5);
        CHECK_EQ(out.keyed_covered, (uint64_t)keyed);
        tf_engine_counters c;
        tf_engine_get_counters(out.engine, &c);
        CHECK_EQ(c.resting_orders, 25);
        tfes_recovered_fini(&out);
        /* The service's start from it: the same state as `engine run`. */
        CHECK_EQ(r_start(&s, NULL), 0);
        CHECK(log_has(&s, "25 commands (5 replayed after the snapshot)"));
        check_offline_running(&s);
        CHECK_EQ(r_stop(&s), 0);
        r_cleanup(&s);
    }
}

/* ---- the owners of the orders live at a snapshot ---- */

#define SESS_A 0xa11ceull
#define SESS_B 0xb0bull

/* Record seq (journal_seq seq - 1): a resting buy of `account` (client_order_id seq, prices below
 * any sell), Keyed by `session` unless it is 0. */
static void put_order(tf_journal *j, uint64_t seq, uint64_t session, uint64_t account)
{
    tfv_msg m = {.kind = session ? TFV_KEYED : TF_OFL_NEW_LIMIT, .journal_seq = seq - 1};
    m.ofl.kind = TF_OFL_NEW_LIMIT;
    m.ofl.new_limit = (tf_ofl_new_limit){.command_seq = seq,
                                         .account_id = account,
                                         .client_order_id = seq,
                                         .instrument_id = 1,
                                         .price = 50 + (int64_t)seq,
                                         .quantity = {1, 0},
                                         .side = TF_OFL_BUY};
    m.session = session;
    m.client_seq = session ? seq : 0;
    CHECK_RC(tfv_journal_append(j, &m, NULL), 0);
}

/* Record seq: the CancelOnDisconnect of a session (every live order it placed is canceled). */
static void put_cod(tf_journal *j, uint64_t seq, uint64_t session)
{
    tfv_msg m = {.kind = TFV_CANCEL_ON_DISCONNECT,
                 .journal_seq = seq - 1,
                 .risk_len = TFV_CANCEL_ON_DISCONNECT_LEN};
    CHECK_EQ(tfv_cod_encode(seq, session, m.risk), TFV_CANCEL_ON_DISCONNECT_LEN);
    CHECK_RC(tfv_journal_append(j, &m, NULL), 0);
}

/* Whose a live order is, as the venue answers a cancel of it: bit 0 set when session A's
 * CancelByOrder is refused as not its own, bit 1 for session B's. */
static int refused_to(tfv_venue *v, uint64_t order_id)
{
    uint64_t acc = 1;
    tfv_session sa = {.id = SESS_A, .accounts = &acc, .n_accounts = 1};
    tfv_session sb = {.id = SESS_B, .accounts = &acc, .n_accounts = 1};
    tf_ofl_msg c = {.kind = TF_OFL_CANCEL_BY_ORDER};
    c.cancel_by_order.order_id = order_id;
    tfv_msg ra = {0}, rb = {0};
    tfv_resend rs;
    CHECK_EQ(tfv_take(v, &sa, &c, 0, &ra, &rs), TFV_NEW);
    CHECK_EQ(tfv_take(v, &sb, &c, 0, &rb, &rs), TFV_NEW);
    int a = (ra.flags & TFV_KEYED_NOT_OWNER) != 0, b = (rb.flags & TFV_KEYED_NOT_OWNER) != 0;
    return a | b << 1;
}

static void st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The owners file beside the snapshot (snapshot.tfs.owners: "TFSO", the snapshot's binding, n,
 * n x (order_id, session), CRC32C) made into: 2, one whose first owner names an order that is
 * not live (a good CRC); 3, one with a flipped byte; 4, one bound to another snapshot (a good
 * CRC). */
static void edit_owners(uint8_t *img, size_t n, int how)
{
    CHECK(n >= 52 + 16 && !memcmp(img, "TFSO\1", 5));
    if (n < 52 + 16)
        return;
    if (how == 2)
        img[48] ^= 0x40; /* order ids here are small: this one is not live */
    else if (how == 3)
        img[56] ^= 1;
    else if (how == 4)
        img[16] ^= 1; /* the journal_seq of the record the snapshot covers */
    if (how == 2 || how == 4)
        st32(img + n - 4, tf_crc32c(0, img, n - 4));
}

/* A start from a snapshot knows the owner of every order live at it before the records after it
 * are applied: a CancelOnDisconnect in the tail cancels the orders its session placed before the
 * snapshot (it used to cancel none: the owners were found only after the tail), and the owners
 * equal those of a replay of the whole journal (a session's cancel of its own order placed before
 * the snapshot is taken, another session's is refused; an order of a plain command is nobody's).
 * The same from the owners file the service writes beside the snapshot, from a walk of the
 * journals when that file is missing, damaged, bound to another snapshot (a kill -9 between the
 * two writes) or names an order the snapshot does not hold, and from a whole replay. */
static void test_owners_after_snapshot(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE, .session_id = 0x6c};
    tf_journal *j;
    CHECK_RC(tf_journal_open(s.cmds, &jo, &j, NULL), 0);
    put_order(j, 1, SESS_A, 1);
    put_order(j, 2, SESS_B, 2);
    put_order(j, 3, 0, 3);
    for (uint64_t seq = 4; seq <= 10; seq++)
        put_order(j, seq, seq & 1 ? SESS_B : SESS_A, 1);
    CHECK_RC(tf_journal_close(j), 0);
    const char *extra[] = {"--snapshot-every", "1000", NULL};
    CHECK_EQ(r_start(&s, extra), 0); /* a clean stop writes the snapshot: 10 commands */
    CHECK_EQ(r_stop(&s), 0);
    CHECK_RC(tf_journal_open(s.cmds, &jo, &j, NULL), 0);
    put_order(j, 11, SESS_B, 2);
    put_cod(j, 12, SESS_A); /* A placed 1, 4, 6, 8, 10: all live at the snapshot */
    CHECK_RC(tf_journal_close(j), 0);
    char owners[200];
    snprintf(owners, sizeof owners, "%s.owners", s.snap);
    uint8_t *orig, *snap_img;
    size_t orig_n = file_bytes(owners, &orig), snap_n = file_bytes(s.snap, &snap_img);

    tfes_config cfg = {.dir = s.jdir, .max_orders = 20000};
    static const struct {
        uint64_t account, seq;
        int refused;
    } live[] = {{2, 2, 1}, {3, 3, 3}, {1, 5, 1}, {1, 9, 1}, {2, 11, 1}};
    enum { LIVE = sizeof live / sizeof *live };
    uint64_t full_hash = 0;
    /* how: 0 the service's snapshot and owners, 1 no owners file, 2-4 edit_owners (the owners
     * are looked for in the journals), 5 no snapshot (the whole journal) */
    for (int how = 5; how >= 0; how--) {
        uint8_t *img = malloc(orig_n);
        size_t n = orig_n;
        memcpy(img, orig, n);
        edit_owners(img, n, how);
        unlink(owners);
        unlink(s.snap);
        if (how < 5)
            put_file(s.snap, snap_img, snap_n);
        if (how != 1 && how < 5)
            put_file(owners, img, n);
        free(img);
        tfes_recovered r;
        CHECK_RC(tfes_recover(&cfg, NULL, &r), 0);
        CHECK_EQ(r.from_snapshot, how < 5);
        CHECK_EQ(r.snapshot_records, how < 5 ? 10 : 0);
        tf_engine_counters c;
        tf_engine_get_counters(r.engine, &c);
        CHECK_EQ(c.resting_orders, 6); /* 2, 5, 7, 9, 11 (B) and 3 (nobody) */
        if (how == 5)
            full_hash = tf_engine_state_hash(r.engine);
        CHECK_EQ(tf_engine_state_hash(r.engine), full_hash);
        for (int i = 0; i < LIVE; i++) {
            tf_engine_order o;
            CHECK_EQ(tf_engine_find_client(r.engine, live[i].account, live[i].seq, &o), 1);
            CHECK_EQ(refused_to(r.venue, o.order_id), live[i].refused);
        }
        /* The sessions' last client_seq and resends (the Keyed records' client_seq is seq). */
        CHECK_EQ(tfv_last_client_seq(r.venue, SESS_A), 10);
        CHECK_EQ(tfv_last_client_seq(r.venue, SESS_B), 11);
        tfv_resend rs = {0};
        tfv_msg rec = {0};
        uint64_t acc = 1;
        tfv_session sa = {.id = SESS_A, .accounts = &acc, .n_accounts = 1};
        tf_ofl_msg cmd = {.kind = TF_OFL_CANCEL_BY_ORDER};
        CHECK_EQ(tfv_take(r.venue, &sa, &cmd, 6, &rec, &rs), TFV_RESEND);
        CHECK_EQ(rs.command_seq, 6);
        tfes_recovered_fini(&r);
    }
    free(orig);
    free(snap_img);
    /* The snapshot and its owners in place but events.ofl lost: the walk of the Keyed records the
     * snapshot covers runs while events.ofl is still being opened, over the snapshot's engine;
     * once events.ofl is found not to reach the snapshot, that engine and its venue are dropped
     * and the whole journal is replayed into new ones (nothing of the walk stays). */
    unlink(s.evs);
    tfes_recovered r;
    CHECK_RC(tfes_recover(&cfg, NULL, &r), 0);
    CHECK_EQ(r.from_snapshot, 0);
    CHECK_EQ(r.snapshot_records, 0);
    CHECK_EQ(r.keyed_covered, 0);
    CHECK_EQ(r.replayed, 12);
    CHECK_EQ(tf_engine_state_hash(r.engine), full_hash);
    CHECK_EQ(tfv_last_client_seq(r.venue, SESS_A), 10);
    CHECK_EQ(tfv_last_client_seq(r.venue, SESS_B), 11);
    for (int i = 0; i < LIVE; i++) {
        tf_engine_order o;
        CHECK_EQ(tf_engine_find_client(r.engine, live[i].account, live[i].seq, &o), 1);
        CHECK_EQ(refused_to(r.venue, o.order_id), live[i].refused);
    }
    tfes_recovered_fini(&r);
    /* The service's start from the snapshot: the same state as `engine run`. */
    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "12 commands (2 replayed after the snapshot)"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);
    r_cleanup(&s);
}

/* ================================================================ D5: --durability every */

/* With the service stopped (SIGSTOP), a busy client queues a pipeline of BUSY commands and a
 * lone client one command; then the service runs. The lone command is taken in the first turn
 * (fair intake), and how much of the busy pipeline is journaled when its reply arrives is printed
 * (on a disk, a few of 1,000: the reply left once its own command was durable). */
static void test_every_releases_each(void)
{
    /* The busy pipeline fits a Unix socket's default buffer (written while the service is
     * stopped) and the replies of all of it stay below what makes the old loop release early. */
    enum { BUSY = 1000 };
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    const char *extra[] = {"--durability", "every", NULL};
    CHECK_EQ(r_start(&s, extra), 0);
    if (s.pid <= 0) { /* never kill(0, SIGSTOP): that stops this whole process group */
        r_cleanup(&s);
        return;
    }
    int busy = t_connect_unix(s.sock), lone = t_connect_unix(s.sock);
    CHECK(busy >= 0 && lone >= 0);
    uint8_t *buf = malloc((size_t)BUSY * TF_OFL_MAX_FRAME), one[TF_OFL_MAX_FRAME];
    size_t blen = build_cmds(buf, BUSY, 1, 1), olen = build_cmds(one, 1, 2, 1);
    CHECK(blen > 0 && olen > 0 && blen < 100000); /* fits the socket buffer at once */
    /* Both connections accepted before the stop (a round trip each). */
    uint64_t seq = 0;
    CHECK(t_send_all(lone, one, olen) == 0 && read_heartbeats(lone, 1, &seq) == 0);
    CHECK(t_send_all(busy, one, olen) == 0 && read_heartbeats(busy, 1, &seq) == 0);
    uint64_t base = journal_records(s.cmds);
    CHECK_EQ(base, 2);

    kill(s.pid, SIGSTOP);
    ssize_t w = send(busy, buf, blen, MSG_DONTWAIT); /* never blocks on the stopped service */
    CHECK_EQ(w, (ssize_t)blen);
    build_cmds(one, 1, 2, 2);
    CHECK(send(lone, one, olen, MSG_DONTWAIT) == (ssize_t)olen);
    kill(s.pid, SIGCONT);
    if (w >= 0 && (size_t)w < blen)
        CHECK(t_send_all(busy, buf + w, blen - (size_t)w) == 0);
    uint64_t lone_seq = 0;
    CHECK_RC(read_heartbeats(lone, 1, &lone_seq), 0);
    uint64_t journaled = journal_records(s.cmds);
    fprintf(stderr, "every: lone command_seq %llu, %llu of %d commands journaled at its reply\n",
            (unsigned long long)lone_seq, (unsigned long long)journaled, BUSY + 3);
    /* How much of the pipeline is journaled when the lone reply arrives depends on timing (the
     * disk, the load), so it is printed, not asserted. What is asserted is decided by the intake
     * alone: the lone command was taken within the first turn (16 steps per connection), not
     * queued behind 512 commands of the busy pipeline as before (513 on the old loop). */
    CHECK(lone_seq > base && lone_seq <= base + 64);
    CHECK_RC(read_heartbeats(busy, BUSY, &seq), 0);
    CHECK_EQ(seq, base + BUSY + 1);
    free(buf);
    close(busy);
    close(lone);
    CHECK_EQ(r_stop(&s), 0);
    r_cleanup(&s);
}

/* A gateway command record (kind 0x14 Order, docs/engine.md) in commands.ofl is decoded by the
 * extension codec and applied on replay, by `engine run` and by a start of the service, not
 * stepped over as malformed: a resting OFL1 sell, then a gateway buy crossing it. */
static void test_gateway_replay(void)
{
    rsrv s;
    CHECK_RC(r_init(&s), 0);
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 0x6a7e};
    CHECK_RC(tf_journal_open(s.cmds, &o, &j, NULL), 0);
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.command_seq = 1,
                                     .account_id = 1,
                                     .client_order_id = 1,
                                     .instrument_id = 1,
                                     .price = 100,
                                     .quantity = {3, 0},
                                     .side = TF_OFL_SELL};
    CHECK_RC(tf_journal_append(j, &m, NULL), 0);
    tf_ofl_msg g = {.kind = TF_OFX_ORDER, .journal_seq = 1};
    g.order = (tf_ofx_order){.command_seq = 2,
                             .account_id = 2,
                             .client_order_id = 1,
                             .instrument_id = 1,
                             .price = 100,
                             .quantity = 2,
                             .side = TF_OFL_BUY,
                             .type = TF_OFX_LIMIT,
                             .tif = TF_OFX_GTC};
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tf_ofx_frame_encode(f, sizeof f, &g);
    CHECK(n > 0);
    if (n > 0)
        CHECK_RC(tf_journal_append_frame(j, f, (size_t)n), 0);
    CHECK_RC(tf_journal_close(j), 0);

    char out[8192], err[4096], v[64];
    CHECK_EQ(run_offline(s.cmds, NULL, out, sizeof out, err, sizeof err), 0);
    CHECK(json_field(out, "commands", v, sizeof v) == 0 && !strcmp(v, "2"));
    CHECK(json_field(out, "applied", v, sizeof v) == 0 && !strcmp(v, "2"));
    CHECK(json_field(out, "malformed", v, sizeof v) == 0 && !strcmp(v, "0"));
    CHECK(json_field(out, "trades", v, sizeof v) == 0 && !strcmp(v, "1"));
    CHECK(json_field(out, "last_command_seq", v, sizeof v) == 0 && !strcmp(v, "2"));

    CHECK_EQ(r_start(&s, NULL), 0);
    CHECK(log_has(&s, "2 commands (2 replayed)"));
    check_offline_running(&s);
    CHECK_EQ(r_stop(&s), 0);
    r_cleanup(&s);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "damage"))
        test_mid_file_damage();
    if (!only || !strcmp(only, "gap"))
        test_seq_gap();
    if (!only || !strcmp(only, "torn"))
        test_torn_or_not();
    if (!only || !strcmp(only, "run"))
        test_engine_run_damage();
    if (!only || !strcmp(only, "stale"))
        test_stale_snapshot();
    if (!only || !strcmp(only, "oldsnap"))
        test_old_format_snapshot();
    if (!only || !strcmp(only, "every"))
        test_every_releases_each();
    if (!only || !strcmp(only, "gateway"))
        test_gateway_replay();
    if (!only || !strcmp(only, "keyed"))
        test_keyed_covered();
    if (!only || !strcmp(only, "owners"))
        test_owners_after_snapshot();
    return tf_test_report();
}
