/* caliper run analysis — what a stored run means, computed once in the
 * library and rendered by every output (the terminal, `caliper run`'s final
 * print, export JSON/CSV, the report, compare): the groups (one workload
 * configuration across shots), which shots each group quotes, the pooled
 * summary of those shots, and the verdicts as data.
 *
 * Quoting (SPEC 1.1): warm-up shots never; with two or more measured shots
 * the first is dropped and shots 2..N are quoted; a single measured shot is
 * quoted alone. The dropped first shot keeps its own summary (its cell).
 *
 * Pooling: one rule per statistic, the `pool` column of the schema
 * (schema.h, cal_pool):
 *   CAL_POOL_SUM       counts, token totals and the duration: summed;
 *   CAL_POOL_RATE      request, output and total-token throughput: the summed
 *                      numerator ÷ the summed duration (Σ tokens ÷ Σ s, the
 *                      duration-weighted mean of the shots' rates);
 *   CAL_POOL_REQUESTS  per-request statistics (every TTFT/TPOT/ITL/E2E
 *                      percentile, mean and sd, the per-request tok/s median,
 *                      prefill and decode medians): recomputed over the
 *                      requests of every quoted shot together; NAN when the
 *                      requests were not loaded and more than one shot is quoted;
 *   CAL_POOL_TIME_MEAN telemetry means: the duration-weighted mean of the
 *                      shots' means (a time average over the quoted shots);
 *   CAL_POOL_MIN       telemetry minima: the lowest of the shots' minima.
 * One quoted shot: its stored summary, unchanged.
 *
 * Ownership: cal_analysis_run allocates *out; cal_analysis_free(&a) frees it
 * and NULLs the pointer. The analysis points into the cal_run_data it was
 * computed from (group cell indexes), which must outlive it. Never prints. */
#ifndef CALIPER_ANALYSIS_H
#define CALIPER_ANALYSIS_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/store.h"

/* ---- verdicts as data -------------------------------------------------- */

typedef enum cal_verdict_kind {
    CAL_VK_NOTE = 0,       /* a sentence with no numbers behind it (a stored
                              message: why the target failed, an old run's text) */
    CAL_VK_SHOTS,          /* shot series: later shots against the first (SPEC 1.1) */
    CAL_VK_FREQUENCY,      /* does the clock explain the drop? (SPEC 1.4) */
    CAL_VK_POWER_WALL,     /* power flat while the clock fell: a power ceiling */
    CAL_VK_AB,             /* A/B: B ÷ A over paired shots with a t interval */
    CAL_VK_FAILURES,       /* requests that did not end ok */
    CAL_VK_OUTPUT_LENGTH,  /* a fixed output length the server did not honour */
    CAL_VK_PROMPT_APPROX,  /* prompt lengths approximate (no /tokenize) */
    CAL_VK_CLIENT,         /* the client self-check: was the probe the bottleneck? */
    CAL_VK_COLUMN,         /* which throughput column to read where (SPEC 1.2) */
    CAL_VK_PREFILL_FIT,    /* t(n) = a + b·n over prompt lengths (SPEC 1.4) */
    CAL_VK_TELEMETRY,      /* a telemetry source absent */
    CAL_VK_PROMPT_CHECK,   /* prompt lengths against the server's own count */
    CAL_VK_PREFIX_CACHE,   /* TTFT per turn against the tokens the server computed */
    CAL_VK__N
} cal_verdict_kind;
/* "note", "shots", "frequency", "power-wall", "ab", "failures",
 * "output-length", "prompt-approx", "client", "column", "prefill-fit",
 * "telemetry", "prompt-check", "prefix-cache". Never NULL. */
const char *cal_verdict_kind_name(cal_verdict_kind k);
/* Inverse of cal_verdict_kind_name; CAL_EINVAL for anything else. */
int cal_verdict_kind_parse(const char *s, cal_verdict_kind *out);

#define CAL_VERDICT_TEXT 512
#define CAL_VERDICT_VALUES 4

typedef struct cal_verdict {
    cal_verdict_kind kind;
    int    group;          /* the group it concerns (cal_analysis.groups), -1 run-wide */
    char   cell[96];       /* that group's name ("c1 · 64 tok prose"); "" run-wide */
    int    judged;         /* 1 it speaks; 0 "cannot judge" (text says why) */
    int    direction;      /* -1 worse / lower, 0 within noise, +1 better / higher,
                              relative to the reference the kind names */
    double effect;         /* SHOTS: (first − later) ÷ first, + = later slower;
                              FREQUENCY: share of the change the clock explains;
                              AB: B ÷ A; FAILURES: failed ÷ sent; NAN none */
    double lo, hi;         /* SHOTS, FREQUENCY, AB: the effect's 95 % CI
                              (caliper/judge.h); NAN none */
    double values[CAL_VERDICT_VALUES]; /* kind-specific inputs (SHOTS: first,
                              later level, first shot, first later shot;
                              FREQUENCY: f_first, f_warm, clock change,
                              throughput change); NAN unused */
    int    n;              /* samples behind it (shots, paired shots, requests) */
    char   text[CAL_VERDICT_TEXT];   /* the sentence, always set */
} cal_verdict;

