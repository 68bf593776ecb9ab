/* caliper — the HTML report: one self-contained page (inline CSS and SVG, no
 * script, no URL) with the verdicts first, then per run: shots with clock and
 * power on one time axis, the concurrency curve with both columns, TTFT and
 * ITL distributions, prefill time against prompt length with its fitted line,
 * each captioned with the protocol it was measured under. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/error.h"
#include "caliper/fpgroup.h"
#include "caliper/judge.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "gate_internal.h"
#include "report_internal.h"
#include "svg.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) { rc = e_; goto out; } } while (0)
#define TRYR(x) do { int e_ = (x); if (e_) return e_; } while (0)

static const char CSS[] =
    "*{box-sizing:border-box}"
    "body{margin:0;background:#f6f7f9;color:#1f2328;"
    "font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}"
    "main{max-width:1180px;margin:0 auto;padding:28px 32px 56px}"
    "h1{font-size:26px;margin:0 0 2px;letter-spacing:-.01em}"
    "h2{font-size:19px;margin:28px 0 10px}"
    "h3{font-size:15px;margin:10px 0 4px}"
    ".sub{color:#57606a;margin:0 0 18px}"
    ".verdicts{background:#fff;border:1px solid #d0d7de;border-left:4px solid #2563eb;"
    "border-radius:6px;padding:10px 20px 12px;margin:0 0 8px}"
    ".verdicts h2{margin:4px 0 6px;font-size:17px}"
    ".verdicts ul{margin:0 0 6px;padding-left:20px}.verdicts li{margin:2px 0}"
    "dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:1px 16px;font-size:13.5px;"
    "margin:0 0 14px;background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px 16px}"
    "dl.meta dt{color:#57606a}dl.meta dd{margin:0;overflow-wrap:anywhere}"
    ".grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:18px}"
    "figure{margin:0;background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 14px 10px}"
    "figure.wide{grid-column:1/-1}"
    "figure h3{margin:0 0 4px}"
    "figure svg{width:100%;height:auto;display:block}"
    "figcaption{font-size:12.5px;line-height:1.45;color:#444;margin-top:6px}"
    "figcaption b{color:#1f2328}"
    ".tablewrap{overflow-x:auto;background:#fff;border:1px solid #d0d7de;border-radius:6px;margin-top:18px}"
    "table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums;width:100%}"
    "th,td{padding:5px 8px;border-bottom:1px solid #eaecef;text-align:right;white-space:nowrap}"
    "th{background:#f3f4f6;font-weight:600;white-space:normal;vertical-align:bottom}"
    "td.p,th.p{text-align:left}"
    "caption{text-align:left;padding:8px 8px 6px;font-size:12.5px;color:#444}caption b{font-size:13.5px;color:#1f2328}"
    "footer{margin-top:32px;color:#57606a;font-size:12.5px}"
    ".stale{color:#b91c1c;font-weight:600}td.wrap{white-space:normal;min-width:120px}"
    "ul.marks{font-size:13px;margin:10px 0 0;padding-left:20px}";

int cal_report_html_esc(cal_buf *b, const char *s)
{
    return svg_esc(b, s);
}

/* "rest 0 s · warm-up 1 · concurrency 1 · …", every field except those in skip. */
void cal_report_describe_except(const cal_fingerprint *fp, unsigned skip, char *buf, size_t n)
{
    static const cal_fp_field F[] = {
        CAL_FPF_SHOT_KIND, CAL_FPF_SHOT_RANGE, CAL_FPF_REST, CAL_FPF_WARMUP,
        CAL_FPF_CONCURRENCY, CAL_FPF_RATE, CAL_FPF_PROMPT, CAL_FPF_CONTENT,
        CAL_FPF_OUTPUT, CAL_FPF_STREAMING, CAL_FPF_API, CAL_FPF_PROBE, CAL_FPF_HOST,
    };
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof F / sizeof F[0] && used < n; i++) {
        if (skip & (1u << F[i])) continue;
        char v[CAL_FP_STR];
        cal_fp_field_value(fp, F[i], v, sizeof v);
        int w = snprintf(buf + used, n - used, "%s%s %s", used ? " · " : "",
                         cal_fp_field_name(F[i]), v);
        if (w < 0) break;
        used += (size_t)w;
    }
}

#define SKIP(f) (1u << (f))

/* ---- charts ------------------------------------------------------------------ */

static int kind_color(cal_shot_kind k)
{
    switch (k) {
    case CAL_SHOT_COLD: return 1;
    case CAL_SHOT_WARM: return 0;
    case CAL_SHOT_RESTED: return 2;
    case CAL_SHOT_WARMUP: return 3;
    default: return 4;
    }
}

static const cal_rcell *first_cell(const cal_result *r, cal_sweep sw)
{
    for (size_t i = 0; i < r->n_cells; i++) if (r->cells[i].sweep == sw) return &r->cells[i];
    return NULL;
}

