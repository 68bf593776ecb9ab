/* caliper gate — the outputs a CI system reads (include/caliper/gate.h):
 * GitHub-flavoured Markdown for a pull-request comment or the job summary,
 * JUnit XML (one testcase per metric and cell) and caliper's JSON. Every
 * number at its schema field's decimals; every text escaped for its format. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/utf8.h"
#include "report_internal.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) return e_; } while (0)

static const char *mark(cal_gate_kind k)
{
    switch (k) {
    case CAL_GATE_REGRESSION: return "❌";
    case CAL_GATE_IMPROVEMENT: return "🟢";
    case CAL_GATE_NO_CHANGE: return "✅";
    default: return "⚠️";
    }
}

static const char *answer_words(cal_gate_kind k)
{
    switch (k) {
    case CAL_GATE_REGRESSION: return "regression";
    case CAL_GATE_IMPROVEMENT: return "improvement";
    case CAL_GATE_NO_CHANGE: return "no change larger than the bound";
    default: return "cannot judge";
    }
}

static void num(double v, cal_metric m, char *buf, size_t n)
{
    if (!isfinite(v)) snprintf(buf, n, "—");
    else if (fabs(v) >= 1e12) cal_snprintf(buf, n, "%.4g", v);
    else cal_snprintf(buf, n, "%.*f", cal_metric_get(m)->decimals, v);
}

static void bound_words(const cal_gate_case *c, char *buf, size_t n)
{
    cal_snprintf(buf, n, "%s%g %%", c->lower_better ? "+" : "−", 100 * c->bound.bound);
}

static void change_ci(const cal_gate_case *c, double alpha, char *buf, size_t n)
{
    int pct = (int)lround(100 * (1 - 2 * alpha));
    if (!isfinite(c->effect)) snprintf(buf, n, "—");
    else if (!isfinite(c->lo) || !isfinite(c->hi))
        cal_snprintf(buf, n, "%+.1f %% (%d %% CI unbounded)", 100 * c->effect, pct);
    else
        cal_snprintf(buf, n, "%+.1f %% (%d %% CI %+.1f to %+.1f %%)", 100 * c->effect, pct,
                     100 * c->lo, 100 * c->hi);
}

static void evidence(const cal_gate_input *in, const cal_gate_outcome *o, char *buf, size_t n)
{
    size_t pairs = 0;
    for (size_t i = 0; i < in->n_cells; i++) if (in->cells[i].n_pairs > pairs) pairs = in->cells[i].n_pairs;
    if (in->design == CAL_GATE_PAIRED)
        cal_snprintf(buf, n, "paired (one A/B run, %zu shot pairs): Wilcoxon signed-rank on the paired "
                     "log ratios, Hodges–Lehmann estimate; regressions called with Holm's step-down "
                     "at %g %% family-wise over %zu tests, no change by two one-sided tests at %g %%",
                     pairs, 100 * o->alpha, o->n_cases, 100 * o->alpha);
    else
        cal_snprintf(buf, n, "separate runs: t on the two runs' levels with the run-to-run noise of "
                     "their stored series; regressions called with Holm's step-down at %g %% "
                     "family-wise over %zu tests, no change by two one-sided tests at %g %%",
                     100 * o->alpha, o->n_cases, 100 * o->alpha);
}

/* ---- Markdown --------------------------------------------------------------- */

