/* caliper — the HTML page's "Engines side by side" (include/caliper/
 * fpgroup.h): the protocol groups in a table, then per metric one figure
 * with every engine, throughput with both columns (SPEC 1.2: aggregate and
 * per-request), each group a panel of its own with its own axis, its rank
 * within it, its heading naming how its protocol differs from group 1's,
 * and results compare would flag (stale, another engine version) marked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/fpgroup.h"
#include "gate_internal.h"
#include "report_internal.h"
#include "svg.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) return e_; } while (0)

#define W     1100.0
#define LW    330.0    /* rank, engine and its marks */
#define VW    96.0     /* the value after each bar */
#define GAP   14.0
#define AXIS  24.0

static double nice_max(double v, double *step)
{
    if (!(v > 0)) { *step = 1; return 1; }
    double raw = v / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double s = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    *step = s;
    return ceil(v / s - 1e-9) * s;
}

/* s cut to at most max code points (a whole UTF-8 sequence kept), "…" added */
static void clip(const char *s, size_t max, char *buf, size_t n)
{
    size_t cps = 0, i = 0, len = strlen(s);
    while (i < len && cps < max) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        cps++;
    }
    if (i >= len) snprintf(buf, n, "%s", s);
    else snprintf(buf, n, "%.*s…", (int)i, s);
}

static void tick(double v, double step, char *buf, size_t n)
{
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 4) dec = 4;
    cal_snprintf(buf, n, "%.*f", dec, v);
}

/* which throughput column a group is ranked by: per-request at 1–4 in
 * flight, aggregate beyond (SPEC 1.2) */
static cal_metric tput_rank_metric(const cal_fingerprint *fp)
{
    return fp->concurrency >= 1 && fp->concurrency <= 4 ? CAL_M_REQ_TOKS : CAL_M_AGG_TOKS;
}

typedef struct fig {
    const char *id, *title, *what;
    cal_metric m;          /* the metric; for throughput the per-request one */
    int tput;              /* both throughput columns */
} fig;

static double val(const cal_result *const *res, const cal_fpmember *mm, cal_metric m)
{
    return res[mm->result]->cells[mm->cell].v[m];
}

