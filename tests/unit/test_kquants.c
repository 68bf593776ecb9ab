/* Unit tests of llama.cpp's 4-, 5- and 6-bit formats (engine/kquants.c,
 * q4kx.c, q5kx.c, q6kx.c): blocks built by hand byte by byte decode to the
 * values their layout defines, the quantizers stay within their error
 * bounds, the vector decode product agrees with the reference dot product
 * at every batch size 1..16, on row counts with odd tails, and the
 * interleaved products equal the block ones bit for bit. */
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

static void test_q4_0_by_hand(void **state)
{
    (void)state;
    cal_q4_0_block b;
    memset(&b, 0, sizeof b);
    b.d = 0x3800;          /* 0.5 */
    b.qs[0] = 0x1F;        /* element 0: 15, element 16: 1 */
    b.qs[15] = 0x80;       /* element 15: 0, element 31: 8 */
    float y[32];
    cal_k_dequantize_row(CAL_DTYPE_Q4_0, &b, y, 32);
    assert_true(y[0] == 3.5f);      /* (15 − 8) · 0.5 */
    assert_true(y[16] == -3.5f);    /* (1 − 8) · 0.5 */
    assert_true(y[15] == -4.0f);    /* (0 − 8) · 0.5 */
    assert_true(y[31] == 0.0f);
    assert_true(y[1] == -4.0f && y[17] == -4.0f);
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_Q4_0, 64), 36);
}

static void test_q4_k_by_hand(void **state)
{
    (void)state;
    cal_q4_k_block b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;          /* 1.0 */
    b.dmin = 0x3800;       /* 0.5 */
    /* sub-block 0: scale 2, min 4, in the low 6 bits of bytes 0 and 4 */
    b.scales[0] = 2;
    b.scales[4] = 4;
    /* sub-block 5: scale 33 = 0b10'0001, min 17 = 0b01'0001: low nibbles in
     * byte 9, the top two bits in bits 6-7 of bytes 1 (scale) and 5 (min) */
    b.scales[9] = 0x11;
    b.scales[1] = 2 << 6;
    b.scales[5] = 1 << 6;
    b.qs[0] = 0x03;        /* element 0 (sub-block 0, low nibble): 3 */
    b.qs[64 + 7] = 0x90;   /* element 32·5 + 7 (sub-block 5: pair 2, high nibble): 9 */
    float y[256];
    cal_k_dequantize_row(CAL_DTYPE_Q4_K, &b, y, 256);
    assert_true(y[0] == 1.0f * 2 * 3 - 0.5f * 4);        /* 4 */
    assert_true(y[1] == -2.0f);                           /* q 0: −dmin·m */
    assert_true(y[167] == 1.0f * 33 * 9 - 0.5f * 17);    /* 288.5 */
    assert_true(y[160] == -8.5f);
    assert_true(y[32] == 0.0f);                           /* sub-block 1: all 0 */
    /* sub-block 1 (the high nibbles of the first 32 bytes) sees element 0's byte */
    b.scales[1] |= 1;      /* sub-block 1: scale 1 (the top bits stay sub-block 5's) */
    b.qs[0] = 0x73;
    cal_k_dequantize_row(CAL_DTYPE_Q4_K, &b, y, 256);
    assert_true(y[0] == 4.0f && y[32] == 7.0f && y[167] == 288.5f);
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_Q4_K, 512), 288);
}

