/* caliper recorder — for an engine that drives its own loop: record shots
 * from inside it into a store, as a run that `caliper show`, `report` and
 * `compare` treat like any other. The engine says when a shot begins and
 * ends, when each request begins, each token as it is ready, and when the
 * request ends; caliper takes every timestamp itself (CLOCK_MONOTONIC, in
 * the call), summarises each shot as one cell (the summary of SPEC 1.2)
 * and stores it with its requests.
 *
 *   cal_recorder *r;
 *   cal_recorder_open(store, &cfg, &r);         // the run, with its protocol
 *   for each shot:
 *       cal_recorder_shot_begin(r, NULL);
 *       for each request:
 *           int q = cal_recorder_request_begin(r, prompt_tokens);
 *           ... cal_recorder_token(r, q, 1) per token ...
 *           cal_recorder_request_end(r, q, CAL_OK, NULL);
 *       cal_recorder_shot_end(r);
 *   cal_recorder_close(&r, CAL_RUN_OK);
 *
 * Threads: every call takes the recorder's lock, so requests of one shot
 * may be noted from several threads. Calls return CAL_OK or a cal_err
 * (CAL_EINVAL names a misuse in cal_recorder_error: a token outside a
 * request, a shot begun twice). Nothing prints. */
#ifndef CALIPER_RECORDER_H
#define CALIPER_RECORDER_H
#include <stdint.h>
#include "caliper/fingerprint.h"
#include "caliper/store.h"

typedef struct cal_recorder_config {
    /* the run record */
    const char *label;          /* NULL: none */
    const char *build;          /* the engine program's build string, or NULL */
    const char *engine;         /* the engine's name (target record) */
    const char *model;          /* its model, or NULL */
    /* the protocol every shot follows (a shot may override load and lengths) */
    int    prompt_tokens;       /* requested prompt length (0: unknown, -1 stored) */
    int    max_tokens;          /* output length asked for */
    int    output_fixed;        /* 1: every request must produce max_tokens */
    int    concurrency;         /* requests in flight (0 = 1) */
    const char *content;        /* "prose", "code", "random", or NULL ("") */
    int    unique_prompts;
    double noise_floor;         /* for the shot verdict; 0 = default */
    double equivalence;         /* the bound its "no wall" claims; 0 = default */
    int    engine_fresh;        /* 1: the engine was loaded just before the
                                   first shot (it is cold); 0: unknown */
    int64_t engine_started_ns;  /* monotonic load time, for process age; 0 unknown */
} cal_recorder_config;

/* Per-shot overrides; zero fields keep the config's values. */
typedef struct cal_recorder_shot {
    cal_shot_kind kind;         /* CAL_SHOT_UNKNOWN: derived (first shot cold
                                   when engine_fresh, later ones warm, or
                                   rested after rest_before_ns > 0) */
    int     warmup;             /* 1: recorded, left out of summaries */
    int64_t rest_before_ns;     /* idle time before this shot */
    int     concurrency, prompt_tokens, max_tokens;
} cal_recorder_shot;

typedef struct cal_recorder cal_recorder;

/* Begin a run in st (status running). The store stays the caller's and
 * must outlive the recorder. CAL_EINVAL (st, cfg or engine NULL), CAL_ESTORE. */
int  cal_recorder_open(cal_store *st, const cal_recorder_config *cfg, cal_recorder **out);
int64_t cal_recorder_run_id(const cal_recorder *r);
/* The last misuse, in words ("" when none). */
const char *cal_recorder_error(const cal_recorder *r);

int  cal_recorder_shot_begin(cal_recorder *r, const cal_recorder_shot *shot);
/* Summarise and store the shot as one cell with its requests; a request
 * still open is stored as cancelled. */
int  cal_recorder_shot_end(cal_recorder *r);

/* Begin a request now (it is sent); returns its handle (>= 0) or a
 * cal_err. prompt_tokens: its prompt's length (-1 unknown). */
int  cal_recorder_request_begin(cal_recorder *r, int prompt_tokens);
/* n tokens are ready now (the first one ends the prefill). */
int  cal_recorder_token(cal_recorder *r, int req, int n);
/* The request ended: status CAL_OK, CAL_ECANCEL (cancelled) or another
 * error (a stream error, with msg). */
int  cal_recorder_request_end(cal_recorder *r, int req, int status, const char *msg);

/* Finish the run with its status (a shot still open is ended first) and
 * free the recorder; NULLs *r. The stored verdicts are the library's
 * (none yet for a single target): `show` and `report` judge the shots. */
int  cal_recorder_close(cal_recorder **r, cal_run_status status);

#endif
