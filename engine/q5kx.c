/* caliper reference engine — Q5_K rows interleaved for AVX-512 VNNI.
 *
 * Q5_K is Q4_K (engine/q4kx.c) with a fifth bit per weight: 32 bytes of qh
 * per super-block, bit j of qh[l] for element l of sub-block j. The
 * interleaved layout is q4kx.c's (per super-block of sixteen rows: the
 * three words of packed scales, d, dmin, then each 4-byte slice of the
 * nibbles with the 16 rows' slices side by side) with the qh bytes between
 * d/dmin and the nibbles, sliced the same way: slice k of qh holds the
 * fifth bits of the values in slice k of every pair's nibbles (bits 2p and
 * 2p + 1 for pair p). A value 0..31 comes out of one nibble mask and one
 * shifted, masked qh vector; vpdpbusd adds a slice of a sub-block for all
 * 16 rows at once, the 6-bit scales unpack for 16 rows as in q4kx.c and go
 * in through vpmulld, the mins through vpdpwssd, and lane l's float step is
 * row l's: the product equals the plain C one (dot_q5_k_q8) bit for bit.
 * A matrix's last n_rows % 16 rows keep the block layout; the same bytes
 * per row as the block layout. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include "engine/simd.h"
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* rows a group; byte offsets in a group's super-block: the scale words 0,
 * 1, 2 of the 16 rows, their d, their dmin, the 8 qh slices, then the 32
 * nibble slices */
enum { R = 16, OW = 0, OD = 192, ODM = 224, OH = 256, OQ = OH + 8 * 64, SB = R * 176 };

_Static_assert(OQ + 32 * 64 == SB, "a group holds 16 super-blocks' bytes");

/* Lane l of a group's interleaved bytes g (nb super-blocks) to or from one
 * row's blocks k. */
static void lane_order(cal_q5_k_block *k, unsigned char *g, int l, int nb, int to_packed)
{
#define MOVE(packed, block, n) (to_packed ? memcpy(packed, block, n) : memcpy(block, packed, n))
    for (int s = 0; s < nb; s++, g += SB) {
        for (int w = 0; w < 3; w++)
            MOVE(g + OW + 64 * w + 4 * l, k[s].scales + 4 * w, 4);
        MOVE(g + OD + 2 * l, &k[s].d, 2);
        MOVE(g + ODM + 2 * l, &k[s].dmin, 2);
        for (int sl = 0; sl < 8; sl++)
            MOVE(g + OH + 64 * sl + 4 * l, k[s].qh + 4 * sl, 4);
        for (int sl = 0; sl < 32; sl++)   /* slice sl = pair sl/8, slice sl%8 */
            MOVE(g + OQ + 64 * sl + 4 * l, k[s].qs + 4 * sl, 4);
    }
#undef MOVE
}

/* One group of 16 rows (b: the rows' blocks, bstride blocks apart) to or
 * from its interleaved bytes o, nb super-blocks. */
static void group_order(cal_q5_k_block *b, size_t bstride, unsigned char *o, int nb,
                        int to_packed)
{
    for (int l = 0; l < R; l++)
        lane_order(b + (size_t)l * bstride, o, l, nb, to_packed);
}

static void all_groups(void *src, void *dst, int n_rows, int n, int to_packed, void *scratch)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q5_K, n);
    int nb = n / CAL_QK_K;
    for (int r = 0; r + R <= n_rows; r += R) {
        unsigned char *from = (unsigned char *)src + (size_t)r * rb;
        unsigned char *to = (unsigned char *)dst + (size_t)r * rb;
        if (scratch) {
            memcpy(scratch, from, R * rb);
            from = scratch;
        }
        if (to_packed)
            group_order((cal_q5_k_block *)from, (size_t)nb, to, nb, 1);
        else
            group_order((cal_q5_k_block *)to, (size_t)nb, from, nb, 0);
    }
    int tail = n_rows % R;   /* the last rows keep the block layout */
    if (src != dst && tail)
        memcpy((char *)dst + (size_t)(n_rows - tail) * rb,
               (const char *)src + (size_t)(n_rows - tail) * rb, (size_t)tail * rb);
}

void cal_k_q5kx_pack(const void *src, void *dst, int n_rows, int n)
{
    all_groups((void *)src, dst, n_rows, n, 1, NULL);
}

void cal_k_q5kx_pack_inplace(void *m, int n_rows, int n, void *scratch)
{
    all_groups(m, m, n_rows, n, 1, scratch);
}

