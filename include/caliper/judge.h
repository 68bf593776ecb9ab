/* caliper judge — did the shots after shot 1 run differently from shot 1?
 * A calibrated verdict from every request of every shot (docs/run.md,
 * "How a shot verdict is reached"). Pure functions: no allocation beyond
 * the caller's structs, no randomness, no printing; the same input gives
 * the same verdict.
 *
 * The model. Requests within a shot share that shot's conditions (machine
 * load, clocks, caches), so the unit of evidence is the shot, not the
 * request: each shot is summarised by the median of its requests' values
 * on a log scale, and shots are treated as draws of a random shot effect
 * (sd tau) around the engine's level. With no wall, shot 1 is one more draw,
 * so (mean of warm shots − shot 1) ÷ (tau·√(1 + 1/k)) follows Student's t
 * with k − 1 degrees of freedom (k warm shots): the test is exact for
 * normal shot effects and its false-alarm rate is the level's complement
 * (5 %) before the practical floor, which only lowers it. tau is estimated
 * from the warm shots' spread, but never below what the requests' own
 * spread implies for a shot median (π/2 · σ²_within ÷ n, σ_within pooled
 * from each shot's 1.4826 × MAD, robust as the median is), so warm shots
 * that agree by chance do not make a tiny band.
 *
 * With a prior (the warm shots' sd pooled from earlier runs of the same
 * series, stored by caliper: include/caliper/noise.h), s² is pooled with it,
 * ((k − 1)·s² + df_p·s_p²) ÷ (k − 1 + df_p), and t has k − 1 + df_p df: the
 * test stays exact when the shot-to-shot sd is the same across the runs, and
 * its critical value falls from 3.18 (k = 4, no prior) towards 2.0. A prior
 * the run's own warm shots contradict (s² ÷ s_p² beyond F's 95th
 * percentile: a busier machine now than when the prior was measured) is
 * not used.
 *
 * Ownership: inputs are the caller's and are not kept. */
#ifndef CALIPER_JUDGE_H
#define CALIPER_JUDGE_H
#include <stddef.h>

#define CAL_JUDGE_FLOOR        0.03  /* default practical floor (relative) */
#define CAL_JUDGE_MIN_REQUESTS 3     /* default: fewer ok requests in a shot: cannot judge */
#define CAL_JUDGE_MAX_SHOTS    512   /* shots beyond this are ignored */
#define CAL_JUDGE_SHOTS_HINT   5     /* what "run --shots N" recommends */
#define CAL_JUDGE_EQUIV        0.10  /* default bound a "no wall" sentence claims (relative) */
#define CAL_JUDGE_FIRST_MIN_DF 3     /* a first-shot history with fewer df is not used */

/* One shot of a series: its per-request values (tok/s, ms, ...), in any
 * order; NAN and values <= 0 are skipped (failed requests). */
typedef struct cal_judge_shot {
    int           index;     /* shot number as printed (1-based, warm-ups counted) */
    const double *v;         /* [n] per-request values */
    size_t        n;
} cal_judge_shot;

typedef enum cal_judge_first {
    CAL_JUDGE_FIRST_UNKNOWN = 0, /* a URL target: caliper cannot know shot 1 was cold */
    CAL_JUDGE_FIRST_COLD,        /* caliper started the engine just before shot 1 */
    CAL_JUDGE_ALL_COLD,          /* every shot was a fresh process (--cold) */
    CAL_JUDGE_FIRST_WARM         /* shot 1 followed a warm-up shot */
} cal_judge_first;

