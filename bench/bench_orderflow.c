/* Order-flow benchmarks (issue 5): OFL1 decode/encode per kind and envelope, journal walk (10k
 * in cache, 1M cold), append throughput per durability policy with fdatasync p50/p99, datagram
 * ingress on loopback. Prints a Markdown table and writes JSON.
 *
 *   bench_orderflow [--quick] [--only codec|walk|flow|append|datagram] [--pin CPU] [--dir DIR]
 *                   [OUT.json]
 *
 * OUT.json defaults to build/report/orderflow.json; journal files go to DIR (default: OUT's
 * directory) and are deleted afterwards. --quick runs everything small (seconds): the smoke mode
 * a test runs so this program cannot rot. Benchmarks never fail on timing; the exit status is
 * non-zero only when something did not work (a decode error, a journal that does not verify).
 *
 * Timing: CLOCK_MONOTONIC around loops of many frames; each figure is the median (min-max) of
 * REPS repetitions. Decode loops add a decoded field to a checksum that is printed, so the work
 * cannot be optimized away (and the codec is a separate translation unit in any case). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tollfree/datagram.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"
#include "bench_args.h"
#include "bench_machine.h"
#include "bench_outdir.h"

#define MAXREPS 15

static int quick;
static const char *only; /* run one section: codec, walk, flow, append, datagram */
static int reps = 7;
static uint64_t checksum;
static int failures;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct stat3 {
    double med, min, max;
} stat3;

static stat3 summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stat3 s = {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1]};
    return s;
}

/* ---- results: Markdown rows now, JSON at the end ------------------------------------------ */

static FILE *json;
static int json_first = 1;

static void json_row(const char *section, const char *name, const char *unit, stat3 s,
                     const char *extra)
{
    fprintf(json, "%s\n    {\"section\": \"%s\", \"name\": \"%s\", \"unit\": \"%s\", ",
            json_first ? "" : ",", section, name, unit);
    fprintf(json, "\"median\": %.4f, \"min\": %.4f, \"max\": %.4f%s%s}", s.med, s.min, s.max,
            extra && *extra ? ", " : "", extra ? extra : "");
    json_first = 0;
}

/* ---- codec ---------------------------------------------------------------------------------- */

static const uint8_t kinds[11] = {
    TF_OFL_HEARTBEAT,        TF_OFL_NEW_LIMIT, TF_OFL_NEW_MARKET, TF_OFL_CANCEL_BY_ORDER,
    TF_OFL_CANCEL_BY_CLIENT, TF_OFL_REPLACE,   TF_OFL_ACCEPTED,   TF_OFL_REJECTED,
    TF_OFL_REPLACED,         TF_OFL_CANCELED,  TF_OFL_TRADE,
};

static uint64_t rng = 0x12345678;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A message of `kind` with random field values (valid side/reason). */
static void make_msg(int kind, uint64_t seq, tf_ofl_msg *m)
{
    memset(m, 0, sizeof *m);
    m->kind = (uint8_t)kind;
    m->journal_seq = seq;
    m->session_id = 0x5e55;
    uint64_t *w = (uint64_t *)(void *)&m->new_limit;
    for (size_t i = 0; i < sizeof(tf_ofl_trade) / 8; i++)
        w[i] = rnd() % 1000000;
    m->new_limit.side = (uint8_t)(rnd() & 1);
    if (kind == TF_OFL_NEW_MARKET)
        m->new_market.side = (uint8_t)(rnd() & 1);
    if (kind == TF_OFL_REJECTED)
        m->rejected.reason = (uint8_t)(rnd() % 5);
}

#define NFRAMES 256

typedef struct codec_set {
    tf_ofl_msg msgs[NFRAMES];
    uint8_t stream[NFRAMES * TF_OFL_MAX_FRAME];
    size_t stream_len;
    uint8_t dgram[NFRAMES][128];
    uint16_t dgram_len[NFRAMES];
} codec_set;

static codec_set cs;

static void prepare(int kind)
{
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 99);
    cs.stream_len = 0;
    for (int i = 0; i < NFRAMES; i++) {
        if (kind < 0)
            tf_ofl_gen_next(&g, &cs.msgs[i]); /* the mixed cycle */
        else
            make_msg(kind, (uint64_t)i, &cs.msgs[i]);
        int n = tf_ofl_frame_encode(cs.stream + cs.stream_len, TF_OFL_MAX_FRAME, &cs.msgs[i]);
        int d = tf_ofl_datagram_encode(cs.dgram[i], sizeof cs.dgram[i], &cs.msgs[i]);
        if (n < 0 || d < 0) {
            fprintf(stderr, "bench: encode failed (%s)\n", tf_strerror(n < 0 ? n : d));
            failures++;
            return;
        }
        cs.stream_len += (size_t)n;
        cs.dgram_len[i] = (uint16_t)d;
    }
}

/* First payload word (command_seq / event_seq of every kind but Heartbeat, whose decode writes
 * no payload: then the word left by the previous message, or the zero the loops start from). */
static inline uint64_t first_word(const tf_ofl_msg *m)
{
    uint64_t v;
    memcpy(&v, &m->new_limit, sizeof v);
    return v;
}

