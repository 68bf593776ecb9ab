/* libFuzzer target: the GGUF vocabulary reader and the encoders behind it on
 * arbitrary bytes. Invariants: it never crashes or reads out of bounds, a
 * failure always says why and leaves no tokenizer, and an opened tokenizer
 * encodes text (a fixed string with special-looking parts, and the input's
 * own tail) into ids inside the vocabulary, each with a piece.
 * Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "caliper/error.h"
#include "engine/engine.h"

static void encode_check(const cal_tokenizer *t, const char *s, size_t n, int flags)
{
    int32_t ids[512];
    int k = cal_tok_encode_ex(t, s, n, flags, ids, 512);
    if (k < 0 && k != CAL_ETOOBIG && k != CAL_EINVAL) __builtin_trap();
    for (int i = 0; i < k; i++) {
        int len;
        if (ids[i] < 0 || ids[i] >= cal_tok_vocab(t) || !cal_tok_piece(t, ids[i], &len) ||
            len < 0)
            __builtin_trap();
        cal_tok_state st = {{0}, 0, 0};
        char out[CAL_TOK_DECODE_MAX];
        int d = cal_tok_decode(t, &st, ids[i], out, sizeof out);
        if (d < 0 || d > CAL_TOK_DECODE_MAX) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cal_tokenizer *t = (cal_tokenizer *)1;
    char why[256] = "";
    int rc = cal_tok_open_gguf_mem(data, size, &t, why, sizeof why);
    if (rc != CAL_OK) {
        if (!why[0] || t) __builtin_trap();
        return 0;
    }
    if (!t || cal_tok_vocab(t) <= 0) __builtin_trap();
    static const char fixed[] = " Hello, y'all! <s></s><|im_start|>3333 \xe2\x82\xac\n\n\t x\xff";
    encode_check(t, fixed, sizeof fixed - 1, 0);
    encode_check(t, fixed, sizeof fixed - 1, CAL_TOK_ADD_SPECIAL | CAL_TOK_PARSE_SPECIAL);
    size_t tail = size > 200 ? 200 : size;
    encode_check(t, (const char *)data + size - tail, tail, CAL_TOK_PARSE_SPECIAL);
    cal_tok_close(&t);
    return 0;
}