static void test_q6_k_by_hand(void **state)
{
    (void)state;
    cal_q6_k_block b;
    memset(&b, 0, sizeof b);
    b.d = 0x3400;          /* 0.25 */
    b.scales[0] = 2;
    b.scales[13] = -3;
    b.ql[0] = 0x05;        /* element 0: low 4 bits 5 */
    b.qh[0] = 0x02;        /* ... high 2 bits 2: q = 37 */
    /* element 210 = 128 + 82: half 1, group 2, l 18: the high nibble of
     * ql[64 + 18] and bits 4-5 of qh[32 + 18]; sub-block 210/16 = 13 */
    b.ql[64 + 18] = 0xA0;  /* 10 */
    b.qh[32 + 18] = 1 << 4;/* q = 10 | 16 = 26 */
    float y[256];
    cal_k_dequantize_row(CAL_DTYPE_Q6_K, &b, y, 256);
    assert_true(y[0] == 0.25f * 2 * (37 - 32));          /* 2.5 */
    assert_true(y[210] == 0.25f * -3 * (26 - 32));       /* 4.5 */
    assert_true(y[208] == 0.25f * -3 * -32);             /* q 0 in sub-block 13 */
    assert_true(y[1] == 0.25f * 2 * -32);
    assert_true(y[64 + 18] == 0.0f);                      /* scale 0 */
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_Q6_K, 256), 210);
}

/* Q5_K: Q4_K's scales and nibbles plus bit j of qh[l] as the fifth bit of
 * element l of sub-block j (ggml's dequantize_row_q5_K) */
static void test_q5_k_by_hand(void **state)
{
    (void)state;
    cal_q5_k_block b;
    memset(&b, 0, sizeof b);
    b.d = 0x3C00;          /* 1.0 */
    b.dmin = 0x3800;       /* 0.5 */
    b.scales[0] = 2;       /* sub-block 0: scale 2, min 4 */
    b.scales[4] = 4;
    b.scales[9] = 0x11;    /* sub-block 5: scale 33, min 17 (as in the Q4_K case) */
    b.scales[1] = 2 << 6;
    b.scales[5] = 1 << 6;
    b.qs[0] = 0x03;        /* element 0: nibble 3 */
    b.qh[0] = 1;           /* ... fifth bit (bit 0: sub-block 0): q = 19 */
    b.qs[64 + 7] = 0x90;   /* sub-block 5, element 7: nibble 9 */
    b.qh[7] = 1 << 5;      /* bit 5: sub-block 5's fifth bit: q = 25 */
    b.qh[1] = 1 << 1;      /* sub-block 1, element 1: q = 16 (scale 0: value −dmin·m = 0) */
    float y[256];
    cal_k_dequantize_row(CAL_DTYPE_Q5_K, &b, y, 256);
    assert_true(y[0] == 1.0f * 2 * 19 - 0.5f * 4);       /* 36 */
    assert_true(y[1] == -2.0f);
    assert_true(y[167] == 1.0f * 33 * 25 - 0.5f * 17);   /* 816.5 */
    assert_true(y[160] == -8.5f);
    assert_true(y[33] == 0.0f);
    /* the fifth bit of element 7 belongs to sub-block 5 alone */
    assert_true(y[7] == -2.0f && y[32 * 1 + 7] == 0.0f);
    assert_int_equal(cal_k_row_bytes(CAL_DTYPE_Q5_K, 512), 352);
}

/* quantize → dequantize: every weight within the format's worst-case step
 * of its own block, and the round trip of a dequantized row is exact */
static void check_roundtrip(int dt, double levels)
{
    enum { N = 1024 };
    float x[N], y[N], z[N];
    unsigned char q[N], q2[N];
    for (int i = 0; i < N; i++)
        x[i] = frand() * (i % 13 == 0 ? 3.0f : 1.0f) + (i / 256 == 2 ? 0.7f : 0.0f);
    x[300] = 0;
    cal_k_quantize_row(dt, x, q, N);
    cal_k_dequantize_row(dt, q, y, N);
    int blk = cal_k_block_elems(dt);
    for (int b = 0; b < N / blk; b++) {
        double lo = 0, hi = 0;
        for (int i = 0; i < blk; i++) {
            lo = fmin(lo, x[b * blk + i]);
            hi = fmax(hi, x[b * blk + i]);
        }
        /* the range over the levels, plus the scales' own rounding */
        double step = (hi - lo) / levels;
        for (int i = 0; i < blk; i++)
            assert_true(fabs((double)y[b * blk + i] - x[b * blk + i]) <= step);
    }
    /* values already on the grid come back as they are */
    cal_k_quantize_row(dt, y, q2, N);
    cal_k_dequantize_row(dt, q2, z, N);
    double worst = 0;
    for (int i = 0; i < N; i++)
        worst = fmax(worst, fabs((double)z[i] - y[i]));
    assert_true(worst <= 0.02 * fabs((double)y[0]) + 0.05);
}

