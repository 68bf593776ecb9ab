/* The unit table: parsing and printing share it, so they cannot disagree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "caliper/error.h"
#include "caliper/units.h"
#include "lib/util/c_locale.h"

typedef struct { const char *sym; double mul; int print; } unit_def;

/* Each list runs small to large; `print` marks the units output may choose. */
static const unit_def U_TIME[] = {
    {"ns", 1e-9, 1}, {"us", 1e-6, 1}, {"µs", 1e-6, 0}, {"ms", 1e-3, 1},
    {"s", 1, 1}, {"sec", 1, 0}, {"m", 60, 0}, {"min", 60, 1}, {"h", 3600, 1},
    {"d", 86400, 1}, {NULL, 0, 0}};
static const unit_def U_BYTES[] = {
    {"B", 1, 1}, {"KB", 1e3, 1}, {"kB", 1e3, 0}, {"KiB", 1024.0, 0},
    {"MB", 1e6, 1}, {"MiB", 1048576.0, 0}, {"GB", 1e9, 1},
    {"GiB", 1073741824.0, 0}, {"TB", 1e12, 1}, {"TiB", 1099511627776.0, 0},
    {NULL, 0, 0}};
static const unit_def U_COUNT[] = {
    {"", 1, 1}, {"k", 1e3, 1}, {"K", 1e3, 0}, {"Ki", 1024.0, 0}, {"M", 1e6, 1},
    {"Mi", 1048576.0, 0}, {"G", 1e9, 1}, {"B", 1e9, 0}, {"Gi", 1073741824.0, 0},
    {NULL, 0, 0}};
static const unit_def U_POWER[] = {
    {"mW", 1e-3, 1}, {"W", 1, 1}, {"kW", 1e3, 1}, {NULL, 0, 0}};
static const unit_def U_ENERGY[] = {
    {"mJ", 1e-3, 1}, {"J", 1, 1}, {"kJ", 1e3, 1}, {"Wh", 3600, 0},
    {"MJ", 1e6, 1}, {"kWh", 3.6e6, 0}, {NULL, 0, 0}};
static const unit_def U_FREQ[] = {
    {"Hz", 1, 1}, {"kHz", 1e3, 1}, {"MHz", 1e6, 1}, {"GHz", 1e9, 1}, {NULL, 0, 0}};
static const unit_def U_TOKRATE[] = {
    {"tok/s", 1, 1}, {"ktok/s", 1e3, 1}, {"Mtok/s", 1e6, 1}, {NULL, 0, 0}};
static const unit_def U_RATIO[] = {
    {"", 1, 1}, {"x", 1, 0}, {"×", 1, 0}, {"%", 0.01, 0}, {NULL, 0, 0}};

static const unit_def *table(cal_unit u)
{
    switch (u) {
    case CAL_U_TIME:      return U_TIME;
    case CAL_U_BYTES:     return U_BYTES;
    case CAL_U_BANDWIDTH: return U_BYTES;   /* with a "/s" suffix */
    case CAL_U_COUNT:     return U_COUNT;
    case CAL_U_POWER:     return U_POWER;
    case CAL_U_ENERGY:    return U_ENERGY;
    case CAL_U_FREQ:      return U_FREQ;
    case CAL_U_TOKRATE:   return U_TOKRATE;
    case CAL_U_RATIO:     return U_RATIO;
    }
    return U_RATIO;
}

const char *cal_unit_name(cal_unit u)
{
    static const char *names[] = {"time", "bytes", "bandwidth", "count", "power",
                                  "energy", "frequency", "token rate", "ratio"};
    return (unsigned)u < sizeof names / sizeof *names ? names[u] : "?";
}

static int lookup(cal_unit u, const char *sym, double *mul)
{
    char tmp[32];
    if (u == CAL_U_BANDWIDTH) {
        size_t n = strlen(sym);
        if (n < 3 || n >= sizeof tmp || strcmp(sym + n - 2, "/s") != 0) return CAL_EINVAL;
        memcpy(tmp, sym, n - 2);
        tmp[n - 2] = '\0';
        sym = tmp;
    }
    for (const unit_def *d = table(u); d->sym; d++)
        if (strcmp(d->sym, sym) == 0) { *mul = d->mul; return CAL_OK; }
    /* Accept case-insensitive matches where they are unambiguous
     * ("gb" for GB, "MS" for ms) but never m vs M for time/count. */
    const unit_def *hit = NULL;
    for (const unit_def *d = table(u); d->sym; d++)
        if (strcasecmp(d->sym, sym) == 0) {
            if (hit && hit->mul != d->mul) return CAL_EINVAL;
            hit = d;
        }
    if (!hit || u == CAL_U_TIME || u == CAL_U_COUNT) return CAL_EINVAL;
    *mul = hit->mul;
    return CAL_OK;
}

int cal_unit_parse(cal_unit u, const char *s, const char *bare_unit, double *out)
{
    if (!s || !*s) return CAL_EINVAL;
    char *end;
    double v = cal_strtod(s, &end);
    if (end == s || !isfinite(v)) return CAL_EINVAL;
    /* reject hex and inf/nan spellings that strtod accepts */
    for (const char *p = s; p < end; p++)
        if (*p == 'x' || *p == 'X' || *p == 'n' || *p == 'N' || *p == 'i' || *p == 'I')
            return CAL_EINVAL;
    while (*end == ' ') end++;
    double mul = 1;
    if (*end == '\0') {
        if (bare_unit) {
            if (lookup(u, bare_unit, &mul)) return CAL_EINVAL;
        } else if (v != 0 && u != CAL_U_COUNT && u != CAL_U_RATIO && u != CAL_U_TOKRATE) {
            return CAL_EINVAL;
        }
    } else if (lookup(u, end, &mul)) {
        return CAL_EINVAL;
    }
    double r = v * mul;
    if (!isfinite(r)) return CAL_EINVAL;
    *out = r;
    return CAL_OK;
}

static char *fmt_num(double v, int sig, const char *sym, const char *suffix,
                     char *buf, size_t n)
{
    double a = fabs(v);
    int decimals = 0;
    if (a >= 1e9 || (a > 0 && a < 1e-3)) {  /* beyond the unit range: scientific */
        cal_snprintf(buf, n, "%.*e%s%s%s", sig - 1, v, *sym || *suffix ? " " : "", sym, suffix);
        return buf;
    }
    if (a > 0) {
        int mag = (int)floor(log10(a)) + 1;     /* digits before the point */
        decimals = sig - mag;
        if (decimals < 0) decimals = 0;
        if (decimals > 9) decimals = 9;
    } else {
        decimals = 0;
    }
    cal_snprintf(buf, n, "%.*f%s%s%s", decimals, v, *sym || *suffix ? " " : "", sym, suffix);
    return buf;
}

char *cal_unit_format(cal_unit u, double v, int sig, char *buf, size_t n)
{
    if (sig <= 0) sig = 3;
    if (!isfinite(v)) { snprintf(buf, n, "—"); return buf; }
    const char *suffix = u == CAL_U_BANDWIDTH ? "/s" : "";
    const unit_def *best = NULL;
    double a = fabs(v);
    for (const unit_def *d = table(u); d->sym; d++) {
        if (!d->print) continue;
        if (!best) best = d;
        if (a >= d->mul * 0.9995) best = d;
    }
    if (u == CAL_U_RATIO || (u == CAL_U_COUNT && a < 1e4)) {
        cal_snprintf(buf, n, "%.*g", sig > 3 ? sig : 4, v);
        return buf;
    }
    return fmt_num(v / best->mul, sig, best->sym, suffix, buf, n);
}
