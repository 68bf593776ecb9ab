/* Statistics: percentiles (type 7), mean, sd; Student's t from the
 * regularized incomplete beta; one-sample, paired and Welch t tests; a seeded
 * percentile bootstrap of the median; least squares lines with CIs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/stats.h"
#include "lib/util/rng.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void cal_stats_sort(double *x, size_t n) { if (n > 1) qsort(x, n, sizeof *x, cmp_double); }

double cal_stats_percentile_sorted(const double *s, size_t n, double p)
{
    if (n == 0) return NAN;
    if (p <= 0) return s[0];
    if (p >= 100) return s[n - 1];
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    double frac = rank - (double)lo;
    if (lo + 1 >= n) return s[n - 1];
    return s[lo] + frac * (s[lo + 1] - s[lo]);
}

double cal_stats_percentile(double *x, size_t n, double p)
{
    cal_stats_sort(x, n);
    return cal_stats_percentile_sorted(x, n, p);
}

double cal_stats_median(double *x, size_t n) { return cal_stats_percentile(x, n, 50); }

double cal_stats_mean(const double *x, size_t n)
{
    if (n == 0) return NAN;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s / (double)n;
}

double cal_stats_sd(const double *x, size_t n)
{
    if (n < 2) return NAN;
    double m = cal_stats_mean(x, n), ss = 0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (double)(n - 1));
}

/* ---- distributions ------------------------------------------------------ */

/* Continued fraction for I_x(a,b), evaluated by the modified Lentz method;
 * converges fast for x < (a+1)/(a+b+2). */
static double ibeta_cf(double a, double b, double x)
{
    const double tiny = 1e-300, eps = 1e-15;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 1000; m++) {
        double m2 = 2.0 * m;
        double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));   /* even step */
        d = 1 + num * d; if (fabs(d) < tiny) d = tiny;
        c = 1 + num / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)); /* odd step */
        d = 1 + num * d; if (fabs(d) < tiny) d = tiny;
        c = 1 + num / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < eps) break;
    }
    return h;
}

double cal_stats_ibeta(double a, double b, double x)
{
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return NAN;
    if (x == 0) return 0;
    if (x == 1) return 1;
    double lfront = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double front = exp(lfront);
    if (x < (a + 1) / (a + b + 2)) return front * ibeta_cf(a, b, x) / a;
    return 1 - front * ibeta_cf(b, a, 1 - x) / b;
}

/* The upper tail P(T > t) for t >= 0. */
static double t_upper(double t, double df)
{
    return 0.5 * cal_stats_ibeta(df / 2, 0.5, df / (df + t * t));
}

double cal_stats_t_cdf(double t, double df)
{
    if (!(df > 0) || isnan(t)) return NAN;
    if (isinf(t)) return t > 0 ? 1 : 0;
    double up = t_upper(fabs(t), df);
    return t >= 0 ? 1 - up : up;
}

double cal_stats_t_quantile(double p, double df)
{
    if (!(df > 0) || !(p > 0) || !(p < 1)) return NAN;
    if (p == 0.5) return 0;
    if (p < 0.5) return -cal_stats_t_quantile(1 - p, df);
    double tail = 1 - p;                /* find t > 0 with P(T > t) = tail */
    double lo = 0, hi = 2;
    while (t_upper(hi, df) > tail) {
        lo = hi;
        hi *= 2;
        if (hi > 1e300) return INFINITY;
    }
    for (int i = 0; i < 300 && hi - lo > 1e-13 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (t_upper(mid, df) > tail) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* ---- t tests ------------------------------------------------------------ */

static int level_ok(double level) { return level > 0 && level < 1; }

static int all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) if (!isfinite(x[i])) return 0;
    return 1;
}

/* Fill t, p and the CI of out from mean, se, df; handles se == 0. */
static int finish_t(cal_ttest *out)
{
    if (out->se == 0) {
        if (out->mean != 0) return CAL_ERANGE;
        out->t = 0; out->p = 1; out->lo = out->hi = 0; out->half = 0;
        return CAL_OK;
    }
    double tc = cal_stats_t_quantile(0.5 + out->level / 2, out->df);
    out->t = out->mean / out->se;
    out->p = 2 * t_upper(fabs(out->t), out->df);
    if (out->p > 1) out->p = 1;
    out->half = tc * out->se;
    out->lo = out->mean - out->half;
    out->hi = out->mean + out->half;
    return CAL_OK;
}

int cal_stats_t_one(const double *x, size_t n, double level, cal_ttest *out)
{
    if (!x || !out || n < 2 || !level_ok(level) || !all_finite(x, n)) return CAL_EINVAL;
    cal_ttest r = {0};
    r.n = n;
    r.level = level;
    r.mean = cal_stats_mean(x, n);
    r.sd = cal_stats_sd(x, n);
    r.se = r.sd / sqrt((double)n);
    r.df = (double)n - 1;
    int rc = finish_t(&r);
    if (rc == CAL_OK) *out = r;
    return rc;
}

int cal_stats_t_paired(const double *a, const double *b, size_t n, double level,
                       double *scratch, cal_ttest *out)
{
    if (!a || !b || !scratch) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++) scratch[i] = b[i] - a[i];
    return cal_stats_t_one(scratch, n, level, out);
}

