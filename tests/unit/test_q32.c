/* Unit tests of llama.cpp's 32-weight formats Q4_1, Q5_0, Q5_1 (engine/q32.c),
 * the integer product of those and Q4_0 on 8-bit activations, Q5_K's
 * reading against ggml's layout, and the one interface to every quantized
 * format's product (engine/products.c): blocks built byte by byte decode
 * to the values their layout defines; every row decodes as an element-by-
 * element reading of ggml-common.h's layouts does (written here, apart
 * from the engine's code); the quantizers are llama.cpp's reference ones;
 * the vector products (AVX2 on block rows, AVX-512 VNNI on interleaved
 * rows) equal the plain C product bit for bit, which stays within float
 * rounding of a double product over the same dequantized weights and
 * rounded activations; an engine in each format exports a GGUF file of its
 * ggml type that serves back the same matrices and logits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/gguf.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/internal.h"
#include "engine/kernels.h"

static uint64_t rng = 3232;
static float frand(void) /* uniform in [-1, 1) */
{
    return (float)(cal_k_splitmix64(&rng) >> 40) / 8388608.0f - 1.0f;
}

static const int q32[] = {CAL_DTYPE_Q4_0, CAL_DTYPE_Q4_1, CAL_DTYPE_Q5_0, CAL_DTYPE_Q5_1};
#define NQ32 (sizeof q32 / sizeof q32[0])

/* Runs where the CPU has AVX-512 VNNI; under CI a check that cannot run is
 * a failure unless the CPU is emulated without VNNI on purpose
 * (scripts/test-portable.sh sets CAL_EMULATED_CPU). */
static int have_vnni(const char *what)
{
    if (cal_k_have_q8x())
        return 1;
    print_message("%s: this CPU has no AVX-512 VNNI: only the refusal checked\n", what);
    if (getenv("CI") && !getenv("CAL_EMULATED_CPU"))
        fail_msg("%s: not run under CI", what);
    return 0;
}

/* ---- ggml's layouts, read element by element (ggml-common.h and
 * ggml-quants.c's dequantize_row_*), independent of the engine's code ---- */

