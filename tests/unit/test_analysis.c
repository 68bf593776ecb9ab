/* The run analysis (analysis.h): grouping, the shots a group quotes, the
 * pooling rule per statistic, and verdicts as data. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/analysis.h"
#include "caliper/error.h"
#include "caliper/protocol.h"

#define NS 1000000000LL
#define MAXC 16
#define MAXR 128

typedef struct fixture {
    cal_run_data d;
    cal_cell cells[MAXC];
    cal_req_result reqs[MAXR];
} fixture;

/* Add one shot of config (conc, prompt): nreq ok requests of out tokens,
 * each taking e2e_ms from send, TTFT ttft_ms; the cell lasts dur_s. */
static cal_cell *shot(fixture *f, int conc, int shot_index, cal_shot_kind kind, int nreq,
                      int out, double e2e_ms, double ttft_ms, double dur_s)
{
    cal_cell *c = &f->cells[f->d.n_cells];
    memset(c, 0, sizeof *c);
    c->seq = (int)f->d.n_cells;
    c->kind = CAL_CELL_SHOTS;
    c->concurrency = conc;
    c->prompt_tokens = 64;
    snprintf(c->content, sizeof c->content, "prose");
    c->unique_prompts = 1;
    c->prompt_exact = 1;
    c->max_tokens = out;
    c->shot_index = shot_index;
    c->shot_kind = kind;
    c->start_ns = NS + (int64_t)f->d.n_cells * 100 * NS;
    c->end_ns = c->start_ns + (int64_t)(dur_s * 1e9);
    c->req_first = f->d.n_reqs;
    c->n_requests = nreq;
    for (int k = 0; k < nreq; k++) {
        cal_req_result *q = &f->reqs[f->d.n_reqs++];
        memset(q, 0, sizeof *q);
        q->status = CAL_REQ_OK;
        q->sched_ns = q->send_ns = c->start_ns + (int64_t)k * NS / 100;
        q->first_token_ns = q->send_ns + (int64_t)(ttft_ms * 1e6);
        q->last_token_ns = q->send_ns + (int64_t)(e2e_ms * 1e6);
        q->end_ns = q->last_token_ns;
        q->prompt_tokens = 64;
        q->output_tokens = out;
        q->server_prefill_ms = q->server_decode_ms = -1;
        q->server_decode_tokens = -1;
    }
    cal_summary_compute(f->reqs + c->req_first, (size_t)nreq, dur_s, 0, &c->sum);
    f->d.n_cells++;
    f->d.cells = f->cells;
    f->d.reqs = f->reqs;
    return c;
}

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->d.run.id = 1;
    f->d.run.t0_mono_ns = NS;
}

static const cal_verdict *find(const cal_analysis *a, cal_verdict_kind k, int group)
{
    for (size_t i = 0; i < a->n_verdicts; i++)
        if (a->verdicts[i].kind == k && a->verdicts[i].group == group) return &a->verdicts[i];
    return NULL;
}

/* Shots 2..N are quoted; the pooled aggregate is Σ tokens ÷ Σ duration, not
 * the median of the shots' own aggregates; per-request statistics come from
 * the pooled requests; telemetry is a duration-weighted mean and a minimum. */
