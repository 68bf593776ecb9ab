/* Fuzz target: the per-op profile readers on JSON (Chrome trace-event JSON
 * and caliper's engine profile and op bench). Any bytes must parse or fail
 * with a message; a parsed profile must hold finite, non-negative sums and
 * distinct names; reconciled against itself (given tokens and an end to
 * end) its categories must add up to its kernel time, and the JSON written
 * must draw as a report section. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/ops.h"

void fuzz_ops_check(const cal_ops_profile *p);

void fuzz_ops_check(const cal_ops_profile *p)
{
    if (!p || p->n_ops > CAL_OPS_MAX_OPS) abort();
    double kernel = 0;
    for (size_t i = 0; i < p->n_ops; i++) {
        const cal_ops_op *o = &p->ops[i];
        if (strnlen(o->name, CAL_OPS_NAME_MAX) >= CAL_OPS_NAME_MAX) abort();
        if (!(o->calls >= 0) || !(o->time_ns >= 0) || !isfinite(o->time_ns)) abort();
        if (!isnan(o->bytes) && !(o->bytes >= 0)) abort();
        for (size_t j = 0; j < i; j++)
            if (!strcmp(p->ops[j].name, o->name)) abort();
        kernel += o->time_ns;
    }
    cal_ops_profile q = *p;
    q.format = CAL_OPS_CSV;
    q.tokens = 10;
    q.e2e_ns = kernel > 0 ? kernel * 2 : 1;
    if (!isfinite(q.e2e_ns)) return;
    cal_ops_map *m = NULL;
    if (cal_ops_map_default(&m)) abort();
    static cal_ops_recon r;
    char err[256];
    int rc = cal_ops_reconcile(&q, p->n_ops ? &q : NULL, m, NULL, &r, err, sizeof err);
    if (rc == CAL_OK) {
        double sum = 0;
        for (size_t c = 0; c < r.n_cats; c++) sum += r.side[0].cat[c].time_ns;
        if (fabs(sum - kernel) > 1e-6 * (kernel + 1)) abort();
        if (!(r.side[0].coverage >= 0 && r.side[0].coverage <= 1)) abort();
        cal_buf j = CAL_BUF_INIT(8u << 20), h = CAL_BUF_INIT(8u << 20);
        if (cal_ops_to_json(&r, NULL, &j) == CAL_OK &&
            cal_ops_html_section(j.data, j.len, &h, err, sizeof err) != CAL_OK)
            abort();
        cal_buf_free(&j);
        cal_buf_free(&h);
    } else if (!err[0]) {
        abort();
    }
    cal_ops_map_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16)) return 0;
    const char *text = (const char *)data;
    static const cal_ops_read_opts opts[] = {{0}, {.trace_cat = "cpu_op", .e2e_span = "*step*"}};
    for (size_t k = 0; k < 2; k++) {
        cal_ops_profile *p = NULL;
        char err[256] = "";
        int rc = k ? cal_ops_parse_trace(text, size, "f", &opts[k], &p, err, sizeof err)
                   : cal_ops_parse(text, size, "f", &opts[k], &p, err, sizeof err);
        if (rc == CAL_OK) fuzz_ops_check(p);
        else if (p || !err[0]) abort();
        cal_ops_profile_free(&p);
    }
    cal_ops_profile *p = NULL;
    char err[256] = "";
    if (cal_ops_parse_engine(text, size, "e", &p, err, sizeof err) == CAL_OK) fuzz_ops_check(p);
    else if (p || !err[0]) abort();
    cal_ops_profile_free(&p);
    return 0;
}
