/* caliper watch — the operating point as a time-weighted histogram of
 * requests running, and the memory slope verdict (see caliper/watch.h).
 * SPEC 1.2: the configured ceiling is not the operating point. */
#include "caliper/watch.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/fit.h"
#include "caliper/units.h"
#include "lib/util/c_locale.h"

const char *const cal_op_share_names[5] = {"0", "1", "2-4", "5-8", "9+"};

int cal_op_init(cal_oppoint *op)
{
    memset(op, 0, sizeof *op);
    op->w_s = calloc(CAL_OP_MAX_RUNNING + 1, sizeof *op->w_s);
    op->last_waiting = NAN;
    op->first_fraction = NAN;
    return op->w_s ? CAL_OK : CAL_ENOMEM;
}

void cal_op_free(cal_oppoint *op)
{
    free(op->w_s);
    op->w_s = NULL;
}

static void credit(cal_oppoint *op, int64_t t_ns)
{
    if (!op->n || t_ns <= op->last_ns) return;
    double dt = (double)(t_ns - op->last_ns) / 1e9;
    /* a fraction between its two neighbours, so the histogram's mean is
     * the readings' own (cal_op_add keeps last_running <= the last bin) */
    double lo = floor(op->last_running), f = op->last_running - lo;
    op->w_s[(size_t)lo] += dt * (1 - f);
    if (f > 0) op->w_s[(size_t)lo + 1] += dt * f;
    op->running_s += dt * op->last_running;
    op->total_s += dt;
    if (!isnan(op->last_waiting)) {
        op->waiting_cov_s += dt;
        op->waiting_s += dt * op->last_waiting;
        if (op->last_waiting >= 1) op->waiting_pos_s += dt;
    }
    op->last_ns = t_ns;
}

int cal_op_add(cal_oppoint *op, int64_t t_ns, double running, double waiting)
{
    if (!op->w_s || !isfinite(running) || running < 0 || (op->n && t_ns < op->last_ns))
        return CAL_EINVAL;
    /* above the last bin: refused, not clamped (1e6 read as 4096 made the
     * advice "benchmark at concurrency 4096") */
    if (running > CAL_OP_MAX_RUNNING) return CAL_ERANGE;
    if (!isfinite(waiting) || waiting < 0) waiting = NAN;
    credit(op, t_ns);
    if (running != floor(running) && !op->fractional++) op->first_fraction = running;
    op->last_running = running;
    op->last_waiting = waiting;
    if (running > op->running_max) op->running_max = running;
    if (!isnan(waiting) && waiting > op->waiting_max) op->waiting_max = waiting;
    op->last_ns = t_ns;
    op->n++;
    return CAL_OK;
}

void cal_op_close(cal_oppoint *op, int64_t t_ns) { credit(op, t_ns); }

static int wpct(const cal_oppoint *op, double p)
{
    double want = p * op->total_s, cum = 0;
    for (int c = 0; c <= CAL_OP_MAX_RUNNING; c++) {
        cum += op->w_s[c];
        if (cum >= want * (1 - 1e-12) && cum > 0) return c;
    }
    return CAL_OP_MAX_RUNNING;
}

int cal_op_summarize(const cal_oppoint *op, cal_op_summary *s)
{
    memset(s, 0, sizeof *s);
    if (!op->w_s || op->total_s <= 0) return CAL_ENOTFOUND;
    s->total_s = op->total_s;
    for (int c = 0; c <= CAL_OP_MAX_RUNNING; c++) {
        double w = op->w_s[c];
        int b = c == 0 ? 0 : c == 1 ? 1 : c <= 4 ? 2 : c <= 8 ? 3 : 4;
        s->share[b] += w;
        if (c >= 1) s->busy_s += w;
    }
    for (int b = 0; b < 5; b++) s->share[b] /= op->total_s;
    s->mean = op->running_s / op->total_s;
    s->p50 = wpct(op, 0.50);
    s->p90 = wpct(op, 0.90);
    s->p99 = wpct(op, 0.99);
    s->running_max = op->running_max;
    s->fractional = op->fractional;
    s->first_fraction = op->first_fraction;
    /* narrowest [lo, hi] within counts >= 1 holding >= 90 % of busy time
     * (two pointers over the histogram; ties go to the lower range) */
    if (s->busy_s > 0) {
        double need = 0.9 * s->busy_s * (1 - 1e-12), win = 0;
        int best_lo = 1, best_hi = CAL_OP_MAX_RUNNING, lo = 1;
        for (int hi = 1; hi <= CAL_OP_MAX_RUNNING; hi++) {
            win += op->w_s[hi];
            while (lo < hi && win - op->w_s[lo] >= need) win -= op->w_s[lo++];
            if (win >= need && hi - lo < best_hi - best_lo) { best_lo = lo; best_hi = hi; }
        }
        double in = 0;
        for (int c = best_lo; c <= best_hi; c++) in += op->w_s[c];
        s->band_lo = best_lo;
        s->band_hi = best_hi;
        s->band_share = in / s->busy_s;
        s->band_share_all = in / op->total_s;
    }
    if (op->waiting_cov_s > 0) {
        s->has_waiting = 1;
        s->waiting_mean = op->waiting_s / op->waiting_cov_s;
        s->waiting_max = op->waiting_max;
        s->waiting_share = op->waiting_pos_s / op->waiting_cov_s;
    }
    return CAL_OK;
}

