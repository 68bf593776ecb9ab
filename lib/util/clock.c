/* Monotonic and CPU clocks in nanoseconds. */
#include <errno.h>
#include <time.h>
#include "caliper/clock.h"
#include "caliper/error.h"

static int64_t read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t cal_now_ns(void)         { return read_clock(CLOCK_MONOTONIC); }

int64_t cal_clock_resolution_ns(void)
{
    struct timespec ts;
    if (clock_getres(CLOCK_MONOTONIC, &ts) != 0) return 1;
    int64_t r = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return r > 0 ? r : 1;
}
int64_t cal_wall_ns(void)        { return read_clock(CLOCK_REALTIME); }
int64_t cal_process_cpu_ns(void) { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }
int64_t cal_thread_cpu_ns(void)  { return read_clock(CLOCK_THREAD_CPUTIME_ID); }

int cal_sleep_ns(int64_t ns, volatile int *stop)
{
    /* Sleep in slices of at most 50 ms so a stop flag is seen promptly. */
    int64_t end = cal_now_ns() + ns;
    for (;;) {
        if (stop && *stop) return CAL_ECANCEL;
        int64_t left = end - cal_now_ns();
        if (left <= 0) return CAL_OK;
        if (left > 50000000LL) left = 50000000LL;
        struct timespec ts = { (time_t)(left / 1000000000LL), (long)(left % 1000000000LL) };
        nanosleep(&ts, NULL);
    }
}

int64_t cal_span_ns(double s)
{
    if (!(s > 0)) return 0;                      /* NaN too */
    if (s > CAL_SPAN_MAX_S) s = CAL_SPAN_MAX_S;
    return (int64_t)(s * 1e9);
}
