/* caliper reference engine — one interface to every weight format's product
 * at any batch size: how a format's matrices are held on this CPU (the
 * block layout of GGUF files, or rows interleaved for an AVX-512 VNNI
 * kernel), how its activations are rounded, and the product on those
 * rounded activations, for decode batches and prefill alike. The kernels
 * themselves are in q8x.c, q32.c, kquants.c, q4kx.c, q5kx.c and q6kx.c;
 * contracts in kernels.h. */
#include "engine/kernels.h"
#include "engine/engine.h"
#include <string.h>

/* the formats with an interleaved VNNI kernel */
static int has_x(int dtype)
{
    return dtype == CAL_DTYPE_Q8_0 || cal_k_is_q32(dtype) || dtype == CAL_DTYPE_Q4_K ||
           dtype == CAL_DTYPE_Q5_K || dtype == CAL_DTYPE_Q6_K;
}

int cal_k_mm_packed(int dtype)
{
    return has_x(dtype) && cal_k_have_q8x();
}

/* rows a packed unit of the format spans: its pack_inplace scratch */
static int unit_rows(int dtype)
{
    return dtype == CAL_DTYPE_Q8_0 ? 4 : 16;
}

size_t cal_k_mm_pack_scratch(int dtype, int n_in)
{
    return cal_k_mm_packed(dtype) ? (size_t)unit_rows(dtype) * cal_k_row_bytes(dtype, n_in) : 0;
}

void cal_k_mm_pack(int dtype, void *w, int n_rows, int n_in, void *scratch)
{
    if (!cal_k_mm_packed(dtype) || n_rows < 1 || !w || !scratch)
        return;
    switch (dtype) {
    case CAL_DTYPE_Q8_0: cal_k_q8x_pack_inplace(w, n_rows, n_in, scratch); break;
    case CAL_DTYPE_Q4_K: cal_k_q4kx_pack_inplace(w, n_rows, n_in, scratch); break;
    case CAL_DTYPE_Q5_K: cal_k_q5kx_pack_inplace(w, n_rows, n_in, scratch); break;
    case CAL_DTYPE_Q6_K: cal_k_q6kx_pack_inplace(w, n_rows, n_in, scratch); break;
    default:             cal_k_q32x_pack_inplace(dtype, w, n_rows, n_in, scratch); break;
    }
}

const void *cal_k_mm_rows(int dtype, const void *w, int n_rows, int r0, int count, int n_in,
                          void *out)
{
    if (!cal_k_mm_packed(dtype))
        return (const char *)w + (size_t)r0 * cal_k_row_bytes(dtype, n_in);
    switch (dtype) {
    case CAL_DTYPE_Q8_0: cal_k_q8x_rows(w, n_rows, r0, count, n_in, out); break;
    case CAL_DTYPE_Q4_K: cal_k_q4kx_rows(w, n_rows, r0, count, n_in, out); break;
    case CAL_DTYPE_Q5_K: cal_k_q5kx_rows(w, n_rows, r0, count, n_in, out); break;
    case CAL_DTYPE_Q6_K: cal_k_q6kx_rows(w, n_rows, r0, count, n_in, out); break;
    default:             cal_k_q32x_rows(dtype, w, n_rows, r0, count, n_in, out); break;
    }
    return out;
}

int cal_k_mm_xkind(int dtype)
{
    if (dtype == CAL_DTYPE_Q8_0)
        return cal_k_have_q8x() ? CAL_K_X_Q8X : CAL_K_X_NONE;
    if (cal_k_is_q32(dtype))
        return CAL_K_X_Q8_1;
    if (dtype == CAL_DTYPE_Q4_K || dtype == CAL_DTYPE_Q5_K || dtype == CAL_DTYPE_Q6_K)
        return CAL_K_X_Q8_K;
    return CAL_K_X_NONE;
}