static double run_stream_decode(long iters)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    uint64_t sum = 0;
    double t0 = now_s();
    for (long it = 0; it < iters; it++) {
        const uint8_t *p = cs.stream, *end = cs.stream + cs.stream_len;
        while (p < end) {
            int n = tf_ofl_frame_decode(p, (size_t)(end - p), &m);
            if (n <= 0) {
                failures++;
                return 0;
            }
            sum += m.journal_seq + first_word(&m);
            p += n;
        }
    }
    double t = now_s() - t0;
    checksum += sum;
    return t * 1e9 / ((double)iters * NFRAMES);
}

static double run_dgram_decode(long iters)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    uint64_t sum = 0;
    double t0 = now_s();
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < NFRAMES; i++) {
            if (tf_ofl_datagram_decode(cs.dgram[i], cs.dgram_len[i], &m) <= 0) {
                failures++;
                return 0;
            }
            sum += m.journal_seq + first_word(&m);
        }
    double t = now_s() - t0;
    checksum += sum;
    return t * 1e9 / ((double)iters * NFRAMES);
}

static uint8_t encbuf[NFRAMES * TF_OFL_MAX_DATAGRAM];

static double run_encode(long iters, int datagram)
{
    uint64_t sum = 0;
    double t0 = now_s();
    for (long it = 0; it < iters; it++) {
        uint8_t *p = encbuf;
        for (int i = 0; i < NFRAMES; i++) {
            int n = datagram ? tf_ofl_datagram_encode(p, TF_OFL_MAX_DATAGRAM, &cs.msgs[i])
                             : tf_ofl_frame_encode(p, TF_OFL_MAX_FRAME, &cs.msgs[i]);
            sum += (uint64_t)n;
            p += n;
        }
        sum += encbuf[it % 64];
    }
    double t = now_s() - t0;
    checksum += sum;
    return t * 1e9 / ((double)iters * NFRAMES);
}

static void bench_codec(void)
{
    long iters = quick ? 200 : 20000;
    printf("\n### Codec, hot loop (%d frames per pass, %ld passes per repetition)\n\n", NFRAMES,
           iters);
    printf("| kind | bytes (stream/datagram) | decode stream ns | decode datagram ns | encode "
           "stream ns | encode datagram ns |\n|---|---|---|---|---|---|\n");
    for (int k = -1; k < 11; k++) {
        int kind = k < 0 ? -1 : kinds[k];
        prepare(kind);
        const char *name = k < 0 ? "mixed cycle" : tf_ofl_kind_name(kind);
        double v[4][MAXREPS];
        /* interleaved: every repetition runs all four */
        for (int r = 0; r < reps; r++) {
            v[0][r] = run_stream_decode(iters);
            v[1][r] = run_dgram_decode(iters);
            v[2][r] = run_encode(iters, 0);
            v[3][r] = run_encode(iters, 1);
        }
        stat3 s[4];
        static const char *ops[4] = {"decode stream", "decode datagram", "encode stream",
                                     "encode datagram"};
        char label[64];
        for (int i = 0; i < 4; i++) {
            s[i] = summarize(v[i], reps);
            snprintf(label, sizeof label, "%s %s", ops[i], name);
            json_row("codec", label, "ns/frame", s[i], NULL);
        }
        if (k < 0)
            printf("| %s | avg %.1f / %.1f ", name, (double)cs.stream_len / NFRAMES,
                   (double)cs.stream_len / NFRAMES + 6);
        else
            printf("| %s | %d / %d ", name, tf_ofl_frame_size(kind), tf_ofl_datagram_size(kind));
        for (int i = 0; i < 4; i++)
            printf("| %.2f (%.2f-%.2f) ", s[i].med, s[i].min, s[i].max);
        printf("|\n");
    }
}

/* ---- journal -------------------------------------------------------------------------------- */

static char dir[1024];

static const char *jpath(const char *name)
{
    static char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Writes a mixed-cycle journal of n records with policy NONE (synced at close). */
static int write_journal(const char *path, long n)
{
    unlink(path);
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 1};
    int rc = tf_journal_open(path, &o, &j, NULL);
    if (rc) {
        fprintf(stderr, "bench: %s: %s\n", path, tf_strerror(rc));
        failures++;
        return rc;
    }
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 1);
    tf_ofl_msg m;
    for (long i = 0; i < n && !rc; i++) {
        tf_ofl_gen_next(&g, &m);
        rc = tf_journal_append(j, &m, NULL);
    }
    int rc2 = tf_journal_close(j);
    if (rc || rc2) {
        failures++;
        return rc ? rc : rc2;
    }
    return 0;
}

/* Walks a whole image with the reader; returns records, adds to the checksum. */
static long walk(const uint8_t *data, size_t len)
{
    tf_journal_reader r;
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    uint64_t sum = 0;
    long n = 0;
    if (tf_journal_reader_init(&r, data, len))
        return -1;
    while (tf_journal_reader_next(&r, &m) == 1) {
        sum += m.journal_seq + first_word(&m);
        n++;
    }
    checksum += sum;
    return r.error ? -1 : n;
}

#define BATCH 64

