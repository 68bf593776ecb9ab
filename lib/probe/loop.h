/* The probe's event-loop seam, in the redis ae style: one small interface
 * over the readiness call of the platform. Backends: the platform's own, in
 * its per-platform file (loop_linux.c: epoll; loop_darwin.c: kqueue;
 * loop_posix.c: none), and poll() (loop_poll.c: any POSIX system). The loop only says which
 * sockets are ready; the probe stamps every chunk in curl's write callback,
 * on arrival and before parsing, so the stamp is taken at the same point
 * whichever backend waited. */
#ifndef CALIPER_PROBE_LOOP_H
#define CALIPER_PROBE_LOOP_H
#include <stdint.h>

enum { CAL_LOOP_IN = 1, CAL_LOOP_OUT = 2, CAL_LOOP_ERR = 4 };

typedef struct cal_loop_event {
    int      fd;
    unsigned what;        /* CAL_LOOP_IN | _OUT | _ERR (hang-up reads as IN) */
    uint32_t tag;         /* what the caller gave cal_loop_set for fd */
} cal_loop_event;

typedef struct cal_loop cal_loop;

/* One backend: a table of functions chosen once, at open. */
typedef struct cal_loop_ops {
    const char *name;                                   /* "epoll", "poll", "kqueue" */
    int  (*open)(cal_loop *l);                          /* sets l->impl */
    void (*close)(cal_loop *l);
    /* watch fd for `what` (0: stop watching it; an unknown fd is fine) */
    int  (*set)(cal_loop *l, int fd, unsigned what, uint32_t tag);
    /* wait up to wait_ns (0: look and return) for ready sockets */
    int  (*wait)(cal_loop *l, cal_loop_event *evs, int maxev, int64_t wait_ns);
} cal_loop_ops;

struct cal_loop {
    const cal_loop_ops *ops;
    void *impl;           /* the backend's state */
    int   fallback;       /* the backend waits in whole ms: epoll without
                             epoll_pwait2 (Linux before 5.11), or poll() */
    int   fake_enosys;    /* CALIPER_PROBE_NO_PWAIT2=1: epoll_pwait2 is taken to
                             answer ENOSYS */
};

/* The platform's own backend (NULL: none, poll() only), and poll(). */
extern const cal_loop_ops *const cal_loop_native_ops;
extern const cal_loop_ops *const cal_loop_poll_ops;

/* The CPUs this process may run on, less those process engine_pid (> 0) is
 * pinned to where it is pinned to fewer than all of them (per platform). */
int cal_loop_cpus(int engine_pid);

/* The backend a probe uses: `name` ("epoll", "kqueue", "poll"), or when NULL
 * or empty the environment's CALIPER_LOOP, or else the platform's own (poll
 * where it has none). NULL for a name not built here. */
const cal_loop_ops *cal_loop_pick(const char *name);
const char *cal_loop_names(void);        /* "epoll, poll": those built here */

/* cal_loop_open: CAL_ENOMEM, or CAL_EIO when the kernel refuses the set.
 * cal_loop_close NULLs *l; NULL is fine. cal_loop_wait returns the number of
 * events (0 on timeout or EINTR), or -1 with errno. */
int  cal_loop_open(const cal_loop_ops *ops, cal_loop **out);
void cal_loop_close(cal_loop **l);
int  cal_loop_set(cal_loop *l, int fd, unsigned what, uint32_t tag);
int  cal_loop_wait(cal_loop *l, cal_loop_event *evs, int maxev, int64_t wait_ns);

#endif
