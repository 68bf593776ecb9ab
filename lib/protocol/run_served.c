/* The served target: an engine behind HTTP (the built-in one, a --url, a
 * --launch'ed command) as cal_run_target ops. It wraps the target
 * lifecycle (cal_target_*), the probe, the model lookup and the server's
 * tokenizer; a restart (--cold) moves the probe and the tokenizer to the
 * new address. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/run.h"
#include "caliper/url.h"

typedef struct served {
    cal_target_config tcfg;
    cal_probe_config pcfg;
    char *command, *tcfg_url, *preset;
    char **argv;                 /* builtin: owned copy, NULL-terminated */
    char *api_key, *extra_body, *version;
    int64_t models_timeout_ns, tokenize_timeout_ns;
    cal_target *target;
    cal_probe *probe;
    cal_http_tokenizer *tk;
    int tk_tried;
    char model[256];
    int model_given, model_asked;
    char url[512];
    char url_shown[512];   /* url without credentials: all that is printed or stored */
    char what[600];
    int64_t load_ns;
} served;

static char *dup0(const char *s) { return s ? strdup(s) : NULL; }

static void argv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

/* A deep copy of a NULL-terminated argv; NULL for NULL or out of memory
 * (*oom set then). */
static char **argv_dup(const char *const *v, int *oom)
{
    if (!v) return NULL;
    size_t n = 0;
    while (v[n]) n++;
    char **c = calloc(n + 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) { argv_free(c); c = NULL; }
    if (!c) *oom = 1;
    return c;
}

static void s_stop(void *self)
{
    served *s = self;
    cal_probe_close(&s->probe);
    cal_target_stop(&s->target);
}

static int s_start(void *self, volatile int *stop, char *err, size_t errn)
{
    served *s = self;
    s_stop(s);
    cal_target_config tc = s->tcfg;
    tc.stop = stop;
    int rc = cal_target_start(&tc, &s->target, err, errn);
    if (rc) return rc;
    snprintf(s->url, sizeof s->url, "%s", cal_target_url(s->target));
    cal_url_redact(s->url, s->url_shown, sizeof s->url_shown);
    s->load_ns = cal_target_load_ns(s->target);
    if (!s->model_given && !s->model_asked) {
        s->model_asked = 1;
        if (cal_target_models_stop(s->url, s->pcfg.api_key, s->models_timeout_ns, stop, s->model,
                                   sizeof s->model, NULL) != CAL_OK)
            s->model[0] = '\0';
    }
    cal_probe_config pc = s->pcfg;
    pc.base_url = s->url;
    if (pc.loops == CAL_PROBE_LOOPS_AUTO)       /* leave a pinned local engine its CPUs */
        pc.loops = cal_probe_default_loops(s->target ? (int)cal_target_pid(s->target) : 0);
    pc.model = s->model[0] ? s->model : NULL;
    rc = cal_probe_open(&pc, &s->probe);
    const char *lb = getenv("CALIPER_LOOP");
    if (rc == CAL_EINVAL && lb && *lb) {
        cal_why(err, errn, rc, "CALIPER_LOOP: \"%s\" is not an event-loop backend of this build "
                "(%s)", lb, cal_probe_loop_backends());
        return rc;
    }
    if (rc) {
        cal_why(err, errn, rc, "probe: cannot open for %s: %s", s->url_shown, cal_strerror(rc));
        return rc;
    }
    if (s->tk) cal_http_tokenizer_retarget(s->tk, s->url);   /* a cold restart moves ports */
    else if (!s->tk_tried) {
        s->tk_tried = 1;
        cal_http_tokenizer_open(s->url, s->model[0] ? s->model : NULL, s->pcfg.api_key,
                                s->tokenize_timeout_ns, &s->tk);
    }
    cal_http_tokenizer_set_stop(s->tk, stop);
    return CAL_OK;
}

