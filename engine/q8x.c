/* caliper reference engine — Q8_0 rows interleaved for AVX-512 VNNI.
 *
 * llama.cpp's Q8_0 row is a run of 34-byte blocks (an F16 scale, 32 int8).
 * A vpdpbusd over such a row yields 8 partial sums per block in 8 lanes, so
 * each pair of blocks then needs its scales broadcast, a conversion and two
 * multiply-adds: four operations per activation row for 64 weights.
 *
 * The interleaved row holds the same bytes in groups of up to 16 blocks:
 * for k = 0..7 the 4-byte slices k of the group's blocks side by side
 * (block l's bytes 4k..4k+3 in lane l), then the group's F16 scales. One
 * vpdpbusd per k adds slice k of all 16 blocks at once, so after 8 of them
 * lane l holds block l's whole integer dot product, and the group costs one
 * conversion and two multiply-adds for 16 blocks: 11 operations per
 * activation row for 512 weights instead of 32. The weights are stored with
 * the sign bit flipped (w + 128, unsigned, as vpdpbusd takes its first
 * operand); each activation block's lane starts at −128·Σq, which takes the
 * 128s back out exactly.
 *
 * The same bytes per row as the block layout (34 per 32 weights); a packed
 * row unpacks to the original bit for bit. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include "engine/simd.h"
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

enum { G = 8, SLICES = CAL_Q8_0_BLOCK / 4 };

/* blocks in the group that starts at block b0 of a row of nb (all groups
 * before the last are whole) */
static int group_blocks(int nb, int b0) { return nb - b0 < G ? nb - b0 : G; }

/* Rows go in pairs (a last odd row alone, as a pair of one): per group of
 * g ≤ 8 blocks, for each slice k the pair's g + g 4-byte slices (row 0's
 * blocks, then row 1's), then the pair's g + g scales. */
static void pair_order(const cal_q8_0_block *b, size_t bstride, int h, unsigned char *o,
                       int n, int to_packed)
{
    int nb = n / CAL_Q8_0_BLOCK;
    for (int b0 = 0; b0 < nb; b0 += G) {
        int g = group_blocks(nb, b0);
        for (int k = 0; k < SLICES; k++)
            for (int r = 0; r < h; r++)
                for (int l = 0; l < g; l++, o += 4) {
                    int8_t *q = (int8_t *)b[(size_t)r * bstride + b0 + l].qs + 4 * k;
                    for (int t = 0; t < 4; t++) {
                        if (to_packed)
                            o[t] = (unsigned char)q[t] ^ 0x80u;
                        else
                            q[t] = (int8_t)(o[t] ^ 0x80u);
                    }
                }
        for (int r = 0; r < h; r++)
            for (int l = 0; l < g; l++, o += 2) {
                uint16_t *d = (uint16_t *)&b[(size_t)r * bstride + b0 + l].d;
                if (to_packed)
                    memcpy(o, d, 2);
                else
                    memcpy(d, o, 2);
            }
    }
}

void cal_k_q8x_pack(const void *src, void *dst, int n_rows, int n)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n), nb = (size_t)n / CAL_Q8_0_BLOCK;
    for (int r = 0; r < n_rows; r += 2)
        pair_order((const cal_q8_0_block *)((const char *)src + (size_t)r * rb), nb,
                   n_rows - r < 2 ? 1 : 2, (unsigned char *)dst + (size_t)r * rb, n, 1);
}

void cal_k_q8x_unpack(const void *src, void *dst, int n_rows, int n)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n), nb = (size_t)n / CAL_Q8_0_BLOCK;
    for (int r = 0; r < n_rows; r += 2)
        pair_order((const cal_q8_0_block *)((char *)dst + (size_t)r * rb), nb,
                   n_rows - r < 2 ? 1 : 2, (unsigned char *)src + (size_t)r * rb, n, 0);
}

#if HAVE_X86
#define TGTV __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define INLV static inline __attribute__((always_inline)) TGTV

/* The activations of one call, rounded to Q8_0 once per thread and laid
 * out to meet a pair of rows: per group of g blocks, each slice k holds the
 * g blocks' slices twice (lanes 0..g−1 and g..2g−1), and so do the block
 * scales (F32) and the starting values −128·Σq; lanes past 2g are zero. */
enum { XCAP = 16 * 8192 };                 /* activation values per round */
typedef struct xgroup {
    int8_t q[SLICES][64];
    float d[2 * G];
    int32_t c[2 * G];
} xgroup;
static _Thread_local xgroup xg[XCAP / (G * CAL_Q8_0_BLOCK)] __attribute__((aligned(64)));

/* one block, rounded as cal_k_q8_0_round rounds it (simd.h), into lanes l
 * and g + l */
