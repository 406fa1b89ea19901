/* A latency driver's clock (benchmarks only): the CPU's time-stamp counter where it is invariant
 * (it ticks at one constant rate whatever the core's frequency or sleep state, and the kernel
 * trusts it), converted to nanoseconds by a rate measured against CLOCK_MONOTONIC; otherwise
 * CLOCK_MONOTONIC itself.
 *
 * Why: on this kind of machine (a KVM guest) clock_gettime costs ~20-25 ns a read even through
 * the vDSO, and an open-loop driver reads the clock twice per command (the due time's spin and the
 * completion), so with it the driver alone already shows a p50 of ~50 ns, the size of what is
 * measured. A TSC read costs a few ns.
 *
 * bclk_now() is a raw reading: ticks of the TSC, or nanoseconds of the fallback; bclk_ns() turns
 * a difference of two readings into nanoseconds. bclk_end() is the reading that closes a timed
 * span: RDTSCP waits until every earlier instruction has executed, so the work timed cannot slip
 * past it (a plain RDTSC may run early). */
#ifndef TF_BENCH_CLOCK_H
#define TF_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define BCLK_X86 1
#else
#define BCLK_X86 0
#endif

typedef struct bclk {
    int tsc;             /* 1: readings are TSC ticks; 0: CLOCK_MONOTONIC nanoseconds */
    double ns_per_tick;  /* 1.0 for the fallback */
    const char *why_not; /* why the TSC is not used, for the report (NULL when it is) */
} bclk;

static bclk g_bclk = {0, 1.0, "not set up"};

static inline uint64_t bclk_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t bclk_now(void)
{
#if BCLK_X86
    if (g_bclk.tsc)
        return __rdtsc();
#endif
    return bclk_mono_ns();
}

static inline uint64_t bclk_end(void)
{
#if BCLK_X86
    if (g_bclk.tsc) {
        unsigned aux;
        return __rdtscp(&aux);
    }
#endif
    return bclk_mono_ns();
}

static inline double bclk_ns(uint64_t ticks)
{
    return (double)ticks * g_bclk.ns_per_tick;
}

/* Nanoseconds -> readings (for due times). */
static inline uint64_t bclk_ticks(double ns)
{
    return (uint64_t)(ns / g_bclk.ns_per_tick);
}

/* Sets g_bclk up: the TSC when want_tsc, the CPU says it is invariant (CPUID 0x80000007, EDX bit
 * 8) and two calibrations of ~20 ms each agree within 0.1 %; else the fallback, with the reason. */
static inline void bclk_init(int want_tsc)
{
    g_bclk = (bclk){0, 1.0, want_tsc ? "not an x86 CPU" : "--clock monotonic"};
#if BCLK_X86
    if (!want_tsc)
        return;
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8))) {
        g_bclk.why_not = "the CPU does not report an invariant TSC";
        return;
    }
    double rate[2];
    for (int k = 0; k < 2; k++) {
        uint64_t n0 = bclk_mono_ns(), t0 = __rdtsc(), n1;
        do
            n1 = bclk_mono_ns();
        while (n1 - n0 < 20000000ull);
        uint64_t t1 = __rdtsc();
        if (t1 <= t0) {
            g_bclk.why_not = "the TSC did not advance";
            return;
        }
        rate[k] = (double)(n1 - n0) / (double)(t1 - t0);
    }
    double diff = rate[0] > rate[1] ? rate[0] - rate[1] : rate[1] - rate[0];
    if (diff > 0.001 * rate[0]) {
        g_bclk.why_not = "two TSC calibrations disagree by more than 0.1 %";
        return;
    }
    g_bclk = (bclk){1, (rate[0] + rate[1]) / 2, NULL};
#endif
}

#endif
