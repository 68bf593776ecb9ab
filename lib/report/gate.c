/* caliper gate — bounds and the decision (include/caliper/gate.h): metric
 * names as users type them, the --fail specs, the documented defaults of a
 * CPU and a GPU box, and the judgement of every (cell, metric) with Holm's
 * step-down over the family. Loading is gate_input.c, outputs gate_write.c. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/stats.h"
#include "lib/util/c_locale.h"
#include "lib/util/json.h"

const char *cal_gate_box_name(cal_gate_box b) { return b == CAL_GATE_BOX_GPU ? "gpu" : "cpu"; }

int cal_gate_box_parse(const char *s, cal_gate_box *out)
{
    if (!s) return CAL_EINVAL;
    if (!strcmp(s, "cpu")) *out = CAL_GATE_BOX_CPU;
    else if (!strcmp(s, "gpu")) *out = CAL_GATE_BOX_GPU;
    else return CAL_EINVAL;
    return CAL_OK;
}

const char *cal_gate_design_name(cal_gate_design d) { return d == CAL_GATE_RUNS ? "runs" : "paired"; }

const char *cal_gate_verdict_name(cal_gate_verdict v)
{
    return v == CAL_GATE_FAIL ? "fail" : v == CAL_GATE_UNDECIDED ? "cannot_judge" : "pass";
}

/* The defaults (docs/ci.md, "Bounds"). A CPU box: the bounds bench/gate
 * measured the default protocol at on a shared 2-core machine. Decode tok/s
 * is not among them there: at thousands of tokens a second a token gap is
 * a fraction of a scheduler tick, so on a busy CPU the client's timestamps
 * measure its own scheduling (with it, 59 % of 80 A/A runs could not be
 * judged); the per-request speed holds the decode time and is steady. A GPU
 * box: a dedicated machine whose runs move by a few per cent (not
 * calibrated here: no GPU). */
size_t cal_gate_default_bounds(cal_gate_box box, cal_gate_bound *out, size_t cap)
{
    static const struct { cal_metric m; double cpu, gpu; } D[] = {
        {CAL_M_REQ_TOKS, 0.10, 0.03},
        {CAL_M_DECODE_TOKS, 0, 0.03},
        {CAL_M_TTFT_P50, 0.20, 0.05},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof D / sizeof D[0] && n < cap; i++) {
        double b = box == CAL_GATE_BOX_GPU ? D[i].gpu : D[i].cpu;
        if (!(b > 0)) continue;
        out[n].metric = D[i].m;
        out[n].bound = b;
        cal_gate_bound_spec(&out[n], out[n].spec, sizeof out[n].spec);
        n++;
    }
    return n;
}

char *cal_gate_bound_spec(const cal_gate_bound *b, char *buf, size_t n)
{
    const cal_field *f = cal_metric_get(b->metric);
    int low = f->better == CAL_BETTER_LOWER;
    cal_snprintf(buf, n, "%s%s%g%%", f->name, low ? ">+" : "<-", 100 * b->bound);
    return buf;
}

/* ---- metric names ----------------------------------------------------------- */

/* The alias of a per-request statistic: its series key without the unit,
 * then the statistic ("ttft_ms" + p99 -> "ttft_p99"); "" for none. */
static void alias_of(const cal_field *f, char *buf, size_t n)
{
    buf[0] = 0;
    if (f->series < 0 || f->column != CAL_COL_PER_REQUEST || f->stat == CAL_STAT_RATE) return;
    const char *k = cal_series_key((cal_series)f->series);
    size_t len = strlen(k);
    static const char *const UNITS[] = {"_ms", "_tok_s"};
    for (size_t u = 0; u < 2; u++) {
        size_t ul = strlen(UNITS[u]);
        if (len > ul && !strcmp(k + len - ul, UNITS[u])) { len -= ul; break; }
    }
    snprintf(buf, n, "%.*s_%s", (int)len, k, cal_stat_name(f->stat));
}

