/* caliper reference engine — the op micro-benchmark (engine/opbench.h): each
 * op of a step alone, with the step's kernels, threads and shapes, on layer
 * 0's weights, repeated on the same data (warm caches). Left out on purpose,
 * because a single-op benchmark leaves them out: the MoE's routing, the
 * gather of each expert's tokens and the weighted scatter-add back, and the
 * cache state of a real step that streams every layer's weights in turn. */
#include "engine/opbench.h"
#include "engine/internal.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench {
    cal_engine *e;
    const cal_model_config *c;
    cal_layer_weights L;
    cal_model_weights M;
    int T, pos, hd, qd, kvd, qkv_ld, nt;
    /* buffers for T tokens, allocated once before any timing */
    float *x, *xn;          /* [T][dim] */
    float *qkv;             /* [T][qkv_ld] */
    float *att;             /* [T][qd] */
    float *h13, *act;       /* [M][2·ffn], [M][ffn]; M = max(T, routed rows) */
    float *gout;            /* [M][dim] */
    float *kc, *vc;         /* [n_kv][pos+T][hd] one layer's cache of one slot */
    float *scores;          /* [nt][CAL_K_ATT_HEADS][pos+T] */
    float *rlog, *rprobs;   /* [T][E], [E] */
    int   *topi;            /* [T][top_k] */
    float *topw;
    float *logits;          /* [vocab] */
    float *cos_t, *sin_t;   /* [hd/2] */
    void  *sscratch;
    int32_t *tok;           /* [T] */
    int   n_act, per_exp;   /* MoE: experts that get tokens, tokens each */
    uint64_t rng;
} bench;

static float *fa(size_t n)
{
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
    if (p)
        for (size_t i = 0; i < n; i++)
            p[i] = cal_k_normal_at(0x0b5e7, i) * 0.5f;
    return p;
}

/* ---- the ops, one call each ------------------------------------------------ */

static void op_embedding(bench *b)
{
    int d = b->c->dim;
    for (int t = 0; t < b->T; t++)
        cal_engine_embed(b->e, b->tok[t], b->x + (size_t)t * d);
}

static void op_norm(bench *b)
{
    int d = b->c->dim;
    for (int t = 0; t < b->T; t++)
        cal_k_rmsnorm(b->xn + (size_t)t * d, b->x + (size_t)t * d, b->L.attn_norm, d, b->c->norm_eps);
}

/* every product of one layer; the profile counts each as one call */
static void op_dense(bench *b)
{
    cal_engine *e = b->e;
    int d = b->c->dim, f = b->c->ffn_dim, T = b->T;
    cal_engine_product(e, CAL_MM_QKV, 0, 0, b->qkv, b->qkv_ld, b->xn, d, T, 0.0f);
    cal_engine_product(e, CAL_MM_O, 0, 0, b->x, d, b->att, b->qd, T, 1.0f);
    if (b->c->n_experts == 0) {
        cal_engine_product(e, CAL_MM_W13, 0, 0, b->h13, 2 * f, b->xn, d, T, 0.0f);
        cal_engine_product(e, CAL_MM_W2, 0, 0, b->x, d, b->act, f, T, 1.0f);
    }
}

static void op_rope(bench *b)
{
    for (int t = 0; t < b->T; t++) {
        float *r = b->qkv + (size_t)t * b->qkv_ld;
        cal_k_rope(r, b->c->n_heads, b->hd, b->cos_t, b->sin_t);
        cal_k_rope(r + b->qd, b->c->n_kv_heads, b->hd, b->cos_t, b->sin_t);
    }
}

/* as the step does (step.c att_items): items of one KV head, each
 * appending its keys and values and attending with the query heads that
 * share them, spread over the pool by cal_pool_for */
static void att_items(void *a, int tid, int g0, int g1)
{
    bench *b = a;
    const cal_model_config *c = b->c;
    int ctx = b->pos + b->T, group = c->n_heads / c->n_kv_heads;
    for (int g = g0; g < g1; g++) {
        for (int t = 0; t < b->T; t++) {
            const float *r = b->qkv + (size_t)t * b->qkv_ld;
            size_t at = ((size_t)g * ctx + b->pos + t) * b->hd;
            memcpy(b->kc + at, r + b->qd + (size_t)g * b->hd, sizeof(float) * b->hd);
            memcpy(b->vc + at, r + b->qd + b->kvd + (size_t)g * b->hd, sizeof(float) * b->hd);
        }
        for (int t = 0; t < b->T; t++)
            cal_k_attention_heads(b->qkv + (size_t)t * b->qkv_ld, b->kc, b->vc, c->n_heads,
                                  c->n_kv_heads, b->hd, ctx, b->pos + t + 1, g * group,
                                  (g + 1) * group,
                                  b->scores + (size_t)tid * CAL_K_ATT_HEADS * ctx,
                                  b->att + (size_t)t * b->qd);
    }
}

