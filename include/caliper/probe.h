/* caliper probe — the HTTP/SSE client that measures an OpenAI-compatible
 * server. libcurl's multi interface drives the concurrent streams from one
 * event loop per thread (cfg.loops of them; one by default, on the caller's
 * thread); each chunk gets a CLOCK_MONOTONIC timestamp (ns) taken when its
 * bytes arrive, before any parsing, whichever readiness backend waited
 * (epoll, kqueue or poll: CALIPER_LOOP below).
 *
 * Ownership: cal_probe_open copies the config; results are filled into the
 * caller's array and own their heap fields (free with cal_req_result_free).
 * Every request ends in exactly one status: the counts always add up. */
#ifndef CALIPER_PROBE_H
#define CALIPER_PROBE_H
#include <stddef.h>
#include <stdint.h>
#include "caliper/buf.h"

typedef enum cal_api { CAL_API_COMPLETIONS = 0, CAL_API_CHAT = 1 } cal_api;

typedef enum cal_req_status {
    CAL_REQ_OK = 0,
    CAL_REQ_HTTP_ERROR,     /* non-2xx: status and body kept */
    CAL_REQ_TIMEOUT,        /* connect timeout, no bytes for idle_timeout, or
                               not done request_timeout after it was sent */
    CAL_REQ_CONNECT_ERROR,  /* could not connect / refused / reset before reply */
    CAL_REQ_STREAM_ERROR,   /* truncated, malformed, reset mid-stream, error
                               event, closed with neither [DONE] nor a
                               finish_reason/usage chunk, or more content
                               chunks than cal_probe_max_chunks allows */
    CAL_REQ_CANCELLED,      /* *stop or the load deadline came first (unsent
                               requests too: their send_ns is 0) */
    CAL_REQ_N_STATUS
} cal_req_status;
const char *cal_req_status_name(cal_req_status s);   /* "ok", "http_error", ... */

typedef enum cal_tok_source {
    CAL_TOKSRC_USAGE = 0,   /* the server's usage object */
    CAL_TOKSRC_CHUNKS = 1   /* counted content chunks (no usage given) */
} cal_tok_source;

typedef struct cal_probe_config {
    const char *base_url;       /* "http://127.0.0.1:8080" (no /v1 suffix needed) */
    cal_api     api;
    const char *model;          /* NULL: omit the field */
    const char *api_key;        /* NULL: no Authorization header; never stored;
                                   over CAL_API_KEY_MAX bytes: CAL_ETOOBIG */
    const char *extra_body;     /* JSON object merged into each request, or NULL;
                                   a null value removes that field */
    int         ignore_eos;     /* send ignore_eos (and min_tokens = max_tokens) */
    int64_t     connect_timeout_ns;  /* 0 = default 10 s */
    int64_t     idle_timeout_ns;     /* no bytes for this long = timeout; 0 = 60 s */
    int64_t     request_timeout_ns;  /* a request not done this long after it was
                                        sent ends as timeout, however its bytes keep
                                        coming (an SSE comment every second resets
                                        the idle timer, never this); 0 = derived
                                        from each request's max_tokens: see
                                        cal_probe_request_timeout_ns */
    int         keep_chunks;    /* keep every chunk timestamp in the result (a
                                   request carries at most cal_probe_max_chunks) */
    int         keep_text;      /* keep the generated text in the result */
    int         keep_send_ns;   /* keep each content chunk's top-level "send_ns"
                                   (a pacing server's send time) in
                                   chunk_send_ns; for measuring the probe */
    int         raise_nofile;   /* raise this process's RLIMIT_NOFILE soft limit
                                   (process-wide) to fit the run's connections;
                                   0: leave it as the caller set it */
    int         loops;          /* event loops, one thread each (0 or 1: one, on
                                   the calling thread; at most CAL_PROBE_MAX_LOOPS,
                                   never more than the requests in flight at
                                   once). The streams are sharded across them;
                                   the results are merged: the same records and
                                   statistics one loop gives. CAL_PROBE_LOOPS_AUTO:
                                   cal_probe_default_loops(0) at open) */
    int         no_connect_ahead;   /* 1: open each connection when its first
                                   request goes out (that request pays the TCP
                                   handshake). 0, the default: before the run's
                                   start, open one TCP connection per slot of
                                   a closed loop (min(concurrency, requests);
                                   an open loop's cap when given and its times
                                   count from the start), each handed to the
                                   slot's first request; libcurl keeps reusing
                                   it as a keep-alive client does. Not done when
                                   a proxy variable is set (the connection would
                                   go elsewhere). See docs/run.md. */
} cal_probe_config;