static void test_pool_rules(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    shot(&f, 1, 1, CAL_SHOT_COLD, 4, 20, 400, 50, 2.0);
    cal_cell *b = shot(&f, 1, 2, CAL_SHOT_WARM, 4, 20, 200, 40, 1.0);
    cal_cell *c = shot(&f, 1, 3, CAL_SHOT_WARM, 4, 20, 250, 40, 3.0);
    b->sum.clock_mhz_mean = 3000; b->sum.clock_mhz_min = 2900;
    c->sum.clock_mhz_mean = 2000; c->sum.clock_mhz_min = 1800;
    cal_analysis *a = NULL;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_int_equal(a->n_groups, 1);
    const cal_group *g = &a->groups[0];
    assert_int_equal(g->n_cells, 3);
    assert_int_equal(g->n_quoted, 2);
    assert_int_equal(g->first_excluded, 0);
    assert_int_equal(g->quoted_first, 2);
    assert_int_equal(g->quoted_last, 3);
    assert_int_equal(g->quoted_kind, CAL_SHOT_WARM);
    assert_int_equal(g->per_request, 1);
    /* 160 tokens over 4 s; the shots' own aggregates are 80 and 26.7 */
    assert_true(fabs(g->pooled.output_throughput - 40.0) < 1e-9);
    double med_shots = (b->sum.output_throughput + c->sum.output_throughput) / 2;
    assert_true(fabs(g->pooled.output_throughput - med_shots) > 10);
    assert_int_equal(g->pooled.completed, 8);
    assert_int_equal(g->pooled.total_output_tokens, 160);
    assert_true(fabs(g->pooled.duration - 4.0) < 1e-9);
    /* per-request tok/s: 100 (×4) and 80 (×4): the median of the pool is 90 */
    assert_true(fabs(g->pooled.per_request_output_throughput_median - 90.0) < 1e-9);
    assert_true(fabs(g->pooled.median_ttft_ms - 40.0) < 1e-6);
    /* clock: (1 s × 3000 + 3 s × 2000) ÷ 4 s; the lowest minimum */
    assert_true(fabs(g->pooled.clock_mhz_mean - 2250.0) < 1e-9);
    assert_true(fabs(g->pooled.clock_mhz_min - 1800.0) < 1e-9);
    assert_true(isnan(g->pooled.power_w_mean));
    cal_analysis_free(&a);
    assert_null(a);

    /* requests not loaded: counts and rates still pool, per-request stays unknown */
    f.d.n_reqs = 0;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_true(fabs(a->groups[0].pooled.output_throughput - 40.0) < 1e-9);
    assert_true(isnan(a->groups[0].pooled.per_request_output_throughput_median));
    cal_analysis_free(&a);
}

/* Warm-ups are never quoted; one measured shot is quoted alone, as stored;
 * --cold quotes cold shots 2..N like any series and says so in words. */
static void test_quotes(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    shot(&f, 1, 1, CAL_SHOT_WARMUP, 2, 10, 100, 10, 1.0);
    cal_cell *one = shot(&f, 1, 2, CAL_SHOT_COLD, 2, 10, 100, 10, 1.0);
    shot(&f, 8, 1, CAL_SHOT_WARMUP, 2, 10, 100, 10, 1.0);
    cal_analysis *a = NULL;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_int_equal(a->n_groups, 2);
    assert_int_equal(a->groups[0].n_quoted, 1);
    assert_int_equal(a->groups[0].first_excluded, -1);
    assert_int_equal(a->groups[0].quoted_first, 2);
    assert_memory_equal(&a->groups[0].pooled, &one->sum, sizeof one->sum);
    assert_int_equal(a->groups[1].n_quoted, 0);        /* only a warm-up */
    assert_int_equal(a->groups[1].per_request, 0);     /* c8: the aggregate column */
    assert_null(find(a, CAL_VK_SHOTS, 0));             /* one shot: nothing to judge */
    cal_analysis_free(&a);

    fixture_init(&f);
    for (int s = 1; s <= 4; s++) shot(&f, 1, s, CAL_SHOT_COLD, 3, 10, s == 1 ? 200 : 100, 10, 1.0);
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_int_equal(a->groups[0].quoted_first, 2);
    assert_int_equal(a->groups[0].quoted_last, 4);
    assert_int_equal(a->groups[0].quoted_kind, CAL_SHOT_COLD);
    const cal_verdict *v = find(a, CAL_VK_SHOTS, 0);
    assert_non_null(v);
    assert_non_null(strstr(v->text, "cold shots 2–4"));
    assert_non_null(strstr(v->text, "fresh processes disagree"));
    cal_analysis_free(&a);
}

/* A drop of shots 2..4 is a verdict with its numbers: direction, effect,
 * band; the clock check follows it, "cannot judge" without a clock. */
