/* The server's own tokenizer over HTTP (POST /tokenize), so prompt lengths
 * are exact in the target's tokens. One curl handle for single calls, and a
 * pool of CAL_TOKENIZE_POOL handles on one curl multi for many texts at
 * once: preparing thousands of prompts is not thousands of round trips in
 * a row. Every call has an overall deadline and reads the caller's stop
 * flag while it waits; after a call times out, cannot connect or is
 * stopped, the tokenizer answers every later call with that failure at
 * once, so a run falls back after one deadline, not one per prompt. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/auth.h"
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/global.h"
#include "caliper/workload.h"
#include "lib/util/c_locale.h"
#include "lib/util/curl_wait.h"

#define BODY_MAX (16u << 20)   /* one /tokenize answer */

typedef struct slot {
    CURL   *c;
    cal_buf body;
    char   *req;      /* the request body in flight (owned) */
    size_t  index;    /* which text */
    int     busy;
    char    err[CURL_ERROR_SIZE];
} slot;

struct cal_http_tokenizer {
    CURL *c;
    cal_buf body;
    char  err[CURL_ERROR_SIZE];      /* c's */
    CURLM *single;                   /* c's multi, so a stop ends its wait */
    CURLM *multi;                    /* NULL until count_many first runs */
    slot   pool[CAL_TOKENIZE_POOL];
    struct curl_slist *headers;
    char  url[600];
    char *model;
    long  timeout_ms;
    int   absent;      /* a 404/405/501 was seen: stop asking */
    int   failed;      /* a call timed out, could not connect or was stopped:
                          every later call fails so at once */
    volatile int *stop;   /* the caller's Ctrl-C flag, or NULL */
    char  why[256];    /* what the failure was */
    int   add_special; /* ask for the special tokens a prompt gets (BOS) too */
};

static size_t sink(char *p, size_t sz, size_t nm, void *ud)
{
    return cal_buf_append(ud, p, sz * nm) ? 0 : sz * nm;
}

