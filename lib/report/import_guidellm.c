/* caliper — reads a guidellm benchmark report (`guidellm benchmark
 * --output-path benchmarks.json`: {"benchmarks": [...]}, each with its
 * scheduling strategy, total_count and per-metric distributions split by
 * request status) into a result, one cell per benchmark, from the
 * successful requests. Labelled with guidellm's protocol: a mean over
 * requests, no cold/warm split, its own client, an unknown host. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"

#define GL_PROBE "guidellm"
#define GL_MAX 4096

/* The successful requests' distribution of a metric: {"successful": {...}} */
static const json_t *dist(const json_t *metrics, const char *k)
{
    const json_t *m = json_object_get(metrics, k);
    const json_t *s = json_object_get(m, "successful");
    return json_is_object(s) ? s : NULL;
}

/* a percentile: "percentiles": {"p99": ...}; p50 is "median" in older files */
static double pct(const json_t *d, const char *p)
{
    if (!strcmp(p, "p50")) {
        double m = cal_report_jnum(d, "median");
        if (isfinite(m)) return m;
    }
    return cal_report_jnum(json_object_get(d, "percentiles"), p);
}

static void put(cal_rcell *c, int f, double x, double scale)
{
    if (isfinite(x) && x >= 0 && x < 1e15) c->v[f] = x * scale;
}

static int one(cal_result *r, const json_t *b, size_t idx, char *err, size_t errn)
{
    const json_t *metrics = json_object_get(b, "metrics");
    if (!json_is_object(metrics)) {
        cal_report_errf(err, errn, "guidellm: benchmark %zu: \"metrics\" is missing", idx);
        return CAL_EPROTO;
    }
    const json_t *lat = dist(metrics, "request_latency");
    if (!lat || !isfinite(cal_report_jnum(lat, "mean"))) {
        cal_report_errf(err, errn, "guidellm: benchmark %zu: \"metrics.request_latency."
                        "successful.mean\" is missing", idx);
        return CAL_EPROTO;
    }
    cal_rcell *c = cal_result_add_cell(r, CAL_SWEEP_OTHER);
    if (!c) return CAL_ENOMEM;
    const json_t *d;
    if ((d = dist(metrics, "requests_per_second"))) put(c, CAL_M_REQ_THROUGHPUT, cal_report_jnum(d, "mean"), 1);
    if ((d = dist(metrics, "output_tokens_per_second"))) put(c, CAL_M_AGG_TOKS, cal_report_jnum(d, "mean"), 1);
    if ((d = dist(metrics, "tokens_per_second"))) put(c, CAL_M_TOTAL_TOKS, cal_report_jnum(d, "mean"), 1);
    /* request_latency is in seconds */
    put(c, CAL_M_E2E_MEAN, cal_report_jnum(lat, "mean"), 1e3);
    put(c, CAL_M_E2E_P50, pct(lat, "p50"), 1e3);
    put(c, CAL_M_E2E_P99, pct(lat, "p99"), 1e3);
    put(c, CAL_M_E2E_SD, cal_report_jnum(lat, "std_dev"), 1e3);
    if ((d = dist(metrics, "time_to_first_token_ms"))) {
        put(c, CAL_M_TTFT_MEAN, cal_report_jnum(d, "mean"), 1);
        put(c, CAL_M_TTFT_P50, pct(d, "p50"), 1);
        put(c, CAL_M_TTFT_P95, pct(d, "p95"), 1);
        put(c, CAL_M_TTFT_P99, pct(d, "p99"), 1);
        put(c, CAL_M_TTFT_SD, cal_report_jnum(d, "std_dev"), 1);
    }
    /* guidellm's inter-token latency is per request (last − first token) ÷
     * (tokens − 1): caliper's TPOT. Its time_per_output_token_ms counts the
     * first token in and has no field here. */
    if ((d = dist(metrics, "inter_token_latency_ms"))) {
        put(c, CAL_M_TPOT_MEAN, cal_report_jnum(d, "mean"), 1);
        put(c, CAL_M_TPOT_P50, pct(d, "p50"), 1);
        put(c, CAL_M_TPOT_P99, pct(d, "p99"), 1);
        put(c, CAL_M_TPOT_SD, cal_report_jnum(d, "std_dev"), 1);
    }
    const json_t *tc = json_object_get(b, "total_count");
    put(c, CAL_M_COMPLETED, cal_report_jnum(tc, "successful"), 1);
    double errored = cal_report_jnum(tc, "errored"), inc = cal_report_jnum(tc, "incomplete");
    if (isfinite(errored)) put(c, CAL_M_FAILED, errored + (isfinite(inc) ? inc : 0), 1);
    double t0 = cal_report_jnum(b, "start_time"), t1 = cal_report_jnum(b, "end_time");
    if (isfinite(t0) && isfinite(t1) && t1 >= t0) put(c, CAL_M_DURATION, t1 - t0, 1);
    if ((d = dist(metrics, "prompt_token_count"))) put(c, CAL_M_INPUT_TOKENS, cal_report_jnum(d, "total_sum"), 1);
    if ((d = dist(metrics, "output_token_count"))) put(c, CAL_M_OUTPUT_TOKENS, cal_report_jnum(d, "total_sum"), 1);

    cal_fingerprint *fp = &c->fp;
    fp->shot_kind = CAL_SHOT_CONSECUTIVE;
    const json_t *args = json_object_get(b, "args");
    const json_t *strat = json_object_get(args, "strategy");
    if (!strat) strat = json_object_get(b, "scheduler");   /* newer reports */
    char type[32] = "";
    cal_report_jstr(strat, "type_", type, sizeof type);
    if (!strcmp(type, "synchronous")) {
        fp->concurrency = 1; fp->request_rate = 0;
    } else if (!strcmp(type, "concurrent")) {
        fp->concurrency = (int)cal_report_jint(strat, "streams", 1, 1 << 30, 0);
        fp->request_rate = 0;
    } else if (!strcmp(type, "throughput")) {
        fp->concurrency = 0; fp->request_rate = INFINITY;
    } else if (!strcmp(type, "constant") || !strcmp(type, "poisson")) {
        double rate = cal_report_jnum(strat, "rate");
        fp->concurrency = 0;
        fp->request_rate = isfinite(rate) && rate > 0 ? rate : NAN;
    }
    if ((d = dist(metrics, "prompt_token_count"))) {
        double lo = cal_report_jnum(d, "min"), hi = cal_report_jnum(d, "max");
        fp->prompt_tokens = isfinite(lo) && lo == hi && lo >= 1 && lo < 1e9 ? (long)lo : 0;
    }
    if ((d = dist(metrics, "output_token_count"))) {
        double lo = cal_report_jnum(d, "min"), hi = cal_report_jnum(d, "max");
        if (isfinite(lo) && lo == hi && lo >= 1 && lo < 1e9) {
            char pol[48];
            snprintf(pol, sizeof pol, "fixed %ld", (long)lo);
            cal_fp_set(fp->output_policy, pol);
        }
    }
    cal_fp_set(fp->probe, GL_PROBE);
    return CAL_OK;
}

