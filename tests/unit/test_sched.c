/* Unit tests: the continuous-batching scheduler — the pure step planner, then
 * the live scheduler on the tiny engine: requests batched into shared decode
 * steps, chunked prefill, the queue limit, a cancelled job freeing its slot,
 * the profile between steps, and the pacer's schedule. */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/buf.h"
#include "caliper/clock.h"
#include "caliper/error.h"
#include "server/sched.h"

static void test_plan(void **state)
{
    (void)state;
    cal_plan_item it[8];
    /* two decoding, one mid-prefill, one fresh: decodes first, then prefill
     * oldest first within the budget */
    cal_plan_seq s[4] = {{5, 5, 3}, {10, 4, 0}, {7, 7, 1}, {20, 0, 0}};
    int n = cal_sched_plan(s, 4, 10, it);
    assert_int_equal(n, 4);
    assert_int_equal(it[0].seq, 0);
    assert_int_equal(it[0].pos, 5 + 3 - 1);
    assert_int_equal(it[0].n_tokens, 1);
    assert_true(it[0].logits);
    assert_int_equal(it[1].seq, 2);
    assert_int_equal(it[1].pos, 7);
    assert_int_equal(it[2].seq, 1);                /* the rest of seq 1's prompt */
    assert_int_equal(it[2].pos, 4);
    assert_int_equal(it[2].n_tokens, 6);
    assert_true(it[2].logits);                     /* completes: sample its first token */
    assert_int_equal(it[3].seq, 3);                /* what is left of the budget */
    assert_int_equal(it[3].pos, 0);
    assert_int_equal(it[3].n_tokens, 4);
    assert_false(it[3].logits);

    /* a budget smaller than the prompt: one partial chunk, no logits */
    cal_plan_seq one[1] = {{100, 0, 0}};
    n = cal_sched_plan(one, 1, 16, it);
    assert_int_equal(n, 1);
    assert_int_equal(it[0].n_tokens, 16);
    assert_false(it[0].logits);
    /* a zero budget still makes progress */
    n = cal_sched_plan(one, 1, 0, it);
    assert_int_equal(n, 1);
    assert_int_equal(it[0].n_tokens, 1);
    /* every token of every sequence is fed exactly once over a run */
    cal_plan_seq r[3] = {{9, 0, 0}, {3, 0, 0}, {14, 0, 0}};
    int fed[3] = {0, 0, 0}, steps = 0;
    while ((r[0].n_gen < 5 || r[1].n_gen < 5 || r[2].n_gen < 5) && steps < 100) {
        n = cal_sched_plan(r, 3, 4, it);
        int total = 0;
        for (int i = 0; i < n; i++) {
            cal_plan_seq *q = &r[it[i].seq];
            assert_int_equal(it[i].pos, fed[it[i].seq]);     /* positions are contiguous */
            fed[it[i].seq] += it[i].n_tokens;
            if (q->n_prefilled < q->n_prompt) {
                q->n_prefilled += it[i].n_tokens;
                total += it[i].n_tokens;
            }
            if (it[i].logits) q->n_gen++;
        }
        assert_true(total <= 4);
        steps++;
    }
    assert_true(steps < 100);
}

/* ---- the live scheduler on the tiny engine ------------------------------ */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  g_cv = PTHREAD_COND_INITIALIZER;

