/* caliper judge — the calibrated shot verdict (see include/caliper/judge.h
 * for the model). Shot-level t with the requests' spread as a floor on the
 * shot-to-shot sd, a practical floor, warm halves that must agree, and a
 * trend test on the warm shots. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/judge.h"
#include "caliper/stats.h"
#include "lib/util/c_locale.h"

#define TREND_LEVEL 0.99   /* the trend is a second test: called at 1 % */
#define PRIOR_LEVEL 0.05   /* a prior whose sd this run's warm shots exceed at 5 % is dropped */

const char *cal_judge_kind_name(cal_judge_kind k)
{
    switch (k) {
    case CAL_JUDGE_STEADY: return "steady";
    case CAL_JUDGE_SMALL:  return "under_floor";
    case CAL_JUDGE_SLOWER: return "slower";
    case CAL_JUDGE_FASTER: return "faster";
    case CAL_JUDGE_TREND:  return "trend";
    default:               return "cannot_judge";
    }
}

static double sq(double x) { return x * x; }

/* ---- heavy-tailed shots -------------------------------------------------
 * A shot on a shared machine is now and then hit by a burst of other work
 * as a whole: shot effects are not normal but heavy-tailed. Measured on
 * real steady series (bench/verdicts, docs/run.md), the step statistic's
 * upper quantiles were those of shot effects drawn from Student's t with
 * 2 to 3 degrees of freedom, not of normal ones: at 5 warm shots' df the
 * normal model's 95 % critical value (3.18) was exceeded by 8 % of steady
 * series. A slow first shot alone then reads as a wall after a warm-up.
 * The step and the equivalence test therefore read their critical value
 * off the statistic's distribution when every shot effect is t with
 * CAL_JUDGE_SHOT_TAIL_DF df: T = (mean of k warm − first) ÷ (s·√(1 + 1/k)),
 * s the warm shots' sd, df = k − 1 (a pooled prior's df counted as more
 * warm shots). Over 280 real steady series (the built-in engine paced and
 * not, llama-server) the first shot exceeded the normal model's value on
 * its slow side in 12, t(3)'s in 9 and t(2)'s in 6, where the side of a
 * wall after shot 1 exceeded the normal model's in 6: t(2) it is.
 * Tabulated below by a seeded simulation of 400,000 series a row
 * (tests/unit/test_judge.c, test_heavy_quantiles, checks rows against a
 * fresh simulation); never below the normal model's t quantile. */
static const struct { double df, q90, q95; } HEAVY[] = {
    { 1, 7.121, 14.785}, { 2, 3.491, 5.732}, { 3, 2.762, 4.330}, { 4, 2.474, 3.769},
    { 5, 2.293, 3.461}, { 6, 2.173, 3.264}, { 7, 2.075, 3.115}, { 8, 2.007, 3.001},
    {10, 1.911, 2.847}, {12, 1.835, 2.733}, {15, 1.748, 2.605}, {20, 1.671, 2.480},
    {30, 1.549, 2.292}, {60, 1.397, 2.076},
};
#define N_HEAVY (sizeof HEAVY / sizeof HEAVY[0])
/* df → ∞: t(2) shots have no variance, s grows without bound and T falls
 * to 0; past the last row the normal model's quantile takes over */
#define HEAVY_INF_Q90 1.645
#define HEAVY_INF_Q95 1.960

