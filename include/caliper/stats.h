/* caliper — statistics underneath every summary (SPEC 1.4, issue "calc/fit").
 * Pure functions over caller-owned arrays; none keeps a pointer and none
 * allocates: where scratch space is needed the caller passes it.
 * Percentiles use linear interpolation between closest ranks (Hyndman & Fan
 * type 7, numpy's default): p in [0,100], rank = p/100 × (n−1).
 * Confidence intervals are two-sided at `level` (0.95 for 95 %), built from
 * Student's t distribution, whose CDF and quantile are computed here from the
 * regularized incomplete beta function (accurate to ~1e-10). */
#ifndef CALIPER_STATS_H
#define CALIPER_STATS_H
#include <stddef.h>
#include <stdint.h>

/* Sort x in place, ascending. */
void   cal_stats_sort(double *x, size_t n);
/* Percentile of an ascending array; NAN when n == 0. */
double cal_stats_percentile_sorted(const double *sorted, size_t n, double p);
/* Percentile of an unsorted array; sorts x in place. NAN when n == 0. */
double cal_stats_percentile(double *x, size_t n, double p);
double cal_stats_median(double *x, size_t n);            /* sorts x */
double cal_stats_mean(const double *x, size_t n);        /* NAN when n == 0 */
/* Sample standard deviation (n − 1); NAN when n < 2. */
double cal_stats_sd(const double *x, size_t n);
/* The percentile method, for printing beside every percentile. */
#define CAL_STATS_PERCENTILE_METHOD "linear interpolation between closest ranks (type 7)"

/* ---- distributions ----------------------------------------------------- */

/* Regularized incomplete beta I_x(a, b), a, b > 0, x in [0,1]; NAN outside. */
double cal_stats_ibeta(double a, double b, double x);
/* P(T <= t) for Student's t with df > 0 degrees of freedom (df may be
 * fractional, as Welch's df is); NAN when df <= 0. */
double cal_stats_t_cdf(double t, double df);
/* The t with P(T <= t) = p, p in (0,1), df > 0; NAN outside.
 * cal_stats_t_quantile(0.975, 10) = 2.228. */
double cal_stats_t_quantile(double p, double df);

/* ---- t tests ------------------------------------------------------------ */

/* A mean (or a difference of means) with its t statistic and CI. */
typedef struct cal_ttest {
    size_t n;        /* pairs (one-sample, paired) or na + nb (Welch) */
    double mean;     /* mean difference (b − a for paired and Welch) */
    double sd;       /* sd of the differences (paired); NAN for Welch */
    double se;       /* standard error of mean */
    double df;       /* degrees of freedom (Welch: Satterthwaite) */
    double t;        /* mean ÷ se; 0 when mean == se == 0 */
    double p;        /* two-sided p value */
    double level;    /* CI level, e.g. 0.95 */
    double lo, hi;   /* mean ± t_crit × se */
    double half;     /* t_crit × se: the "±" of the CI */
} cal_ttest;

/* One-sample t on x[n] against 0 (n >= 2, level in (0,1)).
 * CAL_EINVAL: n < 2, a bad level, a non-finite value.
 * CAL_ERANGE: every value equal and not zero (zero spread: t is infinite).
 * All values zero gives t = 0, p = 1, CI [0, 0]. */
int cal_stats_t_one(const double *x, size_t n, double level, cal_ttest *out);
/* Paired t on the differences b[i] − a[i]. scratch: n doubles (caller's).
 * Same errors as cal_stats_t_one. */
int cal_stats_t_paired(const double *a, const double *b, size_t n, double level,
                       double *scratch, cal_ttest *out);
/* Welch's two-sample t for independent samples: mean(b) − mean(a), unequal
 * variances, Satterthwaite df. na, nb >= 2. Errors as cal_stats_t_one. */
int cal_stats_t_welch(const double *a, size_t na, const double *b, size_t nb,
                      double level, cal_ttest *out);

/* ---- bootstrap ---------------------------------------------------------- */

/* Median with a percentile-bootstrap CI: `reps` resamples of x[n] drawn with
 * a splitmix64 generator seeded by `seed` (same seed, same answer).
 * scratch: at least n + reps doubles, caller-owned (no allocation here).
 * CAL_EINVAL: n == 0, reps < 10, bad level, non-finite input;
 * CAL_ETOOBIG: scratch_len < n + reps. x is not modified. */
int cal_stats_median_ci(const double *x, size_t n, double level, size_t reps,
                        uint64_t seed, double *scratch, size_t scratch_len,
                        double *median, double *lo, double *hi);

/* ---- proportions -------------------------------------------------------- */

/* Wilson score interval of a proportion k/n at `level` (0.95): what a
 * calibration rate ("2 false alarms in 40") is known to within.
 * CAL_EINVAL: n == 0, k > n, a bad level. Wilson (1927). */
int cal_stats_wilson(size_t k, size_t n, double level, double *lo, double *hi);

/* ---- least squares line ------------------------------------------------- */

/* y = a + b·x by ordinary least squares. */
typedef struct cal_linfit {
    size_t n;
    double a, b;          /* intercept (y units), slope (y per x) */
    double se_a, se_b;    /* standard errors; NAN when n == 2 */
    double cov_ab;        /* covariance of a and b; NAN when n == 2 */
    double r2;            /* coefficient of determination (1 when n == 2) */
    double s;             /* residual sd, sqrt(SSE ÷ (n − 2)); NAN when n == 2 */
    double df;            /* n − 2 */
    double level;         /* CI level */
    double t_crit;        /* t quantile for the CIs; NAN when n == 2 */
    double a_lo, a_hi, b_lo, b_hi;  /* CIs; equal to a, b when n == 2 */
    double xbar, sxx;     /* mean of x, Σ(x − x̄)² */
    int    has_ci;        /* 1 when n >= 3 */
} cal_linfit;

/* Fit x[n], y[n] (n >= 2). CAL_EINVAL: n < 2, bad level, a non-finite value;
 * CAL_ERANGE: all x equal (no slope can be fitted). */
int cal_stats_linfit(const double *x, const double *y, size_t n, double level,
                     cal_linfit *out);
/* The fitted mean at x and the half-width of its CI (0 when !has_ci). */
double cal_stats_linfit_at(const cal_linfit *f, double x, double *half);

#endif
