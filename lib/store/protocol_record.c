/* caliper — the one serializer of the protocol record (protocol_record.h):
 * the stored "protocol" and "target" objects to fields and back, beside the
 * store that keeps them (the plan → record mapping is the run's:
 * lib/protocol/protocol_plan.c). The only
 * file that knows the stored key names; every older form reads here (keys
 * were only ever added: noise_floor, the noise prior's first_* keys,
 * dataset, scenario, keep_chunks, arrivals/slo/sweep, equivalence). */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/protocol_record.h"
#include "lib/util/c_locale.h"

void cal_protocol_init(cal_protocol *p)
{
    memset(p, 0, sizeof *p);
    p->target.load_s = NAN;
    p->shots = p->warmup = p->cold = -1;
    p->rest_s = NAN;
    p->rate = NAN;
    p->requests = -1;
    p->duration_s = NAN;
    p->unique_prompts = p->max_tokens = p->streaming = p->ab = -1;
    p->dataset.entries = p->dataset.skipped = -1;
    p->sweep.start_rate = p->sweep.max_rate = p->sweep.gain = NAN;
    p->noise.runs = -1;
    p->noise.shot_sd = p->noise.first_sd = NAN;
}

void cal_protocol_clear(cal_protocol *p)
{
    if (!p) return;
    free(p->scenario_json);
    free(p->body_json);
    free(p->extra_json);
    free(p->target_extra_json);
    cal_protocol_init(p);
}

static int dup_blob(char **dst, const char *src)
{
    *dst = NULL;
    if (!src) return CAL_OK;
    *dst = strdup(src);
    return *dst ? CAL_OK : CAL_ENOMEM;
}

int cal_protocol_copy(cal_protocol *dst, const cal_protocol *src)
{
    *dst = *src;
    if (dup_blob(&dst->scenario_json, src->scenario_json) ||
        dup_blob(&dst->body_json, src->body_json) ||
        dup_blob(&dst->extra_json, src->extra_json) ||
        dup_blob(&dst->target_extra_json, src->target_extra_json)) {
        cal_protocol_clear(dst);
        return CAL_ENOMEM;
    }
    return CAL_OK;
}

/* ---- writing ------------------------------------------------------------ */

static void put_str(json_t *o, const char *k, const char *s)
{
    if (s[0]) json_object_set_new(o, k, json_string(s));
}

static void put_int(json_t *o, const char *k, long long v)
{
    if (v >= 0) json_object_set_new(o, k, json_integer((json_int_t)v));
}

static void put_bool(json_t *o, const char *k, int v)
{
    if (v >= 0) json_object_set_new(o, k, json_boolean(v));
}

static void put_num(json_t *o, const char *k, double v)
{
    if (!isnan(v)) json_object_set_new(o, k, json_real(v));
}

/* 0 stored as null (not set), NAN left out (unknown). */
static void put_num_or_null(json_t *o, const char *k, double v)
{
    if (!isnan(v)) json_object_set_new(o, k, v > 0 ? json_real(v) : json_null());
}

/* The keys of the JSON object text `extra` written into o where o lacks
 * them: they never replace a typed field. */
static void put_extra(json_t *o, const char *extra)
{
    json_t *x = extra ? json_loads(extra, 0, NULL) : NULL;
    const char *k;
    json_t *v;
    json_object_foreach(x, k, v)
        if (!json_object_get(o, k)) json_object_set(o, k, v);
    json_decref(x);
}

static json_t *target_object(const cal_protocol_target *t, const char *extra)
{
    json_t *o = json_object();
    /* the order two targets are compared in: what identifies the server
     * first (a URL target's name is its URL: the URL is the one named) */
    put_str(o, "kind", t->kind);
    put_str(o, "url", t->url);
    put_str(o, "model", t->model);
    put_str(o, "api", t->api);
    put_str(o, "version", t->version);
    put_str(o, "name", t->name);
    put_str(o, "command", t->command);
    put_num(o, "load_s", t->load_s);
    put_str(o, "side", t->side);
    put_str(o, "detail", t->detail);
    put_extra(o, extra);
    return o;
}

