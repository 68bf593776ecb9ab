/* caliper reference engine — llama.cpp's 4- to 6-bit weight formats: Q4_0
 * (32 weights a block) and the K-quants Q4_K, Q5_K and Q6_K (256-weight
 * super-blocks), in ggml's byte layouts (ggml-common.h). For each: a plain C
 * quantizer and dequantizer, a reference dot product, and the decode-batch
 * product, vectorised with AVX2 and FMA where the CPU has them (asked at
 * run time, so the file builds for any -march), and the Q8_K rounding of
 * activations on AVX-512. On AVX-512 VNNI the K-quants take interleaved
 * rows instead (q4kx.c, q5kx.c, q6kx.c), which reuse the rounding here;
 * Q4_0's integer product on rounded activations is q32.c's. */
#include "engine/kernels.h"
#include "engine/simd.h"
#include "engine/engine.h"
#include "engine/tbuf.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

_Static_assert(sizeof(cal_q4_0_block) == 18, "block_q4_0 is 18 bytes in GGUF");
_Static_assert(sizeof(cal_q4_k_block) == 144, "block_q4_K is 144 bytes in GGUF");
_Static_assert(sizeof(cal_q6_k_block) == 210, "block_q6_K is 210 bytes in GGUF");
_Static_assert(sizeof(cal_q5_k_block) == 176, "block_q5_K is 176 bytes in GGUF");

int cal_k_is_kq(int dtype)
{
    return dtype == CAL_DTYPE_Q4_0 || dtype == CAL_DTYPE_Q4_K || dtype == CAL_DTYPE_Q5_K ||
           dtype == CAL_DTYPE_Q6_K;
}

/* the K-quants: 256-weight super-blocks, Q8_K activations */
static int is_k(int dtype)
{
    return dtype == CAL_DTYPE_Q4_K || dtype == CAL_DTYPE_Q5_K || dtype == CAL_DTYPE_Q6_K;
}

/* ---- Q4_0: value = d · (q − 8), q the nibble; element j of a block is the
 * low nibble of qs[j], element j + 16 its high nibble ---------------------- */

/* Round to nearest per block, as llama.cpp's quantize_row_q4_0_ref: the
 * value of largest magnitude maps to −8 exactly (d = that value / −8), so
 * both signs use the full range on the side that needs it. */
static void quant_q4_0(const float *x, cal_q4_0_block *o)
{
    float amax = 0, vmax = 0;
    for (int j = 0; j < CAL_Q4_0_BLOCK; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            vmax = x[j];
        }
    float d = vmax / -8.0f;
    /* the stored scale is the half: quantize against what a reader sees */
    o->d = cal_k_f32_to_f16(d);
    float dh = cal_k_f16_to_f32(o->d), id = dh != 0.0f ? 1.0f / dh : 0.0f;
    for (int j = 0; j < CAL_Q4_0_BLOCK / 2; j++) {
        int a = (int)floorf(x[j] * id + 8.5f), b = (int)floorf(x[j + 16] * id + 8.5f);
        a = a < 0 ? 0 : a > 15 ? 15 : a;
        b = b < 0 ? 0 : b > 15 ? 15 : b;
        o->qs[j] = (uint8_t)(a | b << 4);
    }
}

static void deq_q4_0(const cal_q4_0_block *b, float *y)
{
    float d = cal_k_f16_to_f32(b->d);
    for (int j = 0; j < CAL_Q4_0_BLOCK / 2; j++) {
        y[j] = d * (float)((b->qs[j] & 0xF) - 8);
        y[j + 16] = d * (float)((b->qs[j] >> 4) - 8);
    }
}

/* ---- Q4_K: 8 sub-blocks of 32, value = d·sc_j·q − dmin·m_j, sc_j and m_j
 * 6-bit; sub-block j's nibbles are the low (j even) or high (j odd) halves
 * of qs[32·(j/2) ..] ---------------------------------------------------------- */

/* The 6-bit scale and min of sub-block j from the 12 packed bytes (ggml's
 * get_scale_min_k4): j < 4 in the low 6 bits of bytes j and j+4; j ≥ 4 as
 * a nibble of byte j+4 and the top 2 bits of bytes j−4 and j. */
static void q4k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static void q4k_pack_scales(const int *sc, const int *m, uint8_t *s)
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (m[j + 4] & 0xF) << 4);
    }
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* A plain quantizer, not llama.cpp's iterative one (make_qkx2_quants): each
 * sub-block's range [min(x, 0), max(x)] is split into 15 steps, the 8 steps
 * and 8 offsets then share a 6-bit grid under the super-block's d and dmin
 * (largest / 63), and every weight rounds to the nearest level of the
 * scales as stored. Its error is at most about half a step plus the 6-bit
 * rounding of the step; llama.cpp's search finds somewhat smaller errors. */
