/* caliper reference engine — which instruction sets this CPU has, asked
 * once. Each answer is a pure function of the CPU, so threads that race to
 * ask store the same value (atomically, for the race detector). The kernels
 * that use them are built with target attributes (engine/simd.h) and chosen
 * at run time from these answers. */
#include "engine/kernels.h"
#include <stdatomic.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define HAVE_X86 1

int cal_k_cpu_once(_Atomic int *cached, int (*ask)(void))
{
    int v = atomic_load_explicit(cached, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = ask();
        atomic_store_explicit(cached, v, memory_order_relaxed);
    }
    return v;
}

static int ask_vnni(void)
{
    return __builtin_cpu_supports("avx512vnni");
}

/* F16C from cpuid leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
 * does not know the name. */
static int ask_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

static int ask_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma") && ask_f16c();
}

static int ask_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && ask_f16c();
}
#endif

/* each answer cached in its own word */
#if HAVE_X86
#define ASKED(ask)                            \
    static _Atomic int cached = -1;           \
    return cal_k_cpu_once(&cached, ask)
#else
#define ASKED(ask) return 0
#endif

int cal_k_have_avx512(void) { ASKED(ask_avx512); }
int cal_k_have_vnni(void) { ASKED(ask_vnni); }
int cal_k_have_kq_avx2(void) { ASKED(ask_avx2); }

int cal_k_have_q8x(void)
{
    return cal_k_have_avx512() && cal_k_have_vnni();
}
