/* Shards: split a plan over N clients, write one client's run as a shard
 * document, read one back (checked: it comes from another machine), and
 * merge N of them into one stored run (shard.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "caliper/protocol_record.h"
#include "caliper/shard.h"
#include "lib/protocol/shard_internal.h"
#include "lib/util/c_locale.h"
#include "lib/util/json_span.h"

#define FORMAT "caliper-shard"
#define FORMAT_VERSION 1
#define MAX_SHARDS 4096
#define TS_MAX (INT64_C(1) << 62)

/* ---- the plan's share ---------------------------------------------------- */

static long share(long total, int i, int n) { return total / n + (i < total % n); }

int cal_shard_plan(const cal_run_plan *full, int i, int n, cal_run_plan *out, char *why,
                   size_t why_len)
{
    if (n < 1 || n > MAX_SHARDS || i < 0 || i >= n)
        return cal_why(why, why_len, CAL_EINVAL, "shard: %d/%d is not a shard of 1..%d shards",
                       i + 1, n, MAX_SHARDS);
    *out = *full;
    if (!(full->rate > 0))
        for (size_t k = 0; k < full->n_conc; k++) {
            if (full->concurrency[k] < n)
                return cal_why(why, why_len, CAL_EINVAL,
                               "concurrency: %d cannot be split over %d shards (each needs at "
                               "least one stream)", full->concurrency[k], n);
            out->concurrency[k] = (int)share(full->concurrency[k], i, n);
        }
    else if (full->cap_given)
        for (size_t k = 0; k < full->n_conc; k++)
            out->concurrency[k] = full->concurrency[k] < n ? 1 : (int)share(full->concurrency[k], i, n);
    if (full->requests) {
        if (full->requests < n)
            return cal_why(why, why_len, CAL_EINVAL,
                           "requests: %ld cannot be split over %d shards", full->requests, n);
        out->requests = share(full->requests, i, n);
    }
    if (full->rate > 0) out->rate = full->rate / n;
    out->seed = full->seed + (uint64_t)i * 1000003u;
    return CAL_OK;
}

/* ---- writing ------------------------------------------------------------- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }
static json_t *jobj_text(const char *s)
{
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    return j ? j : json_null();
}

static json_t *hex(const uint8_t *p, size_t n)
{
    static const char H[] = "0123456789abcdef";
    char *s = malloc(2 * n + 1);
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) { s[2 * i] = H[p[i] >> 4]; s[2 * i + 1] = H[p[i] & 15]; }
    s[2 * n] = '\0';
    json_t *j = json_string(s);
    free(s);
    return j;
}

static json_t *hist_json(const cal_hist *h)
{
    uint8_t *b = NULL;
    size_t n = 0;
    if (cal_hist_encode(h, &b, &n)) return NULL;
    json_t *j = hex(b, n);
    free(b);
    return j;
}

static json_t *req_json(const cal_req_result *q)
{
    json_t *a = json_array();
    json_array_append_new(a, json_string(cal_req_status_name(q->status)));
    json_array_append_new(a, json_integer(q->http_status));
    json_array_append_new(a, q->error ? json_string(q->error) : json_null());
    int64_t t[] = {q->sched_ns, q->send_ns, q->first_token_ns, q->last_token_ns, q->end_ns,
                   q->first_byte_ns};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) json_array_append_new(a, json_integer(t[k]));
    json_array_append_new(a, json_integer(q->prompt_tokens));
    json_array_append_new(a, json_integer(q->output_tokens));
    json_array_append_new(a, json_string(q->tok_source == CAL_TOKSRC_USAGE ? "usage" : "chunks"));
    json_array_append_new(a, json_integer(q->n_chunks));
    json_array_append_new(a, q->server_prefill_ms >= 0 ? json_real(q->server_prefill_ms) : json_null());
    json_array_append_new(a, q->server_decode_ms >= 0 ? json_real(q->server_decode_ms) : json_null());
    json_array_append_new(a, json_integer(q->server_decode_tokens));
    if (q->chunk_ns) {                 /* each relative to the one before (send first) */
        json_t *c = json_array();
        int64_t prev = q->send_ns;
        for (int k = 0; k < q->n_chunks; k++) {
            json_array_append_new(c, json_integer(q->chunk_ns[k] - prev));
            prev = q->chunk_ns[k];
        }
        json_array_append_new(a, c);
    } else {
        json_array_append_new(a, json_null());
    }
    /* after the chunks: a document of 17 fields (before it) still reads */
    json_array_append_new(a, q->cached_tokens >= 0 ? json_integer(q->cached_tokens) : json_null());
    return a;
}
enum { RQ_STATUS, RQ_HTTP, RQ_ERROR, RQ_SCHED, RQ_SEND, RQ_FIRST, RQ_LAST, RQ_END, RQ_BYTE,
       RQ_PTOK, RQ_OTOK, RQ_SRC, RQ_NCHUNK, RQ_SPRE, RQ_SDEC, RQ_SDECTOK, RQ_CHUNKS, RQ_N,
       RQ_CACHED = RQ_N, RQ_N_CACHED };