static int figure(cal_buf *b, const cal_result *const *res, const cal_fpgroups *g, const fig *f,
                  size_t *order)
{
    /* the height first: every group's heading, rows and axis */
    double rowh = f->tput ? 30 : 20, h = f->tput ? 30 : 8;
    for (size_t gi = 0; gi < g->n_groups; gi++)
        h += (g->g[gi].differs[0] ? 44 : 28) + rowh * (double)g->g[gi].n + AXIS + GAP;
    TRY(svg_fig_begin(b, f->id, 1, f->title));
    TRY(svg_begin(b, W, h, f->title));
    double y = 4;
    if (f->tput) {
        TRY(cal_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>"
                              "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">aggregate (all output tokens ÷ "
                              "the cell's wall clock)</text>\n", LW, y + 3, svg_color(0), LW + 20, y + 12));
        TRY(cal_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>"
                              "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">per-request (median of each "
                              "request's tokens ÷ its own time)</text>\n", LW + 330, y + 3, svg_color(2),
                           LW + 350, y + 12));
        y += 26;
    }
    const cal_field *fm = cal_metric_get(f->m);
    for (size_t gi = 0; gi < g->n_groups; gi++) {
        const cal_fpgroup *gr = &g->g[gi];
        cal_metric rm = f->tput ? tput_rank_metric(&gr->fp) : f->m;
        size_t have = cal_fpgroup_rank(res, gr, rm, order);
        double head = gr->differs[0] ? 44 : 28;
        double gh = head + rowh * (double)gr->n + AXIS;
        TRY(cal_buf_printf(b, "<g class=\"group\" data-group=\"%zu\">\n<rect x=\"0.5\" y=\"%.1f\" "
                              "width=\"%.1f\" height=\"%.1f\" rx=\"4\" fill=\"%s\" stroke=\"#c9d1d9\"/>\n",
                           gi + 1, y, W - 1, gh, gi % 2 ? "#ffffff" : "#f6f8fa"));
        char title[300];
        snprintf(title, sizeof title, "Group %zu · %s · %zu engine%s · ranked by %s%s", gi + 1, gr->name,
                 gr->n, gr->n == 1 ? "" : "s", cal_metric_get(rm)->label,
                 fm->better == CAL_BETTER_LOWER && !f->tput ? " (lower is better)" : "");
        TRY(cal_buf_printf(b, "<text x=\"10\" y=\"%.1f\" font-weight=\"600\" font-size=\"12.5\" fill=\"#1f2328\">",
                           y + 17));
        TRY(svg_esc(b, title));
        TRY(cal_buf_puts(b, "</text>\n"));
        if (gr->differs[0]) {
            char d[700];
            snprintf(d, sizeof d, "another protocol than group 1, not comparable with it: %s", gr->differs);
            char dc[400];
            clip(d, 170, dc, sizeof dc);
            TRY(cal_buf_printf(b, "<text class=\"differs\" x=\"10\" y=\"%.1f\" fill=\"#9a3412\">", y + 34));
            TRY(svg_esc(b, dc));
            TRY(cal_buf_puts(b, "</text>\n"));
        }
        /* this group's own axis: 0 to its own largest value */
        double mx = 0;
        for (size_t i = 0; i < gr->n; i++) {
            double v1 = val(res, &gr->m[i], f->tput ? CAL_M_AGG_TOKS : f->m);
            double v2 = f->tput ? val(res, &gr->m[i], CAL_M_REQ_TOKS) : NAN;
            if (isfinite(v1) && v1 > mx) mx = v1;
            if (isfinite(v2) && v2 > mx) mx = v2;
        }
        double step, top = nice_max(mx, &step);
        double x0 = LW, x1 = W - VW, ry = y + head;
        for (size_t r = 0; r < gr->n; r++) {
            const cal_fpmember *mm = &gr->m[order[r]];
            double yy = ry + rowh * (double)r;
            char nm[200], rank[24];
            clip(mm->name, 30, nm, sizeof nm);
            if (r < have) snprintf(rank, sizeof rank, "%zu.", r + 1);
            else snprintf(rank, sizeof rank, "—");
            TRY(cal_buf_printf(b, "<text x=\"28\" y=\"%.1f\" text-anchor=\"end\" fill=\"#57606a\">%s</text>"
                                  "<text x=\"34\" y=\"%.1f\" fill=\"#1f2328\">", yy + rowh / 2 + 4, rank,
                               yy + rowh / 2 + 4));
            TRY(svg_esc(b, nm));
            TRY(cal_buf_puts(b, "</text>\n"));
            if (g->flags[mm->result][0]) {
                TRY(cal_buf_printf(b, "<text class=\"stale\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                                      "fill=\"#b91c1c\" font-weight=\"600\"><title>", LW - 8,
                                   yy + rowh / 2 + 4));
                TRY(svg_esc(b, g->flags[mm->result]));
                TRY(cal_buf_printf(b, "</title>%s</text>\n", g->stale[mm->result] ? "⚠ stale" : "⚠ re-measure"));
            }
            int nb = f->tput ? 2 : 1;
            int any = 0;
            for (int k = 0; k < nb; k++) {
                cal_metric m = f->tput ? (k ? CAL_M_REQ_TOKS : CAL_M_AGG_TOKS) : f->m;
                double v = val(res, mm, m);
                double bh = f->tput ? 11 : 12, by = yy + (f->tput ? 3 + 13 * k : 4);
                if (!isfinite(v)) continue;
                any = 1;
                double w = top > 0 ? (x1 - x0) * fmax(v, 0) / top : 0;
                TRY(cal_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                                      "fill=\"%s\"><title>", x0, by, w, bh, svg_color(f->tput ? 2 * k : 0)));
                TRY(svg_esc(b, mm->name));
                TRY(cal_buf_printf(b, ": %s %.*f</title></rect>", cal_metric_get(m)->label,
                                   cal_metric_get(m)->decimals, v));
                TRY(cal_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\" font-size=\"10.5\">%.*f</text>\n",
                                   x0 + w + 4, by + bh - 2, cal_metric_get(m)->decimals, v));
            }
            if (!any)
                TRY(cal_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#8b949e\" font-style=\"italic\">not "
                                      "measured under this protocol</text>\n", x0 + 4, yy + rowh / 2 + 4));
        }
        double ay = ry + rowh * (double)gr->n + 2;
        TRY(cal_buf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
                           x0, x1, ay, ay));
        for (double v = 0; v <= top + step * 1e-6; v += step) {
            double x = x0 + (x1 - x0) * v / top;
            char t[32];
            tick(v, step, t, sizeof t);
            TRY(cal_buf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\" "
                                  "font-size=\"10\">%s</text>\n", x, x, ay, ay + 4, x, ay + 15, t));
        }
        TRY(cal_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\" font-size=\"10\">", x1 + 30, ay + 15));
        TRY(svg_esc(b, fm->unit));
        TRY(cal_buf_puts(b, "</text>\n</g>\n"));
        y += gh + GAP;
    }
    TRY(svg_end(b));
    return svg_fig_end(b, f->what, "per group: named in its heading and in the table of groups "
                                   "above; no axis is shared between groups");
}

