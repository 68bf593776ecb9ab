/* caliper runs / show / export — the stored runs listed, printed again, and
 * exported; and the run view every one of them (and `caliper run`) prints
 * through: protocol line, shots table, cells table, verdicts, self-check. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/judge.h"
#include "caliper/noise.h"
#include "caliper/protocol.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "caliper/telemetry.h"
#include "caliper/trend.h"
#include "cli.h"
#include "run_view.h"

#define DASH "—"

/* ---- text cells that pad by display width ("—" and "–" are one column) */
static size_t dwidth(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) w++;
    return w;
}
static void put(FILE *f, const char *s, size_t width, int right)
{
    size_t w = dwidth(s);
    if (right)
        for (size_t i = w; i < width; i++) fputc(' ', f);
    fputs(s, f);
    if (!right)
        for (size_t i = w; i < width; i++) fputc(' ', f);
}
static char *num(double v, int decimals, char *buf, size_t n)
{
    if (!isfinite(v)) snprintf(buf, n, DASH);
    else snprintf(buf, n, "%.*f", decimals, v);
    return buf;
}

/* ---- JSON helpers ----------------------------------------------------- */
static json_t *parse_obj(const char *s)
{
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    return j ? j : json_null();
}
static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* The verdicts the analysis computed, as the store keeps them. */
char *run_view_verdicts_json(const cal_run_data *d) { return cal_analysis_verdicts_json(d); }

