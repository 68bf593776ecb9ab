/* caliper — the one clock. Every timestamp in caliper is CLOCK_MONOTONIC in
 * nanoseconds, taken as close to its event as possible. Wall-clock time is
 * used only to label stored runs (cal_wall_ns). */
#ifndef CALIPER_CLOCK_H
#define CALIPER_CLOCK_H
#include <stdint.h>

/* CLOCK_MONOTONIC, ns. Never fails on Linux/macOS. */
int64_t cal_now_ns(void);
/* CLOCK_REALTIME, ns since the Unix epoch; for labels only. */
int64_t cal_wall_ns(void);
/* The resolution of CLOCK_MONOTONIC here (clock_getres), ns, at least 1:
 * no interval it measures is known more finely than this. */
int64_t cal_clock_resolution_ns(void);
/* CPU time of the calling process (CLOCK_PROCESS_CPUTIME_ID), ns. */
int64_t cal_process_cpu_ns(void);
/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns. */
int64_t cal_thread_cpu_ns(void);
/* Sleep for ns nanoseconds, resuming after signals unless *stop becomes
 * non-zero (stop may be NULL). Returns CAL_OK or CAL_ECANCEL. */
int cal_sleep_ns(int64_t ns, volatile int *stop);

/* The longest span a schedule may hold: a year and a day, s. Every time that
 * becomes int64_t nanoseconds (an arrival, a think time, a rest, a duration)
 * is checked against it where it is given, and converted by cal_span_ns. */
#define CAL_SPAN_MAX_S (366 * 86400.0)
/* The longest single wait a schedule may hold between two requests (a Poisson
 * gap's mean, a burst period, a replayed think time): a day, s. A rate or a
 * replay speed whose waits would be longer is refused where it is given. */
#define CAL_WAIT_MAX_S 86400.0
/* Seconds to nanoseconds, clamped to [0, CAL_SPAN_MAX_S]: NaN and negative
 * spans become 0, larger ones the bound (a double past INT64_MAX has no
 * defined conversion). Callers refuse out-of-range input first; this is the
 * one conversion, so a value that slips through is bounded, not wrapped. */
int64_t cal_span_ns(double s);

#endif
