/* Unit tests: the Prometheus text parser on captured expositions of vLLM,
 * SGLang, llama.cpp and TGI (tests/data/metrics), label escapes, NaN/±Inf,
 * timestamps, histogram families, malformed lines rejected with their line
 * number; the operating-point histogram and the memory-slope verdict. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/prom.h"
#include "caliper/watch.h"

#define DATA_DIR "tests/data/metrics"
#define NEAR(got, want, tol) assert_true(fabs((got) - (want)) <= (tol))

static char *slurp(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void check_load(const char *file, const char *running, double r, size_t series,
                       const char *waiting, double w)
{
    size_t len, bad = 99;
    char why[256];
    char *t = slurp(file, &len);
    cal_prom_load ld;
    assert_int_equal(cal_prom_find_load(t, len, NULL, &ld, &bad, why, sizeof why), CAL_OK);
    assert_int_equal(bad, 0);
    assert_true(ld.has_running);
    assert_string_equal(ld.running_name, running);
    NEAR(ld.running, r, 1e-12);
    assert_int_equal(ld.running_series, series);
    assert_true(ld.has_waiting);
    assert_string_equal(ld.waiting_name, waiting);
    NEAR(ld.waiting, w, 1e-12);
    free(t);
}

static void test_each_engine_gauge(void **state)
{
    (void)state;
    check_load("vllm.prom", "vllm:num_requests_running", 3, 1, "vllm:num_requests_waiting", 1);
    /* two tensor-parallel ranks: summed over label sets */
    check_load("sglang.prom", "sglang:num_running_reqs", 7, 2, "sglang:num_queue_reqs", 4);
    check_load("llamacpp.prom", "llamacpp:requests_processing", 1, 1, "llamacpp:requests_deferred", 0);
    check_load("tgi.prom", "tgi_batch_current_size", 4, 1, "tgi_queue_size", 2);
}

/* A count of requests that is NaN, infinite or negative is no reading:
 * captured scrapes with such a gauge give NAN, never 0 ("idle"). */
static void test_invalid_running_gauge(void **state)
{
    (void)state;
    static const struct { const char *file; size_t series, invalid; } cases[] = {
        {"vllm_running_nan.prom", 1, 1},
        {"vllm_running_negative.prom", 1, 1},
        {"sglang_running_negative.prom", 2, 1},   /* one rank of two */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len, bad = 99;
        char why[256];
        char *t = slurp(cases[i].file, &len);
        cal_prom_load ld;
        assert_int_equal(cal_prom_find_load(t, len, NULL, &ld, &bad, why, sizeof why), CAL_OK);
        assert_true(ld.has_running);
        assert_true(isnan(ld.running));
        assert_int_equal(ld.running_series, cases[i].series);
        assert_int_equal(ld.running_invalid, cases[i].invalid);
        assert_false(isnan(ld.waiting));           /* the waiting gauge is fine */
        assert_int_equal(ld.waiting_invalid, 0);
        /* the operating point refuses it and keeps what it had */
        cal_oppoint op;
        assert_int_equal(cal_op_init(&op), CAL_OK);
        assert_int_equal(cal_op_add(&op, 0, 2, 0), CAL_OK);
        assert_int_equal(cal_op_add(&op, 1000000000LL, ld.running, ld.waiting), CAL_EINVAL);
        assert_int_equal(op.n, 1);
        cal_op_close(&op, 2000000000LL);
        cal_op_summary sum;
        assert_int_equal(cal_op_summarize(&op, &sum), CAL_OK);
        NEAR(sum.share[0], 0, 1e-12);              /* not "100 % idle", not 50 % */
        NEAR(sum.mean, 2, 1e-12);
        cal_op_free(&op);
        free(t);
    }
    /* the sound file alongside still reads as before */
    check_load("vllm.prom", "vllm:num_requests_running", 3, 1, "vllm:num_requests_waiting", 1);
    /* cal_op_add on its own: every non-count is refused, waiting that is
     * not a count is unknown rather than 0 */
    cal_oppoint op;
    assert_int_equal(cal_op_init(&op), CAL_OK);
    assert_int_equal(cal_op_add(&op, 0, -1, 0), CAL_EINVAL);
    assert_int_equal(cal_op_add(&op, 0, -0.4, 0), CAL_EINVAL);
    assert_int_equal(cal_op_add(&op, 0, INFINITY, 0), CAL_EINVAL);
    assert_int_equal(cal_op_add(&op, 0, -INFINITY, 0), CAL_EINVAL);
    assert_int_equal(cal_op_add(&op, 0, NAN, 0), CAL_EINVAL);
    assert_int_equal(op.n, 0);
    assert_int_equal(cal_op_add(&op, 0, 1, -3), CAL_OK);
    assert_true(isnan(op.last_waiting));
    cal_op_free(&op);
}

