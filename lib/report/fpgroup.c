/* caliper fpgroup (include/caliper/fpgroup.h): results grouped by the
 * protocol fingerprint of their quoted cells, ranked within a group only,
 * compare's stale and version marks, and the ranking as Markdown. The HTML
 * section is html_groups.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/fpgroup.h"
#include "caliper/protocol.h"
#include "gate_internal.h"
#include "lib/util/json.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) return e_; } while (0)

void cal_fpmarks_default(cal_fpmarks *m)
{
    memset(m, 0, sizeof *m);
    m->stale_s = 30 * 86400.0;
}

int cal_fpmarks_now(cal_fpmarks *m, const cal_result *const *res, size_t n, const char *url,
                    char *err, size_t errn)
{
    char now[CAL_RES_STR];
    int e = cal_target_models(url, NULL, 0, now, sizeof now, NULL);
    if (e) {
        cal_report_errf(err, errn, "\"%s\" did not say which model it serves (%s)", url, cal_strerror(e));
        return e;
    }
    for (size_t j = 0; j < n && j < CAL_CMP_MAX; j++) {
        const cal_result *r = res[j];
        if (!r->target_version[0] || !strcmp(r->target_version, r->label) ||
            !strcmp(r->target_version, now))
            continue;
        char *f = m->extra[j];
        size_t used = strlen(f);
        snprintf(f + used, sizeof m->extra[j] - used,
                 "%sengine version %.60s, but %.60s now answers as %.60s: re-measure this baseline",
                 used ? "; " : "", r->target_version, url, now);
    }
    return CAL_OK;
}

void cal_fpgroups_free(cal_fpgroups *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n_groups; i++) free(g->g[i].m);
    free(g->g);
    g->g = NULL;
    g->n_groups = 0;
}

static size_t engines_in(const cal_fpgroup *g)
{
    return g->n;
}

static int add_member(cal_fpgroup *g, size_t r, size_t c, const cal_result *res)
{
    cal_fpmember *m = realloc(g->m, (g->n + 1) * sizeof *m);
    if (!m) return CAL_ENOMEM;
    g->m = m;
    cal_fpmember *x = &g->m[g->n++];
    x->result = r;
    x->cell = c;
    const char *t = res->cells[c].target;
    snprintf(x->name, sizeof x->name, "%s%s%s", res->label, t[0] ? " · " : "", t);
    return CAL_OK;
}

int cal_fpgroups_make(const cal_result *const *res, size_t n, const cal_fpmarks *marks,
                      cal_fpgroups *out)
{
    memset(out, 0, sizeof *out);
    if (!res || n < 1 || n > CAL_CMP_MAX) return CAL_EINVAL;
    cal_fpmarks dm;
    if (!marks) { cal_fpmarks_default(&dm); marks = &dm; }
    out->n_results = n;
    /* the marks: compare's own rules (stale age, another engine version
     * beside a same-named engine), then the caller's (--now) */
    if (n >= 2) {
        cal_compare_opts co = {0};
        co.stale_s = marks->stale_s;
        co.now_unix = marks->now_unix;
        co.boot_iters = -1;
        co.metrics = 1ull << CAL_M_AGG_TOKS;
        cal_comparison *c = NULL;
        if (cal_compare(res, n, &co, &c) == CAL_OK) {
            for (size_t j = 0; j < n; j++) {
                out->stale[j] = c->stale[j];
                snprintf(out->flags[j], sizeof out->flags[j], "%s", c->flags[j]);
            }
            cal_comparison_free(&c);
        }
    }
    for (size_t j = 0; j < n; j++)
        if (marks->extra[j][0]) {
            size_t used = strlen(out->flags[j]);
            snprintf(out->flags[j] + used, sizeof out->flags[j] - used, "%s%s", used ? "; " : "",
                     marks->extra[j]);
        }
    size_t cap = 0;
    int e = CAL_OK;
    for (size_t r = 0; r < n && !e; r++) {
        size_t q[256];
        size_t nq = cal_gate_quoted_cells(res[r], q, 256);
        for (size_t k = 0; k < nq && !e; k++) {
            cal_fingerprint fp = res[r]->cells[q[k]].fp;
            fp.column = CAL_COL_AGGREGATE;
            fp.slo[0] = '\0';   /* the SLO changes goodput alone (compare.c) */
            size_t gi = 0;
            while (gi < out->n_groups && cal_fp_diff(&out->g[gi].fp, &fp, NULL, 0)) gi++;
            if (gi == out->n_groups) {
                if (out->n_groups == cap) {
                    size_t want = cap ? 2 * cap : 8;
                    cal_fpgroup *g = realloc(out->g, want * sizeof *g);
                    if (!g) { e = CAL_ENOMEM; break; }
                    out->g = g;
                    cap = want;
                }
                cal_fpgroup *g = &out->g[out->n_groups++];
                memset(g, 0, sizeof *g);
                g->fp = fp;
                cal_gate_cell_name(&fp, g->name, sizeof g->name);
            }
            e = add_member(&out->g[gi], r, q[k], res[r]);
        }
    }
    if (e) { cal_fpgroups_free(out); return e; }
    /* the group with most engines first; first seen first among equals */
    for (size_t i = 1; i < out->n_groups; i++) {
        cal_fpgroup t = out->g[i];
        size_t j = i;
        while (j > 0 && engines_in(&out->g[j - 1]) < engines_in(&t)) { out->g[j] = out->g[j - 1]; j--; }
        out->g[j] = t;
    }
    for (size_t i = 1; i < out->n_groups; i++) {
        cal_fp_difference d[CAL_FPF__N];
        size_t nd = cal_fp_diff(&out->g[0].fp, &out->g[i].fp, d, CAL_FPF__N);
        cal_fp_diff_text(d, nd, out->g[i].differs, sizeof out->g[i].differs);
    }
    return CAL_OK;
}

