/* caliper reference engine — llama.cpp's 32-weight formats Q4_1, Q5_0 and
 * Q5_1 (ggml-common.h's layouts), and the integer product of all four
 * nibble formats (with Q4_0) on activations rounded to 8 bits per 32, as
 * llama.cpp multiplies them (ggml_vec_dot_q4_0_q8_0, _q4_1_q8_1,
 * _q5_0_q8_0, _q5_1_q8_1). Per format: llama.cpp's reference quantizer
 * (quantize_row_q4_1_ref ...), the dequantizer, the plain C product, an AVX2
 * product on rows in the block layout, and, on AVX-512 VNNI, a product on
 * rows interleaved in sixteens (below). Contracts in kernels.h.
 *
 * The interleaved layout holds, for each block of a group of 16 rows, the
 * 16 rows' d side by side (row l in lane l), then their m (Q4_1, Q5_1),
 * then their 4 bytes of fifth bits (Q5_0, Q5_1), then for each 4-byte slice
 * k of the 16 nibble bytes the 16 rows' slices side by side: one vpdpbusd
 * adds slice k's low nibbles (elements 4k..4k+3) of all 16 rows against the
 * activations' 4 bytes broadcast, and one more its high nibbles (elements
 * 16+4k..). The fifth bits are reordered within each row's 4 bytes so that
 * slice k's come out with one shift and one mask: byte t holds in bit k the
 * fifth bit of element 4k+t and in bit 4+k that of element 16+4k+t. Each
 * lane's integer sum is the block's, and its float step is row l's own,
 * the same operations as the plain C product: bit for bit the same
 * numbers. A matrix's last n_rows % 16 rows keep the block layout. */
#include "tbuf.h"
#include "engine/kernels.h"
#include "engine/engine.h"
#include "engine/simd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

_Static_assert(sizeof(cal_q4_1_block) == 20, "block_q4_1 is 20 bytes in GGUF");
_Static_assert(sizeof(cal_q5_0_block) == 22, "block_q5_0 is 22 bytes in GGUF");
_Static_assert(sizeof(cal_q5_1_block) == 24, "block_q5_1 is 24 bytes in GGUF");
_Static_assert(sizeof(cal_q8_1_block) == 48, "a rounded activation block is 48 bytes");

enum { QK = 32 };

int cal_k_is_q32(int dtype)
{
    return dtype == CAL_DTYPE_Q4_0 || dtype == CAL_DTYPE_Q4_1 || dtype == CAL_DTYPE_Q5_0 ||
           dtype == CAL_DTYPE_Q5_1;
}

/* Where a block's fields sit (bytes), and how its values are made:
 * q = nibble (+ 16·fifth bit), value = d·(q − off) (+ m) */
typedef struct fmt {
    int bytes, om, oh, oq;   /* block size; offsets of m, qh, qs (−1: none) */
    int off;                 /* Q4_0 8, Q5_0 16; 0 where there is an m */
} fmt;

static fmt fmt_of(int dtype)
{
    switch (dtype) {
    case CAL_DTYPE_Q4_0: return (fmt){18, -1, -1, 2, 8};
    case CAL_DTYPE_Q4_1: return (fmt){20, 2, -1, 4, 0};
    case CAL_DTYPE_Q5_0: return (fmt){22, -1, 2, 6, 16};
    default:             return (fmt){24, 2, 4, 8, 0};   /* Q5_1 */
    }
}

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return cal_k_f16_to_f32(h);
}

static uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* q of element j (0..31) of block b */
static int q_of(const fmt *f, const uint8_t *b, int j)
{
    int nib = j < 16 ? b[f->oq + j] & 0xF : b[f->oq + j - 16] >> 4;
    if (f->oh >= 0)
        nib |= (int)((u32_at(b + f->oh) >> j) & 1) << 4;
    return nib;
}

/* ---- quantizers: llama.cpp's reference ones (ggml-quants.c), step for
 * step, so a row quantizes to the bytes llama-quantize writes without an
 * importance matrix ---------------------------------------------------------- */

static void put_half(uint8_t *p, float v)
{
    uint16_t h = cal_k_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* (int8_t)v, as llama.cpp's reference quantizers truncate, for every v a
 * block can give; a value out of int8's range (an infinite 1/d of a range
 * too small for F32, or a NaN weight), where the C conversion is
 * undefined, goes to the nearer end (NaN to the low one) */
