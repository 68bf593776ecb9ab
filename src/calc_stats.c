/* caliper calc — rounds and samples: speculative decoding, the paired
 * quality check, Welch's two-sample t, a median with its bootstrap CI. A
 * table of calculators (calc.h); cmd_calc.c runs them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "caliper/csv.h"
#include "caliper/error.h"
#include "caliper/formulas.h"
#include "caliper/stats.h"
#include "calc.h"

static int c_spec(calc_ctx *c)
{
    double E, s, be;
    int ex, rc;
    if ((rc = cal_f_spec_tokens(in(c, "alpha"), in(c, "k"), &E, &c->bad))) return rc;
    if ((rc = cal_f_spec_speedup(in(c, "alpha"), in(c, "k"), in(c, "t-decode"),
                                 in(c, "t-verify"), in(c, "t-draft"), &s, &c->bad)))
        return rc;
    if ((rc = cal_f_spec_break_even(in(c, "k"), in(c, "t-decode"), in(c, "t-verify"),
                                    in(c, "t-draft"), &be, &ex, &c->bad)))
        return rc;
    put(c, "tokens_per_round", CAL_U_RATIO, E);
    put(c, "speedup", CAL_U_RATIO, s);
    put(c, "baseline_tok_per_s", CAL_U_TOKRATE, 1 / in(c, "t-decode"));
    put(c, "predicted_tok_per_s", CAL_U_TOKRATE, s / in(c, "t-decode"));
    put(c, "round_cost_in_steps", CAL_U_RATIO,
        (in(c, "t-verify") + in(c, "k") * in(c, "t-draft")) / in(c, "t-decode"));
    if (ex) put(c, "break_even_alpha", CAL_U_RATIO, be);
    else put_null(c, "break_even_alpha");
    return CAL_OK;
}
static void e_spec(calc_ctx *c)
{
    double a = in(c, "alpha"), k = in(c, "k"), s = out(c, "speedup");
    say(c, "E = (1 − α^(k+1)) ÷ (1 − α) = (1 − %s^%s) ÷ (1 − %s) = %s tokens per round\n",
        N(a), N(k + 1), N(a), R(out(c, "tokens_per_round")));
    say(c, "speedup = E × t_decode ÷ (t_verify(k+1) + k × t_draft)\n"
           "        = %s × %s ÷ (%s + %s × %s) = %s  (%s → %s tok/s)\n",
        R(out(c, "tokens_per_round")), Q(CAL_U_TIME, in(c, "t-decode")),
        Q(CAL_U_TIME, in(c, "t-verify")), N(k), Q(CAL_U_TIME, in(c, "t-draft")), R(s),
        R(out(c, "baseline_tok_per_s")), R(out(c, "predicted_tok_per_s")));
    double be = out(c, "break_even_alpha");
    if (isnan(be)) say(c, "break-even α: none — even α → 1 (E = k + 1 = %s) loses\n", N(k + 1));
    else say(c, "break-even α (speedup = 1): %s\n", R(be));
    if (isnan(be))
        mean_(c, "A round costs %s decode steps but can yield at most %s tokens: with this "
                 "draft and verify cost speculative decoding loses at any acceptance — make "
                 "verification cheaper or draft fewer tokens.",
              R3(out(c, "round_cost_in_steps")), N(k + 1));
    else if (s >= 1)
        mean_(c, "At acceptance %s speculative decoding wins %s× (break-even at α = %s).",
              N(a), R3(s), R3(be));
    else
        mean_(c, "At acceptance %s speculative decoding loses (%s×), even with identical "
                 "output: it pays only above α = %s with these costs.", N(a), R3(s), R3(be));
}

/* Read one or two columns of numbers from a file named by flag f. */
static int read_scores(calc_ctx *c, const char *f, const char *col, double *x, size_t *n)
{
    char w[320];
    cal_csv_col cc = {col, CAL_U_RATIO, NULL, x};
    int rc = cal_csv_columns_file(path(c, f), &cc, 1, SCORES_CAP, n, w, sizeof w);
    if (rc) return why(c, f, "%s", w[0] ? w : cal_strerror(rc));
    return CAL_OK;
}

