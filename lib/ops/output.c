/* caliper ops — the reconciliation as one JSON document (caliper.ops/1), and
 * the HTML report's section drawn from that document: a bar chart of time
 * per token by category for each side, the coverage line, the biggest gap. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/ops.h"

/* absent is null, never a made-up 0 */
static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int set(json_t *o, const char *k, json_t *v)
{
    return v && json_object_set_new(o, k, v) == 0 ? 0 : -1;
}

static json_t *side_json(const cal_ops_recon *r, const cal_ops_side *s)
{
    json_t *o = json_object(), *cats = json_array(), *un = json_array();
    int bad = !o || !cats || !un;
    const cal_ops_profile *p = s->p;
    bad |= set(o, "label", json_string(p->label)) | set(o, "source", json_string(p->source)) |
           set(o, "format", json_string(cal_ops_format_name(p->format))) |
           set(o, "tokens", num(p->tokens)) | set(o, "e2e_ns", num(p->e2e_ns)) |
           set(o, "threads", num(p->threads)) |
           set(o, "e2e_ms_per_token", num(s->e2e_ms_per_token)) |
           set(o, "kernel_ms_per_token", num(s->kernel_ms_per_token)) |
           set(o, "outside_ms_per_token", num(s->outside_ms_per_token)) |
           set(o, "coverage", num(s->coverage)) | set(o, "ceiling", num(s->ceiling)) |
           set(o, "calls_per_token", num(s->calls_per_token));
    for (size_t c = 0; !bad && c < r->n_cats; c++) {
        const cal_ops_cat *k = &s->cat[c];
        json_t *x = json_object();
        bad |= !x || set(x, "category", json_string(r->cats[c])) |
               set(x, "present", json_boolean(k->present)) |
               set(x, "time_ns", num(k->time_ns)) | set(x, "calls", num(k->calls)) |
               set(x, "ms_per_token", num(k->ms_per_token)) | set(x, "share", num(k->share)) |
               set(x, "calls_per_token", num(k->calls_per_token)) |
               set(x, "bytes_per_token", num(k->bytes_per_token)) |
               set(x, "GBps", num(k->Bps * 1e-9)) | set(x, "bw_fraction", num(k->bw_fraction)) |
               set(x, "flops_per_token", num(k->flops_per_token)) |
               set(x, "GFLOPps", num(k->flops_per_s * 1e-9));
        bad |= json_array_append_new(cats, x);
    }
    for (size_t i = 0; !bad && i < s->n_unmatched && i < sizeof s->unmatched / sizeof s->unmatched[0]; i++) {
        const cal_ops_op *op = &p->ops[s->unmatched[i]];
        json_t *x = json_object();
        bad |= !x || set(x, "op", json_string(op->name)) | set(x, "calls", num(op->calls)) |
               set(x, "time_ns", num(op->time_ns));
        bad |= json_array_append_new(un, x);
    }
    bad |= set(o, "categories", cats) | set(o, "unmatched", un) |
           set(o, "n_unmatched", json_integer((json_int_t)s->n_unmatched));
    if (bad) { json_decref(o); return NULL; }
    return o;
}