static void test_quantizers(void **state)
{
    (void)state;
    check_roundtrip(CAL_DTYPE_Q4_0, 8.0);    /* step = max|x|/8 ≤ range/8 */
    check_roundtrip(CAL_DTYPE_Q4_K, 8.0);
    check_roundtrip(CAL_DTYPE_Q6_K, 30.0);
    check_roundtrip(CAL_DTYPE_Q5_K, 16.0);
    /* an all-zero block stays zero (no division by a zero scale) */
    float zero[256] = {0}, back[256];
    unsigned char q[256];
    static const int kq[] = {CAL_DTYPE_Q4_0, CAL_DTYPE_Q4_K, CAL_DTYPE_Q5_K, CAL_DTYPE_Q6_K};
    for (size_t f = 0; f < sizeof kq / sizeof kq[0]; f++) {
        int dt = kq[f];
        cal_k_quantize_row(dt, zero, q, 256);
        cal_k_dequantize_row(dt, q, back, 256);
        for (int i = 0; i < 256; i++)
            assert_true(back[i] == 0.0f);
    }
}

/* Q8_K rounding of activations: every element within half a step (d / 2,
 * d = max|x| / 127 per 256) of d·q, the largest at ±127, bsums the sums of
 * the q per 16; an all-zero block has d = 0 and q = 0. */
static void test_q8_k_rounding(void **state)
{
    (void)state;
    enum { N = 3 * 256 };
    float x[N];
    cal_q8_k_block q[3];
    for (int k = 0; k < N; k++)
        x[k] = k < 256 ? 0.0f : frand() * (k < 512 ? 0.01f : 30.0f);
    cal_k_q8_k_quantize_row(x, q, N);
    assert_true(q[0].d == 0.0f);
    for (int b = 0; b < 3; b++) {
        float amax = 0;
        int top = 0;
        for (int k = 0; k < 256; k++)
            amax = fmaxf(amax, fabsf(x[256 * b + k]));
        assert_true(q[b].d == amax / 127.0f);
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int k = 16 * j; k < 16 * j + 16; k++) {
                double err = fabs((double)x[256 * b + k] - (double)q[b].d * q[b].qs[k]);
                assert_true(err <= 0.5 * q[b].d * (1 + 1e-5));
                assert_true(q[b].qs[k] >= -127 && q[b].qs[k] <= 127);
                top |= q[b].qs[k] == 127 || q[b].qs[k] == -127;
                sum += q[b].qs[k];
            }
            assert_int_equal(q[b].bsums[j], sum);
        }
        assert_true(b == 0 || top);
    }
}

/* Q4_0: the dispatched product (AVX2 where the CPU has it) against the
 * reference dot product, per output, for batches 1..16 and beta 0 and 0.5.
 * The two sum in different orders: the bound is n_in ulps of Σ|w·x|.
 * Q4_K, Q6_K: the dispatched product equals, bit for bit, the plain C
 * integer product on the same Q8_K-rounded activations (cal_k_kq_dot_q8k),
 * and stays within the rounding's bound of the F32 reference: each x_k is
 * off by at most d_b / 2 = max|x|_b / 254 in its super-block b, so
 * |Δ| ≤ Σ_b max|x|_b / 254 · Σ_{k∈b} |w_k| (+1% and n_in ulps of Σ|w·x| for
 * float rounding on either side). */
