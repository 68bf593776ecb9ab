/* Seeded `run --ab` runs for the gate's error rates: bench/gate prints them
 * (--simulate), tests/unit/test_gate.c checks the machinery on them. Header
 * only: each includer gets its own copy of these static functions.
 *
 * The model, on the log scale, per shot of either side: the machine's state
 * moves the shot by tau (sd); with probability burst_p a burst of other work
 * slows it further by an exponential amount of mean burst_mean (the heavy
 * tail a shared machine shows: the paired ratios' sd ran about twice their
 * MAD); every metric of one shot moves together with that state (a slower
 * shot has lower speeds and longer latencies), plus sigma of its own (the
 * spread of a median over a shot's requests; sigma_lat for a latency, whose
 * median over a few requests spreads more); each side's engine process
 * has a level of its own for the whole run, drawn with sd proc_sd (two
 * processes of one build differ: bench/gate's A/A runs show it). B slower
 * by `drop` multiplies
 * its speeds by 1 − drop and divides its latencies by it. Each simulated
 * run is judged by cal_gate_eval, the code behind `caliper gate`. */
#ifndef CALIPER_GATE_SIM_H
#define CALIPER_GATE_SIM_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/gate.h"
#include "lib/util/rng.h"

typedef struct gsim_model {
    double tau;          /* shot-to-shot sd of the machine state (log) */
    double burst_p;      /* chance a shot is hit by a burst */
    double burst_mean;   /* mean slowdown of a burst (log, exponential) */
    double sigma;        /* each speed's own sd per shot (log) */
    double sigma_lat;    /* each latency's own sd per shot (log); 0: sigma */
    double proc_sd;      /* sd of a process's own level over a run (log) */
    int    pairs;        /* quoted shot pairs per run */
} gsim_model;

typedef struct gsim {
    uint64_t seed;
    gsim_model m;
} gsim;

static double gsim_unif(gsim *x)
{
    uint64_t z = cal_splitmix64(&x->seed);
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double gsim_gauss(gsim *x)
{
    double u = gsim_unif(x), w = gsim_unif(x);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * w);
}

/* one shot's machine state (log; negative = slower) */
static double gsim_state(gsim *x)
{
    double s = x->m.tau * gsim_gauss(x);
    if (gsim_unif(x) < x->m.burst_p) s += x->m.burst_mean * log(gsim_unif(x));
    return s;
}

/* One simulated run --ab, B slower by drop, judged against bounds[nb] at
 * alpha; *v the gate's verdict, *kinds (may be NULL) each case's answer.
 * 0, or an error of cal_gate_eval. */
static int gsim_run(gsim *x, double drop, const cal_gate_bound *bounds, size_t nb, double alpha,
                    cal_gate_verdict *v, cal_gate_kind *kinds)
{
    int n = x->m.pairs > CAL_GATE_MAX_SHOTS ? CAL_GATE_MAX_SHOTS : x->m.pairs;
    cal_gate_cell cell;
    memset(&cell, 0, sizeof cell);
    cell.a = calloc((size_t)(n > 0 ? n : 1), sizeof *cell.a);
    cell.b = calloc((size_t)(n > 0 ? n : 1), sizeof *cell.b);
    if (!cell.a || !cell.b) { free(cell.a); free(cell.b); return CAL_ENOMEM; }
    snprintf(cell.name, sizeof cell.name, "simulated");
    cal_fp_init(&cell.fp);
    cell.n_pairs = (size_t)n;
    double pa = x->m.proc_sd * gsim_gauss(x), pb = x->m.proc_sd * gsim_gauss(x);
    for (int i = 0; i < n; i++) {
        cell.shot[i] = i + 2;
        double sa = gsim_state(x) + pa, sb = gsim_state(x) + pb;
        for (int m = 0; m < CAL_M__N; m++) {
            const cal_field *f = cal_metric_get((cal_metric)m);
            double dir = f->better == CAL_BETTER_LOWER ? -1 : 1;
            double sg = dir < 0 && x->m.sigma_lat > 0 ? x->m.sigma_lat : x->m.sigma;
            double ea = dir * sa + sg * gsim_gauss(x);
            double eb = dir * sb + sg * gsim_gauss(x) + dir * log1p(-drop);
            cell.a[i][m] = 100 * exp(ea);
            cell.b[i][m] = 100 * exp(eb);
        }
    }
    cal_gate_input in;
    memset(&in, 0, sizeof in);
    in.design = CAL_GATE_PAIRED;
    in.cells = &cell;
    in.n_cells = 1;
    cal_gate_outcome *o = NULL;
    int e = cal_gate_eval(&in, bounds, nb, alpha, &o);
    if (!e) {
        *v = o->verdict;
        for (size_t k = 0; kinds && k < o->n_cases; k++) kinds[k] = o->cases[k].kind;
    }
    cal_gate_outcome_free(&o);
    free(cell.a);
    free(cell.b);
    return e;
}

#endif