static void quant_q4_k(const float *x, cal_q4_k_block *o)
{
    float step[8], off[8], smax = 0, omax = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = 0;   /* the range includes 0: offsets stay ≥ 0 */
        for (int i = 0; i < 32; i++) {
            lo = fminf(lo, x[32 * j + i]);
            hi = fmaxf(hi, x[32 * j + i]);
        }
        step[j] = (hi - lo) / 15.0f;
        off[j] = -lo;
        smax = fmaxf(smax, step[j]);
        omax = fmaxf(omax, off[j]);
    }
    o->d = cal_k_f32_to_f16(smax / 63.0f);
    o->dmin = cal_k_f32_to_f16(omax / 63.0f);
    float d = cal_k_f16_to_f32(o->d), dmin = cal_k_f16_to_f32(o->dmin);
    int sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        /* a step rounded up, never down to 0, keeps max(x) within 15 steps */
        sc[j] = d > 0 ? clampi((int)ceilf(step[j] / d - 1e-4f), 0, 63) : 0;
        m[j] = dmin > 0 ? clampi((int)lrintf(off[j] / dmin), 0, 63) : 0;
    }
    q4k_pack_scales(sc, m, o->scales);
    for (int j = 0; j < 8; j++) {
        float s = d * (float)sc[j], mn = dmin * (float)m[j], is = s > 0 ? 1.0f / s : 0.0f;
        uint8_t *q = o->qs + 32 * (j / 2);
        for (int i = 0; i < 32; i++) {
            int v = clampi((int)lrintf((x[32 * j + i] + mn) * is), 0, 15);
            if (j % 2 == 0)
                q[i] = (uint8_t)v;
            else
                q[i] = (uint8_t)(q[i] | v << 4);
        }
    }
}

static void deq_q4_k(const cal_q4_k_block *b, float *y)
{
    float d = cal_k_f16_to_f32(b->d), dmin = cal_k_f16_to_f32(b->dmin);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        q4k_scale_min(b->scales, j, &sc, &m);
        float s = d * (float)sc, mn = dmin * (float)m;
        const uint8_t *q = b->qs + 32 * (j / 2);
        for (int i = 0; i < 32; i++)
            y[32 * j + i] = s * (float)(j % 2 ? q[i] >> 4 : q[i] & 0xF) - mn;
    }
}

/* ---- Q5_K: Q4_K with a fifth bit per weight, bit j of qh[l] for element l
 * of sub-block j ------------------------------------------------------------ */

/* Q4_K's plain quantizer with 31 steps per sub-block range */
static void quant_q5_k(const float *x, cal_q5_k_block *o)
{
    float step[8], off[8], smax = 0, omax = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = 0;
        for (int i = 0; i < 32; i++) {
            lo = fminf(lo, x[32 * j + i]);
            hi = fmaxf(hi, x[32 * j + i]);
        }
        step[j] = (hi - lo) / 31.0f;
        off[j] = -lo;
        smax = fmaxf(smax, step[j]);
        omax = fmaxf(omax, off[j]);
    }
    o->d = cal_k_f32_to_f16(smax / 63.0f);
    o->dmin = cal_k_f32_to_f16(omax / 63.0f);
    float d = cal_k_f16_to_f32(o->d), dmin = cal_k_f16_to_f32(o->dmin);
    int sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0 ? clampi((int)ceilf(step[j] / d - 1e-4f), 0, 63) : 0;
        m[j] = dmin > 0 ? clampi((int)lrintf(off[j] / dmin), 0, 63) : 0;
    }
    q4k_pack_scales(sc, m, o->scales);
    memset(o->qh, 0, sizeof o->qh);
    for (int j = 0; j < 8; j++) {
        float s = d * (float)sc[j], mn = dmin * (float)m[j], is = s > 0 ? 1.0f / s : 0.0f;
        uint8_t *q = o->qs + 32 * (j / 2);
        for (int i = 0; i < 32; i++) {
            int v = clampi((int)lrintf((x[32 * j + i] + mn) * is), 0, 31);
            q[i] = (uint8_t)(j % 2 == 0 ? (v & 0xF) : (q[i] | (v & 0xF) << 4));
            o->qh[i] = (uint8_t)(o->qh[i] | (v >> 4) << j);
        }
    }
}

/* q (0..31) of element i of sub-block j */
static int q5k_get(const cal_q5_k_block *b, int j, int i)
{
    int nib = b->qs[32 * (j / 2) + i];
    return (j % 2 ? nib >> 4 : nib & 0xF) | ((b->qh[i] >> j) & 1) << 4;
}

static void deq_q5_k(const cal_q5_k_block *b, float *y)
{
    float d = cal_k_f16_to_f32(b->d), dmin = cal_k_f16_to_f32(b->dmin);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        q4k_scale_min(b->scales, j, &sc, &m);
        float s = d * (float)sc, mn = dmin * (float)m;
        for (int i = 0; i < 32; i++)
            y[32 * j + i] = s * (float)q5k_get(b, j, i) - mn;
    }
}

/* ---- Q6_K: 16 sub-blocks of 16, value = d·scales[j]·(q − 32), q 6 bits:
 * the low 4 in ql, the high 2 in qh. Each 128-weight half h has ql[64h ..],
 * qh[32h ..]; its weight 32g + l (g < 4, l < 32) takes ql[64h + 32(g%2) + l]
 * (low nibble for g < 2, high for g ≥ 2) and bits 2g, 2g+1 of qh[32h + l]. */

