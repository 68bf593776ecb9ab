/* Chunk interpreter: what one SSE event (or a non-streaming body) from an
 * OpenAI-compatible server says — generated text, usage, llama.cpp timings,
 * an in-stream error, finish_reason — in the shapes vLLM, SGLang, llama.cpp,
 * Ollama and OpenAI send.
 *
 * A targeted streaming read (yajl's callbacks): the few members the probe
 * needs are picked out as the parser meets them and nothing else is kept, so
 * a chunk costs no tree, no hash table and no per-value allocation (a jansson
 * tree per chunk was three quarters of the probe's instructions per chunk).
 * The bytes are still checked as JSON in full: one top-level object, valid
 * UTF-8, no trailing bytes, nesting at most MAX_DEPTH deep. A member the probe
 * reads that appears twice in one object is ambiguous and rejected. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl_parse.h>
#include "caliper/buf.h"
#include "caliper/error.h"
#include "caliper/probe.h"
#include "lib/util/c_locale.h"

#define MAX_DEPTH  2048     /* nesting, as jansson's parser allows */
#define MAX_FRAMES 8        /* the members read lie at most this deep */

/* The objects and arrays whose members are read; all others are skipped. */
enum { F_ROOT, F_ERROR, F_CHOICES, F_CHOICE, F_HOLDER, F_TOOLS, F_CALL, F_FUNCTION,
       F_USAGE, F_DETAILS, F_TIMINGS };

/* The member names read, per frame kind (K_NONE: any other). */
enum { K_NONE, K_ERROR, K_OBJECT, K_MESSAGE, K_CHOICES, K_USAGE, K_TIMINGS, K_SEND_NS,
       K_TEXT, K_DELTA, K_FINISH, K_REASONING_CONTENT, K_REASONING, K_CONTENT, K_TOOL_CALLS,
       K_FUNCTION, K_ARGUMENTS, K_PROMPT_TOKENS, K_COMPLETION_TOKENS, K_DETAILS,
       K_CACHED_TOKENS, K_PROMPT_MS, K_PREDICTED_MS, K_PREDICTED_N, K_CACHE_N };

/* The names read in each frame kind, looked up by the frame a key lands in
 * (on_key compares lengths first, so a key that is not read costs a few
 * compares and no memcmp in the common case). */
typedef struct keydef { unsigned char key, len; const char *name; } keydef;
#define KEY(k, name) { k, sizeof name - 1, name }
static const keydef k_root[] = {
    KEY(K_ERROR, "error"), KEY(K_OBJECT, "object"), KEY(K_MESSAGE, "message"),
    KEY(K_CHOICES, "choices"), KEY(K_USAGE, "usage"), KEY(K_TIMINGS, "timings"),
    KEY(K_SEND_NS, "send_ns") };
static const keydef k_error[] = { KEY(K_MESSAGE, "message") };
static const keydef k_choice[] = {
    KEY(K_TEXT, "text"), KEY(K_DELTA, "delta"), KEY(K_MESSAGE, "message"),
    KEY(K_FINISH, "finish_reason") };
static const keydef k_holder[] = {
    KEY(K_REASONING_CONTENT, "reasoning_content"), KEY(K_REASONING, "reasoning"),
    KEY(K_CONTENT, "content"), KEY(K_TOOL_CALLS, "tool_calls") };
static const keydef k_call[] = { KEY(K_FUNCTION, "function") };
static const keydef k_function[] = { KEY(K_ARGUMENTS, "arguments") };
static const keydef k_usage[] = {
    KEY(K_PROMPT_TOKENS, "prompt_tokens"), KEY(K_COMPLETION_TOKENS, "completion_tokens"),
    KEY(K_DETAILS, "prompt_tokens_details") };
static const keydef k_details[] = { KEY(K_CACHED_TOKENS, "cached_tokens") };
static const keydef k_timings[] = {
    KEY(K_PROMPT_MS, "prompt_ms"), KEY(K_PREDICTED_MS, "predicted_ms"),
    KEY(K_PREDICTED_N, "predicted_n"), KEY(K_CACHE_N, "cache_n") };