static void check_vs_ref(int dt, int n_out, int n_in)
{
    size_t rb = cal_k_row_bytes(dt, n_in);
    int kq = dt != CAL_DTYPE_Q4_0, nb = n_in / 256;
    float *w = malloc(sizeof(float) * (size_t)n_out * n_in);
    char *ws = malloc(rb * (size_t)n_out);
    float *wq = malloc(sizeof(float) * (size_t)n_in);
    float *x = malloc(sizeof(float) * 16 * (size_t)n_in);
    float *y = malloc(sizeof(float) * 16 * (size_t)n_out);
    float *yp = malloc(sizeof(float) * 16 * (size_t)n_out);
    cal_q8_k_block *xq = malloc(sizeof *xq * 16 * (size_t)(nb ? nb : 1));
    for (int i = 0; i < n_out * n_in; i++)
        w[i] = frand() * (i % 5 == 0 ? 1.5f : 0.2f);
    for (int i = 0; i < 16 * n_in; i++)
        x[i] = frand() * (i % 7 == 0 ? 3.0f : 1.0f);
    for (int r = 0; r < n_out; r++)
        cal_k_quantize_row(dt, w + (size_t)r * n_in, ws + r * rb, n_in);
    if (kq)
        for (int i = 0; i < 16; i++)
            cal_k_q8_k_quantize_row(x + (size_t)i * n_in, xq + (size_t)i * nb, n_in);
    double worst = 0;   /* largest F32-vs-Q8_K difference seen, as a share of its bound */
    for (int m = 1; m <= 16; m++)
        for (int pass = 0; pass < 2; pass++) {
            float beta = pass ? 0.5f : 0.0f;
            for (int i = 0; i < 16 * n_out; i++)
                y[i] = yp[i] = pass ? 2.0f : NAN;
            cal_k_matmul(dt, y, n_out, x, n_in, ws, n_out, n_in, m, beta);
            cal_k_kq_matmul_portable(dt, yp, n_out, x, n_in, ws, n_out, n_in, m, beta);
            for (int i = 0; i < m; i++)
                for (int r = 0; r < n_out; r++) {
                    const float *xi = x + (size_t)i * n_in;
                    float ref = cal_k_kq_dot_ref(dt, ws + r * rb, xi, n_in);
                    cal_k_dequantize_row(dt, ws + r * rb, wq, n_in);
                    double sa = 0, qb = 0;
                    for (int k = 0; k < n_in; k++)
                        sa += fabs((double)wq[k] * xi[k]);
                    float yo = y[(size_t)i * n_out + r];
                    double got = yo - (pass ? 1.0 : 0.0);
                    if (!kq) {
                        assert_true(fabs(got - ref) <= n_in * 0x1p-23 * sa + 1e-6);
                        continue;
                    }
                    float exact = cal_k_kq_dot_q8k(dt, ws + r * rb, xq + (size_t)i * nb, n_in);
                    assert_true(yo == (pass ? 1.0f + exact : exact));
                    assert_true(yo == yp[(size_t)i * n_out + r]);
                    for (int b = 0; b < nb; b++) {
                        double amax = 0, sw = 0;
                        for (int k = 256 * b; k < 256 * b + 256; k++) {
                            amax = fmax(amax, fabs(xi[k]));
                            sw += fabs(wq[k]);
                        }
                        qb += amax / 254.0 * sw;
                    }
                    double bound = 1.01 * qb + n_in * 0x1p-23 * sa + 1e-6;
                    assert_true(fabs(got - ref) <= bound);
                    worst = fmax(worst, fabs(got - ref) / bound);
                }
            for (int r = 0; r < n_out; r++)   /* rows beyond m untouched */
                assert_true(m == 16 || (pass ? y[(size_t)m * n_out + r] == 2.0f
                                             : isnan(y[(size_t)m * n_out + r])));
        }
    /* the rounding is there: the Q8_K products are not the F32 ones */
    if (kq)
        assert_true(worst > 0);
    free(w); free(ws); free(wq); free(x); free(y); free(yp); free(xq);
}

