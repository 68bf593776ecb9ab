/* caliper reference engine — the batched forward step (one weight pass per
 * step for every sequence in it: the engine's own kernels for decode-sized
 * products, OpenBLAS for prefill), the OpenBLAS kernel names, and the
 * per-op profile. */
#include "engine/engine.h"
#include "engine/internal.h"
#include "engine/engine_impl.h"
#include "engine/kernels.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cal_engine_op_names[OP_COUNT] = {
    "embedding", "norm", "rope", "attention", "dense_proj", "activation",
    "moe_router", "moe_experts", "logits", "sampling",
};

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
                    const mat *M, const char *w, int n_out, int m, float beta, int tid,
                    const uint32_t *xq)
{
    int n_in = M->n_in;
    /* thread tid's tile of dequantized rows (and of unpacked interleaved rows) */
    float *dq = e->dq ? e->dq + (size_t)tid * e->dq_rows * e->max_in : NULL;
    char *rowbuf = e->rowbuf && e->has_pk[PK_Q8X]
                       ? e->rowbuf + (size_t)tid * e->dq_rows * e->row_max : NULL;
    if (xq) {
        /* BF16 prefill on AVX512_BF16: X rounded to BF16 pairs (matmul_p) */
        cal_k_gemm_bf16(y, ldy, xq, m, (const uint16_t *)w, n_out, n_in, beta,
                        (uint32_t *)dq);
    } else if (m <= SMALL_M) {
        /* interleaved rows have no other kernel (a Q8_0 row is whole
         * blocks, which is all cal_k_q8x_product asks of it); the other
         * interleaved formats never come here: e->x8 holds any decode
         * batch of theirs */
        if (M->pk == PK_Q8X)
            cal_k_q8x_product(y, ldy, x, ldx, w, n_out, n_in, m, beta);
        else
            cal_k_matmul(M->dt, y, ldy, x, ldx, w, n_out, n_in, m, beta);
    } else if (M->dt == CAL_DTYPE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n_out, n_in, 1.0f,
                    x, ldx, (const float *)w, n_in, beta, y, ldy);
    } else {
        /* w is a piece of whole quads (and the matrix's last rows): its own
         * matrix of n_out rows to the unpacking */
        mat piece = *M;
        piece.w = (char *)w;
        piece.rows = n_out;
        for (int r0 = 0; r0 < n_out; r0 += e->dq_rows) {
            int nr = n_out - r0 < e->dq_rows ? n_out - r0 : e->dq_rows;
            const char *t = cal_engine_mat_rows(&piece, 0, r0, nr, rowbuf);
            for (int r = 0; r < nr; r++)
                cal_k_dequantize_row(M->dt, t + (size_t)r * M->rb, dq + (size_t)r * n_in, n_in);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nr, n_in, 1.0f,
                        x, ldx, dq, n_in, beta, y + r0, ldy);
        }
    }
}

typedef struct mm_job {
    cal_engine *e;
    float *y;
    const float *x;
    const mat *M;
    const char *w;                 /* the expert's matrix */
    int ldy, ldx, n_out, n_in, m;
    float beta;
    const uint32_t *xq;            /* BF16 pairs of x, or NULL */
    int x8;                        /* X rounded once a thread into e->x8: for
                                      the Q8_0 VNNI kernel, or to Q8_K */
    const void *xk;                /* interleaved prefill (but Q8_0's): X
                                      rounded once for all threads, or NULL */
} mm_job;