int cal_gate_write_md(const cal_gate_input *in, const cal_gate_outcome *o, cal_buf *b)
{
    const char *head = o->verdict == CAL_GATE_FAIL ? "❌ fail" : o->verdict == CAL_GATE_UNDECIDED
                       ? "⚠️ cannot judge" : "✅ pass";
    TRY(cal_buf_printf(b, "## caliper gate: %s\n\n", head));
    TRY(cal_report_md_esc(b, o->summary));
    TRY(cal_buf_puts(b, "\n\n**Baseline** "));
    TRY(cal_report_md_esc(b, in->base_label));
    TRY(cal_buf_puts(b, " · **Candidate** "));
    TRY(cal_report_md_esc(b, in->cand_label));
    if (in->host[0]) { TRY(cal_buf_puts(b, " · host ")); TRY(cal_report_md_esc(b, in->host)); }
    if (in->probe[0]) { TRY(cal_buf_puts(b, " · probe ")); TRY(cal_report_md_esc(b, in->probe)); }
    TRY(cal_buf_puts(b, "\n\n| | metric · cell | bound | baseline | candidate | change | answer |\n"
                        "|---|---|---:|---:|---:|---|---|\n"));
    for (size_t i = 0; i < o->n_cases; i++) {
        const cal_gate_case *c = &o->cases[i];
        char bw[32], va[32], vb[32], ch[96];
        bound_words(c, bw, sizeof bw);
        num(c->base, c->bound.metric, va, sizeof va);
        num(c->cand, c->bound.metric, vb, sizeof vb);
        change_ci(c, o->alpha, ch, sizeof ch);
        TRY(cal_buf_printf(b, "| %s | ", mark(c->kind)));
        TRY(cal_report_md_esc(b, c->label));
        TRY(cal_buf_printf(b, " | %s | %s | %s | %s | %s |\n", bw, va, vb, ch, answer_words(c->kind)));
    }
    char ev[600];
    evidence(in, o, ev, sizeof ev);
    TRY(cal_buf_puts(b, "\n<details><summary>How each answer was reached</summary>\n\n"));
    for (size_t i = 0; i < o->n_cases; i++) {
        TRY(cal_buf_puts(b, "- **"));
        TRY(cal_report_md_esc(b, o->cases[i].label));
        TRY(cal_buf_puts(b, "**: "));
        TRY(cal_report_md_esc(b, o->cases[i].text));
        TRY(cal_buf_puts(b, "\n"));
    }
    TRY(cal_buf_puts(b, "\nMethod: "));
    TRY(cal_report_md_esc(b, ev));
    if (in->noise[0]) { TRY(cal_buf_puts(b, ". ")); TRY(cal_report_md_esc(b, in->noise)); }
    if (in->n_cells) {
        char proto[700];
        cal_fp_describe(&in->cells[0].fp, proto, sizeof proto);
        TRY(cal_buf_puts(b, ".\n\nProtocol: "));
        TRY(cal_report_md_esc(b, proto));
    }
    return cal_buf_puts(b, ".\n\n</details>\n");
}

/* ---- JUnit XML ------------------------------------------------------------ */

/* XML 1.0 text: the five entities escaped, control characters XML cannot
 * hold dropped, bytes that are not UTF-8 replaced by '?'. */
static int xml_esc(cal_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0, i = 0;
    while (i < n) {
        size_t ok = i + cal_utf8_check(s + i, n - i);
        for (; i < ok; i++) {
            unsigned char ch = (unsigned char)s[i];
            switch (ch) {
            case '&': TRY(cal_buf_puts(b, "&amp;")); break;
            case '<': TRY(cal_buf_puts(b, "&lt;")); break;
            case '>': TRY(cal_buf_puts(b, "&gt;")); break;
            case '"': TRY(cal_buf_puts(b, "&quot;")); break;
            case '\'': TRY(cal_buf_puts(b, "&apos;")); break;
            default:
                if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') break;
                TRY(cal_buf_append(b, s + i, 1));
            }
        }
        if (i < n) { TRY(cal_buf_puts(b, "?")); i++; }
    }
    return CAL_OK;
}

static int prop(cal_buf *b, const char *name, const char *value)
{
    TRY(cal_buf_printf(b, "      <property name=\"%s\" value=\"", name));
    TRY(xml_esc(b, value));
    return cal_buf_puts(b, "\"/>\n");
}

