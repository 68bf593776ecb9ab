/* Unit tests: caliper serve's request parser, context check, error JSON and
 * the Prometheus rendering of its metrics. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "server/metrics.h"
#include "server/request.h"

static const cal_srv_limits LIM = {4096, 512, NULL};

static int parse(cal_srv_api api, const char *body, cal_srv_request *r, cal_srv_error *e)
{
    return cal_srv_parse_request(api, body, strlen(body), &LIM, r, e);
}

static void expect_bad(cal_srv_api api, const char *body, const char *param)
{
    cal_srv_request r;
    cal_srv_error e;
    assert_int_equal(parse(api, body, &r, &e), CAL_EINVAL);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, param);
    assert_true(strlen(e.message) > 0);
    assert_null(r.prompt);
    assert_null(r.prompt_ids);
}

static void test_completion_fields(void **state)
{
    (void)state;
    cal_srv_request r;
    cal_srv_error e;
    assert_int_equal(parse(CAL_SRV_COMPLETIONS,
        "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":8,\"temperature\":0.5,"
        "\"top_p\":0.9,\"seed\":-1,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"ignore_eos\":true,\"min_tokens\":3,\"n\":1,\"unknown_field\":[1,2]}", &r, &e), CAL_OK);
    assert_string_equal(r.prompt, "hello");
    assert_int_equal(r.prompt_len, 5);
    assert_int_equal(r.max_tokens, 8);
    assert_true(r.temperature == 0.5f && r.top_p == 0.9f);
    assert_true(r.has_seed && r.seed == UINT64_MAX);
    assert_true(r.stream && r.include_usage && r.ignore_eos);
    assert_int_equal(r.min_tokens, 3);
    cal_srv_request_free(&r);

    /* defaults: OpenAI's temperature 1, max_tokens left to the context check */
    assert_int_equal(parse(CAL_SRV_COMPLETIONS, "{\"prompt\":[\"one\"]}", &r, &e), CAL_OK);
    assert_string_equal(r.prompt, "one");
    assert_int_equal(r.max_tokens, -1);
    assert_true(r.temperature == 1.0f && r.top_p == 1.0f && !r.stream && !r.has_seed);
    cal_srv_request_free(&r);

    /* token ids, plain and in the batch form; max_completion_tokens */
    assert_int_equal(parse(CAL_SRV_COMPLETIONS,
        "{\"prompt\":[[7,8,4095]],\"max_completion_tokens\":2}", &r, &e), CAL_OK);
    assert_null(r.prompt);
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 4095);
    assert_int_equal(r.max_tokens, 2);
    cal_srv_request_free(&r);
}

static void test_completion_errors(void **state)
{
    (void)state;
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":\"ten\"}", "max_tokens");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":513}", "max_tokens");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":1.5}", "max_tokens");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"temperature\":2.5}", "temperature");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"top_p\":0}", "top_p");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":\"yes\"}", "stream");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"n\":2}", "n");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":1}}",
               "stream_options.include_usage");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"model\":3}", "model");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"max_tokens\":3}", "prompt");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"\"}", "prompt");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":[]}", "prompt");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":[1,4096]}", "prompt");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":[1,\"a\"]}", "prompt");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":{}}", "prompt");
    expect_bad(CAL_SRV_COMPLETIONS, "[1,2]", "");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":", "");
    expect_bad(CAL_SRV_COMPLETIONS, "{\"prompt\":\"a\",\"prompt\":\"b\"}", "");
    /* the message names the field and the value */
    cal_srv_request r;
    cal_srv_error e;
    parse(CAL_SRV_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":\"ten\"}", &r, &e);
    assert_non_null(strstr(e.message, "max_tokens"));
    assert_non_null(strstr(e.message, "\"ten\""));
}

static void test_chat(void **state)
{
    (void)state;
    cal_srv_request r;
    cal_srv_error e;
    assert_int_equal(parse(CAL_SRV_CHAT,
        "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \"},{\"text\":\"there\"}]},"
        "{\"role\":\"assistant\",\"content\":null}]}", &r, &e), CAL_OK);
    assert_string_equal(r.prompt, "<|system|>\nbe brief\n<|user|>\nhi there\n<|assistant|>\n\n"
                                  "<|assistant|>\n");
    assert_int_equal(r.prompt_len, strlen(r.prompt));
    cal_srv_request_free(&r);
    expect_bad(CAL_SRV_CHAT, "{\"prompt\":\"x\"}", "messages");
    expect_bad(CAL_SRV_CHAT, "{\"messages\":[]}", "messages");
    expect_bad(CAL_SRV_CHAT, "{\"messages\":[3]}", "messages[0]");
    expect_bad(CAL_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                             "{\"role\":\"wizard\",\"content\":\"b\"}]}", "messages[1].role");
    expect_bad(CAL_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}",
               "messages[0].content");
    expect_bad(CAL_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":"
                             "[{\"type\":\"image_url\",\"image_url\":{}}]}]}",
               "messages[0].content");
}