int cal_gate_metric_find(const char *name, char *err, size_t errn)
{
    if (!name || !*name) {
        cal_report_errf(err, errn, "a metric name is empty");
        return -1;
    }
    int m = cal_metric_find(name);
    if (m >= 0) return m;
    char a[64];
    for (int i = 0; i < CAL_M__N; i++) {
        alias_of(cal_metric_get((cal_metric)i), a, sizeof a);
        if (a[0] && !strcmp(a, name)) return i;
    }
    int found = -1, count = 0;
    char list[300] = "";
    size_t used = 0, len = strlen(name);
    for (int i = 0; i < CAL_M__N; i++) {
        const char *k = cal_metric_get((cal_metric)i)->name;
        if (strncmp(k, name, len)) continue;
        found = i;
        count++;
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", k);
    }
    if (count == 1) return found;
    if (count > 1)
        cal_report_errf(err, errn, "\"%s\" is more than one metric (%s): give the whole key", name, list);
    else
        cal_report_errf(err, errn, "\"%s\" is not a metric: give a key of the schema (docs/schema.md), "
                        "e.g. decode_tps_median, per_request_output_throughput_median, p99_ttft_ms, "
                        "or an alias such as ttft_p99", name);
    return -1;
}

/* ---- --fail specs ----------------------------------------------------------- */

int cal_gate_parse_bounds(const char *spec, cal_gate_bound *out, size_t cap, size_t *n,
                          char *err, size_t errn)
{
    *n = 0;
    if (!spec || !*spec) {
        cal_report_errf(err, errn, "\"\" is empty: give KEY<-X%% or KEY>+X%% items, comma-separated");
        return CAL_EINVAL;
    }
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[128];
        if (len >= sizeof item) {
            cal_report_errf(err, errn, "\"%.40s…\" is too long for one item", p);
            return CAL_EINVAL;
        }
        memcpy(item, p, len);
        item[len] = 0;
        p += len + (end ? 1 : 0);
        /* trim */
        char *s = item, *e = item + strlen(item);
        while (*s && isspace((unsigned char)*s)) s++;
        while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
        if (!*s) {
            cal_report_errf(err, errn, "\"%s\" has an empty item", spec);
            return CAL_EINVAL;
        }
        char *op = strpbrk(s, "<>");
        if (!op) {
            cal_report_errf(err, errn, "\"%s\" has no < or >: write KEY<-X%% (higher is better) "
                            "or KEY>+X%% (lower is better)", s);
            return CAL_EINVAL;
        }
        char name[96];
        size_t nl = (size_t)(op - s);
        while (nl && isspace((unsigned char)s[nl - 1])) nl--;
        if (nl >= sizeof name) nl = sizeof name - 1;
        memcpy(name, s, nl);
        name[nl] = 0;
        char merr[400];
        int m = cal_gate_metric_find(name, merr, sizeof merr);
        if (m < 0) {
            cal_report_errf(err, errn, "\"%s\": %s", s, merr);
            return CAL_EINVAL;
        }
        const cal_field *f = cal_metric_get((cal_metric)m);
        if (f->better == CAL_BETTER_NONE) {
            cal_report_errf(err, errn, "\"%s\": %s has no better direction (a count, the clock or "
                            "power): it cannot regress", s, f->name);
            return CAL_EINVAL;
        }
        const char *v = op + 1;
        while (isspace((unsigned char)*v)) v++;
        char *vend;
        double x = cal_strtod(v, &vend);
        if (vend == v) {
            cal_report_errf(err, errn, "\"%s\": no number after %c", s, *op);
            return CAL_EINVAL;
        }
        while (isspace((unsigned char)*vend)) vend++;
        if (*vend != '%' || vend[1]) {
            cal_report_errf(err, errn, "\"%s\": the bound is a percentage: write %s%c%s%g%%", s, name,
                            *op, *op == '<' ? "-" : "+", isfinite(x) ? fabs(x) : 5.0);
            return CAL_EINVAL;
        }
        if (!isfinite(x) || x == 0 || fabs(x) >= 100) {
            cal_report_errf(err, errn, "\"%s\": the bound must be a finite percentage between 0 and 100 "
                            "(exclusive)", s);
            return CAL_EINVAL;
        }
        int low = f->better == CAL_BETTER_LOWER;
        if (*op == '<' && low) {
            cal_report_errf(err, errn, "\"%s\": lower is better for %s, so a regression is an "
                            "increase: write %s>+%g%%", s, f->name, name, fabs(x));
            return CAL_EINVAL;
        }
        if (*op == '>' && !low) {
            cal_report_errf(err, errn, "\"%s\": higher is better for %s, so a regression is a "
                            "decrease: write %s<-%g%%", s, f->name, name, fabs(x));
            return CAL_EINVAL;
        }
        if ((*op == '<' && x > 0) || (*op == '>' && x < 0)) {
            cal_report_errf(err, errn, "\"%s\": a bound %s is %s: write %s%c%s%g%%", s,
                            *op == '<' ? "below" : "above", *op == '<' ? "negative" : "positive",
                            name, *op, *op == '<' ? "-" : "+", fabs(x));
            return CAL_EINVAL;
        }
        for (size_t i = 0; i < *n; i++)
            if (out[i].metric == (cal_metric)m) {
                cal_report_errf(err, errn, "\"%s\": %s is bounded twice", s, f->name);
                return CAL_EINVAL;
            }
        if (*n >= cap) {
            cal_report_errf(err, errn, "more than %zu bounds", cap);
            return CAL_EINVAL;
        }
        out[*n].metric = (cal_metric)m;
        out[*n].bound = fabs(x) / 100;
        snprintf(out[*n].spec, sizeof out[*n].spec, "%s", s);
        (*n)++;
    }
    return CAL_OK;
}

