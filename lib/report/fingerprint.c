/* caliper — protocol fingerprints: the field list, their text, and the
 * field-by-field comparison that decides whether two numbers may be divided
 * (SPEC 1.5 item 5: same shot, rest, tool, cell, content, length, column). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/fingerprint.h"
#include "caliper/store.h"
#include "lib/util/c_locale.h"
#include "report_internal.h"

static const char *const FIELD_NAMES[CAL_FPF__N] = {
    "shot kind", "shot range", "rest", "warm-up", "concurrency",
    "request rate", "column", "prompt length", "content", "output policy",
    "streaming", "API", "probe", "host", "SLO", "stored protocol",
};

void cal_fp_init(cal_fingerprint *fp)
{
    memset(fp, 0, sizeof *fp);
    fp->shot_kind = CAL_SHOT_UNKNOWN;
    fp->rest_s = NAN;
    fp->warmup = -1;
    fp->request_rate = NAN;
    fp->column = CAL_COL_AGGREGATE;
    fp->streaming = -1;
}

void cal_fp_set(char dst[CAL_FP_STR], const char *s)
{
    snprintf(dst, CAL_FP_STR, "%.*s", CAL_FP_STR - 1, s ? s : "");
}

const char *cal_fp_field_name(cal_fp_field f)
{
    return (unsigned)f < CAL_FPF__N ? FIELD_NAMES[f] : "?";
}


static const char *str_or_unknown(const char *s)
{
    return s[0] ? s : "unknown";
}

/* Seconds printed the way the unit table would read them back. */
static void fmt_seconds(double s, char *buf, size_t n)
{
    if (isnan(s)) snprintf(buf, n, "unknown");
    else if (s == 0) snprintf(buf, n, "0 s");
    else if (s < 1) snprintf(buf, n, "%.0f ms", s * 1e3);
    else cal_snprintf(buf, n, "%g s", s);
}

char *cal_fp_field_value(const cal_fingerprint *fp, cal_fp_field f,
                         char *buf, size_t n)
{
    if (!n) return buf;
    switch (f) {
    case CAL_FPF_SHOT_KIND:
        snprintf(buf, n, "%s", cal_shot_kind_name(fp->shot_kind));
        break;
    case CAL_FPF_SHOT_RANGE:
        if (fp->shot_first <= 0) snprintf(buf, n, "unknown");
        else if (fp->shot_last <= fp->shot_first) snprintf(buf, n, "%d", fp->shot_first);
        else snprintf(buf, n, "%d–%d", fp->shot_first, fp->shot_last);
        break;
    case CAL_FPF_REST:
        fmt_seconds(fp->rest_s, buf, n);
        break;
    case CAL_FPF_WARMUP:
        if (fp->warmup < 0) snprintf(buf, n, "unknown");
        else snprintf(buf, n, "%d", fp->warmup);
        break;
    case CAL_FPF_CONCURRENCY:
        if (fp->concurrency <= 0) snprintf(buf, n, "unbounded/unknown");
        else snprintf(buf, n, "%d", fp->concurrency);
        break;
    case CAL_FPF_RATE:
        if (isnan(fp->request_rate)) snprintf(buf, n, "unknown");
        else if (isinf(fp->request_rate)) snprintf(buf, n, "all at once");
        else if (fp->request_rate == 0) snprintf(buf, n, "closed loop");
        else cal_snprintf(buf, n, "%g req/s", fp->request_rate);
        break;
    case CAL_FPF_COLUMN:
        snprintf(buf, n, "%s", cal_column_name(fp->column));
        break;
    case CAL_FPF_PROMPT:
        if (fp->prompt_tokens <= 0) snprintf(buf, n, "unknown");
        else snprintf(buf, n, "%ld tok", fp->prompt_tokens);
        break;
    case CAL_FPF_CONTENT:   snprintf(buf, n, "%s", str_or_unknown(fp->content)); break;
    case CAL_FPF_OUTPUT:    snprintf(buf, n, "%s", str_or_unknown(fp->output_policy)); break;
    case CAL_FPF_STREAMING:
        snprintf(buf, n, "%s", fp->streaming < 0 ? "unknown" : fp->streaming ? "yes" : "no");
        break;
    case CAL_FPF_API:       snprintf(buf, n, "%s", str_or_unknown(fp->api)); break;
    case CAL_FPF_PROBE:     snprintf(buf, n, "%s", str_or_unknown(fp->probe)); break;
    case CAL_FPF_HOST:      snprintf(buf, n, "%s", str_or_unknown(fp->host)); break;
    case CAL_FPF_SLO:       snprintf(buf, n, "%s", fp->slo[0] ? fp->slo : "none"); break;
    case CAL_FPF_PROTOCOL:
        if (fp->damaged[0]) snprintf(buf, n, "damaged (%.*s)", (int)(n > 12 ? n - 12 : 0), fp->damaged);
        else snprintf(buf, n, "intact");
        break;
    default:                snprintf(buf, n, "?"); break;
    }
    return buf;
}

