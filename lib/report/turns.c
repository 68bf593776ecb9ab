/* caliper — per turn index of a chat scenario or a replay: how TTFT grows
 * with the shared prefix a client resends every turn (seed 004), the share
 * of each prompt that was already sent, the whole turn, and under A/B the
 * whole-turn speedup with its CI beside the notes' formula (SPEC, the
 * whole-turn row: (TTFT + decode × s) ÷ (TTFT + decode)). */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/util/c_locale.h"
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "caliper/judge.h"
#include "caliper/report.h"
#include "caliper/series.h"
#include "caliper/stats.h"
#include "lib/report/report_internal.h"
#include "lib/report/svg.h"

static double mean_of(const double *x, size_t n) { return n ? cal_stats_mean(x, n) : NAN; }

/* The TTFT line of side A (or the only side) over its requests: on the
 * tokens the server computed where it reported its cache hits, on the whole
 * prompt where no prefix could be cached (the built-in engine has no cache;
 * no turn resent one), and none where a cache may have served part of each
 * prompt unseen. A slope is a finding only when positive with a CI that
 * excludes 0: TTFT that falls as prompts grow is the cache, or load, never
 * a per-token cost. */
static void turns_fit(const cal_run_data *d, cal_turns *out, const double *x_prompt,
                      const double *y_prompt, size_t n, const double *x_new,
                      const double *y_new, size_t n_new, double shared_lo, double shared_hi)
{
    out->fit_points = 0;
    out->slope_raw = out->slope_lo = out->slope_hi = NAN;
    int builtin = !strcmp(d->proto.target.kind, "builtin");
    const double *x = NULL, *y = y_prompt;
    const char *on = "";
    /* the new tokens where the server reported most requests' hits */
    if (n_new >= 2 && n_new * 2 >= n) {
        out->fit_on = CAL_TURNS_FIT_NEW;
        x = x_new;
        y = y_new;
        n = n_new;
        on = "new prompt tokens (each prompt less the tokens the server's cache served, as it "
             "reported them)";
    } else if (builtin || !(shared_hi > 0)) {
        out->fit_on = n >= 2 ? CAL_TURNS_FIT_PROMPT : CAL_TURNS_FIT_NONE;
        x = x_prompt;
        on = builtin ? "prompt tokens (the built-in engine has no prefix cache: each turn "
                       "prefills its whole prompt)"
                     : "prompt tokens (no turn resent a prefix a cache could serve)";
    } else {
        out->fit_on = CAL_TURNS_FIT_CACHE_UNKNOWN;
        cal_snprintf(out->fit_text, sizeof out->fit_text, "cannot fit TTFT per prompt token: the "
                     "prefix cache may have served part of each prompt (the server reported no "
                     "usable cached tokens, and %.0f–%.0f %% of each turn's prompt had been sent "
                     "before)",
                     100 * shared_lo, 100 * shared_hi);
        return;
    }
    cal_linfit f;
    if (out->fit_on == CAL_TURNS_FIT_NONE || cal_stats_linfit(x, y, n, 0.95, &f) != CAL_OK) {
        out->fit_on = CAL_TURNS_FIT_NONE;
        cal_snprintf(out->fit_text, sizeof out->fit_text, "no TTFT line: fewer than 2 requests "
                     "with a TTFT and distinct lengths");
        return;
    }
    out->fit_points = (int)n;
    out->slope_raw = f.b * 1e3;   /* y in ms: ms per token, × 1000 tokens */
    if (f.has_ci) {
        out->slope_lo = f.b_lo * 1e3;
        out->slope_hi = f.b_hi * 1e3;
    }
    if (f.b > 0 && f.has_ci && f.b_lo > 0) {
        out->ttft_slope_ms_per_ktok = out->slope_raw;
        cal_snprintf(out->fit_text, sizeof out->fit_text, "TTFT grows %.1f ms per 1000 %s, 95 %% CI "
                     "%.1f–%.1f (least squares over %zu requests%s)", out->slope_raw, on,
                     out->slope_lo, out->slope_hi, n, out->ab ? ", side A" : "");
    } else if (f.has_ci) {
        cal_snprintf(out->fit_text, sizeof out->fit_text, "TTFT against %s: no per-token cost "
                     "shown (slope %.1f ms per 1000, 95 %% CI %.1f to %.1f, over %zu requests%s: "
                     "one that holds 0 or lies below it is not a cost)", on, out->slope_raw,
                     out->slope_lo, out->slope_hi, n, out->ab ? ", side A" : "");
    } else {
        cal_snprintf(out->fit_text, sizeof out->fit_text, "TTFT against %s: a line through 2 "
                     "requests has no CI (slope %.1f ms per 1000): no per-token cost shown", on,
                     out->slope_raw);
    }
}

