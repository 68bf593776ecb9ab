/* caliper reference engine — Q6_K rows interleaved for AVX-512 VNNI.
 *
 * A Q6_K super-block (256 weights in 210 bytes: 128 bytes of low nibbles,
 * 64 of high bit pairs, 16 int8 sub-block scales, an F16 d) taken one row
 * at a time (kquants.c) ends every super-block in horizontal sums, and its
 * 6-bit values are put together for that row alone.
 *
 * The interleaved layout holds the same bytes for sixteen rows at a time,
 * super-block by super-block: the 16 rows' scales in four vectors (scales
 * 4v..4v+3 of row l in lane l of vector v), their d, then each 4-byte slice
 * of ql and of qh with the 16 rows' slices side by side. A value's low 4
 * bits are a nibble of an ql slice and its high 2 a bit pair of a qh slice
 * (bits 2g, 2g+1 for group g of its half), so a slice of 4 values of all 16
 * rows comes out of one ql and one qh vector in four operations, and one
 * vpdpbusd adds it against the activations' 4 bytes broadcast. Each
 * sub-block's sum starts at −32·Σq8 of its 16 activations (the offset
 * taken out exactly), takes its row's int8 scale through vpmulld, and lane
 * l's float step is row l's: every integer is the one dot_q6_k_q8 forms and
 * the float step is its sequence of operations, so the product equals the
 * plain C one bit for bit. A matrix's last n_rows % 16 rows keep the block
 * layout; the same bytes per row as the block layout. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include "engine/simd.h"
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* rows a group; byte offsets in a group's super-block: the scales (4
 * vectors), d, the 32 ql slices, the 16 qh slices */
enum { R = 16, OSC = 0, OD = 256, OL = 288, OH = OL + 32 * 64, SB = R * 210 };

_Static_assert(OH + 16 * 64 == SB, "a group holds 16 super-blocks' bytes");

/* Lane l of a group's interleaved bytes g (nb super-blocks) to or from one
 * row's blocks k. */
static void lane_order(cal_q6_k_block *k, unsigned char *g, int l, int nb, int to_packed)
{
#define MOVE(packed, block, n) (to_packed ? memcpy(packed, block, n) : memcpy(block, packed, n))
    for (int s = 0; s < nb; s++, g += SB) {
        for (int v = 0; v < 4; v++)
            MOVE(g + OSC + 64 * v + 4 * l, k[s].scales + 4 * v, 4);
        MOVE(g + OD + 2 * l, &k[s].d, 2);
        for (int sl = 0; sl < 32; sl++)
            MOVE(g + OL + 64 * sl + 4 * l, k[s].ql + 4 * sl, 4);
        for (int sl = 0; sl < 16; sl++)
            MOVE(g + OH + 64 * sl + 4 * l, k[s].qh + 4 * sl, 4);
    }
#undef MOVE
}

static void all_groups(void *src, void *dst, int n_rows, int n, int to_packed, void *scratch)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q6_K, n);
    int nb = n / CAL_QK_K;
    for (int r = 0; r + R <= n_rows; r += R) {
        unsigned char *from = (unsigned char *)src + (size_t)r * rb;
        unsigned char *to = (unsigned char *)dst + (size_t)r * rb;
        if (scratch) {
            memcpy(scratch, from, R * rb);
            from = scratch;
        }
        for (int l = 0; l < R; l++) {
            if (to_packed)
                lane_order((cal_q6_k_block *)(from + (size_t)l * rb), to, l, nb, 1);
            else
                lane_order((cal_q6_k_block *)(to + (size_t)l * rb), from, l, nb, 0);
        }
    }
    int tail = n_rows % R;   /* the last rows keep the block layout */
    if (src != dst && tail)
        memcpy((char *)dst + (size_t)(n_rows - tail) * rb,
               (const char *)src + (size_t)(n_rows - tail) * rb, (size_t)tail * rb);
}

void cal_k_q6kx_pack(const void *src, void *dst, int n_rows, int n)
{
    all_groups((void *)src, dst, n_rows, n, 1, NULL);
}

void cal_k_q6kx_pack_inplace(void *m, int n_rows, int n, void *scratch)
{
    all_groups(m, m, n_rows, n, 1, scratch);
}

void cal_k_q6kx_unpack(const void *src, void *dst, int n_rows, int n)
{
    all_groups((void *)src, dst, n_rows, n, 0, NULL);
}

void cal_k_q6kx_rows(const void *m, int n_rows, int r0, int count, int n, void *out)
{
    size_t rb = cal_k_row_bytes(CAL_DTYPE_Q6_K, n);
    int nb = n / CAL_QK_K, grouped = n_rows - n_rows % R;
    for (int r = r0; r < r0 + count; r++) {
        cal_q6_k_block *o = (cal_q6_k_block *)((char *)out + (size_t)(r - r0) * rb);
        if (r >= grouped) {
            memcpy(o, (const char *)m + (size_t)r * rb, rb);
            continue;
        }
        lane_order(o, (unsigned char *)m + (size_t)(r - r % R) * rb, r % R, nb, 0);
    }
}

