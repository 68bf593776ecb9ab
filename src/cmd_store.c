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
#include "caliper/error.h"
#include "caliper/protocol.h"
#include "caliper/stats.h"
#include "caliper/store.h"
#include "caliper/telemetry.h"
#include "cli.h"
#include "run_view.h"

#define DASH "—"
#define MAX_GROUPS 256

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
static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* ---- groups: cells of one workload configuration across shots --------- */
typedef struct group {
    const cal_cell *cells[512];
    size_t n;
} group;

static int same_config(const cal_cell *a, const cal_cell *b)
{
    return !strcmp(a->target, b->target) && a->concurrency == b->concurrency &&
           a->rate == b->rate && a->prompt_tokens == b->prompt_tokens &&
           !strcmp(a->content, b->content) && a->max_tokens == b->max_tokens &&
           a->output_fixed == b->output_fixed && a->kind == b->kind;
}

static size_t make_groups(const cal_run_data *d, group *g, size_t cap)
{
    size_t ng = 0;
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        size_t k;
        for (k = 0; k < ng; k++)
            if (same_config(g[k].cells[0], c)) break;
        if (k == ng) {
            if (ng == cap) continue;
            g[ng++].n = 0;
        }
        if (g[k].n < sizeof g[k].cells / sizeof g[k].cells[0]) g[k].cells[g[k].n++] = c;
    }
    return ng;
}

/* The shots a summary quotes: warm-ups never; with two or more measured
 * shots the first is dropped (SPEC 1.1: quote the later shots). */
static size_t quoted(const group *g, const cal_cell **out, int *first, int *last)
{
    size_t nm = 0, k = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->cells[i]->shot_kind != CAL_SHOT_WARMUP) nm++;
    size_t skip = nm >= 2 ? 1 : 0, seen = 0;
    *first = *last = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->cells[i]->shot_kind == CAL_SHOT_WARMUP) continue;
        if (seen++ < skip) continue;
        if (!k) *first = g->cells[i]->shot_index;
        *last = g->cells[i]->shot_index;
        out[k++] = g->cells[i];
    }
    return k;
}

/* Pool the quoted cells' requests into one summary (durations summed). */
static void pooled(const cal_run_data *d, const cal_cell *const *cells, size_t n, cal_summary *s)
{
    size_t total = 0;
    double dur = 0;
    for (size_t i = 0; i < n; i++) {
        total += (size_t)cells[i]->n_requests;
        if (isfinite(cells[i]->sum.duration)) dur += cells[i]->sum.duration;
    }
    cal_req_result *r = calloc(total ? total : 1, sizeof *r);
    size_t k = 0;
    if (r && d->n_reqs)
        for (size_t i = 0; i < n; i++)
            for (int64_t j = 0; j < cells[i]->n_requests; j++)
                if (cells[i]->req_first + (size_t)j < d->n_reqs)
                    r[k++] = d->reqs[cells[i]->req_first + (size_t)j];
    if (r && k) {
        cal_summary_compute(r, k, dur, cells[0]->output_fixed ? cells[0]->max_tokens : 0, s);
    } else if (n) {
        *s = cells[n - 1]->sum;   /* requests not loaded: the last shot's own */
    } else {
        cal_summary_init(s);
    }
    /* telemetry: the mean of the cells' means, the lowest of their minima */
    double c = 0, p = 0, cmin = NAN, pmin = NAN;
    size_t nc = 0, np = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_summary *ci = &cells[i]->sum;
        if (isfinite(ci->clock_mhz_mean)) { c += ci->clock_mhz_mean; nc++; }
        if (isfinite(ci->power_w_mean)) { p += ci->power_w_mean; np++; }
        if (isfinite(ci->clock_mhz_min) && !(ci->clock_mhz_min >= cmin)) cmin = ci->clock_mhz_min;
        if (isfinite(ci->power_w_min) && !(ci->power_w_min >= pmin)) pmin = ci->power_w_min;
    }
    s->clock_mhz_mean = nc ? c / nc : NAN;
    s->power_w_mean = np ? p / np : NAN;
    s->clock_mhz_min = cmin;
    s->power_w_min = pmin;
    free(r);   /* shallow copies: the heap fields belong to d */
}

