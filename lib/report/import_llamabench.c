/* caliper — reads llama.cpp's `llama-bench -o json` (an array of tests, or
 * `-o jsonl`, one test per line) into a result. Each test is one cell: a
 * prompt-processing test (n_prompt > 0, n_gen 0) gives prefill tok/s, a
 * generation test (n_gen > 0) decode tok/s, each with its repetitions as
 * samples. Its protocol is its own: in-process (no HTTP, no streaming), a
 * warm-up run then repetitions of one batch, random token content. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"

#define LB_PROBE "llama-bench"
#define LB_MAX_TESTS 4096
/* Plausible ranges: a token count is a whole number up to 1e9 (a context of
 * a billion tokens is past any model), a rate is in (0, 1e7] tokens/s (ten
 * million tokens a second is past any accelerator today). A value outside
 * is refused by name, never clamped nor printed as a 300-digit ratio. */
#define LB_COUNT_MAX 1e9
#define LB_TS_MAX    1e7

/* The JSON value at t[k] as text for a message: 40 bytes at most. */
static void value_text(const json_t *t, const char *k, char *out, size_t n)
{
    const json_t *v = json_object_get(t, k);
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    snprintf(out, n, "%.40s", s ? s : "missing");
    free(s);
}

/* A field of test idx in its plausible range: a token count is a whole
 * number in [0, LB_COUNT_MAX], a rate lies in (0, LB_TS_MAX] tokens/s. */
static int range_field(const json_t *t, const char *k, size_t idx, int count, double *out,
                       char *err, size_t errn)
{
    const json_t *v = json_object_get(t, k);
    double x = json_number_value(v);
    int ok = json_is_number(v) && (count ? x >= 0 && x <= LB_COUNT_MAX && x == floor(x)
                                         : x > 0 && x <= LB_TS_MAX);
    if (!ok) {
        char vt[48];
        value_text(t, k, vt, sizeof vt);
        if (count)
            cal_report_errf(err, errn, "llama-bench: test %zu: \"%s\" is %s: not a whole number of "
                            "tokens in [0, %g]", idx, k, vt, LB_COUNT_MAX);
        else
            cal_report_errf(err, errn, "llama-bench: test %zu: \"%s\" is %s: not a rate in (0, %g] "
                            "tokens/s", idx, k, vt, LB_TS_MAX);
        return CAL_EPROTO;
    }
    *out = x;
    return CAL_OK;
}

static int count_field(const json_t *t, const char *k, size_t idx, long *out, char *err, size_t errn)
{
    double x = 0;
    int e = range_field(t, k, idx, 1, &x, err, errn);
    if (!e) *out = (long)x;
    return e;
}

static int one_test(cal_result *r, const json_t *t, size_t idx, char *err, size_t errn)
{
    if (!json_is_object(t)) {
        cal_report_errf(err, errn, "llama-bench: test %zu is not an object", idx);
        return CAL_EPROTO;
    }
    long n_prompt, n_gen;
    double avg_ts;
    int e;
    if ((e = count_field(t, "n_prompt", idx, &n_prompt, err, errn)) ||
        (e = count_field(t, "n_gen", idx, &n_gen, err, errn)) ||
        (e = range_field(t, "avg_ts", idx, 0, &avg_ts, err, errn)))
        return e;
    if (n_prompt == 0 && n_gen == 0) {
        cal_report_errf(err, errn, "llama-bench: test %zu has n_prompt 0 and n_gen 0", idx);
        return CAL_EPROTO;
    }
    cal_rcell *c = cal_result_add_cell(r, CAL_SWEEP_PROMPT);
    if (!c) return CAL_ENOMEM;
    cal_fingerprint *fp = &c->fp;
    fp->shot_kind = CAL_SHOT_WARM;       /* a warm-up run, then repetitions */
    fp->warmup = 1;
    fp->rest_s = 0;
    fp->concurrency = 1;
    fp->request_rate = 0;
    /* a pp test is a prompt of n_prompt; a tg test decodes after n_depth */
    long depth = 0;
    if (json_object_get(t, "n_depth") && (e = count_field(t, "n_depth", idx, &depth, err, errn)))
        return e;
    fp->prompt_tokens = n_gen == 0 ? n_prompt : depth;
    cal_fp_set(fp->content, "random tokens");
    char pol[64];
    snprintf(pol, sizeof pol, "fixed %ld", n_gen);
    cal_fp_set(fp->output_policy, pol);
    fp->streaming = 0;
    cal_fp_set(fp->api, "in-process (no HTTP)");
    cal_fp_set(fp->probe, LB_PROBE);
    char cpu[CAL_FP_STR], gpu[CAL_FP_STR];
    cal_report_jstr(t, "cpu_info", cpu, sizeof cpu);
    cal_report_jstr(t, "gpu_info", gpu, sizeof gpu);
    char host[CAL_FP_STR * 2 + 4];
    snprintf(host, sizeof host, "%s%s%s", cpu, cpu[0] && gpu[0] ? " + " : "", gpu);
    cal_fp_set(fp->host, host);
    int m = n_gen == 0 ? CAL_M_PREFILL_TOKS : CAL_M_DECODE_TOKS;
    cal_series s = n_gen == 0 ? CAL_S_PREFILL_TOKS : CAL_S_DECODE_TOKS;
    c->v[m] = avg_ts;
    if (n_gen == 0) c->v[CAL_M_INPUT_TOKENS] = (double)n_prompt;
    else c->v[CAL_M_OUTPUT_TOKENS] = (double)n_gen;
    const json_t *ts = json_object_get(t, "samples_ts");
    size_t n = json_array_size(ts);
    if (n) {
        if (n > (1u << 20)) return CAL_ETOOBIG;
        double *x = malloc(n * sizeof *x);
        if (!x) return CAL_ENOMEM;
        size_t k = 0, i;
        const json_t *v;
        json_array_foreach(ts, i, v) {
            double y = json_number_value(v);
            if (json_is_number(v) && y > LB_TS_MAX) {
                free(x);
                cal_report_errf(err, errn, "llama-bench: test %zu: \"samples_ts\"[%zu] is %g: not "
                                "a rate in (0, %g] tokens/s", idx, i, y, LB_TS_MAX);
                return CAL_EPROTO;
            }
            if (json_is_number(v) && isfinite(y) && y > 0) x[k++] = y;
        }
        e = cal_cell_set_samples(c, s, x, k);
        free(x);
        if (e) return e;
    }
    return CAL_OK;
}

