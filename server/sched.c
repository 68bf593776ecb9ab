/* caliper serve — the continuous-batching scheduler (see sched.h): one thread
 * owns the engine, admits waiting jobs into free KV slots, and runs one
 * engine step per iteration over every running sequence (decodes plus a
 * bounded prefill chunk), then samples, formats and hands each job its bytes. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "server/sched.h"

int cal_sched_plan(const cal_plan_seq *seqs, int n, int prefill_budget,
                   cal_plan_item *items)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (seqs[i].n_prefilled < seqs[i].n_prompt || seqs[i].n_gen == 0) continue;
        items[k].seq = i;
        items[k].pos = seqs[i].n_prompt + seqs[i].n_gen - 1;
        items[k].n_tokens = 1;
        items[k].logits = 1;
        k++;
    }
    int budget = prefill_budget > 0 ? prefill_budget : 1;
    for (int i = 0; i < n && budget > 0; i++) {
        int rem = seqs[i].n_prompt - seqs[i].n_prefilled;
        if (rem <= 0) continue;
        int take = rem < budget ? rem : budget;
        items[k].seq = i;
        items[k].pos = seqs[i].n_prefilled;
        items[k].n_tokens = take;
        items[k].logits = take == rem;
        budget -= take;
        k++;
    }
    /* a sequence is either decoding or prefilling, never both: one entry each */
    assert(k <= n);
    return k;
}

struct cal_sched {
    cal_engine          *eng;
    const cal_model_config *cfg;
    const cal_tokenizer *tok;
    cal_srv_metrics     *m;
    int                  max_batch, max_queue, chunk, vocab, eos;
    pthread_t            th;
    int                  started;     /* the thread was created */
    int                  joined;      /* closer only */
    pthread_mutex_t      mu;          /* guards the fields down to profile_out */
    pthread_cond_t       cv;
    cal_job             *wait_head, *wait_tail;
    int                  n_waiting;
    int                  n_running;   /* mirror of n_run, readable under mu */
    int                  stop;
    int                  paused;      /* start_paused, until cal_sched_release */
    int                  profile_want;
    char                *profile_out;
    pthread_cond_t       profile_cv;
    /* scheduler thread only */
    cal_job            **run;         /* [max_batch] in admission order */
    int                  n_run;
    int                 *free_slots;  /* [max_batch] stack of free KV slots */
    int                  n_free;
    float               *logits;      /* [max_batch][vocab] */
    cal_plan_seq        *pseq;        /* [max_batch] */
    cal_plan_item       *items;       /* [max_batch] */
    cal_step_entry      *entries;     /* [max_batch] */
    int                 *fin;         /* [max_batch] finish reason per item */
    unsigned char       *slot_mark;   /* [max_batch] scratch for check_slots */
    int                  exited;      /* the thread has left its loop (under mu) */
};

/* Hand bytes (or the end) to the HTTP side. j->mu held. */
static void wake_locked(cal_job *j)
{
    if (j->parked && j->wake) j->wake(j);
}

/* The invariants of the running set, scheduler thread only: every KV slot
 * is either free or held by exactly one running job. */
static void check_slots(const cal_sched *s)
{
#ifndef NDEBUG
    assert(s->n_run >= 0 && s->n_run <= s->max_batch);
    assert(s->n_free >= 0 && s->n_run + s->n_free == s->max_batch);
    memset(s->slot_mark, 0, (size_t)s->max_batch);
    for (int k = 0; k < s->n_free; k++) {
        int slot = s->free_slots[k];
        assert(slot >= 0 && slot < s->max_batch && !s->slot_mark[slot]);
        s->slot_mark[slot] = 1;
    }
    for (int i = 0; i < s->n_run; i++) {
        const cal_job *j = s->run[i];
        assert(j && j->slot >= 0 && j->slot < s->max_batch && !s->slot_mark[j->slot]);
        s->slot_mark[j->slot] = 1;
        assert(j->n_prefilled >= 0 && j->n_prefilled <= j->n_prompt);
        assert(j->n_gen >= 0 && j->n_gen <= j->max_tokens);
    }
#else
    (void)s;
#endif
}

/* KV positions held by the running set, published for /metrics. Called
 * after every change to it: a step, and a job leaving without one (a client
 * that went away leaves no step behind it to update the gauge). */
static void publish_kv(cal_sched *s)
{
    long long kv = 0;
    for (int i = 0; i < s->n_run; i++) kv += s->run[i]->n_prefilled + s->run[i]->n_gen;
    assert(kv >= 0 && (s->n_run > 0 || kv == 0));
    atomic_store_explicit(&s->m->kv_used, kv, memory_order_relaxed);
}

