/* Unit tests: the gate's statistics against brute force (the signed-rank
 * null distribution by enumerating every sign pattern, the Hodges–Lehmann
 * estimate and its CI from the Walsh averages), Holm's adjustment on a
 * worked example, the four answers on constructed evidence, the --fail
 * specs (and every malformed one named), the decision on constructed runs
 * with known effects, and the outputs' shape. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "caliper/error.h"
#include "caliper/gate.h"
#include "caliper/stats.h"
#include "caliper/trend.h"
#include "tests/helpers/gate_sim.h"

#define NEAR(got, want, tol) assert_true(fabs((got) - (want)) <= (tol))

static double *scratch_for(size_t n)
{
    double *s = malloc(cal_gate_scratch_len(n) * sizeof *s);
    assert_non_null(s);
    return s;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* W+ of x[n] after shifting by theta (no ties in the tests' data) */
static double wplus(const double *x, size_t n, double theta)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - theta;
        if (d <= 0) continue;
        size_t r = 1;
        for (size_t j = 0; j < n; j++) if (fabs(x[j] - theta) < fabs(d)) r++;
        w += (double)r;
    }
    return w;
}

/* P(W+ <= t) by enumerating the 2^n sign patterns */
static double brute_cdf(size_t n, double t)
{
    size_t hit = 0, all = (size_t)1 << n;
    for (size_t mask = 0; mask < all; mask++) {
        double w = 0;
        for (size_t k = 0; k < n; k++) if (mask & ((size_t)1 << k)) w += (double)(k + 1);
        if (w <= t) hit++;
    }
    return (double)hit / (double)all;
}

static void test_signed_rank_brute_force(void **state)
{
    (void)state;
    const double x[] = {0.031, -0.012, 0.054, 0.020, -0.007, 0.046, 0.011, 0.038, -0.025, 0.027};
    size_t n = sizeof x / sizeof x[0];
    double *s = scratch_for(n);
    cal_gate_stat st;
    assert_int_equal(cal_gate_signed_rank(x, n, 0.05, s, cal_gate_scratch_len(n), &st), CAL_OK);
    assert_int_equal(st.n, n);
    assert_true(st.exact);
    double w = wplus(x, n, 0);
    NEAR(st.p_down, brute_cdf(n, w), 1e-12);
    NEAR(st.p_up, 1 - brute_cdf(n, w - 1), 1e-12);
    /* Hodges–Lehmann: the median of the 55 Walsh averages */
    double walsh[55];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) walsh[k++] = 0.5 * (x[i] + x[j]);
    qsort(walsh, k, sizeof *walsh, cmpd);
    NEAR(st.est, walsh[27], 1e-15);
    /* the CI: the largest c with P(W+ <= c - 1) <= 0.05 by enumeration */
    size_t c = 0;
    while (brute_cdf(n, (double)c) <= 0.05) c++;
    assert_true(c >= 1);
    NEAR(st.lo, walsh[c - 1], 1e-15);
    NEAR(st.hi, walsh[55 - c], 1e-15);
    /* and the CI is what the test inverts: just inside it, no rejection */
    assert_true(brute_cdf(n, wplus(x, n, st.lo + 1e-9)) > 0.05 ||
                1 - brute_cdf(n, wplus(x, n, st.lo + 1e-9) - 1) > 0.05);
    assert_true(st.min_n == 5);   /* 2^-5 <= 0.05 < 2^-4 */
    free(s);
}

