/* Unit tests of the engine's weight formats and decode products: the format
 * conversions against their definitions, every batch size 1..16 and every
 * format against a double-precision product over the same (dequantized)
 * weights, the quantisation error against its proven bound, the vector and
 * portable paths against each other, and the rows a product must not touch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "engine/engine.h"
#include "engine/kernels.h"

static uint64_t rng = 777;
static float frand(void) /* uniform in [-1, 1) */
{
    return (float)(cal_k_splitmix64(&rng) >> 40) / 8388608.0f - 1.0f;
}

static void test_f16_conversion(void **state)
{
    (void)state;
    /* exact values and the format's edges */
    assert_int_equal(cal_k_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(cal_k_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(cal_k_f32_to_f16(65504.0f), 0x7bff);     /* largest finite */
    assert_int_equal(cal_k_f32_to_f16(65520.0f), 0x7c00);     /* rounds to inf */
    assert_int_equal(cal_k_f32_to_f16(INFINITY), 0x7c00);
    assert_true((cal_k_f32_to_f16(NAN) & 0x7fff) > 0x7c00);   /* stays nan */
    assert_int_equal(cal_k_f32_to_f16(0x1p-24f), 0x0001);     /* smallest subnormal */
    assert_int_equal(cal_k_f32_to_f16(0x1p-26f), 0x0000);     /* below half of it */
    assert_int_equal(cal_k_f32_to_f16(-0.0f), 0x8000);
    /* ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 */
    assert_int_equal(cal_k_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(cal_k_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    /* every finite half survives the round trip exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        float f = cal_k_f16_to_f32((uint16_t)h);
        assert_int_equal(cal_k_f32_to_f16(f), h);
    }
    /* relative error of rounding normal values is at most 2^-11 */
    for (int i = 0; i < 10000; i++) {
        float x = frand() * 1000.0f;
        if (fabsf(x) < 0x1p-14f)
            continue;
        float r = cal_k_f16_to_f32(cal_k_f32_to_f16(x));
        assert_true(fabsf(r - x) <= fabsf(x) * 0x1p-11f);
    }
}

static void test_bf16_conversion(void **state)
{
    (void)state;
    assert_int_equal(cal_k_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(cal_k_f32_to_bf16(-3.0f), 0xc040);
    assert_true((cal_k_f32_to_bf16(NAN) & 0x7fff) > 0x7f80);
    /* ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
    assert_int_equal(cal_k_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(cal_k_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    for (int i = 0; i < 10000; i++) {
        float x = frand() * 1e6f;
        float r = cal_k_bf16_to_f32(cal_k_f32_to_bf16(x));
        assert_true(fabsf(r - x) <= fabsf(x) * 0x1p-8f);
    }
}

static void test_q8_0_layout(void **state)
{
    (void)state;
    assert_int_equal(sizeof(cal_q8_0_block), 34);  /* llama.cpp's block_q8_0 */
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_Q8_0, 64), 68);
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_F16, 64), 128);
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_F32, 64), 256);
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = frand();
    x[5] = -3.0f;  /* block 0's largest magnitude: scale 3/127, q −127 */
    x[40] = 0.5f;
    for (int i = 32; i < 64; i++)
        x[i] = i == 40 ? 0.5f : x[i] * 0.1f;
    cal_q8_0_block b[2];
    cal_k_quantize_row(CAL_DTYPE_Q8_0, x, b, 64);
    assert_int_equal(b[0].qs[5], -127);
    assert_int_equal(b[1].qs[8], 127);
    assert_true(fabsf(cal_k_f16_to_f32(b[0].d) - 3.0f / 127) < 3.0f / 127 * 0x1p-10f);
    float y[64];
    cal_k_dequantize_row(CAL_DTYPE_Q8_0, b, y, 64);
    /* each value within half a step of its block (plus the scale's F16 rounding) */
    for (int i = 0; i < 64; i++) {
        float d = cal_k_f16_to_f32(b[i / 32].d);
        assert_true(fabsf(y[i] - x[i]) <= 0.5f * d + 127 * d * 0x1p-11f);
    }
    /* an all-zero block has scale 0 and stays 0 */
    float z[32] = {0};
    cal_k_quantize_row(CAL_DTYPE_Q8_0, z, b, 32);
    cal_k_dequantize_row(CAL_DTYPE_Q8_0, b, y, 32);
    for (int i = 0; i < 32; i++)
        assert_true(y[i] == 0.0f);
}

