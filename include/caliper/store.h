/* caliper result store — every run, cell (one shot of one workload
 * configuration), request and telemetry sample in one SQLite file, with the
 * host, the target, the protocol and caliper's own build beside them.
 * docs/schema.md describes the tables; this header is the C view of them.
 *
 * Concurrency: the file is opened in WAL mode with a busy timeout, and every
 * write is one BEGIN IMMEDIATE transaction, so two caliper processes may
 * write to the same file at once (one waits for the other, up to 10 s).
 * Schema: a schema_version table; cal_store_open applies the missing
 * migrations in order, each in its own transaction.
 *
 * Times: every *_ns field is CLOCK_MONOTONIC ns as taken on the measuring
 * host (cal_now_ns), except *_wall_ns (CLOCK_REALTIME, ns since the epoch).
 * A run records both clocks at its start (t0_mono_ns, started_wall_ns), so
 * wall = started_wall_ns + (t − t0_mono_ns). Unknown integers are -1,
 * unknown reals NAN (stored as NULL, printed "—", never 0).
 *
 * Ownership: write calls copy what they are given. Read calls return heap
 * objects freed by the matching *_free / *_clear function. A handle is used
 * by one thread at a time. */
#ifndef CALIPER_STORE_H
#define CALIPER_STORE_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/protocol_record.h"
#include "caliper/probe.h"        /* cal_req_result, cal_req_status */
#include "caliper/schema.h"       /* cal_field, cal_metric, cal_shot_kind */

#define CAL_STORE_SCHEMA_VERSION 9

typedef struct cal_store cal_store;

/* Open (creating if needed) the store at path and migrate it to
 * CAL_STORE_SCHEMA_VERSION. Fails with CAL_EINVAL (NULL or "" path),
 * CAL_ESTORE (not a SQLite file, a newer schema than this build knows,
 * locked past the timeout), CAL_ENOMEM. On failure *out is NULL.
 * Equivalent to cal_store_open_ex(path, 0, out, NULL, 0). */
int  cal_store_open(const char *path, cal_store **out);

#define CAL_STORE_READONLY 1u  /* open flag: read, never create or migrate */
/* Open with flags. CAL_STORE_READONLY opens an existing file with
 * SQLITE_OPEN_READONLY: nothing is created (no file at a mistyped path), no
 * migration is written, and a store in a directory this process cannot
 * write is still read (immutably, when SQLite could not create its WAL
 * index there and no -wal file is pending). A file at an older schema is
 * read as it is: summary fields it lacks read as NAN (or 0 for integers),
 * as a migrated file would give. Write calls on such a handle fail with
 * CAL_EPERM. Errors, each explained in why[why_len] (may be NULL):
 *   CAL_EINVAL    NULL or "" path, unknown flags
 *   CAL_ENOTFOUND read-only and no file at path: "no such store: PATH"
 *   CAL_ESTORE    not a SQLite file, not a caliper store, a newer schema,
 *                 locked past the timeout, or (writing) migration failed
 *   CAL_ENOMEM
 * On failure *out is NULL. */
int  cal_store_open_ex(const char *path, unsigned flags, cal_store **out,
                       char *why, size_t why_len);
/* Flush pending telemetry and close; NULLs *st. NULL or *st NULL: no-op. */
void cal_store_close(cal_store **st);
/* The schema version the file is at (after a writing open:
 * CAL_STORE_SCHEMA_VERSION; read-only: the file's own). */
int  cal_store_schema_version(cal_store *st);
/* Why this handle's last call failed: the store's own explanation when it
 * gave one (a damaged row, an invalid label, a read-only handle), else
 * SQLite's last error message. Static text owned by st, never NULL. */
const char *cal_store_errmsg(cal_store *st);

/* ---- runs ------------------------------------------------------------- */

