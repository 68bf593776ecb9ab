/* The probe: libcurl's multi interface in event-driven form (socket_action
 * over one readiness set, O(active sockets) per wakeup with epoll or kqueue,
 * so 2048 streams cost what their traffic costs; curl_multi_poll would walk
 * every transfer on each wakeup). One event loop drives its share of the
 * requests from one thread; --loops N runs N of them, each with its own
 * curl multi handles and readiness set, and merges their results. Each
 * write callback stamps CLOCK_MONOTONIC before it parses anything, whichever
 * backend (loop.h) waited.
 *
 * This file is the API: open and close, a run split into loops (one on the
 * caller's thread, or a thread each) and merged. One request's slot is in
 * probe_slots.c, one loop in probe_loop.c; what they share in state.h. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/utf8.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/auth.h"
#include "caliper/stats.h"
#include "lib/util/c_locale.h"
#include "state.h"

const char *cal_req_status_name(cal_req_status s)
{
    static const char *names[CAL_REQ_N_STATUS] = {
        "ok", "http_error", "timeout", "connect_error", "stream_error", "cancelled"};
    return (unsigned)s < CAL_REQ_N_STATUS ? names[s] : "unknown";
}

void cal_req_result_free(cal_req_result *r)
{
    if (!r) return;
    free(r->error);
    free(r->chunk_ns);
    free(r->chunk_send_ns);
    free(r->text);
    r->error = r->text = NULL;
    r->chunk_ns = r->chunk_send_ns = NULL;
}

int cal_probe_failure_summary(const cal_probe_stats *st, char *buf, size_t size)
{
    if (buf && size) buf[0] = '\0';
    if (!st) return 0;
    int failed = 0;
    size_t o = 0;
    for (int k = 0; k < CAL_REQ_N_STATUS; k++) {
        if (k == CAL_REQ_OK || k == CAL_REQ_CANCELLED || st->n_status[k] <= 0) continue;
        failed += st->n_status[k];
        if (buf && o < size) {
            int w = snprintf(buf + o, size - o, "%s%d %s", o ? ", " : "", st->n_status[k],
                             cal_req_status_name((cal_req_status)k));
            o += w > 0 ? (size_t)w : 0;
        }
    }
    if (failed && st->first_fail >= 0 && buf && o < size)
        snprintf(buf + o, size - o, "; first (request %d): %s", st->first_fail,
                 st->first_fail_msg[0] ? st->first_fail_msg : "no message");
    return failed;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void probe_free(cal_probe *p)
{
    if (!p) return;
    free((char *)p->cfg.base_url);
    free((char *)p->cfg.model);
    free((char *)p->cfg.api_key);
    free((char *)p->cfg.extra_body);
    free(p->url);
    json_decref(p->tmpl);
    curl_slist_free_all(p->headers);
    free(p);
}

int cal_probe_open(const cal_probe_config *cfg, cal_probe **out)
{
    if (!cfg || !out || !cfg->base_url || !*cfg->base_url) return CAL_EINVAL;
    if (cfg->api != CAL_API_COMPLETIONS && cfg->api != CAL_API_CHAT) return CAL_EINVAL;
    if (cfg->connect_timeout_ns < 0 || cfg->idle_timeout_ns < 0 || cfg->request_timeout_ns < 0)
        return CAL_ERANGE;
    char auth[CAL_AUTH_HEADER_MAX];    /* the one bound on an API key (auth.h) */
    int irc = cfg->api_key && *cfg->api_key ? cal_auth_header(cfg->api_key, auth, sizeof auth) : CAL_OK;
    if (!irc) irc = cal_global_init();
    if (irc) return irc;
    cal_probe *p = calloc(1, sizeof *p);
    if (!p) return CAL_ENOMEM;
    p->cfg = *cfg;
    p->cfg.base_url = dup_or_null(cfg->base_url);
    p->cfg.model = dup_or_null(cfg->model);
    p->cfg.api_key = dup_or_null(cfg->api_key);
    p->cfg.extra_body = dup_or_null(cfg->extra_body);
    if (!p->cfg.connect_timeout_ns) p->cfg.connect_timeout_ns = DEFAULT_CONNECT_NS;
    if (!p->cfg.idle_timeout_ns) p->cfg.idle_timeout_ns = DEFAULT_IDLE_NS;
    p->loop_ops = cal_loop_pick(NULL);
    int rc = CAL_ENOMEM;
    if (!p->loop_ops) { rc = CAL_EINVAL; goto fail; }   /* CALIPER_LOOP names none built */
    if (p->cfg.loops == CAL_PROBE_LOOPS_AUTO) p->cfg.loops = cal_probe_default_loops(0);
    if (p->cfg.loops < 0) { rc = CAL_ERANGE; goto fail; }
    if (p->cfg.loops > CAL_PROBE_MAX_LOOPS) p->cfg.loops = CAL_PROBE_MAX_LOOPS;
    if (!p->cfg.base_url || (cfg->model && !p->cfg.model) || (cfg->api_key && !p->cfg.api_key)
        || (cfg->extra_body && !p->cfg.extra_body)) goto fail;

    /* URL: base without trailing '/', "/v1" added unless already there */
    size_t bl = strlen(cfg->base_url);
    while (bl && cfg->base_url[bl - 1] == '/') bl--;
    int has_v1 = bl >= 3 && memcmp(cfg->base_url + bl - 3, "/v1", 3) == 0;
    const char *path = cfg->api == CAL_API_CHAT ? "/chat/completions" : "/completions";
    cal_buf u = CAL_BUF_INIT(4096);
    int be = cal_buf_append(&u, cfg->base_url, bl);
    if (!be) be = cal_buf_puts(&u, has_v1 ? "" : "/v1");
    if (!be) be = cal_buf_puts(&u, path);
    if (be) { cal_buf_free(&u); rc = be == CAL_ENOMEM ? CAL_ENOMEM : CAL_EINVAL; goto fail; }
    p->url = u.data;

    /* body template */
    /* body template: every set is checked, so that no request goes out
     * without a field it was meant to carry (set_new takes the value's
     * reference even when it fails) */
    p->tmpl = json_object();
    if (!p->tmpl) goto fail;
    /* jansson refuses a string that is not UTF-8: that is the caller's
     * input, not a failed allocation */
    if (cfg->model && cal_utf8_check(cfg->model, strlen(cfg->model)) < strlen(cfg->model)) {
        rc = CAL_EINVAL;
        goto fail;
    }
    json_t *so = json_object();
    if ((cfg->model && json_object_set_new(p->tmpl, "model", json_string(cfg->model)))
        || json_object_set_new(p->tmpl, "stream", json_true())
        || json_object_set_new(so, "include_usage", json_true())
        || json_object_set_new(p->tmpl, "stream_options", json_incref(so))
        || (cfg->ignore_eos && json_object_set_new(p->tmpl, "ignore_eos", json_true()))) {
        json_decref(so);
        goto fail;
    }
    json_decref(so);
    if (cfg->extra_body && *cfg->extra_body) {
        json_error_t je;
        json_t *x = json_loads(cfg->extra_body, 0, &je);
        if (!x) x = json_loads(cfg->extra_body, 0, &je);   /* see cal_chunk_parse */
        if (!json_is_object(x)) { json_decref(x); rc = CAL_EINVAL; goto fail; }
        if (json_object_update(p->tmpl, x)) { json_decref(x); goto fail; }
        /* a null in extra_body removes that field (servers that reject
         * stream_options or ignore_eos) */
        const char *key;
        json_t *val;
        json_object_foreach(x, key, val)
            if (json_is_null(val)) json_object_del(p->tmpl, key);
        json_decref(x);
    }

    p->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (!p->headers) goto fail;
    struct curl_slist *h = curl_slist_append(p->headers, "Accept: text/event-stream");
    if (h) h = curl_slist_append(h, "Expect:");   /* no 100-continue round trip */
    if (!h) goto fail;
    if (cfg->api_key && *cfg->api_key) {
        h = curl_slist_append(p->headers, auth);
        if (!h) goto fail;
    }
    *out = p;
    return CAL_OK;
