/* caliper gate — the regression gate a CI job acts on (docs/ci.md): per
 * metric between a baseline and a candidate, one of four answers with a
 * known error rate, and an overall pass / fail / cannot judge.
 *
 * Inputs, in the order of preference:
 *   one `run --ab` run (stored, or its `caliper export --json` file): the
 *     paired design; each quoted shot of A meets its B twin (gate_stats.h);
 *   two stored runs (ids or labels) of one protocol: the separate-runs
 *     design; each run is one draw of the run-to-run noise, which comes from
 *     the stored repeats of the two runs' shot series (at least 3 runs): the
 *     robust spread of consecutive runs' levels, so a real step in the
 *     history counts once, not as noise;
 *   result files (`report --format json`, exports, foreign tools' files):
 *     read and checked like stored runs, but a file brings no history, so
 *     two single-run files are "cannot judge" with that reason.
 * The protocols must match: every quoted cell of one side needs a cell of
 * the other with the same fingerprint (fingerprint.h), or the gate refuses
 * and names the fields that differ.
 *
 * Several metrics (and cells) are several tests: a regression is called
 * only where Holm's step-down procedure over the family rejects "no worse"
 * at α (5 % family-wise by default) and the estimate is worse than the
 * bound; "no change larger than the bound" is each metric's two one-sided
 * tests at α, and the gate passes only when every metric passes, an
 * intersection-union test whose error is at most α without adjustment.
 *
 * Bounds: `--fail` specs like "decode_tps<-3%,ttft_p99>+10%": a schema key
 * (schema.h), its series alias ("ttft_p99" for p99_ttft_ms) or a unique
 * prefix ("decode_tps"); "<-X%" for a metric where higher is better, ">+X%"
 * where lower is. Defaults per box: cal_gate_default_bounds.
 *
 * Ownership: cal_gate_input and cal_gate_outcome own their arrays; free
 * them with cal_gate_input_free / cal_gate_outcome_free (NULL-ing the
 * caller's pointer). Writers append to a caller's cal_buf. */
#ifndef CALIPER_GATE_H
#define CALIPER_GATE_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/buf.h"
#include "caliper/gate_stats.h"
#include "caliper/report.h"

#define CAL_GATE_MAX_BOUNDS 16
#define CAL_GATE_MAX_SHOTS  512

/* ---- bounds ---------------------------------------------------------------- */

typedef struct cal_gate_bound {
    cal_metric metric;
    double bound;            /* relative, in (0, 1): a change worse than this fails */
    char   spec[64];         /* as written ("decode_tps<-3%") or the default's spelling */
} cal_gate_bound;

typedef enum cal_gate_box { CAL_GATE_BOX_CPU = 0, CAL_GATE_BOX_GPU } cal_gate_box;
const char *cal_gate_box_name(cal_gate_box b);   /* "cpu", "gpu" */
int cal_gate_box_parse(const char *s, cal_gate_box *out);   /* CAL_EINVAL */

/* The documented defaults of a box (docs/ci.md) into out[cap]; returns how
 * many. CPU: a shared or small CPU machine; GPU: a dedicated one. */
size_t cal_gate_default_bounds(cal_gate_box box, cal_gate_bound *out, size_t cap);

/* A metric by the name a user types: its schema key, the alias of a
 * per-request statistic ("ttft_p99", "itl_p50", "e2el_p99", "tpot_p50":
 * the series key without its unit, then the statistic), or a prefix of
 * exactly one key ("decode_tps"). -1 with a message naming it (unknown, or
 * the keys an ambiguous prefix matches). */
int cal_gate_metric_find(const char *name, char *err, size_t errn);

/* Parse "KEY<-X%,KEY>+Y%" (spaces allowed around items) into out[cap].
 * CAL_EINVAL with a message naming the item and what is wrong: no
 * comparison, an unknown metric, a metric with no better direction (a
 * count, the clock), the wrong side for the metric ("ttft_p99<-10%": lower
 * is better, so a regression is an increase), a bound that is not a
 * finite percentage in (0, 100), a metric given twice, more than cap. */
int cal_gate_parse_bounds(const char *spec, cal_gate_bound *out, size_t cap, size_t *n,
                          char *err, size_t errn);
/* One bound written back as a spec ("decode_tps_median<-3%"). Returns buf. */
char *cal_gate_bound_spec(const cal_gate_bound *b, char *buf, size_t n);

/* ---- inputs ------------------------------------------------------------------ */

typedef enum cal_gate_design {
    CAL_GATE_PAIRED = 0,     /* one run --ab run */
    CAL_GATE_RUNS            /* two separate runs */
} cal_gate_design;
const char *cal_gate_design_name(cal_gate_design d);   /* "paired", "runs" */