int cal_import_llamabench(const char *text, size_t len, const char *name,
                          cal_result **out, char *err, size_t errn)
{
    *out = NULL;
    json_t *root = NULL;
    /* -o json is one array; -o jsonl one object per line */
    json_error_t je;
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (json_is_object(root)) {   /* -o jsonl with a single test */
        json_t *a = json_array();
        if (!a || json_array_append_new(a, root)) { json_decref(a); return CAL_ENOMEM; }
        root = a;
    }
    if (!root) {
        root = json_array();
        if (!root) return CAL_ENOMEM;
        size_t at = 0;
        while (at < len) {
            const char *nl = memchr(text + at, '\n', len - at);
            size_t end = nl ? (size_t)(nl - text) : len;
            size_t k = at;
            while (k < end && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
            if (k < end) {
                json_t *o = json_loadb(text + k, end - k, JSON_REJECT_DUPLICATES, &je);
                if (!o || json_array_size(root) >= LB_MAX_TESTS) {
                    json_decref(o);
                    json_decref(root);
                    cal_report_errf(err, errn, "llama-bench: not JSON (-o json) or JSON lines "
                                    "(-o jsonl): %s", o ? "too many tests" : je.text);
                    return CAL_EPROTO;
                }
                json_array_append_new(root, o);
            }
            at = end + 1;
        }
    }
    if (!json_is_array(root) || json_array_size(root) == 0) {
        json_decref(root);
        cal_report_errf(err, errn, "llama-bench: expected an array of tests (-o json)");
        return CAL_EPROTO;
    }
    if (json_array_size(root) > LB_MAX_TESTS) {
        json_decref(root);
        cal_report_errf(err, errn, "llama-bench: more than %d tests", LB_MAX_TESTS);
        return CAL_ETOOBIG;
    }
    cal_result *r = cal_result_new();
    if (!r) { json_decref(root); return CAL_ENOMEM; }
    const json_t *first = json_array_get(root, 0);
    char model[CAL_RES_STR], commit[64], backends[64];
    cal_report_jstr(first, "model_type", model, sizeof model);
    if (!model[0]) cal_report_jstr(first, "model_filename", model, sizeof model);
    cal_report_jstr(first, "build_commit", commit, sizeof commit);
    cal_report_jstr(first, "backends", backends, sizeof backends);
    snprintf(r->id, sizeof r->id, "%s", name ? name : "llama-bench");
    snprintf(r->label, sizeof r->label, "%s", name ? name : LB_PROBE);
    snprintf(r->target_name, sizeof r->target_name, "%s", model[0] ? model : "unknown model");
    snprintf(r->target_version, sizeof r->target_version, "%s%s%s",
             commit[0] ? "llama.cpp " : "", commit, "");
    snprintf(r->target_url, sizeof r->target_url, "in-process%s%s",
             backends[0] ? ", backend " : "", backends);
    snprintf(r->probe, sizeof r->probe, "%s", LB_PROBE);
    char ts[64];
    cal_report_jstr(first, "test_time", ts, sizeof ts);
    cal_result_add_note(r, "imported from llama-bench: in-process batches (no HTTP, no "
                           "streaming, no scheduler), one warm-up run then repetitions; "
                           "prefill from pp tests, decode from tg tests");
    int e = CAL_OK;
    size_t i;
    const json_t *t;
    json_array_foreach(root, i, t) {
        if ((e = one_test(r, t, i, err, errn))) break;
        cal_cell_fill_from_samples(&r->cells[r->n_cells - 1]);
    }
    json_decref(root);
    if (e) {
        if (e == CAL_ENOMEM || e == CAL_ETOOBIG)
            cal_report_errf(err, errn, "llama-bench: %s", cal_strerror(e));
        cal_result_free(&r);
        return e;
    }
    *out = r;
    return CAL_OK;
}
