/* caliper reference engine — fork-join thread pool. Workers spin on a
 * generation counter for a fraction of a millisecond after each job (the next one of
 * the same step usually follows within microseconds), then sleep on a
 * condition variable so an idle server costs no CPU. A cal_pool_run job is
 * every thread's and the caller waits for all of them; a cal_pool_for job is
 * open to the workers that come while it has work, and the caller waits
 * only for those. */
#include "engine/pool.h"
#include "caliper/error.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RELAX() _mm_pause()
#else
#define RELAX() ((void)0)
#endif

/* ~0.2 ms of PAUSE (about 25 ns each here): long enough to catch the next
 * job of the same step, short enough not to hold a shared core when idle */
#define SPIN_LIMIT 8000
/* the caller gives its core away sooner: a late worker is usually one the
 * scheduler has not run yet */
#define WAIT_SPINS 2000

/* cal_pool_for: a thread's band of the range, [lo, hi) packed in one word
 * (lo in the low half), alone on its cache line */
typedef struct band {
    _Alignas(64) _Atomic uint64_t v;
} band;

typedef struct for_job {
    cal_pool_range_fn fn;
    void *arg;
    int grain, piece;
    band *b;
} for_job;

typedef struct worker {
    struct cal_pool *pool;
    int tid;
} worker;

struct cal_pool {
    int n;
    pthread_t *th;
    worker *w;
    int started;
    cal_pool_fn fn;           /* published by the release on gen (and open) */
    void *arg;
    atomic_uint gen;          /* 2 a job; bit 0: every thread runs it (cal_pool_run) */
    atomic_int pending;       /* cal_pool_run: workers still in it */
    atomic_uint open;         /* cal_pool_for: the gen of the job workers may
                                 still join, 0 when none */
    atomic_int active;        /* cal_pool_for: workers that joined it */
    atomic_int sleepers;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    band *bands;              /* [n], for cal_pool_for */
};

static void *work(void *a)
{
    worker *w = a;
    cal_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&p->gen)) == seen) {
            if (++spins < SPIN_LIMIT) {
                RELAX();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen)
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = g;
        if (atomic_load(&p->stop))
            return NULL;
        if (g & 1u) {
            p->fn(p->arg, w->tid, p->n);
            atomic_fetch_sub(&p->pending, 1);
            continue;
        }
        /* cal_pool_for: join only while the job is open. The caller closes
         * it and then waits for `active` to drain, so a worker that counted
         * itself in before the close is waited for, and one that comes
         * later (a core the scheduler gave away) stays out: no one waits
         * for a thread that is not running */
        atomic_fetch_add(&p->active, 1);
        if (atomic_load(&p->open) == g)
            p->fn(p->arg, w->tid, p->n);
        atomic_fetch_sub(&p->active, 1);
    }
}

int cal_pool_open(int n_threads, cal_pool **out)
{
    if (!out || n_threads < 1 || n_threads > 256)
        return CAL_EINVAL;
    *out = NULL;
    cal_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CAL_ENOMEM;
    p->n = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->open, 0);
    atomic_init(&p->active, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    p->w = calloc((size_t)n_threads, sizeof *p->w);
    p->bands = aligned_alloc(_Alignof(band), (size_t)n_threads * sizeof(band));
    if (!p->th || !p->w || !p->bands) {
        cal_pool_close(&p);
        return CAL_ENOMEM;
    }
    for (int i = 1; i < n_threads; i++) {
        p->w[i] = (worker){p, i};
        if (pthread_create(&p->th[i], NULL, work, &p->w[i]) != 0) {
            p->n = i; /* run with the threads we have */
            break;
        }
        p->started = i;
    }
    *out = p;
    return CAL_OK;
}

void cal_pool_close(cal_pool **pp)
{
    if (!pp || !*pp)
        return;
    cal_pool *p = *pp;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->started; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p->w);
    free(p->bands);
    free(p);
    *pp = NULL;
}

int cal_pool_threads(const cal_pool *p) { return p ? p->n : 1; }

/* Publishes fn(arg) as the next job, every thread's (cal_pool_run) or
 * open to those that come (cal_pool_for), and wakes the sleepers. */
static void publish(cal_pool *p, cal_pool_fn fn, void *arg, int every)
{
    p->fn = fn;
    p->arg = arg;
    unsigned g = ((atomic_load(&p->gen) + 2u) & ~1u) | (unsigned)every;
    if (every)
        atomic_store(&p->pending, p->n - 1);
    else
        atomic_store(&p->open, g);
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* until *c is 0: spin a while, then give the core away (a worker that holds
 * it up was descheduled) */
static void drain(atomic_int *c)
{
    int spins = 0;
    while (atomic_load(c) > 0) {
        if (++spins < WAIT_SPINS)
            RELAX();
        else
            sched_yield();
    }
}

void cal_pool_run(cal_pool *p, cal_pool_fn fn, void *arg)
{
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    publish(p, fn, arg, 1);
    fn(arg, 0, p->n);
    drain(&p->pending);
}

/* Takes one piece of band b: from its low end for the band's own thread,
 * from its high end for another (cut at a multiple of grain). 0 when the
 * band is empty. */
static int take(const for_job *j, band *b, int own, int *i0, int *i1)
{
    uint64_t v = atomic_load_explicit(&b->v, memory_order_relaxed);
    for (;;) {
        uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32), nlo = lo, nhi = hi;
        if (lo >= hi)
            return 0;
        if (hi - lo <= (uint32_t)j->piece) {
            if (own)
                nlo = hi;
            else
                nhi = lo;
        } else if (own)
            nlo = lo + (uint32_t)j->piece;
        else
            nhi = (hi - (uint32_t)j->piece + (uint32_t)j->grain - 1) / (uint32_t)j->grain *
                  (uint32_t)j->grain;
        if (atomic_compare_exchange_weak(&b->v, &v, (uint64_t)nhi << 32 | nlo)) {
            *i0 = (int)(own ? lo : nhi);
            *i1 = (int)(own ? nlo : hi);
            return 1;
        }
    }
}

static void for_part(void *a, int tid, int nt)
{
    const for_job *j = a;
    int i0, i1;
    while (take(j, &j->b[tid], 1, &i0, &i1))
        j->fn(j->arg, tid, i0, i1);
    for (int k = 1; k < nt; k++)
        while (take(j, &j->b[(tid + k) % nt], 0, &i0, &i1))
            j->fn(j->arg, tid, i0, i1);
}

/* pieces a band is taken in: enough that a thread that runs late leaves
 * little behind, few enough that each is a long run of memory */
#define PIECES 8

void cal_pool_for(cal_pool *p, int n, int grain, cal_pool_range_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int nt = p->n;
    if (nt == 1) {
        fn(arg, 0, 0, n);
        return;
    }
    int64_t per = ((int64_t)n + (int64_t)nt * PIECES - 1) / ((int64_t)nt * PIECES);
    for_job j = {fn, arg, grain, (int)((per + grain - 1) / grain * grain), p->bands};
    for (int t = 0; t < nt; t++) {
        int64_t lo = (int64_t)n * t / nt / grain * grain;
        int64_t hi = t + 1 < nt ? (int64_t)n * (t + 1) / nt / grain * grain : n;
        atomic_store_explicit(&p->bands[t].v, (uint64_t)hi << 32 | (uint64_t)lo,
                              memory_order_relaxed);
    }
    publish(p, for_part, &j, 0);
    for_part(&j, 0, nt);
    /* every piece is taken: close the job and wait for those inside it */
    atomic_store(&p->open, 0u);
    drain(&p->active);
}
