/* caliper — a stored run (store.h) as compare and report see it: the store's
 * cells (one shot of one configuration) are grouped into summary cells by
 * configuration and shot kind (cold 1, warm 2–6, rested …), warm-ups left
 * out, with the per-request samples pooled behind each group. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "report_internal.h"

#define MAX_ITL_PER_CELL (1u << 18)

/* One report cell from the cells idx[0..n) of a group and their pooled
 * summary (the analysis's): the numbers are the summary's, the samples the
 * requests behind them (and, over several shots, each shot's aggregate). */
static int add_cell(cal_result *res, const cal_run_data *d, const size_t *idx, size_t n,
                    const cal_summary *sum, cal_shot_kind kind, cal_sweep sweep)
{
    cal_rcell *c = cal_result_add_cell(res, sweep);
    if (!c) return CAL_ENOMEM;
    int e = cal_fingerprint_of(d, idx, n, kind, &c->fp);
    if (e) return e;
    snprintf(c->target, sizeof c->target, "%s", d->cells[idx[0]].target);
    for (int m = 0; m < CAL_M__N; m++) c->v[m] = cal_summary_get(sum, cal_metric_get((cal_metric)m));
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_cell *sc = &d->cells[idx[i]];
        total += (size_t)sc->n_requests;
        if (sc->req_first + (size_t)sc->n_requests <= d->n_reqs)
            for (int64_t j = 0; j < sc->n_requests; j++) {
                const cal_req_result *q = &d->reqs[sc->req_first + (size_t)j];
                if (q->chunk_ns && q->n_chunks > 1) total += (size_t)q->n_chunks;
            }
    }
    if (total < n) total = n;
    if (total > MAX_ITL_PER_CELL) total = MAX_ITL_PER_CELL;
    double *x = malloc(total * sizeof *x);
    if (!x) return CAL_ENOMEM;
    for (int s = 0; s < CAL_S__N && !e; s++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            const cal_cell *sc = &d->cells[idx[i]];
            if (s == CAL_S_AGG_TOKS) {
                if (n > 1 && isfinite(sc->sum.output_throughput)) x[m++] = sc->sum.output_throughput;
            } else m += cal_analysis_cell_values(d, sc, s, x + m, total - m);
        }
        if (m) e = cal_cell_set_samples(c, (cal_series)s, x, m);
    }
    free(x);
    return e;
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
    snprintf(r->id, sizeof r->id, "%lld", (long long)d->run.id);
    const cal_protocol_target *t = &d->proto.target;
    snprintf(r->target_name, sizeof r->target_name, "%s", t->name);
    snprintf(r->target_version, sizeof r->target_version, "%s", t->version);
    snprintf(r->target_url, sizeof r->target_url, "%.*s", (int)sizeof r->target_url - 1,
             t->url[0] ? t->url : t->command);
    snprintf(r->label, sizeof r->label, "%s", d->run.label && d->run.label[0] ? d->run.label :
             r->target_name[0] ? r->target_name : r->id);
    cal_fp_host_of(d->run.host_json, r->host, sizeof r->host);
    snprintf(r->build, sizeof r->build, "%s", d->run.build ? d->run.build : "");
    cal_fp_probe_of(d->run.build, r->probe, sizeof r->probe);
    r->created_unix = d->run.started_wall_ns > 0 ? d->run.started_wall_ns / 1000000000 : 0;
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

    /* the analysis's groups: per group the first shot it leaves out of the
     * quote (its own cell), then the quoted shots pooled */
    cal_analysis *an = NULL;
    if ((e = cal_analysis_run(d, &an))) goto out;
    for (size_t i = 0; i < an->n_verdicts; i++) cal_result_add_verdict(r, &an->verdicts[i]);
    size_t n = d->n_cells;
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
        if (cal_analysis_same_config(ci, &d->cells[ref])) {   /* every shot of it is a point on the shot chart */
            cal_shot s;
            cal_shot_init(&s);
            s.index = ci->shot_index;
            s.kind = ci->shot_kind;
            s.t_s = (double)(ci->start_ns - d->run.t0_mono_ns) / 1e9;
            s.dur_s = (double)(ci->end_ns - ci->start_ns) / 1e9;
            for (int m = 0; m < CAL_M__N; m++) s.v[m] = cal_summary_get(&ci->sum, cal_metric_get((cal_metric)m));
            e = cal_result_add_shot(r, &s);
        }
    }
    for (size_t k = 0; k < an->n_groups && !e; k++) {
        const cal_group *g = &an->groups[k];
        const cal_cell *ci = &d->cells[g->cells[0]];
        cal_sweep sw = ci->kind == CAL_CELL_PROMPT_SWEEP ? CAL_SWEEP_PROMPT :
                       nconc > 1 ? CAL_SWEEP_CONCURRENCY : nprompt > 1 ? CAL_SWEEP_PROMPT :
                       ci->kind == CAL_CELL_RATE ? CAL_SWEEP_OTHER : CAL_SWEEP_SHOTS;
        if (g->first_excluded >= 0) {
            size_t one = (size_t)g->first_excluded;
            const cal_cell *fx = &d->cells[one];
            e = add_cell(r, d, &one, 1, &fx->sum, fx->shot_kind, sw);
        }
        if (!e && g->n_quoted)
            e = add_cell(r, d, g->quoted, g->n_quoted, &g->pooled, g->quoted_kind, sw);
        if (!e && cal_analysis_same_config(ci, &d->cells[ref]) && r->shots_fp.concurrency <= 0 && r->n_cells)
            r->shots_fp = r->cells[r->n_cells - 1].fp;   /* the shots' workload */
    }
    cal_analysis_free(&an);
    if (e) goto out;
    cal_fp_set(r->shots_fp.slo, d->proto.slo);
    if (d->proto.n_damaged) {
        cal_fp_set(r->shots_fp.damaged, d->proto.damaged_field);
        snprintf(r->protocol_damage, sizeof r->protocol_damage, "%s%s", d->proto.damaged,
                 d->proto.n_damaged > 1 ? " (and more)" : "");
    }
    const char *clk = pick(d, CLOCK_PREF, 4, "MHz"), *pw = pick(d, POWER_PREF, 6, "W");
    for (size_t i = 0; i < d->n_tel && !e; i++) {
        const cal_store_tel_row *tr = &d->tel[i];
        int is_c = clk && !strcmp(tr->metric, clk), is_p = pw && !strcmp(tr->metric, pw);
        if (!is_c && !is_p) continue;
        cal_tel_point pt = {(double)(tr->t_ns - d->run.t0_mono_ns) / 1e9,
                            is_c ? tr->value : NAN, is_p ? tr->value : NAN};
        e = cal_result_add_tel(r, &pt);
    }
    /* a chat scenario or a replay: its turns (docs/workload.md) */
    if (!e && !(r->turns = calloc(1, sizeof *r->turns))) e = CAL_ENOMEM;
    if (!e) {
        int te = cal_turns_from_run(d, r->turns);
        if (te) {
            free(r->turns);
            r->turns = NULL;
            if (te != CAL_ENOTFOUND) e = te;
        }
    }
out:
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