static int chart_shots(cal_buf *b, const cal_result *r, int idx)
{
    int rc = CAL_OK;
    size_t n = r->n_shots;
    int timed = n > 0;
    for (size_t i = 0; i < n; i++) if (!isfinite(r->shots[i].t_s)) timed = 0;
    /* per kind: segments over each shot's duration, and a marker at its middle */
    double *sx = calloc(3 * n + 1, sizeof *sx), *sy = calloc(3 * n + 1, sizeof *sy);
    double *mx = calloc(n + 1, sizeof *mx), *my = calloc(n + 1, sizeof *my);
    double *cx = calloc(n + 1, sizeof *cx), *cy = calloc(n + 1, sizeof *cy);
    double *px = calloc(n + 1, sizeof *px), *py = calloc(n + 1, sizeof *py);
    double *tx = NULL, *tc = NULL, *tp = NULL;
    if (!sx || !sy || !mx || !my || !cx || !cy || !px || !py) { rc = CAL_ENOMEM; goto out; }
    char id[48];
    snprintf(id, sizeof id, "chart-shots-%d", idx);
    TRY(svg_fig_begin(b, id, 1, "Per-shot throughput, clock and power on one time axis"));
    const double W = 1100, H1 = 230, H2 = 130, H3 = 160;
    TRY(svg_begin(b, W, H1 + H2 + H3, "per-shot throughput with clock and power"));
    svg_panel p1 = {0}, p2 = {0}, p3 = {0};
    p1.x0 = p2.x0 = p3.x0 = 0;
    p1.w = p2.w = p3.w = W;
    p1.y0 = 0; p1.h = H1;
    p2.y0 = H1; p2.h = H2;
    p3.y0 = H1 + H2; p3.h = H3;
    p1.x.label = p2.x.label = p3.x.label = timed ? "time since run start" : "shot";
    p1.x.unit = p2.x.unit = p3.x.unit = timed ? "s" : "";
    p1.x.min = p2.x.min = p3.x.min = NAN;
    p1.x.max = p2.x.max = p3.x.max = NAN;
    p1.y.min = p1.y.max = p2.y.min = p2.y.max = p3.y.min = p3.y.max = NAN;
    const char *what = "tok/s";
    for (size_t i = 0; i < n; i++) if (isfinite(cal_report_shot_value(&r->shots[i], &what))) break;
    p1.y.label = what; p1.y.unit = ""; p1.y.zero = 1;
    p2.y.label = "clock"; p2.y.unit = "MHz";
    p3.y.label = "power"; p3.y.unit = "W"; p3.y.zero = 1;
    p3.x_tick_labels = 1;
    p1.empty = "no shots recorded in this run";
    p2.empty = "clock: absent — no clock sensor was read during this run";
    p3.empty = "power: absent — no power sensor was read during this run";
    /* x range common to the three panels */
    double xmin = INFINITY, xmax = -INFINITY;
    size_t k = 0, m = 0;
    static const cal_shot_kind KINDS[] = {CAL_SHOT_COLD, CAL_SHOT_WARM, CAL_SHOT_RESTED,
                                          CAL_SHOT_WARMUP, CAL_SHOT_CONSECUTIVE, CAL_SHOT_UNKNOWN};
    /* legend names: the kinds' own (fingerprint.h), warm-ups marked excluded */
    char knames[sizeof KINDS / sizeof KINDS[0]][64];
    for (size_t kk = 0; kk < sizeof KINDS / sizeof KINDS[0]; kk++)
        snprintf(knames[kk], sizeof knames[kk], "%s%s", cal_shot_kind_name(KINDS[kk]),
                 KINDS[kk] == CAL_SHOT_WARMUP ? " (excluded)" : "");
    for (size_t kk = 0; kk < sizeof KINDS / sizeof KINDS[0]; kk++) {
        size_t k0 = k, m0 = m;
        for (size_t i = 0; i < n; i++) {
            const cal_shot *s = &r->shots[i];
            if (s->kind != KINDS[kk]) continue;
            double v = cal_report_shot_value(s, NULL);
            double x0 = timed ? s->t_s : (double)s->index;
            double x1 = timed && isfinite(s->dur_s) ? s->t_s + s->dur_s : x0;
            if (x0 < xmin) xmin = x0;
            if (x1 > xmax) xmax = x1;
            if (timed && x1 > x0) {
                sx[k] = x0; sy[k++] = v;
                sx[k] = x1; sy[k++] = v;
                sx[k] = NAN; sy[k++] = NAN;
            }
            mx[m] = (x0 + x1) / 2; my[m++] = v;
        }
        if (m == m0) continue;
        if (k > k0 && p1.ns < SVG_MAX_SERIES)
            p1.s[p1.ns++] = (svg_series){NULL, sx + k0, sy + k0, k - k0, SVG_LINE, kind_color(KINDS[kk]), 0};
        if (p1.ns < SVG_MAX_SERIES)
            p1.s[p1.ns++] = (svg_series){knames[kk], mx + m0, my + m0, m - m0, SVG_POINTS, kind_color(KINDS[kk]), 0};
    }
    /* the shot verdict's 95 % CI of the warm shots' level (caliper/judge.h,
     * one value per shot), drawn over the warm shots beside shot 1 */
    static double jv_v[CAL_JUDGE_MAX_SHOTS], bx[2], blo[2], bhi[2], blv[2];
    cal_judge_shot js[CAL_JUDGE_MAX_SHOTS];
    size_t nj = 0;
    double wx0 = NAN, wx1 = NAN;
    for (size_t i = 0; i < n && nj < CAL_JUDGE_MAX_SHOTS; i++) {
        const cal_shot *s = &r->shots[i];
        double v = cal_report_shot_value(s, NULL);
        if (s->kind == CAL_SHOT_WARMUP || !(isfinite(v) && v > 0)) continue;
        double x0 = timed ? s->t_s : (double)s->index;
        double x1 = timed && isfinite(s->dur_s) ? s->t_s + s->dur_s : x0;
        if (nj == 1) wx0 = x0;
        if (nj >= 1) wx1 = x1;
        jv_v[nj] = v;
        js[nj] = (cal_judge_shot){s->index, &jv_v[nj], 1};
        nj++;
    }
    cal_judge_verdict jv;
    cal_judge_opts jo = {.min_requests = 1};
    if (nj >= 3 && cal_judge_shots(js, nj, &jo, &jv) && isfinite(jv.lo) && p1.ns + 3 <= SVG_MAX_SERIES) {
        bx[0] = wx0; bx[1] = wx1 > wx0 ? wx1 : wx0 + 0.5;
        blo[0] = blo[1] = jv.first * (1 + jv.lo);
        bhi[0] = bhi[1] = jv.first * (1 + jv.hi);
        blv[0] = blv[1] = jv.later;
        p1.s[p1.ns++] = (svg_series){"warm level", bx, blv, 2, SVG_LINE, 1, 0};
        p1.s[p1.ns++] = (svg_series){"its 95 % CI", bx, blo, 2, SVG_LINE, 1, 1};
        p1.s[p1.ns++] = (svg_series){NULL, bx, bhi, 2, SVG_LINE, 1, 1};
    }
    /* clock and power: the sampler's timeline when times line up, and the
     * mean over each shot */
    size_t nc = 0, np = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_shot *s = &r->shots[i];
        double x = timed ? s->t_s + (isfinite(s->dur_s) ? s->dur_s / 2 : 0) : (double)s->index;
        if (isfinite(s->v[CAL_M_CLOCK_MHZ])) { cx[nc] = x; cy[nc++] = s->v[CAL_M_CLOCK_MHZ]; }
        if (isfinite(s->v[CAL_M_POWER_W])) { px[np] = x; py[np++] = s->v[CAL_M_POWER_W]; }
    }
    if (timed && r->n_tel) {   /* clock and power sampled apart: each its own line */
        tx = malloc(2 * r->n_tel * sizeof *tx);
        tc = malloc(r->n_tel * sizeof *tc);
        tp = malloc(r->n_tel * sizeof *tp);
        if (!tx || !tc || !tp) { rc = CAL_ENOMEM; goto out; }
        double *tcx = tx, *tpx = tx + r->n_tel;
        size_t ntc = 0, ntp = 0;
        for (size_t i = 0; i < r->n_tel; i++) {
            const cal_tel_point *q = &r->tel[i];
            if (!isfinite(q->t_s)) continue;
            if (isfinite(q->clock_mhz)) { tcx[ntc] = q->t_s; tc[ntc++] = q->clock_mhz; }
            if (isfinite(q->power_w)) { tpx[ntp] = q->t_s; tp[ntp++] = q->power_w; }
            if (isfinite(q->clock_mhz) || isfinite(q->power_w)) {
                if (q->t_s < xmin) xmin = q->t_s;
                if (q->t_s > xmax) xmax = q->t_s;
            }
        }
        if (ntc) p2.s[p2.ns++] = (svg_series){"sampled", tcx, tc, ntc, SVG_LINE, 5, 0};
        if (ntp) p3.s[p3.ns++] = (svg_series){"sampled", tpx, tp, ntp, SVG_LINE, 3, 0};
    }
    if (nc) p2.s[p2.ns++] = (svg_series){"mean over shot", cx, cy, nc, SVG_POINTS, 4, 0};
    if (np) p3.s[p3.ns++] = (svg_series){"mean over shot", px, py, np, SVG_POINTS, 4, 0};
    if (isfinite(xmin) && isfinite(xmax)) {
        double pad = xmax > xmin ? (xmax - xmin) * 0.03 : 1;
        p1.x.min = p2.x.min = p3.x.min = timed ? fmax(0, xmin - pad) : xmin - 0.5;
        p1.x.max = p2.x.max = p3.x.max = xmax + (timed ? pad : 0.5);
    }
    TRY(svg_panel_write(b, &p1));
    TRY(svg_panel_write(b, &p2));
    TRY(svg_panel_write(b, &p3));
    TRY(svg_end(b));
    char proto[600], cap[260];
    const cal_rcell *c = first_cell(r, CAL_SWEEP_SHOTS);
    const cal_fingerprint *sfp = r->shots_fp.concurrency > 0 || r->shots_fp.prompt_tokens > 0 ? &r->shots_fp :
                                 c ? &c->fp : NULL;
    if (sfp && n) {
        char kinds[160] = "";
        size_t used = 0;
        for (size_t kk = 0; kk < sizeof KINDS / sizeof KINDS[0] && used < sizeof kinds; kk++) {
            int lo = 0, hi = 0;
            for (size_t i = 0; i < n; i++)
                if (r->shots[i].kind == KINDS[kk]) { if (!lo) lo = r->shots[i].index; hi = r->shots[i].index; }
            if (!lo) continue;
            if (hi > lo) used += (size_t)snprintf(kinds + used, sizeof kinds - used, "%s%s %d–%d", used ? ", " : "", knames[kk], lo, hi);
            else used += (size_t)snprintf(kinds + used, sizeof kinds - used, "%s%s %d", used ? ", " : "", knames[kk], lo);
        }
        size_t l = (size_t)snprintf(proto, sizeof proto, "shots %s · ", kinds);
        cal_report_describe_except(sfp, SKIP(CAL_FPF_SHOT_KIND) | SKIP(CAL_FPF_SHOT_RANGE), proto + l, sizeof proto - l);
    } else snprintf(proto, sizeof proto, "no shot series in this run");
    snprintf(cap, sizeof cap, "Each shot's %s over its duration (cold red, warm blue, rested green), "
             "the warm level with its 95 %% CI (dashed); clock and power below share the time axis.", what);
    TRY(svg_fig_end(b, cap, proto));
