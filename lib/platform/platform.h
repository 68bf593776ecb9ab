/* What differs between operating systems, behind one file each:
 *
 *   linux.c   /proc, prctl (subreaper, parent-death signal)
 *   darwin.c  libproc (proc_pid_rusage, proc_pidinfo), sysctl,
 *             _NSGetExecutablePath
 *   posix.c   POSIX only: what it cannot know is absent, with the reason
 *
 * The Makefile builds exactly one of them (PLATFORM=linux|darwin|posix,
 * detected from uname; `make test PLATFORM=posix` proves the generic build
 * on Linux). No other file of the tree calls a Linux-only interface
 * (tests/e2e/test_portable.sh greps for them). Internal to libcaliper; not
 * installed. The part a program needs is public: caliper/platform.h. */
#ifndef CAL_PLATFORM_H
#define CAL_PLATFORM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "caliper/platform.h"

/* cal_plat_name, cal_plat_set_argv0, cal_plat_self_exe, cal_plat_pid_exists:
 * caliper/platform.h (what a program linking libcaliper may call). */

/* ---- host facts; each returns 0 or CAL_EABSENT with why filled ---- */
int cal_plat_cpu_model(char *out, size_t n);
int cal_plat_mem_total(int64_t *bytes);
/* The first NVIDIA GPU's name as its driver lists it (no NVML needed). */
int cal_plat_gpu_name(char *out, size_t n);

/* ---- a process's usage: RSS, CPU time, threads ---- */
typedef struct cal_plat_proc cal_plat_proc;
typedef struct cal_plat_usage {
    double rss_bytes;    /* < 0: unknown */
    double cpu_s;        /* user + system */
    double threads;      /* < 0: unknown */
} cal_plat_usage;
/* Opens pid for repeated reads (root as above). CAL_EABSENT with why when
 * this platform has no way to read another process; CAL_ENOTFOUND when the
 * process is gone. */
int  cal_plat_proc_open(cal_plat_proc **out, const char *root, int pid, char *why, size_t whyn);
/* 0 with a reading; CAL_ENOTFOUND when the process has exited (or is a
 * zombie: its zero RSS is no reading). */
int  cal_plat_proc_read(cal_plat_proc *p, cal_plat_usage *u);
void cal_plat_proc_close(cal_plat_proc *p);
/* Where the readings come from, for a backend's description. */
const char *cal_plat_proc_source(void);

/* ---- process control extras (optional; the core spawns with posix_spawn) ---- */
/* Makes this process adopt its descendants' orphans (Linux subreaper).
 * Process-wide and never undone. 0, or CAL_EABSENT where the OS has none. */
int cal_plat_set_subreaper(void);
/* 1 when this process is a subreaper, 0 when not, CAL_EABSENT elsewhere. */
int cal_plat_is_subreaper(void);
/* 1 where the OS can tie a child's life to the thread that started it
 * (Linux's parent-death signal); then cal_plat_spawn_tied starts it. */
int cal_plat_has_death_signal(void);
/* Starts argv in its own process group with stdin from in_fd and stdout
 * and stderr to out_fd, its signal mask empty, and death_signal delivered
 * to it when the calling thread exits. Only where cal_plat_has_death_signal.
 * Returns the pid or -errno. */
pid_t cal_plat_spawn_tied(char *const argv[], int in_fd, int out_fd, int death_signal);

#endif
