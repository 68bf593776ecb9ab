/* caliper — a small SVG chart writer for the HTML report: linear or log
 * axes with "nice" ticks and units, line / point / step series, a legend in
 * the top margin (never over the data), and a message when a panel has no
 * data. Internal to lib/report. */
#ifndef CALIPER_REPORT_SVG_H
#define CALIPER_REPORT_SVG_H
#include <stddef.h>
#include "caliper/buf.h"

typedef enum svg_style { SVG_LINE = 0, SVG_POINTS, SVG_LINE_POINTS, SVG_STEP } svg_style;

typedef struct svg_series {
    const char   *name;       /* legend text; NULL = not in the legend */
    const double *x, *y;      /* [n]; NAN points are skipped (lines break) */
    size_t        n;
    svg_style     style;
    int           color;      /* index into the palette */
    int           dashed;
} svg_series;

typedef struct svg_axis {
    const char *label;        /* "time since run start" */
    const char *unit;         /* "s"; printed as "label (unit)" */
    double      min, max;     /* NAN = from the data */
    int         log2;         /* log base-2 scale (concurrency) */
    int         zero;         /* include 0 in the range */
    const double *ticks;      /* explicit tick values, or NULL for nice ticks */
    size_t      n_ticks;
} svg_axis;

#define SVG_MAX_SERIES 12

typedef struct svg_panel {
    double x0, y0, w, h;      /* the panel's box inside the svg, px */
    svg_axis x, y;
    svg_series s[SVG_MAX_SERIES];
    size_t ns;
    int x_tick_labels;        /* 0: ticks only (a stacked panel above another) */
    const char *empty;        /* text shown when there is no data */
} svg_panel;

#define SVG_PALETTE_N 6
const char *svg_color(int i);

int svg_begin(cal_buf *b, double w, double h, const char *title);
int svg_end(cal_buf *b);
/* Draw one panel: frame, grid, ticks, axis labels, series, legend. */
int svg_panel_write(cal_buf *b, const svg_panel *p);
/* A chart's figure around its svg: the heading first; after the svg, what
 * to read (bold) and the protocol as the caption. */
int svg_fig_begin(cal_buf *b, const char *id, int wide, const char *title);
int svg_fig_end(cal_buf *b, const char *what, const char *protocol);
/* Append s escaped for XML text/attributes. */
int svg_esc(cal_buf *b, const char *s);

#endif