static void wake(cal_job *j)
{
    (void)j;                      /* stays parked: the test polls under g_mu */
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static cal_job *mkjob(int n_prompt, int max_tokens, int stream)
{
    cal_srv_request req = {0};
    req.api = CAL_SRV_COMPLETIONS;
    req.max_tokens = max_tokens;
    req.temperature = 0.8f;
    req.top_p = 0.95f;
    req.seed = 1234;
    req.ignore_eos = 1;
    req.stream = stream;
    req.include_usage = 1;
    int32_t *ids = malloc((size_t)n_prompt * sizeof *ids);
    for (int i = 0; i < n_prompt; i++) ids[i] = 97 + i % 26;
    cal_job *j = cal_job_new(&req, ids, n_prompt, "test-model");
    snprintf(j->id, sizeof j->id, "cmpl-test");
    j->arrival_ns = cal_now_ns();
    j->wake = wake;
    j->parked = 1;
    return j;
}

static int is_done(cal_job *j)
{
    pthread_mutex_lock(&j->mu);
    int d = j->done;
    pthread_mutex_unlock(&j->mu);
    return d;
}

static void wait_done(cal_job *j)
{
    int64_t end = cal_now_ns() + 20 * 1000000000LL;
    while (!is_done(j) && cal_now_ns() < end) cal_sleep_ns(1000000, NULL);
    assert_true(is_done(j));
}

typedef struct fixture {
    cal_model_config cfg;
    cal_tokenizer   *tok;
    cal_srv_metrics  m;
    cal_sched       *s;
} fixture;

static int open_fix_paused(fixture *f, int max_batch, int max_queue, int chunk, int paused)
{
    memset(f, 0, sizeof *f);
    if (cal_model_preset("tiny", &f->cfg) != CAL_OK) return -1;
    if (cal_tok_open(f->cfg.vocab, &f->tok) != CAL_OK) return -1;
    if (cal_srv_metrics_init(&f->m, 0) != CAL_OK) return -1;
    cal_sched_config sc = {&f->cfg, f->tok, max_batch, max_queue, chunk, &f->m, paused};
    return cal_sched_open(&sc, &f->s, NULL);
}

static int open_fix(fixture *f, int max_batch, int max_queue, int chunk)
{
    return open_fix_paused(f, max_batch, max_queue, chunk, 0);
}

/* The value of one rendered metric line ("name{...} value"), or -1. */
static double metric(const cal_srv_metrics *m, const char *name)
{
    cal_buf b = CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_srv_metrics_render(m, "t", &b), CAL_OK);
    double v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s{", name);
    const char *p = strstr(b.data, key);
    if (p && (p = strchr(p + 1, '}'))) v = strtod(p + 1, NULL);
    cal_buf_free(&b);
    return v;
}

static void close_fix(fixture *f)
{
    cal_sched_close(&f->s);
    assert_null(f->s);
    cal_tok_close(&f->tok);
    cal_srv_metrics_free(&f->m);
}

static void test_batching(void **state)
{
    (void)state;
    fixture f;
    /* paused: all four are queued before any is admitted, so they share the
     * batch however slowly this thread submits (a loaded machine) */
    assert_int_equal(open_fix_paused(&f, 4, 2, 8, 1), CAL_OK);
    cal_job *j[4];
    for (int i = 0; i < 4; i++) {
        j[i] = mkjob(20, 30, 0);
        assert_int_equal(cal_sched_submit(f.s, j[i]), CAL_OK);
    }
    assert_int_equal(atomic_load(&f.m.steps), 0);      /* nothing ran while paused */
    assert_int_equal(atomic_load(&f.m.waiting), 4);
    cal_sched_release(f.s);
    for (int i = 0; i < 4; i++) {
        wait_done(j[i]);
        json_t *o = json_loadb(j[i]->out.data, j[i]->out.len, 0, NULL);
        assert_non_null(o);
        json_t *u = json_object_get(o, "usage");
        assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 30);
        assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 20);
        json_t *t = json_object_get(o, "timings");
        assert_true(json_real_value(json_object_get(t, "prompt_ms")) > 0);
        assert_int_equal(json_integer_value(json_object_get(t, "predicted_n")), 30);
        json_decref(o);
        cal_job_unref(j[i]);
    }
    /* one weight pass served all four: the decode batch reached 4, and the
     * 80 prompt tokens went through in chunks of at most 8 */
    assert_int_equal(atomic_load(&f.m.batch_max), 4);
    assert_int_equal(atomic_load(&f.m.prompt_tokens), 80);
    assert_int_equal(atomic_load(&f.m.generation_tokens), 120);
    assert_true(atomic_load(&f.m.steps) >= 10 + 29);
    assert_true(atomic_load(&f.m.steps) < 4 * 30);
    assert_int_equal(atomic_load(&f.m.running), 0);
    assert_int_equal(atomic_load(&f.m.requests_ok), 4);
    char *p = cal_sched_profile(f.s);
    assert_non_null(p);
    json_t *po = json_loads(p, 0, NULL);
    assert_non_null(po);
    json_decref(po);
    free(p);
    close_fix(&f);
}

