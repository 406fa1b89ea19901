/* The opcode table (wire_internal.h): one row per opcode, built from the X-macro rows. */
#include "tollfree/wire.h"

#include "wire/wire_internal.h"

#define V1_ROW(NAME, str, fixed_, var_, reply_, reply_var_, flags_)                                \
    [TF_OP_##NAME] = {.name = str,                                                                 \
                      .version = 1,                                                                \
                      .var = var_,                                                                 \
                      .reply_var = reply_var_,                                                     \
                      .flags = flags_,                                                             \
                      .fixed = fixed_,                                                             \
                      .reply = reply_},
#define V2_ROW(NAME, str, fixed_, var_, reply_, reply_var_, flags_)                                \
    [TF_OP_##NAME] = {.name = str,                                                                 \
                      .version = 2,                                                                \
                      .var = var_,                                                                 \
                      .reply_var = reply_var_,                                                     \
                      .flags = flags_,                                                             \
                      .fixed = fixed_,                                                             \
                      .reply = reply_},
static const tfw_op ops[256] = {TF_WIRE_V1_OPS(V1_ROW) TF_WIRE_V2_REQUESTS(V2_ROW)};
#undef V1_ROW
#undef V2_ROW

/* The largest fixed request part is what tf_wire_decode_request may ask for. */
#define MAX_ROW(NAME, str, fixed, var, reply, reply_var, flags)                                    \
    _Static_assert(TF_WIRE_V2_HEADER + (fixed) <= TF_WIRE_MAX_FIXED, #NAME " within MAX_FIXED");
TF_WIRE_V2_REQUESTS(MAX_ROW)
#undef MAX_ROW

const tfw_op *tfw_op_of(uint8_t op)
{
    return &ops[op];
}

const char *tfw_op_name(uint8_t op)
{
    return ops[op].name ? ops[op].name : "opcode";
}
