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
 * Rows go in quads: the two pairs of four rows take turns group by group,
 * so that a tile of both pairs (which loads each activation slice once for
 * two weight slices) reads one ascending stream; a matrix's last one to
 * three rows go as a pair and a lone row.
 *
 * The same bytes per row as the block layout (34 per 32 weights); a packed
 * row unpacks to the original bit for bit. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include "engine/simd.h"
#include "engine/tbuf.h"
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

enum { G = 8, SLICES = CAL_Q8_0_BLOCK / 4 };

/* blocks in the group that starts at block b0 of a row of nb (all groups
 * before the last are whole) */
static int group_blocks(int nb, int b0) { return nb - b0 < G ? nb - b0 : G; }

/* Activations rounded to Q8_0 and laid out to meet a pair of rows: per
 * group of g blocks, each slice k holds the g blocks' slices twice (lanes
 * 0..g−1 and g..2g−1), and so do the block scales (F32) and the starting
 * values −128·Σq; lanes past 2g are zero. Rounded once per product, for
 * every thread that takes a share of its rows (cal_k_q8x_round). */
typedef struct xgroup {
    int8_t q[SLICES][64];
    float d[2 * G];
    int32_t c[2 * G];
} xgroup;

static int x_groups(int n_in) { return (n_in / CAL_Q8_0_BLOCK + G - 1) / G; }

size_t cal_k_q8x_xbytes(int n_in, int m)
{
    if (n_in < 1 || n_in % CAL_Q8_0_BLOCK != 0 || m < 1)
        return 0;
    return (size_t)m * x_groups(n_in) * sizeof(xgroup);
}

/* One unit of P pairs of h rows (P = 2, h = 2: a quad; P = 1: a pair, or
 * a last odd row as a pair of one): per group of g ≤ 8 blocks, for each
 * pair in turn, for each slice k the pair's g + g 4-byte slices (row 0's
 * blocks, then row 1's), then the pair's g + g scales. */
static void unit_order(const cal_q8_0_block *b, size_t bstride, int P, int h,
                       unsigned char *o, int n, int to_packed)
{
    int nb = n / CAL_Q8_0_BLOCK;
    for (int b0 = 0; b0 < nb; b0 += G) {
        int g = group_blocks(nb, b0);
        for (int p = 0; p < P; p++) {
            const cal_q8_0_block *pb = b + (size_t)p * h * bstride;
            for (int k = 0; k < SLICES; k++)
                for (int r = 0; r < h; r++)
                    for (int l = 0; l < g; l++, o += 4) {
                        int8_t *q = (int8_t *)pb[(size_t)r * bstride + b0 + l].qs + 4 * k;
                        for (int t = 0; t < 4; t++) {
                            if (to_packed)
                                o[t] = (unsigned char)q[t] ^ 0x80u;
                            else
                                q[t] = (int8_t)(o[t] ^ 0x80u);
                        }
                    }
            for (int r = 0; r < h; r++)
                for (int l = 0; l < g; l++, o += 2) {
                    uint16_t *d = (uint16_t *)&pb[(size_t)r * bstride + b0 + l].d;
                    if (to_packed)
                        memcpy(o, d, 2);
                    else
                        memcpy(d, o, 2);
                }
        }
    }
}

/* quads while four rows are left, then a pair and a lone row; with
 * scratch (four rows), each unit is copied there first, so that src and
 * dst may be the same matrix */
static void all_units(const void *src, void *dst, int n_rows, int n, int to_packed,
                      void *scratch)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n), nb = (size_t)n / CAL_Q8_0_BLOCK;
    for (int r = 0; r < n_rows;) {
        int left = n_rows - r, P = left >= 4 ? 2 : 1, h = left >= 2 ? 2 : 1;
        const unsigned char *from = (const unsigned char *)src + (size_t)r * rb;
        unsigned char *to = (unsigned char *)dst + (size_t)r * rb;
        if (scratch) {
            memcpy(scratch, from, (size_t)P * h * rb);
            from = scratch;
        }
        if (to_packed)
            unit_order((const cal_q8_0_block *)from, nb, P, h, to, n, 1);
        else
            unit_order((const cal_q8_0_block *)to, nb, P, h, (unsigned char *)from, n, 0);
        r += P * h;
    }
}

void cal_k_q8x_pack(const void *src, void *dst, int n_rows, int n)
{
    all_units(src, dst, n_rows, n, 1, NULL);
}

void cal_k_q8x_pack_inplace(void *m, int n_rows, int n, void *scratch)
{
    all_units(m, m, n_rows, n, 1, scratch);
}

