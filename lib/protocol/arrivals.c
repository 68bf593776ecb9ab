/* Open-loop arrival schedules (arrivals.h): parse and print the --rate
 * patterns, and generate each arrival's offset from a seeded stream by time
 * rescaling, so a ramp is a Poisson process whose rate changes with time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/arrivals.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/units.h"
#include "lib/util/c_locale.h"
#include "lib/util/rng.h"

/* A rate: a positive-or-zero count per second, at most the guard. */
static int parse_rate(const char *what, const char *s, int zero_ok, double *out, char *err,
                      size_t errn)
{
    double v;
    if (cal_unit_parse(CAL_U_COUNT, s, NULL, &v) || !(zero_ok ? v >= 0 : v > 0))
        return cal_why(err, errn, CAL_EINVAL, "%s: \"%s\" is not a %s request rate", what, s,
                       zero_ok ? "non-negative" : "positive");
    if (v > CAL_ARRIVALS_MAX_RATE)
        return cal_why(err, errn, CAL_EINVAL, "%s: \"%s\" is over %g requests/s", what, s,
                       CAL_ARRIVALS_MAX_RATE);
    *out = v;
    return CAL_OK;
}

/* A period: positive, at most a day (the times become int64 nanoseconds). */
static int parse_period(const char *what, const char *s, double *out, char *err, size_t errn)
{
    double v;
    if (cal_unit_parse(CAL_U_TIME, s, "s", &v) || !(v > 0) || v > 86400)
        return cal_why(err, errn, CAL_EINVAL, "%s: \"%s\" is not a time between 0 and 1 d "
                       "(e.g. 60s)", what, s);
    *out = v;
    return CAL_OK;
}

int cal_arrivals_parse(const char *s, cal_arrivals *out, char *err, size_t errn)
{
    if (!s || !out) return cal_why(err, errn, CAL_EINVAL, "rate: missing");
    cal_arrivals a;
    memset(&a, 0, sizeof a);
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return cal_why(err, errn, CAL_EINVAL, "rate: \"%.40s...\" is too long", s);
    snprintf(buf, sizeof buf, "%s", s);
    int rc;
    if (!strncmp(buf, "ramp:", 5)) {
        /* ramp:A-B/T */
        a.kind = CAL_ARR_RAMP;
        /* the dash between the rates, not an exponent's sign (a rate
         * formats as 6.15e-14) */
        char *slash = strchr(buf + 5, '/'), *dash = strchr(buf + 5, '-');
        while (dash && dash > buf + 5 && (dash[-1] == 'e' || dash[-1] == 'E'))
            dash = strchr(dash + 1, '-');
        if (!slash || !dash || dash > slash)
            return cal_why(err, errn, CAL_EINVAL, "rate: \"%s\" is not ramp:FROM-TO/TIME "
                           "(e.g. ramp:1-20/60s)", s);
        *slash = *dash = '\0';
        if ((rc = parse_rate("rate: ramp start", buf + 5, 1, &a.from, err, errn)) ||
            (rc = parse_rate("rate: ramp end", dash + 1, 1, &a.to, err, errn)) ||
            (rc = parse_period("rate: ramp time", slash + 1, &a.over_s, err, errn)))
            return rc;
        if (!(a.from + a.to > 0))
            return cal_why(err, errn, CAL_EINVAL, "rate: \"%s\": a ramp from 0 to 0 sends nothing", s);
    } else if (!strncmp(buf, "burst:", 6)) {
        /* burst:N/every T or burst:N/T */
        a.kind = CAL_ARR_BURST;
        char *slash = strchr(buf + 6, '/');
        if (!slash)
            return cal_why(err, errn, CAL_EINVAL, "rate: \"%s\" is not burst:N/every TIME "
                           "(e.g. burst:8/every 5s)", s);
        *slash = '\0';
        char *end, *per = slash + 1;
        long n = strtol(buf + 6, &end, 10);
        if (end == buf + 6 || *end || n < 1 || n > 1000000)
            return cal_why(err, errn, CAL_EINVAL, "rate: burst size \"%s\" is not a count "
                           "from 1 to 1000000", buf + 6);
        a.burst = n;
        if (!strncmp(per, "every", 5)) per += 5;
        while (*per == ' ') per++;
        if (parse_period("rate: burst period", per, &a.every_s, NULL, 0))
            return cal_why(err, errn, CAL_EINVAL, "rate: \"%s\": its period \"%s\" is not a time "
                           "between 0 and 1 d (e.g. burst:8/every 5s)", s, per);
        if (a.burst / a.every_s > CAL_ARRIVALS_MAX_RATE)
            return cal_why(err, errn, CAL_EINVAL, "rate: \"%s\" is over %g requests/s", s,
                           CAL_ARRIVALS_MAX_RATE);
    } else {
        a.kind = CAL_ARR_POISSON;
        if ((rc = parse_rate("rate", buf, 0, &a.rate, err, errn))) return rc;
    }
    /* a schedule whose mean wait between requests is over a day is not kept
     * (int64 nanoseconds and a run's span bound it): refused, not clamped */
    if (cal_arrivals_mean_rate(&a) < CAL_ARRIVALS_MIN_RATE)
        return cal_why(err, errn, CAL_EINVAL, "rate: \"%s\" is under %.3g requests/s (one a day): "
                       "its schedule cannot be kept", s, CAL_ARRIVALS_MIN_RATE);
    *out = a;
    return CAL_OK;
}

