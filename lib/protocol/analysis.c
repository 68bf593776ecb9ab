/* The analysis of a stored run (analysis.h): groups of one configuration
 * across shots, the shots each group quotes, their pooled summary, and the
 * verdicts as data. Every output renders what this file computes. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/keep.h"
#include "caliper/noise.h"
#include "caliper/protocol.h"
#include "caliper/schema.h"
#include "caliper/series.h"
#include "caliper/stats.h"
#include "caliper/telemetry.h"
#include "lib/protocol/analysis_internal.h"
#include "lib/util/c_locale.h"

#define FIT_MAX 64   /* prompt lengths in the prefill fit */

/* ---- groups and quotes ---------------------------------------------------- */

int cal_analysis_same_config(const cal_cell *a, const cal_cell *b)
{
    return !strcmp(a->target, b->target) && a->concurrency == b->concurrency &&
           a->rate == b->rate && a->prompt_tokens == b->prompt_tokens &&
           !strcmp(a->content, b->content) && a->max_tokens == b->max_tokens &&
           a->output_fixed == b->output_fixed && a->kind == b->kind;
}

static void group_name(const cal_cell *c, char *buf, size_t n)
{
    char load[48];
    if (c->rate > 0) cal_snprintf(load, sizeof load, "rate %.3g/s", c->rate);
    else snprintf(load, sizeof load, "c%d", c->concurrency);
    snprintf(buf, n, "%s%s%s · %d tok %s", c->target[0] ? c->target : "",
             c->target[0] ? " · " : "", load, c->prompt_tokens, c->content);
}

/* SPEC 1.2: per-request at 1–4 users (closed loop), aggregate above. */
static int per_request_cell(const cal_cell *c) { return c->rate == 0 && c->concurrency <= 4; }

static double judged_value(const cal_cell *c, int per_request)
{
    return per_request ? c->sum.per_request_output_throughput_median : c->sum.output_throughput;
}

/* The quote (SPEC 1.1): warm-ups never; with two or more measured shots the
 * first is dropped. */
static void quote(const cal_run_data *d, cal_group *g)
{
    size_t nm = 0;
    for (size_t i = 0; i < g->n_cells; i++)
        if (d->cells[g->cells[i]].shot_kind != CAL_SHOT_WARMUP) nm++;
    size_t skip = nm >= 2 ? 1 : 0, seen = 0;
    g->first_excluded = -1;
    g->n_quoted = 0;
    g->quoted_first = g->quoted_last = 0;
    for (size_t i = 0; i < g->n_cells; i++) {
        const cal_cell *c = &d->cells[g->cells[i]];
        if (c->shot_kind == CAL_SHOT_WARMUP) continue;
        if (seen++ < skip) { g->first_excluded = (int)g->cells[i]; continue; }
        if (!g->n_quoted) { g->quoted_first = c->shot_index; g->quoted_kind = c->shot_kind; }
        else if (c->shot_kind != g->quoted_kind) g->quoted_kind = CAL_SHOT_UNKNOWN;
        g->quoted_last = c->shot_index;
        g->quoted[g->n_quoted++] = g->cells[i];
    }
    if (!g->n_quoted) g->quoted_kind = CAL_SHOT_UNKNOWN;
}

/* ---- per-request values ----------------------------------------------------- */

size_t cal_analysis_cell_values(const cal_run_data *d, const cal_cell *c, int series,
                                double *out, size_t cap)
{
    size_t k = 0;
    if (!d->reqs || c->req_first + (size_t)c->n_requests > d->n_reqs) return 0;
    for (int64_t i = 0; i < c->n_requests && k < cap; i++) {
        const cal_req_result *r = &d->reqs[c->req_first + (size_t)i];
        if (series == CAL_S_ITL_MS) {
            cal_itl_iter it;
            double g;
            cal_itl_begin(&it, r);
            while (k < cap && cal_itl_next(&it, &g)) out[k++] = g;
            continue;
        }
        double v = cal_req_sample(r, (cal_series)series);
        if (isfinite(v)) out[k++] = v;
    }
    return k;
}

/* ---- pooling ---------------------------------------------------------------- */

/* A shot's duration: its summary's, else its cell's wall clock; 0 unknown. */
static double shot_duration(const cal_cell *c)
{
    if (isfinite(c->sum.duration) && c->sum.duration > 0) return c->sum.duration;
    return c->end_ns > c->start_ns ? (double)(c->end_ns - c->start_ns) / 1e9 : 0;
}

/* Where a pooled cell kept no chunk times (--keep-chunks), its ITL is its
 * stored histogram: merge those with the chunk gaps of the cells that kept
 * theirs, and read the pooled ITL off the merged histogram (within
 * CAL_HIST_REL_ERROR), not off the subset of requests that kept theirs. */
static int pool_itl_hists(const cal_run_data *d, const size_t *idx, size_t n, cal_summary *s)
{
    int any = 0;
    for (size_t i = 0; d->itl_hist && i < n; i++) any |= d->itl_hist[idx[i]] != NULL;
    if (!any) return CAL_OK;
    cal_cell_hists *m = malloc(sizeof *m), *one = malloc(sizeof *one);
    if (!m || !one) { free(m); free(one); return CAL_ENOMEM; }
    cal_cell_hists_init(m);
    for (size_t i = 0; i < n; i++) {
        const cal_cell *c = &d->cells[idx[i]];
        if (d->itl_hist[idx[i]]) {
            cal_hist_merge(&m->h[CAL_HIST_ITL], d->itl_hist[idx[i]]);
            continue;
        }
        cal_cell_hists_init(one);
        for (size_t k = 0; c->req_first + (size_t)c->n_requests <= d->n_reqs &&
                           k < (size_t)c->n_requests; k++)
            cal_cell_hists_add(one, &d->reqs[c->req_first + k]);
        cal_hist_merge(&m->h[CAL_HIST_ITL], &one->h[CAL_HIST_ITL]);
    }
    const cal_hist *h = &m->h[CAL_HIST_ITL];
    s->median_itl_ms = cal_hist_percentile_ms(h, 50);
    s->p99_itl_ms = cal_hist_percentile_ms(h, 99);
    s->mean_itl_ms = cal_hist_mean_ms(h);
    s->std_itl_ms = cal_hist_sd_ms(h);
    free(m);
    free(one);
    return CAL_OK;
}

