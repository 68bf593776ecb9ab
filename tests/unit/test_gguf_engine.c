/* Unit tests: GGUF export and load (engine/gguf.c). An F32 file loaded back
 * gives the very logits of the engine that wrote it; F16 stays within half
 * precision's error; the half converter is exact on every half; and a file
 * caliper cannot serve is refused with a message naming what is missing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/gguf.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/internal.h"
#include "engine/kernels.h"

static char dir[64];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/caliper-gguf-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* a small model: two layers, GQA, vocab just above the byte vocabulary */
static cal_model_config small_cfg(int experts)
{
    cal_model_config c;
    assert_int_equal(cal_model_preset("tiny", &c), CAL_OK);
    c.dim = 64; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.ffn_dim = 96;
    c.vocab = 600; c.max_ctx = 64;
    if (experts) { c.n_experts = 4; c.top_k = 2; }
    return c;
}

static void export_to(const cal_model_config *c, const char *path, int dtype)
{
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(c, 1, 16, &e), CAL_OK);
    char why[256];
    int rc = cal_gguf_export(e, path, dtype, why, sizeof why);
    if (rc) fail_msg("export: %s", why);
    cal_engine_close(&e);
}

/* export_to, then the file's header read back into *m */
static void export_read(const cal_model_config *c, const char *path, int dtype,
                        cal_gguf_model *m)
{
    char why[256];
    export_to(c, path, dtype);
    if (cal_gguf_read_model_file(path, m, why, sizeof why) != CAL_OK)
        fail_msg("read: %s", why);
}

static void logits_of(const cal_model_config *c, const int32_t *ids, int n, float *out)
{
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(c, 1, 16, &e), CAL_OK);
    cal_step_entry en = {0, 0, n, ids, out};
    assert_int_equal(cal_engine_step(e, &en, 1), CAL_OK);
    cal_engine_close(&e);
}

/* tensor a of engine ea and b of eb hold the same rows, byte for byte in
 * their format's block layout, in the same format and shape */
static void assert_same_tensor(const cal_engine *ea, const cal_tensor_view *a,
                               const cal_engine *eb, const cal_tensor_view *b)
{
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->rows, b->rows);
    assert_int_equal(a->n_in, b->n_in);
    assert_int_equal(a->n_mats, b->n_mats);
    size_t rb = cal_k_row_bytes(a->dtype, a->n_in) * (size_t)a->rows;
    char *ba = malloc(rb), *bb = malloc(rb);
    assert_non_null(ba);
    assert_non_null(bb);
    for (int x = 0; x < a->n_mats; x++)
        assert_memory_equal(cal_engine_rows(ea, a, x, 0, a->rows, ba),
                            cal_engine_rows(eb, b, x, 0, b->rows, bb), rb);
    free(ba);
    free(bb);
}

/* every matrix of layer l the same in both engines */
static void assert_same_layer(const cal_engine *ea, const cal_engine *eb, int l)
{
    cal_layer_weights wa, wb;
    cal_engine_layer_weights(ea, l, &wa);
    cal_engine_layer_weights(eb, l, &wb);
    assert_same_tensor(ea, &wa.q, eb, &wb.q);
    assert_same_tensor(ea, &wa.k, eb, &wb.k);
    assert_same_tensor(ea, &wa.v, eb, &wb.v);
    assert_same_tensor(ea, &wa.o, eb, &wb.o);
    assert_same_tensor(ea, &wa.gate, eb, &wb.gate);
    assert_same_tensor(ea, &wa.up, eb, &wb.up);
    assert_same_tensor(ea, &wa.down, eb, &wb.down);
    assert_memory_equal(wa.attn_norm, wb.attn_norm, sizeof(float) * (size_t)wa.q.n_in);
}

static void roundtrip(int experts)
{
    cal_model_config c = small_cfg(experts), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/m%d.gguf", dir, experts);
    export_to(&c, path, CAL_DTYPE_F32);
    int rc = cal_gguf_model_config(path, &g, why, sizeof why);
    if (rc) fail_msg("config: %s", why);
    assert_int_equal(g.dim, c.dim);
    assert_int_equal(g.n_layers, c.n_layers);
    assert_int_equal(g.n_heads, c.n_heads);
    assert_int_equal(g.n_kv_heads, c.n_kv_heads);
    assert_int_equal(g.ffn_dim, c.ffn_dim);
    assert_int_equal(g.n_experts, c.n_experts);
    assert_int_equal(g.top_k, c.top_k);
    assert_int_equal(g.vocab, c.vocab);
    assert_int_equal(g.max_ctx, c.max_ctx);
    /* the preset's one matrix is held once again, and counted once */
    assert_int_equal(c.tied_embeddings, 1);
    assert_int_equal(g.tied_embeddings, 1);
    assert_true(g.embed_scale == CAL_ENGINE_EMBED_SCALE);
    assert_int_equal(cal_model_n_params(&g), cal_model_n_params(&c));
    assert_true(g.rope_theta == c.rope_theta && g.norm_eps == c.norm_eps);
    assert_string_equal(g.weights, path);

    int32_t ids[12] = {72, 101, 108, 108, 111, 32, 599, 300, 7, 0, 255, 256};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&c, ids, 12, a);
    logits_of(&g, ids, 12, b);
    /* the same F32 weights and the embedding scale folded exactly */
    assert_memory_equal(a, b, sizeof(float) * (size_t)c.vocab);

    /* F16: each weight within 2^-11 relative; the logits stay close */
    snprintf(path, sizeof path, "%s/m%d-f16.gguf", dir, experts);
    export_to(&c, path, CAL_DTYPE_F16);
    rc = cal_gguf_model_config(path, &g, why, sizeof why);
    if (rc) fail_msg("config f16: %s", why);
    logits_of(&g, ids, 12, b);
    double maxd = 0, maxa = 0;
    for (int i = 0; i < c.vocab; i++) {
        maxd = fmax(maxd, fabs((double)a[i] - b[i]));
        maxa = fmax(maxa, fabs((double)a[i]));
    }
    assert_true(maxd > 0);               /* it really is another precision */
    assert_true(maxd < 0.01 * maxa);
    free(a);
    free(b);
}

