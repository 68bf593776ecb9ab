/* caliper — the cells a reader quotes and their short names, shared by the
 * gate (gate_input.c), the trend of a series (trend.c) and the report's
 * grouping of many results (groups.c): per configuration the cell of its
 * latest shots, the warm shots pooled. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/report.h"
#include "gate_internal.h"
#include "lib/util/c_locale.h"

int cal_gate_same_config(const cal_fingerprint *a, const cal_fingerprint *b)
{
    cal_fp_difference d[CAL_FPF__N];
    size_t n = cal_fp_diff(a, b, d, CAL_FPF__N);
    for (size_t i = 0; i < n; i++)
        if (d[i].field != CAL_FPF_SHOT_KIND && d[i].field != CAL_FPF_SHOT_RANGE) return 0;
    return 1;
}

size_t cal_gate_quoted_cells(const cal_result *r, size_t *idx, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_cells && n < cap; i++) {
        const cal_fingerprint *a = &r->cells[i].fp;
        int later = 0;
        for (size_t j = 0; j < r->n_cells && !later; j++) {
            if (j == i || strcmp(r->cells[i].target, r->cells[j].target)) continue;
            const cal_fingerprint *b = &r->cells[j].fp;
            if (!cal_gate_same_config(a, b)) continue;
            int la = a->shot_last > a->shot_first ? a->shot_last : a->shot_first;
            int lb = b->shot_last > b->shot_first ? b->shot_last : b->shot_first;
            int wa = la - a->shot_first, wb = lb - b->shot_first;
            later = lb > la || (lb == la && (wb > wa || (wb == wa && j < i)));
        }
        if (!later) idx[n++] = i;
    }
    return n;
}

void cal_gate_cell_name(const cal_fingerprint *fp, char *buf, size_t n)
{
    char load[48], prompt[32] = "", shots[64];
    if (fp->concurrency > 0) snprintf(load, sizeof load, "c%d", fp->concurrency);
    else if (isinf(fp->request_rate)) snprintf(load, sizeof load, "all at once");
    else if (isfinite(fp->request_rate) && fp->request_rate > 0)
        cal_snprintf(load, sizeof load, "%g req/s", fp->request_rate);
    else snprintf(load, sizeof load, "concurrency ?");
    if (fp->prompt_tokens > 0) snprintf(prompt, sizeof prompt, " · %ld tok", fp->prompt_tokens);
    if (fp->shot_kind == CAL_SHOT_CONSECUTIVE) snprintf(shots, sizeof shots, "consecutive mean");
    else if (fp->shot_first > 0 && fp->shot_last > fp->shot_first)
        snprintf(shots, sizeof shots, "%s %d–%d", cal_shot_kind_name(fp->shot_kind), fp->shot_first,
                 fp->shot_last);
    else if (fp->shot_first > 0)
        snprintf(shots, sizeof shots, "%s %d", cal_shot_kind_name(fp->shot_kind), fp->shot_first);
    else snprintf(shots, sizeof shots, "%s", cal_shot_kind_name(fp->shot_kind));
    snprintf(buf, n, "%s%s · %s", load, prompt, shots);
}

