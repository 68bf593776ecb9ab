/* Chunk interpreter: what one SSE event (or a non-streaming body) from an
 * OpenAI-compatible server says — generated text, usage, llama.cpp timings,
 * an in-stream error, finish_reason — in the shapes vLLM, SGLang, llama.cpp,
 * Ollama and OpenAI send. */
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/probe.h"

static void set_error(cal_chunk *c, const char *msg)
{
    c->flags |= CAL_CHUNK_ERROR;
    snprintf(c->error, sizeof c->error, "%s", msg && *msg ? msg : "error event");
}

/* Append a string member's text; returns its length (0 if absent/empty). */
static size_t take_text(json_t *obj, const char *key, cal_buf *text, int *rc)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v)) return 0;
    size_t n = json_string_length(v);
    if (n && text && *rc == CAL_OK) *rc = cal_buf_append(text, json_string_value(v), n);
    return n;
}

static size_t choice_text(json_t *ch, cal_buf *text, int *rc)
{
    size_t n = take_text(ch, "text", text, rc);               /* completions */
    const char *holders[] = {"delta", "message"};             /* chat stream / whole */
    for (size_t h = 0; h < 2; h++) {
        json_t *d = json_object_get(ch, holders[h]);
        if (!json_is_object(d)) continue;
        /* Reasoning is generated text too: it costs decode steps. */
        n += take_text(d, "reasoning_content", text, rc);
        n += take_text(d, "reasoning", text, rc);
        n += take_text(d, "content", text, rc);
        json_t *tc = json_object_get(d, "tool_calls");
        size_t i;
        json_t *call;
        json_array_foreach(tc, i, call) {
            json_t *fn = json_object_get(call, "function");
            if (json_is_object(fn)) n += take_text(fn, "arguments", text, rc);
        }
    }
    return n;
}

static int int_member(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        return x < 0 ? -1 : x > 0x7fffffff ? 0x7fffffff : (int)x;
    }
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 2e9)
        return (int)json_real_value(v);
    return -1;
}

static double num_member(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

int cal_chunk_parse(const char *data, size_t len, cal_chunk *c, cal_buf *text)
{
    if (!c || (!data && len)) return CAL_EINVAL;
    memset(c, 0, sizeof *c);
    c->prompt_tokens = c->completion_tokens = c->decode_tokens = c->cached_tokens = -1;
    c->prefill_ms = c->decode_ms = -1.0;
    c->send_ns = -1;
    /* tolerate surrounding whitespace around the sentinel */
    size_t a = 0, b = len;
    while (a < b && (data[a] == ' ' || data[a] == '\t' || data[a] == '\n' || data[a] == '\r')) a++;
    while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t' || data[b - 1] == '\n' || data[b - 1] == '\r')) b--;
    if (b - a == 6 && memcmp(data + a, "[DONE]", 6) == 0) {
        c->flags = CAL_CHUNK_DONE;
        return CAL_OK;
    }
    if (a == b) return CAL_OK;              /* an empty event says nothing */
    json_error_t jerr;
    const size_t flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
    json_t *root = json_loadb(data, len, flags, &jerr);
    /* jansson 2.14 reports a failed allocation as a syntax error, or as no
     * error at all: one more read tells a passing shortage from data that
     * is malformed, so the probe's want of memory is not blamed on the
     * server's bytes */
    if (!root && json_error_code(&jerr) != json_error_out_of_memory)
        root = json_loadb(data, len, flags, &jerr);
    if (!root) return json_error_code(&jerr) == json_error_out_of_memory ? CAL_ENOMEM : CAL_EPROTO;
    if (!json_is_object(root)) { json_decref(root); return CAL_EPROTO; }

    int rc = CAL_OK;
    json_t *err = json_object_get(root, "error");
    if (err && !json_is_null(err)) {
        if (json_is_string(err)) set_error(c, json_string_value(err));
        else if (json_is_object(err)) set_error(c, json_string_value(json_object_get(err, "message")));
        else set_error(c, NULL);
    }
    json_t *obj = json_object_get(root, "object");
    if (json_is_string(obj) && strcmp(json_string_value(obj), "error") == 0)
        set_error(c, json_string_value(json_object_get(root, "message")));

    json_t *choices = json_object_get(root, "choices");
    size_t i;
    json_t *ch;
    json_array_foreach(choices, i, ch) {
        if (!json_is_object(ch)) continue;
        c->text_bytes += choice_text(ch, text, &rc);
        json_t *fr = json_object_get(ch, "finish_reason");
        if (fr && !json_is_null(fr)) c->flags |= CAL_CHUNK_FINISH;
    }
    if (c->text_bytes) c->flags |= CAL_CHUNK_TEXT;

    json_t *usage = json_object_get(root, "usage");
    if (json_is_object(usage)) {
        c->prompt_tokens = int_member(usage, "prompt_tokens");
        c->completion_tokens = int_member(usage, "completion_tokens");
        if (c->completion_tokens >= 0) c->flags |= CAL_CHUNK_USAGE;
        /* a prefix cache's hit, where the server reports it (vLLM, SGLang) */
        json_t *det = json_object_get(usage, "prompt_tokens_details");
        if (json_is_object(det)) c->cached_tokens = int_member(det, "cached_tokens");
    }
    json_t *tm = json_object_get(root, "timings");
    if (json_is_object(tm)) {
        c->prefill_ms = num_member(tm, "prompt_ms");
        c->decode_ms = num_member(tm, "predicted_ms");
        c->decode_tokens = int_member(tm, "predicted_n");
        if (c->cached_tokens < 0) c->cached_tokens = int_member(tm, "cache_n");   /* llama.cpp */
        if (c->decode_ms >= 0) c->flags |= CAL_CHUNK_TIMINGS;
    }
    json_t *sn = json_object_get(root, "send_ns");
    if (json_is_integer(sn)) {
        c->send_ns = (int64_t)json_integer_value(sn);
        c->flags |= CAL_CHUNK_SEND_NS;
    }
    json_decref(root);
    return rc;
}