/* rows r0 .. r1−1 of W (r0 a multiple of 16) on thread tid */
static void mm_rows(void *a, int tid, int r0, int r1)
{
    const mm_job *j = a;
    cal_engine *e = j->e;
    const mat *M = j->M;
    const char *w = j->w + (size_t)r0 * M->rb;
    if (j->xk) {
        cal_k_mm_apply(M->dt, j->y + r0, j->ldy, j->xk, w, r1 - r0, j->n_in, j->m, j->beta);
    } else if (j->x8) {
        /* each thread rounds X for itself, once a product, before its first
         * piece: as fast as one thread rounding it for all, without the wait */
        char *x8 = e->x8 + (size_t)tid * e->x8_bytes;
        if (e->x8_at[tid] != e->x8_product) {
            if (M->pk != PK_NONE)
                cal_k_mm_round(M->dt, j->x, j->ldx, j->n_in, j->m, x8);
            else
                cal_k_kq_round(j->x, j->ldx, j->n_in, j->m, (cal_q8_k_block *)x8);
            e->x8_at[tid] = e->x8_product;
        }
        if (M->pk == PK_Q8X)
            cal_k_q8x_apply(j->y + r0, j->ldy, x8, w, r1 - r0, j->n_in, j->m, j->beta);
        else if (M->pk == PK_MM)
            cal_k_mm_apply(M->dt, j->y + r0, j->ldy, x8, w, r1 - r0, j->n_in, j->m, j->beta);
        else
            cal_k_kq_apply(M->dt, j->y + r0, j->ldy, (const cal_q8_k_block *)x8, w, r1 - r0,
                           j->n_in, j->m, j->beta);
    } else
        matmul1(e, j->y + r0, j->ldy, j->x, j->ldx, M, w, r1 - r0, j->m, j->beta, tid, j->xq);
}

/* Y[m][M.rows] (row stride ldy) = beta·Y + X[m][M.n_in] · Wᵀ, W expert
 * `expert`'s matrix of M in M's own format */
static void matmul_p(cal_engine *e, float *y, int ldy, const float *x, int ldx, const mat *M,
                     int expert, int m, float beta)
{
    int n_out = M->rows, n_in = M->n_in;
    const char *w = M->w + (size_t)expert * M->rows * M->rb;
    if (M->dt == CAL_DTYPE_Q8_0 && m > SMALL_M) {
        /* Q8_0 multiplies Q8_0 activations at every batch size, as the
         * decode kernel does (and llama.cpp): round them once here */
        for (int i = 0; i < m; i++)
            cal_k_q8_0_round(x + (size_t)i * ldx, e->xr + (size_t)i * n_in, n_in);
        x = e->xr;
        ldx = n_in;
    }
    const uint32_t *xq = NULL;
    if (M->dt == CAL_DTYPE_BF16 && m > SMALL_M && e->bf16_gemm) {
        /* BF16 × BF16 products, as llama.cpp's: X rounded once for all threads */
        cal_k_bf16_pairs(x, ldx, (uint32_t *)e->xr, m, n_in);
        xq = (const uint32_t *)e->xr;
    }
    /* the interleaved formats but Q8_0: prefill takes the decode kernel
     * too (products.c), on X rounded here once for all threads, as
     * llama.cpp multiplies quantized formats at every batch size; Q4_K's
     * integer products ran ~2x OpenBLAS SGEMM's multiply-adds a second on
     * the dequantized rows */
    const void *xk = NULL;
    if (M->pk == PK_MM && m > SMALL_M) {
        cal_k_mm_round(M->dt, x, ldx, n_in, m, e->xr);
        xk = e->xr;
    }
    /* the decode kernels that take X rounded, if it fits the buffers it is
     * rounded into (an interleaved matrix's always does: e->x8 is sized
     * for each format held) */
    size_t xb = m > SMALL_M || !e->x8 ? 0
                : M->pk != PK_NONE ? cal_k_mm_xbytes(M->dt, n_in, m)
                : cal_takes_q8k(M->dt) ? cal_k_kq_xbytes(n_in, m) : 0;
    int x8 = xb > 0 && xb <= e->x8_bytes;
    e->x8_product += x8;
    mm_job j = {e, y, x, M, w, ldy, ldx, n_out, n_in, m, beta, xq, x8, xk};
    if (e->nt == 1 || (double)n_out * n_in * m < 65536.0 || n_out < 32)
        mm_rows(&j, 0, 0, n_out);
    else
        cal_pool_for(e->pool, n_out, 16, mm_rows, &j);
}

/* every matrix of P, each into its own columns of Y */
static void prod_run(cal_engine *e, float *y, int ldy, const float *x, int ldx, const prod *P,
                     int expert, int m, float beta)
{
    for (int i = 0; i < P->n; i++)
        matmul_p(e, y + P->col[i], ldy, x, ldx, &P->m[i], expert, m, beta);
}

/* weights in their formats, activations in and out in F32 */
static double mat_bytes_m(const mat *M, int m)
{
    return (double)M->rows * (double)M->rb + 4.0 * (double)m * (M->n_in + M->rows);
}

