/* caliper reference engine — the element-wise and attention kernels, and the
 * deterministic random numbers the synthetic weights come from. Internal to
 * engine/ (and its unit tests, which check each kernel against a naive
 * reference); not part of the installed contract. */
#ifndef CALIPER_ENGINE_KERNELS_H
#define CALIPER_ENGINE_KERNELS_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* splitmix64: advances *state and returns the next 64 random bits. */
uint64_t cal_k_splitmix64(uint64_t *state);
/* Counter-based normal-ish value (Irwin–Hall of four 16-bit uniforms, scaled
 * to unit variance) for element i of stream `key`: a pure function, so any
 * tensor element can be generated independently. */
float cal_k_normal_at(uint64_t key, uint64_t i);

/* out[i] = x[i] / sqrt(mean(x²) + eps) * w[i], i < n. out may equal x. */
void cal_k_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* In-place softmax over x[n] (max-subtracted). */
void cal_k_softmax(float *x, int n);

/* Rotary embedding on one vector of n_heads × head_dim, rotating the pairs
 * (2i, 2i+1) of each head by pos × theta^(−2i/head_dim). cos_t / sin_t are
 * the rows for this position: [head_dim/2]. */
void cal_k_rope(float *v, int n_heads, int head_dim, const float *cos_t,
                const float *sin_t);

/* The same rotation on the pairs (i, i + head_dim/2) of each head: the
 * NeoX layout llama.cpp uses for qwen2 and qwen3. */
void cal_k_rope_neox(float *v, int n_heads, int head_dim, const float *cos_t,
                     const float *sin_t);

/* out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^−g). */
void cal_k_swiglu(float *out, const float *gate, const float *up, int n);

/* Dot product and y += a·x over n floats, vectorised. */
float cal_k_dot(const float *a, const float *b, int n);
void  cal_k_axpy(float *y, float a, const float *x, int n);

/* Grouped-query attention of one query token over a KV cache.
 * q: [n_heads][head_dim]; k, v: [n_kv][kv_stride][head_dim] (one slot of one
 * layer; kv_stride = positions per sequence); attends to positions
 * 0 .. n_pos−1; query head h reads kv head h / (n_heads / n_kv).
 * scores: scratch [CAL_K_ATT_HEADS × n_pos]; out: [n_heads][head_dim]. */
#define CAL_K_ATT_HEADS 4
void cal_k_attention(const float *q, const float *k, const float *v,
                     int n_heads, int n_kv, int head_dim, int kv_stride,
                     int n_pos, float *scores, float *out);

/* The same for query heads h0 .. h1−1 only (a thread's share). */
void cal_k_attention_heads(const float *q, const float *k, const float *v,
                           int n_heads, int n_kv, int head_dim, int kv_stride,
                           int n_pos, int h0, int h1, float *scores, float *out);

/* Mixture-of-experts routing of one token: probs = softmax(logits[n]),
 * the top_k largest (ties to the lower index) into idx[top_k] in descending
 * order, their weights renormalised to sum 1 into w[top_k].
 * probs: scratch [n]. */
void cal_k_route_topk(const float *logits, int n, int top_k, float *probs,
                      int *idx, float *w);

/* ---- weight formats and the decode products (matmul.c) ------------------
 * dtype is a CAL_DTYPE_* of engine.h. A row of n weights is stored as n
 * floats (F32), n IEEE halves (F16), n bfloat16 (BF16), or n/32 Q8_0 blocks
 * laid out as llama.cpp's block_q8_0 (n % 32 == 0). */
#define CAL_Q8_0_BLOCK 32
typedef struct cal_q8_0_block {
    uint16_t d;                    /* scale, IEEE half */
    int8_t   qs[CAL_Q8_0_BLOCK];   /* value i = d · qs[i] */
} cal_q8_0_block;                  /* 34 bytes, as in GGUF files */

/* llama.cpp's 4- and 6-bit formats (ggml-common.h), kquants.c. Q4_0: 32
 * weights a block, value = d·(q − 8), element j the low nibble of qs[j],
 * element j + 16 its high nibble. Q4_K: 256-weight super-blocks of 8
 * sub-blocks of 32, value = d·sc_j·q − dmin·m_j with 6-bit sc_j, m_j packed
 * in scales[12]. Q6_K: 256-weight super-blocks of 16 sub-blocks of 16,
 * value = d·scales[j]·(q − 32), q's low 4 bits in ql and high 2 in qh. Rows
 * of Q4_0 are whole blocks (n % 32 == 0), of Q4_K and Q6_K whole
 * super-blocks (n % 256 == 0). */