void cal_k_q8x_unpack(const void *src, void *dst, int n_rows, int n)
{
    all_units(src, dst, n_rows, n, 0, NULL);
}

/* Row rr of the unit at u (P pairs of h rows), in blocks. */
static void unit_row(const unsigned char *u, int P, int h, int rr, int n, cal_q8_0_block *out)
{
    int nb = n / CAL_Q8_0_BLOCK, p = rr / h, r = rr % h;
    for (int b0 = 0; b0 < nb; b0 += G) {
        int g = group_blocks(nb, b0);
        size_t pair = (size_t)h * g * (CAL_Q8_0_BLOCK + 2);
        const unsigned char *ps = u + p * pair;
        for (int l = 0; l < g; l++) {
            cal_q8_0_block *o = &out[b0 + l];
            for (int k = 0; k < SLICES; k++) {
                uint32_t v; /* four weights at once, the sign bits flipped back */
                memcpy(&v, ps + ((size_t)k * h * g + (size_t)r * g + l) * 4, 4);
                v ^= 0x80808080u;
                memcpy(&o->qs[4 * k], &v, 4);
            }
            memcpy(&o->d, ps + (size_t)SLICES * h * g * 4 + ((size_t)r * g + l) * 2, 2);
        }
        u += P * pair;
    }
}

void cal_k_q8x_rows(const void *m, int n_rows, int r0, int count, int n, void *out)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n);
    int quads = n_rows & ~3, left = n_rows - quads;
    for (int r = r0; r < r0 + count; r++) {
        int u, P = 1, h = 1;
        if (r < quads) {
            u = r & ~3, P = 2, h = 2;
        } else if (left >= 2 && r < quads + 2) {
            u = quads, h = 2;
        } else {
            u = left >= 2 ? quads + 2 : quads;
        }
        unit_row((const unsigned char *)m + (size_t)u * rb, P, h, r - u, n,
                 (cal_q8_0_block *)((char *)out + (size_t)(r - r0) * rb));
    }
}

#if HAVE_X86
#define TGTV CAL_SIMD("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")
#define INLV static inline __attribute__((always_inline)) TGTV


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

static TGTV void round_x(const float *x, int ldx, int n_in, int m, xgroup *xg)
{
    int nb = n_in / CAL_Q8_0_BLOCK, ng = x_groups(n_in);
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

/* the weights this many bytes ahead are prefetched (the units are one
 * ascending stream) */
#ifndef CAL_Q8X_PF
#define CAL_Q8X_PF 8192
#endif

/* activation rows a tile: 2 pairs × 4 integer sums and as many F32 sums
 * in registers (a matrix's last 1-3 rows take the same chunks) */
enum { MBMAX = 4 };

/* The sums of the halves (lanes 0..7, 8..15: two weight rows) of 4
 * accumulators at once, in 13 operations rather than 8 horizontal
 * reductions: adjacent accumulators' lanes meet in unpacks, then their
 * 64-bit pairs, then 128-bit quarters. Lane 2i + r of the result (i < 4)
 * is accumulator i's half r. */
INLV __m512 sum_halves(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    /* per quarter: a0's and a1's lanes paired, and a2's and a3's */
    __m512d u = _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(a0, a1),
                                               _mm512_unpackhi_ps(a0, a1)));
    __m512d v = _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(a2, a3),
                                               _mm512_unpackhi_ps(a2, a3)));
    /* per quarter: the 4 accumulators' sums of it */
    __m512 l2 = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(u, v)),
                              _mm512_castpd_ps(_mm512_unpackhi_pd(u, v)));
    /* quarters 0+1 are row 0, 2+3 row 1: [0-3 r0 | 0-3 r1 | the same again] */
    __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(l2, l2, 0x88),
                             _mm512_shuffle_f32x4(l2, l2, 0xdd));
    return _mm512_permutexvar_ps(
        _mm512_set_epi32(15, 11, 14, 10, 13, 9, 12, 8, 7, 3, 6, 2, 5, 1, 4, 0), q);
}

/* One unit of P pairs of rows (h = 2, or 1 for a last odd row) × MB
 * activation rows. Per group: 8 vpdpbusd into P·MB integer sums (lane =
 * one block of one row), each activation slice loaded once for the P
 * weight slices, then per sum
 * one conversion and one multiply-add with the lanes' scales dw·dx. Row 0 is
 * in lanes 0..7 and row 1 in 8..15, except in a last short group (g < 8),
 * whose row 1 at lanes g..2g−1 is moved up to 8 first. */
