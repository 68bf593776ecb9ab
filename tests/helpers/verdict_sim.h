/* Seeded shot series and the histories a store accumulates from them, for
 * the shot verdict's error rates: tests/unit/test_judge.c checks them
 * against their targets, bench/verdicts prints them (--simulate). Header
 * only: each includer gets its own copy of these static functions.
 *
 * The model, on the log scale of per-request tok/s: a run's level L; each
 * measured shot's level moves by tau (shot-to-shot sd), the first measured
 * shot by first_sd instead (it swings more than the warm shots); each
 * request by sigma around its shot's level. A wall of size D lowers every
 * shot after the first by log(1 − D). A store's history is made by the same
 * runs one after another: each is judged with the prior the store gives at
 * that moment (cal_noise_pool over its newest rows), and its noise row keeps
 * whether that verdict called a change, as caliper run stores it. */
#ifndef CALIPER_VERDICT_SIM_H
#define CALIPER_VERDICT_SIM_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "caliper/judge.h"
#include "caliper/noise.h"
#include "caliper/stats.h"
#include "lib/util/rng.h"

#define VSIM_MAX_SHOTS 16
#define VSIM_MAX_REQ   64
#define VSIM_MAX_ROWS  CAL_NOISE_PRIOR_RUNS

typedef struct vsim_model {
    double tau, first_sd, sigma;   /* log sds: warm shot, first shot, request */
    int    shots, requests;        /* measured shots (shot 1 + warm), requests per shot */
    /* bursts of other work (a shared machine): each shot, the first
     * included, is hit with probability burst_p and then slowed by
     * |t₃| × burst_scale on the log scale (heavy-tailed, one-sided: other
     * work only takes time away). 0: none, the normal model alone */
    double burst_p, burst_scale;
} vsim_model;

typedef struct vsim {
    uint64_t seed;
    vsim_model m;
    cal_store_noise_row rows[VSIM_MAX_ROWS];   /* newest first */
    size_t nrows;
    double v[VSIM_MAX_SHOTS][VSIM_MAX_REQ];
    cal_judge_shot s[VSIM_MAX_SHOTS];
} vsim;

static double vsim_unif(vsim *x)
{
    uint64_t z = cal_splitmix64(&x->seed);
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double vsim_gauss(vsim *x)
{
    double u = vsim_unif(x), w = vsim_unif(x);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * w);
}

/* Student's t with 3 df: a normal over the root of a chi-square's mean
 * (three squared normals). */
static double vsim_t3(vsim *x)
{
    double g = vsim_gauss(x), a = vsim_gauss(x), b = vsim_gauss(x), c = vsim_gauss(x);
    return g / sqrt((a * a + b * b + c * c) / 3);
}

static void vsim_init(vsim *x, uint64_t seed, vsim_model m)
{
    memset(x, 0, sizeof *x);
    x->seed = seed;
    if (m.shots > VSIM_MAX_SHOTS) m.shots = VSIM_MAX_SHOTS;
    if (m.requests > VSIM_MAX_REQ) m.requests = VSIM_MAX_REQ;
    x->m = m;
}

/* The prior the store gives now: its newest rows pooled. */
static void vsim_opts(const vsim *x, cal_judge_opts *o)
{
    cal_noise_est e;
    cal_noise_pool(x->rows, x->nrows, &e);
    memset(o, 0, sizeof *o);
    o->what = "per-request tok/s";
    o->first = CAL_JUDGE_FIRST_WARM;   /* the default protocol: a warm-up first */
    o->first_sd = e.first_sd;
    o->first_df = isfinite(e.first_sd) ? e.first_df : 0;
    o->first_left_out = e.first_left_out;
}

/* One run with a wall of size drop after shot 1, judged with the store's
 * prior (*v), its row then stored as caliper run stores it. */
static void vsim_run(vsim *x, double drop, cal_judge_verdict *v)
{
    const vsim_model *m = &x->m;
    double z[VSIM_MAX_SHOTS], L = log(1000);
    for (int j = 0; j < m->shots; j++) {
        double lvl = L + (j ? m->tau : m->first_sd) * vsim_gauss(x);
        if (j) lvl += log1p(-drop);
        if (m->burst_p > 0 && vsim_unif(x) < m->burst_p) lvl -= fabs(vsim_t3(x)) * m->burst_scale;
        double buf[VSIM_MAX_REQ];
        for (int i = 0; i < m->requests; i++) {
            x->v[j][i] = exp(lvl + m->sigma * vsim_gauss(x));
            buf[i] = log(x->v[j][i]);
        }
        z[j] = cal_stats_median(buf, (size_t)m->requests);
        x->s[j] = (cal_judge_shot){j + 2, x->v[j], (size_t)m->requests};
    }
    cal_judge_opts o;
    vsim_opts(x, &o);
    cal_judge_shots(x->s, (size_t)m->shots, &o, v);
    /* the row: warm shots' mean − the first's, their sd, the verdict */
    double s = 0, q = 0;
    int k = m->shots - 1;
    for (int j = 1; j <= k; j++) s += z[j];
    double mean = s / k;
    for (int j = 1; j <= k; j++) q += (z[j] - mean) * (z[j] - mean);
    memmove(x->rows + 1, x->rows, (VSIM_MAX_ROWS - 1) * sizeof x->rows[0]);
    cal_store_noise_row *r = &x->rows[0];
    memset(r, 0, sizeof *r);
    r->level = mean;
    r->shot_sd = k > 1 ? sqrt(q / (k - 1)) : NAN;
    r->shots = k;
    r->first_dev = mean - z[0];
    r->wall = v->directional;
    if (x->nrows < VSIM_MAX_ROWS) x->nrows++;
}

/* The claims a verdict makes about a run with a true drop. */
typedef struct vsim_tally {
    int n, wall, no_wall, cannot;  /* verdicts: a change called (a wall, a slow
                                      first shot, a trend), "no wall larger
                                      than X", cannot judge */
    int wrong_no_wall;             /* "no wall larger than X" where the true drop
                                      exceeds X */
} vsim_tally;

/* n runs of a true drop, each judged on the store as it is (the store is
 * not changed: every run sees the same history). */
static void vsim_tally_runs(vsim *x, double drop, int n, vsim_tally *t)
{
    memset(t, 0, sizeof *t);
    size_t keep = x->nrows;
    cal_store_noise_row saved[VSIM_MAX_ROWS];
    memcpy(saved, x->rows, sizeof saved);
    for (int i = 0; i < n; i++) {
        cal_judge_verdict v;
        vsim_run(x, drop, &v);
        memcpy(x->rows, saved, sizeof saved);
        x->nrows = keep;
        t->n++;
        if (v.directional) t->wall++;
        else if (v.kind == CAL_JUDGE_STEADY || v.kind == CAL_JUDGE_SMALL) {
            t->no_wall++;
            if (drop > v.equiv) t->wrong_no_wall++;
        } else t->cannot++;
    }
}

#endif
