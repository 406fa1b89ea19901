/* Corruption: a small journal truncated at every byte offset and with a byte flipped at every
 * offset. Recovery (the in-memory scan and tf_journal_open on a real file) must always yield the
 * longest valid prefix, report where it ends, never crash, and leave a journal that accepts the
 * next append at the right journal_seq. Also run under the ASan build (make test-asan). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

#define N_RECORDS 16

static char dir[64];
static char path[128];
static uint8_t orig[4096];
static size_t orig_len;
static size_t bound[N_RECORDS + 1]; /* bound[i]: where record i starts; bound[N] = end */

static void write_file(const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    if (n)
        fwrite(b, 1, n, f);
    fclose(f);
}

static off_t file_size(void)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* The journal every case starts from, written by the real appender. */
static void make_original(void)
{
    unlink(path);
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 0x1234};
    CHECK_RC(tf_journal_open(path, &o, &j, NULL), 0);
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 11);
    bound[0] = TF_JOURNAL_HEADER_LEN;
    for (int i = 0; i < N_RECORDS; i++) {
        tf_ofl_msg m;
        tf_ofl_gen_next(&g, &m);
        if (i == 3) {
            memset(&m, 0, sizeof m);
            m.kind = TF_OFL_HEARTBEAT; /* the smallest record too */
        }
        CHECK_RC(tf_journal_append(j, &m, NULL), 0);
        bound[i + 1] = bound[i] + (size_t)tf_ofl_frame_size(m.kind) + TF_JOURNAL_CRC_LEN;
    }
    CHECK_RC(tf_journal_close(j), 0);
    FILE *f = fopen(path, "rb");
    orig_len = f ? fread(orig, 1, sizeof orig, f) : 0;
    if (f)
        fclose(f);
    CHECK_EQ(orig_len, bound[N_RECORDS]);
}

/* Whole records that end at or before len. */
static int records_within(size_t len)
{
    int k = 0;
    while (k < N_RECORDS && bound[k + 1] <= len)
        k++;
    return k;
}

/* The record holding byte off (-1: the header). */
static int record_at(size_t off)
{
    for (int k = 0; k < N_RECORDS; k++)
        if (off < bound[k + 1])
            return off < bound[k] ? -1 : k;
    return N_RECORDS;
}

/* Reopens the file as a journal, checks what it found, appends one record, and checks the
 * result walks whole with want + 1 records. want_err: what open must return. */
static int reopen_and_append(int want_records, size_t want_bytes, int want_err, int want_reason)
{
    int bad = 0;
    tf_journal *j;
    tf_journal_recovery rec;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE};
    int rc = tf_journal_open(path, &o, &j, &rec);
    bad |= rc != want_err;
    if (rc)
        return bad;
    bad |= rec.records != (uint64_t)want_records || rec.valid_bytes != want_bytes;
    bad |= want_reason ? rec.reason >= 0 : rec.reason != 0;
    bad |= file_size() != (off_t)want_bytes;
    tf_ofl_msg hb;
    memset(&hb, 0, sizeof hb);
    uint64_t seq = 0;
    bad |= tf_journal_append(j, &hb, &seq) != 0 || seq != (uint64_t)want_records;
    bad |= tf_journal_close(j) != 0;
    tf_journal_map m;
    tf_journal_scan_result s;
    bad |= tf_journal_map_open(path, &m) != 0;
    bad |= tf_journal_scan(m.data, m.len, &s) != 0 || s.records != (uint64_t)want_records + 1;
    tf_journal_map_close(&m);
    return bad;
}