#define CAL_PROBE_MAX_LOOPS 64
#define CAL_PROBE_LOOPS_AUTO (-1)

/* The loops a run on this machine should use when not told: the CPUs this
 * process may run on, less those a local engine's process (engine_pid > 0)
 * is pinned to, when it is pinned to fewer than all of them; at least 1, at
 * most CAL_PROBE_MAX_LOOPS. */
int cal_probe_default_loops(int engine_pid);

/* One request to send. sched_ns is when it is due (CLOCK_MONOTONIC). Closed
 * loop: the probe releases a request when a slot frees and records as its
 * sched_ns the last byte of the request that held the slot (run start for the
 * first ones), or the given sched_ns if later. Open loop: a non-zero sched_ns
 * replaces the drawn Poisson arrival. Requests are sent in index order. */
typedef struct cal_request {
    const char *prompt;         /* text (completions) or the user message (chat) */
    int         max_tokens;
    int64_t     sched_ns;       /* 0 = as soon as a concurrency slot is free */
} cal_request;

typedef struct cal_req_result {
    cal_req_status status;
    int      http_status;       /* 0 when no response */
    char    *error;             /* body (capped) or message; NULL when ok */
    int64_t  sched_ns;          /* when it was due */
    int64_t  send_ns;           /* when curl was handed the request */
    int64_t  first_token_ns;    /* first chunk carrying generated text; 0 if none */
    int64_t  last_token_ns;     /* last chunk carrying generated text */
    int64_t  end_ns;            /* transfer done (after [DONE]/usage) */
    int      prompt_tokens;     /* from usage; -1 when unknown */
    int      output_tokens;     /* see tok_source; -1 when unknown */
    cal_tok_source tok_source;
    int      n_chunks;          /* content chunks received */
    int64_t *chunk_ns;          /* [n_chunks] arrival times, when keep_chunks */
    char    *text;              /* generated text, when keep_text */
    /* llama.cpp-style server timings when the server sends them; -1 if not */
    double   server_prefill_ms, server_decode_ms;
    int      server_decode_tokens;
    int64_t  first_byte_ns;     /* first response byte (headers); 0 if none */
    int64_t *chunk_send_ns;     /* [n_chunks] server send_ns, when keep_send_ns
                                   (-1 where a chunk had none) */
    int      cached_tokens;     /* prompt tokens the server took from its prefix
                                   cache (usage.prompt_tokens_details.cached_tokens,
                                   else llama.cpp's timings.cache_n); -1 when it
                                   does not say (stored since schema 9) */
} cal_req_result;
/* A result not yet ended: status cancelled, token counts and server timings
 * -1 (unknown), tokens counted from chunks, everything else 0. */
void cal_req_result_init(cal_req_result *r);
void cal_req_result_free(cal_req_result *r);

/* The deadline of one request, in ns after it is sent: cfg->request_timeout_ns
 * when non-zero, else connect timeout + idle timeout (their defaults when 0)
 * + 1 s per token of max_tokens (4096 tokens when max_tokens <= 0, the server
 * then choosing the length). That is one idle period for the first byte and a
 * floor of one token a second after it: a stream slower than that is not one
 * to wait on. Defaults, max_tokens 64: 10 + 60 + 64 = 134 s. Saturates at
 * INT64_MAX; cfg NULL reads as all defaults. */
int64_t cal_probe_request_timeout_ns(const cal_probe_config *cfg, int max_tokens);

