/* caliper trend (include/caliper/trend.h): one shot series across its
 * stored runs, the run-to-run noise its consecutive levels show, the gate's
 * decision between neighbours, a text sparkline and an HTML page. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/stats.h"
#include "caliper/trend.h"
#include "gate_internal.h"
#include "svg.h"
#include "lib/util/c_locale.h"
#include "lib/util/json.h"

/* "caliper 0.1.0 (commit abc1234, linux, -O2)" -> "abc1234" */
static void commit_of(const char *build, char *buf, size_t n)
{
    buf[0] = 0;
    const char *p = build ? strstr(build, "commit ") : NULL;
    if (!p) return;
    p += 7;
    size_t len = strcspn(p, ",) ");
    snprintf(buf, n, "%.*s", (int)len, p);
}

void cal_trend_free(cal_trend *t)
{
    if (!t) return;
    free(t->pts);
    t->pts = NULL;
    t->n = 0;
}

int cal_trend_load(cal_store *st, const char *series, size_t max_runs, cal_trend *t,
                   char *err, size_t errn)
{
    memset(t, 0, sizeof *t);
    if (!st || !series || !*series) return CAL_EINVAL;
    snprintf(t->series, sizeof t->series, "%s", series);
    if (!max_runs || max_runs > CAL_TREND_MAX_RUNS) max_runs = CAL_TREND_MAX_RUNS;
    cal_store_noise_row *rows = calloc(max_runs, sizeof *rows);
    t->pts = calloc(max_runs, sizeof *t->pts);
    if (!rows || !t->pts) { free(rows); cal_trend_free(t); return CAL_ENOMEM; }
    size_t nr = 0;
    int e = cal_store_noise(st, series, 0, rows, max_runs, &nr);
    if (e) {
        cal_report_errf(err, errn, "cannot read the series' runs: %s", cal_store_errmsg(st));
        free(rows);
        cal_trend_free(t);
        return e;
    }
    if (!nr) {
        cal_report_errf(err, errn, "no stored run of this series");
        free(rows);
        cal_trend_free(t);
        return CAL_ENOTFOUND;
    }
    /* newest first from the store: read backwards, keep the newest's cell */
    int have_ref = 0;
    for (size_t k = 0; k < nr && !e; k++) {
        size_t r = k;   /* newest first; reversed below */
        cal_run_data *d = NULL;
        if (cal_store_load_run(st, rows[r].run_id, CAL_LOAD_CHUNKS, &d)) continue;
        cal_result *res = NULL;
        char why[256];
        if (cal_result_from_run_data(d, &res, why, sizeof why)) { cal_run_data_free(&d); continue; }
        size_t q[8];
        size_t nq = cal_gate_quoted_cells(res, q, 8);
        if (nq == 1) {
            const cal_rcell *c = &res->cells[q[0]];
            if (!have_ref) {
                t->fp = c->fp;
                cal_gate_cell_name(&c->fp, t->cell, sizeof t->cell);
                have_ref = 1;
            }
            if (cal_fp_diff(&t->fp, &c->fp, NULL, 0) == 0) {
                cal_trend_point *p = &t->pts[t->n++];
                p->run_id = d->run.id;
                snprintf(p->label, sizeof p->label, "%s", d->run.label ? d->run.label : "");
                commit_of(d->run.build, p->commit, sizeof p->commit);
                p->created_unix = res->created_unix;
                memcpy(p->v, c->v, sizeof p->v);
            }
        }
        cal_result_free(&res);
        cal_run_data_free(&d);
    }
    free(rows);
    if (!t->n) {
        cal_report_errf(err, errn, "no stored run of this series could be read");
        cal_trend_free(t);
        return CAL_ENOTFOUND;
    }
    for (size_t i = 0; i < t->n / 2; i++) {   /* oldest first */
        cal_trend_point tmp = t->pts[i];
        t->pts[i] = t->pts[t->n - 1 - i];
        t->pts[t->n - 1 - i] = tmp;
    }
    return CAL_OK;
}

