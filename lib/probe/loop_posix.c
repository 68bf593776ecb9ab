/* The event-loop seam on a generic POSIX system: no native backend (the
 * probe waits with poll(), loop_poll.c), and the CPUs a run may use are the
 * online count (POSIX has no affinity masks). */
#include <stddef.h>
#include <unistd.h>
#include "loop.h"

const cal_loop_ops *const cal_loop_native_ops = NULL;

int cal_loop_cpus(int engine_pid)
{
    (void)engine_pid;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
