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

/* The KV cache is mapped, not allocated: its pages are zero and untouched
 * until a position is written, so the process's resident memory grows
 * with the positions actually cached (what a context-length memory fit
 * measures), and the reservation is not counted against the host's memory
 * up front (MAP_NORESERVE: serve refuses one beyond physical memory unless
 * asked, and then it is the user's choice). Slot by slot, each slot's keys
 * and then its values on whole pages (2 MiB ones where a slot's part
 * fills a huge page's worth, 4 KiB below): a slot's sequence touches its
 * own pages only. Laid out layer-major across slots, one 1000-token prompt
 * took RSS to 8.5 GB of a 34.4 GB cache of 16 slots: every huge page it
 * touched held other slots' positions too.
 *
 * The pages are 2 MiB where the kernel grants them. A decode step reads a
 * short run of rows from each sequence's KV head in every layer; on 4 KiB
 * pages each run costs its own page walks, and their TLB misses slow the
 * weights' stream as well. In-process A/B on base Q8_0, 17 slots, batch 8:
 * the step 1.13-1.19x faster on 2 MiB pages in four runs (attention
 * 0.91-0.95 -> 0.66-0.81 ms), within 2 % in four others (the kernel had no
 * huge pages free, or the runs fit the TLB). */
static char *kv_alloc(size_t part, int slots, size_t *mapped)
{
    /* a shape's product of layers, KV width, positions and slots can pass
     * what a size_t counts (2^10 · 2^16 · 2^20 · 4 bytes · 2^12 slots) */
    if (part == 0 || part > (SIZE_MAX - HUGE_PAGE) / 2 / (size_t)slots)
        return NULL;
    size_t n = part * 2 * (size_t)slots + HUGE_PAGE;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* start on a 2 MiB boundary; the slack at both ends goes back */
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = (size_t)(a - (uintptr_t)p), used = part * 2 * (size_t)slots;
    if (head)
        munmap(p, head);
    if (n - head - used)
        munmap((char *)a + used, n - head - used);
    /* a slot's part of less than a huge page stays on small pages: on huge
     * ones it would share a page with its neighbours' */
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise((void *)a, used, part % HUGE_PAGE == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
    *mapped = used;
    return (char *)a;
}

/* 64-byte aligned and left as the allocator gives it (not written, so a
 * large one stays untouched until used): scratch as long as the context
 * (attention scores) whose far end a short prompt never reaches, always
 * written before it is read */
static void *lazy_alloc(size_t n)
{
    return aligned_alloc(64, ((n + 63) & ~(size_t)63) ? (n + 63) & ~(size_t)63 : 64);
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
/* rows × n_in weights of matrix m from its row r0 on (m's format); a norm
 * vector in F32 */
#define fill(m, r0, rows, key, std)                                                        \
    fill_job_run(e, (m)->w + (size_t)(r0) * (m)->rb, (int64_t)(rows) * (m)->n_in, (m)->dt, \
                 key, 0.0f, std)
#define fill_norm(p, n, key) fill_job_run(e, p, n, CAL_DTYPE_F32, key, 1.0f, 0.1f)

/* Weights are a pure function of (shape, seed): each tensor has its own key
 * derived from the seed and the tensor's index. Fan-in scaling keeps each
 * projection's output near unit variance; residual branches are damped by
 * 1/sqrt(2·layers) so the stream stays bounded at any depth. Other formats
 * store the F32 values rounded to the format. Synthetic weights are in one
 * format, so Q, K and V are one matrix, and so are gate and up (all experts
 * one after the other). */
static void generate(cal_engine *e)
{
    const cal_model_config *c = &e->c;
    uint64_t s = c->seed;
    uint64_t tensor = 0;
#define KEY() (s ^ cal_k_splitmix64(&(uint64_t){ (tensor++) * 0x632be59bd9b4e019ull }))
    float emb_std = 2.0f / sqrtf((float)c->dim);
    float branch = 1.0f / sqrtf(2.0f * c->n_layers);
    int64_t d = c->dim, f = c->ffn_dim;
    fill(&e->emb, 0, c->vocab, KEY(), emb_std);
    uint64_t out_key = KEY();
    if (!c->tied_embeddings)
        fill(&e->out, 0, c->vocab, out_key, emb_std);
    fill_norm(e->final_norm, d, KEY());
    int ne = c->n_experts > 0 ? c->n_experts : 1;
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        fill_norm(L->attn_norm, d, KEY());
        uint64_t kq = KEY();
        fill(&L->qkv.m[0], 0, e->qd + e->kvd, kq, QK_GAIN / sqrtf((float)d));
        fill(&L->qkv.m[0], e->qd + e->kvd, e->kvd, kq ^ 1, 1.0f / sqrtf((float)d));
        fill(&L->wo, 0, d, KEY(), branch / sqrtf((float)e->qd));
        fill_norm(L->ffn_norm, d, KEY());
        fill(&L->w13.m[0], 0, ne * 2 * f, KEY(), 1.0f / sqrtf((float)d));
        fill(&L->w2, 0, ne * d, KEY(), branch / sqrtf((float)f));
        if (L->router.w)
            fill(&L->router, 0, c->n_experts, KEY(), 1.0f / sqrtf((float)d));
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
 * block layout. Each matrix by its own format: a file's Q4_K_M mixture
 * packs its Q4_K matrices and leaves its Q6_K ones as they are. */
static void pack_mat(const mat *m, void *scratch)
{
    for (int x = 0; x < m->n_mat && m->w; x++) {
        char *w = m->w + (size_t)x * m->rows * m->rb;
        if (m->pk != PK_NONE)
            cal_k_mm_pack(m->dt, w, m->rows, m->n_in, scratch);
    }
}

static int pack_all(cal_engine *e)
{
    if (!e->has_pk[PK_Q8X] && !e->has_pk[PK_MM])
        return CAL_OK;
    void *scratch = malloc(16 * (size_t)e->row_max);
    if (!scratch)
        return CAL_ENOMEM;
    pack_mat(&e->emb, scratch);
    if (!e->c.tied_embeddings)
        pack_mat(&e->out, scratch);
    for (int l = 0; l < e->c.n_layers; l++) {
        layer *L = &e->layers[l];
        for (int i = 0; i < L->qkv.n; i++)
            pack_mat(&L->qkv.m[i], scratch);
        for (int i = 0; i < L->w13.n; i++)
            pack_mat(&L->w13.m[i], scratch);
        pack_mat(&L->wo, scratch);
        pack_mat(&L->w2, scratch);
        pack_mat(&L->router, scratch);
    }
    free(scratch);
    return CAL_OK;
}

const void *cal_engine_mat_rows(const mat *m, int expert, int64_t r0, int64_t count,
                                void *buf)
{
    const char *w = m->w + (size_t)expert * m->rows * m->rb;
    if (m->pk == PK_NONE)
        return w + (size_t)r0 * m->rb;
    return cal_k_mm_rows(m->dt, w, m->rows, (int)r0, (int)count, m->n_in, buf);
}

const void *cal_engine_rows(const cal_engine *e, const cal_tensor_view *t, int expert,
                            int64_t r, int64_t count, void *buf)
{
    (void)e;
    mat m = {(char *)t->m, t->dtype, t->packed, (int)t->m_rows, t->n_in, t->n_mats,
             cal_k_row_bytes(t->dtype, t->n_in)};
    return cal_engine_mat_rows(&m, expert, t->r0 + r, count, buf);
}

void cal_engine_close(cal_engine **pe)
{
    if (!pe || !*pe)
        return;
    cal_engine *e = *pe;
    free(e->weights); free(e->rowbuf); free(e->x8); free(e->x8_at); free(e->layers);
    if (e->kv)
        munmap(e->kv, e->kv_map);
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

/* every tensor rounded up to 64 bytes so each starts cache-line aligned */
#define R64(n) ((((size_t)(n)) + 63) & ~(size_t)63)
#define VEC(n) R64((size_t)(n) * sizeof(float))

/* Matrix m: n_mat × rows × n_in weights in dt, at offset *off of base (NULL:
 * only the sizes are worked out), counted in e's totals. Quantized
 * matrices are held interleaved where the CPU has AVX-512 VNNI
 * (cal_held_packed: every quantized format but Q4_0). */
static void mat_place(cal_engine *e, mat *m, int dt, int rows, int n_in, int n_mat, char *base,
                      size_t *off)
{
    m->dt = dt;
    m->rows = rows;
    m->n_in = n_in;
    m->n_mat = n_mat;
    m->rb = cal_k_row_bytes(dt, n_in);
    m->pk = !cal_held_packed(dt) ? PK_NONE : dt == CAL_DTYPE_Q8_0 ? PK_Q8X : PK_MM;
    m->w = base ? base + *off : NULL;
    *off += R64((size_t)n_mat * rows * m->rb);
    if (!base) {
        e->params_dt[dt] += (int64_t)n_mat * rows * n_in;
        e->has_pk[m->pk] = 1;
        size_t rm = cal_k_row_bytes(dt, e->max_in);
        if (m->pk != PK_NONE && rm > (size_t)e->row_max)
            e->row_max = (int)rm;
    }
}

/* Product P of n_sub tensors (rows[i] rows each, in dts[i]) over n_in
 * inputs: neighbours in one format share a matrix. */
static void prod_place(cal_engine *e, prod *P, const int *dts, const int *rows, int n_sub,
                       int n_in, int n_mat, char *base, size_t *off)
{
    int grows[3] = {0}, gdt[3] = {0};
    P->n = 0;
    P->n_sub = n_sub;
    for (int i = 0, col = 0; i < n_sub; col += rows[i], i++) {
        if (P->n == 0 || gdt[P->n - 1] != dts[i]) {
            gdt[P->n] = dts[i];
            P->col[P->n++] = col;
        }
        P->sub_mat[i] = P->n - 1;
        P->sub_r0[i] = grows[P->n - 1];
        P->sub_rows[i] = rows[i];
        grows[P->n - 1] += rows[i];
    }
    for (int i = 0; i < P->n; i++)
        mat_place(e, &P->m[i], gdt[i], grows[i], n_in, n_mat, base, off);
}

/* Every tensor's place in one allocation, in the order the file lists
 * them; base NULL: the bytes in all (and the engine's totals). */
static size_t place_all(cal_engine *e, const int *dts, char *base)
{
    const cal_model_config *c = &e->c;
    int d = c->dim, f = c->ffn_dim, V = c->vocab;
    int ne = c->n_experts > 0 ? c->n_experts : 1;
    int bias = c->arch == CAL_ARCH_QWEN2, qkn = CAL_ARCH_QK_NORM(c->arch);
    size_t off = 0;
#define TAKE(n) (off += (n), base ? (void *)(base + off - (n)) : NULL)
    mat_place(e, &e->emb, dts[CAL_T_EMB], V, d, 1, base, &off);
    if (c->tied_embeddings)
        e->out = e->emb;
    else
        mat_place(e, &e->out, dts[CAL_T_OUT], V, d, 1, base, &off);
    e->final_norm = TAKE(VEC(d));
    for (int l = 0; l < c->n_layers; l++) {
        layer *L = &e->layers[l];
        const int *t = dts + CAL_T_AT(l, 0);
        L->attn_norm = TAKE(VEC(d));
        prod_place(e, &L->qkv, (int[]){t[CAL_T_Q], t[CAL_T_K], t[CAL_T_V]},
                   (int[]){e->qd, e->kvd, e->kvd}, 3, d, 1, base, &off);
        mat_place(e, &L->wo, t[CAL_T_O], d, e->qd, 1, base, &off);
        L->ffn_norm = TAKE(VEC(d));
        prod_place(e, &L->w13, (int[]){t[CAL_T_GATE], t[CAL_T_UP]}, (int[]){f, f}, 2, d, ne,
                   base, &off);
        mat_place(e, &L->w2, t[CAL_T_DOWN], d, f, ne, base, &off);
        if (c->n_experts > 0)
            mat_place(e, &L->router, t[CAL_T_ROUTER], c->n_experts, d, 1, base, &off);
        else
            memset(&L->router, 0, sizeof L->router);
        L->bqkv = bias ? TAKE(VEC(e->qkv_ld)) : NULL;
        L->q_norm = qkn ? TAKE(VEC(e->hd)) : NULL;
        L->k_norm = qkn ? TAKE(VEC(e->hd)) : NULL;
    }
#undef TAKE
    return off;
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
    e->max_in = (int)(d > f ? d : f);
    /* each matrix's format: a GGUF file's own where the engine holds it as
     * stored, else the config's */
    size_t n_t = CAL_T_COUNT(c->n_layers);
    int *dts = malloc(n_t * sizeof *dts);
    e->layers = calloc((size_t)c->n_layers, sizeof(layer));
    if (!dts || !e->layers) {
        free(dts);
        cal_engine_close(&e);
        return CAL_ENOMEM;
    }
    for (size_t i = 0; i < n_t; i++)
        dts[i] = c->dtype;
    if (c->weights[0] && c->as_stored) {
        int prc = cal_gguf_held_dtypes(c, dts, e->err, sizeof e->err);
        if (prc != CAL_OK) {
            free(dts);
            cal_engine_close(&e);
            return prc;
        }
    }
    e->weight_bytes = place_all(e, dts, NULL);
    /* every weight is written by generate() or the loader: no need to zero
     * them first */
    e->weights = cal_engine_huge_alloc(e->weight_bytes);
    if (e->weights)
        place_all(e, dts, e->weights);
    free(dts);
    /* each slot's keys (and values) on whole pages of their own: 2 MiB
     * ones from a huge page's worth up (a tiny model's 512 KiB would
     * otherwise take four times its size), 4 KiB ones below */
    size_t kv_need = (size_t)c->n_layers * e->kvd * c->max_ctx * sizeof(float);
    size_t kv_unit = kv_need >= HUGE_PAGE / 2 ? HUGE_PAGE : 4096;
    e->kv_part = (kv_need + kv_unit - 1) & ~(kv_unit - 1);
    e->kv = kv_alloc(e->kv_part, max_seqs, &e->kv_map);
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
    e->scores = lazy_alloc((size_t)e->nt * rows * c->max_ctx * sizeof(float));
    e->qpack = xalloc((size_t)e->nt * rows * e->hd * sizeof(float));
    e->opack = xalloc((size_t)e->nt * rows * e->hd * sizeof(float));
    e->lhid = xalloc((size_t)(nl * d) * sizeof(float));
    e->lout = xalloc((size_t)((int64_t)nl * V) * sizeof(float));
    e->lrow = calloc((size_t)nl, sizeof(int));
    e->rowpos = calloc((size_t)S, sizeof(int));
    e->erow = calloc((size_t)max_seqs, sizeof(int));
    e->seen = calloc((size_t)max_seqs, 1);
    e->sscratch = malloc(cal_sample_scratch_bytes(c->vocab));
    /* The scratch of the formats held (each matrix's own): prefill tiles of
     * dequantized rows for every format but F32 and the interleaved ones
     * other than Q8_0 (which prefill on their integer kernels), X rounded
     * for Q8_0, BF16 and interleaved prefill, and for the decode kernels
     * that take X rounded (interleaved formats; the K-quants as Q8_K) */
    int64_t *pd = e->params_dt;
    int tiles = 0;
    for (int dt = 0; dt < CAL_DTYPE_COUNT; dt++)
        tiles |= dt != CAL_DTYPE_F32 && pd[dt] > 0 &&
                 !(dt != CAL_DTYPE_Q8_0 && cal_held_packed(dt));
    int max_in = e->max_in;
    /* prefill tiles: about 4 MiB of floats per thread, whole 16-row groups */
    e->dq_rows = ((1 << 20) / max_in) & ~15;
    if (e->dq_rows < 16)
        e->dq_rows = 16;
    if (e->dq_rows > 512)
        e->dq_rows = 512;
    e->bf16_gemm = pd[CAL_DTYPE_BF16] > 0 && cal_k_have_bf16_gemm() &&
                   (size_t)e->dq_rows * max_in >= (size_t)16 * (max_in + 1);
    if (tiles)
        e->dq = xalloc((size_t)e->nt * e->dq_rows * max_in * sizeof(float));
    int want_xr = pd[CAL_DTYPE_Q8_0] > 0 || e->bf16_gemm || e->has_pk[PK_MM];
    if (want_xr)
        e->xr = xalloc((size_t)S * max_in * sizeof(float));
    int ok = (!tiles || e->dq) && (!want_xr || e->xr) && e->weights && e->layers &&
             e->kv && e->slot_len &&
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
    /* the interleaved formats on VNNI, and the K-quants without: the decode
     * batch's activations rounded once a thread a product, as each
     * format's kernel takes them (the largest of the formats held) */
    size_t x8b = 0;
    for (int dt = 0; dt < CAL_DTYPE_COUNT; dt++) {
        size_t b = pd[dt] <= 0             ? 0
                   : cal_held_packed(dt) ? cal_k_mm_xbytes(dt, max_in, SMALL_M)
                   : cal_takes_q8k(dt)   ? cal_k_kq_xbytes(max_in, SMALL_M) : 0;
        if (b > x8b)
            x8b = b;
    }
    if (x8b > 0) {
        e->x8_bytes = x8b;
        e->x8 = xalloc((size_t)e->nt * e->x8_bytes);
        e->x8_at = calloc((size_t)e->nt, sizeof(unsigned));
        if (!e->x8 || !e->x8_at) {
            cal_engine_close(&e);
            return CAL_ENOMEM;
        }
    }
    /* unpacked rows of interleaved matrices: prefill tiles of Q8_0 for
     * each thread; the other interleaved formats prefill without tiles and
     * unpack for the embedding lookup alone (one row) */
    if (e->has_pk[PK_Q8X] || e->has_pk[PK_MM]) {
        e->rowbuf = xalloc((e->has_pk[PK_Q8X] ? (size_t)e->nt * e->dq_rows : 1) *
                           (size_t)e->row_max);
        if (!e->rowbuf || pack_all(e) != CAL_OK) {
            cal_engine_close(&e);
            return CAL_ENOMEM;
        }
    }
    *out = e;
    return CAL_OK;
}

size_t cal_engine_weight_bytes(const cal_engine *e) { return e ? e->weight_bytes : 0; }

size_t cal_engine_kv_bytes(const cal_engine *e)
{
    return e ? e->kv_map : 0;
}

void cal_engine_kv_slot(const cal_engine *e, int slot, const void **start, size_t *bytes)
{
    *start = e->kv + (size_t)slot * 2 * e->kv_part;
    *bytes = 2 * e->kv_part;
}

int64_t cal_engine_params_held(const cal_engine *e, int dtype)
{
    return e && dtype >= 0 && dtype < CAL_DTYPE_COUNT ? e->params_dt[dtype] : 0;
}

/* bytes of one expert's matrix of m */
static int64_t mat_bytes(const mat *m) { return (int64_t)m->rows * (int64_t)m->rb; }

int64_t cal_engine_decode_bytes_per_token(const cal_engine *e)
{
    if (!e)
        return 0;
    const cal_model_config *c = &e->c;
    int64_t b = mat_bytes(&e->out) + (int64_t)e->emb.rb, k = c->n_experts > 0 ? c->top_k : 1;
    for (int l = 0; l < c->n_layers; l++) {
        const layer *L = &e->layers[l];
        for (int i = 0; i < L->qkv.n; i++)
            b += mat_bytes(&L->qkv.m[i]);
        b += mat_bytes(&L->wo) + k * mat_bytes(&L->w2);
        for (int i = 0; i < L->w13.n; i++)
            b += k * mat_bytes(&L->w13.m[i]);
        if (L->router.w)
            b += mat_bytes(&L->router);
    }
    /* the F32 vectors, as cal_model_decode_bytes_per_token counts them */
    int64_t extra = c->arch == CAL_ARCH_QWEN2 ? e->qkv_ld
                    : CAL_ARCH_QK_NORM(c->arch) ? 2 * e->hd : 0;
    return b + ((int64_t)c->n_layers * (2 * c->dim + extra) + c->dim) * (int64_t)sizeof(float);
}

/* the view of matrix m's rows r0 .. r0+rows−1 */
static cal_tensor_view view_of(const mat *m, int64_t r0, int64_t rows)
{
    if (!m->w)
        return (cal_tensor_view){0};
    return (cal_tensor_view){m->w, m->dt, m->pk, m->n_in, m->rows, r0, rows, m->n_mat,
                             (size_t)m->rows * m->rb};
}

static cal_tensor_view view_sub(const prod *P, int i)
{
    return view_of(&P->m[P->sub_mat[i]], P->sub_r0[i], P->sub_rows[i]);
}

void cal_engine_weights(const cal_engine *e, cal_model_weights *m)
{
    m->embedding = view_of(&e->emb, 0, e->c.vocab);
    m->output = view_of(&e->out, 0, e->c.vocab);
    m->final_norm = e->final_norm;
    m->rope_freqs = e->rope_ff;
    m->n_layers = e->c.n_layers;
    m->embed_scale = e->embed_scale;
}

void cal_engine_layer_weights(const cal_engine *e, int l, cal_layer_weights *w)
{
    const layer *L = &e->layers[l];
    w->attn_norm = L->attn_norm;
    w->q = view_sub(&L->qkv, 0);
    w->k = view_sub(&L->qkv, 1);
    w->v = view_sub(&L->qkv, 2);
    w->o = view_of(&L->wo, 0, L->wo.rows);
    w->ffn_norm = L->ffn_norm;
    w->gate = view_sub(&L->w13, 0);
    w->up = view_sub(&L->w13, 1);
    w->down = view_of(&L->w2, 0, L->w2.rows);
    w->router = view_of(&L->router, 0, L->router.rows);
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

int cal_gguf_export_plan(const cal_engine *e, const char *path, const int *plan, char *why,
                         size_t why_len)
{
    if (!e)
        return cal_why(why, why_len, CAL_EINVAL, "export: no engine or path");
    cal_gguf_source s = source_of(e);
    return cal_gguf_write_plan(&s, path, plan, why, why_len);
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
