/* caliper telemetry — the verdicts of SPEC 1.4 as pure functions: does the
 * clock explain the cold→warm slowdown (warm ≈ cold × f_warm/f_cold), is
 * there a power wall, where did the watts go, does the OS throttle state
 * agree with the measured clock, and joules per token. No verdict is given
 * without its inputs: a missing clock says "cannot judge". */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/stats.h"
#include "caliper/telemetry.h"
#include "lib/util/c_locale.h"

static int pos(double x) { return isfinite(x) && x > 0; }

cal_freq_kind cal_tel_freq_verdict(double cold, double warm, double f_cold, double f_warm,
                                   double tol, cal_freq_verdict *o)
{
    memset(o, 0, sizeof *o);
    o->cold = cold; o->warm = warm; o->f_cold = f_cold; o->f_warm = f_warm;
    o->tolerance = tol > 0 ? tol : 0.03;
    o->predicted = o->error = o->explained = NAN;
    if (!pos(cold) || !pos(warm) || !pos(f_cold) || !pos(f_warm))
        return o->kind = CAL_FREQ_CANNOT_JUDGE;
    /* SPEC 1.4: warm ≈ cold × (f_warm ÷ f_cold) */
    o->predicted = cold * (f_warm / f_cold);
    o->error = (warm - o->predicted) / o->predicted;
    double drop = cold - warm;
    /* Anything under half a percent is noise, not a slowdown or a clock change. */
    int slowed = drop > 0.005 * cold, clock_fell = f_warm < f_cold * 0.995;
    if (drop > 0) o->explained = (cold - o->predicted) / drop;
    if (fabs(o->error) <= o->tolerance)
        return o->kind = slowed || clock_fell ? CAL_FREQ_EXPLAINED : CAL_FREQ_NO_DROP;
    return o->kind = CAL_FREQ_NOT_EXPLAINED;
}

char *cal_tel_freq_verdict_text(const cal_freq_verdict *v, char *buf, size_t n)
{
    if (!n) return buf;
    switch (v->kind) {
    case CAL_FREQ_CANNOT_JUDGE:
        if (!pos(v->f_cold) || !pos(v->f_warm))
            snprintf(buf, n, "cannot judge: no clock source measured the cold and warm shots");
        else
            snprintf(buf, n, "cannot judge: no cold and warm throughput to compare");
        break;
    case CAL_FREQ_NO_DROP:
        snprintf(buf, n, "no slowdown to explain (cold %.0f, warm %.0f; the clock predicts %.0f)",
                 v->cold, v->warm, v->predicted);
        break;
    case CAL_FREQ_EXPLAINED:
        snprintf(buf, n, "frequency explains the slowdown (predicted %.0f, measured %.0f)",
                 v->predicted, v->warm);
        break;
    case CAL_FREQ_NOT_EXPLAINED:
        if (isfinite(v->explained) && v->explained >= 0 && v->explained < 1)
            snprintf(buf, n, "frequency explains only %.0f %% of the drop: the cycle count changed "
                     "(predicted %.0f, measured %.0f)", v->explained * 100, v->predicted, v->warm);
        else if (isfinite(v->explained) && v->explained >= 1)
            snprintf(buf, n, "the clock fell more than throughput (predicted %.0f, measured %.0f): "
                     "fewer cycles per token, frequency over-explains the drop",
                     v->predicted, v->warm);
        else
            snprintf(buf, n, "frequency does not explain the result: the cycle count changed "
                     "(predicted %.0f, measured %.0f)", v->predicted, v->warm);
        break;
    }
    return buf;
}

cal_wall_kind cal_tel_power_wall(const double *p, const double *f, size_t n,
                                 double spread_tol, double drop_min, cal_power_wall *o)
{
    memset(o, 0, sizeof *o);
    o->power_mean_w = o->power_spread = o->clock_first = o->clock_last = o->clock_drop = NAN;
    if (spread_tol <= 0) spread_tol = 0.05;
    if (drop_min <= 0) drop_min = 0.03;
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!pos(p[i]) || !pos(f[i])) continue;
        if (o->n == 0) o->clock_first = f[i];
        o->clock_last = f[i];
        sum += p[i];
        if (p[i] < mn) mn = p[i];
        if (p[i] > mx) mx = p[i];
        o->n++;
    }
    if (o->n < 2) return o->kind = CAL_WALL_CANNOT_JUDGE;
    o->power_mean_w = sum / (double)o->n;
    o->power_spread = (mx - mn) / o->power_mean_w;
    o->clock_drop = (o->clock_first - o->clock_last) / o->clock_first;
    if (o->power_spread <= spread_tol && o->clock_drop >= drop_min)
        return o->kind = CAL_WALL_CEILING;
    return o->kind = CAL_WALL_NONE;
}

