/* caliper — goodput against offered load (docs/load.md): a result's open-loop
 * cells with a goodput, in rate order, as a Markdown/terminal table and an
 * SVG chart, with the saturation knee marked by the sweep's own rule
 * (saturation.h), so the report and the run agree on where it lies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/saturation.h"
#include "lib/util/c_locale.h"
#include "report_internal.h"
#include "svg.h"

#define TRY(x) do { int e_ = (x); if (e_) { rc = e_; goto out; } } while (0)

static int by_rate(const void *x, const void *y)
{
    const cal_rcell *a = *(const cal_rcell *const *)x, *b = *(const cal_rcell *const *)y;
    if (a->fp.request_rate != b->fp.request_rate) return a->fp.request_rate < b->fp.request_rate ? -1 : 1;
    return a->fp.shot_first < b->fp.shot_first ? -1 : a->fp.shot_first > b->fp.shot_first;
}

size_t cal_report_goodput_curve(const cal_result *r, cal_gp_curve *c)
{
    memset(c, 0, sizeof *c);
    c->knee = -1;
    /* the prompt length with the most rate cells that have a goodput */
    long best_p = 0;
    size_t best_n = 0;
    for (size_t i = 0; i < r->n_cells; i++) {
        const cal_rcell *ci = &r->cells[i];
        if (!(ci->fp.request_rate > 0) || !isfinite(ci->fp.request_rate) || !isfinite(ci->v[CAL_M_GOODPUT]))
            continue;
        size_t k = 0;
        for (size_t j = 0; j < r->n_cells; j++)
            k += r->cells[j].fp.prompt_tokens == ci->fp.prompt_tokens &&
                 r->cells[j].fp.request_rate > 0 && isfinite(r->cells[j].v[CAL_M_GOODPUT]);
        if (k > best_n) { best_n = k; best_p = ci->fp.prompt_tokens; }
    }
    if (!best_n) return 0;
    const cal_rcell *pick[CAL_GP_MAX];
    size_t n = 0;
    for (size_t i = 0; i < r->n_cells && n < CAL_GP_MAX; i++) {
        const cal_rcell *ci = &r->cells[i];
        if (ci->fp.prompt_tokens == best_p && ci->fp.request_rate > 0 &&
            isfinite(ci->fp.request_rate) && isfinite(ci->v[CAL_M_GOODPUT]))
            pick[n++] = ci;
    }
    qsort(pick, n, sizeof *pick, by_rate);
    /* one point per rate: the later shots (a pooled warm group over a cold one) */
    for (size_t i = 0; i < n; i++) {
        if (c->n && c->offered[c->n - 1] == pick[i]->fp.request_rate) c->n--;
        c->cells[c->n] = pick[i];
        c->offered[c->n] = pick[i]->fp.request_rate;
        c->throughput[c->n] = pick[i]->v[CAL_M_REQ_THROUGHPUT];
        c->goodput[c->n] = pick[i]->v[CAL_M_GOODPUT];
        c->n++;
    }
    c->prompt_tokens = best_p;
    snprintf(c->slo, sizeof c->slo, "%s", pick[0]->fp.slo);
    c->saturated = cal_sat_rule(c->goodput, c->n);
    if (c->saturated) c->knee = cal_sat_knee(c->goodput, c->n);
    return c->n;
}

/* "+48 %" / "−3 %" / "none" (0 after 0) / "from 0" / "" (the first) */
static void gain_text(const cal_gp_curve *c, size_t i, char *buf, size_t n)
{
    buf[0] = '\0';
    if (i == 0) return;
    if (!(c->goodput[i - 1] > 0)) {
        snprintf(buf, n, "%s", c->goodput[i] > 0 ? "from 0" : "none");
        return;
    }
    double g = c->goodput[i] / c->goodput[i - 1] - 1;
    cal_snprintf(buf, n, "%s%.0f %%", g < 0 ? "−" : "+", fabs(g) * 100);
}

