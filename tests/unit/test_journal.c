/* Journal: durability policies and the durable position, reopen/append, recovery, locking,
 * the reader's error reasons, the sticky failure after an I/O error, tf_journal_opts.size. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void write_all(const char *path, const uint8_t *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(buf, 1, n, f);
    fclose(f);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Appends n generated messages; returns how many appends returned 0. */
static int append_n(tf_journal *j, tf_ofl_gen *g, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        tf_ofl_msg m;
        tf_ofl_gen_next(g, &m);
        uint64_t seq = UINT64_MAX;
        int rc = tf_journal_append(j, &m, &seq);
        ok += rc == 0 && seq == tf_journal_next_seq(j) - 1;
    }
    return ok;
}

static void test_policies(void)
{
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 1);
    tf_journal *j;
    tf_journal_recovery rec;

    /* NONE: nothing is durable until an explicit sync */
    tf_journal_opts none = {.durability = TF_JOURNAL_NONE, .session_id = 5};
    CHECK_RC(tf_journal_open(tmp("none.ofl"), &none, &j, &rec), 0);
    CHECK_EQ(rec.created, 1);
    CHECK_EQ(rec.reason, 0);
    CHECK_EQ(rec.valid_bytes, TF_JOURNAL_HEADER_LEN);
    CHECK_EQ(file_size(tmp("none.ofl")), TF_JOURNAL_HEADER_LEN);
    CHECK_EQ(tf_journal_header(j)->session_id, 5);
    CHECK_EQ(tf_journal_next_seq(j), 0);
    CHECK_EQ(tf_journal_durable_end(j), 0);
    CHECK_EQ(append_n(j, &g, 10), 10);
    CHECK_EQ(tf_journal_next_seq(j), 10);
    CHECK_EQ(tf_journal_durable_end(j), 0);
    CHECK_EQ(tf_journal_is_durable(j, 0), 0);
    CHECK_EQ(file_size(tmp("none.ofl")), TF_JOURNAL_HEADER_LEN); /* still staged */
    CHECK_RC(tf_journal_flush(j), 0);
    CHECK(file_size(tmp("none.ofl")) > TF_JOURNAL_HEADER_LEN);
    CHECK_EQ(tf_journal_durable_end(j), 0); /* in the kernel is not durable */
    CHECK_RC(tf_journal_poll(j), 0);
    CHECK_RC(tf_journal_sync(j), 0);
    CHECK_EQ(tf_journal_durable_end(j), 10);
    CHECK_EQ(tf_journal_is_durable(j, 9), 1);
    CHECK_EQ(tf_journal_is_durable(j, 10), 0);
    tf_journal_stats st;
    tf_journal_get_stats(j, &st);
    CHECK_EQ(st.appended, 10);
    CHECK_EQ((off_t)st.bytes, file_size(tmp("none.ofl")));
    CHECK_RC(tf_journal_close(j), 0);

    /* EVERY: durable on return */
    tf_journal_opts every = {.durability = TF_JOURNAL_EVERY};
    CHECK_RC(tf_journal_open(tmp("every.ofl"), &every, &j, NULL), 0);
    int durable_each = 1;
    for (int i = 0; i < 5; i++) {
        tf_ofl_msg m;
        tf_ofl_gen_next(&g, &m);
        uint64_t seq;
        durable_each &= tf_journal_append(j, &m, &seq) == 0 && tf_journal_is_durable(j, seq) &&
                        tf_journal_durable_end(j) == seq + 1;
    }
    CHECK(durable_each);
    tf_journal_get_stats(j, &st);
    CHECK_EQ(st.syncs, 6); /* the header's and one per record */
    CHECK_RC(tf_journal_close(j), 0);

    /* GROUP by count: durable exactly when the group fills */
    tf_journal_opts group = {
        .durability = TF_JOURNAL_GROUP, .group_max_frames = 8, .group_max_us = 10000000};
    CHECK_RC(tf_journal_open(tmp("group.ofl"), &group, &j, NULL), 0);
    CHECK_EQ(append_n(j, &g, 7), 7);
    CHECK_EQ(tf_journal_durable_end(j), 0);
    CHECK_RC(tf_journal_poll(j), 0); /* not due: 10 s */
    CHECK_EQ(append_n(j, &g, 1), 1);
    CHECK_EQ(tf_journal_durable_end(j), 8);
    CHECK_EQ(append_n(j, &g, 20), 20);
    CHECK_EQ(tf_journal_durable_end(j), 24);
    CHECK_RC(tf_journal_close(j), 0);

    /* GROUP by time: poll makes the pending records durable once the oldest is due */
    group.group_max_frames = 1000000;
    group.group_max_us = 1000;
    CHECK_RC(tf_journal_open(tmp("group_t.ofl"), &group, &j, NULL), 0);
    CHECK_EQ(append_n(j, &g, 3), 3);
    sleep_ms(3);
    CHECK_RC(tf_journal_poll(j), 3);
    CHECK_EQ(tf_journal_durable_end(j), 3);
    CHECK_RC(tf_journal_poll(j), 0);
    CHECK_EQ(append_n(j, &g, 1), 1);
    sleep_ms(3);
    CHECK_EQ(append_n(j, &g, 1), 1); /* the next append notices the deadline */
    CHECK_EQ(tf_journal_durable_end(j), 5);
    CHECK_RC(tf_journal_close(j), 0);

    /* A large run spills the staging buffer several times */
    CHECK_RC(tf_journal_open(tmp("big.ofl"), &none, &j, NULL), 0);
    CHECK_EQ(append_n(j, &g, 20000), 20000);
    CHECK_RC(tf_journal_close(j), 0);
    tf_journal_map map;
    CHECK_RC(tf_journal_map_open(tmp("big.ofl"), &map), 0);
    tf_journal_scan_result s;
    CHECK_RC(tf_journal_scan(map.data, map.len, &s), 0);
    CHECK_EQ(s.records, 20000);
    CHECK_EQ(s.valid_bytes, map.len);
    tf_journal_map_close(&map);
}

