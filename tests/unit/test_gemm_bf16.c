/* Unit tests of the BF16 prefill product (cal_k_gemm_bf16): the activation
 * rounding against cal_k_f32_to_bf16, the product against a double-precision
 * one over the BF16-rounded activations and the BF16 weights, and against
 * the F32-activation path (cal_k_matmul) within what rounding X to BF16
 * justifies, for shapes that are no multiple of the tiles (odd K included),
 * with beta 0 and beta ≠ 0, and the columns of Y it must not touch. */
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

static uint64_t rng = 4242;
static float frand(void) /* uniform in [-1, 1) */
{
    return (float)(cal_k_splitmix64(&rng) >> 40) / 8388608.0f - 1.0f;
}

static float bf(uint16_t b)
{
    return cal_k_bf16_to_f32(b);
}

static void test_pairs_round_like_f32_to_bf16(void **state)
{
    (void)state;
    enum { M = 3, K = 7, LDX = 9 };
    float x[M * LDX];
    for (int i = 0; i < M * LDX; i++)
        x[i] = frand() * 100.0f;
    x[1] = 1.0f + 0x1p-8f;      /* a tie: to even, 1.0 */
    x[2] = 1.0f + 3 * 0x1p-8f;  /* a tie: to even, 1 + 2^-6 */
    x[3] = NAN;
    uint32_t out[M * 4];
    memset(out, 0xff, sizeof out);
    cal_k_bf16_pairs(x, LDX, out, M, K);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < 8; k++) {
            uint16_t got = (uint16_t)(out[i * 4 + k / 2] >> (k & 1 ? 16 : 0));
            uint16_t want = k < K ? cal_k_f32_to_bf16(x[i * LDX + k]) : 0;
            assert_int_equal(got, want);
        }
    assert_int_equal(out[0] >> 16, 0x3f80);
    assert_int_equal(out[1] & 0xffff, 0x3f82);
}

/* Y = beta·Y + X̂·Wᵀ for one shape, checked two ways:
 *  (a) against a double-precision sum over the same BF16 X̂ and W: products
 *      of two BF16 values are exact in F32, so only the F32 additions round,
 *      each by at most 2^-24 of a partial sum ≤ Σ|x̂w|: |err| ≤
 *      (K + 2) · 2^-24 · Σ|x̂w| (crude, never reached);
 *  (b) against cal_k_matmul over the F32 X (the old path): the two differ by
 *      Σ|w|·|x − x̂| ≤ 2^-8 Σ|w·x| (BF16 keeps 8 significant bits) plus both paths' (a). */