static int c_quality(calc_ctx *c)
{
    int rc = CAL_EINVAL;
    double level = in(c, "level");
    if (!(level > 0 && level < 1)) return why(c, "level", "must lie strictly between 0 and 1");
    double *a = malloc(SCORES_CAP * sizeof *a), *b = malloc(SCORES_CAP * sizeof *b);
    double *d = malloc(SCORES_CAP * sizeof *d);
    size_t na = 0, nb = 0;
    if (!a || !b || !d) { rc = CAL_ENOMEM; goto out; }
    if (given(c, "pairs")) {
        if (given(c, "a") || given(c, "b")) {
            rc = why(c, "a", "cannot be given with --pairs: give one file of pairs or two files");
            goto out;
        }
        if ((rc = read_scores(c, "pairs", "1", a, &na)) || (rc = read_scores(c, "pairs", "2", b, &nb)))
            goto out;
    } else {
        if (!given(c, "a") || !given(c, "b")) {
            rc = why(c, given(c, "a") ? "b" : "a", "is required (or --pairs FILE with two "
                     "columns)");
            goto out;
        }
        if ((rc = read_scores(c, "a", "1", a, &na)) || (rc = read_scores(c, "b", "1", b, &nb)))
            goto out;
        if (na != nb) {
            rc = why(c, "b", "has %zu scores, --a has %zu: a paired check needs one score per "
                     "question in each", nb, na);
            goto out;
        }
    }
    if (na < 2) { rc = why(c, given(c, "pairs") ? "pairs" : "a", "needs at least 2 pairs"); goto out; }
    cal_ttest t;
    rc = cal_stats_t_paired(a, b, na, level, d, &t);
    if (rc == CAL_ERANGE) {
        rc = why(c, given(c, "pairs") ? "pairs" : "b", "every pair differs by the same %s: no "
                 "spread, so no t statistic", N(b[0] - a[0]));
        goto out;
    }
    if (rc) { c->bad = given(c, "pairs") ? "pairs" : "a"; goto out; }
    put(c, "n", CAL_U_COUNT, (double)t.n);
    put(c, "mean_a", CAL_U_RATIO, cal_stats_mean(a, na));
    put(c, "mean_b", CAL_U_RATIO, cal_stats_mean(b, nb));
    put(c, "mean_diff", CAL_U_RATIO, t.mean);
    put(c, "sd_diff", CAL_U_RATIO, t.sd);
    put(c, "t", CAL_U_RATIO, t.t);
    put(c, "df", CAL_U_RATIO, t.df);
    put(c, "p", CAL_U_RATIO, t.p);
    put(c, "ci_lo", CAL_U_RATIO, t.lo);
    put(c, "ci_hi", CAL_U_RATIO, t.hi);
    put(c, "ci_half", CAL_U_RATIO, t.half);
    if (given(c, "identical")) {
        size_t ni = 0;
        if ((rc = read_scores(c, "identical", "1", d, &ni))) goto out;
        /* two columns: the judge's two scores of the same answer */
        double *d2 = a;
        size_t n2 = 0;
        char w[320];
        cal_csv_col cc = {"2", CAL_U_RATIO, NULL, d2};
        if (cal_csv_columns_file(path(c, "identical"), &cc, 1, SCORES_CAP, &n2, w, sizeof w) ==
                CAL_OK && n2 == ni)
            for (size_t i = 0; i < ni; i++) d[i] = d2[i] - d[i];
        if (ni < 2) { rc = why(c, "identical", "needs at least 2 identical pairs"); goto out; }
        cal_ttest z;
        rc = cal_stats_t_one(d, ni, level, &z);
        if (rc == CAL_ERANGE) {
            put(c, "identical_n", CAL_U_COUNT, (double)ni);
            put(c, "identical_mean", CAL_U_RATIO, d[0]);
            put_null(c, "identical_ci_half");
            rc = CAL_OK;
        } else if (rc) {
            c->bad = "identical";
            goto out;
        } else {
            put(c, "identical_n", CAL_U_COUNT, (double)ni);
            put(c, "identical_mean", CAL_U_RATIO, z.mean);
            put(c, "identical_ci_half", CAL_U_RATIO, z.half);
        }
    }
    rc = CAL_OK;
out:
    free(a); free(b); free(d);
    return rc;
}
static void e_quality(calc_ctx *c)
{
    double lvl = in(c, "level") * 100;
    say(c, "n = %s pairs · mean %s → %s\n", N(out(c, "n")), R(out(c, "mean_a")),
        R(out(c, "mean_b")));
    say(c, "mean difference d̄ = %s, sd = %s\n", R(out(c, "mean_diff")), R(out(c, "sd_diff")));
    say(c, "t = d̄ ÷ (sd ÷ √n) = %s ÷ (%s ÷ √%s) = %s (df %s, p = %s)\n", R(out(c, "mean_diff")),
        R(out(c, "sd_diff")), N(out(c, "n")), num_(out(c, "t"), 3, 0), N(out(c, "df")),
        num_(out(c, "p"), 3, 0));
    say(c, "%s %% CI: %s ± %s = [%s, %s]\n", N(lvl), R(out(c, "mean_diff")), R(out(c, "ci_half")),
        R(out(c, "ci_lo")), R(out(c, "ci_hi")));
    int zero_in = out(c, "ci_lo") <= 0 && out(c, "ci_hi") >= 0;
    if (zero_in)
        mean_(c, "No detectable change: the %s %% CI of the paired difference (±%s) contains "
                 "0.", N(lvl), R3(out(c, "ci_half")));
    else
        mean_(c, "A real change of %s (CI %s to %s): the CI of the paired difference excludes "
                 "0.", R3(out(c, "mean_diff")), R3(out(c, "ci_lo")), R3(out(c, "ci_hi")));
    if (given(c, "identical")) {
        double im = out(c, "identical_mean"), ih = out(c, "identical_ci_half");
        if (isnan(ih))
            say(c, "judge noise: %s identical pairs, every difference %s\n",
                N(out(c, "identical_n")), R(im));
        else
            say(c, "judge noise: %s identical pairs, mean %s ± %s\n", N(out(c, "identical_n")),
                R(im), R(ih));
        if (fabs(im) >= fabs(out(c, "mean_diff")) && im != 0)
            mean_(c, " The judge scores byte-identical answers %s apart on average — as large "
                     "as the effect itself: the judge's noise, not the change, may be what you "
                     "see.", R3(im));
        else
            mean_(c, " Identical answers score %s apart (should be 0): %s.", R3(im),
                  (isnan(ih) ? im == 0 : fabs(im) <= ih) ? "the judge shows no bias"
                                                         : "the judge is biased");
    }
}

