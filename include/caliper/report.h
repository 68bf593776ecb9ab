/* caliper — results as compare and report see them, the comparison that
 * refuses ratios across protocols, and the report writers (HTML with inline
 * SVG, Markdown, CSV, JSON).
 *
 * A result is one measured run (or one foreign tool's file): who was measured,
 * where, by what, plus its summary cells. A cell is one protocol setting
 * (a shot range, a concurrency cell, a prompt-length point) with its
 * fingerprint, its summary numbers and, where they exist, the samples behind
 * them. One table of metrics (cal_metric_info) drives every output, so the
 * terminal, CSV, JSON and HTML cannot disagree.
 *
 * Ownership: a cal_result owns all its arrays; cal_result_free releases them
 * and NULLs the caller's pointer. Writers append to a caller-owned cal_buf
 * and never print. */
#ifndef CALIPER_REPORT_H
#define CALIPER_REPORT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "caliper/analysis.h"
#include "caliper/buf.h"
#include "caliper/fingerprint.h"
#include "caliper/schema.h"

/* The metrics of a cell are the fields of the one schema (schema.h):
 * cal_rcell.v[m] is the value of cal_summary_fields[m], under its key. */

/* ---- results -------------------------------------------------------------- */

typedef enum cal_sweep {
    CAL_SWEEP_SHOTS = 0,    /* a shot range at one workload */
    CAL_SWEEP_CONCURRENCY,  /* one point of a concurrency sweep */
    CAL_SWEEP_PROMPT,       /* one point of a prompt-length sweep */
    CAL_SWEEP_OTHER         /* anything else (an imported file) */
} cal_sweep;
const char *cal_sweep_name(cal_sweep s);    /* "shots", "concurrency", "prompt", "other" */
int cal_sweep_parse(const char *s, cal_sweep *out);   /* the inverse; CAL_EINVAL */

typedef struct cal_rcell {
    cal_sweep sweep;
    cal_fingerprint fp;      /* column is set per metric when compared */
    char   target[16];       /* the arm under --ab ("A" / "B"); "" otherwise */
    double v[CAL_M__N];      /* the schema's fields (requests, duration, …);
                                NAN = absent */
    double *s[CAL_S__N];     /* sample arrays (owned), NULL when absent */
    size_t  ns[CAL_S__N];
} cal_rcell;

typedef struct cal_shot {
    int    index;            /* 1-based in its series */
    cal_shot_kind kind;
    double t_s;              /* start, seconds since the run began; NAN unknown */
    double dur_s;            /* NAN unknown */
    double v[CAL_M__N];      /* the shot's own summary (the schema's fields);
                                NAN absent (clock, power: not sampled) */
} cal_shot;
/* A shot with every number NAN, kind unknown. */
void cal_shot_init(cal_shot *s);

typedef struct cal_tel_point {
    double t_s;              /* seconds since the run began */
    double clock_mhz;        /* NAN absent */
    double power_w;          /* NAN absent */
} cal_tel_point;

/* The version of the document family: `caliper report --format json`
 * ("format": "caliper-result", the pooled view of a run) and `caliper export
 * RUN --json` ("format": "caliper-run", the raw run with that view under
 * "view") both write it as "format_version". 3: the export embeds the view
 * and drops its own "summary" (export 1 and result 1, 2 are still read). */
#define CAL_DOC_VERSION 3

#define CAL_RES_STR 160
#define CAL_RES_MAX_VERDICTS 64