/* A shot's value of field f for pooling: the duration it weighs with is
 * shot_duration (its summary's, else its cell's wall clock). */
static double shot_value(const cal_cell *c, const cal_field *f)
{
    if (f == cal_metric_get(CAL_M_DURATION)) return shot_duration(c);
    return cal_summary_get(&c->sum, f);
}

/* Field f of the shots idx[0..n) pooled by its rule from their own
 * summaries (schema.h cal_pool; analysis.h states each). */
static double pool_shots(const cal_run_data *d, const size_t *idx, size_t n, const cal_field *f)
{
    double sum = 0, w = 0, v = NAN;
    int known = 1;
    for (size_t i = 0; i < n; i++) {
        const cal_cell *c = &d->cells[idx[i]];
        double x = shot_value(c, f), t = shot_duration(c);
        switch (f->pool) {
        case CAL_POOL_SUM:         /* counts, token totals, the duration */
            if (isfinite(x)) sum += x;
            break;
        case CAL_POOL_RATE:        /* Σ numerator ÷ Σ duration: the rates weighted
                                      by the durations; unknown when one shot's
                                      is (a goodput with unknown answers stays so) */
            if (!isfinite(x) || !(t > 0)) known = 0;
            else { sum += x * t; w += t; }
            break;
        case CAL_POOL_TIME_MEAN:   /* telemetry: over the shots with a reading */
            if (isfinite(x) && t > 0) { sum += x * t; w += t; }
            break;
        case CAL_POOL_MIN:
            if (isfinite(x) && !(x >= v)) v = x;
            break;
        default:                   /* CAL_POOL_REQUESTS: not from summaries */
            return NAN;
        }
    }
    switch (f->pool) {
    case CAL_POOL_SUM: return f->type == CAL_FIELD_INT || sum > 0 ? sum : NAN;
    case CAL_POOL_RATE: return known && w > 0 ? sum / w : NAN;
    case CAL_POOL_TIME_MEAN: return w > 0 ? sum / w : NAN;
    default: return v;
    }
}

int cal_analysis_pool(const cal_run_data *d, const size_t *idx, size_t n, cal_summary *s)
{
    if (!n) { cal_summary_init(s); return CAL_OK; }
    if (n == 1) { *s = d->cells[idx[0]].sum; return CAL_OK; }
    size_t total = 0;
    int loaded = d->n_reqs > 0;
    double dur = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_cell *c = &d->cells[idx[i]];
        total += (size_t)c->n_requests;
        if (c->req_first + (size_t)c->n_requests > d->n_reqs) loaded = 0;
        dur += shot_duration(c);
    }
    const cal_cell *c0 = &d->cells[idx[0]];
    /* every quoted request together, with the summed duration: the
     * CAL_POOL_REQUESTS statistics (ITL from the stored histograms where
     * chunk times were dropped), and the sums and rates over the requests
     * themselves; not loaded, the statistics are unknown (NAN) and the sums
     * and rates come from the shots' summaries */
    cal_summary req;
    cal_summary_init(&req);
    int have_req = loaded && total;
    if (have_req) {
        cal_req_result *r = malloc(total * sizeof *r);
        if (!r) return CAL_ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const cal_cell *c = &d->cells[idx[i]];
            memcpy(r + k, d->reqs + c->req_first, (size_t)c->n_requests * sizeof *r);
            k += (size_t)c->n_requests;
        }
        int e = cal_summary_compute(r, k, dur, c0->output_fixed ? c0->max_tokens : 0, &req);
        free(r);   /* shallow copies: the heap fields belong to d */
        if (!e) e = pool_itl_hists(d, idx, n, &req);
        if (e) return e;
    }
    /* one loop over the table: each field by its pool rule, from the
     * requests where they give it, else from the shots' own summaries
     * (telemetry and goodput are not the requests' to give) */
    cal_summary_init(s);
    for (size_t k = 0; k < cal_summary_n_fields; k++) {
        const cal_field *f = &cal_summary_fields[k];
        double v = have_req || f->pool == CAL_POOL_REQUESTS ? cal_summary_get(&req, f) : NAN;
        if (isnan(v) && f->pool != CAL_POOL_REQUESTS) v = pool_shots(d, idx, n, f);
        cal_summary_set(s, f, v);
    }
    return CAL_OK;
}

/* ---- the shot-series verdict (one call site) ------------------------------- */

int cal_analysis_shot_verdict(const cal_shot_sample *shots, size_t n, int per_request,
                              double floor, cal_verdict *out)
{
    return cal_analysis_shot_verdict_prior(shots, n, per_request, floor, NAN, 0, out);
}

static int shot_verdict(const cal_shot_sample *shots, size_t n, int per_request, double floor,
                        double equiv, double prior_sd, double prior_df, double first_sd,
                        double first_df, int first_left, cal_verdict *out);