INLV void round_block(const float *x, xgroup *o, int l, int g)
{
    int8_t q[CAL_Q8_0_BLOCK];
    int sum;
    float d = cal_q8_round_block(x, q, &sum);
    int32_t c = -128 * sum;
    for (int h = 0; h < 2; h++) {
        for (int k = 0; k < SLICES; k++)
            memcpy(&o->q[k][4 * (h * g + l)], q + 4 * k, 4);
        o->d[h * g + l] = d;
        o->c[h * g + l] = c;
    }
}

static TGTV void round_x(const float *x, int ldx, int n_in, int m)
{
    int nb = n_in / CAL_Q8_0_BLOCK, ng = (nb + G - 1) / G;
    for (int i = 0; i < m; i++)
        for (int gi = 0; gi < ng; gi++) {
            xgroup *o = &xg[(size_t)i * ng + gi];
            int g = group_blocks(nb, gi * G);
            if (g < G)
                memset(o, 0, sizeof *o);
            for (int l = 0; l < g; l++)
                round_block(x + (size_t)i * ldx + (size_t)(gi * G + l) * CAL_Q8_0_BLOCK, o, l,
                            g);
        }
}

/* the weights this many bytes ahead are prefetched (the pairs are one
 * ascending stream) */
#ifndef CAL_Q8X_PF
#define CAL_Q8X_PF 8192
#endif

/* The sums of the halves (lanes 0..7, 8..15: two weight rows) of NA = 4 or
 * 8 accumulators at once, in 3·NA/2 + 3 operations rather than 2·NA
 * horizontal reductions: adjacent accumulators' lanes meet in unpacks, then
 * their 64-bit pairs, then 128-bit quarters. Lane 2i + r of the result is
 * accumulator i's half r. */
INLV __m512 sum_halves(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4, __m512 a5,
                       __m512 a6, __m512 a7, int na)
{
    __m512 a[8] = {a0, a1, a2, a3, a4, a5, a6, a7}, l1[4], l2[2];
    for (int j = 0; j < na / 2; j++)  /* per quarter: a 2j's and a 2j+1's lanes paired */
        l1[j] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * j], a[2 * j + 1]),
                              _mm512_unpackhi_ps(a[2 * j], a[2 * j + 1]));
    for (int j = 0; j < na / 4; j++) { /* per quarter: 4 accumulators' sums of it */
        __m512d u = _mm512_castps_pd(l1[2 * j]), v = _mm512_castps_pd(l1[2 * j + 1]);
        l2[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(u, v)),
                              _mm512_castpd_ps(_mm512_unpackhi_pd(u, v)));
    }
    if (na == 4)
        l2[1] = l2[0];
    /* quarters 0+1 are row 0, 2+3 row 1: [0-3 r0 | 0-3 r1 | 4-7 r0 | 4-7 r1] */
    __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(l2[0], l2[1], 0x88),
                             _mm512_shuffle_f32x4(l2[0], l2[1], 0xdd));
    return _mm512_permutexvar_ps(
        _mm512_set_epi32(15, 11, 14, 10, 13, 9, 12, 8, 7, 3, 6, 2, 5, 1, 4, 0), q);
}

/* One pair of rows (h = 2, or 1 for a last odd row) × MB activation rows.
 * Per group: 8 vpdpbusd into MB integer sums (lane = one block of one row),
 * then per sum one conversion and one multiply-add with the lanes' scales
 * dw·dx. Row 0 is in lanes 0..7 and row 1 in 8..15, except in a last short
 * group (g < 8), whose row 1 at lanes g..2g−1 is moved up to 8 first. */
