/* The event-loop seam on macOS: the kqueue backend, written against
 * kqueue(2) / kevent(2) as documented (the BSDs have the same calls), and the
 * CPUs a run may use (macOS has no affinity masks: the online count). A socket is two filters (EVFILT_READ, EVFILT_WRITE), each added
 * or deleted as curl's interest changes; the timeout is a timespec (ns). The
 * wanted mask per fd is kept so that a change touches only the filters that
 * differ. Not exercised here (no such system); the poll backend is the
 * generic one the tests run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "caliper/error.h"
#include "loop.h"

#define MAX_BATCH 256

typedef struct kq {
    int kfd;
    unsigned char *mask;     /* [cap] fd -> CAL_LOOP_IN | _OUT now registered */
    int cap;
    struct kevent evs[MAX_BATCH];
} kq;

static int kq_open(cal_loop *l)
{
    kq *k = calloc(1, sizeof *k);
    if (!k) return CAL_ENOMEM;
    k->kfd = kqueue();
    if (k->kfd < 0) { free(k); return CAL_EIO; }
    l->impl = k;
    return CAL_OK;
}

static void kq_close(cal_loop *l)
{
    kq *k = l->impl;
    if (!k) return;
    close(k->kfd);
    free(k->mask);
    free(k);
    l->impl = NULL;
}

static int kq_set(cal_loop *l, int fd, unsigned what, uint32_t tag)
{
    kq *k = l->impl;
    if (fd < 0) return CAL_EINVAL;
    if (fd >= k->cap) {
        if (!what) return CAL_OK;
        int nc = k->cap ? k->cap : 64;
        while (nc <= fd) nc *= 2;
        unsigned char *a = realloc(k->mask, (size_t)nc);
        if (!a) return CAL_ENOMEM;
        memset(a + k->cap, 0, (size_t)(nc - k->cap));
        k->mask = a;
        k->cap = nc;
    }
    unsigned had = k->mask[fd];
    struct kevent ch[2];
    int n = 0;
    void *ud = (void *)(uintptr_t)tag;
    if ((what & CAL_LOOP_IN) && !(had & CAL_LOOP_IN)) EV_SET(&ch[n++], fd, EVFILT_READ, EV_ADD, 0, 0, ud);
    if (!(what & CAL_LOOP_IN) && (had & CAL_LOOP_IN)) EV_SET(&ch[n++], fd, EVFILT_READ, EV_DELETE, 0, 0, ud);
    if ((what & CAL_LOOP_OUT) && !(had & CAL_LOOP_OUT)) EV_SET(&ch[n++], fd, EVFILT_WRITE, EV_ADD, 0, 0, ud);
    if (!(what & CAL_LOOP_OUT) && (had & CAL_LOOP_OUT)) EV_SET(&ch[n++], fd, EVFILT_WRITE, EV_DELETE, 0, 0, ud);
    k->mask[fd] = (unsigned char)(what & (CAL_LOOP_IN | CAL_LOOP_OUT));
    /* a filter added again with a new udata keeps the fd's tag current */
    if (what && n == 0) {
        if (what & CAL_LOOP_IN) EV_SET(&ch[n++], fd, EVFILT_READ, EV_ADD, 0, 0, ud);
        if (what & CAL_LOOP_OUT) EV_SET(&ch[n++], fd, EVFILT_WRITE, EV_ADD, 0, 0, ud);
    }
    /* deleting the filters of an fd curl closed already fails: nothing to do */
    if (n && kevent(k->kfd, ch, n, NULL, 0, NULL) < 0 && what) return CAL_EIO;
    return CAL_OK;
}

static int kq_wait(cal_loop *l, cal_loop_event *out, int maxev, int64_t wait_ns)
{
    kq *k = l->impl;
    if (maxev > MAX_BATCH) maxev = MAX_BATCH;
    struct timespec ts = { (time_t)(wait_ns / 1000000000), (long)(wait_ns % 1000000000) };
    int nev = kevent(k->kfd, NULL, 0, k->evs, maxev, &ts);
    if (nev < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < nev; i++) {
        const struct kevent *e = &k->evs[i];
        out[i].fd = (int)e->ident;
        out[i].tag = (uint32_t)(uintptr_t)e->udata;
        out[i].what = (e->filter == EVFILT_READ ? CAL_LOOP_IN : CAL_LOOP_OUT)
                    | (e->flags & EV_ERROR ? CAL_LOOP_ERR : 0);
        if ((e->flags & EV_EOF) && e->filter == EVFILT_READ) out[i].what |= CAL_LOOP_IN;
    }
    return nev;
}

static const cal_loop_ops g_kqueue = { "kqueue", kq_open, kq_close, kq_set, kq_wait };
const cal_loop_ops *const cal_loop_native_ops = &g_kqueue;

int cal_loop_cpus(int engine_pid)
{
    (void)engine_pid;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
