/* caliper telemetry — the sampler: probes the backend table once, then one
 * thread reads every available backend each interval on an absolute
 * schedule into a preallocated ring; queries copy out under one lock. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "tel_internal.h"
#include "lib/platform/platform.h"

/* The order --list prints them in. */
static const tel_backend_ops *const all_ops[] = {
#ifdef CAL_PLATFORM_LINUX   /* cpu_linux.c: cpufreq, /proc/cpuinfo, therm_throt */
    &tel_cpufreq_ops, &tel_cpuinfo_ops,
#endif
    &tel_rapl_ops, &tel_hwmon_ops, &tel_thermal_ops,
#ifdef CAL_PLATFORM_LINUX
    &tel_throttle_ops,
#endif
    &tel_nvml_ops, &tel_amdgpu_ops,
    &tel_apple_ops, &tel_process_ops,
};
#define NB (sizeof all_ops / sizeof all_ops[0])
#define SCRATCH_CAP 4096           /* samples per tick */
#define JIT_CAP     8192           /* wake-up lateness kept for percentiles */

typedef struct backend {
    const tel_backend_ops *ops;
    void                 *state;
} backend;

struct cal_tel {
    tel_ctx          ctx;
    backend          be[NB];
    cal_tel_backend_info info[NB];  /* parallel to be[] */
    size_t           nb;
    pthread_mutex_t  mu;            /* guards everything below */
    pthread_cond_t   cv;            /* stop signal for the thread's wait */
    cal_tel_sample  *ring;
    size_t           cap;
    uint64_t         seq;           /* next sequence number */
    cal_tel_sample  *scratch;       /* thread-owned tick buffer */
    cal_tel_sample  *latest;        /* copy of the last tick */
    size_t           nlatest;
    int64_t         *jit;           /* lateness ring, ns */
    uint64_t         njit;
    cal_tel_self     self;
    pthread_t        th;
    int              running, stop;
};

/* Platform edge: wait on the condition until CLOCK_MONOTONIC reaches
 * deadline_ns. macOS has no pthread_condattr_setclock; it waits relative. */
#ifdef __APPLE__
static void cond_use_monotonic(pthread_condattr_t *ca) { (void)ca; }
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
    int64_t d = deadline_ns - cal_now_ns();
    if (d <= 0) return;
    struct timespec ts = { (time_t)(d / 1000000000LL), (long)(d % 1000000000LL) };
    pthread_cond_timedwait_relative_np(cv, mu, &ts);
}
#else
static void cond_use_monotonic(pthread_condattr_t *ca) { pthread_condattr_setclock(ca, CLOCK_MONOTONIC); }
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
    struct timespec ts = { (time_t)(deadline_ns / 1000000000LL), (long)(deadline_ns % 1000000000LL) };
    pthread_cond_timedwait(cv, mu, &ts);
}
#endif

