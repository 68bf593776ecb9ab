/* caliper gate statistics (include/caliper/gate_stats.h): Wilcoxon's
 * signed-rank test on paired log ratios with the Hodges–Lehmann estimate and
 * its exact CI, the separate-runs t test, Holm's step-down adjustment, and
 * the four-answer decision of one metric. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "caliper/gate_stats.h"
#include "caliper/stats.h"

const char *cal_gate_method_name(cal_gate_method m)
{
    return m == CAL_GATE_T ? "t" : "signed-rank";
}

const char *cal_gate_kind_name(cal_gate_kind k)
{
    switch (k) {
    case CAL_GATE_NO_CHANGE:   return "no_change";
    case CAL_GATE_REGRESSION:  return "regression";
    case CAL_GATE_IMPROVEMENT: return "improvement";
    default:                   return "cannot_judge";
    }
}

/* ---- the normal distribution ------------------------------------------- */

static double pnorm(double z) { return 0.5 * erfc(-z / M_SQRT2); }

/* The z with pnorm(z) = p, p in (0, 1), by bisection: a few microseconds,
 * called a handful of times per gate. */
static double qnorm(double p)
{
    double lo = -40, hi = 40;
    for (int i = 0; i < 200 && hi - lo > 1e-13; i++) {
        double mid = 0.5 * (lo + hi);
        if (pnorm(mid) < p) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* ---- the signed-rank test ----------------------------------------------- */

size_t cal_gate_scratch_len(size_t n)
{
    if (n > CAL_GATE_MAX_PAIRS) n = CAL_GATE_MAX_PAIRS;
    size_t m = n * (n + 1) / 2;
    return 2 * m + 2 * n + 4;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* index of the first element of sorted[0..n) >= v (or > v with strict) */
static size_t bound_of(const double *sorted, size_t n, double v, int strict)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strict ? sorted[mid] <= v : sorted[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The null distribution of W+ for m untied ranks, as cumulative
 * probabilities cdf[t] = P(W+ <= t), t = 0..m(m+1)/2: each rank k is in the
 * positive sum with probability 1/2, independently. */
static void null_cdf(size_t m, double *f)
{
    size_t top = m * (m + 1) / 2;
    for (size_t s = 0; s <= top; s++) f[s] = 0;
    f[0] = 1;
    size_t reach = 0;
    for (size_t k = 1; k <= m; k++) {
        reach += k;
        for (size_t s = reach; s >= k; s--) f[s] = 0.5 * (f[s] + f[s - k]);
        for (size_t s = 0; s < k; s++) f[s] *= 0.5;
    }
    for (size_t s = 1; s <= top; s++) f[s] += f[s - 1];
}

int cal_gate_signed_rank(const double *d, size_t n, double alpha, double *scratch,
                         size_t scratch_len, cal_gate_stat *o)
{
    if (!o || (!d && n) || !(alpha > 0 && alpha < 0.5)) return CAL_EINVAL;
    memset(o, 0, sizeof *o);
    o->method = CAL_GATE_SIGNED_RANK;
    o->alpha = alpha;
    o->est = o->se = o->df = o->spread = NAN;
    o->lo = -INFINITY;
    o->hi = INFINITY;
    o->p_up = o->p_down = 1;
    o->min_n = (size_t)ceil(log2(1 / alpha));
    if (n > CAL_GATE_MAX_PAIRS) n = CAL_GATE_MAX_PAIRS;
    if (n && (!scratch || scratch_len < cal_gate_scratch_len(n))) return CAL_ETOOBIG;
    /* scratch: x[n] | ab[n] | walsh[M] | cdf[M + 1] */
    double *x = scratch, *ab = scratch + n;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(d[i]) && d[i] != 0) x[m++] = d[i];
    o->n = m;
    if (!m) return CAL_OK;
    size_t M = m * (m + 1) / 2;
    double *walsh = ab + m, *cdf = walsh + M;

    /* ranks of |x|, ties averaged; W+ the sum over the positive ones */
    for (size_t i = 0; i < m; i++) ab[i] = fabs(x[i]);
    qsort(ab, m, sizeof *ab, cmp_double);
    double wplus = 0, ties = 0;
    for (size_t i = 0; i < m; i++) {
        if (x[i] <= 0) continue;
        size_t lo = bound_of(ab, m, x[i], 0), hi = bound_of(ab, m, x[i], 1);
        wplus += 0.5 * (double)(lo + 1 + hi);
    }
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j < m && ab[j] == ab[i]) j++;
        double t = (double)(j - i);
        ties += t * t * t - t;
        i = j;
    }
    /* the spread a reader compares with the bound: 1.4826 × MAD */
    for (size_t i = 0; i < m; i++) walsh[i] = x[i];
    double med = cal_stats_median(walsh, m);
    for (size_t i = 0; i < m; i++) walsh[i] = fabs(x[i] - med);
    o->spread = 1.4826 * cal_stats_median(walsh, m);

    /* the Walsh averages: their median is the Hodges–Lehmann estimate, and
     * W+ counts those above the tested shift, so the CI is two of them */
    size_t w = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = i; j < m; j++) walsh[w++] = 0.5 * x[i] + 0.5 * x[j];   /* no overflow */
    qsort(walsh, M, sizeof *walsh, cmp_double);
    o->est = M % 2 ? walsh[M / 2] : 0.5 * (walsh[M / 2 - 1] + walsh[M / 2]);

    size_t k = 0;   /* CI = [walsh_(k), walsh_(M−k+1)], 1-based; 0: unbounded */
    o->exact = ties == 0 && m <= CAL_GATE_EXACT_MAX;
    if (o->exact) {
        null_cdf(m, cdf);
        size_t wi = (size_t)llround(wplus);
        o->p_down = cdf[wi];
        o->p_up = wi ? 1 - cdf[wi - 1] : 1;
        /* the largest k with P(W+ <= k − 1) <= alpha */
        while (k < M && cdf[k] <= alpha * (1 + 1e-12)) k++;
    } else {
        double mu = (double)M / 2;
        double var = (double)m * (double)(m + 1) * (double)(2 * m + 1) / 24 - ties / 48;
        double sd = var > 0 ? sqrt(var) : 0;
        if (sd > 0) {
            o->p_up = 1 - pnorm((wplus - 0.5 - mu) / sd);
            o->p_down = pnorm((wplus + 0.5 - mu) / sd);
            double kk = floor(mu - qnorm(1 - alpha) * sd + 0.5);
            k = kk >= 1 ? (size_t)kk : 0;
        }
    }
    if (o->p_up > 1) o->p_up = 1;
    if (o->p_down > 1) o->p_down = 1;
    if (k >= 1 && k <= (M + 1) / 2) {
        o->lo = walsh[k - 1];
        o->hi = walsh[M - k];
    }
    return CAL_OK;
}

