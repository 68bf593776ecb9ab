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

/* pairs this many bytes ahead are prefetched (in whole pairs; a tile's
 * pairs are contiguous) */
#ifndef CAL_Q8X_PF
#define CAL_Q8X_PF 8192
#endif

/* P pairs of rows (h rows each: 2, or 1 for a last odd row) × MB activation
 * rows. Per group: 8 vpdpbusd into P·MB integer sums (lane = one block of
 * one row), then per sum one conversion and one multiply-add with the
 * lanes' scales dw·dx. Whole groups keep row 0 in lanes 0..7 and row 1 in
 * 8..15 over the row; a last short group (g < 8) puts row 1 at g..2g−1 and
 * is summed on its own. */
INLV void tile(int P, int MB, int h, float *y, int ldy, const unsigned char *w, size_t rb,
               int nb, int ng, int i0, float beta)
{
    __m512 acc[4][8];
    float tail[4][8][2];
    for (int p = 0; p < P; p++)
        for (int i = 0; i < MB; i++) {
            acc[p][i] = _mm512_setzero_ps();
            tail[p][i][0] = tail[p][i][1] = 0;
        }
    size_t pb = 2 * rb;                /* bytes of a pair */
    const unsigned char *gp = w;       /* this group in the tile's first pair */
    size_t ahead = (CAL_Q8X_PF + pb - 1) / pb * pb;
    for (int gi = 0; gi < ng; gi++) {
        int g = group_blocks(nb, gi * G);
        __mmask16 lanes = (__mmask16)((1u << (h * g)) - 1);
        size_t gbytes = (size_t)h * g * (CAL_Q8_0_BLOCK + 2);
        for (int p = 0; p < P; p++)
            for (size_t o = 0; o < gbytes; o += 64)
                _mm_prefetch((const char *)gp + (size_t)p * pb + ahead + o, _MM_HINT_T0);
        __m512i s[4][8];
        for (int p = 0; p < P; p++)
            for (int i = 0; i < MB; i++)
                s[p][i] = _mm512_load_si512(xg[(size_t)(i0 + i) * ng + gi].c);
        for (int k = 0; k < SLICES; k++) {
            __m512i wk[4];
            for (int p = 0; p < P; p++) {
                wk[p] = _mm512_maskz_loadu_epi32(lanes, gp + (size_t)p * pb +
                                                            (size_t)k * h * g * 4);
                __asm__("" : "+v"(wk[p]));
            }
            for (int i = 0; i < MB; i++) {
                __m512i xk = _mm512_load_si512(xg[(size_t)(i0 + i) * ng + gi].q[k]);
                for (int p = 0; p < P; p++)
                    s[p][i] = _mm512_dpbusd_epi32(s[p][i], wk[p], xk);
            }
        }
        for (int p = 0; p < P; p++) {
            /* masked to the pair's lanes: the others' sums meet a zero scale */
            __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                lanes, gp + (size_t)p * pb + (size_t)h * g * CAL_Q8_0_BLOCK));
            for (int i = 0; i < MB; i++) {
                __m512 dx = _mm512_load_ps(xg[(size_t)(i0 + i) * ng + gi].d);
                __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[p][i]), _mm512_mul_ps(dw, dx));
                if (g == G) {
                    acc[p][i] = _mm512_add_ps(acc[p][i], t);
                } else {
                    __mmask16 r0 = (__mmask16)((1u << g) - 1);
                    tail[p][i][0] += _mm512_mask_reduce_add_ps(r0, t);
                    tail[p][i][1] += _mm512_mask_reduce_add_ps((__mmask16)(r0 << g), t);
                }
            }
        }
        gp += gbytes;
    }
    for (int i = 0; i < MB; i++)
        for (int p = 0; p < P; p++)
            for (int r = 0; r < h; r++) {
                float v = _mm512_mask_reduce_add_ps(r ? 0xff00 : 0x00ff, acc[p][i]) +
                          tail[p][i][r];
                float *o = y + (size_t)i * ldy + 2 * p + r;
                *o = beta == 0.0f ? v : beta * *o + v;
            }
}

typedef void (*tile_fn)(float *y, int ldy, const unsigned char *w, size_t rb, int nb, int ng,
                        int i0, float beta);
#define TILE(P, MB, H)                                                                    \
    static TGTV void t_##P##_##MB##_##H(float *y, int ldy, const unsigned char *w,        \
                                        size_t rb, int nb, int ng, int i0, float beta)    \
    { tile(P, MB, H, y, ldy, w, rb, nb, ng, i0, beta); }
#define TILES_MB(P, H) TILE(P, 1, H) TILE(P, 2, H) TILE(P, 3, H) TILE(P, 4, H)             \
                       TILE(P, 5, H) TILE(P, 6, H) TILE(P, 7, H) TILE(P, 8, H)
TILES_MB(1, 2) TILES_MB(1, 1)
static const tile_fn one_pair[8] = {t_1_1_2, t_1_2_2, t_1_3_2, t_1_4_2,
                                    t_1_5_2, t_1_6_2, t_1_7_2, t_1_8_2};
static const tile_fn lone_row[8] = {t_1_1_1, t_1_2_1, t_1_3_1, t_1_4_1,
                                    t_1_5_1, t_1_6_1, t_1_7_1, t_1_8_1};

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
            f(y + (size_t)i0 * ldy + r, ldy, wr, rb, nb, ng, i0, beta);
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
