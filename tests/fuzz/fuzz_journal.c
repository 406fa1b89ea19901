/* Fuzz target: the journal reader and recovery.
 *
 * The input is a journal image. Invariants:
 *   - tf_journal_scan ends the valid prefix inside the input, and the prefix alone scans whole
 *     with the same record count (the prefix is self-consistent);
 *   - reader_next one by one and reader_next_batch agree with the scan: same records, same
 *     stopping offset and reason; every record they return has a matching CRC32C;
 *   - tf_journal_open on the same bytes (a memfd) recovers exactly that prefix, and accepts the
 *     next append at journal_seq = records. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tollfree/error.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_recovery(const uint8_t *data, size_t size, const tf_journal_scan_result *s)
{
    int fd = memfd_create("fuzz_journal", MFD_CLOEXEC);
    if (fd < 0)
        return;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tf_journal *j;
    tf_journal_recovery rec;
    tf_journal_opts o = {.durability = TF_JOURNAL_NONE};
    int rc = tf_journal_open(path, &o, &j, &rec);
    if (size == 0) {
        if (rc != 0 || !rec.created)
            abort();
    } else if (s->valid_bytes == 0) {
        if (rc != s->error) /* a bad header: refused, not touched */
            abort();
    } else {
        if (rc != 0 || rec.records != s->records || rec.valid_bytes != s->valid_bytes ||
            rec.reason != s->error)
            abort();
    }
    if (rc == 0) {
        tf_ofl_msg hb;
        memset(&hb, 0, sizeof hb);
        uint64_t seq;
        if (tf_journal_append(j, &hb, &seq) != 0 || seq != (size ? s->records : 0))
            abort();
        if (tf_journal_close(j) != 0)
            abort();
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tf_journal_scan_result s, s2;
    int rc = tf_journal_scan(data, size, &s);
    if (rc != s.error || s.valid_bytes > size || s.total_bytes != size)
        abort();
    if (rc > 0 || (rc < 0 && !(rc < TF_E_OFL_BASE && rc > TF_E_OFL_BASE - 100)))
        abort();
    if (s.valid_bytes) {
        if (tf_journal_scan(data, s.valid_bytes, &s2) != 0 || s2.records != s.records)
            abort();
    }

    /* one by one */
    tf_journal_reader r;
    tf_ofl_msg m;
    uint64_t n = 0;
    if (tf_journal_reader_init(&r, data, size) == 0) {
        int k;
        while ((k = tf_journal_reader_next(&r, &m)) == 1) {
            uint32_t crc;
            memcpy(&crc, r.frame + r.frame_len, 4);
            if (m.journal_seq != n || tf_crc32c(0, r.frame, r.frame_len) != crc)
                abort();
            n++;
        }
        if (k != s.error || n != s.records || r.pos != s.valid_bytes)
            abort();
        /* batches of 3 */
        tf_ofl_msg batch[3];
        tf_journal_reader_init(&r, data, size);
        n = 0;
        while ((k = tf_journal_reader_next_batch(&r, batch, 3)) > 0)
            for (int i = 0; i < k; i++)
                if (batch[i].journal_seq != n++)
                    abort();
        if (k != s.error || n != s.records || r.pos != s.valid_bytes)
            abort();
    }
    check_recovery(data, size, &s);
    return 0;
}