int cal_gate_write_junit(const cal_gate_input *in, const cal_gate_outcome *o, int cannot_fails,
                         cal_buf *b)
{
    size_t failures = o->n_regression + (cannot_fails ? o->n_cannot : 0);
    size_t skipped = cannot_fails ? 0 : o->n_cannot;
    char when[40] = "";
    int64_t t = in->cand_unix > 0 ? in->cand_unix : (int64_t)time(NULL);
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    TRY(cal_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<testsuites name=\"caliper gate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" "
                          "time=\"0\">\n", o->n_cases, failures));
    TRY(cal_buf_puts(b, "  <testsuite name=\""));
    char name[2 * CAL_RES_STR + 32];
    snprintf(name, sizeof name, "caliper gate: %s vs %s", in->base_label, in->cand_label);
    TRY(xml_esc(b, name));
    TRY(cal_buf_printf(b, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"0\" "
                          "timestamp=\"%s\">\n    <properties>\n", o->n_cases, failures, skipped, when));
    char ev[600], a[32];
    TRY(prop(b, "verdict", cal_gate_verdict_name(o->verdict)));
    TRY(prop(b, "summary", o->summary));
    TRY(prop(b, "design", cal_gate_design_name(in->design)));
    cal_snprintf(a, sizeof a, "%g", o->alpha);
    TRY(prop(b, "alpha", a));
    TRY(prop(b, "baseline", in->base_label));
    TRY(prop(b, "candidate", in->cand_label));
    evidence(in, o, ev, sizeof ev);
    TRY(prop(b, "method", ev));
    if (in->noise[0]) TRY(prop(b, "noise", in->noise));
    if (in->n_cells) {
        char proto[700];
        cal_fp_describe(&in->cells[0].fp, proto, sizeof proto);
        TRY(prop(b, "protocol", proto));
    }
    TRY(cal_buf_puts(b, "    </properties>\n"));
    for (size_t i = 0; i < o->n_cases; i++) {
        const cal_gate_case *c = &o->cases[i];
        TRY(cal_buf_puts(b, "    <testcase name=\""));
        TRY(xml_esc(b, c->label));
        TRY(cal_buf_printf(b, "\" classname=\"caliper.gate.%s\" time=\"0\">\n",
                           cal_metric_get(c->bound.metric)->name));
        if (c->kind == CAL_GATE_REGRESSION || (c->kind == CAL_GATE_CANNOT && cannot_fails)) {
            TRY(cal_buf_printf(b, "      <failure type=\"%s\" message=\"", cal_gate_kind_name(c->kind)));
            TRY(xml_esc(b, c->text));
            TRY(cal_buf_puts(b, "\">"));
            TRY(xml_esc(b, c->text));
            TRY(cal_buf_puts(b, "</failure>\n"));
        } else if (c->kind == CAL_GATE_CANNOT) {
            TRY(cal_buf_puts(b, "      <skipped message=\""));
            TRY(xml_esc(b, c->text));
            TRY(cal_buf_puts(b, "\"/>\n"));
        }
        TRY(cal_buf_puts(b, "      <system-out>"));
        TRY(xml_esc(b, c->text));
        TRY(cal_buf_puts(b, "</system-out>\n    </testcase>\n"));
    }
    return cal_buf_puts(b, "  </testsuite>\n</testsuites>\n");
}

