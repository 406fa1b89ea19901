/* The kind table (docs/orderflow.md "The kind table"): one row per kind byte of the stream-frame
 * envelope, for every family that shares it. The OFL1 and gateway rows come from the codecs' own
 * X-macro tables (OFL_KINDS, OFX_KINDS in orderflow_internal.h), so a new kind is one row there;
 * the venue's records and the reserved bytes are listed here. Read-only, no state. */
#include <stddef.h>
#include <stdint.h>

#include "orderflow/orderflow_internal.h"
#include "tollfree/orderflow.h"

#define OFL_ROW(NAME, str, member, layout, check, cls)                                             \
    [TF_OFL_##NAME] = {str, TF_OFL_CLASS_##cls, TF_OFL_FAMILY_OFL1, TF_OFL_CLASS_NONE,             \
                       TF_OFL_##NAME##_LEN},
#define OFX_ROW(NAME, str, member, n8, cls)                                                        \
    [TF_OFX_##NAME] = {str, TF_OFL_CLASS_##cls, TF_OFL_FAMILY_GATEWAY, TF_OFL_CLASS_NONE,          \
                       TF_OFX_##NAME##_LEN},
#define VENUE_ROW(NAME, str, cls)                                                                  \
    [OFL_VENUE_##NAME] = {str, TF_OFL_CLASS_##cls, TF_OFL_FAMILY_VENUE, TF_OFL_CLASS_NONE,         \
                          OFL_VENUE_##NAME##_LEN},
#define RESERVED_ROW(byte, cls)                                                                    \
    [byte] = {NULL, TF_OFL_CLASS_NONE, TF_OFL_FAMILY_RESERVED, TF_OFL_CLASS_##cls, -1},

const tf_ofl_kind_info tfo_kind_rows[256] = {OFL_KINDS(OFL_ROW) OFX_KINDS(OFX_ROW) OFL_VENUE_KINDS(
    VENUE_ROW) OFL_RESERVED_KINDS(RESERVED_ROW)};

#undef OFL_ROW
#undef OFX_ROW
#undef VENUE_ROW
#undef RESERVED_ROW

/* Bytes outside the table: tfo_kind_rows leaves them zero, which would say payload_len 0. */
static const tf_ofl_kind_info none = {NULL, TF_OFL_CLASS_NONE, TF_OFL_FAMILY_NONE,
                                      TF_OFL_CLASS_NONE, -1};

const tf_ofl_kind_info *tf_ofl_kind_info_of(int kind)
{
    if (kind < 0 || kind > 255 || tfo_kind_rows[kind].family == TF_OFL_FAMILY_NONE)
        return &none;
    return &tfo_kind_rows[kind];
}

int tf_ofl_kind_class(int kind)
{
    return kind < 0 || kind > 255 ? TF_OFL_CLASS_NONE : tfo_kind_rows[kind].kind_class;
}
