/* The probe's run state and limits, shared by its three files: probe.c (the
 * API: open, close, a run split over loops and merged), probe_slots.c (one
 * request's slot: its curl handle, body, parsing and end) and probe_loop.c
 * (one event loop: curl's sockets and timers, sending on time, draining what
 * ended). Not installed; nothing outside lib/probe includes it. */
#ifndef CALIPER_PROBE_STATE_H
#define CALIPER_PROBE_STATE_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <curl/curl.h>
#include <jansson.h>
#include "caliper/buf.h"
#include "caliper/probe.h"
#include "loop.h"
#include "lib/util/rng.h"

#define MAX_EVENT_BYTES   ((size_t)1 << 20)   /* one SSE event */
#define MAX_ERROR_BYTES   ((size_t)4096)      /* kept error body */
#define MAX_JSON_BYTES    ((size_t)16 << 20)  /* a non-streaming body */
#define MAX_TEXT_BYTES    ((size_t)16 << 20)  /* kept generated text */
#define MAX_CHUNKS        (1 << 22)           /* content chunks per request, at most */
#define UNSIZED_CHUNKS    (1 << 20)           /* ... when max_tokens is left to the server */
#define DEFAULT_CONNECT_NS (10LL * 1000000000)
#define DEFAULT_IDLE_NS    (60LL * 1000000000)
#define PER_TOKEN_NS       (1000000000LL)      /* request deadline: 1 s a token */
#define UNSIZED_TOKENS     4096                /* ... when max_tokens <= 0 */
#define MAX_WAIT_NS        (100LL * 1000000)  /* longest sleep between checks */
/* Transfers per curl multi handle. libcurl 7.x looks for a reusable
 * connection by walking every connection to the host, so one multi with 2048
 * streams pays O(n) per request (measured: ~90 µs each, 0.18 s for the first
 * 2048). Shards of 64 keep that walk short; all shards share one epoll set
 * and one thread. */
#define SHARD_TRANSFERS    64
/* Deferred interpretation (see on_event): events wait, bytes and stamp kept,
 * until the loop has nothing to read or the request ends. Caps per request
 * and per run; past one, the request's waiting events are interpreted at once. */
#define PEND_MAX_EVENTS    256
#define PEND_MAX_BYTES     ((size_t)64 << 10)
#define PEND_RUN_BYTES     ((size_t)8 << 20)
#define FLUSH_BUDGET       8        /* events interpreted between looks */
#define DEFER_MIN_READY    2        /* sockets ready at once for events to wait */
/* Connections opened ahead are started this many at a time: a listen
 * backlog that overflows drops SYNs, and a dropped SYN costs a 1 s retry. */
#define AHEAD_BATCH        128

struct cal_probe {
    cal_probe_config cfg;        /* strings below are owned copies */
    char    *url;
    json_t  *tmpl;               /* the body without prompt and max_tokens */
    struct curl_slist *headers;
    const cal_loop_ops *loop_ops; /* the event-loop backend (CALIPER_LOOP) */
};

static inline int64_t sat_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

enum { MODE_UNKNOWN, MODE_SSE, MODE_JSON, MODE_ERRBODY };

typedef struct run run;
typedef struct shard {
    run     *r;
    CURLM   *multi;
    int      idx;
    int64_t  timer_at;           /* curl's timer, absolute ns; -1 none */
    int      touched;            /* on run.touched: curl ran it this wakeup */
} shard;

typedef struct slot {
    CURL    *easy;
    cal_sse *sse;
    run     *r;
    shard   *sh;                 /* the multi handle this slot's transfers use */
    cal_req_result *res;
    char    *body;               /* request body (json_dumps) */
    cal_buf  in;                 /* error body or non-streaming body */
    cal_buf  text;               /* generated text, when kept */
    int      mode;
    int      done_seen, finish_seen, usage_seen;
    int      fail;               /* a status decided while parsing, or -1 */
    char     fail_msg[320];
    int64_t  now;                /* the stamp of the bytes being parsed */
    int64_t  fail_ns;            /* the stamp of the bytes that decided fail */
    cal_buf  pend;               /* data of events not yet interpreted */
    struct pend_ev { int64_t ns; size_t off, len; } *pev;   /* their stamps */
    int      npev, pev_cap;
    int      queued;             /* on run.dirty */
    int64_t  last_byte_ns;
    int64_t  deadline_ns;        /* send + the request timeout */
    int      max_tokens;         /* the request's, for messages */
    int      max_chunks;         /* cal_probe_max_chunks(max_tokens) */
    int      on_free;            /* in run.freel (then res is NULL) */
    int      chunk_cap;
    int      sends;              /* times libcurl sent this request (its pre-request
                                    callback): more than one is a retry */
    int      curl_ok;            /* the transfer ended CURLE_OK */
    char     errbuf[CURL_ERROR_SIZE];
} slot;