out:
    free(sx); free(sy); free(mx); free(my); free(cx); free(cy); free(px); free(py);
    free(tx); free(tc); free(tp);
    return rc;
}

static int chart_concurrency(cal_buf *b, const cal_result *r, int idx)
{
    int rc = CAL_OK;
    const cal_rcell *cells[64];
    size_t n = cal_report_pick_concurrency(r, cells, 64);
    double x[64], agg[64], req[64];
    for (size_t i = 0; i < n; i++) {
        x[i] = cells[i]->fp.concurrency;
        agg[i] = cells[i]->v[CAL_M_AGG_TOKS];
        req[i] = cells[i]->v[CAL_M_REQ_TOKS];
    }
    char id[48];
    snprintf(id, sizeof id, "chart-concurrency-%d", idx);
    TRY(svg_fig_begin(b, id, 0, "Concurrency curve: both columns"));
    TRY(svg_begin(b, 540, 330, "throughput against concurrency, aggregate and per-request"));
    svg_panel p = {0};
    p.w = 540; p.h = 330;
    p.x = (svg_axis){"concurrent requests", "", NAN, NAN, 1, 0, x, n};
    p.y = (svg_axis){"output", "tok/s", NAN, NAN, 0, 1, NULL, 0};
    if (n < 2 || x[n - 1] / x[0] < 4) p.x.log2 = 0;
    p.x_tick_labels = 1;
    p.empty = "absent: this run has no concurrency sweep";
    if (n < 2) n = 0;   /* one point is not a curve */
    p.s[p.ns++] = (svg_series){"aggregate (all tokens ÷ wall clock)", x, agg, n, SVG_LINE_POINTS, 0, 0};
    p.s[p.ns++] = (svg_series){"per-request (median)", x, req, n, SVG_LINE_POINTS, 1, 1};
    TRY(svg_panel_write(b, &p));
    TRY(svg_end(b));
    char proto[600], list[200] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? ", " : "", cells[i]->fp.concurrency);
    if (n) {
        cal_report_describe_except(&cells[0]->fp, SKIP(CAL_FPF_CONCURRENCY), proto, sizeof proto);
        size_t l = strlen(proto);
        snprintf(proto + l, sizeof proto - l, " · concurrency %s", list);
    } else snprintf(proto, sizeof proto, "no concurrency cells");

    TRY(svg_fig_end(b, "At low concurrency read the per-request column; at high concurrency the aggregate one.", proto));
