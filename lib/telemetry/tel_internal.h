/* caliper telemetry — the contract between the sampler (sampler.c) and its
 * backends (one file each): a backend is a table of function pointers,
 * probed once, read once per tick into a preallocated emit buffer.
 * Private to lib/telemetry; nothing here is installed. */
#ifndef CALIPER_TEL_INTERNAL_H
#define CALIPER_TEL_INTERNAL_H
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "caliper/telemetry.h"

/* What every backend sees: the injectable root and the process target. */
typedef struct tel_ctx {
    char        root[512];      /* "" = the real /sys and /proc */
    atomic_int  pid;            /* process backend target, 0 = none */
    int64_t     interval_ns;
} tel_ctx;

/* A tick's scratch: samples are written in place, nothing allocates. */
typedef struct tel_out {
    cal_tel_sample *buf;
    size_t          n, cap;
    uint64_t        dropped;    /* samples that did not fit */
    const char     *backend;    /* set by the sampler before each read */
    int64_t         t_ns;       /* the read's timestamp */
} tel_out;

/* Append one sample named by the printf format. */
void tel_emit(tel_out *e, const char *unit, double value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct tel_backend_ops {
    const char *name;
    const char *what;           /* one line for --list */
    /* Find the sources under ctx->root. On CAL_OK *state holds what read
     * needs and why[] says what was found; otherwise why[] says why the
     * backend is absent (and how to grant access, for CAL_EPERM). */
    int  (*probe)(const tel_ctx *ctx, void **state, char *why, size_t n);
    /* One reading. Emits only what it actually measured. */
    void (*read)(void *state, const tel_ctx *ctx, tel_out *e);
    void (*close)(void *state);
} tel_backend_ops;

extern const tel_backend_ops tel_cpufreq_ops, tel_cpuinfo_ops, tel_rapl_ops,
    tel_hwmon_ops, tel_thermal_ops, tel_throttle_ops, tel_nvml_ops,
    tel_amdgpu_ops, tel_apple_ops, tel_process_ops;

/* --- file helpers (util.c) --- */
/* ctx->root + path into buf; returns buf. */
char *tel_path(const tel_ctx *ctx, char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Read a whole small file into buf (NUL-terminated). Returns bytes read, or
 * -errno. */
long  tel_read_file(const char *path, char *buf, size_t n);
/* Re-read an open file from offset 0 (sysfs/procfs regenerate). */
long  tel_pread_str(int fd, char *buf, size_t n);
/* Parse the first number in an open file; 0 on success, -1 otherwise. */
int   tel_pread_u64(int fd, uint64_t *out);
int   tel_pread_i64(int fd, int64_t *out);
/* open(O_RDONLY|O_CLOEXEC); returns fd or -errno. */
int   tel_open(const char *path);
/* why[] for an errno from opening path: "no such file: PATH",
 * "permission denied: PATH (grant)" ... ; returns the cal_err matching it. */
int   tel_why_errno(int err, const char *path, const char *grant, char *why, size_t n);
/* Copy s into a metric-safe token (lowercase, [a-z0-9_], at most n-1). */
void  tel_token(const char *s, char *out, size_t n);
/* Trim trailing whitespace in place. */
void  tel_chomp(char *s);

#endif
