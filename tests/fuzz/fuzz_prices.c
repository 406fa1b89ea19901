/* Fuzz target: the price file reader (tf_prices_read_buffer).
 *
 * The first byte picks the options (raw, skip_bad_rows, the separator, assume_sorted,
 * keep_dates, the close and date columns); the rest is the file. Invariants:
 *   - a read either succeeds or fails with a one-line message (non-empty, no newline) and one of
 *     the documented codes;
 *   - on success there is at least one bar, every close passes tf_prices_check, the times (when
 *     given) never go down, the date offsets rise and stay inside the text, and the notes are
 *     lines that each start with the file's name. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/error.h"
#include "tollfree/prices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const char *const columns[4] = {NULL, "Close", "2", "1"};
    static const char *const dcols[4] = {NULL, "none", "", "1"};
    static const int seps[4] = {0, ',', ';', '\t'};
    uint8_t b = data[0];
    tf_prices_opts o = {.size = sizeof o,
                        .name = "f",
                        .raw = (b & 0x80) && (b & 0x40),
                        .skip_bad_rows = (b >> 5) & 1,
                        .sep = seps[(b >> 3) & 3],
                        .assume_sorted = (b >> 2) & 1,
                        .keep_dates = !((b >> 1) & 1),
                        .column = columns[(b + (b >> 6)) & 3],
                        .date_column = dcols[((b >> 4) + b) & 3]};
    char msg[512];
    tf_prices *p;
    int rc = tf_prices_read_buffer(&p, data + 1, size - 1, &o, msg, sizeof msg);
    if (rc) {
        if (p || !msg[0] || strchr(msg, '\n') || strncmp(msg, "f", 1))
            abort();
        if (rc != TF_E_BAD_INPUT && rc != TF_E_LIMIT && rc != TF_E_NOMEM)
            abort();
        return 0;
    }
    int64_t n = 0, k = -1;
    const double *v = tf_prices_values(p, &n);
    if (n < 1 || !v || tf_prices_check(v, n, &k) != 0)
        abort();
    const int64_t *t = tf_prices_times(p);
    int64_t rev = 0;
    tf_prices_get(p, TF_PRICES_REVERSED, &rev);
    for (int64_t i = 1; t && i < n; i++)
        if (t[i] < t[i - 1])
            abort();
    const int64_t *off;
    const char *d = tf_prices_dates(p, &off);
    for (int64_t i = 0; d && i < n; i++)
        if (off[i] > off[i + 1] || off[0] != 0 || off[n] > (int64_t)size)
            abort();
    const char *notes = tf_prices_text(p, TF_PRICES_NOTES);
    for (const char *q = notes; q && *q;) {
        if (strncmp(q, "f: ", 3))
            abort();
        const char *nl = strchr(q, '\n');
        q = nl ? nl + 1 : q + strlen(q);
    }
    tf_prices_free(p);
    return 0;
}