typedef enum cal_run_status {
    CAL_RUN_RUNNING = 0,   /* begun, not finished (or the process died) */
    CAL_RUN_OK,
    CAL_RUN_INTERRUPTED,   /* stopped by the user (Ctrl-C): partial */
    CAL_RUN_FAILED         /* the target failed; what was measured is kept */
} cal_run_status;
const char *cal_run_status_name(cal_run_status s);   /* "running", "ok", ... */

/* One run. The JSON fields are objects as text (NULL when not known):
 *   host_json:      {"cpu":"AMD EPYC 7B13","cores":2,"memory_bytes":…,
 *                    "os":"Linux 6.1.0","gpu":null}
 *   target_json:    {"kind":"builtin|url|launch","name":"small","version":…,
 *                    "url":…,"command":…,"load_s":…,"api":"completions"}
 *   protocol_json:  the run's flags as given and resolved (shots, rest,
 *                    warmup, cold, concurrency, prompt_tokens, content, …)
 *   telemetry_json: {"sources":[{"backend":"…","present":true|false,
 *                    "why":…}], "interval_s":…}
 *   verdicts_json:  the run's verdicts as data (analysis.h, cal_verdicts_json):
 *                   [{"kind":"shots","group":0,"cell":"c1 · 64 tok prose",
 *                     "judged":true,"effect":0.14,…,"text":"shots 2–3 run …"}, …];
 *                   older runs hold plain sentences, read as notes
 */
typedef struct cal_run {
    int64_t id;               /* assigned by cal_store_begin_run */
    char   *label;            /* --label, or NULL */
    int64_t started_wall_ns;
    int64_t ended_wall_ns;    /* -1 while running */
    int64_t t0_mono_ns;       /* CLOCK_MONOTONIC at the start */
    cal_run_status status;
    char   *build;            /* cli_build_string() */
    char   *host_json, *target_json, *protocol_json, *telemetry_json;
    char   *verdicts_json;
    int     n_cells;          /* filled by reads */
} cal_run;
/* Free the strings of r (not r itself) and zero it. */
void cal_run_clear(cal_run *r);

/* Insert a run with status RUNNING; sets run->id. The strings are copied.
 * CAL_EINVAL (nothing stored) when the label is "" or not valid UTF-8 (it
 * would not survive export as JSON) or target_json is not JSON. Every
 * string in target_json that is a URL with credentials is stored without
 * them (cal_url_redact): callers redact too; this is the last line. */
int  cal_store_begin_run(cal_store *st, cal_run *run);
/* Set the final status, end time (now) and verdicts (may be NULL), and flush
 * pending telemetry. CAL_ENOTFOUND if no such run. */
int  cal_store_finish_run(cal_store *st, int64_t run_id, cal_run_status status,
                          const char *verdicts_json);

/* ---- the summary of one cell ------------------------------------------
 * Its fields are described by the one schema table (schema.h):
 * cal_summary_fields[m] for metric m gives each field's key (a JSON key, a
 * CSV header and a column of the cells table), unit, statistic, column,
 * better direction, pooling rule and decimals. */
