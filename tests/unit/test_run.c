/* Unit tests: the run model in the library — the in-process target (closed
 * and open loop, deadline, concurrency bound), cal_run_series over a fake
 * in-process engine (shot kinds, --cold, --duration running its whole
 * time, stop, a failing engine, a slowdown after shot 1 giving the drop
 * verdict), and the recorder. The fake engine's speed is set by sleeps of
 * milliseconds a token, and the slowdown is 20x, so the verdicts hold on a
 * loaded machine (load only adds time to every shot). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "tmp_db.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "caliper/recorder.h"
#include "caliper/run.h"
#include "caliper/store.h"

static char *tmp_db(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/caliper-test-run-XXXXXX");
    return tmp_db_name(path);
}

/* ---- a fake engine ---------------------------------------------------- */
typedef struct fake {
    int64_t token_ns;           /* sleep per token */
    int64_t slow_token_ns;      /* from request slow_from on */
    atomic_int calls;
    int slow_from;              /* calls numbered from 0; -1 never */
    atomic_int in_gen, max_in_gen;
    atomic_int opens, closes;
    atomic_int max_worker_seen;
    int fail_all;
    volatile int *stop_after_flag;
    int stop_after;             /* set *stop_after_flag after this many calls */
    int max_workers_open;
} fake;

static int fake_open(void *ud, int max_workers, char *err, size_t errn)
{
    fake *f = ud;
    (void)err; (void)errn;
    f->max_workers_open = max_workers;
    atomic_fetch_add(&f->opens, 1);
    return CAL_OK;
}
static void fake_close(void *ud) { atomic_fetch_add(&((fake *)ud)->closes, 1); }

static int fake_generate(void *ud, const cal_inproc_request *rq, cal_inproc_stream *s)
{
    fake *f = ud;
    int k = atomic_fetch_add(&f->calls, 1);
    int now_in = atomic_fetch_add(&f->in_gen, 1) + 1;
    int m = atomic_load(&f->max_in_gen);
    while (now_in > m && !atomic_compare_exchange_weak(&f->max_in_gen, &m, now_in)) {}
    int mw = atomic_load(&f->max_worker_seen);
    while (rq->worker > mw && !atomic_compare_exchange_weak(&f->max_worker_seen, &mw, rq->worker)) {}
    if (f->stop_after_flag && k + 1 >= f->stop_after) *f->stop_after_flag = 1;
    int rc = CAL_OK;
    if (f->fail_all) {
        cal_inproc_fail(s, "fake engine: out of KV slots");
        rc = CAL_EIO;
        goto out;
    }
    cal_inproc_prefilled(s, (int)(strlen(rq->prompt) / 4));
    int64_t per = (f->slow_from >= 0 && k >= f->slow_from) ? f->slow_token_ns : f->token_ns;
    for (int i = 0; i < rq->max_tokens; i++) {
        if (per) cal_sleep_ns(per, NULL);
        if (cal_inproc_token(s, 1) == CAL_ECANCEL) break;
    }
out:
    atomic_fetch_sub(&f->in_gen, 1);
    return rc;
}

static cal_run_target *fake_target(fake *f, int with_open)
{
    cal_inproc_engine e = {.name = "fake", .model = "fake-1", .ud = f,
                           .generate = fake_generate};
    if (with_open) {
        e.open = fake_open;
        e.close = fake_close;
    }
    cal_run_target *t = NULL;
    assert_int_equal(cal_run_target_inproc(&e, &t), CAL_OK);
    return t;
}

static void make_reqs(cal_request *reqs, size_t n, int max_tokens)
{
    for (size_t i = 0; i < n; i++) {
        reqs[i].prompt = "a prompt of some words";
        reqs[i].max_tokens = max_tokens;
        reqs[i].sched_ns = 0;
    }
}