static int dbl_eq(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b)) return a == b;
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) <= 1e-9 * (m > 1 ? m : 1);
}

static int field_equal(const cal_fingerprint *a, const cal_fingerprint *b,
                       cal_fp_field f)
{
    switch (f) {
    case CAL_FPF_SHOT_KIND:   return a->shot_kind == b->shot_kind;
    case CAL_FPF_SHOT_RANGE:  return a->shot_first == b->shot_first &&
                                     a->shot_last == b->shot_last;
    case CAL_FPF_REST:        return dbl_eq(a->rest_s, b->rest_s);
    case CAL_FPF_WARMUP:      return a->warmup == b->warmup;
    case CAL_FPF_CONCURRENCY: return a->concurrency == b->concurrency;
    case CAL_FPF_RATE:        return dbl_eq(a->request_rate, b->request_rate);
    case CAL_FPF_COLUMN:      return a->column == b->column;
    case CAL_FPF_PROMPT:      return a->prompt_tokens == b->prompt_tokens;
    case CAL_FPF_CONTENT:     return !strcmp(a->content, b->content);
    case CAL_FPF_OUTPUT:      return !strcmp(a->output_policy, b->output_policy);
    case CAL_FPF_STREAMING:   return a->streaming == b->streaming;
    case CAL_FPF_API:         return !strcmp(a->api, b->api);
    case CAL_FPF_PROBE:       return !strcmp(a->probe, b->probe);
    case CAL_FPF_HOST:        return !strcmp(a->host, b->host);
    case CAL_FPF_SLO:         return !strcmp(a->slo, b->slo);
    case CAL_FPF_PROTOCOL:    return !a->damaged[0] && !b->damaged[0];
    default:                  return 1;
    }
}

size_t cal_fp_diff(const cal_fingerprint *a, const cal_fingerprint *b,
                   cal_fp_difference *out, size_t cap)
{
    size_t nd = 0;
    for (int f = 0; f < CAL_FPF__N; f++) {
        if (field_equal(a, b, (cal_fp_field)f)) continue;
        if (out && nd < cap) {
            out[nd].field = (cal_fp_field)f;
            cal_fp_field_value(a, (cal_fp_field)f, out[nd].a, sizeof out[nd].a);
            cal_fp_field_value(b, (cal_fp_field)f, out[nd].b, sizeof out[nd].b);
        }
        nd++;
    }
    return nd;
}

