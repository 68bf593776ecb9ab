/* Unit tests: the protocol record's one serializer — a fully populated
 * record survives to_json/from_json unchanged; every earlier stored form
 * (the keys as each version of the writers stored them) reads into the
 * right fields; unknown keys come back written; a plan maps to the record
 * run.c stores; two records' first difference is named with both values. */
#include <math.h>
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
#include "caliper/judge.h"
#include "caliper/protocol.h"
#include "caliper/protocol_record.h"
#include "caliper/run.h"

static void full_record(cal_protocol *p)
{
    cal_protocol_init(p);
    cal_protocol_target *t = &p->target;
    snprintf(t->kind, sizeof t->kind, "launch");
    snprintf(t->name, sizeof t->name, "llama-server");
    snprintf(t->url, sizeof t->url, "http://127.0.0.1:8080");
    snprintf(t->command, sizeof t->command, "llama-server -m m.gguf");
    snprintf(t->model, sizeof t->model, "qwen-0.5b");
    snprintf(t->version, sizeof t->version, "b4500");
    snprintf(t->api, sizeof t->api, "chat");
    snprintf(t->side, sizeof t->side, "A");
    snprintf(t->detail, sizeof t->detail, "timestamps on receipt");
    t->load_s = 2.75;
    p->shots = 7;
    p->warmup = 2;
    p->rest_s = 1.5;
    p->cold = 1;
    p->noise_floor = 0.04;
    p->equivalence = 0.08;
    p->concurrency[0] = 1; p->concurrency[1] = 8; p->n_conc = 2;
    p->rate = 3.5;
    snprintf(p->arrivals, sizeof p->arrivals, "ramp:1..6/30s");
    p->sweep.present = 1;
    snprintf(p->sweep.kind, sizeof p->sweep.kind, "saturation");
    p->sweep.start_rate = 3.5;
    p->sweep.max_rate = 40;
    p->sweep.steps = 6;
    p->sweep.gain = 0.05;
    snprintf(p->sweep.rule, sizeof p->sweep.rule, "rates rise geometrically");
    p->requests = 64;
    p->duration_s = 12.5;
    snprintf(p->slo, sizeof p->slo, "ttft=500ms,tpot=50ms");
    p->prompt_tokens[0] = 128; p->prompt_tokens[1] = 2048; p->n_prompt = 2;
    snprintf(p->content, sizeof p->content, "code");
    p->unique_prompts = 0;
    p->max_tokens = 96;
    snprintf(p->output_policy, sizeof p->output_policy, "at most");
    p->streaming = 1;
    p->has_seed = 1;
    p->seed = 0x123456789abcULL;
    p->ab = 1;
    snprintf(p->keep_chunks, sizeof p->keep_chunks, "4096");
    p->dataset.present = 1;
    snprintf(p->dataset.name, sizeof p->dataset.name, "sharegpt.json");
    snprintf(p->dataset.format, sizeof p->dataset.format, "sharegpt");
    snprintf(p->dataset.sha256, sizeof p->dataset.sha256, "%064d", 7);
    snprintf(p->dataset.id, sizeof p->dataset.id, "sharegpt.json@0000000");
    p->dataset.entries = 1000;
    p->dataset.skipped = 3;
    snprintf(p->prompt_len, sizeof p->prompt_len, "uniform:100..300");
    snprintf(p->output_len, sizeof p->output_len, "normal:64,8");
    p->scenario_json = strdup("{\"scenario\":\"chat\",\"users\":4,\"turn_plan\":[]}");
    p->recorder = 1;
    snprintf(p->api, sizeof p->api, "chat");
    p->body_json = strdup("{\"temperature\":0}");
    p->noise.present = 1;
    snprintf(p->noise.series, sizeof p->noise.series, "built-in|tiny|c1|p256");
    p->noise.runs = 9;
    p->noise.shot_sd = 0.021;
    p->noise.shot_df = 27;
    p->noise.first_sd = 0.05;
    p->noise.first_df = 8;
    p->noise.first_left_out = 1;
    snprintf(p->order, sizeof p->order, "each shot runs every cell in turn");
    snprintf(p->goodput_rule, sizeof p->goodput_rule, "goodput = ok and within bounds");
    snprintf(p->percentile_source, sizeof p->percentile_source, "every request's record");
    snprintf(p->duration_rule, sizeof p->duration_rule, "until its duration is up");
    snprintf(p->sampling, sizeof p->sampling, "seeded draw");
    p->extra_json = strdup("{\"connect_timeout_s\":5.0,\"loops\":3}");
    p->target_extra_json = strdup("{\"ab\":[{\"kind\":\"url\"},{\"kind\":\"url\"}]}");
}

