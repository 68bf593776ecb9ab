/* libFuzzer target: chat-template recognition on arbitrary text (a GGUF
 * file's tokenizer.chat_template is outside input). Invariants: it never
 * crashes or reads past the text, a refusal always says why, and a
 * recognised template renders a conversation that starts with its family's
 * opening and ends with the assistant's turn. Also built as a corpus replay
 * for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "server/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    cal_chat_template t;
    char why[200] = "";
    int rc = cal_tpl_recognize(text, &t, why, sizeof why);
    free(text);
    if (rc != CAL_OK) {
        if (!why[0]) __builtin_trap();
        return 0;
    }
    if (t.kind <= CAL_TPL_CALIPER || t.kind >= CAL_TPL_COUNT ||
        !memchr(t.default_system, '\0', sizeof t.default_system))
        __builtin_trap();
    cal_tpl_msg m[2] = {{"user", "hi", 2}, {"assistant", "ok", 2}};
    cal_buf b = CAL_BUF_INIT(1 << 16);
    size_t bad = 0;
    rc = cal_tpl_render(&t, m, 1, &b, &bad, why, sizeof why);
    if (rc != CAL_OK || !b.data) __builtin_trap();
    static const char *const open[CAL_TPL_COUNT] = {"", "<|im_start|>", "<|begin_of_text|>", "<s>"};
    if (strncmp(b.data, open[t.kind], strlen(open[t.kind])) != 0) __builtin_trap();
    if (t.kind != CAL_TPL_MISTRAL && !strstr(b.data, "assistant")) __builtin_trap();
    cal_buf_free(&b);
    return 0;
}
