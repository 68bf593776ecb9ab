/* Unit tests of the reference engine: each kernel against a naive double
 * precision reference, a whole forward pass (dense and MoE) against a naive
 * whole-model reference, KV cache and batching invariants, stable greedy
 * output, the profile JSON, and validation of bad shapes and steps. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <cmocka.h>
#include <jansson.h>
#include "caliper/error.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/internal.h"
#include "engine/kernels.h"

static uint64_t rng_state = 12345;
static float frand(void) /* uniform in [-1, 1) */
{
    return (float)(cal_k_splitmix64(&rng_state) >> 40) / 8388608.0f - 1.0f;
}
static void frand_fill(float *p, int n, float scale)
{
    for (int i = 0; i < n; i++)
        p[i] = frand() * scale;
}

/* |a − b| <= tol · (1 + |b|) elementwise; returns the worst ratio */
static double max_err(const float *a, const double *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
        if (e > w || isnan(e))
            w = isnan(e) ? INFINITY : e;
    }
    return w;
}
static double max_err_ff(const float *a, const float *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (e > w || isnan(e))
            w = isnan(e) ? INFINITY : e;
    }
    return w;
}

/* ---- naive references ---------------------------------------------------- */

static void ref_rmsnorm(double *out, const double *x, const float *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * r * w[i];
}

static void ref_softmax(double *x, int n)
{
    double m = x[0], s = 0;
    for (int i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int i = 0; i < n; i++)
        s += (x[i] = exp(x[i] - m));
    for (int i = 0; i < n; i++)
        x[i] /= s;
}

static void ref_rope(double *v, int n_heads, int hd, int pos, double theta)
{
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = pos * pow(theta, -2.0 * i / hd);
            double a = v[h * hd + 2 * i], b = v[h * hd + 2 * i + 1];
            v[h * hd + 2 * i] = a * cos(ang) - b * sin(ang);
            v[h * hd + 2 * i + 1] = a * sin(ang) + b * cos(ang);
        }
}

/* NeoX's layout (qwen2, qwen3): element i of a head pairs with i + hd/2 */
static void ref_rope_neox(double *v, int n_heads, int hd, int pos, double theta)
{
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = pos * pow(theta, -2.0 * i / hd);
            double a = v[h * hd + i], b = v[h * hd + i + hd / 2];
            v[h * hd + i] = a * cos(ang) - b * sin(ang);
            v[h * hd + i + hd / 2] = a * sin(ang) + b * cos(ang);
        }
}

/* One matrix of the engine, dequantized, with the format it is held in:
 * every product takes its activations as the engine's kernel for that
 * format does (kernels.h), so the reference rounds them the same way. */
typedef struct rmat {
    float *w;                /* [n_mats][rows][n_in] */
    int dt, pk, rows, n_in;
} rmat;

/* set while the reference models a prefill chunk (the layers' products of
 * more than 16 rows), clear for decode-sized products and the logits of
 * the last token */
static int ref_prefill;

/* How a product on M rounds its activations: Q8_0 weights take X rounded
 * to Q8_0 at every batch size; the K-quants take it rounded to Q8_K in
 * decode, and so do they interleaved (AVX-512 VNNI) in prefill; Q4_1, Q5_0
 * and Q5_1 likewise to Q8_0; BF16 prefill on AVX512_BF16 rounds it to
 * BF16. Others (Q4_0 among them) keep X in F32. */
enum { R_NONE, R_Q8_0, R_Q8_K, R_BF16 };
static int ref_rounding(const rmat *M)
{
    if (M->dt == CAL_DTYPE_Q8_0)
        return R_Q8_0;
    if (M->dt == CAL_DTYPE_Q4_K || M->dt == CAL_DTYPE_Q5_K || M->dt == CAL_DTYPE_Q6_K)
        return !ref_prefill || M->pk ? R_Q8_K : R_NONE;
    if (M->dt == CAL_DTYPE_Q4_1 || M->dt == CAL_DTYPE_Q5_0 || M->dt == CAL_DTYPE_Q5_1)
        return !ref_prefill || M->pk ? R_Q8_0 : R_NONE;
    if (M->dt == CAL_DTYPE_BF16 && ref_prefill && cal_k_have_bf16_gemm())
        return R_BF16;
    return R_NONE;
}

