/* Unit tests: protocol fingerprints. Each field, changed alone, makes two
 * fingerprints differ in exactly that field, named, with both values; a
 * stored run's fingerprint comes from its cells and its protocol record. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include "caliper/error.h"
#include "caliper/fingerprint.h"
#include "caliper/store.h"

static void base(cal_fingerprint *fp)
{
    cal_fp_init(fp);
    fp->shot_kind = CAL_SHOT_WARM;
    fp->shot_first = 2;
    fp->shot_last = 6;
    fp->rest_s = 0;
    fp->warmup = 1;
    fp->concurrency = 1;
    fp->request_rate = 0;
    fp->column = CAL_COL_PER_REQUEST;
    fp->prompt_tokens = 512;
    cal_fp_set(fp->content, "prose");
    cal_fp_set(fp->output_policy, "fixed 64");
    fp->streaming = 1;
    cal_fp_set(fp->api, "completions");
    cal_fp_set(fp->probe, "caliper 0.1.0");
    cal_fp_set(fp->host, "AMD EPYC 7B13 (2 cores)");
}

/* b differs from a in one field: exactly one difference, that field, named,
 * with the two values as given. */
static void one_diff(const cal_fingerprint *a, const cal_fingerprint *b, cal_fp_field f,
                     const char *name, const char *va, const char *vb)
{
    cal_fp_difference d[CAL_FPF__N];
    size_t n = cal_fp_diff(a, b, d, CAL_FPF__N);
    assert_int_equal(n, 1);
    assert_int_equal(d[0].field, f);
    assert_string_equal(cal_fp_field_name(d[0].field), name);
    assert_string_equal(d[0].a, va);
    assert_string_equal(d[0].b, vb);
    /* and symmetric */
    assert_int_equal(cal_fp_diff(b, a, NULL, 0), 1);
}

static void test_equal(void **state)
{
    (void)state;
    cal_fingerprint a, b;
    base(&a);
    base(&b);
    assert_int_equal(cal_fp_diff(&a, &b, NULL, 0), 0);
    /* unknown equals unknown: NAN rests on both sides */
    a.rest_s = b.rest_s = NAN;
    assert_int_equal(cal_fp_diff(&a, &b, NULL, 0), 0);
    /* but unknown never equals a known value */
    b.rest_s = 0;
    assert_int_equal(cal_fp_diff(&a, &b, NULL, 0), 1);
}

static void test_each_field(void **state)
{
    (void)state;
    cal_fingerprint a, b;
    base(&a);

    base(&b); b.shot_kind = CAL_SHOT_COLD;
    one_diff(&a, &b, CAL_FPF_SHOT_KIND, "shot kind", "warm", "cold");
    base(&b); b.shot_first = 3;
    one_diff(&a, &b, CAL_FPF_SHOT_RANGE, "shot range", "2–6", "3–6");
    base(&b); b.rest_s = 15;
    one_diff(&a, &b, CAL_FPF_REST, "rest", "0 s", "15 s");
    base(&b); b.warmup = 0;
    one_diff(&a, &b, CAL_FPF_WARMUP, "warm-up", "1", "0");
    base(&b); b.concurrency = 8;
    one_diff(&a, &b, CAL_FPF_CONCURRENCY, "concurrency", "1", "8");
    base(&b); b.request_rate = INFINITY;
    one_diff(&a, &b, CAL_FPF_RATE, "request rate", "closed loop", "all at once");
    base(&b); b.column = CAL_COL_AGGREGATE;
    one_diff(&a, &b, CAL_FPF_COLUMN, "column", "per-request", "aggregate");
    base(&b); b.prompt_tokens = 4096;
    one_diff(&a, &b, CAL_FPF_PROMPT, "prompt length", "512 tok", "4096 tok");
    base(&b); cal_fp_set(b.content, "code");
    one_diff(&a, &b, CAL_FPF_CONTENT, "content", "prose", "code");
    base(&b); cal_fp_set(b.output_policy, "eos");
    one_diff(&a, &b, CAL_FPF_OUTPUT, "output policy", "fixed 64", "eos");
    base(&b); b.streaming = 0;
    one_diff(&a, &b, CAL_FPF_STREAMING, "streaming", "yes", "no");
    base(&b); cal_fp_set(b.api, "chat");
    one_diff(&a, &b, CAL_FPF_API, "API", "completions", "chat");
    base(&b); cal_fp_set(b.probe, "vllm bench serve");
    one_diff(&a, &b, CAL_FPF_PROBE, "probe", "caliper 0.1.0", "vllm bench serve");
    base(&b); cal_fp_set(b.host, "Apple M2");
    one_diff(&a, &b, CAL_FPF_HOST, "host", "AMD EPYC 7B13 (2 cores)", "Apple M2");
}