static int trunc8(float v)
{
    if (!(v > -129.0f))
        return -128;
    return v < 128.0f ? (int)v : 127;
}

/* quantize_row_q4_1_ref, _q5_1_ref: d = (max − min) / (2^bits − 1), m = min,
 * q = (int8_t)((x − min)·(1/d) + 0.5) (a truncation), capped at 15 for Q4_1 */
static void quant_min(const fmt *f, int bits, const float *x, uint8_t *o)
{
    float min = INFINITY, max = -INFINITY;
    for (int j = 0; j < QK; j++) {
        min = x[j] < min ? x[j] : min;
        max = x[j] > max ? x[j] : max;
    }
    float d = (max - min) / (float)((1 << bits) - 1), id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(o, d);
    put_half(o + f->om, min);
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        int a = trunc8((x[j] - min) * id + 0.5f), b = trunc8((x[j + 16] - min) * id + 0.5f);
        if (bits == 4) {
            a = a < 15 ? a : 15;
            b = b < 15 ? b : 15;
        }
        o[f->oq + j] = (uint8_t)((a & 0xF) | (b & 0xF) << 4);
        qh |= (uint32_t)((a >> 4) & 1) << j | (uint32_t)((b >> 4) & 1) << (j + 16);
    }
    if (f->oh >= 0)
        put_u32(o + f->oh, qh);
}

/* quantize_row_q5_0_ref: the value of largest magnitude maps to −16 (d =
 * that value / −16), q = (int8_t)(x·(1/d) + 16.5) capped at 31 */
static void quant_q5_0(const float *x, uint8_t *o)
{
    float amax = 0, vmax = 0;
    for (int j = 0; j < QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            vmax = x[j];
        }
    float d = vmax / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(o, d);
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        int a = trunc8(x[j] * id + 16.5f), b = trunc8(x[j + 16] * id + 16.5f);
        a = a < 31 ? a : 31;
        b = b < 31 ? b : 31;
        o[6 + j] = (uint8_t)((a & 0xF) | (b & 0xF) << 4);
        qh |= (uint32_t)((a >> 4) & 1) << j | (uint32_t)((b >> 4) & 1) << (j + 16);
    }
    put_u32(o + 2, qh);
}

void cal_k_q32_quantize_row(int dtype, const float *src, void *dst, int n)
{
    fmt f = fmt_of(dtype);
    for (int b = 0; b < n / QK; b++) {
        uint8_t *o = (uint8_t *)dst + (size_t)b * f.bytes;
        const float *x = src + (size_t)b * QK;
        if (dtype == CAL_DTYPE_Q5_0)
            quant_q5_0(x, o);
        else if (dtype == CAL_DTYPE_Q4_1 || dtype == CAL_DTYPE_Q5_1)
            quant_min(&f, dtype == CAL_DTYPE_Q4_1 ? 4 : 5, x, o);
        else
            cal_k_kq_quantize_row(dtype, x, o, QK);   /* Q4_0 */
    }
}

