/* Chat templates (server/chat_template.h): which family a Jinja text is,
 * and the exact text each family renders. The texts below are the shapes of
 * real models' templates (Qwen 2.5's default system message, Llama 3.2's
 * dated system block, Mistral v0.1 and NeMo's spacing); make compat checks
 * the full templates against llama-server's rendering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "server/chat_template.h"
#include "server/request.h"

static const char *render(const cal_chat_template *t, const cal_tpl_msg *m, size_t n,
                          cal_buf *b)
{
    size_t bad = 99;
    char why[200];
    *b = (cal_buf)CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_tpl_render(t, m, n, b, &bad, why, sizeof why), CAL_OK);
    return b->data;
}

static const char QWEN25[] =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}";

static void test_chatml(void **state)
{
    (void)state;
    cal_chat_template t;
    char why[200];
    assert_int_equal(cal_tpl_recognize(QWEN25, &t, why, sizeof why), CAL_OK);
    assert_int_equal(t.kind, CAL_TPL_CHATML);
    assert_string_equal(t.default_system,
                        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    cal_tpl_msg u[] = {{"user", "hi there", 8}};
    cal_buf b;
    assert_string_equal(render(&t, u, 1, &b),
                        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                        "helpful assistant.<|im_end|>\n<|im_start|>user\nhi there<|im_end|>\n"
                        "<|im_start|>assistant\n");
    cal_buf_free(&b);
    /* a system message of one's own replaces the default */
    cal_tpl_msg s[] = {{"system", "Be brief.", 9}, {"user", "x", 1}};
    assert_string_equal(render(&t, s, 2, &b),
                        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n"
                        "<|im_start|>assistant\n");
    cal_buf_free(&b);
    /* a template whose system literal is joined with the message only */
    assert_int_equal(cal_tpl_recognize("'<|im_start|>' + message['role']", &t, why, sizeof why),
                     CAL_OK);
    assert_string_equal(t.default_system, "");
}

