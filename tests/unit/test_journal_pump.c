/* The journal walk on a second thread (tf_journal_pump) against the single-threaded walk it
 * replaces: the same records in the same order, the same stop at the same record with the same
 * reason (a flipped byte, a torn tail, a record that does not decode, with and without the
 * skip), the same state after _seek; argument errors; an early close. Also tf_journal_reader_seek
 * and tf_journal_first_ext, and the second walk of a checked prefix read in pieces (tfo_pieces)
 * against the reader's: the same records across the pieces' boundaries, its bounds, its stops. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "orderflow/fio.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

static char dir[64];

static const char *tmp(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* One step of a walk as the caller sees it: a record (its journal_seq, kind, CRC of the decoded
 * struct's encoding, and for an extension record, which ends its batch, the offset r.frame
 * views), a skipped record, or the end (reason, offset, journal_seq). Batch boundaries may
 * differ (the pump cuts a batch where the checked prefix ends); records and stops may not. */
typedef struct step {
    int what; /* 1 record, 2 skipped, 3 end */
    int code; /* end: 0 or the reason */
    uint64_t seq, pos, frame_off;
    uint8_t kind;
    uint32_t body; /* CRC32C of the re-encoded frame (0 for an extension record) */
} step;

typedef struct trace {
    step *s;
    size_t n, cap;
} trace;

static void push(trace *t, step s)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->s = realloc(t->s, t->cap * sizeof *t->s);
    }
    t->s[t->n++] = s;
}

static uint32_t body_of(const tf_ofl_msg *m)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tf_ofl_frame_encode(f, sizeof f, m);
    return n > 0 ? tf_crc32c(0, f, (size_t)n) : 0;
}

/* The single-threaded reference: what `engine run` and the service's replay did before. */
static void walk_ref(const tf_journal_reader *from, int batch, int skip, trace *t)
{
    tf_journal_reader r = *from;
    tf_ofl_msg *m = calloc((size_t)batch, sizeof *m);
    for (;;) {
        int n = tf_journal_reader_next_batch(&r, m, batch);
        if (n < 0 && skip && tf_journal_reader_skip(&r) == 1) {
            push(t, (step){.what = 2,
                           .pos = r.pos,
                           .seq = r.next_seq,
                           .frame_off = (uint64_t)(r.frame - r.base)});
            continue;
        }
        if (n <= 0) {
            push(t, (step){.what = 3, .code = n, .pos = r.pos, .seq = r.next_seq});
            break;
        }
        for (int i = 0; i < n; i++)
            push(t, (step){.what = 1,
                           .seq = m[i].journal_seq,
                           .kind = m[i].kind,
                           .body = body_of(&m[i]),
                           .frame_off =
                               TF_JOURNAL_EXT_KIND(m[i].kind) ? (uint64_t)(r.frame - r.base) : 0});
    }
    free(m);
}

static int walk_pump(const tf_journal_reader *from, int batch, int skip, trace *t)
{
    tf_journal_pump *p;
    int rc = tf_journal_pump_open(from, batch, skip ? TF_JOURNAL_PUMP_SKIP : 0, &p);
    if (rc)
        return rc;
    for (;;) {
        const tf_journal_batch *b;
        int n = tf_journal_pump_next(p, &b);
        if (n == 1 && b->skipped) {
            push(t, (step){.what = 2,
                           .pos = b->r.pos,
                           .seq = b->r.next_seq,
                           .frame_off = (uint64_t)(b->r.frame - b->r.base)});
            continue;
        }
        if (n <= 0) {
            push(t, (step){.what = 3, .code = n, .pos = b->r.pos, .seq = b->r.next_seq});
            /* asked again: the same end */
            const tf_journal_batch *b2;
            CHECK_EQ(tf_journal_pump_next(p, &b2), n);
            CHECK_EQ(b2->r.pos, b->r.pos);
            break;
        }
        for (int i = 0; i < b->n; i++)
            push(t, (step){.what = 1,
                           .seq = b->msgs[i].journal_seq,
                           .kind = b->msgs[i].kind,
                           .body = body_of(&b->msgs[i]),
                           .frame_off = TF_JOURNAL_EXT_KIND(b->msgs[i].kind)
                                            ? (uint64_t)(b->r.frame - b->r.base)
                                            : 0});
    }
    tf_journal_pump_close(p);
    return 0;
}

static int same_step(const step *x, const step *y)
{
    return x->what == y->what && x->code == y->code && x->seq == y->seq && x->pos == y->pos &&
           x->frame_off == y->frame_off && x->kind == y->kind && x->body == y->body;
}