static void test_override_and_absent(void **state)
{
    (void)state;
    size_t len, bad;
    char why[256];
    char *t = slurp("vllm.prom", &len);
    cal_prom_load ld;
    assert_int_equal(cal_prom_find_load(t, len, "vllm:gpu_cache_usage_perc", &ld, &bad, why, sizeof why), CAL_OK);
    NEAR(ld.running, 0.0734, 1e-12);
    assert_int_equal(cal_prom_find_load(t, len, "no_such_metric", &ld, &bad, why, sizeof why), CAL_ENOTFOUND);
    assert_non_null(strstr(why, "no_such_metric"));
    free(t);
    const char *none = "# TYPE x gauge\nx 1\n";
    assert_int_equal(cal_prom_find_load(none, strlen(none), NULL, &ld, &bad, why, sizeof why), CAL_ENOTFOUND);
    assert_false(ld.has_running);
    assert_non_null(strstr(why, "vllm:num_requests_running"));
}

/* Finite but absurd readings are no readings: 1e308 or 1e9 + 1 requests
 * running make the gauge NAN (never a clamped "4096+"), a usage fraction above 1 the
 * same; one series listed twice (its labels in another order) refuses the
 * scrape, naming the metric and both lines, rather than summing to 6. */
static void test_implausible_and_duplicate(void **state)
{
    (void)state;
    static const struct { const char *text; double line; } bad[] = {
        {"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1e308\n", 2},
        {"vllm:num_requests_running{a=\"1\"} 3\nvllm:num_requests_running{a=\"2\"} 1e300\n", 2},
        {"sglang:num_running_reqs 1000000001\n", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t line = 99;
        char why[256];
        cal_prom_load ld;
        assert_int_equal(cal_prom_find_load(bad[i].text, strlen(bad[i].text), NULL, &ld, &line, why,
                                            sizeof why), CAL_OK);
        assert_true(ld.has_running);
        assert_true(isnan(ld.running));
        assert_int_equal(ld.running_invalid, 1);
        assert_int_equal(ld.running_bad_line, (size_t)bad[i].line);
    }
    assert_string_equal(cal_prom_range_text("vllm:num_requests_running"), "a count in [0, 1e9]");
    /* a usage fraction: 0.0734 reads, 1.5 does not */
    const char *kv = "vllm:num_requests_running 1\nvllm:gpu_cache_usage_perc 1.5\n";
    cal_prom_load ld;
    size_t line;
    char why[256];
    assert_int_equal(cal_prom_find_load(kv, strlen(kv), "vllm:gpu_cache_usage_perc", &ld, &line, why,
                                        sizeof why), CAL_OK);
    assert_true(isnan(ld.running));
    assert_string_equal(cal_prom_range_text("vllm:gpu_cache_usage_perc"), "a fraction in [0, 1]");
    /* the same series twice */
    const char *dup = "# TYPE vllm:num_requests_running gauge\n"
                      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
                      "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3\n";
    assert_int_equal(cal_prom_find_load(dup, strlen(dup), NULL, &ld, &line, why, sizeof why), CAL_EPROTO);
    assert_int_equal(line, 3);
    assert_non_null(strstr(why, "line 3: vllm:num_requests_running repeats the label set of line 2"));
    /* two distinct label sets still sum */
    const char *two = "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_running{engine=\"1\"} 4\n";
    assert_int_equal(cal_prom_find_load(two, strlen(two), NULL, &ld, &line, why, sizeof why), CAL_OK);
    NEAR(ld.running, 7, 0);
    /* the captured duplicate scrape is refused the same way */
    size_t len;
    char *t = slurp("vllm_running_duplicate.prom", &len);
    assert_int_equal(cal_prom_find_load(t, len, NULL, &ld, &line, why, sizeof why), CAL_EPROTO);
    assert_non_null(strstr(why, "repeats the label set of line 8"));
    free(t);
}

typedef struct collect {
    size_t n;
    char   names[64][CAL_PROM_NAME_MAX];
    double values[64];
    cal_prom_type types[64];
    int    has_ts[64];
    int64_t ts[64];
    size_t lines[64];
    char   label_dump[64][512];
} collect;

static int collect_cb(void *ud, const cal_prom_sample *s)
{
    collect *c = ud;
    if (c->n == 64) return 1;
    snprintf(c->names[c->n], CAL_PROM_NAME_MAX, "%s", s->name);
    c->values[c->n] = s->value;
    c->types[c->n] = s->type;
    c->has_ts[c->n] = s->has_timestamp;
    c->ts[c->n] = s->timestamp_ms;
    c->lines[c->n] = s->line;
    size_t o = 0;
    c->label_dump[c->n][0] = '\0';
    for (size_t k = 0; k < s->n_labels; k++)
        o += (size_t)snprintf(c->label_dump[c->n] + o, 512 - o, "%s=%s;", s->labels[k].name,
                              s->labels[k].value);
    c->n++;
    return 0;
}

static void test_escapes_special_values(void **state)
{
    (void)state;
    size_t len, bad;
    char why[256];
    char *t = slurp("escapes.prom", &len);
    collect *c = calloc(1, sizeof *c);
    assert_int_equal(cal_prom_parse(t, len, collect_cb, c, &bad, why, sizeof why), CAL_OK);
    assert_int_equal(c->n, 8);
    assert_string_equal(c->names[0], "demo_info");
    assert_int_equal(c->types[0], CAL_PROM_GAUGE);
    assert_string_equal(c->label_dump[0],
                        "path=C:\\models\\llama;quote=say \"hi\";multi=line1\nline2;empty=;");
    assert_string_equal(c->label_dump[1], "trailing=comma;");
    assert_true(c->has_ts[1]);
    assert_int_equal(c->ts[1], 1714000000000LL);
    assert_false(c->has_ts[0]);
    assert_string_equal(c->names[2], "demo_spaced");
    assert_string_equal(c->label_dump[2], "a=x;");
    assert_int_equal(c->lines[2], 6);
    assert_true(isnan(c->values[3]));
    assert_true(isinf(c->values[4]) && c->values[4] > 0);
    assert_true(isinf(c->values[5]) && c->values[5] < 0);
    NEAR(c->values[6], 1.5e-3, 1e-15);
    assert_int_equal(c->ts[6], -17);
    assert_int_equal(c->types[7], CAL_PROM_UNTYPED);
    free(c);
    free(t);
}

static void test_histogram_family(void **state)
{
    (void)state;
    size_t len, bad;
    char why[256];
    char *t = slurp("vllm.prom", &len);
    collect *c = calloc(1, sizeof *c);
    assert_int_equal(cal_prom_parse(t, len, collect_cb, c, &bad, why, sizeof why), CAL_OK);
    size_t buckets = 0, inf = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (!strcmp(c->names[i], "vllm:time_to_first_token_seconds_bucket")) {
            assert_int_equal(c->types[i], CAL_PROM_HISTOGRAM);
            buckets++;
            if (strstr(c->label_dump[i], "le=+Inf;")) { inf++; NEAR(c->values[i], 1203, 0); }
        }
        if (!strcmp(c->names[i], "vllm:time_to_first_token_seconds_sum"))
            assert_int_equal(c->types[i], CAL_PROM_HISTOGRAM);
        if (!strcmp(c->names[i], "vllm:prompt_tokens_total")) {
            assert_int_equal(c->types[i], CAL_PROM_COUNTER);
            NEAR(c->values[i], 1284512, 0);
        }
    }
    assert_int_equal(buckets, 6);
    assert_int_equal(inf, 1);
    free(c);
    free(t);
    /* a summary's quantiles, _sum and _count belong to it */
    t = slurp("tgi.prom", &len);
    c = calloc(1, sizeof *c);
    assert_int_equal(cal_prom_parse(t, len, collect_cb, c, &bad, why, sizeof why), CAL_OK);
    for (size_t i = 0; i < c->n; i++)
        if (!strncmp(c->names[i], "tgi_request_generated_tokens", 28))
            assert_int_equal(c->types[i], CAL_PROM_SUMMARY);
    free(c);
    free(t);
}

