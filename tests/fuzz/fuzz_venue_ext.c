/* Fuzz target: the venue extension codec (src/venue/ext.c) and the logon frames (logon.c).
 *
 * The input is a byte stream read as consecutive stream frames. Invariants:
 *   - tfv_decode never reads past the input and returns a frame size, "need more" or an error;
 *   - a frame it decodes is canonical: tfv_encode of the result gives the same bytes;
 *   - every proper prefix of a decoded frame is "need more" (HEADER_TOO_SHORT or
 *     PAYLOAD_TOO_SHORT), never a frame;
 *   - the OFL1 codec never accepts an extension kind;
 *   - the logon parsers stay inside the input and bound every length.
 * Any violation abort()s. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/error.h"
#include "tollfree/orderflow.h"
#include "venue/venue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_frame(const uint8_t *p, size_t n, const tfv_msg *m)
{
    uint8_t again[TF_OFL_MAX_FRAME];
    int w = tfv_encode(again, sizeof again, m);
    if (w != (int)n || memcmp(again, p, n)) {
        fprintf(stderr, "fuzz_venue_ext: kind 0x%02x: re-encoded %d bytes, not the %zu read\n",
                p[2], w, n);
        abort();
    }
    for (size_t cut = 0; cut < n; cut++) {
        tfv_msg x;
        int rc = tfv_decode(p, cut, &x);
        if (rc != TF_E_OFL_HEADER_TOO_SHORT && rc != TF_E_OFL_PAYLOAD_TOO_SHORT) {
            fprintf(stderr, "fuzz_venue_ext: a %zu-byte prefix of a frame gave %d\n", cut, rc);
            abort();
        }
    }
    tf_ofl_msg o;
    if (tfv_is_ext_kind(p[2]) && tf_ofl_frame_decode(p, n, &o) >= 0)
        abort(); /* the OFL1 set is closed */
}

static void logon_frames(const uint8_t *data, size_t size)
{
    int n = tfv_logon_frame_size(data, size);
    if (n > (int)size || n > TFV_LOGON_MAX)
        abort();
    if (n > 0) {
        char name[TFV_NAME_MAX + 1];
        size_t nl = 0;
        uint8_t mac[TFV_LOGON_MAC];
        if (tfv_logon_parse_answer(data, (size_t)n, name, &nl, mac) == 0 &&
            (nl < 1 || nl > TFV_NAME_MAX || strlen(name) > nl))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    logon_frames(data, size);
    size_t off = 0;
    while (off < size) {
        tfv_msg m;
        int rc = tfv_decode(data + off, size - off, &m);
        if (rc <= 0)
            break;
        if ((size_t)rc > size - off)
            abort();
        check_frame(data + off, (size_t)rc, &m);
        off += (size_t)rc;
    }
    return 0;
}