static json_t *protocol_object(const cal_protocol *p)
{
    json_t *o = json_object();
    int run = p->shots >= 0;   /* a run's record: its unset knobs stored as null */
    if (p->recorder) json_object_set_new(o, "recorder", json_true());
    put_int(o, "shots", p->shots);
    put_int(o, "warmup", p->warmup);
    put_num(o, "rest_s", p->rest_s);
    put_bool(o, "cold", p->cold);
    if (p->noise_floor > 0) json_object_set_new(o, "noise_floor", json_real(p->noise_floor));
    if (p->equivalence > 0) json_object_set_new(o, "equivalence", json_real(p->equivalence));
    if (p->n_conc) {
        json_t *cl = json_array();
        for (size_t i = 0; i < p->n_conc; i++) json_array_append_new(cl, json_integer(p->concurrency[i]));
        json_object_set_new(o, "concurrency", cl);
    }
    put_num_or_null(o, "rate", p->rate);
    put_str(o, "arrivals", p->arrivals);
    if (p->slo[0]) json_object_set_new(o, "slo", json_string(p->slo));
    else if (run) json_object_set_new(o, "slo", json_null());
    put_str(o, "goodput_rule", p->goodput_rule);
    if (p->sweep.present) {
        json_t *w = json_object();
        put_str(w, "kind", p->sweep.kind);
        put_num(w, "start_rate", p->sweep.start_rate);
        put_num(w, "max_rate", p->sweep.max_rate);
        put_int(w, "steps", p->sweep.steps);
        put_num(w, "gain", p->sweep.gain);
        put_str(w, "rule", p->sweep.rule);
        json_object_set_new(o, "sweep", w);
    }
    if (p->requests >= 0)
        json_object_set_new(o, "requests", p->requests ? json_integer(p->requests) : json_null());
    put_num_or_null(o, "duration_s", p->duration_s);
    if (p->n_prompt) {
        json_t *pl = json_array();
        for (size_t i = 0; i < p->n_prompt; i++) json_array_append_new(pl, json_integer(p->prompt_tokens[i]));
        json_object_set_new(o, "prompt_tokens", pl);
    }
    if (p->content[0] || p->recorder) json_object_set_new(o, "content", json_string(p->content));
    put_bool(o, "unique_prompts", p->unique_prompts);
    put_int(o, "max_tokens", p->max_tokens);
    put_str(o, "output_policy", p->output_policy);
    put_bool(o, "streaming", p->streaming);
    if (p->has_seed) json_object_set_new(o, "seed", json_integer((json_int_t)p->seed));
    put_bool(o, "ab", p->ab);
    put_str(o, "api", p->api);
    if (p->body_json) {
        json_t *b = json_loads(p->body_json, JSON_DECODE_ANY, NULL);
        json_object_set_new(o, "body", b ? b : json_null());
    }
    put_str(o, "order", p->order);
    put_str(o, "keep_chunks", p->keep_chunks);
    put_str(o, "percentile_source", p->percentile_source);
    put_str(o, "duration_rule", p->duration_rule);
    if (p->dataset.present) {
        const cal_protocol_dataset *d = &p->dataset;
        json_t *w = json_object();
        json_object_set_new(w, "name", json_string(d->name));
        json_object_set_new(w, "format", json_string(d->format));
        json_object_set_new(w, "sha256", json_string(d->sha256));
        json_object_set_new(w, "id", json_string(d->id));
        put_int(w, "entries", d->entries);
        put_int(w, "skipped", d->skipped);
        json_object_set_new(o, "dataset", w);
    }
    put_str(o, "sampling", p->sampling);
    put_str(o, "prompt_len", p->prompt_len);
    put_str(o, "output_len", p->output_len);
    json_t *sc = p->scenario_json ? json_loads(p->scenario_json, 0, NULL) : NULL;
    if (sc) json_object_set_new(o, "scenario", sc);
    if (p->noise.present) {
        const cal_protocol_noise *n = &p->noise;
        json_t *w = json_object();
        json_object_set_new(w, "series", json_string(n->series));
        put_int(w, "runs", n->runs);
        json_object_set_new(w, "shot_sd", isfinite(n->shot_sd) ? json_real(n->shot_sd) : json_null());
        json_object_set_new(w, "shot_df", json_real(n->shot_df));
        json_object_set_new(w, "first_sd", isfinite(n->first_sd) ? json_real(n->first_sd) : json_null());
        json_object_set_new(w, "first_df", json_real(n->first_df));
        json_object_set_new(w, "first_left_out", json_integer(n->first_left_out));
        json_object_set_new(o, "noise_prior", w);
    }
    put_extra(o, p->extra_json);
    return o;
}

