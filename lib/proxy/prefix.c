/* caliper proxy — what a turn's request carries before the new message
 * (SPEC 1.3: a 1509-token system prompt, 6603 tokens of tools and 1347 of
 * history rode along with every turn), and the turn record as JSON. */
#include "caliper/proxy.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/utf8.h"

#define PART_TEXT_MAX (64u << 20)

const char *const cal_prefix_part_names[CAL_PART_N] = {"system", "tools", "history", "new"};

void cal_prefix_free(cal_prefix *p)
{
    for (int k = 0; k < CAL_PART_N; k++) { free(p->text[k]); p->text[k] = NULL; }
}

/* A message's content: a string, null, or an array of parts whose "text"
 * is taken (images and other parts carry no text). */
static int add_content(cal_buf *b, json_t *c)
{
    if (json_is_string(c)) return cal_buf_append(b, json_string_value(c), json_string_length(c));
    if (!json_is_array(c)) return CAL_OK;
    size_t i;
    json_t *part;
    int rc = CAL_OK;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "text");
        if (json_is_string(t) && (rc = cal_buf_append(b, json_string_value(t), json_string_length(t))))
            return rc;
    }
    return rc;
}

static int add_json(cal_buf *b, json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) return CAL_ENOMEM;
    int rc = cal_buf_puts(b, s);
    free(s);
    return rc;
}

static int add_message(cal_buf *b, json_t *m)
{
    if (b->len && cal_buf_puts(b, "\n")) return CAL_ETOOBIG;
    int rc = add_content(b, json_object_get(m, "content"));
    json_t *tc = json_object_get(m, "tool_calls");
    if (!rc && tc && !json_is_null(tc)) rc = add_json(b, tc);
    return rc;
}

static char *take(cal_buf *b)
{
    if (b->data) { char *s = b->data; b->data = NULL; b->len = b->alloc = 0; return s; }
    return strdup("");
}

int cal_prefix_parse(const char *body, size_t len, cal_prefix *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *o = body ? json_loadb(body, len, 0, &je) : NULL;
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return cal_why(why, why_len, CAL_EPROTO, "the body is not a JSON object%s%s", o ? "" : ": ", o ? "" : je.text);
    }
    cal_buf b[CAL_PART_N];
    for (int k = 0; k < CAL_PART_N; k++) { b[k] = (cal_buf)CAL_BUF_INIT(PART_TEXT_MAX); }
    int rc = CAL_OK;
    json_t *st = json_object_get(o, "stream");
    out->stream = json_is_true(st);
    json_t *msgs = json_object_get(o, "messages");
    json_t *prompt = json_object_get(o, "prompt");
    if (msgs) {
        if (!json_is_array(msgs)) { rc = cal_why(why, why_len, CAL_EPROTO, "messages: not an array"); goto done; }
        out->chat = 1;
        out->n_messages = json_array_size(msgs);
        for (size_t i = 0; i < out->n_messages && !rc; i++) {
            json_t *m = json_array_get(msgs, i);
            if (!json_is_object(m)) { rc = cal_why(why, why_len, CAL_EPROTO, "messages[%zu]: not an object", i); break; }
            const char *role = json_string_value(json_object_get(m, "role"));
            if (!role) role = "";
            if (i + 1 == out->n_messages) {
                snprintf(out->new_role, sizeof out->new_role, "%s", role);
                rc = add_message(&b[CAL_PART_NEW], m);
            } else if (!strcmp(role, "system") || !strcmp(role, "developer")) {
                rc = add_message(&b[CAL_PART_SYSTEM], m);
            } else {
                rc = add_message(&b[CAL_PART_HISTORY], m);
            }
        }
        json_t *tools = json_object_get(o, "tools");
        if (!rc && tools && json_is_array(tools) && json_array_size(tools)) {
            out->n_tools = json_array_size(tools);
            rc = add_json(&b[CAL_PART_TOOLS], tools);
        }
    } else if (prompt) {
        if (json_is_string(prompt)) {
            rc = cal_buf_append(&b[CAL_PART_NEW], json_string_value(prompt), json_string_length(prompt));
        } else if (json_is_array(prompt)) {
            size_t i;
            json_t *p;
            json_array_foreach(prompt, i, p) {
                if (!json_is_string(p)) { rc = cal_why(why, why_len, CAL_EPROTO, "prompt[%zu]: not a string", i); break; }
                if ((i && (rc = cal_buf_puts(&b[CAL_PART_NEW], "\n"))) ||
                    (rc = cal_buf_append(&b[CAL_PART_NEW], json_string_value(p), json_string_length(p))))
                    break;
            }
        } else {
            rc = cal_why(why, why_len, CAL_EPROTO, "prompt: not a string or an array of strings");
        }
    } else {
        rc = cal_why(why, why_len, CAL_EPROTO, "neither \"messages\" nor \"prompt\" in the body");
    }
    if (rc == CAL_ETOOBIG) cal_why(why, why_len, CAL_EPROTO, "a part of the prompt is over 64 MiB");
