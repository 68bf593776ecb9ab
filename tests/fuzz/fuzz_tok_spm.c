/* libFuzzer target: the SentencePiece encoder with special tokens. A small
 * vocabulary (byte fallback for every byte, a few merges, control and
 * user-defined tokens that nest and overlap: "<|im_start|>" holds "<|im"
 * and "|>", "aaa" holds "aa") encodes the input after its first byte,
 * which picks the flags. Invariants: the split at special tokens is
 * exactly llama.cpp's (its quadratic algorithm, run beside); every id is
 * in the vocabulary; the pieces give valid UTF-8 back. The Makefile's fuzz
 * rule bounds each input's time and memory, so a quadratic path fails the
 * run. Also built as a corpus replay for `make test`. */
#include <stdio.h>
#include "caliper/utf8.h"
#include "tests/fuzz/tok_check.h"
#include "tests/unit/vocab_gguf.h"

static cal_vocab *vocab;
static cal_tokenizer *tok;

static void open_once(void)
{
    static const char *const special[][2] = {
        {"<unk>", "2"}, {"<s>", "3"}, {"</s>", "3"}, {"<|im_start|>", "3"}, {"<|im_end|>", "3"},
        {"<|im", "4"}, {"|>", "4"}, {"aa", "4"}, {"aaa", "4"}, {"\n\n", "4"}, {"<s", "4"},
        {"<s>", "4"}};
    static const char *const normal[] = {"\xe2\x96\x81", "\342\226\201a", "ab", "he",
                                         "\xe2\x96\x81t", "\xe2\x96\x81th", "\xe2\x96\x81the",
                                         "a", "b", "h", "t", "e", "ba", "bab"};
    size_t ns = sizeof special / sizeof special[0], nn = sizeof normal / sizeof normal[0];
    size_t n = ns + 256 + nn;
    const char **text = calloc(n, sizeof *text);
    char (*bytes)[8] = calloc(256, 8);
    int32_t *type = calloc(n, sizeof *type);
    float *score = calloc(n, sizeof *score);
    size_t k = 0;
    for (size_t i = 0; i < ns; i++, k++) {
        text[k] = special[i][0];
        type[k] = special[i][1][0] - '0';
    }
    for (int b = 0; b < 256; b++, k++) {
        snprintf(bytes[b], 8, "<0x%02X>", b);
        text[k] = bytes[b];
        type[k] = 6;
    }
    for (size_t i = 0; i < nn; i++, k++) {
        text[k] = normal[i];
        type[k] = 1;
        score[k] = -(float)i;
    }
    vg_buf g = {0};
    vg_begin(&g, 5);
    vg_kv_str(&g, "tokenizer.ggml.model", "llama");
    vg_kv_strs(&g, "tokenizer.ggml.tokens", text, NULL, n);
    vg_kv_i32s(&g, "tokenizer.ggml.token_type", type, n);
    vg_kv_f32s(&g, "tokenizer.ggml.scores", score, n);
    vg_key(&g, "tokenizer.ggml.add_space_prefix", VG_BOOL);
    vg_put(&g, "", 1);
    char why[256];
    if (cal_vocab_read_mem(g.p, g.n, &vocab, why, sizeof why) != CAL_OK ||
        cal_tok_open_gguf_mem(g.p, g.n, &tok, why, sizeof why) != CAL_OK)
        __builtin_trap();
    free(g.p);
    free(text);
    free(bytes);
    free(type);
    free(score);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok)
        open_once();
    if (size == 0)
        return 0;
    int flags = data[0] & (CAL_TOK_ADD_SPECIAL | CAL_TOK_PARSE_SPECIAL);
    const char *t = (const char *)data + 1;
    size_t n = size - 1;
    tc_same_split(vocab, t, n, flags & CAL_TOK_PARSE_SPECIAL);
    /* a byte that starts no valid UTF-8 sequence takes the bytes after it
     * into its "character" (llama.cpp's rule), which may split an escaped
     * space; and "▁" in the text decodes as a space: no byte-exact round
     * trip for either */
    int exact = cal_utf8_check(t, n) == n && !memmem(t, n, "\xe2\x96\x81", 3);
    if (tc_encode(tok, t, n, flags, exact) < 0) __builtin_trap();   /* every byte has a token */
    return 0;
}