int cal_analysis_shot_verdict_prior(const cal_shot_sample *shots, size_t n, int per_request,
                                    double floor, double prior_sd, double prior_df,
                                    cal_verdict *out)
{
    return shot_verdict(shots, n, per_request, floor, 0, prior_sd, prior_df, NAN, 0, 0, out);
}

static int shot_verdict(const cal_shot_sample *shots, size_t n, int per_request, double floor,
                        double equiv, double prior_sd, double prior_df, double first_sd,
                        double first_df, int first_left, cal_verdict *out)
{
    cal_verdict_init(out, CAL_VK_SHOTS);
    if (n > CAL_JUDGE_MAX_SHOTS) n = CAL_JUDGE_MAX_SHOTS;
    /* the calibrated judgement (caliper/judge.h) on every request of every
     * shot; one value per shot where a shot's requests were not loaded */
    cal_judge_shot js[CAL_JUDGE_MAX_SHOTS];
    int all_req = n > 0, all_cold = n >= 2;
    for (size_t i = 0; i < n; i++) {
        if (!shots[i].req_tok_s || !shots[i].n_req) all_req = 0;
        if (shots[i].kind != CAL_SHOT_COLD) all_cold = 0;
    }
    for (size_t i = 0; i < n; i++)
        js[i] = all_req ? (cal_judge_shot){shots[i].shot_index, shots[i].req_tok_s, shots[i].n_req}
                        : (cal_judge_shot){shots[i].shot_index, &shots[i].value, 1};
    cal_judge_opts o = {.floor = floor > 0 ? floor : CAL_SHOT_NOISE_FLOOR,
                        .min_requests = all_req ? 0 : 1,
                        .what = all_req || per_request ? "per-request tok/s" : "aggregate tok/s",
                        .prior_sd = prior_sd, .prior_df = all_req ? prior_df : 0,
                        .first_sd = first_sd, .first_df = all_req ? first_df : 0,
                        .first_left_out = first_left, .equivalence = equiv};
    cal_shot_kind k1 = n ? shots[0].kind : CAL_SHOT_UNKNOWN;
    o.first = all_cold ? CAL_JUDGE_ALL_COLD
            : k1 == CAL_SHOT_COLD ? CAL_JUDGE_FIRST_COLD
            : k1 == CAL_SHOT_WARM || k1 == CAL_SHOT_RESTED ? CAL_JUDGE_FIRST_WARM
            : CAL_JUDGE_FIRST_UNKNOWN;
    cal_judge_verdict jv;
    cal_judge_shots(js, n, &o, &jv);
    out->judged = jv.judged;
    out->n = (int)n;
    /* effect and its CI as the drop: (first − later) ÷ first, + = later slower */
    out->effect = isfinite(jv.effect) ? -jv.effect : NAN;
    out->lo = isfinite(jv.hi) ? -jv.hi : NAN;
    out->hi = isfinite(jv.lo) ? -jv.lo : NAN;
    out->values[0] = jv.first;
    out->values[1] = jv.later;
    out->values[2] = jv.first_shot;
    out->values[3] = jv.later_first;
    out->direction = jv.kind == CAL_JUDGE_SLOWER ? -1 : jv.kind == CAL_JUDGE_FASTER ? 1
                   : jv.kind == CAL_JUDGE_TREND ? (jv.slope < 0 ? -1 : 1) : 0;
    snprintf(out->text, sizeof out->text, "%s", jv.text);
    return out->judged;
}

/* The clock's share of a judged change, silent when the clock itself is
 * within noise (lib/telemetry/verdict.c). tput/clock: per measured shot. */
static int clock_share_verdict(const double *tput, const double *clock, size_t n,
                               double floor, cal_verdict *f)
{
    cal_clock_share cs;
    (void)floor;
    if (!cal_tel_clock_share(tput, clock, n, 0, 0, 0.95, &cs)) {
        if (isfinite(cs.clock_change)) return 0;   /* the clock within noise: silent */
        f->judged = 0;
        snprintf(f->text, sizeof f->text,
                 "cannot judge: no clock source measured the cold and warm shots");
        return 1;
    }
    f->judged = 1;
    int within = cs.share_lo <= 1 && cs.share_hi >= 1;
    f->direction = within ? 1 : -1;
    f->effect = cs.share;
    f->lo = cs.share_lo;
    f->hi = cs.share_hi;
    f->values[0] = clock[0];
    f->values[1] = clock[0] * (1 + cs.clock_change);
    f->values[2] = cs.clock_change;
    f->values[3] = cs.tput_change;
    f->n = cs.k + 1;
    cal_tel_clock_share_text(&cs, f->text, sizeof f->text);
    return 1;
}

/* ---- the analysis ---------------------------------------------------------- */

#define vadd cal_an_vadd
#define for_group cal_an_for_group