fail:
    probe_free(p);
    return rc;
}

const char *cal_probe_loop_backends(void) { return cal_loop_names(); }

int cal_probe_default_loops(int engine_pid)
{
    int n = cal_loop_cpus(engine_pid);
    return n < 1 ? 1 : n > CAL_PROBE_MAX_LOOPS ? CAL_PROBE_MAX_LOOPS : n;
}

void cal_probe_close(cal_probe **pp)
{
    if (!pp || !*pp) return;
    probe_free(*pp);
    *pp = NULL;
}

void cal_req_result_init(cal_req_result *res)
{
    memset(res, 0, sizeof *res);
    res->status = CAL_REQ_CANCELLED;
    res->prompt_tokens = res->output_tokens = -1;
    res->tok_source = CAL_TOKSRC_CHUNKS;
    res->server_prefill_ms = res->server_decode_ms = -1.0;
    res->server_decode_tokens = -1;
    res->cached_tokens = -1;
}

static void raise_nofile(size_t need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF), what jansson accepts in json_string. Checked here without an
 * allocation, so that running out of memory is never reported as a bad
 * prompt. */
static int utf8_valid(const char *str)
{
    const unsigned char *u = (const unsigned char *)str;
    while (*u) {
        unsigned c = *u;
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
              : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) return 0;
        uint32_t cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        for (int k = 1; k <= n; k++) {
            if ((u[k] & 0xC0) != 0x80) return 0;   /* also stops at the NUL */
            cp = cp << 6 | (u[k] & 0x3F);
        }
        static const uint32_t least[4] = { 0, 0x80, 0x800, 0x10000 };
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        u += n + 1;
    }
    return 1;
}

