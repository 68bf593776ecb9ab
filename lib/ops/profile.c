/* caliper ops — the four profile shapes read into one cal_ops_profile:
 * caliper's engine profile and op bench (jansson), Chrome trace-event JSON
 * (complete events, nested ones counted once), and a plain CSV. */
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/ops.h"
#include "caliper/units.h"
#include "lib/util/c_locale.h"

const char *cal_ops_format_name(cal_ops_format f)
{
    switch (f) {
    case CAL_OPS_ENGINE:  return "engine";
    case CAL_OPS_OPBENCH: return "opbench";
    case CAL_OPS_TRACE:   return "trace";
    case CAL_OPS_CSV:     return "csv";
    }
    return "?";
}

/* ---- building a profile: distinct names through a small hash -------------- */

#define HASH_SLOTS 8192   /* > 2 × CAL_OPS_MAX_OPS: probes stay short */

typedef struct builder {
    cal_ops_profile *p;
    size_t cap;
    int32_t slot[HASH_SLOTS];   /* index into p->ops + 1; 0 empty */
} builder;

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int b_open(builder *b, const char *label, cal_ops_format f)
{
    memset(b, 0, sizeof *b);
    b->p = calloc(1, sizeof *b->p);
    if (!b->p) return CAL_ENOMEM;
    snprintf(b->p->label, sizeof b->p->label, "%s", label && *label ? label : "profile");
    b->p->format = f;
    b->p->tokens = b->p->e2e_ns = b->p->steps = b->p->step_tokens = b->p->threads = NAN;
    return CAL_OK;
}

static int b_fail(builder *b, int rc)
{
    cal_ops_profile_free(&b->p);
    return rc;
}

/* The op named name (made when new, with every sum 0 and bytes/flops NAN). */
static int b_op(builder *b, const char *name, cal_ops_op **out, char *err, size_t errn)
{
    char nm[CAL_OPS_NAME_MAX];
    snprintf(nm, sizeof nm, "%s", name);   /* longer names are cut, then merged */
    uint32_t h = fnv1a(nm);
    for (uint32_t i = 0; i < HASH_SLOTS; i++) {
        int32_t *s = &b->slot[(h + i) % HASH_SLOTS];
        if (*s && !strcmp(b->p->ops[*s - 1].name, nm)) { *out = &b->p->ops[*s - 1]; return CAL_OK; }
        if (*s) continue;
        if (b->p->n_ops >= CAL_OPS_MAX_OPS)
            return cal_why(err, errn, CAL_ETOOBIG, "more than %d distinct op names", CAL_OPS_MAX_OPS);
        if (b->p->n_ops == b->cap) {
            size_t nc = b->cap ? b->cap * 2 : 32;
            cal_ops_op *n = realloc(b->p->ops, nc * sizeof *n);
            if (!n) return cal_why(err, errn, CAL_ENOMEM, "out of memory");
            b->p->ops = n;
            b->cap = nc;
        }
        cal_ops_op *o = &b->p->ops[b->p->n_ops++];
        memset(o, 0, sizeof *o);
        memcpy(o->name, nm, sizeof nm);
        o->bytes = o->flops = o->call_ns = NAN;
        *s = (int32_t)b->p->n_ops;
        *out = o;
        return CAL_OK;
    }
    return cal_why(err, errn, CAL_ETOOBIG, "op table full");
}

/* NAN + x = x: a known amount added to an unknown one starts the sum. */
static void add_known(double *sum, double x)
{
    if (isnan(x)) return;
    *sum = isnan(*sum) ? x : *sum + x;
}

void cal_ops_profile_free(cal_ops_profile **p)
{
    if (!p || !*p) return;
    free((*p)->ops);
    free(*p);
    *p = NULL;
}

/* ---- JSON helpers ----------------------------------------------------------- */

static int parse_json(const char *text, size_t len, json_t **root, char *err, size_t errn)
{
    json_error_t je;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*root)
        return cal_why(err, errn, CAL_EPROTO, "not JSON (line %d: %s)", je.line, je.text);
    return CAL_OK;
}