static int dump_to(json_t *o, char **out)
{
    *out = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return *out ? CAL_OK : CAL_ENOMEM;
}

int cal_protocol_to_json(const cal_protocol *p, char **protocol_json, char **target_json)
{
    if (protocol_json) *protocol_json = NULL;
    if (target_json) *target_json = NULL;
    if (!p) return CAL_EINVAL;
    if (protocol_json && dump_to(protocol_object(p), protocol_json)) return CAL_ENOMEM;
    if (target_json && dump_to(target_object(&p->target, p->target_extra_json), target_json)) {
        if (protocol_json) { free(*protocol_json); *protocol_json = NULL; }
        return CAL_ENOMEM;
    }
    return CAL_OK;
}

/* ---- reading ------------------------------------------------------------ */

/* A number no JSON reader holds (an integer beyond 64 bits, a real beyond
 * a double) fails the whole text; it is read again with each such literal
 * turned into a string behind this mark, so the field alone is damaged. */
#define OVERSIZED "\x01oversized:"

/* The object being read and the record its damage goes into. */
typedef struct rd {
    cal_protocol *p;
    const char   *obj;   /* "protocol", "target", "protocol.sweep", ... */
} rd;

/* One damaged field: counted, the first named with its value and what was
 * expected. The field stays as it was (unknown). */
static void damaged(rd *r, const char *key, const json_t *v, const char *want)
{
    cal_protocol *p = r->p;
    if (p->n_damaged++) return;
    char val[128];
    const char *s = json_string_value(v);
    if (s && !strncmp(s, OVERSIZED, strlen(OVERSIZED)))
        snprintf(val, sizeof val, "%.80s (too large to read)", s + strlen(OVERSIZED));
    else if (!v)   /* a text JSON cannot hold as a string */
        snprintf(val, sizeof val, "text that is not UTF-8");
    else {
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        cal_snprintf(val, sizeof val, "%.80s%s", t ? t : "?", t && strlen(t) > 80 ? "..." : "");
        free(t);
    }
    snprintf(p->damaged_field, sizeof p->damaged_field, "%s%s%.40s", r->obj, key[0] ? "." : "", key);
    cal_snprintf(p->damaged, sizeof p->damaged, "%s: %s is not %s", p->damaged_field, val, want);
}

/* Each get_* takes the key out of o (what is left is the extra). An absent
 * key, or null (the writer's "not set" where it has one), leaves the field;
 * a value of another type or out of range is damage. */
static json_t *take(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!v) return NULL;
    json_incref(v);
    json_object_del(o, k);
    return v;
}

static void get_str(rd *r, json_t *o, const char *k, char *dst, size_t n)
{
    json_t *v = take(o, k);
    if (json_is_string(v) && strncmp(json_string_value(v), OVERSIZED, strlen(OVERSIZED)))
        snprintf(dst, n, "%s", json_string_value(v));
    else if (v && !json_is_null(v)) damaged(r, k, v, "a string");
    json_decref(v);
}

/* An integer in [lo, hi]; -1 is the writer's unknown. */
static int int_ok(const json_t *v, long long lo, long long hi)
{
    if (!json_is_integer(v)) return 0;
    long long x = json_integer_value(v);
    return x == -1 || (x >= lo && x <= hi);
}

static void want_int(char *buf, size_t n, long long lo, long long hi)
{
    snprintf(buf, n, "an integer in [%lld, %lld]", lo, hi);
}

static void get_int(rd *r, json_t *o, const char *k, int *dst, int lo, int hi)
{
    json_t *v = take(o, k);
    char w[64];
    if (int_ok(v, lo, hi)) *dst = (int)json_integer_value(v);
    else if (v && !json_is_null(v)) { want_int(w, sizeof w, lo, hi); damaged(r, k, v, w); }
    json_decref(v);
}

