/* libFuzzer target: the chat-template reader on arbitrary bytes (a GGUF
 * file's tokenizer.chat_template is outside input). Invariants: it never
 * crashes or reads past the text; a refusal always says why; bytes that
 * are not a template's text (empty, a NUL, not UTF-8) are refused by
 * cal_tpl_check_text; a recognised template holds its default system
 * message whole and as UTF-8, and renders a conversation (whose messages
 * come from the input too) that starts with its family's opening, ends
 * with the assistant's turn and is valid UTF-8. The Makefile's fuzz rule
 * bounds each input's time and memory, so a quadratic scan of a template
 * fails the run. Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/utf8.h"
#include "server/chat_template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[200] = "";
    const char *d = (const char *)data;
    int text_ok = cal_tpl_check_text(d, size, why, sizeof why) == CAL_OK;
    if (!text_ok && !why[0]) __builtin_trap();
    if (text_ok && (size == 0 || memchr(d, 0, size) || cal_utf8_check(d, size) != size))
        __builtin_trap();
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    cal_chat_template t;
    why[0] = '\0';
    int rc = cal_tpl_recognize(text, &t, why, sizeof why);
    if (rc != CAL_OK) {
        free(text);
        if (!why[0]) __builtin_trap();
        return 0;
    }
    size_t dl = strnlen(t.default_system, sizeof t.default_system);
    if (t.kind <= CAL_TPL_CALIPER || t.kind >= CAL_TPL_COUNT || dl == sizeof t.default_system ||
        cal_utf8_check(t.default_system, dl) != dl)
        __builtin_trap();
    /* the conversation: the input's valid UTF-8 prefix, cut in two */
    size_t ok = cal_utf8_check(text, strlen(text)), half = ok / 2;
    while (half > 0 && ((unsigned char)text[half] & 0xc0) == 0x80) half--;
    cal_tpl_msg m[3] = {{"system", text, half}, {"user", text + half, ok - half},
                        {"assistant", "ok", 2}};
    cal_buf b = CAL_BUF_INIT(1 << 20);
    size_t bad = 0;
    rc = cal_tpl_render(&t, m + 1, 1, &b, &bad, why, sizeof why);
    if (rc != CAL_OK || !b.data) __builtin_trap();
    static const char *const open[CAL_TPL_COUNT] = {"", "<|im_start|>", "<|begin_of_text|>", "<s>"};
    if (strncmp(b.data, open[t.kind], strlen(open[t.kind])) != 0) __builtin_trap();
    if (t.kind != CAL_TPL_MISTRAL && !strstr(b.data, "assistant")) __builtin_trap();
    if (cal_utf8_check(b.data, b.len) != b.len) __builtin_trap();
    cal_buf_free(&b);
    b = (cal_buf)CAL_BUF_INIT(1 << 20);
    rc = cal_tpl_render(&t, m, 3, &b, &bad, why, sizeof why);
    if (rc != CAL_OK && (rc != CAL_EINVAL || !why[0])) __builtin_trap();
    if (rc == CAL_OK && cal_utf8_check(b.data, b.len) != b.len) __builtin_trap();
    cal_buf_free(&b);
    free(text);
    return 0;
}