static float half(const uint8_t *p)
{
    return cal_k_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* value of element j of a 32-weight block: nibble j (j < 16: low half of
 * qs[j]; else high half of qs[j − 16]), plus bit j of qh as the fifth bit */
static float ggml_q32(int dt, const uint8_t *b, int j)
{
    int oq = dt == CAL_DTYPE_Q4_0 ? 2 : dt == CAL_DTYPE_Q4_1 ? 4 : dt == CAL_DTYPE_Q5_0 ? 6 : 8;
    int q = j < 16 ? b[oq + j] & 0x0F : b[oq + j - 16] >> 4;
    if (dt == CAL_DTYPE_Q5_0 || dt == CAL_DTYPE_Q5_1) {
        const uint8_t *qh = b + (dt == CAL_DTYPE_Q5_0 ? 2 : 4);
        q |= ((qh[j / 8] >> (j % 8)) & 1) << 4;
    }
    float d = half(b);
    if (dt == CAL_DTYPE_Q4_1 || dt == CAL_DTYPE_Q5_1)
        return (float)q * d + half(b + 2);
    return (float)(q - (dt == CAL_DTYPE_Q4_0 ? 8 : 16)) * d;
}

/* element k of a Q5_K super-block: sub-block j = k / 32, element l = k % 32
 * of it: nibble of qs[32·(j/2) + l] (low for even j), fifth bit j of qh[l],
 * 6-bit scale and min as get_scale_min_k4 reads them */
static float ggml_q5_k(const uint8_t *b, int k)
{
    int j = k / 32, l = k % 32, sc, m;
    const uint8_t *s = b + 4, *qh = b + 16, *qs = b + 48;
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4;
        m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
    int q = (j % 2 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 0xF) |
            ((qh[l] >> j) & 1) << 4;
    float d1 = half(b) * (float)sc, m1 = half(b + 2) * (float)m;
    return d1 * (float)q - m1;
}

/* ---- layouts ----------------------------------------------------------- */

static void test_q32_by_hand(void **state)
{
    (void)state;
    assert_int_equal(sizeof(cal_q4_1_block), 20);
    assert_int_equal(sizeof(cal_q5_0_block), 22);
    assert_int_equal(sizeof(cal_q5_1_block), 24);
    assert_int_equal(sizeof(cal_q5_k_block), 176);
    float y[32];
    cal_q4_1_block a;
    memset(&a, 0, sizeof a);
    a.d = 0x3800;          /* 0.5 */
    a.m = 0xBC00;          /* −1 */
    a.qs[0] = 0x1F;        /* element 0: 15, element 16: 1 */
    cal_k_dequantize_row(CAL_DTYPE_Q4_1, &a, y, 32);
    assert_true(y[0] == 15 * 0.5f - 1 && y[16] == 0.5f - 1 && y[1] == -1.0f);
    cal_q5_0_block b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;          /* 1 */
    b.qs[3] = 0xA5;        /* element 3: 5, element 19: 10 */
    b.qh[0] = 1 << 3;      /* element 3's fifth bit: 21 */
    b.qh[2] = 1 << 3;      /* element 19's: 26 */
    b.qh[3] = 1 << 7;      /* element 31's: 16 */
    cal_k_dequantize_row(CAL_DTYPE_Q5_0, &b, y, 32);
    assert_true(y[3] == 21 - 16 && y[19] == 26 - 16 && y[31] == 0.0f && y[0] == -16.0f);
    cal_q5_1_block c;
    memset(&c, 0, sizeof c);
    c.d = 0x4000;          /* 2 */
    c.m = 0x3C00;          /* 1 */
    c.qs[15] = 0xF0;       /* element 15: 0, element 31: 15 */
    c.qh[1] = 1 << 7;      /* element 15's fifth bit: 16 */
    c.qh[3] = 1 << 7;      /* element 31's: 31 */
    cal_k_dequantize_row(CAL_DTYPE_Q5_1, &c, y, 32);
    assert_true(y[15] == 2 * 16 + 1 && y[31] == 2 * 31 + 1 && y[0] == 1.0f);
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_Q5_1, 64), 48);
    assert_int_equal(cal_k_block_elems(CAL_DTYPE_Q4_1), 32);
    assert_int_equal(cal_k_block_elems(CAL_DTYPE_Q5_K), 256);
}

/* Random bytes (every bit pattern a file may hold, finite scales) decode
 * as ggml reads them, bit for bit, on the vector path and the plain one. */
static void test_rows_match_ggml(void **state)
{
    (void)state;
    enum { NB = 24 };
    const int fmts[] = {CAL_DTYPE_Q4_0, CAL_DTYPE_Q4_1, CAL_DTYPE_Q5_0, CAL_DTYPE_Q5_1,
                        CAL_DTYPE_Q5_K};
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        int dt = fmts[f], blk = cal_k_block_elems(dt), n = NB * blk;
        size_t bb = cal_k_row_bytes(dt, blk);
        uint8_t *row = malloc(bb * NB);
        float *y = malloc(sizeof(float) * (size_t)n), *z = malloc(sizeof(float) * (size_t)n);
        for (size_t i = 0; i < bb * NB; i++)
            row[i] = (uint8_t)(cal_k_splitmix64(&rng) >> 56);
        for (int b = 0; b < NB; b++) {   /* scales: finite halves of modest size */
            uint8_t *p = row + (size_t)b * bb;
            int ns = dt == CAL_DTYPE_Q4_1 || dt == CAL_DTYPE_Q5_1 || dt == CAL_DTYPE_Q5_K ? 2 : 1;
            for (int s = 0; s < ns; s++) {
                uint16_t h = cal_k_f32_to_f16(frand() * (s ? 0.5f : 0.1f));
                p[2 * s] = (uint8_t)h;
                p[2 * s + 1] = (uint8_t)(h >> 8);
            }
        }
        cal_k_dequantize_row(dt, row, y, n);
        cal_k_dequantize_row_portable(dt, row, z, n);
        for (int k = 0; k < n; k++) {
            const uint8_t *b = row + (size_t)(k / blk) * bb;
            float want = dt == CAL_DTYPE_Q5_K ? ggml_q5_k(b, k % blk) : ggml_q32(dt, b, k % blk);
            if (!(y[k] == want && z[k] == want))
                fail_msg("%s element %d: %.9g / %.9g, ggml %.9g", cal_dtype_name(dt), k, y[k],
                         z[k], want);
        }
        free(row); free(y); free(z);
    }
}