double cal_judge_heavy_quantile(double two_sided, double df)
{
    if (!(df >= 1)) df = 1;
    int hi95 = fabs(two_sided - 0.95) < 1e-9, hi90 = fabs(two_sided - 0.90) < 1e-9;
    double q;
    if (df >= HEAVY[N_HEAVY - 1].df) {
        /* between the last row and the limit, linear in 1 ÷ df */
        double w = HEAVY[N_HEAVY - 1].df / df;
        double a90 = HEAVY[N_HEAVY - 1].q90, a95 = HEAVY[N_HEAVY - 1].q95;
        q = hi90 ? HEAVY_INF_Q90 + w * (a90 - HEAVY_INF_Q90) : HEAVY_INF_Q95 + w * (a95 - HEAVY_INF_Q95);
    } else {
        size_t i = 0;
        while (i + 1 < N_HEAVY && HEAVY[i + 1].df <= df) i++;
        double x0 = 1 / HEAVY[i].df, x1 = 1 / HEAVY[i + 1].df, x = 1 / df;
        double w = (x0 - x) / (x0 - x1);
        q = hi90 ? HEAVY[i].q90 + w * (HEAVY[i + 1].q90 - HEAVY[i].q90)
                 : HEAVY[i].q95 + w * (HEAVY[i + 1].q95 - HEAVY[i].q95);
    }
    double t = cal_stats_t_quantile(0.5 + two_sided / 2, df);
    /* another level: the 95 % row's ratio to the normal model, applied */
    if (!hi95 && !hi90) q = t * q / cal_stats_t_quantile(0.975, df);
    return q > t ? q : t;
}

static double mean_of(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return n ? s / (double)n : NAN;
}

static double var_of(const double *x, size_t n)
{
    if (n < 2) return NAN;
    double m = mean_of(x, n), s = 0;
    for (size_t i = 0; i < n; i++) s += sq(x[i] - m);
    return s / (double)(n - 1);
}

void cal_judge_step(const double *z, size_t n, double tau_within, double level,
                    cal_judge_verdict *o)
{
    cal_judge_step_prior(z, n, tau_within, 0, NAN, 0, level, o);
}

static void step(const double *z, size_t n, double tau_within, double tau_within_df,
                 double prior_sd, double prior_df, double first_sd, double first_df,
                 double level, int heavy_side, cal_judge_verdict *o);

void cal_judge_step_prior(const double *z, size_t n, double tau_within, double tau_within_df,
                          double prior_sd, double prior_df, double level, cal_judge_verdict *o)
{
    step(z, n, tau_within, tau_within_df, prior_sd, prior_df, NAN, 0, level, 0, o);
}

/* The step decision; first_sd, first_df: the first shot's own spread
 * (cal_judge_opts), NAN and 0 for none. heavy_side: the sign of d (the warm
 * shots' mean less the first's, log scale) whose tail is heavy: +1 where a
 * slow first shot makes d large (throughput: other work only slows a shot
 * down), −1 where a worse first shot makes d small (latency), 0 none (the
 * normal model both ways). That side's bound reads cal_judge_heavy_quantile,
 * the other the normal t quantile: a burst on the first shot cannot make
 * it look better than it is, so a wall after shot 1 is judged as before. */
