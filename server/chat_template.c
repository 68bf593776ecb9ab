/* caliper serve — chat templates (see chat_template.h). */
#include "server/chat_template.h"
#include "caliper/error.h"
#include "caliper/utf8.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const names[CAL_TPL_COUNT] = {"caliper", "chatml", "llama3", "mistral"};

const char *cal_tpl_name(cal_tpl_kind k)
{
    return (int)k >= 0 && k < CAL_TPL_COUNT ? names[k] : NULL;
}

int cal_tpl_parse(const char *s, cal_chat_template *out)
{
    for (int i = 0; s && i < CAL_TPL_COUNT; i++)
        if (!strcmp(s, names[i])) {
            memset(out, 0, sizeof *out);
            out->kind = (cal_tpl_kind)i;
            out->inst_lead = out->inst_trail = 1;
            return i;
        }
    return -1;
}

/* What literal_between found. */
enum { LIT_NONE = 0, LIT_OK, LIT_LONG, LIT_ESCAPE };

/* The text of the Jinja string literal that starts right after `open` in
 * jinja and runs to `close`, decoded (Python's escapes \n \t \r \\ \'
 * \"), into out[n]. LIT_NONE when no such literal exists (the text between
 * them leaves the literal: an unescaped quote, or an expression joined
 * with +); LIT_LONG when it is longer than n - 1 bytes (*need its length);
 * LIT_ESCAPE for an escape it does not decode (*need its offset). */
static int literal_between(const char *jinja, const char *open, const char *close, char *out,
                           size_t n, size_t *need)
{
    /* linear in the template however it repeats open: close is searched
     * again only once passed, and a scan that leaves the literal at f
     * resumes the search for open at f (an open before f would scan the
     * same bytes to the same end) */
    const char *e = NULL;
    for (const char *p = strstr(jinja, open); p;) {
        const char *a = p + strlen(open);
        if (!e || e < a)
            e = strstr(a, close);
        if (!e)
            return LIT_NONE;
        size_t k = 0;
        const char *q = a;
        for (; q < e; q++) {
            char c = *q;
            if (c == '\'' || c == '"' || c == '{' || c == '}')
                break;
            if (c == '\\' && q + 1 < e) {
                const char *from = "ntr\\'\"", *to = "\n\t\r\\'\"";
                const char *x = q[1] ? strchr(from, q[1]) : NULL;
                if (!x) {
                    *need = (size_t)(q - jinja);
                    return LIT_ESCAPE;
                }
                c = to[x - from];
                q++;
            }
            if (k + 1 < n)
                out[k] = c;
            k++;
        }
        if (q < e) {   /* it left the literal at q */
            p = strstr(q, open);
            continue;
        }
        if (k + 1 > n) {
            out[0] = '\0';
            *need = k;
            return LIT_LONG;
        }
        out[k] = '\0';
        return LIT_OK;
    }
    return LIT_NONE;
}

int cal_tpl_check_text(const char *s, size_t n, char *why, size_t why_len)
{
    if (n == 0)
        return cal_why(why, why_len, CAL_EINVAL, "it is empty (0 bytes)");
    const char *z = memchr(s, '\0', n);
    if (z)
        return cal_why(why, why_len, CAL_EINVAL, "byte %zu of its %zu is NUL: a template is "
                       "text", (size_t)(z - s), n);
    size_t bad = cal_utf8_check(s, n);
    if (bad < n)
        return cal_why(why, why_len, CAL_EINVAL, "byte %zu of its %zu is not UTF-8: a template "
                       "is text", bad, n);
    return CAL_OK;
}