static void test_signed_rank_edges(void **state)
{
    (void)state;
    double *s = scratch_for(64);
    cal_gate_stat st;
    /* three pairs cannot reach 5 % one-sided: the CI is unbounded */
    const double three[] = {-0.3, -0.2, -0.25};
    assert_int_equal(cal_gate_signed_rank(three, 3, 0.05, s, cal_gate_scratch_len(64), &st), CAL_OK);
    assert_true(isinf(st.lo) && isinf(st.hi));
    NEAR(st.p_down, 0.125, 1e-12);
    /* zeros are dropped; non-finite values skipped */
    const double z[] = {0, 0.1, NAN, -0.05, 0, 0.2, INFINITY, 0.15, 0.12};
    assert_int_equal(cal_gate_signed_rank(z, 9, 0.05, s, cal_gate_scratch_len(64), &st), CAL_OK);
    assert_int_equal(st.n, 5);
    /* ties use the normal approximation */
    const double t[] = {0.1, -0.1, 0.1, 0.2, 0.2, -0.3, 0.1, 0.4};
    assert_int_equal(cal_gate_signed_rank(t, 8, 0.05, s, cal_gate_scratch_len(64), &st), CAL_OK);
    assert_false(st.exact);
    assert_true(st.p_up > 0 && st.p_up < 1);
    /* nothing at all */
    assert_int_equal(cal_gate_signed_rank(NULL, 0, 0.05, NULL, 0, &st), CAL_OK);
    assert_true(isnan(st.est));
    assert_true(st.p_up == 1 && st.p_down == 1);
    /* bad input */
    assert_int_equal(cal_gate_signed_rank(t, 8, 0.6, s, cal_gate_scratch_len(64), &st), CAL_EINVAL);
    assert_int_equal(cal_gate_signed_rank(t, 8, 0.05, s, 3, &st), CAL_ETOOBIG);
    /* large n: the normal approximation agrees with the exact tail */
    double big[121];
    for (int i = 0; i < 120; i++) big[i] = 0.004 + 0.05 * sin(1.3 * i + 0.1);
    cal_gate_stat ex, ap;
    double *s2 = scratch_for(121);
    assert_int_equal(cal_gate_signed_rank(big, 120, 0.05, s2, cal_gate_scratch_len(121), &ex), CAL_OK);
    assert_true(ex.exact);
    big[120] = big[0];   /* one tie: the normal approximation */
    assert_int_equal(cal_gate_signed_rank(big, 121, 0.05, s2, cal_gate_scratch_len(121), &ap), CAL_OK);
    assert_false(ap.exact);
    assert_true(fabs(log(ap.p_up / ex.p_up)) < 0.5);
    assert_true(fabs(ap.lo - ex.lo) < 0.01 && fabs(ap.hi - ex.hi) < 0.01);
    free(s2);
    free(s);
}

static void test_t_and_holm(void **state)
{
    (void)state;
    cal_gate_stat st;
    assert_int_equal(cal_gate_t(0, 0.1, 10, 0.05, &st), CAL_OK);
    NEAR(st.p_up, 0.5, 1e-12);
    NEAR(st.p_down, 0.5, 1e-12);
    NEAR(st.hi, cal_stats_t_quantile(0.95, 10) * 0.1, 1e-12);
    NEAR(st.lo, -st.hi, 1e-15);
    assert_int_equal(cal_gate_t(NAN, 0.1, 10, 0.05, &st), CAL_EINVAL);
    assert_int_equal(cal_gate_t(0.1, 0, 10, 0.05, &st), CAL_EINVAL);
    assert_int_equal(cal_gate_t(0.1, 0.1, 0, 0.05, &st), CAL_EINVAL);
    /* Holm on a worked example: sorted .005 .01 .03 .04 → .02 .03 .06 .06 */
    double p[] = {0.01, 0.04, 0.03, 0.005}, adj[4];
    size_t idx[4];
    cal_gate_holm(p, 4, adj, idx);
    NEAR(adj[0], 0.03, 1e-15);
    NEAR(adj[1], 0.06, 1e-15);
    NEAR(adj[2], 0.06, 1e-15);
    NEAR(adj[3], 0.02, 1e-15);
    /* in place, NAN as 1, capped at 1 */
    double q[] = {0.5, NAN, 0.2};
    cal_gate_holm(q, 3, q, idx);
    NEAR(q[2], 0.6, 1e-15);
    NEAR(q[0], 1, 1e-15);
    NEAR(q[1], 1, 1e-15);
}

static cal_gate_stat stat_of(double est, double lo, double hi)
{
    cal_gate_stat s;
    memset(&s, 0, sizeof s);
    s.est = est;
    s.lo = lo;
    s.hi = hi;
    s.n = 10;
    return s;
}