char *cal_tel_power_wall_text(const cal_power_wall *w, char *buf, size_t n)
{
    if (!n) return buf;
    if (w->kind == CAL_WALL_CANNOT_JUDGE)
        snprintf(buf, n, "cannot judge a power wall: fewer than 2 shots with both power and clock");
    else if (w->kind == CAL_WALL_CEILING)
        snprintf(buf, n, "power ceiling near %.0f W: power flat (spread %.0f %%) while the clock "
                 "fell %.0f %% (%.0f -> %.0f)", w->power_mean_w, w->power_spread * 100,
                 w->clock_drop * 100, w->clock_first, w->clock_last);
    else if (w->clock_drop < 0.03)
        snprintf(buf, n, "no power wall: the clock held (%.0f -> %.0f) at %.0f W",
                 w->clock_first, w->clock_last, w->power_mean_w);
    else
        cal_snprintf(buf, n, "no power wall: power moved %.0f %% around %.0f W while the clock fell "
                 "%.0f %%", w->power_spread * 100, w->power_mean_w, w->clock_drop * 100);
    return buf;
}

int cal_tel_watt_for_watt(const cal_rail *r, size_t n, double wall_w, cal_watt_table *o)
{
    memset(o, 0, sizeof *o);
    o->wall_w = isfinite(wall_w) && wall_w > 0 ? wall_w : NAN;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(r[i].before_w) || !isfinite(r[i].after_w)) continue;
        o->n++;
        o->sum_before_w += r[i].before_w;
        o->sum_after_w += r[i].after_w;
        double d = r[i].after_w - r[i].before_w;
        if (d < 0) o->moved_w -= d; else o->gained_w += d;
    }
    o->residual_before_w = o->wall_w - o->sum_before_w;
    o->residual_after_w = o->wall_w - o->sum_after_w;
    return o->n >= 2 ? CAL_OK : CAL_EINVAL;
}

char *cal_tel_watt_for_watt_text(const cal_rail *r, size_t n, const cal_watt_table *t,
                                 char *buf, size_t bn)
{
    if (!bn) return buf;
    size_t w = 0;
#define PUT(...) do { if (w < bn) { int _r = cal_snprintf(buf + w, bn - w, __VA_ARGS__); \
                      if (_r > 0) w += (size_t)_r; } } while (0)
    buf[0] = 0;
    PUT("%-16s %9s %9s %9s\n", "rail", "before W", "after W", "delta W");
    const cal_rail *up = NULL, *down = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(r[i].before_w) || !isfinite(r[i].after_w)) {
            PUT("%-16s %9s %9s %9s\n", r[i].name, "-", "-", "-");
            continue;
        }
        double d = r[i].after_w - r[i].before_w;
        PUT("%-16s %9.1f %9.1f %+9.1f\n", r[i].name, r[i].before_w, r[i].after_w, d);
        if (!up || d > up->after_w - up->before_w) up = &r[i];
        if (!down || d < down->after_w - down->before_w) down = &r[i];
    }
    PUT("%-16s %9.1f %9.1f %+9.1f\n", "sum", t->sum_before_w, t->sum_after_w,
        t->sum_after_w - t->sum_before_w);
    if (isfinite(t->wall_w))
        PUT("%-16s %9.1f %9.1f   (wall %.1f W)\n", "residual", t->residual_before_w,
            t->residual_after_w, t->wall_w);
    if (up && down && up != down && up->after_w > up->before_w && down->after_w < down->before_w)
        PUT("%+.1f W on %s <-> %+.1f W on %s\n", up->after_w - up->before_w, up->name,
            down->after_w - down->before_w, down->name);
#undef PUT
    return buf;
}

cal_throttle_kind cal_tel_throttle_note(int os, double f_ref, double f_now, double drop_min,
                                        cal_throttle_note *o)
{
    memset(o, 0, sizeof *o);
    o->clock_drop = NAN;
    if (drop_min <= 0) drop_min = 0.03;
    if (os < 0 || !pos(f_ref) || !pos(f_now)) return o->kind = CAL_THR_CANNOT_JUDGE;
    o->clock_drop = (f_ref - f_now) / f_ref;
    int fell = o->clock_drop >= drop_min;
    if (os == 0) return o->kind = fell ? CAL_THR_OS_NOMINAL_CLOCK_FELL : CAL_THR_AGREE_NOMINAL;
    return o->kind = fell ? CAL_THR_AGREE_THROTTLED : CAL_THR_OS_THROTTLED_CLOCK_HELD;
}

