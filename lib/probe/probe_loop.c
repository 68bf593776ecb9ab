/* One event loop of the probe: curl's socket and timer callbacks on the
 * readiness set (loop.h), the sends on schedule (closed loop: a freed slot;
 * open loop: the arrival times), the requests drained as they end, and the
 * deferred interpretation of events when many sockets are ready at once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "state.h"

/* ---- the event loop ------------------------------------------------------ */

static int on_socket(CURL *e, curl_socket_t fd, int what, void *ud, void *sockp)
{
    shard *sh = ud;
    (void)e;
    (void)sockp;
    unsigned w = what == CURL_POLL_REMOVE ? 0
               : (what & CURL_POLL_IN ? CAL_LOOP_IN : 0) | (what & CURL_POLL_OUT ? CAL_LOOP_OUT : 0);
    /* a failed change leaves the transfer to its timeouts: curl cannot be
     * told here, and the request still ends with a status */
    cal_loop_set(sh->r->loop, (int)fd, w, (uint32_t)sh->idx);
    return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *ud)
{
    shard *sh = ud;
    run *r = sh->r;
    (void)m;
    int64_t at = timeout_ms < 0 ? -1 : cal_now_ns() + (int64_t)timeout_ms * 1000000;
    sh->timer_at = at;
    /* an earlier timer keeps the minimum known; any other change may have
     * moved it, so the next look walks the shards */
    if (at >= 0 && !r->timer_stale && (r->timer_min < 0 || at <= r->timer_min)) r->timer_min = at;
    else r->timer_stale = 1;
    return 0;
}

/* The earliest curl timer over r's shards, absolute ns; -1 none. */
static int64_t timer_min(run *r)
{
    if (r->timer_stale) {
        r->timer_min = -1;
        for (int k = 0; k < r->nshards; k++) {
            int64_t at = r->shards[k].timer_at;
            if (at >= 0 && (r->timer_min < 0 || at < r->timer_min)) r->timer_min = at;
        }
        r->timer_stale = 0;
    }
    return r->timer_min;
}

/* Let curl act on sh (a ready socket, or its timer) and note that sh may
 * now hold finished transfers. */
static void shard_action(run *r, shard *sh, curl_socket_t fd, int flags)
{
    int running;
    curl_multi_socket_action(sh->multi, fd, flags, &running);
    if (!sh->touched) {
        sh->touched = 1;
        r->touched[r->ntouched++] = sh->idx;
    }
}

static void drain_done(run *r, int64_t *ring, size_t *ring_tail, size_t ring_cap,
                       cal_probe_progress_fn progress, void *ud, size_t n)
{
    /* only the shards curl ran can hold finished transfers */
    for (int t = 0; t < r->ntouched; t++) {
        int k = r->touched[t];
        r->shards[k].touched = 0;
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(r->shards[k].multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            slot *s = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            CURLcode rc = m->data.result;
            curl_multi_remove_handle(s->sh->multi, s->easy);   /* m is invalid now */
            if (cal_probe_flush_slot(s) != CAL_OK && rc == CURLE_OK) rc = CURLE_WRITE_ERROR;
            cal_probe_classify(s, rc);
            int64_t end = s->res->end_ns;
            cal_probe_finish_slot(r, s);
            if (ring) ring[(*ring_tail)++ % ring_cap] = end;
            if (progress) progress(ud, r->done, n);
        }
    }
    r->ntouched = 0;
}

/* The loop found nothing to read: interpret waiting events, the oldest
 * requests' first, about `budget` events' worth, then let the loop look for
 * bytes again (so a socket that turns ready meanwhile waits for a few
 * events' work, not for all of them). A request that one of them ends (an
 * error event, a malformed one) ends now, as it would have on arrival with
 * inline interpretation, with its end_ns the stamp of that event's bytes. */
static void flush_idle(run *r, int budget, int64_t *ring, size_t *ring_tail, size_t ring_cap,
                       cal_probe_progress_fn progress, void *ud, size_t n)
{
    size_t nd = 0;
    while (nd < r->ndirty && budget > 0) budget -= r->dirty[nd++]->npev;
    for (size_t i = 0; i < nd; i++) {
        slot *s = r->dirty[i];
        s->queued = 0;
        if (!s->res || !s->npev) continue;
        if (cal_probe_flush_slot(s) == CAL_OK || s->fail < 0) continue;
        curl_multi_remove_handle(s->sh->multi, s->easy);
        cal_probe_classify(s, CURLE_WRITE_ERROR);
        int64_t end = s->res->end_ns;
        cal_probe_finish_slot(r, s);
        if (ring) ring[(*ring_tail)++ % ring_cap] = end;
        if (progress) progress(ud, r->done, n);
    }
    memmove(r->dirty, r->dirty + nd, (r->ndirty - nd) * sizeof *r->dirty);
    r->ndirty -= nd;
}