/* ---- the in-process target on its own ----------------------------------- */
static void test_inproc_closed_loop(void **state)
{
    (void)state;
    fake f = {.token_ns = 200000, .slow_from = -1};
    cal_run_target *t = fake_target(&f, 1);
    cal_run_plan plan;
    cal_run_plan_default(&plan);
    plan.shots = 1;            /* one shot, no warm-up: not the calibrated default */
    plan.warmup = 0;
    plan.concurrency[0] = 3;
    t->ops->prepare(t->self, &plan);
    char err[200];
    assert_int_equal(t->ops->start(t->self, NULL, err, sizeof err), CAL_OK);
    assert_int_equal(f.max_workers_open, 3);
    enum { N = 12 };
    cal_request reqs[N];
    cal_req_result res[N];
    make_reqs(reqs, N, 5);
    cal_load load = {.concurrency = 3};
    cal_probe_stats ps;
    assert_int_equal(t->ops->send(t->self, reqs, N, &load, res, NULL, NULL, NULL, &ps), CAL_OK);
    assert_true(atomic_load(&f.max_in_gen) <= 3);
    assert_true(atomic_load(&f.max_worker_seen) <= 2);
    assert_int_equal(atomic_load(&f.calls), N);
    assert_int_equal(ps.chunks, N * 5);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].status, CAL_REQ_OK);
        assert_int_equal(res[i].output_tokens, 5);
        assert_int_equal(res[i].n_chunks, 5);
        assert_true(res[i].sched_ns <= res[i].send_ns);
        assert_true(res[i].send_ns <= res[i].first_token_ns);
        assert_true(res[i].first_token_ns <= res[i].last_token_ns);
        assert_true(res[i].last_token_ns <= res[i].end_ns);
        for (int k = 1; k < res[i].n_chunks; k++)
            assert_true(res[i].chunk_ns[k] >= res[i].chunk_ns[k - 1] + 100000);
        assert_true(res[i].prompt_tokens > 0);
        cal_req_result_free(&res[i]);
    }
    /* a bad load is refused before anything runs */
    cal_load bad = {.concurrency = 0};
    int before = atomic_load(&f.calls);
    assert_int_equal(t->ops->send(t->self, reqs, N, &bad, res, NULL, NULL, NULL, NULL), CAL_EINVAL);
    assert_int_equal(atomic_load(&f.calls), before);
    cal_run_target_free(&t);
    assert_int_equal(atomic_load(&f.closes), 1);
}

static void test_inproc_open_loop_and_deadline(void **state)
{
    (void)state;
    fake f = {.token_ns = 0, .slow_from = -1};
    cal_run_target *t = fake_target(&f, 0);
    char err[200];
    assert_int_equal(t->ops->start(t->self, NULL, err, sizeof err), CAL_OK);
    enum { N = 10 };
    cal_request reqs[N];
    cal_req_result res[N];
    make_reqs(reqs, N, 3);
    cal_load load = {.concurrency = 2, .rate = 500, .seed = 7};
    assert_int_equal(t->ops->send(t->self, reqs, N, &load, res, NULL, NULL, NULL, NULL), CAL_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].status, CAL_REQ_OK);
        if (i) assert_true(res[i].sched_ns > res[i - 1].sched_ns);   /* Poisson arrivals */
        assert_true(res[i].send_ns >= res[i].sched_ns);
        cal_req_result_free(&res[i]);
    }
    /* a deadline cancels what runs and what is not sent; every request has
     * exactly one status */
    fake g = {.token_ns = 20000000, .slow_from = -1};
    cal_run_target *t2 = fake_target(&g, 0);
    assert_int_equal(t2->ops->start(t2->self, NULL, err, sizeof err), CAL_OK);
    make_reqs(reqs, N, 50);
    cal_load dl = {.concurrency = 2, .deadline_ns = cal_now_ns() + 100000000};
    assert_int_equal(t2->ops->send(t2->self, reqs, N, &dl, res, NULL, NULL, NULL, NULL), CAL_OK);
    int cancelled = 0, unsent = 0;
    for (int i = 0; i < N; i++) {
        assert_true(res[i].status == CAL_REQ_CANCELLED || res[i].status == CAL_REQ_OK);
        cancelled += res[i].status == CAL_REQ_CANCELLED;
        unsent += res[i].send_ns == 0;
        if (res[i].status == CAL_REQ_CANCELLED) assert_non_null(res[i].error);
        cal_req_result_free(&res[i]);
    }
    assert_int_equal(cancelled, N);     /* 50 tokens × 20 ms never fit 100 ms */
    assert_true(unsent >= N - 2);       /* at most one in flight per worker */
    cal_run_target_free(&t);
    cal_run_target_free(&t2);
}