/* ggml's dequantize_row_q4_1 / _q5_0 / _q5_1: x = q·d + m, (q − 16)·d */
void cal_k_q32_dequantize_row(int dtype, const void *src, float *dst, int n)
{
    fmt f = fmt_of(dtype);
    for (int b = 0; b < n / QK; b++) {
        const uint8_t *s = (const uint8_t *)src + (size_t)b * f.bytes;
        float *y = dst + (size_t)b * QK;
        float d = half_at(s), m = f.om >= 0 ? half_at(s + f.om) : 0.0f;
        uint32_t h = f.oh >= 0 ? u32_at(s + f.oh) : 0;
        for (int j = 0; j < QK / 2; j++) {
            int a = (s[f.oq + j] & 0xF) | (int)((h >> j) & 1) << 4;
            int c = (s[f.oq + j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
            if (f.om >= 0) {
                y[j] = (float)a * d + m;
                y[j + 16] = (float)c * d + m;
            } else {
                y[j] = (float)(a - f.off) * d;
                y[j + 16] = (float)(c - f.off) * d;
            }
        }
    }
}

/* ---- activations: Q8_0's rounding per 32, with the sums ----------------- */

/* d = max|x| / 127 (F32), q = round(x·(1/d)) to nearest even: the rounding
 * of cal_k_q8_0_round, bit for bit */
static void round_block(const float *x, cal_q8_1_block *y)
{
    float amax = 0;
    for (int i = 0; i < QK; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < QK; i++) {
        y->qs[i] = (int8_t)lrintf(x[i] * id);
        sum += y->qs[i];
    }
    y->d = d;
    y->sum = sum;
    y->s = d * (float)sum;
    y->pad = 0;
}

void cal_k_q8_1_quantize_row_portable(const float *x, cal_q8_1_block *y, int n)
{
    for (int b = 0; b < n / QK; b++)
        round_block(x + (size_t)b * QK, y + b);
}

#if HAVE_X86
static CAL_SIMD("avx512f,avx512bw,avx512vl,avx512dq") void
round_avx512(const float *x, cal_q8_1_block *y, int n)
{
    for (int b = 0; b < n / QK; b++) {
        int sum;
        float d = cal_q8_round_block(x + (size_t)b * QK, y[b].qs, &sum);
        y[b].d = d;
        y[b].sum = sum;
        y[b].s = d * (float)sum;
        y[b].pad = 0;
    }
}
#endif

void cal_k_q8_1_quantize_row(const float *x, cal_q8_1_block *y, int n)
{
#if HAVE_X86
    if (cal_k_have_avx512()) {
        round_avx512(x, y, n);
        return;
    }
#endif
    cal_k_q8_1_quantize_row_portable(x, y, n);
}

/* ---- the product, in plain C: the definition every path computes --------- */

/* One block's float step: isum·(dw·dx), plus mw·s_x with an m (never fused) */
static inline float step(float s, int isum, float dw, float mw, const cal_q8_1_block *x,
                         int has_m)
{
    float t = (float)isum * (dw * x->d);
    if (has_m)
        t = t + mw * x->s;
    return s + t;
}

float cal_k_q32_dot_q8(int dtype, const void *row, const cal_q8_1_block *x, int n)
{
    fmt f = fmt_of(dtype);
    float s = 0;
    for (int b = 0; b < n / QK; b++) {
        const uint8_t *w = (const uint8_t *)row + (size_t)b * f.bytes;
        int isum = -f.off * x[b].sum;
        for (int j = 0; j < QK; j++)
            isum += q_of(&f, w, j) * x[b].qs[j];
        s = step(s, isum, half_at(w), f.om >= 0 ? half_at(w + f.om) : 0.0f, &x[b], f.om >= 0);
    }
    return s;
}

size_t cal_k_q32_xbytes(int n_in, int m)
{
    if (n_in < QK || n_in % QK != 0 || m < 1)
        return 0;
    return sizeof(cal_q8_1_block) * (size_t)(n_in / QK) * (size_t)m;
}

void cal_k_q32_round(const float *x, int ldx, int n_in, int m, cal_q8_1_block *xq)
{
    int nb = n_in / QK;
    for (int i = 0; i < m; i++)
        cal_k_q8_1_quantize_row(x + (size_t)i * ldx, xq + (size_t)i * nb, n_in);
}

static void put(float *o, float s, float beta)
{
    *o = beta == 0.0f ? s : beta * *o + s;
}

void cal_k_q32_apply_portable(int dtype, float *y, int ldy, const cal_q8_1_block *xq,
                              const void *w, int n_out, int n_in, int m, float beta)
{
    size_t rb = cal_k_row_bytes(dtype, n_in);
    int nb = n_in / QK;
    for (int r = 0; r < n_out; r++)
        for (int i = 0; i < m; i++)
            put(y + (size_t)i * ldy + r,
                cal_k_q32_dot_q8(dtype, (const char *)w + (size_t)r * rb, xq + (size_t)i * nb,
                                 n_in),
                beta);
}

/* ---- AVX2: one row in the block layout × up to 8 activation rows --------- */
#if HAVE_X86
#define TGT2 CAL_SIMD("avx2,fma,f16c")
#define INL2 static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* byte j = 0xFF where bit j of the 32 bits at p is set (llama.cpp's
 * bytes_from_bits_32) */
INL2 __m256i bits_to_bytes(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

INL2 int hsum_i32x8(__m256i v)
{
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    return _mm_cvtsi128_si32(t);
}

/* The block's 32 values q (0..31) in element order, unsigned: maddubs
 * multiplies them by the int8 activations into 16-bit pairs (at most
 * 2·31·127, no saturation), madd with ones into 8 sums; their sum is the
 * block's integer, and the float step is the plain C one. */
INL2 void row_q32(int MB, const fmt *f, const uint8_t *w, const cal_q8_1_block *x, int nb,
                  float *s)
{
    for (int i = 0; i < MB; i++)
        s[i] = 0;
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m256i ones = _mm256_set1_epi16(1), five = _mm256_set1_epi8(0x10);
    for (int b = 0; b < nb; b++, w += f->bytes) {
        __m128i raw = _mm_loadu_si128((const __m128i *)(w + f->oq));
        __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4),
                                     _mm_and_si128(raw, m4));
        if (f->oh >= 0)
            q = _mm256_or_si256(q, _mm256_and_si256(bits_to_bytes(w + f->oh), five));
        float dw = half_at(w), mw = f->om >= 0 ? half_at(w + f->om) : 0.0f;
        for (int i = 0; i < MB; i++) {
            const cal_q8_1_block *xb = &x[(size_t)i * nb + b];
            __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)xb->qs));
            int isum = hsum_i32x8(_mm256_madd_epi16(p, ones)) - f->off * xb->sum;
            s[i] = step(s[i], isum, dw, mw, xb, f->om >= 0);
        }
    }
}