static void setup(cal_http_tokenizer *t, CURL *c, cal_buf *body, char *err)
{
    curl_easy_setopt(c, CURLOPT_URL, t->url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, t->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, t->timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
}

int cal_http_tokenizer_open(const char *base_url, const char *model, const char *api_key,
                            int64_t timeout_ns, cal_http_tokenizer **out)
{
    long ms = timeout_ns > 0 ? (long)(timeout_ns / 1000000) : 30000L;
    if (ms < 1) ms = 1;
    *out = NULL;
    if (!base_url) return CAL_EINVAL;
    char auth[CAL_AUTH_HEADER_MAX];
    int rc = api_key ? cal_auth_header(api_key, auth, sizeof auth) : CAL_OK;
    if (!rc) rc = cal_global_init();
    if (rc) return rc;
    cal_http_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return CAL_ENOMEM;
    t->body.max = BODY_MAX;
    t->timeout_ms = ms;
    t->c = curl_easy_init();
    t->single = curl_multi_init();
    if (!t->c || !t->single) {
        if (t->c) curl_easy_cleanup(t->c);
        if (t->single) curl_multi_cleanup(t->single);
        free(t);
        return CAL_ENOMEM;
    }
    snprintf(t->url, sizeof t->url, "%s/tokenize", base_url);
    t->model = model ? strdup(model) : NULL;
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h = t->headers && api_key ? curl_slist_append(t->headers, auth) : t->headers;
    if (!h || (model && !t->model)) {
        cal_http_tokenizer_close(&t);
        return CAL_ENOMEM;
    }
    setup(t, t->c, &t->body, t->err);
    *out = t;
    return CAL_OK;
}

void cal_http_tokenizer_set_stop(cal_http_tokenizer *t, volatile int *stop)
{
    if (t) t->stop = stop;
}

const char *cal_http_tokenizer_why(const cal_http_tokenizer *t)
{
    return t && t->failed && t->why[0] ? t->why : NULL;
}

/* {"model":…, "prompt": text, "content": text, "add_special_tokens": false,
 * "add_special": false} (vLLM's and llama.cpp's names; true while
 * cal_http_tokenizer_specials asks) (malloc'd; NULL on ENOMEM). */
static char *request_body(const cal_http_tokenizer *t, const char *text)
{
    json_t *req = json_object();
    if (t->model) json_object_set_new(req, "model", json_string(t->model));
    json_object_set_new(req, "prompt", json_string(text));
    json_object_set_new(req, "content", json_string(text));
    json_object_set_new(req, "add_special_tokens", json_boolean(t->add_special));
    json_object_set_new(req, "add_special", json_boolean(t->add_special));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

/* A transfer that did not finish: what happened, in words a note can
 * carry, and the failure every later call returns. A trickling answer
 * gets no low-speed pass: the deadline is on the whole call. */
static int transfer_failed(cal_http_tokenizer *t, CURL *c, CURLcode cc, const cal_buf *body,
                           const char *err)
{
    long st = 0;
    curl_off_t connected = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connected);
    double secs = (double)t->timeout_ms / 1000.0;
    int rc;
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        rc = CAL_ECANCEL;
        cal_snprintf(t->why, sizeof t->why, "stopped while waiting for POST /tokenize");
    } else if (cc == CURLE_OPERATION_TIMEDOUT && !connected) {
        rc = CAL_ETIMEDOUT;
        cal_snprintf(t->why, sizeof t->why, "POST /tokenize could not connect within %g s", secs);
    } else if (cc == CURLE_OPERATION_TIMEDOUT && !st && !body->len) {
        rc = CAL_ETIMEDOUT;
        cal_snprintf(t->why, sizeof t->why, "POST /tokenize timed out after %g s with no answer",
                     secs);
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        rc = CAL_ETIMEDOUT;
        cal_snprintf(t->why, sizeof t->why, "POST /tokenize timed out after %g s: the answer "
                     "came too slowly (HTTP %ld, %zu bytes of its body in %g s)",
                     secs, st, body->len, secs);
    } else if (cc == CURLE_WRITE_ERROR && body->len >= body->max) {
        rc = CAL_ETOOBIG;
        cal_snprintf(t->why, sizeof t->why, "the POST /tokenize answer is over %zu bytes",
                     body->max);
    } else {
        rc = CAL_ECONNECT;
        cal_snprintf(t->why, sizeof t->why, "POST /tokenize failed: %s",
                     err && err[0] ? err : curl_easy_strerror(cc));
    }
    t->failed = rc;
    return rc;
}

/* A finished call: CAL_OK when the server answered 2xx (its body in
 * *body), else what went wrong. */
static int answer(cal_http_tokenizer *t, CURL *c, CURLcode cc, const cal_buf *body,
                  const char *err)
{
    long st = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    if (cc != CURLE_OK) return transfer_failed(t, c, cc, body, err);
    if (st == 404 || st == 405 || st == 501) {
        t->absent = 1;
        return CAL_EABSENT;
    }
    if (st < 200 || st > 299) return CAL_EHTTP;
    return CAL_OK;
}

