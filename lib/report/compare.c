/* caliper — the comparison that refuses false ratios (SPEC 1.1, 1.2): cells of
 * several results are paired per metric, nearest protocol first, and a ratio
 * is given only where the fingerprints are equal; elsewhere the differing
 * fields are named. A CI rides on each ratio with samples behind: the
 * requests' bootstrap, widened to the shots' spread where there are shots,
 * and to the run-to-run noise of stored repeats (the only CI a difference
 * is claimed on). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/report.h"
#include "caliper/stats.h"
#include "lib/util/c_locale.h"

/* ---- bootstrap CI ---------------------------------------------------------- */

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ULL;
}

/* At most this many values of a series enter the bootstrap: an even stride
 * through a large series keeps its shape and the cost bounded. */
#define BOOT_MAX_N 1000

static size_t thin(const double *x, size_t n, double *out)
{
    if (n <= BOOT_MAX_N) { memcpy(out, x, n * sizeof *x); return n; }
    for (size_t i = 0; i < BOOT_MAX_N; i++) out[i] = x[(size_t)((double)i * n / BOOT_MAX_N)];
    return BOOT_MAX_N;
}

int cal_ratio_ci(const double *a, size_t na, const double *b, size_t nb,
                 double pct, int iters, uint64_t seed, double *lo, double *hi)
{
    if (na < 2 || nb < 2 || !a || !b) return CAL_EINVAL;
    if (iters <= 0) iters = 2000;
    if (!seed) seed = 0x9E3779B97F4A7C15ULL;
    double *ta = malloc(BOOT_MAX_N * sizeof *ta), *tb = malloc(BOOT_MAX_N * sizeof *tb);
    double *ra = malloc(BOOT_MAX_N * sizeof *ra), *rb = malloc(BOOT_MAX_N * sizeof *rb);
    double *ratios = malloc((size_t)iters * sizeof *ratios);
    int e = CAL_OK;
    if (!ta || !tb || !ra || !rb || !ratios) { e = CAL_ENOMEM; goto out; }
    size_t ma = thin(a, na, ta), mb = thin(b, nb, tb);
    size_t k = 0;
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < ma; i++) ra[i] = ta[xorshift(&seed) % ma];
        for (size_t i = 0; i < mb; i++) rb[i] = tb[xorshift(&seed) % mb];
        double sa = cal_stats_percentile(ra, ma, pct);
        double sb = cal_stats_percentile(rb, mb, pct);
        if (sa > 0 && isfinite(sb)) ratios[k++] = sb / sa;
    }
    if (k < 2) { e = CAL_EINVAL; goto out; }
    cal_stats_sort(ratios, k);
    *lo = cal_stats_percentile_sorted(ratios, k, 2.5);
    *hi = cal_stats_percentile_sorted(ratios, k, 97.5);
out:
    free(ta); free(tb); free(ra); free(rb); free(ratios);
    return e;
}

/* ---- pairing cells ----------------------------------------------------------- */

static cal_fingerprint metric_fp(const cal_rcell *c, cal_metric m)
{
    cal_fingerprint fp = c->fp;
    fp.column = cal_metric_get(m)->column;
    if (m != CAL_M_GOODPUT) fp.slo[0] = '\0';   /* the SLO changes goodput alone */
    return fp;
}

/* How far apart two protocols are: a different sweep point weighs most, so
 * cells pair along the sweep first; then shot kind; every other field 1. */
static int distance(const cal_fingerprint *a, const cal_fingerprint *b)
{
    cal_fp_difference d[CAL_FPF__N];
    size_t n = cal_fp_diff(a, b, d, CAL_FPF__N);
    int s = 0;
    for (size_t i = 0; i < n; i++) {
        switch (d[i].field) {
        case CAL_FPF_CONCURRENCY: case CAL_FPF_RATE: case CAL_FPF_PROMPT: s += 8; break;
        case CAL_FPF_SHOT_KIND: s += 2; break;
        default: s += 1; break;
        }
    }
    return s;
}

typedef struct pair { int i, k, d; } pair;