typedef struct cal_result {
    char    id[64];                  /* store run id or file name */
    char    label[CAL_RES_STR];      /* --label, else the target name */
    char    target_name[CAL_RES_STR];
    char    target_version[CAL_RES_STR];  /* "" unknown */
    char    target_url[CAL_RES_STR];      /* URL or launch command */
    char    host[CAL_RES_STR];
    char    probe[CAL_RES_STR];      /* "caliper 0.1.0", "vllm bench serve" */
    char    build[CAL_RES_STR];      /* caliper's build string when caliper measured */
    char    telemetry[CAL_RES_STR];  /* sources used, "" none */
    int64_t created_unix;            /* when measured; 0 unknown */
    cal_verdict verdicts[CAL_RES_MAX_VERDICTS];   /* as data (analysis.h) */
    size_t  n_verdicts;
    cal_rcell      *cells;   size_t n_cells;
    cal_shot      *shots;   size_t n_shots;
    cal_fingerprint shots_fp;  /* the workload the shots ran (shot kind and
                                  range aside); shot_kind UNKNOWN = not known */
    cal_tel_point *tel;     size_t n_tel;
    struct cal_turns *turns;  /* per turn of a chat scenario or a replay (from
                                 the store only; NULL otherwise), owned */
    char    protocol_damage[600];  /* the stored protocol could not be read
                                 whole: its first damaged field, its value and
                                 what was expected (protocol_record.h); ""
                                 intact. Compare refuses its ratios */
} cal_result;

/* A zeroed result (no cells). NULL on allocation failure. */
cal_result *cal_result_new(void);
void cal_result_free(cal_result **r);
/* Append a cell with every number NAN, no samples, fingerprint unknown;
 * returns it (valid until the next add) or NULL (CAL_ENOMEM, r unchanged). */
cal_rcell *cal_result_add_cell(cal_result *r, cal_sweep sweep);
/* Append a shot / telemetry point (copied). CAL_ENOMEM leaves r unchanged. */
int cal_result_add_shot(cal_result *r, const cal_shot *s);
int cal_result_add_tel(cal_result *r, const cal_tel_point *p);
/* Append a verdict (copied), or a sentence alone as a NOTE. CAL_EFULL. */
int cal_result_add_verdict(cal_result *r, const cal_verdict *v);
int cal_result_add_note(cal_result *r, const char *text);
/* Copy n samples into a cell's series (replacing any). CAL_ENOMEM. */
int cal_cell_set_samples(cal_rcell *c, cal_series s, const double *x, size_t n);
/* Fill every absent summary number computable from the cell's samples
 * (percentiles type 7, medians). Present numbers are kept. */
void cal_cell_fill_from_samples(cal_rcell *c);

/* ---- reading results -------------------------------------------------------- */

/* Parse a JSON document into a result. Accepts caliper's own result JSON
 * (what cal_result_to_json writes; "format": "caliper-result"), a
 * `caliper export RUN --json` / `caliper run --json` file, and a vLLM
 * `bench serve` result. name labels the result when the file has no label
 * (a file name; may be NULL). On failure returns CAL_EPROTO / CAL_EINVAL /
 * CAL_ENOMEM and writes a message naming the field into err[errn]. */
int cal_result_from_json(const char *text, size_t len, const char *name,
                         cal_result **out, char *err, size_t errn);

/* Read a vLLM `vllm bench serve --save-result` JSON (fields: date, backend,
 * model_id, num_prompts, request_rate, max_concurrency, duration, completed,
 * failed, total_input_tokens, total_output_tokens, output_throughput,
 * {mean,median,std,p99}_{ttft,tpot,itl,e2el}_ms, and with --save-detailed
 * input_lens, output_lens, ttfts, itls, latencies). Labelled with that tool's
 * protocol: shot kind "mean of consecutive requests, no cold/warm split",
 * probe "vllm bench serve", warm-up/content/host unknown. Same failures as
 * cal_result_from_json. */
int cal_import_vllm(const char *text, size_t len, const char *name,
                    cal_result **out, char *err, size_t errn);

/* Read llama.cpp's `llama-bench -o json` (or -o jsonl): one cell per test,
 * prefill tok/s from pp tests (n_gen 0), decode tok/s from tg tests, the
 * repetitions' samples_ts as samples. Protocol: in-process (API "in-process
 * (no HTTP)", not streamed), warm shots after one warm-up, random tokens,
 * host from cpu_info/gpu_info, probe "llama-bench". CAL_EPROTO naming a
 * missing n_prompt, n_gen or avg_ts. */
int cal_import_llamabench(const char *text, size_t len, const char *name,
                          cal_result **out, char *err, size_t errn);