static int q6k_get(const cal_q6_k_block *b, int k)
{
    int h = k / 128, g = (k % 128) / 32, l = k % 32;
    int lo = b->ql[64 * h + 32 * (g % 2) + l];
    lo = g < 2 ? lo & 0xF : lo >> 4;
    return lo | ((b->qh[32 * h + l] >> (2 * g)) & 3) << 4;
}

/* Per sub-block of 16 the value of largest magnitude maps to −32 (as Q4_0
 * maps it to −8), the 16 signed scales then share an int8 grid under d =
 * largest |scale| / 127, and each weight rounds to the nearest level of its
 * stored scale. */
static void quant_q6_k(const float *x, cal_q6_k_block *o)
{
    float scale[16], amax_s = 0;
    for (int j = 0; j < 16; j++) {
        float amax = 0, vmax = 0;
        for (int i = 0; i < 16; i++)
            if (fabsf(x[16 * j + i]) > amax) {
                amax = fabsf(x[16 * j + i]);
                vmax = x[16 * j + i];
            }
        scale[j] = vmax / -32.0f;
        amax_s = fmaxf(amax_s, fabsf(scale[j]));
    }
    o->d = cal_k_f32_to_f16(amax_s / 127.0f);
    float d = cal_k_f16_to_f32(o->d);
    uint8_t q[256];
    for (int j = 0; j < 16; j++) {
        int sc = d > 0 ? clampi((int)lrintf(scale[j] / d), -127, 127) : 0;
        o->scales[j] = (int8_t)sc;
        float s = d * (float)sc, is = s != 0.0f ? 1.0f / s : 0.0f;
        for (int i = 0; i < 16; i++)
            q[16 * j + i] = (uint8_t)(clampi((int)lrintf(x[16 * j + i] * is), -32, 31) + 32);
    }
    memset(o->ql, 0, sizeof o->ql);
    memset(o->qh, 0, sizeof o->qh);
    for (int k = 0; k < 256; k++) {
        int h = k / 128, g = (k % 128) / 32, l = k % 32;
        uint8_t *lo = &o->ql[64 * h + 32 * (g % 2) + l];
        *lo = (uint8_t)(*lo | (q[k] & 0xF) << (g < 2 ? 0 : 4));
        o->qh[32 * h + l] = (uint8_t)(o->qh[32 * h + l] | (q[k] >> 4) << (2 * g));
    }
}

static void deq_q6_k(const cal_q6_k_block *b, float *y)
{
    float d = cal_k_f16_to_f32(b->d);
    for (int k = 0; k < 256; k++)
        y[k] = d * (float)b->scales[k / 16] * (float)(q6k_get(b, k) - 32);
}

/* ---- rows ---------------------------------------------------------------- */

void cal_k_kq_quantize_row(int dtype, const float *src, void *dst, int n)
{
    if (dtype == CAL_DTYPE_Q4_0)
        for (int b = 0; b < n / CAL_Q4_0_BLOCK; b++)
            quant_q4_0(src + (size_t)b * CAL_Q4_0_BLOCK, (cal_q4_0_block *)dst + b);
    else if (dtype == CAL_DTYPE_Q4_K)
        for (int b = 0; b < n / CAL_QK_K; b++)
            quant_q4_k(src + (size_t)b * CAL_QK_K, (cal_q4_k_block *)dst + b);
    else if (dtype == CAL_DTYPE_Q6_K)
        for (int b = 0; b < n / CAL_QK_K; b++)
            quant_q6_k(src + (size_t)b * CAL_QK_K, (cal_q6_k_block *)dst + b);
    else if (dtype == CAL_DTYPE_Q5_K)
        for (int b = 0; b < n / CAL_QK_K; b++)
            quant_q5_k(src + (size_t)b * CAL_QK_K, (cal_q5_k_block *)dst + b);
}

void cal_k_kq_dequantize_row(int dtype, const void *src, float *dst, int n)
{
    if (dtype == CAL_DTYPE_Q4_0)
        for (int b = 0; b < n / CAL_Q4_0_BLOCK; b++)
            deq_q4_0((const cal_q4_0_block *)src + b, dst + (size_t)b * CAL_Q4_0_BLOCK);
    else if (dtype == CAL_DTYPE_Q4_K)
        for (int b = 0; b < n / CAL_QK_K; b++)
            deq_q4_k((const cal_q4_k_block *)src + b, dst + (size_t)b * CAL_QK_K);
    else if (dtype == CAL_DTYPE_Q6_K)
        for (int b = 0; b < n / CAL_QK_K; b++)
            deq_q6_k((const cal_q6_k_block *)src + b, dst + (size_t)b * CAL_QK_K);
    else if (dtype == CAL_DTYPE_Q5_K)
        for (int b = 0; b < n / CAL_QK_K; b++)
            deq_q5_k((const cal_q5_k_block *)src + b, dst + (size_t)b * CAL_QK_K);
}

float cal_k_kq_dot_ref(int dtype, const void *row, const float *x, int n)
{
    int blk = dtype == CAL_DTYPE_Q4_0 ? CAL_Q4_0_BLOCK : CAL_QK_K;
    size_t bb = cal_k_row_bytes(dtype, blk);
    float w[CAL_QK_K], s = 0;
    for (int b = 0; b < n / blk; b++) {
        cal_k_kq_dequantize_row(dtype, (const char *)row + (size_t)b * bb, w, blk);
        for (int i = 0; i < blk; i++)
            s += w[i] * x[(size_t)b * blk + i];
    }
    return s;
}