static int pair_cmp(const void *x, const void *y)
{
    const pair *a = x, *b = y;
    if (a->d != b->d) return a->d < b->d ? -1 : 1;
    if (a->i != b->i) return a->i < b->i ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

static void short_shots(const cal_fingerprint *fp, char *buf, size_t n)
{
    if (fp->shot_kind == CAL_SHOT_CONSECUTIVE) snprintf(buf, n, "consecutive mean");
    else if (fp->shot_first > 0 && fp->shot_last > fp->shot_first)
        snprintf(buf, n, "%s %d–%d", cal_shot_kind_name(fp->shot_kind), fp->shot_first, fp->shot_last);
    else if (fp->shot_first > 0)
        snprintf(buf, n, "%s %d", cal_shot_kind_name(fp->shot_kind), fp->shot_first);
    else snprintf(buf, n, "%s", cal_shot_kind_name(fp->shot_kind));
}

static void row_label(cal_cmp_row *row)
{
    const cal_fingerprint *fp = &row->fp;
    char shots[64], conc[32] = "", prompt[32] = "";
    short_shots(fp, shots, sizeof shots);
    if (fp->concurrency > 0) snprintf(conc, sizeof conc, " · c%d", fp->concurrency);
    else if (isfinite(fp->request_rate) && fp->request_rate > 0)
        cal_snprintf(conc, sizeof conc, " · %g req/s", fp->request_rate);
    else if (isinf(fp->request_rate)) snprintf(conc, sizeof conc, " · all at once");
    if (fp->prompt_tokens > 0) snprintf(prompt, sizeof prompt, " · %ld tok", fp->prompt_tokens);
    const cal_field *mi = cal_metric_get(row->metric);
    snprintf(row->label, sizeof row->label, "%s%s%s%s%s · %s", mi->label,
             strstr(mi->label, mi->unit) ? "" : " ", strstr(mi->label, mi->unit) ? "" : mi->unit,
             conc, prompt, shots);
}

static void entry_absent(cal_cmp_entry *e)
{
    memset(e, 0, sizeof *e);
    e->value = e->ratio = e->ci_lo = e->ci_hi = NAN;
}

typedef struct builder {
    cal_comparison *c;
    size_t cap;
    int *order;            /* sort key per row: baseline cell index */
} builder;

static cal_cmp_row *new_row(builder *b, cal_metric m, int order)
{
    if (b->c->n_rows == b->cap) {
        size_t want = b->cap ? b->cap * 2 : 32;
        if (want > 1u << 20) return NULL;
        cal_cmp_row *r = realloc(b->c->rows, want * sizeof *r);
        int *o = realloc(b->order, want * sizeof *o);
        if (r) b->c->rows = r;
        if (o) b->order = o;
        if (!r || !o) return NULL;
        b->cap = want;
    }
    b->order[b->c->n_rows] = order;
    cal_cmp_row *row = &b->c->rows[b->c->n_rows++];
    memset(row, 0, sizeof *row);
    row->metric = m;
    for (size_t j = 0; j < CAL_CMP_MAX; j++) entry_absent(&row->e[j]);
    return row;
}

/* Why result `other` has no partner for a baseline cell: its matching cell
 * measured no value of this metric (e.g. decode tok/s where every stream
 * arrived in one chunk), or else the first field by which its nearest cell
 * differs. */
static void absent_note(cal_cmp_entry *e, const cal_result *other, const cal_fingerprint *want,
                        cal_metric m)
{
    for (size_t k = 0; k < other->n_cells; k++) {
        cal_fingerprint f = metric_fp(&other->cells[k], m);
        if (!isfinite(other->cells[k].v[m]) && distance(want, &f) == 0) {
            snprintf(e->note, sizeof e->note, "not measured: %.80s's matching cell has no %s",
                     other->label, cal_metric_get(m)->label);
            return;
        }
    }
    int best = -1, bd = 0;
    for (size_t k = 0; k < other->n_cells; k++) {
        if (!isfinite(other->cells[k].v[m])) continue;
        cal_fingerprint f = metric_fp(&other->cells[k], m);
        int d = distance(want, &f);
        if (best < 0 || d < bd) { best = (int)k; bd = d; }
    }
    if (best < 0) {
        snprintf(e->note, sizeof e->note, "not measured: %.80s has no %s",
                 other->label, cal_metric_get(m)->label);
        return;
    }
    cal_fingerprint f = metric_fp(&other->cells[best], m);
    e->n_diff = cal_fp_diff(want, &f, e->diff, CAL_FPF__N);
    if (e->n_diff == 0) {
        snprintf(e->note, sizeof e->note, "not comparable: %.80s's matching cell is paired on another row", other->label);
        return;
    }
    char v[CAL_FP_STR];
    cal_fp_field_value(want, e->diff[0].field, v, sizeof v);
    if (e->diff[0].field == CAL_FPF_SHOT_KIND)
        snprintf(e->note, sizeof e->note, "not comparable: %.80s has no %.60s shots", other->label, v);
    else
        snprintf(e->note, sizeof e->note, "not comparable: %.80s has no cell with %s %.80s",
                 other->label, cal_fp_field_name(e->diff[0].field), v);
}

/* ---- shot-level CI: shots, not requests, are the replicates -------------
 * Requests within one run share its conditions, so a CI from requests alone
 * excludes 1 for two runs of one configuration (an A/A pair gave 0.94×,
 * CI 0.93–0.94). Where each side's shot-to-shot spread is known (>= 2 shots
 * in the cell, else >= 2 warm shots in its run), the ratio's CI is widened to
 * at least a Welch t CI on the log scale in which each run's level carries
 * the variance of one shot: the metric's own per-shot number where one is
 * stored, else the per-request speed, whose relative spread stands for the
 * run's noise. */
static double shot_value(const cal_shot *s, cal_metric m)
{
    double v = s->v[m];
    return isfinite(v) && v > 0 ? v : s->v[CAL_M_REQ_TOKS];
}

/* The per-shot values of the cell's shots into out; the values of the
 * run's other measured shots after the first (its warm shots) into
 * noise[*n_noise], for a cell of one shot whose spread must come from
 * elsewhere. */
static size_t cell_shots(const cal_result *r, const cal_rcell *c, cal_metric m, double *out,
                         double *noise, size_t *n_noise, size_t cap)
{
    *n_noise = 0;
    if (!r || !r->n_shots) return 0;
    const cal_fingerprint *a = &r->shots_fp, *b = &c->fp;
    if (a->concurrency != b->concurrency || a->prompt_tokens != b->prompt_tokens ||
        !(a->request_rate == b->request_rate || (isnan(a->request_rate) && isnan(b->request_rate))))
        return 0;
    size_t n = 0, measured = 0;
    for (size_t i = 0; i < r->n_shots && n < cap; i++) {
        const cal_shot *s = &r->shots[i];
        if (s->kind == CAL_SHOT_WARMUP) continue;
        double v = shot_value(s, m);   /* else the per-request speed: the run's noise */
        if (!(isfinite(v) && v > 0)) continue;
        if (measured++ && *n_noise < cap) noise[(*n_noise)++] = v;
        if (b->shot_first > 0 && (s->index < b->shot_first ||
                                  s->index > (b->shot_last > 0 ? b->shot_last : b->shot_first)))
            continue;
        out[n++] = v;
    }
    return n;
}

/* mean and variance of log x; *df the variance's degrees of freedom */
static void log_stats(const double *x, size_t n, double *mean, double *var)
{
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) s += log(x[i]);
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++) q += (log(x[i]) - *mean) * (log(x[i]) - *mean);
    *var = n > 1 ? q / (double)(n - 1) : NAN;
}

