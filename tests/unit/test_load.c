/* Unit tests: the open-loop arrival schedules (ramp and burst counts and
 * times, seeded reproducibility, the --rate syntax), the --slo parser and
 * the per-request SLO check against hand-built requests, goodput, and the
 * saturation sweep's steps, stopping rule and knee (also as the report's
 * goodput table). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/arrivals.h"
#include "caliper/error.h"
#include "caliper/goodput.h"
#include "caliper/report.h"
#include "caliper/saturation.h"

static cal_arrivals parse_ok(const char *s)
{
    cal_arrivals a;
    char err[200] = "";
    if (cal_arrivals_parse(s, &a, err, sizeof err) != CAL_OK) fail_msg("%s: %s", s, err);
    return a;
}

static void parse_bad(const char *s, const char *needle)
{
    cal_arrivals a;
    char err[200] = "";
    assert_int_equal(cal_arrivals_parse(s, &a, err, sizeof err), CAL_EINVAL);
    if (!strstr(err, needle)) fail_msg("%s: message \"%s\" lacks \"%s\"", s, err, needle);
}

static void test_rate_syntax(void **state)
{
    (void)state;
    cal_arrivals a = parse_ok("4");
    assert_int_equal(a.kind, CAL_ARR_POISSON);
    assert_true(a.rate == 4);
    a = parse_ok("2k");
    assert_true(a.rate == 2000);
    a = parse_ok("ramp:1-20/60s");
    assert_int_equal(a.kind, CAL_ARR_RAMP);
    assert_true(a.from == 1 && a.to == 20 && a.over_s == 60);
    assert_true(cal_arrivals_mean_rate(&a) == 10.5);
    a = parse_ok("ramp:20-0/2m");   /* a ramp down */
    assert_true(a.from == 20 && a.to == 0 && a.over_s == 120);
    a = parse_ok("burst:8/every 5s");
    assert_int_equal(a.kind, CAL_ARR_BURST);
    assert_true(a.burst == 8 && a.every_s == 5);
    assert_true(cal_arrivals_mean_rate(&a) == 1.6);
    a = parse_ok("burst:3/250ms");
    assert_true(a.burst == 3 && fabs(a.every_s - 0.25) < 1e-12);
    /* the canonical text reads back as the same pattern */
    /* a rate small enough to format with an exponent keeps its sign out of
     * the ramp's dash (found by fuzz_load_args) */
    const char *texts[] = {"4", "ramp:1-20/60s", "burst:8/every 5s", "burst:3/every 0.25s",
                           "ramp:6.15e-14-40/3s", "ramp:2e-05-3e-05/1s"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char buf[64];
        cal_arrivals x = parse_ok(texts[i]);
        assert_string_equal(cal_arrivals_format(&x, buf, sizeof buf), texts[i]);
        cal_arrivals y = parse_ok(buf);
        assert_memory_equal(&x, &y, sizeof x);
    }
    parse_bad("0", "rate: \"0\" is not a positive request rate");
    parse_bad("fast", "\"fast\"");
    parse_bad("2e6", "over");
    parse_bad("ramp:1-20", "ramp:FROM-TO/TIME");
    parse_bad("ramp:x-20/60s", "ramp start: \"x\"");
    parse_bad("ramp:1-20/soon", "ramp time: \"soon\"");
    parse_bad("ramp:0-0/10s", "from 0 to 0");
    parse_bad("burst:0/every 1s", "burst size \"0\"");
    parse_bad("burst:4", "burst:N/every TIME");
    parse_bad("burst:4/every -1s", "\"burst:4/every -1s\": its period \"-1s\"");
    parse_bad("burst:5/every 0s", "\"burst:5/every 0s\": its period \"0s\"");
    /* a schedule whose waits pass a day is refused, not run back to back */
    parse_bad("1e-12", "\"1e-12\" is under 1.16e-05 requests/s (one a day)");
    parse_bad("ramp:1e-12-1e-12/60s", "one a day");
    a = parse_ok("2e-05");                 /* just above the floor */
    assert_true(a.rate == 2e-05);
}

