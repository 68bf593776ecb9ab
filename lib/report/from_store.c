/* caliper — a stored run (store.h) as compare and report see it: the store's
 * cells (one shot of one configuration) are grouped into summary cells by
 * configuration and shot kind (cold 1, warm 2–6, rested …), warm-ups left
 * out, with the per-request samples pooled behind each group. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "report_internal.h"

#define MAX_ITL_PER_CELL (1u << 18)

static void host_line(const char *host_json, char *dst, size_t n)
{
    dst[0] = 0;
    if (!host_json) return;
    json_t *h = json_loads(host_json, 0, NULL);
    if (!h) return;
    char cpu[96] = "", os[64] = "", gpu[96] = "";
    cal_report_jstr(h, "cpu", cpu, sizeof cpu);
    cal_report_jstr(h, "os", os, sizeof os);
    cal_report_jstr(h, "gpu", gpu, sizeof gpu);
    double cores = cal_report_jnum(h, "cores"), mem = cal_report_jnum(h, "memory_bytes");
    size_t used = 0;
    used += (size_t)snprintf(dst + used, n - used, "%s", cpu[0] ? cpu : "unknown CPU");
    if (isfinite(cores) && used < n) used += (size_t)snprintf(dst + used, n - used, " (%.0f cores)", cores);
    if (gpu[0] && used < n) used += (size_t)snprintf(dst + used, n - used, ", %s", gpu);
    if (isfinite(mem) && used < n) used += (size_t)snprintf(dst + used, n - used, ", %.0f GiB", mem / 1073741824.0);
    if (os[0] && used < n) snprintf(dst + used, n - used, ", %s", os);
    json_decref(h);
}

/* "caliper 0.1.0 (commit …)" -> "caliper 0.1.0": the probe, without the build. */
static void probe_of_build(const char *build, char *dst, size_t n)
{
    char tool[32] = "", ver[32] = "";
    if (build && sscanf(build, "%31s %31s", tool, ver) == 2) snprintf(dst, n, "%s %s", tool, ver);
    else snprintf(dst, n, "caliper");
}

/* The same workload configuration, whatever the shot. */
static int same_workload(const cal_cell *a, const cal_cell *b)
{
    return a->kind == b->kind && !strcmp(a->target, b->target) &&
           a->concurrency == b->concurrency && a->rate == b->rate &&
           a->prompt_tokens == b->prompt_tokens && !strcmp(a->content, b->content) &&
           a->max_tokens == b->max_tokens && a->output_fixed == b->output_fixed;
}

static int same_config(const cal_cell *a, const cal_cell *b)
{
    return a->kind == b->kind && !strcmp(a->target, b->target) &&
           a->concurrency == b->concurrency && a->rate == b->rate &&
           a->prompt_tokens == b->prompt_tokens && !strcmp(a->content, b->content) &&
           a->max_tokens == b->max_tokens && a->output_fixed == b->output_fixed &&
           a->shot_kind == b->shot_kind;
}

/* Summary field -> our metric, for groups without loaded requests. */
static const struct { const char *field; cal_metric m; } SUMMAP[] = {
    {"output_throughput", CAL_M_AGG_TOKS},
    {"per_request_output_throughput_median", CAL_M_REQ_TOKS},
    {"prefill_tps_median", CAL_M_PREFILL_TOKS}, {"decode_tps_median", CAL_M_DECODE_TOKS},
    {"median_ttft_ms", CAL_M_TTFT_P50}, {"p95_ttft_ms", CAL_M_TTFT_P95},
    {"p99_ttft_ms", CAL_M_TTFT_P99}, {"median_itl_ms", CAL_M_ITL_P50},
    {"p99_itl_ms", CAL_M_ITL_P99}, {"median_tpot_ms", CAL_M_TPOT_P50},
    {"median_e2el_ms", CAL_M_E2E_P50}, {"p99_e2el_ms", CAL_M_E2E_P99},
    {"clock_mhz_mean", CAL_M_CLOCK_MHZ}, {"power_w_mean", CAL_M_POWER_W},
};

typedef struct pool { double *x; size_t n, cap; } pool;

static int push(pool *p, double v)
{
    if (!isfinite(v)) return CAL_OK;
    if (p->n == p->cap) {
        size_t want = p->cap ? p->cap * 2 : 64;
        double *x = realloc(p->x, want * sizeof *x);
        if (!x) return CAL_ENOMEM;
        p->x = x;
        p->cap = want;
    }
    p->x[p->n++] = v;
    return CAL_OK;
}

