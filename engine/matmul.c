/* caliper reference engine — the small-batch matrix products of decode for
 * F32, F16, BF16 and Q8_0 weights: one pass over each weight row serves up
 * to 16 activation rows. AVX-512 kernels chosen at run time from cpuid, a
 * portable C path everywhere else; prefill-sized products go to OpenBLAS in
 * the step (step.c). The number formats themselves are in formats.c. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include "engine/simd.h"
#include "engine/tbuf.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* llama.cpp's quantize_row_q8_0 for one block: d = max|x| / 127 (F32),
 * q = round(x / d); returns d and Σq */
static float q8_block(const float *x, int8_t *q, int *sum)
{
    float amax = 0;
    for (int i = 0; i < CAL_Q8_0_BLOCK; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    int s = 0;
    for (int i = 0; i < CAL_Q8_0_BLOCK; i++) {
        q[i] = (int8_t)lrintf(x[i] * id);
        s += q[i];
    }
    *sum = s;
    return d;
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
        for (int b = 0; b < n / CAL_Q8_0_BLOCK; b++) {
            cal_q8_0_block *o = (cal_q8_0_block *)dst + b;
            int sum;
            o->d = cal_k_f32_to_f16(q8_block(src + (size_t)b * CAL_Q8_0_BLOCK, o->qs, &sum));
        }
        break;
    case CAL_DTYPE_Q4_0:
    case CAL_DTYPE_Q4_K:
    case CAL_DTYPE_Q5_K:
    case CAL_DTYPE_Q6_K:
        cal_k_kq_quantize_row(dtype, src, dst, n);
        break;
    case CAL_DTYPE_Q4_1:
    case CAL_DTYPE_Q5_0:
    case CAL_DTYPE_Q5_1:
        cal_k_q32_quantize_row(dtype, src, dst, n);
        break;
    default:
        break;
    }
}

void cal_k_dequantize_row_portable(int dtype, const void *src, float *dst, int n)
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
    case CAL_DTYPE_Q4_0:
    case CAL_DTYPE_Q4_K:
    case CAL_DTYPE_Q5_K:
    case CAL_DTYPE_Q6_K:
        cal_k_kq_dequantize_row(dtype, src, dst, n);
        break;
    case CAL_DTYPE_Q4_1:
    case CAL_DTYPE_Q5_0:
    case CAL_DTYPE_Q5_1:
        cal_k_q32_dequantize_row(dtype, src, dst, n);
        break;
    default:
        break;
    }
}

/* llama.cpp's Q8_0 activations: each 32-block of x scaled by d = max|x|/127
 * (kept in F32) and rounded to an integer; out = d · q. */
