/* caliper ops — the reconciliation: per-category sums per token, coverage
 * and its ceiling, Amdahl what-ifs and the gap between two engines split
 * into the part inside kernels and the part that belongs to none (SPEC 1.4,
 * through lib/analysis/formulas.c); and the single-op trap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "caliper/ops.h"
#include "lib/util/c_locale.h"

/* Rows in this order first (the list), then any others as found. */
static const char *const CANON[] = {
    "attention", "dense_proj", "moe", "norm", "rope", "elementwise", "transpose_copy",
    "embedding", "sampling", "other",
};

int cal_ops_recon_cat(const cal_ops_recon *r, const char *name)
{
    for (size_t i = 0; i < r->n_cats; i++)
        if (!strcmp(r->cats[i], name)) return (int)i;
    return -1;
}

static int cat_index(cal_ops_recon *r, const char *name, char *err, size_t errn)
{
    int i = cal_ops_recon_cat(r, name);
    if (i >= 0) return i;
    if (r->n_cats >= CAL_OPS_MAX_CATS)
        return cal_why(err, errn, CAL_ETOOBIG, "more than %d categories", CAL_OPS_MAX_CATS);
    snprintf(r->cats[r->n_cats], CAL_OPS_CAT_MAX, "%s", name);
    return (int)r->n_cats++;
}

static void add_known(double *sum, double x)
{
    if (isnan(x)) return;
    *sum = isnan(*sum) ? x : *sum + x;
}

static int check_side(const cal_ops_profile *p, char *err, size_t errn)
{
    if (p->format == CAL_OPS_OPBENCH)
        return cal_why(err, errn, CAL_EINVAL, "%s: an op bench is not a run; set it against an "
                       "in-graph profile as its isolated op bench", p->label);
    if (!(p->tokens > 0))
        return cal_why(err, errn, CAL_EINVAL, "%s: tokens %s", p->label,
                       isnan(p->tokens) ? "unknown" : "is 0");
    if (!(p->e2e_ns > 0))
        return cal_why(err, errn, CAL_EINVAL, "%s: end-to-end time %s", p->label, isnan(p->e2e_ns) ? "unknown" : "is 0");
    return CAL_OK;
}

/* First pass: every category either side has, canonical ones first. */
static int collect_cats(cal_ops_recon *r, const cal_ops_profile *const *ps, size_t n,
                        const cal_ops_map *map, char *err, size_t errn)
{
    char seen[CAL_OPS_MAX_CATS][CAL_OPS_CAT_MAX];
    size_t ns = 0;
    int unmatched = 0;
    for (size_t s = 0; s < n; s++)
        for (size_t i = 0; i < ps[s]->n_ops; i++) {
            const char *c = cal_ops_map_category(map, ps[s]->ops[i].name);
            if (!c) { unmatched = 1; continue; }
            size_t k = 0;
            while (k < ns && strcmp(seen[k], c)) k++;
            if (k == ns) {
                if (ns >= CAL_OPS_MAX_CATS)
                    return cal_why(err, errn, CAL_ETOOBIG, "more than %d categories", CAL_OPS_MAX_CATS);
                snprintf(seen[ns++], CAL_OPS_CAT_MAX, "%s", c);
            }
        }
    for (size_t k = 0; k < sizeof CANON / sizeof CANON[0]; k++)
        for (size_t j = 0; j < ns; j++)
            if (!strcmp(seen[j], CANON[k]) && cat_index(r, CANON[k], err, errn) < 0) return CAL_ETOOBIG;
    for (size_t j = 0; j < ns; j++)
        if (cat_index(r, seen[j], err, errn) < 0) return CAL_ETOOBIG;
    if (unmatched && cat_index(r, CAL_OPS_UNMATCHED, err, errn) < 0) return CAL_ETOOBIG;
    return CAL_OK;
}

