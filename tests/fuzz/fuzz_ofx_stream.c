/* Fuzz target: the extension codec (tf_ofx_*, src/orderflow/ext.c), as a stream reader uses it.
 *
 * The input is a byte stream. Frames are decoded one after another; "need more bytes" ends the
 * walk, any other error skips one byte (a resynchronizing reader, so every offset is tried).
 * Invariants, checked with abort() so libFuzzer and the replay both catch them:
 *   - every result is a frame size in [11, 128] or a code of the OFL range;
 *   - a decoded frame re-encodes to exactly the same bytes, and its size is the kind's;
 *   - an OFL1 kind decodes exactly as the OFL1 codec decodes it (same result, same bytes back);
 *     a gateway kind is refused by the OFL1 codec (its set stays closed);
 *   - a gateway frame's byte fields are the ones the spec allows (side 0/1, reasons in range);
 *   - every shorter prefix of a valid frame says "need more bytes", never anything else;
 *   - an error leaves the output untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/error.h"
#include "tollfree/orderflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int is_ofl_code(int rc)
{
    return rc < TF_E_OFL_BASE && rc > TF_E_OFL_BASE - 100;
}

/* The byte fields of a decoded gateway message, against the spec. */
static void check_bytes(const tf_ofl_msg *m)
{
    int bad = 0;
    switch (m->kind) {
    case TF_OFX_ORDER:
        bad = m->order.side > 1; /* type, tif, flags: any byte */
        break;
    case TF_OFX_ACCEPTED:
        bad = m->accepted_ex.side > 1 || m->accepted_ex.type > 1 || m->accepted_ex.tif > 2 ||
              m->accepted_ex.flags > 1;
        break;
    case TF_OFX_REPLACED:
        bad = m->replaced_ex.side > 1;
        break;
    case TF_OFX_CANCELED:
        bad = m->canceled_ex.side > 1 || m->canceled_ex.reason > 4;
        break;
    case TF_OFX_FILL:
        bad = m->fill.taker_side > 1;
        break;
    case TF_OFX_REJECTED:
        bad = m->rejected_ex.reason > 6 && m->rejected_ex.reason != 255;
        break;
    default:
        break;
    }
    if (bad)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    int frames = 0;
    while (off < size && frames < 4096) {
        tf_ofl_msg m, back, ofl;
        memset(&m, 0xC3, sizeof m);
        tf_ofl_msg before = m;
        int n = tf_ofx_frame_decode(data + off, size - off, &m);
        int n1 = tf_ofl_frame_decode(data + off, size - off, &ofl);
        int gateway =
            size - off >= TF_OFL_FRAME_HEADER_LEN && tf_ofx_is_gateway_kind(data[off + 2]);
        if (!gateway && n != n1)
            abort(); /* OFL1 kinds: the OFL1 codec's result */
        if (gateway && n1 >= 0)
            abort(); /* the OFL1 set is closed */
        if (n == TF_E_OFL_HEADER_TOO_SHORT || n == TF_E_OFL_PAYLOAD_TOO_SHORT)
            break;
        if (n < 0) {
            if (!is_ofl_code(n) || memcmp(&m, &before, sizeof m))
                abort();
            off++;
            continue;
        }
        if (n < TF_OFL_FRAME_HEADER_LEN || n > TF_OFL_MAX_FRAME || (size_t)n > size - off)
            abort();
        if (m.kind != data[off + 2] || tf_ofx_frame_size(m.kind) != n)
            abort();
        check_bytes(&m);
        uint8_t enc[TF_OFL_MAX_FRAME];
        if (tf_ofx_frame_encode(enc, sizeof enc, &m) != n || memcmp(enc, data + off, (size_t)n))
            abort();
        if (!gateway &&
            (tf_ofl_frame_encode(enc, sizeof enc, &m) != n || memcmp(enc, data + off, (size_t)n)))
            abort();
        if (tf_ofx_frame_encode(enc, (size_t)n - 1, &m) != TF_E_OFL_BUFFER_TOO_SHORT)
            abort();
        for (int len = 0; len < n; len++) {
            int rc = tf_ofx_frame_decode(data + off, (size_t)len, &back);
            if (rc != (len < TF_OFL_FRAME_HEADER_LEN ? TF_E_OFL_HEADER_TOO_SHORT
                                                     : TF_E_OFL_PAYLOAD_TOO_SHORT))
                abort();
        }
        off += (size_t)n;
        frames++;
    }
    return 0;
}
