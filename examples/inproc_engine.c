/* Measuring an engine from inside its own process with libcaliper, both
 * ways, on caliper's built-in reference engine linked as a library:
 *
 *   1. the in-process target: the engine implements one callback, generate
 *      (prefill one prompt, decode, report each token); caliper runs the
 *      shot series — shots, cells, prompts, concurrency — and stores it;
 *   2. the recorder: the engine drives its own loop and tells caliper when
 *      a shot and each request begin and end, and each token.
 *
 * Both runs land in the store named on the command line; `caliper show`,
 * `caliper report` and `caliper compare` treat them like any other run.
 *
 * Build against an installed caliper (make install PREFIX=...):
 *   cc -std=c11 -O2 examples/inproc_engine.c -o inproc_engine \
 *      $(pkg-config --cflags --libs caliper caliper-engine)
 * Run:
 *   ./inproc_engine runs.db [shots]
 *   caliper show --db runs.db latest
 *
 * docs/libcaliper.md walks through it. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <caliper/clock.h>
#include <caliper/engine.h>
#include <caliper/error.h>
#include <caliper/recorder.h>
#include <caliper/run.h>
#include <caliper/store.h>
#include <caliper/workload.h>

#define MAX_WORKERS 2
#define MAX_PROMPT 512

/* ---- the engine: the reference transformer, one KV slot per worker ----- */
typedef struct engine {
    const char *preset;
    cal_engine *eng;
    cal_tokenizer *tok;
    pthread_mutex_t step_lock;   /* the engine runs one step at a time */
    float *logits[MAX_WORKERS];
    int64_t loaded_ns;
} engine;

static int engine_open(void *ud, int max_workers, char *err, size_t errn)
{
    engine *e = ud;
    if (max_workers > MAX_WORKERS)
        return cal_why(err, errn, CAL_ERANGE, "concurrency %d: this engine has %d KV slots",
                       max_workers, MAX_WORKERS);
    cal_model_config mc;
    int rc = cal_model_preset(e->preset, &mc);
    if (rc == CAL_OK) rc = cal_engine_open(&mc, MAX_WORKERS, MAX_PROMPT, &e->eng);
    if (rc == CAL_OK) rc = cal_tok_open(mc.vocab, &e->tok);
    for (int w = 0; rc == CAL_OK && w < MAX_WORKERS; w++)
        if (!(e->logits[w] = malloc((size_t)mc.vocab * sizeof(float)))) rc = CAL_ENOMEM;
    if (rc) return cal_why(err, errn, rc, "engine %s: %s", e->preset, cal_strerror(rc));
    e->loaded_ns = cal_now_ns();
    return CAL_OK;
}

static void engine_close(void *ud)
{
    engine *e = ud;
    cal_engine_close(&e->eng);
    cal_tok_close(&e->tok);
    for (int w = 0; w < MAX_WORKERS; w++) {
        free(e->logits[w]);
        e->logits[w] = NULL;
    }
}

static int engine_count(void *ud, const char *text, int *n)
{
    engine *e = ud;
    static int32_t ids[8192];   /* called from the run's thread only */
    int k = cal_tok_encode(e->tok, text, strlen(text), ids, 8192);
    if (k < 0) return k;
    *n = k;
    return CAL_OK;
}

/* One step under the lock: concurrent requests interleave token by token. */
static int step(engine *e, int slot, int pos, const int32_t *toks, int n, float *logits)
{
    cal_step_entry en = {.slot = slot, .pos = pos, .n_tokens = n, .tokens = toks, .logits = logits};
    pthread_mutex_lock(&e->step_lock);
    int rc = cal_engine_step(e->eng, &en, 1);
    pthread_mutex_unlock(&e->step_lock);
    return rc;
}

/* Prefill a prompt in slot w; the id of the first generated token. */
static int prefill(engine *e, int w, const char *prompt, int *n_prompt, int32_t *next)
{
    int32_t ids[MAX_PROMPT];
    int n = cal_tok_encode(e->tok, prompt, strlen(prompt), ids, MAX_PROMPT);
    if (n <= 0) return n < 0 ? n : CAL_EINVAL;
    int rc = step(e, w, 0, ids, n, e->logits[w]);
    if (rc) return rc;
    cal_sampler_params sp = {.temperature = 0, .top_p = 1, .seed = 1};
    uint64_t rng = 1;
    pthread_mutex_lock(&e->step_lock);
    *next = cal_engine_sample(e->eng, e->logits[w], &sp, &rng);
    pthread_mutex_unlock(&e->step_lock);
    *n_prompt = n;
    return CAL_OK;
}

