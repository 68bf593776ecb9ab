/* The C locale for number text (c_locale.h): one locale object made on first
 * use, switched in per thread with uselocale around each parse or print. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "lib/util/c_locale.h"

static pthread_once_t c_once = PTHREAD_ONCE_INIT;
static locale_t c_loc;

static void make_c_locale(void) { c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

locale_t cal_locale_push(void)
{
    pthread_once(&c_once, make_c_locale);
    return c_loc ? uselocale(c_loc) : (locale_t)0;
}

void cal_locale_pop(locale_t prev)
{
    if (prev) uselocale(prev);
}

int cal_vsnprintf(char *buf, size_t n, const char *fmt, va_list ap)
{
    locale_t prev = cal_locale_push();
    int r = vsnprintf(buf, n, fmt, ap);
    cal_locale_pop(prev);
    return r;
}

int cal_snprintf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = cal_vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

double cal_strtod(const char *s, char **end)
{
    pthread_once(&c_once, make_c_locale);
    if (c_loc) return strtod_l(s, end, c_loc);
    locale_t prev = cal_locale_push();    /* (locale_t)0: as the process has it */
    double v = strtod(s, end);
    cal_locale_pop(prev);
    return v;
}