char *cal_tel_throttle_note_text(const cal_throttle_note *t, const char *words, char *buf, size_t n)
{
    if (!n) return buf;
    const char *w = words && *words ? words : NULL;
    switch (t->kind) {
    case CAL_THR_CANNOT_JUDGE:
        snprintf(buf, n, "throttle state: no OS report or no measured clock to compare");
        break;
    case CAL_THR_AGREE_NOMINAL:
        snprintf(buf, n, "OS reports nominal and the clock held (%+.0f %%)", -t->clock_drop * 100);
        break;
    case CAL_THR_AGREE_THROTTLED:
        snprintf(buf, n, "OS reports throttling%s%s%s and the clock fell %.0f %%",
                 w ? " (" : "", w ? w : "", w ? ")" : "", t->clock_drop * 100);
        break;
    case CAL_THR_OS_NOMINAL_CLOCK_FELL:
        snprintf(buf, n, "OS reports nominal but the clock fell %.0f %%: trust the clock",
                 t->clock_drop * 100);
        break;
    case CAL_THR_OS_THROTTLED_CLOCK_HELD:
        snprintf(buf, n, "OS reports throttling%s%s%s but the measured clock held (%+.0f %%)",
                 w ? " (" : "", w ? w : "", w ? ")" : "", -t->clock_drop * 100);
        break;
    }
    return buf;
}

void cal_tel_energy_per_token(double j, long prompt, long output, cal_energy_per_token *o)
{
    o->joules = isfinite(j) && j >= 0 ? j : NAN;
    o->j_per_output_token = isfinite(o->joules) && output > 0 ? o->joules / (double)output : NAN;
    o->j_per_prompt_token = isfinite(o->joules) && prompt > 0 ? o->joules / (double)prompt : NAN;
}

int cal_tel_energy_per_token_window(cal_tel *t, int64_t t0, int64_t t1, long prompt,
                                    long output, cal_energy_per_token *o)
{
    double j = NAN;
    int rc = cal_tel_window_energy(t, t0, t1, &j, NULL, 0);
    cal_tel_energy_per_token(rc == CAL_OK ? j : NAN, prompt, output, o);
    return rc == CAL_OK ? CAL_OK : CAL_ENOTFOUND;
}

/* ---- the clock's share of a shot-series drop, with its uncertainty -------
 * Shot 1 against the warm shots on a log scale, as the shot verdict judges
 * throughput (caliper/judge.h): the clock's own change must clear its noise
 * (warm shots' spread, t with k − 1 df) and the floor before anything is
 * said. The share explained is θ = Δlog f ÷ Δlog throughput (SPEC 1.4:
 * warm ≈ cold × f_warm/f_cold means θ = 1), its CI by Fieller's theorem
 * with the warm shots' covariance of (throughput, clock). */
static double sqd(double x) { return x * x; }