static void test_context(void **state)
{
    (void)state;
    cal_srv_request r = {.api = CAL_SRV_COMPLETIONS, .max_tokens = -1};
    cal_srv_error e;
    assert_int_equal(cal_srv_check_context(&r, 10, 512, &e), CAL_OK);
    assert_int_equal(r.max_tokens, CAL_SRV_DEFAULT_MAX_TOKENS);
    r.max_tokens = -1;
    assert_int_equal(cal_srv_check_context(&r, 500, 512, &e), CAL_OK);
    assert_int_equal(r.max_tokens, 12);                /* the default, cut to the room left */
    r.api = CAL_SRV_CHAT;
    r.max_tokens = -1;
    assert_int_equal(cal_srv_check_context(&r, 10, 512, &e), CAL_OK);
    assert_int_equal(r.max_tokens, CAL_SRV_DEFAULT_CHAT_MAX_TOKENS);
    r.max_tokens = 502;
    assert_int_equal(cal_srv_check_context(&r, 10, 512, &e), CAL_OK);   /* exactly fits */
    r.max_tokens = 503;
    assert_int_equal(cal_srv_check_context(&r, 10, 512, &e), CAL_EINVAL);
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, "max_tokens");
    assert_string_equal(e.code, "context_length_exceeded");
    r.max_tokens = 4;
    assert_int_equal(cal_srv_check_context(&r, 512, 512, &e), CAL_EINVAL);
    assert_string_equal(e.param, "prompt");
    assert_int_equal(cal_srv_check_context(&r, 0, 512, &e), CAL_EINVAL);
    assert_string_equal(e.param, "prompt");
    r.min_tokens = 5;
    assert_int_equal(cal_srv_check_context(&r, 3, 512, &e), CAL_EINVAL);
    assert_string_equal(e.param, "min_tokens");
}

static void test_tokenize_and_error_json(void **state)
{
    (void)state;
    char *text;
    size_t len;
    cal_srv_error e;
    const char *b1 = "{\"content\":\"a\\u0000b\"}";
    assert_int_equal(cal_srv_parse_tokenize(b1, strlen(b1), &text, &len, &e), CAL_OK);
    assert_int_equal(len, 3);                         /* embedded NUL kept */
    assert_memory_equal(text, "a\0b", 3);
    free(text);
    const char *b2 = "{\"prompt\":1}";
    assert_int_equal(cal_srv_parse_tokenize(b2, strlen(b2), &text, &len, &e), CAL_EINVAL);
    assert_string_equal(e.param, "prompt");

    cal_srv_error_set(&e, 400, NULL, "max_tokens", NULL, "max_tokens: %d is bad", 0);
    char *js = cal_srv_error_json(&e);
    json_t *o = json_loads(js, 0, NULL);
    assert_non_null(o);
    json_t *err = json_object_get(o, "error");
    assert_string_equal(json_string_value(json_object_get(err, "param")), "max_tokens");
    assert_string_equal(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    assert_string_equal(json_string_value(json_object_get(err, "message")), "max_tokens: 0 is bad");
    assert_true(json_is_null(json_object_get(err, "code")));
    json_decref(o);
    free(js);
}

static void test_metrics(void **state)
{
    (void)state;
    cal_srv_metrics m;
    assert_int_equal(cal_srv_metrics_init(&m, 1), CAL_OK);
    atomic_store(&m.running, 3);
    atomic_store(&m.waiting, 2);
    cal_srv_metrics_step(&m, 3000000, 4);      /* 3 ms, batch 4 */
    cal_srv_metrics_step(&m, 30000000, 1);     /* 30 ms */
    for (int i = 0; i < 98; i++) cal_srv_metrics_late(&m, 100000);   /* 0.1 ms */
    cal_srv_metrics_late(&m, 5000000);         /* 5 ms */
    cal_srv_metrics_late(&m, 20000000);        /* 20 ms */
    assert_true(cal_srv_metrics_late_ms(&m, 0.5) <= 0.12);
    assert_true(cal_srv_metrics_late_ms(&m, 0.99) >= 4.9 && cal_srv_metrics_late_ms(&m, 0.99) <= 5.02);
    assert_true(cal_srv_metrics_late_ms(&m, 1.0) == 20.0);
    cal_buf b = CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_srv_metrics_render(&m, "x", &b), CAL_OK);
    assert_non_null(strstr(b.data, "\nvllm:num_requests_running{model_name=\"x\"} 3\n"));
    assert_non_null(strstr(b.data, "\ncaliper:num_requests_waiting{model_name=\"x\"} 2\n"));
    assert_non_null(strstr(b.data, "caliper:decode_step_seconds_bucket{model_name=\"x\",le=\"0.0025\"} 0\n"));
    assert_non_null(strstr(b.data, "caliper:decode_step_seconds_bucket{model_name=\"x\",le=\"0.005\"} 1\n"));
    assert_non_null(strstr(b.data, "caliper:decode_step_seconds_bucket{model_name=\"x\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(b.data, "caliper:decode_batch_size_max{model_name=\"x\"} 4\n"));
    assert_non_null(strstr(b.data, "caliper:pace_lateness_ms{quantile=\"1\"} 20.000\n"));
    assert_non_null(strstr(b.data, "caliper:pace_lateness_window_ms_bucket{le=\"0.25\"} 98\n"));
    assert_non_null(strstr(b.data, "caliper:pace_lateness_window_ms_bucket{le=\"10\"} 99\n"));
    assert_non_null(strstr(b.data, "caliper:pace_lateness_window_ms_bucket{le=\"+Inf\"} 100\n"));
    assert_non_null(strstr(b.data, "caliper:pace_lateness_window_ms_sum 34.800000\n"));
    cal_buf_free(&b);
    cal_srv_metrics_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_completion_fields),
        cmocka_unit_test(test_completion_errors),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_tokenize_and_error_json),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