/* A finite number >= 0 at k into *v. Absent: *v = dflt when optional,
 * else an error naming where. */
static int jnonneg(const json_t *o, const char *k, const char *where, int optional,
                   double dflt, double *v, char *err, size_t errn)
{
    const json_t *x = json_object_get(o, k);
    if (!x || json_is_null(x)) {
        if (optional) { *v = dflt; return CAL_OK; }
        return cal_why(err, errn, CAL_EPROTO, "%s%s: missing", where, k);
    }
    if (!json_is_number(x))
        return cal_why(err, errn, CAL_EPROTO, "%s%s: not a number", where, k);
    double d = json_number_value(x);
    if (!isfinite(d) || d < 0 || d > 1e300)
        return cal_why(err, errn, CAL_EINVAL, "%s%s: %g is not a finite number >= 0", where, k, d);
    *v = d;
    return CAL_OK;
}

static const char *jstr(const json_t *o, const char *k)
{
    const json_t *x = json_object_get(o, k);
    return json_is_string(x) ? json_string_value(x) : NULL;
}

/* ---- caliper engine profile and op bench ------------------------------------- */

static int parse_engine_root(json_t *root, const char *label, cal_ops_profile **out,
                             char *err, size_t errn)
{
    const char *fmt = jstr(root, "format");
    cal_ops_format f;
    if (fmt && !strcmp(fmt, "caliper.engine.profile/1")) f = CAL_OPS_ENGINE;
    else if (fmt && !strcmp(fmt, "caliper.engine.opbench/1")) f = CAL_OPS_OPBENCH;
    else
        return cal_why(err, errn, CAL_EPROTO, "format: \"%s\" is not caliper.engine.profile/1 "
                       "or caliper.engine.opbench/1", fmt ? fmt : "(missing)");
    builder b;
    if (b_open(&b, label, f)) return cal_why(err, errn, CAL_ENOMEM, "out of memory");
    cal_ops_profile *p = b.p;
    int rc;
    const json_t *model = json_object_get(root, "model"), *blas = json_object_get(root, "blas");
    const char *mname = model ? jstr(model, "name") : NULL;
    const char *core = blas ? jstr(blas, "core") : NULL;
    double thr = NAN;
    if (blas && (rc = jnonneg(blas, "engine_threads", "blas.", 1, NAN, &thr, err, errn)))
        return b_fail(&b, rc);
    p->threads = thr;
    char thr_s[32] = "";
    if (!isnan(thr)) cal_snprintf(thr_s, sizeof thr_s, ", %.0f thread%s", thr, thr == 1 ? "" : "s");
    snprintf(p->source, sizeof p->source, "caliper engine%s%s%s%s%s%s",
             f == CAL_OPS_OPBENCH ? " op bench" : "", mname ? " " : "", mname ? mname : "",
             thr_s, core ? ", OpenBLAS " : "", core ? core : "");
    double sampling_ns = 0;
    if (f == CAL_OPS_ENGINE) {
        double steps, tokens, step_ns;
        if ((rc = jnonneg(root, "steps", "", 0, 0, &steps, err, errn)) ||
            (rc = jnonneg(root, "tokens", "", 0, 0, &tokens, err, errn)) ||
            (rc = jnonneg(root, "step_time_ns", "", 0, 0, &step_ns, err, errn)))
            return b_fail(&b, rc);
        p->steps = steps;
        p->tokens = tokens;
        p->e2e_ns = step_ns;
    } else {
        double t;
        if ((rc = jnonneg(root, "tokens_per_call", "", 0, 0, &t, err, errn))) return b_fail(&b, rc);
        if (t < 1) return b_fail(&b, cal_why(err, errn, CAL_EINVAL, "tokens_per_call: %g is not >= 1", t));
        p->step_tokens = t;
    }
    const json_t *ops = json_object_get(root, "ops");
    if (!json_is_array(ops)) return b_fail(&b, cal_why(err, errn, CAL_EPROTO, "ops: not an array"));
    size_t i;
    const json_t *o;
    json_array_foreach(ops, i, o) {
        char where[48];
        snprintf(where, sizeof where, "ops[%zu].", i);
        const char *name = jstr(o, "op");
        if (!json_is_object(o) || !name || !*name)
            return b_fail(&b, cal_why(err, errn, CAL_EPROTO, "%sop: missing or not a name", where));
        double calls, t, bytes, flops, call_ns = NAN;
        if ((rc = jnonneg(o, "calls", where, 0, 0, &calls, err, errn)) ||
            (rc = jnonneg(o, "time_ns", where, 0, 0, &t, err, errn)) ||
            (rc = jnonneg(o, "bytes", where, 1, NAN, &bytes, err, errn)) ||
            (rc = jnonneg(o, "flops", where, 1, NAN, &flops, err, errn)) ||
            (f == CAL_OPS_OPBENCH && (rc = jnonneg(o, "call_ns", where, 0, 0, &call_ns, err, errn))))
            return b_fail(&b, rc);
        /* the engine lists every kind; one its model never ran is no op */
        if (calls == 0 && t == 0) continue;
        cal_ops_op *op;
        if ((rc = b_op(&b, name, &op, err, errn))) return b_fail(&b, rc);
        op->calls += calls;
        op->time_ns += t;
        add_known(&op->bytes, bytes);
        add_known(&op->flops, flops);
        op->call_ns = call_ns;
        /* sampling runs between steps, outside step_time_ns: the engine's
         * end to end is every step plus every sampling call */
        if (f == CAL_OPS_ENGINE && !strcmp(name, "sampling")) sampling_ns += t;
    }
    if (f == CAL_OPS_ENGINE) p->e2e_ns += sampling_ns;
    *out = p;
    return CAL_OK;
}

