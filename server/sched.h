/* caliper serve — the continuous-batching scheduler and the pacer.
 * Internal to server/.
 *
 * Scheduler: one thread owns the engine. Every running sequence shares each
 * step (one cal_engine_step decodes all of them); a waiting request's prompt
 * is prefilled in chunks inside those same steps; --max-batch caps the running
 * set (vLLM's --max-num-seqs) and the rest wait in a bounded queue.
 *
 * Pacer: pacing mode computes nothing; it releases chunk k of each stream at
 * arrival + pace·(k+1) from a timer heap, and the HTTP side stamps send_ns as
 * it writes. */
#ifndef CALIPER_SERVER_SCHED_H
#define CALIPER_SERVER_SCHED_H
#include "engine/engine.h"
#include "server/job.h"
#include "server/metrics.h"

/* ---- the pure planning step (unit-tested on its own) ------------------- */
typedef struct cal_plan_seq {
    int n_prompt;      /* prompt tokens */
    int n_prefilled;   /* prompt tokens already in the KV cache */
    int n_gen;         /* tokens generated (the last one not yet fed) */
} cal_plan_seq;

typedef struct cal_plan_item {
    int seq;           /* index into the seqs array */
    int pos;           /* first position of the entry */
    int n_tokens;      /* 1 for a decode, ≥ 1 for a prefill chunk */
    int logits;        /* 1 when the entry's last token is sampled */
} cal_plan_item;

/* Plan one step over n running sequences in admission order: every sequence
 * whose prompt is in the cache decodes one token; then prompts still being
 * prefilled take chunks, oldest first, up to prefill_budget tokens in all
 * (at least one chunk of ≥ 1 token when any prefill is pending). Fills
 * items[n] and returns the count. */
int cal_sched_plan(const cal_plan_seq *seqs, int n, int prefill_budget,
                   cal_plan_item *items);

/* ---- scheduler ---------------------------------------------------------- */
typedef struct cal_sched cal_sched;

typedef struct cal_sched_config {
    const cal_model_config *model;
    const cal_tokenizer    *tok;       /* shared, read-only; outlives the scheduler */
    int                     max_batch; /* running sequences (KV slots) */
    int                     max_queue; /* waiting requests beyond the batch */
    int                     prefill_chunk; /* prompt tokens per step */
    cal_srv_metrics        *metrics;   /* outlives the scheduler */
    int                     start_paused; /* 1: admit nothing until cal_sched_release,
                                             so what runs together is known (tests) */
} cal_sched_config;

/* Open the engine (weights, KV cache for max_batch slots) and start the
 * scheduler thread. CAL_EINVAL (with the engine's reason in *why when given),
 * CAL_ENOMEM. */
int  cal_sched_open(const cal_sched_config *c, cal_sched **out, const char **why);
/* Queue a job (takes a reference on success). CAL_EFULL when running +
 * waiting already hold max_batch + max_queue jobs; CAL_ECANCEL when stopping. */
int  cal_sched_submit(cal_sched *s, cal_job *j);
/* Let a scheduler opened with start_paused admit its queue: every job
 * submitted so far is admitted in one go, up to max_batch. No-op otherwise. */
void cal_sched_release(cal_sched *s);
/* The engine's per-op profile JSON (malloc'd), fetched between steps. */
char *cal_sched_profile(cal_sched *s);
/* The engine the scheduler thread owns (for questions that read only what
 * open set: its held bytes). */
const cal_engine *cal_sched_engine(const cal_sched *s);
/* Stop: every queued or running job ends (finish "abort") and is woken;
 * the thread is joined. Idempotent. */
void cal_sched_stop(cal_sched *s);
void cal_sched_close(cal_sched **s);

/* ---- pacer -------------------------------------------------------------- */
typedef struct cal_pacer cal_pacer;
int  cal_pacer_open(int64_t pace_ns, cal_srv_metrics *m, cal_pacer **out);
/* Schedule a job's chunks from j->arrival_ns (takes a reference).
 * CAL_ECANCEL when stopping. */
int  cal_pacer_submit(cal_pacer *p, cal_job *j);
/* HTTP side, j->mu held: format the chunks now due (send_ns = now), the end
 * of the stream after the last one. */
int  cal_pacer_fill(cal_pacer *p, cal_job *j);
int64_t cal_pacer_pace_ns(const cal_pacer *p);
void cal_pacer_stop(cal_pacer *p);
void cal_pacer_close(cal_pacer **p);

#endif