static void get_i64(rd *r, json_t *o, const char *k, int64_t *dst, long long lo, long long hi)
{
    json_t *v = take(o, k);
    char w[64];
    if (int_ok(v, lo, hi)) *dst = (int64_t)json_integer_value(v);
    else if (v && !json_is_null(v)) { want_int(w, sizeof w, lo, hi); damaged(r, k, v, w); }
    json_decref(v);
}

static void get_bool(rd *r, json_t *o, const char *k, int *dst)
{
    json_t *v = take(o, k);
    if (json_is_boolean(v)) *dst = json_is_true(v);
    else if (v && !json_is_null(v)) damaged(r, k, v, "true or false");
    json_decref(v);
}

/* A number in [lo, hi]; null reads as `if_null` (a knob not set). */
static void get_num(rd *r, json_t *o, const char *k, double *dst, double if_null, double lo,
                    double hi)
{
    json_t *v = take(o, k);
    if (json_is_number(v) && json_number_value(v) >= lo && json_number_value(v) <= hi)
        *dst = json_number_value(v);
    else if (json_is_null(v)) *dst = if_null;
    else if (v) {
        char w[80];
        if (isinf(hi)) cal_snprintf(w, sizeof w, "a number >= %g", lo);
        else cal_snprintf(w, sizeof w, "a number in [%g, %g]", lo, hi);
        damaged(r, k, v, w);
    }
    json_decref(v);
}

/* A list of integers in [lo, hi] (-1, the recorder's unknown length,
 * too), at most CAL_PROTO_LIST of them; a damaged entry is left out (and
 * named: "protocol.concurrency[0]"). */
static void get_list(rd *r, json_t *o, const char *k, int *dst, size_t *n, int lo, int hi)
{
    json_t *v = take(o, k);
    size_t i;
    json_t *x;
    char w[64], key[64];
    if (v && !json_is_array(v) && !json_is_null(v)) damaged(r, k, v, "a list of integers");
    else if (json_array_size(v) > CAL_PROTO_LIST) {
        snprintf(w, sizeof w, "a list of at most %d integers", CAL_PROTO_LIST);
        damaged(r, k, v, w);
    } else json_array_foreach(v, i, x) {
        if (int_ok(x, lo, hi)) {
            dst[(*n)++] = (int)json_integer_value(x);
            continue;
        }
        snprintf(key, sizeof key, "%.30s[%zu]", k, i);
        want_int(w, sizeof w, lo, hi);
        damaged(r, key, x, w);
    }
    json_decref(v);
}

/* An object, or NULL (absent, null, or damage: another type). The caller
 * decrefs. */
static json_t *take_obj(rd *r, json_t *o, const char *k)
{
    json_t *v = take(o, k);
    if (json_is_object(v)) return v;
    if (v && !json_is_null(v)) damaged(r, k, v, "an object");
    json_decref(v);
    return NULL;
}

/* What is left of o as JSON text, or NULL when nothing is. */
static int rest_of(json_t *o, char **out)
{
    *out = NULL;
    if (!json_object_size(o)) return CAL_OK;
    *out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    return *out ? CAL_OK : CAL_ENOMEM;
}

#define COUNT_MAX 1000000000          /* shots, tokens, requests: what a run takes */
#define LIST_MAX  2147483647          /* an int: what a cell's value is held in */

static int read_target(json_t *t, cal_protocol *p)
{
    rd r = {p, "target"};
    cal_protocol_target *g = &p->target;
    get_str(&r, t, "kind", g->kind, sizeof g->kind);
    get_str(&r, t, "name", g->name, sizeof g->name);
    get_str(&r, t, "url", g->url, sizeof g->url);
    get_str(&r, t, "command", g->command, sizeof g->command);
    get_str(&r, t, "model", g->model, sizeof g->model);
    get_str(&r, t, "version", g->version, sizeof g->version);
    get_num(&r, t, "load_s", &g->load_s, NAN, 0, INFINITY);
    get_str(&r, t, "api", g->api, sizeof g->api);
    get_str(&r, t, "side", g->side, sizeof g->side);
    get_str(&r, t, "detail", g->detail, sizeof g->detail);
    return rest_of(t, &p->target_extra_json);
}