/* The quantizers are llama.cpp's reference ones: Q4_1 and Q5_1 map a
 * block's minimum to m and its range to 15 or 31 steps, q the truncation of
 * (x − min)/d + 0.5; Q5_0 maps the value of largest magnitude to −16. */
static void test_q32_quantizers(void **state)
{
    (void)state;
    float x[32], y[32];
    uint8_t q[24];
    for (int j = 0; j < 32; j++)
        x[j] = (float)j;                 /* min 0, max 31 */
    cal_k_quantize_row(CAL_DTYPE_Q4_1, x, q, 32);
    cal_q4_1_block a;
    memcpy(&a, q, sizeof a);
    assert_true(cal_k_f16_to_f32(a.m) == 0.0f);
    assert_true(a.d == cal_k_f32_to_f16(31.0f / 15));
    /* j·(15/31) + 0.5 truncated: 1 → 0, 2 → 1, 16 → 8, 31 → 15 */
    assert_int_equal(a.qs[1] & 0xF, 0);
    assert_int_equal(a.qs[2] & 0xF, 1);
    assert_int_equal(a.qs[0] >> 4, 8);
    assert_int_equal(a.qs[15] >> 4, 15);
    cal_k_quantize_row(CAL_DTYPE_Q5_1, x, q, 32);
    cal_q5_1_block c;
    memcpy(&c, q, sizeof c);
    assert_true(c.d == cal_k_f32_to_f16(1.0f));    /* 31 steps of 1: exact */
    cal_k_dequantize_row(CAL_DTYPE_Q5_1, &c, y, 32);
    for (int j = 0; j < 32; j++)
        assert_true(y[j] == x[j]);
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 12) * 0.25f;  /* largest magnitude: 19·0.25 = 4.75 at j 31 */
    cal_k_quantize_row(CAL_DTYPE_Q5_0, x, q, 32);
    cal_q5_0_block b;
    memcpy(&b, q, sizeof b);
    assert_true(b.d == cal_k_f32_to_f16(4.75f / -16));
    cal_k_dequantize_row(CAL_DTYPE_Q5_0, &b, y, 32);
    assert_true(fabsf(y[31] - 4.75f) < 4.75f * 0x1p-10f);   /* q 0: −16·d */
    assert_int_equal(b.qs[15] >> 4, 0);
    assert_int_equal(b.qh[3] >> 7, 0);
    /* every value within half a step of d (plus the scale's F16 rounding) */
    float d = fabsf(cal_k_f16_to_f32(b.d));
    for (int j = 0; j < 32; j++)
        assert_true(fabsf(y[j] - x[j]) <= 0.5f * d + 16 * d * 0x1p-10f);
    /* a range too small for F32's 1/d (d a subnormal, 1/d infinite): no
     * undefined conversion (make ubsan checks), and the block decodes to
     * its minimum (d is 0 as a half) */
    for (int j = 0; j < 32; j++)
        x[j] = j % 2 ? 1e-38f : 0.0f;
    for (size_t f = 0; f < NQ32; f++) {
        cal_k_quantize_row(q32[f], x, q, 32);
        cal_k_dequantize_row(q32[f], q, y, 32);
        for (int j = 0; j < 32; j++)
            assert_true(y[j] == 0.0f);
    }
    /* an all-zero block stays zero */
    memset(x, 0, sizeof x);
    for (size_t f = 0; f < NQ32; f++) {
        cal_k_quantize_row(q32[f], x, q, 32);
        cal_k_dequantize_row(q32[f], q, y, 32);
        for (int j = 0; j < 32; j++)
            assert_true(y[j] == 0.0f);
    }
}