/* ---- cal_run_series ------------------------------------------------------ */
typedef struct seen { int begun, cells, notes, progress; } seen;
static void observe(void *ud, const cal_run_event *ev)
{
    seen *s = ud;
    if (ev->kind == CAL_RUN_EV_BEGUN) s->begun++;
    if (ev->kind == CAL_RUN_EV_CELL) s->cells++;
    if (ev->kind == CAL_RUN_EV_NOTE) s->notes++;
    if (ev->kind == CAL_RUN_EV_PROGRESS) s->progress++;
}

static void small_plan(cal_run_plan *p)
{
    cal_run_plan_default(p);
    p->shots = 1;              /* one shot, no warm-up: not the calibrated default */
    p->warmup = 0;
    p->prompt_tokens[0] = 16;
    p->max_tokens = 4;
    p->requests = 4;
    p->telemetry = 0;
    p->seed = 1;
    p->label = "unit";
}

static void test_series_shots_and_kinds(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    fake f = {.token_ns = 100000, .slow_from = -1};
    cal_run_plan plan;
    small_plan(&plan);
    plan.shots = 3;
    plan.warmup = 1;
    plan.n_conc = 2;
    plan.concurrency[0] = 1;
    plan.concurrency[1] = 2;
    seen sn = {0};
    cal_run_args a = {.plan = &plan, .store = st, .observer = {observe, &sn},
};
    a.targets[0] = fake_target(&f, 1);
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_OK);
    assert_int_equal(out.failed_requests, 0);
    assert_non_null(out.data);
    assert_int_equal(out.data->n_cells, 8);
    assert_int_equal(sn.begun, 1);
    assert_int_equal(sn.cells, 8);
    assert_true(sn.progress >= 8);
    static const cal_shot_kind want[] = {CAL_SHOT_WARMUP, CAL_SHOT_WARMUP, CAL_SHOT_WARM,
                                         CAL_SHOT_WARM, CAL_SHOT_WARM, CAL_SHOT_WARM,
                                         CAL_SHOT_WARM, CAL_SHOT_WARM};
    for (size_t i = 0; i < 8; i++) {
        const cal_cell *c = &out.data->cells[i];
        assert_int_equal(c->shot_kind, want[i]);
        assert_int_equal(c->shot_index, (int)i / 2 + 1);
        assert_int_equal(c->concurrency, i % 2 ? 2 : 1);
        assert_int_equal(c->n_requests, 4);
        assert_int_equal(c->sum.completed, 4);
        assert_int_equal(c->sum.total_output_tokens, 16);
        assert_int_equal(c->kind, CAL_CELL_CONCURRENCY);
        assert_true(c->process_age_ns > 0);
    }
    assert_int_equal(atomic_load(&f.calls), 32);
    /* stored like any run: the target says in-process */
    assert_non_null(strstr(out.data->run.target_json, "\"kind\":\"inproc\""));
    assert_int_equal(out.data->run.status, CAL_RUN_OK);
    assert_non_null(out.data->run.verdicts_json);
    int64_t id = out.run_id;
    cal_run_outcome_clear(&out);
    cal_run_data *d = NULL;
    assert_int_equal(cal_store_load_run(st, id, 0, &d), CAL_OK);
    assert_int_equal(d->run.status, CAL_RUN_OK);
    assert_int_equal(d->n_reqs, 32);
    cal_run_data_free(&d);
    cal_run_target_free(&a.targets[0]);
    cal_store_close(&st);
    tmp_db_remove(db);
}