typedef void (*row_fn)(const fmt *f, const uint8_t *w, const cal_q8_1_block *x, int nb,
                       float *s);
#define ROW(MB)                                                                          \
    static TGT2 void r_##MB(const fmt *f, const uint8_t *w, const cal_q8_1_block *x, int nb, \
                            float *s)                                                    \
    { row_q32(MB, f, w, x, nb, s); }
ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7) ROW(8)
static const row_fn rows_avx2[8] = {r_1, r_2, r_3, r_4, r_5, r_6, r_7, r_8};

static void apply_avx2(int dtype, float *y, int ldy, const cal_q8_1_block *xq, const void *w,
                       int n_out, int n_in, int m, float beta)
{
    fmt f = fmt_of(dtype);
    int nb = n_in / QK, nch = (m + 7) / 8;
    size_t rb = (size_t)nb * f.bytes;
    for (int r = 0; r < n_out; r++) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * rb;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            float s[8];
            rows_avx2[mb - 1](&f, wr, xq + (size_t)i0 * nb, nb, s);
            for (int i = 0; i < mb; i++)
                put(y + (size_t)(i0 + i) * ldy + r, s[i], beta);
            i0 += mb;
        }
    }
}
#endif

void cal_k_q32_apply(int dtype, float *y, int ldy, const cal_q8_1_block *xq, const void *w,
                     int n_out, int n_in, int m, float beta)
{
    if (n_out < 1 || m < 1 || n_in < QK)
        return;
#if HAVE_X86
    if (cal_k_have_kq_avx2()) {
        apply_avx2(dtype, y, ldy, xq, w, n_out, n_in, m, beta);
        return;
    }
#endif
    cal_k_q32_apply_portable(dtype, y, ldy, xq, w, n_out, n_in, m, beta);
}

/* Σ w·x over the dequantized row, F32 activations: the answer when no
 * memory holds the rounded ones */
static float ref_dot(int dtype, const uint8_t *row, const float *x, int n)
{
    fmt f = fmt_of(dtype);
    float w[QK], s = 0;
    for (int b = 0; b < n / QK; b++) {
        cal_k_q32_dequantize_row(dtype, row + (size_t)b * f.bytes, w, QK);
        for (int i = 0; i < QK; i++)
            s += w[i] * x[(size_t)b * QK + i];
    }
    return s;
}

/* cal_k_matmul's entry: X rounded into this thread's buffer in groups of
 * rows that fit it (a row too long for it takes a buffer of its own; without
 * memory for that, nothing is written and the F32 reference answers) */
enum { XCAP = 2048 };   /* blocks: 16 rows of 4096, 96 KiB */