/* The same with the batch reader: the fast path. */
static long walk_batch(const uint8_t *data, size_t len)
{
    static tf_ofl_msg m[BATCH];
    tf_journal_reader r;
    uint64_t sum = 0;
    long n = 0;
    int k;
    if (tf_journal_reader_init(&r, data, len))
        return -1;
    while ((k = tf_journal_reader_next_batch(&r, m, BATCH)) > 0) {
        for (int i = 0; i < k; i++)
            sum += m[i].journal_seq + first_word(&m[i]);
        n += k;
    }
    checksum += sum;
    return k < 0 ? -1 : n;
}

static void bench_walk(void)
{
    long small = quick ? 2000 : 10000, big = quick ? 20000 : 1000000;
    printf("\n### Journal walk (reader: length, CRC32C, decode, contiguous journal_seq)\n\n");
    printf("| walk | records | bytes | ns/frame median (min-max) | M frames/s |\n");
    printf("|---|---|---|---|---|\n");

    /* in cache: the same mapped image walked again and again */
    const char *p = jpath("walk_small.ofl");
    if (write_journal(p, small))
        return;
    tf_journal_map map;
    if (tf_journal_map_open(p, &map)) {
        failures++;
        return;
    }
    double v[MAXREPS];
    long passes = quick ? 20 : 500;
    walk(map.data, map.len); /* fault the pages in */
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (long i = 0; i < passes; i++)
            if (walk(map.data, map.len) != small)
                failures++;
        v[r] = (now_s() - t0) * 1e9 / ((double)passes * (double)small);
    }
    stat3 s = summarize(v, reps);
    printf("| %ldk, in cache (reader_next) | %ld | %zu | %.2f (%.2f-%.2f) | %.0f |\n", small / 1000,
           small, map.len, s.med, s.min, s.max, 1e3 / s.med);
    char extra[128];
    snprintf(extra, sizeof extra, "\"records\": %ld, \"bytes\": %zu", small, map.len);
    json_row("journal_walk", "in cache", "ns/frame", s, extra);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (long i = 0; i < passes; i++)
            if (walk_batch(map.data, map.len) != small)
                failures++;
        v[r] = (now_s() - t0) * 1e9 / ((double)passes * (double)small);
    }
    s = summarize(v, reps);
    printf("| %ldk, in cache (reader_next_batch x%d) | %ld | %zu | %.2f (%.2f-%.2f) | %.0f |\n",
           small / 1000, BATCH, small, map.len, s.med, s.min, s.max, 1e3 / s.med);
    json_row("journal_walk", "in cache, batch", "ns/frame", s, extra);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (long i = 0; i < passes; i++) {
            tf_journal_scan_result sr;
            if (tf_journal_scan(map.data, map.len, &sr) || sr.records != (uint64_t)small)
                failures++;
        }
        v[r] = (now_s() - t0) * 1e9 / ((double)passes * (double)small);
    }
    s = summarize(v, reps);
    printf("| %ldk, in cache (tf_journal_scan) | %ld | %zu | %.2f (%.2f-%.2f) | %.0f |\n",
           small / 1000, small, map.len, s.med, s.min, s.max, 1e3 / s.med);
    json_row("journal_walk", "in cache, scan", "ns/frame", s, extra);
    tf_journal_map_close(&map);
    unlink(p);

    /* cold: evict the file from the page cache (POSIX_FADV_DONTNEED after it was synced), map
     * it afresh and walk once; then walk the same mapping again (warm pages, cold CPU caches). */
    p = jpath("walk_big.ofl");
    if (write_journal(p, big))
        return;
    double cold[MAXREPS], fresh[MAXREPS], warm[MAXREPS];
    size_t bytes = 0;
    for (int r = 0; r < reps; r++) {
        int fd = open(p, O_RDONLY);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
        /* cold: from the disk */
        double t0 = now_s();
        if (tf_journal_map_open(p, &map)) {
            failures++;
            return;
        }
        long n = walk_batch(map.data, map.len);
        cold[r] = (now_s() - t0) * 1e9 / (double)big;
        /* warm mapping: pages mapped, CPU caches cold (64 MB > L3 of this VM) */
        t0 = now_s();
        long n2 = walk_batch(map.data, map.len);
        warm[r] = (now_s() - t0) * 1e9 / (double)big;
        tf_journal_map_close(&map);
        /* fresh mapping of a file in the page cache: page faults, no disk */
        t0 = now_s();
        if (tf_journal_map_open(p, &map)) {
            failures++;
            return;
        }
        long n3 = walk_batch(map.data, map.len);
        fresh[r] = (now_s() - t0) * 1e9 / (double)big;
        bytes = map.len;
        tf_journal_map_close(&map);
        if (n != big || n2 != big || n3 != big)
            failures++;
    }
    const char *label = quick ? "20k" : "1M";
    snprintf(extra, sizeof extra, "\"records\": %ld, \"bytes\": %zu", big, bytes);
    s = summarize(cold, reps);
    printf("| %s, cold: page cache dropped (fadvise DONTNEED), mmap + disk reads + batch walk | "
           "%ld | %zu | %.2f (%.2f-%.2f) | %.0f |\n",
           label, big, bytes, s.med, s.min, s.max, 1e3 / s.med);
    json_row("journal_walk", "cold from disk", "ns/frame", s, extra);
    s = summarize(fresh, reps);
    printf("| %s, page cache hot, fresh mmap (page faults) + batch walk | %ld | %zu | %.2f "
           "(%.2f-%.2f) | %.0f |\n",
           label, big, bytes, s.med, s.min, s.max, 1e3 / s.med);
    json_row("journal_walk", "fresh mapping, page cache hot", "ns/frame", s, extra);
    s = summarize(warm, reps);
    printf("| %s, mapped and faulted in, CPU caches cold (64 MB) + batch walk | %ld | %zu | %.2f "
           "(%.2f-%.2f) | %.0f |\n",
           label, big, bytes, s.med, s.min, s.max, 1e3 / s.med);
    json_row("journal_walk", "mapped, larger than caches", "ns/frame", s, extra);
    unlink(p);
}