#if HAVE_X86
#define ISAV "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c"
#define TGTV CAL_SIMD(ISAV)
#define INLV static inline __attribute__((always_inline, target(ISAV)))

enum { MBMAX = 4 };

INLV __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* qh's bit pair 2g, 2g + 1 of every byte to bits 4, 5 (32-bit shifts: the
 * mask keeps each byte's own bits) */
INLV __m512i high2(__m512i qh, int g)
{
    __m512i v = g < 2 ? _mm512_slli_epi32(qh, 4 - 2 * g) : _mm512_srli_epi32(qh, 2 * g - 4);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x30));
}

/* One group of 16 rows × MB activation rows (row i at x + i·nb): lanes of
 * s[i] = the 16 products. Sub-block j = 8h + 2g + u of a super-block is
 * group g's values 16u .. 16u + 15 in half h: slices t = 4u .. 4u + 3 of
 * ql slice 16h + 8(g % 2) + t (low nibbles for g < 2, high for g ≥ 2) and
 * qh slice 8h + t (bits 2g, 2g + 1). Groups g and g + 2 share their ql
 * slices, so they go together: each slice of ql and qh is loaded once for
 * both. */
INLV void tile(int MB, const unsigned char *g, const cal_q8_k_block *x, int nb, __m512 *s)
{
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < MB; i++)
        s[i] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++, g += SB) {
        __m512i isum[MBMAX];
        for (int i = 0; i < MB; i++)
            isum[i] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++)
            for (int u = 0; u < 2; u++)
                for (int gp = 0; gp < 2; gp++) {
                    int j0 = 8 * h + 2 * gp + u, j1 = j0 + 4;   /* groups gp, gp + 2 */
                    __m512i a0[MBMAX], a1[MBMAX];
                    for (int i = 0; i < MB; i++) {
                        const cal_q8_k_block *xb = &x[(size_t)i * nb + b];
                        a0[i] = _mm512_set1_epi32(-32 * xb->bsums[j0]);
                        a1[i] = _mm512_set1_epi32(-32 * xb->bsums[j1]);
                    }
                    _Pragma("GCC unroll 4")
                    for (int t = 4 * u; t < 4 * u + 4; t++) {
                        __m512i ql = _mm512_loadu_si512(g + OL + 64 * (16 * h + 8 * gp + t));
                        __m512i qh = _mm512_loadu_si512(g + OH + 64 * (8 * h + t));
                        __m512i q0 = _mm512_or_si512(_mm512_and_si512(ql, lo4), high2(qh, gp));
                        __m512i q1 = _mm512_or_si512(
                            _mm512_and_si512(_mm512_srli_epi32(ql, 4), lo4), high2(qh, gp + 2));
                        for (int i = 0; i < MB; i++) {
                            const int8_t *q8 = x[(size_t)i * nb + b].qs + 128 * h + 4 * t;
                            a0[i] = _mm512_dpbusd_epi32(a0[i], q0, bcast4(q8 + 32 * gp));
                            a1[i] = _mm512_dpbusd_epi32(a1[i], q1, bcast4(q8 + 32 * (gp + 2)));
                        }
                    }
                    /* row l's int8 scale j: byte j % 4 of lane l of vector j / 4 */
                    __m512i v0 = _mm512_loadu_si512(g + OSC + 64 * (j0 / 4));
                    __m512i v1 = _mm512_loadu_si512(g + OSC + 64 * (j1 / 4));
                    __m512i s0 = _mm512_srai_epi32(_mm512_slli_epi32(v0, 24 - 8 * (j0 % 4)), 24);
                    __m512i s1 = _mm512_srai_epi32(_mm512_slli_epi32(v1, 24 - 8 * (j1 % 4)), 24);
                    for (int i = 0; i < MB; i++)
                        isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(
                            _mm512_mullo_epi32(a0[i], s0), _mm512_mullo_epi32(a1[i], s1)));
                }
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + OD)));
        for (int i = 0; i < MB; i++) {
            /* dot_q6_k_q8's step: x.d · (d · isum), then added */
            __m512 t = _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[i]));
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

int cal_k_q6kx_apply(float *y, int ldy, const cal_q8_k_block *xq, const void *w, int n_out,
                     int n_in, int m, float beta)
{
#if HAVE_X86
    if (!cal_k_have_q8x() || n_in < CAL_QK_K || n_in % CAL_QK_K != 0 || n_out < 1 || m < 1)
        return -1;
    int nb = n_in / CAL_QK_K, groups = n_out / R, tail = n_out % R;
    product(y, ldy, xq, w, groups, nb, m, beta);
    if (tail)
        cal_k_kq_apply(CAL_DTYPE_Q6_K, y + (size_t)groups * R, ldy, xq,
                       (const char *)w + (size_t)groups * R * cal_k_row_bytes(CAL_DTYPE_Q6_K, n_in),
                       tail, n_in, m, beta);
    return 0;
#else
    (void)y; (void)ldy; (void)xq; (void)w; (void)n_out; (void)n_in; (void)m; (void)beta;
    return -1;
#endif
}
