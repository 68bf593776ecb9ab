/* caliper — caliper's own result format in JSON (jansson): "format":
 * "caliper-result", written by `caliper report --format json` and read back
 * by compare (load.c recognises it among the formats it reads). Absent
 * numbers are null or left out, never zero. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"

#define FORMAT_NAME "caliper-result"
/* The version is the document family's (CAL_DOC_VERSION, report.h).
 * 3: the same document, now also the "view" of a caliper-run export.
 * 2: one schema: every cell and shot number under its schema key (schema.h),
 *    verdicts as objects. 1: the report's own keys, read through LEGACY. */
#define FORMAT_VERSION CAL_DOC_VERSION

/* ---- writing ---------------------------------------------------------------- */

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int set_num(json_t *o, const char *k, double v)
{
    if (!isfinite(v)) return 0;
    return json_object_set_new(o, k, json_real(v));
}

static json_t *fp_to_json(const cal_fingerprint *fp)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "shot_kind", json_string(cal_shot_kind_key(fp->shot_kind)));
    if (fp->shot_first > 0) {
        json_object_set_new(o, "shot_first", json_integer(fp->shot_first));
        json_object_set_new(o, "shot_last", json_integer(fp->shot_last));
    }
    json_object_set_new(o, "rest_s", num_or_null(fp->rest_s));
    json_object_set_new(o, "warmup", fp->warmup < 0 ? json_null() : json_integer(fp->warmup));
    json_object_set_new(o, "concurrency", json_integer(fp->concurrency));
    if (isinf(fp->request_rate))
        json_object_set_new(o, "request_rate", json_string("inf"));
    else
        json_object_set_new(o, "request_rate", num_or_null(fp->request_rate));
    json_object_set_new(o, "prompt_tokens", json_integer(fp->prompt_tokens));
    json_object_set_new(o, "content", json_string(fp->content));
    json_object_set_new(o, "output_policy", json_string(fp->output_policy));
    json_object_set_new(o, "streaming", fp->streaming < 0 ? json_null() : json_boolean(fp->streaming));
    json_object_set_new(o, "api", json_string(fp->api));
    json_object_set_new(o, "probe", json_string(fp->probe));
    json_object_set_new(o, "host", json_string(fp->host));
    if (fp->slo[0]) json_object_set_new(o, "slo", json_string(fp->slo));
    if (fp->damaged[0]) json_object_set_new(o, "protocol_damaged", json_string(fp->damaged));
    return o;
}

/* Every present field under its schema key; counts as integers. */
static json_t *metrics_to_json(const double *v)
{
    json_t *m = json_object();
    for (int k = 0; m && k < CAL_M__N; k++) {
        const cal_field *f = cal_metric_get((cal_metric)k);
        if (!isfinite(v[k])) continue;
        json_object_set_new(m, f->name, f->type == CAL_FIELD_INT ? json_integer((json_int_t)v[k])
                                                                 : json_real(v[k]));
    }
    return m;
}

/* Format 1 spelled five numbers its own way; read them under their
 * schema keys. Only for files written before the one schema: since format
 * 2 each quantity is written under one key, and decode_tok_s,
 * request_tok_s, prefill_tok_s and ttft_ms are series keys, naming a
 * cell's per-request samples (export's per-request fields), never its
 * median (decode_tps_median, …). */
static const struct { const char *key; cal_metric m; } LEGACY[] = {
    {"median_request_tok_s", CAL_M_REQ_TOKS}, {"prefill_tok_s", CAL_M_PREFILL_TOKS},
    {"decode_tok_s", CAL_M_DECODE_TOKS}, {"clock_mhz", CAL_M_CLOCK_MHZ},
    {"power_w", CAL_M_POWER_W}, {"request_tok_s", CAL_M_REQ_TOKS},
    {"ttft_ms", CAL_M_TTFT_P50}, {"completed", CAL_M_COMPLETED}, {"failed", CAL_M_FAILED},
    {"duration_s", CAL_M_DURATION},
};

/* A number read for field k: a count must be a whole number in [0, 9e15]
 * (a hostile file must never reach an integer cast out of range); NAN
 * otherwise, as every non-finite value. */
static double field_value(int k, double x)
{
    if (!isfinite(x)) return NAN;
    if (cal_metric_get((cal_metric)k)->type == CAL_FIELD_INT) return x >= 0 && x <= 9e15 ? floor(x) : NAN;
    return x;
}