/* ---- the terminal view ------------------------------------------------ */
static void header(FILE *f, const cal_run_data *d)
{
    const cal_run *r = &d->run;
    json_t *h = parse_obj(r->host_json);
    json_t *tel = parse_obj(r->telemetry_json);
    const cal_protocol_target *t = &d->proto.target;
    const char *kind = t->kind[0] ? t->kind : NULL, *name = t->name[0] ? t->name : NULL;
    const char *model = t->model[0] ? t->model : NULL;
    const char *url = t->url[0] ? t->url : NULL, *cmd = t->command[0] ? t->command : NULL;
    char tgt[700];
    char lo[48] = "";
    if (!isnan(t->load_s)) snprintf(lo, sizeof lo, ", loaded in %.2f s", t->load_s);
    const char *det = t->detail[0] ? t->detail : NULL;
    if (kind && !strcmp(kind, "builtin") && det)
        snprintf(tgt, sizeof tgt, "built-in engine `%s` %.200s%s", name ? name : "?", det, lo);
    else if (kind && !strcmp(kind, "builtin"))
        snprintf(tgt, sizeof tgt, "built-in engine `%s` (model %s%s)", name ? name : "?",
                 model ? model : "?", lo);
    else if (kind && !strcmp(kind, "launch"))
        snprintf(tgt, sizeof tgt, "`%.300s` (model %s%s) at %.200s", cmd ? cmd : "?",
                 model ? model : "?", lo, url ? url : "?");
    else if (kind && !strcmp(kind, "inproc"))
        snprintf(tgt, sizeof tgt, "in-process `%.300s` (model %s)", name ? name : "?", model ? model : "?");
    else
        snprintf(tgt, sizeof tgt, "%s (model %s)", url ? url : "?", model ? model : "?");
    fprintf(f, "%s · target: %s\n", r->build ? r->build : "caliper", tgt);
    const char *cpu = jstr(h, "cpu"), *os = jstr(h, "os"), *gpu = jstr(h, "gpu");
    json_t *cores = json_object_get(h, "cores"), *mem = json_object_get(h, "memory_bytes");
    fprintf(f, "host: %s", cpu ? cpu : "unknown CPU");
    if (json_is_integer(cores)) fprintf(f, " (%lld cores)", (long long)json_integer_value(cores));
    if (json_is_integer(mem)) fprintf(f, ", %.1f GiB", json_integer_value(mem) / 1073741824.0);
    if (os) fprintf(f, ", %s", os);
    if (gpu) fprintf(f, ", GPU %s", gpu);
    const char *src = jstr(tel, "summary");
    fprintf(f, " · telemetry: %s\n", src ? src : "none recorded");
    char when[64] = "?";
    time_t sec = (time_t)(r->started_wall_ns / 1000000000);
    struct tm tm;
    if (gmtime_r(&sec, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    fprintf(f, "run %lld%s%s · %s · %s", (long long)r->id, r->label ? " · label " : "",
            r->label ? r->label : "", when, cal_run_status_name(r->status));
    if (r->build && strstr(r->build, "sanitizer"))
        fprintf(f, " · warning: a sanitizer build: timings are not representative");
    fputc('\n', f);
    if (d->proto.n_damaged)   /* its numbers stand; what they mean is not all known */
        fprintf(f, "damaged: run %lld's stored protocol cannot be read whole: %s (read as "
                   "unknown%s); compare refuses its ratios\n",
                (long long)r->id, d->proto.damaged,
                d->proto.n_damaged > 1 ? ", with more damaged fields" : "");
    json_decref(h);
    json_decref(tel);
}

static void rule(FILE *f, const char *title)
{
    fprintf(f, "\n── %s ", title);
    size_t w = dwidth(title) + 4;
    for (; w < 100; w++) fputs("─", f);
    fputc('\n', f);
}

static void protocol_words(const cal_cell *c, char *buf, size_t n)
{
    char load[48];
    if (c->rate > 0) snprintf(load, sizeof load, "open loop %.3g req/s (Poisson)", c->rate);
    else snprintf(load, sizeof load, "concurrency %d", c->concurrency);
    snprintf(buf, n, "%s%s%s%s · prompt %d tok (%s, %s, %s) · output %d tok %s",
             c->target[0] ? "target " : "", c->target, c->target[0] ? " · " : "", load,
             c->prompt_tokens, c->content,
             c->unique_prompts ? "unique" : "shared prefix", c->prompt_exact ? "exact" : "approx.",
             c->max_tokens, c->output_fixed ? "fixed" : "at most");
}

/* The verdicts printed under a group's shots table rather than as notes. */
static int under_table(const cal_verdict *v)
{
    return v->group >= 0 && (v->kind == CAL_VK_SHOTS || v->kind == CAL_VK_FREQUENCY ||
                             v->kind == CAL_VK_POWER_WALL);
}

static void shots_table(FILE *f, const cal_run_data *d, const cal_analysis *an, size_t gi)
{
    const cal_group *g = &an->groups[gi];
    const cal_cell *c0 = &d->cells[g->cells[0]];
    char title[300], pw[256];
    protocol_words(c0, pw, sizeof pw);
    int64_t rest = 0;
    for (size_t i = 1; i < g->n_cells; i++)
        if (d->cells[g->cells[i]].rest_before_ns > rest) rest = d->cells[g->cells[i]].rest_before_ns;
    snprintf(title, sizeof title, "shots · %s · rest %.3g s", pw, rest / 1e9);
    rule(f, title);
    /* shot, kind, age, rest, then schema fields at their decimals */
    static const cal_metric M[] = {CAL_M_AGG_TOKS, CAL_M_REQ_TOKS, CAL_M_PREFILL_TOKS,
                                   CAL_M_DECODE_TOKS, CAL_M_TTFT_P50, CAL_M_CLOCK_MHZ,
                                   CAL_M_POWER_W};
    static const char *const H[] = {"shot", "kind", "age s", "rest s", "aggregate tok/s",
                                    "per-request tok/s", "prefill tok/s", "decode tok/s",
                                    "TTFT p50 ms", "clock MHz", "power W", "ok/failed"};
    static const size_t W[] = {4, 7, 7, 6, 15, 17, 13, 12, 11, 9, 7, 9};
    for (size_t i = 0; i < 12; i++) { if (i) fputs("  ", f); put(f, H[i], W[i], i > 1); }
    fputc('\n', f);
    for (size_t i = 0; i < g->n_cells; i++) {
        const cal_cell *c = &d->cells[g->cells[i]];
        char b[12][48];
        snprintf(b[0], 48, "%d", c->shot_index);
        snprintf(b[1], 48, "%s", cal_shot_kind_key(c->shot_kind));
        num(c->process_age_ns >= 0 ? c->process_age_ns / 1e9 : NAN, 1, b[2], 48);
        num(c->rest_before_ns / 1e9, 1, b[3], 48);
        for (size_t k = 0; k < sizeof M / sizeof M[0]; k++) {
            const cal_field *fl = cal_metric_get(M[k]);
            num(cal_summary_get(&c->sum, fl), fl->decimals, b[4 + k], 48);
        }
        snprintf(b[11], 48, "%lld/%lld", (long long)c->sum.completed, (long long)c->sum.failed);
        for (size_t k = 0; k < 12; k++) { if (k) fputs("  ", f); put(f, b[k], W[k], k > 1); }
        fputc('\n', f);
    }
    for (size_t i = 0; i < an->n_verdicts; i++) {
        const cal_verdict *v = &an->verdicts[i];
        if (v->group != (int)gi || !under_table(v)) continue;
        fprintf(f, "%s: %s\n", v->kind == CAL_VK_SHOTS ? "verdict" :
                v->kind == CAL_VK_FREQUENCY ? "clock" : "power", v->text);
    }
}

/* The cells table: one row per configuration, from the quoted shots. The
 * columns name summary fields, formatted by the one field list. */
typedef struct tcol {
    const char *head;
    const char *fields[3];
    size_t width;
} tcol;
static const tcol COLS[] = {
    {"aggregate tok/s", {"output_throughput"}, 15},
    {"per-request tok/s (median)", {"per_request_output_throughput_median"}, 26},
    {"TTFT p50/p95/p99 ms", {"median_ttft_ms", "p95_ttft_ms", "p99_ttft_ms"}, 22},
    {"ITL p50/p99 ms", {"median_itl_ms", "p99_itl_ms"}, 14},
    {"TPOT p50 ms", {"median_tpot_ms"}, 11},
    {"E2E p50/p99 ms", {"median_e2el_ms", "p99_e2el_ms"}, 16},
};
#define N_COLS (sizeof COLS / sizeof COLS[0])

static void cells_table(FILE *f, const cal_run_data *d, const cal_analysis *an)
{
    int qf = 0, ql = 0, ab = 0;
    for (size_t k = 0; k < an->n_groups; k++) {
        const cal_group *g = &an->groups[k];
        if (g->quoted_first && (!qf || g->quoted_first < qf)) qf = g->quoted_first;
        if (g->quoted_last > ql) ql = g->quoted_last;
        if (d->cells[g->cells[0]].target[0]) ab = 1;
    }
    const cal_cell *c0 = &d->cells[an->groups[0].cells[0]];
    char title[300], which[64];
    if (qf == ql) snprintf(which, sizeof which, "shot %d", qf);
    else snprintf(which, sizeof which, "shots %d–%d pooled", qf, ql);
    snprintf(title, sizeof title, "cells · %s · %s prompts (%s, %s) · output %d tok %s · %s",
             c0->rate > 0 ? "open loop" : "closed loop", c0->content,
             c0->unique_prompts ? "unique" : "shared prefix",
             c0->prompt_exact ? "exact" : "approx.", c0->max_tokens,
             c0->output_fixed ? "fixed" : "at most", which);
    rule(f, title);
    if (ab) { put(f, "target", 6, 0); fputs("  ", f); }
    put(f, c0->rate > 0 ? "rate/s" : "conc", 6, 1);
    fputs("  ", f);
    put(f, "prompt", 6, 1);
    fputs("  ", f);
    for (size_t i = 0; i < N_COLS; i++) { put(f, COLS[i].head, COLS[i].width, 1); fputs("  ", f); }
    put(f, "ok/failed", 9, 1);
    fputc('\n', f);
    for (size_t k = 0; k < an->n_groups; k++) {
        const cal_group *g = &an->groups[k];
        const cal_summary *s = &g->pooled;
        const cal_cell *c = &d->cells[g->cells[0]];
        char buf[96];
        if (ab) { put(f, c->target, 6, 0); fputs("  ", f); }
        if (c->rate > 0) snprintf(buf, sizeof buf, "%.3g", c->rate);
        else snprintf(buf, sizeof buf, "%d", c->concurrency);
        put(f, buf, 6, 1);
        fputs("  ", f);
        snprintf(buf, sizeof buf, "%d", c->prompt_tokens);
        put(f, buf, 6, 1);
        fputs("  ", f);
        for (size_t i = 0; i < N_COLS; i++) {
            char cell[96] = "";
            size_t off = 0;
            for (size_t j = 0; j < 3 && COLS[i].fields[j]; j++) {
                const cal_field *fl = cal_summary_field(COLS[i].fields[j]);
                char nb[32];
                num(fl ? cal_summary_get(s, fl) : NAN, fl ? fl->decimals : 1, nb, sizeof nb);
                off += (size_t)snprintf(cell + off, sizeof cell - off, "%s%s", j ? " / " : "", nb);
            }
            put(f, cell, COLS[i].width, 1);
            fputs("  ", f);
        }
        snprintf(buf, sizeof buf, "%lld/%lld", (long long)s->completed, (long long)s->failed);
        put(f, buf, 9, 1);
        fputc('\n', f);
    }
}

/* A verdict's line below the tables: the analysis says what it is, the
 * view only puts its kind's word in front. */
static void verdict_line(FILE *f, const cal_verdict *v)
{
    char line[700];
    cal_verdict_line(v, line, sizeof line);
    if (v->kind == CAL_VK_CLIENT) fprintf(f, "%s\n", line);   /* "client self-check: …" */
    else if (v->kind == CAL_VK_COLUMN) fprintf(f, "read: %s\n", line);
    else if (v->kind == CAL_VK_SHOTS && v->group < 0) fprintf(f, "verdict: %s\n", line);
    else fprintf(f, "note: %s\n", line);
}

void run_view_print(FILE *f, const cal_run_data *d, const char *db_path)
{
    cal_analysis *an = NULL;
    header(f, d);
    if (cal_analysis_run(d, &an)) {
        fprintf(f, "\nout of memory analysing the run.\n");
        return;
    }
    for (size_t k = 0; k < an->n_groups; k++)
        if (an->groups[k].n_cells > 1) shots_table(f, d, an, k);
    if (an->n_groups) cells_table(f, d, an);
    else fprintf(f, "\nno cells were measured.\n");
    for (size_t i = 0; i < an->n_verdicts; i++)   /* which column to read, under the table */
        if (an->verdicts[i].kind == CAL_VK_COLUMN) verdict_line(f, &an->verdicts[i]);
    fputc('\n', f);
    for (size_t i = 0; i < an->n_verdicts; i++)
        if (!under_table(&an->verdicts[i]) && an->verdicts[i].kind != CAL_VK_COLUMN)
            verdict_line(f, &an->verdicts[i]);
    cal_analysis_free(&an);
    if (d->run.status == CAL_RUN_INTERRUPTED)
        fprintf(f, "interrupted: what was measured before Ctrl-C is stored; the run is marked "
                   "interrupted.\n");
    else if (d->run.status == CAL_RUN_FAILED) {
        /* the reason is the run's last stored verdict, a note (caliper run
         * appends it) */
        cal_verdict *sv = malloc(64 * sizeof *sv);
        size_t nv = sv ? cal_verdicts_from_json(d->run.verdicts_json, sv, 64) : 0;
        const char *why = nv && sv[nv - 1].kind == CAL_VK_NOTE ? sv[nv - 1].text : NULL;
        fprintf(f, "failed: %s; what was measured is stored.\n", why ? why : "the run stopped early");
        free(sv);
    }
    if (db_path)
        fprintf(f, "stored: run %lld in %s · caliper show %lld · caliper report %lld -o report.html\n",
                (long long)d->run.id, db_path, (long long)d->run.id, (long long)d->run.id);
}

/* Goodput against offered load, the knee marked (the report's Markdown);
 * nothing when no cell has a goodput (no SLO). */
static void print_goodput(FILE *f, const cal_run_data *d)
{
    int any = 0;
    for (size_t i = 0; i < d->n_cells; i++) any |= isfinite(d->cells[i].sum.goodput);
    if (!any) return;
    cal_result *r = NULL;
    char err[300];
    cal_buf b = {0};
    b.max = 1 << 20;
    if (cal_result_from_run_data(d, &r, err, sizeof err) == CAL_OK && cal_report_goodput_md(r, &b) == CAL_OK &&
        b.len)
        fprintf(f, "\n%s", b.data);
    cal_buf_free(&b);
    cal_result_free(&r);
}

void run_view_show(FILE *f, const cal_run_data *d, const char *db_path)
{
    run_view_print(f, d, db_path);
    cal_report_lengths_text(f, d);   /* a dataset's or drawn lengths */
    cal_report_turns_text(f, d);     /* a chat scenario's or a replay's turns */
    print_goodput(f, d);
}

/* ---- JSON and CSV: written by the library (lib/report/export.c) ------- */
static int write_buf(FILE *f, int (*w)(const cal_run_data *, cal_buf *), const cal_run_data *d)
{
    cal_buf b = CAL_BUF_INIT(1u << 30);
    int e = w(d, &b);
    if (!e && b.len && fwrite(b.data, 1, b.len, f) != b.len) e = CAL_EIO;
    cal_buf_free(&b);
    return e ? -1 : 0;
}

int run_view_json(FILE *f, const cal_run_data *d) { return cal_run_export_json_file(d, f) ? -1 : 0; }
int run_view_csv(FILE *f, const cal_run_data *d) { return write_buf(f, cal_run_export_csv, d); }

/* ---- the subcommands -------------------------------------------------- */
/* The reading commands open the store read-only: a mistyped --db creates
 * nothing, and a store in a directory they cannot write is still read.
 * A missing file: "no such store: PATH", exit 1 (a lookup that failed, like
 * an unknown run); an empty --db is a usage error, exit 2. */
static int open_db(const char *cmd, const char *path, cal_store **st)
{
    if (!*path) return cli_usage_error(cmd, "--db: \"\" is empty: give the store's file");
    char why[512];
    int rc = cal_store_open_ex(path, CAL_STORE_READONLY, st, why, sizeof why);
    if (rc) return cli_fail(cmd, "--db: %s", why);
    return 0;
}

/* RUN as given: "" names nothing (exit 2). */
static int check_ref(const char *cmd, const char *ref)
{
    if (*ref) return 0;
    return cli_usage_error(cmd, "RUN: \"\" is empty: give an id, a label or latest");
}

static int load_ref(const char *cmd, cal_store *st, const char *ref, int flags, cal_run_data **d)
{
    int64_t id;
    int rc = cal_store_find_run(st, ref, &id);
    if (rc == CAL_ENOTFOUND) return cli_fail(cmd, "no run \"%s\" in the store (see caliper runs)", ref);
    if (rc == CAL_OK) rc = cal_store_load_run(st, id, flags, d);
    if (rc) return cli_fail(cmd, "cannot load run \"%s\": %s (%s)", ref, cal_strerror(rc),
                            cal_store_errmsg(st));
    return 0;
}

/* What runs --series adds: the trend of the series across its runs. */
typedef struct trend_opts {
    cal_gate_bound b[CAL_GATE_MAX_BOUNDS];
    size_t nb;
    double alpha;
    const char *html;        /* -o FILE: the HTML page; NULL none */
} trend_opts;

static const char *step_mark(cal_gate_kind k)
{
    switch (k) {
    case CAL_GATE_REGRESSION: return "▼";
    case CAL_GATE_IMPROVEMENT: return "▲";
    case CAL_GATE_NO_CHANGE: return "=";
    default: return "?";
    }
}

/* The trend: a sparkline per bounded metric, then one row per run with its
 * level and the gate's decision from the run before (caliper/trend.h). */
static int series_trend(cal_store *st, const char *key, const trend_opts *to)
{
    cal_trend t;
    char err[400];
    int e = cal_trend_load(st, key, 0, &t, err, sizeof err);
    if (e) return cli_fail("runs", "the series' trend: %s", err);
    cal_trend_step *steps[CAL_GATE_MAX_BOUNDS] = {0};
    int rc = CLI_OK;
    for (size_t k = 0; k < to->nb; k++) {
        steps[k] = calloc(t.n ? t.n : 1, sizeof *steps[k]);
        if (!steps[k] || cal_trend_steps(&t, to->b[k].metric, to->b[k].bound, to->alpha, steps[k])) {
            rc = cli_fail("runs", "the series' trend: %s", cal_strerror(CAL_ENOMEM));
            goto out;
        }
    }
    printf("\ntrend · %s · %zu run%s, oldest first · each step judged as caliper gate judges two "
           "separate runs, %g %% family-wise over a metric's steps (Holm)\n", t.cell, t.n,
           t.n == 1 ? "" : "s", 100 * to->alpha);
    int w = 0;
    char head[CAL_GATE_MAX_BOUNDS][96];
    for (size_t k = 0; k < to->nb; k++) {
        const cal_field *f = cal_metric_get(to->b[k].metric);
        snprintf(head[k], sizeof head[k], "%s%s%s %s%g %%", f->label, strstr(f->label, f->unit) ? "" : " ",
                 strstr(f->label, f->unit) ? "" : f->unit, f->better == CAL_BETTER_LOWER ? "+" : "−",
                 100 * to->b[k].bound);
        if ((int)dwidth(head[k]) > w) w = (int)dwidth(head[k]);
    }
    for (size_t k = 0; k < to->nb; k++) {
        char spark[4 * CAL_TREND_MAX_RUNS + 8];
        double sd, df;
        cal_trend_sparkline(&t, to->b[k].metric, spark, sizeof spark);
        put(stdout, head[k], (size_t)w, 0);
        printf("  %s  ", spark);
        if (cal_trend_noise(&t, to->b[k].metric, &sd, &df))
            printf("run-to-run sd %.1f %% (%.0f df)\n", 100 * expm1(sd), df);
        else
            printf("run-to-run noise unknown (3 or more runs with it are needed)\n");
    }
    printf("%4s  %-20s", "run", "label / commit");
    for (size_t k = 0; k < to->nb; k++) {
        printf("  ");
        put(stdout, cal_metric_get(to->b[k].metric)->label, 26, 0);
    }
    putchar('\n');
    for (size_t i = 0; i < t.n; i++) {
        const cal_trend_point *p = &t.pts[i];
        char name[64];
        if (p->label[0]) snprintf(name, sizeof name, "%.60s", p->label);
        else if (p->commit[0]) snprintf(name, sizeof name, "%.60s", p->commit);
        else snprintf(name, sizeof name, "-");
        printf("%4lld  ", (long long)p->run_id);
        put(stdout, name, 20, 0);
        for (size_t k = 0; k < to->nb; k++) {
            const cal_field *f = cal_metric_get(to->b[k].metric);
            char cell[64], v[32];
            num(p->v[to->b[k].metric], f->decimals, v, sizeof v);
            if (i && isfinite(steps[k][i].effect))
                snprintf(cell, sizeof cell, "%s %s %+.1f %%", v, step_mark(steps[k][i].kind),
                         100 * steps[k][i].effect);
            else snprintf(cell, sizeof cell, "%s", v);
            printf("  ");
            put(stdout, cell, 26, 0);
        }
        putchar('\n');
    }
    printf("(from the run before: ▼ regression, ▲ improvement, = no change larger than the bound, "
           "? cannot judge)\n");
    for (size_t k = 0; k < to->nb; k++)
        for (size_t i = 1; i < t.n; i++)
            if (steps[k][i].kind == CAL_GATE_REGRESSION)
                printf("regression: %s, run %lld (%s) from run %lld: %+.1f %%, %d %% CI %+.1f to %+.1f %%\n",
                       cal_metric_get(to->b[k].metric)->label, (long long)t.pts[i].run_id,
                       t.pts[i].label[0] ? t.pts[i].label : t.pts[i].commit, (long long)t.pts[i - 1].run_id,
                       100 * steps[k][i].effect, (int)lround(100 * (1 - 2 * to->alpha)),
                       100 * expm1(steps[k][i].stat.lo), 100 * expm1(steps[k][i].stat.hi));
    if (to->html) {
        cal_metric ms[CAL_GATE_MAX_BOUNDS];
        double bs[CAL_GATE_MAX_BOUNDS];
        for (size_t k = 0; k < to->nb; k++) { ms[k] = to->b[k].metric; bs[k] = to->b[k].bound; }
        cal_buf b = CAL_BUF_INIT(64u << 20);
        e = cal_trend_write_html(&t, ms, bs, to->nb, to->alpha, (const cal_trend_step *const *)steps, &b);
        FILE *f = e ? NULL : fopen(to->html, "wb");
        if (e) rc = cli_fail("runs", "writing the trend page: %s", cal_strerror(e));
        else if (!f) rc = cli_fail("runs", "-o: cannot write \"%s\"", to->html);
        else {
            size_t wr = b.len ? fwrite(b.data, 1, b.len, f) : 0;
            if (fclose(f) != 0 || wr != b.len) rc = cli_fail("runs", "-o: writing \"%s\" failed", to->html);
            else fprintf(stderr, "wrote %s (%zu bytes)\n", to->html, b.len);
        }
        cal_buf_free(&b);
    }
out:
    for (size_t k = 0; k < to->nb; k++) free(steps[k]);
    cal_trend_free(&t);
    return rc;
}

/* runs --series RUN: the history a shot verdict of RUN's series reads, so a
 * user can see why a band was wide: each stored run's first-shot deviation,
 * its warm shots' spread, and whether its own verdict called a wall (such a
 * run is left out of the first shots' spread), then the spread the next run
 * of the series would use. */
static int series_history(cal_store *st, const char *ref, const trend_opts *to)
{
    cal_run_data *d = NULL;
    int rc = load_ref("runs", st, ref, CAL_LOAD_NO_REQS, &d);
    if (rc) return rc;
    char key[CAL_NOISE_SERIES_MAX];
    snprintf(key, sizeof key, "%s", d->proto.noise.series);
    int has = key[0] != '\0';
    cal_run_data_free(&d);
    if (!has) return cli_fail("runs", "run \"%s\" belongs to no shot series (one concurrency and "
                              "prompt length, no --ab, no --cold)", ref);
    cal_store_noise_row rows[CAL_NOISE_RUN_RUNS];
    size_t n = 0;
    if (cal_store_noise(st, key, 0, rows, CAL_NOISE_RUN_RUNS, &n))
        return cli_fail("runs", "cannot read the series' noise: %s", cal_store_errmsg(st));
    printf("series %s\n", key);
    printf("%4s  %16s  %14s  %6s  %s\n", "run", "first shot vs", "warm shots' sd", "shots",
           "its verdict");
    for (size_t i = 0; i < n; i++) {
        const cal_store_noise_row *r = &rows[i];
        char dev[32] = "—", sd[32] = "—";
        if (isfinite(r->first_dev)) snprintf(dev, sizeof dev, "%+.1f %%", 100 * expm1(-r->first_dev));
        if (isfinite(r->shot_sd)) snprintf(sd, sizeof sd, "%.1f %%", 100 * expm1(r->shot_sd));
        printf("%4lld  %16s  %14s  %6d  %s\n", (long long)r->run_id, dev, sd, r->shots,
               r->wall == 1 ? "called a change: left out of the first shots' spread"
               : r->wall == 0 ? "no change called" : "not recorded (stored before schema 8)");
    }
    cal_noise_est e;
    cal_noise_pool(rows, n < CAL_NOISE_PRIOR_RUNS ? n : CAL_NOISE_PRIOR_RUNS, &e);
    if (isfinite(e.first_sd) && e.first_df >= CAL_JUDGE_FIRST_MIN_DF)
        printf("the next run's first shot: sd %.1f %% over %.0f runs (%d left out as walls); its "
               "verdict widens its band with it where it exceeds the warm shots' spread\n",
               100 * expm1(e.first_sd), e.first_df + 1, e.first_left_out);
    else
        printf("the next run's first shot: no spread from history (%zu run%s of it, %d left out as "
               "walls; %d are needed)\n", n, n == 1 ? "" : "s", e.first_left_out,
               CAL_JUDGE_FIRST_MIN_DF + 1);
    printf("(first shot vs: how far the first measured shot ran from its run's warm shots, "
           "+ = the first was faster)\n");
    return series_trend(st, key, to);
}

int cmd_runs(int argc, char **argv)
{
    const char *db = "caliper.db", *series = NULL, *fail = NULL;
    long limit = 0;
    trend_opts to = {.alpha = CAL_GATE_ALPHA};
    cal_gate_box box = CAL_GATE_BOX_CPU;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"limit", required_argument, 0, 'n'},
        {"series", required_argument, 0, 's'}, {"fail", required_argument, 0, 'f'},
        {"box", required_argument, 0, 'b'}, {"alpha", required_argument, 0, 'a'},
        {"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 'n': if (cli_parse_long("runs", "--limit", optarg, 1, 1000000, &limit)) return CLI_USAGE; break;
        case 'f': fail = optarg; break;
        case 'b':
            if (cal_gate_box_parse(optarg, &box))
                return cli_usage_error("runs", "--box: \"%s\" is not cpu or gpu", optarg);
            break;
        case 'a': {
            char *end;
            double a = strtod(optarg, &end);
            if (end == optarg || *end || !(a > 0 && a < 0.5))
                return cli_usage_error("runs", "--alpha: \"%s\" is not a number between 0 and 0.5", optarg);
            to.alpha = a;
            break;
        }
        case 'o':
            if (!*optarg) return cli_usage_error("runs", "-o: \"\" is empty: give a file");
            to.html = optarg;
            break;
        case 's':
            if (check_ref("runs", optarg)) return CLI_USAGE;
            series = optarg;
            break;
        case 'h':
            printf("usage: caliper runs [--db FILE] [--limit N] [--series RUN [--fail SPEC]\n"
                   "                    [--box cpu|gpu] [--alpha A] [-o FILE.html]]\n\n"
                   "List stored runs, newest first: id, when, label, target, cells, status.\n"
                   "  --db FILE     the store (default caliper.db)\n"
                   "  --limit N     at most N runs\n"
                   "  --series RUN  the history of RUN's shot series instead: each stored run's\n"
                   "                first shot against its warm shots, and which runs the next\n"
                   "                verdict leaves out as walls (docs/run.md); then its trend:\n"
                   "                a sparkline of each bounded metric across the runs (labels or\n"
                   "                commits), and caliper gate's decision between neighbours\n"
                   "  --fail SPEC   the metrics and bounds of the trend, as caliper gate takes them\n"
                   "                ('decode_tps<-5%%,ttft_p50>+10%%'); default: --box's\n"
                   "  --box cpu|gpu the default bounds (caliper gate --help; default cpu)\n"
                   "  --alpha A     family-wise false-alarm rate over a metric's steps (0.05)\n"
                   "  -o FILE.html  also write the trend as an HTML page with a chart per metric\n");
            return CLI_OK;
        default:
            return cli_usage_error("runs", "%s: unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("runs", "\"%s\": unexpected argument", argv[optind]);
    if ((fail || to.html) && !series)
        return cli_usage_error("runs", "%s: only with --series RUN", fail ? "--fail" : "-o");
    if (fail) {
        char err[600];
        if (cal_gate_parse_bounds(fail, to.b, CAL_GATE_MAX_BOUNDS, &to.nb, err, sizeof err))
            return cli_usage_error("runs", "--fail: %s", err);
    } else {
        to.nb = cal_gate_default_bounds(box, to.b, CAL_GATE_MAX_BOUNDS);
    }
    cal_store *st;
    int orc = open_db("runs", db, &st);
    if (orc) return orc;
    if (series) {
        int src = series_history(st, series, &to);
        cal_store_close(&st);
        return src;
    }
    cal_run *runs;
    size_t n;
    int rc = cal_store_list_runs(st, (size_t)limit, &runs, &n);
    if (rc) {
        rc = cli_fail("runs", "cannot list runs: %s", cal_store_errmsg(st));
        cal_store_close(&st);
        return rc;
    }
    printf("%4s  %-20s  %-16s  %-40s  %5s  %s\n", "id", "started (UTC)", "label", "target",
           "cells", "status");
    for (size_t i = 0; i < n; i++) {
        char when[32] = "?";
        time_t sec = (time_t)(runs[i].started_wall_ns / 1000000000);
        struct tm tm;
        if (gmtime_r(&sec, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        cal_protocol pr;
        if (cal_protocol_from_json(NULL, runs[i].target_json, &pr)) cal_protocol_init(&pr);
        const cal_protocol_target *t = &pr.target;
        char tgt[128];
        const char *kind = t->kind[0] ? t->kind : NULL, *name = t->name[0] ? t->name : NULL;
        const char *url = t->url[0] ? t->url : NULL, *cmdl = t->command[0] ? t->command : NULL;
        if (kind && !strcmp(kind, "builtin")) snprintf(tgt, sizeof tgt, "built-in %.100s", name ? name : "?");
        else if (kind && !strcmp(kind, "launch")) snprintf(tgt, sizeof tgt, "launch: %.60s", cmdl ? cmdl : "?");
        else if (kind && !strcmp(kind, "inproc")) snprintf(tgt, sizeof tgt, "in-process: %.60s", name ? name : "?");
        else snprintf(tgt, sizeof tgt, "%.100s", url ? url : "?");
        cal_protocol_clear(&pr);
        printf("%4lld  %-20s  %-16s  %-40.40s  %5d  %s\n", (long long)runs[i].id, when,
               runs[i].label ? runs[i].label : "-", tgt, runs[i].n_cells,
               cal_run_status_name(runs[i].status));
    }
    if (!n) printf("(no runs in %s yet: caliper run)\n", db);
    cal_store_runs_free(runs, n);
    cal_store_close(&st);
    return CLI_OK;
}

int cmd_show(int argc, char **argv)
{
    const char *db = "caliper.db";
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'd') db = optarg;
        else if (c == 'h') {
            printf("usage: caliper show RUN [--db FILE]\n\n"
                   "Print a stored run again: the same tables `caliper run` printed.\n"
                   "RUN is an id, a label (its newest run) or \"latest\".\n");
            return CLI_OK;
        } else return cli_usage_error("show", "%s: unknown option", argv[optind - 1]);
    }
    if (optind != argc - 1) return cli_usage_error("show", "give exactly one RUN (an id, a label or latest)");
    if (check_ref("show", argv[optind])) return CLI_USAGE;
    cal_store *st;
    int orc = open_db("show", db, &st);
    if (orc) return orc;
    cal_run_data *d;
    int rc = load_ref("show", st, argv[optind], CAL_LOAD_CHUNKS, &d);
    if (!rc) {
        run_view_show(stdout, d, db);   /* as `caliper run` printed it */
        cal_run_data_free(&d);
    }
    cal_store_close(&st);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    const char *db = "caliper.db", *outp = NULL;
    int fmt = 0;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"json", no_argument, 0, 'j'},
        {"csv", no_argument, 0, 'c'}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 'j': fmt = 1; break;
        case 'c': fmt = 2; break;
        case 'o': outp = optarg; break;
        case 'h':
            printf("usage: caliper export RUN --json|--csv [-o FILE] [--db FILE]\n\n"
                   "  --json   the whole run: host, target, protocol, cells with their\n"
                   "           requests, pooled summaries (vLLM bench field names)\n"
                   "  --csv    one row per cell: protocol columns and summary fields\n");
            return CLI_OK;
        default:
            return cli_usage_error("export", "%s: unknown option", argv[optind - 1]);
        }
    }
    if (!fmt) return cli_usage_error("export", "choose --json or --csv");
    if (optind != argc - 1) return cli_usage_error("export", "give exactly one RUN (an id, a label or latest)");
    if (check_ref("export", argv[optind])) return CLI_USAGE;
    cal_store *st;
    int orc = open_db("export", db, &st);
    if (orc) return orc;
    cal_run_data *d;
    int rc = load_ref("export", st, argv[optind], CAL_LOAD_CHUNKS, &d);
    if (!rc) {
        FILE *f = outp ? fopen(outp, "w") : stdout;
        if (!f) rc = cli_fail("export", "-o: cannot write \"%s\"", outp);
        else {
            if ((fmt == 1 ? run_view_json(f, d) : run_view_csv(f, d)) != 0)
                rc = cli_fail("export", "write failed");
            if (f != stdout) fclose(f);
            if (!rc && d->proto.n_damaged)
                fprintf(stderr, "caliper export: run %lld's stored protocol is damaged: %s%s; "
                                "exported as stored%s\n", (long long)d->run.id, d->proto.damaged,
                        d->proto.n_damaged > 1 ? " (and more damaged fields)" : "",
                        fmt == 1 ? ", and \"protocol_damage\" says so" : "");
        }
        cal_run_data_free(&d);
    }
    cal_store_close(&st);
    return rc;
}
