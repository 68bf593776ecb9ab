/* The run model: a shot series over one or two targets (SPEC 1.1–1.3).
 * Shots run warm-ups first, rest before each later shot, restart the
 * engine under --cold, and every cell of a shot in turn; each cell builds
 * its prompts, sends them through the target, is summarised, given its
 * telemetry windows and stored with every request. The run ends with its
 * status (ok, interrupted, failed) and verdicts, and is loaded back. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/keep.h"
#include "caliper/protocol_record.h"
#include "caliper/run.h"
#include "caliper/saturation.h"
#include "caliper/telemetry.h"
#include "lib/util/c_locale.h"
#include "lib/workload/traffic_internal.h"

#define MAX_LIST CAL_RUN_MAX_LIST
#define CACHE_TURNS 64   /* turn indices whose cache hits are summed */

typedef struct side {
    char name[8];                    /* "" or "A" / "B" */
    cal_run_target *t;
    cal_workload *wl[MAX_LIST];      /* per prompt length */
    int wl_noted[MAX_LIST];          /* its note (prompts counted one by one) was said */
    cal_textgen *tg;                 /* prompts of drawn lengths, datasets, turns */
    cal_traffic *tr;                 /* this shot's turns (chat, replay) */
    /* the server's prefix-cache reports per turn index (first CACHE_TURNS) */
    double cached[CACHE_TURNS], prompt[CACHE_TURNS];
    long   reported[CACHE_TURNS], sent[CACHE_TURNS];
    int64_t started_ns;              /* -1 unknown */
    int fresh;                       /* the next shot is the engine's first */
} side;

typedef struct ctx {
    const cal_run_args *a;
    cal_run_plan p;                  /* with defaults filled in */
    cal_run_outcome *out;
    volatile int *stop;
    cal_store *st;
    cal_run run;
    cal_tel *tel;
    uint64_t tel_cursor;
    char clock_metric[64], power_metric[64];
    side sides[2];
    int n_sides;
    uint64_t nonce;
    int seq;
    char label[128];
    int target_failed;
    cal_keep keep;                   /* --keep-chunks budget, the cell's histograms */
    int itl_hist_cells;              /* cells whose ITL came from histograms */
    int64_t chunks_dropped;          /* ok requests whose chunk times were not kept */
    double last_goodput;             /* the last cell stored's goodput (NAN unknown) */
} ctx;

/* The plan's keep_chunks as a cal_keep limit. */
static long long keep_limit(const cal_run_plan *p)
{
    if (p->keep_chunks == 0) return CAL_KEEP_DEFAULT;
    if (p->keep_chunks == CAL_RUN_KEEP_NONE) return 0;
    return p->keep_chunks < 0 ? CAL_KEEP_ALL : p->keep_chunks;
}

void cal_run_target_free(cal_run_target **t)
{
    if (!t || !*t) return;
    if ((*t)->ops) {
        if ((*t)->ops->stop) (*t)->ops->stop((*t)->self);
        if ((*t)->ops->destroy) (*t)->ops->destroy((*t)->self);
    }
    free(*t);
    *t = NULL;
}

void cal_run_outcome_clear(cal_run_outcome *o)
{
    if (!o) return;
    cal_analysis_free(&o->analysis);
    cal_run_data_free(&o->data);
    memset(o, 0, sizeof *o);
}

static void emit(ctx *c, cal_run_event *ev)
{
    if (c->a->observer.fn) c->a->observer.fn(c->a->observer.ud, ev);
}

