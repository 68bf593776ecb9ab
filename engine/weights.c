/* caliper reference engine — the one-time allocation of weights, KV cache
 * and activations, the weights themselves (generated from the seed, or read
 * from a GGUF file), and open and close. */
#include "engine/engine.h"
#include "engine/internal.h"
#include "engine/engine_impl.h"
#include "engine/gguf.h"
#include "engine/vocab.h"
#include "engine/kernels.h"
#include "caliper/error.h"
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    const int G = cal_dtype_row_unit(j->dt);   /* whole blocks of the format */
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
/* Q4_K alike (q4kx.c), rows in sixteens, every product starting on a
 * multiple of 16 rows of a matrix; a matrix's last rows % 16 keep the
 * block layout. */
static int pack_all(cal_engine *e)
{
    const cal_model_config *c = &e->c;
    int64_t d = c->dim, f = c->ffn_dim;
    int ne = c->n_experts > 0 ? c->n_experts : 1;
    int q4 = e->dt == CAL_DTYPE_Q4_K;
    void *scratch = malloc((q4 ? 16 : 4) * cal_k_row_bytes(e->dt, e->max_in));
    if (!scratch)
        return CAL_ENOMEM;
#define PACK(p, rows, n_in)                                                         \
    (q4 ? cal_k_q4kx_pack_inplace : cal_k_q8x_pack_inplace)(p, (int)(rows), (int)(n_in), \
                                                           scratch)
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
    if (q4)
        e->q4kx = 1;
    else
        e->q8x = 1;
    return CAL_OK;
}

const void *cal_engine_rows(const cal_engine *e, const void *m, int64_t n_rows, int64_t r0,
                            int64_t count, int n_in, void *buf)
{
    if (e->q8x)
        cal_k_q8x_rows(m, (int)n_rows, (int)r0, (int)count, n_in, buf);
    else if (e->q4kx)
        cal_k_q4kx_rows(m, (int)n_rows, (int)r0, (int)count, n_in, buf);
    else
        return (const char *)m + (size_t)r0 * cal_k_row_bytes(e->dt, n_in);
    return buf;
}