struct run {
    cal_probe *p;
    const cal_load *load;        /* its on_end hook (--keep-chunks) */
    const cal_req_result *res0;  /* this loop's results[0] */
    const size_t *idx;           /* its j-th request is the caller's idx[j]; NULL: j */
    shard   *shards;
    int      nshards;
    int     *touched;            /* shards curl ran since the last drain [ntouched] */
    int      ntouched;
    int64_t  timer_min;          /* the earliest shard timer (-1 none), when not stale */
    int      timer_stale;        /* a timer moved later or went: look at all shards */
    cal_loop *loop;              /* this loop's readiness set */
    json_t  *tmpl;               /* this loop's copy of the body template */
    char    *body_last;          /* the last body built [body_len], for ... */
    size_t   body_len;
    char    *body_prompt;        /* ... this prompt (a copy: the caller may free
                                  * a prompt once its request ended) */
    int      body_max;           /* ... and max_tokens */
    slot   **slots;              /* all slots ever made */
    size_t   nslots;
    slot   **freel;              /* free slots (stack) */
    size_t   nfree;
    size_t   cap;                /* in-flight cap */
    size_t   in_flight;
    cal_probe_stats *st;
    size_t   done;
    slot   **dirty;              /* slots with waiting events (cap: nslots) */
    size_t   ndirty;
    size_t   pend_bytes;         /* waiting event bytes over all slots */
    int      defer;              /* this wakeup found several sockets ready */
    int64_t  next_scan;          /* when the earliest request could time out */
    int      ending;             /* cancelling what is left: no handle carries
                                    another request */
    /* connections opened ahead (cal_probe_config.no_connect_ahead): connected
     * sockets to ahead_sa, handed to curl by on_opensocket */
    int     *ahead;              /* [nahead], taken from the top */
    size_t   nahead;
    int      ahead_given;        /* the fd on_opensocket handed out last, or -1 */
    struct sockaddr_storage ahead_sa;
    socklen_t ahead_salen;
    char   **body0;              /* the first wave's bodies, built before the
                                    start [nbody0]; taken (NULLed) as sent */
    size_t   nbody0;
};

struct coord;   /* probe.c: the caller's thread coordinating the loops */

/* One event loop's share of a run: its requests (in index order), their
 * results, its load, and what it measured. A loop touches nothing another
 * loop touches: the per-chunk path takes no lock. */
typedef struct job {
    cal_probe *p;
    const cal_request *reqs;     /* [n] */
    cal_req_result *results;     /* [n], initialised */
    size_t   n;
    cal_load load;               /* this loop's concurrency (and rate) */
    const size_t *idx;           /* [n]: the caller's index of each request; NULL: the same */
    volatile int *stop;          /* the caller's flag (one loop, the caller's thread) */
    atomic_int *astop;           /* the coordinator's copy of it (several loops) */
    cal_probe_progress_fn progress;
    void    *ud;
    cal_probe_stats st;          /* this loop's chunks, bytes, CPU, wall */
    double  *lags;               /* [nlags] send − sched, ms (owned) */
    size_t   nlags;
    int      rc;
    _Atomic size_t done;         /* requests ended, for the coordinator */
    struct coord *co;            /* NULL when the loop runs on the caller's thread */
    int64_t  t0;                 /* the run's start: closed-loop slots free then */
    int64_t  sched_base;         /* added to a non-zero sched_ns (load.from_start) */
    size_t   ahead;              /* connections to open before the start */
    int      prepared;           /* loop_prepare ran (r, ring, lags are set) */
    run      r;                  /* the loop's state, from loop_prepare on */
    int64_t *ring;               /* closed loop: when each slot freed [cap] */
} job;

/* Most slots and first-wave bodies made before the start (an open loop
 * without a cap has as many "slots" as requests). */
#define PREP_MAX 16384

/* ---- probe_slots.c: a request's slot ---- */
/* Interpret one SSE event's data for s (0, or a cal_err that ends it). */
int cal_probe_interpret(slot *s, const char *data, size_t len);
/* Interpret s's waiting events; 0, or a cal_err. */
int cal_probe_flush_slot(slot *s);
/* Open up to want connections to the target before the start. */
void cal_probe_connect_ahead(run *r, size_t want);
/* Slots: back to the free list, a free (or new) one set up, freed. */
void cal_probe_slot_put(run *r, slot *s);
slot *cal_probe_slot_get(run *r);
void cal_probe_slot_free(slot *s);
/* A NUL-terminated malloc'd copy of s[n]; NULL out of memory. */
char *cal_probe_dup_msg(const char *s, size_t n);
/* The request's status from curl's code, the HTTP status and the body. */
void cal_probe_classify(slot *s, CURLcode rc);
/* End s's request: classify, fill its result, hand the slot back. */
void cal_probe_finish_slot(run *r, slot *s);
/* End s's request now with status st and message msg. */
void cal_probe_end_now(run *r, slot *s, cal_req_status st, const char *msg);
/* The body for rq (the loop's last one when only the prompt is shared). */
char *cal_probe_body_for(run *r, const cal_request *rq);
/* Send request j: 0 started, 1 ended at once (the caller frees the slot),
 * or a cal_err. */
int cal_probe_start_request(run *r, size_t j, const cal_request *rq, cal_req_result *res,
                         int64_t sched_ns, double *lags, size_t *nlags);

/* ---- probe_loop.c: one event loop ---- */
void cal_probe_loop_prepare(job *j);
int cal_probe_loop_run(job *j);

#endif
