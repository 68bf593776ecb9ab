/* caliper — the export of a stored run: writes `caliper export RUN --json`
 * ("format": "caliper-run", format_version CAL_DOC_VERSION: the run, its
 * cells with their requests, the pooled "view" — the caliper-result document
 * `caliper report --format json` writes for the run — and the schema) and
 * `--csv` (one RFC 4180 row per cell), and reads the JSON back: a file with a
 * view as that result; an older one (format_version 1, its own "summary")
 * through the store's own types (cal_run_data) into a result, so an
 * exported file and the stored run it came from read the same. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/probe.h"
#include "caliper/report.h"
#include "caliper/series.h"
#include "caliper/store.h"
#include "lib/util/c_locale.h"
#include "report_internal.h"

#define EXPORT_FORMAT "caliper-run"
#define T0_NS 1000000000LL   /* times are offsets: keep them away from 0 ("unset") */

static json_t *parse_obj(const char *s)
{
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    return j ? j : json_null();
}
static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }
/* A stored JSON text as its value; one that does not parse as its text (a
 * string), so an export loses nothing of a damaged row. */
static json_t *as_stored(const char *s)
{
    json_t *j = s ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
    if (!j && s) j = json_string(s);
    return j ? j : json_null();
}

/* ---- writing: the cell's protocol columns, then the summary fields ------ */
typedef struct pcol { const char *name; int type; } pcol;   /* 0 int, 1 real, 2 text */
static const pcol PCOLS[] = {
    {"cell_id", 0}, {"seq", 0}, {"kind", 2}, {"target", 2}, {"concurrency", 0},
    {"request_rate", 1}, {"prompt_tokens", 0}, {"prompt_exact", 0}, {"content", 2},
    {"unique_prompts", 0}, {"max_tokens", 0}, {"output_fixed", 0}, {"shot_index", 0},
    {"shot_kind", 2}, {"rest_before_s", 1}, {"process_age_s", 1}, {"start_offset_s", 1},
    {"num_prompts", 0}, {"client_cpu_us_per_chunk", 1}, {"send_lag_p99_ms", 1},
    {"prompt_basis", 2}, {"prompt_asked", 0}, {"prompt_offset", 0},
};
#define N_PCOLS (sizeof PCOLS / sizeof PCOLS[0])

static void pvalue(const cal_run_data *d, const cal_cell *c, size_t i, double *v, const char **s)
{
    *s = NULL;
    *v = NAN;
    switch (i) {
    case 0: *v = (double)c->id; break;
    case 1: *v = c->seq; break;
    case 2: *s = cal_cell_kind_name(c->kind); break;
    case 3: *s = c->target; break;
    case 4: *v = c->concurrency; break;
    case 5: *v = c->rate; break;
    case 6: *v = c->prompt_tokens; break;
    case 7: *v = c->prompt_exact; break;
    case 8: *s = c->content; break;
    case 9: *v = c->unique_prompts; break;
    case 10: *v = c->max_tokens; break;
    case 11: *v = c->output_fixed; break;
    case 12: *v = c->shot_index; break;
    case 13: *s = cal_shot_kind_key(c->shot_kind); break;
    case 14: *v = c->rest_before_ns / 1e9; break;
    case 15: *v = c->process_age_ns >= 0 ? c->process_age_ns / 1e9 : NAN; break;
    case 16: *v = (c->start_ns - d->run.t0_mono_ns) / 1e9; break;
    case 17: *v = (double)c->n_requests; break;
    case 18: *v = c->chunks ? c->cpu_ns / 1e3 / (double)c->chunks : NAN; break;
    case 19: *v = c->send_lag_p99_ms; break;
    case 20: *s = cal_prompt_basis_key(c->prompt_basis); break;
    case 21: *v = c->prompt_asked > 0 ? c->prompt_asked : NAN; break;
    case 22: *v = c->prompt_offset >= 0 ? c->prompt_offset : NAN; break;
    }
}