#define CAL_Q4_0_BLOCK 32
#define CAL_QK_K 256
typedef struct cal_q4_0_block {
    uint16_t d;                    /* scale, IEEE half */
    uint8_t  qs[CAL_Q4_0_BLOCK / 2];
} cal_q4_0_block;                  /* 18 bytes */
typedef struct cal_q4_k_block {
    uint16_t d, dmin;              /* scales of the sub-block scales and mins */
    uint8_t  scales[12];           /* 8 × (6-bit scale, 6-bit min) */
    uint8_t  qs[CAL_QK_K / 2];     /* nibbles: sub-blocks 2p, 2p+1 share qs[32p ..] */
} cal_q4_k_block;                  /* 144 bytes */
typedef struct cal_q6_k_block {
    uint8_t  ql[CAL_QK_K / 2];     /* low 4 bits */
    uint8_t  qh[CAL_QK_K / 4];     /* high 2 bits */
    int8_t   scales[CAL_QK_K / 16];
    uint16_t d;
} cal_q6_k_block;                  /* 210 bytes */

/* llama.cpp's other 32-weight formats (ggml-common.h), q32.c. Element j <
 * 16 of a block is the low nibble of qs[j], element j + 16 its high nibble
 * (as Q4_0's); the 5-bit formats add bit j of qh (little-endian) to
 * element j as its fifth bit. Q4_1: value = d·q + m, q 0..15; Q5_0: d·(q −
 * 16), q 0..31; Q5_1: d·q + m, q 0..31. d and m are F16. Rows are whole
 * blocks (n % 32 == 0). */
typedef struct cal_q4_1_block {
    uint16_t d, m;
    uint8_t  qs[16];
} cal_q4_1_block;                  /* 20 bytes */
typedef struct cal_q5_0_block {
    uint16_t d;
    uint8_t  qh[4];
    uint8_t  qs[16];
} cal_q5_0_block;                  /* 22 bytes */
typedef struct cal_q5_1_block {
    uint16_t d, m;
    uint8_t  qh[4];
    uint8_t  qs[16];
} cal_q5_1_block;                  /* 24 bytes */
/* Q5_K: Q4_K's super-block (d, dmin, the same 12 bytes of 6-bit scales and
 * mins, the nibbles of sub-blocks 2p and 2p+1 in qs[32p ..]) with a fifth
 * bit: bit j of qh[l] for element l of sub-block j. value = d·sc_j·q −
 * dmin·m_j, q 0..31. */
typedef struct cal_q5_k_block {
    uint16_t d, dmin;
    uint8_t  scales[12];
    uint8_t  qh[CAL_QK_K / 8];
    uint8_t  qs[CAL_QK_K / 2];
} cal_q5_k_block;                  /* 176 bytes */
#define CAL_QK4_1 32
#define CAL_QK5_0 32
#define CAL_QK5_1 32

/* What this CPU has, asked once (cpu.c): AVX-512 F, BW, VL, DQ with FMA and
 * F16C; AVX-512 VNNI; both (the Q8_0 and Q4_K integer kernels, and Q8_K
 * rounding); AVX2 with FMA and F16C (the K-quant block kernels). */
int   cal_k_have_avx512(void);
/* ask's answer, asked once (x86-64; the kernels' own questions go through
 * it): *cached starts at −1 and keeps the answer, threads racing to ask
 * store the same value */
int   cal_k_cpu_once(_Atomic int *cached, int (*ask)(void));
int   cal_k_have_vnni(void);
int   cal_k_have_q8x(void);
int   cal_k_have_kq_avx2(void);

/* Q4_0, Q4_K, Q5_K or Q6_K (kquants.c)? */
int   cal_k_is_kq(int dtype);
/* Weights a block of dtype holds: 1 (F32, F16, BF16), 32 (Q8_0, Q4_0, Q4_1,
 * Q5_0, Q5_1), 256 (Q4_K, Q5_K, Q6_K); 0 for an unknown value. Rows are
 * whole blocks. */