static void test_roundtrip_dense(void **state) { roundtrip(0); }

/* BF16 and Q8_0 files, as llama.cpp reads them: each 2-D tensor in ggml's
 * type for the format (norms F32) at that format's size. Served back in the
 * same format, every matrix is byte for byte the one the writing engine
 * held (rows in the engine's format are copied both ways), except the
 * embedding, which the export scales by the engine's embedding scale and so
 * rounds again: each of its values within one step of the format. Served in
 * F32, the logits are those of the format's values. */
static void roundtrip_format(int dtype, uint32_t ggml_type)
{
    cal_model_config c = small_cfg(0), g;
    c.dtype = dtype;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/m-%s.gguf", dir, cal_dtype_name(dtype));
        cal_gguf_model m;
    export_read(&c, path, dtype, &m);
    const cal_gguf_tensor *q = cal_gguf_find(&m, "blk.1.ffn_down.weight");
    const cal_gguf_tensor *n = cal_gguf_find(&m, "blk.1.ffn_norm.weight");
    assert_non_null(q);
    assert_non_null(n);
    assert_int_equal(q->type, ggml_type);
    assert_int_equal(n->type, CAL_GGUF_F32);
    assert_int_equal(q->bytes, (uint64_t)(c.dim * cal_dtype_bytes_per_weight(dtype) * c.ffn_dim));
    cal_gguf_model_free(&m);

    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    g.dtype = dtype;
    g.as_stored = 0;
    cal_engine *ea = NULL, *eb = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 16, &ea), CAL_OK);
    assert_int_equal(cal_engine_open(&g, 1, 16, &eb), CAL_OK);
    size_t rd = cal_k_row_bytes(dtype, c.dim);
    for (int l = 0; l < c.n_layers; l++)
        assert_same_layer(ea, eb, l);
    cal_model_weights ma, mb;
    cal_engine_weights(ea, &ma);
    cal_engine_weights(eb, &mb);
    assert_same_tensor(ea, &ma.output, eb, &mb.output);
    float *ra = malloc(sizeof(float) * (size_t)c.dim), *rb = malloc(sizeof(float) * (size_t)c.dim);
    char *blk = malloc(rd);
    assert_non_null(ra);
    assert_non_null(rb);
    assert_non_null(blk);
    /* one step: 2^-8 of the value (BF16); 1/127 of the block's largest (Q8_0) */
    for (int v = 0; v < c.vocab; v++) {
        cal_k_dequantize_row(dtype, cal_engine_rows(ea, &ma.embedding, 0, v, 1, blk), ra, c.dim);
        cal_k_dequantize_row(dtype, cal_engine_rows(eb, &mb.embedding, 0, v, 1, blk), rb, c.dim);
        for (int k = 0; k < c.dim; k++) {
            float want = ra[k] * ma.embed_scale, step = fabsf(want) * 0x1p-8f;
            if (dtype == CAL_DTYPE_Q8_0) {
                float amax = 0;
                for (int j = k / 32 * 32; j < k / 32 * 32 + 32; j++)
                    amax = fmaxf(amax, fabsf(ra[j] * ma.embed_scale));
                step = amax / 127;
            }
            assert_true(fabsf(rb[k] * mb.embed_scale - want) <= step * 1.001f + 1e-12f);
        }
    }
    free(ra);
    free(rb);
    free(blk);
    cal_engine_close(&ea);
    cal_engine_close(&eb);

    /* the same file into an F32 engine: close to the format's own logits (a
     * wrong block layout or scale would be far off) */
    int32_t ids[6] = {72, 101, 108, 599, 7, 256};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&c, ids, 6, a);
    g.dtype = CAL_DTYPE_F32;
    g.as_stored = 0;
    logits_of(&g, ids, 6, b);
    double maxd = 0, maxa = 0;
    for (int i = 0; i < c.vocab; i++) {
        maxd = fmax(maxd, fabs((double)a[i] - b[i]));
        maxa = fmax(maxa, fabs((double)a[i]));
    }
    assert_true(maxa > 0);
    assert_true(maxd < 0.05 * maxa);
    free(a);
    free(b);
}

static void test_roundtrip_bf16(void **state) { roundtrip_format(CAL_DTYPE_BF16, CAL_GGUF_BF16); }
static void test_roundtrip_q8_0(void **state) { roundtrip_format(CAL_DTYPE_Q8_0, CAL_GGUF_Q8_0); }
static void test_roundtrip_moe(void **state) { roundtrip(1); }

/* Q4_0, Q4_K and Q6_K files: each matrix in its ggml type at its block
 * size; served back in the same format every matrix is the writing engine's
 * byte for byte and the logits are the same bits (tolerance 0: the tied
 * embedding is held once, from output.weight, as the writer held it). Into
 * an F32 engine the weights are the format's values exactly, so the logits
 * differ only by the order of the sums (1e-4 of the largest). */
static cal_model_config kq_cfg(int dtype)
{
    cal_model_config c = small_cfg(0);
    c.dim = 256; c.ffn_dim = 512; c.n_heads = 4; c.n_kv_heads = 2;
    c.dtype = dtype;
    return c;
}

static double max_rel_diff(const float *a, const float *b, int n)
{
    double maxd = 0, maxa = 0;
    for (int i = 0; i < n; i++) {
        maxd = fmax(maxd, fabs((double)a[i] - b[i]));
        maxa = fmax(maxa, fabs((double)a[i]));
    }
    assert_true(maxa > 0);
    return maxd / maxa;
}