/* ---- JSON --------------------------------------------------------------------- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int cal_gate_write_json(const cal_gate_input *in, const cal_gate_outcome *o, cal_buf *b)
{
    json_t *root = json_object(), *cases = json_array(), *cells = json_array();
    if (!root || !cases || !cells) { json_decref(root); json_decref(cases); json_decref(cells); return CAL_ENOMEM; }
    json_object_set_new(root, "format", json_string("caliper-gate"));
    json_object_set_new(root, "format_version", json_integer(1));
    json_object_set_new(root, "verdict", json_string(cal_gate_verdict_name(o->verdict)));
    json_object_set_new(root, "summary", json_string(o->summary));
    json_object_set_new(root, "design", json_string(cal_gate_design_name(in->design)));
    json_object_set_new(root, "alpha", json_real(o->alpha));
    json_t *base = json_object(), *cand = json_object();
    json_object_set_new(base, "id", json_string(in->base_id));
    json_object_set_new(base, "label", json_string(in->base_label));
    json_object_set_new(cand, "id", json_string(in->cand_id));
    json_object_set_new(cand, "label", json_string(in->cand_label));
    json_object_set_new(root, "baseline", base);
    json_object_set_new(root, "candidate", cand);
    json_object_set_new(root, "host", json_string(in->host));
    json_object_set_new(root, "probe", json_string(in->probe));
    json_object_set_new(root, "noise", json_string(in->noise));
    for (size_t i = 0; i < in->n_cells; i++) {
        char proto[700];
        cal_fp_describe(&in->cells[i].fp, proto, sizeof proto);
        json_t *c = json_object();
        json_object_set_new(c, "cell", json_string(in->cells[i].name));
        json_object_set_new(c, "protocol", json_string(proto));
        json_object_set_new(c, "pairs", json_integer((json_int_t)in->cells[i].n_pairs));
        json_array_append_new(cells, c);
    }
    json_object_set_new(root, "cells", cells);
    json_object_set_new(root, "counts", json_pack("{s:I,s:I,s:I,s:I}", "regression",
                        (json_int_t)o->n_regression, "improvement", (json_int_t)o->n_improvement,
                        "no_change", (json_int_t)o->n_no_change, "cannot_judge", (json_int_t)o->n_cannot));
    for (size_t i = 0; i < o->n_cases; i++) {
        const cal_gate_case *c = &o->cases[i];
        const cal_field *f = cal_metric_get(c->bound.metric);
        json_t *x = json_object();
        json_object_set_new(x, "metric", json_string(f->name));
        json_object_set_new(x, "label", json_string(c->label));
        json_object_set_new(x, "cell", json_string(in->cells[c->cell].name));
        json_object_set_new(x, "unit", json_string(f->unit));
        json_object_set_new(x, "better", json_string(cal_better_name(f->better)));
        json_object_set_new(x, "bound", json_real(c->bound.bound));
        json_object_set_new(x, "bound_spec", json_string(c->bound.spec));
        json_object_set_new(x, "answer", json_string(cal_gate_kind_name(c->kind)));
        json_object_set_new(x, "baseline", jnum(c->base));
        json_object_set_new(x, "candidate", jnum(c->cand));
        json_object_set_new(x, "effect", jnum(c->effect));
        json_object_set_new(x, "ci_lo", jnum(c->lo));
        json_object_set_new(x, "ci_hi", jnum(c->hi));
        json_object_set_new(x, "ci_level", json_real(1 - 2 * o->alpha));
        json_object_set_new(x, "method", json_string(cal_gate_method_name(c->stat.method)));
        json_object_set_new(x, "n", json_integer((json_int_t)c->stat.n));
        json_object_set_new(x, "p_worse", jnum(c->p_worse));
        json_object_set_new(x, "p_better", jnum(c->p_better));
        json_object_set_new(x, "p_worse_holm", jnum(c->p_worse_adj));
        json_object_set_new(x, "p_better_holm", jnum(c->p_better_adj));
        json_object_set_new(x, "spread", jnum(c->stat.spread));
        if (c->kind == CAL_GATE_CANNOT && c->need)
            json_object_set_new(x, "pairs_needed", json_integer((json_int_t)c->need));
        json_object_set_new(x, "text", json_string(c->text));
        json_array_append_new(cases, x);
    }
    json_object_set_new(root, "cases", cases);
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (!s) return CAL_ENOMEM;
    int e = cal_buf_puts(b, s);
    if (!e) e = cal_buf_puts(b, "\n");
    free(s);
    return e;
}
