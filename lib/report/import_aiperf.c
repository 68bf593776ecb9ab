/* caliper — reads NVIDIA AIPerf's profile_export_aiperf.json and GenAI-Perf's
 * profile_export_genai_perf.json (the same shape: one object per metric with
 * "unit", "avg", "p50", "p99", "std"..., and the run's input_config) into a
 * one-cell result labelled with that tool's protocol: a mean over requests
 * with no cold/warm split, its own client and tokenizer, an unknown host. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"

/* metric.stat → field, with the metric's unit checked (ms or s) */
typedef struct amap { const char *metric, *stat; int field; } amap;
static const amap MAP[] = {
    {"request_throughput", "avg", CAL_M_REQ_THROUGHPUT},
    {"output_token_throughput", "avg", CAL_M_AGG_TOKS},
    {"total_token_throughput", "avg", CAL_M_TOTAL_TOKS},
    {"output_token_throughput_per_user", "p50", CAL_M_REQ_TOKS},
    {"output_token_throughput_per_request", "p50", CAL_M_REQ_TOKS},
    {"time_to_first_token", "avg", CAL_M_TTFT_MEAN},
    {"time_to_first_token", "p50", CAL_M_TTFT_P50},
    {"time_to_first_token", "p95", CAL_M_TTFT_P95},
    {"time_to_first_token", "p99", CAL_M_TTFT_P99},
    {"time_to_first_token", "std", CAL_M_TTFT_SD},
    {"inter_token_latency", "avg", CAL_M_TPOT_MEAN},   /* per request: (last−first)/(n−1) */
    {"inter_token_latency", "p50", CAL_M_TPOT_P50},
    {"inter_token_latency", "p99", CAL_M_TPOT_P99},
    {"inter_token_latency", "std", CAL_M_TPOT_SD},
    {"request_latency", "avg", CAL_M_E2E_MEAN},
    {"request_latency", "p50", CAL_M_E2E_P50},
    {"request_latency", "p99", CAL_M_E2E_P99},
    {"request_latency", "std", CAL_M_E2E_SD},
    {"request_count", "avg", CAL_M_COMPLETED},
    {"benchmark_duration", "avg", CAL_M_DURATION},
    {"total_isl", "avg", CAL_M_INPUT_TOKENS},
    {"total_osl", "avg", CAL_M_OUTPUT_TOKENS},
};

/* A latency in ms whatever the file's unit ("ms", "s", "sec", "ns"). */
static double scaled(const json_t *m, double x)
{
    const char *u = json_string_value(json_object_get(m, "unit"));
    if (!u) return x;
    if (!strcmp(u, "s") || !strcmp(u, "sec")) return x * 1e3;
    if (!strcmp(u, "ns")) return x * 1e-6;
    if (!strcmp(u, "us")) return x * 1e-3;
    return x;
}

static int is_latency(int f)
{
    return (f >= CAL_M_TTFT_MEAN && f <= CAL_M_E2E_P99) ||
           (f >= CAL_M_TTFT_SD && f <= CAL_M_E2E_SD);
}

