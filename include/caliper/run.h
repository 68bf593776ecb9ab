/* caliper run — the library runs and records a whole shot series: the plan
 * (prompt lengths × concurrency or rate cells, shots, rest, warm-up, cold),
 * one target (two under A/B), the store, and an observer for progress. Every
 * cell is filled the same way whatever the target: prompts from the
 * workload, requests sent under the load shape, the summary of SPEC 1.2,
 * telemetry windows, one store transaction. `caliper run` is this API plus
 * flags and printing (docs/libcaliper.md).
 *
 * Targets are an ops struct (cal_run_target_ops). caliper ships two kinds:
 *   served   (cal_run_target_served): the built-in engine, a --url engine or
 *            a --launch'ed one, measured through the HTTP/SSE probe;
 *   in-process (cal_run_target_inproc): a callback an engine implements —
 *            prefill and decode one request, reporting each token as it comes
 *            (caliper takes the timestamp when the callback reports it).
 * Anyone may implement the ops for another kind.
 *
 * Library rules: nothing here prints, exits or installs signal handlers;
 * progress goes to the observer, Ctrl-C is the caller's `stop` flag. */
#ifndef CALIPER_RUN_H
#define CALIPER_RUN_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/analysis.h"
#include "caliper/arrivals.h"
#include "caliper/goodput.h"
#include "caliper/probe.h"
#include "caliper/protocol.h"
#include "caliper/store.h"
#include "caliper/workload.h"
#include "caliper/workload_traffic.h"

/* ---- targets: an ops struct ------------------------------------------ */

struct cal_run_plan;

typedef struct cal_run_target_ops {
    const char *kind;   /* "builtin", "url", "launch", "inproc", ... */
    /* Start the engine (or reach it), and again after stop for a fresh one
     * (--cold). stop: the caller's Ctrl-C flag (may be NULL). CAL_OK, or an
     * error with the reason in err[errn]. */
    int  (*start)(void *self, volatile int *stop, char *err, size_t errn);
    /* Stop what start started; safe to call when not started. */
    void (*stop)(void *self);
    /* Send reqs[0..n) under load and fill results[0..n): the contract of
     * cal_probe_run (every result initialised and given one status; stats
     * may be zero where a field means nothing for this target). */
    int  (*send)(void *self, const cal_request *reqs, size_t n, const cal_load *load,
                 cal_req_result *results, volatile int *stop,
                 cal_probe_progress_fn progress, void *ud, cal_probe_stats *stats);
    /* --- optional: NULL where the target has no such thing --- */
    /* Count the tokens of a text with the engine's tokenizer (exact prompt
     * lengths); CAL_EABSENT when it has none. NULL: prompts approximate. */
    int  (*count_tokens)(void *self, const char *text, int *n_tokens);
    /* Count texts[0..n) (several calls in flight at once); NULL: the run
     * calls count_tokens one text after another. */
    int  (*count_many)(void *self, const char *const *texts, size_t n, int *counts);
    /* The token ids of text (*ids malloc'd, the caller frees); CAL_EABSENT
     * when the tokenizer gives counts only. NULL: none. */
    int  (*token_ids)(void *self, const char *text, int32_t **ids, int *n);
    /* The tokens the server adds to every completions prompt beyond its
     * text's (a BOS), by its own tokenizer; CAL_EABSENT when it cannot
     * say. NULL: unknown. (A chat template's are measured by a request.) */
    int  (*count_specials)(void *self, const char *text, int *n_special);
    /* The plan the run will follow, before the first start (so an
     * in-process engine can size its workers and know the output policy). */
    void (*prepare)(void *self, const struct cal_run_plan *plan);
    int  (*alive)(void *self);            /* 0: the engine is gone (NULL: always 1) */
    int64_t (*started_ns)(void *self);    /* monotonic start of the fresh engine; -1 */
    int  (*pid)(void *self);              /* engine process for telemetry; 0 none */
    /* Why it stopped answering, one line (a launched engine's log tail). */
    void (*why_failed)(void *self, char *out, size_t n);
    /* What made the tokenizer's calls fail, one line ("POST /tokenize timed
     * out after 30 s with no answer"); NULL when it has not failed so. */
    const char *(*tokenizer_why)(void *self);
    /* The target as a JSON object (malloc'd): kind, name, model, version,
     * url, command, load_s, api, detail. NULL on ENOMEM. */
    char *(*describe)(void *self);
    /* What to call it in messages: "the built-in engine", a URL, a command. */
    const char *(*what)(void *self);
    void (*destroy)(void *self);          /* free self (after stop) */
} cal_run_target_ops;

