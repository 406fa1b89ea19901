#include "tollfree/error.h"

#include <string.h>

struct entry {
    int code;
    const char *text;
};

/* Each subsystem lists its texts in its own .inc file beside this one. */
static const struct entry table[] = {
    {TF_OK, "success"},
    {TF_E_NULL_ARG, "NULL pointer with a non-zero count"},
    {TF_E_INVALID_ARG, "invalid argument"},
    {TF_E_NOMEM, "out of memory"},
    {TF_E_UNSUPPORTED, "not supported by this build or CPU"},
    {TF_E_LIMIT, "a configured limit would be exceeded"},
    {TF_E_BAD_INPUT, "input data refused (the message names what and where)"},
#include "errors_kernel.inc"
#include "errors_wire.inc"
#include "errors_shm.inc"
#include "errors_ofl.inc"
#include "errors_engine.inc"
};

const char *tf_strerror(int code)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return table[i].text;
    if (code < 0 && code > TF_E_BASE) {
        /* strerrordesc_np returns a static string (unlike strerror, thread-safe). */
        const char *s = strerrordesc_np(-code);
        if (s)
            return s;
    }
    return "unknown error code";
}
