/* caliper trend — one shot series across its stored runs (commits, labels):
 * each run's level of every metric, the run-to-run noise those levels show,
 * and the gate's decision between neighbours (`caliper runs --series RUN`,
 * the separate-runs design of `caliper gate`: include/caliper/gate.h).
 *
 * A run's level is the value of its quoted cell (the warm shots pooled, as
 * compare and report quote it). The run-to-run noise of a metric is read
 * from consecutive runs: with no change between them a difference of log
 * levels has sd σ·√2, so σ = 1.4826 × median |Δ| ÷ √2 — a median, so a
 * real step in the history is one large |Δ| and moves it little ("real
 * effects in history are not noise"). Its degrees of freedom are those of a
 * median-based scale, about 37 % of the differences (never under 1).
 *
 * Ownership: cal_trend owns its points (cal_trend_free). */
#ifndef CALIPER_TREND_H
#define CALIPER_TREND_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/buf.h"
#include "caliper/gate_stats.h"
#include "caliper/report.h"
#include "caliper/store.h"

#define CAL_TREND_MAX_RUNS 64   /* the newest runs of a series read */

typedef struct cal_trend_point {
    int64_t run_id;
    char    label[CAL_RES_STR];  /* the run's --label; "" none */
    char    commit[48];          /* from its build string; "" unknown */
    int64_t created_unix;
    double  v[CAL_M__N];         /* the quoted cell's values; NAN absent */
} cal_trend_point;

typedef struct cal_trend {
    char    series[CAL_NOISE_SERIES_MAX];
    cal_fingerprint fp;          /* the newest run's quoted cell */
    char    cell[128];           /* "c1 · 256 tok · warm 2–6" */
    cal_trend_point *pts;        /* [n], oldest first */
    size_t  n;
} cal_trend;

/* The newest max_runs (<= CAL_TREND_MAX_RUNS; 0: all that) runs of a
 * series, oldest first, each read through the same result model as compare
 * (cal_result_from_store). A run whose quoted cell has another fingerprint
 * than the newest run's is left out (a series key holds the protocol, so
 * none should be). CAL_ENOTFOUND: no stored run of the series. */
int  cal_trend_load(cal_store *st, const char *series, size_t max_runs, cal_trend *out,
                    char *err, size_t errn);
void cal_trend_free(cal_trend *t);

/* The run-to-run noise of metric m over t's consecutive runs (log sd and
 * its df). 0 with *sd, *df = NAN, 0 when fewer than 2 differences. */
int  cal_trend_noise(const cal_trend *t, cal_metric m, double *sd, double *df);

/* The robust scale above from levels x[0..n) (value units, oldest first;
 * non-finite or <= 0 skipped): the same rule, for series read elsewhere. */
int  cal_trend_noise_of(const double *x, size_t n, double *sd, double *df);

/* One step between neighbours i − 1 and i. */
typedef struct cal_trend_step {
    cal_gate_stat stat;          /* t on the two levels with the series' noise */
    double p_worse_adj, p_better_adj;  /* Holm over the series' steps */
    cal_gate_kind kind;
    double effect;               /* level_i ÷ level_(i−1) − 1; NAN absent */
} cal_trend_step;

/* The gate's decision between every pair of neighbours for metric m with
 * bound (relative) and family-wise alpha (Holm over the n − 1 steps).
 * out[0] is unused (no neighbour); out[i] the step into run i. CAL_EINVAL
 * for a metric with no better direction or a bad bound. Without noise
 * every step is CANNOT. */
int  cal_trend_steps(const cal_trend *t, cal_metric m, double bound, double alpha,
                     cal_trend_step *out);

/* A text sparkline of metric m over the runs ("▁▃▇█", one character per
 * run, oldest first; "·" where a run has no value) into buf[n]. */
char *cal_trend_sparkline(const cal_trend *t, cal_metric m, char *buf, size_t n);

/* The trend as one self-contained HTML page: per metric m[i] (bound[i]
 * relative, its steps steps[i][0..t->n)), the metric across the runs in a
 * chart with each step's decision marked, and the table of runs and
 * steps. CAL_ETOOBIG, CAL_ENOMEM. */
int  cal_trend_write_html(const cal_trend *t, const cal_metric *m, const double *bound, size_t nm,
                          double alpha, const cal_trend_step *const *steps, cal_buf *out);

#endif
