/* The in-process target: an engine's generate callback driven by worker
 * threads, with caliper taking every timestamp (send, each token, end) in
 * its own calls. The results have the fields and statuses the probe gives
 * a served engine, so everything downstream is the same (run.h). */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/run.h"
#include "caliper/stats.h"
#include "inproc_json.h"
#include "lib/util/rng.h"

#define MAX_CHUNKS (4 << 20)      /* the probe's cap: more is a stream error */
#define OPEN_LOOP_WORKERS 64      /* rate cells without a cap */

typedef struct inproc {
    cal_inproc_engine e;
    char *name, *model;
    int opened;
    int64_t started_ns;
    int max_workers;              /* the plan's largest concurrency */
    int ignore_eos;               /* the plan's fixed output */
} inproc;

/* one send: the shared state of its workers */
typedef struct batch {
    inproc *ip;
    const cal_request *reqs;
    cal_req_result *res;
    size_t n;
    const cal_load *load;
    volatile int *stop;
    cal_probe_progress_fn progress;
    void *ud;
    pthread_mutex_t mu;
    pthread_cond_t go_cv;
    int go;                       /* under mu: every worker exists, t0 is set */
    size_t next, done;            /* under mu */
    int in_flight, max_in_flight; /* under mu */
    int64_t t0;
    int64_t *arrival;             /* open loop: [n] */
    double *lags;                 /* [n] send − sched, ms */
    atomic_llong chunks;
    int err;                      /* CAL_ENOMEM from a worker */
} batch;

struct cal_inproc_stream {
    batch *b;
    cal_req_result *r;
    int cap;
    int cancelled;
    int oom;
    char msg[256];
};

static int cut(const batch *b)
{
    return (b->stop && *b->stop) || (b->load->deadline_ns && cal_now_ns() >= b->load->deadline_ns);
}

void cal_inproc_prefilled(cal_inproc_stream *s, int n_tokens)
{
    if (s && s->r) s->r->prompt_tokens = n_tokens >= 0 ? n_tokens : -1;
}

int cal_inproc_token(cal_inproc_stream *s, int n_tokens)
{
    if (!s || !s->r) return CAL_EINVAL;
    int64_t now = cal_now_ns();          /* first: the token's time */
    if (s->cancelled || cut(s->b)) {
        s->cancelled = 1;
        return CAL_ECANCEL;
    }
    if (n_tokens < 1) return CAL_EINVAL;
    cal_req_result *r = s->r;
    if (r->n_chunks >= MAX_CHUNKS) {
        snprintf(s->msg, sizeof s->msg, "more than %d token reports in one request", MAX_CHUNKS);
        s->oom = 1;
        return CAL_ETOOBIG;
    }
    if (r->n_chunks == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        int64_t *p = realloc(r->chunk_ns, (size_t)nc * sizeof *p);
        if (!p) {
            s->oom = 1;
            snprintf(s->msg, sizeof s->msg, "out of memory recording token times");
            return CAL_ENOMEM;
        }
        r->chunk_ns = p;
        s->cap = nc;
    }
    r->chunk_ns[r->n_chunks++] = now;
    if (!r->first_token_ns) r->first_token_ns = now;
    r->last_token_ns = now;
    r->output_tokens = (r->output_tokens < 0 ? 0 : r->output_tokens) + n_tokens;
    atomic_fetch_add(&s->b->chunks, 1);
    return CAL_OK;
}

void cal_inproc_fail(cal_inproc_stream *s, const char *msg)
{
    if (s && msg) snprintf(s->msg, sizeof s->msg, "%s", msg);
}

typedef struct worker { batch *b; int idx; } worker;