/* The most content chunks one request may carry: 4 x max_tokens + 256 (room
 * for n <= 4 choices, tokens split over chunks and short preambles), 1 Mi when
 * max_tokens <= 0, never more than 4 Mi. One more ends the request as
 * stream_error "server sent more than asked", so a stream that never ends
 * holds at most this many timestamps (16 bytes each with keep_chunks and
 * keep_send_ns) and memory stays bounded by the requests of a run. */
int cal_probe_max_chunks(int max_tokens);

/* Load shape: closed loop (concurrency > 0, rate = 0) keeps `concurrency`
 * requests in flight; open loop (rate > 0) sends at Poisson arrivals with
 * mean rate req/s (seeded), latency counted from the scheduled time so
 * client-side queueing is not hidden; concurrency then caps in-flight
 * requests (0 = no cap). */
typedef struct cal_load {
    int      concurrency;
    double   rate;              /* req/s, 0 = closed loop */
    uint64_t seed;
    int64_t  deadline_ns;       /* absolute; 0 = none. Unsent requests at the
                                   deadline end as cancelled. */
    int      from_start;        /* 1: a non-zero deadline_ns and the non-zero
                                   sched_ns of the requests count ns from the
                                   run's start (stats.start_ns: after the
                                   bodies are built and connections opened),
                                   not from CLOCK_MONOTONIC's zero */
    /* Called as each sent request ends, with its final result, before
     * progress; on the thread that ran it (several threads may call at
     * once). It may fold the chunk timestamps into histograms and free
     * chunk_ns (setting it NULL, n_chunks kept): --keep-chunks. NULL: none.
     * index is the request's position in the caller's arrays: r itself may
     * be a loop's working copy (--loops), moved there after the run. */
    void   (*on_end)(void *ud, size_t index, cal_req_result *r);
    void    *on_end_ud;
} cal_load;

/* One event loop's part of a run. */
typedef struct cal_probe_loop_stats {
    int64_t requests, chunks;   /* its share, and the events it parsed */
    int64_t cpu_ns, wall_ns;    /* its thread's CPU time, and its wall time */
    double  send_lag_p99_ms;    /* send − sched over its requests */
} cal_probe_loop_stats;

/* The probe's self-check over one cal_probe_run call. */
typedef struct cal_probe_stats {
    int64_t cpu_ns;             /* the probe's CPU time, all loops' threads */
    int64_t wall_ns;
    int64_t chunks;             /* all chunks parsed */
    double  send_lag_p50_ms, send_lag_p99_ms;   /* send − sched */
    double  send_lag_max_ms;
    int64_t bytes;              /* response bytes received */
    int64_t implausible;        /* server usage or timings values out of a plausible
                                   range, stored as unknown (cal_chunk.implausible) */
    int     max_in_flight;      /* most requests in flight at once (with several
                                   loops, the sum of each loop's most) */
    int     n_status[CAL_REQ_N_STATUS];   /* requests per status */
    int     first_fail;         /* index of the first request (in request
                                   order) that ended neither ok nor cancelled;
                                   -1 when none did */
    char    first_fail_msg[256];/* its error text (truncated), "" when none */
    int     wait_fallback;      /* 1: a loop waited with ms timeouts: epoll_wait
                                   because epoll_pwait2 is missing (kernels
                                   before 5.11, or said to be), or poll() */
    char    loop_backend[8];    /* "epoll", "kqueue" or "poll" */
    int     n_loops;            /* event loops the run used */
    cal_probe_loop_stats loop[CAL_PROBE_MAX_LOOPS];   /* [n_loops] */
    int     saturated_loop;     /* a loop that could not keep up (its thread
                                   on a CPU >= 90 % of its wall time), the
                                   busiest such; -1: none */
    int64_t start_ns;           /* the run's start (CLOCK_MONOTONIC): the first
                                   wave is due from here; 0 when nothing ran */
    int64_t prepare_ns;         /* before it: slots, the first wave's bodies and
                                   the connections opened ahead (wall) */
    int     connected_ahead;    /* connections opened before start_ns */
    int     used_ahead;         /* requests that went out on one of them */
    int     handle_resets;      /* curl handles reset between requests: after a
                                   retried or failed transfer (libcurl 7.x counts
                                   retries over a handle's life) */
    int     first_wave;         /* requests of the first wave: the first
                                   min(concurrency, n) in request order (0: an
                                   open loop without a cap, unknown) */
    double  first_lag_p50_ms, first_lag_p99_ms;   /* send − sched over the
                                   first wave's sent requests; NAN: unknown
                                   (none sent, or no first wave) */
} cal_probe_stats;