typedef struct cal_summary {
    double  duration;            /* s: first send to last end of the cell */
    int64_t completed;           /* requests ok */
    int64_t failed;              /* requests not ok (all other statuses) */
    int64_t n_http_error, n_timeout, n_connect_error, n_stream_error, n_cancelled;
    int64_t total_input_tokens;  /* prompt tokens over ok requests */
    int64_t total_output_tokens; /* output tokens over ok requests */
    int64_t output_len_mismatch; /* ok requests whose output != max_tokens
                                    under a fixed-output policy */
    double  request_throughput;  /* completed ÷ duration, req/s */
    double  output_throughput;   /* aggregate: total output ÷ duration, tok/s */
    double  per_request_output_throughput_median; /* median of each ok
                                    request's output ÷ its own E2E, tok/s */
    double  mean_ttft_ms, median_ttft_ms, p95_ttft_ms, p99_ttft_ms;
    double  mean_tpot_ms, median_tpot_ms, p99_tpot_ms; /* (E2E−TTFT)÷(out−1) */
    double  mean_itl_ms, median_itl_ms, p99_itl_ms;    /* every chunk gap */
    double  mean_e2el_ms, median_e2el_ms, p99_e2el_ms; /* from sched time */
    double  prefill_tps_median;  /* prompt ÷ TTFT: a lower bound on prefill */
    double  decode_tps_median;   /* (out−1) ÷ (last − first token), tok/s */
    double  server_decode_tps_median; /* the server's own timings; NAN if none */
    double  clock_mhz_mean;      /* telemetry over the cell; NAN when absent */
    double  power_w_mean;        /* telemetry over the cell; NAN when absent */
    /* schema 2: the rest of vLLM's bench summary */
    double  total_token_throughput; /* (input + output tokens) ÷ duration, tok/s */
    double  std_ttft_ms, std_tpot_ms, std_itl_ms, std_e2el_ms; /* sample sd */
    /* schema 3 */
    double  clock_mhz_min;       /* lowest clock reading over the cell; NAN when absent */
    double  power_w_min;         /* lowest power reading over the cell; NAN when absent */
    /* schema 4 */
    double  goodput;             /* requests that met every --slo bound ÷ duration,
                                    req/s (goodput.h); NAN without an SLO */
} cal_summary;

/* The one schema table, in cal_metric order (schema.h). */
extern const cal_field cal_summary_fields[];
extern const size_t    cal_summary_n_fields;
/* Find a field by name; NULL if none. */
const cal_field *cal_summary_field(const char *name);
/* A field's value as a double (ints converted); NAN stays NAN. */
double cal_summary_get(const cal_summary *s, const cal_field *f);
/* Set a field from a double (ints: truncated, clamped to ±9e15; NAN → 0). */
void   cal_summary_set(cal_summary *s, const cal_field *f, double v);
/* Every real NAN, every int 0. */
void cal_summary_init(cal_summary *s);

/* ---- cells ------------------------------------------------------------
 * A cell is one shot of one workload configuration: a set of requests sent
 * under one load shape. A run with --shots 3 --concurrency 1,2 has six cells
 * (shot 1: c1, c2; shot 2: c1, c2; …). */
typedef enum cal_cell_kind {
    CAL_CELL_SHOTS = 0,       /* one configuration repeated over shots */
    CAL_CELL_CONCURRENCY,     /* part of a closed-loop concurrency sweep */
    CAL_CELL_PROMPT_SWEEP,    /* part of a prompt-length sweep */
    CAL_CELL_RATE             /* open loop, Poisson arrivals */
} cal_cell_kind;
const char *cal_cell_kind_name(cal_cell_kind k); /* "shots", "concurrency",
                                                    "prompt-sweep", "rate" */

typedef struct cal_cell {
    int64_t id, run_id;       /* assigned by cal_store_add_cell */
    int     seq;              /* order within the run, 0-based */
    cal_cell_kind kind;
    char    target[16];       /* "" normally; "A" / "B" under --ab */
    int     concurrency;      /* closed loop: in flight; open loop: cap, 0 none */
    double  rate;             /* req/s, 0 = closed loop */
    int     prompt_tokens;    /* the prompt length: the one asked, or the
                                 server's count where it disagreed (basis
                                 CAL_PROMPT_SERVER); 0 mixed */
    int     prompt_exact;     /* 1: exact (cal_prompt_basis_exact);
                                 0: approximate (prompt_basis says why) */
    cal_prompt_basis prompt_basis;  /* how the length was made and checked (schema 9;
                                 CAL_PROMPT_UNRECORDED before) */
    int     prompt_asked;     /* CAL_PROMPT_SERVER: the length /tokenize said
                                 (asked and built); 0 otherwise */
    int     prompt_offset;    /* tokens the server adds to every prompt (a BOS,
                                 a chat template), measured once; -1 unknown */
    char    content[16];      /* "code", "prose", "random" */
    int     unique_prompts;   /* 1: a nonce line makes each prompt unique */
    int     max_tokens;
    int     output_fixed;     /* 1: ignore_eos, output must equal max_tokens */
    int     shot_index;       /* 1-based over the whole run, warm-ups included */
    cal_shot_kind shot_kind;  /* cold / warm / rested / warmup */
    int64_t rest_before_ns;   /* idle time before this shot; 0 none */
    int64_t process_age_ns;   /* engine process age at the cell's start;
                                 -1 unknown (a --url target) */
    int64_t start_ns, end_ns; /* monotonic, the cell's wall clock */
    int64_t start_wall_ns;
    int64_t n_requests;       /* requests sent (== the sum of statuses) */
    int64_t cpu_ns, chunks;   /* the probe's self-check over the cell */
    double  send_lag_p99_ms;
    cal_summary sum;
    /* filled by cal_store_load_run: this cell's requests are
     * data->reqs[req_first .. req_first + n_requests) when loaded */
    size_t  req_first;
} cal_cell;