/* Both walks from `from`; returns the reference's last step (the end). */
static step compare(const tf_journal_reader *from, int batch, int skip)
{
    trace a = {0}, b = {0};
    walk_ref(from, batch, skip, &a);
    CHECK_RC(walk_pump(from, batch, skip, &b), 0);
    CHECK_EQ(a.n, b.n);
    size_t diff = 0;
    for (size_t i = 0; i < a.n && i < b.n; i++)
        diff += !same_step(&a.s[i], &b.s[i]);
    CHECK_EQ(diff, 0);
    step end = a.n ? a.s[a.n - 1] : (step){0};
    free(a.s);
    free(b.s);
    return end;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* A journal of n records of the mixed cycle (commands and events). */
static uint8_t *make_image(int n, size_t *len)
{
    unlink(tmp("p.ofl"));
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 7};
    if (tf_journal_open(tmp("p.ofl"), &o, &j, NULL))
        return NULL;
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 3);
    for (int i = 0; i < n; i++) {
        tf_ofl_msg m;
        tf_ofl_gen_next(&g, &m);
        tf_journal_append(j, &m, NULL);
    }
    tf_journal_close(j);
    return read_file(tmp("p.ofl"), len);
}

/* The offset of record k (walked). */
static size_t offset_of(const uint8_t *img, size_t len, uint64_t k)
{
    tf_journal_reader r;
    tf_journal_reader_init(&r, img, len);
    tf_ofl_msg m;
    for (uint64_t i = 0; i < k; i++)
        tf_journal_reader_next(&r, &m);
    return r.pos;
}

static void test_same_walk(void)
{
    size_t len;
    uint8_t *img = make_image(20000, &len);
    CHECK(img != NULL);
    if (!img)
        return;
    tf_journal_reader r;
    CHECK_RC(tf_journal_reader_init(&r, img, len), 0);
    int batches[] = {1, 7, 256};
    for (int b = 0; b < 3; b++)
        for (int skip = 0; skip < 2; skip++) {
            step end = compare(&r, batches[b], skip);
            CHECK_EQ(end.code, 0);
            CHECK_EQ(end.seq, 20000);
            CHECK_EQ(end.pos, len);
        }

    /* A flipped byte in record 12345: both stop there, with the CRC reason, at its offset. */
    size_t at = offset_of(img, len, 12345);
    img[at + 9] ^= 0x20;
    for (int skip = 0; skip < 2; skip++) {
        step end = compare(&r, 256, skip);
        CHECK_EQ(end.code, TF_E_OFL_CRC_MISMATCH);
        CHECK_EQ(end.seq, 12345);
        CHECK_EQ(end.pos, at);
    }
    img[at + 9] ^= 0x20;

    /* A torn tail. */
    tf_journal_reader torn;
    CHECK_RC(tf_journal_reader_init(&torn, img, len - 3), 0);
    step end = compare(&torn, 256, 0);
    CHECK_EQ(end.code, TF_E_OFL_TORN_RECORD);
    CHECK_EQ(end.seq, 19999);

    /* A whole record whose payload does not decode (kind 0x0F, CRC fixed): without the skip
     * both stop on it; with it both step over it (reported once) and go on to the end. */
    size_t at2 = offset_of(img, len, 777);
    size_t fsize = 2 + ((size_t)img[at2] | (size_t)img[at2 + 1] << 8);
    uint8_t saved[5] = {img[at2 + 2], img[at2 + fsize], img[at2 + fsize + 1], img[at2 + fsize + 2],
                        img[at2 + fsize + 3]};
    img[at2 + 2] = 0x0F;
    uint32_t crc = tf_crc32c(0, img + at2, fsize);
    memcpy(img + at2 + fsize, &crc, 4);
    end = compare(&r, 256, 0);
    CHECK(end.code == TF_E_OFL_UNKNOWN_KIND || end.code == TF_E_OFL_RESERVED_KIND);
    CHECK_EQ(end.seq, 777);
    CHECK_EQ(end.pos, at2);
    end = compare(&r, 256, 1);
    CHECK_EQ(end.code, 0);
    CHECK_EQ(end.seq, 20000);
    img[at2 + 2] = saved[0];
    memcpy(img + at2 + fsize, saved + 1, 4);

    /* From a seek: the same as the reference from the same place. */
    tf_journal_reader s = r;
    size_t mid = offset_of(img, len, 15000);
    CHECK_RC(tf_journal_reader_seek(&s, mid, 15000), 0);
    end = compare(&s, 256, 0);
    CHECK_EQ(end.code, 0);
    CHECK_EQ(end.seq, 20000);
    /* A seek to a place where no record starts: reported as damage, by both alike. */
    CHECK_RC(tf_journal_reader_seek(&s, mid + 1, 15000), 0);
    end = compare(&s, 256, 0);
    CHECK(end.code < 0);
    CHECK_EQ(end.pos, mid + 1);
    /* A seek to the right offset with the wrong journal_seq. */
    CHECK_RC(tf_journal_reader_seek(&s, mid, 14000), 0);
    end = compare(&s, 256, 0);
    CHECK_EQ(end.code, TF_E_OFL_SEQ_GAP);
    CHECK_RC(tf_journal_reader_seek(&s, 3, 0), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_reader_seek(&s, len + 1, 0), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_reader_seek(NULL, 30, 0), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_reader_seek(&s, len, 20000), 0); /* the end: whole */
    end = compare(&s, 256, 0);
    CHECK_EQ(end.code, 0);

    /* Closed after one batch, the walker batches ahead: no hang, no leak (ASan). */
    tf_journal_pump *p;
    CHECK_RC(tf_journal_pump_open(&r, 16, 0, &p), 0);
    const tf_journal_batch *b;
    CHECK_EQ(tf_journal_pump_next(p, &b), 1);
    CHECK(b->n >= 1 && b->n <= 16);
    tf_journal_pump_close(p);
    tf_journal_pump_close(NULL);
    free(img);
}