static void test_queue_limit_and_cancel(void **state)
{
    (void)state;
    fixture f;
    assert_int_equal(open_fix(&f, 2, 1, 64), CAL_OK);
    cal_job *j[4];
    for (int i = 0; i < 3; i++) {
        j[i] = mkjob(10, 400, 1);
        assert_int_equal(cal_sched_submit(f.s, j[i]), CAL_OK);
    }
    j[3] = mkjob(10, 400, 1);
    assert_int_equal(cal_sched_submit(f.s, j[3]), CAL_EFULL);   /* 2 running + 1 waiting */
    cal_job_unref(j[3]);
    /* wait for the first stream's bytes, then hang up every job */
    int64_t end = cal_now_ns() + 10 * 1000000000LL;
    for (;;) {
        pthread_mutex_lock(&j[0]->mu);
        size_t n = j[0]->out.len;
        pthread_mutex_unlock(&j[0]->mu);
        if (n > 0 || cal_now_ns() > end) break;
        cal_sleep_ns(1000000, NULL);
    }
    /* the gauge is published after the step that wrote those bytes */
    while (atomic_load(&f.m.kv_used) == 0 && cal_now_ns() < end) cal_sleep_ns(1000000, NULL);
    assert_true(atomic_load(&f.m.kv_used) > 0);      /* j[0] holds its prompt and a token */
    assert_true(metric(&f.m, "caliper:kv_cache_usage_perc") > 0);
    for (int i = 0; i < 3; i++) {
        pthread_mutex_lock(&j[i]->mu);
        j[i]->cancelled = 1;
        pthread_mutex_unlock(&j[i]->mu);
    }
    for (int i = 0; i < 3; i++) wait_done(j[i]);
    assert_int_equal(atomic_load(&f.m.requests_aborted), 3);
    /* no request runs: the KV gauge is back to 0 (clients that go away
     * leave no engine step behind them to update it) */
    assert_int_equal(atomic_load(&f.m.running), 0);
    assert_int_equal(atomic_load(&f.m.kv_used), 0);
    assert_true(metric(&f.m, "caliper:kv_cache_usage_perc") == 0);
    assert_true(metric(&f.m, "vllm:kv_cache_usage_perc") == 0);
    assert_true(atomic_load(&f.m.generation_tokens) < 3 * 400);
    /* the slots are free again: a new job runs to the end */
    cal_job *k = mkjob(5, 3, 1);
    assert_int_equal(cal_sched_submit(f.s, k), CAL_OK);
    wait_done(k);
    assert_non_null(strstr(k->out.data, "data: [DONE]\n\n"));
    assert_int_equal(k->n_gen, 3);
    cal_job_unref(k);
    for (int i = 0; i < 3; i++) cal_job_unref(j[i]);
    close_fix(&f);
}

static void test_stop_ends_streams(void **state)
{
    (void)state;
    fixture f;
    assert_int_equal(open_fix(&f, 1, 4, 64), CAL_OK);
    cal_job *a = mkjob(10, 500, 1), *b = mkjob(10, 500, 1);
    assert_int_equal(cal_sched_submit(f.s, a), CAL_OK);
    assert_int_equal(cal_sched_submit(f.s, b), CAL_OK);
    cal_sched_stop(f.s);
    assert_true(is_done(a) && is_done(b));
    assert_non_null(strstr(a->out.data, "\"finish_reason\":\"abort\""));
    assert_non_null(strstr(b->out.data, "data: [DONE]"));
    assert_int_equal(cal_sched_submit(f.s, a), CAL_ECANCEL);
    char *p = cal_sched_profile(f.s);               /* after the stop: straight from the engine */
    assert_non_null(p);
    free(p);
    cal_job_unref(a);
    cal_job_unref(b);
    close_fix(&f);
}

static void test_pacer(void **state)
{
    (void)state;
    cal_srv_metrics m;
    assert_int_equal(cal_srv_metrics_init(&m, 1), CAL_OK);
    cal_pacer *p;
    const int64_t pace = 5 * 1000000;
    assert_int_equal(cal_pacer_open(pace, &m, &p), CAL_OK);
    cal_job *j = mkjob(3, 6, 1);
    assert_int_equal(cal_pacer_submit(p, j), CAL_OK);
    int64_t sent[6];
    int got = 0;
    int64_t end = cal_now_ns() + 5 * 1000000000LL;
    while (!is_done(j) && cal_now_ns() < end) {
        pthread_mutex_lock(&j->mu);
        int before = j->pace_sent;
        cal_pacer_fill(p, j);
        int64_t now = cal_now_ns();
        for (int k = before; k < j->pace_sent && got < 6; k++) sent[got++] = now;
        pthread_mutex_unlock(&j->mu);
        cal_sleep_ns(200000, NULL);
    }
    assert_true(is_done(j));
    assert_int_equal(got, 6);
    /* chunk k is due at arrival + pace·(k+1): never early */
    for (int k = 0; k < 6; k++) assert_true(sent[k] >= j->arrival_ns + pace * (k + 1));
    assert_int_equal(atomic_load(&m.late_n), 6);
    assert_non_null(strstr(j->out.data, "\"send_ns\":"));
    assert_non_null(strstr(j->out.data, "\"completion_tokens\":6"));
    cal_pacer_close(&p);
    assert_null(p);
    cal_job_unref(j);
    cal_srv_metrics_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_batching),
        cmocka_unit_test(test_queue_limit_and_cancel),
        cmocka_unit_test(test_stop_ends_streams),
        cmocka_unit_test(test_pacer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