/* Shot verdict, then the clock (SPEC 1.4) and power checks of a drop. */
static int group_verdicts(const cal_run_data *d, const cal_group *g, size_t gi, double floor,
                          double equiv, double prior_sd, double prior_df, double first_sd,
                          double first_df, int first_left, vlist *l)
{
    size_t nm = 0, nreq = 0;
    for (size_t i = 0; i < g->n_cells; i++) {
        const cal_cell *c = &d->cells[g->cells[i]];
        if (c->shot_kind == CAL_SHOT_WARMUP) continue;
        nm++;
        nreq += (size_t)c->n_requests;
    }
    if (nm < 2) return CAL_OK;
    cal_shot_sample *sh = calloc(nm, sizeof *sh);
    double *tok = malloc((nreq ? nreq : 1) * sizeof *tok), *ttft = malloc((nreq ? nreq : 1) * sizeof *ttft);
    if (!sh || !tok || !ttft) { free(sh); free(tok); free(ttft); return CAL_ENOMEM; }
    size_t k = 0, ot = 0, of = 0;
    for (size_t i = 0; i < g->n_cells; i++) {
        const cal_cell *c = &d->cells[g->cells[i]];
        if (c->shot_kind == CAL_SHOT_WARMUP) continue;
        cal_shot_sample *s = &sh[k++];
        s->shot_index = c->shot_index;
        s->kind = c->shot_kind;
        s->value = judged_value(c, g->per_request);
        s->req_tok_s = tok + ot;
        s->n_req = cal_analysis_cell_values(d, c, CAL_S_REQ_TOKS, tok + ot, nreq - ot);
        ot += s->n_req;
        s->req_ttft_ms = ttft + of;
        s->n_ttft = cal_analysis_cell_values(d, c, CAL_S_TTFT_MS, ttft + of, nreq - of);
        of += s->n_ttft;
    }
    cal_verdict sv;
    shot_verdict(sh, nm, g->per_request, floor, equiv, prior_sd, prior_df, first_sd, first_df,
                 first_left, &sv);
    /* per shot: the judged value and the clock, for the clock's share */
    double *tv = malloc(nm * sizeof *tv), *cv = malloc(nm * sizeof *cv);
    for (size_t i = 0; tv && cv && i < nm; i++) {
        tv[i] = sh[i].value;
        cv[i] = NAN;
    }
    for (size_t i = 0, j = 0; tv && cv && i < g->n_cells; i++) {
        const cal_cell *c = &d->cells[g->cells[i]];
        if (c->shot_kind != CAL_SHOT_WARMUP) cv[j++] = c->sum.clock_mhz_mean;
    }
    free(sh); free(tok); free(ttft);
    /* a "cannot judge" is kept: it says what to run to get a verdict */
    cal_verdict *v = vadd(l, CAL_VK_SHOTS);
    if (v) {
        *v = sv;
        for_group(v, g, gi);
    }
    if (!v || !sv.judged || sv.direction == 0) { free(tv); free(cv); return CAL_OK; }
    /* a directional change: how much of it is the clock? */
    cal_verdict *cs = tv && cv ? vadd(l, CAL_VK_FREQUENCY) : NULL;
    if (cs) {
        for_group(cs, g, gi);
        if (!clock_share_verdict(tv, cv, nm, floor, cs)) l->n--;   /* silent */
    }
    free(tv); free(cv);
    if (sv.direction >= 0) return CAL_OK;

    /* a drop: was power flat as the clock fell? */
    double *fl = malloc(nm * sizeof *fl), *pw = malloc(nm * sizeof *pw), *ck = malloc(nm * sizeof *ck);
    if (!fl || !pw || !ck) { free(fl); free(pw); free(ck); return CAL_ENOMEM; }
    size_t np = 0;
    int seen = 0;
    for (size_t i = 0; i < g->n_cells; i++) {
        const cal_cell *c = &d->cells[g->cells[i]];
        if (c->shot_kind == CAL_SHOT_WARMUP || !seen++) continue;
        pw[np] = c->sum.power_w_mean;
        ck[np++] = c->sum.clock_mhz_mean;
    }
    cal_power_wall w;
    if (cal_tel_power_wall(pw, ck, np, 0, 0, &w) != CAL_WALL_CANNOT_JUDGE) {
        cal_verdict *p = vadd(l, CAL_VK_POWER_WALL);
        if (p) {
            for_group(p, g, gi);
            p->direction = w.kind == CAL_WALL_CEILING ? -1 : 0;
            p->effect = w.clock_drop;
            p->values[0] = w.power_mean_w;
            p->values[1] = w.power_spread;
            p->values[2] = w.clock_first;
            p->values[3] = w.clock_last;
            p->n = (int)w.n;
            cal_tel_power_wall_text(&w, p->text, sizeof p->text);
        }
    }
    free(fl); free(pw); free(ck);
    return CAL_OK;
}

/* A/B: cells of target B paired with target A by configuration and shot
 * index; B ÷ A of the judged column as a t interval on the log ratios. */