static void test_products_vs_reference(void **state)
{
    (void)state;
    if (!cal_k_have_kq_avx2())
        print_message("kquants: this CPU has no AVX2: the portable path checked alone\n");
    check_vs_ref(CAL_DTYPE_Q4_0, 1, 32);
    check_vs_ref(CAL_DTYPE_Q4_0, 13, 96);
    check_vs_ref(CAL_DTYPE_Q4_0, 7, 800);
    check_vs_ref(CAL_DTYPE_Q4_K, 1, 256);
    check_vs_ref(CAL_DTYPE_Q4_K, 11, 768);
    check_vs_ref(CAL_DTYPE_Q4_K, 3, 4096);
    check_vs_ref(CAL_DTYPE_Q6_K, 1, 256);
    check_vs_ref(CAL_DTYPE_Q6_K, 9, 1280);
    check_vs_ref(CAL_DTYPE_Q6_K, 3, 4096);
    check_vs_ref(CAL_DTYPE_Q5_K, 1, 256);
    check_vs_ref(CAL_DTYPE_Q5_K, 9, 1280);
    check_vs_ref(CAL_DTYPE_Q5_K, 3, 4096);
    /* Q4_0's portable path is the reference, bit for bit */
    enum { NO = 5, NI = 512 };
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q4_0, NI);
    char *ws = malloc(rb * NO);
    float w[NI], x[3 * NI], y[3 * NO];
    for (int k = 0; k < 3 * NI; k++)
        x[k] = frand();
    for (int r = 0; r < NO; r++) {
        for (int k = 0; k < NI; k++)
            w[k] = frand();
        cal_k_quantize_row(CAL_DTYPE_Q4_0, w, ws + r * rb, NI);
    }
    cal_k_kq_matmul_portable(CAL_DTYPE_Q4_0, y, NO, x, NI, ws, NO, NI, 3, 0.0f);
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < NO; r++)
            assert_true(y[i * NO + r] == cal_k_kq_dot_ref(CAL_DTYPE_Q4_0, ws + r * rb,
                                                          x + i * NI, NI));
    free(ws);
}


/* Runs where the CPU has AVX-512 VNNI; elsewhere the caller checks that the
 * kernel refuses. Under CI that is a failure (a check that cannot run is not
 * a pass) unless the CPU is one emulated without VNNI on purpose
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

/* The AVX-512 Q8_K rounding is the plain C one bit for bit: scales, bytes
 * and sums, on blocks of zeros, of ties (x·(1/d) exactly k + 0.5), of
 * values with one outlier, and random ones across magnitudes. */
static void test_q8_k_rounding_avx512(void **state)
{
    (void)state;
    if (!have_vnni("Q8_K rounding on AVX-512")) {
        cal_q8_k_block q;
        float x[256] = {0};
        assert_int_equal(cal_k_q8_k_quantize_avx512(x, &q, 256), -1);
        return;
    }
    enum { NB = 40 };
    float *x = malloc(sizeof(float) * NB * 256);
    cal_q8_k_block a[NB], b[NB];
    for (int k = 0; k < NB * 256; k++) {
        int blk = k / 256;
        x[k] = blk == 0   ? 0.0f
             : blk == 1   ? (float)(k % 256 - 128) + 0.5f   /* d = 127.5/127: ties */
             : blk == 2   ? (k % 256 == 7 ? 1000.0f : frand() * 1e-3f)
             : frand() * ldexpf(1.0f, blk % 20 - 10);
    }
    memset(a, 0x55, sizeof a);
    memset(b, 0xaa, sizeof b);
    assert_int_equal(cal_k_q8_k_quantize_avx512(x, a, NB * 256), 0);
    cal_k_q8_k_quantize_row_portable(x, b, NB * 256);
    for (int i = 0; i < NB; i++) {
        assert_true(a[i].d == b[i].d);
        assert_memory_equal(a[i].qs, b[i].qs, sizeof a[i].qs);
        assert_memory_equal(a[i].bsums, b[i].bsums, sizeof a[i].bsums);
    }
    free(x);
}