/* The activations: the vector rounding is the plain one bit for bit, its
 * values d·q are cal_k_q8_0_round's, sum = Σq and s = d·sum. */
static void test_q8_1_rounding(void **state)
{
    (void)state;
    enum { NB = 40 };
    float *x = malloc(sizeof(float) * NB * 32), *r = malloc(sizeof(float) * NB * 32);
    cal_q8_1_block a[NB], b[NB];
    for (int k = 0; k < NB * 32; k++) {
        int blk = k / 32;
        x[k] = blk == 0 ? 0.0f
             : blk == 1 ? (float)(k % 32 - 16) + 0.5f
             : blk == 2 ? (k % 32 == 7 ? 1000.0f : frand() * 1e-3f)
             : frand() * ldexpf(1.0f, blk % 20 - 10);
    }
    memset(a, 0x55, sizeof a);
    memset(b, 0xaa, sizeof b);
    cal_k_q8_1_quantize_row(x, a, NB * 32);
    cal_k_q8_1_quantize_row_portable(x, b, NB * 32);
    assert_memory_equal(a, b, sizeof a);
    cal_k_q8_0_round(x, r, NB * 32);
    for (int i = 0; i < NB; i++) {
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            assert_true(a[i].d * (float)a[i].qs[j] == r[i * 32 + j]);
            sum += a[i].qs[j];
        }
        assert_int_equal(a[i].sum, sum);
        assert_true(a[i].s == a[i].d * (float)sum);
    }
    assert_true(a[0].d == 0.0f && a[0].sum == 0);
    free(x); free(r);
}

/* ---- products ------------------------------------------------------------ */

static char *matrix(int dt, int rows, int n, float *w)
{
    size_t rb = cal_k_row_bytes(dt, n);
    char *m = malloc(rb * (size_t)rows);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < n; k++)
            w[(size_t)r * n + k] = frand() * (k % 9 == 0 ? 2.0f : 0.3f) + (r % 3 ? 0.0f : 0.1f);
        cal_k_quantize_row(dt, w + (size_t)r * n, m + (size_t)r * rb, n);
    }
    return m;
}

/* The plain C product is the definition (block by block integers, one float
 * step per block); against a double product over the dequantized weights
 * and the rounded activations it is within float rounding: n_in · 2⁻²⁴ ·
 * Σ|w·x̂|. The AVX2 block product and the interleaved one give its bits, at
 * batches 1..20, beta 0 and 0.5, a matrix with a tail of block rows, and in
 * pieces of 16 rows. */
