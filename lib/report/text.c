/* caliper — Markdown and CSV reports, driven by the one metric table so
 * their columns match the terminal, JSON and HTML. Absent numbers print "—"
 * (Markdown) or an empty field (CSV), never 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/report.h"
#include "report_internal.h"
#include "lib/util/c_locale.h"

#define TRY(x) do { int e_ = (x); if (e_) return e_; } while (0)

static const cal_fp_field CSV_FP[] = {
    CAL_FPF_SHOT_KIND, CAL_FPF_SHOT_RANGE, CAL_FPF_REST, CAL_FPF_WARMUP,
    CAL_FPF_CONCURRENCY, CAL_FPF_RATE, CAL_FPF_PROMPT, CAL_FPF_CONTENT,
    CAL_FPF_OUTPUT, CAL_FPF_STREAMING, CAL_FPF_API, CAL_FPF_PROBE, CAL_FPF_HOST,
};
#define N_CSV_FP (sizeof CSV_FP / sizeof CSV_FP[0])

/* One row per cell through the one CSV writer (csv.h, RFC 4180): who,
 * the fingerprint, then every schema field under its key. */
int cal_report_write_csv(const cal_result *const *res, size_t n, cal_buf *out)
{
    cal_csv_writer w;
    char t[64];
    cal_csv_writer_buf(&w, out);
    cal_csv_put(&w, "run");
    cal_csv_put(&w, "label");
    cal_csv_put(&w, "target");
    cal_csv_put(&w, "sweep");
    for (size_t f = 0; f < N_CSV_FP; f++) {
        char h[64];
        snprintf(h, sizeof h, "%s", cal_fp_field_name(CSV_FP[f]));
        for (char *p = h; *p; p++) if (*p == ' ' || *p == '-') *p = '_';
        cal_csv_put(&w, h);
    }
    for (int m = 0; m < CAL_M__N; m++) cal_csv_put(&w, cal_metric_get((cal_metric)m)->name);
    cal_csv_end_row(&w);
    for (size_t i = 0; i < n; i++) {
        const cal_result *r = res[i];
        for (size_t k = 0; k < r->n_cells; k++) {
            const cal_rcell *c = &r->cells[k];
            cal_csv_put(&w, r->id);
            cal_csv_put(&w, r->label);
            cal_csv_put(&w, r->target_name);
            cal_csv_put(&w, cal_sweep_name(c->sweep));
            for (size_t f = 0; f < N_CSV_FP; f++) {
                char v[CAL_FP_STR];
                cal_csv_put(&w, cal_fp_field_value(&c->fp, CSV_FP[f], v, sizeof v));
            }
            for (int m = 0; m < CAL_M__N; m++) {
                const cal_field *f = cal_metric_get((cal_metric)m);
                if (!isfinite(c->v[m])) cal_csv_put(&w, "");   /* absent: empty, never 0 */
                else if (f->type == CAL_FIELD_INT) cal_csv_put_int(&w, (long long)c->v[m]);
                else {
                    cal_snprintf(t, sizeof t, "%.*f", f->decimals + 3, c->v[m]);
                    cal_csv_put(&w, t);
                }
            }
            cal_csv_end_row(&w);
        }
    }
    return w.err;
}

/* A number at its field's decimals (the schema's, as every table). */
static int md_num(cal_buf *b, double v, const cal_field *f)
{
    if (!isfinite(v)) return cal_buf_puts(b, " — |");
    return cal_buf_printf(b, " %.*f |", f->decimals, v);
}

/* Text from a run (labels, target names, a server's error body inside a
 * verdict) as Markdown that renders as that text: the characters Markdown
 * reads as markup are backslash-escaped ('(' and '!' need not be: they
 * only act after an escaped ']' or before an escaped '['), and HTML (which
 * Markdown passes through) is written as entities, so `<img onerror=…>`
 * stays text. */
int cal_report_md_esc(cal_buf *b, const char *s)
{
    for (const char *p = s ? s : ""; *p; p++) {
        switch (*p) {
        case '&': TRY(cal_buf_puts(b, "&amp;")); break;
        case '<': TRY(cal_buf_puts(b, "&lt;")); break;
        case '>': TRY(cal_buf_puts(b, "&gt;")); break;
        case '"': TRY(cal_buf_puts(b, "&quot;")); break;
        case '\n': case '\r': TRY(cal_buf_puts(b, " ")); break;
        case '\\': case '`': case '*': case '_': case '[': case ']': case '|': case '~':
        case '#':
            TRY(cal_buf_append(b, "\\", 1));
            TRY(cal_buf_append(b, p, 1));
            break;
        default: TRY(cal_buf_append(b, p, 1)); break;
        }
    }
    return CAL_OK;
}

/* "- key: " then the escaped text, then "\n". */
static int md_item(cal_buf *b, const char *key, const char *text)
{
    TRY(cal_buf_printf(b, "- %s", key));
    TRY(cal_report_md_esc(b, text));
    return cal_buf_puts(b, "\n");
}

static const cal_metric MD_COLS[] = {
    CAL_M_AGG_TOKS, CAL_M_REQ_TOKS, CAL_M_PREFILL_TOKS, CAL_M_DECODE_TOKS,
    CAL_M_TTFT_P50, CAL_M_TTFT_P95, CAL_M_TTFT_P99, CAL_M_ITL_P50, CAL_M_ITL_P99,
    CAL_M_TPOT_P50, CAL_M_E2E_P50, CAL_M_E2E_P99, CAL_M_CLOCK_MHZ, CAL_M_POWER_W,
};
#define N_MD_COLS (sizeof MD_COLS / sizeof MD_COLS[0])

