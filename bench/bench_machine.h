/* What every C benchmark prints first: the CPU (model name, family/model), the ISA paths this
 * build and CPU can run, and the 1-minute load average, so a figure is never quoted without its
 * machine. Header-only; benchmarks are single programs. */
#ifndef TF_BENCH_MACHINE_H
#define TF_BENCH_MACHINE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/kernel.h"

static inline void bench_machine_print(FILE *out, const char *program)
{
    char line[512], model[256] = "unknown", family[32] = "?", mnum[32] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *v = strchr(line, ':');
        if (!v)
            continue;
        v += v[1] == ' ' ? 2 : 1;
        v[strcspn(v, "\n")] = '\0';
        if (!strncmp(line, "model name", 10))
            snprintf(model, sizeof model, "%s", v);
        else if (!strncmp(line, "cpu family", 10))
            snprintf(family, sizeof family, "%s", v);
        else if (!strncmp(line, "model\t", 6))
            snprintf(mnum, sizeof mnum, "%s", v);
        else if (!strncmp(line, "processor", 9) && strcmp(v, "0"))
            break; /* the first CPU is enough */
    }
    if (f)
        fclose(f);
    double load[1] = {-1};
    if (getloadavg(load, 1) != 1)
        load[0] = -1;
    const char *isa = tf_isa_supported(TF_ISA_AVX512) ? "avx512"
                      : tf_isa_supported(TF_ISA_AVX2) ? "avx2"
                      : tf_isa_supported(TF_ISA_SSE2) ? "sse2"
                                                      : "scalar";
    fprintf(out, "%s: CPU %s (family %s, model %s), widest kernel ISA path %s, load average %.2f\n",
            program, model, family, mnum, isa, load[0]);
}

#endif