/* Two records equal in every field: the blobs by text, the rest by bytes
 * (both were built on zeroed memory, string tails included). */
static void assert_same(const cal_protocol *a, const cal_protocol *b)
{
    const char *const *ba[] = {(const char *const *)&a->scenario_json, (const char *const *)&a->body_json,
                               (const char *const *)&a->extra_json, (const char *const *)&a->target_extra_json};
    const char *const *bb[] = {(const char *const *)&b->scenario_json, (const char *const *)&b->body_json,
                               (const char *const *)&b->extra_json, (const char *const *)&b->target_extra_json};
    for (int i = 0; i < 4; i++) {
        if (!*ba[i] || !*bb[i]) { assert_ptr_equal(*ba[i], *bb[i]); continue; }
        json_t *x = json_loads(*ba[i], JSON_DECODE_ANY, NULL), *y = json_loads(*bb[i], JSON_DECODE_ANY, NULL);
        assert_true(json_equal(x, y));
        json_decref(x);
        json_decref(y);
    }
    cal_protocol x = *a, y = *b;
    x.scenario_json = x.body_json = x.extra_json = x.target_extra_json = NULL;
    y.scenario_json = y.body_json = y.extra_json = y.target_extra_json = NULL;
    assert_memory_equal(&x, &y, sizeof x);
}

static void test_round_trip(void **state)
{
    (void)state;
    cal_protocol p, q;
    full_record(&p);
    char *pj = NULL, *tj = NULL;
    assert_int_equal(cal_protocol_to_json(&p, &pj, &tj), CAL_OK);
    assert_non_null(pj);
    assert_non_null(tj);
    /* today's key names, the ones exports, reports and scripts read */
    assert_non_null(strstr(pj, "\"max_tokens\":96"));
    assert_non_null(strstr(pj, "\"output_policy\":\"at most\""));
    assert_non_null(strstr(pj, "\"noise_prior\":{\"series\":"));
    assert_non_null(strstr(pj, "\"loops\":3"));
    assert_non_null(strstr(tj, "\"url\":\"http://127.0.0.1:8080\""));
    assert_int_equal(cal_protocol_from_json(pj, tj, &q), CAL_OK);
    assert_same(&p, &q);
    /* and once more: the text is stable */
    char *pj2 = NULL, *tj2 = NULL;
    assert_int_equal(cal_protocol_to_json(&q, &pj2, &tj2), CAL_OK);
    assert_string_equal(pj, pj2);
    assert_string_equal(tj, tj2);
    /* a deep copy is equal and owns its blobs */
    cal_protocol c;
    assert_int_equal(cal_protocol_copy(&c, &p), CAL_OK);
    assert_ptr_not_equal(c.extra_json, p.extra_json);
    assert_same(&p, &c);
    cal_protocol_clear(&c);
    free(pj); free(tj); free(pj2); free(tj2);
    cal_protocol_clear(&p);
    cal_protocol_clear(&q);
    /* an unknown record writes no key that would claim a value */
    cal_protocol_init(&p);
    assert_int_equal(cal_protocol_to_json(&p, &pj, &tj), CAL_OK);
    assert_string_equal(pj, "{}");
    assert_string_equal(tj, "{}");
    free(pj); free(tj);
}

/* The protocol as the first writer stored it (src/cmd_run.c before the
 * library owned the run): no noise_floor, no request timeout. */
static const char FORM_FIRST[] =
    "{\"shots\":3,\"warmup\":1,\"rest_s\":0.0,\"cold\":false,\"concurrency\":[1,4],\"rate\":null,"
    "\"requests\":null,\"duration_s\":null,\"prompt_tokens\":[256],\"content\":\"prose\","
    "\"unique_prompts\":true,\"max_tokens\":64,\"output_policy\":\"fixed\",\"streaming\":true,"
    "\"api\":\"completions\",\"body\":null,\"connect_timeout_s\":10.0,\"idle_timeout_s\":30.0,"
    "\"seed\":42,\"ab\":false,\"order\":\"each shot runs every prompt length x concurrency cell in turn\"}";

