/* Unit tests: the GGUF header and config.json readers, on files the test
 * writes itself — valid headers with every value type, then every
 * truncation and a set of corruptions, each of which must fail cleanly. */
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

/* ---- a GGUF writer for the tests ---------------------------------------- */

typedef struct gb { uint8_t d[65536]; size_t n; } gb;

static void put(gb *g, const void *p, size_t n) { assert_true(g->n + n <= sizeof g->d);
                                                  memcpy(g->d + g->n, p, n); g->n += n; }
static void u8(gb *g, uint8_t v) { put(g, &v, 1); }
static void u32(gb *g, uint32_t v) { for (int i = 0; i < 4; i++) u8(g, (uint8_t)(v >> (8 * i))); }
static void u64(gb *g, uint64_t v) { for (int i = 0; i < 8; i++) u8(g, (uint8_t)(v >> (8 * i))); }
static void str(gb *g, const char *s) { u64(g, strlen(s)); put(g, s, strlen(s)); }
static void kv_u32(gb *g, const char *k, uint32_t v) { str(g, k); u32(g, 4); u32(g, v); }
static void kv_u64(gb *g, const char *k, uint64_t v) { str(g, k); u32(g, 10); u64(g, v); }
static void kv_str(gb *g, const char *k, const char *v) { str(g, k); u32(g, 8); str(g, v); }
static void kv_f32(gb *g, const char *k, float f) { uint32_t v; memcpy(&v, &f, 4);
                                                    str(g, k); u32(g, 6); u32(g, v); }
static void kv_bool(gb *g, const char *k, int b) { str(g, k); u32(g, 7); u8(g, (uint8_t)b); }

static void header(gb *g, uint32_t version, uint64_t n_kv)
{
    g->n = 0;
    put(g, "GGUF", 4);
    u32(g, version);
    u64(g, 291);          /* tensor count: never read past the header */
    u64(g, n_kv);
}

/* A llama-like header: the architecture comes last on purpose. */
static void llama(gb *g)
{
    header(g, 3, 10);
    kv_str(g, "general.name", "tiny test llama");
    kv_u32(g, "llama.block_count", 32);
    kv_u32(g, "llama.attention.head_count", 32);
    kv_u32(g, "llama.attention.head_count_kv", 8);
    kv_u64(g, "llama.embedding_length", 4096);
    kv_f32(g, "llama.rope.freq_base", 500000.0f);
    kv_bool(g, "tokenizer.ggml.add_bos_token", 1);
    str(g, "tokenizer.ggml.tokens"); u32(g, 9); u32(g, 8); u64(g, 3);   /* array of strings */
    str(g, "<s>"); str(g, "hello"); str(g, "</s>");
    str(g, "test.nested"); u32(g, 9); u32(g, 9); u64(g, 2);             /* array of arrays */
    u32(g, 5); u64(g, 2); u32(g, 1); u32(g, 2);
    u32(g, 12); u64(g, 1); u64(g, 0);
    kv_str(g, "general.architecture", "llama");
}

static void test_gguf_valid(void **state)
{
    (void)state;
    static gb g;
    llama(&g);
    cal_model_shape s;
    char why[256];
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_OK);
    assert_string_equal(s.source, "gguf");
    assert_string_equal(s.arch, "llama");
    assert_string_equal(s.name, "tiny test llama");
    assert_int_equal(s.layers, 32);
    assert_int_equal(s.heads, 32);
    assert_int_equal(s.kv_heads, 8);
    assert_int_equal(s.k_dim, 128);            /* 4096 ÷ 32, derived */
    assert_int_equal(s.v_dim, 128);
    assert_int_equal(s.n_tensors, 291);
    assert_int_equal(s.kv_heads_varies, 0);

    /* explicit key/value lengths; per-layer KV heads as an int32 array;
     * version 2; another architecture's keys must be ignored */
    header(&g, 2, 7);
    kv_str(&g, "general.architecture", "deepthing");
    kv_u32(&g, "other.block_count", 99);
    kv_u32(&g, "deepthing.block_count", 5);
    kv_u32(&g, "deepthing.attention.key_length", 192);
    kv_u32(&g, "deepthing.attention.value_length", 128);
    str(&g, "deepthing.attention.head_count_kv"); u32(&g, 9); u32(&g, 5); u64(&g, 5);
    u32(&g, 4); u32(&g, 4); u32(&g, 8); u32(&g, 4); u32(&g, 2);
    kv_u32(&g, "deepthing.attention.head_count", 16);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_OK);
    assert_int_equal(s.layers, 5);
    assert_int_equal(s.kv_heads, 8);
    assert_int_equal(s.kv_heads_varies, 1);
    assert_int_equal(s.k_dim, 192);
    assert_int_equal(s.v_dim, 128);
}

