/* caliper reference engine — read-only views of an open engine's weights and
 * KV cache, for the engine's own unit tests (a naive whole-model reference
 * recomputes the forward pass from the same tensors). Not installed. */
#ifndef CALIPER_ENGINE_INTERNAL_H
#define CALIPER_ENGINE_INTERNAL_H
#include "engine/engine.h"
#include <stdio.h>

/* The embedding row enters the residual stream scaled by this. With tied
 * embeddings an unscaled row would make every token vote for itself in the
 * logits and greedy output would collapse into repeats; the first RMSNorm is
 * scale-invariant, so the layers still see the token in full. */
#define CAL_ENGINE_EMBED_SCALE 0.1f

/* One weight tensor of the model as the engine holds it: rows r0 ..
 * r0+rows−1 of a matrix of m_rows rows × n_in weights in `dtype` (Q, K and
 * V, and gate and up, share one matrix where their formats match); an MoE
 * tensor is n_mats such matrices, one per expert, mat_bytes apart. Each
 * tensor has its own format: a GGUF file's tensors are held as stored.
 * Read its rows through cal_engine_rows, which hands them out in the
 * format's block layout whether or not the engine holds them interleaved
 * for a vector kernel (packed != 0). */
typedef struct cal_tensor_view {
    const void *m;           /* the matrix (expert 0's); NULL: no such tensor */
    int dtype;               /* CAL_DTYPE_* */
    int packed;              /* held interleaved (engine_impl.h's PK_*) */
    int n_in;
    int64_t m_rows;          /* rows of the matrix (one expert's) */
    int64_t r0, rows;        /* this tensor's rows within it */
    int n_mats;              /* experts; 1 for a dense tensor */
    size_t mat_bytes;        /* from one expert's matrix to the next */
} cal_tensor_view;

/* Norms are F32. */
typedef struct cal_layer_weights {
    const float *attn_norm;  /* [dim] */
    cal_tensor_view q, k, v; /* [q_dim][dim], [kv_dim][dim], [kv_dim][dim] */
    cal_tensor_view o;       /* [dim][q_dim] */
    const float *ffn_norm;   /* [dim] */
    cal_tensor_view gate, up;/* [ffn][dim] (per expert) */
    cal_tensor_view down;    /* [dim][ffn] (per expert) */
    cal_tensor_view router;  /* MoE: [n_experts][dim]; .m NULL when dense */
    const float *bqkv;       /* qwen2: [q_dim + 2·kv_dim] biases added to the
                                QKV product; NULL otherwise */
    const float *q_norm, *k_norm; /* qwen3: [head_dim] per-head RMSNorm
                                weights of Q and K; NULL otherwise */
} cal_layer_weights;

typedef struct cal_model_weights {
    cal_tensor_view embedding;  /* [vocab][dim] */
    cal_tensor_view output;     /* [vocab][dim]; the embedding's matrix when tied */
    const float *final_norm; /* [dim] */
    int n_layers;
    const float *rope_freqs; /* [head_dim/2] Llama 3's RoPE factors, or NULL */
    float embed_scale;       /* the embedding row enters the stream times this:
                                CAL_ENGINE_EMBED_SCALE, or 1 for GGUF weights
                                (their token_embd holds the scaled rows) */
} cal_model_weights;

/* The model's matrices by kind: the index of each in a plan of formats
 * (cal_gguf_held_dtypes) is CAL_T_EMB, CAL_T_OUT, or CAL_T_AT(layer, kind). */
enum { CAL_T_Q, CAL_T_K, CAL_T_V, CAL_T_O, CAL_T_GATE, CAL_T_UP, CAL_T_DOWN, CAL_T_ROUTER,
       CAL_T_KINDS };
#define CAL_T_EMB 0
#define CAL_T_OUT 1
#define CAL_T_AT(l, k) (2 + (size_t)(l) * CAL_T_KINDS + (size_t)(k))
#define CAL_T_COUNT(n_layers) (2 + (size_t)(n_layers) * CAL_T_KINDS)

void cal_engine_weights(const cal_engine *e, cal_model_weights *m);
void cal_engine_layer_weights(const cal_engine *e, int layer, cal_layer_weights *w);
/* Rows r .. r+count−1 of tensor t (of expert `expert`), in t's block
 * layout: the engine's own memory where it holds them so, else unpacked
 * into buf (count rows). */
const void *cal_engine_rows(const cal_engine *e, const cal_tensor_view *t, int expert,
                            int64_t r, int64_t count, void *buf);

/* The step's own products, split across the engine's pool exactly as
 * inside a step: Y[m][…] (row stride ldy) = beta·Y + X[m][n_in] · Wᵀ for
 * layer `layer`'s QKV (Q, K, V into one row of q_dim + 2·kv_dim), output
 * projection, gate/up (of expert `expert`: gate into columns 0 .. ffn−1, up
 * after), down projection (of `expert`), router, or the logits (layer
 * ignored), each matrix in its own format. Its weight bytes per call in
 * *bytes when non-NULL. And the pool itself. For the op micro-benchmark
 * (engine/opbench.c), which must time each op with the kernels and threads
 * the step uses. */
enum { CAL_MM_QKV, CAL_MM_O, CAL_MM_W13, CAL_MM_W2, CAL_MM_ROUTER, CAL_MM_LOGITS };
void cal_engine_product(cal_engine *e, int kind, int layer, int expert, float *y, int ldy,
                        const float *x, int ldx, int m, float beta);
double cal_engine_product_bytes(const cal_engine *e, int kind, int layer);
/* Token `tok`'s embedding row, as the step reads it: dequantized, times
 * the embedding scale, into out[dim]. */
void cal_engine_embed(cal_engine *e, int32_t tok, float *out);
struct cal_pool;
struct cal_pool *cal_engine_pool(cal_engine *e);

/* The memory slot `slot`'s keys and values live in (and no other slot's):
 * *bytes from *start, whole pages (2 MiB ones for a part of 1 MiB or more). */
void cal_engine_kv_slot(const cal_engine *e, int slot, const void **start, size_t *bytes);

/* n bytes on 2 MiB pages where the kernel grants them, as the weights are
 * held (free with free()): bench/engine's read roofline reads such a buffer
 * so that it meets the same page walks as the decode it bounds. */
void *cal_engine_huge_alloc(size_t n);

/* A new file beside path (engine/file_replace.c), to be renamed over it
 * once complete, so a reader never sees half a file and a failure leaves the
 * old one as it was. An existing path that is not a regular file is
 * refused, naming what it is. The name is written to tmp[tmp_len]; NULL
 * with *rc and why set on failure. */
FILE *cal_open_replacement(const char *path, char *tmp, size_t tmp_len, char *why, size_t why_len,
                           int *rc);

#endif