static void read_noise(json_t *n, cal_protocol *p)
{
    if (!n) return;
    rd r = {p, "protocol.noise_prior"};
    cal_protocol_noise *w = &p->noise;
    w->present = 1;
    get_str(&r, n, "series", w->series, sizeof w->series);
    get_int(&r, n, "runs", &w->runs, 0, COUNT_MAX);
    get_num(&r, n, "shot_sd", &w->shot_sd, NAN, 0, INFINITY);
    get_num(&r, n, "shot_df", &w->shot_df, 0, 0, INFINITY);
    get_num(&r, n, "first_sd", &w->first_sd, NAN, 0, INFINITY);
    get_num(&r, n, "first_df", &w->first_df, 0, 0, INFINITY);
    get_int(&r, n, "first_left_out", &w->first_left_out, 0, COUNT_MAX);
    /* a pair is a prior only with sd >= 0 and df > 0 */
    if (!(w->shot_sd >= 0 && w->shot_df > 0)) { w->shot_sd = NAN; w->shot_df = 0; }
    if (!(w->first_sd >= 0 && w->first_df > 0)) { w->first_sd = NAN; w->first_df = 0; }
    if (w->first_left_out < 0) w->first_left_out = 0;
}

static int read_protocol(json_t *o, cal_protocol *p)
{
    rd r = {p, "protocol"};
    get_bool(&r, o, "recorder", &p->recorder);
    get_int(&r, o, "shots", &p->shots, 0, COUNT_MAX);
    get_int(&r, o, "warmup", &p->warmup, 0, COUNT_MAX);
    get_num(&r, o, "rest_s", &p->rest_s, NAN, 0, INFINITY);
    get_bool(&r, o, "cold", &p->cold);
    get_num(&r, o, "noise_floor", &p->noise_floor, 0, 0, INFINITY);
    get_num(&r, o, "equivalence", &p->equivalence, 0, 0, INFINITY);
    get_list(&r, o, "concurrency", p->concurrency, &p->n_conc, 0, LIST_MAX);
    get_num(&r, o, "rate", &p->rate, 0, 0, INFINITY);
    get_str(&r, o, "arrivals", p->arrivals, sizeof p->arrivals);
    get_str(&r, o, "slo", p->slo, sizeof p->slo);
    get_str(&r, o, "goodput_rule", p->goodput_rule, sizeof p->goodput_rule);
    json_t *v = take_obj(&r, o, "sweep");
    if (v) {
        rd rs = {p, "protocol.sweep"};
        cal_protocol_sweep *w = &p->sweep;
        w->present = 1;
        get_str(&rs, v, "kind", w->kind, sizeof w->kind);
        get_num(&rs, v, "start_rate", &w->start_rate, NAN, 0, INFINITY);
        get_num(&rs, v, "max_rate", &w->max_rate, NAN, 0, INFINITY);
        get_int(&rs, v, "steps", &w->steps, 0, COUNT_MAX);
        get_num(&rs, v, "gain", &w->gain, NAN, -INFINITY, INFINITY);
        get_str(&rs, v, "rule", w->rule, sizeof w->rule);
    }
    json_decref(v);
    v = take(o, "requests");
    if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= COUNT_MAX)
        p->requests = (long)json_integer_value(v);
    else if (json_is_null(v)) p->requests = 0;
    else if (v) damaged(&r, "requests", v, "an integer in [0, 1000000000] or null");
    json_decref(v);
    get_num(&r, o, "duration_s", &p->duration_s, 0, 0, INFINITY);
    get_list(&r, o, "prompt_tokens", p->prompt_tokens, &p->n_prompt, 0, LIST_MAX);
    get_str(&r, o, "content", p->content, sizeof p->content);
    get_bool(&r, o, "unique_prompts", &p->unique_prompts);
    get_int(&r, o, "max_tokens", &p->max_tokens, 0, COUNT_MAX);
    get_str(&r, o, "output_policy", p->output_policy, sizeof p->output_policy);
    get_bool(&r, o, "streaming", &p->streaming);
    /* any 64-bit pattern: seeds from 2^63 are written as negative integers */
    v = take(o, "seed");
    if (json_is_integer(v)) { p->has_seed = 1; p->seed = (uint64_t)json_integer_value(v); }
    else if (v && !json_is_null(v)) damaged(&r, "seed", v, "an integer in [0, 2^64)");
    json_decref(v);
    get_bool(&r, o, "ab", &p->ab);
    get_str(&r, o, "api", p->api, sizeof p->api);
    if ((v = take(o, "body"))) {
        p->body_json = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(v);
        if (!p->body_json) return CAL_ENOMEM;
    }
    get_str(&r, o, "order", p->order, sizeof p->order);
    get_str(&r, o, "keep_chunks", p->keep_chunks, sizeof p->keep_chunks);
    get_str(&r, o, "percentile_source", p->percentile_source, sizeof p->percentile_source);
    get_str(&r, o, "duration_rule", p->duration_rule, sizeof p->duration_rule);
    v = take_obj(&r, o, "dataset");
    if (v) {
        rd rs = {p, "protocol.dataset"};
        cal_protocol_dataset *d = &p->dataset;
        d->present = 1;
        get_str(&rs, v, "name", d->name, sizeof d->name);
        get_str(&rs, v, "format", d->format, sizeof d->format);
        get_str(&rs, v, "sha256", d->sha256, sizeof d->sha256);
        get_str(&rs, v, "id", d->id, sizeof d->id);
        get_i64(&rs, v, "entries", &d->entries, 0, INT64_MAX);
        get_i64(&rs, v, "skipped", &d->skipped, 0, INT64_MAX);
    }
    json_decref(v);
    get_str(&r, o, "sampling", p->sampling, sizeof p->sampling);
    get_str(&r, o, "prompt_len", p->prompt_len, sizeof p->prompt_len);
    get_str(&r, o, "output_len", p->output_len, sizeof p->output_len);
    if ((v = take_obj(&r, o, "scenario")) &&
        !(p->scenario_json = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER))) {
        json_decref(v);
        return CAL_ENOMEM;
    }
    json_decref(v);
    v = take_obj(&r, o, "noise_prior");
    read_noise(v, p);
    json_decref(v);
    return rest_of(o, &p->extra_json);
}