static void matmul_with(int portable, int dtype, float *y, int ldy, const float *x, int ldx,
                        const void *w, int n_out, int n_in, int m, float beta)
{
    int nb = n_in / QK;
    if (nb == 0 || n_out < 1)
        return;
    cal_q8_1_block *buf = cal_tbuf(CAL_TBUF_Q32, sizeof *buf * XCAP), *heap = NULL;
    int g = buf ? XCAP / nb : 0;
    if (g == 0) {
        heap = malloc(sizeof *heap * (size_t)nb);
        if (!heap) {
            size_t rb = cal_k_row_bytes(dtype, n_in);
            for (int r = 0; r < n_out; r++)
                for (int i = 0; i < m; i++)
                    put(y + (size_t)i * ldy + r,
                        ref_dot(dtype, (const uint8_t *)w + (size_t)r * rb,
                                x + (size_t)i * ldx, n_in),
                        beta);
            return;
        }
        buf = heap;
        g = 1;
    }
    for (int i0 = 0; i0 < m; i0 += g) {
        int mg = m - i0 < g ? m - i0 : g;
        if (portable) {
            for (int i = 0; i < mg; i++)
                cal_k_q8_1_quantize_row_portable(x + (size_t)(i0 + i) * ldx, buf + (size_t)i * nb,
                                                 n_in);
            cal_k_q32_apply_portable(dtype, y + (size_t)i0 * ldy, ldy, buf, w, n_out, n_in, mg,
                                     beta);
        } else {
            cal_k_q32_round(x + (size_t)i0 * ldx, ldx, n_in, mg, buf);
            cal_k_q32_apply(dtype, y + (size_t)i0 * ldy, ldy, buf, w, n_out, n_in, mg, beta);
        }
    }
    free(heap);
}

void cal_k_q32_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                      int n_out, int n_in, int m, float beta)
{
    matmul_with(0, dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}

void cal_k_q32_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                               const void *w, int n_out, int n_in, int m, float beta)
{
    matmul_with(1, dtype, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}

/* ---- interleaved rows ------------------------------------------------------ */

enum { R = 16 };

/* Offsets in a group's block (16 blocks' bytes): d, m, qh, then 4 slices */
typedef struct gfmt { int od, om, oh, oq, bytes; } gfmt;

static gfmt gfmt_of(const fmt *f)
{
    gfmt g = {0, -1, -1, 2 * R, R * f->bytes};
    if (f->om >= 0) {
        g.om = g.oq;
        g.oq += 2 * R;
    }
    if (f->oh >= 0) {
        g.oh = g.oq;
        g.oq += 4 * R;
    }
    return g;
}

/* A row's fifth bits (bit j: element j) to the interleaved order (byte t:
 * bit k element 4k+t, bit 4+k element 16+4k+t), and back. */
static uint32_t qh_to_packed(uint32_t h)
{
    uint32_t o = 0;
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < 4; t++) {
            o |= ((h >> (4 * k + t)) & 1u) << (8 * t + k);
            o |= ((h >> (16 + 4 * k + t)) & 1u) << (8 * t + 4 + k);
        }
    return o;
}

static uint32_t qh_from_packed(uint32_t o)
{
    uint32_t h = 0;
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < 4; t++) {
            h |= ((o >> (8 * t + k)) & 1u) << (4 * k + t);
            h |= ((o >> (8 * t + 4 + k)) & 1u) << (16 + 4 * k + t);
        }
    return h;
}

/* Lane l of a group's bytes g (nb blocks) to or from one row's blocks b. */
static void lane_order(const fmt *f, const gfmt *gf, uint8_t *b, uint8_t *g, int l, int nb,
                       int to_packed)
{
#define MOVE(packed, block, n) (to_packed ? memcpy(packed, block, n) : memcpy(block, packed, n))
    for (int s = 0; s < nb; s++, g += gf->bytes, b += f->bytes) {
        MOVE(g + gf->od + 2 * l, b, 2);
        if (f->om >= 0)
            MOVE(g + gf->om + 2 * l, b + f->om, 2);
        if (f->oh >= 0) {
            if (to_packed)
                put_u32(g + gf->oh + 4 * l, qh_to_packed(u32_at(b + f->oh)));
            else
                put_u32(b + f->oh, qh_from_packed(u32_at(g + gf->oh + 4 * l)));
        }
        for (int k = 0; k < 4; k++)
            MOVE(g + gf->oq + 64 * k + 4 * l, b + f->oq + 4 * k, 4);
    }
#undef MOVE
}