char *cal_fp_diff_text(const cal_fp_difference *d, size_t nd,
                       char *buf, size_t n)
{
    if (!n) return buf;
    buf[0] = 0;
    size_t used = 0;
    for (size_t i = 0; i < nd && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s %s vs %s", i ? "; " : "",
                         cal_fp_field_name(d[i].field), d[i].a, d[i].b);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

char *cal_fp_describe(const cal_fingerprint *fp, char *buf, size_t n)
{
    char shots[64], rest[32], rate[32];
    if (!n) return buf;
    if (fp->shot_kind == CAL_SHOT_CONSECUTIVE)
        snprintf(shots, sizeof shots, "mean of consecutive requests (no cold/warm split)");
    else if (fp->shot_first > 0 && fp->shot_last > fp->shot_first)
        snprintf(shots, sizeof shots, "%s shots %d–%d",
                 cal_shot_kind_name(fp->shot_kind), fp->shot_first, fp->shot_last);
    else if (fp->shot_first > 0)
        snprintf(shots, sizeof shots, "%s shot %d",
                 cal_shot_kind_name(fp->shot_kind), fp->shot_first);
    else
        snprintf(shots, sizeof shots, "shots %s", cal_shot_kind_name(fp->shot_kind));
    fmt_seconds(fp->rest_s, rest, sizeof rest);
    cal_fp_field_value(fp, CAL_FPF_RATE, rate, sizeof rate);
    char conc[48];
    if (fp->concurrency > 0) snprintf(conc, sizeof conc, "c%d", fp->concurrency);
    else snprintf(conc, sizeof conc, "concurrency unbounded");
    char warm[24];
    if (fp->warmup < 0) snprintf(warm, sizeof warm, "warm-up ?");
    else snprintf(warm, sizeof warm, "warm-up %d", fp->warmup);
    char prompt[48];
    if (fp->prompt_tokens > 0) snprintf(prompt, sizeof prompt, "%ld tok", fp->prompt_tokens);
    else snprintf(prompt, sizeof prompt, "prompt ? tok");
    snprintf(buf, n, "%s · rest %s · %s · %s%s%s · %s %s · out %s · %s · %s · %s · %s",
             shots, rest, warm, conc,
             (!isnan(fp->request_rate) && fp->request_rate != 0) ? " · " : "",
             (!isnan(fp->request_rate) && fp->request_rate != 0) ? rate : "",
             prompt, str_or_unknown(fp->content), str_or_unknown(fp->output_policy),
             fp->streaming < 0 ? "stream ?" : fp->streaming ? "stream" : "no stream",
             str_or_unknown(fp->api), str_or_unknown(fp->probe),
             str_or_unknown(fp->host));
    return buf;
}

/* ---- a stored run's fingerprints ---------------------------------------- */

char *cal_fp_host_of(const char *host_json, char *dst, size_t n)
{
    if (!n) return dst;
    dst[0] = 0;
    json_t *h = host_json ? json_loads(host_json, 0, NULL) : NULL;
    if (!h) return dst;
    char cpu[96] = "", os[64] = "", gpu[96] = "";
    cal_report_jstr(h, "cpu", cpu, sizeof cpu);
    cal_report_jstr(h, "os", os, sizeof os);
    cal_report_jstr(h, "gpu", gpu, sizeof gpu);
    double cores = cal_report_jnum(h, "cores"), mem = cal_report_jnum(h, "memory_bytes");
    size_t used = 0;
    used += (size_t)snprintf(dst + used, n - used, "%s", cpu[0] ? cpu : "unknown CPU");
    if (isfinite(cores) && used < n) used += (size_t)snprintf(dst + used, n - used, " (%.0f cores)", cores);
    if (gpu[0] && used < n) used += (size_t)snprintf(dst + used, n - used, ", %s", gpu);
    if (isfinite(mem) && used < n) used += (size_t)snprintf(dst + used, n - used, ", %.0f GiB", mem / 1073741824.0);
    if (os[0] && used < n) snprintf(dst + used, n - used, ", %s", os);
    json_decref(h);
    return dst;
}

char *cal_fp_probe_of(const char *build, char *dst, size_t n)
{
    char tool[32] = "", ver[32] = "";
    if (build && sscanf(build, "%31s %31s", tool, ver) == 2) snprintf(dst, n, "%s %s", tool, ver);
    else snprintf(dst, n, "caliper");
    return dst;
}

int cal_fingerprint_of(const cal_run_data *d, const size_t *group, size_t n, cal_shot_kind kind,
                       cal_fingerprint *fp)
{
    if (!d || !group || !n || !fp) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (group[i] >= d->n_cells) return CAL_EINVAL;
    const cal_protocol *p = &d->proto;
    const cal_cell *c0 = &d->cells[group[0]];
    cal_fp_init(fp);
    fp->shot_kind = kind;
    fp->shot_first = c0->shot_index;
    fp->shot_last = d->cells[group[n - 1]].shot_index;
    fp->rest_s = (double)c0->rest_before_ns / 1e9;
    for (size_t i = 1; i < n; i++)   /* a group with mixed rests has no single rest */
        if (d->cells[group[i]].rest_before_ns != c0->rest_before_ns) fp->rest_s = NAN;
    /* a stored protocol without a warm-up count had none */
    fp->warmup = d->run.protocol_json ? (p->warmup >= 0 ? p->warmup : 0) : -1;
    fp->concurrency = c0->concurrency;
    fp->request_rate = c0->rate;
    fp->prompt_tokens = c0->prompt_tokens;
    snprintf(fp->content, sizeof fp->content, "%s%s", c0->content,
             c0->content[0] && !c0->unique_prompts ? " (repeated prompt)" : "");
    /* prompts from a dataset: the dataset (name and hash) is the content, so
     * runs on different datasets are never divided (docs/workload.md) */
    if (p->dataset.present)
        snprintf(fp->content, sizeof fp->content, "dataset:%.*s", (int)sizeof fp->content - 9, p->dataset.id);
    if (c0->output_fixed) snprintf(fp->output_policy, sizeof fp->output_policy, "fixed %d", c0->max_tokens);
    else if (c0->max_tokens > 0) snprintf(fp->output_policy, sizeof fp->output_policy, "up to %d", c0->max_tokens);
    fp->streaming = 1;
    cal_fp_set(fp->api, p->target.api[0] ? p->target.api : "completions");
    cal_fp_probe_of(d->run.build, fp->probe, sizeof fp->probe);
    cal_fp_host_of(d->run.host_json, fp->host, sizeof fp->host);
    cal_fp_set(fp->slo, p->slo);
    if (p->n_damaged) cal_fp_set(fp->damaged, p->damaged_field);
    return CAL_OK;
}
