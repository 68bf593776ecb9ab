/* Datasets the user has, nothing downloaded: prompt files (text, JSONL),
 * ShareGPT-style conversations, OpenAI chat request logs and caliper's own
 * proxy logs, parsed into prompts (or, for a proxy log, recorded sizes),
 * identified by name and the SHA-256 of the file's bytes, and sampled by a
 * seeded draw so a run's prompts follow from its seed. */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "lib/util/c_locale.h"
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/utf8.h"
#include "caliper/workload_traffic.h"
#include "lib/util/json_span.h"

static const char *const FORMATS[CAL_DS_N] = {"text", "jsonl", "sharegpt", "openai-chat",
                                              "proxy-log"};

const char *cal_ds_format_name(cal_ds_format f)
{
    return (unsigned)f < CAL_DS_N ? FORMATS[f] : "unknown";
}

int cal_ds_format_parse(const char *s, cal_ds_format *out)
{
    for (int i = 0; s && i < CAL_DS_N; i++)
        if (!strcmp(s, FORMATS[i])) {
            *out = (cal_ds_format)i;
            return CAL_OK;
        }
    return CAL_EINVAL;
}

typedef struct acc {
    cal_dataset *d;
    size_t cap;
} acc;

static int add(acc *a, const char *text, size_t tlen, int prompt_tokens, int output_tokens,
               int output_chars)
{
    cal_dataset *d = a->d;
    if (d->n >= CAL_DS_MAX_ENTRIES) return CAL_ETOOBIG;
    if (d->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        cal_ds_entry *e = realloc(d->e, nc * sizeof *e);
        if (!e) return CAL_ENOMEM;
        d->e = e;
        a->cap = nc;
    }
    cal_ds_entry *e = &d->e[d->n];
    e->text = NULL;
    if (text && !(e->text = strndup(text, tlen))) return CAL_ENOMEM;
    e->prompt_tokens = prompt_tokens;
    e->output_tokens = output_tokens;
    e->output_chars = output_chars;
    d->n++;
    return CAL_OK;
}

/* A whole-number field as a length: -1 when absent or not a positive int. */
static int jlen(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x >= 1 && x <= (1 << 24) ? (int)x : -1;
}

/* An entry's output length (output_tokens, max_tokens...): absent or null
 * is unknown (-1, the run's --max-tokens applies); a value that is not a
 * whole number in [lo, 2^24] refuses the file, naming the line and field.
 * Replacing −5, 2.7 or 1e308 silently by the flag's value would run another
 * workload than the file's. */
static int out_len(const json_t *o, const char *k, int lo, size_t lineno, int *out, char *why,
                   size_t wl)
{
    json_t *v = json_object_get(o, k);
    *out = -1;
    if (!v || json_is_null(v)) return CAL_OK;
    if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= (1 << 24)) {
        *out = json_integer_value(v) >= 1 ? (int)json_integer_value(v) : -1;
        return CAL_OK;
    }
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10));
    cal_snprintf(why, wl, "line %zu: \"%s\" is %.40s: not a whole number of tokens in [%d, %d]",
                 lineno, k, t ? t : "?", lo, 1 << 24);
    free(t);
    return CAL_EPROTO;
}

static int utf8_ok(const char *s, size_t n) { return cal_utf8_check(s, n) == n; }

/* Each line of buf through fn; empty lines skipped. */
typedef int (*line_fn)(acc *a, const char *line, size_t n, size_t lineno, char *why, size_t wl);

static int lines(acc *a, const char *buf, size_t len, line_fn fn, char *why, size_t wl)
{
    size_t lineno = 0, at = 0;
    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
        lineno++;
        size_t m = n;
        if (m && buf[at + m - 1] == '\r') m--;
        int blank = 1;
        for (size_t i = 0; i < m && blank; i++)
            if (buf[at + i] != ' ' && buf[at + i] != '\t') blank = 0;
        if (!blank) {
            int rc = fn(a, buf + at, m, lineno, why, wl);
            if (rc) return rc;
        }
        at += n + 1;
    }
    return CAL_OK;
}

static int text_line(acc *a, const char *line, size_t n, size_t lineno, char *why, size_t wl)
{
    if (memchr(line, '\0', n) || !utf8_ok(line, n)) {
        cal_snprintf(why, wl, "line %zu: not valid UTF-8 text", lineno);
        return CAL_EPROTO;
    }
    return add(a, line, n, -1, -1, -1);
}

static json_t *jline(const char *line, size_t n, size_t lineno, char *why, size_t wl)
{
    json_error_t je;
    json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!j) cal_snprintf(why, wl, "line %zu: malformed JSON: %s", lineno, je.text);
    return j;
}