static void ab_verdicts(const cal_run_data *d, const cal_analysis *a, vlist *l)
{
    for (size_t gi = 0; gi < a->n_groups; gi++) {
        const cal_group *g = &a->groups[gi];
        const cal_cell *c0 = &d->cells[g->cells[0]];
        if (strcmp(c0->target, "A")) continue;
        double lr[1024];
        size_t n = 0;
        int per_req = per_request_cell(c0);
        for (size_t i = 0; i < g->n_cells && n < 1024; i++) {
            const cal_cell *ca = &d->cells[g->cells[i]];
            if (ca->shot_kind == CAL_SHOT_WARMUP) continue;
            for (size_t y = 0; y < d->n_cells && n < 1024; y++) {
                const cal_cell *cb = &d->cells[y];
                if (strcmp(cb->target, "B") || cb->shot_index != ca->shot_index ||
                    cb->concurrency != ca->concurrency || cb->prompt_tokens != ca->prompt_tokens ||
                    cb->rate != ca->rate)
                    continue;
                double va = judged_value(ca, per_req), vb = judged_value(cb, per_req);
                if (va > 0 && vb > 0) lr[n++] = log(vb / va);
            }
        }
        cal_verdict *v = vadd(l, CAL_VK_AB);
        if (!v) return;
        for_group(v, g, gi);
        v->cell[0] = 0;   /* the sentence names its configuration itself */
        v->n = (int)n;
        char load[32];
        if (c0->rate > 0) cal_snprintf(load, sizeof load, "rate %.3g/s", c0->rate);
        else snprintf(load, sizeof load, "c%d", c0->concurrency);
        if (n < 2) {
            v->judged = 0;
            snprintf(v->text, sizeof v->text, "A/B %s · %d tok: fewer than 2 paired shots: no ratio",
                     load, c0->prompt_tokens);
            continue;
        }
        double m = cal_stats_mean(lr, n), sd = cal_stats_sd(lr, n);
        /* two-sided 95 % t quantiles for n−1 degrees of freedom */
        static const double T95[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                     2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                     2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                     2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
        double tq = n - 1 < sizeof T95 / sizeof T95[0] ? T95[n - 1] : 1.96;
        double h = tq * sd / sqrt((double)n);
        v->effect = exp(m);
        v->lo = exp(m - h);
        v->hi = exp(m + h);
        v->direction = v->lo > 1 ? 1 : v->hi < 1 ? -1 : 0;
        cal_snprintf(v->text, sizeof v->text,
                 "A/B %s · %d tok: B ÷ A = %.3f× (95 %% CI %.3f–%.3f, %zu paired shots, %s "
                 "column)%s",
                 load, c0->prompt_tokens, v->effect, v->lo, v->hi, n,
                 per_req ? "per-request" : "aggregate",
                 v->direction ? "" : ": no detectable difference");
    }
}

static void run_verdicts(const cal_run_data *d, vlist *l)
{
    int64_t ok = 0, bad = 0, mism = 0, st[6] = {0};
    int approx = 0, fixed = 0;
    const char *first_err = NULL;
    int64_t cpu = 0;
    double lag = NAN, wall = 0;
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        ok += c->sum.completed;
        bad += c->sum.failed;
        mism += c->sum.output_len_mismatch;
        st[CAL_REQ_HTTP_ERROR] += c->sum.n_http_error;
        st[CAL_REQ_TIMEOUT] += c->sum.n_timeout;
        st[CAL_REQ_CONNECT_ERROR] += c->sum.n_connect_error;
        st[CAL_REQ_STREAM_ERROR] += c->sum.n_stream_error;
        st[CAL_REQ_CANCELLED] += c->sum.n_cancelled;
        if (!c->prompt_exact) approx = 1;
        if (c->output_fixed) fixed = c->max_tokens;
        cpu += c->cpu_ns;
        if (isfinite(c->send_lag_p99_ms) && !(c->send_lag_p99_ms <= lag)) lag = c->send_lag_p99_ms;
        if (isfinite(c->sum.duration)) wall += c->sum.duration;
    }
    for (size_t i = 0; i < d->n_reqs && !first_err; i++)
        if (d->reqs[i].status != CAL_REQ_OK && d->reqs[i].status != CAL_REQ_CANCELLED &&
            d->reqs[i].error)
            first_err = d->reqs[i].error;
    cal_verdict *v;
    if (bad && (v = vadd(l, CAL_VK_FAILURES))) {
        char parts[200] = "";
        size_t off = 0;
        for (int s = CAL_REQ_HTTP_ERROR; s <= CAL_REQ_CANCELLED && off < sizeof parts; s++)
            if (st[s]) off += (size_t)snprintf(parts + off, sizeof parts - off, "%s%lld %s",
                                               off ? ", " : "", (long long)st[s],
                                               cal_req_status_name((cal_req_status)s));
        v->direction = -1;
        v->effect = (double)bad / (double)(ok + bad);
        v->values[0] = (double)bad;
        v->values[1] = (double)(ok + bad);
        v->n = (int)(ok + bad);
        snprintf(v->text, sizeof v->text, "requests: %lld of %lld did not end ok (%s)%s%.200s",
                 (long long)bad, (long long)(ok + bad), parts, first_err ? "; first error: " : "",
                 first_err ? first_err : "");
    }
    if (mism && (v = vadd(l, CAL_VK_OUTPUT_LENGTH))) {
        v->direction = -1;
        v->effect = ok ? (double)mism / (double)ok : NAN;
        v->values[0] = (double)mism;
        v->values[1] = (double)ok;
        v->values[2] = fixed;
        v->n = (int)ok;
        snprintf(v->text, sizeof v->text,
                 "output length: %lld of %lld ok requests did not return %d tokens: the server "
                 "does not honour a fixed output length (ignore_eos/min_tokens)",
                 (long long)mism, (long long)ok, fixed);
    }
    (void)approx;   /* why a length is approximate: prompt_verdicts, from each cell's basis */
    /* the client self-check: was the probe the bottleneck? (docs/run.md) */
    int64_t chunks = 0;
    for (size_t i = 0; i < d->n_cells; i++) chunks += d->cells[i].chunks;
    double busy = wall > 0 ? (double)cpu / 1e9 / wall : NAN;
    if (chunks && (v = vadd(l, CAL_VK_CLIENT))) {
        int slow = busy > 0.5 || lag > 5.0;
        v->direction = slow ? -1 : 0;
        v->effect = busy;
        v->values[0] = lag;
        v->values[1] = (double)cpu / 1e3 / (double)chunks;
        cal_snprintf(v->text, sizeof v->text,
                     "client self-check: %.1f µs CPU per chunk, busy %.1f %% of the run, send lag "
                     "p99 %.2f ms — %s", v->values[1], 100.0 * busy, lag,
                     slow ? "the client may be the bottleneck" : "the probe was not the bottleneck");
    }
}