/* End a job: free its slot, write the end of its output, wake the reader,
 * drop the scheduler's reference. finish: 1 length, 2 stop, 3 abort. */
static void finish_job(cal_sched *s, int idx, int finish)
{
    assert(idx >= 0 && idx < s->n_run);
    assert(finish >= 1 && finish <= 3);
    cal_job *j = s->run[idx];
    memmove(&s->run[idx], &s->run[idx + 1], (size_t)(s->n_run - idx - 1) * sizeof *s->run);
    s->n_run--;
    assert(j->slot >= 0 && s->n_free < s->max_batch);
    if (j->slot >= 0) s->free_slots[s->n_free++] = j->slot;
    j->slot = -1;
    j->finish = finish;
    check_slots(s);
    /* the gauges move before the last bytes go out, so a client that reads
     * /metrics right after [DONE] sees its request gone */
    pthread_mutex_lock(&s->mu);
    s->n_running = s->n_run;
    pthread_mutex_unlock(&s->mu);
    atomic_store_explicit(&s->m->running, s->n_run, memory_order_relaxed);
    publish_kv(s);
    pthread_mutex_lock(&j->mu);
    int cancelled = j->cancelled;
    if (finish == 3 || cancelled)
        atomic_fetch_add_explicit(&s->m->requests_aborted, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&s->m->requests_ok, 1, memory_order_relaxed);
    if (!cancelled) {
        char tail[8];
        int n = cal_tok_flush(&j->tok_state, tail, sizeof tail);
        if (n > 0 && !j->req.stream) cal_buf_append(&j->text, tail, (size_t)n);
        if (j->req.stream) cal_fmt_stream_end(j);
        else cal_fmt_body(j);
    }
    j->done = 1;
    wake_locked(j);
    pthread_mutex_unlock(&j->mu);
    cal_job_unref(j);
}

/* A job that will never run (dropped from the queue): end it. */
static void drop_waiting(cal_sched *s, cal_job *j, int finish)
{
    pthread_mutex_lock(&j->mu);
    j->finish = finish;
    if (!j->cancelled) {
        if (j->req.stream) cal_fmt_stream_end(j);
        else cal_fmt_body(j);
    }
    j->done = 1;
    wake_locked(j);
    pthread_mutex_unlock(&j->mu);
    atomic_fetch_add_explicit(&s->m->requests_aborted, 1, memory_order_relaxed);
    cal_job_unref(j);
}

static void admit(cal_sched *s, cal_job *j)
{
    assert(s->n_free > 0 && s->n_run < s->max_batch);
    j->slot = s->free_slots[--s->n_free];
    j->n_prefilled = 0;
    j->n_gen = 0;
    j->rng = j->req.seed;
    memset(&j->tok_state, 0, sizeof j->tok_state);
    s->run[s->n_run++] = j;
    check_slots(s);
}

/* Sample one token for job j from logits and emit it. Returns the finish
 * reason (0 = keep going). */
static int sample_emit(cal_sched *s, cal_job *j, float *logits, int64_t t_ns)
{
    int allow_eos = !j->req.ignore_eos && j->n_gen >= j->req.min_tokens;
    if (!allow_eos && s->eos >= 0 && s->eos < s->vocab) logits[s->eos] = -INFINITY;
    cal_sampler_params sp = {j->req.temperature, j->req.top_p, j->req.seed};
    int32_t tok = cal_engine_sample(s->eng, logits, &sp, &j->rng);  /* profiled */
    j->n_gen++;
    j->last_tok_ns = t_ns;
    atomic_fetch_add_explicit(&s->m->generation_tokens, 1, memory_order_relaxed);
    if (allow_eos && tok == s->eos) return 2;
    j->last_tok = tok;
    char piece[CAL_TOK_DECODE_MAX];
    int n = cal_tok_decode(s->tok, &j->tok_state, tok, piece, sizeof piece);
    if (n < 0) n = 0;
    pthread_mutex_lock(&j->mu);
    int rc = CAL_OK;
    if (!j->cancelled) {
        if (j->req.stream) rc = cal_fmt_chunk(j, piece, (size_t)n, 0);
        else rc = cal_buf_append(&j->text, piece, (size_t)n);
    }
    if (rc != CAL_OK) j->cancelled = 1;   /* the client stopped reading: drop it */
    else wake_locked(j);
    pthread_mutex_unlock(&j->mu);
    return j->n_gen >= j->max_tokens ? 1 : 0;
}

