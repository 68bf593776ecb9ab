/* The macOS platform file (platform.h), written against Apple's documented
 * interfaces: proc_pidinfo(PROC_PIDTASKINFO) from libproc for a process's
 * RSS, CPU time and threads; sysctl for the CPU's name and the memory size;
 * _NSGetExecutablePath for this binary. macOS has no child subreaper and no
 * parent-death signal: a launched engine is stopped through its process
 * group. Built only on Darwin; docs/macos.md says how each path was
 * checked. */
#include <errno.h>
#include <libproc.h>
#include <limits.h>
#include <mach/mach_time.h>
#include <mach-o/dyld.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysctl.h>
#include <unistd.h>
#include "caliper/error.h"
#include "lib/platform/platform.h"

const char *cal_plat_name(void) { return "darwin"; }

void cal_plat_set_argv0(const char *argv0) { (void)argv0; }

const char *cal_plat_self_exe(char *why, size_t whyn)
{
    static char exe[PATH_MAX];
    if (exe[0]) return exe;
    char raw[PATH_MAX];
    uint32_t n = sizeof raw;
    if (_NSGetExecutablePath(raw, &n) != 0) {
        if (why && whyn) snprintf(why, whyn, "_NSGetExecutablePath: path longer than %d", PATH_MAX);
        return NULL;
    }
    if (!realpath(raw, exe)) {
        if (why && whyn) snprintf(why, whyn, "%s: %s", raw, strerror(errno));
        exe[0] = '\0';
        return NULL;
    }
    return exe;
}

int cal_plat_cpu_model(char *out, size_t n)
{
    size_t len = n;
    if (n == 0) return CAL_EABSENT;
    out[0] = '\0';
    if (sysctlbyname("machdep.cpu.brand_string", out, &len, NULL, 0) != 0 || !out[0]) {
        out[0] = '\0';
        return CAL_EABSENT;
    }
    out[n - 1] = '\0';
    return CAL_OK;
}

int cal_plat_mem_total(int64_t *bytes)
{
    int64_t v = 0;
    size_t len = sizeof v;
    if (sysctlbyname("hw.memsize", &v, &len, NULL, 0) != 0 || v <= 0) return CAL_EABSENT;
    *bytes = v;
    return CAL_OK;
}

/* Apple's GPU is part of the chip cal_plat_cpu_model names; no NVIDIA
 * driver runs on current macOS. */
int cal_plat_gpu_name(char *out, size_t n) { if (n) out[0] = '\0'; return CAL_EABSENT; }

int cal_plat_pid_exists(const char *root, long pid)
{
    if (root && *root) return 0;   /* captured trees are Linux ones */
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

struct cal_plat_proc { int pid; double tick_ns; };

const char *cal_plat_proc_source(void) { return "proc_pidinfo(PROC_PIDTASKINFO)"; }

int cal_plat_proc_open(cal_plat_proc **out, const char *root, int pid, char *why, size_t whyn)
{
    if (root && *root) {
        if (why && whyn) snprintf(why, whyn, "a captured tree (%s) is read on Linux only", root);
        return CAL_EABSENT;
    }
    struct proc_taskinfo ti;
    if (proc_pidinfo(pid, PROC_PIDTASKINFO, 0, &ti, sizeof ti) != (int)sizeof ti) {
        int e = errno;
        if (why && whyn) snprintf(why, whyn, "proc_pidinfo(%d): %s", pid, strerror(e));
        return e == EPERM ? CAL_EPERM : CAL_ENOTFOUND;
    }
    cal_plat_proc *h = calloc(1, sizeof *h);
    if (!h) return CAL_ENOMEM;
    /* pti_total_user/system count Mach absolute time units: nanoseconds on
     * Intel, 125/3 ns ticks on Apple Silicon */
    mach_timebase_info_data_t tb;
    h->tick_ns = mach_timebase_info(&tb) == KERN_SUCCESS && tb.denom ? (double)tb.numer / tb.denom : 1.0;
    h->pid = pid;
    *out = h;
    return CAL_OK;
}

int cal_plat_proc_read(cal_plat_proc *h, cal_plat_usage *u)
{
    struct proc_taskinfo ti;
    if (!h || proc_pidinfo(h->pid, PROC_PIDTASKINFO, 0, &ti, sizeof ti) != (int)sizeof ti)
        return CAL_ENOTFOUND;
    u->rss_bytes = (double)ti.pti_resident_size;
    u->cpu_s = (double)(ti.pti_total_user + ti.pti_total_system) * h->tick_ns / 1e9;
    u->threads = (double)ti.pti_threadnum;
    return CAL_OK;
}

void cal_plat_proc_close(cal_plat_proc *h) { free(h); }

int cal_plat_set_subreaper(void) { return CAL_EABSENT; }
int cal_plat_is_subreaper(void) { return CAL_EABSENT; }
int cal_plat_has_death_signal(void) { return 0; }

pid_t cal_plat_spawn_tied(char *const argv[], int in_fd, int out_fd, int death_signal)
{
    (void)argv; (void)in_fd; (void)out_fd; (void)death_signal;
    return -ENOSYS;
}
