/* Running a long sweep from the command line: Ctrl-C stops it, and a terminal sees progress. */
#ifndef TF_CLI_SWEEP_RUN_H
#define TF_CLI_SWEEP_RUN_H

#include <stdint.h>

#include "tollfree/kernel.h"

/* While armed, the first SIGINT or SIGTERM cancels p (the kernel stops at its next unit of work
 * and returns TF_E_CANCELLED); a second one ends the process as the signal would. */
void tf_cli_interrupt_arm(tf_progress *p);
/* Restores the previous handlers. 1 if a signal arrived while armed. */
int tf_cli_interrupt_disarm(void);

/* tf_sweep (or tf_sweep_reference) with o->progress set to an armed counter; with show, a sweep
 * that runs longer than about two seconds draws a progress line with an ETA on stderr (the
 * caller passes show only when stderr is a terminal). Returns the kernel's code:
 * TF_E_CANCELLED after Ctrl-C. */
int tf_cli_sweep_run(const double *close, int64_t n, const int64_t *grid, int64_t m, double *pnl,
                     int64_t *trades, tf_sweep_opts *o, int reference, int show);

#endif