int cal_trend_noise_of(const double *x, size_t n, double *sd, double *df)
{
    *sd = NAN;
    *df = 0;
    double *dd = malloc((n ? n : 1) * sizeof *dd);
    if (!dd) return 0;
    size_t k = 0;
    double prev = NAN;
    for (size_t i = 0; i < n; i++) {
        if (!(isfinite(x[i]) && x[i] > 0)) continue;
        double l = log(x[i]);
        if (isfinite(prev)) dd[k++] = fabs(l - prev);
        prev = l;
    }
    int ok = 0;
    if (k >= 2) {
        /* no change between neighbours: Δ ~ N(0, 2σ²); a median of |Δ| about
         * 0, so one real step is one large |Δ| */
        double med = cal_stats_median(dd, k);
        *sd = 1.4826 * med / M_SQRT2;
        *df = fmax(1, floor(0.37 * (double)k));
        ok = *sd > 0;
        if (!ok) { *sd = NAN; *df = 0; }
    }
    free(dd);
    return ok;
}

int cal_trend_noise(const cal_trend *t, cal_metric m, double *sd, double *df)
{
    double *x = malloc((t->n ? t->n : 1) * sizeof *x);
    if (!x) { *sd = NAN; *df = 0; return 0; }
    for (size_t i = 0; i < t->n; i++) x[i] = t->pts[i].v[m];
    int ok = cal_trend_noise_of(x, t->n, sd, df);
    free(x);
    return ok;
}

int cal_trend_steps(const cal_trend *t, cal_metric m, double bound, double alpha,
                    cal_trend_step *out)
{
    const cal_field *f = cal_metric_get(m);
    if (f->better == CAL_BETTER_NONE || !(bound > 0 && bound < 1)) return CAL_EINVAL;
    if (!(alpha > 0 && alpha < 0.5)) alpha = CAL_GATE_ALPHA;
    int low = f->better == CAL_BETTER_LOWER;
    double sd, df;
    int noise = cal_trend_noise(t, m, &sd, &df);
    size_t n = t->n;
    double *pw = calloc(n ? n : 1, sizeof *pw), *pb = calloc(n ? n : 1, sizeof *pb);
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    if (!pw || !pb || !idx) { free(pw); free(pb); free(idx); return CAL_ENOMEM; }
    for (size_t i = 0; i < n; i++) {
        cal_trend_step *s = &out[i];
        memset(s, 0, sizeof *s);
        s->stat.est = s->effect = NAN;
        s->stat.lo = -INFINITY;
        s->stat.hi = INFINITY;
        s->stat.p_up = s->stat.p_down = 1;
        s->stat.method = CAL_GATE_T;
        double a = i ? t->pts[i - 1].v[m] : NAN, b = t->pts[i].v[m];
        if (i && isfinite(a) && isfinite(b) && a > 0 && b > 0) {
            s->effect = b / a - 1;
            s->stat.est = log(b / a);
            if (noise) cal_gate_t(log(b / a), M_SQRT2 * sd, df, alpha, &s->stat);
        }
        pw[i] = i ? (low ? s->stat.p_up : s->stat.p_down) : NAN;
        pb[i] = i ? (low ? s->stat.p_down : s->stat.p_up) : NAN;
    }
    /* the family is the n − 1 steps */
    if (n > 1) {
        cal_gate_holm(pw + 1, n - 1, pw + 1, idx);
        cal_gate_holm(pb + 1, n - 1, pb + 1, idx);
    }
    for (size_t i = 1; i < n; i++) {
        cal_trend_step *s = &out[i];
        s->p_worse_adj = pw[i];
        s->p_better_adj = pb[i];
        s->kind = cal_gate_decide(&s->stat, low, bound, pw[i], pb[i], alpha);
    }
    free(pw); free(pb); free(idx);
    return CAL_OK;
}

char *cal_trend_sparkline(const cal_trend *t, cal_metric m, char *buf, size_t n)
{
    static const char *const BARS[8] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < t->n; i++) {
        double v = t->pts[i].v[m];
        if (!isfinite(v)) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    size_t used = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < t->n; i++) {
        double v = t->pts[i].v[m];
        const char *c = "·";
        if (isfinite(v)) {
            int k = hi > lo ? (int)floor((v - lo) / (hi - lo) * 7.999) : 3;
            c = BARS[k < 0 ? 0 : k > 7 ? 7 : k];
        }
        size_t l = strlen(c);
        if (used + l + 1 > n) break;
        memcpy(buf + used, c, l + 1);
        used += l;
    }
    return buf;
}