void cal_k_q8_0_round(const float *x, float *out, int n)
{
    for (int b = 0; b + CAL_Q8_0_BLOCK <= n; b += CAL_Q8_0_BLOCK) {
        int8_t q[CAL_Q8_0_BLOCK];
        int sum;
        float d = q8_block(x + b, q, &sum);
        for (int i = 0; i < CAL_Q8_0_BLOCK; i++)
            out[b + i] = d * (float)q[i];
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
    if (dtype == CAL_DTYPE_Q4_K || dtype == CAL_DTYPE_Q5_K || dtype == CAL_DTYPE_Q6_K) {
        /* on Q8_K activations */
        cal_k_kq_matmul_portable(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
    if (dtype != CAL_DTYPE_Q4_0 && cal_k_is_q32(dtype)) {   /* on Q8_0 activations */
        cal_k_q32_matmul_portable(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
    size_t rb = cal_k_row_bytes(dtype, n_in);
    float buf[PCHUNK], xr[PCHUNK];
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
                    cal_k_dequantize_row_portable(dtype, row + cal_k_row_bytes(dtype, k0), buf, kn);
                    wk = buf;
                }
                for (int i = 0; i < mb; i++) {
                    const float *xk = x + (size_t)(i0 + i) * ldx + k0;
                    if (dtype == CAL_DTYPE_Q8_0) {  /* Q8_0 × Q8_0, as llama.cpp */
                        cal_k_q8_0_round(xk, xr, kn);
                        xk = xr;
                    }
                    acc[i] += cal_k_dot(wk, xk, kn);
                }
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
#define TGT CAL_SIMD("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#define INL static inline __attribute__((always_inline)) TGT

/* 32 weights of a row from element k on, as two vectors of 16 floats
 * (F32, F16, BF16; Q8_0 has its own integer kernel below) */
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
    } else {
        /* bf16 is the top half of an f32: widen and shift */
        const uint16_t *p = (const uint16_t *)row + k;
        __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 16)));
        *a = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
        *b = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
}

/* The n accumulators acc[0..n−1] (n ≤ 32) to their sums s[0..n−1]. */
INL void hsums(const __m512 *acc, int n, float *s)
{
    int j = 0;
    for (; j + 4 <= n; j += 4)
        _mm_storeu_ps(s + j, cal_hsum4(acc[j], acc[j + 1], acc[j + 2], acc[j + 3]));
    for (; j < n; j++)
        s[j] = _mm512_reduce_add_ps(acc[j]);
}

/* y[i][r] = s[i·R + r] (+ beta·y[i][r]) for an R × MB tile */
INL void put_tile(int R, int MB, const float *s, float *y, int ldy, float beta)
{
    for (int i = 0; i < MB; i++)
        for (int r = 0; r < R; r++) {
            float *o = y + (size_t)i * ldy + r;
            *o = beta == 0.0f ? s[i * R + r] : beta * *o + s[i * R + r];
        }
}

/* While a tile works on its R rows, the same offsets of the rows
 * CAL_PF_TILES tiles further on are prefetched: without it a tile's loads
 * wait on memory and its multiply-adds on the loads, one after the other
 * (measured at batch 8: the sum of the two times, not the larger). */
#ifndef CAL_PF_TILES
#define CAL_PF_TILES 2
#endif
/* Q8_0 rows are short (816 bytes at 768 inputs), so the hardware's stream
 * prefetch barely starts on them: with one prefetched line per 68-byte pair
 * (a line in ten went unfetched) and 2 tiles ahead, one thread read 16 GB/s
 * at batch 1; with both lines and 4 tiles ahead, 20 (F32 rows read 25). */
#ifndef CAL_PF_TILES_Q8
#define CAL_PF_TILES_Q8 4
#endif
/* Batches up to CAL_R1_MAX (CAL_Q8_R1_MAX for the Q8_0 block kernel) take one
 * row at a time: each thread's weights are then one ascending stream, which
 * the hardware's prefetcher follows; four rows side by side are four streams
 * 816–6144 bytes apart. On the weights from DRAM (two threads, a 50–200 MB
 * matrix, each product paired with a read of as many bytes) one row at a time
 * read 0.91–1.00 of the read test against 0.67–0.76 (Q8_0) and 0.94–1.00
 * against 0.82–0.88 (F16, BF16). At batch 4 the 4-row tiles stay ahead (F32
 * 0.90 against 0.49: a row alone waits on its chains). At batch 2 a lone row
 * with one chain per activation row lost at F32 (0.85 against 0.93); with two
 * (tile's split) bench/engine's paired ×2 went from 1.66–1.76 to 1.80–2.07 at
 * F32, F16 and BF16, the two builds run alternately. */
#ifndef CAL_R1_MAX
#define CAL_R1_MAX 2
#endif
#ifndef CAL_Q8_R1_MAX
#define CAL_Q8_R1_MAX 2
#endif
/* Batches up to this size take 4-row tiles (4·m ≤ 16 accumulators), larger
 * ones 2-row tiles: at batch 4 the 4-row tile measured 1.1× the 2-row one. */
#ifndef CAL_R4_MAX
#define CAL_R4_MAX 4
#endif

/* R weight rows × MB activation rows: R·MB accumulators live in registers
 * (at most 16 of the 32), each weight vector loaded once feeds MB FMAs. */
INL void tile(int dt, int R, int MB, float *y, int ldy, const float *x, int ldx,
              const char *w, size_t rb, int n_in, float beta)
{
    __m512 acc[32], acc2[4];
    for (int j = 0; j < R * MB; j++)
        acc[j] = _mm512_setzero_ps();
    for (int r = 0; r < 4; r++)
        acc2[r] = _mm512_setzero_ps();
    size_t esz = dt == CAL_DTYPE_F32 ? 4 : 2;
    /* up to four sums (one row and two activation rows, or four rows and
     * one): the two halves of each 32-wide step go to separate chains */
    const int split = R * MB <= 4 && MB <= 2;
    if (R == 1 && MB == 1) {
        /* one row alone: four chains of multiply-adds, not two, or the
         * row waits on their latency */
        int k = 0;
        for (; k + 64 <= n_in; k += 64) {
            if (CAL_PF_TILES > 0) {
                const char *pf = w + (size_t)CAL_PF_TILES * rb + (size_t)k * esz;
                for (size_t o = 0; o < 64 * esz; o += 64)
                    _mm_prefetch(pf + o, _MM_HINT_T0);
            }
            __m512 wa, wb, wc, wd;
            ld32(dt, w, k, &wa, &wb);
            ld32(dt, w, k + 32, &wc, &wd);
            acc[0] = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x + k), acc[0]);
            acc2[0] = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x + k + 16), acc2[0]);
            acc2[1] = _mm512_fmadd_ps(wc, _mm512_loadu_ps(x + k + 32), acc2[1]);
            acc2[2] = _mm512_fmadd_ps(wd, _mm512_loadu_ps(x + k + 48), acc2[2]);
        }
        if (k < n_in) {
            __m512 wa, wb;
            ld32(dt, w, k, &wa, &wb);
            acc[0] = _mm512_fmadd_ps(wa, _mm512_loadu_ps(x + k), acc[0]);
            acc2[0] = _mm512_fmadd_ps(wb, _mm512_loadu_ps(x + k + 16), acc2[0]);
        }
        acc[0] = _mm512_add_ps(_mm512_add_ps(acc[0], acc2[0]), _mm512_add_ps(acc2[1], acc2[2]));
        float s0 = _mm512_reduce_add_ps(acc[0]);
        put_tile(1, 1, &s0, y, ldy, beta);
        return;
    }
    for (int k = 0; k < n_in; k += 32) {
        __m512 wa[4], wb[4];
        for (int r = 0; r < R; r++) {
            if (CAL_PF_TILES > 0) {
                const char *pf = w + (size_t)(r + R * CAL_PF_TILES) * rb + (size_t)k * esz;
                _mm_prefetch(pf, _MM_HINT_T0);
                if (esz == 4)   /* 32 F32 weights span two cache lines */
                    _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            ld32(dt, w + (size_t)r * rb, k, &wa[r], &wb[r]);
            /* pin the weights in registers: GCC would otherwise reload them
             * from memory for every activation row (twice the loads at
             * batch 2, measured 1.1× batch 1's aggregate instead of 1.8×) */
            __asm__("" : "+v"(wa[r]), "+v"(wb[r]));
        }
        for (int i = 0; i < MB; i++) {
            __m512 xa = _mm512_loadu_ps(x + (size_t)i * ldx + k);
            __m512 xb = _mm512_loadu_ps(x + (size_t)i * ldx + k + 16);
            /* and the activations: folded into each FMA they cost R loads */
            __asm__("" : "+v"(xa), "+v"(xb));
            for (int r = 0; r < R; r++) {
                acc[i * R + r] = _mm512_fmadd_ps(wa[r], xa, acc[i * R + r]);
                if (split)
                    acc2[i * R + r] = _mm512_fmadd_ps(wb[r], xb, acc2[i * R + r]);
                else
                    acc[i * R + r] = _mm512_fmadd_ps(wb[r], xb, acc[i * R + r]);
            }
        }
    }
    if (split)
        for (int j = 0; j < R * MB; j++)
            acc[j] = _mm512_add_ps(acc[j], acc2[j]);
    float s[32];
    hsums(acc, R * MB, s);
    put_tile(R, MB, s, y, ldy, beta);
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
#define ROW_R(DN, R) {t_##DN##_##R##_1, t_##DN##_##R##_2, t_##DN##_##R##_3,          \
                      t_##DN##_##R##_4, t_##DN##_##R##_5, t_##DN##_##R##_6,          \
                      t_##DN##_##R##_7, t_##DN##_##R##_8}
#define ROW_DT(DN) {ROW_R(DN, 1), ROW_R(DN, 2), ROW_R(DN, 4)}
/* [dtype][R = 1, 2, 4][MB − 1] */
static const tile_fn tiles[3][3][8] = {ROW_DT(f32), ROW_DT(f16), ROW_DT(bf16)};

/* Rows of W go in blocks of R; for each block every chunk of ≤ 8 activation
 * rows runs while the block's R rows are still in L1, so the weights stream
 * from memory once whatever the batch. One chunk: R = 1 up to CAL_R1_MAX
 * activation rows, R = 4 up to CAL_R4_MAX (latency needs ≥ 4 independent
 * sums), else 2; several chunks
 * (M > 8): balanced chunks of 5–8 rows, R = 2. */
static TGT void matmul_avx512(int dt, float *y, int ldy, const float *x, int ldx,
                              const void *w, int n_out, int n_in, int m, float beta)
{
    size_t rb = cal_k_row_bytes(dt, n_in);
    int nch = (m + 7) / 8;
    int ri = m <= CAL_R1_MAX ? 0 : nch == 1 && m <= CAL_R4_MAX ? 2 : 1, R = 1 << ri;
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

/* Rows widened to F32 for prefill's SGEMM (one pass over all the weights
 * per prefill step): the scalar conversion cost as much as a quarter of an
 * F16 prefill. The same values as the portable path, bit for bit (F16C's
 * widening is exact, BF16 is a shift, Q8_0 one F32 product per value). */
static TGT void dequant_avx512(int dt, const void *src, float *dst, int n)
{
    int i = 0;
    if (dt == CAL_DTYPE_F16) {
        const uint16_t *p = src;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + i))));
        for (; i < n; i++)
            dst[i] = cal_k_f16_to_f32(p[i]);
    } else if (dt == CAL_DTYPE_BF16) {
        const uint16_t *p = src;
        for (; i + 16 <= n; i += 16) {
            __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(u, 16)));
        }
        for (; i < n; i++)
            dst[i] = cal_k_bf16_to_f32(p[i]);
    } else if (dt == CAL_DTYPE_Q8_0) {
        for (int b = 0; b < n / CAL_Q8_0_BLOCK; b++) {
            const cal_q8_0_block *blk = (const cal_q8_0_block *)src + b;
            __m512 d = _mm512_set1_ps(cal_k_f16_to_f32(blk->d));
            for (int h = 0; h < 2; h++) {
                __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk->qs + 16 * h)));
                _mm512_storeu_ps(dst + (size_t)b * CAL_Q8_0_BLOCK + 16 * h,
                                 _mm512_mul_ps(d, _mm512_cvtepi32_ps(q)));
            }
        }
    } else {
        cal_k_dequantize_row_portable(dt, src, dst, n);
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

/* ---- Q8_0 × Q8_0 with AVX-512 VNNI -------------------------------------- */

#define TGTV CAL_SIMD("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")
#define INLV static inline __attribute__((always_inline)) TGTV

/* The activations of one call, quantized once per thread: q [m][kp] int8,
 * and per pair of blocks two vectors of 16 lanes (8 per block): the block
 * scales dx, and the correction 16·dx·Σq (see tile_q8v). kp = n_in rounded
 * up to 64, the tail zero. */
enum { XQ_CAP = 16 * 4096 };
typedef struct xq_buf {
    int8_t q[XQ_CAP];
    float  dx[XQ_CAP / 4], cv[XQ_CAP / 4];
} xq_buf;

/* Scalar, the rounding of one decode step's activations cost as much as a
 * fifth of a Q8_0 product at batch 1 (each thread rounds all of them): it
 * goes through cal_q8_round_block (simd.h), the same values bit for bit. */
static TGTV void quantize_x(xq_buf *xqb, const float *x, int ldx, int n_in, int m, int kp)
{
    for (int i = 0; i < m; i++) {
        int8_t *q = xqb->q + (size_t)i * kp;
        float *dx = xqb->dx + (size_t)i * kp / 4, *cv = xqb->cv + (size_t)i * kp / 4;
        for (int b = 0; b < kp / CAL_Q8_0_BLOCK; b++) {
            const float *xb = x + (size_t)i * ldx + (size_t)b * CAL_Q8_0_BLOCK;
            float d = 0;
            int sum = 0;
            if (b * CAL_Q8_0_BLOCK < n_in) {
                d = cal_q8_round_block(xb, q + b * CAL_Q8_0_BLOCK, &sum);
            } else {
                memset(q + b * CAL_Q8_0_BLOCK, 0, CAL_Q8_0_BLOCK);
            }
            /* lanes 8·(b%2) .. +7 of pair b/2 */
            size_t at = (size_t)(b / 2) * 16 + (size_t)(b % 2) * 8;
            _mm256_storeu_ps(dx + at, _mm256_set1_ps(d));
            _mm256_storeu_ps(cv + at, _mm256_set1_ps(16.0f * d * (float)sum));
        }
    }
}

/* vpdpbusd multiplies unsigned by signed bytes: the weights go in with their
 * sign bit flipped (w + 128, unsigned), so each lane gets Σ(w+128)·q over 4
 * bytes; the 8 lanes of a block hold dot(w, q) + 128·Σq. Per lane,
 * cvt(s)·dx − 16·dx·Σq summed over the block's 8 lanes is dx·dot(w, q), and
 * the FMA with the weight scale finishes dw·dx·dot(w, q). Four operations
 * per activation row per 64 weights, against four FMAs in F32. */
INLV void tile_q8v(int R, int MB, float *y, int ldy, const xq_buf *xqb, int kp, const char *w,
                   size_t rb, int nblk, float beta, int i0)
{
    __m512 acc[4][8];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < MB; i++)
            acc[r][i] = _mm512_setzero_ps();
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int p = 0; p < nblk; p += 2) {
        __m512i wu[4];
        __m512 dw[4];
        for (int r = 0; r < R; r++) {
            const cal_q8_0_block *b0 = (const cal_q8_0_block *)(w + (size_t)r * rb) + p;
            if (CAL_PF_TILES_Q8 > 0) {  /* a pair's 68 bytes touch up to 3 lines */
                const char *pf = (const char *)b0 + (size_t)R * CAL_PF_TILES_Q8 * rb;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
            }
            int two = p + 1 < nblk;
            __m256i lo = _mm256_loadu_si256((const __m256i *)b0->qs);
            __m256i hi = two ? _mm256_loadu_si256((const __m256i *)b0[1].qs)
                             : _mm256_set1_epi8((char)0x80); /* flips to 0 */
            wu[r] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                     flip);
            __m128i d0 = _mm_set1_epi16((short)b0->d);
            __m128i d1 = _mm_set1_epi16(two ? (short)b0[1].d : 0);
            dw[r] = _mm512_cvtph_ps(_mm256_set_m128i(d1, d0));
        }
        for (int i = 0; i < MB; i++) {
            size_t row = (size_t)(i0 + i);
            __m512i xv = _mm512_load_si512(xqb->q + row * kp + (size_t)p * 32);
            __m512 dx = _mm512_load_ps(xqb->dx + row * kp / 4 + (size_t)p * 8);
            __m512 cv = _mm512_load_ps(xqb->cv + row * kp / 4 + (size_t)p * 8);
            for (int r = 0; r < R; r++) {
                __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wu[r], xv);
                __m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(s), dx, cv);
                acc[r][i] = _mm512_fmadd_ps(t, dw[r], acc[r][i]);
            }
        }
    }
    __m512 all[32];
    for (int i = 0; i < MB; i++)
        for (int r = 0; r < R; r++)
            all[i * R + r] = acc[r][i];
    float s[32];
    hsums(all, R * MB, s);
    put_tile(R, MB, s, y, ldy, beta);
}

