/* The run plan (run.h): its defaults, the defaults its zeros stand for, and
 * every rule that ties its fields together, checked in one place. A failed
 * check names the plan field at fault, its value and a sentence; callers
 * spell the field their own way (`caliper run` maps it to its flag). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/run.h"
#include "caliper/saturation.h"
#include "lib/util/c_locale.h"

#define MAX_LIST CAL_RUN_MAX_LIST
#define MAX_RATE 1e5                     /* req/s: rate × 4 becomes a request count */
#define MAX_SPAN_S (366 * 86400.0)       /* times become int64_t nanoseconds */
#define MAX_LEN (1 << 20)                /* tokens in one prompt or answer */

void cal_run_plan_default(cal_run_plan *p)
{
    memset(p, 0, sizeof *p);
    p->prompt_tokens[0] = 256;
    p->n_prompt = 1;
    p->concurrency[0] = 1;
    p->n_conc = 1;
    p->shots = CAL_RUN_DEFAULT_SHOTS;
    p->warmup = CAL_RUN_DEFAULT_WARMUP;
    p->content = CAL_CONTENT_PROSE;
    p->max_tokens = 64;
    p->telemetry = 1;
}

static int turns_mode(const cal_run_plan *p) { return p->chat || p->replay_log; }

/* Each request draws its lengths: one cell per load point. */
static int per_request(const cal_run_plan *p)
{
    return p->dataset || p->prompt_len.kind != CAL_LEN_FIXED || p->output_len.kind != CAL_LEN_FIXED;
}

void cal_run_plan_fill(cal_run_plan *p)
{
    if (p->n_prompt == 0) { p->prompt_tokens[0] = 256; p->n_prompt = 1; }
    if (p->n_conc == 0) { p->concurrency[0] = 1; p->n_conc = 1; }
    if (p->shots <= 0) p->shots = 1;
    if (p->max_tokens <= 0) p->max_tokens = 64;
    if (per_request(p) && !turns_mode(p)) p->n_prompt = 1;   /* one cell per load point */
    if (p->rate > 0 && p->pattern.kind != CAL_ARR_POISSON) p->rate = cal_arrivals_mean_rate(&p->pattern);
    if (p->sweep) {
        if (p->rate == 0 && p->pattern.kind == CAL_ARR_POISSON) {   /* the sweep starts at 1 req/s */
            p->rate = 1;
            p->pattern.rate = 1;
        }
        if (p->sweep_steps == 0) p->sweep_steps = 8;
        if (p->sweep_max_rate == 0) p->sweep_max_rate = fmin(16 * p->rate, MAX_RATE);
    }
}

const char *cal_plan_error_text(const cal_plan_error *e, char *buf, size_t n)
{
    cal_snprintf(buf, n, "%s %s: %s", e->field ? e->field : "plan", e->value, e->why);
    return buf;
}