/* ---- loops: shares, threads, the merge ---------------------------------- */

/* The caller's thread coordinates: it shows progress, and reads the
 * caller's stop flag (which its progress callback or a signal handler may
 * set) into an atomic the loops read. A loop takes the lock once a request,
 * to wake it; never per chunk. */
typedef struct coord {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             running;     /* loops not yet returned */
    atomic_int      stop;        /* *stop, as last seen */
} coord;

static void job_progress(void *ud, size_t done, size_t total)
{
    job *j = ud;
    (void)total;
    atomic_store_explicit(&j->done, done, memory_order_relaxed);
    pthread_mutex_lock(&j->co->mu);
    pthread_cond_signal(&j->co->cv);
    pthread_mutex_unlock(&j->co->mu);
}

static void *job_thread(void *arg)
{
    job *j = arg;
    cal_probe_loop_run(j);
    pthread_mutex_lock(&j->co->mu);
    j->co->running--;
    pthread_cond_signal(&j->co->cv);
    pthread_mutex_unlock(&j->co->mu);
    return NULL;
}

/* A loop whose thread was on a CPU at least this share of its wall time
 * could not keep up with its streams. (A late send with an idle loop is the
 * machine's doing, not the loop's: the send-lag verdict speaks of that.) */
#define SATURATED_BUSY   0.9

/* What each loop did, and the run's figures over all of them. */
static void merge_stats(job *jobs, int nl, int64_t wall_ns, cal_probe_stats *st)
{
    size_t nlags = 0;
    for (int k = 0; k < nl; k++) nlags += jobs[k].nlags;
    double *all = nlags ? malloc(nlags * sizeof *all) : NULL;
    size_t at = 0;
    double worst = -1;
    st->n_loops = nl;
    st->saturated_loop = -1;
    for (int k = 0; k < nl; k++) {
        job *j = &jobs[k];
        st->cpu_ns += j->st.cpu_ns;
        st->chunks += j->st.chunks;
        st->bytes += j->st.bytes;
        st->implausible += j->st.implausible;
        st->max_in_flight += j->st.max_in_flight;
        st->wait_fallback |= j->st.wait_fallback;
        st->connected_ahead += j->st.connected_ahead;
        st->used_ahead += j->st.used_ahead;
        st->handle_resets += j->st.handle_resets;
        cal_probe_loop_stats *ls = &st->loop[k];
        ls->requests = (int64_t)j->n;
        ls->chunks = j->st.chunks;
        ls->cpu_ns = j->st.cpu_ns;
        ls->wall_ns = j->st.wall_ns;
        ls->send_lag_p99_ms = 0;
        if (j->nlags) {
            cal_stats_sort(j->lags, j->nlags);
            ls->send_lag_p99_ms = cal_stats_percentile_sorted(j->lags, j->nlags, 99);
            if (all) memcpy(all + at, j->lags, j->nlags * sizeof *all);
            at += j->nlags;
        }
        double busy = ls->wall_ns > 0 ? (double)ls->cpu_ns / (double)ls->wall_ns : 0;
        if (busy >= SATURATED_BUSY && busy > worst) {
            worst = busy;
            st->saturated_loop = k;
        }
    }
    st->wall_ns = wall_ns;
    if (all && at) {
        cal_stats_sort(all, at);
        st->send_lag_p50_ms = cal_stats_percentile_sorted(all, at, 50);
        st->send_lag_p99_ms = cal_stats_percentile_sorted(all, at, 99);
        st->send_lag_max_ms = all[at - 1];
    } else if (at) {                             /* no room for the merge: the worst loop's */
        for (int k = 0; k < nl; k++) {
            job *j = &jobs[k];
            if (!j->nlags) continue;
            double p50 = cal_stats_percentile_sorted(j->lags, j->nlags, 50);
            if (p50 > st->send_lag_p50_ms) st->send_lag_p50_ms = p50;
            if (st->loop[k].send_lag_p99_ms > st->send_lag_p99_ms)
                st->send_lag_p99_ms = st->loop[k].send_lag_p99_ms;
            if (j->lags[j->nlags - 1] > st->send_lag_max_ms) st->send_lag_max_ms = j->lags[j->nlags - 1];
        }
    }
    free(all);
}

