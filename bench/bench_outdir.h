/* The folder a benchmark writes its JSON and scratch files in: --dir DIR, else the folder of
 * OUT.json (".", when OUT.json names no folder), created with its parents when missing, so a
 * benchmark run from a fresh clone does not fail at its end for want of build/report/.
 * Header-only: each bench_*.c is its own program. */
#ifndef TF_BENCH_OUTDIR_H
#define TF_BENCH_OUTDIR_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Writes the folder into dir[n] and creates it; 0, or -1 with errno set. */
static inline int bench_out_dir(const char *out, const char *dirarg, char *dir, size_t n)
{
    snprintf(dir, n, "%s", dirarg ? dirarg : out);
    if (!dirarg) {
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, n, ".");
    }
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

#endif