/* Read AIPerf's profile_export_aiperf.json or GenAI-Perf's
 * profile_export_genai_perf.json (tool "aiperf" or "genai-perf" names the
 * probe): request_latency, time_to_first_token, inter_token_latency (as
 * TPOT), throughputs, counts; streaming, endpoint type, concurrency and
 * rate from input_config when present. CAL_EPROTO without request_latency. */
int cal_import_aiperf(const char *text, size_t len, const char *name, const char *tool,
                      cal_result **out, char *err, size_t errn);

/* Read a guidellm benchmarks report: one cell per benchmark (successful
 * requests), concurrency/rate from its strategy, probe "guidellm".
 * CAL_EPROTO naming what is missing. */
int cal_import_guidellm(const char *text, size_t len, const char *name,
                        cal_result **out, char *err, size_t errn);

/* The tools cal_result_import reads: "vllm, llama-bench, aiperf, genai-perf,
 * guidellm". */
extern const char CAL_IMPORT_TOOLS[];

/* Convert a `caliper export RUN --json` document into a result: from
 * format_version 3 its "view" (the result document itself); an older one
 * (the store's shape, its "summary" ignored) rebuilt from its requests; the
 * same errors. Exposed for the store adapter and its tests. */
int cal_result_from_export(const char *text, size_t len, const char *name,
                           cal_result **out, char *err, size_t errn);

/* A `caliper export RUN --json` document (any format_version) as the run
 * it was exported from: every cell with its shot, target and summary, and
 * its requests, for a reader that needs the shots themselves (caliper
 * gate). *out is the caller's (cal_run_data_free). CAL_EPROTO naming what
 * the file is not, CAL_ETOOBIG, CAL_ENOMEM; message in err. */
struct cal_run_data;
int cal_run_data_from_export(const char *text, size_t len, const char *name,
                             struct cal_run_data **out, char *err, size_t errn);

/* Write a loaded run as `caliper export RUN --json` ("format":
 * "caliper-run": run, cells with their requests, the pooled "view" — the
 * very caliper-result document cal_result_to_json writes for the run's
 * cal_result_from_run_data — and the "schema" tables) or `--csv` (one
 * RFC 4180 row per cell: protocol columns, then every schema field) into
 * out. CAL_ENOMEM, CAL_ETOOBIG (out's cap). The _file form writes the same
 * bytes to f as they are formatted, with no copy of the whole text in memory
 * (16 MB at 6,144 requests of 64 tokens); CAL_EIO when f refuses them (what
 * was written stays). */
struct cal_run_data;
int cal_run_export_json(const struct cal_run_data *d, cal_buf *out);
int cal_run_export_json_file(const struct cal_run_data *d, FILE *f);
int cal_run_export_csv(const struct cal_run_data *d, cal_buf *out);

/* A stored run (store.h): resolve ref ("7", "latest", a label) in st and
 * load it with its requests and chunk times. The store's cells (one shot of
 * one configuration each) are grouped by configuration and shot kind into
 * summary cells (cold 1, warm 2–6, ...); warm-up shots are left out; a group
 * of several shots gets the median over its shots for the aggregate column
 * and pooled per-request samples for the rest. CAL_ENOTFOUND (no such run),
 * CAL_ESTORE, CAL_ENOMEM; message in err. */
struct cal_store;
struct cal_run_data;
int cal_result_from_store(struct cal_store *st, const char *ref, cal_result **out,
                          char *err, size_t errn);
int cal_result_from_run_data(const struct cal_run_data *d, cal_result **out,
                             char *err, size_t errn);

/* What the user typed: an existing file (any JSON cal_result_from_json
 * reads), else a run reference looked up in the store at db_path.
 * CAL_ENOTFOUND (neither), CAL_EPROTO (unreadable file), CAL_ESTORE... */
int cal_result_load(const char *ref, const char *db_path, cal_result **out,
                    char *err, size_t errn);
/* A foreign tool's file: tool "vllm" (cal_import_vllm). CAL_EINVAL for an
 * unknown tool, else as cal_import_vllm. */
int cal_result_import(const char *tool, const char *path, cal_result **out,
                      char *err, size_t errn);

