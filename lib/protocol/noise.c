/* caliper noise — each run's shot series as stored noise evidence, pooled
 * into the shot-to-shot prior of the verdict and the run-to-run noise of
 * compare (include/caliper/noise.h). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/noise.h"
#include "caliper/stats.h"

#define MIN_OK 3   /* ok requests a shot needs to count (CAL_JUDGE_MIN_REQUESTS) */

/* of nd distances (sorted here), the (nd − ⌊nd/20⌋)-th smallest: at most
 * ⌊nd/20⌋ of them (≤ 5 %) lie beyond it; with fewer than 20, the largest */
static double rank_q95(double *d, size_t nd)
{
    if (!nd) return NAN;
    cal_stats_sort(d, nd);
    return d[nd - 1 - nd / 20];
}

/* The first shots' own spread over the rows that were not walls: a run
 * whose own verdict called a wall measured a wall, not noise, and counting
 * it taught the verdict that the next wall was noise too (two 72 % walls in
 * a store hid a 30 % one behind a CI of −98 to +1959 %). What is left is
 * winsorized at its median ± 3 robust sd (1.4826 × MAD) before its sd is
 * taken, so a wall a deaf verdict missed moves it by at most three robust
 * sd; the sd is about the rows' mean, so a first shot that is always a
 * little slower is a level, not a spread (docs/run.md). */
static void first_spread(const cal_store_noise_row *rows, size_t n, cal_noise_est *e)
{
    double x[CAL_NOISE_RUN_RUNS], dev[CAL_NOISE_RUN_RUNS];
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(rows[i].first_dev)) continue;
        if (rows[i].wall == 1) { e->first_left_out++; continue; }
        if (nf < CAL_NOISE_RUN_RUNS) x[nf++] = rows[i].first_dev;
    }
    if (nf < 2) return;
    memcpy(dev, x, nf * sizeof *x);
    double med = cal_stats_median(dev, nf);   /* sorts dev */
    for (size_t i = 0; i < nf; i++) dev[i] = fabs(x[i] - med);
    double r = 3 * 1.4826 * cal_stats_median(dev, nf);
    double m = 0, q = 0;
    for (size_t i = 0; i < nf; i++) {
        if (r > 0) x[i] = fmin(fmax(x[i], med - r), med + r);
        m += x[i];
    }
    m /= (double)nf;
    for (size_t i = 0; i < nf; i++) q += (x[i] - m) * (x[i] - m);
    e->first_sd = sqrt(q / (double)(nf - 1));
    e->first_df = (double)(nf - 1);
}

void cal_noise_pool(const cal_store_noise_row *rows, size_t n, cal_noise_est *e)
{
    memset(e, 0, sizeof *e);
    e->shot_sd = e->run_sd = e->run_q95 = e->first_sd = NAN;
    e->shots = n ? rows[0].shots : 0;
    first_spread(rows, n, e);
    double ss = 0, df = 0, sum = 0, sum2 = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const cal_store_noise_row *r = &rows[i];
        if (!isfinite(r->level)) continue;
        m++;
        sum += r->level;
        if (r->shots >= 2 && isfinite(r->shot_sd) && r->shot_sd >= 0) {
            ss += (double)(r->shots - 1) * r->shot_sd * r->shot_sd;
            df += (double)(r->shots - 1);
        }
    }
    e->runs = m;
    if (df > 0) { e->shot_sd = sqrt(ss / df); e->shot_df = df; }
    if (m >= 2) {
        double mean = sum / (double)m;
        for (size_t i = 0; i < n; i++)
            if (isfinite(rows[i].level)) sum2 += (rows[i].level - mean) * (rows[i].level - mean);
        e->run_sd = sqrt(sum2 / (double)(m - 1));
        e->run_df = (double)(m - 1);
        /* the stored A/A pairs' distances, as measured */
        double *d = malloc(m * (m - 1) / 2 * sizeof *d);
        size_t nd = 0;
        for (size_t i = 0; d && i < n; i++)
            for (size_t k = i + 1; k < n; k++)
                if (isfinite(rows[i].level) && isfinite(rows[k].level))
                    d[nd++] = fabs(rows[i].level - rows[k].level);
        /* a rank, not an interpolated percentile */
        if (d) e->run_q95 = rank_q95(d, nd);
        free(d);
    }
}