/* A target: its ops, its state, and two facts the run model needs. */
typedef struct cal_run_target {
    const cal_run_target_ops *ops;
    void *self;
    int   fresh_on_start;   /* start gives a fresh engine: its first shot is cold
                               (0: someone else's engine, the first shot is unknown) */
    int   restartable;      /* stop + start gives a fresh engine (--cold works) */
} cal_run_target;
/* Stop it, destroy self, free it, NULL *t. NULL-safe. */
void cal_run_target_free(cal_run_target **t);

/* Served: the built-in engine, a URL, or a launched command, through the
 * probe. cfg->target says which (its stop field is ignored: the run's stop
 * flag is used). cfg->probe: base_url is set at each start; model NULL
 * means the first id of /v1/models (asked once, bounded by
 * models_timeout_ns, 0 = 5 s). The server's POST /tokenize counts prompt
 * tokens, each call bounded by tokenize_timeout_ns (0 = 30 s). Both read
 * the run's stop flag while they wait. name and
 * version go to the description (NULL: the preset, command or URL; the
 * model). Everything is copied. CAL_EINVAL, CAL_ENOMEM. */
typedef struct cal_served_config {
    cal_target_config target;
    cal_probe_config  probe;
    int64_t models_timeout_ns, tokenize_timeout_ns;
    const char *version;     /* a label for the engine's version, or NULL */
} cal_served_config;
int cal_run_target_served(const cal_served_config *cfg, cal_run_target **out);

/* ---- the in-process target -------------------------------------------
 * The engine implements generate(): prefill the prompt, then decode,
 * calling cal_inproc_token() as each token (or chunk of tokens) is ready.
 * caliper stamps the time in that call, so the engine never reads a clock.
 * Per request caliper records send (generate is called), first and last
 * token, end (generate returned) and every token's time, exactly the
 * fields the probe records for a served engine, so the same summary,
 * store, shots, verdicts and reports apply.
 *
 * Concurrency: a closed-loop cell of concurrency c runs c worker threads;
 * each takes the next request (in index order) when its previous one ends
 * (or at the request's sched_ns when that is later: the chat scenario's
 * think times and a replay's gaps) and calls generate with worker = its index 0..c−1, so at most c
 * generate calls run at once and each worker's calls are sequential. An
 * engine that is not thread-safe serialises inside generate (a lock around
 * each step interleaves the c sequences token by token). An open-loop cell
 * (rate > 0) releases each request at its Poisson arrival (the probe's
 * seeded draw) to the first idle worker, c workers as the cap (0: 64);
 * latency counts from the arrival. Idle timeouts do not apply in-process.
 * A deadline or the stop flag makes cal_inproc_token return CAL_ECANCEL:
 * generate should then return promptly (the request ends cancelled). */
typedef struct cal_inproc_stream cal_inproc_stream;

typedef struct cal_inproc_request {
    const char *prompt;     /* the full prompt text (UTF-8) */
    int      max_tokens;    /* tokens to generate (exactly, when ignore_eos) */
    int      ignore_eos;    /* 1: generate max_tokens whatever the model says */
    int      worker;        /* 0 .. concurrency−1 */
    uint64_t index;         /* the request's index within its cell */
} cal_inproc_request;

typedef struct cal_inproc_engine {
    const char *name;       /* the engine, for the run's target record */
    const char *model;      /* the model it serves, or NULL */
    void *ud;               /* passed to every callback */
    /* Load the engine (called by start; again after close under --cold);
     * max_workers: the most concurrent generate calls the plan needs (the
     * largest concurrency; 64 for an uncapped rate cell), so worker is
     * always below it. NULL: always ready. */
    int  (*open)(void *ud, int max_workers, char *err, size_t errn);
    void (*close)(void *ud);
    /* One request: CAL_OK when it ran to its end (or was cancelled through
     * cal_inproc_token), another cal_err when it failed (the request is a
     * stream error, with cal_inproc_fail's message when one was given). */
    int  (*generate)(void *ud, const cal_inproc_request *rq, cal_inproc_stream *s);
    /* The engine's tokenizer, for exact prompt lengths (NULL: approximate).
     * Called from the run's thread, never during generate calls. */
    int  (*count_tokens)(void *ud, const char *text, int *n_tokens);
} cal_inproc_engine;