/* ---- decode products on Q8_K-rounded activations ---------------------------
 * As llama.cpp's CPU backend (ggml_vec_dot_q4_K_q8_K, _q6_K_q8_K): each
 * activation row is rounded once per product to 8 bits per 256 (Q8_K) and
 * the dot product runs in integers, one float step per super-block. This
 * rounding is part of the numbers the engine reports on these formats, as
 * it is of llama.cpp's; the prefill path (dequantize, then GEMM) keeps F32
 * activations, except on interleaved Q4_K (q4kx.c), whose prefill rounds
 * them too, as llama.cpp's does. Against the F32 product Σ w·x the error is Σ w·(x − x̂) with
 * |x − x̂| ≤ d/2 = max|x|/254 per element (max over the element's 256), so
 * at most Σ_b (max|x|_b / 254)·Σ_{k∈b} |w_k|, plus float rounding. */

void cal_k_q8_k_quantize_row(const float *x, cal_q8_k_block *y, int n)
{
    if (cal_k_q8_k_quantize_avx512(x, y, n) != 0)
        cal_k_q8_k_quantize_row_portable(x, y, n);
}

void cal_k_q8_k_quantize_row_portable(const float *x, cal_q8_k_block *y, int n)
{
    for (int b = 0; b < n / CAL_QK_K; b++, x += CAL_QK_K, y++) {
        float amax = 0;
        for (int k = 0; k < CAL_QK_K; k++)
            amax = fmaxf(amax, fabsf(x[k]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        y->d = d;
        for (int j = 0; j < CAL_QK_K / 16; j++) {
            int sum = 0;
            for (int k = 16 * j; k < 16 * j + 16; k++) {
                int q = clampi((int)lrintf(x[k] * id), -127, 127);
                y->qs[k] = (int8_t)q;
                sum += q;
            }
            y->bsums[j] = (int16_t)sum;
        }
    }
}

void cal_k_q8_k_round(const float *x, float *out, int n)
{
    cal_q8_k_block q;
    for (int b = 0; b < n / CAL_QK_K; b++) {
        cal_k_q8_k_quantize_row(x + (size_t)b * CAL_QK_K, &q, CAL_QK_K);
        for (int k = 0; k < CAL_QK_K; k++)
            out[(size_t)b * CAL_QK_K + k] = q.d * (float)q.qs[k];
    }
}

static float dot_q4_k_q8(const cal_q4_k_block *w, const cal_q8_k_block *x, int nb)
{
    float s = 0;
    for (int b = 0; b < nb; b++) {
        int isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m, t = 0;
            q4k_scale_min(w[b].scales, j, &sc, &m);
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            const int8_t *q8 = x[b].qs + 32 * j;
            for (int i = 0; i < 32; i++)
                t += (j % 2 ? q[i] >> 4 : q[i] & 0xF) * q8[i];
            isum += sc * t;
            imin += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        float d = cal_k_f16_to_f32(w[b].d), dmin = cal_k_f16_to_f32(w[b].dmin);
        s += x[b].d * (d * (float)isum - dmin * (float)imin);
    }
    return s;
}

static float dot_q5_k_q8(const cal_q5_k_block *w, const cal_q8_k_block *x, int nb)
{
    float s = 0;
    for (int b = 0; b < nb; b++) {
        int isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m, t = 0;
            q4k_scale_min(w[b].scales, j, &sc, &m);
            const int8_t *q8 = x[b].qs + 32 * j;
            for (int i = 0; i < 32; i++)
                t += q5k_get(&w[b], j, i) * q8[i];
            isum += sc * t;
            imin += m * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        float d = cal_k_f16_to_f32(w[b].d), dmin = cal_k_f16_to_f32(w[b].dmin);
        s += x[b].d * (d * (float)isum - dmin * (float)imin);
    }
    return s;
}

static float dot_q6_k_q8(const cal_q6_k_block *w, const cal_q8_k_block *x, int nb)
{
    float s = 0;
    for (int b = 0; b < nb; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int t = 0;
            for (int k = 16 * j; k < 16 * j + 16; k++)
                t += (q6k_get(&w[b], k) - 32) * x[b].qs[k];
            isum += w[b].scales[j] * t;
        }
        s += x[b].d * (cal_k_f16_to_f32(w[b].d) * (float)isum);
    }
    return s;
}

float cal_k_kq_dot_q8k(int dtype, const void *row, const cal_q8_k_block *x, int n)
{
    if (dtype == CAL_DTYPE_Q4_K)
        return dot_q4_k_q8(row, x, n / CAL_QK_K);
    if (dtype == CAL_DTYPE_Q6_K)
        return dot_q6_k_q8(row, x, n / CAL_QK_K);
    if (dtype == CAL_DTYPE_Q5_K)
        return dot_q5_k_q8(row, x, n / CAL_QK_K);
    return 0.0f;
}

/* Q8_K blocks of activations a thread keeps (8 rows of 16384), ~150 KB */
enum { XK_CAP = 512 };

/* Outputs [0, n_out) for mg activation rows already rounded (row i at
 * xq + i·nb), with the vector kernels or in plain C. */
typedef void (*q8_products)(int dtype, float *y, int ldy, const cal_q8_k_block *xq, int nb,
                            const void *w, int n_out, int mg, float beta);

static void products_plain(int dtype, float *y, int ldy, const cal_q8_k_block *xq, int nb,
                           const void *w, int n_out, int mg, float beta)
{
    size_t rb = cal_k_row_bytes(dtype, nb * CAL_QK_K);
    for (int r = 0; r < n_out; r++)
        for (int i = 0; i < mg; i++) {
            float s = cal_k_kq_dot_q8k(dtype, (const char *)w + (size_t)r * rb,
                                       xq + (size_t)i * nb, nb * CAL_QK_K);
            float *o = y + (size_t)i * ldy + r;
            *o = beta == 0.0f ? s : beta * *o + s;
        }
}

/* Y = beta·Y + X · Wᵀ through the float reference, one dot product at a
 * time: the portable path of formats without an integer one, and the
 * answer when the rounded activations find no memory. */
static void matmul_ref(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                       int n_out, int n_in, int m, float beta)
{
    size_t rb = cal_k_row_bytes(dtype, n_in);
    for (int r = 0; r < n_out; r++)
        for (int i = 0; i < m; i++) {
            float s = cal_k_kq_dot_ref(dtype, (const char *)w + (size_t)r * rb,
                                       x + (size_t)i * ldx, n_in);
            float *o = y + (size_t)i * ldy + r;
            *o = beta == 0.0f ? s : beta * *o + s;
        }
}


size_t cal_k_kq_xbytes(int n_in, int m)
{
    if (n_in < CAL_QK_K || n_in % CAL_QK_K != 0 || m < 1)
        return 0;
    return sizeof(cal_q8_k_block) * (size_t)(n_in / CAL_QK_K) * (size_t)m;
}

void cal_k_kq_round(const float *x, int ldx, int n_in, int m, cal_q8_k_block *xq)
{
    int nb = n_in / CAL_QK_K;
    for (int i = 0; i < m; i++)
        cal_k_q8_k_quantize_row(x + (size_t)i * ldx, xq + (size_t)i * nb, n_in);
}

static q8_products best_products(void);

void cal_k_kq_apply(int dtype, float *y, int ldy, const cal_q8_k_block *xq, const void *w,
                    int n_out, int n_in, int m, float beta)
{
    if (n_in >= CAL_QK_K)
        best_products()(dtype, y, ldy, xq, n_in / CAL_QK_K, w, n_out, m, beta);
}

/* Rounds X in groups of rows that fit the thread's buffer (multiples of 8,
 * the vector kernels' batch, where more than 8 fit); a row too long for it
 * takes a buffer of its own, and without memory for that the F32 reference
 * product answers instead. */
static void kq_q8_matmul(q8_products fn, int dtype, float *y, int ldy, const float *x, int ldx,
                         const void *w, int n_out, int n_in, int m, float beta)
{
    int nb = n_in / CAL_QK_K;
    if (nb == 0)
        return;
    int g = XK_CAP / nb;
    cal_q8_k_block *buf = cal_tbuf(CAL_TBUF_KQ, sizeof *buf * XK_CAP), *heap = NULL;
    if (g == 0 || !buf) {
        heap = malloc(sizeof *heap * (size_t)nb);
        if (!heap) {
            matmul_ref(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
            return;
        }
        buf = heap;
        g = 1;
    } else if (g > 8) {
        g -= g % 8;
    }
    for (int i0 = 0; i0 < m; i0 += g) {
        int mg = m - i0 < g ? m - i0 : g;
        cal_k_kq_round(x + (size_t)i0 * ldx, ldx, n_in, mg, buf);
        fn(dtype, y + (size_t)i0 * ldy, ldy, buf, nb, w, n_out, mg, beta);
    }
    free(heap);
}

/* ---- AVX2 + FMA decode products ---------------------------------------------
 * Each weight row is read once for up to 8 activation rows. Q4_0: 32
 * weights at a time are decoded to floats (the integer q minus its offset,
 * exact) and each activation row multiplies them into a sum for the block,
 * which then takes the block's scale. Q4_K, Q6_K: integer products on Q8_K
 * activations (above), the same numbers as dot_q4_k_q8 / dot_q6_k_q8. */
#if HAVE_X86
/* the kernels go into cal_simd (engine/simd.h: chosen at run time, checked
 * by check-isa); their inlined helpers need only the target */
#define TGT2 CAL_SIMD("avx2,fma,f16c")
#define INL2 static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* 8 signed bytes to 8 floats */
INL2 __m256 i8x8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

INL2 float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* One weight row × MB activation rows of n_in; sums into s[MB]. */
INL2 void row_q4_0(int MB, const cal_q4_0_block *w, const float *x, int ldx, int n_in, float *s)
{
    __m256 acc[8];
    for (int i = 0; i < MB; i++)
        acc[i] = _mm256_setzero_ps();
    const __m128i m4 = _mm_set1_epi8(0xF), eight = _mm_set1_epi8(8);
    for (int b = 0; b < n_in / CAL_Q4_0_BLOCK; b++) {
        __m128i raw = _mm_loadu_si128((const __m128i *)w[b].qs);
        __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
        __m256 f[4] = {i8x8_ps(lo), i8x8_ps(_mm_srli_si128(lo, 8)), i8x8_ps(hi),
                       i8x8_ps(_mm_srli_si128(hi, 8))};
        __m256 d = _mm256_set1_ps(cal_k_f16_to_f32(w[b].d));
        for (int i = 0; i < MB; i++) {
            const float *xb = x + (size_t)i * ldx + (size_t)b * CAL_Q4_0_BLOCK;
            __m256 t = _mm256_mul_ps(f[0], _mm256_loadu_ps(xb));
            t = _mm256_fmadd_ps(f[1], _mm256_loadu_ps(xb + 8), t);
            t = _mm256_fmadd_ps(f[2], _mm256_loadu_ps(xb + 16), t);
            t = _mm256_fmadd_ps(f[3], _mm256_loadu_ps(xb + 24), t);
            acc[i] = _mm256_fmadd_ps(t, d, acc[i]);
        }
    }
    for (int i = 0; i < MB; i++)
        s[i] = hsum8(acc[i]);
}

INL2 int hsum_i32(__m256i v)
{
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    return _mm_cvtsi128_si32(t);
}

/* A half to a float with F16C: exact, as cal_k_f16_to_f32 is */
INL2 float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* Σ of the int32 lanes of a and of b, in *sa and *sb */
INL2 void hsum2_i32(__m256i a, __m128i b, int *sa, int *sb)
{
    __m128i t = _mm_hadd_epi32(_mm_add_epi32(_mm256_castsi256_si128(a),
                                             _mm256_extracti128_si256(a, 1)), b);
    t = _mm_hadd_epi32(t, t);   /* a's sum in lane 0, b's in lane 1 */
    *sa = _mm_cvtsi128_si32(t);
    *sb = _mm_extract_epi32(t, 1);
}

INL2 __m128i q4k_unpack(const uint8_t *s)
{
    uint32_t u[4];
    cal_k_q4k_scales(s, u);
    return _mm_loadu_si128((const __m128i *)u);
}

/* 16-bit lane j of v (j < 8, within each 128-bit half) in every lane */
INL2 __m256i bcast16(__m256i v, int j)
{
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* One Q4_K row × MB rows of Q8_K (row i at x + i·nb): the nibbles are
 * unpacked once per super-block for the whole batch; maddubs multiplies
 * them (unsigned) by the int8 activations into pairs of 16-bit sums (at
 * most 2·15·127, no saturation), madd takes the sub-block's 6-bit scale
 * into 32 bits, and the mins meet the activations' sums per 32 (bsums
 * added in pairs). The integers are dot_q4_k_q8's, and so is the float
 * step per super-block. */
INL2 void rowq_q4_k(int MB, const cal_q4_k_block *w, const cal_q8_k_block *x, int nb, float *s)
{
    for (int i = 0; i < MB; i++)
        s[i] = 0;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int b = 0; b < nb; b++) {
        __m256i sm = _mm256_cvtepu8_epi16(q4k_unpack(w[b].scales));
        __m256i sc = _mm256_permute2x128_si256(sm, sm, 0x00);   /* scales in both halves */
        __m128i mins = _mm256_extracti128_si256(sm, 1);
        __m256i sumi[8];
        for (int i = 0; i < MB; i++)
            sumi[i] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {   /* a pair of sub-blocks shares 32 bytes */
            __m256i raw = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * p));
            __m256i lo = _mm256_and_si256(raw, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            __m256i slo = bcast16(sc, 2 * p), shi = bcast16(sc, 2 * p + 1);
            for (int i = 0; i < MB; i++) {
                const int8_t *q8 = x[(size_t)i * nb + b].qs + 64 * p;
                __m256i t0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8));
                __m256i t1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
                t0 = _mm256_madd_epi16(t0, slo);
                t1 = _mm256_madd_epi16(t1, shi);
                sumi[i] = _mm256_add_epi32(sumi[i], _mm256_add_epi32(t0, t1));
            }
        }
        float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
        for (int i = 0; i < MB; i++) {
            const cal_q8_k_block *xb = &x[(size_t)i * nb + b];
            __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
            __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            int isum, imin;
            hsum2_i32(sumi[i], _mm_madd_epi16(mins, pair), &isum, &imin);
            s[i] += xb->d * (d * (float)isum - dmin * (float)imin);
        }
    }
}