int cal_noise_estimate(cal_store *st, const char *series, int64_t before_run_id,
                       cal_noise_est *e)
{
    cal_store_noise_row *rows = calloc(CAL_NOISE_RUN_RUNS, sizeof *rows);
    if (!rows) return CAL_ENOMEM;
    size_t n = 0;
    int rc = cal_store_noise(st, series, before_run_id, rows, CAL_NOISE_RUN_RUNS, &n);
    if (rc == CAL_OK) {
        cal_noise_est shot;
        cal_noise_pool(rows, n < CAL_NOISE_PRIOR_RUNS ? n : CAL_NOISE_PRIOR_RUNS, &shot);
        cal_noise_pool(rows, n, e);
        e->shot_sd = shot.shot_sd;
        e->shot_df = shot.shot_df;
        e->first_sd = shot.first_sd;
        e->first_df = shot.first_df;
        e->first_left_out = shot.first_left_out;
    } else {
        cal_noise_pool(NULL, 0, e);
    }
    free(rows);
    return rc;
}

static const char *series_of(const cal_protocol *p)
{
    return p->noise.series[0] ? p->noise.series : NULL;
}

/* Whether a run's own verdicts called a change after its first shot: a
 * directional shot verdict (a wall, a slow first shot, a trend). */
static int wall_called(const cal_run_data *d)
{
    json_t *va = d->run.verdicts_json ? json_loads(d->run.verdicts_json, 0, NULL) : NULL;
    size_t i;
    json_t *v;
    int wall = 0;
    json_array_foreach(va, i, v) {
        const char *k = json_string_value(json_object_get(v, "kind"));
        if (k && !strcmp(k, cal_verdict_kind_name(CAL_VK_SHOTS)) &&
            json_is_true(json_object_get(v, "judged")) &&
            json_integer_value(json_object_get(v, "direction")) != 0)
            wall = 1;
    }
    json_decref(va);
    return wall;
}

int cal_noise_row_of_run(const cal_run_data *d, cal_store_noise_row *out)
{
    memset(out, 0, sizeof *out);
    out->level = out->shot_sd = out->first_dev = NAN;
    out->wall = -1;
    if (!d || d->run.status != CAL_RUN_OK) return CAL_ENOTFOUND;
    const char *key = series_of(&d->proto);
    if (!key) return CAL_ENOTFOUND;
    snprintf(out->series, sizeof out->series, "%s", key);
    out->run_id = d->run.id;
    /* one cell per shot: the measured cells in order, warm-ups left out */
    double z[CAL_JUDGE_MAX_SHOTS];
    size_t k = 0, nreq = 0, npool = 0;
    int shot_seen = -1;
    for (size_t i = 0; i < d->n_cells; i++) nreq += (size_t)d->cells[i].n_requests;
    double *v = malloc((nreq ? nreq : 1) * sizeof *v);
    double *pool = malloc((nreq ? nreq : 1) * sizeof *pool);
    if (!v || !pool) { free(v); free(pool); return CAL_ENOMEM; }
    int rc = CAL_OK;
    for (size_t i = 0; i < d->n_cells && rc == CAL_OK; i++) {
        const cal_cell *c = &d->cells[i];
        if (c->shot_kind == CAL_SHOT_WARMUP) continue;
        if (c->shot_index == shot_seen || c->target[0] || k == CAL_JUDGE_MAX_SHOTS) {
            rc = CAL_ENOTFOUND;   /* a second cell in one shot, or --ab */
            break;
        }
        shot_seen = c->shot_index;
        size_t m = cal_analysis_cell_values(d, c, CAL_S_REQ_TOKS, v, nreq);
        size_t ok = 0;
        for (size_t j = 0; j < m; j++)
            if (isfinite(v[j]) && v[j] > 0) {
                if (k > 0) pool[npool++] = v[j];   /* a warm shot's request */
                v[ok++] = log(v[j]);
            }
        if (ok < MIN_OK) { rc = CAL_ENOTFOUND; break; }
        z[k++] = cal_stats_median(v, ok);
    }
    free(v);
    /* the level is the warm shots' pooled median request speed: the number
     * compare puts on the run's warm cell (per-request tok/s over the quoted
     * shots), so the stored runs' distances are distances of that very
     * statistic */
    double level = rc == CAL_OK && npool ? log(cal_stats_median(pool, npool)) : NAN;
    free(pool);
    if (rc) return rc;
    if (k < 3) return CAL_ENOTFOUND;     /* shot 1 and >= 2 warm shots */
    /* the warm shots: every measured shot after the first */
    double s = 0, q = 0;
    for (size_t i = 1; i < k; i++) s += z[i];
    double mean = s / (double)(k - 1);
    for (size_t i = 1; i < k; i++) q += (z[i] - mean) * (z[i] - mean);
    out->level = level;
    out->shot_sd = sqrt(q / (double)(k - 2));
    out->shots = (int)(k - 1);
    out->first_dev = mean - z[0];
    out->wall = wall_called(d);
    return CAL_OK;
}

