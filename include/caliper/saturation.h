/* caliper saturation — `--sweep saturation`: raise the offered rate step by
 * step until goodput stops rising, and name the knee (docs/load.md).
 *
 * Steps: offered rate r_k = start × f^k, k = 0 .. steps−1, with
 * f = (max / start)^(1 / (steps − 1)), so the sweep never passes max.
 * Stopping rule: after step k >= 2, stop when goodput rose by less than
 * CAL_SAT_GAIN over each of the last two steps (G_k <= (1 + g)·G_{k−1} and
 * G_{k−1} <= (1 + g)·G_{k−2}): two steps of more offered load bought
 * nothing. Knee: the first step whose goodput is within g of the highest
 * goodput of the sweep — the lowest offered rate that already gets
 * (nearly) all the goodput the engine gives. A sweep that reached its last
 * step without the rule firing is not saturated: goodput was still rising,
 * and no knee is claimed. Plain data, no allocation. */
#ifndef CALIPER_SATURATION_H
#define CALIPER_SATURATION_H
#include <stddef.h>

#define CAL_SAT_GAIN 0.05        /* a step's goodput gain that counts as rising */
#define CAL_SAT_MAX_STEPS 32
#define CAL_SAT_MIN_FACTOR 1.10  /* steps closer than this could not show a gain of 2 g */

typedef struct cal_sat {
    double start, max_rate;      /* req/s */
    int    steps;                /* at most */
    double factor;               /* rate ratio between steps */
    int    done;                 /* steps recorded */
    double rate[CAL_SAT_MAX_STEPS], goodput[CAL_SAT_MAX_STEPS];
    int    saturated;            /* the stopping rule fired */
} cal_sat;

/* A sweep from start to max_rate in `steps` steps (2 .. CAL_SAT_MAX_STEPS,
 * 0 < start < max_rate, factor >= CAL_SAT_MIN_FACTOR). CAL_EINVAL naming
 * the value that breaks it in err[errn] (err may be NULL). */
int cal_sat_init(cal_sat *s, double start, double max_rate, int steps, char *err, size_t errn);

/* The offered rate of the next step into *rate: 1, or 0 when the sweep is
 * over (saturated, or every step done). */
int cal_sat_next(const cal_sat *s, double *rate);

/* The goodput the step measured (req/s; NAN reads as 0: nothing known to
 * be good); applies the stopping rule. */
void cal_sat_record(cal_sat *s, double goodput);

/* 1 when the stopping rule fires at the end of g[0..n) (see above). */
int cal_sat_rule(const double *goodput, size_t n);

/* The knee of points (rate[i], goodput[i]), i < n, in sweep order: the
 * index of the first point within CAL_SAT_GAIN of the highest goodput, or
 * -1 when no goodput is positive. */
int cal_sat_knee(const double *goodput, size_t n);

#endif