INLV void tile(int P, int MB, int h, float *y, int ldy, const unsigned char *w, int nb, int ng,
               const xgroup *xg, float beta)
{
    __m512 acc[2][MBMAX];
    for (int p = 0; p < P; p++)
        for (int i = 0; i < MBMAX; i++)
            acc[p][i] = _mm512_setzero_ps();
    const unsigned char *gp = w;       /* this group of the unit */
    for (int gi = 0; gi < ng; gi++) {
        int g = group_blocks(nb, gi * G);
        __mmask16 lanes = (__mmask16)((1u << (h * g)) - 1);
        size_t gbytes = (size_t)h * g * (CAL_Q8_0_BLOCK + 2);   /* one pair's */
        for (size_t o = 0; o < P * gbytes; o += 64)
            _mm_prefetch((const char *)gp + CAL_Q8X_PF + o, _MM_HINT_T0);
        const xgroup *xr[MBMAX];
        __m512i s[2][MBMAX];
        for (int i = 0; i < MB; i++) {
            xr[i] = &xg[(size_t)i * ng + gi];
            for (int p = 0; p < P; p++)
                s[p][i] = _mm512_load_si512(xr[i]->c);
        }
        _Pragma("GCC unroll 8")
        for (int k = 0; k < SLICES; k++) {
            __m512i wk[2];
            for (int p = 0; p < P; p++) {
                wk[p] = _mm512_maskz_loadu_epi32(lanes, gp + p * gbytes +
                                                            (size_t)k * h * g * 4);
                __asm__("" : "+v"(wk[p]));   /* one load, not one per activation row */
            }
            for (int i = 0; i < MB; i++) {
                __m512i xk = _mm512_load_si512(xr[i]->q[k]);
                if (P > 1)
                    __asm__("" : "+v"(xk));  /* one load for both pairs */
                for (int p = 0; p < P; p++)
                    s[p][i] = _mm512_dpbusd_epi32(s[p][i], wk[p], xk);
            }
        }
        for (int p = 0; p < P; p++) {
            /* masked to the pair's lanes: the others' sums meet a zero scale */
            __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                lanes, gp + p * gbytes + (size_t)h * g * CAL_Q8_0_BLOCK));
            if (g == G) {
                for (int i = 0; i < MB; i++)
                    acc[p][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[p][i]),
                                                _mm512_mul_ps(dw, _mm512_load_ps(xr[i]->d)),
                                                acc[p][i]);
            } else {
                __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2,
                                                1, 0);
                __m512i up = _mm512_mask_add_epi32(iota, 0xff00, iota, _mm512_set1_epi32(g - 8));
                __mmask16 both = (__mmask16)(((1u << g) - 1) * 0x0101u);
                for (int i = 0; i < MB; i++) {
                    __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[p][i]),
                                             _mm512_mul_ps(dw, _mm512_load_ps(xr[i]->d)));
                    acc[p][i] = _mm512_add_ps(acc[p][i], _mm512_maskz_permutexvar_ps(both, up, t));
                }
            }
        }
        gp += P * gbytes;
    }
    __mmask16 out = (__mmask16)((1u << h) - 1);
    for (int p = 0; p < P; p++) {
        __m512 v = sum_halves(acc[p][0], acc[p][1], acc[p][2], acc[p][3]);
        for (int i = 0; i < MB; i++) {
            __m512 vi = _mm512_permutexvar_ps(
                _mm512_zextsi128_si512(_mm_setr_epi32(2 * i, 2 * i + 1, 0, 0)), v);
            float *o = y + (size_t)i * ldy + 2 * p;
            if (beta != 0.0f)
                vi = _mm512_add_ps(
                    _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(out, o)), vi);
            _mm512_mask_storeu_ps(o, out, vi);
        }
    }
}

typedef void (*tile_fn)(float *y, int ldy, const unsigned char *w, int nb, int ng,
                        const xgroup *xg, float beta);
#define TILE(P, MB, H)                                                                    \
    static TGTV void t_##P##_##MB##_##H(float *y, int ldy, const unsigned char *w, int nb, \
                                        int ng, const xgroup *xg, float beta)             \
    { tile(P, MB, H, y, ldy, w, nb, ng, xg, beta); }
#define TILES4(P, H) TILE(P, 1, H) TILE(P, 2, H) TILE(P, 3, H) TILE(P, 4, H)
TILES4(1, 2) TILES4(1, 1) TILES4(2, 2)
static const tile_fn one_pair[MBMAX] = {t_1_1_2, t_1_2_2, t_1_3_2, t_1_4_2};
static const tile_fn lone_row[MBMAX] = {t_1_1_1, t_1_2_1, t_1_3_1, t_1_4_1};
static const tile_fn two_pairs[MBMAX] = {t_2_1_2, t_2_2_2, t_2_3_2, t_2_4_2};