static void test_series_cold_restarts(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    fake f = {.token_ns = 0, .slow_from = -1};
    cal_run_plan plan;
    small_plan(&plan);
    plan.shots = 3;
    plan.cold = 1;
    cal_run_args a = {.plan = &plan, .store = st};
    cal_run_target *ct = fake_target(&f, 1);
    a.targets[0] = ct;
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_OK);
    assert_int_equal(atomic_load(&f.opens), 3);
    cal_run_target_free(&ct);
    for (size_t i = 0; i < out.data->n_cells; i++)
        assert_int_equal(out.data->cells[i].shot_kind, CAL_SHOT_COLD);
    cal_run_outcome_clear(&out);
    /* a target without open cannot start fresh: --cold is refused, nothing stored */
    fake g = {.slow_from = -1};
    cal_run_target *nt = fake_target(&g, 0);
    a.targets[0] = nt;
    assert_int_equal(cal_run_series(&a, &out), CAL_EINVAL);
    assert_non_null(strstr(out.message, "cold"));
    assert_int_equal(out.run_id, 0);
    assert_int_equal(atomic_load(&g.calls), 0);
    cal_run_target_free(&nt);
    cal_store_close(&st);
    tmp_db_remove(db);
}

/* --duration: the cell keeps issuing requests until its time is up, well
 * past the old cap of 64 × concurrency. */
static void test_series_duration_runs_its_time(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    fake f = {.token_ns = 200000, .slow_from = -1};   /* about 1 ms a request */
    cal_run_plan plan;
    small_plan(&plan);
    plan.requests = 0;
    plan.duration_s = 1.0;
    plan.concurrency[0] = 1;   /* one worker: no lock is ever contended */
    cal_run_args a = {.plan = &plan, .store = st};
    a.targets[0] = fake_target(&f, 0);
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_OK);
    assert_int_equal(out.failed_requests, 0);
    const cal_cell *c = &out.data->cells[0];
    assert_true(c->end_ns - c->start_ns >= 1000000000);
    assert_true(c->n_requests > 64 * 1);   /* the old cap: 64 × concurrency */
    assert_int_equal(c->n_requests, c->sum.completed + c->sum.failed);
    assert_true(c->sum.failed == c->sum.n_cancelled);   /* only the cut tail */
    assert_true(c->sum.n_cancelled <= 1);               /* at most the one in flight */
    /* requests kept going until the end: the gaps between rounds are kept
     * to a few per cent of the time */
    assert_true(c->sum.duration >= 0.9);
    cal_run_outcome_clear(&out);
    cal_run_target_free(&a.targets[0]);
    cal_store_close(&st);
    tmp_db_remove(db);
}

static void test_series_stop_and_failure(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    volatile int stop = 0;
    fake f = {.token_ns = 1000000, .slow_from = -1, .stop_after_flag = &stop, .stop_after = 6};
    cal_run_plan plan;
    small_plan(&plan);
    plan.shots = 10;
    cal_run_args a = {.plan = &plan, .store = st, .stop = &stop};
    a.targets[0] = fake_target(&f, 1);
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_INTERRUPTED);
    assert_true(out.data->n_cells >= 1 && out.data->n_cells <= 2);
    int64_t total = 0;
    for (size_t i = 0; i < out.data->n_cells; i++) {
        const cal_cell *c = &out.data->cells[i];
        assert_int_equal(c->n_requests, c->sum.completed + c->sum.failed);
        total += c->n_requests;
    }
    assert_true(total >= 6);
    assert_int_equal(out.data->run.status, CAL_RUN_INTERRUPTED);
    cal_run_outcome_clear(&out);
    cal_run_target_free(&a.targets[0]);

    /* an engine whose every request fails: the run is stored as failed,
     * with the reason, after its first cell */
    fake g = {.slow_from = -1, .fail_all = 1};
    plan.shots = 3;
    cal_run_args b = {.plan = &plan, .store = st};
    b.targets[0] = fake_target(&g, 1);
    assert_int_equal(cal_run_series(&b, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_FAILED);
    /* it answered, with errors: the message says what it sent */
    assert_non_null(strstr(out.message, "answered with errors"));
    assert_non_null(strstr(out.message, "4 stream_error"));
    assert_non_null(strstr(out.message, "out of KV slots"));
    assert_int_equal(out.data->n_cells, 1);
    assert_int_equal(out.data->cells[0].sum.n_stream_error, 4);
    assert_int_equal(out.failed_requests, 4);
    assert_non_null(out.data->reqs[0].error);
    assert_non_null(strstr(out.data->reqs[0].error, "out of KV slots"));
    cal_run_outcome_clear(&out);
    cal_run_target_free(&b.targets[0]);
    cal_store_close(&st);
    tmp_db_remove(db);
}