/* append K and V, then every head over the cache (the decode path) */
static void op_attention(bench *b)
{
    cal_pool_for(cal_engine_pool(b->e), b->c->n_kv_heads, 1, att_items, b);
}

static void op_activation(bench *b)
{
    int f = b->c->ffn_dim;
    for (int t = 0; t < b->T; t++)
        cal_k_swiglu(b->act + (size_t)t * f, b->h13 + (size_t)t * 2 * f, b->h13 + (size_t)t * 2 * f + f, f);
}

static void op_router(bench *b)
{
    int E = b->c->n_experts, k = b->c->top_k, d = b->c->dim;
    cal_engine_product(b->e, CAL_MM_ROUTER, 0, 0, b->rlog, E, b->xn, d, b->T, 0.0f);
    for (int t = 0; t < b->T; t++)
        cal_k_route_topk(b->rlog + (size_t)t * E, E, k, b->rprobs, b->topi + (size_t)t * k,
                         b->topw + (size_t)t * k);
}

/* the expert FFN as a kernel benchmark runs it: each active expert's
 * gate/up product, SwiGLU and down product on rows already in place */
static void op_experts(bench *b)
{
    int d = b->c->dim, f = b->c->ffn_dim, m = b->per_exp;
    for (int x = 0; x < b->n_act; x++) {
        cal_engine_product(b->e, CAL_MM_W13, 0, x, b->h13, 2 * f, b->xn, d, m, 0.0f);
        for (int i = 0; i < m; i++)
            cal_k_swiglu(b->act + (size_t)i * f, b->h13 + (size_t)i * 2 * f, b->h13 + (size_t)i * 2 * f + f, f);
        cal_engine_product(b->e, CAL_MM_W2, 0, x, b->gout, d, b->act, f, m, 0.0f);
    }
}

static void op_logits(bench *b)
{
    int d = b->c->dim;
    cal_k_rmsnorm(b->xn, b->x, b->M.final_norm, d, b->c->norm_eps);
    cal_engine_product(b->e, CAL_MM_LOGITS, 0, 0, b->logits, b->c->vocab, b->xn, d, 1, 0.0f);
}

static void op_sampling(bench *b)
{
    cal_sampler_params sp = {1.0f, 1.0f, 7};
    (void)cal_sample(b->logits, b->c->vocab, &sp, &b->rng, b->sscratch);
}

/* ---- timing --------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* 3 untimed calls (caches warm), then reps timed ones: median and sum */
static int time_op(bench *b, void (*fn)(bench *), int reps, int64_t *ns, int64_t *sum, double *median)
{
    for (int i = 0; i < 3; i++)
        fn(b);
    *sum = 0;
    for (int i = 0; i < reps; i++) {
        int64_t t0 = cal_now_ns();
        fn(b);
        ns[i] = cal_now_ns() - t0;
        *sum += ns[i];
    }
    qsort(ns, (size_t)reps, sizeof ns[0], cmp_i64);
    *median = reps % 2 ? (double)ns[reps / 2] : 0.5 * ((double)ns[reps / 2 - 1] + (double)ns[reps / 2]);
    return CAL_OK;
}

static void free_bench(bench *b)
{
    free(b->x); free(b->xn); free(b->qkv); free(b->att); free(b->h13); free(b->act);
    free(b->gout); free(b->kc); free(b->vc); free(b->scores); free(b->rlog); free(b->rprobs);
    free(b->topi); free(b->topw); free(b->logits); free(b->cos_t); free(b->sin_t);
    free(b->sscratch); free(b->tok);
}