out:
    return rc;
}

/* Empirical CDF of a series, thinned to at most 240 points. */
static size_t cdf(const double *v, size_t n, double *x, double *y)
{
    if (!n) return 0;
    double *t = malloc(n * sizeof *t);
    if (!t) return 0;
    memcpy(t, v, n * sizeof *t);
    cal_stats_sort(t, n);
    size_t m = n < 240 ? n : 240;
    for (size_t i = 0; i < m; i++) {
        size_t k = m == n ? i : (size_t)((double)i * (n - 1) / (m - 1));
        x[i] = t[k];
        y[i] = (double)(k + 1) / (double)n;
    }
    free(t);
    return m;
}

static void cell_name(const cal_rcell *c, char *buf, size_t n)
{
    const cal_fingerprint *fp = &c->fp;
    if (fp->concurrency > 0 && c->sweep != CAL_SWEEP_SHOTS && c->sweep != CAL_SWEEP_PROMPT)
        snprintf(buf, n, "c%d", fp->concurrency);
    else if (c->sweep == CAL_SWEEP_PROMPT && fp->prompt_tokens > 0) snprintf(buf, n, "%ld tok", fp->prompt_tokens);
    else if (fp->shot_first > 0 && fp->shot_last > fp->shot_first)
        snprintf(buf, n, "%s %d–%d", cal_shot_kind_name(fp->shot_kind), fp->shot_first, fp->shot_last);
    else if (fp->shot_first > 0) snprintf(buf, n, "%s %d", cal_shot_kind_name(fp->shot_kind), fp->shot_first);
    else if (fp->concurrency > 0) snprintf(buf, n, "c%d", fp->concurrency);
    else snprintf(buf, n, "cell");
}