/* y[n_out] = W · x[n_in], W rows r0 .. r0+n_out−1 of matrix (expert) x of M */
static void ref_mv_at(double *y, const rmat *M, int expert, int r0, const double *x0, int n_out)
{
    int n_in = M->n_in;
    const float *w = M->w + ((size_t)expert * M->rows + (size_t)r0) * n_in;
    double xr[4096];
    const double *x = x0;
    int how = ref_rounding(M);
    if (how != R_NONE) {
        float f[4096];
        assert_true(n_in <= 4096);
        for (int i = 0; i < n_in; i++)
            f[i] = (float)x0[i];
        if (how == R_Q8_0)
            cal_k_q8_0_round(f, f, n_in);
        else if (how == R_Q8_K)
            cal_k_q8_k_round(f, f, n_in);
        else
            for (int i = 0; i < n_in; i++)
                f[i] = cal_k_bf16_to_f32(cal_k_f32_to_bf16(f[i]));
        for (int i = 0; i < n_in; i++)
            xr[i] = f[i];
        x = xr;
    }
    for (int o = 0; o < n_out; o++) {
        double s = 0;
        for (int i = 0; i < n_in; i++)
            s += (double)w[(size_t)o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void ref_mv(double *y, const rmat *M, int expert, const double *x)
{
    ref_mv_at(y, M, expert, 0, x, M->rows);
}

static double silu(double g) { return g / (1.0 + exp(-g)); }

/* top-k by a full sort of (prob desc, index asc) */
static void ref_topk(const double *probs, int n, int k, int *idx, double *w)
{
    int order[1024];
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (probs[order[j]] > probs[order[i]] ||
                (probs[order[j]] == probs[order[i]] && order[j] < order[i])) {
                int t = order[i]; order[i] = order[j]; order[j] = t;
            }
    double s = 0;
    for (int j = 0; j < k; j++)
        s += probs[order[j]];
    for (int j = 0; j < k; j++) {
        idx[j] = order[j];
        w[j] = probs[order[j]] / s;
    }
}

/* Tensor t of engine e, every expert, dequantized into a new F32 array:
 * read through cal_engine_rows, as the engine may hold rows interleaved */
static rmat rdeq(const cal_engine *e, const cal_tensor_view *t)
{
    (void)e;
    rmat M = {NULL, t->dtype, t->packed, (int)t->rows, t->n_in};
    assert_non_null(t->m);
    size_t rb = cal_k_row_bytes(t->dtype, t->n_in);
    M.w = malloc(sizeof(float) * (size_t)t->n_mats * (size_t)t->rows * (size_t)t->n_in);
    char *blk = malloc((size_t)t->rows * rb);
    assert_non_null(M.w);
    assert_non_null(blk);
    for (int x = 0; x < t->n_mats; x++) {
        const char *got = cal_engine_rows(e, t, x, 0, t->rows, blk);
        for (int64_t r = 0; r < t->rows; r++)
            cal_k_dequantize_row(t->dtype, got + (size_t)r * rb,
                                 M.w + ((size_t)x * t->rows + (size_t)r) * t->n_in, t->n_in);
    }
    free(blk);
    return M;
}

/* The whole model, token by token, in double, straight from the weights
 * (dequantized when not F32): logits[vocab] for the last of tokens[n]. */
static void ref_forward(const cal_engine *e, const int32_t *tok, int n, double *logits)
{
    const cal_model_config *c = cal_engine_config(e);
    int d = c->dim, H = c->n_heads, KV = c->n_kv_heads, hd = d / H, f = c->ffn_dim;
    int qd = d, kvd = KV * hd, L = c->n_layers;
    cal_model_weights mw;
    cal_engine_weights(e, &mw);
    double *K = calloc((size_t)L * n * kvd, sizeof(double));
    double *V = calloc((size_t)L * n * kvd, sizeof(double));
    double *x = calloc((size_t)d, sizeof(double)), *xn = calloc((size_t)d, sizeof(double));
    double *qkv = calloc((size_t)(qd + 2 * kvd), sizeof(double));
    double *att = calloc((size_t)qd, sizeof(double)), *o = calloc((size_t)d, sizeof(double));
    double *sc = calloc((size_t)n, sizeof(double));
    double *h13 = calloc((size_t)2 * f, sizeof(double)), *a = calloc((size_t)f, sizeof(double));
    double *r = calloc((size_t)(c->n_experts + 1), sizeof(double));
    assert_non_null(K); assert_non_null(V); assert_non_null(sc);
    rmat emb = rdeq(e, &mw.embedding), outw = rdeq(e, &mw.output);
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < d; i++)
            x[i] = (double)emb.w[(size_t)tok[p] * d + i] * mw.embed_scale;
        for (int l = 0; l < L; l++) {
            cal_layer_weights lw;
            cal_engine_layer_weights(e, l, &lw);
            rmat wq = rdeq(e, &lw.q), wk = rdeq(e, &lw.k), wv = rdeq(e, &lw.v);
            rmat wo = rdeq(e, &lw.o), wg = rdeq(e, &lw.gate), wu = rdeq(e, &lw.up);
            rmat wd = rdeq(e, &lw.down);
            rmat wr = {0};
            if (c->n_experts > 0)
                wr = rdeq(e, &lw.router);
            else
                assert_null(lw.router.m);
            ref_rmsnorm(xn, x, lw.attn_norm, d, c->norm_eps);
            ref_mv(qkv, &wq, 0, xn);
            ref_mv(qkv + qd, &wk, 0, xn);
            ref_mv(qkv + qd + kvd, &wv, 0, xn);
            if (c->arch == CAL_ARCH_QWEN2) {
                assert_non_null(lw.bqkv);
                for (int i = 0; i < qd + 2 * kvd; i++)
                    qkv[i] += lw.bqkv[i];
            } else {
                assert_null(lw.bqkv);
            }
            if (CAL_ARCH_QK_NORM(c->arch)) {
                assert_non_null(lw.q_norm);
                for (int h = 0; h < H + KV; h++)
                    ref_rmsnorm(qkv + h * hd, qkv + h * hd, h < H ? lw.q_norm : lw.k_norm,
                                hd, c->norm_eps);
            } else {
                assert_null(lw.q_norm);
            }
            if (c->arch == CAL_ARCH_LLAMA) {
                ref_rope(qkv, H, hd, p, c->rope_theta);
                ref_rope(qkv + qd, KV, hd, p, c->rope_theta);
            } else {
                ref_rope_neox(qkv, H, hd, p, c->rope_theta);
                ref_rope_neox(qkv + qd, KV, hd, p, c->rope_theta);
            }
            memcpy(K + ((size_t)l * n + p) * kvd, qkv + qd, sizeof(double) * kvd);
            memcpy(V + ((size_t)l * n + p) * kvd, qkv + qd + kvd, sizeof(double) * kvd);
            for (int h = 0; h < H; h++) {
                int g = h / (H / KV);
                for (int j = 0; j <= p; j++) {
                    double s = 0;
                    for (int i = 0; i < hd; i++)
                        s += qkv[h * hd + i] * K[((size_t)l * n + j) * kvd + g * hd + i];
                    sc[j] = s / sqrt((double)hd);
                }
                ref_softmax(sc, p + 1);
                for (int i = 0; i < hd; i++) {
                    double s = 0;
                    for (int j = 0; j <= p; j++)
                        s += sc[j] * V[((size_t)l * n + j) * kvd + g * hd + i];
                    att[h * hd + i] = s;
                }
            }
            ref_mv(o, &wo, 0, att);
            for (int i = 0; i < d; i++)
                x[i] += o[i];
            ref_rmsnorm(xn, x, lw.ffn_norm, d, c->norm_eps);
            int ne = c->n_experts > 0 ? c->top_k : 1;
            int idx[64] = {0};
            double wt[64] = {1.0};
            if (c->n_experts > 0) {
                ref_mv(r, &wr, 0, xn);
                ref_softmax(r, c->n_experts);
                ref_topk(r, c->n_experts, c->top_k, idx, wt);
            }
            for (int k = 0; k < ne; k++) {
                ref_mv(h13, &wg, idx[k], xn);
                ref_mv(h13 + f, &wu, idx[k], xn);
                for (int i = 0; i < f; i++)
                    a[i] = silu(h13[i]) * h13[f + i];
                ref_mv(o, &wd, idx[k], a);
                for (int i = 0; i < d; i++)
                    x[i] += wt[k] * o[i];
            }
            free(wq.w); free(wk.w); free(wv.w); free(wo.w); free(wg.w); free(wu.w);
            free(wd.w); free(wr.w);
        }
    }
    ref_rmsnorm(xn, x, mw.final_norm, d, c->norm_eps);
    int prefill = ref_prefill;
    ref_prefill = 0;   /* the logits of the last token: a decode-sized product */
    ref_mv(logits, &outw, 0, xn);
    ref_prefill = prefill;
    free(emb.w); free(outw.w);
    free(K); free(V); free(x); free(xn); free(qkv); free(att); free(o); free(sc);
    free(h13); free(a); free(r);
}

/* ---- kernels ------------------------------------------------------------- */

static void test_kernel_rmsnorm(void **state)
{
    (void)state;
    for (int n = 1; n < 200; n += 37) {
        float x[200], w[200], out[200];
        double xd[200], ref[200];
        frand_fill(x, n, 3.0f);
        frand_fill(w, n, 1.0f);
        for (int i = 0; i < n; i++)
            xd[i] = x[i];
        cal_k_rmsnorm(out, x, w, n, 1e-5f);
        ref_rmsnorm(ref, xd, w, n, 1e-5);
        assert_true(max_err(out, ref, n) < 1e-5);
        cal_k_rmsnorm(x, x, w, n, 1e-5f); /* in place */
        assert_true(max_err(x, ref, n) < 1e-5);
    }
}

static void test_kernel_softmax(void **state)
{
    (void)state;
    float x[300];
    double ref[300];
    frand_fill(x, 300, 20.0f);
    x[7] = 80.0f; /* large values must not overflow */
    for (int i = 0; i < 300; i++)
        ref[i] = x[i];
    cal_k_softmax(x, 300);
    ref_softmax(ref, 300);
    assert_true(max_err(x, ref, 300) < 1e-6);
    double s = 0;
    for (int i = 0; i < 300; i++)
        s += x[i];
    assert_true(fabs(s - 1.0) < 1e-5);
    /* every ragged length: vector body plus masked tail */
    for (int n = 1; n <= 40; n++) {
        frand_fill(x, n, 5.0f);
        for (int i = 0; i < n; i++)
            ref[i] = x[i];
        x[n] = 123.0f; /* beyond the row: must stay untouched */
        cal_k_softmax(x, n);
        ref_softmax(ref, n);
        assert_true(max_err(x, ref, n) < 1e-6);
        assert_true(x[n] == 123.0f);
    }
}

static void test_kernel_rope(void **state)
{
    (void)state;
    int H = 3, hd = 16, half = hd / 2;
    float v[48], cs[8], sn[8];
    double ref[48];
    for (int pos = 0; pos < 300; pos += 61) {
        frand_fill(v, H * hd, 1.0f);
        for (int i = 0; i < H * hd; i++)
            ref[i] = v[i];
        for (int i = 0; i < half; i++) {
            double fr = pow(10000.0, -2.0 * i / hd);
            cs[i] = (float)cos(pos * fr);
            sn[i] = (float)sin(pos * fr);
        }
        cal_k_rope(v, H, hd, cs, sn);
        ref_rope(ref, H, hd, pos, 10000.0);
        assert_true(max_err(v, ref, H * hd) < 1e-5);
    }
}

static void test_kernel_swiglu(void **state)
{
    (void)state;
    float g[100], u[100], out[100];
    double ref[100];
    frand_fill(g, 100, 6.0f);
    frand_fill(u, 100, 2.0f);
    for (int i = 0; i < 100; i++)
        ref[i] = silu(g[i]) * u[i];
    cal_k_swiglu(out, g, u, 100);
    assert_true(max_err(out, ref, 100) < 1e-5);
}

/* One GQA shape against a double-precision reference, over the heads
 * [h0, h1) only (a thread's share: it may start and end inside a group);
 * heads outside it must stay untouched. */
static void check_attention(int H, int KV, int HD, int h0, int h1)
{
    enum { STRIDE = 50, MAXH = 12, MAXD = 64 };
    static float k[MAXH * STRIDE * MAXD], v[MAXH * STRIDE * MAXD], q[MAXH * MAXD],
        out[MAXH * MAXD];
    float scores[CAL_K_ATT_HEADS * STRIDE];
    double ref[MAXH * MAXD], sc[STRIDE];
    frand_fill(k, KV * STRIDE * HD, 1.0f);
    frand_fill(v, KV * STRIDE * HD, 1.0f);
    frand_fill(q, H * HD, 2.0f);
    /* 1..5 and 41: every remainder of the four-position steps */
    static const int lens[] = {1, 2, 3, 4, 5, 41};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int n_pos = lens[li];
        for (int i = 0; i < H * HD; i++)
            out[i] = 42.0f;
        for (int h = h0; h < h1; h++) {
            int g = h / (H / KV);
            for (int j = 0; j < n_pos; j++) {
                double s = 0;
                for (int i = 0; i < HD; i++)
                    s += (double)q[h * HD + i] * k[(g * STRIDE + j) * HD + i];
                sc[j] = s / sqrt((double)HD);
            }
            ref_softmax(sc, n_pos);
            for (int i = 0; i < HD; i++) {
                double s = 0;
                for (int j = 0; j < n_pos; j++)
                    s += sc[j] * v[(g * STRIDE + j) * HD + i];
                ref[h * HD + i] = s;
            }
        }
        cal_k_attention_heads(q, k, v, H, KV, HD, STRIDE, n_pos, h0, h1, scores, out);
        assert_true(max_err(out + h0 * HD, ref + h0 * HD, (h1 - h0) * HD) < 1e-5);
        for (int i = 0; i < H * HD; i++)
            if (i < h0 * HD || i >= h1 * HD)
                assert_true(out[i] == 42.0f);
    }
}