static void test_verdicts_as_data(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    shot(&f, 1, 1, CAL_SHOT_COLD, 4, 20, 200, 10, 1.0);
    for (int s = 2; s <= 4; s++) shot(&f, 1, s, CAL_SHOT_WARM, 4, 20, 400, 10, 1.0);
    cal_analysis *a = NULL;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    const cal_verdict *v = find(a, CAL_VK_SHOTS, 0);
    assert_non_null(v);
    assert_int_equal(v->judged, 1);
    assert_int_equal(v->direction, -1);
    assert_true(fabs(v->effect - 0.5) < 1e-6);          /* 100 → 50 tok/s */
    assert_true(v->lo <= v->effect && v->effect <= v->hi && v->lo > 0.03);   /* its CI */
    assert_true(fabs(v->values[0] - 100.0) < 1e-6);
    assert_string_equal(v->cell, "c1 · 64 tok prose");
    assert_non_null(strstr(v->text, "below shot 1"));
    const cal_verdict *fv = find(a, CAL_VK_FREQUENCY, 0);
    assert_non_null(fv);
    assert_int_equal(fv->judged, 0);
    assert_non_null(strstr(fv->text, "cannot judge"));
    char line[700];
    assert_string_equal(cal_verdict_line(fv, line, sizeof line),
                        "c1 · 64 tok prose: clock: cannot judge: no clock source measured the cold and warm shots");

    /* as the store keeps them, and back */
    char *js = cal_verdicts_json(a->verdicts, a->n_verdicts);
    assert_non_null(js);
    cal_verdict back[8];
    size_t nb = cal_verdicts_from_json(js, back, 8);
    assert_int_equal(nb, a->n_verdicts);
    for (size_t i = 0; i < nb; i++) {
        assert_int_equal(back[i].kind, a->verdicts[i].kind);
        assert_int_equal(back[i].group, a->verdicts[i].group);
        assert_int_equal(back[i].judged, a->verdicts[i].judged);
        assert_string_equal(back[i].text, a->verdicts[i].text);
    }
    assert_true(fabs(back[0].effect - v->effect) < 1e-12);
    /* a stored run shows its stored notes once, and not the recomputed kinds twice */
    char stored[8192];
    snprintf(stored, sizeof stored, "%.*s,\"the target stopped answering\",\"%s\"]",
             (int)strlen(js) - 1, js, cal_verdict_line(v, line, sizeof line));
    free(js);
    size_t before = a->n_verdicts;
    cal_analysis_free(&a);
    f.d.run.verdicts_json = stored;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_int_equal(a->n_verdicts, before + 1);
    assert_int_equal(a->verdicts[a->n_verdicts - 1].kind, CAL_VK_NOTE);
    assert_string_equal(a->verdicts[a->n_verdicts - 1].text, "the target stopped answering");
    cal_analysis_free(&a);

    /* names: one table, both ways */
    for (int k = 0; k < CAL_VK__N; k++) {
        cal_verdict_kind back_k;
        assert_int_equal(cal_verdict_kind_parse(cal_verdict_kind_name((cal_verdict_kind)k), &back_k), CAL_OK);
        assert_int_equal(back_k, k);
    }
    cal_verdict_kind bad;
    assert_int_equal(cal_verdict_kind_parse("wall", &bad), CAL_EINVAL);
}

/* A drop the clock explains, with power flat as the clock fell: the
 * frequency check judges it and the power wall is called, as data. */
static void test_clock_and_power_verdicts(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    cal_cell *c = shot(&f, 1, 1, CAL_SHOT_COLD, 4, 20, 200, 10, 1.0);
    c->sum.clock_mhz_mean = 3000;
    c->sum.power_w_mean = 60;
    for (int s = 2; s <= 4; s++) {
        c = shot(&f, 1, s, CAL_SHOT_WARM, 4, 20, 300, 10, 1.0);   /* 100 → 66.7 tok/s */
        c->sum.clock_mhz_mean = 2000 - 100 * (s - 2);            /* falls shot by shot */
        c->sum.power_w_mean = 60.5 - 0.5 * (s - 2);              /* flat */
    }
    cal_analysis *a = NULL;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    const cal_verdict *v = find(a, CAL_VK_SHOTS, 0);
    assert_non_null(v);
    assert_int_equal(v->direction, -1);
    const cal_verdict *fv = find(a, CAL_VK_FREQUENCY, 0);
    assert_non_null(fv);
    assert_int_equal(fv->judged, 1);
    double fw = cbrt(2000.0 * 1900 * 1800);             /* the warm shots' geometric mean */
    assert_true(fabs(fv->values[0] - 3000) < 1e-9);     /* f of shot 1 */
    assert_true(fabs(fv->values[1] - fw) < 1e-6);
    /* the share of the change the clock explains (SPEC 1.4: 1 = all), with its CI */
    assert_true(fabs(fv->effect - log(fw / 3000) / log(2.0 / 3)) < 1e-3);
    assert_true(fv->lo <= fv->effect && fv->effect <= fv->hi);
    const cal_verdict *pw = find(a, CAL_VK_POWER_WALL, 0);
    assert_non_null(pw);
    assert_int_equal(pw->direction, -1);
    assert_non_null(strstr(pw->text, "power ceiling"));
    char line[700];
    assert_non_null(strstr(cal_verdict_line(pw, line, sizeof line), "c1 · 64 tok prose: power: "));
    cal_analysis_free(&a);
}