static int chart_dist(cal_buf *b, const cal_result *r, int idx, cal_series s,
                      cal_metric p50, cal_metric p95, cal_metric p99,
                      const char *id_base, const char *title, const char *qty)
{
    int rc = CAL_OK;
    /* which cells: the concurrency curve's if they have the data, else any */
    const cal_rcell *cells[6], *pick[64];
    size_t n = 0, np = cal_report_pick_concurrency(r, pick, 64);
    for (size_t i = 0; i < np && n < 6; i++)
        if (pick[i]->ns[s] || isfinite(pick[i]->v[p50])) cells[n++] = pick[i];
    if (n == 0)
        for (size_t k = 0; k < r->n_cells && n < 6; k++)
            if (r->cells[k].ns[s] || isfinite(r->cells[k].v[p50])) cells[n++] = &r->cells[k];
    static char names[6][48];
    double *xs = calloc(6 * 240, sizeof *xs), *ys = calloc(6 * 240, sizeof *ys);
    if (!xs || !ys) { rc = CAL_ENOMEM; goto out; }
    char id[48];
    snprintf(id, sizeof id, "%s-%d", id_base, idx);
    TRY(svg_fig_begin(b, id, 0, title));
    TRY(svg_begin(b, 540, 330, title));
    static const double YT[] = {0, 0.25, 0.5, 0.75, 1};
    svg_panel p = {0};
    p.w = 540; p.h = 330;
    p.x = (svg_axis){qty, "ms", NAN, NAN, 0, 1, NULL, 0};
    p.y = (svg_axis){"fraction of samples ≤ x", "", 0, 1, 0, 0, YT, 5};
    p.x_tick_labels = 1;
    p.empty = "absent: no samples or percentiles recorded";
    int approx = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_rcell *c = cells[i];
        double *x = xs + i * 240, *y = ys + i * 240;
        size_t m;
        if (c->ns[s] >= 2) m = cdf(c->s[s], c->ns[s], x, y);
        else {   /* only percentiles: the CDF through them */
            m = 0;
            const cal_metric ms[3] = {p50, p95, p99};
            const double q[3] = {0.5, 0.95, 0.99};
            for (int k = 0; k < 3; k++)
                if ((int)ms[k] >= 0 && isfinite(c->v[ms[k]])) { x[m] = c->v[ms[k]]; y[m++] = q[k]; }
            approx = 1;
        }
        cell_name(c, names[i], sizeof names[i]);
        p.s[p.ns++] = (svg_series){names[i], x, y, m, c->ns[s] >= 2 ? SVG_STEP : SVG_LINE_POINTS, (int)i, 0};
    }
    TRY(svg_panel_write(b, &p));
    TRY(svg_end(b));
    char proto[600], cap[240];
    if (n) cal_report_describe_except(&cells[0]->fp, n > 1 ? SKIP(CAL_FPF_CONCURRENCY) : 0, proto, sizeof proto);
    else snprintf(proto, sizeof proto, "no cells with %s", qty);
    snprintf(cap, sizeof cap, "Cumulative distribution of %s per cell%s.", qty,
             approx ? " (lines through p50/p95/p99 where only percentiles were recorded)" : "");
    TRY(svg_fig_end(b, cap, proto));