static void test_kernel_attention_gqa(void **state)
{
    (void)state;
    /* 8 query heads over 2 KV heads: each KV head serves a group of 4 */
    check_attention(8, 2, 24, 0, 8);      /* head_dim off the vector path */
    check_attention(8, 2, 64, 0, 8);
    check_attention(12, 4, 64, 0, 12);    /* the base preset's groups of 3 */
    check_attention(12, 4, 64, 2, 7);     /* a share that splits two groups */
    check_attention(12, 2, 32, 1, 12);    /* groups of 6: two runs a group */
    check_attention(6, 6, 48, 3, 5);      /* one query head per KV head */
    check_attention(4, 4, 16, 0, 4);
}

static void test_kernel_moe_topk(void **state)
{
    (void)state;
    for (int rep = 0; rep < 50; rep++) {
        int n = 2 + rep % 15, k = 1 + rep % n;
        float logits[16], probs[16], w[16];
        double pd[16], wr[16];
        int idx[16], ir[16];
        frand_fill(logits, n, 4.0f);
        if (rep % 5 == 0)
            logits[1] = logits[0]; /* a tie goes to the lower index */
        for (int i = 0; i < n; i++)
            pd[i] = logits[i];
        ref_softmax(pd, n);
        ref_topk(pd, n, k, ir, wr);
        cal_k_route_topk(logits, n, k, probs, idx, w);
        double sum = 0;
        for (int j = 0; j < k; j++) {
            assert_int_equal(idx[j], ir[j]);
            assert_true(fabs(w[j] - wr[j]) < 1e-5);
            sum += w[j];
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
    }
}

static void test_kernel_dot_axpy(void **state)
{
    (void)state;
    float a[77], b[77], y[77];
    frand_fill(a, 77, 1.0f);
    frand_fill(b, 77, 1.0f);
    for (int n = 0; n <= 77; n += 11) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += (double)a[i] * b[i];
        assert_true(fabs(cal_k_dot(a, b, n) - s) < 1e-4);
        memcpy(y, b, sizeof y);
        cal_k_axpy(y, 0.5f, a, n);
        for (int i = 0; i < 77; i++)
            assert_true(fabs(y[i] - (i < n ? b[i] + 0.5f * a[i] : b[i])) < 1e-6);
    }
}

/* ---- whole model --------------------------------------------------------- */

static cal_engine *open_preset(const char *name, int seqs, int step)
{
    cal_model_config c;
    assert_int_equal(cal_model_preset(name, &c), CAL_OK);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, seqs, step, &e), CAL_OK);
    assert_non_null(e);
    return e;
}

static void prompt(int32_t *t, int n, int vocab, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)(cal_k_splitmix64(&seed) % (uint64_t)vocab);
}

static int run(cal_engine *e, int slot, int pos, const int32_t *t, int n, float *logits)
{
    cal_step_entry s = {.slot = slot, .pos = pos, .n_tokens = n, .tokens = t,
                        .logits = logits};
    return cal_engine_step(e, &s, 1);
}

static void check_vs_reference(cal_engine *e, int n, int chunk)
{
    int V = cal_engine_config(e)->vocab;
    int32_t t[64];
    prompt(t, n, V, 99);
    float *lg = malloc(sizeof(float) * V);
    double *ref = malloc(sizeof(double) * V);
    for (int p = 0; p < n; p += chunk) {
        int m = n - p < chunk ? n - p : chunk;
        assert_int_equal(run(e, 0, p, t + p, m, lg), CAL_OK);
    }
    /* the layers' products run as prefill where the chunk holds more
     * than 16 rows */
    ref_prefill = chunk > 16 && (n % chunk == 0 || n % chunk > 16);
    int bf16_prefill = ref_prefill && cal_engine_params_held(e, CAL_DTYPE_BF16) > 0 &&
                       cal_k_have_bf16_gemm();
    ref_forward(e, t, n, ref);
    double err = max_err(lg, ref, V);
    /* BF16 activations: the reference rounds its own (double) activations,
     * which sit an F32 rounding away from the engine's, so now and then one
     * rounds the other way and the two drift by BF16 steps; allow one BF16
     * step (2^-8) of the logits' range. Not modelling the rounding at all
     * misses by 0.11 at a range of 7.3 on the tiny preset, ~4 such steps. */
    double span = 0;
    for (int i = 0; i < V; i++)
        span = fmax(span, fabs(ref[i]));
    /* Q8_0 activations likewise: each product rounds its activations to
     * 1/127 of their block's largest, and an F32 rounding's difference
     * between the engine's activations and the reference's puts one on the
     * other side of a half step now and then (which one depends on the
     * order of the sums: OpenBLAS's kernels, the tile shape). One flipped
     * quantum moved the logits by 0.039 and by 0.079 at a range of ~7 on
     * the tiny preset; allow 2^-5 of the range (0.2). A wrong block, scale
     * or lane moves them by the range itself, and test_kernels holds each
     * Q8_0 product to the double product of the same rounded activations. */
    /* Q4_K and Q6_K round their decode products' activations to Q8_K: the
     * same flips now and then */
    int q8 = cal_engine_params_held(e, CAL_DTYPE_Q8_0) > 0 ||
             cal_engine_params_held(e, CAL_DTYPE_Q4_K) > 0 ||
             cal_engine_params_held(e, CAL_DTYPE_Q6_K) > 0;
    double bound = q8 ? 0x1p-5 * span : bf16_prefill ? 0x1p-8 * span : 2e-4;
    if (!(err < bound))
        fail_msg("max logit error %.3g over bound %.3g (n %d, chunk %d, dtype %s)", err, bound,
                 n, chunk, cal_dtype_name(cal_engine_config(e)->dtype));
    ref_prefill = 0;
    /* the logits are not degenerate: they spread over a real range */
    double lo = ref[0], hi = ref[0];
    for (int i = 1; i < V; i++) {
        lo = ref[i] < lo ? ref[i] : lo;
        hi = ref[i] > hi ? ref[i] : hi;
    }
    assert_true(hi - lo > 1.0);
    free(lg);
    free(ref);
}

