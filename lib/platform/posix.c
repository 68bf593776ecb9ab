/* The generic POSIX platform file (platform.h): only what POSIX offers.
 * It cannot read another process's usage, the CPU's model, the memory size
 * or a GPU, and has no subreaper or parent-death signal: each says so. Built
 * for PLATFORM=posix, which `make test PLATFORM=posix` runs on Linux to
 * prove the portable core. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "lib/platform/platform.h"

const char *cal_plat_name(void) { return "posix"; }

static char g_argv0[PATH_MAX];

void cal_plat_set_argv0(const char *argv0)
{
    if (argv0) snprintf(g_argv0, sizeof g_argv0, "%s", argv0);
}

/* argv[0] as the shell found it: a path as given, or the first PATH entry
 * holding an executable of that name. */
const char *cal_plat_self_exe(char *why, size_t whyn)
{
    static char exe[PATH_MAX];
    if (exe[0]) return exe;
    if (!g_argv0[0]) {
        if (why && whyn) snprintf(why, whyn, "argv[0] was not recorded (cal_plat_set_argv0)");
        return NULL;
    }
    if (strchr(g_argv0, '/')) {
        if (!realpath(g_argv0, exe)) {
            if (why && whyn) snprintf(why, whyn, "%s: %s", g_argv0, strerror(errno));
            exe[0] = '\0';
            return NULL;
        }
        return exe;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        char cand[PATH_MAX];
        int w = snprintf(cand, sizeof cand, "%.*s/%s", (int)len, len ? path : ".", g_argv0);
        if (w > 0 && (size_t)w < sizeof cand && access(cand, X_OK) == 0 && realpath(cand, exe))
            return exe;
        path += len + (path[len] == ':');
    }
    exe[0] = '\0';
    if (why && whyn) snprintf(why, whyn, "%s: not found on PATH", g_argv0);
    return NULL;
}

int cal_plat_cpu_model(char *out, size_t n) { if (n) out[0] = '\0'; return CAL_EABSENT; }
int cal_plat_mem_total(int64_t *bytes) { (void)bytes; return CAL_EABSENT; }
int cal_plat_gpu_name(char *out, size_t n) { if (n) out[0] = '\0'; return CAL_EABSENT; }

/* kill(pid, 0): EPERM still means it exists. A captured tree is a Linux
 * one, which this platform does not read. */
int cal_plat_pid_exists(const char *root, long pid)
{
    if (root && *root) return 0;
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

const char *cal_plat_proc_source(void) { return "none on this platform"; }

int cal_plat_proc_open(cal_plat_proc **out, const char *root, int pid, char *why, size_t whyn)
{
    (void)out; (void)root; (void)pid;
    if (why && whyn) snprintf(why, whyn, "no way to read another process's usage on a generic POSIX system");
    return CAL_EABSENT;
}

int  cal_plat_proc_read(cal_plat_proc *p, cal_plat_usage *u) { (void)p; (void)u; return CAL_EABSENT; }
void cal_plat_proc_close(cal_plat_proc *p) { (void)p; }

int cal_plat_set_subreaper(void) { return CAL_EABSENT; }
int cal_plat_is_subreaper(void) { return CAL_EABSENT; }
int cal_plat_has_death_signal(void) { return 0; }

pid_t cal_plat_spawn_tied(char *const argv[], int in_fd, int out_fd, int death_signal)
{
    (void)argv; (void)in_fd; (void)out_fd; (void)death_signal;
    return -ENOSYS;
}