/* An engine that runs 20x slower after shot 1: the stored verdict says the
 * later shots run below shot 1 (deterministic: every token sleeps). */
static void test_series_slowdown_verdict(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    fake f = {.token_ns = 1000000, .slow_token_ns = 20000000, .slow_from = 3};
    cal_run_plan plan;
    small_plan(&plan);
    plan.requests = 3;
    plan.shots = 4;
    plan.noise_floor = 0.2;
    cal_run_args a = {.plan = &plan, .store = st};
    a.targets[0] = fake_target(&f, 1);
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_non_null(strstr(out.data->run.verdicts_json, "shots 2–4 run"));
    assert_non_null(strstr(out.data->run.verdicts_json, "below shot 1"));
    /* and as data: the analysis's shot verdict, later shots slower */
    assert_non_null(out.analysis);
    assert_int_equal(out.analysis->n_groups, 1);
    const cal_verdict *sv = NULL;
    for (size_t i = 0; i < out.analysis->n_verdicts; i++)
        if (out.analysis->verdicts[i].kind == CAL_VK_SHOTS) sv = &out.analysis->verdicts[i];
    assert_non_null(sv);
    assert_true(sv->judged);
    assert_true(sv->effect > 0.5);          /* 20x slower: well past any band */
    assert_true(sv->lo > 0 && sv->lo <= sv->effect && sv->effect <= sv->hi);   /* its CI */
    /* the pooled summary quotes shots 2-4 */
    assert_int_equal(out.analysis->groups[0].quoted_first, 2);
    assert_int_equal(out.analysis->groups[0].quoted_last, 4);
    assert_int_equal(out.analysis->groups[0].pooled.completed, 9);
    assert_int_equal(out.data->cells[0].shot_kind, CAL_SHOT_COLD);
    cal_run_outcome_clear(&out);
    cal_run_target_free(&a.targets[0]);
    cal_store_close(&st);
    tmp_db_remove(db);
}

/* Two targets alternate shot by shot (A B, B A, A B) and the stored
 * verdicts hold the paired B ÷ A ratio as data; a served target's config is
 * checked before anything starts. */