static void test_decide(void **state)
{
    (void)state;
    double b = 0.05, a = 0.05;
    /* throughput 12 % lower, significant after Holm: a regression */
    cal_gate_stat s = stat_of(log(0.88), log(0.84), log(0.92));
    assert_int_equal(cal_gate_decide(&s, 0, b, 0.01, 1, a), CAL_GATE_REGRESSION);
    /* the same but not significant after Holm: the CI does not fit: cannot */
    assert_int_equal(cal_gate_decide(&s, 0, b, 0.2, 1, a), CAL_GATE_CANNOT);
    /* significant but under the bound, CI inside ±5 %: no change larger */
    s = stat_of(log(0.98), log(0.97), log(0.99));
    assert_int_equal(cal_gate_decide(&s, 0, b, 0.001, 1, a), CAL_GATE_NO_CHANGE);
    /* latency 12 % higher is a regression; for throughput the same is an improvement */
    s = stat_of(log(1.12), log(1.08), log(1.16));
    assert_int_equal(cal_gate_decide(&s, 1, b, 0.01, 1, a), CAL_GATE_REGRESSION);
    assert_int_equal(cal_gate_decide(&s, 0, b, 1, 0.01, a), CAL_GATE_IMPROVEMENT);
    /* wide: cannot */
    s = stat_of(0, log(0.8), log(1.3));
    assert_int_equal(cal_gate_decide(&s, 0, b, 0.5, 0.5, a), CAL_GATE_CANNOT);
    /* unbounded CI and NAN estimate: cannot */
    s = stat_of(NAN, -INFINITY, INFINITY);
    assert_int_equal(cal_gate_decide(&s, 0, b, 1, 1, a), CAL_GATE_CANNOT);
    /* bad bound */
    s = stat_of(0, -0.01, 0.01);
    assert_int_equal(cal_gate_decide(&s, 0, 0, 1, 1, a), CAL_GATE_CANNOT);
    assert_int_equal(cal_gate_decide(&s, 0, 1.5, 1, 1, a), CAL_GATE_CANNOT);
    /* pairs needed: a CI twice too wide needs about four times the pairs */
    s = stat_of(0, -0.1, 0.1);
    size_t need = cal_gate_pairs_needed(&s, 0.05);
    assert_true(need >= 40 && need <= 50);
}

static void test_metric_names(void **state)
{
    (void)state;
    char err[400];
    assert_int_equal(cal_gate_metric_find("p99_ttft_ms", err, sizeof err), CAL_M_TTFT_P99);
    assert_int_equal(cal_gate_metric_find("ttft_p99", err, sizeof err), CAL_M_TTFT_P99);
    assert_int_equal(cal_gate_metric_find("itl_p50", err, sizeof err), CAL_M_ITL_P50);
    assert_int_equal(cal_gate_metric_find("e2el_p99", err, sizeof err), CAL_M_E2E_P99);
    assert_int_equal(cal_gate_metric_find("decode_p50", err, sizeof err), CAL_M_DECODE_TOKS);
    assert_int_equal(cal_gate_metric_find("decode_tps", err, sizeof err), CAL_M_DECODE_TOKS);
    assert_int_equal(cal_gate_metric_find("request_p50", err, sizeof err), CAL_M_REQ_TOKS);
    assert_int_equal(cal_gate_metric_find("nosuch", err, sizeof err), -1);
    assert_non_null(strstr(err, "nosuch"));
    assert_int_equal(cal_gate_metric_find("p9", err, sizeof err), -1);
    assert_non_null(strstr(err, "more than one"));
    assert_int_equal(cal_gate_metric_find("", err, sizeof err), -1);
}