static void test_reopen(void)
{
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 2);
    tf_journal *j, *j2;
    tf_journal_recovery rec;
    tf_journal_opts o = {.durability = TF_JOURNAL_GROUP, .session_id = 77, .clock_kind = 1};
    const char *p = tmp("reopen.ofl");
    CHECK_RC(tf_journal_open(p, &o, &j, &rec), 0);
    CHECK_EQ(append_n(j, &g, 50), 50);

    /* a second appender is refused while the first holds the journal */
    CHECK_RC(tf_journal_open(p, &o, &j2, NULL), -EWOULDBLOCK);
    CHECK_RC(tf_journal_close(j), 0);

    /* reopen: everything kept, appends continue at 50 */
    CHECK_RC(tf_journal_open(p, &o, &j, &rec), 0);
    CHECK_EQ(rec.created, 0);
    CHECK_EQ(rec.reason, 0);
    CHECK_EQ(rec.records, 50);
    CHECK_EQ(rec.valid_bytes, rec.file_bytes);
    CHECK_EQ(tf_journal_next_seq(j), 50);
    CHECK_EQ(tf_journal_durable_end(j), 50);
    CHECK_EQ(tf_journal_header(j)->clock_kind, 1);
    CHECK_EQ(append_n(j, &g, 25), 25);
    CHECK_RC(tf_journal_close(j), 0);

    /* session id: 0 accepts any, another id is refused */
    tf_journal_opts any = {.durability = TF_JOURNAL_NONE};
    CHECK_RC(tf_journal_open(p, &any, &j, &rec), 0);
    CHECK_EQ(rec.records, 75);
    CHECK_EQ(tf_journal_header(j)->session_id, 77);
    CHECK_RC(tf_journal_close(j), 0);
    tf_journal_opts other = {.session_id = 78};
    CHECK_RC(tf_journal_open(p, &other, &j, &rec), TF_E_OFL_SESSION_MISMATCH);

    /* the whole file walks contiguous from 0 to 74 with the generator's content */
    tf_journal_map map;
    CHECK_RC(tf_journal_map_open(p, &map), 0);
    tf_journal_reader r;
    CHECK_RC(tf_journal_reader_init(&r, map.data, map.len), 0);
    tf_ofl_gen g2;
    tf_ofl_gen_init(&g2, 2);
    tf_ofl_msg m, want;
    int n = 0, same = 1;
    while (tf_journal_reader_next(&r, &m) == 1) {
        tf_ofl_gen_next(&g2, &want);
        uint8_t a[TF_OFL_MAX_FRAME];
        int len = tf_ofl_frame_encode(a, sizeof a, &want);
        same &= m.journal_seq == (uint64_t)n && len == (int)r.frame_len &&
                !memcmp(a, r.frame, (size_t)len) && r.frame >= map.data &&
                r.frame < map.data + map.len;
        n++;
    }
    CHECK_EQ(n, 75);
    CHECK(same);
    CHECK_EQ(r.error, 0);
    CHECK_EQ(r.pos, map.len);
    tf_journal_map_close(&map);

    /* torn tail: cut 3 bytes, reopen recovers 74 and the next append is 74 */
    off_t size = file_size(p);
    CHECK_EQ(truncate(p, size - 3), 0);
    CHECK_RC(tf_journal_open(p, &o, &j, &rec), 0);
    CHECK_RC(rec.reason, TF_E_OFL_TORN_RECORD);
    CHECK_EQ(rec.records, 74);
    CHECK_EQ(rec.file_bytes, (uint64_t)size - 3);
    CHECK(rec.valid_bytes < rec.file_bytes);
    CHECK_EQ(file_size(p), (off_t)rec.valid_bytes);
    CHECK_EQ(tf_journal_next_seq(j), 74);
    uint64_t seq = 0;
    tf_ofl_msg hb;
    memset(&hb, 0, sizeof hb);
    hb.kind = TF_OFL_HEARTBEAT;
    CHECK_RC(tf_journal_append(j, &hb, &seq), 0);
    CHECK_EQ(seq, 74);
    CHECK_RC(tf_journal_close(j), 0);

    /* NO_TRUNCATE: a bad tail is reported, the file left as it is */
    size = file_size(p);
    uint8_t junk[5] = {1, 2, 3, 4, 5};
    int fd = open(p, O_WRONLY | O_APPEND);
    CHECK_EQ(write(fd, junk, sizeof junk), 5);
    close(fd);
    tf_journal_opts keep = {.flags = TF_JOURNAL_NO_TRUNCATE};
    CHECK_RC(tf_journal_open(p, &keep, &j, &rec), TF_E_OFL_FRAME_TOO_LARGE);
    CHECK_EQ(file_size(p), size + 5);
    CHECK_RC(tf_journal_open(p, NULL, &j, &rec), 0);
    CHECK_EQ(file_size(p), size);
    CHECK_EQ(rec.records, 75);
    CHECK_RC(tf_journal_close(j), 0);
}