/* One Q5_K row × MB rows of Q8_K: rowq_q4_k with each value's fifth bit
 * (bit 2p of qh[l] for the low nibbles of pair p, bit 2p + 1 for the high
 * ones) moved to bit 4 by one shift of the 32 qh bytes; values 0..31, at
 * most 2·31·127 a pair, no saturation. */
INL2 void rowq_q5_k(int MB, const cal_q5_k_block *w, const cal_q8_k_block *x, int nb, float *s)
{
    for (int i = 0; i < MB; i++)
        s[i] = 0;
    const __m256i m4 = _mm256_set1_epi8(0xF), b4 = _mm256_set1_epi8(0x10);
    for (int b = 0; b < nb; b++) {
        __m256i sm = _mm256_cvtepu8_epi16(q4k_unpack(w[b].scales));
        __m256i sc = _mm256_permute2x128_si256(sm, sm, 0x00);
        __m128i mins = _mm256_extracti128_si256(sm, 1);
        __m256i qh = _mm256_loadu_si256((const __m256i *)w[b].qh);
        __m256i sumi[8];
        for (int i = 0; i < MB; i++)
            sumi[i] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * p));
            /* bit 2p to bit 4, and bit 2p + 1 (16-bit shifts: the mask keeps
             * each byte's own bit) */
            __m256i h0 = p < 2 ? _mm256_slli_epi16(qh, 4 - 2 * p) : _mm256_srli_epi16(qh, 2 * p - 4);
            __m256i h1 = p < 2 ? _mm256_slli_epi16(qh, 3 - 2 * p) : _mm256_srli_epi16(qh, 2 * p - 3);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4), _mm256_and_si256(h0, b4));
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                         _mm256_and_si256(h1, b4));
            __m256i slo = bcast16(sc, 2 * p), shi = bcast16(sc, 2 * p + 1);
            for (int i = 0; i < MB; i++) {
                const int8_t *q8 = x[(size_t)i * nb + b].qs + 64 * p;
                __m256i t0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8));
                __m256i t1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
                t0 = _mm256_madd_epi16(t0, slo);
                t1 = _mm256_madd_epi16(t1, shi);
                sumi[i] = _mm256_add_epi32(sumi[i], _mm256_add_epi32(t0, t1));
            }
        }
        float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
        for (int i = 0; i < MB; i++) {
            const cal_q8_k_block *xb = &x[(size_t)i * nb + b];
            __m256i bs = _mm256_loadu_si256((const __m256i *)xb->bsums);
            __m128i pair = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            int isum, imin;
            hsum2_i32(sumi[i], _mm_madd_epi16(mins, pair), &isum, &imin);
            s[i] += xb->d * (d * (float)isum - dmin * (float)imin);
        }
    }
}

