/* Unit tests: the report writers (HTML structure: every chart, caption and
 * the verdicts first, nothing external; Markdown; CSV; JSON round trip), the
 * prefill fit and verdicts, and the vLLM import on a file in vLLM's format.
 * Set CALIPER_REPORT_DEMO=path.html to keep the demo page for a look. */
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
#include "caliper/report.h"
#include "caliper/store.h"
#include "report_demo.h"

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static char *render(const cal_result *const *rs, size_t n, cal_report_format f)
{
    cal_buf b = CAL_BUF_INIT(0);
    assert_int_equal(cal_report_write(rs, n, f, &b), CAL_OK);
    assert_non_null(b.data);
    return b.data;
}

static void test_html_structure(void **state)
{
    (void)state;
    cal_result *r = demo_result("demo", 1.0, 1);
    const cal_result *rs[1] = {r};
    char *h = render(rs, 1, CAL_REPORT_HTML);
    const char *keep = getenv("CALIPER_REPORT_DEMO");
    if (keep) { FILE *f = fopen(keep, "w"); if (f) { fputs(h, f); fclose(f); } }
    assert_non_null(strstr(h, "<!DOCTYPE html>"));
    assert_int_equal(count(h, "<svg "), 5);
    assert_int_equal(count(h, "</svg>"), 5);
    assert_int_equal(count(h, "<figure "), 5);
    assert_int_equal(count(h, "<figcaption>"), 5);
    assert_int_equal(count(h, "</b> Protocol: "), 5);
    static const char *const IDS[] = {"chart-shots-0", "chart-concurrency-0", "chart-prefill-0",
                                      "chart-ttft-0", "chart-itl-0"};
    for (int i = 0; i < 5; i++) assert_non_null(strstr(h, IDS[i]));
    /* verdicts come before the first chart */
    assert_true(strstr(h, "id=\"verdicts\"") < strstr(h, "<svg "));
    assert_non_null(strstr(h, "below shot 1"));
    assert_non_null(strstr(h, "read per-request speed at low concurrency"));
    assert_non_null(strstr(h, "prefill: fixed cost"));
    /* self-contained: no script, no URL, no external resource */
    assert_null(strstr(h, "<script"));
    assert_null(strstr(h, "http://"));
    assert_null(strstr(h, "https://"));
    assert_null(strstr(h, " src="));
    assert_null(strstr(h, "<link"));
    /* axes with units and legends */
    assert_non_null(strstr(h, "time since run start (s)"));
    assert_non_null(strstr(h, "clock (MHz)"));
    assert_non_null(strstr(h, "power (W)"));
    assert_non_null(strstr(h, "output (tok/s)"));
    assert_non_null(strstr(h, "aggregate (all tokens"));
    assert_non_null(strstr(h, "per-request (median)"));
    assert_non_null(strstr(h, "fit: "));
    assert_null(strstr(h, "clock: absent"));
    /* every number is finite in the SVG (no nan/inf coordinates) */
    assert_null(strstr(h, "nan"));
    assert_null(strstr(h, "inf "));
    free(h);

    /* without telemetry the page says so instead of drawing nothing */
    cal_result *q = demo_result("no-sensors", 1.0, 0);
    rs[0] = q;
    h = render(rs, 1, CAL_REPORT_HTML);
    assert_non_null(strstr(h, "clock: absent"));
    assert_non_null(strstr(h, "power: absent"));
    assert_int_equal(count(h, "<svg "), 5);
    free(h);
    cal_result_free(&q);
    cal_result_free(&r);
}

/* The same result renders to the same bytes every time in one process (a
 * report is reproducible), and each clip path's id is unique in its page. */
static void test_html_deterministic(void **state)
{
    (void)state;
    cal_result *r = demo_result("demo", 1.0, 1);
    const cal_result *rs[1] = {r};
    char *a = render(rs, 1, CAL_REPORT_HTML);
    char *b = render(rs, 1, CAL_REPORT_HTML);
    assert_string_equal(a, b);
    size_t n = 0;
    for (const char *p = a; (p = strstr(p, "<clipPath id=\"")); p++) {
        char id[64];
        assert_int_equal(sscanf(p, "<clipPath id=\"%63[^\"]\"", id), 1);
        char ref[80];
        snprintf(ref, sizeof ref, "id=\"%s\"", id);
        assert_int_equal(count(a, ref), 1);
        n++;
    }
    assert_true(n >= 5);
    free(a);
    free(b);
    cal_result_free(&r);
}