static void roundtrip_kq(int dtype, uint32_t ggml_type)
{
    cal_model_config c = kq_cfg(dtype), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/kq-%s.gguf", dir, cal_dtype_name(dtype));
        cal_gguf_model m;
    export_read(&c, path, dtype, &m);
    const cal_gguf_tensor *q = cal_gguf_find(&m, "blk.1.ffn_down.weight");
    assert_non_null(q);
    assert_int_equal(q->type, ggml_type);
    assert_int_equal(q->bytes, (uint64_t)(c.dim * cal_dtype_bytes_per_weight(dtype) * c.ffn_dim));
    cal_gguf_model_free(&m);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    assert_int_equal(g.tied_embeddings, 1);
    g.dtype = dtype;
    g.as_stored = 0;
    cal_engine *ea = NULL, *eb = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 16, &ea), CAL_OK);
    assert_int_equal(cal_engine_open(&g, 1, 16, &eb), CAL_OK);
    for (int l = 0; l < c.n_layers; l++)
        assert_same_layer(ea, eb, l);
    cal_engine_close(&ea);
    cal_engine_close(&eb);
    int32_t ids[7] = {72, 101, 108, 599, 7, 256, 32};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&c, ids, 7, a);
    logits_of(&g, ids, 7, b);
    assert_memory_equal(a, b, sizeof(float) * (size_t)c.vocab);
    g.dtype = CAL_DTYPE_F32;
    g.as_stored = 0;
    logits_of(&g, ids, 7, b);
    /* the same weights; Q4_K and Q6_K round the activations of their
     * decode-sized products (7 rows here) to Q8_K, F32 does not: that
     * rounding (1/254 of each 256's largest) moves the logits: by 0.031 (Q4_K)
     * and 0.042 (Q6_K) of the largest on this model; allowed 0.1 */
    double kd = max_rel_diff(a, b, c.vocab);
    print_message("%s and f32 from the same file: max logit difference %.3g of the largest\n",
                  cal_dtype_name(dtype), kd);
    assert_true(kd < (dtype == CAL_DTYPE_Q4_0 ? 1e-4 : 0.1));
    free(a);
    free(b);
}

/* qwen2, qwen3 and qwen3moe files: their general.architecture, their own keys and
 * the extra tensors (F32, 1-D); served back in the writer's format the
 * logits are the writer's bits, in F32, Q4_K and Q6_K. */
static void roundtrip_arch(int arch, int dtype)
{
    cal_model_config c = kq_cfg(dtype), g;
    c.arch = arch;
    if (arch == CAL_ARCH_QWEN3MOE)
        c.n_experts = 4, c.top_k = 2;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, cal_arch_name(arch), cal_dtype_name(dtype));
        cal_gguf_model m;
    export_read(&c, path, dtype, &m);
    assert_string_equal(m.shape.arch, cal_arch_name(arch));
    assert_int_equal(m.ffn, c.ffn_dim);
    const char *extra = arch == CAL_ARCH_QWEN2 ? "blk.1.attn_v.bias" : "blk.1.attn_k_norm.weight";
    const cal_gguf_tensor *t = cal_gguf_find(&m, extra);
    assert_non_null(t);
    assert_int_equal(t->type, CAL_GGUF_F32);
    assert_int_equal(t->ne[0], arch == CAL_ARCH_QWEN2 ? 2 * c.dim / c.n_heads : c.dim / c.n_heads);
    cal_gguf_model_free(&m);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    assert_int_equal(g.arch, arch);
    /* qwen3moe: one expert's width from expert_feed_forward_length */
    assert_int_equal(g.ffn_dim, c.ffn_dim);
    assert_int_equal(g.n_experts, c.n_experts);
    assert_int_equal(g.top_k, c.top_k);
    g.dtype = dtype;
    g.as_stored = 0;
    int32_t ids[7] = {72, 101, 108, 599, 7, 256, 32};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&c, ids, 7, a);
    logits_of(&g, ids, 7, b);
    assert_memory_equal(a, b, sizeof(float) * (size_t)c.vocab);
    free(a);
    free(b);
}

static void test_roundtrip_qwen(void **state)
{
    (void)state;
    roundtrip_arch(CAL_ARCH_QWEN2, CAL_DTYPE_F32);
    roundtrip_arch(CAL_ARCH_QWEN3, CAL_DTYPE_F32);
    roundtrip_arch(CAL_ARCH_QWEN2, CAL_DTYPE_Q4_K);
    roundtrip_arch(CAL_ARCH_QWEN3, CAL_DTYPE_Q6_K);
    roundtrip_arch(CAL_ARCH_QWEN3MOE, CAL_DTYPE_F32);
    roundtrip_arch(CAL_ARCH_QWEN3MOE, CAL_DTYPE_Q4_K);
}

static void test_roundtrip_q4_0(void **state) { roundtrip_kq(CAL_DTYPE_Q4_0, CAL_GGUF_Q4_0); }
static void test_roundtrip_q4_k(void **state) { roundtrip_kq(CAL_DTYPE_Q4_K, CAL_GGUF_Q4_K); }
static void test_roundtrip_q6_k(void **state) { roundtrip_kq(CAL_DTYPE_Q6_K, CAL_GGUF_Q6_K); }

/* Q4_K_M: Q6_K for output.weight and for attn_v and ffn_down of llama.cpp's
 * use_more_bits layers (of 2 layers, layer 1), Q4_K for the rest. Written
 * from a Q4_K engine, the Q6_K tensors hold its values rounded again: Q6_K
 * moves a weight by at most half its step, 1/64 of its sub-block's largest
 * value. On this shape every matrix in Q6_K moves the logits by 0.20 of
 * the largest against F32 (Q8_0: 0.05, Q4_K: 0.46; the synthetic model
 * amplifies weight noise); rounding a third of them again moved them by
 * 0.09, and the bound is 0.15, below the whole model's Q6_K figure. A Q6_K
 * tensor read with a wrong layout would be off by its whole value. */