/* One measured shot (and no fresh engine per shot, whose shots are judged
 * cold against cold): no shot-series verdict. */
static void one_shot_verdict(const cal_run_data *d, vlist *l)
{
    int one = d->proto.shots == 1 && d->proto.cold != 1;
    int measured = 0;
    for (size_t i = 0; i < d->n_cells; i++) measured |= d->cells[i].shot_kind != CAL_SHOT_WARMUP;
    cal_verdict *v;
    if (one && measured && (v = vadd(l, CAL_VK_SHOTS))) {
        v->judged = 0;
        v->n = 1;
        cal_snprintf(v->text, sizeof v->text, "cannot judge: 1 shot; the default protocol (a warm-up "
                     "shot, then %d measured shots) gives a verdict", CAL_JUDGE_SHOTS_HINT);
    }
}

/* SPEC 1.2: which throughput column to read at the run's closed-loop
 * concurrencies (the per-request one at 1–4 users, the aggregate above). */
static void column_verdict(const cal_run_data *d, const cal_analysis *a, vlist *l)
{
    const cal_group *lo = NULL, *hi = NULL;   /* the lowest per-request, highest aggregate */
    for (size_t k = 0; k < a->n_groups; k++) {
        const cal_group *g = &a->groups[k];
        const cal_cell *c = &d->cells[g->cells[0]];
        if (c->rate > 0) continue;
        if (g->per_request && (!lo || c->concurrency < d->cells[lo->cells[0]].concurrency)) lo = g;
        if (!g->per_request && (!hi || c->concurrency > d->cells[hi->cells[0]].concurrency)) hi = g;
    }
    cal_verdict *v;
    if (!(lo || hi) || !(v = vadd(l, CAL_VK_COLUMN))) return;
    if (lo && hi) {
        const cal_summary *x = &lo->pooled, *y = &hi->pooled;
        int cx = d->cells[lo->cells[0]].concurrency, cy = d->cells[hi->cells[0]].concurrency;
        v->values[0] = cx;
        v->values[1] = x->per_request_output_throughput_median;
        v->values[2] = cy;
        v->values[3] = y->output_throughput;
        cal_snprintf(v->text, sizeof v->text,
                     "at 1–4 users read the per-request column (c%d: %.1f tok/s per request, %.1f "
                     "aggregate); at 8+ the aggregate one (c%d: %.1f tok/s aggregate, %.1f per request).",
                     cx, x->per_request_output_throughput_median, x->output_throughput, cy,
                     y->output_throughput, y->per_request_output_throughput_median);
    } else {
        snprintf(v->text, sizeof v->text, "%s",
                 lo ? "at these concurrencies read the per-request column; the aggregate one is "
                      "diluted by the gaps between requests."
                    : "at these concurrencies read the aggregate column.");
    }
}

/* SPEC 1.4: prefill time against prompt length, t(n) = a + b·n, over the
 * closed-loop groups at the lowest concurrency (one per prompt length),
 * from their pooled TTFT p50 (an upper bound on prefill time). */
static void prefill_verdict(const cal_run_data *d, const cal_analysis *a, vlist *l)
{
    int minc = 0;
    for (size_t k = 0; k < a->n_groups; k++) {
        const cal_cell *c = &d->cells[a->groups[k].cells[0]];
        if (c->rate == 0 && c->concurrency > 0 && (!minc || c->concurrency < minc)) minc = c->concurrency;
    }
    double x[FIT_MAX], y[FIT_MAX];
    size_t n = 0;
    for (size_t k = 0; k < a->n_groups && n < FIT_MAX; k++) {
        const cal_cell *c = &d->cells[a->groups[k].cells[0]];
        double t = a->groups[k].pooled.median_ttft_ms;
        if (c->rate > 0 || c->concurrency != minc || c->prompt_tokens <= 0 || !isfinite(t)) continue;
        int dup = 0;
        for (size_t i = 0; i < n; i++) dup |= x[i] == c->prompt_tokens;
        if (dup) continue;
        x[n] = c->prompt_tokens;
        y[n++] = t;
    }
    cal_linfit f;
    cal_verdict *v;
    if (n < 2 || cal_stats_linfit(x, y, n, 0.95, &f) != CAL_OK || !(v = vadd(l, CAL_VK_PREFILL_FIT))) return;
    v->values[0] = f.a;
    v->values[1] = f.b;
    v->values[2] = f.r2;
    v->n = (int)n;
    /* a per-token cost is a finding only when it is positive with a CI that
     * says so: a slope at or below 0 (TTFT fell as prompts grew, or noise)
     * is no cost, and two lengths give a line but no CI */
    if (!(f.b > 0) || (f.has_ci && !(f.b_lo > 0))) {
        v->judged = 0;
        if (f.has_ci)
            cal_snprintf(v->text, sizeof v->text, "prefill: no per-token cost shown: TTFT p50 "
                         "against prompt length has a slope of %.4f ms per token, 95 %% CI %.4f to "
                         "%.4f, over %zu lengths (one that holds 0 or lies below it is not a cost)",
                         f.b, f.b_lo, f.b_hi, n);
        else
            cal_snprintf(v->text, sizeof v->text, "prefill: no per-token cost shown: TTFT p50 did "
                         "not grow from the shorter prompt length to the longer (%.4f ms per token "
                         "over 2 lengths; measure 3 or more for a CI)", f.b);
        return;
    }
    if (f.has_ci)
        cal_snprintf(v->text, sizeof v->text,
                     "prefill: fixed cost %.1f ms + %.3f ms per prompt token, 95 %% CI %.3f–%.3f "
                     "(R² %.3f over %zu lengths; from TTFT p50, an upper bound on prefill time)",
                     f.a, f.b, f.b_lo, f.b_hi, f.r2, n);
    else
        cal_snprintf(v->text, sizeof v->text,
                     "prefill: fixed cost %.1f ms + %.3f ms per prompt token (a line through 2 "
                     "lengths, no CI: measure 3 or more; from TTFT p50, an upper bound on prefill "
                     "time)", f.a, f.b);
}