/* The shot judgement sees each shot's requests (the one call site). */
static void test_shot_verdict_inputs(void **state)
{
    (void)state;
    double r1[] = {100, 101, 99}, r2[] = {98, 99, 100};
    cal_shot_sample s[2] = {
        {.shot_index = 1, .kind = CAL_SHOT_COLD, .value = 100, .req_tok_s = r1, .n_req = 3},
        {.shot_index = 2, .kind = CAL_SHOT_WARM, .value = 99, .req_tok_s = r2, .n_req = 3},
    };
    cal_verdict v;
    /* one warm shot: no verdict, and what to run instead */
    assert_int_equal(cal_analysis_shot_verdict(s, 2, 1, 0, &v), 0);
    assert_int_equal(v.kind, CAL_VK_SHOTS);
    assert_int_equal(v.direction, 0);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.text, "cannot judge: 1 warm shot; measure 5 shots");
    assert_int_equal(cal_analysis_shot_verdict(s, 1, 1, 0, &v), 0);
    assert_int_equal(v.judged, 0);
    /* two warm shots that agree with shot 1 */
    double r3[] = {101, 100, 99};
    cal_shot_sample s3[3] = {s[0], s[1],
        {.shot_index = 3, .kind = CAL_SHOT_WARM, .value = 100, .req_tok_s = r3, .n_req = 3}};
    assert_int_equal(cal_analysis_shot_verdict(s3, 3, 1, 0, &v), 1);
    assert_int_equal(v.direction, 0);
    assert_non_null(strstr(v.text, "shots 2–3 within 10 % of shot 1: no wall larger than 10 %"));
}

/* A/B: B ÷ A over shots paired by index, with its interval. */
static void test_ab(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    for (int s = 1; s <= 3; s++) {
        cal_cell *a = shot(&f, 1, s, s == 1 ? CAL_SHOT_COLD : CAL_SHOT_WARM, 2, 20, 200 + s, 10, 1.0);
        snprintf(a->target, sizeof a->target, "A");
        cal_cell *b = shot(&f, 1, s, s == 1 ? CAL_SHOT_COLD : CAL_SHOT_WARM, 2, 20, 100 + s, 10, 1.0);
        snprintf(b->target, sizeof b->target, "B");
    }
    cal_analysis *an = NULL;
    assert_int_equal(cal_analysis_run(&f.d, &an), CAL_OK);
    assert_int_equal(an->n_groups, 2);
    const cal_verdict *v = find(an, CAL_VK_AB, 0);
    assert_non_null(v);
    assert_int_equal(v->n, 3);
    assert_true(v->effect > 1.9 && v->effect < 2.1);
    assert_true(v->lo <= v->effect && v->effect <= v->hi);
    assert_int_equal(v->direction, 1);
    assert_non_null(strstr(v->text, "A/B c1 · 64 tok: B ÷ A = "));
    cal_analysis_free(&an);
}

/* ---- every reason a verdict gives is the condition that produced it ---- */

/* The text of the first verdict of kind k holding needle, or NULL. */
static const char *said(const cal_analysis *a, cal_verdict_kind k, const char *needle)
{
    for (size_t i = 0; i < a->n_verdicts; i++)
        if (a->verdicts[i].kind == k && strstr(a->verdicts[i].text, needle)) return a->verdicts[i].text;
    return NULL;
}

