/* Goodput (goodput.h): the --slo bounds, parsed and printed through the
 * unit table, checked per request with the summary's definitions, and
 * counted over a cell. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/goodput.h"
#include "caliper/series.h"
#include "caliper/stats.h"
#include "caliper/units.h"
#include "lib/util/c_locale.h"

/* The keys, in canonical order, and where each bound lives. */
static const struct { const char *key; size_t off; } KEYS[] = {
    {"ttft", offsetof(cal_slo, ttft_ms)},
    {"itl", offsetof(cal_slo, itl_p99_ms)},
    {"tpot", offsetof(cal_slo, tpot_ms)},
    {"e2e", offsetof(cal_slo, e2e_ms)},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static double *bound(cal_slo *s, size_t k) { return (double *)((char *)s + KEYS[k].off); }
static double get(const cal_slo *s, size_t k) { return *(const double *)((const char *)s + KEYS[k].off); }

void cal_slo_init(cal_slo *s)
{
    for (size_t k = 0; k < N_KEYS; k++) *bound(s, k) = 0;
}

int cal_slo_given(const cal_slo *s)
{
    for (size_t k = 0; s && k < N_KEYS; k++)
        if (get(s, k) > 0) return 1;
    return 0;
}

int cal_slo_parse(const char *s, cal_slo *out, char *err, size_t errn)
{
    if (!s || !out) return cal_why(err, errn, CAL_EINVAL, "slo: missing");
    cal_slo v;
    cal_slo_init(&v);
    char buf[256];
    if (!*s) return cal_why(err, errn, CAL_EINVAL, "slo: \"\" names no bound (e.g. ttft=500ms,tpot=50ms)");
    if (strlen(s) >= sizeof buf) return cal_why(err, errn, CAL_EINVAL, "slo: \"%.40s...\" is too long", s);
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq)
            return cal_why(err, errn, CAL_EINVAL, "slo: \"%s\" is not KEY=TIME (keys: ttft, itl, "
                           "tpot, e2e)", item);
        *eq = '\0';
        size_t k = 0;
        while (k < N_KEYS && strcmp(item, KEYS[k].key)) k++;
        if (k == N_KEYS)
            return cal_why(err, errn, CAL_EINVAL, "slo: \"%s\" is not a bound (ttft, itl, tpot, e2e)",
                           item);
        if (get(&v, k) > 0)
            return cal_why(err, errn, CAL_EINVAL, "slo: %s is given twice", item);
        double sec;
        if (cal_unit_parse(CAL_U_TIME, eq + 1, "ms", &sec) || !(sec > 0) || sec > 86400)
            return cal_why(err, errn, CAL_EINVAL, "slo: %s: \"%s\" is not a time between 0 and 1 d "
                           "(e.g. 500ms)", item, eq + 1);
        *bound(&v, k) = sec * 1e3;
    }
    if (!cal_slo_given(&v))
        return cal_why(err, errn, CAL_EINVAL, "slo: \"%s\" names no bound (e.g. ttft=500ms)", s);
    *out = v;
    return CAL_OK;
}

char *cal_slo_format(const cal_slo *s, char *buf, size_t n)
{
    size_t used = 0;
    if (n) buf[0] = '\0';
    for (size_t k = 0; s && k < N_KEYS && used < n; k++) {
        double v = get(s, k);
        if (!(v > 0)) continue;
        int w = cal_snprintf(buf + used, n - used, "%s%s=%.9gms", used ? "," : "", KEYS[k].key, v);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* p99 of one request's chunk gaps, ms; NAN when it has fewer than two
 * chunks; -1 when the times were not kept or no memory. */
static double itl_p99_ms(const cal_req_result *r)
{
    if (r->n_chunks < 2) return NAN;
    cal_itl_iter it;
    size_t n = cal_itl_begin(&it, r);
    if (!n) return -1;
    double *g = malloc(n * sizeof *g);
    if (!g) return -1;
    size_t k = 0;
    while (k < n && cal_itl_next(&it, &g[k])) k++;
    double p = cal_stats_percentile(g, k, 99);
    free(g);
    return p;
}

/* 1 when series value v (NAN: undefined for this request) is over bound */
static int over(double v, double bound) { return bound > 0 && isfinite(v) && v > bound; }

int cal_slo_met(const cal_slo *s, const cal_req_result *r)
{
    if (r->status != CAL_REQ_OK) return 0;
    /* the summary's definitions (series.h) */
    double ttft = cal_req_sample(r, CAL_S_TTFT_MS);
    if (s->ttft_ms > 0 && (!isfinite(ttft) || ttft > s->ttft_ms)) return 0;
    if (over(cal_req_sample(r, CAL_S_E2E_MS), s->e2e_ms)) return 0;
    if (over(cal_req_sample(r, CAL_S_TPOT_MS), s->tpot_ms)) return 0;
    if (s->itl_p99_ms > 0) {
        double p = itl_p99_ms(r);
        if (p < 0) return -1;
        if (p > s->itl_p99_ms) return 0;
    }
    return 1;
}

int cal_slo_count(const cal_slo *s, const cal_req_result *r, size_t n, size_t *met)
{
    *met = 0;
    if (!cal_slo_given(s)) return CAL_EABSENT;
    int unknown = 0;
    for (size_t i = 0; i < n; i++) {
        int m = cal_slo_met(s, &r[i]);
        if (m > 0) (*met)++;
        else if (m < 0) unknown = 1;
    }
    return unknown ? CAL_EABSENT : CAL_OK;
}

double cal_goodput(const cal_slo *s, const cal_req_result *r, size_t n, double duration_s)
{
    size_t met;
    if (!(duration_s > 0) || cal_slo_count(s, r, n, &met) != CAL_OK) return NAN;
    return (double)met / duration_s;
}
