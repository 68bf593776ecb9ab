/* caliper reference engine — the engine's own record, shared by the files
 * that build it (weights.c: allocation, weights, open and close) and run it
 * (step.c: the forward step and its profile). Not installed. */
#ifndef CALIPER_ENGINE_IMPL_H
#define CALIPER_ENGINE_IMPL_H
#include "engine/engine.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include <stdint.h>
#include <stddef.h>

enum {
    OP_EMBED, OP_NORM, OP_ROPE, OP_ATTN, OP_PROJ, OP_ACT,
    OP_ROUTER, OP_EXPERTS, OP_LOGITS, OP_SAMPLE, OP_COUNT
};

typedef struct op_prof {
    int64_t ns, calls;
    double  flops, bytes;
} op_prof;

#define PROF_MAX_B 16   /* decode batches profiled one by one: the kernels' range */

/* How a matrix's rows are laid out: the format's own block layout, or
 * interleaved for an AVX-512 VNNI kernel, packed in place at open: Q8_0
 * rows in fours (q8x.c, its own decode kernel), or any other quantized
 * format but Q4_0 in sixteens through kernels.h's one interface
 * (products.c: Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K; cal_held_packed). */
enum { PK_NONE = 0, PK_Q8X, PK_MM };

/* One weight matrix as the engine holds it: n_mat matrices (an MoE
 * tensor's experts; 1 otherwise) of rows × n_in weights in dt, one after
 * the other. Each matrix is held in its own format (a GGUF file's, as
 * stored), so one product reads one format. */
typedef struct mat {
    char  *w;                      /* [n_mat][rows] rows of n_in in dt */
    int    dt;                     /* CAL_DTYPE_* */
    int    pk;                     /* PK_*: the rows' layout */
    int    rows, n_in, n_mat;
    size_t rb;                     /* bytes of one row, in either layout */
} mat;

/* A product whose output columns come from up to three tensors (Q, K, V;
 * gate, up): neighbours in one format are one matrix (one pass over their
 * rows), the others apart; piece i writes output columns col[i] ... */
typedef struct prod {
    int n;                         /* matrices, 1..3 */
    mat m[3];
    int col[3];                    /* first output column of each */
    int n_sub;                     /* the tensors: Q, K, V or gate, up */
    int sub_mat[3], sub_r0[3], sub_rows[3]; /* each tensor's matrix, its
                                      first row there, and its rows */
} prod;

/* norms are F32; the matrices each in their own format */
typedef struct layer {
    float *attn_norm, *ffn_norm;
    float *bqkv;                   /* qwen2: [qkv_ld]; NULL otherwise */
    float *q_norm, *k_norm;        /* qwen3: [head_dim]; NULL otherwise */
    prod   qkv;                    /* Q, K, V rows → [qkv_ld] columns */
    prod   w13;                    /* gate, up rows → [2·ffn] (per expert) */
    mat    wo, w2, router;         /* router.w NULL when dense */
} layer;