/* ---- a realistic flow (issue 12) ------------------------------------------------------------ */

/* The codec and the walk on the flow a decoder really sees, beside the fixed cycle above: every
 * kind at realistic proportions (per 1,000 frames: an Accepted or Canceled event answers most
 * commands), shuffled so the kind sequence cannot be learned, over a buffer far larger than L2;
 * and a memcpy-into-struct floor over the same frames (length from the header, one variable
 * copy of the payload, no checks). Every variant feeds the same consumer, which reads every
 * field of the decoded message, so no decoded byte is dead. Variants are interleaved (the order
 * rotates each repetition) on one pinned CPU; min and median are reported. Time is the thread's
 * CPU time (CLOCK_THREAD_CPUTIME_ID), so other processes' turns on a loaded machine are not
 * counted (their cache pollution still is). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const struct {
    uint8_t kind;
    int per_mille;
} flow_mix[11] = {
    {TF_OFL_NEW_LIMIT, 300}, {TF_OFL_ACCEPTED, 280}, {TF_OFL_CANCEL_BY_ORDER, 150},
    {TF_OFL_CANCELED, 140},  {TF_OFL_TRADE, 50},     {TF_OFL_REPLACE, 30},
    {TF_OFL_REPLACED, 28},   {TF_OFL_NEW_MARKET, 8}, {TF_OFL_CANCEL_BY_CLIENT, 6},
    {TF_OFL_REJECTED, 5},    {TF_OFL_HEARTBEAT, 3},
};

typedef struct flow_buf {
    uint8_t *bytes;
    size_t len;
    long frames;
} flow_buf;

/* Every field of a decoded message: the envelope and all nine payload words (the union's
 * largest member is 72 bytes; a shorter kind's tail words are the previous message's). No
 * branch on the kind, so the consumer costs the same in every variant. */
static inline uint64_t consume(const tf_ofl_msg *m)
{
    uint64_t w[9], s = m->kind + m->journal_seq + m->session_id;
    memcpy(w, &m->new_limit, sizeof w);
    for (int i = 0; i < 9; i++)
        s += w[i];
    return s;
}

/* n frames of the realistic mix, shuffled, encoded back to back. */
static int flow_build(flow_buf *f, long n, tf_ofl_msg **msgs_out)
{
    uint8_t *kinds_of = malloc((size_t)n);
    tf_ofl_msg *msgs = malloc(sizeof(tf_ofl_msg) * (size_t)n);
    f->bytes = malloc((size_t)n * TF_OFL_MAX_FRAME);
    if (!kinds_of || !msgs || !f->bytes)
        return -1;
    long at = 0;
    for (int k = 0; k < 11; k++)
        for (long i = 0; i < n * flow_mix[k].per_mille / 1000; i++)
            kinds_of[at++] = flow_mix[k].kind;
    while (at < n)
        kinds_of[at++] = TF_OFL_NEW_LIMIT;
    for (long i = n - 1; i > 0; i--) { /* Fisher-Yates */
        long j = (long)(rnd() % (uint64_t)(i + 1));
        uint8_t t = kinds_of[i];
        kinds_of[i] = kinds_of[j];
        kinds_of[j] = t;
    }
    f->len = 0;
    for (long i = 0; i < n; i++) {
        make_msg(kinds_of[i], (uint64_t)i, &msgs[i]);
        int w = tf_ofl_frame_encode(f->bytes + f->len, TF_OFL_MAX_FRAME, &msgs[i]);
        if (w < 0)
            return -1;
        f->len += (size_t)w;
    }
    f->frames = n;
    free(kinds_of);
    *msgs_out = msgs;
    return 0;
}

/* ns per frame of tf_ofl_frame_decode over the buffer, `passes` times. exact: each call is
 * given only its frame's bytes (as a caller holding one frame does), so the decoder cannot take
 * its wide path and dispatches on the kind, as every call did before issue 12. */