int cal_shard_write(cal_store *st, int64_t run_id, const cal_shard_info *info, char **out,
                    size_t *out_len)
{
    cal_run_data *d = NULL;
    int rc = cal_store_load_run(st, run_id, CAL_LOAD_CHUNKS, &d);
    if (rc) return rc;
    json_t *root = json_object(), *run = json_object(), *cells = json_array(), *sh = json_object();
    json_object_set_new(root, "format", json_string(FORMAT));
    json_object_set_new(root, "format_version", json_integer(FORMAT_VERSION));
    json_object_set_new(sh, "index", json_integer(info->index));
    json_object_set_new(sh, "count", json_integer(info->count));
    json_object_set_new(sh, "offset_ns", info->offset_uncertainty_ns >= 0 ? json_integer(info->offset_ns) : json_null());
    json_object_set_new(sh, "offset_uncertainty_ns", info->offset_uncertainty_ns >= 0
                                                         ? json_integer(info->offset_uncertainty_ns) : json_null());
    /* what the merge checks the offset against: the clock's own resolution,
     * and whether the shards claim one start */
    json_object_set_new(sh, "clock_resolution_ns", json_integer(cal_clock_resolution_ns()));
    json_object_set_new(sh, "common_start", info->common_start < 0 ? json_null()
                                                                   : json_boolean(info->common_start));
    json_object_set_new(root, "shard", sh);
    const cal_run *r = &d->run;
    json_object_set_new(run, "label", r->label ? json_string(r->label) : json_null());
    json_object_set_new(run, "status", json_string(cal_run_status_name(r->status)));
    json_object_set_new(run, "started_wall_ns", json_integer(r->started_wall_ns));
    json_object_set_new(run, "ended_wall_ns", json_integer(r->ended_wall_ns));
    json_object_set_new(run, "t0_mono_ns", json_integer(r->t0_mono_ns));
    json_object_set_new(run, "build", r->build ? json_string(r->build) : json_null());
    json_object_set_new(run, "host", jobj_text(r->host_json));
    json_object_set_new(run, "target", jobj_text(r->target_json));
    json_object_set_new(run, "protocol", jobj_text(r->protocol_json));
    json_object_set_new(run, "telemetry", jobj_text(r->telemetry_json));
    json_object_set_new(root, "run", run);
    cal_cell_hists *ch = malloc(sizeof *ch);
    rc = ch ? CAL_OK : CAL_ENOMEM;
    for (size_t i = 0; i < d->n_cells && rc == CAL_OK; i++) {
        const cal_cell *c = &d->cells[i];
        json_t *o = json_object();
        json_object_set_new(o, "seq", json_integer(c->seq));
        json_object_set_new(o, "kind", json_string(cal_cell_kind_name(c->kind)));
        json_object_set_new(o, "target", json_string(c->target));
        json_object_set_new(o, "concurrency", json_integer(c->concurrency));
        json_object_set_new(o, "rate", json_real(c->rate));
        json_object_set_new(o, "prompt_tokens", json_integer(c->prompt_tokens));
        json_object_set_new(o, "prompt_exact", json_integer(c->prompt_exact));
        json_object_set_new(o, "prompt_basis", json_string(cal_prompt_basis_key(c->prompt_basis)));
        json_object_set_new(o, "prompt_asked", json_integer(c->prompt_asked));
        json_object_set_new(o, "prompt_offset", json_integer(c->prompt_offset));
        json_object_set_new(o, "content", json_string(c->content));
        json_object_set_new(o, "unique_prompts", json_integer(c->unique_prompts));
        json_object_set_new(o, "max_tokens", json_integer(c->max_tokens));
        json_object_set_new(o, "output_fixed", json_integer(c->output_fixed));
        json_object_set_new(o, "shot_index", json_integer(c->shot_index));
        json_object_set_new(o, "shot_kind", json_string(cal_shot_kind_key(c->shot_kind)));
        json_object_set_new(o, "rest_before_ns", json_integer(c->rest_before_ns));
        json_object_set_new(o, "process_age_ns", json_integer(c->process_age_ns));
        json_object_set_new(o, "start_ns", json_integer(c->start_ns));
        json_object_set_new(o, "end_ns", json_integer(c->end_ns));
        json_object_set_new(o, "start_wall_ns", json_integer(c->start_wall_ns));
        json_object_set_new(o, "cpu_ns", json_integer(c->cpu_ns));
        json_object_set_new(o, "chunks", json_integer(c->chunks));
        json_object_set_new(o, "send_lag_p99_ms", jnum(c->send_lag_p99_ms));
        json_object_set_new(o, "clock_mhz_mean", jnum(c->sum.clock_mhz_mean));
        json_object_set_new(o, "power_w_mean", jnum(c->sum.power_w_mean));
        char src[16] = "raw";
        int hr = cal_store_load_cell_hists(st, c->id, ch, src, sizeof src);
        if (hr == CAL_ENOTFOUND) {      /* an older store: build them from the requests */
            cal_cell_hists_init(ch);
            for (size_t k = 0; k < (size_t)c->n_requests; k++)
                cal_cell_hists_add(ch, &d->reqs[c->req_first + k]);
            snprintf(src, sizeof src, "raw");
        } else if (hr) {
            rc = hr;
        }
        json_object_set_new(o, "itl_source", json_string(src));
        json_object_set_new(o, "folded", json_integer(ch->folded));
        json_object_set_new(o, "chunks_dropped", json_integer(ch->chunks_dropped));
        json_t *hs = json_object();
        for (int m = 0; m < CAL_HIST_N_METRIC; m++) {
            json_t *hj = hist_json(&ch->h[m]);
            if (!hj) rc = CAL_ENOMEM;
            else json_object_set_new(hs, cal_hist_metric_name((cal_hist_metric)m), hj);
        }
        json_object_set_new(o, "hists", hs);
        json_t *reqs = json_array();
        for (size_t k = 0; k < (size_t)c->n_requests; k++)
            json_array_append_new(reqs, req_json(&d->reqs[c->req_first + k]));
        json_object_set_new(o, "requests", reqs);
        json_array_append_new(cells, o);
    }
    free(ch);
    json_object_set_new(root, "cells", cells);
    char *s = rc == CAL_OK ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    cal_run_data_free(&d);
    if (rc) return rc;
    if (!s) return CAL_ENOMEM;
    *out = s;
    *out_len = strlen(s);
    return CAL_OK;
}

/* ---- reading --------------------------------------------------------------- */

typedef struct rd { const char *name; char *why; size_t why_len; } rd;

#define BAD(r, ...) cal_why((r)->why, (r)->why_len, CAL_EPROTO, __VA_ARGS__)

static int get_i64(rd *r, const json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *v)
{
    const json_t *j = json_object_get(o, k);
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return BAD(r, "%s: \"%s\" is not an integer in [%lld, %lld]", r->name, k, (long long)lo,
                   (long long)hi);
    *v = json_integer_value(j);
    return CAL_OK;
}

static int get_int(rd *r, const json_t *o, const char *k, int lo, int hi, int *v)
{
    int64_t x;
    int rc = get_i64(r, o, k, lo, hi, &x);
    if (!rc) *v = (int)x;
    return rc;
}

static double get_num(const json_t *o, const char *k)
{
    const json_t *j = json_object_get(o, k);
    return json_is_number(j) ? json_number_value(j) : NAN;
}

static int get_str(rd *r, const json_t *o, const char *k, char *dst, size_t n)
{
    const char *s = json_string_value(json_object_get(o, k));
    if (!s || strlen(s) >= n) return BAD(r, "%s: \"%s\" is not a string of under %zu bytes", r->name, k, n);
    memcpy(dst, s, strlen(s) + 1);
    return CAL_OK;
}

static char *dump(const json_t *o, const char *k)
{
    const json_t *j = json_object_get(o, k);
    return json_is_object(j) ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
}

static int unhex(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* hists.<metric>: hex of a CH1 blob; checked by decoding it into scratch,
 * kept encoded. */
static int read_hist(rd *r, const json_t *hs, cal_hist_metric m, cal_shard_hists *out, cal_hist *scratch)
{
    const char *s = json_string_value(json_object_get(hs, cal_hist_metric_name(m)));
    size_t n = s ? strlen(s) : 1;
    if (!s || n % 2 || n > 2 * (64 + 10 * (size_t)CAL_HIST_BUCKETS))
        return BAD(r, "%s: hists.%s is not a histogram's hex string", r->name, cal_hist_metric_name(m));
    uint8_t *b = malloc(n / 2 + 1);
    if (!b) return CAL_ENOMEM;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);
        if (hi < 0 || lo < 0) { free(b); return BAD(r, "%s: hists.%s: not hex", r->name, cal_hist_metric_name(m)); }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    char why[160];
    if (cal_hist_decode(b, n / 2, scratch, why, sizeof why)) {
        free(b);
        return BAD(r, "%s: hists.%s: %s", r->name, cal_hist_metric_name(m), why);
    }
    out->blob[m] = b;
    out->bytes[m] = n / 2;
    return CAL_OK;
}

