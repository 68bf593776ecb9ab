/* The server's own tokenizer over HTTP (POST /tokenize), so prompt lengths
 * are exact in the target's tokens. One curl handle for single calls, and a
 * pool of CAL_TOKENIZE_POOL handles on one curl multi for many texts at
 * once: preparing thousands of prompts is not thousands of round trips in
 * a row. */
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

#define BODY_MAX (16u << 20)   /* one /tokenize answer */

typedef struct slot {
    CURL   *c;
    cal_buf body;
    char   *req;      /* the request body in flight (owned) */
    size_t  index;    /* which text */
    int     busy;
} slot;

struct cal_http_tokenizer {
    CURL *c;
    cal_buf body;
    CURLM *multi;                    /* NULL until count_many first runs */
    slot   pool[CAL_TOKENIZE_POOL];
    struct curl_slist *headers;
    char  url[600];
    char *model;
    long  timeout_ms;
    int   absent;      /* a 404/405/501 was seen: stop asking */
    int   add_special; /* ask for the special tokens a prompt gets (BOS) too */
};

static size_t sink(char *p, size_t sz, size_t nm, void *ud)
{
    return cal_buf_append(ud, p, sz * nm) ? 0 : sz * nm;
}

static void setup(cal_http_tokenizer *t, CURL *c, cal_buf *body)
{
    curl_easy_setopt(c, CURLOPT_URL, t->url);
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
    if (!t->c) { free(t); return CAL_ENOMEM; }
    snprintf(t->url, sizeof t->url, "%s/tokenize", base_url);
    t->model = model ? strdup(model) : NULL;
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h = t->headers && api_key ? curl_slist_append(t->headers, auth) : t->headers;
    if (!h || (model && !t->model)) {
        cal_http_tokenizer_close(&t);
        return CAL_ENOMEM;
    }
    setup(t, t->c, &t->body);
    *out = t;
    return CAL_OK;
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

/* The answer of one finished call as JSON (*out, the caller decrefs). */
static int answer(cal_http_tokenizer *t, CURL *c, CURLcode cc, const cal_buf *body, json_t **out)
{
    long st = 0;
    *out = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    if (cc != CURLE_OK) return CAL_ECONNECT;
    if (st == 404 || st == 405 || st == 501) {
        t->absent = 1;
        return CAL_EABSENT;
    }
    if (st < 200 || st > 299) return CAL_EHTTP;
    *out = json_loadb(body->data ? body->data : "", body->len, 0, NULL);
    return *out ? CAL_OK : CAL_EPROTO;
}

static int count_of(const json_t *j, int *n_tokens)
{
    json_t *cnt = json_object_get(j, "count");
    json_t *toks = json_object_get(j, "tokens");
    if (json_is_integer(cnt)) *n_tokens = (int)json_integer_value(cnt);
    else if (json_is_array(toks)) *n_tokens = (int)json_array_size(toks);
    else return CAL_EPROTO;
    return CAL_OK;
}

/* One call on the single handle. */
static int call(cal_http_tokenizer *t, const char *text, json_t **out)
{
    *out = NULL;
    if (t->absent) return CAL_EABSENT;
    char *body = request_body(t, text);
    if (!body) return CAL_ENOMEM;
    cal_buf_reset(&t->body);
    curl_easy_setopt(t->c, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(t->c);
    free(body);
    return answer(t, t->c, cc, &t->body, out);
}

int cal_http_tokenizer_count(void *ud, const char *text, int *n_tokens)
{
    json_t *j;
    int rc = call(ud, text, &j);
    if (rc == CAL_OK) rc = count_of(j, n_tokens);
    json_decref(j);
    return rc;
}

int cal_http_tokenizer_ids(void *ud, const char *text, int32_t **ids, int *n)
{
    *ids = NULL;
    *n = 0;
    json_t *j;
    int rc = call(ud, text, &j);
    if (rc) return rc;
    json_t *toks = json_object_get(j, "tokens");
    size_t k = json_is_array(toks) ? json_array_size(toks) : 0;
    if (!json_is_array(toks) || k > (size_t)INT32_MAX) {
        json_decref(j);
        return json_is_integer(json_object_get(j, "count")) ? CAL_EABSENT : CAL_EPROTO;
    }
    int32_t *v = malloc((k ? k : 1) * sizeof *v);
    if (!v) { json_decref(j); return CAL_ENOMEM; }
    for (size_t i = 0; i < k && rc == CAL_OK; i++) {
        json_t *e = json_array_get(toks, i);
        if (json_is_object(e)) e = json_object_get(e, "id");   /* llama.cpp's with_pieces */
        if (!json_is_integer(e)) rc = CAL_EPROTO;
        else v[i] = (int32_t)json_integer_value(e);
    }
    json_decref(j);
    if (rc) { free(v); return rc; }
    *ids = v;
    *n = (int)k;
    return CAL_OK;
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
        setup(t, s->c, &s->body);
        curl_easy_setopt(s->c, CURLOPT_PRIVATE, s);
    }
    return CAL_OK;
}

int cal_http_tokenizer_count_many(void *ud, const char *const *texts, size_t n, int *counts)
{
    cal_http_tokenizer *t = ud;
    if (t->absent) return CAL_EABSENT;
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
            json_t *j = NULL;
            int r = answer(t, s->c, cc, &s->body, &j);
            if (r == CAL_OK) r = count_of(j, &counts[s->index]);
            json_decref(j);
            if (r && !rc) rc = r;
            free(s->req);
            s->req = NULL;
            s->busy = 0;
            busy--;
            done++;
        }
        if (busy > 0 && curl_multi_poll(t->multi, NULL, 0, 100, NULL) != CURLM_OK && !rc)
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