int cal_fpgroups_html(const cal_result *const *res, size_t n, const cal_fpgroups *g, cal_buf *b)
{
    if (n < 2 || !g->n_groups) return CAL_OK;
    TRY(cal_buf_printf(b, "<section class=\"side\" id=\"side-by-side\">\n<h2>Engines side by side</h2>\n"
                          "<p class=\"sub\">%zu results in %zu protocol group%s. A rank holds within its "
                          "group only: each group is drawn on its own axis, and a group measured under "
                          "another protocol names the fields that differ from group 1, whose numbers it "
                          "is never compared with.</p>\n", n, g->n_groups, g->n_groups == 1 ? "" : "s"));
    /* the groups, their protocols and engines */
    TRY(cal_buf_puts(b, "<div class=\"tablewrap\"><table id=\"groups\"><caption><b>Protocol groups</b> — "
                        "the quoted cell of each result (its warm shots pooled), grouped by fingerprint"
                        "</caption>\n<tr><th class=\"p\">group</th><th class=\"p\">protocol</th>"
                        "<th class=\"p\">engines</th><th class=\"p\">differs from group 1</th></tr>\n"));
    for (size_t gi = 0; gi < g->n_groups; gi++) {
        const cal_fpgroup *gr = &g->g[gi];
        char proto[700];
        cal_fp_describe(&gr->fp, proto, sizeof proto);
        TRY(cal_buf_printf(b, "<tr data-group=\"%zu\"><td class=\"p\">%zu</td><td class=\"p wrap\">", gi + 1, gi + 1));
        TRY(svg_esc(b, proto));
        TRY(cal_buf_puts(b, "</td><td class=\"p wrap\">"));
        for (size_t i = 0; i < gr->n; i++) {
            if (i) TRY(cal_buf_puts(b, ", "));
            TRY(svg_esc(b, gr->m[i].name));
            if (g->flags[gr->m[i].result][0]) TRY(cal_buf_puts(b, " <span class=\"stale\">⚠</span>"));
        }
        TRY(cal_buf_puts(b, "</td><td class=\"p wrap\">"));
        TRY(svg_esc(b, gr->differs[0] ? gr->differs : "—"));
        TRY(cal_buf_puts(b, "</td></tr>\n"));
    }
    TRY(cal_buf_puts(b, "</table></div>\n"));
    int marked = 0;
    for (size_t j = 0; j < n; j++) marked |= g->flags[j][0] != 0;
    if (marked) {
        TRY(cal_buf_puts(b, "<ul class=\"marks\">\n"));
        for (size_t j = 0; j < n; j++) {
            if (!g->flags[j][0]) continue;
            TRY(cal_buf_puts(b, "<li><span class=\"stale\">⚠</span> <b>"));
            TRY(svg_esc(b, res[j]->label));
            TRY(cal_buf_puts(b, "</b>: "));
            TRY(svg_esc(b, g->flags[j]));
            TRY(cal_buf_puts(b, "</li>\n"));
        }
        TRY(cal_buf_puts(b, "</ul>\n"));
    }
    size_t *order = malloc(CAL_CMP_MAX * 256 * sizeof *order);
    if (!order) return CAL_ENOMEM;
    static const fig FIGS[] = {
        {"side-throughput", "Throughput, both columns", "Each engine's aggregate and per-request "
         "throughput; a group's rank reads per-request at 1–4 in flight, aggregate beyond.",
         CAL_M_REQ_TOKS, 1},
        {"side-decode", "Decode speed", "Each engine's median decode tok/s (output after the first "
         "token ÷ its time).", CAL_M_DECODE_TOKS, 0},
        {"side-ttft", "Time to first token, p50", "Each engine's median TTFT; shorter is better.",
         CAL_M_TTFT_P50, 0},
        {"side-e2e", "End-to-end latency, p99", "Each engine's p99 of whole requests; shorter is better.",
         CAL_M_E2E_P99, 0},
    };
    int rc = cal_buf_puts(b, "<div class=\"grid\">\n");
    for (size_t k = 0; k < sizeof FIGS / sizeof FIGS[0] && !rc; k++) rc = figure(b, res, g, &FIGS[k], order);
    free(order);
    if (!rc) rc = cal_buf_puts(b, "</div>\n</section>\n");
    return rc;
}