int   cal_k_block_elems(int dtype);
/* Plain C quantizers (Q4_0 rounds to nearest as llama.cpp's reference; the
 * K-quants take each sub-block's range, see kquants.c), dequantizers and a
 * reference dot product Σ w_k·x_k over the dequantized row, summed in order. */
void  cal_k_kq_quantize_row(int dtype, const float *src, void *dst, int n);
void  cal_k_kq_dequantize_row(int dtype, const void *src, float *dst, int n);
float cal_k_kq_dot_ref(int dtype, const void *row, const float *x, int n);
/* Activations rounded for the K-quant decode products, as llama.cpp's
 * block_q8_K: per 256, d = max|x| / 127 (F32), q = round(x / d) to nearest
 * even, bsums[j] = Σ q over elements 16j .. 16j+15. */
typedef struct cal_q8_k_block {
    float   d;
    int8_t  qs[CAL_QK_K];
    int16_t bsums[CAL_QK_K / 16];
} cal_q8_k_block;
void  cal_k_q8_k_quantize_row(const float *x, cal_q8_k_block *y, int n);
void  cal_k_q8_k_quantize_row_portable(const float *x, cal_q8_k_block *y, int n);
/* A Q4_K super-block's 12 packed scale bytes to 16: u's bytes 0-7 the 8
 * 6-bit scales, bytes 8-15 the 8 mins (ggml's get_scale_min_k4 for all j
 * at once: j < 4 in the low 6 bits of bytes j and j+4; j >= 4 a nibble of
 * byte j+4 under the top 2 bits of bytes j-4 and j). */
static inline void cal_k_q4k_scales(const uint8_t *s, uint32_t u[4])
{
    uint32_t w[3];
    memcpy(w, s, sizeof w);
    const uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
    u[0] = w[0] & k6;
    u[1] = (w[2] & k4) | ((w[0] >> 6) & k2) << 4;
    u[2] = w[1] & k6;
    u[3] = ((w[2] >> 4) & k4) | ((w[1] >> 6) & k2) << 4;
}
/* cal_k_q8_k_quantize_row on AVX-512, bit for bit; −1, and nothing done,
 * where the CPU lacks AVX-512 VNNI (cal_k_have_q8x) */
int   cal_k_q8_k_quantize_avx512(const float *x, cal_q8_k_block *y, int n);
/* x as the K-quant decode products see it: out = d · q, in F32 (out may be x) */
void  cal_k_q8_k_round(const float *x, float *out, int n);
/* Σ w_k·x_k of a Q4_K, Q5_K or Q6_K row against Q8_K-rounded activations,
 * in integers per super-block and one float step per super-block:
 * Q4_K, Q5_K: s += xd·(d·Σ_j sc_j·Σ q·q8 − dmin·Σ_j m_j·Σ q8),
 * Q6_K: s += xd·d·Σ_j sc_j·Σ (q − 32)·q8, super-blocks in order. The vector
 * products compute exactly this, bit for bit. */
float cal_k_kq_dot_q8k(int dtype, const void *row, const cal_q8_k_block *x, int n);
/* cal_k_matmul for these formats. Q4_0: X in F32 times the dequantized
 * weights. Q4_K, Q5_K, Q6_K: each row of X rounded to Q8_K once per call, then
 * cal_k_kq_dot_q8k per output, as llama.cpp's CPU backend does in decode.
 * With AVX2 and FMA where the CPU has them (cal_k_have_kq_avx2, asked once);
 * _portable is the scalar computation of the same numbers (Q4_0: the
 * reference dot product). */
void  cal_k_kq_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                      int n_out, int n_in, int m, float beta);
void  cal_k_kq_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                               const void *w, int n_out, int n_in, int m, float beta);

/* The K-quant product in two halves, so that the threads sharing a
 * product's rows round its activations once (as cal_k_q8x_round / apply
 * for Q8_0): round writes m rows of x (row stride ldx) to xq as Q8_K
 * (cal_k_kq_xbytes(n_in, m) bytes; 0 where n_in is not whole super-blocks),
 * apply multiplies them by n_out rows of w in dtype (Q4_K, Q5_K or Q6_K):
 * cal_k_kq_matmul's numbers, bit for bit. */
size_t cal_k_kq_xbytes(int n_in, int m);
void  cal_k_kq_round(const float *x, int ldx, int n_in, int m, cal_q8_k_block *xq);
void  cal_k_kq_apply(int dtype, float *y, int ldy, const cal_q8_k_block *xq, const void *w,
                     int n_out, int n_in, int m, float beta);

