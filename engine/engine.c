/* caliper reference engine — presets and shape arithmetic, the one-time
 * allocation of weights / KV cache / activations, the batched forward step
 * (one weight pass per step for every sequence in it: the engine's own
 * kernels for decode-sized products, OpenBLAS for prefill) and the per-op
 * profile. */
#include "engine/engine.h"
#include "engine/internal.h"
#include "engine/gguf.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

/* ---- shapes ------------------------------------------------------------ */

static const cal_model_config presets[] = {
    /* name    dim layers heads kv  ffn   experts topk vocab   ctx  tied theta    eps   seed dtype weights embed_scale arch */
    {"tiny",   128, 4,  4,  2,  384,  0, 0, 4096,   512,  1, 10000.0f,   1e-5f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA},
    {"small",  512, 8,  8,  4,  1408, 0, 0, 32000,  1024, 1, 10000.0f,   1e-5f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA},
    {"base",   768, 12, 12, 4,  2048, 0, 0, 32000,  2048, 1, 10000.0f,   1e-5f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA},
    {"moe",    512, 8,  8,  4,  1024, 8, 2, 151936, 2048, 1, 1000000.0f, 1e-6f, 42, CAL_DTYPE_F32, "", 0, CAL_ARCH_LLAMA},
};

int cal_model_preset(const char *name, cal_model_config *out)
{
    if (!name || !out)
        return CAL_EINVAL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i];
            return CAL_OK;
        }
    return CAL_ENOTFOUND;
}

static const char *const dtype_names[CAL_DTYPE_COUNT] = {"f32", "f16", "bf16", "q8_0",
                                                                  "q4_0", "q4_k", "q6_k"};

static const char *const arch_names[CAL_ARCH_COUNT] = {"llama", "qwen2", "qwen3"};

const char *cal_arch_name(int arch)
{
    return arch >= 0 && arch < CAL_ARCH_COUNT ? arch_names[arch] : NULL;
}

int cal_arch_parse(const char *s)
{
    for (int i = 0; s && i < CAL_ARCH_COUNT; i++)
        if (strcasecmp(s, arch_names[i]) == 0)
            return i;
    return -1;
}

const char *cal_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < CAL_DTYPE_COUNT ? dtype_names[dtype] : NULL;
}

int cal_dtype_parse(const char *s)
{
    for (int i = 0; s && i < CAL_DTYPE_COUNT; i++)
        if (strcasecmp(s, dtype_names[i]) == 0)
            return i;
    return -1;
}

double cal_dtype_bytes_per_weight(int dtype)
{
    return dtype >= 0 && dtype < CAL_DTYPE_COUNT
               ? (double)cal_k_row_bytes(dtype, CAL_QK_K) / CAL_QK_K
               : 0.0;
}

/* Weights of one layer held in matrices (the dtype's format); the two norms
 * (2·dim floats) are F32 in every format. */
static int64_t layer_matrix_params(const cal_model_config *c, int active_only)
{
    int64_t d = c->dim, hd = c->dim / c->n_heads;
    int64_t qd = d, kvd = hd * c->n_kv_heads, f = c->ffn_dim;
    int64_t p = d * (qd + 2 * kvd) + qd * d;
    if (c->n_experts > 0) {
        int64_t ne = active_only ? c->top_k : c->n_experts;
        p += (int64_t)c->n_experts * d + ne * 3 * d * f;
    } else {
        p += 3 * d * f;
    }
    return p;
}

/* F32 vectors of a layer beyond its two norms: qwen2's QKV biases, qwen3's
 * Q and K head norms */
static int64_t layer_extra_params(const cal_model_config *c)
{
    int64_t hd = c->dim / c->n_heads;
    if (c->arch == CAL_ARCH_QWEN2)
        return c->dim + 2 * hd * c->n_kv_heads;
    if (c->arch == CAL_ARCH_QWEN3)
        return 2 * hd;
    return 0;
}

static int64_t layer_params(const cal_model_config *c, int active_only)
{
    return 2 * (int64_t)c->dim + layer_extra_params(c) + layer_matrix_params(c, active_only);
}

/* The row length every matrix of a format must be a multiple of: whole
 * blocks, and 32 for F16 and BF16 (their vector kernels' step). */
static int dtype_row_unit(int dtype)
{
    int b = cal_k_block_elems(dtype);
    return b > CAL_Q8_0_BLOCK ? b : CAL_Q8_0_BLOCK;
}

int cal_model_validate(const cal_model_config *c, const char **why)
{
    const char *w = NULL;
    if (!c)
        w = "config";
    else if (c->dim < 2 || c->dim > 65536)
        w = "dim";
    else if (c->n_layers < 1 || c->n_layers > 1024)
        w = "n_layers";
    else if (c->n_heads < 1 || c->dim % c->n_heads != 0 || (c->dim / c->n_heads) % 2 != 0)
        w = "n_heads";
    else if (c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads != 0)
        w = "n_kv_heads";
    else if (c->ffn_dim < 1 || c->ffn_dim > 1 << 20)
        w = "ffn_dim";
    else if (c->n_experts < 0 || c->n_experts > 1024)
        w = "n_experts";
    else if (c->n_experts > 0 ? (c->top_k < 1 || c->top_k > c->n_experts) : c->top_k != 0)
        w = "top_k";
    else if (c->vocab < 257 || c->vocab > 1 << 24)
        w = "vocab";
    else if (c->max_ctx < 1 || c->max_ctx > 1 << 20)
        w = "max_ctx";
    else if (c->tied_embeddings != 0 && c->tied_embeddings != 1)
        w = "tied_embeddings";
    else if (!(c->rope_theta > 1.0f) || !isfinite(c->rope_theta))
        w = "rope_theta";
    else if (!(c->norm_eps > 0.0f) || !(c->norm_eps < 1.0f))
        w = "norm_eps";
    else if (!memchr(c->weights, '\0', sizeof c->weights))
        w = "weights";
    else if (!(c->embed_scale >= 0.0f) || !isfinite(c->embed_scale))
        w = "embed_scale";
    else if (cal_model_n_params(c) > (int64_t)4 << 30)
        w = "n_params";
    else if (c->dtype < 0 || c->dtype >= CAL_DTYPE_COUNT)
        w = "dtype";
    else if (c->arch < 0 || c->arch >= CAL_ARCH_COUNT ||
             (c->arch != CAL_ARCH_LLAMA && c->n_experts > 0))
        w = "arch";     /* the qwen architectures here are the dense ones */
    else if (c->dtype != CAL_DTYPE_F32 && c->dim % dtype_row_unit(c->dtype) != 0)
        w = "dim";      /* rows are whole blocks (32 weights; 256 for K-quants) */
    else if (c->dtype != CAL_DTYPE_F32 && c->ffn_dim % dtype_row_unit(c->dtype) != 0)
        w = "ffn_dim";
    if (why)
        *why = w;
    return w ? CAL_EINVAL : CAL_OK;
}

int64_t cal_model_n_params(const cal_model_config *c)
{
    int64_t emb = (int64_t)c->vocab * c->dim;
    return emb * (c->tied_embeddings ? 1 : 2) + c->dim +
           (int64_t)c->n_layers * layer_params(c, 0);
}

int64_t cal_model_decode_bytes_per_token(const cal_model_config *c)
{
    int64_t d = c->dim;
    /* matrices in the dtype: per layer, the output projection, one embedding row */
    int64_t mats = (int64_t)c->n_layers * layer_matrix_params(c, 1) +
                   (int64_t)c->vocab * d + d;
    int64_t norms = (int64_t)c->n_layers * (2 * d + layer_extra_params(c)) + d; /* F32 */
    double bpw = cal_dtype_bytes_per_weight(c->dtype);
    return (int64_t)((double)mats * bpw) + norms * (int64_t)sizeof(float);
}

int64_t cal_model_kv_bytes_per_token(const cal_model_config *c)
{
    int64_t hd = c->dim / c->n_heads;
    return 2 * (int64_t)c->n_layers * c->n_kv_heads * hd * (int64_t)sizeof(float);
}