/* widen [ci_lo, ci_hi] around the ratio to at least ± h on the log scale */
static void widen_to(cal_cmp_entry *e, double h)
{
    double lo = isfinite(e->ci_lo) && e->ci_lo > 0 ? log(e->ratio / e->ci_lo) : 0;
    double hi = isfinite(e->ci_hi) && e->ci_hi > 0 ? log(e->ci_hi / e->ratio) : 0;
    e->ci_lo = e->ratio * exp(-fmax(lo, h));
    e->ci_hi = e->ratio * exp(fmax(hi, h));
}

/* ---- run-level CI: the run-to-run noise caliper stored ---------------------
 * Runs of one protocol minutes apart differ by more than the shots of one run
 * show (a shared machine's load moves between runs). Where the store holds
 * repeats of a side's series, the sd of their levels is how well one run
 * knows its level: the log ratio carries both sides' run variance, t with
 * the repeats' df (Welch–Satterthwaite for two separate estimates; one
 * series' estimate used for both sides counts its df once). A side without
 * repeats borrows the other's (the same protocol on the same machine). */
/* The variance of a cell's level from its series' run noise: a level is the
 * mean of k warm shots; a cell of fewer shots (the first measured shot alone)
 * carries more of the shot-to-shot variance. */
static double cell_var(const cal_run_noise *r, const cal_fingerprint *fp)
{
    double v = r->sd * r->sd;
    int n = fp->shot_first > 0 && fp->shot_last >= fp->shot_first
                ? fp->shot_last - fp->shot_first + 1 : 1;
    if (isfinite(r->shot_sd) && r->shots > 0 && n < r->shots)
        v += r->shot_sd * r->shot_sd * (1.0 / n - 1.0 / r->shots);
    return v;
}

