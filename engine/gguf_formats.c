/* caliper reference engine — the tensor formats a GGUF file may hold, as the
 * loader reads them: every ggml type the engine holds as stored (F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: a CAL_DTYPE_* each,
 * the file's bytes kept as they are) and how a row of one becomes F32 when
 * the engine is asked to hold it in another format (--dtype). llama.cpp's
 * quantizer falls back to Q5_0 (for Q4_K), Q5_1 (for Q5_K) and Q8_0 (for
 * Q6_K) on rows that are not whole super-blocks, so a Q4_K_M file of a
 * 896-wide model (Qwen2.5 0.5B) holds mostly Q5_0, and a Q5_K_M file Q5_K,
 * Q6_K and Q5_1. */
#include "engine/gguf.h"
#include "engine/kernels.h"
#include "caliper/gguf.h"

static float half(const uint8_t *p) { return cal_k_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* ggml's type numbers of the engine's formats, by CAL_DTYPE_* */
static const uint32_t ggml_of[CAL_DTYPE_COUNT] = {
    [CAL_DTYPE_F32] = CAL_GGUF_F32,   [CAL_DTYPE_F16] = CAL_GGUF_F16,
    [CAL_DTYPE_BF16] = CAL_GGUF_BF16, [CAL_DTYPE_Q8_0] = CAL_GGUF_Q8_0,
    [CAL_DTYPE_Q4_0] = CAL_GGUF_Q4_0, [CAL_DTYPE_Q4_K] = CAL_GGUF_Q4_K,
    [CAL_DTYPE_Q6_K] = CAL_GGUF_Q6_K, [CAL_DTYPE_Q4_1] = CAL_GGUF_Q4_1,
    [CAL_DTYPE_Q5_0] = CAL_GGUF_Q5_0, [CAL_DTYPE_Q5_1] = CAL_GGUF_Q5_1,
    [CAL_DTYPE_Q5_K] = CAL_GGUF_Q5_K,
};

int cal_gguf_dtype_of(uint32_t type)
{
    for (int dt = 0; dt < CAL_DTYPE_COUNT; dt++)
        if (ggml_of[dt] == type)
            return dt;
    return -1;
}

int64_t cal_gguf_type_of(int dtype)
{
    return dtype >= 0 && dtype < CAL_DTYPE_COUNT ? (int64_t)ggml_of[dtype] : -1;
}

int cal_gguf_reads(uint32_t type)
{
    return cal_gguf_dtype_of(type) >= 0;
}

size_t cal_gguf_row_bytes(uint32_t type, int n)
{
    unsigned bytes, block = cal_gguf_type_block(type, &bytes);
    return cal_gguf_reads(type) && block ? (size_t)(n / (int)block) * bytes : 0;
}

void cal_gguf_row_f32(uint32_t type, const uint8_t *s, float *y, int n)
{
    if (type == CAL_GGUF_F16) {   /* byte by byte: the file's little-endian halves */
        for (int k = 0; k < n; k++)
            y[k] = half(s + 2 * k);
        return;
    }
    cal_k_dequantize_row(cal_gguf_dtype_of(type), s, y, n);
}