int cal_report_write_md(const cal_result *const *res, size_t n, cal_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        const cal_result *r = res[i];
        TRY(cal_buf_puts(out, i ? "\n# " : "# "));
        TRY(cal_report_md_esc(out, r->label));
        TRY(cal_buf_puts(out, "\n\n"));
        char tgt[4 * CAL_RES_STR];
        snprintf(tgt, sizeof tgt, "%s%s%s%s%s", r->target_name, r->target_version[0] ? " " : "",
                 r->target_version, r->target_url[0] ? " · " : "", r->target_url);
        TRY(md_item(out, "target: ", tgt));
        if (r->host[0]) TRY(md_item(out, "host: ", r->host));
        if (r->probe[0]) TRY(md_item(out, "probe: ", r->probe));
        if (r->build[0]) TRY(md_item(out, "build: ", r->build));
        TRY(md_item(out, "telemetry: ", r->telemetry[0] ? r->telemetry : "none"));
        TRY(cal_buf_puts(out, "\n"));
        cal_verdict *v = malloc((CAL_RES_MAX_VERDICTS + 4) * sizeof *v);
        if (!v) return CAL_ENOMEM;
        size_t nv = cal_report_verdicts(r, v, CAL_RES_MAX_VERDICTS + 4);
        int e = CAL_OK;
        if (nv) e = cal_buf_puts(out, "## Verdicts\n\n");
        for (size_t k = 0; k < nv && !e; k++) {
            char line[700];
            e = md_item(out, "", cal_verdict_line(&v[k], line, sizeof line));
        }
        free(v);
        if (!e && nv) e = cal_buf_puts(out, "\n");
        if (e) return e;
        for (int sw = 0; sw <= CAL_SWEEP_OTHER; sw++) {
            int any = 0;
            for (size_t k = 0; k < r->n_cells; k++) any |= r->cells[k].sweep == (cal_sweep)sw;
            if (!any) continue;
            unsigned vary = cal_report_varying(r, (cal_sweep)sw);
            const cal_rcell *first = NULL;
            for (size_t k = 0; k < r->n_cells && !first; k++) if (r->cells[k].sweep == (cal_sweep)sw) first = &r->cells[k];
            char common[700];
            cal_report_describe_except(&first->fp, vary, common, sizeof common);
            TRY(cal_buf_printf(out, "## %s\n\nEvery row: ", sw == CAL_SWEEP_SHOTS ? "Shots" :
                               sw == CAL_SWEEP_CONCURRENCY ? "Concurrency sweep" :
                               sw == CAL_SWEEP_PROMPT ? "Prompt-length sweep" : "Other cells"));
            TRY(cal_report_md_esc(out, common));
            TRY(cal_buf_puts(out, "\n\n| cell |"));
            /* only the columns some cell of this table has */
            int show[N_MD_COLS] = {0};
            for (size_t m = 0; m < N_MD_COLS; m++)
                for (size_t k = 0; k < r->n_cells; k++)
                    if (r->cells[k].sweep == (cal_sweep)sw && isfinite(r->cells[k].v[MD_COLS[m]])) show[m] = 1;
            for (size_t m = 0; m < N_MD_COLS; m++)
                if (show[m]) {
                    const cal_field *mi = cal_metric_get(MD_COLS[m]);
                    if (strstr(mi->label, mi->unit)) TRY(cal_buf_printf(out, " %s |", mi->label));
                    else TRY(cal_buf_printf(out, " %s %s |", mi->label, mi->unit));
                }
            TRY(cal_buf_puts(out, " ok/failed |\n|---|"));
            for (size_t m = 0; m < N_MD_COLS; m++) if (show[m]) TRY(cal_buf_puts(out, "---:|"));
            TRY(cal_buf_puts(out, "---:|\n"));
            for (size_t k = 0; k < r->n_cells; k++) {
                const cal_rcell *c = &r->cells[k];
                if (c->sweep != (cal_sweep)sw) continue;
                char d[400];
                cal_report_row_name(&c->fp, vary, d, sizeof d);
                TRY(cal_buf_puts(out, "| "));
                TRY(cal_report_md_esc(out, d));
                TRY(cal_buf_puts(out, " |"));
                for (size_t m = 0; m < N_MD_COLS; m++)
                    if (show[m]) TRY(md_num(out, c->v[MD_COLS[m]], cal_metric_get(MD_COLS[m])));
                if (isfinite(c->v[CAL_M_COMPLETED]))
                    TRY(cal_buf_printf(out, " %.0f/%.0f |\n", c->v[CAL_M_COMPLETED],
                                       isfinite(c->v[CAL_M_FAILED]) ? c->v[CAL_M_FAILED] : 0));
                else TRY(cal_buf_puts(out, " — |\n"));
            }
            TRY(cal_buf_puts(out, "\n"));
        }
        TRY(cal_report_goodput_md(r, out));
    }
    return CAL_OK;
}

int cal_report_write(const cal_result *const *res, size_t n,
                     cal_report_format fmt, cal_buf *out)
{
    if (!res || !n || !out) return CAL_EINVAL;
    switch (fmt) {
    case CAL_REPORT_HTML: return cal_report_write_html(res, n, out);
    case CAL_REPORT_MD:   return cal_report_write_md(res, n, out);
    case CAL_REPORT_CSV:  return cal_report_write_csv(res, n, out);
    case CAL_REPORT_JSON: return cal_report_write_json(res, n, out);
    }
    return CAL_EINVAL;
}