/* tf_journal_opts.size: 0 and sizeof are this layout; a size that does not reach the end of flags
 * (this layout has no tail padding, so sizeof - 1 already fails) or a non-zero byte beyond the
 * known layout is TF_E_INVALID_ARG before the file is touched; a longer struct with a zero tail
 * is read like this layout. */
static void test_opts_size(void)
{
    tf_journal *j = (tf_journal *)1;
    tf_journal_recovery rec;
    const char *p = tmp("sized.ofl");
    tf_journal_opts zero = {.durability = TF_JOURNAL_NONE, .session_id = 11};
    CHECK_RC(tf_journal_open(p, &zero, &j, &rec), 0);
    CHECK(rec.created == 1 && tf_journal_header(j)->session_id == 11);
    CHECK_RC(tf_journal_close(j), 0);
    unlink(p);
    tf_journal_opts full = {.size = sizeof full, .durability = TF_JOURNAL_NONE, .session_id = 12};
    CHECK_RC(tf_journal_open(p, &full, &j, &rec), 0);
    CHECK(rec.created == 1 && tf_journal_header(j)->session_id == 12);
    CHECK_RC(tf_journal_close(j), 0);
    unlink(p);

    size_t first = offsetof(tf_journal_opts, flags) + sizeof(uint32_t);
    CHECK_EQ(first, sizeof(tf_journal_opts));
    tf_journal_opts small = {.size = first - 1};
    CHECK_RC(tf_journal_open(p, &small, &j, NULL), TF_E_INVALID_ARG);
    CHECK(j == NULL);
    small.size = sizeof(size_t);
    CHECK_RC(tf_journal_open(p, &small, &j, NULL), TF_E_INVALID_ARG);
    small.size = 1;
    CHECK_RC(tf_journal_open(p, &small, &j, NULL), TF_E_INVALID_ARG);
    CHECK_EQ(file_size(p), -1); /* nothing created */

    struct {
        tf_journal_opts o;
        uint32_t future[3];
    } longer = {{.size = sizeof longer, .durability = TF_JOURNAL_EVERY, .session_id = 13},
                {0, 0, 0}};
    longer.future[2] = 0x100; /* a non-zero byte in the middle of a field this library lacks */
    CHECK_RC(tf_journal_open(p, &longer.o, &j, NULL), TF_E_INVALID_ARG);
    CHECK_EQ(file_size(p), -1);
    longer.future[2] = 0;
    CHECK_RC(tf_journal_open(p, &longer.o, &j, &rec), 0);
    CHECK(rec.created == 1 && tf_journal_header(j)->session_id == 13);
    /* durability EVERY was read: an append is durable when it returns */
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 9);
    CHECK_EQ(append_n(j, &g, 1), 1);
    CHECK_EQ(tf_journal_durable_end(j), 1);
    CHECK_RC(tf_journal_close(j), 0);
    /* the known fields still count: session 14 does not match the file's 13 */
    longer.o.session_id = 14;
    CHECK_RC(tf_journal_open(p, &longer.o, &j, NULL), TF_E_OFL_SESSION_MISMATCH);
    unlink(p);
}