/* Per-request samples of one store cell's ok requests, into the pools. */
static int pool_requests(const cal_run_data *d, const cal_cell *sc, pool *pl)
{
    int e = CAL_OK;
    if (!d->reqs || sc->req_first + (size_t)sc->n_requests > d->n_reqs) return CAL_OK;
    for (int64_t i = 0; i < sc->n_requests && !e; i++) {
        const cal_req_result *r = &d->reqs[sc->req_first + (size_t)i];
        if (r->status != CAL_REQ_OK || r->end_ns <= 0) continue;
        int64_t sched = r->sched_ns ? r->sched_ns : r->send_ns;
        double e2e = (double)(r->end_ns - sched) / 1e6;
        double ttft = r->first_token_ns ? (double)(r->first_token_ns - sched) / 1e6 : NAN;
        double own = (double)(r->end_ns - r->send_ns) / 1e9;
        if (r->output_tokens > 0 && own > 0) e = push(&pl[CAL_S_REQ_TOKS], r->output_tokens / own);
        if (!e) e = push(&pl[CAL_S_E2E_MS], e2e);
        if (!e) e = push(&pl[CAL_S_TTFT_MS], ttft);
        if (!e && r->output_tokens >= 2 && isfinite(ttft) && e2e > ttft)
            e = push(&pl[CAL_S_TPOT_MS], (e2e - ttft) / (r->output_tokens - 1));
        if (!e && r->prompt_tokens > 0 && ttft > 0)
            e = push(&pl[CAL_S_PREFILL_TOKS], r->prompt_tokens / (ttft / 1e3));
        if (!e && r->output_tokens >= 2 && r->last_token_ns > r->first_token_ns && r->first_token_ns)
            e = push(&pl[CAL_S_DECODE_TOKS],
                     (r->output_tokens - 1) / ((double)(r->last_token_ns - r->first_token_ns) / 1e9));
        for (int k = 1; !e && r->chunk_ns && k < r->n_chunks && pl[CAL_S_ITL_MS].n < MAX_ITL_PER_CELL; k++)
            e = push(&pl[CAL_S_ITL_MS], (double)(r->chunk_ns[k] - r->chunk_ns[k - 1]) / 1e6);
    }
    return e;
}

static int add_group(cal_result *res, const cal_run_data *d, const size_t *idx, size_t n,
                     int warmup, const char *api, cal_sweep sweep)
{
    const cal_cell *c0 = &d->cells[idx[0]];
    cal_rcell *c = cal_result_add_cell(res, sweep);
    if (!c) return CAL_ENOMEM;
    cal_fingerprint *fp = &c->fp;
    fp->shot_kind = c0->shot_kind;
    fp->shot_first = c0->shot_index;
    fp->shot_last = d->cells[idx[n - 1]].shot_index;
    fp->rest_s = (double)c0->rest_before_ns / 1e9;
    for (size_t i = 1; i < n; i++)   /* a group with mixed rests has no single rest */
        if (d->cells[idx[i]].rest_before_ns != c0->rest_before_ns) fp->rest_s = NAN;
    fp->warmup = warmup;
    fp->concurrency = c0->concurrency;
    fp->request_rate = c0->rate;
    fp->prompt_tokens = c0->prompt_tokens;
    snprintf(fp->content, sizeof fp->content, "%s%s", c0->content,
             c0->content[0] && !c0->unique_prompts ? " (repeated prompt)" : "");
    if (c0->output_fixed) snprintf(fp->output_policy, sizeof fp->output_policy, "fixed %d", c0->max_tokens);
    else if (c0->max_tokens > 0) snprintf(fp->output_policy, sizeof fp->output_policy, "up to %d", c0->max_tokens);
    fp->streaming = 1;
    cal_fp_set(fp->api, api);
    cal_fp_set(fp->probe, res->probe);
    cal_fp_set(fp->host, res->host);

    /* numbers: one shot as stored; several: median over the shots, and the
     * per-request columns from the pooled requests when they were loaded */
    c->completed = c->failed = 0;
    c->duration_s = 0;
    double *per = malloc(n * sizeof *per);
    if (!per) return CAL_ENOMEM;
    for (size_t k = 0; k < sizeof SUMMAP / sizeof SUMMAP[0]; k++) {
        const cal_field *f = cal_summary_field(SUMMAP[k].field);
        if (!f) continue;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            double v = cal_summary_get(&d->cells[idx[i]].sum, f);
            if (isfinite(v)) per[m++] = v;
        }
        if (m) c->v[SUMMAP[k].m] = cal_stats_median(per, m);
        if (SUMMAP[k].m == CAL_M_AGG_TOKS && n > 1) {   /* the per-shot series */
            m = 0;
            for (size_t i = 0; i < n; i++) {
                double v = cal_summary_get(&d->cells[idx[i]].sum, f);
                if (isfinite(v)) per[m++] = v;
            }
            if (cal_cell_set_samples(c, CAL_S_AGG_TOKS, per, m)) { free(per); return CAL_ENOMEM; }
        }
    }
    free(per);
    for (size_t i = 0; i < n; i++) {
        const cal_cell *sc = &d->cells[idx[i]];
        c->completed += sc->sum.completed;
        c->failed += sc->sum.failed;
        c->duration_s += sc->sum.duration;
    }
    pool pl[CAL_S__N];
    memset(pl, 0, sizeof pl);
    int e = CAL_OK;
    for (size_t i = 0; i < n && !e; i++) e = pool_requests(d, &d->cells[idx[i]], pl);
    for (int s = 0; s < CAL_S__N && !e; s++)
        if (s != CAL_S_AGG_TOKS && pl[s].n) e = cal_cell_set_samples(c, (cal_series)s, pl[s].x, pl[s].n);
    for (int s = 0; s < CAL_S__N; s++) free(pl[s].x);
    if (e) return e;
    if (n > 1) {   /* pooled percentiles replace the median of per-shot percentiles */
        for (int m = 0; m < CAL_M__N; m++) {
            const cal_metric_info *mi = cal_metric_get((cal_metric)m);
            if (mi->series >= 0 && mi->series != CAL_S_AGG_TOKS && c->ns[mi->series]) c->v[m] = NAN;
        }
        cal_cell_fill_from_samples(c);
    }
    return CAL_OK;
}