static void test_roundtrip_q4_k_m(void **state)
{
    (void)state;
    cal_model_config c = kq_cfg(CAL_DTYPE_Q4_K), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/kq-q4_k_m.gguf", dir);
        cal_gguf_model m;
    export_read(&c, path, CAL_GGUF_MIX_Q4_K_M, &m);
    static const struct { const char *name; uint32_t type; } want[] = {
        {"token_embd.weight", CAL_GGUF_Q4_K},    {"output.weight", CAL_GGUF_Q6_K},
        {"blk.0.attn_q.weight", CAL_GGUF_Q4_K},  {"blk.0.attn_v.weight", CAL_GGUF_Q4_K},
        {"blk.0.ffn_down.weight", CAL_GGUF_Q4_K}, {"blk.1.attn_v.weight", CAL_GGUF_Q6_K},
        {"blk.1.ffn_down.weight", CAL_GGUF_Q6_K}, {"blk.1.attn_k.weight", CAL_GGUF_Q4_K},
        {"blk.1.ffn_norm.weight", CAL_GGUF_F32},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cal_gguf_tensor *t = cal_gguf_find(&m, want[i].name);
        assert_non_null(t);
        if (t->type != want[i].type)
            fail_msg("%s: type %u, not %u", want[i].name, t->type, want[i].type);
    }
    cal_gguf_model_free(&m);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    g.dtype = CAL_DTYPE_F32;
    g.as_stored = 0;
    int32_t ids[7] = {72, 101, 108, 599, 7, 256, 32};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&c, ids, 7, a);
    logits_of(&g, ids, 7, b);
    double d = max_rel_diff(a, b, c.vocab);
    print_message("q4_k_m served in f32: max logit difference %.4f of the largest\n", d);
    assert_true(d > 0 && d < 0.15);
    free(a);
    free(b);
}