static void expect_bad(const char *text, int rc, size_t line, const char *needle)
{
    size_t bad = 0;
    char why[256];
    assert_int_equal(cal_prom_parse(text, strlen(text), NULL, NULL, &bad, why, sizeof why), rc);
    assert_int_equal(bad, line);
    if (needle && !strstr(why, needle)) {
        fprintf(stderr, "why: %s (wanted %s)\n", why, needle);
        fail();
    }
    char pfx[32];
    snprintf(pfx, sizeof pfx, "line %zu:", line);
    assert_int_equal(strncmp(why, pfx, strlen(pfx)), 0);
}

static void test_malformed_rejected(void **state)
{
    (void)state;
    size_t len;
    char *t = slurp("malformed_line3.prom", &len);
    expect_bad(t, CAL_EPROTO, 3, "bad_metric");
    free(t);
    expect_bad("a 1\nb{x=\"1\"} nope\n", CAL_EPROTO, 2, "\"nope\" is not a number");
    expect_bad("a{x=\"\\t\"} 1\n", CAL_EPROTO, 1, "unknown escape");
    expect_bad("a{x=\"1\",x=\"2\"} 1\n", CAL_EPROTO, 1, "given twice");
    expect_bad("a{x=1} 1\n", CAL_EPROTO, 1, "quoted");
    expect_bad("1abc 1\n", CAL_EPROTO, 1, "metric name");
    expect_bad("a\n", CAL_EPROTO, 1, "no value");
    expect_bad("a 1 2 3\n", CAL_EPROTO, 1, "after the timestamp");
    expect_bad("a 1 12.5\n", CAL_EPROTO, 1, "timestamp");
    expect_bad("# TYPE a gaugeish\n", CAL_EPROTO, 1, "gaugeish");
    expect_bad("# TYPE a gauge\n# TYPE a counter\n", CAL_EPROTO, 2, "second TYPE");
    expect_bad("a 0x10\n", CAL_EPROTO, 1, "not a number");
    expect_bad("a 1\n\n\na{b=\"unterminated} 1\n", CAL_EPROTO, 4, "not closed");
    /* caps: a label value over its cap, a line over its cap */
    char *big = malloc(CAL_PROM_VALUE_MAX + 64);
    int o = snprintf(big, 16, "a{x=\"");
    memset(big + o, 'v', CAL_PROM_VALUE_MAX);
    strcpy(big + o + CAL_PROM_VALUE_MAX, "\"} 1\n");
    expect_bad(big, CAL_ETOOBIG, 1, "longer than");
    free(big);
    char *line = malloc(CAL_PROM_LINE_MAX + 16);
    memset(line, '#', CAL_PROM_LINE_MAX + 8);
    line[CAL_PROM_LINE_MAX + 8] = '\0';
    expect_bad(line, CAL_ETOOBIG, 1, "longer than");
    free(line);
    /* NUL inside a line; CRLF tolerated */
    size_t bad;
    assert_int_equal(cal_prom_parse("a 1\0\n", 5, NULL, NULL, &bad, NULL, 0), CAL_EPROTO);
    assert_int_equal(cal_prom_parse("a 1\r\nb 2\r\n", 10, NULL, NULL, &bad, NULL, 0), CAL_OK);
    assert_int_equal(cal_prom_parse("", 0, NULL, NULL, &bad, NULL, 0), CAL_OK);
}

