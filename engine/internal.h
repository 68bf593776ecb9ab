/* caliper reference engine — read-only views of an open engine's weights and
 * KV cache, for the engine's own unit tests (a naive whole-model reference
 * recomputes the forward pass from the same tensors). Not installed. */
#ifndef CALIPER_ENGINE_INTERNAL_H
#define CALIPER_ENGINE_INTERNAL_H
#include "engine/engine.h"

/* The embedding row enters the residual stream scaled by this. With tied
 * embeddings an unscaled row would make every token vote for itself in the
 * logits and greedy output would collapse into repeats; the first RMSNorm is
 * scale-invariant, so the layers still see the token in full. */
#define CAL_ENGINE_EMBED_SCALE 0.1f

/* Matrices are rows in `dtype` (cal_k_row_bytes / cal_k_dequantize_row of
 * kernels.h read them), except that a Q8_0 engine on AVX-512 VNNI holds
 * them interleaved for its decode kernel (q8x.c): read their rows through
 * cal_engine_rows, which hands them out in the block layout either way.
 * Norms are F32. */
typedef struct cal_layer_weights {
    int dtype;               /* CAL_DTYPE_* of the matrices */
    const float *attn_norm;  /* [dim] */
    const void *wqkv;        /* [q_dim + 2·kv_dim][dim]: Q rows, then K, then V */
    const void *wo;          /* [dim][q_dim] */
    const float *ffn_norm;   /* [dim] */
    const void *w13;         /* dense: [2·ffn][dim], gate rows then up rows;
                                MoE: [n_experts][2·ffn][dim] */
    const void *w2;          /* dense: [dim][ffn]; MoE: [n_experts][dim][ffn] */
    const void *router;      /* MoE: [n_experts][dim]; NULL when dense */
    const float *bqkv;       /* qwen2: [q_dim + 2·kv_dim] biases added to the
                                QKV product; NULL otherwise */
    const float *q_norm, *k_norm; /* qwen3: [head_dim] per-head RMSNorm
                                weights of Q and K; NULL otherwise */
} cal_layer_weights;

typedef struct cal_model_weights {
    int dtype;               /* CAL_DTYPE_* of the matrices */
    const void *embedding;   /* [vocab][dim] */
    const void *output;      /* [vocab][dim]; == embedding when tied */
    const float *final_norm; /* [dim] */
    int n_layers;
    const float *rope_freqs; /* [head_dim/2] Llama 3's RoPE factors, or NULL */
    float embed_scale;       /* the embedding row enters the stream times this:
                                CAL_ENGINE_EMBED_SCALE, or 1 for GGUF weights
                                (their token_embd holds the scaled rows) */
} cal_model_weights;

void cal_engine_weights(const cal_engine *e, cal_model_weights *m);
void cal_engine_layer_weights(const cal_engine *e, int layer, cal_layer_weights *w);
/* Rows r0 .. r0+count−1 of matrix m (as the accessors above give it, of
 * n_rows × n_in; an MoE matrix one expert at a time: m at the expert's first
 * row, n_rows its rows), count rows in the dtype's own layout: m's own rows
 * where the engine holds them so, else unpacked into buf (count rows). */
const void *cal_engine_rows(const cal_engine *e, const void *m, int64_t n_rows, int64_t r0,
                            int64_t count, int n_in, void *buf);

/* The step's own matrix product, split across the engine's pool exactly as
 * inside a step: Y[m][n_out] (row stride ldy) = beta·Y + X[m][n_in] · Wᵀ,
 * W rows in the engine's dtype (as cal_engine_layer_weights gives them).
 * And the pool itself. For the op micro-benchmark (engine/opbench.c), which
 * must time each op with the kernels and threads the step uses. */
struct cal_pool;
void cal_engine_matmul(cal_engine *e, float *y, int ldy, const float *x, int ldx,
                       const void *w, int n_out, int n_in, int m, float beta);
struct cal_pool *cal_engine_pool(cal_engine *e);

/* n bytes on 2 MiB pages where the kernel grants them, as the weights are
 * held (free with free()): bench/engine's read roofline reads such a buffer
 * so that it meets the same page walks as the decode it bounds. */
void *cal_engine_huge_alloc(size_t n);

#endif