/* Store one cell and its n requests in one transaction; sets cell->id and
 * cell->run_id = run_id. results[i].chunk_ns (when present) is stored as a
 * compact blob (see cal_store_chunks_encode). The text field is not stored.
 * CAL_ESTORE on a database error (nothing stored). */
int  cal_store_add_cell(cal_store *st, int64_t run_id, cal_cell *cell,
                        const cal_req_result *results, size_t n);

/* Chunk timestamps as little-endian uint32 µs deltas: the first relative to
 * send_ns, each next to the previous chunk (saturating at ~71 min).
 * encode: *out malloc'd, *out_bytes = 4 × n. decode: *out malloc'd [n]. */
int  cal_store_chunks_encode(int64_t send_ns, const int64_t *chunk_ns, int n,
                             uint8_t **out, size_t *out_bytes);
int  cal_store_chunks_decode(int64_t send_ns, const uint8_t *blob, size_t bytes,
                             int64_t **out, int *n);

/* ---- per-cell latency histograms (hist.h, keep.h) ---------------------
 * One row per cell: its TTFT, ITL, TPOT and E2E histograms (cal_hist_encode
 * blobs), the requests folded, the ok requests whose chunk timestamps were
 * not kept, and where the cell's ITL percentiles came from ("raw" or
 * "histogram"). add: replaces the cell's row; CAL_ESTORE, CAL_ENOMEM.
 * load: CAL_ENOTFOUND when the cell has none (a store older than schema 4
 * too), CAL_ESTORE for a damaged blob (cal_store_errmsg names it); *ch is
 * left empty on failure. itl_source[n] may be NULL. */
struct cal_cell_hists;
int  cal_store_add_cell_hists(cal_store *st, int64_t cell_id, const struct cal_cell_hists *ch,
                              const char *itl_source);
int  cal_store_load_cell_hists(cal_store *st, int64_t cell_id, struct cal_cell_hists *ch,
                               char *itl_source, size_t n);

/* ---- telemetry: long format, one row per (time, backend, metric) ------- */
/* Queue one sample; rows are written in one transaction per 256 queued or at
 * cal_store_flush / cal_store_finish_run / cal_store_close. t_ns monotonic.
 * backend like "hwmon", "nvml", "proc"; metric like "cpu_clock", "power";
 * unit like "MHz", "W", "C", "B". */
int  cal_store_add_telemetry(cal_store *st, int64_t run_id, int64_t t_ns,
                             const char *backend, const char *metric,
                             const char *unit, double value);
int  cal_store_flush(cal_store *st);

typedef struct cal_store_tel_row {
    int64_t t_ns;
    char    backend[24], metric[32], unit[12];
    double  value;
} cal_store_tel_row;

/* ---- reads ------------------------------------------------------------ */

/* All runs, newest first, at most limit (0 = all); cells counted in
 * n_cells. *runs malloc'd [*n]; free with cal_store_runs_free. */
int  cal_store_list_runs(cal_store *st, size_t limit, cal_run **runs, size_t *n);
void cal_store_runs_free(cal_run *runs, size_t n);

