/* caliper reference engine — how a kernel for an instruction set beyond the
 * baseline is declared (CAL_SIMD), and AVX-512 helpers shared by the kernels.
 * Internal to engine/. */
#ifndef CALIPER_ENGINE_SIMD_H
#define CALIPER_ENGINE_SIMD_H
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>

/* A function built for ISA (a target attribute's list) and chosen at run time
 * from cpuid. Every one goes into the section cal_simd: the rest of the
 * program is built for the baseline x86-64 and must stay runnable on any
 * x86-64, which `make check-isa` verifies by disassembling .text alone
 * (scripts/check-isa.sh). A helper inlined into such functions needs only
 * the target attribute. */
#if defined(__APPLE__)
#define CAL_SIMD_SECTION __attribute__((section("__TEXT,__cal_simd,regular,pure_instructions")))
#else
#define CAL_SIMD_SECTION __attribute__((section("cal_simd")))
#endif
#define CAL_SIMD(isa) __attribute__((target(isa))) CAL_SIMD_SECTION

/* Four accumulators to their four sums in one vector: halves, then quarters
 * of the pairs folded against each other, then the lanes within each
 * quarter; about 11 shuffles and adds for all four instead of ~8 each. */
static inline __attribute__((always_inline, target("avx512f")))
__m128 cal_hsum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
    /* quarter q of u: the four partial sums of a, b, c, d for q = 0..3 */
    __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4e));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, 0xb1));
    const __m512i first = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(first, u));
}

/* One block of 32 activations rounded as llama.cpp's quantize_row_q8_0 and
 * cal_k_q8_0_round round it, bit for bit: d = max|x| / 127 (F32), q =
 * round(x / d) through the same division, and cvtps_epi32 rounds to nearest
 * even as lrintf does in the default mode. Returns d; *sum = Σq. */
static inline __attribute__((always_inline, target("avx512f")))
float cal_q8_round_block(const float *x, int8_t *q, int *sum)
{
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    __m512 v = _mm512_set1_ps(id);
    __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, v));
    __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, v));
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtepi32_epi8(qb));
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
    return d;
}
#endif
#endif
