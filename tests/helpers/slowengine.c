/* An in-process engine that runs slower after its first shot, measured with
 * the library's run model (cal_run_series, the in-process target): the
 * deterministic stand-in for "something took the engine's CPU after shot
 * 1". Every token sleeps fast_ms in shot 1 and slow_ms from shot 2 on, so
 * the drop is a fact of the engine, not of the machine's load (load only
 * adds time to every shot).
 *   slowengine DB LABEL SHOTS REST_S FAST_MS SLOW_MS
 * Prints "run N" and exits 0 when the run is stored ok. */
#include <stdio.h>
#include <stdlib.h>
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/run.h"

typedef struct eng { int64_t fast_ns, slow_ns; int per_shot, calls; } eng;

static int gen(void *ud, const cal_inproc_request *rq, cal_inproc_stream *s)
{
    eng *e = ud;
    int64_t per = e->calls++ < e->per_shot ? e->fast_ns : e->slow_ns;  /* one worker */
    cal_inproc_prefilled(s, 32);
    for (int i = 0; i < rq->max_tokens; i++) {
        cal_sleep_ns(per, NULL);
        if (cal_inproc_token(s, 1) == CAL_ECANCEL) break;
    }
    return CAL_OK;
}
static int open_eng(void *ud, int w, char *err, size_t n) { (void)ud; (void)w; (void)err; (void)n; return CAL_OK; }

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: slowengine DB LABEL SHOTS REST_S FAST_MS SLOW_MS\n");
        return 2;
    }
    eng e = {.fast_ns = (int64_t)(atof(argv[5]) * 1e6), .slow_ns = (int64_t)(atof(argv[6]) * 1e6),
             .per_shot = 3};
    cal_store *st = NULL;
    if (cal_store_open(argv[1], &st)) return 1;
    cal_inproc_engine ie = {.name = "slowengine", .model = "fake", .ud = &e, .open = open_eng,
                            .generate = gen};
    cal_run_target *t = NULL;
    if (cal_run_target_inproc(&ie, &t)) return 1;
    cal_run_plan p;
    cal_run_plan_default(&p);
    p.prompt_tokens[0] = 32;
    p.max_tokens = 6;
    p.requests = e.per_shot;
    p.shots = atoi(argv[3]);
    p.warmup = 0;            /* as caliper run --shots N: no warm-up unless asked */
    p.rest_s = atof(argv[4]);
    p.telemetry = 0;
    p.seed = 1;
    p.label = argv[2];
    p.build = "slowengine";
    cal_run_args a = {.plan = &p, .store = st};
    a.targets[0] = t;
    cal_run_outcome o;
    int rc = cal_run_series(&a, &o);
    if (rc == CAL_OK) printf("run %lld\n", (long long)o.run_id);
    else fprintf(stderr, "slowengine: %s\n", o.message);
    int ok = rc == CAL_OK && o.status == CAL_RUN_OK;
    cal_run_outcome_clear(&o);
    cal_run_target_free(&t);
    cal_store_close(&st);
    return ok ? 0 : 1;
}