/* ---- comparing ---------------------------------------------------------------- */

#define CAL_CMP_MAX 16   /* results in one comparison */

/* The run-to-run noise of one series, measured over its stored runs: how
 * far apart two runs of it land (log scale). */
typedef struct cal_run_noise {
    double sd;            /* sd of the runs' levels (mean of k warm shots) */
    double df;            /* runs − 1; 0: no repeats (nothing else is read) */
    double q95;           /* the distance |level_i − level_j| at most 5 % of the
                             stored runs' pairs exceed (a rank, noise.h); with
                             .same, of the pairs at least as far apart (in run
                             ids) as this run and the baseline's, the two
                             included; NAN with < 2 runs */
    double mq95[CAL_M__N];/* with .same, the same rank for each comparable
                             metric over the stored runs' warm shots pooled
                             (aggregate tok/s, prefill, TTFT, ITL ...), that
                             metric's own threshold; 0 or NAN unknown: q95
                             stands in for it */
    double mq95_one[CAL_M__N]; /* the same rank over the stored runs' first
                             measured shot alone, the threshold of a one-shot
                             cell ("warm 2", "cold 1"): a first shot swings
                             more than the warm pool (a slow shot 2 after the
                             warm-up, 23 % on a quiet machine), so the pool's
                             rank scaled by its shot sd let 15 % of A/A pairs
                             be claimed; 0 or NAN unknown */
    double shot_sd;       /* the warm shots' sd, pooled; NAN unknown */
    int    shots;         /* warm shots behind a level (the newest run's) */
    int    same;          /* 1: this is the baseline's series, so its df are
                             not added to the baseline's */
} cal_run_noise;

typedef struct cal_compare_opts {
    int     force;        /* ratio even across differing fingerprints */
    double  stale_s;      /* flag results older than this (s); 0 = never */
    int64_t now_unix;     /* "now" for the stale check; 0 = time(NULL) */
    int     boot_iters;   /* bootstrap resamples; 0 = 2000, < 0 = no CI */
    uint64_t seed;        /* bootstrap seed; 0 = a fixed default */
    uint64_t metrics;     /* bit (1ull << cal_metric) per metric to compare;
                             0 = every comparable one (cal_metric_comparable) */
    double  floor;        /* smallest |ratio − 1| called a difference; 0 = 0.03 */
    cal_run_noise run_noise[CAL_CMP_MAX]; /* per result: the run-to-run noise of
                             its series from the store's repeats
                             (include/caliper/noise.h); df 0: none */
} cal_compare_opts;

enum { CAL_CI_NONE = 0, CAL_CI_REQUESTS, CAL_CI_SHOTS, CAL_CI_RUNS };
typedef struct cal_cmp_entry {
    int    present;       /* this result has a cell on this row */
    double value;         /* its number (NAN when absent) */
    int    comparable;    /* fingerprint equals the baseline's */
    double ratio;         /* value ÷ baseline; NAN when refused */
    double ci_lo, ci_hi;  /* 95 % CI of the ratio; NAN without samples: the
                             requests' bootstrap, widened to a shot-level t CI
                             where each side's shot-to-shot spread is known
                             (its cell's shots, else its run's warm shots) */
    int    ci_scope;      /* CAL_CI_NONE; CAL_CI_REQUESTS or CAL_CI_SHOTS: the CI
                             covers within-run noise only (requests, or the
                             run's shots); CAL_CI_RUNS: widened to the
                             run-to-run noise of stored repeats (run_sd) */
    int    differs;       /* CAL_CI_RUNS, the CI excludes 1 and |ratio − 1| >=
                             the floor: the only case a difference is claimed */
    size_t n_diff;        /* fields differing from the baseline cell */
    cal_fp_difference diff[CAL_FPF__N];
    char   note[384];     /* why there is no number: "has no cold shots" */
} cal_cmp_entry;

typedef struct cal_cmp_row {
    cal_metric metric;
    cal_fingerprint fp;           /* the baseline's (or first present) cell */
    char label[192];              /* "decode tok/s · c1 · 512 tok · warm 2–6" */
    cal_cmp_entry e[CAL_CMP_MAX]; /* one per result; e[0] is the baseline */
} cal_cmp_row;