/* One compared configuration (a quoted cell on each side). */
typedef struct cal_gate_cell {
    cal_fingerprint fp;      /* the baseline's quoted cell (column aggregate) */
    char   name[128];        /* "c1 · 256 tok · warm 2–10" */
    /* paired: per shot index, each side's value of every metric */
    size_t n_pairs;
    int    shot[CAL_GATE_MAX_SHOTS];
    double (*a)[CAL_M__N];   /* [n_pairs] baseline (A), NAN absent */
    double (*b)[CAL_M__N];   /* [n_pairs] candidate (B) */
    /* runs: each side's level (the quoted cell's value) and the run-to-run
     * noise of each metric (log sd, its df; df 0: none known) */
    double level_a[CAL_M__N], level_b[CAL_M__N];
    double noise_sd[CAL_M__N], noise_df[CAL_M__N];
} cal_gate_cell;

typedef struct cal_gate_input {
    cal_gate_design design;
    char   base_label[CAL_RES_STR], cand_label[CAL_RES_STR];
    char   base_id[64], cand_id[64];
    char   host[CAL_RES_STR], probe[CAL_RES_STR];
    int64_t base_unix, cand_unix;  /* when measured; 0 unknown */
    cal_gate_cell *cells;   size_t n_cells;
    char   noise[400];       /* runs: where the run-to-run noise came from, or
                                why there is none ("" paired) */
} cal_gate_input;

/* Load what the user typed: one ref (an --ab run in the store at db, or an
 * export file of one) or two (baseline, candidate: stored runs, labels,
 * result files). CAL_EINVAL with a message for input the gate cannot take
 * (one ref that is not an --ab run, three refs, protocols that differ: the
 * message names the fields); CAL_ENOTFOUND / CAL_EPROTO / CAL_ESTORE as the
 * loaders say. On failure *out is untouched. */
int cal_gate_load(const char *const *refs, size_t n, const char *db, cal_gate_input **out,
                  char *err, size_t errn);
void cal_gate_input_free(cal_gate_input **in);

/* ---- the decision -------------------------------------------------------------- */

typedef struct cal_gate_case {
    size_t cell;             /* index into the input's cells */
    cal_gate_bound bound;
    int    lower_better;
    cal_gate_stat stat;      /* the evidence (log scale) */
    double p_worse, p_better;          /* one-sided, raw */
    double p_worse_adj, p_better_adj;  /* Holm-adjusted over the family */
    cal_gate_kind kind;
    double base, cand;       /* the typical value of each side (value units):
                                paired, the median of its shots; runs, its level */
    double effect, lo, hi;   /* relative: candidate ÷ baseline − 1 and its CI */
    size_t need;             /* CANNOT: pairs (paired) that would judge it; 0 none */
    char   label[192];       /* "decode tok/s · c1 · 256 tok · warm 2–10" */
    char   text[600];        /* the answer in words */
} cal_gate_case;

typedef enum cal_gate_verdict {
    CAL_GATE_PASS = 0,       /* every case no change or improvement */
    CAL_GATE_FAIL,           /* a regression */
    CAL_GATE_UNDECIDED       /* no regression, but a case could not be judged */
} cal_gate_verdict;
const char *cal_gate_verdict_name(cal_gate_verdict v);  /* "pass", "fail", "cannot_judge" */

typedef struct cal_gate_outcome {
    cal_gate_design design;
    double alpha;
    cal_gate_case *cases;    size_t n_cases;
    size_t n_regression, n_improvement, n_no_change, n_cannot;
    cal_gate_verdict verdict;
    char   summary[400];     /* one line: "fail: 1 regression (decode tok/s) of 3 metrics" */
} cal_gate_outcome;

/* Judge every (cell, bound) of in: the bounds' metrics in each cell that
 * has them on both sides. alpha <= 0: CAL_GATE_ALPHA. CAL_EINVAL (no
 * bounds, alpha >= 0.5), CAL_ENOMEM. */
int cal_gate_eval(const cal_gate_input *in, const cal_gate_bound *bounds, size_t nb,
                  double alpha, cal_gate_outcome **out);
void cal_gate_outcome_free(cal_gate_outcome **o);

/* ---- outputs ------------------------------------------------------------------- */

/* GitHub-flavoured Markdown for a pull-request comment or
 * $GITHUB_STEP_SUMMARY: a heading with the verdict, one table row per case
 * (cell text escaped for tables), the protocol and how the answer was
 * reached. */
int cal_gate_write_md(const cal_gate_input *in, const cal_gate_outcome *o, cal_buf *out);
/* JUnit XML: one <testsuite> "caliper gate", one <testcase> per case
 * (classname caliper.gate.KEY); a regression is a <failure>, a case that
 * cannot be judged <skipped> (or a <failure type="cannot_judge"> when
 * cannot_fails), the sentence in <system-out>. */
int cal_gate_write_junit(const cal_gate_input *in, const cal_gate_outcome *o, int cannot_fails,
                         cal_buf *out);
/* JSON ("format": "caliper-gate"): the verdict, the inputs, per case its
 * metric key, cell, bound, answer, effect and CI, p values, n. */
int cal_gate_write_json(const cal_gate_input *in, const cal_gate_outcome *o, cal_buf *out);

#endif