static int jsonl_line(acc *a, const char *line, size_t n, size_t lineno, char *why, size_t wl)
{
    json_t *j = jline(line, n, lineno, why, wl);
    if (!j) return CAL_EPROTO;
    json_t *p = json_is_string(j) ? j : json_object_get(j, "prompt");
    if (!p && json_is_object(j)) p = json_object_get(j, "text");
    int rc = CAL_OK;
    if (!json_is_string(p)) {
        cal_snprintf(why, wl, "line %zu: neither a JSON string nor an object with a string "
                          "\"prompt\" or \"text\"", lineno);
        rc = CAL_EPROTO;
    } else if (json_string_length(p) == 0) {
        a->d->skipped++;
    } else {
        int out = -1;
        rc = out_len(j, "output_tokens", 1, lineno, &out, why, wl);
        if (!rc && out < 0) rc = out_len(j, "max_tokens", 1, lineno, &out, why, wl);
        if (!rc) rc = add(a, json_string_value(p), json_string_length(p), -1, out, -1);
    }
    json_decref(j);
    return rc;
}

/* A message's content as text: a string, or the text parts of an array. */
static int content_text(const json_t *c, cal_buf *into)
{
    if (json_is_string(c)) return cal_buf_append(into, json_string_value(c), json_string_length(c));
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "text");
        int rc = json_is_string(t) ? cal_buf_append(into, json_string_value(t), json_string_length(t)) : 0;
        if (rc) return rc;
    }
    return 0;
}

static int openai_line(acc *a, const char *line, size_t n, size_t lineno, char *why, size_t wl)
{
    json_t *j = jline(line, n, lineno, why, wl);
    if (!j) return CAL_EPROTO;
    json_t *msgs = json_object_get(j, "messages");
    /* a log may wrap the body: {"body": {...}} or {"request": {...}} */
    json_t *body = j;
    if (!msgs) {
        body = json_object_get(j, "body");
        if (!body) body = json_object_get(j, "request");
        msgs = json_object_get(body, "messages");
    }
    int rc = CAL_OK;
    if (!json_is_array(msgs)) {
        cal_snprintf(why, wl, "line %zu: no \"messages\" array (an OpenAI chat request body)", lineno);
        json_decref(j);
        return CAL_EPROTO;
    }
    /* the whole context the server reads: every message's text, in order */
    cal_buf txt = CAL_BUF_INIT(CAL_DS_MAX_BYTES);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (txt.len && (rc = cal_buf_append(&txt, "\n", 1))) break;
        if ((rc = content_text(json_object_get(m, "content"), &txt))) break;
    }
    if (rc == CAL_OK) {
        if (txt.len == 0) a->d->skipped++;
        else {
            int out = -1;
            rc = out_len(body, "max_completion_tokens", 1, lineno, &out, why, wl);
            if (!rc && out < 0) rc = out_len(body, "max_tokens", 1, lineno, &out, why, wl);
            if (!rc) rc = add(a, txt.data, txt.len, -1, out, -1);
        }
    }
    cal_buf_free(&txt);
    json_decref(j);
    return rc;
}

static int proxy_line(acc *a, const char *line, size_t n, size_t lineno, char *why, size_t wl)
{
    json_t *j = jline(line, n, lineno, why, wl);
    if (!j) return CAL_EPROTO;
    int rc = CAL_OK;
    json_t *pt = json_object_get(j, "prefix_tokens");
    if (!json_is_object(j) || !json_is_integer(pt)) {
        cal_snprintf(why, wl, "line %zu: not a turn of a caliper proxy log (no \"prefix_tokens\")", lineno);
        rc = CAL_EPROTO;
    } else {
        json_int_t st = json_integer_value(json_object_get(j, "status"));
        int p = jlen(j, "prefix_tokens");
        int out = -1;
        if ((st && (st < 200 || st > 299)) || p < 0) a->d->skipped++;   /* failed turns */
        /* a recorded turn may have produced 0 tokens: unknown for a replay */
        else if (!(rc = out_len(j, "output_tokens", 0, lineno, &out, why, wl)))
            rc = add(a, NULL, 0, p, out, -1);
    }
    json_decref(j);
    return rc;
}

/* One conversation: its first human message is the prompt, the reply after
 * it gives the output length in characters. */
