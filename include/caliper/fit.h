/* caliper — fits over measured points (caliper fit): least squares lines
 * with a duplicate-x check, and the comparison of two prefill fits that separates "the fixed overhead grew"
 * from "every token got dearer" (SPEC 1.4, two-point prefill fit).
 * No allocation: the caller passes arrays with their capacity. */
#ifndef CALIPER_FIT_H
#define CALIPER_FIT_H
#include <stddef.h>
#include "caliper/csv.h"    /* the CSV columns fits read */
#include "caliper/stats.h"
#include "caliper/units.h"

/* ---- lines --------------------------------------------------------------- */

/* Least squares y = a + b·x over n >= min_n points whose x are all distinct
 * (a repeated x means the caller has not reduced repeated shots to one
 * value per x: give the median). CAL_EINVAL: n < min_n or a non-finite
 * value; CAL_ERANGE: x[*dup_i] == x[*dup_j] (0-based, i < j); CAL_ETOOBIG:
 * the values are too large for the sums of a fit in doubles (a coefficient,
 * its CI or R² would not be finite), and *out is left as it was. */
int cal_fit_line(const double *x, const double *y, size_t n, size_t min_n,
                 double level, cal_linfit *out, size_t *dup_i, size_t *dup_j);

/* The change of one coefficient between two fits (after − before), with a
 * Welch–Satterthwaite CI from the two standard errors. */
typedef struct cal_fit_delta {
    double d;              /* after − before */
    double se, df;         /* of d */
    double lo, hi;         /* CI of d at the fits' level */
    int    excludes_zero;  /* 1: the CI does not contain 0 */
} cal_fit_delta;

/* which: 'a' (intercept) or 'b' (slope). Both fits need has_ci
 * (CAL_EINVAL otherwise). */
int cal_fit_delta_of(const cal_linfit *before, const cal_linfit *after, char which,
                     cal_fit_delta *out);

typedef enum cal_prefill_verdict {
    CAL_PREFILL_NO_CHANGE = 0,  /* neither CI excludes zero */
    CAL_PREFILL_OVERHEAD,       /* only the fixed overhead a changed */
    CAL_PREFILL_PER_TOKEN,      /* only the per-token cost b changed */
    CAL_PREFILL_BOTH
} cal_prefill_verdict;
cal_prefill_verdict cal_fit_prefill_verdict(const cal_fit_delta *da,
                                            const cal_fit_delta *db);

#endif
