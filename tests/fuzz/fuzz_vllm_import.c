/* Fuzz target: reading result files — a vLLM bench JSON, caliper's own
 * result JSON, anything else. Any bytes must parse into a result or fail
 * with a message; a result that parses must compare against itself with
 * every ratio 1 and render as HTML without an error. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    char err[256];
    cal_result *r = NULL;
    int e = cal_result_from_json((const char *)data, size, "fuzz.json", &r, err, sizeof err);
    if (e) {
        if (r || !err[0]) abort();   /* a failure leaves nothing and says why */
        return 0;
    }
    const cal_result *rs[2] = {r, r};
    cal_compare_opts o = {0};
    o.boot_iters = 20;
    cal_comparison *c = NULL;
    if (cal_compare(rs, 2, &o, &c) != 0) abort();
    for (size_t i = 0; i < c->n_rows; i++) {
        const cal_cmp_entry *x = &c->rows[i].e[1];
        if (x->present && !x->comparable) abort();   /* a result matches itself */
    }
    cal_comparison_free(&c);
    cal_buf b = CAL_BUF_INIT(8u << 20);
    int w = cal_report_write(rs, 1, CAL_REPORT_HTML, &b);
    if (w != 0 && w != -4 /* CAL_ETOOBIG */) abort();
    cal_buf_free(&b);
    cal_result_free(&r);
    return 0;
}