static void run_widen(cal_cmp_entry *e, const cal_compare_opts *o, size_t j, cal_metric m,
                      const cal_fingerprint *fa, const cal_fingerprint *fb)
{
    const cal_run_noise *a = &o->run_noise[0], *b = &o->run_noise[j];
    int ka = a->df > 0 && isfinite(a->sd), kb = b->df > 0 && isfinite(b->sd);
    if ((!ka && !kb) || !(isfinite(e->ratio) && e->ratio > 0)) return;
    if (!ka) a = b;   /* a side without repeats borrows the other's */
    if (!kb) b = a;
    double va = cell_var(a, fa), vb = cell_var(b, fb);
    double df;
    if (a == b || b->same) df = a->df;
    else {
        double den = (va > 0 ? va * va / a->df : 0) + (vb > 0 ? vb * vb / b->df : 0);
        df = den > 0 ? (va + vb) * (va + vb) / den : a->df + b->df;
    }
    /* t on the runs' sd, and no narrower than the distance at most 5 % of
     * the stored pairs exceed: run levels on a shared machine are not normal
     * (a busy spell moves one run, or several together), and the rank holds
     * without a model: the compared runs are among the stored ones
     * (noise.h), so if they differ by chance alone their pair is any of the
     * stored pairs alike and lies beyond it with probability ≤ 5 % (exactly
     * so for the per-request speed, the statistic the levels are of); a
     * cell of fewer shots scales it by its larger sd */
    double h = cal_stats_t_quantile(0.975, df) * sqrt(va + vb);
    double qa = a->q95, qb = b->q95;
    /* the metric's own rank where the store gave one (> 0: zero-filled
     * noise knows none); a one-shot cell, the rank of the runs' first
     * measured shots, which needs no scaling by shot sd */
    int one = fa->shot_first > 0 && fa->shot_first == fa->shot_last && fb->shot_first > 0 &&
              fb->shot_first == fb->shot_last;
    if (a->mq95[m] > 0) qa = a->mq95[m];
    if (b->mq95[m] > 0) qb = b->mq95[m];
    int own1 = one && b->same && b->mq95_one[m] > 0;   /* the pair's own, as below */
    if (own1) qb = b->mq95_one[m];
    /* one series: the pair's own rank (its runs, pairs as far apart) */
    double q = b->same && isfinite(qb) ? qb
             : isfinite(qa) && isfinite(qb) ? (qa + qb) / 2 : isfinite(qa) ? qa : qb;
    double v0 = a->sd * a->sd + b->sd * b->sd;
    if (!own1 && isfinite(q) && v0 > 0) q *= sqrt((va + vb) / v0);
    if (isfinite(q) && q > h) h = q;
    widen_to(e, h);
    e->ci_scope = CAL_CI_RUNS;
}