static void step(const double *z, size_t n, double tau_within, double tau_within_df,
                 double prior_sd, double prior_df, double first_sd, double first_df,
                 double level, int heavy_side, cal_judge_verdict *o)
{
    if (!(prior_df > 0 && isfinite(prior_sd) && prior_sd >= 0)) prior_df = 0;
    if (!(level > 0 && level < 1)) level = 0.95;
    o->level = level;
    o->effect = o->lo = o->hi = o->t = o->df = o->p = o->tau = NAN;
    o->half1 = o->half2 = o->slope = o->slope_lo = o->slope_hi = NAN;
    o->tau_within = tau_within > 0 ? tau_within : 0;
    o->trend_sig = 0;
    o->prior_df = 0;
    o->prior_rejected = 0;
    o->first_sd = 0;
    o->widen = 1;
    o->eq_lo = o->eq_hi = NAN;
    o->k = n > 0 ? (int)n - 1 : 0;
    if (n < 3) return;   /* fewer than 2 warm shots: no spread to judge by */
    size_t k = n - 1;
    const double *w = z + 1;
    double d = mean_of(w, k) - z[0];
    /* the warm shots' variance, pooled with the stored prior when there is one */
    double v = var_of(w, k), dfv = (double)(k - 1);
    /* a prior that does not describe this run is dropped: its warm shots
     * spread more than the stored runs' at 5 % (F test), e.g. a busier
     * machine now than then */
    if (prior_df > 0 && prior_sd > 0 && v > 0) {
        double f = v / sq(prior_sd);
        double p_up = cal_stats_ibeta(prior_df / 2, dfv / 2, prior_df / (prior_df + dfv * f));
        if (p_up < PRIOR_LEVEL) { prior_df = 0; o->prior_rejected = 1; }
    }
    if (prior_df > 0) {
        v = (dfv * v + prior_df * sq(prior_sd)) / (dfv + prior_df);
        dfv += prior_df;
        o->prior_df = prior_df;
    }
    /* the requests' spread is a floor, never an estimate with degrees of
     * freedom of its own: counting its df (tau_within_df) raised the false
     * alarms on a loaded machine from 1 in 40 steady runs to 4 in 40, where
     * a burst of other work moves a whole shot and heavy tails break the
     * normal model (docs/run.md); the parameter is kept for callers that
     * know their shots are homogeneous */
    double tau2 = fmax(v, sq(o->tau_within));
    if (k >= 4 && sq(o->tau_within) > v && tau_within_df > dfv) dfv = tau_within_df;
    o->tau = sqrt(tau2);
    o->df = dfv;
    double se = o->tau * sqrt(1.0 + 1.0 / (double)k);
    double own = cal_stats_t_quantile(0.5 + level / 2, o->df) * se;
    /* the first shot's own spread, from the series' earlier runs, where it
     * is larger than the warm shots': var(d) = var(first) + tau² ÷ k, on
     * Welch–Satterthwaite's degrees of freedom for that sum, so the history
     * weighs by the runs behind it. Fewer than CAL_JUDGE_FIRST_MIN_DF of
     * those: not used (judge.h) */
    if (first_df >= CAL_JUDGE_FIRST_MIN_DF && first_sd > o->tau) {
        double a = sq(first_sd), b = sq(o->tau) / (double)k;
        se = sqrt(a + b);
        o->df = sq(a + b) / (sq(a) / first_df + sq(b) / o->df);
        o->first_sd = first_sd;
    }
    double tc = cal_stats_t_quantile(0.5 + level / 2, o->df);
    o->widen = own > 0 ? tc * se / own : 1;
    /* each side's critical value: the heavy side's from heavy-tailed shots */
    double th = cal_judge_heavy_quantile(level, o->df);
    double c_lo = heavy_side > 0 ? th : tc, c_hi = heavy_side < 0 ? th : tc;
    /* the equivalence test's interval: two one-sided tests at (1 − level) ÷ 2
     * each read the (2·level − 1) CI */
    double te = cal_stats_t_quantile(level, o->df), teh = cal_judge_heavy_quantile(2 * level - 1, o->df);
    o->eq_lo = expm1(d - (heavy_side > 0 ? teh : te) * se);
    o->eq_hi = expm1(d + (heavy_side < 0 ? teh : te) * se);
    o->effect = expm1(d);
    if (se > 0) {
        o->t = d / se;
        o->p = 2 * (1 - cal_stats_t_cdf(fabs(o->t), o->df));
    } else {
        o->t = d == 0 ? 0 : copysign(INFINITY, d);
        o->p = d == 0 ? 1 : 0;
    }
    o->lo = expm1(d - c_lo * se);
    o->hi = expm1(d + c_hi * se);
    /* the two halves of the warm shots, each against shot 1 */
    size_t h = k / 2;
    o->half1 = expm1(mean_of(w, h) - z[0]);
    o->half2 = expm1(mean_of(w + h, k - h) - z[0]);
    /* a trend of the warm shots: log-linear slope per shot */
    if (k >= 4) {
        double xs[CAL_JUDGE_MAX_SHOTS];
        for (size_t i = 0; i < k; i++) xs[i] = (double)i;
        cal_linfit f;
        if (cal_stats_linfit(xs, w, k, level, &f) == 0) {
            double s2 = fmax(isfinite(f.s) ? sq(f.s) : 0, sq(o->tau_within));
            double se_b = sqrt(s2 / f.sxx);
            double tl = cal_stats_t_quantile(0.5 + level / 2, f.df);
            o->slope = expm1(f.b);
            o->slope_lo = expm1(f.b - tl * se_b);
            o->slope_hi = expm1(f.b + tl * se_b);
            double tt = cal_stats_t_quantile(0.5 + TREND_LEVEL / 2, f.df);
            o->trend_sig = fabs(f.b) > tt * se_b;
        }
    }
}

