/* The event-loop seam's poll() backend: any POSIX system, and the way to run
 * the probe where epoll and kqueue are missing (or CALIPER_LOOP=poll asks for
 * it). O(watched sockets) per wakeup, and the timeout in whole ms (rounded
 * up, so a wait under 1 ms is not a busy loop). The watched set is a dense
 * pollfd array plus an fd -> slot index, so a change costs O(1). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "loop.h"

typedef struct pl {
    struct pollfd *pfd;     /* [n] watched */
    uint32_t *tag;          /* [n] their tags */
    int n, cap;
    int *at;                /* [at_cap] fd -> index in pfd, or -1 */
    int at_cap;
    int next;               /* where the next scan starts (fairness) */
} pl;

static int pl_open(cal_loop *l)
{
    pl *p = calloc(1, sizeof *p);
    if (!p) return CAL_ENOMEM;
    l->impl = p;
    l->fallback = 1;
    return CAL_OK;
}

static void pl_close(cal_loop *l)
{
    pl *p = l->impl;
    if (!p) return;
    free(p->pfd);
    free(p->tag);
    free(p->at);
    free(p);
    l->impl = NULL;
}

static int pl_set(cal_loop *l, int fd, unsigned what, uint32_t tag)
{
    pl *p = l->impl;
    if (fd < 0) return CAL_EINVAL;
    int i = fd < p->at_cap ? p->at[fd] : -1;
    if (!what) {                            /* remove: the last entry fills the hole */
        if (i < 0) return CAL_OK;
        p->n--;
        if (i != p->n) {
            p->pfd[i] = p->pfd[p->n];
            p->tag[i] = p->tag[p->n];
            p->at[p->pfd[i].fd] = i;
        }
        p->at[fd] = -1;
        return CAL_OK;
    }
    if (fd >= p->at_cap) {
        int nc = p->at_cap ? p->at_cap : 64;
        while (nc <= fd) nc *= 2;
        int *a = realloc(p->at, (size_t)nc * sizeof *a);
        if (!a) return CAL_ENOMEM;
        for (int k = p->at_cap; k < nc; k++) a[k] = -1;
        p->at = a;
        p->at_cap = nc;
    }
    if (i < 0) {
        if (p->n == p->cap) {
            int nc = p->cap ? p->cap * 2 : 64;
            struct pollfd *a = realloc(p->pfd, (size_t)nc * sizeof *a);
            if (!a) return CAL_ENOMEM;
            p->pfd = a;
            uint32_t *t = realloc(p->tag, (size_t)nc * sizeof *t);
            if (!t) return CAL_ENOMEM;
            p->tag = t;
            p->cap = nc;
        }
        i = p->n++;
        p->at[fd] = i;
        p->pfd[i].fd = fd;
    }
    p->pfd[i].events = (short)((what & CAL_LOOP_IN ? POLLIN : 0) | (what & CAL_LOOP_OUT ? POLLOUT : 0));
    p->pfd[i].revents = 0;
    p->tag[i] = tag;
    return CAL_OK;
}

static int pl_wait(cal_loop *l, cal_loop_event *out, int maxev, int64_t wait_ns)
{
    pl *p = l->impl;
    int64_t ms = (wait_ns + 999999) / 1000000;
    int nr = poll(p->pfd, (nfds_t)p->n, ms > INT_MAX ? INT_MAX : (int)ms);
    if (nr < 0) return errno == EINTR ? 0 : -1;
    int got = 0;
    /* more ready than fit: start where the last batch stopped, so that no
     * socket waits behind the same others every time */
    for (int k = 0; k < p->n && got < maxev && nr > 0; k++) {
        int i = (p->next + k) % p->n;
        short re = p->pfd[i].revents;
        if (!re) continue;
        nr--;
        out[got].fd = p->pfd[i].fd;
        out[got].tag = p->tag[i];
        out[got].what = (re & (POLLIN | POLLHUP) ? CAL_LOOP_IN : 0)
                      | (re & POLLOUT ? CAL_LOOP_OUT : 0)
                      | (re & (POLLERR | POLLNVAL) ? CAL_LOOP_ERR : 0);
        got++;
        if (got == maxev) p->next = (i + 1) % p->n;
    }
    return got;
}

static const cal_loop_ops g_poll = { "poll", pl_open, pl_close, pl_set, pl_wait };
const cal_loop_ops *const cal_loop_poll_ops = &g_poll;