/* From generate: the prompt was prefilled, with n tokens (n < 0: unknown).
 * Optional; the request's prompt token count comes from here. */
void cal_inproc_prefilled(cal_inproc_stream *s, int n_tokens);
/* From generate: n_tokens new tokens are ready (n >= 1), stamped now.
 * Returns CAL_OK to go on, CAL_ECANCEL when the run wants the request to
 * stop (deadline or stop flag). */
int  cal_inproc_token(cal_inproc_stream *s, int n_tokens);
/* From generate, before returning an error: the message stored with the
 * request (copied, capped at 256 bytes). */
void cal_inproc_fail(cal_inproc_stream *s, const char *msg);

/* The engine struct is copied (the strings too); ud must outlive the
 * target. CAL_EINVAL without generate, CAL_ENOMEM. */
int cal_run_target_inproc(const cal_inproc_engine *e, cal_run_target **out);

/* ---- the plan --------------------------------------------------------- */

#define CAL_RUN_MAX_LIST 32
/* A --duration cell keeps issuing requests until its time is up. It runs
 * in rounds: the first of 64 × concurrency requests (rate × duration × 1.5
 * + 16 open loop); while time is left, another sized from the rate so far
 * (at most doubling the cell, and no more prompts than take 2 % of the
 * time left to build). Between rounds the requests in flight drain and the
 * next round's prompts are built: a short gap, counted in the cell's wall
 * clock, so the aggregate column is, if anything, low. The requests in flight at the end are stored cancelled.
 * A cell stops early only at this many requests, and says so in a note. */
#define CAL_RUN_MAX_CELL_REQUESTS (1L << 18)

typedef struct cal_run_plan {
    int      prompt_tokens[CAL_RUN_MAX_LIST];  /* each a cell; n 0 = {256} */
    size_t   n_prompt;
    int      concurrency[CAL_RUN_MAX_LIST];    /* closed-loop cells; n 0 = {1} */
    size_t   n_conc;
    double   rate;           /* > 0: one open-loop cell per prompt length at
                                rate req/s, concurrency[0] the in-flight cap
                                when cap_given (else no cap) */
    int      cap_given;
    cal_arrivals pattern;    /* rate > 0: the arrival pattern (arrivals.h);
                                kind POISSON (zeroed) is Poisson at rate; a
                                RAMP or BURST replaces rate (which must then
                                be its mean, cal_arrivals_mean_rate) */
    cal_slo  slo;            /* goodput's bounds (goodput.h); zeroed: none,
                                every cell's goodput unknown */
    int      sweep;          /* 1: a saturation sweep (saturation.h) of rate
                                cells from rate up to sweep_max_rate in at
                                most sweep_steps steps, stopping when goodput
                                stops rising; needs an slo and a Poisson rate */
    double   sweep_max_rate; /* req/s; 0 = 16 × rate (at most 1e5); a sweep
                                with rate 0 starts at 1 req/s */
    int      sweep_steps;    /* 0 = 8 */
    long     requests;       /* per cell; 0: max(8, 2c), or max(8, 4 × rate) */
    double   duration_s;     /* > 0: run each cell for this long instead */
    int      shots;          /* measured shots (0 = 1) */
    int      warmup;         /* shots first, recorded as warm-up */
    double   rest_s;         /* idle time before every shot after the first */
    int      cold;           /* a fresh engine for every shot (restartable targets) */
    double   noise_floor;    /* the narrowest verdict band; 0 = CAL_SHOT_NOISE_FLOOR */
    double   equivalence;    /* the largest change a "no wall" verdict rules out,
                                relative; 0 = CAL_JUDGE_EQUIV (judge.h) */
    cal_content content;
    int      max_tokens;     /* 0 = 64 */
    int      free_output;    /* 1: the model may stop early (no fixed length) */
    int      allow_prefix;   /* 1: identical prompts (no nonce line) */
    uint64_t seed;           /* prompt nonces and arrivals */
    /* telemetry: sample clocks and power over the run */
    int      telemetry;
    double   interval_s;     /* 0 = 250 ms */
    const char *telemetry_off_why;  /* stored when telemetry is 0 (NULL: "off") */
    /* the run record */
    const char *label;       /* a name for the run, or NULL */
    const char *build;       /* the measuring program's build string */
    /* a JSON object merged into the stored protocol (the API, the body, the
     * timeouts: what the caller sent that the plan does not hold), or NULL */
    const char *protocol_extra_json;
    /* raw chunk timestamps the run keeps (keep.h): 0 the default budget
     * (CAL_KEEP_DEFAULT), CAL_KEEP_ALL, CAL_RUN_KEEP_NONE, or a count; every
     * latency also goes into each cell's histograms, stored beside it */
    long long keep_chunks;
    /* > 0: the first shot starts at this CLOCK_MONOTONIC instant (after the
     * targets are up), so several clients start together (shard.h) */
    int64_t  start_mono_ns;
    /* ---- traffic (workload_traffic.h, docs/workload.md); zeroed: none ---- */
    const cal_dataset *dataset;  /* prompts drawn from it (seeded, with
                                    replacement): one cell per load point, the
                                    prompt length list ignored; the protocol
                                    names the dataset and its SHA-256 */
    cal_lendist prompt_len;      /* UNIFORM / NORMAL: each request draws its
                                    prompt length (one cell per load point);
                                    DATASET: the entries' own (with dataset);
                                    FIXED: the prompt_tokens list */
    cal_lendist output_len;      /* the same for max_tokens (FIXED: max_tokens) */
    const cal_chat_config *chat; /* the chat scenario: a shot is its turns, one
                                    cell per turn index (the users of a turn in
                                    flight together); count and seed are set
                                    by the run (the target's tokenizer, the
                                    shot's seed), the other fields are used */
    const char *replay_log;      /* a caliper proxy --log's bytes: a shot is
                                    its recorded turns, one cell per turn index */
    size_t   replay_len;
    const char *replay_name;     /* the log's name for the protocol */
    double   replay_speed;       /* recorded gaps ÷ this (0 = 1) */
} cal_run_plan;
#define CAL_RUN_KEEP_NONE (-2LL)