static void test_gguf_truncated(void **state)
{
    (void)state;
    static gb g;
    llama(&g);
    cal_model_shape s;
    memset(&s, 0x5a, sizeof s);
    char why[256];
    for (size_t n = 0; n < g.n; n++) {
        int rc = cal_gguf_read_mem(g.d, n, &s, why, sizeof why);
        assert_int_not_equal(rc, CAL_OK);
        assert_true(why[0] != '\0');           /* it says why */
    }
    assert_int_equal(((unsigned char *)&s)[0], 0x5a);   /* untouched on failure */
    assert_int_equal(cal_gguf_read_mem(NULL, 0, &s, why, sizeof why), CAL_EPROTO);
}

static void test_gguf_corrupt(void **state)
{
    (void)state;
    static gb g;
    cal_model_shape s;
    char why[256];

    llama(&g); g.d[0] = 'X';
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "magic"));

    llama(&g); g.d[4] = 1;                                      /* version 1 */
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    llama(&g); g.d[4] = 0; g.d[7] = 3;                          /* big-endian 3 */
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "big-endian"));

    llama(&g); memset(g.d + 16, 0xff, 8);                       /* absurd KV count */
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);

    llama(&g); memset(g.d + 24, 0xff, 8);                       /* absurd key length */
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "length"));

    header(&g, 3, 1);                                           /* unknown value type */
    str(&g, "llama.block_count"); u32(&g, 13); u32(&g, 1);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "type"));

    header(&g, 3, 1);                                           /* array count too big */
    str(&g, "x.y"); u32(&g, 9); u32(&g, 12); u64(&g, UINT64_MAX / 4);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);

    header(&g, 3, 1);                                           /* string array too big */
    str(&g, "x.y"); u32(&g, 9); u32(&g, 8); u64(&g, 1000);
    str(&g, "a");
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);

    header(&g, 3, 1);                                           /* nested six deep */
    str(&g, "x.y");
    u32(&g, 9);
    for (int i = 0; i < 6; i++) { u32(&g, 9); u64(&g, 1); }
    u32(&g, 4); u64(&g, 1); u32(&g, 7);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "nested"));

    header(&g, 3, 1);                                           /* no architecture */
    kv_u32(&g, "llama.block_count", 32);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_ENOTFOUND);
    assert_non_null(strstr(why, "general.architecture"));

    header(&g, 3, 2);                                           /* no block count */
    kv_str(&g, "general.architecture", "llama");
    kv_u32(&g, "llama.attention.head_count", 32);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_ENOTFOUND);
    assert_non_null(strstr(why, "llama.block_count"));

    header(&g, 3, 2);                                           /* a float block count */
    kv_str(&g, "general.architecture", "llama");
    kv_f32(&g, "llama.block_count", 32.0f);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);

    header(&g, 3, 4);                                           /* zero heads */
    kv_str(&g, "general.architecture", "llama");
    kv_u32(&g, "llama.block_count", 32);
    kv_u32(&g, "llama.attention.head_count", 0);
    kv_u32(&g, "llama.embedding_length", 4096);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);

    header(&g, 3, 4);                                           /* embedding ∤ heads */
    kv_str(&g, "general.architecture", "llama");
    kv_u32(&g, "llama.block_count", 32);
    kv_u32(&g, "llama.attention.head_count", 3);
    kv_u32(&g, "llama.embedding_length", 4096);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
}

/* A key of the wrong type is named with its type, not called missing or
 * read as 0; a tensor entry is named by its place and its name, quoted, so
 * that an empty one (a tensor count past the directory) still shows. */
