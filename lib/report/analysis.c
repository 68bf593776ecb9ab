/* caliper — what a report says in words at the top: the warm drop against
 * shot 1 (SPEC 1.1), which column to read at which concurrency (SPEC 1.2),
 * the prefill fit t(n) = a + b·n (SPEC 1.4), and absent telemetry. */
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
    for (size_t i = 0; i < r->n_shots; i++) if (isfinite(r->shots[i].clock_mhz)) return 1;
    return 0;
}

static int has_power(const cal_result *r)
{
    for (size_t i = 0; i < r->n_tel; i++) if (isfinite(r->tel[i].power_w)) return 1;
    for (size_t i = 0; i < r->n_shots; i++) if (isfinite(r->shots[i].power_w)) return 1;
    return 0;
}

int cal_report_has_clock(const cal_result *r) { return has_clock(r); }
int cal_report_has_power(const cal_result *r) { return has_power(r); }

/* The shot value a verdict and the shot chart read: aggregate, else decode,
 * else prefill tok/s. */
double cal_report_shot_value(const cal_shot *s, const char **what)
{
    if (isfinite(s->req_tok_s)) { if (what) *what = "per-request tok/s"; return s->req_tok_s; }
    if (isfinite(s->agg_tok_s)) { if (what) *what = "output tok/s"; return s->agg_tok_s; }
    if (isfinite(s->decode_tok_s)) { if (what) *what = "decode tok/s"; return s->decode_tok_s; }
    if (isfinite(s->prefill_tok_s)) { if (what) *what = "prefill tok/s"; return s->prefill_tok_s; }
    return NAN;
}

static size_t add(char (*out)[256], size_t cap, size_t n, const char *fmt, double a,
                  double b, double c, double d)
{
    if (n >= cap) return n;
    cal_snprintf(out[n], 256, fmt, a, b, c, d);
    return n + 1;
}

size_t cal_report_verdicts(const cal_result *r, char (*out)[256], size_t cap)
{
    size_t n = 0;
    /* the run's own verdicts first, leaving room for the four read here */
    for (size_t i = 0; i < r->n_verdicts && n + 4 < cap; i++)
        snprintf(out[n++], 256, "%s", r->verdicts[i]);

    /* SPEC 1.1: shot 1 against the median of the later shots. */
    if (r->n_verdicts == 0 && r->n_shots >= 3) {
        double first = NAN, later[256];
        int fi = 0, lo = 0, hi = 0;
        size_t nl = 0;
        const char *what = "tok/s";
        for (size_t i = 0; i < r->n_shots; i++) {
            const cal_shot *s = &r->shots[i];
            if (s->kind == CAL_SHOT_WARMUP) continue;
            double v = cal_report_shot_value(s, &what);
            if (!isfinite(v)) continue;
            if (isnan(first)) { first = v; fi = s->index; continue; }
            if (nl < 256) { later[nl++] = v; if (!lo) lo = s->index; hi = s->index; }
        }
        if (isfinite(first) && first > 0 && nl >= 2) {
            double med = cal_stats_median(later, nl);
            double drop = (first - med) / first * 100;
            double band = (later[nl - 1] - later[0]) / 2 / med * 100;   /* sorted by median */
            if (band < 3) band = 3;
            char fmt[200];
            if (fabs(drop) > band)
                snprintf(fmt, sizeof fmt, "shots %d–%d run %%.1f %%%% %s shot %d (band ±%%.1f %%%%): %s",
                         lo, hi, drop > 0 ? "below" : "above", fi,
                         drop > 0 ? "quote warm figures, not shot 1" : "shot 1 was slow (warm-up)");
            else
                snprintf(fmt, sizeof fmt, "shots %d–%d within noise of shot %d (%%+.1f %%%%, band ±%%.1f %%%%): no wall seen",
                         lo, hi, fi);
            n = add(out, cap, n, fmt, fabs(drop) > band ? fabs(drop) : -drop, band, 0, 0);
        }
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
    if (lowc && highc && lowc != highc && n < cap) {
        cal_snprintf(out[n++], 256,
                 "read per-request speed at low concurrency (c%d: %.1f tok/s per request, %.1f aggregate) "
                 "and aggregate at high (c%d: %.1f tok/s aggregate, %.1f per request)",
                 lowc->fp.concurrency, lowc->v[CAL_M_REQ_TOKS], lowc->v[CAL_M_AGG_TOKS],
                 highc->fp.concurrency, highc->v[CAL_M_AGG_TOKS], highc->v[CAL_M_REQ_TOKS]);
    }

    /* SPEC 1.4: the prefill line. */
    double a, b, r2;
    size_t np;
    if (cal_report_prefill_fit(r, &a, &b, &r2, &np) == CAL_OK && n < cap) {
        cal_snprintf(out[n++], 256,
                 "prefill: fixed cost %.1f ms + %.3f ms per prompt token (R² %.3f over %zu lengths; "
                 "from TTFT p50, an upper bound on prefill time)", a, b, r2, np);
    }
    if (!has_clock(r) && n < cap)
        snprintf(out[n++], 256, "clock: absent%s%.90s — no clock sensor was read, so a slowdown "
                 "cannot be split into frequency and cycles", r->telemetry[0] ? "; telemetry: " : "",
                 r->telemetry);
    return n;
}
