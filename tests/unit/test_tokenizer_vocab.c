/* Tokenizers from GGUF vocabularies (engine/vocab.c, tok_spm.c, tok_bpe.c):
 * small vocabularies cut out of llama.cpp's ggml-vocab files
 * (tests/data/vocab/README) must give llama.cpp's own ids for its test
 * cases and decode back to the text; special tokens, BOS, byte fallback,
 * invalid UTF-8 and broken files behave as llama.cpp's loader does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include "caliper/error.h"
#include "engine/engine.h"
#include "engine/vocab.h"
#include "tests/unit/vocab_gguf.h"
#include "tests/helpers/special_split_ref.h"

#define DATA_DIR "tests/data/vocab"

static cal_tokenizer *open_vocab(const char *name)
{
    char path[256], why[256] = "";
    snprintf(path, sizeof path, DATA_DIR "/%s.gguf", name);
    cal_tokenizer *t = NULL;
    int rc = cal_tok_open_gguf(path, &t, why, sizeof why);
    if (rc != CAL_OK)
        fail_msg("%s: %s", path, why);
    return t;
}

/* The id whose decoded piece is exactly s (the first one), or -1. */
static int32_t id_of(const cal_tokenizer *t, const char *s)
{
    size_t n = strlen(s);
    for (int32_t i = 0; i < cal_tok_vocab(t); i++) {
        int l;
        const char *p = cal_tok_piece(t, i, &l);
        if ((size_t)l == n && !memcmp(p, s, n))
            return i;
    }
    return -1;
}

static void run_cases(const char *name)
{
    cal_tokenizer *t = open_vocab(name);
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "/%s.cases", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[8192];
    int cases = 0, spm = !strcmp(cal_tok_kind(t), "llama");
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = 0;
        json_error_t je;
        json_t *js = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        assert_non_null(js);
        const char *text = json_string_value(js);
        size_t n = json_string_length(js);
        int32_t want[1024], got[1024];
        int nw = 0;
        for (char *p = tab + 1; *p && *p != '\n';) {
            while (*p == ' ') p++;
            if (!*p || *p == '\n') break;
            want[nw++] = (int32_t)strtol(p, &p, 10);
        }
        int ng = cal_tok_encode_ex(t, text, n, 0, got, 1024);
        if (ng != nw || memcmp(got, want, (size_t)nw * sizeof *got))
            fail_msg("%s case %d (\"%s\"): %d ids, want %d", name, cases + 1, text, ng, nw);
        /* decode gives the text back (SentencePiece: after its prefix space) */
        char back[8192];
        size_t bl = 0;
        for (int i = 0; i < ng; i++) {
            int l;
            const char *p = cal_tok_piece(t, got[i], &l);
            memcpy(back + bl, p, (size_t)l);
            bl += (size_t)l;
        }
        size_t skip = spm && bl > 0 ? 1 : 0;
        if (spm && bl > 0)
            assert_int_equal(back[0], ' ');
        assert_int_equal(bl - skip, n);
        assert_memory_equal(back + skip, text, n);
        json_decref(js);
        cases++;
    }
    fclose(f);
    assert_true(cases >= 40);
    cal_tok_close(&t);
}

static void test_spm_cases(void **s) { (void)s; run_cases("llama-spm"); }
static void test_llama3_cases(void **s) { (void)s; run_cases("llama-bpe"); }
static void test_qwen2_cases(void **s) { (void)s; run_cases("qwen2"); }
static void test_gpt2_cases(void **s) { (void)s; run_cases("gpt-2"); }

/* SentencePiece: <s> in the text is BOS only when special tokens are
 * parsed; ADD_SPECIAL puts BOS first (add_bos defaults to on); a character
 * with no token falls back to its bytes, which the streaming decoder joins. */