static double prod_bytes(const prod *P, int m)
{
    double b = 0;
    for (int i = 0; i < P->n; i++)
        b += mat_bytes_m(&P->m[i], m) - (i > 0 ? 4.0 * m * P->m[i].n_in : 0);
    return b;
}

void cal_engine_product(cal_engine *e, int kind, int l, int expert, float *y, int ldy,
                        const float *x, int ldx, int m, float beta)
{
    const layer *L = &e->layers[kind == CAL_MM_LOGITS ? 0 : l];
    switch (kind) {
    case CAL_MM_QKV:    prod_run(e, y, ldy, x, ldx, &L->qkv, 0, m, beta); break;
    case CAL_MM_O:      matmul_p(e, y, ldy, x, ldx, &L->wo, 0, m, beta); break;
    case CAL_MM_W13:    prod_run(e, y, ldy, x, ldx, &L->w13, expert, m, beta); break;
    case CAL_MM_W2:     matmul_p(e, y, ldy, x, ldx, &L->w2, expert, m, beta); break;
    case CAL_MM_ROUTER: if (L->router.w) matmul_p(e, y, ldy, x, ldx, &L->router, 0, m, beta); break;
    default:            matmul_p(e, y, ldy, x, ldx, &e->out, 0, m, beta); break;
    }
}

double cal_engine_product_bytes(const cal_engine *e, int kind, int l)
{
    const layer *L = &e->layers[kind == CAL_MM_LOGITS ? 0 : l];
    switch (kind) {
    case CAL_MM_QKV:    return prod_bytes(&L->qkv, 0);
    case CAL_MM_O:      return mat_bytes_m(&L->wo, 0);
    case CAL_MM_W13:    return prod_bytes(&L->w13, 0);
    case CAL_MM_W2:     return mat_bytes_m(&L->w2, 0);
    case CAL_MM_ROUTER: return L->router.w ? mat_bytes_m(&L->router, 0) : 0;
    default:            return mat_bytes_m(&e->out, 0);
    }
}

void cal_engine_embed(cal_engine *e, int32_t tok, float *out)
{
    /* through the main thread's tile, free between products */
    int d = e->c.dim;
    cal_k_dequantize_row(e->emb.dt, cal_engine_mat_rows(&e->emb, 0, tok, 1, e->rowbuf), out, d);
    for (int k = 0; k < d; k++)
        out[k] *= e->embed_scale;
}

cal_pool *cal_engine_pool(cal_engine *e)
{
    return e->pool;
}

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