static void test_truncation(void)
{
    int scan_bad = 0, file_bad = 0;
    for (size_t len = 0; len <= orig_len; len++) {
        /* exact-size heap copy: ASan sees any read past len */
        uint8_t *b = malloc(len ? len : 1);
        memcpy(b, orig, len);
        tf_journal_scan_result s;
        int rc = tf_journal_scan(b, len, &s);
        free(b);
        if (len < TF_OFL_JOURNAL_HEADER_LEN) {
            scan_bad |= rc != TF_E_OFL_BUFFER_TOO_SHORT || s.valid_bytes != 0;
        } else if (len < TF_OFL_JOURNAL_HEADER_LEN + 2) {
            /* The OFL1 header alone reads as a journal from before the protection block: whole
             * and empty at 15 bytes, a torn first record at 16. */
            scan_bad |= s.records != 0 || s.valid_bytes != TF_OFL_JOURNAL_HEADER_LEN;
            scan_bad |= len == TF_OFL_JOURNAL_HEADER_LEN ? rc != 0 : rc != TF_E_OFL_TORN_RECORD;
        } else if (len < TF_JOURNAL_HEADER_LEN) {
            scan_bad |= rc != TF_E_OFL_HEADER_DAMAGED || s.valid_bytes != 0; /* torn block */
        } else {
            int k = records_within(len);
            int whole = len == bound[k];
            scan_bad |= s.records != (uint64_t)k || s.valid_bytes != bound[k];
            scan_bad |= whole ? rc != 0 : rc != TF_E_OFL_TORN_RECORD;
        }
        if (scan_bad) {
            fprintf(stderr, "scan of a journal cut at %zu went wrong (rc %d)\n", len, rc);
            break;
        }

        write_file(orig, len);
        if (len == 0) {
            file_bad |= reopen_and_append(0, TF_JOURNAL_HEADER_LEN, 0, 0); /* fresh */
        } else if (len < TF_OFL_JOURNAL_HEADER_LEN) {
            file_bad |= reopen_and_append(0, 0, TF_E_OFL_BUFFER_TOO_SHORT, 0);
            file_bad |= file_size() != (off_t)len; /* untouched */
        } else if (len < TF_OFL_JOURNAL_HEADER_LEN + 2) {
            file_bad |= reopen_and_append(0, TF_OFL_JOURNAL_HEADER_LEN, 0,
                                          len != TF_OFL_JOURNAL_HEADER_LEN);
        } else if (len < TF_JOURNAL_HEADER_LEN) {
            file_bad |= reopen_and_append(0, 0, TF_E_OFL_HEADER_DAMAGED, 0);
            file_bad |= file_size() != (off_t)len; /* untouched */
        } else {
            int k = records_within(len);
            file_bad |= reopen_and_append(k, bound[k], 0, len != bound[k]);
        }
        if (file_bad) {
            fprintf(stderr, "recovery of a journal cut at %zu went wrong\n", len);
            break;
        }
    }
    CHECK(!scan_bad);
    CHECK(!file_bad);
}

static void test_flips(void)
{
    int scan_bad = 0, file_bad = 0;
    for (size_t off = 0; off < orig_len; off++) {
        for (int pattern = 0; pattern < 2; pattern++) {
            uint8_t x = pattern ? 0x01 : 0xff; /* one bit, and the whole byte */
            uint8_t *b = malloc(orig_len);
            memcpy(b, orig, orig_len);
            b[off] ^= x;
            tf_journal_scan_result s;
            int rc = tf_journal_scan(b, orig_len, &s);
            int k = record_at(off);
            int want_err = 0, want_records, hdr_bad = 0;
            if (k < 0) {
                /* the header: any byte of it, session id and clock kind included, is covered by
                 * the protection block's CRC32C; the file is refused and left alone */
                want_err = TF_E_OFL_HEADER_DAMAGED;
                hdr_bad = 1;
                want_records = hdr_bad ? 0 : N_RECORDS;
                scan_bad |= rc != want_err || s.records != (uint64_t)want_records;
                scan_bad |= s.valid_bytes != (hdr_bad ? 0 : orig_len);
            } else {
                /* a record: the valid prefix ends right before it, whatever the byte */
                want_records = k;
                scan_bad |= rc >= 0 || s.records != (uint64_t)k || s.valid_bytes != bound[k];
            }
            if (scan_bad) {
                fprintf(stderr, "scan with byte %zu ^ 0x%02x went wrong (rc %d, %" PRIu64 ")\n",
                        off, x, rc, s.records);
                free(b);
                break;
            }
            write_file(b, orig_len);
            free(b);
            if (hdr_bad)
                file_bad |= reopen_and_append(0, 0, want_err, 0) || file_size() != (off_t)orig_len;
            else
                file_bad |= reopen_and_append(want_records, k < 0 ? orig_len : bound[k], 0, k >= 0);
            if (file_bad) {
                fprintf(stderr, "recovery with byte %zu ^ 0x%02x went wrong\n", off, x);
                break;
            }
        }
        if (scan_bad || file_bad)
            break;
    }
    CHECK(!scan_bad);
    CHECK(!file_bad);
}

