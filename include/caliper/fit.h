/* caliper — fits over measured points (caliper fit): the CSV columns they
 * come from, least squares lines with a duplicate-x check, and the
 * comparison of two prefill fits that separates "the fixed overhead grew"
 * from "every token got dearer" (SPEC 1.4, two-point prefill fit).
 * No allocation: the caller passes arrays with their capacity. */
#ifndef CALIPER_FIT_H
#define CALIPER_FIT_H
#include <stddef.h>
#include "caliper/stats.h"
#include "caliper/units.h"

/* ---- CSV columns --------------------------------------------------------
 * Text with one record per line; fields split by ',', ';', tab or spaces.
 * Blank lines and lines starting with '#' are skipped. When the first record
 * has a field that is not a number it is the header and columns are found
 * by name; otherwise (and for names the header lacks) "1", "2", ... name
 * columns by position.
 * Each cell parses through the unit table as `unit`, with `bare_unit` the
 * meaning of a bare number (NULL: a bare number is taken as-is). */
typedef struct cal_csv_col {
    const char *name;        /* header name, or "1", "2"... by position */
    cal_unit    unit;
    const char *bare_unit;   /* "ms", "GB", ...; NULL: the base unit */
    double     *out;         /* [cap] values, row order */
} cal_csv_col;

/* Read columns from text[len]. *nrows gets the data rows read.
 * CAL_ENOTFOUND: a column name not in the header (why names it and lists
 * the header); CAL_EPROTO: a cell that is not a number of its unit (why
 * gives line and column), a row with too few fields; CAL_ETOOBIG: more than
 * cap rows or a line over 4096 bytes. */
int cal_csv_columns(const char *text, size_t len, cal_csv_col *cols, size_t ncols,
                    size_t cap, size_t *nrows, char *why, size_t why_len);
/* The same from a file (at most 16 MiB; "-" reads stdin). */
int cal_csv_columns_file(const char *path, cal_csv_col *cols, size_t ncols,
                         size_t cap, size_t *nrows, char *why, size_t why_len);

/* ---- lines --------------------------------------------------------------- */

/* Least squares y = a + b·x over n >= min_n points whose x are all distinct
 * (a repeated x means the caller has not reduced repeated shots to one
 * value per x: give the median). CAL_EINVAL: n < min_n or non-finite;
 * CAL_ERANGE: x[*dup_i] == x[*dup_j] (0-based, i < j). */
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