/* No clock read: a slowdown cannot be split into frequency and cycles. */
static void telemetry_verdict(const cal_run_data *d, vlist *l)
{
    int clock = 0;
    for (size_t i = 0; i < d->n_cells; i++) clock |= isfinite(d->cells[i].sum.clock_mhz_mean);
    cal_verdict *v;
    if (clock || !d->n_cells || !(v = vadd(l, CAL_VK_TELEMETRY))) return;
    v->judged = 0;
    /* why no clock: the run's own telemetry record says (off by choice, a
     * sampler that never started, or sensors that were not there) */
    json_t *t = d->run.telemetry_json ? json_loads(d->run.telemetry_json, 0, NULL) : NULL;
    const char *sum = json_string_value(json_object_get(t, "summary"));
    if (sum && !strncmp(sum, "off", 3))
        cal_snprintf(v->text, sizeof v->text, "clock: absent — telemetry was %.300s, so a "
                     "slowdown cannot be split into frequency and cycles", sum);
    else if (sum && !strncmp(sum, "absent", 6))
        cal_snprintf(v->text, sizeof v->text, "clock: absent — the telemetry sampler could not "
                     "start, so a slowdown cannot be split into frequency and cycles");
    else
        snprintf(v->text, sizeof v->text, "clock: absent — no clock sensor was read, so a slowdown "
                 "cannot be split into frequency and cycles");
    json_decref(t);
}

/* Stored verdicts the analysis does not recompute: NOTE objects, and plain
 * strings (older runs) unless the analysis wrote that very sentence. */
static void stored_verdicts(const cal_run_data *d, vlist *l, size_t n_computed)
{
    if (!d->run.verdicts_json) return;
    cal_verdict *st = malloc(MAX_VERDICTS * sizeof *st);
    if (!st) return;
    size_t ns = cal_verdicts_from_json(d->run.verdicts_json, st, MAX_VERDICTS);
    char a[700], b[700];
    for (size_t i = 0; i < ns; i++) {
        if (st[i].kind != CAL_VK_NOTE) continue;   /* recomputed above */
        int dup = 0;
        for (size_t k = 0; k < n_computed && !dup; k++)
            dup = !strcmp(cal_verdict_line(&l->v[k], a, sizeof a), st[i].text) ||
                  !strcmp(l->v[k].text, st[i].text);
        for (size_t k = n_computed; k < l->n && !dup; k++)
            dup = !strcmp(cal_verdict_line(&l->v[k], b, sizeof b), st[i].text);
        if (dup) continue;
        cal_verdict *v = vadd(l, CAL_VK_NOTE);
        if (v) *v = st[i];
    }
    free(st);
}

int cal_analysis_run(const cal_run_data *d, cal_analysis **out)
{
    *out = NULL;
    cal_analysis *a = calloc(1, sizeof *a);
    size_t nc = d->n_cells;
    size_t *gid = malloc((nc ? nc : 1) * sizeof *gid);
    vlist l = {calloc(MAX_VERDICTS, sizeof(cal_verdict)), 0};
    int e = CAL_ENOMEM;
    if (!a || !gid || !l.v) goto fail;
    const cal_protocol *pr = &d->proto;
    a->noise_floor = pr->noise_floor > 0 ? pr->noise_floor : 0;   /* 0: not stored */
    a->equivalence = pr->equivalence > 0 ? pr->equivalence : 0;
    /* the stored prior is one series': it speaks for a run of one group */
    a->prior_sd = pr->noise.shot_sd;
    a->prior_df = pr->noise.shot_df;
    a->first_sd = pr->noise.first_sd;
    a->first_df = pr->noise.first_df;
    a->first_left_out = pr->noise.first_left_out;
    a->groups = calloc(nc ? nc : 1, sizeof *a->groups);
    if (!a->groups) goto fail;
    /* groups in first-seen order: a group id per cell, then exact arrays */
    for (size_t i = 0; i < nc; i++) {
        size_t k;
        for (k = 0; k < a->n_groups; k++)
            if (cal_analysis_same_config(&d->cells[a->groups[k].first_excluded], &d->cells[i])) break;
        if (k == a->n_groups) {
            cal_group *g = &a->groups[a->n_groups++];
            g->first_excluded = (int)i;   /* for now: the group's first cell */
            g->per_request = per_request_cell(&d->cells[i]);
            group_name(&d->cells[i], g->name, sizeof g->name);
        }
        gid[i] = k;
        a->groups[k].n_cells++;
    }
    for (size_t k = 0; k < a->n_groups; k++) {
        cal_group *g = &a->groups[k];
        g->cells = malloc(g->n_cells * sizeof *g->cells);
        g->quoted = malloc(g->n_cells * sizeof *g->quoted);
        if (!g->cells || !g->quoted) goto fail;
        g->n_cells = 0;
    }
    for (size_t i = 0; i < nc; i++) a->groups[gid[i]].cells[a->groups[gid[i]].n_cells++] = i;
    for (size_t k = 0; k < a->n_groups; k++) {
        cal_group *g = &a->groups[k];
        quote(d, g);
        if ((e = cal_analysis_pool(d, g->quoted, g->n_quoted, &g->pooled))) goto fail;
    }
    for (size_t k = 0; k < a->n_groups; k++)
        if ((e = group_verdicts(d, &a->groups[k], k, a->noise_floor, a->equivalence, a->prior_sd,
                                  a->n_groups == 1 ? a->prior_df : 0, a->first_sd,
                                  a->n_groups == 1 ? a->first_df : 0, a->first_left_out, &l)))
            goto fail;
    one_shot_verdict(d, &l);
    ab_verdicts(d, a, &l);
    run_verdicts(d, &l);
    cal_an_prompt_verdicts(d, a, &l);
    column_verdict(d, a, &l);
    prefill_verdict(d, a, &l);
    telemetry_verdict(d, &l);
    stored_verdicts(d, &l, l.n);
    a->verdicts = l.v;
    a->n_verdicts = l.n;
    free(gid);
    *out = a;
    return CAL_OK;
fail:
    free(gid);
    if (a) { a->verdicts = l.v; l.v = NULL; }
    free(l.v);
    cal_analysis_free(&a);
    return e ? e : CAL_ENOMEM;
}