static void test_several_and_text(void **state)
{
    (void)state;
    cal_fingerprint a, b;
    base(&a);
    base(&b);
    a.shot_kind = CAL_SHOT_COLD;
    a.shot_first = a.shot_last = 1;
    b.rest_s = 15;
    cal_fp_difference d[CAL_FPF__N];
    size_t n = cal_fp_diff(&a, &b, d, CAL_FPF__N);
    assert_int_equal(n, 3);   /* shot kind, shot range, rest */
    char t[256];
    cal_fp_diff_text(d, n, t, sizeof t);
    assert_non_null(strstr(t, "shot kind cold vs warm"));
    assert_non_null(strstr(t, "shot range 1 vs 2–6"));
    assert_non_null(strstr(t, "rest 0 s vs 15 s"));
    /* a short cap counts all but writes what fits */
    assert_int_equal(cal_fp_diff(&a, &b, d, 1), 3);
    assert_int_equal(d[0].field, CAL_FPF_SHOT_KIND);
}

static void test_names_parse_describe(void **state)
{
    (void)state;
    cal_shot_kind k;
    assert_int_equal(cal_shot_kind_parse("cold", &k), CAL_OK);
    assert_int_equal(k, CAL_SHOT_COLD);
    assert_int_equal(cal_shot_kind_parse("warmup", &k), CAL_OK);
    assert_int_equal(k, CAL_SHOT_WARMUP);
    assert_int_equal(cal_shot_kind_parse("consecutive", &k), CAL_OK);
    assert_int_equal(k, CAL_SHOT_CONSECUTIVE);
    assert_int_equal(cal_shot_kind_parse("tepid", &k), CAL_EINVAL);
    assert_non_null(strstr(cal_shot_kind_name(CAL_SHOT_CONSECUTIVE), "no cold/warm split"));
    for (int f = 0; f < CAL_FPF__N; f++) assert_string_not_equal(cal_fp_field_name((cal_fp_field)f), "?");
    cal_fingerprint a;
    base(&a);
    char d[512];
    cal_fp_describe(&a, d, sizeof d);
    assert_non_null(strstr(d, "warm shots 2–6"));
    assert_non_null(strstr(d, "c1"));
    assert_non_null(strstr(d, "512 tok prose"));
    assert_non_null(strstr(d, "caliper 0.1.0"));
    /* unknowns print as unknown, not as zero */
    cal_fp_init(&a);
    char v[64];
    assert_string_equal(cal_fp_field_value(&a, CAL_FPF_REST, v, sizeof v), "unknown");
    assert_string_equal(cal_fp_field_value(&a, CAL_FPF_WARMUP, v, sizeof v), "unknown");
    assert_string_equal(cal_fp_field_value(&a, CAL_FPF_STREAMING, v, sizeof v), "unknown");
}

/* A stored run of three shots at c4 (shot 1 cold, 2-3 warm), its protocol
 * and target given as stored text and read by the loader's function. */
static void stored_run(cal_run_data *d, cal_cell cells[3], const char *proto, const char *target)
{
    memset(d, 0, sizeof *d);
    memset(cells, 0, 3 * sizeof *cells);
    for (int i = 0; i < 3; i++) {
        cells[i].shot_index = i + 1;
        cells[i].shot_kind = i ? CAL_SHOT_WARM : CAL_SHOT_COLD;
        cells[i].concurrency = 4;
        cells[i].prompt_tokens = 256;
        snprintf(cells[i].content, sizeof cells[i].content, "prose");
        cells[i].unique_prompts = 1;
        cells[i].max_tokens = 64;
        cells[i].output_fixed = 1;
    }
    d->cells = cells;
    d->n_cells = 3;
    d->run.build = (char *)"caliper 0.1.0 (commit abc, -O2)";
    d->run.host_json = (char *)"{\"cpu\":\"Test CPU\",\"cores\":2}";
    d->run.protocol_json = (char *)proto;
    d->run.target_json = (char *)target;
    assert_int_equal(cal_run_data_read_protocol(d), CAL_OK);
}