static int s_send(void *self, const cal_request *reqs, size_t n, const cal_load *load,
                  cal_req_result *results, volatile int *stop, cal_probe_progress_fn progress,
                  void *ud, cal_probe_stats *stats)
{
    served *s = self;
    if (!s->probe) return CAL_EINVAL;
    return cal_probe_run(s->probe, reqs, n, load, results, stop, progress, ud, stats);
}

static int s_count(void *self, const char *text, int *n)
{
    served *s = self;
    if (!s->tk) return CAL_EABSENT;
    return cal_http_tokenizer_count(s->tk, text, n);
}

static int s_count_many(void *self, const char *const *texts, size_t n, int *counts)
{
    served *s = self;
    if (!s->tk) return CAL_EABSENT;
    return cal_http_tokenizer_count_many(s->tk, texts, n, counts);
}

static int s_ids(void *self, const char *text, int32_t **ids, int *n)
{
    served *s = self;
    if (!s->tk) return CAL_EABSENT;
    return cal_http_tokenizer_ids(s->tk, text, ids, n);
}

static const char *s_tokenizer_why(void *self)
{
    served *s = self;
    return cal_http_tokenizer_why(s->tk);
}

static int s_specials(void *self, const char *text, int *n)
{
    served *s = self;
    if (!s->tk) return CAL_EABSENT;
    return cal_http_tokenizer_specials(s->tk, text, n);
}

static int s_alive(void *self)
{
    served *s = self;
    return s->target ? cal_target_alive(s->target) : 0;
}

static int64_t s_started(void *self)
{
    served *s = self;
    return s->target ? cal_target_spawn_ns(s->target) : -1;
}

static int s_pid(void *self)
{
    served *s = self;
    return s->target ? (int)cal_target_pid(s->target) : 0;
}

/* The last ~300 bytes of a launched engine's log, on one line. */
static void s_why(void *self, char *out, size_t n)
{
    served *s = self;
    out[0] = '\0';
    const char *lp = s->target ? cal_target_log_path(s->target) : NULL;
    FILE *lf = lp ? fopen(lp, "r") : NULL;
    if (!lf || n < 2) {
        if (lf) fclose(lf);
        return;
    }
    fseek(lf, 0, SEEK_END);
    long sz = ftell(lf);
    long want = (long)(n - 1 < 300 ? n - 1 : 300);
    fseek(lf, sz > want ? sz - want : 0, SEEK_SET);
    size_t k = fread(out, 1, (size_t)want, lf);
    out[k] = '\0';
    for (size_t i = 0; i < k; i++) if (out[i] == '\n') out[i] = ' ';
    fclose(lf);
}

static char *s_describe(void *self)
{
    served *s = self;
    json_t *t = json_object();
    json_object_set_new(t, "kind", json_string(cal_target_kind_name(s->tcfg.kind)));
    if (s->tcfg.kind == CAL_TARGET_BUILTIN) json_object_set_new(t, "name", json_string(s->preset ? s->preset : "small"));
    else if (s->tcfg.kind == CAL_TARGET_LAUNCH) json_object_set_new(t, "name", json_string(s->command));
    else json_object_set_new(t, "name", json_string(s->url_shown));
    json_object_set_new(t, "model", s->model[0] ? json_string(s->model) : json_null());
    json_object_set_new(t, "version", s->version ? json_string(s->version)
                                      : s->model[0] ? json_string(s->model) : json_null());
    json_object_set_new(t, "url", json_string(s->url_shown));
    json_object_set_new(t, "command", s->command ? json_string(s->command) : json_null());
    json_object_set_new(t, "load_s", s->target && s->load_ns >= 0 ? json_real(s->load_ns / 1e9) : json_null());
    json_object_set_new(t, "api", json_string(s->pcfg.api == CAL_API_CHAT ? "chat" : "completions"));
    const char *det = s->target ? cal_target_detail(s->target) : NULL;
    if (det) json_object_set_new(t, "detail", json_string(det));
    char *out = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return out;
}