static int stop_cb(void *ud, const cal_prom_sample *s)
{
    (*(int *)ud)++;
    return 42;
}

static void test_callback_stops(void **state)
{
    (void)state;
    int n = 0;
    assert_int_equal(cal_prom_parse("a 1\nb 2\n", 8, stop_cb, &n, NULL, NULL, 0), 42);
    assert_int_equal(n, 1);
}

/* ---- operating point ---------------------------------------------------- */

static void test_oppoint_time_weighted(void **state)
{
    (void)state;
    cal_oppoint op;
    assert_int_equal(cal_op_init(&op), CAL_OK);
    /* 1 s at 0, 6 s at 2, 2 s at 3, 1 s at 12: the 12 is brief and must
     * not move the median */
    int64_t s = 1000000000LL;
    assert_int_equal(cal_op_add(&op, 0, 0, 0), CAL_OK);
    assert_int_equal(cal_op_add(&op, 1 * s, 2, 1), CAL_OK);
    assert_int_equal(cal_op_add(&op, 7 * s, 3, 0), CAL_OK);
    assert_int_equal(cal_op_add(&op, 9 * s, 12, NAN), CAL_OK);
    assert_int_equal(cal_op_add(&op, 8 * s, 1, 0), CAL_EINVAL);   /* time went back */
    cal_op_close(&op, 10 * s);
    cal_op_summary sum;
    assert_int_equal(cal_op_summarize(&op, &sum), CAL_OK);
    NEAR(sum.total_s, 10, 1e-9);
    NEAR(sum.busy_s, 9, 1e-9);
    NEAR(sum.mean, (6 * 2 + 2 * 3 + 12) / 10.0, 1e-9);
    assert_int_equal(sum.p50, 2);
    assert_int_equal(sum.p90, 3);
    assert_int_equal(sum.p99, 12);
    NEAR(sum.running_max, 12, 0);
    assert_int_equal(sum.fractional, 0);
    NEAR(sum.share[0], 0.1, 1e-9);
    NEAR(sum.share[1], 0.0, 1e-9);
    NEAR(sum.share[2], 0.8, 1e-9);
    NEAR(sum.share[3], 0.0, 1e-9);
    NEAR(sum.share[4], 0.1, 1e-9);
    /* 2-3 hold 8 of the 9 busy seconds (89 %): below 90 %, so the band must
     * reach 12 — unless a narrower one exists; it does not */
    assert_int_equal(sum.band_lo, 2);
    assert_int_equal(sum.band_hi, 12);
    assert_true(sum.has_waiting);
    NEAR(sum.waiting_mean, 6.0 / 9.0, 1e-9);   /* waiting known for 9 s */
    NEAR(sum.waiting_share, 6.0 / 9.0, 1e-9);
    char v[512];
    cal_op_verdict(&sum, 64, v, sizeof v);
    assert_non_null(strstr(v, "ceiling of 64"));
    assert_non_null(strstr(v, "concurrency 2-12"));
    cal_op_free(&op);
}

