/* The machine line every C benchmark prints first, so a figure never travels without the machine
 * it was measured on: CPU model name, vendor, family/model (from /proc/cpuinfo), the kernel ISA
 * path AUTO resolves to (after any TF_ISA_MAX cap) and the 1-minute load average. Header-only:
 * each bench_*.c is its own program. */
#ifndef TF_BENCH_MACHINE_H
#define TF_BENCH_MACHINE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tollfree/kernel.h"

typedef struct bench_machine {
    char model_name[128];
    char vendor[32];
    int family, model;
    const char *isa; /* tf_isa_name of what AUTO picks here */
    const char *cap; /* TF_ISA_MAX, or NULL */
    double load1;    /* 1-minute load average at the call, -1 if unknown */
} bench_machine;

static inline void bench_cpuinfo_value(const char *line, char *out, size_t n)
{
    const char *c = strchr(line, ':');
    if (!c)
        return;
    c++;
    while (*c == ' ' || *c == '\t')
        c++;
    snprintf(out, n, "%s", c);
    out[strcspn(out, "\n")] = 0;
}

static inline void bench_machine_read(bench_machine *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->model_name, sizeof m->model_name, "unknown");
    snprintf(m->vendor, sizeof m->vendor, "unknown");
    m->family = m->model = -1;
    char line[512], v[128];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '\n')
            break; /* the first processor is enough */
        v[0] = 0;
        bench_cpuinfo_value(line, v, sizeof v);
        if (!strncmp(line, "model name", 10))
            snprintf(m->model_name, sizeof m->model_name, "%s", v);
        else if (!strncmp(line, "vendor_id", 9))
            snprintf(m->vendor, sizeof m->vendor, "%.*s", (int)sizeof m->vendor - 1, v);
        else if (!strncmp(line, "cpu family", 10))
            m->family = atoi(v);
        else if (!strncmp(line, "model\t", 6) || !strncmp(line, "model ", 6))
            m->model = atoi(v);
    }
    if (f)
        fclose(f);
    m->isa = tf_isa_name(tf_isa_best());
    m->cap = getenv("TF_ISA_MAX");
    double load[1];
    m->load1 = getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

/* "machine: AMD EPYC (AuthenticAMD, family 26, model 2); kernel ISA path: avx512 (auto); load
 * average (1 min): 0.52" */
static inline void bench_machine_print(FILE *out, const char *prefix)
{
    bench_machine m;
    bench_machine_read(&m);
    fprintf(out,
            "%smachine: %s (%s, family %d, model %d); kernel ISA path: %s (auto%s%s); "
            "load average (1 min): %.2f\n",
            prefix ? prefix : "", m.model_name, m.vendor, m.family, m.model, m.isa,
            m.cap ? ", TF_ISA_MAX=" : "", m.cap ? m.cap : "", m.load1);
}

#endif