out:
    free(xs); free(ys);
    return rc;
}

static int chart_prefill(cal_buf *b, const cal_result *r, int idx)
{
    int rc = CAL_OK;
    double x[64], y[64], fx[2], fy[2];
    const cal_rcell *cells[64];
    size_t n = cal_report_pick_prompt(r, cells, 64);
    const cal_rcell *first = n ? cells[0] : NULL;
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)cells[i]->fp.prompt_tokens;
        y[i] = cal_report_prefill_ms(cells[i]);
    }
    if (n < 2) n = 0;
    double a = NAN, bb = NAN, r2 = NAN;
    size_t np = 0;
    int fitted = cal_report_prefill_fit(r, &a, &bb, &r2, &np) == CAL_OK;
    char fitname[96] = "fit";
    if (fitted) {
        double lo = 0, hi = x[0];
        for (size_t i = 0; i < n; i++) if (x[i] > hi) hi = x[i];
        fx[0] = lo; fy[0] = a + bb * lo;
        fx[1] = hi; fy[1] = a + bb * hi;
        cal_snprintf(fitname, sizeof fitname, "fit: %.1f ms + %.3f ms/tok (R² %.3f)", a, bb, r2);
    }
    char id[48];
    snprintf(id, sizeof id, "chart-prefill-%d", idx);
    TRY(svg_fig_begin(b, id, 0, "Prefill time against prompt length"));
    TRY(svg_begin(b, 540, 330, "prefill time against prompt length with the fitted line"));
    svg_panel p = {0};
    p.w = 540; p.h = 330;
    p.x = (svg_axis){"prompt length", "tokens", NAN, NAN, 0, 1, NULL, 0};
    p.y = (svg_axis){"prefill time (TTFT p50)", "ms", NAN, NAN, 0, 1, NULL, 0};
    p.x_tick_labels = 1;
    p.empty = "absent: this run has no prompt-length sweep";
    if (fitted) p.s[p.ns++] = (svg_series){fitname, fx, fy, 2, SVG_LINE, 1, 1};
    p.s[p.ns++] = (svg_series){"measured", x, y, n, SVG_POINTS, 0, 0};
    TRY(svg_panel_write(b, &p));
    TRY(svg_end(b));
    char proto[600];
    if (first) cal_report_describe_except(&first->fp, SKIP(CAL_FPF_PROMPT), proto, sizeof proto);
    else snprintf(proto, sizeof proto, "no prompt-length sweep");
    TRY(svg_fig_end(b, "t(n) = a + b·n by least squares: a is the fixed cost, b the cost per prompt token. "
                   "TTFT also holds queueing and the first decode step, so it bounds prefill from above.", proto));
out:
    return rc;
}

/* ---- tables ------------------------------------------------------------------ */

static const cal_metric TCOLS[] = {
    CAL_M_AGG_TOKS, CAL_M_REQ_TOKS, CAL_M_PREFILL_TOKS, CAL_M_DECODE_TOKS,
    CAL_M_TTFT_P50, CAL_M_TTFT_P95, CAL_M_TTFT_P99, CAL_M_ITL_P50, CAL_M_ITL_P99,
    CAL_M_TPOT_P50, CAL_M_E2E_P50, CAL_M_E2E_P99, CAL_M_CLOCK_MHZ, CAL_M_POWER_W,
};
#define N_TCOLS (sizeof TCOLS / sizeof TCOLS[0])

/* A number at its field's decimals (the schema's, as every table). */
static int num_td(cal_buf *b, double v, const cal_field *f)
{
    if (!isfinite(v)) return cal_buf_puts(b, "<td>—</td>");
    return cal_buf_printf(b, "<td>%.*f</td>", f->decimals, v);
}

/* Which fingerprint fields differ between the cells of one table. */
unsigned cal_report_varying(const cal_result *r, cal_sweep sw)
{
    unsigned mask = 0;
    const cal_rcell *first = NULL;
    for (size_t k = 0; k < r->n_cells; k++) {
        const cal_rcell *c = &r->cells[k];
        if (c->sweep != sw) continue;
        if (!first) { first = c; continue; }
        cal_fp_difference d[CAL_FPF__N];
        size_t nd = cal_fp_diff(&first->fp, &c->fp, d, CAL_FPF__N);
        for (size_t i = 0; i < nd && i < CAL_FPF__N; i++) mask |= 1u << d[i].field;
    }
    return mask;
}