static void test_html_empty_run(void **state)
{
    (void)state;
    cal_result *r = cal_result_new();
    snprintf(r->label, sizeof r->label, "empty <run> & co");
    const cal_result *rs[1] = {r};
    char *h = render(rs, 1, CAL_REPORT_HTML);
    assert_int_equal(count(h, "<svg "), 5);        /* every chart, saying absent */
    assert_non_null(strstr(h, "absent: this run has no concurrency sweep"));
    assert_non_null(strstr(h, "absent: this run has no prompt-length sweep"));
    assert_non_null(strstr(h, "empty &lt;run&gt; &amp; co"));   /* escaped */
    assert_null(strstr(h, "<run>"));
    free(h);
    cal_result_free(&r);
    assert_int_equal(cal_report_write(rs, 0, CAL_REPORT_HTML, NULL), CAL_EINVAL);
}

static void test_md_csv(void **state)
{
    (void)state;
    cal_result *r = demo_result("demo", 1.0, 1);
    const cal_result *rs[1] = {r};
    char *m = render(rs, 1, CAL_REPORT_MD);
    assert_non_null(strstr(m, "# demo"));
    assert_non_null(strstr(m, "## Verdicts"));
    assert_non_null(strstr(m, "## Concurrency sweep"));
    assert_non_null(strstr(m, "## Prompt-length sweep"));
    assert_non_null(strstr(m, "aggregate tok/s"));
    free(m);
    char *c = render(rs, 1, CAL_REPORT_CSV);
    assert_int_equal(count(c, "\n"), r->n_cells + 1);
    assert_non_null(strstr(c, "output_throughput"));
    assert_non_null(strstr(c, "shot_kind"));
    assert_non_null(strstr(c, "median_ttft_ms"));
    /* the CSV header is the schema's keys, in its order */
    const char *hdr = strstr(c, "duration,completed,failed,");
    assert_non_null(hdr);
    assert_true(hdr < strstr(c, "output_throughput,per_request_output_throughput_median"));
    /* the host has a comma: quoted */
    assert_non_null(strstr(c, "\"AMD EPYC 7B13 (2 cores), 24 GiB\""));
    free(c);
    cal_result_free(&r);
}

/* Labels, target names and a server's error body inside a verdict reach
 * the Markdown report as text: no HTML, no link, no table break. */
static void test_md_escapes(void **state)
{
    (void)state;
    cal_result *r = demo_result("demo", 1.0, 0);
    snprintf(r->label, sizeof r->label, "<img src=x onerror=alert(1)> *bold* [a](http://x) | # ");
    snprintf(r->target_name, sizeof r->target_name, "eng<script>");
    cal_result_add_note(r, "requests: 1 of 4 did not end ok (1 http_error); first error: "
                           "HTTP 500: <img src=x onerror=alert(2)>`code`");
    snprintf(r->cells[2].fp.content, sizeof r->cells[2].fp.content, "pro|se");
    const cal_result *rs[1] = {r};
    char *m = render(rs, 1, CAL_REPORT_MD);
    assert_null(strstr(m, "<img"));
    assert_null(strstr(m, "<script"));
    assert_non_null(strstr(m, "# &lt;img src=x onerror=alert(1)&gt; \\*bold\\* \\[a\\](http://x) \\| \\#"));
    assert_non_null(strstr(m, "- target: eng&lt;script&gt;"));
    assert_non_null(strstr(m, "HTTP 500: &lt;img src=x onerror=alert(2)&gt;\\`code\\`"));
    assert_null(strstr(m, "pro|se"));
    free(m);
    cal_result_free(&r);
}