static void test_spm_special_and_bytes(void **s)
{
    (void)s;
    cal_tokenizer *t = open_vocab("llama-spm");
    assert_string_equal(cal_tok_kind(t), "llama");
    int bos = cal_tok_bos(t), eos = cal_tok_eos(t);
    assert_int_equal(bos, id_of(t, "<s>"));
    assert_int_equal(eos, id_of(t, "</s>"));
    int32_t ids[64];
    int n = cal_tok_encode_ex(t, "<s>", 3, CAL_TOK_PARSE_SPECIAL, ids, 64);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], bos);
    n = cal_tok_encode_ex(t, "<s>", 3, 0, ids, 64);
    assert_true(n > 1);
    for (int i = 0; i < n; i++) assert_int_not_equal(ids[i], bos);
    n = cal_tok_encode_ex(t, "", 0, CAL_TOK_ADD_SPECIAL, ids, 64);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], bos);
    /* "\x01" has no token: prefix space "▁" then byte <0x01> */
    n = cal_tok_encode_ex(t, "\x01", 1, 0, ids, 64);
    assert_int_equal(n, 2);
    int l;
    const char *p = cal_tok_piece(t, ids[0], &l);
    assert_int_equal(l, 1);
    assert_int_equal(p[0], ' ');
    /* "▁" is a token of its own, not the byte <0x20> (id 3 + 0x20) */
    assert_int_not_equal(ids[0], 3 + 0x20);
    p = cal_tok_piece(t, ids[1], &l);
    assert_int_equal(l, 1);
    assert_int_equal(p[0], 1);
    /* the euro sign is not in the cut vocabulary: three byte tokens */
    n = cal_tok_encode_ex(t, "x\xe2\x82\xac", 4, 0, ids, 64);
    assert_true(n >= 4);
    cal_tok_state st = {{0}, 0, 0};
    char o[CAL_TOK_DECODE_MAX];
    assert_int_equal(cal_tok_decode(t, &st, ids[n - 3], o, sizeof o), 0);
    assert_int_equal(cal_tok_decode(t, &st, ids[n - 2], o, sizeof o), 0);
    assert_int_equal(cal_tok_decode(t, &st, ids[n - 1], o, sizeof o), 3);
    assert_memory_equal(o, "\xe2\x82\xac", 3);
    /* generated text shows no control token; /detokenize spells it out */
    st = (cal_tok_state){{0}, 0, 0};
    assert_int_equal(cal_tok_decode(t, &st, eos, o, sizeof o), 0);
    st.special = 1;
    assert_int_equal(cal_tok_decode(t, &st, eos, o, sizeof o), 4);
    assert_memory_equal(o, "</s>", 4);
    /* a second fragment after a special token gets its own space prefix */
    int32_t a[64], b[64];
    int na = cal_tok_encode_ex(t, "Hello", 5, 0, a, 64);
    int nb = cal_tok_encode_ex(t, "</s>Hello", 9, CAL_TOK_PARSE_SPECIAL, b, 64);
    assert_int_equal(nb, na + 1);
    assert_int_equal(b[0], eos);
    assert_memory_equal(b + 1, a, (size_t)na * sizeof *a);
    /* too small a buffer */
    assert_int_equal(cal_tok_encode_ex(t, "Hello world", 11, 0, ids, 1), CAL_ETOOBIG);
    cal_tok_close(&t);
    assert_null(t);
}

/* BPE: chat template tokens are matched whole with PARSE_SPECIAL (the
 * default of cal_tok_encode), split as text without; llama3 adds BOS. */
static void test_bpe_special(void **s)
{
    (void)s;
    cal_tokenizer *t = open_vocab("qwen2");
    assert_string_equal(cal_tok_kind(t), "gpt2");
    int32_t im = id_of(t, "<|im_start|>");
    assert_true(im >= 0);
    int32_t a[64], b[64];
    int na = cal_tok_encode_ex(t, " Hello", 6, 0, a, 64);
    assert_true(na > 0);
    int nb = cal_tok_encode(t, "<|im_start|> Hello", 18, b, 64);
    assert_int_equal(nb, na + 1);
    assert_int_equal(b[0], im);
    assert_memory_equal(b + 1, a, (size_t)na * sizeof *a);
    nb = cal_tok_encode_ex(t, "<|im_start|>", 12, 0, b, 64);
    assert_true(nb > 1);
    for (int i = 0; i < nb; i++) assert_int_not_equal(b[i], im);
    cal_tok_close(&t);

    t = open_vocab("llama-bpe");
    int bos = cal_tok_bos(t);
    assert_int_equal(bos, id_of(t, "<|begin_of_text|>"));
    na = cal_tok_encode_ex(t, "Hello", 5, 0, a, 64);
    nb = cal_tok_encode_ex(t, "Hello", 5, CAL_TOK_ADD_SPECIAL, b, 64);
    assert_int_equal(nb, na + 1);
    assert_int_equal(b[0], bos);
    cal_tok_close(&t);
}

/* llama.cpp reads a byte that starts no valid UTF-8 sequence as U+FFFD:
 * the ids are the replacement character's; above U+10FFFF it gives up. */