double cal_model_flops_per_token(const cal_model_config *c, int pos)
{
    double d = c->dim, hd = (double)c->dim / c->n_heads;
    double qd = d, kvd = hd * c->n_kv_heads, f = c->ffn_dim;
    double mac = d * (qd + 2 * kvd) + qd * d;      /* QKV and output projections */
    mac += 2.0 * qd * (pos + 1);                   /* scores and weighted sum */
    if (c->n_experts > 0)
        mac += (double)c->n_experts * d + c->top_k * 3 * d * f;
    else
        mac += 3 * d * f;
    return 2.0 * (c->n_layers * mac + (double)c->vocab * d);
}

/* ---- the engine -------------------------------------------------------- */

enum {
    OP_EMBED, OP_NORM, OP_ROPE, OP_ATTN, OP_PROJ, OP_ACT,
    OP_ROUTER, OP_EXPERTS, OP_LOGITS, OP_SAMPLE, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
    "embedding", "norm", "rope", "attention", "dense_proj", "activation",
    "moe_router", "moe_experts", "logits", "sampling",
};

typedef struct op_prof {
    int64_t ns, calls;
    double  flops, bytes;
} op_prof;

#define PROF_MAX_B 16   /* decode batches profiled one by one: the kernels' range */

/* norms are F32; the matrices are rows in the engine's dtype (kernels.h) */
typedef struct layer {
    float *attn_norm, *ffn_norm;
    float *bqkv;                   /* qwen2: [qkv_ld]; NULL otherwise */
    float *q_norm, *k_norm;        /* qwen3: [head_dim]; NULL otherwise */
    char  *wqkv, *wo, *w13, *w2, *router;
} layer;

struct cal_engine {
    cal_model_config c;
    int   max_seqs, max_step;
    int   hd, qd, kvd, qkv_ld;     /* head_dim, q width, kv width, QKV row */
    int   dt;                      /* CAL_DTYPE_* of the matrices */
    float embed_scale;             /* see cal_model_weights */
    char  *weights;                /* one allocation holding every tensor */
    size_t weight_bytes;
    char  *emb, *out;              /* [vocab] rows of dim, in dt */
    int   q8x;                     /* Q8_0 on AVX-512 VNNI: every matrix is
                                      held interleaved for the decode kernel
                                      (q8x.c), in place of the block layout */
    char  *q8rows;                 /* with q8x: [threads][dq_rows] rows in the
                                      block layout, unpacked for prefill tiles
                                      and the embedding lookup */
    float *final_norm;             /* [dim] */
    float *dq;                     /* [threads][dq_rows][max_in]: a dequantized
                                      weight tile for prefill products (not F32) */
    int   dq_rows;
    int   max_in;                  /* the widest product input: max(dim, ffn) */
    char  *x8;                     /* with q8x: [threads][x8_bytes] a decode
                                      batch's activations, rounded for it by
                                      each thread once a product */
    size_t x8_bytes;
    unsigned *x8_at;               /* [threads] the product each last rounded */
    unsigned x8_product;           /* products so far */
    float *xr;                     /* Q8_0: [S][max n_in] activations rounded to
                                      Q8_0 for prefill products; BF16: as
                                      cal_k_bf16_pairs */
    int   bf16_gemm;               /* BF16 prefill on AVX512_BF16 (dq: its
                                      weight panel) */
    layer *layers;                 /* [n_layers] */
    float *kcache, *vcache;        /* [n_layers][max_seqs][n_kv][max_ctx][hd] */
    int   *slot_len;               /* [max_seqs] positions filled */
    float *rope_cos, *rope_sin;    /* [max_ctx][hd/2] */
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

/* The engine runs as many threads as OpenBLAS was set to use when the first
 * engine opened (openblas_set_num_threads, OPENBLAS_NUM_THREADS; default all
 * cores). Its pool splits every product across them and OpenBLAS runs one
 * thread inside each part, so the two never oversubscribe; the last engine
 * to close gives OpenBLAS its setting back. */
static pthread_mutex_t blas_mu = PTHREAD_MUTEX_INITIALIZER;
static int blas_users, blas_threads;

static int blas_take_threads(void)
{
    pthread_mutex_lock(&blas_mu);
    if (blas_users++ == 0) {
        blas_threads = openblas_get_num_threads();
        if (blas_threads < 1)
            blas_threads = 1;
        if (blas_threads > 64)
            blas_threads = 64;
        openblas_set_num_threads(1);
    }
    int n = blas_threads;
    pthread_mutex_unlock(&blas_mu);
    return n;
}

static void blas_give_threads(void)
{
    pthread_mutex_lock(&blas_mu);
    if (blas_users > 0 && --blas_users == 0)
        openblas_set_num_threads(blas_threads);
    pthread_mutex_unlock(&blas_mu);
}

/* 64-byte aligned and zeroed: activations and scratch */
static void *xalloc(size_t n)
{
    size_t r = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, r ? r : 64);
    if (p)
        memset(p, 0, r ? r : 64);
    return p;
}

/* Weights sit on 2 MiB pages where the kernel offers them (transparent huge
 * pages on request): a decode step streams every weight once, and with 4 KiB
 * pages it would also walk a page table entry per 4 KiB read. */
enum { HUGE_PAGE = 2 << 20 };
void *cal_engine_huge_alloc(size_t n)
{
    size_t huge = HUGE_PAGE;
    size_t r = (n + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, r);
#ifdef MADV_HUGEPAGE
    if (p)
        madvise(p, r, MADV_HUGEPAGE);
#endif
    return p;
}

/* The KV cache: calloc hands large blocks over as untouched zero pages, so
 * the process's resident memory grows with the positions actually cached
 * (what a context-length memory fit measures), in 2 MiB steps where the
 * kernel grants huge pages. A decode step reads a short run of rows from
 * each sequence's KV head in every layer; on 4 KiB pages each run costs its
 * own page walks, and their TLB misses slow the weights' stream as well.
 * In-process A/B on base Q8_0, 17 slots, batch 8: the step 1.13-1.19x
 * faster on 2 MiB pages in four runs (attention 0.91-0.95 -> 0.66-0.81
 * ms), within 2 % in four others (the kernel had no huge pages free, or
 * the runs fit the TLB). The calloc'd block's whole 2 MiB pages are asked
 * for. */
static void *lazy_alloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
#ifdef MADV_HUGEPAGE
    uintptr_t huge = HUGE_PAGE, a = ((uintptr_t)p + huge - 1) & ~(huge - 1),
              b = ((uintptr_t)p + n) & ~(huge - 1);
    if (p && b > a)
        madvise((void *)a, b - a, MADV_HUGEPAGE);
#endif
    return p;
}

const cal_model_config *cal_engine_config(const cal_engine *e)
{
    return e ? &e->c : NULL;
}

int cal_engine_max_seqs(const cal_engine *e) { return e ? e->max_seqs : 0; }
int cal_engine_max_step_tokens(const cal_engine *e) { return e ? e->max_step : 0; }
const char *cal_engine_last_error(const cal_engine *e) { return e ? e->err : ""; }

typedef struct fill_job {
    void *p;          /* F32 floats, or rows in the dtype */
    int64_t n;        /* elements */
    int dt;
    uint64_t key;
    float std, mean;
} fill_job;

static void fill_part(void *a, int tid, int nt)
{
    const fill_job *j = a;
    if (j->dt == CAL_DTYPE_F32) {
        float *p = j->p;
        int64_t b0 = j->n * tid / nt, b1 = j->n * (tid + 1) / nt;
        for (int64_t i = b0; i < b1; i++)
            p[i] = j->mean + cal_k_normal_at(j->key, (uint64_t)i) * j->std;
        return;
    }
    /* whole blocks of the format (rows are whole blocks), each drawn in F32 and
     * stored in the dtype: the same values as the F32 model's, rounded */
    const int G = dtype_row_unit(j->dt);   /* whole blocks of the format */
    int64_t nb = j->n / G;
    int64_t b0 = nb * tid / nt, b1 = nb * (tid + 1) / nt;
    size_t gb = cal_k_row_bytes(j->dt, G);
    float tmp[CAL_QK_K];
    for (int64_t b = b0; b < b1; b++) {
        for (int i = 0; i < G; i++)
            tmp[i] = j->mean + cal_k_normal_at(j->key, (uint64_t)(b * G + i)) * j->std;
        cal_k_quantize_row(j->dt, tmp, (char *)j->p + (size_t)b * gb, G);
    }
}

/* every element is a pure function of (key, index), so the cores can split
 * a tensor without changing a single value */