/* One Q6_K row × MB rows of Q8_K: q = 0..63 unpacked once per super-block,
 * maddubs (at most 2·63·127) and madd with the int8 scales, and the offset
 * 32 taken off once as 32·Σ_j scale_j·bsum_j. */
INL2 void rowq_q6_k(int MB, const cal_q6_k_block *w, const cal_q8_k_block *x, int nb, float *s)
{
    for (int i = 0; i < MB; i++)
        s[i] = 0;
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    for (int b = 0; b < nb; b++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[b].scales));
        /* scales 0-7 in both halves, and 8-15 in both halves */
        __m256i sca = _mm256_permute2x128_si256(sc16, sc16, 0x00);
        __m256i scb = _mm256_permute2x128_si256(sc16, sc16, 0x11);
        __m256i sumi[8];
        for (int i = 0; i < MB; i++)
            sumi[i] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i qh = _mm256_loadu_si256((const __m256i *)(w[b].qh + 32 * h));
            __m256i sch = h ? scb : sca;
            for (int g = 0; g < 4; g++) {
                __m256i ql = _mm256_loadu_si256((const __m256i *)(w[b].ql + 64 * h + 32 * (g % 2)));
                __m256i lo = g < 2 ? _mm256_and_si256(ql, m4)
                                   : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m2);
                __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                /* sub-blocks 2g (low half) and 2g + 1 (high half) of this h */
                __m256i scv = _mm256_blend_epi32(bcast16(sch, 2 * g), bcast16(sch, 2 * g + 1), 0xF0);
                for (int i = 0; i < MB; i++) {
                    const int8_t *q8 = x[(size_t)i * nb + b].qs + 128 * h + 32 * g;
                    __m256i t = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                    sumi[i] = _mm256_add_epi32(sumi[i], _mm256_madd_epi16(t, scv));
                }
            }
        }
        float d = h2f(w[b].d);
        for (int i = 0; i < MB; i++) {
            const cal_q8_k_block *xb = &x[(size_t)i * nb + b];
            __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)xb->bsums));
            int isum = hsum_i32(_mm256_sub_epi32(sumi[i], _mm256_slli_epi32(off, 5)));
            s[i] += xb->d * (d * (float)isum);
        }
    }
}