/* Which column a series is judged on (SPEC 1.2: per-request at 1–4 users,
 * aggregate above). */
static int per_request_cell(const cal_cell *c) { return c->rate == 0 && c->concurrency <= 4; }
static double series_value(const cal_cell *c)
{
    return per_request_cell(c) ? c->sum.per_request_output_throughput_median
                               : c->sum.output_throughput;
}

static void config_name(const cal_cell *c, char *buf, size_t n)
{
    char load[48];
    if (c->rate > 0) snprintf(load, sizeof load, "rate %.3g/s", c->rate);
    else snprintf(load, sizeof load, "c%d", c->concurrency);
    snprintf(buf, n, "%s%s%s · %d tok %s", c->target[0] ? c->target : "",
             c->target[0] ? " · " : "", load, c->prompt_tokens, c->content);
}

/* The run's --noise-floor (protocol JSON), so `show` judges as `run` did. */
static double g_floor;
static void set_floor(const cal_run_data *d)
{
    json_t *p = parse_obj(d->run.protocol_json);
    json_t *f = json_object_get(p, "noise_floor");
    g_floor = json_is_number(f) ? json_number_value(f) : 0;
    json_decref(p);
}

static size_t shot_verdicts(const group *g, cal_shot_verdict *v)
{
    double vals[512];
    int idx[512];
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->cells[i]->shot_kind == CAL_SHOT_WARMUP) continue;
        vals[n] = series_value(g->cells[i]);
        idx[n++] = g->cells[i]->shot_index;
    }
    const char *what = per_request_cell(g->cells[0]) ? "per-request tok/s" : "aggregate tok/s";
    cal_shot_series_verdict(vals, idx, n, what, g_floor, v);
    /* --cold: every shot is a fresh process, so a difference is not a warm
     * wall but a machine whose state changed between processes */
    int all_cold = n >= 2;
    for (size_t i = 0; i < g->n; i++)
        if (g->cells[i]->shot_kind != CAL_SHOT_WARMUP && g->cells[i]->shot_kind != CAL_SHOT_COLD)
            all_cold = 0;
    if (all_cold && v->judged) {
        char range[48];
        if (v->later_first == v->later_last) snprintf(range, sizeof range, "cold shot %d", v->later_first);
        else snprintf(range, sizeof range, "cold shots %d–%d", v->later_first, v->later_last);
        if (!v->beyond_noise)
            snprintf(v->text, sizeof v->text,
                     "%s within noise of cold shot %d (%+.1f %%, band ±%.1f %%): fresh processes "
                     "agree", range, v->first_shot, -100.0 * v->drop, 100.0 * v->band);
        else
            snprintf(v->text, sizeof v->text,
                     "%s %s %.1f %% %s cold shot %d (band ±%.1f %%, %s): fresh processes "
                     "disagree — the machine's state changed between them",
                     range, v->later_first == v->later_last ? "runs" : "run",
                     100.0 * fabs(v->drop), v->drop > 0 ? "below" : "above", v->first_shot,
                     100.0 * v->band, what);
    }
    return n;
}

/* The frequency check of SPEC 1.4 on a series: warm ≈ cold × f_warm/f_cold. */
static int freq_text(const group *g, const cal_shot_verdict *v, char *buf, size_t n)
{
    double fc = NAN, fl[512];
    size_t nl = 0;
    int seen = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->cells[i]->shot_kind == CAL_SHOT_WARMUP) continue;
        if (!seen++) fc = g->cells[i]->sum.clock_mhz_mean;
        else if (isfinite(g->cells[i]->sum.clock_mhz_mean)) fl[nl++] = g->cells[i]->sum.clock_mhz_mean;
    }
    double fw = cal_stats_median(fl, nl);
    cal_freq_verdict fv;
    cal_tel_freq_verdict(v->first, v->later_median, fc, fw, 0, &fv);
    cal_tel_freq_verdict_text(&fv, buf, n);
    return 1;
}