static void check_q32(int dt, int rows, int n)
{
    enum { M = 20 };
    size_t rb = cal_k_row_bytes(dt, n);
    float *w = malloc(sizeof(float) * (size_t)rows * n), *wq = malloc(sizeof(float) * (size_t)n);
    char *ws = matrix(dt, rows, n, w), *wx = malloc(rb * (size_t)rows);
    float *x = malloc(sizeof(float) * M * (size_t)n);
    for (int i = 0; i < M * n; i++)
        x[i] = frand() * (i % 11 == 0 ? 4.0f : 1.0f);
    int nb = n / 32;
    cal_q8_1_block *xq = malloc(cal_k_q32_xbytes(n, M));
    cal_k_q32_round(x, n, n, M, xq);
    float *y = malloc(sizeof(float) * M * (size_t)rows), *yp = malloc(sizeof(float) * M * (size_t)rows);
    float *yx = malloc(sizeof(float) * M * (size_t)rows);
    int vnni = cal_k_have_q8x();
    if (vnni)
        cal_k_q32x_pack(dt, ws, wx, rows, n);
    for (int m = 1; m <= M; m++)
        for (int pass = 0; pass < 2; pass++) {
            float beta = pass ? 0.5f : 0.0f;
            for (int i = 0; i < M * rows; i++)
                y[i] = yp[i] = yx[i] = pass ? 2.0f : NAN;
            cal_k_q32_apply(dt, y, rows, xq, ws, rows, n, m, beta);
            cal_k_q32_apply_portable(dt, yp, rows, xq, ws, rows, n, m, beta);
            if (vnni)
                assert_int_equal(cal_k_q32x_apply(dt, yx, rows, xq, wx, rows, n, m, beta), 0);
            for (int i = 0; i < m; i++)
                for (int r = 0; r < rows; r++) {
                    float exact = cal_k_q32_dot_q8(dt, ws + r * rb, xq + (size_t)i * nb, n);
                    float want = pass ? 1.0f + exact : exact;
                    size_t at = (size_t)i * rows + r;
                    if (y[at] != want || yp[at] != want || (vnni && yx[at] != want))
                        fail_msg("%s %dx%d m %d row %d: avx2 %.9g plain %.9g vnni %.9g, not %.9g",
                                 cal_dtype_name(dt), rows, n, m, r, y[at], yp[at], yx[at], want);
                    if (pass || m > 3)
                        continue;
                    cal_k_dequantize_row(dt, ws + r * rb, wq, n);
                    double s = 0, sa = 0;
                    for (int b = 0; b < nb; b++)
                        for (int j = 0; j < 32; j++) {
                            double v = (double)wq[32 * b + j] * xq[(size_t)i * nb + b].d *
                                       xq[(size_t)i * nb + b].qs[j];
                            s += v;
                            sa += fabs(v);
                        }
                    assert_true(fabs(exact - s) <= n * 0x1p-24 * sa + 1e-30);
                }
            for (int r = 0; r < rows && m < M; r++)   /* rows beyond m untouched */
                assert_true(pass ? y[(size_t)m * rows + r] == 2.0f
                                 : isnan(y[(size_t)m * rows + r]));
        }
    if (vnni) {   /* in pieces of 16 rows: the same bits */
        cal_k_q32x_apply(dt, y, rows, xq, wx, rows, n, 3, 0.0f);
        for (int r0 = 0; r0 < rows; r0 += 16) {
            int cnt = rows - r0 < 16 ? rows - r0 : 16;
            assert_int_equal(cal_k_q32x_apply(dt, yx + r0, rows, xq, wx + (size_t)r0 * rb, cnt,
                                              n, 3, 0.0f), 0);
        }
        assert_memory_equal(y, yx, sizeof(float) * 3 * (size_t)rows);
        assert_int_equal(cal_k_q32x_apply(dt, y, rows, xq, wx, rows, n + 16, 1, 0.0f), -1);
    }
    free(w); free(wq); free(ws); free(wx); free(x); free(xq); free(y); free(yp); free(yx);
}

static void test_q32_products(void **state)
{
    (void)state;
    if (!have_vnni("interleaved 32-weight products"))
        assert_int_equal(cal_k_q32x_apply(CAL_DTYPE_Q5_0, NULL, 1, NULL, NULL, 16, 32, 1, 0.0f),
                         -1);
    for (size_t f = 0; f < NQ32; f++) {
        check_q32(q32[f], 53, 320);   /* 3 groups of 16 and 5 block rows; 10 blocks */
        check_q32(q32[f], 16, 32);    /* one group, one block */
        check_q32(q32[f], 7, 2048);   /* block rows alone */
    }
    assert_int_equal(cal_k_q32_xbytes(48, 1), 0);
    assert_int_equal(cal_k_q32_xbytes(64, 0), 0);
}