static int c_welch(calc_ctx *c)
{
    double level = in(c, "level");
    if (!(level > 0 && level < 1)) return why(c, "level", "must lie strictly between 0 and 1");
    double *a = malloc(SCORES_CAP * sizeof *a), *b = malloc(SCORES_CAP * sizeof *b);
    size_t na = 0, nb = 0;
    int rc = !a || !b ? CAL_ENOMEM : CAL_OK;
    if (!rc) rc = read_scores(c, "a", "1", a, &na);
    if (!rc) rc = read_scores(c, "b", "1", b, &nb);
    if (!rc && na < 2) rc = why(c, "a", "needs at least 2 values");
    if (!rc && nb < 2) rc = why(c, "b", "needs at least 2 values");
    cal_ttest t;
    if (!rc) {
        rc = cal_stats_t_welch(a, na, b, nb, level, &t);
        if (rc == CAL_ERANGE)
            rc = why(c, "b", "and --a both have zero spread and different means: no t statistic");
        else if (rc) c->bad = "a";
    }
    if (!rc) {
        put(c, "n_a", CAL_U_COUNT, (double)na);
        put(c, "n_b", CAL_U_COUNT, (double)nb);
        put(c, "mean_a", CAL_U_RATIO, cal_stats_mean(a, na));
        put(c, "mean_b", CAL_U_RATIO, cal_stats_mean(b, nb));
        put(c, "diff", CAL_U_RATIO, t.mean);
        put(c, "t", CAL_U_RATIO, t.t);
        put(c, "df", CAL_U_RATIO, t.df);
        put(c, "p", CAL_U_RATIO, t.p);
        put(c, "ci_lo", CAL_U_RATIO, t.lo);
        put(c, "ci_hi", CAL_U_RATIO, t.hi);
    }
    free(a); free(b);
    return rc;
}
static void e_welch(calc_ctx *c)
{
    say(c, "Welch: diff = mean(b) − mean(a) = %s − %s = %s\n", R(out(c, "mean_b")),
        R(out(c, "mean_a")), R(out(c, "diff")));
    say(c, "t = diff ÷ √(s_a²/n_a + s_b²/n_b) = %s (df %s, p = %s), %s %% CI [%s, %s]\n",
        num_(out(c, "t"), 3, 0), num_(out(c, "df"), 4, 1), num_(out(c, "p"), 3, 0),
        N(in(c, "level") * 100), R(out(c, "ci_lo")), R(out(c, "ci_hi")));
    if (out(c, "ci_lo") <= 0 && out(c, "ci_hi") >= 0)
        mean_(c, "No detectable difference between the two independent samples (the CI "
                 "contains 0). If the same items were scored twice, use calc quality (paired): "
                 "it is far more sensitive.");
    else
        mean_(c, "The samples differ by %s (CI %s to %s).", R3(out(c, "diff")),
              R3(out(c, "ci_lo")), R3(out(c, "ci_hi")));
}