int cal_import_guidellm(const char *text, size_t len, const char *name,
                        cal_result **out, char *err, size_t errn)
{
    *out = NULL;
    json_t *root;
    int e = cal_report_parse(text, len, &root, err, errn);
    if (e) return e;
    const json_t *bs = json_object_get(root, "benchmarks");
    size_t n = json_array_size(bs);
    if (!n || n > GL_MAX) {
        cal_report_errf(err, errn, "guidellm: \"benchmarks\" is missing, empty or longer "
                        "than %d", GL_MAX);
        json_decref(root);
        return CAL_EPROTO;
    }
    cal_result *r = cal_result_new();
    if (!r) { json_decref(root); return CAL_ENOMEM; }
    size_t i;
    const json_t *b;
    json_array_foreach(bs, i, b) {
        if (!json_is_object(b)) {
            cal_report_errf(err, errn, "guidellm: benchmark %zu is not an object", i);
            e = CAL_EPROTO;
        } else {
            e = one(r, b, i, err, errn);
        }
        if (e) break;
    }
    if (!e) {
        const json_t *b0 = json_array_get(bs, 0);
        char model[CAL_RES_STR] = "", target[CAL_RES_STR] = "";
        const json_t *wk = json_object_get(b0, "worker");
        const json_t *ba = json_object_get(wk, "backend_args");
        cal_report_jstr(wk, "backend_model", model, sizeof model);
        if (!model[0]) cal_report_jstr(ba, "model", model, sizeof model);
        cal_report_jstr(wk, "backend_target", target, sizeof target);
        snprintf(r->id, sizeof r->id, "%s", name ? name : GL_PROBE);
        snprintf(r->label, sizeof r->label, "%s", name ? name : GL_PROBE);
        snprintf(r->target_name, sizeof r->target_name, "%s", model[0] ? model : "unknown model");
        snprintf(r->target_url, sizeof r->target_url, "%s", target);
        snprintf(r->probe, sizeof r->probe, "%s", GL_PROBE);
        cal_result_add_note(r, "imported from guidellm: successful requests' means and "
                               "percentiles, no cold/warm split; inter_token_latency_ms read "
                               "as TPOT; warm-up, content, streaming and host unknown");
    } else if (e == CAL_ENOMEM) {
        cal_report_errf(err, errn, "guidellm: %s", cal_strerror(e));
    }
    json_decref(root);
    if (e) { cal_result_free(&r); return e; }
    *out = r;
    return CAL_OK;
}
