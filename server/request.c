/* caliper serve — the request parser (see request.h): completions and chat
 * bodies into cal_srv_request, with OpenAI-style errors naming the field.
 * Unknown fields are ignored, as OpenAI-compatible servers do; known fields
 * of the wrong type or range are rejected. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "server/chat_template.h"
#include "engine/engine.h"
#include "server/request.h"

/* A rendered chat prompt is bounded like the body it came from. */
#define CHAT_PROMPT_MAX (8u << 20)

void cal_srv_error_set(cal_srv_error *err, int status, const char *type,
                       const char *param, const char *code, const char *fmt, ...)
{
    if (!err) return;
    err->status = status;
    err->type = type ? type : "invalid_request_error";
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

char *cal_srv_error_json(const cal_srv_error *err)
{
    json_t *e = json_object();
    json_t *o = json_object();
    if (!e || !o) { json_decref(e); json_decref(o); return NULL; }
    json_object_set_new(o, "message", json_string(err->message));
    json_object_set_new(o, "type", json_string(err->type ? err->type : "invalid_request_error"));
    json_object_set_new(o, "param", err->param[0] ? json_string(err->param) : json_null());
    json_object_set_new(o, "code", err->code ? json_string(err->code) : json_null());
    json_object_set_new(e, "error", o);
    char *s = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    return s;
}

/* A short, printable rendering of a bad value for error messages. */
static void describe(const json_t *v, char *out, size_t cap)
{
    switch (json_typeof(v)) {
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t n = strlen(s);
        char tmp[40];
        size_t k = 0;
        for (size_t i = 0; i < n && k < sizeof tmp - 1; i++)
            tmp[k++] = (s[i] >= 32 && s[i] < 127 && s[i] != '"') ? s[i] : '?';
        tmp[k] = 0;
        snprintf(out, cap, "\"%s\"%s", tmp, n > k ? "..." : "");
        break;
    }
    case JSON_INTEGER: snprintf(out, cap, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL:    snprintf(out, cap, "%g", json_real_value(v)); break;
    case JSON_TRUE:    snprintf(out, cap, "true"); break;
    case JSON_FALSE:   snprintf(out, cap, "false"); break;
    case JSON_NULL:    snprintf(out, cap, "null"); break;
    case JSON_ARRAY:   snprintf(out, cap, "an array"); break;
    default:           snprintf(out, cap, "an object"); break;
    }
}

static int bad(cal_srv_error *err, const char *field, const json_t *v, const char *want)
{
    char d[64];
    describe(v, d, sizeof d);
    cal_srv_error_set(err, 400, "invalid_request_error", field, NULL,
                      "%s: %s is not %s", field, d, want);
    return CAL_EINVAL;
}

/* Optional integer field in [lo, hi]; null counts as absent. */
static int get_int(json_t *o, const char *field, long long lo, long long hi,
                   const char *want, long long *val, int *present, cal_srv_error *err)
{
    json_t *v = json_object_get(o, field);
    *present = 0;
    if (!v || json_is_null(v)) return CAL_OK;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d == floor(d)) || d < -9e18 || d > 9e18) return bad(err, field, v, want);
        x = (long long)d;
    } else {
        return bad(err, field, v, want);
    }
    if (x < lo || x > hi) return bad(err, field, v, want);
    *val = x;
    *present = 1;
    return CAL_OK;
}

static int get_num(json_t *o, const char *field, double lo, double hi, int lo_open,
                   const char *want, float *val, cal_srv_error *err)
{
    json_t *v = json_object_get(o, field);
    if (!v || json_is_null(v)) return CAL_OK;
    if (!json_is_number(v)) return bad(err, field, v, want);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi || (lo_open && d == lo)) return bad(err, field, v, want);
    *val = (float)d;
    return CAL_OK;
}

static int get_bool(json_t *o, const char *field, int *val, cal_srv_error *err)
{
    json_t *v = json_object_get(o, field);
    if (!v || json_is_null(v)) return CAL_OK;
    if (!json_is_boolean(v)) return bad(err, field, v, "a boolean");
    *val = json_is_true(v);
    return CAL_OK;
}