int cal_turns_from_run(const cal_run_data *d, cal_turns *out)
{
    memset(out, 0, sizeof *out);
    out->speedup = out->lo = out->hi = out->formula = out->ttft_slope_ms_per_ktok = NAN;
    out->slope_raw = out->slope_lo = out->slope_hi = NAN;
    /* the scenario's own object (workload_traffic.h), opaque to the record */
    json_t *p = d && d->proto.scenario_json ? json_loads(d->proto.scenario_json, 0, NULL) : NULL;
    json_t *sc = p;
    json_t *plan = json_object_get(sc, "turn_plan");
    if (!json_is_array(plan) || json_array_size(plan) == 0) {
        json_decref(p);
        return CAL_ENOTFOUND;
    }
    cal_report_jstr(sc, "scenario", out->scenario, sizeof out->scenario);
    int nt = (int)json_array_size(plan);
    if (!strcmp(out->scenario, "chat"))
        cal_snprintf(out->describe, sizeof out->describe, "chat: %g users x %g turns, system+tools %g tok, "
                 "think %s ms", cal_report_jnum(sc, "users"), cal_report_jnum(sc, "turns"),
                 cal_report_jnum(sc, "system_tokens"),
                 json_string_value(json_object_get(sc, "think_ms")) ? json_string_value(json_object_get(sc, "think_ms")) : "?");
    else
        cal_snprintf(out->describe, sizeof out->describe, "replay of %s: %g session%s, %g recorded turns, "
                 "speed x%g", json_string_value(json_object_get(sc, "log")) ? json_string_value(json_object_get(sc, "log")) : "?",
                 cal_report_jnum(sc, "sessions"), cal_report_jnum(sc, "sessions") == 1 ? "" : "s",
                 cal_report_jnum(sc, "recorded_turns"), cal_report_jnum(sc, "speed"));
    out->rows = calloc((size_t)nt, sizeof *out->rows);
    /* per side, per turn: every ok request's numbers (pooled over shots),
     * and per (shot, turn) the mean whole turn for the A/B pairs */
    size_t cap = d->n_reqs + 1;
    double *ttft = malloc(cap * sizeof *ttft), *turn = malloc(cap * sizeof *turn),
           *dec = malloc(cap * sizeof *dec);
    /* the TTFT line's points (side A / only): each request's prompt, its new
     * tokens where the server reported its cache hit, and its TTFT in ms */
    double *fx = malloc(cap * sizeof *fx), *fxn = malloc(cap * sizeof *fxn),
           *fy = malloc(cap * sizeof *fy), *fyn = malloc(cap * sizeof *fyn);
    size_t nf = 0, nfn = 0;
    double sh_lo = NAN, sh_hi = NAN;
    int max_shot = 0;
    for (size_t i = 0; i < d->n_cells; i++)
        if (d->cells[i].shot_index > max_shot) max_shot = d->cells[i].shot_index;
    double *pair = calloc((size_t)(max_shot + 1) * (size_t)nt * 2, sizeof *pair);
    int rc = out->rows && ttft && turn && dec && pair && fx && fxn && fy && fyn ? CAL_OK : CAL_ENOMEM;
    if (rc) goto done;
    for (size_t i = 0; i < (size_t)(max_shot + 1) * (size_t)nt * 2; i++) pair[i] = NAN;
    for (size_t i = 0; i < d->n_cells; i++)
        if (!strcmp(d->cells[i].target, "B")) out->ab = 1;
    out->n_rows = nt;
    for (int k = 0; k < nt; k++) {
        cal_turn_row *r = &out->rows[k];
        r->turn = k + 1;
        json_t *tp = json_array_get(plan, (size_t)k);
        double sp = 0, ss = 0;
        size_t ns = 0, j;
        json_t *v;
        json_array_foreach(json_object_get(tp, "prompt_tokens"), j, v) {
            if (!json_is_integer(v)) continue;
            sp += (double)json_integer_value(v);
            ss += (double)json_integer_value(json_array_get(json_object_get(tp, "shared_tokens"), j));
            ns++;
        }
        r->prompt_tokens = ns ? sp / (double)ns : NAN;
        r->shared_tokens = ns ? ss / (double)ns : NAN;
        r->shared_share = sp > 0 ? ss / sp : NAN;
        if (isfinite(r->shared_share)) {
            if (!(r->shared_share >= sh_lo)) sh_lo = r->shared_share;
            if (!(r->shared_share <= sh_hi)) sh_hi = r->shared_share;
        }
        for (int side = 0; side < 1 + out->ab; side++) {
            size_t n = 0;
            double cached = 0, prompted = 0;
            r->cached_n[side] = 0;
            /* the turn index of a cell: its place among its side's cells of that shot */
            for (size_t ci = 0; ci < d->n_cells; ci++) {
                const cal_cell *c = &d->cells[ci];
                if (c->shot_kind == CAL_SHOT_WARMUP) continue;
                if (strcmp(c->target, out->ab ? (side ? "B" : "A") : c->target)) continue;
                int idx = 0;
                for (size_t q = 0; q < ci; q++)
                    idx += d->cells[q].shot_index == c->shot_index && !strcmp(d->cells[q].target, c->target);
                if (idx != k) continue;
                double tsum = 0;
                size_t tn = 0;
                for (int64_t q = 0; q < c->n_requests && c->req_first + (size_t)q < d->n_reqs; q++) {
                    const cal_req_result *rq = &d->reqs[c->req_first + (size_t)q];
                    /* the run's own TTFT and E2E (series.h), in s */
                    double t = cal_req_sample(rq, CAL_S_TTFT_MS), e = cal_req_sample(rq, CAL_S_E2E_MS);
                    if (!isfinite(t) || !isfinite(e)) continue;
                    double dm = cal_req_decode_ms(rq);
                    /* the prompt as the server counted it, else the plan's */
                    double pt = rq->prompt_tokens >= 0 ? rq->prompt_tokens : r->prompt_tokens;
                    int hit = rq->cached_tokens >= 0 && rq->cached_tokens <= pt;
                    if (hit) {
                        r->cached_n[side]++;
                        cached += rq->cached_tokens;
                        prompted += pt;
                    }
                    if (side == 0 && isfinite(pt)) {
                        fx[nf] = pt;
                        fy[nf++] = t;
                        if (hit) {
                            fxn[nfn] = pt - rq->cached_tokens;
                            fyn[nfn++] = t;
                        }
                    }
                    ttft[n] = t / 1e3;
                    turn[n] = e / 1e3;
                    dec[n] = isfinite(dm) ? dm / 1e3 : 0;   /* one chunk: no decode time */
                    tsum += turn[n];
                    tn++;
                    n++;
                }
                if (tn && c->shot_index <= max_shot)
                    pair[((size_t)c->shot_index * (size_t)nt + (size_t)k) * 2 + (size_t)side] = tsum / (double)tn;
            }
            r->n[side] = (int)n;
            r->cached_share[side] = prompted > 0 ? cached / prompted : NAN;
            r->turn_s[side] = mean_of(turn, n);
            r->decode_s[side] = mean_of(dec, n);
            r->ttft_s[side] = n ? cal_stats_median(ttft, n) : NAN;
        }
    }
    /* TTFT against the tokens the server computed (side A / only) */
    turns_fit(d, out, fx, fy, nf, fxn, fyn, nfn, sh_lo, sh_hi);
    if (out->ab) {
        /* whole-turn speedup A ÷ B: the log ratio of each (shot, turn) pair,
         * averaged within its shot; the shots are the units of the CI (the
         * turns of one shot share that shot's conditions, so they are not
         * independent draws), and it covers this run's noise only */
        size_t np = 0, ns = 0;
        double all = 0;
        for (int s = 0; s <= max_shot; s++) {
            double sum = 0;
            int c = 0;
            for (int k = 0; k < nt; k++) {
                const double *pa = &pair[((size_t)s * (size_t)nt + (size_t)k) * 2];
                if (!(isfinite(pa[0]) && isfinite(pa[1]) && pa[0] > 0 && pa[1] > 0)) continue;
                sum += log(pa[0] / pa[1]);
                c++;
            }
            if (!c) continue;
            all += sum;
            np += (size_t)c;
            ttft[ns++] = sum / c;
        }
        out->pairs = (int)np;
        out->shots = (int)ns;
        cal_ttest t;
        if (ns >= 2 && cal_stats_t_one(ttft, ns, 0.95, &t) == CAL_OK) {
            out->speedup = exp(t.mean);
            out->lo = exp(t.lo);
            out->hi = exp(t.hi);
        } else if (np >= 1) {
            out->speedup = exp(all / (double)np);
        }
        /* the notes' formula: B's TTFT and decode, s = A's decode ÷ B's */
        double ta = 0, tb = 0, da = 0, db = 0;
        int m = 0;
        for (int k = 0; k < nt; k++) {
            const cal_turn_row *r = &out->rows[k];
            if (!(isfinite(r->ttft_s[1]) && isfinite(r->decode_s[0]) && isfinite(r->decode_s[1]))) continue;
            ta += r->ttft_s[0];
            tb += r->ttft_s[1];
            da += r->decode_s[0];
            db += r->decode_s[1];
            m++;
        }
        double sp, share;
        const char *bad;
        if (m && db > 0 && da > 0 && cal_f_whole_turn(tb / m, db / m, da / db, &sp, &share, &bad) == CAL_OK)
            out->formula = sp;
        (void)ta;
    }
done:
    free(ttft);
    free(turn);
    free(dec);
    free(pair);
    free(fx);
    free(fxn);
    free(fy);
    free(fyn);
    json_decref(p);
    if (rc) cal_turns_free(out);
    return rc;
}