static double flow_decode(const uint8_t *b, size_t len, long frames, long passes, int exact)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    uint64_t sum = 0;
    double t0 = cpu_s();
    for (long it = 0; it < passes; it++) {
        for (const uint8_t *p = b, *end = b + len; p < end;) {
            uint16_t flen;
            memcpy(&flen, p, 2);
            size_t avail = exact ? (size_t)flen + 2 : (size_t)(end - p);
            int n = tf_ofl_frame_decode(p, avail, &m);
            if (n <= 0) {
                failures++;
                return 0;
            }
            sum += consume(&m);
            p += n;
        }
    }
    double t = cpu_s() - t0;
    checksum += sum;
    return t * 1e9 / ((double)passes * (double)frames);
}

/* The floor: what moving the bytes into the struct costs with no codec at all. */
static double flow_memcpy(const uint8_t *b, size_t len, long frames, long passes)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    uint64_t sum = 0;
    double t0 = cpu_s();
    for (long it = 0; it < passes; it++) {
        for (const uint8_t *p = b, *end = b + len; p < end;) {
            uint16_t flen;
            memcpy(&flen, p, 2);
            m.kind = p[2];
            memcpy(&m.journal_seq, p + 3, 8);
            memcpy(&m.new_limit, p + TF_OFL_FRAME_HEADER_LEN, (size_t)flen - 9);
            sum += consume(&m);
            p += (size_t)flen + 2;
        }
    }
    double t = cpu_s() - t0;
    checksum += sum;
    return t * 1e9 / ((double)passes * (double)frames);
}

/* ns per record of a batch walk (length, CRC32C, decode, contiguous seq) over a mapped journal. */
static double flow_walk(const uint8_t *data, size_t len, long records, long passes)
{
    static tf_ofl_msg m[BATCH];
    uint64_t sum = 0;
    double t0 = cpu_s();
    for (long it = 0; it < passes; it++) {
        tf_journal_reader r;
        long n = 0;
        int k;
        if (tf_journal_reader_init(&r, data, len))
            return failures++, 0;
        while ((k = tf_journal_reader_next_batch(&r, m, BATCH)) > 0) {
            for (int i = 0; i < k; i++)
                sum += consume(&m[i]);
            n += k;
        }
        if (k < 0 || n != records)
            failures++;
    }
    double t = cpu_s() - t0;
    checksum += sum;
    return t * 1e9 / ((double)passes * (double)records);
}

static int flow_journal(const char *path, const tf_ofl_msg *msgs, long n, tf_journal_map *map)
{
    unlink(path);
    tf_journal *j;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE, .session_id = 1};
    int rc = tf_journal_open(path, &o, &j, NULL);
    for (long i = 0; !rc && i < n; i++)
        rc = tf_journal_append(j, &msgs[i], NULL);
    if (!rc)
        rc = tf_journal_close(j);
    if (!rc)
        rc = tf_journal_map_open(path, map);
    if (rc) {
        fprintf(stderr, "bench: flow journal: %s\n", tf_strerror(rc));
        failures++;
    }
    return rc;
}

static void pin_flow(cpu_set_t *saved)
{
    sched_getaffinity(0, sizeof *saved, saved);
    if (CPU_COUNT(saved) <= 1)
        return; /* --pin already chose */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET((int)sysconf(_SC_NPROCESSORS_ONLN) - 1, &one);
    sched_setaffinity(0, sizeof one, &one);
}

static void flow_row(const char *what, const char *json_name, double *v, const char *extra)
{
    stat3 s = summarize(v, reps);
    printf("| %s | %.2f | %.2f | %.2f |\n", what, s.min, s.med, s.max);
    json_row("flow", json_name, "ns/frame", s, extra);
}