/* One cell of basis b (and its requests' server counts) analysed alone. */
static cal_analysis *one_basis(fixture *f, cal_prompt_basis b, int exact, int prompt, int asked,
                               int server_count)
{
    fixture_init(f);
    cal_cell *c = shot(f, 1, 1, CAL_SHOT_WARM, 4, 8, 100, 10, 1);
    c->prompt_basis = b;
    c->prompt_exact = exact;
    c->prompt_tokens = prompt;
    c->prompt_asked = asked;
    c->prompt_offset = b == CAL_PROMPT_CONFIRMED || b == CAL_PROMPT_SERVER ? 0 : -1;
    for (int i = 0; i < 4; i++) f->reqs[i].prompt_tokens = server_count;
    f->d.proto.shots = 1;
    cal_analysis *a = NULL;
    assert_int_equal(cal_analysis_run(&f->d, &a), CAL_OK);
    return a;
}

static void test_prompt_reasons(void **state)
{
    (void)state;
    static fixture f;
    cal_analysis *a;
    /* each basis gives its own reason, and no other's */
    static const struct { cal_prompt_basis b; int exact; cal_verdict_kind k; const char *says; } C[] = {
        {CAL_PROMPT_CONFIRMED, 1, CAL_VK_PROMPT_CHECK, "confirmed by the server's own count (usage.prompt_tokens) in 4 of 4"},
        {CAL_PROMPT_UNCONFIRMED, 1, CAL_VK_PROMPT_CHECK, "exact by /tokenize, not confirmed by the server"},
        {CAL_PROMPT_NO_TOKENIZE, 0, CAL_VK_PROMPT_APPROX, "the target has no /tokenize"},
        {CAL_PROMPT_TOKENIZER_FAILED, 0, CAL_VK_PROMPT_APPROX, "the target's /tokenize failed"},
        {CAL_PROMPT_BELOW_SHORTEST, 0, CAL_VK_PROMPT_APPROX, "shorter than the unique nonce line"},
        {CAL_PROMPT_NEAREST, 0, CAL_VK_PROMPT_APPROX, "no cut of the text counted that length"},
        {CAL_PROMPT_ESTIMATED, 0, CAL_VK_PROMPT_APPROX, "cut at the content's characters per token"},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        a = one_basis(&f, C[i].b, C[i].exact, 64, 0, C[i].b == CAL_PROMPT_UNCONFIRMED ? -1 : 64);
        if (!said(a, C[i].k, C[i].says)) fail_msg("basis %s: no \"%s\"", cal_prompt_basis_key(C[i].b), C[i].says);
        /* the reason a dataset run was once given belongs to no other basis */
        if (C[i].b != CAL_PROMPT_NO_TOKENIZE) assert_null(said(a, CAL_VK_PROMPT_APPROX, "no /tokenize ("));
        cal_analysis_free(&a);
    }
    /* the server's count where it disagreed: per group, with both numbers */
    a = one_basis(&f, CAL_PROMPT_SERVER, 0, 32, 64, 32);
    assert_non_null(said(a, CAL_VK_PROMPT_CHECK, "the server counted 32 where /tokenize said 64: 4 of 4 requests"));
    cal_analysis_free(&a);
    /* a dataset run: lengths per request, as the server counted them; never
     * "the target has no /tokenize" (it was told so against a target that
     * has one) */
    a = one_basis(&f, CAL_PROMPT_MIXED, 0, 0, 0, 57);
    assert_non_null(said(a, CAL_VK_PROMPT_APPROX, "vary by request (drawn lengths): each request's length is the server's own count, reported for 4 of 4"));
    cal_analysis_free(&a);
    fixture_init(&f);
    shot(&f, 1, 1, CAL_SHOT_WARM, 4, 8, 100, 10, 1)->prompt_basis = CAL_PROMPT_MIXED;
    f.cells[0].prompt_exact = 0;
    f.d.proto.dataset.present = 1;
    f.d.proto.shots = 1;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_non_null(said(a, CAL_VK_PROMPT_APPROX, "vary by request (the dataset's texts)"));
    assert_null(said(a, CAL_VK_PROMPT_APPROX, "/tokenize"));
    cal_analysis_free(&a);
    /* a run stored before the reason was: a dataset's still reads as one */
    fixture_init(&f);
    shot(&f, 1, 1, CAL_SHOT_WARM, 4, 8, 100, 10, 1)->prompt_exact = 0;
    f.cells[0].prompt_tokens = 0;
    f.d.proto.dataset.present = 1;
    f.d.proto.shots = 1;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_non_null(said(a, CAL_VK_PROMPT_APPROX, "vary by request (the dataset's texts)"));
    assert_null(said(a, CAL_VK_PROMPT_APPROX, "no /tokenize"));
    cal_analysis_free(&a);
}