/* ---- the HTML page ------------------------------------------------------------ */

#define TRYR(x) do { int e_ = (x); if (e_) return e_; } while (0)

static const char PAGE_CSS[] =
    "body{margin:0;background:#f6f7f9;color:#1f2328;font:15px/1.5 system-ui,-apple-system,"
    "'Segoe UI',Roboto,sans-serif}main{max-width:1180px;margin:0 auto;padding:28px 32px 56px}"
    "h1{font-size:24px;margin:0 0 4px}.sub{color:#57606a;margin:0 0 16px}"
    "figure{margin:0;background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 14px 10px}"
    "figure svg{width:100%;height:auto;display:block}figcaption{font-size:12.5px;color:#444;margin-top:6px}"
    ".tablewrap{overflow-x:auto;background:#fff;border:1px solid #d0d7de;border-radius:6px;margin-top:18px}"
    "table{border-collapse:collapse;font-size:12.5px;width:100%;font-variant-numeric:tabular-nums}"
    "th,td{padding:5px 8px;border-bottom:1px solid #eaecef;text-align:left}"
    "td.regression{color:#b91c1c;font-weight:600}td.improvement{color:#047857;font-weight:600}"
    "td.cannot_judge{color:#6b7280}h3{font-size:15px;margin:0 0 4px}figure{margin-top:18px}";

static void point_name(const cal_trend_point *p, char *buf, size_t n)
{
    if (p->label[0]) snprintf(buf, n, "%s", p->label);
    else if (p->commit[0]) snprintf(buf, n, "%s", p->commit);
    else snprintf(buf, n, "run %lld", (long long)p->run_id);
}

