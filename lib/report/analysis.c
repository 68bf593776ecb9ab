/* caliper — what a report says in words at the top of a foreign import
 * (vLLM, guidellm, aiperf, llama-bench files): the warm drop against shot 1
 * (SPEC 1.1), which column to read at which concurrency (SPEC 1.2), the
 * prefill fit t(n) = a + b·n (SPEC 1.4), and absent telemetry. A stored run
 * brings these from the run analysis (lib/protocol/analysis.c), which is
 * never judged twice. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "report_internal.h"
#include "lib/util/c_locale.h"

int cal_report_linfit(const double *x, const double *y, size_t n,
                      double *a, double *b, double *r2)
{
    /* The project's one least-squares fit (stats.h), so `caliper fit` and the
     * report draw the same line. */
    cal_linfit f;
    if (!x || !y || cal_stats_linfit(x, y, n, 0.95, &f) != CAL_OK) return CAL_EINVAL;
    *a = f.a;
    *b = f.b;
    if (r2) *r2 = f.r2;
    return CAL_OK;
}

/* Prefill time of a prompt-sweep cell, ms: TTFT p50 (an upper bound on
 * prefill: it also holds queueing and the first decode step), else
 * prompt ÷ prefill tok/s. NAN when neither is there. */
double cal_report_prefill_ms(const cal_rcell *c)
{
    if (isfinite(c->v[CAL_M_TTFT_P50])) return c->v[CAL_M_TTFT_P50];
    if (c->fp.prompt_tokens > 0 && c->v[CAL_M_PREFILL_TOKS] > 0)
        return (double)c->fp.prompt_tokens / c->v[CAL_M_PREFILL_TOKS] * 1e3;
    return NAN;
}

/* The shot kind most non-shot-series cells have (warm when tied). */
static cal_shot_kind sweep_kind(const cal_result *r)
{
    int cnt[CAL_SHOT_CONSECUTIVE + 1] = {0};
    for (size_t i = 0; i < r->n_cells; i++)
        if (r->cells[i].sweep != CAL_SWEEP_SHOTS && (unsigned)r->cells[i].fp.shot_kind <= CAL_SHOT_CONSECUTIVE)
            cnt[r->cells[i].fp.shot_kind]++;
    int best = CAL_SHOT_WARM;
    for (int k = 0; k <= CAL_SHOT_CONSECUTIVE; k++) if (cnt[k] > cnt[best]) best = k;
    return (cal_shot_kind)best;
}

static int by_conc(const void *a, const void *b)
{
    const cal_rcell *x = *(const cal_rcell *const *)a, *y = *(const cal_rcell *const *)b;
    return (x->fp.concurrency > y->fp.concurrency) - (x->fp.concurrency < y->fp.concurrency);
}

static int by_prompt(const void *a, const void *b)
{
    const cal_rcell *x = *(const cal_rcell *const *)a, *y = *(const cal_rcell *const *)b;
    return (x->fp.prompt_tokens > y->fp.prompt_tokens) - (x->fp.prompt_tokens < y->fp.prompt_tokens);
}