static int read_req(rd *r, const json_t *a, size_t cell, size_t k, cal_req_result *q)
{
    cal_req_result_init(q);
    if (!json_is_array(a) || (json_array_size(a) != RQ_N && json_array_size(a) != RQ_N_CACHED))
        return BAD(r, "%s: cell %zu, request %zu: not an array of %d or %d fields", r->name, cell, k,
                   RQ_N, RQ_N_CACHED);
    const char *st = json_string_value(json_array_get(a, RQ_STATUS));
    int s = -1;
    for (int i = 0; st && i < CAL_REQ_N_STATUS; i++)
        if (!strcmp(st, cal_req_status_name((cal_req_status)i))) s = i;
    if (s < 0) return BAD(r, "%s: cell %zu, request %zu: unknown status", r->name, cell, k);
    q->status = (cal_req_status)s;
    int64_t v[RQ_N];
    static const int INTS[] = {RQ_HTTP, RQ_SCHED, RQ_SEND, RQ_FIRST, RQ_LAST, RQ_END, RQ_BYTE,
                               RQ_PTOK, RQ_OTOK, RQ_NCHUNK, RQ_SDECTOK};
    for (size_t i = 0; i < sizeof INTS / sizeof INTS[0]; i++) {
        const json_t *j = json_array_get(a, (size_t)INTS[i]);
        int64_t lo = INTS[i] >= RQ_SCHED && INTS[i] <= RQ_BYTE ? 0 : -1;
        int64_t hi = INTS[i] >= RQ_SCHED && INTS[i] <= RQ_BYTE ? TS_MAX - 1 : INT32_MAX;
        if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
            return BAD(r, "%s: cell %zu, request %zu: field %d is not an integer in range", r->name,
                       cell, k, INTS[i]);
        v[INTS[i]] = json_integer_value(j);
    }
    q->http_status = (int)v[RQ_HTTP];
    q->sched_ns = v[RQ_SCHED];
    q->send_ns = v[RQ_SEND];
    q->first_token_ns = v[RQ_FIRST];
    q->last_token_ns = v[RQ_LAST];
    q->end_ns = v[RQ_END];
    q->first_byte_ns = v[RQ_BYTE];
    q->prompt_tokens = (int)v[RQ_PTOK];
    q->output_tokens = (int)v[RQ_OTOK];
    q->n_chunks = (int)v[RQ_NCHUNK];
    q->server_decode_tokens = (int)v[RQ_SDECTOK];
    if (q->n_chunks < 0) return BAD(r, "%s: cell %zu, request %zu: n_chunks < 0", r->name, cell, k);
    const char *src = json_string_value(json_array_get(a, RQ_SRC));
    q->tok_source = src && !strcmp(src, "usage") ? CAL_TOKSRC_USAGE : CAL_TOKSRC_CHUNKS;
    const json_t *ct = json_array_get(a, RQ_CACHED);   /* NULL in a 17-field document */
    if (ct && !json_is_null(ct)) {
        if (!json_is_integer(ct) || json_integer_value(ct) < 0 || json_integer_value(ct) > INT32_MAX ||
            (q->prompt_tokens >= 0 && json_integer_value(ct) > q->prompt_tokens))
            return BAD(r, "%s: cell %zu, request %zu: cached_tokens is not a count within the "
                       "prompt's %d tokens", r->name, cell, k, q->prompt_tokens);
        q->cached_tokens = (int)json_integer_value(ct);
    }
    const json_t *e = json_array_get(a, RQ_ERROR);
    if (json_is_string(e) && !(q->error = strdup(json_string_value(e)))) return CAL_ENOMEM;
    const json_t *sp = json_array_get(a, RQ_SPRE), *sd = json_array_get(a, RQ_SDEC);
    q->server_prefill_ms = json_is_number(sp) ? json_number_value(sp) : -1;
    q->server_decode_ms = json_is_number(sd) ? json_number_value(sd) : -1;
    const json_t *c = json_array_get(a, RQ_CHUNKS);
    if (json_is_array(c)) {
        if (json_array_size(c) != (size_t)q->n_chunks || q->send_ns <= 0)
            return BAD(r, "%s: cell %zu, request %zu: %zu chunk times for n_chunks %d", r->name,
                       cell, k, json_array_size(c), q->n_chunks);
        if (q->n_chunks && !(q->chunk_ns = malloc((size_t)q->n_chunks * sizeof *q->chunk_ns)))
            return CAL_ENOMEM;
        int64_t t = q->send_ns;
        for (int i = 0; i < q->n_chunks; i++) {
            const json_t *x = json_array_get(c, (size_t)i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= TS_MAX - t)
                return BAD(r, "%s: cell %zu, request %zu: chunk %d is not a forward step", r->name,
                           cell, k, i);
            t += json_integer_value(x);
            q->chunk_ns[i] = t;
        }
    } else if (!json_is_null(c)) {
        return BAD(r, "%s: cell %zu, request %zu: chunks is neither an array nor null", r->name, cell, k);
    }
    return CAL_OK;
}

static int lookup(const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; s && i < n; i++) if (!strcmp(s, name(i))) return i;
    return -1;
}
static const char *cell_kind(int i) { return cal_cell_kind_name((cal_cell_kind)i); }
static const char *shot_kind(int i) { return cal_shot_kind_key((cal_shot_kind)i); }

/* A cell's requests, from the span of its "requests" array in the
 * document's text: one request's tree at a time, never the array's (a
 * cell of 600,000 requests decoded as one tree took 9 × its bytes). */