/* ---- Q4_0, Q4_1, Q5_0, Q5_1 on 8-bit activations (q32.c) ----------------
 * As llama.cpp's ggml_vec_dot_q4_0_q8_0, _q4_1_q8_1, _q5_0_q8_0,
 * _q5_1_q8_1: X rounded per 32 exactly as cal_k_q8_0_round rounds it
 * (d = max|x|/127 in F32, q = round(x/d) to nearest even), with Σq and
 * s = d·Σq for the formats with an m. llama.cpp's block_q8_0 and
 * block_q8_1 keep d and s as halves; these keep them in F32, so a product
 * differs from llama.cpp's by that rounding of the scales (2⁻¹¹ relative)
 * and by the order of the float sums. */
typedef struct cal_q8_1_block {
    int8_t  qs[32];
    float   d, s;      /* the scale, and d·Σq */
    int32_t sum, pad;  /* Σq */
} cal_q8_1_block;      /* 48 bytes */
/* Q4_0, Q4_1, Q5_0 or Q5_1? */
int   cal_k_is_q32(int dtype);
/* llama.cpp's reference quantizers, step for step (quantize_row_q4_1_ref,
 * _q5_0_ref, _q5_1_ref: the bytes llama-quantize writes without an
 * importance matrix; Q4_0 is kquants.c's), and ggml's dequantizers */
void  cal_k_q32_quantize_row(int dtype, const float *src, void *dst, int n);
void  cal_k_q32_dequantize_row(int dtype, const void *src, float *dst, int n);
/* n floats (n % 32 == 0) to n/32 rounded blocks; AVX-512 where the CPU has
 * it (cal_k_have_avx512), bit for bit the plain C one */
void  cal_k_q8_1_quantize_row(const float *x, cal_q8_1_block *y, int n);
void  cal_k_q8_1_quantize_row_portable(const float *x, cal_q8_1_block *y, int n);
/* Σ w·x of a row against X so rounded, block by block, in integers per
 * block (Q4_0, Q5_0: Σ (q − 8 or 16)·q8 = Σ q·q8 − off·Σq8) and one float
 * step per block in order: s = s + isum·(dw·dx) (Q4_0, Q5_0), s = s +
 * (isum·(dw·dx) + mw·s_x) (Q4_1, Q5_1, isum = Σ q·q8). Every vector path
 * computes exactly this, bit for bit. */
float cal_k_q32_dot_q8(int dtype, const void *row, const cal_q8_1_block *x, int n);
/* The product in two halves, as cal_k_kq_round / apply: round writes m rows
 * of x to xq (cal_k_q32_xbytes(n_in, m) bytes; 0 where n_in is not whole
 * blocks), apply multiplies them by n_out rows of w in dtype, in the block
 * layout: AVX2 where the CPU has it (cal_k_have_kq_avx2), else plain C
 * (_portable), the same numbers. Any m. */
size_t cal_k_q32_xbytes(int n_in, int m);
void  cal_k_q32_round(const float *x, int ldx, int n_in, int m, cal_q8_1_block *xq);
void  cal_k_q32_apply(int dtype, float *y, int ldy, const cal_q8_1_block *xq, const void *w,
                      int n_out, int n_in, int m, float beta);
void  cal_k_q32_apply_portable(int dtype, float *y, int ldy, const cal_q8_1_block *xq,
                               const void *w, int n_out, int n_in, int m, float beta);
/* cal_k_matmul for Q4_1, Q5_0, Q5_1 (and, on request, Q4_0 on rounded X):
 * round into this thread's buffer, then apply; _portable all in plain C */
void  cal_k_q32_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                       int n_out, int n_in, int m, float beta);
void  cal_k_q32_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                                const void *w, int n_out, int n_in, int m, float beta);
/* Rows interleaved in sixteens for the VNNI kernel (q32.c): the same bytes
 * per row as the block layout, in another order; a matrix's last n_rows %
 * 16 rows keep the block layout. pack / unpack / pack_inplace (scratch: 16
 * rows) / rows as cal_k_q4kx_*. cal_k_q32x_apply is cal_k_q32_apply on
 * packed rows, bit for bit the same numbers, any m; w starts on a row of
 * the packed matrix that is a multiple of 16. −1, and nothing done, where
 * the CPU lacks AVX-512 VNNI (cal_k_have_q8x) or n_in is not whole blocks. */