/* One product checked two ways, for every format and m = 1..16:
 *  (a) against a double-precision product over the same dequantized weights
 *      (and, for Q8_0, the activations rounded to Q8_0 as the product takes
 *      them; for Q4_K and Q6_K, to Q8_K).
 *      The kernel sums n_in F32 products; each partial sum's rounding is at
 *      most 2^-24 of the running |sum|, so the error is at most
 *      n_in · 2^-24 · Σ|w·x| (a crude bound, never reached; we allow it).
 *  (b) against the F32 weights the format was made from: the format's own
 *      error Σ|w − ŵ|·|x| (Q8_0: + Σ|ŵ|·|x − x̂|) bounds the difference
 *      (plus (a)'s rounding). That
 *      bound is computed from the very weights, so a wrong scale, a wrong
 *      block offset or a swapped half fails it. */
enum { PATH_VECTOR, PATH_PORTABLE, PATH_Q8X };   /* cal_k_matmul, the C path, q8x.c */
static void check_product(int dt, int path, int n_out, int n_in)
{
    size_t rb = cal_k_row_bytes(dt, n_in);
    float *w = malloc(sizeof(float) * (size_t)n_out * n_in);
    float *wq = malloc(sizeof(float) * (size_t)n_out * n_in);
    char *ws = malloc(rb * (size_t)n_out);
    float *x = malloc(sizeof(float) * 16 * (size_t)n_in);
    float *xh = malloc(sizeof(float) * 16 * (size_t)n_in);
    float *y = malloc(sizeof(float) * 17 * (size_t)(n_out + 3));
    assert_non_null(w); assert_non_null(wq); assert_non_null(ws);
    assert_non_null(x); assert_non_null(y);
    for (int i = 0; i < n_out * n_in; i++)
        w[i] = frand() * (i % 7 == 0 ? 2.0f : 0.3f);
    for (int i = 0; i < 16 * n_in; i++)
        x[i] = frand();
    for (int i = 0; i < 16; i++) {
        float *xi = xh + (size_t)i * n_in;
        memcpy(xi, x + (size_t)i * n_in, sizeof(float) * (size_t)n_in);
        /* the activations as each format's product takes them: Q8_0 blocks
         * (Q8_0, and the other 32-weight formats but Q4_0's F32 path), Q8_K
         * (the K-quants) */
        if (dt == CAL_DTYPE_Q8_0 || (dt != CAL_DTYPE_Q4_0 && cal_k_is_q32(dt)))
            cal_k_q8_0_round(xi, xi, n_in);
        else if (cal_k_block_elems(dt) == CAL_QK_K)
            cal_k_q8_k_round(xi, xi, n_in);
    }
    for (int r = 0; r < n_out; r++) {
        cal_k_quantize_row(dt, w + (size_t)r * n_in, ws + (size_t)r * rb, n_in);
        cal_k_dequantize_row(dt, ws + (size_t)r * rb, wq + (size_t)r * n_in, n_in);
    }
    /* the same Q8_0 rows interleaved for the VNNI kernel */
    char *wx = NULL;
    if (path == PATH_Q8X) {
        wx = malloc(rb * (size_t)n_out);
        assert_non_null(wx);
        cal_k_q8x_pack(ws, wx, n_out, n_in);
    }
    int ldy = n_out + 3; /* a wider Y: the product must leave the gap alone */
    for (int m = 1; m <= 16; m++) {
        for (int pass = 0; pass < 2; pass++) {
            float beta = pass == 0 ? 0.0f : 0.5f;
            for (int i = 0; i < 17 * ldy; i++)
                y[i] = pass == 0 ? NAN : 1.0f;   /* beta 0 must not read Y */
            if (pass == 0)
                for (int i = 0; i < m; i++)
                    for (int r = n_out; r < ldy; r++)
                        y[(size_t)i * ldy + r] = 42.0f;
            if (path == PATH_Q8X)
                assert_int_equal(cal_k_q8x_product(y, ldy, x, n_in, wx, n_out, n_in, m, beta), 0);
            else if (path == PATH_PORTABLE)
                cal_k_matmul_portable(dt, y, ldy, x, n_in, ws, n_out, n_in, m, beta);
            else
                cal_k_matmul(dt, y, ldy, x, n_in, ws, n_out, n_in, m, beta);
            for (int i = 0; i < m; i++) {
                for (int r = 0; r < n_out; r++) {
                    const float *xi = x + (size_t)i * n_in, *hi = xh + (size_t)i * n_in;
                    double s = 0, sa = 0, sf = 0, qerr = 0;
                    for (int k = 0; k < n_in; k++) {
                        double a = wq[(size_t)r * n_in + k], b = w[(size_t)r * n_in + k];
                        s += a * hi[k];
                        sa += fabs(a * hi[k]);
                        sf += b * xi[k];
                        qerr += fabs(a - b) * fabs(xi[k]) + fabs(a) * fabs(hi[k] - xi[k]);
                    }
                    double got = y[(size_t)i * ldy + r] - (pass ? beta * 1.0 : 0.0);
                    double round = n_in * 0x1p-24 * sa + 1e-30;
                    assert_true(fabs(got - s) <= round);
                    assert_true(fabs(got - sf) <= qerr + round);
                }
                for (int r = n_out; r < ldy && pass == 0; r++)
                    assert_true(y[(size_t)i * ldy + r] == 42.0f);
            }
            /* rows of Y beyond m are untouched */
            for (int r = 0; r < n_out; r++)
                assert_true(pass == 0 ? isnan(y[(size_t)m * ldy + r])
                                      : y[(size_t)m * ldy + r] == 1.0f);
        }
    }
    free(w); free(wq); free(ws); free(wx); free(x); free(xh); free(y);
}

