#include "common/msg.h"

#include <stdarg.h>
#include <stdio.h>

int tfu_msg(int rc, char *msg, size_t cap, const char *fmt, ...)
{
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}