static void test_open_errors(void)
{
    tf_journal *j = (tf_journal *)1;
    uint8_t b[64];
    tf_ofl_journal_header h = {1, 1, 0};
    CHECK_RC(tf_journal_open(NULL, NULL, &j, NULL), TF_E_NULL_ARG);
    tf_journal_opts bad = {.durability = (tf_journal_durability)7};
    CHECK_RC(tf_journal_open(tmp("x.ofl"), &bad, &j, NULL), TF_E_INVALID_ARG);
    bad.durability = TF_JOURNAL_NONE;
    bad.clock_kind = 2;
    CHECK_RC(tf_journal_open(tmp("x.ofl"), &bad, &j, NULL), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_open(tmp("no/such/dir.ofl"), NULL, &j, NULL), -ENOENT);
    CHECK(j == NULL);
    CHECK_RC(tf_journal_open(dir, NULL, &j, NULL), -EISDIR);

    /* header errors: the file is not ours to touch */
    tf_ofl_journal_header_encode(b, sizeof b, &h);
    b[0] = 'X';
    write_all(tmp("magic.ofl"), b, 40);
    CHECK_RC(tf_journal_open(tmp("magic.ofl"), NULL, &j, NULL), TF_E_OFL_WRONG_MAGIC);
    CHECK_EQ(file_size(tmp("magic.ofl")), 40);
    tf_ofl_journal_header_encode(b, sizeof b, &h);
    b[4] = 9;
    write_all(tmp("version.ofl"), b, 15);
    CHECK_RC(tf_journal_open(tmp("version.ofl"), NULL, &j, NULL),
             TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION);
    tf_ofl_journal_header_encode(b, sizeof b, &h);
    b[14] = 3;
    write_all(tmp("clock.ofl"), b, 15);
    CHECK_RC(tf_journal_open(tmp("clock.ofl"), NULL, &j, NULL), TF_E_OFL_UNSUPPORTED_CLOCK_KIND);
    tf_ofl_journal_header_encode(b, sizeof b, &h);
    write_all(tmp("short.ofl"), b, 7);
    CHECK_RC(tf_journal_open(tmp("short.ofl"), NULL, &j, NULL), TF_E_OFL_BUFFER_TOO_SHORT);
    CHECK_EQ(file_size(tmp("short.ofl")), 7);
    /* an existing empty file gets a header */
    write_all(tmp("empty.ofl"), b, 0);
    tf_journal_recovery rec;
    CHECK_RC(tf_journal_open(tmp("empty.ofl"), NULL, &j, &rec), 0);
    CHECK_EQ(rec.created, 1);
    CHECK_RC(tf_journal_close(j), 0);
    CHECK_EQ(file_size(tmp("empty.ofl")), TF_JOURNAL_HEADER_LEN);
    CHECK_RC(tf_journal_close(NULL), 0);

    /* map errors */
    tf_journal_map m;
    CHECK_RC(tf_journal_map_open(tmp("missing.ofl"), &m), -ENOENT);
    CHECK_RC(tf_journal_map_open(dir, &m), -EINVAL);
    write_all(tmp("zero.ofl"), b, 0);
    CHECK_RC(tf_journal_map_open(tmp("zero.ofl"), &m), 0);
    CHECK(m.data == NULL && m.len == 0);
    tf_journal_map_close(&m);
    tf_journal_map_close(NULL);
}

