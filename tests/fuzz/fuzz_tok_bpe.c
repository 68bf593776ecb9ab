/* libFuzzer target: the byte-level BPE encoder (the qwen2 pre-tokenizer)
 * with special tokens. A small vocabulary (GPT-2's 256 byte characters,
 * a few merges, control and user-defined tokens that nest and overlap)
 * encodes the input after its first byte, which picks the flags.
 * Invariants: the split at special tokens is exactly llama.cpp's; every id
 * is in the vocabulary; valid UTF-8 comes back from the pieces byte for
 * byte (llama.cpp reads a byte that is not as U+FFFD). The Makefile's fuzz
 * rule bounds each input's time and memory. Also built as a corpus replay
 * for `make test`. */
#include "caliper/utf8.h"
#include "tests/fuzz/tok_check.h"
#include "tests/unit/vocab_gguf.h"

static cal_vocab *vocab;
static cal_tokenizer *tok;

/* GPT-2's byte-to-unicode character for byte b, as UTF-8 */
static void gpt2_char(unsigned b, char *o)
{
    unsigned k = 0, cp = b;
    int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    if (!keep) {
        for (unsigned c = 0; c < b; c++)
            k += !((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff));
        cp = 256 + k;
    }
    if (cp < 0x80) { o[0] = (char)cp; o[1] = 0; }
    else { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); o[2] = 0; }
}

static void open_once(void)
{
    static const char *const merged[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "aa", "aaaa",
                                         "\xc4\xa0\xc4\xa0", "in", "\xc4\xa0in"};
    static const char *const merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "a a", "aa aa",
                                         "\xc4\xa0 \xc4\xa0", "i n", "\xc4\xa0 in"};
    static const char *const special[][2] = {
        {"<|endoftext|>", "3"}, {"<|im_start|>", "3"}, {"<|im_end|>", "3"}, {"<|im", "4"},
        {"|>", "4"}, {"ab", "4"}, {"\n\n", "4"}, {"<|endoftext|>", "4"}};
    size_t nm = sizeof merged / sizeof merged[0], ns = sizeof special / sizeof special[0];
    size_t n = 256 + nm + ns;
    const char **text = calloc(n, sizeof *text);
    char (*bytes)[4] = calloc(256, 4);
    int32_t *type = calloc(n, sizeof *type);
    size_t k = 0;
    for (unsigned b = 0; b < 256; b++, k++) {
        gpt2_char(b, bytes[b]);
        text[k] = bytes[b];
        type[k] = 1;
    }
    for (size_t i = 0; i < nm; i++, k++) {
        text[k] = merged[i];
        type[k] = 1;
    }
    for (size_t i = 0; i < ns; i++, k++) {
        text[k] = special[i][0];
        type[k] = special[i][1][0] - '0';
    }
    vg_buf g = {0};
    vg_begin(&g, 6);
    vg_kv_str(&g, "tokenizer.ggml.model", "gpt2");
    vg_kv_str(&g, "tokenizer.ggml.pre", "qwen2");
    vg_kv_strs(&g, "tokenizer.ggml.tokens", text, NULL, n);
    vg_kv_i32s(&g, "tokenizer.ggml.token_type", type, n);
    vg_kv_strs(&g, "tokenizer.ggml.merges", merges, NULL, nm);
    vg_kv_u32(&g, "tokenizer.ggml.eos_token_id", (uint32_t)(256 + nm));
    char why[256];
    if (cal_vocab_read_mem(g.p, g.n, &vocab, why, sizeof why) != CAL_OK ||
        cal_tok_open_gguf_mem(g.p, g.n, &tok, why, sizeof why) != CAL_OK)
        __builtin_trap();
    free(g.p);
    free(text);
    free(bytes);
    free(type);
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
    int k = tc_encode(tok, t, n, flags, cal_utf8_check(t, n) == n);
    if (k < 0 && k != CAL_EINVAL) __builtin_trap();   /* EINVAL: above U+10FFFF */
    return 0;
}