/* A row's name: only what varies in its table ("warm 2–3 · c4 · 128 tok"). */
void cal_report_row_name(const cal_fingerprint *fp, unsigned vary, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    if (vary & (SKIP(CAL_FPF_SHOT_KIND) | SKIP(CAL_FPF_SHOT_RANGE))) {
        char range[32];
        cal_fp_field_value(fp, CAL_FPF_SHOT_RANGE, range, sizeof range);
        used += (size_t)snprintf(buf + used, n - used, "%s %s", cal_shot_kind_name(fp->shot_kind), range);
    }
    for (int f = CAL_FPF_REST; f < CAL_FPF__N && used < n; f++) {
        if (!(vary & (1u << f))) continue;
        char v[CAL_FP_STR];
        cal_fp_field_value(fp, (cal_fp_field)f, v, sizeof v);
        const char *sep = used ? " · " : "";
        if (f == CAL_FPF_CONCURRENCY) used += (size_t)snprintf(buf + used, n - used, "%sc%s", sep, v);
        else if (f == CAL_FPF_PROMPT) used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, v);
        else used += (size_t)snprintf(buf + used, n - used, "%s%s %s", sep, cal_fp_field_name((cal_fp_field)f), v);
    }
    if (!buf[0]) snprintf(buf, n, "all");
}

static int tables(cal_buf *b, const cal_result *r)
{
    static const char *const TITLES[] = {"Shots", "Concurrency sweep", "Prompt-length sweep", "Other cells"};
    for (int sw = 0; sw <= CAL_SWEEP_OTHER; sw++) {
        int show[N_TCOLS] = {0}, any = 0;
        const cal_rcell *first = NULL;
        for (size_t k = 0; k < r->n_cells; k++) {
            if (r->cells[k].sweep != (cal_sweep)sw) continue;
            any = 1;
            if (!first) first = &r->cells[k];
            for (size_t m = 0; m < N_TCOLS; m++) if (isfinite(r->cells[k].v[TCOLS[m]])) show[m] = 1;
        }
        if (!any) continue;
        unsigned vary = cal_report_varying(r, (cal_sweep)sw);
        char common[700];
        cal_report_describe_except(&first->fp, vary, common, sizeof common);
        TRYR(cal_buf_printf(b, "<div class=\"tablewrap\"><table><caption><b>%s</b> — every row: ", TITLES[sw]));
        TRYR(svg_esc(b, common));
        TRYR(cal_buf_puts(b, "</caption>\n<tr><th class=\"p\">cell</th>"));
        for (size_t m = 0; m < N_TCOLS; m++) {
            if (!show[m]) continue;
            const cal_field *mi = cal_metric_get(TCOLS[m]);
            TRYR(cal_buf_puts(b, "<th>"));
            TRYR(svg_esc(b, mi->label));
            if (!strstr(mi->label, mi->unit)) TRYR(cal_buf_printf(b, " %s", mi->unit));
            TRYR(cal_buf_puts(b, "</th>"));
        }
        TRYR(cal_buf_puts(b, "<th>ok / failed</th></tr>\n"));
        for (size_t k = 0; k < r->n_cells; k++) {
            const cal_rcell *c = &r->cells[k];
            if (c->sweep != (cal_sweep)sw) continue;
            char d[400];
            cal_report_row_name(&c->fp, vary, d, sizeof d);
            TRYR(cal_buf_puts(b, "<tr><td class=\"p\">"));
            TRYR(svg_esc(b, d));
            TRYR(cal_buf_puts(b, "</td>"));
            for (size_t m = 0; m < N_TCOLS; m++) if (show[m]) TRYR(num_td(b, c->v[TCOLS[m]], cal_metric_get(TCOLS[m])));
            if (isfinite(c->v[CAL_M_COMPLETED]))
                TRYR(cal_buf_printf(b, "<td>%.0f / %.0f</td></tr>\n", c->v[CAL_M_COMPLETED],
                                    isfinite(c->v[CAL_M_FAILED]) ? c->v[CAL_M_FAILED] : 0));
            else TRYR(cal_buf_puts(b, "<td>—</td></tr>\n"));
        }
        TRYR(cal_buf_puts(b, "</table></div>\n"));
    }
    return CAL_OK;
}

static int meta_row(cal_buf *b, const char *k, const char *v)
{
    if (!v || !v[0]) return CAL_OK;
    TRYR(cal_buf_printf(b, "<dt>%s</dt><dd>", k));
    TRYR(svg_esc(b, v));
    return cal_buf_puts(b, "</dd>");
}

int cal_report_write_html(const cal_result *const *res, size_t n, cal_buf *out)
{
    return cal_report_write_html_ex(res, n, NULL, out);
}

int cal_report_write_html_ex(const cal_result *const *res, size_t n, const char *extra,
                             cal_buf *out)
{
    return cal_report_html_marked(res, n, extra, NULL, out);
}

