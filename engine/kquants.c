/* caliper reference engine — llama.cpp's 4- and 6-bit weight formats: Q4_0
 * (32 weights a block) and the K-quants Q4_K and Q6_K (256-weight
 * super-blocks), in ggml's byte layouts (ggml-common.h). For each: a plain C
 * quantizer and dequantizer, a reference dot product, and the decode-batch
 * product, vectorised with AVX2 and FMA where the CPU has them (asked at
 * run time, so the file builds for any -march). */
#include "engine/kernels.h"
#include "engine/simd.h"
#include "engine/engine.h"
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

_Static_assert(sizeof(cal_q4_0_block) == 18, "block_q4_0 is 18 bytes in GGUF");
_Static_assert(sizeof(cal_q4_k_block) == 144, "block_q4_K is 144 bytes in GGUF");
_Static_assert(sizeof(cal_q6_k_block) == 210, "block_q6_K is 210 bytes in GGUF");

int cal_k_is_kq(int dtype)
{
    return dtype == CAL_DTYPE_Q4_0 || dtype == CAL_DTYPE_Q4_K || dtype == CAL_DTYPE_Q6_K;
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

/* ---- AVX2 + FMA decode products ---------------------------------------------
 * Each weight row is read once for up to 8 activation rows: 32 weights at a
 * time are decoded to floats (the integer q minus its offset, exact), each
 * activation row multiplies them into a sum for the sub-block, and that sum
 * takes the sub-block's scale in one more multiply-add. The per-weight work
 * is shared by the batch, so batch 8 reads the row once for 8 products. */
#if HAVE_X86
/* the kernels go into cal_simd (engine/simd.h: chosen at run time, checked
 * by check-isa); their inlined helpers need only the target */
#define TGT2 CAL_SIMD("avx2,fma,f16c")
#define INL2 static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* 8 signed bytes to 8 floats */
INL2 __m256 i8x8_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/* 32 signed bytes to four vectors of 8 floats */
INL2 void i8x32_ps(__m256i q, __m256 *f)
{
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    f[0] = i8x8_ps(lo);
    f[1] = i8x8_ps(_mm_srli_si128(lo, 8));
    f[2] = i8x8_ps(hi);
    f[3] = i8x8_ps(_mm_srli_si128(hi, 8));
}

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

INL2 void row_q4_k(int MB, const cal_q4_k_block *w, const float *x, int ldx, int n_in, float *s)
{
    __m256 acc[8];
    for (int i = 0; i < MB; i++)
        acc[i] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int b = 0; b < n_in / CAL_QK_K; b++) {
        float d = cal_k_f16_to_f32(w[b].d), dmin = cal_k_f16_to_f32(w[b].dmin);
        for (int p = 0; p < 4; p++) {   /* a pair of sub-blocks shares 32 bytes */
            __m256i raw = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * p));
            for (int h = 0; h < 2; h++) {
                int j = 2 * p + h, sc, m;
                q4k_scale_min(w[b].scales, j, &sc, &m);
                __m256i q = h ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)
                              : _mm256_and_si256(raw, m4);
                __m256 f[4];
                i8x32_ps(q, f);   /* 0..15: as signed bytes too */
                __m256 ds = _mm256_set1_ps(d * (float)sc), mn = _mm256_set1_ps(dmin * (float)m);
                for (int i = 0; i < MB; i++) {
                    const float *xb = x + (size_t)i * ldx + (size_t)b * CAL_QK_K + 32 * j;
                    __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
                    __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);
                    __m256 t = _mm256_mul_ps(f[0], x0);
                    t = _mm256_fmadd_ps(f[1], x1, t);
                    t = _mm256_fmadd_ps(f[2], x2, t);
                    t = _mm256_fmadd_ps(f[3], x3, t);
                    __m256 xs = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
                    acc[i] = _mm256_fmadd_ps(t, ds, acc[i]);
                    acc[i] = _mm256_fnmadd_ps(xs, mn, acc[i]);
                }
            }
        }
    }
    for (int i = 0; i < MB; i++)
        s[i] = hsum8(acc[i]);
}