static int decode(engine *e, int w, int pos, int32_t *tok)
{
    int rc = step(e, w, pos, tok, 1, e->logits[w]);
    if (rc) return rc;
    cal_sampler_params sp = {.temperature = 0, .top_p = 1, .seed = 1};
    uint64_t rng = 1;
    pthread_mutex_lock(&e->step_lock);
    *tok = cal_engine_sample(e->eng, e->logits[w], &sp, &rng);
    pthread_mutex_unlock(&e->step_lock);
    return CAL_OK;
}

/* ---- way 1: the in-process target's callback --------------------------- */
static int generate(void *ud, const cal_inproc_request *rq, cal_inproc_stream *s)
{
    engine *e = ud;
    int n_prompt;
    int32_t tok;
    int rc = prefill(e, rq->worker, rq->prompt, &n_prompt, &tok);
    if (rc) {
        cal_inproc_fail(s, cal_engine_last_error(e->eng));
        return rc;
    }
    cal_inproc_prefilled(s, n_prompt);
    for (int i = 0; i < rq->max_tokens; i++) {
        if (cal_inproc_token(s, 1) == CAL_ECANCEL) break;   /* the token `tok` is out */
        if (i + 1 == rq->max_tokens) break;
        if (!rq->ignore_eos && tok == cal_tok_eos(e->tok)) break;
        if ((rc = decode(e, rq->worker, n_prompt + i, &tok))) {
            cal_inproc_fail(s, cal_engine_last_error(e->eng));
            return rc;
        }
    }
    return CAL_OK;
}

static volatile int g_stop;
static void on_signal(int sig) { (void)sig; g_stop = 1; }

static void on_event(void *ud, const cal_run_event *ev)
{
    (void)ud;
    if (ev->kind == CAL_RUN_EV_CELL)
        fprintf(stderr, "  %s: %lld ok, %.1f tok/s aggregate, %.1f tok/s per request\n", ev->label,
                (long long)ev->cell->sum.completed, ev->cell->sum.output_throughput,
                ev->cell->sum.per_request_output_throughput_median);
    else if (ev->kind == CAL_RUN_EV_NOTE)
        fprintf(stderr, "  note: %s\n", ev->text);
}

static int run_callback_way(cal_store *st, engine *e, int shots)
{
    cal_inproc_engine ie = {.name = "reference engine (in-process)", .model = "caliper-tiny",
                            .ud = e, .open = engine_open, .close = engine_close,
                            .generate = generate, .count_tokens = engine_count};
    cal_run_target *t = NULL;
    int rc = cal_run_target_inproc(&ie, &t);
    if (rc) return rc;
    cal_run_plan plan;
    cal_run_plan_default(&plan);
    plan.prompt_tokens[0] = 48;
    plan.n_conc = 2;
    plan.concurrency[0] = 1;
    plan.concurrency[1] = 2;
    plan.requests = 4;
    plan.max_tokens = 16;
    plan.shots = shots;
    plan.warmup = 0;            /* as caliper run --shots N: no warm-up unless asked */
    plan.seed = 7;
    plan.telemetry = 0;
    plan.label = "inproc-callback";
    plan.build = "examples/inproc_engine";
    cal_run_args args = {.plan = &plan, .store = st, .observer = {on_event, NULL}, .stop = &g_stop};
    args.targets[0] = t;
    cal_run_outcome out;
    rc = cal_run_series(&args, &out);
    if (rc == CAL_OK)
        printf("callback: run %lld, %zu cells, status %s\n", (long long)out.run_id,
               out.data ? out.data->n_cells : 0, cal_run_status_name(out.status));
    else
        fprintf(stderr, "callback: %s\n", out.message);
    if (rc == CAL_OK && out.status != CAL_RUN_OK) rc = CAL_EIO;
    cal_run_outcome_clear(&out);
    cal_run_target_free(&t);
    return rc;
}