static void test_other_reasons(void **state)
{
    (void)state;
    static fixture f;
    cal_analysis *a;
    /* no clock: telemetry off says so, not "no sensor was read" */
    fixture_init(&f);
    shot(&f, 1, 1, CAL_SHOT_WARM, 4, 8, 100, 10, 1);
    f.d.proto.shots = 1;
    f.d.run.telemetry_json = "{\"sources\":[],\"summary\":\"off (--no-telemetry): clock and power not sampled\"}";
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_non_null(said(a, CAL_VK_TELEMETRY, "clock: absent — telemetry was off (--no-telemetry): clock and power not sampled, so a slowdown"));
    cal_analysis_free(&a);
    f.d.run.telemetry_json = "{\"sources\":[{\"backend\":\"cpufreq\",\"present\":false}],\"summary\":\"no backend · clock: absent · power: absent\"}";
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_non_null(said(a, CAL_VK_TELEMETRY, "no clock sensor was read"));
    cal_analysis_free(&a);
    f.d.run.telemetry_json = NULL;
    /* one shot: cannot judge, and the protocol that would */
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_non_null(said(a, CAL_VK_SHOTS, "cannot judge: 1 shot; the default protocol"));
    cal_analysis_free(&a);
    /* a prefill line whose TTFT falls as prompts grow is no cost */
    fixture_init(&f);
    int lens[] = {64, 128, 256};
    double ttft[] = {30, 20, 10};
    for (int i = 0; i < 3; i++) {
        cal_cell *c = shot(&f, 1, 1, CAL_SHOT_WARM, 4, 8, 100, ttft[i], 1);
        c->prompt_tokens = lens[i];
        c->kind = CAL_CELL_PROMPT_SWEEP;
    }
    f.d.proto.shots = 1;
    assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
    assert_non_null(said(a, CAL_VK_PREFILL_FIT, "prefill: no per-token cost shown"));
    assert_null(said(a, CAL_VK_PREFILL_FIT, "fixed cost"));
    cal_analysis_free(&a);
    /* a slow first measured shot: "a warm-up preceded it" only when one did */
    for (int warm = 0; warm < 2; warm++) {
        fixture_init(&f);
        shot(&f, 1, 1, warm ? CAL_SHOT_WARM : CAL_SHOT_UNKNOWN, 8, 8, 200, 10, 1);
        for (int k = 2; k <= 5; k++) shot(&f, 1, k, CAL_SHOT_WARM, 8, 8, 100 + k, 10, 1);
        f.d.proto.shots = 5;
        assert_int_equal(cal_analysis_run(&f.d, &a), CAL_OK);
        const cal_verdict *v = find(a, CAL_VK_SHOTS, 0);
        assert_non_null(v);
        assert_int_equal(v->direction, 1);
        if (warm) assert_non_null(strstr(v->text, "although a warm-up preceded it"));
        else assert_non_null(strstr(v->text, "caliper did not start this engine"));
        cal_analysis_free(&a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_rules),
        cmocka_unit_test(test_quotes),
        cmocka_unit_test(test_verdicts_as_data),
        cmocka_unit_test(test_clock_and_power_verdicts),
        cmocka_unit_test(test_shot_verdict_inputs),
        cmocka_unit_test(test_ab),
        cmocka_unit_test(test_prompt_reasons),
        cmocka_unit_test(test_other_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
