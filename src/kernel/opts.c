/* Sweep options of any known size resolved to one internal form, and progress counters. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernel_internal.h"

/* The fields of tf_sweep_opts a caller must have for the library to read it: everything up to
 * and including max_bytes (the first layout that carried a size). */
#define OPTS_MIN_SIZE (offsetof(tf_sweep_opts, max_bytes) + sizeof(size_t))

/* A field is present if the caller's struct reaches its end. */
#define HAS(size, field)                                                                           \
    ((size) >= offsetof(tf_sweep_opts, field) + sizeof(((tf_sweep_opts *)0)->field))

int tf_opts_resolve(const tf_sweep_opts *in, tf_opts *out)
{
    *out = (tf_opts){0, TF_ISA_AUTO, 0, TF_FEE_DEFAULT, NULL, NULL};
    if (!in)
        return 0;
    size_t size = in->size ? in->size : sizeof *in;
    if (size < OPTS_MIN_SIZE)
        return TF_E_INVALID_ARG;
    if (size > sizeof *in) {
        const unsigned char *extra = (const unsigned char *)in + sizeof *in;
        for (size_t k = 0; k < size - sizeof *in; k++)
            if (extra[k])
                return TF_E_INVALID_ARG;
    }
    out->threads = in->threads;
    out->isa = in->isa;
    out->max_bytes = in->max_bytes;
    if (HAS(size, fee) && in->fee) {
        if (!isfinite(*in->fee))
            return TF_E_INVALID_ARG;
        out->fee = *in->fee;
    }
    if (HAS(size, stats))
        out->stats = in->stats;
    if (HAS(size, progress))
        out->progress = in->progress;
    return 0;
}

void tf_progress_read(const tf_progress *p, int64_t *done, int64_t *total)
{
    if (done)
        *done = p ? __atomic_load_n(&p->done, __ATOMIC_RELAXED) : 0;
    if (total)
        *total = p ? __atomic_load_n(&p->total, __ATOMIC_RELAXED) : 0;
}

void tf_progress_cancel(tf_progress *p)
{
    if (p)
        __atomic_store_n(&p->cancel, 1, __ATOMIC_RELAXED);
}