static int read_reqs(rd *r, const char *text, size_t len, size_t at, size_t i, cal_shard_doc *d,
                     size_t *nreq)
{
    cal_cell *c = &d->data->cells[i];
    long count = cal_jspan_count(text, len, at, (size_t)CAL_SHARD_MAX_CELL_REQUESTS);
    if (count < 0) return BAD(r, "%s: cell %zu: requests is not an array", r->name, i);
    /* a bound before anything is allocated for them; the plan's own is
     * checked by the merge (cal_shard_planned_requests) */
    if (count > CAL_SHARD_MAX_CELL_REQUESTS)
        return BAD(r, "%s: cell %zu: over %ld requests: more than any plan's cell holds", r->name,
                   i, CAL_SHARD_MAX_CELL_REQUESTS);
    size_t n = (size_t)count;
    cal_req_result *q = realloc(d->data->reqs, (*nreq + n + 1) * sizeof *q);
    if (!q) return CAL_ENOMEM;
    d->data->reqs = q;
    c->req_first = *nreq;
    c->n_requests = (int64_t)n;
    size_t s0, sl;
    cal_jspan_open_array(text, len, &at);
    for (size_t j = 0; j < n; j++) {
        if (cal_jspan_next(text, len, &at, &s0, &sl) != 1)
            return BAD(r, "%s: cell %zu, request %zu: not JSON", r->name, i, j);
        json_error_t je;
        json_t *a = json_loadb(text + s0, sl, 0, &je);
        if (!a)
            return BAD(r, "%s: not JSON (line %zu: %s)", r->name,
                       cal_jspan_line(text, s0) + (size_t)je.line - 1, je.text);
        int rc = read_req(r, a, i, j, &q[*nreq]);
        json_decref(a);
        (*nreq)++;
        d->data->n_reqs = *nreq;
        if (rc) return rc;
    }
    return CAL_OK;
}

static int read_cell(rd *r, const json_t *o, size_t i, cal_shard_doc *d, cal_hist *scratch)
{
    cal_cell *c = &d->data->cells[i];
    memset(c, 0, sizeof *c);
    cal_summary_init(&c->sum);
    int rc = CAL_OK;
    int64_t v;
    char kind[32];
    if (!json_is_object(o)) return BAD(r, "%s: cell %zu is not an object", r->name, i);
    if ((rc = get_int(r, o, "seq", 0, INT32_MAX, &c->seq)) ||
        (rc = get_str(r, o, "kind", kind, sizeof kind)) ||
        (rc = get_str(r, o, "target", c->target, sizeof c->target)) ||
        (rc = get_int(r, o, "concurrency", 0, INT32_MAX, &c->concurrency)) ||
        (rc = get_int(r, o, "prompt_tokens", -1, INT32_MAX, &c->prompt_tokens)) ||
        (rc = get_int(r, o, "prompt_exact", 0, 1, &c->prompt_exact)) ||
        (rc = get_str(r, o, "content", c->content, sizeof c->content)) ||
        (rc = get_int(r, o, "unique_prompts", 0, 1, &c->unique_prompts)) ||
        (rc = get_int(r, o, "max_tokens", -1, INT32_MAX, &c->max_tokens)) ||
        (rc = get_int(r, o, "output_fixed", 0, 1, &c->output_fixed)) ||
        (rc = get_int(r, o, "shot_index", 0, INT32_MAX, &c->shot_index)) ||
        (rc = get_i64(r, o, "rest_before_ns", 0, TS_MAX - 1, &c->rest_before_ns)) ||
        (rc = get_i64(r, o, "process_age_ns", -1, TS_MAX - 1, &c->process_age_ns)) ||
        (rc = get_i64(r, o, "start_ns", 0, TS_MAX - 1, &c->start_ns)) ||
        (rc = get_i64(r, o, "end_ns", 0, TS_MAX - 1, &c->end_ns)) ||
        (rc = get_i64(r, o, "start_wall_ns", 0, TS_MAX - 1, &c->start_wall_ns)) ||
        (rc = get_i64(r, o, "cpu_ns", 0, TS_MAX - 1, &c->cpu_ns)) ||
        (rc = get_i64(r, o, "chunks", 0, TS_MAX - 1, &c->chunks)) ||
        (rc = get_i64(r, o, "folded", 0, TS_MAX - 1, &v)) ||
        (rc = get_str(r, o, "itl_source", d->itl_source[i], sizeof d->itl_source[i])))
        return rc;
    int k = lookup(kind, cell_kind, 4);
    char sk[32];
    if ((rc = get_str(r, o, "shot_kind", sk, sizeof sk))) return rc;
    int s = lookup(sk, shot_kind, CAL_SHOT_CONSECUTIVE + 1);
    if (k < 0 || s < 0) return BAD(r, "%s: cell %zu: unknown kind \"%s\" or shot kind \"%s\"", r->name, i, kind, sk);
    c->kind = (cal_cell_kind)k;
    c->shot_kind = (cal_shot_kind)s;
    c->rate = get_num(o, "rate");
    if (!(c->rate >= 0)) return BAD(r, "%s: cell %zu: rate is not a number >= 0", r->name, i);
    c->send_lag_p99_ms = get_num(o, "send_lag_p99_ms");
    /* how the length was made (absent before schema 9's documents) */
    c->prompt_basis = CAL_PROMPT_UNRECORDED;
    c->prompt_offset = -1;
    const json_t *pb = json_object_get(o, "prompt_basis");
    if (pb && (!json_is_string(pb) || cal_prompt_basis_parse(json_string_value(pb), &c->prompt_basis)))
        return BAD(r, "%s: cell %zu: prompt_basis is not one of caliper's", r->name, i);
    if (json_object_get(o, "prompt_asked") &&
        (rc = get_int(r, o, "prompt_asked", 0, INT32_MAX, &c->prompt_asked)))
        return rc;
    if (json_object_get(o, "prompt_offset") &&
        (rc = get_int(r, o, "prompt_offset", -1, INT32_MAX, &c->prompt_offset)))
        return rc;
    c->sum.clock_mhz_mean = get_num(o, "clock_mhz_mean");
    c->sum.power_w_mean = get_num(o, "power_w_mean");
    if (strcmp(d->itl_source[i], "raw") && strcmp(d->itl_source[i], "histogram"))
        return BAD(r, "%s: cell %zu: itl_source \"%s\" is neither raw nor histogram", r->name, i,
                   d->itl_source[i]);
    const json_t *hs = json_object_get(o, "hists");
    for (int m = 0; m < CAL_HIST_N_METRIC && rc == CAL_OK; m++)
        rc = read_hist(r, hs, (cal_hist_metric)m, &d->hists[i], scratch);
    if (rc) return rc;
    d->hists[i].folded = v;
    if ((rc = get_i64(r, o, "chunks_dropped", 0, TS_MAX - 1, &d->hists[i].chunks_dropped))) return rc;
    return CAL_OK;
}

/* The document with its cells array left out: the text before and after
 * the cells' span around an empty array, decoded as one (small) tree. */
static json_t *load_head(const char *text, size_t len, size_t cs, size_t cl, json_error_t *je)
{
    size_t hn = len - cl + 2;
    char *h = malloc(hn);
    if (!h) return NULL;
    memcpy(h, text, cs);
    memcpy(h + cs, "[]", 2);
    memcpy(h + cs + 2, text + cs + cl, len - cs - cl);
    json_t *root = json_loadb(h, hn, 0, je);
    free(h);
    return root;
}

