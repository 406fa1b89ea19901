/* Sweep options of any known size resolved to one internal form, and progress counters. */
#include <math.h>
#include <stddef.h>

#include "common/opts_size.h"
#include "kernel_internal.h"

/* The fields of tf_sweep_opts a caller must have for the library to read it: everything up to
 * and including max_bytes (the first layout that carried a size). The fields after it (fee,
 * stats, progress) read NULL, their default, when the caller's layout lacks them. */
#define OPTS_MIN_SIZE TFU_FIELD_END(tf_sweep_opts, max_bytes)

int tfk_opts_resolve(const tf_sweep_opts *in, tfk_opts *out)
{
    *out = (tfk_opts){0, TF_ISA_AUTO, 0, TF_FEE_DEFAULT, NULL, NULL};
    if (!in)
        return 0;
    tf_sweep_opts o;
    int rc = tfu_opts_load(&o, sizeof o, in, OPTS_MIN_SIZE);
    if (rc)
        return rc;
    if (o.fee && !isfinite(*o.fee))
        return TF_E_INVALID_ARG;
    out->threads = o.threads;
    out->isa = o.isa;
    out->max_bytes = o.max_bytes;
    if (o.fee)
        out->fee = *o.fee;
    out->stats = o.stats;
    out->progress = o.progress;
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