static int c_median(calc_ctx *c)
{
    double level = in(c, "level");
    if (!(level > 0 && level < 1)) return why(c, "level", "must lie strictly between 0 and 1");
    double reps = in(c, "reps");
    if (reps < 100 || reps > 100000 || reps != floor(reps))
        return why(c, "reps", "must be a whole number in 100..100000");
    double seed = in(c, "seed");   /* checked before it becomes a uint64_t */
    if (!(seed >= 0 && seed <= 9007199254740992.0) || seed != floor(seed))
        return why(c, "seed", "must be a whole number in 0..2^53");
    double *x = malloc(SCORES_CAP * sizeof *x);
    size_t n = 0;
    int rc = x ? read_scores(c, "file", "1", x, &n) : CAL_ENOMEM;
    if (!rc && n == 0) rc = why(c, "file", "holds no values");
    double *scratch = NULL;
    if (!rc) {
        size_t len = n + (size_t)reps;
        scratch = malloc(len * sizeof *scratch);
        double m, lo, hi;
        rc = !scratch ? CAL_ENOMEM : cal_stats_median_ci(x, n, level, (size_t)reps,
                                                         (uint64_t)seed, scratch, len,
                                                         &m, &lo, &hi);
        if (!rc) {
            put(c, "n", CAL_U_COUNT, (double)n);
            put(c, "median", CAL_U_RATIO, m);
            put(c, "ci_lo", CAL_U_RATIO, lo);
            put(c, "ci_hi", CAL_U_RATIO, hi);
            put(c, "p10", CAL_U_RATIO, cal_stats_percentile(x, n, 10));
            put(c, "p90", CAL_U_RATIO, cal_stats_percentile(x, n, 90));
        } else if (rc != CAL_ENOMEM) {
            c->bad = "file";
        }
    }
    free(x); free(scratch);
    return rc;
}
static void e_median(calc_ctx *c)
{
    say(c, "median of %s values = %s (percentiles: %s)\n", N(out(c, "n")), R(out(c, "median")),
        CAL_STATS_PERCENTILE_METHOD);
    say(c, "%s %% bootstrap CI (%s resamples, seed %s): [%s, %s]; p10 %s, p90 %s\n",
        N(in(c, "level") * 100), N(in(c, "reps")), N(in(c, "seed")), R(out(c, "ci_lo")),
        R(out(c, "ci_hi")), R(out(c, "p10")), R(out(c, "p90")));
    mean_(c, "Quote the median with its CI; two medians whose CIs overlap are not shown to "
             "differ.");
}