/* ---- separate runs: t on the levels' difference ------------------------- */

int cal_gate_t(double est, double se, double df, double alpha, cal_gate_stat *o)
{
    if (!o || !isfinite(est) || !(se > 0) || !isfinite(se) || !(df > 0) ||
        !(alpha > 0 && alpha < 0.5))
        return CAL_EINVAL;
    memset(o, 0, sizeof *o);
    o->method = CAL_GATE_T;
    o->alpha = alpha;
    o->est = est;
    o->se = o->spread = se;
    o->df = df;
    o->exact = 1;
    double tc = cal_stats_t_quantile(1 - alpha, df);
    o->lo = est - tc * se;
    o->hi = est + tc * se;
    double c = cal_stats_t_cdf(est / se, df);
    o->p_down = c;
    o->p_up = 1 - c;
    return CAL_OK;
}

/* ---- Holm ---------------------------------------------------------------- */

static const double *g_p;   /* qsort has no context argument in C11 */
static double pval(const double *p, size_t i) { return isnan(p[i]) ? 1 : p[i]; }
static int cmp_idx(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    double x = pval(g_p, i), y = pval(g_p, j);
    if (x != y) return x < y ? -1 : 1;
    return i < j ? -1 : i > j;
}

void cal_gate_holm(const double *p, size_t n, double *adj, size_t *idx)
{
    if (!n) return;
    for (size_t i = 0; i < n; i++) idx[i] = i;
    g_p = p;
    qsort(idx, n, sizeof *idx, cmp_idx);
    g_p = NULL;
    double run = 0;
    /* p and adj may alias: read each p before its adj is written, in order */
    for (size_t r = 0; r < n; r++) {
        double v = (double)(n - r) * pval(p, idx[r]);
        if (v > 1) v = 1;
        if (v > run) run = v;
        adj[idx[r]] = run;
    }
}

/* ---- one metric's answer ------------------------------------------------- */

cal_gate_kind cal_gate_decide(const cal_gate_stat *s, int lower_better, double bound,
                              double p_worse_adj, double p_better_adj, double alpha)
{
    if (!s || !isfinite(s->est) || !(bound > 0 && bound < 1)) return CAL_GATE_CANNOT;
    double lo_edge = log1p(-bound), hi_edge = log1p(bound);
    int worse_beyond = lower_better ? s->est > hi_edge : s->est < lo_edge;
    int better_beyond = lower_better ? s->est < lo_edge : s->est > hi_edge;
    if (p_worse_adj <= alpha && worse_beyond) return CAL_GATE_REGRESSION;
    if (p_better_adj <= alpha && better_beyond) return CAL_GATE_IMPROVEMENT;
    if (s->lo > lo_edge && s->hi < hi_edge) return CAL_GATE_NO_CHANGE;
    return CAL_GATE_CANNOT;
}

size_t cal_gate_pairs_needed(const cal_gate_stat *s, double bound)
{
    if (!s || !(bound > 0 && bound < 1)) return 0;
    if (!isfinite(s->lo) || !isfinite(s->hi) || !isfinite(s->est) || s->n < 2)
        return s ? s->min_n : 0;
    double lo_edge = log1p(-bound), hi_edge = log1p(bound);
    double half = fmax(s->est - s->lo, s->hi - s->est);
    /* inside the bound: room to either edge; beyond it: room to no change */
    double room = s->est > lo_edge && s->est < hi_edge ? fmin(hi_edge - s->est, s->est - lo_edge)
                                                      : fabs(s->est);
    if (!(room > 1e-9) || !(half > 0)) return 0;
    double need = ceil((double)s->n * (half / room) * (half / room));
    if (need < (double)s->n + 1) need = (double)s->n + 1;
    return need > 100000 ? 100000 : (size_t)need;
}
