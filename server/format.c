/* caliper serve — jobs' lifetime and their output: SSE chunks, the end of a
 * stream (finish_reason, timings, usage, [DONE]) and non-streamed bodies, all
 * with OpenAI field names and a llama.cpp-style "timings" object. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "server/job.h"

cal_job *cal_job_new(cal_srv_request *req, int32_t *prompt, int n_prompt,
                     const char *model)
{
    cal_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    atomic_init(&j->refs, 1);
    pthread_mutex_init(&j->mu, NULL);
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->prompt = prompt;
    j->n_prompt = n_prompt;
    j->max_tokens = j->req.max_tokens;
    j->model = model;
    j->slot = -1;
    j->out.max = CAL_JOB_OUT_MAX;
    j->text.max = CAL_JOB_OUT_MAX;
    return j;
}

void cal_job_ref(cal_job *j) { atomic_fetch_add(&j->refs, 1); }

void cal_job_unref(cal_job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    cal_srv_request_free(&j->req);
    free(j->prompt);
    cal_buf_free(&j->out);
    cal_buf_free(&j->text);
    free(j->pace_tmpl);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

const char *cal_fmt_finish(int finish)
{
    switch (finish) {
    case 1: return "length";
    case 2: return "stop";
    case 3: return "abort";
    default: return NULL;
    }
}

/* A JSON string of arbitrary bytes: jansson refuses invalid UTF-8, which the
 * tokenizer never emits, but a replacement character beats a lost chunk. */
static json_t *jstr(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    return v ? v : json_string("\xEF\xBF\xBD");
}

static json_t *chunk_head(const cal_job *j)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "object", json_string(j->req.api == CAL_SRV_CHAT
                                                     ? "chat.completion.chunk"
                                                     : "text_completion"));
    json_object_set_new(o, "created", json_integer(j->created_s));
    json_object_set_new(o, "model", json_string(j->model));
    return o;
}

/* Append "data: <json>\n\n" (or the bare JSON for bodies) and drop o. */
static int emit(cal_job *j, json_t *o, int sse)
{
    if (!o) return CAL_ENOMEM;
    char stack[4096];
    size_t n = json_dumpb(o, stack, sizeof stack, JSON_COMPACT | JSON_REAL_PRECISION(9));
    char *s = stack;
    if (n > sizeof stack) {
        s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
        n = s ? strlen(s) : 0;
    }
    json_decref(o);
    if (!s || n == 0) return CAL_ENOMEM;
    int rc = CAL_OK;
    if (sse) rc = cal_buf_append(&j->out, "data: ", 6);
    if (rc == CAL_OK) rc = cal_buf_append(&j->out, s, n);
    if (rc == CAL_OK && sse) rc = cal_buf_append(&j->out, "\n\n", 2);
    if (s != stack) free(s);
    return rc;
}

static json_t *choice(const cal_job *j, const char *text, size_t n, int finish,
                      int first)
{
    json_t *c = json_object();
    if (!c) return NULL;
    json_object_set_new(c, "index", json_integer(0));
    if (j->req.api == CAL_SRV_CHAT) {
        json_t *d = json_object();
        if (first) json_object_set_new(d, "role", json_string("assistant"));
        if (text) json_object_set_new(d, "content", jstr(text, n));
        json_object_set_new(c, "delta", d);
    } else {
        json_object_set_new(c, "text", jstr(text ? text : "", text ? n : 0));
    }
    json_object_set_new(c, "logprobs", json_null());
    const char *fr = cal_fmt_finish(finish);
    json_object_set_new(c, "finish_reason", fr ? json_string(fr) : json_null());
    return c;
}

int cal_fmt_chunk(cal_job *j, const char *text, size_t n, int64_t send_ns)
{
    json_t *o = chunk_head(j);
    if (!o) return CAL_ENOMEM;
    json_t *arr = json_array();
    json_array_append_new(arr, choice(j, text, n, 0, j->n_chunks == 0));
    json_object_set_new(o, "choices", arr);
    if (send_ns > 0) json_object_set_new(o, "send_ns", json_integer(send_ns));
    j->n_chunks++;
    return emit(j, o, 1);
}

/* Pace mode sends tens of thousands of identical chunks a second, differing
 * only in send_ns: jansson builds the chunk once per job, with send_ns last,
 * and each chunk splices the number in place of its placeholder. */