static void fill_job_run(cal_engine *e, void *p, int64_t n, int dt, uint64_t key,
                         float mean, float std)
{
    fill_job j = {p, n, dt, key, std, mean};
    cal_pool_run(e->pool, fill_part, &j);
}
/* a matrix of rows × n_in in the engine's dtype; a norm vector in F32 */
#define fill(p, rows, n_in, key, std) \
    fill_job_run(e, p, (int64_t)(rows) * (n_in), e->dt, key, 0.0f, std)
#define fill_norm(p, n, key) fill_job_run(e, p, n, CAL_DTYPE_F32, key, 1.0f, 0.1f)

/* Weights are a pure function of (shape, seed): each tensor has its own key
 * derived from the seed and the tensor's index. Fan-in scaling keeps each
 * projection's output near unit variance; residual branches are damped by
 * 1/sqrt(2·layers) so the stream stays bounded at any depth. Other formats
 * store the F32 values rounded to the format. */
static void generate(cal_engine *e)
{
    const cal_model_config *c = &e->c;
    uint64_t s = c->seed;
    uint64_t tensor = 0;
#define KEY() (s ^ cal_k_splitmix64(&(uint64_t){ (tensor++) * 0x632be59bd9b4e019ull }))
    float emb_std = 2.0f / sqrtf((float)c->dim);
    float branch = 1.0f / sqrtf(2.0f * c->n_layers);
    int64_t d = c->dim, f = c->ffn_dim;
    fill(e->emb, c->vocab, d, KEY(), emb_std);
    uint64_t out_key = KEY();
    if (!c->tied_embeddings)
        fill(e->out, c->vocab, d, out_key, emb_std);
    fill_norm(e->final_norm, d, KEY());
    int ne = c->n_experts > 0 ? c->n_experts : 1;
    size_t rb = cal_k_row_bytes(e->dt, (int)d);
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        fill_norm(L->attn_norm, d, KEY());
        uint64_t kq = KEY();
        fill(L->wqkv, e->qd + e->kvd, d, kq, QK_GAIN / sqrtf((float)d));
        fill(L->wqkv + (size_t)(e->qd + e->kvd) * rb, e->kvd, d, kq ^ 1,
             1.0f / sqrtf((float)d));
        fill(L->wo, d, e->qd, KEY(), branch / sqrtf((float)e->qd));
        fill_norm(L->ffn_norm, d, KEY());
        fill(L->w13, ne * 2 * f, d, KEY(), 1.0f / sqrtf((float)d));
        fill(L->w2, ne * d, f, KEY(), branch / sqrtf((float)f));
        if (L->router)
            fill(L->router, c->n_experts, d, KEY(), 1.0f / sqrtf((float)d));
    }
    /* the qwen tensors after all of llama's, so the weights the
     * architectures share are the same for a seed */
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        if (L->bqkv)
            fill_job_run(e, L->bqkv, e->qkv_ld, CAL_DTYPE_F32, KEY(), 0.0f, 0.5f);
        if (L->q_norm) {
            fill_norm(L->q_norm, e->hd, KEY());
            fill_norm(L->k_norm, e->hd, KEY());
        }
    }
#undef KEY
}

/* Every Q8_0 matrix interleaved in place for the decode kernel (q8x.c):
 * the rows that prefill tiles, the embedding lookup and export need are
 * unpacked on the way (cal_k_q8x_rows), so the weights are held once.
 * Interleaved, a batch of 8 took 1.3× (768 inputs) to 1.5× (2048) more
 * multiply-adds a second than on the block rows, with the weights in cache.
 * A matrix's rows go in quads from its own first row (an MoE matrix one
 * expert at a time), and every product the engine asks for starts on a
 * multiple of 4 rows of one. */
static int q8x_pack_all(cal_engine *e)
{
    const cal_model_config *c = &e->c;
    int64_t d = c->dim, f = c->ffn_dim;
    int ne = c->n_experts > 0 ? c->n_experts : 1;
    void *scratch = malloc(4 * cal_k_row_bytes(CAL_DTYPE_Q8_0, e->max_in));
    if (!scratch)
        return CAL_ENOMEM;
#define PACK(p, rows, n_in) cal_k_q8x_pack_inplace(p, (int)(rows), (int)(n_in), scratch)
    PACK(e->emb, c->vocab, d);
    if (!c->tied_embeddings)
        PACK(e->out, c->vocab, d);
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        PACK(L->wqkv, e->qkv_ld, d);
        PACK(L->wo, d, e->qd);
        for (int x = 0; x < ne; x++) {
            PACK(L->w13 + (size_t)x * 2 * f * cal_k_row_bytes(e->dt, (int)d), 2 * f, d);
            PACK(L->w2 + (size_t)x * d * cal_k_row_bytes(e->dt, (int)f), d, f);
        }
        if (L->router)
            PACK(L->router, c->n_experts, d);
    }
#undef PACK
    free(scratch);
    e->q8x = 1;
    return CAL_OK;
}

const void *cal_engine_rows(const cal_engine *e, const void *m, int64_t n_rows, int64_t r0,
                            int64_t count, int n_in, void *buf)
{
    if (!e->q8x)
        return (const char *)m + (size_t)r0 * cal_k_row_bytes(e->dt, n_in);
    cal_k_q8x_rows(m, (int)n_rows, (int)r0, (int)count, n_in, buf);
    return buf;
}

void cal_engine_close(cal_engine **pe)
{
    if (!pe || !*pe)
        return;
    cal_engine *e = *pe;
    free(e->weights); free(e->q8rows); free(e->x8); free(e->x8_at); free(e->layers); free(e->kcache); free(e->vcache);
    free(e->slot_len); free(e->rope_cos); free(e->rope_sin);
    free(e->x); free(e->xn); free(e->qkv); free(e->att); free(e->h13);
    free(e->act); free(e->scores); free(e->gin); free(e->gout);
    free(e->qpack); free(e->opack); free(e->rowpos); free(e->erow);
    free(e->rlogits); free(e->rprobs); free(e->topi); free(e->topw);
    free(e->elist); free(e->ewt); free(e->ecount); free(e->lhid);
    free(e->lout); free(e->lrow); free(e->seen); free(e->sscratch); free(e->dq); free(e->xr);
    if (e->pool) {
        cal_pool_close(&e->pool);
        blas_give_threads();
    }
    free(e);
    *pe = NULL;
}