static void test_gguf_type_messages(void **state)
{
    (void)state;
    static gb g;
    cal_model_shape s;
    cal_gguf_model m;
    char why[256];

    header(&g, 3, 2);
    kv_u32(&g, "general.architecture", 7);                      /* at offset 24 */
    kv_u32(&g, "llama.block_count", 2);
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_string_equal(why, "offset 24: general.architecture has type uint32, expected string");

    header(&g, 3, 2);
    kv_str(&g, "general.architecture", "llama");                /* 24 + 8+20 + 4 + 8+5 */
    kv_str(&g, "llama.embedding_length", "4096");
    assert_int_equal(cal_gguf_read_mem(g.d, g.n, &s, why, sizeof why), CAL_EPROTO);
    assert_string_equal(why, "offset 69: llama.embedding_length has type string, "
                        "expected an integer");

    /* a loader key: an error for the model's architecture, not another's */
    header(&g, 3, 6);
    kv_str(&g, "general.architecture", "llama");
    kv_u32(&g, "llama.block_count", 1);
    kv_u32(&g, "llama.attention.head_count", 1);
    kv_u32(&g, "llama.embedding_length", 32);
    kv_str(&g, "other.context_length", "long");
    kv_str(&g, "llama.context_length", "long");
    size_t at = g.n - (8 + strlen("llama.context_length") + 4 + 8 + 4);
    memset(g.d + 8, 0, 8);                                      /* no tensors */
    assert_int_equal(cal_gguf_read_model_mem(g.d, g.n, &m, why, sizeof why), CAL_EPROTO);
    char want[128];
    snprintf(want, sizeof want, "offset %zu: llama.context_length has type string, "
             "expected a number", at);
    assert_string_equal(why, want);
    g.d[at + 8 + 2] = 'X';                                      /* "llXma.context_length" */
    assert_int_equal(cal_gguf_read_model_mem(g.d, g.n, &m, why, sizeof why), CAL_OK);
    cal_gguf_model_free(&m);

    /* two tensors counted, one written: the second reads zeros */
    header(&g, 3, 4);
    kv_str(&g, "general.architecture", "llama");
    kv_u32(&g, "llama.block_count", 1);
    kv_u32(&g, "llama.attention.head_count", 1);
    kv_u32(&g, "llama.embedding_length", 32);
    memset(g.d + 8, 0, 8);
    g.d[8] = 2;
    str(&g, "output_norm.weight"); u32(&g, 1); u64(&g, 32); u32(&g, 0); u64(&g, 0);
    at = g.n;
    for (int i = 0; i < 64; i++) u8(&g, 0);
    assert_int_equal(cal_gguf_read_model_mem(g.d, g.n, &m, why, sizeof why), CAL_EPROTO);
    snprintf(want, sizeof want, "offset %zu: tensor 2 of 2 (\"\") has 0 dims (1..4 allowed)", at);
    assert_string_equal(why, want);
    g.n = at;                                                   /* a named one of 5 dims */
    str(&g, "blk.0.extra"); u32(&g, 5);
    for (int i = 0; i < 64; i++) u8(&g, 0);
    assert_int_equal(cal_gguf_read_model_mem(g.d, g.n, &m, why, sizeof why), CAL_EPROTO);
    snprintf(want, sizeof want, "offset %zu: tensor 2 of 2 (\"blk.0.extra\") has 5 dims "
             "(1..4 allowed)", at);
    assert_string_equal(why, want);
}

static void test_gguf_file(void **state)
{
    (void)state;
    static gb g;
    llama(&g);
    char path[] = "/tmp/caliper-test-gguf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, g.d, g.n), (ssize_t)g.n);
    /* tensor data after the header is never read */
    static const uint8_t junk[4096];
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    cal_model_shape s;
    char why[256];
    assert_int_equal(cal_gguf_read_file(path, &s, why, sizeof why), CAL_OK);
    assert_int_equal(s.kv_heads, 8);
    assert_int_equal(truncate(path, (off_t)g.n - 3), 0);
    assert_int_equal(cal_gguf_read_file(path, &s, why, sizeof why), CAL_EPROTO);
    unlink(path);
    assert_int_equal(cal_gguf_read_file(path, &s, why, sizeof why), CAL_ENOTFOUND);
    assert_int_equal(cal_gguf_read_file("/tmp", &s, why, sizeof why), CAL_EIO);
}

/* ---- config.json --------------------------------------------------------- */

static int cfg(const char *json, cal_model_shape *s, char *why)
{
    return cal_hfconfig_read_mem(json, strlen(json), s, why, 256);
}