int cal_tel_open(cal_tel **out, const cal_tel_config *cfg)
{
    if (!out) return CAL_EINVAL;
    *out = NULL;
    cal_tel_config def = {0};
    if (!cfg) cfg = &def;
    if (cfg->only) {   /* every named backend must exist */
        char tmp[256];
        if (strlen(cfg->only) >= sizeof tmp) return CAL_EINVAL;
        strcpy(tmp, cfg->only);
        char *sv = NULL;
        for (char *tok = strtok_r(tmp, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
            size_t i = 0;
            while (i < NB && strcmp(all_ops[i]->name, tok) != 0) i++;
            if (i == NB) return CAL_EINVAL;
        }
    }
    cal_tel *t = calloc(1, sizeof *t);
    if (!t) return CAL_ENOMEM;
    if (cfg->root) snprintf(t->ctx.root, sizeof t->ctx.root, "%s", cfg->root);
    size_t rl = strlen(t->ctx.root);
    while (rl > 0 && t->ctx.root[rl - 1] == '/') t->ctx.root[--rl] = 0;
    atomic_init(&t->ctx.pid, cfg->pid > 0 ? cfg->pid : 0);
    t->ctx.interval_ns = cfg->interval_ns > 0 ? cfg->interval_ns : CAL_TEL_INTERVAL_DEFAULT_NS;
    if (t->ctx.interval_ns < CAL_TEL_INTERVAL_MIN_NS) t->ctx.interval_ns = CAL_TEL_INTERVAL_MIN_NS;
    t->cap = cfg->ring_cap ? cfg->ring_cap : 65536;
    t->ring = calloc(t->cap, sizeof *t->ring);
    t->scratch = calloc(SCRATCH_CAP, sizeof *t->scratch);
    t->latest = calloc(SCRATCH_CAP, sizeof *t->latest);
    t->jit = calloc(JIT_CAP, sizeof *t->jit);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    cond_use_monotonic(&ca);
    int ok = t->ring && t->scratch && t->latest && t->jit &&
             pthread_mutex_init(&t->mu, NULL) == 0;
    if (ok && pthread_cond_init(&t->cv, &ca) != 0) { pthread_mutex_destroy(&t->mu); ok = 0; }
    pthread_condattr_destroy(&ca);
    if (!ok) {
        free(t->ring); free(t->scratch); free(t->latest); free(t->jit); free(t);
        return CAL_ENOMEM;
    }
    for (size_t i = 0; i < NB; i++) {
        backend *b = &t->be[t->nb];
        cal_tel_backend_info *bi = &t->info[t->nb++];
        b->ops = all_ops[i];
        bi->name = all_ops[i]->name;
        bi->what = all_ops[i]->what;
        if (cfg->only) {
            char pat[64];
            snprintf(pat, sizeof pat, ",%s,", all_ops[i]->name);
            char list[300];
            snprintf(list, sizeof list, ",%s,", cfg->only);
            if (!strstr(list, pat)) {
                bi->err = CAL_EABSENT;
                snprintf(bi->reason, sizeof bi->reason, "not selected");
                continue;
            }
        }
        int rc = b->ops->probe(&t->ctx, &b->state, bi->reason, sizeof bi->reason);
        bi->err = rc;
        bi->available = rc == CAL_OK;
        if (rc != CAL_OK) b->state = NULL;
        /* The process backend stays open without a target so that
         * cal_tel_set_pid() can point it at an engine launched later. */
        if (rc == CAL_OK && b->ops == &tel_process_ops && atomic_load(&t->ctx.pid) == 0) {
            bi->available = 0;
            bi->err = CAL_EABSENT;
        }
    }
    *out = t;
    return CAL_OK;
}

void cal_tel_close(cal_tel **tp)
{
    if (!tp || !*tp) return;
    cal_tel *t = *tp;
    cal_tel_stop(t);
    for (size_t i = 0; i < t->nb; i++)
        if (t->be[i].state && t->be[i].ops->close) t->be[i].ops->close(t->be[i].state);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t->ring); free(t->scratch); free(t->latest); free(t->jit);
    free(t);
    *tp = NULL;
}

size_t cal_tel_backends(const cal_tel *t, const cal_tel_backend_info **out)
{
    if (!t) { if (out) *out = NULL; return 0; }
    if (out) *out = t->info;
    return t->nb;
}

size_t cal_tel_backends_copy(cal_tel *t, cal_tel_backend_info *out, size_t cap)
{
    if (!t) return 0;
    pthread_mutex_lock(&t->mu);
    size_t k = t->nb < cap ? t->nb : cap;
    memcpy(out, t->info, k * sizeof *out);
    pthread_mutex_unlock(&t->mu);
    return t->nb;
}

char *cal_tel_sources(const cal_tel *t, char *buf, size_t n)
{
    if (!n) return buf;
    buf[0] = 0;
    size_t w = 0;
    for (size_t i = 0; t && i < t->nb; i++) {
        if (!t->info[i].available) continue;
        int r = snprintf(buf + w, n - w, "%s%s", w ? "," : "", t->info[i].name);
        if (r < 0 || (size_t)r >= n - w) break;
        w += (size_t)r;
    }
    return buf;
}

int64_t cal_tel_interval_ns(const cal_tel *t) { return t ? t->ctx.interval_ns : 0; }

