/* The invariants every import fuzz target checks on an importer's answer:
 * a failure leaves no result and says why; a result has cells, compares
 * against itself with every present ratio comparable, and renders as HTML.
 * Frees the result. */
#ifndef CALIPER_FUZZ_IMPORT_CHECK_H
#define CALIPER_FUZZ_IMPORT_CHECK_H
#include <stdlib.h>
#include "caliper/error.h"
#include "caliper/report.h"

static inline void fuzz_check_import(int e, cal_result *r, const char *err)
{
    if (e) {
        if (r || !err[0]) abort();
        return;
    }
    if (!r || r->n_cells == 0) abort();
    const cal_result *rs[2] = {r, r};
    cal_compare_opts o = {0};
    o.boot_iters = 20;
    cal_comparison *c = NULL;
    if (cal_compare(rs, 2, &o, &c) != 0) abort();
    for (size_t i = 0; i < c->n_rows; i++) {
        const cal_cmp_entry *x = &c->rows[i].e[1];
        if (x->present && !x->comparable) abort();
    }
    cal_comparison_free(&c);
    cal_buf b = CAL_BUF_INIT(8u << 20);
    int w = cal_report_write(rs, 1, CAL_REPORT_HTML, &b);
    if (w != 0 && w != CAL_ETOOBIG) abort();
    cal_buf_free(&b);
    cal_result_free(&r);
}
#endif