void  cal_k_q32x_pack(int dtype, const void *src, void *dst, int n_rows, int n);
void  cal_k_q32x_unpack(int dtype, const void *src, void *dst, int n_rows, int n);
void  cal_k_q32x_pack_inplace(int dtype, void *m, int n_rows, int n, void *scratch);
void  cal_k_q32x_rows(int dtype, const void *m, int n_rows, int r0, int count, int n,
                      void *out);
int   cal_k_q32x_apply(int dtype, float *y, int ldy, const cal_q8_1_block *xq, const void *w,
                       int n_out, int n_in, int m, float beta);

float    cal_k_f16_to_f32(uint16_t h);
uint16_t cal_k_f32_to_f16(float f);      /* round to nearest even */
float    cal_k_bf16_to_f32(uint16_t b);
uint16_t cal_k_f32_to_bf16(float f);     /* round to nearest even */

/* Bytes of one row of n weights; 0 for an unknown dtype. */
size_t cal_k_row_bytes(int dtype, int n);
/* n floats to one stored row and back (Q8_0: max|x|/127 scale per block, as
 * llama.cpp's quantize_row_q8_0). */
void cal_k_quantize_row(int dtype, const float *src, void *dst, int n);
void cal_k_dequantize_row(int dtype, const void *src, float *dst, int n);
/* The same in plain C (the path on CPUs without AVX-512; the tests hold the
 * vector one to it bit for bit). */
void cal_k_dequantize_row_portable(int dtype, const void *src, float *dst, int n);
/* Activations as Q8_0 products see them: each 32-block of x[n] (n % 32 == 0)
 * scaled by d = max|x|/127 in F32 and rounded, out = d · round(x / d).
 * out may equal x. */
void cal_k_q8_0_round(const float *x, float *out, int n);

/* Y[m][n_out] (row stride ldy) = beta·Y + X[m][n_in] (row stride ldx) ·
 * Wᵀ, W [n_out] rows of n_in weights in dtype. Every weight row is read from
 * memory once for all m rows of X: the decode batch's product. beta 0 never
 * reads Y. Sums are in F32 over the dequantized weights; Q8_0 multiplies X
 * rounded to Q8_0 (cal_k_q8_0_round), as llama.cpp's Q8_0 × Q8_0 product
 * does, so the integer kernel (AVX-512 VNNI) and the portable path agree.
 * AVX-512 where the CPU has it (checked once, at the first call) and
 * n_in % 32 == 0, the portable path otherwise; cal_k_matmul_portable is that
 * path alone. */
void cal_k_matmul(int dtype, float *y, int ldy, const float *x, int ldx, const void *w,
                  int n_out, int n_in, int m, float beta);
void cal_k_matmul_portable(int dtype, float *y, int ldy, const float *x, int ldx,
                           const void *w, int n_out, int n_in, int m, float beta);
/* The BF16 prefill product on AVX512_BF16 (vdpbf16ps), as llama.cpp's:
 * cal_k_bf16_pairs rounds X[m][k] (row stride ldx) to BF16 once (round to
 * nearest even, as cal_k_f32_to_bf16) into out[m][(k+1)/2], each uint32 a
 * pair of K neighbours (low half first; an odd k's last pair has a zero
 * partner). cal_k_gemm_bf16 then sets Y[m][n_out] (row stride ldy) =
 * beta·Y + X̂ · Wᵀ, W [n_out] rows of n_in BF16 weights, any n_in (odd too),
 * summing pairs in F32; beta 0 never reads Y. pack: scratch of
 * 32 · (n_in+1)/2 uint32. cal_k_have_bf16_gemm says whether the CPU has the
 * instruction (asked once); without it cal_k_gemm_bf16 is plain C. */
int  cal_k_have_bf16_gemm(void);
void cal_k_bf16_pairs(const float *x, int ldx, uint32_t *out, int m, int k);
void cal_k_gemm_bf16(float *y, int ldy, const uint32_t *xq, int m, const uint16_t *w,
                     int n_out, int n_in, float beta, uint32_t *pack);