/* ---- way 2: the engine's own loop, recorded ----------------------------- */
static int run_recorder_way(cal_store *st, engine *e, int shots)
{
    char err[256];
    int rc = engine_open(e, 1, err, sizeof err);
    if (rc) {
        fprintf(stderr, "recorder: %s\n", err);
        return rc;
    }
    cal_recorder_config cfg = {.label = "inproc-recorder", .build = "examples/inproc_engine",
                               .engine = "reference engine (own loop)", .model = "caliper-tiny",
                               .prompt_tokens = 0, .max_tokens = 16, .output_fixed = 1,
                               .concurrency = 1, .content = "prose", .unique_prompts = 1,
                               .engine_fresh = 1, .engine_started_ns = e->loaded_ns};
    cal_recorder *r = NULL;
    rc = cal_recorder_open(st, &cfg, &r);
    if (rc) { engine_close(e); return rc; }
    size_t tlen;
    const char *text = cal_content_text(CAL_CONTENT_PROSE, &tlen);
    int n_prompt = 0;
    for (int shot = 0; shot < shots && rc == CAL_OK && !g_stop; shot++) {
        cal_recorder_shot sh = {.prompt_tokens = 0};
        char prompt[4][400];
        int n_tok[4];
        for (int q = 0; q < 4 && rc == CAL_OK; q++) {
            /* a unique prompt: a number line, then the same prose */
            snprintf(prompt[q], sizeof prompt[q], "request %d.%d\n%.*s", shot, q, 300, text);
            rc = engine_count(e, prompt[q], &n_tok[q]);
        }
        sh.prompt_tokens = rc == CAL_OK ? n_tok[0] : 0;
        if (rc == CAL_OK) rc = cal_recorder_shot_begin(r, &sh);
        for (int q = 0; q < 4 && rc == CAL_OK; q++) {
            int32_t tok;
            int h = cal_recorder_request_begin(r, n_tok[q]);   /* sent now */
            if (h < 0) { rc = h; break; }
            rc = prefill(e, 0, prompt[q], &n_prompt, &tok);
            for (int i = 0; rc == CAL_OK && i < cfg.max_tokens; i++) {
                cal_recorder_token(r, h, 1);                    /* token i is out */
                if (i + 1 < cfg.max_tokens) rc = decode(e, 0, n_prompt + i, &tok);
            }
            cal_recorder_request_end(r, h, rc, rc ? cal_engine_last_error(e->eng) : NULL);
        }
        if (rc == CAL_OK) rc = cal_recorder_shot_end(r);
    }
    int64_t id = cal_recorder_run_id(r);
    int crc = cal_recorder_close(&r, g_stop ? CAL_RUN_INTERRUPTED : rc ? CAL_RUN_FAILED : CAL_RUN_OK);
    engine_close(e);
    if (rc == CAL_OK) rc = crc;
    printf("recorder: run %lld, %d shots of %d-token prompts, status %s\n", (long long)id, shots,
           n_prompt, rc ? cal_strerror(rc) : "ok");
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s STORE.db [shots]\n", argv[0]);
        return 2;
    }
    int shots = argc == 3 ? atoi(argv[2]) : 4;
    if (shots < 1 || shots > 100) {
        fprintf(stderr, "%s: shots: \"%s\" is not 1..100\n", argv[0], argv[2]);
        return 2;
    }
    signal(SIGINT, on_signal);
    cal_store *st = NULL;
    int rc = cal_store_open(argv[1], &st);
    if (rc) {
        fprintf(stderr, "%s: cannot open the store \"%s\": %s\n", argv[0], argv[1], cal_strerror(rc));
        return 1;
    }
    engine e = {.preset = "tiny"};
    pthread_mutex_init(&e.step_lock, NULL);
    rc = run_callback_way(st, &e, shots);
    if (rc == CAL_OK) rc = run_recorder_way(st, &e, shots);
    cal_store_close(&st);
    pthread_mutex_destroy(&e.step_lock);
    return rc == CAL_OK ? 0 : g_stop ? 130 : 1;
}