/* Fill *e (when given) and return CAL_EINVAL. */
static int bad(cal_plan_error *e, const char *field, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(cal_plan_error *e, const char *field, const char *value, const char *fmt, ...)
{
    if (!e) return CAL_EINVAL;
    e->field = field;
    snprintf(e->value, sizeof e->value, "%s", value);
    va_list ap;
    va_start(ap, fmt);
    cal_vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    return CAL_EINVAL;
}

/* A number as the value of an error. */
static const char *num(double x, char *buf, size_t n)
{
    cal_snprintf(buf, n, "%g", x);
    return buf;
}

/* Single fields: lengths, counts and bounds before any conversion. */
static int check_bounds(const cal_run_plan *p, cal_plan_error *e)
{
    char v[64];
    if (p->n_prompt > MAX_LIST)
        return bad(e, "prompt_tokens", num((double)p->n_prompt, v, sizeof v), "at most %d prompt lengths", MAX_LIST);
    if (p->n_conc > MAX_LIST)
        return bad(e, "concurrency", num((double)p->n_conc, v, sizeof v), "at most %d concurrency levels", MAX_LIST);
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt_tokens[i] < 1 || p->prompt_tokens[i] > MAX_LEN)
            return bad(e, "prompt_tokens", num(p->prompt_tokens[i], v, sizeof v),
                       "not a prompt length from 1 to %d tokens", MAX_LEN);
    for (size_t i = 0; i < p->n_conc; i++)
        if (p->concurrency[i] < 1)
            return bad(e, "concurrency", num(p->concurrency[i], v, sizeof v), "not a positive count");
    if (p->max_tokens > MAX_LEN)
        return bad(e, "max_tokens", num(p->max_tokens, v, sizeof v), "over %d tokens", MAX_LEN);
    if (!isfinite(p->rate) || p->rate < 0 || p->rate > MAX_RATE)
        return bad(e, "rate", num(p->rate, v, sizeof v), "not a request rate from 0 to %g/s", MAX_RATE);
    if (p->rate > 0 && p->rate < CAL_ARRIVALS_MIN_RATE)
        return bad(e, "rate", num(p->rate, v, sizeof v),
                   "under %.3g requests/s (one a day): its schedule cannot be kept", CAL_ARRIVALS_MIN_RATE);
    if (!(p->duration_s >= 0) || p->duration_s > MAX_SPAN_S)
        return bad(e, "duration_s", num(p->duration_s, v, sizeof v), "not a time from 0 to a year");
    if (p->requests < 0)
        return bad(e, "requests", num((double)p->requests, v, sizeof v), "not a count of requests");
    if (p->warmup < 0)
        return bad(e, "warmup", num(p->warmup, v, sizeof v), "not a count of shots");
    if (!(p->rest_s >= 0) || p->rest_s > MAX_SPAN_S)
        return bad(e, "rest_s", num(p->rest_s, v, sizeof v), "not a time from 0 to a year");
    if (!(p->interval_s >= 0) || p->interval_s > 3600)
        return bad(e, "interval_s", num(p->interval_s, v, sizeof v), "not a sampling period up to 1 h");
    if (!(p->noise_floor >= 0 && p->noise_floor < 1))
        return bad(e, "noise_floor", num(p->noise_floor, v, sizeof v), "not a share from 0 to 100 %%");
    if (!(p->equivalence >= 0 && p->equivalence < 1))
        return bad(e, "equivalence", num(p->equivalence, v, sizeof v), "not a bound from 0 to 100 %%");
    if (p->duration_s > 0 && p->requests)
        return bad(e, "requests", num((double)p->requests, v, sizeof v),
                   "a request count and a duration together: choose one");
    return CAL_OK;
}

/* The traffic: a dataset, drawn lengths, the chat scenario, a replay. */
static int check_traffic(const cal_run_plan *p, cal_plan_error *e)
{
    char v[64];
    const char *mode = p->chat ? "the chat scenario" : "a replay";
    if (p->chat && p->replay_log)
        return bad(e, "replay_log", p->replay_name ? p->replay_name : "(log)",
                   "the chat scenario and a replay together: choose one");
    if (p->replay_log && p->dataset)
        return bad(e, "dataset", p->dataset->name, "a replay sends its own recorded turns: no dataset");
    if (turns_mode(p)) {
        /* the turns set the load and the prompts (one cell per turn) */
        const char *field = NULL;
        if (p->rate > 0) field = "rate", num(p->rate, v, sizeof v);
        else if (p->duration_s > 0) field = "duration_s", num(p->duration_s, v, sizeof v);
        else if (p->n_conc > 1 || p->cap_given) field = "concurrency", num(p->concurrency[0], v, sizeof v);
        else if (p->requests) field = "requests", num((double)p->requests, v, sizeof v);
        else if (p->n_prompt > 1) field = "prompt_tokens", num(p->prompt_tokens[1], v, sizeof v);
        else if (p->prompt_len.kind != CAL_LEN_FIXED)
            field = "prompt_len", cal_lendist_text(&p->prompt_len, v, sizeof v);
        if (field)
            return bad(e, field, v, "does not apply to %s: its turns set the load and the prompts "
                       "(one cell per turn)", mode);
    }
    if (p->replay_log && p->output_len.kind != CAL_LEN_FIXED)
        return bad(e, "output_len", cal_lendist_text(&p->output_len, v, sizeof v),
                   "does not apply to a replay: the recorded output lengths are sent");
    if (!p->dataset && p->prompt_len.kind == CAL_LEN_DATASET)
        return bad(e, "prompt_len", "dataset", "the entries' own lengths need a dataset");
    if (!p->dataset && p->output_len.kind == CAL_LEN_DATASET)
        return bad(e, "output_len", "dataset", "the entries' own lengths need a dataset");
    if (p->chat && p->chat->user_tokens.kind == CAL_LEN_DATASET && !p->chat->dataset)
        return bad(e, "chat.user_tokens", "dataset", "user messages from a dataset need a dataset");
    if (p->rate > 0 && p->pattern.kind != CAL_ARR_POISSON) {
        char pat[64];
        double m = cal_arrivals_mean_rate(&p->pattern);
        if (!(m > 0) || m > MAX_RATE)
            return bad(e, "pattern", cal_arrivals_format(&p->pattern, pat, sizeof pat),
                       "not a request rate from 0 to %g/s", MAX_RATE);
    }
    return CAL_OK;
}