static int fill_side(cal_ops_recon *r, cal_ops_side *sd, const cal_ops_profile *p,
                     const cal_ops_map *map, char *err, size_t errn)
{
    memset(sd, 0, sizeof *sd);
    sd->p = p;
    for (size_t c = 0; c < r->n_cats; c++) {
        cal_ops_cat *k = &sd->cat[c];
        k->bytes = k->flops = NAN;
    }
    double kernel_ns = 0, calls = 0;
    for (size_t i = 0; i < p->n_ops; i++) {
        const cal_ops_op *op = &p->ops[i];
        const char *c = cal_ops_map_category(map, op->name);
        if (!c) {
            if (sd->n_unmatched < sizeof sd->unmatched / sizeof sd->unmatched[0])
                sd->unmatched[sd->n_unmatched] = i;
            sd->n_unmatched++;
            c = CAL_OPS_UNMATCHED;
        }
        cal_ops_cat *k = &sd->cat[cal_ops_recon_cat(r, c)];
        k->present = 1;
        k->time_ns += op->time_ns;
        k->calls += op->calls;
        add_known(&k->bytes, op->bytes);
        add_known(&k->flops, op->flops);
        kernel_ns += op->time_ns;
        calls += op->calls;
    }
    double T = p->tokens, e2e_s = p->e2e_ns * 1e-9;
    /* rounding in a trace's µs can put the sum a hair above the span */
    if (kernel_ns > p->e2e_ns && kernel_ns <= p->e2e_ns * (1 + 1e-9)) kernel_ns = p->e2e_ns;
    const char *bad = NULL;
    if (cal_f_coverage(kernel_ns * 1e-9, e2e_s, &sd->coverage, &bad) != CAL_OK)
        return cal_why(err, errn, CAL_ERANGE, "%s: the ops add up to %.6g ms, more than the end to end "
                       "%.6g ms: overlapping ops (a trace with several streams or threads) or the "
                       "wrong end to end", p->label, kernel_ns * 1e-6, p->e2e_ns * 1e-6);
    if (cal_f_coverage_ceiling(sd->coverage, &sd->ceiling, &bad) != CAL_OK) sd->ceiling = NAN;
    sd->e2e_ms_per_token = p->e2e_ns * 1e-6 / T;
    sd->kernel_ms_per_token = kernel_ns * 1e-6 / T;
    sd->outside_ms_per_token = (p->e2e_ns - kernel_ns) * 1e-6 / T;
    sd->calls_per_token = calls / T;
    for (size_t c = 0; c < r->n_cats; c++) {
        cal_ops_cat *k = &sd->cat[c];
        k->ms_per_token = k->time_ns * 1e-6 / T;
        k->share = k->time_ns / p->e2e_ns;
        k->calls_per_token = k->calls / T;
        k->bytes_per_token = k->bytes / T;
        k->flops_per_token = k->flops / T;
        k->Bps = k->time_ns > 0 ? k->bytes / (k->time_ns * 1e-9) : NAN;
        k->flops_per_s = k->time_ns > 0 ? k->flops / (k->time_ns * 1e-9) : NAN;
        k->bw_fraction = r->bandwidth_Bps > 0 ? k->Bps / r->bandwidth_Bps : NAN;
    }
    return CAL_OK;
}

/* r->gap_order: categories by |gap|, largest first, ties in row order
 * (an insertion sort: at most CAL_OPS_MAX_CATS rows, and no global state) */
static void sort_gaps(cal_ops_recon *r)
{
    for (size_t i = 0; i < r->n_cats; i++) {
        size_t c = r->gap_order[i], j = i;
        while (j > 0 && fabs(r->gap_ms[r->gap_order[j - 1]]) < fabs(r->gap_ms[c])) {
            r->gap_order[j] = r->gap_order[j - 1];
            j--;
        }
        r->gap_order[j] = c;
    }
}