static void test_pump_args(void)
{
    uint8_t hdr[TF_JOURNAL_HEADER_LEN];
    size_t len;
    uint8_t *img = make_image(0, &len);
    CHECK_EQ(len, sizeof hdr);
    tf_journal_reader r;
    CHECK_RC(tf_journal_reader_init(&r, img, len), 0);
    tf_journal_pump *p = (tf_journal_pump *)1;
    CHECK_RC(tf_journal_pump_open(NULL, 8, 0, &p), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_pump_open(&r, 8, 0, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_journal_pump_open(&r, 0, 0, &p), TF_E_INVALID_ARG);
    CHECK(p == NULL);
    CHECK_RC(tf_journal_pump_open(&r, 65537, 0, &p), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_pump_open(&r, 8, 2, &p), TF_E_INVALID_ARG);
    CHECK_RC(tf_journal_pump_next(NULL, NULL), TF_E_NULL_ARG);
    /* An empty journal: the end at once. */
    CHECK_RC(tf_journal_pump_open(&r, 8, 0, &p), 0);
    const tf_journal_batch *b;
    CHECK_RC(tf_journal_pump_next(p, &b), 0);
    CHECK_EQ(b->r.next_seq, 0);
    tf_journal_pump_close(p);
    /* A reader whose header was bad: its error at once. */
    uint8_t junk[40] = {0};
    tf_journal_reader bad;
    int rc = tf_journal_reader_init(&bad, junk, sizeof junk);
    CHECK(rc < 0);
    CHECK_RC(tf_journal_reader_seek(&bad, 30, 0), rc);
    CHECK_RC(tf_journal_pump_open(&bad, 8, 0, &p), 0);
    CHECK_RC(tf_journal_pump_next(p, &b), rc);
    tf_journal_pump_close(p);
    free(img);
}

/* tf_journal_first_ext: none in a plain journal; the first extension record's place after it. */
static void test_first_ext(void)
{
    unlink(tmp("x.ofl"));
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE};
    CHECK_RC(tf_journal_open(tmp("x.ofl"), &o, &j, NULL), 0);
    uint64_t off = 0, seq = 0;
    CHECK_RC(tf_journal_first_ext(j, &off, &seq), 0);
    CHECK(off == UINT64_MAX);
    CHECK_RC(tf_journal_first_ext(NULL, &off, &seq), TF_E_NULL_ARG);
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 1);
    for (int i = 0; i < 5; i++) {
        tf_ofl_msg m;
        tf_ofl_gen_next(&g, &m);
        CHECK_RC(tf_journal_append(j, &m, NULL), 0);
    }
    for (int k = 0; k < 2; k++) { /* two extension records (kind 0x1E: no meaning here) */
        uint8_t f[16] = {0};
        f[0] = 14; /* frame_len: 2 + 14 = 16 bytes */
        f[2] = 0x1E;
        uint64_t s = tf_journal_next_seq(j);
        for (int i = 0; i < 8; i++)
            f[3 + i] = (uint8_t)(s >> (8 * i));
        CHECK_RC(tf_journal_append_frame(j, f, sizeof f), 0);
    }
    CHECK_RC(tf_journal_close(j), 0);
    CHECK_RC(tf_journal_open(tmp("x.ofl"), &o, &j, NULL), 0);
    CHECK_EQ(tf_journal_first_ext(j, &off, &seq), 1);
    CHECK_EQ(seq, 5);
    size_t len;
    uint8_t *img = read_file(tmp("x.ofl"), &len);
    CHECK_EQ(off, img ? offset_of(img, len, 5) : 0);
    CHECK(img && img[off + 2] == 0x1E);
    if (img) { /* the pump with extension records: each ends its batch, r.frame views it */
        tf_journal_reader r;
        CHECK_RC(tf_journal_reader_init(&r, img, len), 0);
        step end = compare(&r, 256, 0);
        CHECK_EQ(end.code, 0);
        CHECK_EQ(end.seq, 7);
    }
    free(img);
    CHECK_RC(tf_journal_close(j), 0);
}