/* The cells' span and count; the head decoded (format, shard, run). */
static int open_doc(rd *r, const char *text, size_t len, json_t **root, size_t *cs, size_t *cl,
                    size_t *nc)
{
    *root = NULL;
    json_error_t je;
    int m = cal_jspan_member(text, len, "cells", cs, cl);
    if (m < 0 || (m == 1 && cal_jspan_count(text, len, *cs, 0) < 0)) {
        json_t *j = json_loadb(text, len, 0, &je);   /* where it breaks, in jansson's words */
        json_decref(j);
        return j ? BAD(r, "%s: not a %s document of version %d", r->name, FORMAT, FORMAT_VERSION)
                 : BAD(r, "%s: not JSON (line %d: %s)", r->name, je.line, je.text);
    }
    if (m == 0) { *cs = len; *cl = 0; }
    long n = m == 1 ? cal_jspan_count(text, len, *cs, CAL_SHARD_MAX_CELLS) : 0;
    *root = m == 1 ? load_head(text, len, *cs, *cl, &je) : json_loadb(text, len, 0, &je);
    if (!*root) return BAD(r, "%s: not JSON (line %d: %s)", r->name, je.line, je.text);
    const char *fmt = json_string_value(json_object_get(*root, "format"));
    if (!json_is_object(*root) || !fmt || strcmp(fmt, FORMAT) ||
        json_integer_value(json_object_get(*root, "format_version")) != FORMAT_VERSION)
        return BAD(r, "%s: not a %s document of version %d", r->name, FORMAT, FORMAT_VERSION);
    if (m == 0 || !json_is_object(json_object_get(*root, "shard")) ||
        !json_is_object(json_object_get(*root, "run")))
        return BAD(r, "%s: shard, run or cells missing", r->name);
    /* the first check looked at the array's first element only: a later one
     * may still break its syntax */
    if (n < 0) return BAD(r, "%s: cells: not a JSON array", r->name);
    if (n > CAL_SHARD_MAX_CELLS)
        return cal_why(r->why, r->why_len, CAL_ETOOBIG, "%s: over %d cells: past what a plan "
                       "makes (refused before decoding them)", r->name, CAL_SHARD_MAX_CELLS);
    *nc = (size_t)n;
    return CAL_OK;
}

static int read_info(rd *r, const json_t *sh, cal_shard_info *info)
{
    int rc;
    if ((rc = get_int(r, sh, "count", 1, MAX_SHARDS, &info->count)) ||
        (rc = get_int(r, sh, "index", 0, info->count - 1, &info->index)))
        return rc;
    info->offset_uncertainty_ns = -1;
    info->clock_resolution_ns = 0;
    info->common_start = -1;
    /* absent or null: not measured; anything else must be a measurement
     * (1e300 was read as "not measured" and the shard aligned by wall clock) */
    const json_t *off = json_object_get(sh, "offset_ns");
    if (off && !json_is_null(off) &&
        ((rc = get_i64(r, sh, "offset_ns", -TS_MAX / 4, TS_MAX / 4, &info->offset_ns)) ||
         (rc = get_i64(r, sh, "offset_uncertainty_ns", 0, TS_MAX, &info->offset_uncertainty_ns))))
        return rc;
    /* absent in documents written before them: unknown */
    const json_t *res = json_object_get(sh, "clock_resolution_ns"), *cs = json_object_get(sh, "common_start");
    if (res && !json_is_null(res) &&
        (rc = get_i64(r, sh, "clock_resolution_ns", 1, 1000000000, &info->clock_resolution_ns)))
        return rc;
    if (cs && !json_is_null(cs)) {
        if (!json_is_boolean(cs))
            return BAD(r, "%s: \"common_start\" is not true, false or null", r->name);
        info->common_start = json_is_true(cs);
    }
    return CAL_OK;
}

int cal_shard_peek(const char *text, size_t len, const char *name, cal_shard_info *info,
                   size_t *n_cells, char *why, size_t why_len)
{
    rd r = {.name = name ? name : "shard", .why = why, .why_len = why_len};
    json_t *root;
    size_t cs, cl;
    memset(info, 0, sizeof *info);
    int rc = open_doc(&r, text, len, &root, &cs, &cl, n_cells);
    if (!rc) rc = read_info(&r, json_object_get(root, "shard"), info);
    json_decref(root);
    return rc;
}

int cal_shard_read(const char *text, size_t len, const char *name, cal_shard_doc **out,
                   char *why, size_t why_len)
{
    *out = NULL;
    rd r = {.name = name ? name : "shard", .why = why, .why_len = why_len};
    json_t *root = NULL;
    size_t cs = 0, cl = 0, nc = 0;
    cal_hist *scratch = NULL;
    cal_shard_doc *d = NULL;
    int rc = open_doc(&r, text, len, &root, &cs, &cl, &nc);
    if (rc) goto out;
    d = calloc(1, sizeof *d);
    scratch = malloc(sizeof *scratch);
    if (!d || !scratch || !(d->data = calloc(1, sizeof *d->data))) { rc = CAL_ENOMEM; goto out; }
    const json_t *sh = json_object_get(root, "shard"), *run = json_object_get(root, "run");
    if ((rc = read_info(&r, sh, &d->info))) goto out;
    cal_run *ru = &d->data->run;
    if ((rc = get_i64(&r, run, "started_wall_ns", 0, TS_MAX - 1, &ru->started_wall_ns)) ||
        (rc = get_i64(&r, run, "t0_mono_ns", 0, TS_MAX - 1, &ru->t0_mono_ns)))
        goto out;
    const char *label = json_string_value(json_object_get(run, "label"));
    const char *build = json_string_value(json_object_get(run, "build"));
    if ((label && !(ru->label = strdup(label))) || (build && !(ru->build = strdup(build)))) {
        rc = CAL_ENOMEM;
        goto out;
    }
    ru->host_json = dump(run, "host");
    ru->target_json = dump(run, "target");
    ru->protocol_json = dump(run, "protocol");
    ru->telemetry_json = dump(run, "telemetry");
    if ((rc = cal_run_data_read_protocol(d->data))) goto out;
    const char *hn = json_string_value(json_object_get(json_object_get(run, "host"), "hostname"));
    snprintf(d->host, sizeof d->host, "%s", hn ? hn : "");
    d->data->cells = calloc(nc ? nc : 1, sizeof *d->data->cells);
    d->hists = calloc(nc ? nc : 1, sizeof *d->hists);
    d->itl_source = calloc(nc ? nc : 1, sizeof *d->itl_source);
    if (!d->data->cells || !d->hists || !d->itl_source) { rc = CAL_ENOMEM; goto out; }
    size_t nreq = 0, at = cs, s0, sl;
    cal_jspan_open_array(text, len, &at);
    for (size_t i = 0; i < nc; i++) {
        d->data->n_cells = i + 1;
        if (cal_jspan_next(text, len, &at, &s0, &sl) != 1) {
            rc = BAD(&r, "%s: cell %zu: not JSON", r.name, i);
            goto out;
        }
        /* the cell without its requests as one small tree, then its
         * requests one at a time from their span */
        size_t rs = 0, rl = 0;
        int m = cal_jspan_member(text + s0, sl, "requests", &rs, &rl);
        if (m < 0) {
            rc = BAD(&r, "%s: cell %zu is not an object", r.name, i);
            goto out;
        }
        if (m == 0) {
            rc = BAD(&r, "%s: cell %zu: requests is not an array", r.name, i);
            goto out;
        }
        json_error_t je;
        json_t *cell = load_head(text + s0, sl, rs, rl, &je);
        if (!cell) {
            rc = BAD(&r, "%s: not JSON (line %zu: %s)", r.name,
                     cal_jspan_line(text, s0) + (size_t)je.line - 1, je.text);
            goto out;
        }
        rc = read_cell(&r, cell, i, d, scratch);
        json_decref(cell);
        if (!rc) rc = read_reqs(&r, text, len, s0 + rs, i, d, &nreq);
        if (rc) goto out;
    }
    ru->n_cells = (int)nc;
out:
    json_decref(root);
    free(scratch);
    if (rc) { cal_shard_free(&d); return rc; }
    *out = d;
    return CAL_OK;
}