static void test_form_first(void **state)
{
    (void)state;
    cal_protocol p;
    assert_int_equal(cal_protocol_from_json(FORM_FIRST, NULL, &p), CAL_OK);
    assert_int_equal(p.shots, 3);
    assert_int_equal(p.warmup, 1);
    assert_true(p.rest_s == 0);
    assert_int_equal(p.cold, 0);
    assert_true(p.noise_floor == 0);    /* not stored then: the default applies */
    assert_true(p.equivalence == 0);
    assert_int_equal(p.n_conc, 2);
    assert_int_equal(p.concurrency[1], 4);
    assert_true(p.rate == 0);           /* null: closed loop */
    assert_int_equal(p.requests, 0);
    assert_true(p.duration_s == 0);
    assert_int_equal(p.n_prompt, 1);
    assert_int_equal(p.prompt_tokens[0], 256);
    assert_string_equal(p.content, "prose");
    assert_int_equal(p.unique_prompts, 1);
    assert_int_equal(p.max_tokens, 64);
    assert_string_equal(p.output_policy, "fixed");
    assert_int_equal(p.streaming, 1);
    assert_string_equal(p.api, "completions");
    assert_string_equal(p.body_json, "null");
    assert_int_equal(p.has_seed, 1);
    assert_true(p.seed == 42);
    assert_int_equal(p.ab, 0);
    assert_string_equal(p.keep_chunks, "");     /* added later */
    assert_int_equal(p.noise.present, 0);
    assert_int_equal(p.dataset.present, 0);
    assert_null(p.scenario_json);
    json_t *x = json_loads(p.extra_json, 0, NULL);
    assert_non_null(x);
    assert_int_equal(json_object_size(x), 2);   /* the two timeouts */
    assert_true(json_real_value(json_object_get(x, "idle_timeout_s")) == 30.0);
    json_decref(x);
    cal_protocol_clear(&p);
}

/* The noise prior in the three forms it had: shot spread only; with the
 * first shots' spread; with the count left out of it. */
static void test_form_noise_prior(void **state)
{
    (void)state;
    cal_protocol p;
    assert_int_equal(cal_protocol_from_json(
        "{\"noise_floor\":0.03,\"noise_prior\":{\"series\":\"k|c1\",\"runs\":4,\"shot_sd\":0.02,"
        "\"shot_df\":12.0}}", NULL, &p), CAL_OK);
    assert_true(p.noise_floor == 0.03);
    assert_int_equal(p.noise.present, 1);
    assert_string_equal(p.noise.series, "k|c1");
    assert_int_equal(p.noise.runs, 4);
    assert_true(p.noise.shot_sd == 0.02 && p.noise.shot_df == 12);
    assert_true(isnan(p.noise.first_sd) && p.noise.first_df == 0);
    assert_int_equal(p.noise.first_left_out, 0);
    cal_protocol_clear(&p);

    assert_int_equal(cal_protocol_from_json(
        "{\"noise_prior\":{\"series\":\"k|c1\",\"runs\":4,\"shot_sd\":null,\"shot_df\":0.0,"
        "\"first_sd\":0.06,\"first_df\":3.0}}", NULL, &p), CAL_OK);
    assert_true(isnan(p.noise.shot_sd) && p.noise.shot_df == 0);   /* not pooled */
    assert_true(p.noise.first_sd == 0.06 && p.noise.first_df == 3);
    assert_int_equal(p.noise.first_left_out, 0);
    cal_protocol_clear(&p);

    assert_int_equal(cal_protocol_from_json(
        "{\"noise_prior\":{\"series\":\"k|c1\",\"runs\":4,\"shot_sd\":0.01,\"shot_df\":9.0,"
        "\"first_sd\":0.06,\"first_df\":3.0,\"first_left_out\":2}}", NULL, &p), CAL_OK);
    assert_int_equal(p.noise.first_left_out, 2);
    assert_null(p.extra_json);
    cal_protocol_clear(&p);

    /* a negative spread is no prior */
    assert_int_equal(cal_protocol_from_json(
        "{\"noise_prior\":{\"series\":\"k\",\"shot_sd\":-1,\"shot_df\":9}}", NULL, &p), CAL_OK);
    assert_true(isnan(p.noise.shot_sd) && p.noise.shot_df == 0);
    cal_protocol_clear(&p);
}

/* The forms of the traffic workloads, bounded memory, load shapes and the
 * equivalence bound, each as first stored. */