int cal_noise_record(cal_store *st, const cal_run_data *d)
{
    cal_store_noise_row r;
    int rc = cal_noise_row_of_run(d, &r);
    return rc ? rc : cal_store_put_noise(st, d->run.id, &r);
}

/* The noise prior of a protocol text, through the one serializer. */
static cal_protocol_noise prior_of(const char *protocol_json)
{
    cal_protocol p;
    cal_protocol_noise n;
    if (cal_protocol_from_json(protocol_json, NULL, &p) == CAL_OK) n = p.noise;
    else { cal_protocol_init(&p); n = p.noise; }
    cal_protocol_clear(&p);
    return n;
}

int cal_noise_prior_of(const char *protocol_json, double *sd, double *df)
{
    cal_protocol_noise n = prior_of(protocol_json);
    *sd = n.shot_sd;
    *df = n.shot_df;
    return n.shot_df > 0;
}

int cal_noise_first_of(const char *protocol_json, double *sd, double *df)
{
    cal_protocol_noise n = prior_of(protocol_json);
    *sd = n.first_sd;
    *df = n.first_df;
    return n.first_df > 0;
}

int cal_noise_series_of(const char *protocol_json, char *out, size_t n)
{
    if (n) out[0] = '\0';
    cal_protocol_noise w = prior_of(protocol_json);
    if (w.series[0] && n) snprintf(out, n, "%s", w.series);
    return w.series[0] != '\0';
}

int cal_noise_first_left_out(const char *protocol_json)
{
    cal_protocol_noise w = prior_of(protocol_json);
    return w.first_left_out > 0 && w.first_left_out < 1000000 ? w.first_left_out : 0;
}

int cal_noise_protocol_add(cal_store *st, const char *series, int pool, char **json)
{
    if (!json || !*json || !series) return CAL_EINVAL;
    json_t *p = json_loads(*json, 0, NULL);
    if (!json_is_object(p)) { json_decref(p); return CAL_EINVAL; }
    cal_noise_est e;
    if (cal_noise_estimate(st, series, 0, &e) != CAL_OK) cal_noise_pool(NULL, 0, &e);
    json_t *np = json_object();
    json_object_set_new(np, "series", json_string(series));
    json_object_set_new(np, "runs", json_integer((json_int_t)e.runs));
    json_object_set_new(np, "shot_sd", pool && isfinite(e.shot_sd) ? json_real(e.shot_sd) : json_null());
    json_object_set_new(np, "shot_df", json_real(pool ? e.shot_df : 0));
    /* the first shots' spread is used by default: it can only widen the
     * shot verdict's band, never narrow it */
    json_object_set_new(np, "first_sd", isfinite(e.first_sd) ? json_real(e.first_sd) : json_null());
    json_object_set_new(np, "first_df", json_real(isfinite(e.first_sd) ? e.first_df : 0));
    json_object_set_new(np, "first_left_out", json_integer(e.first_left_out));
    json_object_set_new(p, "noise_prior", np);
    char *s = json_dumps(p, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(p);
    if (!s) return CAL_ENOMEM;
    free(*json);
    *json = s;
    return CAL_OK;
}

/* The rank over the pairs of levels lv[] (of runs id[]) at least `apart`
 * run ids apart; NAN with none. */
static double rank_apart(const double *lv, const int64_t *id, size_t m, int64_t apart)
{
    double d[(CAL_NOISE_RUN_RUNS + 1) * CAL_NOISE_RUN_RUNS / 2];
    size_t nd = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t k = i + 1; k < m; k++)
            if (isfinite(lv[i]) && isfinite(lv[k]) &&
                (id[i] > id[k] ? id[i] - id[k] : id[k] - id[i]) >= apart)
                d[nd++] = fabs(lv[i] - lv[k]);
    return rank_q95(d, nd);
}