int cal_tpl_recognize(const char *jinja, cal_chat_template *out, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (!jinja || !jinja[0])
        return cal_why(why, why_len, CAL_EINVAL, "the chat template is empty");
    if (strstr(jinja, "<|im_start|>")) {
        out->kind = CAL_TPL_CHATML;
        /* "<|im_start|>system\n" as a literal up to its "<|im_end|>": the
         * default system message (the one joined with messages[0] is not a
         * literal and is skipped) */
        size_t need = 0;
        char *d = out->default_system;
        int lr = literal_between(jinja, "<|im_start|>system\\n", "<|im_end|>", d,
                                 sizeof out->default_system, &need);
        if (lr == LIT_NONE)
            lr = literal_between(jinja, "<|im_start|>system\n", "<|im_end|>", d,
                                 sizeof out->default_system, &need);
        if (lr == LIT_LONG)
            return cal_why(why, why_len, CAL_EINVAL, "its default system message is %zu bytes, "
                           "over the %d caliper holds", need, CAL_TPL_SYSTEM_MAX - 1);
        if (lr == LIT_ESCAPE)
            return cal_why(why, why_len, CAL_EINVAL, "its default system message has an escape "
                           "caliper does not decode (\"%.4s\" at byte %zu)", jinja + need,
                           need);
        size_t dl = strlen(d), bad = cal_utf8_check(d, dl);
        if (bad < dl) {
            d[0] = '\0';
            return cal_why(why, why_len, CAL_EINVAL, "its default system message is not UTF-8 "
                           "(byte %zu of its %zu)", bad, dl);
        }
        return CAL_OK;
    }
    if (strstr(jinja, "<|start_header_id|>")) {
        out->kind = CAL_TPL_LLAMA3;
        /* the date is today's, as llama.cpp renders it: it defines
         * date_string (Llama 3.1, 3.3) and strftime_now (3.2) */
        out->dated_system = strstr(jinja, "Cutting Knowledge Date") != NULL;
        return CAL_OK;
    }
    if (strstr(jinja, "[INST]")) {
        out->kind = CAL_TPL_MISTRAL;
        out->inst_lead = strstr(jinja, "'[INST] '") || strstr(jinja, "\"[INST] \"");
        out->inst_trail = strstr(jinja, "' [/INST]'") || strstr(jinja, "\" [/INST]\"");
        out->sys_last_user = strstr(jinja, "system_message") != NULL;
        if (strstr(jinja, "[SYSTEM_PROMPT]") || strstr(jinja, "<<SYS>>") ||
            strstr(jinja, "[THINK]"))
            return cal_why(why, why_len, CAL_EINVAL, "a Mistral-style template with a system "
                           "prompt block or reasoning caliper does not render");
        return CAL_OK;
    }
    return cal_why(why, why_len, CAL_EINVAL, "the chat template is none of the families "
                   "caliper renders (ChatML, Llama 3, Mistral)");
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Jinja's |trim on ASCII whitespace */
static int put_trimmed(cal_buf *b, const char *s, size_t n)
{
    while (n && is_ws(*s)) s++, n--;
    while (n && is_ws(s[n - 1])) n--;
    return cal_buf_append(b, s, n);
}

/* "%d %b %Y" in English, local time, as the template's strftime_now */
static void today(char *out, size_t n)
{
    static const char *const mon[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
    if (!localtime_r(&t, &tm)) {
        snprintf(out, n, "26 Jul 2024");
        return;
    }
    snprintf(out, n, "%02d %s %d", tm.tm_mday, mon[tm.tm_mon % 12], tm.tm_year + 1900);
}

static int render_chatml(const cal_chat_template *t, const cal_tpl_msg *m, size_t n, cal_buf *b)
{
    int rc = CAL_OK;
    if (t->default_system[0] && (n == 0 || strcmp(m[0].role, "system")))
        rc = cal_buf_printf(b, "<|im_start|>system\n%s<|im_end|>\n", t->default_system);
    for (size_t i = 0; i < n && rc == CAL_OK; i++) {
        if ((rc = cal_buf_printf(b, "<|im_start|>%s\n", m[i].role)) == CAL_OK &&
            (rc = cal_buf_append(b, m[i].content, m[i].n)) == CAL_OK)
            rc = cal_buf_puts(b, "<|im_end|>\n");
    }
    return rc ? rc : cal_buf_puts(b, "<|im_start|>assistant\n");
}

static int render_llama3(const cal_chat_template *t, const cal_tpl_msg *m, size_t n, cal_buf *b)
{
    int rc = t->bos_added ? CAL_OK : cal_buf_puts(b, t->bos[0] ? t->bos : "<|begin_of_text|>");
    size_t i = 0;
    if (rc == CAL_OK && t->dated_system) {
        char day[16];
        if (t->today[0])
            snprintf(day, sizeof day, "%s", t->today);
        else
            today(day, sizeof day);
        rc = cal_buf_printf(b, "<|start_header_id|>system<|end_header_id|>\n\n"
                            "Cutting Knowledge Date: December 2023\nToday Date: %s\n\n", day);
        if (rc == CAL_OK && n > 0 && !strcmp(m[0].role, "system")) {
            rc = put_trimmed(b, m[0].content, m[0].n);
            i = 1;
        }
        if (rc == CAL_OK)
            rc = cal_buf_puts(b, "<|eot_id|>");
    }
    for (; i < n && rc == CAL_OK; i++) {
        if ((rc = cal_buf_printf(b, "<|start_header_id|>%s<|end_header_id|>\n\n", m[i].role)) ==
                CAL_OK &&
            (rc = put_trimmed(b, m[i].content, m[i].n)) == CAL_OK)
            rc = cal_buf_puts(b, "<|eot_id|>");
    }
    return rc ? rc : cal_buf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static int render_mistral(const cal_chat_template *t, const cal_tpl_msg *m, size_t n, cal_buf *b,
                          size_t *bad, char *why, size_t why_len)
{
    size_t first = n > 0 && !strcmp(m[0].role, "system") && t->sys_last_user ? 1 : 0;
    size_t last_user = n;
    for (size_t i = first; i < n; i++) {
        int user = !strcmp(m[i].role, "user");
        if (user)
            last_user = i;
        if ((user || !strcmp(m[i].role, "assistant")) && user == ((i - first) % 2 == 0))
            continue;
        *bad = i;
        return cal_why(why, why_len, CAL_EINVAL, "the model's Mistral template takes %suser "
                       "and assistant messages in turn, starting with user (message %zu is %s)",
                       t->sys_last_user ? "an optional system message, then " : "", i,
                       m[i].role);
    }
    int rc = t->bos_added ? CAL_OK : cal_buf_puts(b, t->bos[0] ? t->bos : "<s>");
    for (size_t i = first; i < n && rc == CAL_OK; i++) {
        if ((i - first) % 2 == 0) {
            rc = cal_buf_puts(b, t->inst_lead ? "[INST] " : "[INST]");
            if (rc == CAL_OK && first && i == last_user &&
                (rc = cal_buf_append(b, m[0].content, m[0].n)) == CAL_OK)
                rc = cal_buf_puts(b, "\n\n");
            if (rc == CAL_OK && (rc = cal_buf_append(b, m[i].content, m[i].n)) == CAL_OK)
                rc = cal_buf_puts(b, t->inst_trail ? " [/INST]" : "[/INST]");
        } else if ((rc = cal_buf_append(b, m[i].content, m[i].n)) == CAL_OK) {
            rc = cal_buf_puts(b, t->eos[0] ? t->eos : "</s>");
        }
    }
    return rc;
}

static int render_caliper(const cal_tpl_msg *m, size_t n, cal_buf *b)
{
    int rc = CAL_OK;
    for (size_t i = 0; i < n && rc == CAL_OK; i++) {
        if ((rc = cal_buf_printf(b, "<|%s|>\n", m[i].role)) == CAL_OK &&
            (rc = cal_buf_append(b, m[i].content, m[i].n)) == CAL_OK)
            rc = cal_buf_puts(b, "\n");
    }
    return rc ? rc : cal_buf_puts(b, "<|assistant|>\n");
}

int cal_tpl_render(const cal_chat_template *t, const cal_tpl_msg *msgs, size_t n, cal_buf *b,
                   size_t *bad_msg, char *why, size_t why_len)
{
    size_t ignore;
    if (!bad_msg)
        bad_msg = &ignore;
    for (size_t i = 0; t && t->kind != CAL_TPL_CALIPER && i < n; i++)
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") &&
            strcmp(msgs[i].role, "assistant")) {
            *bad_msg = i;
            return cal_why(why, why_len, CAL_EINVAL, "the model's %s template renders %s "
                           "messages in its own format, which caliper does not: system, user "
                           "and assistant messages only", cal_tpl_name(t->kind), msgs[i].role);
        }
    switch (t ? t->kind : CAL_TPL_CALIPER) {
    case CAL_TPL_CHATML:  return render_chatml(t, msgs, n, b);
    case CAL_TPL_LLAMA3:  return render_llama3(t, msgs, n, b);
    case CAL_TPL_MISTRAL: return render_mistral(t, msgs, n, b, bad_msg, why, why_len);
    default:              return render_caliper(msgs, n, b);
    }
}