void cal_engine_close(cal_engine **pe)
{
    if (!pe || !*pe)
        return;
    cal_engine *e = *pe;
    free(e->weights); free(e->rowbuf); free(e->x8); free(e->x8_at); free(e->layers); free(e->kcache); free(e->vcache);
    free(e->slot_len); free(e->rope_cos); free(e->rope_sin); free(e->rope_ff);
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
    int bias = c->arch == CAL_ARCH_QWEN2, qkn = CAL_ARCH_QK_NORM(c->arch);
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
    if (c->rope_freqs && !(e->rope_ff = xalloc((size_t)(e->hd / 2) * sizeof(float)))) {
        cal_engine_close(&e);
        return CAL_ENOMEM;
    }
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
    /* Q4_K on AVX-512 VNNI: rows interleaved (pack_all), prefill included */
    int q4x = e->dt == CAL_DTYPE_Q4_K && cal_k_have_q8x();
    if (e->dt != CAL_DTYPE_F32) {
        /* prefill tiles: about 4 MiB of floats per thread, whole 16-row groups */
        int max_in = e->max_in;
        e->dq_rows = ((1 << 20) / max_in) & ~15;
        if (e->dq_rows < 16)
            e->dq_rows = 16;
        if (e->dq_rows > 512)
            e->dq_rows = 512;
        /* interleaved Q4_K (below) prefills on its integer kernel: no
         * dequantized tile, X rounded to Q8_K (292 bytes per 256) in xr */
        if (!q4x)
            e->dq = xalloc((size_t)e->nt * e->dq_rows * max_in * sizeof(float));
        if (e->dt == CAL_DTYPE_Q8_0 || e->dt == CAL_DTYPE_BF16 || q4x)
            e->xr = xalloc((size_t)S * max_in * sizeof(float));
        e->bf16_gemm = e->dt == CAL_DTYPE_BF16 && cal_k_have_bf16_gemm() &&
                       (size_t)e->dq_rows * max_in >= (size_t)16 * (max_in + 1);
    }
    int ok = (e->dt == CAL_DTYPE_F32 || q4x || e->dq) && (e->dt != CAL_DTYPE_Q8_0 || e->xr) && (e->dt != CAL_DTYPE_BF16 || e->xr) &&
             (!q4x || e->xr) && e->weights && e->layers && e->kcache && e->vcache && e->slot_len &&
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
        if (e->rope_ff)
            cal_rope_llama3_factors(c, e->hd, e->rope_ff);
    }
    /* the RoPE tables, once the factors are known (a file's are read above) */
    int half = e->hd / 2;
    for (int pos = 0; pos < c->max_ctx; pos++)
        for (int i = 0; i < half; i++) {
            double fr = pow((double)c->rope_theta, -2.0 * i / e->hd);
            if (e->rope_ff)
                fr /= e->rope_ff[i];
            e->rope_cos[(size_t)pos * half + i] = (float)cos(pos * fr);
            e->rope_sin[(size_t)pos * half + i] = (float)sin(pos * fr);
        }
    /* Q8_0 and Q4_K on VNNI: interleaved rows; the K-quants: the decode
     * batch's activations rounded to Q8_K once a thread a product */
    int kq = e->dt == CAL_DTYPE_Q4_K || e->dt == CAL_DTYPE_Q6_K;
    int packed = e->dt == CAL_DTYPE_Q8_0 ? cal_k_have_q8x() : q4x;
    if (packed || kq) {
        e->x8_bytes = kq ? cal_k_kq_xbytes(e->max_in, SMALL_M)
                         : cal_k_q8x_xbytes(e->max_in, SMALL_M);
        e->x8 = xalloc((size_t)e->nt * e->x8_bytes);
        e->x8_at = calloc((size_t)e->nt, sizeof(unsigned));
        /* interleaved Q4_K unpacks for the embedding lookup alone (its
         * prefill takes no tiles): one row */
        if (packed)
            e->rowbuf = xalloc((q4x ? 1 : (size_t)e->nt * e->dq_rows) *
                               cal_k_row_bytes(e->dt, e->max_in));
        if (!e->x8 || !e->x8_at || (packed && (!e->rowbuf || pack_all(e) != CAL_OK))) {
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
    m->rope_freqs = e->rope_ff;
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

/* ---- GGUF: the engine hands its tensors to the format code -------------- */

static cal_gguf_source source_of(const cal_engine *e)
{
    return (cal_gguf_source){.config = &e->c, .engine = e, .weights = cal_engine_weights,
                             .layer_weights = cal_engine_layer_weights, .rows = cal_engine_rows};
}

int cal_gguf_export(const cal_engine *e, const char *path, int dtype, char *why,
                    size_t why_len)
{
    return cal_gguf_export_vocab(e, path, dtype, NULL, why, why_len);
}

int cal_gguf_export_vocab(const cal_engine *e, const char *path, int dtype,
                          const char *vocab_path, char *why, size_t why_len)
{
    if (!e)
        return cal_why(why, why_len, CAL_EINVAL, "export: no engine or path");
    cal_gguf_source s = source_of(e);
    if (!vocab_path)
        return cal_gguf_write(&s, path, dtype, NULL, why, why_len);
    cal_vocab *v;
    int rc = cal_vocab_read_file(vocab_path, &v, why, why_len);
    if (rc != CAL_OK)
        return rc == CAL_ENOMEM ? rc : CAL_EINVAL;
    rc = cal_gguf_write(&s, path, dtype, v, why, why_len);
    cal_vocab_free(&v);
    return rc;
}

int cal_gguf_load_weights(cal_engine *e, char *why, size_t why_len)
{
    cal_gguf_source s = source_of(e);
    return cal_gguf_read_weights(&s, why, why_len);
}