static void summary_json(json_t *o, const cal_summary *s)
{
    for (size_t i = 0; i < cal_summary_n_fields; i++) {
        const cal_field *fl = &cal_summary_fields[i];
        double v = cal_summary_get(s, fl);
        json_object_set_new(o, fl->name, fl->type == CAL_FIELD_INT ? json_integer((json_int_t)v)
                                                                   : jreal(v));
    }
}

/* A recorded fact of request q under its key in cal_req_fields: the times
 * are offsets (ms) so the reader can rebuild the timestamps. */
static json_t *request_fact(const char *key, const cal_cell *c, const cal_req_result *q)
{
    int64_t base = cal_req_base_ns(q);
    if (!strcmp(key, "status")) return json_string(cal_req_status_name(q->status));
    if (!strcmp(key, "http_status")) return q->http_status ? json_integer(q->http_status) : json_null();
    if (!strcmp(key, "error")) return q->error ? json_string(q->error) : json_null();
    if (!strcmp(key, "sched_offset_ms"))
        return q->sched_ns > 0 ? json_real((q->sched_ns - c->start_ns) / 1e6) : json_null();
    if (!strcmp(key, "send_lag_ms"))
        return q->send_ns > 0 && q->sched_ns > 0 ? json_real((q->send_ns - q->sched_ns) / 1e6) : json_null();
    if (!strcmp(key, "last_token_ms"))
        return q->last_token_ns > 0 && base > 0 ? json_real((q->last_token_ns - base) / 1e6) : json_null();
    if (!strcmp(key, "prompt_tokens")) return q->prompt_tokens >= 0 ? json_integer(q->prompt_tokens) : json_null();
    if (!strcmp(key, "output_tokens")) return q->output_tokens >= 0 ? json_integer(q->output_tokens) : json_null();
    if (!strcmp(key, "token_source")) return json_string(q->tok_source == CAL_TOKSRC_USAGE ? "usage" : "chunks");
    if (!strcmp(key, "n_chunks")) return json_integer(q->n_chunks);
    if (!strcmp(key, "server_decode_ms")) return q->server_decode_ms >= 0 ? json_real(q->server_decode_ms) : json_null();
    if (!strcmp(key, "server_decode_tokens"))
        return q->server_decode_tokens >= 0 ? json_integer(q->server_decode_tokens) : json_null();
    if (!strcmp(key, "cached_tokens"))
        return q->cached_tokens >= 0 ? json_integer(q->cached_tokens) : json_null();
    return json_null();
}

/* One request as the object the per-request table (series.h) describes:
 * facts as recorded, series through the one extractor. itl_ms is absent
 * when the chunk times were not kept. */
static json_t *request_json(const cal_cell *c, const cal_req_result *q)
{
    json_t *ro = json_object();
    for (size_t k = 0; ro && k < cal_req_n_fields; k++) {
        const cal_req_field *f = &cal_req_fields[k];
        if (f->series < 0) {
            json_object_set_new(ro, f->key, request_fact(f->key, c, q));
        } else if (f->series == CAL_S_ITL_MS) {
            if (!q->chunk_ns) continue;
            json_t *itl = json_array();
            cal_itl_iter it;
            double g;
            cal_itl_begin_any(&it, q);   /* a failed request's times are kept too */
            while (cal_itl_next(&it, &g)) json_array_append_new(itl, json_real(g));
            json_object_set_new(ro, f->key, itl);
        } else {
            json_object_set_new(ro, f->key, jreal(cal_req_value(q, (cal_series)f->series)));
        }
    }
    return ro;
}

/* The result of run d as the result writer prints it, parsed back: the
 * numbers pass through the same text, so the view and a standalone report
 * of the run hold the same values. */
static int export_view(const cal_run_data *d, json_t **view)
{
    cal_result *res = NULL;
    char err[256];
    cal_buf b = CAL_BUF_INIT(0);
    int e = cal_result_from_run_data(d, &res, err, sizeof err);
    if (!e) e = cal_result_to_json(res, &b);
    cal_result_free(&res);
    if (!e) {
        *view = b.data ? json_loadb(b.data, b.len, 0, NULL) : NULL;
        if (!*view) e = CAL_ENOMEM;
    }
    cal_buf_free(&b);
    return e;
}

