/* caliper platform — the few operating-system facts a program built on
 * libcaliper needs: which platform the library was built for, a path that
 * runs this very binary again (to start a server or a shard of itself), and
 * whether a process exists. Each platform (Linux, macOS, plain POSIX)
 * answers them its own way; where it cannot, it says so. */
#ifndef CALIPER_PLATFORM_H
#define CALIPER_PLATFORM_H
#include <stddef.h>

/* "linux", "darwin" or "posix". */
const char *cal_plat_name(void);

/* Remembers argv[0] for cal_plat_self_exe where the OS cannot name the
 * running binary (posix). Call once from main, before any thread. */
void cal_plat_set_argv0(const char *argv0);

/* A path that execs this very binary; NULL when it cannot be found (then
 * why says why). The string is static and lives as long as the process. */
const char *cal_plat_self_exe(char *why, size_t whyn);

/* 1 when process pid exists (root: a captured tree to look in instead of
 * the live system, where the platform reads one; NULL = live). */
int cal_plat_pid_exists(const char *root, long pid);

#endif