int cal_tel_clock_share(const double *tput, const double *clock, size_t n,
                        double tput_tau_within, double clock_floor, double level,
                        cal_clock_share *o)
{
    memset(o, 0, sizeof *o);
    o->clock_change = o->clock_lo = o->clock_hi = o->tput_change = NAN;
    o->share = o->share_lo = o->share_hi = NAN;
    o->level = level > 0 && level < 1 ? level : 0.95;
    o->floor = clock_floor > 0 ? clock_floor : 0.01;
    double z[CAL_JUDGE_MAX_SHOTS], f[CAL_JUDGE_MAX_SHOTS];
    size_t m = 0;
    for (size_t i = 0; i < n && m < CAL_JUDGE_MAX_SHOTS; i++) {
        if (!pos(tput[i]) || !pos(clock[i])) {
            if (i == 0) break;   /* no shot 1: nothing to compare against */
            continue;
        }
        z[m] = log(tput[i]);
        f[m++] = log(clock[i]);
    }
    if (m < 3 || !pos(tput[0]) || !pos(clock[0])) {
        cal_snprintf(o->why, sizeof o->why, "no clock on shot 1 and at least 2 warm shots");
        return 0;
    }
    o->k = (int)m - 1;
    cal_judge_verdict cv, tv;
    cal_judge_step(f, m, 0, o->level, &cv);
    cal_judge_step(z, m, tput_tau_within, o->level, &tv);
    o->clock_change = cv.effect;
    o->clock_lo = cv.lo;
    o->clock_hi = cv.hi;
    o->tput_change = tv.effect;
    if (!(cv.lo > 0 || cv.hi < 0) || fabs(cv.effect) < o->floor) {
        /* no change called; "no change" itself only where the CI rules out
         * one larger than the equivalence bound */
        if (cv.eq_lo > -CAL_JUDGE_EQUIV && cv.eq_hi < CAL_JUDGE_EQUIV)
            cal_snprintf(o->why, sizeof o->why, "the clock moved %+.1f %% (CI %+.1f to %+.1f %%): no "
                         "clock change larger than %.0f %%", 100 * cv.effect, 100 * cv.lo,
                         100 * cv.hi, 100 * CAL_JUDGE_EQUIV);
        else
            cal_snprintf(o->why, sizeof o->why, "the clock moved %+.1f %% (CI %+.1f to %+.1f %%): too "
                         "wide to rule out a change larger than %.0f %%", 100 * cv.effect,
                         100 * cv.lo, 100 * cv.hi, 100 * CAL_JUDGE_EQUIV);
        return 0;
    }
    o->judged = 1;
    size_t k = m - 1;
    double dy = log1p(tv.effect), df = log1p(cv.effect);
    double my = 0, mf = 0, c = 0;
    for (size_t i = 1; i < m; i++) { my += z[i]; mf += f[i]; }
    my /= (double)k; mf /= (double)k;
    for (size_t i = 1; i < m; i++) c += (z[i] - my) * (f[i] - mf);
    c /= (double)(k - 1);
    double vyy = sqd(tv.tau), vff = sqd(cv.tau);
    if (c > sqrt(vyy * vff)) c = sqrt(vyy * vff);
    if (c < -sqrt(vyy * vff)) c = -sqrt(vyy * vff);
    double g = 1 + 1 / (double)k;
    vyy *= g; vff *= g; c *= g;
    double t = cal_stats_t_quantile(0.5 + o->level / 2, (double)(k - 1));
    o->share = dy != 0 ? df / dy : NAN;
    double a = dy * dy - t * t * vyy, b = df * dy - t * t * c, cc = df * df - t * t * vff;
    double disc = b * b - a * cc;
    if (a > 0 && disc >= 0) {
        o->share_lo = (b - sqrt(disc)) / a;
        o->share_hi = (b + sqrt(disc)) / a;
    } else {
        o->share_lo = -INFINITY;   /* the throughput change's own CI holds 0 */
        o->share_hi = INFINITY;
    }
    return 1;
}

char *cal_tel_clock_share_text(const cal_clock_share *s, char *buf, size_t n)
{
    if (!n) return buf;
    if (!s->judged) { cal_snprintf(buf, n, "cannot judge: %s", s->why); return buf; }
    int pct = (int)lround(s->level * 100);
    char clk[96];
    if (s->clock_change < 0)
        cal_snprintf(clk, sizeof clk, "the clock fell %.1f %% (%d %% CI %.1f–%.1f %%)",
                 -100 * s->clock_change, pct, -100 * s->clock_hi, -100 * s->clock_lo);
    else
        cal_snprintf(clk, sizeof clk, "the clock rose %.1f %% (%d %% CI %.1f–%.1f %%)",
                 100 * s->clock_change, pct, 100 * s->clock_lo, 100 * s->clock_hi);
    if (!isfinite(s->share_lo) || !isfinite(s->share_hi)) {
        cal_snprintf(buf, n, "%s, but the throughput change's own CI holds 0: no share to give", clk);
    } else if (s->share_lo <= 1 && s->share_hi >= 1) {
        cal_snprintf(buf, n, "%s and explains %.0f %% of the throughput change (%d %% CI %.0f–%.0f %%): "
                 "the change is the clock (warm ≈ cold × f_warm/f_cold)", clk, 100 * s->share, pct,
                 100 * s->share_lo, 100 * s->share_hi);
    } else if (s->share_hi < 1) {
        cal_snprintf(buf, n, "%s and explains only %.0f %% of the throughput change (%d %% CI %.0f–%.0f %%): "
                 "the cycles per token changed too", clk, 100 * s->share, pct,
                 100 * s->share_lo, 100 * s->share_hi);
    } else {
        cal_snprintf(buf, n, "%s, more than throughput (%.0f %% of its change, %d %% CI %.0f–%.0f %%): "
                 "fewer cycles per token", clk, 100 * s->share, pct, 100 * s->share_lo,
                 100 * s->share_hi);
    }
    return buf;
}
