/* caliper — the report's SVG charts, written by hand so the page needs no
 * script and no network: axes with "nice" ticks (1, 2, 5 × 10^k) and units,
 * a light grid, series as lines, points or steps, and the legend in the top
 * margin so it never covers the data. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "svg.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) return e_; } while (0)

/* Tableau-like palette: distinct in colour and in lightness. */
static const char *const PALETTE[SVG_PALETTE_N] = {
    "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2",
};

const char *svg_color(int i)
{
    return PALETTE[((i % SVG_PALETTE_N) + SVG_PALETTE_N) % SVG_PALETTE_N];
}

int svg_esc(cal_buf *b, const char *s)
{
    for (const char *p = s; p && *p; p++) {
        switch (*p) {
        case '&': TRY(cal_buf_puts(b, "&amp;")); break;
        case '<': TRY(cal_buf_puts(b, "&lt;")); break;
        case '>': TRY(cal_buf_puts(b, "&gt;")); break;
        case '"': TRY(cal_buf_puts(b, "&quot;")); break;
        case '\'': TRY(cal_buf_puts(b, "&#39;")); break;
        default: TRY(cal_buf_append(b, p, 1)); break;
        }
    }
    return CAL_OK;
}

int svg_fig_begin(cal_buf *b, const char *id, int wide, const char *title)
{
    TRY(cal_buf_printf(b, "<figure id=\"%s\" class=\"chart%s\">\n<h3>", id, wide ? " wide" : ""));
    TRY(svg_esc(b, title));
    return cal_buf_puts(b, "</h3>\n");
}

int svg_fig_end(cal_buf *b, const char *what, const char *protocol)
{
    TRY(cal_buf_puts(b, "<figcaption><b>"));
    TRY(svg_esc(b, what));
    TRY(cal_buf_puts(b, "</b> Protocol: "));
    TRY(svg_esc(b, protocol));
    return cal_buf_puts(b, "</figcaption>\n</figure>\n");
}

int svg_begin(cal_buf *b, double w, double h, const char *title)
{
    TRY(cal_buf_printf(b, "<svg viewBox=\"0 0 %.0f %.0f\" "
                          "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"", w, h, w, h));
    TRY(svg_esc(b, title));
    TRY(cal_buf_puts(b, "\" font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\" font-size=\"11\">\n<title>"));
    TRY(svg_esc(b, title));
    return cal_buf_puts(b, "</title>\n");
}

int svg_end(cal_buf *b)
{
    return cal_buf_puts(b, "</svg>\n");
}

/* ---- scales -------------------------------------------------------------- */

typedef struct scale { double lo, hi, p0, p1; int log2; } scale;

static double tr(const scale *s, double v)
{
    double a = s->log2 ? log2(s->lo) : s->lo, b = s->log2 ? log2(s->hi) : s->hi;
    double x = s->log2 ? log2(v) : v;
    if (b == a) return (s->p0 + s->p1) / 2;
    return s->p0 + (x - a) / (b - a) * (s->p1 - s->p0);
}

static double nice_step(double range, int target)
{
    if (!(range > 0)) return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double n = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    return n * mag;
}

/* Data range of an axis over all series, then widened to nice bounds. */
static void axis_range(const svg_panel *p, int is_x, double *lo, double *hi, double *step)
{
    const svg_axis *ax = is_x ? &p->x : &p->y;
    double mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < p->ns; i++)
        for (size_t k = 0; k < p->s[i].n; k++) {
            double v = is_x ? p->s[i].x[k] : p->s[i].y[k];
            if (!isfinite(v) || (ax->log2 && v <= 0)) continue;
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
    for (size_t k = 0; k < ax->n_ticks; k++) {
        if (ax->ticks[k] < mn) mn = ax->ticks[k];
        if (ax->ticks[k] > mx) mx = ax->ticks[k];
    }
    if (!isfinite(mn)) { mn = 0; mx = 1; }
    if (ax->zero && !ax->log2) { if (mn > 0) mn = 0; if (mx < 0) mx = 0; }
    if (isfinite(ax->min)) mn = ax->min;
    if (isfinite(ax->max)) mx = ax->max;
    if (mx == mn) { double d = mn ? fabs(mn) * 0.1 : 1; mn -= d; mx += d; if (ax->zero && mn < 0 && mx > 0 && !ax->log2) mn = 0; }
    if (ax->log2) {
        *lo = mn; *hi = mx; *step = 0;
        if (*lo == *hi) { *lo /= 2; *hi *= 2; }
        return;
    }
    double st = nice_step(mx - mn, 5);
    *lo = isfinite(ax->min) ? mn : floor(mn / st) * st;
    *hi = isfinite(ax->max) ? mx : ceil(mx / st) * st;
    if (*hi <= *lo) *hi = *lo + st;
    *step = st;
}

static void fmt_tick(double v, double step, char *buf, size_t n)
{
    if (fabs(v) < step * 1e-9) v = 0;
    int dec = step >= 1 || step <= 0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6) dec = 6;
    if (fabs(v) >= 10000 && step >= 1000) cal_snprintf(buf, n, "%gk", v / 1000);
    else cal_snprintf(buf, n, "%.*f", dec, v);
}

/* ---- drawing ------------------------------------------------------------------ */

#define ML 62.0   /* left margin: tick labels and the rotated y label */
#define MR 14.0
#define MT 30.0   /* top margin: the legend */
#define MB 40.0   /* bottom: tick labels and the x label */

static int axis_title(cal_buf *b, const svg_axis *ax)
{
    TRY(svg_esc(b, ax->label ? ax->label : ""));
    if (ax->unit && ax->unit[0]) {
        TRY(cal_buf_puts(b, " ("));
        TRY(svg_esc(b, ax->unit));
        TRY(cal_buf_puts(b, ")"));
    }
    return CAL_OK;
}

static int has_data(const svg_panel *p)
{
    for (size_t i = 0; i < p->ns; i++)
        for (size_t k = 0; k < p->s[i].n; k++)
            if (isfinite(p->s[i].x[k]) && isfinite(p->s[i].y[k])) return 1;
    return 0;
}

static int legend(cal_buf *b, const svg_panel *p, double px0, double px1)
{
    double x = px0, y = p->y0 + 12;
    for (size_t i = 0; i < p->ns; i++) {
        const svg_series *s = &p->s[i];
        if (!s->name) continue;
        double w = 26 + 6.2 * (double)strlen(s->name) + 14;
        if (x + w > px1 && x > px0) { x = px0; y += 14; }   /* wrap; caller leaves room */
        const char *c = svg_color(s->color);
        if (s->style == SVG_POINTS)
            TRY(cal_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", x + 10, y - 4, c));
        else
            TRY(cal_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                                  "stroke-width=\"2.5\"%s/>", x, y - 4, x + 20, y - 4, c,
                               s->dashed ? " stroke-dasharray=\"5 3\"" : ""));
        TRY(cal_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">", x + 26, y));
        TRY(svg_esc(b, s->name));
        TRY(cal_buf_puts(b, "</text>\n"));
        x += w;
    }
    return CAL_OK;
}