/* The interleaved rows hold the same bytes: pack and unpack, in place or
 * not, and any run of rows read back alone; the fifth bits are reordered
 * (a lane is not the row's bytes). */
static void test_q32x_pack_roundtrip(void **state)
{
    (void)state;
    const int shapes[][2] = {{1, 32}, {15, 64}, {16, 32}, {17, 96}, {48, 320}, {37, 1024}};
    for (size_t f = 0; f < NQ32; f++)
        for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
            int dt = q32[f], rows = shapes[t][0], n = shapes[t][1];
            size_t rb = cal_k_row_bytes(dt, n), bytes = rb * (size_t)rows;
            float *w = malloc(sizeof(float) * (size_t)rows * n);
            char *a = matrix(dt, rows, n, w), *p = malloc(bytes), *b = malloc(bytes);
            char *scratch = malloc(16 * rb), *out = malloc(bytes);
            cal_k_q32x_pack(dt, a, p, rows, n);
            if (rows >= 16)
                assert_true(memcmp(a, p, 16 * rb) != 0);
            cal_k_q32x_unpack(dt, p, b, rows, n);
            assert_memory_equal(a, b, bytes);
            memcpy(b, a, bytes);
            cal_k_q32x_pack_inplace(dt, b, rows, n, scratch);
            assert_memory_equal(p, b, bytes);
            for (int r0 = 0; r0 < rows; r0 += 3) {
                int cnt = rows - r0 < 7 ? rows - r0 : 7;
                cal_k_q32x_rows(dt, p, rows, r0, cnt, n, out);
                assert_memory_equal(out, a + (size_t)r0 * rb, (size_t)cnt * rb);
            }
            free(w); free(a); free(p); free(b); free(scratch); free(out);
        }
}

/* ---- one interface for every quantized format (products.c) -------------- */

/* For every quantized format, through cal_k_mm_*: the matrix packed as
 * cal_k_mm_packed says, rows read back as they were, and the product at
 * decode and prefill sizes (1, 5, 16, 17, 70: across the 64-row passes)
 * in pieces of 16 rows equals the format's own definition bit for bit
 * (Q8_0: cal_k_q8x_product's bits). F32, F16 and BF16 have no such
 * product, and without VNNI prefill sizes go to the caller's SGEMM. */