static void test_half_exact(void **state)
{
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;   /* NaN payloads */
        float f = cal_k_f16_to_f32((uint16_t)h);
        assert_int_equal(cal_k_f32_to_f16(f), h);
    }
    assert_true(cal_k_f16_to_f32(0x3c00) == 1.0f);
    assert_true(cal_k_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    /* ties to even: 1 + 2^-11 lies between 1 and 1 + 2^-10 */
    assert_int_equal(cal_k_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    assert_int_equal(cal_k_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    assert_int_equal(cal_k_f32_to_f16(65520.0f), 0x7c00);   /* rounds past 65504 */
    assert_int_equal(cal_k_f32_to_f16(-0.0f), 0x8000);
}

/* ---- refusals ------------------------------------------------------------ */

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* the bytes just after the first occurrence of key (a string in the file) */
static uint8_t *after(uint8_t *b, size_t n, const char *key)
{
    uint8_t *p = memmem(b, n, key, strlen(key));
    assert_non_null(p);
    return p + strlen(key);
}

static void expect_refusal(const char *name, void (*patch)(uint8_t *, size_t),
                           const char *want)
{
    cal_model_config c = small_cfg(0), g;
    char src[128], dst[128], why[512];
    snprintf(src, sizeof src, "%s/base.gguf", dir);
    snprintf(dst, sizeof dst, "%s/%s.gguf", dir, name);
    export_to(&c, src, CAL_DTYPE_F32);
    size_t n;
    uint8_t *b = slurp(src, &n);
    patch(b, n);
    spit(dst, b, n);
    free(b);
    memset(&g, 0x5a, sizeof g);
    int rc = cal_gguf_model_config(dst, &g, why, sizeof why);
    if (rc != CAL_EINVAL) fail_msg("%s: rc %d (%s)", name, rc, why);
    if (!strstr(why, want)) fail_msg("%s: \"%s\" lacks \"%s\"", name, why, want);
    assert_int_equal(((unsigned char *)&g)[0], 0x5a);   /* untouched */
}

/* "general.architecture" + type u32 + length u64 + "llama" */
static void p_arch(uint8_t *b, size_t n)
{
    memcpy(after(b, n, "general.architecture") + 12, "gemma", 5);
    for (uint8_t *p = b; (p = memmem(p, n - (size_t)(p - b), "llama.", 6)); p += 6)
        memcpy(p, "gemma.", 6);   /* a gemma file has its own keys */
}
static void p_vocab(uint8_t *b, size_t n) { memcpy(after(b, n, "tokenizer.ggml.model") + 12, "gpt2x", 5); }
static void p_bytes(uint8_t *b, size_t n) { memcpy(after(b, n, "<0x41>") - 6, "<0x4X>", 6); }
/* tensor info: name, n_dims u32, 2 × ne u64, type u32 */
static void p_type(uint8_t *b, size_t n)
{
    uint8_t *t = after(b, n, "blk.1.ffn_up.weight") + 4 + 16;
    t[0] = 20;  /* IQ4_NL: fewer bytes than F32, so the file still holds them */
}
static void p_missing(uint8_t *b, size_t n) { memcpy(after(b, n, "blk.1.ffn_up") - 2, "xx", 2); }

static void test_refusals(void **state)
{
    expect_refusal("arch", p_arch, "architecture \"gemma\" is not supported");
    expect_refusal("vocab", p_vocab, "vocabulary \"gpt2x\" is not supported");
    expect_refusal("type", p_type, "tensor blk.1.ffn_up.weight: type IQ4_NL is not supported");
    expect_refusal("missing", p_missing, "tensor blk.1.ffn_up.weight is missing");
    char why[256];
    cal_model_config g;
    /* without byte tokens at 0..255 the file is an ordinary SentencePiece
     * vocabulary: served through its own tokenizer, as llama.cpp serves it */
    {
        cal_model_config c = small_cfg(0);
        char src[128], dst[128];
        snprintf(src, sizeof src, "%s/base.gguf", dir);
        snprintf(dst, sizeof dst, "%s/bytes.gguf", dir);
        export_to(&c, src, CAL_DTYPE_F32);
        size_t n;
        uint8_t *b = slurp(src, &n);
        p_bytes(b, n);
        spit(dst, b, n);
        free(b);
        assert_int_equal(cal_gguf_model_config(dst, &g, why, sizeof why), CAL_OK);
        assert_int_equal(g.vocab, c.vocab);
    }
    assert_int_equal(cal_gguf_model_config("/nonexistent/x.gguf", &g, why, sizeof why),
                     CAL_ENOTFOUND);
    assert_non_null(strstr(why, "/nonexistent/x.gguf"));
}

/* caliper.embedding_scale holds the two embedding matrices as one only while
 * token_embd is output.weight scaled: a file changed since is served with
 * both, as llama.cpp reads it. */
static void test_scaled_tie_checked(void **state)
{
    cal_model_config c = small_cfg(0), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/tie.gguf", dir);
        cal_gguf_model m;
    export_read(&c, path, CAL_DTYPE_F32, &m);
    assert_true(fabs(m.embed_scale - CAL_ENGINE_EMBED_SCALE) < 1e-7);
    uint64_t at = cal_gguf_find(&m, "token_embd.weight")->offset + 4 * (5 * 64 + 7);
    cal_gguf_model_free(&m);
    size_t n;
    uint8_t *b = slurp(path, &n);
    float v;
    memcpy(&v, b + at, 4);
    v = v * 3 + 0.5f;                       /* row 5 no longer output.weight's × 0.1 */
    memcpy(b + at, &v, 4);
    spit(path, b, n);
    free(b);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    assert_int_equal(g.tied_embeddings, 0);
    assert_true(g.embed_scale == 0.0f);
    assert_int_equal(cal_model_n_params(&g), cal_model_n_params(&c) + (int64_t)c.vocab * c.dim);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    cal_model_weights w;
    cal_engine_weights(e, &w);
    assert_true(w.output.m != w.embedding.m);
    assert_true(((const float *)w.embedding.m)[5 * 64 + 7] == v);   /* the file's value */
    cal_engine_close(&e);
}

static void test_byte_tokenizer(void **state)
{
    cal_tokenizer *t = NULL;
    assert_int_equal(cal_tok_open_bytes(600, CAL_GGUF_EOS, &t), CAL_OK);
    int32_t ids[16];
    /* words the synthetic vocabulary has pieces for still go byte by byte */
    assert_int_equal(cal_tok_encode(t, "the end\n", 8, ids, 16), 8);
    assert_int_equal(ids[0], 't');
    assert_int_equal(ids[3], ' ');
    assert_int_equal(ids[7], '\n');
    assert_int_equal(cal_tok_eos(t), CAL_GGUF_EOS);
    cal_tok_state st = {0};
    char out[CAL_TOK_DECODE_MAX];
    assert_int_equal(cal_tok_decode(t, &st, 300, out, sizeof out), 5);
    assert_memory_equal(out, "[300]", 5);
    assert_int_equal(cal_tok_decode(t, &st, CAL_GGUF_EOS, out, sizeof out), 0);
    cal_tok_close(&t);
    assert_int_equal(cal_tok_open_bytes(600, 600, &t), CAL_EINVAL);
}

/* A model with Llama 3's RoPE factors: written as rope_freqs.weight (F32,
 * head_dim/2), read back as such (the file's values, not the rule), the same
 * logits; and they matter: without them the logits differ. */
static void test_roundtrip_rope_freqs(void **state)
{
    (void)state;
    cal_model_config c = kq_cfg(CAL_DTYPE_F32), g;
    c.rope_freqs = 1, c.rope_factor = 32.0f, c.rope_low_freq = 1.0f;
    c.rope_high_freq = 4.0f, c.rope_orig_ctx = 64;   /* a short context: every
                                                        prompt position feels it */
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/rope.gguf", dir);
        cal_gguf_model m;
    export_read(&c, path, CAL_DTYPE_F32, &m);
    const cal_gguf_tensor *t = cal_gguf_find(&m, "rope_freqs.weight");
    assert_non_null(t);
    assert_int_equal(t->type, CAL_GGUF_F32);
    assert_int_equal(t->ne[0], c.dim / c.n_heads / 2);
    cal_gguf_model_free(&m);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    assert_int_equal(g.rope_freqs, 1);
    assert_true(g.rope_factor == 0.0f);   /* the factors come from the file */
    int32_t ids[12] = {72, 101, 108, 299, 7, 256, 32, 9, 77, 100, 3, 40};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&c, ids, 12, a);
    logits_of(&g, ids, 12, b);
    assert_memory_equal(a, b, sizeof(float) * (size_t)c.vocab);
    c.rope_freqs = 0;
    logits_of(&c, ids, 12, b);
    assert_true(max_rel_diff(a, b, c.vocab) > 1e-3);
    free(a);
    free(b);
}

/* ---- formats read but not held: Q4_1, Q5_0, Q5_1, Q5_K ------------------
 * One tensor of an F32 file retyped (the type field patched, its bytes
 * overwritten with blocks built here) and the file served in F32: the
 * engine must hold each value as this element-by-element reading of ggml's
 * layouts gives it, bit for bit. */
static float h2f(const uint8_t *p) { return cal_k_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* element i (0..31) of a 32-value block: low nibbles first, then high ones;
 * its fifth bit is bit i of the 4 qh bytes */
static int nib32(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }
static int bit5(const uint8_t *qh, int i) { return (qh[i / 8] >> (i % 8)) & 1; }

/* Q4_K's 6-bit scale and min of sub-block j, as ggml's get_scale_min_k4 */
static void scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) { *sc = s[j] & 63; *m = s[j + 4] & 63; }
    else { *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4; }
}

static float ref_value(uint32_t type, const uint8_t *blk, int i)
{
    switch (type) {
    case CAL_GGUF_Q4_1: return (float)nib32(blk + 4, i) * h2f(blk) + h2f(blk + 2);
    case CAL_GGUF_Q5_0:
        return (float)((nib32(blk + 6, i) | bit5(blk + 2, i) << 4) - 16) * h2f(blk);
    case CAL_GGUF_Q5_1:
        return (float)(nib32(blk + 8, i) | bit5(blk + 4, i) << 4) * h2f(blk) + h2f(blk + 2);
    default: {   /* Q5_K: d, dmin, scales[12], qh[32], qs[128] */
        int j = i / 32, l = i % 32, sc, m;
        scale_min(blk + 4, j, &sc, &m);
        const uint8_t *qs = blk + 48 + 32 * (j / 2);
        int q = (j % 2 ? qs[l] >> 4 : qs[l] & 15) | ((blk[16 + l] >> j) & 1) << 4;
        return h2f(blk) * (float)sc * (float)q - h2f(blk + 2) * (float)m;
    }
    }
}