static void test_bpe_invalid_utf8(void **s)
{
    (void)s;
    cal_tokenizer *t = open_vocab("gpt-2");
    int32_t a[64], b[64];
    int na = cal_tok_encode_ex(t, "a\xff", 2, 0, a, 64);
    int nb = cal_tok_encode_ex(t, "a\xef\xbf\xbd", 4, 0, b, 64);
    assert_true(na > 1);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    assert_int_equal(cal_tok_encode_ex(t, "\xf7\xbf\xbf\xbf", 4, 0, a, 64), CAL_EINVAL);
    cal_tok_close(&t);
}

static void test_bad_files(void **s)
{
    (void)s;
    char why[256];
    cal_tokenizer *t = (cal_tokenizer *)&why;
    why[0] = 0;
    assert_int_equal(cal_tok_open_gguf_mem("nope", 4, &t, why, sizeof why), CAL_EPROTO);
    assert_null(t);
    assert_true(why[0]);
    /* every truncation of a real file fails cleanly, with a reason */
    FILE *f = fopen(DATA_DIR "/gpt-2.gguf", "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 1000);
    for (size_t cut = 0; cut < n; cut += 97) {
        why[0] = 0;
        int rc = cal_tok_open_gguf_mem(buf, cut, &t, why, sizeof why);
        assert_int_not_equal(rc, CAL_OK);
        assert_null(t);
        assert_true(why[0]);
    }
    assert_int_equal(cal_tok_open_gguf_mem(buf, n, &t, why, sizeof why), CAL_OK);
    cal_tok_close(&t);
    /* a model the engine cannot encode is named */
    char *m = memmem(buf, n, "gpt2", 4);
    assert_non_null(m);
    memcpy(m, "gpt3", 4);
    assert_int_equal(cal_tok_open_gguf_mem(buf, n, &t, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "gpt3"));
    assert_int_equal(cal_tok_open_gguf("/nonexistent/v.gguf", &t, why, sizeof why),
                     CAL_ENOTFOUND);
}

/* Special tokens that nest, overlap and repeat a text, control and
 * user-defined mixed: cal_special_split cuts every random text exactly as
 * llama.cpp's partition does, with and without parse_special. */
static void test_special_split_as_llama_cpp(void **s)
{
    (void)s;
    static const char *const tok[] = {"<unk>", "<s>", "</s>", "a", "ab", "ba", "aba", "s>",
                                      "bab", "abab", "ab", "x", "<", "b", "aaaa", "aa",
                                      "/s>", "b<s", "s"};
    static const int32_t type[] = {2, 3, 3, 4, 3, 4, 3, 4, 4, 3, 4, 1, 1, 1, 4, 3, 3, 4, 1};
    size_t nt = sizeof tok / sizeof tok[0];
    vg_buf b = {0};
    vg_begin(&b, 3);
    vg_kv_str(&b, "tokenizer.ggml.model", "llama");
    vg_kv_strs(&b, "tokenizer.ggml.tokens", tok, NULL, nt);
    vg_kv_i32s(&b, "tokenizer.ggml.token_type", type, nt);
    cal_vocab *v = NULL;
    char why[256] = "";
    if (cal_vocab_read_mem(b.p, b.n, &v, why, sizeof why) != CAL_OK)
        fail_msg("%s", why);
    free(b.p);
    static const char alpha[] = "ab<s/>x";
    uint64_t r = 12345;
    char text[96];
    cal_frag want[2 * sizeof text + 1], tmp[2 * sizeof text + 1];
    for (int it = 0; it < 4000; it++) {
        size_t n = 0;
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = (size_t)(r >> 33) % sizeof text;
        for (; n < len; n++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            text[n] = alpha[(r >> 33) % (sizeof alpha - 1)];
        }
        for (int ps = 0; ps < 2; ps++) {
            size_t nw = ref_split(v, text, n, ps, want, tmp);
            cal_frag *got = NULL;
            size_t ng = 0;
            assert_int_equal(cal_special_split(v, text, n, ps, &got, &ng), CAL_OK);
            int same = ng == nw;
            for (size_t i = 0; same && i < nw; i++)
                same = got[i].id == want[i].id && got[i].off == want[i].off &&
                       got[i].len == want[i].len;
            if (!same)
                fail_msg("\"%.*s\" (parse_special %d): %zu fragments, llama.cpp's %zu",
                         (int)n, text, ps, ng, nw);
            free(got);
        }
    }
    cal_vocab_free(&v);
}

/* a copy of a test vocabulary with the 4-byte value of key set to v */
static unsigned char *with_u32(const char *name, const char *key, uint32_t v, size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "/%s.gguf", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *b = malloc(1 << 16);
    *n = fread(b, 1, 1 << 16, f);
    fclose(f);
    unsigned char *k = memmem(b, *n, key, strlen(key));
    assert_non_null(k);
    k += strlen(key) + 4;   /* past the type */
    for (int i = 0; i < 4; i++) k[i] = (unsigned char)(v >> (8 * i));
    return b;
}

/* What was wrong is said, and what was used instead: a malformed array is
 * malformed (CAL_EPROTO), not a kind "not supported"; an id outside the
 * vocabulary keeps the family's default as llama.cpp does (gpt2: 11, an
 * ordinary token) and the note says so; a flag of the wrong type likewise;
 * a key listed twice is refused. */
static void test_vocab_says_what_it_replaced(void **s)
{
    (void)s;
    char why[300] = "";
    cal_tokenizer *t = NULL;
    static const char *const tok[] = {"<unk>", "<s>", "</s>", "a", "b"};
    static const float two[] = {0, 0};
    vg_buf b = {0};
    vg_begin(&b, 3);
    vg_kv_str(&b, "tokenizer.ggml.model", "llama");
    vg_kv_strs(&b, "tokenizer.ggml.tokens", tok, NULL, 5);
    vg_kv_f32s(&b, "tokenizer.ggml.scores", two, 2);
    assert_int_equal(cal_tok_open_gguf_mem(b.p, b.n, &t, why, sizeof why), CAL_EPROTO);
    assert_null(t);
    assert_non_null(strstr(why, "tokenizer.ggml.scores is an array of 2 float32: each of "
                                "the 5 tokens needs a float32"));
    free(b.p);

    b = (vg_buf){0};
    vg_begin(&b, 5);
    vg_kv_str(&b, "tokenizer.ggml.model", "llama");
    vg_kv_strs(&b, "tokenizer.ggml.tokens", tok, NULL, 5);
    vg_kv_u32(&b, "tokenizer.ggml.eos_token_id", 70000);
    vg_kv_str(&b, "tokenizer.ggml.add_bos_token", "yes");
    vg_kv_u32(&b, "tokenizer.ggml.unknown_token_id", 5);
    if (cal_tok_open_gguf_mem(b.p, b.n, &t, why, sizeof why) != CAL_OK)
        fail_msg("%s", why);
    free(b.p);
    const char *note = cal_tok_note(t);
    if (!strstr(note, "tokenizer.ggml.eos_token_id is 70000, outside 0..4: the llama default "
                      "2 is used") ||
        !strstr(note, "tokenizer.ggml.unknown_token_id is 5, outside 0..4: the llama default 0 "
                      "is used") ||
        !strstr(note, "tokenizer.ggml.add_bos_token is a string, not a bool: the llama default "
                      "(true) is used"))
        fail_msg("note: \"%s\"", note);
    assert_int_equal(cal_tok_eos(t), 2);
    cal_tok_close(&t);

    size_t n;
    unsigned char *g = with_u32("gpt-2", "tokenizer.ggml.eos_token_id", 99999, &n);
    if (cal_tok_open_gguf_mem(g, n, &t, why, sizeof why) != CAL_OK)
        fail_msg("%s", why);
    assert_int_equal(cal_tok_eos(t), 11);
    assert_string_equal(cal_tok_note(t), "tokenizer.ggml.eos_token_id is 99999, outside "
                                         "0..358: the gpt2 default 11 is used");
    cal_tok_close(&t);
    free(g);
    /* nothing replaced, nothing said */
    t = open_vocab("gpt-2");
    assert_string_equal(cal_tok_note(t), "");
    cal_tok_close(&t);

    b = (vg_buf){0};
    vg_begin(&b, 3);
    vg_kv_str(&b, "tokenizer.ggml.model", "llama");
    vg_kv_strs(&b, "tokenizer.ggml.tokens", tok, NULL, 5);
    vg_kv_strs(&b, "tokenizer.ggml.tokens", tok, NULL, 4);
    assert_int_equal(cal_tok_open_gguf_mem(b.p, b.n, &t, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "tokenizer.ggml.tokens appears a second time"));
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_cases),
        cmocka_unit_test(test_llama3_cases),
        cmocka_unit_test(test_qwen2_cases),
        cmocka_unit_test(test_gpt2_cases),
        cmocka_unit_test(test_spm_special_and_bytes),
        cmocka_unit_test(test_bpe_special),
        cmocka_unit_test(test_bpe_invalid_utf8),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_special_split_as_llama_cpp),
        cmocka_unit_test(test_vocab_says_what_it_replaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