void cal_shard_free(cal_shard_doc **pd)
{
    if (!pd || !*pd) return;
    cal_shard_doc *d = *pd;
    for (size_t i = 0; d->hists && d->data && i < d->data->n_cells; i++)
        for (int m = 0; m < CAL_HIST_N_METRIC; m++) free(d->hists[i].blob[m]);
    cal_run_data_free(&d->data);
    free(d->hists);
    free(d->itl_source);
    free(d);
    *pd = NULL;
}

/* ---- merging --------------------------------------------------------------- */

static void shift(int64_t *t, int64_t by) { if (*t > 0) *t += by; }

/* Cell k's histograms summed over the shards into *h (decoded from the
 * documents' blobs, checked when read): one cell's ~78 KB at a time. */
static int merged_hists(cal_shard_doc *const *ds, size_t n, size_t k, cal_cell_hists *h,
                        cal_hist *tmp)
{
    cal_cell_hists_init(h);
    for (size_t i = 0; i < n; i++) {
        const cal_shard_hists *s = &ds[i]->hists[k];
        for (int m = 0; m < CAL_HIST_N_METRIC; m++) {
            if (cal_hist_decode(s->blob[m], s->bytes[m], tmp, NULL, 0)) return CAL_EPROTO;
            cal_hist_merge(&h->h[m], tmp);
        }
        h->folded += s->folded;
        h->chunks_dropped += s->chunks_dropped;
    }
    return CAL_OK;
}

static int cmp_doc(const void *a, const void *b)
{
    const cal_shard_doc *x = *(cal_shard_doc *const *)a, *y = *(cal_shard_doc *const *)b;
    return (x->info.index > y->info.index) - (x->info.index < y->info.index);
}

/* The protocol of the merged run: shard 0's, with the fleet's load and the
 * fleet itself. */
static char *fleet_protocol(cal_shard_doc *const *ds, size_t n, const int64_t *delta,
                            double itl_res_ns, json_t *verdicts)
{
    char *p0 = NULL;
    if (cal_protocol_to_json(&ds[0]->data->proto, &p0, NULL)) return NULL;
    json_t *p = json_loads(p0, 0, NULL);
    free(p0);
    if (!p) return NULL;
    json_t *cl = json_array();
    for (size_t k = 0; k < ds[0]->data->n_cells; k++) {
        long sum = 0;
        for (size_t i = 0; i < n; i++) sum += ds[i]->data->cells[k].concurrency;
        if (k == 0 || ds[0]->data->cells[k].concurrency != ds[0]->data->cells[k - 1].concurrency)
            json_array_append_new(cl, json_integer(sum));
    }
    json_object_set_new(p, "concurrency_fleet", cl);
    json_object_set_new(p, "shards", json_integer((json_int_t)n));
    json_object_set_new(p, "merge", json_string(
        "one run from the shards' requests: cells are the union of each shard's cell, summarised "
        "as one client's (first send to last end over the fleet); histograms summed; shard "
        "timestamps moved onto shard 0's clock"));
    json_t *fleet = json_array();
    for (size_t i = 0; i < n; i++) {
        const cal_shard_doc *d = ds[i];
        double busy, lag;
        int sat = cal_shard_saturated(d, &busy, &lag);
        json_t *o = json_object();
        json_object_set_new(o, "shard", json_integer(d->info.index));
        json_object_set_new(o, "host", d->data->run.host_json ? json_loads(d->data->run.host_json, 0, NULL) : json_null());
        json_object_set_new(o, "clock_shift_ns", json_integer(delta[i]));
        json_object_set_new(o, "clock_offset_ns", d->info.offset_uncertainty_ns >= 0
                                                     ? json_integer(d->info.offset_ns) : json_null());
        json_object_set_new(o, "offset_uncertainty_ns", d->info.offset_uncertainty_ns >= 0
                                                           ? json_integer(d->info.offset_uncertainty_ns) : json_null());
        json_object_set_new(o, "client_busy", jnum(busy));
        json_object_set_new(o, "send_lag_p99_ms", jnum(lag));
        json_object_set_new(o, "saturated", json_boolean(sat));
        json_array_append_new(fleet, o);
        char text[400], who[200];
        /* an MPI rank (its offset was measured) by its rank, a shard as given */
        if (d->info.offset_uncertainty_ns >= 0)
            snprintf(who, sizeof who, "rank %d (%s)", d->info.index, d->host[0] ? d->host : "unknown host");
        else
            snprintf(who, sizeof who, "shard %d/%d (%s)", d->info.index + 1, d->info.count,
                     d->host[0] ? d->host : "unknown host");
        if (sat) {
            snprintf(text, sizeof text, "%s: client self-check: %s; its requests may "
                     "carry client delay", who,
                     busy > BUSY_MAX ? "the probe was busy more than half the run"
                                     : "send lag p99 above 5 ms");
            json_array_append_new(verdicts, json_string(text));
        }
        /* an ITL of 0 (chunks read together) has no resolution to compare */
        if (d->info.offset_uncertainty_ns >= 0 && isfinite(itl_res_ns) && itl_res_ns > 0 &&
            (double)d->info.offset_uncertainty_ns > itl_res_ns) {
            cal_snprintf(text, sizeof text, "%s: clock offset uncertain by %.1f µs, beyond "
                     "the ITL resolution (%.1f µs): its place on the fleet's timeline is not "
                     "known that well", who, d->info.offset_uncertainty_ns / 1e3,
                     itl_res_ns / 1e3);
            json_array_append_new(verdicts, json_string(text));
        }
    }
    json_object_set_new(p, "fleet", fleet);
    char *s = json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(p);
    return s;
}