/* layer l's keys (v 0) or values (v 1) of a slot: [n_kv][max_ctx][hd] */
static float *kv_at(const cal_engine *e, int v, int l, int slot)
{
    return (float *)(e->kv + ((size_t)slot * 2 + (size_t)v) * e->kv_part) +
           (size_t)l * e->c.n_kv_heads * (size_t)e->c.max_ctx * e->hd;
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
    const float *kc = kv_at(e, 0, l, s->slot);
    const float *vc = kv_at(e, 1, l, s->slot);
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
        float *kc = kv_at(e, 0, j->l, s->slot);
        float *vc = kv_at(e, 1, j->l, s->slot);
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
    matmul_p(e, e->rlogits, E, e->xn, d, &L->router, 0, T, 0.0f);
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
    prof_add(e, OP_ROUTER, t0, 2.0 * T * E * d, mat_bytes_m(&L->router, T));

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
        prod_run(e, e->h13, 2 * f, e->gin, d, &L->w13, x, m, 0.0f);
        for (int i = 0; i < m; i++)
            cal_k_swiglu(e->act + (size_t)i * f, e->h13 + (size_t)i * 2 * f,
                         e->h13 + (size_t)i * 2 * f + f, f);
        matmul_p(e, e->gout, d, e->act, f, &L->w2, x, m, 0.0f);
        for (int i = 0; i < m; i++)
            cal_k_axpy(e->x + (size_t)rows[i] * d, wt[i], e->gout + (size_t)i * d, d);
        flops += 2.0 * m * 3.0 * d * f;
        bytes += prod_bytes(&L->w13, m) + mat_bytes_m(&L->w2, m);
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
    for (int i = 0; i < n_en; i++)
        for (int j = 0; j < en[i].n_tokens; j++, row++) {
            e->rowpos[row] = en[i].pos + j;
            cal_engine_embed(e, en[i].tokens[j], e->x + (size_t)row * d);
        }
    prof_add(e, OP_EMBED, t0, 0, (double)T * ((double)e->emb.rb + 4.0 * d));

    for (int l = 0; l < c->n_layers; l++) {
        const layer *L = &e->layers[l];
        t0 = cal_now_ns();
        rows(e, ROWS_NORM, T, L->attn_norm);
        prof_add(e, OP_NORM, t0, 4.0 * T * d, 4.0 * (2.0 * T * d + d));

        t0 = cal_now_ns();
        prod_run(e, e->qkv, e->qkv_ld, e->xn, d, &L->qkv, 0, T, 0.0f);
        prof_add(e, OP_PROJ, t0, 2.0 * T * e->qkv_ld * d, prod_bytes(&L->qkv, T));

        t0 = cal_now_ns();
        rows_l(e, ROWS_ROPE, T, NULL, L);
        prof_add(e, OP_ROPE, t0, 6.0 * T * (e->qd + e->kvd) / 2,
                 8.0 * T * (e->qd + e->kvd));

        attention(e, l, en, n_en);

        t0 = cal_now_ns();
        matmul_p(e, e->x, d, e->att, e->qd, &L->wo, 0, T, 1.0f);
        prof_add(e, OP_PROJ, t0, 2.0 * T * d * e->qd, mat_bytes_m(&L->wo, T));

        t0 = cal_now_ns();
        rows(e, ROWS_NORM, T, L->ffn_norm);
        prof_add(e, OP_NORM, t0, 4.0 * T * d, 4.0 * (2.0 * T * d + d));

        if (c->n_experts > 0) {
            moe(e, L, T);
        } else {
            t0 = cal_now_ns();
            prod_run(e, e->h13, 2 * f, e->xn, d, &L->w13, 0, T, 0.0f);
            prof_add(e, OP_PROJ, t0, 2.0 * T * 2 * f * d, prod_bytes(&L->w13, T));
            t0 = cal_now_ns();
            rows(e, ROWS_SWIGLU, T, NULL);
            prof_add(e, OP_ACT, t0, 4.0 * T * f, 12.0 * T * f);
            t0 = cal_now_ns();
            matmul_p(e, e->x, d, e->act, f, &L->w2, 0, T, 1.0f);
            prof_add(e, OP_PROJ, t0, 2.0 * T * d * f, mat_bytes_m(&L->w2, T));
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
            matmul_p(e, en[e->lrow[0]].logits, c->vocab, e->lhid, d, &e->out, 0, 1, 0.0f);
        } else {
            matmul_p(e, e->lout, c->vocab, e->lhid, d, &e->out, 0, nl, 0.0f);
            for (int i = 0; i < nl; i++)
                memcpy(en[e->lrow[i]].logits, e->lout + (size_t)i * c->vocab,
                       sizeof(float) * (size_t)c->vocab);
        }
        prof_add(e, OP_LOGITS, t0, 2.0 * nl * c->vocab * d, mat_bytes_m(&e->out, nl));
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
    json_object_set_new(o, "op", json_string(cal_engine_op_names[op]));
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
    /* the formats the matrices are held in, the largest share first:
     * "q4_k+q6_k" for a Q4_K_M file held as stored */
    char dts[96] = "";
    int used[CAL_DTYPE_COUNT] = {0};
    for (size_t len = 0;;) {
        int best = -1;
        for (int k = 0; k < CAL_DTYPE_COUNT; k++)
            if (!used[k] && e->params_dt[k] > 0 && (best < 0 || e->params_dt[k] > e->params_dt[best]))
                best = k;
        if (best < 0 || len + 8 >= sizeof dts)
            break;
        used[best] = 1;
        len += (size_t)snprintf(dts + len, sizeof dts - len, "%s%s", len ? "+" : "",
                                cal_dtype_name(best));
    }
    json_object_set_new(model, "dtype", json_string(dts));
    json_object_set_new(model, "decode_bytes_per_token",
                        json_integer(cal_engine_decode_bytes_per_token(e)));
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