/* Numbers of a cell or shot: the schema keys of m (format 2), or the
 * legacy keys of o itself (format 1). */
static void metrics_from_json(const json_t *m, const json_t *o, int version, double *v)
{
    for (int k = 0; k < CAL_M__N; k++) v[k] = field_value(k, cal_report_jnum(m, cal_metric_get((cal_metric)k)->name));
    if (version >= 2) return;
    for (size_t i = 0; i < sizeof LEGACY / sizeof LEGACY[0]; i++) {
        double x = cal_report_jnum(m, LEGACY[i].key);
        if (!isfinite(x)) x = cal_report_jnum(o, LEGACY[i].key);
        if (isnan(v[LEGACY[i].m])) v[LEGACY[i].m] = field_value(LEGACY[i].m, x);
    }
}

static json_t *doubles(const double *x, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, num_or_null(x[i]));
    return a;
}

static json_t *result_to_json(const cal_result *r)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "format", json_string(FORMAT_NAME));
    json_object_set_new(o, "format_version", json_integer(FORMAT_VERSION));
    json_object_set_new(o, "id", json_string(r->id));
    json_object_set_new(o, "label", json_string(r->label));
    json_t *t = json_object();
    json_object_set_new(t, "name", json_string(r->target_name));
    json_object_set_new(t, "version", json_string(r->target_version));
    json_object_set_new(t, "url", json_string(r->target_url));
    json_object_set_new(o, "target", t);
    json_object_set_new(o, "host", json_string(r->host));
    json_object_set_new(o, "probe", json_string(r->probe));
    json_object_set_new(o, "build", json_string(r->build));
    json_object_set_new(o, "telemetry", json_string(r->telemetry));
    if (r->protocol_damage[0])
        json_object_set_new(o, "protocol_damage", json_string(r->protocol_damage));
    json_object_set_new(o, "created_unix", json_integer(r->created_unix));
    char *vj = cal_verdicts_json(r->verdicts, r->n_verdicts);
    json_t *v = vj ? json_loads(vj, 0, NULL) : NULL;
    free(vj);
    json_object_set_new(o, "verdicts", v ? v : json_array());

    json_t *cells = json_array();
    for (size_t i = 0; i < r->n_cells; i++) {
        const cal_rcell *c = &r->cells[i];
        json_t *co = json_object();
        json_object_set_new(co, "sweep", json_string(cal_sweep_name(c->sweep)));
        if (c->target[0]) json_object_set_new(co, "target", json_string(c->target));
        json_object_set_new(co, "fingerprint", fp_to_json(&c->fp));
        json_object_set_new(co, "metrics", metrics_to_json(c->v));
        json_t *s = json_object();
        for (int k = 0; k < CAL_S__N; k++)
            if (c->ns[k]) json_object_set_new(s, cal_series_key((cal_series)k), doubles(c->s[k], c->ns[k]));
        json_object_set_new(co, "samples", s);
        json_array_append_new(cells, co);
    }
    json_object_set_new(o, "cells", cells);

    json_t *shots = json_array();
    for (size_t i = 0; i < r->n_shots; i++) {
        const cal_shot *s = &r->shots[i];
        json_t *so = json_object();
        json_object_set_new(so, "index", json_integer(s->index));
        json_object_set_new(so, "kind", json_string(cal_shot_kind_key(s->kind)));
        set_num(so, "t_s", s->t_s);
        set_num(so, "dur_s", s->dur_s);
        json_object_set_new(so, "metrics", metrics_to_json(s->v));
        json_array_append_new(shots, so);
    }
    json_object_set_new(o, "shots", shots);
    json_object_set_new(o, "shots_fingerprint", fp_to_json(&r->shots_fp));
    json_t *tel = json_array();
    for (size_t i = 0; i < r->n_tel; i++) {
        json_t *to = json_object();
        set_num(to, "t_s", r->tel[i].t_s);
        set_num(to, "clock_mhz", r->tel[i].clock_mhz);
        set_num(to, "power_w", r->tel[i].power_w);
        json_array_append_new(tel, to);
    }
    json_object_set_new(o, "telemetry_samples", tel);
    return o;
}

int cal_result_to_json(const cal_result *r, cal_buf *out)
{
    json_t *o = result_to_json(r);
    if (!o) return CAL_ENOMEM;
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!s) return CAL_ENOMEM;
    int e = cal_buf_puts(out, s);
    free(s);
    return e;
}