size_t cal_report_pick_concurrency(const cal_result *r, const cal_rcell **out, size_t cap)
{
    /* Cells of one shot kind and one prompt length: the length swept over
     * the most concurrencies (the larger on a tie). */
    cal_shot_kind kind = sweep_kind(r);
    long best_prompt = -1;
    size_t best_n = 0;
    for (size_t i = 0; i < r->n_cells; i++) {
        const cal_rcell *c = &r->cells[i];
        if (c->sweep == CAL_SWEEP_SHOTS || c->fp.shot_kind != kind || c->fp.concurrency <= 0) continue;
        size_t n = 0;
        for (size_t j = 0; j < r->n_cells; j++) {
            const cal_rcell *d = &r->cells[j];
            if (d->sweep != CAL_SWEEP_SHOTS && d->fp.shot_kind == kind && d->fp.concurrency > 0 &&
                d->fp.prompt_tokens == c->fp.prompt_tokens) n++;
        }
        if (n > best_n || (n == best_n && c->fp.prompt_tokens > best_prompt)) {
            best_n = n;
            best_prompt = c->fp.prompt_tokens;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < r->n_cells && n < cap; i++) {
        const cal_rcell *c = &r->cells[i];
        if (c->sweep == CAL_SWEEP_SHOTS || c->fp.shot_kind != kind || c->fp.concurrency <= 0 ||
            c->fp.prompt_tokens != best_prompt) continue;
        int dup = 0;
        for (size_t k = 0; k < n; k++) dup |= out[k]->fp.concurrency == c->fp.concurrency;
        if (!dup) out[n++] = c;
    }
    qsort(out, n, sizeof *out, by_conc);
    return n;
}

size_t cal_report_pick_prompt(const cal_result *r, const cal_rcell **out, size_t cap)
{
    /* Cells of one shot kind at the lowest concurrency, one per prompt
     * length, with a prefill time; the prompt-sweep cells when there are
     * two or more of them. */
    cal_shot_kind kind = sweep_kind(r);
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int minc = 0;
        for (size_t i = 0; i < r->n_cells; i++) {
            const cal_rcell *c = &r->cells[i];
            if (c->sweep == CAL_SWEEP_SHOTS || (pass == 0 && c->sweep != CAL_SWEEP_PROMPT)) continue;
            if (c->fp.shot_kind == kind && c->fp.concurrency > 0 && (!minc || c->fp.concurrency < minc))
                minc = c->fp.concurrency;
        }
        n = 0;
        for (size_t i = 0; i < r->n_cells && n < cap; i++) {
            const cal_rcell *c = &r->cells[i];
            if (c->sweep == CAL_SWEEP_SHOTS || (pass == 0 && c->sweep != CAL_SWEEP_PROMPT)) continue;
            if (c->fp.shot_kind != kind || c->fp.concurrency != minc || c->fp.prompt_tokens <= 0) continue;
            if (!isfinite(cal_report_prefill_ms(c))) continue;
            int dup = 0;
            for (size_t k = 0; k < n; k++) dup |= out[k]->fp.prompt_tokens == c->fp.prompt_tokens;
            if (!dup) out[n++] = c;
        }
        if (n >= 2) break;
    }
    qsort(out, n, sizeof *out, by_prompt);
    return n;
}

int cal_report_prefill_fit(const cal_result *r, double *a_ms, double *b_ms, double *r2,
                           size_t *npts)
{
    const cal_rcell *cells[64];
    double x[64], y[64];
    size_t n = cal_report_pick_prompt(r, cells, 64);
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)cells[i]->fp.prompt_tokens;
        y[i] = cal_report_prefill_ms(cells[i]);
    }
    *npts = n;
    return cal_report_linfit(x, y, n, a_ms, b_ms, r2);
}

static int has_clock(const cal_result *r)
{
    for (size_t i = 0; i < r->n_tel; i++) if (isfinite(r->tel[i].clock_mhz)) return 1;
    for (size_t i = 0; i < r->n_shots; i++) if (isfinite(r->shots[i].v[CAL_M_CLOCK_MHZ])) return 1;
    return 0;
}

static int has_power(const cal_result *r)
{
    for (size_t i = 0; i < r->n_tel; i++) if (isfinite(r->tel[i].power_w)) return 1;
    for (size_t i = 0; i < r->n_shots; i++) if (isfinite(r->shots[i].v[CAL_M_POWER_W])) return 1;
    return 0;
}

int cal_report_has_clock(const cal_result *r) { return has_clock(r); }
int cal_report_has_power(const cal_result *r) { return has_power(r); }

/* The shot value a verdict and the shot chart read: aggregate, else decode,
 * else prefill tok/s. */
double cal_report_shot_value(const cal_shot *s, const char **what)
{
    static const cal_metric ORDER[] = {CAL_M_REQ_TOKS, CAL_M_AGG_TOKS, CAL_M_DECODE_TOKS,
                                       CAL_M_PREFILL_TOKS};
    for (size_t i = 0; i < sizeof ORDER / sizeof ORDER[0]; i++)
        if (isfinite(s->v[ORDER[i]])) {
            if (what) *what = cal_metric_get(ORDER[i])->label;
            return s->v[ORDER[i]];
        }
    return NAN;
}

static cal_verdict *add(cal_verdict *out, size_t cap, size_t *n, cal_verdict_kind k)
{
    if (*n >= cap) return NULL;
    cal_verdict *v = &out[(*n)++];
    cal_verdict_init(v, k);
    return v;
}