static void check_shape(int m, int n_out, int n_in)
{
    int ldx = n_in + 5, ldy = n_out + 3, kh = (n_in + 1) / 2;
    float *x = malloc(sizeof(float) * (size_t)m * ldx);
    float *wf = malloc(sizeof(float) * (size_t)n_out * n_in);
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)n_out * n_in);
    uint32_t *xq = malloc(sizeof(uint32_t) * (size_t)m * kh);
    uint32_t *pack = malloc(sizeof(uint32_t) * 32 * (size_t)kh);
    float *y = malloc(sizeof(float) * (size_t)m * ldy);
    float *y0 = malloc(sizeof(float) * (size_t)m * ldy);
    assert_true(x && wf && w && xq && pack && y && y0);
    for (int i = 0; i < m * ldx; i++)
        x[i] = frand() * (i % 5 == 0 ? 3.0f : 0.7f);
    for (int i = 0; i < n_out * n_in; i++)
        wf[i] = frand() * (i % 7 == 0 ? 2.0f : 0.3f);
    for (int r = 0; r < n_out; r++)
        cal_k_quantize_row(CAL_DTYPE_BF16, wf + (size_t)r * n_in, w + (size_t)r * n_in, n_in);
    cal_k_bf16_pairs(x, ldx, xq, m, n_in);
    for (int pass = 0; pass < 2; pass++) {
        float beta = pass == 0 ? 0.0f : 0.5f;
        for (int i = 0; i < m * ldy; i++)
            y[i] = y0[i] = pass == 0 ? NAN : 1.0f - (float)(i % 3); /* beta 0: unread */
        for (int i = 0; i < m; i++)
            for (int r = n_out; r < ldy; r++)
                y[(size_t)i * ldy + r] = 42.0f;
        cal_k_gemm_bf16(y, ldy, xq, m, w, n_out, n_in, beta, pack);
        cal_k_matmul(CAL_DTYPE_BF16, y0, ldy, x, ldx, w, n_out, n_in, m, beta);
        for (int i = 0; i < m; i++) {
            for (int r = 0; r < n_out; r++) {
                double s = 0, sa = 0, sfa = 0;
                for (int k = 0; k < n_in; k++) {
                    double wk = bf(w[(size_t)r * n_in + k]);
                    double xk = x[(size_t)i * ldx + k];
                    double xh = bf(cal_k_f32_to_bf16((float)xk));
                    s += xh * wk;
                    sa += fabs(xh * wk);
                    sfa += fabs(xk * wk);
                }
                double prev = pass == 0 ? 0.0 : 0.5 * (1.0 - (double)(((size_t)i * ldy + r) % 3));
                double got = y[(size_t)i * ldy + r];
                double ea = (n_in + 2) * 0x1p-24 * sa + 0x1p-24 * fabs(prev) + 1e-30;
                if (!(fabs(got - (s + prev)) <= ea))
                    fail_msg("m %d n %d k %d: y[%d][%d] = %.9g, exact %.9g (bound %.3g)", m,
                             n_out, n_in, i, r, got, s + prev, ea);
                double old = y0[(size_t)i * ldy + r];
                double eb = 0x1p-8 * sfa + ea + (n_in + 2) * 0x1p-24 * sfa;
                if (!(fabs(got - old) <= eb))
                    fail_msg("m %d n %d k %d: y[%d][%d] = %.9g, F32-activation path %.9g "
                             "(bound %.3g)", m, n_out, n_in, i, r, got, old, eb);
            }
            for (int r = n_out; r < ldy; r++)
                assert_true(y[(size_t)i * ldy + r] == 42.0f);
        }
    }
    free(x); free(wf); free(w); free(xq); free(pack); free(y); free(y0);
}

static void test_gemm_odd_shapes(void **state)
{
    (void)state;
    static const int shapes[][3] = {
        {1, 1, 1},    {1, 1, 2},    {12, 32, 64}, {13, 33, 7},  {25, 70, 65},
        {17, 31, 128}, {37, 95, 257}, {24, 64, 1},  {11, 16, 33}, {30, 48, 1024},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_shape(shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* a product whose every term is exact in BF16 and in F32 sums: the result is
 * exact, so a swapped pair, a wrong column or a dropped K tail shows as a
 * wrong integer */
static void test_gemm_exact_integers(void **state)
{
    (void)state;
    enum { M = 14, N = 35, K = 41 };
    float x[M * K], wf[N * K], y[M * N];
    uint16_t w[N * K];
    uint32_t xq[M * ((K + 1) / 2)], pack[32 * ((K + 1) / 2)];
    for (int i = 0; i < M * K; i++)
        x[i] = (float)((i * 7) % 11 - 5);
    for (int i = 0; i < N * K; i++)
        wf[i] = (float)((i * 5) % 13 - 6);
    cal_k_quantize_row(CAL_DTYPE_BF16, wf, w, N * K);
    cal_k_bf16_pairs(x, K, xq, M, K);
    cal_k_gemm_bf16(y, N, xq, M, w, N, K, 0.0f, pack);
    for (int i = 0; i < M; i++)
        for (int r = 0; r < N; r++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)x[i * K + k] * wf[r * K + k];
            assert_true(y[i * N + r] == (float)s);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs_round_like_f32_to_bf16),
        cmocka_unit_test(test_gemm_odd_shapes),
        cmocka_unit_test(test_gemm_exact_integers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