static void step(cal_sched *s)
{
    for (int i = 0; i < s->n_run; i++) {
        cal_job *j = s->run[i];
        s->pseq[i].n_prompt = j->n_prompt;
        s->pseq[i].n_prefilled = j->n_prefilled;
        s->pseq[i].n_gen = j->n_gen;
    }
    int n = cal_sched_plan(s->pseq, s->n_run, s->chunk, s->items);
    int n_decode = 0;
    int64_t t0 = cal_now_ns();
    for (int i = 0; i < n; i++) {
        cal_plan_item *it = &s->items[i];
        assert(it->seq >= 0 && it->seq < s->n_run && it->n_tokens >= 1);
        cal_job *j = s->run[it->seq];
        assert(it->pos + it->n_tokens <= j->n_prompt + j->max_tokens);
        cal_step_entry *e = &s->entries[i];
        e->slot = j->slot;
        e->pos = it->pos;
        e->n_tokens = it->n_tokens;
        e->logits = it->logits ? s->logits + (size_t)i * (size_t)s->vocab : NULL;
        if (j->n_prefilled < j->n_prompt) {
            e->tokens = j->prompt + j->n_prefilled;
            if (j->n_prefilled == 0) j->prefill_start_ns = t0;
        } else {
            e->tokens = &j->last_tok;
            n_decode++;
        }
    }
    int rc = cal_engine_step(s->eng, s->entries, n);
    int64_t t1 = cal_now_ns();
    atomic_fetch_add_explicit(&s->m->steps, 1, memory_order_relaxed);
    if (n_decode > 0) cal_srv_metrics_step(s->m, t1 - t0, n_decode);
    /* Outcomes, newest index first so finish_job's removal keeps the rest valid. */
    int *fin = s->fin;
    for (int i = 0; i < n; i++) {
        cal_plan_item *it = &s->items[i];
        cal_job *j = s->run[it->seq];
        fin[i] = 0;
        if (rc != CAL_OK) { fin[i] = 3; continue; }
        if (j->n_prefilled < j->n_prompt) {
            j->n_prefilled += it->n_tokens;
            atomic_fetch_add_explicit(&s->m->prompt_tokens, it->n_tokens, memory_order_relaxed);
            if (j->n_prefilled == j->n_prompt) j->prefill_end_ns = t1;
        }
        if (it->logits) fin[i] = sample_emit(s, j, s->entries[i].logits, t1);
    }
    /* items are grouped decodes-then-prefills, so sort removals by seq index */
    for (int pass = s->n_run - 1; pass >= 0; pass--)
        for (int i = 0; i < n; i++)
            if (s->items[i].seq == pass && fin[i]) finish_job(s, pass, fin[i]);
    publish_kv(s);
}

