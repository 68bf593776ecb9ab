/* Unit tests of the engine's thread pool: every thread runs a job once, and
 * cal_pool_for covers its range exactly once in pieces that start on the
 * grain, whatever the thread count, moves work off a thread that is held up
 * (the others take its band's far end) instead of waiting for it, and mixes
 * with cal_pool_run jobs without a worker running a job twice or late. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "engine/pool.h"

static void count_tids(void *arg, int tid, int nt)
{
    atomic_int *seen = arg;
    if (tid >= 0 && tid < nt)
        atomic_fetch_add(&seen[tid], 1);
}

static void test_run_every_thread_once(void **state)
{
    (void)state;
    for (int nt = 1; nt <= 4; nt++) {
        cal_pool *p = NULL;
        assert_int_equal(cal_pool_open(nt, &p), CAL_OK);
        assert_int_equal(cal_pool_threads(p), nt);
        atomic_int seen[4] = {0};
        for (int k = 0; k < 50; k++)
            cal_pool_run(p, count_tids, seen);
        for (int t = 0; t < nt; t++)
            assert_int_equal(atomic_load(&seen[t]), 50);
        cal_pool_close(&p);
        assert_null(p);
    }
    cal_pool *p = NULL;
    assert_int_equal(cal_pool_open(0, &p), CAL_EINVAL);
}

typedef struct cover {
    int n, grain, bad;
    atomic_int *hits;           /* [n] */
    atomic_int pieces;
} cover;

static void mark(void *arg, int tid, int i0, int i1)
{
    cover *c = arg;
    (void)tid;
    if (i0 < 0 || i1 > c->n || i0 >= i1 || i0 % c->grain != 0)
        c->bad = 1;
    for (int i = i0; i < i1 && i >= 0 && i < c->n; i++)
        atomic_fetch_add(&c->hits[i], 1);
    atomic_fetch_add(&c->pieces, 1);
}

static void test_for_covers_once(void **state)
{
    (void)state;
    static const int ns[] = {1, 2, 3, 15, 16, 17, 100, 768, 1000, 4096, 32000};
    static const int grains[] = {1, 4, 16, 5000};
    for (int nt = 1; nt <= 4; nt++) {
        cal_pool *p = NULL;
        assert_int_equal(cal_pool_open(nt, &p), CAL_OK);
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
                int n = ns[a];
                cover c = {n, grains[g], 0, calloc((size_t)n, sizeof(atomic_int)), 0};
                assert_non_null(c.hits);
                for (int rep = 0; rep < 3; rep++)
                    cal_pool_for(p, n, grains[g], mark, &c);
                assert_int_equal(c.bad, 0);
                for (int i = 0; i < n; i++)
                    assert_int_equal(atomic_load(&c.hits[i]), 3);
                free(c.hits);
            }
        /* an empty range calls nothing */
        cover c = {0, 1, 0, NULL, 0};
        cal_pool_for(p, 0, 16, mark, &c);
        assert_int_equal(atomic_load(&c.pieces), 0);
        cal_pool_close(&p);
    }
}

/* Thread 0 stops on its first piece until the others have done everything
 * else, its own band's remainder included: that happens only if they take
 * pieces of its band. The wait gives up (and fails the test) only after the
 * others have made no progress for a very long run of spins. */
typedef struct held {
    cover c;
    atomic_int done;            /* items finished by threads other than 0 */
    atomic_int first;           /* thread 0 has taken a piece */
    int ok, stolen;
} held;

static void hold_first(void *arg, int tid, int i0, int i1)
{
    held *h = arg;
    mark(&h->c, tid, i0, i1);
    if (tid != 0) {
        if (i0 < h->c.n / 2) /* a piece of thread 0's band (of 2) */
            h->stolen = 1;
        atomic_fetch_add(&h->done, i1 - i0);
        return;
    }
    if (atomic_exchange(&h->first, 1))
        return;
    int want = h->c.n - (i1 - i0), last = -1;
    for (long idle = 0; idle < (1L << 31); idle++) {
        int d = atomic_load(&h->done);
        if (d == want) {
            h->ok = 1;
            return;
        }
        if (d != last) {
            last = d;
            idle = 0;
        }
    }
}

static void test_for_moves_work_off_a_held_thread(void **state)
{
    (void)state;
    cal_pool *p = NULL;
    assert_int_equal(cal_pool_open(2, &p), CAL_OK);
    enum { N = 4096 };
    held h = {{N, 16, 0, calloc(N, sizeof(atomic_int)), 0}, 0, 0, 0, 0};
    assert_non_null(h.c.hits);
    cal_pool_for(p, N, 16, hold_first, &h);
    assert_int_equal(h.ok, 1);
    assert_int_equal(h.stolen, 1);
    assert_int_equal(h.c.bad, 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(atomic_load(&h.c.hits[i]), 1);
    free(h.c.hits);
    cal_pool_close(&p);
}

/* cal_pool_for jobs (which a worker joins only while they are open) and
 * cal_pool_run jobs (which every thread runs) back to back, many times, with
 * threads yielding inside pieces so that workers come late and miss jobs:
 * every run job still runs once on every thread, and every for job covers
 * its range once. A worker that joined a for job after it closed, or ran a
 * run job twice or not at all, breaks the counts (and tsan sees the job's
 * memory reused under it). */
typedef struct mixed {
    atomic_int runs[4];
    cover c;
} mixed;

static void mixed_run(void *arg, int tid, int nt)
{
    mixed *m = arg;
    if (tid >= 0 && tid < nt && tid < 4)
        atomic_fetch_add(&m->runs[tid], 1);
}

static void mixed_for(void *arg, int tid, int i0, int i1)
{
    mixed *m = arg;
    if ((i0 + tid) % 3 == 0)
        sched_yield();
    mark(&m->c, tid, i0, i1);
}

static void test_for_and_run_jobs_interleaved(void **state)
{
    (void)state;
    enum { ROUNDS = 3000, NMAX = 97 };
    for (int nt = 2; nt <= 3; nt++) {
        cal_pool *p = NULL;
        assert_int_equal(cal_pool_open(nt, &p), CAL_OK);
        mixed m;
        memset(&m, 0, sizeof m);
        m.c.hits = calloc(NMAX, sizeof(atomic_int));
        assert_non_null(m.c.hits);
        uint64_t rng = 12345;
        int runs = 0;
        for (int k = 0; k < ROUNDS; k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int n = 1 + (int)((rng >> 33) % NMAX), grain = 1 + (int)((rng >> 50) % 8);
            m.c.n = n;
            m.c.grain = grain;
            for (int i = 0; i < n; i++)
                atomic_store(&m.c.hits[i], 0);
            cal_pool_for(p, n, grain, mixed_for, &m);
            assert_int_equal(m.c.bad, 0);
            for (int i = 0; i < n; i++)
                assert_int_equal(atomic_load(&m.c.hits[i]), 1);
            if (rng >> 63) {
                cal_pool_run(p, mixed_run, &m);
                runs++;
            }
        }
        for (int t = 0; t < nt; t++)
            assert_int_equal(atomic_load(&m.runs[t]), runs);
        free(m.c.hits);
        cal_pool_close(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_every_thread_once),
        cmocka_unit_test(test_for_covers_once),
        cmocka_unit_test(test_for_moves_work_off_a_held_thread),
        cmocka_unit_test(test_for_and_run_jobs_interleaved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