INLV void tile(int MB, int h, float *y, int ldy, const unsigned char *w, int nb, int ng,
               int i0, float beta)
{
    __m512 acc[8];
    for (int i = 0; i < 8; i++)
        acc[i] = _mm512_setzero_ps();
    const unsigned char *gp = w;       /* this group of the pair */
    for (int gi = 0; gi < ng; gi++) {
        int g = group_blocks(nb, gi * G);
        __mmask16 lanes = (__mmask16)((1u << (h * g)) - 1);
        size_t gbytes = (size_t)h * g * (CAL_Q8_0_BLOCK + 2);
        for (size_t o = 0; o < gbytes; o += 64)
            _mm_prefetch((const char *)gp + CAL_Q8X_PF + o, _MM_HINT_T0);
        const xgroup *xr[8];
        __m512i s[8];
        for (int i = 0; i < MB; i++) {
            xr[i] = &xg[(size_t)(i0 + i) * ng + gi];
            s[i] = _mm512_load_si512(xr[i]->c);
        }
        _Pragma("GCC unroll 8")
        for (int k = 0; k < SLICES; k++) {
            __m512i wk = _mm512_maskz_loadu_epi32(lanes, gp + (size_t)k * h * g * 4);
            __asm__("" : "+v"(wk));    /* one load, not one per activation row */
            for (int i = 0; i < MB; i++)
                s[i] = _mm512_dpbusd_epi32(s[i], wk, _mm512_load_si512(xr[i]->q[k]));
        }
        /* masked to the pair's lanes: the others' sums meet a zero scale */
        __m512 dw = _mm512_cvtph_ps(
            _mm256_maskz_loadu_epi16(lanes, gp + (size_t)h * g * CAL_Q8_0_BLOCK));
        if (g == G) {
            for (int i = 0; i < MB; i++)
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]),
                                         _mm512_mul_ps(dw, _mm512_load_ps(xr[i]->d)), acc[i]);
        } else {
            __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
            __m512i up = _mm512_mask_add_epi32(iota, 0xff00, iota, _mm512_set1_epi32(g - 8));
            __mmask16 both = (__mmask16)(((1u << g) - 1) * 0x0101u);
            for (int i = 0; i < MB; i++) {
                __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[i]),
                                         _mm512_mul_ps(dw, _mm512_load_ps(xr[i]->d)));
                acc[i] = _mm512_add_ps(acc[i], _mm512_maskz_permutexvar_ps(both, up, t));
            }
        }
        gp += gbytes;
    }
    __m512 v = sum_halves(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7],
                          MB <= 4 ? 4 : 8);
    __mmask16 out = (__mmask16)((1u << h) - 1);
    for (int i = 0; i < MB; i++) {
        __m512 vi = _mm512_permutexvar_ps(_mm512_zextsi128_si512(_mm_setr_epi32(2 * i, 2 * i + 1,
                                                                                0, 0)),
                                          v);
        float *o = y + (size_t)i * ldy;
        if (beta != 0.0f)
            vi = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(out, o)),
                               vi);
        _mm512_mask_storeu_ps(o, out, vi);
    }
}

typedef void (*tile_fn)(float *y, int ldy, const unsigned char *w, int nb, int ng, int i0,
                        float beta);
#define TILE(MB, H)                                                                       \
    static TGTV void t_##MB##_##H(float *y, int ldy, const unsigned char *w, int nb,     \
                                  int ng, int i0, float beta)                           \
    { tile(MB, H, y, ldy, w, nb, ng, i0, beta); }
#define TILES_MB(H) TILE(1, H) TILE(2, H) TILE(3, H) TILE(4, H)                           \
                    TILE(5, H) TILE(6, H) TILE(7, H) TILE(8, H)
TILES_MB(2) TILES_MB(1)
static const tile_fn one_pair[8] = {t_1_2, t_2_2, t_3_2, t_4_2, t_5_2, t_6_2, t_7_2, t_8_2};
static const tile_fn lone_row[8] = {t_1_1, t_2_1, t_3_1, t_4_1, t_5_1, t_6_1, t_7_1, t_8_1};

/* registers: MB integer sums, as many F32 sums and one weight slice. One
 * pair at a time at every batch: the weights are then one ascending stream,
 * which the hardware's prefetch follows; two pairs side by side (as batches
 * up to 4 took before) ran 0.74-0.85x one pair's speed at batches 1-4.
 * Batches over 8 go in balanced chunks. */
static TGTV void product(float *y, int ldy, const void *w, int n_out, int n_in, int m,
                         float beta)
{
    int nb = n_in / CAL_Q8_0_BLOCK, ng = (nb + G - 1) / G;
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n_in);
    int nch = (m + 7) / 8;
    for (int r = 0; r < n_out;) {
        const unsigned char *wr = (const unsigned char *)w + (size_t)r * rb;
        int rows = n_out - r >= 2 ? 2 : 1;
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            tile_fn f = rows == 2 ? one_pair[mb - 1] : lone_row[mb - 1];
            f(y + (size_t)i0 * ldy + r, ldy, wr, nb, ng, i0, beta);
            i0 += mb;
        }
        r += rows;
    }
}
#endif

int cal_k_q8x_product(float *y, int ldy, const float *x, int ldx, const void *w, int n_out,
                      int n_in, int m, float beta)
{
#if HAVE_X86
    if (!cal_k_have_q8x() || n_in % CAL_Q8_0_BLOCK != 0 || n_in < 1 || m < 1)
        return -1;
    /* activation rows per round: as many as the thread's buffer holds */
    int per = XCAP / (((n_in / CAL_Q8_0_BLOCK + G - 1) / G) * G * CAL_Q8_0_BLOCK);
    if (per < 1)
        return -1;
    for (int i0 = 0; i0 < m; i0 += per) {
        int mm = m - i0 < per ? m - i0 : per;
        round_x(x + (size_t)i0 * ldx, ldx, n_in, mm);
        product(y + (size_t)i0 * ldy, ldy, w, n_out, n_in, mm, beta);
    }
    return 0;
#else
    (void)y; (void)ldy; (void)x; (void)ldx; (void)w; (void)n_out; (void)n_in; (void)m;
    (void)beta;
    return -1;
#endif
}
