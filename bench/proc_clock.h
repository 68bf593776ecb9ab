/* What bench/gate and bench/verdicts both read to cut an engine's CPU by a
 * share of what it used: a process's CPU time and the monotonic clock.
 * Header-only (each bench is one file). */
#ifndef CALIPER_BENCH_PROC_CLOCK_H
#define CALIPER_BENCH_PROC_CLOCK_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* pid's CPU time so far, seconds (utime + stime of all its threads); NAN
 * once it is gone */
static double proc_cpu_s(pid_t pid)
{
    char p[64], b[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return NAN;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = 0;
    char *q = strrchr(b, ')');
    unsigned long ut = 0, st = 0;
    if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