static void test_parse_bounds(void **state)
{
    (void)state;
    cal_gate_bound b[CAL_GATE_MAX_BOUNDS];
    size_t n;
    char err[600];
    assert_int_equal(cal_gate_parse_bounds("decode_tps<-3%, ttft_p99 > +10 %", b, 16, &n, err, sizeof err), CAL_OK);
    assert_int_equal(n, 2);
    assert_int_equal(b[0].metric, CAL_M_DECODE_TOKS);
    NEAR(b[0].bound, 0.03, 1e-12);
    assert_int_equal(b[1].metric, CAL_M_TTFT_P99);
    NEAR(b[1].bound, 0.10, 1e-12);
    /* the spelling a bound is written back in parses to the same bound */
    char spec[64];
    cal_gate_bound_spec(&b[1], spec, sizeof spec);
    assert_string_equal(spec, "p99_ttft_ms>+10%");
    /* malformed specs: each refused, the message naming the item */
    static const struct { const char *spec, *says; } BAD[] = {
        {"", "empty"},
        {"decode_tps<-3%,,ttft_p99>+10%", "empty item"},
        {"decode_tps", "no < or >"},
        {"ttft_p99<-10%", "lower is better"},
        {"decode_tps>+3%", "higher is better"},
        {"decode_tps<3%", "negative"},
        {"ttft_p99>-10%", "positive"},
        {"decode_tps<-nan%", "finite percentage"},
        {"decode_tps<-inf%", "finite percentage"},
        {"decode_tps<-1e400%", "finite percentage"},
        {"decode_tps<-0%", "finite percentage"},
        {"decode_tps<-100%", "finite percentage"},
        {"decode_tps<-5", "percentage"},
        {"decode_tps<-5%x", "percentage"},
        {"decode_tps<%", "no number"},
        {"completed<-5%", "no better direction"},
        {"clock_mhz_mean<-5%", "no better direction"},
        {"nosuch<-5%", "not a metric"},
        {"p9<-5%", "more than one metric"},
        {"decode_tps<-3%,decode_tps_median<-4%", "bounded twice"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        err[0] = 0;
        int rc = cal_gate_parse_bounds(BAD[i].spec, b, 16, &n, err, sizeof err);
        if (rc != CAL_EINVAL || !strstr(err, BAD[i].says))
            fail_msg("spec \"%s\": rc %d, message \"%s\" (wanted \"%s\")", BAD[i].spec, rc, err, BAD[i].says);
    }
    /* more items than room */
    assert_int_equal(cal_gate_parse_bounds("decode_tps<-3%,ttft_p99>+10%", b, 1, &n, err, sizeof err),
                     CAL_EINVAL);
    /* the defaults: each box's, every one with a better direction */
    size_t nc = cal_gate_default_bounds(CAL_GATE_BOX_CPU, b, 16);
    assert_true(nc >= 2);
    for (size_t i = 0; i < nc; i++) {
        assert_int_not_equal(cal_metric_get(b[i].metric)->better, CAL_BETTER_NONE);
        assert_true(b[i].bound > 0 && b[i].bound < 1);
    }
    cal_gate_bound g[16];
    size_t ng = cal_gate_default_bounds(CAL_GATE_BOX_GPU, g, 16);
    assert_true(ng >= nc);
    /* a dedicated GPU box holds every metric the CPU box bounds, tighter */
    for (size_t i = 0; i < nc; i++) {
        size_t k = 0;
        while (k < ng && g[k].metric != b[i].metric) k++;
        assert_true(k < ng);
        assert_true(g[k].bound < b[i].bound);
    }
}

/* A constructed paired input: n pairs; metric m of B is A's times
 * ratio[m] times a small deterministic wobble of amplitude wob[m]. */
static cal_gate_input *paired_input(size_t n, const double *ratio, const double *wob)
{
    cal_gate_input *in = calloc(1, sizeof *in);
    assert_non_null(in);
    in->design = CAL_GATE_PAIRED;
    snprintf(in->base_label, sizeof in->base_label, "A");
    snprintf(in->cand_label, sizeof in->cand_label, "B <&\"'>|");
    in->cells = calloc(1, sizeof *in->cells);
    in->n_cells = 1;
    cal_gate_cell *c = &in->cells[0];
    cal_fp_init(&c->fp);
    snprintf(c->name, sizeof c->name, "c1 · 64 tok · warm 2–%zu", n + 1);
    c->n_pairs = n;
    c->a = calloc(n, sizeof *c->a);
    c->b = calloc(n, sizeof *c->b);
    for (size_t i = 0; i < n; i++) {
        c->shot[i] = (int)i + 2;
        for (int m = 0; m < CAL_M__N; m++) {
            double w = sin(1.7 * (double)i + m) * wob[m];
            c->a[i][m] = 100 + 5 * (double)(i % 3);
            c->b[i][m] = c->a[i][m] * ratio[m] * exp(w);
        }
    }
    return in;
}

static void test_eval_known_effects(void **state)
{
    (void)state;
    double ratio[CAL_M__N], wob[CAL_M__N];
    for (int m = 0; m < CAL_M__N; m++) { ratio[m] = 1; wob[m] = 0.005; }
    ratio[CAL_M_DECODE_TOKS] = 0.80;          /* decode 20 % slower */
    wob[CAL_M_TTFT_P50] = 0.5;                /* TTFT too noisy to say */
    ratio[CAL_M_E2E_P50] = 0.85;              /* latency 15 % lower: better */
    cal_gate_input *in = paired_input(12, ratio, wob);
    cal_gate_bound b[8];
    size_t nb;
    char err[400];
    assert_int_equal(cal_gate_parse_bounds("decode_tps<-5%,per_request<-5%,ttft_p50>+5%,e2el_p50>+5%",
                                           b, 8, &nb, err, sizeof err), CAL_OK);
    cal_gate_outcome *o = NULL;
    assert_int_equal(cal_gate_eval(in, b, nb, 0.05, &o), CAL_OK);
    assert_int_equal(o->n_cases, 4);
    assert_int_equal(o->cases[0].kind, CAL_GATE_REGRESSION);
    NEAR(o->cases[0].effect, -0.20, 0.01);
    assert_true(o->cases[0].p_worse_adj <= 0.05);
    assert_int_equal(o->cases[1].kind, CAL_GATE_NO_CHANGE);
    assert_int_equal(o->cases[2].kind, CAL_GATE_CANNOT);
    assert_non_null(strstr(o->cases[2].text, "cannot judge"));
    assert_int_equal(o->cases[3].kind, CAL_GATE_IMPROVEMENT);
    assert_int_equal(o->verdict, CAL_GATE_FAIL);
    assert_non_null(strstr(o->summary, "decode tok/s"));

    /* the outputs: JUnit counts, escaping; Markdown one row per case; JSON */
    cal_buf x = CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_gate_write_junit(in, o, 0, &x), CAL_OK);
    assert_non_null(strstr(x.data, "tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"1\""));
    assert_non_null(strstr(x.data, "B &lt;&amp;&quot;&apos;&gt;|"));
    assert_non_null(strstr(x.data, "classname=\"caliper.gate.decode_tps_median\""));
    cal_buf_free(&x);
    x = (cal_buf)CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_gate_write_junit(in, o, 1, &x), CAL_OK);
    assert_non_null(strstr(x.data, "failures=\"2\" errors=\"0\" skipped=\"0\""));
    assert_non_null(strstr(x.data, "type=\"cannot_judge\""));
    cal_buf_free(&x);
    x = (cal_buf)CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_gate_write_md(in, o, &x), CAL_OK);
    size_t rows = 0;
    for (const char *p = x.data; (p = strstr(p, "\n| ")); p++) rows++;
    assert_int_equal(rows, 1 + 4);   /* the head and one row per case */
    assert_non_null(strstr(x.data, "B &lt;&amp;&quot;'&gt;\\|"));
    cal_buf_free(&x);
    x = (cal_buf)CAL_BUF_INIT(1 << 20);
    assert_int_equal(cal_gate_write_json(in, o, &x), CAL_OK);
    assert_non_null(strstr(x.data, "\"verdict\": \"fail\""));
    assert_non_null(strstr(x.data, "\"answer\": \"regression\""));
    cal_buf_free(&x);
    cal_gate_outcome_free(&o);
    assert_null(o);

    /* the same build against itself: never a regression */
    for (int m = 0; m < CAL_M__N; m++) { ratio[m] = 1; wob[m] = 0.01; }
    cal_gate_input *aa = paired_input(12, ratio, wob);
    assert_int_equal(cal_gate_eval(aa, b, nb, 0.05, &o), CAL_OK);
    assert_int_equal(o->n_regression, 0);
    assert_int_equal(o->verdict, CAL_GATE_PASS);
    cal_gate_outcome_free(&o);
    /* too few pairs: cannot judge, saying how many */
    cal_gate_input *few = paired_input(3, ratio, wob);
    assert_int_equal(cal_gate_eval(few, b, nb, 0.05, &o), CAL_OK);
    assert_int_equal(o->verdict, CAL_GATE_UNDECIDED);
    assert_non_null(strstr(o->cases[0].text, "measure at least"));
    cal_gate_outcome_free(&o);
    /* no bounds, a bad alpha */
    assert_int_equal(cal_gate_eval(aa, b, 0, 0.05, &o), CAL_EINVAL);
    assert_int_equal(cal_gate_eval(aa, b, nb, 0.7, &o), CAL_EINVAL);
    cal_gate_input_free(&in);
    cal_gate_input_free(&aa);
    cal_gate_input_free(&few);
    assert_null(in);
}