static void *work(void *arg)
{
    worker *w = arg;
    batch *b = w->b;
    pthread_mutex_lock(&b->mu);           /* start together, at t0 */
    while (!b->go) pthread_cond_wait(&b->go_cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    int64_t freed = b->t0;                 /* closed loop: this slot freed at */
    for (;;) {
        pthread_mutex_lock(&b->mu);
        if (b->next >= b->n || cut(b)) {
            pthread_mutex_unlock(&b->mu);
            break;
        }
        size_t i = b->next++;
        pthread_mutex_unlock(&b->mu);
        const cal_request *rq = &b->reqs[i];
        cal_req_result *r = &b->res[i];
        /* open loop: the arrival; closed loop: when the slot freed, or the
         * request's own later sched_ns (a chat turn's think time), which it
         * waits for as the probe does */
        int64_t sched = b->arrival ? b->arrival[i] : rq->sched_ns > freed ? rq->sched_ns : freed;
        while (cal_now_ns() < sched && !cut(b)) {
            int64_t left = sched - cal_now_ns();
            cal_sleep_ns(left < 10000000 ? left : 10000000, b->stop);
        }
        if (cut(b)) {                         /* never sent */
            pthread_mutex_lock(&b->mu);
            b->done++;
            pthread_mutex_unlock(&b->mu);
            continue;
        }
        pthread_mutex_lock(&b->mu);
        if (++b->in_flight > b->max_in_flight) b->max_in_flight = b->in_flight;
        pthread_mutex_unlock(&b->mu);
        cal_inproc_stream s = {.b = b, .r = r};
        r->sched_ns = sched;
        r->send_ns = cal_now_ns();
        b->lags[i] = (double)(r->send_ns - sched) / 1e6;
        cal_inproc_request ir = {.prompt = rq->prompt, .max_tokens = rq->max_tokens,
                                 .ignore_eos = b->ip->ignore_eos, .worker = w->idx, .index = i};
        int rc = b->ip->e.generate(b->ip->e.ud, &ir, &s);
        r->end_ns = cal_now_ns();
        freed = r->end_ns;
        if (s.cancelled) {
            r->status = CAL_REQ_CANCELLED;
            r->error = strdup(b->stop && *b->stop ? "cancelled: the run was stopped"
                                                  : "cancelled: the load deadline passed");
        } else if (rc != CAL_OK || s.oom) {
            r->status = CAL_REQ_STREAM_ERROR;
            r->error = strdup(s.msg[0] ? s.msg : cal_strerror(rc));
        } else {
            r->status = CAL_REQ_OK;
            if (r->output_tokens < 0) r->output_tokens = 0;
        }
        if (b->load->on_end) b->load->on_end(b->load->on_end_ud, i, r);
        pthread_mutex_lock(&b->mu);
        b->in_flight--;
        size_t done = ++b->done;
        if (b->progress) b->progress(b->ud, done, b->n);
        pthread_mutex_unlock(&b->mu);
    }
    return NULL;
}

static int ip_send(void *self, const cal_request *reqs, size_t n, const cal_load *load,
                   cal_req_result *results, volatile int *stop, cal_probe_progress_fn progress,
                   void *ud, cal_probe_stats *stats)
{
    inproc *ip = self;
    cal_probe_stats st_local;
    cal_probe_stats *st = stats ? stats : &st_local;
    memset(st, 0, sizeof *st);
    if (!load || (n && (!reqs || !results))) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++) cal_req_result_init(&results[i]);
    int open_loop = load->rate > 0;
    if (!isfinite(load->rate) || load->rate < 0 || load->concurrency < 0 ||
        (!open_loop && load->concurrency == 0))
        return CAL_EINVAL;
    for (size_t i = 0; i < n; i++) {           /* fail before anything runs */
        json_t *js = reqs[i].prompt ? json_string(reqs[i].prompt) : NULL;
        if (!js) return CAL_EINVAL;
        json_decref(js);
    }
    if (!ip->opened) return CAL_EINVAL;
    if (n == 0) return CAL_OK;
    size_t nw = load->concurrency > 0 ? (size_t)load->concurrency : OPEN_LOOP_WORKERS;
    if (nw > n) nw = n;
    batch b;
    memset(&b, 0, sizeof b);
    b.ip = ip;
    b.reqs = reqs;
    b.res = results;
    b.n = n;
    b.load = load;
    b.stop = stop;
    b.progress = progress;
    b.ud = ud;
    atomic_init(&b.chunks, 0);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.go_cv, NULL);
    pthread_t *th = calloc(nw, sizeof *th);
    worker *ws = calloc(nw, sizeof *ws);
    b.lags = calloc(n, sizeof *b.lags);
    if (open_loop) b.arrival = malloc(n * sizeof *b.arrival);
    int rc = CAL_OK;
    if (!th || !ws || !b.lags || (open_loop && !b.arrival)) { rc = CAL_ENOMEM; goto out; }
    size_t started = 0;
    for (size_t k = 0; k < nw; k++) {
        ws[k].b = &b;
        ws[k].idx = (int)k;
        if (pthread_create(&th[k], NULL, work, &ws[k])) break;
        started++;
    }
    /* the clock starts when every worker exists: a thread's start-up is
     * not a request's lag */
    int64_t t_wall0 = cal_now_ns();
    pthread_mutex_lock(&b.mu);
    b.t0 = cal_now_ns();
    if (open_loop) {
        uint64_t seed = load->seed;
        int64_t a = b.t0;
        for (size_t i = 0; i < n; i++) {
            double u = (double)(cal_splitmix64(&seed) >> 11) * 0x1.0p-53;
            a += (int64_t)(-log1p(-u) / load->rate * 1e9);
            b.arrival[i] = reqs[i].sched_ns ? reqs[i].sched_ns : a;
        }
    }
    b.go = 1;
    pthread_cond_broadcast(&b.go_cv);
    pthread_mutex_unlock(&b.mu);
    if (started == 0) rc = CAL_ENOMEM;
    for (size_t k = 0; k < started; k++) pthread_join(th[k], NULL);
    /* whatever was never handed out ends cancelled, unsent */
    int was_stopped = stop && *stop;
    const char *why = was_stopped ? "cancelled: the run was stopped" : "cancelled: the load deadline passed";
    for (size_t i = 0; i < n; i++)
        if (results[i].status == CAL_REQ_CANCELLED && !results[i].error)
            results[i].error = strdup(started ? why : "cancelled: no worker thread");
    if (progress) progress(ud, n, n);
    st->wall_ns = cal_now_ns() - t_wall0;
    /* the engine's own work runs in these threads: no CPU time here is the
     * client's overhead, so none is reported as such */
    st->cpu_ns = 0;
    st->chunks = (int64_t)atomic_load(&b.chunks);
    st->max_in_flight = b.max_in_flight;
    st->first_fail = -1;
    for (size_t i = 0; i < n; i++) {
        st->n_status[results[i].status]++;
        if (st->first_fail < 0 && results[i].status != CAL_REQ_OK &&
            results[i].status != CAL_REQ_CANCELLED) {
            st->first_fail = (int)i;
            snprintf(st->first_fail_msg, sizeof st->first_fail_msg, "%s",
                     results[i].error ? results[i].error : "");
        }
    }
    size_t nl = 0;
    for (size_t i = 0; i < n; i++)
        if (results[i].send_ns > 0) b.lags[nl++] = b.lags[i];
    if (nl) {
        cal_stats_sort(b.lags, nl);
        st->send_lag_p50_ms = cal_stats_percentile_sorted(b.lags, nl, 50);
        st->send_lag_p99_ms = cal_stats_percentile_sorted(b.lags, nl, 99);
        st->send_lag_max_ms = b.lags[nl - 1];
    }
    if (rc == CAL_OK && was_stopped) rc = CAL_ECANCEL;