/* Everything a loop needs before its first send: curl's multi handles, the
 * first wave's slots (curl easy handles set up) and bodies, and the
 * connections opened ahead. On the caller's thread, before the run's clock
 * starts. Failure: j->rc. */
void cal_probe_loop_prepare(job *j)
{
    cal_probe *p = j->p;
    size_t n = j->n;
    const cal_load *load = &j->load;
    int open_loop = load->rate > 0;
    size_t cap = load->concurrency > 0 ? (size_t)load->concurrency : n;
    if (cap > n) cap = n;
    run *r = &j->r;
    memset(r, 0, sizeof *r);
    j->prepared = 1;
    r->p = p;
    r->load = load;
    r->res0 = j->results;
    r->idx = j->idx;
    r->cap = cap;
    r->st = &j->st;
    r->ahead_given = -1;
    int rc = cal_loop_open(p->loop_ops, &r->loop);
    r->tmpl = json_deep_copy(p->tmpl);          /* jansson values are not shared across threads */
    r->nshards = (int)((cap + SHARD_TRANSFERS - 1) / SHARD_TRANSFERS);
    if (r->nshards > 64) r->nshards = 64;
    r->shards = calloc((size_t)r->nshards, sizeof *r->shards);
    r->touched = calloc((size_t)r->nshards, sizeof *r->touched);
    r->timer_min = -1;
    j->lags = malloc(n * sizeof *j->lags);
    j->ring = open_loop ? NULL : malloc(cap * sizeof *j->ring);
    if (rc == CAL_OK && (!r->tmpl || !r->shards || !r->touched || !j->lags || (!open_loop && !j->ring)))
        rc = CAL_ENOMEM;
    long per_shard = rc ? 0 : (long)((cap + (size_t)r->nshards - 1) / (size_t)r->nshards);
    for (int k = 0; rc == CAL_OK && k < r->nshards; k++) {
        shard *sh = &r->shards[k];
        sh->r = r;
        sh->idx = k;
        sh->timer_at = -1;
        sh->multi = curl_multi_init();
        if (!sh->multi) { rc = CAL_ENOMEM; break; }
        curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
        curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
        curl_multi_setopt(sh->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, per_shard);
        curl_multi_setopt(sh->multi, CURLMOPT_MAXCONNECTS, per_shard);
    }
    /* the first wave's slots and bodies: built in the timed loop, they
     * delay its sends (a unique prompt's body is a jansson dump each) */
    size_t wave = cap < PREP_MAX ? cap : PREP_MAX;
    if (rc == CAL_OK && wave) {
        r->body0 = calloc(wave, sizeof *r->body0);
        if (!r->body0) rc = CAL_ENOMEM;
        else r->nbody0 = wave;
    }
    for (size_t i = 0; rc == CAL_OK && i < wave; i++)
        if (!(r->body0[i] = cal_probe_body_for(r, &j->reqs[i]))) rc = CAL_ENOMEM;
    for (size_t i = 0; rc == CAL_OK && i < wave; i++)
        if (!cal_probe_slot_get(r)) rc = CAL_ENOMEM;
    for (size_t i = r->nslots; i > 0; i--) cal_probe_slot_put(r, r->slots[i - 1]);   /* slot 0 on top */
    if (rc == CAL_OK) cal_probe_connect_ahead(r, j->ahead < wave ? j->ahead : wave);
    j->rc = rc;
}

/* End every request with no bytes for idle_ns, or past its deadline, and
 * set when to look next (the earliest a request still running could
 * expire; 1 ms at the finest). */
static void end_timed_out(run *r, int64_t now, int64_t idle_ns, int64_t *ring, size_t *ring_tail,
                          size_t cap, cal_probe_progress_fn progress, void *ud, size_t n)
{
    r->next_scan = sat_add(now, idle_ns);
    for (size_t i = 0; i < r->nslots; i++) {
        slot *s = r->slots[i];
        if (!s->res) continue;
        int64_t idle_at = sat_add(s->last_byte_ns, idle_ns);
        int64_t at = idle_at < s->deadline_ns ? idle_at : s->deadline_ns;
        if (now < at) {
            if (at < r->next_scan) r->next_scan = at;
            continue;
        }
        char m[128];
        if (idle_at <= s->deadline_ns)
            snprintf(m, sizeof m, "no bytes for %.0f ms (idle timeout)",
                     (double)(now - s->last_byte_ns) / 1e6);
        else
            snprintf(m, sizeof m, "not done %.0f ms after it was sent (request timeout "
                     "%.0f ms)", (double)(now - s->res->send_ns) / 1e6,
                     (double)(s->deadline_ns - s->res->send_ns) / 1e6);
        int64_t end = now;
        cal_probe_end_now(r, s, CAL_REQ_TIMEOUT, m);
        if (ring) ring[(*ring_tail)++ % cap] = end;
        if (progress) progress(ud, r->done, n);
    }
    if (r->next_scan < now + 1000000) r->next_scan = now + 1000000;
}

