/* The event-loop seam on Linux: the epoll backend, O(ready sockets) per
 * wakeup, and the CPUs a run may use (sched_getaffinity).
 * It waits with epoll_pwait2 (a timeout in ns); a kernel before 5.11 answers
 * ENOSYS (a seccomp filter may answer EPERM, which the call has no other use
 * for): the loop then waits with epoll_wait for good, its timeout rounded up
 * to whole ms so that a wait under 1 ms does not become a busy loop. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include "caliper/error.h"
#include "loop.h"

#define MAX_BATCH 256

typedef struct ep {
    int epfd;
    unsigned char *in;       /* [cap] fd is in the set: one epoll_ctl per change */
    int cap;
    struct epoll_event evs[MAX_BATCH];
} ep;

static int ep_open(cal_loop *l)
{
    ep *e = calloc(1, sizeof *e);
    if (!e) return CAL_ENOMEM;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->epfd < 0) { int rc = errno == ENOMEM ? CAL_ENOMEM : CAL_EIO; free(e); return rc; }
    l->impl = e;
    return CAL_OK;
}

static void ep_close(cal_loop *l)
{
    ep *e = l->impl;
    if (!e) return;
    close(e->epfd);
    free(e->in);
    free(e);
    l->impl = NULL;
}

/* The tag rides in the high half of the event's data, the fd in the low. */
static int ep_set(cal_loop *l, int fd, unsigned what, uint32_t tag)
{
    ep *e = l->impl;
    if (fd < 0) return CAL_EINVAL;
    if (!what) {
        if (fd < e->cap && e->in[fd]) {
            e->in[fd] = 0;
            epoll_ctl(e->epfd, EPOLL_CTL_DEL, fd, NULL);   /* an fd closed already is gone */
        }
        return CAL_OK;
    }
    if (fd >= e->cap) {
        int nc = e->cap ? e->cap : 256;
        while (nc <= fd) nc *= 2;
        unsigned char *a = realloc(e->in, (size_t)nc);
        if (!a) return CAL_ENOMEM;
        memset(a + e->cap, 0, (size_t)(nc - e->cap));
        e->in = a;
        e->cap = nc;
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.data.u64 = (uint64_t)tag << 32 | (uint32_t)fd;
    if (what & CAL_LOOP_IN) ev.events |= EPOLLIN;
    if (what & CAL_LOOP_OUT) ev.events |= EPOLLOUT;
    /* the set's own idea wins where ours is stale (an fd closed and reused
     * between curl's calls) */
    int op = e->in[fd] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(e->epfd, op, fd, &ev) != 0) {
        if (errno != (op == EPOLL_CTL_MOD ? ENOENT : EEXIST)) return errno == ENOMEM ? CAL_ENOMEM : CAL_EIO;
        op = op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
        if (epoll_ctl(e->epfd, op, fd, &ev) != 0) return errno == ENOMEM ? CAL_ENOMEM : CAL_EIO;
    }
    e->in[fd] = 1;
    return CAL_OK;
}

static int ep_wait(cal_loop *l, cal_loop_event *out, int maxev, int64_t wait_ns)
{
    ep *e = l->impl;
    if (maxev > MAX_BATCH) maxev = MAX_BATCH;
    int nev = -1;
    if (!l->fallback) {
        struct timespec ts = { (time_t)(wait_ns / 1000000000), (long)(wait_ns % 1000000000) };
        nev = l->fake_enosys ? (errno = ENOSYS, -1) : epoll_pwait2(e->epfd, e->evs, maxev, &ts, NULL);
        if (nev < 0 && (errno == ENOSYS || errno == EPERM)) l->fallback = 1;
    }
    if (l->fallback) {
        int64_t ms = (wait_ns + 999999) / 1000000;
        nev = epoll_wait(e->epfd, e->evs, maxev, ms > INT_MAX ? INT_MAX : (int)ms);
    }
    if (nev < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < nev; i++) {
        uint32_t ev = e->evs[i].events;
        out[i].fd = (int)(uint32_t)e->evs[i].data.u64;
        out[i].tag = (uint32_t)(e->evs[i].data.u64 >> 32);
        out[i].what = (ev & (EPOLLIN | EPOLLHUP) ? CAL_LOOP_IN : 0)
                    | (ev & EPOLLOUT ? CAL_LOOP_OUT : 0) | (ev & EPOLLERR ? CAL_LOOP_ERR : 0);
    }
    return nev;
}

static const cal_loop_ops g_epoll = { "epoll", ep_open, ep_close, ep_set, ep_wait };
const cal_loop_ops *const cal_loop_native_ops = &g_epoll;

int cal_loop_cpus(int engine_pid)
{
    cpu_set_t mine, eng;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        return online > 0 ? (int)online : 1;
    }
    int n = CPU_COUNT(&mine);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(&eng);
    if (engine_pid > 0 && sched_getaffinity((pid_t)engine_pid, sizeof eng, &eng) == 0
        && online > 0 && CPU_COUNT(&eng) < online) {   /* pinned: leave it its CPUs */
        cpu_set_t both;
        CPU_AND(&both, &mine, &eng);
        n -= CPU_COUNT(&both);
    }
    return n;
}