static void range_words(const cal_judge_verdict *o, char *b, size_t n, const char *pre)
{
    if (o->later_first == o->later_last) cal_snprintf(b, n, "%sshot %d", pre, o->later_first);
    else cal_snprintf(b, n, "%sshots %d–%d", pre, o->later_first, o->later_last);
}

/* "9.1–18.6 %" for a CI on one side of zero, "−6.1 to +4.9 %" across it */
static void ci_words(double lo, double hi, int abs_, char *b, size_t n)
{
    if (abs_ && lo < 0 && hi < 0) cal_snprintf(b, n, "%.1f–%.1f %%", -100 * hi, -100 * lo);
    else if (abs_ && lo > 0) cal_snprintf(b, n, "%.1f–%.1f %%", 100 * lo, 100 * hi);
    else cal_snprintf(b, n, "%+.1f to %+.1f %%", 100 * lo, 100 * hi);
}

/* What would make a band that is too wide judgeable: more warm shots where
 * they would bring the equivalence CI inside ±eq (the first shot's own
 * spread stays: it is one draw), else the spread itself is too large for
 * the bound. */
static void judgeable_hint(const cal_judge_verdict *o, double eq, char *b, size_t n)
{
    double d = log1p(o->effect), lim = fmin(log1p(eq), -log1p(-eq));
    double first2 = o->first_sd > 0 ? sq(o->first_sd) : sq(o->tau);
    double fixed_df = o->df - (double)(o->k - 1);
    for (int k = o->k + 1; k <= 64 && isfinite(d); k++) {
        double se = sqrt(first2 + sq(o->tau) / (double)k);
        double te = cal_judge_heavy_quantile(2 * o->level - 1, fmax(1, fixed_df + (double)(k - 1)));
        if (fabs(d) + te * se < lim) {
            cal_snprintf(b, n, "measure %d shots (%d warm)", k + 1, k);
            return;
        }
    }
    cal_snprintf(b, n, "one shot spreads ±%.1f %% here, so more shots would not: more requests "
                 "per shot, a quieter machine or a wider equivalence bound would",
                 100 * expm1(cal_judge_heavy_quantile(2 * o->level - 1, 30) * sqrt(first2)));
}