static void read_format(uint32_t type, int block, int bytes)
{
    cal_model_config c = kq_cfg(CAL_DTYPE_F32), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/fmt-%u.gguf", dir, type);
    cal_gguf_model m;
    export_read(&c, path, CAL_DTYPE_F32, &m);
    const cal_gguf_tensor *t = cal_gguf_find(&m, "blk.1.ffn_down.weight");
    assert_non_null(t);
    int n_in = (int)t->ne[0], rows = (int)t->ne[1];
    assert_int_equal(n_in, c.ffn_dim);
    uint64_t off = t->offset;
    cal_gguf_model_free(&m);
    size_t n;
    uint8_t *b = slurp(path, &n);
    after(b, n, "blk.1.ffn_down.weight")[4 + 16] = (uint8_t)type;
    /* blocks: random quants; scales and offsets sane halves of either sign */
    uint64_t st = 0x9e3779b97f4a7c15ull ^ type;
    size_t nb = (size_t)rows * (size_t)(n_in / block);
    uint8_t *d = b + off;
    for (size_t k = 0; k < nb * (size_t)bytes; k++)
        d[k] = (uint8_t)cal_k_splitmix64(&st);
    for (size_t k = 0; k < nb; k++) {
        uint8_t *blk = d + k * (size_t)bytes;
        int halves = type == CAL_GGUF_Q5_0 ? 1 : 2;
        for (int h = 0; h < halves; h++) {
            float v = (float)((int)(cal_k_splitmix64(&st) % 2001) - 1000) * 1e-5f;
            uint16_t hv = cal_k_f32_to_f16(h == 0 && type == CAL_GGUF_Q5_K ? fabsf(v) : v);
            blk[2 * h] = (uint8_t)hv;
            blk[2 * h + 1] = (uint8_t)(hv >> 8);
        }
    }
    spit(path, b, n);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    g.dtype = CAL_DTYPE_F32;
    g.as_stored = 0;
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    cal_layer_weights w;
    cal_engine_layer_weights(e, 1, &w);
    const float *got = w.down.m;
    assert_int_equal(w.down.dtype, CAL_DTYPE_F32);
    size_t row_bytes = (size_t)(n_in / block) * (size_t)bytes, bad = 0;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n_in; i++) {
            float want = ref_value(type, d + (size_t)r * row_bytes + (size_t)(i / block) * bytes,
                                   i % block);
            bad += memcmp(&want, &got[(size_t)r * n_in + i], sizeof want) != 0;
        }
    assert_int_equal(bad, 0);
    cal_engine_close(&e);
    free(b);
}

/* ---- each matrix in its own format ---------------------------------------- */

/* A mixture no quantizer writes but any file may hold: every engine format
 * somewhere, Q, K and V in three formats in layer 0 (K and V split from Q,
 * and from each other), Q and K in one and V in another in layer 1, gate
 * and up apart in layer 0 and together in layer 1, token_embd and output
 * apart. */
static void mixed_plan(const cal_model_config *c, int *plan)
{
    enum { F32 = CAL_DTYPE_F32, F16 = CAL_DTYPE_F16, B16 = CAL_DTYPE_BF16, Q8 = CAL_DTYPE_Q8_0,
           Q40 = CAL_DTYPE_Q4_0, Q4K = CAL_DTYPE_Q4_K, Q6K = CAL_DTYPE_Q6_K };
    static const int layer[2][CAL_T_KINDS] = {
        /* Q    K    V    O    gate up   down router */
        {Q4K, Q8,  Q6K, F16, Q40, B16, Q6K, Q8},
        {F32, F32, Q4K, Q8,  Q6K, Q6K, Q4K, B16},
    };
    plan[CAL_T_EMB] = Q8;
    plan[CAL_T_OUT] = Q6K;
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < CAL_T_KINDS; k++)
            plan[CAL_T_AT(l, k)] = k == CAL_T_ROUTER && c->n_experts == 0
                                   ? c->dtype : layer[l % 2][k];   /* no router */
}

/* the file's bytes of tensor name, and its type */
static const uint8_t *file_tensor(const uint8_t *file, const cal_gguf_model *m, const char *name,
                                  uint32_t *type, uint64_t *bytes)
{
    const cal_gguf_tensor *t = cal_gguf_find(m, name);
    if (!t)
        fail_msg("tensor %s is missing", name);
    *type = t->type;
    *bytes = t->bytes;
    return file + t->offset;
}

/* Every tensor of files a and b: the same names, types, shapes and bytes. */
static void assert_same_tensors(const char *a, const char *b)
{
    cal_gguf_model ma, mb;
    char why[256];
    if (cal_gguf_read_model_file(a, &ma, why, sizeof why) != CAL_OK ||
        cal_gguf_read_model_file(b, &mb, why, sizeof why) != CAL_OK)
        fail_msg("read: %s", why);
    size_t na, nb;
    uint8_t *fa = slurp(a, &na), *fb = slurp(b, &nb);
    assert_int_equal(ma.n_tensors, mb.n_tensors);
    for (uint64_t i = 0; i < ma.n_tensors; i++) {
        const cal_gguf_tensor *t = &ma.tensors[i];
        uint32_t ty;
        uint64_t by;
        const uint8_t *p = file_tensor(fb, &mb, t->name, &ty, &by);
        if (ty != t->type || by != t->bytes || memcmp(fa + t->offset, p, by) != 0)
            fail_msg("%s: type %u, %llu bytes in %s; type %u, %llu bytes in %s%s", t->name,
                     t->type, (unsigned long long)t->bytes, a, ty, (unsigned long long)by, b,
                     ty == t->type && by == t->bytes ? ", the bytes differ" : "");
    }
    free(fa);
    free(fb);
    cal_gguf_model_free(&ma);
    cal_gguf_model_free(&mb);
}

/* A file whose matrices are in seven formats, mixed as the plan says, is
 * held as stored: each tensor in the file's format, its rows the file's
 * bytes (read through the engine, unpacked where it interleaves them), the
 * fused Q/K/V and gate/up split where their formats differ, the bytes
 * held within the file's tensor bytes plus 64 a tensor, and an export of
 * what it holds gives every tensor back bit for bit. --dtype's conversion
 * (as_stored 0) widens them all to F32 exactly. */