/* One line on the loops: "2 loops (epoll): loop 0: 64 requests, CPU 41 %,
 * send lag p99 0.12 ms; loop 1: ...; loop 1 saturated". Returns
 * saturated_loop. buf may be NULL with size 0. */
int  cal_probe_loops_summary(const cal_probe_stats *st, char *buf, size_t size);

/* One line for a person on what went wrong in a run: "4 stream_error; first
 * (request 0): malformed event: ..." (counts of every failing status, then
 * the first failure's text), or "" when nothing failed. Returns the number
 * of requests that ended neither ok nor cancelled. buf may be NULL with
 * size 0. */
int  cal_probe_failure_summary(const cal_probe_stats *st, char *buf, size_t size);

/* The body sent: {model, prompt | messages:[{role:"user",content}],
 * max_tokens (when > 0), stream:true, stream_options:{include_usage:true},
 * ignore_eos:true and min_tokens = max_tokens (when ignore_eos)}, then the
 * extra_body keys on top (they win; a null deletes the field). URL: base_url + "/v1" (unless base_url
 * already ends in /v1) + "/completions" or "/chat/completions".
 * cal_probe_open: CAL_EINVAL for a missing base_url, an unknown api or an
 * extra_body that is not a JSON object; CAL_ERANGE for negative timeouts or loops
 * (other than CAL_PROBE_LOOPS_AUTO);
 * CAL_ENOMEM. cal_probe_close NULLs *p; NULL is fine. */
typedef struct cal_probe cal_probe;
int  cal_probe_open(const cal_probe_config *cfg, cal_probe **out);
/* The loop backends built here, for messages: "epoll, poll". */
const char *cal_probe_loop_backends(void);
void cal_probe_close(cal_probe **p);

/* The environment variable CALIPER_LOOP (read by cal_probe_open) picks the
 * readiness backend: "epoll" (Linux), "kqueue" (macOS, the BSDs) or "poll"
 * (any POSIX system); unset, the build's own (epoll on Linux). A name not
 * built here: cal_probe_open answers CAL_EINVAL. CALIPER_PROBE_NO_PWAIT2=1
 * (read by each run) makes the epoll backend act as if epoll_pwait2 answered
 * ENOSYS, the way a kernel before 5.11 does, so that the epoll_wait fallback
 * can be tested anywhere. */

/* Progress callback after each request ends (may be NULL). */
typedef void (*cal_probe_progress_fn)(void *ud, size_t done, size_t total);

/* Send reqs[0..n) under the load shape; fill results[0..n) (each is
 * initialised first, so every one has a status even on failure: free each
 * with cal_req_result_free). Returns CAL_OK when every request has a result
 * (whatever their statuses; a passed deadline too), CAL_ECANCEL if *stop
 * became non-zero (the rest end as cancelled), CAL_EINVAL for a bad load
 * (closed loop with concurrency 0, negative rate) or a NULL / non-UTF-8
 * prompt (checked before anything is sent), CAL_ENOMEM. stop may be NULL;
 * it is polled at least every 100 ms. Raises RLIMIT_NOFILE's soft limit when
 * the concurrency needs it. Not thread-safe per probe; one run at a time. */
int  cal_probe_run(cal_probe *p, const cal_request *reqs, size_t n,
                   const cal_load *load, cal_req_result *results,
                   volatile int *stop, cal_probe_progress_fn progress, void *ud,
                   cal_probe_stats *stats);