static void test_append_errors(void)
{
    tf_journal *j;
    CHECK_RC(tf_journal_open(tmp("appendx.ofl"), NULL, &j, NULL), 0);
    tf_ofl_msg m;
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 3);
    tf_ofl_gen_next(&g, &m); /* NewLimit */
    m.new_limit.side = 3;
    CHECK_RC(tf_journal_append(j, &m, NULL), TF_E_OFL_INVALID_SIDE);
    m.kind = 0x40;
    CHECK_RC(tf_journal_append(j, &m, NULL), TF_E_OFL_RESERVED_KIND);
    CHECK_EQ(tf_journal_next_seq(j), 0);

    /* append_frame: the frame must decode, be whole and carry the next journal_seq */
    uint8_t f[TF_OFL_MAX_FRAME + 8];
    tf_ofl_gen_next(&g, &m);
    m.journal_seq = 0;
    int n = tf_ofl_frame_encode(f, sizeof f, &m);
    CHECK_RC(tf_journal_append_frame(j, f, (size_t)n), 0);
    CHECK_RC(tf_journal_append_frame(j, f, (size_t)n), TF_E_OFL_SEQ_GAP);
    m.journal_seq = 1;
    n = tf_ofl_frame_encode(f, sizeof f, &m);
    CHECK_RC(tf_journal_append_frame(j, f, (size_t)n - 1), TF_E_OFL_PAYLOAD_TOO_SHORT);
    CHECK_RC(tf_journal_append_frame(j, f, (size_t)n + 1), TF_E_OFL_PAYLOAD_LENGTH);
    f[2] = 0x07;
    CHECK_RC(tf_journal_append_frame(j, f, (size_t)n), TF_E_OFL_UNKNOWN_KIND);
    CHECK_EQ(tf_journal_next_seq(j), 1);
    CHECK_RC(tf_journal_close(j), 0);

    tf_journal_map map;
    tf_journal_scan_result s;
    CHECK_RC(tf_journal_map_open(tmp("appendx.ofl"), &map), 0);
    CHECK_RC(tf_journal_scan(map.data, map.len, &s), 0);
    CHECK_EQ(s.records, 1);
    tf_journal_map_close(&map);
}

/* A failed write makes the journal unusable (sticky), as a failed fdatasync would. The write is
 * made to fail with RLIMIT_FSIZE (EFBIG), SIGXFSZ ignored. */
static void test_sticky_failure(void)
{
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_EVERY};
    CHECK_RC(tf_journal_open(tmp("fail.ofl"), &o, &j, NULL), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 200;
    CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 4);
    int rc = 0, i;
    for (i = 0; i < 100 && rc == 0; i++) {
        tf_ofl_msg m;
        tf_ofl_gen_next(&g, &m);
        rc = tf_journal_append(j, &m, NULL);
    }
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK_RC(rc, -EFBIG);
    uint64_t durable = tf_journal_durable_end(j);
    CHECK(durable < (uint64_t)i);
    tf_ofl_msg hb;
    memset(&hb, 0, sizeof hb);
    CHECK_RC(tf_journal_append(j, &hb, NULL), TF_E_OFL_JOURNAL_FAILED);
    CHECK_RC(tf_journal_sync(j), TF_E_OFL_JOURNAL_FAILED);
    CHECK_RC(tf_journal_flush(j), TF_E_OFL_JOURNAL_FAILED);
    CHECK_RC(tf_journal_poll(j), TF_E_OFL_JOURNAL_FAILED);
    CHECK_EQ(tf_journal_durable_end(j), durable);
    CHECK_RC(tf_journal_close(j), TF_E_OFL_JOURNAL_FAILED);
    /* reopening recovers exactly the durable records (the partial one is cut) */
    tf_journal_recovery rec;
    CHECK_RC(tf_journal_open(tmp("fail.ofl"), &o, &j, &rec), 0);
    CHECK_EQ(rec.records, durable);
    CHECK_RC(tf_journal_close(j), 0);
}