typedef struct cal_judge_opts {
    double floor;            /* practical floor, relative: smaller effects are never
                                called; <= 0 → CAL_JUDGE_FLOOR */
    double level;            /* CI level; 0 → 0.95 (the step decision's level) */
    int    lower_better;     /* 0: throughput (higher is better); 1: latency */
    cal_judge_first first;   /* what caliper knows about shot 1 */
    size_t min_requests;     /* 0 → CAL_JUDGE_MIN_REQUESTS */
    const char *what;        /* the quantity for the text ("per-request tok/s"); NULL ok */
    double prior_sd;         /* shot-to-shot sd (log) pooled from earlier runs of this
                                series (noise.h); used only with prior_df > 0 */
    double prior_df;         /* its degrees of freedom; 0: no prior */
    double first_sd;         /* how far the first measured shot lands from its run's
                                warm shots on earlier runs of this series (root mean
                                square, log; noise.h); used only with first_df > 0 and
                                a first shot that is not cold. It stands in for the
                                first shot's own variance where larger than the warm
                                shots': a first shot after the warm-up swings more
                                than later ones (4 of 70 steady quiet series called
                                it a drop with the warm shots' spread alone), so it
                                only ever widens the band */
    double first_df;         /* runs behind it; 0: none. Under CAL_JUDGE_FIRST_MIN_DF
                                it is not used: a spread known from two runs would
                                widen the band by a t quantile of 12.7 and
                                leave the verdict deaf */
    int    first_left_out;   /* stored runs left out of first_sd as walls (noise.h);
                                for the text only */
    double equivalence;      /* the largest change a "no wall" claims to rule out,
                                relative; <= 0 → CAL_JUDGE_EQUIV. Such a claim is an
                                equivalence test (two one-sided tests at the level's
                                complement ÷ 2 each: the (2·level − 1) CI inside
                                ±equivalence) */
} cal_judge_opts;

typedef enum cal_judge_kind {
    CAL_JUDGE_CANNOT = 0,    /* too little evidence: why[] says what to run */
    CAL_JUDGE_STEADY,        /* no change larger than the equivalence bound (its
                                (2·level − 1) CI lies inside ±equivalence) */
    CAL_JUDGE_SMALL,         /* a significant difference under the floor, and none
                                larger than the equivalence bound: not called */
    CAL_JUDGE_SLOWER,        /* later shots worse than shot 1 (a wall after shot 1) */
    CAL_JUDGE_FASTER,        /* later shots better than shot 1 (shot 1 was slow) */
    CAL_JUDGE_TREND          /* the warm shots themselves move monotonically */
} cal_judge_kind;
const char *cal_judge_kind_name(cal_judge_kind k);  /* "cannot_judge", "steady", ... */

typedef struct cal_judge_verdict {
    cal_judge_kind kind;
    int    judged;           /* kind != CAL_JUDGE_CANNOT */
    int    directional;      /* SLOWER, FASTER or TREND: a claim the user should act on */
    int    first_shot;       /* index of shot 1 of the series */
    int    later_first, later_last;   /* index range of the warm shots */
    int    k;                /* warm shots with enough requests */
    size_t n_requests;       /* requests used, all shots */
    size_t min_shot_requests;/* the fewest in one shot */
    double first, later;     /* shot 1's median and the warm shots' geometric mean
                                of medians (value units) */
    double effect;           /* later ÷ first − 1 (−0.14: warm 14 % lower) */
    double lo, hi;           /* CI of effect at opts.level */
    double t, df, p;         /* step statistic, its df (k − 1), two-sided p */
    double tau;              /* shot-to-shot sd used (log scale) */
    double tau_within;       /* the floor on it from the requests' spread */
    double prior_df;         /* df the prior added (0 none) */
    double first_sd;         /* the first shots' spread that widened the band
                                (opts.first_sd); 0 when it did not */
    double widen;            /* the band's half-width over what the run's own shots
                                give: 1 when history did not widen it */
    double equiv;            /* the equivalence bound used (relative) */
    double eq_lo, eq_hi;     /* the (2·level − 1) CI of effect the equivalence test
                                reads (90 % at the 95 % level) */
    int    prior_rejected;   /* the warm shots spread more than the prior at 5 %
                                (F test): the prior was not used */
    double half1, half2;     /* effect of each half of the warm shots (NAN k < 2) */
    double slope, slope_lo, slope_hi; /* trend of the warm shots, relative per shot
                                (NAN when k < 4); CI at opts.level */
    int    trend_sig;        /* the slope excludes 0 at 99 % (the trend's decision) */
    double floor, level;
    char   why[400];         /* CANNOT: the reason and what to run; else "" */
    char   text[512];        /* the verdict in words, always set */
} cal_judge_verdict;

