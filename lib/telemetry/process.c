/* caliper telemetry — the target process: RSS, CPU time (user + system)
 * and thread count, read through the platform file (lib/platform: /proc on
 * Linux, proc_pidinfo on macOS, absent elsewhere). The target is the engine
 * caliper launched or --pid P; it may change while running. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "caliper/error.h"
#include "tel_internal.h"
#include "lib/platform/platform.h"

typedef struct proc_state {
    int pid;              /* the pid h belongs to, 0 = none open */
    cal_plat_proc *h;
} proc_state;

static void proc_reopen(proc_state *s, const tel_ctx *ctx, int pid)
{
    cal_plat_proc_close(s->h);
    s->h = NULL;
    s->pid = pid;
    if (pid <= 0) return;
    char why[256];
    if (cal_plat_proc_open(&s->h, ctx->root[0] ? ctx->root : NULL, pid, why, sizeof why) != CAL_OK)
        s->h = NULL;
}

static int proc_probe(const tel_ctx *ctx, void **state, char *why, size_t wn)
{
    int pid = atomic_load(&ctx->pid);
    const char *root = ctx->root[0] ? ctx->root : NULL;
    cal_plat_proc *h = NULL;
    /* the platform must be able to read some process: the target, or us */
    int rc = cal_plat_proc_open(&h, root, pid > 0 ? pid : (int)getpid(), why, wn);
    if (rc == CAL_EABSENT || (pid > 0 && rc != CAL_OK)) return rc;
    cal_plat_proc_close(h);
    proc_state *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    proc_reopen(s, ctx, pid);
    if (pid > 0) snprintf(why, wn, "pid %d", pid);
    else snprintf(why, wn, "no target process (give a process id or a command)");
    *state = s;
    return CAL_OK;   /* the sampler marks it absent while pid is 0 */
}

static void proc_read(void *st, const tel_ctx *ctx, tel_out *e)
{
    proc_state *s = st;
    int pid = atomic_load(&ctx->pid);
    if (pid != s->pid) proc_reopen(s, ctx, pid);
    cal_plat_usage u;
    if (pid <= 0 || !s->h || cal_plat_proc_read(s->h, &u) != CAL_OK) return;   /* exited: no reading */
    if (u.rss_bytes >= 0) tel_emit(e, "B", u.rss_bytes, "rss_bytes");
    tel_emit(e, "s", u.cpu_s, "cpu_time_s");
    if (u.threads >= 0) tel_emit(e, "1", u.threads, "threads");
}

static void proc_close(void *st)
{
    proc_state *s = st;
    proc_reopen(s, NULL, 0);
    free(s);
}

const tel_backend_ops tel_process_ops = {
    "process", "RSS, CPU time and threads of the target process",
    proc_probe, proc_read, proc_close,
};