/* ---- judging ----------------------------------------------------------------- */

void cal_gate_input_free(cal_gate_input **pin)
{
    if (!pin || !*pin) return;
    cal_gate_input *in = *pin;
    for (size_t i = 0; i < in->n_cells; i++) {
        free(in->cells[i].a);
        free(in->cells[i].b);
    }
    free(in->cells);
    free(in);
    *pin = NULL;
}

void cal_gate_outcome_free(cal_gate_outcome **po)
{
    if (!po || !*po) return;
    free((*po)->cases);
    free(*po);
    *po = NULL;
}

static double median_of(double *x, size_t n) { return n ? cal_stats_median(x, n) : NAN; }

/* "12.3 % lower", "4.0 % higher" */
static void change_words(double rel, char *b, size_t n)
{
    cal_snprintf(b, n, "%.1f %% %s", 100 * fabs(rel), rel < 0 ? "lower" : "higher");
}

/* "90 % CI −3.0 to +0.8 %" (an unbounded side says so) */
static void ci_words(const cal_gate_case *c, double alpha, char *b, size_t n)
{
    int pct = (int)lround(100 * (1 - 2 * alpha));
    if (!isfinite(c->lo) || !isfinite(c->hi))
        cal_snprintf(b, n, "%d %% CI unbounded", pct);
    else
        cal_snprintf(b, n, "%d %% CI %+.1f to %+.1f %%", pct, 100 * c->lo, 100 * c->hi);
}

static void case_text(const cal_gate_input *in, cal_gate_case *c, double alpha, size_t family)
{
    const cal_field *f = cal_metric_get(c->bound.metric);
    char ch[48], ci[64], ev[96];
    change_words(c->effect, ch, sizeof ch);
    ci_words(c, alpha, ci, sizeof ci);
    if (in->design == CAL_GATE_PAIRED)
        cal_snprintf(ev, sizeof ev, "%zu paired shot%s", c->stat.n, c->stat.n == 1 ? "" : "s");
    else if (c->stat.df > 0)
        cal_snprintf(ev, sizeof ev, "separate runs, run-to-run sd %.1f %% over %.0f df",
                     100 * expm1(c->stat.se / M_SQRT2), c->stat.df);
    else
        cal_snprintf(ev, sizeof ev, "separate runs, run-to-run noise unknown");
    /* the fewest pairs whose smallest p (2^-n) can pass Holm's first step */
    size_t min_n = (size_t)ceil(log2((double)(family ? family : 1) / alpha));
    const char *worse = c->lower_better ? "+" : "−";
    double pct = 100 * c->bound.bound;
    switch (c->kind) {
    case CAL_GATE_REGRESSION:
        cal_snprintf(c->text, sizeof c->text,
                     "regression: %s (%s), worse than the %s%g %% bound; %s, Holm-adjusted p %.3g",
                     ch, ci, worse, pct, ev, c->p_worse_adj);
        break;
    case CAL_GATE_IMPROVEMENT:
        cal_snprintf(c->text, sizeof c->text,
                     "improvement: %s (%s), better than the %g %% bound; %s, Holm-adjusted p %.3g",
                     ch, ci, pct, ev, c->p_better_adj);
        break;
    case CAL_GATE_NO_CHANGE:
        cal_snprintf(c->text, sizeof c->text, "no change larger than %g %%: %+.1f %% (%s), %s%s",
                     pct, 100 * c->effect, ci, ev,
                     c->p_worse <= alpha || c->p_better <= alpha ? "; a change under the bound" : "");
        break;
    default: {
        char more[300] = "";
        if (!isfinite(c->effect))
            cal_snprintf(more, sizeof more, "%s",
                         in->design == CAL_GATE_PAIRED ? "no paired shot has this metric on both sides"
                                                       : "a side has no value of it");
        else if (in->design == CAL_GATE_RUNS && !(c->stat.df > 0))
            cal_snprintf(more, sizeof more, "%s", in->noise[0] ? in->noise
                         : "the run-to-run noise of separate runs is unknown: measure A and B paired, in one A/B run");
        else if (c->stat.n < min_n && in->design == CAL_GATE_PAIRED)
            cal_snprintf(more, sizeof more, "%zu paired shot%s cannot reach the %g %% level over %zu "
                         "test%s: measure at least %zu shot pairs (%zu shots after the warm-up)", c->stat.n,
                         c->stat.n == 1 ? "" : "s", 100 * alpha, family, family == 1 ? "" : "s", min_n,
                         min_n + 1);
        else if (c->need && in->design == CAL_GATE_PAIRED)
            cal_snprintf(more, sizeof more, "measure about %zu shot pairs (%zu shots after the warm-up), "
                         "or widen the bound", c->need, c->need + 1);
        else if (in->design == CAL_GATE_RUNS)
            cal_snprintf(more, sizeof more, "run-to-run noise too large for the bound: measure A and B paired, in one A/B run, "
                         "(paired), or widen the bound");
        else
            cal_snprintf(more, sizeof more, "the estimate sits on the bound: no number of shots "
                         "would tell");
        if (isfinite(c->effect))
            cal_snprintf(c->text, sizeof c->text, "cannot judge: %+.1f %% (%s) cannot rule out a "
                         "change of %g %%, nor show one; %s; %s", 100 * c->effect, ci, pct, ev, more);
        else
            cal_snprintf(c->text, sizeof c->text, "cannot judge: %s (%s)", more, f->label);
        break;
    }
    }
}