/* A note; field: the plan field it is about (NULL: none). */
static void note_on(ctx *c, const char *sidename, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note_on(ctx *c, const char *sidename, const char *field, const char *fmt, ...)
{
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cal_run_event ev = {.kind = CAL_RUN_EV_NOTE, .side = sidename, .text = buf, .field = field,
                        .run_id = c->run.id};
    emit(c, &ev);
}
#define note(c, side, ...) note_on(c, side, NULL, __VA_ARGS__)

static void fail(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(c->out->message, sizeof c->out->message, fmt, ap);
    va_end(ap);
}

static const char *what(const side *s)
{
    return s->t->ops->what ? s->t->ops->what(s->t->self) : s->t->ops->kind;
}

static int stopped(const ctx *c) { return c->stop && *c->stop; }

/* ---- telemetry ---------------------------------------------------------- */
static void drain_telemetry(ctx *c)
{
    if (!c->tel || !c->run.id) return;
    cal_tel_sample buf[512];
    size_t n;
    while ((n = cal_tel_read(c->tel, &c->tel_cursor, buf, 512, NULL)) > 0)
        for (size_t i = 0; i < n; i++)
            cal_store_add_telemetry(c->st, c->run.id, buf[i].t_ns, buf[i].backend,
                                    buf[i].metric, buf[i].unit, buf[i].value);
}

/* Mean and minimum of a telemetry metric over [t0, t1]; NAN when absent. */
static void tel_window(ctx *c, const char *metric, int64_t t0, int64_t t1, double *mean,
                       double *min)
{
    *mean = *min = NAN;
    if (!c->tel || !metric[0]) return;
    cal_tel_stat s;
    if (cal_tel_window(c->tel, metric, t0, t1, &s) != CAL_OK || s.n == 0) return;
    *mean = s.mean;
    *min = s.min;
}

/* ---- workload modes (workload_traffic.h) --------------------------------- */
/* Each request draws its prompt or output (a dataset or a distribution). */
static int per_request(const cal_run_plan *p)
{
    return p->dataset || p->prompt_len.kind != CAL_LEN_FIXED || p->output_len.kind != CAL_LEN_FIXED;
}
/* A shot is a session's turns (chat scenario, replay). */
static int turns_mode(const cal_run_plan *p) { return p->chat || p->replay_log; }

/* ---- targets ------------------------------------------------------------ */
static int count_with_target(void *ud, const char *text, int *n)
{
    cal_run_target *t = ud;
    return t->ops->count_tokens(t->self, text, n);
}

static int count_many_with_target(void *ud, const char *const *texts, size_t n, int *counts)
{
    cal_run_target *t = ud;
    return t->ops->count_many(t->self, texts, n, counts);
}

static int ids_with_target(void *ud, const char *text, int32_t **ids, int *n)
{
    cal_run_target *t = ud;
    return t->ops->token_ids(t->self, text, ids, n);
}

static int start_side(ctx *c, side *s)
{
    char err[1000] = "";
    int rc = s->t->ops->start(s->t->self, c->stop, err, sizeof err);
    if (rc) {
        fail(c, "%s%starget: %s", s->name, s->name[0] ? " " : "", err[0] ? err : cal_strerror(rc));
        return rc;
    }
    s->started_ns = s->t->ops->started_ns ? s->t->ops->started_ns(s->t->self) : -1;
    s->fresh = 1;
    int pid = s->t->ops->pid ? s->t->ops->pid(s->t->self) : 0;
    if (c->tel && pid > 0) cal_tel_set_pid(c->tel, pid);
    return CAL_OK;
}

static int open_workloads(ctx *c, side *s)
{
    const cal_run_plan *p = &c->p;
    if (per_request(p) || turns_mode(p)) {
        int rc = cal_textgen_open(p->content, s->t->ops->count_tokens ? count_with_target : NULL,
                                  s->t, &s->tg);
        if (rc && rc != CAL_ENOMEM) {
            note(c, s->name, "the tokenizer of %s failed (%s): prompt lengths will be approximate",
                 what(s), cal_strerror(rc));
            rc = cal_textgen_open(p->content, NULL, NULL, &s->tg);
        }
        if (rc) fail(c, "content: %s", cal_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < p->n_prompt; i++) {
        cal_workload_config wc = {.content = p->content, .prompt_tokens = p->prompt_tokens[i],
                                  .unique = !p->allow_prefix, .seed = p->seed,
                                  .count = s->t->ops->count_tokens ? count_with_target : NULL,
                                  .count_many = s->t->ops->count_many ? count_many_with_target : NULL,
                                  .token_ids = s->t->ops->token_ids ? ids_with_target : NULL,
                                  .count_ud = s->t};
        int rc = cal_workload_open(&wc, &s->wl[i]);
        if (rc && rc != CAL_ENOMEM && rc != CAL_EINVAL) {
            note(c, s->name, "the tokenizer of %s failed (%s): prompt lengths will be approximate",
                 what(s), cal_strerror(rc));
            wc.count = NULL;
            rc = cal_workload_open(&wc, &s->wl[i]);
        }
        if (rc) {
            fail(c, "prompt_tokens: %d: %s", p->prompt_tokens[i], cal_strerror(rc));
            return rc;
        }
        int shortest = cal_workload_shortest_exact(s->wl[i]);
        if (p->prompt_tokens[i] < shortest)
            note_on(c, s->name, "prompt_tokens",
                    "%d is shorter than the unique nonce line each prompt starts with (%d "
                    "tokens here): those prompts are the nonce line alone, marked approximate; "
                    "the shortest exact length is %d (identical prompts, without the nonce, can be "
                    "shorter)",
                    p->prompt_tokens[i], shortest, shortest);
    }
    return CAL_OK;
}

/* ---- one cell ----------------------------------------------------------- */
typedef struct prog {
    ctx *c;
    const char *side;
    int shot;
    size_t base, total;
} prog;

static void on_progress(void *ud, size_t done, size_t total)
{
    prog *g = ud;
    (void)total;
    cal_run_event ev = {.kind = CAL_RUN_EV_PROGRESS, .side = g->side, .label = g->c->label,
                        .run_id = g->c->run.id, .shot = g->shot, .done = g->base + done,
                        .total = g->total};
    emit(g->c, &ev);
}

/* A request ended (a target's on_end, on its thread): fold it into the
 * cell's histograms under the chunk budget, and free its prompt, which went
 * out with it, so a long cell holds records rather than prompts. */
typedef struct ended { cal_keep *keep; cal_req_result *res; char **prompts; } ended;
static void on_end(void *ud, size_t index, cal_req_result *r)
{
    ended *e = ud;
    cal_keep_fold(e->keep, r);
    free(e->prompts[index]);
    e->prompts[index] = NULL;
}

/* Grow the cell's arrays to hold cap requests. */
static int grow(cal_request **reqs, cal_req_result **res, char ***prompts, size_t *cap, size_t want)
{
    if (want <= *cap) return CAL_OK;
    cal_request *r = realloc(*reqs, want * sizeof *r);
    if (!r) return CAL_ENOMEM;
    *reqs = r;
    cal_req_result *x = realloc(*res, want * sizeof *x);
    if (!x) return CAL_ENOMEM;
    *res = x;
    char **pr = realloc(*prompts, want * sizeof *pr);
    if (!pr) return CAL_ENOMEM;
    *prompts = pr;
    memset(*reqs + *cap, 0, (want - *cap) * sizeof **reqs);
    memset(*res + *cap, 0, (want - *cap) * sizeof **res);
    memset(*prompts + *cap, 0, (want - *cap) * sizeof **prompts);
    *cap = want;
    return CAL_OK;
}

/* The fields every cell of a shot fills alike: which shot, its kind, the
 * rest before it, the engine's age, its requests and the probe's check. */
static void cell_shot(cal_cell *cell, const side *s, int shot, cal_shot_kind kind, int64_t rest_ns,
                      size_t n, const cal_probe_stats *ps)
{
    cell->shot_index = shot;
    cell->shot_kind = kind;
    cell->rest_before_ns = rest_ns;
    cell->process_age_ns = s->started_ns > 0 ? cell->start_ns - s->started_ns : -1;
    cell->n_requests = (int64_t)n;
    cell->cpu_ns = ps->cpu_ns;
    cell->chunks = ps->chunks;
    cell->send_lag_p99_ms = ps->send_lag_p99_ms;
}

/* Summarise a cell's requests, give it its telemetry windows, store it
 * with them, tell the observer, and notice a target that died. */
static int store_cell(ctx *c, side *s, cal_cell *cell, cal_req_result *res, size_t kept,
                      const cal_probe_stats *ps, int shot)
{
    /* the cell's histograms: filled as its requests ended (run_cell, under
     * the chunk budget), or here from the results (the turns of a chat or
     * a replay, cells of a few requests) */
    cal_cell_hists *hists = c->keep.cell, *own = NULL;
    if (!hists) {
        if (!(hists = own = malloc(sizeof *own))) return CAL_ENOMEM;
        cal_cell_hists_init(own);
        for (size_t i = 0; i < kept; i++) cal_cell_hists_add(own, &res[i]);
    }
    cal_summary_compute(res, kept, 0, cell->output_fixed ? cell->max_tokens : 0, &cell->sum);
    if (ps->implausible)   /* the server said something absurd: kept as unknown, said here */
        note(c, s->name, "%s: %lld server usage or timings values lay outside a plausible range "
                         "and were stored as unknown", c->label, (long long)ps->implausible);
    const char *itl_source = cal_keep_summary(hists, res, kept, &cell->sum);
    cell->sum.goodput = cal_goodput(&c->p.slo, res, kept, cell->sum.duration);
    c->last_goodput = cell->sum.goodput;
    tel_window(c, c->clock_metric, cell->start_ns, cell->end_ns, &cell->sum.clock_mhz_mean,
               &cell->sum.clock_mhz_min);
    tel_window(c, c->power_metric, cell->start_ns, cell->end_ns, &cell->sum.power_w_mean,
               &cell->sum.power_w_min);
    int src = cal_store_add_cell(c->st, c->run.id, cell, res, kept);
    if (src) {
        free(own);
        fail(c, "storing the cell: %s", cal_store_errmsg(c->st));
        return src;
    }
    src = cal_store_add_cell_hists(c->st, cell->id, hists, itl_source);
    int64_t dropped = hists->chunks_dropped;
    free(own);
    if (src) {
        fail(c, "storing the cell's histograms: %s", cal_store_errmsg(c->st));
        return src;
    }
    if (strcmp(itl_source, "raw")) c->itl_hist_cells++;
    c->chunks_dropped += dropped;
    if (dropped)
        note(c, s->name, "%s: ITL percentiles from histograms (within %.2f %%): the chunk "
                         "timestamps of %lld requests were not kept (the keep_chunks budget)",
             c->label, CAL_HIST_REL_ERROR * 100, (long long)dropped);
    drain_telemetry(c);
    cal_run_event done = {.kind = CAL_RUN_EV_CELL, .side = s->name, .label = c->label,
                          .run_id = c->run.id, .shot = shot, .cell = cell};
    emit(c, &done);
    /* a target that died is reported, not waited on */
    int alive = s->t->ops->alive ? s->t->ops->alive(s->t->self) : 1;
    if (!stopped(c) && kept > 0 &&
        (!alive || (cell->sum.completed == 0 &&
                    cell->sum.n_connect_error + cell->sum.n_stream_error + cell->sum.n_timeout +
                    cell->sum.n_http_error > 0))) {
        c->target_failed = 1;
        char tail[400] = "";
        if (s->t->ops->why_failed) s->t->ops->why_failed(s->t->self, tail, sizeof tail);
        /* say what it sent: a target that answers malformed streams has not
         * stopped answering */
        char said[400];
        cal_probe_failure_summary(ps, said, sizeof said);
        fail(c, "%s%sthe target %s during shot %d (%s)%s%s%s%s", s->name, s->name[0] ? " " : "",
             !alive ? "exited"
             : ps->n_status[CAL_REQ_CONNECT_ERROR] + ps->n_status[CAL_REQ_TIMEOUT] > 0
                 ? "stopped answering" : "answered with errors",
             shot, what(s), said[0] ? ": " : "", said, tail[0] ? "; its log ends: " : "", tail);
    }
    return CAL_OK;
}

/* Request number index of a per-request cell: a dataset entry or a prompt
 * of a drawn length (after the nonce line unless prefixes may repeat), and
 * its output length. The draws come from the seed and the index alone. */
static int draw_prompt(ctx *c, side *s, uint64_t index, char **out, int *max_tokens)
{
    const cal_run_plan *p = &c->p;
    uint64_t rng = p->seed ^ (index * 0x9e3779b97f4a7c15ULL) ^ 0x6c656e73ULL;
    char nl[10] = "";
    if (!p->allow_prefix) cal_traffic_nonce_(p->seed ^ (index * 0xd1b54a32d192ed03ULL), nl);
    size_t len = strlen(nl);
    char *pr = strdup(nl);
    if (!pr) return CAL_ENOMEM;
    int n, rc = CAL_OK;
    const cal_ds_entry *e = p->dataset ? &p->dataset->e[cal_dataset_pick(p->dataset, p->seed, index)] : NULL;
    if (e && e->text) {
        char *q = realloc(pr, len + strlen(e->text) + 1);
        if (!q) { free(pr); return CAL_ENOMEM; }
        pr = q;
        memcpy(pr + len, e->text, strlen(e->text) + 1);
    } else {
        int want = e && e->prompt_tokens > 0 && p->prompt_len.kind != CAL_LEN_UNIFORM &&
                           p->prompt_len.kind != CAL_LEN_NORMAL
                       ? e->prompt_tokens
                   : p->prompt_len.kind == CAL_LEN_FIXED ? p->prompt_tokens[0]
                                                          : cal_lendist_draw(&p->prompt_len, &rng);
        if (want < 1) want = 1;
        int base = 0;
        if (len) rc = cal_textgen_count(s->tg, pr, &base);
        /* the drawn length is the whole prompt's, nonce line included */
        if (base > 0) want = want - base > 1 ? want - base : 1;
        if (!rc) rc = cal_textgen_append(s->tg, &pr, &len, base, want, (index * 7919) % 4096, &n);
    }
    if (rc) { free(pr); return rc; }
    if (p->output_len.kind == CAL_LEN_DATASET && e) {
        *max_tokens = e->output_tokens > 0 ? e->output_tokens
                      : e->output_chars > 0
                          ? (int)ceil(e->output_chars / cal_textgen_chars_per_token(s->tg))
                          : p->max_tokens;
    } else if (p->output_len.kind == CAL_LEN_UNIFORM || p->output_len.kind == CAL_LEN_NORMAL) {
        *max_tokens = cal_lendist_draw(&p->output_len, &rng);
    } else {
        *max_tokens = p->max_tokens;
    }
    if (*max_tokens < 1) *max_tokens = 1;
    *out = pr;
    return CAL_OK;
}

/* rate: the cell's offered rate, req/s (0: closed loop); a saturation
 * sweep's step, else the plan's. */
static int run_cell(ctx *c, side *s, size_t pi, int conc, double rate, int shot,
                    cal_shot_kind kind, int64_t rest_ns, cal_cell_kind ckind)
{
    const cal_run_plan *p = &c->p;
    int closed = !(rate > 0);
    /* the arrival pattern: Poisson arrivals are drawn by the target (the
     * probe's seeded draw); a ramp or bursts are stamped here, each
     * request's sched_ns from the pattern's seeded generator */
    cal_arrivals pat = p->pattern;
    if (pat.kind == CAL_ARR_POISSON) pat.rate = rate;
    int stamped = !closed && pat.kind != CAL_ARR_POISSON;
    cal_arrival_gen gen;
    cal_arrival_gen_init(&gen, &pat, p->seed + (uint64_t)c->seq * 7919);
    size_t n = (size_t)(p->requests ? p->requests : (conc * 2 > 8 ? conc * 2 : 8));
    if (!closed && !p->requests) n = cal_arrivals_default_n(&pat);
    if (p->duration_s > 0) {
        /* the first round; later rounds are sized from the rate it shows */
        double est = !closed ? cal_arrivals_expected(&pat, p->duration_s) * 1.5 + 16 : (double)conc * 64;
        n = (size_t)fmin((double)CAL_RUN_MAX_CELL_REQUESTS, est);
    }
    cal_request *reqs = NULL;
    cal_req_result *res = NULL;
    char **prompts = NULL;
    size_t cap = 0, total = 0;
    cal_cell_hists *hists = malloc(sizeof *hists);
    if (!hists) return CAL_ENOMEM;
    cal_keep_begin(&c->keep, hists);
    int rc = grow(&reqs, &res, &prompts, &cap, n);
    if (rc) goto out;
    char load_s[48];
    if (stamped) cal_arrivals_format(&pat, load_s, sizeof load_s);
    else if (!closed) cal_snprintf(load_s, sizeof load_s, "rate %g", rate);
    else snprintf(load_s, sizeof load_s, "c%d", conc);
    char len_s[48];
    if (p->dataset) snprintf(len_s, sizeof len_s, "dataset");
    else if (per_request(p)) cal_lendist_text(&p->prompt_len, len_s, sizeof len_s);
    else snprintf(len_s, sizeof len_s, "%d", p->prompt_tokens[pi]);
    snprintf(c->label, sizeof c->label, "%s%sshot %d · %s · %s tok", s->name,
             s->name[0] ? " · " : "", shot, load_s, len_s);
    cal_run_event ev = {.kind = CAL_RUN_EV_PREPARING, .side = s->name, .label = c->label,
                        .run_id = c->run.id, .shot = shot};
    emit(c, &ev);

    cal_load load = {.concurrency = closed ? conc : (p->cap_given ? conc : 0),
                     .rate = closed ? 0 : cal_arrivals_mean_rate(&pat),
                     .seed = p->seed + (uint64_t)c->seq * 7919};
    ended en = {.keep = &c->keep};
    cal_cell cell;
    memset(&cell, 0, sizeof cell);
    cal_probe_stats ps;
    memset(&ps, 0, sizeof ps);
    ps.first_fail = -1;
    int64_t deadline = 0, prep_ns = 0;
    size_t prepared = 0;
    int round = 0, loops_noted = 0;
    for (;;) {
        /* prompts for this round (a later round stops preparing when the
         * time is up, and sends what it has) */
        int64_t prep0 = cal_now_ns();
        /* the round's prompts at once: a few tokenizer calls, not one each */
        if (!per_request(p) && !deadline &&
            (rc = cal_workload_prepare(s->wl[pi], c->nonce, n))) {
            fail(c, "%s%scounting the tokens of the prompts through the target %s failed: %s%s",
                 s->name, s->name[0] ? " " : "", what(s), cal_strerror(rc),
                 rc == CAL_ECONNECT ? " (the target stopped answering)" : "");
            goto out;
        }
        for (size_t i = total; i < total + n; i++) {
            int ntok;
            if (stopped(c)) { rc = CAL_ECANCEL; goto out; }
            /* progress on what takes over a second (prompts counted one by one) */
            if ((i - total) % 64 == 0 && cal_now_ns() - prep0 > 1000000000) {
                cal_run_event pe = {.kind = CAL_RUN_EV_PREPARING, .side = s->name, .label = c->label,
                                    .run_id = c->run.id, .shot = shot, .done = i - total, .total = n};
                emit(c, &pe);
            }
            if (deadline && (i - total) % 64 == 0 && cal_now_ns() >= deadline) {
                n = i - total;
                break;
            }
            reqs[i].max_tokens = p->max_tokens;
            if (per_request(p)) rc = draw_prompt(c, s, c->nonce++, &prompts[i], &reqs[i].max_tokens);
            else rc = cal_workload_prompt(s->wl[pi], c->nonce++, &prompts[i], &ntok);
            if (rc) {
                fail(c, "%s%scounting the tokens of prompt %zu through the target %s failed: %s%s",
                     s->name, s->name[0] ? " " : "", i, what(s), cal_strerror(rc),
                     rc == CAL_ECONNECT ? " (the target stopped answering)" : "");
                goto out;
            }
            reqs[i].prompt = prompts[i];
        }
        if (round == 0) {
            cell.start_ns = cal_now_ns();
            cell.start_wall_ns = cal_wall_ns();
            if (p->duration_s > 0) deadline = cell.start_ns + cal_span_ns(p->duration_s);
        }
        prep_ns += cal_now_ns() - prep0;
        if (!per_request(p) && cal_workload_note(s->wl[pi]) && !s->wl_noted[pi]) {
            s->wl_noted[pi] = 1;
            note_on(c, s->name, "prompt_tokens", "%d: %s", p->prompt_tokens[pi],
                    cal_workload_note(s->wl[pi]));
        }
        prepared += n;
        if (n == 0) break;
        load.deadline_ns = deadline;
        if (stamped) {
            /* the pattern's clock runs from the cell's first send; a later
             * round resumes it where it was (the drain between rounds is
             * not part of the pattern) */
            int64_t base = 0;
            for (size_t i = total; i < total + n; i++) {
                int64_t off = cal_arrival_next_ns(&gen);
                if (i == total) base = cal_now_ns() - (round ? off : 0);
                reqs[i].sched_ns = base + off;
            }
        }
        load.seed = p->seed + (uint64_t)c->seq * 7919 + (uint64_t)round * 104729;
        cal_probe_stats rs;
        memset(&rs, 0, sizeof rs);
        prog g = {.c = c, .side = s->name, .shot = shot, .base = total,
                  .total = p->duration_s > 0 ? 0 : n};
        en.res = res;                  /* stable while the round is sent */
        en.prompts = prompts;
        load.on_end = on_end;
        load.on_end_ud = &en;
        int64_t calls0 = c->keep.calls;
        rc = s->t->ops->send(s->t->self, reqs + total, n, &load, res + total, c->stop,
                             on_progress, &g, &rs);
        /* a target that does not call on_end is folded here, after the fact */
        if (c->keep.calls == calls0)
            for (size_t i = total; i < total + n; i++) cal_keep_fold(&c->keep, &res[i]);
        total += n;
        ps.cpu_ns += rs.cpu_ns;
        ps.chunks += rs.chunks;
        ps.implausible += rs.implausible;
        if (rs.send_lag_p99_ms > ps.send_lag_p99_ms) ps.send_lag_p99_ms = rs.send_lag_p99_ms;
        if (rs.n_loops > 0 && rs.saturated_loop >= 0 && !loops_noted) {   /* the client self-check, once a cell */
            char ls[900];
            cal_probe_loops_summary(&rs, ls, sizeof ls);
            loops_noted = 1;
            note(c, s->name, "client self-check, concurrency %d: %s", conc, ls);
        }
        /* the opening wave late by more than the self-check's 5 ms: say so
         * (its requests' sched_ns and send_ns are stored; unknown stays quiet) */
        if (round == 0 && rs.first_wave > 0 && isfinite(rs.first_lag_p99_ms) && rs.first_lag_p99_ms > 5)
            note(c, s->name, "client self-check, concurrency %d: first wave of %d requests sent "
                 "late by p50 %.2f ms, p99 %.2f ms (%d connections opened ahead in %.0f ms)",
                 conc, rs.first_wave, rs.first_lag_p50_ms, rs.first_lag_p99_ms, rs.connected_ahead,
                 (double)rs.prepare_ns / 1e6);
        for (int k = 0; k < CAL_REQ_N_STATUS; k++) ps.n_status[k] += rs.n_status[k];
        if (ps.first_fail < 0 && rs.first_fail >= 0) {
            ps.first_fail = (int)(total - n) + rs.first_fail;
            memcpy(ps.first_fail_msg, rs.first_fail_msg, sizeof ps.first_fail_msg);
        }
        round++;
        if (rc && rc != CAL_ECANCEL) {
            fail(c, "%s: %s", s->t->ops->kind, cal_strerror(rc));
            cell.end_ns = cal_now_ns();
            goto out;
        }
        int64_t now = cal_now_ns();
        if (!deadline || rc == CAL_ECANCEL || stopped(c) || now >= deadline) break;
        /* --duration: every request ended before the time was up. Another
         * round, sized from the rate so far with a margin, so the cell
         * runs for its whole duration (at most one drain per round). */
        size_t ended_ok = 0;
        for (size_t i = 0; i < total; i++) ended_ok += res[i].status == CAL_REQ_OK;
        if (ended_ok == 0) break;   /* nothing succeeds: do not spin */
        if (total >= (size_t)CAL_RUN_MAX_CELL_REQUESTS) {
            note(c, s->name, "%s: stopped at %zu requests (the cap of one cell) %.1f s before "
                             "its duration", c->label, total, (double)(deadline - now) / 1e9);
            break;
        }
        /* the rate so far with a margin, but at most doubling the cell, so
         * preparing the prompts of a round never eats the time it is for */
        double per_s = (double)total / ((double)(now - cell.start_ns) / 1e9);
        double want = per_s * (double)(deadline - now) / 1e9 * 1.25 + 2.0 * (conc > 0 ? conc : 1);
        if (want > (double)total) want = (double)total;
        /* and small enough that building its prompts takes at most 2 % of
         * the time left (the gap between rounds stays small) */
        double prep_per = prepared ? (double)prep_ns / (double)prepared : 0;
        if (prep_per > 0 && want > 0.02 * (double)(deadline - now) / prep_per)
            want = 0.02 * (double)(deadline - now) / prep_per;
        if (want < (conc > 0 ? conc : 8)) want = conc > 0 ? conc : 8;
        if (want > (double)(CAL_RUN_MAX_CELL_REQUESTS - total))
            want = (double)(CAL_RUN_MAX_CELL_REQUESTS - total);
        n = (size_t)want;
        rc = grow(&reqs, &res, &prompts, &cap, total + n);
        if (rc) goto out;
    }
    cell.end_ns = cal_now_ns();
    /* a duration cell: requests never sent were never part of it */
    size_t kept = total;
    if (p->duration_s > 0 && !stopped(c)) {
        kept = 0;
        for (size_t i = 0; i < total; i++) {
            if (res[i].status == CAL_REQ_CANCELLED && res[i].send_ns == 0) {
                cal_req_result_free(&res[i]);
                continue;
            }
            if (kept != i) { res[kept] = res[i]; memset(&res[i], 0, sizeof res[i]); }
            kept++;
        }
    }
    cell.seq = c->seq++;
    cell.kind = ckind;
    snprintf(cell.target, sizeof cell.target, "%s", s->name);
    cell.concurrency = load.concurrency;
    cell.rate = closed ? 0 : cal_arrivals_mean_rate(&pat);
    if (per_request(p)) {
        /* mixed lengths: the requests carry their own; the cell says "mixed" (0) */
        cell.prompt_tokens = p->prompt_len.kind == CAL_LEN_FIXED && !p->dataset ? p->prompt_tokens[0] : 0;
        cell.prompt_exact = 0;
        snprintf(cell.content, sizeof cell.content, "%s", p->dataset ? "dataset" : cal_content_name(p->content));
        int same = 1;
        for (size_t i = 1; i < kept && same; i++) same = reqs[i].max_tokens == reqs[0].max_tokens;
        cell.max_tokens = same && kept ? reqs[0].max_tokens : 0;
        cell.output_fixed = !p->free_output && same;
    } else {
        cell.prompt_tokens = p->prompt_tokens[pi];
        cell.prompt_exact = cal_workload_exact(s->wl[pi]);
        snprintf(cell.content, sizeof cell.content, "%s", cal_content_name(p->content));
        cell.max_tokens = p->max_tokens;
        cell.output_fixed = !p->free_output;
    }
    cell.unique_prompts = !p->allow_prefix;
    cell_shot(&cell, s, shot, kind, rest_ns, kept, &ps);
    rc = store_cell(c, s, &cell, res, kept, &ps, shot);
    if (rc) goto out;
    rc = CAL_OK;
out:
    cal_keep_begin(&c->keep, NULL);
    free(hists);
    if (res) for (size_t i = 0; i < cap; i++) cal_req_result_free(&res[i]);
    if (prompts) for (size_t i = 0; i < cap; i++) free(prompts[i]);
    free(prompts);
    free(reqs);
    free(res);
    return rc;
}

/* ---- a shot of turns: the chat scenario, a replay ------------------------ */
/* Build the turns of one shot for a side: the same seed for both sides of
 * an A/B shot (the same texts), another for every shot (a prefix cache
 * cannot carry one shot's system block into the next). */
static int build_turns(ctx *c, side *s, int shot)
{
    const cal_run_plan *p = &c->p;
    cal_traffic_free(&s->tr);
    char why[300] = "";
    cal_count_tokens_fn cnt = s->t->ops->count_tokens ? count_with_target : NULL;
    int rc;
    if (p->chat) {
        cal_chat_config cc = *p->chat;
        cc.seed = p->seed + (uint64_t)shot * 1000003;
        cc.count = cnt;
        cc.count_ud = s->t;
        cc.stop = c->stop;
        cc.content = p->content;
        rc = cal_chat_build(&cc, &s->tr, why, sizeof why);
    } else {
        rc = cal_replay_build(p->replay_log, p->replay_len, p->replay_name,
                              p->replay_speed > 0 ? p->replay_speed : 1, p->content, cnt, s->t,
                              &s->tr, why, sizeof why);
    }
    if (rc) fail(c, "%s%s%s: %s", s->name, s->name[0] ? " " : "", p->chat ? "chat" : "replay",
                 why[0] ? why : cal_strerror(rc));
    /* a think time is a wait the schedule keeps: a replay slowed past a day
     * between turns would drop it (cal_span_ns bounds, it does not keep) */
    for (int k = 0; !rc && !p->chat && k < s->tr->n_turns; k++)
        for (int u = 0; !rc && u < s->tr->n_sessions; u++) {
            const cal_turn *t = cal_traffic_turn(s->tr, k, u);
            if (t->present && !(t->think_s <= CAL_WAIT_MAX_S)) {
                fail(c, "replay_speed: %g makes turn %d of session %d wait %.3g s, over the "
                        "%g s (a day) one wait may last", p->replay_speed > 0 ? p->replay_speed : 1,
                     k + 1, u + 1, t->think_s, CAL_WAIT_MAX_S);
                rc = CAL_EINVAL;
            }
        }
    return rc;
}

/* One cell per turn index: the sessions that have that turn, each sent
 * when its previous turn ended plus its think time (a first turn at its
 * start offset), in flight together. A turn index waits for every
 * session's previous turn (the cell is the unit stored), so a session's
 * think time is a floor, not exact, when another session's turn is slower. */
static int run_turns(ctx *c, side *s, int shot, cal_shot_kind kind, int64_t rest_ns)
{
    const cal_run_plan *p = &c->p;
    cal_traffic *tr = s->tr;
    int ns = tr->n_sessions, rc = CAL_OK;
    int64_t *last_end = calloc((size_t)ns, sizeof *last_end);
    int *order = calloc((size_t)ns, sizeof *order);
    int64_t *due = calloc((size_t)ns, sizeof *due);
    cal_request *reqs = calloc((size_t)ns, sizeof *reqs);
    cal_req_result *res = calloc((size_t)ns, sizeof *res);
    if (!last_end || !order || !due || !reqs || !res) { rc = CAL_ENOMEM; goto out; }
    int64_t t0 = cal_now_ns();
    for (int k = 0; k < tr->n_turns && !stopped(c) && !c->target_failed; k++) {
        size_t n = 0;
        int64_t now = cal_now_ns();
        for (int u = 0; u < ns; u++) {
            const cal_turn *t = cal_traffic_turn(tr, k, u);
            if (!t->present) continue;
            int64_t base = k == 0 || !last_end[u] ? t0 : last_end[u];
            due[u] = base + cal_span_ns(t->think_s);
            if (due[u] < now) due[u] = now;
            /* sessions in the order they are due: the probe sends in index order */
            size_t j = n++;
            while (j > 0 && due[order[j - 1]] > due[u]) { order[j] = order[j - 1]; j--; }
            order[j] = u;
        }
        if (n == 0) continue;
        double ptok = 0;
        int same = 1;
        for (size_t i = 0; i < n; i++) {
            const cal_turn *t = cal_traffic_turn(tr, k, order[i]);
            reqs[i].prompt = t->prompt;
            reqs[i].max_tokens = t->max_tokens;
            reqs[i].sched_ns = due[order[i]];
            ptok += t->prompt_tokens;
            same = same && t->max_tokens == reqs[0].max_tokens;
        }
        snprintf(c->label, sizeof c->label, "%s%sshot %d · %s turn %d · %zu session%s", s->name,
                 s->name[0] ? " · " : "", shot, tr->kind, k + 1, n, n == 1 ? "" : "s");
        cal_run_event ev = {.kind = CAL_RUN_EV_PREPARING, .side = s->name, .label = c->label,
                            .run_id = c->run.id, .shot = shot};
        emit(c, &ev);
        cal_load load = {.concurrency = (int)n, .seed = p->seed + (uint64_t)c->seq * 7919};
        cal_cell cell;
        memset(&cell, 0, sizeof cell);
        cal_probe_stats ps;
        memset(&ps, 0, sizeof ps);
        ps.first_fail = -1;
        cell.start_ns = cal_now_ns();
        cell.start_wall_ns = cal_wall_ns();
        prog g = {.c = c, .side = s->name, .shot = shot, .base = 0, .total = n};
        rc = s->t->ops->send(s->t->self, reqs, n, &load, res, c->stop, on_progress, &g, &ps);
        cell.end_ns = cal_now_ns();
        if (rc && rc != CAL_ECANCEL) {
            fail(c, "%s: %s", s->t->ops->kind, cal_strerror(rc));
            for (size_t i = 0; i < n; i++) cal_req_result_free(&res[i]);
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            last_end[order[i]] = res[i].end_ns > 0 ? res[i].end_ns : cell.end_ns;
            if (k < CACHE_TURNS && res[i].status == CAL_REQ_OK && kind != CAL_SHOT_WARMUP) {
                s->sent[k]++;
                if (res[i].cached_tokens >= 0) {
                    s->reported[k]++;
                    s->cached[k] += res[i].cached_tokens;
                    s->prompt[k] += res[i].prompt_tokens > 0 ? res[i].prompt_tokens
                                    : cal_traffic_turn(tr, k, order[i])->prompt_tokens;
                }
            }
        }
        cell.seq = c->seq++;
        cell.kind = CAL_CELL_PROMPT_SWEEP;   /* the turns are a prompt-length line */
        snprintf(cell.target, sizeof cell.target, "%s", s->name);
        cell.concurrency = (int)n;
        cell.prompt_tokens = (int)lround(ptok / (double)n);
        cell.prompt_exact = !cal_traffic_turn(tr, k, order[0])->est;
        snprintf(cell.content, sizeof cell.content, "%s", tr->kind);
        cell.unique_prompts = 1;
        cell.max_tokens = same ? reqs[0].max_tokens : 0;
        cell.output_fixed = !p->free_output && same;
        cell_shot(&cell, s, shot, kind, k == 0 ? rest_ns : 0, n, &ps);
        rc = store_cell(c, s, &cell, res, n, &ps, shot);
        for (size_t i = 0; i < n; i++) cal_req_result_free(&res[i]);
        if (rc) goto out;
        if (ps.n_status[CAL_REQ_CANCELLED] && stopped(c)) break;
    }
out:
    free(last_end);
    free(order);
    free(due);
    free(reqs);
    free(res);
    return rc;
}

/* What the server said of its prefix cache over the turns (usage's
 * cached_tokens or llama.cpp's cache_n): one sentence per side, stored
 * with the verdicts and told to the observer. */
static void cache_notes(ctx *c, json_t *va)
{
    for (int i = 0; i < c->n_sides; i++) {
        side *s = &c->sides[i];
        long sent = 0, rep = 0;
        for (int k = 0; k < CACHE_TURNS; k++) { sent += s->sent[k]; rep += s->reported[k]; }
        if (!sent) continue;
        char buf[1100];
        int o = cal_snprintf(buf, sizeof buf, "%s%sprefix cache: ", s->name, s->name[0] ? ": " : "");
        if (!rep) {
            cal_snprintf(buf + o, sizeof buf - (size_t)o,
                         "%s reported no cached tokens (no usage.prompt_tokens_details.cached_tokens "
                         "or timings.cache_n) in %ld turns: its cache hits are unknown", what(s), sent);
        } else {
            o += cal_snprintf(buf + o, sizeof buf - (size_t)o,
                              "%s reported cached tokens in %ld of %ld turns; share of the prompt "
                              "taken from its cache per turn:", what(s), rep, sent);
            for (int k = 0; k < CACHE_TURNS && o < (int)sizeof buf - 40; k++)
                if (s->reported[k] && s->prompt[k] > 0)
                    o += cal_snprintf(buf + o, sizeof buf - (size_t)o, " %d: %.0f %%", k + 1,
                                      100 * s->cached[k] / s->prompt[k]);
        }
        note(c, s->name, "%s", buf + (s->name[0] ? strlen(s->name) + 2 : 0));
        json_array_append_new(va, json_string(buf));
    }
}

/* ---- run-level JSON records -------------------------------------------- */
static char *target_json(ctx *c)
{
    json_t *arr = json_array();
    for (int i = 0; i < c->n_sides; i++) {
        side *s = &c->sides[i];
        char *d = s->t->ops->describe ? s->t->ops->describe(s->t->self) : NULL;
        json_t *t = d ? json_loads(d, 0, NULL) : NULL;
        free(d);
        if (!json_is_object(t)) {
            json_decref(t);
            t = json_object();
            json_object_set_new(t, "kind", json_string(s->t->ops->kind));
        }
        if (s->name[0]) json_object_set_new(t, "side", json_string(s->name));
        json_array_append_new(arr, t);
    }
    json_t *out;
    if (c->n_sides == 1) {
        out = json_incref(json_array_get(arr, 0));
    } else {
        out = json_deep_copy(json_array_get(arr, 0));
        json_object_set_new(out, "ab", json_incref(arr));
    }
    json_decref(arr);
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return s;
}

/* The stored protocol: the plan as a record (protocol_record.h), written by
 * its one serializer. */
static char *protocol_json(ctx *c)
{
    const char *sc = turns_mode(&c->p) && c->sides[0].tr ? c->sides[0].tr->protocol_json : NULL;
    cal_protocol r;
    char *s = NULL;
    if (cal_protocol_from_plan(&c->p, c->n_sides, sc, &r) == CAL_OK) {
        cal_protocol_to_json(&r, &s, NULL);
        cal_protocol_clear(&r);
    }
    return s;
}

static char *telemetry_json(ctx *c)
{
    json_t *t = json_object(), *src = json_array();
    char summary[700] = "";
    if (!c->p.telemetry) {
        snprintf(summary, sizeof summary, "%s",
                 c->p.telemetry_off_why ? c->p.telemetry_off_why : "off: clock and power not sampled");
    } else if (!c->tel) {
        snprintf(summary, sizeof summary, "absent: the sampler could not start");
    } else {
        const cal_tel_backend_info *b;
        size_t nb = cal_tel_backends(c->tel, &b);
        char avail[256] = "";
        size_t off = 0;
        for (size_t i = 0; i < nb; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "backend", json_string(b[i].name));
            json_object_set_new(o, "present", json_boolean(b[i].available));
            json_object_set_new(o, "why", json_string(b[i].reason));
            json_array_append_new(src, o);
            if (b[i].available && off < sizeof avail)
                off += (size_t)snprintf(avail + off, sizeof avail - off, "%s%s", off ? ", " : "", b[i].name);
        }
        const char *power_why = NULL;
        for (size_t i = 0; i < nb && !power_why; i++)
            if (!strcmp(b[i].name, "rapl") && !b[i].available) power_why = b[i].reason;
        snprintf(summary, sizeof summary, "%s · clock: %s · power: %s%s%s", avail[0] ? avail : "no backend",
                 c->clock_metric[0] ? c->clock_metric : "absent",
                 c->power_metric[0] ? c->power_metric : "absent",
                 !c->power_metric[0] && power_why ? " — " : "",
                 !c->power_metric[0] && power_why ? power_why : "");
        json_object_set_new(t, "interval_s", json_real(cal_tel_interval_ns(c->tel) / 1e9));
    }
    json_object_set_new(t, "sources", src);
    json_object_set_new(t, "clock_metric", c->clock_metric[0] ? json_string(c->clock_metric) : json_null());
    json_object_set_new(t, "power_metric", c->power_metric[0] ? json_string(c->power_metric) : json_null());
    json_object_set_new(t, "summary", json_string(summary));
    char *s = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return s;
}

/* ---- the library's verdicts of a stored run ------------------------------ */
/* The run analysis's (analysis.h): shot series with the clock and power
 * checks of a drop, A/B pairs, failures, output length, the client. */
char *cal_run_verdicts(const cal_run_data *d) { return cal_analysis_verdicts_json(d); }

/* ---- the series --------------------------------------------------------- */
/* The plan's rules (plan.c), then the ones between the plan and the targets. */
static int check_plan(ctx *c)
{
    cal_plan_error pe;
    if (cal_plan_check(&c->p, &pe)) {
        char buf[600];
        fail(c, "%s", cal_plan_error_text(&pe, buf, sizeof buf));
        return CAL_EINVAL;
    }
    cal_run_plan_fill(&c->p);
    for (int i = 0; i < c->n_sides; i++) {
        const cal_run_target *t = c->sides[i].t;
        if (!t->ops || !t->ops->start || !t->ops->send) {
            fail(c, "target %d: its ops lack start or send", i);
            return CAL_EINVAL;
        }
        if (c->p.cold && !t->restartable) {
            fail(c, "cold: the target %s cannot be restarted fresh (a URL someone else runs)",
                 t->ops->what ? t->ops->what(t->self) : t->ops->kind);
            return CAL_EINVAL;
        }
    }
    return CAL_OK;
}

int cal_run_series(const cal_run_args *args, cal_run_outcome *out)
{
    if (!out) return CAL_EINVAL;
    memset(out, 0, sizeof *out);
    if (!args || !args->plan || !args->store || !args->targets[0]) {
        snprintf(out->message, sizeof out->message, "cal_run_series: plan, store and a target are needed");
        return CAL_EINVAL;
    }
    static volatile int never;
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = args;
    c.p = *args->plan;
    c.out = out;
    c.st = args->store;
    c.stop = args->stop ? args->stop : &never;
    c.n_sides = args->targets[1] ? 2 : 1;
    for (int i = 0; i < c.n_sides; i++) {
        c.sides[i].t = args->targets[i];
        c.sides[i].started_ns = -1;
        if (c.n_sides == 2) snprintf(c.sides[i].name, sizeof c.sides[i].name, "%c", 'A' + i);
    }
    int rc = check_plan(&c);
    if (rc) return rc;
    const cal_run_plan *p = &c.p;
    cal_keep_init(&c.keep, keep_limit(p));

    if (p->telemetry) {
        cal_tel_config tc = {.interval_ns = cal_span_ns(p->interval_s > 0 ? p->interval_s : 0.25)};
        if (cal_tel_open(&c.tel, &tc) == CAL_OK) {
            cal_tel_tick(c.tel);
            if (cal_tel_pick_clock(c.tel, c.clock_metric, sizeof c.clock_metric)) c.clock_metric[0] = '\0';
            if (cal_tel_pick_power(c.tel, c.power_metric, sizeof c.power_metric)) c.power_metric[0] = '\0';
            cal_tel_start(c.tel);
        }
    }

    int result = CAL_OK;
    for (int i = 0; i < c.n_sides; i++)
        if (c.sides[i].t->ops->prepare) c.sides[i].t->ops->prepare(c.sides[i].t->self, p);
    for (int i = 0; i < c.n_sides; i++) {
        side *s = &c.sides[i];
        cal_run_event ev = {.kind = CAL_RUN_EV_STARTING, .side = s->name, .text = what(s),
                            .target_kind = s->t->ops->kind};
        emit(&c, &ev);
        rc = start_side(&c, s);
        if (rc) {
            result = stopped(&c) ? CAL_ECANCEL : rc == CAL_ECANCEL ? CAL_ECANCEL : CAL_EIO;
            goto cleanup;
        }
        rc = open_workloads(&c, s);
        if (rc) {
            result = rc;
            goto cleanup;
        }
    }

    if (turns_mode(p) && build_turns(&c, &c.sides[0], 1)) {
        result = CAL_EINVAL;
        goto cleanup;
    }
    char host_short[256];
    c.run.label = (char *)p->label;
    c.run.build = (char *)p->build;
    c.run.host_json = cal_host_json(host_short, sizeof host_short);
    c.run.target_json = target_json(&c);
    c.run.protocol_json = protocol_json(&c);
    c.run.telemetry_json = telemetry_json(&c);
    rc = cal_store_begin_run(c.st, &c.run);
    if (rc) {
        fail(&c, "cannot store the run: %s", cal_store_errmsg(c.st));
        c.run.id = 0;
        result = CAL_ESTORE;
        goto cleanup;
    }
    out->run_id = c.run.id;
    size_t ncl = p->rate > 0 ? (p->sweep ? (size_t)p->sweep_steps : 1) : p->n_conc;
    long total_shots = (long)p->shots + p->warmup;
    cal_run_event bev = {.kind = CAL_RUN_EV_BEGUN, .run_id = c.run.id, .total_shots = (int)total_shots,
                         .cells_per_shot = turns_mode(p) && c.sides[0].tr ? c.sides[0].tr->n_turns
                                                                         : (int)(p->n_prompt * ncl), .side = "",
                         .plan_warmup = p->warmup};
    emit(&c, &bev);

    /* a common start with the other clients of a sharded run */
    if (p->start_mono_ns > 0) {
        int64_t wait = p->start_mono_ns - cal_now_ns();
        if (wait < 0)
            note(&c, "", "the common start passed %.3f s before this client was ready: it "
                         "starts late", (double)-wait / 1e9);
        else
            cal_sleep_ns(wait, c.stop);
    }
    cal_cell_kind ckind = p->rate > 0 ? CAL_CELL_RATE
                          : p->n_conc > 1 ? CAL_CELL_CONCURRENCY
                          : p->n_prompt > 1 ? CAL_CELL_PROMPT_SWEEP : CAL_CELL_SHOTS;
    int64_t last_end = 0;
    for (long shot = 1; shot <= total_shots && !stopped(&c) && !c.target_failed; shot++) {
        for (int si = 0; si < c.n_sides && !stopped(&c) && !c.target_failed; si++) {
            /* A/B: alternate the order shot by shot so drift hits both */
            side *s = &c.sides[(c.n_sides == 2 && shot % 2 == 0) ? 1 - si : si];
            if (shot > 1 && p->cold) {
                s->t->ops->stop(s->t->self);
                if (start_side(&c, s)) {
                    c.target_failed = !stopped(&c);
                    break;
                }
            }
            int64_t rest_ns = 0;
            if (shot > 1 && si == 0 && p->rest_s > 0) {
                cal_run_event rev = {.kind = CAL_RUN_EV_REST, .side = s->name, .run_id = c.run.id,
                                     .shot = (int)shot, .seconds = p->rest_s};
                emit(&c, &rev);
                cal_sleep_ns(cal_span_ns(p->rest_s), c.stop);
                rest_ns = cal_now_ns() - last_end;
            } else if (shot > 1 && p->rest_s > 0) {
                rest_ns = cal_span_ns(p->rest_s);
            }
            if (stopped(&c)) break;
            cal_shot_kind kind;
            if (shot <= p->warmup) kind = CAL_SHOT_WARMUP;
            else if (s->fresh && s->t->fresh_on_start) kind = CAL_SHOT_COLD;
            else if (s->fresh) kind = CAL_SHOT_UNKNOWN;
            else if (rest_ns > 0) kind = CAL_SHOT_RESTED;
            else kind = CAL_SHOT_WARM;
            s->fresh = 0;
            if (turns_mode(p)) {
                /* shot 1 of side A was built before the run began (its
                 * scenario is in the protocol); every other is built now */
                if (!(shot == 1 && s == &c.sides[0] && s->tr) && build_turns(&c, s, (int)shot)) {
                    c.target_failed = 1;
                    break;
                }
                if (run_turns(&c, s, (int)shot, kind, rest_ns)) c.target_failed = 1;
                cal_traffic_free(&s->tr);
                last_end = cal_now_ns();
                continue;
            }
            for (size_t pi = 0; pi < p->n_prompt && !stopped(&c) && !c.target_failed; pi++) {
                /* a saturation sweep's steps are the rate cells, until
                 * goodput stops rising (saturation.h) */
                cal_sat sat;
                if (p->sweep) cal_sat_init(&sat, p->rate, p->sweep_max_rate, p->sweep_steps, NULL, 0);
                for (size_t ci = 0; ci < ncl && !stopped(&c) && !c.target_failed; ci++) {
                    int conc = p->rate > 0 ? (p->cap_given ? p->concurrency[0] : 0) : p->concurrency[ci];
                    double rate = p->rate;
                    if (p->sweep && !cal_sat_next(&sat, &rate)) break;
                    rc = run_cell(&c, s, pi, conc, rate, (int)shot, kind,
                                  ci == 0 && pi == 0 ? rest_ns : 0, ckind);
                    if (rc == CAL_ECANCEL) break;     /* stopped while preparing */
                    if (rc) {
                        c.target_failed = 1;
                        break;
                    }
                    if (p->sweep) cal_sat_record(&sat, c.last_goodput);
                }
                if (p->sweep && !stopped(&c) && !c.target_failed)
                    note(&c, s->name, "saturation sweep, %d tok: %s after %d step%s (%g to %g req/s)",
                         p->prompt_tokens[pi],
                         sat.saturated ? "goodput stopped rising" : "goodput did not level off by the last step",
                         sat.done, sat.done == 1 ? "" : "s", sat.rate[0], sat.rate[sat.done > 0 ? sat.done - 1 : 0]);
            }
            last_end = cal_now_ns();
        }
    }

    /* finish: load back what was stored, judge it, mark the run finished */
    if (c.tel) cal_tel_stop(c.tel);
    drain_telemetry(&c);
    out->status = stopped(&c) ? CAL_RUN_INTERRUPTED : c.target_failed ? CAL_RUN_FAILED : CAL_RUN_OK;
    if (out->status != CAL_RUN_FAILED) out->message[0] = '\0';
    cal_store_flush(c.st);
    cal_run_data *d = NULL;
    rc = cal_store_load_run(c.st, c.run.id, CAL_LOAD_CHUNKS, &d);
    char *verdicts = NULL;
    if (rc == CAL_OK) {
        char *vj = args->verdicts ? args->verdicts(args->verdicts_ud, d) : cal_run_verdicts(d);
        json_t *va = vj ? json_loads(vj, 0, NULL) : NULL;
        free(vj);
        if (!json_is_array(va)) { json_decref(va); va = json_array(); }
        if (turns_mode(p)) cache_notes(&c, va);
        if (c.itl_hist_cells) {     /* where the ITL figures came from, kept with the run */
            char kb[32], buf[400];
            cal_snprintf(buf, sizeof buf, "ITL percentiles in %d of the run's cells come from "
                         "histograms (within %.2f %%): keep_chunks %s kept no chunk timestamps for %lld "
                         "requests; TTFT, TPOT and E2E are from every request's record",
                         c.itl_hist_cells, CAL_HIST_REL_ERROR * 100,
                         cal_keep_name(keep_limit(p), kb, sizeof kb), (long long)c.chunks_dropped);
            json_array_append_new(va, json_string(buf));
        }
        if (c.target_failed && out->message[0]) {   /* why it failed: a note */
            cal_verdict nv;
            cal_verdict_init(&nv, CAL_VK_NOTE);
            snprintf(nv.text, sizeof nv.text, "%.*s", (int)sizeof nv.text - 1, out->message);
            char *nj = cal_verdicts_json(&nv, 1);
            json_t *na = nj ? json_loads(nj, 0, NULL) : NULL;
            free(nj);
            if (json_is_array(na)) json_array_extend(va, na);
            json_decref(na);
        }
        verdicts = json_dumps(va, JSON_COMPACT);
        json_decref(va);
    }
    if (cal_store_finish_run(c.st, c.run.id, out->status, verdicts)) {
        note(&c, "", "cannot mark run %lld finished: %s", (long long)c.run.id, cal_store_errmsg(c.st));
    }
    if (d) {
        d->run.status = out->status;
        free(d->run.verdicts_json);
        d->run.verdicts_json = verdicts;
        verdicts = NULL;
        /* a --duration deadline cuts the requests in flight at the end of
         * each cell: stored as cancelled, but not a failure */
        for (size_t i = 0; i < d->n_cells; i++)
            out->failed_requests += d->cells[i].sum.failed -
                                    (p->duration_s > 0 ? d->cells[i].sum.n_cancelled : 0);
        out->data = d;
        /* groups, pooled summaries and verdicts as data (stored ones included) */
        if (cal_analysis_run(d, &out->analysis) != CAL_OK) out->analysis = NULL;
    } else {
        note(&c, "", "cannot load run %lld back: %s", (long long)c.run.id, cal_store_errmsg(c.st));
    }
    free(verdicts);

cleanup:
    for (int i = 0; i < c.n_sides; i++) {
        side *s = &c.sides[i];
        for (size_t k = 0; k < MAX_LIST; k++) cal_workload_close(&s->wl[k]);
        cal_textgen_close(&s->tg);
        cal_traffic_free(&s->tr);
        if (s->t && s->t->ops && s->t->ops->stop) s->t->ops->stop(s->t->self);
    }
    cal_tel_close(&c.tel);
    cal_keep_destroy(&c.keep);
    free(c.run.host_json);
    free(c.run.target_json);
    free(c.run.protocol_json);
    free(c.run.telemetry_json);
    return result;
}