static int take_ids(json_t *arr, const char *field, const cal_srv_limits *lim,
                    cal_srv_request *r, cal_srv_error *err)
{
    size_t n = json_array_size(arr);
    int cap = lim && lim->max_ctx > 0 ? lim->max_ctx : 1 << 20;
    if (n == 0) {
        cal_srv_error_set(err, 400, "invalid_request_error", field, NULL,
                          "%s: the prompt is empty", field);
        return CAL_EINVAL;
    }
    if (n > (size_t)cap) {
        cal_srv_error_set(err, 400, "invalid_request_error", field, "context_length_exceeded",
                          "%s: %zu prompt tokens exceed the context of %d", field, n, cap);
        return CAL_EINVAL;
    }
    r->prompt_ids = malloc(n * sizeof *r->prompt_ids);
    if (!r->prompt_ids) return CAL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(arr, i);
        long long id = json_is_integer(t) ? json_integer_value(t) : -1;
        if (!json_is_integer(t) || id < 0 || (lim && lim->vocab > 0 && id >= lim->vocab)) {
            char d[64];
            describe(t, d, sizeof d);
            cal_srv_error_set(err, 400, "invalid_request_error", field, NULL,
                              "%s[%zu]: %s is not a token id in 0..%d", field, i, d,
                              lim && lim->vocab > 0 ? lim->vocab - 1 : 0);
            return CAL_EINVAL;
        }
        r->prompt_ids[i] = (int32_t)id;
    }
    r->n_prompt_ids = (int)n;
    return CAL_OK;
}

static int take_text(const char *s, size_t n, cal_srv_request *r)
{
    r->prompt = malloc(n + 1);
    if (!r->prompt) return CAL_ENOMEM;
    memcpy(r->prompt, s, n);
    r->prompt[n] = 0;
    r->prompt_len = n;
    return CAL_OK;
}

/* prompt: a string, an array of token ids, or a one-element array of either
 * (OpenAI's batch form, limited here to n = 1). */
static int parse_prompt(json_t *o, const cal_srv_limits *lim, cal_srv_request *r,
                        cal_srv_error *err)
{
    json_t *p = json_object_get(o, "prompt");
    const char *want = "a string or an array of token ids";
    if (!p || json_is_null(p)) {
        cal_srv_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                          "prompt: the field is required");
        return CAL_EINVAL;
    }
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        if (json_string_length(p) == 0) {
            cal_srv_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                              "prompt: the prompt is empty");
            return CAL_EINVAL;
        }
        return take_text(json_string_value(p), json_string_length(p), r);
    }
    if (json_is_array(p)) return take_ids(p, "prompt", lim, r, err);
    return bad(err, "prompt", p, want);
}

/* A message's content: a string, null, or an array of {"type":"text","text"}. */
static int append_content(json_t *c, size_t idx, cal_buf *b, cal_srv_error *err)
{
    char field[48];
    snprintf(field, sizeof field, "messages[%zu].content", idx);
    if (!c || json_is_null(c)) return CAL_OK;
    if (json_is_string(c))
        return cal_buf_append(b, json_string_value(c), json_string_length(c));
    if (!json_is_array(c)) return bad(err, field, c, "a string or an array of text parts");
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *t = json_is_object(part) ? json_object_get(part, "text") : NULL;
        json_t *ty = json_is_object(part) ? json_object_get(part, "type") : NULL;
        if (!t || !json_is_string(t) || (ty && !(json_is_string(ty) &&
                                                 !strcmp(json_string_value(ty), "text")))) {
            return bad(err, field, part, "a text part {\"type\":\"text\",\"text\":...}");
        }
        int rc = cal_buf_append(b, json_string_value(t), json_string_length(t));
        if (rc) return rc;
    }
    return CAL_OK;
}

/* The messages rendered by the served model's chat template (lim->tpl;
 * NULL: caliper's own, one "<|role|>\ncontent\n" block per message, then
 * "<|assistant|>\n": simple, stable, and costing prompt tokens the way a
 * real template does). The contents are gathered first, then rendered. */