#define KEYS(a) { a, sizeof a / sizeof a[0] }
static const struct { const keydef *k; size_t n; } g_keys[] = {
    [F_ROOT] = KEYS(k_root), [F_ERROR] = KEYS(k_error), [F_CHOICES] = { NULL, 0 },
    [F_CHOICE] = KEYS(k_choice), [F_HOLDER] = KEYS(k_holder), [F_TOOLS] = { NULL, 0 },
    [F_CALL] = KEYS(k_call), [F_FUNCTION] = KEYS(k_function), [F_USAGE] = KEYS(k_usage),
    [F_DETAILS] = KEYS(k_details), [F_TIMINGS] = KEYS(k_timings),
};

/* yajl's allocations for one parse (its handle, lexer, stack and buffers)
 * come from a block in the parse's own frame, freed all at once when the
 * parse returns: a chunk costs no malloc. A parse that needs more (a long
 * escaped string, deep nesting) takes the rest from malloc. */
#define ARENA_BYTES 6144
typedef struct arena {
    size_t used;
    _Alignas(16) unsigned char mem[ARENA_BYTES];
} arena;
typedef struct ahead { size_t size; size_t pad; } ahead;   /* 16 bytes before each block */

static int in_arena(const arena *a, const void *p)
{
    const unsigned char *c = p;
    return c >= a->mem && c < a->mem + sizeof a->mem;
}

static void *arena_malloc(void *ctx, size_t n)
{
    arena *a = ctx;
    size_t need = sizeof(ahead) + ((n + 15) & ~(size_t)15);
    if (n > sizeof a->mem || need > sizeof a->mem - a->used) return malloc(n);
    ahead *h = (ahead *)(void *)(a->mem + a->used);
    h->size = n;
    a->used += need;
    return h + 1;
}

static void arena_free(void *ctx, void *p)
{
    arena *a = ctx;
    if (p && !in_arena(a, p)) free(p);       /* arena blocks go with the parse */
}

static void *arena_realloc(void *ctx, void *p, size_t n)
{
    arena *a = ctx;
    if (!p) return arena_malloc(ctx, n);
    if (!in_arena(a, p)) return realloc(p, n);
    ahead *h = (ahead *)p - 1;
    unsigned char *end = (unsigned char *)p + ((h->size + 15) & ~(size_t)15);
    if (end == a->mem + a->used) {           /* the last block grows in place */
        size_t start = (size_t)((unsigned char *)p - a->mem);
        size_t grown = (n + 15) & ~(size_t)15;
        if (n <= sizeof a->mem && grown <= sizeof a->mem - start) {
            a->used = start + grown;
            h->size = n;
            return p;
        }
    }
    void *q = arena_malloc(ctx, n);
    if (q) memcpy(q, p, h->size < n ? h->size : n);
    return q;
}

typedef struct frame { unsigned char kind, key; uint32_t seen; } frame;

typedef struct reader {
    cal_chunk *c;
    cal_buf   *text;
    int        rc;             /* the text buffer's first failure */
    frame      f[MAX_FRAMES];
    int        nf;             /* frames read into */
    int        skip;           /* depth inside a skipped object or array */
    int        started;        /* the top-level value began */
    int        err_kind;       /* 0 none, 1 string, 2 object, 3 other (root "error") */
    int        object_error;   /* root "object" is "error" */
    int        cache_n;        /* llama.cpp's timings.cache_n; -1 when absent */
    char       err_msg[256], root_msg[256];   /* error.message / root message */
} reader;