static void test_hfconfig(void **state)
{
    (void)state;
    cal_model_shape s;
    char why[256];
    assert_int_equal(cfg("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":4096,"
                         "\"num_attention_heads\":32,\"num_hidden_layers\":32,"
                         "\"num_key_value_heads\":8,\"torch_dtype\":\"bfloat16\"}", &s, why),
                     CAL_OK);
    assert_string_equal(s.arch, "LlamaForCausalLM");
    assert_int_equal(s.layers, 32);
    assert_int_equal(s.kv_heads, 8);
    assert_int_equal(s.k_dim, 128);
    assert_true(s.dtype_bits == 16);
    /* explicit head_dim wins over hidden ÷ heads (Gemma-style) */
    assert_int_equal(cfg("{\"hidden_size\":3072,\"num_attention_heads\":16,\"head_dim\":256,"
                         "\"num_hidden_layers\":28,\"num_key_value_heads\":16,"
                         "\"torch_dtype\":\"float32\"}", &s, why), CAL_OK);
    assert_int_equal(s.k_dim, 256);
    assert_true(s.dtype_bits == 32);
    /* no num_key_value_heads: multi-head attention, kv = heads; null head_dim */
    assert_int_equal(cfg("{\"hidden_size\":768,\"num_attention_heads\":12,\"head_dim\":null,"
                         "\"num_hidden_layers\":12}", &s, why), CAL_OK);
    assert_int_equal(s.kv_heads, 12);
    assert_int_equal(s.k_dim, 64);
    assert_true(s.dtype_bits == 0);
    /* multimodal: the language model under text_config */
    assert_int_equal(cfg("{\"model_type\":\"mm\",\"torch_dtype\":\"float16\",\"text_config\":{"
                         "\"hidden_size\":2048,\"num_attention_heads\":16,"
                         "\"num_hidden_layers\":24,\"num_key_value_heads\":4}}", &s, why), CAL_OK);
    assert_int_equal(s.layers, 24);
    assert_int_equal(s.kv_heads, 4);
    assert_int_equal(s.k_dim, 128);
    assert_true(s.dtype_bits == 16);

    assert_int_equal(cfg("{\"hidden_size\":4096,\"num_attention_heads\":32}", &s, why),
                     CAL_ENOTFOUND);
    assert_non_null(strstr(why, "num_hidden_layers"));
    assert_int_equal(cfg("{\"num_hidden_layers\":-2,\"num_attention_heads\":32}", &s, why),
                     CAL_ERANGE);
    assert_non_null(strstr(why, "num_hidden_layers"));
    assert_int_equal(cfg("{\"num_hidden_layers\":\"32\",\"num_attention_heads\":32}", &s, why),
                     CAL_ERANGE);
    assert_int_equal(cfg("{\"num_hidden_layers\":32,\"num_attention_heads\":32}", &s, why),
                     CAL_ENOTFOUND);                           /* no head_dim, no hidden */
    assert_non_null(strstr(why, "head_dim"));
    assert_int_equal(cfg("{\"num_hidden_layers\":2,\"num_attention_heads\":3,"
                         "\"hidden_size\":100}", &s, why), CAL_ERANGE);
    assert_int_equal(cfg("{\"num_hidden_layers\":2,", &s, why), CAL_EPROTO);
    assert_non_null(strstr(why, "line"));
    assert_int_equal(cfg("[1,2]", &s, why), CAL_EPROTO);
    assert_int_equal(cfg("", &s, why), CAL_EPROTO);
    assert_int_equal(cfg("{\"a\":1,\"a\":2}", &s, why), CAL_EPROTO);   /* duplicate key */
}

static void test_hfconfig_file(void **state)
{
    (void)state;
    char path[] = "/tmp/caliper-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *j = "{\"num_hidden_layers\":4,\"num_attention_heads\":4,\"hidden_size\":256}";
    assert_int_equal(write(fd, j, strlen(j)), (ssize_t)strlen(j));
    close(fd);
    cal_model_shape s;
    char why[256];
    assert_int_equal(cal_hfconfig_read_file(path, &s, why, sizeof why), CAL_OK);
    assert_int_equal(s.k_dim, 64);
    unlink(path);
    assert_int_equal(cal_hfconfig_read_file(path, &s, why, sizeof why), CAL_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_valid),   cmocka_unit_test(test_gguf_truncated),
        cmocka_unit_test(test_gguf_corrupt), cmocka_unit_test(test_gguf_file),
        cmocka_unit_test(test_hfconfig),     cmocka_unit_test(test_hfconfig_file),
        cmocka_unit_test(test_gguf_type_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