int cal_engine_open(const cal_model_config *c, int max_seqs, int max_step_tokens,
                    cal_engine **out)
{
    if (!out)
        return CAL_EINVAL;
    *out = NULL;
    if (cal_model_validate(c, NULL) != CAL_OK)
        return CAL_EINVAL;
    if (max_seqs < 1 || max_seqs > 4096 || max_step_tokens < 1 ||
        max_step_tokens > 1 << 16)
        return CAL_EINVAL;
    cal_engine *e = calloc(1, sizeof *e);
    if (!e)
        return CAL_ENOMEM;
    e->c = *c;
    e->c.name[sizeof e->c.name - 1] = 0;
    e->max_seqs = max_seqs;
    e->max_step = max_step_tokens;
    e->hd = c->dim / c->n_heads;
    e->qd = c->dim;
    e->kvd = e->hd * c->n_kv_heads;
    e->qkv_ld = e->qd + 2 * e->kvd;

    int64_t d = c->dim, f = c->ffn_dim, V = c->vocab;
    int ne = c->n_experts > 0 ? c->n_experts : 1;
    e->dt = c->dtype;
    e->max_in = (int)(d > f ? d : f);
    /* every tensor rounded up to 64 bytes so each starts cache-line aligned;
     * a matrix is rows × n_in in the dtype */
#define R64(n) ((((size_t)(n)) + 63) & ~(size_t)63)
#define MAT(rows, n_in) R64((size_t)(rows) * cal_k_row_bytes(e->dt, (int)(n_in)))
#define VEC(n) R64((size_t)(n) * sizeof(float))
    int bias = c->arch == CAL_ARCH_QWEN2, qkn = c->arch == CAL_ARCH_QWEN3;
    size_t per_layer = VEC(d) * 2 + (bias ? VEC(e->qkv_ld) : 0) + (qkn ? 2 * VEC(e->hd) : 0) +
                       MAT(e->qkv_ld, d) + MAT(d, e->qd) +
                       MAT((int64_t)ne * 2 * f, d) + MAT((int64_t)ne * d, f) +
                       (c->n_experts > 0 ? MAT(c->n_experts, d) : 0);
    e->weight_bytes = MAT(V, d) * (c->tied_embeddings ? 1 : 2) + VEC(d) +
                      per_layer * (size_t)c->n_layers;
    /* every weight is written by generate(): no need to zero them first */
    e->weights = cal_engine_huge_alloc(e->weight_bytes);
    e->layers = calloc((size_t)c->n_layers, sizeof(layer));
    int64_t kv_floats = (int64_t)c->n_layers * max_seqs * e->kvd * c->max_ctx;
    e->kcache = lazy_alloc((size_t)kv_floats * sizeof(float));
    e->vcache = lazy_alloc((size_t)kv_floats * sizeof(float));
    e->slot_len = calloc((size_t)max_seqs, sizeof(int));
    e->rope_cos = xalloc((size_t)c->max_ctx * (e->hd / 2) * sizeof(float));
    e->rope_sin = xalloc((size_t)c->max_ctx * (e->hd / 2) * sizeof(float));
    int64_t S = max_step_tokens;
    int nl = max_seqs < max_step_tokens ? max_seqs : max_step_tokens;
    e->x = xalloc((size_t)(S * d) * sizeof(float));
    e->xn = xalloc((size_t)(S * d) * sizeof(float));
    e->qkv = xalloc((size_t)(S * e->qkv_ld) * sizeof(float));
    e->att = xalloc((size_t)(S * e->qd) * sizeof(float));
    e->h13 = xalloc((size_t)(S * 2 * f) * sizeof(float));
    e->act = xalloc((size_t)(S * f) * sizeof(float));
    int nt = blas_take_threads();
    if (cal_pool_open(nt, &e->pool) != CAL_OK) {
        blas_give_threads();
        cal_engine_close(&e);
        return CAL_ENOMEM;
    }
    e->nt = cal_pool_threads(e->pool);
    int group = c->n_heads / c->n_kv_heads;
    e->att_nb = ATT_ROWS / group > 16 ? ATT_ROWS / group : 16;
    size_t rows = (size_t)e->att_nb * group;
    e->scores = xalloc((size_t)e->nt * rows * c->max_ctx * sizeof(float));
    e->qpack = xalloc((size_t)e->nt * rows * e->hd * sizeof(float));
    e->opack = xalloc((size_t)e->nt * rows * e->hd * sizeof(float));
    e->lhid = xalloc((size_t)(nl * d) * sizeof(float));
    e->lout = xalloc((size_t)((int64_t)nl * V) * sizeof(float));
    e->lrow = calloc((size_t)nl, sizeof(int));
    e->rowpos = calloc((size_t)S, sizeof(int));
    e->erow = calloc((size_t)max_seqs, sizeof(int));
    e->seen = calloc((size_t)max_seqs, 1);
    e->sscratch = malloc(cal_sample_scratch_bytes(c->vocab));
    if (e->dt != CAL_DTYPE_F32) {
        /* prefill tiles: about 4 MiB of floats per thread, whole 16-row groups */
        int max_in = e->max_in;
        e->dq_rows = ((1 << 20) / max_in) & ~15;
        if (e->dq_rows < 16)
            e->dq_rows = 16;
        if (e->dq_rows > 512)
            e->dq_rows = 512;
        e->dq = xalloc((size_t)e->nt * e->dq_rows * max_in * sizeof(float));
        if (e->dt == CAL_DTYPE_Q8_0 || e->dt == CAL_DTYPE_BF16)
            e->xr = xalloc((size_t)S * max_in * sizeof(float));
        e->bf16_gemm = e->dt == CAL_DTYPE_BF16 && cal_k_have_bf16_gemm() &&
                       (size_t)e->dq_rows * max_in >= (size_t)16 * (max_in + 1);
    }
    int ok = (e->dt == CAL_DTYPE_F32 || e->dq) && (e->dt != CAL_DTYPE_Q8_0 || e->xr) && (e->dt != CAL_DTYPE_BF16 || e->xr) && e->weights && e->layers && e->kcache && e->vcache && e->slot_len &&
             e->rope_cos && e->rope_sin && e->x && e->xn && e->qkv && e->att &&
             e->h13 && e->act && e->scores && e->qpack && e->opack && e->lhid && e->lout && e->lrow &&
             e->seen && e->sscratch && e->rowpos && e->erow;
    if (ok && c->n_experts > 0) {
        int E = c->n_experts, k = c->top_k;
        e->gin = xalloc((size_t)(S * d) * sizeof(float));
        e->gout = xalloc((size_t)(S * d) * sizeof(float));
        e->rlogits = xalloc((size_t)(S * E) * sizeof(float));
        e->rprobs = xalloc((size_t)E * sizeof(float));
        e->topi = calloc((size_t)(S * k), sizeof(int));
        e->topw = xalloc((size_t)(S * k) * sizeof(float));
        e->elist = calloc((size_t)(E * S), sizeof(int));
        e->ewt = xalloc((size_t)(E * S) * sizeof(float));
        e->ecount = calloc((size_t)E, sizeof(int));
        ok = e->gin && e->gout && e->rlogits && e->rprobs && e->topi && e->topw &&
             e->elist && e->ewt && e->ecount;
    }
    if (!ok) {
        cal_engine_close(&e);
        return CAL_ENOMEM;
    }

    char *p = e->weights;
#define TAKE(n) (p += (n), (void *)(p - (n)))
    e->emb = TAKE(MAT(V, d));
    e->out = c->tied_embeddings ? e->emb : TAKE(MAT(V, d));
    e->final_norm = TAKE(VEC(d));
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        L->attn_norm = TAKE(VEC(d));
        L->wqkv = TAKE(MAT(e->qkv_ld, d));
        L->wo = TAKE(MAT(d, e->qd));
        L->ffn_norm = TAKE(VEC(d));
        L->w13 = TAKE(MAT((int64_t)ne * 2 * f, d));
        L->w2 = TAKE(MAT((int64_t)ne * d, f));
        L->router = c->n_experts > 0 ? TAKE(MAT(c->n_experts, d)) : NULL;
        L->bqkv = bias ? TAKE(VEC(e->qkv_ld)) : NULL;
        L->q_norm = qkn ? TAKE(VEC(e->hd)) : NULL;
        L->k_norm = qkn ? TAKE(VEC(e->hd)) : NULL;
    }
#undef TAKE
#undef MAT
#undef VEC
#undef R64
    int half = e->hd / 2;
    for (int pos = 0; pos < c->max_ctx; pos++)
        for (int i = 0; i < half; i++) {
            double fr = pow((double)c->rope_theta, -2.0 * i / e->hd);
            e->rope_cos[(size_t)pos * half + i] = (float)cos(pos * fr);
            e->rope_sin[(size_t)pos * half + i] = (float)sin(pos * fr);
        }
    e->embed_scale = c->embed_scale > 0.0f ? c->embed_scale
                     : c->weights[0] ? 1.0f : CAL_ENGINE_EMBED_SCALE;
    if (c->weights[0]) {
        int lrc = cal_gguf_load_weights(e, e->err, sizeof e->err);
        if (lrc != CAL_OK) {
            cal_engine_close(&e);
            return lrc;
        }
    } else {
        generate(e);
    }
    if (e->dt == CAL_DTYPE_Q8_0 && cal_k_have_q8x()) {
        e->x8_bytes = cal_k_q8x_xbytes(e->max_in, SMALL_M);
        e->x8 = xalloc((size_t)e->nt * e->x8_bytes);
        e->x8_at = calloc((size_t)e->nt, sizeof(unsigned));
        e->q8rows = xalloc((size_t)e->nt * e->dq_rows * cal_k_row_bytes(e->dt, e->max_in));
        if (!e->x8 || !e->x8_at || !e->q8rows || q8x_pack_all(e) != CAL_OK) {
            cal_engine_close(&e);
            return CAL_ENOMEM;
        }
    }
    *out = e;
    return CAL_OK;
}

void cal_engine_weights(const cal_engine *e, cal_model_weights *m)
{
    m->dtype = e->dt;
    m->embedding = e->emb;
    m->output = e->out;
    m->final_norm = e->final_norm;
    m->n_layers = e->c.n_layers;
    m->embed_scale = e->embed_scale;
}

