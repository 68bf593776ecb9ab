/* bench/telemetry — what the sampler costs: its thread's CPU time per tick
 * and as a share of one core at 250 ms and 10 ms, and its wake-up jitter
 * (p50/p99/max of actual − scheduled), on this host's backends and on a
 * captured Intel desktop tree (more files per tick).
 *   usage: telemetry [SECONDS per row, default 3] [DATA_DIR, default tests/data/sysfs] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/telemetry.h"

static void row(const char *label, const char *root, int pid, int64_t interval_ns, double seconds)
{
    cal_tel_config cfg = { .root = root, .interval_ns = interval_ns, .pid = pid };
    cal_tel *t = NULL;
    if (cal_tel_open(&t, &cfg) != CAL_OK) { fprintf(stderr, "open failed\n"); exit(1); }
    char src[256];
    cal_tel_sources(t, src, sizeof src);
    int64_t w0 = cal_now_ns();
    cal_tel_start(t);
    cal_sleep_ns((int64_t)(seconds * 1e9), NULL);
    cal_tel_stop(t);
    int64_t wall = cal_now_ns() - w0;
    cal_tel_self s;
    cal_tel_self_stats(t, &s);
    double per_tick_us = s.ticks ? (double)s.thread_cpu_ns / (double)s.ticks / 1e3 : 0;
    printf("%-22s %8.0f ms %6llu %8llu %10.1f %9.4f %%  %9.1f %9.1f %9.1f  %s\n", label,
           (double)interval_ns / 1e6, (unsigned long long)s.ticks, (unsigned long long)s.samples,
           per_tick_us, 100.0 * (double)s.thread_cpu_ns / (double)wall,
           (double)s.jitter_p50_ns / 1e3, (double)s.jitter_p99_ns / 1e3,
           (double)s.jitter_max_ns / 1e3, src[0] ? src : "-");
    cal_tel_close(&t);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    const char *data = argc > 2 ? argv[2] : "tests/data/sysfs";
    if (seconds <= 0) seconds = 3.0;
    char intel[1024];
    snprintf(intel, sizeof intel, "%s/intel_desktop", data);
    int have_tree = access(intel, R_OK) == 0;
    printf("sampler cost, %.1f s per row (CPU = the sampler thread's own CPU time)\n\n", seconds);
    printf("%-22s %11s %6s %8s %10s %11s  %9s %9s %9s  %s\n", "backends", "interval", "ticks",
           "samples", "CPU/tick us", "CPU share", "late p50", "late p99", "late max", "sources");
    printf("%-22s %11s %6s %8s %10s %11s  %9s %9s %9s\n", "", "", "", "", "", "", "us", "us", "us");
    row("this host + process", NULL, (int)getpid(), 250000000LL, seconds);
    row("this host + process", NULL, (int)getpid(), 10000000LL, seconds);
    if (have_tree) {
        row("captured Intel tree", intel, 4242, 250000000LL, seconds);
        row("captured Intel tree", intel, 4242, 10000000LL, seconds);
    } else {
        printf("(no captured tree at %s: run from the repository root)\n", intel);
    }
    return 0;
}