/* Bursts: arrival k at floor(k / N) × T exactly, whatever the seed. */
static void test_burst_times(void **state)
{
    (void)state;
    cal_arrivals a = parse_ok("burst:3/every 200ms");
    cal_arrival_gen g;
    cal_arrival_gen_init(&g, &a, 99);
    for (int k = 0; k < 12; k++)
        assert_int_equal(cal_arrival_next_ns(&g), (int64_t)(k / 3) * 200000000);
    assert_int_equal(cal_arrivals_default_n(&a), 12);   /* four bursts */
    assert_true(cal_arrivals_expected(&a, 0.5) == 9);   /* bursts at 0, 0.2, 0.4 */
}

/* A ramp: the counts per window follow the integrated rate, the arrivals
 * never go back, and arrival k sits exactly where ∫rate equals the sum of
 * the first k unit exponentials (time rescaling). */
static void test_ramp_counts(void **state)
{
    (void)state;
    cal_arrivals a = parse_ok("ramp:1-20/60s");
    size_t n = cal_arrivals_default_n(&a);
    assert_int_equal(n, 630);   /* (1 + 20) / 2 × 60 */
    cal_arrival_gen g;
    cal_arrival_gen_init(&g, &a, 7);
    size_t first_half = 0, second_half = 0, after = 0;
    int64_t prev = 0;
    for (size_t k = 0; k < n; k++) {
        int64_t t = cal_arrival_next_ns(&g);
        assert_true(t >= prev);
        prev = t;
        /* exact: the integrated rate at t is the running sum of exponentials */
        assert_true(fabs(cal_arrivals_expected(&a, (double)t / 1e9) - g.area) < 1e-6 * (1 + g.area));
        if (t < 30e9) first_half++;
        else if (t < 60e9) second_half++;
        else after++;
    }
    /* expected 172.5 and 457.5 (Poisson sd about 13 and 21): five sd */
    assert_true(fabs((double)first_half - 172.5) < 5 * sqrt(172.5));
    assert_true(fabs((double)second_half - 457.5) < 5 * sqrt(457.5));
    assert_true(after < 5 * sqrt(630.0));
    /* the density rises: the last 10 s hold far more than the first 10 s */
    cal_arrival_gen_init(&g, &a, 7);
    size_t early = 0, late = 0;
    for (size_t k = 0; k < n; k++) {
        int64_t t = cal_arrival_next_ns(&g);
        early += t < 10e9;
        late += t >= 50e9 && t < 60e9;
    }
    assert_true(late > 4 * early);

    /* after the ramp the rate holds at its end: 20/s for the next 10 s */
    cal_arrival_gen_init(&g, &a, 3);
    size_t held = 0;
    for (size_t k = 0; k < 2000; k++) {
        int64_t t = cal_arrival_next_ns(&g);
        held += t >= 60e9 && t < 70e9;
    }
    assert_true(fabs((double)held - 200) < 5 * sqrt(200.0));

    /* a ramp down to 0 ends: requests beyond its area arrive at its end,
     * never a year out */
    a = parse_ok("ramp:10-0/2s");
    cal_arrival_gen_init(&g, &a, 1);
    for (int k = 0; k < 40; k++) assert_true(cal_arrival_next_ns(&g) <= 2000000000);
}

/* The same seed gives the same schedule; another seed another one. Poisson
 * at a fixed rate has the mean gap 1 / rate. */
static void test_seeded(void **state)
{
    (void)state;
    cal_arrivals a = parse_ok("ramp:2-10/5s"), p = parse_ok("50");
    cal_arrival_gen g1, g2, g3;
    cal_arrival_gen_init(&g1, &a, 42);
    cal_arrival_gen_init(&g2, &a, 42);
    cal_arrival_gen_init(&g3, &a, 43);
    int differ = 0;
    for (int k = 0; k < 30; k++) {
        int64_t t1 = cal_arrival_next_ns(&g1), t2 = cal_arrival_next_ns(&g2);
        assert_int_equal(t1, t2);
        differ |= t1 != cal_arrival_next_ns(&g3);
    }
    assert_true(differ);
    cal_arrival_gen_init(&g1, &p, 1);
    int64_t last = 0;
    for (int k = 0; k < 5000; k++) last = cal_arrival_next_ns(&g1);
    double mean_gap = (double)last / 5000 / 1e9;
    assert_true(fabs(mean_gap - 0.02) < 5 * 0.02 / sqrt(5000.0));
}