char *run_view_verdicts_json(const cal_run_data *d)
{
    static group g[MAX_GROUPS];
    set_floor(d);
    size_t ng = make_groups(d, g, MAX_GROUPS);
    json_t *a = json_array();
    char line[600];
    for (size_t k = 0; k < ng; k++) {
        cal_shot_verdict v;
        if (shot_verdicts(&g[k], &v) < 2 || !v.judged) continue;
        char name[96];
        config_name(g[k].cells[0], name, sizeof name);
        snprintf(line, sizeof line, "%s: %s", name, v.text);
        json_array_append_new(a, json_string(line));
        if (v.beyond_noise && v.drop > 0) {
            char ft[300];
            freq_text(&g[k], &v, ft, sizeof ft);
            snprintf(line, sizeof line, "%s: clock: %s", name, ft);
            json_array_append_new(a, json_string(line));
        }
    }
    int64_t ok = 0, bad = 0, mism = 0, st[6] = {0};
    int approx = 0, fixed = 0;
    const char *first_err = NULL;
    int64_t cpu = 0, chunks = 0;
    double lag = NAN, wall = 0;
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        ok += c->sum.completed;
        bad += c->sum.failed;
        mism += c->sum.output_len_mismatch;
        st[1] += c->sum.n_http_error; st[2] += c->sum.n_timeout;
        st[3] += c->sum.n_connect_error; st[4] += c->sum.n_stream_error;
        st[5] += c->sum.n_cancelled;
        if (!c->prompt_exact) approx = 1;
        if (c->output_fixed) fixed = c->max_tokens;
        cpu += c->cpu_ns;
        chunks += c->chunks;
        if (isfinite(c->send_lag_p99_ms) && !(c->send_lag_p99_ms <= lag)) lag = c->send_lag_p99_ms;
        if (isfinite(c->sum.duration)) wall += c->sum.duration;
    }
    for (size_t i = 0; i < d->n_reqs && !first_err; i++)
        if (d->reqs[i].status != CAL_REQ_OK && d->reqs[i].status != CAL_REQ_CANCELLED &&
            d->reqs[i].error)
            first_err = d->reqs[i].error;
    if (bad) {
        static const char *const nm[6] = {"", "http_error", "timeout", "connect_error",
                                          "stream_error", "cancelled"};
        char parts[200] = "";
        size_t off = 0;
        for (int s = 1; s < 6; s++)
            if (st[s]) off += (size_t)snprintf(parts + off, sizeof parts - off, "%s%lld %s",
                                               off ? ", " : "", (long long)st[s], nm[s]);
        snprintf(line, sizeof line, "requests: %lld of %lld did not end ok (%s)%s%.200s",
                 (long long)bad, (long long)(ok + bad), parts, first_err ? "; first error: " : "",
                 first_err ? first_err : "");
        json_array_append_new(a, json_string(line));
    }
    if (mism) {
        snprintf(line, sizeof line,
                 "output length: %lld of %lld ok requests did not return %d tokens: the server "
                 "does not honour a fixed output length (ignore_eos/min_tokens)",
                 (long long)mism, (long long)ok, fixed);
        json_array_append_new(a, json_string(line));
    }
    if (approx && d->n_cells)
        json_array_append_new(a, json_string("prompt lengths are approximate (4 characters per "
                                             "token): the target has no /tokenize"));
    if (wall > 0 && (double)cpu / 1e9 > 0.5 * wall) {
        snprintf(line, sizeof line,
                 "client self-check: the probe was busy %.0f %% of the run: the client may be "
                 "the bottleneck", 100.0 * cpu / 1e9 / wall);
        json_array_append_new(a, json_string(line));
    } else if (isfinite(lag) && lag > 5.0) {
        snprintf(line, sizeof line,
                 "client self-check: send lag p99 %.1f ms: the client sent late; latencies "
                 "include it", lag);
        json_array_append_new(a, json_string(line));
    }
    (void)chunks;
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