static void test_json_round_trip(void **state)
{
    (void)state;
    cal_result *r = demo_result("demo", 1.0, 1);
    assert_true(r->n_cells >= 2);
    snprintf(r->cells[1].target, sizeof r->cells[1].target, "B");   /* an --ab arm */
    cal_buf b = CAL_BUF_INIT(0);
    assert_int_equal(cal_result_to_json(r, &b), CAL_OK);
    assert_int_equal(count(b.data, "\"target\": \"B\""), 1);
    cal_result *q = NULL;
    char err[256] = "";
    assert_int_equal(cal_result_from_json(b.data, b.len, "x.json", &q, err, sizeof err), CAL_OK);
    assert_string_equal(q->label, r->label);
    assert_int_equal(q->n_cells, r->n_cells);
    assert_int_equal(q->n_shots, r->n_shots);
    assert_int_equal(q->n_tel, r->n_tel);
    assert_int_equal(q->created_unix, r->created_unix);
    for (size_t i = 0; i < r->n_cells; i++) {
        assert_int_equal(cal_fp_diff(&r->cells[i].fp, &q->cells[i].fp, NULL, 0), 0);
        assert_int_equal(q->cells[i].sweep, r->cells[i].sweep);
        assert_string_equal(q->cells[i].target, r->cells[i].target);
        for (int m = 0; m < CAL_M__N; m++) {
            double x = r->cells[i].v[m], y = q->cells[i].v[m];
            assert_true((isnan(x) && isnan(y)) || fabs(x - y) <= 1e-6 * fabs(x));
        }
        for (int s = 0; s < CAL_S__N; s++) assert_int_equal(q->cells[i].ns[s], r->cells[i].ns[s]);
    }
    for (size_t i = 0; i < r->n_shots; i++)
        for (int m = 0; m < CAL_M__N; m++) {
            double x = r->shots[i].v[m], y = q->shots[i].v[m];
            assert_true((isnan(x) && isnan(y)) || fabs(x - y) <= 1e-6 * fabs(x));
        }
    assert_int_equal(q->n_verdicts, r->n_verdicts);
    cal_result_free(&q);
    /* every number sits under its schema key; none under another name */
    assert_non_null(strstr(b.data, "\"per_request_output_throughput_median\""));
    assert_null(strstr(b.data, "\"median_request_tok_s\""));
    assert_non_null(strstr(b.data, "\"clock_mhz_mean\""));
    /* a file of format 1 (the report's own keys) still reads, under the schema's */
    const char *v1 = "{\"format\":\"caliper-result\",\"format_version\":1,\"verdicts\":[\"v\"],"
                     "\"cells\":[{\"sweep\":\"shots\",\"fingerprint\":{\"shot_kind\":\"warm\"},"
                     "\"completed\":4,\"metrics\":{\"output_throughput\":52.1,\"median_request_tok_s\":44.9,"
                     "\"clock_mhz\":1300}}],\"shots\":[{\"index\":1,\"kind\":\"cold\",\"request_tok_s\":55}]}";
    assert_int_equal(cal_result_from_json(v1, strlen(v1), "old.json", &q, err, sizeof err), CAL_OK);
    assert_true(q->cells[0].v[CAL_M_REQ_TOKS] == 44.9);
    assert_true(q->cells[0].v[CAL_M_AGG_TOKS] == 52.1);
    assert_true(q->cells[0].v[CAL_M_CLOCK_MHZ] == 1300);
    assert_true(q->cells[0].v[CAL_M_COMPLETED] == 4);
    assert_true(q->shots[0].v[CAL_M_REQ_TOKS] == 55);
    assert_int_equal(q->n_verdicts, 1);
    assert_int_equal(q->verdicts[0].kind, CAL_VK_NOTE);
    cal_result_free(&q);
    /* a count out of any integer's range reads as absent, never cast */
    const char *huge = "{\"format\":\"caliper-result\",\"format_version\":2,\"cells\":[{\"sweep\":\"shots\","
                       "\"fingerprint\":{},\"metrics\":{\"completed\":1e300,\"failed\":-3,\"duration\":1e300}}]}";
    assert_int_equal(cal_result_from_json(huge, strlen(huge), "h.json", &q, err, sizeof err), CAL_OK);
    assert_true(isnan(q->cells[0].v[CAL_M_COMPLETED]) && isnan(q->cells[0].v[CAL_M_FAILED]));
    assert_true(q->cells[0].v[CAL_M_DURATION] == 1e300);
    cal_result_free(&q);
    /* a damaged file names what is wrong */
    const char *bad = "{\"format\":\"caliper-result\",\"cells\":[{\"sweep\":\"sideways\",\"fingerprint\":{}}]}";
    assert_int_equal(cal_result_from_json(bad, strlen(bad), NULL, &q, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "sweep"));
    assert_non_null(strstr(err, "sideways"));
    assert_int_equal(cal_result_from_json("[1,2", 4, NULL, &q, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "line"));
    const char *other = "{\"hello\": 1}";
    assert_int_equal(cal_result_from_json(other, strlen(other), "o.json", &q, err, sizeof err), CAL_EPROTO);
    cal_buf_free(&b);
    cal_result_free(&r);
}