void cal_engine_layer_weights(const cal_engine *e, int l, cal_layer_weights *w)
{
    const layer *L = &e->layers[l];
    w->dtype = e->dt;
    w->attn_norm = L->attn_norm;
    w->wqkv = L->wqkv;
    w->wo = L->wo;
    w->ffn_norm = L->ffn_norm;
    w->w13 = L->w13;
    w->w2 = L->w2;
    w->router = L->router;
    w->bqkv = L->bqkv;
    w->q_norm = L->q_norm;
    w->k_norm = L->k_norm;
}

/* ---- the forward step -------------------------------------------------- */

static inline void prof_add(cal_engine *e, int op, int64_t t0, double flops,
                            double bytes)
{
    int64_t dt = cal_now_ns() - t0;
    op_prof *p = &e->prof[op];
    p->ns += dt;
    p->calls++;
    p->flops += flops;
    p->bytes += bytes;
    if (e->cur_b > 0) {
        p = &e->prof_b[e->cur_b][op];
        p->ns += dt;
        p->calls++;
        p->flops += flops;
        p->bytes += bytes;
    }
}

/* Y[M][out] (row stride ldy) = beta·Y + X[M][in] (row stride ldx) · W[out][in]ᵀ,
 * W in the engine's dtype. One pass over W serves all M rows.
 * Decode batches (M ≤ 16) run cal_k_matmul, or for Q8_0 on VNNI the
 * interleaved rows (below): each weight row is loaded once and feeds every
 * row of the batch from registers. OpenBLAS's sgemv/sgemm
 * here cost 0.9× at batch 2 what batch 1 cost in aggregate (sgemm repacks
 * the weights for M = 2–8). Larger M is prefill, compute-bound: OpenBLAS
 * SGEMM, the other formats dequantized into F32 a tile of rows at a time
 * (the tile's conversion is 1/M of its multiply-adds). Q8_0 multiplies
 * activations rounded to Q8_0 at every M (kernels.h). */
/* Q8_0 decode batches of every size take the interleaved rows (e->q8x,
 * q8x.c: rows in quads, both pairs of a quad in one tile), where the CPU
 * has VNNI. On base, the interleaved rows (then one pair at a time) and the
 * block kernel's one-row tiles alternated step by step in one process
 * (60-80 steps each, the step after each switch of batch size not
 * counted): 1.11-1.28x at batch 1, 1.18-1.30x at 2, 1.12-1.17x at 3,
 * 1.15-1.20x at 4 and 1.5x at 5, in five runs; one run an hour earlier,
 * without the step left out, gave 0.85-0.92x at batch 1 and 1.02-1.10x at
 * 2-4. Two pairs a tile on the pairs' layout, two streams of weights side
 * by side, ran 0.74-0.88x the block kernel at batches 1-4: more than the
 * hardware's prefetch follows; the quads' layout makes them one stream. */
static void matmul1(cal_engine *e, float *y, int ldy, const float *x, int ldx,
                    const char *w, int n_out, int n_in, int m, float beta, int tid,
                    const uint32_t *xq)
{
    /* thread tid's tile of dequantized rows (and of unpacked Q8_0 rows) */
    float *dq = e->dq ? e->dq + (size_t)tid * e->dq_rows * e->max_in : NULL;
    char *q8rows = e->q8rows ? e->q8rows + (size_t)tid * e->dq_rows *
                                               cal_k_row_bytes(e->dt, e->max_in)
                             : NULL;
    if (xq) {
        /* BF16 prefill on AVX512_BF16: X rounded to BF16 pairs (matmul_p) */
        cal_k_gemm_bf16(y, ldy, xq, m, (const uint16_t *)w, n_out, n_in, beta,
                        (uint32_t *)dq);
    } else if (m <= SMALL_M) {
        /* interleaved rows have no other kernel (a Q8_0 row is whole
         * blocks, which is all cal_k_q8x_product asks of it) */
        if (e->q8x)
            cal_k_q8x_product(y, ldy, x, ldx, w, n_out, n_in, m, beta);
        else
            cal_k_matmul(e->dt, y, ldy, x, ldx, w, n_out, n_in, m, beta);
    } else if (e->dt == CAL_DTYPE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n_out, n_in, 1.0f,
                    x, ldx, (const float *)w, n_in, beta, y, ldy);
    } else {
        size_t rb = cal_k_row_bytes(e->dt, n_in);
        for (int r0 = 0; r0 < n_out; r0 += e->dq_rows) {
            int nr = n_out - r0 < e->dq_rows ? n_out - r0 : e->dq_rows;
            /* w is a piece of whole quads (and the matrix's last rows) */
            const char *t = cal_engine_rows(e, w, n_out, r0, nr, n_in, q8rows);
            for (int r = 0; r < nr; r++)
                cal_k_dequantize_row(e->dt, t + (size_t)r * rb, dq + (size_t)r * n_in, n_in);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nr, n_in, 1.0f,
                        x, ldx, dq, n_in, beta, y + r0, ldy);
        }
    }
}

typedef struct mm_job {
    cal_engine *e;
    float *y;
    const float *x;
    const char *w;
    int ldy, ldx, n_out, n_in, m;
    float beta;
    const uint32_t *xq;            /* BF16 pairs of x, or NULL */
    int x8;                        /* X goes to the Q8_0 VNNI kernel (e->x8) */
} mm_job;

/* rows r0 .. r1−1 of W (r0 a multiple of 16) on thread tid */
static void mm_rows(void *a, int tid, int r0, int r1)
{
    const mm_job *j = a;
    cal_engine *e = j->e;
    const char *w = j->w + (size_t)r0 * cal_k_row_bytes(e->dt, j->n_in);
    if (j->x8) {
        /* each thread rounds X for itself, once a product, before its first
         * piece: as fast as one thread rounding it for all, without the wait */
        char *x8 = e->x8 + (size_t)tid * e->x8_bytes;
        if (e->x8_at[tid] != e->x8_product) {
            cal_k_q8x_round(j->x, j->ldx, j->n_in, j->m, x8);
            e->x8_at[tid] = e->x8_product;
        }
        cal_k_q8x_apply(j->y + r0, j->ldy, x8, w, r1 - r0, j->n_in,
                        j->m, j->beta);
    } else
        matmul1(j->e, j->y + r0, j->ldy, j->x, j->ldx, w, r1 - r0, j->n_in, j->m, j->beta,
                tid, j->xq);
}

static void matmul_p(cal_engine *e, float *y, int ldy, const float *x, int ldx,
                     const char *w, int n_out, int n_in, int m, float beta)
{
    if (e->dt == CAL_DTYPE_Q8_0 && m > SMALL_M) {
        /* Q8_0 multiplies Q8_0 activations at every batch size, as the
         * decode kernel does (and llama.cpp): round them once here */
        for (int i = 0; i < m; i++)
            cal_k_q8_0_round(x + (size_t)i * ldx, e->xr + (size_t)i * n_in, n_in);
        x = e->xr;
        ldx = n_in;
    }
    const uint32_t *xq = NULL;
    if (e->dt == CAL_DTYPE_BF16 && m > SMALL_M && e->bf16_gemm) {
        /* BF16 × BF16 products, as llama.cpp's: X rounded once for all threads */
        cal_k_bf16_pairs(x, ldx, (uint32_t *)e->xr, m, n_in);
        xq = (const uint32_t *)e->xr;
    }
    /* the VNNI decode kernel, if X fits the buffers it is rounded into */
    size_t xb = e->q8x && m <= SMALL_M ? cal_k_q8x_xbytes(n_in, m) : 0;
    int x8 = xb > 0 && xb <= e->x8_bytes;
    e->x8_product += x8;
    mm_job j = {e, y, x, w, ldy, ldx, n_out, n_in, m, beta, xq, x8};
    if (e->nt == 1 || (double)n_out * n_in * m < 65536.0 || n_out < 32)
        mm_rows(&j, 0, 0, n_out);
    else
        cal_pool_for(e->pool, n_out, 16, mm_rows, &j);
}
#define matmul(y, ldy, x, ldx, w, n_out, n_in, m, beta) \
    matmul_p(e, y, ldy, x, ldx, w, n_out, n_in, m, beta)

