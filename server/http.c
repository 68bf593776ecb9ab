/* caliper serve — the HTTP front (see server.h): libmicrohttpd (epoll on Linux)
 * with suspend/resume. A streaming response is a content-reader callback that
 * drains its job's bytes and suspends the connection when there are none; the
 * scheduler or pacer resumes it when it appends more. A client that goes away
 * marks its job cancelled, and the scheduler frees the sequence before the
 * next step. */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/gguf.h"
#include "caliper/utf8.h"
#include "engine/gguf.h"
#include "lib/util/conn_guard.h"
#include "server/encode.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/sched.h"
#include "server/server.h"

#define DEFAULT_MAX_BODY   (4u << 20)
#define STREAM_BLOCK_BYTES 4096
#define TOKENIZE_MAX       (1u << 20)   /* ids one /tokenize answer may hold */
#define IDLE_TIMEOUT_S     600          /* silence that closes a connection */
#define DEFAULT_HEAD_NS    (10LL * 1000000000)   /* request line + headers */
#define DEFAULT_BODY_NS    (60LL * 1000000000)   /* the body: 4 MiB at 70 KB/s */
#define ENCODE_WORKERS     2    /* threads that parse and tokenize bodies */
#define DEFAULT_SEND_NS    (30LL * 1000000000)   /* a reply's client takes nothing */
/* The kernel's send buffer of a connection (it doubles this). Autotuned, a
 * loopback socket whose client stopped reading took a whole 1.7 MB stream,
 * so such a client cost memory and was never seen to stall; 128 KiB is
 * hundreds of tokens of SSE and keeps a 4 MiB body at 100 ms RTT above
 * 1 MB/s. */
#define SEND_BUFFER_BYTES  (64 * 1024)
#define BODY_BLOCK_BYTES   (64 * 1024)   /* what a reply held in memory hands over at once */

enum route { R_NONE = 0, R_COMPLETIONS, R_CHAT, R_MODELS, R_HEALTH, R_METRICS,
             R_TOKENIZE, R_DETOKENIZE, R_PROFILE, R_APPLY_TEMPLATE };

static const struct { const char *path; const char *method; enum route r; } ROUTES[] = {
    {"/v1/completions",      "POST", R_COMPLETIONS},
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/models",           "GET",  R_MODELS},
    {"/health",              "GET",  R_HEALTH},
    {"/metrics",             "GET",  R_METRICS},
    {"/tokenize",            "POST", R_TOKENIZE},
    {"/apply-template",      "POST", R_APPLY_TEMPLATE},
    {"/detokenize",          "POST", R_DETOKENIZE},
    {"/profile",             "GET",  R_PROFILE},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

struct cal_server {
    cal_model_config  model;
    cal_chat_template tpl;
    char              model_name[128];
    char              preset[32];
    int64_t           n_params;
    size_t            max_body;
    cal_tokenizer    *tok;
    cal_sched        *sched;      /* engine mode */
    cal_pacer        *pacer;      /* pacing mode */
    cal_enc_pool     *enc;        /* parsing and tokenizing, off the event loop */
    cal_srv_metrics   m;
    struct MHD_Daemon *d;
    cal_guard        *guard;      /* request deadlines, free slots */
    int               port;
    atomic_int        stopping;
    atomic_int        n_active;   /* requests with a context (in flight) */
    atomic_ullong     next_id;
    uint64_t          seed_base;
};

/* Per-request state, MHD's req_cls. */
typedef struct conn_ctx {
    enum route r;
    cal_buf    body;
    int        too_big;
    cal_job   *job;        /* a non-streamed job we are waiting on */
    cal_enc_task *enc;     /* the body being parsed and tokenized, or NULL */
    int64_t    arrival_ns; /* when the body was complete */
} conn_ctx;

/* ---- responses ---------------------------------------------------------- */

/* A reply held in memory, handed to libmicrohttpd a block at a time: each
 * block it asks for is the client's progress (the send deadline), so a
 * large answer (/tokenize, a long non-streamed completion) read slowly but
 * steadily is not cut. */
typedef struct body_src {
    cal_guard             *guard;
    struct MHD_Connection *c;
    size_t                 n;
    char                   data[];
} body_src;

static ssize_t body_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    body_src *b = cls;
    if (pos >= b->n) return MHD_CONTENT_READER_END_OF_STREAM;
    cal_guard_reply_sending(b->guard, b->c);
    size_t k = b->n - pos < max ? b->n - (size_t)pos : max;
    memcpy(buf, b->data + pos, k);
    return (ssize_t)k;
}

