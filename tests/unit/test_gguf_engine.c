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

static void export_to(const cal_model_config *c, const char *path, int f16)
{
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(c, 1, 16, &e), CAL_OK);
    char why[256];
    int rc = cal_gguf_export(e, path, f16, why, sizeof why);
    if (rc) fail_msg("export: %s", why);
    cal_engine_close(&e);
}

static void logits_of(const cal_model_config *c, const int32_t *ids, int n, float *out)
{
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(c, 1, 16, &e), CAL_OK);
    cal_step_entry en = {0, 0, n, ids, out};
    assert_int_equal(cal_engine_step(e, &en, 1), CAL_OK);
    cal_engine_close(&e);
}

static void roundtrip(int experts)
{
    cal_model_config c = small_cfg(experts), g;
    char path[128], why[256];
    snprintf(path, sizeof path, "%s/m%d.gguf", dir, experts);
    export_to(&c, path, 0);
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
    assert_int_equal(g.tied_embeddings, 0);
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
    export_to(&c, path, 1);
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
static void test_roundtrip_moe(void **state) { roundtrip(1); }

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
    export_to(&c, src, 0);
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
    memcpy(after(b, n, "general.architecture") + 12, "qwen2", 5);
    for (uint8_t *p = b; (p = memmem(p, n - (size_t)(p - b), "llama.", 6)); p += 6)
        memcpy(p, "qwen2.", 6);   /* a qwen2 file has its own keys */
}
static void p_vocab(uint8_t *b, size_t n) { memcpy(after(b, n, "tokenizer.ggml.model") + 12, "gpt2x", 5); }
static void p_bytes(uint8_t *b, size_t n) { memcpy(after(b, n, "<0x41>") - 6, "<0x4X>", 6); }
/* tensor info: name, n_dims u32, 2 × ne u64, type u32 */
static void p_type(uint8_t *b, size_t n)
{
    uint8_t *t = after(b, n, "blk.1.ffn_up.weight") + 4 + 16;
    t[0] = 8;   /* Q8_0: fewer bytes than F32, so the file still holds them */
}
static void p_missing(uint8_t *b, size_t n) { memcpy(after(b, n, "blk.1.ffn_up") - 2, "xx", 2); }

static void test_refusals(void **state)
{
    expect_refusal("arch", p_arch, "architecture \"qwen2\" is not supported");
    expect_refusal("vocab", p_vocab, "vocabulary \"gpt2x\" is not supported");
    expect_refusal("bytes", p_bytes, "without byte tokens at ids 0..255");
    expect_refusal("type", p_type, "tensor blk.1.ffn_up.weight: type Q8_0 is not supported");
    expect_refusal("missing", p_missing, "tensor blk.1.ffn_up.weight is missing");
    char why[256];
    cal_model_config g;
    assert_int_equal(cal_gguf_model_config("/nonexistent/x.gguf", &g, why, sizeof why),
                     CAL_ENOTFOUND);
    assert_non_null(strstr(why, "/nonexistent/x.gguf"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_dense),
        cmocka_unit_test(test_roundtrip_moe),
        cmocka_unit_test(test_half_exact),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_byte_tokenizer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