/* The saturation sweep: a Poisson start rate, an slo, steps far enough apart. */
static int check_sweep(const cal_run_plan *p, cal_plan_error *e)
{
    char v[64];
    if (!p->sweep) {
        if (p->sweep_max_rate > 0)
            return bad(e, "sweep_max_rate", num(p->sweep_max_rate, v, sizeof v),
                       "belongs to a saturation sweep, and none is asked for");
        if (p->sweep_steps)
            return bad(e, "sweep_steps", num(p->sweep_steps, v, sizeof v),
                       "belongs to a saturation sweep, and none is asked for");
        return CAL_OK;
    }
    if (turns_mode(p))
        return bad(e, "sweep", "saturation", "a sweep of rate cells, not of %s's turns",
                   p->chat ? "the chat scenario" : "a replay");
    if (!cal_slo_given(&p->slo))
        return bad(e, "slo", "none", "a saturation sweep follows goodput, the requests/s that meet "
                   "every bound: give the bounds");
    if (p->pattern.kind != CAL_ARR_POISSON) {
        char pat[64];
        return bad(e, "pattern", cal_arrivals_format(&p->pattern, pat, sizeof pat),
                   "a saturation sweep raises a Poisson start rate, a number, not a ramp or bursts");
    }
    if (!(p->rate > 0))
        return bad(e, "rate", num(p->rate, v, sizeof v), "a saturation sweep needs a positive start rate");
    if (p->sweep_steps < 2 || p->sweep_steps > CAL_SAT_MAX_STEPS)
        return bad(e, "sweep_steps", num(p->sweep_steps, v, sizeof v), "not a step count from 2 to %d",
                   CAL_SAT_MAX_STEPS);
    if (!(p->sweep_max_rate > p->rate) || p->sweep_max_rate > MAX_RATE)
        return bad(e, "sweep_max_rate", num(p->sweep_max_rate, v, sizeof v),
                   "not a rate above the start rate %g and at most %g/s", p->rate, MAX_RATE);
    char why[300];
    cal_sat sat;
    if (cal_sat_init(&sat, p->rate, p->sweep_max_rate, p->sweep_steps, why, sizeof why)) {
        const char *s = strstr(why, ": ");   /* past its own "field: " */
        return bad(e, "sweep_steps", num(p->sweep_steps, v, sizeof v), "%s", s ? s + 2 : why);
    }
    return CAL_OK;
}

int cal_plan_check(const cal_run_plan *plan, cal_plan_error *e)
{
    if (e) memset(e, 0, sizeof *e);
    if (!plan) return bad(e, "plan", "NULL", "no plan");
    cal_run_plan p = *plan;
    cal_run_plan_fill(&p);
    int rc = check_bounds(&p, e);
    if (!rc) rc = check_traffic(&p, e);
    if (!rc) rc = check_sweep(&p, e);
    return rc;
}