static const calc_def DEFS[] = {
    {"spec-decode", "speculative decoding: tokens per round, speedup, break-even acceptance",
     "caliper calc spec-decode --alpha 0.6 --k 4 --t-decode 10.87ms --t-verify 14ms --t-draft 2ms",
     {NUMF("alpha", CAL_U_RATIO, NULL, 1, NAN_, "an acceptance rate in [0, 1) (at 1 the formula "
           "is 0/0)", "per-token acceptance α"),
      NUMF("k", CAL_U_COUNT, NULL, 1, NAN_, "a whole number in 1..64", "drafted tokens per round"),
      NUMF("t-decode", CAL_U_TIME, "ms", 1, NAN_, POSR, "one normal decode step"),
      NUMF("t-verify", CAL_U_TIME, "ms", 1, NAN_, POSR, "one target pass over k + 1 tokens"),
      NUMF("t-draft", CAL_U_TIME, "ms", 1, NAN_, NNEG, "one draft step"),
      END},
     c_spec, e_spec},
    {"quality", "paired quality check: mean difference, t, CI, judge noise from identical pairs",
     "caliper calc quality --a before.txt --b after.txt --identical same.txt",
     {{"a", F_PATH, 0, NULL, 0, NAN_, NULL, "scores before, one per line (or a CSV column 1)"},
      {"b", F_PATH, 0, NULL, 0, NAN_, NULL, "scores after, same questions, same order"},
      {"pairs", F_PATH, 0, NULL, 0, NAN_, NULL, "one file with two columns: before, after"},
      {"identical", F_PATH, 0, NULL, 0, NAN_, NULL,
       "judge scores of byte-identical answer pairs: differences, or two columns"},
      NUMF("level", CAL_U_RATIO, NULL, 0, 0.95, "in (0, 1)", "CI level (default 0.95)"),
      END},
     c_quality, e_quality},
    {"two-sample", "Welch's t for two independent samples (unequal variances)",
     "caliper calc two-sample --a old.txt --b new.txt",
     {{"a", F_PATH, 0, NULL, 1, NAN_, NULL, "first sample, one value per line"},
      {"b", F_PATH, 0, NULL, 1, NAN_, NULL, "second sample"},
      NUMF("level", CAL_U_RATIO, NULL, 0, 0.95, "in (0, 1)", "CI level (default 0.95)"),
      END},
     c_welch, e_welch},
    {"median", "median with a seeded bootstrap CI of values in a file",
     "caliper calc median --file tps.txt",
     {{"file", F_PATH, 0, NULL, 1, NAN_, NULL, "values, one per line (or CSV column 1)"},
      NUMF("level", CAL_U_RATIO, NULL, 0, 0.95, "in (0, 1)", "CI level (default 0.95)"),
      NUMF("reps", CAL_U_COUNT, NULL, 0, 2000, "100..100000", "bootstrap resamples (2000)"),
      NUMF("seed", CAL_U_COUNT, NULL, 0, 1, "a whole number in 0..2^53",
           "random seed (1): same seed, same CI"),
      END},
     c_median, e_median},
};
const calc_family calc_stats = { DEFS, sizeof DEFS / sizeof DEFS[0] };