/* Builds an image: header + records with a chosen journal_seq, kind byte and CRC. */
static size_t put_record(uint8_t *b, const tf_ofl_msg *m, uint64_t seq, int bad_crc)
{
    tf_ofl_msg c = *m;
    c.journal_seq = seq;
    int n = tf_ofl_frame_encode(b, TF_OFL_MAX_FRAME, &c);
    uint32_t crc = tf_crc32c(0, b, (size_t)n) ^ (bad_crc ? 1u : 0u);
    memcpy(b + n, &crc, 4);
    return (size_t)n + 4;
}

static void test_reader_reasons(void)
{
    uint8_t img[4096];
    tf_ofl_journal_header h = {1, 42, 0};
    tf_ofl_msg m;
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 5);
    tf_ofl_gen_next(&g, &m);
    size_t base = (size_t)tf_ofl_journal_header_encode(img, sizeof img, &h);
    base += put_record(img + base, &m, 0, 0);
    size_t second = base;
    tf_journal_scan_result s;
    tf_journal_reader r;
    tf_ofl_msg out;

    /* header only: whole, 0 records; empty: header too short */
    CHECK_RC(tf_journal_scan(img, 15, &s), 0);
    CHECK_EQ(s.records, 0);
    CHECK_EQ(s.header.session_id, 42);
    CHECK_RC(tf_journal_scan(img, 0, &s), TF_E_OFL_BUFFER_TOO_SHORT);
    CHECK_RC(tf_journal_scan(NULL, 0, &s), TF_E_OFL_BUFFER_TOO_SHORT);
    CHECK_EQ(s.valid_bytes, 0);
    CHECK_RC(tf_journal_reader_init(&r, NULL, 3), TF_E_NULL_ARG);

    /* SEQ_GAP: a CRC-valid record with journal_seq 2 after 0 (and a duplicate 0) */
    size_t n = second + put_record(img + second, &m, 2, 0);
    CHECK_RC(tf_journal_scan(img, n, &s), TF_E_OFL_SEQ_GAP);
    CHECK_EQ(s.records, 1);
    CHECK_EQ(s.valid_bytes, second);
    n = second + put_record(img + second, &m, 0, 0);
    CHECK_RC(tf_journal_scan(img, n, &s), TF_E_OFL_SEQ_GAP);

    /* CRC mismatch */
    n = second + put_record(img + second, &m, 1, 1);
    CHECK_RC(tf_journal_scan(img, n, &s), TF_E_OFL_CRC_MISMATCH);
    CHECK_EQ(s.valid_bytes, second);

    /* a CRC-valid record whose frame does not decode: the decode reason */
    n = second + put_record(img + second, &m, 1, 0);
    img[second + 2] = 0x07;
    uint32_t crc = tf_crc32c(0, img + second, n - second - 4);
    memcpy(img + n - 4, &crc, 4);
    CHECK_RC(tf_journal_scan(img, n, &s), TF_E_OFL_UNKNOWN_KIND);
    img[second + 11 + 32] = 9; /* and with a bad side byte in a NewLimit */
    img[second + 2] = TF_OFL_NEW_LIMIT;
    crc = tf_crc32c(0, img + second, n - second - 4);
    memcpy(img + n - 4, &crc, 4);
    CHECK_RC(tf_journal_scan(img, n, &s), TF_E_OFL_INVALID_SIDE);
    /* ...even when its journal_seq is also wrong */
    n = second + put_record(img + second, &m, 5, 0);
    img[second + 2] = 0xA0;
    crc = tf_crc32c(0, img + second, n - second - 4);
    memcpy(img + n - 4, &crc, 4);
    CHECK_RC(tf_journal_scan(img, n, &s), TF_E_OFL_RESERVED_KIND);

    /* impossible lengths */
    memset(img + second, 0, 64);
    CHECK_RC(tf_journal_scan(img, second + 64, &s), TF_E_OFL_FRAME_LENGTH_TOO_SMALL);
    img[second] = 200;
    CHECK_RC(tf_journal_scan(img, second + 64, &s), TF_E_OFL_FRAME_TOO_LARGE);
    CHECK_RC(tf_journal_scan(img, second + 1, &s), TF_E_OFL_TORN_RECORD);

    /* the reader stops and stays stopped, msg untouched */
    n = second + put_record(img + second, &m, 1, 1);
    CHECK_RC(tf_journal_reader_init(&r, img, n), 0);
    CHECK_RC(tf_journal_reader_next(&r, &out), 1);
    CHECK_EQ(out.journal_seq, 0);
    memset(&out, 0x77, sizeof out);
    tf_ofl_msg before = out;
    CHECK_RC(tf_journal_reader_next(&r, &out), TF_E_OFL_CRC_MISMATCH);
    CHECK_RC(tf_journal_reader_next(&r, &out), TF_E_OFL_CRC_MISMATCH);
    CHECK_BITS(&out, &before, sizeof out);
    CHECK_EQ(r.pos, second);
    CHECK_EQ(r.next_seq, 1);
    /* a good image: 1 then 0, and 0 again */
    n = second + put_record(img + second, &m, 1, 0);
    CHECK_RC(tf_journal_reader_init(&r, img, n), 0);
    CHECK_RC(tf_journal_reader_next(&r, &out), 1);
    CHECK_RC(tf_journal_reader_next(&r, &out), 1);
    CHECK_RC(tf_journal_reader_next(&r, &out), 0);
    CHECK_RC(tf_journal_reader_next(&r, &out), 0);
    CHECK_EQ(r.pos, n);
}