static void test_of_stored_run(void **state)
{
    (void)state;
    cal_run_data d;
    cal_cell cells[3];
    stored_run(&d, cells, "{\"warmup\":1,\"slo\":\"ttft=500ms\"}", "{\"kind\":\"url\",\"api\":\"chat\"}");
    size_t warm[] = {1, 2};
    cal_fingerprint fp;
    assert_int_equal(cal_fingerprint_of(&d, warm, 2, CAL_SHOT_WARM, &fp), CAL_OK);
    assert_int_equal(fp.shot_kind, CAL_SHOT_WARM);
    assert_int_equal(fp.shot_first, 2);
    assert_int_equal(fp.shot_last, 3);
    assert_true(fp.rest_s == 0);
    assert_int_equal(fp.warmup, 1);
    assert_int_equal(fp.concurrency, 4);
    assert_int_equal(fp.prompt_tokens, 256);
    assert_string_equal(fp.content, "prose");
    assert_string_equal(fp.output_policy, "fixed 64");
    assert_string_equal(fp.api, "chat");
    assert_string_equal(fp.probe, "caliper 0.1.0");
    assert_string_equal(fp.host, "Test CPU (2 cores)");
    assert_string_equal(fp.slo, "ttft=500ms");
    /* mixed rests have no single rest; a group past the cells is refused */
    cells[2].rest_before_ns = 1000000000;
    assert_int_equal(cal_fingerprint_of(&d, warm, 2, CAL_SHOT_WARM, &fp), CAL_OK);
    assert_true(isnan(fp.rest_s));
    size_t past[] = {3};
    assert_int_equal(cal_fingerprint_of(&d, past, 1, CAL_SHOT_WARM, &fp), CAL_EINVAL);
    assert_int_equal(cal_fingerprint_of(&d, warm, 0, CAL_SHOT_WARM, &fp), CAL_EINVAL);
    cal_protocol_clear(&d.proto);

    /* a dataset is the content; no stored API reads as completions; a
     * protocol without a warm-up count had none */
    stored_run(&d, cells, "{\"dataset\":{\"name\":\"d\",\"id\":\"d@12ab\"}}", "{\"kind\":\"url\"}");
    cal_fingerprint other;
    assert_int_equal(cal_fingerprint_of(&d, warm, 2, CAL_SHOT_WARM, &other), CAL_OK);
    assert_string_equal(other.content, "dataset:d@12ab");
    assert_string_equal(other.api, "completions");
    assert_int_equal(other.warmup, 0);
    cal_fp_difference diff[CAL_FPF__N];
    size_t nd = cal_fp_diff(&fp, &other, diff, CAL_FPF__N);
    /* among the fields that differ, content and API are named with both
     * values */
    int seen_content = 0, seen_api = 0;
    for (size_t i = 0; i < nd; i++) {
        if (diff[i].field == CAL_FPF_CONTENT) {
            seen_content = 1;
            assert_string_equal(diff[i].a, "prose");
            assert_string_equal(diff[i].b, "dataset:d@12ab");
        }
        if (diff[i].field == CAL_FPF_API) {
            seen_api = 1;
            assert_string_equal(diff[i].a, "chat");
            assert_string_equal(diff[i].b, "completions");
        }
    }
    assert_true(seen_content && seen_api);
    cal_protocol_clear(&d.proto);
    /* no stored protocol at all: the warm-up count is unknown */
    stored_run(&d, cells, NULL, NULL);
    assert_int_equal(cal_fingerprint_of(&d, warm, 2, CAL_SHOT_WARM, &other), CAL_OK);
    assert_int_equal(other.warmup, -1);
    cal_protocol_clear(&d.proto);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_each_field),
        cmocka_unit_test(test_several_and_text),
        cmocka_unit_test(test_names_parse_describe),
        cmocka_unit_test(test_of_stored_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