typedef void (*row_fn)(const void *w, const float *x, int ldx, int n_in, float *s);
#define ROWF(FMT, MB)                                                               \
    static TGT2 void r_##FMT##_##MB(const void *w, const float *x, int ldx, int n_in, \
                                    float *s)                                       \
    { row_##FMT(MB, w, x, ldx, n_in, s); }
#define ROWS8(FMT) ROWF(FMT, 1) ROWF(FMT, 2) ROWF(FMT, 3) ROWF(FMT, 4) ROWF(FMT, 5)     \
                   ROWF(FMT, 6) ROWF(FMT, 7) ROWF(FMT, 8)
ROWS8(q4_0)
#define TAB(FMT) {r_##FMT##_1, r_##FMT##_2, r_##FMT##_3, r_##FMT##_4, r_##FMT##_5, \
                  r_##FMT##_6, r_##FMT##_7, r_##FMT##_8}
/* [MB − 1] */
static const row_fn rows_avx2[8] = TAB(q4_0);

typedef void (*rowq_fn)(const void *w, const cal_q8_k_block *x, int nb, float *s);
#define ROWQ(FMT, MB)                                                                   \
    static TGT2 void rq_##FMT##_##MB(const void *w, const cal_q8_k_block *x, int nb,   \
                                     float *s)                                         \
    { rowq_##FMT(MB, w, x, nb, s); }
#define ROWQ8(FMT) ROWQ(FMT, 1) ROWQ(FMT, 2) ROWQ(FMT, 3) ROWQ(FMT, 4) ROWQ(FMT, 5)    \
                   ROWQ(FMT, 6) ROWQ(FMT, 7) ROWQ(FMT, 8)
ROWQ8(q4_k) ROWQ8(q5_k) ROWQ8(q6_k)
#define TABQ(FMT) {rq_##FMT##_1, rq_##FMT##_2, rq_##FMT##_3, rq_##FMT##_4, rq_##FMT##_5, \
                   rq_##FMT##_6, rq_##FMT##_7, rq_##FMT##_8}
/* [Q4_K, Q5_K, Q6_K][MB − 1] */
static const rowq_fn rowsq_avx2[3][8] = {TABQ(q4_k), TABQ(q5_k), TABQ(q6_k)};

/* m rows in chunks of at most 8, as even as they go */
static void matmul_avx2(float *y, int ldy, const float *x, int ldx, const void *w, int n_out,
                        int n_in, int m, float beta)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q4_0, n_in);
    int nch = (m + 7) / 8;
    for (int r = 0; r < n_out; r++) {
        const char *wr = (const char *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            float s[8];
            rows_avx2[mb - 1](wr, x + (size_t)i0 * ldx, ldx, n_in, s);
            for (int i = 0; i < mb; i++) {
                float *o = y + (size_t)(i0 + i) * ldy + r;
                *o = beta == 0.0f ? s[i] : beta * *o + s[i];
            }
            i0 += mb;
        }
    }
}