static void test_series_ab_and_served_config(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    fake fa = {.token_ns = 1000000, .slow_from = -1};
    /* B: a twentieth of A's speed, so that a busy machine's scheduling
     * delay (several ms a request, the same on both sides) cannot pull the
     * measured ratio up to the bound: at 3x it reached 0.6 under load */
    fake fb = {.token_ns = 20000000, .slow_from = -1};
    cal_run_plan plan;
    small_plan(&plan);
    plan.shots = 3;
    plan.requests = 2;
    cal_run_args a = {.plan = &plan, .store = st};
    a.targets[0] = fake_target(&fa, 1);
    a.targets[1] = fake_target(&fb, 1);
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_OK);
    assert_int_equal(out.status, CAL_RUN_OK);
    assert_int_equal(out.data->n_cells, 6);
    char order[8] = "";
    for (size_t i = 0; i < 6; i++) order[i] = out.data->cells[i].target[0];
    assert_string_equal(order, "ABBAAB");
    assert_non_null(strstr(out.data->run.target_json, "\"ab\""));
    const cal_verdict *ab = NULL;
    for (size_t i = 0; i < out.analysis->n_verdicts; i++)
        if (out.analysis->verdicts[i].kind == CAL_VK_AB) ab = &out.analysis->verdicts[i];
    assert_non_null(ab);
    assert_true(ab->effect < 0.6);           /* B ÷ A: 0.05 when idle */
    assert_non_null(strstr(out.data->run.verdicts_json, "\"kind\":\"ab\""));
    cal_run_outcome_clear(&out);
    cal_run_target_free(&a.targets[0]);
    cal_run_target_free(&a.targets[1]);

    cal_served_config sc = {.target = {.kind = CAL_TARGET_URL}};
    cal_run_target *t = (cal_run_target *)1;
    assert_int_equal(cal_run_target_served(&sc, &t), CAL_EINVAL);   /* no URL */
    assert_null(t);
    sc.target.kind = CAL_TARGET_LAUNCH;
    assert_int_equal(cal_run_target_served(&sc, &t), CAL_EINVAL);   /* no command */
    sc.target.kind = CAL_TARGET_URL;
    sc.target.url = "http://127.0.0.1:9";
    assert_int_equal(cal_run_target_served(&sc, &t), CAL_OK);
    assert_string_equal(t->ops->kind, "url");
    assert_false(t->fresh_on_start);
    assert_false(t->restartable);
    cal_run_target_free(&t);
    cal_store_close(&st);
    tmp_db_remove(db);
}

/* ---- the recorder ------------------------------------------------------- */
typedef struct rec_arg { cal_recorder *r; int tokens; atomic_int bad; } rec_arg;
static void *rec_thread(void *p)   /* no cmocka asserts off the main thread */
{
    rec_arg *a = p;
    int q = cal_recorder_request_begin(a->r, 32);
    if (q < 0) { atomic_fetch_add(&a->bad, 1); return NULL; }
    for (int i = 0; i < a->tokens; i++) {
        cal_sleep_ns(100000, NULL);
        if (cal_recorder_token(a->r, q, 1) != CAL_OK) atomic_fetch_add(&a->bad, 1);
    }
    if (cal_recorder_request_end(a->r, q, CAL_OK, NULL) != CAL_OK) atomic_fetch_add(&a->bad, 1);
    return NULL;
}