static void all_groups(int dtype, void *src, void *dst, int n_rows, int n, int to_packed,
                       void *scratch)
{
    fmt f = fmt_of(dtype);
    gfmt gf = gfmt_of(&f);
    int nb = n / QK;
    size_t rb = (size_t)nb * f.bytes;
    for (int r = 0; r + R <= n_rows; r += R) {
        uint8_t *from = (uint8_t *)src + (size_t)r * rb, *to = (uint8_t *)dst + (size_t)r * rb;
        if (scratch) {
            memcpy(scratch, from, R * rb);
            from = scratch;
        }
        for (int l = 0; l < R; l++) {
            if (to_packed)
                lane_order(&f, &gf, from + (size_t)l * rb, to, l, nb, 1);
            else
                lane_order(&f, &gf, to + (size_t)l * rb, from, l, nb, 0);
        }
    }
    int tail = n_rows % R;   /* the last rows keep the block layout */
    if (src != dst && tail)
        memcpy((char *)dst + (size_t)(n_rows - tail) * rb,
               (const char *)src + (size_t)(n_rows - tail) * rb, (size_t)tail * rb);
}

void cal_k_q32x_pack(int dtype, const void *src, void *dst, int n_rows, int n)
{
    all_groups(dtype, (void *)src, dst, n_rows, n, 1, NULL);
}

void cal_k_q32x_pack_inplace(int dtype, void *m, int n_rows, int n, void *scratch)
{
    all_groups(dtype, m, m, n_rows, n, 1, scratch);
}

void cal_k_q32x_unpack(int dtype, const void *src, void *dst, int n_rows, int n)
{
    all_groups(dtype, (void *)src, dst, n_rows, n, 0, NULL);
}

void cal_k_q32x_rows(int dtype, const void *m, int n_rows, int r0, int count, int n, void *out)
{
    fmt f = fmt_of(dtype);
    gfmt gf = gfmt_of(&f);
    int nb = n / QK, grouped = n_rows - n_rows % R;
    size_t rb = (size_t)nb * f.bytes;
    for (int r = r0; r < r0 + count; r++) {
        uint8_t *o = (uint8_t *)out + (size_t)(r - r0) * rb;
        if (r >= grouped) {
            memcpy(o, (const char *)m + (size_t)r * rb, rb);
            continue;
        }
        lane_order(&f, &gf, o, (uint8_t *)m + (size_t)(r - r % R) * rb, r % R, nb, 0);
    }
}

#if HAVE_X86
#define ISAV "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c"
#define TGTV CAL_SIMD(ISAV)
#define INLV static inline __attribute__((always_inline, target(ISAV)))

enum { MBMAX = 8 };

INLV __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* One group of 16 rows × MB activation rows (row i at x + i·nb): lane l of
 * s[i] = row l's product with activation row i. DT is the format, a
 * constant in each instance. */
INLV void tile(int DT, int MB, const uint8_t *g, const cal_q8_1_block *x, int nb, __m512 *s)
{
    const fmt f = fmt_of(DT);
    const gfmt gf = gfmt_of(&f);
    const __m512i lo4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    for (int i = 0; i < MB; i++)
        s[i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++, g += gf.bytes) {
        __m512i acc[MBMAX];
        for (int i = 0; i < MB; i++)
            acc[i] = _mm512_set1_epi32(-f.off * x[(size_t)i * nb + b].sum);
        __m512i qh = f.oh >= 0 ? _mm512_loadu_si512(g + gf.oh) : _mm512_setzero_si512();
        _Pragma("GCC unroll 4")
        for (int k = 0; k < 4; k++) {
            __m512i raw = _mm512_loadu_si512(g + gf.oq + 64 * k);
            __m512i lo = _mm512_and_si512(raw, lo4);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo4);
            if (f.oh >= 0) {
                lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi32(qh, 4 - k), b4));
                hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_srli_epi32(qh, k), b4));
            }
            for (int i = 0; i < MB; i++) {
                const int8_t *q8 = x[(size_t)i * nb + b].qs;
                acc[i] = _mm512_dpbusd_epi32(acc[i], lo, bcast4(q8 + 4 * k));
                acc[i] = _mm512_dpbusd_epi32(acc[i], hi, bcast4(q8 + 16 + 4 * k));
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + gf.od)));
        __m512 mw = f.om >= 0 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + gf.om)))
                              : _mm512_setzero_ps();
        for (int i = 0; i < MB; i++) {
            const cal_q8_1_block *xb = &x[(size_t)i * nb + b];
            /* step(): isum·(dw·dx) (+ mw·s_x), then added; never fused */
            __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i]),
                                     _mm512_mul_ps(dw, _mm512_set1_ps(xb->d)));
            if (f.om >= 0)
                t = _mm512_add_ps(t, _mm512_mul_ps(mw, _mm512_set1_ps(xb->s)));
            s[i] = _mm512_add_ps(s[i], t);
        }
    }
}