int cal_fmt_pace_chunk(cal_job *j, const char *text, size_t n, int64_t send_ns)
{
    if (j->req.api == CAL_SRV_CHAT && j->n_chunks == 0)   /* carries the role */
        return cal_fmt_chunk(j, text, n, send_ns);
    if (!j->pace_tmpl) {
        json_t *o = chunk_head(j);
        if (!o) return CAL_ENOMEM;
        json_t *arr = json_array();
        json_array_append_new(arr, choice(j, text, n, 0, 0));
        json_object_set_new(o, "choices", arr);
        json_object_set_new(o, "send_ns", json_integer(0));
        char *t = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        size_t k = t ? strlen(t) : 0;
        if (k < 3 || strcmp(t + k - 2, "0}") != 0) { free(t); return CAL_ENOMEM; }
        t[k - 2] = 0;                 /* keep `…"send_ns":` */
        j->pace_tmpl = t;
    }
    char num[32];
    int k = snprintf(num, sizeof num, "%lld}\n\n", (long long)send_ns);
    int rc = cal_buf_append(&j->out, "data: ", 6);
    if (rc == CAL_OK) rc = cal_buf_puts(&j->out, j->pace_tmpl);
    if (rc == CAL_OK) rc = cal_buf_append(&j->out, num, (size_t)k);
    if (rc == CAL_OK) j->n_chunks++;
    return rc;
}

static double ms(int64_t a, int64_t b) { return b > a ? (double)(b - a) / 1e6 : 0.0; }

/* llama.cpp's timings: prompt_n/prompt_ms (prefill), predicted_n/predicted_ms
 * (decode, from the end of prefill to the last token), plus the queue wait. */
static json_t *timings(const cal_job *j)
{
    json_t *t = json_object();
    if (!t) return NULL;
    double pms = ms(j->prefill_start_ns, j->prefill_end_ns);
    double dms = ms(j->prefill_end_ns, j->last_tok_ns);
    json_object_set_new(t, "prompt_n", json_integer(j->n_prompt));
    json_object_set_new(t, "prompt_ms", json_real(pms));
    json_object_set_new(t, "prompt_per_token_ms",
                        json_real(j->n_prompt > 0 ? pms / j->n_prompt : 0));
    json_object_set_new(t, "prompt_per_second",
                        json_real(pms > 0 ? j->n_prompt * 1000.0 / pms : 0));
    /* the first token comes from the prefill's logits: decode is n − 1
     * steps over predicted_ms, as llama-server counts (n_gen_steps) */
    int steps = j->n_gen > 0 ? j->n_gen - 1 : 0;
    json_object_set_new(t, "predicted_n", json_integer(j->n_gen));
    json_object_set_new(t, "predicted_ms", json_real(dms));
    json_object_set_new(t, "predicted_per_token_ms", json_real(steps > 0 ? dms / steps : 0));
    json_object_set_new(t, "predicted_per_second",
                        json_real(dms > 0 ? steps * 1000.0 / dms : 0));
    json_object_set_new(t, "queue_ms", json_real(ms(j->arrival_ns, j->prefill_start_ns)));
    return t;
}

static json_t *usage(const cal_job *j)
{
    json_t *u = json_object();
    if (!u) return NULL;
    json_object_set_new(u, "prompt_tokens", json_integer(j->n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(j->n_gen));
    json_object_set_new(u, "total_tokens", json_integer(j->n_prompt + j->n_gen));
    return u;
}

int cal_fmt_stream_end(cal_job *j)
{
    json_t *o = chunk_head(j);
    if (!o) return CAL_ENOMEM;
    json_t *arr = json_array();
    /* chat: an empty delta; completions: empty text (OpenAI's last chunk) */
    json_t *c = choice(j, NULL, 0, j->finish ? j->finish : 1, 0);
    json_array_append_new(arr, c);
    json_object_set_new(o, "choices", arr);
    json_object_set_new(o, "timings", timings(j));
    int rc = emit(j, o, 1);
    if (rc == CAL_OK && j->req.include_usage) {
        o = chunk_head(j);
        if (!o) return CAL_ENOMEM;
        json_object_set_new(o, "choices", json_array());
        json_object_set_new(o, "usage", usage(j));
        json_object_set_new(o, "timings", timings(j));
        rc = emit(j, o, 1);
    }
    if (rc == CAL_OK) rc = cal_buf_puts(&j->out, "data: [DONE]\n\n");
    return rc;
}

int cal_fmt_body(cal_job *j)
{
    json_t *o = json_object();
    if (!o) return CAL_ENOMEM;
    int chat = j->req.api == CAL_SRV_CHAT;
    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "object", json_string(chat ? "chat.completion" : "text_completion"));
    json_object_set_new(o, "created", json_integer(j->created_s));
    json_object_set_new(o, "model", json_string(j->model));
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(0));
    json_t *txt = jstr(j->text.data ? j->text.data : "", j->text.len);
    if (chat) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_string("assistant"));
        json_object_set_new(m, "content", txt);
        json_object_set_new(c, "message", m);
    } else {
        json_object_set_new(c, "text", txt);
    }
    json_object_set_new(c, "logprobs", json_null());
    const char *fr = cal_fmt_finish(j->finish ? j->finish : 1);
    json_object_set_new(c, "finish_reason", json_string(fr));
    json_t *arr = json_array();
    json_array_append_new(arr, c);
    json_object_set_new(o, "choices", arr);
    json_object_set_new(o, "usage", usage(j));
    json_object_set_new(o, "timings", timings(j));
    return emit(j, o, 0);
}