static void *sched_main(void *arg)
{
    cal_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && (!s->wait_head || s->paused) && s->n_run == 0 && !s->profile_want)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->profile_want) {
            s->profile_out = cal_engine_profile_json(s->eng);
            s->profile_want = 0;
            pthread_cond_broadcast(&s->profile_cv);
        }
        if (s->stop) { pthread_mutex_unlock(&s->mu); break; }
        cal_job *drop = NULL;
        assert(s->n_waiting >= 0 && (s->n_waiting == 0) == (s->wait_head == NULL));
        while (s->wait_head && !s->paused && s->n_run < s->max_batch) {
            cal_job *j = s->wait_head;
            s->wait_head = j->next;
            if (!s->wait_head) s->wait_tail = NULL;
            j->next = NULL;
            s->n_waiting--;
            pthread_mutex_lock(&j->mu);
            int gone = j->cancelled;
            pthread_mutex_unlock(&j->mu);
            if (gone) { j->next = drop; drop = j; continue; }
            admit(s, j);
        }
        s->n_running = s->n_run;
        atomic_store_explicit(&s->m->waiting, s->n_waiting, memory_order_relaxed);
        pthread_mutex_unlock(&s->mu);
        atomic_store_explicit(&s->m->running, s->n_run, memory_order_relaxed);
        while (drop) { cal_job *j = drop; drop = j->next; drop_waiting(s, j, 3); }
        /* a client that went away frees its slot before the next step */
        for (int i = s->n_run - 1; i >= 0; i--) {
            cal_job *j = s->run[i];
            pthread_mutex_lock(&j->mu);
            int gone = j->cancelled;
            pthread_mutex_unlock(&j->mu);
            if (gone) finish_job(s, i, 3);
        }
        if (s->n_run > 0) step(s);
    }
    while (s->n_run > 0) finish_job(s, s->n_run - 1, 3);
    assert(s->n_free == s->max_batch);
    pthread_mutex_lock(&s->mu);
    cal_job *w = s->wait_head;
    s->wait_head = s->wait_tail = NULL;
    s->n_waiting = 0;
    pthread_mutex_unlock(&s->mu);
    atomic_store_explicit(&s->m->waiting, 0, memory_order_relaxed);
    while (w) { cal_job *j = w; w = j->next; drop_waiting(s, j, 3); }
    pthread_mutex_lock(&s->mu);
    s->exited = 1;
    pthread_cond_broadcast(&s->profile_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int cal_sched_open(const cal_sched_config *c, cal_sched **out, const char **why)
{
    *out = NULL;
    if (why) *why = NULL;
    if (c->max_batch < 1 || c->max_queue < 0 || c->prefill_chunk < 1 || !c->tok || !c->metrics)
        return CAL_EINVAL;
    cal_sched *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    s->m = c->metrics;
    s->tok = c->tok;
    s->max_batch = c->max_batch;
    s->max_queue = c->max_queue;
    s->chunk = c->prefill_chunk;
    s->paused = c->start_paused != 0;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->profile_cv, NULL);
    int rc = cal_engine_open(c->model, c->max_batch, c->max_batch + c->prefill_chunk, &s->eng);
    if (rc != CAL_OK) {
        if (why) cal_model_validate(c->model, why);
        cal_sched_close(&s);
        return rc;
    }
    s->cfg = cal_engine_config(s->eng);
    s->vocab = s->cfg->vocab;
    s->eos = cal_tok_eos(s->tok);
    size_t mb = (size_t)c->max_batch;
    s->run = calloc(mb, sizeof *s->run);
    s->free_slots = calloc(mb, sizeof *s->free_slots);
    s->logits = malloc(mb * (size_t)s->vocab * sizeof *s->logits);
    s->pseq = calloc(mb, sizeof *s->pseq);
    s->items = calloc(mb, sizeof *s->items);
    s->entries = calloc(mb, sizeof *s->entries);
    s->fin = calloc(mb, sizeof *s->fin);
    s->slot_mark = calloc(mb, 1);
    if (!s->fin || !s->slot_mark || !s->run || !s->free_slots || !s->logits || !s->pseq || !s->items ||
        !s->entries) {
        cal_sched_close(&s);
        return CAL_ENOMEM;
    }
    for (int i = c->max_batch - 1; i >= 0; i--) s->free_slots[s->n_free++] = i;
    s->m->kv_total = (long long)c->max_batch * s->cfg->max_ctx;
    if (pthread_create(&s->th, NULL, sched_main, s) != 0) {
        cal_sched_close(&s);
        return CAL_ENOMEM;
    }
    s->started = 1;
    *out = s;
    return CAL_OK;
}

int cal_sched_submit(cal_sched *s, cal_job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->stop) { pthread_mutex_unlock(&s->mu); return CAL_ECANCEL; }
    if (s->n_running + s->n_waiting >= s->max_batch + s->max_queue) {
        pthread_mutex_unlock(&s->mu);
        return CAL_EFULL;
    }
    cal_job_ref(j);
    j->next = NULL;
    if (s->wait_tail) s->wait_tail->next = j;
    else s->wait_head = j;
    s->wait_tail = j;
    s->n_waiting++;
    atomic_store_explicit(&s->m->waiting, s->n_waiting, memory_order_relaxed);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return CAL_OK;
}

void cal_sched_release(cal_sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->paused = 0;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

const cal_engine *cal_sched_engine(const cal_sched *s) { return s->eng; }

char *cal_sched_profile(cal_sched *s)
{
    char *p = NULL;
    pthread_mutex_lock(&s->mu);
    if (!s->stop && s->started) {
        s->profile_want = 1;
        s->profile_out = NULL;
        pthread_cond_signal(&s->cv);
        while (s->profile_want && !s->stop) pthread_cond_wait(&s->profile_cv, &s->mu);
        if (!s->profile_want) {
            p = s->profile_out;
            s->profile_out = NULL;
            pthread_mutex_unlock(&s->mu);
            return p;
        }
        s->profile_want = 0;
    }
    /* stopping: the engine is free once the thread has left its loop */
    while (s->started && !s->exited) pthread_cond_wait(&s->profile_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return cal_engine_profile_json(s->eng);
}

void cal_sched_stop(cal_sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->profile_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started && !s->joined) { pthread_join(s->th, NULL); s->joined = 1; }
}

void cal_sched_close(cal_sched **ps)
{
    cal_sched *s = ps ? *ps : NULL;
    if (!s) return;
    cal_sched_stop(s);
    cal_engine_close(&s->eng);
    free(s->run);
    free(s->free_slots);
    free(s->logits);
    free(s->pseq);
    free(s->items);
    free(s->entries);
    free(s->fin);
    free(s->slot_mark);
    free(s->profile_out);
    pthread_cond_destroy(&s->profile_cv);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    *ps = NULL;
}