/* fprintf in the C locale (numbers print the same under any locale) */
static void outf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(FILE *f, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fputs(line, f);
}

static void num(char *b, size_t n, const char *fmt, double v)
{
    if (isfinite(v)) cal_snprintf(b, n, fmt, v);
    else cal_snprintf(b, n, "—");
}

int cal_report_turns_text(FILE *f, const cal_run_data *d)
{
    cal_turns t;
    if (cal_turns_from_run(d, &t) != CAL_OK) return 0;
    outf(f, "\nper turn (%s; shared = the prompt's tokens an earlier turn already sent):\n",
            t.describe);
    /* cached: the share of the prompt the server said its prefix cache
     * served ("—" where it said nothing) */
    if (!t.ab)
        outf(f, "%5s %10s %10s %7s %7s %10s %11s %11s %4s\n", "turn", "prompt", "shared", "shared",
                "cached", "TTFT", "decode", "whole turn", "n");
    else
        outf(f, "%5s %10s %10s %7s %8s %8s %9s %9s %10s %10s %7s\n", "turn", "prompt", "shared",
                "shared", "cached A", "cached B", "TTFT A", "TTFT B", "turn A", "turn B", "A ÷ B");
    if (!t.ab)
        outf(f, "%5s %10s %10s %7s %7s %10s %11s %11s %4s\n", "", "tok", "tok", "%", "%",
                "median s", "mean s", "mean s", "");
    else
        outf(f, "%5s %10s %10s %7s %8s %8s %9s %9s %10s %10s %7s\n", "", "tok", "tok", "%", "%", "%",
                "median s", "median s", "mean s", "mean s", "");
    for (int k = 0; k < t.n_rows; k++) {
        const cal_turn_row *r = &t.rows[k];
        char a[6][32];
        num(a[0], 32, "%.0f", r->prompt_tokens);
        num(a[1], 32, "%.0f", r->shared_tokens);
        num(a[2], 32, "%.1f", 100 * r->shared_share);
        char ca[2][32];
        num(ca[0], 32, "%.1f", 100 * r->cached_share[0]);
        num(ca[1], 32, "%.1f", 100 * r->cached_share[1]);
        if (!t.ab) {
            num(a[3], 32, "%.3f", r->ttft_s[0]);
            num(a[4], 32, "%.3f", r->decode_s[0]);
            num(a[5], 32, "%.3f", r->turn_s[0]);
            outf(f, "%5d %10s %10s %7s %7s %10s %11s %11s %4d\n", r->turn, a[0], a[1], a[2], ca[0],
                    a[3], a[4], a[5], r->n[0]);
        } else {
            char b[3][32];
            num(a[3], 32, "%.3f", r->ttft_s[0]);
            num(a[4], 32, "%.3f", r->ttft_s[1]);
            num(b[0], 32, "%.3f", r->turn_s[0]);
            num(b[1], 32, "%.3f", r->turn_s[1]);
            num(b[2], 32, "%.3f", r->turn_s[0] / r->turn_s[1]);
            outf(f, "%5d %10s %10s %7s %8s %8s %9s %9s %10s %10s %7s\n", r->turn, a[0], a[1], a[2],
                    ca[0], ca[1], a[3], a[4], b[0], b[1], b[2]);
        }
    }
    if (t.fit_text[0]) outf(f, "%s\n", t.fit_text);
    if (t.ab) {
        /* "no difference" is claimed only where the CI rules out one larger
         * than the equivalence bound (the 95 % CI: conservative for it) */
        char same[96] = "";
        if (t.lo <= 1 && 1 <= t.hi)
            cal_snprintf(same, sizeof same, t.lo > 1 / (1 + CAL_JUDGE_EQUIV) && t.hi < 1 + CAL_JUDGE_EQUIV
                         ? ": no difference larger than %.0f %%"
                         : ": cannot judge: the CI holds 1 but is wider than ±%.0f %%",
                         100 * CAL_JUDGE_EQUIV);
        if (isfinite(t.lo))
            outf(f, "whole-turn speedup A ÷ B: %.3f× [%.3f, %.3f] 95%% CI over %d shots (%d (shot, "
                       "turn) pairs; t on each shot's mean log ratio; this run's noise only%s)\n",
                    t.speedup, t.lo, t.hi, t.shots, t.pairs,
                    same);
        else if (isfinite(t.speedup))
            outf(f, "whole-turn speedup A ÷ B: %.3f× (%d (shot, turn) pair%s in %d shot: no CI; "
                       "3 or more shots give one)\n", t.speedup, t.pairs, t.pairs == 1 ? "" : "s", t.shots);
        if (isfinite(t.formula))
            outf(f, "the notes' formula from the decode speedup alone, (TTFT + decode × s) ÷ "
                       "(TTFT + decode) on B: %.3f×\n", t.formula);
    }
    int n = t.n_rows;
    cal_turns_free(&t);
    return n;
}