void cal_engine_matmul(cal_engine *e, float *y, int ldy, const float *x, int ldx,
                       const void *w, int n_out, int n_in, int m, float beta)
{
    matmul_p(e, y, ldy, x, ldx, w, n_out, n_in, m, beta);
}

cal_pool *cal_engine_pool(cal_engine *e)
{
    return e->pool;
}

/* weights in the dtype, activations in and out in F32 */
static double mm_bytes_dt(int dt, int n_out, int n_in, int m)
{
    return (double)n_out * (double)cal_k_row_bytes(dt, n_in) +
           4.0 * (double)m * (n_in + n_out);
}
#define mm_bytes(n_out, n_in, m) mm_bytes_dt(e->dt, n_out, n_in, m)

static int fail(cal_engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return CAL_EINVAL;
}

static int validate_step(cal_engine *e, const cal_step_entry *en, int n, int *total)
{
    if (n < 0 || n > e->max_seqs)
        return fail(e, "n_entries: %d is outside 0..%d", n, e->max_seqs);
    if (n > 0 && !en)
        return fail(e, "entries: NULL with %d entries", n);
    memset(e->seen, 0, (size_t)e->max_seqs);
    int64_t t = 0;
    for (int i = 0; i < n; i++) {
        const cal_step_entry *s = &en[i];
        if (s->slot < 0 || s->slot >= e->max_seqs)
            return fail(e, "slot: %d is outside 0..%d", s->slot, e->max_seqs - 1);
        if (e->seen[s->slot])
            return fail(e, "slot: %d appears twice in one step (entry %d)", s->slot, i);
        e->seen[s->slot] = 1;
        if (s->n_tokens < 1 || !s->tokens)
            return fail(e, "n_tokens: %d in entry %d (need >= 1 and tokens)", s->n_tokens, i);
        if (s->pos < 0 || s->pos > e->slot_len[s->slot])
            return fail(e, "pos: %d is beyond the %d cached positions of the slot",
                        s->pos, e->slot_len[s->slot]);
        if ((int64_t)s->pos + s->n_tokens > e->c.max_ctx)
            return fail(e, "pos: %d + n_tokens exceeds max_ctx %d", s->pos, e->c.max_ctx);
        for (int j = 0; j < s->n_tokens; j++)
            if (s->tokens[j] < 0 || s->tokens[j] >= e->c.vocab)
                return fail(e, "tokens: id %d is outside 0..%d", s->tokens[j],
                            e->c.vocab - 1);
        t += s->n_tokens;
    }
    if (t > e->max_step)
        return fail(e, "n_tokens: %d in one step exceeds max_step_tokens %d", (int)t,
                    e->max_step);
    *total = (int)t;
    return CAL_OK;
}

static float *kv_at(const cal_engine *e, float *cache, int l, int slot)
{
    return cache + (((size_t)l * e->max_seqs + slot) * e->c.n_kv_heads) *
                       (size_t)e->c.max_ctx * e->hd;
}

/* Attention of a prefill chunk through GEMM, for KV heads g0 .. g1−1. Per KV
 * head and per block of query rows, the Q rows of all the heads that share
 * it are packed into one matrix [rows × group][head_dim]; S = Q·Kᵀ over the
 * cached positions the block can see, causal mask and softmax per row, then
 * O = S·V, unpacked into the attention output. Blocks keep the masked waste
 * small. */
static void attention_chunk(cal_engine *e, int l, const cal_step_entry *s, int row0,
                            int g0, int g1, int tid)
{
    const cal_model_config *c = &e->c;
    int hd = e->hd, group = c->n_heads / c->n_kv_heads, n = s->n_tokens;
    size_t rows = (size_t)e->att_nb * group;
    float *scores = e->scores + (size_t)tid * rows * c->max_ctx;
    float *qp = e->qpack + (size_t)tid * rows * hd;
    float *op = e->opack + (size_t)tid * rows * hd;
    float scale = 1.0f / sqrtf((float)hd);
    const float *kc = kv_at(e, e->kcache, l, s->slot);
    const float *vc = kv_at(e, e->vcache, l, s->slot);
    for (int g = g0; g < g1; g++) {
        const float *kh = kc + (size_t)g * c->max_ctx * hd;
        const float *vh = vc + (size_t)g * c->max_ctx * hd;
        for (int b0 = 0; b0 < n; b0 += e->att_nb) {
            int nb = n - b0 < e->att_nb ? n - b0 : e->att_nb;
            int P = s->pos + b0 + nb, m = nb * group;
            /* stacked row i·group + j = query row b0 + i, head g·group + j */
            for (int i = 0; i < nb; i++)
                memcpy(qp + (size_t)i * group * hd,
                       e->qkv + (size_t)(row0 + b0 + i) * e->qkv_ld + (size_t)g * group * hd,
                       sizeof(float) * (size_t)group * hd);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, P, hd, scale, qp, hd,
                        kh, hd, 0.0f, scores, P);
            for (int r = 0; r < m; r++) {
                float *row = scores + (size_t)r * P;
                int valid = s->pos + b0 + r / group + 1;
                cal_k_softmax(row, valid);
                if (P > valid)
                    memset(row + valid, 0, sizeof(float) * (size_t)(P - valid));
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, P, 1.0f,
                        scores, P, vh, hd, 0.0f, op, hd);
            for (int i = 0; i < nb; i++)
                memcpy(e->att + (size_t)(row0 + b0 + i) * e->qd + (size_t)g * group * hd,
                       op + (size_t)i * group * hd, sizeof(float) * (size_t)group * hd);
        }
    }
}

typedef struct att_job {
    cal_engine *e;
    const cal_step_entry *en;
    int n_en, l;
} att_job;

/* Items i0 .. i1−1 of a layer's attention, item = (entry, KV head) in
 * entry order: append the entry's keys and values of that head to the
 * cache, then attend with every query head that shares it (a prefill
 * chunk through GEMM, a decode row by row). The items go to the threads
 * through cal_pool_for, so one that runs late hands its last ones over. */
static void att_items(void *a, int tid, int i0, int i1)
{
    const att_job *j = a;
    cal_engine *e = j->e;
    const cal_model_config *c = &e->c;
    int n_kv = c->n_kv_heads, group = c->n_heads / n_kv;
    for (int it = i0; it < i1; it++) {
        int i = it / n_kv, g = it % n_kv, row = e->erow[i];
        const cal_step_entry *s = &j->en[i];
        float *kc = kv_at(e, e->kcache, j->l, s->slot);
        float *vc = kv_at(e, e->vcache, j->l, s->slot);
        for (int t = 0; t < s->n_tokens; t++) {
            const float *r = e->qkv + (size_t)(row + t) * e->qkv_ld;
            size_t at = ((size_t)g * c->max_ctx + s->pos + t) * e->hd;
            memcpy(kc + at, r + e->qd + (size_t)g * e->hd, sizeof(float) * e->hd);
            memcpy(vc + at, r + e->qd + e->kvd + (size_t)g * e->hd, sizeof(float) * e->hd);
        }
        if (s->n_tokens >= ATT_GEMM_MIN) {
            attention_chunk(e, j->l, s, row, g, g + 1, tid);
            continue;
        }
        float *scores = e->scores + (size_t)tid * e->att_nb * group * c->max_ctx;
        for (int t = 0; t < s->n_tokens; t++)
            cal_k_attention_heads(e->qkv + (size_t)(row + t) * e->qkv_ld, kc, vc, c->n_heads,
                                  n_kv, e->hd, c->max_ctx, s->pos + t + 1, g * group,
                                  (g + 1) * group, scores, e->att + (size_t)(row + t) * e->qd);
    }
}

static void attention(cal_engine *e, int l, const cal_step_entry *en, int n_en)
{
    int64_t t0 = cal_now_ns();
    double flops = 0, bytes = 0;
    int row = 0;
    for (int i = 0; i < n_en; i++) {
        e->erow[i] = row;
        for (int t = 0; t < en[i].n_tokens; t++) {
            double np = en[i].pos + t + 1;
            flops += 4.0 * e->qd * np;
            bytes += 4.0 * 2 * e->kvd * np;
        }
        row += en[i].n_tokens;
    }
    att_job j = {e, en, n_en, l};
    cal_pool_for(e->pool, n_en * e->c.n_kv_heads, 1, att_items, &j);
    prof_add(e, OP_ATTN, t0, flops, bytes);
}

