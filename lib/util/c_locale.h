/* Number text inside libcaliper is C-locale text, whatever locale the host
 * program set ("2.5", never "2,5"): every parse and print of a number in the
 * library goes through these. cal_locale_push switches the calling thread to
 * a cached C locale (uselocale) and cal_locale_pop restores what it had;
 * cal_snprintf, cal_vsnprintf and cal_strtod are snprintf, vsnprintf and
 * strtod under that switch. Internal to the library: not installed.
 * Thread-safe; the C locale object is made once and kept for the process. */
#ifndef CALIPER_C_LOCALE_H
#define CALIPER_C_LOCALE_H
#include <locale.h>
#include <stdarg.h>
#include <stddef.h>

/* Switch this thread to the C locale; returns the locale to hand back to
 * cal_locale_pop (the thread's previous one), or (locale_t)0 when the C
 * locale could not be made (out of memory: nothing was switched). Pairs
 * nest. */
locale_t cal_locale_push(void);
void     cal_locale_pop(locale_t prev);

int cal_snprintf(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int cal_vsnprintf(char *buf, size_t n, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
double cal_strtod(const char *s, char **end);

#endif