static void test_recorder(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    cal_recorder_config cfg = {.label = "rec", .engine = "fake", .model = "fake-1",
                               .prompt_tokens = 32, .max_tokens = 6, .output_fixed = 1,
                               .concurrency = 2, .content = "prose", .engine_fresh = 1,
                               .engine_started_ns = cal_now_ns()};
    cal_recorder *r = NULL;
    assert_int_equal(cal_recorder_open(st, &cfg, &r), CAL_OK);
    int64_t id = cal_recorder_run_id(r);
    assert_true(id > 0);
    /* misuse is named, not stored */
    assert_int_equal(cal_recorder_token(r, 0, 1), CAL_EINVAL);
    assert_int_equal(cal_recorder_request_begin(r, 1), CAL_EINVAL);
    assert_non_null(strstr(cal_recorder_error(r), "no shot"));
    for (int shot = 0; shot < 3; shot++) {
        cal_recorder_shot sh = {.rest_before_ns = shot == 2 ? 1000000 : 0};
        assert_int_equal(cal_recorder_shot_begin(r, &sh), CAL_OK);
        assert_int_equal(cal_recorder_shot_begin(r, NULL), CAL_EINVAL);
        pthread_t th[2];
        rec_arg ra = {.r = r, .tokens = 6};
        atomic_init(&ra.bad, 0);
        for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&th[k], NULL, rec_thread, &ra), 0);
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        assert_int_equal(atomic_load(&ra.bad), 0);
        if (shot == 1) {   /* one request left open: stored as cancelled */
            int q = cal_recorder_request_begin(r, 32);
            assert_int_equal(cal_recorder_token(r, q, 2), CAL_OK);
        }
        assert_int_equal(cal_recorder_shot_end(r), CAL_OK);
    }
    assert_int_equal(cal_recorder_close(&r, CAL_RUN_OK), CAL_OK);
    assert_null(r);
    cal_run_data *d = NULL;
    assert_int_equal(cal_store_load_run(st, id, CAL_LOAD_CHUNKS, &d), CAL_OK);
    assert_int_equal(d->run.status, CAL_RUN_OK);
    assert_int_equal(d->n_cells, 3);
    static const cal_shot_kind want[] = {CAL_SHOT_COLD, CAL_SHOT_WARM, CAL_SHOT_RESTED};
    for (int i = 0; i < 3; i++) {
        const cal_cell *c = &d->cells[i];
        assert_int_equal(c->shot_kind, want[i]);
        assert_int_equal(c->shot_index, i + 1);
        assert_int_equal(c->concurrency, 2);
        assert_int_equal(c->sum.completed, 2);
        assert_int_equal(c->sum.total_output_tokens, 12);
        assert_int_equal(c->sum.output_len_mismatch, 0);
        assert_true(isfinite(c->sum.median_ttft_ms) && c->sum.median_ttft_ms >= 0.1);
        assert_true(c->sum.per_request_output_throughput_median > 0);
        assert_true(c->process_age_ns > 0);
    }
    assert_int_equal(d->cells[1].n_requests, 3);
    assert_int_equal(d->cells[1].sum.n_cancelled, 1);
    assert_non_null(strstr(d->run.target_json, "\"kind\":\"inproc\""));
    /* the requests keep every token's time */
    assert_int_equal(d->reqs[0].n_chunks, 6);
    assert_non_null(d->reqs[0].chunk_ns);
    cal_run_data_free(&d);
    cal_store_close(&st);
    tmp_db_remove(db);
}

/* Huge plan values are refused before they become request counts or int64
 * nanoseconds (undefined behaviour when they do not fit): nothing runs. */
static void test_series_huge_plan(void **state)
{
    (void)state;
    char *db = tmp_db();
    cal_store *st = NULL;
    assert_int_equal(cal_store_open(db, &st), CAL_OK);
    fake f = {.slow_from = -1};
    cal_run_target *t = fake_target(&f, 1);
    for (int k = 0; k < 4; k++) {
        cal_run_plan plan;
        small_plan(&plan);
        if (k == 0) plan.rate = 1e30;
        if (k == 1) { plan.requests = 0; plan.duration_s = 1e10; }
        if (k == 2) plan.rest_s = 1e30;
        if (k == 3) plan.interval_s = 1e30;
        cal_run_args a = {.plan = &plan, .store = st};
        a.targets[0] = t;
        cal_run_outcome out;
        assert_int_equal(cal_run_series(&a, &out), CAL_EINVAL);
        /* the message starts with the plan field at fault */
        static const char *const FIELD[4] = {"rate ", "duration_s ", "rest_s ", "interval_s "};
        assert_true(!strncmp(out.message, FIELD[k], strlen(FIELD[k])));
        assert_int_equal(out.run_id, 0);
    }
    /* a rate too small to schedule is refused, naming the field: it once
     * ran the requests back to back under its own label */
    cal_run_plan plan;
    small_plan(&plan);
    plan.rate = 1e-12;
    cal_run_args a = {.plan = &plan, .store = st};
    a.targets[0] = t;
    cal_run_outcome out;
    assert_int_equal(cal_run_series(&a, &out), CAL_EINVAL);
    assert_non_null(strstr(out.message, "rate 1e-12: under"));
    assert_int_equal(out.run_id, 0);
    assert_int_equal(atomic_load(&f.calls), 0);
    cal_run_target_free(&t);
    cal_store_close(&st);
    tmp_db_remove(db);
}

