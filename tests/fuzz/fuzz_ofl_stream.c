/* Fuzz target: the OFL1 stream-frame decoder, as a stream reader uses it.
 *
 * The input is a byte stream. Frames are decoded one after another; "need more bytes" ends the
 * walk, any other error skips one byte (a resynchronizing reader, so every offset is tried).
 * Invariants, checked with abort() so libFuzzer and the replay both catch them:
 *   - every result is a frame size in [11, 128] or a code of the OFL range;
 *   - a decoded frame re-encodes to exactly the same bytes, as a stream frame and (through the
 *     shared payload writer) as a datagram that decodes back to the same message;
 *   - every shorter prefix of a valid frame says "need more bytes", never anything else. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    int frames = 0;
    while (off < size && frames < 4096) {
        tf_ofl_msg m, back;
        int n = tf_ofl_frame_decode(data + off, size - off, &m);
        if (n == TF_E_OFL_HEADER_TOO_SHORT || n == TF_E_OFL_PAYLOAD_TOO_SHORT)
            break;
        if (n < 0) {
            if (!is_ofl_code(n))
                abort();
            off++;
            continue;
        }
        if (n < TF_OFL_FRAME_HEADER_LEN || n > TF_OFL_MAX_FRAME || (size_t)n > size - off)
            abort();
        uint8_t enc[TF_OFL_MAX_FRAME], dg[TF_OFL_MAX_DATAGRAM];
        if (tf_ofl_frame_encode(enc, sizeof enc, &m) != n || memcmp(enc, data + off, (size_t)n))
            abort();
        if (tf_ofl_frame_size(m.kind) != n)
            abort();
        m.session_id = 0x5e55;
        int d = tf_ofl_datagram_encode(dg, sizeof dg, &m);
        if (d != n + (TF_OFL_DATAGRAM_HEADER_LEN - TF_OFL_FRAME_HEADER_LEN))
            abort();
        if (tf_ofl_datagram_decode(dg, (size_t)d, &back) != d || back.kind != m.kind ||
            back.journal_seq != m.journal_seq || back.session_id != 0x5e55)
            abort();
        if (tf_ofl_frame_encode(enc, sizeof enc, &back) != n || memcmp(enc, data + off, (size_t)n))
            abort();
        for (int len = 0; len < n; len++) {
            int rc = tf_ofl_frame_decode(data + off, (size_t)len, &back);
            if (rc != (len < TF_OFL_FRAME_HEADER_LEN ? TF_E_OFL_HEADER_TOO_SHORT
                                                     : TF_E_OFL_PAYLOAD_TOO_SHORT))
                abort();
        }
        off += (size_t)n;
        frames++;
    }
    /* The raw envelope writer with an arbitrary kind and payload. */
    if (size >= 1) {
        static uint8_t out[65536 + 16];
        int n = tf_ofl_frame_encode_raw(out, sizeof out, data[0], size, data + 1, size - 1);
        if (n != (int)(size - 1 + TF_OFL_FRAME_HEADER_LEN) || memcmp(out + 11, data + 1, size - 1))
            abort();
    }
    return 0;
}