int cal_report_turns_svg(const cal_turns *t, cal_buf *out)
{
    double x[1024], y[2][1024];
    size_t n = 0;
    for (int k = 0; k < t->n_rows && n < 1024; k++, n++) {
        x[n] = t->rows[k].prompt_tokens;
        y[0][n] = t->rows[k].ttft_s[0];
        y[1][n] = t->rows[k].ttft_s[1];
    }
    svg_panel p;
    memset(&p, 0, sizeof p);
    p.x0 = 60;
    p.y0 = 30;
    p.w = 560;
    p.h = 220;
    p.x = (svg_axis){.label = "prompt (turn's whole prefix)", .unit = "tok", .min = NAN, .max = NAN, .zero = 1};
    p.y = (svg_axis){.label = "TTFT, median", .unit = "s", .min = NAN, .max = NAN, .zero = 1};
    p.x_tick_labels = 1;
    p.empty = "no turn measured";
    p.s[p.ns++] = (svg_series){.name = t->ab ? "A" : "TTFT", .x = x, .y = y[0], .n = n,
                               .style = SVG_LINE_POINTS, .color = 0};
    if (t->ab)
        p.s[p.ns++] = (svg_series){.name = "B", .x = x, .y = y[1], .n = n, .style = SVG_LINE_POINTS,
                                   .color = 1};
    int rc = svg_begin(out, 640, 290, "TTFT per turn against the prompt");
    if (!rc) rc = svg_panel_write(out, &p);
    if (!rc) rc = svg_end(out);
    return rc;
}

