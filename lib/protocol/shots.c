/* The shot-series verdict (SPEC 1.1, checklist 1.5 item 2): if shots 2..N
 * run below shot 1 by more than the noise of the repeats, there is a wall
 * and shot 1 must not be quoted. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/protocol.h"
#include "caliper/stats.h"
#include "lib/util/c_locale.h"

#define MAX_SHOTS 4096

int cal_shot_series_verdict(const double *values, const int *shot_index, size_t n,
                            const char *what, double floor, cal_shot_verdict *v)
{
    if (!(floor > 0)) floor = CAL_SHOT_NOISE_FLOOR;
    memset(v, 0, sizeof *v);
    v->first = v->later_median = v->drop = v->band = NAN;
    double later[MAX_SHOTS];
    size_t nl = 0;
    int have_first = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(values[i]) || values[i] <= 0) continue;
        if (!have_first) {
            v->first = values[i];
            v->first_shot = shot_index ? shot_index[i] : (int)i + 1;
            have_first = 1;
            continue;
        }
        if (nl == MAX_SHOTS) break;
        int idx = shot_index ? shot_index[i] : (int)i + 1;
        if (nl == 0) v->later_first = idx;
        v->later_last = idx;
        later[nl++] = values[i];
    }
    v->n = (int)nl + have_first;
    if (!have_first || nl == 0) {
        snprintf(v->text, sizeof v->text,
                 "%s: fewer than 2 shots with a value: no shot-series verdict", what ? what : "shots");
        return 0;
    }
    v->judged = 1;
    v->later_median = cal_stats_median(later, nl);   /* sorts later[] */
    /* the repeats' own spread, robust to one disturbed shot: 2 × the
     * scaled median absolute deviation (≈ 2 σ for normal noise) */
    double dev[MAX_SHOTS];
    for (size_t i = 0; i < nl; i++) dev[i] = fabs(later[i] - v->later_median);
    double mad = cal_stats_median(dev, nl);
    v->band = fmax(2.0 * 1.4826 * mad / v->later_median, floor);
    v->drop = (v->first - v->later_median) / v->first;
    v->beyond_noise = fabs(v->drop) > v->band;
    char range[32];
    if (v->later_first == v->later_last) snprintf(range, sizeof range, "shot %d", v->later_first);
    else snprintf(range, sizeof range, "shots %d–%d", v->later_first, v->later_last);
    const char *verb = v->later_first == v->later_last ? "runs" : "run";
    if (!v->beyond_noise)
        cal_snprintf(v->text, sizeof v->text,
                 "%s within noise of shot %d (%+.1f %%, band ±%.1f %%): no wall seen",
                 range, v->first_shot, -100.0 * v->drop, 100.0 * v->band);
    else if (v->drop > 0)
        cal_snprintf(v->text, sizeof v->text,
                 "%s %s %.1f %% below shot %d (band ±%.1f %%, %s): quote warm figures, not shot %d",
                 range, verb, 100.0 * v->drop, v->first_shot, 100.0 * v->band,
                 what ? what : "throughput", v->first_shot);
    else
        cal_snprintf(v->text, sizeof v->text,
                 "%s %s %.1f %% above shot %d (band ±%.1f %%, %s): shot %d was slow (warm-up): "
                 "quote warm figures",
                 range, verb, -100.0 * v->drop, v->first_shot, 100.0 * v->band,
                 what ? what : "throughput", v->first_shot);
    return 1;
}
