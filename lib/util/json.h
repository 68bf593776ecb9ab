/* Reading JSON objects for the importers and the result formats: a parse
 * that insists on one object at the top, fields read with a default when
 * absent (never a zero made up), numbers clamped before any integer cast,
 * and the message writer every reader reports through. Internal to the
 * library: not installed. The cal_report_ prefix is kept from when these
 * lived in lib/report, whose readers are their only callers. */
#ifndef CALIPER_UTIL_JSON_H
#define CALIPER_UTIL_JSON_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* printf into err[errn] (C-locale numbers); nothing when err is NULL. */
void cal_report_errf(char *err, size_t errn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parse text as a JSON object (duplicate keys refused) into *root, which
 * the caller json_decref's. CAL_EPROTO with the line and column in err when
 * it is not JSON or not an object; *root is NULL then. */
int cal_report_parse(const char *text, size_t len, json_t **root, char *err, size_t errn);
/* A number field (a string "inf" reads as INFINITY); NAN when absent. */
double cal_report_jnum(const json_t *o, const char *k);
/* A number field as an integer clamped to [lo, hi]; dflt when absent or not
 * finite. (A double outside an integer's range must never be cast.) */
long cal_report_jint(const json_t *o, const char *k, long lo, long hi, long dflt);
/* v clamped to [lo, hi] as int64; dflt when not finite. */
int64_t cal_report_i64(double v, double lo, double hi, int64_t dflt);
/* A string field into dst[n]; "" when absent or not a string. */
void cal_report_jstr(const json_t *o, const char *k, char *dst, size_t n);

#endif