/* p5 / median / p95 / min / max of the requests' lengths into buf. */
static void dist_line(const cal_run_data *d, int output, char *buf, size_t n)
{
    double *x = malloc((d->n_reqs + 1) * sizeof *x);
    size_t k = 0;
    for (size_t i = 0; x && i < d->n_reqs; i++) {
        int v = output ? d->reqs[i].output_tokens : d->reqs[i].prompt_tokens;
        if (d->reqs[i].status == CAL_REQ_OK && v >= 0) x[k++] = v;
    }
    if (!k) cal_snprintf(buf, n, "not reported by the server");
    else {
        cal_stats_sort(x, k);
        cal_snprintf(buf, n, "min %.0f · p5 %.0f · median %.0f · p95 %.0f · max %.0f (%zu requests)", x[0],
                 cal_stats_percentile_sorted(x, k, 5), cal_stats_percentile_sorted(x, k, 50),
                 cal_stats_percentile_sorted(x, k, 95), x[k - 1], k);
    }
    free(x);
}

int cal_report_lengths_text(FILE *f, const cal_run_data *d)
{
    if (!d) return 0;
    const cal_protocol *p = &d->proto;
    const char *pl = p->prompt_len[0] ? p->prompt_len : NULL;
    const char *ol = p->output_len[0] ? p->output_len : NULL;
    const char *ds = p->dataset.present ? p->dataset.id : NULL;
    int printed = 0;
    if (pl || ol || ds) {
        char line[256];
        if (ds) outf(f, "dataset: %s (sha256 %s)\n", ds, p->dataset.sha256);
        dist_line(d, 0, line, sizeof line);
        outf(f, "prompt tokens, realised (server's count)%s%s: %s\n", pl ? ", asked " : "",
                pl ? pl : "", line);
        dist_line(d, 1, line, sizeof line);
        outf(f, "output tokens, realised%s%s: %s\n", ol ? ", asked " : "", ol ? ol : "", line);
        printed = 1;
    }
    return printed;
}

