/* Length distributions for prompts, answers and think times (fixed,
 * uniform, clipped normal, or the dataset's own), drawn from a seeded
 * splitmix64 stream so a run's lengths are reproducible from its seed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/util/c_locale.h"
#include "caliper/error.h"
#include "caliper/workload_traffic.h"
#include "lib/util/rng.h"

static double unit(uint64_t *s) { return (double)(cal_splitmix64(s) >> 11) * 0x1.0p-53; }

/* A whole number in [1, max] that ends at *end. */
static int num(const char *s, char **end, int max, long *v)
{
    errno = 0;
    *v = strtol(s, end, 10);
    return errno || *end == s || *v < 1 || *v > max;
}

int cal_lendist_parse(const char *s, int max, cal_lendist *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    char *end;
    long a, b;
    if (!s || !*s) {
        cal_snprintf(why, why_len, "\"\" is not a length");
        return CAL_EINVAL;
    }
    if (!strcmp(s, "dataset")) {
        out->kind = CAL_LEN_DATASET;
        return CAL_OK;
    }
    if (!strncmp(s, "uniform:", 8)) {
        if (num(s + 8, &end, max, &a) || *end != '-' || num(end + 1, &end, max, &b) || *end) {
            cal_snprintf(why, why_len, "\"%s\" is not uniform:A-B with whole numbers 1..%d", s, max);
            return CAL_EINVAL;
        }
        if (a > b) {
            cal_snprintf(why, why_len, "\"%s\": the low end is above the high end", s);
            return CAL_EINVAL;
        }
        out->kind = CAL_LEN_UNIFORM;
        out->lo = (int)a;
        out->hi = (int)b;
        return CAL_OK;
    }
    if (!strncmp(s, "normal:", 7)) {
        errno = 0;
        double m = cal_strtod(s + 7, &end);
        double sd = NAN;
        if (!errno && end != s + 7 && *end == ',') {
            const char *q = end + 1;
            sd = cal_strtod(q, &end);
            if (end == q || *end) sd = NAN;
        }
        if (!(m >= 1 && m <= max) || !(sd >= 0 && sd <= max)) {
            cal_snprintf(why, why_len, "\"%s\" is not normal:MEAN,SD with a mean in 1..%d and SD >= 0",
                     s, max);
            return CAL_EINVAL;
        }
        out->kind = CAL_LEN_NORMAL;
        out->mean = m;
        out->sd = sd;
        out->lo = 1;
        double hi = m + 4 * sd;
        out->hi = hi > max ? max : (int)hi;
        return CAL_OK;
    }
    if (num(s, &end, max, &a) || *end) {
        cal_snprintf(why, why_len, "\"%s\" is not N, uniform:A-B, normal:MEAN,SD or dataset "
                               "(N a whole number 1..%d)", s, max);
        return CAL_EINVAL;
    }
    out->kind = CAL_LEN_FIXED;
    out->n = (int)a;
    return CAL_OK;
}

char *cal_lendist_text(const cal_lendist *d, char *buf, size_t n)
{
    switch (d->kind) {
    case CAL_LEN_UNIFORM: cal_snprintf(buf, n, "uniform:%d-%d", d->lo, d->hi); break;
    case CAL_LEN_NORMAL: cal_snprintf(buf, n, "normal:%g,%g", d->mean, d->sd); break;
    case CAL_LEN_DATASET: cal_snprintf(buf, n, "dataset"); break;
    default: cal_snprintf(buf, n, "%d", d->n); break;
    }
    return buf;
}

int cal_lendist_draw(const cal_lendist *d, uint64_t *state)
{
    switch (d->kind) {
    case CAL_LEN_UNIFORM:
        return d->lo + (int)(cal_splitmix64(state) % (uint64_t)(d->hi - d->lo + 1));
    case CAL_LEN_NORMAL: {
        /* Box–Muller; clipped so a long tail cannot ask for a prompt the
         * plan never meant (and never below one token) */
        double u1 = unit(state), u2 = unit(state);
        double z = sqrt(-2 * log(1 - u1)) * cos(2 * M_PI * u2);
        double v = round(d->mean + d->sd * z);
        if (v < d->lo) v = d->lo;
        if (v > d->hi) v = d->hi;
        return (int)v;
    }
    default:
        return d->n;
    }
}

double cal_lendist_mean(const cal_lendist *d)
{
    switch (d->kind) {
    case CAL_LEN_UNIFORM: return (d->lo + d->hi) / 2.0;
    case CAL_LEN_NORMAL: return d->mean;
    case CAL_LEN_DATASET: return NAN;
    default: return d->n;
    }
}
