/* caliper serve --pace-ms: the pacer (see sched.h). No model compute: chunk k
 * of each stream is due at arrival + pace·(k+1); one thread pops due chunks
 * from a min-heap and resumes their connections; the HTTP thread formats the
 * chunk as it writes, stamping send_ns and recording how late it went out,
 * so a slow pacer shows in /metrics and is not blamed on the client. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "server/sched.h"

/* Streams scheduled at once; beyond it submit reports CAL_EFULL (503). */
#define PACE_HEAP_MAX (1 << 20)
/* The text of one paced chunk (one "token"). */
static const char PACE_TEXT[] = " tok";

typedef struct pace_item { int64_t due_ns; cal_job *j; } pace_item;

struct cal_pacer {
    int64_t          pace_ns;
    cal_srv_metrics *m;
    pthread_t        th;
    int              started;
    pthread_mutex_t  mu;
    pthread_cond_t   cv;       /* CLOCK_MONOTONIC */
    pace_item       *heap;
    int              n, cap;
    int              stop;
};

static void heap_push(cal_pacer *p, pace_item it)
{
    int i = p->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (p->heap[up].due_ns <= it.due_ns) break;
        p->heap[i] = p->heap[up];
        i = up;
    }
    p->heap[i] = it;
}

static pace_item heap_pop(cal_pacer *p)
{
    pace_item top = p->heap[0], last = p->heap[--p->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= p->n) break;
        if (c + 1 < p->n && p->heap[c + 1].due_ns < p->heap[c].due_ns) c++;
        if (last.due_ns <= p->heap[c].due_ns) break;
        p->heap[i] = p->heap[c];
        i = c;
    }
    if (p->n > 0) p->heap[i] = last;
    return top;
}

static int heap_reserve(cal_pacer *p)
{
    if (p->n < p->cap) return CAL_OK;
    if (p->cap >= PACE_HEAP_MAX) return CAL_EFULL;
    int nc = p->cap ? p->cap * 2 : 1024;
    pace_item *h = realloc(p->heap, (size_t)nc * sizeof *h);
    if (!h) return CAL_ENOMEM;
    p->heap = h;
    p->cap = nc;
    return CAL_OK;
}

static void end_stream(cal_pacer *p, cal_job *j)
{
    atomic_fetch_sub_explicit(&p->m->running, 1, memory_order_relaxed);
    cal_job_unref(j);
}

static void *pacer_main(void *arg)
{
    cal_pacer *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->n == 0) { pthread_cond_wait(&p->cv, &p->mu); continue; }
        int64_t now = cal_now_ns();
        if (p->heap[0].due_ns > now) {
            struct timespec ts = {(time_t)(p->heap[0].due_ns / 1000000000),
                                  (long)(p->heap[0].due_ns % 1000000000)};
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue;
        }
        pace_item it = heap_pop(p);
        cal_job *j = it.j;
        pthread_mutex_lock(&j->mu);
        int last = 0;
        if (j->cancelled) {
            last = 1;
        } else if (j->req.stream) {
            j->pace_due++;
            last = j->pace_due >= j->max_tokens;
        } else {
            j->pace_due = j->max_tokens;
            last = 1;
        }
        if (!last) {
            /* heap_pop freed a place, so this push cannot need memory */
            heap_push(p, (pace_item){j->arrival_ns + p->pace_ns * (j->pace_due + 1), j});
        }
        if (j->parked && j->wake) j->wake(j);
        pthread_mutex_unlock(&j->mu);
        if (last) end_stream(p, j);
    }
    /* stopping: every stream ends now */
    while (p->n > 0) {
        pace_item it = heap_pop(p);
        pthread_mutex_lock(&it.j->mu);
        it.j->pace_due = it.j->pace_sent;
        it.j->finish = 3;
        if (!it.j->cancelled && !it.j->done) {
            if (it.j->req.stream) cal_fmt_stream_end(it.j);
            else cal_fmt_body(it.j);
        }
        it.j->done = 1;
        if (it.j->parked && it.j->wake) it.j->wake(it.j);
        pthread_mutex_unlock(&it.j->mu);
        end_stream(p, it.j);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int cal_pacer_open(int64_t pace_ns, cal_srv_metrics *m, cal_pacer **out)
{
    *out = NULL;
    if (pace_ns <= 0 || !m) return CAL_EINVAL;
    cal_pacer *p = calloc(1, sizeof *p);
    if (!p) return CAL_ENOMEM;
    p->pace_ns = pace_ns;
    p->m = m;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (heap_reserve(p) != CAL_OK || pthread_create(&p->th, NULL, pacer_main, p) != 0) {
        cal_pacer_close(&p);
        return CAL_ENOMEM;
    }
    p->started = 1;
    *out = p;
    return CAL_OK;
}

int cal_pacer_submit(cal_pacer *p, cal_job *j)
{
    pthread_mutex_lock(&p->mu);
    int rc = p->stop ? CAL_ECANCEL : heap_reserve(p);
    if (rc == CAL_OK) {
        cal_job_ref(j);
        j->prefill_start_ns = j->prefill_end_ns = j->arrival_ns;
        int64_t due = j->req.stream ? j->arrival_ns + p->pace_ns
                                    : j->arrival_ns + p->pace_ns * j->max_tokens;
        int wake = p->n == 0 || due < p->heap[0].due_ns;
        heap_push(p, (pace_item){due, j});
        atomic_fetch_add_explicit(&p->m->running, 1, memory_order_relaxed);
        if (wake) pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int cal_pacer_fill(cal_pacer *p, cal_job *j)
{
    int rc = CAL_OK;
    if (j->done) return CAL_OK;
    while (j->pace_sent < j->pace_due && rc == CAL_OK) {
        int64_t due = j->req.stream ? j->arrival_ns + p->pace_ns * (j->pace_sent + 1)
                                    : j->arrival_ns + p->pace_ns * j->max_tokens;
        int64_t now = cal_now_ns();   /* just before MHD writes these bytes */
        if (j->req.stream) {
            rc = cal_fmt_pace_chunk(j, PACE_TEXT, sizeof PACE_TEXT - 1, now);
            cal_srv_metrics_late(p->m, now - due);
            j->pace_sent++;
        } else {
            for (; j->pace_sent < j->pace_due && rc == CAL_OK; j->pace_sent++)
                rc = cal_buf_append(&j->text, PACE_TEXT, sizeof PACE_TEXT - 1);
            cal_srv_metrics_late(p->m, now - due);
        }
        j->n_gen = j->pace_sent;
        j->last_tok_ns = now;
    }
    if (rc == CAL_OK && j->pace_sent >= j->max_tokens) {
        j->finish = 1;
        rc = j->req.stream ? cal_fmt_stream_end(j) : cal_fmt_body(j);
        j->done = 1;
        atomic_fetch_add_explicit(&p->m->generation_tokens, j->n_gen, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->m->requests_ok, 1, memory_order_relaxed);
    }
    return rc;
}

int64_t cal_pacer_pace_ns(const cal_pacer *p) { return p->pace_ns; }

void cal_pacer_stop(cal_pacer *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->started) { pthread_join(p->th, NULL); p->started = 0; }
}

void cal_pacer_close(cal_pacer **pp)
{
    cal_pacer *p = pp ? *pp : NULL;
    if (!p) return;
    cal_pacer_stop(p);
    free(p->heap);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    *pp = NULL;
}