static void mixed(int experts)
{
    cal_model_config c = kq_cfg(CAL_DTYPE_F32), g;
    if (experts)
        c.n_experts = 4, c.top_k = 2;
    char path[128], back[128], why[256];
    snprintf(path, sizeof path, "%s/mixed%d.gguf", dir, experts);
    snprintf(back, sizeof back, "%s/mixed%d-back.gguf", dir, experts);
    int plan[CAL_T_COUNT(2)];
    mixed_plan(&c, plan);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 16, &e), CAL_OK);
    if (cal_gguf_export_plan(e, path, plan, why, sizeof why) != CAL_OK)
        fail_msg("export: %s", why);
    cal_engine_close(&e);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    assert_int_equal(g.as_stored, 1);
    assert_int_equal(g.tied_embeddings, 0);   /* token_embd and output in two formats */
    int held[CAL_T_COUNT(2)];
    if (cal_gguf_held_dtypes(&g, held, why, sizeof why) != CAL_OK)
        fail_msg("held: %s", why);
    assert_memory_equal(held, plan, sizeof plan);
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);

    cal_gguf_model m;
    assert_int_equal(cal_gguf_read_model_file(path, &m, why, sizeof why), CAL_OK);
    size_t n;
    uint8_t *file = slurp(path, &n);
    uint64_t tensor_bytes = 0;
    for (uint64_t i = 0; i < m.n_tensors; i++)
        tensor_bytes += m.tensors[i].bytes;
    size_t wb = cal_engine_weight_bytes(e);
    print_message("mixed%d: %zu bytes held for %llu bytes of tensors\n", experts, wb,
                  (unsigned long long)tensor_bytes);
    assert_true(wb >= tensor_bytes && wb <= tensor_bytes + 64 * m.n_tensors);
    int64_t all = 0;
    for (int dt = 0; dt < CAL_DTYPE_COUNT; dt++) {
        int planned = 0;
        for (size_t i = 0; i < CAL_T_COUNT(2); i++)
            planned |= plan[i] == dt;
        /* every format of the plan is there, and no other */
        assert_int_equal(cal_engine_params_held(e, dt) > 0, planned);
        all += cal_engine_params_held(e, dt);
    }
    assert_int_equal(all, cal_model_n_params(&g) - (cal_model_n_params(&g) -
                     (int64_t)c.vocab * c.dim * 2 - (int64_t)c.n_layers *
                     ((c.dim + 2 * (c.dim / c.n_heads) * c.n_kv_heads) * c.dim + c.dim * c.dim +
                      (int64_t)(experts ? c.n_experts : 1) * 3 * c.dim * c.ffn_dim +
                      (experts ? c.n_experts * c.dim : 0))));
    /* each tensor: the file's format and the file's bytes */
    cal_model_weights mw;
    cal_engine_weights(e, &mw);
    const cal_tensor_view *tv[2 + 2 * CAL_T_KINDS];
    const char *names[2 + 2 * CAL_T_KINDS];
    int nv = 0;
    tv[nv] = &mw.embedding; names[nv++] = "token_embd.weight";
    tv[nv] = &mw.output; names[nv++] = "output.weight";
    cal_layer_weights lw[2];
    char nm[2][CAL_T_KINDS][48];
    static const char *const dense[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                        "ffn_up", "ffn_down", NULL};
    static const char *const moe[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                      "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
                                      "ffn_gate_inp"};
    for (int l = 0; l < 2; l++) {
        cal_engine_layer_weights(e, l, &lw[l]);
        const cal_tensor_view *v[] = {&lw[l].q, &lw[l].k, &lw[l].v, &lw[l].o, &lw[l].gate,
                                      &lw[l].up, &lw[l].down, &lw[l].router};
        for (int k = 0; k < CAL_T_KINDS; k++) {
            if (!(experts ? moe : dense)[k])
                continue;
            snprintf(nm[l][k], sizeof nm[l][k], "blk.%d.%s.weight", l, (experts ? moe : dense)[k]);
            tv[nv] = v[k];
            names[nv++] = nm[l][k];
        }
    }
    for (int i = 0; i < nv; i++) {
        uint32_t ty;
        uint64_t by;
        const uint8_t *want = file_tensor(file, &m, names[i], &ty, &by);
        assert_int_equal(cal_gguf_dtype_of(ty), tv[i]->dtype);
        size_t per = cal_k_row_bytes(tv[i]->dtype, tv[i]->n_in) * (size_t)tv[i]->rows;
        assert_int_equal(per * (size_t)tv[i]->n_mats, by);
        char *buf = malloc(per);
        assert_non_null(buf);
        for (int x = 0; x < tv[i]->n_mats; x++)
            if (memcmp(cal_engine_rows(e, tv[i], x, 0, tv[i]->rows, buf), want + (size_t)x * per,
                       per) != 0)
                fail_msg("%s (expert %d): the engine's rows are not the file's", names[i], x);
        free(buf);
    }
    /* layer 0's Q, K and V are three matrices, layer 1's Q and K one */
    assert_true(lw[0].q.m != lw[0].k.m && lw[0].k.m != lw[0].v.m);
    assert_true(lw[1].q.m == lw[1].k.m && lw[1].k.r0 == lw[1].q.rows && lw[1].v.m != lw[1].q.m);
    assert_true(lw[0].gate.m != lw[0].up.m && lw[1].gate.m == lw[1].up.m);
    /* what it holds, written back: the very file's tensors */
    assert_int_equal(cal_gguf_export(e, back, CAL_GGUF_AS_HELD, why, sizeof why), CAL_OK);
    cal_engine_close(&e);
    assert_same_tensors(path, back);

    /* the same file widened to F32: each value the format's */
    int32_t ids[9] = {72, 101, 108, 599, 7, 256, 32, 300, 1};
    float *a = malloc(sizeof(float) * (size_t)c.vocab), *b = malloc(sizeof(float) * (size_t)c.vocab);
    logits_of(&g, ids, 9, a);
    g.as_stored = 0;
    g.dtype = CAL_DTYPE_F32;
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    cal_engine_weights(e, &mw);
    assert_int_equal(mw.output.dtype, CAL_DTYPE_F32);
    assert_int_equal(cal_engine_params_held(e, CAL_DTYPE_F32), all);
    cal_engine_close(&e);
    logits_of(&g, ids, 9, b);
    /* the F32 engine keeps X in F32 where the mixed one rounds it for its
     * Q8_0, Q4_K and Q6_K products: close, not equal */
    double d = max_rel_diff(a, b, c.vocab);
    print_message("mixed%d as stored and widened: max logit difference %.3g of the largest\n",
                  experts, d);
    assert_true(d > 0 && d < 0.1);
    free(a);
    free(b);
    free(file);
    cal_gguf_model_free(&m);
}