/* ---- the terminal view ------------------------------------------------ */
static void header(FILE *f, const cal_run_data *d)
{
    const cal_run *r = &d->run;
    json_t *t = parse_obj(r->target_json), *h = parse_obj(r->host_json);
    json_t *tel = parse_obj(r->telemetry_json);
    const char *kind = jstr(t, "kind"), *name = jstr(t, "name"), *model = jstr(t, "model");
    const char *url = jstr(t, "url"), *cmd = jstr(t, "command");
    char tgt[700];
    double load = json_number_value(json_object_get(t, "load_s"));
    char lo[48] = "";
    if (json_is_number(json_object_get(t, "load_s")))
        snprintf(lo, sizeof lo, ", loaded in %.2f s", load);
    const char *det = jstr(t, "detail");
    if (kind && !strcmp(kind, "builtin") && det)
        snprintf(tgt, sizeof tgt, "built-in engine `%s` %.200s%s", name ? name : "?", det, lo);
    else if (kind && !strcmp(kind, "builtin"))
        snprintf(tgt, sizeof tgt, "built-in engine `%s` (model %s%s)", name ? name : "?",
                 model ? model : "?", lo);
    else if (kind && !strcmp(kind, "launch"))
        snprintf(tgt, sizeof tgt, "`%.300s` (model %s%s) at %s", cmd ? cmd : "?",
                 model ? model : "?", lo, url ? url : "?");
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
    json_decref(t);
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

static const char *kind_short(cal_shot_kind k)
{
    switch (k) {
    case CAL_SHOT_COLD: return "cold";
    case CAL_SHOT_WARM: return "warm";
    case CAL_SHOT_RESTED: return "rested";
    case CAL_SHOT_WARMUP: return "warmup";
    default: return "first?";
    }
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

static void shots_table(FILE *f, const group *g)
{
    const cal_cell *c0 = g->cells[0];
    char title[300], pw[256];
    protocol_words(c0, pw, sizeof pw);
    int64_t rest = 0;
    for (size_t i = 1; i < g->n; i++)
        if (g->cells[i]->rest_before_ns > rest) rest = g->cells[i]->rest_before_ns;
    snprintf(title, sizeof title, "shots · %s · rest %.3g s", pw, rest / 1e9);
    rule(f, title);
    static const char *const H[] = {"shot", "kind", "age s", "rest s", "aggregate tok/s",
                                    "per-request tok/s", "prefill tok/s", "decode tok/s",
                                    "TTFT p50 ms", "clock MHz", "power W", "ok/failed"};
    static const size_t W[] = {4, 6, 7, 6, 15, 17, 13, 12, 11, 9, 7, 9};
    for (size_t i = 0; i < 12; i++) { if (i) fputs("  ", f); put(f, H[i], W[i], i > 1); }
    fputc('\n', f);
    for (size_t i = 0; i < g->n; i++) {
        const cal_cell *c = g->cells[i];
        char b[12][48];
        snprintf(b[0], 48, "%d", c->shot_index);
        snprintf(b[1], 48, "%s", kind_short(c->shot_kind));
        num(c->process_age_ns >= 0 ? c->process_age_ns / 1e9 : NAN, 1, b[2], 48);
        num(c->rest_before_ns / 1e9, 1, b[3], 48);
        num(c->sum.output_throughput, 1, b[4], 48);
        num(c->sum.per_request_output_throughput_median, 1, b[5], 48);
        num(c->sum.prefill_tps_median, 0, b[6], 48);
        num(c->sum.decode_tps_median, 1, b[7], 48);
        num(c->sum.median_ttft_ms, 1, b[8], 48);
        num(c->sum.clock_mhz_mean, 0, b[9], 48);
        num(c->sum.power_w_mean, 1, b[10], 48);
        snprintf(b[11], 48, "%lld/%lld", (long long)c->sum.completed, (long long)c->sum.failed);
        for (size_t k = 0; k < 12; k++) { if (k) fputs("  ", f); put(f, b[k], W[k], k > 1); }
        fputc('\n', f);
    }
    cal_shot_verdict v;
    if (shot_verdicts(g, &v) >= 2 && v.judged) {
        fprintf(f, "verdict: %s\n", v.text);
        if (v.beyond_noise && v.drop > 0) {
            char ft[300];
            freq_text(g, &v, ft, sizeof ft);
            fprintf(f, "clock: %s\n", ft);
        }
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

static void cells_table(FILE *f, const cal_run_data *d, const group *g, size_t ng)
{
    int qf = 0, ql = 0, any_multi = 0, ab = 0;
    const cal_cell *q[512];
    for (size_t k = 0; k < ng; k++) {
        int a, b;
        size_t nq = quoted(&g[k], q, &a, &b);
        if (nq > 1 || a != b) any_multi = 1;
        if (!qf || a < qf) qf = a;
        if (b > ql) ql = b;
        if (g[k].cells[0]->target[0]) ab = 1;
    }
    const cal_cell *c0 = g[0].cells[0];
    char title[300], which[64];
    if (qf == ql) snprintf(which, sizeof which, "shot %d", qf);
    else snprintf(which, sizeof which, "shots %d–%d pooled", qf, ql);
    snprintf(title, sizeof title, "cells · %s · %s prompts (%s, %s) · output %d tok %s · %s",
             c0->rate > 0 ? "open loop" : "closed loop", c0->content,
             c0->unique_prompts ? "unique" : "shared prefix",
             c0->prompt_exact ? "exact" : "approx.", c0->max_tokens,
             c0->output_fixed ? "fixed" : "at most", which);
    (void)any_multi;
    rule(f, title);
    if (ab) { put(f, "target", 6, 0); fputs("  ", f); }
    put(f, c0->rate > 0 ? "rate/s" : "conc", 6, 1);
    fputs("  ", f);
    put(f, "prompt", 6, 1);
    fputs("  ", f);
    for (size_t i = 0; i < N_COLS; i++) { put(f, COLS[i].head, COLS[i].width, 1); fputs("  ", f); }
    put(f, "ok/failed", 9, 1);
    fputc('\n', f);
    for (size_t k = 0; k < ng; k++) {
        int a, b;
        size_t nq = quoted(&g[k], q, &a, &b);
        cal_summary s;
        pooled(d, q, nq, &s);
        const cal_cell *c = g[k].cells[0];
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
                num(fl ? cal_summary_get(&s, fl) : NAN, fl ? fl->decimals : 1, nb, sizeof nb);
                off += (size_t)snprintf(cell + off, sizeof cell - off, "%s%s", j ? " / " : "", nb);
            }
            put(f, cell, COLS[i].width, 1);
            fputs("  ", f);
        }
        snprintf(buf, sizeof buf, "%lld/%lld", (long long)s.completed, (long long)s.failed);
        put(f, buf, 9, 1);
        fputc('\n', f);
    }
    int lo = 0, hi = 0;
    for (size_t k = 0; k < ng; k++) {
        if (g[k].cells[0]->rate > 0) continue;
        if (per_request_cell(g[k].cells[0])) lo = 1;
        else hi = 1;
    }
    if (lo && hi)
        fprintf(f, "read: at 1–4 users read the per-request column; at 8+ the aggregate one.\n");
    else if (lo)
        fprintf(f, "read: at these concurrencies read the per-request column; the aggregate "
                   "one is diluted by the gaps between requests.\n");
    else if (hi)
        fprintf(f, "read: at these concurrencies read the aggregate column.\n");
}

static void self_check(FILE *f, const cal_run_data *d)
{
    int64_t cpu = 0, chunks = 0;
    double lag = NAN, wall = 0;
    for (size_t i = 0; i < d->n_cells; i++) {
        cpu += d->cells[i].cpu_ns;
        chunks += d->cells[i].chunks;
        double l = d->cells[i].send_lag_p99_ms;
        if (isfinite(l) && !(l <= lag)) lag = l;
        if (isfinite(d->cells[i].sum.duration)) wall += d->cells[i].sum.duration;
    }
    if (!chunks) return;
    double busy = wall > 0 ? cpu / 1e9 / wall : NAN;
    fprintf(f, "client self-check: %.1f µs CPU per chunk, busy %.1f %% of the run, send lag p99 "
               "%.2f ms — %s\n",
            cpu / 1e3 / (double)chunks, 100.0 * busy, lag,
            (busy > 0.5 || lag > 5.0) ? "the client may be the bottleneck"
                                      : "the probe was not the bottleneck");
}

void run_view_print(FILE *f, const cal_run_data *d, const char *db_path)
{
    static group g[MAX_GROUPS];
    set_floor(d);
    header(f, d);
    size_t ng = make_groups(d, g, MAX_GROUPS);
    for (size_t k = 0; k < ng; k++)
        if (g[k].n > 1) shots_table(f, &g[k]);
    if (ng) cells_table(f, d, g, ng);
    else fprintf(f, "\nno cells were measured.\n");
    fputc('\n', f);
    json_t *v = parse_obj(d->run.verdicts_json);
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        const char *s = json_string_value(x);
        /* the shot verdicts were printed under their tables */
        if (s && !strstr(s, " shot ") && !strstr(s, "clock: ")) fprintf(f, "note: %s\n", s);
    }
    json_decref(v);
    self_check(f, d);
    if (d->run.status == CAL_RUN_INTERRUPTED)
        fprintf(f, "interrupted: what was measured before Ctrl-C is stored; the run is marked "
                   "interrupted.\n");
    else if (d->run.status == CAL_RUN_FAILED)
        fprintf(f, "failed: the target stopped answering; what was measured is stored.\n");
    if (db_path)
        fprintf(f, "stored: run %lld in %s · caliper show %lld · caliper report %lld -o report.html\n",
                (long long)d->run.id, db_path, (long long)d->run.id, (long long)d->run.id);
}

/* ---- JSON and CSV: the cell's protocol columns, then the summary fields */
typedef struct pcol { const char *name; int type; } pcol;   /* 0 int, 1 real, 2 text */
static const pcol PCOLS[] = {
    {"cell_id", 0}, {"seq", 0}, {"kind", 2}, {"target", 2}, {"concurrency", 0},
    {"request_rate", 1}, {"prompt_tokens", 0}, {"prompt_exact", 0}, {"content", 2},
    {"unique_prompts", 0}, {"max_tokens", 0}, {"output_fixed", 0}, {"shot_index", 0},
    {"shot_kind", 2}, {"rest_before_s", 1}, {"process_age_s", 1}, {"start_offset_s", 1},
    {"num_prompts", 0}, {"client_cpu_us_per_chunk", 1}, {"send_lag_p99_ms", 1},
};
#define N_PCOLS (sizeof PCOLS / sizeof PCOLS[0])

static void pvalue(const cal_run_data *d, const cal_cell *c, size_t i, double *v, const char **s)
{
    *s = NULL;
    *v = NAN;
    switch (i) {
    case 0: *v = (double)c->id; break;
    case 1: *v = c->seq; break;
    case 2: *s = cal_cell_kind_name(c->kind); break;
    case 3: *s = c->target; break;
    case 4: *v = c->concurrency; break;
    case 5: *v = c->rate; break;
    case 6: *v = c->prompt_tokens; break;
    case 7: *v = c->prompt_exact; break;
    case 8: *s = c->content; break;
    case 9: *v = c->unique_prompts; break;
    case 10: *v = c->max_tokens; break;
    case 11: *v = c->output_fixed; break;
    case 12: *v = c->shot_index; break;
    case 13: *s = c->shot_kind == CAL_SHOT_UNKNOWN ? "unknown" : kind_short(c->shot_kind); break;
    case 14: *v = c->rest_before_ns / 1e9; break;
    case 15: *v = c->process_age_ns >= 0 ? c->process_age_ns / 1e9 : NAN; break;
    case 16: *v = (c->start_ns - d->run.t0_mono_ns) / 1e9; break;
    case 17: *v = (double)c->n_requests; break;
    case 18: *v = c->chunks ? c->cpu_ns / 1e3 / (double)c->chunks : NAN; break;
    case 19: *v = c->send_lag_p99_ms; break;
    }
}

static void summary_json(json_t *o, const cal_summary *s)
{
    for (size_t i = 0; i < cal_summary_n_fields; i++) {
        const cal_field *fl = &cal_summary_fields[i];
        double v = cal_summary_get(s, fl);
        json_object_set_new(o, fl->name, fl->type == CAL_FIELD_INT ? json_integer((json_int_t)v)
                                                                   : jreal(v));
    }
}

int run_view_json(FILE *f, const cal_run_data *d)
{
    static group g[MAX_GROUPS];
    const cal_run *r = &d->run;
    json_t *root = json_object(), *run = json_object();
    json_object_set_new(root, "format", json_string("caliper-run"));
    json_object_set_new(root, "format_version", json_integer(1));
    json_object_set_new(run, "id", json_integer(r->id));
    json_object_set_new(run, "label", r->label ? json_string(r->label) : json_null());
    json_object_set_new(run, "status", json_string(cal_run_status_name(r->status)));
    json_object_set_new(run, "started_unix_s", json_real(r->started_wall_ns / 1e9));
    json_object_set_new(run, "ended_unix_s", r->ended_wall_ns > 0 ? json_real(r->ended_wall_ns / 1e9)
                                                                 : json_null());
    json_object_set_new(run, "build", r->build ? json_string(r->build) : json_null());
    json_object_set_new(run, "host", parse_obj(r->host_json));
    json_object_set_new(run, "target", parse_obj(r->target_json));
    json_object_set_new(run, "protocol", parse_obj(r->protocol_json));
    json_object_set_new(run, "telemetry", parse_obj(r->telemetry_json));
    json_object_set_new(run, "verdicts", parse_obj(r->verdicts_json));
    json_object_set_new(root, "run", run);

    json_t *cells = json_array();
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        json_t *o = json_object();
        for (size_t k = 0; k < N_PCOLS; k++) {
            double v;
            const char *s;
            pvalue(d, c, k, &v, &s);
            json_object_set_new(o, PCOLS[k].name,
                                PCOLS[k].type == 2 ? json_string(s ? s : "")
                                : PCOLS[k].type == 0 ? json_integer((json_int_t)v) : jreal(v));
        }
        summary_json(o, &c->sum);
        json_t *reqs = json_array();
        for (int64_t j = 0; j < c->n_requests && c->req_first + (size_t)j < d->n_reqs; j++) {
            const cal_req_result *q = &d->reqs[c->req_first + (size_t)j];
            json_t *ro = json_object();
            int64_t base = q->sched_ns > 0 ? q->sched_ns : q->send_ns;
            json_object_set_new(ro, "status", json_string(cal_req_status_name(q->status)));
            json_object_set_new(ro, "http_status", q->http_status ? json_integer(q->http_status) : json_null());
            json_object_set_new(ro, "error", q->error ? json_string(q->error) : json_null());
            json_object_set_new(ro, "sched_offset_ms", q->sched_ns > 0 ? json_real((q->sched_ns - c->start_ns) / 1e6) : json_null());
            json_object_set_new(ro, "send_lag_ms", q->send_ns > 0 && q->sched_ns > 0 ? json_real((q->send_ns - q->sched_ns) / 1e6) : json_null());
            json_object_set_new(ro, "ttft_ms", q->first_token_ns > 0 && base > 0 ? json_real((q->first_token_ns - base) / 1e6) : json_null());
            json_object_set_new(ro, "e2el_ms", q->end_ns > 0 && base > 0 ? json_real((q->end_ns - base) / 1e6) : json_null());
            json_object_set_new(ro, "prompt_tokens", q->prompt_tokens >= 0 ? json_integer(q->prompt_tokens) : json_null());
            json_object_set_new(ro, "output_tokens", q->output_tokens >= 0 ? json_integer(q->output_tokens) : json_null());
            json_object_set_new(ro, "token_source", json_string(q->tok_source == CAL_TOKSRC_USAGE ? "usage" : "chunks"));
            json_object_set_new(ro, "n_chunks", json_integer(q->n_chunks));
            if (q->chunk_ns) {
                json_t *itl = json_array();
                for (int k = 1; k < q->n_chunks; k++)
                    json_array_append_new(itl, json_real((q->chunk_ns[k] - q->chunk_ns[k - 1]) / 1e6));
                json_object_set_new(ro, "itl_ms", itl);
            }
            json_object_set_new(ro, "server_decode_ms", q->server_decode_ms >= 0 ? json_real(q->server_decode_ms) : json_null());
            json_array_append_new(reqs, ro);
        }
        json_object_set_new(o, "requests", reqs);
        json_array_append_new(cells, o);
    }
    json_object_set_new(root, "cells", cells);

    /* per configuration, the quoted shots pooled: what the cells table shows */
    json_t *sum = json_array();
    size_t ng = make_groups(d, g, MAX_GROUPS);
    for (size_t k = 0; k < ng; k++) {
        const cal_cell *q[512];
        int a, b;
        size_t nq = quoted(&g[k], q, &a, &b);
        cal_summary s;
        pooled(d, q, nq, &s);
        const cal_cell *c = g[k].cells[0];
        json_t *o = json_object();
        json_object_set_new(o, "target", json_string(c->target));
        json_object_set_new(o, "concurrency", json_integer(c->concurrency));
        json_object_set_new(o, "request_rate", json_real(c->rate));
        json_object_set_new(o, "prompt_tokens", json_integer(c->prompt_tokens));
        json_object_set_new(o, "content", json_string(c->content));
        json_object_set_new(o, "max_tokens", json_integer(c->max_tokens));
        json_object_set_new(o, "shots_first", json_integer(a));
        json_object_set_new(o, "shots_last", json_integer(b));
        json_object_set_new(o, "shots_pooled", json_integer((json_int_t)nq));
        summary_json(o, &s);
        json_array_append_new(sum, o);
    }
    json_object_set_new(root, "summary", sum);
    int rc = json_dumpf(root, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) == 0 ? 0 : -1;
    fputc('\n', f);
    json_decref(root);
    return rc;
}