static void copy_msg(char *dst, size_t cap, const unsigned char *s, size_t n)
{
    const void *nul = memchr(s, '\0', n);   /* a C string ends at its first NUL */
    if (nul) n = (size_t)((const unsigned char *)nul - s);
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* The frame a value lands in, and the member it is the value of; NULL inside
 * a skipped part. Clears the key so a second value cannot reuse it. */
static frame *at(reader *r, unsigned *key)
{
    if (r->skip || !r->nf) return NULL;
    frame *f = &r->f[r->nf - 1];
    *key = f->key;
    f->key = K_NONE;
    return f;
}

static void add_text(reader *r, const unsigned char *s, size_t n)
{
    r->c->text_bytes += n;
    if (n && r->text && r->rc == CAL_OK) r->rc = cal_buf_append(r->text, (const char *)s, n);
}

/* A scalar. Returns 1 to go on (yajl's convention). */
static int scalar(reader *r, int is_null, const unsigned char *s, size_t n, int is_str)
{
    if (!r->started) return 0;            /* the top level must be an object */
    unsigned key;
    frame *f = at(r, &key);
    if (!f || key == K_NONE) return 1;
    switch (f->kind) {
    case F_ROOT:
        if (key == K_ERROR && !is_null) {
            r->err_kind = is_str ? 1 : 3;
            if (is_str) copy_msg(r->err_msg, sizeof r->err_msg, s, n);
        } else if (key == K_OBJECT && is_str) {
            r->object_error = n == 5 && memcmp(s, "error", 5) == 0;
        } else if (key == K_MESSAGE && is_str) {
            copy_msg(r->root_msg, sizeof r->root_msg, s, n);
        }
        break;
    case F_ERROR:
        if (key == K_MESSAGE && is_str) copy_msg(r->err_msg, sizeof r->err_msg, s, n);
        break;
    case F_CHOICE:
        if (key == K_TEXT && is_str) add_text(r, s, n);
        else if (key == K_FINISH && !is_null) r->c->flags |= CAL_CHUNK_FINISH;
        break;
    case F_HOLDER:
    case F_FUNCTION:
        if (is_str && key != K_TOOL_CALLS) add_text(r, s, n);   /* reasoning, content, arguments */
        break;
    default: break;
    }
    return 1;
}

static int on_null(void *ud) { return scalar(ud, 1, NULL, 0, 0); }
static int on_bool(void *ud, int b) { (void)b; return scalar(ud, 0, NULL, 0, 0); }
static int on_string(void *ud, const unsigned char *s, size_t n) { return scalar(ud, 0, s, n, 1); }

/* What a server may plausibly report: a token count is a whole number in
 * [0, CAL_CHUNK_COUNT_MAX], a time in ms is finite and in [0,
 * CAL_CHUNK_MS_MAX]. Anything else (−1, 2.7 tokens, 1e308 ms) is absent, as
 * if not sent, and counted in c->implausible so the run can say so: a
 * decode rate from 1e308 ms is no measurement. */
static int count_of(reader *r, int is_int, long long i, double d)
{
    if (is_int ? (i >= 0 && i <= (long long)CAL_CHUNK_COUNT_MAX)
               : (d >= 0 && d <= CAL_CHUNK_COUNT_MAX && d == floor(d)))
        return is_int ? (int)i : (int)d;
    r->c->implausible++;
    return -1;
}

static double ms_of(reader *r, double v)
{
    if (v >= 0 && v <= CAL_CHUNK_MS_MAX) return v;
    r->c->implausible++;
    return -1.0;
}

static int number(reader *r, int is_int, long long i, double d)
{
    if (!r->started) return 0;
    unsigned key;
    frame *f = at(r, &key);
    if (!f || key == K_NONE) return 1;
    cal_chunk *c = r->c;
    double v = is_int ? (double)i : d;
    if (f->kind == F_ROOT) {
        if (key == K_ERROR) r->err_kind = 3;
        else if (key == K_SEND_NS && is_int) { c->send_ns = (int64_t)i; c->flags |= CAL_CHUNK_SEND_NS; }
    } else if (f->kind == F_CHOICE) {
        if (key == K_FINISH) c->flags |= CAL_CHUNK_FINISH;
    } else if (f->kind == F_USAGE) {
        if (key == K_PROMPT_TOKENS) c->prompt_tokens = count_of(r, is_int, i, d);
        else if (key == K_COMPLETION_TOKENS) c->completion_tokens = count_of(r, is_int, i, d);
    } else if (f->kind == F_DETAILS) {        /* a prefix cache's hit (vLLM, SGLang) */
        if (key == K_CACHED_TOKENS) c->cached_tokens = count_of(r, is_int, i, d);
    } else if (f->kind == F_TIMINGS) {
        if (key == K_PROMPT_MS) c->prefill_ms = ms_of(r, v);
        else if (key == K_PREDICTED_MS) c->decode_ms = ms_of(r, v);
        else if (key == K_PREDICTED_N) c->decode_tokens = count_of(r, is_int, i, d);
        else if (key == K_CACHE_N) r->cache_n = count_of(r, is_int, i, d);
    }
    return 1;
}

/* A number's text, read here rather than by yajl, whose strtod follows the
 * process locale (a decimal comma would cut "10.5" to 10): an integer is one
 * without a fraction or an exponent, as jansson reads them; one past
 * int64, or a real past the double range, is malformed, as jansson says. */
static int on_number(void *ud, const char *s, size_t n)
{
    reader *r = ud;
    if (!r->started) return 0;
    if (r->skip || !r->nf || r->f[r->nf - 1].key == K_NONE) return 1;   /* not read */
    /* the common case, a plain integer of at most 18 digits (yajl has checked
     * the syntax), cannot overflow: summed here without a copy */
    size_t neg = n && s[0] == '-';
    if (n > neg && n - neg <= 18) {
        long long v = 0;
        size_t k = neg;
        while (k < n && s[k] >= '0' && s[k] <= '9') v = v * 10 + (s[k++] - '0');
        if (k == n) return number(r, 1, neg ? -v : v, 0);
    }
    char small[64], *t = n < sizeof small ? small : malloc(n + 1);
    if (!t) { r->rc = CAL_ENOMEM; return 0; }
    memcpy(t, s, n);
    t[n] = '\0';
    int is_int = !memchr(s, '.', n) && !memchr(s, 'e', n) && !memchr(s, 'E', n);
    long long i = 0;
    double d = 0;
    errno = 0;
    if (is_int) i = strtoll(t, NULL, 10);
    else d = cal_strtod(t, NULL);
    int bad = errno == ERANGE && (is_int || d == HUGE_VAL || d == -HUGE_VAL);
    if (t != small) free(t);
    return bad ? 0 : number(r, is_int, i, d);
}

/* An object or array opens: read into it (a new frame) or skip it. */
static int open_container(reader *r, int is_map)
{
    if (r->nf + r->skip >= MAX_DEPTH) return 0;
    if (!r->started) {
        if (!is_map) return 0;            /* the top level must be an object */
        r->started = 1;
        r->f[r->nf++] = (frame){ F_ROOT, K_NONE, 0 };
        return 1;
    }
    unsigned key;
    frame *f = at(r, &key);
    int kind = -1;
    if (f) {
        switch (f->kind) {
        case F_ROOT:
            if (key == K_ERROR) {
                r->err_kind = is_map ? 2 : 3;
                if (is_map) { kind = F_ERROR; r->err_msg[0] = '\0'; }
            }
            else if (key == K_CHOICES && !is_map) kind = F_CHOICES;
            else if (key == K_USAGE && is_map) kind = F_USAGE;
            else if (key == K_TIMINGS && is_map) kind = F_TIMINGS;
            break;
        case F_CHOICES: if (is_map) kind = F_CHOICE; break;
        case F_CHOICE:
            if (key == K_FINISH) r->c->flags |= CAL_CHUNK_FINISH;
            else if ((key == K_DELTA || key == K_MESSAGE) && is_map) kind = F_HOLDER;
            break;
        case F_HOLDER: if (key == K_TOOL_CALLS && !is_map) kind = F_TOOLS; break;
        case F_TOOLS: if (is_map) kind = F_CALL; break;
        case F_USAGE: if (key == K_DETAILS && is_map) kind = F_DETAILS; break;
        case F_CALL: if (key == K_FUNCTION && is_map) kind = F_FUNCTION; break;
        default: break;
        }
    }
    if (kind < 0 || r->nf == MAX_FRAMES) { r->skip++; return 1; }
    r->f[r->nf++] = (frame){ (unsigned char)kind, K_NONE, 0 };
    return 1;
}

static int close_container(reader *r)
{
    if (r->skip) r->skip--;
    else if (r->nf) r->nf--;
    return 1;
}

static int on_start_map(void *ud) { return open_container(ud, 1); }
static int on_start_array(void *ud) { return open_container(ud, 0); }
static int on_end(void *ud) { return close_container(ud); }

static int on_key(void *ud, const unsigned char *s, size_t n)
{
    reader *r = ud;
    if (r->skip || !r->nf) return 1;
    frame *f = &r->f[r->nf - 1];
    f->key = K_NONE;
    const keydef *k = g_keys[f->kind].k;
    for (size_t i = 0, nk = g_keys[f->kind].n; i < nk; i++) {
        if (k[i].len != n || k[i].name[0] != (char)s[0] || memcmp(k[i].name, s, n) != 0) continue;
        uint32_t bit = 1u << k[i].key;
        if (f->seen & bit) return 0;      /* a member read twice: ambiguous */
        f->seen |= bit;
        f->key = k[i].key;
        break;
    }
    return 1;
}

static const yajl_callbacks g_cb = {
    on_null, on_bool, NULL, NULL, on_number, on_string,
    on_start_map, on_key, on_end, on_start_array, on_end
};

static void set_error(cal_chunk *c, const char *msg)
{
    c->flags |= CAL_CHUNK_ERROR;
    snprintf(c->error, sizeof c->error, "%s", msg && *msg ? msg : "error event");
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

    reader r;
    r.c = c;
    r.text = text;
    r.rc = CAL_OK;
    r.nf = r.skip = r.started = r.err_kind = r.object_error = 0;
    r.cache_n = -1;
    r.err_msg[0] = r.root_msg[0] = '\0';
    arena ar;
    ar.used = 0;
    yajl_alloc_funcs af = { arena_malloc, arena_realloc, arena_free, &ar };
    yajl_handle h = yajl_alloc(&g_cb, &af, &r);
    if (!h) return CAL_ENOMEM;
    yajl_status ys = yajl_parse(h, (const unsigned char *)data, len);
    if (ys == yajl_status_ok) ys = yajl_complete_parse(h);
    yajl_free(h);
    if (r.rc == CAL_ENOMEM) return CAL_ENOMEM;
    if (ys != yajl_status_ok || !r.started || r.nf || r.skip) {
        /* what was gathered from bad bytes says nothing */
        memset(c, 0, sizeof *c);
        c->prompt_tokens = c->completion_tokens = c->decode_tokens = c->cached_tokens = -1;
        c->prefill_ms = c->decode_ms = -1.0;
        c->send_ns = -1;
        return CAL_EPROTO;
    }
    if (r.err_kind) set_error(c, r.err_kind == 3 ? NULL : r.err_msg);
    if (r.object_error) set_error(c, r.root_msg);
    if (c->text_bytes) c->flags |= CAL_CHUNK_TEXT;
    if (c->completion_tokens >= 0) c->flags |= CAL_CHUNK_USAGE;
    /* a plausible prompt_ms still counts when predicted_ms was dropped */
    if (c->decode_ms >= 0 || c->prefill_ms >= 0) c->flags |= CAL_CHUNK_TIMINGS;
    if (c->implausible) c->flags |= CAL_CHUNK_IMPLAUSIBLE;
    if (c->cached_tokens < 0) c->cached_tokens = r.cache_n;   /* llama.cpp */
    return r.rc;
}
