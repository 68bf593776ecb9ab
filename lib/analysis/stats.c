/* Descriptive statistics: sort, percentiles (type 7), mean, sd. */
#include <math.h>
#include <stdlib.h>
#include "caliper/stats.h"

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