static void moe(cal_engine *e, const layer *L, int T)
{
    const cal_model_config *c = &e->c;
    int E = c->n_experts, k = c->top_k, d = c->dim, f = c->ffn_dim;
    int64_t t0 = cal_now_ns();
    matmul(e->rlogits, E, e->xn, d, L->router, E, d, T, 0.0f);
    memset(e->ecount, 0, sizeof(int) * (size_t)E);
    for (int t = 0; t < T; t++) {
        int *ti = e->topi + (size_t)t * k;
        float *tw = e->topw + (size_t)t * k;
        cal_k_route_topk(e->rlogits + (size_t)t * E, E, k, e->rprobs, ti, tw);
        for (int j = 0; j < k; j++) {
            int x = ti[j];
            e->elist[(size_t)x * e->max_step + e->ecount[x]] = t;
            e->ewt[(size_t)x * e->max_step + e->ecount[x]] = tw[j];
            e->ecount[x]++;
        }
    }
    prof_add(e, OP_ROUTER, t0, 2.0 * T * E * d, mm_bytes(E, d, T));

    t0 = cal_now_ns();
    double flops = 0, bytes = 0;
    for (int x = 0; x < E; x++) {
        int m = e->ecount[x];
        if (m == 0)
            continue;
        const int *rows = e->elist + (size_t)x * e->max_step;
        const float *wt = e->ewt + (size_t)x * e->max_step;
        for (int i = 0; i < m; i++)
            memcpy(e->gin + (size_t)i * d, e->xn + (size_t)rows[i] * d, sizeof(float) * d);
        const char *w13 = L->w13 + (size_t)x * 2 * f * cal_k_row_bytes(e->dt, d);
        const char *w2 = L->w2 + (size_t)x * d * cal_k_row_bytes(e->dt, f);
        matmul(e->h13, 2 * f, e->gin, d, w13, 2 * f, d, m, 0.0f);
        for (int i = 0; i < m; i++)
            cal_k_swiglu(e->act + (size_t)i * f, e->h13 + (size_t)i * 2 * f,
                         e->h13 + (size_t)i * 2 * f + f, f);
        matmul(e->gout, d, e->act, f, w2, d, f, m, 0.0f);
        for (int i = 0; i < m; i++)
            cal_k_axpy(e->x + (size_t)rows[i] * d, wt[i], e->gout + (size_t)i * d, d);
        flops += 2.0 * m * 3.0 * d * f;
        bytes += mm_bytes(2 * f, d, m) + mm_bytes(d, f, m);
    }
    prof_add(e, OP_EXPERTS, t0, flops, bytes);
}

/* Row-wise element ops of a step (RMSNorm, RoPE, SwiGLU), split by rows
 * across the pool when the step is a prefill chunk. */
enum { ROWS_NORM, ROWS_ROPE, ROWS_SWIGLU };
typedef struct rows_job {
    cal_engine *e;
    int kind, T;
    const float *w;
    const layer *L;                /* ROWS_ROPE: the layer's bias and head norms */
} rows_job;

static void rows_range(const rows_job *j, int r0, int r1)
{
    cal_engine *e = j->e;
    const cal_model_config *c = &e->c;
    int d = c->dim, f = c->ffn_dim, half = e->hd / 2;
    for (int t = r0; t < r1; t++) {
        if (j->kind == ROWS_NORM) {
            cal_k_rmsnorm(e->xn + (size_t)t * d, e->x + (size_t)t * d, j->w, d,
                          c->norm_eps);
        } else if (j->kind == ROWS_ROPE) {
            size_t pr = (size_t)e->rowpos[t] * half;
            float *r = e->qkv + (size_t)t * e->qkv_ld;
            const layer *L = j->L;
            if (L->bqkv)   /* qwen2 */
                cal_k_axpy(r, 1.0f, L->bqkv, e->qkv_ld);
            if (L->q_norm) /* qwen3: each head of Q and K normalised alone */
                for (int h = 0; h < c->n_heads + c->n_kv_heads; h++)
                    cal_k_rmsnorm(r + (size_t)h * e->hd, r + (size_t)h * e->hd,
                                  h < c->n_heads ? L->q_norm : L->k_norm, e->hd, c->norm_eps);
            void (*rope)(float *, int, int, const float *, const float *) =
                c->arch == CAL_ARCH_LLAMA ? cal_k_rope : cal_k_rope_neox;
            rope(r, c->n_heads, e->hd, e->rope_cos + pr, e->rope_sin + pr);
            rope(r + e->qd, c->n_kv_heads, e->hd, e->rope_cos + pr, e->rope_sin + pr);
        } else {
            cal_k_swiglu(e->act + (size_t)t * f, e->h13 + (size_t)t * 2 * f,
                         e->h13 + (size_t)t * 2 * f + f, f);
        }
    }
}

static void rows_part(void *a, int tid, int r0, int r1)
{
    (void)tid;
    rows_range(a, r0, r1);
}

static void rows_l(cal_engine *e, int kind, int T, const float *w, const layer *L)
{
    rows_job j = {e, kind, T, w, L};
    if (T >= 32 && e->nt > 1)
        cal_pool_for(e->pool, T, 1, rows_part, &j);
    else
        rows_range(&j, 0, T);
}

static void rows(cal_engine *e, int kind, int T, const float *w)
{
    rows_l(e, kind, T, w, NULL);
}

int cal_engine_step(cal_engine *e, const cal_step_entry *en, int n_en)
{
    if (!e)
        return CAL_EINVAL;
    int T = 0;
    int rc = validate_step(e, en, n_en, &T);
    if (rc != CAL_OK)
        return rc;
    e->err[0] = 0;
    if (T == 0)
        return CAL_OK;
    const cal_model_config *c = &e->c;
    int d = c->dim, f = c->ffn_dim;
    int64_t step0 = cal_now_ns();
    e->cur_b = T == n_en && T <= PROF_MAX_B ? T : 0;

    int64_t t0 = cal_now_ns();
    int row = 0;
    size_t erb = cal_k_row_bytes(e->dt, d);
    for (int i = 0; i < n_en; i++)
        for (int j = 0; j < en[i].n_tokens; j++, row++) {
            float *xr = e->x + (size_t)row * d;
            e->rowpos[row] = en[i].pos + j;
            /* through the main thread's tile, free between products */
            cal_k_dequantize_row(e->dt,
                                 cal_engine_rows(e, e->emb, c->vocab, en[i].tokens[j], 1, d,
                                                 e->q8rows),
                                 xr, d);
            for (int k = 0; k < d; k++)
                xr[k] *= e->embed_scale;
        }
    prof_add(e, OP_EMBED, t0, 0, (double)T * ((double)erb + 4.0 * d));

    for (int l = 0; l < c->n_layers; l++) {
        const layer *L = &e->layers[l];
        t0 = cal_now_ns();
        rows(e, ROWS_NORM, T, L->attn_norm);
        prof_add(e, OP_NORM, t0, 4.0 * T * d, 4.0 * (2.0 * T * d + d));

        t0 = cal_now_ns();
        matmul(e->qkv, e->qkv_ld, e->xn, d, L->wqkv, e->qkv_ld, d, T, 0.0f);
        prof_add(e, OP_PROJ, t0, 2.0 * T * e->qkv_ld * d, mm_bytes(e->qkv_ld, d, T));

        t0 = cal_now_ns();
        rows_l(e, ROWS_ROPE, T, NULL, L);
        prof_add(e, OP_ROPE, t0, 6.0 * T * (e->qd + e->kvd) / 2,
                 8.0 * T * (e->qd + e->kvd));

        attention(e, l, en, n_en);

        t0 = cal_now_ns();
        matmul(e->x, d, e->att, e->qd, L->wo, d, e->qd, T, 1.0f);
        prof_add(e, OP_PROJ, t0, 2.0 * T * d * e->qd, mm_bytes(d, e->qd, T));

        t0 = cal_now_ns();
        rows(e, ROWS_NORM, T, L->ffn_norm);
        prof_add(e, OP_NORM, t0, 4.0 * T * d, 4.0 * (2.0 * T * d + d));

        if (c->n_experts > 0) {
            moe(e, L, T);
        } else {
            t0 = cal_now_ns();
            matmul(e->h13, 2 * f, e->xn, d, L->w13, 2 * f, d, T, 0.0f);
            prof_add(e, OP_PROJ, t0, 2.0 * T * 2 * f * d, mm_bytes(2 * f, d, T));
            t0 = cal_now_ns();
            rows(e, ROWS_SWIGLU, T, NULL);
            prof_add(e, OP_ACT, t0, 4.0 * T * f, 12.0 * T * f);
            t0 = cal_now_ns();
            matmul(e->x, d, e->act, f, L->w2, d, f, T, 1.0f);
            prof_add(e, OP_PROJ, t0, 2.0 * T * d * f, mm_bytes(d, f, T));
        }
    }

    /* final norm and logits only for the rows that asked for them */
    t0 = cal_now_ns();
    int nl = 0;
    row = 0;
    for (int i = 0; i < n_en; i++) {
        row += en[i].n_tokens;
        if (en[i].logits) {
            cal_k_rmsnorm(e->lhid + (size_t)nl * d, e->x + (size_t)(row - 1) * d,
                          e->final_norm, d, c->norm_eps);
            e->lrow[nl++] = i;
        }
    }
    prof_add(e, OP_NORM, t0, 4.0 * nl * d, 4.0 * (2.0 * nl * d + d));
    if (nl > 0) {
        t0 = cal_now_ns();
        if (nl == 1) {
            matmul(en[e->lrow[0]].logits, c->vocab, e->lhid, d, e->out, c->vocab, d, 1,
                   0.0f);
        } else {
            matmul(e->lout, c->vocab, e->lhid, d, e->out, c->vocab, d, nl, 0.0f);
            for (int i = 0; i < nl; i++)
                memcpy(en[e->lrow[i]].logits, e->lout + (size_t)i * c->vocab,
                       sizeof(float) * (size_t)c->vocab);
        }
        prof_add(e, OP_LOGITS, t0, 2.0 * nl * c->vocab * d, mm_bytes(c->vocab, d, nl));
    }
    for (int i = 0; i < n_en; i++)
        e->slot_len[en[i].slot] = en[i].pos + en[i].n_tokens;
    int64_t ns = cal_now_ns() - step0;
    e->steps++;
    e->step_tokens += T;
    e->step_ns += ns;
    if (e->cur_b > 0) {
        e->steps_b[e->cur_b]++;
        e->step_ns_b[e->cur_b] += ns;
    }
    e->cur_b = 0;   /* sampling between steps is not a step's */
    return CAL_OK;
}