int cal_ops_parse_engine(const char *text, size_t len, const char *label,
                         cal_ops_profile **out, char *err, size_t errn)
{
    json_t *root;
    int rc = parse_json(text, len, &root, err, errn);
    if (rc) return rc;
    rc = json_is_object(root) ? parse_engine_root(root, label, out, err, errn)
                              : cal_why(err, errn, CAL_EPROTO, "not a JSON object");
    json_decref(root);
    return rc;
}

/* ---- Chrome trace-event JSON ----------------------------------------------- */

typedef struct span {
    uint64_t key;          /* pid and tid */
    double   t0, t1;       /* µs */
    const char *name;      /* into the JSON tree */
    double   bytes, flops; /* args, NAN absent */
} span;

static uint64_t id_of(const json_t *x)
{
    if (json_is_integer(x)) return (uint64_t)json_integer_value(x);
    if (json_is_real(x)) {
        double d = json_real_value(x);
        return isfinite(d) && fabs(d) < 9e18 ? (uint64_t)(int64_t)d : 0;
    }
    if (json_is_string(x)) return fnv1a(json_string_value(x)) | ((uint64_t)1 << 40);
    return 0;
}

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1) return x->t1 > y->t1 ? -1 : 1;   /* the outer one first */
    return 0;
}

static int has_cat(const char *cats, const char *want)
{
    /* "cat" may list several, comma-separated */
    size_t n = strlen(want);
    for (const char *c = cats; c && *c;) {
        const char *e = strchr(c, ',');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        if (l == n && !strncmp(c, want, n)) return 1;
        c = e ? e + 1 : NULL;
    }
    return 0;
}

static double arg_num(const json_t *ev, const char *k)
{
    const json_t *a = json_object_get(ev, "args");
    const json_t *x = a ? json_object_get(a, k) : NULL;
    double d = json_is_number(x) ? json_number_value(x) : NAN;
    return isfinite(d) && d >= 0 ? d : NAN;
}