void cal_k_q5kx_unpack(const void *src, void *dst, int n_rows, int n)
{
    all_groups((void *)src, dst, n_rows, n, 0, NULL);
}

void cal_k_q5kx_rows(const void *m, int n_rows, int r0, int count, int n, void *out)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q5_K, n);
    int nb = n / CAL_QK_K, grouped = n_rows - n_rows % R;
    for (int r = r0; r < r0 + count; r++) {
        cal_q5_k_block *o = (cal_q5_k_block *)((char *)out + (size_t)(r - r0) * rb);
        const unsigned char *g = (const unsigned char *)m + (size_t)(r - r % R) * rb;
        if (r >= grouped) {
            memcpy(o, (const char *)m + (size_t)r * rb, rb);
            continue;
        }
        lane_order(o, (unsigned char *)g, r % R, nb, 0);   /* reads g only */
    }
}

#if HAVE_X86
#define ISAV "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c"
#define TGTV CAL_SIMD(ISAV)
#define INLV static inline __attribute__((always_inline, target(ISAV)))

enum { MBMAX = 4 };

/* the 4 bytes at p, in every lane */
INLV __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* two 16-bit sums per 32 of an activation super-block, a in the low half */
INLV __m512i bsum_pair(const cal_q8_k_block *x, int a, int b)
{
    int sa = x->bsums[2 * a] + x->bsums[2 * a + 1], sb = x->bsums[2 * b] + x->bsums[2 * b + 1];
    return _mm512_set1_epi32((int32_t)((uint32_t)(uint16_t)sa | (uint32_t)(uint16_t)sb << 16));
}

/* One group of 16 rows × MB activation rows (row i at x + i·nb): lanes of
 * s[i] = the 16 products. With one activation row, slices alternate
 * between two sums per sub-block, two dependency chains instead of one. */
INLV void tile(int MB, const unsigned char *g, const cal_q8_k_block *x, int nb, __m512 *s)
{
    const __m512i lo4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    const __m512i k6 = _mm512_set1_epi32(0x3f3f3f3f), k4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i k2 = _mm512_set1_epi32(0x03030303), byte = _mm512_set1_epi32(0xFF);
    const __m512i half = _mm512_set1_epi32(0x00FF00FF);
    enum { C = 2 };   /* chains per sub-block at MB == 1 */
    for (int i = 0; i < MB; i++)
        s[i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++, g += SB) {
        /* cal_k_q4k_scales, a lane a row */
        __m512i w0 = _mm512_loadu_si512(g + OW), w1 = _mm512_loadu_si512(g + OW + 64);
        __m512i w2 = _mm512_loadu_si512(g + OW + 128);
        __m512i sc03 = _mm512_and_si512(w0, k6);
        __m512i sc47 = _mm512_or_si512(_mm512_and_si512(w2, k4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), k2), 4));
        __m512i mn03 = _mm512_and_si512(w1, k6);
        __m512i mn47 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), k4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), k2), 4));
        /* mins as 16-bit pairs (m0, m2), (m1, m3), (m4, m6), (m5, m7) */
        __m512i m02 = _mm512_and_si512(mn03, half);
        __m512i m13 = _mm512_and_si512(_mm512_srli_epi32(mn03, 8), half);
        __m512i m46 = _mm512_and_si512(mn47, half);
        __m512i m57 = _mm512_and_si512(_mm512_srli_epi32(mn47, 8), half);
        __m512i isum[MBMAX], imin[MBMAX];
        for (int i = 0; i < MB; i++) {
            const cal_q8_k_block *xb = &x[(size_t)i * nb + b];
            __m512i t = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m02, bsum_pair(xb, 0, 2));
            t = _mm512_dpwssd_epi32(t, m13, bsum_pair(xb, 1, 3));
            t = _mm512_dpwssd_epi32(t, m46, bsum_pair(xb, 4, 6));
            imin[i] = _mm512_dpwssd_epi32(t, m57, bsum_pair(xb, 5, 7));
            isum[i] = _mm512_setzero_si512();
        }
        for (int p = 0; p < 4; p++) {   /* sub-blocks 2p (low nibbles), 2p + 1 (high) */
            __m512i lo[MBMAX][C], hi[MBMAX][C];
            for (int i = 0; i < MB; i++)
                for (int c = 0; c < C; c++)
                    lo[i][c] = hi[i][c] = _mm512_setzero_si512();
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++) {
                __m512i raw = _mm512_loadu_si512(g + OQ + 64 * (8 * p + k));
                __m512i hv = _mm512_loadu_si512(g + OH + 64 * k);
                /* bits 2p and 2p + 1 to bit 4 of each byte (32-bit shifts:
                 * the mask keeps each byte's own bit) */
                __m512i h0 = p < 3 ? _mm512_slli_epi32(hv, 4 - 2 * p) : _mm512_srli_epi32(hv, 2);
                __m512i h1 = p < 2 ? _mm512_slli_epi32(hv, 3 - 2 * p)
                                   : _mm512_srli_epi32(hv, 2 * p - 3);
                __m512i ql = _mm512_or_si512(_mm512_and_si512(raw, lo4), _mm512_and_si512(h0, b4));
                __m512i qh = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(raw, 4), lo4),
                                             _mm512_and_si512(h1, b4));
                int c = MB == 1 ? k & 1 : 0;
                for (int i = 0; i < MB; i++) {
                    const int8_t *q8 = x[(size_t)i * nb + b].qs + 64 * p + 4 * k;
                    lo[i][c] = _mm512_dpbusd_epi32(lo[i][c], ql, bcast4(q8));
                    hi[i][c] = _mm512_dpbusd_epi32(hi[i][c], qh, bcast4(q8 + 32));
                }
            }
            __m512i src = p < 2 ? sc03 : sc47;
            int sh = 16 * (p % 2);
            __m512i se = _mm512_and_si512(_mm512_srli_epi32(src, sh), byte);
            __m512i so = _mm512_and_si512(_mm512_srli_epi32(src, sh + 8), byte);
            for (int i = 0; i < MB; i++) {
                __m512i l = lo[i][0], h = hi[i][0];
                if (MB == 1) {
                    l = _mm512_add_epi32(l, lo[i][1]);
                    h = _mm512_add_epi32(h, hi[i][1]);
                }
                isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(
                    _mm512_mullo_epi32(l, se), _mm512_mullo_epi32(h, so)));
            }
        }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + OD)));
        __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + ODM)));
        for (int i = 0; i < MB; i++) {
            __m512 t = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[i])),
                                     _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(imin[i])));
            s[i] = _mm512_add_ps(s[i], _mm512_mul_ps(_mm512_set1_ps(x[(size_t)i * nb + b].d), t));
        }
    }
}

