/* Fuzz target: the llama-bench -o json / -o jsonl importer. Any bytes must give a
 * result or fail with a message and no result; a result must compare
 * against itself with every ratio comparable, and render as HTML. Also built
 * as a corpus replay for `make test`. */
#include <stdint.h>
#include <stdlib.h>
#include "caliper/error.h"
#include "caliper/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    char err[256];
    err[0] = 0;
    cal_result *r = NULL;
    int e = cal_import_llamabench((const char *)data, size, "fuzz.json", &r, err, sizeof err);
    if (e) {
        if (r || !err[0]) abort();
        return 0;
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
    return 0;
}