/* json_dump_callback's writers: straight into the caller's buffer or
 * file, never to a text of its own that is then copied (at 2,048 streams x
 * 3 requests that text is 16 MB, held twice at the peak of the process). */
typedef struct dump_to {
    cal_buf *out;               /* into this buffer, or ... */
    FILE    *f;                 /* ... this file, through stage: jansson hands
                                   over a token at a time, and an fwrite each
                                   cost 6 % of the export */
    int      rc;
    size_t   n;
    char     stage[1 << 16];
} dump_to;
static int dump_flush(dump_to *t)
{
    if (t->n && fwrite(t->stage, 1, t->n, t->f) != t->n) t->rc = CAL_EIO;
    t->n = 0;
    return t->rc;
}
static int dump_write(const char *buf, size_t n, void *ud)
{
    dump_to *t = ud;
    if (t->out) {
        t->rc = cal_buf_append(t->out, buf, n);
    } else if (t->n + n <= sizeof t->stage) {
        memcpy(t->stage + t->n, buf, n);
        t->n += n;
    } else if (!dump_flush(t) && n > sizeof t->stage / 2) {
        if (fwrite(buf, 1, n, t->f) != n) t->rc = CAL_EIO;
    } else if (!t->rc) {
        memcpy(t->stage, buf, n);
        t->n = n;
    }
    return t->rc ? -1 : 0;
}

static int export_json(const cal_run_data *d, dump_to *t)
{
    const cal_run *r = &d->run;
    cal_analysis *an = NULL;
    if (cal_analysis_run(d, &an)) return CAL_ENOMEM;
    json_t *root = json_object(), *run = json_object();
    json_object_set_new(root, "format", json_string("caliper-run"));
    json_object_set_new(root, "format_version", json_integer(CAL_DOC_VERSION));
    json_object_set_new(run, "id", json_integer(r->id));
    json_object_set_new(run, "label", r->label ? json_string(r->label) : json_null());
    json_object_set_new(run, "status", json_string(cal_run_status_name(r->status)));
    json_object_set_new(run, "started_unix_s", json_real(r->started_wall_ns / 1e9));
    json_object_set_new(run, "ended_unix_s", r->ended_wall_ns > 0 ? json_real(r->ended_wall_ns / 1e9)
                                                                 : json_null());
    json_object_set_new(run, "build", r->build ? json_string(r->build) : json_null());
    json_object_set_new(run, "host", parse_obj(r->host_json));
    /* as stored: a text that is not JSON kept as a string, never lost to
     * null, and the damage the reader found named beside it */
    json_object_set_new(run, "target", as_stored(r->target_json));
    json_object_set_new(run, "protocol", as_stored(r->protocol_json));
    if (d->proto.n_damaged) {
        json_t *dm = json_object();
        json_object_set_new(dm, "field", json_string(d->proto.damaged_field));
        json_object_set_new(dm, "reason", json_string(d->proto.damaged));
        json_object_set_new(dm, "fields", json_integer(d->proto.n_damaged));
        json_object_set_new(run, "protocol_damage", dm);
    }
    json_object_set_new(run, "telemetry", parse_obj(r->telemetry_json));
    char *vj = cal_verdicts_json(an->verdicts, an->n_verdicts);
    json_object_set_new(run, "verdicts", parse_obj(vj));
    free(vj);
    json_object_set_new(root, "run", run);

    json_t *cells = json_array();
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        json_t *o = json_object();
        for (size_t k = 0; k < N_PCOLS; k++) {
            double v;
            const char *s;
            pvalue(d, c, k, &v, &s);
            json_object_set_new(o, PCOLS[k].name,
                                PCOLS[k].type == 2 ? json_string(s ? s : "")
                                : PCOLS[k].type == 0 && isfinite(v) ? json_integer((json_int_t)v)
                                : jreal(v));
        }
        summary_json(o, &c->sum);
        json_t *reqs = json_array();
        for (int64_t j = 0; j < c->n_requests && c->req_first + (size_t)j < d->n_reqs; j++) {
            const cal_req_result *q = &d->reqs[c->req_first + (size_t)j];
            json_t *ro = request_json(c, q);
            json_array_append_new(reqs, ro);
        }
        json_object_set_new(o, "requests", reqs);
        json_array_append_new(cells, o);
    }
    json_object_set_new(root, "cells", cells);

    /* the pooled view: the very document `caliper report --format json`
     * writes for this run, by the same code (from_store.c, json.c) */
    json_t *view = NULL;
    int rc = export_view(d, &view);
    if (rc) {
        cal_analysis_free(&an);
        json_decref(root);
        return rc;
    }
    json_object_set_new(root, "view", view);
    /* the one schema the summaries above follow (schema.h) */
    json_t *schema = json_array();
    for (size_t i = 0; i < cal_summary_n_fields; i++) {
        const cal_field *fl = &cal_summary_fields[i];
        json_t *o = json_object();
        json_object_set_new(o, "key", json_string(fl->name));
        json_object_set_new(o, "label", json_string(fl->label));
        json_object_set_new(o, "unit", json_string(fl->unit));
        json_object_set_new(o, "statistic", json_string(cal_stat_name(fl->stat)));
        json_object_set_new(o, "column", json_string(cal_column_name(fl->column)));
        json_object_set_new(o, "better", json_string(cal_better_name(fl->better)));
        json_object_set_new(o, "pool", json_string(cal_pool_name(fl->pool)));
        json_object_set_new(o, "decimals", json_integer(fl->decimals));
        json_object_set_new(o, "doc", json_string(fl->doc));
        json_array_append_new(schema, o);
    }
    json_object_set_new(root, "schema", schema);
    /* the one table the requests above follow (series.h) */
    json_t *rschema = json_array();
    for (size_t i = 0; i < cal_req_n_fields; i++) {
        const cal_req_field *fl = &cal_req_fields[i];
        json_t *o = json_object();
        json_object_set_new(o, "key", json_string(fl->key));
        json_object_set_new(o, "unit", json_string(fl->unit));
        json_object_set_new(o, "series", fl->series >= 0 ? json_string(cal_series_key((cal_series)fl->series))
                                                         : json_null());
        json_object_set_new(o, "doc", json_string(fl->doc));
        json_array_append_new(rschema, o);
    }
    json_object_set_new(root, "request_schema", rschema);
    if (json_dump_callback(root, dump_write, t, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0
        || dump_write("\n", 1, t) != 0)
        rc = t->rc ? t->rc : CAL_ENOMEM;
    cal_analysis_free(&an);
    json_decref(root);
    return rc;
}