/* The calibrated default protocol (docs/run.md): a warm-up shot, then 5
 * measured shots, whose verdict's error rates bench/verdicts measures. */
#define CAL_RUN_DEFAULT_SHOTS  5
#define CAL_RUN_DEFAULT_WARMUP 1
/* A plan with the defaults above and the calibrated shots: one 256-token
 * prompt, c1, 8 requests, a warm-up and CAL_RUN_DEFAULT_SHOTS shots, prose,
 * 64 output tokens, telemetry on: what `caliper run` with no shot flag
 * measures. */
void cal_run_plan_default(cal_run_plan *p);
/* Fill the zeros that stand for a default with it (lib/protocol/plan.c):
 * no prompt length {256}, no concurrency {1}, shots 1, max_tokens 64; a
 * drawn length or a dataset makes one cell per load point; a RAMP or BURST
 * pattern's mean as the rate; a sweep starts at 1 req/s with 8 steps up to
 * 16 × its start (at most 1e5/s). What cal_run_series follows. */
void cal_run_plan_fill(cal_run_plan *p);

/* ---- checking a plan ---------------------------------------------------
 * Every bound and cross-field rule of a plan lives in cal_plan_check, and a
 * failure names the plan field at fault by its name in cal_run_plan
 * ("rate", "sweep_steps", "prompt_tokens", "duration_s", ...; a chat
 * config's "chat.user_tokens"; "pattern" for the arrival pattern, "slo"),
 * its value as text, and a sentence that spells no command-line flag: a
 * caller maps the field to its own spelling (`caliper run` to its flags).
 * Rules between the plan and a target (cold needs a restartable one) are
 * cal_run_series's. */
typedef struct cal_plan_error {
    const char *field;    /* a static string: the field at fault; NULL when none */
    char value[96];       /* its value as text ("0", "ramp:1-4/2s", "none") */
    char why[400];        /* what is wrong, a sentence without flags */
} cal_plan_error;

/* Check the plan (its zeros read as cal_run_plan_fill fills them; the plan
 * is not changed). CAL_OK, or CAL_EINVAL with *e filled (e may be NULL). */
int cal_plan_check(const cal_run_plan *p, cal_plan_error *e);
/* "field value: why" into buf[n]; returns buf. */
const char *cal_plan_error_text(const cal_plan_error *e, char *buf, size_t n);

/* ---- the observer ------------------------------------------------------ */