static void test_form_later_keys(void **state)
{
    (void)state;
    cal_protocol p;
    assert_int_equal(cal_protocol_from_json(
        "{\"shots\":5,\"dataset\":{\"name\":\"d.jsonl\",\"format\":\"jsonl\",\"sha256\":\"ab12\","
        "\"id\":\"d.jsonl@ab12\",\"entries\":10,\"skipped\":1},\"sampling\":\"seeded draw\","
        "\"prompt_len\":\"uniform:10..20\",\"output_len\":\"normal:32,4\","
        "\"scenario\":{\"scenario\":\"chat\",\"users\":2}}", NULL, &p), CAL_OK);
    assert_int_equal(p.dataset.present, 1);
    assert_string_equal(p.dataset.id, "d.jsonl@ab12");
    assert_string_equal(p.dataset.sha256, "ab12");
    assert_int_equal(p.dataset.entries, 10);
    assert_int_equal(p.dataset.skipped, 1);
    assert_string_equal(p.prompt_len, "uniform:10..20");
    assert_string_equal(p.output_len, "normal:32,4");
    assert_string_equal(p.scenario_json, "{\"scenario\":\"chat\",\"users\":2}");
    assert_true(isnan(p.rest_s));   /* not in this record: unknown */
    cal_protocol_clear(&p);

    assert_int_equal(cal_protocol_from_json(
        "{\"keep_chunks\":\"none\",\"percentile_source\":\"raw\",\"rate\":2.5,"
        "\"arrivals\":\"poisson\",\"slo\":\"ttft=1s\",\"goodput_rule\":\"g\","
        "\"sweep\":{\"kind\":\"saturation\",\"start_rate\":2.5,\"max_rate\":20.0,\"steps\":8,"
        "\"gain\":0.05,\"rule\":\"r\"},\"equivalence\":0.1}", NULL, &p), CAL_OK);
    assert_string_equal(p.keep_chunks, "none");
    assert_true(p.rate == 2.5);
    assert_string_equal(p.arrivals, "poisson");
    assert_string_equal(p.slo, "ttft=1s");
    assert_int_equal(p.sweep.present, 1);
    assert_true(p.sweep.max_rate == 20 && p.sweep.steps == 8);
    assert_true(p.equivalence == 0.1);
    cal_protocol_clear(&p);

    /* the recorder's own form, and a merged run's fleet kept as extra */
    assert_int_equal(cal_protocol_from_json(
        "{\"recorder\":true,\"noise_floor\":0.03,\"concurrency\":[1],\"prompt_tokens\":[-1],"
        "\"content\":\"\",\"api\":\"recorder\",\"shards\":3,\"fleet\":[{\"shard\":0}]}", NULL, &p), CAL_OK);
    assert_int_equal(p.recorder, 1);
    assert_int_equal(p.prompt_tokens[0], -1);
    assert_string_equal(p.api, "recorder");
    assert_int_equal(p.shots, -1);
    char *pj;
    assert_int_equal(cal_protocol_to_json(&p, &pj, NULL), CAL_OK);
    assert_non_null(strstr(pj, "\"shards\":3"));
    assert_non_null(strstr(pj, "\"fleet\":[{\"shard\":0}]"));
    assert_non_null(strstr(pj, "\"content\":\"\""));
    free(pj);
    cal_protocol_clear(&p);

    /* a key of the wrong type is unknown, not a crash or a zero, and the
     * record says it is damaged, naming the first */
    assert_int_equal(cal_protocol_from_json("{\"max_tokens\":\"64\",\"concurrency\":5}", NULL, &p), CAL_OK);
    assert_int_equal(p.max_tokens, -1);
    assert_int_equal(p.n_conc, 0);
    assert_int_equal(p.n_damaged, 2);
    assert_string_equal(p.damaged_field, "protocol.concurrency");
    cal_protocol_clear(&p);
    assert_int_equal(cal_protocol_from_json("[1]", NULL, &p), CAL_EINVAL);
    assert_int_equal(p.n_damaged, 1);
    assert_string_equal(p.damaged_field, "protocol");
    assert_int_equal(cal_protocol_from_json("{", NULL, &p), CAL_EINVAL);
    assert_string_equal(p.damaged, "protocol: \"{\" is not a JSON object");
}

/* The damage the stored forms never held (issue: each was dropped in
 * silence): every one is named with its value and what was expected, the
 * rest of the record still reads, and every form a writer made reads with
 * no damage. */
