/* Shared command-line helpers: errors with names, flag parsers, build info. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

#ifndef CAL_VERSION
#define CAL_VERSION "0.0.0"
#endif
#ifndef CAL_COMMIT
#define CAL_COMMIT "unknown"
#endif
#ifndef CAL_BUILD_FLAGS
#define CAL_BUILD_FLAGS ""
#endif

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "caliper %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'caliper %s --help'.\n", cmd);
    return CLI_USAGE;
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "caliper %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_FAIL;
}

int cli_parse_unit(const char *cmd, const char *flag, const char *arg,
                   cal_unit u, const char *bare_unit, double *out)
{
    if (cal_unit_parse(u, arg, bare_unit, out) == 0) return 0;
    return cli_usage_error(cmd, "%s: \"%s\" is not a %s%s%s%s", flag, arg ? arg : "",
                           cal_unit_name(u), bare_unit ? " (a bare number means " : "",
                           bare_unit ? bare_unit : "", bare_unit ? ")" : "");
}

int cli_parse_long(const char *cmd, const char *flag, const char *arg,
                   long min, long max, long *out)
{
    double v;
    if (!arg || cal_unit_parse(CAL_U_COUNT, arg, NULL, &v) != 0 || v != (double)(long)v)
        return cli_usage_error(cmd, "%s: \"%s\" is not an integer", flag, arg ? arg : "");
    if (v < (double)min || v > (double)max) {
        if (min == 1 && max == LONG_MAX)
            return cli_usage_error(cmd, "%s: \"%s\" is not a positive integer", flag, arg);
        return cli_usage_error(cmd, "%s: \"%s\" is outside %ld..%ld", flag, arg, min, max);
    }
    *out = (long)v;
    return 0;
}

int cli_parse_long_list(const char *cmd, const char *flag, const char *arg,
                        long min, long max, long *out, size_t cap, size_t *n)
{
    char tmp[1024];
    if (!arg || !*arg || strlen(arg) >= sizeof tmp)
        return cli_usage_error(cmd, "%s: \"%s\" is not a comma-separated list", flag,
                               arg ? arg : "");
    strcpy(tmp, arg);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == cap)
            return cli_usage_error(cmd, "%s: more than %zu values", flag, cap);
        int rc = cli_parse_long(cmd, flag, t, min, max, &out[*n]);
        if (rc) return rc;
        (*n)++;
    }
    if (*n == 0) return cli_usage_error(cmd, "%s: \"%s\" has no values", flag, arg);
    return 0;
}

int cli_stderr_is_tty(void) { return isatty(STDERR_FILENO); }

int cli_use_color(FILE *f)
{
    const char *nc = getenv("NO_COLOR");
    if (nc && *nc) return 0;
    return isatty(fileno(f));
}

const char *cli_build_string(void)
{
    static char s[256];
    if (!s[0]) {
#ifdef CAL_SANITIZER
        snprintf(s, sizeof s, "caliper %s (commit %s, %s, sanitizer %s)", CAL_VERSION,
                 CAL_COMMIT, CAL_BUILD_FLAGS, CAL_SANITIZER);
#else
        snprintf(s, sizeof s, "caliper %s (commit %s, %s)", CAL_VERSION, CAL_COMMIT,
                 CAL_BUILD_FLAGS);
#endif
    }
    return s;
}

const char *cli_build_warning(void)
{
#ifdef CAL_SANITIZER
    return "this is a sanitizer build (" CAL_SANITIZER "): its timings are not representative";
#else
    if (strstr(CAL_BUILD_FLAGS, "-O0"))
        return "this is an unoptimised build (-O0): its timings are not representative";
    return NULL;
#endif
}
