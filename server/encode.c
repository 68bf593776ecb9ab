/* caliper serve — request work off the HTTP event loop (see encode.h): a
 * FIFO of tasks and a few worker threads that parse and encode. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "server/encode.h"

struct cal_enc_pool {
    pthread_mutex_t  mu;
    pthread_cond_t   cv;
    cal_enc_task    *head, *tail;
    int              stopping;
    int              n_threads;
    pthread_t       *th;
    cal_srv_metrics *m;
};

/* ---- the work ----------------------------------------------------------- */

static void run_tokenize(cal_enc_task *t)
{
    char *text = NULL;
    size_t len = 0;
    int flags = 0;
    if (cal_srv_parse_tokenize(t->body, t->body_len, &text, &len, &t->err) != CAL_OK ||
        cal_srv_parse_tokenize_flags(t->body, t->body_len, &flags, &t->err) != CAL_OK) {
        free(text);
        t->rc = CAL_EINVAL;
        return;
    }
    /* at most one id per byte, three per invalid byte (a BPE vocabulary
     * reads it as U+FFFD, which may take three byte tokens), plus BOS, EOS
     * and SentencePiece's prefix space; the JSON answer is bounded by
     * max_ids ids */
    size_t most = (size_t)t->max_ids;
    int cap = (int)(len < most / 3 ? 3 * len : most) + 4;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int n = ids ? cal_tok_encode_ex(t->tok, text, len, flags, ids, cap) : CAL_ENOMEM;
    free(text);
    if (n < 0) {
        free(ids);
        if (n == CAL_ETOOBIG)
            cal_srv_error_set(&t->err, 413, "invalid_request_error", "prompt", NULL,
                              "prompt: more than %d tokens", t->max_ids);
        else
            cal_srv_error_set(&t->err, n == CAL_ENOMEM ? 500 : 400, "invalid_request_error",
                              "prompt", NULL, "the text cannot be tokenized (%s)",
                              cal_strerror(n));
        t->rc = n;
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++)
        if (json_array_append_new(arr, json_integer(ids[i])) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    free(ids);
    json_t *o = json_object();
    if (o && arr && json_object_set_new(o, "tokens", arr) == 0) {
        json_object_set_new(o, "count", json_integer(n));
        json_object_set_new(o, "max_model_len", json_integer(t->lim.max_ctx));
        t->answer = json_dumps(o, JSON_COMPACT);
    } else if (!o) {
        json_decref(arr);
    }
    json_decref(o);
    if (!t->answer) {
        cal_srv_error_set(&t->err, 500, "server_error", "", NULL, "out of memory");
        t->rc = CAL_ENOMEM;
        return;
    }
    t->answer_len = strlen(t->answer);
    t->status = 200;
    t->rc = CAL_OK;
}

static void run_completion(cal_enc_task *t)
{
    cal_srv_api api = t->kind == CAL_ENC_CHAT ? CAL_SRV_CHAT : CAL_SRV_COMPLETIONS;
    int rc = cal_srv_parse_request(api, t->body, t->body_len, &t->lim, &t->req, &t->err);
    if (rc != CAL_OK) {
        t->rc = rc;
        return;
    }
    if (t->req.prompt_ids) {
        t->ids = t->req.prompt_ids;
        t->n_ids = t->req.n_prompt_ids;
        t->req.prompt_ids = NULL;
        t->rc = CAL_OK;
        return;
    }
    int cap = t->lim.max_ctx;
    t->ids = malloc((size_t)cap * sizeof *t->ids);
    if (!t->ids) {
        cal_srv_error_set(&t->err, 500, "server_error", "", NULL, "out of memory");
        t->rc = CAL_ENOMEM;
        return;
    }
    /* as llama-server: BOS (EOS) where the vocabulary adds them, and
     * control tokens written in the prompt matched */
    int n = cal_tok_encode_ex(t->tok, t->req.prompt, t->req.prompt_len,
                              CAL_TOK_ADD_SPECIAL | CAL_TOK_PARSE_SPECIAL, t->ids, cap);
    if (n == CAL_ETOOBIG)
        n = cap;   /* no room left: the context check refuses it */
    if (n < 0) {
        cal_srv_error_set(&t->err, 400, "invalid_request_error",
                          api == CAL_SRV_CHAT ? "messages" : "prompt", NULL,
                          "the prompt cannot be tokenized");
        t->rc = n;
        return;
    }
    t->n_ids = n;
    t->rc = CAL_OK;
}

void cal_enc_run(cal_enc_task *t)
{
    t->rc = CAL_EINTERNAL;
    if (t->kind == CAL_ENC_TOKENIZE)
        run_tokenize(t);
    else
        run_completion(t);
}

void cal_enc_task_clear(cal_enc_task *t)
{
    if (!t)
        return;
    free(t->answer);
    t->answer = NULL;
    t->answer_len = 0;
    free(t->ids);
    t->ids = NULL;
    t->n_ids = 0;
    cal_srv_request_free(&t->req);
}

/* ---- the pool ----------------------------------------------------------- */

/* Hand t's result over: p->mu held. The task is the connection's again. */
static void finish(cal_enc_pool *p, cal_enc_task *t)
{
    t->done = 1;
    atomic_fetch_sub_explicit(&p->m->encoding, 1, memory_order_relaxed);
    if (t->wake)
        t->wake(t);
}

static void *worker(void *arg)
{
    cal_enc_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->head)
            break;   /* stopping, nothing left */
        cal_enc_task *t = p->head;
        p->head = t->next;
        if (!p->head)
            p->tail = NULL;
        t->next = NULL;
        pthread_mutex_unlock(&p->mu);
        cal_enc_run(t);
        pthread_mutex_lock(&p->mu);
        finish(p, t);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int cal_enc_open(int workers, cal_srv_metrics *m, cal_enc_pool **out)
{
    *out = NULL;
    if (workers < 1 || !m)
        return CAL_EINVAL;
    cal_enc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CAL_ENOMEM;
    p->th = calloc((size_t)workers, sizeof *p->th);
    if (!p->th) {
        free(p);
        return CAL_ENOMEM;
    }
    p->m = m;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&p->th[i], NULL, worker, p) != 0) {
            cal_enc_close(&p);
            return CAL_ENOMEM;
        }
        p->n_threads++;
    }
    *out = p;
    return CAL_OK;
}