/* Which loop a request goes to. Closed loop: the requests cycle over the
 * concurrency's slots, slot s belonging to loop s % nl, so each loop's share
 * of the requests matches its share of the slots. Open loop: in turn. */
static int loop_of(size_t i, size_t cap, int nl, int open_loop)
{
    size_t s = open_loop || cap == 0 ? i : i % cap;
    return (int)(s % (size_t)nl);
}

/* What the results say, after the run: the first wave's send lag (one
 * request per slot, all due at the start; a late one is the client's
 * opening, not the server: wave 0 in an open loop without a cap), how many
 * ended how, and the first failure's words for the caller to say. */
static void results_stats(const cal_req_result *results, size_t n, size_t wave,
                          cal_probe_stats *st)
{
    st->first_wave = (int)(wave < INT_MAX ? wave : INT_MAX);
    st->first_lag_p50_ms = st->first_lag_p99_ms = NAN;
    double *fl = st->first_wave ? malloc((size_t)st->first_wave * sizeof *fl) : NULL;
    size_t nfl = 0;
    for (size_t i = 0; fl && i < (size_t)st->first_wave; i++)
        if (results[i].send_ns && results[i].sched_ns)
            fl[nfl++] = (double)(results[i].send_ns - results[i].sched_ns) / 1e6;
    if (nfl) {
        cal_stats_sort(fl, nfl);
        st->first_lag_p50_ms = cal_stats_percentile_sorted(fl, nfl, 50);
        st->first_lag_p99_ms = cal_stats_percentile_sorted(fl, nfl, 99);
    }
    free(fl);
    /* what ended how, and the first failure's words, for the caller to say */
    st->first_fail = -1;
    for (size_t i = 0; i < n; i++) {
        cal_req_status rs = results[i].status;
        st->n_status[(unsigned)rs < CAL_REQ_N_STATUS ? rs : CAL_REQ_CANCELLED]++;
        if (st->first_fail < 0 && rs != CAL_REQ_OK && rs != CAL_REQ_CANCELLED) {
            st->first_fail = i > INT_MAX ? INT_MAX : (int)i;
            snprintf(st->first_fail_msg, sizeof st->first_fail_msg, "%s",
                     results[i].error ? results[i].error : "");
            for (char *c = st->first_fail_msg; *c; c++)   /* one line: bodies hold newlines */
                if ((unsigned char)*c < 32 || *c == 127) *c = ' ';
        }
    }
}

/* The caller's thread while the loops run: progress as requests end (the
 * caller's callback, on the caller's thread), the caller's stop flag passed
 * on, until every started loop returned. Returns the count last shown. */
static size_t wait_loops(coord *co, job *jobs, int nl, const int *started, volatile int *stop,
                         cal_probe_progress_fn progress, void *ud, size_t n)
{
    size_t shown = (size_t)-1;
    pthread_mutex_lock(&co->mu);
    for (;;) {
        size_t done = 0;
        for (int k = 0; k < nl; k++)
            done += started && started[k] ? atomic_load_explicit(&jobs[k].done, memory_order_relaxed)
                                          : jobs[k].n;
        if (progress && done != shown) {    /* the caller's callback, on the caller's thread */
            shown = done;
            pthread_mutex_unlock(&co->mu);
            progress(ud, done, n);
            pthread_mutex_lock(&co->mu);
        }
        if (stop && *stop) atomic_store_explicit(&co->stop, 1, memory_order_relaxed);
        if (co->running == 0) break;
        struct timespec ts;                 /* *stop is read at least every 50 ms */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&co->cv, &co->mu, &ts);
    }
    pthread_mutex_unlock(&co->mu);
    return shown;
}