/* The panel's "absent: …" line, over a white box so no grid line crosses it. */
static int absent(cal_buf *b, const svg_panel *p, double px0, double px1, double py0, double py1)
{
    const char *t = p->empty ? p->empty : "no data";
    double w = 7.0 * (double)strlen(t) * 0.92 + 16, cx = (px0 + px1) / 2, cy = (py0 + py1) / 2;
    TRY(cal_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"22\" fill=\"#fff\"/>",
                       cx - w / 2, cy - 11, w));
    TRY(cal_buf_printf(b, "<text class=\"absent\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#777\" font-size=\"13\">",
                       cx, cy + 4));
    TRY(svg_esc(b, t));
    return cal_buf_puts(b, "</text>\n</g>\n");
}

int svg_panel_write(cal_buf *b, const svg_panel *p)
{
    double px0 = p->x0 + ML, px1 = p->x0 + p->w - MR;
    double py0 = p->y0 + MT, py1 = p->y0 + p->h - (p->x_tick_labels ? MB : 10);
    TRY(cal_buf_printf(b, "<g class=\"panel\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                          "fill=\"#fff\" stroke=\"#d0d4da\"/>\n", px0, py0, px1 - px0, py1 - py0));
    /* y label, rotated, centred on the plot */
    TRY(cal_buf_printf(b, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\" fill=\"#444\">",
                       p->x0 + 13, (py0 + py1) / 2));
    TRY(axis_title(b, &p->y));
    TRY(cal_buf_puts(b, "</text>\n"));
    if (p->x_tick_labels) {
        TRY(cal_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">",
                           (px0 + px1) / 2, p->y0 + p->h - 6));
        TRY(axis_title(b, &p->x));
        TRY(cal_buf_puts(b, "</text>\n"));
    }
    int data = has_data(p);
    /* a stacked panel without data still carries the shared time axis */
    if (!data && !(p->x_tick_labels && isfinite(p->x.min) && isfinite(p->x.max))) return absent(b, p, px0, px1, py0, py1);
    double xlo, xhi, xst, ylo, yhi, yst;
    axis_range(p, 1, &xlo, &xhi, &xst);
    axis_range(p, 0, &ylo, &yhi, &yst);
    scale sx = {xlo, xhi, px0 + 6, px1 - 6, p->x.log2};
    scale sy = {ylo, yhi, py1, py0, p->y.log2};

    /* y ticks and grid */
    if (!data) {
        /* no y scale without data */
    } else if (sy.log2 || p->y.ticks) {
        for (size_t k = 0; k < p->y.n_ticks; k++) {
            double v = p->y.ticks[k], y = tr(&sy, v);
            char t[32];
            cal_snprintf(t, sizeof t, "%g", v);   /* explicit ticks: as given */
            TRY(cal_buf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eceef1\"/>"
                                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>\n",
                               px0, px1, y, y, px0 - 5, y + 3.5, t));
        }
    } else {
        for (double v = ylo; v <= yhi + yst * 1e-6; v += yst) {
            double y = tr(&sy, v);
            char t[32];
            fmt_tick(v, yst, t, sizeof t);
            TRY(cal_buf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eceef1\"/>"
                                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>\n",
                               px0, px1, y, y, px0 - 5, y + 3.5, t));
        }
    }
    /* x ticks */
    double last_label_end = -1e9;
    size_t nxt = 0;
    double xt[64];
    if (sx.log2 || p->x.ticks) {
        for (size_t k = 0; k < p->x.n_ticks && nxt < 64; k++) xt[nxt++] = p->x.ticks[k];
    } else {
        for (double v = xlo; v <= xhi + xst * 1e-6 && nxt < 64; v += xst) xt[nxt++] = v;
    }
    for (size_t k = 0; k < nxt; k++) {
        double v = xt[k], x = tr(&sx, v);
        if (x < px0 - 0.5 || x > px1 + 0.5) continue;
        TRY(cal_buf_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eceef1\"/>"
                              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
                           x, x, py0, py1, x, x, py1, py1 + 4));
        if (p->x_tick_labels) {
            char t[32];
            if (sx.log2 || p->x.ticks) cal_snprintf(t, sizeof t, "%g", v);
            else fmt_tick(v, xst, t, sizeof t);
            double half = 3.2 * (double)strlen(t);
            if (x - half < last_label_end + 4) continue;   /* never overlap labels */
            last_label_end = x + half;
            TRY(cal_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n",
                               x, py1 + 16, t));
        }
    }
    if (!data) return absent(b, p, px0, px1, py0, py1);
    /* series, clipped to the plot */
    /* the id must be unique within the document: the byte offset it is
     * written at is, and unlike a process-wide counter it is the same on
     * every render and needs no lock */
    unsigned long cid = (unsigned long)b->len;
    TRY(cal_buf_printf(b, "<clipPath id=\"c%lu\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n"
                          "<g clip-path=\"url(#c%lu)\">\n", cid, px0, py0 - 4, px1 - px0, py1 - py0 + 8, cid));
    for (size_t i = 0; i < p->ns; i++) {
        const svg_series *s = &p->s[i];
        const char *c = svg_color(s->color);
        if (s->style != SVG_POINTS) {
            TRY(cal_buf_printf(b, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\"%s d=\"",
                               c, s->dashed ? " stroke-dasharray=\"6 4\"" : ""));
            int pen = 0;
            double prev_y = 0;
            for (size_t k = 0; k < s->n; k++) {
                if (!isfinite(s->x[k]) || !isfinite(s->y[k]) || (sx.log2 && s->x[k] <= 0)) { pen = 0; continue; }
                double x = tr(&sx, s->x[k]), y = tr(&sy, s->y[k]);
                if (s->style == SVG_STEP && pen)
                    TRY(cal_buf_printf(b, "L%.1f %.1f", x, prev_y));
                TRY(cal_buf_printf(b, "%s%.1f %.1f", pen ? "L" : "M", x, y));
                pen = 1;
                prev_y = y;
            }
            TRY(cal_buf_puts(b, "\"/>\n"));
        }
        if (s->style == SVG_POINTS || s->style == SVG_LINE_POINTS) {
            for (size_t k = 0; k < s->n; k++) {
                if (!isfinite(s->x[k]) || !isfinite(s->y[k]) || (sx.log2 && s->x[k] <= 0)) continue;
                TRY(cal_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1\"/>",
                                   tr(&sx, s->x[k]), tr(&sy, s->y[k]), c));
            }
            TRY(cal_buf_puts(b, "\n"));
        }
    }
    TRY(cal_buf_puts(b, "</g>\n"));
    TRY(legend(b, p, px0, px1));
    return cal_buf_puts(b, "</g>\n");
}