char *cal_arrivals_format(const cal_arrivals *a, char *buf, size_t n)
{
    switch (a->kind) {
    case CAL_ARR_RAMP: cal_snprintf(buf, n, "ramp:%.9g-%.9g/%.9gs", a->from, a->to, a->over_s); break;
    case CAL_ARR_BURST: cal_snprintf(buf, n, "burst:%ld/every %.9gs", a->burst, a->every_s); break;
    default: cal_snprintf(buf, n, "%.9g", a->rate); break;
    }
    return buf;
}

double cal_arrivals_mean_rate(const cal_arrivals *a)
{
    switch (a->kind) {
    case CAL_ARR_RAMP: return (a->from + a->to) / 2;
    case CAL_ARR_BURST: return (double)a->burst / a->every_s;
    default: return a->rate;
    }
}

double cal_arrivals_expected(const cal_arrivals *a, double t)
{
    if (!(t > 0)) return 0;
    switch (a->kind) {
    case CAL_ARR_RAMP: {
        double u = t < a->over_s ? t : a->over_s;
        double area = a->from * u + (a->to - a->from) * u * u / (2 * a->over_s);
        return area + (t > a->over_s ? a->to * (t - a->over_s) : 0);
    }
    case CAL_ARR_BURST: return (floor(t / a->every_s) + 1) * (double)a->burst;
    default: return a->rate * t;
    }
}

size_t cal_arrivals_default_n(const cal_arrivals *a)
{
    double n;
    switch (a->kind) {
    case CAL_ARR_RAMP: n = ceil(cal_arrivals_expected(a, a->over_s)); break;
    case CAL_ARR_BURST: n = 4.0 * (double)a->burst; break;
    default: n = ceil(4 * a->rate); break;
    }
    return n < 8 ? 8 : (size_t)n;
}

void cal_arrival_gen_init(cal_arrival_gen *g, const cal_arrivals *a, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->a = *a;
    g->rng = seed;
}

/* The time at which the integrated rate reaches `area` (the inverse of
 * cal_arrivals_expected for the Poisson kinds). */
static double ramp_time(const cal_arrivals *a, double area)
{
    double at_end = cal_arrivals_expected(a, a->over_s);
    /* past the ramp the rate holds at `to`; a ramp down to 0 has no more
     * to give, and the requests beyond its area arrive at its end */
    if (area >= at_end) return a->to > 0 ? a->over_s + (area - at_end) / a->to : a->over_s;
    /* from·t + c·t² = area with c = (to − from) / 2T; the root in the form
     * that stays exact as c → 0 */
    double c = (a->to - a->from) / (2 * a->over_s);
    double disc = a->from * a->from + 4 * c * area;
    return 2 * area / (a->from + sqrt(disc > 0 ? disc : 0));
}

int64_t cal_arrival_next_ns(cal_arrival_gen *g)
{
    const cal_arrivals *a = &g->a;
    uint64_t k = g->k++;
    if (a->kind == CAL_ARR_BURST)
        return cal_span_ns((double)(k / (uint64_t)a->burst) * a->every_s);
    double u = (double)(cal_splitmix64(&g->rng) >> 11) * 0x1.0p-53;
    g->area += -log1p(-u);
    double t = a->kind == CAL_ARR_RAMP ? ramp_time(a, g->area) : g->area / a->rate;
    return cal_span_ns(t);
}