/* Issue 13, item 4: a flipped bit in the header's session id (or clock kind) of a journal written
 * by tf_journal_open used to verify as whole. Every bit of the header must now be covered: the
 * scan says TF_E_OFL_HEADER_DAMAGED with an empty valid prefix, and open refuses the file and
 * leaves it as it is. */
static void test_header_protected(void)
{
    const char *p = tmp("hdr.ofl");
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 0x1122334455667788ull};
    CHECK_RC(tf_journal_open(p, &o, &j, NULL), 0);
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 4);
    CHECK_EQ(append_n(j, &g, 5), 5);
    CHECK_RC(tf_journal_close(j), 0);
    uint8_t img[1024];
    FILE *f = fopen(p, "rb");
    size_t n = f ? fread(img, 1, sizeof img, f) : 0;
    if (f)
        fclose(f);
    tf_journal_scan_result s;
    CHECK_RC(tf_journal_scan(img, n, &s), 0);
    CHECK_EQ(s.records, 5);
    int scan_bad = 0, open_bad = 0;
    for (size_t bit = 0; bit < 8 * TF_JOURNAL_HEADER_LEN; bit++) {
        img[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        int rc = tf_journal_scan(img, n, &s);
        scan_bad |= rc != TF_E_OFL_HEADER_DAMAGED || s.valid_bytes != 0 || s.records != 0;
        if (bit / 8 >= 6 && bit / 8 < 15) { /* session id and clock kind: open refuses too */
            write_all(p, img, n);
            tf_journal_opts any = {.durability = TF_JOURNAL_NONE};
            open_bad |= tf_journal_open(p, &any, &j, NULL) != TF_E_OFL_HEADER_DAMAGED;
            open_bad |= file_size(p) != (off_t)n;
        }
        if (scan_bad || open_bad)
            fprintf(stderr, "header bit %zu flipped: scan returned %d (%s)\n", bit, rc,
                    tf_strerror(rc));
        img[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (scan_bad || open_bad)
            break;
    }
    CHECK(!scan_bad);
    CHECK(!open_bad);
    /* A cut inside the protection block is a damaged header too, never an empty journal. */
    for (size_t len = TF_OFL_JOURNAL_HEADER_LEN + 2; len < TF_JOURNAL_HEADER_LEN; len++)
        CHECK_RC(tf_journal_scan(img, len, &s), TF_E_OFL_HEADER_DAMAGED);
    CHECK(strcmp(tf_strerror(TF_E_OFL_HEADER_DAMAGED), "unknown error code") != 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tf_journal_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_policies();
    test_reopen();
    test_open_errors();
    test_opts_size();
    test_append_errors();
    test_sticky_failure();
    test_reader_reasons();
    test_header_protected();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tf_test_report();
}
