/* caliper — reads a vLLM `vllm bench serve --save-result` JSON into a result,
 * labelled with that tool's protocol: the mean of consecutive requests with
 * no cold/warm split, its own client, an unknown host. It then sits in a
 * comparison with its differences named instead of a false ratio. */
#define _XOPEN_SOURCE 700
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"

#define VLLM_PROBE "vllm bench serve"

/* vLLM writes `date` as strftime("%Y%m%d-%H%M%S") in local time; read as UTC. */
static int64_t parse_date(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(s, "%Y%m%d-%H%M%S", &tm);
    if (!end || *end) return 0;
    return (int64_t)timegm(&tm);
}

/* A required non-negative number; names the field on failure. */
static int need(const json_t *o, const char *k, double *out, char *err, size_t errn)
{
    const json_t *v = json_object_get(o, k);
    if (!v) { cal_report_errf(err, errn, "vllm: \"%s\" is missing", k); return CAL_EPROTO; }
    double x = cal_report_jnum(o, k);
    if (!json_is_number(v) || !isfinite(x) || x < 0) {
        cal_report_errf(err, errn, "vllm: \"%s\" is not a non-negative number", k);
        return CAL_EPROTO;
    }
    *out = x;
    return CAL_OK;
}

static const char *api_of_backend(const char *b)
{
    if (!strcmp(b, "openai-chat") || !strcmp(b, "openai-audio")) return "chat";
    if (!strcmp(b, "vllm") || !strcmp(b, "openai") || !b[0]) return "completions";
    return b;
}

/* Per-request arrays of --save-detailed: seconds in vLLM, ms here. */
static int read_details(cal_rcell *c, const json_t *root)
{
    const json_t *ttfts = json_object_get(root, "ttfts");
    const json_t *itls = json_object_get(root, "itls");
    const json_t *outl = json_object_get(root, "output_lens");
    const json_t *lat = json_object_get(root, "latencies");
    size_t n = json_array_size(ttfts);
    int e = CAL_OK;
    if (n) {
        double *x = malloc(n * sizeof *x);
        if (!x) return CAL_ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_array_get(ttfts, i);
            if (json_is_number(v) && json_number_value(v) > 0)   /* 0 = failed request */
                x[k++] = json_number_value(v) * 1e3;
        }
        e = cal_cell_set_samples(c, CAL_S_TTFT_MS, x, k);
        free(x);
        if (e) return e;
    }
    size_t total = 0, i;
    const json_t *row;
    json_array_foreach(itls, i, row) total += json_array_size(row);
    if (total) {
        if (total > (1u << 24)) return CAL_ETOOBIG;
        double *x = malloc(total * sizeof *x);
        if (!x) return CAL_ENOMEM;
        size_t k = 0, j;
        const json_t *v;
        json_array_foreach(itls, i, row) json_array_foreach(row, j, v)
            if (json_is_number(v)) x[k++] = json_number_value(v) * 1e3;
        e = cal_cell_set_samples(c, CAL_S_ITL_MS, x, k);
        free(x);
        if (e) return e;
    }
    /* Per-request speed and E2E need the latencies (newer vLLM saves them). */
    size_t nl = json_array_size(lat);
    if (nl && nl == json_array_size(outl)) {
        double *sp = malloc(nl * sizeof *sp), *e2e = malloc(nl * sizeof *e2e),
               *tp = malloc(nl * sizeof *tp);
        if (!sp || !e2e || !tp) { free(sp); free(e2e); free(tp); return CAL_ENOMEM; }
        size_t ks = 0, kt = 0;
        for (size_t r = 0; r < nl; r++) {
            double l = json_number_value(json_array_get(lat, r));
            double o = json_number_value(json_array_get(outl, r));
            if (!(l > 0) || !(o > 0)) continue;
            sp[ks] = o / l;
            e2e[ks++] = l * 1e3;
            double t = json_number_value(json_array_get(ttfts, r));
            if (o > 1 && t > 0 && l > t) tp[kt++] = (l - t) / (o - 1) * 1e3;
        }
        e = cal_cell_set_samples(c, CAL_S_REQ_TOKS, sp, ks);
        if (!e) e = cal_cell_set_samples(c, CAL_S_E2E_MS, e2e, ks);
        if (!e) e = cal_cell_set_samples(c, CAL_S_TPOT_MS, tp, kt);
        free(sp); free(e2e); free(tp);
    }
    return e;
}