typedef struct cal_comparison {
    size_t n_results;
    cal_cmp_row *rows;  size_t n_rows;
    size_t n_ratios;              /* ratios computed between matching cells */
    size_t n_refused;             /* pairs refused (or forced) for differences */
    double age_days[CAL_CMP_MAX]; /* NAN when the date is unknown */
    int    stale[CAL_CMP_MAX];    /* older than opts.stale_s */
    char   flags[CAL_CMP_MAX][256]; /* per-result warnings ("" none) */
} cal_comparison;

/* Compare results res[0..n) against res[0], the baseline (n in 2..CAL_CMP_MAX).
 * Rows pair cells one to one per metric, nearest fingerprint first; a pair
 * gets a ratio only when the fingerprints are equal (or opts->force, with the
 * differences kept). *out is owned by the caller (cal_comparison_free).
 * CAL_EINVAL for n out of range, CAL_ENOMEM. */
int cal_compare(const cal_result *const *res, size_t n,
                const cal_compare_opts *opts, cal_comparison **out);
void cal_comparison_free(cal_comparison **c);

/* Bootstrap 95 % CI of stat(b) ÷ stat(a), stat = percentile pct (type 7),
 * iters resamples with a fixed seed. CAL_EINVAL when na or nb < 2. */
int cal_ratio_ci(const double *a, size_t na, const double *b, size_t nb,
                 double pct, int iters, uint64_t seed, double *lo, double *hi);

/* ---- fits and verdicts ------------------------------------------------------- */

/* Least squares t = a + b·x over n points (n >= 2, x not all equal).
 * r2 may be NULL. CAL_EINVAL otherwise. */
int cal_report_linfit(const double *x, const double *y, size_t n,
                      double *a, double *b, double *r2);

/* The verdicts of a result, as data, into out[cap]: the result's own (a
 * stored run's analysis), then those read off its cells for a kind the
 * result brings none of (a foreign import): the warm drop against shot 1,
 * which column to read (COLUMN), the prefill fit (PREFILL_FIT), clock
 * absent (TELEMETRY). Returns how many. */
size_t cal_report_verdicts(const cal_result *r, cal_verdict *out, size_t cap);

/* ---- writers ------------------------------------------------------------------ */

typedef enum cal_report_format {
    CAL_REPORT_HTML = 0, CAL_REPORT_MD, CAL_REPORT_CSV, CAL_REPORT_JSON
} cal_report_format;

/* Write results res[0..n) (n >= 1) in the given format into out.
 * HTML is one self-contained page: inline CSS and SVG, no scripts, no URL.
 * CAL_ETOOBIG when out's cap is reached, CAL_ENOMEM, CAL_EINVAL (n == 0). */
int cal_report_write(const cal_result *const *res, size_t n,
                     cal_report_format fmt, cal_buf *out);
/* The HTML page with extra sections, already HTML (`caliper ops`' section,
 * cal_ops_html_section), after the runs; extra NULL: none. n may be 0 when
 * extra is given (a page of those sections alone). Same errors. */
int cal_report_write_html_ex(const cal_result *const *res, size_t n, const char *extra,
                             cal_buf *out);

/* Goodput against offered load as Markdown (also what `caliper run` prints
 * after a --slo run): one row per offered rate (throughput, goodput, its
 * gain over the rate before), the knee marked, and a line saying where the
 * knee is and why — or why there is none (saturation.h). Writes nothing
 * when the result has no goodput. CAL_ENOMEM, CAL_ETOOBIG. */
int cal_report_goodput_md(const cal_result *r, cal_buf *out);

/* One result as caliper's result JSON ("format": "caliper-result"),
 * readable back by cal_result_from_json. */
int cal_result_to_json(const cal_result *r, cal_buf *out);