size_t cal_report_verdicts(const cal_result *r, cal_verdict *out, size_t cap)
{
    size_t n = 0;
    cal_verdict *v;
    /* the result's own verdicts first, leaving room for the four read here */
    for (size_t i = 0; i < r->n_verdicts && n + 4 < cap; i++) out[n++] = r->verdicts[i];
    /* a stored run brings the run analysis's verdicts (analysis.h: the
     * column advice, the prefill fit and absent telemetry among them): a kind
     * it brings is never judged again here; a foreign import brings none */
    int have[CAL_VK__N] = {0};
    for (size_t i = 0; i < r->n_verdicts; i++)
        if ((unsigned)r->verdicts[i].kind < CAL_VK__N) have[r->verdicts[i].kind] = 1;

    /* SPEC 1.1: shot 1 against the later shots, through the one judgement,
     * when the result brought no verdict of its own (a foreign file) */
    if (!have[CAL_VK_SHOTS] && r->n_shots >= 3 && n < cap) {
        cal_shot_sample *sh = calloc(r->n_shots, sizeof *sh);
        size_t ns = 0;
        int per_req = 0;
        for (size_t i = 0; sh && i < r->n_shots; i++) {
            const cal_shot *s = &r->shots[i];
            if (s->kind == CAL_SHOT_WARMUP) continue;
            const char *what = NULL;
            double x = cal_report_shot_value(s, &what);
            if (!isfinite(x)) continue;
            per_req = isfinite(s->v[CAL_M_REQ_TOKS]);
            sh[ns++] = (cal_shot_sample){.shot_index = s->index, .kind = s->kind, .value = x};
        }
        cal_verdict sv;
        if (ns >= 3 && cal_analysis_shot_verdict(sh, ns, per_req, 0, &sv)) out[n++] = sv;
        free(sh);
    }

    /* SPEC 1.2: both columns; which one to read where. */
    const cal_rcell *cc[64];
    size_t ncc = cal_report_pick_concurrency(r, cc, 64);
    const cal_rcell *lowc = NULL, *highc = NULL;
    for (size_t i = 0; i < ncc; i++) {
        if (!isfinite(cc[i]->v[CAL_M_AGG_TOKS]) || !isfinite(cc[i]->v[CAL_M_REQ_TOKS])) continue;
        if (!lowc) lowc = cc[i];
        highc = cc[i];
    }
    if (!have[CAL_VK_COLUMN] && lowc && highc && lowc != highc && (v = add(out, cap, &n, CAL_VK_COLUMN))) {
        v->values[0] = lowc->fp.concurrency;
        v->values[1] = lowc->v[CAL_M_REQ_TOKS];
        v->values[2] = highc->fp.concurrency;
        v->values[3] = highc->v[CAL_M_AGG_TOKS];
        cal_snprintf(v->text, sizeof v->text,
                 "read per-request speed at low concurrency (c%d: %.1f tok/s per request, %.1f aggregate) "
                 "and aggregate at high (c%d: %.1f tok/s aggregate, %.1f per request)",
                 lowc->fp.concurrency, lowc->v[CAL_M_REQ_TOKS], lowc->v[CAL_M_AGG_TOKS],
                 highc->fp.concurrency, highc->v[CAL_M_AGG_TOKS], highc->v[CAL_M_REQ_TOKS]);
    }

    /* SPEC 1.4: the prefill line. */
    double a, b, r2;
    size_t np;
    if (!have[CAL_VK_PREFILL_FIT] && cal_report_prefill_fit(r, &a, &b, &r2, &np) == CAL_OK &&
        (v = add(out, cap, &n, CAL_VK_PREFILL_FIT))) {
        v->values[0] = a;
        v->values[1] = b;
        v->values[2] = r2;
        v->n = (int)np;
        if (!(b > 0)) {      /* TTFT that fell as prompts grew is no per-token cost */
            v->judged = 0;
            cal_snprintf(v->text, sizeof v->text, "prefill: no per-token cost shown: TTFT p50 did "
                         "not grow with prompt length (%.4f ms per token over %zu lengths)", b, np);
        } else {
            cal_snprintf(v->text, sizeof v->text,
                         "prefill: fixed cost %.1f ms + %.3f ms per prompt token (R² %.3f over %zu "
                         "lengths; from TTFT p50, an upper bound on prefill time)", a, b, r2, np);
        }
    }
    if (!have[CAL_VK_TELEMETRY] && !has_clock(r) && (v = add(out, cap, &n, CAL_VK_TELEMETRY))) {
        v->judged = 0;
        snprintf(v->text, sizeof v->text, "clock: absent%s%.90s — no clock sensor was read, so a slowdown "
                 "cannot be split into frequency and cycles", r->telemetry[0] ? "; telemetry: " : "",
                 r->telemetry);
    }
    return n;
}