/* The JSON of several results: one result alone, several as an array. */
int cal_report_write_json(const cal_result *const *res, size_t n, cal_buf *out)
{
    if (n == 1) {
        int e = cal_result_to_json(res[0], out);
        return e ? e : cal_buf_puts(out, "\n");
    }
    json_t *a = json_array();
    if (!a) return CAL_ENOMEM;
    for (size_t i = 0; i < n; i++) json_array_append_new(a, result_to_json(res[i]));
    char *s = json_dumps(a, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(a);
    if (!s) return CAL_ENOMEM;
    int e = cal_buf_puts(out, s);
    free(s);
    return e ? e : cal_buf_puts(out, "\n");
}

/* ---- reading ---------------------------------------------------------------- */

/* Read an array of numbers (nulls skipped) into a cell series. */
static int jseries(cal_rcell *c, cal_series s, const json_t *arr)
{
    if (!json_is_array(arr)) return CAL_OK;
    size_t n = json_array_size(arr), k = 0;
    if (!n) return CAL_OK;
    double *x = malloc(n * sizeof *x);
    if (!x) return CAL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (json_is_number(v) && isfinite(json_number_value(v))) x[k++] = json_number_value(v);
    }
    int e = cal_cell_set_samples(c, s, x, k);
    free(x);
    return e;
}

static int fp_from_json(const json_t *o, cal_fingerprint *fp, char *err, size_t errn)
{
    cal_fp_init(fp);
    if (!json_is_object(o)) { cal_report_errf(err, errn, "cell: \"fingerprint\" is missing"); return CAL_EPROTO; }
    const json_t *k = json_object_get(o, "shot_kind");
    if (json_is_string(k) && cal_shot_kind_parse(json_string_value(k), &fp->shot_kind)) {
        cal_report_errf(err, errn, "fingerprint: \"shot_kind\": \"%s\" is not cold, warm, rested, warmup, consecutive or unknown",
                        json_string_value(k));
        return CAL_EPROTO;
    }
    fp->shot_first = (int)cal_report_jint(o, "shot_first", 0, 1 << 30, 0);
    fp->shot_last = (int)cal_report_jint(o, "shot_last", 0, 1 << 30, 0);
    fp->rest_s = cal_report_jnum(o, "rest_s");
    fp->warmup = (int)cal_report_jint(o, "warmup", -1, 1 << 30, -1);
    fp->concurrency = (int)cal_report_jint(o, "concurrency", 0, 1 << 30, 0);
    fp->request_rate = cal_report_jnum(o, "request_rate");
    fp->prompt_tokens = cal_report_jint(o, "prompt_tokens", 0, 1L << 40, 0);
    cal_report_jstr(o, "content", fp->content, sizeof fp->content);
    cal_report_jstr(o, "output_policy", fp->output_policy, sizeof fp->output_policy);
    const json_t *st = json_object_get(o, "streaming");
    fp->streaming = json_is_boolean(st) ? json_is_true(st) : -1;
    cal_report_jstr(o, "api", fp->api, sizeof fp->api);
    cal_report_jstr(o, "probe", fp->probe, sizeof fp->probe);
    cal_report_jstr(o, "host", fp->host, sizeof fp->host);
    cal_report_jstr(o, "slo", fp->slo, sizeof fp->slo);
    cal_report_jstr(o, "protocol_damaged", fp->damaged, sizeof fp->damaged);
    return CAL_OK;
}