/* The interleaved Q8_0 layout holds the same bytes: a matrix packs and
 * unpacks to itself bit for bit, for odd row counts and short last groups,
 * and packing moves every byte (no block keeps its place); packing in place
 * gives the same bytes, and every run of rows (quads, the pair and the lone
 * row after them) reads back alone as it was. */
static void test_q8x_pack_roundtrip(void **state)
{
    (void)state;
    static const int shapes[][2] = {{1, 32}, {2, 96}, {5, 320}, {8, 768}, {3, 2048}, {7, 320},
                                    {13, 96}, {10, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int rows = shapes[i][0], n = shapes[i][1];
        size_t bytes = cal_k_row_bytes(CAL_DTYPE_Q8_0, n) * (size_t)rows;
        float *x = malloc(sizeof(float) * (size_t)n);
        char *a = malloc(bytes), *p = malloc(bytes), *b = malloc(bytes);
        assert_non_null(x); assert_non_null(a); assert_non_null(p); assert_non_null(b);
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < n; k++)
                x[k] = frand();
            cal_k_quantize_row(CAL_DTYPE_Q8_0, x,
                               a + (size_t)r * cal_k_row_bytes(CAL_DTYPE_Q8_0, n), n);
        }
        cal_k_q8x_pack(a, p, rows, n);
        assert_true(memcmp(a, p, bytes) != 0);
        cal_k_q8x_unpack(p, b, rows, n);
        assert_memory_equal(a, b, bytes);
        /* in place, through a scratch of four rows: the same bytes */
        size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n);
        char *scratch = malloc(4 * rb);
        assert_non_null(scratch);
        cal_k_q8x_pack_inplace(b, rows, n, scratch);
        assert_memory_equal(b, p, bytes);
        /* any run of rows unpacks alone to the original rows */
        for (int r0 = 0; r0 < rows; r0++)
            for (int cnt = 1; r0 + cnt <= rows; cnt++) {
                memset(scratch, 0, rb);
                char *out = cnt <= 4 ? scratch : malloc((size_t)cnt * rb);
                assert_non_null(out);
                cal_k_q8x_rows(p, rows, r0, cnt, n, out);
                assert_memory_equal(out, a + (size_t)r0 * rb, (size_t)cnt * rb);
                if (out != scratch)
                    free(out);
            }
        free(x); free(a); free(p); free(b); free(scratch);
    }
}

/* The engine's threads each round a decode batch once (cal_k_q8x_round)
 * and take the rows in pieces that start on multiples of 16: any split of
 * the rows at multiples of 4 gives the whole product bit for bit, and so
 * does cal_k_q8x_product. Inputs that are not whole blocks are refused. */