int cal_ops_reconcile(const cal_ops_profile *a, const cal_ops_profile *b,
                      const cal_ops_map *map, const cal_ops_opts *o,
                      cal_ops_recon *out, char *err, size_t errn)
{
    if (!a || !map || !out) return cal_why(err, errn, CAL_EINVAL, "no profile");
    int rc;
    if ((rc = check_side(a, err, errn)) || (b && (rc = check_side(b, err, errn)))) return rc;
    cal_ops_recon *r = calloc(1, sizeof *r);
    if (!r) return cal_why(err, errn, CAL_ENOMEM, "out of memory");
    const cal_ops_profile *ps[2] = {a, b};
    r->n_sides = b ? 2 : 1;
    if (o && o->bandwidth_Bps > 0) {
        r->bandwidth_Bps = o->bandwidth_Bps;
        snprintf(r->bandwidth_source, sizeof r->bandwidth_source, "%s",
                 o->bandwidth_source ? o->bandwidth_source : "given");
    }
    if ((rc = collect_cats(r, ps, r->n_sides, map, err, errn))) goto fail;
    for (size_t s = 0; s < r->n_sides; s++)
        if ((rc = fill_side(r, &r->side[s], ps[s], map, err, errn))) goto fail;
    if (r->n_sides == 2) {
        for (size_t c = 0; c < r->n_cats; c++) {
            r->gap_ms[c] = r->side[0].cat[c].ms_per_token - r->side[1].cat[c].ms_per_token;
            r->gap_order[c] = c;
            r->gap_kernel_ms += r->gap_ms[c];
        }
        sort_gaps(r);
        r->gap_total_ms = r->side[0].e2e_ms_per_token - r->side[1].e2e_ms_per_token;
        r->gap_outside_ms = r->side[0].outside_ms_per_token - r->side[1].outside_ms_per_token;
        /* the biggest single item: a category, or the time no kernel owns */
        size_t top = r->gap_order[0];
        int outside = fabs(r->gap_outside_ms) > fabs(r->gap_ms[top]);
        double g = outside ? r->gap_outside_ms : r->gap_ms[top];
        cal_snprintf(r->biggest, sizeof r->biggest,
                     "the biggest gap is %s: %.3g ms/token of %.3g (%s %s)",
                     outside ? "outside every kernel" : r->cats[top], fabs(g), fabs(r->gap_total_ms),
                     g >= 0 ? a->label : b->label, "spends more there");
    }
    for (size_t w = 0; o && w < o->n_whatif && w < CAL_OPS_MAX_WHATIF; w++) {
        cal_ops_whatif *wi = &r->whatif[r->n_whatif];
        *wi = o->whatif[w];
        int c = cal_ops_recon_cat(r, wi->cat);
        if (c < 0) {
            rc = cal_why(err, errn, CAL_ENOTFOUND, "what-if: no category \"%s\" in %s", wi->cat,
                         r->n_sides == 2 ? "either profile" : "the profile");
            goto fail;
        }
        for (size_t s = 0; s < 2; s++) {
            wi->share[s] = wi->e2e[s] = NAN;
            if (s >= r->n_sides) continue;
            const char *bad = NULL;
            wi->share[s] = r->side[s].cat[c].share;
            if (cal_f_amdahl(wi->speedup, wi->share[s], &wi->e2e[s], &bad) != CAL_OK) {
                rc = cal_why(err, errn, CAL_EINVAL, "what-if %s=%gx: %s out of range", wi->cat,
                             wi->speedup, bad ? bad : "?");
                goto fail;
            }
        }
        r->n_whatif++;
    }
    *out = *r;
    /* the sides point at the callers' profiles, not into r */
    free(r);
    return CAL_OK;
fail:
    free(r);
    return rc;
}

/* ---- the single-op trap --------------------------------------------------------- */

static const cal_ops_op *find_op(const cal_ops_profile *p, const char *name)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (!strcmp(p->ops[i].name, name)) return &p->ops[i];
    return NULL;
}

int cal_ops_trap_compare(const cal_ops_profile *graph, const cal_ops_profile *bench,
                         cal_ops_trap *out, char *err, size_t errn)
{
    if (!graph || !bench || !out) return cal_why(err, errn, CAL_EINVAL, "no profile");
    if (bench->format != CAL_OPS_OPBENCH)
        return cal_why(err, errn, CAL_EINVAL, "%s: not an op bench (the built-in engine's op-bench output)", bench->label);
    if (graph->format != CAL_OPS_ENGINE)
        return cal_why(err, errn, CAL_EINVAL, "%s: not an engine profile (the built-in engine's profile output)",
                       graph->label);
    memset(out, 0, sizeof *out);
    out->moe_row = -1;
    out->graph_tokens_per_step = graph->steps > 0 ? graph->tokens / graph->steps : NAN;
    out->iso_tokens_per_call = bench->step_tokens;
    double moe_g = 0, moe_i = 0;
    int moe_parts = 0;
    for (size_t i = 0; i < bench->n_ops && out->n_rows < 31; i++) {
        const cal_ops_op *bi = &bench->ops[i];
        const cal_ops_op *gi = find_op(graph, bi->name);
        if (!gi || !(gi->calls > 0) || !(bi->calls > 0) || !(bi->time_ns > 0)) continue;
        cal_ops_trap_row *row = &out->rows[out->n_rows++];
        snprintf(row->op, sizeof row->op, "%s", bi->name);
        row->graph_call_ns = gi->time_ns / gi->calls;
        /* the mean, as the in-graph figure is: a median would drop the
         * preemptions and stalls the in-graph sum keeps */
        row->iso_call_ns = bi->time_ns / bi->calls;
        row->undercount = 1.0 - row->iso_call_ns / row->graph_call_ns;
        /* the MoE block per layer: one router call and one experts call */
        if (!strcmp(bi->name, "moe_router") || !strcmp(bi->name, "moe_experts")) {
            moe_g += row->graph_call_ns;
            moe_i += row->iso_call_ns;
            moe_parts++;
        }
    }
    if (moe_parts == 2) {
        cal_ops_trap_row *row = &out->rows[out->n_rows];
        snprintf(row->op, sizeof row->op, "MoE block");
        row->graph_call_ns = moe_g;
        row->iso_call_ns = moe_i;
        row->undercount = 1.0 - moe_i / moe_g;
        out->moe_row = (int)out->n_rows++;
    }
    if (out->n_rows == 0)
        return cal_why(err, errn, CAL_ENOTFOUND, "%s and %s have no op in common", graph->label, bench->label);
    return CAL_OK;
}