/* Resolve "7", "latest" / "last", or a label (the newest run with that
 * label) to a run id. CAL_ENOTFOUND if none. */
int  cal_store_find_run(cal_store *st, const char *ref, int64_t *run_id);

/* ---- run-to-run noise (schema 4) ------------------------------------------
 * One row per run that measured a shot series with >= 2 warm shots: the
 * series key (target and protocol, include/caliper/noise.h), the run's level
 * (mean over its warm shots of the log median per-request speed) and the
 * warm shots' sd of that log median. Repeats of one series in the store are
 * the run-to-run noise compare widens its CIs by. */
#define CAL_NOISE_SERIES_MAX 512
typedef struct cal_store_noise_row {
    int64_t run_id;
    char    series[CAL_NOISE_SERIES_MAX];
    double  level;        /* log tok/s */
    double  shot_sd;      /* log scale; NAN with one warm shot */
    int     shots;        /* warm shots behind level */
    double  first_dev;    /* mean of the warm shots' log medians − the first
                             measured shot's (the shot verdict's d); NAN unknown */
    int     wall;         /* 1: the run's own verdict called a change (a directional
                             shot verdict, or the clock moved): its first_dev is a
                             wall, not noise; 0 not; -1 unknown (schema < 8) */
} cal_store_noise_row;
/* CAL_EINVAL for an empty series, a non-finite level or shots < 1. */
int  cal_store_put_noise(cal_store *st, int64_t run_id, const cal_store_noise_row *r);
/* The newest rows (at most cap) of a series from runs before before_run_id
 * (<= 0: all), newest first. A store older than schema 4 has none (CAL_OK,
 * *n = 0). */
int  cal_store_noise(cal_store *st, const char *series, int64_t before_run_id,
                     cal_store_noise_row *rows, size_t cap, size_t *n);

typedef struct cal_run_data {
    cal_run         run;
    cal_cell       *cells;   /* [n_cells], in seq order */
    size_t          n_cells;
    cal_req_result *reqs;    /* [n_reqs], grouped by cell (cell.req_first) */
    size_t          n_reqs;
    cal_store_tel_row *tel;     /* [n_tel], by time */
    size_t          n_tel;
    struct cal_hist **itl_hist; /* [n_cells] or NULL: a cell's stored ITL histogram
                                   where its percentiles came from it (itl_source
                                   "histogram": --keep-chunks dropped chunk
                                   times); NULL for a cell that kept them */
    cal_protocol    proto;   /* run.protocol_json and run.target_json as
                                fields (protocol_record.h): what readers use */
} cal_run_data;

/* Fill d->proto from d->run.protocol_json and d->run.target_json (clearing
 * what it held). Every loader does this (cal_store_load_run, the export and
 * shard readers); a caller that builds a cal_run_data itself calls it after
 * setting those texts. A damaged row still loads: what could not be read is
 * unknown and d->proto.n_damaged and .damaged say which field and why
 * (protocol_record.h); CAL_ENOMEM. */
int  cal_run_data_read_protocol(cal_run_data *d);

#define CAL_LOAD_CHUNKS    1  /* decode every request's chunk timestamps */
#define CAL_LOAD_NO_REQS   2  /* cells and summaries only (reqs empty) */
/* Load a run with its cells, requests and telemetry. *out malloc'd; free
 * with cal_run_data_free. CAL_ENOTFOUND if no such run. Every row is
 * checked against what readers index with it, so a damaged file cannot make
 * them read past a buffer: a cell's n_requests must equal its stored
 * requests, n_chunks must be >= 0 and the chunks blob exactly 4 × n_chunks
 * bytes (or absent), timestamps within [0, 2^62) ns (-1: unknown where
 * documented); otherwise CAL_ESTORE, with cal_store_errmsg naming the run,
 * cell, request and column. */
int  cal_store_load_run(cal_store *st, int64_t run_id, int flags,
                        cal_run_data **out);
void cal_run_data_free(cal_run_data **d);

#endif