/* ---- SSE parser (exposed for tests and the fuzz target) ------------------
 * Feed bytes in any split; LF or CRLF or CR line ends, comments (":..."),
 * multi-line data (joined by "\n"), events dispatched on a blank line. Each
 * dispatched event's data goes to on_event. Lines are capped (CAL_ETOOBIG). */
typedef int (*cal_sse_event_fn)(void *ud, const char *data, size_t len);
typedef struct cal_sse cal_sse;
int  cal_sse_open(size_t max_event_bytes, cal_sse_event_fn fn, void *ud, cal_sse **out);
int  cal_sse_feed(cal_sse *s, const char *bytes, size_t n);
/* End of stream. An event not terminated by a blank line is discarded (per
 * the spec) and reported: CAL_OK when the stream ended on an event boundary,
 * CAL_EPROTO when it was cut inside one. Resets the parser for a new stream.
 * cal_sse_feed returns the first non-zero value on_event returned (and stops
 * there), CAL_ETOOBIG past the cap, else CAL_OK. */
int  cal_sse_finish(cal_sse *s);
void cal_sse_close(cal_sse **s);

/* ---- Chunk interpreter (exposed for tests and the fuzz target) ----------
 * One SSE event's data (or a whole non-streaming JSON body) in the OpenAI
 * shapes: completions choices[i].text; chat choices[i].delta.content,
 * .reasoning_content/.reasoning and tool-call arguments (all generated text);
 * non-streaming choices[i].message.*; usage; llama.cpp timings; in-stream
 * errors ({"error":...} or {"object":"error",...}). A role-only chat chunk
 * carries no text and so is not a token chunk. */
enum {
    CAL_CHUNK_DONE    = 1 << 0,   /* the "[DONE]" sentinel */
    CAL_CHUNK_TEXT    = 1 << 1,   /* non-empty generated text */
    CAL_CHUNK_USAGE   = 1 << 2,   /* a usage object with completion_tokens */
    CAL_CHUNK_TIMINGS = 1 << 3,   /* llama.cpp timings object */
    CAL_CHUNK_ERROR   = 1 << 4,   /* an error object: message in error[] */
    CAL_CHUNK_FINISH  = 1 << 5,   /* a non-null finish_reason */
    CAL_CHUNK_SEND_NS = 1 << 6,   /* a top-level integer "send_ns" */
    CAL_CHUNK_IMPLAUSIBLE = 1 << 7 /* a usage or timings value was out of range
                                     and dropped (implausible > 0) */
};
/* The plausible range of what a server reports (above it: absent, counted). */
#define CAL_CHUNK_COUNT_MAX 1e9    /* tokens in a usage or timings count */
#define CAL_CHUNK_MS_MAX    1e9    /* ms in a timings value (11.6 days) */
typedef struct cal_chunk {
    unsigned flags;             /* CAL_CHUNK_* */
    size_t   text_bytes;        /* generated text bytes in this chunk */
    int      prompt_tokens;     /* usage; -1 when absent */
    int      completion_tokens; /* usage; -1 when absent */
    double   prefill_ms, decode_ms;   /* timings.prompt_ms / predicted_ms; -1 */
    int      decode_tokens;     /* timings.predicted_n; -1 */
    int64_t  send_ns;           /* "send_ns"; -1 when absent */
    int      cached_tokens;     /* usage.prompt_tokens_details.cached_tokens, else
                                   timings.cache_n; -1 when absent */
    unsigned implausible;       /* usage/timings values dropped as implausible:
                                   negative, fractional or non-finite counts,
                                   counts above CAL_CHUNK_COUNT_MAX, times
                                   outside [0, CAL_CHUNK_MS_MAX] ms */
    char     error[256];        /* error message (truncated), "" otherwise */
} cal_chunk;
/* Interpret data[0..len). Appends the generated text to *text when text is
 * non-NULL (CAL_ETOOBIG past its cap, with the chunk still filled). Returns
 * CAL_OK, CAL_EPROTO when data is neither [DONE] nor a JSON object, or
 * CAL_ENOMEM when jansson ran out of memory reading it. */
int  cal_chunk_parse(const char *data, size_t len, cal_chunk *out, cal_buf *text);

#endif