int cal_report_goodput_md(const cal_result *r, cal_buf *b)
{
    cal_gp_curve *c = malloc(sizeof *c);
    if (!c) return CAL_ENOMEM;
    int rc = CAL_OK;
    if (!cal_report_goodput_curve(r, c)) goto out;
    TRY(cal_buf_printf(b, "## Goodput against offered load\n\nSLO %s · %ld tok prompts · "
                          "goodput: requests/s that met every bound; throughput: all ok requests/s\n\n"
                          "| offered req/s | throughput req/s | goodput req/s | goodput gain | |\n"
                          "|---:|---:|---:|---:|---|\n", c->slo[0] ? c->slo : "none", c->prompt_tokens));
    for (size_t i = 0; i < c->n; i++) {
        char g[32];
        gain_text(c, i, g, sizeof g);
        char row[256];
        cal_snprintf(row, sizeof row, "| %.3g | %.3f | %.3f | %s | %s |\n", c->offered[i],
                     c->throughput[i], c->goodput[i], g, (int)i == c->knee ? "← knee" : "");
        TRY(cal_buf_puts(b, row));
    }
    char line[512];
    if (c->n < 3) {
        cal_snprintf(line, sizeof line, "\nNo knee: %zu offered rate%s, and the rule needs three "
                     "(a saturation sweep steps through them).\n", c->n, c->n == 1 ? "" : "s");
    } else if (c->knee < 0) {
        double best = 0;
        for (size_t i = 0; i < c->n; i++) best = fmax(best, c->goodput[i]);
        cal_snprintf(line, sizeof line, best > 0
                     ? "\nNo knee: up to the last offered rate, %.3g req/s, goodput never gained "
                       "less than %.0f %% over two steps in a row: it did not level off within the "
                       "sweep (a higher top rate, or more requests per step where it is "
                       "noisy).\n"
                     : "\nNo knee: no request met the SLO at any offered rate up to %.3g req/s "
                       "(%.0f %% rule not applicable).\n",
                     c->offered[c->n - 1], CAL_SAT_GAIN * 100);
    } else {
        size_t k = (size_t)c->knee, ib = 0;
        for (size_t i = 0; i < c->n; i++) if (c->goodput[i] > c->goodput[ib]) ib = i;
        char g1[32], g2[32];
        gain_text(c, c->n - 2, g1, sizeof g1);
        gain_text(c, c->n - 1, g2, sizeof g2);
        cal_snprintf(line, sizeof line, "\nKnee: %.3g req/s offered gives %.3f req/s goodput, within "
                     "%.0f %% of the best (%.3f req/s at %.3g req/s offered). Goodput stopped rising: "
                     "%s and %s over the last two steps (less than %.0f %% each).\n",
                     c->offered[k], c->goodput[k], CAL_SAT_GAIN * 100, c->goodput[ib], c->offered[ib],
                     g1, g2, CAL_SAT_GAIN * 100);
    }
    TRY(cal_buf_puts(b, line));
out:
    free(c);
    return rc;
}

int cal_report_goodput_html(cal_buf *b, const cal_result *r, int idx)
{
    cal_gp_curve *c = malloc(sizeof *c);
    if (!c) return CAL_ENOMEM;
    int rc = CAL_OK;
    if (!cal_report_goodput_curve(r, c)) goto out;   /* no goodput: no figure */
    char id[48];
    snprintf(id, sizeof id, "chart-goodput-%d", idx);
    TRY(svg_fig_begin(b, id, 0, "Goodput against offered load"));
    TRY(svg_begin(b, 540, 330, "goodput and throughput against offered load, knee marked"));
    svg_panel p;
    memset(&p, 0, sizeof p);
    p.w = 540; p.h = 330;
    p.x = (svg_axis){"offered load", "req/s", NAN, NAN, 0, 1, NULL, 0};
    p.y = (svg_axis){"completed", "req/s", NAN, NAN, 0, 1, NULL, 0};
    if (c->n >= 2 && c->offered[c->n - 1] / c->offered[0] >= 4) { p.x.log2 = 1; p.x.zero = 0; }
    p.x_tick_labels = 1;
    p.empty = "absent: one offered rate is not a curve";
    size_t n = c->n >= 2 ? c->n : 0;
    p.s[p.ns++] = (svg_series){"goodput (met the SLO)", c->offered, c->goodput, n, SVG_LINE_POINTS, 0, 0};
    p.s[p.ns++] = (svg_series){"throughput (all ok)", c->offered, c->throughput, n, SVG_LINE_POINTS, 1, 1};
    double kx[2], ky[2];
    char kname[64];
    if (c->knee >= 0 && n) {
        kx[0] = kx[1] = c->offered[c->knee];
        ky[0] = 0;
        ky[1] = c->goodput[c->knee];
        cal_snprintf(kname, sizeof kname, "knee: %.3g req/s offered", kx[0]);
        p.s[p.ns++] = (svg_series){kname, kx, ky, 2, SVG_LINE, 2, 1};
    }
    TRY(svg_panel_write(b, &p));
    TRY(svg_end(b));
    char what[400], proto[700];
    if (c->knee >= 0)
        cal_snprintf(what, sizeof what, "The knee (%.3g req/s offered) is the first rate whose goodput "
                     "is within %.0f %% of the best; the sweep stopped when goodput gained less than "
                     "%.0f %% over two steps in a row.", c->offered[c->knee], CAL_SAT_GAIN * 100,
                     CAL_SAT_GAIN * 100);
    else
        cal_snprintf(what, sizeof what, "No knee is marked: goodput did not stop rising over these "
                     "rates (it must gain less than %.0f %% over two steps in a row).", CAL_SAT_GAIN * 100);
    size_t used = (size_t)cal_snprintf(proto, sizeof proto, "SLO %s · %ld tok prompts · offered",
                                       c->slo[0] ? c->slo : "none", c->prompt_tokens);
    for (size_t i = 0; i < c->n && used < sizeof proto; i++)
        used += (size_t)cal_snprintf(proto + used, sizeof proto - used, "%s %.3g", i ? "," : "", c->offered[i]);
    if (used < sizeof proto) cal_snprintf(proto + used, sizeof proto - used, " req/s");
    TRY(svg_fig_end(b, what, proto));
out:
    free(c);
    return rc;
}