static void test_forward_tiny_vs_reference(void **state)
{
    (void)state;
    cal_engine *e = open_preset("tiny", 2, 64);
    check_vs_reference(e, 37, 37); /* one chunk: GEMM attention */
    check_vs_reference(e, 13, 1);  /* token by token: cache attention */
    cal_engine_close(&e);
    assert_null(e);
}

/* rms(ŵ − w) ÷ rms(w) over every matrix of layer 0 and the embedding: the
 * format's rounding as the model actually sees it */
static double weight_rounding(const cal_engine *q, const cal_engine *f)
{
    cal_layer_weights a, b;
    cal_engine_layer_weights(q, 0, &a);
    cal_engine_layer_weights(f, 0, &b);
    cal_model_weights ma, mb;
    cal_engine_weights(q, &ma);
    cal_engine_weights(f, &mb);
    const cal_tensor_view *ta[] = {&a.q, &a.k, &a.v, &a.o, &a.gate, &a.up, &a.down,
                                   &ma.embedding};
    const cal_tensor_view *tb[] = {&b.q, &b.k, &b.v, &b.o, &b.gate, &b.up, &b.down,
                                   &mb.embedding};
    double e2 = 0, w2 = 0;
    for (int t = 0; t < 8; t++) {
        rmat x = rdeq(q, ta[t]), y = rdeq(f, tb[t]);
        for (int64_t i = 0; i < (int64_t)ta[t]->rows * ta[t]->n_in; i++) {
            e2 += ((double)x.w[i] - y.w[i]) * ((double)x.w[i] - y.w[i]);
            w2 += (double)y.w[i] * y.w[i];
        }
        free(x.w);
        free(y.w);
    }
    return sqrt(e2 / w2);
}

/* Every weight format against the double-precision reference over the same
 * dequantized weights: the engine sums in F32 whatever the format, so the
 * F32 tolerance holds (decode kernels for the token-by-token run, dequantized
 * tiles through SGEMM for the chunk). Then the format against the F32 model
 * of the same seed, whose weights differ from it by rounding only: the logits
 * move by the weights' relative rounding ε (measured from the weights) times
 * the logits' size times a gain the network gives every format alike (4
 * layers and the logits; 9 to 11 on tiny). So the gain must be the same
 * for F16, BF16 and Q8_0 within a factor 2, whose ε span 25×: an error that
 * is not rounding (a wrong block, a lost scale) breaks that. */
static void test_forward_formats_vs_reference(void **state)
{
    (void)state;
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    cal_engine *ref32 = NULL;
    assert_int_equal(cal_engine_open(&c, 2, 64, &ref32), CAL_OK);
    int V = c.vocab;
    int32_t t[24];
    prompt(t, 24, V, 5);
    float *l32 = malloc(sizeof(float) * V), *lq = malloc(sizeof(float) * V);
    assert_int_equal(run(ref32, 0, 0, t, 24, l32), CAL_OK);
    double span = 0;
    for (int i = 0; i < V; i++)
        span = fmax(span, fabs((double)l32[i]));
    double gain[CAL_DTYPE_COUNT] = {0}, eps[CAL_DTYPE_COUNT] = {0};
    /* the formats whose blocks fit tiny's rows (Q4_0's error, 16 times
     * Q8_0's, and the K-quants: test_forward_kquants_vs_reference) */
    for (int dt = CAL_DTYPE_F16; dt <= CAL_DTYPE_Q8_0; dt++) {
        c.dtype = dt;
        cal_engine *e = NULL;
        assert_int_equal(cal_engine_open(&c, 2, 64, &e), CAL_OK);
        check_vs_reference(e, 37, 37);
        check_vs_reference(e, 13, 1);
        assert_int_equal(run(e, 0, 0, t, 24, lq), CAL_OK);
        double worst = 0;
        for (int i = 0; i < V; i++)
            worst = fmax(worst, fabs((double)lq[i] - l32[i]));
        eps[dt] = weight_rounding(e, ref32);
        gain[dt] = worst / (eps[dt] * span);
        cal_engine_close(&e);
    }
    assert_true(eps[CAL_DTYPE_Q8_0] > 10 * eps[CAL_DTYPE_F16]);
    assert_true(eps[CAL_DTYPE_BF16] > 4 * eps[CAL_DTYPE_F16]);
    for (int dt = CAL_DTYPE_F16; dt <= CAL_DTYPE_Q8_0; dt++) {
        assert_true(gain[dt] > 1.0 && gain[dt] < 50.0);
        assert_true(gain[dt] < 2.0 * gain[CAL_DTYPE_F16] && gain[dt] > 0.5 * gain[CAL_DTYPE_F16]);
    }
    free(l32); free(lq);
    cal_engine_close(&ref32);
}

/* a dense shape whose rows are whole K-quant super-blocks */
static cal_model_config kq_shape(int dtype, int arch)
{
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.dim = 256; c.ffn_dim = 512; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2;
    c.vocab = 1024; c.dtype = dtype; c.arch = arch;
    return c;
}

/* Q4_0, Q4_K and Q6_K engines against the reference over their own
 * dequantized weights: a prefill chunk (dequantized tiles and SGEMM) and
 * token by token (the decode kernels). The activations stay F32, so the
 * bound is the F32 one. */
static void test_forward_kquants_vs_reference(void **state)
{
    (void)state;
    for (int dt = CAL_DTYPE_Q4_0; dt <= CAL_DTYPE_Q6_K; dt++) {
        cal_model_config c = kq_shape(dt, CAL_ARCH_LLAMA);
        cal_engine *e = NULL;
        assert_int_equal(cal_engine_open(&c, 2, 64, &e), CAL_OK);
        check_vs_reference(e, 37, 37);
        check_vs_reference(e, 13, 1);
        cal_engine_close(&e);
    }
    /* the tiny preset's rows are not whole super-blocks: refused by name */
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.dtype = CAL_DTYPE_Q4_K;
    const char *why = NULL;
    assert_int_equal(cal_model_validate(&c, &why), CAL_EINVAL);
    assert_string_equal(why, "dim");
    c.dtype = CAL_DTYPE_Q4_0;
    assert_int_equal(cal_model_validate(&c, NULL), CAL_OK);
}

/* qwen2 (QKV biases) and qwen3 (per-head RMSNorm of Q and K), both with
 * NeoX RoPE, against the reference: prefill and decode, F32 and Q4_K. The
 * shared matrices are llama's for the same seed, and the extra tensors
 * change the logits (so the reference really exercises them). */