int cal_ops_to_json(const cal_ops_recon *r, const cal_ops_trap *trap, cal_buf *out)
{
    json_t *root = json_object(), *sides = json_array(), *cats = json_array(), *wi = json_array();
    int bad = !root || !sides || !cats || !wi;
    if (bad) { json_decref(root); json_decref(sides); json_decref(cats); json_decref(wi); return CAL_ENOMEM; }
    bad |= set(root, "format", json_string("caliper.ops/1"));
    for (size_t c = 0; r && c < r->n_cats; c++) bad |= json_array_append_new(cats, json_string(r->cats[c]));
    for (size_t s = 0; r && s < r->n_sides; s++) bad |= json_array_append_new(sides, side_json(r, &r->side[s]));
    bad |= set(root, "bandwidth_Bps", num(r && r->bandwidth_Bps > 0 ? r->bandwidth_Bps : NAN));
    bad |= set(root, "bandwidth_source", r && r->bandwidth_Bps > 0 ? json_string(r->bandwidth_source) : json_null());
    bad |= set(root, "categories", cats) | set(root, "sides", sides);
    if (r && r->n_sides == 2) {
        json_t *g = json_object(), *by = json_array();
        bad |= !g || !by;
        for (size_t i = 0; !bad && i < r->n_cats; i++) {
            size_t c = r->gap_order[i];
            json_t *x = json_object();
            bad |= !x || set(x, "category", json_string(r->cats[c])) | set(x, "ms_per_token", num(r->gap_ms[c]));
            bad |= json_array_append_new(by, x);
        }
        bad |= set(g, "total_ms_per_token", num(r->gap_total_ms)) |
               set(g, "kernel_ms_per_token", num(r->gap_kernel_ms)) |
               set(g, "outside_ms_per_token", num(r->gap_outside_ms)) |
               set(g, "by_category", by) | set(g, "biggest", json_string(r->biggest));
        bad |= set(root, "gap", g);
    }
    for (size_t w = 0; r && w < r->n_whatif; w++) {
        const cal_ops_whatif *x = &r->whatif[w];
        json_t *o = json_object(), *sh = json_array(), *e = json_array();
        bad |= !o || !sh || !e;
        for (size_t s = 0; !bad && s < r->n_sides; s++)
            bad |= json_array_append_new(sh, num(x->share[s])) | json_array_append_new(e, num(x->e2e[s]));
        bad |= set(o, "category", json_string(x->cat)) | set(o, "speedup", num(x->speedup)) |
               set(o, "share", sh) | set(o, "e2e_speedup", e);
        bad |= json_array_append_new(wi, o);
    }
    bad |= set(root, "what_if", wi);
    if (trap) {
        json_t *t = json_object(), *rows = json_array();
        bad |= !t || !rows;
        for (size_t i = 0; !bad && i < trap->n_rows; i++) {
            const cal_ops_trap_row *x = &trap->rows[i];
            json_t *o = json_object();
            bad |= !o || set(o, "op", json_string(x->op)) | set(o, "graph_call_ns", num(x->graph_call_ns)) |
                   set(o, "iso_call_ns", num(x->iso_call_ns)) | set(o, "undercount", num(x->undercount));
            bad |= json_array_append_new(rows, o);
        }
        bad |= set(t, "graph_tokens_per_step", num(trap->graph_tokens_per_step)) |
               set(t, "iso_tokens_per_call", num(trap->iso_tokens_per_call)) | set(t, "ops", rows) |
               set(t, "moe_undercount", trap->moe_row >= 0 ? num(trap->rows[trap->moe_row].undercount)
                                                           : json_null());
        bad |= set(root, "trap", t);
    }
    char *s = bad ? NULL : json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!s) return CAL_ENOMEM;
    int rc = cal_buf_puts(out, s);
    if (!rc) rc = cal_buf_puts(out, "\n");
    free(s);
    return rc;
}

/* ---- the report's section ---------------------------------------------------- */

static int esc(cal_buf *b, const char *s)
{
    for (; s && *s; s++) {
        int rc;
        switch (*s) {
        case '<': rc = cal_buf_puts(b, "&lt;"); break;
        case '>': rc = cal_buf_puts(b, "&gt;"); break;
        case '&': rc = cal_buf_puts(b, "&amp;"); break;
        case '"': rc = cal_buf_puts(b, "&quot;"); break;
        default: rc = cal_buf_append(b, s, 1);
        }
        if (rc) return rc;
    }
    return CAL_OK;
}

static double jd(const json_t *o, const char *k)
{
    const json_t *x = json_object_get(o, k);
    return json_is_number(x) ? json_number_value(x) : NAN;
}

static const char *js(const json_t *o, const char *k)
{
    const json_t *x = json_object_get(o, k);
    return json_is_string(x) ? json_string_value(x) : "";
}

#define TRY(x) do { if ((rc = (x))) goto out; } while (0)
static const char *const COLOR[2] = {"#2563eb", "#f97316"};