typedef void (*tileq_fn)(float *y, int ldy, const xq_buf *xqb, int kp, const char *w,
                         size_t rb, int nblk, float beta, int i0);
#define TILEQ(R, MB)                                                                  \
    static TGTV void tq_##R##_##MB(float *y, int ldy, const xq_buf *xqb, int kp,       \
                                   const char *w, size_t rb, int nblk, float beta, int i0) \
    { tile_q8v(R, MB, y, ldy, xqb, kp, w, rb, nblk, beta, i0); }
#define TILEQ_R(R) TILEQ(R, 1) TILEQ(R, 2) TILEQ(R, 3) TILEQ(R, 4) TILEQ(R, 5)          \
                   TILEQ(R, 6) TILEQ(R, 7) TILEQ(R, 8)
TILEQ_R(1) TILEQ_R(2) TILEQ_R(4)
#define ROWQ(R) {tq_##R##_1, tq_##R##_2, tq_##R##_3, tq_##R##_4, tq_##R##_5, tq_##R##_6, \
                 tq_##R##_7, tq_##R##_8}
static const tileq_fn tilesq[3][8] = {ROWQ(1), ROWQ(2), ROWQ(4)};

static TGTV void matmul_q8_vnni(xq_buf *xqb, float *y, int ldy, const float *x, int ldx,
                                const void *w, int n_out, int n_in, int m, float beta)
{
    int kp = (n_in + 63) & ~63, nblk = n_in / CAL_Q8_0_BLOCK;
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n_in);
    quantize_x(xqb, x, ldx, n_in, m, kp);
    int nch = (m + 7) / 8;
    int ri = m <= CAL_Q8_R1_MAX ? 0 : nch == 1 && m <= CAL_R4_MAX ? 2 : 1, R = 1 << ri;
    for (int r = 0; r < n_out;) {
        int full = n_out - r >= R;   /* the last rows go one at a time */
        const char *wr = (const char *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            tilesq[full ? ri : 0][mb - 1](y + (size_t)i0 * ldy + r, ldy, xqb, kp, wr, rb,
                                          nblk, beta, i0);
            i0 += mb;
        }
        r += full ? R : 1;
    }
}
#endif