static void products_avx2(int dtype, float *y, int ldy, const cal_q8_k_block *xq, int nb,
                          const void *w, int n_out, int mg, float beta)
{
    int f = dtype == CAL_DTYPE_Q4_K ? 0 : dtype == CAL_DTYPE_Q5_K ? 1 : 2;
    size_t rb = cal_k_row_bytes(dtype, nb * CAL_QK_K);
    int nch = (mg + 7) / 8;
    for (int r = 0; r < n_out; r++) {
        const char *wr = (const char *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (mg - i0) / (nch - c);
            float s[8];
            rowsq_avx2[f][mb - 1](wr, xq + (size_t)i0 * nb, nb, s);
            for (int i = 0; i < mb; i++) {
                float *o = y + (size_t)(i0 + i) * ldy + r;
                *o = beta == 0.0f ? s[i] : beta * *o + s[i];
            }
            i0 += mb;
        }
    }
}

#endif

/* ---- Q8_K rounding on AVX-512 ------------------------------------------ */
#if HAVE_X86
#define TGT5 CAL_SIMD("avx512f,avx512bw,avx512vl,avx512dq")
/* One super-block rounded as cal_k_q8_k_quantize_row_portable rounds it:
 * the same division for d and 1/d, x·(1/d) in F32, and cvtps_epi32 rounds
 * to nearest even as lrintf does in the default mode. */
static TGT5 void round_k(const float *x, cal_q8_k_block *y)
{
    __m512 v[16], amax = _mm512_setzero_ps();
    for (int j = 0; j < 16; j++) {
        v[j] = _mm512_loadu_ps(x + 16 * j);
        amax = _mm512_max_ps(amax, _mm512_abs_ps(v[j]));
    }
    float d = _mm512_reduce_max_ps(amax) / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    y->d = d;
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int j = 0; j < 16; j++) {
        __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(v[j], _mm512_set1_ps(id)));
        q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
        _mm_storeu_si128((__m128i *)(y->qs + 16 * j), _mm512_cvtepi32_epi8(q));
        y->bsums[j] = (int16_t)_mm512_reduce_add_epi32(q);
    }
}

#endif

int cal_k_q8_k_quantize_avx512(const float *x, cal_q8_k_block *y, int n)
{
#if HAVE_X86
    if (!cal_k_have_q8x())
        return -1;
    for (int b = 0; b < n / CAL_QK_K; b++)
        round_k(x + (size_t)b * CAL_QK_K, y + b);
    return 0;
#else
    (void)x; (void)y; (void)n;
    return -1;
#endif
}



static q8_products best_products(void)
{
#if HAVE_X86
    if (cal_k_have_kq_avx2())
        return products_avx2;
#endif
    return products_plain;
}

void cal_k_kq_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                              const void *w, int n_out, int n_in, int m, float beta)
{
    if (is_k(dtype)) {
        kq_q8_matmul(products_plain, dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
    matmul_ref(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}

void cal_k_kq_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                     int n_out, int n_in, int m, float beta)
{
#if HAVE_X86
    if (cal_k_have_kq_avx2()) {
        if (dtype == CAL_DTYPE_Q4_0)
            matmul_avx2(y, ldy, x, ldx, w, n_out, n_in, m, beta);
        else
            kq_q8_matmul(best_products(), dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
#endif
    cal_k_kq_matmul_portable(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}
