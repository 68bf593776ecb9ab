/* caliper reference engine — the number formats every kernel shares: F16
 * and BF16 to and from F32 (scalar, round to nearest even) and the bytes and
 * block size of a row in each weight format. The lowest layer of the engine's
 * kernels: matmul.c and kquants.c both build on it. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include <math.h>
#include <string.h>

/* ---- scalar conversions (the portable path and the quantizers) ---------- */

static float from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

float cal_k_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu,
             man = h & 0x3ffu, bits;
    if (exp == 0x1f) {                       /* inf, nan */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {                   /* normal */
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {                   /* ±0 */
        bits = sign;
    } else {                                 /* subnormal: man · 2^−24 */
        float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return from_bits(bits);
}

uint16_t cal_k_f32_to_f16(float f)
{
    uint32_t x = to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                   /* inf stays inf, nan stays nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u)                   /* rounds to ≥ 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                  /* below 2^−14: subnormal or 0 */
        float a = from_bits(ax);
        /* a · 2^24 rounded to nearest even by the FPU's default mode */
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    /* normal: rebias, then round the 13 dropped bits to nearest even */
    uint32_t h = ((ax >> 13) - (112u << 10));
    uint32_t rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float cal_k_bf16_to_f32(uint16_t b)
{
    return from_bits((uint32_t)b << 16);
}

uint16_t cal_k_f32_to_bf16(float f)
{
    uint32_t x = to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)     /* nan: keep it a quiet nan */
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);         /* round to nearest even */
    return (uint16_t)(x >> 16);
}

/* ---- formats ------------------------------------------------------------ */

size_t cal_k_row_bytes(int dtype, int n)
{
    switch (dtype) {
    case CAL_DTYPE_F32:  return (size_t)n * 4;
    case CAL_DTYPE_F16:
    case CAL_DTYPE_BF16: return (size_t)n * 2;
    case CAL_DTYPE_Q8_0: return (size_t)(n / CAL_Q8_0_BLOCK) * sizeof(cal_q8_0_block);
    case CAL_DTYPE_Q4_0: return (size_t)(n / CAL_Q4_0_BLOCK) * sizeof(cal_q4_0_block);
    case CAL_DTYPE_Q4_K: return (size_t)(n / CAL_QK_K) * sizeof(cal_q4_k_block);
    case CAL_DTYPE_Q6_K: return (size_t)(n / CAL_QK_K) * sizeof(cal_q6_k_block);
    case CAL_DTYPE_Q4_1: return (size_t)(n / CAL_QK4_1) * sizeof(cal_q4_1_block);
    case CAL_DTYPE_Q5_0: return (size_t)(n / CAL_QK5_0) * sizeof(cal_q5_0_block);
    case CAL_DTYPE_Q5_1: return (size_t)(n / CAL_QK5_1) * sizeof(cal_q5_1_block);
    case CAL_DTYPE_Q5_K: return (size_t)(n / CAL_QK_K) * sizeof(cal_q5_k_block);
    default:             return 0;
    }
}

int cal_k_block_elems(int dtype)
{
    switch (dtype) {
    case CAL_DTYPE_F32:
    case CAL_DTYPE_F16:
    case CAL_DTYPE_BF16: return 1;
    case CAL_DTYPE_Q8_0:
    case CAL_DTYPE_Q4_0:
    case CAL_DTYPE_Q4_1:
    case CAL_DTYPE_Q5_0:
    case CAL_DTYPE_Q5_1: return 32;
    case CAL_DTYPE_Q4_K:
    case CAL_DTYPE_Q5_K:
    case CAL_DTYPE_Q6_K: return CAL_QK_K;
    default:             return 0;
    }
}