static int parse_messages(json_t *o, const cal_srv_limits *lim, cal_srv_request *r,
                          cal_srv_error *err)
{
    json_t *m = json_object_get(o, "messages");
    if (!m || json_is_null(m)) {
        cal_srv_error_set(err, 400, "invalid_request_error", "messages", NULL,
                          "messages: the field is required");
        return CAL_EINVAL;
    }
    if (!json_is_array(m) || json_array_size(m) == 0)
        return bad(err, "messages", m, "a non-empty array of messages");
    size_t nm = json_array_size(m);
    size_t *at = calloc(nm + 1, sizeof *at);
    cal_tpl_msg *msgs = calloc(nm, sizeof *msgs);
    cal_buf text = CAL_BUF_INIT(CHAT_PROMPT_MAX), b = CAL_BUF_INIT(CHAT_PROMPT_MAX);
    int rc = at && msgs ? CAL_OK : CAL_ENOMEM;
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        if (rc != CAL_OK) break;
        char field[48];
        snprintf(field, sizeof field, "messages[%zu]", i);
        if (!json_is_object(msg)) { rc = bad(err, field, msg, "a message object"); break; }
        json_t *role = json_object_get(msg, "role");
        snprintf(field, sizeof field, "messages[%zu].role", i);
        if (!role || !json_is_string(role)) {
            rc = bad(err, field, role ? role : json_null(), "a role string");
            break;
        }
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "tool") && strcmp(rs, "developer") && strcmp(rs, "function")) {
            rc = bad(err, field, role, "one of system, developer, user, assistant, tool");
            break;
        }
        msgs[i].role = rs;
        at[i] = text.len;
        rc = append_content(json_object_get(msg, "content"), i, &text, err);
        at[i + 1] = text.len;
    }
    char why[200] = "";
    size_t bad_msg = 0;
    if (rc == CAL_OK) {
        for (i = 0; i < nm; i++) {
            msgs[i].content = text.data ? text.data + at[i] : "";
            msgs[i].n = at[i + 1] - at[i];
        }
        rc = cal_tpl_render(lim ? lim->tpl : NULL, msgs, nm, &b, &bad_msg, why, sizeof why);
        if (rc == CAL_EINVAL) {
            char field[48];
            snprintf(field, sizeof field, "messages[%zu].role", bad_msg);
            cal_srv_error_set(err, 400, "invalid_request_error", field, NULL, "%s: %s", field,
                              why);
        }
    }
    if (rc == CAL_ETOOBIG && err->status == 0)
        cal_srv_error_set(err, 413, "invalid_request_error", "messages", NULL,
                          "messages: the rendered prompt exceeds %u bytes", CHAT_PROMPT_MAX);
    cal_buf_free(&text);
    free(at);
    free(msgs);
    if (rc != CAL_OK) { cal_buf_free(&b); return rc; }
    r->prompt = b.data;     /* the buffer's bytes become the prompt */
    r->prompt_len = b.len;
    return CAL_OK;
}

static int parse_fields(json_t *o, const cal_srv_limits *lim, cal_srv_request *r,
                        cal_srv_error *err)
{
    int rc, present;
    long long v;
    long long ctx = lim && lim->max_ctx > 0 ? lim->max_ctx : 1 << 20;
    json_t *model = json_object_get(o, "model");
    if (model && !json_is_null(model) && !json_is_string(model))
        return bad(err, "model", model, "a string");

    rc = get_int(o, "max_tokens", 1, ctx, "a positive integer within the context",
                 &v, &present, err);
    if (rc) return rc;
    if (present) r->max_tokens = (int)v;
    rc = get_int(o, "max_completion_tokens", 1, ctx,
                 "a positive integer within the context", &v, &present, err);
    if (rc) return rc;
    if (present) r->max_tokens = (int)v;

    if ((rc = get_num(o, "temperature", 0, 2, 0, "a number in 0..2", &r->temperature, err)))
        return rc;
    if ((rc = get_num(o, "top_p", 0, 1, 1, "a number in (0, 1]", &r->top_p, err))) return rc;
    rc = get_int(o, "seed", INT64_MIN, INT64_MAX, "an integer", &v, &present, err);
    if (rc) return rc;
    if (present) { r->seed = (uint64_t)v; r->has_seed = 1; }
    if ((rc = get_bool(o, "stream", &r->stream, err))) return rc;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad(err, "stream_options", so, "an object");
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            return bad(err, "stream_options.include_usage", iu, "a boolean");
        r->include_usage = iu && json_is_true(iu);
    }
    if ((rc = get_bool(o, "ignore_eos", &r->ignore_eos, err))) return rc;
    rc = get_int(o, "min_tokens", 0, ctx, "a non-negative integer within the context",
                 &v, &present, err);
    if (rc) return rc;
    if (present) r->min_tokens = (int)v;
    rc = get_int(o, "n", 1, 1, "1 (this server generates one choice per request)",
                 &v, &present, err);
    if (rc) return rc;
    rc = get_int(o, "best_of", 1, 1, "1", &v, &present, err);
    if (rc) return rc;
    return CAL_OK;
}