/* The reference for a scan: one record at a time through tf_journal_reader_next. */
static void scan_ref(const uint8_t *img, size_t len, tf_journal_scan_result *want)
{
    memset(want, 0, sizeof *want);
    tf_journal_reader r;
    tf_journal_reader_init(&r, img, len);
    tf_ofl_msg m;
    int rc;
    while ((rc = tf_journal_reader_next(&r, &m)) == 1)
        ;
    want->error = rc;
    want->records = r.next_seq;
    want->valid_bytes = r.pos;
}

/* The scans (tf_journal_scan on an image, and the open's check of a file, read in pieces) walk a
 * journal of extension records in whole batches once the first one is noted, and take an
 * extension kind without its decode: the same records, stop, reason and offset as the reader
 * one record at a time, with and without damage among the extension records. */
static void test_scan_ext(void)
{
    unlink(tmp("s.ofl"));
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 9};
    CHECK_RC(tf_journal_open(tmp("s.ofl"), &o, &j, NULL), 0);
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 5);
    for (int i = 0; i < 3000; i++) {
        tf_ofl_msg m;
        if (i < 3 || i % 50 == 7) { /* a few OFL1 records among them */
            tf_ofl_gen_next(&g, &m);
            CHECK_RC(tf_journal_append(j, &m, NULL), 0);
            continue;
        }
        /* extension kinds 0x10 and 0x9E, sizes 11 (a bare frame) to 40 */
        uint8_t f[40] = {0};
        size_t n = i % 97 == 5 ? 11 : 20 + (size_t)(i % 21);
        f[0] = (uint8_t)(n - 2);
        f[2] = i & 1 ? 0x10 : 0x9E;
        uint64_t seq = tf_journal_next_seq(j);
        for (int b = 0; b < 8; b++)
            f[3 + b] = (uint8_t)(seq >> (8 * b));
        for (size_t b = 11; b < n; b++)
            f[b] = (uint8_t)(i * 7 + (int)b);
        CHECK_RC(tf_journal_append_frame(j, f, n), 0);
    }
    CHECK_RC(tf_journal_close(j), 0);
    size_t len;
    uint8_t *img = read_file(tmp("s.ofl"), &len);
    CHECK(img != NULL);
    if (!img)
        return;
    /* how: 0 whole, 1 a flipped payload byte (CRC), 2 a wrong journal_seq with its CRC fixed,
     * 3 a torn tail */
    for (int how = 0; how < 4; how++) {
        size_t at = offset_of(img, len, 2222), n = len;
        size_t fsize = 2 + ((size_t)img[at] | (size_t)img[at + 1] << 8);
        uint8_t *d = malloc(len);
        memcpy(d, img, len);
        if (how == 1)
            d[at + 12] ^= 0x04;
        if (how == 2) {
            d[at + 3] ^= 0x01;
            uint32_t crc = tf_crc32c(0, d + at, fsize);
            memcpy(d + at + fsize, &crc, 4);
        }
        if (how == 3)
            n = len - 5;
        tf_journal_scan_result want, got;
        scan_ref(d, n, &want);
        CHECK_EQ(want.error, how == 0   ? 0
                             : how == 1 ? TF_E_OFL_CRC_MISMATCH
                             : how == 2 ? TF_E_OFL_SEQ_GAP
                                        : TF_E_OFL_TORN_RECORD);
        CHECK_EQ(tf_journal_scan(d, n, &got), want.error);
        CHECK_EQ(got.records, want.records);
        CHECK_EQ(got.valid_bytes, want.valid_bytes);
        FILE *f = fopen(tmp("s2.ofl"), "wb");
        CHECK(f && fwrite(d, 1, n, f) == n);
        if (f)
            fclose(f);
        tf_journal_opts ro = {.durability = TF_JOURNAL_NONE, .flags = TF_JOURNAL_NO_TRUNCATE};
        tf_journal_recovery rec;
        tf_journal *j2 = NULL;
        int rc = tf_journal_open(tmp("s2.ofl"), &ro, &j2, &rec);
        CHECK_EQ(rc, want.error);
        CHECK_EQ(rec.reason, want.error);
        CHECK_EQ(rec.records, want.records);
        CHECK_EQ(rec.valid_bytes, want.valid_bytes);
        tf_journal_close(j2);
        free(d);
    }
    free(img);
}