static void test_fit_and_verdicts(void **state)
{
    (void)state;
    double x[4] = {128, 512, 1024, 2048}, y[4], a, b, r2;
    for (int i = 0; i < 4; i++) y[i] = 40 + 0.9 * x[i];
    assert_int_equal(cal_report_linfit(x, y, 4, &a, &b, &r2), CAL_OK);
    assert_true(fabs(a - 40) < 1e-9 && fabs(b - 0.9) < 1e-12 && fabs(r2 - 1) < 1e-12);
    assert_int_equal(cal_report_linfit(x, y, 1, &a, &b, &r2), CAL_EINVAL);
    double same[3] = {5, 5, 5};
    assert_int_equal(cal_report_linfit(same, y, 3, &a, &b, &r2), CAL_EINVAL);

    cal_result *r = demo_result("demo", 1.0, 1);
    cal_verdict v[16];
    size_t n = cal_report_verdicts(r, v, 16);
    int drop = 0, column = 0, prefill = 0;
    for (size_t i = 0; i < n; i++) {
        if (strstr(v[i].text, "shots 2–6 run") && strstr(v[i].text, "below shot 1")) {
            drop = 1;   /* as data: a drop of the warm shots, with its band */
            assert_int_equal(v[i].kind, CAL_VK_SHOTS);
            assert_int_equal(v[i].direction, -1);
            assert_true(v[i].lo <= v[i].effect && v[i].effect <= v[i].hi && v[i].lo > 0);
        }
        if (strstr(v[i].text, "per-request speed at low concurrency")) {
            column = 1;
            assert_int_equal(v[i].kind, CAL_VK_COLUMN);
        }
        if (strstr(v[i].text, "prefill: fixed cost")) {
            prefill = 1;
            assert_int_equal(v[i].kind, CAL_VK_PREFILL_FIT);
            double fa = 0, fb = 0;
            const char *p = strstr(v[i].text, "cost ");
            assert_int_equal(sscanf(p, "cost %lf ms + %lf", &fa, &fb), 2);
            /* the line through the fixture's own points, and near the 0.9 ms/token it was built on */
            double px[4], py[4], ea, eb;
            size_t k = 0;
            for (size_t j = 0; j < r->n_cells; j++)
                if (r->cells[j].sweep == CAL_SWEEP_PROMPT) {
                    px[k] = (double)r->cells[j].fp.prompt_tokens;
                    py[k++] = r->cells[j].v[CAL_M_TTFT_P50];
                }
            assert_int_equal(k, 4);
            assert_int_equal(cal_report_linfit(px, py, 4, &ea, &eb, NULL), CAL_OK);
            assert_true(fabs(fa - ea) < 0.06 && fabs(fb - eb) < 0.0006);
            assert_true(fabs(fb - 0.9) < 0.05);
        }
    }
    assert_true(drop && column && prefill);
    cal_result_free(&r);
}

/* A `vllm bench serve --save-result --save-detailed` file, in vLLM's field
 * names and units (seconds for ttfts/itls, "inf" for an unbounded rate). */