static enum MHD_Result send_body(cal_server *s, struct MHD_Connection *c, unsigned status,
                                 const char *ctype, const char *body, size_t n)
{
    body_src *b = malloc(sizeof *b + n);
    if (!b) return MHD_NO;
    *b = (body_src){.guard = s->guard, .c = c, .n = n};
    memcpy(b->data, body, n);
    struct MHD_Response *r = MHD_create_response_from_callback(
        n, n < BODY_BLOCK_BYTES ? (n ? n : 1) : BODY_BLOCK_BYTES, body_reader, b, free);
    if (!r) { free(b); return MHD_NO; }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    cal_guard_reply_sending(s->guard, c);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(cal_server *srv, struct MHD_Connection *c, unsigned status,
                                 json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) return MHD_NO;
    enum MHD_Result ret = send_body(srv, c, status, "application/json", s, strlen(s));
    free(s);
    return ret;
}

static enum MHD_Result send_error(cal_server *s, struct MHD_Connection *c,
                                  const cal_srv_error *e)
{
    atomic_fetch_add_explicit(&s->m.requests_rejected, 1, memory_order_relaxed);
    char *body = cal_srv_error_json(e);
    if (!body) return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (e->status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (e->status == 405) {
        /* the one method the path accepts, as the message names it */
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                strstr(e->message, "(use GET)") ? "GET, HEAD" : "POST");
    }
    cal_guard_reply_sending(s->guard, c);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)e->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- streaming ---------------------------------------------------------- */