static void test_llama3(void **state)
{
    (void)state;
    cal_chat_template t;
    char why[200];
    assert_int_equal(cal_tpl_recognize("{{ '<|start_header_id|>' + m['role'] }}", &t, why,
                                       sizeof why), CAL_OK);
    assert_int_equal(t.kind, CAL_TPL_LLAMA3);
    assert_int_equal(t.dated_system, 0);
    cal_tpl_msg m[] = {{"system", "  sys \n", 7}, {"user", "\thello ", 7}};
    cal_buf b;
    assert_string_equal(render(&t, m, 2, &b),
                        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys"
                        "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    cal_buf_free(&b);
    /* 3.1+: the system block always, with the dates */
    assert_int_equal(cal_tpl_recognize("{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
                                       "<|start_header_id|>", &t, why, sizeof why), CAL_OK);
    assert_int_equal(t.dated_system, 1);
    snprintf(t.today, sizeof t.today, "03 Dec 2026");
    snprintf(t.bos, sizeof t.bos, "<s>");
    assert_string_equal(render(&t, m + 1, 1, &b),
                        "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                        "December 2023\nToday Date: 03 Dec 2026\n\n<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    cal_buf_free(&b);
    assert_string_equal(render(&t, m, 2, &b) + strlen("<s><|start_header_id|>system<|end_"
                                                      "header_id|>\n\nCutting Knowledge Date: "
                                                      "December 2023\nToday Date: 03 Dec 2026\n\n"),
                        "sys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhello"
                        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    cal_buf_free(&b);
}

static void test_mistral(void **state)
{
    (void)state;
    cal_chat_template t;
    char why[200];
    /* v0.1: "[INST] " … " [/INST]", no system message */
    assert_int_equal(cal_tpl_recognize("{{ '[INST] ' + message['content'] + ' [/INST]' }}", &t,
                                       why, sizeof why), CAL_OK);
    assert_int_equal(t.kind, CAL_TPL_MISTRAL);
    cal_tpl_msg m[] = {{"user", "a", 1}, {"assistant", "b", 1}, {"user", "c", 1}};
    cal_buf b;
    assert_string_equal(render(&t, m, 3, &b), "<s>[INST] a [/INST]b</s>[INST] c [/INST]");
    cal_buf_free(&b);
    cal_tpl_msg sys[] = {{"system", "S", 1}, {"user", "a", 1}};
    size_t bad = 99;
    b = (cal_buf)CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_tpl_render(&t, sys, 2, &b, &bad, why, sizeof why), CAL_EINVAL);
    assert_int_equal(bad, 0);
    assert_non_null(strstr(why, "in turn"));
    cal_buf_free(&b);
    /* NeMo: no spaces, the system message in the last user message */
    assert_int_equal(cal_tpl_recognize("{{- \"[INST]\" + system_message + \"\\n\\n\" + "
                                       "message[\"content\"] + \"[/INST]\" }}", &t, why,
                                       sizeof why), CAL_OK);
    cal_tpl_msg n[] = {{"system", "S", 1}, {"user", "a", 1}, {"assistant", "b", 1},
                       {"user", "c", 1}};
    assert_string_equal(render(&t, n, 4, &b), "<s>[INST]a[/INST]b</s>[INST]S\n\nc[/INST]");
    cal_buf_free(&b);
    /* a vocabulary that adds BOS itself: the text starts without it */
    t.bos_added = 1;
    assert_string_equal(render(&t, n, 2, &b), "[INST]S\n\na[/INST]");
    cal_buf_free(&b);
}

static void test_refusals(void **state)
{
    (void)state;
    cal_chat_template t;
    char why[200];
    assert_int_equal(cal_tpl_recognize("<start_of_turn>user", &t, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "ChatML, Llama 3, Mistral"));
    assert_int_equal(cal_tpl_recognize("", &t, why, sizeof why), CAL_EINVAL);
    assert_int_equal(cal_tpl_recognize("[INST] [SYSTEM_PROMPT]", &t, why, sizeof why),
                     CAL_EINVAL);
    /* a tool message under a model's template: refused, naming the message */
    assert_int_equal(cal_tpl_parse("chatml", &t), CAL_TPL_CHATML);
    cal_tpl_msg m[] = {{"user", "a", 1}, {"tool", "{}", 2}};
    cal_buf b = CAL_BUF_INIT(1 << 20);
    size_t bad = 99;
    assert_int_equal(cal_tpl_render(&t, m, 2, &b, &bad, why, sizeof why), CAL_EINVAL);
    assert_int_equal(bad, 1);
    cal_buf_free(&b);
    assert_int_equal(cal_tpl_parse("jinja", &t), -1);
}

/* the request parser renders chat through the model's template, and names
 * the message a template refuses */
static void test_request(void **state)
{
    (void)state;
    cal_chat_template t;
    assert_int_equal(cal_tpl_parse("mistral", &t), CAL_TPL_MISTRAL);
    cal_srv_limits lim = {4096, 2048, &t};
    cal_srv_request r;
    cal_srv_error e;
    const char *ok = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                     "\"text\":\"hi\"}]}]}";
    assert_int_equal(cal_srv_parse_request(CAL_SRV_CHAT, ok, strlen(ok), &lim, &r, &e), CAL_OK);
    assert_int_equal(r.prompt_len, strlen("<s>[INST] hi [/INST]"));
    assert_memory_equal(r.prompt, "<s>[INST] hi [/INST]", r.prompt_len);
    cal_srv_request_free(&r);
    const char *two = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                      "{\"role\":\"user\",\"content\":\"b\"}]}";
    memset(&e, 0, sizeof e);
    assert_int_equal(cal_srv_parse_request(CAL_SRV_CHAT, two, strlen(two), &lim, &r, &e),
                     CAL_EINVAL);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "messages[1].role");
    /* no template: caliper's own, as before */
    lim.tpl = NULL;
    assert_int_equal(cal_srv_parse_request(CAL_SRV_CHAT, two, strlen(two), &lim, &r, &e), CAL_OK);
    assert_memory_equal(r.prompt, "<|user|>\na\n<|user|>\nb\n<|assistant|>\n", r.prompt_len);
    cal_srv_request_free(&r);
}

/* A ChatML template's default system message: held whole or refused with
 * the true reason, never cut (over 511 bytes it was cut silently) and never
 * invalid UTF-8 (the /apply-template answer lost its "prompt"); a file's
 * template text that is empty, holds a NUL or is not UTF-8 says so. */
static void test_default_system_whole(void **state)
{
    (void)state;
    cal_chat_template t;
    char why[200], *j = malloc(8192);
    snprintf(j, 8192, "{{ '<|im_start|>system\\n%0600d<|im_end|>\\n' }}", 7);
    assert_int_equal(cal_tpl_recognize(j, &t, why, sizeof why), CAL_OK);
    assert_int_equal(strlen(t.default_system), 600);
    assert_int_equal(t.default_system[599], '7');
    snprintf(j, 8192, "{{ '<|im_start|>system\\n%04095d<|im_end|>\\n' }}", 7);
    assert_int_equal(cal_tpl_recognize(j, &t, why, sizeof why), CAL_OK);
    assert_int_equal(strlen(t.default_system), 4095);
    snprintf(j, 8192, "{{ '<|im_start|>system\\n%04096d<|im_end|>\\n' }}", 7);
    assert_int_equal(cal_tpl_recognize(j, &t, why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "its default system message is 4096 bytes, over the 4095"));
    assert_int_equal(cal_tpl_recognize("{{ '<|im_start|>system\\nCaf\xe9<|im_end|>' }}", &t,
                                       why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "its default system message is not UTF-8 (byte 3 of its 4)"));
    /* Python's escapes are decoded; one it does not decode is named */
    assert_int_equal(cal_tpl_recognize("{{ '<|im_start|>system\\nIt\\'s\\ta\\\\b"
                                       "<|im_end|>' }}", &t, why, sizeof why), CAL_OK);
    assert_string_equal(t.default_system, "It's\ta\\b");
    assert_int_equal(cal_tpl_recognize("{{ '<|im_start|>system\\nA\\x41<|im_end|>' }}", &t,
                                       why, sizeof why), CAL_EINVAL);
    assert_non_null(strstr(why, "an escape caliper does not decode (\"\\x41"));
    free(j);
    assert_int_equal(cal_tpl_check_text("", 0, why, sizeof why), CAL_EINVAL);
    assert_string_equal(why, "it is empty (0 bytes)");
    assert_int_equal(cal_tpl_check_text("\0{{ x }}", 8, why, sizeof why), CAL_EINVAL);
    assert_string_equal(why, "byte 0 of its 8 is NUL: a template is text");
    assert_int_equal(cal_tpl_check_text("ab\xff", 3, why, sizeof why), CAL_EINVAL);
    assert_string_equal(why, "byte 2 of its 3 is not UTF-8: a template is text");
    assert_int_equal(cal_tpl_check_text("<|im_start|>", 12, why, sizeof why), CAL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chatml),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_default_system_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