/* Q8_0 rows interleaved for the VNNI decode kernel (q8x.c): the same bytes
 * per row as the block layout, in another order, rows taken in fours. pack
 * and unpack convert a matrix of n_rows × n weights (n % 32 == 0), bit for
 * bit. cal_k_q8x_product is
 * cal_k_matmul for Q8_0 on packed rows: the activations rounded to Q8_0 the
 * same way, the sums taken in another order. It returns −1 and does nothing
 * where the CPU lacks AVX-512 VNNI (cal_k_have_q8x) or n_in is not whole
 * blocks. w must start on a row of the packed matrix that is a multiple of
 * 4. */
void cal_k_q8x_pack(const void *src, void *dst, int n_rows, int n);
void cal_k_q8x_unpack(const void *src, void *dst, int n_rows, int n);
/* pack with src = dst = m; scratch: 4 rows (4 · cal_k_row_bytes) */
void cal_k_q8x_pack_inplace(void *m, int n_rows, int n, void *scratch);
/* rows r0 .. r0+count−1 of a packed matrix of n_rows, in the block layout,
 * to out (count rows) */
void cal_k_q8x_rows(const void *m, int n_rows, int r0, int count, int n, void *out);
int  cal_k_q8x_product(float *y, int ldy, const float *x, int ldx, const void *w, int n_out,
                       int n_in, int m, float beta);
/* cal_k_q8x_product in two halves, so that the threads sharing a product's
 * rows round its activations once: round writes m rows of x, rounded, to xq
 * (cal_k_q8x_xbytes(n_in, m) bytes, 64-byte aligned; 0 where n_in is not
 * whole blocks); apply multiplies them by n_out packed rows from w (a row
 * that is a multiple of 4). Both return −1 and do nothing where
 * cal_k_q8x_product would. */
size_t cal_k_q8x_xbytes(int n_in, int m);
int  cal_k_q8x_round(const float *x, int ldx, int n_in, int m, void *xq);
int  cal_k_q8x_apply(float *y, int ldy, const void *xq, const void *w, int n_out, int n_in,
                     int m, float beta);
/* Q4_K rows interleaved in sixteens for the VNNI decode kernel (q4kx.c):
 * the same bytes per row as the block layout, in another order; a
 * matrix's last n_rows % 16 rows keep the block layout. pack and unpack
 * convert a matrix of n_rows × n weights (n % 256 == 0) bit for bit;
 * pack_inplace takes scratch of 16 rows. rows writes rows r0 ..
 * r0+count−1 of a packed matrix in the block layout to out.
 * cal_k_q4kx_apply is cal_k_kq_apply for Q4_K on packed rows, bit for bit
 * the same numbers; w must start on a row of the packed matrix that is a
 * multiple of 16. It returns −1 and does nothing where the CPU lacks
 * AVX-512 VNNI (cal_k_have_q8x) or n_in is not whole super-blocks. */
void cal_k_q4kx_pack(const void *src, void *dst, int n_rows, int n);
void cal_k_q4kx_unpack(const void *src, void *dst, int n_rows, int n);
void cal_k_q4kx_pack_inplace(void *m, int n_rows, int n, void *scratch);
void cal_k_q4kx_rows(const void *m, int n_rows, int r0, int count, int n, void *out);
int  cal_k_q4kx_apply(float *y, int ldy, const cal_q8_k_block *xq, const void *w, int n_out,
                      int n_in, int m, float beta);
/* Q5_K (q5kx.c) and Q6_K (q6kx.c) the same way: rows interleaved in
 * sixteens, the same bytes per row, the last n_rows % 16 in the block
 * layout; apply is cal_k_kq_apply for the format on packed rows, bit for
 * bit, any m; −1 and nothing done without AVX-512 VNNI or whole
 * super-blocks. */
void cal_k_q5kx_pack(const void *src, void *dst, int n_rows, int n);
void cal_k_q5kx_unpack(const void *src, void *dst, int n_rows, int n);
void cal_k_q5kx_pack_inplace(void *m, int n_rows, int n, void *scratch);
void cal_k_q5kx_rows(const void *m, int n_rows, int r0, int count, int n, void *out);
int  cal_k_q5kx_apply(float *y, int ldy, const cal_q8_k_block *xq, const void *w, int n_out,
                      int n_in, int m, float beta);