int cal_stats_t_welch(const double *a, size_t na, const double *b, size_t nb,
                      double level, cal_ttest *out)
{
    if (!a || !b || !out || na < 2 || nb < 2 || !level_ok(level) ||
        !all_finite(a, na) || !all_finite(b, nb))
        return CAL_EINVAL;
    double sa = cal_stats_sd(a, na), sb = cal_stats_sd(b, nb);
    double va = sa * sa / (double)na, vb = sb * sb / (double)nb;
    cal_ttest r = {0};
    r.n = na + nb;
    r.level = level;
    r.mean = cal_stats_mean(b, nb) - cal_stats_mean(a, na);
    r.sd = NAN;
    r.se = sqrt(va + vb);
    /* Welch–Satterthwaite; when one sample has zero spread its term drops. */
    double den = 0;
    if (va > 0) den += va * va / ((double)na - 1);
    if (vb > 0) den += vb * vb / ((double)nb - 1);
    r.df = den > 0 ? (va + vb) * (va + vb) / den : (double)(na + nb - 2);
    int rc = finish_t(&r);
    if (rc == CAL_OK) *out = r;
    return rc;
}

/* ---- bootstrap ---------------------------------------------------------- */

/* Uniform in [0, n) without modulo bias (rejection of the short last run). */
static size_t uniform_index(uint64_t *s, size_t n)
{
    uint64_t lim = UINT64_MAX - UINT64_MAX % (uint64_t)n;
    uint64_t r;
    do r = cal_splitmix64(s); while (r >= lim);
    return (size_t)(r % (uint64_t)n);
}

int cal_stats_median_ci(const double *x, size_t n, double level, size_t reps,
                        uint64_t seed, double *scratch, size_t scratch_len,
                        double *median, double *lo, double *hi)
{
    if (!x || !scratch || !median || !lo || !hi || n == 0 || reps < 10 ||
        !level_ok(level) || !all_finite(x, n))
        return CAL_EINVAL;
    if (scratch_len < n + reps) return CAL_ETOOBIG;
    double *res = scratch, *meds = scratch + n;
    memcpy(res, x, n * sizeof *x);
    double m = cal_stats_median(res, n);
    uint64_t s = seed;
    for (size_t r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++) res[i] = x[uniform_index(&s, n)];
        meds[r] = cal_stats_median(res, n);
    }
    cal_stats_sort(meds, reps);
    *median = m;
    *lo = cal_stats_percentile_sorted(meds, reps, 50 * (1 - level));
    *hi = cal_stats_percentile_sorted(meds, reps, 50 * (1 + level));
    return CAL_OK;
}

/* ---- least squares line ------------------------------------------------- */

int cal_stats_linfit(const double *x, const double *y, size_t n, double level,
                     cal_linfit *out)
{
    if (!x || !y || !out || n < 2 || !level_ok(level) || !all_finite(x, n) ||
        !all_finite(y, n))
        return CAL_EINVAL;
    double xbar = cal_stats_mean(x, n), ybar = cal_stats_mean(y, n);
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - xbar, dy = y[i] - ybar;
        sxx += dx * dx; sxy += dx * dy; syy += dy * dy;
    }
    /* all x equal (to rounding): the slope is undefined */
    if (!(sxx > 1e-24 * (xbar * xbar + 1) * (double)n)) return CAL_ERANGE;
    cal_linfit f = {0};
    f.n = n;
    f.level = level;
    f.b = sxy / sxx;
    f.a = ybar - f.b * xbar;
    f.xbar = xbar;
    f.sxx = sxx;
    f.df = (double)n - 2;
    double sse = 0;
    for (size_t i = 0; i < n; i++) {
        double e = y[i] - (f.a + f.b * x[i]);
        sse += e * e;
    }
    f.r2 = syy > 0 ? 1 - sse / syy : 1;
    if (f.r2 < 0) f.r2 = 0;
    if (n >= 3) {
        f.has_ci = 1;
        f.s = sqrt(sse / f.df);
        f.se_b = f.s / sqrt(sxx);
        f.se_a = f.s * sqrt(1.0 / (double)n + xbar * xbar / sxx);
        f.cov_ab = -xbar * f.s * f.s / sxx;
        f.t_crit = cal_stats_t_quantile(0.5 + level / 2, f.df);
        f.a_lo = f.a - f.t_crit * f.se_a; f.a_hi = f.a + f.t_crit * f.se_a;
        f.b_lo = f.b - f.t_crit * f.se_b; f.b_hi = f.b + f.t_crit * f.se_b;
    } else {
        f.s = f.se_a = f.se_b = f.cov_ab = f.t_crit = NAN;
        f.a_lo = f.a_hi = f.a;
        f.b_lo = f.b_hi = f.b;
    }
    *out = f;
    return CAL_OK;
}

double cal_stats_linfit_at(const cal_linfit *f, double x, double *half)
{
    double y = f->a + f->b * x;
    if (half) {
        if (!f->has_ci) *half = 0;
        else {
            double dx = x - f->xbar;
            *half = f->t_crit * f->s * sqrt(1.0 / (double)f->n + dx * dx / f->sxx);
        }
    }
    return y;
}

/* ---- proportions -------------------------------------------------------- */

int cal_stats_wilson(size_t k, size_t n, double level, double *lo, double *hi)
{
    if (!lo || !hi || n == 0 || k > n || !level_ok(level)) return CAL_EINVAL;
    /* the normal quantile from t with huge df (the t quantile converges) */
    double z = cal_stats_t_quantile(0.5 + level / 2, 1e9);
    double p = (double)k / (double)n, nn = (double)n, z2 = z * z;
    double c = (p + z2 / (2 * nn)) / (1 + z2 / nn);
    double h = z * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
    *lo = fmax(0, c - h);
    *hi = fmin(1, c + h);
    return CAL_OK;
}