int cal_tel_set_pid(cal_tel *t, int pid)
{
    if (!t || pid < 0) return CAL_EINVAL;
    if (pid > 0) {
        if (!cal_plat_pid_exists(t->ctx.root[0] ? t->ctx.root : NULL, pid))
            return CAL_ENOTFOUND;
    }
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->ctx.pid, pid);
    for (size_t i = 0; i < t->nb; i++) {
        backend *b = &t->be[i];
        cal_tel_backend_info *bi = &t->info[i];
        if (b->ops != &tel_process_ops || !b->state) continue;
        bi->available = pid > 0;
        bi->err = pid > 0 ? CAL_OK : CAL_EABSENT;
        if (pid > 0)
            snprintf(bi->reason, sizeof bi->reason, "pid %d", pid);
        else
            snprintf(bi->reason, sizeof bi->reason,
                     "no target process (give a process id or a command)");
    }
    pthread_mutex_unlock(&t->mu);
    return CAL_OK;
}

/* One pass over the backends into scratch, then publish under the lock. */
static int do_tick(cal_tel *t)
{
    tel_out e = { .buf = t->scratch, .cap = SCRATCH_CAP };
    for (size_t i = 0; i < t->nb; i++) {
        backend *b = &t->be[i];
        if (!b->state) continue;
        e.backend = b->ops->name;
        e.t_ns = cal_now_ns();
        b->ops->read(b->state, &t->ctx, &e);
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < e.n; i++) {
        if (t->seq >= t->cap) t->self.overwritten++;
        t->ring[t->seq % t->cap] = e.buf[i];
        t->seq++;
    }
    memcpy(t->latest, e.buf, e.n * sizeof *e.buf);
    t->nlatest = e.n;
    t->self.ticks++;
    t->self.samples += e.n;
    t->self.dropped += e.dropped;
    pthread_mutex_unlock(&t->mu);
    return (int)e.n;
}

static void *thread_main(void *arg)
{
    cal_tel *t = arg;
    int64_t next = cal_now_ns();
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop) {
            int64_t now = cal_now_ns();
            if (now >= next) break;
            cond_wait_until(&t->cv, &t->mu, next);
        }
        if (t->stop) break;
        int64_t late = cal_now_ns() - next;
        t->jit[t->njit % JIT_CAP] = late;
        t->njit++;
        pthread_mutex_unlock(&t->mu);
        do_tick(t);
        int64_t cpu = cal_thread_cpu_ns();
        pthread_mutex_lock(&t->mu);
        t->self.thread_cpu_ns = cpu;
        next += t->ctx.interval_ns;
        int64_t now = cal_now_ns();
        if (next <= now)   /* a tick took longer than the interval: skip, don't burst */
            next += ((now - next) / t->ctx.interval_ns + 1) * t->ctx.interval_ns;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int cal_tel_start(cal_tel *t)
{
    if (!t) return CAL_EINVAL;
    pthread_mutex_lock(&t->mu);
    if (t->running) { pthread_mutex_unlock(&t->mu); return CAL_EINVAL; }
    t->stop = 0;
    t->running = 1;
    pthread_mutex_unlock(&t->mu);
    if (pthread_create(&t->th, NULL, thread_main, t) != 0) {
        pthread_mutex_lock(&t->mu);
        t->running = 0;
        pthread_mutex_unlock(&t->mu);
        return CAL_EIO;
    }
    return CAL_OK;
}

int cal_tel_stop(cal_tel *t)
{
    if (!t) return CAL_EINVAL;
    pthread_mutex_lock(&t->mu);
    if (!t->running) { pthread_mutex_unlock(&t->mu); return CAL_OK; }
    t->stop = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
    pthread_mutex_lock(&t->mu);
    t->running = 0;
    pthread_mutex_unlock(&t->mu);
    return CAL_OK;
}

int cal_tel_tick(cal_tel *t)
{
    if (!t) return CAL_EINVAL;
    pthread_mutex_lock(&t->mu);
    int running = t->running;
    pthread_mutex_unlock(&t->mu);
    if (running) return CAL_EINVAL;
    return do_tick(t);
}