int cal_ops_html_section(const char *text, size_t len, cal_buf *out, char *err, size_t errn)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) return cal_why(err, errn, CAL_EPROTO, "not JSON (line %d: %s)", je.line, je.text);
    int rc = CAL_OK;
    const json_t *sides = json_object_get(root, "sides"), *cats = json_object_get(root, "categories");
    if (strcmp(js(root, "format"), "caliper.ops/1") || !json_is_array(sides) || !json_is_array(cats) ||
        json_array_size(sides) < 1 || json_array_size(sides) > 2 ||
        json_array_size(cats) > CAL_OPS_MAX_CATS) {
        rc = cal_why(err, errn, CAL_EPROTO, "not a caliper.ops/1 document (the JSON caliper ops writes)");
        goto out;
    }
    size_t ns = json_array_size(sides), nc = json_array_size(cats);
    /* rows: each category, then the time no kernel owns */
    double v[2][CAL_OPS_MAX_CATS + 1], vmax = 0;
    for (size_t s = 0; s < ns; s++) {
        const json_t *sd = json_array_get(sides, s), *sc = json_object_get(sd, "categories");
        for (size_t c = 0; c < nc; c++) {
            v[s][c] = jd(json_array_get(sc, c), "ms_per_token");
            if (isfinite(v[s][c]) && v[s][c] > vmax) vmax = v[s][c];
        }
        v[s][nc] = jd(sd, "outside_ms_per_token");
        if (isfinite(v[s][nc]) && v[s][nc] > vmax) vmax = v[s][nc];
    }
    TRY(cal_buf_puts(out, "<section class=\"ops\" id=\"ops\">\n<h2>Per-op reconciliation</h2>\n<ul class=\"ops-coverage\">\n"));
    for (size_t s = 0; s < ns; s++) {
        const json_t *sd = json_array_get(sides, s);
        TRY(cal_buf_puts(out, "<li>"));
        TRY(esc(out, js(sd, "label")));
        TRY(cal_buf_printf(out, ": %.4g ms/token end to end, coverage %.3f", jd(sd, "e2e_ms_per_token"),
                           jd(sd, "coverage")));
        double ceil = jd(sd, "ceiling");
        if (isfinite(ceil))
            TRY(cal_buf_printf(out, " (every known kernel at zero: at most %.3g&times;)", ceil));
        TRY(cal_buf_printf(out, ", %.4g ms/token in no kernel</li>\n", jd(sd, "outside_ms_per_token")));
    }
    TRY(cal_buf_puts(out, "</ul>\n"));
    const double W = 880, label_w = 150, bar_h = 12, row_h = ns * bar_h + 10, top = 24;
    double H = top + (double)(nc + 1) * row_h + 8, plot = W - label_w - 90;
    TRY(cal_buf_printf(out, "<figure class=\"wide\" id=\"chart-ops\"><h3>Time per token by category</h3>\n"
                            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
                            "font-family=\"system-ui,sans-serif\" font-size=\"11\">\n", W, H));
    for (size_t s = 0; s < ns; s++) {
        TRY(cal_buf_printf(out, "<rect x=\"%.0f\" y=\"6\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                                "<text x=\"%.0f\" y=\"15\">", label_w + (double)s * 260, COLOR[s],
                           label_w + (double)s * 260 + 14));
        TRY(esc(out, js(json_array_get(sides, s), "label")));
        TRY(cal_buf_puts(out, "</text>\n"));
    }
    for (size_t c = 0; c <= nc; c++) {
        double y = top + (double)c * row_h;
        TRY(cal_buf_printf(out, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", label_w - 8,
                           y + row_h / 2 + 2));
        TRY(esc(out, c < nc ? json_string_value(json_array_get(cats, c)) : "outside every kernel"));
        TRY(cal_buf_puts(out, "</text>\n"));
        for (size_t s = 0; s < ns; s++) {
            double x = v[s][c], w = isfinite(x) && vmax > 0 ? x / vmax * plot : 0;
            TRY(cal_buf_printf(out, "<rect class=\"bar\" data-side=\"%zu\" data-ms=\"%.6g\" x=\"%.0f\" y=\"%.1f\" "
                                    "width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>",
                               s, isfinite(x) ? x : 0.0, label_w, y + 4 + (double)s * bar_h,
                               w < 0 ? 0.0 : w, bar_h - 2, COLOR[s]));
            if (isfinite(x))
                TRY(cal_buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#444\">%.3g ms</text>",
                                   label_w + (w < 0 ? 0.0 : w) + 4, y + 4 + (double)s * bar_h + bar_h - 3, x));
            TRY(cal_buf_puts(out, "\n"));
        }
    }
    TRY(cal_buf_puts(out, "</svg>\n<figcaption><b>Per-token time by op category</b>, from each engine's own "
                          "per-op profile (<code>caliper ops --json</code>); bars add up, with the last row, "
                          "to the end-to-end time per token."));
    const json_t *gap = json_object_get(root, "gap");
    if (gap && *js(gap, "biggest")) {
        TRY(cal_buf_puts(out, " "));
        char first[300];
        snprintf(first, sizeof first, "%s", js(gap, "biggest"));
        if (first[0] >= 'a' && first[0] <= 'z') first[0] = (char)(first[0] - 'a' + 'A');
        TRY(esc(out, first));
        TRY(cal_buf_puts(out, "."));
    }
    TRY(cal_buf_puts(out, "</figcaption></figure>\n</section>\n"));
out:
    json_decref(root);
    return rc;
}