int cal_srv_parse_request(cal_srv_api api, const char *body, size_t n,
                          const cal_srv_limits *lim, cal_srv_request *out,
                          cal_srv_error *err)
{
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->api = api;
    out->max_tokens = -1;
    out->temperature = 1.0f;
    out->top_p = 1.0f;
    json_error_t je;
    json_t *o = body ? json_loadb(body, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je) : NULL;
    if (!o) {
        cal_srv_error_set(err, 400, "invalid_request_error", "", NULL,
                          "the body is not valid JSON: %s (line %d, column %d)",
                          body ? je.text : "empty body", body ? je.line : 0,
                          body ? je.column : 0);
        return CAL_EINVAL;
    }
    int rc;
    if (!json_is_object(o)) {
        cal_srv_error_set(err, 400, "invalid_request_error", "", NULL,
                          "the body must be a JSON object");
        rc = CAL_EINVAL;
    } else {
        rc = parse_fields(o, lim, out, err);
        if (rc == CAL_OK)
            rc = api == CAL_SRV_CHAT ? parse_messages(o, lim, out, err)
                                     : parse_prompt(o, lim, out, err);
    }
    json_decref(o);
    if (rc != CAL_OK) {
        if (rc == CAL_ENOMEM && err->status == 0)
            cal_srv_error_set(err, 500, "server_error", "", NULL, "out of memory");
        cal_srv_request_free(out);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

void cal_srv_request_free(cal_srv_request *r)
{
    if (!r) return;
    free(r->prompt);
    free(r->prompt_ids);
    r->prompt = NULL;
    r->prompt_ids = NULL;
    r->n_prompt_ids = 0;
    r->prompt_len = 0;
}

int cal_srv_parse_tokenize(const char *body, size_t n, char **text, size_t *len,
                           cal_srv_error *err)
{
    memset(err, 0, sizeof *err);
    *text = NULL;
    *len = 0;
    json_error_t je;
    json_t *o = body ? json_loadb(body, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je) : NULL;
    if (!o || !json_is_object(o)) {
        cal_srv_error_set(err, 400, "invalid_request_error", "", NULL,
                          "the body must be a JSON object with \"prompt\" or \"content\"");
        json_decref(o);
        return CAL_EINVAL;
    }
    const char *field = "prompt";
    json_t *p = json_object_get(o, "prompt");
    if (!p) { field = "content"; p = json_object_get(o, "content"); }
    int rc = CAL_OK;
    if (!p) {
        cal_srv_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                          "prompt: the field is required (or \"content\")");
        rc = CAL_EINVAL;
    } else if (!json_is_string(p)) {
        rc = bad(err, field, p, "a string");
    } else {
        size_t k = json_string_length(p);
        *text = malloc(k + 1);
        if (!*text) {
            rc = CAL_ENOMEM;
            cal_srv_error_set(err, 500, "server_error", "", NULL, "out of memory");
        } else {
            memcpy(*text, json_string_value(p), k);
            (*text)[k] = 0;
            *len = k;
        }
    }
    json_decref(o);
    return rc;
}

int cal_srv_parse_tokenize_flags(const char *body, size_t n, int *flags, cal_srv_error *err)
{
    memset(err, 0, sizeof *err);
    *flags = CAL_TOK_PARSE_SPECIAL;
    json_error_t je;
    json_t *o = body ? json_loadb(body, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je) : NULL;
    if (!o || !json_is_object(o)) {
        json_decref(o);
        cal_srv_error_set(err, 400, "invalid_request_error", "", NULL,
                          "the body must be a JSON object");
        return CAL_EINVAL;
    }
    static const struct { const char *field; int flag; } F[] = {
        {"add_special", CAL_TOK_ADD_SPECIAL}, {"parse_special", CAL_TOK_PARSE_SPECIAL}};
    int rc = CAL_OK;
    for (size_t i = 0; i < sizeof F / sizeof F[0] && rc == CAL_OK; i++) {
        json_t *v = json_object_get(o, F[i].field);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_boolean(v))
            rc = bad(err, F[i].field, v, "true or false");
        else if (json_is_true(v))
            *flags |= F[i].flag;
        else
            *flags &= ~F[i].flag;
    }
    json_decref(o);
    return rc;
}