/* The interleaved K-quant layouts: Q4_K (q4kx.c), Q5_K (q5kx.c), Q6_K
 * (q6kx.c), by the same contract */
typedef struct kx_fns {
    int dt;
    const char *name;
    void (*pack)(const void *, void *, int, int);
    void (*unpack)(const void *, void *, int, int);
    void (*pack_inplace)(void *, int, int, void *);
    void (*rows)(const void *, int, int, int, int, void *);
    int (*apply)(float *, int, const cal_q8_k_block *, const void *, int, int, int, float);
} kx_fns;
static const kx_fns kx[] = {
    {CAL_DTYPE_Q4_K, "Q4_K", cal_k_q4kx_pack, cal_k_q4kx_unpack, cal_k_q4kx_pack_inplace,
     cal_k_q4kx_rows, cal_k_q4kx_apply},
    {CAL_DTYPE_Q5_K, "Q5_K", cal_k_q5kx_pack, cal_k_q5kx_unpack, cal_k_q5kx_pack_inplace,
     cal_k_q5kx_rows, cal_k_q5kx_apply},
    {CAL_DTYPE_Q6_K, "Q6_K", cal_k_q6kx_pack, cal_k_q6kx_unpack, cal_k_q6kx_pack_inplace,
     cal_k_q6kx_rows, cal_k_q6kx_apply},
};

static char *kq_matrix(int dt, int rows, int n)
{
    size_t rb = cal_k_row_bytes(dt, n);
    char *m = malloc(rb * (size_t)rows);
    float *w = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < n; k++)
            w[k] = frand() * (k % 9 == 0 ? 2.0f : 0.3f) + (r % 3 == 0 ? 0.1f : 0.0f);
        cal_k_quantize_row(dt, w, m + (size_t)r * rb, n);
    }
    free(w);
    return m;
}

/* Interleaved rows unpack to the block layout bit for bit, in place or
 * not, whole or row by row, for row counts with and without a tail of
 * block rows. */
static void test_kx_pack_roundtrip(void **state)
{
    (void)state;
    const int shapes[][2] = {{1, 256}, {15, 512}, {16, 256}, {17, 768}, {48, 256}, {37, 1024}};
    for (size_t f = 0; f < sizeof kx / sizeof kx[0]; f++)
        for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
            const kx_fns *k = &kx[f];
            int rows = shapes[t][0], n = shapes[t][1];
            size_t rb = cal_k_row_bytes(k->dt, n), bytes = rb * (size_t)rows;
            char *a = kq_matrix(k->dt, rows, n), *p = malloc(bytes), *b = malloc(bytes);
            char *scratch = malloc(16 * rb), *out = malloc(bytes);
            k->pack(a, p, rows, n);
            /* the grouped part is reordered: a lane is not the row's bytes */
            if (rows >= 16)
                assert_true(memcmp(a, p, 16 * rb) != 0);
            k->unpack(p, b, rows, n);
            assert_memory_equal(a, b, bytes);
            memcpy(b, a, bytes);
            k->pack_inplace(b, rows, n, scratch);
            assert_memory_equal(p, b, bytes);
            for (int r0 = 0; r0 < rows; r0 += 5) {
                int cnt = rows - r0 < 7 ? rows - r0 : 7;
                k->rows(p, rows, r0, cnt, n, out);
                assert_memory_equal(out, a + (size_t)r0 * rb, (size_t)cnt * rb);
            }
            free(a); free(p); free(b); free(scratch); free(out);
        }
}

/* The interleaved product is the block product bit for bit (and so
 * cal_k_kq_dot_q8k's): every batch 1..20 (chunks of 4 and prefill sizes),
 * beta 0 and 0.5, a matrix with a tail of block rows, and pieces starting
 * at multiples of 16 as the engine's threads take them. Inputs that are
 * not whole super-blocks are refused. */