/* A run's warm shots (every measured shot after the first) pooled as
 * compare pools its warm cell, each comparable metric on the log scale
 * (lv[CAL_M__N]), and its first measured shot alone (lv1[CAL_M__N]: what a
 * one-shot cell, "warm 2" or "cold 1", compares); NAN where unknown.
 * Requests and their chunks are loaded: the per-request medians and ITL
 * pool from them. */
static void levels_of(const cal_run_data *d, const size_t *idx, size_t k, double *lv)
{
    cal_summary s;
    if (!k || cal_analysis_pool(d, idx, k, &s) != CAL_OK) return;
    for (int m = 0; m < CAL_M__N; m++) {
        if (!cal_metric_comparable((cal_metric)m)) continue;
        double v = cal_summary_get(&s, cal_metric_get((cal_metric)m));
        if (isfinite(v) && v > 0) lv[m] = log(v);
    }
}

static void run_levels(cal_store *st, int64_t run_id, double *lv, double *lv1)
{
    for (int m = 0; m < CAL_M__N; m++) lv[m] = lv1[m] = NAN;
    cal_run_data *d = NULL;
    if (cal_store_load_run(st, run_id, CAL_LOAD_CHUNKS, &d) != CAL_OK) return;
    size_t idx[CAL_JUDGE_MAX_SHOTS], k = 0, measured = 0, first = 0;
    for (size_t c = 0; c < d->n_cells && k < CAL_JUDGE_MAX_SHOTS; c++) {
        if (d->cells[c].shot_kind == CAL_SHOT_WARMUP) continue;
        if (measured++) idx[k++] = c;
        else first = c;
    }
    levels_of(d, idx, k, lv);
    if (measured) levels_of(d, &first, 1, lv1);
    cal_run_data_free(&d);
}

/* The thresholds of one compared pair (runs older < newer of one series):
 * the rank over the stored runs' pairs at least as far apart as the
 * compared one, among the newest CAL_NOISE_RUN_RUNS up to the newer run
 * and the older one. Runs far apart on a machine whose load drifts differ
 * by more than neighbours do; a pair is judged against pairs as far apart,
 * and where the store holds fewer than 20 of those the threshold is the
 * largest of them. Per-request speed (the stored levels) into *q, and
 * every comparable metric's own rank, from the runs' pooled warm shots,
 * into mq[CAL_M__N] (NAN where fewer than two runs have it). */