out:
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.go_cv);
    free(th);
    free(ws);
    free(b.lags);
    free(b.arrival);
    return rc;
}

static int ip_start(void *self, volatile int *stop, char *err, size_t errn)
{
    inproc *ip = self;
    (void)stop;
    if (ip->opened && ip->e.close) ip->e.close(ip->e.ud);
    ip->opened = 0;
    int64_t t = cal_now_ns();
    if (ip->e.open) {
        int rc = ip->e.open(ip->e.ud, ip->max_workers, err, errn);
        if (rc) {
            if (err && errn && !err[0]) snprintf(err, errn, "%s: open failed: %s", ip->name, cal_strerror(rc));
            return rc;
        }
    }
    ip->started_ns = t;
    ip->opened = 1;
    return CAL_OK;
}

static void ip_stop(void *self)
{
    inproc *ip = self;
    if (ip->opened && ip->e.close) ip->e.close(ip->e.ud);
    ip->opened = 0;
}

static int ip_count(void *self, const char *text, int *n)
{
    inproc *ip = self;
    return ip->e.count_tokens ? ip->e.count_tokens(ip->e.ud, text, n) : CAL_EABSENT;
}

static void ip_prepare(void *self, const cal_run_plan *p)
{
    inproc *ip = self;
    int m = 0;
    for (size_t i = 0; i < p->n_conc; i++) if (p->concurrency[i] > m) m = p->concurrency[i];
    if (p->rate > 0) m = p->cap_given && p->n_conc ? p->concurrency[0] : OPEN_LOOP_WORKERS;
    ip->max_workers = m > 0 ? m : 1;
    ip->ignore_eos = !p->free_output;
}