uint64_t cal_tel_seq(cal_tel *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t s = t->seq;
    pthread_mutex_unlock(&t->mu);
    return s;
}

size_t cal_tel_read(cal_tel *t, uint64_t *from, cal_tel_sample *out, size_t cap, uint64_t *lost)
{
    pthread_mutex_lock(&t->mu);
    uint64_t oldest = t->seq > t->cap ? t->seq - t->cap : 0;
    if (*from < oldest) {
        if (lost) *lost += oldest - *from;
        *from = oldest;
    }
    size_t k = 0;
    while (k < cap && *from < t->seq) {
        out[k++] = t->ring[*from % t->cap];
        (*from)++;
    }
    pthread_mutex_unlock(&t->mu);
    return k;
}

/* Iterate the ring oldest first; caller holds the lock. */
#define RING_FOR(t, s)                                                        \
    for (uint64_t _q = (t)->seq > (t)->cap ? (t)->seq - (t)->cap : 0;         \
         _q < (t)->seq; _q++)                                                 \
        for (const cal_tel_sample *s = &(t)->ring[_q % (t)->cap]; s; s = NULL)

size_t cal_tel_foreach(cal_tel *t, int64_t t0, int64_t t1,
                       int (*fn)(const cal_tel_sample *, void *), void *ud)
{
    size_t k = 0;
    pthread_mutex_lock(&t->mu);
    uint64_t q = t->seq > t->cap ? t->seq - t->cap : 0;
    for (; q < t->seq; q++) {
        const cal_tel_sample *s = &t->ring[q % t->cap];
        if (s->t_ns < t0 || s->t_ns > t1) continue;
        k++;
        if (fn(s, ud)) break;
    }
    pthread_mutex_unlock(&t->mu);
    return k;
}

size_t cal_tel_latest(cal_tel *t, cal_tel_sample *out, size_t cap)
{
    pthread_mutex_lock(&t->mu);
    size_t k = t->nlatest < cap ? t->nlatest : cap;
    memcpy(out, t->latest, k * sizeof *out);
    pthread_mutex_unlock(&t->mu);
    return k;
}

/* Window statistics, caller holds the lock. */
static int window_locked(cal_tel *t, const char *metric, int64_t t0, int64_t t1,
                         cal_tel_stat *o)
{
    memset(o, 0, sizeof *o);
    o->mean = o->min = o->max = o->first = o->last = NAN;
    double sum = 0;
    const cal_tel_sample *before = NULL, *after = NULL;
    RING_FOR(t, s) {
        if (strcmp(s->metric, metric) != 0) continue;
        if (s->t_ns < t0) { before = s; continue; }
        if (s->t_ns > t1) { if (!after) after = s; continue; }
        if (o->n == 0) { o->min = o->max = o->first = s->value; o->unit = s->unit; }
        if (s->value < o->min) o->min = s->value;
        if (s->value > o->max) o->max = s->value;
        o->last = s->value;
        sum += s->value;
        o->n++;
    }
    if (o->n) { o->mean = sum / (double)o->n; return CAL_OK; }
    /* A shot shorter than the interval: the nearest reading within one interval. */
    const cal_tel_sample *pick = NULL;
    int64_t db = before ? t0 - before->t_ns : INT64_MAX;
    int64_t da = after ? after->t_ns - t1 : INT64_MAX;
    if (db <= da && db <= t->ctx.interval_ns) pick = before;
    else if (da < db && da <= t->ctx.interval_ns) pick = after;
    if (!pick) return CAL_ENOTFOUND;
    o->n = 1;
    o->nearest = 1;
    o->mean = o->min = o->max = o->first = o->last = pick->value;
    o->unit = pick->unit;
    return CAL_OK;
}