int cal_shard_merge(cal_store *st, cal_shard_doc *const *in, size_t n, const char *label,
                    int64_t *run_id, char *why, size_t why_len)
{
    if (!st || !in || n == 0) return cal_why(why, why_len, CAL_EINVAL, "merge: no shards");
    cal_shard_doc **ds = malloc(n * sizeof *ds);
    if (!ds) return CAL_ENOMEM;
    memcpy(ds, in, n * sizeof *ds);
    qsort(ds, n, sizeof *ds, cmp_doc);
    int rc = CAL_OK;
    for (size_t i = 0; i < n; i++) {
        if (ds[i]->info.count != (int)n || ds[i]->info.index != (int)i) {
            rc = cal_why(why, why_len, CAL_EMISMATCH, "merge: shard %d of %d given where shard %zu "
                         "of %zu was expected (give every shard once)", ds[i]->info.index + 1,
                         ds[i]->info.count, i + 1, n);
            goto done;
        }
    }
    /* another server or protocol is named as such before the cells it made
     * are compared */
    if ((rc = cal_shard_same_measurement(ds, n, why, why_len)) ||
        (rc = cal_shard_same_run(ds, n, why, why_len)))
        goto done;
    for (size_t i = 0; i < n; i++) {
        const cal_cell *a = ds[0]->data->cells, *b = ds[i]->data->cells;
        if (ds[i]->data->n_cells != ds[0]->data->n_cells) {
            rc = cal_why(why, why_len, CAL_EMISMATCH, "merge: shard %zu has %zu cells, shard 1 has "
                         "%zu: not the same plan", i + 1, ds[i]->data->n_cells, ds[0]->data->n_cells);
            goto done;
        }
        for (size_t k = 0; k < ds[0]->data->n_cells; k++)
            if (a[k].prompt_tokens != b[k].prompt_tokens || a[k].max_tokens != b[k].max_tokens ||
                a[k].shot_index != b[k].shot_index || a[k].kind != b[k].kind ||
                strcmp(a[k].target, b[k].target)) {
                rc = cal_why(why, why_len, CAL_EMISMATCH, "merge: cell %zu differs between shard 1 "
                             "and shard %zu (prompt length, output length, shot or kind): not the "
                             "same plan", k + 1, i + 1);
                goto done;
            }
    }
    /* each shard's clock onto shard 0's: measured offsets when all have one */
    int64_t *delta = calloc(n, sizeof *delta);
    if (!delta) { rc = CAL_ENOMEM; goto done; }
    int measured = 1;
    for (size_t i = 0; i < n; i++) measured &= ds[i]->info.offset_uncertainty_ns >= 0;
    const cal_run *r0 = &ds[0]->data->run;
    for (size_t i = 0; i < n; i++) {
        const cal_run *ri = &ds[i]->data->run;
        /* every term is below 2^62 (read checks it): the sums fit in double
         * exactly enough to refuse clocks too far apart before int64 math */
        double dd = measured ? -((double)ds[i]->info.offset_ns - (double)ds[0]->info.offset_ns)
                             : ((double)ri->started_wall_ns - (double)ri->t0_mono_ns) -
                                   ((double)r0->started_wall_ns - (double)r0->t0_mono_ns);
        if (fabs(dd) > (double)(TS_MAX / 4)) {
            rc = cal_why(why, why_len, CAL_ERANGE, "merge: shard %zu's clock is %.3g s from shard "
                         "1's: not the same run", i + 1, dd / 1e9);
            free(delta);
            goto done;
        }
        delta[i] = measured ? -(ds[i]->info.offset_ns - ds[0]->info.offset_ns)
                            : (ri->started_wall_ns - ri->t0_mono_ns) - (r0->started_wall_ns - r0->t0_mono_ns);
    }
    /* keep every moved timestamp positive (the store's rule) */
    int64_t lift = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_run_data *d = ds[i]->data;
        for (size_t k = 0; k < d->n_cells; k++)
            if (d->cells[k].start_ns > 0 && d->cells[k].start_ns + delta[i] < 1 - lift)
                lift = 1 - (d->cells[k].start_ns + delta[i]);
        for (size_t q = 0; q < d->n_reqs; q++) {
            const cal_req_result *x = &d->reqs[q];
            int64_t t = x->sched_ns > 0 ? x->sched_ns : x->send_ns;
            if (t > 0 && t + delta[i] < 1 - lift) lift = 1 - (t + delta[i]);
        }
    }
    for (size_t i = 0; i < n; i++) delta[i] += lift;
    if ((rc = cal_shard_plausible_clocks(ds, n, delta, measured, why, why_len))) {
        free(delta);
        goto done;
    }
    /* and below the store's ceiling */
    for (size_t i = 0; i < n; i++) {
        const cal_run_data *d = ds[i]->data;
        int64_t hi = 0;
        for (size_t q = 0; q < d->n_reqs; q++) {
            const cal_req_result *x = &d->reqs[q];
            int64_t t = x->end_ns > x->last_token_ns ? x->end_ns : x->last_token_ns;
            if (x->chunk_ns && x->n_chunks && x->chunk_ns[x->n_chunks - 1] > t) t = x->chunk_ns[x->n_chunks - 1];
            if (x->first_byte_ns > t) t = x->first_byte_ns;
            if (t > hi) hi = t;
        }
        for (size_t k = 0; k < d->n_cells; k++) if (d->cells[k].end_ns > hi) hi = d->cells[k].end_ns;
        if (hi && (double)hi + (double)delta[i] >= (double)TS_MAX) {
            rc = cal_why(why, why_len, CAL_ERANGE, "merge: shard %zu's timestamps would pass 2^62 "
                         "ns on shard 1's clock: not the same run", i + 1);
            free(delta);
            goto done;
        }
    }

    size_t nc = ds[0]->data->n_cells;
    cal_cell *cells = calloc(nc ? nc : 1, sizeof *cells);
    cal_cell_hists *hs = malloc(sizeof *hs);   /* one cell's at a time */
    cal_hist *tmp = malloc(sizeof *tmp);
    const char **src = calloc(nc ? nc : 1, sizeof *src);
    cal_req_result **un = calloc(nc ? nc : 1, sizeof *un);
    size_t *un_n = calloc(nc ? nc : 1, sizeof *un_n);
    json_t *verdicts = json_array();
    char *protocol = NULL;
    if (!cells || !hs || !tmp || !src || !un || !un_n) { rc = CAL_ENOMEM; goto free_all; }
    double itl_med_ns = NAN;
    for (size_t k = 0; k < nc; k++) {
        cal_cell *c = &cells[k];
        *c = ds[0]->data->cells[k];
        c->concurrency = 0;
        c->rate = 0;
        c->n_requests = 0;
        c->cpu_ns = 0;
        c->chunks = 0;
        c->send_lag_p99_ms = 0;
        c->start_ns = c->end_ns = 0;
        if ((rc = merged_hists(ds, n, k, hs, tmp))) goto free_all;
        int hist_itl = 0;
        size_t total = 0;
        for (size_t i = 0; i < n; i++) total += (size_t)ds[i]->data->cells[k].n_requests;
        un[k] = calloc(total ? total : 1, sizeof *un[k]);
        if (!un[k]) { rc = CAL_ENOMEM; goto free_all; }
        for (size_t i = 0; i < n; i++) {
            const cal_cell *s = &ds[i]->data->cells[k];
            c->concurrency += s->concurrency;
            c->rate += s->rate;
            c->n_requests += s->n_requests;
            c->chunks += s->chunks;
            /* the busiest client's CPU: the fleet's self-check asks whether
             * any one client was the bottleneck (per shard in the protocol) */
            if (s->cpu_ns > c->cpu_ns) c->cpu_ns = s->cpu_ns;
            if (s->send_lag_p99_ms > c->send_lag_p99_ms) c->send_lag_p99_ms = s->send_lag_p99_ms;
            int64_t st0 = s->start_ns + delta[i], en = s->end_ns + delta[i];
            if (!c->start_ns || st0 < c->start_ns) c->start_ns = st0;
            if (en > c->end_ns) c->end_ns = en;
            if (s->start_wall_ns < c->start_wall_ns) c->start_wall_ns = s->start_wall_ns;
            hist_itl |= !strcmp(ds[i]->itl_source[k], "histogram");
            for (size_t q = 0; q < (size_t)s->n_requests; q++) {
                cal_req_result *x = &ds[i]->data->reqs[s->req_first + q], *y = &un[k][un_n[k]++];
                *y = *x;               /* borrowed: heap fields stay the shard's */
                shift(&y->sched_ns, delta[i]);
                shift(&y->send_ns, delta[i]);
                shift(&y->first_token_ns, delta[i]);
                shift(&y->last_token_ns, delta[i]);
                shift(&y->end_ns, delta[i]);
                shift(&y->first_byte_ns, delta[i]);
                if (x->chunk_ns) {
                    y->chunk_ns = malloc((size_t)x->n_chunks * sizeof *y->chunk_ns + 1);
                    if (!y->chunk_ns) { rc = CAL_ENOMEM; goto free_all; }
                    for (int j = 0; j < x->n_chunks; j++) y->chunk_ns[j] = x->chunk_ns[j] + delta[i];
                }
            }
        }
        cal_summary_compute(un[k], un_n[k], 0, c->output_fixed ? c->max_tokens : 0, &c->sum);
        src[k] = cal_keep_summary(hs, un[k], un_n[k], &c->sum);
        if (hist_itl && !strcmp(src[k], "raw")) {
            cal_keep_itl_from_hist(hs, &c->sum);
            src[k] = "histogram";
        }
        c->sum.clock_mhz_mean = c->sum.power_w_mean = NAN;   /* one host's sampler, not the fleet's */
        if (isnan(itl_med_ns) && isfinite(c->sum.median_itl_ms)) itl_med_ns = c->sum.median_itl_ms * 1e6;
    }
    protocol = fleet_protocol(ds, n, delta, itl_med_ns * CAL_HIST_REL_ERROR, verdicts);
    if (!protocol) { rc = CAL_ENOMEM; goto free_all; }
    cal_run run;
    memset(&run, 0, sizeof run);
    run.label = (char *)(label ? label : r0->label);
    run.started_wall_ns = r0->started_wall_ns;
    run.t0_mono_ns = r0->t0_mono_ns + lift;
    run.build = r0->build;
    run.host_json = r0->host_json;
    run.target_json = r0->target_json;
    run.protocol_json = protocol;
    run.telemetry_json = r0->telemetry_json;
    if ((rc = cal_store_begin_run(st, &run))) {
        rc = cal_why(why, why_len, rc, "merge: storing the run: %s", cal_store_errmsg(st));
        goto free_all;
    }
    for (size_t k = 0; k < nc && rc == CAL_OK; k++) {
        if ((rc = merged_hists(ds, n, k, hs, tmp)) ||
            (rc = cal_store_add_cell(st, run.id, &cells[k], un[k], un_n[k])) ||
            (rc = cal_store_add_cell_hists(st, cells[k].id, hs, src[k])))
            rc = cal_why(why, why_len, rc, "merge: storing cell %zu: %s", k + 1, cal_store_errmsg(st));
        /* stored: the union's copy goes before the run is loaded back */
        for (size_t q = 0; q < un_n[k]; q++) free(un[k][q].chunk_ns);
        free(un[k]);
        un[k] = NULL;
        un_n[k] = 0;
    }
    cal_run_status status = rc ? CAL_RUN_FAILED : CAL_RUN_OK;
    for (size_t i = 0; i < n; i++)
        if (ds[i]->data->run.status != CAL_RUN_OK && ds[i]->data->run.status != CAL_RUN_RUNNING)
            status = CAL_RUN_FAILED;
    /* the library's verdicts over the merged run, then the fleet's */
    char *vj = NULL;
    cal_run_data *md = NULL;
    if (cal_store_load_run(st, run.id, CAL_LOAD_CHUNKS, &md) == CAL_OK) {
        md->run.status = status;
        vj = cal_run_verdicts(md);
    }
    json_t *lib = vj ? json_loads(vj, 0, NULL) : NULL;
    if (json_is_array(lib)) json_array_extend(lib, verdicts);
    else { json_decref(lib); lib = json_incref(verdicts); }
    char *all = json_dumps(lib, JSON_COMPACT);
    json_decref(lib);
    free(vj);
    cal_run_data_free(&md);
    int frc = cal_store_finish_run(st, run.id, status, all);
    free(all);
    if (rc == CAL_OK && frc) rc = cal_why(why, why_len, frc, "merge: finishing the run: %s", cal_store_errmsg(st));
    if (rc == CAL_OK) *run_id = run.id;
free_all:
    for (size_t k = 0; un && k < nc; k++) {
        for (size_t q = 0; un[k] && q < un_n[k]; q++) free(un[k][q].chunk_ns);
        free(un[k]);
    }
    free(un);
    free(un_n);
    free(src);
    free(hs);
    free(tmp);
    free(cells);
    free(protocol);
    json_decref(verdicts);
    free(delta);
done:
    free(ds);
    return rc;
}