/* A verdict of a kind with every number NAN, group -1, judged 1. */
void cal_verdict_init(cal_verdict *v, cal_verdict_kind k);
/* "c1 · 64 tok prose: shots 2–4 …" when it concerns a group, else the text. */
char *cal_verdict_line(const cal_verdict *v, char *buf, size_t n);

/* ---- the shot-series judgement (the one call site) --------------------- */

/* One shot of a series, as the judgement sees it: its own summary value of
 * the judged column and its ok requests' per-request values. */
typedef struct cal_shot_sample {
    int    shot_index;     /* 1-based over the run */
    cal_shot_kind kind;
    double value;          /* the shot's judged value (per-request tok/s median,
                              or aggregate tok/s above 4 users), higher is better */
    const double *req_tok_s; size_t n_req;   /* [n_req] each ok request's
                              output ÷ its own E2E, tok/s */
    const double *req_ttft_ms;  size_t n_ttft; /* [n_ttft] each ok request's TTFT */
} cal_shot_sample;

/* Judge a series of measured shots (warm-ups removed, in shot order).
 * per_request names the column (1 per-request, 0 aggregate); floor the
 * narrowest band (relative; <= 0: CAL_SHOT_NOISE_FLOOR). Fills *out (kind
 * SHOTS, group -1; the caller sets group and cell) and returns out->judged. */
int cal_analysis_shot_verdict(const cal_shot_sample *shots, size_t n, int per_request,
                              double floor, cal_verdict *out);
/* The same with a stored prior on the shot-to-shot sd (include/caliper/noise.h:
 * the warm shots' sd pooled from earlier runs of the series, prior_df its
 * degrees of freedom; 0: none). */
int cal_analysis_shot_verdict_prior(const cal_shot_sample *shots, size_t n, int per_request,
                                    double floor, double prior_sd, double prior_df,
                                    cal_verdict *out);

/* ---- groups and the analysis ------------------------------------------- */

typedef struct cal_group {
    size_t *cells;   size_t n_cells;   /* indexes into d->cells, shot order,
                                          warm-ups included */
    size_t *quoted;  size_t n_quoted;  /* the cells the pooled summary quotes */
    int    first_excluded;             /* d->cells index of the measured first
                                          shot left out of the quote; -1 none */
    int    quoted_first, quoted_last;  /* shot indexes of the quote; 0 none */
    cal_shot_kind quoted_kind;         /* their kind when all alike, else UNKNOWN */
    int    per_request;                /* series judged on the per-request column
                                          (closed loop at 1–4 users, SPEC 1.2) */
    cal_summary pooled;                /* the quoted shots pooled (see the top) */
    char   name[96];                   /* "c1 · 64 tok prose", "A · c1 · …" */
} cal_group;

typedef struct cal_analysis {
    cal_group   *groups;   size_t n_groups;     /* in first-seen order */
    cal_verdict *verdicts; size_t n_verdicts;
    double noise_floor;    /* the run's --noise-floor (protocol JSON), 0 default */
    double equivalence;    /* the run's --equivalence (protocol JSON), 0 default */
    double prior_sd, prior_df; /* the shot-to-shot prior stored with the run
                               (protocol JSON "noise_prior"); df 0 none */
    double first_sd, first_df; /* the first shots' spread stored with it
                               (noise_prior first_sd, judge.h); df 0 none */
    int    first_left_out;     /* stored runs that spread left out as walls */
} cal_analysis;

/* The same workload configuration (target, kind, load, prompt, content,
 * output policy), whatever the shot. */
int cal_analysis_same_config(const cal_cell *a, const cal_cell *b);

/* Analyse a loaded run: groups, quotes, pooled summaries, and the verdicts
 * (shot series and its clock and power checks per group, A/B, failures,
 * output length, approximate prompts, the client self-check), followed by
 * the stored verdicts the analysis does not recompute (kind NOTE, and any
 * stored sentence it did not reproduce). CAL_ENOMEM; *out NULL then. */
int  cal_analysis_run(const cal_run_data *d, cal_analysis **out);
void cal_analysis_free(cal_analysis **a);

/* Pool cells d->cells[idx[0..n)] by the rules above into *out. n == 0 gives
 * cal_summary_init. CAL_ENOMEM. */
int  cal_analysis_pool(const cal_run_data *d, const size_t *idx, size_t n, cal_summary *out);

/* Per-request values of one cell's ok requests (NAN-free): the quantity of
 * a schema series (CAL_SERIES_*, schema.h) into out[cap]; returns how many
 * (0 when the requests were not loaded). */
size_t cal_analysis_cell_values(const cal_run_data *d, const cal_cell *c, int series,
                                double *out, size_t cap);

/* The verdicts the analysis computes (stored ones excluded) as the JSON the
 * store keeps in runs.verdicts: an array of objects {"kind","group","cell",
 * "judged","direction","effect","lo","hi","values","n","text"} (absent
 * numbers null). malloc'd; NULL on ENOMEM. */
char *cal_verdicts_json(const cal_verdict *v, size_t n);
/* The verdicts the analysis computes for a run (cal_analysis_run, the
 * stored ones left out) as cal_verdicts_json; NULL on ENOMEM. What a run or
 * a recording stores with itself. */
char *cal_analysis_verdicts_json(const cal_run_data *d);
/* Read such an array back; plain strings (older runs) read as NOTE. At
 * most cap into out; returns how many. */
size_t cal_verdicts_from_json(const char *json, cal_verdict *out, size_t cap);

#endif