int32_t cal_engine_sample(cal_engine *e, const float *logits,
                          const cal_sampler_params *p, uint64_t *rng)
{
    if (!e || !logits || !p || !rng)
        return CAL_EINVAL;
    int64_t t0 = cal_now_ns();
    int32_t id = cal_sample(logits, e->c.vocab, p, rng, e->sscratch);
    prof_add(e, OP_SAMPLE, t0, 0, 4.0 * e->c.vocab);
    return id;
}

/* ---- OpenBLAS kernels --------------------------------------------------- */

const char *cal_engine_blas_core(void)
{
    const char *n = openblas_get_corename();
    return n ? n : "unknown";
}

const char *cal_engine_blas_coretype_advice(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const char *n = cal_engine_blas_core();
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                       "SapphireRapids"};
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
        for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
            if (strcasecmp(n, avx512[i]) == 0)
                return NULL;
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++)
            if (strcasecmp(n, avx2[i]) == 0)
                return NULL;
        return "Haswell";
    }
#endif
    return NULL;
}

char *cal_engine_kernels(char *buf, size_t n)
{
    if (buf && n > 0)
        snprintf(buf, n, "decode %s, element-wise %s, bf16 prefill %s", cal_k_isa(),
                 cal_k_elementwise_isa(), cal_k_have_bf16_gemm() ? "avx512bf16" : "portable");
    return buf;
}

/* ---- profile ----------------------------------------------------------- */

void cal_engine_profile_reset(cal_engine *e)
{
    if (!e)
        return;
    memset(e->prof, 0, sizeof e->prof);
    memset(e->prof_b, 0, sizeof e->prof_b);
    memset(e->steps_b, 0, sizeof e->steps_b);
    memset(e->step_ns_b, 0, sizeof e->step_ns_b);
    e->steps = e->step_tokens = e->step_ns = 0;
}

/* one op's counters as the profile's JSON object */
static json_t *op_json(int op, const op_prof *p, double share)
{
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(op_names[op]));
    json_object_set_new(o, "calls", json_integer(p->calls));
    json_object_set_new(o, "time_ns", json_integer(p->ns));
    json_object_set_new(o, "flops", json_real(p->flops));
    json_object_set_new(o, "bytes", json_real(p->bytes));
    json_object_set_new(o, "share_of_step", json_real(share));
    return o;
}

char *cal_engine_profile_json(const cal_engine *e)
{
    if (!e)
        return NULL;
    const cal_model_config *c = &e->c;
    json_t *root = json_object();
    json_t *model = json_object();
    json_t *ops = json_array();
    if (!root || !model || !ops) {
        json_decref(root); json_decref(model); json_decref(ops);
        return NULL;
    }
    json_object_set_new(model, "name", json_string(c->name));
    json_object_set_new(model, "dim", json_integer(c->dim));
    json_object_set_new(model, "n_layers", json_integer(c->n_layers));
    json_object_set_new(model, "n_heads", json_integer(c->n_heads));
    json_object_set_new(model, "n_kv_heads", json_integer(c->n_kv_heads));
    json_object_set_new(model, "ffn_dim", json_integer(c->ffn_dim));
    json_object_set_new(model, "n_experts", json_integer(c->n_experts));
    json_object_set_new(model, "top_k", json_integer(c->top_k));
    json_object_set_new(model, "vocab", json_integer(c->vocab));
    json_object_set_new(model, "max_ctx", json_integer(c->max_ctx));
    json_object_set_new(model, "n_params", json_integer(cal_model_n_params(c)));
    json_object_set_new(model, "dtype", json_string(cal_dtype_name(c->dtype)));
    json_object_set_new(model, "decode_bytes_per_token",
                        json_integer(cal_model_decode_bytes_per_token(c)));
    int64_t covered = 0;
    for (int i = 0; i < OP_COUNT; i++) {
        const op_prof *p = &e->prof[i];
        if (i != OP_SAMPLE)
            covered += p->ns;
        json_array_append_new(ops, op_json(i, p, e->step_ns > 0 && i != OP_SAMPLE
                                                      ? (double)p->ns / (double)e->step_ns
                                                      : 0.0));
    }
    json_object_set_new(root, "format", json_string("caliper.engine.profile/1"));
    json_object_set_new(root, "model", model);
    json_t *blas = json_object();
    json_object_set_new(blas, "library", json_string("OpenBLAS"));
    json_object_set_new(blas, "core", json_string(cal_engine_blas_core()));
    json_object_set_new(blas, "engine_threads", json_integer(e->nt));
    json_object_set_new(blas, "decode_kernels", json_string(cal_k_isa()));
    json_object_set_new(root, "blas", blas);
    json_object_set_new(root, "steps", json_integer(e->steps));
    json_object_set_new(root, "tokens", json_integer(e->step_tokens));
    json_object_set_new(root, "step_time_ns", json_integer(e->step_ns));
    json_object_set_new(root, "unattributed_ns",
                        json_integer(e->step_ns > covered ? e->step_ns - covered : 0));
    json_object_set_new(root, "ops", ops);
    /* decode-only steps by batch size: time per step and per op at each B */
    json_t *byb = json_array();
    for (int b = 1; b <= PROF_MAX_B && byb; b++) {
        if (e->steps_b[b] == 0)
            continue;
        json_t *o = json_object(), *bops = json_array();
        json_object_set_new(o, "batch", json_integer(b));
        json_object_set_new(o, "steps", json_integer(e->steps_b[b]));
        json_object_set_new(o, "step_time_ns", json_integer(e->step_ns_b[b]));
        for (int i = 0; i < OP_COUNT; i++) {
            const op_prof *p = &e->prof_b[b][i];
            if (p->calls > 0)
                json_array_append_new(bops, op_json(i, p, (double)p->ns /
                                                              (double)e->step_ns_b[b]));
        }
        json_object_set_new(o, "ops", bops);
        json_array_append_new(byb, o);
    }
    json_object_set_new(root, "by_batch", byb);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return s;
}