/* Producer side (scheduler or pacer), j->mu held: resume the connection. */
static void wake_conn(cal_job *j)
{
    if (j->conn) MHD_resume_connection((struct MHD_Connection *)j->conn);
    j->parked = 0;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    cal_job *j = cls;
    cal_server *s = j->wake_ctx;
    pthread_mutex_lock(&j->mu);
    if (s->pacer && cal_pacer_fill(s->pacer, j) != CAL_OK) {
        j->cancelled = 1;
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (j->out.len > 0) {
        size_t n = j->out.len < max ? j->out.len : max;
        memcpy(buf, j->out.data, n);
        cal_buf_consume(&j->out, n);
        /* the daemon asks for more once the client took what it had: the
         * send deadline starts again */
        cal_guard_reply_sending(s->guard, j->conn);
        pthread_mutex_unlock(&j->mu);
        return (ssize_t)n;
    }
    if (j->done || !j->conn) {
        pthread_mutex_unlock(&j->mu);
        return j->done ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    /* nothing yet: park until the producer appends (MHD's documented
     * pattern: suspend, then return 0); waiting for the engine is no
     * client's fault */
    cal_guard_reply_waiting(s->guard, j->conn);
    j->parked = 1;
    MHD_suspend_connection((struct MHD_Connection *)j->conn);
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static void stream_free(void *cls) { cal_job_unref(cls); }

/* ---- completions -------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The encode pool's hooks: the connection waits, suspended, while a worker
 * parses and tokenizes its body. */
static void park_enc(cal_enc_task *t) { MHD_suspend_connection((struct MHD_Connection *)t->conn); }
static void wake_enc(cal_enc_task *t) { MHD_resume_connection((struct MHD_Connection *)t->conn); }

/* Hand the body to the encode pool; the handler is called again once it
 * is done (finish_encode). */
static enum MHD_Result start_encode(cal_server *s, struct MHD_Connection *c, conn_ctx *cx,
                                    cal_enc_kind kind)
{
    cal_srv_error e;
    cx->arrival_ns = cal_now_ns();
    cal_enc_task *t = calloc(1, sizeof *t);
    if (!t) {
        cal_srv_error_set(&e, 500, "server_error", "", NULL, "out of memory");
        return send_error(s, c, &e);
    }
    *t = (cal_enc_task){.kind = kind, .body = cx->body.data ? cx->body.data : "",
                        .body_len = cx->body.len, .tok = s->tok,
                        .lim = {s->model.vocab, s->model.max_ctx, &s->tpl},
                        .max_ids = (int)TOKENIZE_MAX, .park = park_enc, .wake = wake_enc,
                        .conn = c};
    if (cal_enc_submit(s->enc, t) != CAL_OK) {
        free(t);
        cal_srv_error_set(&e, 503, "server_overloaded", "", "shutting_down",
                          "the server is shutting down");
        return send_error(s, c, &e);
    }
    cx->enc = t;
    return MHD_YES;
}

static enum MHD_Result handle_completion(cal_server *s, struct MHD_Connection *c,
                                         conn_ctx *cx)
{
    cal_enc_task *t = cx->enc;
    cal_srv_error e;
    cal_srv_api api = cx->r == R_CHAT ? CAL_SRV_CHAT : CAL_SRV_COMPLETIONS;
    cal_srv_request req = t->req;
    memset(&t->req, 0, sizeof t->req);
    int32_t *ids = t->ids;
    int n_ids = t->n_ids;
    t->ids = NULL;
    int64_t arrival = cx->arrival_ns;
    int rc;
    if (cal_srv_check_context(&req, n_ids, s->model.max_ctx, &e) != CAL_OK) {
        free(ids);
        cal_srv_request_free(&req);
        return send_error(s, c, &e);
    }
    uint64_t id = atomic_fetch_add(&s->next_id, 1) + 1;
    if (!req.has_seed) req.seed = mix64(s->seed_base ^ id);
    cal_job *j = cal_job_new(&req, ids, n_ids, s->model_name);
    if (!j) {
        free(ids);
        cal_srv_request_free(&req);
        cal_srv_error_set(&e, 500, "server_error", "", NULL, "out of memory");
        return send_error(s, c, &e);
    }
    snprintf(j->id, sizeof j->id, "%s-%llx", api == CAL_SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)mix64(s->seed_base + id));
    j->created_s = (int64_t)time(NULL);
    j->arrival_ns = arrival;
    j->conn = c;
    j->wake = wake_conn;
    j->wake_ctx = s;

    rc = atomic_load(&s->stopping) ? CAL_ECANCEL
         : s->pacer ? cal_pacer_submit(s->pacer, j) : cal_sched_submit(s->sched, j);
    if (rc != CAL_OK) {
        cal_job_unref(j);
        if (rc == CAL_EFULL)
            cal_srv_error_set(&e, 503, "server_overloaded", "", "queue_full",
                              "the queue is full (max-batch running, max-queue waiting); "
                              "retry later");
        else
            cal_srv_error_set(&e, 503, "server_overloaded", "", "shutting_down",
                              "the server is shutting down");
        return send_error(s, c, &e);
    }
    if (j->req.stream) {
        cal_job_ref(j);                        /* the response's reference */
        struct MHD_Response *r = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, STREAM_BLOCK_BYTES, stream_reader, j, stream_free);
        if (!r) {
            pthread_mutex_lock(&j->mu);
            j->cancelled = 1;
            j->conn = NULL;
            pthread_mutex_unlock(&j->mu);
            cal_job_unref(j);
            cal_job_unref(j);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        cx->job = j;                           /* the context's reference */
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    /* non-streamed: park until the job is done, answer when resumed */
    cx->job = j;
    pthread_mutex_lock(&j->mu);
    if (!j->done) {
        j->parked = 1;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&j->mu);
    return MHD_YES;
}

/* Called again after a non-streamed job's connection was resumed. */
static enum MHD_Result finish_nonstream(cal_server *s, struct MHD_Connection *c,
                                       conn_ctx *cx)
{
    cal_job *j = cx->job;
    pthread_mutex_lock(&j->mu);
    if (s->pacer) cal_pacer_fill(s->pacer, j);
    if (!j->done) {                 /* woken early: wait again */
        j->parked = 1;
        MHD_suspend_connection(c);
        pthread_mutex_unlock(&j->mu);
        return MHD_YES;
    }
    enum MHD_Result ret;
    if (j->out.len > 0 && j->finish != 3) {
        ret = send_body(s, c, MHD_HTTP_OK, "application/json", j->out.data, j->out.len);
    } else {
        pthread_mutex_unlock(&j->mu);
        cal_srv_error e;
        cal_srv_error_set(&e, 503, "server_overloaded", "", "shutting_down",
                          "the request was aborted before it finished");
        return send_error(s, c, &e);
    }
    pthread_mutex_unlock(&j->mu);
    return ret;
}

/* ---- the other endpoints ------------------------------------------------ */

static enum MHD_Result handle_models(cal_server *s, struct MHD_Connection *c)
{
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(s->model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer((json_int_t)time(NULL)));
    json_object_set_new(m, "owned_by", json_string("caliper"));
    json_object_set_new(m, "max_model_len", json_integer(s->model.max_ctx));
    json_object_set_new(m, "params", json_integer(s->n_params));
    json_object_set_new(m, "preset", s->preset[0] ? json_string(s->preset) : json_null());
    json_object_set_new(m, "pace_mode", json_boolean(s->pacer != NULL));
    json_t *shape = json_object();
    json_object_set_new(shape, "dim", json_integer(s->model.dim));
    json_object_set_new(shape, "layers", json_integer(s->model.n_layers));
    json_object_set_new(shape, "heads", json_integer(s->model.n_heads));
    json_object_set_new(shape, "kv_heads", json_integer(s->model.n_kv_heads));
    json_object_set_new(shape, "ffn", json_integer(s->model.ffn_dim));
    json_object_set_new(shape, "experts", json_integer(s->model.n_experts));
    json_object_set_new(shape, "top_k", json_integer(s->model.top_k));
    json_object_set_new(shape, "vocab", json_integer(s->model.vocab));
    json_object_set_new(shape, "context", json_integer(s->model.max_ctx));
    json_object_set_new(shape, "seed", json_integer((json_int_t)s->model.seed));
    json_object_set_new(m, "shape", shape);
    json_t *arr = json_array();
    json_array_append_new(arr, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", arr);
    return send_json(s, c, MHD_HTTP_OK, o);
}

static enum MHD_Result handle_metrics(cal_server *s, struct MHD_Connection *c)
{
    cal_buf b = CAL_BUF_INIT(1u << 20);
    if (cal_srv_metrics_render(&s->m, s->model_name, &b) != CAL_OK) {
        cal_buf_free(&b);
        return MHD_NO;
    }
    enum MHD_Result ret = send_body(s, c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                                    b.data, b.len);
    cal_buf_free(&b);
    return ret;
}

/* Text as a JSON string; a byte that is not UTF-8 (a vocabulary's BOS
 * text can be anything) becomes U+FFFD, as llama-server's JSON writer
 * replaces it, rather than the key going missing. */
static json_t *text_json(const char *t, size_t n)
{
    json_t *j = json_stringn(t, n);
    if (j)
        return j;
    cal_buf b = CAL_BUF_INIT(3 * n + 1);
    for (size_t i = 0; i < n;) {
        size_t ok = cal_utf8_check(t + i, n - i);
        cal_buf_append(&b, t + i, ok);
        i += ok;
        if (i < n) {
            cal_buf_append(&b, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    j = json_stringn(b.data ? b.data : "", b.len);
    cal_buf_free(&b);
    return j;
}

/* POST /apply-template: a chat body's messages as the served model's chat
 * template renders them, {"prompt": text} (llama-server's endpoint), so a
 * client can see exactly what a chat request costs in prompt tokens. */
static enum MHD_Result handle_apply_template(cal_server *s, struct MHD_Connection *c,
                                             conn_ctx *cx)
{
    cal_srv_error e;
    cal_srv_request req;
    cal_srv_limits lim = {s->model.vocab, s->model.max_ctx, &s->tpl};
    if (cal_srv_parse_request(CAL_SRV_CHAT, cx->body.data, cx->body.len, &lim, &req, &e) !=
        CAL_OK)
        return send_error(s, c, &e);
    json_t *o = json_object();
    json_object_set_new(o, "prompt", text_json(req.prompt ? req.prompt : "", req.prompt_len));
    json_object_set_new(o, "template", json_string(cal_tpl_name(s->tpl.kind)));
    cal_srv_request_free(&req);
    return send_json(s, c, MHD_HTTP_OK, o);
}

/* POST /tokenize: the answer the encode pool made. */
static enum MHD_Result handle_tokenize(cal_server *s, struct MHD_Connection *c, conn_ctx *cx)
{
    const cal_enc_task *t = cx->enc;
    atomic_fetch_add_explicit(&s->m.tokenize_requests, 1, memory_order_relaxed);
    return send_body(s, c, (unsigned)t->status, "application/json", t->answer, t->answer_len);
}

/* Called again once the encode pool resumed the connection: answer from
 * its result. */
static enum MHD_Result finish_encode(cal_server *s, struct MHD_Connection *c, conn_ctx *cx)
{
    cal_enc_task *t = cx->enc;
    if (!cal_enc_done(s->enc, t)) {   /* not ours yet: wait on */
        MHD_suspend_connection(c);
        return MHD_YES;
    }
    enum MHD_Result ret = t->rc != CAL_OK ? send_error(s, c, &t->err)
                          : cx->r == R_TOKENIZE ? handle_tokenize(s, c, cx)
                                                : handle_completion(s, c, cx);
    cal_enc_task_clear(t);
    free(t);
    cx->enc = NULL;
    return ret;
}

/* POST /detokenize {"tokens": [...]}: {"content": text}, each id's piece
 * as the vocabulary spells it (control tokens included, as llama-server
 * does), joined; a broken UTF-8 sequence becomes U+FFFD, as llama-server's
 * JSON writer replaces it. */
static enum MHD_Result handle_detokenize(cal_server *s, struct MHD_Connection *c, conn_ctx *cx)
{
    cal_srv_error e;
    int32_t *ids;
    int n;
    if (cal_srv_parse_detokenize(cx->body.data, cx->body.len, cal_tok_vocab(s->tok),
                                 (int)TOKENIZE_MAX, &ids, &n, &e) != CAL_OK)
        return send_error(s, c, &e);
    cal_buf b = CAL_BUF_INIT(s->max_body * 4);
    int rc = CAL_OK;
    cal_tok_state st = {{0}, 0, 1};
    char piece[CAL_TOK_DECODE_MAX];
    for (int i = 0; i <= n && rc == CAL_OK; i++) {
        int l = i < n ? cal_tok_decode(s->tok, &st, ids[i], piece, sizeof piece)
                      : cal_tok_flush(&st, piece, sizeof piece);
        rc = l < 0 ? l : cal_buf_append(&b, piece, (size_t)l);
    }
    free(ids);
    if (rc != CAL_OK) {
        cal_buf_free(&b);
        cal_srv_error_set(&e, rc == CAL_ENOMEM ? 500 : 413, "invalid_request_error", "tokens",
                          NULL, "tokens: the text is too long (%s)", cal_strerror(rc));
        return send_error(s, c, &e);
    }
    json_t *o = json_object();
    json_object_set_new(o, "content", json_stringn(b.data ? b.data : "", b.len));
    cal_buf_free(&b);
    return send_json(s, c, MHD_HTTP_OK, o);
}

static enum MHD_Result handle_profile(cal_server *s, struct MHD_Connection *c)
{
    char *p = cal_server_profile_json(s);
    if (!p) {
        cal_srv_error e;
        cal_srv_error_set(&e, 404, "not_found_error", "", NULL,
                          s->pacer ? "pacing mode runs no engine: there is no profile"
                                   : "the profile is not available");
        return send_error(s, c, &e);
    }
    enum MHD_Result ret = send_body(s, c, MHD_HTTP_OK, "application/json", p, strlen(p));
    free(p);
    return ret;
}

/* ---- dispatch ----------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    cal_server *s = cls;
    conn_ctx *cx = *req_cls;
    cal_srv_error e;
    if (!cx) {
        cx = calloc(1, sizeof *cx);
        if (!cx) return MHD_NO;
        cx->body.max = s->max_body;
        *req_cls = cx;
        atomic_fetch_add(&s->n_active, 1);
        cal_guard_headers_in(s->guard, c);
        int path_known = 0;
        for (size_t i = 0; i < N_ROUTES; i++) {
            if (strcmp(url, ROUTES[i].path)) continue;
            path_known = 1;
            if (!strcmp(method, ROUTES[i].method) ||
                (!strcmp(ROUTES[i].method, "GET") && !strcmp(method, "HEAD")))
                cx->r = ROUTES[i].r;
            else
                cal_srv_error_set(&e, 405, "invalid_request_error", "", "method_not_allowed",
                                  "%s %s: method not allowed (use %s)", method, url,
                                  ROUTES[i].method);
        }
        if (!path_known) {
            cal_srv_error_set(&e, 404, "not_found_error", "", NULL, "%s %s: no such endpoint",
                              method, url);
            cal_guard_request_in(s->guard, c);   /* answered: the reply is not cut */
            return send_error(s, c, &e);
        }
        if (cx->r == R_NONE) {
            cal_guard_request_in(s->guard, c);
            return send_error(s, c, &e);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->max_body) {
            cal_srv_error_set(&e, 413, "invalid_request_error", "", NULL,
                              "the body of %s bytes exceeds the limit of %zu", cl, s->max_body);
            cal_guard_request_in(s->guard, c);
            return send_error(s, c, &e);
        }
        return MHD_YES;
    }
    if (cx->job) return finish_nonstream(s, c, cx);
    if (cx->enc) return finish_encode(s, c, cx);
    if (*upload_data_size) {
        if (!cx->too_big && cal_buf_append(&cx->body, upload_data, *upload_data_size) != CAL_OK)
            cx->too_big = 1;
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* the whole request is in: from here on only the reply runs, a stream
     * as long as it takes */
    cal_guard_request_in(s->guard, c);
    if (cx->too_big) {
        cal_srv_error_set(&e, 413, "invalid_request_error", "", NULL,
                          "the body exceeds the limit of %zu bytes", s->max_body);
        return send_error(s, c, &e);
    }
    switch (cx->r) {
    case R_COMPLETIONS: return start_encode(s, c, cx, CAL_ENC_COMPLETIONS);
    case R_CHAT:     return start_encode(s, c, cx, CAL_ENC_CHAT);
    case R_MODELS:   return handle_models(s, c);
    case R_HEALTH: {
        json_t *o = json_object();
        json_object_set_new(o, "status", json_string(atomic_load(&s->stopping) ? "stopping" : "ok"));
        return send_json(s, c, MHD_HTTP_OK, o);
    }
    case R_METRICS:  return handle_metrics(s, c);
    case R_TOKENIZE: return start_encode(s, c, cx, CAL_ENC_TOKENIZE);
    case R_APPLY_TEMPLATE: return handle_apply_template(s, c, cx);
    case R_DETOKENIZE: return handle_detokenize(s, c, cx);
    case R_PROFILE:  return handle_profile(s, c);
    default:         return MHD_NO;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    cal_server *s = cls;
    conn_ctx *cx = *req_cls;
    cal_guard_reply_done(s->guard, c);
    if (!cx) return;
    if (cx->job) {
        cal_job *j = cx->job;
        pthread_mutex_lock(&j->mu);
        j->conn = NULL;
        j->parked = 0;
        if (!j->done) j->cancelled = 1;   /* the scheduler drops it before its next step */
        pthread_mutex_unlock(&j->mu);
        cal_job_unref(j);
    }
    if (cx->enc) {
        cal_enc_task_clear(cx->enc);
        free(cx->enc);
    }
    cal_buf_free(&cx->body);
    free(cx);
    *req_cls = NULL;
    atomic_fetch_sub(&s->n_active, 1);
}

/* ---- lifetime ----------------------------------------------------------- */

static int fail(char *why, size_t cap, int rc, const char *fmt, const char *a)
{
    if (why && cap) snprintf(why, cap, fmt, a ? a : "");
    return rc;
}

/* The vocabulary the server encodes with: --vocab's file; a GGUF model's
 * own (caliper's byte vocabulary the byte tokenizer, a SentencePiece or BPE
 * one through cal_tok_open_gguf); else the synthetic one of the preset. Its
 * ids must fit the model's embedding rows. */
static int open_tokenizer(const cal_server_config *c, cal_tokenizer **tok, char *why,
                          size_t why_len)
{
    const char *path = c->vocab_gguf ? c->vocab_gguf : c->model.weights[0] ? c->model.weights
                                                                          : NULL;
    if (!path)
        return cal_tok_open(c->model.vocab, tok);
    cal_gguf_model gm;
    char w[200];
    int bytes = 0;
    if (cal_gguf_read_model_file(path, &gm, w, sizeof w) == CAL_OK) {
        bytes = gm.byte_tokens && !strcmp(gm.tok_model, "llama") && gm.eos == CAL_GGUF_EOS;
        cal_gguf_model_free(&gm);
    }
    int rc = bytes ? cal_tok_open_bytes(c->model.vocab, CAL_GGUF_EOS, tok)
                   : cal_tok_open_gguf(path, tok, why, why_len);
    if (rc == CAL_OK && cal_tok_vocab(*tok) > c->model.vocab) {
        int nt = cal_tok_vocab(*tok);
        cal_tok_close(tok);
        return cal_why(why, why_len, CAL_EINVAL, "%s: %d tokens, more than the model's %d "
                       "embedding rows", path, nt, c->model.vocab);
    }
    return rc;
}

/* A model's template writes the vocabulary's own BOS and EOS text (its
 * bos_token, eos_token): caliper's byte vocabulary's are <s> and </s>. */
static void set_template_specials(cal_chat_template *t, const cal_tokenizer *tok)
{
    if (t->kind == CAL_TPL_CALIPER || t->bos[0])
        return;
    if (!strcmp(cal_tok_kind(tok), "bytes")) {
        snprintf(t->bos, sizeof t->bos, "<s>");
        snprintf(t->eos, sizeof t->eos, "</s>");
        return;
    }
    int len;
    const char *p = cal_tok_bos(tok) >= 0 ? cal_tok_piece(tok, cal_tok_bos(tok), &len) : NULL;
    if (p && len > 0 && (size_t)len < sizeof t->bos)
        memcpy(t->bos, p, (size_t)len), t->bos[len] = '\0';
    p = cal_tok_piece(tok, cal_tok_eos(tok), &len);
    if (p && len > 0 && (size_t)len < sizeof t->eos)
        memcpy(t->eos, p, (size_t)len), t->eos[len] = '\0';
    /* a vocabulary that adds BOS to every prompt: the text leaves it out */
    int32_t ids[2];
    t->bos_added = cal_tok_bos(tok) >= 0 &&
                   cal_tok_encode_ex(tok, "", 0, CAL_TOK_ADD_SPECIAL, ids, 2) >= 1 &&
                   ids[0] == cal_tok_bos(tok);
}

int cal_server_open(const cal_server_config *c, cal_server **out, char *why, size_t why_cap)
{
    *out = NULL;
    if (why && why_cap) why[0] = 0;
    const char *bad = NULL;
    if (cal_model_validate(&c->model, &bad) != CAL_OK)
        return fail(why, why_cap, CAL_EINVAL, "model shape: %s", bad);
    const char *name = c->model_name && *c->model_name ? c->model_name : c->model.name;
    if (strlen(name) >= sizeof ((cal_server *)0)->model_name)
        return fail(why, why_cap, CAL_EINVAL, "--model-name: \"%s\" is too long", name);
    for (const char *p = name; *p; p++)
        if (*p < 33 || *p > 126 || *p == '"' || *p == '\\')
            return fail(why, why_cap, CAL_EINVAL,
                        "--model-name: \"%s\" must be printable ASCII without spaces, "
                        "quotes or backslashes", name);
    if (c->port < 0 || c->port > 65535)
        return fail(why, why_cap, CAL_EINVAL, "--port: outside 0..65535%s", NULL);

    cal_server *s = calloc(1, sizeof *s);
    if (!s) return CAL_ENOMEM;
    s->model = c->model;
    s->tpl = c->chat_template;
    snprintf(s->model_name, sizeof s->model_name, "%s", name);
    snprintf(s->preset, sizeof s->preset, "%s", c->preset ? c->preset : "");
    s->n_params = cal_model_n_params(&c->model);
    s->max_body = c->max_body_bytes ? c->max_body_bytes : DEFAULT_MAX_BODY;
    s->seed_base = mix64((uint64_t)cal_wall_ns() ^ (uint64_t)cal_now_ns());
    int pace = c->pace_ns > 0;
    int rc = cal_srv_metrics_init(&s->m, pace);
    char twhy[300] = "";
    if (rc == CAL_OK)
        rc = open_tokenizer(c, &s->tok, twhy, sizeof twhy);
    if (rc != CAL_OK) {
        cal_server_close(&s);
        return fail(why, why_cap, rc, "tokenizer: %s", twhy[0] ? twhy : cal_strerror(rc));
    }
    set_template_specials(&s->tpl, s->tok);
    rc = cal_enc_open(ENCODE_WORKERS, &s->m, &s->enc);
    if (rc != CAL_OK) {
        cal_server_close(&s);
        return fail(why, why_cap, rc, "encode workers: %s", cal_strerror(rc));
    }
    if (pace) {
        rc = cal_pacer_open(c->pace_ns, &s->m, &s->pacer);
    } else {
        cal_sched_config sc = {
            .model = &s->model, .tok = s->tok,
            .max_batch = c->max_batch > 0 ? c->max_batch : 16,
            .max_queue = c->max_queue >= 0 ? c->max_queue : 256,
            .prefill_chunk = c->prefill_chunk > 0 ? c->prefill_chunk : 256,
            .metrics = &s->m};
        const char *ewhy = NULL;
        rc = cal_sched_open(&sc, &s->sched, &ewhy);
        if (rc != CAL_OK) {
            cal_server_close(&s);
            return fail(why, why_cap, rc, "engine: %s", ewhy ? ewhy : cal_strerror(rc));
        }
    }
    if (rc != CAL_OK) {
        cal_server_close(&s);
        return fail(why, why_cap, rc, "pacer: %s", cal_strerror(rc));
    }

    const char *host = c->host && *c->host ? c->host : "127.0.0.1";
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", c->port);
    if (getaddrinfo(host, portstr, &hints, &ai) != 0 || !ai) {
        cal_server_close(&s);
        return fail(why, why_cap, CAL_EINVAL, "--host: \"%s\" is not an address", host);
    }
#ifdef CAL_PLATFORM_POSIX   /* poll(): what any POSIX system has */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD;
#else   /* libmicrohttpd's best: epoll on Linux, poll elsewhere */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD;
#endif
    flags |= MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    unsigned threads = c->http_threads > 0 ? (unsigned)c->http_threads : pace ? 2u : 1u;
    unsigned conns = c->max_connections > 0 ? (unsigned)c->max_connections
                                            : pace ? 8192u : 1024u;
    /* libmicrohttpd's timeout counts silence only: one header line every
     * 2 s held a slot for its 600 s and more, and 1,100 silent or 1,030
     * trickling sockets locked /health out. The guard gives the head and
     * the body fixed deadlines and keeps a few slots free. No per-address
     * cap: caliper run opens its 2,048 and more streams from 127.0.0.1, so
     * a cap that spares it would spare a loopback flood too. */
    cal_guard_config gc = {
        .head_ns = c->header_timeout_ns > 0 ? c->header_timeout_ns : DEFAULT_HEAD_NS,
        .body_ns = c->body_timeout_ns > 0 ? c->body_timeout_ns : DEFAULT_BODY_NS,
        .keepalive_ns = (int64_t)IDLE_TIMEOUT_S * 1000000000,
        .send_ns = c->send_timeout_ns > 0 ? c->send_timeout_ns : DEFAULT_SEND_NS,
        .send_buffer_bytes = SEND_BUFFER_BYTES,
        .max_conn = conns};
    rc = cal_guard_open(&gc, &s->guard);
    if (rc != CAL_OK) {
        freeaddrinfo(ai);
        cal_server_close(&s);
        return fail(why, why_cap, rc, "connection guard: %s", cal_strerror(rc));
    }
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)cal_guard_notify, s->guard},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)cal_guard_daemon_limit(s->guard), NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096, NULL},
        {threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                            MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        cal_server_close(&s);
        return fail(why, why_cap, CAL_EIO,
                    "cannot listen on %s (address in use, or not this machine's)", host);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : c->port;
    *out = s;
    return CAL_OK;
}

int cal_server_port(const cal_server *s) { return s->port; }
int64_t cal_server_n_params(const cal_server *s) { return s->n_params; }
const char *cal_server_vocab_note(const cal_server *s) { return cal_tok_note(s->tok); }

const cal_engine *cal_server_engine(const cal_server *s)
{
    return s->sched ? cal_sched_engine(s->sched) : NULL;
}

char *cal_server_profile_json(cal_server *s)
{
    return s->sched ? cal_sched_profile(s->sched) : NULL;
}

void cal_server_close(cal_server **ps)
{
    cal_server *s = ps ? *ps : NULL;
    if (!s) return;
    atomic_store(&s->stopping, 1);
    /* end every stream first: no connection may stay suspended when the
     * daemon stops */
    if (s->sched) cal_sched_stop(s->sched);
    if (s->pacer) cal_pacer_stop(s->pacer);
    cal_enc_stop(s->enc);   /* a parked connection is resumed before MHD stops */
    if (s->d) {
        MHD_quiesce_daemon(s->d);
        for (int i = 0; i < 100 && atomic_load(&s->n_active) > 0; i++)
            cal_sleep_ns(10 * 1000 * 1000, NULL);
        MHD_stop_daemon(s->d);
        s->d = NULL;
    }
    cal_guard_close(&s->guard);   /* after the daemon: it reports each close */
    cal_sched_close(&s->sched);
    cal_pacer_close(&s->pacer);
    cal_enc_close(&s->enc);
    cal_tok_close(&s->tok);
    cal_srv_metrics_free(&s->m);
    free(s);
    *ps = NULL;
}
