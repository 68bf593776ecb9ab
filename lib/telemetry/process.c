/* caliper telemetry — the target process: RSS (/proc/PID/status VmRSS),
 * CPU time (utime+stime from /proc/PID/stat) and thread count. The target
 * is the engine caliper launched or --pid P; it may change while running. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"
#include "lib/util/c_locale.h"

typedef struct proc_state {
    int  pid;          /* the pid the fds belong to, 0 = none open */
    int  stat_fd, status_fd;
    long tick_hz;
} proc_state;

static void proc_reopen(proc_state *s, const tel_ctx *ctx, int pid)
{
    if (s->stat_fd >= 0) close(s->stat_fd);
    if (s->status_fd >= 0) close(s->status_fd);
    s->stat_fd = s->status_fd = -1;
    s->pid = pid;
    if (pid <= 0) return;
    char p[700];
    s->stat_fd = tel_open(tel_path(ctx, p, sizeof p, "/proc/%d/stat", pid));
    s->status_fd = tel_open(tel_path(ctx, p, sizeof p, "/proc/%d/status", pid));
    if (s->stat_fd < 0) s->stat_fd = -1;
    if (s->status_fd < 0) s->status_fd = -1;
}

static int proc_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    char p[700];
    int pid = atomic_load(&ctx->pid);
    tel_path(ctx, p, sizeof p, "/proc/%d/stat", pid > 0 ? pid : (int)getpid());
    if (pid > 0 && access(p, R_OK) != 0) return tel_why_errno(errno, p, NULL, why, wn);
    proc_state *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    s->stat_fd = s->status_fd = -1;
    s->tick_hz = sysconf(_SC_CLK_TCK);
    if (s->tick_hz <= 0) s->tick_hz = 100;
    proc_reopen(s, ctx, pid);
    if (pid > 0) snprintf(why, wn, "pid %d", pid);
    else snprintf(why, wn, "no target process (give --pid P or a command)");
    *state = s;
    return CAL_OK;   /* the sampler marks it absent while pid is 0 */
}

/* /proc/PID/stat: "pid (comm) state ppid ..." — comm may hold spaces and
 * parentheses, so fields are counted after the last ')'. Field 14 utime,
 * 15 stime (clock ticks), 20 num_threads, 24 rss (pages). */
static int parse_stat(const char *b, double *cpu_s, double *threads, double *rss_pages, long hz)
{
    const char *r = strrchr(b, ')');
    if (!r) return -1;
    unsigned long long f[64] = {0};
    int k = 3;                      /* the next field after ')' is field 3 (state) */
    const char *p = r + 1;
    while (*p && k < 30) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (k == 3) {   /* state: one letter; a zombie's zero RSS is no reading */
            if (*p == 'Z' || *p == 'X') return -1;
            p++; k++; continue;
        }
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) return -1;
        f[k++] = v < 0 ? 0 : (unsigned long long)v;
        p = end;
    }
    if (k <= 24) return -1;
    *cpu_s = (double)(f[14] + f[15]) / (double)hz;
    *threads = (double)f[20];
    *rss_pages = (double)f[24];
    return 0;
}

static void proc_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    proc_state *s = st;
    int pid = atomic_load(&ctx->pid);
    if (pid != s->pid) proc_reopen(s, ctx, pid);
    if (pid <= 0 || s->stat_fd < 0) return;
    char b[4096];
    double cpu_s, threads, rss_pages;
    if (tel_pread_str(s->stat_fd, b, sizeof b) <= 0) return;   /* exited: no reading */
    if (parse_stat(b, &cpu_s, &threads, &rss_pages, s->tick_hz) != 0) return;
    double rss = -1;
    if (s->status_fd >= 0 && tel_pread_str(s->status_fd, b, sizeof b) > 0) {
        const char *v = strstr(b, "\nVmRSS:");
        if (v) rss = cal_strtod(v + 8, NULL) * 1024.0;          /* kB */
    }
    if (rss < 0) rss = rss_pages * (double)sysconf(_SC_PAGESIZE);
    tel_emit(e, "B", rss, "rss_bytes");
    tel_emit(e, "s", cpu_s, "cpu_time_s");
    tel_emit(e, "1", threads, "threads");
}

static void proc_close(void *st)
{
    proc_state *s = st;
    proc_reopen(s, NULL, 0);
    free(s);
}

const tel_backend_ops tel_process_ops = {
    "process", "RSS, CPU time and threads of the target process (/proc/PID)",
    proc_probe, proc_read, proc_close,
};