INL2 void row_q6_k(int MB, const cal_q6_k_block *w, const float *x, int ldx, int n_in, float *s)
{
    __m256 acc[8];
    for (int i = 0; i < MB; i++)
        acc[i] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3),
                  off = _mm256_set1_epi8(32);
    for (int b = 0; b < n_in / CAL_QK_K; b++) {
        float d = cal_k_f16_to_f32(w[b].d);
        for (int h = 0; h < 2; h++) {
            __m256i qh = _mm256_loadu_si256((const __m256i *)(w[b].qh + 32 * h));
            for (int g = 0; g < 4; g++) {
                __m256i ql = _mm256_loadu_si256((const __m256i *)(w[b].ql + 64 * h + 32 * (g % 2)));
                __m256i lo = g < 2 ? _mm256_and_si256(ql, m4)
                                   : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m2);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), off);
                __m256 f[4];
                i8x32_ps(q, f);
                int j = 8 * h + 2 * g;   /* the two sub-blocks of 16 */
                __m256 s0 = _mm256_set1_ps(d * (float)w[b].scales[j]);
                __m256 s1 = _mm256_set1_ps(d * (float)w[b].scales[j + 1]);
                for (int i = 0; i < MB; i++) {
                    const float *xb = x + (size_t)i * ldx + (size_t)b * CAL_QK_K + 128 * h + 32 * g;
                    __m256 t0 = _mm256_mul_ps(f[0], _mm256_loadu_ps(xb));
                    t0 = _mm256_fmadd_ps(f[1], _mm256_loadu_ps(xb + 8), t0);
                    __m256 t1 = _mm256_mul_ps(f[2], _mm256_loadu_ps(xb + 16));
                    t1 = _mm256_fmadd_ps(f[3], _mm256_loadu_ps(xb + 24), t1);
                    acc[i] = _mm256_fmadd_ps(t0, s0, acc[i]);
                    acc[i] = _mm256_fmadd_ps(t1, s1, acc[i]);
                }
            }
        }
    }
    for (int i = 0; i < MB; i++)
        s[i] = hsum8(acc[i]);
}

typedef void (*row_fn)(const void *w, const float *x, int ldx, int n_in, float *s);
#define ROWF(FMT, MB)                                                               \
    static TGT2 void r_##FMT##_##MB(const void *w, const float *x, int ldx, int n_in, \
                                    float *s)                                       \
    { row_##FMT(MB, w, x, ldx, n_in, s); }
#define ROWS8(FMT) ROWF(FMT, 1) ROWF(FMT, 2) ROWF(FMT, 3) ROWF(FMT, 4) ROWF(FMT, 5)     \
                   ROWF(FMT, 6) ROWF(FMT, 7) ROWF(FMT, 8)
ROWS8(q4_0) ROWS8(q4_k) ROWS8(q6_k)
#define TAB(FMT) {r_##FMT##_1, r_##FMT##_2, r_##FMT##_3, r_##FMT##_4, r_##FMT##_5, \
                  r_##FMT##_6, r_##FMT##_7, r_##FMT##_8}
/* [Q4_0, Q4_K, Q6_K][MB − 1] */
static const row_fn rows_avx2[3][8] = {TAB(q4_0), TAB(q4_k), TAB(q6_k)};

static void matmul_avx2(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                        int n_out, int n_in, int m, float beta)
{
    int f = dtype == CAL_DTYPE_Q4_0 ? 0 : dtype == CAL_DTYPE_Q4_K ? 1 : 2;
    size_t rb = cal_k_row_bytes(dtype, n_in);
    int nch = (m + 7) / 8;
    for (int r = 0; r < n_out; r++) {
        const char *wr = (const char *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            float s[8];
            rows_avx2[f][mb - 1](wr, x + (size_t)i0 * ldx, ldx, n_in, s);
            for (int i = 0; i < mb; i++) {
                float *o = y + (size_t)(i0 + i) * ldy + r;
                *o = beta == 0.0f ? s[i] : beta * *o + s[i];
            }
            i0 += mb;
        }
    }
}

static int ask_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

int cal_k_have_kq_avx2(void)
{
#if HAVE_X86
    /* a pure function of the CPU: racing threads store the same answer */
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = ask_avx2();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
#else
    return 0;
#endif
}

void cal_k_kq_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                              const void *w, int n_out, int n_in, int m, float beta)
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

void cal_k_kq_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                     int n_out, int n_in, int m, float beta)
{
#if HAVE_X86
    if (cal_k_have_kq_avx2()) {
        matmul_avx2(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
        return;
    }
#endif
    cal_k_kq_matmul_portable(dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}
