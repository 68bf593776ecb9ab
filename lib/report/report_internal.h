/* caliper — helpers shared by the files of lib/report; not part of the
 * public contract (include/caliper/report.h is). */
#ifndef CALIPER_REPORT_INTERNAL_H
#define CALIPER_REPORT_INTERNAL_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "caliper/buf.h"
#include "caliper/report.h"
#include "lib/util/json.h"

/* caliper's own result format (json.c): whether a parsed object says it is
 * one, and reading one into a new result (*out; errors name the field). */
int cal_report_own_is(const json_t *root);
int cal_report_own_from_json(const json_t *root, const char *name, cal_result **out,
                             char *err, size_t errn);

int cal_report_write_json(const cal_result *const *res, size_t n, cal_buf *out);
int cal_report_write_md(const cal_result *const *res, size_t n, cal_buf *out);
int cal_report_write_csv(const cal_result *const *res, size_t n, cal_buf *out);
int cal_report_write_html(const cal_result *const *res, size_t n, cal_buf *out);

/* Prefill time of a cell in ms (TTFT p50, else prompt ÷ prefill tok/s). */
double cal_report_prefill_ms(const cal_rcell *c);
/* Least-squares prefill line over the prompt-sweep cells, ms and ms/token. */
int cal_report_prefill_fit(const cal_result *r, double *a_ms, double *b_ms, double *r2,
                           size_t *npts);
int cal_report_has_clock(const cal_result *r);
int cal_report_has_power(const cal_result *r);
/* A shot's throughput: per-request, else aggregate, else decode, else
 * prefill; *what names it. */
double cal_report_shot_value(const cal_shot *s, const char **what);

/* Read a whole file (capped at 256 MiB); *text malloc'd, NUL-terminated. */
int cal_report_read_file(const char *path, char **text, size_t *len, char *err, size_t errn);

/* The cells a chart draws, sorted: one prompt length across concurrencies
 * (the concurrency curve), and one concurrency across prompt lengths (the
 * prefill line); one shot kind each. Return how many (<= cap). */
size_t cal_report_pick_concurrency(const cal_result *r, const cal_rcell **out, size_t cap);
size_t cal_report_pick_prompt(const cal_result *r, const cal_rcell **out, size_t cap);

/* Table helpers: the fingerprint fields that differ between the cells of
 * one sweep (a bit per cal_fp_field); a row named by those fields only
 * ("warm 2–3 · c4 · 128 tok"); every field except those in skip, as
 * "rest 0 s · warm-up 0 · …". */
unsigned cal_report_varying(const cal_result *r, cal_sweep sw);
void cal_report_row_name(const cal_fingerprint *fp, unsigned vary, char *buf, size_t n);
void cal_report_describe_except(const cal_fingerprint *fp, unsigned skip, char *buf, size_t n);

/* Goodput against offered load (goodput_curve.c): the open-loop cells of one
 * prompt length (the one with most) that have a goodput, one per rate in
 * rate order, with the saturation rule and knee (saturation.h) applied. */
#define CAL_GP_MAX 64
typedef struct cal_gp_curve {
    size_t n;
    long   prompt_tokens;
    char   slo[CAL_FP_STR];
    double offered[CAL_GP_MAX], throughput[CAL_GP_MAX], goodput[CAL_GP_MAX];  /* req/s */
    const cal_rcell *cells[CAL_GP_MAX];
    int    saturated;        /* the stopping rule holds at the last rate */
    int    knee;             /* index of the knee; -1 none (not saturated) */
} cal_gp_curve;
size_t cal_report_goodput_curve(const cal_result *r, cal_gp_curve *c);
/* The curve as an HTML figure; nothing when the result has no goodput. */
int cal_report_goodput_html(cal_buf *b, const cal_result *r, int idx);

/* Escape s for Markdown text (markup characters backslash-escaped, HTML as
 * entities, line breaks as spaces). */
int cal_report_md_esc(cal_buf *b, const char *s);
/* Escape s for HTML text and attributes. */
int cal_report_html_esc(cal_buf *b, const char *s);
#endif