/* Every plan rule in cal_plan_check names the field, the value and a
 * sentence without a command-line flag; the plan is left as it was. */
static void test_plan_check_fields(void **state)
{
    (void)state;
    cal_run_plan p;
    cal_plan_error e;
    cal_run_plan_default(&p);
    assert_int_equal(cal_plan_check(&p, &e), CAL_OK);
    assert_null(e.field);
    /* the default plan is what caliper run measures with no flag */
    assert_int_equal(p.shots, CAL_RUN_DEFAULT_SHOTS);
    assert_int_equal(p.warmup, CAL_RUN_DEFAULT_WARMUP);
    assert_int_equal(p.prompt_tokens[0], 256);
    assert_int_equal(p.max_tokens, 64);

    struct { const char *field, *value; void (*set)(cal_run_plan *); } cases[] = {
        {"requests", "8", NULL}, {"sweep_steps", "3", NULL}, {"slo", "none", NULL},
        {"pattern", NULL, NULL}, {"rate", "2", NULL}, {"concurrency", "0", NULL},
        {"sweep_max_rate", "8", NULL}, {"equivalence", "1.5", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cal_run_plan_default(&p);
        cal_chat_config chat = {.users = 2, .turns = 2};
        switch (i) {
        case 0: p.requests = 8; p.duration_s = 2; break;                    /* both: choose one */
        case 1: p.sweep = 1; p.slo.e2e_ms = 1000; p.rate = 1; p.sweep_max_rate = 1.1; p.sweep_steps = 3; break;
        case 2: p.sweep = 1; break;                                          /* no slo */
        case 3: p.sweep = 1; p.slo.e2e_ms = 1000;
                p.pattern = (cal_arrivals){.kind = CAL_ARR_RAMP, .from = 1, .to = 4, .over_s = 2};
                p.rate = cal_arrivals_mean_rate(&p.pattern); break;
        case 4: p.chat = &chat; p.rate = 2; break;                           /* turns set the load */
        case 5: p.concurrency[0] = 0; break;
        case 6: p.sweep_max_rate = 8; break;                                 /* without a sweep */
        case 7: p.equivalence = 1.5; break;
        }
        cal_run_plan before = p;
        assert_int_equal(cal_plan_check(&p, &e), CAL_EINVAL);
        assert_non_null(e.field);
        assert_string_equal(e.field, cases[i].field);
        if (cases[i].value) assert_string_equal(e.value, cases[i].value);
        assert_true(e.why[0] != '\0');
        assert_null(strstr(e.why, "--"));   /* fields, never flags */
        assert_memory_equal(&before, &p, sizeof p);
        assert_int_equal(cal_plan_check(&p, NULL), CAL_EINVAL);
    }
    /* a sweep's zeros are its defaults: it starts at 1 req/s, 8 steps, 16× */
    cal_run_plan_default(&p);
    p.sweep = 1;
    p.slo.e2e_ms = 1000;
    assert_int_equal(cal_plan_check(&p, &e), CAL_OK);
    cal_run_plan_fill(&p);
    assert_true(p.rate == 1 && p.sweep_steps == 8 && p.sweep_max_rate == 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inproc_closed_loop),
        cmocka_unit_test(test_inproc_open_loop_and_deadline),
        cmocka_unit_test(test_series_shots_and_kinds),
        cmocka_unit_test(test_series_cold_restarts),
        cmocka_unit_test(test_series_duration_runs_its_time),
        cmocka_unit_test(test_series_stop_and_failure),
        cmocka_unit_test(test_series_slowdown_verdict),
        cmocka_unit_test(test_series_ab_and_served_config),
        cmocka_unit_test(test_recorder),
        cmocka_unit_test(test_series_huge_plan),
        cmocka_unit_test(test_plan_check_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
