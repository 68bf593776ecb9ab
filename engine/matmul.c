/* caliper reference engine — weight formats (F32, F16, BF16, Q8_0) and the
 * small-batch matrix products of decode: one pass over each weight row serves
 * up to 16 activation rows. AVX-512 kernels chosen at run time from cpuid,
 * a portable C path everywhere else; prefill-sized products go to OpenBLAS
 * in engine.c. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* ---- scalar conversions (the portable path and the quantizers) ---------- */

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
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t cal_k_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                   /* inf stays inf, nan stays nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u)                   /* rounds to ≥ 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                  /* below 2^−14: subnormal or 0 */
        float a;
        memcpy(&a, &ax, sizeof a);
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
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint16_t cal_k_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
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
    default:             return 0;
    }
}

void cal_k_quantize_row(int dtype, const float *src, void *dst, int n)
{
    switch (dtype) {
    case CAL_DTYPE_F32:
        memcpy(dst, src, sizeof(float) * (size_t)n);
        break;
    case CAL_DTYPE_F16:
        for (int i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = cal_k_f32_to_f16(src[i]);
        break;
    case CAL_DTYPE_BF16:
        for (int i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = cal_k_f32_to_bf16(src[i]);
        break;
    case CAL_DTYPE_Q8_0:
        /* llama.cpp's quantize_row_q8_0: d = max|x| / 127, q = round(x / d) */
        for (int b = 0; b < n / CAL_Q8_0_BLOCK; b++) {
            const float *x = src + (size_t)b * CAL_Q8_0_BLOCK;
            cal_q8_0_block *o = (cal_q8_0_block *)dst + b;
            float amax = 0;
            for (int i = 0; i < CAL_Q8_0_BLOCK; i++)
                amax = fmaxf(amax, fabsf(x[i]));
            float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
            o->d = cal_k_f32_to_f16(d);
            for (int i = 0; i < CAL_Q8_0_BLOCK; i++)
                o->qs[i] = (int8_t)lrintf(x[i] * id);
        }
        break;
    default:
        break;
    }
}

void cal_k_dequantize_row(int dtype, const void *src, float *dst, int n)
{
    switch (dtype) {
    case CAL_DTYPE_F32:
        memcpy(dst, src, sizeof(float) * (size_t)n);
        break;
    case CAL_DTYPE_F16:
        for (int i = 0; i < n; i++)
            dst[i] = cal_k_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case CAL_DTYPE_BF16:
        for (int i = 0; i < n; i++)
            dst[i] = cal_k_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case CAL_DTYPE_Q8_0:
        for (int b = 0; b < n / CAL_Q8_0_BLOCK; b++) {
            const cal_q8_0_block *blk = (const cal_q8_0_block *)src + b;
            float d = cal_k_f16_to_f32(blk->d);
            for (int i = 0; i < CAL_Q8_0_BLOCK; i++)
                dst[(size_t)b * CAL_Q8_0_BLOCK + i] = d * (float)blk->qs[i];
        }
        break;
    default:
        break;
    }
}

/* ---- the portable product ----------------------------------------------- */

/* Weights are dequantized a chunk at a time (a multiple of the Q8_0 block)
 * into a stack buffer, and the chunk serves up to 16 activation rows before
 * the next is read. */
enum { PCHUNK = 256, PROWS = 16 };

void cal_k_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                           const void *w, int n_out, int n_in, int m, float beta)
{
    size_t rb = cal_k_row_bytes(dtype, n_in);
    float buf[PCHUNK];
    for (int r = 0; r < n_out; r++) {
        const char *row = (const char *)w + (size_t)r * rb;
        for (int i0 = 0; i0 < m; i0 += PROWS) {
            int mb = m - i0 < PROWS ? m - i0 : PROWS;
            float acc[PROWS] = {0};
            for (int k0 = 0; k0 < n_in; k0 += PCHUNK) {
                int kn = n_in - k0 < PCHUNK ? n_in - k0 : PCHUNK;
                const float *wk;
                if (dtype == CAL_DTYPE_F32) {
                    wk = (const float *)row + k0;
                } else {
                    cal_k_dequantize_row(dtype, row + cal_k_row_bytes(dtype, k0), buf, kn);
                    wk = buf;
                }
                for (int i = 0; i < mb; i++)
                    acc[i] += cal_k_dot(wk, x + (size_t)(i0 + i) * ldx + k0, kn);
            }
            for (int i = 0; i < mb; i++) {
                float *o = y + (size_t)(i0 + i) * ldy + r;
                *o = beta == 0.0f ? acc[i] : beta * *o + acc[i];
            }
        }
    }
}

/* ---- AVX-512 ------------------------------------------------------------ */

#if HAVE_X86
#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

/* 32 weights of a row from element k on, as two vectors of 16 floats */
INL void ld32(int dt, const char *row, int k, __m512 *a, __m512 *b)
{
    if (dt == CAL_DTYPE_F32) {
        const float *p = (const float *)row + k;
        *a = _mm512_loadu_ps(p);
        *b = _mm512_loadu_ps(p + 16);
    } else if (dt == CAL_DTYPE_F16) {
        const uint16_t *p = (const uint16_t *)row + k;
        *a = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
        *b = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 16)));
    } else if (dt == CAL_DTYPE_BF16) {
        /* bf16 is the top half of an f32: widen and shift */
        const uint16_t *p = (const uint16_t *)row + k;
        __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 16)));
        *a = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
        *b = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    } else {
        const cal_q8_0_block *blk = (const cal_q8_0_block *)row + k / CAL_Q8_0_BLOCK;
        __m512 d = _mm512_set1_ps(_cvtsh_ss(blk->d));
        __m512i u = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk->qs));
        __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk->qs + 16)));
        *a = _mm512_mul_ps(_mm512_cvtepi32_ps(u), d);
        *b = _mm512_mul_ps(_mm512_cvtepi32_ps(v), d);
    }
}

