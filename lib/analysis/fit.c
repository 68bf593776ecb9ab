/* Fits over measured points (read through caliper/csv.h): least squares
 * lines with a duplicate-x check and a finiteness check, and the
 * before/after comparison of two prefill lines. */
#include <math.h>
#include "caliper/error.h"
#include "caliper/fit.h"

int cal_fit_line(const double *x, const double *y, size_t n, size_t min_n, double level,
                 cal_linfit *out, size_t *dup_i, size_t *dup_j)
{
    if (!x || !y || !out || n < min_n || n < 2) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (x[i] == x[j]) {
                if (dup_i) *dup_i = i;
                if (dup_j) *dup_j = j;
                return CAL_ERANGE;
            }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || !isfinite(y[i])) return CAL_EINVAL;
    cal_linfit f;
    int rc = cal_stats_linfit(x, y, n, level, &f);
    if (rc == CAL_ERANGE) {
        /* distinct x the fit calls equal: either their squares overflowed
         * (1e300, 2e300, ...), or they differ only by rounding */
        for (size_t i = 0; i < n; i++)
            if (fabs(x[i]) > 1e150) return CAL_ETOOBIG;
        if (dup_i) *dup_i = 0;
        if (dup_j) *dup_j = 1;
        return CAL_ERANGE;
    }
    if (rc) return rc;
    if (!isfinite(f.a) || !isfinite(f.b) || !isfinite(f.r2) ||
        (f.has_ci && (!isfinite(f.se_a) || !isfinite(f.se_b) || !isfinite(f.a_lo) ||
                      !isfinite(f.a_hi) || !isfinite(f.b_lo) || !isfinite(f.b_hi))))
        return CAL_ETOOBIG;
    *out = f;
    return CAL_OK;
}

int cal_fit_delta_of(const cal_linfit *b4, const cal_linfit *af, char which,
                     cal_fit_delta *out)
{
    if (!b4 || !af || !out || !b4->has_ci || !af->has_ci || (which != 'a' && which != 'b'))
        return CAL_EINVAL;
    double v1 = which == 'a' ? b4->a : b4->b, v2 = which == 'a' ? af->a : af->b;
    double s1 = which == 'a' ? b4->se_a : b4->se_b, s2 = which == 'a' ? af->se_a : af->se_b;
    cal_fit_delta d = {0};
    d.d = v2 - v1;
    double q1 = s1 * s1, q2 = s2 * s2;
    d.se = sqrt(q1 + q2);
    double den = (q1 > 0 ? q1 * q1 / b4->df : 0) + (q2 > 0 ? q2 * q2 / af->df : 0);
    d.df = den > 0 ? (q1 + q2) * (q1 + q2) / den : b4->df + af->df;
    double level = af->level;
    double tc = cal_stats_t_quantile(0.5 + level / 2, d.df);
    d.lo = d.d - tc * d.se;
    d.hi = d.d + tc * d.se;
    d.excludes_zero = d.se > 0 ? (d.lo > 0 || d.hi < 0) : d.d != 0;
    *out = d;
    return CAL_OK;
}

cal_prefill_verdict cal_fit_prefill_verdict(const cal_fit_delta *da, const cal_fit_delta *db)
{
    int a = da && da->excludes_zero, b = db && db->excludes_zero;
    return a && b ? CAL_PREFILL_BOTH : a ? CAL_PREFILL_OVERHEAD
         : b ? CAL_PREFILL_PER_TOKEN : CAL_PREFILL_NO_CHANGE;
}