static const char *s_what(void *self)
{
    served *s = self;
    if (s->tcfg.kind == CAL_TARGET_BUILTIN) return "the built-in engine";
    if (s->tcfg.kind == CAL_TARGET_LAUNCH) return s->command;
    return s->url_shown;
}

static void s_destroy(void *self)
{
    served *s = self;
    s_stop(s);
    cal_http_tokenizer_close(&s->tk);
    free(s->command); free(s->tcfg_url); argv_free(s->argv); free(s->preset);
    free(s->api_key); free(s->extra_body); free(s->version);
    free(s);
}

/* one ops table per kind, so the kind reads right in events and records */
#define SERVED_OPS(K) { \
    .kind = K, .start = s_start, .stop = s_stop, .send = s_send, .count_tokens = s_count, \
    .count_many = s_count_many, .token_ids = s_ids, .count_specials = s_specials, \
    .alive = s_alive, .started_ns = s_started, .pid = s_pid, .why_failed = s_why, \
    .tokenizer_why = s_tokenizer_why, \
    .describe = s_describe, .what = s_what, .destroy = s_destroy }
static const cal_run_target_ops OPS[3] = {SERVED_OPS("builtin"), SERVED_OPS("url"),
                                          SERVED_OPS("launch")};

int cal_run_target_served(const cal_served_config *cfg, cal_run_target **out)
{
    if (!out) return CAL_EINVAL;
    *out = NULL;
    if (!cfg || (unsigned)cfg->target.kind > CAL_TARGET_LAUNCH) return CAL_EINVAL;
    if (cfg->target.kind == CAL_TARGET_URL && !cfg->target.url) return CAL_EINVAL;
    if (cfg->target.kind == CAL_TARGET_LAUNCH && !cfg->target.command) return CAL_EINVAL;
    served *s = calloc(1, sizeof *s);
    cal_run_target *t = calloc(1, sizeof *t);
    if (!s || !t) { free(s); free(t); return CAL_ENOMEM; }
    s->tcfg = cfg->target;
    s->pcfg = cfg->probe;
    s->command = dup0(cfg->target.command);
    s->tcfg_url = dup0(cfg->target.url);
    int oom = 0;
    s->argv = argv_dup(cfg->target.argv, &oom);
    s->preset = dup0(cfg->target.preset);
    s->api_key = dup0(cfg->probe.api_key);
    s->extra_body = dup0(cfg->probe.extra_body);
    s->version = dup0(cfg->version);
    if (oom) { s_destroy(s); free(t); return CAL_ENOMEM; }
    s->tcfg.command = s->command;
    s->tcfg.url = s->tcfg_url;
    s->tcfg.argv = (const char *const *)s->argv;
    s->tcfg.preset = s->preset;
    s->tcfg.stop = NULL;
    s->pcfg.api_key = s->api_key;
    s->pcfg.extra_body = s->extra_body;
    s->pcfg.base_url = NULL;
    if (cfg->probe.model) {
        snprintf(s->model, sizeof s->model, "%s", cfg->probe.model);
        s->model_given = 1;
    }
    s->pcfg.model = NULL;
    s->models_timeout_ns = cfg->models_timeout_ns;
    s->tokenize_timeout_ns = cfg->tokenize_timeout_ns;
    if (cfg->target.kind == CAL_TARGET_URL) snprintf(s->url, sizeof s->url, "%s", cfg->target.url);
    if (s->tcfg_url) cal_url_redact(s->tcfg_url, s->url_shown, sizeof s->url_shown);
    t->ops = &OPS[cfg->target.kind];
    t->self = s;
    t->fresh_on_start = cfg->target.kind != CAL_TARGET_URL;
    t->restartable = cfg->target.kind != CAL_TARGET_URL;
    *out = t;
    return CAL_OK;
}
