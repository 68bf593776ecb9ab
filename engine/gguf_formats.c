/* caliper reference engine — the tensor formats a GGUF file may hold, as the
 * loader reads them: the engine's own (F32, F16, BF16, Q8_0, Q4_0, Q4_K,
 * Q6_K) and the ones it reads but does not compute in (Q4_1, Q5_0, Q5_1,
 * Q5_K), each row widened to F32 by llama.cpp's dequantize_row formula,
 * then held in the engine's --dtype. The second kind is not rare: llama.cpp's
 * quantizer falls back to Q5_0 (for Q4_K) and Q8_0 (for Q6_K) on rows that
 * are not whole super-blocks, so a Q4_K_M file of a 896-wide model (Qwen2.5
 * 0.5B) holds mostly Q5_0; a Q5_K_M file holds Q5_K, Q6_K, and Q5_1 where
 * rows are not whole super-blocks. */
#include "engine/gguf.h"
#include "engine/kernels.h"
#include "caliper/gguf.h"

/* the layouts (ggml-common.h), block by block; d, m and dmin are F16:
 *   Q4_1 d, m, qs[16]            Q5_0 d, qh[4], qs[16]
 *   Q5_1 d, m, qh[4], qs[16]     Q5_K d, dmin, scales[12], qh[32], qs[128]
 * (their sizes: cal_gguf_type_block) */
static float half(const uint8_t *p) { return cal_k_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* 32 values: x[j] = d·(nibble j, plus its fifth bit) + m, j < 16 from the
 * low nibbles, j ≥ 16 from the high ones; Q5_0 centres at −16, Q4_1 and
 * Q5_1 add m. qh NULL: no fifth bit (Q4_1). */
static void deq_32(const uint8_t *qs, const uint8_t *qh, float d, float m, int centre, float *y)
{
    uint32_t h = 0;
    if (qh)
        h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
            (uint32_t)qh[3] << 24;
    for (int j = 0; j < 16; j++) {
        int x0 = (qs[j] & 0x0F) | (int)(((h >> j) << 4) & 0x10);
        int x1 = (qs[j] >> 4) | (int)((h >> (j + 12)) & 0x10);
        if (centre) {
            y[j] = (float)(x0 - 16) * d;
            y[j + 16] = (float)(x1 - 16) * d;
        } else {
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        }
    }
}

/* 256 values in 8 sub-blocks of 32: d·sc_j·(nibble + 16·bit) − dmin·m_j,
 * the scales packed as Q4_K's; sub-blocks 2p and 2p+1 share qs[32p ..]
 * (low, high nibbles) and take bits 2p and 2p+1 of qh[]. */
static void deq_q5_k(const uint8_t *s, float *y)
{
    float d = half(s), dmin = half(s + 2);
    const uint8_t *qh = s + 16, *qs = s + 48;
    uint32_t u[4];
    cal_k_q4k_scales(s + 4, u);
    const uint8_t *sc = (const uint8_t *)u, *mn = sc + 8;
    for (int p = 0; p < 4; p++) {
        const uint8_t *ql = qs + 32 * p;
        float d1 = d * sc[2 * p], m1 = dmin * mn[2 * p];
        float d2 = d * sc[2 * p + 1], m2 = dmin * mn[2 * p + 1];
        uint8_t u1 = (uint8_t)(1u << (2 * p)), u2 = (uint8_t)(2u << (2 * p));
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
}

int cal_gguf_dtype_of(uint32_t type)
{
    switch (type) {
    case CAL_GGUF_F32:  return CAL_DTYPE_F32;
    case CAL_GGUF_F16:  return CAL_DTYPE_F16;
    case CAL_GGUF_BF16: return CAL_DTYPE_BF16;
    case CAL_GGUF_Q8_0: return CAL_DTYPE_Q8_0;
    case CAL_GGUF_Q4_0: return CAL_DTYPE_Q4_0;
    case CAL_GGUF_Q4_K: return CAL_DTYPE_Q4_K;
    case CAL_GGUF_Q6_K: return CAL_DTYPE_Q6_K;
    default:            return -1;
    }
}

int cal_gguf_reads(uint32_t type)
{
    return cal_gguf_dtype_of(type) >= 0 || type == CAL_GGUF_Q4_1 || type == CAL_GGUF_Q5_0 ||
           type == CAL_GGUF_Q5_1 || type == CAL_GGUF_Q5_K;
}

size_t cal_gguf_row_bytes(uint32_t type, int n)
{
    unsigned bytes, block = cal_gguf_type_block(type, &bytes);
    return cal_gguf_reads(type) && block ? (size_t)(n / (int)block) * bytes : 0;
}

void cal_gguf_row_f32(uint32_t type, const uint8_t *s, float *y, int n)
{
    unsigned bytes, block = cal_gguf_type_block(type, &bytes);
    switch (type) {
    case CAL_GGUF_F16:   /* byte by byte: the file's little-endian halves */
        for (int k = 0; k < n; k++)
            y[k] = half(s + 2 * k);
        return;
    case CAL_GGUF_Q4_1: case CAL_GGUF_Q5_0: case CAL_GGUF_Q5_1: case CAL_GGUF_Q5_K:
        for (int b = 0; b < n / (int)block; b++, s += bytes, y += block) {
            if (type == CAL_GGUF_Q4_1)
                deq_32(s + 4, NULL, half(s), half(s + 2), 0, y);
            else if (type == CAL_GGUF_Q5_0)
                deq_32(s + 6, s + 2, half(s), 0.0f, 1, y);
            else if (type == CAL_GGUF_Q5_1)
                deq_32(s + 8, s + 4, half(s), half(s + 2), 0, y);
            else
                deq_q5_k(s, y);
        }
        return;
    default:
        cal_k_dequantize_row(cal_gguf_dtype_of(type), s, y, n);
    }
}