int cal_report_html_marked(const cal_result *const *res, size_t n, const char *extra,
                           const cal_fpmarks *marks, cal_buf *out)
{
    int rc = CAL_OK;
    TRY(cal_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>caliper report · "));
    for (size_t i = 0; i < n; i++) { if (i) TRY(cal_buf_puts(out, ", ")); TRY(svg_esc(out, res[i]->label)); }
    TRY(cal_buf_printf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n<h1>caliper report</h1>\n<p class=\"sub\">", CSS));
    for (size_t i = 0; i < n; i++) { if (i) TRY(cal_buf_puts(out, " · ")); TRY(svg_esc(out, res[i]->label)); }
    TRY(cal_buf_puts(out, " — every number below is captioned with the protocol it was measured under.</p>\n"));

    if (n) TRY(cal_buf_puts(out, "<section class=\"verdicts\" id=\"verdicts\">\n<h2>Verdicts</h2>\n"));
    for (size_t i = 0; i < n; i++) {
        cal_verdict v[CAL_RES_MAX_VERDICTS + 4];
        size_t nv = cal_report_verdicts(res[i], v, CAL_RES_MAX_VERDICTS + 4);
        if (n > 1) { TRY(cal_buf_puts(out, "<h3>")); TRY(svg_esc(out, res[i]->label)); TRY(cal_buf_puts(out, "</h3>\n")); }
        TRY(cal_buf_puts(out, "<ul>\n"));
        if (!nv) TRY(cal_buf_puts(out, "<li>no verdicts: nothing to judge in this run</li>\n"));
        for (size_t k = 0; k < nv; k++) {
            char line[700];
            TRY(cal_buf_printf(out, "<li data-kind=\"%s\"%s>", cal_verdict_kind_name(v[k].kind),
                               v[k].judged ? "" : " data-judged=\"false\""));
            TRY(svg_esc(out, cal_verdict_line(&v[k], line, sizeof line)));
            TRY(cal_buf_puts(out, "</li>\n"));
        }
        TRY(cal_buf_puts(out, "</ul>\n"));
    }
    if (n) TRY(cal_buf_puts(out, "</section>\n"));

    /* many results: grouped by protocol, ranked within a group only */
    if (n >= 2) {
        cal_fpgroups g;
        TRY(cal_fpgroups_make(res, n, marks, &g));
        rc = cal_fpgroups_html(res, n, &g, out);
        cal_fpgroups_free(&g);
        if (rc) goto out;
    }

    for (size_t i = 0; i < n; i++) {
        const cal_result *r = res[i];
        TRY(cal_buf_printf(out, "<section class=\"run\" id=\"run-%zu\">\n<h2>", i));
        TRY(svg_esc(out, r->label));
        TRY(cal_buf_puts(out, "</h2>\n<dl class=\"meta\">"));
        char tgt[3 * CAL_RES_STR + 8], when[64] = "";
        snprintf(tgt, sizeof tgt, "%s%s%s%s%s", r->target_name, r->target_version[0] ? " " : "",
                 r->target_version, r->target_url[0] ? " · " : "", r->target_url);
        if (r->created_unix > 0) {
            time_t t = (time_t)r->created_unix;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
        }
        TRY(meta_row(out, "run", r->id));
        TRY(meta_row(out, "target", tgt));
        TRY(meta_row(out, "host", r->host));
        TRY(meta_row(out, "probe", r->probe));
        TRY(meta_row(out, "build", r->build));
        TRY(meta_row(out, "telemetry", r->telemetry[0] ? r->telemetry : "none recorded"));
        TRY(meta_row(out, "measured", when));
        TRY(cal_buf_puts(out, "</dl>\n<div class=\"grid\">\n"));
        TRY(chart_shots(out, r, (int)i));
        TRY(chart_concurrency(out, r, (int)i));
        TRY(chart_prefill(out, r, (int)i));
        TRY(cal_report_goodput_html(out, r, (int)i));
        TRY(chart_dist(out, r, (int)i, CAL_S_TTFT_MS, CAL_M_TTFT_P50, CAL_M_TTFT_P95, CAL_M_TTFT_P99,
                       "chart-ttft", "Time to first token: distribution", "TTFT"));
        TRY(chart_dist(out, r, (int)i, CAL_S_ITL_MS, CAL_M_ITL_P50, (cal_metric)-1, CAL_M_ITL_P99,
                       "chart-itl", "Inter-token latency: distribution", "ITL"));
        if (r->turns) TRY(cal_report_turns_html(r->turns, out));
        TRY(cal_buf_puts(out, "</div>\n"));
        TRY(tables(out, r));
        TRY(cal_buf_puts(out, "</section>\n"));
    }
    /* sections drawn elsewhere from other inputs (caliper ops) */
    if (extra) TRY(cal_buf_puts(out, extra));
    TRY(cal_buf_puts(out, "<footer>Written by caliper. Self-contained: no scripts, no external resources. "
                          "Ratios between runs: <code>caliper compare</code>, which refuses them where protocols differ.</footer>\n"
                          "</main>\n</body>\n</html>\n"));
out:
    return rc;
}
