/* caliper noise — the run-to-run noise caliper measures and stores.
 *
 * A shot series (one target, one protocol: the series key) leaves one row
 * per run in the store's noise table (include/caliper/store.h): the run's
 * level, the log of its warm shots' pooled median per-request speed (the
 * number compare puts on the run's warm cell), and the warm shots' sd of
 * their log medians. Repeats of a series are then evidence of two kinds:
 *   shot-to-shot  the warm shots' variance pooled over earlier runs
 *                 (Σ (k_i − 1) s_i² ÷ Σ (k_i − 1)): with --pool-noise the
 *                 shot verdict adds it to its own warm shots' k − 1 degrees
 *                 of freedom (judge.h, prior_sd): more power where the
 *                 machine's noise holds steady from run to run;
 *   run-to-run    the variance of the runs' levels (runs − 1 df): what an A/A
 *                 pair of runs minutes apart differs by, which compare widens
 *                 its CIs by (report.h, cal_run_noise), no narrower than
 *                 the distance at most 5 % of the stored pairs exceed (a
 *                 rank: distribution-free where run levels are not normal).
 * Only runs of one shot series are recorded: one concurrency, one prompt
 * length, no --ab, no --cold, with >= 2 warm shots of >= 3 ok requests.
 * Ownership: callers' buffers; nothing is kept. */
#ifndef CALIPER_NOISE_H
#define CALIPER_NOISE_H
#include <stddef.h>
#include "caliper/report.h"
#include "caliper/store.h"

#define CAL_NOISE_PRIOR_RUNS 10  /* the shot-to-shot prior pools this many newest runs */
#define CAL_NOISE_RUN_RUNS   20  /* the run-to-run estimate uses this many newest runs */

typedef struct cal_noise_est {
    size_t runs;           /* rows behind the estimate */
    double shot_sd;        /* pooled warm-shot sd (log); NAN none */
    double shot_df;        /* its degrees of freedom; 0 none */
    double run_sd;         /* sd of the runs' levels (log); NAN with < 2 runs */
    double run_df;         /* runs − 1; 0 none */
    double run_q95;        /* of the P = runs·(runs − 1)/2 distances |level_i − level_j|,
                              the (P − ⌊P/20⌋)-th smallest: at most ⌊P/20⌋ (≤ 5 %)
                              exceed it; the largest with P < 20; NAN with < 2 runs */
    int    shots;          /* warm shots of the first row given (the newest) */
    double first_sd;       /* the sd of the rows' first_dev (log) about their mean,
                              over the rows whose own verdict called no wall,
                              winsorized at median ± 3 robust sd: how far a first
                              measured shot lands from its run's warm shots on this
                              series when nothing changed; NAN none */
    double first_df;       /* rows behind it, − 1; 0 none */
    int    first_left_out; /* rows left out as walls (their verdict called one) */
} cal_noise_est;

/* Pool rows (any order) into *e. Rows with shots < 2 add to the run-to-run
 * part only; non-finite levels are skipped. */
void cal_noise_pool(const cal_store_noise_row *rows, size_t n, cal_noise_est *e);

/* The estimate of a series from the store: the shot part from the newest
 * CAL_NOISE_PRIOR_RUNS rows before before_run_id (<= 0: all), the run part
 * from the newest CAL_NOISE_RUN_RUNS. CAL_OK with runs 0 when none. */
int cal_noise_estimate(cal_store *st, const char *series, int64_t before_run_id,
                       cal_noise_est *e);

/* A run's row from its data: the series key from its protocol JSON
 * ("noise_prior": {"series": ...}), its level and warm-shot sd from its
 * requests. CAL_ENOTFOUND when the run is not one recorded series (no key,
 * more than one cell per shot, fewer than 2 warm shots, a shot with fewer
 * than 3 ok requests, or the run did not end ok). */
int cal_noise_row_of_run(const cal_run_data *d, cal_store_noise_row *out);

/* cal_noise_row_of_run, then cal_store_put_noise. CAL_ENOTFOUND as above
 * (nothing written). */
int cal_noise_record(cal_store *st, const cal_run_data *d);

/* The prior stored with a run (its protocol JSON's "noise_prior"): the
 * pooled shot sd and its df the verdict used. 0 and *sd = NAN, *df = 0 when
 * there is none. */
int cal_noise_prior_of(const char *protocol_json, double *sd, double *df);
/* The first shots' spread stored in a run's protocol JSON (noise_prior
 * first_sd, first_df: the newest CAL_NOISE_PRIOR_RUNS runs of the series
 * before it): 1 and *sd, *df when present; else 0, NAN and 0. */
int cal_noise_first_of(const char *protocol_json, double *sd, double *df);
/* The series key stored in a run's protocol JSON (noise_prior.series) into
 * out[n]: 1 when there is one, else 0 and "". */
int cal_noise_series_of(const char *protocol_json, char *out, size_t n);
/* How many stored runs that spread left out as walls (noise_prior
 * first_left_out); 0 when unknown. */
int cal_noise_first_left_out(const char *protocol_json);

/* Add "noise_prior": {"series", "runs", "shot_sd", "shot_df"} to a JSON
 * object text (*json, malloc'd, replaced), from the store's rows of series;
 * pool 0 records the series and runs but no prior (shot_sd null, shot_df
 * 0): the verdict judges on the run's own shots (caliper run without
 * --pool-noise). CAL_ENOMEM, CAL_EINVAL (not an object), else CAL_OK. */
int cal_noise_protocol_add(cal_store *st, const char *series, int pool, char **json);

/* compare's run-to-run noise: for each result read from the store at
 * db_path (its id a run id), its series' noise over its stored runs up to
 * the newest run compared (the newest CAL_NOISE_RUN_RUNS of them, so the
 * compared runs are among them) into o->run_noise[j]; .same where its
 * series is the baseline's. A file result, a run of no recorded series, or
 * a store that cannot be read leaves df 0. Returns how many results got
 * an estimate. */
size_t cal_noise_compare_opts(const char *db_path, const cal_result *const *res, size_t n,
                              cal_compare_opts *o);

#endif