/* What the histogram cannot hold is refused, not bent into it: 1e6 running
 * was clamped into the last bin and the advice read "benchmark at
 * concurrency 4096"; 3.7 (an averaged gauge) was rounded and shown as 4. */
static void test_oppoint_unrepresentable(void **state)
{
    (void)state;
    int64_t s = 1000000000LL;
    cal_oppoint op;
    assert_int_equal(cal_op_init(&op), CAL_OK);
    assert_int_equal(cal_op_add(&op, 0, 2, 0), CAL_OK);
    assert_int_equal(cal_op_add(&op, 1 * s, 1e6, 0), CAL_ERANGE);
    assert_int_equal(cal_op_add(&op, 1 * s, CAL_OP_MAX_RUNNING + 0.5, 0), CAL_ERANGE);
    assert_int_equal(op.n, 1);                       /* nothing changed */
    assert_int_equal(cal_op_add(&op, 2 * s, CAL_OP_MAX_RUNNING, 0), CAL_OK);   /* the last bin holds */
    cal_op_close(&op, 3 * s);
    cal_op_summary sum;
    assert_int_equal(cal_op_summarize(&op, &sum), CAL_OK);
    NEAR(sum.share[0], 0, 1e-12);
    NEAR(sum.running_max, CAL_OP_MAX_RUNNING, 0);
    NEAR(op.w_s[2], 2, 1e-9);                        /* the refused reading held 2 */
    cal_op_free(&op);

    /* 3.7 for 10 s: kept as read (mean and max 3.7), 3 s at 3 and 7 s at 4 */
    assert_int_equal(cal_op_init(&op), CAL_OK);
    assert_int_equal(cal_op_add(&op, 0, 3.7, 1), CAL_OK);
    assert_int_equal(cal_op_add(&op, 10 * s, 3.7, 1), CAL_OK);
    cal_op_close(&op, 10 * s);
    assert_int_equal(cal_op_summarize(&op, &sum), CAL_OK);
    NEAR(sum.mean, 3.7, 1e-12);
    NEAR(sum.running_max, 3.7, 0);
    assert_int_equal(sum.fractional, 2);
    NEAR(sum.first_fraction, 3.7, 0);
    NEAR(op.w_s[3], 3, 1e-9);
    NEAR(op.w_s[4], 7, 1e-9);
    NEAR(op.w_s[3] + op.w_s[4], sum.total_s, 1e-9);
    cal_op_free(&op);
}