int cal_run_export_json(const cal_run_data *d, cal_buf *out)
{
    dump_to *t = malloc(sizeof *t);
    if (!t) return CAL_ENOMEM;
    t->out = out;
    t->f = NULL;
    t->rc = CAL_OK;
    t->n = 0;
    int rc = export_json(d, t);
    free(t);
    return rc;
}

int cal_run_export_json_file(const cal_run_data *d, FILE *f)
{
    dump_to *t = malloc(sizeof *t);
    if (!t) return CAL_ENOMEM;
    t->out = NULL;
    t->f = f;
    t->rc = CAL_OK;
    t->n = 0;
    int rc = export_json(d, t);
    if (!rc) rc = dump_flush(t);
    free(t);
    return rc ? rc : fflush(f) ? CAL_EIO : CAL_OK;
}

/* One row per cell through the one CSV writer (csv.h, RFC 4180). */
int cal_run_export_csv(const cal_run_data *d, cal_buf *out)
{
    cal_csv_writer w;
    char t[64];
    cal_csv_writer_buf(&w, out);
    cal_csv_put(&w, "run_id");
    for (size_t k = 0; k < N_PCOLS; k++) cal_csv_put(&w, PCOLS[k].name);
    for (size_t i = 0; i < cal_summary_n_fields; i++) cal_csv_put(&w, cal_summary_fields[i].name);
    cal_csv_end_row(&w);
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        cal_csv_put_int(&w, (long long)d->run.id);
        for (size_t k = 0; k < N_PCOLS; k++) {
            double v;
            const char *s;
            pvalue(d, c, k, &v, &s);
            if (PCOLS[k].type == 2) cal_csv_put(&w, s ? s : "");
            else if (PCOLS[k].type == 0 && isfinite(v)) cal_csv_put_int(&w, (long long)v);
            else cal_csv_put_num(&w, v, 6);
        }
        for (size_t j = 0; j < cal_summary_n_fields; j++) {
            const cal_field *fl = &cal_summary_fields[j];
            double v = cal_summary_get(&c->sum, fl);
            if (!isfinite(v)) cal_csv_put(&w, "");   /* absent: empty, never 0 */
            else if (fl->type == CAL_FIELD_INT) cal_csv_put_int(&w, (long long)v);
            else {
                cal_snprintf(t, sizeof t, "%.*f", fl->decimals + 3, v);   /* "2.5" in any locale */
                cal_csv_put(&w, t);
            }
        }
        cal_csv_end_row(&w);
    }
    return w.err;
}