typedef void (*tile_fn)(const unsigned char *g, const cal_q8_k_block *x, int nb, __m512 *s);
#define TILE(MB)                                                                        \
    static TGTV void t_##MB(const unsigned char *g, const cal_q8_k_block *x, int nb, __m512 *s) \
    { tile(MB, g, x, nb, s); }
TILE(1) TILE(2) TILE(3) TILE(4)
static const tile_fn tiles[MBMAX] = {t_1, t_2, t_3, t_4};

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

/* groups of 16 rows × activation rows in balanced chunks of at most MBMAX */
static void product(float *y, int ldy, const cal_q8_k_block *xq, const unsigned char *w,
                    int groups, int nb, int m, float beta)
{
    int nch = (m + MBMAX - 1) / MBMAX;
    for (int gi = 0; gi < groups; gi++)
        for (int c = 0, i0 = 0; c < nch; c++) {
            int mb = (m - i0) / (nch - c);
            __m512 s[MBMAX];
            tiles[mb - 1](w + (size_t)gi * nb * SB, xq + (size_t)i0 * nb, nb, s);
            store(y + (size_t)i0 * ldy + (size_t)gi * R, ldy, s, mb, beta);
            i0 += mb;
        }
}
#endif

int cal_k_q5kx_apply(float *y, int ldy, const cal_q8_k_block *xq, const void *w, int n_out,
                     int n_in, int m, float beta)
{
#if HAVE_X86
    if (!cal_k_have_q8x() || n_in < CAL_QK_K || n_in % CAL_QK_K != 0 || n_out < 1 || m < 1)
        return -1;
    int nb = n_in / CAL_QK_K, groups = n_out / R, tail = n_out % R;
    product(y, ldy, xq, w, groups, nb, m, beta);
    if (tail)
        cal_k_kq_apply(CAL_DTYPE_Q5_K, y + (size_t)groups * R, ldy, xq,
                       (const char *)w + (size_t)groups * R * cal_k_row_bytes(CAL_DTYPE_Q5_K, n_in),
                       tail, n_in, m, beta);
    return 0;
#else
    (void)y; (void)ldy; (void)xq; (void)w; (void)n_out; (void)n_in; (void)m; (void)beta;
    return -1;
#endif
}