static void test_q8x_round_apply_pieces(void **state)
{
    (void)state;
    if (!cal_k_have_q8x()) {
        print_message("q8x pieces: skipped, this CPU has no AVX-512 VNNI\n");
        return;
    }
    enum { ROWS = 37, N = 320, M = 16 };
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, N);
    float *w = malloc(sizeof(float) * N), *x = malloc(sizeof(float) * M * N);
    float *whole = malloc(sizeof(float) * M * ROWS), *part = malloc(sizeof(float) * M * ROWS);
    char *ws = malloc(rb * ROWS), *wx = malloc(rb * ROWS);
    void *xq = aligned_alloc(64, cal_k_q8x_xbytes(N, M));
    assert_non_null(w); assert_non_null(x); assert_non_null(whole); assert_non_null(part);
    assert_non_null(ws); assert_non_null(wx); assert_non_null(xq);
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < N; k++)
            w[k] = frand();
        cal_k_quantize_row(CAL_DTYPE_Q8_0, w, ws + (size_t)r * rb, N);
    }
    cal_k_q8x_pack(ws, wx, ROWS, N);
    for (int i = 0; i < M * N; i++)
        x[i] = frand();
    static const int cuts[][3] = {{4, 20, 36}, {16, 32, 36}, {8, 12, 28}};
    for (int m = 1; m <= M; m++) {
        assert_int_equal(cal_k_q8x_round(x, N, N, m, xq), 0);
        assert_int_equal(cal_k_q8x_apply(whole, ROWS, xq, wx, ROWS, N, m, 0.0f), 0);
        assert_int_equal(cal_k_q8x_product(part, ROWS, x, N, wx, ROWS, N, m, 0.0f), 0);
        assert_memory_equal(whole, part, sizeof(float) * (size_t)m * ROWS);
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            memset(part, 0, sizeof(float) * M * ROWS);
            for (int p = 0, r0 = 0; p <= 3; p++) {
                int r1 = p < 3 ? cuts[c][p] : ROWS;
                assert_int_equal(cal_k_q8x_apply(part + r0, ROWS, xq, wx + (size_t)r0 * rb,
                                                 r1 - r0, N, m, 0.0f), 0);
                r0 = r1;
            }
            assert_memory_equal(whole, part, sizeof(float) * (size_t)m * ROWS);
        }
    }
    assert_int_equal(cal_k_q8x_xbytes(N + 16, 1), 0);
    assert_int_equal(cal_k_q8x_xbytes(N, 0), 0);
    assert_int_equal(cal_k_q8x_round(x, N, N + 16, 1, xq), -1);
    assert_int_equal(cal_k_q8x_apply(part, ROWS, xq, wx, ROWS, N + 16, 1, 0.0f), -1);
    free(w); free(x); free(whole); free(part); free(ws); free(wx); free(xq);
}

static void test_products_every_format_and_batch(void **state)
{
    (void)state;
    for (int dt = 0; dt < CAL_DTYPE_COUNT; dt++) {
        /* 37 rows: the 4- and 2-row tiles and a 1-row tail; 96 = three blocks
         * (of 32 weights; the K-quants' blocks are 256) */
        int u = cal_k_block_elems(dt) > 32 ? 256 : 32;
        check_product(dt, PATH_VECTOR, 37, 3 * u);
        check_product(dt, PATH_PORTABLE, 37, 3 * u);
        check_product(dt, PATH_VECTOR, 5, 10 * u);
    }
    /* Q8_0 interleaved: quads of rows and the 1-3 left (37 = 9 quads + 1,
     * 6 = 1 + a pair, 7 = 1 + a pair + 1, 4 = a quad alone), a short last
     * group (96 = three blocks, 320 = 8 + 2) and whole groups only (768 =
     * 3 × 8, 256 = one) */
    if (cal_k_have_q8x()) {
        check_product(CAL_DTYPE_Q8_0, PATH_Q8X, 37, 96);
        check_product(CAL_DTYPE_Q8_0, PATH_Q8X, 6, 320);
        check_product(CAL_DTYPE_Q8_0, PATH_Q8X, 7, 320);
        check_product(CAL_DTYPE_Q8_0, PATH_Q8X, 4, 256);
        check_product(CAL_DTYPE_Q8_0, PATH_Q8X, 9, 768);
    } else {
        print_message("q8x product: skipped, this CPU has no AVX-512 VNNI\n");
    }
    /* F32 with n_in not a multiple of 32 takes the portable path */
    check_product(CAL_DTYPE_F32, PATH_VECTOR, 9, 45);
}

/* The quantisation error is not only bounded but of the expected size: F16
 * and BF16 round each weight to 11 and 8 significant bits, Q8_0 to 1/254 of
 * its block's range, so the product's error relative to Σ|w·x| sits near
 * those steps, and in that order. A format stored wrongly (truncated, or a
 * scale off by 2×) moves the figure by far more than the margins here. */
