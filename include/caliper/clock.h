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
/* CPU time of the calling process (CLOCK_PROCESS_CPUTIME_ID), ns. */
int64_t cal_process_cpu_ns(void);
/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns. */
int64_t cal_thread_cpu_ns(void);
/* Sleep for ns nanoseconds, resuming after signals unless *stop becomes
 * non-zero (stop may be NULL). Returns CAL_OK or CAL_ECANCEL. */
int cal_sleep_ns(int64_t ns, volatile int *stop);

#endif