/* R weight rows × MB activation rows: R·MB accumulators live in registers
 * (at most 16 of the 32), each weight vector loaded once feeds MB FMAs. */
INL void tile(int dt, int R, int MB, float *y, int ldy, const float *x, int ldx,
              const char *w, size_t rb, int n_in, float beta)
{
    __m512 acc[4][8];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < MB; i++)
            acc[r][i] = _mm512_setzero_ps();
    for (int k = 0; k < n_in; k += 32) {
        __m512 wa[4], wb[4];
        for (int r = 0; r < R; r++)
            ld32(dt, w + (size_t)r * rb, k, &wa[r], &wb[r]);
        for (int i = 0; i < MB; i++) {
            __m512 xa = _mm512_loadu_ps(x + (size_t)i * ldx + k);
            __m512 xb = _mm512_loadu_ps(x + (size_t)i * ldx + k + 16);
            for (int r = 0; r < R; r++) {
                acc[r][i] = _mm512_fmadd_ps(wa[r], xa, acc[r][i]);
                acc[r][i] = _mm512_fmadd_ps(wb[r], xb, acc[r][i]);
            }
        }
    }
    for (int i = 0; i < MB; i++)
        for (int r = 0; r < R; r++) {
            float s = _mm512_reduce_add_ps(acc[r][i]);
            float *o = y + (size_t)i * ldy + r;
            *o = beta == 0.0f ? s : beta * *o + s;
        }
}

typedef void (*tile_fn)(float *y, int ldy, const float *x, int ldx, const char *w,
                        size_t rb, int n_in, float beta);

#define TILE(DT, DN, R, MB)                                                           \
    static TGT void t_##DN##_##R##_##MB(float *y, int ldy, const float *x, int ldx,  \
                                        const char *w, size_t rb, int n_in, float beta) \
    { tile(DT, R, MB, y, ldy, x, ldx, w, rb, n_in, beta); }
#define TILES_R(DT, DN, R)                                                            \
    TILE(DT, DN, R, 1) TILE(DT, DN, R, 2) TILE(DT, DN, R, 3) TILE(DT, DN, R, 4)       \
    TILE(DT, DN, R, 5) TILE(DT, DN, R, 6) TILE(DT, DN, R, 7) TILE(DT, DN, R, 8)
