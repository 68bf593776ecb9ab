/* caliper — the ranking of many results within their protocol groups as
 * Markdown (include/caliper/fpgroup.h), and the report writer with
 * compare's marks on the results: the grouping first, then each result. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/fpgroup.h"
#include "gate_internal.h"
#include "report_internal.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) return e_; } while (0)

/* ---- Markdown ---------------------------------------------------------------- */

int cal_fpgroups_md(const cal_result *const *res, size_t n, const cal_fpgroups *g, cal_buf *out)
{
    if (n < 2 || !g->n_groups) return CAL_OK;
    TRY(cal_buf_printf(out, "# Engines side by side\n\n%zu results in %zu protocol group%s; a rank "
                            "holds within its group only.\n\n", n, g->n_groups, g->n_groups == 1 ? "" : "s"));
    for (size_t j = 0; j < n; j++)
        if (g->flags[j][0]) {
            TRY(cal_buf_puts(out, "- ⚠ "));
            TRY(cal_report_md_esc(out, res[j]->label));
            TRY(cal_buf_puts(out, ": "));
            TRY(cal_report_md_esc(out, g->flags[j]));
            TRY(cal_buf_puts(out, "\n"));
        }
    size_t *order = malloc(CAL_CMP_MAX * 256 * sizeof *order);
    if (!order) return CAL_ENOMEM;
    int e = CAL_OK;
    for (size_t gi = 0; gi < g->n_groups && !e; gi++) {
        const cal_fpgroup *gr = &g->g[gi];
        char proto[700];
        cal_fp_describe(&gr->fp, proto, sizeof proto);
        e = cal_buf_printf(out, "\n## Group %zu · ", gi + 1);
        if (!e) e = cal_report_md_esc(out, gr->name);
        if (!e) e = cal_buf_puts(out, "\n\nProtocol: ");
        if (!e) e = cal_report_md_esc(out, proto);
        if (!e && gr->differs[0]) {
            e = cal_buf_puts(out, ". Differs from group 1: ");
            if (!e) e = cal_report_md_esc(out, gr->differs);
        }
        if (!e) e = cal_buf_puts(out, ".\n");
        for (size_t k = 0; k < CAL_FPGROUP_N_METRICS && !e; k++) {
            cal_metric m = CAL_FPGROUP_METRICS[k];
            const cal_field *f = cal_metric_get(m);
            size_t have = cal_fpgroup_rank(res, gr, m, order);
            if (!have) continue;
            e = cal_buf_printf(out, "\n| rank | engine | %s%s%s |\n|---:|---|---:|\n", f->label,
                               strstr(f->label, f->unit) ? "" : " ", strstr(f->label, f->unit) ? "" : f->unit);
            for (size_t i = 0; i < gr->n && !e; i++) {
                const cal_fpmember *mm = &gr->m[order[i]];
                double v = res[mm->result]->cells[mm->cell].v[m];
                if (isfinite(v)) e = cal_buf_printf(out, "| %zu | ", i + 1);
                else e = cal_buf_puts(out, "| — | ");
                if (!e) e = cal_report_md_esc(out, mm->name);
                if (!e && g->flags[mm->result][0]) e = cal_buf_puts(out, " ⚠");
                if (!e && isfinite(v)) e = cal_buf_printf(out, " | %.*f |\n", f->decimals, v);
                else if (!e) e = cal_buf_puts(out, " | not measured |\n");
            }
        }
    }
    free(order);
    if (!e) e = cal_buf_puts(out, "\n");
    return e;
}

int cal_report_write_marked(const cal_result *const *res, size_t n, cal_report_format fmt,
                            const char *extra_html, const cal_fpmarks *marks, cal_buf *out)
{
    if (!out || (!n && !(fmt == CAL_REPORT_HTML && extra_html)) || (n && !res)) return CAL_EINVAL;
    switch (fmt) {
    case CAL_REPORT_HTML: return cal_report_html_marked(res, n, extra_html, marks, out);
    case CAL_REPORT_MD: {
        /* many results: grouped by protocol, ranked within a group only */
        if (n >= 2) {
            cal_fpgroups g;
            int e = cal_fpgroups_make(res, n, marks, &g);
            if (!e) e = cal_fpgroups_md(res, n, &g, out);
            cal_fpgroups_free(&g);
            if (e) return e;
        }
        return cal_report_write(res, n, CAL_REPORT_MD, out);
    }
    default:              return cal_report_write(res, n, fmt, out);
    }
}