/* The text as a JSON object; NULL when it is none (the damage noted under
 * `what`). Literals too large to hold are read as marked strings. */
static json_t *load_object(const char *text, const char *what, cal_protocol *p)
{
    if (!text) return NULL;
    json_error_t e;
    json_t *o = json_loads(text, 0, &e);
    char *fixed = NULL;
    for (int tries = 0; !o && tries < 64 && (!strncmp(e.text, "too big", 7) ||
                                             !strncmp(e.text, "real number overflow", 20));
         tries++) {
        const char *src = fixed ? fixed : text;
        size_t end = (size_t)e.position, len = strlen(src), b;
        if (end > len) break;
        for (b = end; b > 0 && strchr("0123456789+-.eE", src[b - 1]); b--) {}
        if (b == end) break;
        size_t add = sizeof "\"\\u0001oversized:\"" - 1;
        char *t = malloc(len + add + 1);
        if (!t) break;
        memcpy(t, src, b);
        size_t k = b + (size_t)sprintf(t + b, "\"\\u0001oversized:");
        memcpy(t + k, src + b, end - b);
        k += end - b;
        t[k++] = '"';
        memcpy(t + k, src + end, len - end + 1);
        free(fixed);
        fixed = t;
        o = json_loads(fixed, 0, &e);
    }
    free(fixed);
    if (json_is_object(o)) return o;
    rd r = {p, what};
    json_t *shown = o ? json_incref(o) : json_string(text);
    damaged(&r, "", shown, "a JSON object");
    json_decref(shown);
    json_decref(o);
    return NULL;
}

