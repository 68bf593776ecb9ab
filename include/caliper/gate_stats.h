/* caliper gate statistics — the tests behind `caliper gate` (docs/ci.md),
 * pure functions: no allocation beyond the caller's scratch, no randomness,
 * no printing; the same input gives the same answer.
 *
 * A change is a log ratio, log(candidate ÷ baseline). Two designs:
 *   paired    one `run --ab` run: each shot of A has its B twin at the same
 *             shot index (the order alternates shot by shot, so drift hits
 *             both); the evidence is the n paired log ratios. They are
 *             tested with Wilcoxon's signed-rank test and estimated by the
 *             Hodges–Lehmann median of the Walsh averages, with the CI those
 *             tests invert: exact for any symmetric distribution of the
 *             ratios, so a burst of other work that moves one shot counts
 *             as one rank, not as a variance that deafens the test (on the
 *             shared machine the ratios' sd ran about twice their MAD).
 *   runs      two separate runs: one level each (log), their difference
 *             tested with Student's t on a run-to-run sd measured elsewhere
 *             (the stored repeats of the protocol), se and df given.
 * Both give one-sided p values against no change and the (1 − 2α) CI that
 * the two one-sided tests of an equivalence claim read (TOST, as the shot
 * verdict's "no wall larger than X": include/caliper/judge.h).
 *
 * Ownership: inputs are the caller's and are not kept. */
#ifndef CALIPER_GATE_STATS_H
#define CALIPER_GATE_STATS_H
#include <stddef.h>

#define CAL_GATE_ALPHA     0.05   /* default family-wise false-alarm rate */
#define CAL_GATE_MAX_PAIRS 1024   /* pairs beyond this are ignored */
#define CAL_GATE_EXACT_MAX 400    /* signed-rank null distribution exact up to here */

typedef enum cal_gate_method {
    CAL_GATE_SIGNED_RANK = 0,   /* paired: Wilcoxon signed-rank, Hodges–Lehmann */
    CAL_GATE_T                  /* separate runs: t on the levels' difference */
} cal_gate_method;
const char *cal_gate_method_name(cal_gate_method m);   /* "signed-rank", "t" */

/* One test's evidence, on the log scale (log(candidate ÷ baseline)). */
typedef struct cal_gate_stat {
    cal_gate_method method;
    size_t n;            /* pairs used (zeros dropped), or runs behind the noise */
    double est;          /* Hodges–Lehmann median, or the levels' difference */
    double lo, hi;       /* its (1 − 2α) CI; -INFINITY / INFINITY when n is too
                            small for the level (2^-n > α for the signed-rank) */
    double alpha;        /* the one-sided level the CI was made at */
    double p_up;         /* one-sided p of "the candidate is higher" (H0: not) */
    double p_down;       /* one-sided p of "the candidate is lower" */
    double se, df;       /* t: its standard error and df; NAN for signed-rank */
    double spread;       /* signed-rank: 1.4826 × MAD of the ratios (log), the
                            noise a reader compares the bound with; t: se */
    int    exact;        /* signed-rank: exact null distribution (no ties,
                            n <= CAL_GATE_EXACT_MAX); 0: normal approximation */
    size_t min_n;        /* the fewest pairs whose CI can be finite at alpha */
} cal_gate_stat;

/* The paired test of d[0..n) (log ratios; non-finite values skipped, exact
 * zeros dropped as Wilcoxon did). scratch: cal_gate_scratch_len(n) doubles
 * (the Walsh averages and the null distribution), n capped at
 * CAL_GATE_MAX_PAIRS. CAL_EINVAL: bad alpha (outside (0, 0.5)), NULL;
 * CAL_ETOOBIG: scratch too small. With fewer than 2 pairs est is NAN, the
 * CI unbounded and both p are 1. */
int cal_gate_signed_rank(const double *d, size_t n, double alpha, double *scratch,
                         size_t scratch_len, cal_gate_stat *out);
/* The scratch cal_gate_signed_rank needs for n pairs (doubles). */
size_t cal_gate_scratch_len(size_t n);

/* The separate-runs test: est = level_b − level_a (log), se > 0, df > 0.
 * CAL_EINVAL for a non-finite est, se <= 0, df <= 0 or a bad alpha. */
int cal_gate_t(double est, double se, double df, double alpha, cal_gate_stat *out);

/* Holm's step-down adjustment of p[0..n) into adj[0..n) (may alias p):
 * adj = max over the sorted prefix of min(1, (n − rank + 1)·p). Rejecting
 * where adj <= α controls the family-wise error at α for any dependence
 * between the tests (Holm 1979). NAN p counts as 1. scratch: n size_t. */
void cal_gate_holm(const double *p, size_t n, double *adj, size_t *scratch);

/* The four answers for one metric. */
typedef enum cal_gate_kind {
    CAL_GATE_CANNOT = 0,     /* too little evidence either way: why says what to run */
    CAL_GATE_NO_CHANGE,      /* the (1 − 2α) CI inside ±bound: no change larger
                                than the bound (two one-sided tests) */
    CAL_GATE_REGRESSION,     /* worse than no change at the Holm-adjusted level,
                                and by more than the bound */
    CAL_GATE_IMPROVEMENT     /* better, likewise */
} cal_gate_kind;
const char *cal_gate_kind_name(cal_gate_kind k);  /* "cannot_judge", "no_change",
                                                     "regression", "improvement" */

/* Decide one metric: s its evidence, lower_better 1 for latency, bound the
 * relative change that fails (0.05: worse by more than 5 %; in (0, 1)),
 * p_worse_adj and p_better_adj the Holm-adjusted one-sided p values of its
 * family (cal_gate_holm), alpha the family-wise level.
 *   REGRESSION   p_worse_adj <= alpha and the estimate worse than the bound;
 *   IMPROVEMENT  p_better_adj <= alpha and the estimate better than the bound;
 *   NO_CHANGE    the CI inside (log(1 − bound), log(1 + bound));
 *   CANNOT       otherwise. */
cal_gate_kind cal_gate_decide(const cal_gate_stat *s, int lower_better, double bound,
                              double p_worse_adj, double p_better_adj, double alpha);

/* The paired shots that would make a CANNOT judgeable at the same noise:
 * the CI's half-width shrinks as 1/√n, so the pairs at which it would fit
 * inside the bound around the estimate (or exclude no change where the
 * estimate lies beyond the bound). 0 when no number of pairs would (the
 * estimate sits on the bound) or the CI is unbounded (then s->min_n). */
size_t cal_gate_pairs_needed(const cal_gate_stat *s, double bound);

#endif