static void test_mixed_dense(void **state) { (void)state; mixed(0); }
static void test_mixed_moe(void **state) { (void)state; mixed(1); }

/* caliper's own Q4_K_M export held as stored: Q4_K and Q6_K, and back to
 * the same tensors bit for bit */
static void test_q4_k_m_as_stored_roundtrip(void **state)
{
    (void)state;
    cal_model_config c = kq_cfg(CAL_DTYPE_F32), g;
    char path[128], back[128], why[256];
    snprintf(path, sizeof path, "%s/kqm.gguf", dir);
    snprintf(back, sizeof back, "%s/kqm-back.gguf", dir);
    export_to(&c, path, CAL_GGUF_MIX_Q4_K_M);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    assert_true(cal_engine_params_held(e, CAL_DTYPE_Q4_K) > 0);
    assert_true(cal_engine_params_held(e, CAL_DTYPE_Q6_K) > 0);
    assert_int_equal(cal_engine_params_held(e, CAL_DTYPE_Q4_K) +
                     cal_engine_params_held(e, CAL_DTYPE_Q6_K),
                     cal_model_n_params(&g) - (int64_t)g.n_layers * 2 * g.dim - g.dim);
    assert_int_equal(cal_gguf_export(e, back, CAL_GGUF_AS_HELD, why, sizeof why), CAL_OK);
    cal_engine_close(&e);
    assert_same_tensors(path, back);
}

/* A file that changes between the header's check and the load, as a
 * hostile or careless writer may do: a held-as-stored tensor retyped to
 * one the engine cannot read, or to another the engine holds (its rows
 * are then read through F32 into the format planned, never past the row),
 * or the file cut short. Each is refused or read without a byte out of
 * place (ASan), never a crash. */
static void test_file_changed_before_load(void **state)
{
    (void)state;
    cal_model_config c = kq_cfg(CAL_DTYPE_F32), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/changing.gguf", dir);
    int plan[CAL_T_COUNT(2)];
    mixed_plan(&c, plan);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&c, 1, 16, &e), CAL_OK);
    assert_int_equal(cal_gguf_export_plan(e, path, plan, why, sizeof why), CAL_OK);
    cal_engine_close(&e);
    size_t n;
    uint8_t *orig = slurp(path, &n);
    if (cal_gguf_model_config(path, &g, why, sizeof why) != CAL_OK)
        fail_msg("config: %s", why);
    /* blk.0.attn_v is Q6_K (210 bytes a 256); IQ4_NL is not read */
    uint8_t *b = malloc(n);
    assert_non_null(b);
    memcpy(b, orig, n);
    after(b, n, "blk.0.attn_v.weight")[4 + 16] = 20;
    spit(path, b, n);
    assert_int_not_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    assert_null(e);
    /* Q6_K to Q4_K (144 bytes a 256): the file still holds the bytes, and
     * the engine, which plans its formats as it opens, holds it as Q4_K */
    memcpy(b, orig, n);
    after(b, n, "blk.0.attn_v.weight")[4 + 16] = CAL_GGUF_Q4_K;
    spit(path, b, n);
    int rc = cal_engine_open(&g, 1, 16, &e);
    if (rc == CAL_OK) {
        cal_layer_weights w;
        cal_engine_layer_weights(e, 0, &w);
        assert_int_equal(w.v.dtype, CAL_DTYPE_Q4_K);
        cal_engine_close(&e);
    }
    /* cut short in the middle of the last tensor */
    spit(path, orig, n - 1000);
    assert_int_not_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    assert_null(e);
    /* and read whole again, it is served */
    spit(path, orig, n);
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    cal_engine_close(&e);
    free(b);
    free(orig);
}

static void test_read_q4_1(void **state) { read_format(CAL_GGUF_Q4_1, 32, 20); }
static void test_read_q5_0(void **state) { read_format(CAL_GGUF_Q5_0, 32, 22); }
static void test_read_q5_1(void **state) { read_format(CAL_GGUF_Q5_1, 32, 24); }
static void test_read_q5_k(void **state) { read_format(CAL_GGUF_Q5_K, 256, 176); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_dense),
        cmocka_unit_test(test_roundtrip_moe),
        cmocka_unit_test(test_roundtrip_bf16),
        cmocka_unit_test(test_roundtrip_q8_0),
        cmocka_unit_test(test_roundtrip_q4_0),
        cmocka_unit_test(test_roundtrip_q4_k),
        cmocka_unit_test(test_roundtrip_q6_k),
        cmocka_unit_test(test_roundtrip_q4_k_m),
        cmocka_unit_test(test_roundtrip_qwen),
        cmocka_unit_test(test_roundtrip_rope_freqs),
        cmocka_unit_test(test_half_exact),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_scaled_tie_checked),
        cmocka_unit_test(test_byte_tokenizer),
        cmocka_unit_test(test_read_q4_1),
        cmocka_unit_test(test_read_q5_0),
        cmocka_unit_test(test_read_q5_1),
        cmocka_unit_test(test_read_q5_k),
        cmocka_unit_test(test_mixed_dense),
        cmocka_unit_test(test_mixed_moe),
        cmocka_unit_test(test_q4_k_m_as_stored_roundtrip),
        cmocka_unit_test(test_file_changed_before_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
