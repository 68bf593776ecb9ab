/* The saturation sweep's steps, stopping rule and knee (saturation.h). */
#include <math.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/saturation.h"

int cal_sat_init(cal_sat *s, double start, double max_rate, int steps, char *err, size_t errn)
{
    if (steps < 2 || steps > CAL_SAT_MAX_STEPS)
        return cal_why(err, errn, CAL_EINVAL, "sweep_steps: %d is not from 2 to %d", steps,
                       CAL_SAT_MAX_STEPS);
    if (!(start > 0) || !isfinite(start))
        return cal_why(err, errn, CAL_EINVAL, "rate: %g is not a positive start rate", start);
    if (!(max_rate > start) || !isfinite(max_rate))
        return cal_why(err, errn, CAL_EINVAL, "sweep_max_rate: %g is not above the start rate %g",
                       max_rate, start);
    double f = pow(max_rate / start, 1.0 / (steps - 1));
    if (f < CAL_SAT_MIN_FACTOR)
        return cal_why(err, errn, CAL_EINVAL, "sweep_steps: %d steps from %g to %g req/s are %.3g× "
                       "apart, closer than %g× (a %g %% gain could not show): fewer steps or a "
                       "higher maximum", steps, start, max_rate, f, CAL_SAT_MIN_FACTOR,
                       CAL_SAT_GAIN * 100);
    memset(s, 0, sizeof *s);
    s->start = start;
    s->max_rate = max_rate;
    s->steps = steps;
    s->factor = f;
    return CAL_OK;
}

int cal_sat_next(const cal_sat *s, double *rate)
{
    if (s->saturated || s->done >= s->steps) return 0;
    /* the last step is max_rate itself, not a power's rounding of it */
    *rate = s->done == s->steps - 1 ? s->max_rate : s->start * pow(s->factor, s->done);
    return 1;
}

void cal_sat_record(cal_sat *s, double goodput)
{
    if (s->done >= s->steps || s->done >= CAL_SAT_MAX_STEPS) return;
    cal_sat_next(s, &s->rate[s->done]);
    s->goodput[s->done] = isfinite(goodput) && goodput > 0 ? goodput : 0;
    s->done++;
    s->saturated = cal_sat_rule(s->goodput, (size_t)s->done);
}

int cal_sat_rule(const double *g, size_t n)
{
    if (n < 3) return 0;
    const double k = 1 + CAL_SAT_GAIN;
    return g[n - 1] <= k * g[n - 2] && g[n - 2] <= k * g[n - 3];
}

int cal_sat_knee(const double *g, size_t n)
{
    double best = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(g[i]) && g[i] > best) best = g[i];
    if (!(best > 0)) return -1;
    for (size_t i = 0; i < n; i++)
        if (isfinite(g[i]) && g[i] >= (1 - CAL_SAT_GAIN) * best) return (int)i;
    return -1;
}