/* ---- reading ------------------------------------------------------------ */

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
    cal_protocol_clear(&d->proto);
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
    r->server_prefill_ms = -1;
    double sdm = cal_report_jnum(q, "server_decode_ms");
    r->server_decode_ms = isfinite(sdm) && sdm >= 0 && sdm <= 1e12 ? sdm : -1;
    r->server_decode_tokens = (int)cal_report_jint(q, "server_decode_tokens", -1, 1 << 30, -1);
    r->cached_tokens = (int)cal_report_jint(q, "cached_tokens", -1, 1 << 30, -1);
    if (r->cached_tokens > r->prompt_tokens && r->prompt_tokens >= 0) r->cached_tokens = -1;
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
    double last = cal_report_jnum(q, "last_token_ms");   /* decode needs it without chunks */
    if (isfinite(last) && r->first_token_ns) r->last_token_ns = r->sched_ns + ms_ns(last);
    return CAL_OK;
}

/* The cells (and requests) of an export document into *d, from its parsed
 * root; the caller frees d's members (free_data) on failure too. */
static int data_from_root(const json_t *root, const char *name, cal_run_data *d,
                          char *err, size_t errn)
{
    const json_t *run = json_object_get(root, "run"), *cells = json_object_get(root, "cells");
    int e = CAL_OK;
    d->run.id = cal_report_jint(run, "id", 0, 1L << 50, 0);
    d->run.label = dup_str(run, "label");
    d->run.build = dup_str(run, "build");
    d->run.started_wall_ns = cal_report_i64(num0(run, "started_unix_s", 0) * 1e9, 0, 9e18, 0);
    d->run.t0_mono_ns = T0_NS;
    d->run.host_json = dump_or_null(json_object_get(run, "host"));
    /* a damaged row's text was exported as a string: read it as stored */
    d->run.target_json = json_is_string(json_object_get(run, "target")) ? dup_str(run, "target")
                         : dump_or_null(json_object_get(run, "target"));
    d->run.protocol_json = json_is_string(json_object_get(run, "protocol")) ? dup_str(run, "protocol")
                           : dump_or_null(json_object_get(run, "protocol"));
    d->run.telemetry_json = dump_or_null(json_object_get(run, "telemetry"));
    d->run.verdicts_json = dump_or_null(json_object_get(run, "verdicts"));
    if ((e = cal_run_data_read_protocol(d))) goto fail;

    size_t nc = json_array_size(cells), nr = 0, i;
    const json_t *c;
    json_array_foreach(cells, i, c) nr += json_array_size(json_object_get(c, "requests"));
    if (nc > 65536 || nr > (1u << 24)) { e = CAL_ETOOBIG; goto fail; }
    d->cells = calloc(nc ? nc : 1, sizeof *d->cells);
    d->reqs = calloc(nr ? nr : 1, sizeof *d->reqs);
    if (!d->cells || !d->reqs) { e = CAL_ENOMEM; goto fail; }
    json_array_foreach(cells, i, c) {
        cal_cell *x = &d->cells[d->n_cells];
        x->seq = (int)i;
        const json_t *k = json_object_get(c, "kind");
        for (int kk = 0; kk <= CAL_CELL_RATE && json_is_string(k); kk++)
            if (!strcmp(json_string_value(k), cal_cell_kind_name((cal_cell_kind)kk))) x->kind = (cal_cell_kind)kk;
        cal_report_jstr(c, "target", x->target, sizeof x->target);
        x->concurrency = (int)cal_report_jint(c, "concurrency", 0, 1 << 30, 0);
        x->rate = num0(c, "request_rate", 0);
        x->prompt_tokens = (int)cal_report_jint(c, "prompt_tokens", 0, 1 << 30, 0);
        x->prompt_exact = flag(c, "prompt_exact", 0);
        const json_t *pb = json_object_get(c, "prompt_basis");
        if (!json_is_string(pb) || cal_prompt_basis_parse(json_string_value(pb), &x->prompt_basis))
            x->prompt_basis = CAL_PROMPT_UNRECORDED;
        x->prompt_asked = (int)cal_report_jint(c, "prompt_asked", 0, 1 << 30, 0);
        x->prompt_offset = (int)cal_report_jint(c, "prompt_offset", -1, 1 << 30, -1);
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
        x->req_first = d->n_reqs;
        size_t j;
        const json_t *q;
        json_array_foreach(json_object_get(c, "requests"), j, q)
            if ((e = read_request(q, x, &d->reqs[d->n_reqs++]))) goto fail;
        x->n_requests = (int64_t)(d->n_reqs - x->req_first);
        d->n_cells++;
    }
    return CAL_OK;
fail:
    cal_report_errf(err, errn, "%s: %s", name ? name : "export", cal_strerror(e));
    return e;
}