static void test_quantisation_error_sizes(void **state)
{
    (void)state;
    enum { N = 64, K = 512 };
    double rel[CAL_DTYPE_COUNT];
    float *w = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * K);
    char *ws = malloc(sizeof(float) * N * K);
    float y[N];
    for (int i = 0; i < N * K; i++)
        w[i] = frand();
    for (int i = 0; i < K; i++)
        x[i] = frand();
    for (int dt = 0; dt < CAL_DTYPE_COUNT; dt++) {
        size_t rb = cal_k_row_bytes(dt, K);
        for (int r = 0; r < N; r++)
            cal_k_quantize_row(dt, w + (size_t)r * K, ws + r * rb, K);
        cal_k_matmul(dt, y, N, x, K, ws, N, K, 1, 0.0f);
        double e2 = 0, s2 = 0;
        for (int r = 0; r < N; r++) {
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                s += (double)w[r * K + k] * x[k];
                sa += fabs((double)w[r * K + k] * x[k]);
            }
            e2 += (y[r] - s) * (y[r] - s);
            s2 += sa * sa;
        }
        rel[dt] = sqrt(e2 / s2);
    }
    /* uniform rounding of relative step 2^-p over K random-sign terms:
     * rms error ≈ 2^-p/sqrt(12) · sqrt(Σ (w·x)²), i.e. far below 2^-p · Σ|w·x| */
    assert_true(rel[CAL_DTYPE_F32] < 1e-6);
    assert_true(rel[CAL_DTYPE_F16] > 1e-6 && rel[CAL_DTYPE_F16] < 0x1p-11);
    assert_true(rel[CAL_DTYPE_BF16] > 4 * rel[CAL_DTYPE_F16] && rel[CAL_DTYPE_BF16] < 0x1p-8);
    assert_true(rel[CAL_DTYPE_Q8_0] > rel[CAL_DTYPE_F16] && rel[CAL_DTYPE_Q8_0] < 1.0 / 127);
    /* Q6_K: 63 levels per sub-block of 16 (its int8 scales add a little);
     * Q4_0 and Q4_K: 15 levels per 32 */
    assert_true(rel[CAL_DTYPE_Q6_K] > rel[CAL_DTYPE_Q8_0] && rel[CAL_DTYPE_Q6_K] < 1.0 / 63);
    assert_true(rel[CAL_DTYPE_Q4_0] > 2 * rel[CAL_DTYPE_Q6_K] && rel[CAL_DTYPE_Q4_0] < 1.0 / 15);
    assert_true(rel[CAL_DTYPE_Q4_K] > 2 * rel[CAL_DTYPE_Q6_K] && rel[CAL_DTYPE_Q4_K] < 1.0 / 15);
    free(w); free(x); free(ws);
}

/* Q8_0 activation rounding against its definition: per block, the scale is
 * max|x|/127 and every value within half a step; the largest lands on ±127. */
static void test_q8_0_round(void **state)
{
    (void)state;
    float x[96], y[96];
    for (int i = 0; i < 96; i++)
        x[i] = frand() * (float)(1 + i / 32);
    x[70] = -9.0f;
    cal_k_q8_0_round(x, y, 96);
    for (int b = 0; b < 3; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        float d = amax / 127;
        for (int i = 0; i < 32; i++) {
            float q = y[b * 32 + i] / d;
            assert_true(fabsf(q - roundf(q)) < 1e-3f);          /* on the grid */
            assert_true(fabsf(y[b * 32 + i] - x[b * 32 + i]) <= 0.5f * d * 1.0001f);
        }
    }
    assert_true(fabsf(y[70] + 9.0f) < 1e-5f);
    cal_k_q8_0_round(x, x, 96); /* in place */
    assert_memory_equal(x, y, sizeof x);
}

/* The row widening prefill uses (vector where the CPU has AVX-512) gives
 * the portable path's values bit for bit: every half and every bfloat16
 * (NaNs apart: their payloads are not part of the contract), rows whose
 * length leaves a ragged tail, and Q8_0 blocks with extreme scales and
 * values. */