static const cal_result *const *g_res;   /* qsort has no context argument in C11 */
static const cal_fpgroup *g_grp;
static cal_metric g_met;
static int g_low;

static int rank_cmp(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    const cal_fpmember *ma = &g_grp->m[a], *mb = &g_grp->m[b];
    double va = g_res[ma->result]->cells[ma->cell].v[g_met];
    double vb = g_res[mb->result]->cells[mb->cell].v[g_met];
    int fa = isfinite(va), fb = isfinite(vb);
    if (fa != fb) return fa ? -1 : 1;
    if (fa && va != vb) return (g_low ? va < vb : va > vb) ? -1 : 1;
    return a < b ? -1 : a > b;
}

size_t cal_fpgroup_rank(const cal_result *const *res, const cal_fpgroup *g, cal_metric m,
                        size_t *order)
{
    size_t have = 0;
    for (size_t i = 0; i < g->n; i++) {
        order[i] = i;
        have += isfinite(res[g->m[i].result]->cells[g->m[i].cell].v[m]) != 0;
    }
    cal_better b = cal_metric_get(m)->better;
    if (b == CAL_BETTER_NONE || g->n < 2) return have;
    g_res = res;
    g_grp = g;
    g_met = m;
    g_low = b == CAL_BETTER_LOWER;
    qsort(order, g->n, sizeof *order, rank_cmp);
    g_res = NULL;
    g_grp = NULL;
    return have;
}

/* The metrics the side-by-side views rank by, in order. */
const cal_metric CAL_FPGROUP_METRICS[] = {CAL_M_REQ_TOKS, CAL_M_AGG_TOKS, CAL_M_DECODE_TOKS,
                                          CAL_M_TTFT_P50, CAL_M_E2E_P99};
const size_t CAL_FPGROUP_N_METRICS = sizeof CAL_FPGROUP_METRICS / sizeof CAL_FPGROUP_METRICS[0];