static void test_forward_qwen_vs_reference(void **state)
{
    (void)state;
    float *base = malloc(sizeof(float) * 1024), *lg = malloc(sizeof(float) * 1024);
    int32_t t[9];
    prompt(t, 9, 1024, 3);
    cal_model_config c = kq_shape(CAL_DTYPE_F32, CAL_ARCH_LLAMA);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 64, &e), CAL_OK);
    assert_int_equal(run(e, 0, 0, t, 9, base), CAL_OK);
    cal_layer_weights ll;
    cal_engine_layer_weights(e, 1, &ll);
    float *wo = malloc(cal_k_row_bytes(CAL_DTYPE_F32, c.dim) * (size_t)c.dim);
    memcpy(wo, ll.o.m, cal_k_row_bytes(CAL_DTYPE_F32, c.dim) * (size_t)c.dim);
    cal_engine_close(&e);
    for (int arch = CAL_ARCH_QWEN2; arch <= CAL_ARCH_QWEN3; arch++)
        for (int dt = CAL_DTYPE_F32; dt <= CAL_DTYPE_Q4_K; dt += CAL_DTYPE_Q4_K) {
            c = kq_shape(dt, arch);
            assert_int_equal(cal_engine_open(&c, 2, 64, &e), CAL_OK);
            check_vs_reference(e, 37, 37);
            check_vs_reference(e, 13, 1);
            if (dt == CAL_DTYPE_F32) {
                cal_engine_layer_weights(e, 1, &ll);
                assert_memory_equal(ll.o.m, wo, sizeof(float) * (size_t)c.dim * c.dim);
                assert_int_equal(run(e, 0, 0, t, 9, lg), CAL_OK);
                double diff = 0;
                for (int i = 0; i < 1024; i++)
                    diff = fmax(diff, fabs((double)lg[i] - base[i]));
                assert_true(diff > 0.1);
            }
            cal_engine_close(&e);
        }
    /* experts: llama's or qwen3moe's; qwen2 and qwen3 are dense, and
     * qwen3moe without experts is refused */
    assert_int_equal(cal_model_preset("moe", &c), CAL_OK);
    c.arch = CAL_ARCH_QWEN3;
    const char *why = NULL;
    assert_int_equal(cal_model_validate(&c, &why), CAL_EINVAL);
    assert_string_equal(why, "arch");
    c.arch = CAL_ARCH_QWEN3MOE;
    assert_int_equal(cal_model_validate(&c, &why), CAL_OK);
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.arch = CAL_ARCH_QWEN3MOE;
    assert_int_equal(cal_model_validate(&c, &why), CAL_EINVAL);
    assert_string_equal(why, "arch");
    assert_string_equal(cal_arch_name(CAL_ARCH_QWEN3MOE), "qwen3moe");
    assert_int_equal(cal_arch_parse("qwen3moe"), CAL_ARCH_QWEN3MOE);
    assert_string_equal(cal_arch_name(CAL_ARCH_QWEN2), "qwen2");
    assert_int_equal(cal_arch_parse("Qwen3"), CAL_ARCH_QWEN3);
    assert_int_equal(cal_arch_parse("gemma"), -1);
    free(base); free(lg); free(wo);
}

static void test_forward_moe_vs_reference(void **state)
{
    (void)state;
    cal_model_config c;
    assert_int_equal(cal_model_preset("moe", &c), CAL_OK);
    strcpy(c.name, "custom");
    c.dim = 64; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.ffn_dim = 96;
    c.n_experts = 6; c.top_k = 2; c.vocab = 700; c.max_ctx = 64;
    c.tied_embeddings = 0;
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 2, 32, &e), CAL_OK);
    check_vs_reference(e, 20, 20);
    check_vs_reference(e, 9, 3);
    cal_engine_close(&e);
    /* Q8_0, which on VNNI holds every matrix interleaved in place, an expert
     * at a time: 703 vocabulary rows end in a pair and a lone row (the lookup
     * and the logits read it), 6 router rows in a pair, and 64 and 96 inputs
     * in short groups of blocks; the 20-token chunk dequantizes its tiles
     * from the interleaved rows */
    c.dtype = CAL_DTYPE_Q8_0;
    c.vocab = 703;
    assert_int_equal(cal_engine_open(&c, 2, 32, &e), CAL_OK);
    check_vs_reference(e, 20, 20);
    check_vs_reference(e, 9, 3);
    cal_engine_close(&e);
}

/* A file whose matrices are held in seven formats at once, as stored (a
 * Q4_K_M file is such a mixture, of two): each product takes its own
 * matrix's kernel and rounds its activations as that format does, and the
 * Q, K, V and gate, up products split where their formats differ. Against
 * the reference over the same dequantized weights, each product rounding
 * as its format does: a prefill chunk and token by token, dense and MoE
 * (an expert's gate and up apart). */
static void test_forward_mixed_vs_reference(void **state)
{
    (void)state;
    enum { F32 = CAL_DTYPE_F32, F16 = CAL_DTYPE_F16, B16 = CAL_DTYPE_BF16, Q8 = CAL_DTYPE_Q8_0,
           Q40 = CAL_DTYPE_Q4_0, Q4K = CAL_DTYPE_Q4_K, Q6K = CAL_DTYPE_Q6_K };
    static const int layer[2][CAL_T_KINDS] = {
        /* Q    K    V    O    gate up   down router */
        {Q4K, Q8,  Q6K, F16, Q40, B16, Q6K, Q8},
        {F32, F32, Q4K, Q8,  Q6K, Q6K, Q4K, B16},
    };
    char path[] = "/tmp/caliper-mixed-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int experts = 0; experts <= 1; experts++) {
        cal_model_config c = kq_shape(CAL_DTYPE_F32, CAL_ARCH_LLAMA), g;
        if (experts)
            c.n_experts = 4, c.top_k = 2;
        int plan[CAL_T_COUNT(2)];
        plan[CAL_T_EMB] = Q8;
        plan[CAL_T_OUT] = Q6K;
        for (int l = 0; l < 2; l++)
            for (int k = 0; k < CAL_T_KINDS; k++)
                plan[CAL_T_AT(l, k)] = layer[l][k];
        cal_engine *e = NULL;
        char why[256];
        assert_int_equal(cal_engine_open(&c, 1, 16, &e), CAL_OK);
        if (cal_gguf_export_plan(e, path, plan, why, sizeof why) != CAL_OK)
            fail_msg("export: %s", why);
        cal_engine_close(&e);
        if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
            fail_msg("config: %s", why);
        assert_int_equal(cal_engine_open(&g, 2, 64, &e), CAL_OK);
        for (size_t i = 0; i < CAL_T_COUNT(2); i++)
            assert_true(cal_engine_params_held(e, plan[i]) > 0);
        check_vs_reference(e, 37, 37);
        check_vs_reference(e, 13, 1);
        cal_engine_close(&e);
    }
    unlink(path);
}

/* resident pages of n bytes from p (page-aligned) */
static size_t resident(const void *p, size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = (n + pg - 1) / pg, r = 0;
    unsigned char *v = malloc(np);
    assert_non_null(v);
    assert_int_equal(mincore((void *)p, n, v), 0);
    for (size_t i = 0; i < np; i++)
        r += v[i] & 1;
    free(v);
    return r;
}

/* The KV cache is laid out slot by slot, each slot's keys and values on
 * whole pages of their own (2 MiB from a huge page's worth up, 4 KiB
 * below): a sequence touches its own slot's pages
 * and no other's (laid out layer by layer across slots, a 1000-token
 * prompt in one of 16 slots took RSS to a quarter of the whole cache:
 * each huge page it touched held every slot's positions of a layer).
 * Nothing is resident before a position is written. */
static void test_kv_slots_apart(void **state)
{
    (void)state;
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.max_ctx = 64;
    enum { SLOTS = 8 };
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, SLOTS, 64, &e), CAL_OK);
    const void *at[SLOTS];
    size_t bytes[SLOTS];
    for (int s = 0; s < SLOTS; s++) {
        cal_engine_kv_slot(e, s, &at[s], &bytes[s]);
        assert_int_equal((uintptr_t)at[s] % 4096, 0);
        assert_int_equal(bytes[s] % 4096, 0);
        assert_true(bytes[s] >= (size_t)cal_model_kv_bytes_per_token(&c) * c.max_ctx);
        if (s > 0)
            assert_true((const char *)at[s] >= (const char *)at[s - 1] + bytes[s - 1]);
        assert_int_equal(resident(at[s], bytes[s]), 0);
    }
    assert_int_equal(cal_engine_kv_bytes(e), bytes[0] * SLOTS);
    int32_t t[40];
    prompt(t, 40, c.vocab, 11);
    assert_int_equal(run(e, 5, 0, t, 40, NULL), CAL_OK);
    /* a decode batch of slots 1 and 6 */
    cal_step_entry b[2] = {{1, 0, 1, t, NULL}, {6, 0, 1, t + 1, NULL}};
    assert_int_equal(cal_engine_step(e, b, 2), CAL_OK);
    for (int s = 0; s < SLOTS; s++) {
        size_t r = resident(at[s], bytes[s]);
        if (s == 5 || s == 1 || s == 6)
            assert_true(r > 0);
        else if (r != 0)
            fail_msg("slot %d: %zu pages resident, no sequence wrote there", s, r);
    }
    cal_engine_close(&e);
    /* a slot of a huge page's worth or more: whole 2 MiB pages */
    c.max_ctx = 1024;
    assert_int_equal(cal_engine_open(&c, 2, 16, &e), CAL_OK);
    for (int s = 0; s < 2; s++) {
        cal_engine_kv_slot(e, s, &at[s], &bytes[s]);
        assert_int_equal((uintptr_t)at[s] % (2u << 20), 0);
        assert_int_equal(bytes[s] % (2u << 20), 0);
    }
    cal_engine_close(&e);
}