static int conversation(acc *a, const json_t *conv, size_t i, char *why, size_t wl)
{
    json_t *turns = json_object_get(conv, "conversations");
    if (!turns) turns = json_object_get(conv, "conversation");
    if (!json_is_array(turns)) {
        cal_snprintf(why, wl, "item %zu: no \"conversations\" array", i);
        return CAL_EPROTO;
    }
    const json_t *ask = NULL, *reply = NULL;
    size_t k;
    json_t *t;
    json_array_foreach(turns, k, t) {
        const char *from = json_string_value(json_object_get(t, "from"));
        if (!from) from = json_string_value(json_object_get(t, "role"));
        json_t *v = json_object_get(t, "value");
        if (!v) v = json_object_get(t, "content");
        if (!from || !json_is_string(v)) continue;
        if (!ask && (!strcmp(from, "human") || !strcmp(from, "user"))) ask = v;
        else if (ask && !reply && (!strcmp(from, "gpt") || !strcmp(from, "assistant") ||
                                   !strcmp(from, "chatgpt"))) reply = v;
    }
    if (!ask || json_string_length(ask) == 0) {
        a->d->skipped++;
        return CAL_OK;
    }
    int oc = reply ? (int)cal_utf8_chars(json_string_value(reply), json_string_length(reply)) : -1;
    return add(a, json_string_value(ask), json_string_length(ask), -1, -1, oc);
}

/* A ShareGPT file is one array of conversations. Its items are counted
 * against CAL_DS_MAX_ENTRIES before any is decoded, then decoded one at a
 * time: peak memory is the file, the prompts kept and one conversation's
 * tree, not a tree of the whole file (20 times its size in jansson): within
 * 2 × the file + 96 MiB (tests/e2e/test_input_memory.sh). */
static int sharegpt(acc *a, const char *buf, size_t len, char *why, size_t wl)
{
    long items = cal_jspan_count(buf, len, 0, CAL_DS_MAX_ENTRIES);
    if (items < 0) {
        /* say where: jansson's message on the whole text */
        json_error_t je;
        json_t *j = json_loadb(buf, len, 0, &je);
        if (j) cal_snprintf(why, wl, "not a JSON array of conversations");
        else cal_snprintf(why, wl, "line %d: malformed JSON: %s", je.line, je.text);
        json_decref(j);
        return CAL_EPROTO;
    }
    if ((unsigned long)items > CAL_DS_MAX_ENTRIES) {
        cal_snprintf(why, wl, "over %u items (conversations, skipped ones included): a dataset "
                     "holds at most that many", CAL_DS_MAX_ENTRIES);
        return CAL_ETOOBIG;
    }
    if (a->cap < (size_t)items) {   /* one allocation: no doubling past the count */
        cal_ds_entry *e = realloc(a->d->e, (items ? (size_t)items : 1) * sizeof *e);
        if (!e) return CAL_ENOMEM;
        a->d->e = e;
        a->cap = items ? (size_t)items : 1;
    }
    size_t at = 0, s, n;
    cal_jspan_open_array(buf, len, &at);
    int rc = CAL_OK, r;
    for (size_t i = 0; rc == CAL_OK && (r = cal_jspan_next(buf, len, &at, &s, &n)) == 1; i++) {
        json_error_t je;
        json_t *conv = json_loadb(buf + s, n, 0, &je);
        if (!conv) {
            cal_snprintf(why, wl, "line %zu: item %zu: malformed JSON: %s",
                         cal_jspan_line(buf, s) + (size_t)je.line - 1, i, je.text);
            return CAL_EPROTO;
        }
        rc = conversation(a, conv, i, why, wl);
        json_decref(conv);
    }
    for (; rc == CAL_OK && at < len; at++)
        if (buf[at] != ' ' && buf[at] != '\t' && buf[at] != '\n' && buf[at] != '\r') {
            cal_snprintf(why, wl, "line %zu: text after the array of conversations",
                         cal_jspan_line(buf, at));
            rc = CAL_EPROTO;
        }
    return rc;
}

/* The line formats hold one item a line: non-blank lines are counted
 * against CAL_DS_MAX_ENTRIES before any is decoded. */
static int count_lines(const char *buf, size_t len, char *why, size_t wl)
{
    size_t items = 0, at = 0;
    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
        for (size_t i = 0; i < n; i++) {
            char c = buf[at + i];
            if (c != ' ' && c != '\t' && c != '\r') { items++; break; }
        }
        if (items > CAL_DS_MAX_ENTRIES) {
            cal_snprintf(why, wl, "over %u items (non-blank lines, skipped ones included): a "
                         "dataset holds at most that many", CAL_DS_MAX_ENTRIES);
            return CAL_ETOOBIG;
        }
        at += n + 1;
    }
    return CAL_OK;
}

static int sha256_hex(const char *buf, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdn = 0;
    if (!EVP_Digest(buf, len, md, &mdn, EVP_sha256(), NULL) || mdn != 32) return CAL_ENOMEM;
    for (unsigned i = 0; i < 32; i++) cal_snprintf(out + 2 * i, 3, "%02x", md[i]);
    return CAL_OK;
}