static void pair_ranks(cal_store *st, const char *series, int64_t older, int64_t newer,
                       double *q, double *mq, double *mq1)
{
    cal_store_noise_row rows[CAL_NOISE_RUN_RUNS + 1];
    double lm[CAL_M__N][CAL_NOISE_RUN_RUNS + 1], lm1[CAL_M__N][CAL_NOISE_RUN_RUNS + 1];
    double lv[CAL_NOISE_RUN_RUNS + 1], one[CAL_M__N], one1[CAL_M__N];
    int64_t id[CAL_NOISE_RUN_RUNS + 1];
    size_t n = 0, k = 0;
    *q = NAN;
    for (int m = 0; m < CAL_M__N; m++) mq[m] = mq1[m] = NAN;
    if (cal_store_noise(st, series, newer + 1, rows, CAL_NOISE_RUN_RUNS, &n) != CAL_OK) return;
    int has_older = 0;
    for (size_t i = 0; i < n; i++) has_older |= rows[i].run_id == older;
    if (!has_older && cal_store_noise(st, series, older + 1, rows + n, 1, &k) == CAL_OK && k &&
        rows[n].run_id == older)
        n++;
    for (size_t i = 0; i < n; i++) {
        id[i] = rows[i].run_id;
        lv[i] = rows[i].level;
        run_levels(st, rows[i].run_id, one, one1);
        for (int m = 0; m < CAL_M__N; m++) {
            lm[m][i] = one[m];
            lm1[m][i] = one1[m];
        }
    }
    *q = rank_apart(lv, id, n, newer - older);
    for (int m = 0; m < CAL_M__N; m++)
        if (cal_metric_comparable((cal_metric)m)) {
            mq[m] = rank_apart(lm[m], id, n, newer - older);
            mq1[m] = rank_apart(lm1[m], id, n, newer - older);
        }
}

static void noise_unknown(cal_run_noise *r)
{
    memset(r, 0, sizeof *r);
    r->sd = r->q95 = r->shot_sd = NAN;
    for (int m = 0; m < CAL_M__N; m++) r->mq95[m] = r->mq95_one[m] = NAN;
}

size_t cal_noise_compare_opts(const char *db_path, const cal_result *const *res, size_t n,
                              cal_compare_opts *o)
{
    if (n > CAL_CMP_MAX) n = CAL_CMP_MAX;
    for (size_t j = 0; j < n; j++)
        noise_unknown(&o->run_noise[j]);
    cal_store *st = NULL;
    char why[256];
    if (!db_path || cal_store_open_ex(db_path, CAL_STORE_READONLY, &st, why, sizeof why) != CAL_OK)
        return 0;
    char (*key)[CAL_NOISE_SERIES_MAX] = calloc(n ? n : 1, sizeof *key);
    if (!key) { cal_store_close(&st); return 0; }
    /* the estimate reaches up to the newest run compared, so the compared
     * runs are among the runs whose pairs the threshold ranks: under runs
     * that differ by chance alone, the compared pair is any of those pairs
     * alike, and lies among the ≤ 5 % beyond the threshold with
     * probability ≤ 5 % */
    long long newest = 0, id0 = 0;
    for (size_t j = 0; j < n; j++) {
        char *end = NULL;
        long long id = res[j] ? strtoll(res[j]->id, &end, 10) : 0;
        if (res[j] && end && !*end && id > newest) newest = id;
    }
    size_t got = 0;
    for (size_t j = 0; j < n; j++) {
        key[j][0] = 0;
        char *end = NULL;
        long long id = res[j] ? strtoll(res[j]->id, &end, 10) : 0;
        if (!res[j] || !end || *end || id <= 0) continue;
        if (j == 0) id0 = id;
        cal_run_data *d = NULL;
        if (cal_store_load_run(st, id, CAL_LOAD_NO_REQS, &d) != CAL_OK) continue;
        const char *k = series_of(&d->proto);
        if (k) snprintf(key[j], sizeof key[j], "%s", k);
        cal_run_data_free(&d);
        cal_noise_est e;
        if (!key[j][0] || cal_noise_estimate(st, key[j], newest + 1, &e) != CAL_OK || !(e.run_df > 0))
            continue;
        cal_run_noise *r = &o->run_noise[j];
        noise_unknown(r);
        r->sd = e.run_sd;
        r->df = e.run_df;
        r->q95 = e.run_q95;
        r->shot_sd = e.shot_sd;
        r->shots = e.shots;
        r->same = j > 0 && !strcmp(key[j], key[0]);
        /* a side of the baseline's series: the pair's own thresholds */
        if (r->same && id0 > 0 && id != id0)
            pair_ranks(st, key[j], id < id0 ? id : id0, id < id0 ? id0 : id, &r->q95, r->mq95,
                       r->mq95_one);
        got++;
    }
    free(key);
    cal_store_close(&st);
    return got;
}