int cal_import_vllm(const char *text, size_t len, const char *name,
                    cal_result **out, char *err, size_t errn)
{
    json_t *root;
    int e = cal_report_parse(text, len, &root, err, errn);
    if (e) return e;
    double completed, duration, out_tp, in_tok;
    if ((e = need(root, "completed", &completed, err, errn)) ||
        (e = need(root, "duration", &duration, err, errn)) ||
        (e = need(root, "output_throughput", &out_tp, err, errn)) ||
        (e = need(root, "total_input_tokens", &in_tok, err, errn))) {
        json_decref(root);
        return e;
    }
    cal_result *r = cal_result_new();
    if (!r) { json_decref(root); return CAL_ENOMEM; }
    char backend[64], model[CAL_RES_STR], date[64];
    cal_report_jstr(root, "backend", backend, sizeof backend);
    cal_report_jstr(root, "model_id", model, sizeof model);
    cal_report_jstr(root, "date", date, sizeof date);
    snprintf(r->id, sizeof r->id, "%s", name ? name : "vllm");
    snprintf(r->label, sizeof r->label, "%s", name ? name : VLLM_PROBE);
    snprintf(r->target_name, sizeof r->target_name, "%s", model[0] ? model : "unknown model");
    snprintf(r->target_version, sizeof r->target_version, "%s", "");
    snprintf(r->probe, sizeof r->probe, "%s", VLLM_PROBE);
    snprintf(r->target_url, sizeof r->target_url, "backend %s", backend[0] ? backend : "unknown");
    r->created_unix = date[0] ? parse_date(date) : 0;
    cal_result_add_note(r, "imported from vllm bench serve: the mean of consecutive requests, "
                              "no cold/warm split; warm-up, content and host unknown");

    double maxc = cal_report_jnum(root, "max_concurrency");
    cal_rcell *c = cal_result_add_cell(r, isfinite(maxc) ? CAL_SWEEP_CONCURRENCY : CAL_SWEEP_OTHER);
    if (!c) { e = CAL_ENOMEM; goto fail; }
    cal_fingerprint *fp = &c->fp;
    fp->shot_kind = CAL_SHOT_CONSECUTIVE;
    fp->concurrency = (int)cal_report_jint(root, "max_concurrency", 0, 1 << 30, 0);
    fp->request_rate = cal_report_jnum(root, "request_rate");
    /* One prompt length only when every request had it (the random dataset
     * with a fixed --random-input-len); otherwise mixed = unknown. */
    const json_t *inl = json_object_get(root, "input_lens");
    if (json_array_size(inl)) {
        double first = json_number_value(json_array_get(inl, 0));
        int same = 1;
        size_t i;
        const json_t *v;
        json_array_foreach(inl, i, v) if (json_number_value(v) != first) same = 0;
        fp->prompt_tokens = same && first >= 1 && first < 1e12 ? (long)first : 0;
    } else if (completed > 0) {
        fp->prompt_tokens = 0;
    }
    fp->streaming = 1;   /* bench serve always streams */
    cal_fp_set(fp->api, api_of_backend(backend));
    cal_fp_set(fp->probe, VLLM_PROBE);
    /* the schema's keys are vLLM's where the meaning is the same: every
     * field the file has, read under its own name */
    for (int m = 0; m < CAL_M__N; m++) {
        const cal_field *f = cal_metric_get((cal_metric)m);
        double x = cal_report_jnum(root, f->name);
        if (!isfinite(x) || (f->type == CAL_FIELD_INT && (x < 0 || x > 9e15))) continue;
        c->v[m] = f->type == CAL_FIELD_INT ? floor(x) : x;
    }
    if ((e = read_details(c, root))) goto fail;
    cal_cell_fill_from_samples(c);
    json_decref(root);
    *out = r;
    return CAL_OK;
fail:
    cal_report_errf(err, errn, "vllm: %s", cal_strerror(e));
    json_decref(root);
    cal_result_free(&r);
    return e;
}