static void bench_flow(void)
{
    long n = quick ? 16384 : 262144, cyc_passes = quick ? 50 : 4000, passes = quick ? 2 : 8;
    flow_buf f;
    tf_ofl_msg *msgs = NULL;
    if (flow_build(&f, n, &msgs)) {
        failures++;
        return;
    }
    prepare(-1); /* the fixed 20-message cycle, 256 frames */
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 1);
    tf_ofl_msg *cyc = malloc(sizeof(tf_ofl_msg) * (size_t)n);
    for (long i = 0; cyc && i < n; i++)
        tf_ofl_gen_next(&g, &cyc[i]);
    tf_journal_map jm_flow, jm_cyc;
    if (!cyc || flow_journal(jpath("flow.ofl"), msgs, n, &jm_flow))
        return;
    if (flow_journal(jpath("flow_cycle.ofl"), cyc, n, &jm_cyc))
        return;
    cpu_set_t saved;
    pin_flow(&saved);
    double v[7][MAXREPS];
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 7; k++) {
            switch ((k + r) % 7) {
            case 0:
                v[0][r] = flow_decode(cs.stream, cs.stream_len, NFRAMES, cyc_passes, 0);
                break;
            case 1:
                v[1][r] = flow_decode(f.bytes, f.len, n, passes, 0);
                break;
            case 6:
                v[6][r] = flow_decode(f.bytes, f.len, n, passes, 1);
                break;
            case 2:
                v[2][r] = flow_memcpy(f.bytes, f.len, n, passes);
                break;
            case 3:
                v[3][r] = flow_memcpy(cs.stream, cs.stream_len, NFRAMES, cyc_passes);
                break;
            case 4:
                v[4][r] = flow_walk(jm_flow.data, jm_flow.len, n, passes);
                break;
            case 5:
                v[5][r] = flow_walk(jm_cyc.data, jm_cyc.len, n, passes);
                break;
            }
        }
    }
    sched_setaffinity(0, sizeof saved, &saved);
    double load[1] = {-1};
    getloadavg(load, 1);
    printf("\n### Decode on a realistic flow (issue 12): ns per frame, every field consumed\n\n"
           "shuffled flow: %ld frames of all 11 kinds at realistic proportions, %.1f MB (larger "
           "than L2); fixed cycle: %d frames (%zu bytes) of the 20-message cycle; %d "
           "repetitions interleaved, pinned, thread CPU time; load average (1 min) after: %.2f\n\n",
           n, (double)f.len / 1e6, NFRAMES, cs.stream_len, reps, load[0]);
    printf("| what | min | median | max |\n|---|---|---|---|\n");
    char extra[96];
    snprintf(extra, sizeof extra, "\"frames\": %ld, \"bytes\": %zu", n, f.len);
    flow_row("**OFL1 decode, shuffled realistic flow (the headline)**", "decode shuffled", v[1],
             extra);
    flow_row("OFL1 decode, shuffled flow, each call given only its frame (kind dispatch, as "
             "before issue 12)",
             "decode shuffled exact", v[6], extra);
    flow_row("OFL1 decode, fixed 20-message cycle (256 frames, hot)", "decode fixed cycle", v[0],
             NULL);
    flow_row("memcpy into the struct, shuffled flow (no checks: the floor)", "memcpy shuffled",
             v[2], extra);
    flow_row("memcpy into the struct, fixed cycle", "memcpy fixed cycle", v[3], NULL);
    snprintf(extra, sizeof extra, "\"records\": %ld, \"bytes\": %zu", n, jm_flow.len);
    flow_row("**journal walk (batch), shuffled realistic flow**", "walk shuffled", v[4], extra);
    flow_row("journal walk (batch), fixed cycle journal of the same length", "walk fixed cycle",
             v[5], NULL);
    tf_journal_map_close(&jm_flow);
    tf_journal_map_close(&jm_cyc);
    unlink(jpath("flow.ofl"));
    unlink(jpath("flow_cycle.ofl"));
    free(f.bytes);
    free(msgs);
    free(cyc);
}

/* ---- append --------------------------------------------------------------------------------- */

static tf_ofl_msg cycle_msgs[1000];

/* One throughput run: n appends, then close (which syncs). Returns appends/s of the append
 * loop (syncs due under the policy included; the final close excluded). */
static double append_run(tf_journal_opts *o, long n, double *with_close)
{
    const char *p = jpath("append.ofl");
    unlink(p);
    tf_journal *j;
    if (tf_journal_open(p, o, &j, NULL)) {
        failures++;
        return 0;
    }
    double t0 = now_s();
    int rc = 0;
    for (long i = 0; i < n && !rc; i++)
        rc = tf_journal_append(j, &cycle_msgs[i % 1000], NULL);
    double t1 = now_s();
    rc |= tf_journal_close(j);
    double t2 = now_s();
    if (rc)
        failures++;
    *with_close = (double)n / (t2 - t0) / 1e6;
    unlink(p);
    return (double)n / (t1 - t0);
}

/* Latency pass: every append timed; `sync_lat` gets the appends that made records durable. */
static void append_latency(tf_journal_opts *o, long n, uint64_t *all, long *n_all,
                           uint64_t *sync_lat, long *n_sync)
{
    const char *p = jpath("append_lat.ofl");
    unlink(p);
    tf_journal *j;
    *n_all = *n_sync = 0;
    if (tf_journal_open(p, o, &j, NULL)) {
        failures++;
        return;
    }
    for (long i = 0; i < n; i++) {
        uint64_t before = tf_journal_durable_end(j);
        uint64_t t0 = now_ns();
        if (tf_journal_append(j, &cycle_msgs[i % 1000], NULL)) {
            failures++;
            break;
        }
        uint64_t dt = now_ns() - t0;
        all[(*n_all)++] = dt;
        if (tf_journal_durable_end(j) != before)
            sync_lat[(*n_sync)++] = dt;
    }
    tf_journal_close(j);
    unlink(p);
}

static uint64_t pct(uint64_t *v, long n, double q)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    long i = (long)(q * (double)(n - 1) + 0.5);
    return v[i];
}