static void check_kx_product(const kx_fns *k)
{
    enum { ROWS = 53, N = 768, M = 20 };
    size_t rb = cal_k_row_bytes(k->dt, N);
    char *ws = kq_matrix(k->dt, ROWS, N), *wx = malloc(rb * ROWS);
    k->pack(ws, wx, ROWS, N);
    float *x = malloc(sizeof(float) * M * N);
    for (int i = 0; i < M * N; i++)
        x[i] = frand() * (i % 11 == 0 ? 4.0f : 1.0f);
    cal_q8_k_block *xq = malloc(cal_k_kq_xbytes(N, M));
    cal_k_kq_round(x, N, N, M, xq);
    float *y = malloc(sizeof(float) * M * ROWS), *yb = malloc(sizeof(float) * M * ROWS);
    for (int m = 1; m <= M; m++)
        for (int pass = 0; pass < 2; pass++) {
            float beta = pass ? 0.5f : 0.0f;
            for (int i = 0; i < M * ROWS; i++)
                y[i] = yb[i] = pass ? 2.0f : NAN;
            assert_int_equal(k->apply(y, ROWS, xq, wx, ROWS, N, m, beta), 0);
            cal_k_kq_apply(k->dt, yb, ROWS, xq, ws, ROWS, N, m, beta);
            for (int i = 0; i < m; i++)
                for (int r = 0; r < ROWS; r++) {
                    float exact = cal_k_kq_dot_q8k(k->dt, ws + r * rb,
                                                   xq + (size_t)i * (N / 256), N);
                    float got = y[(size_t)i * ROWS + r];
                    if (got != (pass ? 1.0f + exact : exact))
                        fail_msg("%s m %d row %d: %.9g, not %.9g", k->name, m, r, got,
                                 pass ? 1.0f + exact : exact);
                    assert_true(got == yb[(size_t)i * ROWS + r]);
                }
            for (int r = 0; r < ROWS && m < M; r++)   /* rows beyond m untouched */
                assert_true(pass ? y[(size_t)m * ROWS + r] == 2.0f
                                 : isnan(y[(size_t)m * ROWS + r]));
        }
    /* in pieces of 16 rows (the last one 5): the same bits */
    float *part = malloc(sizeof(float) * 3 * ROWS);
    assert_int_equal(k->apply(y, ROWS, xq, wx, ROWS, N, 3, 0.0f), 0);
    for (int r0 = 0; r0 < ROWS; r0 += 16) {
        int cnt = ROWS - r0 < 16 ? ROWS - r0 : 16;
        assert_int_equal(k->apply(part + r0, ROWS, xq, wx + (size_t)r0 * rb, cnt, N, 3, 0.0f),
                         0);
    }
    assert_memory_equal(part, y, sizeof(float) * 3 * ROWS);
    assert_int_equal(k->apply(y, ROWS, xq, wx, ROWS, N + 16, 1, 0.0f), -1);
    assert_int_equal(cal_k_kq_xbytes(N + 16, 1), 0);
    free(ws); free(wx); free(x); free(xq); free(y); free(yb); free(part);
}

static void test_kx_product(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof kx / sizeof kx[0]; f++) {
        if (!have_vnni("interleaved K-quant products")) {
            assert_int_equal(kx[f].apply(NULL, 1, NULL, NULL, 16, 256, 1, 0.0f), -1);
            continue;
        }
        check_kx_product(&kx[f]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_0_by_hand),
        cmocka_unit_test(test_q4_k_by_hand),
        cmocka_unit_test(test_q6_k_by_hand),
        cmocka_unit_test(test_q5_k_by_hand),
        cmocka_unit_test(test_quantizers),
        cmocka_unit_test(test_q8_k_rounding),
        cmocka_unit_test(test_products_vs_reference),
        cmocka_unit_test(test_q8_k_rounding_avx512),
        cmocka_unit_test(test_kx_pack_roundtrip),
        cmocka_unit_test(test_kx_product),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
