/* caliper reference engine — a fixed pool of worker threads that run one
 * function on every thread at once (fork-join), so each step's matrix
 * products and attention use every core. Internal to engine/. */
#ifndef CALIPER_ENGINE_POOL_H
#define CALIPER_ENGINE_POOL_H

typedef struct cal_pool cal_pool;
/* fn runs once on each of n_threads threads with tid 0 .. n_threads−1. */
typedef void (*cal_pool_fn)(void *arg, int tid, int n_threads);

/* n_threads ≥ 1 (the caller counts as thread 0; n_threads − 1 workers are
 * started). CAL_EINVAL, CAL_ENOMEM. */
int  cal_pool_open(int n_threads, cal_pool **out);
/* Stops and joins the workers; NULLs *p. */
void cal_pool_close(cal_pool **p);
int  cal_pool_threads(const cal_pool *p);
/* Runs fn on all threads and returns when every call has returned. Workers
 * spin briefly between calls (a step issues many in a row) and then sleep. */
void cal_pool_run(cal_pool *p, cal_pool_fn fn, void *arg);

/* fn runs on pieces [i0, i1) of 0 .. n−1 that together cover it once, from
 * the threads that are running. Each thread takes its own band in order, a
 * piece at a time, then takes pieces from the far end of the others' bands
 * that are not yet taken: so a thread on a slower core (an SMT sibling that
 * is busy, an efficiency core, a core the host gives less time) gives work
 * away instead of holding the others up, and each thread's own pieces still
 * read memory as one ascending stream. The caller waits only for the
 * workers that joined before every piece was taken: one the scheduler has
 * not run (a core given to another process) is not waited for, and its band
 * is done by the others. Every i0 is a multiple of grain (≥ 1). */
typedef void (*cal_pool_range_fn)(void *arg, int tid, int i0, int i1);
void cal_pool_for(cal_pool *p, int n, int grain, cal_pool_range_fn fn, void *arg);

#endif