static void test_damage_named(void **state)
{
    (void)state;
    static const struct { const char *json, *field, *text; } CASES[] = {
        {"{\"shots\":\"five\",\"warmup\":1}", "protocol.shots",
         "protocol.shots: \"five\" is not an integer in [0, 1000000000]"},
        {"{\"max_tokens\":-4,\"warmup\":1}", "protocol.max_tokens",
         "protocol.max_tokens: -4 is not an integer in [0, 1000000000]"},
        {"{\"concurrency\":[2147483648],\"warmup\":1}", "protocol.concurrency[0]",
         "protocol.concurrency[0]: 2147483648 is not an integer in [0, 2147483647]"},
        {"{\"seed\":18446744073709551616,\"warmup\":1}", "protocol.seed",
         "protocol.seed: 18446744073709551616 (too large to read) is not an integer in [0, 2^64)"},
        {"{\"rest_s\":1e999,\"warmup\":1}", "protocol.rest_s",
         "protocol.rest_s: 1e999 (too large to read) is not a number >= 0"},
        {"{\"rest_s\":-2,\"warmup\":1}", "protocol.rest_s", "protocol.rest_s: -2 is not a number >= 0"},
        {"{\"streaming\":1,\"warmup\":1}", "protocol.streaming",
         "protocol.streaming: 1 is not true or false"},
        {"{\"sweep\":[1],\"warmup\":1}", "protocol.sweep", "protocol.sweep: [1] is not an object"},
        {"{\"dataset\":{\"entries\":-7},\"warmup\":1}", "protocol.dataset.entries",
         "protocol.dataset.entries: -7 is not an integer in [0, 9223372036854775807]"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        cal_protocol p;
        assert_int_equal(cal_protocol_from_json(CASES[i].json, NULL, &p), CAL_OK);
        assert_int_equal(p.n_damaged, 1);
        assert_string_equal(p.damaged_field, CASES[i].field);
        assert_string_equal(p.damaged, CASES[i].text);
        assert_int_equal(p.warmup, 1);   /* the rest of the record reads */
        cal_protocol_clear(&p);
    }
    /* a big seed the writer wrote (2^64 - 1, stored as -1) is no damage */
    cal_protocol p;
    cal_protocol_init(&p);
    p.shots = 3;
    p.has_seed = 1;
    p.seed = UINT64_MAX;
    char *pj;
    assert_int_equal(cal_protocol_to_json(&p, &pj, NULL), CAL_OK);
    cal_protocol q;
    assert_int_equal(cal_protocol_from_json(pj, NULL, &q), CAL_OK);
    assert_int_equal(q.n_damaged, 0);
    assert_true(q.seed == UINT64_MAX);
    free(pj);
    cal_protocol_clear(&q);
    /* bytes that are not UTF-8 are named as such, not shown */
    assert_int_equal(cal_protocol_from_json("{\"shots\":\xff}", NULL, &q), CAL_EINVAL);
    assert_string_equal(q.damaged, "protocol: text that is not UTF-8 is not a JSON object");
    cal_protocol_clear(&q);
    /* a target that is not JSON: the protocol still reads */
    assert_int_equal(cal_protocol_from_json("{\"shots\":2}", "nope", &q), CAL_EINVAL);
    assert_int_equal(q.shots, 2);
    assert_string_equal(q.damaged_field, "target");
    /* a damaged record agrees with no other, itself included */
    cal_protocol_diff d;
    assert_int_equal(cal_protocol_first_diff(&q, &q, 0, &d), 1);
    assert_string_equal(d.field, "target");
    cal_protocol_clear(&q);
}

static void test_form_targets(void **state)
{
    (void)state;
    cal_protocol p;
    /* the built-in and in-process forms store null for what they lack */
    assert_int_equal(cal_protocol_from_json(NULL,
        "{\"kind\":\"inproc\",\"name\":\"eng\",\"model\":null,\"version\":null,\"url\":null,"
        "\"command\":null,\"load_s\":null,\"api\":\"inproc\",\"detail\":\"in-process\"}", &p), CAL_OK);
    assert_string_equal(p.target.kind, "inproc");
    assert_string_equal(p.target.name, "eng");
    assert_string_equal(p.target.url, "");
    assert_true(isnan(p.target.load_s));
    assert_string_equal(p.target.api, "inproc");
    assert_string_equal(p.target.detail, "in-process");
    assert_null(p.target_extra_json);
    assert_int_equal(p.shots, -1);
    cal_protocol_clear(&p);
    /* an A/B target: the first side's fields, the array kept */
    assert_int_equal(cal_protocol_from_json(NULL,
        "{\"kind\":\"url\",\"url\":\"http://a\",\"model\":\"m\",\"version\":\"v1\",\"load_s\":1.5,"
        "\"side\":\"A\",\"ab\":[{\"kind\":\"url\",\"url\":\"http://a\"},{\"kind\":\"url\",\"url\":\"http://b\"}]}",
        &p), CAL_OK);
    assert_string_equal(p.target.url, "http://a");
    assert_string_equal(p.target.version, "v1");
    assert_true(p.target.load_s == 1.5);
    assert_string_equal(p.target.side, "A");
    assert_non_null(strstr(p.target_extra_json, "http://b"));
    cal_protocol_clear(&p);
}

static void test_from_plan(void **state)
{
    (void)state;
    cal_run_plan plan;
    cal_run_plan_default(&plan);
    plan.seed = 9;
    plan.protocol_extra_json = "{\"api\":\"chat\",\"body\":{\"top_k\":1},\"idle_timeout_s\":30.0,"
                               "\"max_tokens\":12}";
    cal_protocol p;
    assert_int_equal(cal_protocol_from_plan(&plan, 1, NULL, &p), CAL_OK);
    assert_int_equal(p.shots, CAL_RUN_DEFAULT_SHOTS);
    assert_int_equal(p.warmup, CAL_RUN_DEFAULT_WARMUP);
    assert_true(p.noise_floor == CAL_SHOT_NOISE_FLOOR);
    assert_true(p.equivalence == CAL_JUDGE_EQUIV);
    assert_int_equal(p.n_conc, 1);
    assert_int_equal(p.concurrency[0], 1);
    assert_int_equal(p.prompt_tokens[0], 256);
    assert_string_equal(p.content, "prose");
    assert_string_equal(p.output_policy, "fixed");
    assert_true(p.rate == 0);
    assert_int_equal(p.ab, 0);
    assert_true(p.has_seed && p.seed == 9);
    assert_string_equal(p.api, "chat");
    assert_string_equal(p.body_json, "{\"top_k\":1}");
    assert_int_equal(p.max_tokens, 12);   /* the caller's keys win, as stored */
    assert_non_null(strstr(p.extra_json, "idle_timeout_s"));
    cal_protocol_clear(&p);
}

static void test_first_diff(void **state)
{
    (void)state;
    cal_protocol a, b;
    full_record(&a);
    assert_int_equal(cal_protocol_copy(&b, &a), CAL_OK);
    cal_protocol_diff d;
    assert_int_equal(cal_protocol_first_diff(&a, &b, 0, &d), 0);
    b.seed = 77;
    b.noise.shot_sd = 0.5;
    b.target.load_s = 9;
    assert_int_equal(cal_protocol_first_diff(&a, &b, CAL_PROTOCOL_SAME_RUN, &d), 0);
    assert_int_equal(cal_protocol_first_diff(&a, &b, 0, &d), 1);
    assert_string_equal(d.field, "target.load_s");
    b.max_tokens = 12;
    assert_int_equal(cal_protocol_first_diff(&a, &b, CAL_PROTOCOL_SAME_RUN, &d), 1);
    assert_string_equal(d.field, "protocol.max_tokens");
    assert_string_equal(d.a, "96");
    assert_string_equal(d.b, "12");
    snprintf(b.target.model, sizeof b.target.model, "other");
    assert_int_equal(cal_protocol_first_diff(&a, &b, CAL_PROTOCOL_SAME_RUN, &d), 1);
    assert_string_equal(d.field, "target.model");
    assert_string_equal(d.a, "\"qwen-0.5b\"");
    assert_string_equal(d.b, "\"other\"");
    cal_protocol_clear(&b);
    assert_int_equal(cal_protocol_copy(&b, &a), CAL_OK);
    free(b.extra_json);
    b.extra_json = strdup("{\"connect_timeout_s\":5.0,\"loops\":4}");
    assert_int_equal(cal_protocol_first_diff(&a, &b, CAL_PROTOCOL_SAME_RUN, &d), 1);
    assert_string_equal(d.field, "protocol.loops");
    cal_protocol_clear(&a);
    cal_protocol_clear(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_form_first),
        cmocka_unit_test(test_form_noise_prior),
        cmocka_unit_test(test_form_later_keys),
        cmocka_unit_test(test_damage_named),
        cmocka_unit_test(test_form_targets),
        cmocka_unit_test(test_from_plan),
        cmocka_unit_test(test_first_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