int cal_probe_run(cal_probe *p, const cal_request *reqs, size_t n,
                  const cal_load *load, cal_req_result *results,
                  volatile int *stop, cal_probe_progress_fn progress, void *ud,
                  cal_probe_stats *stats)
{
    if (!p || !load || (n && (!reqs || !results))) return CAL_EINVAL;
    cal_probe_stats st_local;
    cal_probe_stats *st = stats ? stats : &st_local;
    memset(st, 0, sizeof *st);
    st->first_fail = -1;
    st->saturated_loop = -1;
    st->first_lag_p50_ms = st->first_lag_p99_ms = NAN;
    snprintf(st->loop_backend, sizeof st->loop_backend, "%s", p->loop_ops->name);
    for (size_t i = 0; i < n; i++) cal_req_result_init(&results[i]);
    int open_loop = load->rate > 0;
    if (!isfinite(load->rate) || load->rate < 0 || load->concurrency < 0
        || (!open_loop && load->concurrency == 0)) return CAL_EINVAL;
    for (size_t i = 0; i < n; i++)             /* fail before anything is sent */
        if (!reqs[i].prompt || !utf8_valid(reqs[i].prompt)) return CAL_EINVAL;
    if (n == 0) return CAL_OK;

    size_t cap = load->concurrency > 0 ? (size_t)load->concurrency : n;
    if (cap > n) cap = n;
    if (p->cfg.raise_nofile) raise_nofile(cap + 256);
    /* connections opened ahead: a closed loop's slots; an open loop's cap
     * only when its times count from the start (absolute ones would find the
     * opening eating into them) */
    int ahead = !p->cfg.no_connect_ahead && (!open_loop || (load->concurrency > 0 && load->from_start));
    int64_t prep0 = cal_now_ns(), t0;
    /* loops: as asked, never more than the requests in flight at once */
    int nl = p->cfg.loops > 1 ? p->cfg.loops : 1;
    if ((size_t)nl > cap) nl = (int)cap;

    int rc = CAL_OK;
    job *jobs = calloc((size_t)nl, sizeof *jobs);
    if (!jobs) return CAL_ENOMEM;
    if (nl == 1) {                              /* on the caller's thread, no copies */
        jobs[0] = (job){ .p = p, .reqs = reqs, .results = results, .n = n, .load = *load,
                         .stop = stop, .progress = progress, .ud = ud, .ahead = ahead ? cap : 0 };
        cal_probe_loop_prepare(&jobs[0]);
        t0 = cal_now_ns();                      /* the run's clock starts */
        jobs[0].t0 = t0;
        if (load->from_start) {
            jobs[0].sched_base = t0;
            if (load->deadline_ns) jobs[0].load.deadline_ns = sat_add(load->deadline_ns, t0);
        }
        cal_probe_loop_run(&jobs[0]);
        rc = jobs[0].rc;
    } else {
        /* each loop's requests and results, and where they came from */
        size_t *cnt = calloc((size_t)nl, sizeof *cnt);
        size_t *idx = malloc(n * sizeof *idx);      /* loop k's j-th request: idx[off_k + j] */
        size_t *off = calloc((size_t)nl + 1, sizeof *off);
        cal_request *rq = malloc(n * sizeof *rq);
        cal_req_result *rs = malloc(n * sizeof *rs);
        if (!cnt || !idx || !off || !rq || !rs) {
            free(cnt); free(idx); free(off); free(rq); free(rs); free(jobs);
            return CAL_ENOMEM;
        }
        for (size_t i = 0; i < n; i++) cnt[loop_of(i, cap, nl, open_loop)]++;
        for (int k = 0; k < nl; k++) off[k + 1] = off[k] + cnt[k];
        memset(cnt, 0, (size_t)nl * sizeof *cnt);
        for (size_t i = 0; i < n; i++) {
            int k = loop_of(i, cap, nl, open_loop);
            size_t at = off[k] + cnt[k]++;
            idx[at] = i;
            rq[at] = reqs[i];
            cal_req_result_init(&rs[at]);
        }
        coord co = { .running = 0 };
        atomic_init(&co.stop, stop && *stop);
        pthread_mutex_init(&co.mu, NULL);
        pthread_cond_init(&co.cv, NULL);
        pthread_t *th = calloc((size_t)nl, sizeof *th);
        int *started = calloc((size_t)nl, sizeof *started);
        for (int k = 0; k < nl; k++) {
            size_t share = cap / (size_t)nl + ((size_t)k < cap % (size_t)nl);
            cal_load lk = *load;
            lk.concurrency = load->concurrency > 0 || !open_loop ? (int)share : 0;
            lk.from_start = 0;                  /* made absolute below */
            jobs[k] = (job){ .p = p, .reqs = rq + off[k], .results = rs + off[k],
                             .n = off[k + 1] - off[k], .load = lk, .idx = idx + off[k], .astop = &co.stop,
                             .progress = job_progress, .co = &co, .ahead = ahead ? share : 0 };
            jobs[k].ud = &jobs[k];
            atomic_init(&jobs[k].done, 0);
            if (jobs[k].n) cal_probe_loop_prepare(&jobs[k]);
        }
        t0 = cal_now_ns();                      /* the run's clock starts */
        memset(cnt, 0, (size_t)nl * sizeof *cnt);
        uint64_t seed = load->seed;
        int64_t arrival = t0;
        for (size_t i = 0; i < n; i++) {
            int k = loop_of(i, cap, nl, open_loop);
            size_t at = off[k] + cnt[k]++;
            if (load->from_start && rq[at].sched_ns) rq[at].sched_ns = sat_add(rq[at].sched_ns, t0);
            if (open_loop) {       /* one Poisson stream over the run, as one loop draws it */
                double u = (double)(cal_splitmix64(&seed) >> 11) * 0x1.0p-53;
                arrival += cal_span_ns(-log1p(-u) / load->rate);
                if (!rq[at].sched_ns) rq[at].sched_ns = arrival;
            }
        }
        for (int k = 0; k < nl; k++) {
            jobs[k].t0 = t0;
            if (load->from_start && load->deadline_ns)
                jobs[k].load.deadline_ns = sat_add(load->deadline_ns, t0);
        }
        pthread_mutex_lock(&co.mu);
        for (int k = 0; th && started && k < nl; k++) {
            if (jobs[k].n == 0) continue;
            if (pthread_create(&th[k], NULL, job_thread, &jobs[k]) == 0) {
                started[k] = 1;
                co.running++;
            }
        }
        pthread_mutex_unlock(&co.mu);
        /* a loop no thread could be had for runs here, beside the others,
         * reading the caller's flag itself */
        for (int k = 0; k < nl; k++)
            if (jobs[k].n && !(started && started[k])) {
                jobs[k].stop = stop;
                cal_probe_loop_run(&jobs[k]);
            }
        size_t shown = wait_loops(&co, jobs, nl, started, stop, progress, ud, n);
        for (int k = 0; k < nl; k++) if (started && started[k]) pthread_join(th[k], NULL);
        pthread_mutex_destroy(&co.mu);
        pthread_cond_destroy(&co.cv);
        for (int k = 0; k < nl; k++)            /* the worst: a failure, then a cancel */
            if (jobs[k].rc && (rc == CAL_OK || rc == CAL_ECANCEL)) rc = jobs[k].rc;
        /* results back in request order: ownership moves with the struct */
        for (size_t a = 0; a < n; a++) results[idx[a]] = rs[a];
        if (progress && shown != n) progress(ud, n, n);
        free(th); free(started); free(cnt); free(idx); free(off); free(rq); free(rs);
    }
    merge_stats(jobs, nl, cal_now_ns() - t0, st);
    st->start_ns = t0;
    st->prepare_ns = t0 - prep0;
    for (int k = 0; k < nl; k++) free(jobs[k].lags);
    free(jobs);
    results_stats(results, n, open_loop && load->concurrency <= 0 ? 0 : cap, st);
    return rc;
}