int cal_tel_window(cal_tel *t, const char *metric, int64_t t0, int64_t t1, cal_tel_stat *out)
{
    if (!t || !metric || !out) return CAL_EINVAL;
    pthread_mutex_lock(&t->mu);
    int rc = window_locked(t, metric, t0, t1, out);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

static int has_metric_locked(cal_tel *t, const char *m)
{
    RING_FOR(t, s) if (strcmp(s->metric, m) == 0) return 1;
    return 0;
}

static int pick(cal_tel *t, const char *const *pref, char *name, size_t n)
{
    if (!t || !name || !n) return CAL_EINVAL;
    pthread_mutex_lock(&t->mu);
    int rc = CAL_ENOTFOUND;
    for (size_t i = 0; pref[i]; i++)
        if (has_metric_locked(t, pref[i])) {
            snprintf(name, n, "%s", pref[i]);
            rc = CAL_OK;
            break;
        }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int cal_tel_pick_clock(cal_tel *t, char *name, size_t n)
{
    static const char *const pref[] = { "gpu0_sm_mhz", "amdgpu0_sclk_mhz", "gpu_mhz",
                                        "cpu_mhz_mean", NULL };
    return pick(t, pref, name, n);
}

int cal_tel_pick_power(cal_tel *t, char *name, size_t n)
{
    static const char *const pref[] = { "gpu0_w", "amdgpu0_w", "gpu_w", "package_w",
                                        "machine_w", "psys_w", NULL };
    return pick(t, pref, name, n);
}

/* A cumulative counter interpolated at time x from the samples around it;
 * requires readings within one interval of x on the side(s) used. */
static int counter_at_locked(cal_tel *t, const char *m, int64_t x, double *v)
{
    const cal_tel_sample *b = NULL, *a = NULL;
    RING_FOR(t, s) {
        if (strcmp(s->metric, m) != 0) continue;
        if (s->t_ns <= x) b = s;
        else if (!a) a = s;
    }
    int64_t iv = t->ctx.interval_ns;
    if (b && a && a->t_ns > b->t_ns) {
        double f = (double)(x - b->t_ns) / (double)(a->t_ns - b->t_ns);
        *v = b->value + f * (a->value - b->value);
        return 0;
    }
    if (b && x - b->t_ns <= iv) { *v = b->value; return 0; }
    if (a && a->t_ns - x <= iv) { *v = a->value; return 0; }
    return -1;
}

static int add_counter_locked(cal_tel *t, const char *m, int64_t t0, int64_t t1, double *j)
{
    double v0, v1;
    if (counter_at_locked(t, m, t0, &v0) || counter_at_locked(t, m, t1, &v1)) return -1;
    *j += v1 - v0;
    return 0;
}

static int add_power_locked(cal_tel *t, const char *m, int64_t t0, int64_t t1, double *j)
{
    cal_tel_stat st;
    if (window_locked(t, m, t0, t1, &st) != CAL_OK) return -1;
    *j += st.mean * (double)(t1 - t0) / 1e9;
    return 0;
}

static void add_source(char *src, size_t n, const char *m)
{
    size_t l = strlen(src);
    if (l < n) snprintf(src + l, n - l, "%s%s", l ? "+" : "", m);
}

int cal_tel_window_energy(cal_tel *t, int64_t t0, int64_t t1, double *joules,
                          char *source, size_t n)
{
    if (!t || !joules || t1 < t0) return CAL_EINVAL;
    char srcbuf[256] = "";
    double j = 0;
    int found = 0;
    pthread_mutex_lock(&t->mu);
    static const char *const whole[] = { "machine_energy_j", "psys_energy_j", NULL };
    for (size_t i = 0; whole[i] && !found; i++)
        if (add_counter_locked(t, whole[i], t0, t1, &j) == 0) {
            found = 1;
            add_source(srcbuf, sizeof srcbuf, whole[i]);
        }
    if (!found && add_power_locked(t, "machine_w", t0, t1, &j) == 0) {
        found = 1;
        add_source(srcbuf, sizeof srcbuf, "machine_w");
    }
    if (!found) {
        if (add_counter_locked(t, "package_energy_j", t0, t1, &j) == 0) {
            found = 1;
            add_source(srcbuf, sizeof srcbuf, "package_energy_j");
        } else if (add_power_locked(t, "cpu_w", t0, t1, &j) == 0) {   /* apple */
            found = 1;
            add_source(srcbuf, sizeof srcbuf, "cpu_w");
        }
        char m[CAL_TEL_METRIC_MAX];
        for (int g = 0; g < 16; g++) {
            snprintf(m, sizeof m, "gpu%d_energy_j", g);
            if (add_counter_locked(t, m, t0, t1, &j) == 0) { found = 1; add_source(srcbuf, sizeof srcbuf, m); continue; }
            snprintf(m, sizeof m, "gpu%d_w", g);
            if (add_power_locked(t, m, t0, t1, &j) == 0) { found = 1; add_source(srcbuf, sizeof srcbuf, m); }
            snprintf(m, sizeof m, "amdgpu%d_w", g);
            if (add_power_locked(t, m, t0, t1, &j) == 0) { found = 1; add_source(srcbuf, sizeof srcbuf, m); }
        }
        if (add_power_locked(t, "gpu_w", t0, t1, &j) == 0) { found = 1; add_source(srcbuf, sizeof srcbuf, "gpu_w"); }
    }
    pthread_mutex_unlock(&t->mu);
    if (source && n) snprintf(source, n, "%s", srcbuf);
    if (!found) { *joules = NAN; return CAL_ENOTFOUND; }
    *joules = j;
    return CAL_OK;
}

int cal_tel_window_os_throttle(cal_tel *t, int64_t t0, int64_t t1, char *words, size_t n)
{
    if (words && n) words[0] = 0;
    if (!t) return -1;
    uint64_t mask = 0;
    int have_nv = 0, have_lin = 0, have_apple = 0;
    double events = 0, pressure = 0;
    pthread_mutex_lock(&t->mu);
    RING_FOR(t, s) {
        if (s->t_ns < t0 || s->t_ns > t1) continue;
        static const char suf[] = "_clocks_event_reasons";
        size_t l = strlen(s->metric), sl = sizeof suf - 1;
        if (l > sl && strcmp(s->metric + l - sl, suf) == 0) {
            have_nv = 1;
            mask |= (uint64_t)s->value;
        } else if (strcmp(s->metric, "cpu_throttle_events") == 0) {
            have_lin = 1;
            events += s->value;
        } else if (strcmp(s->metric, "thermal_pressure") == 0) {
            have_apple = 1;
            if (s->value > pressure) pressure = s->value;
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (!have_nv && !have_lin && !have_apple) return -1;
    /* Idle, application clocks, sync boost and display clock are not throttling. */
    uint64_t thr = mask & (0x4 | 0x8 | 0x20 | 0x40 | 0x80);
    int throttled = thr != 0 || events > 0 || pressure >= 2;
    if (words && n) {
        size_t w = 0;
        if (have_nv) {
            char b[200];
            cal_tel_nvml_reasons(mask, b, sizeof b);
            w += (size_t)snprintf(words, n, "NVML: %s", b);
        }
        if (have_lin && w < n)
            w += (size_t)snprintf(words + w, n - w, "%sLinux: %.0f throttle events",
                                  w ? "; " : "", events);
        if (have_apple && w < n)
            snprintf(words + w, n - w, "%smacOS thermal pressure %.0f", w ? "; " : "", pressure);
    }
    return throttled;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void cal_tel_self_stats(cal_tel *t, cal_tel_self *out)
{
    memset(out, 0, sizeof *out);
    if (!t) return;
    int64_t *copy = calloc(JIT_CAP, sizeof *copy);
    pthread_mutex_lock(&t->mu);
    *out = t->self;
    size_t k = t->njit < JIT_CAP ? (size_t)t->njit : JIT_CAP;
    if (copy) memcpy(copy, t->jit, k * sizeof *copy);
    pthread_mutex_unlock(&t->mu);
    if (copy && k) {
        qsort(copy, k, sizeof *copy, cmp_i64);
        out->jitter_p50_ns = copy[(k - 1) / 2];
        out->jitter_p99_ns = copy[(size_t)((double)(k - 1) * 0.99)];
        out->jitter_max_ns = copy[k - 1];
    }
    free(copy);
}
