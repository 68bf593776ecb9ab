/* Unit tests: every header value the engine takes from a GGUF file is
 * checked before it is used (lib/analysis/gguf.c for what a value can mean,
 * engine/gguf.c for what the engine runs), and the refusal names the key,
 * the value and the range. Each case is caliper's own export with one pair
 * rewritten (the file padded so its tensors stay aligned): block_count
 * 2^32+4 was served as 4 layers, head_count_kv 2^32+2 as 2, a
 * feed_forward_length of 384.5 as 384, an epsilon of 0 became 1e-5,
 * key_length × head_count overflowed, and a key or a tensor name listed
 * twice was taken; a malformed vocabulary was "not supported". */
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

enum { T_U32 = 4, T_F32 = 6, T_STR = 8, T_ARR = 9, T_U64 = 10, T_F64 = 12 };
static const unsigned SIZE[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static char dir[64], base[128];
static uint8_t *orig;
static size_t orig_n;

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/caliper-values-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    cal_model_config c;
    if (cal_model_preset("tiny", &c) != CAL_OK) return -1;
    c.dim = 64; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.ffn_dim = 96;
    c.vocab = 600; c.max_ctx = 64;
    cal_engine *e = NULL;
    char why[256];
    snprintf(base, sizeof base, "%s/base.gguf", dir);
    if (cal_engine_open(&c, 1, 16, &e) != CAL_OK ||
        cal_gguf_export(e, base, CAL_DTYPE_F32, why, sizeof why) != CAL_OK)
        return -1;
    cal_engine_close(&e);
    FILE *f = fopen(base, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    orig_n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    orig = malloc(orig_n);
    if (fread(orig, 1, orig_n, f) != orig_n) return -1;
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(orig);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* the end of the value of type t at b + p */
static size_t skip_value(const uint8_t *b, size_t p, uint32_t t)
{
    if (t == T_STR) return p + 8 + rd64(b + p);
    if (t != T_ARR) return p + SIZE[t];
    uint32_t et = rd32(b + p);
    uint64_t cnt = rd64(b + p + 4);
    p += 12;
    for (uint64_t i = 0; i < cnt; i++) p = skip_value(b, p, et);
    return p;
}

typedef struct file { uint8_t *b; size_t n; } file;

static void splice(file *f, size_t at, size_t drop, const void *in, size_t n)
{
    uint8_t *q = malloc(f->n - drop + n);
    memcpy(q, f->b, at);
    memcpy(q + at, in, n);
    memcpy(q + at + n, f->b + at + drop, f->n - at - drop);
    free(f->b);
    f->b = q;
    f->n = f->n - drop + n;
}

/* key's pair in f: where its type field starts and its value ends */
static void find(const file *f, const char *key, size_t *type_at, size_t *end)
{
    uint64_t n_kv = rd64(f->b + 16);
    size_t p = 24;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t kl = rd64(f->b + p);
        int hit = kl == strlen(key) && !memcmp(f->b + p + 8, key, kl);
        p += 8 + kl;
        size_t t = p;
        p = skip_value(f->b, p + 4, rd32(f->b + p));
        if (hit) { *type_at = t; *end = p; return; }
    }
    fail_msg("%s is not in the export", key);
}

/* key's value replaced by type and v[vn] */
static void set_value(file *f, const char *key, uint32_t type, const void *v, size_t vn)
{
    size_t at = 0, end = 0;
    find(f, key, &at, &end);
    uint8_t buf[64];
    memcpy(buf, &type, 4);   /* little-endian host: x86-64, arm64 */
    memcpy(buf + 4, v, vn);
    splice(f, at, end - at, buf, 4 + vn);
}

/* a pair added first: key, type, v[vn] */
static void add_pair(file *f, const char *key, uint32_t type, const void *v, size_t vn)
{
    uint8_t buf[256];
    size_t kl = strlen(key);
    wr64(buf, kl);
    memcpy(buf + 8, key, kl);
    memcpy(buf + 8 + kl, &type, 4);
    memcpy(buf + 12 + kl, v, vn);
    splice(f, 24, 0, buf, 12 + kl + vn);
    wr64(f->b + 16, rd64(f->b + 16) + 1);
}

/* written as name.gguf, padded with a string pair so the header grew by a
 * multiple of the 32-byte alignment and the tensors' data still lines up */
static const char *save(file *f, const char *name)
{
    size_t grew = (f->n - orig_n) % 32;
    char pad[64];
    size_t len = (size_t)(64 - grew - 28) % 32;   /* the pair is 28 + len bytes */
    memset(pad + 8, 'x', len);
    wr64((uint8_t *)pad, len);
    add_pair(f, "test.pad", T_STR, pad, 8 + len);
    static char path[160];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    FILE *o = fopen(path, "wb");
    assert_non_null(o);
    assert_int_equal(fwrite(f->b, 1, f->n, o), f->n);
    fclose(o);
    free(f->b);
    f->b = NULL;
    return path;
}

static file copy(void)
{
    file f = {malloc(orig_n), orig_n};
    memcpy(f.b, orig, orig_n);
    return f;
}

static void refused(const char *path, const char *want)
{
    cal_model_config g;
    char why[512] = "";
    int rc = cal_gguf_model_config(path, &g, why, sizeof why);
    if (rc != CAL_EINVAL || !strstr(why, want))
        fail_msg("%s: rc %d, \"%s\" lacks \"%s\"", path, rc, why, want);
}

/* the padding itself changes nothing */
static void test_padded_export_serves(void **state)
{
    (void)state;
    file f = copy();
    uint32_t v = 2;
    set_value(&f, "llama.block_count", T_U32, &v, 4);
    const char *p = save(&f, "same");
    cal_model_config g;
    char why[512] = "";
    if (cal_gguf_model_config(p, &g, why, sizeof why) != CAL_OK)
        fail_msg("%s", why);
    assert_int_equal(g.n_layers, 2);
    cal_engine *e = NULL;
    assert_int_equal(cal_engine_open(&g, 1, 16, &e), CAL_OK);
    cal_engine_close(&e);
}

static void test_integers_not_narrowed(void **state)
{
    (void)state;
    file f = copy();
    uint64_t v = (1ull << 32) + 4;
    set_value(&f, "llama.block_count", T_U64, &v, 8);
    refused(save(&f, "blocks"), "llama.block_count is 4294967300, outside 1..1024");
    f = copy();
    v = (1ull << 32) + 2;
    set_value(&f, "llama.attention.head_count_kv", T_U64, &v, 8);
    refused(save(&f, "kvheads"), "llama.attention.head_count_kv is 4294967298, outside 1..4");
    f = copy();
    v = 2000;
    set_value(&f, "llama.block_count", T_U64, &v, 8);
    refused(save(&f, "blocks2000"), "llama.block_count is 2000, outside 1..1024");
    /* both at the library's bound: their product overflowed a long */
    f = copy();
    v = 1ull << 40;
    set_value(&f, "llama.attention.head_count", T_U64, &v, 8);
    add_pair(&f, "llama.attention.key_length", T_U64, &v, 8);
    refused(save(&f, "product"), "llama.attention.head_count is 1099511627776, outside 1..64");
    f = copy();
    v = (1ull << 40) + 1;
    set_value(&f, "llama.block_count", T_U64, &v, 8);
    refused(save(&f, "blocks2p40"), "llama.block_count is 1099511627777, outside 1..2^40");
}

static void test_floats_checked(void **state)
{
    (void)state;
    file f = copy();
    double d = 384.5;
    set_value(&f, "llama.feed_forward_length", T_F64, &d, 8);
    refused(save(&f, "ffn"), "llama.feed_forward_length is 384.5, not an integer in 0..2^40");
    /* a count written as a whole float is the count */
    f = copy();
    d = 96.0;
    set_value(&f, "llama.feed_forward_length", T_F64, &d, 8);
    const char *p = save(&f, "ffn96");
    cal_model_config g;
    char why[512] = "";
    if (cal_gguf_model_config(p, &g, why, sizeof why) != CAL_OK)
        fail_msg("%s", why);
    assert_int_equal(g.ffn_dim, 96);
    f = copy();
    float z = 0;
    set_value(&f, "llama.attention.layer_norm_rms_epsilon", T_F32, &z, 4);
    refused(save(&f, "eps0"), "llama.attention.layer_norm_rms_epsilon is 0, outside (0, 1)");
    f = copy();
    d = 1e30;
    set_value(&f, "llama.rope.freq_base", T_F64, &d, 8);
    refused(save(&f, "theta"), "llama.rope.freq_base is 1e+30, outside (0, 1e12]");
    f = copy();
    d = 0.5;
    set_value(&f, "llama.rope.freq_base", T_F64, &d, 8);
    refused(save(&f, "theta_half"), "llama.rope.freq_base is 0.5, outside (1, 1e12]");
    f = copy();
    uint64_t big = 1ull << 63;
    set_value(&f, "llama.context_length", T_U64, &big, 8);
    refused(save(&f, "ctx"), "llama.context_length is 9223372036854775808, outside 0..2^40");
    f = copy();
    d = 32.0;
    set_value(&f, "general.alignment", T_F64, &d, 8);
    refused(save(&f, "align"), "general.alignment has type float64, expected an integer");
    f = copy();
    double nan = NAN;
    set_value(&f, "llama.attention.layer_norm_rms_epsilon", T_F64, &nan, 8);
    refused(save(&f, "epsnan"), "llama.attention.layer_norm_rms_epsilon is nan, outside (0, 1)");
}

static void test_listed_twice(void **state)
{
    (void)state;
    file f = copy();
    /* two keys of one length: the second becomes the first */
    uint8_t *k = memmem(f.b, f.n, "llama.rope.dimension_count", 26);
    assert_non_null(k);
    memcpy(k, "llama.attention.head_count", 26);
    refused(save(&f, "dupkey"), "llama.attention.head_count appears a second time");
    f = copy();
    k = memmem(f.b, f.n, "blk.1.ffn_up.weight", 19);
    assert_non_null(k);
    k[4] = '0';
    refused(save(&f, "duptensor"), "(\"blk.0.ffn_up.weight\") has the name of tensor");
}

/* A vocabulary the engine reads itself (not the byte vocabulary: one byte
 * token renamed) whose scores array is short: malformed, not "not
 * supported". */
static void test_malformed_vocabulary(void **state)
{
    (void)state;
    file f = copy();
    uint8_t *k = memmem(f.b, f.n, "<0x41>", 6);
    assert_non_null(k);
    k[4] = 'X';
    uint8_t arr[12 + 8] = {T_F32};   /* element type, count 2, two zeros */
    wr64(arr + 4, 2);
    set_value(&f, "tokenizer.ggml.scores", T_ARR, arr, sizeof arr);
    refused(save(&f, "scores"), "the vocabulary (\"llama\") is malformed: tokenizer.ggml."
                                "scores is an array of 2 float32: each of the 600 tokens needs "
                                "a float32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padded_export_serves),
        cmocka_unit_test(test_integers_not_narrowed),
        cmocka_unit_test(test_floats_checked),
        cmocka_unit_test(test_listed_twice),
        cmocka_unit_test(test_malformed_vocabulary),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
