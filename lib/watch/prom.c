/* caliper watch — the Prometheus text format parser (see caliper/prom.h).
 * One pass over the bytes, line by line, with every field bounded; the only
 * heap use is one sample buffer and the TYPE table, freed before returning. */
#include "caliper/prom.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "lib/util/c_locale.h"

typedef struct family {
    char          name[CAL_PROM_NAME_MAX];
    cal_prom_type type;
} family;

typedef struct parser {
    family          *fam;       /* [cap], TYPE lines seen */
    size_t           n_fam, cap_fam;
    size_t           last_fam;  /* samples come grouped: try this one first */
    cal_prom_sample *s;         /* the one sample buffer */
    size_t           line;
    char            *why;
    size_t           why_len;
} parser;

static int fail(parser *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *p, int rc, const char *fmt, ...)
{
    if (p->why && p->why_len) {
        int k = snprintf(p->why, p->why_len, "line %zu: ", p->line);
        if (k >= 0 && (size_t)k < p->why_len) {
            va_list ap;
            va_start(ap, fmt);
            cal_vsnprintf(p->why + k, p->why_len - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

static int is_name_start(int c, int colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
static int is_name_char(int c, int colon)
{
    return is_name_start(c, colon) || (c >= '0' && c <= '9');
}
static int is_ws(int c) { return c == ' ' || c == '\t'; }

/* A metric (colon) or label name at l[*i..n) into out; advances *i. */
static int take_name(parser *p, const char *l, size_t n, size_t *i, int colon,
                     char *out, const char *what)
{
    size_t j = *i;
    if (j >= n || !is_name_start((unsigned char)l[j], colon))
        return fail(p, CAL_EPROTO, "column %zu: expected a %s", j + 1, what);
    while (j < n && is_name_char((unsigned char)l[j], colon)) j++;
    if (j - *i >= CAL_PROM_NAME_MAX)
        return fail(p, CAL_ETOOBIG, "column %zu: %s longer than %d bytes", *i + 1, what,
                    CAL_PROM_NAME_MAX - 1);
    memcpy(out, l + *i, j - *i);
    out[j - *i] = '\0';
    *i = j;
    return CAL_OK;
}

static void skip_ws(const char *l, size_t n, size_t *i)
{
    while (*i < n && is_ws((unsigned char)l[*i])) (*i)++;
}

static int parse_type_word(const char *w, size_t n, cal_prom_type *t)
{
    static const struct { const char *w; cal_prom_type t; } T[] = {
        {"counter", CAL_PROM_COUNTER}, {"gauge", CAL_PROM_GAUGE},
        {"histogram", CAL_PROM_HISTOGRAM}, {"summary", CAL_PROM_SUMMARY},
        {"untyped", CAL_PROM_UNTYPED}};
    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++)
        if (strlen(T[k].w) == n && !memcmp(T[k].w, w, n)) { *t = T[k].t; return 1; }
    return 0;
}

static int find_family(parser *p, const char *name)
{
    for (size_t k = 0; k < p->n_fam; k++)
        if (!strcmp(p->fam[k].name, name)) return (int)k;
    return -1;
}

/* "# HELP name text" / "# TYPE name type" / any other comment. */
static int comment_line(parser *p, const char *l, size_t n)
{
    size_t i = 1;
    skip_ws(l, n, &i);
    int help = n - i >= 4 && !memcmp(l + i, "HELP", 4) && (n - i == 4 || is_ws((unsigned char)l[i + 4]));
    int type = n - i >= 4 && !memcmp(l + i, "TYPE", 4) && (n - i == 4 || is_ws((unsigned char)l[i + 4]));
    if (!help && !type) return CAL_OK;   /* a plain comment */
    i += 4;
    skip_ws(l, n, &i);
    char name[CAL_PROM_NAME_MAX];
    int rc = take_name(p, l, n, &i, 1, name, help ? "metric name after HELP" : "metric name after TYPE");
    if (rc) return rc;
    if (help) {
        /* docstring: anything; only \\ and \n are escapes, others are kept */
        if (i < n && !is_ws((unsigned char)l[i]))
            return fail(p, CAL_EPROTO, "column %zu: HELP name must be followed by a space", i + 1);
        return CAL_OK;
    }
    skip_ws(l, n, &i);
    size_t w0 = i;
    while (i < n && !is_ws((unsigned char)l[i])) i++;
    cal_prom_type t;
    if (!parse_type_word(l + w0, i - w0, &t))
        return fail(p, CAL_EPROTO, "column %zu: TYPE \"%.*s\" is not counter, gauge, histogram, "
                    "summary or untyped", w0 + 1, (int)(i - w0 > 40 ? 40 : i - w0), l + w0);
    skip_ws(l, n, &i);
    if (i != n) return fail(p, CAL_EPROTO, "column %zu: text after the TYPE", i + 1);
    if (find_family(p, name) >= 0)
        return fail(p, CAL_EPROTO, "a second TYPE line for %s", name);
    if (p->n_fam == p->cap_fam) {
        if (p->cap_fam >= CAL_PROM_FAMILIES_MAX)
            return fail(p, CAL_ETOOBIG, "more than %d TYPE lines", CAL_PROM_FAMILIES_MAX);
        size_t nc = p->cap_fam ? p->cap_fam * 2 : 64;
        if (nc > CAL_PROM_FAMILIES_MAX) nc = CAL_PROM_FAMILIES_MAX;
        family *f = realloc(p->fam, nc * sizeof *f);
        if (!f) return CAL_ENOMEM;
        p->fam = f;
        p->cap_fam = nc;
    }
    snprintf(p->fam[p->n_fam].name, CAL_PROM_NAME_MAX, "%s", name);
    p->fam[p->n_fam].type = t;
    p->n_fam++;
    return CAL_OK;
}

static int has_suffix(const char *name, size_t nl, const char *fam, size_t fl, const char *suf)
{
    size_t sl = strlen(suf);
    return nl == fl + sl && !memcmp(name, fam, fl) && !memcmp(name + fl, suf, sl);
}

static int family_matches(const family *f, const char *name, size_t nl)
{
    size_t fl = strlen(f->name);
    if (nl == fl && !memcmp(name, f->name, fl)) return 1;
    if (f->type == CAL_PROM_HISTOGRAM)
        return has_suffix(name, nl, f->name, fl, "_bucket") ||
               has_suffix(name, nl, f->name, fl, "_sum") || has_suffix(name, nl, f->name, fl, "_count");
    if (f->type == CAL_PROM_SUMMARY)
        return has_suffix(name, nl, f->name, fl, "_sum") || has_suffix(name, nl, f->name, fl, "_count");
    return 0;
}

static cal_prom_type type_of(parser *p, const char *name)
{
    size_t nl = strlen(name);
    if (p->last_fam < p->n_fam && family_matches(&p->fam[p->last_fam], name, nl))
        return p->fam[p->last_fam].type;
    for (size_t k = 0; k < p->n_fam; k++)
        if (family_matches(&p->fam[k], name, nl)) { p->last_fam = k; return p->fam[k].type; }
    return CAL_PROM_UNTYPED;
}

/* A float as the format writes it: decimal or exponent form, NaN, ±Inf. */
static int parse_value(const char *w, size_t n, double *v)
{
    if (n == 3 && !memcmp(w, "NaN", 3)) { *v = NAN; return 1; }
    if ((n == 3 && !memcmp(w, "Inf", 3)) || (n == 4 && !memcmp(w, "+Inf", 4))) { *v = INFINITY; return 1; }
    if (n == 4 && !memcmp(w, "-Inf", 4)) { *v = -INFINITY; return 1; }
    if (n == 0 || n >= 64) return 0;
    for (size_t k = 0; k < n; k++) {
        char c = w[k];
        if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
            return 0;
    }
    char tmp[64];
    memcpy(tmp, w, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double d = cal_strtod(tmp, &end);
    if (end != tmp + n || end == tmp) return 0;
    if (errno == ERANGE && isinf(d)) return 0;
    *v = d;
    return 1;
}

static int parse_timestamp(const char *w, size_t n, int64_t *ts)
{
    size_t k = (n && w[0] == '-') ? 1 : 0;
    if (n == k || n - k > 19) return 0;
    for (size_t j = k; j < n; j++) if (w[j] < '0' || w[j] > '9') return 0;
    char tmp[24];
    memcpy(tmp, w, n);
    tmp[n] = '\0';
    errno = 0;
    long long x = strtoll(tmp, NULL, 10);
    if (errno == ERANGE) return 0;
    *ts = (int64_t)x;
    return 1;
}

static int labels(parser *p, const char *l, size_t n, size_t *i)
{
    cal_prom_sample *s = p->s;
    (*i)++;   /* '{' */
    for (;;) {
        skip_ws(l, n, i);
        if (*i >= n) return fail(p, CAL_EPROTO, "column %zu: labels not closed with '}'", *i + 1);
        if (l[*i] == '}') { (*i)++; return CAL_OK; }
        if (s->n_labels == CAL_PROM_LABELS_MAX)
            return fail(p, CAL_ETOOBIG, "column %zu: more than %d labels", *i + 1, CAL_PROM_LABELS_MAX);
        cal_prom_label *lb = &s->labels[s->n_labels];
        int rc = take_name(p, l, n, i, 0, lb->name, "label name");
        if (rc) return rc;
        for (size_t k = 0; k < s->n_labels; k++)
            if (!strcmp(s->labels[k].name, lb->name))
                return fail(p, CAL_EPROTO, "column %zu: label %s given twice", *i + 1, lb->name);
        skip_ws(l, n, i);
        if (*i >= n || l[*i] != '=')
            return fail(p, CAL_EPROTO, "column %zu: expected '=' after label %s", *i + 1, lb->name);
        (*i)++;
        skip_ws(l, n, i);
        if (*i >= n || l[*i] != '"')
            return fail(p, CAL_EPROTO, "column %zu: label %s: value must be quoted", *i + 1, lb->name);
        (*i)++;
        size_t o = 0;
        for (;;) {
            if (*i >= n)
                return fail(p, CAL_EPROTO, "label %s: value not closed with '\"'", lb->name);
            char c = l[*i];
            if (c == '"') { (*i)++; break; }
            if (c == '\\') {
                if (*i + 1 >= n)
                    return fail(p, CAL_EPROTO, "label %s: value ends inside an escape", lb->name);
                char e = l[*i + 1];
                if (e == '\\') c = '\\';
                else if (e == '"') c = '"';
                else if (e == 'n') c = '\n';
                else
                    return fail(p, CAL_EPROTO, "column %zu: label %s: unknown escape \\%c "
                                "(only \\\\, \\\" and \\n)", *i + 1, lb->name,
                                (e >= 32 && e < 127) ? e : '?');
                (*i)++;
            }
            if (o + 1 >= CAL_PROM_VALUE_MAX)
                return fail(p, CAL_ETOOBIG, "label %s: value longer than %d bytes", lb->name,
                            CAL_PROM_VALUE_MAX - 1);
            lb->value[o++] = c;
            (*i)++;
        }
        lb->value[o] = '\0';
        s->n_labels++;
        skip_ws(l, n, i);
        if (*i < n && l[*i] == ',') { (*i)++; continue; }
        if (*i < n && l[*i] == '}') { (*i)++; return CAL_OK; }
        return fail(p, CAL_EPROTO, "column %zu: expected ',' or '}' after label %s", *i + 1, lb->name);
    }
}

static int sample_line(parser *p, const char *l, size_t n, cal_prom_fn fn, void *ud)
{
    cal_prom_sample *s = p->s;
    s->n_labels = 0;
    s->has_timestamp = 0;
    s->timestamp_ms = 0;
    s->line = p->line;
    size_t i = 0;
    int rc = take_name(p, l, n, &i, 1, s->name, "metric name");
    if (rc) return rc;
    size_t after_name = i;
    skip_ws(l, n, &i);
    if (i < n && l[i] == '{') {
        if ((rc = labels(p, l, n, &i))) {
            /* name the metric too: "line 3: bad_metric: column 18: ..." */
            if (p->why && p->why_len) {
                char rest[512];
                const char *c = strstr(p->why, ": ");
                snprintf(rest, sizeof rest, "%s", c ? c + 2 : p->why);
                snprintf(p->why, p->why_len, "line %zu: %s: %s", p->line, s->name, rest);
            }
            return rc;
        }
        after_name = i;
        skip_ws(l, n, &i);
    }
    if (i == after_name) {
        if (i >= n) return fail(p, CAL_EPROTO, "%s: no value", s->name);
        return fail(p, CAL_EPROTO, "column %zu: %s: expected a space before the value", i + 1, s->name);
    }
    size_t v0 = i;
    while (i < n && !is_ws((unsigned char)l[i])) i++;
    if (v0 == i) return fail(p, CAL_EPROTO, "%s: no value", s->name);
    if (!parse_value(l + v0, i - v0, &s->value))
        return fail(p, CAL_EPROTO, "column %zu: %s: \"%.*s\" is not a number (nor NaN, +Inf, -Inf)",
                    v0 + 1, s->name, (int)(i - v0 > 40 ? 40 : i - v0), l + v0);
    skip_ws(l, n, &i);
    if (i < n) {
        size_t t0 = i;
        while (i < n && !is_ws((unsigned char)l[i])) i++;
        if (!parse_timestamp(l + t0, i - t0, &s->timestamp_ms))
            return fail(p, CAL_EPROTO, "column %zu: %s: timestamp \"%.*s\" is not an integer of "
                        "milliseconds", t0 + 1, s->name, (int)(i - t0 > 40 ? 40 : i - t0), l + t0);
        s->has_timestamp = 1;
        skip_ws(l, n, &i);
        if (i < n) return fail(p, CAL_EPROTO, "column %zu: %s: text after the timestamp", i + 1, s->name);
    }
    s->type = type_of(p, s->name);
    return fn ? fn(ud, s) : CAL_OK;
}

int cal_prom_parse(const char *text, size_t len, cal_prom_fn fn, void *ud,
                   size_t *bad_line, char *why, size_t why_len)
{
    if (bad_line) *bad_line = 0;
    if (why && why_len) why[0] = '\0';
    if (!text && len) return CAL_EINVAL;
    parser p = {.why = why, .why_len = why_len};
    p.s = malloc(sizeof *p.s);
    if (!p.s) return CAL_ENOMEM;
    int rc = CAL_OK;
    size_t off = 0;
    while (off < len) {
        p.line++;
        const char *l = text + off;
        const char *nl = memchr(l, '\n', len - off);
        size_t n = nl ? (size_t)(nl - l) : len - off;
        off += n + (nl ? 1 : 0);
        if (n > CAL_PROM_LINE_MAX) { rc = fail(&p, CAL_ETOOBIG, "longer than %d bytes", CAL_PROM_LINE_MAX); break; }
        if (n && l[n - 1] == '\r') n--;
        if (memchr(l, '\0', n)) { rc = fail(&p, CAL_EPROTO, "a NUL byte"); break; }
        size_t i = 0;
        skip_ws(l, n, &i);
        if (i == n) continue;   /* blank */
        rc = l[i] == '#' ? comment_line(&p, l + i, n - i) : sample_line(&p, l + i, n - i, fn, ud);
        if (rc) break;
    }
    if (rc && bad_line && rc != CAL_ENOMEM) *bad_line = p.line;
    free(p.s);
    free(p.fam);
    return rc;
}

const char *cal_prom_label_value(const cal_prom_sample *s, const char *name)
{
    for (size_t k = 0; s && name && k < s->n_labels; k++)
        if (!strcmp(s->labels[k].name, name)) return s->labels[k].value;
    return NULL;
}

/* ---- the operating-point gauges ---------------------------------------- */

/* {running, waiting, ceiling}: the names each engine serves. vLLM, SGLang,
 * llama.cpp and TGI expose no gauge for their configured batch ceiling;
 * `caliper watch --ceiling N` states it for them. */
const char *const cal_prom_known[][3] = {
    {"vllm:num_requests_running",    "vllm:num_requests_waiting",    NULL},
    {"sglang:num_running_reqs",      "sglang:num_queue_reqs",        NULL},
    {"llamacpp:requests_processing", "llamacpp:requests_deferred",   NULL},
    {"tgi_batch_current_size",       "tgi_queue_size",               NULL},
    {"caliper:num_requests_running", "caliper:num_requests_waiting", "caliper:max_num_seqs"},
    {NULL, NULL, NULL}};
#define N_KNOWN (sizeof cal_prom_known / sizeof cal_prom_known[0] - 1)

/* What a plausible value of a gauge is. A count of requests is in [0,
 * CAL_PROM_COUNT_MAX]: 1e308 "running" is a broken exporter, not 4096+
 * requests. (A fraction is allowed: a recording rule may average a count;
 * the operating point rounds it.) Usage gauges follow their engine's convention: vLLM's
 * *_usage_perc, SGLang's token_usage and llama.cpp's *_ratio are fractions
 * in [0, 1] (vLLM's "perc" included); a *_percent gauge is in [0, 100]. A
 * --metric of no known convention is any number in [0, CAL_PROM_COUNT_MAX]. */
typedef enum { R_COUNT, R_FRACTION, R_PERCENT, R_ANY } range_kind;

static range_kind range_of(const char *name, int known)
{
    static const char *const FRACTION[] = {
        "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc", "vllm:cpu_cache_usage_perc",
        "sglang:token_usage", "llamacpp:kv_cache_usage_ratio"};
    for (size_t k = 0; k < sizeof FRACTION / sizeof FRACTION[0]; k++)
        if (!strcmp(name, FRACTION[k])) return R_FRACTION;
    size_t n = strlen(name);
    if (n > 8 && !strcmp(name + n - 8, "_percent")) return R_PERCENT;
    if (n > 6 && !strcmp(name + n - 6, "_ratio")) return R_FRACTION;
    return known ? R_COUNT : R_ANY;
}

static int plausible(range_kind k, double v)
{
    if (!isfinite(v) || v < 0) return 0;
    switch (k) {
    case R_COUNT: return v <= CAL_PROM_COUNT_MAX;
    case R_FRACTION: return v <= 1;
    case R_PERCENT: return v <= 100;
    default: return v <= CAL_PROM_COUNT_MAX;
    }
}

const char *cal_prom_range_text(const char *name)
{
    int known = 0;
    for (size_t r = 0; cal_prom_known[r][0]; r++)
        for (int k = 0; k < 3; k++)
            if (cal_prom_known[r][k] && !strcmp(cal_prom_known[r][k], name)) known = 1;
    switch (range_of(name, known)) {
    case R_COUNT: return "a count in [0, 1e9]";
    case R_FRACTION: return "a fraction in [0, 1]";
    case R_PERCENT: return "a percentage in [0, 100]";
    default: return "a number in [0, 1e9]";
    }
}

#define SERIES_MAX 512   /* label sets remembered per gauge, to spot a repeat */

typedef struct acc {
    const char *name;
    range_kind  range;
    double      sum;      /* over the valid series */
    size_t      n;        /* series seen (invalid ones included) */
    size_t      bad;      /* series whose value is not plausible (range_of) */
    double      bad_value;            /* the first such value */
    size_t      bad_line;             /* and its line */
    uint64_t    key[SERIES_MAX];      /* [n] each series' label-set hash */
    size_t      line[SERIES_MAX];     /* [n] where it was */
} acc;

typedef struct find_ctx {
    acc    a[3 * N_KNOWN + 1];
    size_t n;
    char  *why;
    size_t why_len;
} find_ctx;

/* FNV-1a over the label pairs in name order: {a="1",b="2"} and
 * {b="2",a="1"} are one series. 64 bits: a false repeat among SERIES_MAX
 * label sets has odds below 1e-14. */
static uint64_t series_key(const cal_prom_sample *s)
{
    size_t ord[CAL_PROM_LABELS_MAX];
    for (size_t i = 0; i < s->n_labels; i++) {
        size_t j = i;
        while (j && strcmp(s->labels[ord[j - 1]].name, s->labels[i].name) > 0) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = i;
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < s->n_labels; i++) {
        const cal_prom_label *l = &s->labels[ord[i]];
        for (const char *p = l->name; ; p++) { h = (h ^ (unsigned char)*p) * 0x100000001b3ULL; if (!*p) break; }
        for (const char *p = l->value; ; p++) { h = (h ^ (unsigned char)*p) * 0x100000001b3ULL; if (!*p) break; }
    }
    return h;
}

/* The same metric with the same label set twice in one scrape is refused,
 * not summed and not picked from: the exposition format forbids it, and
 * which of two values is current cannot be known (two exporters behind one
 * port, or a body served twice). Summing would double the reading. */
static int find_cb(void *ud, const cal_prom_sample *s)
{
    find_ctx *c = ud;
    for (size_t k = 0; k < c->n; k++) {
        acc *a = &c->a[k];
        if (strcmp(a->name, s->name)) continue;
        uint64_t key = series_key(s);
        for (size_t i = 0; i < a->n && i < SERIES_MAX; i++)
            if (a->key[i] == key) {
                if (c->why && c->why_len)
                    snprintf(c->why, c->why_len, "line %zu: %s repeats the label set of line %zu: "
                             "one series given twice in a scrape (refused, not summed)",
                             s->line, s->name, a->line[i]);
                return CAL_EPROTO;
            }
        if (a->n == SERIES_MAX) {
            if (c->why && c->why_len)
                snprintf(c->why, c->why_len, "line %zu: %s: more than %d label sets", s->line,
                         s->name, SERIES_MAX);
            return CAL_ETOOBIG;
        }
        a->key[a->n] = key;
        a->line[a->n] = s->line;
        a->n++;
        if (!plausible(a->range, s->value)) {
            if (!a->bad++) { a->bad_value = s->value; a->bad_line = s->line; }
        } else {
            a->sum += s->value;
        }
    }
    return 0;
}

static const acc *lookup(const find_ctx *c, const char *name)
{
    for (size_t k = 0; name && k < c->n; k++)
        if (!strcmp(c->a[k].name, name)) return c->a[k].n ? &c->a[k] : NULL;
    return NULL;
}

static void set(int *has, double *v, char *name_out, const acc *a)
{
    *has = 1;
    *v = a->bad ? NAN : a->sum;   /* one bad series: the sum means nothing */
    snprintf(name_out, CAL_PROM_NAME_MAX, "%s", a->name);
}

static int find_load(find_ctx *c, const char *text, size_t len, const char *running_override,
                     cal_prom_load *out, size_t *bad_line, char *why, size_t why_len)
{
    c->why = why;
    c->why_len = why_len;
    for (size_t r = 0; r < N_KNOWN; r++)
        for (int k = 0; k < 3; k++)
            if (cal_prom_known[r][k]) {
                c->a[c->n].range = range_of(cal_prom_known[r][k], 1);
                c->a[c->n++].name = cal_prom_known[r][k];
            }
    if (running_override) {
        c->a[c->n].range = range_of(running_override, 0);
        for (size_t k = 0; k < c->n; k++)
            if (!strcmp(c->a[k].name, running_override)) c->a[c->n].range = c->a[k].range;
        c->a[c->n++].name = running_override;
    }
    char pwhy[512];
    int rc = cal_prom_parse(text, len, find_cb, c, bad_line, pwhy, sizeof pwhy);
    if (rc) {
        /* a parse error is in pwhy; a refusal of find_cb wrote why itself */
        if (pwhy[0] && why && why_len) snprintf(why, why_len, "%s", pwhy);
        return rc;
    }
    const acc *run = NULL;
    size_t row = N_KNOWN;
    if (running_override) {
        run = lookup(c, running_override);
    } else {
        for (size_t r = 0; r < N_KNOWN && !run; r++)
            if ((run = lookup(c, cal_prom_known[r][0]))) row = r;
    }
    if (!run) {
        if (why && why_len) {
            if (running_override)
                snprintf(why, why_len, "no sample named %s in the scrape", running_override);
            else
                snprintf(why, why_len, "none of vllm:num_requests_running, sglang:num_running_reqs, "
                         "llamacpp:requests_processing, tgi_batch_current_size, "
                         "caliper:num_requests_running in the scrape (name the metric to read)");
        }
        return CAL_ENOTFOUND;
    }
    set(&out->has_running, &out->running, out->running_name, run);
    out->running_series = run->n;
    out->running_invalid = run->bad;
    out->running_bad_value = run->bad_value;
    out->running_bad_line = run->bad_line;
    for (size_t r = 0; r < N_KNOWN; r++) {
        if (row < N_KNOWN && r != row) continue;
        const acc *w = lookup(c, cal_prom_known[r][1]);
        const acc *ce = lookup(c, cal_prom_known[r][2]);
        if (w && !out->has_waiting) {
            set(&out->has_waiting, &out->waiting, out->waiting_name, w);
            out->waiting_invalid = w->bad;
            out->waiting_bad_value = w->bad_value;
            out->waiting_bad_line = w->bad_line;
        }
        if (ce && !out->has_ceiling) set(&out->has_ceiling, &out->ceiling, out->ceiling_name, ce);
    }
    return CAL_OK;
}

int cal_prom_find_load(const char *text, size_t len, const char *running_override,
                       cal_prom_load *out, size_t *bad_line, char *why, size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (bad_line) *bad_line = 0;
    if (why && why_len) why[0] = '\0';
    find_ctx *c = calloc(1, sizeof *c);   /* ~130 KB of label-set keys: not the stack */
    if (!c) return CAL_ENOMEM;
    int rc = find_load(c, text, len, running_override, out, bad_line, why, why_len);
    free(c);
    return rc;
}