/* Judge shots[0] (shot 1 of the series) against shots[1..n). Always fills
 * *out; returns out->judged. Three answers, each with a known error rate:
 * a wall (a step beyond the floor whose CI excludes 0: a false alarm at
 * most 1 − level), no wall larger than the equivalence bound (its
 * (2·level − 1) CI inside ±bound: a wrong claim at most (1 − level) ÷ 2
 * when the true change is beyond the bound), or cannot judge. Decisions:
 *   CANNOT  fewer than 2 warm shots, a shot with fewer than min_requests
 *           valid values, warm halves on opposite sides of shot 1 each by
 *           the floor or more, or a step whose two warm halves disagree (one
 *           half under half the floor or on the other side) with no trend;
 *   TREND   k >= 4 and the warm shots' log-linear slope excludes 0 at 99 %
 *           and moves at least the floor from first to last warm shot;
 *   SLOWER/FASTER  the step CI excludes 0 and |effect| >= floor;
 *   SMALL   the CI excludes 0 but |effect| < floor, and the equivalence CI
 *           lies inside ±equivalence;
 *   STEADY  the CI holds 0 and the equivalence CI lies inside ±equivalence;
 *   CANNOT  otherwise: the band is too wide to rule out a wall of the bound's
 *           size; why[] gives the band and what would narrow it.
 * Texts: "shots 2–5 run 14.0 % below shot 1, 95 % CI 9.1–18.6 % (per-request
 * tok/s): quote warm figures, not shot 1"; "cannot judge: 1 warm shot; run
 * --shots 5". */
int cal_judge_shots(const cal_judge_shot *shots, size_t n, const cal_judge_opts *opts,
                    cal_judge_verdict *out);

/* The shot-level core, for series with one number per shot: z[0] shot 1,
 * z[1..n) the warm shots, on a log scale; tau_within the floor on the
 * shot-to-shot sd (0 when unknown). Fills the step and trend fields of
 * *out (no text, no CANNOT reasons beyond k < 2). Exposed for the clock
 * verdict and for tests. */
void cal_judge_step(const double *z, size_t n, double tau_within, double level,
                    cal_judge_verdict *out);
/* cal_judge_step with a pooled prior on the shot-to-shot sd (prior_df 0:
 * none) and the degrees of freedom of tau_within (0: none; it is then only a
 * floor). With both 0 it is cal_judge_step. */
void cal_judge_step_prior(const double *z, size_t n, double tau_within, double tau_within_df,
                          double prior_sd, double prior_df, double level,
                          cal_judge_verdict *out);

/* The step's critical value at two-sided level two_sided (0.95: the step,
 * 0.90: the equivalence test's one-sided 95 %) on df degrees of freedom,
 * when shot effects are heavy-tailed: Student's t with
 * CAL_JUDGE_SHOT_TAIL_DF df, as real steady series showed (judge.c); never
 * below the normal model's t quantile. */
#define CAL_JUDGE_SHOT_TAIL_DF 2
double cal_judge_heavy_quantile(double two_sided, double df);

/* A comparison of two sides from their per-shot values (one number per
 * shot, value units > 0): the ratio mean_b ÷ mean_a of geometric means with
 * a Welch t CI on the log scale, shots as the replicates. Needs >= 2 shots
 * per side (else returns 0 and leaves *lo and *hi NAN). extra_sd: a run-to-run
 * sd (log scale) known from elsewhere, added in quadrature per side; 0 none. */
int cal_judge_ratio_ci(const double *a, size_t na, const double *b, size_t nb,
                       double extra_sd, double level, double *ratio, double *lo, double *hi);

#endif