static void bench_append(void)
{
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 3);
    for (int i = 0; i < 1000; i++)
        tf_ofl_gen_next(&g, &cycle_msgs[i]);
    struct policy {
        const char *name;
        tf_journal_opts o;
        long n;
    } pol[3] = {
        {"NONE", {.durability = TF_JOURNAL_NONE}, quick ? 50000 : 2000000},
        {"GROUP(4096 frames, 1000 us)",
         {.durability = TF_JOURNAL_GROUP, .group_max_frames = 4096, .group_max_us = 1000},
         quick ? 50000 : 2000000},
        {"EVERY", {.durability = TF_JOURNAL_EVERY}, quick ? 200 : 3000},
    };
    printf("\n### Journal append (mixed cycle, avg ~64 B/record, file on the build directory's "
           "file system)\n\n");
    printf("| policy | appends | M frames/s (loop) median (min-max) | M frames/s incl. final sync "
           "| append p50 / p99 ns | durable-making append (write+fdatasync) p50 / p99 us | syncs "
           "timed |\n|---|---|---|---|---|---|---|\n");
    static uint64_t all[2000000], syn[2000000];
    for (int p = 0; p < 3; p++) {
        double v[MAXREPS], vc[MAXREPS];
        for (int r = 0; r < reps; r++)
            v[r] = append_run(&pol[p].o, pol[p].n, &vc[r]) / 1e6;
        stat3 s = summarize(v, reps), sc = summarize(vc, reps);
        long lat_n = pol[p].n > 2000000 ? 2000000 : pol[p].n, na, ns;
        append_latency(&pol[p].o, lat_n, all, &na, syn, &ns);
        uint64_t a50 = pct(all, na, 0.5), a99 = pct(all, na, 0.99);
        uint64_t s50 = pct(syn, ns, 0.5), s99 = pct(syn, ns, 0.99);
        if (ns)
            printf("| %s | %ld | %.3f (%.3f-%.3f) | %.3f | %" PRIu64 " / %" PRIu64
                   " | %.1f / %.1f | %ld |\n",
                   pol[p].name, pol[p].n, s.med, s.min, s.max, sc.med, a50, a99, (double)s50 / 1e3,
                   (double)s99 / 1e3, ns);
        else
            printf("| %s | %ld | %.3f (%.3f-%.3f) | %.3f | %" PRIu64 " / %" PRIu64
                   " | (none: synced only at close) | 0 |\n",
                   pol[p].name, pol[p].n, s.med, s.min, s.max, sc.med, a50, a99);
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"appends\": %ld, \"with_final_sync_median\": %.4f, \"append_p50_ns\": %" PRIu64
                 ", \"append_p99_ns\": %" PRIu64 ", \"sync_p50_ns\": %" PRIu64
                 ", \"sync_p99_ns\": %" PRIu64 ", \"syncs_timed\": %ld",
                 pol[p].n, sc.med, a50, a99, s50, s99, ns);
        json_row("append", pol[p].name, "M frames/s", s, extra);
    }
}

/* ---- datagrams ------------------------------------------------------------------------------ */

struct rx_arg {
    tf_dgram_receiver *r;
    long want;
    long got;
    volatile int sender_done;
    double t_first, t_last;
};

static void *rx_main(void *p)
{
    struct rx_arg *a = p;
    static tf_dgram_event ev[TF_DGRAM_BATCH];
    int idle = 0;
    while (a->got < a->want) {
        int n = tf_dgram_recv(a->r, ev, TF_DGRAM_BATCH, 50);
        if (n < 0)
            break;
        if (n == 0) {
            if (a->sender_done && ++idle > 2)
                break; /* the rest was dropped */
            continue;
        }
        double t = now_s();
        if (!a->got)
            a->t_first = t;
        a->t_last = t;
        for (int i = 0; i < n; i++)
            checksum += ev[i].msg.journal_seq;
        a->got += n;
    }
    return NULL;
}

static void bench_datagram(void)
{
    long n = quick ? 20000 : 1000000;
    printf("\n### Datagram ingress, UDP loopback (sender: sendmmsg x%d; receiver thread: "
           "recvmmsg x%d + decode + gap/duplicate tracking; unthrottled)\n\n",
           TF_DGRAM_BATCH, TF_DGRAM_BATCH);
    printf("| run | sent | received | lost | receive M datagrams/s | send M datagrams/s |\n");
    printf("|---|---|---|---|---|---|\n");
    static tf_ofl_msg msgs[TF_DGRAM_BATCH];
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 4);
    for (int i = 0; i < TF_DGRAM_BATCH; i++)
        tf_ofl_gen_next(&g, &msgs[i]);
    double rv[MAXREPS], sv[MAXREPS], lost_total = 0;
    int dreps = quick ? 1 : 5;
    for (int r = 0; r < dreps; r++) {
        struct rx_arg a;
        memset(&a, 0, sizeof a);
        a.want = n;
        tf_dgram_sender *s = NULL;
        if (tf_dgram_receiver_open("127.0.0.1", 0, 1, 0, &a.r) ||
            tf_dgram_sender_open("127.0.0.1", (uint16_t)tf_dgram_receiver_port(a.r), 1, &s)) {
            fprintf(stderr, "bench: cannot open UDP sockets on loopback\n");
            failures++;
            tf_dgram_receiver_close(a.r);
            return;
        }
        pthread_t th;
        pthread_create(&th, NULL, rx_main, &a);
        double t0 = now_s();
        long sent = 0;
        while (sent < n) {
            long k = n - sent < TF_DGRAM_BATCH ? n - sent : TF_DGRAM_BATCH;
            for (long i = 0; i < k; i++)
                msgs[i].journal_seq = (uint64_t)(sent + i);
            int rc = tf_dgram_send(s, msgs, (size_t)k);
            if (rc <= 0) {
                if (rc == -ENOBUFS || rc == -EAGAIN)
                    continue;
                failures++;
                break;
            }
            sent += rc;
        }
        double t_sent = now_s();
        a.sender_done = 1;
        pthread_join(th, NULL);
        const tf_dgram_tracker *t = tf_dgram_receiver_tracker(a.r);
        long lost = sent - a.got;
        double span = a.t_last - t0;
        rv[r] = span > 0 ? (double)a.got / span / 1e6 : 0;
        sv[r] = (double)sent / (t_sent - t0) / 1e6;
        lost_total += (double)lost;
        printf("| %d | %ld | %ld | %ld (tracker: %" PRIu64 " gaps, %" PRIu64
               " missing) | %.3f | %.3f |\n",
               r + 1, sent, a.got, lost, t->stats.gaps, t->stats.missing, rv[r], sv[r]);
        tf_dgram_sender_close(s);
        tf_dgram_receiver_close(a.r);
    }
    stat3 s = summarize(rv, dreps), ss = summarize(sv, dreps);
    char extra[160];
    snprintf(extra, sizeof extra,
             "\"sent_per_run\": %ld, \"lost_avg\": %.0f, \"send_median\": %.4f", n,
             lost_total / dreps, ss.med);
    json_row("datagram", "loopback ingress", "M datagrams/s", s, extra);
    printf("\nreceive rate median %.3f M/s (min %.3f, max %.3f)\n", s.med, s.min, s.max);
}