typedef enum cal_run_event_kind {
    CAL_RUN_EV_STARTING = 0,  /* a target is being started (text: what, kind) */
    CAL_RUN_EV_BEGUN,         /* the run is in the store (run_id, shots, cells) */
    CAL_RUN_EV_REST,          /* resting `seconds` before shot `shot` */
    CAL_RUN_EV_PREPARING,     /* building a cell's prompts (label; done of total
                                 prompts when it takes over a second) */
    CAL_RUN_EV_PROGRESS,      /* done of total requests of the cell (label) */
    CAL_RUN_EV_CELL,          /* a cell is stored (cell, label) */
    CAL_RUN_EV_NOTE           /* something worth saying (text) */
} cal_run_event_kind;

typedef struct cal_run_event {
    cal_run_event_kind kind;
    const char *side;          /* "" or "A" / "B" */
    const char *text;          /* STARTING: what; NOTE: the note */
    const char *field;         /* NOTE: the plan field it is about, whose value
                                  starts the text ("prompt_tokens"), or NULL */
    const char *target_kind;   /* STARTING: the ops' kind */
    const char *label;         /* "shot 2 · c4 · 256 tok" (A/B: "A · shot 2 · …") */
    int64_t run_id;
    int     shot;              /* 1-based, warm-ups included */
    int     total_shots, cells_per_shot;   /* BEGUN */
    int     plan_warmup;                   /* BEGUN: warm-up shots among them */
    double  seconds;           /* REST */
    size_t  done, total;       /* PROGRESS */
    const cal_cell *cell;      /* CELL */
} cal_run_event;

/* Events come one at a time; PROGRESS may come from the target's threads
 * (the in-process workers), every other event from the caller's thread. */
typedef struct cal_run_observer {
    void (*fn)(void *ud, const cal_run_event *ev);   /* NULL: silent */
    void *ud;
} cal_run_observer;

/* ---- running a series ------------------------------------------------- */

typedef struct cal_run_outcome {
    int64_t run_id;            /* 0 when the run never reached the store */
    cal_run_status status;     /* OK, INTERRUPTED (stop), FAILED (target) */
    char    message[1400];     /* why it failed, "" otherwise */
    cal_run_data *data;        /* the run loaded back (chunks included), its
                                  status and stored verdicts set; NULL when
                                  it could not be loaded */
    cal_analysis *analysis;    /* its analysis (analysis.h): the groups, the
                                  shots each quotes, the pooled summaries and
                                  the verdicts as data; points into data;
                                  NULL when data is */
    int64_t failed_requests;   /* requests not ok, less the ones a --duration
                                  deadline cut (stored as cancelled) */
} cal_run_outcome;
void cal_run_outcome_clear(cal_run_outcome *o);

/* Verdicts: given the run as loaded back, return a JSON array (malloc'd)
 * to store with it: verdict objects (analysis.h) or sentences. NULL:
 * cal_run_verdicts. Either way a failure is added. */
typedef char *(*cal_run_verdicts_fn)(void *ud, const cal_run_data *d);

typedef struct cal_run_args {
    const cal_run_plan *plan;
    cal_run_target *targets[2];  /* [1] non-NULL: A/B, alternating each shot */
    cal_store *store;
    cal_run_observer observer;
    volatile int *stop;          /* non-zero: stop, store what was measured */
    cal_run_verdicts_fn verdicts;
    void *verdicts_ud;
} cal_run_args;

/* Run the series: start the targets, build the workloads, begin the run in
 * the store, run every shot (warm-ups first; rest before each later shot;
 * --cold restarts), every cell of each shot, store each cell with its
 * requests, then finish the run with its status and verdicts and load it
 * back into out->data. Every request is accounted for: a cell's statuses
 * add up to its n_requests. What was measured before a stop or a target
 * failure is stored (status INTERRUPTED or FAILED).
 *
 * Returns CAL_OK when the run reached the store (whatever its status:
 * read out->status), CAL_ECANCEL when stopped before it began, CAL_EIO
 * when a target could not start (out->message says why), CAL_ESTORE,
 * CAL_EINVAL (a bad plan: message names the field), CAL_ENOMEM. The
 * targets are started (and restarted under cold) and stopped here, on the
 * calling thread (a target's death_signal follows that thread); the caller
 * frees them. */
int cal_run_series(const cal_run_args *args, cal_run_outcome *out);

/* The library's verdicts of a stored run: the run analysis's (analysis.h,
 * cal_analysis_verdicts_json: shot series per configuration under the run's
 * noise floor, the clock and power checks of a drop, A/B pairs, failures,
 * output length, the client self-check), as JSON objects; malloc'd, NULL
 * on ENOMEM. */
char *cal_run_verdicts(const cal_run_data *d);

#endif
