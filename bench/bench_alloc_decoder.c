/* The source article's allocation demonstration, in C: walk the same journal with a
 * deliberately allocating decoder (each record's frame copied into a fresh heap buffer, decoded
 * from there, freed) and with the zero-copy decoder (decoded where it lies in the mapping).
 *
 *   bench_alloc_decoder --mode zero-copy|alloc FILE
 *
 * Both walk the records identically (length, CRC32C, decode); the allocating one copies each
 * record into malloc'd memory and decodes into a malloc'd message, the zero-copy one decodes in
 * place into a stack message. Prints records, allocation calls (malloc/calloc/realloc and free,
 * counted by this program's own wrappers around glibc's allocator, during the walk only), the walk
 * time and a checksum of decoded fields (the same for both modes). scripts/alloc_demo.sh runs both
 * under strace -c. Under AddressSanitizer the allocator cannot be wrapped: the counts are reported
 * as n/a. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

#include "../tests/unit/alloc_count.h"

/* journal_seq, kind and the first payload field (command_seq or event_seq). */
static uint64_t fold(const tf_ofl_msg *m)
{
    uint64_t first = 0;
    if (m->kind != TF_OFL_HEARTBEAT)
        memcpy(&first, &m->new_limit, sizeof first);
    return m->journal_seq * 31 + m->kind + first * 1000003;
}

/* Both decoders walk the records the same way (length, CRC32C, decode); they differ only in
 * where the decode reads from and where the message lives. */
static int walk(const uint8_t *data, size_t len, int alloc, uint64_t *sum, long *records)
{
    tf_journal_reader hr; /* checks the header and says where the records start */
    int rc = tf_journal_reader_init(&hr, data, len);
    if (rc < 0)
        return rc;
    size_t pos = hr.pos;
    tf_ofl_msg local;
    memset(&local, 0, sizeof local);
    while (pos < len) {
        if (len - pos < 2)
            return TF_E_OFL_TORN_RECORD;
        uint16_t flen;
        memcpy(&flen, data + pos, 2);
        size_t fsize = (size_t)flen + 2;
        if (len - pos < fsize + 4)
            return TF_E_OFL_TORN_RECORD;
        uint32_t crc;
        memcpy(&crc, data + pos + fsize, 4);
        if (tf_crc32c(0, data + pos, fsize) != crc)
            return TF_E_OFL_CRC_MISMATCH;
        if (alloc) {
            /* The naive decoder: the record's bytes copied into a fresh heap buffer, the message
             * allocated too, both freed after use. */
            uint8_t *copy = malloc(fsize);
            tf_ofl_msg *m = malloc(sizeof *m);
            if (!copy || !m) {
                free(copy);
                free(m);
                return TF_E_NOMEM;
            }
            memcpy(copy, data + pos, fsize);
            memset(m, 0, sizeof *m);
            rc = tf_ofl_frame_decode(copy, fsize, m);
            if (rc > 0)
                *sum += fold(m);
            free(m);
            free(copy);
        } else {
            /* Zero-copy: decoded where it lies, into a message on the stack. */
            rc = tf_ofl_frame_decode(data + pos, fsize, &local);
            if (rc > 0)
                *sum += fold(&local);
        }
        if (rc < 0)
            return rc;
        ++*records;
        pos += fsize + 4;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = NULL, *path = NULL;
    const bench_opt opts[] = {
        {"--mode", BENCH_OPT_STR, &mode, "zero-copy|alloc",
         "the decoder: in place, or a heap copy per record (required)"},
    };
    bench_args args = BENCH_ARGS(opts, "FILE");
    if (bench_args_parse(&args, argc, argv, &path, 1) < 1)
        bench_args_refuse(&args, "no journal FILE given");
    if (!mode)
        bench_args_refuse(&args, "no --mode given");
    if (strcmp(mode, "alloc") && strcmp(mode, "zero-copy"))
        bench_args_refuse(&args, "--mode zero-copy or alloc, not %s", mode);
    tf_journal_map map;
    int rc = tf_journal_map_open(path, &map);
    if (rc) {
        fprintf(stderr, "bench_alloc_decoder: %s: %s\n", path, tf_strerror(rc));
        return 2;
    }
    uint64_t sum = 0;
    long records = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tf_alloc_on = 1;
    rc = walk(map.data, map.len, !strcmp(mode, "alloc"), &sum, &records);
    tf_alloc_on = 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    tf_journal_map_close(&map);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    if (rc < 0) {
        fprintf(stderr, "bench_alloc_decoder: %s: %s\n", path, tf_strerror(rc));
        return 1;
    }
#if !TF_ALLOC_COUNTING
    printf("mode=%s records=%ld allocations=n/a frees=n/a walk_ms=%.1f checksum=%" PRIu64 "\n",
           mode, records, ms, sum);
#else
    printf("mode=%s records=%ld allocations=%ld frees=%ld walk_ms=%.1f checksum=%" PRIu64 "\n",
           mode, records, tf_alloc_calls, tf_free_calls, ms, sum);
#endif
    return 0;
}