#define TILES(DT, DN) TILES_R(DT, DN, 1) TILES_R(DT, DN, 2) TILES_R(DT, DN, 4)
TILES(CAL_DTYPE_F32, f32)
TILES(CAL_DTYPE_F16, f16)
TILES(CAL_DTYPE_BF16, bf16)
TILES(CAL_DTYPE_Q8_0, q8)
#define ROW_R(DN, R) {t_##DN##_##R##_1, t_##DN##_##R##_2, t_##DN##_##R##_3,          \
                      t_##DN##_##R##_4, t_##DN##_##R##_5, t_##DN##_##R##_6,          \
                      t_##DN##_##R##_7, t_##DN##_##R##_8}
#define ROW_DT(DN) {ROW_R(DN, 1), ROW_R(DN, 2), ROW_R(DN, 4)}
/* [dtype][R = 1, 2, 4][MB − 1] */
static const tile_fn tiles[4][3][8] = {ROW_DT(f32), ROW_DT(f16), ROW_DT(bf16), ROW_DT(q8)};

/* Rows of W go in blocks of R; for each block every chunk of ≤ 8 activation
 * rows runs while the block's R rows are still in L1, so the weights stream
 * from memory once whatever the batch. One chunk: R = 4 up to 3 activation
 * rows (latency needs ≥ 4 independent sums), else 2; several chunks
 * (M > 8): balanced chunks of 5–8 rows, R = 2. */
static TGT void matmul_avx512(int dt, float *y, int ldy, const float *x, int ldx,
                              const void *w, int n_out, int n_in, int m, float beta)
{
    size_t rb = cal_k_row_bytes(dt, n_in);
    int nch = (m + 7) / 8;
    int ri = nch == 1 && m <= 3 ? 2 : 1, R = ri == 2 ? 4 : 2;
    int r = 0;
    for (; r + R <= n_out; r += R) {
        const char *wr = (const char *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            tiles[dt][ri][mb - 1](y + (size_t)i0 * ldy + r, ldy, x + (size_t)i0 * ldx, ldx,
                                  wr, rb, n_in, beta);
            i0 += mb;
        }
    }
    for (; r < n_out; r++) {
        const char *wr = (const char *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            tiles[dt][0][mb - 1](y + (size_t)i0 * ldy + r, ldy, x + (size_t)i0 * ldx, ldx,
                                 wr, rb, n_in, beta);
            i0 += mb;
        }
    }
}

static TGT uint64_t read_avx512(const void *p, size_t n)
{
    const char *c = p;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(c + i));
        a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(c + i + 64));
        a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(c + i + 128));
        a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(c + i + 192));
    }
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    uint64_t s = (uint64_t)_mm512_reduce_add_epi64(a0);
    for (; i < n; i++)
        s += (unsigned char)c[i];
    return s;
}

static int have_avx512(void)
{
    static int cached = -1;   /* a pure function of the CPU: races write the same */
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    }
    return cached;
}
#else
static int have_avx512(void) { return 0; }
#endif

const char *cal_k_isa(void)
{
    return have_avx512() ? "avx512" : "portable";
}

void cal_k_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                  int n_out, int n_in, int m, float beta)
{
    if (n_out <= 0 || m <= 0)
        return;
#if HAVE_X86
    if (have_avx512() && n_in % 32 == 0 && dtype >= 0 && dtype <= CAL_DTYPE_Q8_0) {
        matmul_avx512(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
#endif
    cal_k_matmul_portable(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}

uint64_t cal_k_read_bytes(const void *p, size_t n)
{
#if HAVE_X86
    if (have_avx512())
        return read_avx512(p, n);
#endif
    const uint64_t *q = p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0, nw = n / 8;
    for (; i + 4 <= nw; i += 4) {
        a ^= q[i]; b ^= q[i + 1]; c ^= q[i + 2]; d ^= q[i + 3];
    }
    for (; i < nw; i++)
        a ^= q[i];
    return a + b + c + d;
}