int cal_srv_parse_detokenize(const char *body, size_t n, int vocab, int max_ids,
                             int32_t **ids, int *n_ids, cal_srv_error *err)
{
    memset(err, 0, sizeof *err);
    *ids = NULL;
    *n_ids = 0;
    json_error_t je;
    json_t *o = body ? json_loadb(body, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je) : NULL;
    json_t *a = o && json_is_object(o) ? json_object_get(o, "tokens") : NULL;
    int rc = CAL_OK;
    if (!o || !json_is_object(o)) {
        cal_srv_error_set(err, 400, "invalid_request_error", "", NULL,
                          "the body must be a JSON object with \"tokens\"");
        rc = CAL_EINVAL;
    } else if (!a) {
        cal_srv_error_set(err, 400, "invalid_request_error", "tokens", NULL,
                          "tokens: the field is required");
        rc = CAL_EINVAL;
    } else if (!json_is_array(a)) {
        rc = bad(err, "tokens", a, "an array of token ids");
    } else if (json_array_size(a) > (size_t)max_ids) {
        cal_srv_error_set(err, 413, "invalid_request_error", "tokens", NULL,
                          "tokens: more than %d ids", max_ids);
        rc = CAL_ETOOBIG;
    }
    size_t k = rc == CAL_OK ? json_array_size(a) : 0;
    if (rc == CAL_OK && !(*ids = malloc((k ? k : 1) * sizeof **ids))) {
        cal_srv_error_set(err, 500, "server_error", "", NULL, "out of memory");
        rc = CAL_ENOMEM;
    }
    for (size_t i = 0; i < k && rc == CAL_OK; i++) {
        json_t *v = json_array_get(a, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        if (x < 0 || x >= vocab) {
            char f[48];
            snprintf(f, sizeof f, "tokens[%zu]", i);
            char want[48];
            snprintf(want, sizeof want, "a token id in 0..%d", vocab - 1);
            rc = bad(err, f, v, want);
            break;
        }
        (*ids)[i] = (int32_t)x;
    }
    if (rc != CAL_OK) {
        free(*ids);
        *ids = NULL;
    } else {
        *n_ids = (int)k;
    }
    json_decref(o);
    return rc;
}

int cal_srv_check_context(cal_srv_request *r, int n_prompt, int max_ctx,
                          cal_srv_error *err)
{
    if (n_prompt <= 0) {
        cal_srv_error_set(err, 400, "invalid_request_error", "prompt", NULL,
                          "prompt: the prompt is empty");
        return CAL_EINVAL;
    }
    if (n_prompt >= max_ctx) {
        cal_srv_error_set(err, 400, "invalid_request_error", "prompt",
                          "context_length_exceeded",
                          "prompt: %d tokens leave no room in the context of %d",
                          n_prompt, max_ctx);
        return CAL_EINVAL;
    }
    int room = max_ctx - n_prompt;
    if (r->max_tokens < 0) {
        int def = r->api == CAL_SRV_CHAT ? CAL_SRV_DEFAULT_CHAT_MAX_TOKENS
                                         : CAL_SRV_DEFAULT_MAX_TOKENS;
        r->max_tokens = def < room ? def : room;
    } else if (r->max_tokens > room) {
        cal_srv_error_set(err, 400, "invalid_request_error", "max_tokens",
                          "context_length_exceeded",
                          "max_tokens: %d prompt tokens + %d requested exceed the "
                          "context of %d", n_prompt, r->max_tokens, max_ctx);
        return CAL_EINVAL;
    }
    if (r->min_tokens > r->max_tokens) {
        cal_srv_error_set(err, 400, "invalid_request_error", "min_tokens", NULL,
                          "min_tokens: %d is more than max_tokens %d", r->min_tokens,
                          r->max_tokens);
        return CAL_EINVAL;
    }
    return CAL_OK;
}
