/* How many event loops a run should use when not told: the CPUs caliper may
 * run on, less those a local engine is pinned to. The affinity calls are
 * Linux's; elsewhere the online CPU count stands in and a pin is not seen. */
#include <unistd.h>
#include "caliper/probe.h"
#ifdef __linux__
#include <sched.h>
#include <sys/types.h>
#endif

int cal_probe_default_loops(int engine_pid)
{
    int n = 0, known = 0;
#ifdef __linux__
    cpu_set_t mine, eng;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) == 0) {
        n = CPU_COUNT(&mine);
        known = 1;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_ZERO(&eng);
        if (engine_pid > 0 && sched_getaffinity((pid_t)engine_pid, sizeof eng, &eng) == 0
            && online > 0 && CPU_COUNT(&eng) < online) {   /* pinned: leave it its CPUs */
            cpu_set_t both;
            CPU_AND(&both, &mine, &eng);
            n -= CPU_COUNT(&both);
        }
    }
#else
    (void)engine_pid;
#endif
    if (!known) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (int)online : 1;
    }
    if (n < 1) n = 1;
    return n > CAL_PROBE_MAX_LOOPS ? CAL_PROBE_MAX_LOOPS : n;
}