static void shot_widen(cal_cmp_entry *e, const cal_result *ra, const cal_rcell *base,
                       const cal_result *rb, const cal_rcell *oc, cal_metric m, double floor,
                       const cal_compare_opts *o, size_t j)
{
    double a[CAL_JUDGE_MAX_SHOTS], b[CAL_JUDGE_MAX_SHOTS];
    double xa[CAL_JUDGE_MAX_SHOTS], xb[CAL_JUDGE_MAX_SHOTS];
    size_t nxa, nxb;
    size_t na = cell_shots(ra, base, m, a, xa, &nxa, CAL_JUDGE_MAX_SHOTS);
    size_t nb = cell_shots(rb, oc, m, b, xb, &nxb, CAL_JUDGE_MAX_SHOTS);
    if (isfinite(e->ci_lo)) e->ci_scope = CAL_CI_REQUESTS;
    /* each side's shot-to-shot variance: from the cell's own shots, else
     * from the run's warm shots (a one-shot cell, e.g. cold 1) */
    double ma, va, mb, vb, t1, t2;
    size_t dfa = 0, dfb = 0;
    if (na) { log_stats(a, na, &ma, &va); dfa = na - 1; }
    if (na == 1 && nxa >= 2) { log_stats(xa, nxa, &t1, &va); dfa = nxa - 1; }
    if (nb) { log_stats(b, nb, &mb, &vb); dfb = nb - 1; }
    if (nb == 1 && nxb >= 2) { log_stats(xb, nxb, &t2, &vb); dfb = nxb - 1; }
    if (dfa >= 1 && dfb >= 1 && isfinite(e->ratio) && e->ratio > 0) {
        /* a run's level is known no better than one shot's: a shared
         * machine drifts over seconds, so consecutive shots are not
         * independent draws of the run-to-run noise (no ÷ n) */
        double sa = va, sb = vb, se = sqrt(sa + sb);
        double den = (sa > 0 ? sa * sa / (double)dfa : 0) + (sb > 0 ? sb * sb / (double)dfb : 0);
        double df = den > 0 ? (sa + sb) * (sa + sb) / den : (double)(dfa + dfb);
        widen_to(e, cal_stats_t_quantile(0.975, df) * se);
        e->ci_scope = CAL_CI_SHOTS;
    }
    run_widen(e, o, j, m, &base->fp, &oc->fp);
    /* a CI of the requests or of one run's shots says nothing about
     * run-to-run noise: no difference is claimed on it */
    e->differs = e->ci_scope == CAL_CI_RUNS && (e->ci_lo > 1 || e->ci_hi < 1) &&
                 fabs(e->ratio - 1) >= floor;
}

static void fill_pair(cal_comparison *c, cal_cmp_row *row, size_t j,
                      const cal_rcell *base, const cal_rcell *oc, const cal_compare_opts *o,
                      const cal_result *ra, const cal_result *rb)
{
    cal_cmp_entry *e = &row->e[j];
    cal_metric m = row->metric;
    cal_fingerprint fb = metric_fp(base, m), fo = metric_fp(oc, m);
    e->present = 1;
    e->value = oc->v[m];
    e->n_diff = cal_fp_diff(&fb, &fo, e->diff, CAL_FPF__N);
    e->comparable = e->n_diff == 0;
    if (!e->comparable) c->n_refused++;
    if (!e->comparable && !o->force) {
        char t[320];
        cal_fp_diff_text(e->diff, e->n_diff, t, sizeof t);
        snprintf(e->note, sizeof e->note, "not comparable: %.360s", t);
        return;
    }
    double vb = base->v[m];
    if (!(vb > 0) || !isfinite(e->value)) {
        cal_snprintf(e->note, sizeof e->note, "no ratio: baseline is %g", vb);
        return;
    }
    e->ratio = e->value / vb;
    if (e->comparable) c->n_ratios++;
    const cal_field *mi = cal_metric_get(m);
    /* the CI of a percentile over its samples; a rate over the per-shot
     * aggregates' median */
    double pct = mi->stat == CAL_STAT_RATE ? 50 : cal_stat_pct(mi->stat);
    if (mi->series >= 0 && isfinite(pct) && o->boot_iters >= 0) {
        cal_series s = (cal_series)mi->series;
        double lo, hi;
        if (cal_ratio_ci(base->s[s], base->ns[s], oc->s[s], oc->ns[s], pct,
                         o->boot_iters, o->seed, &lo, &hi) == CAL_OK) {
            e->ci_lo = lo;
            e->ci_hi = hi;
        }
    }
    if (o->boot_iters >= 0) shot_widen(e, ra, base, rb, oc, m, o->floor > 0 ? o->floor : 0.03, o, j);
}