static void test_dequantize_matches_portable(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint16_t *h = malloc(sizeof(uint16_t) * N);
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    assert_non_null(h); assert_non_null(a); assert_non_null(b);
    for (int dt = CAL_DTYPE_F16; dt <= CAL_DTYPE_BF16; dt++) {
        int n = 0;
        for (uint32_t v = 0; v < N; v++) {
            int nan = dt == CAL_DTYPE_F16 ? (v & 0x7c00) == 0x7c00 && (v & 0x3ff)
                                          : (v & 0x7f80) == 0x7f80 && (v & 0x7f);
            if (!nan)
                h[n++] = (uint16_t)v;
        }
        for (int len = n; len >= n - 17; len -= 17) {   /* ragged tails too */
            cal_k_dequantize_row(dt, h, a, len);
            cal_k_dequantize_row_portable(dt, h, b, len);
            assert_memory_equal(a, b, sizeof(float) * (size_t)len);
        }
    }
    enum { NB = 64 };
    cal_q8_0_block q[NB];
    for (int i = 0; i < NB; i++) {
        q[i].d = cal_k_f32_to_f16(i == 0 ? 65504.0f : i == 1 ? 0x1p-24f : frand() * 0.05f);
        for (int j = 0; j < CAL_Q8_0_BLOCK; j++)
            q[i].qs[j] = (int8_t)(j == 0 ? -128 : j == 1 ? 127 : (int)(frand() * 120));
    }
    cal_k_dequantize_row(CAL_DTYPE_Q8_0, q, a, NB * CAL_Q8_0_BLOCK);
    cal_k_dequantize_row_portable(CAL_DTYPE_Q8_0, q, b, NB * CAL_Q8_0_BLOCK);
    assert_memory_equal(a, b, sizeof(float) * NB * CAL_Q8_0_BLOCK);
    assert_true(a[0] == -128.0f * 65504.0f && a[1] == 127.0f * 65504.0f);
    /* and the portable path is the definition: value = d · q */
    assert_true(b[CAL_Q8_0_BLOCK + 1] == 127.0f * 0x1p-24f);
    free(h); free(a); free(b);
}

static void test_read_bytes(void **state)
{
    (void)state;
    /* the checksum depends on every byte: the probe cannot skip reads */
    enum { N = 4096 + 77 };
    unsigned char *p = calloc(N, 1);
    uint64_t z = cal_k_read_bytes(p, N);
    for (int i = 0; i < N; i += 509) {
        p[i] = 1;
        assert_true(cal_k_read_bytes(p, N) != z);
        p[i] = 0;
    }
    assert_true(strcmp(cal_k_isa(), "avx512+vnni") == 0 || strcmp(cal_k_isa(), "avx512") == 0 ||
                strcmp(cal_k_isa(), "portable") == 0);
    free(p);
}

static void test_dtype_names(void **state)
{
    (void)state;
    for (int i = 0; i < CAL_DTYPE_COUNT; i++)
        assert_int_equal(cal_dtype_parse(cal_dtype_name(i)), i);
    assert_int_equal(cal_dtype_parse("Q8_0"), CAL_DTYPE_Q8_0);
    assert_int_equal(cal_dtype_parse("Q4_K"), CAL_DTYPE_Q4_K);
    assert_int_equal(cal_dtype_parse("q4_1"), CAL_DTYPE_Q4_1);
    assert_int_equal(cal_dtype_parse("Q5_K"), CAL_DTYPE_Q5_K);
    assert_int_equal(cal_dtype_parse("q2_k"), -1);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q4_1) == 20.0 / 32);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q5_0) == 22.0 / 32);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q5_1) == 24.0 / 32);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q5_K) == 176.0 / 256);
    assert_int_equal(cal_dtype_row_unit(CAL_DTYPE_Q5_0), 32);
    assert_int_equal(cal_dtype_row_unit(CAL_DTYPE_Q5_K), 256);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q4_0) == 18.0 / 32);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q4_K) == 144.0 / 256);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q6_K) == 210.0 / 256);
    assert_int_equal(cal_dtype_parse(NULL), -1);
    assert_null(cal_dtype_name(CAL_DTYPE_COUNT));
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_Q8_0) == 34.0 / 32);
    assert_true(cal_dtype_bytes_per_weight(CAL_DTYPE_BF16) == 2.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_conversion),
        cmocka_unit_test(test_bf16_conversion),
        cmocka_unit_test(test_q8_0_layout),
        cmocka_unit_test(test_q8x_pack_roundtrip),
        cmocka_unit_test(test_products_every_format_and_batch),
        cmocka_unit_test(test_q8x_round_apply_pieces),
        cmocka_unit_test(test_quantisation_error_sizes),
        cmocka_unit_test(test_q8_0_round),
        cmocka_unit_test(test_dequantize_matches_portable),
        cmocka_unit_test(test_read_bytes),
        cmocka_unit_test(test_dtype_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