static void csv_text(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int run_view_csv(FILE *f, const cal_run_data *d)
{
    fprintf(f, "run_id");
    for (size_t k = 0; k < N_PCOLS; k++) fprintf(f, ",%s", PCOLS[k].name);
    for (size_t i = 0; i < cal_summary_n_fields; i++) fprintf(f, ",%s", cal_summary_fields[i].name);
    fputc('\n', f);
    for (size_t i = 0; i < d->n_cells; i++) {
        const cal_cell *c = &d->cells[i];
        fprintf(f, "%lld", (long long)d->run.id);
        for (size_t k = 0; k < N_PCOLS; k++) {
            double v;
            const char *s;
            pvalue(d, c, k, &v, &s);
            fputc(',', f);
            if (PCOLS[k].type == 2) csv_text(f, s ? s : "");
            else if (!isfinite(v)) ;
            else if (PCOLS[k].type == 0) fprintf(f, "%lld", (long long)v);
            else fprintf(f, "%.6g", v);
        }
        for (size_t j = 0; j < cal_summary_n_fields; j++) {
            const cal_field *fl = &cal_summary_fields[j];
            double v = cal_summary_get(&c->sum, fl);
            fputc(',', f);
            if (!isfinite(v)) continue;   /* absent: empty, never 0 */
            if (fl->type == CAL_FIELD_INT) fprintf(f, "%lld", (long long)v);
            else fprintf(f, "%.*f", fl->decimals + 3, v);
        }
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

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

int cmd_runs(int argc, char **argv)
{
    const char *db = "caliper.db";
    long limit = 0;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"limit", required_argument, 0, 'n'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 'n': if (cli_parse_long("runs", "--limit", optarg, 1, 1000000, &limit)) return CLI_USAGE; break;
        case 'h':
            printf("usage: caliper runs [--db FILE] [--limit N]\n\n"
                   "List stored runs, newest first: id, when, label, target, cells, status.\n"
                   "  --db FILE    the store (default caliper.db)\n"
                   "  --limit N    at most N runs\n");
            return CLI_OK;
        default:
            return cli_usage_error("runs", "%s: unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("runs", "\"%s\": unexpected argument", argv[optind]);
    cal_store *st;
    int orc = open_db("runs", db, &st);
    if (orc) return orc;
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
        json_t *t = parse_obj(runs[i].target_json);
        char tgt[128];
        const char *kind = jstr(t, "kind"), *name = jstr(t, "name"), *url = jstr(t, "url");
        const char *cmdl = jstr(t, "command");
        if (kind && !strcmp(kind, "builtin")) snprintf(tgt, sizeof tgt, "built-in %s", name ? name : "?");
        else if (kind && !strcmp(kind, "launch")) snprintf(tgt, sizeof tgt, "launch: %.60s", cmdl ? cmdl : "?");
        else snprintf(tgt, sizeof tgt, "%.100s", url ? url : "?");
        json_decref(t);
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
        run_view_print(stdout, d, db);
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
        }
        cal_run_data_free(&d);
    }
    cal_store_close(&st);
    return rc;
}
