/* caliper — the JSON field readers every importer and result format shares
 * (lib/util/json.h): absent is NAN or a default, never zero. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "lib/util/c_locale.h"
#include "lib/util/json.h"

void cal_report_errf(char *err, size_t errn, const char *fmt, ...)
{
    if (!err || !errn) return;
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(err, errn, fmt, ap);
    va_end(ap);
}

int cal_report_parse(const char *text, size_t len, json_t **root, char *err, size_t errn)
{
    json_error_t je;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*root) {
        cal_report_errf(err, errn, "JSON: %s at line %d column %d", je.text, je.line, je.column);
        return CAL_EPROTO;
    }
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        cal_report_errf(err, errn, "JSON: the top level is not an object");
        return CAL_EPROTO;
    }
    return CAL_OK;
}

double cal_report_jnum(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    if (json_is_number(v)) return json_number_value(v);
    if (json_is_string(v) && !strcmp(json_string_value(v), "inf")) return INFINITY;
    return NAN;
}

long cal_report_jint(const json_t *o, const char *k, long lo, long hi, long dflt)
{
    double v = cal_report_jnum(o, k);
    if (!isfinite(v)) return dflt;
    return v < (double)lo ? lo : v > (double)hi ? hi : (long)v;
}

int64_t cal_report_i64(double v, double lo, double hi, int64_t dflt)
{
    if (!isfinite(v)) return dflt;
    return v < lo ? (int64_t)lo : v > hi ? (int64_t)hi : (int64_t)v;
}

void cal_report_jstr(const json_t *o, const char *k, char *dst, size_t n)
{
    const json_t *v = json_object_get(o, k);
    snprintf(dst, n, "%s", json_is_string(v) ? json_string_value(v) : "");
}