static int metric_section(const cal_trend *t, cal_metric m, double bound, double alpha,
                          const cal_trend_step *steps, size_t idx, cal_buf *out)
{
    const cal_field *f = cal_metric_get(m);
    char proto[700], id[48], title[200];
    cal_fp_describe(&t->fp, proto, sizeof proto);
    size_t n = t->n;
    double *x = calloc(n ? n : 1, sizeof *x), *y = calloc(n ? n : 1, sizeof *y);
    double *rx = calloc(n ? n : 1, sizeof *rx), *ry = calloc(n ? n : 1, sizeof *ry);
    double *ix = calloc(n ? n : 1, sizeof *ix), *iy = calloc(n ? n : 1, sizeof *iy);
    double *tk = calloc(n ? n : 1, sizeof *tk);
    int rc = CAL_OK;
    if (!x || !y || !rx || !ry || !ix || !iy || !tk) { rc = CAL_ENOMEM; goto out; }
    size_t nr = 0, ni = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = tk[i] = (double)(i + 1);
        y[i] = t->pts[i].v[m];
        if (i && steps[i].kind == CAL_GATE_REGRESSION) { rx[nr] = x[i]; ry[nr++] = y[i]; }
        if (i && steps[i].kind == CAL_GATE_IMPROVEMENT) { ix[ni] = x[i]; iy[ni++] = y[i]; }
    }
    svg_panel p = {0};
    p.w = 1100;
    p.h = 300;
    p.x = (svg_axis){.label = "run of the series, oldest first", .unit = "", .min = NAN, .max = NAN,
                     .ticks = n <= 40 ? tk : NULL, .n_ticks = n <= 40 ? n : 0};
    p.y = (svg_axis){.label = f->label, .unit = strstr(f->label, f->unit) ? "" : f->unit,
                     .min = NAN, .max = NAN, .zero = 1};
    p.s[p.ns++] = (svg_series){.name = f->label, .x = x, .y = y, .n = n, .style = SVG_LINE_POINTS, .color = 0};
    p.s[p.ns++] = (svg_series){.name = "regression from the run before", .x = rx, .y = ry, .n = nr,
                               .style = SVG_POINTS, .color = 1};
    p.s[p.ns++] = (svg_series){.name = "improvement", .x = ix, .y = iy, .n = ni, .style = SVG_POINTS,
                               .color = 2};
    p.x_tick_labels = 1;
    p.empty = "no run of the series has this metric";
    snprintf(id, sizeof id, "chart-trend-%zu", idx);
    cal_snprintf(title, sizeof title, "%s across the series' runs (bound %s%g %%)", f->label,
                 f->better == CAL_BETTER_LOWER ? "+" : "−", 100 * bound);
    if ((rc = svg_fig_begin(out, id, 1, title))) goto out;
    if ((rc = svg_begin(out, p.w, p.h, title))) goto out;
    if ((rc = svg_panel_write(out, &p))) goto out;
    if ((rc = svg_end(out))) goto out;
    if ((rc = svg_fig_end(out, "Each point is one run's level (its warm shots pooled); a red point is a "
                               "regression from the run before it.", proto))) goto out;
    if ((rc = cal_buf_printf(out, "<div class=\"tablewrap\"><table id=\"steps-%zu\">\n<tr><th>#</th><th>run</th>"
                                  "<th>label or commit</th><th>measured</th><th>", idx))) goto out;
    if ((rc = svg_esc(out, f->label))) goto out;
    if ((rc = cal_buf_puts(out, "</th><th>from the run before</th><th>decision</th></tr>\n"))) goto out;
    for (size_t i = 0; i < n && !rc; i++) {
        const cal_trend_point *pt = &t->pts[i];
        char name[CAL_RES_STR], when[32] = "", val[32] = "—", eff[96] = "";
        point_name(pt, name, sizeof name);
        if (pt->created_unix > 0) {
            time_t tt = (time_t)pt->created_unix;
            struct tm tm;
            gmtime_r(&tt, &tm);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        }
        if (isfinite(pt->v[m])) cal_snprintf(val, sizeof val, "%.*f", f->decimals, pt->v[m]);
        const char *kind = i ? cal_gate_kind_name(steps[i].kind) : "";
        const char *words = !i ? "" : steps[i].kind == CAL_GATE_REGRESSION ? "regression"
                          : steps[i].kind == CAL_GATE_IMPROVEMENT ? "improvement"
                          : steps[i].kind == CAL_GATE_NO_CHANGE ? "no change larger than the bound"
                          : "cannot judge";
        if (i && isfinite(steps[i].effect)) {
            if (isfinite(steps[i].stat.lo))
                cal_snprintf(eff, sizeof eff, "%+.1f %% (%d %% CI %+.1f to %+.1f %%)", 100 * steps[i].effect,
                             (int)lround(100 * (1 - 2 * alpha)), 100 * expm1(steps[i].stat.lo),
                             100 * expm1(steps[i].stat.hi));
            else cal_snprintf(eff, sizeof eff, "%+.1f %%", 100 * steps[i].effect);
        }
        rc = cal_buf_printf(out, "<tr><td>%zu</td><td>%lld</td><td>", i + 1, (long long)pt->run_id);
        if (!rc) rc = svg_esc(out, name);
        if (!rc) rc = cal_buf_printf(out, "</td><td>%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n",
                                     when, val, eff, kind, words);
    }
    if (!rc) rc = cal_buf_puts(out, "</table></div>\n");
out:
    free(x); free(y); free(rx); free(ry); free(ix); free(iy); free(tk);
    return rc;
}

int cal_trend_write_html(const cal_trend *t, const cal_metric *m, const double *bound, size_t nm,
                         double alpha, const cal_trend_step *const *steps, cal_buf *out)
{
    TRYR(cal_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                           "<title>caliper trend · "));
    TRYR(svg_esc(out, t->cell));
    TRYR(cal_buf_printf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n<h1>Trend of one shot "
                             "series</h1>\n<p class=\"sub\">", PAGE_CSS));
    TRYR(cal_buf_printf(out, "%zu runs, oldest first · cell ", t->n));
    TRYR(svg_esc(out, t->cell));
    TRYR(cal_buf_printf(out, " · each step judged as <code>caliper gate</code> judges two separate runs, "
                             "%g %% family-wise over a metric's steps (Holm)</p>\n", 100 * alpha));
    for (size_t k = 0; k < nm; k++) TRYR(metric_section(t, m[k], bound[k], alpha, steps[k], k, out));
    return cal_buf_puts(out, "<p class=\"sub\">Run-to-run noise: read from consecutive runs' levels "
                             "(1.4826 × median |Δ| ÷ √2), so a real step counts once. Written by caliper; "
                             "no scripts, nothing external.</p>\n</main>\n</body>\n</html>\n");
}