static const char VLLM_JSON[] =
    "{\"date\": \"20251115-101530\", \"endpoint_type\": \"openai\", \"backend\": \"vllm\","
    " \"label\": null, \"model_id\": \"meta-llama/Llama-3.1-8B-Instruct\","
    " \"tokenizer_id\": \"meta-llama/Llama-3.1-8B-Instruct\", \"num_prompts\": 4,"
    " \"request_rate\": \"inf\", \"burstiness\": 1.0, \"max_concurrency\": 4,"
    " \"duration\": 2.5, \"completed\": 4, \"failed\": 0, \"total_input_tokens\": 2048,"
    " \"total_output_tokens\": 256, \"request_throughput\": 1.6, \"request_goodput\": null,"
    " \"output_throughput\": 102.4, \"total_token_throughput\": 921.6,"
    " \"max_output_tokens_per_s\": 120.0, \"max_concurrent_requests\": 4,"
    " \"mean_ttft_ms\": 210.0, \"median_ttft_ms\": 205.0, \"std_ttft_ms\": 12.0, \"p99_ttft_ms\": 228.0,"
    " \"mean_tpot_ms\": 30.1, \"median_tpot_ms\": 30.0, \"std_tpot_ms\": 1.1, \"p99_tpot_ms\": 32.5,"
    " \"mean_itl_ms\": 30.0, \"median_itl_ms\": 29.5, \"std_itl_ms\": 2.0, \"p99_itl_ms\": 36.0,"
    " \"mean_e2el_ms\": 2100.0, \"median_e2el_ms\": 2095.0, \"std_e2el_ms\": 20.0, \"p99_e2el_ms\": 2130.0,"
    " \"input_lens\": [512, 512, 512, 512], \"output_lens\": [64, 64, 64, 64],"
    " \"ttfts\": [0.200, 0.205, 0.206, 0.228],"
    " \"itls\": [[0.029, 0.030, 0.031], [0.028, 0.030], [0.029, 0.036], [0.030]],"
    " \"generated_texts\": [\"a\", \"b\", \"c\", \"d\"], \"errors\": [\"\", \"\", \"\", \"\"]}";

static void test_vllm_import(void **state)
{
    (void)state;
    cal_result *r = NULL;
    char err[256] = "";
    assert_int_equal(cal_result_from_json(VLLM_JSON, strlen(VLLM_JSON), "vllm.json", &r, err, sizeof err), CAL_OK);
    assert_string_equal(r->probe, "vllm bench serve");
    assert_string_equal(r->target_name, "meta-llama/Llama-3.1-8B-Instruct");
    assert_true(r->created_unix > 1763000000);
    assert_int_equal(r->n_cells, 1);
    const cal_rcell *c = &r->cells[0];
    assert_int_equal(c->fp.shot_kind, CAL_SHOT_CONSECUTIVE);
    assert_string_equal(c->fp.probe, "vllm bench serve");
    assert_int_equal(c->fp.concurrency, 4);
    assert_true(isinf(c->fp.request_rate));
    assert_int_equal(c->fp.prompt_tokens, 512);
    assert_int_equal(c->fp.streaming, 1);
    assert_string_equal(c->fp.api, "completions");
    assert_int_equal(c->fp.warmup, -1);
    assert_string_equal(c->fp.host, "");
    assert_true(fabs(c->v[CAL_M_AGG_TOKS] - 102.4) < 1e-9);
    assert_true(fabs(c->v[CAL_M_TTFT_P50] - 205.0) < 1e-9);
    assert_true(fabs(c->v[CAL_M_ITL_P99] - 36.0) < 1e-9);
    assert_true(fabs(c->v[CAL_M_E2E_P50] - 2095.0) < 1e-9);
    assert_int_equal(c->ns[CAL_S_TTFT_MS], 4);
    assert_true(fabs(c->s[CAL_S_TTFT_MS][0] - 200.0) < 1e-9);   /* seconds -> ms */
    assert_int_equal(c->ns[CAL_S_ITL_MS], 8);
    assert_true(c->v[CAL_M_COMPLETED] == 4);
    assert_true(c->v[CAL_M_FAILED] == 0);

    /* beside a caliper run at c4: not comparable, and the fields named */
    cal_result *mine = demo_result("mine", 1.0, 0);
    const cal_result *rs[2] = {mine, r};
    cal_comparison *cmp = NULL;
    assert_int_equal(cal_compare(rs, 2, NULL, &cmp), CAL_OK);
    assert_int_equal(cmp->n_ratios, 0);
    int seen = 0;
    for (size_t i = 0; i < cmp->n_rows; i++) {
        const cal_cmp_entry *e = &cmp->rows[i].e[1];
        if (!e->present || !cmp->rows[i].e[0].present) continue;   /* pairs only */
        seen++;
        assert_non_null(strstr(e->note, "shot kind"));
        assert_non_null(strstr(e->note, "mean of consecutive requests"));
        assert_non_null(strstr(e->note, "probe caliper 0.1.0 vs vllm bench serve"));
        if (cmp->rows[i].metric == CAL_M_AGG_TOKS) assert_int_equal(cmp->rows[i].fp.concurrency, 4);
    }
    assert_true(seen > 0);
    cal_comparison_free(&cmp);
    cal_result_free(&mine);
    cal_result_free(&r);

    /* a file without a required field names it */
    const char *bad = "{\"backend\": \"vllm\", \"duration\": 1, \"output_throughput\": 5, \"total_input_tokens\": 1}";
    assert_int_equal(cal_import_vllm(bad, strlen(bad), NULL, &r, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "\"completed\" is missing"));
    const char *neg = "{\"backend\": \"vllm\", \"completed\": -1, \"duration\": 1, \"output_throughput\": 5, \"total_input_tokens\": 1}";
    assert_int_equal(cal_import_vllm(neg, strlen(neg), NULL, &r, err, sizeof err), CAL_EPROTO);
    assert_non_null(strstr(err, "\"completed\" is not a non-negative number"));
    assert_null(r);
}