int cal_import_aiperf(const char *text, size_t len, const char *name, const char *tool,
                      cal_result **out, char *err, size_t errn)
{
    *out = NULL;
    const char *probe = tool && !strcmp(tool, "genai-perf") ? "genai-perf" : "aiperf";
    json_t *root;
    int e = cal_report_parse(text, len, &root, err, errn);
    if (e) return e;
    const json_t *lat = json_object_get(root, "request_latency");
    if (!json_is_object(lat) || !json_is_number(json_object_get(lat, "avg"))) {
        cal_report_errf(err, errn, "%s: \"request_latency\" with an \"avg\" is missing "
                        "(not a profile_export_%s.json?)", probe,
                        !strcmp(probe, "aiperf") ? "aiperf" : "genai_perf");
        json_decref(root);
        return CAL_EPROTO;
    }
    cal_result *r = cal_result_new();
    if (!r) { json_decref(root); return CAL_ENOMEM; }
    cal_rcell *c = cal_result_add_cell(r, CAL_SWEEP_OTHER);
    if (!c) { json_decref(root); cal_result_free(&r); return CAL_ENOMEM; }
    for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++) {
        const json_t *m = json_object_get(root, MAP[i].metric);
        double x = cal_report_jnum(m, MAP[i].stat);
        if (!json_is_object(m) || !isfinite(x) || x < 0 || x > 1e15 || !isnan(c->v[MAP[i].field]))
            continue;
        c->v[MAP[i].field] = is_latency(MAP[i].field) ? scaled(m, x) : x;
    }
    /* the protocol fields the file has */
    const json_t *cfg = json_object_get(root, "input_config");
    const json_t *ep = json_object_get(cfg, "endpoint");        /* AIPerf */
    const json_t *lg = json_object_get(cfg, "loadgen");
    cal_fingerprint *fp = &c->fp;
    fp->shot_kind = CAL_SHOT_CONSECUTIVE;
    const json_t *st = json_object_get(ep, "streaming");
    if (!st) st = json_object_get(cfg, "streaming");             /* GenAI-Perf */
    fp->streaming = json_is_boolean(st) ? json_is_true(st) : -1;
    char type[64] = "";
    cal_report_jstr(ep, "type", type, sizeof type);
    if (!type[0]) cal_report_jstr(cfg, "endpoint_type", type, sizeof type);
    if (type[0]) cal_fp_set(fp->api, type);   /* "chat", "completions": caliper's names */
    long conc = cal_report_jint(lg, "concurrency", 1, 1 << 30, 0);
    if (!conc) conc = cal_report_jint(cfg, "concurrency", 1, 1 << 30, 0);
    fp->concurrency = (int)conc;
    double rate = cal_report_jnum(lg, "request_rate");
    if (!isfinite(rate)) rate = cal_report_jnum(cfg, "request_rate");
    fp->request_rate = isfinite(rate) && rate > 0 ? rate : conc ? 0 : NAN;
    /* one prompt length only when every request had it */
    const json_t *isl = json_object_get(root, "input_sequence_length");
    double lo = cal_report_jnum(isl, "min"), hi = cal_report_jnum(isl, "max");
    fp->prompt_tokens = isfinite(lo) && lo == hi && lo >= 1 && lo < 1e9 ? (long)lo : 0;
    const json_t *osl = json_object_get(root, "output_sequence_length");
    lo = cal_report_jnum(osl, "min"), hi = cal_report_jnum(osl, "max");
    if (isfinite(lo) && lo == hi && lo >= 1 && lo < 1e9) {
        char pol[48];
        snprintf(pol, sizeof pol, "fixed %ld", (long)lo);
        cal_fp_set(fp->output_policy, pol);
    }
    cal_fp_set(fp->probe, probe);
    char model[CAL_RES_STR] = "";
    const json_t *names = json_object_get(ep, "model_names");
    if (!names) names = json_object_get(cfg, "model");
    if (json_is_array(names) && json_is_string(json_array_get(names, 0)))
        snprintf(model, sizeof model, "%s", json_string_value(json_array_get(names, 0)));
    char url[CAL_RES_STR] = "";
    cal_report_jstr(ep, "url", url, sizeof url);
    if (!url[0]) cal_report_jstr(cfg, "url", url, sizeof url);
    snprintf(r->id, sizeof r->id, "%s", name ? name : probe);
    snprintf(r->label, sizeof r->label, "%s", name ? name : probe);
    snprintf(r->target_name, sizeof r->target_name, "%s", model[0] ? model : "unknown model");
    snprintf(r->target_url, sizeof r->target_url, "%s", url);
    snprintf(r->probe, sizeof r->probe, "%s", probe);
    char note[200];
    snprintf(note, sizeof note, "imported from %s: means and percentiles over requests, no "
             "cold/warm split; inter_token_latency read as TPOT (per request); warm-up, "
             "content and host unknown", probe);
    cal_result_add_note(r, note);
    json_decref(root);
    *out = r;
    return CAL_OK;
}