/* Records whose frames and offsets tfo_pieces must give, as the reader found them. */
typedef struct rec_at {
    uint64_t off;
    size_t len;
} rec_at;

/* Walks path from byte from to byte to with tfo_pieces; checks each record against want[0..n)
 * and the image; returns the final code (0 at `to`). */
static int pieces_walk(const char *path, const uint8_t *img, uint64_t from, uint64_t to,
                       const rec_at *want, size_t n)
{
    tfo_pieces w;
    CHECK_RC(tfo_pieces_open(&w, path, from, to), 0);
    const uint8_t *f;
    size_t len, k = 0;
    unsigned long long off;
    int rc;
    while ((rc = tfo_pieces_next(&w, &f, &len, &off)) == 1) {
        CHECK(k < n);
        if (k >= n)
            break;
        CHECK_EQ(off, want[k].off);
        CHECK_EQ(len, want[k].len);
        CHECK(len == want[k].len && !memcmp(f, img + want[k].off, len));
        k++;
    }
    CHECK_EQ(k, n);
    tfo_pieces_close(&w);
    return rc;
}

static void test_pieces(void)
{
    enum { N = 120000 }; /* ~6 MiB: several pieces, records cut by their ends */
    const char *path = tmp("pieces.ofl");
    tf_journal_opts jo = {.durability = TF_JOURNAL_NONE, .session_id = 9};
    tf_journal *j;
    CHECK_RC(tf_journal_open(path, &jo, &j, NULL), 0);
    for (uint64_t i = 0; i < N; i++) {
        tf_ofl_msg m = {.kind = i % 3 ? TF_OFL_NEW_LIMIT : TF_OFL_CANCEL_BY_ORDER};
        if (i % 3)
            m.new_limit = (tf_ofl_new_limit){.command_seq = i + 1,
                                             .account_id = 1,
                                             .client_order_id = i,
                                             .instrument_id = 1,
                                             .price = 100,
                                             .quantity = {1, 0},
                                             .side = 0};
        else
            m.cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = i + 1, .order_id = i};
        CHECK_RC(tf_journal_append(j, &m, NULL), 0);
    }
    CHECK_RC(tf_journal_close(j), 0);
    tf_journal_map map;
    CHECK_RC(tf_journal_map_open(path, &map), 0);
    rec_at *at = malloc(N * sizeof *at);
    tf_journal_reader r;
    CHECK_RC(tf_journal_reader_init(&r, map.data, map.len), 0);
    uint64_t first = r.pos;
    tf_ofl_msg m;
    size_t n = 0;
    while (n < N && tf_journal_reader_next(&r, &m) == 1) {
        at[n].off = (uint64_t)(r.frame - map.data);
        at[n].len = r.frame_len;
        n++;
    }
    CHECK_EQ(n, N);
    CHECK(map.len > (3u << 20));
    /* The whole file; a middle stretch across piece boundaries; nothing. */
    CHECK_RC(pieces_walk(path, map.data, first, map.len, at, N), 0);
    CHECK_RC(pieces_walk(path, map.data, at[20000].off, at[90000].off, at + 20000, 70000), 0);
    CHECK_RC(pieces_walk(path, map.data, at[5].off, at[5].off, at, 0), 0);
    /* A `to` inside a record, or past the file's end: torn there. */
    CHECK_RC(pieces_walk(path, map.data, at[100].off, at[60000].off + 5, at + 100, 59900),
             TF_E_OFL_TORN_RECORD);
    CHECK_RC(pieces_walk(path, map.data, at[N - 10].off, map.len + 100, at + N - 10, 10),
             TF_E_OFL_TORN_RECORD);
    tfo_pieces w;
    CHECK_RC(tfo_pieces_open(&w, tmp("none.ofl"), 0, 10), -ENOENT);
    free(at);
    tf_journal_map_close(&map);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tf_pump_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_same_walk();
    test_pump_args();
    test_first_ext();
    test_scan_ext();
    test_pieces();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tf_test_report();
}