int cal_dataset_parse(const char *buf, size_t len, cal_ds_format f, const char *name,
                      cal_dataset **out, char *why, size_t why_len)
{
    char scratch[8];
    if (!why) { why = scratch; why_len = sizeof scratch; }
    why[0] = '\0';
    *out = NULL;
    if ((unsigned)f >= CAL_DS_N) {
        cal_snprintf(why, why_len, "format %d is not a dataset format", (int)f);
        return CAL_EINVAL;
    }
    if (len > CAL_DS_MAX_BYTES) {
        cal_snprintf(why, why_len, "%zu bytes: over the %u MiB a dataset may have", len,
                 CAL_DS_MAX_BYTES >> 20);
        return CAL_ETOOBIG;
    }
    acc a = {.d = calloc(1, sizeof(cal_dataset))};
    if (!a.d) return CAL_ENOMEM;
    a.d->format = f;
    cal_snprintf(a.d->name, sizeof a.d->name, "%s", name ? name : "");
    int rc = sha256_hex(buf ? buf : "", buf ? len : 0, a.d->sha256);
    if (rc == CAL_OK && buf && f != CAL_DS_SHAREGPT) rc = count_lines(buf, len, why, why_len);
    if (rc == CAL_OK && buf) {
        switch (f) {
        case CAL_DS_TEXT: rc = lines(&a, buf, len, text_line, why, why_len); break;
        case CAL_DS_JSONL: rc = lines(&a, buf, len, jsonl_line, why, why_len); break;
        case CAL_DS_OPENAI_CHAT: rc = lines(&a, buf, len, openai_line, why, why_len); break;
        case CAL_DS_PROXY_LOG: rc = lines(&a, buf, len, proxy_line, why, why_len); break;
        case CAL_DS_SHAREGPT: rc = sharegpt(&a, buf, len, why, why_len); break;
        default: break;
        }
    }
    if (rc == CAL_ETOOBIG && !why[0])
        cal_snprintf(why, why_len, "over %u entries", CAL_DS_MAX_ENTRIES);
    if (rc == CAL_OK && a.d->n == 0) {
        cal_snprintf(why, why_len, "no usable prompt in it (%zu skipped as empty or failed)",
                 a.d->skipped);
        rc = CAL_EPROTO;
    }
    if (rc) {
        cal_dataset_free(&a.d);
        return rc;
    }
    *out = a.d;
    return CAL_OK;
}

int cal_dataset_load(const char *path, cal_ds_format f, cal_dataset **out, char *why,
                     size_t why_len)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        cal_snprintf(why, why_len, "\"%s\": %s", path, strerror(errno));
        return CAL_EIO;
    }
    /* the size first: a file over the cap is refused before a byte is read,
     * and one buffer of its size is all the reading takes (no doubling) */
    struct stat st;
    size_t cap = 1 << 16, n = 0;
    if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode)) {
        if ((uintmax_t)st.st_size > CAL_DS_MAX_BYTES) {
            cal_snprintf(why, why_len, "\"%s\": %jd bytes: over the %u MiB a dataset may have", path,
                         (intmax_t)st.st_size, CAL_DS_MAX_BYTES >> 20);
            fclose(fp);
            return CAL_ETOOBIG;
        }
        cap = (size_t)st.st_size + 1;   /* + 1: the read that sees the end */
    }
    char *buf = malloc(cap);
    int rc = buf ? CAL_OK : CAL_ENOMEM;
    while (rc == CAL_OK) {
        if (n == cap) {
            if (cap > CAL_DS_MAX_BYTES) {
                cal_snprintf(why, why_len, "\"%s\": over the %u MiB a dataset may have", path,
                         CAL_DS_MAX_BYTES >> 20);
                rc = CAL_ETOOBIG;
                break;
            }
            char *b = realloc(buf, cap * 2);
            if (!b) { rc = CAL_ENOMEM; break; }
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, fp);
        n += k;
        if (k == 0) {
            if (ferror(fp)) {
                cal_snprintf(why, why_len, "\"%s\": read error", path);
                rc = CAL_EIO;
            }
            break;
        }
    }
    fclose(fp);
    if (rc == CAL_OK) {
        const char *base = strrchr(path, '/');
        rc = cal_dataset_parse(buf, n, f, base ? base + 1 : path, out, why, why_len);
    }
    free(buf);
    return rc;
}

void cal_dataset_free(cal_dataset **d)
{
    if (!d || !*d) return;
    for (size_t i = 0; i < (*d)->n; i++) free((*d)->e[i].text);
    free((*d)->e);
    free(*d);
    *d = NULL;
}

size_t cal_dataset_pick(const cal_dataset *d, uint64_t seed, uint64_t index)
{
    uint64_t z = seed ^ (index * 0xd1b54a32d192ed03ULL) ^ 0x5851f42d4c957f2dULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return d->n ? (size_t)(z % d->n) : 0;
}

char *cal_dataset_id(const cal_dataset *d, char *buf, size_t n)
{
    cal_snprintf(buf, n, "%.64s@%.12s", d->name, d->sha256);
    return buf;
}