/* ---- turns (the chat scenario, a replay: docs/workload.md) -------------------
 * Per turn index of a stored run whose protocol has a "scenario": prompt
 * and shared-prefix tokens (from the protocol's turn plan), TTFT and the
 * whole turn (send to last byte) over the measured shots' ok requests;
 * under A/B both sides, their ratio, and the whole-turn speedup A ÷ B
 * (geometric mean over (shot, turn) pairs; its t CI takes the shots as the
 * units, each shot's mean log ratio one value: within-run noise only) beside
 * the notes' formula from the decode speedup alone (formulas.h). */
typedef struct cal_turn_row {
    int    turn;               /* 1-based */
    double prompt_tokens;      /* mean over the sessions */
    double shared_tokens;      /* mean */
    double shared_share;       /* Σ shared ÷ Σ prompt */
    int    n[2];               /* ok requests per side ([0]: the only side, or A) */
    double ttft_s[2];          /* median */
    double turn_s[2];          /* mean whole turn */
    double decode_s[2];        /* mean first to last token */
    double cached_share[2];    /* Σ cached ÷ Σ prompt tokens over the requests whose
                                  server reported its cache hit; NAN none did */
    int    cached_n[2];        /* those requests */
} cal_turn_row;

/* What the per-turn TTFT line stands on (side A, or the only side). */
typedef enum cal_turns_fit {
    CAL_TURNS_FIT_NONE = 0,    /* fewer than 2 requests with a TTFT and a length */
    CAL_TURNS_FIT_PROMPT,      /* on the whole prompt: the built-in engine has no
                                  prefix cache, or no turn resent a prefix */
    CAL_TURNS_FIT_NEW,         /* on the tokens the server computed: each
                                  request's prompt less the cached tokens it
                                  reported */
    CAL_TURNS_FIT_CACHE_UNKNOWN /* none: the server reported no cache hits and a
                                  prefix cache may have served part of each prompt */
} cal_turns_fit;

typedef struct cal_turns {
    char   scenario[16];       /* "chat", "replay" */
    int    ab;                 /* two sides */
    int    n_rows;
    cal_turn_row *rows;        /* [n_rows] (malloc'd) */
    double speedup, lo, hi;    /* A/B whole turn A ÷ B, NAN when absent */
    int    pairs;              /* (shot, turn) pairs behind it */
    int    shots;              /* shots with a pair: the CI's units */
    double formula;            /* the notes' whole-turn speedup from B's TTFT and
                                  decode and the decode speedup; NAN absent */
    double ttft_slope_ms_per_ktok; /* the TTFT line's slope, ms per 1000 tokens of
                                  fit_on; NAN when not shown: only a positive
                                  slope whose CI excludes 0 is a finding */
    cal_turns_fit fit_on;      /* which tokens the line is on, or why none */
    double slope_raw, slope_lo, slope_hi; /* the fitted slope and its 95 % CI, ms per
                                  1000 tokens (NAN none; lo/hi NAN under 3 points) */
    int    fit_points;         /* requests behind it */
    char   fit_text[400];      /* the sentence: the slope, or why none is shown */
    char   describe[200];      /* one line: "chat: 4 users x 6 turns, system+tools 6765 tok" */
} cal_turns;

/* CAL_OK with out filled; CAL_ENOTFOUND when the run has no scenario;
 * CAL_ENOMEM. Free with cal_turns_free. */
int  cal_turns_from_run(const cal_run_data *d, cal_turns *out);
void cal_turns_free(cal_turns *t);
/* The per-turn table as text onto f (nothing for a run without turns).
 * Returns the number of rows printed. */
int  cal_report_turns_text(FILE *f, const cal_run_data *d);
/* For a run with a dataset or length distributions: the dataset's id and
 * hash, and the realised prompt and output lengths (min, p5, median, p95,
 * max over the ok requests) beside what was asked. Returns 1 when printed. */
int  cal_report_lengths_text(FILE *f, const cal_run_data *d);
/* The HTML figure of a result's turns: the chart and the per-turn table. */
int  cal_report_turns_html(const cal_turns *t, cal_buf *out);
/* An inline SVG of TTFT (per side) against prompt tokens, one point per
 * turn, appended to out; CAL_ETOOBIG at out's cap. */
int  cal_report_turns_svg(const cal_turns *t, cal_buf *out);

#endif