static void test_prefill_chunk_equals_tokenwise(void **state)
{
    (void)state;
    cal_engine *e = open_preset("tiny", 3, 128);
    int V = cal_engine_config(e)->vocab, n = 100;
    int32_t t[100];
    prompt(t, n, V, 7);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V),
          *c = malloc(sizeof(float) * V);
    assert_int_equal(run(e, 0, 0, t, n, a), CAL_OK);
    for (int p = 0; p < n; p++)
        assert_int_equal(run(e, 1, p, t + p, 1, p == n - 1 ? b : NULL), CAL_OK);
    for (int p = 0; p < n; p += 30)
        assert_int_equal(run(e, 2, p, t + p, n - p < 30 ? n - p : 30, c), CAL_OK);
    assert_true(max_err_ff(b, a, V) < 1e-4);
    assert_true(max_err_ff(c, a, V) < 1e-4);
    /* the cache of slot 0 continues correctly: one more decode agrees */
    int32_t next = 5;
    assert_int_equal(run(e, 0, n, &next, 1, a), CAL_OK);
    assert_int_equal(run(e, 1, n, &next, 1, b), CAL_OK);
    assert_true(max_err_ff(b, a, V) < 1e-4);
    free(a); free(b); free(c);
    cal_engine_close(&e);
}

/* A sequence decoded in a batch gets the logits it gets alone. With mixed,
 * the batch's prompts go through one step that mixes prefill chunks with
 * decodes; without, each prompt goes through the same steps as alone, so
 * only the last step differs: Q8_0 rounds every activation to int8, and a
 * prompt taken another way (SGEMM instead of the decode kernel) can round
 * one differently. NS = 6: the interleaved Q8_0 rows (step.c matmul1,
 * where the CPU has VNNI) take a batch of 6 in two tiles of 3 and one
 * sequence alone in a tile of 1, and tiny's 128 and 384 inputs end in
 * short groups of blocks. */
static void batched_equals_alone(int dtype, int mixed)
{
    enum { NS = 6 };
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.dtype = dtype;
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 2 * NS, 128, &e), CAL_OK);
    int V = cal_engine_config(e)->vocab;
    int32_t t[NS][40];
    int len[NS] = {40, 3, 17, 9, 26, 5};
    float *alone[NS], *batch[NS];
    for (int s = 0; s < NS; s++) {
        prompt(t[s], len[s], V, 100 + s);
        alone[s] = malloc(sizeof(float) * V);
        batch[s] = malloc(sizeof(float) * V);
    }
    /* alone: slots 0..3, each its prompt then one decode of token 42 */
    int32_t dec = 42;
    for (int s = 0; s < NS; s++) {
        assert_int_equal(run(e, s, 0, t[s], len[s] - 1, NULL), CAL_OK);
        assert_int_equal(run(e, s, len[s] - 1, &t[s][len[s] - 1], 1, NULL), CAL_OK);
        assert_int_equal(run(e, s, len[s], &dec, 1, alone[s]), CAL_OK);
    }
    /* together in slots NS..2·NS−1 */
    cal_step_entry en[NS];
    if (mixed) {
        /* step 1 mixes a prefill chunk with decodes */
        for (int s = 0; s < NS; s++)
            en[s] = (cal_step_entry){.slot = NS + s, .pos = 0, .n_tokens = len[s] - 1,
                                     .tokens = t[s], .logits = NULL};
        assert_int_equal(cal_engine_step(e, en, NS), CAL_OK);
        for (int s = 0; s < NS; s++)
            en[s] = (cal_step_entry){.slot = NS + s, .pos = len[s] - 1, .n_tokens = 1,
                                     .tokens = &t[s][len[s] - 1], .logits = NULL};
        assert_int_equal(cal_engine_step(e, en, NS), CAL_OK);
    } else {
        for (int s = 0; s < NS; s++) {
            assert_int_equal(run(e, NS + s, 0, t[s], len[s] - 1, NULL), CAL_OK);
            assert_int_equal(run(e, NS + s, len[s] - 1, &t[s][len[s] - 1], 1, NULL), CAL_OK);
        }
    }
    for (int s = 0; s < NS; s++)
        en[s] = (cal_step_entry){.slot = NS + s, .pos = len[s], .n_tokens = 1,
                                 .tokens = &dec, .logits = batch[s]};
    assert_int_equal(cal_engine_step(e, en, NS), CAL_OK);
    for (int s = 0; s < NS; s++) {
        assert_true(max_err_ff(batch[s], alone[s], V) < 1e-4);
        free(alone[s]);
        free(batch[s]);
    }
    cal_engine_close(&e);
}

static void test_batched_equals_alone(void **state)
{
    (void)state;
    batched_equals_alone(CAL_DTYPE_F32, 1);
    batched_equals_alone(CAL_DTYPE_Q8_0, 0);
}

/* Greedy continuation of a fixed prompt on tiny (seed 42), computed once by
 * this engine and frozen here: any change in numerics shows up. */
static const int32_t tiny_greedy_expected[16] = {
    3402, 1211, 2622, 4008, 1715, 853, 1523, 2432,
    1145, 3763, 3166, 294, 2615, 3766, 3763, 312,
};

static void test_greedy_stable(void **state)
{
    (void)state;
    cal_engine *e = open_preset("tiny", 1, 64);
    cal_tokenizer *tk = NULL;
    int V = cal_engine_config(e)->vocab;
    assert_int_equal(cal_tok_open(V, &tk), CAL_OK);
    const char *text = "The quick brown fox jumps over the lazy dog.";
    int32_t ids[64];
    int n = cal_tok_encode(tk, text, strlen(text), ids, 64);
    assert_true(n > 0 && n < 44);
    float *lg = malloc(sizeof(float) * V);
    assert_int_equal(run(e, 0, 0, ids, n, lg), CAL_OK);
    cal_sampler_params sp = {.temperature = 0, .top_p = 1, .seed = 1};
    uint64_t rng = sp.seed;
    int32_t out[16];
    int distinct = 0;
    for (int i = 0; i < 16; i++) {
        out[i] = cal_engine_sample(e, lg, &sp, &rng);
        assert_true(out[i] >= 0 && out[i] < V);
        /* the winner is clear, so the frozen sequence does not hang on
         * rounding differences between BLAS kernel sets */
        float second = -INFINITY;
        for (int k = 0; k < V; k++)
            if (k != out[i] && lg[k] > second)
                second = lg[k];
        assert_true(lg[out[i]] - second > 1e-3f);
        if (i > 0 && out[i] != out[0])
            distinct = 1;
        assert_int_equal(run(e, 0, n + i, &out[i], 1, lg), CAL_OK);
    }
#ifdef PRINT_GREEDY
    for (int i = 0; i < 16; i++)
        print_message("%d, ", out[i]);
    print_message("\n");
#endif
    assert_true(distinct); /* greedy does not collapse to one token */
    assert_memory_equal(out, tiny_greedy_expected, sizeof out);
    free(lg);
    cal_tok_close(&tk);
    cal_engine_close(&e);
}