const char *cal_k_isa(void)
{
    return cal_k_have_avx512() ? (cal_k_have_vnni() ? "avx512+vnni" : "avx512") : "portable";
}

void cal_k_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                  int n_out, int n_in, int m, float beta)
{
    if (n_out <= 0 || m <= 0)
        return;
    if (cal_k_is_kq(dtype)) {   /* kquants.c: its own AVX2 choice */
        cal_k_kq_matmul(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
    if (cal_k_is_q32(dtype)) {  /* q32.c: the same */
        cal_k_q32_matmul(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
#if HAVE_X86
    if (cal_k_have_avx512() && n_in % 32 == 0 && dtype >= 0 && dtype < CAL_DTYPE_Q8_0) {
        matmul_avx512(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
    /* Q8_0: activations quantized per call into this thread's buffer, in
     * row groups that fit it (one group for any decode shape of the presets) */
    xq_buf *xqb;
    if (dtype == CAL_DTYPE_Q8_0 && cal_k_have_avx512() && cal_k_have_vnni() &&
        (size_t)((n_in + 63) & ~63) <= XQ_CAP && (xqb = cal_tbuf(CAL_TBUF_XQ, sizeof *xqb))) {
        int kp = (n_in + 63) & ~63, g = XQ_CAP / kp;
        for (int i0 = 0; i0 < m; i0 += g)
            matmul_q8_vnni(xqb, y + (size_t)i0 * ldy, ldy, x + (size_t)i0 * ldx, ldx, w, n_out,
                           n_in, m - i0 < g ? m - i0 : g, beta);
        return;
    }
#endif
    cal_k_matmul_portable(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}

uint64_t cal_k_read_bytes(const void *p, size_t n)
{
#if HAVE_X86
    if (cal_k_have_avx512())
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

void cal_k_dequantize_row(int dtype, const void *src, float *dst, int n)
{
#if HAVE_X86
    if (cal_k_have_avx512()) {
        dequant_avx512(dtype, src, dst, n);
        return;
    }
#endif
    cal_k_dequantize_row_portable(dtype, src, dst, n);
}