static void test_mm_interface(void **state)
{
    (void)state;
    const int fmts[] = {CAL_DTYPE_Q8_0, CAL_DTYPE_Q4_0, CAL_DTYPE_Q4_1, CAL_DTYPE_Q5_0,
                        CAL_DTYPE_Q5_1, CAL_DTYPE_Q4_K, CAL_DTYPE_Q5_K, CAL_DTYPE_Q6_K};
    const int ms[] = {1, 5, 16, 17, 70};
    enum { ROWS = 37, N = 512 };
    int vnni = cal_k_have_q8x();
    for (int dt = CAL_DTYPE_F32; dt <= CAL_DTYPE_BF16; dt++) {
        assert_int_equal(cal_k_mm_xbytes(dt, N, 1), 0);
        assert_int_equal(cal_k_mm_packed(dt), 0);
    }
    float *x = malloc(sizeof(float) * 70 * N), *w = malloc(sizeof(float) * ROWS * N);
    float *y = malloc(sizeof(float) * 70 * ROWS), *yr = malloc(sizeof(float) * 70 * ROWS);
    for (int i = 0; i < 70 * N; i++)
        x[i] = frand();
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        int dt = fmts[f];
        size_t rb = cal_k_row_bytes(dt, N);
        char *a = matrix(dt, ROWS, N, w), *m = malloc(rb * ROWS), *out = malloc(rb * ROWS);
        memcpy(m, a, rb * ROWS);
        assert_int_equal(cal_k_mm_packed(dt), vnni);
        void *scratch = malloc(cal_k_mm_pack_scratch(dt, N) + 1);
        cal_k_mm_pack(dt, m, ROWS, N, scratch);
        assert_true(vnni ? memcmp(a, m, rb * 16) != 0 : memcmp(a, m, rb * ROWS) == 0);
        const void *rows = cal_k_mm_rows(dt, m, ROWS, 3, 30, N, out);
        assert_memory_equal(rows, a + 3 * rb, 30 * rb);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            int mm = ms[mi];
            size_t xb = cal_k_mm_xbytes(dt, N, mm);
            int has = vnni || (mm <= CAL_K_MM_DECODE && dt != CAL_DTYPE_Q8_0);
            assert_int_equal(xb > 0, has);
            if (!has)
                continue;
            void *xq = aligned_alloc(64, (xb + 63) & ~(size_t)63);
            cal_k_mm_round(dt, x, N, N, mm, xq);
            for (int r0 = 0; r0 < ROWS; r0 += 16) {
                int cnt = ROWS - r0 < 16 ? ROWS - r0 : 16;
                cal_k_mm_apply(dt, y + r0, ROWS, xq, m + (size_t)r0 * rb, cnt, N, mm, 0.0f);
            }
            if (dt == CAL_DTYPE_Q8_0) {
                assert_int_equal(cal_k_q8x_product(yr, ROWS, x, N, m, ROWS, N, mm, 0.0f), 0);
            } else if (cal_k_is_q32(dt)) {
                cal_q8_1_block *xr = malloc(cal_k_q32_xbytes(N, mm));
                cal_k_q32_round(x, N, N, mm, xr);
                cal_k_q32_apply_portable(dt, yr, ROWS, xr, a, ROWS, N, mm, 0.0f);
                free(xr);
            } else {
                cal_q8_k_block *xr = malloc(cal_k_kq_xbytes(N, mm));
                cal_k_kq_round(x, N, N, mm, xr);
                for (int i = 0; i < mm; i++)
                    for (int r = 0; r < ROWS; r++)
                        yr[(size_t)i * ROWS + r] = cal_k_kq_dot_q8k(dt, a + r * rb,
                                                                   xr + (size_t)i * (N / 256), N);
                free(xr);
            }
            if (memcmp(y, yr, sizeof(float) * (size_t)mm * ROWS) != 0)
                fail_msg("%s at m %d: not the format's own bits", cal_dtype_name(dt), mm);
            free(xq);
        }
        free(a); free(m); free(out); free(scratch);
    }
    free(x); free(w); free(y); free(yr);
}

/* ---- held as stored: GGUF export and load ------------------------------- */

/* every row of two views, in the block layout, byte for byte */
static void check_same_rows(const cal_engine *ea, const cal_tensor_view *a,
                            const cal_engine *eb, const cal_tensor_view *b)
{
    size_t rb = cal_k_row_bytes(a->dtype, a->n_in);
    char *ba = malloc(rb), *bb = malloc(rb);
    assert_non_null(ba);
    assert_non_null(bb);
    for (int64_t r = 0; r < a->rows; r++) {
        const void *ra = cal_engine_rows(ea, a, 0, r, 1, ba);
        const void *rbp = cal_engine_rows(eb, b, 0, r, 1, bb);
        if (memcmp(ra, rbp, rb) != 0)
            fail_msg("%s: row %lld differs", cal_dtype_name(a->dtype), (long long)r);
    }
    free(ba);
    free(bb);
}

/* An engine in each new format writes its matrices as their ggml type
 * (and llama.cpp's file type); opened from that file in the same format
 * the engine holds the writer's matrices byte for byte and gives the same
 * logits bit for bit; cal_gguf_dtype_of maps the type back. */
