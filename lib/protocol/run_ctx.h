/* caliper — the run's private parts, shared by its files: run.c (the
 * series, its targets and records), run_cell.c (one cell: prompts, the
 * probe, the summary, the store), run_turns.c (a shot of turns: chat,
 * replay) and run_ctx.c (the context helpers below them all). */
#ifndef CALIPER_RUN_CTX_H
#define CALIPER_RUN_CTX_H
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/analysis.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/judge.h"
#include "caliper/keep.h"
#include "caliper/protocol_record.h"
#include "caliper/run.h"
#include "caliper/saturation.h"
#include "caliper/telemetry.h"
#include "lib/util/c_locale.h"
#include "lib/workload/traffic_internal.h"

#define MAX_LIST CAL_RUN_MAX_LIST
#define CACHE_TURNS 64   /* turn indices whose cache hits are summed */

typedef struct side {
    char name[8];                    /* "" or "A" / "B" */
    cal_run_target *t;
    cal_workload *wl[MAX_LIST];      /* per prompt length */
    int wl_noted[MAX_LIST];          /* its note (prompts counted one by one) was said */
    int tk_noted;                    /* the tokenizer's failure was said */
    int wl_failed[MAX_LIST];         /* its tokenizer failed: 4 characters a token */
    /* what the server adds to every prompt beyond its text (a BOS, a chat
     * template), measured once (run_prompt.c): -1 not yet */
    int offset, offset_tried;
    int api;                         /* the target's API: 1 chat, 0 not, -1 not read yet */
    cal_textgen *tg;                 /* prompts of drawn lengths, datasets, turns */
    cal_traffic *tr;                 /* this shot's turns (chat, replay) */
    /* the server's prefix-cache reports per turn index (first CACHE_TURNS) */
    double cached[CACHE_TURNS], prompt[CACHE_TURNS];
    long   reported[CACHE_TURNS], sent[CACHE_TURNS];
    int64_t started_ns;              /* -1 unknown */
    int fresh;                       /* the next shot is the engine's first */
} side;

typedef struct ctx {
    const cal_run_args *a;
    cal_run_plan p;                  /* with defaults filled in */
    cal_run_outcome *out;
    volatile int *stop;
    cal_store *st;
    cal_run run;
    cal_tel *tel;
    uint64_t tel_cursor;
    char clock_metric[64], power_metric[64];
    side sides[2];
    int n_sides;
    uint64_t nonce;
    int seq;
    char label[128];
    int target_failed;
    cal_keep keep;                   /* --keep-chunks budget, the cell's histograms */
    int itl_hist_cells;              /* cells whose ITL came from histograms */
    int64_t chunks_dropped;          /* ok requests whose chunk times were not kept */
    double last_goodput;             /* the last cell stored's goodput (NAN unknown) */
} ctx;

typedef struct prog {
    ctx *c;
    const char *side;
    int shot;
    size_t base, total;
} prog;

/* ---- shared by the run's files ------------------------------------------ */
void run_emit(ctx *c, cal_run_event *ev);
void run_note_on(ctx *c, const char *sidename, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void run_fail(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *run_what(const side *s);
int run_stopped(const ctx *c);
int run_per_request(const cal_run_plan *p);
int run_turns_mode(const cal_run_plan *p);
void run_drain_telemetry(ctx *c);
void run_tel_window(ctx *c, const char *metric, int64_t t0, int64_t t1, double *mean,
                       double *min);
int run_count_with_target(void *ud, const char *text, int *n);
void run_cell_shot(cal_cell *cell, const side *s, int shot, cal_shot_kind kind, int64_t rest_ns,
                      size_t n, const cal_probe_stats *ps);
void run_on_progress(void *ud, size_t done, size_t total);
int run_store_cell(ctx *c, side *s, cal_cell *cell, cal_req_result *res, size_t kept,
                      const cal_probe_stats *ps, int shot);
int run_build_turns(ctx *c, side *s, int shot);
void run_cache_notes(ctx *c, json_t *va);
long long run_keep_limit(const cal_run_plan *p);
int run_cell(ctx *c, side *s, size_t pi, int conc, double rate, int shot,
                    cal_shot_kind kind, int64_t rest_ns, cal_cell_kind ckind);
int run_turns(ctx *c, side *s, int shot, cal_shot_kind kind, int64_t rest_ns);
/* run_prompt.c: a cell built with /tokenize, checked against every
 * request's usage.prompt_tokens (built[i]: request i's count by /tokenize,
 * -1 unknown); sets the cell's prompt_basis, prompt_tokens (the server's
 * where it disagreed), prompt_asked and prompt_offset. */
void run_prompt_check(ctx *c, side *s, cal_cell *cell, const cal_req_result *res,
                      const int *built, size_t n);
#define note(c, side, ...) run_note_on(c, side, NULL, __VA_ARGS__)

#endif