int cal_tokenize_answer(const char *body, size_t len, int *count, int32_t **ids, int *n)
{
    *count = -1;
    if (ids) { *ids = NULL; *n = 0; }
    json_t *j = json_loadb(body ? body : "", len, 0, NULL);
    if (!json_is_object(j)) { json_decref(j); return CAL_EPROTO; }
    json_t *cnt = json_object_get(j, "count"), *toks = json_object_get(j, "tokens");
    size_t k = json_array_size(toks);
    int rc = CAL_OK;
    if ((!cnt && !toks) || (toks && !json_is_array(toks)) || k > INT32_MAX ||
        (cnt && !(json_is_integer(cnt) && json_integer_value(cnt) >= 0 &&
                  json_integer_value(cnt) <= INT32_MAX)) ||
        (cnt && toks && (size_t)json_integer_value(cnt) != k))
        rc = CAL_EPROTO;   /* a count that is no count, or that its tokens deny */
    else
        *count = cnt ? (int)json_integer_value(cnt) : (int)k;
    if (rc == CAL_OK && ids && !toks) rc = CAL_EABSENT;   /* a count alone */
    int32_t *v = NULL;
    if (rc == CAL_OK && ids && !(v = malloc((k ? k : 1) * sizeof *v))) rc = CAL_ENOMEM;
    for (size_t i = 0; rc == CAL_OK && toks && i < k; i++) {
        json_t *e = json_array_get(toks, i);
        if (json_is_object(e)) e = json_object_get(e, "id");   /* llama.cpp's with_pieces */
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX)
            rc = CAL_EPROTO;   /* an id no vocabulary has: the answer is not one */
        else if (v) v[i] = (int32_t)json_integer_value(e);
    }
    json_decref(j);
    if (rc) { free(v); *count = -1; return rc; }
    if (ids) { *ids = v; *n = (int)k; }
    return CAL_OK;
}

/* One call on the single handle: its body in t->body. */
static int call(cal_http_tokenizer *t, const char *text)
{
    if (t->absent) return CAL_EABSENT;
    if (t->failed) return t->failed;
    char *body = request_body(t, text);
    if (!body) return CAL_ENOMEM;
    cal_buf_reset(&t->body);
    t->err[0] = '\0';
    curl_easy_setopt(t->c, CURLOPT_POSTFIELDS, body);
    CURLcode cc = cal_curl_perform(t->single, t->c, t->stop, NULL);
    free(body);
    return answer(t, t->c, cc, &t->body, t->err);
}

int cal_http_tokenizer_count(void *ud, const char *text, int *n_tokens)
{
    cal_http_tokenizer *t = ud;
    int rc = call(t, text);
    return rc ? rc : cal_tokenize_answer(t->body.data, t->body.len, n_tokens, NULL, NULL);
}

int cal_http_tokenizer_ids(void *ud, const char *text, int32_t **ids, int *n)
{
    cal_http_tokenizer *t = ud;
    *ids = NULL;
    *n = 0;
    int count, rc = call(t, text);
    return rc ? rc : cal_tokenize_answer(t->body.data, t->body.len, &count, ids, n);
}

static int pool_open(cal_http_tokenizer *t)
{
    if (t->multi) return CAL_OK;
    t->multi = curl_multi_init();
    if (!t->multi) return CAL_ENOMEM;
    for (int i = 0; i < CAL_TOKENIZE_POOL; i++) {
        slot *s = &t->pool[i];
        s->body.max = BODY_MAX;
        if (!(s->c = curl_easy_init())) return CAL_ENOMEM;
        setup(t, s->c, &s->body, s->err);
        curl_easy_setopt(s->c, CURLOPT_PRIVATE, s);
    }
    return CAL_OK;
}