static int64_t ip_started(void *self) { return ((inproc *)self)->started_ns; }
static int ip_alive(void *self) { return ((inproc *)self)->opened; }

char *cal_inproc_target_json(const char *name, const char *model, const char *api,
                             const char *detail)
{
    json_t *t = json_object();
    json_object_set_new(t, "kind", json_string("inproc"));
    json_object_set_new(t, "name", json_string(name));
    json_object_set_new(t, "model", model ? json_string(model) : json_null());
    json_object_set_new(t, "version", model ? json_string(model) : json_null());
    json_object_set_new(t, "url", json_null());
    json_object_set_new(t, "command", json_null());
    json_object_set_new(t, "load_s", json_null());
    json_object_set_new(t, "api", json_string(api));
    json_object_set_new(t, "detail", json_string(detail));
    char *s = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return s;
}

static char *ip_describe(void *self)
{
    inproc *ip = self;
    return cal_inproc_target_json(ip->name, ip->model, "inproc",
                                  "in-process: a generate callback, timestamps "
                                  "taken by caliper as each token is reported");
}

static const char *ip_what(void *self) { return ((inproc *)self)->name; }

static void ip_destroy(void *self)
{
    inproc *ip = self;
    ip_stop(ip);
    free(ip->name);
    free(ip->model);
    free(ip);
}

static const cal_run_target_ops INPROC_OPS = {
    .kind = "inproc", .start = ip_start, .stop = ip_stop, .send = ip_send,
    .count_tokens = ip_count, .prepare = ip_prepare, .alive = ip_alive, .started_ns = ip_started,
    .describe = ip_describe, .what = ip_what, .destroy = ip_destroy,
};

int cal_run_target_inproc(const cal_inproc_engine *e, cal_run_target **out)
{
    if (!out) return CAL_EINVAL;
    *out = NULL;
    if (!e || !e->generate) return CAL_EINVAL;
    inproc *ip = calloc(1, sizeof *ip);
    cal_run_target *t = calloc(1, sizeof *t);
    if (!ip || !t) { free(ip); free(t); return CAL_ENOMEM; }
    ip->e = *e;
    ip->name = strdup(e->name ? e->name : "in-process engine");
    ip->model = e->model ? strdup(e->model) : NULL;
    ip->started_ns = -1;
    ip->max_workers = 1;
    ip->ignore_eos = 1;
    if (!ip->name || (e->model && !ip->model)) { ip_destroy(ip); free(t); return CAL_ENOMEM; }
    ip->e.name = ip->name;
    ip->e.model = ip->model;
    t->ops = &INPROC_OPS;
    t->self = ip;
    t->fresh_on_start = e->open != NULL;   /* open loads it: the first shot is cold */
    t->restartable = e->open != NULL;
    *out = t;
    return CAL_OK;
}