int cal_gate_eval(const cal_gate_input *in, const cal_gate_bound *bounds, size_t nb,
                  double alpha, cal_gate_outcome **out)
{
    if (!in || !bounds || !nb || !out) return CAL_EINVAL;
    if (!(alpha > 0)) alpha = CAL_GATE_ALPHA;
    if (!(alpha < 0.5)) return CAL_EINVAL;
    cal_gate_outcome *o = calloc(1, sizeof *o);
    size_t cap = in->n_cells * nb;
    if (!o) return CAL_ENOMEM;
    o->design = in->design;
    o->alpha = alpha;
    o->cases = calloc(cap ? cap : 1, sizeof *o->cases);
    double *scratch = malloc(cal_gate_scratch_len(CAL_GATE_MAX_SHOTS) * sizeof *scratch);
    double *va = malloc(CAL_GATE_MAX_SHOTS * sizeof *va), *vb = malloc(CAL_GATE_MAX_SHOTS * sizeof *vb);
    double *d = malloc(CAL_GATE_MAX_SHOTS * sizeof *d);
    double *pw = malloc((cap ? cap : 1) * sizeof *pw), *pb = malloc((cap ? cap : 1) * sizeof *pb);
    size_t *idx = malloc((cap ? cap : 1) * sizeof *idx);
    int e = CAL_OK;
    if (!o->cases || !scratch || !va || !vb || !d || !pw || !pb || !idx) { e = CAL_ENOMEM; goto done; }

    for (size_t ci = 0; ci < in->n_cells; ci++) {
        const cal_gate_cell *cell = &in->cells[ci];
        for (size_t k = 0; k < nb; k++) {
            cal_gate_case *c = &o->cases[o->n_cases++];
            cal_metric m = bounds[k].metric;
            const cal_field *f = cal_metric_get(m);
            c->cell = ci;
            c->bound = bounds[k];
            c->lower_better = f->better == CAL_BETTER_LOWER;
            c->base = c->cand = c->effect = c->lo = c->hi = NAN;
            cal_snprintf(c->label, sizeof c->label, "%s%s%s · %s", f->label,
                         strstr(f->label, f->unit) ? "" : " ", strstr(f->label, f->unit) ? "" : f->unit,
                         cell->name);
            if (in->design == CAL_GATE_PAIRED) {
                size_t n = 0;
                for (size_t i = 0; i < cell->n_pairs; i++) {
                    double a = cell->a[i][m], b = cell->b[i][m];
                    if (!(isfinite(a) && isfinite(b) && a > 0 && b > 0)) continue;
                    va[n] = a;
                    vb[n] = b;
                    d[n++] = log(b) - log(a);   /* neither over- nor underflows */
                }
                e = cal_gate_signed_rank(d, n, alpha, scratch, cal_gate_scratch_len(CAL_GATE_MAX_SHOTS),
                                         &c->stat);
                if (e) goto done;
                c->base = median_of(va, n);
                c->cand = median_of(vb, n);
            } else {
                double la = cell->level_a[m], lb = cell->level_b[m];
                c->base = la;
                c->cand = lb;
                int have = isfinite(la) && isfinite(lb) && la > 0 && lb > 0;
                if (have && cell->noise_df[m] > 0 && cell->noise_sd[m] > 0) {
                    e = cal_gate_t(log(lb) - log(la), M_SQRT2 * cell->noise_sd[m], cell->noise_df[m], alpha,
                                   &c->stat);
                    if (e) goto done;
                } else {
                    memset(&c->stat, 0, sizeof c->stat);
                    c->stat.method = CAL_GATE_T;
                    c->stat.alpha = alpha;
                    c->stat.est = have ? log(lb) - log(la) : NAN;
                    c->stat.lo = -INFINITY;
                    c->stat.hi = INFINITY;
                    c->stat.p_up = c->stat.p_down = 1;
                    c->stat.se = c->stat.df = c->stat.spread = NAN;
                }
            }
            c->p_worse = c->lower_better ? c->stat.p_up : c->stat.p_down;
            c->p_better = c->lower_better ? c->stat.p_down : c->stat.p_up;
            c->effect = expm1(c->stat.est);
            c->lo = expm1(c->stat.lo);
            c->hi = expm1(c->stat.hi);
        }
    }
    /* the family: every case's one-sided p, each direction adjusted apart */
    for (size_t i = 0; i < o->n_cases; i++) {
        pw[i] = o->cases[i].p_worse;
        pb[i] = o->cases[i].p_better;
    }
    cal_gate_holm(pw, o->n_cases, pw, idx);
    cal_gate_holm(pb, o->n_cases, pb, idx);
    for (size_t i = 0; i < o->n_cases; i++) {
        cal_gate_case *c = &o->cases[i];
        c->p_worse_adj = pw[i];
        c->p_better_adj = pb[i];
        c->kind = cal_gate_decide(&c->stat, c->lower_better, c->bound.bound, c->p_worse_adj,
                                  c->p_better_adj, alpha);
        if (c->kind == CAL_GATE_CANNOT && in->design == CAL_GATE_PAIRED)
            c->need = cal_gate_pairs_needed(&c->stat, c->bound.bound);
        case_text(in, c, alpha, o->n_cases);
        switch (c->kind) {
        case CAL_GATE_REGRESSION: o->n_regression++; break;
        case CAL_GATE_IMPROVEMENT: o->n_improvement++; break;
        case CAL_GATE_NO_CHANGE: o->n_no_change++; break;
        default: o->n_cannot++; break;
        }
    }
    o->verdict = o->n_regression ? CAL_GATE_FAIL : o->n_cannot ? CAL_GATE_UNDECIDED : CAL_GATE_PASS;
    char names[200] = "";
    size_t used = 0;
    for (size_t i = 0; i < o->n_cases && used < sizeof names; i++) {
        const cal_gate_case *c = &o->cases[i];
        int want = o->verdict == CAL_GATE_FAIL ? c->kind == CAL_GATE_REGRESSION
                 : o->verdict == CAL_GATE_UNDECIDED ? c->kind == CAL_GATE_CANNOT : 0;
        if (want)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                                     cal_metric_get(c->bound.metric)->label);
    }
    if (o->verdict == CAL_GATE_FAIL)
        snprintf(o->summary, sizeof o->summary, "fail: %zu regression%s (%s) of %zu test%s",
                 o->n_regression, o->n_regression == 1 ? "" : "s", names, o->n_cases,
                 o->n_cases == 1 ? "" : "s");
    else if (o->verdict == CAL_GATE_UNDECIDED)
        snprintf(o->summary, sizeof o->summary, "cannot judge: no regression, but %zu of %zu test%s "
                 "could not be judged (%s)", o->n_cannot, o->n_cases, o->n_cases == 1 ? "" : "s", names);
    else
        snprintf(o->summary, sizeof o->summary, "pass: no regression larger than its bound in %zu "
                 "test%s (%zu no change, %zu improvement%s)", o->n_cases, o->n_cases == 1 ? "" : "s",
                 o->n_no_change, o->n_improvement, o->n_improvement == 1 ? "" : "s");
done:
    free(scratch); free(va); free(vb); free(d); free(pw); free(pb); free(idx);
    if (e) { cal_gate_outcome_free(&o); return e; }
    *out = o;
    return CAL_OK;
}