/* The root of an export document, or CAL_EPROTO naming what it is not. */
static int export_root(const char *text, size_t len, const char *name, json_t **root,
                       char *err, size_t errn)
{
    int e = cal_report_parse(text, len, root, err, errn);
    if (e) return e;
    const json_t *fmt = json_object_get(*root, "format");
    const json_t *run = json_object_get(*root, "run"), *cells = json_object_get(*root, "cells");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), EXPORT_FORMAT) ||
        !json_is_object(run) || !json_is_array(cells)) {
        json_decref(*root);
        *root = NULL;
        cal_report_errf(err, errn, "%s: not a caliper result (\"format\": \"caliper-result\"), "
                        "a caliper export (\"format\": \"caliper-run\"), or a vLLM bench file",
                        name ? name : "JSON");
        return CAL_EPROTO;
    }
    return CAL_OK;
}

int cal_run_data_from_export(const char *text, size_t len, const char *name,
                             cal_run_data **out, char *err, size_t errn)
{
    json_t *root;
    int e = export_root(text, len, name, &root, err, errn);
    if (e) return e;
    cal_run_data *d = calloc(1, sizeof *d);
    if (!d) { json_decref(root); return CAL_ENOMEM; }
    e = data_from_root(root, name, d, err, errn);
    json_decref(root);
    if (e) { cal_run_data_free(&d); return e; }
    *out = d;
    return CAL_OK;
}

int cal_result_from_export(const char *text, size_t len, const char *name,
                           cal_result **out, char *err, size_t errn)
{
    json_t *root;
    int e = export_root(text, len, name, &root, err, errn);
    if (e) return e;
    /* version 3 on: the pooled view the writer embedded is the result; an
     * older file (its own "summary", ignored) is rebuilt from its requests */
    const json_t *view = json_object_get(root, "view");
    if (cal_report_jint(root, "format_version", 1, 1000, 1) >= 3 && json_is_object(view)) {
        e = cal_report_own_from_json(view, name, out, err, errn);
        json_decref(root);
        return e;
    }
    cal_run_data d;
    memset(&d, 0, sizeof d);
    e = data_from_root(root, name, &d, err, errn);
    json_decref(root);
    if (e) { free_data(&d); return e; }
    e = cal_result_from_run_data(&d, out, err, errn);
    if (!e && name && !d.run.label) snprintf((*out)->label, sizeof (*out)->label, "%s", name);
    free_data(&d);
    return e;
}