static void test_presets_and_formulas(void **state)
{
    (void)state;
    cal_model_config c;
    assert_int_equal(cal_model_preset("nope", &c), CAL_ENOTFOUND);
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    assert_int_equal(cal_model_validate(&c, NULL), CAL_OK);
    assert_true(cal_model_n_params(&c) < 5000000);
    assert_int_equal(cal_model_preset("small", &c), CAL_OK);
    assert_true(cal_model_n_params(&c) >= 25000000 && cal_model_n_params(&c) <= 50000000);
    assert_int_equal(cal_model_preset("base", &c), CAL_OK);
    assert_int_equal(c.dim, 768); assert_int_equal(c.n_layers, 12);
    assert_int_equal(c.n_heads, 12); assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.ffn_dim, 2048); assert_int_equal(c.vocab, 32000);
    assert_int_equal(c.tied_embeddings, 1);
    /* base by hand: embedding + per layer (2 norms, QKV 768×1280, O 768×768,
     * FFN 3×768×2048) + final norm */
    int64_t layer = 2 * 768 + 768 * 1280 + 768 * 768 + 3 * 768 * 2048;
    int64_t p = 32000LL * 768 + 12 * layer + 768;
    assert_true(cal_model_n_params(&c) == p);
    assert_true(cal_model_decode_bytes_per_token(&c) == 4 * (p + 768));
    /* SPEC 1.4: KV per token = 2 × layers × kv_heads × head_dim × bytes */
    assert_true(cal_model_kv_bytes_per_token(&c) == 2 * 12 * 4 * 64 * 4);
    double f0 = cal_model_flops_per_token(&c, 0), f1 = cal_model_flops_per_token(&c, 100);
    assert_true(fabs((f1 - f0) - 2.0 * 12 * 2 * 768 * 100) < 1);
    assert_int_equal(cal_model_preset("moe", &c), CAL_OK);
    assert_int_equal(c.n_experts, 8); assert_int_equal(c.top_k, 2);
    assert_int_equal(c.vocab, 151936); assert_int_equal(c.dim, 512);
    assert_int_equal(c.n_layers, 8); assert_int_equal(c.ffn_dim, 1024);
    /* decode reads only the active experts */
    int64_t all = cal_model_n_params(&c) * 4, active = cal_model_decode_bytes_per_token(&c);
    assert_true(active < all);
    assert_true(all - active >= 8LL * 6 * 3 * 512 * 1024 * 4 - 8LL * 4096);
}

static void expect_invalid(cal_model_config c, const char *field)
{
    const char *why = NULL;
    assert_int_equal(cal_model_validate(&c, &why), CAL_EINVAL);
    assert_non_null(why);
    assert_string_equal(why, field);
    cal_engine *e = (cal_engine *)&c; /* must be NULLed on failure */
    assert_int_equal(cal_engine_open(&c, 1, 8, &e), CAL_EINVAL);
    assert_null(e);
}

static void test_validation(void **state)
{
    (void)state;
    cal_model_config c, b;
    assert_int_equal(cal_model_preset("tiny", &b), CAL_OK);
    c = b; c.n_heads = 3; expect_invalid(c, "n_heads");        /* 128 % 3 */
    c = b; c.n_kv_heads = 3; expect_invalid(c, "n_kv_heads");  /* 4 % 3 */
    c = b; c.dim = 0; expect_invalid(c, "dim");
    c = b; c.n_experts = 4; c.top_k = 5; expect_invalid(c, "top_k");
    c = b; c.n_experts = 0; c.top_k = 2; expect_invalid(c, "top_k");
    c = b; c.vocab = 100; expect_invalid(c, "vocab");
    c = b; c.max_ctx = 0; expect_invalid(c, "max_ctx");
    c = b; c.n_layers = -1; expect_invalid(c, "n_layers");
    c = b; c.ffn_dim = 0; expect_invalid(c, "ffn_dim");
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&b, 0, 8, &e), CAL_EINVAL);
    assert_int_equal(cal_engine_open(&b, 1, 0, &e), CAL_EINVAL);

    e = open_preset("tiny", 2, 16);
    int V = b.vocab;
    int32_t t[20];
    prompt(t, 20, V, 3);
    float *ref = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
    assert_int_equal(run(e, 0, 0, t, 10, NULL), CAL_OK);
    int32_t bad = V;
    cal_step_entry two[2] = {{0, 10, 1, t, NULL}, {0, 11, 1, t, NULL}};
    assert_int_equal(run(e, 2, 0, t, 1, NULL), CAL_EINVAL);     /* slot */
    assert_non_null(strstr(cal_engine_last_error(e), "slot"));
    assert_int_equal(run(e, -1, 0, t, 1, NULL), CAL_EINVAL);
    assert_int_equal(run(e, 0, 11, t, 1, NULL), CAL_EINVAL);    /* hole in the cache */
    assert_non_null(strstr(cal_engine_last_error(e), "pos"));
    assert_int_equal(run(e, 0, 10, &bad, 1, NULL), CAL_EINVAL); /* token id */
    assert_non_null(strstr(cal_engine_last_error(e), "tokens"));
    assert_int_equal(run(e, 0, 10, t, 17, NULL), CAL_EINVAL);   /* > max_step */
    assert_int_equal(run(e, 0, 10, t, 0, NULL), CAL_EINVAL);
    assert_int_equal(run(e, 0, 10, NULL, 1, NULL), CAL_EINVAL);
    assert_int_equal(run(e, 1, b.max_ctx - 1 + 1, t, 1, NULL), CAL_EINVAL);
    assert_int_equal(cal_engine_step(e, two, 2), CAL_EINVAL);   /* slot twice */
    assert_int_equal(cal_engine_step(e, two, 3), CAL_EINVAL);   /* > max_seqs */
    assert_int_equal(cal_engine_step(e, NULL, 1), CAL_EINVAL);
    assert_int_equal(cal_engine_step(e, NULL, 0), CAL_OK);
    /* the failed steps changed nothing: continuing equals a fresh run */
    assert_int_equal(run(e, 0, 10, t + 10, 1, lg), CAL_OK);
    assert_int_equal(run(e, 1, 0, t, 11, ref), CAL_OK);
    assert_true(max_err_ff(lg, ref, V) < 1e-4);
    assert_string_equal(cal_engine_last_error(e), "");
    free(ref); free(lg);
    cal_engine_close(&e);
    cal_engine_close(&e); /* closing NULL is a no-op */
}

/* The profile's by_batch part: decode-only steps counted at their batch
 * size, prefill and mixed steps left out, per-op figures that add up. */