struct cal_engine {
    cal_model_config c;
    int   max_seqs, max_step;
    int   hd, qd, kvd, qkv_ld;     /* head_dim, q width, kv width, QKV row */
    float embed_scale;             /* see cal_model_weights */
    char  *weights;                /* one allocation holding every tensor */
    size_t weight_bytes;
    mat   emb, out;                /* [vocab] rows of dim; out.w == emb.w when tied */
    int64_t params_dt[CAL_DTYPE_COUNT]; /* matrix weights held in each format */
    int   has_pk[3];               /* some matrix is held in layout PK_* */
    int   row_max;                 /* bytes of the longest row of a packed matrix */
    char  *rowbuf;                 /* with packed matrices: [threads][dq_rows]
                                      rows in the block layout, unpacked for
                                      prefill tiles and the embedding lookup
                                      (one row when only Q4_K is packed) */
    float *final_norm;             /* [dim] */
    float *dq;                     /* [threads][dq_rows][max_in]: a dequantized
                                      weight tile for prefill products (not F32) */
    int   dq_rows;
    int   max_in;                  /* the widest product input: max(dim, ffn) */
    char  *x8;                     /* with packed Q8_0 matrices, and with Q4_K
                                      or Q6_K ones (as Q8_K): [threads][x8_bytes] a decode
                                      batch's activations, rounded for it by
                                      each thread once a product */
    size_t x8_bytes;
    unsigned *x8_at;               /* [threads] the product each last rounded */
    unsigned x8_product;           /* products so far */
    float *xr;                     /* Q8_0: [S][max n_in] activations rounded to
                                      Q8_0 for prefill products; BF16: as
                                      cal_k_bf16_pairs; packed Q4_K: as Q8_K */
    int   bf16_gemm;               /* BF16 prefill on AVX512_BF16 (dq: its
                                      weight panel) */
    layer *layers;                 /* [n_layers] */
    char  *kv;                     /* the KV cache, slot by slot: each slot's
                                      keys [n_layers][n_kv][max_ctx][hd] then
                                      its values, each part on whole pages
                                      (2 MiB ones from 1 MiB up), so a
                                      sequence touches its own slot's pages
                                      only */
    size_t kv_part;                /* bytes of one slot's keys (or values) */
    size_t kv_map;                 /* bytes mapped (munmap) */
    int   *slot_len;               /* [max_seqs] positions filled */
    float *rope_cos, *rope_sin;    /* [max_ctx][hd/2] */
    float *rope_ff;                /* with rope_freqs: [hd/2] each frequency's
                                      divisor (read from the file, or Llama 3's
                                      rule); NULL otherwise */
    /* activations for the largest step: S = max_step tokens */
    float *x, *xn;                 /* [S][dim] residual stream, normed */
    float *qkv;                    /* [S][qkv_ld] */
    float *att;                    /* [S][qd] */
    float *h13;                    /* [S][2·ffn] */
    float *act;                    /* [S][ffn] */
    float *scores;                 /* [threads][ATT_ROWS][max_ctx] */
    float *qpack, *opack;          /* [threads][ATT_ROWS][head_dim] */
    int   att_nb;                  /* query rows per GEMM attention block */
    int   *rowpos;                 /* [S] position of each row of the step */
    int   *erow;                   /* [max_seqs] each entry's first row */
    cal_pool *pool;                /* every core: matrix products, attention */
    int   nt;                      /* threads in the pool */
    float *gin, *gout;             /* MoE gather/scatter [S][dim] */
    float *rlogits, *rprobs;       /* [S][n_experts], [n_experts] */
    int   *topi;                   /* [S][top_k] */
    float *topw;                   /* [S][top_k] */
    int   *elist;                  /* [n_experts][S] token rows per expert */
    float *ewt;                    /* [n_experts][S] their weights */
    int   *ecount;                 /* [n_experts] */
    float *lhid;                   /* [max_seqs][dim] rows that want logits */
    float *lout;                   /* [max_seqs][vocab] */
    int   *lrow;                   /* [max_seqs] */
    unsigned char *seen;           /* [max_seqs] duplicate-slot check */
    void  *sscratch;               /* sampler scratch */
    op_prof prof[OP_COUNT];
    int64_t steps, step_tokens, step_ns;
    /* decode-only steps by batch size (entries of one token each), so the
     * profile shows where time goes at each B; [0] unused */
    op_prof prof_b[PROF_MAX_B + 1][OP_COUNT];
    int64_t steps_b[PROF_MAX_B + 1], step_ns_b[PROF_MAX_B + 1];
    int   cur_b;                   /* the running step's batch, 0 = not decode-only */
    char  err[160];
};

/* Q and K rows are drawn QK_GAIN times larger than V rows: sharper attention
 * makes the output depend on position and context, not only on the last token. */
#define QK_GAIN 2.0f
/* GEMM attention stacks the query heads of one KV head: a block holds
 * att_nb query rows × group heads ≈ ATT_ROWS rows of Q, one product with K */
#define ATT_ROWS 192
/* products of at most this many rows are decode batches (matmul1) */
#define SMALL_M 16
#define ATT_GEMM_MIN 8   /* chunks at least this long use GEMM attention */

/* Does a decode product on dt take X rounded to Q8_K (cal_k_kq_round,
 * cal_k_kq_apply)? The one place the engine asks it: its buffers
 * (weights.c) and its dispatch (step.c). */
/* Whether the engine holds a matrix of format dt interleaved (PK_Q8X or
 * PK_MM) on this CPU: cal_k_mm_packed, but for Q4_0, whose products keep
 * X in F32 (cal_k_matmul; tiles of dequantized rows in prefill) rather
 * than rounding it to Q8_0 as q32.c's kernels do. */
static inline int cal_held_packed(int dt)
{
    return dt != CAL_DTYPE_Q4_0 && cal_k_mm_packed(dt);
}

static inline int cal_takes_q8k(int dt)
{
    return dt == CAL_DTYPE_Q4_K || dt == CAL_DTYPE_Q5_K || dt == CAL_DTYPE_Q6_K;
}

/* Rows r0 .. r0+count−1 of expert `expert`'s matrix of m in the format's
 * block layout: m's own memory, or unpacked into buf (weights.c). */
const void *cal_engine_mat_rows(const mat *m, int expert, int64_t r0, int64_t count,
                                void *buf);

/* The op names of the profile, by OP_* (step.c). */
extern const char *const cal_engine_op_names[OP_COUNT];

#endif