/* What a crash can leave after the last record: zeros (a file extended but not written),
 * garbage, a copy of an older record. Each is cut, the prefix kept. */
static void test_tails(void)
{
    uint8_t b[sizeof orig + 512];
    memcpy(b, orig, orig_len);
    static const size_t extra[] = {1, 2, 11, 100, 512};
    int bad = 0;
    for (size_t e = 0; e < sizeof extra / sizeof extra[0]; e++) {
        tf_journal_scan_result s;
        memset(b + orig_len, 0, extra[e]);
        tf_journal_scan(b, orig_len + extra[e], &s);
        bad |= s.error >= 0 || s.records != N_RECORDS || s.valid_bytes != orig_len;
        for (size_t i = 0; i < extra[e]; i++)
            b[orig_len + i] = (uint8_t)(i * 37 + 11);
        tf_journal_scan(b, orig_len + extra[e], &s);
        bad |= s.error >= 0 || s.records != N_RECORDS || s.valid_bytes != orig_len;
    }
    /* record 2 replayed after the end: CRC-valid, wrong journal_seq */
    size_t r2 = bound[3] - bound[2];
    memcpy(b + orig_len, orig + bound[2], r2);
    tf_journal_scan_result s;
    CHECK_RC(tf_journal_scan(b, orig_len + r2, &s), TF_E_OFL_SEQ_GAP);
    CHECK_EQ(s.records, N_RECORDS);
    write_file(b, orig_len + r2);
    CHECK(!reopen_and_append(N_RECORDS, orig_len, 0, 1));
    CHECK(!bad);
}

/* A journal from before the header protection (the 15-byte OFL1 header, then the records) is
 * still read whole, reopened and appended to in its own format; its header is not protected. */
static void test_old_format(void)
{
    uint8_t b[sizeof orig];
    tf_ofl_journal_header h = {.schema_version = TF_OFL_SCHEMA_VERSION, .session_id = 0x1234};
    size_t hl = (size_t)tf_ofl_journal_header_encode(b, sizeof b, &h);
    CHECK_EQ(hl, TF_OFL_JOURNAL_HEADER_LEN);
    size_t n = hl + (orig_len - bound[0]);
    memcpy(b + hl, orig + bound[0], orig_len - bound[0]);
    tf_journal_scan_result s;
    CHECK_RC(tf_journal_scan(b, n, &s), 0);
    CHECK_EQ(s.records, N_RECORDS);
    CHECK_EQ(s.valid_bytes, n);
    CHECK_EQ(s.header.session_id, 0x1234);
    tf_journal_reader r;
    CHECK_RC(tf_journal_reader_init(&r, b, n), 0);
    CHECK_EQ(r.pos, TF_OFL_JOURNAL_HEADER_LEN);
    write_file(b, n);
    CHECK(!reopen_and_append(N_RECORDS, n, 0, 0));
    CHECK_EQ(file_size(), (off_t)(n + (size_t)tf_ofl_frame_size(TF_OFL_HEARTBEAT) +
                                  TF_JOURNAL_CRC_LEN)); /* not rewritten */
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tf_jcorrupt_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/j.ofl", dir);
    make_original();
    printf("journal of %d records, %zu bytes: truncating at and flipping every offset\n", N_RECORDS,
           orig_len);
    test_truncation();
    test_flips();
    test_tails();
    test_old_format();
    unlink(path);
    rmdir(dir);
    return tf_test_report();
}