/* Tiles of rows × activation rows, the activation rows in balanced chunks
 * of at most MBMAX. */
static void chunks(tile_fn const *f, float *y, int ldy, const unsigned char *w, int nb, int ng,
                   const xgroup *xg, int m, float beta)
{
    int nch = (m + MBMAX - 1) / MBMAX;
    for (int c = 0, i0 = 0; c < nch; c++) {
        int mb = (m - i0) / (nch - c);
        f[mb - 1](y + (size_t)i0 * ldy, ldy, w, nb, ng, xg + (size_t)i0 * ng, beta);
        i0 += mb;
    }
}

/* A quad's two pairs go together at every batch, 4 activation rows a chunk
 * (2 × 4 integer sums and as many F32 sums in registers): each activation
 * slice is loaded once for two weight slices. Against one pair at a time
 * (8 rows a chunk) on the pairs' layout, alternated in one process,
 * 4096×768 from memory ran 1.02-1.04x at batch 3, 1.05 at 4, 1.23 at 8
 * and 1.03 at 16, the 32000×768 logits 1.15 and 768×2048 1.12 at 8, and
 * 0.98-1.09 at batches 1-2. A whole base Q8_0 step, two engines
 * alternated (an A/A run: 0.97-0.99), seven runs: batch 8 1.05-1.07x in
 * five and 0.93-0.95 in two, batch 1 0.93-1.04, batch 16 1.03-1.08. */
static TGTV void product(float *y, int ldy, const xgroup *xg, const void *w, int n_out,
                         int n_in, int m, float beta)
{
    int nb = n_in / CAL_Q8_0_BLOCK, ng = x_groups(n_in);
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q8_0, n_in);
    for (int r = 0; r < n_out;) {
        const unsigned char *wr = (const unsigned char *)w + (size_t)r * rb;
        int left = n_out - r;
        if (left >= 4) {
            chunks(two_pairs, y + r, ldy, wr, nb, ng, xg, m, beta);
        } else {
            chunks(left >= 2 ? one_pair : lone_row, y + r, ldy, wr, nb, ng, xg, m, beta);
            if (left == 3)
                chunks(lone_row, y + r + 2, ldy, wr + 2 * rb, nb, ng, xg, m, beta);
        }
        r += left >= 4 ? 4 : left;
    }
}
#endif

int cal_k_q8x_round(const float *x, int ldx, int n_in, int m, void *xq)
{
#if HAVE_X86
    if (!cal_k_have_q8x() || !cal_k_q8x_xbytes(n_in, m) || !xq)
        return -1;
    round_x(x, ldx, n_in, m, xq);
    return 0;
#else
    (void)x; (void)ldx; (void)n_in; (void)m; (void)xq;
    return -1;
#endif
}

int cal_k_q8x_apply(float *y, int ldy, const void *xq, const void *w, int n_out, int n_in,
                    int m, float beta)
{
#if HAVE_X86
    if (!cal_k_have_q8x() || !cal_k_q8x_xbytes(n_in, m) || !xq || n_out < 1)
        return -1;
    product(y, ldy, xq, w, n_out, n_in, m, beta);
    return 0;
#else
    (void)y; (void)ldy; (void)xq; (void)w; (void)n_out; (void)n_in; (void)m; (void)beta;
    return -1;
#endif
}

/* the activation rows one call rounds at a time into the thread's buffer */
enum { XCAP = 16 * 8192 };

int cal_k_q8x_product(float *y, int ldy, const float *x, int ldx, const void *w, int n_out,
                      int n_in, int m, float beta)
{
    if (!cal_k_have_q8x() || !cal_k_q8x_xbytes(n_in, m) || n_out < 1)
        return -1;
    int per = XCAP / (x_groups(n_in) * G * CAL_Q8_0_BLOCK);
    xgroup *xg_own = cal_tbuf(CAL_TBUF_Q8X, sizeof *xg_own * (XCAP / (G * CAL_Q8_0_BLOCK)));
    if (per < 1 || !xg_own)
        return -1;
    for (int i0 = 0; i0 < m; i0 += per) {
        int mm = m - i0 < per ? m - i0 : per;
        cal_k_q8x_round(x + (size_t)i0 * ldx, ldx, n_in, mm, xg_own);
        cal_k_q8x_apply(y + (size_t)i0 * ldy, ldy, xg_own, w, n_out, n_in, mm, beta);
    }
    return 0;
}