/* Everything a loop made, given back: slots, curl's handles, the readiness
 * set, the bodies, the connections opened ahead and never used. */
static void run_free(run *r)
{
    for (size_t i = 0; i < r->nslots; i++) {
        curl_multi_remove_handle(r->slots[i]->sh->multi, r->slots[i]->easy);
        cal_probe_slot_free(r->slots[i]);
    }
    free(r->slots);
    free(r->freel);
    free(r->dirty);
    for (int k = 0; r->shards && k < r->nshards; k++)
        if (r->shards[k].multi) curl_multi_cleanup(r->shards[k].multi);
    free(r->shards);
    free(r->touched);
    cal_loop_close(&r->loop);
    json_decref(r->tmpl);
    free(r->body_last);
    free(r->body_prompt);
    for (size_t i = 0; i < r->nbody0; i++) free(r->body0[i]);
    free(r->body0);
    while (r->nahead) close(r->ahead[--r->nahead]);
    free(r->ahead);
}

/* Drive j's requests to their ends on the calling thread (preparing them
 * first unless loop_prepare already did). */
int cal_probe_loop_run(job *j)
{
    if (!j->prepared) cal_probe_loop_prepare(j);
    cal_probe *p = j->p;
    const cal_request *reqs = j->reqs;
    cal_req_result *results = j->results;
    size_t n = j->n;
    const cal_load *load = &j->load;
    volatile int *stop = j->stop;
    cal_probe_progress_fn progress = j->progress;
    void *ud = j->ud;
    cal_probe_stats *st = &j->st;
    int open_loop = load->rate > 0;
    size_t cap = load->concurrency > 0 ? (size_t)load->concurrency : n;
    if (cap > n) cap = n;
    int64_t t_wall0 = cal_now_ns(), t_cpu0 = cal_thread_cpu_ns();
    size_t nlags = 0, next = 0, ring_head = 0, ring_tail = 0;   /* next: the first unsent */
    run *r = &j->r;
    double *lags = j->lags;
    int64_t *ring = j->ring;
    int rc = j->rc;
    if (rc) goto out;

    int64_t t0 = j->t0;                         /* the run's start, one for all loops */
    if (ring) for (size_t i = 0; i < cap; i++) ring[ring_tail++ % cap] = t0;
    uint64_t seed = load->seed;
    int64_t arrival = t0;                       /* open loop: next arrival */
    int64_t next_sched = 0;                     /* sched of reqs[next] */
    int have_sched = 0;
    const int64_t idle_ns = p->cfg.idle_timeout_ns;
    /* The timeout check runs when the earliest in-flight request could
     * expire: its last byte + idle_ns, or its deadline (last bytes only move
     * forward; start_request pulls next_scan in to a new request's deadline),
     * so a slow stream costs no extra wakeups; 1 ms at the finest. */
    r->next_scan = sat_add(t0, idle_ns);
    cal_loop_event evs[256];
    int stopped = 0;

    while (r->done < n) {
        int64_t now = cal_now_ns();
        int halt = (stop && *stop) || (j->astop && atomic_load_explicit(j->astop, memory_order_relaxed));
        if (halt || (load->deadline_ns && now >= load->deadline_ns)) {
            stopped = halt ? 1 : 2;
            break;
        }
        /* release every request that is due and has a slot */
        while (next < n) {
            if (!have_sched) {
                if (open_loop) {
                    double u = (double)(cal_splitmix64(&seed) >> 11) * 0x1.0p-53;
                    arrival += cal_span_ns(-log1p(-u) / load->rate);
                    next_sched = reqs[next].sched_ns ? reqs[next].sched_ns + j->sched_base : arrival;
                } else if (r->in_flight < cap) {
                    /* closed loop: due when a slot was freed (its last byte) */
                    int64_t freed = ring[ring_head++ % cap];
                    int64_t want = reqs[next].sched_ns ? reqs[next].sched_ns + j->sched_base : 0;
                    next_sched = want > freed ? want : freed;
                } else {
                    break;
                }
                have_sched = 1;
            }
            if (next_sched > now || r->in_flight >= cap) break;
            have_sched = 0;
            rc = cal_probe_start_request(r, next, &reqs[next], &results[next], next_sched, lags, &nlags);
            if (rc == 1) {                      /* failed to start: its slot frees now */
                rc = CAL_OK;
                if (ring) ring[ring_tail++ % cap] = results[next].end_ns;
                if (progress) progress(ud, r->done, n);
            }
            if (rc) goto out;
            next++;
        }
        if (r->done >= n) break;

        int64_t wait = MAX_WAIT_NS;
        int64_t tmin = timer_min(r);
        if (tmin >= 0 && tmin - now < wait) wait = tmin - now;
        if (next < n && r->in_flight < cap && have_sched && next_sched - now < wait)
            wait = next_sched - now;
        if (r->next_scan - now < wait) wait = r->next_scan - now;
        if (load->deadline_ns && load->deadline_ns - now < wait) wait = load->deadline_ns - now;
        if (wait < 0) wait = 0;
        const int maxev = (int)(sizeof evs / sizeof evs[0]);
        int nev = -1;
        if (r->ndirty) {                         /* events wait: anything to read first? */
            nev = cal_loop_wait(r->loop, evs, maxev, 0);
            if (nev == 0) {                     /* idle: interpret some, look again */
                flush_idle(r, FLUSH_BUDGET, ring, &ring_tail, cap, progress, ud, n);
                continue;
            }
        }
        if (nev < 0) nev = cal_loop_wait(r->loop, evs, maxev, wait);
        r->defer = nev >= DEFER_MIN_READY;
        for (int i = 0; i < nev; i++) {
            int flags = 0;
            if (evs[i].what & CAL_LOOP_IN) flags |= CURL_CSELECT_IN;
            if (evs[i].what & CAL_LOOP_OUT) flags |= CURL_CSELECT_OUT;
            if (evs[i].what & CAL_LOOP_ERR) flags |= CURL_CSELECT_ERR;
            if (evs[i].tag >= (uint32_t)r->nshards) continue;
            shard_action(r, &r->shards[evs[i].tag], (curl_socket_t)evs[i].fd, flags);
        }
        r->defer = 0;
        now = cal_now_ns();
        int64_t due = timer_min(r);
        for (int k = 0; due >= 0 && now >= due && k < r->nshards; k++) {
            shard *sh = &r->shards[k];
            if (sh->timer_at >= 0 && now >= sh->timer_at) {
                sh->timer_at = -1;             /* curl may set a new one inside */
                r->timer_stale = 1;
                shard_action(r, sh, CURL_SOCKET_TIMEOUT, 0);
            }
        }
        drain_done(r, ring, &ring_tail, cap, progress, ud, n);
        now = cal_now_ns();
        if (now >= r->next_scan) end_timed_out(r, now, idle_ns, ring, &ring_tail, cap, progress, ud, n);
    }
    if (stopped) {                              /* cancel in flight, then unsent */
        const char *why = stopped == 1 ? "cancelled: the run was stopped"
                                       : "cancelled: the load deadline passed";
        r->ending = 1;
        for (size_t i = 0; i < r->nslots; i++) {
            slot *s = r->slots[i];
            if (s->res) cal_probe_end_now(r, s, CAL_REQ_CANCELLED, why);
        }
        for (; next < n; next++) {
            results[next].status = CAL_REQ_CANCELLED;
            results[next].error = cal_probe_dup_msg(why, strlen(why));
            r->done++;
        }
        if (progress) progress(ud, r->done, n);
        if (stopped == 1) rc = CAL_ECANCEL;
    }
out:
    st->wall_ns = cal_now_ns() - t_wall0;
    st->cpu_ns = cal_thread_cpu_ns() - t_cpu0;
    j->nlags = nlags;
    if (rc && rc != CAL_ECANCEL) {               /* internal failure: end all */
        static const char why[] = "cancelled: probe failure";
        r->ending = 1;
        for (size_t i = 0; i < r->nslots; i++)
            if (r->slots[i]->res) cal_probe_end_now(r, r->slots[i], CAL_REQ_CANCELLED, why);
        for (; next < n; next++)
            if (!results[next].error) results[next].error = cal_probe_dup_msg(why, sizeof why - 1);
    }
    st->wait_fallback = r->loop && r->loop->fallback;
    run_free(r);
    free(ring);
    j->rc = rc;
    return rc;
}

