/* The size rule of the growable public option structs (opts_size.h). */
#include "common/opts_size.h"

#include <string.h>

#include "tollfree/error.h"

int tfu_opts_load(void *dst, size_t known, const void *src, size_t min)
{
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size == 0)
        size = known;
    if (size < min)
        return TF_E_INVALID_ARG;
    const unsigned char *in = src;
    for (size_t k = known; k < size; k++)
        if (in[k])
            return TF_E_INVALID_ARG;
    size_t n = size < known ? size : known;
    memcpy(dst, src, n);
    memset((unsigned char *)dst + n, 0, known - n);
    memcpy(dst, &known, sizeof known);
    return 0;
}