char *cal_op_verdict(const cal_op_summary *s, double ceiling, char *buf, size_t n)
{
    char band[32], ceil_txt[96] = "";
    if (s->band_lo == s->band_hi) snprintf(band, sizeof band, "%d", s->band_lo);
    else snprintf(band, sizeof band, "%d-%d", s->band_lo, s->band_hi);
    if (ceiling > 0 && !isnan(ceiling))
        snprintf(ceil_txt, sizeof ceil_txt, "a ceiling of %.0f is a ceiling, not the operating point; ",
                 ceiling);
    if (s->busy_s <= 0) {
        cal_snprintf(buf, n, "%sno request ran while watched (idle 100 %% of %.1f s): "
                 "there is no operating point to benchmark yet", ceil_txt, s->total_s);
        return buf;
    }
    snprintf(buf, n, "%shere %s request%s ran %.0f %% of the busy time (idle %.0f %% of the time): "
             "benchmark at concurrency %s", ceil_txt, band, s->band_hi == 1 ? "" : "s",
             100 * s->band_share, 100 * s->share[0], band);
    return buf;
}

/* ---- memory slope ------------------------------------------------------ */

int cal_leak_judge(const double *t_s, const double *rss_b, size_t n, double resolution_b,
                   double level, cal_leak *out)
{
    memset(out, 0, sizeof *out);
    if (level <= 0) level = 0.95;
    size_t di, dj;
    int rc = cal_fit_line(t_s, rss_b, n, 3, level, &out->fit, &di, &dj);
    if (rc) return rc;
    out->slope_bps = out->fit.b;
    out->half_bps = out->fit.has_ci ? out->fit.b_hi - out->fit.b : NAN;
    double res = resolution_b;
    if (!(res > 0)) {
        res = 1000.0;
        if (isfinite(out->fit.s) && out->fit.s > res) res = out->fit.s;
    }
    out->resolution_b = res;
    out->watched_s = t_s[n - 1] - t_s[0];
    double worst = fabs(out->slope_bps) + (isfinite(out->half_bps) ? out->half_bps : 0);
    out->min_watch_s = worst > 0 ? res / worst : INFINITY;
    out->flat = out->fit.has_ci && out->fit.b_lo <= 0 && out->fit.b_hi >= 0;
    out->enough = out->watched_s >= out->min_watch_s;
    return CAL_OK;
}

char *cal_leak_text(const cal_leak *l, char *buf, size_t n)
{
    char res[32], watch[32], seen[32];
    cal_unit_format(CAL_U_BYTES, l->resolution_b, 3, res, sizeof res);
    cal_unit_format(CAL_U_TIME, l->watched_s, 3, seen, sizeof seen);
    if (isfinite(l->min_watch_s)) cal_unit_format(CAL_U_TIME, l->min_watch_s, 2, watch, sizeof watch);
    else snprintf(watch, sizeof watch, "(no slope at all)");
    double mb_min = l->slope_bps * 60 / 1e6, half = l->half_bps * 60 / 1e6;
    const char *verdict = !l->flat ? "not flat"
                        : l->enough ? "flat at this resolution"
                        : "flat so far, but not watched long enough";
    cal_snprintf(buf, n, "slope %+.3g MB/min (CI ±%.2g): %s; watch at least %s to call it flat at a "
             "%s resolution (watched %s)", mb_min, half, verdict, watch, res, seen);
    return buf;
}