int cal_http_tokenizer_count_many(void *ud, const char *const *texts, size_t n, int *counts)
{
    cal_http_tokenizer *t = ud;
    if (t->absent) return CAL_EABSENT;
    if (t->failed) return t->failed;
    if (n == 0) return CAL_OK;
    int rc = pool_open(t);
    if (rc) return rc;
    size_t next = 0, done = 0;
    int busy = 0;
    while (done < n) {
        /* keep every free handle busy while texts are left and all is well */
        for (int i = 0; i < CAL_TOKENIZE_POOL && next < n && rc == CAL_OK; i++) {
            slot *s = &t->pool[i];
            if (s->busy) continue;
            if (!(s->req = request_body(t, texts[next]))) { rc = CAL_ENOMEM; break; }
            cal_buf_reset(&s->body);
            s->err[0] = '\0';
            curl_easy_setopt(s->c, CURLOPT_POSTFIELDS, s->req);
            if (curl_multi_add_handle(t->multi, s->c) != CURLM_OK) {
                free(s->req);
                s->req = NULL;
                rc = CAL_ENOMEM;
                break;
            }
            s->index = next++;
            s->busy = 1;
            busy++;
        }
        if (rc && busy == 0) break;
        if (rc) n = next;      /* a failure: no new calls, wait for those in flight */
        if (t->stop && *t->stop) {   /* Ctrl-C: leave those in flight */
            for (int i = 0; i < CAL_TOKENIZE_POOL; i++) {
                slot *s = &t->pool[i];
                if (!s->busy) continue;
                curl_multi_remove_handle(t->multi, s->c);
                free(s->req);
                s->req = NULL;
                s->busy = 0;
            }
            t->failed = CAL_ECANCEL;
            cal_snprintf(t->why, sizeof t->why, "stopped while waiting for POST /tokenize");
            return CAL_ECANCEL;
        }
        int running = 0;
        if (curl_multi_perform(t->multi, &running) != CURLM_OK) { if (!rc) rc = CAL_ECONNECT; }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(t->multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            slot *s = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            CURLcode cc = m->data.result;
            curl_multi_remove_handle(t->multi, s->c);
            int r = answer(t, s->c, cc, &s->body, s->err);
            if (r == CAL_OK)
                r = cal_tokenize_answer(s->body.data, s->body.len, &counts[s->index], NULL, NULL);
            if (r && !rc) rc = r;
            free(s->req);
            s->req = NULL;
            s->busy = 0;
            busy--;
            done++;
        }
        if (busy > 0 && curl_multi_poll(t->multi, NULL, 0, CAL_CURL_WAIT_MS, NULL) != CURLM_OK && !rc)
            rc = CAL_ECONNECT;
        if (rc && busy == 0) break;
    }
    return rc;
}

int cal_http_tokenizer_retarget(cal_http_tokenizer *t, const char *base_url)
{
    if (!t || !base_url) return CAL_EINVAL;
    if (strlen(base_url) + sizeof "/tokenize" > sizeof t->url) return CAL_ETOOBIG;
    snprintf(t->url, sizeof t->url, "%s/tokenize", base_url);
    curl_easy_setopt(t->c, CURLOPT_URL, t->url);
    for (int i = 0; t->multi && i < CAL_TOKENIZE_POOL; i++)
        if (t->pool[i].c) curl_easy_setopt(t->pool[i].c, CURLOPT_URL, t->url);
    t->absent = 0;
    if (t->failed != CAL_ECANCEL) {   /* a new engine gets a new chance; a stop stays */
        t->failed = 0;
        t->why[0] = '\0';
    }
    return CAL_OK;
}

void cal_http_tokenizer_close(cal_http_tokenizer **pt)
{
    if (!pt || !*pt) return;
    cal_http_tokenizer *t = *pt;
    for (int i = 0; i < CAL_TOKENIZE_POOL; i++) {
        slot *s = &t->pool[i];
        if (!s->c) continue;
        if (s->busy && t->multi) curl_multi_remove_handle(t->multi, s->c);
        curl_easy_cleanup(s->c);
        cal_buf_free(&s->body);
        free(s->req);
    }
    if (t->multi) curl_multi_cleanup(t->multi);
    if (t->single) curl_multi_cleanup(t->single);
    curl_easy_cleanup(t->c);
    curl_slist_free_all(t->headers);
    cal_buf_free(&t->body);
    free(t->model);
    free(t);
    *pt = NULL;
}

int cal_http_tokenizer_specials(void *ud, const char *text, int *n_special)
{
    cal_http_tokenizer *t = ud;
    int with = 0, without = 0;
    t->add_special = 1;
    int rc = cal_http_tokenizer_count(t, text, &with);
    t->add_special = 0;
    if (rc == CAL_OK) rc = cal_http_tokenizer_count(t, text, &without);
    if (rc == CAL_OK && (with < without || with - without > 64)) rc = CAL_EPROTO;
    if (rc == CAL_OK) *n_special = with - without;
    return rc;
}