int cal_probe_loops_summary(const cal_probe_stats *st, char *buf, size_t size)
{
    if (buf && size) buf[0] = '\0';
    if (!st || !buf || !size) return st ? st->saturated_loop : -1;
    size_t o = 0;
    int w = snprintf(buf, size, "%d loop%s (%s)", st->n_loops, st->n_loops == 1 ? "" : "s",
                     st->loop_backend[0] ? st->loop_backend : "?");
    o = w > 0 ? (size_t)w : 0;
    for (int k = 0; k < st->n_loops && k < CAL_PROBE_MAX_LOOPS && o < size; k++) {
        const cal_probe_loop_stats *l = &st->loop[k];
        double busy = l->wall_ns > 0 ? 100.0 * (double)l->cpu_ns / (double)l->wall_ns : 0;
        w = cal_snprintf(buf + o, size - o, "%s loop %d: %lld requests, CPU %.0f %%, send lag p99 %.2f ms",
                     k ? ";" : ":", k, (long long)l->requests, busy, l->send_lag_p99_ms);
        o += w > 0 ? (size_t)w : 0;
    }
    if (st->saturated_loop >= 0 && o < size)
        snprintf(buf + o, size - o, "; loop %d saturated", st->saturated_loop);
    return st->saturated_loop;
}
