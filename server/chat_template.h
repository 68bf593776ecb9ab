/* caliper serve — chat templates: the text a list of chat messages becomes
 * before it is tokenized. caliper's own ("<|role|>\ncontent\n" blocks) for
 * its byte vocabulary, and the families real models ship, recognised from a
 * GGUF file's tokenizer.chat_template (a Jinja program caliper does not run:
 * it recognises which family the program is and renders that family's text
 * itself, exactly as the program would for plain text messages):
 *
 *   chatml   Qwen's: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message,
 *            then "<|im_start|>assistant\n"; a template that opens with a
 *            default system message when the first message is not one
 *            (Qwen 1.5–2.5) keeps it
 *   llama3   "<|begin_of_text|>", then per message
 *            "<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>"
 *            (content trimmed), then the assistant's header; Llama 3.1–3.2's
 *            always open with a system block "Cutting Knowledge Date:
 *            December 2023\nToday Date: DD Mon YYYY\n\n" + the system text,
 *            the date today's as llama.cpp renders it (its date_string and
 *            strftime_now; Hugging Face's would be "26 Jul 2024" for 3.1)
 *   mistral  "<s>", "[INST] USER [/INST]" (each space there or not, as the
 *            template writes it), "ASSISTANT</s>"; a system message joins
 *            the last user message ("SYSTEM\n\nUSER") where the template
 *            keeps one (Mistral NeMo, v0.3), else it is refused (v0.1
 *            raises on one)
 *
 * Messages are system, user and assistant (roles alternating for mistral);
 * a tool or function message is refused under a model's template, whose
 * own tool formats caliper does not render.
 *
 * An unrecognised template is refused by name (cal_tpl_recognize), never
 * replaced silently: `caliper serve --chat-template NAME` chooses one. */
#ifndef CALIPER_SERVER_CHAT_TEMPLATE_H
#define CALIPER_SERVER_CHAT_TEMPLATE_H
#include <stddef.h>
#include "caliper/buf.h"

typedef enum cal_tpl_kind {
    CAL_TPL_CALIPER = 0, CAL_TPL_CHATML, CAL_TPL_LLAMA3, CAL_TPL_MISTRAL, CAL_TPL_COUNT
} cal_tpl_kind;

#define CAL_TPL_SYSTEM_MAX 4096   /* a default system message's bytes, NUL included */

typedef struct cal_chat_template {
    cal_tpl_kind kind;
    char default_system[CAL_TPL_SYSTEM_MAX];  /* chatml: the system message a
                                                 template adds when the first
                                                 message is not one; "" none */
    int  dated_system;      /* llama3: the 3.1+ system block with the dates */
    char today[16];         /* llama3 dated: the date to write ("03 Dec 2026");
                               "": today's, local time, at each render */
    int  inst_lead;         /* mistral: "[INST] " (1) or "[INST]" (0) */
    int  inst_trail;        /* mistral: " [/INST]" (1) or "[/INST]" (0) */
    int  sys_last_user;     /* mistral: a system message joins the last user one */
    char bos[32], eos[32];  /* the vocabulary's BOS and EOS text (the
                               template's bos_token, eos_token); "": the
                               family's own ("<|begin_of_text|>"; "<s>",
                               "</s>") */
    int  bos_added;         /* the tokenizer adds BOS itself (the vocabulary's
                               add_bos): the text starts without it, as
                               llama.cpp drops a template's leading BOS then */
} cal_chat_template;

/* "caliper", "chatml", "llama3", "mistral"; NULL out of range. */
const char *cal_tpl_name(cal_tpl_kind k);
/* The kind named s, or -1. A named template takes its family's plain form
 * (no default system, llama3 undated, mistral v0.1's "[INST] … [/INST]"). */
int cal_tpl_parse(const char *s, cal_chat_template *out);

/* Is s[n] a template's text at all: CAL_OK; CAL_EINVAL with why for 0
 * bytes, a NUL byte or invalid UTF-8 (naming the byte). A file's
 * tokenizer.chat_template goes through this before cal_tpl_recognize. */
int cal_tpl_check_text(const char *s, size_t n, char *why, size_t why_len);
/* Which family the Jinja text jinja is. CAL_OK with *out filled, or
 * CAL_EINVAL with why naming what was not recognised, or a ChatML default
 * system message it cannot hold as written (over CAL_TPL_SYSTEM_MAX - 1
 * bytes, not UTF-8, an escape it does not decode): never cut or dropped. */
int cal_tpl_recognize(const char *jinja, cal_chat_template *out, char *why, size_t why_len);

typedef struct cal_tpl_msg {
    const char *role;      /* "system", "user", "assistant", "tool", ... */
    const char *content;   /* UTF-8, n bytes */
    size_t      n;
} cal_tpl_msg;

/* Append the rendered prompt of msgs[0..n) and the assistant's opening to
 * *b. CAL_OK; CAL_ETOOBIG / CAL_ENOMEM from the buffer; CAL_EINVAL with
 * *bad_msg set to the message's index and why[] the reason, for a message
 * the template cannot take (mistral: a system message, or roles out of
 * user/assistant alternation). */
int cal_tpl_render(const cal_chat_template *t, const cal_tpl_msg *msgs, size_t n, cal_buf *b,
                   size_t *bad_msg, char *why, size_t why_len);

#endif