done:
    json_decref(o);
    if (rc) {
        for (int k = 0; k < CAL_PART_N; k++) cal_buf_free(&b[k]);
        return rc;
    }
    for (int k = 0; k < CAL_PART_N; k++) {
        out->text[k] = take(&b[k]);
        if (!out->text[k]) { cal_prefix_free(out); return CAL_ENOMEM; }
        out->part[k].chars = cal_utf8_chars(out->text[k], strlen(out->text[k]));
        out->part[k].tokens = (out->part[k].chars + 3) / 4;
        out->part[k].estimated = out->part[k].chars > 0;
    }
    return CAL_OK;
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *cal_proxy_turn_json(const cal_proxy_turn *t)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "turn", json_integer(t->index));
    json_object_set_new(o, "wall_ns", json_integer(t->wall_ns));
    json_object_set_new(o, "path", json_string(t->path));
    json_object_set_new(o, "status", json_integer(t->status));
    if (t->error[0]) json_object_set_new(o, "error", json_string(t->error));
    json_object_set_new(o, "stream", json_boolean(t->prefix.stream));
    json_object_set_new(o, "messages", json_integer((json_int_t)t->prefix.n_messages));
    json_object_set_new(o, "tools", json_integer((json_int_t)t->prefix.n_tools));
    json_t *pre = json_object();
    for (int k = 0; k < CAL_PART_N; k++) {
        const cal_prefix_part *p = &t->prefix.part[k];
        json_object_set_new(pre, cal_prefix_part_names[k],
                            json_pack("{s:I,s:I,s:b}", "chars", (json_int_t)p->chars,
                                      "tokens", (json_int_t)p->tokens, "estimated", p->estimated));
    }
    json_object_set_new(o, "prefix", pre);
    json_object_set_new(o, "prefix_tokens", json_integer(t->prefix_tokens));
    json_object_set_new(o, "prefix_tokens_estimated", json_boolean(t->prefix_estimated));
    json_object_set_new(o, "usage_prompt_tokens",
                        t->usage_prompt_tokens >= 0 ? json_integer(t->usage_prompt_tokens) : json_null());
    json_object_set_new(o, "ttft_s", num_or_null(t->ttft_s));
    json_object_set_new(o, "decode_s", num_or_null(t->decode_s));
    json_object_set_new(o, "turn_s", num_or_null(t->turn_s));
    json_object_set_new(o, "output_tokens", t->output_tokens >= 0 ? json_integer(t->output_tokens) : json_null());
    json_object_set_new(o, "output_tokens_from", json_string(t->output_from_usage ? "usage" : "chunks"));
    json_object_set_new(o, "text_chunks", json_integer(t->text_chunks));
    json_object_set_new(o, "text_reads", json_integer(t->text_reads));
    json_object_set_new(o, "decode_tok_s", num_or_null(t->decode_tok_s));
    json_object_set_new(o, "ttft_share", num_or_null(t->ttft_share));
    return o;
}