int cal_enc_submit(cal_enc_pool *p, cal_enc_task *t)
{
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return CAL_ECANCEL;
    }
    t->done = 0;
    t->next = NULL;
    if (p->tail)
        p->tail->next = t;
    else
        p->head = t;
    p->tail = t;
    atomic_fetch_add_explicit(&p->m->encoding, 1, memory_order_relaxed);
    if (t->park)
        t->park(t);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return CAL_OK;
}

int cal_enc_done(cal_enc_pool *p, const cal_enc_task *t)
{
    pthread_mutex_lock(&p->mu);
    int d = t->done;
    pthread_mutex_unlock(&p->mu);
    return d;
}

void cal_enc_stop(cal_enc_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    cal_enc_task *t = p->head;
    p->head = p->tail = NULL;
    while (t) {
        cal_enc_task *next = t->next;
        t->next = NULL;
        t->rc = CAL_ECANCEL;
        cal_srv_error_set(&t->err, 503, "server_overloaded", "", "shutting_down",
                          "the server is shutting down");
        finish(p, t);
        t = next;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++)
        pthread_join(p->th[i], NULL);
    p->n_threads = 0;
}

void cal_enc_close(cal_enc_pool **pp)
{
    cal_enc_pool *p = pp ? *pp : NULL;
    if (!p)
        return;
    cal_enc_stop(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
    *pp = NULL;
}