/* Separate runs: no noise, cannot; with noise, the t test decides. */
static void test_eval_runs(void **state)
{
    (void)state;
    cal_gate_input *in = calloc(1, sizeof *in);
    in->design = CAL_GATE_RUNS;
    in->cells = calloc(1, sizeof *in->cells);
    in->n_cells = 1;
    cal_gate_cell *c = &in->cells[0];
    cal_fp_init(&c->fp);
    for (int m = 0; m < CAL_M__N; m++) {
        c->level_a[m] = 100;
        c->level_b[m] = 70;
        c->noise_sd[m] = NAN;
        c->noise_df[m] = 0;
    }
    snprintf(in->noise, sizeof in->noise, "a file holds one run");
    cal_gate_bound b = {.metric = CAL_M_DECODE_TOKS, .bound = 0.05};
    cal_gate_outcome *o = NULL;
    assert_int_equal(cal_gate_eval(in, &b, 1, 0.05, &o), CAL_OK);
    assert_int_equal(o->cases[0].kind, CAL_GATE_CANNOT);
    assert_non_null(strstr(o->cases[0].text, "a file holds one run"));
    cal_gate_outcome_free(&o);
    c->noise_sd[CAL_M_DECODE_TOKS] = 0.02;
    c->noise_df[CAL_M_DECODE_TOKS] = 8;
    assert_int_equal(cal_gate_eval(in, &b, 1, 0.05, &o), CAL_OK);
    assert_int_equal(o->cases[0].kind, CAL_GATE_REGRESSION);
    assert_int_equal(o->cases[0].stat.method, CAL_GATE_T);
    cal_gate_outcome_free(&o);
    cal_gate_input_free(&in);
}

