/* The shot-series verdict (SPEC 1.1, checklist 1.5 item 2) for callers that
 * hold one number per shot: if shots 2..N run below shot 1 by more than the
 * shots' own noise and the floor, there is a wall and shot 1 must not be
 * quoted. The judgement is the calibrated one of caliper/judge.h with each
 * shot's value as its only sample (no within-shot spread to bound the
 * noise from below); callers with per-request values use cal_judge_shots. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/judge.h"
#include "caliper/protocol.h"

int cal_shot_series_verdict(const double *values, const int *shot_index, size_t n,
                            const char *what, double floor, cal_shot_verdict *v)
{
    if (!(floor > 0)) floor = CAL_SHOT_NOISE_FLOOR;
    memset(v, 0, sizeof *v);
    v->first = v->later_median = v->drop = v->band = NAN;
    cal_judge_shot s[CAL_JUDGE_MAX_SHOTS];
    size_t m = 0;
    for (size_t i = 0; i < n && m < CAL_JUDGE_MAX_SHOTS; i++) {
        if (!isfinite(values[i]) || values[i] <= 0) continue;
        s[m++] = (cal_judge_shot){shot_index ? shot_index[i] : (int)i + 1, &values[i], 1};
    }
    v->n = (int)m;
    if (m < 2) {
        snprintf(v->text, sizeof v->text,
                 "%s: fewer than 2 shots with a value: no shot-series verdict", what ? what : "shots");
        return 0;
    }
    cal_judge_opts o = {.floor = floor, .min_requests = 1, .what = what};
    cal_judge_verdict jv;
    cal_judge_shots(s, m, &o, &jv);
    v->first_shot = jv.first_shot;
    v->later_first = jv.later_first;
    v->later_last = jv.later_last;
    v->first = jv.first;
    v->later_median = jv.later;
    v->drop = isfinite(jv.effect) ? -jv.effect : NAN;
    v->band = isfinite(jv.lo) ? fmax((jv.hi - jv.lo) / 2, floor) : NAN;
    v->beyond_noise = jv.kind == CAL_JUDGE_SLOWER || jv.kind == CAL_JUDGE_FASTER;
    v->judged = jv.judged;
    snprintf(v->text, sizeof v->text, "%.*s", (int)sizeof v->text - 1, jv.text);
    return v->judged;
}