int cal_engine_opbench(cal_engine *e, const cal_opbench_opts *o, char **json)
{
    if (!e || !o || !json)
        return CAL_EINVAL;
    *json = NULL;
    const cal_model_config *c = cal_engine_config(e);
    if (o->tokens < 1 || o->tokens > cal_engine_max_step_tokens(e) || o->pos < 0 ||
        o->pos + o->tokens > c->max_ctx || o->reps < 1 || o->reps > 100000)
        return CAL_EINVAL;
    bench b = {0};
    b.e = e;
    b.c = c;
    b.T = o->tokens;
    b.pos = o->pos;
    b.hd = c->dim / c->n_heads;
    b.qd = c->dim;
    b.kvd = b.hd * c->n_kv_heads;
    b.qkv_ld = b.qd + 2 * b.kvd;
    b.nt = cal_pool_threads(cal_engine_pool(e));
    b.rng = 7;
    cal_engine_layer_weights(e, 0, &b.L);
    cal_engine_weights(e, &b.M);
    int d = c->dim, f = c->ffn_dim, T = b.T, ctx = b.pos + b.T;
    int E = c->n_experts, k = c->top_k;
    /* balanced routing: T·k routed rows over min(E, T·k) experts */
    if (E > 0) {
        b.n_act = T * k < E ? T * k : E;
        b.per_exp = (T * k + b.n_act - 1) / b.n_act;
    }
    int M = b.per_exp > T ? b.per_exp : T;
    b.x = fa((size_t)T * d);
    b.xn = fa((size_t)M * d);
    b.qkv = fa((size_t)T * b.qkv_ld);
    b.att = fa((size_t)T * b.qd);
    b.h13 = fa((size_t)M * 2 * f);
    b.act = fa((size_t)M * f);
    b.gout = fa((size_t)M * d);
    b.kc = fa((size_t)c->n_kv_heads * ctx * b.hd);
    b.vc = fa((size_t)c->n_kv_heads * ctx * b.hd);
    b.scores = fa((size_t)b.nt * CAL_K_ATT_HEADS * ctx);
    b.rlog = fa((size_t)T * (E > 0 ? E : 1));
    b.rprobs = fa((size_t)(E > 0 ? E : 1));
    b.topi = calloc((size_t)T * (k > 0 ? k : 1), sizeof(int));
    b.topw = fa((size_t)T * (k > 0 ? k : 1));
    b.logits = fa((size_t)c->vocab);
    b.cos_t = fa((size_t)b.hd / 2);
    b.sin_t = fa((size_t)b.hd / 2);
    b.sscratch = malloc(cal_sample_scratch_bytes(c->vocab));
    b.tok = calloc((size_t)T, sizeof(int32_t));
    int64_t *ns = malloc(sizeof(int64_t) * (size_t)o->reps);
    json_t *root = json_object(), *ops = json_array();
    if (!b.x || !b.xn || !b.qkv || !b.att || !b.h13 || !b.act || !b.gout || !b.kc || !b.vc ||
        !b.scores || !b.rlog || !b.rprobs || !b.topi || !b.topw || !b.logits || !b.cos_t ||
        !b.sin_t || !b.sscratch || !b.tok || !ns || !root || !ops) {
        free_bench(&b);
        free(ns);
        json_decref(root);
        json_decref(ops);
        return CAL_ENOMEM;
    }
    for (int t = 0; t < T; t++)
        b.tok[t] = (int32_t)((t * 7919 + 13) % c->vocab);

    /* per op: the function, how many in-graph calls one of ours stands for
     * (dense_proj runs every product of a layer: 2 or 4 profile calls), and
     * the FLOPs and bytes of one of ours as the engine profile counts them */
    double np = 0;
    for (int t = 0; t < T; t++)
        np += b.pos + t + 1;
    int nproj = E > 0 ? 2 : 4;
    double proj_flops = 2.0 * T * b.qkv_ld * d + 2.0 * T * d * b.qd;
    /* weights in each matrix's own format, activations in and out in F32 */
#define wb(kind) cal_engine_product_bytes(e, kind, 0)
#define io(n_out, n_in, m) (4.0 * (m) * ((double)(n_in) + (n_out)))
    double proj_bytes = wb(CAL_MM_QKV) + io(b.qkv_ld, d, T) + wb(CAL_MM_O) + io(d, b.qd, T);
    if (E == 0) {
        proj_flops += 2.0 * T * 2 * f * d + 2.0 * T * d * f;
        proj_bytes += wb(CAL_MM_W13) + io(2 * f, d, T) + wb(CAL_MM_W2) + io(d, f, T);
    }
    size_t erb = cal_k_row_bytes(b.M.embedding.dtype, d);
    struct {
        const char *name;
        void (*fn)(bench *);
        int on, per;
        double flops, bytes;
    } OPS[] = {
        {"embedding", op_embedding, 1, 1, 0, T * ((double)erb + 4.0 * d)},
        {"norm", op_norm, 1, 1, 4.0 * T * d, 4.0 * (2.0 * T * d + d)},
        {"rope", op_rope, 1, 1, 6.0 * T * (b.qd + b.kvd) / 2, 8.0 * T * (b.qd + b.kvd)},
        {"attention", op_attention, 1, 1, 4.0 * b.qd * np, 4.0 * 2 * b.kvd * np},
        {"dense_proj", op_dense, 1, nproj, proj_flops, proj_bytes},
        {"activation", op_activation, E == 0, 1, 4.0 * T * f, 12.0 * T * f},
        {"moe_router", op_router, E > 0, 1, 2.0 * T * E * d, wb(CAL_MM_ROUTER) + io(E, d, T)},
        {"moe_experts", op_experts, E > 0, 1, 2.0 * b.n_act * b.per_exp * 3.0 * d * f,
         b.n_act * (wb(CAL_MM_W13) + io(2 * f, d, b.per_exp) + wb(CAL_MM_W2) +
                    io(d, f, b.per_exp))},
        {"logits", op_logits, 1, 1, 2.0 * c->vocab * d, wb(CAL_MM_LOGITS) + io(c->vocab, d, 1)},
        {"sampling", op_sampling, 1, 1, 0, 4.0 * c->vocab},
    };
#undef wb
#undef io
    int rc = CAL_OK;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        if (!OPS[i].on)
            continue;
        int64_t sum;
        double med;
        time_op(&b, OPS[i].fn, o->reps, ns, &sum, &med);
        json_t *x = json_object();
        if (!x) { rc = CAL_ENOMEM; break; }
        double calls = (double)o->reps * OPS[i].per;
        json_object_set_new(x, "op", json_string(OPS[i].name));
        json_object_set_new(x, "calls", json_integer((json_int_t)calls));
        json_object_set_new(x, "time_ns", json_integer(sum));
        json_object_set_new(x, "call_ns", json_real(med / OPS[i].per));
        json_object_set_new(x, "flops", json_real(OPS[i].flops * o->reps));
        json_object_set_new(x, "bytes", json_real(OPS[i].bytes * o->reps));
        json_array_append_new(ops, x);
    }
    json_t *model = json_object(), *blas = json_object();
    if (rc == CAL_OK && model && blas) {
        json_object_set_new(root, "format", json_string("caliper.engine.opbench/1"));
        json_object_set_new(model, "name", json_string(c->name));
        json_object_set_new(model, "dim", json_integer(c->dim));
        json_object_set_new(model, "n_layers", json_integer(c->n_layers));
        json_object_set_new(model, "n_experts", json_integer(c->n_experts));
        json_object_set_new(model, "top_k", json_integer(c->top_k));
        json_object_set_new(model, "ffn_dim", json_integer(c->ffn_dim));
        json_object_set_new(model, "vocab", json_integer(c->vocab));
        json_object_set_new(root, "model", model);
        json_object_set_new(blas, "library", json_string("OpenBLAS"));
        json_object_set_new(blas, "core", json_string(cal_engine_blas_core()));
        json_object_set_new(blas, "engine_threads", json_integer(b.nt));
        json_object_set_new(root, "blas", blas);
        json_object_set_new(root, "tokens_per_call", json_integer(T));
        json_object_set_new(root, "pos", json_integer(b.pos));
        json_object_set_new(root, "reps", json_integer(o->reps));
        json_object_set_new(root, "experts_active", json_integer(b.n_act));
        json_object_set_new(root, "tokens_per_expert", json_integer(b.per_exp));
        json_object_set_new(root, "ops", ops);
        ops = NULL;
        *json = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!*json)
            rc = CAL_ENOMEM;
    } else {
        json_decref(model);
        json_decref(blas);
        if (rc == CAL_OK)
            rc = CAL_ENOMEM;
    }
    json_decref(ops);
    json_decref(root);
    free(ns);
    free_bench(&b);
    return rc;
}
