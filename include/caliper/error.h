/* caliper — one error enum for the whole library.
 * Every fallible libcaliper call returns CAL_OK (0) or a negative cal_err.
 * Library code never prints and never exits: only the command decides. */
#ifndef CALIPER_ERROR_H
#define CALIPER_ERROR_H
#include <stddef.h>

typedef enum cal_err {
    CAL_OK        =   0,
    CAL_ENOMEM    =  -1,  /* allocation failed */
    CAL_EINVAL    =  -2,  /* an argument or input field is invalid */
    CAL_EIO       =  -3,  /* read/write/socket failure */
    CAL_ETOOBIG   =  -4,  /* a bounded buffer would exceed its cap */
    CAL_ENOTFOUND =  -5,  /* no such file, run, field or endpoint */
    CAL_EABSENT   =  -6,  /* a backend or source is not present here */
    CAL_EPERM     =  -7,  /* permission denied */
    CAL_ETIMEDOUT =  -8,  /* a deadline passed */
    CAL_EPROTO    =  -9,  /* malformed data from outside (HTTP, SSE, JSON) */
    CAL_EHTTP     = -10,  /* the peer answered with an HTTP error status */
    CAL_ECONNECT  = -11,  /* could not connect */
    CAL_ECANCEL   = -12,  /* cancelled by the user or the caller */
    CAL_ESTORE    = -13,  /* the SQLite store failed */
    CAL_EFULL     = -14,  /* a queue or pool is full */
    CAL_EMISMATCH = -15,  /* protocols differ: numbers are not comparable */
    CAL_ERANGE    = -16,  /* a value is outside its meaningful range */
    CAL_EINTERNAL = -17   /* an invariant broke: a bug */
} cal_err;

/* Static English text for an error code; never NULL. */
const char *cal_strerror(int err);

/* Write a printf-style explanation into why[why_len] (when why is non-NULL
 * and why_len > 0) and return code: `return cal_why(why, n, CAL_EPROTO,
 * "field \"%s\": ...", name);`. The one way library calls that take a
 * why-buffer fill it. */
int cal_why(char *why, size_t why_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