/* bytes of one rounded row of n_in of each kind (0: not whole blocks) */
static size_t row_xbytes(int kind, int n_in)
{
    switch (kind) {
    case CAL_K_X_Q8X:  return cal_k_q8x_xbytes(n_in, 1);
    case CAL_K_X_Q8_1: return cal_k_q32_xbytes(n_in, 1);
    case CAL_K_X_Q8_K: return cal_k_kq_xbytes(n_in, 1);
    default:           return 0;
    }
}

size_t cal_k_mm_xbytes(int dtype, int n_in, int m)
{
    int kind = cal_k_mm_xkind(dtype);
    /* prefill without the interleaved kernels: SGEMM over dequantized rows
     * (the block kernels multiply-add a fifth as fast) */
    if (kind == CAL_K_X_NONE || m < 1 || (m > CAL_K_MM_DECODE && !cal_k_mm_packed(dtype)))
        return 0;
    return row_xbytes(kind, n_in) * (size_t)m;
}

void cal_k_mm_round(int dtype, const float *x, int ldx, int n_in, int m, void *xq)
{
    switch (cal_k_mm_xkind(dtype)) {
    case CAL_K_X_Q8X:  cal_k_q8x_round(x, ldx, n_in, m, xq); break;
    case CAL_K_X_Q8_1: cal_k_q32_round(x, ldx, n_in, m, xq); break;
    case CAL_K_X_Q8_K: cal_k_kq_round(x, ldx, n_in, m, xq); break;
    default:           break;
    }
}

/* activation rows a pass over a piece of rows takes in prefill: their
 * rounded rows (≤ 40 KiB at 2048 inputs) stay in L2 while the piece's
 * weights pass under them, the piece's rows in L2 while the passes repeat */
#ifndef CAL_K_MM_XB
#define CAL_K_MM_XB 64
#endif

static void apply_rows(int dtype, float *y, int ldy, const void *xq, const void *w, int n_out,
                       int n_in, int m, float beta)
{
    int packed = cal_k_mm_packed(dtype);
    switch (dtype) {
    case CAL_DTYPE_Q8_0:
        cal_k_q8x_apply(y, ldy, xq, w, n_out, n_in, m, beta);
        return;
    case CAL_DTYPE_Q4_K:
        if (!packed || cal_k_q4kx_apply(y, ldy, xq, w, n_out, n_in, m, beta) != 0)
            cal_k_kq_apply(dtype, y, ldy, xq, w, n_out, n_in, m, beta);
        return;
    case CAL_DTYPE_Q5_K:
        if (!packed || cal_k_q5kx_apply(y, ldy, xq, w, n_out, n_in, m, beta) != 0)
            cal_k_kq_apply(dtype, y, ldy, xq, w, n_out, n_in, m, beta);
        return;
    case CAL_DTYPE_Q6_K:
        if (!packed || cal_k_q6kx_apply(y, ldy, xq, w, n_out, n_in, m, beta) != 0)
            cal_k_kq_apply(dtype, y, ldy, xq, w, n_out, n_in, m, beta);
        return;
    default:
        if (!packed || cal_k_q32x_apply(dtype, y, ldy, xq, w, n_out, n_in, m, beta) != 0)
            cal_k_q32_apply(dtype, y, ldy, xq, w, n_out, n_in, m, beta);
        return;
    }
}

void cal_k_mm_apply(int dtype, float *y, int ldy, const void *xq, const void *w, int n_out,
                    int n_in, int m, float beta)
{
    size_t xr = row_xbytes(cal_k_mm_xkind(dtype), n_in);
    if (n_out < 1 || m < 1 || xr == 0)
        return;
    for (int i0 = 0; i0 < m; i0 += CAL_K_MM_XB) {
        int mm = m - i0 < CAL_K_MM_XB ? m - i0 : CAL_K_MM_XB;
        apply_rows(dtype, y + (size_t)i0 * ldy, ldy, (const char *)xq + (size_t)i0 * xr, w,
                   n_out, n_in, mm, beta);
    }
}
