/* caliper — reads `caliper export RUN --json` ("format": "caliper-run") back
 * into the store's own types (cal_run_data) and from there into a result, so
 * an exported file and the stored run it came from read the same. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/probe.h"
#include "caliper/report.h"
#include "caliper/store.h"
#include "report_internal.h"

#define EXPORT_FORMAT "caliper-run"
#define T0_NS 1000000000LL   /* times are offsets: keep them away from 0 ("unset") */

static char *dump_or_null(const json_t *v)
{
    return v && !json_is_null(v) ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
}

static char *dup_str(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static double num0(const json_t *o, const char *k, double dflt)
{
    double v = cal_report_jnum(o, k);
    return isfinite(v) ? v : dflt;
}

/* A flag written as true/false or 1/0; dflt when absent. */
static int flag(const json_t *o, const char *k, int dflt)
{
    const json_t *v = json_object_get(o, k);
    if (json_is_boolean(v)) return json_is_true(v);
    if (json_is_number(v)) return json_number_value(v) != 0;
    return dflt;
}

/* ms or s to ns, clamped to ±100 days: a hostile file cannot overflow a cast. */
static int64_t ms_ns(double ms) { return cal_report_i64(ms * 1e6, -8.64e15, 8.64e15, 0); }
static int64_t s_ns(double s) { return cal_report_i64(s * 1e9, -8.64e15, 8.64e15, 0); }

static void free_data(cal_run_data *d)
{
    cal_run_clear(&d->run);
    for (size_t i = 0; i < d->n_reqs; i++) { free(d->reqs[i].chunk_ns); free(d->reqs[i].error); }
    free(d->reqs);
    free(d->cells);
}

static int read_request(const json_t *q, const cal_cell *c, cal_req_result *r)
{
    memset(r, 0, sizeof *r);
    r->status = CAL_REQ_STREAM_ERROR;
    const json_t *st = json_object_get(q, "status");
    for (int s = 0; s < CAL_REQ_N_STATUS && json_is_string(st); s++)
        if (!strcmp(json_string_value(st), cal_req_status_name((cal_req_status)s))) r->status = (cal_req_status)s;
    r->http_status = (int)cal_report_jint(q, "http_status", 0, 999, 0);
    r->sched_ns = c->start_ns + ms_ns(num0(q, "sched_offset_ms", 0));
    r->send_ns = r->sched_ns + ms_ns(num0(q, "send_lag_ms", 0));
    double ttft = cal_report_jnum(q, "ttft_ms"), e2e = cal_report_jnum(q, "e2el_ms");
    r->first_token_ns = isfinite(ttft) ? r->sched_ns + ms_ns(ttft) : 0;
    r->end_ns = isfinite(e2e) ? r->sched_ns + ms_ns(e2e) : 0;
    r->prompt_tokens = (int)cal_report_jint(q, "prompt_tokens", -1, 1 << 30, -1);
    r->output_tokens = (int)cal_report_jint(q, "output_tokens", -1, 1 << 30, -1);
    r->server_prefill_ms = r->server_decode_ms = -1;
    r->server_decode_tokens = -1;
    r->last_token_ns = r->first_token_ns;
    const json_t *itl = json_object_get(q, "itl_ms");
    size_t n = json_array_size(itl);
    if (r->first_token_ns && n < (1u << 20)) {
        r->chunk_ns = malloc((n + 1) * sizeof *r->chunk_ns);
        if (!r->chunk_ns) return CAL_ENOMEM;
        r->chunk_ns[0] = r->first_token_ns;
        for (size_t i = 0; i < n; i++)
            r->chunk_ns[i + 1] = r->chunk_ns[i] +   /* each gap within [0, 1000 s]: the sum cannot overflow */
                cal_report_i64(json_number_value(json_array_get(itl, i)) * 1e6, 0, 1e12, 0);
        r->n_chunks = (int)n + 1;
        r->last_token_ns = r->chunk_ns[n];
    }
    return CAL_OK;
}

int cal_result_from_export(const char *text, size_t len, const char *name,
                           cal_result **out, char *err, size_t errn)
{
    json_t *root;
    int e = cal_report_parse(text, len, &root, err, errn);
    if (e) return e;
    const json_t *fmt = json_object_get(root, "format");
    const json_t *run = json_object_get(root, "run"), *cells = json_object_get(root, "cells");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), EXPORT_FORMAT) ||
        !json_is_object(run) || !json_is_array(cells)) {
        json_decref(root);
        cal_report_errf(err, errn, "%s: not a caliper result (\"format\": \"caliper-result\"), "
                        "a caliper export (\"format\": \"caliper-run\"), or a vLLM bench file",
                        name ? name : "JSON");
        return CAL_EPROTO;
    }
    cal_run_data d;
    memset(&d, 0, sizeof d);
    d.run.id = cal_report_jint(run, "id", 0, 1L << 50, 0);
    d.run.label = dup_str(run, "label");
    d.run.build = dup_str(run, "build");
    d.run.started_wall_ns = cal_report_i64(num0(run, "started_unix_s", 0) * 1e9, 0, 9e18, 0);
    d.run.t0_mono_ns = T0_NS;
    d.run.host_json = dump_or_null(json_object_get(run, "host"));
    d.run.target_json = dump_or_null(json_object_get(run, "target"));
    d.run.protocol_json = dump_or_null(json_object_get(run, "protocol"));
    d.run.telemetry_json = dump_or_null(json_object_get(run, "telemetry"));
    d.run.verdicts_json = dump_or_null(json_object_get(run, "verdicts"));

    size_t nc = json_array_size(cells), nr = 0, i;
    const json_t *c;
    json_array_foreach(cells, i, c) nr += json_array_size(json_object_get(c, "requests"));
    if (nc > 65536 || nr > (1u << 24)) { e = CAL_ETOOBIG; goto fail; }
    d.cells = calloc(nc ? nc : 1, sizeof *d.cells);
    d.reqs = calloc(nr ? nr : 1, sizeof *d.reqs);
    if (!d.cells || !d.reqs) { e = CAL_ENOMEM; goto fail; }
    json_array_foreach(cells, i, c) {
        cal_cell *x = &d.cells[d.n_cells];
        x->seq = (int)i;
        const json_t *k = json_object_get(c, "kind");
        for (int kk = 0; kk <= CAL_CELL_RATE && json_is_string(k); kk++)
            if (!strcmp(json_string_value(k), cal_cell_kind_name((cal_cell_kind)kk))) x->kind = (cal_cell_kind)kk;
        cal_report_jstr(c, "target", x->target, sizeof x->target);
        x->concurrency = (int)cal_report_jint(c, "concurrency", 0, 1 << 30, 0);
        x->rate = num0(c, "request_rate", 0);
        x->prompt_tokens = (int)cal_report_jint(c, "prompt_tokens", 0, 1 << 30, 0);
        x->prompt_exact = flag(c, "prompt_exact", 0);
        cal_report_jstr(c, "content", x->content, sizeof x->content);
        x->unique_prompts = flag(c, "unique_prompts", 1);
        x->max_tokens = (int)cal_report_jint(c, "max_tokens", 0, 1 << 30, 0);
        x->output_fixed = flag(c, "output_fixed", 0);
        x->shot_index = (int)cal_report_jint(c, "shot_index", 0, 1 << 30, 0);
        const json_t *sk = json_object_get(c, "shot_kind");
        if (!json_is_string(sk) || cal_shot_kind_parse(json_string_value(sk), &x->shot_kind))
            x->shot_kind = CAL_SHOT_UNKNOWN;
        x->rest_before_ns = s_ns(num0(c, "rest_before_s", 0));
        x->process_age_ns = -1;
        cal_summary_init(&x->sum);
        for (size_t f = 0; f < cal_summary_n_fields; f++) {
            const cal_field *fl = &cal_summary_fields[f];
            cal_summary_set(&x->sum, fl, cal_report_jnum(c, fl->name));
        }
        x->start_ns = T0_NS + s_ns(num0(c, "start_offset_s", 0));
        x->end_ns = x->start_ns + s_ns(num0(c, "duration", 0));
        x->req_first = d.n_reqs;
        size_t j;
        const json_t *q;
        json_array_foreach(json_object_get(c, "requests"), j, q)
            if ((e = read_request(q, x, &d.reqs[d.n_reqs++]))) goto fail;
        x->n_requests = (int64_t)(d.n_reqs - x->req_first);
        d.n_cells++;
    }
    json_decref(root);
    root = NULL;
    e = cal_result_from_run_data(&d, out, err, errn);
    if (!e && name && !d.run.label) snprintf((*out)->label, sizeof (*out)->label, "%s", name);
    free_data(&d);
    return e;
fail:
    cal_report_errf(err, errn, "%s: %s", name ? name : "export", cal_strerror(e));
    json_decref(root);
    free_data(&d);
    return e;
}