int cal_report_turns_html(const cal_turns *t, cal_buf *b)
{
    int rc = cal_buf_puts(b, "<figure id=\"chart-turns\" class=\"chart wide\">\n<h3>");
    if (!rc) rc = svg_esc(b, t->ab ? "TTFT per turn against the resent prefix, A and B"
                                   : "TTFT per turn against the resent prefix");
    if (!rc) rc = cal_buf_puts(b, "</h3>\n");
    if (!rc) rc = cal_report_turns_svg(t, b);
    if (!rc) rc = cal_buf_puts(b, "<table class=\"turns\"><thead><tr><th>turn</th><th>prompt tok</th>"
                                  "<th>shared tok</th><th>shared %</th><th>cached %</th>");
    if (!rc) rc = cal_buf_puts(b, t->ab ? "<th>TTFT A s</th><th>TTFT B s</th><th>turn A s</th>"
                                          "<th>turn B s</th><th>A ÷ B</th>"
                                        : "<th>TTFT s (median)</th><th>decode s</th><th>whole turn s</th><th>n</th>");
    if (!rc) rc = cal_buf_puts(b, "</tr></thead><tbody>\n");
    for (int k = 0; k < t->n_rows && !rc; k++) {
        const cal_turn_row *r = &t->rows[k];
        char a[9][32];
        num(a[0], 32, "%.0f", r->prompt_tokens);
        num(a[1], 32, "%.0f", r->shared_tokens);
        num(a[2], 32, "%.1f", 100 * r->shared_share);
        num(a[3], 32, "%.3f", r->ttft_s[0]);
        num(a[8], 32, "%.1f", 100 * r->cached_share[0]);
        if (t->ab) {
            num(a[4], 32, "%.3f", r->ttft_s[1]);
            num(a[5], 32, "%.3f", r->turn_s[0]);
            num(a[6], 32, "%.3f", r->turn_s[1]);
            num(a[7], 32, "%.3f", r->turn_s[0] / r->turn_s[1]);
            rc = cal_buf_printf(b, "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                                   "<td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", r->turn, a[0],
                                a[1], a[2], a[8], a[3], a[4], a[5], a[6], a[7]);
        } else {
            num(a[4], 32, "%.3f", r->decode_s[0]);
            num(a[5], 32, "%.3f", r->turn_s[0]);
            rc = cal_buf_printf(b, "<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                                   "<td>%s</td><td>%s</td><td>%d</td></tr>\n", r->turn, a[0], a[1], a[2],
                                a[8], a[3], a[4], a[5], r->n[0]);
        }
    }
    if (!rc) rc = cal_buf_puts(b, "</tbody></table>\n<figcaption><b>");
    char line[400];
    if (t->ab && isfinite(t->lo))
        cal_snprintf(line, sizeof line, "Whole-turn speedup A ÷ B %.3f× [%.3f, %.3f], 95 %% CI over %d shots "
                 "(%d (shot, turn) pairs; this run's noise only); the notes' formula from the "
                 "decode speedup alone gives %.3f×.",
                 t->speedup, t->lo, t->hi, t->shots, t->pairs, t->formula);
    else if (t->fit_text[0])
        cal_snprintf(line, sizeof line, "%s.", t->fit_text);
    else
        cal_snprintf(line, sizeof line, "Per turn.");
    if (!rc) rc = svg_esc(b, line);
    if (!rc) rc = cal_buf_puts(b, "</b> Protocol: ");
    if (!rc) rc = svg_esc(b, t->describe);
    if (!rc) rc = cal_buf_puts(b, "; shared = the prompt's tokens an earlier turn already sent "
                                  "(the previous prompt of the session); a server without a prefix cache "
                                  "(the built-in engine) prefills all of it.</figcaption>\n</figure>\n");
    return rc;
}
