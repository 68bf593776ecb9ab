/* caliper serve — the server's counters and histograms, written by the
 * scheduler and the pacer, read by GET /metrics. All fields are atomics so a
 * scrape never stops the engine. Names follow the serving world: the running
 * gauge is also exported as vllm:num_requests_running (SPEC 1.2: the real
 * operating point is the distribution of requests running). */
#ifndef CALIPER_SERVER_METRICS_H
#define CALIPER_SERVER_METRICS_H
#include <stdatomic.h>
#include <stdint.h>
#include "caliper/buf.h"

/* Decode step time histogram bounds, seconds (Prometheus "le"). */
#define CAL_SRV_STEP_BUCKETS 14
/* Pace lateness histogram: 10 µs buckets up to 1 s, then overflow. */
#define CAL_SRV_LATE_BUCKET_NS 10000
#define CAL_SRV_LATE_BUCKETS   100000

typedef struct cal_srv_metrics {
    atomic_int   running;            /* sequences in the batch (or pace streams) */
    atomic_int   waiting;            /* queued, not yet admitted */
    atomic_llong prompt_tokens;      /* total prompt tokens prefilled */
    atomic_llong generation_tokens;  /* total tokens generated */
    atomic_llong requests_ok;        /* finished normally */
    atomic_llong requests_aborted;   /* client went away or shut down */
    atomic_llong requests_rejected;  /* 4xx/5xx before admission */
    atomic_llong tokenize_requests;  /* POST /tokenize answered (a client's cost to prepare) */
    atomic_int   encoding;           /* bodies being parsed and tokenized off the
                                        event loop (queued or running) */
    atomic_llong steps;              /* engine steps */
    atomic_llong step_bucket[CAL_SRV_STEP_BUCKETS + 1]; /* decode steps per le, +Inf last */
    atomic_llong step_sum_ns;        /* decode steps total time */
    atomic_llong step_count;         /* decode steps */
    atomic_llong batch_sum;          /* Σ sequences decoded per decode step */
    atomic_int   batch_max;          /* largest decode batch seen */
    atomic_llong kv_used;            /* positions held by running sequences */
    long long    kv_total;           /* max_batch × max_ctx (set once) */
    int          pace;               /* pacing mode: lateness is reported */
    atomic_llong late_n;             /* pace chunks sent */
    atomic_llong late_max_ns;
    atomic_llong late_sum_ns;
    atomic_uint  *late_bucket;       /* [CAL_SRV_LATE_BUCKETS + 1] or NULL */
} cal_srv_metrics;

int  cal_srv_metrics_init(cal_srv_metrics *m, int pace);
void cal_srv_metrics_free(cal_srv_metrics *m);
/* Record one decode step of `batch` sequences taking ns nanoseconds. */
void cal_srv_metrics_step(cal_srv_metrics *m, int64_t ns, int batch);
/* Record one pace chunk sent late_ns after its due time (negative → 0). */
void cal_srv_metrics_late(cal_srv_metrics *m, int64_t late_ns);
/* Pace lateness quantile q in [0,1], ms (bucket resolution 0.01 ms); 0 when
 * nothing was sent. */
double cal_srv_metrics_late_ms(const cal_srv_metrics *m, double q);
/* Append the Prometheus text exposition to b. model names the model label. */
int  cal_srv_metrics_render(const cal_srv_metrics *m, const char *model, cal_buf *b);

#endif