int cal_judge_shots(const cal_judge_shot *shots, size_t n, const cal_judge_opts *opts,
                    cal_judge_verdict *o)
{
    cal_judge_opts op = opts ? *opts : (cal_judge_opts){0};
    if (!(op.floor > 0)) op.floor = CAL_JUDGE_FLOOR;
    if (!(op.level > 0 && op.level < 1)) op.level = 0.95;
    if (!op.min_requests) op.min_requests = CAL_JUDGE_MIN_REQUESTS;
    const char *what = op.what ? op.what : "throughput";
    memset(o, 0, sizeof *o);
    o->floor = op.floor;
    o->level = op.level;
    o->first = o->later = NAN;
    cal_judge_step(NULL, 0, 0, op.level, o);
    if (n > CAL_JUDGE_MAX_SHOTS) n = CAL_JUDGE_MAX_SHOTS;

    /* per shot: the median of log values; pooled within-shot variance */
    double z[CAL_JUDGE_MAX_SHOTS], buf[4096];
    double ss_within = 0, inv_n = 0;
    size_t df_within = 0, used = 0, fewest = (size_t)-1;
    int thin_shot = 0;
    for (size_t j = 0; j < n; j++) {
        size_t m = 0;
        for (size_t i = 0; i < shots[j].n && m < sizeof buf / sizeof buf[0]; i++) {
            double x = shots[j].v ? shots[j].v[i] : NAN;
            if (isfinite(x) && x > 0) buf[m++] = log(x);
        }
        if (m < fewest) fewest = m;
        if (m < op.min_requests && !thin_shot) thin_shot = shots[j].index;
        o->n_requests += m;
        if (!m) { z[j] = NAN; continue; }
        /* the shot's median and a robust spread around it (1.4826 × MAD ≈ σ
         * for normal values): one request slowed by a burst of other work
         * moves neither, as it does not move the median */
        z[j] = cal_stats_median(buf, m);   /* sorts buf */
        for (size_t i = 0; i < m; i++) buf[i] = fabs(buf[i] - z[j]);
        double sd = 1.4826 * cal_stats_median(buf, m);
        ss_within += sq(sd) * (double)(m - 1);
        df_within += m - 1;
        inv_n += 1.0 / (double)m;
        used++;
    }
    o->min_shot_requests = n ? fewest : 0;
    o->first_shot = n ? shots[0].index : 0;
    o->later_first = n > 1 ? shots[1].index : 0;
    o->later_last = n > 1 ? shots[n - 1].index : 0;
    o->k = n > 1 ? (int)n - 1 : 0;
    char hint[64];
    cal_snprintf(hint, sizeof hint, "measure %d shots", CAL_JUDGE_SHOTS_HINT);
    if (n < 2) {
        cal_snprintf(o->why, sizeof o->why, "cannot judge: %s; %s",
                 n ? "1 shot, nothing to compare it with" : "no shots", hint);
    } else if (n == 2 && op.first == CAL_JUDGE_ALL_COLD) {
        cal_snprintf(o->why, sizeof o->why,
                 "cannot judge: cold shot %d is the only one after cold shot %d; %s, each cold",
                 shots[1].index, shots[0].index, hint);
    } else if (n == 2) {
        cal_snprintf(o->why, sizeof o->why, "cannot judge: 1 warm shot; %s", hint);
    } else if (thin_shot) {
        cal_snprintf(o->why, sizeof o->why,
                 "cannot judge: shot %d has %zu ok requests (fewer than %zu); measure 8 requests a shot",
                 thin_shot, fewest, op.min_requests);
    }
    if (o->why[0]) {
        cal_snprintf(o->text, sizeof o->text, "%s", o->why);
        return 0;
    }
    /* the requests' own spread bounds a shot median's sd from below:
     * var(median) ≈ π/2 · σ² ÷ n for normal values */
    double tau_w = 0;
    if (df_within > 0 && used) {
        double s2 = ss_within / (double)df_within;
        double n_h = (double)used / inv_n;
        tau_w = sqrt(M_PI / 2 * s2 / n_h);
    }
    /* a cold first shot is the fresh process's own effect: never widened */
    int cold = op.first == CAL_JUDGE_FIRST_COLD || op.first == CAL_JUDGE_ALL_COLD;
    /* the heavy tail is the side where the first shot looks worse: a burst
     * of other work only ever makes a shot worse */
    step(z, n, tau_w, 0, op.prior_sd, op.prior_df, cold ? NAN : op.first_sd,
         cold ? 0 : op.first_df, op.level, op.lower_better ? -1 : 1, o);
    o->k = (int)n - 1;
    o->judged = 1;
    o->first = exp(z[0]);
    o->later = o->first * (1 + o->effect);

    double slope = o->slope;
    int trend = o->trend_sig;
    double span = isfinite(slope) ? fabs(pow(1 + slope, o->k - 1) - 1) : 0;
    /* lower_better flips what "worse" means; the effect stays later ÷ first − 1 */
    int sig = o->lo > 0 || o->hi < 0;
    int big = fabs(o->effect) >= op.floor;
    int worse = op.lower_better ? o->effect > 0 : o->effect < 0;
    int halves_agree = (o->half1 < 0) == (o->effect < 0) && (o->half2 < 0) == (o->effect < 0) &&
                       fabs(o->half1) >= op.floor / 2 && fabs(o->half2) >= op.floor / 2;
    char range[48], ci[48], sci[48];
    range_words(o, range, sizeof range, op.first == CAL_JUDGE_ALL_COLD ? "cold " : "");
    ci_words(o->lo, o->hi, sig, ci, sizeof ci);
    const char *verb = o->later_first == o->later_last ? "runs" : "run";
    /* a bound under the floor would ask to rule out what is never called */
    double eq = fmax(op.equivalence > 0 ? op.equivalence : CAL_JUDGE_EQUIV, op.floor);
    o->equiv = eq;
    /* when the series' history widened the band, the verdict says so */
    char hist[160] = "";
    if (o->first_sd > 0 && o->widen > 1.005) {
        char left[48] = "";
        if (op.first_left_out > 0)
            cal_snprintf(left, sizeof left, ", %d wall%s left out", op.first_left_out,
                         op.first_left_out == 1 ? "" : "s");
        cal_snprintf(hist, sizeof hist, "; history widened the band ×%.2f (first shots' sd %.1f %% "
                     "over %.0f earlier runs%s)", o->widen, 100 * o->first_sd, op.first_df + 1, left);
    }
    const char *up = "above", *dn = "below";
    int pct = (int)lround(op.level * 100);

    if (trend && span >= op.floor) {
        o->kind = CAL_JUDGE_TREND;
        ci_words(o->slope_lo, o->slope_hi, 1, sci, sizeof sci);
        cal_snprintf(o->text, sizeof o->text,
                 "%s %s %.1f %% per shot, %d %% CI %s (%s; %.0f %% from shot %d to %d): a trend, "
                 "not a step: the engine is not in a steady state; quote no single shot",
                 range, slope < 0 ? "fall" : "rise", 100 * fabs(slope), pct, sci, what,
                 100 * span, o->later_first, o->later_last);
    } else if ((sig && big && !halves_agree) ||
               ((o->half1 < 0) != (o->half2 < 0) && fabs(o->half1) >= op.floor &&
                fabs(o->half2) >= op.floor)) {
        o->kind = CAL_JUDGE_CANNOT;
        o->judged = 0;
        cal_snprintf(o->why, sizeof o->why,
                 "cannot judge: the warm shots disagree (first half %+.1f %%, second half %+.1f %% "
                 "against shot %d); measure %d shots", 100 * o->half1, 100 * o->half2,
                 o->first_shot, 2 * o->k + 1 > 9 ? 2 * o->k + 1 : 9);
        cal_snprintf(o->text, sizeof o->text, "%s", o->why);
    } else if (sig && big) {
        o->kind = worse ? CAL_JUDGE_SLOWER : CAL_JUDGE_FASTER;
        const char *dir = o->effect < 0 ? dn : up;
        const char *tail;
        if (op.first == CAL_JUDGE_ALL_COLD)
            tail = "fresh processes disagree — the machine's state changed between them";
        else if (worse)
            tail = "quote warm figures, not shot";
        else if (op.first == CAL_JUDGE_FIRST_COLD)
            tail = "shot 1 was cold (warm-up): quote warm figures";
        else if (op.first == CAL_JUDGE_FIRST_WARM)
            tail = "the first measured shot was slow although a warm-up preceded it: quote warm figures";
        else
            tail = "the first shot was slower; caliper did not start this engine, so it cannot "
                   "say shot 1 was cold: quote warm figures";
        if (worse && op.first != CAL_JUDGE_ALL_COLD)
            cal_snprintf(o->text, sizeof o->text, "%s %s %.1f %% %s %sshot %d, %d %% CI %s (%s): %s %d",
                     range, verb, 100 * fabs(o->effect), dir, "", o->first_shot, pct, ci, what,
                     tail, o->first_shot);
        else
            cal_snprintf(o->text, sizeof o->text, "%s %s %.1f %% %s %sshot %d, %d %% CI %s (%s): %s",
                     range, verb, 100 * fabs(o->effect), dir,
                     op.first == CAL_JUDGE_ALL_COLD ? "cold " : "", o->first_shot, pct, ci, what,
                     tail);
    } else if (o->eq_lo > -eq && o->eq_hi < eq) {
        /* no wall larger than the bound: the equivalence CI inside ±eq */
        char eci[48];
        ci_words(o->eq_lo, o->eq_hi, 0, eci, sizeof eci);
        int epct = (int)lround((2 * op.level - 1) * 100);
        if (sig) {
            o->kind = CAL_JUDGE_SMALL;
            cal_snprintf(o->text, sizeof o->text,
                     "%s %s %.1f %% %s %sshot %d, %d %% CI %s (%s): under the %.0f %% floor, and "
                     "no %s larger than %.0f %% (%d %% CI %s)%s", range, verb, 100 * fabs(o->effect),
                     o->effect < 0 ? dn : up, op.first == CAL_JUDGE_ALL_COLD ? "cold " : "",
                     o->first_shot, pct, ci, what, 100 * op.floor,
                     op.first == CAL_JUDGE_ALL_COLD ? "change" : "wall", 100 * eq, epct, eci, hist);
        } else {
            o->kind = CAL_JUDGE_STEADY;
            cal_snprintf(o->text, sizeof o->text,
                     "%s within %.0f %% of %sshot %d: %s larger than %.0f %% (%+.1f %%, %d %% CI %s, "
                     "%s)%s", range, 100 * eq, op.first == CAL_JUDGE_ALL_COLD ? "cold " : "",
                     o->first_shot,
                     op.first == CAL_JUDGE_ALL_COLD ? "fresh processes agree, no change"
                                                    : "no wall",
                     100 * eq, 100 * o->effect, epct, eci, what, hist);
        }
    } else {
        /* neither a wall nor evidence of none: say how wide, and what
         * would narrow it */
        o->kind = CAL_JUDGE_CANNOT;
        o->judged = 0;
        char ci2[48], more[200];
        ci_words(o->lo, o->hi, 0, ci2, sizeof ci2);
        judgeable_hint(o, eq, more, sizeof more);
        cal_snprintf(o->why, sizeof o->why, "cannot judge: %s %+.1f %% from %sshot %d, %d %% CI %s "
                     "(%s): too wide to rule out a %s larger than %.0f %%; %s%s", range,
                     100 * o->effect, op.first == CAL_JUDGE_ALL_COLD ? "cold " : "", o->first_shot,
                     pct, ci2, what, op.first == CAL_JUDGE_ALL_COLD ? "change" : "wall", 100 * eq,
                     more, hist);
        cal_snprintf(o->text, sizeof o->text, "%s", o->why);
    }
    o->directional = o->kind == CAL_JUDGE_SLOWER || o->kind == CAL_JUDGE_FASTER ||
                     o->kind == CAL_JUDGE_TREND;
    return o->judged;
}

