/* caliper reference engine — the BF16 prefill product on AVX512_BF16:
 * activations rounded to BF16 once per product, multiplied against the BF16
 * weights with vdpbf16ps (two products per lane per instruction, summed in
 * F32), as llama.cpp does on these CPUs. Contracts in kernels.h. */
#include "engine/kernels.h"
#include "engine/simd.h"
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* the same rounding as cal_k_f32_to_bf16, inlined for the packing loops */
static inline uint32_t bf16_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return ((x >> 16) | 0x40u) & 0xffffu;
    x += 0x7fffu + ((x >> 16) & 1u);
    return x >> 16;
}

void cal_k_bf16_pairs(const float *x, int ldx, uint32_t *out, int m, int k)
{
    int kh = (k + 1) / 2;
    for (int i = 0; i < m; i++) {
        const float *xi = x + (size_t)i * ldx;
        uint32_t *o = out + (size_t)i * kh;
        for (int j = 0; j < k / 2; j++)
            o[j] = bf16_bits(xi[2 * j]) | bf16_bits(xi[2 * j + 1]) << 16;
        if (k & 1)
            o[kh - 1] = bf16_bits(xi[k - 1]);
    }
}

#if HAVE_X86
#define TGTB CAL_SIMD("avx512bf16,avx512f,avx512bw,avx512vl")
#define INLB static inline __attribute__((always_inline)) TGTB

enum { NR = 32, MR = 12 };

/* Columns c0 .. c0+nc−1 of W (nc ≤ 32) as [kh][32] pairs along K: the
 * layout vdpbf16ps takes for 32 output columns in two vectors. Missing
 * columns and the odd K's last partner are zero. */
static void pack_panel(const uint16_t *w, int n_in, int nc, uint32_t *p)
{
    int kh = (n_in + 1) / 2, ke = n_in / 2;
    for (int c = 0; c < NR; c++) {
        uint32_t *pc = p + c;
        if (c >= nc) {
            for (int j = 0; j < kh; j++)
                pc[(size_t)j * NR] = 0;
            continue;
        }
        const uint16_t *r = w + (size_t)c * n_in;
        for (int j = 0; j < ke; j++)
            pc[(size_t)j * NR] = (uint32_t)r[2 * j] | (uint32_t)r[2 * j + 1] << 16;
        if (n_in & 1)
            pc[(size_t)(kh - 1) * NR] = r[n_in - 1];
    }
}

/* Y[mr][nc] (= beta·Y +) X pairs [mr][kh] · panel: 2·mr accumulators */
INLB void tile(int mr, float *y, int ldy, const uint32_t *x, int kh,
               const uint32_t *p, int nc, float beta)
{
    __m512 acc[MR][2];
    for (int i = 0; i < mr; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int j = 0; j < kh; j++) {
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(p + (size_t)j * NR);
        __m512bh w1 = (__m512bh)_mm512_loadu_si512(p + (size_t)j * NR + 16);
        for (int i = 0; i < mr; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)x[(size_t)i * kh + j]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, w0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, w1);
        }
    }
    __mmask16 m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
    __mmask16 m1 = nc >= 32 ? 0xffff : nc <= 16 ? 0 : (__mmask16)((1u << (nc - 16)) - 1);
    __m512 vb = _mm512_set1_ps(beta);
    for (int i = 0; i < mr; i++) {
        float *yi = y + (size_t)i * ldy;
        __m512 a0 = acc[i][0], a1 = acc[i][1];
        if (beta != 0.0f) {
            a0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, yi), a0);
            a1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, yi + 16), a1);
        }
        _mm512_mask_storeu_ps(yi, m0, a0);
        _mm512_mask_storeu_ps(yi + 16, m1, a1);
    }
}

#define TILE_N(n)                                                                    \
    static TGTB void tile##n(float *y, int ldy, const uint32_t *x, int kh,           \
                             const uint32_t *p, int nc, float beta)                  \
    {                                                                                \
        tile(n, y, ldy, x, kh, p, nc, beta);                                         \
    }
TILE_N(1) TILE_N(2) TILE_N(3) TILE_N(4) TILE_N(5) TILE_N(6)
TILE_N(7) TILE_N(8) TILE_N(9) TILE_N(10) TILE_N(11) TILE_N(12)
typedef void (*tile_fn)(float *, int, const uint32_t *, int, const uint32_t *, int, float);
static const tile_fn tiles[MR] = {tile1, tile2, tile3, tile4,  tile5,  tile6,
                                  tile7, tile8, tile9, tile10, tile11, tile12};

/* AVX512_BF16 is cpuid leaf 7 subleaf 1, EAX bit 5 (older compilers'
 * __builtin_cpu_supports do not know the name) */
static int ask_bf16(void)
{
    unsigned a, b, c, d;
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl")))
        return 0;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

int cal_k_have_bf16_gemm(void)
{
    static _Atomic int cached = -1;
    return cal_k_cpu_once(&cached, ask_bf16);
}

void cal_k_gemm_bf16(float *y, int ldy, const uint32_t *xq, int m, const uint16_t *w,
                     int n_out, int n_in, float beta, uint32_t *pack)
{
    int kh = (n_in + 1) / 2;
    for (int c0 = 0; c0 < n_out; c0 += NR) {
        int nc = n_out - c0 < NR ? n_out - c0 : NR;
        pack_panel(w + (size_t)c0 * n_in, n_in, nc, pack);
        for (int i0 = 0; i0 < m; i0 += MR) {
            int mb = m - i0 < MR ? m - i0 : MR;
            tiles[mb - 1](y + (size_t)i0 * ldy + c0, ldy, xq + (size_t)i0 * kh, kh, pack,
                          nc, beta);
        }
    }
}
#else
int cal_k_have_bf16_gemm(void)
{
    return 0;
}

/* without the instruction: the same sums in plain C (F32, pairs in order) */
void cal_k_gemm_bf16(float *y, int ldy, const uint32_t *xq, int m, const uint16_t *w,
                     int n_out, int n_in, float beta, uint32_t *pack)
{
    (void)pack;
    int kh = (n_in + 1) / 2;
    for (int i = 0; i < m; i++)
        for (int r = 0; r < n_out; r++) {
            const uint32_t *xi = xq + (size_t)i * kh;
            const uint16_t *wr = w + (size_t)r * n_in;
            float s = 0;
            for (int k = 0; k < n_in; k++)
                s += cal_k_bf16_to_f32((uint16_t)(xi[k / 2] >> (k & 1 ? 16 : 0))) *
                     cal_k_bf16_to_f32(wr[k]);
            float *o = y + (size_t)i * ldy + r;
            *o = beta != 0.0f ? beta * *o + s : s;
        }
}
#endif