static void test_profile_by_batch(void **state)
{
    (void)state;
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.dtype = CAL_DTYPE_Q8_0;
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 4, 32, &e), CAL_OK);
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int s = 0; s < 4; s++)
        assert_int_equal(run(e, s, 0, t, 4 + s, NULL), CAL_OK); /* prefill: not counted */
    cal_step_entry en[3];
    for (int k = 0; k < 2; k++) {   /* two steps of three sequences at depths 4, 5, 6 */
        for (int s = 0; s < 3; s++)
            en[s] = (cal_step_entry){s, 4 + s + k, 1, &t[s], NULL};
        assert_int_equal(cal_engine_step(e, en, 3), CAL_OK);
    }
    assert_int_equal(run(e, 3, 7, t, 1, NULL), CAL_OK);          /* one at batch 1 */
    cal_step_entry mixed[2] = {{0, 6, 2, t, NULL}, {1, 7, 1, t, NULL}};
    assert_int_equal(cal_engine_step(e, mixed, 2), CAL_OK);       /* mixed: not counted */
    char *s = cal_engine_profile_json(e);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "model"),
                                                           "dtype")), "q8_0");
    json_t *bb = json_object_get(j, "by_batch");
    assert_int_equal(json_array_size(bb), 2);
    json_t *b1 = json_array_get(bb, 0), *b3 = json_array_get(bb, 1);
    assert_int_equal(json_integer_value(json_object_get(b1, "batch")), 1);
    assert_int_equal(json_integer_value(json_object_get(b1, "steps")), 1);
    assert_int_equal(json_integer_value(json_object_get(b3, "batch")), 3);
    assert_int_equal(json_integer_value(json_object_get(b3, "steps")), 2);
    /* dense_proj at batch 3: 4 products per layer per step, each reading the
     * Q8_0 weights once for the three rows (34 bytes per 32 weights) plus the
     * rows in and out in F32: QKV 128→256, O 128→128, gate-up 128→768,
     * down 384→128 */
    double per_layer = (128 * 256 + 128 * 128 + 768 * 128 + 128 * 384) * 34.0 / 32 +
                       4.0 * 3 * ((128 + 256) + (128 + 128) + (128 + 768) + (384 + 128));
    json_t *ops = json_object_get(b3, "ops");
    int64_t sum = 0;
    int seen_proj = 0;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *o = json_array_get(ops, i);
        sum += json_integer_value(json_object_get(o, "time_ns"));
        if (strcmp(json_string_value(json_object_get(o, "op")), "dense_proj") == 0) {
            seen_proj = 1;
            assert_int_equal(json_integer_value(json_object_get(o, "calls")), 2 * 4 * 4);
            double by = json_real_value(json_object_get(o, "bytes"));
            assert_true(fabs(by - 2 * 4 * per_layer) < 1);
        }
    }
    assert_true(seen_proj);
    assert_true(sum <= json_integer_value(json_object_get(b3, "step_time_ns")));
    json_decref(j);
    free(s);
    cal_engine_profile_reset(e);
    s = cal_engine_profile_json(e);
    j = json_loads(s, 0, &err);
    assert_int_equal(json_array_size(json_object_get(j, "by_batch")), 0);
    json_decref(j);
    free(s);
    cal_engine_close(&e);
}

static void test_profile_json(void **state)
{
    (void)state;
    cal_engine *e = open_preset("tiny", 1, 32);
    int V = cal_engine_config(e)->vocab;
    int32_t t[20];
    prompt(t, 20, V, 5);
    float *lg = malloc(sizeof(float) * V);
    assert_int_equal(run(e, 0, 0, t, 20, lg), CAL_OK);
    cal_sampler_params sp = {.temperature = 0.8f, .top_p = 0.9f, .seed = 3};
    uint64_t rng = sp.seed;
    int32_t id = cal_engine_sample(e, lg, &sp, &rng);
    assert_true(id >= 0 && id < V);
    assert_int_equal(run(e, 0, 20, &id, 1, lg), CAL_OK);
    char *s = cal_engine_profile_json(e);
    assert_non_null(s);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "format")),
                        "caliper.engine.profile/1");
    assert_int_equal(json_integer_value(json_object_get(j, "steps")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "tokens")), 21);
    json_t *ops = json_object_get(j, "ops");
    assert_true(json_is_array(ops));
    const char *want[] = {"attention", "dense_proj", "norm", "rope", "embedding",
                          "logits", "sampling", "moe_router", "moe_experts"};
    int64_t sum = 0;
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        json_t *found = NULL, *o;
        size_t i;
        json_array_foreach(ops, i, o)
            if (strcmp(json_string_value(json_object_get(o, "op")), want[w]) == 0)
                found = o;
        assert_non_null(found);
        int64_t calls = json_integer_value(json_object_get(found, "calls"));
        if (w < 7) {
            assert_true(calls > 0);
            assert_true(json_integer_value(json_object_get(found, "time_ns")) >= 0);
        } else {
            assert_int_equal(calls, 0); /* a dense model routes nothing */
        }
    }
    json_t *o;
    size_t i;
    json_array_foreach(ops, i, o) {
        if (strcmp(json_string_value(json_object_get(o, "op")), "sampling") != 0)
            sum += json_integer_value(json_object_get(o, "time_ns"));
        if (strcmp(json_string_value(json_object_get(o, "op")), "dense_proj") == 0) {
            /* 2 steps × 4 layers × (QKV, O, FFN up, FFN down) */
            assert_int_equal(json_integer_value(json_object_get(o, "calls")), 2 * 4 * 4);
            double fl = json_real_value(json_object_get(o, "flops"));
            double expect = 21.0 * 2 * 4 * (128 * 256 + 128 * 128 + 3 * 128 * 384);
            assert_true(fabs(fl - expect) < 1);
        }
    }
    assert_true(sum <= json_integer_value(json_object_get(j, "step_time_ns")));
    json_decref(j);
    free(s);
    cal_engine_profile_reset(e);
    s = cal_engine_profile_json(e);
    j = json_loads(s, 0, &err);
    assert_int_equal(json_integer_value(json_object_get(j, "steps")), 0);
    json_decref(j);
    free(s);
    free(lg);
    cal_engine_close(&e);
}

/* Llama 3's RoPE factors on Llama 3.2 1B's heads (head_dim 64, θ 500000,
 * factor 32, low 1, high 4, context 8192): wavelength 2π θ^(2i/64) is under
 * 8192/4 for i <= 14 (factor 1), over 8192 for i >= 18 (factor 32), and
 * rises between; the model carries them only as llama. */
static void test_rope_llama3_factors(void **state)
{
    (void)state;
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.rope_theta = 500000.0f;
    c.rope_freqs = 1, c.rope_factor = 32.0f, c.rope_low_freq = 1.0f;
    c.rope_high_freq = 4.0f, c.rope_orig_ctx = 8192;
    float f[32];
    cal_rope_llama3_factors(&c, 64, f);
    for (int i = 0; i <= 14; i++)
        assert_float_equal(f[i], 1.0f, 0.0f);
    for (int i = 18; i < 32; i++)
        assert_float_equal(f[i], 32.0f, 0.0f);
    for (int i = 15; i <= 17; i++) {
        assert_true(f[i] > f[i - 1] && f[i] < 32.0f);
        /* 1 / ((1 − s)/32 + s), s = (8192/λ − 1) / 3 */
        double wl = 2.0 * M_PI * pow(500000.0, 2.0 * i / 64), sm = (8192.0 / wl - 1.0) / 3.0;
        assert_float_equal(f[i], 1.0 / ((1.0 - sm) / 32.0 + sm), 1e-4);
    }
    const char *why = NULL;
    assert_int_equal(cal_model_validate(&c, &why), CAL_OK);
    int64_t with = cal_model_n_params(&c);
    c.arch = CAL_ARCH_QWEN2;
    assert_int_equal(cal_model_validate(&c, &why), CAL_EINVAL);
    assert_string_equal(why, "rope_freqs");
    c.arch = CAL_ARCH_LLAMA;
    c.rope_high_freq = 0.5f;    /* high <= low: no band between them */
    assert_int_equal(cal_model_validate(&c, &why), CAL_EINVAL);
    c.rope_freqs = 0;
    assert_int_equal(with - cal_model_n_params(&c), c.dim / c.n_heads / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_rmsnorm),
        cmocka_unit_test(test_kernel_softmax),
        cmocka_unit_test(test_kernel_rope),
        cmocka_unit_test(test_kernel_swiglu),
        cmocka_unit_test(test_kernel_attention_gqa),
        cmocka_unit_test(test_kernel_moe_topk),
        cmocka_unit_test(test_kernel_dot_axpy),
        cmocka_unit_test(test_forward_tiny_vs_reference),
        cmocka_unit_test(test_forward_moe_vs_reference),
        cmocka_unit_test(test_forward_formats_vs_reference),
        cmocka_unit_test(test_forward_kquants_vs_reference),
        cmocka_unit_test(test_forward_qwen_vs_reference),
        cmocka_unit_test(test_forward_mixed_vs_reference),
        cmocka_unit_test(test_kv_slots_apart),
        cmocka_unit_test(test_profile_by_batch),
        cmocka_unit_test(test_prefill_chunk_equals_tokenwise),
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_greedy_stable),
        cmocka_unit_test(test_presets_and_formulas),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_rope_llama3_factors),
        cmocka_unit_test(test_profile_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