static const char *const CLOCK_PREF[] = {"gpu0_sm_mhz", "amdgpu0_sclk_mhz", "gpu_mhz", "cpu_mhz_mean"};
static const char *const POWER_PREF[] = {"gpu0_w", "amdgpu0_w", "gpu_w", "package_w", "machine_w", "psys_w"};

static const char *pick(const cal_run_data *d, const char *const *pref, size_t np, const char *unit)
{
    for (size_t p = 0; p < np; p++)
        for (size_t i = 0; i < d->n_tel; i++)
            if (!strcmp(d->tel[i].metric, pref[p]) && isfinite(d->tel[i].value)) return pref[p];
    for (size_t i = 0; i < d->n_tel; i++)
        if (!strcmp(d->tel[i].unit, unit) && isfinite(d->tel[i].value)) return d->tel[i].metric;
    return NULL;
}

int cal_result_from_run_data(const cal_run_data *d, cal_result **out, char *err, size_t errn)
{
    cal_result *r = cal_result_new();
    if (!r) return CAL_ENOMEM;
    int e = CAL_OK;
    char api[32] = "completions";
    snprintf(r->id, sizeof r->id, "%lld", (long long)d->run.id);
    json_t *t = d->run.target_json ? json_loads(d->run.target_json, 0, NULL) : NULL;
    if (t) {
        cal_report_jstr(t, "name", r->target_name, sizeof r->target_name);
        cal_report_jstr(t, "version", r->target_version, sizeof r->target_version);
        cal_report_jstr(t, "url", r->target_url, sizeof r->target_url);
        if (!r->target_url[0]) cal_report_jstr(t, "command", r->target_url, sizeof r->target_url);
        char a[32];
        cal_report_jstr(t, "api", a, sizeof a);
        if (a[0]) snprintf(api, sizeof api, "%s", a);
        json_decref(t);
    }
    snprintf(r->label, sizeof r->label, "%s", d->run.label && d->run.label[0] ? d->run.label :
             r->target_name[0] ? r->target_name : r->id);
    host_line(d->run.host_json, r->host, sizeof r->host);
    snprintf(r->build, sizeof r->build, "%s", d->run.build ? d->run.build : "");
    probe_of_build(d->run.build, r->probe, sizeof r->probe);
    r->created_unix = d->run.started_wall_ns > 0 ? d->run.started_wall_ns / 1000000000 : 0;
    int warmup = -1;
    json_t *p = d->run.protocol_json ? json_loads(d->run.protocol_json, 0, NULL) : NULL;
    if (p) {
        double w = cal_report_jnum(p, "warmup");
        warmup = isfinite(w) ? (int)w : 0;
        json_decref(p);
    }
    json_t *tj = d->run.telemetry_json ? json_loads(d->run.telemetry_json, 0, NULL) : NULL;
    if (tj) {
        size_t i, used = 0;
        json_t *s;
        json_array_foreach(json_object_get(tj, "sources"), i, s) {
            if (!json_is_true(json_object_get(s, "present"))) continue;
            char b[32];
            cal_report_jstr(s, "backend", b, sizeof b);
            if (used < sizeof r->telemetry)
                used += (size_t)snprintf(r->telemetry + used, sizeof r->telemetry - used, "%s%s", used ? ", " : "", b);
        }
        json_decref(tj);
    }
    json_t *vj = d->run.verdicts_json ? json_loads(d->run.verdicts_json, 0, NULL) : NULL;
    if (json_is_array(vj)) {
        size_t i;
        json_t *v;
        json_array_foreach(vj, i, v) if (json_is_string(v)) cal_result_add_verdict(r, json_string_value(v));
    }
    json_decref(vj);

    /* groups: same configuration and shot kind, in first-seen order */
    size_t n = d->n_cells;
    char *done = calloc(n ? n : 1, 1);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (!done || !idx) { e = CAL_ENOMEM; goto out; }
    /* What the run swept decides how its cells are read: several
     * concurrencies make a concurrency curve, several prompt lengths a
     * prefill line, neither a shot series. */
    int nconc = 0, nprompt = 0;
    size_t ref = 0;   /* the shot chart's workload: lowest concurrency, longest prompt */
    for (size_t i = 0; i < n; i++) {
        const cal_cell *ci = &d->cells[i];
        int seen_c = 0, seen_p = 0;
        for (size_t j = 0; j < i; j++) {
            seen_c |= d->cells[j].concurrency == ci->concurrency;
            seen_p |= d->cells[j].prompt_tokens == ci->prompt_tokens;
        }
        nconc += !seen_c;
        nprompt += !seen_p;
        const cal_cell *cr = &d->cells[ref];
        if (ci->concurrency < cr->concurrency ||
            (ci->concurrency == cr->concurrency && ci->prompt_tokens > cr->prompt_tokens)) ref = i;
    }
    for (size_t i = 0; i < n && !e; i++) {
        const cal_cell *ci = &d->cells[i];
        if (same_workload(ci, &d->cells[ref])) {   /* every shot of it is a point on the shot chart */
            cal_shot s = {
                .index = ci->shot_index, .kind = ci->shot_kind,
                .t_s = (double)(ci->start_ns - d->run.t0_mono_ns) / 1e9,
                .dur_s = (double)(ci->end_ns - ci->start_ns) / 1e9,
                .req_tok_s = ci->sum.per_request_output_throughput_median,
                .agg_tok_s = ci->sum.output_throughput,
                .prefill_tok_s = ci->sum.prefill_tps_median,
                .decode_tok_s = ci->sum.decode_tps_median,
                .ttft_ms = ci->sum.median_ttft_ms,
                .clock_mhz = ci->sum.clock_mhz_mean, .power_w = ci->sum.power_w_mean,
            };
            if ((e = cal_result_add_shot(r, &s))) break;
        }
        if (done[i] || ci->shot_kind == CAL_SHOT_WARMUP) continue;
        size_t m = 0;
        for (size_t j = i; j < n; j++)
            if (!done[j] && same_config(ci, &d->cells[j])) { idx[m++] = j; done[j] = 1; }
        cal_sweep sw = ci->kind == CAL_CELL_PROMPT_SWEEP ? CAL_SWEEP_PROMPT :
                       nconc > 1 ? CAL_SWEEP_CONCURRENCY : nprompt > 1 ? CAL_SWEEP_PROMPT :
                       ci->kind == CAL_CELL_RATE ? CAL_SWEEP_OTHER : CAL_SWEEP_SHOTS;
        e = add_group(r, d, idx, m, warmup, api, sw);
        if (!e && same_workload(ci, &d->cells[ref]) && r->shots_fp.concurrency <= 0)
            r->shots_fp = r->cells[r->n_cells - 1].fp;   /* the shots' workload */
    }
    if (e) goto out;
    const char *clk = pick(d, CLOCK_PREF, 4, "MHz"), *pw = pick(d, POWER_PREF, 6, "W");
    for (size_t i = 0; i < d->n_tel && !e; i++) {
        const cal_store_tel_row *tr = &d->tel[i];
        int is_c = clk && !strcmp(tr->metric, clk), is_p = pw && !strcmp(tr->metric, pw);
        if (!is_c && !is_p) continue;
        cal_tel_point pt = {(double)(tr->t_ns - d->run.t0_mono_ns) / 1e9,
                            is_c ? tr->value : NAN, is_p ? tr->value : NAN};
        e = cal_result_add_tel(r, &pt);
    }
out:
    free(done);
    free(idx);
    if (e) {
        cal_report_errf(err, errn, "run %lld: %s", (long long)d->run.id, cal_strerror(e));
        cal_result_free(&r);
        return e;
    }
    *out = r;
    return CAL_OK;
}

int cal_result_from_store(cal_store *st, const char *ref, cal_result **out, char *err, size_t errn)
{
    int64_t id;
    int e = cal_store_find_run(st, ref, &id);
    if (e) {
        cal_report_errf(err, errn, "no run \"%s\" in the store (an id, a label, or \"latest\")", ref);
        return e;
    }
    cal_run_data *d = NULL;
    if ((e = cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d))) {
        cal_report_errf(err, errn, "run %lld: %s (%s)", (long long)id, cal_strerror(e), cal_store_errmsg(st));
        return e;
    }
    e = cal_result_from_run_data(d, out, err, errn);
    cal_run_data_free(&d);
    return e;
}
