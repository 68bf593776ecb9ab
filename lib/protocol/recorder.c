/* The recorder: shots measured from inside an engine's own loop, stored as
 * a run of cells like `caliper run` stores them (recorder.h). */
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/protocol.h"
#include "caliper/protocol_record.h"
#include "caliper/recorder.h"
#include "caliper/run.h"
#include "lib/util/c_locale.h"
#include "inproc_json.h"

#define MAX_REQS (1 << 20)

typedef struct rreq {
    cal_req_result r;
    int cap;           /* chunk_ns capacity */
    int open;
} rreq;

struct cal_recorder {
    pthread_mutex_t mu;
    cal_store *st;
    cal_recorder_config cfg;
    char *label, *build, *engine, *model, *content;
    int64_t run_id;
    int shot;            /* shots begun */
    int in_shot;
    cal_recorder_shot cur;
    cal_cell cell;
    rreq *reqs;
    size_t n, cap;
    int seq;
    int64_t last_end_ns;
    char err[256];
};

static int misuse(cal_recorder *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int misuse(cal_recorder *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return CAL_EINVAL;
}

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

static char *target_json(const cal_recorder *r)
{
    return cal_inproc_target_json(r->engine, r->model, "recorder",
                                  "recorded from inside the engine's own loop; "
                                  "timestamps taken by caliper in each call");
}

/* The stored protocol: what the engine's loop ran, as a record
 * (protocol_record.h) written by its one serializer. */
static char *protocol_json(const cal_recorder *r)
{
    const cal_recorder_config *c = &r->cfg;
    cal_protocol p;
    cal_protocol_init(&p);
    p.recorder = 1;
    p.noise_floor = c->noise_floor > 0 ? c->noise_floor : CAL_SHOT_NOISE_FLOOR;
    p.equivalence = c->equivalence > 0 && c->equivalence < 1 ? c->equivalence : CAL_JUDGE_EQUIV;
    p.concurrency[p.n_conc++] = c->concurrency > 0 ? c->concurrency : 1;
    p.prompt_tokens[p.n_prompt++] = c->prompt_tokens > 0 ? c->prompt_tokens : -1;
    snprintf(p.content, sizeof p.content, "%s", r->content ? r->content : "");
    p.unique_prompts = !!c->unique_prompts;
    p.max_tokens = c->max_tokens;
    snprintf(p.output_policy, sizeof p.output_policy, "%s", c->output_fixed ? "fixed" : "at most");
    p.streaming = 1;
    snprintf(p.api, sizeof p.api, "recorder");
    snprintf(p.order, sizeof p.order, "shots as the engine ran them, one cell each");
    char *s = NULL;
    cal_protocol_to_json(&p, &s, NULL);
    return s;
}

int cal_recorder_open(cal_store *st, const cal_recorder_config *cfg, cal_recorder **out)
{
    if (!out) return CAL_EINVAL;
    *out = NULL;
    if (!st || !cfg || !cfg->engine) return CAL_EINVAL;
    cal_recorder *r = calloc(1, sizeof *r);
    if (!r) return CAL_ENOMEM;
    pthread_mutex_init(&r->mu, NULL);
    r->st = st;
    r->cfg = *cfg;
    r->label = dup0(cfg->label);
    r->build = dup0(cfg->build);
    r->engine = dup0(cfg->engine);
    r->model = dup0(cfg->model);
    r->content = dup0(cfg->content);
    cal_run run;
    memset(&run, 0, sizeof run);
    char host_short[256];
    run.label = r->label;
    run.build = r->build;
    run.host_json = cal_host_json(host_short, sizeof host_short);
    run.target_json = target_json(r);
    run.protocol_json = protocol_json(r);
    run.telemetry_json = strdup("{\"sources\":[],\"clock_metric\":null,\"power_metric\":null,"
                                "\"summary\":\"off: the recorder samples no telemetry\"}");
    int rc = (!r->engine || !run.host_json || !run.target_json || !run.protocol_json ||
              !run.telemetry_json) ? CAL_ENOMEM : cal_store_begin_run(st, &run);
    free(run.host_json);
    free(run.target_json);
    free(run.protocol_json);
    free(run.telemetry_json);
    if (rc) {
        pthread_mutex_destroy(&r->mu);
        free(r->label); free(r->build); free(r->engine); free(r->model); free(r->content);
        free(r);
        return rc == CAL_ENOMEM ? rc : CAL_ESTORE;
    }
    r->run_id = run.id;
    *out = r;
    return CAL_OK;
}

int64_t cal_recorder_run_id(const cal_recorder *r) { return r ? r->run_id : 0; }
const char *cal_recorder_error(const cal_recorder *r) { return r ? r->err : "no recorder"; }

int cal_recorder_shot_begin(cal_recorder *r, const cal_recorder_shot *shot)
{
    if (!r) return CAL_EINVAL;
    pthread_mutex_lock(&r->mu);
    int rc = CAL_OK;
    if (r->in_shot) {
        rc = misuse(r, "shot_begin: shot %d has not ended", r->shot);
        goto out;
    }
    memset(&r->cur, 0, sizeof r->cur);
    if (shot) r->cur = *shot;
    r->shot++;
    r->in_shot = 1;
    r->n = 0;
    memset(&r->cell, 0, sizeof r->cell);
    r->cell.start_ns = cal_now_ns();
    r->cell.start_wall_ns = cal_wall_ns();
out:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int cal_recorder_request_begin(cal_recorder *r, int prompt_tokens)
{
    if (!r) return CAL_EINVAL;
    int64_t now = cal_now_ns();
    pthread_mutex_lock(&r->mu);
    int rc;
    if (!r->in_shot) {
        rc = misuse(r, "request_begin: no shot has begun");
        goto out;
    }
    if (r->n == MAX_REQS) {
        rc = misuse(r, "request_begin: more than %d requests in one shot", MAX_REQS);
        goto out;
    }
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        rreq *p = realloc(r->reqs, nc * sizeof *p);
        if (!p) { rc = CAL_ENOMEM; goto out; }
        r->reqs = p;
        r->cap = nc;
    }
    rreq *q = &r->reqs[r->n];
    memset(q, 0, sizeof *q);
    cal_req_result_init(&q->r);
    q->r.prompt_tokens = prompt_tokens >= 0 ? prompt_tokens : -1;
    q->r.sched_ns = q->r.send_ns = now;
    q->open = 1;
    rc = (int)r->n++;
out:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int cal_recorder_token(cal_recorder *r, int req, int n)
{
    if (!r) return CAL_EINVAL;
    int64_t now = cal_now_ns();
    pthread_mutex_lock(&r->mu);
    int rc = CAL_OK;
    if (!r->in_shot || req < 0 || (size_t)req >= r->n || !r->reqs[req].open) {
        rc = misuse(r, "token: request %d is not open in this shot", req);
        goto out;
    }
    if (n < 1) {
        rc = misuse(r, "token: %d is not a positive token count", n);
        goto out;
    }
    rreq *q = &r->reqs[req];
    if (q->r.n_chunks == q->cap) {
        int nc = q->cap ? q->cap * 2 : 64;
        int64_t *p = realloc(q->r.chunk_ns, (size_t)nc * sizeof *p);
        if (!p) { rc = CAL_ENOMEM; goto out; }
        q->r.chunk_ns = p;
        q->cap = nc;
    }
    q->r.chunk_ns[q->r.n_chunks++] = now;
    if (!q->r.first_token_ns) q->r.first_token_ns = now;
    q->r.last_token_ns = now;
    q->r.output_tokens = (q->r.output_tokens < 0 ? 0 : q->r.output_tokens) + n;
out:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void end_req(rreq *q, int64_t now, int status, const char *msg)
{
    q->r.end_ns = now;
    q->open = 0;
    if (status == CAL_OK) {
        q->r.status = CAL_REQ_OK;
        if (q->r.output_tokens < 0) q->r.output_tokens = 0;
    } else if (status == CAL_ECANCEL) {
        q->r.status = CAL_REQ_CANCELLED;
        q->r.error = strdup(msg ? msg : "cancelled");
    } else {
        q->r.status = CAL_REQ_STREAM_ERROR;
        q->r.error = strdup(msg ? msg : cal_strerror(status));
    }
}

int cal_recorder_request_end(cal_recorder *r, int req, int status, const char *msg)
{
    if (!r) return CAL_EINVAL;
    int64_t now = cal_now_ns();
    pthread_mutex_lock(&r->mu);
    int rc = CAL_OK;
    if (!r->in_shot || req < 0 || (size_t)req >= r->n || !r->reqs[req].open)
        rc = misuse(r, "request_end: request %d is not open in this shot", req);
    else
        end_req(&r->reqs[req], now, status, msg);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int shot_end_locked(cal_recorder *r)
{
    if (!r->in_shot) return misuse(r, "shot_end: no shot has begun");
    int64_t now = cal_now_ns();
    for (size_t i = 0; i < r->n; i++)
        if (r->reqs[i].open) end_req(&r->reqs[i], now, CAL_ECANCEL, "cancelled: the shot ended first");
    const cal_recorder_config *c = &r->cfg;
    const cal_recorder_shot *s = &r->cur;
    cal_cell *cell = &r->cell;
    cell->end_ns = now;
    cell->seq = r->seq++;
    cell->kind = CAL_CELL_SHOTS;
    cell->concurrency = s->concurrency > 0 ? s->concurrency : c->concurrency > 0 ? c->concurrency : 1;
    cell->rate = 0;
    int pt = s->prompt_tokens > 0 ? s->prompt_tokens : c->prompt_tokens;
    cell->prompt_tokens = pt > 0 ? pt : -1;
    cell->prompt_exact = 1;   /* the engine's own tokenizer counted it */
    cell->prompt_basis = CAL_PROMPT_ENGINE;
    cell->prompt_offset = -1;
    snprintf(cell->content, sizeof cell->content, "%s", r->content ? r->content : "");
    cell->unique_prompts = c->unique_prompts;
    cell->max_tokens = s->max_tokens > 0 ? s->max_tokens : c->max_tokens;
    cell->output_fixed = c->output_fixed;
    cell->shot_index = r->shot;
    if (s->warmup) cell->shot_kind = CAL_SHOT_WARMUP;
    else if (s->kind != CAL_SHOT_UNKNOWN) cell->shot_kind = s->kind;
    else if (r->shot == 1) cell->shot_kind = c->engine_fresh ? CAL_SHOT_COLD : CAL_SHOT_UNKNOWN;
    else cell->shot_kind = s->rest_before_ns > 0 ? CAL_SHOT_RESTED : CAL_SHOT_WARM;
    cell->rest_before_ns = s->rest_before_ns > 0 ? s->rest_before_ns : 0;
    cell->process_age_ns = c->engine_started_ns > 0 ? cell->start_ns - c->engine_started_ns : -1;
    cell->n_requests = (int64_t)r->n;
    cell->cpu_ns = 0;
    cell->chunks = 0;
    for (size_t i = 0; i < r->n; i++) cell->chunks += r->reqs[i].r.n_chunks;
    cell->send_lag_p99_ms = 0;
    cal_req_result *res = malloc((r->n ? r->n : 1) * sizeof *res);
    int rc = res ? CAL_OK : CAL_ENOMEM;
    if (res) {
        for (size_t i = 0; i < r->n; i++) res[i] = r->reqs[i].r;
        rc = cal_summary_compute(res, r->n, 0, cell->output_fixed ? cell->max_tokens : 0, &cell->sum);
        if (rc == CAL_OK) rc = cal_store_add_cell(r->st, r->run_id, cell, res, r->n);
        free(res);
    }
    for (size_t i = 0; i < r->n; i++) cal_req_result_free(&r->reqs[i].r);
    r->n = 0;
    r->in_shot = 0;
    r->last_end_ns = now;
    return rc;
}

int cal_recorder_shot_end(cal_recorder *r)
{
    if (!r) return CAL_EINVAL;
    pthread_mutex_lock(&r->mu);
    int rc = shot_end_locked(r);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int cal_recorder_close(cal_recorder **pr, cal_run_status status)
{
    if (!pr || !*pr) return CAL_EINVAL;
    cal_recorder *r = *pr;
    int rc = CAL_OK;
    pthread_mutex_lock(&r->mu);
    if (r->in_shot) rc = shot_end_locked(r);
    pthread_mutex_unlock(&r->mu);
    /* judge what was stored, as a run does */
    char *verdicts = NULL;
    cal_run_data *d = NULL;
    if (cal_store_load_run(r->st, r->run_id, CAL_LOAD_NO_REQS, &d) == CAL_OK) {
        verdicts = cal_run_verdicts(d);
        cal_run_data_free(&d);
    }
    int frc = cal_store_finish_run(r->st, r->run_id, status, verdicts ? verdicts : "[]");
    free(verdicts);
    if (!rc) rc = frc;
    pthread_mutex_destroy(&r->mu);
    free(r->reqs);
    free(r->label); free(r->build); free(r->engine); free(r->model); free(r->content);
    free(r);
    *pr = NULL;
    return rc;
}
