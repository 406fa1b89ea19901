/* The warmed-up out-of-sample run (warmup.c): every combo stepped, every part of every fold
 * booked from its first bar after its warm-up. Not installed. */
#ifndef TF_RESEARCH_WARMUP_H
#define TF_RESEARCH_WARMUP_H

#include <stdint.h>

#include "tollfree/research.h"

typedef struct tfr_warm {
    const tf_strategy_def *def; /* the strategy; for HMA (iparams) the "hma" built-in */
    const int64_t *iparams;     /* [m][6] HMA windows, or NULL */
    const double *dparams;      /* [m][def->n_params] when iparams is NULL */
    int64_t m;
    const double *close;
    int64_t n;
    const tf_fold *folds;
    int nf;
    int64_t warmup; /* > 0 bars, or TF_OOS_WARMUP_ALL */
    int batch;      /* 0: step by step (the reference), 1: the def's steps where it has one */
    const tf_sweep_opts *sweep;
    tf_stats *out; /* [nf][2][m]: out[(2 * k + part) * m + j], part 0 in sample, 1 out */
} tfr_warm;

/* Runs w on sweep's threads with its fee and progress. 0; TF_E_STRATEGY (a step out of
 * contract), TF_E_NOMEM, TF_E_CANCELLED, TF_E_INVALID_ARG (bad sweep options). */
int tfr_warm_run(const tfr_warm *w);

#endif
