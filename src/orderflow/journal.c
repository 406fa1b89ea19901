/* The CRC-checked OFL1 journal: appender with durability policies, reader, recovery. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/opts_size.h"
#include "orderflow/fio.h"
#include "orderflow/orderflow_internal.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

/* Records are staged here and handed to the kernel in large writes; a group of 4096 average
 * records (~64 bytes) is ~256 KiB, one or two writes. */
#define STAGE_BYTES (256u * 1024u)
#define DEFAULT_GROUP_FRAMES 4096u
#define DEFAULT_GROUP_US 1000u
/* tf_journal_opts a caller must have: up to flags (the first layout that carried a size). */
#define OPTS_MIN_SIZE TFU_FIELD_END(tf_journal_opts, flags)

struct tf_journal {
    int fd;
    int failed; /* sticky: after an I/O error nothing is trusted */
    tf_journal_durability durability;
    uint32_t group_max_frames;
    uint64_t group_max_ns;
    tf_ofl_journal_header header;
    uint64_t next_seq;       /* journal_seq of the next append */
    uint64_t durable_end;    /* records < this are fdatasync'd */
    uint64_t file_off;       /* bytes handed to the kernel */
    uint64_t oldest_pending; /* CLOCK_MONOTONIC ns of the oldest record not yet durable */
    tf_journal_stats stats;
    uint64_t ext_off, ext_seq; /* the first extension record the open found (UINT64_MAX: none) */
    size_t staged;
    uint8_t stage[STAGE_BYTES];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- reader --------------------------------------------------------------------------------- */

/* The header protection block after the 15-byte OFL1 header (docs/orderflow.md, "The journal
 * header"): "TFH", u8 version, u32 CRC32C of bytes 0..18. A journal written before it has its
 * first record's frame_len at bytes 15..16, and frame_len <= 126 makes byte 16 zero; 'F' (0x46)
 * is not zero after any one flipped bit, so byte 16 tells the two apart even in a damaged file. */
static const uint8_t prot_tag[3] = {'T', 'F', 'H'};
#define PROT_VERSION 1
#define PROT_CRC_AT (TF_OFL_JOURNAL_HEADER_LEN + 4)
_Static_assert(PROT_CRC_AT + 4 == TF_JOURNAL_HEADER_LEN, "protection block layout");

/* Checks the header at the start of b[0..len): its length (15 or 23) or an error. */
static int header_decode(const uint8_t *b, size_t len, tf_ofl_journal_header *h)
{
    if (len < TF_OFL_JOURNAL_HEADER_LEN)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    int prot = len > TF_OFL_JOURNAL_HEADER_LEN + 1 && b[TF_OFL_JOURNAL_HEADER_LEN + 1] != 0;
    if (prot) {
        int tag_ok = len >= TF_OFL_JOURNAL_HEADER_LEN + sizeof prot_tag &&
                     !memcmp(b + TF_OFL_JOURNAL_HEADER_LEN, prot_tag, sizeof prot_tag);
        int whole = len >= TF_JOURNAL_HEADER_LEN;
        if (!whole || !tag_ok || tf_crc32c(0, b, PROT_CRC_AT) != ofl_ld32(b + PROT_CRC_AT)) {
            /* Something that is not a journal at all (no magic, no tag) is not "damaged". */
            int magic_ok = !memcmp(b, "OFL1", 4);
            return !magic_ok && !tag_ok ? TF_E_OFL_WRONG_MAGIC : TF_E_OFL_HEADER_DAMAGED;
        }
    }
    int rc = tf_ofl_journal_header_decode(b, len, h);
    if (rc < 0)
        return rc;
    if (!prot)
        return TF_OFL_JOURNAL_HEADER_LEN;
    if (b[TF_OFL_JOURNAL_HEADER_LEN + 3] != PROT_VERSION)
        return TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION;
    return TF_JOURNAL_HEADER_LEN;
}

int tf_journal_reader_init(tf_journal_reader *r, const void *buf, size_t len)
{
    if (!r)
        return TF_E_NULL_ARG;
    memset(r, 0, sizeof *r);
    if (!buf && len)
        return r->error = TF_E_NULL_ARG;
    r->base = buf;
    r->len = len;
    int rc = header_decode(buf, len, &r->header);
    if (rc < 0)
        return r->error = rc;
    r->pos = (size_t)rc;
    return 0;
}

/* The walk state, held in registers for a whole batch (written back to the reader after). */
struct walk {
    const uint8_t *base;
    size_t len;
    size_t pos;
    uint64_t next_seq;
    const uint8_t *frame;
    size_t frame_len;
};

typedef uint32_t (*crc_fn)(const uint8_t *p, size_t n);

/* Length and CRC of the record at pos: its size, or the reason (the walk's and the pump's checks,
 * in this order). */
static inline __attribute__((always_inline)) long check_one(const uint8_t *b, size_t len,
                                                            size_t pos, crc_fn crc)
{
    size_t rem = len - pos;
    const uint8_t *p = b + pos;
    if (rem < 2)
        return TF_E_OFL_TORN_RECORD;
    size_t flen = ofl_ld16(p);
    if (flen < TF_OFL_FRAME_LEN_BASE)
        return TF_E_OFL_FRAME_LENGTH_TOO_SMALL;
    if (flen + 2 > TF_OFL_MAX_FRAME)
        return TF_E_OFL_FRAME_TOO_LARGE;
    size_t fsize = flen + 2;
    if (rem < fsize + TF_JOURNAL_CRC_LEN)
        return TF_E_OFL_TORN_RECORD;
    if (crc(p, fsize) != ofl_ld32(p + fsize))
        return TF_E_OFL_CRC_MISMATCH;
    return (long)(fsize + TF_JOURNAL_CRC_LEN);
}

/* One record at w->pos: 1, 0 at the end, or the reason it is not valid (w unchanged then). */
static inline __attribute__((always_inline)) int step(struct walk *w, tf_ofl_msg *msg, crc_fn crc,
                                                      int ext_fast)
{
    size_t rem = w->len - w->pos;
    if (rem == 0)
        return 0;
    long n = check_one(w->base, w->len, w->pos, crc);
    if (n < 0)
        return (int)n;
    const uint8_t *p = w->base + w->pos;
    size_t fsize = (size_t)n - TF_JOURNAL_CRC_LEN;
    if (ofl_ld64(p + 3) != w->next_seq) {
        /* A frame that does not decode is the more precise reason; *msg stays untouched. */
        tf_ofl_msg scratch;
        int rc = ofl_frame_decode(p, fsize, &scratch);
        return rc < 0 && !TF_JOURNAL_EXT_KIND(p[2]) ? rc : TF_E_OFL_SEQ_GAP;
    }
    /* With ext_fast (a scan past its first extension record: a journal of Keyed records), a
     * byte of the extension ranges that is no OFL1 kind, in a frame that is not bare, is taken
     * as one without the decode, which would end in tfo_frame_error with this very verdict
     * (check_one has passed every envelope check it makes before the kind's). (k & 0x70) ==
     * 0x10 is TF_JOURNAL_EXT_KIND(k): 0x10-0x1F, 0x90-0x9F. Not in the other walks: the test
     * costs an OFL1 record a few instructions. */
    unsigned k = p[2];
    int rc =
        ext_fast && !tfo_kind_table[k].ix && (k & 0x70) == 0x10 && fsize != TF_OFL_FRAME_HEADER_LEN
            ? ofl_kind_error((uint8_t)k)
            : ofl_frame_decode_in(p, fsize, rem, msg); /* readable past the frame */
    int ext = 0;
    if (rc < 0) {
        if (rc != TF_E_OFL_UNKNOWN_KIND || !TF_JOURNAL_EXT_KIND(p[2]))
            return rc;
        /* An extension record: carried whole, its payload is the venue layer's. */
        msg->kind = p[2];
        msg->journal_seq = w->next_seq;
        msg->session_id = 0;
        ext = 1;
    }
    w->frame = p;
    w->frame_len = fsize;
    w->pos += fsize + TF_JOURNAL_CRC_LEN;
    w->next_seq++;
    return 1 + ext;
}

/* Up to max records into msgs[0], msgs[stride], ... Returns the count, or (none decoded) 0 at
 * the end or the reason; the reason is kept in r->error. With ext_ends an extension record ends
 * the batch (r->frame views it, for the caller's decode); a scan, which needs no frame, passes 0
 * once it has noted the first one (a journal of Keyed records would walk one record a call). */
static inline __attribute__((always_inline)) int
walk_n(tf_journal_reader *r, tf_ofl_msg *msgs, size_t max, size_t stride, crc_fn crc, int ext_ends)
{
    struct walk w = {r->base, r->len, r->pos, r->next_seq, r->frame, r->frame_len};
    size_t n = 0;
    int rc = 0;
    while (n < max && (rc = step(&w, msgs + n * stride, crc, !ext_ends)) >= 1) {
        n++;
        if (rc == 2 && ext_ends)
            break; /* an extension record ends the batch: r->frame views it */
    }
    r->pos = w.pos;
    r->next_seq = w.next_seq;
    r->frame = w.frame;
    r->frame_len = w.frame_len;
    if (rc < 0)
        r->error = rc;
    return n ? (int)n : rc;
}

static uint32_t crc_sw(const uint8_t *p, size_t n)
{
    return tfo_crc32c_sw(0, p, n);
}

static int walk_sw(tf_journal_reader *r, tf_ofl_msg *msgs, size_t max, size_t stride, int ext_ends)
{
    return ext_ends ? walk_n(r, msgs, max, stride, crc_sw, 1)
                    : walk_n(r, msgs, max, stride, crc_sw, 0);
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* Inlined into walk_hw. A frame is at most TF_OFL_MAX_FRAME = 128 bytes (checked before), so
 * its whole words go through one jump into a straight run of crc32 instructions: no loop
 * counter, no per-word branch. Records at different positions are independent, so the
 * out-of-order core overlaps one record's crc32 chain with the next record's. */
_Static_assert(TF_OFL_MAX_FRAME == 128, "crc_hw unrolls 16 words");
__attribute__((target("sse4.2"), always_inline)) static inline uint32_t crc_hw(const uint8_t *p,
                                                                               size_t n)
{
    uint64_t c = 0xffffffffu;
    const uint8_t *e = p + (n & ~(size_t)7);
    switch (n >> 3) {
    case 16:
        c = _mm_crc32_u64(c, ofl_ld64(e - 128));
        __attribute__((fallthrough));
    case 15:
        c = _mm_crc32_u64(c, ofl_ld64(e - 120));
        __attribute__((fallthrough));
    case 14:
        c = _mm_crc32_u64(c, ofl_ld64(e - 112));
        __attribute__((fallthrough));
    case 13:
        c = _mm_crc32_u64(c, ofl_ld64(e - 104));
        __attribute__((fallthrough));
    case 12:
        c = _mm_crc32_u64(c, ofl_ld64(e - 96));
        __attribute__((fallthrough));
    case 11:
        c = _mm_crc32_u64(c, ofl_ld64(e - 88));
        __attribute__((fallthrough));
    case 10:
        c = _mm_crc32_u64(c, ofl_ld64(e - 80));
        __attribute__((fallthrough));
    case 9:
        c = _mm_crc32_u64(c, ofl_ld64(e - 72));
        __attribute__((fallthrough));
    case 8:
        c = _mm_crc32_u64(c, ofl_ld64(e - 64));
        __attribute__((fallthrough));
    case 7:
        c = _mm_crc32_u64(c, ofl_ld64(e - 56));
        __attribute__((fallthrough));
    case 6:
        c = _mm_crc32_u64(c, ofl_ld64(e - 48));
        __attribute__((fallthrough));
    case 5:
        c = _mm_crc32_u64(c, ofl_ld64(e - 40));
        __attribute__((fallthrough));
    case 4:
        c = _mm_crc32_u64(c, ofl_ld64(e - 32));
        __attribute__((fallthrough));
    case 3:
        c = _mm_crc32_u64(c, ofl_ld64(e - 24));
        __attribute__((fallthrough));
    case 2:
        c = _mm_crc32_u64(c, ofl_ld64(e - 16));
        __attribute__((fallthrough));
    case 1:
        c = _mm_crc32_u64(c, ofl_ld64(e - 8));
        __attribute__((fallthrough));
    default:
        break;
    }
    uint32_t c32 = (uint32_t)c;
    p = e;
    if (n & 4) {
        c32 = _mm_crc32_u32(c32, ofl_ld32(p));
        p += 4;
    }
    if (n & 2) {
        c32 = _mm_crc32_u16(c32, ofl_ld16(p));
        p += 2;
    }
    if (n & 1)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}

__attribute__((target("sse4.2"))) static int walk_hw(tf_journal_reader *r, tf_ofl_msg *msgs,
                                                     size_t max, size_t stride, int ext_ends)
{
    return ext_ends ? walk_n(r, msgs, max, stride, crc_hw, 1)
                    : walk_n(r, msgs, max, stride, crc_hw, 0);
}
#else
#define walk_hw walk_sw
#endif

static int walk(tf_journal_reader *r, tf_ofl_msg *msgs, size_t max, size_t stride, int ext_ends)
{
    if (r->error)
        return r->error;
    return tfo_crc32c_hw_available() ? walk_hw(r, msgs, max, stride, ext_ends)
                                     : walk_sw(r, msgs, max, stride, ext_ends);
}

int tf_journal_reader_next(tf_journal_reader *r, tf_ofl_msg *msg)
{
    if (!r || !msg)
        return TF_E_NULL_ARG;
    return walk(r, msg, 1, 1, 1);
}

int tf_journal_reader_next_batch(tf_journal_reader *r, tf_ofl_msg *msgs, int max)
{
    if (!r || (!msgs && max > 0))
        return TF_E_NULL_ARG;
    if (max <= 0)
        return r->error ? r->error : 0;
    if (!msgs)
        return TF_E_NULL_ARG;
    return walk(r, msgs, (size_t)max, 1, 1);
}

int tf_journal_reader_skip(tf_journal_reader *r)
{
    if (!r)
        return TF_E_NULL_ARG;
    int reason = r->error;
    if (reason != TF_E_OFL_UNKNOWN_KIND && reason != TF_E_OFL_RESERVED_KIND &&
        reason != TF_E_OFL_PAYLOAD_LENGTH && reason != TF_E_OFL_INVALID_SIDE &&
        reason != TF_E_OFL_INVALID_REASON)
        return reason ? reason : TF_E_INVALID_ARG;
    /* The walk stopped on a payload error; it also found the length and CRC good, but it checks
     * journal_seq only after them, so check it here before stepping over the record. */
    const uint8_t *p = r->base + r->pos;
    size_t fsize = (size_t)ofl_ld16(p) + 2;
    if (ofl_ld64(p + 3) != r->next_seq)
        return TF_E_OFL_SEQ_GAP;
    r->frame = p;
    r->frame_len = fsize;
    r->pos += fsize + TF_JOURNAL_CRC_LEN;
    r->next_seq++;
    r->error = 0;
    return 1;
}

int tf_journal_reader_seek(tf_journal_reader *r, uint64_t offset, uint64_t journal_seq)
{
    if (!r)
        return TF_E_NULL_ARG;
    if (!r->base && r->len)
        return r->error ? r->error : TF_E_INVALID_ARG;
    if (r->pos == 0) /* init failed (a bad header): nothing to walk */
        return r->error ? r->error : TF_E_INVALID_ARG;
    if (offset < TF_OFL_JOURNAL_HEADER_LEN || offset > r->len)
        return TF_E_INVALID_ARG;
    r->pos = (size_t)offset;
    r->next_seq = journal_seq;
    r->frame = NULL;
    r->frame_len = 0;
    r->error = 0;
    return 0;
}

/* ---- pump: the CRC walk on a second thread ------------------------------------------------- */

/* The walker thread checks each record's length and CRC32C (the costly part of the walk, and
 * the first touch of each mapped page) and publishes how far the checked prefix reaches
 * (`checked`); it runs ahead freely (it only reads). The caller's tf_journal_pump_next walks
 * the same records with the same code (walk_n: lengths, journal_seq, decode, extension records)
 * but with the CRC comparison replaced by a trusted one, over a view of the image cut at the
 * checked prefix; where that view ends, the walker's verdict applies: more to come, the end, or
 * the reason (torn, length, CRC) at exactly that record. step() checks the CRC before the
 * journal_seq and the decode, so a record the walker fails is never one the caller decodes:
 * the stops are the single-threaded walk's. The decoded records stay on the caller's core (a
 * first version handed decoded batches across cores, and the cache-line transfers cost more
 * than the decode saved). */
struct tf_journal_pump {
    /* Read only after open. */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t more;
    const uint8_t *base;
    size_t len, start;
    /* Written by the walker (each on a line of its own: the caller writes its reader for every
     * batch, and a shared line would bounce between the cores at every record). */
    _Alignas(64) size_t checked; /* atomic: records in [start, checked) are whole, good CRC */
    int done;                    /* atomic: the walker stopped at `checked`, for `reason` */
    int reason;                  /* (0: the end) */
    _Alignas(64) int waiting;    /* atomic, the caller's: it sleeps on `more` */
    int stop;                    /* atomic, close's: the walker is to stop (-1: no walker) */
    /* The caller's. */
    _Alignas(64) int ended; /* the caller's walk has ended (the last batch is repeated) */
    int batch;
    unsigned flags;
    tf_journal_reader r;
    tf_journal_batch out;
    tf_ofl_msg *msgs;
};

static uint32_t crc_trusted(const uint8_t *p, size_t n)
{
    return ofl_ld32(p + n); /* the walker has compared it */
}

static int walk_trusted(tf_journal_reader *r, tf_ofl_msg *msgs, size_t max)
{
    if (r->error)
        return r->error;
    return walk_n(r, msgs, max, 1, crc_trusted, 1);
}

static void publish(tf_journal_pump *p, size_t pos, int done, int reason)
{
    p->reason = reason;
    __atomic_store_n(&p->checked, pos, __ATOMIC_SEQ_CST);
    if (done)
        __atomic_store_n(&p->done, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->waiting, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->more);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Publishes every PUBLISH_EVERY records: often enough that the caller's first batch need not
 * wait long, rarely enough that the shared line is not contended. */
#define PUBLISH_EVERY 512

static inline __attribute__((always_inline)) void check_all(tf_journal_pump *p, crc_fn crc)
{
    const uint8_t *base = p->base;
    size_t pos = p->start, len = p->len;
    for (unsigned k = 1;; k++) {
        if (pos == len) {
            publish(p, pos, 1, 0);
            return;
        }
        long n = check_one(base, len, pos, crc);
        if (n < 0) {
            publish(p, pos, 1, (int)n);
            return;
        }
        pos += (size_t)n;
        if (k % PUBLISH_EVERY == 0) {
            publish(p, pos, 0, 0);
            if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
                return;
        }
    }
}

static void check_all_sw(tf_journal_pump *p)
{
    check_all(p, crc_sw);
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static void check_all_hw(tf_journal_pump *p)
{
    check_all(p, crc_hw);
}
#else
#define check_all_hw check_all_sw
#endif

static void *pump_main(void *arg)
{
    tf_journal_pump *p = arg;
    if (tfo_crc32c_hw_available())
        check_all_hw(p);
    else
        check_all_sw(p);
    return NULL;
}

int tf_journal_pump_open(const tf_journal_reader *from, int batch, unsigned flags,
                         tf_journal_pump **out)
{
    if (!from || !out)
        return TF_E_NULL_ARG;
    *out = NULL;
    if (batch < 1 || batch > 65536 || (flags & ~TF_JOURNAL_PUMP_SKIP))
        return TF_E_INVALID_ARG;
    size_t psize = (sizeof(tf_journal_pump) + 63) & ~(size_t)63;
    tf_journal_pump *p = aligned_alloc(64, psize);
    if (!p)
        return TF_E_NOMEM;
    memset(p, 0, psize);
    p->msgs = malloc((size_t)batch * sizeof *p->msgs);
    if (!p->msgs) {
        free(p);
        return TF_E_NOMEM;
    }
    p->batch = batch;
    p->flags = flags;
    p->r = *from;
    p->base = from->base;
    p->len = from->len;
    p->start = p->checked = from->pos;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->more, NULL);
    if (from->pos == 0 || from->error) { /* nothing to check: the caller's walk says why */
        p->done = 1;
        p->thread = pthread_self();
        p->stop = -1; /* no thread to join */
    } else {
        int rc = pthread_create(&p->thread, NULL, pump_main, p);
        if (rc) {
            pthread_mutex_destroy(&p->mu);
            pthread_cond_destroy(&p->more);
            free(p->msgs);
            free(p);
            return -rc;
        }
    }
    *out = p;
    return 0;
}

int tf_journal_pump_next(tf_journal_pump *p, const tf_journal_batch **out)
{
    if (!p || !out)
        return TF_E_NULL_ARG;
    tf_journal_batch *b = &p->out;
    *out = b;
    if (p->ended)
        return b->n;
    for (;;) {
        int done = __atomic_load_n(&p->done, __ATOMIC_SEQ_CST);
        size_t checked = __atomic_load_n(&p->checked, __ATOMIC_SEQ_CST);
        p->r.len = checked; /* the view: only what the walker has checked */
        int n = walk_trusted(&p->r, p->msgs, (size_t)p->batch);
        p->r.len = p->len;
        if (n == 0 && p->r.error == 0) {
            if (!done) { /* at the checked end, the walker still going: wait for it */
                pthread_mutex_lock(&p->mu);
                __atomic_store_n(&p->waiting, 1, __ATOMIC_SEQ_CST);
                while (__atomic_load_n(&p->checked, __ATOMIC_SEQ_CST) == p->r.pos &&
                       !__atomic_load_n(&p->done, __ATOMIC_SEQ_CST))
                    pthread_cond_wait(&p->more, &p->mu);
                __atomic_store_n(&p->waiting, 0, __ATOMIC_SEQ_CST);
                pthread_mutex_unlock(&p->mu);
                continue;
            }
            n = p->reason; /* the walker's verdict on the record at r.pos: 0 is the end */
            if (n)
                p->r.error = n;
        }
        b->skipped = 0;
        if (n < 0 && (p->flags & TF_JOURNAL_PUMP_SKIP) && tf_journal_reader_skip(&p->r) == 1)
            b->skipped = 1;
        b->n = b->skipped ? 0 : n;
        b->msgs = p->msgs;
        b->r = p->r;
        if (b->skipped || n > 0)
            return 1;
        p->ended = 1;
        return n;
    }
}

void tf_journal_pump_close(tf_journal_pump *p)
{
    if (!p)
        return;
    if (p->stop != -1) {
        __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
        pthread_join(p->thread, NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->more);
    free(p->msgs);
    free(p);
}

/* tf_journal_scan, also noting where the first extension record is (ext_off UINT64_MAX: none).
 * An extension record ends its batch (walk_n), so it is always the last record of one. */
static int scan_image(const void *buf, size_t len, tf_journal_scan_result *res, uint64_t *ext_off,
                      uint64_t *ext_seq)
{
    memset(res, 0, sizeof *res);
    res->total_bytes = len;
    *ext_off = UINT64_MAX;
    *ext_seq = 0;
    tf_journal_reader r;
    int rc = tf_journal_reader_init(&r, buf, len);
    if (rc == 0) {
        /* A small rotating window rather than one slot: with one slot rewritten for every
         * record the walk measured 3.5 or 6.4 ns/record depending on the run (probably
         * store/load address aliasing with the mapped data); with the window, 3.6 steadily. */
        tf_ofl_msg m[16];
        while ((rc = walk(&r, m, 16, 1, *ext_off == UINT64_MAX)) > 0)
            if (*ext_off == UINT64_MAX && TF_JOURNAL_EXT_KIND(m[rc - 1].kind)) {
                *ext_off = (uint64_t)(r.frame - r.base);
                *ext_seq = r.next_seq - 1;
            }
    }
    res->error = rc;
    res->records = r.next_seq;
    res->valid_bytes = r.pos;
    res->header = r.header;
    return rc;
}

/* Reads n bytes at off (on through short reads and EINTR): 0, or -errno (-EIO: the file ended
 * early, it shrank under us). */
static int pread_all(int fd, uint8_t *b, size_t n, uint64_t off)
{
    while (n) {
        ssize_t g = pread(fd, b, n, (off_t)off);
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            return g < 0 ? -errno : -EIO;
        b += g;
        n -= (size_t)g;
        off += (uint64_t)g;
    }
    return 0;
}

/* scan_image over the first `size` bytes of the file fd, read piece by piece into one buffer:
 * the same walk (walk(): lengths, CRC, journal_seq, decode), the same stops, the same result.
 * A record cut by the end of a piece reads as torn there; it is walked again from its start
 * once the next piece is in. Why not a mapping: walking a mapping of a large file costs a page
 * fault and a TLB miss per page on first touch, the copy out of the page cache does not (a
 * 720 MB journal of 10 M commands: 0.6 s of CPU mapped, 0.13 s read, on the machine of
 * docs/benchmarks.md). */
#define SCAN_PIECE (1u << 20)
static int scan_file(int fd, size_t size, tf_journal_scan_result *res, uint64_t *ext_off,
                     uint64_t *ext_seq)
{
    memset(res, 0, sizeof *res);
    res->total_bytes = size;
    *ext_off = UINT64_MAX;
    *ext_seq = 0;
    size_t cap = SCAN_PIECE + TF_JOURNAL_MAX_RECORD;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return res->error = TF_E_NOMEM;
    size_t have = size < cap ? size : cap;
    int rc = pread_all(fd, buf, have, 0);
    tf_journal_reader r;
    memset(&r, 0, sizeof r);
    if (!rc)
        rc = tf_journal_reader_init(&r, buf, have);
    uint64_t at = 0; /* the file offset of buf[0] */
    if (rc) {
        res->error = rc;
        res->header = r.header;
        free(buf);
        return rc;
    }
    tf_ofl_msg m[16];
    for (;;) {
        while ((rc = walk(&r, m, 16, 1, *ext_off == UINT64_MAX)) > 0)
            if (*ext_off == UINT64_MAX && TF_JOURNAL_EXT_KIND(m[rc - 1].kind)) {
                *ext_off = at + (uint64_t)(r.frame - r.base);
                *ext_seq = r.next_seq - 1;
            }
        if ((rc && rc != TF_E_OFL_TORN_RECORD) || at + have == size)
            break; /* a stop inside the file, or its end */
        size_t keep = have - r.pos;
        memmove(buf, buf + r.pos, keep);
        at += r.pos;
        size_t more = size - (size_t)at - keep;
        if (more > cap - keep)
            more = cap - keep;
        int io = pread_all(fd, buf + keep, more, at + keep);
        if (io) {
            rc = io;
            break;
        }
        have = keep + more;
        r.base = buf;
        r.len = have;
        r.pos = 0;
        r.frame = NULL;
        r.frame_len = 0;
        r.error = 0;
    }
    res->error = rc;
    res->records = r.next_seq;
    res->valid_bytes = at + r.pos;
    res->header = r.header;
    free(buf);
    return rc;
}

int tf_journal_scan(const void *buf, size_t len, tf_journal_scan_result *res)
{
    uint64_t off, seq;
    return scan_image(buf, len, res, &off, &seq);
}

int tf_journal_map_open(const char *path, tf_journal_map *m)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = -errno;
            close(fd);
            return e;
        }
        /* A walk reads front to back once: larger read-ahead, pages dropped behind it (measured
         * here: a cold 64 MB journal walks in half the time). Only a hint. */
        madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
        m->data = p;
        m->len = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

void tf_journal_map_close(tf_journal_map *m)
{
    if (m && m->data)
        munmap((void *)m->data, m->len);
    if (m) {
        m->data = NULL;
        m->len = 0;
    }
}

/* ---- appender ------------------------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n, uint64_t off, tf_journal_stats *st)
{
    while (n) {
        ssize_t w = tfo_fio->pwrite(fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        st->writes++;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int fail(tf_journal *j, int rc)
{
    j->failed = rc;
    return rc;
}

int tf_journal_flush(tf_journal *j)
{
    if (!j)
        return TF_E_NULL_ARG;
    if (j->failed)
        return TF_E_OFL_JOURNAL_FAILED;
    if (!j->staged)
        return 0;
    int rc = write_all(j->fd, j->stage, j->staged, j->file_off, &j->stats);
    if (rc)
        return fail(j, rc);
    j->file_off += j->staged;
    j->staged = 0;
    return 0;
}

int tf_journal_sync(tf_journal *j)
{
    int rc = tf_journal_flush(j);
    if (rc)
        return rc;
    if (j->durable_end == j->next_seq)
        return 0;
    if (tfo_fio->fdatasync(j->fd) != 0)
        return fail(j, -errno);
    j->stats.syncs++;
    j->durable_end = j->next_seq;
    return 0;
}

int tf_journal_poll(tf_journal *j)
{
    if (!j)
        return TF_E_NULL_ARG;
    if (j->failed)
        return TF_E_OFL_JOURNAL_FAILED;
    if (j->durability != TF_JOURNAL_GROUP || j->durable_end == j->next_seq)
        return 0;
    if (now_ns() - j->oldest_pending < j->group_max_ns)
        return 0;
    uint64_t made = j->next_seq - j->durable_end;
    int rc = tf_journal_sync(j);
    if (rc)
        return rc;
    return made > INT32_MAX ? INT32_MAX : (int)made;
}

/* After a record is staged: apply the durability policy. */
static int after_append(tf_journal *j)
{
    j->next_seq++;
    j->stats.appended++;
    switch (j->durability) {
    case TF_JOURNAL_EVERY:
        return tf_journal_sync(j);
    case TF_JOURNAL_GROUP: {
        uint64_t pending = j->next_seq - j->durable_end;
        uint64_t t = now_ns();
        if (pending == 1)
            j->oldest_pending = t;
        if (pending >= j->group_max_frames || t - j->oldest_pending >= j->group_max_ns)
            return tf_journal_sync(j);
        return 0;
    }
    default:
        return 0;
    }
}

/* Room for one more record in the stage. */
static int reserve(tf_journal *j)
{
    if (j->staged + TF_JOURNAL_MAX_RECORD <= STAGE_BYTES)
        return 0;
    return tf_journal_flush(j);
}

int tf_journal_append(tf_journal *j, const tf_ofl_msg *msg, uint64_t *seq)
{
    if (!j)
        return TF_E_NULL_ARG;
    if (j->failed)
        return TF_E_OFL_JOURNAL_FAILED;
    int rc = reserve(j);
    if (rc)
        return rc;
    uint8_t *p = j->stage + j->staged;
    int n = tf_ofl_frame_encode(p, TF_OFL_MAX_FRAME, msg);
    if (n < 0)
        return n;
    ofl_st64(p + 3, j->next_seq);
    ofl_st32(p + n, tf_crc32c(0, p, (size_t)n));
    j->staged += (size_t)n + TF_JOURNAL_CRC_LEN;
    if (seq)
        *seq = j->next_seq;
    return after_append(j);
}

int tf_journal_append_frame(tf_journal *j, const void *frame, size_t len)
{
    if (!j)
        return TF_E_NULL_ARG;
    if (j->failed)
        return TF_E_OFL_JOURNAL_FAILED;
    tf_ofl_msg m;
    int n = tf_ofl_frame_decode(frame, len, &m);
    if (n == TF_E_OFL_UNKNOWN_KIND && TF_JOURNAL_EXT_KIND(((const uint8_t *)frame)[2])) {
        /* An extension record: its envelope is checked here, its payload by the venue layer. */
        const uint8_t *f = frame;
        n = (int)(2 + ((size_t)f[0] | (size_t)f[1] << 8));
        if (n < TF_OFL_FRAME_HEADER_LEN || n > TF_OFL_MAX_FRAME || len < (size_t)n)
            return TF_E_OFL_PAYLOAD_LENGTH;
        m.journal_seq = ofl_ld64(f + 3);
    }
    if (n < 0)
        return n;
    if ((size_t)n != len)
        return TF_E_OFL_PAYLOAD_LENGTH;
    if (m.journal_seq != j->next_seq)
        return TF_E_OFL_SEQ_GAP;
    int rc = reserve(j);
    if (rc)
        return rc;
    uint8_t *p = j->stage + j->staged;
    memcpy(p, frame, len);
    ofl_st32(p + len, tf_crc32c(0, p, len));
    j->staged += len + TF_JOURNAL_CRC_LEN;
    return after_append(j);
}

int tf_journal_first_ext(const tf_journal *j, uint64_t *offset, uint64_t *journal_seq)
{
    if (!j || !offset || !journal_seq)
        return TF_E_NULL_ARG;
    *offset = j->ext_off;
    *journal_seq = j->ext_seq;
    return j->ext_off != UINT64_MAX;
}

uint64_t tf_journal_next_seq(const tf_journal *j)
{
    return j ? j->next_seq : 0;
}

uint64_t tf_journal_durable_end(const tf_journal *j)
{
    return j ? j->durable_end : 0;
}

int tf_journal_is_durable(const tf_journal *j, uint64_t journal_seq)
{
    return j && journal_seq < j->durable_end;
}

const tf_ofl_journal_header *tf_journal_header(const tf_journal *j)
{
    return j ? &j->header : NULL;
}

void tf_journal_get_stats(const tf_journal *j, tf_journal_stats *out)
{
    if (!out)
        return;
    if (!j) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = j->stats;
    out->bytes = j->file_off + j->staged;
}

/* Writes the header and its protection block in one write, then syncs the file and its
 * directory. On failure the file is cut back to empty, so that opening it again starts afresh. */
static int create_header(tf_journal *j, const char *path, const tf_journal_opts *o)
{
    j->header.schema_version = TF_OFL_SCHEMA_VERSION;
    j->header.session_id = o->session_id;
    j->header.clock_kind = o->clock_kind;
    uint8_t h[TF_JOURNAL_HEADER_LEN];
    int rc = tf_ofl_journal_header_encode(h, sizeof h, &j->header);
    if (rc < 0)
        return rc;
    memcpy(h + TF_OFL_JOURNAL_HEADER_LEN, prot_tag, sizeof prot_tag);
    h[TF_OFL_JOURNAL_HEADER_LEN + 3] = PROT_VERSION;
    ofl_st32(h + PROT_CRC_AT, tf_crc32c(0, h, PROT_CRC_AT));
    rc = write_all(j->fd, h, sizeof h, 0, &j->stats);
    if (!rc && tfo_fio->fdatasync(j->fd) != 0)
        rc = -errno;
    if (!rc) {
        j->stats.syncs++;
        j->file_off = sizeof h;
        rc = tfo_sync_parent_dir(path);
    }
    if (rc)
        (void)tfo_fio->ftruncate(j->fd, 0); /* best effort: an error is already being returned */
    return rc;
}

/* Finds the valid prefix of an existing journal and cuts what follows it. */
static int recover(tf_journal *j, const tf_journal_opts *o, size_t size, tf_journal_recovery *rec)
{
    tf_journal_scan_result s;
    scan_file(j->fd, size, &s, &j->ext_off, &j->ext_seq);
    if (s.valid_bytes == 0) /* the header itself is bad: not ours to touch */
        return s.error;
    if (s.error == TF_E_NOMEM || (s.error < 0 && s.error > TF_E_BASE))
        return s.error; /* the file could not be read: that is not damage to cut */
    if (o->session_id && s.header.session_id != o->session_id)
        return TF_E_OFL_SESSION_MISMATCH;
    rec->reason = s.error;
    rec->records = s.records;
    rec->valid_bytes = s.valid_bytes;
    if (s.error && (o->flags & TF_JOURNAL_NO_TRUNCATE))
        return s.error;
    if (s.valid_bytes < size && tfo_fio->ftruncate(j->fd, (off_t)s.valid_bytes) != 0)
        return -errno;
    /* A previous process may have written without syncing: make all kept records durable. */
    if (tfo_fio->fdatasync(j->fd) != 0)
        return -errno;
    j->stats.syncs++;
    j->header = s.header;
    j->next_seq = j->durable_end = s.records;
    j->file_off = s.valid_bytes;
    return 0;
}

int tf_journal_open(const char *path, const tf_journal_opts *opts, tf_journal **out,
                    tf_journal_recovery *rec)
{
    if (!path || !out)
        return TF_E_NULL_ARG;
    *out = NULL;
    tf_journal_opts o = {.durability = TF_JOURNAL_GROUP};
    if (opts) {
        int rc = tfu_opts_load(&o, sizeof o, opts, OPTS_MIN_SIZE);
        if (rc)
            return rc;
    }
    if (o.durability > TF_JOURNAL_EVERY || o.clock_kind > TF_OFL_CLOCK_WALL_NS)
        return TF_E_INVALID_ARG;
    tf_journal_recovery rtmp;
    if (!rec)
        rec = &rtmp;
    memset(rec, 0, sizeof *rec);

    tf_journal *j = malloc(sizeof *j);
    if (!j)
        return TF_E_NOMEM;
    memset(j, 0, offsetof(tf_journal, stage));
    j->ext_off = UINT64_MAX;
    j->durability = o.durability;
    j->group_max_frames = o.group_max_frames ? o.group_max_frames : DEFAULT_GROUP_FRAMES;
    j->group_max_ns = (uint64_t)(o.group_max_us ? o.group_max_us : DEFAULT_GROUP_US) * 1000u;
    j->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int rc = j->fd < 0 ? -errno : 0;
    if (!rc && flock(j->fd, LOCK_EX | LOCK_NB) != 0)
        rc = -errno;
    struct stat st;
    if (!rc && fstat(j->fd, &st) != 0)
        rc = -errno;
    if (!rc && !S_ISREG(st.st_mode))
        rc = -EINVAL;
    if (!rc) {
        rec->file_bytes = (uint64_t)st.st_size;
        if (st.st_size == 0) {
            rec->created = 1;
            rc = create_header(j, path, &o);
            rec->valid_bytes = j->file_off;
        } else {
            rc = recover(j, &o, (size_t)st.st_size, rec);
        }
    }
    if (rc) {
        if (j->fd >= 0)
            close(j->fd);
        free(j);
        return rc;
    }
    *out = j;
    return 0;
}

int tf_journal_close(tf_journal *j)
{
    if (!j)
        return 0;
    int rc = j->failed ? TF_E_OFL_JOURNAL_FAILED : tf_journal_sync(j);
    if (close(j->fd) != 0 && !rc)
        rc = -errno;
    free(j);
    return rc;
}