int cal_judge_ratio_ci(const double *a, size_t na, const double *b, size_t nb,
                       double extra_sd, double level, double *ratio, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (ratio) *ratio = NAN;
    if (!(level > 0 && level < 1)) level = 0.95;
    double la[CAL_JUDGE_MAX_SHOTS], lb[CAL_JUDGE_MAX_SHOTS];
    size_t ma = 0, mb = 0;
    for (size_t i = 0; i < na && ma < CAL_JUDGE_MAX_SHOTS; i++)
        if (isfinite(a[i]) && a[i] > 0) la[ma++] = log(a[i]);
    for (size_t i = 0; i < nb && mb < CAL_JUDGE_MAX_SHOTS; i++)
        if (isfinite(b[i]) && b[i] > 0) lb[mb++] = log(b[i]);
    if (ma < 2 || mb < 2) return 0;
    double d = mean_of(lb, mb) - mean_of(la, ma);
    double ex = extra_sd > 0 ? sq(extra_sd) : 0;
    double va = (var_of(la, ma) + ex) / (double)ma, vb = (var_of(lb, mb) + ex) / (double)mb;
    double se = sqrt(va + vb);
    double den = (va > 0 ? va * va / (double)(ma - 1) : 0) + (vb > 0 ? vb * vb / (double)(mb - 1) : 0);
    double df = den > 0 ? sq(va + vb) / den : (double)(ma + mb - 2);
    double tc = cal_stats_t_quantile(0.5 + level / 2, df);
    if (ratio) *ratio = exp(d);
    *lo = exp(d - tc * se);
    *hi = exp(d + tc * se);
    return 1;
}
