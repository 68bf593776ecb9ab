/* The server's own tokenizer over HTTP (POST /tokenize), so prompt lengths
 * are exact in the target's tokens. One curl handle, reused per call. */
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

struct cal_http_tokenizer {
    CURL *c;
    struct curl_slist *headers;
    char  url[600];
    char *model;
    cal_buf body;
    int   absent;      /* a 404/405/501 was seen: stop asking */
};

static size_t sink(char *p, size_t sz, size_t nm, void *ud)
{
    return cal_buf_append(ud, p, sz * nm) ? 0 : sz * nm;
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
    t->body.max = 16 << 20;
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
    curl_easy_setopt(t->c, CURLOPT_URL, t->url);
    curl_easy_setopt(t->c, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(t->c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->c, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(t->c, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(t->c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(t->c, CURLOPT_WRITEDATA, &t->body);
    *out = t;
    return CAL_OK;
}

int cal_http_tokenizer_count(void *ud, const char *text, int *n_tokens)
{
    cal_http_tokenizer *t = ud;
    if (t->absent) return CAL_EABSENT;
    json_t *req = json_object();
    if (t->model) json_object_set_new(req, "model", json_string(t->model));
    json_object_set_new(req, "prompt", json_string(text));
    json_object_set_new(req, "content", json_string(text));
    json_object_set_new(req, "add_special_tokens", json_false());
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) return CAL_ENOMEM;
    cal_buf_reset(&t->body);
    curl_easy_setopt(t->c, CURLOPT_POSTFIELDS, body);
    CURLcode cc = curl_easy_perform(t->c);
    free(body);
    long st = 0;
    curl_easy_getinfo(t->c, CURLINFO_RESPONSE_CODE, &st);
    if (cc != CURLE_OK) return CAL_ECONNECT;
    if (st == 404 || st == 405 || st == 501) {
        t->absent = 1;
        return CAL_EABSENT;
    }
    if (st < 200 || st > 299) return CAL_EHTTP;
    json_t *j = json_loadb(t->body.data ? t->body.data : "", t->body.len, 0, NULL);
    if (!j) return CAL_EPROTO;
    int rc = CAL_OK;
    json_t *cnt = json_object_get(j, "count");
    json_t *toks = json_object_get(j, "tokens");
    if (json_is_integer(cnt)) *n_tokens = (int)json_integer_value(cnt);
    else if (json_is_array(toks)) *n_tokens = (int)json_array_size(toks);
    else rc = CAL_EPROTO;
    json_decref(j);
    return rc;
}

int cal_http_tokenizer_retarget(cal_http_tokenizer *t, const char *base_url)
{
    if (!t || !base_url) return CAL_EINVAL;
    if (strlen(base_url) + sizeof "/tokenize" > sizeof t->url) return CAL_ETOOBIG;
    snprintf(t->url, sizeof t->url, "%s/tokenize", base_url);
    curl_easy_setopt(t->c, CURLOPT_URL, t->url);
    t->absent = 0;
    return CAL_OK;
}

void cal_http_tokenizer_close(cal_http_tokenizer **pt)
{
    if (!pt || !*pt) return;
    cal_http_tokenizer *t = *pt;
    curl_easy_cleanup(t->c);
    curl_slist_free_all(t->headers);
    cal_buf_free(&t->body);
    free(t->model);
    free(t);
    *pt = NULL;
}