int cal_protocol_from_json(const char *protocol_json, const char *target_json, cal_protocol *p)
{
    if (!p) return CAL_EINVAL;
    cal_protocol_init(p);
    json_t *o = load_object(protocol_json, "protocol", p);
    int bad = protocol_json && !o;
    json_t *t = load_object(target_json, "target", p);
    bad |= target_json && !t;
    int rc = CAL_OK;
    if (o) rc = read_protocol(o, p);
    if (!rc && t) rc = read_target(t, p);
    json_decref(o);
    json_decref(t);
    if (rc) { cal_protocol_clear(p); return rc; }
    return bad ? CAL_EINVAL : CAL_OK;
}

int cal_protocol_merge_json(cal_protocol *p, const char *extra_json)
{
    if (!p) return CAL_EINVAL;
    json_t *x = extra_json ? json_loads(extra_json, 0, NULL) : NULL;
    if (!json_is_object(x)) {
        json_decref(x);
        return extra_json ? CAL_EINVAL : CAL_OK;
    }
    json_t *o = protocol_object(p);
    if (!o) { json_decref(x); return CAL_ENOMEM; }
    json_object_update(o, x);
    json_decref(x);
    cal_protocol r;
    cal_protocol_init(&r);
    int rc = read_protocol(o, &r);
    json_decref(o);
    if (rc) { cal_protocol_clear(&r); return rc; }
    /* the target is not the protocol's: it stays as it was */
    r.target = p->target;
    free(r.target_extra_json);
    r.target_extra_json = p->target_extra_json;
    p->target_extra_json = NULL;
    cal_protocol_clear(p);
    *p = r;
    return CAL_OK;
}

/* ---- comparing ---------------------------------------------------------- */

/* The first key of object a (prefix.key) whose value differs in b, or is
 * missing from either, skipping the keys in skip[]; 1 with d filled. */
static int first_key_diff(json_t *a, json_t *b, const char *prefix, const char *const *skip,
                          cal_protocol_diff *d)
{
    const char *key;
    json_t *x;
    for (int pass = 0; pass < 2; pass++) {
        json_t *from = pass ? b : a, *other = pass ? a : b;
        json_object_foreach(from, key, x) {
            int skipped = 0;
            for (size_t k = 0; skip[k]; k++) skipped |= !strcmp(key, skip[k]);
            json_t *y = json_object_get(other, key);
            if (skipped || (y && json_equal(x, y))) continue;
            char *sa = json_dumps(pass ? y : x, JSON_COMPACT | JSON_ENCODE_ANY);
            char *sb = json_dumps(pass ? x : y, JSON_COMPACT | JSON_ENCODE_ANY);
            snprintf(d->field, sizeof d->field, "%s.%s", prefix, key);
            cal_snprintf(d->a, sizeof d->a, "%.80s", sa ? sa : "(absent)");
            cal_snprintf(d->b, sizeof d->b, "%.80s", sb ? sb : "(absent)");
            free(sa);
            free(sb);
            return 1;
        }
    }
    return 0;
}

int cal_protocol_first_diff(const cal_protocol *a, const cal_protocol *b, int flags,
                            cal_protocol_diff *d)
{
    static const char *const none[] = {NULL};
    static const char *const skip_target[] = {"load_s", NULL};
    static const char *const skip_proto[] = {"seed", "noise_prior", NULL};
    int same_run = flags & CAL_PROTOCOL_SAME_RUN;
    if (a->n_damaged || b->n_damaged) {   /* what it held is not known */
        snprintf(d->field, sizeof d->field, "%s", a->n_damaged ? a->damaged_field : b->damaged_field);
        cal_snprintf(d->a, sizeof d->a, "%.110s", a->n_damaged ? a->damaged : "intact");
        cal_snprintf(d->b, sizeof d->b, "%.110s", b->n_damaged ? b->damaged : "intact");
        return 1;
    }
    json_t *ta = target_object(&a->target, a->target_extra_json);
    json_t *tb = target_object(&b->target, b->target_extra_json);
    json_t *pa = protocol_object(a), *pb = protocol_object(b);
    int r = first_key_diff(ta, tb, "target", same_run ? skip_target : none, d) ||
            first_key_diff(pa, pb, "protocol", same_run ? skip_proto : none, d);
    json_decref(ta);
    json_decref(tb);
    json_decref(pa);
    json_decref(pb);
    return r;
}