/* The trend's robust run-to-run scale: a real step counts once. */
static void test_trend_noise(void **state)
{
    (void)state;
    double x[12], sd, df;
    for (int i = 0; i < 12; i++) x[i] = 100 * exp(0.02 * sin(2.1 * i));
    assert_true(cal_trend_noise_of(x, 12, &sd, &df));
    double quiet = sd;
    for (int i = 6; i < 12; i++) x[i] *= 0.7;   /* a 30 % step between runs 6 and 7 */
    assert_true(cal_trend_noise_of(x, 12, &sd, &df));
    assert_true(sd < 1.5 * quiet);              /* the step did not become noise */
    assert_true(df >= 1 && df <= 11);
    assert_false(cal_trend_noise_of(x, 2, &sd, &df));   /* one difference: none */
    /* the steps of such a series: the step is the one regression */
    cal_trend t;
    memset(&t, 0, sizeof t);
    t.pts = calloc(12, sizeof *t.pts);
    t.n = 12;
    for (int i = 0; i < 12; i++) {
        for (int m = 0; m < CAL_M__N; m++) t.pts[i].v[m] = NAN;
        t.pts[i].v[CAL_M_REQ_TOKS] = x[i];
    }
    cal_trend_step st[12];
    assert_int_equal(cal_trend_steps(&t, CAL_M_REQ_TOKS, 0.10, 0.05, st), CAL_OK);
    for (int i = 1; i < 12; i++)
        assert_int_equal(st[i].kind == CAL_GATE_REGRESSION, i == 6);
    char spark[128];
    cal_trend_sparkline(&t, CAL_M_REQ_TOKS, spark, sizeof spark);
    assert_int_equal(strlen(spark), 12 * 3);   /* one 3-byte glyph a run */
    assert_int_equal(cal_trend_steps(&t, CAL_M_COMPLETED, 0.10, 0.05, st), CAL_EINVAL);
    cal_trend_free(&t);
}

/* The simulation bench/gate prints: seeded, so the same answers each time;
 * at no change the gate never fails on these seeds, at a drop of 4× the
 * bound it fails every time. */
static void test_simulation_machinery(void **state)
{
    (void)state;
    cal_gate_bound b[8];
    size_t nb = cal_gate_default_bounds(CAL_GATE_BOX_CPU, b, 8);
    gsim x = {.seed = 7, .m = {.tau = 0.02, .burst_p = 0.1, .burst_mean = 0.2, .sigma = 0.01, .proc_sd = 0.005, .pairs = 15}};
    int fails0 = 0, fails4 = 0;
    for (int r = 0; r < 20; r++) {
        cal_gate_verdict v;
        assert_int_equal(gsim_run(&x, 0, b, nb, 0.05, &v, NULL), CAL_OK);
        fails0 += v == CAL_GATE_FAIL;
        assert_int_equal(gsim_run(&x, 0.40, b, nb, 0.05, &v, NULL), CAL_OK);
        fails4 += v == CAL_GATE_FAIL;
    }
    assert_int_equal(fails0, 0);
    assert_int_equal(fails4, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signed_rank_brute_force),
        cmocka_unit_test(test_signed_rank_edges),
        cmocka_unit_test(test_t_and_holm),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_metric_names),
        cmocka_unit_test(test_parse_bounds),
        cmocka_unit_test(test_eval_known_effects),
        cmocka_unit_test(test_eval_runs),
        cmocka_unit_test(test_trend_noise),
        cmocka_unit_test(test_simulation_machinery),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
