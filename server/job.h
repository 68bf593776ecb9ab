/* caliper serve — one request in flight ("job"), shared between the HTTP
 * thread(s) that send its bytes and the scheduler or pacer that produce them.
 * Internal to server/.
 *
 * Ownership: a job is reference-counted. The HTTP side holds one reference
 * per connection context and one per streaming response; the scheduler (or
 * pacer) holds one while the job is queued or running. cal_job_unref frees
 * it on the last release. Fields under `mu` are shared; fields marked
 * "producer" belong to the scheduler/pacer thread alone. */
#ifndef CALIPER_SERVER_JOB_H
#define CALIPER_SERVER_JOB_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "caliper/buf.h"
#include "engine/engine.h"
#include "server/request.h"

/* Bytes a job may hold unsent (a client that stops reading is dropped when
 * its stream exceeds this), and the cap of a non-streamed body. */
#define CAL_JOB_OUT_MAX (8u << 20)

typedef struct cal_job cal_job;
/* Called by the producer with j->mu held after it appended bytes or set
 * done, when j->parked is set: the HTTP side resumes its connection. */
typedef void (*cal_job_wake_fn)(cal_job *j);

struct cal_job {
    atomic_int      refs;
    cal_job        *next;          /* the scheduler's wait queue */
    /* immutable after submit */
    cal_srv_request req;           /* the parsed request (owns prompt text) */
    int32_t        *prompt;        /* [n_prompt] token ids (owned) */
    int             n_prompt;
    int             max_tokens;    /* resolved */
    char            id[48];        /* "cmpl-…" / "chatcmpl-…" */
    int64_t         created_s;     /* unix seconds, for "created" */
    int64_t         arrival_ns;    /* CLOCK_MONOTONIC when the body was complete */
    const char     *model;         /* the server's model name (outlives jobs) */
    /* shared, under mu */
    pthread_mutex_t mu;
    cal_buf         out;           /* bytes produced, not yet handed to HTTP */
    int             done;          /* no more bytes will be appended */
    int             cancelled;     /* the client went away: drop the job */
    int             parked;        /* HTTP side is waiting for bytes (suspended) */
    void           *conn;          /* HTTP connection while it lives, else NULL */
    cal_job_wake_fn wake;
    void           *wake_ctx;
    int             pace_due;      /* pace mode: chunks due so far */
    /* producer state */
    int             slot;          /* KV slot, -1 when not running */
    int             n_prefilled;   /* prompt tokens already in the KV cache */
    int             n_gen;         /* tokens generated */
    int             n_chunks;      /* content chunks emitted */
    int32_t         last_tok;      /* the token to feed next */
    uint64_t        rng;
    cal_tok_state   tok_state;
    int             finish;        /* 0 running, 1 length, 2 stop, 3 abort */
    int64_t         prefill_start_ns, prefill_end_ns, last_tok_ns;
    cal_buf         text;          /* non-streaming: the generated text */
    int             pace_sent;     /* pace mode: chunks already formatted (HTTP side) */
    char           *pace_tmpl;     /* pace mode: the chunk JSON up to send_ns's value */
};

/* A new job with one reference; NULL on ENOMEM. Takes ownership of *req
 * (zeroes it) and of prompt. */
cal_job *cal_job_new(cal_srv_request *req, int32_t *prompt, int n_prompt,
                     const char *model);
void     cal_job_ref(cal_job *j);
void     cal_job_unref(cal_job *j);

/* ---- output formatting (server/format.c) -------------------------------
 * SSE chunks and final bodies with OpenAI field names, built with jansson.
 * Each appends to j->out and returns CAL_OK or CAL_ETOOBIG/CAL_ENOMEM.
 * Callers hold j->mu. send_ns > 0 adds a top-level "send_ns" (pace mode). */
int cal_fmt_chunk(cal_job *j, const char *text, size_t n, int64_t send_ns);
/* The same chunk for pace mode, cheaper: built once per job, send_ns spliced. */
int cal_fmt_pace_chunk(cal_job *j, const char *text, size_t n, int64_t send_ns);
/* The last chunk(s) of a stream: finish_reason and timings, the usage chunk
 * when asked for, then "data: [DONE]". */
int cal_fmt_stream_end(cal_job *j);
/* The whole non-streamed body (text from j->text). */
int cal_fmt_body(cal_job *j);
/* The finish reason as OpenAI names it. */
const char *cal_fmt_finish(int finish);

#endif