void cal_analysis_free(cal_analysis **ap)
{
    if (!ap || !*ap) return;
    cal_analysis *a = *ap;
    for (size_t k = 0; k < a->n_groups; k++) {
        free(a->groups[k].cells);
        free(a->groups[k].quoted);
    }
    free(a->groups);
    free(a->verdicts);
    free(a);
    *ap = NULL;
}

/* ---- verdicts as JSON ---------------------------------------------------- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }
static double jget(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

char *cal_verdicts_json(const cal_verdict *v, size_t n)
{
    json_t *arr = json_array();
    if (!arr) return NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object(), *vals = json_array();
        json_object_set_new(o, "kind", json_string(cal_verdict_kind_name(v[i].kind)));
        json_object_set_new(o, "group", v[i].group >= 0 ? json_integer(v[i].group) : json_null());
        json_object_set_new(o, "cell", json_string(v[i].cell));
        json_object_set_new(o, "judged", json_boolean(v[i].judged));
        json_object_set_new(o, "direction", json_integer(v[i].direction));
        json_object_set_new(o, "effect", jnum(v[i].effect));
        json_object_set_new(o, "lo", jnum(v[i].lo));
        json_object_set_new(o, "hi", jnum(v[i].hi));
        for (int k = 0; k < CAL_VERDICT_VALUES; k++) json_array_append_new(vals, jnum(v[i].values[k]));
        json_object_set_new(o, "values", vals);
        json_object_set_new(o, "n", json_integer(v[i].n));
        json_object_set_new(o, "text", json_string(v[i].text));
        json_array_append_new(arr, o);
    }
    char *s = json_dumps(arr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(arr);
    return s;
}

char *cal_analysis_verdicts_json(const cal_run_data *d)
{
    cal_analysis *a;
    if (cal_analysis_run(d, &a)) return NULL;
    size_t n = 0;
    while (n < a->n_verdicts && a->verdicts[n].kind != CAL_VK_NOTE) n++;   /* stored ones last */
    char *s = cal_verdicts_json(a->verdicts, n);
    cal_analysis_free(&a);
    return s;
}

size_t cal_verdicts_from_json(const char *text, cal_verdict *out, size_t cap)
{
    json_t *arr = text ? json_loads(text, 0, NULL) : NULL;
    size_t n = 0, i;
    json_t *x;
    json_array_foreach(arr, i, x) {
        if (n >= cap) break;
        cal_verdict *v = &out[n];
        if (json_is_string(x)) {
            cal_verdict_init(v, CAL_VK_NOTE);
            snprintf(v->text, sizeof v->text, "%s", json_string_value(x));
            n++;
            continue;
        }
        if (!json_is_object(x)) continue;
        cal_verdict_kind k = CAL_VK_NOTE;
        const json_t *kj = json_object_get(x, "kind");
        if (json_is_string(kj) && cal_verdict_kind_parse(json_string_value(kj), &k)) k = CAL_VK_NOTE;
        cal_verdict_init(v, k);
        const json_t *g = json_object_get(x, "group");
        v->group = json_is_integer(g) && json_integer_value(g) >= 0 && json_integer_value(g) < (1 << 30)
                       ? (int)json_integer_value(g) : -1;
        const json_t *s = json_object_get(x, "cell");
        if (json_is_string(s)) snprintf(v->cell, sizeof v->cell, "%s", json_string_value(s));
        v->judged = !json_is_false(json_object_get(x, "judged"));
        double dir = jget(x, "direction");
        v->direction = dir > 0 ? 1 : dir < 0 ? -1 : 0;
        v->effect = jget(x, "effect");
        v->lo = jget(x, "lo");
        v->hi = jget(x, "hi");
        const json_t *vals = json_object_get(x, "values");
        for (int k2 = 0; k2 < CAL_VERDICT_VALUES; k2++) {
            const json_t *e = json_array_get(vals, (size_t)k2);
            v->values[k2] = json_is_number(e) ? json_number_value(e) : NAN;
        }
        double nn = jget(x, "n");
        v->n = isfinite(nn) && nn >= 0 && nn < 1e9 ? (int)nn : 0;
        s = json_object_get(x, "text");
        snprintf(v->text, sizeof v->text, "%s", json_is_string(s) ? json_string_value(s) : "");
        n++;
    }
    json_decref(arr);
    return n;
}