typedef void (*tile_fn)(const uint8_t *g, const cal_q8_1_block *x, int nb, __m512 *s);
#define TILE(DN, DT, MB)                                                                  \
    static TGTV void t_##DN##_##MB(const uint8_t *g, const cal_q8_1_block *x, int nb,    \
                                   __m512 *s)                                             \
    { tile(DT, MB, g, x, nb, s); }
#define TILES(DN, DT) TILE(DN, DT, 1) TILE(DN, DT, 2) TILE(DN, DT, 3) TILE(DN, DT, 4)       \
                      TILE(DN, DT, 5) TILE(DN, DT, 6) TILE(DN, DT, 7) TILE(DN, DT, 8)
TILES(q4_0, CAL_DTYPE_Q4_0) TILES(q4_1, CAL_DTYPE_Q4_1) TILES(q5_0, CAL_DTYPE_Q5_0)
TILES(q5_1, CAL_DTYPE_Q5_1)
#define TAB(DN) {t_##DN##_1, t_##DN##_2, t_##DN##_3, t_##DN##_4, t_##DN##_5, t_##DN##_6, \
                 t_##DN##_7, t_##DN##_8}
/* [Q4_0, Q4_1, Q5_0, Q5_1][MB − 1] */
static const tile_fn tiles[4][MBMAX] = {TAB(q4_0), TAB(q4_1), TAB(q5_0), TAB(q5_1)};

static TGTV void store(float *y, int ldy, const __m512 *s, int mb, float beta)
{
    for (int i = 0; i < mb; i++) {
        float *o = y + (size_t)i * ldy;
        __m512 v = s[i];
        if (beta != 0.0f)
            v = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(o)), v);
        _mm512_storeu_ps(o, v);
    }
}

static int fmt_index(int dtype)
{
    return dtype == CAL_DTYPE_Q4_0 ? 0 : dtype == CAL_DTYPE_Q4_1 ? 1
           : dtype == CAL_DTYPE_Q5_0 ? 2 : 3;
}

/* groups of 16 rows × activation rows in balanced chunks of at most MBMAX:
 * a group's weights (16 rows × n_in) stay in L1 while every chunk of the
 * activations passes over them */
static void product(int dtype, float *y, int ldy, const cal_q8_1_block *xq, const uint8_t *w,
                    int groups, int nb, int m, float beta)
{
    const tile_fn *tf = tiles[fmt_index(dtype)];
    size_t gbytes = (size_t)nb * R * fmt_of(dtype).bytes;
    int nch = (m + MBMAX - 1) / MBMAX;
    for (int gi = 0; gi < groups; gi++)
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            __m512 s[MBMAX];
            tf[mb - 1](w + (size_t)gi * gbytes, xq + (size_t)i0 * nb, nb, s);
            store(y + (size_t)i0 * ldy + (size_t)gi * R, ldy, s, mb, beta);
            i0 += mb;
        }
}
#endif

int cal_k_q32x_apply(int dtype, float *y, int ldy, const cal_q8_1_block *xq, const void *w,
                     int n_out, int n_in, int m, float beta)
{
#if HAVE_X86
    if (!cal_k_have_q8x() || !cal_k_is_q32(dtype) || n_in < QK || n_in % QK != 0 ||
        n_out < 1 || m < 1)
        return -1;
    int nb = n_in / QK, groups = n_out / R, tail = n_out % R;
    product(dtype, y, ldy, xq, w, groups, nb, m, beta);
    if (tail)
        cal_k_q32_apply(dtype, y + (size_t)groups * R, ldy, xq,
                        (const char *)w + (size_t)groups * R * cal_k_row_bytes(dtype, n_in),
                        tail, n_in, m, beta);
    return 0;
#else
    (void)dtype; (void)y; (void)ldy; (void)xq; (void)w; (void)n_out; (void)n_in; (void)m;
    (void)beta;
    return -1;
#endif
}