void cal_k_q6kx_pack(const void *src, void *dst, int n_rows, int n);
void cal_k_q6kx_unpack(const void *src, void *dst, int n_rows, int n);
void cal_k_q6kx_pack_inplace(void *m, int n_rows, int n, void *scratch);
void cal_k_q6kx_rows(const void *m, int n_rows, int r0, int count, int n, void *out);
int  cal_k_q6kx_apply(float *y, int ldy, const cal_q8_k_block *xq, const void *w, int n_out,
                      int n_in, int m, float beta);

/* ---- every quantized format through one interface (products.c) ----------
 * How the step multiplies a matrix W [n_out][n_in] held in a quantized
 * dtype by m rows of X, at any m (decode batches and prefill alike):
 *  1. at open, cal_k_mm_packed(dtype) says whether this CPU holds the
 *     format's matrices interleaved for its VNNI kernel (Q8_0, Q4_0, Q4_1,
 *     Q5_0, Q5_1, Q4_K, Q5_K and Q6_K on AVX-512 VNNI); if so, each matrix
 *     is converted in place once by cal_k_mm_pack (cal_k_mm_pack_scratch
 *     bytes of scratch), the same bytes in another order. Readers of whole
 *     rows in the block layout (the embedding lookup, export, a dequantized
 *     prefill tile) take them through cal_k_mm_rows, which returns the rows
 *     in place where the matrix is not packed and unpacks them into out
 *     (count rows) where it is;
 *  2. per product, cal_k_mm_xbytes(dtype, n_in, m) bytes of rounded
 *     activations (64-byte aligned) are filled once by cal_k_mm_round (by
 *     every thread for itself, or once for all);
 *  3. any number of pieces of W's rows, each starting on a multiple of 16
 *     rows of the matrix, are multiplied by cal_k_mm_apply: Y = beta·Y +
 *     X̂·Wᵀ, beta 0 never reading Y.
 * cal_k_mm_xbytes is 0 where the format has no integer product on this CPU
 * at this m: F32, F16 and BF16; Q8_0 without VNNI; and every format without
 * VNNI at m > CAL_K_MM_DECODE, where SGEMM over dequantized rows is the
 * faster path. The caller then keeps its own path (cal_k_matmul for decode
 * batches, SGEMM or cal_k_gemm_bf16 for prefill). Formats of one
 * cal_k_mm_xkind round X to the same bytes, so a caller may round once for
 * several matrices that read the same X (Q4_K and Q6_K in a Q4_K_M file).
 * Numbers: Q8_0 as cal_k_q8x_product; Q4_0, Q4_1, Q5_0, Q5_1 as
 * cal_k_q32_dot_q8 (Q4_0 therefore on rounded activations, where
 * cal_k_matmul keeps them in F32); the K-quants as cal_k_kq_dot_q8k; each
 * the same bits whether packed or not. */
enum { CAL_K_X_NONE = 0, CAL_K_X_Q8X, CAL_K_X_Q8_1, CAL_K_X_Q8_K };
#define CAL_K_MM_DECODE 16
int         cal_k_mm_packed(int dtype);
size_t      cal_k_mm_pack_scratch(int dtype, int n_in);
void        cal_k_mm_pack(int dtype, void *w, int n_rows, int n_in, void *scratch);
const void *cal_k_mm_rows(int dtype, const void *w, int n_rows, int r0, int count, int n_in,
                          void *out);
int         cal_k_mm_xkind(int dtype);
size_t      cal_k_mm_xbytes(int dtype, int n_in, int m);
void        cal_k_mm_round(int dtype, const float *x, int ldx, int n_in, int m, void *xq);
void        cal_k_mm_apply(int dtype, float *y, int ldy, const void *xq, const void *w,
                           int n_out, int n_in, int m, float beta);

/* "avx512+vnni", "avx512" or "portable": the path cal_k_matmul takes on
 * this CPU (VNNI: the Q8_0 integer kernel). */
const char *cal_k_isa(void);
/* "avx512", "avx2" or "portable": the path the element-wise kernels and the
 * attention take on this CPU (the portable decode product sums through
 * cal_k_dot, so it takes this one's vectors). */
const char *cal_k_elementwise_isa(void);
/* Reads n bytes with the same vector loads as the products and returns a
 * checksum (so the reads cannot be skipped): the read-bandwidth probe. */
uint64_t cal_k_read_bytes(const void *p, size_t n);

#endif