static void test_export_roundtrip(void **state)
{
    (void)state;
    const int fmts[] = {CAL_DTYPE_Q4_1, CAL_DTYPE_Q5_0, CAL_DTYPE_Q5_1, CAL_DTYPE_Q5_K};
    char dir[] = "/tmp/caliper-test-q32-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        int dt = fmts[f];
        cal_model_config c, g;
        assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
        c.dim = 256; c.ffn_dim = 512; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2;
        c.vocab = 600; c.max_ctx = 64; c.dtype = dt;
        char path[96], why[256];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, cal_dtype_name(dt));
        cal_engine *ea = NULL, *eb = NULL;
        assert_int_equal(cal_engine_open(&c, 1, 16, &ea), CAL_OK);
        if (cal_gguf_export(ea, path, dt, why, sizeof why) != CAL_OK)
            fail_msg("export %s: %s", cal_dtype_name(dt), why);
        cal_gguf_model m;
        if (cal_gguf_read_model_file(path, &m, why, sizeof why) != CAL_OK)
            fail_msg("read: %s", why);
        const cal_gguf_tensor *t = cal_gguf_find(&m, "blk.1.ffn_down.weight");
        assert_non_null(t);
        assert_int_equal(cal_gguf_dtype_of(t->type), dt);
        assert_int_equal(cal_gguf_type_of(dt), (int64_t)t->type);
        assert_int_equal(t->bytes, (uint64_t)cal_k_row_bytes(dt, c.ffn_dim) * (uint64_t)c.dim);
        cal_gguf_model_free(&m);
        if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
            fail_msg("config: %s", why);
        g.dtype = dt;
        assert_int_equal(cal_engine_open(&g, 1, 16, &eb), CAL_OK);
        for (int l = 0; l < c.n_layers; l++) {
            cal_layer_weights wa, wb;
            cal_engine_layer_weights(ea, l, &wa);
            cal_engine_layer_weights(eb, l, &wb);
            const cal_tensor_view *va[] = {&wa.q, &wa.k, &wa.v, &wa.o, &wa.gate, &wa.up, &wa.down};
            const cal_tensor_view *vb[] = {&wb.q, &wb.k, &wb.v, &wb.o, &wb.gate, &wb.up, &wb.down};
            for (int k = 0; k < 7; k++) {
                assert_int_equal(va[k]->dtype, dt);
                assert_int_equal(vb[k]->dtype, dt);
                assert_int_equal(va[k]->rows, vb[k]->rows);
                check_same_rows(ea, va[k], eb, vb[k]);
            }
        }
        int32_t ids[7] = {72, 101, 108, 599, 7, 256, 32};
        float *la = malloc(sizeof(float) * 600), *lb = malloc(sizeof(float) * 600);
        cal_step_entry sa = {0, 0, 7, ids, la}, sb = {0, 0, 7, ids, lb};
        assert_int_equal(cal_engine_step(ea, &sa, 1), CAL_OK);
        assert_int_equal(cal_engine_step(eb, &sb, 1), CAL_OK);
        assert_memory_equal(la, lb, sizeof(float) * 600);
        free(la); free(lb);
        cal_engine_close(&ea);
        cal_engine_close(&eb);
        unlink(path);
    }
    assert_int_equal(cal_gguf_dtype_of(CAL_GGUF_Q4_K), CAL_DTYPE_Q4_K);
    assert_int_equal(cal_gguf_dtype_of(10), -1);   /* Q2_K: not held */
    assert_int_equal(cal_gguf_type_of(CAL_DTYPE_COUNT), -1);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q32_by_hand),
        cmocka_unit_test(test_rows_match_ggml),
        cmocka_unit_test(test_q32_quantizers),
        cmocka_unit_test(test_q8_1_rounding),
        cmocka_unit_test(test_q32_products),
        cmocka_unit_test(test_q32x_pack_roundtrip),
        cmocka_unit_test(test_mm_interface),
        cmocka_unit_test(test_export_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
