/* Error code to text. */
#include <stdarg.h>
#include <stdio.h>
#include "caliper/error.h"
#include "lib/util/c_locale.h"

const char *cal_strerror(int err)
{
    switch ((cal_err)err) {
    case CAL_OK:        return "ok";
    case CAL_ENOMEM:    return "out of memory";
    case CAL_EINVAL:    return "invalid argument";
    case CAL_EIO:       return "input/output error";
    case CAL_ETOOBIG:   return "size limit exceeded";
    case CAL_ENOTFOUND: return "not found";
    case CAL_EABSENT:   return "not present on this machine";
    case CAL_EPERM:     return "permission denied";
    case CAL_ETIMEDOUT: return "timed out";
    case CAL_EPROTO:    return "malformed data";
    case CAL_EHTTP:     return "HTTP error status";
    case CAL_ECONNECT:  return "connection failed";
    case CAL_ECANCEL:   return "cancelled";
    case CAL_ESTORE:    return "result store error";
    case CAL_EFULL:     return "queue full";
    case CAL_EMISMATCH: return "protocols differ";
    case CAL_ERANGE:    return "value out of range";
    case CAL_EINTERNAL: return "internal error";
    }
    return "unknown error";
}

int cal_why(char *why, size_t why_len, int code, const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        cal_vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return code;
}