static int compare_metric(builder *b, const cal_result *const *res, size_t n,
                          cal_metric m, const cal_compare_opts *o)
{
    const cal_result *r0 = res[0];
    size_t nb = r0->n_cells;
    /* rows for every baseline cell carrying the metric */
    size_t first_row = b->c->n_rows;
    int *row_of = malloc((nb ? nb : 1) * sizeof *row_of);
    if (!row_of) return CAL_ENOMEM;
    for (size_t i = 0; i < nb; i++) {
        row_of[i] = -1;
        if (!isfinite(r0->cells[i].v[m])) continue;
        cal_cmp_row *row = new_row(b, m, (int)i * CAL_M__N + m);
        if (!row) { free(row_of); return CAL_ENOMEM; }
        row->fp = metric_fp(&r0->cells[i], m);
        row->e[0].present = 1;
        row->e[0].comparable = 1;
        row->e[0].value = r0->cells[i].v[m];
        row->e[0].ratio = 1;
        row_label(row);
        row_of[i] = (int)(b->c->n_rows - 1);
    }
    (void)first_row;
    int e = CAL_OK;
    for (size_t j = 1; j < n && !e; j++) {
        const cal_result *rj = res[j];
        size_t nk = rj->n_cells;
        pair *pairs = malloc(((nb && nk) ? nb * nk : 1) * sizeof *pairs);
        char *used_b = calloc(nb ? nb : 1, 1), *used_k = calloc(nk ? nk : 1, 1);
        if (!pairs || !used_b || !used_k) { free(pairs); free(used_b); free(used_k); e = CAL_ENOMEM; break; }
        size_t np = 0;
        for (size_t i = 0; i < nb; i++) {
            if (row_of[i] < 0) continue;
            cal_fingerprint fi = metric_fp(&r0->cells[i], m);
            for (size_t k = 0; k < nk; k++) {
                if (!isfinite(rj->cells[k].v[m])) continue;
                cal_fingerprint fk = metric_fp(&rj->cells[k], m);
                pairs[np++] = (pair){(int)i, (int)k, distance(&fi, &fk)};
            }
        }
        qsort(pairs, np, sizeof *pairs, pair_cmp);
        for (size_t p = 0; p < np; p++) {
            if (used_b[pairs[p].i] || used_k[pairs[p].k]) continue;
            used_b[pairs[p].i] = used_k[pairs[p].k] = 1;
            fill_pair(b->c, &b->c->rows[row_of[pairs[p].i]], j,
                      &r0->cells[pairs[p].i], &rj->cells[pairs[p].k], o, r0, rj);
        }
        for (size_t i = 0; i < nb; i++)
            if (row_of[i] >= 0 && !used_b[i]) {
                cal_cmp_row *row = &b->c->rows[row_of[i]];
                absent_note(&row->e[j], rj, &row->fp, m);
            }
        /* cells of this result that no baseline cell claimed get rows of their own */
        for (size_t k = 0; k < nk && !e; k++) {
            if (used_k[k] || !isfinite(rj->cells[k].v[m])) continue;
            cal_cmp_row *row = new_row(b, m, (int)(nb + j * 4096 + k) * CAL_M__N + m);
            if (!row) { e = CAL_ENOMEM; break; }
            row->fp = metric_fp(&rj->cells[k], m);
            row_label(row);
            row->e[j].present = 1;
            row->e[j].value = rj->cells[k].v[m];
            snprintf(row->e[0].note, sizeof row->e[0].note, "not in baseline");
            absent_note(&row->e[0], r0, &row->fp, m);
        }
        free(pairs); free(used_b); free(used_k);
    }
    free(row_of);
    return e;
}