static void test_oppoint_band_seed(void **state)
{
    (void)state;
    /* SPEC 1.2: a single user with a few agents runs 1-4 */
    cal_oppoint op;
    assert_int_equal(cal_op_init(&op), CAL_OK);
    static const int run[] = {1, 2, 1, 3, 4, 2, 1, 1, 2, 3, 1, 2, 4, 3, 2, 1, 0, 0, 9, 2};
    int64_t t = 0;
    for (size_t i = 0; i < sizeof run / sizeof run[0]; i++, t += 500000000LL)
        assert_int_equal(cal_op_add(&op, t, run[i], NAN), CAL_OK);
    cal_op_close(&op, t);
    cal_op_summary s;
    assert_int_equal(cal_op_summarize(&op, &s), CAL_OK);
    assert_int_equal(s.band_lo, 1);
    assert_int_equal(s.band_hi, 4);
    NEAR(s.band_share, 17.0 / 18.0, 1e-9);
    assert_false(s.has_waiting);
    char v[512];
    cal_op_verdict(&s, NAN, v, sizeof v);
    assert_non_null(strstr(v, "here 1-4 requests ran 94 % of the busy time"));
    assert_non_null(strstr(v, "benchmark at concurrency 1-4"));
    assert_null(strstr(v, "ceiling"));
    cal_op_free(&op);
    /* nothing covered yet */
    assert_int_equal(cal_op_init(&op), CAL_OK);
    assert_int_equal(cal_op_add(&op, 5, 1, 0), CAL_OK);
    assert_int_equal(cal_op_summarize(&op, &s), CAL_ENOTFOUND);
    assert_int_equal(cal_op_add(&op, 6, NAN, 0), CAL_EINVAL);
    cal_op_free(&op);
}

/* ---- memory slope ------------------------------------------------------- */

static void test_leak_slope(void **state)
{
    (void)state;
    /* 1.2 MB/min = 20 000 B/s with ±5 kB of alternating scatter */
    double t[20], y[20];
    for (int i = 0; i < 20; i++) {
        t[i] = 30.0 * i;
        y[i] = 500e6 + 20000.0 * t[i] + (i % 2 ? 5000 : -5000);
    }
    cal_leak l;
    assert_int_equal(cal_leak_judge(t, y, 20, 1e6, 0.95, &l), CAL_OK);
    NEAR(l.slope_bps, 20000, 50);
    assert_false(l.flat);
    NEAR(l.resolution_b, 1e6, 0);
    /* resolution ÷ (slope + half): 1 MB at ~20 kB/s = ~50 s */
    assert_true(l.min_watch_s > 45 && l.min_watch_s < 50.01);
    assert_true(l.enough);
    char txt[256];
    cal_leak_text(&l, txt, sizeof txt);
    assert_non_null(strstr(txt, "slope +1.2 MB/min"));
    assert_non_null(strstr(txt, "not flat"));

    /* flat readings, three samples a minute apart: SPEC 1.4 says they prove
     * nothing about a slow leak at a 1 GB resolution */
    double t3[3] = {0, 60, 120}, y3[3] = {4e9, 4e9 + 1e3, 4e9 - 1e3};
    assert_int_equal(cal_leak_judge(t3, y3, 3, 1e9, 0.95, &l), CAL_OK);
    assert_true(l.flat);
    assert_false(l.enough);
    assert_true(l.min_watch_s > 120);
    cal_leak_text(&l, txt, sizeof txt);
    assert_non_null(strstr(txt, "not watched long enough"));

    /* auto resolution: at least 1 kB */
    assert_int_equal(cal_leak_judge(t3, y3, 3, 0, 0, &l), CAL_OK);
    assert_true(l.resolution_b >= 1000);
    /* errors */
    assert_int_equal(cal_leak_judge(t3, y3, 2, 0, 0, &l), CAL_EINVAL);
    double td[3] = {0, 0, 1};
    assert_int_equal(cal_leak_judge(td, y3, 3, 0, 0, &l), CAL_ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_engine_gauge),
        cmocka_unit_test(test_override_and_absent),
        cmocka_unit_test(test_invalid_running_gauge),
        cmocka_unit_test(test_implausible_and_duplicate),
        cmocka_unit_test(test_escapes_special_values),
        cmocka_unit_test(test_histogram_family),
        cmocka_unit_test(test_malformed_rejected),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_oppoint_time_weighted),
        cmocka_unit_test(test_oppoint_band_seed),
        cmocka_unit_test(test_oppoint_unrepresentable),
        cmocka_unit_test(test_leak_slope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
