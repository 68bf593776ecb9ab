/* caliper — what the gate's files (gate.c, gate_input.c, trend.c,
 * groups.c) share inside lib/report; not part of the public contract. */
#ifndef CALIPER_GATE_INTERNAL_H
#define CALIPER_GATE_INTERNAL_H
#include <stddef.h>
#include "caliper/fingerprint.h"
#include "caliper/buf.h"
#include "caliper/report.h"

/* The cells of r a reader quotes: per configuration (every fingerprint
 * field but the shot kind and range), the cell of its latest shots (the
 * warm shots pooled, not the first measured shot alone); indices into
 * r->cells in cell order. Returns how many (<= cap). */
size_t cal_gate_quoted_cells(const cal_result *r, size_t *idx, size_t cap);

/* A short name of a cell: "c1 · 256 tok · warm 2–10". */
void cal_gate_cell_name(const cal_fingerprint *fp, char *buf, size_t n);

/* 1 when two fingerprints differ only in the shot kind or range. */
int cal_gate_same_config(const cal_fingerprint *a, const cal_fingerprint *b);

/* The metrics the side-by-side views of many results rank by (fpgroup.c). */
extern const cal_metric CAL_FPGROUP_METRICS[];
extern const size_t CAL_FPGROUP_N_METRICS;

/* The report's HTML page with compare's marks on the results (html.c);
 * marks NULL: compare's defaults. */
struct cal_fpmarks;
int cal_report_html_marked(const cal_result *const *res, size_t n, const char *extra,
                           const struct cal_fpmarks *marks, cal_buf *out);

#endif