/* ---- main ----------------------------------------------------------------------------------- */

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 2;
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    if (f)
        fclose(f);
}

/* --only's words, in the order they run. */
static const struct {
    const char *name;
    void (*run)(void);
} sections[] = {{"codec", bench_codec},
                {"walk", bench_walk},
                {"flow", bench_flow},
                {"append", bench_append},
                {"datagram", bench_datagram}};
#define N_SECTIONS (sizeof sections / sizeof sections[0])

int main(int argc, char **argv)
{
    const char *out = "build/report/orderflow.json";
    const char *dirarg = NULL;
    int pin = -1;
    const bench_opt opts[] = {
        {"--quick", BENCH_OPT_FLAG, &quick, NULL,
         "everything small (seconds): a smoke run\n(default: full size)"},
        {"--only", BENCH_OPT_STR, &only, "codec|walk|flow|append|datagram",
         "that section alone (default: every section)"},
        {"--pin", BENCH_OPT_INT, &pin, "CPU", "pin the main thread to CPU (default: not pinned)"},
        {"--dir", BENCH_OPT_STR, &dirarg, "DIR",
         "where the journal files go, deleted afterwards\n(default: OUT.json's directory)"},
    };
    bench_args args = BENCH_ARGS_OPERANDS(
        opts, "[OUT.json]", "the JSON results\n(default build/report/orderflow.json)");
    bench_args_parse(&args, argc, argv, &out, 1);
    int known = !only;
    for (size_t k = 0; k < N_SECTIONS; k++)
        known |= only && !strcmp(only, sections[k].name);
    if (!known)
        bench_args_refuse(&args, "--only codec, walk, flow, append or datagram, not %s", only);
    if (quick)
        reps = 2;
    if (bench_out_dir(out, dirarg, dir, sizeof dir)) {
        fprintf(stderr, "bench_orderflow: cannot create %s: %s\n", dir, strerror(errno));
        return 2;
    }
    json = fopen(out, "w");
    if (!json) {
        fprintf(stderr, "bench_orderflow: %s: %s\n", out, strerror(errno));
        return 2;
    }
    if (pin >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(pin, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            fprintf(stderr, "bench_orderflow: cannot pin to CPU %d\n", pin);
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    time_t t = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    printf("## Order flow benchmarks%s\n\nmachine: %s, %ld online CPUs; compiler: %s; "
           "optimized: %s; date: %s; CPU pinning: %s; repetitions: %d (median, min-max)\n",
           quick ? " (--quick smoke run: figures are not meaningful)" : "", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), __VERSION__,
#ifdef __OPTIMIZE__
           "yes (CMake Release: -O2)",
#else
           "NO (debug build: figures are not meaningful)",
#endif
           date, pin >= 0 ? "main thread pinned" : "none", reps);
    bench_machine_print(stdout, "\n");
    fprintf(json,
            "{\n  \"machine\": \"%s\",\n  \"cpus\": %ld,\n  \"compiler\": \"%s\",\n  \"date\": "
            "\"%s\",\n  \"quick\": %s,\n  \"pin\": %d,\n  \"repetitions\": %d,\n  \"results\": [",
            cpu, sysconf(_SC_NPROCESSORS_ONLN), __VERSION__, date, quick ? "true" : "false", pin,
            reps);

    for (size_t k = 0; k < N_SECTIONS; k++)
        if (!only || !strcmp(only, sections[k].name))
            sections[k].run();

    fprintf(json, "\n  ],\n  \"checksum\": %" PRIu64 ",\n  \"failures\": %d\n}\n", checksum,
            failures);
    fclose(json);
    printf("\nchecksum %" PRIu64 "; JSON: %s; failures: %d\n", checksum, out, failures);
    return failures ? 1 : 0;
}
