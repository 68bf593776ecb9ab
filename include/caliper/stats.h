/* caliper — statistics underneath every summary (SPEC 1.4, issue "calc/fit").
 * Pure functions over caller-owned arrays; none keeps a pointer.
 * Percentiles use linear interpolation between closest ranks (Hyndman & Fan
 * type 7, numpy's default): p in [0,100], rank = p/100 × (n−1). */
#ifndef CALIPER_STATS_H
#define CALIPER_STATS_H
#include <stddef.h>

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

#endif