/* text[len], read back as a result, holds r's cells metric for metric:
 * both NaN, or within rel·|x| + abs */
static void assert_reads_back(const cal_result *r, const char *text, size_t len,
                              const char *name, double rel, double abs_tol)
{
    char err[256];
    cal_result *back = NULL;
    assert_int_equal(cal_result_from_json(text, len, name, &back, err, sizeof err), CAL_OK);
    assert_int_equal(back->n_cells, r->n_cells);
    for (size_t i = 0; i < r->n_cells; i++)
        for (int m = 0; m < CAL_M__N; m++) {
            double x = r->cells[i].v[m], y = back->cells[i].v[m];
            assert_true((isnan(x) && isnan(y)) || fabs(x - y) <= rel * fabs(x) + abs_tol);
        }
    cal_result_free(&back);
}

/* A stored run as the store hands it over: shots 1–4 of two concurrency
 * cells, shot 1 a warm-up, shot 2 cold, 3–4 warm. Groups: cold 2 and warm
 * 3–4 per concurrency; the warm-up left out; the shot chart on c1. */
static void test_from_run_data(void **state)
{
    (void)state;
    cal_run_data d;
    memset(&d, 0, sizeof d);
    d.run.id = 9;
    d.run.label = (char *)"stored";
    d.run.build = (char *)"caliper 0.1.0 (commit x, -O2)";
    d.run.started_wall_ns = 1764400000LL * 1000000000LL;
    d.run.t0_mono_ns = 1000;
    d.run.host_json = (char *)"{\"cpu\":\"Test CPU\",\"cores\":2,\"memory_bytes\":2147483648,\"os\":\"Linux\"}";
    d.run.target_json = (char *)"{\"kind\":\"builtin\",\"name\":\"tiny\",\"version\":\"stored\",\"api\":\"completions\"}";
    d.run.protocol_json = (char *)"{\"warmup\":1}";
    d.run.verdicts_json = (char *)"[\"c1: shots 3–4 run 10 % below shot 2\"]";
    assert_int_equal(cal_run_data_read_protocol(&d), CAL_OK);
    cal_cell cells[8];
    cal_req_result reqs[16];
    memset(cells, 0, sizeof cells);
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < 8; i++) {
        cal_cell *c = &cells[i];
        int shot = i / 2 + 1, conc = i % 2 ? 4 : 1;
        c->kind = CAL_CELL_CONCURRENCY;
        c->concurrency = conc;
        c->prompt_tokens = 256;
        snprintf(c->content, sizeof c->content, "prose");
        c->unique_prompts = 1;
        c->max_tokens = 16;
        c->output_fixed = 1;
        c->shot_index = shot;
        c->shot_kind = shot == 1 ? CAL_SHOT_WARMUP : shot == 2 ? CAL_SHOT_COLD : CAL_SHOT_WARM;
        c->start_ns = 1000 + (int64_t)i * 1000000000LL;
        c->end_ns = c->start_ns + 800000000LL;
        cal_summary_init(&c->sum);
        c->sum.duration = 0.8;
        c->sum.output_throughput = 100.0 * conc + shot;
        c->sum.per_request_output_throughput_median = 100.0 - shot;
        c->sum.median_ttft_ms = 20 + shot;
        c->sum.completed = 2;
        c->n_requests = 2;
        c->req_first = (size_t)i * 2;
        for (int k = 0; k < 2; k++) {
            cal_req_result *q = &reqs[i * 2 + k];
            q->status = CAL_REQ_OK;
            q->sched_ns = q->send_ns = c->start_ns + k * 1000000;
            q->first_token_ns = q->send_ns + (20 + shot + k) * 1000000LL;
            q->last_token_ns = q->first_token_ns + 150000000LL;
            q->end_ns = q->last_token_ns + 1000000;
            q->prompt_tokens = 256;
            q->output_tokens = 16;
        }
    }
    d.cells = cells;
    d.n_cells = 8;
    d.reqs = reqs;
    d.n_reqs = 16;
    cal_result *r = NULL;
    char err[256] = "";
    assert_int_equal(cal_result_from_run_data(&d, &r, err, sizeof err), CAL_OK);
    assert_string_equal(r->label, "stored");
    assert_string_equal(r->probe, "caliper 0.1.0");
    assert_non_null(strstr(r->host, "Test CPU (2 cores)"));
    /* the analysis's: a shot verdict per configuration, approximate prompts,
     * the column to read (c1 and c4: the per-request one), no clock read,
     * and the stored sentence it does not reproduce */
    assert_int_equal(r->n_verdicts, 6);
    int stored = 0, shots = 0, column = 0, clock = 0;
    for (size_t i = 0; i < r->n_verdicts; i++) {
        column += r->verdicts[i].kind == CAL_VK_COLUMN &&
                  strstr(r->verdicts[i].text, "read the per-request column") != NULL;
        clock += r->verdicts[i].kind == CAL_VK_TELEMETRY && !r->verdicts[i].judged;
        stored += r->verdicts[i].kind == CAL_VK_NOTE &&
                  !strcmp(r->verdicts[i].text, "c1: shots 3–4 run 10 % below shot 2");
        shots += r->verdicts[i].kind == CAL_VK_SHOTS &&
                 /* two requests a shot are too few to judge, and it says so */
                 strstr(r->verdicts[i].text, "cannot judge: shot 2 has 2 ok requests") != NULL;
    }
    assert_int_equal(stored, 1);
    assert_int_equal(shots, 2);
    assert_int_equal(column, 1);
    assert_int_equal(clock, 1);
    /* the report renders them and judges no kind a second time */
    cal_verdict rv[CAL_RES_MAX_VERDICTS + 4];
    size_t nrv = cal_report_verdicts(r, rv, CAL_RES_MAX_VERDICTS + 4);
    int ncol = 0, ntel = 0;
    for (size_t i = 0; i < nrv; i++) {
        ncol += rv[i].kind == CAL_VK_COLUMN;
        ntel += rv[i].kind == CAL_VK_TELEMETRY;
    }
    assert_int_equal(ncol, 1);
    assert_int_equal(ntel, 1);
    assert_int_equal(r->n_cells, 4);          /* cold 2 and warm 3–4, at c1 and c4 */
    int seen_warm = 0;
    for (size_t i = 0; i < r->n_cells; i++) {
        const cal_rcell *c = &r->cells[i];
        assert_int_equal(c->sweep, CAL_SWEEP_CONCURRENCY);
        assert_int_equal(c->fp.warmup, 1);
        assert_string_equal(c->fp.output_policy, "fixed 16");
        assert_int_not_equal(c->fp.shot_kind, CAL_SHOT_WARMUP);
        if (c->fp.shot_kind == CAL_SHOT_WARM) {
            seen_warm++;
            assert_int_equal(c->fp.shot_first, 3);
            assert_int_equal(c->fp.shot_last, 4);
            assert_int_equal(c->ns[CAL_S_AGG_TOKS], 2);       /* per-shot aggregates */
            assert_int_equal(c->ns[CAL_S_TTFT_MS], 4);        /* pooled requests */
            /* aggregate, pooled: Σ tokens ÷ Σ duration = 2 × 32 tok ÷ 2 × 0.8 s */
            double want = 40.0;
            assert_true(fabs(c->v[CAL_M_AGG_TOKS] - want) < 1e-9);
            assert_true(c->v[CAL_M_COMPLETED] == 4);
        } else {
            assert_int_equal(c->fp.shot_kind, CAL_SHOT_COLD);
            assert_int_equal(c->fp.shot_first, 2);
        }
    }
    assert_int_equal(seen_warm, 2);
    assert_int_equal(r->n_shots, 4);           /* every shot of c1, warm-up included */
    assert_int_equal(r->shots[0].kind, CAL_SHOT_WARMUP);
    assert_true(fabs(r->shots[1].t_s - 2.0) < 1e-9);
    assert_int_equal(r->shots_fp.concurrency, 1);
    /* exported and read back, the run reads the same, number for number */
    cal_buf b = CAL_BUF_INIT(0);
    assert_int_equal(cal_run_export_json(&d, &b), CAL_OK);
    assert_non_null(strstr(b.data, "\"schema\""));
    assert_reads_back(r, b.data, b.len, "x.json", 1e-6, 1e-9);
    /* written to a file as it is formatted: the same bytes */
    FILE *tf = tmpfile();
    assert_non_null(tf);
    assert_int_equal(cal_run_export_json_file(&d, tf), CAL_OK);
    assert_int_equal(ftell(tf), (long)b.len);
    rewind(tf);
    char *fb = malloc(b.len + 1);
    assert_non_null(fb);
    assert_int_equal(fread(fb, 1, b.len + 1, tf), b.len);
    assert_memory_equal(fb, b.data, b.len);
    free(fb);
    fclose(tf);
    /* one document family: the export's view is the report's document for
     * the run, and both carry the family's version */
    json_t *exp = json_loadb(b.data, b.len, 0, NULL);
    assert_non_null(exp);
    cal_buf rb = CAL_BUF_INIT(0);
    assert_int_equal(cal_result_to_json(r, &rb), CAL_OK);
    json_t *rep = json_loadb(rb.data, rb.len, 0, NULL);
    assert_non_null(rep);
    cal_buf_free(&rb);
    assert_true(json_equal(json_object_get(exp, "view"), rep));
    assert_null(json_object_get(exp, "summary"));
    assert_int_equal(json_integer_value(json_object_get(exp, "format_version")), CAL_DOC_VERSION);
    assert_int_equal(json_integer_value(json_object_get(rep, "format_version")), CAL_DOC_VERSION);
    assert_string_equal(json_string_value(json_object_get(exp, "format")), "caliper-run");
    assert_string_equal(json_string_value(json_object_get(rep, "format")), "caliper-result");
    /* an export as format 1 wrote it (no view, its own summary) still reads,
     * rebuilt from its requests, to the same numbers */
    json_object_set_new(exp, "format_version", json_integer(1));
    json_object_del(exp, "view");
    json_object_set_new(exp, "summary", json_array());
    char *old = json_dumps(exp, JSON_COMPACT);
    assert_non_null(old);
    assert_reads_back(r, old, strlen(old), "old.json", 1e-6, 1e-9);
    free(old);
    /* a result at version 2 (the report's before the family) reads the same */
    json_object_set_new(rep, "format_version", json_integer(2));
    old = json_dumps(rep, JSON_COMPACT);
    assert_non_null(old);
    assert_reads_back(r, old, strlen(old), "r2.json", 1e-9, 1e-12);
    free(old);
    json_decref(rep);
    json_decref(exp);
    cal_buf_free(&b);
    b = (cal_buf)CAL_BUF_INIT(0);
    assert_int_equal(cal_run_export_csv(&d, &b), CAL_OK);
    assert_int_equal(count(b.data, "\n"), d.n_cells + 1);
    cal_buf_free(&b);
    cal_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_html_structure),
        cmocka_unit_test(test_html_deterministic),
        cmocka_unit_test(test_html_empty_run),
        cmocka_unit_test(test_md_csv),
        cmocka_unit_test(test_md_escapes),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_fit_and_verdicts),
        cmocka_unit_test(test_vllm_import),
        cmocka_unit_test(test_from_run_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