/* a begin ("B") or end ("E") event, to be paired per thread */
typedef struct be_ev {
    uint64_t key;
    double   ts;
    size_t   order;        /* file order: ties keep it */
    const json_t *ev;
    int      begin;
} be_ev;

static int be_cmp(const void *a, const void *b)
{
    const be_ev *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* What one slice (complete, or a paired begin/end) is: part of the end to
 * end when its name matches the span glob, a kernel when its category is
 * the chosen one, else nothing. */
typedef struct slices {
    const char *cat, *e2e_glob;
    span  *sp;
    size_t ns, n_e2e;
    double e2e_us;
} slices;

static void take(slices *s, const json_t *ev, const char *name, uint64_t key, double t0, double t1)
{
    if (fnmatch(s->e2e_glob, name, 0) == 0) {
        s->e2e_us += t1 - t0;
        s->n_e2e++;
        return;
    }
    const char *c = jstr(ev, "cat");
    if (s->cat && !(c && has_cat(c, s->cat))) return;
    s->sp[s->ns++] = (span){key, t0, t1, name, arg_num(ev, "bytes"), arg_num(ev, "flops")};
}

#define BE_DEPTH 256   /* open begin events per thread */

static int parse_trace_root(json_t *root, const char *label, const cal_ops_read_opts *o,
                            cal_ops_profile **out, char *err, size_t errn)
{
    const json_t *evs = json_is_array(root) ? root : json_object_get(root, "traceEvents");
    if (!json_is_array(evs))
        return cal_why(err, errn, CAL_EPROTO, "traceEvents: missing or not an array");
    size_t n = json_array_size(evs);
    if (n > CAL_OPS_MAX_EVENTS)
        return cal_why(err, errn, CAL_ETOOBIG, "traceEvents: %zu events, more than %u", n,
                       CAL_OPS_MAX_EVENTS);
    const char *cat = o ? o->trace_cat : NULL;
    const char *e2e_glob = o && o->e2e_span ? o->e2e_span : "ProfilerStep#*";
    if (!cat) {   /* GPU kernels when there are any, else CPU ops, else all */
        int kern = 0, cpu = 0;
        for (size_t i = 0; i < n; i++) {
            const char *c = jstr(json_array_get(evs, i), "cat");
            kern |= c && has_cat(c, "kernel");
            cpu |= c && has_cat(c, "cpu_op");
        }
        cat = kern ? "kernel" : cpu ? "cpu_op" : NULL;
    }
    span *sp = n ? malloc(n * sizeof *sp) : NULL;
    be_ev *be = n ? malloc(n * sizeof *be) : NULL;
    if (n && (!sp || !be)) {
        free(sp);
        free(be);
        return cal_why(err, errn, CAL_ENOMEM, "out of memory");
    }
    slices sl = {cat, e2e_glob, sp, 0, 0, 0};
    size_t nbe = 0;
    int rc = CAL_OK;
    for (size_t i = 0; i < n; i++) {
        const json_t *ev = json_array_get(evs, i);
        if (!json_is_object(ev)) {
            rc = cal_why(err, errn, CAL_EPROTO, "traceEvents[%zu]: not an object", i);
            goto out;
        }
        const char *ph = jstr(ev, "ph"), *name = jstr(ev, "name");
        if (ph && (!strcmp(ph, "B") || !strcmp(ph, "E"))) {   /* slices in two halves */
            const json_t *jts = json_object_get(ev, "ts");
            double ts = json_is_number(jts) ? json_number_value(jts) : NAN;
            if (!isfinite(ts) || fabs(ts) > 1e15) {
                rc = cal_why(err, errn, CAL_EPROTO, "traceEvents[%zu]: ts must be a finite number", i);
                goto out;
            }
            be[nbe++] = (be_ev){id_of(json_object_get(ev, "pid")) * 0x9e3779b97f4a7c15ull ^
                                    id_of(json_object_get(ev, "tid")),
                                ts, i, ev, ph[0] == 'B'};
            continue;
        }
        if (!ph || strcmp(ph, "X") || !name) continue;   /* other phases: not slices */
        const json_t *jts = json_object_get(ev, "ts"), *jdur = json_object_get(ev, "dur");
        if (!json_is_number(jts) || !json_is_number(jdur)) {
            rc = cal_why(err, errn, CAL_EPROTO, "traceEvents[%zu] (\"%.60s\"): ts and dur must be numbers",
                         i, name);
            goto out;
        }
        double ts = json_number_value(jts), dur = json_number_value(jdur);
        if (!isfinite(ts) || !isfinite(dur) || dur < 0 || fabs(ts) > 1e15 || dur > 1e15) {
            rc = cal_why(err, errn, CAL_EINVAL, "traceEvents[%zu] (\"%.60s\"): dur %g / ts %g out of range",
                         i, name, dur, ts);
            goto out;
        }
        take(&sl, ev, name, id_of(json_object_get(ev, "pid")) * 0x9e3779b97f4a7c15ull ^
                                id_of(json_object_get(ev, "tid")), ts, ts + dur);
    }
    /* pair each end with the latest open begin of its thread; an end with
     * none open and a begin never closed are left out */
    if (nbe > 0) /* qsort's base must not be NULL, even for no elements */
        qsort(be, nbe, sizeof *be, be_cmp);
    size_t stack[BE_DEPTH], depth = 0;
    for (size_t i = 0; i < nbe; i++) {
        if (i > 0 && be[i].key != be[i - 1].key) depth = 0;
        if (be[i].begin) {
            if (depth == BE_DEPTH) {
                rc = cal_why(err, errn, CAL_ETOOBIG, "traceEvents[%zu]: more than %d nested begin events",
                             be[i].order, BE_DEPTH);
                goto out;
            }
            stack[depth++] = i;
        } else if (depth > 0) {
            const be_ev *b0 = &be[stack[--depth]];
            const char *name = jstr(b0->ev, "name");
            if (name) take(&sl, b0->ev, name, b0->key, b0->ts, be[i].ts);
        }
    }
    size_t ns = sl.ns;
    if (ns > 0)
        qsort(sp, ns, sizeof *sp, span_cmp);
    builder b;
    if (b_open(&b, label, CAL_OPS_TRACE)) { rc = cal_why(err, errn, CAL_ENOMEM, "out of memory"); goto out; }
    snprintf(b.p->source, sizeof b.p->source, "trace-event JSON, %s%s", cat ? "category " : "every event",
             cat ? cat : "");
    double outer_end = 0;
    uint64_t outer_key = 0;
    for (size_t i = 0; i < ns; i++) {
        /* an event starting inside the last counted one of its thread is
         * nested (a CPU op's children) and already counted */
        if (i > 0 && sp[i].key == outer_key && sp[i].t0 < outer_end) continue;
        outer_key = sp[i].key;
        outer_end = sp[i].t1;
        cal_ops_op *op;
        if ((rc = b_op(&b, sp[i].name, &op, err, errn))) { b_fail(&b, rc); goto out; }
        op->calls += 1;
        op->time_ns += (sp[i].t1 - sp[i].t0) * 1000.0;
        add_known(&op->bytes, sp[i].bytes);
        add_known(&op->flops, sp[i].flops);
    }
    if (sl.n_e2e) b.p->e2e_ns = sl.e2e_us * 1000.0;
    *out = b.p;
out:
    free(sp);
    free(be);
    return rc;
}

int cal_ops_parse_trace(const char *text, size_t len, const char *label,
                        const cal_ops_read_opts *o, cal_ops_profile **out,
                        char *err, size_t errn)
{
    json_t *root;
    int rc = parse_json(text, len, &root, err, errn);
    if (rc) return rc;
    rc = parse_trace_root(root, label, o, out, err, errn);
    json_decref(root);
    return rc;
}

/* ---- CSV ----------------------------------------------------------------------- */

enum { C_OP, C_CALLS, C_TIME, C_BYTES, C_FLOPS, C__N };

/* "# tokens: 100" / "# e2e: 12.5ms": the comment lines that carry the totals */
static int csv_comment(cal_ops_profile *p, const char *f, size_t line, char *err, size_t errn)
{
    f++;
    while (*f == ' ' || *f == '\t') f++;
    const char *colon = strchr(f, ':');
    if (!colon) return CAL_OK;
    size_t kl = (size_t)(colon - f);
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    double d;
    if (kl == 6 && !strncasecmp(f, "tokens", 6)) {
        if (cal_unit_parse(CAL_U_COUNT, v, NULL, &d) || d <= 0)
            return cal_why(err, errn, CAL_EINVAL, "line %zu: tokens: \"%.40s\" is not a positive count", line, v);
        p->tokens = d;
    } else if (kl == 3 && !strncasecmp(f, "e2e", 3)) {
        if (cal_unit_parse(CAL_U_TIME, v, "ms", &d) || d <= 0)
            return cal_why(err, errn, CAL_EINVAL, "line %zu: e2e: \"%.40s\" is not a positive time", line, v);
        p->e2e_ns = d * 1e9;
    }
    return CAL_OK;
}

int cal_ops_parse_csv(const char *text, size_t len, const char *label,
                      cal_ops_profile **out, char *err, size_t errn)
{
    cal_csv_reader *rd = malloc(sizeof *rd);   /* a 16 KiB record buffer: not on the stack */
    if (!rd) return cal_why(err, errn, CAL_ENOMEM, "out of memory");
    cal_csv_opts co = {.delim = ',', .trim = 1, .skip_blank = 1};
    cal_csv_reader_init(rd, text, len, &co);
    builder b;
    if (b_open(&b, label, CAL_OPS_CSV)) { free(rd); return cal_why(err, errn, CAL_ENOMEM, "out of memory"); }
    snprintf(b.p->source, sizeof b.p->source, "CSV");
    int col[C__N] = {-1, -1, -1, -1, -1};
    const char *time_bare = "ms";
    int have_header = 0, rc = CAL_OK;
    for (;;) {
        size_t nf;
        char why[256];
        if ((rc = cal_csv_next(rd, &nf, why, sizeof why))) { rc = cal_why(err, errn, rc, "%s", why); break; }
        if (nf == 0) break;
        if (rd->field[0][0] == '#') {
            if ((rc = csv_comment(b.p, rd->field[0], rd->line, err, errn))) break;
            continue;
        }
        if (!have_header) {
            for (size_t i = 0; i < nf && i < 64; i++) {
                const char *h = rd->field[i];
                static const struct { const char *name; const char *bare; } T[] = {
                    {"time_ns", "ns"}, {"time_us", "us"}, {"time_ms", "ms"}, {"time_s", "s"}, {"time", "ms"}};
                if (!strcasecmp(h, "op") || !strcasecmp(h, "name")) col[C_OP] = (int)i;
                else if (!strcasecmp(h, "calls") || !strcasecmp(h, "count")) col[C_CALLS] = (int)i;
                else if (!strcasecmp(h, "bytes")) col[C_BYTES] = (int)i;
                else if (!strcasecmp(h, "flops")) col[C_FLOPS] = (int)i;
                else
                    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++)
                        if (!strcasecmp(h, T[k].name)) { col[C_TIME] = (int)i; time_bare = T[k].bare; }
            }
            if (col[C_OP] < 0 || col[C_CALLS] < 0 || col[C_TIME] < 0) {
                rc = cal_why(err, errn, CAL_EPROTO, "line %zu: the header needs op, calls and a time column "
                             "(time_ns, time_us, time_ms, time_s or time)", rd->line);
                break;
            }
            have_header = 1;
            continue;
        }
        for (int c = 0; c < C__N; c++)
            if (col[c] >= (int)nf) {
                rc = cal_why(err, errn, CAL_EPROTO, "line %zu: %zu fields, the header has more", rd->line, nf);
                goto done;
            }
        const char *name = rd->field[col[C_OP]];
        if (!*name) { rc = cal_why(err, errn, CAL_EPROTO, "line %zu: op: empty", rd->line); break; }
        double calls, t, bytes = NAN, flops = NAN;
        if (cal_unit_parse(CAL_U_COUNT, rd->field[col[C_CALLS]], NULL, &calls) || calls < 0) {
            rc = cal_why(err, errn, CAL_EPROTO, "line %zu: calls: \"%.40s\" is not a count", rd->line,
                         rd->field[col[C_CALLS]]);
            break;
        }
        if (cal_unit_parse(CAL_U_TIME, rd->field[col[C_TIME]], time_bare, &t) || t < 0) {
            rc = cal_why(err, errn, CAL_EPROTO, "line %zu: time: \"%.40s\" is not a time", rd->line,
                         rd->field[col[C_TIME]]);
            break;
        }
        if (col[C_BYTES] >= 0 && rd->field[col[C_BYTES]][0] &&
            (cal_unit_parse(CAL_U_BYTES, rd->field[col[C_BYTES]], "B", &bytes) || bytes < 0)) {
            rc = cal_why(err, errn, CAL_EPROTO, "line %zu: bytes: \"%.40s\" is not a byte count", rd->line,
                         rd->field[col[C_BYTES]]);
            break;
        }
        if (col[C_FLOPS] >= 0 && rd->field[col[C_FLOPS]][0] &&
            (cal_unit_parse(CAL_U_COUNT, rd->field[col[C_FLOPS]], NULL, &flops) || flops < 0)) {
            rc = cal_why(err, errn, CAL_EPROTO, "line %zu: flops: \"%.40s\" is not a count", rd->line,
                         rd->field[col[C_FLOPS]]);
            break;
        }
        cal_ops_op *op;
        if ((rc = b_op(&b, name, &op, err, errn))) break;
        op->calls += calls;
        op->time_ns += t * 1e9;
        add_known(&op->bytes, bytes);
        add_known(&op->flops, flops);
    }
    if (!rc && !have_header) rc = cal_why(err, errn, CAL_EPROTO, "no header line (op,calls,time_ms,...)");
done:
    free(rd);
    if (rc) return b_fail(&b, rc);
    *out = b.p;
    return CAL_OK;
}