static void flags(cal_comparison *c, const cal_result *const *res, size_t n,
                  const cal_compare_opts *o)
{
    int64_t now = o->now_unix ? o->now_unix : (int64_t)time(NULL);
    for (size_t j = 0; j < n; j++) {
        const cal_result *r = res[j];
        char *f = c->flags[j];
        size_t used = 0;
        f[0] = 0;
        c->age_days[j] = r->created_unix > 0 ? (double)(now - r->created_unix) / 86400.0 : NAN;
        if (r->protocol_damage[0])   /* first: it is why its ratios are refused */
            used += (size_t)snprintf(f + used, 256 - used, "its stored protocol is damaged: %.200s",
                                     r->protocol_damage);
        if (o->stale_s > 0 && r->created_unix > 0 && (double)(now - r->created_unix) > o->stale_s) {
            c->stale[j] = 1;
            used += (size_t)snprintf(f + used, 256 - used,
                "%smeasured %.0f d ago (older than %.0f d): re-measure before ranking",
                used ? "; " : "",
                c->age_days[j], o->stale_s / 86400.0);
        }
        for (size_t i = 0; i < n && used < 200; i++) {
            if (i == j || !r->target_name[0] || strcmp(r->target_name, res[i]->target_name)) continue;
            if (!r->target_version[0] || !res[i]->target_version[0] ||
                !strcmp(r->target_version, res[i]->target_version)) continue;
            /* a version that is only the run's label says nothing about the engine */
            if (!strcmp(r->target_version, r->label) || !strcmp(res[i]->target_version, res[i]->label)) continue;
            used += (size_t)snprintf(f + used, 256 - used, "%sengine version %.40s, not %.40s as in %.40s",
                                     used ? "; " : "", r->target_version, res[i]->target_version, res[i]->label);
            break;
        }
    }
}

static const int *g_order;   /* qsort has no context argument in C11 */

static int row_cmp(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    if (g_order[a] != g_order[b]) return g_order[a] < g_order[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

int cal_compare(const cal_result *const *res, size_t n,
                const cal_compare_opts *opts, cal_comparison **out)
{
    if (!res || n < 2 || n > CAL_CMP_MAX || !out) return CAL_EINVAL;
    cal_compare_opts o = opts ? *opts : (cal_compare_opts){0};
    cal_comparison *c = calloc(1, sizeof *c);
    if (!c) return CAL_ENOMEM;
    c->n_results = n;
    builder b = {c, 0, NULL};
    int e = CAL_OK;
    for (int m = 0; m < CAL_M__N && !e; m++)
        if (o.metrics ? (o.metrics & (1ull << m)) != 0 : cal_metric_comparable((cal_metric)m))
            e = compare_metric(&b, res, n, (cal_metric)m, &o);
    if (!e && c->n_rows > 1) {
        /* order rows by cell, then metric, so a cell's numbers sit together */
        int *idx = malloc(c->n_rows * sizeof *idx);
        cal_cmp_row *sorted = malloc(c->n_rows * sizeof *sorted);
        if (!idx || !sorted) e = CAL_ENOMEM;
        else {
            for (size_t i = 0; i < c->n_rows; i++) idx[i] = (int)i;
            g_order = b.order;
            qsort(idx, c->n_rows, sizeof *idx, row_cmp);
            g_order = NULL;
            for (size_t i = 0; i < c->n_rows; i++) sorted[i] = c->rows[idx[i]];
            free(c->rows);
            c->rows = sorted;
            sorted = NULL;
        }
        free(idx);
        free(sorted);
    }
    free(b.order);
    if (e) { cal_comparison_free(&c); return e; }
    flags(c, res, n, &o);
    *out = c;
    return CAL_OK;
}

void cal_comparison_free(cal_comparison **cp)
{
    if (!cp || !*cp) return;
    free((*cp)->rows);
    free(*cp);
    *cp = NULL;
}
