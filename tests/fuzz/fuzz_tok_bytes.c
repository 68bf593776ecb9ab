/* libFuzzer target: caliper's byte vocabularies. The byte tokenizer of a
 * GGUF file caliper wrote, at 1,000,002 tokens (ids from 1000000 print as
 * 9-byte "[N]"; each must read back whole, the last one and the one
 * before it), gives one id per byte; the synthetic vocabulary's greedy
 * encode is lossless; and the same byte vocabulary read through the GGUF
 * path (as llama.cpp reads the file: byte tokens, "▁", </s>, <s> and <unk>
 * as special tokens) splits special tokens exactly as llama.cpp and gives
 * the text back (valid UTF-8). The first input byte picks the flags; two more pick a
 * high id whose "[N]" must read back whole. Also built as a corpus replay
 * for `make test`. */
#include <stdio.h>
#include "caliper/utf8.h"
#include "tests/fuzz/tok_check.h"
#include "tests/unit/vocab_gguf.h"

#define WIDE 1000002

static cal_tokenizer *bytes, *synth, *file;
static cal_vocab *vocab;

static void open_once(void)
{
    if (cal_tok_open_bytes(WIDE, 256, &bytes) != CAL_OK || cal_tok_open(4096, &synth) != CAL_OK)
        __builtin_trap();
    /* engine/gguf.h's byte vocabulary, 300 tokens */
    size_t n = 300;
    const char **text = calloc(n, sizeof *text);
    char (*t)[16] = calloc(n, 16);
    int32_t *type = calloc(n, sizeof *type);
    for (size_t i = 0; i < n; i++) {
        if (i == 32) snprintf(t[i], 16, "\xe2\x96\x81");
        else if (i < 256) snprintf(t[i], 16, "<0x%02zX>", i);
        else if (i == 256) snprintf(t[i], 16, "</s>");
        else if (i == 257) snprintf(t[i], 16, "<s>");
        else if (i == 258) snprintf(t[i], 16, "<unk>");
        else snprintf(t[i], 16, "[%zu]", i);
        text[i] = t[i];
        type[i] = i == 32 || i > 258 ? 1 : i < 256 ? 6 : i == 258 ? 2 : 3;
    }
    vg_buf g = {0};
    vg_begin(&g, 7);
    vg_kv_str(&g, "tokenizer.ggml.model", "llama");
    vg_kv_strs(&g, "tokenizer.ggml.tokens", text, NULL, n);
    vg_kv_i32s(&g, "tokenizer.ggml.token_type", type, n);
    vg_kv_u32(&g, "tokenizer.ggml.eos_token_id", 256);
    vg_kv_u32(&g, "tokenizer.ggml.bos_token_id", 257);
    vg_key(&g, "tokenizer.ggml.add_bos_token", VG_BOOL);
    vg_put(&g, "", 1);
    vg_key(&g, "tokenizer.ggml.add_space_prefix", VG_BOOL);
    vg_put(&g, "", 1);
    char why[256];
    if (cal_vocab_read_mem(g.p, g.n, &vocab, why, sizeof why) != CAL_OK ||
        cal_tok_open_gguf_mem(g.p, g.n, &file, why, sizeof why) != CAL_OK)
        __builtin_trap();
    free(g.p);
    free(text);
    free(t);
    free(type);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!bytes)
        open_once();
    if (size < 3)
        return 0;
    int flags = data[0] & (CAL_TOK_ADD_SPECIAL | CAL_TOK_PARSE_SPECIAL);
    int32_t high[3] = {WIDE - 1, 1000000, WIDE - 1 - (int32_t)(data[1] | data[2] << 8) * 15};
    const char *t = (const char *)data + 3;
    size_t n = size - 3;
    for (int i = 0; i < 3; i++) {
        char want[16];
        int wn = snprintf(want, sizeof want, "[%d]", (int)high[i]), len;
        const char *p = cal_tok_piece(bytes, high[i], &len);
        if (!p || len != wn || memcmp(p, want, (size_t)wn)) __builtin_trap();
    }
    if (tc_encode(bytes, t, n, flags, 1) != (int)n) __builtin_trap();
    if (tc_encode(synth, t, n, flags, 1) < 0) __builtin_trap();
    tc_same_split(vocab, t, n, flags & CAL_TOK_PARSE_SPECIAL);
    /* a byte that starts no valid UTF-8 sequence takes the bytes after it
     * into its "character" (llama.cpp's rule), which may split an escaped
     * space; and "▁" in the text decodes as a space: no byte-exact round
     * trip for either */
    int exact = cal_utf8_check(t, n) == n && !memmem(t, n, "\xe2\x96\x81", 3);
    if (tc_encode(file, t, n, flags, exact) < 0) __builtin_trap();
    return 0;
}