/* ---- SLO ------------------------------------------------------------------ */

static void test_slo_parse(void **state)
{
    (void)state;
    cal_slo s;
    char err[200] = "", buf[160];
    assert_int_equal(cal_slo_parse("ttft=500ms,tpot=50ms", &s, err, sizeof err), CAL_OK);
    assert_true(s.ttft_ms == 500 && s.tpot_ms == 50 && s.itl_p99_ms == 0 && s.e2e_ms == 0);
    assert_string_equal(cal_slo_format(&s, buf, sizeof buf), "ttft=500ms,tpot=50ms");
    assert_int_equal(cal_slo_parse("e2e=2s,itl=80,ttft=0.5s", &s, err, sizeof err), CAL_OK);
    assert_true(s.e2e_ms == 2000 && s.itl_p99_ms == 80 && s.ttft_ms == 500);
    assert_string_equal(cal_slo_format(&s, buf, sizeof buf), "ttft=500ms,itl=80ms,e2e=2000ms");
    cal_slo back;
    assert_int_equal(cal_slo_parse(buf, &back, err, sizeof err), CAL_OK);
    assert_memory_equal(&s, &back, sizeof s);
    cal_slo none;
    memset(&none, 0, sizeof none);
    assert_false(cal_slo_given(&none));
    assert_string_equal(cal_slo_format(&none, buf, sizeof buf), "");
    static const char *const bad[][2] = {
        {"ttft=abc", "slo: ttft: \"abc\" is not a time"},
        {"ttft=-5ms", "ttft: \"-5ms\""},
        {"ttft=0", "ttft: \"0\""},
        {"latency=5ms", "\"latency\" is not a bound"},
        {"ttft", "\"ttft\" is not KEY=TIME"},
        {"ttft=5ms,ttft=6ms", "ttft is given twice"},
        {"", "names no bound"},
        {",", "names no bound"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cal_slo keep = s;
        assert_int_equal(cal_slo_parse(bad[i][0], &s, err, sizeof err), CAL_EINVAL);
        if (!strstr(err, bad[i][1])) fail_msg("%s: \"%s\" lacks \"%s\"", bad[i][0], err, bad[i][1]);
        assert_memory_equal(&s, &keep, sizeof s);   /* left as it was */
    }
}

/* One ok request: scheduled at 1 s, first token 100 ms later, 11 tokens in
 * 11 chunks 20 ms apart but one gap of 120 ms, ending at the last token. */
static cal_req_result req(int64_t *chunks)
{
    cal_req_result r;
    cal_req_result_init(&r);
    r.status = CAL_REQ_OK;
    r.sched_ns = 1000000000;
    r.send_ns = r.sched_ns + 5000000;
    r.first_token_ns = r.sched_ns + 100000000;
    int64_t t = r.first_token_ns;
    for (int k = 0; k < 11; k++) {
        chunks[k] = t;
        t += k == 5 ? 120000000 : 20000000;
    }
    r.chunk_ns = chunks;
    r.n_chunks = 11;
    r.last_token_ns = r.end_ns = chunks[10];   /* 100 + 9×20 + 120 = 400 ms */
    r.output_tokens = 11;
    r.prompt_tokens = 32;
    return r;
}

static int met(const char *slo, const cal_req_result *r)
{
    cal_slo s;
    assert_int_equal(cal_slo_parse(slo, &s, NULL, 0), CAL_OK);
    return cal_slo_met(&s, r);
}

static void test_slo_met(void **state)
{
    (void)state;
    int64_t ch[11];
    cal_req_result r = req(ch);
    /* TTFT 100 ms from the scheduled time (not the send) */
    assert_int_equal(met("ttft=100ms", &r), 1);
    assert_int_equal(met("ttft=99ms", &r), 0);
    /* E2E 400 ms */
    assert_int_equal(met("e2e=400ms", &r), 1);
    assert_int_equal(met("e2e=399ms", &r), 0);
    /* TPOT (400 − 100) / 10 = 30 ms */
    assert_int_equal(met("tpot=30ms", &r), 1);
    assert_int_equal(met("tpot=29ms", &r), 0);
    /* the request's own ITL p99: nine 20 ms gaps and one 120 ms gap, type 7:
     * 20 + 0.91 × 100 = 111 ms */
    assert_int_equal(met("itl=111.5ms", &r), 1);
    assert_int_equal(met("itl=110ms", &r), 0);
    /* every bound must hold */
    assert_int_equal(met("ttft=1s,e2e=1s,tpot=1s,itl=1s", &r), 1);
    assert_int_equal(met("ttft=1s,e2e=1s,tpot=1s,itl=50ms", &r), 0);
    /* without chunk times an ITL bound cannot be judged */
    cal_req_result nochunks = r;
    nochunks.chunk_ns = NULL;
    assert_int_equal(met("itl=1s", &nochunks), -1);
    assert_int_equal(met("ttft=1s", &nochunks), 1);
    /* one token: no decode, TPOT and ITL hold */
    cal_req_result one = r;
    one.output_tokens = 1;
    one.n_chunks = 1;
    assert_int_equal(met("tpot=1ms,itl=1ms", &one), 1);
    /* a failed request never meets an SLO */
    cal_req_result bad = r;
    bad.status = CAL_REQ_TIMEOUT;
    assert_int_equal(met("e2e=1h", &bad), 0);
}

static void test_goodput_count(void **state)
{
    (void)state;
    int64_t ch[4][11];
    cal_req_result r[4];
    for (int i = 0; i < 4; i++) r[i] = req(ch[i]);
    r[1].first_token_ns += 300000000;   /* TTFT 400 ms */
    r[2].status = CAL_REQ_HTTP_ERROR;
    cal_slo s;
    assert_int_equal(cal_slo_parse("ttft=200ms", &s, NULL, 0), CAL_OK);
    size_t n;
    assert_int_equal(cal_slo_count(&s, r, 4, &n), CAL_OK);
    assert_int_equal(n, 2);
    assert_true(fabs(cal_goodput(&s, r, 4, 4.0) - 0.5) < 1e-12);
    assert_true(isnan(cal_goodput(&s, r, 4, 0)));
    cal_slo none;
    memset(&none, 0, sizeof none);
    assert_true(isnan(cal_goodput(&none, r, 4, 4.0)));
    r[3].chunk_ns = NULL;   /* an unknown answer makes goodput unknown */
    assert_int_equal(cal_slo_parse("itl=1s", &s, NULL, 0), CAL_OK);
    assert_int_equal(cal_slo_count(&s, r, 4, &n), CAL_EABSENT);
    assert_true(isnan(cal_goodput(&s, r, 4, 4.0)));
}

/* ---- the saturation sweep ---------------------------------------------------- */

static void test_sweep_steps(void **state)
{
    (void)state;
    cal_sat s;
    char err[300];
    assert_int_equal(cal_sat_init(&s, 1, 16, 5, err, sizeof err), CAL_OK);
    double want[] = {1, 2, 4, 8, 16}, r;
    /* goodput follows the offered rate up to 5 req/s, then holds */
    for (int k = 0; k < 5; k++) {
        assert_int_equal(cal_sat_next(&s, &r), 1);
        assert_true(fabs(r - want[k]) < 1e-9);
        cal_sat_record(&s, fmin(r, 5.0));
        if (k < 4) assert_false(s.saturated);
    }
    /* 1, 2, 4, 5, 5: 4 → 5 is +25 %, so only one step gained less than
     * 5 %; the rule needs two, and 16 was the last rate */
    assert_false(s.saturated);
    assert_int_equal(cal_sat_next(&s, &r), 0);

    /* a plateau: stops after two flat steps, knee at the first within 5 % */
    assert_int_equal(cal_sat_init(&s, 1, 128, 8, err, sizeof err), CAL_OK);
    double g[] = {1, 2, 3.9, 4.0, 4.1, 99};
    int steps = 0;
    while (cal_sat_next(&s, &r)) cal_sat_record(&s, g[steps++]);
    assert_int_equal(steps, 5);   /* 3.9 → 4.0 → 4.1: +2.6 % and +2.5 % */
    assert_true(s.saturated);
    assert_int_equal(cal_sat_knee(s.goodput, (size_t)s.done), 2);   /* 3.9 >= 0.95 × 4.1 */
    /* NAN (unknown) counts as nothing good: three unknown steps stop it */
    assert_int_equal(cal_sat_init(&s, 1, 100, 6, err, sizeof err), CAL_OK);
    steps = 0;
    while (cal_sat_next(&s, &r)) { cal_sat_record(&s, NAN); steps++; }
    assert_int_equal(steps, 3);
    assert_int_equal(cal_sat_knee(s.goodput, 3), -1);

    /* bounds, each naming its field */
    assert_int_equal(cal_sat_init(&s, 1, 1.5, 8, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "sweep_steps: 8 steps from 1 to 1.5"));
    assert_int_equal(cal_sat_init(&s, 4, 2, 4, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "sweep_max_rate: 2 is not above the start rate 4"));
    assert_int_equal(cal_sat_init(&s, 1, 16, 1, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "sweep_steps: 1"));
    assert_int_equal(cal_sat_init(&s, 0, 16, 4, err, sizeof err), CAL_EINVAL);
    assert_non_null(strstr(err, "rate: 0"));
}

/* The report's table: one row per rate, the knee marked where the rule
 * says, and no knee claimed for a sweep still rising. */
static cal_result *curve(const double *rate, const double *good, size_t n)
{
    cal_result *r = cal_result_new();
    for (size_t i = 0; i < n; i++) {
        cal_rcell *c = cal_result_add_cell(r, CAL_SWEEP_OTHER);
        c->fp.request_rate = rate[i];
        c->fp.prompt_tokens = 32;
        c->fp.shot_first = 1;
        cal_fp_set(c->fp.slo, "e2e=2000ms");
        c->v[CAL_M_GOODPUT] = good[i];
        c->v[CAL_M_REQ_THROUGHPUT] = good[i] * 1.1;
    }
    return r;
}

static void test_report_knee(void **state)
{
    (void)state;
    double rate[] = {1, 2, 4, 8, 16}, flat[] = {1, 2, 3.9, 4.0, 4.1}, rising[] = {1, 2, 4, 8, 16};
    cal_result *r = curve(rate, flat, 5);
    cal_buf b = {0};
    assert_int_equal(cal_report_goodput_md(r, &b), CAL_OK);
    assert_non_null(strstr(b.data, "## Goodput against offered load"));
    assert_non_null(strstr(b.data, "SLO e2e=2000ms"));
    assert_non_null(strstr(b.data, "| 4 | 4.290 | 3.900 | +95 % | ← knee |"));
    assert_non_null(strstr(b.data, "Knee: 4 req/s offered gives 3.900 req/s goodput"));
    assert_non_null(strstr(b.data, "+3 % and +2 % over the last two steps"));
    cal_buf_free(&b);
    cal_result_free(&r);

    r = curve(rate, rising, 5);
    assert_int_equal(cal_report_goodput_md(r, &b), CAL_OK);
    assert_null(strstr(b.data, "← knee"));
    assert_non_null(strstr(b.data, "No knee: up to the last offered rate, 16 req/s, goodput never gained less than 5 %"));
    cal_buf_free(&b);
    /* the HTML chart marks it too */
    cal_result_free(&r);
    r = curve(rate, flat, 5);
    const cal_result *rs[1] = {r};
    assert_int_equal(cal_report_write(rs, 1, CAL_REPORT_HTML, &b), CAL_OK);
    assert_non_null(strstr(b.data, "id=\"chart-goodput-0\""));
    assert_non_null(strstr(b.data, "knee: 4 req/s offered"));
    cal_buf_free(&b);
    cal_result_free(&r);

    /* no goodput: nothing written */
    double none[] = {NAN, NAN};
    r = curve(rate, none, 2);
    assert_int_equal(cal_report_goodput_md(r, &b), CAL_OK);
    assert_int_equal(b.len, 0);
    cal_buf_free(&b);
    cal_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_syntax),
        cmocka_unit_test(test_burst_times),
        cmocka_unit_test(test_ramp_counts),
        cmocka_unit_test(test_seeded),
        cmocka_unit_test(test_slo_parse),
        cmocka_unit_test(test_slo_met),
        cmocka_unit_test(test_goodput_count),
        cmocka_unit_test(test_sweep_steps),
        cmocka_unit_test(test_report_knee),
    };
    return cmocka_run_group_tests_name("load", tests, NULL, NULL);
}