/* ---- any shape ------------------------------------------------------------------ */

int cal_ops_parse(const char *text, size_t len, const char *label,
                  const cal_ops_read_opts *o, cal_ops_profile **out,
                  char *err, size_t errn)
{
    if (!text || !out) return cal_why(err, errn, CAL_EINVAL, "no text");
    *out = NULL;
    size_t i = 0;
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) i = 3;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
    if (i < len && (text[i] == '{' || text[i] == '[')) {
        json_t *root;
        int rc = parse_json(text, len, &root, err, errn);
        if (rc) return rc;
        if (json_is_object(root) && json_object_get(root, "format") &&
            !json_object_get(root, "traceEvents"))
            rc = parse_engine_root(root, label, out, err, errn);
        else
            rc = parse_trace_root(root, label, o, out, err, errn);
        json_decref(root);
        return rc;
    }
    return cal_ops_parse_csv(text, len, label, out, err, errn);
}

int cal_ops_load(const char *path, const cal_ops_read_opts *o, cal_ops_profile **out,
                 char *err, size_t errn)
{
    char *text = NULL;
    size_t len = 0;
    char why[400];
    int rc = cal_csv_read_file(path, CAL_OPS_FILE_MAX, &text, &len, why, sizeof why);
    if (rc) return cal_why(err, errn, rc, "%s", why);
    const char *base = strrchr(path, '/');
    rc = cal_ops_parse(text, len, base ? base + 1 : path, o, out, why, sizeof why);
    free(text);
    if (rc) return cal_why(err, errn, rc, "%s: %s", path, why);
    return CAL_OK;
}
