/* The event-loop seam's front: which backend, and the calls that reach it.
 * What differs by platform lives in loop_<platform>.c, nowhere else. */
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "loop.h"

const cal_loop_ops *cal_loop_pick(const char *name)
{
    if (!name || !*name) name = getenv("CALIPER_LOOP");
    if (!name || !*name) return cal_loop_native_ops ? cal_loop_native_ops : cal_loop_poll_ops;
    if (cal_loop_native_ops && strcmp(cal_loop_native_ops->name, name) == 0) return cal_loop_native_ops;
    if (strcmp(cal_loop_poll_ops->name, name) == 0) return cal_loop_poll_ops;
    return NULL;
}

const char *cal_loop_names(void)
{
    if (!cal_loop_native_ops) return "poll";
    return strcmp(cal_loop_native_ops->name, "epoll") == 0 ? "epoll, poll" : "kqueue, poll";
}

int cal_loop_open(const cal_loop_ops *ops, cal_loop **out)
{
    if (!ops || !out) return CAL_EINVAL;
    cal_loop *l = calloc(1, sizeof *l);
    if (!l) return CAL_ENOMEM;
    l->ops = ops;
    const char *nop2 = getenv("CALIPER_PROBE_NO_PWAIT2");
    l->fake_enosys = nop2 && strcmp(nop2, "1") == 0;
    int rc = ops->open(l);
    if (rc) { free(l); return rc; }
    *out = l;
    return CAL_OK;
}

void cal_loop_close(cal_loop **pl)
{
    if (!pl || !*pl) return;
    (*pl)->ops->close(*pl);
    free(*pl);
    *pl = NULL;
}

int cal_loop_set(cal_loop *l, int fd, unsigned what, uint32_t tag)
{
    return l->ops->set(l, fd, what, tag);
}

int cal_loop_wait(cal_loop *l, cal_loop_event *evs, int maxev, int64_t wait_ns)
{
    if (wait_ns < 0) wait_ns = 0;
    return l->ops->wait(l, evs, maxev, wait_ns);
}