int cal_report_own_from_json(const json_t *root, const char *name, cal_result **out,
                         char *err, size_t errn)
{
    cal_result *r = cal_result_new();
    if (!r) return CAL_ENOMEM;
    int e = CAL_OK;
    cal_report_jstr(root, "id", r->id, sizeof r->id);
    cal_report_jstr(root, "label", r->label, sizeof r->label);
    const json_t *t = json_object_get(root, "target");
    cal_report_jstr(t, "name", r->target_name, sizeof r->target_name);
    cal_report_jstr(t, "version", r->target_version, sizeof r->target_version);
    cal_report_jstr(t, "url", r->target_url, sizeof r->target_url);
    cal_report_jstr(root, "host", r->host, sizeof r->host);
    cal_report_jstr(root, "probe", r->probe, sizeof r->probe);
    cal_report_jstr(root, "build", r->build, sizeof r->build);
    cal_report_jstr(root, "telemetry", r->telemetry, sizeof r->telemetry);
    cal_report_jstr(root, "protocol_damage", r->protocol_damage, sizeof r->protocol_damage);
    r->created_unix = cal_report_i64(cal_report_jnum(root, "created_unix"), 0, 1e13, 0);
    if (!r->label[0]) snprintf(r->label, sizeof r->label, "%s", r->target_name[0] ? r->target_name : name ? name : "result");
    if (!r->id[0] && name) snprintf(r->id, sizeof r->id, "%s", name);
    int version = (int)cal_report_jint(root, "format_version", 1, 1000, 1);
    size_t i;
    const json_t *v;
    const json_t *vjs = json_object_get(root, "verdicts");
    char *vj = vjs ? json_dumps(vjs, JSON_COMPACT) : NULL;
    cal_verdict *vs = malloc(CAL_RES_MAX_VERDICTS * sizeof *vs);
    size_t nv = vj && vs ? cal_verdicts_from_json(vj, vs, CAL_RES_MAX_VERDICTS) : 0;
    for (size_t k = 0; k < nv; k++) cal_result_add_verdict(r, &vs[k]);
    free(vs);
    free(vj);

    const json_t *cells = json_object_get(root, "cells");
    if (!json_is_array(cells)) {
        cal_report_errf(err, errn, "\"cells\" is missing or not an array");
        e = CAL_EPROTO; goto fail;
    }
    json_array_foreach(cells, i, v) {
        cal_sweep sw = CAL_SWEEP_OTHER;
        const json_t *swj = json_object_get(v, "sweep");
        if (json_is_string(swj) && cal_sweep_parse(json_string_value(swj), &sw)) {
            cal_report_errf(err, errn, "cells[%zu]: \"sweep\": \"%s\" is not shots, concurrency, prompt or other",
                            i, json_string_value(swj));
            e = CAL_EPROTO; goto fail;
        }
        cal_rcell *c = cal_result_add_cell(r, sw);
        if (!c) { e = CAL_ENOMEM; goto fail; }
        if ((e = fp_from_json(json_object_get(v, "fingerprint"), &c->fp, err, errn))) goto fail;
        cal_report_jstr(v, "target", c->target, sizeof c->target);
        metrics_from_json(json_object_get(v, "metrics"), v, version, c->v);
        const json_t *s = json_object_get(v, "samples");
        for (int k = 0; k < CAL_S__N; k++)
            if ((e = jseries(c, (cal_series)k, json_object_get(s, cal_series_key((cal_series)k))))) goto fail;
    }
    json_array_foreach(json_object_get(root, "shots"), i, v) {
        cal_shot s;
        cal_shot_init(&s);
        s.index = (int)cal_report_jint(v, "index", 0, 1 << 30, 0);
        if (cal_shot_kind_parse(json_is_string(json_object_get(v, "kind")) ?
                                json_string_value(json_object_get(v, "kind")) : "unknown", &s.kind))
            s.kind = CAL_SHOT_UNKNOWN;
        s.t_s = cal_report_jnum(v, "t_s");
        s.dur_s = cal_report_jnum(v, "dur_s");
        metrics_from_json(version >= 2 ? json_object_get(v, "metrics") : v, v, version, s.v);
        if ((e = cal_result_add_shot(r, &s))) goto fail;
    }
    if (json_is_object(json_object_get(root, "shots_fingerprint")) &&
        (e = fp_from_json(json_object_get(root, "shots_fingerprint"), &r->shots_fp, err, errn))) goto fail;
    json_array_foreach(json_object_get(root, "telemetry_samples"), i, v) {
        cal_tel_point p = { cal_report_jnum(v, "t_s"), cal_report_jnum(v, "clock_mhz"),
                            cal_report_jnum(v, "power_w") };
        if ((e = cal_result_add_tel(r, &p))) goto fail;
    }
    *out = r;
    return CAL_OK;
fail:
    if (e == CAL_ENOMEM) cal_report_errf(err, errn, "out of memory");
    if (e == CAL_ETOOBIG) cal_report_errf(err, errn, "too many cells, shots or samples");
    cal_result_free(&r);
    return e;
}

int cal_report_own_is(const json_t *root)
{
    const json_t *fmt = json_object_get(root, "format");
    return json_is_string(fmt) && !strcmp(json_string_value(fmt), FORMAT_NAME);
}
